//! The binary against a hostile API server (a tiny HTTP server of this test, on 127.0.0.1):
//! an endless chunked answer, an answer that declares more than the plugin reads, and a
//! trickle of one byte at a time that never falls silent long enough for the read timeout.
//! Each ends the command with a message naming the limit, having read a bounded amount.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Output};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use kubectl_vtsnap::client::MAX_ANSWER;

/// What the server sends after a request's headers.
#[derive(Debug, Clone, Copy)]
enum Answer {
    /// A chunked list that never ends (stops at `MAX_ANSWER * 4`, so a client without a
    /// bound fails on its own rather than fill the machine).
    Endless,
    /// `Content-Length` over the bound, and that many bytes.
    Declared(u64),
    /// One byte a chunk, every 100 ms (at most 600 of them).
    Trickle,
}

/// Serves `answer` to every connection; each connection's count of bytes sent (until the
/// client went away or the answer ended) arrives on the receiver.
fn serve(answer: Answer) -> (String, mpsc::Receiver<u64>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { return };
            let tx = tx.clone();
            std::thread::spawn(move || {
                let _ = tx.send(answer_one(conn, answer));
            });
        }
    });
    (url, rx)
}

fn answer_one(conn: TcpStream, answer: Answer) -> u64 {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    // The request's headers (a GET: no body).
    let mut line = String::new();
    while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
        line.clear();
    }
    let mut out = Counted { conn, sent: 0 };
    let head =
        |extra: &str| format!("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{extra}\r\n");
    let chunk = |data: &[u8]| {
        let mut c = format!("{:x}\r\n", data.len()).into_bytes();
        c.extend_from_slice(data);
        c.extend_from_slice(b"\r\n");
        c
    };
    let start = br#"{"apiVersion":"v1","kind":"ConfigMapList","metadata":{},"items":["#;
    match answer {
        Answer::Endless => {
            let spaces = chunk(&[b' '; 64 * 1024]);
            if out.send(head("Transfer-Encoding: chunked\r\n").as_bytes())
                && out.send(&chunk(start))
            {
                while out.sent < MAX_ANSWER * 4 && out.send(&spaces) {}
            }
            out.send(b"0\r\n\r\n");
        }
        Answer::Declared(n) => {
            if out.send(head(&format!("Content-Length: {n}\r\n")).as_bytes()) {
                let block = [b' '; 64 * 1024];
                let mut left = n;
                while left > 0 {
                    let k = usize::try_from(left.min(block.len() as u64)).unwrap();
                    if !out.send(&block[..k]) {
                        break;
                    }
                    left -= k as u64;
                }
            }
        }
        Answer::Trickle => {
            if out.send(head("Transfer-Encoding: chunked\r\n").as_bytes()) {
                for _ in 0..600 {
                    if !out.send(&chunk(b" ")) {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
            out.send(b"0\r\n\r\n");
        }
    }
    out.sent
}

/// The connection, counting what was written to it.
struct Counted {
    conn: TcpStream,
    sent: u64,
}

impl Counted {
    /// `false` once the client has gone away.
    fn send(&mut self, bytes: &[u8]) -> bool {
        let ok = self.conn.write_all(bytes).is_ok();
        if ok {
            self.sent += bytes.len() as u64;
        }
        ok
    }
}

fn kubeconfig(dir: &std::path::Path, url: &str) -> std::path::PathBuf {
    let kc = dir.join("kubeconfig");
    std::fs::write(
        &kc,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: \"{url}\"}}\n\
             users:\n- name: u\n  user: {{token: t}}\ncontexts:\n- name: x\n  context: {{cluster: c, user: u}}\ncurrent-context: x\n"
        ),
    )
    .unwrap();
    kc
}

fn plugin(args: &[&str], kubeconfig: &std::path::Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kubectl-vtsnap"))
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env("HOME", "/nonexistent")
        .env_remove("VTSNAP_TIMEOUT")
        .output()
        .unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Round three, item 11: an endless chunked list grew the plugin to 6 GB.
#[test]
fn an_endless_answer_is_refused_at_the_bound() {
    let (url, sent) = serve(Answer::Endless);
    let dir = tempfile::tempdir().unwrap();
    let out = plugin(&["status"], &kubeconfig(dir.path(), &url));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("is larger than {MAX_ANSWER} bytes"))
            && err.contains("GET /api/v1/configmaps?"),
        "{err}"
    );
    // The plugin hung up once it had the bound: what the server got out is the bound
    // and what the sockets' buffers hold, not the answer's end.
    let sent = sent.recv().unwrap();
    assert!(sent < MAX_ANSWER + (32 << 20), "{sent} bytes sent");
}

/// Round three, item 11: a 300 MB answer cost 1.5 GB. One that declares more than the
/// bound is refused from its headers.
#[test]
fn an_answer_declared_too_large_is_refused_unread() {
    let declared = MAX_ANSWER + (16 << 20);
    let (url, sent) = serve(Answer::Declared(declared));
    let dir = tempfile::tempdir().unwrap();
    let out = plugin(
        &["explain", "pvc", "p", "-n", "vitess"],
        &kubeconfig(dir.path(), &url),
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "get PVC vitess/p: the answer to GET /api/v1/namespaces/vitess/persistentvolumeclaims/p \
             is larger than {MAX_ANSWER} bytes (64 MiB)"
        )),
        "{err}"
    );
    let sent = sent.recv().unwrap();
    assert!(sent < 32 << 20, "{sent} bytes sent");
}

/// Round three, item 11: a server sending a byte every 20 s kept the plugin running past
/// 200 s (the read timeout counts a silence). `--timeout` bounds the whole command.
#[test]
fn a_trickle_ends_at_the_command_s_time_limit() {
    let (url, _sent) = serve(Answer::Trickle);
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let out = plugin(
        &["status", "--timeout", "2s"],
        &kubeconfig(dir.path(), &url),
    );
    let took = started.elapsed();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("status did not finish within 2s (--timeout, VTSNAP_TIMEOUT)")
            && err.contains("its last API request: GET /api/v1/configmaps?"),
        "{err}"
    );
    // The trickle alone would last a minute.
    assert!(took < Duration::from_secs(30), "{took:?}");
}
