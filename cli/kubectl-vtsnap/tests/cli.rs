//! The binary's command line: help with examples, usage errors (exit 2) that name what is
//! wrong, and an API it cannot reach (exit 1, said in one line).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Output};

fn plugin(args: &[&str], kubeconfig: &std::path::Path) -> Output {
    plugin_os(args, kubeconfig.as_os_str())
}

/// With `KUBECONFIG` as given (a path list, a device).
fn plugin_os(args: &[&str], kubeconfig: &std::ffi::OsStr) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kubectl-vtsnap"))
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env("HOME", "/nonexistent")
        .env_remove("VTSNAP_TIMEOUT")
        .output()
        .unwrap()
}

/// A port that was just free: nothing listens there.
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn kubeconfig_text(cluster: &str, server: &str, current: Option<&str>) -> String {
    let current = current.map_or(String::new(), |c| format!("current-context: {c}\n"));
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {cluster}\n  cluster: {{server: \"{server}\"}}\n\
         users:\n- name: u\n  user: {{token: t}}\ncontexts:\n- name: {cluster}\n  context: {{cluster: {cluster}, user: u}}\n{current}"
    )
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn help_has_examples_and_usage_errors_exit_2_naming_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kubeconfig");
    let out = plugin(&["--help"], &kc);
    assert_eq!(out.status.code(), Some(0));
    let help = text(&out.stdout);
    for want in [
        "kubectl vtsnap status",
        "kubectl vtsnap doctor",
        "backup",
        "explain",
    ] {
        assert!(help.contains(want), "{want}: {help}");
    }
    for (args, says) in [
        (vec!["backup", "example/commerce"], "CLUSTER/KEYSPACE/SHARD"),
        (vec!["backup", "example/commerce/zz"], "not a key range"),
        (vec!["status", "-o", "xml"], "xml"),
        (vec!["explain", "table", "x"], "table"),
    ] {
        let out = plugin(&args, &kc);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            text(&out.stderr).contains(says),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
}

#[test]
fn an_api_it_cannot_reach_is_exit_1_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kubeconfig");
    // A server on a port nothing listens on.
    std::fs::write(
        &kc,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: \"https://127.0.0.1:9\"}\n\
         users:\n- name: u\n  user: {token: t}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n",
    )
    .unwrap();
    let out = plugin(&["status"], &kc);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.starts_with("kubectl vtsnap: "), "{err}");
    // Round three, item 15: it said `client error (Connect)`, with neither the server
    // nor the cause.
    assert!(
        err.contains("cannot connect to the API server at https://127.0.0.1:9: connection refused"),
        "{err}"
    );
    // A name that is not the API's (a control character, a path, a selector) is a usage
    // error before any request, shown escaped, never sent to the terminal raw.
    for (args, says) in [
        (
            vec!["explain", "pvc", "bad\u{1b}[2Jname", "-n", "vitess"],
            "\"bad\\u{1b}[2Jname\" is not an object name",
        ),
        (
            vec!["explain", "snapshot", "../../nodes/x", "-n", "vitess"],
            "\"../../nodes/x\" is not an object name",
        ),
        (
            vec![
                "explain",
                "pvc",
                "a,involvedObject.kind=Pod",
                "-n",
                "vitess",
            ],
            "is not an object name",
        ),
        (
            vec!["status", "-n", "Vitess_NS"],
            "\"Vitess_NS\" is not a namespace name",
        ),
        // recover: a target is required, one only; a prompt needs a served recovery
        (vec!["recover", "example/commerce/-"], "--to-time <TO_TIME>"),
        (
            vec![
                "recover",
                "example/commerce/-",
                "--to-gtid",
                "u:1",
                "--to-time",
                "2026-12-01T00:00:00Z",
            ],
            "cannot be used with",
        ),
        (
            vec![
                "recover",
                "example/commerce/-",
                "--to-gtid",
                "u:1",
                "--shell",
                "--after",
                "cut",
            ],
            "cannot be used with",
        ),
        (
            vec!["recover", "example/Commerce\u{7}/-", "--to-gtid", "u:1"],
            "Commerce\\u{7}",
        ),
    ] {
        let out = plugin(&args, &kc);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = text(&out.stderr);
        assert!(
            !err.contains('\u{1b}') && err.contains(says),
            "{args:?}: {err}"
        );
    }
    // A kubeconfig that is not there.
    let out = plugin(&["status", "--kubeconfig", "/nonexistent/kubeconfig"], &kc);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("/nonexistent/kubeconfig"),
        "{}",
        text(&out.stderr)
    );
}

/// Round three, item 15: the CLUSTER of `backup` went into a label selector and onto the
/// terminal raw; clap echoed an unknown flag raw. Both are usage errors (exit 2), escaped,
/// with clap's usage text kept.
#[test]
fn a_hostile_argument_is_refused_and_echoed_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kubeconfig");
    for (args, says) in [
        (
            vec!["backup", "ex\u{1b}]0;owned\u{7}ample/commerce/-"],
            "the cluster \"ex\\u{1b}]0;owned\\u{7}ample\" is not a VitessCluster name",
        ),
        (
            vec!["backup", "example/com\u{1b}[2Jmerce/-"],
            "is not a Vitess keyspace name",
        ),
        (vec!["status", "--\u{1b}]0;x\u{7}"], "--\\u{1b}]0;x\\u{7}"),
    ] {
        let out = plugin(&args, &kc);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            !err.chars().any(|c| c.is_control() && c != '\n') && err.contains(says),
            "{args:?}: {err}"
        );
        assert!(err.contains("try '--help'"), "{args:?}: {err}");
    }
    // An unknown flag: clap's usage line too.
    let out = plugin(&["status", "--\u{1b}]0;x\u{7}"], &kc);
    assert!(
        text(&out.stderr).contains("Usage: kubectl vtsnap status"),
        "{}",
        text(&out.stderr)
    );
}

/// Round three, item 10: `KUBECONFIG` on a FIFO hung the plugin, on `/dev/zero` it read
/// until it was killed. Both are refused before they are read.
#[test]
fn a_kubeconfig_that_is_not_a_regular_file_is_refused_unread() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    for (kc, kind) in [
        (std::path::PathBuf::from("/dev/zero"), "character device"),
        (fifo, "FIFO"),
    ] {
        let out = plugin(&["status"], &kc);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(
            err.contains(&format!(
                "{} is not a regular file (a {kind})",
                kc.display()
            )),
            "{err}"
        );
    }
}

/// Round three, item 10: a `KUBECONFIG` path list was taken as one path. kubectl merges
/// the files, the first to set a key winning, and skips one that does not exist.
#[test]
fn a_kubeconfig_path_list_is_merged_as_kubectl_merges_it() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.yaml"), dir.path().join("b.yaml"));
    let (pa, pb) = (closed_port(), closed_port());
    // a names b's context as current; b also names its own cluster "a" (ignored: a's wins).
    std::fs::write(
        &a,
        kubeconfig_text("a", &format!("http://127.0.0.1:{pa}"), Some("b")),
    )
    .unwrap();
    std::fs::write(
        &b,
        kubeconfig_text("b", &format!("http://127.0.0.1:{pb}"), Some("a")),
    )
    .unwrap();
    let list = std::env::join_paths([&a, &dir.path().join("missing.yaml"), &b]).unwrap();
    let out = plugin_os(&["status"], &list);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "the API server at http://127.0.0.1:{pb}: connection refused"
        )),
        "{err}"
    );
    // --context picks a's.
    let out = plugin_os(&["status", "--context", "a"], &list);
    assert!(
        text(&out.stderr).contains(&format!("http://127.0.0.1:{pa}: connection refused")),
        "{}",
        text(&out.stderr)
    );
}
