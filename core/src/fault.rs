//! Named fault points.
//!
//! A test sets `VTSNAP_FAULT_POINT=<name>` (several names may be given, comma-separated);
//! when the program reaches [`point`] with that name it exits at once with
//! [`FAULT_EXIT_CODE`], as if it had been killed right after the step before it.
//! Unset, a fault point costs one environment lookup.

/// The environment variable that arms fault points.
pub const FAULT_ENV: &str = "VTSNAP_FAULT_POINT";

/// The exit code of a process stopped at a fault point; tests assert on it to prove the
/// point was reached.
pub const FAULT_EXIT_CODE: i32 = 86;

/// Stops the process here if the fault point `name` is armed.
pub fn point(name: &str) {
    if is_armed(name, std::env::var(FAULT_ENV).ok().as_deref()) {
        tracing::warn!(fault_point = name, "stopping at armed fault point");
        std::process::exit(FAULT_EXIT_CODE);
    }
}

fn is_armed(name: &str, armed: Option<&str>) -> bool {
    armed.is_some_and(|list| list.split(',').any(|p| p.trim() == name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_named_points_are_armed() {
        assert!(is_armed("a.b", Some("a.b")));
        assert!(is_armed("a.b", Some("x, a.b")));
        assert!(!is_armed("a.b", Some("a.bc")));
        assert!(!is_armed("a.b", None));
    }
}
