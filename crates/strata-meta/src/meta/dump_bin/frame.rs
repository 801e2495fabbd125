//! The frames of a binary dump (dump v2, docs/FORMAT.md): after an 8-byte magic, a
//! sequence of frames, each `kind u8 | raw length u32 | stored length u32 | CRC-32C u32 |
//! stored bytes` (integers little-endian; the stored bytes are the raw bytes compressed
//! with zstd, the checksum is over the stored bytes). A header frame (JSON) comes first,
//! pair frames (key/value records) next, an end frame (JSON, with the counts) last.
//! This module owns the byte layout only; `write.rs` and `read.rs` what goes in it.

use std::io::{Read, Write};

use crate::error::{MetaError, Result};

/// First bytes of a binary dump.
pub const MAGIC: &[u8; 8] = b"STRDUMP2";
/// Bytes of a frame's fixed part.
const FRAME_HEAD: usize = 13;
/// The most raw or stored bytes one frame may hold: a reader never allocates more.
pub const MAX_FRAME: usize = 64 << 20;
/// zstd level: the fastest, the dump is bound by the engine and this one core.
const LEVEL: i32 = 1;

/// What a frame holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameKind {
    /// The dump's header: format record and layout version (JSON).
    Header = 1,
    /// Key/value records: `key length u16 | key | value length u32 | value`, repeated.
    Pairs = 2,
    /// The last frame: counts of what came before (JSON).
    End = 3,
}

impl FrameKind {
    fn of(code: u8) -> Option<FrameKind> {
        match code {
            1 => Some(FrameKind::Header),
            2 => Some(FrameKind::Pairs),
            3 => Some(FrameKind::End),
            _ => None,
        }
    }
}

fn invalid(what: impl std::fmt::Display) -> MetaError {
    MetaError::Invalid(format!("binary dump: {what}"))
}

/// Append one key/value record to a pairs frame's raw bytes.
pub fn push_pair(raw: &mut Vec<u8>, key: &[u8], value: &[u8]) -> Result<()> {
    let klen = u16::try_from(key.len()).map_err(|_| invalid("key longer than 64 KiB"))?;
    let vlen = u32::try_from(value.len()).map_err(|_| invalid("value longer than 4 GiB"))?;
    raw.extend_from_slice(&klen.to_le_bytes());
    raw.extend_from_slice(key);
    raw.extend_from_slice(&vlen.to_le_bytes());
    raw.extend_from_slice(value);
    Ok(())
}

/// The key/value records of a pairs frame's raw bytes, in order.
pub fn pairs(raw: &[u8]) -> Result<Vec<(&[u8], &[u8])>> {
    let mut out = Vec::new();
    let mut rest = raw;
    while !rest.is_empty() {
        let (key, after) = take(rest, 2)?;
        rest = after;
        let (value, after) = take(rest, 4)?;
        rest = after;
        out.push((key, value));
    }
    Ok(out)
}

/// A length of `width` bytes, then that many bytes.
fn take(bytes: &[u8], width: usize) -> Result<(&[u8], &[u8])> {
    let (len, rest) = bytes
        .split_at_checked(width)
        .ok_or_else(|| invalid("a record is cut off"))?;
    let mut le = [0u8; 4];
    le[..width].copy_from_slice(len);
    let len = usize::try_from(u32::from_le_bytes(le)).map_err(|_| invalid("record too long"))?;
    rest.split_at_checked(len)
        .ok_or_else(|| invalid("a record is cut off"))
}

/// One frame, compressed and checksummed, ready to write.
pub fn seal(kind: FrameKind, raw: &[u8]) -> Result<Vec<u8>> {
    if raw.len() > MAX_FRAME {
        return Err(invalid("frame too large"));
    }
    let stored = zstd::bulk::compress(raw, LEVEL).map_err(invalid)?;
    let raw_len = u32::try_from(raw.len()).map_err(|_| invalid("frame too large"))?;
    let stored_len = u32::try_from(stored.len()).map_err(|_| invalid("frame too large"))?;
    let mut frame = Vec::with_capacity(FRAME_HEAD + stored.len());
    frame.push(kind as u8);
    frame.extend_from_slice(&raw_len.to_le_bytes());
    frame.extend_from_slice(&stored_len.to_le_bytes());
    frame.extend_from_slice(&crc32c::crc32c(&stored).to_le_bytes());
    frame.extend_from_slice(&stored);
    Ok(frame)
}

/// Write the magic that starts a binary dump.
pub fn write_magic(out: &mut (dyn Write + Send)) -> Result<()> {
    out.write_all(MAGIC)
        .map_err(|e| invalid(format!("writing: {e}")))
}

/// Whether `head` (a file's first bytes) starts a binary dump.
pub fn is_binary(head: &[u8]) -> bool {
    head.starts_with(MAGIC)
}

/// A frame as read: its kind, its offset in the file, and its stored (compressed) bytes.
pub struct StoredFrame {
    pub kind: FrameKind,
    pub offset: u64,
    raw_len: usize,
    stored: Vec<u8>,
}

impl StoredFrame {
    /// Bytes the frame takes in the file.
    pub fn size(&self) -> u64 {
        u64::try_from(FRAME_HEAD + self.stored.len()).unwrap_or(u64::MAX)
    }

    /// The raw bytes, decompressed and checked against the length the frame states.
    pub fn open(&self) -> Result<Vec<u8>> {
        let raw = zstd::bulk::decompress(&self.stored, self.raw_len)
            .map_err(|e| invalid(format!("frame at byte {}: {e}", self.offset)))?;
        if raw.len() != self.raw_len {
            return Err(invalid(format!(
                "frame at byte {}: {} bytes where it states {}",
                self.offset,
                raw.len(),
                self.raw_len
            )));
        }
        Ok(raw)
    }
}

/// Reads frames one after the other, checking the magic first and each frame's
/// checksum.
pub struct FrameReader<R> {
    input: R,
    offset: u64,
}

impl<R: Read> FrameReader<R> {
    /// A reader of `input`, whose first bytes must be the magic.
    pub fn new(mut input: R) -> Result<FrameReader<R>> {
        let mut magic = [0u8; 8];
        input.read_exact(&mut magic).map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => {
                invalid("not a binary dump (shorter than its 8-byte magic)")
            }
            _ => invalid(format!("reading: {e}")),
        })?;
        if &magic != MAGIC {
            return Err(invalid(
                "not a binary dump (its first bytes are not STRDUMP2)",
            ));
        }
        Ok(FrameReader {
            input,
            offset: u64::try_from(MAGIC.len()).unwrap_or(0),
        })
    }

    /// The next frame, or `None` at the end of the input.
    pub fn next_frame(&mut self) -> Result<Option<StoredFrame>> {
        let mut head = [0u8; FRAME_HEAD];
        match read_full(&mut self.input, &mut head) {
            Ok(0) => return Ok(None),
            Ok(n) if n == FRAME_HEAD => {}
            Ok(_) => return Err(invalid(format!("cut off at byte {}", self.offset))),
            Err(e) => return Err(invalid(format!("reading: {e}"))),
        }
        let at = self.offset;
        let kind = FrameKind::of(head[0])
            .ok_or_else(|| invalid(format!("unknown frame kind {} at byte {at}", head[0])))?;
        let word = |i: usize| u32::from_le_bytes([head[i], head[i + 1], head[i + 2], head[i + 3]]);
        let raw_len = usize::try_from(word(1)).map_err(|_| invalid("frame too large"))?;
        let stored_len = usize::try_from(word(5)).map_err(|_| invalid("frame too large"))?;
        if raw_len > MAX_FRAME || stored_len > MAX_FRAME + MAX_FRAME / 8 {
            return Err(invalid(format!(
                "frame at byte {at} states an impossible size"
            )));
        }
        let mut stored = vec![0u8; stored_len];
        self.input
            .read_exact(&mut stored)
            .map_err(|e| invalid(format!("frame at byte {at} cut off: {e}")))?;
        if crc32c::crc32c(&stored) != word(9) {
            return Err(invalid(format!(
                "frame at byte {at} is damaged (checksum mismatch)"
            )));
        }
        let frame = StoredFrame {
            kind,
            offset: at,
            raw_len,
            stored,
        };
        self.offset += frame.size();
        Ok(Some(frame))
    }
}

/// Fill `buf` as far as the input goes; the bytes read (short only at its end).
fn read_full(input: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match input.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn file_of(frames: &[(FrameKind, Vec<u8>)]) -> Vec<u8> {
        let mut file = MAGIC.to_vec();
        for (kind, raw) in frames {
            file.extend(seal(*kind, raw).unwrap());
        }
        file
    }

    fn read_all(file: &[u8]) -> Result<Vec<(FrameKind, Vec<u8>)>> {
        let mut reader = FrameReader::new(file)?;
        let mut out = Vec::new();
        while let Some(frame) = reader.next_frame()? {
            out.push((frame.kind, frame.open()?));
        }
        Ok(out)
    }

    proptest! {
        #[test]
        fn pairs_round_trip(records in proptest::collection::vec(
            (proptest::collection::vec(any::<u8>(), 0..300),
             proptest::collection::vec(any::<u8>(), 0..3000)), 0..50)) {
            let mut raw = Vec::new();
            for (k, v) in &records {
                push_pair(&mut raw, k, v).unwrap();
            }
            let file = file_of(&[(FrameKind::Header, b"{}".to_vec()), (FrameKind::Pairs, raw)]);
            let frames = read_all(&file).unwrap();
            prop_assert_eq!(frames.len(), 2);
            let back: Vec<(Vec<u8>, Vec<u8>)> = pairs(&frames[1].1)
                .unwrap()
                .into_iter()
                .map(|(k, v)| (k.to_vec(), v.to_vec()))
                .collect();
            prop_assert_eq!(back, records);
        }

        #[test]
        fn any_flipped_byte_is_caught_or_harmless(at in 0usize..400, bit in 0u8..8) {
            let mut raw = Vec::new();
            for i in 0u32..20 {
                push_pair(&mut raw, &i.to_be_bytes(), &[7u8; 30]).unwrap();
            }
            let mut file = file_of(&[(FrameKind::Pairs, raw.clone())]);
            let at = at % file.len();
            file[at] ^= 1 << bit;
            // A flipped bit in the magic, the head or the stored bytes is an error;
            // nothing decodes to different records.
            match read_all(&file) {
                Err(_) => {}
                Ok(frames) => prop_assert!(frames.len() == 1 && frames[0].1 == raw),
            }
        }

        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut file = MAGIC.to_vec();
            file.extend(bytes.iter());
            let _ = read_all(&file);
            let _ = pairs(&bytes);
        }
    }

    #[test]
    fn a_cut_off_file_is_an_error_not_a_short_dump() {
        let mut raw = Vec::new();
        push_pair(&mut raw, b"Akey", b"value").unwrap();
        let file = file_of(&[(FrameKind::Pairs, raw)]);
        for cut in MAGIC.len() + 1..file.len() {
            assert!(read_all(&file[..cut]).is_err(), "cut at {cut}");
        }
        assert!(read_all(&file[..MAGIC.len()]).unwrap().is_empty());
        assert!(read_all(b"STRDUMP1").is_err());
        let short = read_all(b"STR").unwrap_err().to_string();
        assert!(short.contains("not a binary dump"), "{short}");
    }

    #[test]
    fn a_record_cut_inside_a_frame_is_an_error() {
        let mut raw = Vec::new();
        push_pair(&mut raw, b"Akey", b"value").unwrap();
        for cut in 1..raw.len() {
            assert!(pairs(&raw[..cut]).is_err(), "cut at {cut}");
        }
    }
}
