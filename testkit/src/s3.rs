//! A real S3-compatible server for tests: moto's server (`moto[server]` from PyPI,
//! installed by `scripts/setup-host.sh`), on a free port of 127.0.0.1, stopped when
//! dropped. Buckets and objects are put over plain HTTP with path-style addresses (moto
//! checks no signature); what reads them is the program under test, through its own
//! S3 client.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// moto checks no signature, but takes an unsigned request for an anonymous one, which
/// may not overwrite or delete an object: every request names a user.
const AUTHORIZATION: &str = "Authorization: AWS4-HMAC-SHA256 \
    Credential=testing/20260101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=00";

/// The credentials every client here gives (the server checks none).
pub const ACCESS_KEY_ID: &str = "testing";
pub const SECRET_ACCESS_KEY: &str = "testing";

/// An `object_store` S3 client's settings (its keys in lower case) for the test server
/// at `endpoint` (`http://host:port`).
pub fn client_settings(endpoint: &str) -> Vec<(String, String)> {
    [
        ("aws_endpoint", endpoint),
        ("aws_allow_http", "true"),
        ("aws_region", "us-east-1"),
        ("aws_access_key_id", ACCESS_KEY_ID),
        ("aws_secret_access_key", SECRET_ACCESS_KEY),
    ]
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .to_vec()
}

/// Where `scripts/setup-host.sh` installs moto; `VTSNAP_MOTO_SERVER` names another.
const INSTALLED: &str = "/opt/vtsnap-moto/bin/moto_server";

#[derive(Debug)]
pub struct S3Server {
    child: Child,
    pub port: u16,
}

fn server_binary() -> PathBuf {
    std::env::var_os("VTSNAP_MOTO_SERVER")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(INSTALLED))
}

impl S3Server {
    /// Starts the server on 127.0.0.1 and waits until it answers.
    pub fn start() -> Self {
        Self::start_on("127.0.0.1")
    }

    /// Starts the server listening on `address` (`0.0.0.0`: Pods reach it at the
    /// node's address) and waits until it answers on 127.0.0.1.
    pub fn start_on(address: &str) -> Self {
        let port = crate::vitess::free_port();
        let binary = server_binary();
        let child = Command::new(&binary)
            .args(["-H", address, "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start {} (scripts/setup-host.sh installs it): {e}",
                    binary.display()
                )
            });
        let mut server = Self { child, port };
        let start = Instant::now();
        // The event waited for: the server answers a request (the interpreter's start is
        // seconds on a busy machine; the bound is only against a server that never comes).
        while server.request("GET", "/", &[]).is_err() {
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!("{} ended at its start: {status}", binary.display());
            }
            assert!(
                start.elapsed() < Duration::from_secs(120),
                "moto did not answer on port {port}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        server
    }

    /// `http://127.0.0.1:PORT`, the endpoint an S3 client is given.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The environment an `object_store` S3 client reads to reach this server.
    pub fn client_env(&self) -> Vec<(String, String)> {
        client_settings(&self.endpoint())
            .into_iter()
            .map(|(k, v)| (k.to_ascii_uppercase(), v))
            .collect()
    }

    /// The same as an `object_store` client's settings (its keys in lower case).
    pub fn client_settings(&self) -> Vec<(String, String)> {
        client_settings(&self.endpoint())
    }

    pub fn create_bucket(&self, bucket: &str) {
        let status = self
            .request("PUT", &format!("/{bucket}"), &[])
            .unwrap_or_else(|e| panic!("create bucket {bucket}: {e}"));
        assert_eq!(status, 200, "create bucket {bucket}");
    }

    /// Puts `body` at `key`, in place of what was there.
    pub fn put(&self, bucket: &str, key: &str, body: &[u8]) {
        let (status, answer) = self
            .exchange("PUT", &format!("/{bucket}/{key}"), body)
            .unwrap_or_else(|e| panic!("put {bucket}/{key}: {e}"));
        assert_eq!(status, 200, "put {bucket}/{key}: {answer}");
    }

    /// Puts every file under `dir` at `prefix/<its path under dir>`: a `file` backup
    /// storage copied into the bucket as Vitess's `s3` storage names the same backups.
    pub fn mirror(&self, bucket: &str, prefix: &str, dir: &std::path::Path) {
        let mut todo = vec![dir.to_path_buf()];
        while let Some(d) = todo.pop() {
            for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
                let path = entry
                    .unwrap_or_else(|e| panic!("{}: {e}", d.display()))
                    .path();
                if path.is_dir() {
                    todo.push(path);
                } else {
                    let rel = path.strip_prefix(dir).unwrap_or(&path);
                    let body =
                        std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                    self.put(bucket, &format!("{prefix}/{}", rel.display()), &body);
                }
            }
        }
    }

    pub fn delete(&self, bucket: &str, key: &str) {
        let status = self
            .request("DELETE", &format!("/{bucket}/{key}"), &[])
            .unwrap_or_else(|e| panic!("delete {bucket}/{key}: {e}"));
        assert_eq!(status, 204, "delete {bucket}/{key}");
    }

    /// One HTTP/1.1 request; its status code.
    fn request(&self, method: &str, path: &str, body: &[u8]) -> std::io::Result<u16> {
        self.exchange(method, path, body).map(|(status, _)| status)
    }

    /// One HTTP/1.1 request; its status code and the whole answer, for messages.
    fn exchange(&self, method: &str, path: &str, body: &[u8]) -> std::io::Result<(u16, String)> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port))?;
        s.set_read_timeout(Some(Duration::from_secs(60)))?;
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: {}\r\n{AUTHORIZATION}\r\nConnection: close\r\n\r\n",
            self.port,
            body.len()
        )?;
        s.write_all(body)?;
        let mut answer = Vec::new();
        s.read_to_end(&mut answer)?;
        let text = String::from_utf8_lossy(&answer).into_owned();
        let status = text
            .split_whitespace()
            .nth(1)
            .and_then(|code| code.parse().ok())
            .ok_or_else(|| std::io::Error::other(format!("no HTTP status in {text:.80}")))?;
        Ok((status, text))
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
