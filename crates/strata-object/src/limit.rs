//! Bounded concurrency (`--max-uploads`, `--max-downloads`) and bandwidth limits
//! (`--upload-limit`, `--download-limit`, in Mbps) on requests to a store.

use std::ops::Range;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use tokio::sync::Semaphore;

use crate::upload::Upload;
use crate::{ObjectError, ObjectInfo, ObjectStore, Result};

/// Limits on traffic to a store; 0 means unlimited for the bandwidth limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub max_uploads: usize,
    pub max_downloads: usize,
    /// Upload bandwidth in megabits per second (0 = unlimited).
    pub upload_mbps: u64,
    /// Download bandwidth in megabits per second (0 = unlimited).
    pub download_mbps: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_uploads: 20,
            max_downloads: 200,
            upload_mbps: 0,
            download_mbps: 0,
        }
    }
}

/// Spaces transfers so their bytes do not exceed a rate.
#[derive(Debug)]
pub struct Pacer {
    bytes_per_sec: f64,
    next_free: parking_lot::Mutex<Instant>,
}

impl Pacer {
    /// A pacer for `mbps` megabits per second; none for 0 (unlimited).
    pub fn new(mbps: u64) -> Option<Pacer> {
        (mbps > 0).then(|| Pacer {
            bytes_per_sec: mbps as f64 * 1_000_000.0 / 8.0,
            next_free: parking_lot::Mutex::new(Instant::now()),
        })
    }

    /// Reserve time for `bytes` and wait for the reservation to start.
    pub async fn pace(&self, bytes: usize) {
        let wait = {
            let mut next = self.next_free.lock();
            let now = Instant::now();
            let start = (*next).max(now);
            *next = start + Duration::from_secs_f64(bytes as f64 / self.bytes_per_sec);
            start.saturating_duration_since(now)
        };
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }
}

/// Applies [`Limits`] to every request.
#[derive(Debug)]
pub struct Limited<S> {
    inner: S,
    uploads: Semaphore,
    downloads: Semaphore,
    up: Option<Pacer>,
    down: Option<Pacer>,
}

impl<S: ObjectStore> Limited<S> {
    pub fn new(inner: S, limits: Limits) -> Limited<S> {
        Limited {
            inner,
            uploads: Semaphore::new(limits.max_uploads.max(1)),
            downloads: Semaphore::new(limits.max_downloads.max(1)),
            up: Pacer::new(limits.upload_mbps),
            down: Pacer::new(limits.download_mbps),
        }
    }
}

fn closed() -> ObjectError {
    ObjectError::Other("request limiter closed".into())
}

#[async_trait]
impl<S: ObjectStore> ObjectStore for Limited<S> {
    fn describe(&self) -> String {
        self.inner.describe()
    }

    async fn get(&self, key: &str, range: Option<Range<u64>>) -> Result<Bytes> {
        let _permit = self.downloads.acquire().await.map_err(|_| closed())?;
        let data = self.inner.get(key, range).await?;
        if let Some(p) = &self.down {
            p.pace(data.len()).await;
        }
        Ok(data)
    }

    async fn put(&self, key: &str, data: Bytes) -> Result<()> {
        let _permit = self.uploads.acquire().await.map_err(|_| closed())?;
        if let Some(p) = &self.up {
            p.pace(data.len()).await;
        }
        self.inner.put(key, data).await
    }

    async fn put_parts(&self, key: &str, parts: Vec<Bytes>) -> Result<()> {
        let _permit = self.uploads.acquire().await.map_err(|_| closed())?;
        if let Some(p) = &self.up {
            p.pace(parts.iter().map(Bytes::len).sum()).await;
        }
        self.inner.put_parts(key, parts).await
    }

    /// Paced like puts, piece by piece; not counted against `max_uploads` (a long upload
    /// would hold a slot for its whole length).
    async fn upload<'a>(&'a self, key: &str) -> Result<Box<dyn Upload + 'a>> {
        Ok(Box::new(LimitedUpload {
            inner: self.inner.upload(key).await?,
            pacer: self.up.as_ref(),
        }))
    }

    async fn delete(&self, key: &str) -> Result<()> {
        let _permit = self.uploads.acquire().await.map_err(|_| closed())?;
        self.inner.delete(key).await
    }

    async fn sync(&self) -> Result<u64> {
        self.inner.sync().await
    }

    async fn head(&self, key: &str) -> Result<ObjectInfo> {
        let _permit = self.downloads.acquire().await.map_err(|_| closed())?;
        self.inner.head(key).await
    }

    async fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ObjectInfo>> {
        let _permit = self.downloads.acquire().await.map_err(|_| closed())?;
        self.inner.list(prefix, start_after, limit).await
    }
}

/// An upload whose pieces are paced by the upload limit.
struct LimitedUpload<'a> {
    inner: Box<dyn Upload + 'a>,
    pacer: Option<&'a Pacer>,
}

#[async_trait]
impl Upload for LimitedUpload<'_> {
    async fn write(&mut self, data: Bytes) -> Result<()> {
        if let Some(p) = self.pacer {
            p.pace(data.len()).await;
        }
        self.inner.write(data).await
    }

    async fn finish(self: Box<Self>) -> Result<()> {
        self.inner.finish().await
    }

    async fn abort(self: Box<Self>) -> Result<()> {
        self.inner.abort().await
    }
}
