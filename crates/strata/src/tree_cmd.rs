//! Commands on paths of a mounted volume that work on whole trees, through the mount
//! (`.control`): `clone` (metadata-only copy sharing data) and `summary` (sizes per
//! subtree from directory usage). And `destroy`, which removes a whole volume.

use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use clap::Args;
use indicatif::HumanBytes;
use strata_types::MetaUrl;
use strata_vfs::control_wire::{ControlOp, ControlResult};
use strata_vfs::maintenance::Progress;
use strata_vfs::maintenance::{SortSpace, sorted_listing};

use crate::progress::ProgressView;
use crate::{control, wiring};

#[derive(Debug, Args)]
pub struct CloneArgs {
    /// The file or directory to clone (on a mounted Strata volume)
    src: PathBuf,
    /// The new path (same volume; must not exist)
    dst: PathBuf,
    /// Keep owner, mode and times of the source (default: the copy is yours, times now)
    #[arg(long)]
    preserve: bool,
}

#[derive(Debug, Args)]
pub struct SummaryArgs {
    /// A directory on a mounted Strata volume
    path: PathBuf,
    /// Levels of subdirectories to list
    #[arg(long, default_value_t = 1)]
    depth: usize,
}

#[derive(Debug, Args)]
pub struct DestroyArgs {
    /// Metadata engine URL of the volume
    meta_url: MetaUrl,
    /// The volume's UUID (see `strata status`), as a guard against the wrong URL
    uuid: String,
    /// Do not ask for confirmation
    #[arg(short = 'y', long)]
    yes: bool,
    /// Destroy even when clients are still connected
    #[arg(long)]
    force: bool,
    /// Concurrent object deletions
    #[arg(short = 'p', long, default_value_t = 10)]
    threads: usize,
}

/// Clone through the mount serving both paths: as the caller, in the mount's view.
pub fn run_clone(a: CloneArgs) -> Result<()> {
    let src = std::fs::symlink_metadata(&a.src).with_context(|| format!("{}", a.src.display()))?;
    let dst = std::path::absolute(&a.dst)?;
    let (Some(parent), Some(name)) = (dst.parent(), dst.file_name()) else {
        bail!("{}: not a valid destination", a.dst.display());
    };
    let parent_meta = std::fs::metadata(parent).with_context(|| format!("{}", parent.display()))?;
    if parent_meta.dev() != src.dev() {
        bail!(
            "{} and {} are not on the same volume",
            a.src.display(),
            a.dst.display()
        );
    }
    let mount = control::mount_of(parent)?;
    let op = ControlOp::Clone {
        src: src.ino(),
        parent: parent_meta.ino(),
        name: name.as_bytes().to_vec(),
        preserve: a.preserve,
    };
    match control::request(&mount, op).with_context(|| format!("{}", dst.display()))? {
        ControlResult::Cloned { inodes } => println!(
            "cloned {} to {} ({inodes} inodes, no data copied)",
            a.src.display(),
            dst.display()
        ),
        _ => bail!("the mount answered with something other than a clone"),
    }
    Ok(())
}

/// Sizes per subtree, from the directories' usage records (no file walk), through the
/// mount serving the path.
pub fn run_summary(a: SummaryArgs) -> Result<()> {
    let path = std::fs::canonicalize(&a.path).with_context(|| format!("{}", a.path.display()))?;
    let mount = control::mount_of(&path)?;
    let op = ControlOp::Summary {
        ino: std::fs::metadata(&path)?.ino(),
        depth: a.depth,
    };
    let ControlResult::Summary { rows } =
        control::request(&mount, op).with_context(|| format!("{}", path.display()))?
    else {
        bail!("the mount answered with something other than a summary");
    };
    println!("{:>12} {:>10} {:>8}  PATH", "SIZE", "FILES", "DIRS");
    for row in rows {
        let shown = if row.path.is_empty() {
            path.clone()
        } else {
            path.join(std::ffi::OsStr::from_bytes(&row.path))
        };
        println!(
            "{:>12} {:>10} {:>8}  {}",
            HumanBytes(u64::try_from(row.bytes).unwrap_or(0)).to_string(),
            row.files,
            row.dirs,
            shown.display()
        );
    }
    Ok(())
}

pub fn run_destroy(a: DestroyArgs) -> Result<()> {
    let rt = wiring::runtime()?;
    rt.block_on(async {
        let volume = wiring::open_admin_volume(&a.meta_url).await?;
        if volume.format.uuid != a.uuid {
            bail!(
                "UUID {} does not match volume {} ({})",
                a.uuid,
                volume.format.name,
                volume.format.uuid
            );
        }
        let sessions = volume.meta.list_sessions().await?;
        if !sessions.is_empty() && !a.force {
            bail!(
                "{} clients are connected (first: {} on {}); unmount them or use --force",
                sessions.len(),
                sessions[0].mount_point,
                sessions[0].host
            );
        }
        if !a.yes && !confirm(&volume.format.name)? {
            bail!("not confirmed; nothing was destroyed");
        }
        let progress = Arc::new(Progress::default());
        let view = ProgressView::start(progress.clone());
        let erased = erase(&volume, a.threads, &progress).await;
        drop(view);
        let (objects, keys) = erased?;
        println!(
            "destroyed volume {}: {objects} objects, {keys} metadata keys",
            volume.format.name
        );
        Ok(())
    })
}

/// Delete every object of the volume, then every metadata key.
async fn erase(
    volume: &wiring::AdminVolume,
    threads: usize,
    progress: &Progress,
) -> Result<(u64, u64)> {
    progress.stage("deleting objects", 0);
    let objects = delete_all_objects(&volume.raw, threads, progress).await?;
    progress.stage("deleting metadata", 0);
    let keys = volume
        .meta
        .erase_everything(&mut |n| progress.add(n, 0))
        .await?;
    Ok((objects, keys))
}

fn confirm(name: &str) -> Result<bool> {
    eprint!(
        "Destroy volume {name} with all its files and objects? Type the volume name to confirm: "
    );
    std::io::stderr().flush()?;
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer)?;
    Ok(answer.trim() == name)
}

/// Delete every object under the volume's prefix: the listing is spilled to disk first
/// (memory stays fixed), then the keys are deleted `threads` at a time.
async fn delete_all_objects(
    store: &Arc<dyn strata_object::ObjectStore>,
    threads: usize,
    progress: &Progress,
) -> Result<u64> {
    let space = SortSpace {
        dir: std::env::temp_dir(),
        budget: 16 << 20,
    };
    let listing = Progress::default();
    let mut keys =
        sorted_listing(store, "", &space, &listing, |info| Some(info.key.clone())).await?;
    progress.total.store(
        listing.done.load(std::sync::atomic::Ordering::Relaxed),
        std::sync::atomic::Ordering::Relaxed,
    );
    let limit = Arc::new(tokio::sync::Semaphore::new(threads.max(1)));
    let mut tasks = tokio::task::JoinSet::new();
    while let Some(key) = keys.next_line()? {
        let permit = limit.clone().acquire_owned().await?;
        let store = store.clone();
        tasks.spawn(async move {
            let r = store.delete(&key).await;
            drop(permit);
            r
        });
        while let Some(r) = tasks.try_join_next() {
            r??;
            progress.add(1, 0);
        }
    }
    while let Some(r) = tasks.join_next().await {
        r??;
        progress.add(1, 0);
    }
    Ok(progress.done.load(std::sync::atomic::Ordering::Relaxed))
}
