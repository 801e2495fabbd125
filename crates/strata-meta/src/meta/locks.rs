//! flock(2) and POSIX record locks (fcntl F_GETLK/F_SETLK), shared by all clients of a
//! volume. Locks belong to (session, owner); a session's locks are indexed so they can be
//! released when it closes or is cleaned as stale. Blocking waits (F_SETLKW, LOCK_EX
//! without LOCK_NB) are retried by the caller on EAGAIN.

use strata_types::{Errno, Ino};

use super::Meta;
use crate::error::{MetaError, Result, posix};
use crate::keys;
use crate::kv::Txn;

/// Kind of a lock request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockKind {
    Read,
    Write,
    Unlock,
}

impl LockKind {
    fn code(self) -> u8 {
        match self {
            LockKind::Read => 1,
            LockKind::Write => 2,
            LockKind::Unlock => 0,
        }
    }

    fn from_code(c: u8) -> Option<LockKind> {
        match c {
            1 => Some(LockKind::Read),
            2 => Some(LockKind::Write),
            _ => None,
        }
    }

    fn conflicts(self, other: LockKind) -> bool {
        self == LockKind::Write || other == LockKind::Write
    }
}

/// A POSIX record lock over bytes `[start, end)`; `end == u64::MAX` reaches to EOF.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PosixLock {
    pub kind: LockKind,
    pub start: u64,
    pub end: u64,
    /// Process holding it (reported by F_GETLK).
    pub pid: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FlockRecord {
    sid: u64,
    owner: u64,
    kind: LockKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PlockRecord {
    sid: u64,
    owner: u64,
    lock: PosixLock,
}

const FLOCK_LEN: usize = 17;
const PLOCK_LEN: usize = 37;

fn u64_at(v: &[u8], i: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&v[i..i + 8]);
    u64::from_le_bytes(b)
}

fn decode_flocks(key: &[u8], v: &[u8]) -> Result<Vec<FlockRecord>> {
    if !v.len().is_multiple_of(FLOCK_LEN) {
        return Err(MetaError::corrupt(
            key,
            format!("flock list of {} bytes", v.len()),
        ));
    }
    v.chunks_exact(FLOCK_LEN)
        .map(|r| {
            let kind =
                LockKind::from_code(r[16]).ok_or_else(|| MetaError::corrupt(key, "lock kind"))?;
            Ok(FlockRecord {
                sid: u64_at(r, 0),
                owner: u64_at(r, 8),
                kind,
            })
        })
        .collect()
}

fn encode_flocks(records: &[FlockRecord]) -> Vec<u8> {
    let mut v = Vec::with_capacity(records.len() * FLOCK_LEN);
    for r in records {
        v.extend_from_slice(&r.sid.to_le_bytes());
        v.extend_from_slice(&r.owner.to_le_bytes());
        v.push(r.kind.code());
    }
    v
}

fn decode_plocks(key: &[u8], v: &[u8]) -> Result<Vec<PlockRecord>> {
    if !v.len().is_multiple_of(PLOCK_LEN) {
        return Err(MetaError::corrupt(
            key,
            format!("record lock list of {} bytes", v.len()),
        ));
    }
    v.chunks_exact(PLOCK_LEN)
        .map(|r| {
            let kind =
                LockKind::from_code(r[20]).ok_or_else(|| MetaError::corrupt(key, "lock kind"))?;
            let pid = u32::from_le_bytes([r[16], r[17], r[18], r[19]]);
            let lock = PosixLock {
                kind,
                start: u64_at(r, 21),
                end: u64_at(r, 29),
                pid,
            };
            if lock.start >= lock.end {
                return Err(MetaError::corrupt(key, "empty lock range"));
            }
            Ok(PlockRecord {
                sid: u64_at(r, 0),
                owner: u64_at(r, 8),
                lock,
            })
        })
        .collect()
}

fn encode_plocks(records: &[PlockRecord]) -> Vec<u8> {
    let mut v = Vec::with_capacity(records.len() * PLOCK_LEN);
    for r in records {
        v.extend_from_slice(&r.sid.to_le_bytes());
        v.extend_from_slice(&r.owner.to_le_bytes());
        v.extend_from_slice(&r.lock.pid.to_le_bytes());
        v.push(r.lock.kind.code());
        v.extend_from_slice(&r.lock.start.to_le_bytes());
        v.extend_from_slice(&r.lock.end.to_le_bytes());
    }
    v
}

async fn load_flocks(tx: &mut Txn<'_>, ino: Ino) -> Result<Vec<FlockRecord>> {
    let key = keys::flocks(ino);
    match tx.get(&key).await? {
        Some(v) => decode_flocks(&key, &v),
        None => Ok(Vec::new()),
    }
}

async fn load_plocks(tx: &mut Txn<'_>, ino: Ino) -> Result<Vec<PlockRecord>> {
    let key = keys::plocks(ino);
    match tx.get(&key).await? {
        Some(v) => decode_plocks(&key, &v),
        None => Ok(Vec::new()),
    }
}

/// Store both lock lists of `ino` and keep the session index of `sid` in step.
fn store_locks(
    tx: &mut Txn<'_>,
    ino: Ino,
    sid: u64,
    flocks: &[FlockRecord],
    plocks: &[PlockRecord],
) {
    let (fk, pk) = (keys::flocks(ino), keys::plocks(ino));
    if flocks.is_empty() {
        tx.delete(fk)
    } else {
        tx.put(fk, encode_flocks(flocks))
    }
    if plocks.is_empty() {
        tx.delete(pk)
    } else {
        tx.put(pk, encode_plocks(plocks))
    }
    let holds = flocks.iter().any(|r| r.sid == sid) || plocks.iter().any(|r| r.sid == sid);
    index_session_lock(tx, sid, ino, holds);
}

/// Replace `owner`'s locks over `[lock.start, lock.end)` with `lock` (or remove them for
/// Unlock), merging neighbouring ranges of the same kind.
fn apply_posix(mine: Vec<PosixLock>, lock: PosixLock) -> Vec<PosixLock> {
    let mut out = Vec::with_capacity(mine.len() + 2);
    for l in mine {
        if l.end <= lock.start || l.start >= lock.end {
            out.push(l);
            continue;
        }
        if l.start < lock.start {
            out.push(PosixLock {
                end: lock.start,
                ..l
            });
        }
        if l.end > lock.end {
            out.push(PosixLock {
                start: lock.end,
                ..l
            });
        }
    }
    if lock.kind != LockKind::Unlock {
        out.push(lock);
    }
    out.sort_by_key(|l| l.start);
    let mut merged: Vec<PosixLock> = Vec::with_capacity(out.len());
    for l in out {
        match merged.last_mut() {
            Some(prev) if prev.kind == l.kind && prev.end >= l.start => {
                prev.end = prev.end.max(l.end)
            }
            _ => merged.push(l),
        }
    }
    merged
}

fn check_range(lock: &PosixLock) -> Result<()> {
    if lock.start >= lock.end {
        posix(Errno::EINVAL)
    } else {
        Ok(())
    }
}

impl Meta {
    /// flock(2): take (Read = LOCK_SH, Write = LOCK_EX) or drop (Unlock) `owner`'s lock on
    /// `ino`. EAGAIN when another owner's lock conflicts.
    pub async fn flock(&self, ino: Ino, owner: u64, kind: LockKind) -> Result<()> {
        let sid = self.session_id();
        self.txn(|tx| {
            Box::pin(async move {
                let mut flocks = load_flocks(tx, ino).await?;
                let plocks = load_plocks(tx, ino).await?;
                let me = |r: &FlockRecord| r.sid == sid && r.owner == owner;
                if kind != LockKind::Unlock
                    && flocks.iter().any(|r| !me(r) && kind.conflicts(r.kind))
                {
                    return posix(Errno::EAGAIN);
                }
                flocks.retain(|r| !me(r));
                if kind != LockKind::Unlock {
                    flocks.push(FlockRecord { sid, owner, kind });
                }
                store_locks(tx, ino, sid, &flocks, &plocks);
                Ok(())
            })
        })
        .await
    }

    /// F_GETLK: the first lock of another owner that conflicts with `lock`, if any.
    pub async fn getlk(&self, ino: Ino, owner: u64, lock: PosixLock) -> Result<Option<PosixLock>> {
        check_range(&lock)?;
        let sid = self.session_id();
        self.txn(|tx| {
            Box::pin(async move {
                let plocks = load_plocks(tx, ino).await?;
                Ok(plocks
                    .iter()
                    .filter(|r| !(r.sid == sid && r.owner == owner))
                    .map(|r| r.lock)
                    .find(|l| {
                        l.start < lock.end && lock.start < l.end && lock.kind.conflicts(l.kind)
                    }))
            })
        })
        .await
    }

    /// F_SETLK: set or clear `owner`'s lock over a range. EAGAIN on conflict.
    pub async fn setlk(&self, ino: Ino, owner: u64, lock: PosixLock) -> Result<()> {
        check_range(&lock)?;
        let sid = self.session_id();
        self.txn(|tx| {
            Box::pin(async move {
                let flocks = load_flocks(tx, ino).await?;
                let plocks = load_plocks(tx, ino).await?;
                let me = |r: &PlockRecord| r.sid == sid && r.owner == owner;
                let conflict = lock.kind != LockKind::Unlock
                    && plocks.iter().any(|r| {
                        !me(r)
                            && r.lock.start < lock.end
                            && lock.start < r.lock.end
                            && lock.kind.conflicts(r.lock.kind)
                    });
                if conflict {
                    return posix(Errno::EAGAIN);
                }
                let (mine, mut others): (Vec<_>, Vec<_>) = plocks.into_iter().partition(me);
                let updated = apply_posix(mine.into_iter().map(|r| r.lock).collect(), lock);
                others.extend(updated.into_iter().map(|l| PlockRecord {
                    sid,
                    owner,
                    lock: l,
                }));
                store_locks(tx, ino, sid, &flocks, &others);
                Ok(())
            })
        })
        .await
    }

    /// Drop every lock `owner` holds on `ino` (close of the last descriptor).
    pub async fn unlock_all(&self, ino: Ino, owner: u64) -> Result<()> {
        let sid = self.session_id();
        self.txn(|tx| {
            Box::pin(async move {
                let mut flocks = load_flocks(tx, ino).await?;
                let mut plocks = load_plocks(tx, ino).await?;
                let (nf, np) = (flocks.len(), plocks.len());
                flocks.retain(|r| !(r.sid == sid && r.owner == owner));
                plocks.retain(|r| !(r.sid == sid && r.owner == owner));
                if flocks.len() != nf || plocks.len() != np {
                    store_locks(tx, ino, sid, &flocks, &plocks);
                }
                Ok(())
            })
        })
        .await
    }
}

/// Release every lock held by session `sid`.
pub(crate) async fn release_session_locks(meta: &Meta, sid: u64) -> Result<()> {
    let inos = meta
        .session_inodes(keys::session_lock_prefix(sid), usize::MAX)
        .await?;
    for ino in inos {
        meta.txn(|tx| {
            Box::pin(async move {
                let mut flocks = load_flocks(tx, ino).await?;
                let mut plocks = load_plocks(tx, ino).await?;
                flocks.retain(|r| r.sid != sid);
                plocks.retain(|r| r.sid != sid);
                store_locks(tx, ino, sid, &flocks, &plocks);
                Ok(())
            })
        })
        .await?;
    }
    Ok(())
}

/// Note in the session's index that it holds locks on `ino` (or no longer does).
pub(crate) fn index_session_lock(tx: &mut Txn<'_>, sid: u64, ino: Ino, holds: bool) {
    if holds {
        tx.put(keys::session_lock(sid, ino), Vec::new());
    } else {
        tx.delete(keys::session_lock(sid, ino));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(kind: LockKind, start: u64, end: u64) -> PosixLock {
        PosixLock {
            kind,
            start,
            end,
            pid: 1,
        }
    }

    #[test]
    fn posix_ranges_split_and_merge() {
        let held = vec![l(LockKind::Write, 0, 100)];
        let out = apply_posix(held, l(LockKind::Unlock, 40, 60));
        assert_eq!(
            out,
            vec![l(LockKind::Write, 0, 40), l(LockKind::Write, 60, 100)]
        );
        let out = apply_posix(out, l(LockKind::Write, 40, 60));
        assert_eq!(out, vec![l(LockKind::Write, 0, 100)]);
        let out = apply_posix(out, l(LockKind::Read, 10, 20));
        assert_eq!(
            out,
            vec![
                l(LockKind::Write, 0, 10),
                l(LockKind::Read, 10, 20),
                l(LockKind::Write, 20, 100)
            ]
        );
    }

    #[test]
    fn records_round_trip() {
        let p = vec![PlockRecord {
            sid: 3,
            owner: 9,
            lock: l(LockKind::Read, 5, u64::MAX),
        }];
        assert_eq!(decode_plocks(b"k", &encode_plocks(&p)).unwrap(), p);
        let f = vec![FlockRecord {
            sid: 1,
            owner: 2,
            kind: LockKind::Write,
        }];
        assert_eq!(decode_flocks(b"k", &encode_flocks(&f)).unwrap(), f);
        assert!(decode_flocks(b"k", &[0; 16]).is_err());
    }
}
