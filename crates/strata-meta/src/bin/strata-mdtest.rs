//! `strata-mdtest`: a metadata benchmark in the style of mdtest, straight on the metadata
//! layer (no FUSE, no data). Each client is its own engine instance — its own connections
//! and commit queue, as a separate process would have — and they work concurrently.
//!
//! ```text
//! strata-mdtest --db /tmp/meta.db --files 100000 --clients 4
//! strata-mdtest --memory --files 10000
//! ```
//! Phases (`--phases`, comma-separated): create, stat, readdir, unlink.
#![allow(clippy::print_stdout)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use strata_meta::kv::KvEngine;
use strata_meta::kv::memory::MemoryEngine;
use strata_meta::kv::sqlite::SqliteEngine;
use strata_meta::{Ctx, Format, Meta, MetaError, MetaOptions};
use strata_types::{FileType, Ino};

const USAGE: &str =
    "usage: strata-mdtest (--db PATH | --memory) [--files N] [--clients N] [--threads N] \
[--dir NAME] [--prefix P] [--phases create,stat,readdir,unlink] [--deferred-sync]

  --db PATH     SQLite database file (created and formatted if new)
  --memory      in-memory engine (one process)
  --files N     files per run, split across clients (default 10000)
  --clients N   concurrent clients, each with its own engine instance (default 1)
  --threads N   concurrent tasks per client, sharing its engine (default 1)
  --dir NAME    directory under the root to work in (default mdtest)
  --prefix P    prefix of file names, to let several processes share --dir (default f)
  --phases L    phases to run, in order (default create,stat,readdir,unlink)
  --deferred-sync  commits do not wait for the disk, as on a mount (default: every
                commit durable, as admin commands run)";

#[derive(Debug)]
struct Args {
    db: Option<PathBuf>,
    files: usize,
    clients: usize,
    threads: usize,
    dir: String,
    prefix: String,
    phases: Vec<String>,
    deferred_sync: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        db: None,
        files: 10_000,
        clients: 1,
        threads: 1,
        dir: "mdtest".into(),
        prefix: "f".into(),
        phases: ["create", "stat", "readdir", "unlink"]
            .map(String::from)
            .to_vec(),
        deferred_sync: false,
    };
    let mut memory = false;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--db" => args.db = Some(PathBuf::from(value()?)),
            "--memory" => memory = true,
            "--deferred-sync" => args.deferred_sync = true,
            "--files" => args.files = value()?.parse().map_err(|e| format!("--files: {e}"))?,
            "--clients" => {
                args.clients = value()?.parse().map_err(|e| format!("--clients: {e}"))?
            }
            "--threads" => {
                args.threads = value()?.parse().map_err(|e| format!("--threads: {e}"))?
            }
            "--dir" => args.dir = value()?,
            "--prefix" => args.prefix = value()?,
            "--phases" => args.phases = value()?.split(',').map(String::from).collect(),
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if memory == args.db.is_some() {
        return Err("give exactly one of --db PATH and --memory".into());
    }
    if args.clients == 0 || args.threads == 0 {
        return Err("--clients and --threads must be at least 1".into());
    }
    Ok(args)
}

fn bench_format() -> Format {
    Format {
        name: "mdtest".into(),
        uuid: uuid::Uuid::new_v4().to_string(),
        storage: "file".into(),
        bucket: "/dev/null".into(),
        access_key: None,
        secret_key: None,
        session_token: None,
        block_size_kib: 4096,
        compression: "none".into(),
        trash_days: 0,
        capacity: 0,
        inodes: 0,
        created_at: strata_meta::now_ns() / 1_000_000_000,
        meta_version: strata_meta::META_VERSION,
        enable_acl: false,
        encryption: None,
        foreign: None,
        stores: Vec::new(),
    }
}

async fn open_client(args: &Args, memory: &MemoryEngine) -> Result<Meta, MetaError> {
    let engine: Arc<dyn KvEngine> = match &args.db {
        Some(path) => Arc::new(SqliteEngine::open(path)?),
        None => Arc::new(memory.clone()),
    };
    let opts = MetaOptions {
        deferred_sync: args.deferred_sync,
        ..MetaOptions::default()
    };
    let meta = Meta::new(engine, opts);
    match meta.load().await {
        Ok(_) => Ok(meta),
        Err(MetaError::NotFormatted) => {
            meta.format(&bench_format(), false).await?;
            meta.load().await?;
            Ok(meta)
        }
        Err(e) => Err(e),
    }
}

async fn work_dir(meta: &Meta, name: &str) -> Result<Ino, MetaError> {
    let root = Ctx::root();
    match meta.mkdir(&root, Ino::ROOT, name.as_bytes(), 0o755).await {
        Ok(e) => Ok(e.ino),
        Err(MetaError::Posix(e)) if e == strata_types::Errno::EEXIST => {
            Ok(meta.lookup(&root, Ino::ROOT, name.as_bytes()).await?.ino)
        }
        Err(e) => Err(e),
    }
}

/// Run one phase with every client working on its share of the names.
async fn run_phase(
    phase: &str,
    clients: &[Arc<Meta>],
    dir: Ino,
    args: &Arc<Args>,
) -> Result<usize, MetaError> {
    if phase == "readdir" {
        let mut count = 0;
        let mut after: Option<Vec<u8>> = None;
        loop {
            let page = clients[0]
                .readdir(dir, after.as_deref(), 1000, true)
                .await?;
            let Some(last) = page.last() else { break };
            after = Some(last.name.clone());
            count += page.len();
        }
        return Ok(count);
    }
    let mut tasks = Vec::new();
    let workers = args.clients * args.threads;
    for w in 0..workers {
        let meta = clients[w % clients.len()].clone();
        let (args, phase) = (args.clone(), phase.to_string());
        tasks.push(tokio::spawn(async move {
            let root = Ctx::root();
            let mut done = 0;
            for i in (w..args.files).step_by(workers) {
                let name = format!("{}-{i:08}", args.prefix);
                let name = name.as_bytes();
                match phase.as_str() {
                    "create" => {
                        meta.mknod(&root, dir, name, FileType::Regular, 0o644, 0)
                            .await?;
                    }
                    "stat" => {
                        meta.lookup(&root, dir, name).await?;
                    }
                    "unlink" => meta.unlink(&root, dir, name).await?,
                    other => return Err(MetaError::Invalid(format!("unknown phase {other}"))),
                }
                done += 1;
            }
            Ok::<usize, MetaError>(done)
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t
            .await
            .map_err(|e| MetaError::Invalid(format!("client task failed: {e}")))??;
    }
    Ok(total)
}

async fn run(args: Args) -> Result<(), MetaError> {
    let args = Arc::new(args);
    let memory = MemoryEngine::new();
    let mut clients = Vec::with_capacity(args.clients);
    for _ in 0..args.clients {
        clients.push(Arc::new(open_client(&args, &memory).await?));
    }
    let dir = work_dir(&clients[0], &args.dir).await?;
    println!(
        "engine={} clients={} threads/client={} files={}",
        clients[0].engine().name(),
        args.clients,
        args.threads,
        args.files
    );
    for phase in &args.phases {
        let started = Instant::now();
        let ops = run_phase(phase, &clients, dir, &args).await?;
        let secs = started.elapsed().as_secs_f64();
        println!(
            "{phase:<8} {ops:>9} ops {secs:>8.2} s {:>10.0} ops/s",
            ops as f64 / secs.max(1e-9)
        );
        if phase == "create"
            && let Some(path) = &args.db
        {
            SqliteEngine::open(path)?.checkpoint()?;
            let bytes = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
            let per = bytes as f64 / args.files.max(1) as f64;
            println!("database {bytes} bytes after checkpoint = {per:.0} bytes per inode");
        }
    }
    for c in &clients {
        c.flush_usage().await?;
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(msg) => {
            if !msg.is_empty() {
                eprintln!("strata-mdtest: {msg}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("strata-mdtest: cannot start runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("strata-mdtest: {e}");
            ExitCode::FAILURE
        }
    }
}
