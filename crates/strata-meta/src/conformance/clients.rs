//! Conformance cases with several clients on one store: sessions, open-but-unlinked files,
//! stale-session cleanup, locks across clients, racing creates and renames.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use strata_types::{Errno, FileType, Ino};

use super::{TestStore, client, errno_of, mkdir, names, touch, volume};
use crate::meta::{Ctx, LockKind, Meta, PosixLock, RenameFlags, SessionInfo};

fn info(name: &str) -> SessionInfo {
    SessionInfo {
        host: name.into(),
        pid: 1,
        mount_point: format!("/mnt/{name}"),
        ..SessionInfo::default()
    }
}

/// The ids of the sessions registered in the volume.
async fn session_ids(meta: &Meta) -> BTreeSet<u64> {
    let sessions = meta.list_sessions().await.unwrap();
    sessions.iter().map(|s| s.sid).collect()
}

pub async fn sustained_files<S: TestStore>() {
    let store = S::create();
    let meta = volume(&store).await;
    let sid = meta.new_session(info("a")).await.unwrap();
    assert!(sid > 0);
    let root = Ctx::root();
    let f = touch(&meta, Ino::ROOT, "open-then-unlinked").await;
    let id = meta.new_slice_id().await.unwrap();
    let s = strata_types::Slice {
        pos: 0,
        id,
        size: 10,
        off: 0,
        len: 10,
    };
    meta.write_chunk(f.ino, 0, s, Some(crate::now_ns()))
        .await
        .unwrap();
    meta.open(&root, f.ino, 0).await.unwrap();
    meta.open(&root, f.ino, 0).await.unwrap();
    meta.unlink(&root, Ino::ROOT, b"open-then-unlinked")
        .await
        .unwrap();
    assert_eq!(
        errno_of(meta.lookup(&root, Ino::ROOT, b"open-then-unlinked").await),
        Errno::ENOENT
    );
    let attr = meta.getattr(f.ino).await.unwrap();
    assert_eq!(attr.nlink, 0, "still readable while open");
    assert_eq!(meta.read_chunk(f.ino, 0).await.unwrap(), vec![s]);
    assert!(meta.pending_file_deletions(10).await.unwrap().is_empty());
    meta.close(f.ino).await.unwrap();
    assert!(meta.getattr(f.ino).await.is_ok(), "one open remains");
    meta.close(f.ino).await.unwrap();
    assert_eq!(errno_of(meta.getattr(f.ino).await), Errno::ENOENT);
    assert_eq!(meta.pending_file_deletions(10).await.unwrap(), vec![f.ino]);
    meta.close_session().await.unwrap();
    assert!(meta.list_sessions().await.unwrap().is_empty());
}

pub async fn stale_sessions_are_cleaned<S: TestStore>() {
    let store = S::create();
    let crashed = volume(&store).await;
    let survivor = client(&store).await;
    let dead_sid = crashed.new_session(info("crashed")).await.unwrap();
    let live_sid = survivor.new_session(info("survivor")).await.unwrap();
    assert_ne!(dead_sid, live_sid);
    let sessions = survivor.list_sessions().await.unwrap();
    assert_eq!(
        sessions
            .iter()
            .map(|s| s.host.as_str())
            .collect::<BTreeSet<_>>(),
        BTreeSet::from(["crashed", "survivor"])
    );
    // The crashed client held a lock and an unlinked open file.
    let root = Ctx::root();
    let f = touch(&crashed, Ino::ROOT, "held").await;
    crashed.flock(f.ino, 7, LockKind::Write).await.unwrap();
    let g = touch(&crashed, Ino::ROOT, "ghost").await;
    crashed.open(&root, g.ino, 0).await.unwrap();
    crashed.unlink(&root, Ino::ROOT, b"ghost").await.unwrap();
    assert_eq!(
        errno_of(survivor.flock(f.ino, 1, LockKind::Write).await),
        Errno::EAGAIN
    );
    // Not stale yet: nothing is cleaned.
    assert_eq!(
        survivor
            .clean_stale_sessions(crate::now_ns())
            .await
            .unwrap(),
        0
    );
    // Once its expiry has passed, any live client cleans it.
    let later = crate::now_ns() + 3600 * 1_000_000_000;
    assert_eq!(survivor.clean_stale_sessions(later).await.unwrap(), 1);
    survivor.flock(f.ino, 1, LockKind::Write).await.unwrap();
    assert_eq!(
        errno_of(survivor.getattr(g.ino).await),
        Errno::ENOENT,
        "its sustained file is deleted"
    );
    assert_eq!(session_ids(&survivor).await, BTreeSet::from([live_sid]));
    // The cleaned client notices at its next heartbeat.
    assert!(crashed.heartbeat().await.is_err());
    survivor.heartbeat().await.unwrap();
}

/// A client that takes over another's session (a mount handed over, or restarted after
/// its process died) holds its locks and keeps its unlinked open files alive; the session
/// it had registered is gone, and one that was cleaned cannot be taken over.
pub async fn a_session_is_taken_over_with_its_locks_and_open_files<S: TestStore>() {
    let store = S::create();
    let old = volume(&store).await;
    let new = client(&store).await;
    let other = client(&store).await;
    let old_sid = old.new_session(info("old")).await.unwrap();
    let own_sid = new.new_session(info("new")).await.unwrap();
    other.new_session(info("other")).await.unwrap();
    let root = Ctx::root();
    let f = touch(&old, Ino::ROOT, "locked").await;
    old.flock(f.ino, 7, LockKind::Write).await.unwrap();
    let g = touch(&old, Ino::ROOT, "ghost").await;
    old.open(&root, g.ino, 0).await.unwrap();
    old.unlink(&root, Ino::ROOT, b"ghost").await.unwrap();
    new.adopt_session(old_sid).await.unwrap();
    new.restore_open_state(&old.open_state());
    assert_eq!(new.session_id(), old_sid);
    assert!(
        !session_ids(&other).await.contains(&own_sid),
        "the new client's own session is gone"
    );
    let adopted = other.list_sessions().await.unwrap();
    let adopted = adopted.iter().find(|s| s.sid == old_sid).unwrap();
    assert_eq!(
        adopted.host, "new",
        "the session now describes the new client"
    );
    assert_eq!(
        errno_of(other.flock(f.ino, 1, LockKind::Write).await),
        Errno::EAGAIN,
        "the lock is still held"
    );
    // Even a stale-session sweep leaves it while the new client heartbeats.
    new.heartbeat().await.unwrap();
    assert_eq!(
        other.clean_stale_sessions(crate::now_ns()).await.unwrap(),
        0
    );
    assert!(
        other.getattr(g.ino).await.is_ok(),
        "the unlinked file is kept alive"
    );
    // Its last close, by the new client, deletes it; its lock goes at the end.
    new.close(g.ino).await.unwrap();
    assert_eq!(errno_of(new.getattr(g.ino).await), Errno::ENOENT);
    new.close_session().await.unwrap();
    other.flock(f.ino, 1, LockKind::Write).await.unwrap();
    // A session that was cleaned cannot be taken over.
    let late = client(&store).await;
    late.new_session(info("late")).await.unwrap();
    assert!(late.adopt_session(old_sid).await.is_err());
}

/// Stale sessions are cleaned once per interval for the whole volume (whoever comes first),
/// a dead session's sustained files in batches, and a cleaning stamp from a clock far
/// ahead does not stop cleaning.
pub async fn stale_session_cleaning_is_shared<S: TestStore>() {
    let store = S::create();
    // `survivor` has no session of its own (as an admin command); `other` has.
    let survivor = volume(&store).await;
    let other = client(&store).await;
    other.new_session(info("other")).await.unwrap();
    let crashed = client(&store).await;
    crashed.new_session(info("crashed")).await.unwrap();
    let root = Ctx::root();
    let mut held = Vec::new();
    for i in 0..300 {
        let name = format!("open-{i}");
        let f = touch(&crashed, Ino::ROOT, &name).await;
        crashed.open(&root, f.ino, 0).await.unwrap();
        crashed
            .unlink(&root, Ino::ROOT, name.as_bytes())
            .await
            .unwrap();
        held.push(f.ino);
    }
    let hour = Duration::from_secs(3600);
    let minutes = |m: i64| m * 60 * 1_000_000_000;
    let t0 = crate::now_ns();
    // Due (never cleaned), but nobody is stale yet.
    assert_eq!(
        survivor
            .clean_stale_sessions_if_due(t0, hour)
            .await
            .unwrap(),
        0
    );
    // The crashed session is stale half an hour later, but a cleaning started within the
    // hour: another client's call does not scan.
    let t1 = t0 + minutes(30);
    assert_eq!(
        other.clean_stale_sessions_if_due(t1, hour).await.unwrap(),
        0
    );
    assert_eq!(survivor.list_sessions().await.unwrap().len(), 2);
    // Past the interval the next caller cleans it, sustained files and all.
    let t2 = t0 + minutes(61);
    assert_eq!(
        other.clean_stale_sessions_if_due(t2, hour).await.unwrap(),
        1
    );
    assert_eq!(survivor.list_sessions().await.unwrap().len(), 1);
    for ino in held {
        assert_eq!(errno_of(survivor.getattr(ino).await), Errno::ENOENT);
    }
    // A stamp far in the future (a client with a wrong clock; it cleans `other`, silent
    // in this clock's terms) does not stop cleaning.
    assert_eq!(
        survivor
            .clean_stale_sessions_if_due(t0 + minutes(600), hour)
            .await
            .unwrap(),
        1
    );
    let late = client(&store).await;
    late.new_session(info("late")).await.unwrap();
    let t3 = t0 + minutes(130);
    assert_eq!(
        other.clean_stale_sessions_if_due(t3, hour).await.unwrap(),
        1
    );
}

pub async fn flocks_conflict<S: TestStore>() {
    let store = S::create();
    let a = volume(&store).await;
    let b = client(&store).await;
    a.new_session(info("a")).await.unwrap();
    b.new_session(info("b")).await.unwrap();
    let f = touch(&a, Ino::ROOT, "f").await;
    a.flock(f.ino, 1, LockKind::Read).await.unwrap();
    b.flock(f.ino, 1, LockKind::Read).await.unwrap();
    assert_eq!(
        errno_of(b.flock(f.ino, 1, LockKind::Write).await),
        Errno::EAGAIN,
        "upgrade blocked by a's share"
    );
    a.flock(f.ino, 1, LockKind::Unlock).await.unwrap();
    b.flock(f.ino, 1, LockKind::Write).await.unwrap();
    assert_eq!(
        errno_of(a.flock(f.ino, 2, LockKind::Read).await),
        Errno::EAGAIN
    );
    // Same session, different owner (another open file description) conflicts too.
    assert_eq!(
        errno_of(b.flock(f.ino, 2, LockKind::Write).await),
        Errno::EAGAIN
    );
    b.unlock_all(f.ino, 1).await.unwrap();
    a.flock(f.ino, 2, LockKind::Write).await.unwrap();
    // Closing the session releases its locks.
    a.close_session().await.unwrap();
    b.flock(f.ino, 3, LockKind::Write).await.unwrap();
}

pub async fn posix_locks_conflict<S: TestStore>() {
    let store = S::create();
    let a = volume(&store).await;
    let b = client(&store).await;
    a.new_session(info("a")).await.unwrap();
    b.new_session(info("b")).await.unwrap();
    let f = touch(&a, Ino::ROOT, "f").await;
    let lock = |kind, start, end, pid| PosixLock {
        kind,
        start,
        end,
        pid,
    };
    a.setlk(f.ino, 1, lock(LockKind::Write, 0, 100, 11))
        .await
        .unwrap();
    a.setlk(f.ino, 1, lock(LockKind::Read, 200, u64::MAX, 11))
        .await
        .unwrap();
    // Conflicts are reported with the holder's range and pid.
    let seen = b
        .getlk(f.ino, 9, lock(LockKind::Read, 50, 60, 22))
        .await
        .unwrap();
    assert_eq!(seen, Some(lock(LockKind::Write, 0, 100, 11)));
    assert_eq!(
        b.getlk(f.ino, 9, lock(LockKind::Read, 300, 400, 22))
            .await
            .unwrap(),
        None,
        "read/read is fine"
    );
    let seen = b
        .getlk(f.ino, 9, lock(LockKind::Write, 1000, 1001, 22))
        .await
        .unwrap();
    assert_eq!(seen, Some(lock(LockKind::Read, 200, u64::MAX, 11)));
    assert_eq!(
        errno_of(b.setlk(f.ino, 9, lock(LockKind::Write, 99, 101, 22)).await),
        Errno::EAGAIN
    );
    b.setlk(f.ino, 9, lock(LockKind::Write, 100, 200, 22))
        .await
        .unwrap();
    b.setlk(f.ino, 9, lock(LockKind::Read, 500, 600, 22))
        .await
        .unwrap();
    // Unlocking the middle of a's range frees exactly that part.
    a.setlk(f.ino, 1, lock(LockKind::Unlock, 40, 60, 11))
        .await
        .unwrap();
    assert_eq!(
        b.getlk(f.ino, 9, lock(LockKind::Write, 45, 55, 22))
            .await
            .unwrap(),
        None
    );
    assert!(
        b.getlk(f.ino, 9, lock(LockKind::Write, 30, 45, 22))
            .await
            .unwrap()
            .is_some()
    );
    // The owner's own locks never conflict with itself; empty ranges are invalid.
    assert_eq!(
        a.getlk(f.ino, 1, lock(LockKind::Write, 0, 10, 11))
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        errno_of(a.setlk(f.ino, 1, lock(LockKind::Write, 5, 5, 11)).await),
        Errno::EINVAL
    );
    // A session's close releases its record locks.
    a.close_session().await.unwrap();
    b.setlk(f.ino, 9, lock(LockKind::Write, 0, u64::MAX, 22))
        .await
        .unwrap();
}

/// Run `per_client` tasks on each of two clients, each creating `files` names.
async fn race_creates(a: Arc<Meta>, b: Arc<Meta>, dir: Ino, tasks: usize, files: usize) {
    let mut handles = Vec::new();
    for (c, meta) in [a, b].into_iter().enumerate() {
        for t in 0..tasks {
            let meta = meta.clone();
            handles.push(tokio::spawn(async move {
                for i in 0..files {
                    let name = format!("c{c}-t{t}-{i:04}");
                    meta.mknod(
                        &Ctx::root(),
                        dir,
                        name.as_bytes(),
                        FileType::Regular,
                        0o644,
                        0,
                    )
                    .await
                    .unwrap();
                }
            }));
        }
    }
    for h in handles {
        h.await.unwrap();
    }
}

pub async fn concurrent_creates<S: TestStore>() {
    let store = S::create();
    let a = Arc::new(volume(&store).await);
    let b = Arc::new(client(&store).await);
    let dir = mkdir(&a, Ino::ROOT, "shared").await.ino;
    // Both clients also create the same contested name; exactly one wins.
    let root = Ctx::root();
    let (ra, rb) = tokio::join!(
        a.mknod(&root, dir, b"contested", FileType::Regular, 0o644, 0),
        b.mknod(&root, dir, b"contested", FileType::Regular, 0o644, 0)
    );
    assert!(
        ra.is_ok() != rb.is_ok(),
        "exactly one create wins: {ra:?} {rb:?}"
    );
    let loser = if ra.is_err() { ra } else { rb };
    assert_eq!(errno_of(loser), Errno::EEXIST);
    race_creates(a.clone(), b.clone(), dir, 4, 50).await;
    let listed = names(&a, dir).await;
    assert_eq!(listed.len(), 2 * 4 * 50 + 1, "no entry lost");
    let unique: BTreeSet<_> = listed.iter().collect();
    assert_eq!(unique.len(), listed.len(), "no entry duplicated");
    // Every entry has its own inode.
    let entries = b.readdir(dir, None, usize::MAX, true).await.unwrap();
    let inos: BTreeSet<Ino> = entries.iter().map(|e| e.ino).collect();
    assert_eq!(inos.len(), entries.len());
    assert!(
        entries
            .iter()
            .all(|e| e.attr.as_ref().is_some_and(|a| a.nlink == 1))
    );
    assert_eq!(a.dir_usage(dir).await.unwrap().1, listed.len() as i64);
}

pub async fn concurrent_renames<S: TestStore>() {
    let store = S::create();
    let a = Arc::new(volume(&store).await);
    let b = Arc::new(client(&store).await);
    let left = mkdir(&a, Ino::ROOT, "left").await.ino;
    let right = mkdir(&a, Ino::ROOT, "right").await.ino;
    let mut inos = BTreeSet::new();
    for i in 0..20 {
        inos.insert(touch(&a, left, &format!("f{i:02}")).await.ino);
    }
    // Each client moves every file across, back and forth; a move whose source vanished
    // (the other client moved it first) fails with ENOENT and is fine.
    let mut handles = Vec::new();
    for (c, meta) in [a.clone(), b.clone()].into_iter().enumerate() {
        handles.push(tokio::spawn(async move {
            for round in 0..6 {
                for i in 0..20 {
                    let name = format!("f{i:02}");
                    let (from, to) = if (round + c) % 2 == 0 {
                        (left, right)
                    } else {
                        (right, left)
                    };
                    let r = meta
                        .rename(
                            &Ctx::root(),
                            from,
                            name.as_bytes(),
                            to,
                            name.as_bytes(),
                            RenameFlags::default(),
                        )
                        .await;
                    match r {
                        Ok(()) => {}
                        Err(e) => assert_eq!(e.errno(), Errno::ENOENT, "{e}"),
                    }
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    // Every file is in exactly one directory, its entry and parent agree.
    let mut found = BTreeSet::new();
    for dir in [left, right] {
        for e in a.readdir(dir, None, usize::MAX, true).await.unwrap() {
            assert!(found.insert(e.ino), "inode {} listed twice", e.ino);
            let attr = e.attr.unwrap();
            assert_eq!((attr.parent, attr.nlink), (dir, 1));
        }
    }
    assert_eq!(found, inos);
    let total = a.dir_usage(left).await.unwrap().1 + a.dir_usage(right).await.unwrap().1;
    assert_eq!(total, 20);
}

/// A lookup answers one state of the volume: never a name's entry from before a rename
/// together with its inode's record from after it (benches/findings/README.md, chaos on
/// etcd). One task moves the name `a` between two inodes whose link counts tell the
/// states apart (`a` names `x` only while `x` has two names, `y` only while `y` has one),
/// while tasks of the same client and of a second client look `a` up and stat `x`.
pub async fn lookups_answer_one_state<S: TestStore>() {
    let store = S::create();
    let a = Arc::new(volume(&store).await);
    let b = Arc::new(client(&store).await);
    let root = Ctx::root();
    let x = touch(&a, Ino::ROOT, "keep").await.ino;
    a.link(&root, x, Ino::ROOT, b"a").await.unwrap();
    let y = touch(&a, Ino::ROOT, "c").await.ino;
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut readers = Vec::new();
    for (who, meta) in [a.clone(), a.clone(), b.clone()].into_iter().enumerate() {
        let done = done.clone();
        readers.push(tokio::spawn(async move {
            let mut seen = 0u32;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                match meta.lookup(&Ctx::root(), Ino::ROOT, b"a").await {
                    Ok(e) if e.ino == x => {
                        assert_eq!(e.attr.nlink, 2, "`a` names x (reader {who})")
                    }
                    Ok(e) if e.ino == y => assert_eq!(e.attr.nlink, 1, "`a` names y"),
                    Ok(e) => panic!("`a` names {}", e.ino),
                    Err(e) => assert_eq!(e.errno(), Errno::ENOENT, "{e}"),
                }
                // A fresh read of x's record beside the cached entry.
                meta.getattr(x).await.unwrap();
                seen += 1;
                // Answers from the cache never wait: let the writer's tasks run.
                tokio::task::yield_now().await;
            }
            seen
        }));
    }
    let flags = RenameFlags::default();
    for _ in 0..300 {
        a.rename(&root, Ino::ROOT, b"c", Ino::ROOT, b"a", flags)
            .await
            .unwrap();
        a.rename(&root, Ino::ROOT, b"a", Ino::ROOT, b"c", flags)
            .await
            .unwrap();
        a.link(&root, x, Ino::ROOT, b"a").await.unwrap();
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    for reader in readers {
        assert!(reader.await.unwrap() > 0, "the reader ran");
    }
}
