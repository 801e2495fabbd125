//! One client's metrics in the Prometheus text format: what `.stats` shows and what the
//! `/metrics` endpoint of a mount, gateway, WebDAV server or cache node serves. Every name
//! is listed in docs/METRICS.md. The counters live where they are counted (file handles,
//! buffers, caches, the object store wrapper, the cache group, the transaction loop); this
//! module only renders them, plus the latency of each front end's operations
//! ([`FrontMetrics`], recorded by the front ends) and the process's CPU and memory.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use strata_chunk::CacheStats;
use strata_types::metrics::{Exposition, HistogramFamily, Kind};

use crate::Vfs;

/// Latency of the operations each front end serves, by operation.
#[derive(Debug, Default)]
pub struct FrontMetrics {
    /// FUSE requests, by operation (`lookup`, `read`, ...).
    pub fuse: HistogramFamily,
    /// S3 gateway requests, by S3 operation (`GetObject`, ...).
    pub s3: HistogramFamily,
    /// WebDAV requests, by HTTP method.
    pub webdav: HistogramFamily,
    fuse_read_bytes: AtomicU64,
    fuse_written_bytes: AtomicU64,
}

impl FrontMetrics {
    /// Count bytes a FUSE read returned.
    pub fn count_fuse_read(&self, bytes: usize) {
        let n = u64::try_from(bytes).unwrap_or(u64::MAX);
        self.fuse_read_bytes.fetch_add(n, Ordering::Relaxed);
    }

    /// Count bytes a FUSE write took.
    pub fn count_fuse_write(&self, bytes: usize) {
        let n = u64::try_from(bytes).unwrap_or(u64::MAX);
        self.fuse_written_bytes.fetch_add(n, Ordering::Relaxed);
    }

    fn render(&self, e: &mut Exposition) {
        e.single(
            "strata_fuse_read_bytes",
            Kind::Counter,
            "Bytes returned by FUSE reads (internal files excluded).",
            self.fuse_read_bytes.load(Ordering::Relaxed),
        );
        e.single(
            "strata_fuse_written_bytes",
            Kind::Counter,
            "Bytes taken by FUSE writes.",
            self.fuse_written_bytes.load(Ordering::Relaxed),
        );
        e.histogram_family(
            "strata_fuse_op_duration_seconds",
            "Latency of FUSE requests by operation; its _count is the number of requests.",
            "op",
            &self.fuse,
        );
        e.histogram_family(
            "strata_s3_request_duration_seconds",
            "Latency of S3 gateway requests by S3 operation.",
            "op",
            &self.s3,
        );
        e.histogram_family(
            "strata_webdav_request_duration_seconds",
            "Latency of WebDAV requests by HTTP method.",
            "method",
            &self.webdav,
        );
    }
}

impl Vfs {
    /// Where front ends record the latency of the operations they serve.
    pub fn front_metrics(&self) -> &FrontMetrics {
        &self.front_metrics
    }

    /// Stage writes through `wb` (`--writeback`): its counters join the metrics and
    /// `.control`'s flush waits for it.
    pub fn set_writeback(&self, wb: Arc<strata_object::writeback::Writeback>) {
        *self.writeback.lock() = Some(wb);
    }

    /// The staging area, with `--writeback`.
    pub fn writeback(&self) -> Option<Arc<strata_object::writeback::Writeback>> {
        self.writeback.lock().clone()
    }

    /// Every metric of this client and its process, in the Prometheus text format.
    pub fn metrics_text(&self) -> String {
        let mut e = Exposition::new();
        self.render_client(&mut e);
        self.render_cache(&mut e);
        self.front_metrics.render(&mut e);
        if let Some(stats) = self.object_stats() {
            stats.render(&mut e);
        }
        strata_meta::render_txn_metrics(&mut e);
        if let Some(wb) = self.writeback() {
            wb.render_metrics(&mut e);
        }
        if let Some(group) = self.chunks.group() {
            group.render_metrics(&mut e);
        }
        if let Some((_, stores)) = self.placements.get() {
            stores.render_metrics(&mut e);
        }
        render_process(&mut e);
        e.finish()
    }

    fn render_client(&self, e: &mut Exposition) {
        let handles = u64::try_from(self.handles.lock().len()).unwrap_or(u64::MAX);
        let budget = self.chunks.budget();
        for (name, help, value) in [
            ("strata_open_handles", "Open file handles.", handles),
            (
                "strata_buffer_bytes_in_use",
                "Bytes of the read/write buffer in use (--buffer-size).",
                budget.in_use(),
            ),
            (
                "strata_buffer_bytes_capacity",
                "Size of the read/write buffer (--buffer-size).",
                budget.capacity(),
            ),
        ] {
            e.single(name, Kind::Gauge, help, value);
        }
        let failures = self.sync_failures.load(Ordering::Relaxed);
        e.single(
            "strata_sync_failures",
            Kind::Counter,
            "Commits of buffered writes that failed (kept and retried).",
            failures,
        );
    }

    fn render_cache(&self, e: &mut Exposition) {
        let cache = self.chunks.cache();
        e.single(
            "strata_cache_bytes",
            Kind::Gauge,
            "Bytes of blocks in the local block cache (memory or disk).",
            cache.used_bytes(),
        );
        let cs = cache.stats();
        let chunk = self.chunks.stats();
        let counters: [(&str, &str, &AtomicU64); 8] = [
            (
                "strata_cache_hits",
                "Block cache lookups that hit.",
                &cs.hits,
            ),
            (
                "strata_cache_misses",
                "Block cache lookups that missed.",
                &cs.misses,
            ),
            (
                "strata_cache_evictions",
                "Blocks evicted from the block cache.",
                &cs.evictions,
            ),
            (
                "strata_cache_corrupt",
                "Cached blocks found damaged (dropped, read again from the object store).",
                &cs.corrupt,
            ),
            (
                "strata_blocks_uploaded",
                "Blocks uploaded by this client's writers.",
                &chunk.blocks_uploaded,
            ),
            (
                "strata_fetches_joined",
                "Block reads that joined a fetch already in flight instead of starting one.",
                &chunk.joined_fetches,
            ),
            (
                "strata_prefetches",
                "Readahead and prefetch fetches started.",
                &chunk.prefetches,
            ),
            (
                "strata_prefetches_dropped",
                "Prefetches dropped because the queue was full.",
                &chunk.prefetches_dropped,
            ),
        ];
        for (name, help, counter) in counters {
            e.single(name, Kind::Counter, help, CacheStats::get(counter));
        }
    }
}

/// Clock ticks per second in `/proc/<pid>/stat` (`USER_HZ`, fixed at 100 by the Linux ABI
/// on every architecture Strata builds for).
const USER_HZ: f64 = 100.0;

/// The process's CPU time, resident memory and threads, from `/proc/self`, named as the
/// Prometheus client libraries name them.
pub fn render_process(e: &mut Exposition) {
    if let Some(cpu) = process_cpu() {
        e.single(
            "process_cpu_seconds_total",
            Kind::Counter,
            "User and system CPU time of the process.",
            cpu.as_secs_f64(),
        );
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| -> Option<u64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        line[name.len()..].split_whitespace().next()?.parse().ok()
    };
    if let Some(kib) = field("VmRSS:") {
        e.single(
            "process_resident_memory_bytes",
            Kind::Gauge,
            "Resident memory of the process.",
            kib.saturating_mul(1024),
        );
    }
    if let Some(kib) = field("VmSize:") {
        e.single(
            "process_virtual_memory_bytes",
            Kind::Gauge,
            "Virtual memory of the process.",
            kib.saturating_mul(1024),
        );
    }
    if let Some(n) = field("Threads:") {
        e.single("process_threads", Kind::Gauge, "Threads of the process.", n);
    }
}

/// utime + stime of this process (fields 14 and 15 of `/proc/self/stat`, counted after
/// the parenthesised command name, which may hold spaces).
fn process_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(Duration::from_secs_f64(
        utime.saturating_add(stime) as f64 / USER_HZ,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_process_reports_cpu_time_and_resident_memory() {
        // Burn a little CPU so the counter is above zero on any clock.
        let mut x = 0u64;
        let started = std::time::Instant::now();
        while started.elapsed() < Duration::from_millis(50) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let mut e = Exposition::new();
        render_process(&mut e);
        let text = e.finish();
        let value = |name: &str| -> f64 {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{name} ")))
                .and_then(|v| v.parse().ok())
                .unwrap_or(-1.0)
        };
        assert!(value("process_cpu_seconds_total") > 0.0, "{text}");
        assert!(value("process_resident_memory_bytes") > 1e6, "{text}");
        assert!(value("process_threads") >= 1.0, "{text}");
    }
}
