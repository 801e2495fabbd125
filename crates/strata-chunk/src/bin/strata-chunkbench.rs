//! `strata-chunkbench`: sequential write and read throughput of the data layer (slice
//! writers, block uploads, reads with readahead) over the full object store stack
//! (integrity checks on), against the memory store or a local directory, with or without
//! a disk cache. A benchmark, not a test.
//!
//! ```text
//! strata-chunkbench --store mem --size-mib 1024
//! strata-chunkbench --store file:/tmp/bucket --cache-dir /tmp/cache --size-mib 1024
//! ```
#![allow(clippy::print_stdout)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use strata_chunk::ChunkOptions;
use strata_chunk::cache::BlockCache;
use strata_chunk::cache::NoCache;
use strata_chunk::cache::disk::DiskCache;
use strata_chunk::readahead::Window;
use strata_chunk::{ChunkError, ChunkStore};
use strata_object::ObjectStore;
use strata_object::backend::Backend;
use strata_object::stack::{StackOptions, build};
use strata_types::{CHUNK_SIZE, Slice};

const USAGE: &str =
    "usage: strata-chunkbench [--store mem|file:DIR] [--cache-dir DIR] [--size-mib N] [--io-kib N]";

struct Args {
    store: String,
    cache_dir: Option<PathBuf>,
    size_mib: u64,
    io_kib: usize,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        store: "mem".into(),
        cache_dir: None,
        size_mib: 1024,
        io_kib: 1024,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--store" => a.store = value()?,
            "--cache-dir" => a.cache_dir = Some(PathBuf::from(value()?)),
            "--size-mib" => {
                a.size_mib = value()?.parse().map_err(|e| format!("--size-mib: {e}"))?
            }
            "--io-kib" => a.io_kib = value()?.parse().map_err(|e| format!("--io-kib: {e}"))?,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(a)
}

fn gib_per_s(bytes: u64, secs: f64) -> f64 {
    bytes as f64 / (1u64 << 30) as f64 / secs.max(1e-9)
}

async fn run(a: Args) -> Result<(), ChunkError> {
    let backend: Arc<dyn ObjectStore> = match a.store.strip_prefix("file:") {
        Some(dir) => Arc::new(Backend::local(std::path::Path::new(dir))?),
        None => Arc::new(Backend::memory()),
    };
    let (store, stats) = build(backend, &StackOptions::default());
    let cache: Arc<dyn BlockCache> = match &a.cache_dir {
        Some(dir) => Arc::new(
            DiskCache::open(std::slice::from_ref(dir), 10 << 30, 0.1)
                .map_err(|e| ChunkError::Other(e.to_string()))?,
        ),
        None => Arc::new(NoCache::default()),
    };
    let chunks = ChunkStore::new(store, cache.clone(), ChunkOptions::default());
    let total = a.size_mib << 20;
    let io = a.io_kib << 10;
    let payload: Vec<u8> = (0..io).map(|i| (i * 31 % 251) as u8).collect();
    let chunk_count = total.div_ceil(CHUNK_SIZE);

    let started = Instant::now();
    let mut slices = Vec::new();
    for c in 0..chunk_count {
        let len = (total - c * CHUNK_SIZE).min(CHUNK_SIZE) as u32;
        let mut w = chunks.writer(c + 1, 0);
        while w.len() < len {
            let take = (len - w.len()).min(io as u32) as usize;
            let off = w.len();
            w.write_at(off, &payload[..take], None).await?;
        }
        let size = w.finish().await?;
        slices.push(vec![Slice {
            pos: 0,
            id: c + 1,
            size,
            off: 0,
            len: size,
        }]);
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "store={} cache={} size={} MiB io={} KiB",
        a.store,
        a.cache_dir.is_some(),
        a.size_mib,
        a.io_kib
    );
    println!(
        "write  {:>8.2} s  {:>6.2} GiB/s",
        secs,
        gib_per_s(total, secs)
    );

    let started = Instant::now();
    let mut checked = 0u64;
    for (c, chunk_slices) in slices.iter().enumerate() {
        let len = chunk_slices[0].len;
        let mut window = Window::new(u64::from(chunks.block_size()), 64 << 20);
        let mut off = 0u32;
        while off < len {
            let take = (len - off).min(io as u32);
            if let Some((start, n)) = window.on_read(u64::from(off), u64::from(take)) {
                let n = n.min(u64::from(len).saturating_sub(start)) as u32;
                chunks.prefetch(chunk_slices, start as u32, n);
            }
            let data = chunks.read(chunk_slices, off, take).await?;
            if data[..] != payload[..take as usize] {
                return Err(ChunkError::Other(format!(
                    "chunk {c} offset {off}: wrong bytes"
                )));
            }
            checked += u64::from(take);
            off += take;
        }
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "read   {:>8.2} s  {:>6.2} GiB/s  (verified {checked} bytes)",
        secs,
        gib_per_s(total, secs)
    );
    println!(
        "object requests: {:?}; cache hits {}",
        stats.snapshot(),
        strata_chunk::CacheStats::get(&cache.stats().hits)
    );
    Ok(())
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(a) => a,
        Err(msg) => {
            eprintln!("strata-chunkbench: {msg}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("strata-chunkbench: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("strata-chunkbench: {e}");
            ExitCode::FAILURE
        }
    }
}
