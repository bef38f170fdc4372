//! The words a recovery run (`vtsnap-pitr run`, docs/pitr.md §8) shares with those who read
//! its line: what the Pod does once replayed, how the run ended, and the line's fields a
//! caller decides on (`kubectl vtsnap recover`). One definition, so the writer and its
//! readers cannot drift apart.

use serde::{Deserialize, Serialize};

/// What the recovery Pod does once the replay passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum After {
    /// mysqld keeps serving on its socket, for `kubectl exec … -c mysqld -- mysql`.
    Serve,
    /// mysqld is shut down cleanly and the volume is cut into a VolumeSnapshot.
    Cut,
}

impl After {
    /// As `vtsnap-pitr run --after` takes it.
    pub fn as_arg(self) -> &'static str {
        match self {
            After::Serve => "serve",
            After::Cut => "cut",
        }
    }
}

/// How a recovery run ended (its line's `outcome`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RecoverOutcome {
    /// The replay passed: the Pod serves, or the cut snapshot is ready.
    Recovered,
    Planned,
    /// No base reaches the target, or the shard's objects do not allow one.
    Refused,
    /// `--snapshot` names no base of the shard.
    Usage,
    Failed,
}

/// The fields of a run's line that a caller decides on. The line may say more; what it
/// says beyond these is printed as written, never decided on.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct RunVerdict {
    pub shard: String,
    pub target: String,
    pub outcome: RecoverOutcome,
    /// The recovery's Pod (a served one, or the one that failed).
    #[serde(default)]
    pub pod: Option<String>,
    #[serde(default)]
    pub after: Option<After>,
}

impl RunVerdict {
    /// The served Pod's name, when the run recovered and its Pod serves.
    pub fn served_pod(&self) -> Option<&str> {
        match (self.outcome, self.after) {
            (RecoverOutcome::Recovered, Some(After::Serve)) => self.pod.as_deref(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_line_reads_as_the_writer_spells_its_words() {
        let line = json!({"shard": "s", "target": "t", "outcome": "recovered",
            "pod": "p", "after": "serve", "steps": [1]});
        let v: RunVerdict = serde_json::from_value(line).unwrap();
        assert_eq!(v.served_pod(), Some("p"));
        assert_eq!(
            serde_json::to_value(RecoverOutcome::Refused).unwrap(),
            json!("refused")
        );
        for after in [After::Serve, After::Cut] {
            assert_eq!(serde_json::to_value(after).unwrap(), json!(after.as_arg()));
        }
        let cut: RunVerdict = serde_json::from_value(
            json!({"shard": "s", "target": "t", "outcome": "recovered", "pod": "p", "after": "cut"}),
        )
        .unwrap();
        assert_eq!(cut.served_pod(), None);
        let failed: RunVerdict = serde_json::from_value(
            json!({"shard": "s", "target": "t", "outcome": "failed", "pod": "p", "after": "serve"}),
        )
        .unwrap();
        assert_eq!(failed.served_pod(), None);
        assert!(
            serde_json::from_value::<RunVerdict>(
                json!({"shard": "s", "target": "t", "outcome": "won"})
            )
            .is_err()
        );
    }
}
