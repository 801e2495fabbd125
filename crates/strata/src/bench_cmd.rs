//! Benchmarks that run on any directory (a Strata or JuiceFS mount, a local disk):
//! `strata bench DIR`, JuiceFS's standard workload ([`crate::bench_std`]);
//! `strata bench meta DIR`, a metadata storm — THREADS threads create, stat, then unlink
//! FILES empty files in one fresh directory, each phase timed; and `strata bench
//! stat-while-writing DIR`, the latency of `stat` on a file while another thread writes
//! a large file to it (mount with `--attr-cache 0` so every `stat` reaches the file
//! system); `strata bench populate`, a generated volume of N files ([`crate::populate_cmd`]).

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchArgs {
    #[command(subcommand)]
    kind: Option<BenchKind>,
    /// Without a subcommand: JuiceFS's standard workload on DIR
    #[command(flatten)]
    standard: crate::bench_std::StdBenchArgs,
}

#[derive(Debug, Subcommand)]
enum BenchKind {
    /// Create, stat and unlink many empty files in one directory.
    Meta(MetaBenchArgs),
    /// Latency of stat on a file while it is being written (and fsynced at the end).
    StatWhileWriting(StatBenchArgs),
    /// Make a new volume holding N generated files (no data), at the engine's speed.
    Populate(crate::populate_cmd::PopulateArgs),
}

#[derive(Debug, Args)]
struct StatBenchArgs {
    /// Directory to run in (a fresh subdirectory is made and removed)
    dir: PathBuf,
    /// Bytes to write: 1G, 256M, ...
    #[arg(long, default_value = "1G", value_parser = crate::units::mib)]
    size: u64,
    /// Size of each write: 1M, 128K, ...
    #[arg(long, default_value = "1M", value_parser = crate::units::kib)]
    block: u64,
}

#[derive(Debug, Args)]
struct MetaBenchArgs {
    /// Directory to run in (a fresh subdirectory is made and removed)
    dir: PathBuf,
    /// Files in total
    #[arg(long, default_value_t = 20_000)]
    files: usize,
    /// Threads sharing the work
    #[arg(short = 'p', long, default_value_t = 1)]
    threads: usize,
}

pub fn run_bench(a: BenchArgs) -> Result<()> {
    match a.kind {
        Some(BenchKind::Meta(m)) => meta_storm(&m),
        Some(BenchKind::StatWhileWriting(s)) => stat_while_writing(&s),
        Some(BenchKind::Populate(p)) => crate::populate_cmd::run_populate(p),
        None => match a.standard.dir.clone() {
            Some(dir) => crate::bench_std::run(&a.standard, &dir),
            None => bail!("which directory? `strata bench DIR` (or `strata bench meta DIR`)"),
        },
    }
}

fn stat_while_writing(a: &StatBenchArgs) -> Result<()> {
    use std::io::Write;
    use std::sync::atomic::{AtomicBool, Ordering};
    let block = usize::try_from(a.block).context("--block is too large")?;
    if block == 0 || a.size == 0 {
        bail!("--size and --block must be at least 1 byte");
    }
    let dir = a.dir.join(format!("__strata_bench_{}", std::process::id()));
    std::fs::create_dir(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let path = dir.join("f");
    let mut file = std::fs::File::create(&path)?;
    let writing = AtomicBool::new(true);
    let started = Instant::now();
    let (written, mut latencies) = std::thread::scope(|scope| {
        let stats = scope.spawn(|| {
            let mut latencies = Vec::new();
            while writing.load(Ordering::Relaxed) {
                let t = Instant::now();
                if std::fs::metadata(&path).is_err() {
                    break;
                }
                latencies.push(t.elapsed());
            }
            latencies
        });
        let payload = vec![0x5au8; block];
        let mut done = 0u64;
        let mut outcome = Ok(());
        while done < a.size && outcome.is_ok() {
            outcome = file.write_all(&payload);
            done += a.block;
        }
        let outcome = outcome.and_then(|()| file.sync_all());
        writing.store(false, Ordering::Relaxed);
        let latencies = stats.join().unwrap_or_default();
        (outcome.map(|()| done), latencies)
    });
    let written = written.context("writing")?;
    let secs = started.elapsed().as_secs_f64();
    drop(file);
    std::fs::remove_file(&path)?;
    std::fs::remove_dir(&dir)?;
    if latencies.is_empty() {
        bail!("no stat finished while writing");
    }
    latencies.sort();
    // The latency below which `permille` thousandths of the stats finished.
    let at = |permille: usize| latencies[(latencies.len() - 1) * permille / 1000];
    println!(
        "stat while writing {} MiB in {} KiB writes: {:.0} MiB/s",
        written >> 20,
        a.block >> 10,
        (written >> 20) as f64 / secs
    );
    println!("| stats | p50 | p99 | p99.9 | max |\n|---:|---:|---:|---:|---:|");
    println!(
        "| {} | {:.3} ms | {:.3} ms | {:.3} ms | {:.3} ms |",
        latencies.len(),
        at(500).as_secs_f64() * 1e3,
        at(990).as_secs_f64() * 1e3,
        at(999).as_secs_f64() * 1e3,
        at(1000).as_secs_f64() * 1e3
    );
    Ok(())
}

fn meta_storm(a: &MetaBenchArgs) -> Result<()> {
    if a.threads == 0 || a.files == 0 {
        bail!("--files and --threads must be at least 1");
    }
    let dir = a.dir.join(format!("__strata_bench_{}", std::process::id()));
    std::fs::create_dir(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    println!(
        "metadata storm: {} files, {} threads, in {}",
        a.files,
        a.threads,
        dir.display()
    );
    println!("| phase | ops/s | seconds |\n|---|---:|---:|");
    let phases: [(&str, FileOp); 3] = [
        ("create", |p| std::fs::File::create(p).map(drop)),
        ("stat", |p| std::fs::metadata(p).map(drop)),
        ("unlink", |p| std::fs::remove_file(p)),
    ];
    for (name, op) in phases {
        let started = Instant::now();
        run_phase(&dir, a.files, a.threads, op).with_context(|| format!("{name} phase"))?;
        let secs = started.elapsed().as_secs_f64();
        println!("| {name} | {:.0} | {secs:.2} |", a.files as f64 / secs);
    }
    std::fs::remove_dir(&dir).with_context(|| format!("cannot remove {}", dir.display()))?;
    Ok(())
}

/// One operation of a phase, on one file.
type FileOp = fn(&Path) -> std::io::Result<()>;

/// Apply `op` to files 0..files of `dir`, split across `threads` threads.
fn run_phase(dir: &Path, files: usize, threads: usize, op: FileOp) -> Result<()> {
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                scope.spawn(move || -> std::io::Result<()> {
                    for i in (t..files).step_by(threads) {
                        op(&dir.join(format!("f{i}")))?;
                    }
                    Ok(())
                })
            })
            .collect();
        for w in workers {
            match w.join() {
                Ok(r) => r?,
                Err(_) => bail!("a benchmark thread panicked"),
            }
        }
        Ok(())
    })
}
