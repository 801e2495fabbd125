//! The read cache's own cases: what is remembered, and when it is trusted.

use super::*;
use crate::kv::{FieldOp, FieldUpdate};

fn only_a(key: &[u8]) -> bool {
    key.first() == Some(&b'A')
}

#[test]
fn remembers_reads_and_commits_of_cacheable_keys() {
    let cache = ReadCache::new(only_a, DEFAULT_BUDGET);
    cache.remember(b"A1", Some(b"v1"));
    cache.remember(b"A2", None);
    cache.remember(b"B1", Some(b"x"));
    assert_eq!(cache.get(b"A1"), Some(Some(b"v1".to_vec())));
    assert_eq!(cache.get(b"A2"), Some(None), "absence is remembered");
    assert_eq!(cache.get(b"B1"), None, "not cacheable");
    let ops = vec![FieldOp {
        slot: 0,
        update: FieldUpdate::Add(1),
    }];
    cache.committed(
        &[
            (b"A1".to_vec(), Write::Delete),
            (b"A2".to_vec(), Write::Put(b"v2".to_vec())),
            (b"A3".to_vec(), Write::Fields(ops)),
        ],
        None,
        1,
    );
    assert_eq!(cache.get(b"A1"), Some(None));
    assert_eq!(cache.get(b"A2"), Some(Some(b"v2".to_vec())));
    assert_eq!(cache.get(b"A3"), None, "field updates make it unknown");
    cache.forget(b"A2");
    assert_eq!(cache.get(b"A2"), None);
}

#[test]
fn a_budget_bounds_the_values_kept_and_a_sweep_gives_their_room_back() {
    let cache = ReadCache::new(only_a, 0);
    let limit = budget::Limits::within(0).entries;
    for i in 0..5 * limit {
        cache.remember(format!("A{i}").as_bytes(), Some(b"record"));
        let state = cache.state.lock();
        assert!(state.entries.len() <= limit, "over the budget at {i}");
        // Room left by removals (hashbrown's tombstones) must not make the table double:
        // its slots are what the budget pays for.
        assert!(
            state.entries.capacity() <= limit,
            "the table grew to {} values' room at {i}",
            state.entries.capacity()
        );
    }
    let last = format!("A{}", 5 * limit - 1);
    assert!(cache.holds(last.as_bytes()), "the newest value is kept");
    cache.sweep();
    assert!(
        cache.holds(last.as_bytes()),
        "recent values survive a sweep"
    );
    let big = ReadCache::new(only_a, DEFAULT_BUDGET);
    for i in 0..20_000 {
        big.remember(format!("A{i}").as_bytes(), Some(b"record"));
    }
    let room = big.state.lock().entries.capacity();
    big.sweep_at(Instant::now() + FRESH_FOR + Duration::from_secs(1));
    let state = big.state.lock();
    assert!(state.entries.is_empty(), "nothing recent is left");
    assert!(
        state.entries.capacity() < room / 4,
        "the room is given back"
    );
}

fn k(s: &str) -> Key {
    s.as_bytes().to_vec()
}

#[test]
fn read_since_needs_a_trusted_read_that_started_after_the_instant() {
    let cache = ReadCache::new(only_a, DEFAULT_BUDGET);
    cache.beat_returned(Duration::from_secs(5), None);
    let before = cache.stamp();
    let open_began = Instant::now();
    cache.remember_all([(&b"A1"[..], Some(&b"old"[..]))], Some(before), true);
    assert!(
        !cache.read_since(&[k("A1")], open_began),
        "a read that started before the open may predate a close"
    );
    let after = cache.stamp();
    cache.remember_all([(&b"A1"[..], Some(&b"new"[..]))], Some(after), true);
    assert!(cache.read_since(&[k("A1")], open_began));
    assert!(
        !cache.read_since(&[k("A1"), k("A2")], open_began),
        "A2 never read"
    );
    cache.remember_all([(&b"A2"[..], Some(&b"v"[..]))], None, true);
    assert!(
        !cache.read_since(&[k("A2")], open_began),
        "no stamp: start unknown"
    );
    cache.forget(b"A1");
    assert!(!cache.read_since(&[k("A1")], open_began));
}

#[test]
fn trusts_only_reads_covered_by_a_live_feed() {
    let cache = ReadCache::new(only_a, DEFAULT_BUDGET);
    let grace = Duration::from_secs(5);
    let g = cache.stamp();
    cache.remember_all([(&b"A1"[..], Some(&b"v1"[..]))], Some(g), true);
    assert_eq!(cache.get_trusted(&[k("A1")]), None, "no feed yet");
    cache.beat_returned(grace, None);
    assert_eq!(
        cache.get_trusted(&[k("A1")]),
        None,
        "read before the feed was up"
    );
    let g = cache.stamp();
    cache.remember_all(
        [
            (&b"A1"[..], Some(&b"v1"[..])),
            (&b"A2"[..], Some(&b"v2"[..])),
        ],
        Some(g),
        true,
    );
    cache.remember_all([(&b"A5"[..], None)], Some(g), true);
    assert_eq!(
        cache.get_trusted(&[k("A1"), k("A2")]),
        Some(vec![Some(b"v1".to_vec()), Some(b"v2".to_vec())])
    );
    assert_eq!(
        cache.get_trusted(&[k("A5")]),
        None,
        "absences are not trusted"
    );
    assert_eq!(
        cache.get_trusted(&[k("A1"), k("A9")]),
        None,
        "all or nothing"
    );
    // An invalidation between the start of a read and its storing: not trusted.
    let g = cache.stamp();
    cache.invalidate(Some(&[k("A3")]), None);
    cache.remember_all([(&b"A3"[..], Some(&b"v3"[..]))], Some(g), true);
    assert_eq!(cache.get_trusted(&[k("A3")]), None);
    assert_eq!(
        cache.get(b"A3"),
        Some(Some(b"v3".to_vec())),
        "still assumable"
    );
    cache.invalidate(Some(&[k("A1")]), None);
    assert_eq!(
        cache.get_trusted(&[k("A2")]),
        Some(vec![Some(b"v2".to_vec())])
    );
    assert_eq!(cache.get_trusted(&[k("A1")]), None, "invalidated");
    cache.feed_lost();
    assert_eq!(cache.get_trusted(&[k("A2")]), None, "feed lost");
    cache.beat_returned(grace, None);
    assert_eq!(cache.get_trusted(&[k("A2")]), None, "trust is not restored");
    let g = cache.stamp();
    cache.committed(&[(k("A4"), Write::Put(b"v4".to_vec()))], Some(g), 1);
    assert_eq!(
        cache.get_trusted(&[k("A4")]),
        Some(vec![Some(b"v4".to_vec())])
    );
    // Its own announcement keeps it; another commit's drops it.
    cache.invalidate(Some(&[k("A4")]), Some(1));
    assert_eq!(
        cache.get_trusted(&[k("A4")]),
        Some(vec![Some(b"v4".to_vec())])
    );
    cache.beat_returned(Duration::ZERO, None);
    assert_eq!(cache.get_trusted(&[k("A4")]), None, "beats fell silent");
    cache.beat_returned(grace, None);
    assert_eq!(
        cache.get_trusted(&[k("A4")]),
        Some(vec![Some(b"v4".to_vec())])
    );
    cache.invalidate(Some(&[k("A4")]), Some(2));
    assert_eq!(cache.get_trusted(&[k("A4")]), None);
    assert_eq!(
        cache.get(b"A2"),
        Some(Some(b"v2".to_vec())),
        "still assumable"
    );
}

#[test]
fn own_commits_racing_their_announcements_keep_the_newest_value() {
    let cache = ReadCache::new(only_a, DEFAULT_BUDGET);
    cache.beat_returned(Duration::from_secs(5), None);
    let put = |v: &[u8]| [(k("A1"), Write::Put(v.to_vec()))];
    // Commit 1 then commit 2 of this client, both started at g; the server applied
    // 1 before 2, and their announcements arrive in that order.
    let g = cache.stamp();
    // 2's answer comes first, then the announcements, then 1's answer.
    cache.committed(&put(b"v2"), Some(g), 2);
    cache.invalidate(Some(&[k("A1")]), Some(1));
    assert_eq!(
        cache.get_trusted(&[k("A1")]),
        None,
        "2 was not announced yet"
    );
    cache.invalidate(Some(&[k("A1")]), Some(2));
    cache.committed(&put(b"v1"), Some(g), 1);
    assert_eq!(
        cache.get_trusted(&[k("A1")]),
        None,
        "v1 is older than 2's announcement"
    );
    // A commit whose own announcement came before its answer is trusted.
    let g = cache.stamp();
    cache.invalidate(Some(&[k("A1")]), Some(3));
    cache.committed(&put(b"v3"), Some(g), 3);
    assert_eq!(
        cache.get_trusted(&[k("A1")]),
        Some(vec![Some(b"v3".to_vec())])
    );
    // Another client's change after the start of a read: that read is not trusted.
    let g = cache.stamp();
    cache.invalidate(Some(&[k("A1")]), None);
    cache.remember_all([(&b"A1"[..], Some(&b"old"[..]))], Some(g), true);
    assert_eq!(cache.get_trusted(&[k("A1")]), None);
}

#[test]
fn announcements_of_commits_a_transaction_followed_do_not_stale_it() {
    let cache = ReadCache::new(only_a, DEFAULT_BUDGET);
    cache.beat_returned(Duration::from_secs(5), None);
    let put = |v: &[u8]| [(k("A1"), Write::Put(v.to_vec()))];
    // Commit 1 returns; commit 2 starts after it (a create, then the next create in
    // the same directory), and 1's announcement arrives after 2 stored its value.
    let g = cache.stamp();
    cache.committed(&put(b"v1"), Some(g), 1);
    cache.returned(1, true);
    let g = cache.stamp();
    cache.committed(&put(b"v2"), Some(g), 2);
    cache.returned(2, true);
    cache.invalidate(Some(&[k("A1")]), Some(1));
    assert_eq!(
        cache.get_trusted(&[k("A1")]),
        Some(vec![Some(b"v2".to_vec())]),
        "2 started after 1 returned: its value is newer"
    );
    // 1's announcement arriving before 2 stores does not spoil 2 either.
    let g = cache.stamp();
    cache.invalidate(Some(&[k("A1")]), Some(2));
    cache.committed(&put(b"v3"), Some(g), 3);
    cache.returned(3, true);
    assert_eq!(
        cache.get_trusted(&[k("A1")]),
        Some(vec![Some(b"v3".to_vec())])
    );
    // Commits 4 and 5 run at once (neither had returned when the other started):
    // 4's announcement drops 5's value, which may be older.
    let g = cache.stamp();
    cache.committed(&put(b"v5"), Some(g), 5);
    cache.invalidate(Some(&[k("A1")]), Some(4));
    assert_eq!(cache.get_trusted(&[k("A1")]), None);
    assert_eq!(cache.get(b"A1"), None, "dropped");
    cache.returned(5, true);
    cache.returned(4, true);
    // A commit that failed uncertainly may apply later: its announcement counts.
    let g = cache.stamp();
    cache.committed(&put(b"v6"), Some(g), 6);
    cache.returned(6, true);
    cache.returned(7, false);
    let g = cache.stamp();
    cache.remember_all([(&b"A1"[..], Some(&b"v6"[..]))], Some(g), true);
    cache.invalidate(Some(&[k("A1")]), Some(7));
    assert_eq!(
        cache.get_trusted(&[k("A1")]),
        None,
        "7 applied after the read"
    );
    let g = cache.stamp();
    cache.remember_all([(&b"A1"[..], Some(&b"v7"[..]))], Some(g), true);
    assert_eq!(
        cache.get_trusted(&[k("A1")]),
        Some(vec![Some(b"v7".to_vec())])
    );
}

#[test]
fn a_commit_that_never_returns_stops_holding_the_count_back() {
    let cache = ReadCache::new(only_a, DEFAULT_BUDGET);
    cache.beat_returned(Duration::from_secs(5), None);
    // Commit 1 is never reported back; later ones are.
    let last = u64::try_from(MAX_OUT_OF_ORDER).unwrap() + 2;
    for seq in 2..=last {
        cache.returned(seq, true);
    }
    let g = cache.stamp();
    cache.remember_all([(&b"A1"[..], Some(&b"v"[..]))], Some(g), true);
    cache.invalidate(Some(&[k("A1")]), Some(last));
    assert_eq!(
        cache.get_trusted(&[k("A1")]),
        Some(vec![Some(b"v".to_vec())]),
        "the count moved past the silent commit"
    );
    cache.invalidate(Some(&[k("A1")]), Some(1));
    assert_eq!(
        cache.get_trusted(&[k("A1")]),
        None,
        "1 may apply late: it counts"
    );
}

#[test]
fn values_from_two_views_are_answered_together_only_once_the_feed_passed_both() {
    let cache = ReadCache::new(only_a, DEFAULT_BUDGET);
    let grace = Duration::from_secs(5);
    cache.beat_returned(grace, None);
    // An entry and the record it names, read by one lookup (one view).
    let g = cache.stamp();
    let (entry, record) = (k("A-entry"), k("A-record"));
    cache.remember_all(
        [
            (&entry[..], Some(&b"names r"[..])),
            (&record[..], Some(&b"nlink 2"[..])),
        ],
        Some(g),
        true,
    );
    let both = [entry.clone(), record.clone()];
    assert!(cache.get_trusted(&both).is_some(), "one view");
    // Another read of the record alone lands after a change the feed has not delivered
    // yet (another client's rename took one of its names): each value is current up to
    // the feed's delay, but the pair is two moments.
    let g = cache.stamp();
    cache.remember_all([(&record[..], Some(&b"nlink 1"[..]))], Some(g), true);
    assert_eq!(
        cache.get_trusted(&both),
        None,
        "two views, feed not past them"
    );
    assert_eq!(
        cache.get_trusted(std::slice::from_ref(&record)),
        Some(vec![Some(b"nlink 1".to_vec())]),
        "alone, each is still answered"
    );
    // A transaction that took the entry cannot take the new record with it either.
    let mut held = Vec::new();
    assert!(
        cache
            .get_trusted_with(std::slice::from_ref(&entry), &mut held)
            .is_some()
    );
    assert_eq!(
        cache.get_trusted_with(std::slice::from_ref(&record), &mut held),
        None
    );
    assert_eq!(held.len(), 1, "a refused read adds nothing");
    // A beat sent before the second read does not cover it; one sent after does.
    let before = g.taken;
    cache.beat_returned(grace, Some(before));
    assert_eq!(cache.get_trusted(&both), None);
    cache.beat_returned(grace, Some(Instant::now()));
    assert!(cache.get_trusted(&both).is_some(), "the feed passed both");
    // A value the transaction took, replaced since, breaks its next read.
    let mut held = Vec::new();
    assert!(
        cache
            .get_trusted_with(std::slice::from_ref(&entry), &mut held)
            .is_some()
    );
    let g = cache.stamp();
    cache.remember_all([(&entry[..], Some(&b"names r"[..]))], Some(g), false);
    assert_eq!(
        cache.get_trusted_with(std::slice::from_ref(&record), &mut held),
        None
    );
    // Values of one commit are one view with what its transaction read.
    let g = cache.stamp();
    cache.remember_all([(&entry[..], Some(&b"names r"[..]))], Some(g), true);
    cache.committed(
        &[(record.clone(), Write::Put(b"nlink 3".to_vec()))],
        Some(g),
        1,
    );
    assert_eq!(
        cache.get_trusted(&both),
        Some(vec![Some(b"names r".to_vec()), Some(b"nlink 3".to_vec())])
    );
    // Values seen again unchanged stay in the views they were seen in; new values from
    // reads that were not one view stand alone.
    let g = cache.stamp();
    cache.remember_all([(&record[..], Some(&b"nlink 3"[..]))], Some(g), false);
    assert!(
        cache.get_trusted(&both).is_some(),
        "unchanged: still one view"
    );
    cache.remember_all(
        [
            (&entry[..], Some(&b"names s"[..])),
            (&record[..], Some(&b"nlink 4"[..])),
        ],
        Some(g),
        false,
    );
    assert_eq!(cache.get_trusted(&both), None);
}

#[test]
fn a_read_that_began_before_an_own_commit_returned_is_not_trusted_over_it() {
    let cache = ReadCache::new(only_a, DEFAULT_BUDGET);
    cache.beat_returned(Duration::from_secs(5), None);
    let put = |v: &[u8]| [(k("A1"), Write::Put(v.to_vec()))];
    // A getattr starts, then this client's link commits (nlink 2) and returns, then the
    // getattr's answer (nlink 1, read before the link applied) is stored. The link's own
    // announcement has not arrived.
    let read_began = cache.stamp();
    let g = cache.stamp();
    cache.committed(&put(b"nlink 2"), Some(g), 1);
    cache.returned(1, true);
    cache.remember_all(
        [(&b"A1"[..], Some(&b"nlink 1"[..]))],
        Some(read_began),
        true,
    );
    assert_ne!(
        cache.get_trusted(&[k("A1")]),
        Some(vec![Some(b"nlink 1".to_vec())]),
        "the older read must not be answered after the link returned"
    );
    // A read that began after the commit returned is.
    let g = cache.stamp();
    cache.remember_all([(&b"A1"[..], Some(&b"nlink 2"[..]))], Some(g), true);
    assert_eq!(
        cache.get_trusted(&[k("A1")]),
        Some(vec![Some(b"nlink 2".to_vec())])
    );
}

#[test]
fn values_of_own_commits_are_answered_together_once_the_feed_delivered_each() {
    let cache = ReadCache::new(only_a, DEFAULT_BUDGET);
    cache.beat_returned(Duration::from_secs(5), None);
    let (entry, record, dir) = (k("A-entry"), k("A-record"), k("A-dir"));
    let put = |key: &Key, v: &[u8]| (key.clone(), Write::Put(v.to_vec()));
    // A create (commit 1: entry, record, directory), then another create in the same
    // directory (commit 2: the directory again): a lookup of the first file needs its
    // entry and record (commit 1) with the directory (commit 2) — two views.
    let g = cache.stamp();
    cache.committed(
        &[put(&entry, b"e1"), put(&record, b"r1"), put(&dir, b"d1")],
        Some(g),
        1,
    );
    cache.returned(1, true);
    let g = cache.stamp();
    cache.committed(&[put(&dir, b"d2")], Some(g), 2);
    cache.returned(2, true);
    let all = [entry.clone(), record.clone(), dir.clone()];
    assert!(
        cache.get_trusted(&all[..2]).is_some(),
        "one commit: one view"
    );
    assert_eq!(cache.get_trusted(&all), None, "not delivered yet");
    cache.invalidate(Some(&all), Some(1));
    assert_eq!(cache.get_trusted(&all), None, "2 not delivered yet");
    cache.invalidate(Some(std::slice::from_ref(&dir)), Some(2));
    assert_eq!(
        cache.get_trusted(&all),
        Some(vec![
            Some(b"e1".to_vec()),
            Some(b"r1".to_vec()),
            Some(b"d2".to_vec())
        ]),
        "each current at its commit's place, none changed since"
    );
    // A new value stored by a read is not confirmed; the same value read again is.
    let g = cache.stamp();
    cache.remember_all([(&record[..], Some(&b"r1"[..]))], Some(g), false);
    assert!(cache.get_trusted(&all).is_some(), "kept all along");
    let g = cache.stamp();
    cache.remember_all([(&record[..], Some(&b"r2"[..]))], Some(g), false);
    assert_eq!(
        cache.get_trusted(&all),
        None,
        "a new value, feed not past it"
    );
    // A commit announced before it returned confirms what it stores.
    let g = cache.stamp();
    cache.invalidate(Some(std::slice::from_ref(&record)), Some(3));
    cache.committed(&[put(&record, b"r3")], Some(g), 3);
    cache.returned(3, true);
    assert!(cache.get_trusted(&all).is_some(), "announced first");
    // Another client's change drops what it touched; an own commit not yet delivered
    // stands alone until it is.
    cache.invalidate(Some(std::slice::from_ref(&dir)), None);
    assert_eq!(cache.get_trusted(&all), None);
    let g = cache.stamp();
    cache.committed(&[put(&dir, b"d4")], Some(g), 4);
    cache.returned(4, true);
    assert_eq!(cache.get_trusted(&all), None);
    cache.invalidate(Some(std::slice::from_ref(&dir)), Some(4));
    assert!(cache.get_trusted(&all).is_some());
}

#[test]
fn own_commits_made_before_the_feed_came_up_do_not_block_trust_for_ever() {
    let cache = ReadCache::new(only_a, DEFAULT_BUDGET);
    let (entry, record, dir) = (k("A-entry"), k("A-record"), k("A-dir"));
    let put = |key: &Key, v: &[u8]| (key.clone(), Write::Put(v.to_vec()));
    // A create committed while the feed is still coming up: its announcement was sent
    // before this client subscribed, and never arrives.
    let g = cache.stamp();
    cache.committed(
        &[put(&entry, b"e1"), put(&record, b"r1"), put(&dir, b"d1")],
        Some(g),
        1,
    );
    cache.returned(1, true);
    cache.beat_returned(Duration::from_secs(5), None);
    let all = [entry.clone(), record.clone(), dir.clone()];
    // Read again, all three in one snapshot, after the feed came up.
    let g = cache.stamp();
    cache.remember_all(
        [
            (&entry[..], Some(&b"e1"[..])),
            (&record[..], Some(&b"r1"[..])),
            (&dir[..], Some(&b"d1"[..])),
        ],
        Some(g),
        true,
    );
    assert!(
        cache.get_trusted(&all).is_some(),
        "read in one snapshot after the feed came up: trusted together"
    );
}
