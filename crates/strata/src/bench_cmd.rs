//! `strata bench meta DIR`: a metadata storm on any directory (a Strata or JuiceFS mount,
//! a local disk): THREADS threads create, stat, then unlink FILES empty files in one fresh
//! directory, each phase timed. Prints operations per second per phase and the wall time.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};

#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    kind: BenchKind,
}

#[derive(Debug, Subcommand)]
enum BenchKind {
    /// Create, stat and unlink many empty files in one directory.
    Meta(MetaBenchArgs),
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
        BenchKind::Meta(m) => meta_storm(&m),
    }
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
