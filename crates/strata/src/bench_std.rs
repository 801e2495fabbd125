//! `strata bench DIR`: JuiceFS's standard workload with its flags — each of `-p` threads
//! writes and reads one big file in `--block-size` pieces, then writes, reads and stats
//! `--small-file-count` small files — with a progress bar and a result table (throughput
//! and cost per file). Runs on any directory, so the same command measures a Strata
//! mount, a JuiceFS mount or a local disk. Page caches are dropped before each read phase
//! when running as root (`--skip-drop-caches` to keep them).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::Args;
use strata_vfs::maintenance::Progress;

use crate::progress::ProgressView;
use crate::units;

#[derive(Debug, Args)]
pub struct StdBenchArgs {
    /// Directory to run in (a fresh subdirectory is made and removed)
    pub dir: Option<PathBuf>,
    /// Size of each read and write: 1M, 128K, ... (a plain number is MiB)
    #[arg(long, default_value = "1M", value_parser = units::mib)]
    block_size: u64,
    /// Size of each thread's big file (a plain number is MiB; 0 skips the big-file phases)
    #[arg(long, default_value = "1G", value_parser = units::mib)]
    big_file_size: u64,
    /// Size of each small file (a plain number is KiB)
    #[arg(long, default_value = "128K", value_parser = units::kib)]
    small_file_size: u64,
    /// Small files per thread (0 skips the small-file phases)
    #[arg(long, default_value_t = 100)]
    small_file_count: u64,
    /// Threads, each with its own files
    #[arg(short = 'p', long, default_value_t = 1)]
    threads: u64,
    /// Do not drop the kernel's page cache before the read phases
    #[arg(long)]
    skip_drop_caches: bool,
}

/// One finished phase: what was done and how long it took.
struct Outcome {
    item: &'static str,
    files: u64,
    bytes: u64,
    secs: f64,
}

pub fn run(a: &StdBenchArgs, dir: &Path) -> Result<()> {
    let block = usize::try_from(a.block_size).context("--block-size is too large")?;
    if block == 0 || a.threads == 0 {
        bail!("--block-size and -p must be at least 1");
    }
    if a.big_file_size == 0 && (a.small_file_count == 0 || a.small_file_size == 0) {
        bail!("nothing to do: both the big and the small files are sized 0");
    }
    let root = dir.join(format!("__strata_bench_{}", std::process::id()));
    std::fs::create_dir(&root).with_context(|| format!("cannot create {}", root.display()))?;
    let outcome = phases(a, &root, block);
    let cleanup =
        std::fs::remove_dir_all(&root).with_context(|| format!("cannot remove {}", root.display()));
    let results = outcome?;
    cleanup?;
    print_table(a, &results);
    Ok(())
}

fn phases(a: &StdBenchArgs, root: &Path, block: usize) -> Result<Vec<Outcome>> {
    let progress = Arc::new(Progress::default());
    let _view = ProgressView::start(progress.clone());
    let mut results = Vec::new();
    let big = |t: u64| root.join(format!("big.{t}"));
    let small = |t: u64, i: u64| root.join(format!("small.{t}.{i}"));
    let threads = a.threads;
    if a.big_file_size > 0 {
        let per_file = a.big_file_size;
        results.push(phase(
            &progress,
            "Write big file",
            a,
            threads,
            1,
            per_file,
            |t, _| write_file(&big(t), per_file, block),
        )?);
        drop_caches(a);
        results.push(phase(
            &progress,
            "Read big file",
            a,
            threads,
            1,
            per_file,
            |t, _| read_file(&big(t), block),
        )?);
    }
    if a.small_file_count > 0 && a.small_file_size > 0 {
        let (n, size) = (a.small_file_count, a.small_file_size);
        results.push(phase(
            &progress,
            "Write small file",
            a,
            threads,
            n,
            size,
            |t, i| write_file(&small(t, i), size, block),
        )?);
        drop_caches(a);
        results.push(phase(
            &progress,
            "Read small file",
            a,
            threads,
            n,
            size,
            |t, i| read_file(&small(t, i), block),
        )?);
        results.push(phase(&progress, "Stat file", a, threads, n, 0, |t, i| {
            std::fs::metadata(small(t, i)).map(|_| 0)
        })?);
    }
    Ok(results)
}

/// Run `op(thread, index)` for `files` files on each of `threads` threads.
fn phase(
    progress: &Progress,
    item: &'static str,
    a: &StdBenchArgs,
    threads: u64,
    files: u64,
    bytes_each: u64,
    op: impl Fn(u64, u64) -> std::io::Result<u64> + Sync,
) -> Result<Outcome> {
    let total = threads.saturating_mul(files);
    progress.stage(item, total);
    let started = Instant::now();
    let errors: Vec<std::io::Error> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let op = &op;
                scope.spawn(move || {
                    for i in 0..files {
                        let n = op(t, i)?;
                        progress.add(1, n);
                    }
                    Ok::<(), std::io::Error>(())
                })
            })
            .collect();
        handles
            .into_iter()
            .filter_map(|h| match h.join() {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e),
                Err(_) => Some(std::io::Error::other("a benchmark thread panicked")),
            })
            .collect()
    });
    if let Some(e) = errors.into_iter().next() {
        bail!(
            "{item} (in {}): {e}",
            a.dir.as_deref().unwrap_or(Path::new(".")).display()
        );
    }
    Ok(Outcome {
        item,
        files: total,
        bytes: total.saturating_mul(bytes_each),
        secs: started.elapsed().as_secs_f64().max(1e-9),
    })
}

/// Write `size` bytes to a new file at `path`, `block` at a time, and close it (a close
/// flushes it to the file system, as in JuiceFS's bench; no fsync).
fn write_file(path: &Path, size: u64, block: usize) -> std::io::Result<u64> {
    let mut file = std::fs::File::create(path)?;
    let payload: Vec<u8> = (0..block)
        .map(|i| u8::try_from(i % 251).unwrap_or(0))
        .collect();
    let mut left = size;
    while left > 0 {
        let n = usize::try_from(left).map_or(block, |l| l.min(block));
        file.write_all(&payload[..n])?;
        left -= u64::try_from(n).unwrap_or(left);
    }
    drop(file);
    Ok(size)
}

fn read_file(path: &Path, block: usize) -> std::io::Result<u64> {
    let mut file = std::fs::File::open(path)?;
    let mut buf = vec![0u8; block];
    let mut total = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            return Ok(total);
        }
        total += u64::try_from(n).unwrap_or(0);
    }
}

/// Drop the kernel's clean page cache (root only), so reads reach the file system.
fn drop_caches(a: &StdBenchArgs) {
    if a.skip_drop_caches {
        return;
    }
    let synced = std::process::Command::new("sync").status();
    let dropped = synced
        .map_err(|e| e.to_string())
        .and_then(|_| std::fs::write("/proc/sys/vm/drop_caches", "3").map_err(|e| e.to_string()));
    if let Err(e) = dropped {
        eprintln!("not dropping the page cache ({e}): reads may be served from it");
    }
}

fn print_table(a: &StdBenchArgs, results: &[Outcome]) {
    println!(
        "Benchmark: {} thread(s), block {} KiB, big file {} MiB, small file {} KiB x {}",
        a.threads,
        a.block_size >> 10,
        a.big_file_size >> 20,
        a.small_file_size >> 10,
        a.small_file_count
    );
    let line = format!("+{:-<18}+{:-<20}+{:-<18}+", "", "", "");
    println!("{line}");
    println!("| {:>16} | {:>18} | {:>16} |", "ITEM", "VALUE", "COST");
    println!("{line}");
    for r in results {
        let per_file_ms = r.secs * 1000.0 * float(a.threads) / float(r.files.max(1));
        let (value, cost) = if r.item.contains("big") {
            let mib = float(r.bytes) / 1048576.0;
            (
                format!("{:.2} MiB/s", mib / r.secs),
                format!("{:.2} s/file", per_file_ms / 1000.0),
            )
        } else {
            (
                format!("{:.1} files/s", float(r.files) / r.secs),
                format!("{per_file_ms:.2} ms/file"),
            )
        };
        println!("| {:>16} | {value:>18} | {cost:>16} |", r.item);
    }
    println!("{line}");
}

/// A count as a float, for rates shown with a few digits (exact below 2^53).
fn float(n: u64) -> f64 {
    n as f64
}
