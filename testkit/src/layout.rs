//! A Vitess tablet directory as a vitess-operator pod leaves it on its data volume.
//!
//! Paths follow `go/vt/mysqlctl/mycnf_gen.go` (`NewMycnf`): `vt_<uid %010d>/{data, innodb/data,
//! innodb/logs, bin-logs/vt-<uid>-bin.*, relay-logs/vt-<uid>-relay-bin.*, relay-logs/relay-log.info,
//! master.info, tmp, mysql.pid, error.log}`; with `symlinked_top_dirs`, Vitess's `createTopDir`
//! variant where `data`, `innodb`, `relay-logs`, `bin-logs` are symlinks to
//! `$VTDATAROOT/<dir>/vt_<uid>`. Options come from `config/mycnf/default.cnf` and the flavor
//! fragment (`mariadb10.cnf`, `mysql80.cnf`); `socket` is where vitess-operator's
//! `init-mysql-socket` points it. Semi-sync `plugin-load` lines are left out: Debian's MariaDB
//! builds semi-sync in and has no such plugin files.

use std::fs;
use std::io;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use vtsnap_core::naming::TabletUid;

use crate::binlog;

/// The container path vitess-operator mounts the data volume's `vtdataroot` subPath at.
pub const MOUNT: &str = "/vt/vtdataroot";
/// Where `init-mysql-socket` points `socket`.
pub const SOCKET: &str = "/vt/socket/mysql.sock";
/// Pods run as uid/gid 999 (vitess-operator `pkg/operator/vttablet/pod.go`).
pub const POD_UID: u32 = 999;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    MariaDb,
    MySql80,
}

/// A builder for a tablet directory; `write` lays it out under a vtdataroot directory.
#[derive(Debug, Clone)]
pub struct TabletLayout {
    pub uid: TabletUid,
    pub flavor: Flavor,
    pub server_id: u32,
    pub symlinked_top_dirs: bool,
    pub binlogs: usize,
    pub relay_logs: usize,
    pub crash_image: bool,
    pub auto_cnf: bool,
    pub restore_in_progress: bool,
    pub data_files: usize,
    pub data_file_bytes: u64,
    pub chown_to_pod_user: bool,
    /// mysqld's TCP port (tablets sharing the host's network need their own).
    pub port: u16,
    /// Listen on 127.0.0.1 only.
    pub bind_loopback: bool,
    /// Pad the last binlog with events to at least this many bytes (0: as small as it is).
    pub last_binlog_bytes: u64,
}

impl TabletLayout {
    /// A MariaDB tablet with three binlogs, two relay logs and a few data files.
    pub fn mariadb(uid: u32) -> Self {
        Self {
            uid: TabletUid::new(uid),
            flavor: Flavor::MariaDb,
            server_id: 1_000_000 + uid,
            symlinked_top_dirs: false,
            binlogs: 3,
            relay_logs: 2,
            crash_image: false,
            auto_cnf: false,
            restore_in_progress: false,
            data_files: 4,
            data_file_bytes: 16 * 1024,
            chown_to_pod_user: true,
            port: 3306,
            bind_loopback: false,
            last_binlog_bytes: 0,
        }
    }

    /// A MySQL 8.0 tablet: like [`Self::mariadb`], plus `data/auto.cnf`.
    pub fn mysql80(uid: u32) -> Self {
        Self {
            flavor: Flavor::MySql80,
            auto_cnf: true,
            ..Self::mariadb(uid)
        }
    }

    pub fn symlinked_top_dirs(mut self) -> Self {
        self.symlinked_top_dirs = true;
        self
    }

    /// The image of a server that was running: last binlog in use, with checkpoints.
    pub fn crash_image(mut self) -> Self {
        self.crash_image = true;
        self
    }

    pub fn restore_in_progress(mut self) -> Self {
        self.restore_in_progress = true;
        self
    }

    /// The last binlog holds at least `bytes` of events (a busy server's binlog).
    pub fn last_binlog_bytes(mut self, bytes: u64) -> Self {
        self.last_binlog_bytes = bytes;
        self
    }

    pub fn data_files(mut self, n: usize, bytes_each: u64) -> Self {
        self.data_files = n;
        self.data_file_bytes = bytes_each;
        self
    }

    pub fn tablet_dir(&self) -> String {
        format!("{MOUNT}/{}", self.uid.tablet_dir_name())
    }

    pub fn binlog_base(&self) -> String {
        format!("vt-{}-bin", self.uid.padded())
    }

    pub fn relay_base(&self) -> String {
        format!("vt-{}-relay-bin", self.uid.padded())
    }

    /// The my.cnf text (container paths).
    pub fn mycnf(&self) -> String {
        let t = self.tablet_dir();
        let mut s = format!(
            "[mysqld]\n\
             # paths (go/vt/mysqlctl/mycnf_gen.go)\n\
             datadir = {t}/data\n\
             innodb_data_home_dir = {t}/innodb/data\n\
             innodb_log_group_home_dir = {t}/innodb/logs\n\
             log-error = {t}/error.log\n\
             log-bin = {t}/bin-logs/{bin}\n\
             relay-log = {t}/relay-logs/{relay}\n\
             relay-log-index = {t}/relay-logs/{relay}.index\n\
             relay-log-info-file = {t}/relay-logs/relay-log.info\n\
             master-info-file = {t}/master.info\n\
             pid-file = {t}/mysql.pid\n\
             port = {port}\n\
             secure-file-priv = {t}/tmp\n\
             server-id = {sid}\n\
             socket = {SOCKET}\n\
             tmpdir = {t}/tmp\n\
             slow-query-log-file = {t}/slow-query.log\n\
             general_log_file = {t}/general.log\n\
             # config/mycnf/default.cnf\n\
             back_log = 50\n\
             connect_timeout = 30\n\
             default-storage-engine = innodb\n\
             innodb_buffer_pool_size = 64M\n\
             innodb_data_file_path = ibdata1:10M:autoextend\n\
             innodb_file_per_table\n\
             innodb_lock_wait_timeout = 20\n\
             innodb_log_file_size = 48M\n\
             max_allowed_packet = 16M\n\
             max_connections = 100\n\
             read-only\n\
             skip-name-resolve\n\
             skip_slave_start\n\
             slave_net_timeout = 60\n\
             slow-query-log\n\
             transaction-isolation = REPEATABLE-READ\n",
            bin = self.binlog_base(),
            relay = self.relay_base(),
            sid = self.server_id,
            port = self.port,
        );
        if self.bind_loopback {
            s.push_str("bind-address = 127.0.0.1\n");
        }
        match self.flavor {
            Flavor::MariaDb => s.push_str(
                "# config/mycnf/mariadb10.cnf\n\
                 sql_mode = STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION\n\
                 gtid_strict_mode = 1\n\
                 innodb_stats_persistent = 0\n\
                 sync_binlog = 1\n\
                 expire_logs_days = 3\n\
                 binlog_format = ROW\n\
                 log_slave_updates\n\
                 character_set_server = utf8\n\
                 collation_server = utf8_general_ci\n",
            ),
            Flavor::MySql80 => s.push_str(
                "# config/mycnf/mysql80.cnf\n\
                 gtid_mode = ON\n\
                 enforce_gtid_consistency\n\
                 relay_log_recovery = 1\n\
                 binlog_expire_logs_seconds = 259200\n\
                 mysqlx = 0\n\
                 super-read-only\n\
                 default_authentication_plugin = mysql_native_password\n\
                 loose_rpl_semi_sync_master_timeout = 1000000000000000000\n",
            ),
        }
        s
    }

    /// Writes only my.cnf and the empty directories a server needs to initialize.
    pub fn write_skeleton(&self, vtdataroot: &Path) -> io::Result<PathBuf> {
        let tdir = vtdataroot.join(self.uid.tablet_dir_name());
        for top in ["data", "innodb", "relay-logs", "bin-logs"] {
            if self.symlinked_top_dirs {
                let real = vtdataroot.join(top).join(self.uid.tablet_dir_name());
                fs::create_dir_all(&real)?;
                fs::create_dir_all(&tdir)?;
                symlink(
                    format!("{MOUNT}/{top}/{}", self.uid.tablet_dir_name()),
                    tdir.join(top),
                )?;
            } else {
                fs::create_dir_all(tdir.join(top))?;
            }
        }
        for sub in ["innodb/data", "innodb/logs", "tmp"] {
            fs::create_dir_all(resolve(vtdataroot, &tdir.join(sub)))?;
        }
        fs::write(tdir.join("my.cnf"), self.mycnf())?;
        fs::set_permissions(tdir.join("my.cnf"), fs::Permissions::from_mode(0o644))?;
        Ok(tdir)
    }

    /// Writes the whole tablet directory with synthetic (but well-formed) files.
    pub fn write(&self, vtdataroot: &Path) -> io::Result<PathBuf> {
        let tdir = self.write_skeleton(vtdataroot)?;
        let at = |sub: &str| resolve(vtdataroot, &tdir.join(sub));
        let t = self.tablet_dir();
        let p = self.uid.padded();

        fs::create_dir_all(at("data/vt_commerce"))?;
        fs::create_dir_all(at("data/mysql"))?;
        for i in 0..self.data_files {
            let f = fs::File::create(at(&format!("data/vt_commerce/t{i}.ibd")))?;
            f.set_len(self.data_file_bytes)?;
        }
        fs::write(at("innodb/data/ibdata1"), b"ibdata")?;
        fs::write(at("innodb/logs/ib_logfile0"), b"redo")?;
        if self.auto_cnf {
            fs::write(
                at("data/auto.cnf"),
                "[auto]\nserver-uuid=3e11fa47-71ca-11e1-9e33-c80aa9429562\n",
            )?;
        }

        let mut index = String::new();
        for n in 1..=self.binlogs {
            let name = format!("{}.{n:06}", self.binlog_base());
            let last = n == self.binlogs;
            let in_use = last && self.crash_image;
            let checkpoints: Vec<String> = if self.flavor == Flavor::MariaDb {
                let prev = format!("{}.{:06}", self.binlog_base(), n.saturating_sub(1).max(1));
                vec![prev, name.clone()]
            } else {
                Vec::new()
            };
            let refs: Vec<&str> = checkpoints.iter().map(String::as_str).collect();
            let path = at(&format!("bin-logs/{name}"));
            if last && self.last_binlog_bytes > 0 {
                binlog::write_padded(&path, in_use, &refs, self.last_binlog_bytes)?;
            } else {
                fs::write(path, binlog::file(in_use, &refs))?;
            }
            index.push_str(&format!("{t}/bin-logs/{name}\n"));
        }
        if self.binlogs > 0 {
            fs::write(
                at(&format!("bin-logs/{}.index", self.binlog_base())),
                &index,
            )?;
            if self.flavor == Flavor::MariaDb && !self.crash_image {
                fs::write(
                    at(&format!("bin-logs/{}.state", self.binlog_base())),
                    b"0-1-42\n",
                )?;
            }
        }

        let mut relay_index = String::new();
        for n in 1..=self.relay_logs {
            let name = format!("{}.{n:06}", self.relay_base());
            fs::write(at(&format!("relay-logs/{name}")), binlog::file(false, &[]))?;
            relay_index.push_str(&format!("{t}/relay-logs/{name}\n"));
        }
        if self.relay_logs > 0 {
            fs::write(
                at(&format!("relay-logs/{}.index", self.relay_base())),
                &relay_index,
            )?;
            fs::write(
                at("relay-logs/relay-log.info"),
                format!(
                    "5\n{t}/relay-logs/{}.{:06}\n4\nvt-0000000001-bin.000001\n328\n0\n",
                    self.relay_base(),
                    self.relay_logs
                ),
            )?;
            fs::write(
                tdir.join("master.info"),
                "33\nvt-0000000001-bin.000001\n328\n10.0.0.1\nvt_repl\n\n3306\n",
            )?;
        }
        fs::write(tdir.join("error.log"), format!("started as vt-{p}\n"))?;
        if self.crash_image {
            fs::write(tdir.join("mysql.pid"), "4242\n")?;
        }
        if self.restore_in_progress {
            fs::write(tdir.join("restore_in_progress"), b"")?;
        }
        if self.chown_to_pod_user && nix_is_root() {
            chown_tree(vtdataroot, POD_UID)?;
        }
        Ok(tdir)
    }
}

/// The host path of `p` (a path under the host's vtdataroot), following symlinks whose
/// targets are container paths under [`MOUNT`].
pub fn resolve(vtdataroot: &Path, p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        out.push(c);
        if let Ok(t) = fs::read_link(&out)
            && let Ok(rest) = t.strip_prefix(MOUNT)
        {
            out = vtdataroot.join(rest);
        }
    }
    out
}

fn nix_is_root() -> bool {
    fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
        .unwrap_or(false)
}

/// Gives everything under `root` to `uid:uid`, as fsGroup would.
pub fn chown_tree(root: &Path, uid: u32) -> io::Result<()> {
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d)? {
            let e = e?;
            let p = e.path();
            std::os::unix::fs::lchown(&p, Some(uid), Some(uid))?;
            if e.file_type()?.is_dir() {
                stack.push(p);
            }
        }
    }
    Ok(())
}
