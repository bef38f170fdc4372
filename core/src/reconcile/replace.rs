//! The one GET → change → replace loop: a compare-and-swap on the object's resourceVersion,
//! read again and changed again when someone else wrote it in between (409 Conflict).

use kube::api::{Api, PostParams};

/// What the caller's `change` decided about the object it was given, freshly read.
#[derive(Debug)]
pub enum Change<E> {
    /// It was changed in place: write it back.
    Replace,
    /// It is already as wanted: write nothing.
    Leave,
    /// It must not be changed (e.g. someone else holds it now): stop with this reason.
    GiveUp(E),
}

/// What [`replace_with_retry`] did.
#[derive(Debug)]
pub enum Outcome<K> {
    /// The object as the API server stored it after the replace.
    Replaced(K),
    /// `change` left it alone: the object as read.
    Left(K),
}

#[derive(Debug, thiserror::Error)]
pub enum ReplaceError<E: std::error::Error + 'static> {
    /// The GET answered 404: the object is gone (each caller decides whether that is done).
    #[error("{name} is gone: {source}")]
    Gone { name: String, source: kube::Error },
    #[error("reading {name}: {source}")]
    Read { name: String, source: kube::Error },
    #[error("replacing {name}: {source}")]
    Write { name: String, source: kube::Error },
    /// Every try met a newer resourceVersion.
    #[error("{name} kept changing under us ({tries} tries, last: {last})")]
    Conflicts {
        name: String,
        tries: usize,
        last: kube::Error,
    },
    #[error("{name}: {reason}")]
    GaveUp { name: String, reason: E },
}

/// Reads `name`, lets `change` decide on the fresh object, and replaces it on the
/// resourceVersion it was read at; on 409 Conflict reads again, `tries` times in all (at
/// least once). `change` is called once per try, always on the latest read.
pub async fn replace_with_retry<K, E>(
    api: &Api<K>,
    name: &str,
    tries: usize,
    mut change: impl FnMut(&mut K) -> Change<E>,
) -> Result<Outcome<K>, ReplaceError<E>>
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
    E: std::error::Error + 'static,
{
    let tries = tries.max(1);
    let mut tried = 0;
    loop {
        tried += 1;
        let mut obj = match api.get(name).await {
            Ok(o) => o,
            Err(kube::Error::Api(s)) if s.is_not_found() => {
                return Err(ReplaceError::Gone {
                    name: name.to_owned(),
                    source: kube::Error::Api(s),
                });
            }
            Err(source) => {
                return Err(ReplaceError::Read {
                    name: name.to_owned(),
                    source,
                });
            }
        };
        match change(&mut obj) {
            Change::Replace => {}
            Change::Leave => return Ok(Outcome::Left(obj)),
            Change::GiveUp(reason) => {
                return Err(ReplaceError::GaveUp {
                    name: name.to_owned(),
                    reason,
                });
            }
        }
        match api.replace(name, &PostParams::default(), &obj).await {
            Ok(stored) => return Ok(Outcome::Replaced(stored)),
            Err(kube::Error::Api(s)) if s.code == 409 => {
                if tried == tries {
                    return Err(ReplaceError::Conflicts {
                        name: name.to_owned(),
                        tries,
                        last: kube::Error::Api(s),
                    });
                }
            }
            Err(source) => {
                return Err(ReplaceError::Write {
                    name: name.to_owned(),
                    source,
                });
            }
        }
    }
}
