//! `run`: one snapshot of one shard (DESIGN §5.1 cold, §5.2 online).
//!
//! observe (config, shard, existing fence — an expired one is recovered first) → decide
//! (target, or a refusal) → act (fence, quiesce, cut, unfence, wait for ready) → report
//! (one JSON summary, exit code). Every path after the fence is taken ends in the unfence,
//! whose steps are each attempted even if an earlier one failed; a fence that cannot be
//! fully released is left to expire, so the node helper (or the next run, or the GC)
//! recovers it — exit 4.

pub mod fence;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use serde::Serialize;
use serde_json::{Value, json};
use vtsnap_core::config::{Config, Mode, ResolvedPolicy, WaitFor};
use vtsnap_core::discover;
use vtsnap_core::fence::client::{self as fence_client, FenceClientError, FenceSpec};
use vtsnap_core::fence::{NodeState, Request, lease_name};
use vtsnap_core::naming::KeyRange;
use vtsnap_core::select::Target;
use vtsnap_core::shard::ShardRef;
use vtsnap_core::snapshot::{self, NewSnapshot, Phase, SnapshotStatus};
use vtsnap_core::vtctld::client::CallLimits;
use vtsnap_core::vtctld::{TabletType, VtctldClient};

use crate::exit;
use fence::LiveFence;
use vtsnap_core::events;

/// How a run behaves beyond the config.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub mode: Option<Mode>,
    pub dry_run: bool,
    /// The job's identity on the lease (its pod name).
    pub holder: String,
    pub lease_duration: Duration,
    /// How long to wait for the node helper to answer a request.
    pub node_timeout: Duration,
    /// How often snapshot status is read.
    pub poll: Duration,
    /// Tests only: called with each step's name; returning true parks the run there for
    /// ever, so a test can abort it exactly after that step (as a killed job).
    pub park_after: Option<ParkHook>,
}

/// See [`RunOptions::park_after`].
#[derive(Clone)]
pub struct ParkHook(pub std::sync::Arc<dyn Fn(&str) -> bool + Send + Sync>);

impl std::fmt::Debug for ParkHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ParkHook")
    }
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            mode: None,
            dry_run: false,
            holder: std::env::var("HOSTNAME").unwrap_or_else(|_| "vtsnap-snapshot".into()),
            lease_duration: Duration::from_secs(30),
            node_timeout: Duration::from_secs(600),
            poll: Duration::from_secs(1),
            park_after: None,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ErrorReport {
    pub code: &'static str,
    pub message: String,
}

/// The one JSON line printed at exit.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Summary {
    pub outcome: &'static str,
    pub exit_code: u8,
    pub shard: String,
    pub mode: &'static str,
    pub dry_run: bool,
    pub target: Option<String>,
    pub snapshot: Option<String>,
    pub gtid: Option<String>,
    pub fence_window_ms: Option<u64>,
    pub cut_latency_ms: Option<u64>,
    pub ready_latency_ms: Option<u64>,
    pub phase: Option<&'static str>,
    pub recovered_fence: Option<String>,
    pub error: Option<ErrorReport>,
    pub steps: Vec<String>,
}

/// Why a run stopped early.
#[derive(Debug)]
enum Stop {
    Usage(&'static str, String),
    Refused(&'static str, String),
    Failed(&'static str, String),
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn snapshots_api(kube: &kube::Client, ns: &str) -> Api<DynamicObject> {
    snapshot::api(kube, ns)
}

struct Job<'a> {
    kube: kube::Client,
    opts: &'a RunOptions,
    shard: ShardRef,
    policy: ResolvedPolicy,
    mode: Mode,
    vtctld: VtctldClient,
    summary: Summary,
    /// The target's type before the run (what the unfence restores).
    original: TabletType,
    target: Option<Target>,
    /// mysqld's version string, from GetFullStatus.
    version: String,
}

/// Runs one snapshot; never panics, always returns a summary with its exit code.
pub async fn run(
    config: &Config,
    cluster: &str,
    keyspace: &str,
    shard: &str,
    opts: &RunOptions,
    kube: kube::Client,
) -> Summary {
    let mut summary = Summary {
        shard: format!("{cluster}/{keyspace}/{shard}"),
        dry_run: opts.dry_run,
        ..Summary::default()
    };
    let job = match prepare(config, cluster, keyspace, shard, opts, kube).await {
        Ok(j) => j,
        Err(stop) => return finish(summary, Err(stop)),
    };
    summary = Summary {
        mode: mode_str(job.mode),
        ..summary
    };
    let mut job = Job { summary, ..job };
    let result = job.execute().await;
    let s = std::mem::take(&mut job.summary);
    finish(s, result)
}

fn mode_str(m: Mode) -> &'static str {
    match m {
        Mode::Cold => "cold",
        Mode::Online => "online",
    }
}

fn finish(mut s: Summary, result: Result<Option<u8>, Stop>) -> Summary {
    let (outcome, code, err) = match result {
        Ok(None) => ("done", exit::OK, None),
        Ok(Some(4)) => ("failed-unfence-incomplete", 4, s.error.take()),
        Ok(Some(c)) => ("failed", c, s.error.take()),
        Err(Stop::Usage(c, m)) => (
            "usage",
            exit::USAGE,
            Some(ErrorReport {
                code: c,
                message: m,
            }),
        ),
        Err(Stop::Refused(c, m)) => (
            "refused",
            exit::REFUSED,
            Some(ErrorReport {
                code: c,
                message: m,
            }),
        ),
        Err(Stop::Failed(c, m)) => (
            "failed",
            exit::FAILED,
            Some(ErrorReport {
                code: c,
                message: m,
            }),
        ),
    };
    s.outcome = outcome;
    s.exit_code = code;
    s.error = err;
    s
}

async fn prepare<'a>(
    config: &Config,
    cluster: &str,
    keyspace: &str,
    shard: &str,
    opts: &'a RunOptions,
    kube: kube::Client,
) -> Result<Job<'a>, Stop> {
    let cl = config
        .cluster(cluster)
        .map_err(|e| Stop::Usage("unknown-cluster", e.to_string()))?;
    let key_range: KeyRange = shard
        .parse()
        .map_err(|e: String| Stop::Usage("bad-shard", e))?;
    let policy = config
        .resolve(cluster, keyspace, shard)
        .map_err(|e| Stop::Usage("unknown-cluster", e.to_string()))?;
    let shard_ref = ShardRef {
        cluster: cluster.into(),
        namespace: cl.namespace.clone(),
        keyspace: keyspace.into(),
        shard: key_range,
    };
    let endpoint = if cl.vtctld == "auto" {
        discover::find_vtctld(&kube, &cl.namespace, cluster)
            .await
            .map_err(|e| Stop::Failed("vtctld-unavailable", e.to_string()))?
    } else {
        cl.vtctld.clone()
    };
    let vtctld = VtctldClient::new(&endpoint, CallLimits::default())
        .map_err(|e| Stop::Usage("bad-vtctld", e.to_string()))?;
    let mode = opts.mode.unwrap_or(policy.snapshot.mode);
    Ok(Job {
        kube,
        opts,
        shard: shard_ref,
        policy,
        mode,
        vtctld,
        summary: Summary::default(),
        original: TabletType::Unknown,
        target: None,
        version: String::new(),
    })
}

impl Job<'_> {
    async fn step(&mut self, s: impl Into<String>) {
        let s = s.into();
        tracing::info!(step = %s, shard = %self.shard, "step");
        let park = self.opts.park_after.as_ref().is_some_and(|f| (f.0)(&s));
        self.summary.steps.push(s);
        if park {
            std::future::pending::<()>().await;
        }
    }

    async fn event_pod(&self, reason: &str, message: &str, warning: bool) {
        if let Some(t) = &self.target {
            events::emit(
                &self.kube,
                "vtsnap-snapshot",
                &self.shard.namespace,
                &events::Subject::pod(&t.pod, &t.pod_uid),
                reason,
                message,
                warning,
            )
            .await;
        }
    }

    async fn event_snapshot(&self, name: &str, reason: &str, message: &str, warning: bool) {
        events::emit(
            &self.kube,
            "vtsnap-snapshot",
            &self.shard.namespace,
            &events::Subject::snapshot(name),
            reason,
            message,
            warning,
        )
        .await;
    }

    fn leases(&self) -> Api<Lease> {
        Api::namespaced(self.kube.clone(), &self.shard.namespace)
    }

    fn lease_name(&self) -> String {
        lease_name(
            &self.shard.cluster,
            &self.shard.keyspace,
            &self.shard.shard.safe_name(),
        )
    }

    /// Heal first: recover an expired fence; refuse a live one.
    async fn heal(&mut self) -> Result<(), Stop> {
        let name = self.lease_name();
        let existing = self
            .leases()
            .get_opt(&name)
            .await
            .map_err(|e| Stop::Failed("kubernetes-unavailable", e.to_string()))?;
        let Some(l) = existing else { return Ok(()) };
        let f = vtsnap_core::fence::Fence::from_lease(&l)
            .map_err(|e| Stop::Refused("fenced", format!("an unreadable fence exists: {e}")))?;
        if !f.expired(Timestamp::now()) {
            let holder = l
                .spec
                .as_ref()
                .and_then(|s| s.holder_identity.clone())
                .unwrap_or_default();
            return Err(Stop::Refused(
                "fenced",
                format!("shard is fenced by {holder:?} (lease {name})"),
            ));
        }
        self.step(format!("recover expired fence {name}")).await;
        let r = fence_client::recover(&self.leases(), &l, self.opts.node_timeout)
            .await
            .map_err(|e| Stop::Failed("fence-recovery-failed", e.to_string()))?;
        self.summary.recovered_fence = Some(r.lease);
        Ok(())
    }

    async fn execute(&mut self) -> Result<Option<u8>, Stop> {
        // observe
        self.heal().await?;
        let observed = discover::observe(&self.kube, &self.vtctld, &self.shard)
            .await
            .map_err(|e| Stop::Failed("discovery-failed", e.to_string()))?;
        let shard = discover::build(&self.shard, &observed);

        // decide
        let target = crate::plan::decide(&shard, &self.policy)
            .map_err(|r| Stop::Refused(r.code(), r.to_string()))?;
        self.summary.target = Some(target.alias.clone());
        let original = shard
            .tablet(&target.tablet_alias)
            .and_then(|t| t.vt_type)
            .ok_or_else(|| {
                Stop::Refused(
                    "target-type-unknown",
                    format!("{} has no type in vtctld", target.alias),
                )
            })?;
        self.original = original;
        self.target = Some(target.clone());
        if self.opts.dry_run {
            self.step(format!(
                "dry run: would snapshot {} ({} mode) on node {}",
                target.alias,
                mode_str(self.mode),
                target.node
            ))
            .await;
            return Ok(None);
        }
        if self.mode == Mode::Online {
            self.online_preconditions(&target).await?;
        }

        // act: take the fence and probe the layout through the node helper.
        let spec = FenceSpec {
            namespace: self.shard.namespace.clone(),
            name: self.lease_name(),
            holder: self.opts.holder.clone(),
            node: target.node.clone(),
            lease_duration: self.opts.lease_duration,
            target_pod: target.pod.clone(),
            target_pod_uid: target.pod_uid.clone(),
            tablet_alias: target.tablet_alias.clone(),
            original_type: original,
            vtctld: self.vtctld.endpoint().to_owned(),
            mode: mode_str(self.mode).into(),
            max_hold: self.policy.snapshot.max_hold.get(),
        };
        let lease = fence_client::acquire(&self.leases(), &spec, Request::Probe)
            .await
            .map_err(|e| match e {
                FenceClientError::Held { .. } | FenceClientError::Expired { .. } => {
                    Stop::Refused("fenced", e.to_string())
                }
                other => Stop::Failed("fence-failed", other.to_string()),
            })?;
        self.step("fence acquired").await;
        self.event_pod(
            "SnapshotFenced",
            &format!(
                "vtsnap fenced this tablet for a {} snapshot (lease {})",
                mode_str(self.mode),
                self.lease_name()
            ),
            false,
        )
        .await;
        let fence = LiveFence::start(self.leases(), &lease, self.opts.lease_duration / 3);
        if let Err(e) = fence
            .ask(Request::Probe, NodeState::Probed, self.opts.node_timeout)
            .await
        {
            let refused = matches!(e, FenceClientError::NodeRefused { .. });
            let problems = self.unfence(&fence, &target, Quiesced::default()).await;
            let msg = format!("layout probe: {e}");
            return if refused && problems.is_empty() {
                Err(Stop::Refused("layout-refused", msg))
            } else {
                self.failed("probe-failed", msg, problems)
            };
        }
        self.step("layout probed").await;
        match self.mode {
            Mode::Cold => self.cold(&fence, &target).await,
            Mode::Online => self.online(&fence, &target).await,
        }
    }

    fn failed(
        &mut self,
        code: &'static str,
        message: String,
        problems: Vec<String>,
    ) -> Result<Option<u8>, Stop> {
        if problems.is_empty() {
            Err(Stop::Failed(code, message))
        } else {
            self.summary.error = Some(ErrorReport {
                code,
                message: format!("{message}; unfence incomplete: {}", problems.join("; ")),
            });
            Ok(Some(4))
        }
    }

    async fn online_preconditions(&mut self, t: &Target) -> Result<(), Stop> {
        let fs = self
            .vtctld
            .get_full_status(&t.tablet_alias)
            .await
            .map_err(|e| Stop::Failed("vtctld-unavailable", e.to_string()))?;
        let mariadb = fs.version.to_ascii_lowercase().contains("mariadb");
        let mut vars = vec!["sync_binlog", "innodb_flush_log_at_trx_commit", "log_bin"];
        if !mariadb {
            vars.push("gtid_mode");
        }
        let q = format!(
            "SELECT {}",
            vars.iter()
                .map(|v| format!("@@global.{v}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let r = self
            .vtctld
            .execute_fetch_as_dba(&t.tablet_alias, &q, 1)
            .await
            .map_err(|e| Stop::Failed("vtctld-unavailable", e.to_string()))?;
        let cells = r.rows.first().map(|row| row.cells()).unwrap_or_default();
        let want = |v: &str| match v {
            "gtid_mode" => vec!["ON"],
            "log_bin" => vec!["1", "ON"],
            _ => vec!["1"],
        };
        let mut bad = Vec::new();
        for (i, v) in vars.iter().enumerate() {
            let got = cells.get(i).cloned().flatten().unwrap_or_default();
            if !want(v).iter().any(|w| w.eq_ignore_ascii_case(&got)) {
                bad.push(format!("{v}={got} (needs {})", want(v).join(" or ")));
            }
        }
        if !bad.is_empty() {
            return Err(Stop::Refused(
                "online-precondition",
                format!(
                    "{} is not crash-safe for an online snapshot: {}",
                    t.alias,
                    bad.join(", ")
                ),
            ));
        }
        self.version = fs.version.clone();
        self.summary.gtid = Some(
            fs.replication_status
                .map(|s| s.position)
                .unwrap_or_default(),
        );
        self.step("online preconditions hold").await;
        Ok(())
    }

    async fn cold(&mut self, fence: &LiveFence, t: &Target) -> Result<Option<u8>, Stop> {
        let start = Instant::now();
        let mut q = Quiesced::default();
        let result = async {
            self.vtctld
                .change_tablet_type(&t.tablet_alias, TabletType::Drained)
                .await
                .map_err(|e| ("drain-failed", e.to_string()))?;
            q.drained = true;
            self.step("tablet DRAINED").await;
            q.replication_stopped = true;
            self.vtctld
                .stop_replication(&t.tablet_alias)
                .await
                .map_err(|e| ("stop-replication-failed", e.to_string()))?;
            self.step("replication stopped").await;
            let fs = self
                .vtctld
                .get_full_status(&t.tablet_alias)
                .await
                .map_err(|e| ("status-failed", e.to_string()))?;
            let position = fs
                .replication_status
                .as_ref()
                .map(|s| s.position.clone())
                .unwrap_or_default();
            if position.is_empty() {
                return Err((
                    "no-position",
                    format!("{} reported no replication position", t.alias),
                ));
            }
            self.summary.gtid = Some(position.clone());
            self.version = fs.version.clone();
            q.node_acted = true;
            fence
                .ask(Request::Stop, NodeState::Stopped, self.opts.node_timeout)
                .await
                .map_err(|e| ("node-stop-failed", e.to_string()))?;
            self.step("mysqld stopped").await;
            fence
                .ask(Request::Hold, NodeState::Held, self.opts.node_timeout)
                .await
                .map_err(|e| ("node-hold-failed", e.to_string()))?;
            self.step("mysqld held").await;
            self.event_pod(
                "SnapshotQuiesced",
                &format!("mysqld stopped cleanly and held at {position}"),
                false,
            )
            .await;
            let name = self
                .create_snapshot(t, (snapshot::ANN_GTID_EXECUTED, &position))
                .await?;
            self.wait_cut(&name, start).await
        }
        .await;
        let problems = self.unfence(fence, t, q).await;
        self.summary.fence_window_ms = Some(ms(start.elapsed()));
        match result {
            Ok(name) if problems.is_empty() => {
                self.step("unfenced").await;
                self.after_cut(&name).await
            }
            Ok(name) => {
                self.label(&name, Phase::Cut, None).await;
                self.failed(
                    "unfence-incomplete",
                    "the snapshot was cut".into(),
                    problems,
                )
            }
            Err((code, msg)) => self.failed(code, msg, problems),
        }
    }

    async fn online(&mut self, fence: &LiveFence, t: &Target) -> Result<Option<u8>, Stop> {
        let start = Instant::now();
        let mut q = Quiesced::default();
        let lower = self.summary.gtid.clone().unwrap_or_default();
        let result = async {
            if self.policy.snapshot.fsfreeze {
                q.node_acted = true;
                fence
                    .ask(
                        Request::Fsfreeze,
                        NodeState::Fsfrozen,
                        self.opts.node_timeout,
                    )
                    .await
                    .map_err(|e| ("fsfreeze-failed", e.to_string()))?;
                self.step("volume frozen").await;
            }
            let name = self
                .create_snapshot(t, (snapshot::ANN_GTID_LOWER_BOUND, &lower))
                .await?;
            self.wait_cut(&name, start).await
        }
        .await;
        let problems = self.unfence(fence, t, q).await;
        self.summary.fence_window_ms = Some(if self.policy.snapshot.fsfreeze {
            ms(start.elapsed())
        } else {
            0
        });
        match result {
            Ok(name) if problems.is_empty() => self.after_cut(&name).await,
            Ok(_) => self.failed(
                "unfence-incomplete",
                "the snapshot was cut".into(),
                problems,
            ),
            Err((code, msg)) => self.failed(code, msg, problems),
        }
    }

    async fn create_snapshot(
        &mut self,
        t: &Target,
        gtid: (&'static str, &str),
    ) -> Result<String, (&'static str, String)> {
        let name = snapshot::snapshot_name(&self.shard, Timestamp::now());
        let version = self.version.clone();
        let flavor = if version.to_ascii_lowercase().contains("mariadb") {
            "mariadb"
        } else {
            "mysql"
        };
        let owner = match self.policy.deletion_policy.when_deleted {
            vtsnap_core::config::Lifecycle::Delete => self
                .cluster_uid()
                .await
                .map(|uid| (self.shard.cluster.clone(), uid)),
            vtsnap_core::config::Lifecycle::Retain => None,
        };
        let obj = snapshot::build(&NewSnapshot {
            shard: &self.shard,
            name: name.clone(),
            class: self.policy.snapshot.volume_snapshot_class_name.as_deref(),
            source_pvc: &t.pvc,
            source_tablet: &t.alias,
            source_uid: t.tablet_alias.uid.get(),
            source_node: &t.node,
            mode: mode_str(self.mode),
            gtid,
            mysql_version: &version,
            mysql_flavor: flavor,
            extra_labels: &self.policy.snapshot.labels,
            extra_annotations: &self.policy.snapshot.annotations,
            owner: owner.as_ref().map(|(n, u)| (n.as_str(), u.as_str())),
        });
        let dynobj: DynamicObject =
            serde_json::from_value(obj).map_err(|e| ("snapshot-failed", e.to_string()))?;
        snapshots_api(&self.kube, &self.shard.namespace)
            .create(&PostParams::default(), &dynobj)
            .await
            .map_err(|e| {
                (
                    "snapshot-failed",
                    format!("creating VolumeSnapshot {name}: {e}"),
                )
            })?;
        self.summary.snapshot = Some(name.clone());
        self.event_snapshot(
            &name,
            "SnapshotCreated",
            &format!(
                "{} snapshot of {} ({})",
                mode_str(self.mode),
                t.alias,
                t.pvc
            ),
            false,
        )
        .await;
        self.step(format!("VolumeSnapshot {name} created")).await;
        Ok(name)
    }

    async fn cluster_uid(&self) -> Option<String> {
        let ar = ApiResource::from_gvk(&GroupVersionKind::gvk(
            "planetscale.com",
            "v2",
            "VitessCluster",
        ));
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.kube.clone(), &self.shard.namespace, &ar);
        api.get_opt(&self.shard.cluster)
            .await
            .ok()
            .flatten()
            .and_then(|c| c.metadata.uid)
    }

    async fn status(&self, name: &str) -> Option<SnapshotStatus> {
        let o = snapshots_api(&self.kube, &self.shard.namespace)
            .get_opt(name)
            .await
            .ok()
            .flatten()?;
        Some(SnapshotStatus::of(
            &serde_json::to_value(o).unwrap_or(Value::Null),
        ))
    }

    /// Waits for the cut (or, with `waitFor: ready`, for readyToUse); `status.error` is
    /// retried until the deadline, never judged by its text.
    async fn wait_cut(
        &mut self,
        name: &str,
        fence_start: Instant,
    ) -> Result<String, (&'static str, String)> {
        let begin = Instant::now();
        let hold_left = self
            .policy
            .snapshot
            .max_hold
            .get()
            .saturating_sub(fence_start.elapsed());
        let limit = self.policy.snapshot.cut_timeout.get().min(hold_left);
        let want_ready = self.policy.snapshot.wait_for == WaitFor::Ready;
        let limit = if want_ready {
            self.policy.snapshot.ready_timeout.get().min(hold_left)
        } else {
            limit
        };
        let mut last_error = None;
        while begin.elapsed() < limit {
            if let Some(s) = self.status(name).await {
                if (want_ready && s.is_ready()) || (!want_ready && s.is_cut()) {
                    self.summary.cut_latency_ms = Some(ms(begin.elapsed()));
                    self.event_snapshot(name, "SnapshotCut", "the point in time is taken", false)
                        .await;
                    self.step(format!(
                        "snapshot {}",
                        if want_ready { "ready" } else { "cut" }
                    ))
                    .await;
                    return Ok(name.to_owned());
                }
                last_error = s.error;
            }
            tokio::time::sleep(self.opts.poll).await;
        }
        self.label(name, Phase::Failed, None).await;
        self.summary.phase = Some("failed");
        Err((
            "cut-timeout",
            format!(
                "snapshot {name} was not cut within {limit:?} (last error: {})",
                last_error.unwrap_or_else(|| "none".into())
            ),
        ))
    }

    /// Outside the fence: mark the cut, wait for readyToUse, mark ready or failed.
    async fn after_cut(&mut self, name: &str) -> Result<Option<u8>, Stop> {
        let cut = Timestamp::now().to_string();
        self.label(name, Phase::Cut, Some((snapshot::ANN_CUT_TIME, &cut)))
            .await;
        let begin = Instant::now();
        while begin.elapsed() < self.policy.snapshot.ready_timeout.get() {
            if self.status(name).await.is_some_and(|s| s.is_ready()) {
                let now = Timestamp::now().to_string();
                self.label(name, Phase::Ready, Some((snapshot::ANN_READY_TIME, &now)))
                    .await;
                self.summary.ready_latency_ms = Some(ms(begin.elapsed()));
                self.summary.phase = Some("ready");
                self.event_snapshot(
                    name,
                    "SnapshotReady",
                    "readyToUse: usable for provisioning",
                    false,
                )
                .await;
                self.step("snapshot ready").await;
                return Ok(None);
            }
            tokio::time::sleep(self.opts.poll).await;
        }
        self.label(name, Phase::Failed, None).await;
        self.summary.phase = Some("failed");
        Err(Stop::Failed(
            "ready-timeout",
            format!(
                "snapshot {name} was cut but not ready within {}",
                self.policy.snapshot.ready_timeout
            ),
        ))
    }

    async fn label(&self, name: &str, phase: Phase, ann: Option<(&str, &str)>) {
        let mut anns = BTreeMap::new();
        if let Some((k, v)) = ann {
            anns.insert(k.to_owned(), v.to_owned());
        }
        let patch = json!({"metadata": {"labels": {snapshot::LABEL_PHASE: phase.as_str()}, "annotations": anns}});
        if let Err(e) = snapshots_api(&self.kube, &self.shard.namespace)
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            tracing::warn!(error = %e, snapshot = name, "cannot label the snapshot");
        }
    }

    /// Unfence in order — node release, StartReplication, original type — each attempted;
    /// the lease is deleted only if all succeeded, else left to expire for recovery.
    async fn unfence(&mut self, fence: &LiveFence, t: &Target, q: Quiesced) -> Vec<String> {
        let mut problems = Vec::new();
        if q.node_acted
            && let Err(e) = fence
                .ask(
                    Request::Release,
                    NodeState::Released,
                    self.opts.node_timeout,
                )
                .await
        {
            problems.push(format!("node release: {e}"));
        }
        if q.replication_stopped
            && let Err(e) = self.vtctld.start_replication(&t.tablet_alias).await
        {
            problems.push(format!("StartReplication: {e}"));
        }
        if q.drained
            && let Err(e) = self
                .vtctld
                .change_tablet_type(&t.tablet_alias, self.original)
                .await
        {
            problems.push(format!("ChangeTabletType back: {e}"));
        }
        if problems.is_empty() {
            if let Err(e) = fence.delete().await {
                problems.push(format!("deleting the fence: {e}"));
            }
        } else {
            fence.stop_renewing();
        }
        if problems.is_empty() {
            self.event_pod("SnapshotUnfenced", "the tablet is back in service", false)
                .await;
        } else {
            self.event_pod(
                "UnfenceIncomplete",
                &format!("left for recovery: {}", problems.join("; ")),
                true,
            )
            .await;
        }
        problems
    }
}

/// What the run changed and must undo.
#[derive(Debug, Clone, Copy, Default)]
struct Quiesced {
    drained: bool,
    replication_stopped: bool,
    node_acted: bool,
}
