//! The binary's command line: help with examples, usage errors (exit 2) that name what is
//! wrong, and an API it cannot reach (exit 1, said in one line).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Output};

fn plugin(args: &[&str], kubeconfig: &std::path::Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kubectl-vtsnap"))
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env("HOME", "/nonexistent")
        .output()
        .unwrap()
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
