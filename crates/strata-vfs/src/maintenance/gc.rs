//! `gc`: find objects in the bucket that no slice references (leaked by crashed writers,
//! by interrupted deletions or by bugs), report them, and delete them only when asked.
//! With `--delete` it also purges expired trash hours and finishes pending deletions (as
//! JuiceFS's `gc --delete` does). Objects younger than the safety window are never
//! touched: their writer may not have committed yet.
//!
//! Order matters for safety on a live volume: the bucket is listed first, then metadata
//! is scanned, so an object listed has either been committed before the scan (referenced)
//! or is older than the window without a commit (leaked). A slice can only "move" to a
//! place the scan already passed by gaining a reference there (copy_file_range, clone);
//! those bump the share epoch, and a scan during which the epoch changed is repeated.

use std::sync::Arc;
use std::time::Duration;

use strata_chunk::{block_key, block_sizes};
use strata_meta::{Meta, ScanCursor};
use strata_object::ObjectStore;

use super::extsort::{ExternalSorter, SortedLines};
use super::{
    MaintenanceError, Progress, Result, SortSpace, for_each_block_ref, parse_block_key,
    sorted_listing,
};

/// Keys read per metadata scan page.
const SCAN_PAGE: usize = 2000;
/// Scans repeated when slices keep being shared under them.
const MAX_PASSES: usize = 5;

/// What `gc` does.
#[derive(Clone, Debug)]
pub struct GcOptions {
    /// Delete leaked objects and finish pending deletions (otherwise only report).
    pub delete: bool,
    /// Objects modified more recently than this are never considered leaked.
    pub safety_window: Duration,
    /// Where the external sorts spill, and their memory.
    pub sort: SortSpace,
    /// Concurrent deletions.
    pub threads: usize,
    /// The volume's block size, bytes.
    pub block_size: u32,
}

/// What `gc` found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GcReport {
    /// Block objects in the bucket, and their bytes.
    pub objects: u64,
    pub object_bytes: u64,
    /// Objects inside the safety window (not judged).
    pub young_objects: u64,
    /// Objects under `chunks/` whose names are not block names (not touched).
    pub foreign_objects: u64,
    /// Block references in metadata (with repeats across shared slices).
    pub referenced_blocks: u64,
    /// Objects no slice references, and their bytes.
    pub leaked: u64,
    pub leaked_bytes: u64,
    pub deleted: u64,
    pub delete_failures: u64,
    /// Entries of expired trash hours deleted for good.
    pub trash_purged: u64,
    /// Pending deletions finished: files whose chunks were freed, slices whose blocks went.
    pub files_freed: u64,
    pub slices_freed: u64,
    /// Metadata scans made (more than one when slices were shared during a scan).
    pub passes: u64,
}

/// Run gc over the volume of `meta`, whose objects are in `store` (keys without the
/// volume prefix).
pub async fn collect_garbage(
    meta: &Meta,
    store: &Arc<dyn ObjectStore>,
    opts: &GcOptions,
    progress: &Progress,
) -> Result<GcReport> {
    let mut report = GcReport::default();
    if opts.delete {
        progress.stage("purging expired trash", 0);
        report.trash_purged = match meta.purge_trash(strata_meta::now_ns()).await {
            Ok(n) => n,
            // Immutable or locked files keep their trash hours; the rest still goes.
            Err(strata_meta::MetaError::Posix(strata_types::Errno::EPERM)) => {
                tracing::warn!(
                    "some expired trash hours hold immutable or locked files and were kept"
                );
                0
            }
            Err(e) => return Err(e.into()),
        };
        finish_pending_deletions(meta, store, opts, progress, &mut report).await?;
    }
    let listed = list_objects(store, opts, progress, &mut report).await?;
    let referenced = scan_references(meta, opts, progress, &mut report).await?;
    let leaked = compare(listed, referenced, opts, progress, &mut report)?;
    if opts.delete {
        delete_leaked(store, leaked, opts, progress, &mut report).await?;
    }
    Ok(report)
}

/// Free the chunks of deleted files and delete the blocks of slices whose last reference
/// went before the delay window (one hour with a trash, as the background job does).
async fn finish_pending_deletions(
    meta: &Meta,
    store: &Arc<dyn ObjectStore>,
    opts: &GcOptions,
    progress: &Progress,
    report: &mut GcReport,
) -> Result<()> {
    progress.stage("finishing pending deletions", 0);
    loop {
        let files = meta.pending_file_deletions(256).await?;
        if files.is_empty() {
            break;
        }
        for ino in files {
            while !meta.free_file_chunks(ino).await? {}
            report.files_freed += 1;
            progress.add(1, 0);
        }
    }
    let trash = meta.current_format()?.trash_days > 0;
    let delay = if trash { 3_600_000_000_000 } else { 0 };
    loop {
        let due = meta
            .pending_slice_deletions(strata_meta::now_ns() - delay, 1000)
            .await?;
        if due.is_empty() {
            return Ok(());
        }
        let mut done = Vec::with_capacity(due.len());
        for d in due {
            strata_chunk::delete_slice_blocks(store, opts.block_size, d.id, d.size)
                .await
                .map_err(|e| MaintenanceError::Unstable(format!("deleting slice {}: {e}", d.id)))?;
            done.push(d);
            report.slices_freed += 1;
            progress.add(1, u64::from(d.size));
        }
        meta.finish_slice_deletions(&done).await?;
    }
}

/// Every block object older than the window, as sorted `key\tsize` lines.
async fn list_objects(
    store: &Arc<dyn ObjectStore>,
    opts: &GcOptions,
    progress: &Progress,
    report: &mut GcReport,
) -> Result<SortedLines> {
    progress.stage("listing objects", 0);
    let newest = unix_now() - i64::try_from(opts.safety_window.as_secs()).unwrap_or(i64::MAX);
    sorted_listing(store, "chunks/", &opts.sort, progress, |info| {
        if parse_block_key(&info.key).is_none() {
            report.foreign_objects += 1;
            return None;
        }
        report.objects += 1;
        report.object_bytes += info.size;
        if info.modified > newest {
            report.young_objects += 1;
            return None;
        }
        Some(format!("{}\t{}", info.key, info.size))
    })
    .await
}

/// Every block that metadata references (chunks of all files, including trash and
/// deleted-but-open files, plus slices queued for deletion), sorted. Repeated while the
/// share epoch moves.
async fn scan_references(
    meta: &Meta,
    opts: &GcOptions,
    progress: &Progress,
    report: &mut GcReport,
) -> Result<SortedLines> {
    for _ in 0..MAX_PASSES {
        report.passes += 1;
        let epoch = meta.share_epoch().await?;
        let sorter = reference_stream(meta, opts, progress, report).await?;
        if meta.share_epoch().await? == epoch {
            return Ok(sorter.finish()?);
        }
        tracing::info!("slices were shared during the scan; scanning again");
    }
    Err(MaintenanceError::Unstable(format!(
        "slices kept being shared (copy_file_range, clone) during {MAX_PASSES} scans; \
         nothing was deleted — run gc again when the volume is quieter"
    )))
}

async fn reference_stream(
    meta: &Meta,
    opts: &GcOptions,
    progress: &Progress,
    report: &mut GcReport,
) -> Result<ExternalSorter> {
    progress.stage("scanning metadata", 0);
    let mut sorter = opts.sort.sorter()?;
    let mut referenced = 0;
    for_each_block_ref(meta, opts.block_size, progress, |_, key| {
        referenced += 1;
        Ok(sorter.push(key)?)
    })
    .await?;
    let mut cursor: ScanCursor = None;
    loop {
        let (queued, next) = meta.queued_slice_page(&cursor, SCAN_PAGE).await?;
        for (id, size) in queued {
            for (index, len) in block_sizes(size, opts.block_size) {
                sorter.push(block_key(id, index, len))?;
                referenced += 1;
            }
        }
        cursor = next;
        if cursor.is_none() {
            report.referenced_blocks = referenced;
            return Ok(sorter);
        }
    }
}

/// Objects (sorted `key\tsize`) that no reference (sorted keys) names, as `key\tsize`.
fn compare(
    mut listed: SortedLines,
    mut referenced: SortedLines,
    opts: &GcOptions,
    progress: &Progress,
    report: &mut GcReport,
) -> Result<SortedLines> {
    progress.stage("comparing", report.objects);
    let mut leaked = opts.sort.sorter()?;
    let mut reference = referenced.next_line()?;
    while let Some(line) = listed.next_line()? {
        let (key, size) = line.split_once('\t').unwrap_or((line.as_str(), "0"));
        while reference.as_deref().is_some_and(|r| r < key) {
            reference = referenced.next_line()?;
        }
        progress.add(1, 0);
        if reference.as_deref() == Some(key) {
            continue;
        }
        report.leaked += 1;
        report.leaked_bytes += size.parse::<u64>().unwrap_or(0);
        leaked.push(line.clone())?;
    }
    Ok(leaked.finish()?)
}

async fn delete_leaked(
    store: &Arc<dyn ObjectStore>,
    mut leaked: SortedLines,
    opts: &GcOptions,
    progress: &Progress,
    report: &mut GcReport,
) -> Result<()> {
    progress.stage("deleting leaked objects", report.leaked);
    let limit = Arc::new(tokio::sync::Semaphore::new(opts.threads.max(1)));
    let mut tasks = tokio::task::JoinSet::new();
    while let Some(line) = leaked.next_line()? {
        let (key, size) = line.split_once('\t').unwrap_or((line.as_str(), "0"));
        let (key, size) = (key.to_string(), size.parse::<u64>().unwrap_or(0));
        let Ok(permit) = limit.clone().acquire_owned().await else {
            break;
        };
        let store = store.clone();
        tasks.spawn(async move {
            let outcome = store.delete(&key).await;
            drop(permit);
            (key, size, outcome)
        });
        while let Some(done) = tasks.try_join_next() {
            record_deletion(done, progress, report);
        }
    }
    while let Some(done) = tasks.join_next().await {
        record_deletion(done, progress, report);
    }
    Ok(())
}

type Deletion = (String, u64, strata_object::Result<()>);

fn record_deletion(
    done: std::result::Result<Deletion, tokio::task::JoinError>,
    progress: &Progress,
    report: &mut GcReport,
) {
    match done {
        Ok((_, size, Ok(()))) => {
            report.deleted += 1;
            progress.add(1, size);
        }
        Ok((key, _, Err(e))) => {
            tracing::warn!("deleting leaked object {key}: {e}");
            report.delete_failures += 1;
        }
        Err(e) => {
            tracing::warn!("deletion task failed: {e}");
            report.delete_failures += 1;
        }
    }
}

fn unix_now() -> i64 {
    strata_meta::now_ns() / 1_000_000_000
}
