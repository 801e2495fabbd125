//! Reading sealed units without moving them: one `preadv` puts each unit's ciphertext
//! straight where its plaintext belongs and its trailer aside, and each unit is opened
//! there, so a run of segments comes out contiguous with no copy after the read (the
//! plain way reads the file as it lies and moves every unit down over the trailers before
//! it, a second pass over the bytes).

use std::fs::File;
use std::io::IoSliceMut;

use nix::errno::Errno;
use nix::sys::uio::preadv;
use strata_object::seal::{Domain, Keys, SEALED_TRAILER};

use super::{Framing, SlotState, open_unit_apart};

/// Most units one `preadv` reads: two buffers each, within the kernel's `IOV_MAX` (1024).
const UNITS_PER_CALL: usize = 512;

/// Segments `first..=last` of the sealed file of block `key` (`block_len` bytes), opened:
/// their plaintext, contiguous from segment `first` on, and what each slot holds. `None`
/// when the file ends before them (slots past its end were never written: read them the
/// plain way, which sees them absent).
pub(super) fn read_opened(
    file: &File,
    (key, keys): (&str, &Keys),
    block_len: usize,
    (first, last): (usize, usize),
    framing: &Framing,
) -> std::io::Result<Option<(Vec<u8>, Vec<SlotState>)>> {
    let pieces = framing.pieces(block_len, (first, last));
    let Some(end) = pieces.last().map(|p| p.plain + p.len) else {
        return Ok(Some((Vec::new(), Vec::new())));
    };
    let mut out = vec![0u8; end];
    let mut trailers = vec![0u8; pieces.len() * SEALED_TRAILER];
    let base = framing.offset_of(first);
    let mut out_rest: &mut [u8] = &mut out;
    let mut trailer_rest: &mut [u8] = &mut trailers;
    for group in pieces.chunks(UNITS_PER_CALL) {
        let mut iov = Vec::with_capacity(2 * group.len());
        let mut want = 0;
        for p in group {
            let (text, rest) = std::mem::take(&mut out_rest).split_at_mut(p.len);
            out_rest = rest;
            let (trailer, rest) = std::mem::take(&mut trailer_rest).split_at_mut(SEALED_TRAILER);
            trailer_rest = rest;
            iov.push(IoSliceMut::new(text));
            iov.push(IoSliceMut::new(trailer));
            want += p.len + SEALED_TRAILER;
        }
        let at = base + u64::try_from(group[0].stored).unwrap_or(u64::MAX);
        let at = i64::try_from(at).map_err(std::io::Error::other)?;
        let got = loop {
            match preadv(file, &mut iov, at) {
                Err(Errno::EINTR) => {}
                other => break other?,
            }
        };
        if got < want {
            return Ok(None);
        }
    }
    let ring = keys.ring();
    let mut opener = ring.opener(Domain::Cache, key);
    let mut states = vec![SlotState::Held; last + 1 - first];
    for (p, trailer) in pieces.iter().zip(trailers.chunks(SEALED_TRAILER)) {
        let text = &mut out[p.plain..p.plain + p.len];
        let state = open_unit_apart(&mut opener, p.index, text, trailer);
        let slot = &mut states[p.segment - first];
        *slot = (*slot).worst(state);
    }
    Ok(Some((out, states)))
}
