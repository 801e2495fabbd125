//! `strata warmup` through `.control`: find the blocks holding the files (or byte ranges
//! of them) at or below a path that the caller may read, then warm, check or evict each
//! in the cache that owns it — the owner's in a cache group, else this client's
//! (`strata_chunk`'s warm calls). Blocks shared by several files (clones, hard links)
//! count once. A block that fails is counted and the run goes on.

use std::collections::HashSet;

use futures::StreamExt;
use strata_chunk::ChunkStore;
use strata_meta::{MAY_EXEC, MAY_READ};
use strata_types::{CHUNK_SIZE, FileType, Ino};

use crate::Vfs;
use crate::control::Job;
use crate::control_ops::{Failure, meta_failure};
use crate::control_wire::{ControlResult, WarmAction, WarmReport, WarmSpec};
use crate::maintenance::Progress;

impl Vfs {
    pub(crate) async fn control_warmup(
        &self,
        job: &Job<'_>,
        top: Ino,
        spec: &WarmSpec,
    ) -> Result<ControlResult, Failure> {
        job.progress.stage("listing files", 0);
        let (files, skipped_files) = self.files_below(job, top, MAY_READ).await?;
        let mut seen = HashSet::new();
        let mut blocks = Vec::new();
        for (ino, length) in &files {
            job.check()?;
            for (index, slices) in self.chunk_lists(*ino, *length).await? {
                for (off, end) in chunk_spans(&spec.ranges, *length, index) {
                    for block in self.chunks.blocks_of(&slices, off, end) {
                        if seen.insert(block.0.clone()) {
                            blocks.push(block);
                        }
                    }
                }
            }
        }
        let mut report = WarmReport {
            files: u64::try_from(files.len()).unwrap_or(u64::MAX),
            skipped_files,
            blocks: u64::try_from(blocks.len()).unwrap_or(u64::MAX),
            ..WarmReport::default()
        };
        if spec.background {
            report.bytes = blocks.iter().map(|(_, len)| to_u64(*len)).sum();
            report.background = true;
            let (chunks, how) = (self.chunks.clone(), How::of(spec));
            tokio::spawn(async move {
                let progress = Progress::default();
                let done = handle_blocks(&chunks, blocks, how, &progress, || false).await;
                tracing::info!(
                    "background warmup ({:?}) finished: {} blocks, {} failed",
                    how.action,
                    done.blocks,
                    done.failed
                );
            });
            return Ok(ControlResult::Warmed(report));
        }
        job.progress.stage(stage_name(spec.action), report.blocks);
        let stopped = || job.cancel.is_cancelled();
        let done = handle_blocks(&self.chunks, blocks, How::of(spec), job.progress, stopped).await;
        job.check()?;
        report.bytes = done.bytes;
        report.cached_bytes = done.cached_bytes;
        report.failed = done.failed;
        Ok(ControlResult::Warmed(report))
    }

    /// Regular files at or below `top` (with their lengths) that the caller may access
    /// with `need`, through directories it may list; and how many it may not.
    pub(crate) async fn files_below(
        &self,
        job: &Job<'_>,
        top: Ino,
        need: u32,
    ) -> Result<(Vec<(Ino, u64)>, u64), Failure> {
        let mut candidates = Vec::new();
        let mut dirs = Vec::new();
        let top_attr = self.meta.getattr(top).await.map_err(meta_failure)?;
        match top_attr.kind {
            FileType::Directory => dirs.push(top),
            FileType::Regular => candidates.push((top, top_attr.length)),
            _ => {}
        }
        while let Some(dir) = dirs.pop() {
            job.check()?;
            self.meta
                .access(job.ctx, dir, MAY_READ | MAY_EXEC)
                .await
                .map_err(meta_failure)?;
            let mut pages = self.meta.entry_pages(dir, true);
            while let Some(page) = pages.next(&self.meta).await.map_err(meta_failure)? {
                for e in page {
                    match (e.kind, e.attr) {
                        (FileType::Directory, _) => dirs.push(e.ino),
                        (FileType::Regular, Some(a)) => candidates.push((e.ino, a.length)),
                        _ => {}
                    }
                }
            }
        }
        let (mut files, mut skipped) = (Vec::new(), 0);
        for (ino, length) in candidates {
            if self.meta.access(job.ctx, ino, need).await.is_err() {
                skipped += 1;
                continue;
            }
            job.progress.add(1, 0);
            files.push((ino, length));
        }
        Ok((files, skipped))
    }
}

fn stage_name(action: WarmAction) -> &'static str {
    match action {
        WarmAction::Warm => "warming blocks",
        WarmAction::Check => "checking blocks",
        WarmAction::Evict => "evicting blocks",
    }
}

fn to_u64(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// The spans `[off, end)` of chunk `index` that the ranges cover in a file of `length`
/// bytes (the whole chunk's part of the file when there are no ranges).
fn chunk_spans(ranges: &[(u64, u64)], length: u64, index: u32) -> Vec<(u32, u32)> {
    let start = u64::from(index) * CHUNK_SIZE;
    let stop = (start + CHUNK_SIZE).min(length);
    let whole = [(0u64, 0u64)];
    let ranges = if ranges.is_empty() {
        &whole[..]
    } else {
        ranges
    };
    ranges
        .iter()
        .filter_map(|&(off, len)| {
            let end = if len == 0 {
                length
            } else {
                off.saturating_add(len).min(length)
            };
            let (a, b) = (off.max(start), end.min(stop));
            (a < b).then(|| {
                let local = |x: u64| u32::try_from(x - start).unwrap_or(u32::MAX);
                (local(a), local(b))
            })
        })
        .collect()
}

/// Totals of handling blocks.
#[derive(Debug, Default)]
struct Handled {
    blocks: u64,
    bytes: u64,
    cached_bytes: u64,
    failed: u64,
}

/// How to handle each block.
#[derive(Clone, Copy, Debug)]
struct How {
    action: WarmAction,
    threads: usize,
    low_priority: bool,
}

impl How {
    fn of(spec: &WarmSpec) -> How {
        How {
            action: spec.action,
            threads: spec.threads,
            low_priority: spec.low_priority,
        }
    }
}

async fn handle_blocks(
    chunks: &ChunkStore,
    blocks: Vec<(String, usize)>,
    how: How,
    progress: &Progress,
    stopped: impl Fn() -> bool,
) -> Handled {
    let action = how.action;
    let mut results = futures::stream::iter(blocks)
        .take_while(|_| std::future::ready(!stopped()))
        .map(|(key, len)| async move {
            if how.low_priority {
                chunks.yield_to_reads().await;
            }
            let outcome = match action {
                WarmAction::Warm => chunks.warm_block(&key, len).await.map(|()| 0),
                WarmAction::Check => Ok(chunks.cached_block_bytes(&key, len).await),
                WarmAction::Evict => chunks.evict_block(&key, len).await.map(|()| 0),
            };
            if let Err(e) = &outcome {
                tracing::warn!("warmup ({action:?}) of {key}: {e}");
            }
            (len, outcome)
        })
        .buffer_unordered(how.threads.clamp(1, 256));
    let mut done = Handled::default();
    while let Some((len, outcome)) = results.next().await {
        done.blocks += 1;
        done.bytes += to_u64(len);
        match outcome {
            Ok(cached) => done.cached_bytes += cached.min(to_u64(len)),
            Err(_) => done.failed += 1,
        }
        progress.add(1, to_u64(len));
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_map_onto_chunks() {
        let mib = 1u64 << 20;
        let len = 130 * mib; // chunks 0, 1 and 2 (2 MiB)
        assert_eq!(chunk_spans(&[], len, 0), vec![(0, 64 << 20)]);
        assert_eq!(chunk_spans(&[], len, 2), vec![(0, 2 << 20)]);
        let r = [(60 * mib, 8 * mib)];
        assert_eq!(chunk_spans(&r, len, 0), vec![(60 << 20, 64 << 20)]);
        assert_eq!(chunk_spans(&r, len, 1), vec![(0, 4 << 20)]);
        assert!(chunk_spans(&r, len, 2).is_empty());
        // Length 0 is "to the end"; ranges beyond the end are empty.
        assert_eq!(
            chunk_spans(&[(129 * mib, 0)], len, 2),
            vec![(1 << 20, 2 << 20)]
        );
        assert!(chunk_spans(&[(200 * mib, 5)], len, 2).is_empty());
    }
}
