//! Holding a real mysqld down: a MariaDB container laid out as a vitess-operator tablet,
//! the test kit's fake mysqlctld on the pod-style unix socket, and the node helper's real
//! stop / hold / release. A "restarter" (the RFC saw a `Start` ~8 s after a clean
//! shutdown) calls `Start` every 500 ms while mysqld is not running (a `Start` while
//! mysqld runs makes mysqlctld exit and take mysqld with it): held, it fails; not held, it
//! wins.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use vtsnap_node::cgroup::{Cgroup, Roots};
use vtsnap_node::mysqlctl::{
    MysqlCtl, Started, mysqld_answers, start_unless_running, wait_for_mysqld,
};
use vtsnap_testkit::fake_mysqlctld::FakeMysqlctld;
use vtsnap_testkit::mariadb::SupervisedTablet;

/// Every 500 ms, calls `Start` unless mysqld runs (its pid file is there, as `mysqld_safe`
/// checks, or it answers), and notes whether mysqld ever answered.
struct Restarter {
    stop: Arc<AtomicBool>,
    saw_mysqld: Arc<AtomicBool>,
    attempts: Arc<AtomicU32>,
    task: tokio::task::JoinHandle<()>,
}

impl Restarter {
    fn spawn(ctl: MysqlCtl, mysqld_socket: &Path, pid_file: &Path) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let saw = Arc::new(AtomicBool::new(false));
        let attempts = Arc::new(AtomicU32::new(0));
        let (s, w, a, sock, pid) = (
            stop.clone(),
            saw.clone(),
            attempts.clone(),
            mysqld_socket.to_path_buf(),
            pid_file.to_path_buf(),
        );
        let task = tokio::spawn(async move {
            while !s.load(Ordering::SeqCst) {
                a.fetch_add(1, Ordering::SeqCst);
                if !pid.exists() && !mysqld_answers(&sock).await {
                    let _ = ctl.start(Duration::from_millis(400)).await;
                }
                if mysqld_answers(&sock).await {
                    w.store(true, Ordering::SeqCst);
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        });
        Self {
            stop,
            saw_mysqld: saw,
            attempts,
            task,
        }
    }

    /// Stops after at least `n` rounds; returns whether mysqld ever answered.
    async fn finish_after(self, n: u32) -> bool {
        while self.attempts.load(Ordering::SeqCst) < n {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.task.await;
        self.saw_mysqld.load(Ordering::SeqCst)
    }
}

/// The `Start` calls mysqlctld has served so far.
fn starts(fake: &FakeMysqlctld) -> usize {
    fake.calls()
        .iter()
        .filter(|c| c.as_str() == "Start")
        .count()
}

/// Thaws on drop so a failed assertion never leaves the container frozen.
struct Thaw(Cgroup);

impl Drop for Thaw {
    fn drop(&mut self) {
        let _ = self.0.thaw();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_mysqld_stays_down_and_an_unheld_one_is_restarted() {
    let t = SupervisedTablet::start("vtsnap-node-", 101).await;
    let fake = FakeMysqlctld::new(&t.socket_dir, &t.tablet_dir);
    let _serving = fake.serve().await;
    let mysqld_sock = fake.mysql_socket();
    let pid_file = t.tablet_dir.join("mysql.pid");
    let ctl = MysqlCtl::new(&t.socket_dir.join("mysqlctl.sock")).unwrap();
    assert!(
        mysqld_answers(&mysqld_sock).await,
        "mysqld must be up at the start"
    );

    // stop: a clean shutdown through mysqlctld.
    ctl.shutdown(Duration::from_secs(120)).await.unwrap();
    assert!(!mysqld_answers(&mysqld_sock).await);

    // hold: freeze the container's cgroup, found from the container ID.
    let (pid, cg) = Cgroup::containing(&Roots::default(), t.db.id())
        .unwrap()
        .expect("no process of the container found");
    assert!(pid > 1);
    cg.freeze().unwrap();
    let guard = Thaw(cg.clone());

    // The restarter cannot bring mysqld back while held: every round's Start fails.
    let starts_before = starts(&fake);
    let r = Restarter::spawn(ctl.clone(), &mysqld_sock, &pid_file);
    assert!(!r.finish_after(6).await, "mysqld came back while held");
    assert!(!mysqld_answers(&mysqld_sock).await);
    assert!(
        starts(&fake) - starts_before >= 6,
        "every round called Start: {:?}",
        fake.calls()
    );

    // release: thaw, Start, wait for mysqld.
    cg.thaw().unwrap();
    drop(guard);
    ctl.start(Duration::from_secs(60)).await.unwrap();
    wait_for_mysqld(&mysqld_sock, Duration::from_secs(60))
        .await
        .unwrap();

    // Without the hold the restarter wins.
    ctl.shutdown(Duration::from_secs(120)).await.unwrap();
    assert!(!mysqld_answers(&mysqld_sock).await);
    let r = Restarter::spawn(ctl.clone(), &mysqld_sock, &pid_file);
    assert!(
        r.finish_after(6).await,
        "without a hold, the restarter should have restarted mysqld"
    );
    assert!(
        !fake.exited(),
        "no Start met a running mysqld: {:?}",
        fake.calls()
    );

    t.db.remove().await;
}

/// A release is done when mysqld answers, not when mysqlctld replies: the real one replies
/// only at its next once-a-second look at the socket. The `Start` call is not cancelled
/// either: it runs on to its reply.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_ends_when_mysqld_answers_and_lets_start_reply_later() {
    let t = SupervisedTablet::start("vtsnap-node-", 102).await;
    let fake = FakeMysqlctld::new(&t.socket_dir, &t.tablet_dir)
        .with_start_timeout(Duration::from_secs(120))
        .with_start_reply_after(Duration::from_secs(5));
    let _serving = fake.serve().await;
    let mysqld_sock = fake.mysql_socket();
    let ctl_sock = t.socket_dir.join("mysqlctl.sock");
    MysqlCtl::new(&ctl_sock)
        .unwrap()
        .shutdown(Duration::from_secs(120))
        .await
        .unwrap();
    assert!(!mysqld_answers(&mysqld_sock).await);

    let started = start_unless_running(&ctl_sock, &mysqld_sock, Duration::from_secs(120))
        .await
        .unwrap();
    assert_eq!(started, Started::Started);
    let replied = |f: &FakeMysqlctld| f.timings().iter().any(|(what, _)| *what == "Start");
    assert!(
        !replied(&fake),
        "the release waited for mysqlctld's reply: {:?}",
        fake.calls()
    );
    assert!(mysqld_answers(&mysqld_sock).await);
    // The call runs on in the background until mysqlctld replies.
    while !replied(&fake) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        fake.calls()
            .iter()
            .filter(|c| c.as_str() == "Start")
            .count(),
        1,
        "one Start, never repeated: {:?}",
        fake.calls()
    );
}
