//! A tolerant read: a failed or malformed read is kept as such, so that nothing is
//! decided on it (a missing object and an unreadable one are never confused).

/// What a read gave.
#[derive(Debug, Clone, PartialEq)]
pub enum Read<T> {
    /// Verified absent (a complete LIST without it, or a 404).
    Absent,
    Present(T),
    /// The read failed or the object could not be read: nothing is decided on it.
    Unreadable(String),
}

impl<T> Read<T> {
    pub fn present(&self) -> Option<&T> {
        match self {
            Self::Present(t) => Some(t),
            _ => None,
        }
    }

    /// The read of a GET that may answer 404: `Ok(None)` is a verified absence.
    pub fn from_get<E: std::fmt::Display>(got: Result<Option<T>, E>) -> Self {
        match got {
            Ok(Some(t)) => Self::Present(t),
            Ok(None) => Self::Absent,
            Err(e) => Self::Unreadable(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_get_is_unreadable_and_a_404_absent() {
        assert_eq!(Read::from_get(Ok::<_, String>(Some(1))), Read::Present(1));
        assert_eq!(
            Read::from_get(Ok::<Option<i32>, String>(None)),
            Read::Absent
        );
        assert_eq!(
            Read::<i32>::from_get(Err("timed out")),
            Read::Unreadable("timed out".into())
        );
        assert_eq!(Read::Present(2).present(), Some(&2));
        assert_eq!(Read::<i32>::Absent.present(), None);
        assert_eq!(Read::<i32>::Unreadable("x".into()).present(), None);
    }
}
