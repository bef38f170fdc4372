//! The kubeconfig, found as kubectl finds it: `--kubeconfig` (one file), else every file of
//! the `KUBECONFIG` path list, merged (the first file to set a key wins; a listed file that
//! does not exist is skipped), else `~/.kube/config`, else the Pod's service account.
//! Every file goes through the one bounded reader (`core::input`): a FIFO or a device is
//! refused before it is opened, a file over [`MAX_KUBECONFIG`] is refused, so a hostile
//! `KUBECONFIG` can neither hang the plugin nor fill its memory.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use kube::config::Kubeconfig;
use vtsnap_core::input::{Accept, ReadError, read_bounded};

/// The most a kubeconfig file may hold: embedded certificates of many clusters fit.
pub const MAX_KUBECONFIG: u64 = 4 << 20;

/// Where the kubeconfig comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `--kubeconfig`: that file, which must exist.
    Flag(PathBuf),
    /// `KUBECONFIG`: the files of the list that exist, merged in order.
    EnvList(Vec<PathBuf>),
    /// `~/.kube/config`, which exists.
    Home(PathBuf),
    /// None of the above: the Pod's service account.
    InCluster,
}

impl Source {
    /// kubectl's order, from the flag, `KUBECONFIG`'s value and the home directory.
    pub fn find(flag: Option<&Path>, env: Option<&OsStr>, home: Option<&Path>) -> Self {
        if let Some(p) = flag {
            return Self::Flag(p.to_owned());
        }
        if let Some(list) = env {
            let paths: Vec<PathBuf> = std::env::split_paths(list)
                .filter(|p| !p.as_os_str().is_empty())
                .collect();
            if !paths.is_empty() {
                return Self::EnvList(paths);
            }
        }
        match home.map(|h| h.join(".kube").join("config")) {
            Some(p) if p.exists() => Self::Home(p),
            _ => Self::InCluster,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum KubeconfigError {
    #[error("kubeconfig: {0}")]
    Read(#[from] ReadError),
    #[error("kubeconfig {}: not UTF-8 (nor UTF-16 with a byte order mark) text", path.display())]
    NotText { path: PathBuf },
    #[error("kubeconfig {}: {source}", path.display())]
    Parse {
        path: PathBuf,
        source: kube::config::KubeconfigError,
    },
    #[error("kubeconfig {}: cannot be merged with the files before it in KUBECONFIG: {source}", path.display())]
    Merge {
        path: PathBuf,
        source: kube::config::KubeconfigError,
    },
    #[error("KUBECONFIG names no file that exists: {}", list(paths))]
    NoneExists { paths: Vec<PathBuf> },
}

fn list(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The kubeconfig of `source`; `None` for [`Source::InCluster`].
pub fn load(source: &Source) -> Result<Option<Kubeconfig>, KubeconfigError> {
    match source {
        Source::Flag(p) | Source::Home(p) => read_one(p).map(Some),
        Source::EnvList(paths) => {
            let existing: Vec<&PathBuf> = paths.iter().filter(|p| p.exists()).collect();
            if existing.is_empty() {
                return Err(KubeconfigError::NoneExists {
                    paths: paths.clone(),
                });
            }
            let mut merged = Kubeconfig::default();
            for p in existing {
                merged = merged
                    .merge(read_one(p)?)
                    .map_err(|source| KubeconfigError::Merge {
                        path: p.clone(),
                        source,
                    })?;
            }
            Ok(Some(merged))
        }
        Source::InCluster => Ok(None),
    }
}

/// One file, bounded, its documents merged and its relative paths made absolute to its
/// directory (what kube's unbounded `Kubeconfig::read_from` does).
pub fn read_one(path: &Path) -> Result<Kubeconfig, KubeconfigError> {
    let bytes = read_bounded(path, "a kubeconfig", MAX_KUBECONFIG, Accept::RegularFile)?;
    let text = decode(bytes).ok_or_else(|| KubeconfigError::NotText {
        path: path.to_owned(),
    })?;
    let mut kc = Kubeconfig::from_yaml(&text).map_err(|source| KubeconfigError::Parse {
        path: path.to_owned(),
        source,
    })?;
    if let Some(dir) = path.parent() {
        absolute_paths(&mut kc, dir);
    }
    Ok(kc)
}

/// The text of a kubeconfig: UTF-8 (a byte order mark dropped) or UTF-16 with one, as
/// client-go and kube read it.
fn decode(bytes: Vec<u8>) -> Option<String> {
    let utf16 = |rest: &[u8], from: fn([u8; 2]) -> u16| {
        let units: Vec<u16> = rest.chunks_exact(2).map(|c| from([c[0], c[1]])).collect();
        String::from_utf16(&units).ok()
    };
    match bytes.as_slice() {
        [0xFF, 0xFE, rest @ ..] => utf16(rest, u16::from_le_bytes),
        [0xFE, 0xFF, rest @ ..] => utf16(rest, u16::from_be_bytes),
        [0xEF, 0xBB, 0xBF, rest @ ..] => String::from_utf8(rest.to_vec()).ok(),
        _ => String::from_utf8(bytes).ok(),
    }
}

fn absolute_paths(kc: &mut Kubeconfig, dir: &Path) {
    let fix = |p: &mut Option<String>| {
        if let Some(s) = p.as_mut()
            && Path::new(s.as_str()).is_relative()
            && let Some(abs) = dir.join(s.as_str()).to_str()
        {
            *s = abs.to_owned();
        }
    };
    for c in kc.clusters.iter_mut().filter_map(|n| n.cluster.as_mut()) {
        fix(&mut c.certificate_authority);
    }
    for a in kc
        .auth_infos
        .iter_mut()
        .filter_map(|n| n.auth_info.as_mut())
    {
        fix(&mut a.client_certificate);
        fix(&mut a.client_key);
        fix(&mut a.token_file);
        // Only a command with a separator is a path; a bare name is looked up in PATH.
        if let Some(exec) = a.exec.as_mut()
            && exec
                .command
                .as_deref()
                .is_some_and(|c| c.contains(std::path::MAIN_SEPARATOR))
        {
            fix(&mut exec.command);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn config(cluster: &str, server: &str, current: Option<&str>) -> String {
        let current = current.map_or(String::new(), |c| format!("current-context: {c}\n"));
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: {cluster}\n  cluster: {{server: \"{server}\", certificate-authority: ca.crt}}\n\
             users:\n- name: u-{cluster}\n  user: {{token: t}}\ncontexts:\n- name: {cluster}\n  context: {{cluster: {cluster}, user: u-{cluster}}}\n{current}"
        )
    }

    #[test]
    fn kubectl_s_order_flag_then_list_then_home_then_in_cluster() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("f");
        assert_eq!(
            Source::find(Some(&f), Some(OsStr::new("/a:/b")), None),
            Source::Flag(f.clone())
        );
        assert_eq!(
            Source::find(None, Some(OsStr::new("/a::/b")), None),
            Source::EnvList(vec!["/a".into(), "/b".into()])
        );
        // An empty KUBECONFIG is none; a home without ~/.kube/config too.
        assert_eq!(
            Source::find(None, Some(OsStr::new("")), Some(d.path())),
            Source::InCluster
        );
        std::fs::create_dir(d.path().join(".kube")).unwrap();
        std::fs::write(d.path().join(".kube/config"), "").unwrap();
        assert_eq!(
            Source::find(None, None, Some(d.path())),
            Source::Home(d.path().join(".kube/config"))
        );
    }

    #[test]
    fn a_path_list_is_merged_the_first_file_winning() {
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a.yaml"), d.path().join("sub/b.yaml"));
        std::fs::create_dir(d.path().join("sub")).unwrap();
        std::fs::write(&a, config("one", "https://a:6443", Some("one"))).unwrap();
        // b sets the same cluster again (ignored), another current context (ignored) and,
        // in a second document, another cluster.
        let docs = [
            config("one", "https://b:6443", Some("two")),
            config("two", "https://two:6443", None),
        ];
        std::fs::write(&b, docs.join("---\n")).unwrap();
        let missing = d.path().join("missing.yaml");
        let kc = load(&Source::EnvList(vec![a, missing.clone(), b]))
            .unwrap()
            .unwrap();
        assert_eq!(kc.current_context.as_deref(), Some("one"));
        let servers: Vec<(String, Option<String>, Option<String>)> = kc
            .clusters
            .iter()
            .map(|c| {
                let cl = c.cluster.clone().unwrap();
                (c.name.clone(), cl.server, cl.certificate_authority)
            })
            .collect();
        let ca = |dir: &Path| Some(dir.join("ca.crt").display().to_string());
        assert_eq!(
            servers,
            vec![
                ("one".into(), Some("https://a:6443".into()), ca(d.path())),
                (
                    "two".into(),
                    Some("https://two:6443".into()),
                    ca(&d.path().join("sub"))
                ),
            ]
        );
        let e = load(&Source::EnvList(vec![missing.clone()])).unwrap_err();
        assert!(matches!(e, KubeconfigError::NoneExists { .. }), "{e}");
        assert!(e.to_string().contains("missing.yaml"), "{e}");
    }

    #[test]
    fn a_device_a_fifo_or_a_huge_file_is_refused_unread() {
        let e = read_one(Path::new("/dev/zero")).unwrap_err();
        assert!(
            matches!(
                e,
                KubeconfigError::Read(ReadError::NotAFile {
                    kind: "character device",
                    ..
                })
            ),
            "{e}"
        );
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        // No writer: opening it would block this test for ever.
        let e = load(&Source::EnvList(vec![fifo])).unwrap_err();
        assert!(
            matches!(
                e,
                KubeconfigError::Read(ReadError::NotAFile { kind: "FIFO", .. })
            ),
            "{e}"
        );
        let big = d.path().join("big");
        let f = std::fs::File::create(&big).unwrap();
        f.set_len(MAX_KUBECONFIG + 1).unwrap();
        let e = read_one(&big).unwrap_err();
        assert!(
            matches!(e, KubeconfigError::Read(ReadError::TooLarge { .. })),
            "{e}"
        );
        assert!(
            e.to_string().contains("the most a kubeconfig may have"),
            "{e}"
        );
    }

    #[test]
    fn utf16_and_a_byte_order_mark_are_text() {
        assert_eq!(decode(b"\xEF\xBB\xBFa: 1".to_vec()).unwrap(), "a: 1");
        assert_eq!(decode(vec![0xFF, 0xFE, b'a', 0]).unwrap(), "a");
        assert_eq!(decode(vec![0xFE, 0xFF, 0, b'a']).unwrap(), "a");
        assert_eq!(decode(vec![0xC3]), None);
    }
}
