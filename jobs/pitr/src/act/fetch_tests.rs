use std::io::Write;

use flate2::Compression as Level;
use flate2::write::GzEncoder;
use k8s_openapi::jiff::Timestamp;
use vtsnap_core::coverage::GtidSet;
use vtsnap_core::naming::TabletAlias;
use vtsnap_core::snapshot::GtidFlavor;

use super::*;
use crate::archive::FileArchive;

/// A file archive's requests need no runtime of their own; the async API does.
fn block<F: std::future::Future>(work: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(work)
}

const BACKUP: &str = "2026-12-07.093512.zone1-0000000102";
const BINLOG: &str = "vt-0000000102-bin.000003";

/// A binlog's bytes: the magic, then `len` bytes that do not compress away.
fn binlog(len: usize) -> Vec<u8> {
    let mut b = BINLOG_MAGIC.to_vec();
    let mut x: u32 = 12345;
    b.extend((0..len).map(|_| {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        (x >> 16) as u8
    }));
    b
}

/// As pargzip stores it: one gzip member per 250,000 bytes, one after another.
fn pargzip(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for chunk in data.chunks(250_000) {
        let mut e = GzEncoder::new(Vec::new(), Level::fast());
        e.write_all(chunk).unwrap();
        out.extend(e.finish().unwrap());
    }
    out
}

struct Scene {
    root: tempfile::TempDir,
    dest: tempfile::TempDir,
    archive: Archive,
    inc: Increment,
}

fn scene(stored: &[u8], compression: Compression) -> Scene {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("commerce/-").join(BACKUP);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("0"), stored).unwrap();
    let at: Timestamp = "2026-12-07T09:35:12Z".parse().unwrap();
    let inc = Increment {
        name: BACKUP.into(),
        tablet: TabletAlias::new("zone1", 102),
        from: GtidSet::empty(GtidFlavor::Mysql56),
        to: GtidSet::empty(GtidFlavor::Mysql56),
        purged: GtidSet::empty(GtidFlavor::Mysql56),
        first_commit: at,
        last_commit: at,
        started: at,
        compression,
        files: vec![BinlogFile {
            stored: "0".into(),
            binlog: BINLOG.into(),
            crc32: crc32fast::hash(stored),
        }],
    };
    Scene {
        archive: Archive::File(FileArchive::new(root.path(), "commerce", "-").unwrap()),
        root,
        dest: tempfile::tempdir().unwrap(),
        inc,
    }
}

impl Scene {
    fn fetch(&self, max: u64) -> Result<Fetched, FetchError> {
        block(fetch_file(
            &self.archive,
            &self.inc,
            &self.inc.files[0],
            self.dest.path(),
            max,
        ))
    }

    /// Nothing is left in the destination after a failure.
    fn left(&self) -> Vec<String> {
        std::fs::read_dir(self.dest.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    }
}

#[test]
fn a_pargzip_file_of_many_members_is_fetched_whole() {
    let data = binlog(700_000);
    let s = scene(&pargzip(&data), Compression::Gzip);
    let f = s.fetch(MAX_BINLOG_BYTES).unwrap();
    assert_eq!(f.path, s.dest.path().join(BINLOG));
    assert_eq!(f.bytes, data.len() as u64);
    assert_eq!(
        std::fs::read(&f.path).unwrap(),
        data,
        "every member, not the first"
    );
    assert_eq!(s.left(), [BINLOG]);
    // Stored as the server wrote it.
    let s = scene(&data, Compression::None);
    assert_eq!(
        std::fs::read(s.fetch(MAX_BINLOG_BYTES).unwrap().path).unwrap(),
        data
    );
    drop(s.root);
}

#[test]
fn a_damaged_file_fails_naming_it_and_leaves_nothing() {
    let data = binlog(300_000);
    let good = pargzip(&data);
    let mut cases: Vec<(&str, Scene, &str)> = Vec::new();
    let mut s = scene(&good, Compression::Gzip);
    s.inc.files[0].crc32 ^= 1;
    cases.push(("crc", s, "has CRC-32"));
    let s = scene(&good[..good.len() / 2], Compression::Gzip);
    cases.push(("truncated", s, "cannot be read whole"));
    let s = scene(&pargzip(b"not a binlog at all"), Compression::Gzip);
    cases.push(("no magic", s, "is not a binlog"));
    let s = scene(&[], Compression::None);
    cases.push(("empty", s, "is not a binlog"));
    let mut trailing = good.clone();
    trailing.extend(b"garbage after the last member");
    cases.push((
        "trailing",
        scene(&trailing, Compression::Gzip),
        "cannot be read whole",
    ));
    for (what, s, words) in cases {
        let e = s.fetch(MAX_BINLOG_BYTES).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("backup {BACKUP}: file 0 ({BINLOG}) ")),
            "{what}: {e}"
        );
        assert!(e.contains(words), "{what}: {e}");
        assert!(s.left().is_empty(), "{what}: {:?}", s.left());
    }
}

#[test]
fn a_file_larger_than_the_bound_is_refused_and_a_missing_one_named() {
    let data = binlog(10_000);
    let s = scene(&pargzip(&data), Compression::Gzip);
    let e = s.fetch(data.len() as u64 - 1).unwrap_err().to_string();
    assert!(
        e.ends_with(&format!("holds more than {} bytes", data.len() - 1)),
        "{e}"
    );
    assert!(s.left().is_empty());
    assert_eq!(s.fetch(data.len() as u64).unwrap().bytes, data.len() as u64);

    let s = scene(&pargzip(&data), Compression::Gzip);
    std::fs::remove_file(s.root.path().join("commerce/-").join(BACKUP).join("0")).unwrap();
    let e = s.fetch(MAX_BINLOG_BYTES).unwrap_err();
    assert!(
        matches!(e, FetchError::Archive(ArchiveError::Open { .. })),
        "{e}"
    );
    assert!(e.to_string().contains("cannot open its file 0"), "{e}");
}

#[test]
fn each_increment_is_fetched_into_its_own_directory() {
    let data = binlog(1_000);
    let s = scene(&pargzip(&data), Compression::Gzip);
    let got = block(fetch_all(&s.archive, [&s.inc], s.dest.path())).unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].path, s.dest.path().join(BACKUP).join(BINLOG));
}

#[test]
fn the_last_transaction_is_walked_across_files_in_order() {
    use vtsnap_core::pitr::chain::Target;
    let dir = tempfile::tempdir().unwrap();
    let ev = |ts: u32, kind: u8| vtsnap_testkit::binlog::event_at(ts, kind, 0, &[0; 10], false);
    let write = |name: &str, times: &[u32]| {
        let mut f = BINLOG_MAGIC.to_vec();
        f.extend(ev(100, 15));
        for &t in times {
            f.extend(ev(t, 33));
            f.extend(ev(t, 16));
        }
        let path = dir.path().join(name);
        std::fs::write(&path, &f).unwrap();
        Fetched {
            path,
            bytes: f.len() as u64,
        }
    };
    let files = [write("b.1", &[1000, 1002]), write("b.2", &[1004, 1006])];
    let at = |s: i64| Target::Before(Timestamp::from_second(s).unwrap());
    assert_eq!(last_transaction(&files, &at(1005)).unwrap(), Some(1004));
    assert_eq!(last_transaction(&files, &at(1004)).unwrap(), Some(1002));
    assert_eq!(last_transaction(&files, &at(1000)).unwrap(), None);
    assert_eq!(last_transaction(&files, &at(5000)).unwrap(), Some(1006));
    let gtid = vtsnap_core::coverage::GtidSet::parse(
        vtsnap_core::snapshot::GtidFlavor::Mysql56,
        "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5",
        vtsnap_core::coverage::Text::Server,
    )
    .unwrap();
    assert_eq!(
        last_transaction(&files, &Target::Through(gtid)).unwrap(),
        None
    );
    // A fetched file cut short names itself.
    let cut = &files[1];
    let bytes = std::fs::read(&cut.path).unwrap();
    std::fs::write(&cut.path, &bytes[..bytes.len() - 3]).unwrap();
    let err = last_transaction(&files, &at(5000)).unwrap_err().to_string();
    assert!(err.contains("b.2") && err.contains("cut short"), "{err}");
}
