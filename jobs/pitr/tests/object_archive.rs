//! The object-store archive against a real S3-compatible server (moto), held to the file
//! archive: the same backups stored both ways read the same, file for file, and a hostile
//! store (a MANIFEST too large, an object larger than its bound, a missing file) fails as
//! the folder would, naming what.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use vtsnap_pitr::archive::{Archive, FileArchive, ObjectArchive};
use vtsnap_testkit::s3::S3Server;

const DONE: &str = "2026-12-07.093512.zone1-0000000102";
const IN_PROGRESS: &str = "2026-12-07.101500.zone1-0000000102";
const OTHER_SHARD: &str = "2026-12-07.093512.zone1-0000000202";

/// The same tree as files under `root` and as objects under `bucket/prefix`.
fn store_both(s3: &S3Server, bucket: &str, prefix: &str, root: &Path, files: &[(&str, Vec<u8>)]) {
    for (key, body) in files {
        let path = root.join(key);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, body).unwrap();
        s3.put(bucket, &format!("{prefix}/{key}"), body);
    }
}

#[tokio::test]
async fn backups_in_an_object_store_read_as_the_same_backups_in_a_folder() {
    let s3 = S3Server::start();
    s3.create_bucket("backups");
    let root = tempfile::tempdir().unwrap();
    let manifest = br#"{"BackupName": "x"}"#.to_vec();
    let binlog = b"\xfebinlog data".to_vec();
    store_both(
        &s3,
        "backups",
        "vt/root",
        root.path(),
        &[
            (&format!("commerce/-/{DONE}/0"), binlog.clone()),
            (&format!("commerce/-/{DONE}/MANIFEST"), manifest.clone()),
            (&format!("commerce/-/{IN_PROGRESS}/0"), binlog.clone()),
            // Not a backup of this shard, or not a backup at all.
            (
                &format!("commerce/-80/{OTHER_SHARD}/MANIFEST"),
                manifest.clone(),
            ),
            ("commerce/-/not-a-backup/MANIFEST", manifest.clone()),
        ],
    );
    // An object named as a backup is no backup "folder", as a file is none in the folder.
    std::fs::write(
        root.path()
            .join("commerce/-/2026-12-07.120000.zone1-0000000102"),
        "x",
    )
    .unwrap();
    s3.put(
        "backups",
        "vt/root/commerce/-/2026-12-07.120000.zone1-0000000102",
        b"x",
    );

    let folder = Archive::File(FileArchive::new(root.path(), "commerce", "-").unwrap());
    let objects = Archive::Object(
        ObjectArchive::with_settings(
            "s3://backups/vt/root",
            "commerce",
            "-",
            &s3.client_settings(),
        )
        .unwrap(),
    );
    assert_eq!(objects.place(), "s3://backups/vt/root/commerce/-");

    let listed = folder.backups().await.unwrap();
    assert_eq!(listed, [DONE, IN_PROGRESS]);
    assert_eq!(objects.backups().await.unwrap(), listed);

    assert_eq!(folder.manifest(DONE).await.unwrap(), Some(manifest.clone()));
    assert_eq!(objects.manifest(DONE).await.unwrap(), Some(manifest));
    assert_eq!(folder.manifest(IN_PROGRESS).await.unwrap(), None);
    assert_eq!(objects.manifest(IN_PROGRESS).await.unwrap(), None);

    let spool = tempfile::tempdir().unwrap();
    for archive in [&folder, &objects] {
        let stored = archive
            .open(DONE, "0", spool.path(), 1 << 20)
            .await
            .unwrap();
        let mut got = Vec::new();
        std::io::Read::read_to_end(&mut &stored.file, &mut got).unwrap();
        assert_eq!(got, binlog, "{}", archive.place());
        drop(stored);
        // The object's copy is gone with its handle; nothing was ever in the folder's.
        assert_eq!(std::fs::read_dir(spool.path()).unwrap().count(), 0);
        let e = archive
            .open(DONE, "9", spool.path(), 1 << 20)
            .await
            .unwrap_err();
        assert!(
            e.to_string()
                .starts_with(&format!("backup {DONE}: cannot open its file 9")),
            "{e}"
        );
        assert_eq!(std::fs::read_dir(spool.path()).unwrap().count(), 0);
    }

    // Larger than the bound: refused naming the file, and no partial copy stays.
    let e = objects.open(DONE, "0", spool.path(), 4).await.unwrap_err();
    assert!(e.to_string().contains("holds more than 4 bytes"), "{e}");
    assert_eq!(std::fs::read_dir(spool.path()).unwrap().count(), 0);

    // A MANIFEST larger than any Vitess writes: the backup's own fault, passed over.
    let huge = vec![b' '; vtsnap_core::pitr::manifest::MAX_MANIFEST as usize + 1];
    s3.put(
        "backups",
        &format!("vt/root/commerce/-/{IN_PROGRESS}/MANIFEST"),
        &huge,
    );
    let e = objects.manifest(IN_PROGRESS).await.unwrap_err();
    assert!(e.is_the_backups(), "{e}");
    assert!(e.to_string().contains("a MANIFEST larger than"), "{e}");

    // A bucket that does not exist is the store's failure, named.
    let missing = Archive::Object(
        ObjectArchive::with_settings("s3://nobucket", "commerce", "-", &s3.client_settings())
            .unwrap(),
    );
    let e = missing.backups().await.unwrap_err();
    assert!(!e.is_the_backups(), "{e}");
    assert!(
        e.to_string()
            .starts_with("cannot list s3://nobucket/commerce/-"),
        "{e}"
    );
}

/// A fake S3 endpoint, for fault injection only: it lists one backup, and refuses every
/// other request (403), as a store refuses a key the credentials may not read.
async fn fake_store_refusing_reads() -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buf = vec![0u8; 16 * 1024];
                let n = s.read(&mut buf).await.unwrap_or(0);
                let request = String::from_utf8_lossy(&buf[..n]).into_owned();
                let (status, body) = if request.contains("list-type=2") {
                    (
                        "200 OK",
                        format!(
                            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListBucketResult><Name>b</Name>\
                         <Prefix>commerce/-/</Prefix><KeyCount>1</KeyCount><MaxKeys>1000</MaxKeys>\
                         <Delimiter>/</Delimiter><IsTruncated>false</IsTruncated><CommonPrefixes>\
                         <Prefix>commerce/-/{DONE}/</Prefix></CommonPrefixes></ListBucketResult>"
                        ),
                    )
                } else {
                    ("403 Forbidden", "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>AccessDenied</Code>\
                      <Message>Access Denied</Message></Error>".to_owned())
                };
                let answer = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: application/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = s.write_all(answer.as_bytes()).await;
            });
        }
    });
    format!("http://{address}")
}

/// A MANIFEST that cannot be read as one is its backup's fault: passed over, named. A
/// store that refuses to give it is not: the read fails, and no backup is called
/// unusable for it (the chain would stop there and the window shrink).
#[tokio::test]
async fn a_backup_s_own_bad_manifest_is_passed_over_and_a_store_s_refusal_fails_the_read() {
    use vtsnap_pitr::observe::read_archive;
    let now = k8s_openapi::jiff::Timestamp::now();
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join(format!("commerce/-/{DONE}/MANIFEST"))).unwrap();
    let folder = Archive::File(FileArchive::new(root.path(), "commerce", "-").unwrap());
    let o = read_archive(&folder, "commerce", "-", now).await.unwrap();
    assert_eq!(o.unusable.len(), 1, "{:?}", o.unusable);
    assert_eq!(o.unusable[0].name, DONE);
    assert!(
        o.unusable[0].why.contains("not a regular file"),
        "{:?}",
        o.unusable
    );

    let endpoint = fake_store_refusing_reads().await;
    let refusing = Archive::Object(
        ObjectArchive::with_settings(
            "s3://b",
            "commerce",
            "-",
            &vtsnap_testkit::s3::client_settings(&endpoint),
        )
        .unwrap(),
    );
    assert_eq!(refusing.backups().await.unwrap(), [DONE]);
    let e = read_archive(&refusing, "commerce", "-", now)
        .await
        .unwrap_err();
    assert!(!e.is_the_backups(), "{e}");
    assert!(e.to_string().contains(&format!("{DONE}/MANIFEST")), "{e}");
}
