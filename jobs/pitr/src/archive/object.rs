//! One shard's part of a backup storage in an object store: S3 (and stores that speak
//! its API), GCS or Azure, through the `object_store` crate. The URL names the bucket and
//! Vitess's storage root (`--s3-backup-storage-bucket`, `--s3-backup-storage-root`):
//! `s3://BUCKET[/ROOT]`, `gs://BUCKET[/ROOT]`, `az://CONTAINER[/ROOT]`. Credentials,
//! region and endpoint come from the environment as each store's SDK names them
//! (`AWS_ACCESS_KEY_ID`, `AWS_ENDPOINT`, `AWS_ALLOW_HTTP`, `GOOGLE_SERVICE_ACCOUNT`,
//! `AZURE_STORAGE_ACCOUNT_NAME`, …): no secret is ever on a command line.

use std::fs::File;
use std::io::Write;
use std::path::Path as FsPath;
use std::sync::Arc;

use futures::StreamExt;
use object_store::path::Path;
use object_store::{GetOptions, ObjectStore};
use vtsnap_core::pitr::archive_url::{ArchiveUrl, Store};
use vtsnap_core::pitr::manifest::MAX_MANIFEST;

use super::{ArchiveError, MAX_BACKUPS, checked_shard, is_backup_name};

#[derive(Debug, Clone)]
pub struct ObjectArchive {
    store: Arc<dyn ObjectStore>,
    /// `scheme://bucket`, for messages.
    bucket_url: String,
    /// `ROOT/keyspace/shard`, the prefix of the shard's backups.
    shard_prefix: Path,
}

/// The store client for `bucket`, its settings from the environment and then `settings`.
fn build<K: AsRef<str>, V: AsRef<str>>(
    kind: Store,
    bucket: &str,
    settings: &[(K, V)],
) -> Result<Arc<dyn ObjectStore>, String> {
    let unknown = |key: &K| format!("{} is not a setting of this store", key.as_ref());
    Ok(match kind {
        Store::S3 => {
            let mut b = object_store::aws::AmazonS3Builder::from_env().with_bucket_name(bucket);
            for (key, value) in settings {
                b = b.with_config(
                    key.as_ref().parse().map_err(|_| unknown(key))?,
                    value.as_ref(),
                );
            }
            Arc::new(b.build().map_err(|e| e.to_string())?)
        }
        Store::Gcs => {
            let mut b =
                object_store::gcp::GoogleCloudStorageBuilder::from_env().with_bucket_name(bucket);
            for (key, value) in settings {
                b = b.with_config(
                    key.as_ref().parse().map_err(|_| unknown(key))?,
                    value.as_ref(),
                );
            }
            Arc::new(b.build().map_err(|e| e.to_string())?)
        }
        Store::Azure => {
            let mut b =
                object_store::azure::MicrosoftAzureBuilder::from_env().with_container_name(bucket);
            for (key, value) in settings {
                b = b.with_config(
                    key.as_ref().parse().map_err(|_| unknown(key))?,
                    value.as_ref(),
                );
            }
            Arc::new(b.build().map_err(|e| e.to_string())?)
        }
    })
}

impl ObjectArchive {
    /// The archive of `keyspace/shard` under `url` (`scheme://bucket[/root]`); the store's
    /// settings from the environment.
    pub fn new(url: &str, keyspace: &str, shard: &str) -> Result<Self, ArchiveError> {
        Self::with_settings::<&str, &str>(url, keyspace, shard, &[])
    }

    /// As [`Self::new`], with `settings` (the store's configuration keys, as its
    /// environment variables name them in lower case: `aws_endpoint`, …) over the
    /// environment's.
    pub fn with_settings<K: AsRef<str>, V: AsRef<str>>(
        url: &str,
        keyspace: &str,
        shard: &str,
        settings: &[(K, V)],
    ) -> Result<Self, ArchiveError> {
        let bad = |problem: String| ArchiveError::Url {
            url: vtsnap_core::k8s_names::escape_controls(url).into_owned(),
            problem,
        };
        let ArchiveUrl {
            store: kind,
            bucket,
            root,
        } = ArchiveUrl::parse(url).map_err(bad)?;
        checked_shard(keyspace, shard)?;
        // The process's one TLS provider is ring (kube's too); reqwest asks for the
        // default one. Installed already is as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let bucket_url = format!("{}://{bucket}", url.split_once("://").map_or("", |p| p.0));
        let store = build(kind, bucket, settings).map_err(bad)?;
        let shard_prefix = Path::from_iter(root.split('/').filter(|p| !p.is_empty()))
            .join(keyspace)
            .join(shard);
        Ok(Self {
            store,
            bucket_url,
            shard_prefix,
        })
    }

    /// The shard's prefix, for messages.
    pub fn place(&self) -> String {
        format!("{}/{}", self.bucket_url, self.shard_prefix)
    }

    fn object(&self, backup: &str, stored: &str) -> Path {
        self.shard_prefix.clone().join(backup).join(stored)
    }

    /// The backups' names (the "folders" under the shard's prefix named as Vitess names
    /// backups), in name order.
    pub async fn backups(&self) -> Result<Vec<String>, ArchiveError> {
        let listed = self
            .store
            .list_with_delimiter(Some(&self.shard_prefix))
            .await
            .map_err(|e| ArchiveError::List {
                place: self.place(),
                problem: e.to_string(),
            })?;
        if listed.common_prefixes.len() > MAX_BACKUPS {
            return Err(ArchiveError::TooMany {
                place: self.place(),
            });
        }
        let mut names: Vec<String> = listed
            .common_prefixes
            .iter()
            .filter_map(|p| p.filename())
            .filter(|n| is_backup_name(n))
            .map(str::to_owned)
            .collect();
        names.sort();
        Ok(names)
    }

    /// A backup's MANIFEST, at most `MAX_MANIFEST` bytes; `None` while it has none.
    pub async fn manifest(&self, backup: &str) -> Result<Option<Vec<u8>>, ArchiveError> {
        let path = self.object(backup, "MANIFEST");
        let place = || format!("{}/{path}", self.bucket_url);
        let got = match self.store.get_opts(&path, GetOptions::default()).await {
            Ok(g) => g,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => {
                return Err(ArchiveError::List {
                    place: place(),
                    problem: e.to_string(),
                });
            }
        };
        let mut text = Vec::new();
        let mut body = got.into_stream();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| ArchiveError::List {
                place: place(),
                problem: e.to_string(),
            })?;
            if (text.len() + chunk.len()) as u64 > MAX_MANIFEST {
                return Err(ArchiveError::Unreadable {
                    place: place(),
                    problem: format!("a MANIFEST larger than {MAX_MANIFEST} bytes"),
                });
            }
            text.extend_from_slice(&chunk);
        }
        Ok(Some(text))
    }

    /// Copies one stored file of a backup into `to` (at most `max_bytes`) and opens the
    /// copy for reading; nothing is left at `to` when it fails.
    pub async fn copy_into(
        &self,
        backup: &str,
        stored: &str,
        to: &FsPath,
        max_bytes: u64,
    ) -> Result<File, ArchiveError> {
        let open_error = |problem: String| ArchiveError::Open {
            backup: backup.to_owned(),
            stored: stored.to_owned(),
            problem,
        };
        let got = self
            .store
            .get_opts(&self.object(backup, stored), GetOptions::default())
            .await
            .map_err(|e| open_error(e.to_string()))?;
        let copied = async {
            let mut out =
                File::create(to).map_err(|e| open_error(format!("{}: {e}", to.display())))?;
            let mut copied: u64 = 0;
            let mut body = got.into_stream();
            while let Some(chunk) = body.next().await {
                let chunk = chunk.map_err(|e| open_error(e.to_string()))?;
                copied += chunk.len() as u64;
                if copied > max_bytes {
                    return Err(open_error(format!("holds more than {max_bytes} bytes")));
                }
                out.write_all(&chunk)
                    .map_err(|e| open_error(format!("{}: {e}", to.display())))?;
            }
            out.sync_all()
                .map_err(|e| open_error(format!("{}: {e}", to.display())))?;
            File::open(to).map_err(|e| open_error(format!("{}: {e}", to.display())))
        }
        .await;
        if copied.is_err() {
            // Best effort: the copy's name never reads as a binlog's.
            let _ = std::fs::remove_file(to);
        }
        copied
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shard_s_prefix_follows_vitess_s_object_names() {
        let a = ObjectArchive::new("s3://bucket/vt/root", "commerce", "-80").unwrap();
        assert_eq!(a.place(), "s3://bucket/vt/root/commerce/-80");
        assert_eq!(
            a.object("2026-12-07.093512.zone1-0000000102", "MANIFEST")
                .to_string(),
            "vt/root/commerce/-80/2026-12-07.093512.zone1-0000000102/MANIFEST"
        );
        let bare = ObjectArchive::new("s3://bucket", "commerce", "-").unwrap();
        assert_eq!(bare.place(), "s3://bucket/commerce/-");
        let e = ObjectArchive::new("s3://bucket", "..", "-").unwrap_err();
        assert!(e.to_string().contains("cannot name a folder"), "{e}");
    }
}
