//! Key prefix per volume: every key is stored as `{prefix}{key}`, so several volumes can
//! share one bucket.

use std::ops::Range;

use async_trait::async_trait;
use bytes::Bytes;

use crate::upload::Upload;
use crate::{ObjectInfo, ObjectStore, Result};

/// Stores every key under `prefix` (which ends in `/`).
#[derive(Debug)]
pub struct Prefixed<S> {
    inner: S,
    prefix: String,
}

impl<S: ObjectStore> Prefixed<S> {
    /// `prefix` gets a trailing `/` if it lacks one; an empty prefix changes nothing.
    pub fn new(inner: S, prefix: &str) -> Prefixed<S> {
        let mut prefix = prefix.trim_matches('/').to_string();
        if !prefix.is_empty() {
            prefix.push('/');
        }
        Prefixed { inner, prefix }
    }

    fn full(&self, key: &str) -> Result<String> {
        crate::check_key(key)?;
        Ok(format!("{}{key}", self.prefix))
    }
}

#[async_trait]
impl<S: ObjectStore> ObjectStore for Prefixed<S> {
    fn describe(&self) -> String {
        format!(
            "{}/{}",
            self.inner.describe().trim_end_matches('/'),
            self.prefix
        )
    }

    async fn get(&self, key: &str, range: Option<Range<u64>>) -> Result<Bytes> {
        self.inner
            .get(&self.full(key)?, range)
            .await
            .map_err(|e| strip(e, &self.prefix))
    }

    async fn put(&self, key: &str, data: Bytes) -> Result<()> {
        self.inner.put(&self.full(key)?, data).await
    }

    async fn put_parts(&self, key: &str, parts: Vec<Bytes>) -> Result<()> {
        self.inner.put_parts(&self.full(key)?, parts).await
    }

    async fn upload<'a>(&'a self, key: &str) -> Result<Box<dyn Upload + 'a>> {
        self.inner.upload(&self.full(key)?).await
    }

    async fn delete(&self, key: &str) -> Result<()> {
        self.inner.delete(&self.full(key)?).await
    }

    async fn sync(&self) -> Result<u64> {
        self.inner.sync().await
    }

    async fn head(&self, key: &str) -> Result<ObjectInfo> {
        let mut info = self
            .inner
            .head(&self.full(key)?)
            .await
            .map_err(|e| strip(e, &self.prefix))?;
        info.key = key.to_string();
        Ok(info)
    }

    async fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ObjectInfo>> {
        let after = start_after.map(|a| format!("{}{a}", self.prefix));
        let full_prefix = format!("{}{prefix}", self.prefix);
        let mut page = self
            .inner
            .list(&full_prefix, after.as_deref(), limit)
            .await?;
        for info in &mut page {
            if let Some(rest) = info.key.strip_prefix(&self.prefix) {
                info.key = rest.to_string();
            }
        }
        Ok(page)
    }

    async fn scan_all(&self, prefix: &str, each: &mut crate::ObjectVisitor<'_>) -> Result<()> {
        let full_prefix = format!("{}{prefix}", self.prefix);
        let strip = self.prefix.clone();
        let mut stripped = |mut info: ObjectInfo| {
            if let Some(rest) = info.key.strip_prefix(&strip) {
                info.key = rest.to_string();
            }
            each(info)
        };
        self.inner.scan_all(&full_prefix, &mut stripped).await
    }
}

/// Report keys as the caller named them.
fn strip(e: crate::ObjectError, prefix: &str) -> crate::ObjectError {
    match e {
        crate::ObjectError::NotFound(k) => {
            crate::ObjectError::NotFound(k.strip_prefix(prefix).unwrap_or(&k).to_string())
        }
        other => other,
    }
}
