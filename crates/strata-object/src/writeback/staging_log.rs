//! The staging log of writeback (staging v2, docs/FORMAT.md): staged blocks are appended
//! to a few large segment files instead of each being a file of its own, so staging a
//! small block costs a copy into the page cache — no file create, rename or unlink on the
//! local file system, which on ext4 cost more than the rest of a small write — and making
//! everything staged durable costs one `fdatasync` per segment written since the last sync.
//!
//! Each record is a 24-byte header (magic `STG2`, kind, key and data lengths, CRC32C of
//! header fields, key and data), the key, then the data. Kind 1 stages a block; kind 2 (a
//! tombstone) says a block staged earlier was deleted before it was uploaded, so a restart
//! does not upload it. Appends are serialized, so a segment is complete records followed
//! by at most one torn record (a put that never returned); opening stops a segment there
//! and cuts it off.
//!
//! A segment is deleted once none of its blocks waits for an upload and every older
//! segment is gone (a tombstone must outlive the record it cancels). The index maps each
//! staged key to its record; reads `pread` the open segment, which stays readable even if
//! it is deleted meanwhile.
//!
//! Two locks: `appends` serializes appends and is held across their writes (callers run
//! them on the blocking pool); `inner`, the index and the segments' bookkeeping, is held
//! only briefly and never across file I/O, so lookups from async code never wait on the
//! disk.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::{File, OpenOptions};
use std::io::{BufReader, Read};
use std::ops::Range;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::{Mutex, MutexGuard};

use crate::{ObjectError, Result};

const MAGIC: &[u8; 4] = b"STG2";
const HEADER: usize = 24;
const HEADER_U64: u64 = 24;
const KIND_PUT: u8 = 1;
const KIND_TOMBSTONE: u8 = 2;
/// A new segment is started once the current one holds this many bytes.
const SEGMENT_BYTES: u64 = 64 << 20;
/// Longest key a record may carry (object keys are far shorter).
const MAX_KEY: usize = 4096;
const SEGMENT_PREFIX: &str = "log-";

/// One segment file.
#[derive(Debug)]
struct Segment {
    file: Arc<File>,
    len: u64,
    /// Blocks in it that wait for their upload.
    live: usize,
    /// Puts appended and not made durable yet.
    unsynced: u64,
}

/// Where a staged block's bytes are.
#[derive(Clone, Debug)]
struct Located {
    seq: u64,
    file: Arc<File>,
    offset: u64,
    len: u64,
    /// Uploaded already: kept while its segment is, so a delete still writes the
    /// tombstone a restart needs.
    uploaded: bool,
}

#[derive(Debug, Default)]
struct Inner {
    segments: BTreeMap<u64, Segment>,
    index: HashMap<String, Located>,
    /// The segment appends go to (the newest), if any.
    active: Option<u64>,
    next_seq: u64,
    /// A segment was created since the directory was last made durable.
    dir_dirty: bool,
    /// The segment an append is writing into: not reclaimed under it.
    appending: Option<u64>,
}

/// The append-only staging area of one writeback client.
#[derive(Debug)]
pub(super) struct StagingLog {
    dir: PathBuf,
    /// A new segment is started once the current one holds this many bytes.
    segment_bytes: u64,
    /// Held across each append's write: one at a time.
    appends: Mutex<()>,
    inner: Mutex<Inner>,
}

/// A block found staged when the log was opened.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Recovered {
    pub key: String,
    pub size: u64,
}

fn io_error(what: &str, path: &Path, e: std::io::Error) -> ObjectError {
    ObjectError::from_io(format_args!("cannot {what} {}", path.display()), &e)
}

fn segment_name(seq: u64) -> String {
    format!("{SEGMENT_PREFIX}{seq:016x}")
}

fn len_u64(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// A record's header and key, ready to be written before its data.
fn record_head(kind: u8, key: &str, data: &[u8]) -> Vec<u8> {
    let mut head = Vec::with_capacity(HEADER + key.len());
    head.extend_from_slice(MAGIC);
    head.extend_from_slice(&[kind, 0, 0, 0]);
    head.extend_from_slice(&u32::try_from(key.len()).unwrap_or(u32::MAX).to_le_bytes());
    head.extend_from_slice(&len_u64(data.len()).to_le_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&head), key.as_bytes());
    let crc = crc32c::crc32c_append(crc, data);
    head.extend_from_slice(&crc.to_le_bytes());
    head.extend_from_slice(key.as_bytes());
    head
}

/// One record read back by [`scan_segment`].
struct Parsed {
    kind: u8,
    key: String,
    data_offset: u64,
    data_len: u64,
}

/// The complete records at the start of a segment, and the length they cover (where a
/// torn record, if any, begins).
fn scan_segment(file: &File, path: &Path) -> Result<(Vec<Parsed>, u64)> {
    let size = file
        .metadata()
        .map_err(|e| io_error("read", path, e))?
        .len();
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut records = Vec::new();
    let mut at = 0u64;
    let mut data = Vec::new();
    loop {
        let mut head = [0u8; HEADER];
        if size.saturating_sub(at) < HEADER_U64 || reader.read_exact(&mut head).is_err() {
            break;
        }
        let field = |r: Range<usize>| head.get(r).unwrap_or_default();
        let u32_at = |r| u32::from_le_bytes(field(r).try_into().unwrap_or_default());
        let kind = field(4..5).first().copied().unwrap_or(0);
        let key_len = usize::try_from(u32_at(8..12)).unwrap_or(usize::MAX);
        let data_len = u64::from_le_bytes(field(12..20).try_into().unwrap_or_default());
        let sane = field(0..4) == MAGIC
            && (kind == KIND_PUT || kind == KIND_TOMBSTONE)
            && key_len <= MAX_KEY
            && data_len <= size.saturating_sub(at);
        let body = len_u64(key_len).saturating_add(data_len);
        if !sane || size.saturating_sub(at + HEADER_U64) < body {
            break;
        }
        let mut key = vec![0u8; key_len];
        data.resize(usize::try_from(data_len).unwrap_or(usize::MAX), 0);
        if reader.read_exact(&mut key).is_err() || reader.read_exact(&mut data).is_err() {
            break;
        }
        let crc = crc32c::crc32c_append(crc32c::crc32c(field(0..20)), &key);
        if crc32c::crc32c_append(crc, &data) != u32_at(20..24) {
            break;
        }
        let Ok(key) = String::from_utf8(key) else {
            break;
        };
        records.push(Parsed {
            kind,
            key,
            data_offset: at + HEADER_U64 + len_u64(key_len),
            data_len,
        });
        at += HEADER_U64 + body;
    }
    Ok((records, at))
}

impl StagingLog {
    /// Open (creating) the log in `dir`, which exists; returns it with every block staged
    /// by an earlier run, in the order they were staged.
    pub(super) fn open(dir: &Path) -> Result<(StagingLog, Vec<Recovered>)> {
        Self::open_with(dir, SEGMENT_BYTES)
    }

    /// [`StagingLog::open`] with segments of `segment_bytes`.
    fn open_with(dir: &Path, segment_bytes: u64) -> Result<(StagingLog, Vec<Recovered>)> {
        let mut seqs = Vec::new();
        let entries = std::fs::read_dir(dir).map_err(|e| io_error("list", dir, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| io_error("list", dir, e))?;
            let name = entry.file_name();
            let seq = name
                .to_str()
                .and_then(|n| n.strip_prefix(SEGMENT_PREFIX))
                .and_then(|hex| u64::from_str_radix(hex, 16).ok());
            if let Some(seq) = seq {
                seqs.push(seq);
            }
        }
        seqs.sort_unstable();
        let log = StagingLog {
            dir: dir.to_path_buf(),
            segment_bytes,
            appends: Mutex::new(()),
            inner: Mutex::new(Inner {
                next_seq: seqs.last().map_or(1, |s| s.saturating_add(1)),
                ..Inner::default()
            }),
        };
        for seq in seqs {
            log.load_segment(seq)?;
        }
        let mut inner = log.inner.lock();
        // In the order they were staged (a block staged twice counts at its last put).
        let mut found: Vec<(u64, u64, &String, u64)> = inner
            .index
            .iter()
            .map(|(key, l)| (l.seq, l.offset, key, l.len))
            .collect();
        found.sort_unstable();
        let recovered = found
            .into_iter()
            .map(|(_, _, key, size)| Recovered {
                key: key.clone(),
                size,
            })
            .collect();
        // Appends go to a new segment: an old one may end in a torn record's space.
        inner.active = None;
        let gone = log.reclaim(&mut inner);
        drop(inner);
        log.remove_segments(gone);
        Ok((log, recovered))
    }

    /// Read segment `seq` into the index, cutting off a torn record at its end.
    fn load_segment(&self, seq: u64) -> Result<()> {
        let path = self.dir.join(segment_name(seq));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| io_error("open", &path, e))?;
        let (records, complete) = scan_segment(&file, &path)?;
        let size = file
            .metadata()
            .map_err(|e| io_error("read", &path, e))?
            .len();
        if complete < size {
            tracing::warn!(
                "writeback: {} ends in a torn record ({} bytes, never acknowledged): cut off",
                path.display(),
                size - complete
            );
            file.set_len(complete)
                .map_err(|e| io_error("truncate", &path, e))?;
        }
        let file = Arc::new(file);
        let mut inner = self.inner.lock();
        inner.segments.insert(
            seq,
            Segment {
                file: file.clone(),
                len: complete,
                live: 0,
                unsynced: 0,
            },
        );
        for record in records {
            Self::unindex(&mut inner, &record.key);
            if record.kind == KIND_PUT {
                let located = Located {
                    seq,
                    file: file.clone(),
                    offset: record.data_offset,
                    len: record.data_len,
                    uploaded: false,
                };
                if let Some(segment) = inner.segments.get_mut(&seq) {
                    segment.live += 1;
                }
                inner.index.insert(record.key, located);
            }
        }
        inner.active = Some(seq);
        Ok(())
    }

    /// Drop `key` from the index; true if it was there.
    fn unindex(inner: &mut Inner, key: &str) -> bool {
        let Some(old) = inner.index.remove(key) else {
            return false;
        };
        if !old.uploaded
            && let Some(segment) = inner.segments.get_mut(&old.seq)
        {
            segment.live = segment.live.saturating_sub(1);
        }
        true
    }

    /// Append one record (starting a segment when the active one is full); returns the
    /// index lock, taken as the record became readable, and where its data is.
    /// Blocking: one write, made while no other append runs and without the index lock.
    fn append(&self, kind: u8, key: &str, data: &[u8]) -> Result<(MutexGuard<'_, Inner>, Located)> {
        if key.len() > MAX_KEY {
            return Err(ObjectError::InvalidKey(key.to_string()));
        }
        let head = record_head(kind, key, data);
        let total = len_u64(head.len()).saturating_add(len_u64(data.len()));
        let _turn = self.appends.lock();
        let (seq, file, at) = match self.room_for(total) {
            Some(place) => place,
            None => self.start_segment()?,
        };
        let wrote = file
            .write_all_at(&head, at)
            .and_then(|()| file.write_all_at(data, at + len_u64(head.len())));
        let mut inner = self.inner.lock();
        inner.appending = None;
        if let Err(e) = wrote {
            // Whatever part landed is overwritten by the next append, or cut off at open.
            let path = self.dir.join(segment_name(seq));
            return Err(io_error("write the staging log", &path, e));
        }
        let segment = inner
            .segments
            .get_mut(&seq)
            .ok_or_else(|| ObjectError::Other("staging segment missing".into()))?;
        segment.len = at.saturating_add(total);
        if kind == KIND_PUT {
            segment.unsynced += 1;
        }
        let located = Located {
            seq,
            file,
            offset: at + len_u64(head.len()),
            len: len_u64(data.len()),
            uploaded: false,
        };
        Ok((inner, located))
    }

    /// The active segment and where a record of `total` bytes goes in it, if it has room
    /// (marked as being appended to); `None` when a new segment is needed.
    fn room_for(&self, total: u64) -> Option<(u64, Arc<File>, u64)> {
        let mut inner = self.inner.lock();
        let seq = inner.active?;
        let segment = inner.segments.get(&seq)?;
        if segment.len > 0 && segment.len.saturating_add(total) > self.segment_bytes {
            return None;
        }
        let place = (seq, segment.file.clone(), segment.len);
        inner.appending = Some(seq);
        Some(place)
    }

    /// Create the next segment and make it the active one (marked as being appended
    /// to). Called only by [`StagingLog::append`], which holds the append turn.
    fn start_segment(&self) -> Result<(u64, Arc<File>, u64)> {
        let seq = self.inner.lock().next_seq;
        let path = self.dir.join(segment_name(seq));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| io_error("create", &path, e))?;
        let file = Arc::new(file);
        let mut inner = self.inner.lock();
        inner.next_seq = seq.saturating_add(1);
        inner.segments.insert(
            seq,
            Segment {
                file: file.clone(),
                len: 0,
                live: 0,
                unsynced: 0,
            },
        );
        inner.active = Some(seq);
        inner.dir_dirty = true;
        inner.appending = Some(seq);
        Ok((seq, file, 0))
    }

    /// Stage `data` under `key` (replacing an earlier staged copy). Blocking.
    pub(super) fn put(&self, key: &str, data: &[u8]) -> Result<()> {
        let (mut inner, located) = self.append(KIND_PUT, key, data)?;
        Self::unindex(&mut inner, key);
        if let Some(segment) = inner.segments.get_mut(&located.seq) {
            segment.live += 1;
        }
        inner.index.insert(key.to_string(), located);
        Ok(())
    }

    /// The staged copy of `key` was uploaded: it need not survive a restart any more.
    /// Blocking (may delete segment files).
    pub(super) fn uploaded(&self, key: &str) {
        let mut inner = self.inner.lock();
        let Some(located) = inner.index.get_mut(key).filter(|l| !l.uploaded) else {
            return;
        };
        located.uploaded = true;
        let seq = located.seq;
        if let Some(segment) = inner.segments.get_mut(&seq) {
            segment.live = segment.live.saturating_sub(1);
        }
        let gone = self.reclaim(&mut inner);
        drop(inner);
        self.remove_segments(gone);
    }

    /// Whether a record of `key` is on disk (staged, or uploaded in a segment still
    /// kept): only then has [`StagingLog::delete`] anything to do.
    pub(super) fn holds(&self, key: &str) -> bool {
        self.inner.lock().index.contains_key(key)
    }

    /// `key` was deleted: while its record is on disk, a tombstone keeps a restart from
    /// uploading it (again). Blocking (a few bytes written).
    pub(super) fn delete(&self, key: &str) -> Result<()> {
        let goes_now = {
            let mut inner = self.inner.lock();
            let Some(seq) = inner.index.get(key).map(|l| l.seq) else {
                return Ok(());
            };
            Self::unindex(&mut inner, key);
            // Not needed when the record's segment goes now (the oldest, nothing left).
            inner
                .segments
                .first_key_value()
                .is_some_and(|(first, s)| *first == seq && s.live == 0)
        };
        let mut inner = match goes_now {
            true => self.inner.lock(),
            false => self.append(KIND_TOMBSTONE, key, &[])?.0,
        };
        let gone = self.reclaim(&mut inner);
        drop(inner);
        self.remove_segments(gone);
        Ok(())
    }

    /// Drop the oldest segments while none of their blocks waits for an upload (and no
    /// append writes into them); returns their files, for the caller to delete once the
    /// lock is released.
    fn reclaim(&self, inner: &mut Inner) -> Vec<PathBuf> {
        let mut removed = BTreeSet::new();
        while let Some(entry) = inner.segments.first_entry() {
            if entry.get().live > 0 || inner.appending == Some(*entry.key()) {
                break;
            }
            let seq = *entry.key();
            entry.remove();
            removed.insert(seq);
            if inner.active == Some(seq) {
                inner.active = None;
            }
        }
        if !removed.is_empty() {
            // Only uploaded blocks were left in them.
            inner.index.retain(|_, l| !removed.contains(&l.seq));
        }
        removed
            .into_iter()
            .map(|seq| self.dir.join(segment_name(seq)))
            .collect()
    }

    /// Delete segment files [`StagingLog::reclaim`] dropped. Blocking.
    fn remove_segments(&self, paths: Vec<PathBuf>) {
        for path in paths {
            if let Err(e) = std::fs::remove_file(&path) {
                tracing::warn!("writeback: cannot remove {}: {e}", path.display());
            }
        }
    }

    /// Where `key`'s staged bytes are, if it is staged.
    fn locate(&self, key: &str) -> Option<Located> {
        let inner = self.inner.lock();
        inner.index.get(key).filter(|l| !l.uploaded).cloned()
    }

    /// The size of `key`'s staged copy, if it is staged.
    pub(super) fn size(&self, key: &str) -> Option<u64> {
        self.locate(key).map(|l| l.len)
    }

    /// Bytes `range` (clipped at the end) of `key`'s staged copy; `None` when it is not
    /// staged. Blocking (one `pread`).
    pub(super) fn read(&self, key: &str, range: Option<Range<u64>>) -> Option<Result<Bytes>> {
        let located = self.locate(key)?;
        let range = range.unwrap_or(0..located.len);
        let start = range.start.min(located.len);
        let end = range.end.clamp(start, located.len);
        let mut buf = vec![0u8; usize::try_from(end - start).unwrap_or(0)];
        let read = located.file.read_exact_at(&mut buf, located.offset + start);
        let path = self.dir.join(segment_name(located.seq));
        Some(
            read.map(|()| Bytes::from(buf))
                .map_err(|e| io_error("read", &path, e)),
        )
    }

    /// Bytes the segments take on disk (what the staging limit bounds).
    pub(super) fn disk_bytes(&self) -> u64 {
        let inner = self.inner.lock();
        inner.segments.values().map(|s| s.len).sum()
    }

    /// Make every staged put durable: `fdatasync` each segment written since the last
    /// sync, then the directory if a segment was created. Returns how many puts that
    /// covered. On failure the counts stay, so the next sync tries (and reports) again.
    /// Blocking.
    pub(super) fn sync(&self) -> Result<u64> {
        let (files, dir_dirty) = {
            let mut inner = self.inner.lock();
            let files: Vec<(u64, Arc<File>, u64)> = inner
                .segments
                .iter()
                .filter(|(_, s)| s.unsynced > 0)
                .map(|(seq, s)| (*seq, s.file.clone(), s.unsynced))
                .collect();
            (files, std::mem::take(&mut inner.dir_dirty))
        };
        let mut outcome = Ok(());
        for (seq, file, _) in &files {
            if let Err(e) = file.sync_data() {
                let path = self.dir.join(segment_name(*seq));
                outcome = Err(io_error("sync", &path, e));
                break;
            }
        }
        if outcome.is_ok() && dir_dirty {
            outcome = File::open(&self.dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| io_error("sync", &self.dir, e));
        }
        let mut inner = self.inner.lock();
        if outcome.is_err() {
            inner.dir_dirty |= dir_dirty;
            return outcome.map(|()| 0);
        }
        let mut count = 0;
        for (seq, _, synced) in files {
            if let Some(segment) = inner.segments.get_mut(&seq) {
                segment.unsynced = segment.unsynced.saturating_sub(synced);
            }
            count += synced;
        }
        Ok(count)
    }
}

#[cfg(test)]
#[path = "staging_log_tests.rs"]
mod tests;
