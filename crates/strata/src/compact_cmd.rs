//! `strata compact PATH`: merge every fragmented chunk of a file or tree on a mounted
//! volume into one slice each, atomically and without changing contents; and the
//! whole-volume variant used by `gc --compact`. Replaced slices are freed by the
//! deletion queue after the trash window.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use clap::Args;
use strata_meta::ScanCursor;
use strata_types::Ino;
use strata_vfs::maintenance::Progress;

use crate::progress::ProgressView;
use crate::wiring::{self, AdminVolume};

#[derive(Debug, Args)]
pub struct CompactArgs {
    /// A file or directory on a mounted Strata volume
    path: PathBuf,
    /// Chunks compacted at once
    #[arg(short = 'p', long, default_value_t = 4)]
    threads: usize,
}

/// Compact every chunk of the volume that has more than one slice; returns how many.
pub async fn compact_volume(
    volume: &AdminVolume,
    threads: usize,
    progress: &Progress,
) -> Result<u64> {
    progress.stage("compacting chunks", 0);
    let vfs = volume.vfs();
    let mut cursor: ScanCursor = None;
    let mut targets = Vec::new();
    loop {
        let (chunks, next) = volume.meta.chunk_page(&cursor, 2000).await?;
        targets.extend(
            chunks
                .iter()
                .filter(|c| c.slices.len() > 1)
                .map(|c| (c.ino, c.index)),
        );
        cursor = next;
        if cursor.is_none() {
            break;
        }
    }
    compact_chunks(&vfs, targets, threads, progress).await
}

async fn compact_chunks(
    vfs: &Arc<strata_vfs::Vfs>,
    targets: Vec<(Ino, u32)>,
    threads: usize,
    progress: &Progress,
) -> Result<u64> {
    progress
        .total
        .store(targets.len() as u64, std::sync::atomic::Ordering::Relaxed);
    let limit = Arc::new(tokio::sync::Semaphore::new(threads.max(1)));
    let mut tasks = tokio::task::JoinSet::new();
    for (ino, index) in targets {
        let permit = limit.clone().acquire_owned().await?;
        let vfs = vfs.clone();
        tasks.spawn(async move {
            let r = vfs.compact_chunk(ino, index).await;
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

pub fn run_compact(a: CompactArgs) -> Result<()> {
    let path = std::fs::canonicalize(&a.path).with_context(|| format!("{}", a.path.display()))?;
    let url = wiring::meta_url_of_path(&path)?;
    let rt = wiring::runtime()?;
    rt.block_on(async {
        let volume = wiring::open_admin_volume(&url).await?;
        let mut targets = Vec::new();
        for entry in walk_files(&path)? {
            let ino = Ino(entry);
            for index in 0.. {
                let slices = volume.meta.read_chunk(ino, index).await?;
                let length = volume.meta.getattr(ino).await?.length;
                if u64::from(index) * strata_types::CHUNK_SIZE >= length {
                    break;
                }
                if slices.len() > 1 {
                    targets.push((ino, index));
                }
            }
        }
        let progress = Arc::new(Progress::default());
        progress.stage("compacting chunks", targets.len() as u64);
        let view = ProgressView::start(progress.clone());
        let done = compact_chunks(&volume.vfs(), targets, a.threads, &progress).await;
        drop(view);
        println!("compacted {} chunks under {}", done?, path.display());
        Ok(())
    })
}

/// Inode numbers of the regular files at or under `path` (through the mount).
fn walk_files(path: &std::path::Path) -> Result<Vec<u64>> {
    let mut out = Vec::new();
    let mut stack = vec![path.to_path_buf()];
    while let Some(p) = stack.pop() {
        let meta = std::fs::symlink_metadata(&p)?;
        if meta.is_dir() {
            for e in std::fs::read_dir(&p)? {
                stack.push(e?.path());
            }
        } else if meta.is_file() {
            out.push(meta.ino());
        }
    }
    Ok(out)
}
