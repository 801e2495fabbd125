//! Backends on the `object_store` crate: a local directory (`--storage file`; a put is
//! renamed into place at once and made durable by the next [`ObjectStore::sync`], see
//! [`crate::local`]), any S3-compatible service (`--storage s3`, durable when a put
//! returns), Azure Blob Storage and its emulator Azurite (`--storage wasb`), and memory
//! (tests).

use std::ops::Range;
use std::path::Path as FsPath;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::FuturesUnordered;
use futures::{StreamExt, TryStreamExt};
use object_store::aws::AmazonS3Builder;
use object_store::azure::MicrosoftAzureBuilder;
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{GetOptions, GetRange, ObjectStoreExt, PutPayload};
use strata_types::Secret;

use crate::local::{self, INLINE_MAX, LocalSync};
use crate::upload::{PART_SIZE, PARTS_IN_FLIGHT, Upload};
use crate::{ObjectError, ObjectInfo, ObjectStore, Result};

/// The region an AWS S3 host name holds (`s3.REGION.amazonaws.com`,
/// `s3-REGION.amazonaws.com`, `s3.dualstack.REGION.amazonaws.com`), given the host name
/// after the bucket's label; `None` for any other host.
pub fn aws_region(domain: &str) -> Option<String> {
    let rest = domain.strip_suffix(".amazonaws.com")?;
    let region = rest
        .strip_prefix("s3.")
        .or_else(|| rest.strip_prefix("s3-"))?;
    let region = region.strip_prefix("dualstack.").unwrap_or(region);
    (!region.is_empty() && !region.contains('.')).then(|| region.to_string())
}

/// Settings of an S3-compatible store.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct S3Config {
    /// Endpoint URL (`http://127.0.0.1:9000`); empty for AWS itself.
    pub endpoint: String,
    pub region: String,
    pub bucket: String,
    /// Credentials; when empty, taken from `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY`.
    pub access_key: String,
    pub secret_key: Secret,
    /// Temporary credentials' session token (`--session-token`, `AWS_SESSION_TOKEN`).
    pub session_token: Option<Secret>,
    /// Address the bucket as `endpoint/bucket` (path style). Otherwise requests go to
    /// `bucket.host`, and `endpoint` already names the bucket
    /// (`https://BUCKET.s3.REGION.amazonaws.com`).
    pub path_style: bool,
}

/// Settings of an Azure Blob Storage container.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AzureConfig {
    /// Storage account; when empty, taken from `AZURE_STORAGE_ACCOUNT_NAME`.
    pub account: String,
    /// The account's access key; when empty, taken from `AZURE_STORAGE_ACCOUNT_KEY`.
    pub key: Secret,
    pub container: String,
    /// The account's blob service URL: empty for `https://ACCOUNT.blob.core.windows.net`;
    /// `http://127.0.0.1:10000/ACCOUNT` for Azurite (the account in the path).
    pub endpoint: String,
}

/// Retries inside the `object_store` clients: three quick ones. Requests that go through a
/// volume's store are retried again, with backoff, by the retry wrapper; a bare store (a
/// bucket check, `sync`'s first request) reports an unreachable endpoint in about a second
/// instead of after ten retries (about a minute).
fn client_retries() -> object_store::RetryConfig {
    object_store::RetryConfig {
        max_retries: 3,
        retry_timeout: std::time::Duration::from_secs(30),
        ..object_store::RetryConfig::default()
    }
}

/// An [`ObjectStore`] backed by an `object_store` implementation.
#[derive(Debug)]
pub struct Backend {
    inner: Arc<dyn object_store::ObjectStore>,
    describe: String,
    /// The listing comes back in key order (S3, memory) rather than in walk order (files).
    ordered_list: bool,
    /// A local store's directory and its files not yet made durable.
    local: Option<LocalSync>,
    /// The storage class objects are put with (S3 `x-amz-storage-class`), if any.
    storage_class: Option<String>,
}

impl Backend {
    /// This store putting objects with storage class `class` (S3: `STANDARD_IA`,
    /// `GLACIER_IR`, ...; Azure: an access tier): docs/PLACEMENT.md.
    pub fn with_storage_class(self, class: Option<String>) -> Backend {
        Backend {
            storage_class: class.filter(|c| !c.is_empty()),
            ..self
        }
    }

    /// What every put carries: the storage class, when one is set.
    fn attributes(&self) -> object_store::Attributes {
        let mut attributes = object_store::Attributes::new();
        if let Some(class) = &self.storage_class {
            attributes.insert(object_store::Attribute::StorageClass, class.clone().into());
        }
        attributes
    }

    /// A local directory as a store; the directory must exist.
    pub fn local(dir: &FsPath) -> Result<Backend> {
        if !dir.is_dir() {
            return Err(ObjectError::NoBucket(format!(
                "directory {} does not exist",
                dir.display()
            )));
        }
        let fs = LocalFileSystem::new_with_prefix(dir)
            .map_err(|e| ObjectError::NoBucket(format!("{}: {e}", dir.display())))?;
        Ok(Backend {
            inner: Arc::new(fs),
            describe: format!("file://{}", dir.display()),
            ordered_list: false,
            local: Some(LocalSync::new(dir)),
            storage_class: None,
        })
    }

    /// An in-memory store (tests).
    pub fn memory() -> Backend {
        Backend {
            inner: Arc::new(InMemory::new()),
            describe: "mem://".into(),
            ordered_list: true,
            local: None,
            storage_class: None,
        }
    }

    /// An S3-compatible store. Nothing is contacted until the first request; call
    /// [`Backend::check`] to verify the bucket and credentials.
    pub fn s3(cfg: &S3Config) -> Result<Backend> {
        let mut b = AmazonS3Builder::from_env().with_bucket_name(&cfg.bucket);
        if !cfg.region.is_empty() {
            b = b.with_region(&cfg.region);
        } else if !cfg.endpoint.is_empty() {
            b = b.with_region("us-east-1");
        }
        if !cfg.endpoint.is_empty() {
            b = b
                .with_endpoint(&cfg.endpoint)
                .with_allow_http(cfg.endpoint.starts_with("http://"));
        }
        if !cfg.access_key.is_empty() {
            b = b
                .with_access_key_id(&cfg.access_key)
                .with_secret_access_key(cfg.secret_key.expose());
        }
        if let Some(token) = &cfg.session_token {
            b = b.with_token(token.expose());
        }
        let store = b
            .with_retry(client_retries())
            .with_virtual_hosted_style_request(!cfg.path_style)
            .build()
            .map_err(|e| ObjectError::Other(format!("s3 configuration: {e}")))?;
        let place = if cfg.endpoint.is_empty() {
            "aws".to_string()
        } else {
            cfg.endpoint.clone()
        };
        Ok(Backend {
            inner: Arc::new(store),
            describe: format!("s3://{}@{place}", cfg.bucket),
            ordered_list: true,
            local: None,
            storage_class: None,
        })
    }
}

impl Backend {
    /// An Azure Blob Storage container (or one of Azurite's). Nothing is contacted until
    /// the first request; call [`Backend::check`] to verify the container and key.
    pub fn azure(cfg: &AzureConfig) -> Result<Backend> {
        let mut b = MicrosoftAzureBuilder::from_env().with_container_name(&cfg.container);
        if !cfg.account.is_empty() {
            b = b.with_account(&cfg.account);
        }
        if !cfg.key.expose().is_empty() {
            b = b.with_access_key(cfg.key.expose());
        }
        let endpoint = cfg.endpoint.trim_end_matches('/');
        if !endpoint.is_empty() {
            b = b
                .with_endpoint(endpoint.to_string())
                .with_allow_http(endpoint.starts_with("http://"));
        }
        let store = b
            .with_retry(client_retries())
            .build()
            .map_err(|e| ObjectError::Other(format!("azure configuration: {e}")))?;
        let place = if endpoint.is_empty() {
            format!("{}.blob.core.windows.net", cfg.account)
        } else {
            endpoint.to_string()
        };
        Ok(Backend {
            inner: Arc::new(store),
            describe: format!("wasb://{}@{place}", cfg.container),
            ordered_list: true,
            local: None,
            storage_class: None,
        })
    }
}

impl Backend {
    fn written(&self, key: &str) {
        if let Some(local) = &self.local {
            local.written(key);
        }
    }

    /// Objects put and not yet made durable (local stores; 0 for the others).
    pub fn unsynced(&self) -> usize {
        self.local.as_ref().map_or(0, LocalSync::pending)
    }
}

fn path(key: &str) -> Result<Path> {
    crate::check_key(key)?;
    Path::parse(key).map_err(|_| ObjectError::InvalidKey(key.into()))
}

/// The local I/O error somewhere in `e`'s causes, if it is one a caller can act on (no
/// space, over quota, read-only), as ours.
fn local_io_kind(e: &(dyn std::error::Error + 'static), text: &str) -> Option<ObjectError> {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cause {
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            return match ObjectError::from_io(text, io) {
                ObjectError::Other(_) => None,
                kind => Some(kind),
            };
        }
        cause = c.source();
    }
    None
}

/// Turn an `object_store` error into ours, recognising authentication, missing buckets,
/// and a store that is full, over quota or read-only (a local disk's errors, or a
/// server's "507 Insufficient Storage" and quota errors).
fn map_err(key: &str, e: object_store::Error) -> ObjectError {
    use object_store::Error as E;
    let text = e.to_string();
    let has = |words: &[&str]| words.iter().any(|w| text.contains(w));
    if let Some(kind) = local_io_kind(&e, &text) {
        return kind;
    }
    if has(&[
        "507 Insufficient Storage",
        "XMinioStorageFull",
        "InsufficientStorage",
    ]) {
        return ObjectError::NoSpace(text);
    }
    if has(&["QuotaExceeded", "XMinioAdminBucketQuotaExceeded"]) {
        return ObjectError::Quota(text);
    }
    match e {
        E::NotFound { .. } if has(&["NoSuchBucket"]) => ObjectError::NoBucket(text),
        E::NotFound { .. } => ObjectError::NotFound(key.into()),
        E::PermissionDenied { .. } | E::Unauthenticated { .. } => ObjectError::Auth(text),
        _ if has(&["NoSuchBucket", "bucket does not exist", "ContainerNotFound"]) => {
            ObjectError::NoBucket(text)
        }
        _ if has(&[
            "SignatureDoesNotMatch",
            "InvalidAccessKeyId",
            "AccessDenied",
            "AuthenticationFailed",
            "AuthorizationFailure",
            "403 Forbidden",
        ]) =>
        {
            ObjectError::Auth(text)
        }
        E::InvalidPath { .. } => ObjectError::InvalidKey(key.into()),
        _ => ObjectError::Other(text),
    }
}

fn info(meta: object_store::ObjectMeta) -> ObjectInfo {
    ObjectInfo {
        key: meta.location.to_string(),
        size: meta.size,
        modified: meta.last_modified.timestamp(),
    }
}

#[async_trait]
impl ObjectStore for Backend {
    fn describe(&self) -> String {
        self.describe.clone()
    }

    async fn get(&self, key: &str, range: Option<Range<u64>>) -> Result<Bytes> {
        let location = path(key)?;
        if let Some(r) = &range
            && r.start >= r.end
        {
            return Ok(Bytes::new());
        }
        if let Some(dir) = self.local.as_ref().map(LocalSync::root) {
            if let Some(data) = local::get_small(dir, key, range.clone())? {
                return Ok(data);
            }
            let (dir, key) = (dir.to_path_buf(), key.to_string());
            return tokio::task::spawn_blocking(move || local::get(&dir, &key, range))
                .await
                .map_err(|e| ObjectError::Other(format!("read task failed: {e}")))?;
        }
        let start = range.as_ref().map(|r| r.start);
        let options = GetOptions {
            range: range.map(GetRange::Bounded),
            ..GetOptions::default()
        };
        let result = match self.inner.get_opts(&location, options).await {
            Ok(result) => result,
            // A range that starts at or past the end reads as nothing (stores refuse it:
            // 416, or an invalid-range error), as the trait promises.
            Err(e) if start.is_some() && !matches!(e, object_store::Error::NotFound { .. }) => {
                let size = self.head(key).await?.size;
                if start.is_some_and(|s| s >= size) {
                    return Ok(Bytes::new());
                }
                return Err(map_err(key, e));
            }
            Err(e) => return Err(map_err(key, e)),
        };
        result.bytes().await.map_err(|e| map_err(key, e))
    }

    async fn put(&self, key: &str, data: Bytes) -> Result<()> {
        self.put_parts(key, vec![data]).await
    }

    async fn put_parts(&self, key: &str, parts: Vec<Bytes>) -> Result<()> {
        let location = path(key)?;
        if let Some(dir) = self.local.as_ref().map(LocalSync::root)
            && parts.iter().map(Bytes::len).sum::<usize>() <= INLINE_MAX
        {
            local::put_inline(dir, key, &parts)?;
            self.written(key);
            return Ok(());
        }
        let payload: PutPayload = parts.into_iter().collect();
        let opts = object_store::PutOptions {
            attributes: self.attributes(),
            ..object_store::PutOptions::default()
        };
        self.inner
            .put_opts(&location, payload, opts)
            .await
            .map_err(|e| map_err(key, e))?;
        self.written(key);
        Ok(())
    }

    async fn upload<'a>(&'a self, key: &str) -> Result<Box<dyn Upload + 'a>> {
        Ok(Box::new(BackendUpload {
            backend: self,
            location: path(key)?,
            key: key.to_string(),
            multipart: None,
            pending: Vec::new(),
            pending_len: 0,
            in_flight: FuturesUnordered::new(),
        }))
    }

    async fn delete(&self, key: &str) -> Result<()> {
        let location = path(key)?;
        match self.inner.delete(&location).await {
            Ok(()) => Ok(()),
            Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(map_err(key, e)),
        }
    }

    async fn head(&self, key: &str) -> Result<ObjectInfo> {
        let location = path(key)?;
        self.inner
            .head(&location)
            .await
            .map(info)
            .map_err(|e| map_err(key, e))
    }

    async fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ObjectInfo>> {
        let trimmed = prefix.trim_end_matches('/');
        let prefix_path = if trimmed.is_empty() {
            None
        } else {
            Some(path(trimmed)?)
        };
        let stream = match start_after {
            Some(after) => self
                .inner
                .list_with_offset(prefix_path.as_ref(), &path(after)?),
            None => self.inner.list(prefix_path.as_ref()),
        };
        let mut out: Vec<ObjectInfo> = if self.ordered_list {
            stream.take(limit).map_ok(info).try_collect().await
        } else {
            stream.map_ok(info).try_collect().await
        }
        .map_err(|e| map_err(prefix, e))?;
        if !self.ordered_list {
            out.sort_by(|a, b| a.key.cmp(&b.key));
            out.truncate(limit);
        }
        Ok(out)
    }

    async fn check(&self) -> Result<()> {
        match self.local.as_ref().map(LocalSync::root) {
            // Listing a directory tree walks all of it; its existence is the check.
            Some(dir) if dir.is_dir() => Ok(()),
            Some(dir) => Err(ObjectError::NoBucket(format!(
                "directory {} does not exist",
                dir.display()
            ))),
            None => self.list("", None, 1).await.map(drop),
        }
    }

    async fn sync(&self) -> Result<u64> {
        match &self.local {
            Some(local) => local.sync().await,
            None => Ok(0),
        }
    }

    async fn scan_all(&self, prefix: &str, each: &mut crate::ObjectVisitor<'_>) -> Result<()> {
        let trimmed = prefix.trim_end_matches('/');
        let prefix_path = if trimmed.is_empty() {
            None
        } else {
            Some(path(trimmed)?)
        };
        let mut stream = self.inner.list(prefix_path.as_ref());
        while let Some(meta) = stream.next().await {
            match meta {
                Ok(meta) => each(info(meta))?,
                // A file deleted while the walk passes it.
                Err(object_store::Error::NotFound { .. }) => continue,
                Err(e) => return Err(map_err(prefix, e)),
            }
        }
        Ok(())
    }
}

/// A piecewise write to a [`Backend`]: one plain put when the object ends within its first
/// part, otherwise the store's multipart upload with a few parts in flight.
struct BackendUpload<'a> {
    backend: &'a Backend,
    location: Path,
    key: String,
    multipart: Option<Box<dyn object_store::MultipartUpload>>,
    pending: Vec<Bytes>,
    pending_len: usize,
    in_flight: FuturesUnordered<object_store::UploadPart>,
}

impl BackendUpload<'_> {
    /// Send what is pending as the next part, once fewer than [`PARTS_IN_FLIGHT`] are out.
    async fn send_part(&mut self) -> Result<()> {
        while self.in_flight.len() >= PARTS_IN_FLIGHT {
            self.wait_one().await?;
        }
        if self.multipart.is_none() {
            let opts = object_store::PutMultipartOptions {
                attributes: self.backend.attributes(),
                ..object_store::PutMultipartOptions::default()
            };
            let started = self
                .backend
                .inner
                .put_multipart_opts(&self.location, opts)
                .await;
            self.multipart = Some(started.map_err(|e| map_err(&self.key, e))?);
        }
        let payload: PutPayload = std::mem::take(&mut self.pending).into_iter().collect();
        self.pending_len = 0;
        if let Some(m) = self.multipart.as_mut() {
            self.in_flight.push(m.put_part(payload));
        }
        Ok(())
    }

    async fn wait_one(&mut self) -> Result<()> {
        match self.in_flight.next().await {
            Some(done) => done.map_err(|e| map_err(&self.key, e)),
            None => Ok(()),
        }
    }
}

#[async_trait]
impl Upload for BackendUpload<'_> {
    async fn write(&mut self, data: Bytes) -> Result<()> {
        self.pending_len += data.len();
        self.pending.push(data);
        if self.pending_len >= PART_SIZE {
            self.send_part().await?;
        }
        Ok(())
    }

    async fn finish(mut self: Box<Self>) -> Result<()> {
        if self.multipart.is_none() {
            let parts = std::mem::take(&mut self.pending);
            return self.backend.put_parts(&self.key, parts).await;
        }
        if self.pending_len > 0 {
            self.send_part().await?;
        }
        while !self.in_flight.is_empty() {
            if let Err(e) = self.wait_one().await {
                let _ = self.abort().await;
                return Err(e);
            }
        }
        if let Some(m) = self.multipart.as_mut() {
            m.complete().await.map_err(|e| map_err(&self.key, e))?;
        }
        self.backend.written(&self.key);
        Ok(())
    }

    async fn abort(mut self: Box<Self>) -> Result<()> {
        while self.in_flight.next().await.is_some() {}
        match self.multipart.as_mut() {
            Some(m) => m.abort().await.map_err(|e| map_err(&self.key, e)),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aws_regions_are_read_from_s3_host_names() {
        let region = |d: &str| aws_region(d);
        assert_eq!(
            region("s3.us-east-2.amazonaws.com").as_deref(),
            Some("us-east-2")
        );
        assert_eq!(
            region("s3-eu-west-1.amazonaws.com").as_deref(),
            Some("eu-west-1")
        );
        assert_eq!(
            region("s3.dualstack.ap-south-1.amazonaws.com").as_deref(),
            Some("ap-south-1")
        );
        assert_eq!(region("s3.amazonaws.com"), None);
        assert_eq!(region("127.0.0.1:9000"), None);
        assert_eq!(region("storage.example.com"), None);
    }

    #[test]
    fn a_full_disk_and_a_full_server_are_no_space_not_other() {
        let local = |kind: std::io::ErrorKind| object_store::Error::Generic {
            store: "LocalFileSystem",
            source: Box::new(std::io::Error::from(kind)),
        };
        assert!(matches!(
            map_err("k", local(std::io::ErrorKind::StorageFull)),
            ObjectError::NoSpace(_)
        ));
        assert!(matches!(
            map_err("k", local(std::io::ErrorKind::QuotaExceeded)),
            ObjectError::Quota(_)
        ));
        assert!(matches!(
            map_err("k", local(std::io::ErrorKind::ReadOnlyFilesystem)),
            ObjectError::ReadOnly(_)
        ));
        assert!(matches!(
            map_err("k", local(std::io::ErrorKind::BrokenPipe)),
            ObjectError::Other(_)
        ));
        let server = object_store::Error::Generic {
            store: "S3",
            source: "Server returned non-2xx status code: 507 Insufficient Storage".into(),
        };
        assert!(matches!(map_err("k", server), ObjectError::NoSpace(_)));
        assert!(!ObjectError::NoSpace(String::new()).is_transient());
    }

    #[tokio::test]
    async fn local_puts_wait_for_a_sync_to_be_durable() {
        let dir = tempfile::tempdir().unwrap();
        let store = Backend::local(dir.path()).unwrap();
        store
            .put("vol/chunks/0/1/1_0_3", Bytes::from_static(b"abc"))
            .await
            .unwrap();
        store
            .put_parts("vol/meta-backup/x", vec![Bytes::from_static(b"d")])
            .await
            .unwrap();
        // The key names the file the sync will open.
        assert!(dir.path().join("vol/chunks/0/1/1_0_3").is_file());
        assert_eq!(store.unsynced(), 2);
        assert_eq!(store.sync().await.unwrap(), 2);
        assert_eq!(store.unsynced(), 0);
        assert_eq!(Backend::memory().sync().await.unwrap(), 0);
    }

    #[tokio::test]
    async fn staging_files_are_not_objects() {
        let dir = tempfile::tempdir().unwrap();
        let store = Backend::local(dir.path()).unwrap();
        store.put("a/obj", Bytes::from_static(b"1")).await.unwrap();
        std::fs::write(dir.path().join("a/obj#1"), b"left by a crash").unwrap();
        let listed = store.list("", None, 10).await.unwrap();
        let keys: Vec<&str> = listed.iter().map(|o| o.key.as_str()).collect();
        assert_eq!(keys, ["a/obj"]);
    }
}
