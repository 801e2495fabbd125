//! Counters of object store traffic: requests by kind and result, bytes up and down, and
//! corrupt objects detected. Shared (`Arc<ObjectStats>`) so a mount can expose them.

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use async_trait::async_trait;
use bytes::Bytes;

use strata_types::metrics::{Exposition, Histogram, Kind};

use crate::upload::Upload;
use crate::{ObjectError, ObjectInfo, ObjectStore, Result};

/// Kinds of request.
pub const OPS: [&str; 6] = ["get", "put", "delete", "head", "list", "sync"];
/// Results a request can end with.
pub const RESULTS: [&str; 4] = ["ok", "not_found", "error", "corrupt"];

/// Live counters of one store.
#[derive(Debug, Default)]
pub struct ObjectStats {
    requests: [[AtomicU64; 4]; 6],
    /// Latency of each kind of request, whatever its result.
    latency: [Histogram; 6],
    bytes_up: AtomicU64,
    objects_synced: AtomicU64,
    bytes_down: AtomicU64,
}

impl ObjectStats {
    /// Requests of kind `op` (see [`OPS`]) that ended with `result` (see [`RESULTS`]).
    pub fn requests(&self, op: &str, result: &str) -> u64 {
        match (
            OPS.iter().position(|o| *o == op),
            RESULTS.iter().position(|r| *r == result),
        ) {
            (Some(o), Some(r)) => self.requests[o][r].load(Ordering::Relaxed),
            _ => 0,
        }
    }

    pub fn bytes_up(&self) -> u64 {
        self.bytes_up.load(Ordering::Relaxed)
    }

    pub fn bytes_down(&self) -> u64 {
        self.bytes_down.load(Ordering::Relaxed)
    }

    /// Objects made durable by syncs (local buckets write first and sync later).
    pub fn objects_synced(&self) -> u64 {
        self.objects_synced.load(Ordering::Relaxed)
    }

    /// Corrupt objects detected on read.
    pub fn corrupt(&self) -> u64 {
        self.requests("get", "corrupt")
    }

    pub(crate) fn record_corrupt(&self) {
        self.requests[0][3].fetch_add(1, Ordering::Relaxed);
    }

    /// Latency of requests of kind `op` (see [`OPS`]).
    pub fn latency(&self, op: &str) -> Option<&Histogram> {
        OPS.iter().position(|o| *o == op).map(|o| &self.latency[o])
    }

    fn record<T>(&self, op: usize, started: Instant, outcome: &Result<T>) {
        self.latency[op].observe(started.elapsed());
        let result = match outcome {
            Ok(_) => 0,
            Err(ObjectError::NotFound(_)) => 1,
            Err(_) => 2,
        };
        self.requests[op][result].fetch_add(1, Ordering::Relaxed);
    }

    /// All non-zero request counters as `(op, result, count)`, for reports.
    pub fn snapshot(&self) -> Vec<(&'static str, &'static str, u64)> {
        let mut out = Vec::new();
        for (o, op) in OPS.iter().enumerate() {
            for (r, result) in RESULTS.iter().enumerate() {
                let n = self.requests[o][r].load(Ordering::Relaxed);
                if n > 0 {
                    out.push((*op, *result, n));
                }
            }
        }
        out
    }

    /// These counters in the Prometheus text format (docs/METRICS.md).
    pub fn render(&self, e: &mut Exposition) {
        e.family(
            "strata_object_requests",
            Kind::Counter,
            "Object store requests by kind (op) and result.",
        );
        for (o, op) in OPS.iter().enumerate() {
            for (r, result) in RESULTS.iter().enumerate() {
                let n = self.requests[o][r].load(Ordering::Relaxed);
                e.sample(
                    "strata_object_requests",
                    &[("op", op), ("result", result)],
                    n,
                );
            }
        }
        e.family(
            "strata_object_request_duration_seconds",
            Kind::Histogram,
            "Latency of object store requests by kind (op), whatever their result.",
        );
        for (o, op) in OPS.iter().enumerate() {
            e.histogram(
                "strata_object_request_duration_seconds",
                &[("op", op)],
                &self.latency[o],
            );
        }
        for (name, help, value) in [
            (
                "strata_object_bytes_up",
                "Bytes uploaded to the object store.",
                self.bytes_up(),
            ),
            (
                "strata_object_bytes_down",
                "Bytes downloaded from the object store.",
                self.bytes_down(),
            ),
            (
                "strata_objects_synced",
                "Objects made durable by syncs of a local bucket.",
                self.objects_synced(),
            ),
        ] {
            e.single(name, Kind::Counter, help, value);
        }
    }
}

/// Length of a buffer as a byte count.
fn len64(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// Counts every request passing through.
#[derive(Debug)]
pub struct Metered<S> {
    inner: S,
    stats: Arc<ObjectStats>,
}

impl<S: ObjectStore> Metered<S> {
    pub fn new(inner: S, stats: Arc<ObjectStats>) -> Metered<S> {
        Metered { inner, stats }
    }
}

#[async_trait]
impl<S: ObjectStore> ObjectStore for Metered<S> {
    fn describe(&self) -> String {
        self.inner.describe()
    }

    async fn get(&self, key: &str, range: Option<Range<u64>>) -> Result<Bytes> {
        let started = Instant::now();
        let r = self.inner.get(key, range).await;
        self.stats.record(0, started, &r);
        if let Ok(data) = &r {
            self.stats
                .bytes_down
                .fetch_add(len64(data.len()), Ordering::Relaxed);
        }
        r
    }

    async fn put(&self, key: &str, data: Bytes) -> Result<()> {
        let len = len64(data.len());
        let started = Instant::now();
        let r = self.inner.put(key, data).await;
        self.stats.record(1, started, &r);
        if r.is_ok() {
            self.stats.bytes_up.fetch_add(len, Ordering::Relaxed);
        }
        r
    }

    async fn put_parts(&self, key: &str, parts: Vec<Bytes>) -> Result<()> {
        let len = parts.iter().map(|p| len64(p.len())).sum();
        let started = Instant::now();
        let r = self.inner.put_parts(key, parts).await;
        self.stats.record(1, started, &r);
        if r.is_ok() {
            self.stats.bytes_up.fetch_add(len, Ordering::Relaxed);
        }
        r
    }

    /// Counted as one put, of all its bytes, when it finishes.
    async fn upload<'a>(&'a self, key: &str) -> Result<Box<dyn Upload + 'a>> {
        Ok(Box::new(MeteredUpload {
            inner: self.inner.upload(key).await?,
            stats: &self.stats,
            started: Instant::now(),
            bytes: 0,
        }))
    }

    async fn delete(&self, key: &str) -> Result<()> {
        let started = Instant::now();
        let r = self.inner.delete(key).await;
        self.stats.record(2, started, &r);
        r
    }

    async fn sync(&self) -> Result<u64> {
        let started = Instant::now();
        let r = self.inner.sync().await;
        self.stats.record(5, started, &r);
        if let Ok(n) = &r {
            self.stats.objects_synced.fetch_add(*n, Ordering::Relaxed);
        }
        r
    }

    async fn head(&self, key: &str) -> Result<ObjectInfo> {
        let started = Instant::now();
        let r = self.inner.head(key).await;
        self.stats.record(3, started, &r);
        r
    }

    async fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ObjectInfo>> {
        let started = Instant::now();
        let r = self.inner.list(prefix, start_after, limit).await;
        self.stats.record(4, started, &r);
        r
    }
}

/// An upload counted as one put when it finishes.
struct MeteredUpload<'a> {
    inner: Box<dyn Upload + 'a>,
    stats: &'a ObjectStats,
    started: Instant,
    bytes: u64,
}

#[async_trait]
impl Upload for MeteredUpload<'_> {
    async fn write(&mut self, data: Bytes) -> Result<()> {
        self.bytes += len64(data.len());
        self.inner.write(data).await
    }

    async fn finish(self: Box<Self>) -> Result<()> {
        let r = self.inner.finish().await;
        self.stats.record(1, self.started, &r);
        if r.is_ok() {
            self.stats.bytes_up.fetch_add(self.bytes, Ordering::Relaxed);
        }
        r
    }

    async fn abort(self: Box<Self>) -> Result<()> {
        self.inner.abort().await
    }
}
