//! The exit codes every vtsnap binary uses (docs/design.md §5.1), in one place.

use std::process::ExitCode;

/// How a program ended. The numbers are part of the documented interface: CronJob
/// alerting and `kubectl` scripts key on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Exit {
    /// Done.
    Ok,
    /// Failed; everything the run changed was put back.
    Failed,
    /// Bad config or usage; nothing was touched.
    Usage,
    /// Refused by a precondition; nothing was touched.
    Refused,
    /// Failed and the unfence is incomplete: the fence lease is left for recovery.
    UnfenceIncomplete,
}

impl Exit {
    /// The process exit code.
    pub const fn code(self) -> u8 {
        match self {
            Exit::Ok => 0,
            Exit::Failed => 1,
            Exit::Usage => 2,
            Exit::Refused => 3,
            Exit::UnfenceIncomplete => 4,
        }
    }

    /// The inverse of [`Exit::code`]; `None` for a number no vtsnap program returns.
    pub const fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(Exit::Ok),
            1 => Some(Exit::Failed),
            2 => Some(Exit::Usage),
            3 => Some(Exit::Refused),
            4 => Some(Exit::UnfenceIncomplete),
            _ => None,
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> Self {
        ExitCode::from(e.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_the_documented_ones_and_round_trip() {
        let all = [
            (Exit::Ok, 0),
            (Exit::Failed, 1),
            (Exit::Usage, 2),
            (Exit::Refused, 3),
            (Exit::UnfenceIncomplete, 4),
        ];
        for (e, n) in all {
            assert_eq!(e.code(), n);
            assert_eq!(Exit::from_code(n), Some(e));
        }
        assert_eq!(Exit::from_code(5), None);
    }
}
