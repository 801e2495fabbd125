//! An object store (S3-compatible, a local bucket directory) under a key prefix as an
//! endpoint: listed a page at a time in key order, read by ranges, written through the
//! store's piecewise upload (one put for small objects, a multipart upload for big ones).
//! Directories exist only as key prefixes here: none is listed, made or deleted.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use strata_object::upload::Upload;
use strata_object::{ObjectError, ObjectStore};

use crate::endpoint::{Endpoint, Entry, ListSender, Prune, Writer};
use crate::{Result, SyncError};

/// Keys listed per request.
const PAGE: usize = 1000;

/// The objects under `prefix` in `store`.
#[derive(Debug)]
pub struct ObjectEndpoint {
    store: Arc<dyn ObjectStore>,
    /// Empty, or ending in `/`.
    prefix: String,
}

impl ObjectEndpoint {
    pub fn new(store: Arc<dyn ObjectStore>, prefix: &str) -> ObjectEndpoint {
        let mut prefix = prefix.trim_matches('/').to_string();
        if !prefix.is_empty() {
            prefix.push('/');
        }
        ObjectEndpoint { store, prefix }
    }

    fn full(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }
}

#[async_trait]
impl Endpoint for ObjectEndpoint {
    fn describe(&self) -> String {
        format!(
            "{}/{}",
            self.store.describe().trim_end_matches('/'),
            self.prefix
        )
    }

    fn has_dirs(&self) -> bool {
        false
    }

    async fn list(&self, after: Option<String>, _prune: Arc<Prune>, tx: ListSender) -> Result<()> {
        let mut last = after.map(|a| self.full(&a));
        loop {
            let page = self
                .store
                .list(&self.prefix, last.as_deref(), PAGE)
                .await
                .map_err(|e| SyncError::object(self.describe(), e))?;
            let Some(end) = page.last() else {
                return Ok(());
            };
            last = Some(end.key.clone());
            for info in page {
                let Some(key) = info.key.strip_prefix(&self.prefix) else {
                    continue;
                };
                // Folder markers (`dir/`) are not files.
                if key.is_empty() || key.ends_with('/') {
                    continue;
                }
                let entry = Entry::file(key.to_string(), info.size, info.modified);
                if tx.send(Ok(entry)).await.is_err() {
                    return Ok(());
                }
            }
        }
    }

    async fn stat(&self, key: &str) -> Result<Option<Entry>> {
        match self.store.head(&self.full(key)).await {
            Ok(info) => Ok(Some(Entry::file(key.to_string(), info.size, info.modified))),
            Err(ObjectError::NotFound(_)) => Ok(None),
            Err(e) => Err(SyncError::object(key, e)),
        }
    }

    async fn read(&self, entry: &Entry, offset: u64, len: u64) -> Result<Bytes> {
        let whole = offset == 0 && len >= entry.size;
        let range = (!whole).then(|| offset..offset.saturating_add(len));
        self.store
            .get(&self.full(&entry.key), range)
            .await
            .map_err(|e| SyncError::object(&entry.key, e))
    }

    async fn create<'a>(&'a self, key: &str) -> Result<Box<dyn Writer + 'a>> {
        let upload = self
            .store
            .upload(&self.full(key))
            .await
            .map_err(|e| SyncError::object(key, e))?;
        Ok(Box::new(ObjectWriter {
            key: key.to_string(),
            upload,
        }))
    }

    async fn delete(&self, entry: &Entry) -> Result<()> {
        if entry.is_dir() {
            return Ok(());
        }
        self.store
            .delete(&self.full(&entry.key))
            .await
            .map_err(|e| SyncError::object(&entry.key, e))
    }

    async fn mkdir(&self, _key: &str) -> Result<()> {
        Ok(())
    }

    async fn symlink(&self, key: &str, _target: &str) -> Result<()> {
        Err(SyncError::Usage(format!(
            "{key}: an object store cannot hold a symlink (leave --links out to copy what it points to)"
        )))
    }

    async fn set_attrs(&self, _key: &str, _like: &Entry, _perms: bool) -> Result<()> {
        Ok(())
    }

    async fn sync(&self) -> Result<()> {
        self.store
            .sync()
            .await
            .map(drop)
            .map_err(|e| SyncError::object(self.describe(), e))
    }
}

/// An object being uploaded.
struct ObjectWriter<'a> {
    key: String,
    upload: Box<dyn Upload + 'a>,
}

#[async_trait]
impl Writer for ObjectWriter<'_> {
    async fn write(&mut self, data: Bytes) -> Result<()> {
        self.upload
            .write(data)
            .await
            .map_err(|e| SyncError::object(&self.key, e))
    }

    async fn finish(self: Box<Self>, _like: &Entry, _perms: bool) -> Result<()> {
        let key = self.key;
        self.upload
            .finish()
            .await
            .map_err(|e| SyncError::object(&key, e))
    }

    async fn abort(self: Box<Self>) {
        if let Err(e) = self.upload.abort().await {
            tracing::warn!("{}: abandoning its upload failed: {e}", self.key);
        }
    }
}
