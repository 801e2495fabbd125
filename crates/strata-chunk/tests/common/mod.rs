//! Helpers shared by the data-layer test files.

/// `len` bytes of a deterministic pattern that differs by `seed`.
pub fn bytes(len: usize, seed: u64) -> Vec<u8> {
    (0..len as u64)
        .map(|i| {
            (i.wrapping_mul(2654435761)
                .wrapping_add(seed.wrapping_mul(97))
                >> 7) as u8
        })
        .collect()
}
