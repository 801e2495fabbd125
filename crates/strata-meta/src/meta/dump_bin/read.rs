//! Reading a binary dump (dump v2): loading it into an empty engine (batches written
//! several at once, or through the engine's bulk writer: `load_sink.rs`), every record
//! checked to be of a kind a dump holds; and summarizing it (`strata load FILE --binary
//! --stat`). Usage counters are recomputed from the
//! inodes loaded and the inode counter raised past them; the format record is written
//! last, so until the load completes the engine holds no volume.

use std::collections::{BTreeMap, HashMap};
use std::io::Read;

use strata_types::{FileType, Ino};

use super::frame::{self, FrameKind, FrameReader};
use super::{BinaryEnd, BinaryHeader, DUMP_BIN_VERSION, Tally};
use crate::codec::{self, InodeCore, InodeFields};
use crate::error::{MetaError, Result};
use crate::format::{Format, UNDERSTOOD_VERSION};
use crate::keys;
use crate::kv::{Key, Value};
use crate::meta::load_sink::LoadSink;
use crate::meta::{DumpStats, Meta, NEXT_INODE, TOTAL_INODES, USED_SPACE, space_of};

/// Puts per load transaction.
const BATCH: usize = 2000;

fn invalid(what: impl std::fmt::Display) -> MetaError {
    MetaError::Invalid(format!("binary dump: {what}"))
}

/// The header's format record, checked to be one this client can serve.
fn header_format(raw: &[u8]) -> Result<Format> {
    let header: BinaryHeader =
        serde_json::from_slice(raw).map_err(|e| invalid(format!("header: {e}")))?;
    if header.strata_dump != DUMP_BIN_VERSION {
        return Err(invalid(format!(
            "version {} (this Strata reads version {DUMP_BIN_VERSION})",
            header.strata_dump
        )));
    }
    let format: Format = serde_json::from_value(header.format)
        .map_err(|e| invalid(format!("format record: {e}")))?;
    if format.meta_version > UNDERSTOOD_VERSION {
        return Err(invalid(format!(
            "written by a newer Strata (metadata version {}; this one serves up to {UNDERSTOOD_VERSION})",
            format.meta_version
        )));
    }
    Ok(format)
}

/// What a key is, for checks and summaries; `None` for kinds a dump never holds.
fn kind_of(key: &[u8]) -> Option<&'static str> {
    let kind = match (key.first()?, key.get(9)) {
        (b'A', Some(b'I')) if key.len() == 10 => "inodes",
        (b'A', Some(b'T')) if key.len() == 10 => "inode fields",
        (b'A', Some(b'D')) if key.len() > 10 => "entries",
        (b'A', Some(b'C')) if key.len() == 14 => "chunks",
        (b'A', Some(b'S')) if key.len() == 10 => "symlink targets",
        (b'A', Some(b'X')) => "extended attributes",
        (b'A', Some(b'P')) if key.len() == 18 => "link parents",
        (b'G', _) if key.len() == 9 => "tier policies",
        (b'H', _) => "compaction hints",
        (b'K', _) => "slice references",
        (b'N', _) => "counters",
        (b'P', _) if key.len() == 9 => "placements",
        (b'Q', _) => "quotas",
        (b'R', _) => "access control lists",
        (b'U', _) => "directory usage",
        _ => return None,
    };
    Some(kind)
}

/// A binary dump read in order: the header when opened, then each pairs frame's records
/// (checked to be of kinds a dump holds, and counted), then the end frame, checked
/// against what came, with nothing after it.
struct DumpFrames<R> {
    reader: FrameReader<R>,
    format: Format,
    tally: Tally,
    frames: u64,
    stored_bytes: u64,
    raw_bytes: u64,
    end: BinaryEnd,
}

impl<R: Read> DumpFrames<R> {
    /// Check the magic and read the header.
    fn open(input: R) -> Result<DumpFrames<R>> {
        let mut reader = FrameReader::new(input)?;
        let first = reader
            .next_frame()?
            .ok_or_else(|| invalid("the file is empty after its magic"))?;
        if first.kind != FrameKind::Header {
            return Err(invalid("the first frame is not the header"));
        }
        let raw = first.open()?;
        Ok(DumpFrames {
            format: header_format(&raw)?,
            stored_bytes: first.size(),
            raw_bytes: u64::try_from(raw.len()).unwrap_or(u64::MAX),
            reader,
            tally: Tally::default(),
            frames: 0,
            end: BinaryEnd::default(),
        })
    }

    /// Give `each` the kind, key and value of every record of the next pairs frame; false
    /// once the end frame has been read and checked.
    fn next_pairs(
        &mut self,
        mut each: impl FnMut(&'static str, &[u8], &[u8]) -> Result<()>,
    ) -> Result<bool> {
        let stored = self
            .reader
            .next_frame()?
            .ok_or_else(|| invalid("it ends without its end frame (cut off?)"))?;
        let raw = stored.open()?;
        self.stored_bytes += stored.size();
        self.raw_bytes += u64::try_from(raw.len()).unwrap_or(u64::MAX);
        match stored.kind {
            FrameKind::Header => Err(invalid(format!(
                "a second header at byte {}",
                stored.offset
            ))),
            FrameKind::End => {
                self.end =
                    serde_json::from_slice(&raw).map_err(|e| invalid(format!("end frame: {e}")))?;
                let found = self.tally.end(self.frames);
                if self.end != found {
                    return Err(invalid(format!(
                        "the end frame counts {:?} but the dump holds {found:?}",
                        self.end
                    )));
                }
                if self.reader.next_frame()?.is_some() {
                    return Err(invalid("frames after the end frame"));
                }
                Ok(false)
            }
            FrameKind::Pairs => {
                self.frames += 1;
                for (key, value) in frame::pairs(&raw)? {
                    let kind = kind_of(key).ok_or_else(|| unexpected(key))?;
                    self.tally.count(key);
                    each(kind, key, value)?;
                }
                Ok(true)
            }
        }
    }
}

fn unexpected(key: &[u8]) -> MetaError {
    invalid(format!(
        "a record of a kind no dump holds: {:?}",
        String::from_utf8_lossy(&key[..key.len().min(12)])
    ))
}

/// What a binary dump holds, read without an engine.
#[derive(Clone, Debug, Default)]
pub struct BinaryDumpSummary {
    pub volume: String,
    pub meta_version: u32,
    pub frames: u64,
    /// Bytes in the file, and before compression.
    pub stored_bytes: u64,
    pub raw_bytes: u64,
    /// Records by kind.
    pub records: BTreeMap<&'static str, u64>,
    /// Records out of key order (counters, which come last, not counted): 0 in dumps
    /// written since session 36, whose loads into SQLite append instead of seeking.
    pub out_of_order: u64,
    pub end: BinaryEnd,
}

/// Read a whole binary dump and say what it holds; an error if it is damaged, cut off or
/// holds a record of a kind no dump holds.
pub fn binary_dump_summary(input: impl Read) -> Result<BinaryDumpSummary> {
    let mut frames = DumpFrames::open(input)?;
    let mut records = BTreeMap::new();
    let mut last: Key = Vec::new();
    let mut out_of_order = 0;
    while frames.next_pairs(|kind, key, _| {
        *records.entry(kind).or_default() += 1;
        if key.first() != Some(&b'N') {
            if key <= last.as_slice() {
                out_of_order += 1;
            }
            last.clear();
            last.extend_from_slice(key);
        }
        Ok(())
    })? {}
    Ok(BinaryDumpSummary {
        volume: frames.format.name,
        meta_version: frames.format.meta_version,
        frames: frames.frames,
        stored_bytes: frames.stored_bytes,
        raw_bytes: frames.raw_bytes,
        records,
        out_of_order,
        end: frames.end,
    })
}

/// Counters recomputed while loading.
#[derive(Default)]
struct Recount {
    used_space: i64,
    total_inodes: i64,
    max_ino: u64,
    /// Inodes whose core record came and whose fields record has not yet: kind, and
    /// whether it is charged to the volume.
    pending: HashMap<u64, (FileType, bool)>,
    /// Counters as dumped.
    counters: Vec<(Key, Value)>,
}

impl Recount {
    /// Note one record; false for a counter, which is written at the end.
    fn take(&mut self, key: &[u8], value: &[u8]) -> Result<bool> {
        match (key.first(), key.get(9)) {
            (Some(b'A'), Some(b'I')) => {
                let core = InodeCore::decode(key, value)?;
                let ino = keys::be_u64(key, 1).unwrap_or(0);
                // The root, the trash and its hour directories are not charged.
                let trash_hour = core.parent == Ino::TRASH && core.kind == FileType::Directory;
                let charged = ino != Ino::ROOT.0 && ino != Ino::TRASH.0 && !trash_hour;
                self.pending.insert(ino, (core.kind, charged));
                if ino < Ino::FIRST_RESERVED {
                    self.max_ino = self.max_ino.max(ino);
                }
            }
            (Some(b'A'), Some(b'T')) => {
                let ino = keys::be_u64(key, 1).unwrap_or(0);
                if let Some((kind, charged)) = self.pending.remove(&ino)
                    && charged
                {
                    let fields = InodeFields::decode(key, value)?;
                    self.used_space += space_of(kind, fields.length);
                    self.total_inodes += 1;
                }
            }
            (Some(b'N'), _) => {
                self.counters.push((key.to_vec(), value.to_vec()));
                return Ok(false);
            }
            _ => {}
        }
        Ok(true)
    }

    /// The counters to write: as dumped, with usage recomputed and the inode counter past
    /// every inode loaded.
    fn finish(mut self) -> Result<Vec<(Key, Value)>> {
        let recomputed = [keys::counter(USED_SPACE), keys::counter(TOTAL_INODES)];
        self.counters.retain(|(k, _)| !recomputed.contains(k));
        let next_key = keys::counter(NEXT_INODE);
        let floor = i64::try_from(self.max_ino.saturating_add(1)).unwrap_or(i64::MAX);
        let mut next = floor;
        for (k, v) in &mut self.counters {
            if *k == next_key {
                next = codec::decode_counter(k, Some(v))?.max(floor);
                *v = codec::encode_slots(&[next]);
            }
        }
        if !self.counters.iter().any(|(k, _)| *k == next_key) {
            self.counters.push((next_key, codec::encode_slots(&[next])));
        }
        self.counters.push((
            keys::counter(USED_SPACE),
            codec::encode_slots(&[self.used_space]),
        ));
        self.counters.push((
            keys::counter(TOTAL_INODES),
            codec::encode_slots(&[self.total_inodes]),
        ));
        Ok(self.counters)
    }
}

impl Meta {
    /// Load a binary dump into this client's engine, which must be empty, `threads`
    /// batches at once; `progress` is told the running count of inodes.
    pub async fn load_binary(
        &self,
        input: &mut (dyn Read + Send),
        threads: usize,
        progress: &mut (dyn FnMut(u64) + Send),
    ) -> Result<DumpStats> {
        self.ensure_empty().await?;
        // Each batch commits durably (deferring SQLite's fsyncs to the end was measured
        // slower: 3.3 s against 2.5 s for a million inodes), or all go in one bulk write.
        let (format, stats) = self.load_binary_records(input, threads, progress).await?;
        // Last: until the format record is written the engine holds no volume.
        self.put_batch(vec![(keys::setting("format"), format.encode()?)])
            .await?;
        Ok(stats)
    }

    /// Every record of the dump and the counters, not yet the format record: through the
    /// engine's bulk writer when it has one, else in commits of [`BATCH`] puts, `threads`
    /// at once.
    async fn load_binary_records(
        &self,
        input: &mut (dyn Read + Send),
        threads: usize,
        progress: &mut (dyn FnMut(u64) + Send),
    ) -> Result<(Format, DumpStats)> {
        let mut frames = DumpFrames::open(input)?;
        let mut recount = Recount::default();
        let mut sink = LoadSink::open(self, threads).await?;
        let mut batch: Vec<(Key, Value)> = Vec::with_capacity(BATCH);
        let read: Result<()> = async {
            while frames.next_pairs(|_, key, value| {
                if recount.take(key, value)? {
                    batch.push((key.to_vec(), value.to_vec()));
                }
                Ok(())
            })? {
                if batch.len() >= BATCH {
                    let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
                    sink.put(full).await?;
                }
                progress(frames.tally.inodes);
            }
            sink.put(batch).await
        }
        .await;
        sink.finish(read).await?;
        self.put_batch(recount.finish()?).await?;
        progress(frames.tally.inodes);
        Ok((frames.format, frames.tally.stats()))
    }
}
