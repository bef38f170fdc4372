//! What `make bench-vitess` observes beside the programs it times: a tablet's type as
//! vtctld records it (sampled), the disk's byte counters, and mysqld's own shutdown and
//! start from its error log.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use vtsnap_core::vtctld::TabletType;
use vtsnap_core::vtctld::client::VtctldClient;
use vtsnap_testkit::vitess::{KEYSPACE, SHARD};

/// How often the type sampler asks vtctld.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(50);

/// Samples every tablet's type from vtctld until stopped; per tablet, the time its type
/// was not REPLICA. A tablet in BACKUP (the builtin engine) or DRAINED (vtsnap's cold
/// fence) serves no queries: that time is its time out of service.
#[derive(Debug)]
pub struct TypeSampler {
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<BTreeMap<String, Duration>>,
    samples: Arc<Mutex<u64>>,
}

impl TypeSampler {
    pub fn start(client: VtctldClient) -> Self {
        let (stop, mut stopped) = tokio::sync::watch::channel(false);
        let samples = Arc::new(Mutex::new(0));
        let counted = samples.clone();
        let task = tokio::spawn(async move {
            let mut out: BTreeMap<String, Duration> = BTreeMap::new();
            let mut last = Instant::now();
            let mut not_serving: Vec<String> = Vec::new();
            loop {
                let now = Instant::now();
                for alias in &not_serving {
                    *out.entry(alias.clone()).or_default() += now - last;
                }
                last = now;
                if let Ok(tablets) = client.get_tablets(KEYSPACE, SHARD).await {
                    not_serving = tablets
                        .iter()
                        .filter(|t| {
                            t.r#type != TabletType::Replica as i32
                                && t.r#type != TabletType::Primary as i32
                        })
                        .filter_map(|t| t.alias.as_ref())
                        .map(|a| format!("{}-{:010}", a.cell, a.uid))
                        .collect();
                    *counted.lock().unwrap_or_else(|e| e.into_inner()) += 1;
                }
                tokio::select! {
                    _ = stopped.changed() => break,
                    () = tokio::time::sleep(SAMPLE_EVERY) => {}
                }
            }
            let now = Instant::now();
            for alias in &not_serving {
                *out.entry(alias.clone()).or_default() += now - last;
            }
            out
        });
        Self {
            stop,
            task,
            samples,
        }
    }

    /// Stops sampling; the time `alias` was out of service while it ran.
    pub async fn stop(self, alias: &str) -> Duration {
        let _ = self.stop.send(true);
        let samples = *self.samples.lock().unwrap_or_else(|e| e.into_inner());
        assert!(
            samples > 0,
            "the type sampler never got an answer from vtctld"
        );
        let out = self
            .task
            .await
            .unwrap_or_else(|e| panic!("type sampler: {e}"));
        out.get(alias).copied().unwrap_or_default()
    }
}

/// Bytes read from and written to one block device (`/sys/dev/block/M:m/stat`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskBytes {
    pub read: u64,
    pub written: u64,
}

/// The block device holding `dir` (the lab's disk image, its backups, everything).
#[derive(Debug, Clone)]
pub struct Disk {
    stat: std::path::PathBuf,
}

impl Disk {
    pub fn of(dir: &Path) -> Self {
        use std::os::unix::fs::MetadataExt;
        let dev = std::fs::metadata(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .dev();
        // glibc's gnu_dev_major / gnu_dev_minor
        let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
        let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
        let stat = Path::new("/sys/dev/block").join(format!("{major}:{minor}/stat"));
        assert!(
            stat.exists(),
            "{} (the disk of {}) is missing",
            stat.display(),
            dir.display()
        );
        Self { stat }
    }

    /// The counters now, after `sync` (what a phase wrote is on the disk, not in the page
    /// cache, when it is counted).
    pub fn now(&self) -> DiskBytes {
        let _ = std::process::Command::new("sync").status();
        let text = std::fs::read_to_string(&self.stat)
            .unwrap_or_else(|e| panic!("{}: {e}", self.stat.display()));
        parse_disk_stat(&text)
            .unwrap_or_else(|| panic!("{}: unreadable: {text:?}", self.stat.display()))
    }
}

/// Fields 3 and 7 of a block device's `stat`: sectors read and written, of 512 bytes
/// (Documentation/block/stat.rst in Linux).
pub fn parse_disk_stat(text: &str) -> Option<DiskBytes> {
    let f: Vec<u64> = text
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    Some(DiskBytes {
        read: f.get(2)? * 512,
        written: f.get(6)? * 512,
    })
}

impl DiskBytes {
    pub fn since(self, before: Self) -> Self {
        Self {
            read: self.read.saturating_sub(before.read),
            written: self.written.saturating_sub(before.written),
        }
    }
}

/// mysqld's own shutdown and start, from its error log.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MysqldRestart {
    pub shutdown_ms: u64,
    pub start_ms: u64,
}

/// MySQL's error-log codes (MySQL 8.0+ and 9: the server's `messages_to_error_log.txt`).
const SHUTDOWN_ASKED: [&str; 2] = ["[MY-013172]", "[MY-010949]"];
const SHUTDOWN_COMPLETE: &str = "[MY-010910]";
const SERVER_START: [&str; 2] = ["[MY-015015]", "[MY-010116]"];
const READY: &str = "[MY-010931]";

fn stamp(line: &str) -> Option<Timestamp> {
    line.split_whitespace().next()?.parse().ok()
}

/// The first shutdown of mysqld logged at or after `since` in `log`, and the start after
/// it: from the request to "Shutdown complete", and from the server's start to "ready for
/// connections". None when the log holds no complete shutdown and start after `since`.
pub fn mysqld_restart(log: &str, since: Timestamp) -> Option<MysqldRestart> {
    let lines: Vec<(Timestamp, &str)> = log
        .lines()
        .filter_map(|l| Some((stamp(l)?, l)))
        .filter(|(t, _)| *t >= since)
        .collect();
    let has = |l: &str, codes: &[&str]| codes.iter().any(|c| l.contains(c));
    let asked = lines.iter().position(|(_, l)| has(l, &SHUTDOWN_ASKED))?;
    let done = asked
        + lines[asked..]
            .iter()
            .position(|(_, l)| l.contains(SHUTDOWN_COMPLETE))?;
    let start = done
        + lines[done..]
            .iter()
            .position(|(_, l)| has(l, &SERVER_START))?;
    let ready = start + lines[start..].iter().position(|(_, l)| l.contains(READY))?;
    let ms = |a: usize, b: usize| {
        let d = lines[b].0.duration_since(lines[a].0);
        u64::try_from(d.as_millis()).unwrap_or(0)
    };
    Some(MysqldRestart {
        shutdown_ms: ms(asked, done),
        start_ms: ms(start, ready),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "\
2026-12-07T02:10:01.000000Z 0 [System] [MY-010931] [Server] /usr/sbin/mysqld: ready for connections.
2026-12-07T02:10:10.000000Z 12 [System] [MY-013172] [Server] Received SHUTDOWN from user vt_dba. Shutting down mysqld (Version: 9.7.4-2).
2026-12-07T02:10:10.250000Z 0 [System] [MY-010910] [Server] /usr/sbin/mysqld: Shutdown complete (mysqld 9.7.4-2)  (Debian).
2026-12-07T02:10:11.000000Z mysqld_safe Logging to '/vt/vtdataroot/vt_0000000102/error.log'.
2026-12-07T02:10:11.100000Z 0 [System] [MY-015015] [Server] MySQL Server - start.
2026-12-07T02:10:11.200000Z 0 [System] [MY-010116] [Server] /usr/sbin/mysqld (mysqld 9.7.4-2) starting as process 731
2026-12-07T02:10:11.900000Z 0 [System] [MY-010931] [Server] /usr/sbin/mysqld: ready for connections. Version: '9.7.4-2'
";

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn the_restart_is_read_from_request_to_complete_and_start_to_ready() {
        let r = mysqld_restart(LOG, at("2026-12-07T02:10:05Z")).unwrap();
        assert_eq!(
            r,
            MysqldRestart {
                shutdown_ms: 250,
                start_ms: 800
            }
        );
    }

    #[test]
    fn lines_before_the_run_and_an_unfinished_restart_are_not_read() {
        assert_eq!(mysqld_restart(LOG, at("2026-12-07T02:10:10.1Z")), None);
        let cut: String = LOG.lines().take(4).collect::<Vec<_>>().join("\n");
        assert_eq!(mysqld_restart(&cut, at("2026-12-07T02:10:05Z")), None);
    }

    #[test]
    fn the_disk_counters_are_sectors_of_512_bytes() {
        let s = "  100 0 2048 5 300 0 4096 9 0 1 2 0 0 0 0 0 0";
        assert_eq!(
            parse_disk_stat(s),
            Some(DiskBytes {
                read: 2048 * 512,
                written: 4096 * 512
            })
        );
        assert_eq!(parse_disk_stat("1 2"), None);
        assert_eq!(parse_disk_stat("a b c d e f g"), None);
        let d = DiskBytes {
            read: 10,
            written: 5,
        }
        .since(DiskBytes {
            read: 4,
            written: 9,
        });
        assert_eq!(
            d,
            DiskBytes {
                read: 6,
                written: 0
            }
        );
    }
}
