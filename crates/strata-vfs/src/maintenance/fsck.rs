//! `fsck`: is the volume whole? Every block that a slice of a file references must exist
//! in the bucket (with the size its name promises, when blocks are stored uncompressed),
//! and the namespace counters must add up (`Meta::check_namespace`). Broken files are
//! named by path. `repair` fixes counters only; no user data is ever deleted.
//!
//! Metadata is scanned before the bucket is listed, so a block referenced by the scan was
//! uploaded before it (upload first, commit second) and is in the listing unless it is
//! truly gone or its file was deleted meanwhile — those files are re-checked and dropped
//! from the report.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use strata_chunk::{block_key, block_sizes};
use strata_meta::{Meta, NamespaceReport, ScanCursor};
use strata_object::ObjectStore;
use strata_types::Ino;

use super::extsort::{ExternalSorter, SortedLines};
use super::{MaintenanceError, Progress, Result, parse_block_key};

/// Bytes every stored block carries beyond its payload (the integrity header, object v1).
const BLOCK_HEADER: u64 = 12;
const SCAN_PAGE: usize = 2000;

/// What `fsck` does.
#[derive(Clone, Debug)]
pub struct FsckOptions {
    /// Fix namespace counters (usage, link counts).
    pub repair: bool,
    pub sort_dir: PathBuf,
    pub sort_budget: usize,
    pub block_size: u32,
    /// Blocks are stored uncompressed, so their exact size is known.
    pub exact_sizes: bool,
}

/// A file with blocks missing or of the wrong size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokenFile {
    pub ino: Ino,
    /// `None` when the file has no name any more (deleted, still open somewhere).
    pub path: Option<String>,
    pub missing_blocks: u64,
    pub wrong_size_blocks: u64,
    /// One of the bad objects, for the report.
    pub example: String,
}

/// What `fsck` found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FsckReport {
    pub namespace: NamespaceReport,
    pub blocks_checked: u64,
    pub objects_listed: u64,
    pub broken_files: Vec<BrokenFile>,
}

impl FsckReport {
    /// Nothing broken, nothing left unrepaired.
    pub fn is_clean(&self) -> bool {
        self.broken_files.is_empty() && self.namespace.problems.iter().all(|p| p.repaired)
    }
}

/// Check the volume of `meta` whose objects are in `store`.
pub async fn check_volume(
    meta: &Meta,
    store: &Arc<dyn ObjectStore>,
    opts: &FsckOptions,
    progress: &Progress,
) -> Result<FsckReport> {
    progress.stage("checking namespace", 0);
    let namespace = meta
        .check_namespace(opts.repair, |files| {
            progress
                .done
                .store(files, std::sync::atomic::Ordering::Relaxed)
        })
        .await?;
    let mut report = FsckReport {
        namespace,
        ..FsckReport::default()
    };
    let references = block_references(meta, opts, progress, &mut report).await?;
    let listing = list_blocks(store, opts, progress, &mut report).await?;
    let broken = find_broken(references, listing, opts, progress, &report)?;
    progress.stage("naming broken files", broken.len() as u64);
    for (ino, mut file) in broken {
        progress.add(1, 0);
        file.path = meta.path_of(ino).await?;
        if file.path.is_none() && !meta_has_inode(meta, ino).await? {
            continue; // deleted while we looked: its blocks went with it
        }
        report.broken_files.push(file);
    }
    Ok(report)
}

async fn meta_has_inode(meta: &Meta, ino: Ino) -> Result<bool> {
    match meta.getattr(ino).await {
        Ok(_) => Ok(true),
        Err(strata_meta::MetaError::Posix(strata_types::Errno::ENOENT)) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// `key\tino` for every block of every slice of every file, sorted.
async fn block_references(
    meta: &Meta,
    opts: &FsckOptions,
    progress: &Progress,
    report: &mut FsckReport,
) -> Result<SortedLines> {
    progress.stage("scanning slices", 0);
    let mut sorter = ExternalSorter::new(&opts.sort_dir, opts.sort_budget)?;
    let mut cursor: ScanCursor = None;
    loop {
        let (chunks, next) = meta.chunk_page(&cursor, SCAN_PAGE).await?;
        for chunk in &chunks {
            let mut seen: Vec<(u64, u32)> = Vec::new();
            for s in chunk.slices.iter().filter(|s| s.id != 0) {
                if seen.contains(&(s.id, s.size)) {
                    continue;
                }
                seen.push((s.id, s.size));
                for (index, len) in block_sizes(s.size, opts.block_size) {
                    sorter.push(format!("{}\t{}", block_key(s.id, index, len), chunk.ino))?;
                    report.blocks_checked += 1;
                }
            }
            progress.add(1, 0);
        }
        cursor = next;
        if cursor.is_none() {
            return Ok(sorter.finish()?);
        }
    }
}

/// `key\tsize` of every block object, sorted.
async fn list_blocks(
    store: &Arc<dyn ObjectStore>,
    opts: &FsckOptions,
    progress: &Progress,
    report: &mut FsckReport,
) -> Result<SortedLines> {
    progress.stage("listing objects", 0);
    let mut sorter = ExternalSorter::new(&opts.sort_dir, opts.sort_budget)?;
    let mut spill_error = None;
    store
        .scan_all("chunks/", &mut |info| {
            progress.add(1, info.size);
            report.objects_listed += 1;
            if parse_block_key(&info.key).is_some()
                && let Err(e) = sorter.push(format!("{}\t{}", info.key, info.size))
            {
                spill_error = Some(e);
                return Err(strata_object::ObjectError::Other("spill failed".into()));
            }
            Ok(())
        })
        .await
        .map_err(|e| match spill_error.take() {
            Some(io) => MaintenanceError::Io(io),
            None => MaintenanceError::Object(e),
        })?;
    Ok(sorter.finish()?)
}

/// Walk both sorted streams; files whose references find no object (or a wrong size).
fn find_broken(
    mut references: SortedLines,
    mut listing: SortedLines,
    opts: &FsckOptions,
    progress: &Progress,
    report: &FsckReport,
) -> Result<BTreeMap<Ino, BrokenFile>> {
    progress.stage("comparing", report.blocks_checked);
    let mut broken: BTreeMap<Ino, BrokenFile> = BTreeMap::new();
    let mut object = listing.next_line()?;
    while let Some(line) = references.next_line()? {
        progress.add(1, 0);
        let Some((key, ino)) = line.split_once('\t') else {
            continue;
        };
        let ino = Ino(ino.parse().unwrap_or(0));
        while object
            .as_deref()
            .is_some_and(|o| o.split_once('\t').is_some_and(|(k, _)| k < key))
        {
            object = listing.next_line()?;
        }
        let found = object
            .as_deref()
            .and_then(|o| o.split_once('\t'))
            .filter(|(k, _)| *k == key)
            .map(|(_, size)| size.parse::<u64>().unwrap_or(0));
        let expected = parse_block_key(key).map_or(0, |(_, _, size)| u64::from(size));
        let (missing, wrong_size) = match found {
            None => (1, 0),
            Some(size) if opts.exact_sizes && size != expected + BLOCK_HEADER => (0, 1),
            Some(_) => continue,
        };
        let file = broken.entry(ino).or_insert_with(|| BrokenFile {
            ino,
            path: None,
            missing_blocks: 0,
            wrong_size_blocks: 0,
            example: key.to_string(),
        });
        file.missing_blocks += missing;
        file.wrong_size_blocks += wrong_size;
    }
    Ok(broken)
}
