//! The window record: written and read back, every malformed value named, and judged
//! against its snapshot and the reader's clock.
#![allow(clippy::unwrap_used)]

use k8s_openapi::jiff::SignedDuration;

use super::*;

fn t(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn span(from: &str, to: &str) -> Span {
    Span {
        from: t(from),
        to: t(to),
    }
}

fn of() -> DrillOf {
    DrillOf {
        uid: "0b6c6a3e-1111-4222-8333-944455556666".into(),
        cut: t("2026-12-07T06:00:01Z"),
    }
}

fn record() -> WindowRecord {
    WindowRecord::new(
        &[
            span("2026-12-06T00:00:00Z", "2026-12-06T05:00:00Z"),
            span("2026-12-07T06:00:00Z", "2026-12-07T14:02:10Z"),
        ],
        t("2026-12-07T14:05:00Z"),
        &of(),
    )
}

#[test]
fn a_record_reads_back_as_written() {
    let r = record();
    let text = r.render();
    assert!(text.contains("\"snapshotUid\""), "{text}");
    assert_eq!(WindowRecord::parse(&text), Ok(r.clone()));
    assert_eq!(r.end(), Some(t("2026-12-07T14:02:10Z")));
    assert_eq!(
        standing(Ok(&r), Some(&of()), t("2026-12-07T14:06:00Z")),
        Ok(&r)
    );
}

#[test]
fn only_the_newest_spans_are_written() {
    let many: Vec<Span> = (0..MAX_SPANS + 3)
        .map(|i| Span {
            from: Timestamp::from_second(1_800_000_000 + 100 * i as i64).unwrap(),
            to: Timestamp::from_second(1_800_000_050 + 100 * i as i64).unwrap(),
        })
        .collect();
    let r = WindowRecord::new(&many, t("2027-01-01T00:00:00Z"), &of());
    assert_eq!(r.spans.len(), MAX_SPANS);
    assert_eq!(r.spans.first(), Some(&many[3]));
    assert_eq!(r.spans.last(), many.last());
    assert_eq!(WindowRecord::parse(&r.render()), Ok(r));
    assert!(
        WindowRecord::new(&[], t("2027-01-01T00:00:00Z"), &of())
            .end()
            .is_none()
    );
}

#[test]
fn every_malformed_value_is_named() {
    let good = serde_json::to_value(record()).unwrap();
    let with = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut v = good.clone();
        f(&mut v);
        WindowRecord::parse(&v.to_string()).unwrap_err()
    };
    // Exactly the bound reads (a record padded with JSON's own whitespace); a byte more is
    // refused by its size.
    let text = record().render();
    let padded = format!("{text:width$}", width = MAX_RECORD_BYTES);
    assert_eq!(padded.len(), MAX_RECORD_BYTES);
    assert_eq!(WindowRecord::parse(&padded), Ok(record()));
    let long = format!("{text:width$}", width = MAX_RECORD_BYTES + 1);
    assert_eq!(
        WindowRecord::parse(&long),
        Err(WindowRecordError::TooLong {
            len: MAX_RECORD_BYTES + 1
        })
    );
    assert!(matches!(
        WindowRecord::parse("[]"),
        Err(WindowRecordError::Malformed { .. })
    ));
    assert!(matches!(
        with(&|v| v["checked"] = serde_json::json!("yesterday")),
        WindowRecordError::Malformed { .. }
    ));
    assert!(matches!(
        with(&|v| v["extra"] = serde_json::json!(1)),
        WindowRecordError::Malformed { .. }
    ));
    assert!(matches!(
        with(&|v| v["spans"][0]["note"] = serde_json::json!(1)),
        WindowRecordError::Malformed { .. }
    ));
    assert_eq!(
        with(&|v| v["snapshotUid"] = serde_json::json!("")),
        WindowRecordError::BadUid { len: 0 }
    );
    assert_eq!(
        with(&|v| v["snapshotUid"] = serde_json::json!("u".repeat(MAX_UID_BYTES + 1))),
        WindowRecordError::BadUid {
            len: MAX_UID_BYTES + 1
        }
    );
    assert!(
        WindowRecord::parse(&{
            let mut v = good.clone();
            v["snapshotUid"] = serde_json::json!("u".repeat(MAX_UID_BYTES));
            v.to_string()
        })
        .is_ok()
    );
    let spans = |n: usize| {
        serde_json::json!(
            (0..n)
                .map(|i| serde_json::json!({
                "from": Timestamp::from_second(1_800_000_000 + 100 * i as i64).unwrap(),
                "to": Timestamp::from_second(1_800_000_000 + 100 * i as i64).unwrap()}))
                .collect::<Vec<_>>()
        )
    };
    assert!(
        WindowRecord::parse(&{
            let mut v = good.clone();
            v["spans"] = spans(MAX_SPANS);
            v.to_string()
        })
        .is_ok()
    );
    assert_eq!(
        with(&|v| v["spans"] = spans(MAX_SPANS + 1)),
        WindowRecordError::TooManySpans {
            count: MAX_SPANS + 1
        }
    );
    assert_eq!(
        with(&|v| v["spans"][1]["to"] = serde_json::json!("2026-12-07T05:59:59Z")),
        WindowRecordError::Backwards {
            from: t("2026-12-07T06:00:00Z"),
            to: t("2026-12-07T05:59:59Z")
        }
    );
    // Touching spans would have been merged: a record with them is not one vtsnap wrote.
    assert_eq!(
        with(&|v| v["spans"][1]["from"] = serde_json::json!("2026-12-06T05:00:00Z")),
        WindowRecordError::Unordered {
            to: t("2026-12-06T05:00:00Z"),
            next: t("2026-12-06T05:00:00Z")
        }
    );
    let e = with(&|v| v["spans"][1]["from"] = serde_json::json!("2026-12-05T00:00:00Z"));
    assert!(e.to_string().contains("out of order or overlapping"), "{e}");
}

#[test]
fn a_record_counts_only_on_its_snapshot_and_never_from_the_future() {
    let r = record();
    let now = t("2026-12-07T14:06:00Z");
    fn judge<'r>(
        r: &'r WindowRecord,
        of: Option<&DrillOf>,
        now: Timestamp,
    ) -> Result<&'r WindowRecord, WindowDiscounted> {
        standing(Ok(r), of, now)
    }
    assert_eq!(judge(&r, None, now), Err(WindowDiscounted::SnapshotUnbound));
    let other = DrillOf {
        uid: "another".into(),
        ..of()
    };
    assert_eq!(
        judge(&r, Some(&other), now),
        Err(WindowDiscounted::OtherSnapshot)
    );
    let recut = DrillOf {
        cut: t("2026-12-07T06:00:02Z"),
        ..of()
    };
    assert_eq!(
        judge(&r, Some(&recut), now),
        Err(WindowDiscounted::OtherCut {
            recorded: of().cut,
            cut: recut.cut
        })
    );
    // Checked up to the clock skew ahead of the reader: counted; beyond it: not.
    let skewed = now.checked_add(CLOCK_SKEW).unwrap();
    let mut ahead = r.clone();
    ahead.checked = skewed;
    assert!(judge(&ahead, Some(&of()), now).is_ok());
    ahead.checked = skewed.checked_add(SignedDuration::from_secs(1)).unwrap();
    assert_eq!(
        judge(&ahead, Some(&of()), now),
        Err(WindowDiscounted::InTheFuture {
            checked: ahead.checked,
            now
        })
    );
    // A window that ends after it was read (beyond the skew) is not a reading.
    let mut late = r.clone();
    late.checked = t("2026-12-07T13:57:10Z");
    assert!(judge(&late, Some(&of()), now).is_ok(), "within the skew");
    late.checked = t("2026-12-07T13:57:09Z");
    assert_eq!(
        judge(&late, Some(&of()), now),
        Err(WindowDiscounted::EndsAfterCheck {
            to: t("2026-12-07T14:02:10Z"),
            checked: late.checked
        })
    );
    let e = WindowRecordError::BadUid { len: 0 };
    assert_eq!(
        standing(Err(&e), Some(&of()), now),
        Err(WindowDiscounted::Unreadable(e.clone()))
    );
}
