//! Assemble a store from options, wrappers in the order that makes each one right:
//! foreign blocks of an imported volume outermost (read raw, past everything below),
//! then compression (compress once; retries resend the same bytes; compressed before
//! sealed), then retries around the integrity check (sealing, on an encrypted volume) (a corrupt read is fetched again), metering of what goes
//! over the wire, limits per attempt, and the volume prefix next to the backend.

use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;

use crate::adopted::{Adopted, ForeignBlocks};
use crate::checksum::Checksummed;
use crate::compress::{Codec, Compressed};
use crate::limit::{Limited, Limits};
use crate::metered::{Metered, ObjectStats};
use crate::prefix::Prefixed;
use crate::retry::{RetryPolicy, Retrying};
use crate::seal::Keys;
use crate::sealed::{Sealed, Unit};
use crate::upload::Upload;
use crate::{ObjectInfo, ObjectStore, Result};

/// Everything that shapes a volume's store above its backend.
#[derive(Clone, Debug, Default)]
pub struct StackOptions {
    /// Key prefix (the volume name, usually).
    pub prefix: String,
    pub compression: Option<Codec>,
    pub limits: Limits,
    pub retry: RetryPolicy,
    /// The data keys of an encrypted volume: objects are sealed (object v3) instead of
    /// checksummed (object v2).
    pub keys: Option<Arc<Keys>>,
    /// With `keys`: the payload bytes per sealed segment (the volume's encryption record).
    pub seal_unit: Unit,
    /// Blocks adopted from another file system by an import, read raw.
    pub foreign: Option<ForeignBlocks>,
}

/// Wrap `backend` according to `opts`; returns the store and its live counters.
pub fn build(
    backend: Arc<dyn ObjectStore>,
    opts: &StackOptions,
) -> (Arc<dyn ObjectStore>, Arc<ObjectStats>) {
    let stats = Arc::new(ObjectStats::default());
    let prefixed = Prefixed::new(backend, &opts.prefix);
    let limited = Limited::new(prefixed, opts.limits);
    let metered: Arc<dyn ObjectStore> = Arc::new(Metered::new(limited, stats.clone()));
    let raw = metered.clone();
    let checked: Arc<dyn ObjectStore> = match &opts.keys {
        Some(keys) => Arc::new(Sealed::new(
            metered,
            keys.clone(),
            opts.seal_unit,
            stats.clone(),
        )),
        None => Arc::new(Checksummed::new(metered, stats.clone())),
    };
    let retried = Retrying::new(checked, opts.retry);
    let store: Arc<dyn ObjectStore> = match opts.compression {
        Some(codec) => Arc::new(Compressed::new(retried, codec)),
        None => Arc::new(retried),
    };
    let store: Arc<dyn ObjectStore> = match &opts.foreign {
        Some(foreign) => Arc::new(Adopted::new(
            store,
            Retrying::new(raw, opts.retry),
            foreign.clone(),
        )),
        None => store,
    };
    (store, stats)
}

#[async_trait]
impl<S: ObjectStore + ?Sized> ObjectStore for Arc<S> {
    fn describe(&self) -> String {
        (**self).describe()
    }

    fn cheap_ranges(&self) -> bool {
        (**self).cheap_ranges()
    }

    fn cheap_ranges_of(&self, key: &str) -> bool {
        (**self).cheap_ranges_of(key)
    }

    fn range_unit(&self) -> usize {
        (**self).range_unit()
    }

    async fn get(&self, key: &str, range: Option<Range<u64>>) -> Result<Bytes> {
        (**self).get(key, range).await
    }

    async fn put(&self, key: &str, data: Bytes) -> Result<()> {
        (**self).put(key, data).await
    }

    async fn put_parts(&self, key: &str, parts: Vec<Bytes>) -> Result<()> {
        (**self).put_parts(key, parts).await
    }

    async fn upload<'a>(&'a self, key: &str) -> Result<Box<dyn Upload + 'a>> {
        (**self).upload(key).await
    }

    async fn delete(&self, key: &str) -> Result<()> {
        (**self).delete(key).await
    }

    async fn sync(&self) -> Result<u64> {
        (**self).sync().await
    }

    async fn head(&self, key: &str) -> Result<ObjectInfo> {
        (**self).head(key).await
    }

    async fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ObjectInfo>> {
        (**self).list(prefix, start_after, limit).await
    }

    async fn scan_all(&self, prefix: &str, each: &mut crate::ObjectVisitor<'_>) -> Result<()> {
        (**self).scan_all(prefix, each).await
    }

    async fn check(&self) -> Result<()> {
        (**self).check().await
    }
}
