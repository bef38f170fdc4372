//! What a run did, and what failed, typed: a program's report is [`Report<P>`] with its
//! own record `P` of what it did; a failed action is an [`ActError`] naming the action, the
//! object and the cause. The JSON line keeps each error as its one-line message.

use serde::{Serialize, Serializer};

use super::ObjectKey;
use crate::exit::Exit;

/// One action that was not done; the next run tries again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{doing} {object}: {cause}")]
pub struct ActError {
    /// What was being done, e.g. `deleting VolumeSnapshot`.
    pub doing: String,
    pub object: ObjectKey,
    pub cause: String,
}

impl ActError {
    pub fn new(doing: impl Into<String>, object: ObjectKey, cause: impl ToString) -> Self {
        Self {
            doing: doing.into(),
            object,
            cause: cause.to_string(),
        }
    }
}

fn messages<S: Serializer>(errors: &[ActError], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(errors.iter().map(ToString::to_string))
}

/// A run's report: the program's record `P` (flattened into the JSON line), the actions
/// that failed, and the exit code.
#[derive(Debug, Clone, Serialize)]
pub struct Report<P> {
    #[serde(flatten)]
    pub run: P,
    #[serde(serialize_with = "messages")]
    pub errors: Vec<ActError>,
    pub exit_code: u8,
}

impl<P> Report<P> {
    pub fn new(run: P) -> Self {
        Self {
            run,
            errors: Vec::new(),
            exit_code: Exit::Ok.code(),
        }
    }

    /// Sets the exit code: [`Exit::Ok`] when nothing failed and `complete` (nothing was left
    /// out for a reason of the program's own), [`Exit::Failed`] otherwise.
    pub fn finish(&mut self, complete: Completeness) {
        self.exit_code = if self.errors.is_empty() && complete == Completeness::Complete {
            Exit::Ok
        } else {
            Exit::Failed
        }
        .code();
    }
}

impl<P: Serialize> Report<P> {
    /// Prints the JSON line on stdout and returns the exit it records.
    pub fn print_line(&self) -> Exit {
        println!("{}", serde_json::to_string(self).unwrap_or_default());
        Exit::from_code(self.exit_code).unwrap_or(Exit::Failed)
    }
}

/// Why a run ended without doing its work, in its JSON line: a stable code (alerts key on
/// it) and the message. Every program's line that carries one error carries this.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ErrorLine {
    pub code: &'static str,
    pub message: String,
}

/// Whether a run covered everything it was asked to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Completeness {
    Complete,
    /// Something was left out (an unreadable namespace, a blocked shard).
    Partial,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Debug, Clone, Serialize)]
    struct Did {
        deleted: Vec<String>,
    }

    #[test]
    fn the_json_line_flattens_the_record_and_keeps_errors_as_messages() {
        let mut r = Report::new(Did {
            deleted: vec!["ns/a".into()],
        });
        r.finish(Completeness::Complete);
        assert_eq!(r.exit_code, Exit::Ok.code());
        r.errors.push(ActError::new(
            "deleting VolumeSnapshot",
            ObjectKey::new("ns", "b"),
            "forbidden",
        ));
        r.finish(Completeness::Complete);
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            json!({"deleted": ["ns/a"], "errors": ["deleting VolumeSnapshot ns/b: forbidden"],
                   "exit_code": Exit::Failed.code()})
        );
    }

    #[test]
    fn a_partial_run_fails_without_errors() {
        let mut r = Report::new(());
        r.finish(Completeness::Partial);
        assert_eq!(r.exit_code, Exit::Failed.code());
    }
}
