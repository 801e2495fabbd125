//! The file of one block in the disk cache (FORMAT.md, "cache v2" and "cache v4"): a
//! sparse file with a slot per segment of the block. With [`Framing::Checked`] slot `i`
//! starts at `i × (SEGMENT + 8)` and holds the segment's bytes followed by an 8-byte
//! trailer: a CRC32C bound to the block's key, the segment's index and length, then the
//! tag `CSG2`. With [`Framing::Sealed`] (an encrypted volume) the file is a row of sealed
//! [`UNIT`]s of 16 KiB: unit `k` (block bytes `k × 16384..`) starts at `k × (16384 + 36)`,
//! sealed under a cache key derived from the volume's data key and the block's key, tagged
//! `CSE4` (`strata_object::seal`), so the disk holds no plaintext and a 4 KiB random read
//! opens one unit, not a whole segment ([`open_slot_range`]); segment `i`'s slot is its
//! two units. A slot never written is a hole and reads as zeros (no tag): the segment is
//! simply not cached. A slot whose tag is there but whose bytes fail their check is
//! damaged. Everything here is blocking file I/O, run on the blocking pool by the cache.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use std::sync::Arc;

use bytes::Bytes;
use strata_object::checksum::SEGMENT;
use strata_object::seal::{Domain, Keys, Opener, SEALED_TRAILER};

/// Bytes after each cached segment of a checked (unencrypted) file.
pub const TRAILER: usize = 8;
/// Bytes from one slot to the next in a checked file.
pub const STRIDE: usize = SEGMENT + TRAILER;
/// Plaintext bytes sealed together in a sealed file: what a random read opens at least.
/// 16 KiB: a 4 KiB read opens half a segment, and a 128 KiB read pays 8 seals' fixed cost
/// (≈ 0.27 µs each with AES-GCM here) rather than 32 (4 KiB units cost such reads 9 %).
pub const UNIT: usize = 16 << 10;
/// Bytes from one sealed unit to the next.
const UNIT_STRIDE: usize = UNIT + SEALED_TRAILER;
const TAG: &[u8; 4] = b"CSG2";
const SEALED_TAG: &[u8; 4] = b"CSE4";

/// How the segments of a cache file are protected.
#[derive(Debug, Clone, Default)]
pub enum Framing {
    /// A CRC32C per segment (a plain volume).
    #[default]
    Checked,
    /// Sealed with the volume's keys in [`UNIT`]s (an encrypted volume).
    Sealed(Arc<Keys>),
}

/// The shape of a framing's files, without its keys: what sizes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Layout {
    #[default]
    Checked,
    Sealed,
}

impl Layout {
    /// Bytes a segment of `len` bytes takes in a file.
    pub fn stored_len(self, len: usize) -> usize {
        match self {
            Layout::Checked => len + TRAILER,
            Layout::Sealed => len + len.div_ceil(UNIT) * SEALED_TRAILER,
        }
    }
}

/// One protected piece of a file read into a buffer: a checked segment, or a sealed unit.
#[derive(Debug, Clone, Copy)]
struct Piece {
    /// The segment it belongs to.
    segment: usize,
    /// Its index in the block (the segment's, or the unit's).
    index: usize,
    /// Where it lies in the buffer read (its trailer follows).
    stored: usize,
    /// Where its plaintext lies once the buffer is compacted.
    plain: usize,
    len: usize,
}

impl Framing {
    pub fn layout(&self) -> Layout {
        match self {
            Framing::Checked => Layout::Checked,
            Framing::Sealed(_) => Layout::Sealed,
        }
    }

    /// Bytes a segment of `len` bytes takes in a file.
    pub fn stored_len(&self, len: usize) -> usize {
        self.layout().stored_len(len)
    }

    /// Bytes from one slot to the next.
    pub fn stride(&self) -> usize {
        self.stored_len(SEGMENT)
    }

    /// The subdirectory of a cache directory holding files of this framing.
    pub fn dir_name(&self) -> &'static str {
        match self {
            Framing::Checked => "seg2",
            Framing::Sealed(_) => "sealed4",
        }
    }

    fn offset_of(&self, index: usize) -> u64 {
        u64::try_from(index.saturating_mul(self.stride())).unwrap_or(u64::MAX)
    }

    /// The pieces of segments `first..=last` of a block of `block_len` bytes, placed in a
    /// buffer read from segment `first`'s slot on.
    fn pieces(&self, block_len: usize, (first, last): (usize, usize)) -> Vec<Piece> {
        let mut out = Vec::new();
        for segment in first..=last {
            let at = (segment - first) * self.stride();
            let plain = (segment - first) * SEGMENT;
            self.pieces_of(
                segment,
                segment_len(block_len, segment),
                (at, plain),
                &mut out,
            );
        }
        out
    }

    /// The pieces of segment `segment` (`len` bytes) stored at `stored`, its plaintext
    /// placed at `plain`.
    fn pieces_of(
        &self,
        segment: usize,
        len: usize,
        (stored, plain): (usize, usize),
        out: &mut Vec<Piece>,
    ) {
        match self {
            Framing::Checked => out.push(Piece {
                segment,
                index: segment,
                stored,
                plain,
                len,
            }),
            Framing::Sealed(_) => {
                for (j, at) in (0..len).step_by(UNIT).enumerate() {
                    out.push(Piece {
                        segment,
                        index: segment * (SEGMENT / UNIT) + j,
                        stored: stored + j * UNIT_STRIDE,
                        plain: plain + at,
                        len: (len - at).min(UNIT),
                    });
                }
            }
        }
    }

    /// The stored form of segments `first..` (each followed by its trailer), as one buffer.
    fn framed_run(&self, key: &str, first: usize, segments: &[Bytes]) -> std::io::Result<Vec<u8>> {
        let mut pieces = Vec::new();
        let mut stored = 0;
        for (i, data) in segments.iter().enumerate() {
            // Plaintext places within each segment: `plain` is the piece's offset in it.
            self.pieces_of(first + i, data.len(), (stored, 0), &mut pieces);
            stored += self.stored_len(data.len());
        }
        let mut out = vec![0u8; stored];
        let sealer = match self {
            Framing::Checked => None,
            Framing::Sealed(keys) => {
                Some(keys.ring().sealer(Domain::Cache, key).map_err(io_error)?)
            }
        };
        for p in pieces {
            let data = &segments[p.segment - first][p.plain..p.plain + p.len];
            let end = p.stored + p.len;
            out[p.stored..end].copy_from_slice(data);
            match &sealer {
                None => out[end..end + TRAILER].copy_from_slice(&trailer(key, p.index, data)),
                Some(sealer) => {
                    let index = u32::try_from(p.index).map_err(io_error)?;
                    let t = sealer
                        .seal(index, SEALED_TAG, &mut out[p.stored..end])
                        .map_err(io_error)?;
                    out[end..end + SEALED_TRAILER].copy_from_slice(&t);
                }
            }
        }
        Ok(out)
    }

    /// What the slots `first..=last` of a block of `block_len` bytes, read into `buf`
    /// from slot `first` on, hold; sealed units are opened in place (their plaintext then
    /// lies where their ciphertext was).
    fn check_slots(
        &self,
        key: &str,
        block_len: usize,
        (first, last): (usize, usize),
        buf: &mut [u8],
    ) -> Vec<SlotState> {
        let mut states = vec![SlotState::Held; last + 1 - first];
        let ring = match self {
            Framing::Checked => None,
            Framing::Sealed(keys) => Some(keys.ring()),
        };
        let mut opener = ring.as_ref().map(|r| r.opener(Domain::Cache, key));
        for p in self.pieces(block_len, (first, last)) {
            let state = match opener.as_mut() {
                None => check_slot(key, p.index, buf, p.stored, p.len),
                Some(opener) => open_unit(opener, p, buf),
            };
            let slot = &mut states[p.segment - first];
            *slot = (*slot).worst(state);
        }
        states
    }

    /// Move the plaintext of every piece of segments `first..=last` in `buf` (read from
    /// slot `first` on and checked) down over the trailers before it.
    fn compact(&self, block_len: usize, (first, last): (usize, usize), buf: &mut [u8]) {
        for p in self.pieces(block_len, (first, last)) {
            if p.stored != p.plain && p.stored + p.len <= buf.len() {
                buf.copy_within(p.stored..p.stored + p.len, p.plain);
            }
        }
    }
}

/// What the sealed unit `p` in `buf` (its ciphertext, then its trailer) holds, opened in
/// place when it is there.
fn open_unit(opener: &mut Opener<'_>, p: Piece, buf: &mut [u8]) -> SlotState {
    match buf.get_mut(p.stored..p.stored + p.len + SEALED_TRAILER) {
        Some(sealed) => {
            let (text, trailer) = sealed.split_at_mut(p.len);
            open_unit_apart(opener, p.index, text, trailer)
        }
        None => SlotState::Damaged,
    }
}

/// What sealed unit `index` holds, its ciphertext `text` (opened in place when it is
/// there) and its `trailer` read apart: absent without the tag, else held or damaged.
fn open_unit_apart(
    opener: &mut Opener<'_>,
    index: usize,
    text: &mut [u8],
    trailer: &[u8],
) -> SlotState {
    if trailer.get(..4) != Some(&SEALED_TAG[..]) {
        return SlotState::Absent;
    }
    let opened = u32::try_from(index)
        .ok()
        .map(|index| opener.open_detached(index, text, trailer, &[SEALED_TAG]));
    match opened {
        Some(Ok(_)) => SlotState::Held,
        _ => SlotState::Damaged,
    }
}

fn io_error(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(e.to_string())
}
/// Marks a file being written whole (renamed into place when complete).
pub const TMP_MARK: &str = ".tmp.";

/// What one slot of a cached block holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Slot {
    /// Never written (a hole), or written only in part before a crash.
    Absent,
    /// Written, but the bytes do not match their checksum.
    Damaged,
    /// The segment's bytes, verified.
    Held(Bytes),
}

/// Segments of a block of `block_len` bytes.
pub fn segment_count(block_len: usize) -> usize {
    block_len.div_ceil(SEGMENT)
}

/// Bytes of segment `index` of a block of `block_len` bytes.
pub fn segment_len(block_len: usize, index: usize) -> usize {
    block_len
        .saturating_sub(index.saturating_mul(SEGMENT))
        .min(SEGMENT)
}

/// Bytes a file holding every segment of a block of `block_len` bytes takes.
pub fn full_file_len(block_len: usize, framing: &Framing) -> usize {
    (0..segment_count(block_len))
        .map(|i| framing.stored_len(segment_len(block_len, i)))
        .sum()
}

fn trailer(key: &str, index: usize, data: &[u8]) -> [u8; TRAILER] {
    let mut place = [0u8; 8];
    place[..4].copy_from_slice(&u32::try_from(index).unwrap_or(u32::MAX).to_le_bytes());
    place[4..].copy_from_slice(&u32::try_from(data.len()).unwrap_or(u32::MAX).to_le_bytes());
    let seed = crc32c::crc32c_append(crc32c::crc32c(key.as_bytes()), &place);
    let crc = crc32c::crc32c_append(seed, data);
    let mut out = [0u8; TRAILER];
    out[..4].copy_from_slice(&crc.to_le_bytes());
    out[4..].copy_from_slice(TAG);
    out
}

/// What the slot at `at` in `buf` holds: segment `index`, `len` bytes, then its trailer.
fn check_slot(key: &str, index: usize, buf: &[u8], at: usize, len: usize) -> SlotState {
    // Cut short: the file lost bytes it had (a hole reads as zeros, it does not end it).
    let Some(stored) = buf.get(at + len..at + len + TRAILER) else {
        return SlotState::Damaged;
    };
    if &stored[4..] != TAG {
        return SlotState::Absent;
    }
    if trailer(key, index, &buf[at..at + len]) == stored {
        SlotState::Held
    } else {
        SlotState::Damaged
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SlotState {
    Absent,
    Damaged,
    Held,
}

impl SlotState {
    /// A slot of two pieces: damaged if either is, else absent if either is.
    fn worst(self, other: SlotState) -> SlotState {
        match (self, other) {
            (SlotState::Damaged, _) | (_, SlotState::Damaged) => SlotState::Damaged,
            (SlotState::Absent, _) | (_, SlotState::Absent) => SlotState::Absent,
            _ => SlotState::Held,
        }
    }
}

/// The slots `first..=last` of the cached block `key` (`block_len` bytes), read in one
/// `pread`.
pub fn read_slots(
    file: &File,
    key: &str,
    block_len: usize,
    (first, last): (usize, usize),
    framing: &Framing,
) -> std::io::Result<Vec<Slot>> {
    let (buf, states) = read_checked(file, key, block_len, (first, last), framing)?;
    // A checked segment's bytes are handed out where they lie; sealed ones lie together.
    let at = |i: usize| match framing {
        Framing::Checked => (i - first) * framing.stride(),
        Framing::Sealed(_) => (i - first) * SEGMENT,
    };
    let buf = Bytes::from(buf);
    Ok((first..=last)
        .zip(states)
        .map(|(i, state)| match state {
            SlotState::Absent => Slot::Absent,
            SlotState::Damaged => Slot::Damaged,
            SlotState::Held => Slot::Held(buf.slice(at(i)..at(i) + segment_len(block_len, i))),
        })
        .collect())
}

/// Slots `first..=last` of block `key` read from `file` and checked: the buffer and what
/// each slot holds. Sealed units are opened and lie together, their plaintext of slot `i`
/// at `(i - first) × SEGMENT` (read scattered straight into place, or, from a file that
/// ends before them, read as they lie and moved down); checked segments lie where they
/// were stored, every `stride` bytes.
fn read_checked(
    file: &File,
    key: &str,
    block_len: usize,
    (first, last): (usize, usize),
    framing: &Framing,
) -> std::io::Result<(Vec<u8>, Vec<SlotState>)> {
    if let Framing::Sealed(keys) = framing
        && let Some(read) =
            scatter::read_opened(file, (key, keys), block_len, (first, last), framing)?
    {
        return Ok(read);
    }
    let span = (last - first) * framing.stride() + framing.stored_len(segment_len(block_len, last));
    let mut buf = vec![0u8; span];
    let got = read_full_at(file, &mut buf, framing.offset_of(first))?;
    buf.truncate(got);
    let states = framing.check_slots(key, block_len, (first, last), &mut buf);
    if let Framing::Sealed(_) = framing {
        framing.compact(block_len, (first, last), &mut buf);
    }
    Ok((buf, states))
}

/// What a read of some bytes of a cached block found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RangeRead {
    /// The bytes, verified.
    Held(Bytes),
    /// This segment (the first such) is not cached.
    Absent(usize),
    /// This segment (the first such) is damaged.
    Damaged(usize),
}

/// The stored bytes of slot `segment` of a sealed file (still sealed: open ranges of it
/// with [`open_slot_range`]), in one `pread`; `None` for a checked file, whose segments
/// verify only whole (read them with [`read_slots`]).
pub fn read_sealed_slot(
    file: &File,
    block_len: usize,
    segment: usize,
    framing: &Framing,
) -> std::io::Result<Option<Bytes>> {
    let Framing::Sealed(_) = framing else {
        return Ok(None);
    };
    let mut buf = vec![0u8; framing.stored_len(segment_len(block_len, segment))];
    let got = read_full_at(file, &mut buf, framing.offset_of(segment))?;
    buf.truncate(got);
    Ok(Some(Bytes::from(buf)))
}

/// Bytes `[from, to)` of block `key` (`block_len` bytes), which lie in segment
/// `from / SEGMENT`, opened from that segment's sealed `slot` (as [`read_sealed_slot`]
/// read it): only the [`UNIT`]s the bytes lie in are opened. A checked framing, or a
/// range that is empty, past the block or over two segments, is an error.
pub fn open_slot_range(
    key: &str,
    block_len: usize,
    (from, to): (usize, usize),
    slot: &[u8],
    framing: &Framing,
) -> std::io::Result<RangeRead> {
    let segment = from / SEGMENT;
    let Framing::Sealed(keys) = framing else {
        return Err(io_error("a checked cache file has no sealed slots"));
    };
    if from >= to || to > block_len || (to - 1) / SEGMENT != segment {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("bytes {from}..{to} of a {block_len}-byte block are not in one segment"),
        ));
    }
    let (first, last) = (from / UNIT, (to - 1) / UNIT);
    let unit_len = |k: usize| (block_len - k * UNIT).min(UNIT);
    let mut out = vec![0u8; (last - first) * UNIT + unit_len(last)];
    let ring = keys.ring();
    let mut opener = ring.opener(Domain::Cache, key);
    let slot_first = segment * (SEGMENT / UNIT);
    for k in first..=last {
        let at = (k - slot_first) * UNIT_STRIDE;
        let len = unit_len(k);
        let (Some(sealed), Ok(index)) = (slot.get(at..at + len + SEALED_TRAILER), u32::try_from(k))
        else {
            return Ok(RangeRead::Damaged(segment));
        };
        if &sealed[len..len + 4] != SEALED_TAG {
            return Ok(RangeRead::Absent(segment));
        }
        let place = &mut out[(k - first) * UNIT..(k - first) * UNIT + len];
        if opener
            .open_into(index, sealed, &[SEALED_TAG], place)
            .is_err()
        {
            return Ok(RangeRead::Damaged(segment));
        }
    }
    let start = from - first * UNIT;
    Ok(RangeRead::Held(
        Bytes::from(out).slice(start..start + (to - from)),
    ))
}

/// Read into `buf` from `offset` until it is full or the file ends; returns bytes read.
fn read_full_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        let at = offset + u64::try_from(done).unwrap_or(u64::MAX);
        match file.read_at(&mut buf[done..], at) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// The whole block from its file, every segment verified; `Err(index)` names the first
/// segment absent or damaged (with whether it was damaged).
pub fn read_whole(
    file: &File,
    key: &str,
    block_len: usize,
    framing: &Framing,
) -> std::io::Result<Result<Bytes, (usize, bool)>> {
    if block_len == 0 {
        return Ok(Ok(Bytes::new()));
    }
    let last = segment_count(block_len) - 1;
    let (mut buf, states) = read_checked(file, key, block_len, (0, last), framing)?;
    if let Some(i) = states.iter().position(|s| *s != SlotState::Held) {
        return Ok(Err((i, states[i] == SlotState::Damaged)));
    }
    if let Framing::Checked = framing {
        framing.compact(block_len, (0, last), &mut buf);
    }
    buf.truncate(block_len);
    Ok(Ok(Bytes::from(buf)))
}

/// Create the directories above `path`, the owner's alone.
fn create_parents(path: &Path) -> std::io::Result<()> {
    match path.parent() {
        Some(parent) => std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent),
        None => Ok(()),
    }
}

/// Write a whole block as a new file at `path` (written to a temporary name and renamed,
/// so no reader sees it half written).
pub fn write_whole(path: &Path, key: &str, data: &Bytes, framing: &Framing) -> std::io::Result<()> {
    create_parents(path)?;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!("{TMP_MARK}{:08x}", rand::random::<u32>()));
    let tmp = PathBuf::from(tmp);
    let segments: Vec<Bytes> = (0..segment_count(data.len()))
        .map(|i| data.slice(i * SEGMENT..i * SEGMENT + segment_len(data.len(), i)))
        .collect();
    let framed = framing.framed_run(key, 0, &segments)?;
    let write = || -> std::io::Result<()> {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        file.write_all(&framed)?;
        std::fs::rename(&tmp, path)
    };
    let result = write();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Write segments `first..` of a block into their slots of the file at `path` (created
/// sparse if missing).
pub fn write_slots(
    path: &Path,
    key: &str,
    first: usize,
    segments: &[Bytes],
    framing: &Framing,
) -> std::io::Result<()> {
    let framed = framing.framed_run(key, first, segments)?;
    create_parents(path)?;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)?;
    file.write_all_at(&framed, framing.offset_of(first))
}

/// Which segments of a block of `block_len` bytes the file may hold: those whose slots lie
/// wholly in its allocated extents (a slot never written is a hole). Where the file system
/// cannot tell holes from data, every slot within the file's length counts (reading one
/// that is a hole then finds it absent).
pub fn slots_on_disk(
    file: &File,
    block_len: usize,
    framing: &Framing,
) -> std::io::Result<Vec<bool>> {
    let len = file.metadata()?.len();
    let extents = data_extents(file, len)?;
    Ok((0..segment_count(block_len))
        .map(|i| {
            let start = framing.offset_of(i);
            let stored = framing.stored_len(segment_len(block_len, i));
            let end = start + u64::try_from(stored).unwrap_or(u64::MAX);
            extents.iter().any(|&(a, b)| a <= start && end <= b)
        })
        .collect())
}

/// The allocated `[start, end)` extents of a file of `len` bytes.
fn data_extents(file: &File, len: u64) -> std::io::Result<Vec<(u64, u64)>> {
    use nix::unistd::{Whence, lseek};
    let to_off = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    let mut extents = Vec::new();
    let mut pos = 0u64;
    while pos < len {
        let start = match lseek(file, to_off(pos), Whence::SeekData) {
            Ok(s) => u64::try_from(s).unwrap_or(len),
            Err(nix::errno::Errno::ENXIO) => break,
            Err(nix::errno::Errno::EINVAL) => return Ok(vec![(0, len)]),
            Err(e) => return Err(e.into()),
        };
        let end = match lseek(file, to_off(start), Whence::SeekHole) {
            Ok(e) => u64::try_from(e).unwrap_or(len),
            Err(e) => return Err(e.into()),
        };
        if end <= start {
            break;
        }
        extents.push((start, end));
        pos = end;
    }
    Ok(extents)
}

mod scatter;
#[cfg(test)]
mod tests;
