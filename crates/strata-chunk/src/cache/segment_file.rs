//! The file of one block in the disk cache (FORMAT.md, "cache v2"): a sparse file with a
//! slot per segment of the block. Slot `i` starts at `i × (SEGMENT + 8)` and holds the
//! segment's bytes followed by an 8-byte trailer: a CRC32C bound to the block's key, the
//! segment's index and length, then the tag `CSG2`. A slot never written is a hole and
//! reads as zeros (no tag): the segment is simply not cached. A slot whose tag is there
//! but whose checksum fails is damaged. Everything here is blocking file I/O, run on the
//! blocking pool by the cache.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use bytes::Bytes;
use strata_object::checksum::SEGMENT;

/// Bytes after each cached segment.
pub const TRAILER: usize = 8;
/// Bytes from one slot to the next.
pub const STRIDE: usize = SEGMENT + TRAILER;
const TAG: &[u8; 4] = b"CSG2";
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
pub fn full_file_len(block_len: usize) -> usize {
    block_len + segment_count(block_len) * TRAILER
}

fn offset_of(index: usize) -> u64 {
    u64::try_from(index.saturating_mul(STRIDE)).unwrap_or(u64::MAX)
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

/// The slots `first..=last` of the cached block `key` (`block_len` bytes), read in one
/// `pread`.
pub fn read_slots(
    file: &File,
    key: &str,
    block_len: usize,
    first: usize,
    last: usize,
) -> std::io::Result<Vec<Slot>> {
    let span = (last - first) * STRIDE + segment_len(block_len, last) + TRAILER;
    let mut buf = vec![0u8; span];
    let got = read_full_at(file, &mut buf, offset_of(first))?;
    buf.truncate(got);
    let buf = Bytes::from(buf);
    Ok((first..=last)
        .map(|i| {
            let (at, len) = ((i - first) * STRIDE, segment_len(block_len, i));
            match check_slot(key, i, &buf, at, len) {
                SlotState::Absent => Slot::Absent,
                SlotState::Damaged => Slot::Damaged,
                SlotState::Held => Slot::Held(buf.slice(at..at + len)),
            }
        })
        .collect())
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
) -> std::io::Result<Result<Bytes, (usize, bool)>> {
    let mut buf = vec![0u8; full_file_len(block_len)];
    let got = read_full_at(file, &mut buf, 0)?;
    buf.truncate(got);
    for i in 0..segment_count(block_len) {
        match check_slot(key, i, &buf, i * STRIDE, segment_len(block_len, i)) {
            SlotState::Held => {}
            SlotState::Absent => return Ok(Err((i, false))),
            SlotState::Damaged => return Ok(Err((i, true))),
        }
    }
    // Verified: move each segment down over the trailers before it, in place.
    for i in 1..segment_count(block_len) {
        let at = i * STRIDE;
        buf.copy_within(at..at + segment_len(block_len, i), i * SEGMENT);
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

/// The stored form of segments `first..` (each followed by its trailer), as one buffer.
fn framed_run(key: &str, first: usize, segments: &[Bytes]) -> Vec<u8> {
    let mut out = Vec::with_capacity(segments.len() * STRIDE);
    for (i, data) in segments.iter().enumerate() {
        out.extend_from_slice(data);
        out.extend_from_slice(&trailer(key, first + i, data));
    }
    out
}

/// Write a whole block as a new file at `path` (written to a temporary name and renamed,
/// so no reader sees it half written).
pub fn write_whole(path: &Path, key: &str, data: &Bytes) -> std::io::Result<()> {
    create_parents(path)?;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!("{TMP_MARK}{:08x}", rand::random::<u32>()));
    let tmp = PathBuf::from(tmp);
    let segments: Vec<Bytes> = (0..segment_count(data.len()))
        .map(|i| data.slice(i * SEGMENT..i * SEGMENT + segment_len(data.len(), i)))
        .collect();
    let write = || -> std::io::Result<()> {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        file.write_all(&framed_run(key, 0, &segments))?;
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
) -> std::io::Result<()> {
    create_parents(path)?;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)?;
    file.write_all_at(&framed_run(key, first, segments), offset_of(first))
}

/// Which segments of a block of `block_len` bytes the file may hold: those whose slots lie
/// wholly in its allocated extents (a slot never written is a hole). Where the file system
/// cannot tell holes from data, every slot within the file's length counts (reading one
/// that is a hole then finds it absent).
pub fn slots_on_disk(file: &File, block_len: usize) -> std::io::Result<Vec<bool>> {
    let len = file.metadata()?.len();
    let extents = data_extents(file, len)?;
    Ok((0..segment_count(block_len))
        .map(|i| {
            let start = offset_of(i);
            let end = start + u64::try_from(segment_len(block_len, i) + TRAILER).unwrap_or(0);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn block(len: usize) -> Bytes {
        Bytes::from(
            (0..len)
                .map(|i| u8::try_from(i * 31 % 251).unwrap())
                .collect::<Vec<u8>>(),
        )
    }

    #[test]
    fn slots_hold_what_was_written_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a/b/1_0_100000");
        let key = "chunks/1_0_100000";
        let data = block(100_000);
        let seg = |i: usize| data.slice(i * SEGMENT..i * SEGMENT + segment_len(data.len(), i));
        write_slots(&path, key, 1, &[seg(1)]).unwrap();
        write_slots(&path, key, 3, &[seg(3)]).unwrap();
        let file = File::open(&path).unwrap();
        let slots = read_slots(&file, key, data.len(), 0, 3).unwrap();
        assert_eq!(
            slots,
            vec![
                Slot::Absent,
                Slot::Held(seg(1)),
                Slot::Absent,
                Slot::Held(seg(3))
            ]
        );
        assert_eq!(read_whole(&file, key, data.len()).unwrap(), Err((0, false)));
        let on_disk = slots_on_disk(&file, data.len()).unwrap();
        assert!(
            on_disk[1] && on_disk[3],
            "written slots are data: {on_disk:?}"
        );
        write_slots(&path, key, 0, &[seg(0)]).unwrap();
        write_slots(&path, key, 2, &[seg(2)]).unwrap();
        assert_eq!(
            read_whole(&file, key, data.len()).unwrap(),
            Ok(data.clone())
        );
        // The same bytes under another key do not verify.
        assert_eq!(
            read_slots(&file, "other", data.len(), 1, 1).unwrap(),
            vec![Slot::Damaged]
        );
    }

    #[test]
    fn a_flipped_bit_damages_exactly_its_segment() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k");
        let data = block(3 * SEGMENT + 5);
        write_whole(&path, "k", &data).unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            full_file_len(data.len()) as u64
        );
        let mut raw = std::fs::read(&path).unwrap();
        raw[2 * STRIDE + 7] ^= 0x10;
        std::fs::write(&path, raw).unwrap();
        let file = File::open(&path).unwrap();
        let slots = read_slots(&file, "k", data.len(), 0, 3).unwrap();
        assert!(matches!(slots[1], Slot::Held(_)));
        assert_eq!(slots[2], Slot::Damaged);
        assert_eq!(slots[3], Slot::Held(data.slice(3 * SEGMENT..)));
        assert_eq!(read_whole(&file, "k", data.len()).unwrap(), Err((2, true)));
    }
}
