//! Checksums recorded for foreign blocks (docs/FORMAT.md, "Foreign block checksums"):
//! JuiceFS's plain blocks carry none, so `fsck --verify --record-checksums` reads each
//! once and puts beside it an object `{block}.sums` holding the CRC32C of every
//! [`SEGMENT`] of its payload; once the volume says every foreign block has one, reads
//! check them (a ranged read is widened to whole segments). The object:
//!
//! `b"SFSUMS01"`, segment size (u32 LE), segment count (u32 LE), one CRC32C (u32 LE) per
//! segment, and a CRC32C (u32 LE) of everything before it.

use bytes::{BufMut, Bytes, BytesMut};

use crate::checksum::SEGMENT;

const MAGIC: &[u8; 8] = b"SFSUMS01";
/// What follows a block's key in the name of its checksums object.
pub const SUFFIX: &str = ".sums";

/// The name of the checksums object of block `key`.
pub fn sums_key(key: &str) -> String {
    format!("{key}{SUFFIX}")
}

/// The checksums object of a block whose payload is `payload`.
pub fn encode(payload: &[u8]) -> Bytes {
    let count = payload.len().div_ceil(SEGMENT);
    let mut out = BytesMut::with_capacity(16 + 4 * count + 4);
    out.put_slice(MAGIC);
    out.put_u32_le(u32::try_from(SEGMENT).unwrap_or(u32::MAX));
    out.put_u32_le(u32::try_from(count).unwrap_or(u32::MAX));
    for segment in payload.chunks(SEGMENT) {
        out.put_u32_le(crc32c::crc32c(segment));
    }
    let whole = crc32c::crc32c(&out);
    out.put_u32_le(whole);
    out.freeze()
}

/// A block's recorded segment checksums.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sums {
    crcs: Vec<u32>,
}

fn le32(bytes: &[u8], at: usize) -> Option<u32> {
    let b: [u8; 4] = bytes.get(at..at + 4)?.try_into().ok()?;
    Some(u32::from_le_bytes(b))
}

impl Sums {
    /// Read a checksums object.
    pub fn decode(stored: &[u8]) -> Result<Sums, String> {
        let bad = |why: &str| format!("its checksums object: {why}");
        if stored.len() < 20 || &stored[..8] != MAGIC {
            return Err(bad("not one"));
        }
        let end = stored.len() - 4;
        if le32(stored, end) != Some(crc32c::crc32c(&stored[..end])) {
            return Err(bad("damaged"));
        }
        if le32(stored, 8).and_then(|s| usize::try_from(s).ok()) != Some(SEGMENT) {
            return Err(bad("another segment size"));
        }
        let count = le32(stored, 12)
            .and_then(|c| usize::try_from(c).ok())
            .ok_or_else(|| bad("no count"))?;
        if end != 16 + 4 * count {
            return Err(bad("cut short"));
        }
        let crcs = (0..count)
            .map(|i| le32(stored, 16 + 4 * i).unwrap_or(0))
            .collect();
        Ok(Sums { crcs })
    }

    /// Check `bytes`, which are the payload of a `block_len`-byte block from offset
    /// `from` (a segment boundary) to a segment boundary or the block's end.
    pub fn check(&self, block_len: usize, from: usize, bytes: &[u8]) -> Result<(), String> {
        if self.crcs.len() != block_len.div_ceil(SEGMENT) {
            return Err(format!(
                "{} checksums recorded for a {block_len}-byte block",
                self.crcs.len()
            ));
        }
        let first = from / SEGMENT;
        for (i, segment) in bytes.chunks(SEGMENT).enumerate() {
            let index = first + i;
            if self.crcs.get(index) != Some(&crc32c::crc32c(segment)) {
                return Err(format!(
                    "segment {index} does not match its recorded checksum"
                ));
            }
        }
        Ok(())
    }
}
