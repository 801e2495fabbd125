//! Strata's object stores. One [`ObjectStore`] trait; backends built on the `object_store`
//! crate ([`backend`]: local directory, S3-compatible, memory); and wrappers, each its own
//! small type implementing the same trait: [`prefix`] (per-volume key prefix),
//! [`compress`] (none/lz4/zstd), [`checksum`] (per-object integrity), [`sealed`] (the same
//! framing encrypted, with the keys of [`seal`]), [`limit`]
//! (concurrency and bandwidth), [`retry`] (timeouts and retries), [`metered`] (request and
//! byte counters) and [`fault`] (fault injection for tests). [`stack`] assembles them in
//! the right order from options.

// The data path converts sizes and offsets with checked conversions, never `as`.
#![warn(clippy::cast_possible_truncation)]

pub mod adopted;
pub mod backend;
pub mod checksum;
pub mod compress;
#[cfg(feature = "conformance")]
pub mod conformance;
#[cfg(feature = "fault-injection")]
pub mod fault;
pub mod limit;
mod local;
pub mod metered;
pub mod prefix;
pub mod retry;
pub mod routed;
pub mod seal;
pub mod sealed;
pub mod stack;
pub mod upload;
pub mod writeback;

use std::fmt;
use std::ops::Range;

use async_trait::async_trait;
use bytes::Bytes;

/// Errors of object store operations.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ObjectError {
    #[error("object {0} not found")]
    NotFound(String),
    /// The store refused our credentials.
    #[error("authentication failed: {0}")]
    Auth(String),
    /// The bucket (or local directory) does not exist.
    #[error("bucket not found: {0}")]
    NoBucket(String),
    /// The object's bytes fail their integrity check (corrupt or truncated).
    #[error("object {key} is corrupt: {reason}")]
    Corrupt { key: String, reason: String },
    /// An encrypted volume's object names a data key this client cannot get (a wrong or
    /// missing key source, or settings that lost a key).
    #[error("missing data key: {0}")]
    NoKey(String),
    #[error("object store request timed out after {0:?}")]
    Timeout(std::time::Duration),
    #[error("invalid object key {0:?}")]
    InvalidKey(String),
    /// The store has no room for the object (a full local disk or staging area, a full
    /// server): ENOSPC to the writer.
    #[error("no space left: {0}")]
    NoSpace(String),
    /// A quota of the store refused the object (a disk quota on a local bucket): EDQUOT.
    #[error("quota exceeded: {0}")]
    Quota(String),
    /// The store cannot be written (a local bucket on a read-only file system): EROFS.
    #[error("store is read-only: {0}")]
    ReadOnly(String),
    /// Injected by the fault-injection wrapper (tests and benchmarks only).
    #[cfg(feature = "fault-injection")]
    #[error("injected fault: {0}")]
    Injected(String),
    /// Anything else (network, server error, local I/O).
    #[error("object store error: {0}")]
    Other(String),
}

impl ObjectError {
    /// Worth trying again: timeouts, transient server or network errors, corrupt reads (a
    /// fresh read may be intact), injected faults.
    pub fn is_transient(&self) -> bool {
        match self {
            ObjectError::Timeout(_) | ObjectError::Other(_) | ObjectError::Corrupt { .. } => true,
            #[cfg(feature = "fault-injection")]
            ObjectError::Injected(_) => true,
            _ => false,
        }
    }
}

impl ObjectError {
    /// A local I/O error while doing `what` (a path, an action): running out of space,
    /// over quota and a read-only file system keep their kind, anything else is
    /// [`ObjectError::Other`].
    pub fn from_io(what: impl std::fmt::Display, e: &std::io::Error) -> ObjectError {
        let text = format!("{what}: {e}");
        match e.kind() {
            std::io::ErrorKind::StorageFull => ObjectError::NoSpace(text),
            std::io::ErrorKind::QuotaExceeded => ObjectError::Quota(text),
            std::io::ErrorKind::ReadOnlyFilesystem => ObjectError::ReadOnly(text),
            _ => ObjectError::Other(text),
        }
    }
}

pub type Result<T, E = ObjectError> = std::result::Result<T, E>;

/// What a listing or head reports about an object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectInfo {
    pub key: String,
    pub size: u64,
    /// Last modification, Unix seconds.
    pub modified: i64,
}

/// An object store: flat keys (`a/b/c`, no empty, `.` or `..` segments) to immutable bytes.
#[async_trait]
pub trait ObjectStore: Send + Sync + fmt::Debug {
    /// Where this store is, for messages (`file:///data`, `s3://bucket`, ...).
    fn describe(&self) -> String;

    /// Whether a ranged [`get`](Self::get) fetches only (about) the bytes asked for. A store
    /// that must fetch whole objects to answer one (compression) says no, and readers then
    /// take whole blocks rather than asking for each piece of one.
    fn cheap_ranges(&self) -> bool {
        true
    }

    /// [`cheap_ranges`](Self::cheap_ranges) for the object `key`: a store whose objects
    /// are not all stored alike (an imported volume's foreign blocks) answers per object.
    fn cheap_ranges_of(&self, key: &str) -> bool {
        let _ = key;
        self.cheap_ranges()
    }

    /// The payload bytes a ranged [`get`](Self::get) fetches and verifies as one piece
    /// (it asks for whole pieces): [`checksum::SEGMENT`] unless a store verifies smaller
    /// ones, so a reader that keeps only what it asked for can ask for less than a segment.
    fn range_unit(&self) -> usize {
        checksum::SEGMENT
    }

    /// The object's bytes, or bytes `range` of it (clipped at its end).
    async fn get(&self, key: &str, range: Option<Range<u64>>) -> Result<Bytes>;

    /// Store `data` under `key`, replacing any previous object. Every client can read it
    /// when this returns; it survives a crash of the machine once [`sync`](Self::sync)
    /// has returned after it (S3 stores: already when this returns).
    async fn put(&self, key: &str, data: Bytes) -> Result<()>;

    /// [`put`](Self::put) of the concatenation of `parts`: lets a wrapper add framing
    /// without copying the data. Stores that can send parts as they are override it.
    async fn put_parts(&self, key: &str, parts: Vec<Bytes>) -> Result<()> {
        self.put(key, concat(parts)).await
    }

    /// Write `key` piece by piece ([`upload::Upload`]), for objects too big to hold in
    /// memory. The default collects the pieces and puts them at the end; backends that can
    /// send them as they come (multipart uploads) and wrappers that pass pieces through
    /// override it.
    async fn upload<'a>(&'a self, key: &str) -> Result<Box<dyn upload::Upload + 'a>> {
        check_key(key)?;
        Ok(Box::new(upload::BufferedUpload::new(self, key)))
    }

    /// Make every object put so far survive a crash of the machine; returns how many
    /// objects had to be made durable (0 for stores whose puts are durable at once).
    /// Required of every store and wrapper: a wrapper that forgot it would quietly lose
    /// durability.
    async fn sync(&self) -> Result<u64>;

    /// Delete `key`; deleting a missing object succeeds.
    async fn delete(&self, key: &str) -> Result<()>;

    /// Size and time of `key`.
    async fn head(&self, key: &str) -> Result<ObjectInfo>;

    /// Up to `limit` objects whose keys start with `prefix` (empty, or ending in `/`) and
    /// sort after `start_after`, in ascending key order. Call again with the last key for
    /// the next page.
    async fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ObjectInfo>>;

    /// Verify the store answers, the bucket exists and the credentials are accepted.
    /// Backends make this cheap whatever the number of objects.
    async fn check(&self) -> Result<()> {
        self.list("", None, 1).await.map(drop)
    }

    /// Every object whose key starts with `prefix`, handed to `each` as the listing
    /// streams, in no particular order: one pass whose memory does not grow with the
    /// number of objects (gc and fsck of huge buckets). The default pages through
    /// [`list`](Self::list); backends that can stream override it.
    async fn scan_all(&self, prefix: &str, each: &mut ObjectVisitor<'_>) -> Result<()> {
        let mut after: Option<String> = None;
        loop {
            let page = self.list(prefix, after.as_deref(), 1000).await?;
            let Some(last) = page.last() else {
                return Ok(());
            };
            after = Some(last.key.clone());
            for info in page {
                each(info)?;
            }
        }
    }
}

/// What [`ObjectStore::scan_all`] calls for each object; an error stops the scan.
pub type ObjectVisitor<'a> = dyn FnMut(ObjectInfo) -> Result<()> + Send + 'a;

/// The concatenation of `parts` (no copy for a single part).
pub fn concat(mut parts: Vec<Bytes>) -> Bytes {
    if parts.len() == 1 {
        return parts.pop().unwrap_or_default();
    }
    let mut all = bytes::BytesMut::with_capacity(parts.iter().map(Bytes::len).sum());
    for p in parts {
        all.extend_from_slice(&p);
    }
    all.freeze()
}

/// InvalidKey unless `key` is a valid object key: non-empty `/`-separated segments, none of
/// them empty, `.` or `..`.
pub fn check_key(key: &str) -> Result<()> {
    let bad = key.is_empty()
        || key
            .split('/')
            .any(|seg| seg.is_empty() || seg == "." || seg == "..");
    if bad {
        Err(ObjectError::InvalidKey(key.into()))
    } else {
        Ok(())
    }
}

/// What a block object's name (`chunks/…/{id}_{index}_{length}`, docs/FORMAT.md) says:
/// (slice id, block index, block length). The directories before the last `/` are not
/// checked here.
pub fn parse_block_name(key: &str) -> Option<(u64, u32, u32)> {
    let name = key.strip_prefix("chunks/")?.rsplit('/').next()?;
    let mut parts = name.split('_');
    let id = parts.next()?.parse().ok()?;
    let index = parts.next()?.parse().ok()?;
    let len = parts.next()?.parse().ok()?;
    parts.next().is_none().then_some((id, index, len))
}

/// The error of an object at `key` whose bytes are not what they must be.
pub(crate) fn corrupt(key: &str, reason: impl Into<String>) -> ObjectError {
    ObjectError::Corrupt {
        key: key.into(),
        reason: reason.into(),
    }
}

/// Clip `range` to an object of `len` bytes and return that part of `data`.
pub fn slice_range(data: Bytes, range: Option<Range<u64>>) -> Bytes {
    match range {
        None => data,
        Some(r) => {
            // Both ends are clipped to the data's length, so they fit a usize.
            let len = u64::try_from(data.len()).unwrap_or(u64::MAX);
            let at = |n: u64| usize::try_from(n.min(len)).unwrap_or(data.len());
            let start = at(r.start);
            let end = at(r.end).max(start);
            data.slice(start..end)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_checked() {
        for good in ["a", "chunks/0/0/1_0_4", "x.y/z"] {
            assert!(check_key(good).is_ok(), "{good}");
        }
        for bad in ["", "/a", "a/", "a//b", "../a", "a/./b", "a/.."] {
            assert!(check_key(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn ranges_are_clipped() {
        let d = Bytes::from_static(b"0123456789");
        assert_eq!(
            slice_range(d.clone(), Some(2..5)),
            Bytes::from_static(b"234")
        );
        assert_eq!(
            slice_range(d.clone(), Some(8..50)),
            Bytes::from_static(b"89")
        );
        assert_eq!(slice_range(d.clone(), Some(20..30)), Bytes::new());
        assert_eq!(slice_range(d.clone(), None), d);
    }
}
