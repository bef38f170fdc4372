//! Wire conformance: vtsnap's hand-written prost messages (core/src/vtctld/messages.rs,
//! core/src/mysqlctl.rs) against the upstream Vitess `.proto` files, read from the Go
//! module cache (`go mod download vitess.io/vitess@<VITESS_VERSION>`; nothing of upstream
//! is committed). For every struct and every field we declare: the upstream message
//! exists, the field exists by name with the same number, and the prost type attribute
//! encodes the upstream type (scalar, enum, message of the right type, map<k, v>,
//! repeated/optional). For the prost enums: each value's number. For every gRPC call the
//! clients (core/src/vtctld/client.rs, node/src/mysqlctl.rs) and the fake servers
//! (testkit/src/fake_vtctld/service.rs, fake_mysqlctld.rs) make or answer: the upstream
//! service has that rpc, unary, with the request and response types our code pairs with it.
//!
//! Needs `go` (on PATH or /usr/local/go/bin/go) and the Go module proxy; without them the
//! test fails (it does not skip).

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

// The crate root is this file, so its modules' paths are spelled out.
#[path = "wire_conformance/check.rs"]
mod check;
#[path = "wire_conformance/proto.rs"]
mod proto;
#[path = "wire_conformance/rust_src.rs"]
mod rust_src;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Instant;

use check::{Checker, Renames, Report, WireCompatible};
use proto::{Field, Label, Resolved, Schema, Type};
use rust_src::RustFile;

/// The upstream module the wire facts are checked against. Pinned (the only version the
/// module proxy here serves; check with `go list -m -versions vitess.io/vitess`): bump it
/// deliberately, together with the Vitess release vitess-operator deploys, and read the
/// diff of `proto/` when you do.
const VITESS_MODULE: &str = "vitess.io/vitess";
const VITESS_VERSION: &str = "v0.24.4";

/// Rust structs/enums whose upstream name is not `<rust module>.<RustName>`.
const RENAMES: Renames<'static> = &[
    // vttime.Time, declared next to the topodata messages that hold it.
    ("topodata::Time", "vttime.Time"),
    // vttime.Duration, declared next to the mysqlctl message that holds it.
    ("mysqlctl::Duration", "vttime.Duration"),
    // Rust naming of the acronym DBA.
    (
        "vtctldata::ExecuteFetchAsDbaRequest",
        "vtctldata.ExecuteFetchAsDBARequest",
    ),
    (
        "vtctldata::ExecuteFetchAsDbaResponse",
        "vtctldata.ExecuteFetchAsDBAResponse",
    ),
];

/// Fields deliberately declared `int32` where upstream has an enum (same varint on the wire).
const WIRE_COMPATIBLE: WireCompatible<'static> = &[(
    "query::Field",
    "type",
    "query.Type has ~40 values vtsnap never reads; the raw number is kept",
)];

/// The files holding prost messages: (path from the workspace root, module of items
/// outside any inline `mod`).
const MESSAGE_FILES: &[(&str, &str)] = &[
    ("core/src/vtctld/messages.rs", "messages"),
    ("core/src/mysqlctl.rs", "mysqlctl"),
];

/// gRPC clients (method names passed to a call helper) and fake servers (dispatch arms).
const CLIENTS: &[&str] = &["core/src/vtctld/client.rs", "node/src/mysqlctl.rs"];
const SERVERS: &[&str] = &[
    "testkit/src/fake_vtctld/service.rs",
    "testkit/src/fake_mysqlctld.rs",
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("core/ has a parent")
        .to_path_buf()
}

fn read(rel: &str) -> String {
    let p = workspace().join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("reading {}: {e}", p.display()))
}

/// `go` on PATH, else /usr/local/go/bin/go.
fn go_binary() -> Result<PathBuf, String> {
    let on_path = std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("go"))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    on_path
        .into_iter()
        .chain([PathBuf::from("/usr/local/go/bin/go")])
        .find(|p| p.is_file())
        .ok_or_else(|| {
            "the wire-conformance test needs Go (to fetch the upstream Vitess .proto files \
             from the module proxy): no `go` on PATH nor at /usr/local/go/bin/go; install Go \
             (CI must)"
                .to_owned()
        })
}

/// `go mod download -json vitess.io/vitess@VERSION` → `<Dir>/proto`, once per test run.
fn vitess_proto_dir() -> &'static Path {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let go = go_binary()?;
        let module = format!("{VITESS_MODULE}@{VITESS_VERSION}");
        let tmp = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
        let started = Instant::now();
        let out = Command::new(&go)
            .args(["mod", "download", "-json", &module])
            .current_dir(tmp.path())
            .env("GOFLAGS", "-mod=mod")
            .output()
            .map_err(|e| format!("running {} mod download: {e}", go.display()))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let json: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_default();
        if let Some(err) = json.get("Error").and_then(|e| e.as_str()) {
            return Err(format!(
                "`go mod download {module}` failed: {err}\n{stderr}"
            ));
        }
        if !out.status.success() {
            return Err(format!(
                "`go mod download {module}` exited {}: {stdout}{stderr}",
                out.status
            ));
        }
        let dir = json
            .get("Dir")
            .and_then(|d| d.as_str())
            .ok_or_else(|| format!("`go mod download -json {module}` gave no Dir: {stdout}"))?;
        eprintln!(
            "wire conformance: {module} at {dir} ({:.2?} for go mod download)",
            started.elapsed()
        );
        let proto = Path::new(dir).join("proto");
        if proto.is_dir() {
            Ok(proto)
        } else {
            Err(format!("{module}: no proto/ in {dir}"))
        }
    });
    match dir {
        Ok(d) => d,
        Err(e) => panic!("{e}"),
    }
}

/// Every upstream `.proto` file, parsed (all of them: a parser that cannot read one fails).
fn upstream_schema() -> &'static Schema {
    static SCHEMA: OnceLock<Schema> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let dir = vitess_proto_dir();
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "proto"))
            .collect();
        files.sort();
        assert!(
            files.len() >= 7,
            "{}: too few .proto files: {files:?}",
            dir.display()
        );
        let mut schema = Schema::default();
        for f in &files {
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(f).unwrap();
            schema
                .add_file(
                    &format!("{VITESS_MODULE}@{VITESS_VERSION}/proto/{name}"),
                    &text,
                )
                .unwrap_or_else(|e| panic!("parsing upstream {e}"));
        }
        schema
            .finish()
            .unwrap_or_else(|e| panic!("upstream schema: {e}"));
        schema
    })
}

/// Scans our sources; `replace` substitutes a file's text (for the tests that prove the
/// check can fail).
fn scan_ours(replace: &BTreeMap<&str, String>) -> (Vec<RustFile>, Vec<rust_src::CallSite>) {
    let scan = |rel: &str, root: &str| {
        let t = replace.get(rel).cloned().unwrap_or_else(|| read(rel));
        let f = RustFile::scan(rel, root, &t).unwrap_or_else(|e| panic!("{e}"));
        // Every prost derive and every #[prost(…)] field attribute is accounted for.
        let (derives, attrs) = f.prost_counts();
        let fields: usize = f.messages.iter().map(|m| m.fields.len()).sum();
        assert_eq!(
            (derives, attrs),
            (f.messages.len() + f.enums.len(), fields),
            "{rel}: (prost derives, #[prost] attributes) in the text vs (structs+enums, \
             fields) the scanner read: the scanner misses something (teach it)"
        );
        f
    };
    let mut files: Vec<RustFile> = MESSAGE_FILES
        .iter()
        .map(|(rel, root)| scan(rel, root))
        .collect();
    let clients: Vec<RustFile> = CLIENTS.iter().map(|rel| scan(rel, "client")).collect();
    let servers: Vec<RustFile> = SERVERS.iter().map(|rel| scan(rel, "fake")).collect();
    // The fakes reuse core's messages today; one that declares its own gets them checked
    // too (mapped as `fake.<Name>` unless the rename table says otherwise).
    files.extend(
        servers
            .iter()
            .filter(|f| !f.messages.is_empty() || !f.enums.is_empty())
            .cloned(),
    );
    let known: BTreeSet<String> = files
        .iter()
        .flat_map(|f| f.messages.iter().map(|m| m.name.clone()))
        .collect();
    let consts: BTreeMap<String, String> =
        files.iter().flat_map(|f| f.str_consts.clone()).collect();
    let mut calls = Vec::new();
    for f in &clients {
        let c = f
            .client_calls(&known, &consts)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(!c.is_empty(), "{}: no gRPC call found", f.path);
        calls.extend(c);
    }
    for f in &servers {
        let c = f
            .server_arms(&known, &consts)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(!c.is_empty(), "{}: no dispatch arm found", f.path);
        calls.extend(c);
    }
    (files, calls)
}

fn check_ours(replace: &BTreeMap<&str, String>) -> Report {
    let (files, calls) = scan_ours(replace);
    Checker {
        schema: upstream_schema(),
        files: &files,
        renames: RENAMES,
        wire_compatible: WIRE_COMPATIBLE,
    }
    .run(&calls)
}

#[test]
fn hand_written_messages_match_upstream_vitess() {
    let r = check_ours(&BTreeMap::new());
    eprintln!(
        "wire conformance against {VITESS_MODULE}@{VITESS_VERSION}: {} messages, {} fields, \
         {} enums ({} values), {} gRPC methods at {} call sites/dispatch arms",
        r.messages,
        r.fields,
        r.enums,
        r.enum_values,
        r.methods.len(),
        r.call_sites
    );
    assert!(
        r.problems.is_empty(),
        "{} disagreement(s) with upstream {VITESS_MODULE}@{VITESS_VERSION}:\n  {}",
        r.problems.len(),
        r.problems.join("\n  ")
    );
    // The scan found what we know is there (a scanner finding nothing checks nothing).
    assert!(r.messages >= 30 && r.fields >= 90, "{r:?}");
    for m in [
        "/vtctlservice.Vtctld/GetShard",
        "/vtctlservice.Vtctld/ChangeTabletType",
        "/vtctlservice.Vtctld/ExecuteFetchAsDBA",
        "/mysqlctl.MysqlCtl/Shutdown",
        "/mysqlctl.MysqlCtl/Start",
    ] {
        assert!(r.methods.contains(m), "{m} not found among {:?}", r.methods);
    }
}

/// `replicationdata.Status.io_state` / `sql_state` are int32 upstream; their values are the
/// Go constants `replication.ReplicationState*` (go/mysql/replication/state.go, an iota
/// block). Our `STATE_*` constants must match them.
#[test]
fn replication_state_values_match_upstream_go() {
    let go_file = "go/mysql/replication/state.go";
    let path = vitess_proto_dir().parent().unwrap().join(go_file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let block = text
        .split("const (")
        .find(|b| b.contains("ReplicationState = iota"))
        .and_then(|b| b.split(')').next())
        .unwrap_or_else(|| panic!("{go_file}: no `const ( … ReplicationState = iota … )` block"));
    let upstream: BTreeMap<String, i64> = block
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| w.starts_with("ReplicationState"))
        .zip(0..)
        .map(|(n, v)| (n.to_owned(), v))
        .collect();
    let rel = "core/src/vtctld/messages.rs";
    let ours = RustFile::scan(rel, "messages", &read(rel)).unwrap();
    let states: Vec<(&String, &i64)> = ours
        .int_consts
        .iter()
        .filter(|(k, _)| k.starts_with("STATE_"))
        .collect();
    assert_eq!(states.len(), 4, "{rel}: STATE_* constants: {states:?}");
    let mut problems = Vec::new();
    for (name, v) in states {
        let suffix = name.trim_start_matches("STATE_").to_lowercase();
        let go_name = format!(
            "ReplicationState{}{}",
            suffix[..1].to_uppercase(),
            &suffix[1..]
        );
        match upstream.get(&go_name) {
            Some(u) if u == v => {}
            Some(u) => problems.push(format!(
                "{rel}: {name} = {v} but upstream {go_file} {go_name} = {u}"
            )),
            None => problems.push(format!(
                "{rel}: {name}: upstream {go_file} has no {go_name} ({upstream:?})"
            )),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The check can fail: the real sources with a tag, a scalar type, a message type, an enum
/// value, a client's method name and a fake server's pairing changed report exactly those,
/// in words that point at both sides.
#[test]
fn mistakes_planted_in_our_sources_are_reported() {
    let up = |f: &str| format!("({VITESS_MODULE}@{VITESS_VERSION}/proto/{f})");
    // (file, text to replace, replacement, the problem it must cause (`#L#`: its line))
    let plants = [
        (
            "core/src/vtctld/messages.rs",
            "#[prost(uint32, tag = \"2\")]\n        pub uid: u32,",
            "#[prost(uint32, tag = \"3\")]\n        pub uid: u32,",
            format!(
                "core/src/vtctld/messages.rs:#L#: Rust topodata::TabletAlias.uid \
                 `#[prost(uint32, tag = \"3\")]`: tag 3 but upstream topodata.TabletAlias.uid \
                 `uint32 uid = 2` {} is field number 2",
                up("topodata.proto")
            ),
        ),
        (
            "core/src/vtctld/messages.rs",
            "#[prost(int64, tag = \"3\")]\n        pub max_rows: i64,",
            "#[prost(int32, tag = \"3\")]\n        pub max_rows: i64,",
            format!(
                "core/src/vtctld/messages.rs:#L#: Rust vtctldata::ExecuteFetchAsDbaRequest.max_rows \
                 `#[prost(int32, tag = \"3\")]`: type is int32 but upstream's is int64; upstream \
                 vtctldata.ExecuteFetchAsDBARequest.max_rows `int64 max_rows = 3` {}",
                up("vtctldata.proto")
            ),
        ),
        (
            "core/src/vtctld/messages.rs",
            "pub before_tablet: Option<Tablet>,",
            "pub before_tablet: Option<TabletAlias>,",
            "Rust vtctldata::ChangeTabletTypeResponse.before_tablet `#[prost(message, optional, \
             tag = \"1\")]`: it holds Rust `Option<TabletAlias>` = topodata::TabletAlias (↔ \
             upstream topodata.TabletAlias) but upstream's type is topodata.Tablet"
                .to_owned(),
        ),
        (
            "core/src/vtctld/messages.rs",
            "Drained = 8,",
            "Drained = 9,",
            "core/src/vtctld/messages.rs:#L#: Rust topodata::TabletType::Drained = 9 but upstream \
             topodata.TabletType.DRAINED = 8"
                .to_owned(),
        ),
        (
            "core/src/vtctld/client.rs",
            "self.read(\"GetTablets\", req)",
            "self.read(\"GetTabletz\", req)",
            format!(
                "core/src/vtctld/client.rs:#L# (fn get_tablets): `/vtctlservice.Vtctld/GetTabletz`: \
                 upstream service vtctlservice.Vtctld {} has no rpc GetTabletz",
                up("vtctlservice.proto")
            ),
        ),
        (
            "testkit/src/fake_vtctld/service.rs",
            "\"GetTablet\" => grpc::unary(req, move |r| f.get_tablet(r))",
            "\"GetTablet\" => grpc::unary(req, move |r| f.get_shard(r))",
            "(match arm \"GetTablet\"): `/vtctlservice.Vtctld/GetTablet`: request is Rust \
             GetShardRequest (↔ upstream vtctldata.GetShardRequest) but upstream rpc \
             vtctlservice.Vtctld.GetTablet has request vtctldata.GetTabletRequest"
                .to_owned(),
        ),
    ];
    let mut texts: BTreeMap<&str, String> = BTreeMap::new();
    let mut want = Vec::new();
    for (rel, from, to, problem) in plants {
        let text = texts.entry(rel).or_insert_with(|| read(rel));
        let Some(at) = text.find(from) else {
            panic!("{rel} no longer has {from:?}: update this test")
        };
        *text = text.replacen(from, to, 1);
        // The line a problem names: the attribute's, the variant's, or the fn's.
        let line = 1 + text[..at].matches('\n').count();
        let line = if rel.ends_with("client.rs") {
            1 + text[..at]
                .rfind("pub async fn")
                .map_or(0, |f| text[..f].matches('\n').count())
        } else {
            line
        };
        want.push(problem.replace("#L#", &line.to_string()));
    }
    let r = check_ours(&texts);
    for w in &want {
        assert!(
            r.problems.iter().any(|p| p.contains(w.as_str())),
            "no problem contains {w:?}:\n{:#?}",
            r.problems
        );
    }
    // The fake's mis-pairing is wrong twice (request and response); nothing else is reported.
    assert_eq!(r.problems.len(), want.len() + 1, "{:#?}", r.problems);
}

// ---- hermetic tests of the parser and the checker (no Go needed) ----

const SMALL_PROTO: &str = r#"
/* a block comment with message Fake { } inside */
syntax = "proto3";
option go_package = "example.com/t";
option (my.opt) = { a: 1 b: "}" };
package t;
import "other.proto";

// KeyRange.
message KeyRange {
  bytes start = 1;
  bytes end=2;
}

message Tablet {
  reserved 3, 11; reserved "old";
  KeyRange key_range = 7 [deprecated = true];
  map<string, int32> port_map = 4;
  map<string, Inner> inners = 5;
  repeated string cells = 6;
  optional int64 max = 8;
  Type type = 9;
  oneof timeout {
    int64 timeout_ms = 10;
    bool no_timeout = 12;
  }
  message Inner {
    enum Kind { KIND_UNKNOWN = 0; KIND_A = 1; KIND_NEG = -1 [(x) = 2]; }
    Kind kind = 1;
    .t.KeyRange range = 2;
  }
  enum Type {
    option allow_alias = true;
    UNKNOWN = 0;
    PRIMARY = 1;
    MASTER = 1;
  }
  string stream = 13;
  string options = 14;
}

service Svc {
  option (svc.opt) = true;
  rpc Get(Tablet) returns (KeyRange) {};
  rpc Watch (KeyRange) returns (stream Tablet);
  rpc Push(stream t.Tablet) returns (t.KeyRange) { option (x) = { y: 1 }; }
}
"#;

#[test]
fn proto_parser_reads_a_small_file() {
    let mut s = Schema::default();
    s.add_file("small.proto", SMALL_PROTO).unwrap();
    s.finish().unwrap();
    assert_eq!(
        s.messages.keys().collect::<Vec<_>>(),
        ["t.KeyRange", "t.Tablet", "t.Tablet.Inner"]
    );
    assert_eq!(
        s.enums.keys().collect::<Vec<_>>(),
        ["t.Tablet.Inner.Kind", "t.Tablet.Type"]
    );
    let f = |name: &str, number: u32, label: Label, ty: Type| Field {
        name: name.into(),
        number,
        label,
        ty,
    };
    let named = |n: &str, scope: &str| Type::Named {
        name: n.into(),
        scope: scope.into(),
    };
    let scalar = |n: &str| Type::Scalar(n.into());
    let tablet = &s.messages["t.Tablet"].fields;
    assert_eq!(
        *tablet,
        vec![
            f(
                "key_range",
                7,
                Label::Singular,
                named("KeyRange", "t.Tablet")
            ),
            f(
                "port_map",
                4,
                Label::Singular,
                Type::Map {
                    key: "string".into(),
                    value: Box::new(scalar("int32"))
                }
            ),
            f(
                "inners",
                5,
                Label::Singular,
                Type::Map {
                    key: "string".into(),
                    value: Box::new(named("Inner", "t.Tablet"))
                }
            ),
            f("cells", 6, Label::Repeated, scalar("string")),
            f("max", 8, Label::Optional, scalar("int64")),
            f("type", 9, Label::Singular, named("Type", "t.Tablet")),
            f("timeout_ms", 10, Label::Singular, scalar("int64")),
            f("no_timeout", 12, Label::Singular, scalar("bool")),
            f("stream", 13, Label::Singular, scalar("string")),
            f("options", 14, Label::Singular, scalar("string")),
        ]
    );
    assert_eq!(s.messages["t.KeyRange"].fields[1].number, 2);
    // Resolution: innermost scope first, absolute names, nested enums.
    let inner = &s.messages["t.Tablet.Inner"].fields;
    assert_eq!(
        s.resolve_type(&inner[0].ty),
        Some(Resolved::Enum("t.Tablet.Inner.Kind".into()))
    );
    assert_eq!(
        s.resolve_type(&inner[1].ty),
        Some(Resolved::Message("t.KeyRange".into()))
    );
    assert_eq!(
        s.resolve_type(&tablet[2].ty),
        Some(Resolved::Message("t.Tablet.Inner".into()))
    );
    assert_eq!(
        s.resolve_type(&tablet[5].ty),
        Some(Resolved::Enum("t.Tablet.Type".into()))
    );
    let kinds = &s.enums["t.Tablet.Inner.Kind"].values;
    assert_eq!(kinds["KIND_NEG"], -1);
    assert_eq!(s.enums["t.Tablet.Type"].values["MASTER"], 1);
    let svc = &s.services["t.Svc"].methods;
    assert_eq!(svc.len(), 3);
    assert_eq!(
        (
            svc["Get"].input.as_str(),
            svc["Get"].output.as_str(),
            svc["Get"].server_streaming
        ),
        ("t.Tablet", "t.KeyRange", false)
    );
    assert!(svc["Watch"].server_streaming && !svc["Watch"].client_streaming);
    assert!(svc["Push"].client_streaming && svc["Push"].input == "t.Tablet");
    // A type that resolves nowhere is an error of finish().
    let mut bad = Schema::default();
    bad.add_file("bad.proto", "package b; message M { Missing m = 1; }")
        .unwrap();
    assert!(bad.finish().unwrap_err().contains("b.M.m: type `Missing`"));
    // Syntax errors name the file and line.
    let mut bad = Schema::default();
    let e = bad
        .add_file("bad.proto", "package b;\nmessage M {\n  string x = ;\n}")
        .unwrap_err();
    assert!(e.starts_with("bad.proto:3:"), "{e}");
}

const SMALL_RUST_OK: &str = r#"
pub mod t {
    use std::collections::HashMap;

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct KeyRange {
        #[prost(bytes = "vec", tag = "1")]
        pub start: Vec<u8>,
        #[prost(bytes = "vec", tag = "2")]
        pub end: Vec<u8>,
    }

    /// A doc comment with #[prost(int32, tag = "99")] in it.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Tablet {
        #[prost(message, optional, tag = "7")]
        pub key_range: Option<KeyRange>,
        #[prost(map = "string, int32", tag = "4")]
        pub port_map: HashMap<String, i32>,
        #[prost(map = "string, message", tag = "5")]
        pub inners: HashMap<String, Inner>,
        #[prost(string, repeated, tag = "6")]
        pub cells: Vec<String>,
        #[prost(int64, optional, tag = "8")]
        pub max: Option<i64>,
        #[prost(enumeration = "TabletType", tag = "9")]
        pub r#type: i32,
        #[prost(bool, tag = "12")]
        pub no_timeout: bool,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Inner {
        #[prost(int32, tag = "1")]
        pub kind: i32,
        #[prost(message, optional, tag = "2")]
        pub range: Option<super::t::KeyRange>,
    }

    #[derive(Clone, Copy, Debug, PartialEq, Eq, prost::Enumeration)]
    #[repr(i32)]
    pub enum TabletType {
        Unknown = 0,
        Primary = 1,
    }
}
"#;

const SMALL_RENAMES: Renames<'static> = &[
    ("t::Inner", "t.Tablet.Inner"),
    ("t::TabletType", "t.Tablet.Type"),
];
const SMALL_COMPATIBLE: WireCompatible<'static> = &[("t::Inner", "kind", "test")];

fn small_check(rust: &str, compatible: WireCompatible<'static>) -> Report {
    let mut s = Schema::default();
    s.add_file("small.proto", SMALL_PROTO).unwrap();
    s.finish().unwrap();
    let files = vec![RustFile::scan("small.rs", "small", rust).unwrap()];
    let calls = vec![rust_src::CallSite {
        path: "small_client.rs".into(),
        line: 1,
        context: "fn get".into(),
        method: "/t.Svc/Get".into(),
        request: "Tablet".into(),
        response: "KeyRange".into(),
    }];
    Checker {
        schema: &s,
        files: &files,
        renames: SMALL_RENAMES,
        wire_compatible: compatible,
    }
    .run(&calls)
}

#[test]
fn checker_accepts_a_matching_rust_snippet() {
    let r = small_check(SMALL_RUST_OK, SMALL_COMPATIBLE);
    assert!(r.problems.is_empty(), "{:#?}", r.problems);
    assert_eq!(
        (r.messages, r.fields, r.enums, r.enum_values),
        (3, 11, 1, 2)
    );
}

#[test]
fn checker_reports_a_deliberately_wrong_rust_snippet() {
    let mut wrong = SMALL_RUST_OK.to_owned();
    for (from, to) in [
        // a tag changed
        (
            r#"#[prost(bytes = "vec", tag = "2")]"#,
            r#"#[prost(bytes = "vec", tag = "3")]"#,
        ),
        // a scalar type changed
        (
            r#"#[prost(bool, tag = "12")]"#,
            r#"#[prost(uint32, tag = "12")]"#,
        ),
        // repeated lost
        (
            r#"#[prost(string, repeated, tag = "6")]"#,
            r#"#[prost(string, tag = "6")]"#,
        ),
        // a message field holding the wrong message
        (
            "pub key_range: Option<KeyRange>",
            "pub key_range: Option<Inner>",
        ),
        // a map value type changed
        (r#"map = "string, int32""#, r#"map = "string, int64""#),
        // a field upstream does not have
        ("pub no_timeout: bool", "pub no_timeouts: bool"),
        // an enum value changed
        ("Primary = 1,", "Primary = 2,"),
    ] {
        assert!(wrong.contains(from), "{from}");
        wrong = wrong.replacen(from, to, 1);
    }
    let r = small_check(&wrong, &[]);
    let want = [
        "small.rs:9: Rust t::KeyRange.end `#[prost(bytes = \"vec\", tag = \"3\")]`: tag 3 but \
         upstream t.KeyRange.end `bytes end = 2` (small.proto) is field number 2",
        "Rust t::Tablet.no_timeouts `#[prost(uint32, tag = \"12\")]`: upstream message \
         t.Tablet (small.proto) has no field named `no_timeouts`; its field 12 is \
         `bool no_timeout = 12`",
        "Rust t::Tablet.cells `#[prost(string, tag = \"6\")]`: label is (none) but upstream's \
         is repeated; upstream t.Tablet.cells `repeated string cells = 6`",
        "Rust t::Tablet.key_range `#[prost(message, optional, tag = \"7\")]`: it holds Rust \
         `Option<Inner>` = t::Inner (↔ upstream t.Tablet.Inner) but upstream's type is \
         t.KeyRange",
        "Rust t::Tablet.port_map `#[prost(map = \"string, int64\", tag = \"4\")]`: map value is \
         int64 but upstream's is int32",
        "Rust t::TabletType::Primary = 2 but upstream t.Tablet.Type.PRIMARY = 1",
        // without the wire-compatible entry, int32 for an enum is reported
        "Rust t::Inner.kind `#[prost(int32, tag = \"1\")]`: type is int32 but upstream's is \
         enum t.Tablet.Inner.Kind",
    ];
    for w in want {
        assert!(
            r.problems.iter().any(|p| p.contains(w)),
            "no problem contains {w:?}:\n{:#?}",
            r.problems
        );
    }
    assert_eq!(r.problems.len(), want.len(), "{:#?}", r.problems);
}

#[test]
fn checker_reports_a_wrong_method_pairing_and_stale_tables() {
    let mut s = Schema::default();
    s.add_file("small.proto", SMALL_PROTO).unwrap();
    s.finish().unwrap();
    let files = vec![RustFile::scan("small.rs", "small", SMALL_RUST_OK).unwrap()];
    let call = |method: &str, request: &str, response: &str| rust_src::CallSite {
        path: "c.rs".into(),
        line: 1,
        context: "fn x".into(),
        method: method.into(),
        request: request.into(),
        response: response.into(),
    };
    let calls = [
        call("/t.Svc/Get", "KeyRange", "KeyRange"),
        call("/t.Svc/Watch", "KeyRange", "Tablet"),
        call("/t.Svc/Nope", "KeyRange", "Tablet"),
        call("/t.Other/Get", "Tablet", "KeyRange"),
    ];
    let renames: Renames<'static> = &[
        ("t::Inner", "t.Tablet.Inner"),
        ("t::TabletType", "t.Tablet.Type"),
        ("t::Gone", "t.Gone"),
    ];
    let r = Checker {
        schema: &s,
        files: &files,
        renames,
        wire_compatible: SMALL_COMPATIBLE,
    }
    .run(&calls);
    let want = [
        "c.rs:1 (fn x): `/t.Svc/Get`: request is Rust KeyRange (↔ upstream t.KeyRange) but \
         upstream rpc t.Svc.Get has request t.Tablet (small.proto)",
        "`/t.Svc/Watch`: called as unary but upstream rpc t.Svc.Watch streams",
        "`/t.Svc/Nope`: upstream service t.Svc (small.proto) has no rpc Nope",
        "`/t.Other/Get`: upstream defines no service `t.Other`",
        "rename table: `t::Gone` is not a scanned Rust struct or enum (stale entry)",
    ];
    for w in want {
        assert!(
            r.problems.iter().any(|p| p.contains(w)),
            "no problem contains {w:?}:\n{:#?}",
            r.problems
        );
    }
    assert_eq!(r.problems.len(), want.len(), "{:#?}", r.problems);
}

#[test]
fn rust_scanner_pairs_client_calls_and_server_arms() {
    let client = r##"
        const SERVICE: &str = "t.Svc";
        impl C {
            async fn call<Req, Resp>(&self, method: &'static str, req: Req) -> Result<Resp, E> {
                let p = format!("/{SERVICE}/{method}"); // "/not/{method}" in a comment
                todo()
            }
            pub async fn get(&self) -> Result<KeyRange, E> {
                let c = '{'; let s = r#"}"#;
                self.call("Get", Tablet { ..Default::default() }).await
            }
        }
    "##;
    let known: BTreeSet<String> = ["Tablet", "KeyRange"].map(String::from).into();
    let consts = BTreeMap::from([("SERVICE".to_owned(), "t.Svc".to_owned())]);
    let f = RustFile::scan("c.rs", "c", client).unwrap();
    // Names end in Request/Response in real code; here the known names do not, so none pair.
    let err = f.client_calls(&known, &consts).unwrap_err();
    assert!(
        err.contains("c.rs:8 (fn get): cannot pair the call"),
        "{err}"
    );
    let client = client
        .replace("Tablet", "GetRequest")
        .replace("KeyRange", "GetResponse");
    let known: BTreeSet<String> = ["GetRequest", "GetResponse"].map(String::from).into();
    let f = RustFile::scan("c.rs", "c", &client).unwrap();
    let calls = f.client_calls(&known, &consts).unwrap();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(
        (
            calls[0].method.as_str(),
            calls[0].request.as_str(),
            calls[0].response.as_str()
        ),
        ("/t.Svc/Get", "GetRequest", "GetResponse")
    );
    let server = r#"
        impl NamedService for S { const NAME: &'static str = "t.Svc"; }
        fn get(&self, r: GetRequest) -> Result<GetResponse, Status> { todo() }
        fn call(&mut self, req: Req) -> F {
            Box::pin(async move {
                let resp = match grpc::method(&req).as_str() {
                    "Get" => grpc::unary(req, move |r| f.get(r)).await,
                    "Put" => {
                        grpc::unary(req, |_: PutRequest| Ok(PutResponse {})).await
                    }
                    other => Status::unimplemented(format!("{other}")).into_http(),
                };
                Ok(resp)
            })
        }
    "#;
    let known: BTreeSet<String> = ["GetRequest", "GetResponse", "PutRequest", "PutResponse"]
        .map(String::from)
        .into();
    let f = RustFile::scan("s.rs", "s", server).unwrap();
    let arms = f.server_arms(&known, &BTreeMap::new()).unwrap();
    let got: Vec<(&str, &str, &str)> = arms
        .iter()
        .map(|c| (c.method.as_str(), c.request.as_str(), c.response.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("/t.Svc/Get", "GetRequest", "GetResponse"),
            ("/t.Svc/Put", "PutRequest", "PutResponse")
        ]
    );
}
