//! Writing a binary dump (dump v2): the volume's records copied as they are in the
//! engine, read by several scans at once — the inode key range split into shards by
//! inode number, each other kind of record one range — each page of a scan becoming one
//! compressed frame, frames in key order (`order.rs`). Sessions, locks and the deletion
//! queues are left out, and so are inodes kept alive only by a session's open file (as a
//! tree walk would): a loaded dump is the volume as its namespace stands. Every scan
//! reads one moment of the engine where the engine can hold one (SQLite, PostgreSQL,
//! etcd: [`FrozenView`]), so the dump is one state of the volume while clients go on
//! writing; on Redis each page is read as it stands. Counters are read last, so the id
//! counters are past every id the dump holds either way.

use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use strata_types::Ino;

use super::frame::{self, FrameKind};
use super::order::RangeOrder;
use super::{BinaryHeader, DUMP_BIN_VERSION, Tally};
use crate::codec;
use crate::error::{MetaError, Result};
use crate::keys;
use crate::kv::{FrozenView, Key, Value};
use crate::meta::scan::after;
use crate::meta::{DumpStats, Meta, NEXT_INODE};

/// Rows per scan (and so per frame).
const PAGE: usize = 4096;
/// Inode shards per thread: enough that one large directory's shard does not leave the
/// other threads idle for long.
const SHARDS_PER_THREAD: u64 = 8;
/// Inode numbers per shard at most: a shard read ahead of its turn waits in memory
/// (`order.rs`), so shards stay small however large the volume.
const MAX_SHARD_INODES: u64 = 8192;
/// Record kinds copied beside the inodes, one range each (counters are read last).
/// Settings (`C`) are not among them: the format record is the header, and the cache
/// group's secret is a secret (a loaded volume makes a new one).
const OTHER_RANGES: [(&[u8], &[u8]); 7] = [
    (b"G", b"H"), // tier policies
    (b"H", b"I"), // compaction hints
    (b"K", b"L"), // shared slices' reference counts
    (b"P", b"Q"), // where slices are on a volume with several stores
    (b"Q", b"R"), // quotas
    (b"R", b"S"), // access control lists
    (b"U", b"V"), // directory usage
];

/// How to write a binary dump.
#[derive(Clone, Debug)]
pub struct BinaryDumpOptions {
    /// Scans at once.
    pub threads: usize,
    /// Keep the object store's secret key in the header.
    pub keep_secret_key: bool,
    /// Read one moment of the engine where it can hold one (the dump is one state of the
    /// volume); false: each page as it stands (no snapshot held: on PostgreSQL, writers
    /// then do not pay for the row versions a held snapshot keeps).
    pub one_moment: bool,
}

/// Where the dump's pages come from: one moment of the engine when it can hold one (the
/// dump is then one state of the volume, whatever clients write meanwhile), else each
/// page as it stands when read (consistent page by page: Redis).
#[derive(Clone)]
enum Source {
    Frozen(Arc<dyn FrozenView>),
    Pages,
}

/// One key range being read page by page.
struct Cursor {
    start: Key,
    end: Key,
}

impl Meta {
    /// Write a binary dump of the whole volume to `out`; `progress` is told the running
    /// count of inodes.
    pub async fn dump_binary(
        &self,
        out: &mut (dyn Write + Send),
        opts: &BinaryDumpOptions,
        progress: &mut (dyn FnMut(u64) + Send),
    ) -> Result<DumpStats> {
        let view = if opts.one_moment {
            self.engine.frozen_view(opts.threads).await?
        } else {
            None
        };
        let source = match view {
            Some(view) => Source::Frozen(view),
            None => Source::Pages,
        };
        frame::write_magic(out)?;
        write_frame(out, FrameKind::Header, &self.binary_header(opts)?)?;
        let kept_alive = self.kept_alive_inodes(&source).await?;
        let mut writer = FrameWriter {
            out,
            tally: Tally::default(),
            frames: 0,
            kept_alive,
        };
        let mut ranges = self.inode_shards(&source, opts.threads).await?;
        ranges.extend(OTHER_RANGES.iter().map(|(s, e)| Cursor {
            start: s.to_vec(),
            end: e.to_vec(),
        }));
        self.copy_ranges(&source, ranges, opts.threads, &mut writer, progress)
            .await?;
        let counters = vec![Cursor {
            start: b"N".to_vec(),
            end: b"O".to_vec(),
        }];
        self.copy_ranges(&source, counters, 1, &mut writer, progress)
            .await?;
        let end = writer.tally.end(writer.frames);
        let stats = writer.tally.stats();
        write_frame(writer.out, FrameKind::End, &end)?;
        Ok(stats)
    }

    fn binary_header(&self, opts: &BinaryDumpOptions) -> Result<BinaryHeader> {
        Ok(BinaryHeader {
            strata_dump: DUMP_BIN_VERSION,
            format: self.dumped_format(opts.keep_secret_key)?,
        })
    }

    /// Inodes that only an open file keeps (unlinked, sustained by a session).
    async fn kept_alive_inodes(&self, source: &Source) -> Result<HashSet<u64>> {
        let mut inodes = HashSet::new();
        let mut cursor = Cursor {
            start: b"SS".to_vec(),
            end: b"ST".to_vec(),
        };
        loop {
            let rows = self.scan_page(source, &cursor).await?;
            for (key, _) in &rows {
                let ino = keys::be_u64(key, 10)
                    .ok_or_else(|| MetaError::corrupt(key, "short sustained-inode key"))?;
                inodes.insert(ino);
            }
            if !advance(&mut cursor, &rows) {
                return Ok(inodes);
            }
        }
    }

    /// The inode key range in about `threads * SHARDS_PER_THREAD` shards of equal spans
    /// of inode numbers (more, of `MAX_SHARD_INODES`, in a large volume); the last one
    /// reaches the end of the range (reserved inodes).
    async fn inode_shards(&self, source: &Source, threads: usize) -> Result<Vec<Cursor>> {
        let key = keys::counter(NEXT_INODE);
        let counter = Cursor {
            start: key.clone(),
            end: after(&key),
        };
        let rows = self.scan_page(source, &counter).await?;
        let value = rows.into_iter().next().map(|(_, v)| v);
        let next = codec::decode_counter(&key, value.as_deref())?;
        let next = u64::try_from(next).unwrap_or(0).max(2);
        let shards = u64::try_from(threads.max(1))
            .unwrap_or(1)
            .saturating_mul(SHARDS_PER_THREAD);
        let span = next.div_ceil(shards).clamp(1, MAX_SHARD_INODES);
        let mut cursors = Vec::new();
        let mut lo = 0u64;
        while lo < next {
            let hi = lo.saturating_add(span);
            cursors.push(Cursor {
                start: keys::inode_prefix(Ino(lo)),
                end: if hi >= next {
                    b"B".to_vec()
                } else {
                    keys::inode_prefix(Ino(hi))
                },
            });
            lo = hi;
        }
        Ok(cursors)
    }

    /// Copy every range into frames, `threads` scans at once.
    async fn copy_ranges(
        &self,
        source: &Source,
        ranges: Vec<Cursor>,
        threads: usize,
        writer: &mut FrameWriter<'_>,
        progress: &mut (dyn FnMut(u64) + Send),
    ) -> Result<()> {
        let ranges_count = ranges.len();
        let mut order = RangeOrder::new(ranges_count);
        let mut not_started = ranges.into_iter().enumerate();
        // Ranges with more to read, not being read: their pages would wait too long.
        let mut paused: BTreeMap<usize, Cursor> = BTreeMap::new();
        let mut reading = FuturesUnordered::new();
        let page = |range: usize, cursor: Cursor| async move {
            let rows = self.scan_page(source, &cursor).await;
            (range, cursor, rows)
        };
        let threads = threads.max(1);
        for (range, cursor) in not_started.by_ref().take(threads) {
            reading.push(page(range, cursor));
        }
        while let Some((range, mut cursor, rows)) = reading.next().await {
            let rows = rows?;
            let more = advance(&mut cursor, &rows);
            order.arrived(range, rows, !more, &mut |rows| writer.write_rows(rows))?;
            progress(writer.tally.inodes);
            if more {
                paused.insert(range, cursor);
            }
            // The head first (it is always read), then others while their pages may wait.
            let resumable: Vec<usize> = paused
                .keys()
                .copied()
                .filter(|r| order.may_read(*r))
                .take(threads - reading.len())
                .collect();
            for range in resumable {
                if let Some(cursor) = paused.remove(&range) {
                    reading.push(page(range, cursor));
                }
            }
            while reading.len() < threads && order.has_room() {
                let Some((range, cursor)) = not_started.next() else {
                    break;
                };
                reading.push(page(range, cursor));
            }
        }
        if !order.all_written() {
            return Err(MetaError::Invalid(
                "binary dump: a range was left unread (a bug)".into(),
            ));
        }
        Ok(())
    }

    /// The next page of `cursor`'s range, read without the client's cache.
    async fn scan_page(&self, source: &Source, cursor: &Cursor) -> Result<Vec<(Key, Value)>> {
        if let Source::Frozen(view) = source {
            return Ok(view.scan(&cursor.start, &cursor.end, PAGE).await?);
        }
        self.uncached_txn(|tx| {
            let (start, end) = (cursor.start.clone(), cursor.end.clone());
            Box::pin(async move { Ok(tx.scan(&start, &end, PAGE, false).await?) })
        })
        .await
    }
}

/// Move `cursor` past `rows`; false when the range is done.
fn advance(cursor: &mut Cursor, rows: &[(Key, Value)]) -> bool {
    match rows.last() {
        Some((last, _)) if rows.len() == PAGE => {
            cursor.start = after(last);
            true
        }
        _ => false,
    }
}

/// Where frames go, and what went.
struct FrameWriter<'o> {
    out: &'o mut (dyn Write + Send),
    tally: Tally,
    frames: u64,
    kept_alive: HashSet<u64>,
}

impl FrameWriter<'_> {
    /// One page's rows as one frame (none if every row was left out).
    fn write_rows(&mut self, rows: &[(Key, Value)]) -> Result<()> {
        let mut raw = Vec::with_capacity(rows.len() * 64);
        for (key, value) in rows {
            if self.left_out(key) {
                continue;
            }
            self.tally.count(key);
            frame::push_pair(&mut raw, key, value)?;
        }
        if raw.is_empty() {
            return Ok(());
        }
        let sealed = frame::seal(FrameKind::Pairs, &raw)?;
        self.out
            .write_all(&sealed)
            .map_err(|e| MetaError::Invalid(format!("writing the dump: {e}")))?;
        self.frames += 1;
        Ok(())
    }

    fn left_out(&self, key: &[u8]) -> bool {
        key.first() == Some(&b'A')
            && keys::be_u64(key, 1).is_some_and(|ino| self.kept_alive.contains(&ino))
    }
}

fn write_frame(
    out: &mut (dyn Write + Send),
    kind: FrameKind,
    body: &impl serde::Serialize,
) -> Result<()> {
    let raw =
        serde_json::to_vec(body).map_err(|e| MetaError::Invalid(format!("dump encoding: {e}")))?;
    out.write_all(&frame::seal(kind, &raw)?)
        .map_err(|e| MetaError::Invalid(format!("writing the dump: {e}")))
}
