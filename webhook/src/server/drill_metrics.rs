//! Per-shard drill gauges, rebuilt from the cached snapshots' `vtsnap.io/drill` records at
//! each scrape (docs/drill.md): a drill is a CronJob whose Pod is gone before any scrape,
//! and a value read from the cache each time cannot drift from it.

use std::sync::atomic::AtomicU64;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use vtsnap_core::metrics::ShardLabels;
use vtsnap_core::shard::ShardRef;
use vtsnap_core::snapshot::{DrillRecord, DrillResult, DrillSeen, Rto};

/// What the gauges show of one shard.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct ShardDrills {
    /// The newest record that can have happened, and whether it passed.
    newest: Option<(Timestamp, DrillResult)>,
    /// The newest pass that can have happened, and its RTO.
    passed: Option<(Timestamp, Option<Rto>)>,
}

/// Failed sorts after passed: at the same time, a failure is the shard's last result.
fn result_rank(r: DrillResult) -> u8 {
    match r {
        DrillResult::Passed => 0,
        DrillResult::Failed => 1,
    }
}

impl ShardDrills {
    /// A record that counts (made for its snapshot, not from the future: a failure
    /// dated there would hide every later drill until that time).
    fn add(&mut self, r: &DrillRecord) {
        if r.result == DrillResult::Passed {
            let total = |p: &(Timestamp, Option<Rto>)| (p.0, p.1.map(|x| x.total_ms()));
            let this = (r.at, r.rto);
            // Same time: the slower RTO, so the gauge never flatters.
            if self.passed.is_none_or(|p| total(&this) > total(&p)) {
                self.passed = Some(this);
            }
        }
        let key = |(at, res): (Timestamp, DrillResult)| (at, result_rank(res));
        if self.newest.is_none_or(|n| key((r.at, r.result)) > key(n)) {
            self.newest = Some((r.at, r.result));
        }
    }
}

/// The three per-shard drill families. Every series is replaced at each scrape.
#[derive(Debug, Default)]
pub(super) struct DrillMetrics {
    last_passed: Family<ShardLabels, Gauge>,
    last_result: Family<ShardLabels, Gauge>,
    last_rto: Family<ShardLabels, Gauge<f64, AtomicU64>>,
}

impl DrillMetrics {
    /// Help texts without their full stop: the library appends it.
    pub(super) fn register(&self, r: &mut Registry) {
        r.register(
            "vtsnap_drill_last_passed_timestamp_seconds",
            "When the shard's newest passed drill ended (from its cached snapshots)",
            self.last_passed.clone(),
        );
        r.register(
            "vtsnap_drill_last_result",
            "1 if the shard's newest drill passed, 0 if it failed",
            self.last_result.clone(),
        );
        r.register(
            "vtsnap_drill_last_rto_seconds",
            "The measured restore time of the shard's newest passed drill",
            self.last_rto.clone(),
        );
    }

    /// Replaces every series with those of `shards` (each with its snapshots' records);
    /// the caller keeps other renders out until the text is encoded.
    pub(super) fn set(&self, shards: &[(ShardRef, Vec<DrillSeen>)], now: Timestamp) {
        self.last_passed.clear();
        self.last_result.clear();
        self.last_rto.clear();
        for (shard, records) in shards {
            let Some(labels) = ShardLabels::of(shard) else {
                continue;
            };
            let mut d = ShardDrills::default();
            for r in records.iter().filter_map(|r| r.standing(now).ok()) {
                d.add(r);
            }
            if let Some((_, result)) = d.newest {
                self.last_result
                    .get_or_create(&labels)
                    .set(i64::from(result == DrillResult::Passed));
            }
            if let Some((at, rto)) = d.passed {
                self.last_passed.get_or_create(&labels).set(at.as_second());
                if let Some(rto) = rto {
                    let s = Duration::from_millis(rto.total_ms()).as_secs_f64();
                    self.last_rto.get_or_create(&labels).set(s);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::jiff::SignedDuration;
    use kube::api::DynamicObject;
    use kube::runtime::watcher::Event;
    use vtsnap_core::snapshot::DrillOf;
    use vtsnap_testkit::operator_objects::operator_shard;
    use vtsnap_testkit::prom_parse::{Format, Kind, parse};

    use super::*;
    use crate::cache::Caches;
    use crate::server::Metrics;

    const PASSED: &str = "vtsnap_drill_last_passed_timestamp_seconds";
    const RESULT: &str = "vtsnap_drill_last_result";
    const RTO: &str = "vtsnap_drill_last_rto_seconds";

    fn now() -> Timestamp {
        "2026-12-05T12:00:00Z".parse().unwrap()
    }

    fn hours(h: i64) -> Timestamp {
        now().checked_add(SignedDuration::from_hours(h)).unwrap()
    }

    fn passed(at: Timestamp, rto_ms: [u64; 3]) -> Option<DrillRecord> {
        let [pvc_bound_ms, restore_ms, mysqld_ready_ms] = rto_ms;
        let rto = Rto {
            pvc_bound_ms,
            restore_ms,
            mysqld_ready_ms,
        };
        Some(DrillRecord::passed(
            &unbound(),
            at,
            rto,
            Some("drill-1".into()),
        ))
    }

    fn failed(at: Timestamp) -> Option<DrillRecord> {
        Some(DrillRecord::failed(
            &unbound(),
            at,
            "table t1 corrupt",
            None,
            None,
        ))
    }

    /// What the records above name until [`snap`] binds them to their snapshot.
    fn unbound() -> DrillOf {
        DrillOf {
            uid: "not-yet".into(),
            cut: hours(-200),
        }
    }

    /// A ready snapshot of `commerce/<shard>` (in `vitess`), with `drill` made for it.
    fn snap(name: &str, keyspace: &str, shard: &str, drill: Option<DrillRecord>) -> DynamicObject {
        let mut s = operator_shard()
            .named(keyspace, shard)
            .snapshot(name, hours(-100));
        let of = s.drill_of();
        s.drill = drill.map(|d| {
            DrillRecord {
                snapshot_uid: of.uid.clone(),
                cut: of.cut,
                ..d
            }
            .render()
        });
        serde_json::from_value(s.object()).unwrap()
    }

    /// Round three, item 1: a record copied from another snapshot, or dated before its
    /// snapshot's cut, makes no series.
    #[test]
    fn a_record_not_made_for_its_snapshot_counts_for_nothing() {
        let good = snap("a1", "commerce", "-80", passed(hours(-50), [1, 1, 1]));
        let mut copied = snap("a2", "commerce", "-80", None);
        let a1_record =
            good.metadata.annotations.as_ref().unwrap()[vtsnap_core::snapshot::ANN_DRILL].clone();
        copied
            .metadata
            .annotations
            .get_or_insert_default()
            .insert(vtsnap_core::snapshot::ANN_DRILL.into(), a1_record.clone());
        // The copy claims a pass an hour ago; a1's own record says 50 hours ago.
        let fresher = a1_record.replace(&hours(-50).to_string(), &hours(-1).to_string());
        copied
            .metadata
            .annotations
            .get_or_insert_default()
            .insert(vtsnap_core::snapshot::ANN_DRILL.into(), fresher);
        let before_cut = snap("b1", "commerce", "80-", passed(hours(-150), [1, 1, 1]));
        let got = scrape(&Metrics::default(), &caches(&[good, copied, before_cut]));
        assert_eq!(got[PASSED], series(&[("commerce/-80", secs(hours(-50)))]));
        assert_eq!(got[RESULT], series(&[("commerce/-80", 1.0)]));
    }

    fn caches(snaps: &[DynamicObject]) -> Caches {
        let c = Caches::fed_by_hand(&["vitess"]);
        for s in snaps {
            c.apply_snapshot("vitess", &Event::Apply(s.clone()));
        }
        c
    }

    /// Each drill family's samples, by `keyspace/shard`; every sample labelled with the
    /// whole shard and nothing else.
    fn scrape(m: &Metrics, c: &Caches) -> BTreeMap<&'static str, BTreeMap<String, f64>> {
        let text = m.render_at(c, now());
        let e = parse(&text, Format::OpenMetrics).unwrap_or_else(|e| panic!("{e}\n{text}"));
        [PASSED, RESULT, RTO]
            .into_iter()
            .map(|name| {
                let samples = e.family(name).map_or(BTreeMap::new(), |f| {
                    assert_eq!(f.kind, Kind::Gauge, "{text}");
                    f.samples
                        .iter()
                        .map(|s| {
                            let l = &s.labels;
                            assert_eq!(l.len(), 4, "{text}");
                            assert_eq!((&*l["namespace"], &*l["cluster"]), ("vitess", "example"));
                            (format!("{}/{}", l["keyspace"], l["shard"]), s.value)
                        })
                        .collect()
                });
                (name, samples)
            })
            .collect()
    }

    fn series(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
    }

    fn secs(t: Timestamp) -> f64 {
        t.as_second() as f64
    }

    #[test]
    fn the_newest_pass_and_the_newest_result_of_each_shard() {
        let c = caches(&[
            // -80: passed a day ago, failed since: last result 0, the pass still shown.
            snap("a1", "commerce", "-80", passed(hours(-50), [1, 1, 1])),
            snap(
                "a2",
                "commerce",
                "-80",
                passed(hours(-26), [1200, 80, 3000]),
            ),
            snap("a3", "commerce", "-80", failed(hours(-2))),
            // 80-: failed, then passed.
            snap("b1", "commerce", "80-", failed(hours(-30))),
            snap("b2", "commerce", "80-", passed(hours(-3), [51, 16, 404])),
            // A pass and a failure at the same time: the failure is the last result.
            snap("c1", "customer", "-", passed(hours(-4), [10, 10, 10])),
            snap("c2", "customer", "-", failed(hours(-4))),
        ]);
        let got = scrape(&Metrics::default(), &c);
        assert_eq!(
            got[PASSED],
            series(&[
                ("commerce/-80", secs(hours(-26))),
                ("commerce/80-", secs(hours(-3))),
                ("customer/-", secs(hours(-4))),
            ])
        );
        assert_eq!(
            got[RESULT],
            series(&[
                ("commerce/-80", 0.0),
                ("commerce/80-", 1.0),
                ("customer/-", 0.0)
            ])
        );
        assert_eq!(
            got[RTO],
            series(&[
                ("commerce/-80", 4.28),
                ("commerce/80-", 0.471),
                ("customer/-", 0.03),
            ])
        );
    }

    #[test]
    fn a_record_from_the_future_counts_for_nothing() {
        let skew_minutes = vtsnap_core::snapshot::CLOCK_SKEW.as_mins();
        let just_within = now()
            .checked_add(SignedDuration::from_mins(skew_minutes - 1))
            .unwrap();
        let c = caches(&[
            // A pass an hour ahead is no pass, nor the newest result.
            snap("a1", "commerce", "-80", passed(hours(1), [1, 1, 1])),
            snap("a2", "commerce", "-80", failed(hours(-5))),
            // Within clock skew: a pass.
            snap("b1", "commerce", "80-", passed(just_within, [1000, 0, 0])),
            // Only a pass from the future: nothing.
            snap("c1", "commerce", "-", passed(hours(24 * 365), [1, 1, 1])),
            // A failure from the future does not hide the pass before it.
            snap("d1", "customer", "-", failed(hours(2))),
            snap("d2", "customer", "-", passed(hours(-1), [0, 2000, 0])),
        ]);
        let got = scrape(&Metrics::default(), &c);
        assert_eq!(
            got[PASSED],
            series(&[
                ("commerce/80-", secs(just_within)),
                ("customer/-", secs(hours(-1))),
            ])
        );
        assert_eq!(
            got[RESULT],
            series(&[
                ("commerce/-80", 0.0),
                ("commerce/80-", 1.0),
                ("customer/-", 1.0)
            ])
        );
        assert_eq!(
            got[RTO],
            series(&[("commerce/80-", 1.0), ("customer/-", 2.0)])
        );
    }

    #[test]
    fn a_shard_without_a_readable_drill_has_no_drill_series() {
        let mut unreadable = snap("a2", "commerce", "-80", None);
        unreadable
            .metadata
            .annotations
            .get_or_insert_default()
            .insert(
                vtsnap_core::snapshot::ANN_DRILL.into(),
                "{\"result\":".into(),
            );
        let c = caches(&[
            snap("a1", "commerce", "-80", None),
            unreadable,
            snap("b1", "commerce", "80-", failed(hours(-1))),
        ]);
        let got = scrape(&Metrics::default(), &c);
        assert_eq!(got[RESULT], series(&[("commerce/80-", 0.0)]));
        assert!(got[PASSED].is_empty() && got[RTO].is_empty(), "{got:?}");
        // No drill anywhere: the families are not shown at all.
        let text =
            Metrics::default().render_at(&caches(&[snap("a1", "commerce", "-80", None)]), now());
        assert!(!text.contains("vtsnap_drill_"), "{text}");
    }

    #[test]
    fn a_shard_whose_snapshots_leave_the_cache_loses_its_series() {
        let a = snap("a1", "commerce", "-80", passed(hours(-3), [1, 1, 1]));
        let b = snap("b1", "commerce", "80-", passed(hours(-3), [1, 1, 1]));
        let b_failed = snap("b2", "commerce", "80-", failed(hours(-1)));
        let c = caches(&[a.clone(), b, b_failed.clone()]);
        let m = Metrics::default();
        let got = scrape(&m, &c);
        assert_eq!(
            got[RESULT],
            series(&[("commerce/-80", 1.0), ("commerce/80-", 0.0)])
        );
        // The failed drill's snapshot deleted: the shard's last result is the pass again.
        c.apply_snapshot("vitess", &Event::Delete(b_failed));
        let got = scrape(&m, &c);
        assert_eq!(
            got[RESULT],
            series(&[("commerce/-80", 1.0), ("commerce/80-", 1.0)])
        );
        // The last snapshot of -80 deleted: none of its series is left.
        c.apply_snapshot("vitess", &Event::Delete(a));
        let got = scrape(&m, &c);
        for name in [PASSED, RESULT, RTO] {
            assert_eq!(
                got[name].keys().collect::<Vec<_>>(),
                ["commerce/80-"],
                "{name}"
            );
        }
        // A relist that no longer has it: gone too.
        for e in [Event::Init, Event::InitDone] {
            c.apply_snapshot("vitess", &e);
        }
        let text = m.render_at(&c, now());
        assert!(!text.contains("vtsnap_drill_"), "{text}");
    }

    #[test]
    fn hostile_label_values_make_no_series() {
        let mut long = snap("x1", "commerce", "-80", failed(hours(-1)));
        let mut odd = snap("x2", "commerce", "-80", failed(hours(-1)));
        for (o, value) in [
            (&mut long, "c".repeat(64)),
            (&mut odd, "a\"b\nc".to_owned()),
        ] {
            o.metadata
                .labels
                .get_or_insert_default()
                .insert(vtsnap_core::shard::LABEL_CLUSTER.into(), value);
        }
        let c = caches(&[long, odd, snap("a1", "commerce", "80-", failed(hours(-1)))]);
        // Only the well-named shard (`scrape` checks every sample's cluster is `example`).
        let got = scrape(&Metrics::default(), &c);
        assert_eq!(got[RESULT], series(&[("commerce/80-", 0.0)]));
    }
}
