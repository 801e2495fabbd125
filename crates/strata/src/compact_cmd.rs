//! `strata compact PATH...`: merge every fragmented chunk of files or trees on a mounted
//! volume into one slice each, atomically and without changing contents (done by the
//! mount, through `.control`); and the whole-volume variant used by `gc --compact` (with
//! `--native`, also rewriting chunks that hold blocks adopted from JuiceFS).
//! Replaced slices are freed by the deletion queue after the trash window.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use clap::Args;
use strata_meta::ScanCursor;
use strata_types::{Ino, Slice};
use strata_vfs::control_wire::{ControlOp, ControlResult};
use strata_vfs::maintenance::Progress;

use crate::control;
use crate::wiring::AdminVolume;

#[derive(Debug, Args)]
pub struct CompactArgs {
    /// Files or directories on a mounted Strata volume
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Chunks compacted at once
    #[arg(short = 'p', long, default_value_t = 4)]
    threads: usize,
}

/// Compact every chunk of the volume that has more than one slice, and with
/// `foreign_below` also every chunk holding a slice below that id (blocks adopted from
/// JuiceFS, rewritten as native ones); returns how many.
pub async fn compact_volume(
    volume: &AdminVolume,
    keys: &strata_client::KeyOptions,
    threads: usize,
    foreign_below: Option<u64>,
    progress: &Progress,
) -> Result<u64> {
    let vfs = volume.vfs(keys)?;
    let needs = move |slices: &[Slice]| {
        slices.len() > 1
            || foreign_below.is_some_and(|below| slices.iter().any(|s| s.id != 0 && s.id < below))
    };
    progress.stage("compacting chunks", 0);
    let mut cursor: ScanCursor = None;
    let mut targets = Vec::new();
    loop {
        let (chunks, next) = volume.meta.chunk_page(&cursor, 2000).await?;
        targets.extend(
            chunks
                .iter()
                .filter(|c| needs(&c.slices))
                .map(|c| (c.ino, c.index)),
        );
        cursor = next;
        if cursor.is_none() {
            break;
        }
    }
    compact_chunks(&vfs, targets, threads, Arc::new(needs), progress).await
}

/// Whether a chunk with these slices is to be rewritten.
type NeedsRewrite = Arc<dyn Fn(&[Slice]) -> bool + Send + Sync>;

async fn compact_chunks(
    vfs: &Arc<strata_vfs::Vfs>,
    targets: Vec<(Ino, u32)>,
    threads: usize,
    needs: NeedsRewrite,
    progress: &Progress,
) -> Result<u64> {
    progress.total.store(
        u64::try_from(targets.len()).unwrap_or(u64::MAX),
        std::sync::atomic::Ordering::Relaxed,
    );
    let limit = Arc::new(tokio::sync::Semaphore::new(threads.max(1)));
    let mut tasks = tokio::task::JoinSet::new();
    for (ino, index) in targets {
        let permit = limit.clone().acquire_owned().await?;
        let vfs = vfs.clone();
        let needs = needs.clone();
        tasks.spawn(async move {
            let r = vfs.rewrite_chunk(ino, index, &*needs).await;
            drop(permit);
            (ino, index, r)
        });
    }
    let mut done = 0;
    while let Some(joined) = tasks.join_next().await {
        let (ino, index, r) = joined?;
        if let Err(e) = r {
            bail!("compacting chunk {index} of inode {ino}: {}", e.name());
        }
        done += 1;
        progress.add(1, 0);
    }
    Ok(done)
}

/// Compact through the mount serving each path, as the caller: files the caller may not
/// write are skipped (and counted).
pub fn run_compact(a: CompactArgs) -> Result<()> {
    for path in &a.paths {
        let path = std::fs::canonicalize(path).with_context(|| format!("{}", path.display()))?;
        let mount = control::mount_of(&path)?;
        let op = ControlOp::Compact {
            ino: std::fs::metadata(&path)?.ino(),
            threads: a.threads.max(1),
        };
        match control::request(&mount, op).with_context(|| format!("{}", path.display()))? {
            ControlResult::Compacted {
                chunks,
                skipped_files,
            } => {
                println!("compacted {chunks} chunks under {}", path.display());
                if skipped_files > 0 {
                    println!("skipped {skipped_files} files you may not write");
                }
            }
            _ => bail!("the mount answered with something other than a compaction"),
        }
    }
    Ok(())
}
