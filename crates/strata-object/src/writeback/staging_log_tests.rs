#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::sync::Arc;

use proptest::prelude::*;

use super::*;

fn segments(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

fn keys(recovered: &[Recovered]) -> Vec<&str> {
    recovered.iter().map(|r| r.key.as_str()).collect()
}

#[test]
fn a_put_reads_back_whole_and_in_ranges_and_goes_once_uploaded() {
    let dir = tempfile::tempdir().unwrap();
    let (log, found) = StagingLog::open(dir.path()).unwrap();
    assert!(found.is_empty());
    log.put("chunks/0/0/1_0_10", b"0123456789").unwrap();
    let read = |r| log.read("chunks/0/0/1_0_10", r).unwrap().unwrap();
    assert_eq!(&read(None)[..], b"0123456789");
    assert_eq!(&read(Some(2..5))[..], b"234");
    assert_eq!(&read(Some(8..100))[..], b"89", "clipped at the end");
    assert!(read(Some(20..30)).is_empty());
    assert!(log.read("chunks/0/0/2_0_1", None).is_none());
    assert_eq!(log.size("chunks/0/0/1_0_10"), Some(10));
    assert_eq!(log.sync().unwrap(), 1, "one put made durable");
    assert_eq!(log.sync().unwrap(), 0, "nothing new");
    let on_disk = log.disk_bytes();
    assert_eq!(on_disk, HEADER_U64 + 17 + 10);
    assert_eq!(segments(dir.path()), ["log-0000000000000001"]);
    let mode = std::fs::metadata(dir.path().join("log-0000000000000001"))
        .unwrap()
        .permits();
    assert_eq!(mode, 0o600);
    log.uploaded("chunks/0/0/1_0_10");
    assert!(log.read("chunks/0/0/1_0_10", None).is_none());
    assert!(
        segments(dir.path()).is_empty(),
        "nothing staged: no segment"
    );
    assert_eq!(log.disk_bytes(), 0);
}

trait Permits {
    fn permits(&self) -> u32;
}

impl Permits for std::fs::Metadata {
    fn permits(&self) -> u32 {
        use std::os::unix::fs::PermissionsExt;
        self.permissions().mode() & 0o777
    }
}

#[test]
fn a_restart_finds_what_was_staged_in_order_but_not_what_was_deleted() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (log, _) = StagingLog::open(dir.path()).unwrap();
        for key in ["c", "a", "b", "d"] {
            log.put(key, key.as_bytes()).unwrap();
        }
        log.delete("a").unwrap();
        log.put("b", b"bb").unwrap();
        // Dropped without uploading: as a killed process.
    }
    let (log, found) = StagingLog::open(dir.path()).unwrap();
    assert_eq!(
        keys(&found),
        ["c", "d", "b"],
        "staging order, b re-put last"
    );
    assert_eq!(found[2].size, 2);
    assert_eq!(&log.read("b", None).unwrap().unwrap()[..], b"bb");
    assert!(log.read("a", None).is_none(), "the tombstone holds");
    // New puts go to a new segment; the old one goes once its blocks are uploaded.
    log.put("e", b"e").unwrap();
    assert_eq!(segments(dir.path()).len(), 2);
    for key in ["c", "d", "b"] {
        log.uploaded(key);
    }
    assert_eq!(segments(dir.path()), ["log-0000000000000002"]);
    drop(log);
    let (_, found) = StagingLog::open(dir.path()).unwrap();
    assert_eq!(keys(&found), ["e"]);
}

#[test]
fn a_torn_record_at_the_end_is_cut_off_and_what_precedes_it_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let segment = dir.path().join("log-0000000000000001");
    {
        let (log, _) = StagingLog::open(dir.path()).unwrap();
        log.put("k1", b"first").unwrap();
        log.put("k2", b"second").unwrap();
    }
    let whole = std::fs::metadata(&segment).unwrap().len();
    // Cut in the middle of the second record's data, then a zeroed tail.
    let cut = whole - 3;
    let file = OpenOptions::new().write(true).open(&segment).unwrap();
    file.set_len(cut).unwrap();
    file.set_len(cut + 100).unwrap();
    drop(file);
    let (log, found) = StagingLog::open(dir.path()).unwrap();
    assert_eq!(keys(&found), ["k1"]);
    assert_eq!(&log.read("k1", None).unwrap().unwrap()[..], b"first");
    let first_len = HEADER_U64 + 2 + 5;
    assert_eq!(std::fs::metadata(&segment).unwrap().len(), first_len);
    // A flipped bit in a record's data fails its checksum the same way.
    drop(log);
    let mut bytes = std::fs::read(&segment).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&segment, bytes).unwrap();
    let (_, found) = StagingLog::open(dir.path()).unwrap();
    assert!(found.is_empty());
    assert!(
        segments(dir.path()).is_empty(),
        "an empty segment is removed"
    );
}

#[test]
fn segments_roll_over_and_go_oldest_first() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = StagingLog::open_with(dir.path(), 100).unwrap();
    let block = [7u8; 60];
    for key in ["a", "b", "c"] {
        log.put(key, &block).unwrap();
    }
    assert_eq!(segments(dir.path()).len(), 3, "one 85-byte record each");
    assert_eq!(log.sync().unwrap(), 3);
    // The newest uploaded first: kept, as the oldest may still need its tombstones.
    log.uploaded("c");
    log.uploaded("b");
    assert_eq!(segments(dir.path()).len(), 3);
    log.uploaded("a");
    assert!(segments(dir.path()).is_empty());
}

#[test]
fn a_block_staged_by_the_earlier_format_is_not_a_segment() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("chunks/0/0")).unwrap();
    std::fs::write(dir.path().join("chunks/0/0/1_0_1"), b"x").unwrap();
    std::fs::write(dir.path().join("log-zz"), b"x").unwrap();
    let (_, found) = StagingLog::open(dir.path()).unwrap();
    assert!(
        found.is_empty(),
        "staging v1 files are the caller's to import"
    );
}

#[test]
fn concurrent_appends_and_reclaims_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = StagingLog::open_with(dir.path(), 300).unwrap();
    let log = Arc::new(log);
    // Four writers; each marks its keys uploaded as it goes but for the last ten, so
    // segments (the one appended to too) empty out while other threads append.
    let writers: Vec<_> = (0..4u8)
        .map(|t| {
            let log = log.clone();
            std::thread::spawn(move || {
                for i in 0..200u32 {
                    let key = format!("t{t}/{i}");
                    log.put(&key, &[t; 50]).unwrap();
                    assert_eq!(&log.read(&key, None).unwrap().unwrap()[..], &[t; 50][..]);
                    if i < 190 {
                        log.uploaded(&key);
                    }
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    drop(log);
    let (log, found) = StagingLog::open_with(dir.path(), 300).unwrap();
    let found: BTreeSet<String> = found.into_iter().map(|r| r.key).collect();
    for t in 0..4u8 {
        for i in 190..200u32 {
            let key = format!("t{t}/{i}");
            assert!(found.contains(&key), "{key} lost");
            assert_eq!(&log.read(&key, None).unwrap().unwrap()[..], &[t; 50][..]);
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    Put(u8, u8),
    Delete(u8),
    Uploaded(u8),
    Restart,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..8, 0u8..40).prop_map(|(k, n)| Op::Put(k, n)),
        2 => (0u8..8).prop_map(Op::Delete),
        2 => (0u8..8).prop_map(Op::Uploaded),
        1 => Just(Op::Restart),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Against a model: a restart finds every block staged and neither uploaded nor
    /// deleted, with its latest bytes; it may find an uploaded block again (uploaded
    /// twice, harmlessly) but never a deleted one. Nothing is left on disk once nothing
    /// is staged.
    #[test]
    fn restarts_find_every_staged_block_and_no_deleted_one(
        ops in proptest::collection::vec(op(), 1..60),
        segment_bytes in 40u64..400,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, _) = StagingLog::open_with(dir.path(), segment_bytes).unwrap();
        let mut staged: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        let mut uploaded: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        for op in ops {
            match op {
                Op::Put(k, n) => {
                    let (key, data) = (format!("k{k}"), vec![k; usize::from(n)]);
                    log.put(&key, &data).unwrap();
                    uploaded.remove(&key);
                    staged.insert(key, data);
                }
                Op::Delete(k) => {
                    let key = format!("k{k}");
                    log.delete(&key).unwrap();
                    staged.remove(&key);
                    uploaded.remove(&key);
                }
                Op::Uploaded(k) => {
                    let key = format!("k{k}");
                    if let Some(data) = staged.remove(&key) {
                        log.uploaded(&key);
                        uploaded.insert(key, data);
                    }
                }
                Op::Restart => {
                    drop(log);
                    let (again, found) = StagingLog::open_with(dir.path(), segment_bytes).unwrap();
                    log = again;
                    let found: BTreeSet<String> = found.into_iter().map(|r| r.key).collect();
                    for key in staged.keys() {
                        prop_assert!(found.contains(key), "{key} was lost");
                    }
                    for key in &found {
                        prop_assert!(
                            staged.contains_key(key) || uploaded.contains_key(key),
                            "{key} came back"
                        );
                        if let Some(data) = uploaded.remove(key) {
                            staged.insert(key.clone(), data);
                        }
                    }
                    uploaded.clear();
                }
            }
            for (key, data) in &staged {
                prop_assert_eq!(&log.read(key, None).unwrap().unwrap()[..], &data[..]);
            }
            if staged.is_empty() {
                prop_assert!(segments(dir.path()).is_empty());
            }
        }
    }
}
