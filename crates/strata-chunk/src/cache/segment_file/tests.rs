//! Cache files: slots hold what was written and nothing else, and a flipped bit damages
//! exactly its segment — checked and sealed alike; sealed files hold no plaintext.
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
