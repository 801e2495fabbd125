//! The objects of an imported volume's foreign blocks, as every layer above the backend
//! sees them (docs/FORMAT.md, "Foreign blocks"). This wrapper sits right above the
//! backend (keys carry the volume prefix), so reads, `gc`, `fsck` and `destroy` all go
//! through it:
//!
//! - JuiceFS's `--hash-prefix` names: such a volume stores block `{id}_{index}_{length}`
//!   as `chunks/{id % 256 as two upper-case hex digits}/{id / 1000000}/...` instead of
//!   `chunks/{id / 1000000}/{id / 1000}/...`; requests for a foreign block go to its
//!   hashed name, and listings show hashed names as Strata's. Native blocks (ids at or
//!   past the import) keep Strata's names. Only listings of the whole `chunks/` prefix
//!   (or a wider one) find the renamed blocks.
//! - A foreign block's recorded checksums (`{block}.sums`, `sums`) are deleted with it,
//!   whoever deletes it.

use std::ops::Range;

use async_trait::async_trait;
use bytes::Bytes;

use super::sums::sums_key;
use crate::upload::Upload;
use crate::{ObjectError, ObjectInfo, ObjectStore, ObjectVisitor, Result};

/// A backend holding an imported volume's foreign blocks (slices below `below`), under
/// JuiceFS's hashed names when `hashed`.
#[derive(Debug)]
pub struct ForeignNames<S> {
    inner: S,
    /// `{volume}/chunks/`.
    chunks: String,
    below: u64,
    hashed: bool,
}

impl<S: ObjectStore> ForeignNames<S> {
    /// Blocks of slices below `below` in volume `prefix` are foreign (stored under hashed
    /// names when `hashed`).
    pub fn new(inner: S, prefix: &str, below: u64, hashed: bool) -> ForeignNames<S> {
        let prefix = prefix.trim_matches('/');
        let chunks = match prefix.is_empty() {
            true => "chunks/".to_string(),
            false => format!("{prefix}/chunks/"),
        };
        ForeignNames {
            inner,
            chunks,
            below,
            hashed,
        }
    }

    /// (id, block file name) of a foreign block named the Strata way or the hashed way:
    /// `dirs` are the two directories, checked against the id by `layout`.
    fn foreign<'k>(
        &self,
        key: &'k str,
        layout: fn(u64) -> (String, String),
    ) -> Option<(u64, &'k str)> {
        let rest = key.strip_prefix(&self.chunks)?;
        let mut parts = rest.splitn(3, '/');
        let (first, second, name) = (parts.next()?, parts.next()?, parts.next()?);
        let (id, _, _) = crate::parse_block_name(&format!("chunks/{name}"))?;
        let ok = id != 0 && id < self.below && layout(id) == (first.into(), second.into());
        ok.then_some((id, name))
    }

    /// Where `key` is stored.
    fn stored(&self, key: &str) -> String {
        if !self.hashed {
            return key.to_string();
        }
        match self.foreign(key, strata_dirs) {
            Some((id, name)) => {
                let (a, b) = hashed_dirs(id);
                format!("{}{a}/{b}/{name}", self.chunks)
            }
            None => key.to_string(),
        }
    }

    /// What the object stored as `stored` is called above.
    fn shown(&self, stored: &str) -> String {
        if !self.hashed {
            return stored.to_string();
        }
        match self.foreign(stored, hashed_dirs) {
            Some((id, name)) => {
                let (a, b) = strata_dirs(id);
                format!("{}{a}/{b}/{name}", self.chunks)
            }
            None => stored.to_string(),
        }
    }
}

/// Strata's (and JuiceFS's default) directories of a block of slice `id`.
fn strata_dirs(id: u64) -> (String, String) {
    ((id / 1_000_000).to_string(), (id / 1000).to_string())
}

/// JuiceFS's `--hash-prefix` directories of a block of slice `id`.
fn hashed_dirs(id: u64) -> (String, String) {
    (format!("{:02X}", id % 256), (id / 1_000_000).to_string())
}

#[async_trait]
impl<S: ObjectStore> ObjectStore for ForeignNames<S> {
    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn cheap_ranges(&self) -> bool {
        self.inner.cheap_ranges()
    }

    async fn get(&self, key: &str, range: Option<Range<u64>>) -> Result<Bytes> {
        self.inner.get(&self.stored(key), range).await
    }

    async fn put(&self, key: &str, data: Bytes) -> Result<()> {
        self.inner.put(&self.stored(key), data).await
    }

    async fn put_parts(&self, key: &str, parts: Vec<Bytes>) -> Result<()> {
        self.inner.put_parts(&self.stored(key), parts).await
    }

    async fn upload<'a>(&'a self, key: &str) -> Result<Box<dyn Upload + 'a>> {
        self.inner.upload(&self.stored(key)).await
    }

    async fn delete(&self, key: &str) -> Result<()> {
        self.inner.delete(&self.stored(key)).await?;
        if self.foreign(key, strata_dirs).is_none() {
            return Ok(());
        }
        match self.inner.delete(&sums_key(key)).await {
            Err(ObjectError::NotFound(_)) => Ok(()),
            other => other,
        }
    }

    async fn sync(&self) -> Result<u64> {
        self.inner.sync().await
    }

    async fn head(&self, key: &str) -> Result<ObjectInfo> {
        let mut info = self.inner.head(&self.stored(key)).await?;
        info.key = self.shown(&info.key);
        Ok(info)
    }

    /// A page in stored-name order, names shown Strata's way (`start_after` is taken
    /// back to its stored name, so paging by the last key shown works).
    async fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ObjectInfo>> {
        let after = start_after.map(|k| self.stored(k));
        let mut page = self.inner.list(prefix, after.as_deref(), limit).await?;
        for info in &mut page {
            info.key = self.shown(&info.key);
        }
        Ok(page)
    }

    async fn scan_all(&self, prefix: &str, each: &mut ObjectVisitor<'_>) -> Result<()> {
        let mut renamed = |mut info: ObjectInfo| {
            info.key = self.shown(&info.key);
            each(info)
        };
        self.inner.scan_all(prefix, &mut renamed).await
    }

    async fn check(&self) -> Result<()> {
        self.inner.check().await
    }
}
