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

/// Write `data` as slice `id` through `chunks`; the whole slice's record at chunk offset
/// `pos`.
#[allow(dead_code)] // not every test file writes slices
pub async fn write_slice(
    chunks: &strata_chunk::ChunkStore,
    id: u64,
    pos: u32,
    data: &[u8],
) -> strata_types::Slice {
    let mut w = chunks.writer(id, pos);
    w.write_at(0, data, None).await.unwrap();
    let size = w.finish().await.unwrap();
    strata_types::Slice {
        pos,
        id,
        size,
        off: 0,
        len: size,
    }
}
