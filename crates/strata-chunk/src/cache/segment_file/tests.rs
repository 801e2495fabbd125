//! Cache files: slots hold what was written and nothing else, and a flipped bit damages
//! exactly its segment — checked and sealed alike; sealed files hold no plaintext, and a
//! range of a sealed file reads back by opening only its units.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

use super::*;
use strata_object::seal::{Cipher, DataKey, KeyRing};

fn block(len: usize) -> Bytes {
    Bytes::from(
        (0..len)
            .map(|i| u8::try_from(i * 31 % 251).unwrap())
            .collect::<Vec<u8>>(),
    )
}

fn slots_hold_what_was_written_and_nothing_else(f: &Framing) {
    let f = f.clone();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a/b/1_0_100000");
    let key = "chunks/1_0_100000";
    let data = block(100_000);
    let seg = |i: usize| data.slice(i * SEGMENT..i * SEGMENT + segment_len(data.len(), i));
    write_slots(&path, key, 1, &[seg(1)], &f).unwrap();
    write_slots(&path, key, 3, &[seg(3)], &f).unwrap();
    let file = File::open(&path).unwrap();
    let slots = read_slots(&file, key, data.len(), (0, 3), &f).unwrap();
    assert_eq!(
        slots,
        vec![
            Slot::Absent,
            Slot::Held(seg(1)),
            Slot::Absent,
            Slot::Held(seg(3))
        ]
    );
    assert_eq!(
        read_whole(&file, key, data.len(), &f).unwrap(),
        Err((0, false))
    );
    let on_disk = slots_on_disk(&file, data.len(), &f).unwrap();
    assert!(
        on_disk[1] && on_disk[3],
        "written slots are data: {on_disk:?}"
    );
    write_slots(&path, key, 0, &[seg(0)], &f).unwrap();
    write_slots(&path, key, 2, &[seg(2)], &f).unwrap();
    assert_eq!(
        read_whole(&file, key, data.len(), &f).unwrap(),
        Ok(data.clone())
    );
    // The same bytes under another key do not verify.
    assert_eq!(
        read_slots(&file, "other", data.len(), (1, 1), &f).unwrap(),
        vec![Slot::Damaged]
    );
}

fn a_flipped_bit_damages_exactly_its_segment(f: &Framing) {
    let f = f.clone();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k");
    let data = block(3 * SEGMENT + 5);
    write_whole(&path, "k", &data, &f).unwrap();
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        full_file_len(data.len(), &f) as u64
    );
    let mut raw = std::fs::read(&path).unwrap();
    raw[2 * f.stride() + 7] ^= 0x10;
    std::fs::write(&path, raw).unwrap();
    let file = File::open(&path).unwrap();
    let slots = read_slots(&file, "k", data.len(), (0, 3), &f).unwrap();
    assert!(matches!(slots[1], Slot::Held(_)));
    assert_eq!(slots[2], Slot::Damaged);
    assert_eq!(slots[3], Slot::Held(data.slice(3 * SEGMENT..)));
    assert_eq!(
        read_whole(&file, "k", data.len(), &f).unwrap(),
        Err((2, true))
    );
}

fn framings() -> [Framing; 2] {
    let ring = KeyRing::new(1, vec![DataKey::generate(1, Cipher::Aes256Gcm).unwrap()]).unwrap();
    [
        Framing::Checked,
        Framing::Sealed(Arc::new(Keys::new(ring, None))),
    ]
}

#[test]
fn slots_hold_what_was_written_in_either_framing() {
    for f in framings() {
        slots_hold_what_was_written_and_nothing_else(&f);
    }
}

#[test]
fn a_flipped_bit_damages_exactly_its_segment_in_either_framing() {
    for f in framings() {
        a_flipped_bit_damages_exactly_its_segment(&f);
    }
}

#[test]
fn sealed_files_hold_no_plaintext_and_open_only_with_their_keys() {
    let [_, sealed] = framings();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p");
    let data = Bytes::from(b"PLANTED-CACHE-PLAINTEXT".repeat(5000));
    write_whole(&path, "p", &data, &sealed).unwrap();
    let raw = std::fs::read(&path).unwrap();
    assert!(!raw.windows(23).any(|w| w == b"PLANTED-CACHE-PLAINTEXT"));
    let [_, other] = framings();
    let file = File::open(&path).unwrap();
    assert_eq!(
        read_whole(&file, "p", data.len(), &sealed).unwrap(),
        Ok(data.clone())
    );
    assert_eq!(
        read_whole(&file, "p", data.len(), &other).unwrap(),
        Err((0, true))
    );
}

/// Bytes `[from, to)` as a cache reads them: the sealed slot, then the units in it.
fn read_range(
    file: &File,
    key: &str,
    len: usize,
    (from, to): (usize, usize),
    f: &Framing,
) -> std::io::Result<Option<RangeRead>> {
    let Some(slot) = read_sealed_slot(file, len, from / SEGMENT, f)? else {
        return Ok(None);
    };
    open_slot_range(key, len, (from, to), &slot, f).map(Some)
}

#[test]
fn a_checked_file_serves_no_ranges() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c");
    let data = block(SEGMENT + 10);
    write_whole(&path, "c", &data, &Framing::Checked).unwrap();
    let file = File::open(&path).unwrap();
    assert_eq!(
        read_range(&file, "c", data.len(), (0, 10), &Framing::Checked).unwrap(),
        None
    );
    assert!(open_slot_range("c", data.len(), (0, 10), &[0; 100], &Framing::Checked).is_err());
}

#[test]
fn a_sealed_file_is_a_row_of_sealed_units() {
    let [_, sealed] = framings();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("u");
    let data = block(2 * SEGMENT + UNIT + 1);
    write_whole(&path, "u", &data, &sealed).unwrap();
    let units = data.len().div_ceil(UNIT);
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        u64::try_from(data.len() + units * SEALED_TRAILER).unwrap()
    );
    assert_eq!(
        full_file_len(data.len(), &sealed),
        data.len() + units * SEALED_TRAILER
    );
    // A flipped byte in the second unit of segment 1 damages reads that touch it and
    // nothing else.
    let u = SEGMENT / UNIT + 1;
    let mut raw = std::fs::read(&path).unwrap();
    raw[u * (UNIT + SEALED_TRAILER) + 100] ^= 1;
    std::fs::write(&path, raw).unwrap();
    let file = File::open(&path).unwrap();
    let read = |from: usize, to: usize| read_range(&file, "u", data.len(), (from, to), &sealed);
    assert_eq!(
        read((u - 1) * UNIT, u * UNIT).unwrap(),
        Some(RangeRead::Held(data.slice((u - 1) * UNIT..u * UNIT)))
    );
    assert_eq!(
        read(u * UNIT + 5, u * UNIT + 6).unwrap(),
        Some(RangeRead::Damaged(1))
    );
    assert_eq!(
        read((u - 1) * UNIT + 1, 2 * SEGMENT).unwrap(),
        Some(RangeRead::Damaged(1))
    );
    let slots = read_slots(&file, "u", data.len(), (0, 2), &sealed).unwrap();
    assert_eq!(slots[0], Slot::Held(data.slice(..SEGMENT)));
    assert_eq!(slots[1], Slot::Damaged);
    assert_eq!(slots[2], Slot::Held(data.slice(2 * SEGMENT..)));
    // A unit read as another block's does not open.
    let other = read_range(&file, "v", data.len(), (0, 10), &sealed).unwrap();
    assert_eq!(other, Some(RangeRead::Damaged(0)));
    assert!(read(5, 5).is_err(), "an empty range is a caller's bug");
    assert!(
        read(UNIT, SEGMENT + 1).is_err(),
        "so is one over two segments"
    );
    assert!(read(2 * SEGMENT, data.len() + 1).is_err());
}

#[test]
fn a_range_in_a_segment_never_written_is_absent() {
    let [_, sealed] = framings();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h");
    let data = block(3 * SEGMENT);
    let seg = |i: usize| data.slice(i * SEGMENT..(i + 1) * SEGMENT);
    write_slots(&path, "h", 2, &[seg(2)], &sealed).unwrap();
    let file = File::open(&path).unwrap();
    let read = |from: usize, to: usize| read_range(&file, "h", data.len(), (from, to), &sealed);
    assert_eq!(read(0, 100).unwrap(), Some(RangeRead::Absent(0)));
    assert_eq!(
        read(SEGMENT + 7, 2 * SEGMENT).unwrap(),
        Some(RangeRead::Absent(1))
    );
    assert_eq!(
        read(2 * SEGMENT + 7, 3 * SEGMENT).unwrap(),
        Some(RangeRead::Held(data.slice(2 * SEGMENT + 7..)))
    );
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// Any range inside a segment of any block, written whole or segment by segment,
    /// reads back as written through ranges, slots and the whole file alike.
    #[test]
    fn every_range_of_a_sealed_file_reads_back(
        len in 1usize..(4 * SEGMENT + 2 * UNIT),
        cuts in proptest::collection::vec((0usize..1 << 20, 1usize..3 * UNIT), 1..8),
        by_segments in proptest::bool::ANY,
    ) {
        let [_, sealed] = framings();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p");
        let data = block(len);
        if by_segments {
            for i in (0..segment_count(len)).rev() {
                let piece = data.slice(i * SEGMENT..i * SEGMENT + segment_len(len, i));
                write_slots(&path, "p", i, &[piece], &sealed).unwrap();
            }
        } else {
            write_whole(&path, "p", &data, &sealed).unwrap();
        }
        let file = File::open(&path).unwrap();
        for (at, n) in cuts {
            let from = at % len;
            let segment_end = (from / SEGMENT) * SEGMENT + segment_len(len, from / SEGMENT);
            let to = (from + n).min(segment_end);
            let got = read_range(&file, "p", len, (from, to), &sealed).unwrap();
            proptest::prop_assert_eq!(got, Some(RangeRead::Held(data.slice(from..to))));
        }
        let last = segment_count(len) - 1;
        let slots = read_slots(&file, "p", len, (0, last), &sealed).unwrap();
        for (i, slot) in slots.into_iter().enumerate() {
            let want = data.slice(i * SEGMENT..i * SEGMENT + segment_len(len, i));
            proptest::prop_assert_eq!(slot, Slot::Held(want));
        }
        proptest::prop_assert_eq!(read_whole(&file, "p", len, &sealed).unwrap(), Ok(data));
    }
}

/// A sealed file read scattered straight into place (its slots all within the file) and
/// one cut short (read as it lies, the slots it lost damaged) agree on what they hold.
#[test]
fn a_sealed_file_cut_short_damages_the_slots_it_lost() {
    let [_, sealed] = framings();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e");
    let data = block(2 * SEGMENT + 500);
    let seg = |i: usize| data.slice(i * SEGMENT..(i * SEGMENT + SEGMENT).min(data.len()));
    write_slots(&path, "e", 0, &[seg(0)], &sealed).unwrap();
    write_slots(&path, "e", 2, &[seg(2)], &sealed).unwrap();
    let file = File::open(&path).unwrap();
    let slots = read_slots(&file, "e", data.len(), (0, 2), &sealed).unwrap();
    assert_eq!(
        slots,
        vec![Slot::Held(seg(0)), Slot::Absent, Slot::Held(seg(2))]
    );
    assert_eq!(
        read_whole(&file, "e", data.len(), &sealed).unwrap(),
        Err((1, false))
    );
    let len = std::fs::metadata(&path).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len - 10)
        .unwrap();
    let file = File::open(&path).unwrap();
    let slots = read_slots(&file, "e", data.len(), (0, 2), &sealed).unwrap();
    assert_eq!(slots, vec![Slot::Held(seg(0)), Slot::Absent, Slot::Damaged]);
    let slots = read_slots(&file, "e", data.len(), (2, 2), &sealed).unwrap();
    assert_eq!(slots, vec![Slot::Damaged]);
}
