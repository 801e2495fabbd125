//! File contents a reader can attribute to exactly one write: write number `n` (≥ 1) is
//! `len` bytes whose every 8-byte word is `n` mixed with the word's position, so a read
//! that returns part of one write and part of another, zeros, or bytes shifted by any
//! amount decodes to nothing. Content 0 is the empty file.

use super::model::Content;

fn word(n: Content, i: u64) -> [u8; 8] {
    // A bijective mix (splitmix64's finalizer) of the number and the word's position.
    let mut z = n ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)).to_le_bytes()
}

/// The bytes of write `n`: `len` of them (`len` a multiple of 8, at least 16); the first
/// word holds `n` itself.
pub fn bytes(n: Content, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(&n.to_le_bytes());
    let mut i = 1u64;
    while out.len() < len {
        out.extend_from_slice(&word(n, i));
        i += 1;
    }
    out.truncate(len);
    out
}

/// Which write `data` is (0 for empty), or None when it is no write's bytes.
pub fn decode(data: &[u8], len: usize) -> Option<Content> {
    if data.is_empty() {
        return Some(0);
    }
    if data.len() != len || len < 16 {
        return None;
    }
    let n = u64::from_le_bytes(data[..8].try_into().ok()?);
    (n != 0 && data == bytes(n, len).as_slice()).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_write_decodes_to_itself_and_mixtures_to_nothing() {
        let len = 4096;
        let (a, b) = (bytes(7, len), bytes(8, len));
        assert_eq!(decode(&a, len), Some(7));
        assert_eq!(decode(&b, len), Some(8));
        assert_eq!(decode(&[], len), Some(0));
        let mut mixed = a.clone();
        mixed[2048..].copy_from_slice(&b[2048..]);
        assert_eq!(decode(&mixed, len), None);
        assert_eq!(decode(&a[..2048], len), None, "a short read");
        assert_eq!(decode(&vec![0; len], len), None, "a hole");
        let mut shifted = vec![0u8; 8];
        shifted.extend_from_slice(&a[..len - 8]);
        assert_eq!(decode(&shifted, len), None);
    }
}
