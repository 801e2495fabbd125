//! `fsck`: is the volume whole? Every block that a slice of a file references must exist
//! in the bucket (with the size its name promises, when blocks are stored uncompressed),
//! and the namespace counters must add up (`Meta::check_namespace`), and every inode
//! record must be reachable by a name, the trash or an open file: the walk counts the
//! inodes it reaches and the slice scan counts the records; only when the two differ
//! are the records without a name looked for ([`super::orphans`]).
//! Broken files are named by path. `repair` fixes counters only; no user data is ever
//! deleted.
//!
//! Metadata is scanned before the bucket is listed, so a block referenced by the scan was
//! uploaded before it (upload first, commit second) and is in the listing unless it is
//! truly gone or its file was deleted meanwhile — those files are re-checked and dropped
//! from the report.

use std::collections::BTreeMap;
use std::sync::Arc;

use strata_meta::{Meta, NamespaceReport};
use strata_object::ObjectStore;
use strata_object::adopted::ForeignBlocks;
use strata_object::sealed::Unit;
use strata_types::Ino;

use super::extsort::SortedLines;
use super::orphans;
use super::{Progress, Result, SortSpace, for_each_record, parse_block_key, sorted_listing};

/// What `fsck` does.
#[derive(Clone, Debug)]
pub struct FsckOptions {
    /// Fix namespace counters (usage, link counts).
    pub repair: bool,
    /// Where the external sorts spill, and their memory.
    pub sort: SortSpace,
    pub block_size: u32,
    /// Blocks are stored uncompressed, so their exact size is known.
    pub exact_sizes: bool,
    /// Blocks are sealed in segments of this unit (an encrypted volume: object v3 sizes).
    pub sealed: Option<Unit>,
    /// Blocks adopted from another file system (an imported volume), sized their way.
    pub foreign: Option<ForeignBlocks>,
    /// `--verify`: read every referenced block through this store (the volume's full
    /// stack: checksums verified, sealed blocks authenticated), this many at once.
    pub verify: Option<(Arc<dyn ObjectStore>, usize)>,
    /// With `verify` and `foreign`: record the checksums of every foreign block read
    /// (`adopted::sums`), beside it in the bucket.
    pub record_checksums: bool,
}

/// A file with blocks missing or of the wrong size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokenFile {
    pub ino: Ino,
    /// `None` when the file has no name any more (deleted, still open somewhere).
    pub path: Option<String>,
    pub missing_blocks: u64,
    pub wrong_size_blocks: u64,
    /// Blocks there that fail to read whole (`--verify`): corrupt, tampered, wrong key.
    pub unreadable_blocks: u64,
    /// One of the bad objects, for the report.
    pub example: String,
}

/// What `fsck` found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FsckReport {
    pub namespace: NamespaceReport,
    pub blocks_checked: u64,
    pub objects_listed: u64,
    /// Blocks read whole and verified (`--verify`).
    pub blocks_verified: u64,
    /// Foreign blocks whose checksums were recorded, and those whose recording failed.
    pub checksums_recorded: u64,
    pub checksums_failed: u64,
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
    let mut reached = 0u64;
    let namespace = meta
        .check_namespace_with(
            opts.repair,
            |files| {
                progress
                    .done
                    .store(files, std::sync::atomic::Ordering::Relaxed)
            },
            |_| reached += 1,
        )
        .await?;
    let mut report = FsckReport {
        namespace,
        ..FsckReport::default()
    };
    let mut records = 0u64;
    let references = block_references(meta, opts, progress, &mut report, &mut records).await?;
    if records != reached {
        // Some record has no name (or the volume changed meanwhile): find which.
        progress.stage("finding inode records without a name", 0);
        let orphans = orphans::find(meta, &opts.sort).await?;
        report.namespace.problems.extend(orphans);
    }
    let listing = list_blocks(store, opts, progress, &mut report).await?;
    let (mut broken, present) = find_broken(references, listing, opts, progress, &report)?;
    if let (Some((data, threads)), Some(present)) = (&opts.verify, present) {
        let record = match (&opts.foreign, opts.record_checksums) {
            (Some(foreign), true) => Some((foreign, store)),
            _ => None,
        };
        let reading = Reading {
            data,
            threads: *threads,
            record,
        };
        verify_blocks(&reading, present, progress, &mut report, &mut broken).await?;
    }
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

/// `key\tino` for every block of every slice of every file, sorted; the inode records
/// met on the way are counted in `records`.
async fn block_references(
    meta: &Meta,
    opts: &FsckOptions,
    progress: &Progress,
    report: &mut FsckReport,
    records: &mut u64,
) -> Result<SortedLines> {
    progress.stage("scanning slices", 0);
    let mut sorter = opts.sort.sorter()?;
    for_each_record(
        meta,
        opts.block_size,
        progress,
        |ino, key| {
            report.blocks_checked += 1;
            Ok(sorter.push(format!("{key}\t{ino}"))?)
        },
        |_| {
            *records += 1;
            Ok(())
        },
    )
    .await?;
    Ok(sorter.finish()?)
}

/// `key\tsize` of every block object, sorted.
async fn list_blocks(
    store: &Arc<dyn ObjectStore>,
    opts: &FsckOptions,
    progress: &Progress,
    report: &mut FsckReport,
) -> Result<SortedLines> {
    progress.stage("listing objects", 0);
    sorted_listing(store, "chunks/", &opts.sort, progress, |info| {
        report.objects_listed += 1;
        parse_block_key(&info.key).map(|_| format!("{}\t{}", info.key, info.size))
    })
    .await
}

/// Walk both sorted streams; files whose references find no object (or a wrong size),
/// and with `--verify` the references whose object is there (`key\tino`), to read.
fn find_broken(
    mut references: SortedLines,
    mut listing: SortedLines,
    opts: &FsckOptions,
    progress: &Progress,
    report: &FsckReport,
) -> Result<(BTreeMap<Ino, BrokenFile>, Option<SortedLines>)> {
    progress.stage("comparing", report.blocks_checked);
    let mut broken: BTreeMap<Ino, BrokenFile> = BTreeMap::new();
    let mut present = match opts.verify {
        Some(_) => Some(opts.sort.sorter()?),
        None => None,
    };
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
            Some(size) if size_is_wrong(opts, key, size, expected) => (0, 1),
            Some(_) => {
                if let Some(p) = present.as_mut() {
                    p.push(line.clone())?;
                }
                continue;
            }
        };
        let file = broken_entry(&mut broken, ino, key);
        file.missing_blocks += missing;
        file.wrong_size_blocks += wrong_size;
    }
    let present = match present {
        Some(p) => Some(p.finish()?),
        None => None,
    };
    Ok((broken, present))
}

fn broken_entry<'a>(
    broken: &'a mut BTreeMap<Ino, BrokenFile>,
    ino: Ino,
    key: &str,
) -> &'a mut BrokenFile {
    broken.entry(ino).or_insert_with(|| BrokenFile {
        ino,
        path: None,
        missing_blocks: 0,
        wrong_size_blocks: 0,
        unreadable_blocks: 0,
        example: key.to_string(),
    })
}

/// Read each block in `present` (`key\tino` lines) whole through `data`, `threads` at
/// once; a block that fails (after the store's retries) marks its file broken.
/// How `verify_blocks` reads: through `data`, `threads` at once, recording the checksums
/// of foreign blocks in the raw store when asked.
struct Reading<'a> {
    data: &'a Arc<dyn ObjectStore>,
    threads: usize,
    record: Option<(&'a ForeignBlocks, &'a Arc<dyn ObjectStore>)>,
}

impl Reading<'_> {
    /// Read block `key`; its length, or `None` when it cannot be read (and whether its
    /// checksums were recorded, when asked to).
    async fn read(&self, key: &str) -> (Option<u64>, Option<bool>) {
        let bytes = match self.data.get(key, None).await {
            Ok(bytes) => bytes,
            Err(e) => {
                tracing::warn!("fsck --verify: {key}: {e}");
                return (None, None);
            }
        };
        let n = u64::try_from(bytes.len()).unwrap_or(0);
        let Some((_, raw)) = self.record.filter(|(f, _)| f.block_of(key).is_some()) else {
            return (Some(n), None);
        };
        let sums = strata_object::adopted::sums::encode(&bytes);
        match raw
            .put(&strata_object::adopted::sums::sums_key(key), sums)
            .await
        {
            Ok(()) => (Some(n), Some(true)),
            Err(e) => {
                tracing::warn!("fsck --record-checksums: {key}: {e}");
                (Some(n), Some(false))
            }
        }
    }
}

async fn verify_blocks(
    reading: &Reading<'_>,
    mut present: SortedLines,
    progress: &Progress,
    report: &mut FsckReport,
    broken: &mut BTreeMap<Ino, BrokenFile>,
) -> Result<()> {
    use futures::StreamExt;
    progress.stage("reading and verifying blocks", report.blocks_checked);
    // Lines are sorted by key: a block shared by several files (clones) is read once
    // and counted against each of them.
    let mut batch: Vec<(String, Vec<Ino>)> = Vec::with_capacity(1024);
    loop {
        let line = present.next_line()?;
        if let Some((key, ino)) = line.as_deref().and_then(|l| l.split_once('\t')) {
            let ino = Ino(ino.parse().unwrap_or(0));
            match batch.last_mut() {
                Some((last, inos)) if last.as_str() == key => inos.push(ino),
                _ => batch.push((key.to_string(), vec![ino])),
            }
        }
        if batch.len() < 1024 && line.is_some() {
            continue;
        }
        // The last key may have more lines to come: it waits for the next batch.
        let keep = match line {
            Some(_) => batch.pop(),
            None => None,
        };
        let results: Vec<(String, Vec<Ino>, Option<u64>)> = futures::stream::iter(batch.drain(..))
            .map(|(key, inos)| async move {
                let (read, recorded) = reading.read(&key).await;
                (key, inos, read, recorded)
            })
            .buffer_unordered(reading.threads.max(1))
            .map(|(key, inos, read, recorded)| {
                match recorded {
                    Some(true) => report.checksums_recorded += 1,
                    Some(false) => report.checksums_failed += 1,
                    None => {}
                }
                (key, inos, read)
            })
            .collect()
            .await;
        for (key, inos, read) in results {
            progress.add(1, read.unwrap_or(0));
            report.blocks_verified += 1;
            if read.is_none() {
                for ino in inos {
                    broken_entry(broken, ino, &key).unreadable_blocks += 1;
                }
            }
        }
        batch.extend(keep);
        if line.is_none() {
            break;
        }
    }
    Ok(())
}

/// Whether the object of block `key` cannot hold its `payload` bytes in `size` stored
/// bytes: a raw foreign block is its payload, a compressed or encrypted one may have any
/// size.
fn size_is_wrong(opts: &FsckOptions, key: &str, size: u64, payload: u64) -> bool {
    if let Some(foreign) = opts.foreign.as_ref().filter(|f| f.block_of(key).is_some()) {
        return foreign.stored_as_is() && size != payload;
    }
    opts.exact_sizes && !stored_size_fits(size, payload, opts.sealed)
}

/// Whether a stored object of `size` bytes holds a block of `payload` bytes: sealed
/// (object v3) on an encrypted volume, else either checked format (v2 with segment
/// trailers, or v1 written by older versions).
fn stored_size_fits(size: u64, payload: u64, sealed: Option<Unit>) -> bool {
    if let Some(unit) = sealed {
        return size == unit.stored_size(payload);
    }
    size == strata_object::checksum::stored_size(payload)
        || size == strata_object::checksum::stored_size_v1(payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_object_formats_fit_their_payload() {
        let payload = 4 << 20;
        assert!(stored_size_fits(
            strata_object::checksum::stored_size(payload),
            payload,
            None
        ));
        assert!(stored_size_fits(
            strata_object::checksum::stored_size_v1(payload),
            payload,
            None
        ));
        assert!(!stored_size_fits(payload, payload, None));
        for unit in [Unit::LARGE, Unit::SMALL] {
            let sealed = unit.stored_size(payload);
            assert!(stored_size_fits(sealed, payload, Some(unit)));
            assert!(!stored_size_fits(sealed, payload, None));
        }
        assert!(!stored_size_fits(
            Unit::LARGE.stored_size(payload),
            payload,
            Some(Unit::SMALL)
        ));
        assert!(!stored_size_fits(
            strata_object::checksum::stored_size(payload),
            payload,
            Some(Unit::LARGE)
        ));
        assert!(!stored_size_fits(
            strata_object::checksum::stored_size(payload) - 1,
            payload,
            None
        ));
    }
}
