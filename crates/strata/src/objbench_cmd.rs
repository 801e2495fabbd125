//! `strata objbench BUCKET` (JuiceFS's `objbench`): how fast an object store is for what a
//! volume does to it — big objects uploaded and downloaded a block at a time, small
//! objects put, read, headed, listed and deleted — with `-p` requests at once. Each phase
//! prints a row: requests, requests/s, MiB/s and latency percentiles. Everything is
//! written under a fresh prefix and deleted at the end (also after a failed phase).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use clap::Args;
use strata_object::ObjectStore;

use crate::format_cmd::{StoreKeys, new_format};
use crate::{units, wiring};

#[derive(Debug, Args)]
pub struct ObjbenchArgs {
    /// The bucket: a directory for file storage, an URL for s3
    /// (http://host:port/bucket or https://bucket.host) and for wasb
    /// (https://CONTAINER.core.windows.net or http://HOST:PORT/ACCOUNT/CONTAINER)
    bucket: String,
    /// Object storage: file, s3 or wasb
    #[arg(long, default_value = "s3")]
    storage: String,
    #[command(flatten)]
    keys: StoreKeys,
    /// Size of each block of the big object: 4M, ... (a plain number is KiB)
    #[arg(long, default_value = "4M", value_parser = units::kib)]
    block_size: u64,
    /// Size of the big object, uploaded and downloaded a block at a time (0 skips it)
    #[arg(long, default_value = "1G", value_parser = units::mib)]
    big_object_size: u64,
    /// Size of each small object: 128K, 4K, ... (a plain number is KiB)
    #[arg(long, default_value = "128K", value_parser = units::kib)]
    small_object_size: u64,
    /// Number of small objects (0 skips them)
    #[arg(long, default_value_t = 100)]
    small_objects: usize,
    /// Requests at once
    #[arg(short = 'p', long, default_value_t = 4)]
    threads: usize,
}

/// What one phase measured.
struct Row {
    item: &'static str,
    latencies: Vec<Duration>,
    bytes: u64,
    elapsed: Duration,
}

impl Row {
    fn print(&self) {
        let mut lat = self.latencies.clone();
        lat.sort_unstable();
        let pct = |p: usize| -> f64 {
            let last = lat.len().saturating_sub(1);
            let at = (last * p).div_ceil(100).min(last);
            lat.get(at).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
        };
        let secs = self.elapsed.as_secs_f64().max(1e-9);
        let count = u32::try_from(lat.len()).unwrap_or(u32::MAX);
        let mib = if self.bytes > 0 {
            let kib = f64::from(u32::try_from(self.bytes >> 10).unwrap_or(u32::MAX));
            format!("{:.1}", kib / 1024.0 / secs)
        } else {
            "-".into()
        };
        println!(
            "{:<18} {:>7} {:>10.1} {:>9} {:>9.2} {:>9.2} {:>9.2}",
            self.item,
            count,
            f64::from(count) / secs,
            mib,
            pct(50),
            pct(90),
            pct(99),
        );
    }
}

/// Run `op(i)` for every `i` in `0..count` with `threads` at once; each request's
/// latency, and the first error.
async fn run_phase<F, Fut>(count: usize, threads: usize, op: F) -> Result<(Vec<Duration>, Duration)>
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<()>> + Send,
{
    let op = Arc::new(op);
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..threads.clamp(1, count.max(1)) {
        let (op, next) = (op.clone(), next.clone());
        workers.spawn(async move {
            let mut latencies = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= count {
                    return Ok::<_, anyhow::Error>(latencies);
                }
                let t = Instant::now();
                op(i).await?;
                latencies.push(t.elapsed());
            }
        });
    }
    let mut all = Vec::with_capacity(count);
    while let Some(done) = workers.join_next().await {
        all.extend(done.context("a benchmark task failed")??);
    }
    Ok((all, started.elapsed()))
}

pub fn run_objbench(a: ObjbenchArgs) -> Result<()> {
    if a.block_size == 0 || a.small_object_size == 0 {
        bail!("--block-size and --small-object-size must be above 0");
    }
    if !matches!(a.storage.as_str(), "file" | "s3" | "wasb" | "azure") {
        bail!(
            "unknown storage {:?} (supported: file, s3, wasb)",
            a.storage
        );
    }
    let format = new_format("objbench", &a.storage, a.bucket.clone(), &a.keys);
    let rt = wiring::runtime()?;
    rt.block_on(async {
        let store = wiring::open_backend(&format)?;
        store
            .check()
            .await
            .with_context(|| format!("bucket {}", a.bucket))?;
        let prefix = format!("strata-objbench-{}/", uuid::Uuid::new_v4().simple());
        println!(
            "object store: {}, {} requests at once",
            store.describe(),
            a.threads
        );
        println!(
            "{:<18} {:>7} {:>10} {:>9} {:>9} {:>9} {:>9}",
            "ITEM", "COUNT", "OPS/S", "MiB/S", "P50 ms", "P90 ms", "P99 ms"
        );
        let outcome = phases(&store, &prefix, &a).await;
        let cleanup = remove_prefix(&store, &prefix).await;
        outcome?;
        cleanup
    })
}

/// Delete whatever is left under `prefix`.
async fn remove_prefix(store: &Arc<dyn ObjectStore>, prefix: &str) -> Result<()> {
    loop {
        let page = store.list(prefix, None, 1000).await?;
        if page.is_empty() {
            return Ok(());
        }
        for o in page {
            store.delete(&o.key).await?;
        }
    }
}

async fn phases(store: &Arc<dyn ObjectStore>, prefix: &str, a: &ObjbenchArgs) -> Result<()> {
    let p = a.threads;
    let blocks = usize::try_from(a.big_object_size.div_ceil(a.block_size))?;
    let block_len = usize::try_from(a.block_size)?;
    let small_len = usize::try_from(a.small_object_size)?;
    let block = random_bytes(block_len);
    let small = random_bytes(small_len);
    let timed = |item, (latencies, elapsed): (Vec<Duration>, Duration), size: u64| {
        let bytes = size * u64::try_from(latencies.len()).unwrap_or(0);
        Row {
            item,
            latencies,
            bytes,
            elapsed,
        }
        .print();
    };
    if blocks > 0 {
        let big = format!("{prefix}big/");
        let (s, b, k) = (store.clone(), block.clone(), big.clone());
        let put = run_phase(blocks, p, move |i| {
            let (s, b, k) = (s.clone(), b.clone(), format!("{k}{i:08}"));
            async move { Ok(s.put(&k, b).await?) }
        });
        timed("put big (block)", put.await?, a.block_size);
        let (s, k) = (store.clone(), big);
        let get = run_phase(blocks, p, move |i| {
            let (s, k) = (s.clone(), format!("{k}{i:08}"));
            async move { s.get(&k, None).await.map(drop).map_err(Into::into) }
        });
        timed("get big (block)", get.await?, a.block_size);
    }
    if a.small_objects == 0 {
        return Ok(());
    }
    let n = a.small_objects;
    let small_prefix = format!("{prefix}small/");
    let (s, d, sp) = (store.clone(), small.clone(), small_prefix.clone());
    let put = run_phase(n, p, move |i| {
        let (s, d, k) = (s.clone(), d.clone(), format!("{sp}{i:08}"));
        async move { Ok(s.put(&k, d).await?) }
    });
    timed("put small", put.await?, a.small_object_size);
    let (s, sp) = (store.clone(), small_prefix.clone());
    let get = run_phase(n, p, move |i| {
        let (s, k) = (s.clone(), format!("{sp}{i:08}"));
        async move { s.get(&k, None).await.map(drop).map_err(Into::into) }
    });
    timed("get small", get.await?, a.small_object_size);
    let (s, sp) = (store.clone(), small_prefix.clone());
    let head = run_phase(n, p, move |i| {
        let (s, k) = (s.clone(), format!("{sp}{i:08}"));
        async move { s.head(&k).await.map(drop).map_err(Into::into) }
    });
    timed("head small", head.await?, 0);
    let lists = n.div_ceil(100).clamp(1, 100);
    let (s, sp) = (store.clone(), small_prefix.clone());
    let list = run_phase(lists, p, move |_| {
        let (s, sp) = (s.clone(), sp.clone());
        async move {
            let page = s.list(&sp, None, 1000).await?;
            if page.len() != n.min(1000) {
                bail!(
                    "a listing returned {} of {} objects",
                    page.len(),
                    n.min(1000)
                );
            }
            Ok(())
        }
    });
    timed("list (1000/page)", list.await?, 0);
    let (s, sp) = (store.clone(), small_prefix);
    let delete = run_phase(n, p, move |i| {
        let (s, k) = (s.clone(), format!("{sp}{i:08}"));
        async move { Ok(s.delete(&k).await?) }
    });
    timed("delete small", delete.await?, 0);
    Ok(())
}

/// `len` bytes that do not compress (a store that compresses must not look faster).
fn random_bytes(len: usize) -> Bytes {
    let mut out = Vec::with_capacity(len + 16);
    while out.len() < len {
        out.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
    }
    out.truncate(len);
    Bytes::from(out)
}
