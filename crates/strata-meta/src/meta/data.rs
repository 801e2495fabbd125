//! File contents in metadata: chunk slice lists (read, write), size changes (truncate,
//! fallocate), slice sharing (copy_file_range) and compaction support.
//!
//! Invariant: no slice record reaches past a file's length — shrinking clips records, so
//! growing a file again always reads zeros.

use std::collections::BTreeMap;

use strata_types::{
    Attr, CHUNK_SIZE, Errno, FileType, Ino, MAX_FILE_SIZE, Nanos, Slice, align_4k, build_read_plan,
};

use super::delete::{add_slice_ref, drop_slice_ref};
use super::{MAX_SLICES_PER_CHUNK, Meta, must_get_inode, now_ns, put_inode};
use crate::codec::{self, Inode};
use crate::error::{MetaError, Result, posix};
use crate::keys;
use crate::kv::{Txn, prefix_end};

/// What a slice commit reports back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteOutcome {
    pub attr: Attr,
    /// Slice records in the chunk now; compact when this grows past the threshold.
    pub slice_count: usize,
}

/// fallocate(2) modes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FallocateMode {
    pub keep_size: bool,
    pub punch_hole: bool,
    pub zero_range: bool,
}

impl FallocateMode {
    pub const KEEP_SIZE: u32 = 0x01;
    pub const PUNCH_HOLE: u32 = 0x02;
    pub const ZERO_RANGE: u32 = 0x10;

    /// Parse mode bits: EOPNOTSUPP for collapse/insert/unshare, EINVAL for a punch
    /// without KEEP_SIZE.
    pub fn from_bits(bits: u32) -> Result<FallocateMode> {
        if bits & !(Self::KEEP_SIZE | Self::PUNCH_HOLE | Self::ZERO_RANGE) != 0 {
            return posix(Errno::EOPNOTSUPP);
        }
        let mode = FallocateMode {
            keep_size: bits & Self::KEEP_SIZE != 0,
            punch_hole: bits & Self::PUNCH_HOLE != 0,
            zero_range: bits & Self::ZERO_RANGE != 0,
        };
        if mode.punch_hole && (!mode.keep_size || mode.zero_range) {
            return posix(Errno::EINVAL);
        }
        Ok(mode)
    }
}

/// A chunk reported for compaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompactCandidate {
    pub ino: Ino,
    pub index: u32,
}

fn chunk_span(index: u64) -> (u64, u64) {
    (index * CHUNK_SIZE, (index + 1) * CHUNK_SIZE)
}

async fn load_chunk(tx: &mut Txn<'_>, ino: Ino, index: u32) -> Result<Vec<Slice>> {
    let key = keys::chunk(ino, index);
    match tx.get(&key).await? {
        Some(v) => codec::decode_slices(&key, &v),
        None => Ok(Vec::new()),
    }
}

fn chunk_index(index: u64) -> Result<u32> {
    u32::try_from(index).map_err(|_| MetaError::Posix(Errno::EFBIG))
}

fn must_be_regular(inode: &Inode) -> Result<()> {
    match inode.core.kind {
        FileType::Regular => Ok(()),
        FileType::Directory => posix(Errno::EISDIR),
        _ => posix(Errno::EINVAL),
    }
}

fn space_delta(old: u64, new: u64) -> i64 {
    i64::try_from(align_4k(new)).unwrap_or(i64::MAX)
        - i64::try_from(align_4k(old)).unwrap_or(i64::MAX)
}

/// Give an inode the times of a data write made at `at`, as ext4 does when `write()`
/// returns: mtime and ctime become `at`. A change stored later than the write (its ctime
/// is newer: an explicit `utimensat`, a chmod, another client's write) keeps its times —
/// flushing buffered data never overrides them — but ctime still moves forward by a
/// nanosecond, so every data change shows in ctime (the kernel page cache relies on it).
pub(crate) fn apply_write_time(inode: &mut Inode, at: Nanos) {
    if at >= inode.fields.ctime {
        inode.fields.mtime = at;
        inode.fields.ctime = at;
    } else {
        inode.fields.ctime = inode.fields.ctime.saturating_add(1);
    }
}

/// Append records to a chunk, refusing to pass the per-chunk cap.
async fn append_to_chunk(
    tx: &mut Txn<'_>,
    ino: Ino,
    index: u32,
    records: &[Slice],
) -> Result<usize> {
    let key = keys::chunk(ino, index);
    let mut value = tx.get(&key).await?.unwrap_or_default();
    let count = value.len() / Slice::ENCODED_LEN;
    if count + records.len() > MAX_SLICES_PER_CHUNK {
        return Err(MetaError::TooManySlices {
            ino: ino.0,
            index,
            count,
        });
    }
    for r in records {
        codec::push_slice(&mut value, r);
    }
    tx.put(key, value);
    Ok(count + records.len())
}

impl Meta {
    /// The slice list of chunk `index` of `ino` (empty when the chunk has no data).
    ///
    /// ENOENT when the file itself is gone (another client removed it while this one
    /// had it open): a missing chunk record means a hole, which reads as zeros, so the
    /// inode is read in the same call.
    pub async fn read_chunk(&self, ino: Ino, index: u32) -> Result<Vec<Slice>> {
        self.txn(|tx| {
            Box::pin(async move {
                let ks = vec![keys::inode_core(ino), keys::chunk(ino, index)];
                let vals = tx.get_many(&ks).await?;
                if vals[0].is_none() {
                    return posix(Errno::ENOENT);
                }
                match &vals[1] {
                    Some(v) => codec::decode_slices(&ks[1], v),
                    None => Ok(Vec::new()),
                }
            })
        })
        .await
    }

    /// Commit a slice written at `slice.pos` within chunk `index`: append its record,
    /// extend the length, apply the writes' time (see [`apply_write_time`]), update usage
    /// — atomically. `written_at` is when the last of the slice's writes returned; `None`
    /// leaves the times alone (a later explicit change already stored them).
    pub async fn write_chunk(
        &self,
        ino: Ino,
        index: u32,
        slice: Slice,
        written_at: Option<Nanos>,
    ) -> Result<WriteOutcome> {
        if slice.end() > CHUNK_SIZE || slice.id == 0 || slice.len == 0 {
            return Err(MetaError::Invalid(format!(
                "slice record {slice:?} does not fit a chunk"
            )));
        }
        let end = chunk_span(u64::from(index)).0 + slice.end();
        if end > MAX_FILE_SIZE {
            return posix(Errno::EFBIG);
        }
        let threshold = self.opts.compact_threshold;
        let (outcome, delta) = self
            .write_txn(|tx| {
                Box::pin(async move {
                    let mut inode = must_get_inode(tx, ino).await?;
                    must_be_regular(&inode)?;
                    super::protect::check_unfrozen(&inode.core)?;
                    let slice_count = append_to_chunk(tx, ino, index, &[slice]).await?;
                    if slice_count >= threshold {
                        tx.put(keys::compact_hint(ino, index), Vec::new());
                    }
                    let length = inode.fields.length.max(end);
                    let delta = self.set_length(tx, &mut inode, length).await?;
                    if let Some(at) = written_at {
                        apply_write_time(&mut inode, at);
                    }
                    put_inode(tx, &inode);
                    Ok((
                        WriteOutcome {
                            attr: inode.attr(),
                            slice_count,
                        },
                        delta,
                    ))
                })
            })
            .await?;
        self.add_usage(delta, 0);
        self.add_owner_usage((outcome.attr.uid, outcome.attr.gid), delta, 0);
        Ok(outcome)
    }

    /// Change the length field and charge the difference to the file's directories.
    /// ENOSPC when growing past the volume capacity. A file without a name (unlinked or
    /// replaced while open, or never named: `O_TMPFILE`) is in no directory: only the
    /// volume and its owner are charged (its former directory was credited when it lost
    /// its last name).
    async fn set_length(&self, tx: &mut Txn<'_>, inode: &mut Inode, length: u64) -> Result<i64> {
        let delta = space_delta(inode.fields.length, length);
        self.check_limits(delta, 0)?;
        let named = inode.fields.nlink > 0;
        let dir = Some(inode.core.parent).filter(|p| *p != Ino(0) && named);
        let owner = (inode.core.uid, inode.core.gid);
        self.check_quota(tx, dir, Some(owner), delta, 0).await?;
        inode.fields.length = length;
        if delta == 0 || !named {
            return Ok(delta);
        }
        if inode.core.parent != Ino(0) {
            self.add_dir_usage(tx, inode.core.parent, delta, 0).await?;
        } else {
            let prefix = keys::link_parent_prefix(inode.ino);
            for (key, value) in tx
                .scan(&prefix, &prefix_end(&prefix), usize::MAX, false)
                .await?
            {
                let parent = keys::be_u64(&key, prefix.len())
                    .ok_or_else(|| MetaError::corrupt(&key, "short key"))?;
                let links = codec::decode_counter(&key, Some(&value))?;
                self.add_dir_usage(tx, Ino(parent), delta.saturating_mul(links), 0)
                    .await?;
            }
        }
        Ok(delta)
    }

    /// Set a file's length inside a transaction (truncate): shrinking clips slice records
    /// past the new end and drops whole chunks past it. Updates length, mtime, ctime and
    /// usage; returns the volume space delta.
    pub(crate) async fn resize(
        &self,
        tx: &mut Txn<'_>,
        inode: &mut Inode,
        length: u64,
        now: Nanos,
    ) -> Result<i64> {
        if length > MAX_FILE_SIZE {
            return posix(Errno::EFBIG);
        }
        let old = inode.fields.length;
        if length < old {
            let ino = inode.ino;
            let cut = length % CHUNK_SIZE;
            let first_gone = length.div_ceil(CHUNK_SIZE);
            if cut != 0 {
                let index = chunk_index(length / CHUNK_SIZE)?;
                clip_chunk(tx, ino, index, cut, now).await?;
            }
            let start = keys::chunk(ino, chunk_index(first_gone.min(u64::from(u32::MAX)))?);
            let end = prefix_end(&keys::chunk_prefix(ino));
            for (key, value) in tx.scan(&start, &end, usize::MAX, false).await? {
                for s in codec::decode_slices(&key, &value)? {
                    drop_slice_ref(tx, &s, now).await?;
                }
                tx.delete(key);
            }
        }
        let delta = self.set_length(tx, inode, length).await?;
        if length != old {
            inode.fields.mtime = now;
            inode.fields.ctime = now;
        }
        Ok(delta)
    }

    /// fallocate(2) on `ino`: allocate (extend unless KEEP_SIZE), punch a hole, or zero a
    /// range. Space is not reserved in the object store; holes read as zeros.
    pub async fn fallocate(
        &self,
        ino: Ino,
        mode: FallocateMode,
        offset: u64,
        length: u64,
    ) -> Result<Attr> {
        if length == 0 {
            return posix(Errno::EINVAL);
        }
        let end = offset
            .checked_add(length)
            .filter(|e| *e <= MAX_FILE_SIZE)
            .ok_or(MetaError::Posix(Errno::EFBIG))?;
        let (attr, delta) = self
            .txn(|tx| {
                Box::pin(async move {
                    let mut inode = must_get_inode(tx, ino).await?;
                    if inode.core.kind != FileType::Regular {
                        return posix(if inode.core.kind == FileType::Directory {
                            Errno::EISDIR
                        } else {
                            Errno::ENODEV
                        });
                    }
                    super::protect::check_unfrozen(&inode.core)?;
                    if inode.core.protection.append_only && (mode.punch_hole || mode.zero_range) {
                        return posix(Errno::EPERM);
                    }
                    let now = now_ns();
                    if mode.punch_hole || mode.zero_range {
                        let hole_end = if mode.keep_size {
                            end.min(inode.fields.length)
                        } else {
                            end
                        };
                        punch(tx, ino, offset, hole_end).await?;
                        inode.fields.mtime = now;
                    }
                    let mut delta = 0;
                    if !mode.keep_size && end > inode.fields.length {
                        delta = self.set_length(tx, &mut inode, end).await?;
                        inode.fields.mtime = now;
                    }
                    inode.fields.ctime = now;
                    put_inode(tx, &inode);
                    Ok((inode.attr(), delta))
                })
            })
            .await?;
        self.add_usage(delta, 0);
        self.add_owner_usage((attr.uid, attr.gid), delta, 0);
        Ok(attr)
    }

    /// copy_file_range(2): make `[off_out, off_out+len)` of `dst` show what
    /// `[off_in, off_in+len)` of `src` shows, by sharing slices (no data is copied).
    /// Returns the bytes copied (clipped at the source's end) and `dst`'s attributes.
    #[allow(clippy::too_many_arguments)]
    pub async fn copy_file_range(
        &self,
        src: Ino,
        off_in: u64,
        dst: Ino,
        off_out: u64,
        len: u64,
        flags: u32,
    ) -> Result<(u64, Attr)> {
        if flags != 0 {
            return posix(Errno::EINVAL);
        }
        let (copied, attr, delta) = self
            .txn(|tx| {
                Box::pin(async move {
                    let source = must_get_inode(tx, src).await?;
                    let mut target = if dst == src {
                        source.clone()
                    } else {
                        must_get_inode(tx, dst).await?
                    };
                    must_be_regular(&source)?;
                    must_be_regular(&target)?;
                    super::protect::check_unfrozen(&target.core)?;
                    let len = len.min(source.fields.length.saturating_sub(off_in));
                    if src == dst && off_in < off_out + len && off_out < off_in + len {
                        return posix(Errno::EINVAL);
                    }
                    if len == 0 {
                        return Ok((0, target.attr(), 0));
                    }
                    let end = off_out
                        .checked_add(len)
                        .filter(|e| *e <= MAX_FILE_SIZE)
                        .ok_or(MetaError::Posix(Errno::EFBIG))?;
                    let pieces = collect_pieces(tx, src, off_in, len, off_out).await?;
                    for (index, records) in &pieces {
                        for r in records {
                            add_slice_ref(tx, r).await?;
                        }
                        append_to_chunk(tx, dst, *index, records).await?;
                    }
                    let now = now_ns();
                    let length = target.fields.length.max(end);
                    let delta = self.set_length(tx, &mut target, length).await?;
                    target.fields.mtime = now;
                    target.fields.ctime = now;
                    put_inode(tx, &target);
                    Ok((len, target.attr(), delta))
                })
            })
            .await?;
        self.add_usage(delta, 0);
        self.add_owner_usage((attr.uid, attr.gid), delta, 0);
        Ok((copied, attr))
    }

    /// Chunks reported for compaction (their slice count passed the threshold).
    pub async fn compaction_candidates(&self, limit: usize) -> Result<Vec<CompactCandidate>> {
        self.txn(|tx| {
            Box::pin(async move {
                let rows = tx.scan(b"H", b"I", limit, false).await?;
                rows.iter()
                    .map(|(k, _)| match (keys::be_u64(k, 1), keys::be_u32(k, 9)) {
                        (Some(ino), Some(index)) => Ok(CompactCandidate {
                            ino: Ino(ino),
                            index,
                        }),
                        _ => Err(MetaError::corrupt(k, "malformed compaction hint")),
                    })
                    .collect()
            })
        })
        .await
    }

    /// Replace the first `expected.len()` records of a chunk with `replacement`, if the
    /// list still starts with exactly `expected` (records appended meanwhile are kept after
    /// it). Returns false, changing nothing, when the chunk changed. The replaced records'
    /// slices lose a reference each (and are queued for deletion at zero).
    pub async fn replace_slices(
        &self,
        ino: Ino,
        index: u32,
        expected: &[Slice],
        replacement: Slice,
    ) -> Result<bool> {
        let threshold = self.opts.compact_threshold;
        self.txn(|tx| {
            Box::pin(async move {
                let current = load_chunk(tx, ino, index).await?;
                if expected.is_empty() || !current.starts_with(expected) {
                    return Ok(false);
                }
                let now = now_ns();
                let mut next = Vec::with_capacity(current.len() - expected.len() + 1);
                next.push(replacement);
                next.extend_from_slice(&current[expected.len()..]);
                for s in expected {
                    drop_slice_ref(tx, s, now).await?;
                }
                tx.put(keys::chunk(ino, index), codec::encode_slices(&next));
                if next.len() < threshold {
                    tx.delete(keys::compact_hint(ino, index));
                }
                Ok(true)
            })
        })
        .await
    }
}

/// Clip the records of chunk `index` at `cut` (bytes into the chunk).
async fn clip_chunk(tx: &mut Txn<'_>, ino: Ino, index: u32, cut: u64, now: Nanos) -> Result<()> {
    let slices = load_chunk(tx, ino, index).await?;
    if slices.is_empty() {
        return Ok(());
    }
    let cut = u32::try_from(cut).map_err(|_| MetaError::Invalid("cut beyond chunk".into()))?;
    let mut kept = Vec::with_capacity(slices.len());
    for s in slices {
        if s.pos >= cut {
            drop_slice_ref(tx, &s, now).await?;
        } else if s.end() > u64::from(cut) {
            kept.push(
                Slice {
                    len: cut - s.pos,
                    ..s
                }
                .normalized(),
            );
        } else {
            kept.push(s);
        }
    }
    let key = keys::chunk(ino, index);
    if kept.is_empty() {
        tx.delete(key)
    } else {
        tx.put(key, codec::encode_slices(&kept))
    }
    Ok(())
}

/// Write hole records over `[start, end)` of a file, chunk by chunk (only in chunks that
/// hold data).
async fn punch(tx: &mut Txn<'_>, ino: Ino, start: u64, end: u64) -> Result<()> {
    let mut pos = start;
    while pos < end {
        let index = pos / CHUNK_SIZE;
        let (chunk_start, chunk_end) = chunk_span(index);
        let stop = end.min(chunk_end);
        let index = chunk_index(index)?;
        if tx.get(&keys::chunk(ino, index)).await?.is_some() {
            // Both offsets are inside one chunk, so they fit in u32.
            let (a, b) = ((pos - chunk_start) as u32, (stop - chunk_start) as u32);
            append_to_chunk(tx, ino, index, &[Slice::hole(a, b - a)]).await?;
        }
        pos = stop;
    }
    Ok(())
}

/// The records that make `[off_out, off_out+len)` of a destination show what
/// `[off_in, off_in+len)` of `src` shows, grouped by destination chunk.
async fn collect_pieces(
    tx: &mut Txn<'_>,
    src: Ino,
    off_in: u64,
    len: u64,
    off_out: u64,
) -> Result<BTreeMap<u32, Vec<Slice>>> {
    let mut out: BTreeMap<u32, Vec<Slice>> = BTreeMap::new();
    let mut pos = off_in;
    let end = off_in + len;
    while pos < end {
        let index = pos / CHUNK_SIZE;
        let (chunk_start, chunk_end) = chunk_span(index);
        let stop = end.min(chunk_end);
        let slices = load_chunk(tx, src, chunk_index(index)?).await?;
        // Offsets within one chunk fit in u32.
        let plan = build_read_plan(
            &slices,
            (pos - chunk_start) as u32,
            (stop - chunk_start) as u32,
        );
        for piece in plan {
            place_piece(
                &mut out,
                piece,
                chunk_start + u64::from(piece.pos) - off_in + off_out,
            )?;
        }
        pos = stop;
    }
    Ok(out)
}

/// Place one source piece at absolute destination offset `at`, split at chunk borders.
fn place_piece(out: &mut BTreeMap<u32, Vec<Slice>>, piece: Slice, at: u64) -> Result<()> {
    let mut done = 0u32;
    while done < piece.len {
        let abs = at + u64::from(done);
        let index = abs / CHUNK_SIZE;
        let in_chunk = abs % CHUNK_SIZE;
        let room = CHUNK_SIZE - in_chunk;
        let take = u64::from(piece.len - done).min(room) as u32;
        let record = if piece.id == 0 {
            Slice::hole(in_chunk as u32, take)
        } else {
            Slice {
                pos: in_chunk as u32,
                id: piece.id,
                size: piece.size,
                off: piece.off + done,
                len: take,
            }
        };
        out.entry(chunk_index(index)?).or_default().push(record);
        done += take;
    }
    Ok(())
}
