//! The file of one block in the disk cache (FORMAT.md, "cache v2" and "cache v3"): a
//! sparse file with a slot per segment of the block. With [`Framing::Checked`] slot `i`
//! starts at `i × (SEGMENT + 8)` and holds the segment's bytes followed by an 8-byte
//! trailer: a CRC32C bound to the block's key, the segment's index and length, then the
//! tag `CSG2`. With [`Framing::Sealed`] (an encrypted volume) slot `i` starts at
//! `i × (SEGMENT + 36)` and holds the segment sealed under a cache key derived from the
//! volume's data key and the block's key, tagged `CSE3` (`strata_object::seal`): the disk
//! holds no plaintext. A slot never written is a hole and reads as zeros (no tag): the
//! segment is simply not cached. A slot whose tag is there but whose bytes fail their
//! check is damaged. Everything here is blocking file I/O, run on the blocking pool by the
//! cache.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use std::sync::Arc;

use bytes::Bytes;
use strata_object::checksum::SEGMENT;
use strata_object::seal::{Domain, Keys, SEALED_TRAILER};

/// Bytes after each cached segment of a checked (unencrypted) file.
pub const TRAILER: usize = 8;
/// Bytes from one slot to the next in a checked file.
pub const STRIDE: usize = SEGMENT + TRAILER;
const TAG: &[u8; 4] = b"CSG2";
const SEALED_TAG: &[u8; 4] = b"CSE3";

/// How the segments of a cache file are protected.
#[derive(Debug, Clone, Default)]
pub enum Framing {
    /// A CRC32C per segment (a plain volume).
    #[default]
    Checked,
    /// Sealed with the volume's keys (an encrypted volume).
    Sealed(Arc<Keys>),
}

impl Framing {
    /// Bytes after each segment.
    pub fn trailer(&self) -> usize {
        match self {
            Framing::Checked => TRAILER,
            Framing::Sealed(_) => SEALED_TRAILER,
        }
    }

    /// Bytes from one slot to the next.
    pub fn stride(&self) -> usize {
        SEGMENT + self.trailer()
    }

    /// The subdirectory of a cache directory holding files of this framing.
    pub fn dir_name(&self) -> &'static str {
        match self {
            Framing::Checked => "seg2",
            Framing::Sealed(_) => "sealed3",
        }
    }

    fn offset_of(&self, index: usize) -> u64 {
        u64::try_from(index.saturating_mul(self.stride())).unwrap_or(u64::MAX)
    }

    /// The stored form of segments `first..` (each followed by its trailer), as one buffer.
    fn framed_run(&self, key: &str, first: usize, segments: &[Bytes]) -> std::io::Result<Vec<u8>> {
        let mut out = Vec::with_capacity(segments.len() * self.stride());
        match self {
            Framing::Checked => {
                for (i, data) in segments.iter().enumerate() {
                    out.extend_from_slice(data);
                    out.extend_from_slice(&trailer(key, first + i, data));
                }
            }
            Framing::Sealed(keys) => {
                let sealer = keys.ring().sealer(Domain::Cache, key).map_err(io_error)?;
                for (i, data) in segments.iter().enumerate() {
                    let at = out.len();
                    out.extend_from_slice(data);
                    let index = u32::try_from(first + i).map_err(io_error)?;
                    let t = sealer
                        .seal(index, SEALED_TAG, &mut out[at..])
                        .map_err(io_error)?;
                    out.extend_from_slice(&t);
                }
            }
        }
        Ok(out)
    }

    /// What the slots `first..=last` of a block of `block_len` bytes, read into `buf`
    /// from slot `first` on, hold; sealed slots are opened in place (their plaintext then
    /// lies where their ciphertext was).
    fn check_slots(
        &self,
        key: &str,
        block_len: usize,
        (first, last): (usize, usize),
        buf: &mut [u8],
    ) -> Vec<SlotState> {
        let stride = self.stride();
        let place = |i: usize| ((i - first) * stride, segment_len(block_len, i));
        let Framing::Sealed(keys) = self else {
            return (first..=last)
                .map(|i| {
                    let (at, len) = place(i);
                    check_slot(key, i, buf, at, len)
                })
                .collect();
        };
        let ring = keys.ring();
        let mut opener = ring.opener(Domain::Cache, key);
        (first..=last)
            .map(|i| {
                let (at, len) = place(i);
                let (Some(sealed), Ok(index)) =
                    (buf.get_mut(at..at + len + SEALED_TRAILER), u32::try_from(i))
                else {
                    return SlotState::Damaged;
                };
                if &sealed[len..len + 4] != SEALED_TAG {
                    return SlotState::Absent;
                }
                match opener.open_in_place(index, sealed, &[SEALED_TAG]) {
                    Ok(_) => SlotState::Held,
                    Err(_) => SlotState::Damaged,
                }
            })
            .collect()
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
    block_len + segment_count(block_len) * framing.trailer()
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
    (first, last): (usize, usize),
    framing: &Framing,
) -> std::io::Result<Vec<Slot>> {
    let stride = framing.stride();
    let span = (last - first) * stride + segment_len(block_len, last) + framing.trailer();
    let mut buf = vec![0u8; span];
    let got = read_full_at(file, &mut buf, framing.offset_of(first))?;
    buf.truncate(got);
    let states = framing.check_slots(key, block_len, (first, last), &mut buf);
    let buf = Bytes::from(buf);
    Ok((first..=last)
        .zip(states)
        .map(|(i, state)| {
            let (at, len) = ((i - first) * stride, segment_len(block_len, i));
            match state {
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
    framing: &Framing,
) -> std::io::Result<Result<Bytes, (usize, bool)>> {
    let mut buf = vec![0u8; full_file_len(block_len, framing)];
    let got = read_full_at(file, &mut buf, 0)?;
    buf.truncate(got);
    let last = segment_count(block_len).saturating_sub(1);
    if block_len > 0 {
        let states = framing.check_slots(key, block_len, (0, last), &mut buf);
        for (i, state) in states.into_iter().enumerate() {
            match state {
                SlotState::Held => {}
                SlotState::Absent => return Ok(Err((i, false))),
                SlotState::Damaged => return Ok(Err((i, true))),
            }
        }
    }
    // Verified (and opened): move each segment down over the trailers before it.
    let stride = framing.stride();
    for i in 1..segment_count(block_len) {
        let at = i * stride;
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
            let end =
                start + u64::try_from(segment_len(block_len, i) + framing.trailer()).unwrap_or(0);
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
mod tests;
