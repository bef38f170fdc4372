//! A MySQL/MariaDB option file (`my.cnf`) read strictly and rewritten line by line.
//!
//! Only the lines that change are touched; comments, order and spacing stay as they were,
//! so the result is still a my.cnf that mysqld (or any other launcher) can use as is.
//! Option names compare the way mysqld compares them: `-` and `_` are the same, and a
//! `loose-` prefix is ignored.

use crate::naming::TabletUid;

/// Sections whose options mysqld (or mariadbd) reads.
fn is_server_section(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    matches!(name.as_str(), "mysqld" | "server" | "mariadb" | "mariadbd")
        || name.starts_with("mysqld-")
        || name.starts_with("mariadb-")
}

/// Why an option file cannot be read safely.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MyCnfError {
    #[error("line {line}: unterminated section header {text:?}")]
    BadSection { line: usize, text: String },
    #[error("line {line}: option {text:?} appears before any [section]")]
    OptionOutsideSection { line: usize, text: String },
    #[error("line {line}: cannot parse {text:?} as `key`, `key = value`, [section] or !include")]
    Unparsable { line: usize, text: String },
    #[error("line {line}: server-id {value:?} is not a number")]
    BadServerId { line: usize, value: String },
    #[error("line {line}: server-id {value} is out of range (0 to {max})", max = u32::MAX)]
    ServerIdOutOfRange { line: usize, value: String },
    #[error("{len} bytes is too large for an option file (at most {MAX_LEN})")]
    TooLarge { len: usize },
    #[error("no [mysqld] section to hold server-id")]
    NoServerSection,
}

#[derive(Debug, Clone)]
enum Line {
    /// Blank lines, comments and `!include` directives: kept verbatim.
    Verbatim(String),
    Section {
        raw: String,
        server: bool,
    },
    Option {
        raw: String,
        key: String,
        value: Option<String>,
        server: bool,
    },
}

/// The largest option file read: real ones are a few KiB, and parsing keeps a copy of
/// every line, so an unbounded file would cost many times its size in memory.
pub const MAX_LEN: usize = 1 << 20;

/// A parsed option file that remembers its original text line by line.
#[derive(Debug, Clone)]
pub struct MyCnf {
    lines: Vec<Line>,
    trailing_newline: bool,
}

/// Option names normalized the way mysqld matches them.
pub fn normalize_key(key: &str) -> String {
    let k = key.trim().to_ascii_lowercase().replace('-', "_");
    match k.strip_prefix("loose_") {
        Some(rest) => rest.to_owned(),
        None => k,
    }
}

fn is_key_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')
}

/// The value of an option with surrounding quotes and an inline ` # comment` removed.
fn clean_value(raw: &str) -> String {
    let v = raw.trim();
    for q in ['"', '\''] {
        if let Some(inner) = v.strip_prefix(q).and_then(|r| r.split_once(q)) {
            return inner.0.to_owned();
        }
    }
    let mut cut = v.len();
    let bytes = v.as_bytes();
    for (i, b) in bytes.iter().enumerate() {
        if *b == b'#' && i > 0 && bytes[i - 1].is_ascii_whitespace() {
            cut = i;
            break;
        }
    }
    v[..cut].trim_end().to_owned()
}

impl MyCnf {
    pub fn parse(text: &str) -> Result<Self, MyCnfError> {
        if text.len() > MAX_LEN {
            return Err(MyCnfError::TooLarge { len: text.len() });
        }
        let mut lines = Vec::new();
        let mut in_section: Option<bool> = None;
        for (idx, raw_line) in text.lines().enumerate() {
            let line_no = idx + 1;
            let raw = raw_line.trim_end_matches('\r').to_owned();
            let t = raw.trim();
            if t.is_empty() || t.starts_with('#') || t.starts_with(';') || t.starts_with('!') {
                if t.starts_with('!')
                    && !(t.starts_with("!include ") || t.starts_with("!includedir "))
                {
                    return Err(MyCnfError::Unparsable {
                        line: line_no,
                        text: raw,
                    });
                }
                lines.push(Line::Verbatim(raw));
                continue;
            }
            if let Some(rest) = t.strip_prefix('[') {
                let Some((name, tail)) = rest.split_once(']') else {
                    return Err(MyCnfError::BadSection {
                        line: line_no,
                        text: raw,
                    });
                };
                let tail = tail.trim();
                if name.trim().is_empty() || !(tail.is_empty() || tail.starts_with('#')) {
                    return Err(MyCnfError::BadSection {
                        line: line_no,
                        text: raw,
                    });
                }
                let server = is_server_section(name.trim());
                in_section = Some(server);
                lines.push(Line::Section { raw, server });
                continue;
            }
            let (key, value) = match t.split_once('=') {
                Some((k, v)) => (k.trim(), Some(clean_value(v))),
                None => (t, None),
            };
            if key.is_empty() || !key.chars().all(is_key_char) {
                return Err(MyCnfError::Unparsable {
                    line: line_no,
                    text: raw,
                });
            }
            let Some(server) = in_section else {
                return Err(MyCnfError::OptionOutsideSection {
                    line: line_no,
                    text: raw,
                });
            };
            if normalize_key(key) == "server_id" && server {
                let v = value.clone().unwrap_or_default();
                if v.parse::<u32>().is_err() {
                    let digits = !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit());
                    return Err(if digits {
                        MyCnfError::ServerIdOutOfRange {
                            line: line_no,
                            value: v,
                        }
                    } else {
                        MyCnfError::BadServerId {
                            line: line_no,
                            value: v,
                        }
                    });
                }
            }
            lines.push(Line::Option {
                key: normalize_key(key),
                raw,
                value,
                server,
            });
        }
        Ok(Self {
            lines,
            trailing_newline: text.ends_with('\n'),
        })
    }

    /// The effective value of a server option: the last one wins, as in mysqld.
    pub fn get(&self, key: &str) -> Option<&str> {
        let want = normalize_key(key);
        self.lines.iter().rev().find_map(|l| match l {
            Line::Option {
                key,
                value,
                server: true,
                ..
            } if *key == want => Some(value.as_deref().unwrap_or("")),
            _ => None,
        })
    }

    /// The effective server-id, if any.
    pub fn server_id(&self) -> Option<u32> {
        self.get("server-id").and_then(|v| v.parse().ok())
    }

    /// Rewrites every reference to tablet `from` (its `vt_<uid>` directory and
    /// `vt-<uid>-` log file prefix) into `to`, and sets every server-id to `server_id`.
    /// Idempotent: rewriting an already rewritten file changes nothing.
    /// Returns the new text and the normalized keys whose values changed.
    pub fn rewrite(
        &self,
        from: TabletUid,
        to: TabletUid,
        server_id: u32,
    ) -> Result<(String, Vec<String>), MyCnfError> {
        let mut out: Vec<String> = Vec::with_capacity(self.lines.len() + 1);
        let mut changed = Vec::new();
        let mut saw_server_id = false;
        let mut first_server_section: Option<usize> = None;
        for line in &self.lines {
            match line {
                Line::Verbatim(raw) => out.push(raw.clone()),
                Line::Section { raw, server } => {
                    if *server && first_server_section.is_none() {
                        first_server_section = Some(out.len());
                    }
                    out.push(raw.clone());
                }
                Line::Option {
                    raw, key, server, ..
                } => {
                    if *server && key == "server_id" {
                        saw_server_id = true;
                        let indent: String =
                            raw.chars().take_while(|c| c.is_whitespace()).collect();
                        let spelled = raw.trim().split('=').next().unwrap_or("server-id").trim();
                        let new = format!("{indent}{spelled} = {server_id}");
                        if new != *raw {
                            changed.push(key.clone());
                        }
                        out.push(new);
                        continue;
                    }
                    let new = replace_uid_refs(raw, from, to);
                    if new != *raw {
                        changed.push(key.clone());
                    }
                    out.push(new);
                }
            }
        }
        if !saw_server_id {
            let at = first_server_section.ok_or(MyCnfError::NoServerSection)?;
            out.insert(at + 1, format!("server-id = {server_id}"));
            changed.push("server_id".to_owned());
        }
        let mut text = out.join("\n");
        if self.trailing_newline || !saw_server_id {
            text.push('\n');
        }
        Ok((text, changed))
    }
}

/// Replaces `vt_<from %010d>` (as a whole name) and `vt-<from %010d>-` in `s`.
pub fn replace_uid_refs(s: &str, from: TabletUid, to: TabletUid) -> String {
    let dir_from = from.tablet_dir_name();
    let dir_to = to.tablet_dir_name();
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(pos) = rest.find(&dir_from) {
        let after = &rest[pos + dir_from.len()..];
        out.push_str(&rest[..pos]);
        if after
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        {
            out.push_str(&dir_from);
        } else {
            out.push_str(&dir_to);
        }
        rest = after;
    }
    out.push_str(rest);
    out.replace(&from.log_file_prefix(), &to.log_file_prefix())
}

/// True if `s` still names tablet `uid` (its directory or its log file prefix).
pub fn mentions_uid(s: &str, uid: TabletUid) -> bool {
    replace_uid_refs(s, uid, TabletUid::new(uid.get().wrapping_add(1))) != s
}

#[cfg(test)]
mod tests {
    use super::*;

    const OLD: TabletUid = TabletUid::new(101);
    const NEW: TabletUid = TabletUid::new(2_000_000_123);

    /// The path keys Vitess writes (`go/vt/mysqlctl/mycnf_gen.go` paths, `config/mycnf/default.cnf`
    /// keys) plus the MySQL 8 fragment `config/mycnf/mysql80.cnf`, after init-mysql-socket
    /// rewrote `socket`.
    fn mysql80_cnf(uid: TabletUid) -> String {
        let t = format!("/vt/vtdataroot/{}", uid.tablet_dir_name());
        let p = uid.padded();
        format!(
            "[mysqld]\n\
             datadir = {t}/data\n\
             innodb_data_home_dir = {t}/innodb/data\n\
             innodb_log_group_home_dir = {t}/innodb/logs\n\
             log-error = {t}/error.log\n\
             log-bin = {t}/bin-logs/vt-{p}-bin\n\
             relay-log = {t}/relay-logs/vt-{p}-relay-bin\n\
             relay-log-index = {t}/relay-logs/vt-{p}-relay-bin.index\n\
             pid-file = {t}/mysql.pid\n\
             port = 3306\n\
             secure-file-priv = {t}/tmp\n\
             server-id = 1234567\n\
             socket = /vt/socket/mysql.sock\n\
             tmpdir = {t}/tmp\n\
             slow-query-log-file = {t}/slow-query.log\n\
             general_log_file = {t}/general.log\n\
             # MySQL 8\n\
             gtid_mode = ON\n\
             enforce_gtid_consistency\n\
             relay_log_recovery = 1\n\
             binlog_expire_logs_seconds = 259200\n\
             super-read-only\n\
             plugin-load = rpl_semi_sync_master=semisync_master.so;rpl_semi_sync_slave=semisync_slave.so\n\
             loose_rpl_semi_sync_master_timeout = 1000000000000000000\n"
        )
    }

    #[test]
    fn rewrites_every_path_key_and_the_server_id() {
        let cnf = MyCnf::parse(&mysql80_cnf(OLD)).unwrap();
        assert_eq!(cnf.server_id(), Some(1_234_567));
        let (text, changed) = cnf.rewrite(OLD, NEW, 777).unwrap();
        let expected = mysql80_cnf(NEW).replace("server-id = 1234567", "server-id = 777");
        assert_eq!(text, expected);
        for k in [
            "datadir",
            "innodb_data_home_dir",
            "innodb_log_group_home_dir",
            "log_error",
            "log_bin",
            "relay_log",
            "relay_log_index",
            "pid_file",
            "secure_file_priv",
            "server_id",
            "tmpdir",
            "slow_query_log_file",
            "general_log_file",
        ] {
            assert!(
                changed.iter().any(|c| c == k),
                "{k} not reported as changed: {changed:?}"
            );
        }
        assert!(!mentions_uid(&text, OLD));
    }

    #[test]
    fn keeps_socket_and_port_as_they_were() {
        let cnf = MyCnf::parse(&mysql80_cnf(OLD)).unwrap();
        let (text, changed) = cnf.rewrite(OLD, NEW, 777).unwrap();
        let new = MyCnf::parse(&text).unwrap();
        assert_eq!(new.get("socket"), Some("/vt/socket/mysql.sock"));
        assert_eq!(new.get("port"), Some("3306"));
        assert!(!changed.iter().any(|c| c == "socket" || c == "port"));
    }

    #[test]
    fn a_socket_inside_the_tablet_directory_moves_with_it() {
        let text = "[mysqld]\nsocket = /vt/vtdataroot/vt_0000000101/mysql.sock\nserver-id=5\n";
        let (out, _) = MyCnf::parse(text).unwrap().rewrite(OLD, NEW, 9).unwrap();
        assert_eq!(
            out,
            "[mysqld]\nsocket = /vt/vtdataroot/vt_2000000123/mysql.sock\nserver-id = 9\n"
        );
    }

    #[test]
    fn rewrite_is_idempotent() {
        let cnf = MyCnf::parse(&mysql80_cnf(OLD)).unwrap();
        let (once, _) = cnf.rewrite(OLD, NEW, 777).unwrap();
        let (twice, changed) = MyCnf::parse(&once).unwrap().rewrite(OLD, NEW, 777).unwrap();
        assert_eq!(once, twice);
        assert!(changed.is_empty(), "second rewrite changed {changed:?}");
    }

    #[test]
    fn keys_match_like_mysqld_matches_them() {
        let cnf =
            MyCnf::parse("[mysqld]\nserver_id = 1\nloose-server-id = 2\nLOG_BIN=/x\n").unwrap();
        assert_eq!(cnf.server_id(), Some(2));
        assert_eq!(cnf.get("log-bin"), Some("/x"));
        let (out, _) = cnf.rewrite(OLD, NEW, 300).unwrap();
        assert_eq!(
            out,
            "[mysqld]\nserver_id = 300\nloose-server-id = 300\nLOG_BIN=/x\n"
        );
    }

    #[test]
    fn quoted_values_and_inline_comments_are_read_cleanly() {
        let cnf = MyCnf::parse("[mysqld]\ndatadir = \"/a b/data\" # the data\ntmpdir = /t # tmp\n")
            .unwrap();
        assert_eq!(cnf.get("datadir"), Some("/a b/data"));
        assert_eq!(cnf.get("tmpdir"), Some("/t"));
    }

    #[test]
    fn options_of_other_programs_are_not_server_options() {
        let cnf = MyCnf::parse(
            "[client]\nsocket = /c.sock\n[mysqld]\nsocket = /s.sock\n[client]\nport=1\n",
        )
        .unwrap();
        assert_eq!(cnf.get("socket"), Some("/s.sock"));
        assert_eq!(cnf.get("port"), None);
    }

    #[test]
    fn a_missing_server_id_is_added_to_the_first_server_section() {
        let (out, changed) = MyCnf::parse("[client]\nuser=x\n[mysqld]\nport = 1\n")
            .unwrap()
            .rewrite(OLD, NEW, 4242)
            .unwrap();
        assert_eq!(
            out,
            "[client]\nuser=x\n[mysqld]\nserver-id = 4242\nport = 1\n"
        );
        assert_eq!(changed, vec!["server_id"]);
    }

    #[test]
    fn refuses_what_it_cannot_read() {
        for (text, want) in [
            ("[mysqld\nport=1\n", "unterminated section"),
            ("port = 1\n", "before any [section]"),
            ("[mysqld]\nthis is not an option\n", "cannot parse"),
            ("[mysqld]\nserver-id = abc\n", "not a number"),
            (
                "[mysqld]\nserver-id = 99999999999\n",
                "out of range (0 to 4294967295)",
            ),
            ("[mysqld]\n!includ /etc\n", "cannot parse"),
        ] {
            let err = MyCnf::parse(text).unwrap_err().to_string();
            assert!(err.contains(want), "{text:?}: {err}");
        }
        let huge = format!("[mysqld]\n{}", "#".repeat(MAX_LEN));
        assert!(matches!(
            MyCnf::parse(&huge),
            Err(MyCnfError::TooLarge { .. })
        ));
        assert_eq!(
            MyCnf::parse("[client]\nport=1\n")
                .unwrap()
                .rewrite(OLD, NEW, 1)
                .unwrap_err(),
            MyCnfError::NoServerSection
        );
    }

    #[test]
    fn uid_references_are_replaced_only_as_whole_names() {
        assert_eq!(
            replace_uid_refs("/r/vt_0000000101/x", OLD, NEW),
            "/r/vt_2000000123/x"
        );
        assert_eq!(
            replace_uid_refs("/r/vt_0000000101", OLD, NEW),
            "/r/vt_2000000123"
        );
        assert_eq!(
            replace_uid_refs("/r/vt_00000001012", OLD, NEW),
            "/r/vt_00000001012"
        );
        assert_eq!(
            replace_uid_refs("vt-0000000101-bin.000001", OLD, NEW),
            "vt-2000000123-bin.000001"
        );
        assert!(mentions_uid("x/vt-0000000101-relay-bin", OLD));
        assert!(!mentions_uid("x/vt-0000000102-relay-bin", OLD));
    }
}
