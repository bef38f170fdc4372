//! Where Vitess's backup storage is when it is an object store: `s3://BUCKET[/ROOT]`,
//! `gs://BUCKET[/ROOT]`, `az://CONTAINER[/ROOT]` (Vitess's `--s3-backup-storage-bucket`
//! and `--s3-backup-storage-root`, and their gcs and azblob twins). Read as hostile input:
//! bounded, no control characters, a bucket name, a root of names that never walks.

/// The longest URL taken: a bucket and a root, not a document.
pub const MAX_URL: usize = 2048;

/// The object stores vtsnap reads, by URL scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Store {
    S3,
    Gcs,
    Azure,
}

/// An archive URL, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchiveUrl<'a> {
    pub store: Store,
    pub bucket: &'a str,
    /// The storage root: names joined by `/`, or empty.
    pub root: &'a str,
}

impl<'a> ArchiveUrl<'a> {
    /// Reads `url`, or says in words what is wrong with it.
    pub fn parse(url: &'a str) -> Result<Self, String> {
        if url.len() > MAX_URL {
            return Err(format!("longer than {MAX_URL} bytes"));
        }
        if url.chars().any(char::is_control) {
            return Err("holds a control character".into());
        }
        let (scheme, rest) = url
            .split_once("://")
            .ok_or("is not a URL (scheme://bucket[/root])")?;
        let store = match scheme {
            "s3" | "s3a" => Store::S3,
            "gs" => Store::Gcs,
            "az" | "azure" => Store::Azure,
            other => {
                return Err(format!(
                    "scheme {other:?} is not an object store vtsnap reads (s3, gs, az)"
                ));
            }
        };
        let (bucket, root) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty()
            || !bucket
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        {
            return Err(format!("bucket {bucket:?} is not a bucket name"));
        }
        let root = root.trim_matches('/');
        if !root.is_empty()
            && root
                .split('/')
                .any(|part| part.is_empty() || part == "." || part == "..")
        {
            return Err(format!("root {root:?} is not a path of names"));
        }
        Ok(Self {
            store,
            bucket,
            root,
        })
    }

    /// The URL again, as [`Self::parse`] reads it back.
    pub fn render(&self) -> String {
        let scheme = match self.store {
            Store::S3 => "s3",
            Store::Gcs => "gs",
            Store::Azure => "az",
        };
        if self.root.is_empty() {
            format!("{scheme}://{}", self.bucket)
        } else {
            format!("{scheme}://{}/{}", self.bucket, self.root)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(url: &str) -> (Store, &str, &str) {
        let u = ArchiveUrl::parse(url).unwrap();
        (u.store, u.bucket, u.root)
    }

    #[test]
    fn an_archive_url_is_a_bucket_and_a_root_of_a_known_store() {
        assert_eq!(parsed("s3://b/vt/root"), (Store::S3, "b", "vt/root"));
        assert_eq!(parsed("s3a://b"), (Store::S3, "b", ""));
        assert_eq!(parsed("s3://b/"), (Store::S3, "b", ""));
        assert_eq!(parsed("gs://b/r"), (Store::Gcs, "b", "r"));
        assert_eq!(parsed("az://c/r/"), (Store::Azure, "c", "r"));
        assert_eq!(parsed("azure://c"), (Store::Azure, "c", ""));
        for (bad, says) in [
            ("/vt/backups", "is not a URL"),
            ("ftp://b/r", "scheme \"ftp\""),
            ("s3:///r", "bucket \"\""),
            ("s3://b c/r", "bucket \"b c\""),
            ("s3://b/a/../x", "not a path of names"),
            ("s3://b/./x", "not a path of names"),
            ("s3://b/a//x", "not a path of names"),
            ("s3://b/a\n", "control character"),
        ] {
            let e = ArchiveUrl::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        let long = format!("s3://b/{}", "r".repeat(MAX_URL - 7));
        assert_eq!(long.len(), MAX_URL);
        assert!(ArchiveUrl::parse(&long).is_ok());
        assert!(ArchiveUrl::parse(&format!("{long}r")).is_err());
    }

    #[test]
    fn a_url_renders_to_one_that_reads_back_the_same() {
        for url in [
            "s3://b/vt/root",
            "gs://b",
            "az://c/r",
            "s3a://b/r/",
            "azure://c",
        ] {
            let u = ArchiveUrl::parse(url).unwrap();
            assert_eq!(ArchiveUrl::parse(&u.render()).unwrap(), u, "{url}");
        }
        assert_eq!(
            ArchiveUrl::parse("s3a://b/r/").unwrap().render(),
            "s3://b/r"
        );
    }
}
