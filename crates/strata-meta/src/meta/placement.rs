//! Where data lives on a volume with several stores (docs/PLACEMENT.md): the placement
//! record of a slice (`P` id: the stores holding its blocks, and the stores it is leaving
//! after a move), the tier policies of directories (`G` ino) and the leases movers take
//! on them (`O` ino). A slice without a placement record is in store 0 only.

use strata_types::{Ino, Nanos};

use super::Meta;
use crate::error::{MetaError, Result};
use crate::keys;

/// Version byte of placement and policy records.
const RECORD_VERSION: u8 = 1;

/// Where one slice's blocks are.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Placement {
    /// Stores holding every block of the slice, the one reads try first first.
    pub stores: Vec<u8>,
    /// Stores that still hold the blocks after a move, until `leave_after` (ns): readers
    /// that looked before the move may still ask them; then the mover deletes them there.
    pub leaving: Vec<u8>,
    pub leave_after: Nanos,
}

impl Placement {
    /// In store `id` only.
    pub fn only(id: u8) -> Placement {
        Placement {
            stores: vec![id],
            ..Placement::default()
        }
    }

    /// Whether this is what a slice without a record has: store 0 only, nothing leaving.
    pub fn is_default(&self) -> bool {
        self.stores == [0] && self.leaving.is_empty()
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(12 + self.stores.len() + self.leaving.len());
        v.push(RECORD_VERSION);
        push_ids(&mut v, &self.stores);
        push_ids(&mut v, &self.leaving);
        v.extend_from_slice(&self.leave_after.to_le_bytes());
        v
    }

    pub fn decode(key: &[u8], v: &[u8]) -> Result<Placement> {
        let bad = |what: &str| MetaError::corrupt(key, format!("placement record: {what}"));
        let mut r = Reader { v, at: 0 };
        if r.byte() != Some(RECORD_VERSION) {
            return Err(bad("unknown version"));
        }
        let stores = r.ids().ok_or_else(|| bad("store list"))?;
        let leaving = r.ids().ok_or_else(|| bad("leaving list"))?;
        let leave_after = r.i64().ok_or_else(|| bad("time"))?;
        if stores.is_empty() || r.at != v.len() {
            return Err(bad("length"));
        }
        Ok(Placement {
            stores,
            leaving,
            leave_after,
        })
    }
}

/// Where a directory's data should be (`tier set`), inherited by everything below it
/// that has no policy of its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TierPolicy {
    /// The store data goes to.
    pub store: u8,
    /// Further stores that keep a full copy.
    pub copies: Vec<u8>,
    /// Only data of files unmodified this long (seconds) moves; new data is written where
    /// the policies above this directory say. 0: new data is written here at once.
    pub after_secs: u64,
}

impl TierPolicy {
    /// The placement this policy asks for: the store, then the copies.
    pub fn placement(&self) -> Placement {
        let mut stores = vec![self.store];
        for &c in &self.copies {
            if !stores.contains(&c) {
                stores.push(c);
            }
        }
        Placement {
            stores,
            ..Placement::default()
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(11 + self.copies.len());
        v.push(RECORD_VERSION);
        v.push(self.store);
        v.extend_from_slice(&self.after_secs.to_le_bytes());
        push_ids(&mut v, &self.copies);
        v
    }

    pub fn decode(key: &[u8], v: &[u8]) -> Result<TierPolicy> {
        let bad = || MetaError::corrupt(key, "tier policy record");
        let mut r = Reader { v, at: 0 };
        if r.byte() != Some(RECORD_VERSION) {
            return Err(bad());
        }
        let store = r.byte().ok_or_else(bad)?;
        let after_secs = r.i64().ok_or_else(bad)?;
        let copies = r.ids().ok_or_else(bad)?;
        if r.at != v.len() {
            return Err(bad());
        }
        Ok(TierPolicy {
            store,
            copies,
            after_secs: u64::from_le_bytes(after_secs.to_le_bytes()),
        })
    }
}

fn push_ids(v: &mut Vec<u8>, ids: &[u8]) {
    v.push(u8::try_from(ids.len()).unwrap_or(u8::MAX));
    v.extend(ids.iter().take(usize::from(u8::MAX)));
}

struct Reader<'a> {
    v: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn byte(&mut self) -> Option<u8> {
        let b = *self.v.get(self.at)?;
        self.at += 1;
        Some(b)
    }

    fn ids(&mut self) -> Option<Vec<u8>> {
        let n = usize::from(self.byte()?);
        let ids = self.v.get(self.at..self.at + n)?.to_vec();
        self.at += n;
        Some(ids)
    }

    fn i64(&mut self) -> Option<i64> {
        let raw: [u8; 8] = self.v.get(self.at..self.at + 8)?.try_into().ok()?;
        self.at += 8;
        Some(i64::from_le_bytes(raw))
    }
}

fn placement_id(key: &[u8]) -> Option<u64> {
    (key.len() == 9).then(|| keys::be_u64(key, 1)).flatten()
}

impl Meta {
    /// The placement record of each of `ids` (`None`: store 0 only).
    pub async fn placements(&self, ids: &[u64]) -> Result<Vec<Option<Placement>>> {
        let keys: Vec<_> = ids.iter().map(|&id| keys::placement(id)).collect();
        let keys = &keys;
        self.txn(|tx| {
            Box::pin(async move {
                let values = tx.get_many(keys).await?;
                keys.iter()
                    .zip(values)
                    .map(|(k, v)| v.map(|v| Placement::decode(k, &v)).transpose())
                    .collect()
            })
        })
        .await
    }

    /// Record where slice `id` is (`None`, or store 0 only: drop its record).
    pub async fn set_placement(&self, id: u64, placement: Option<&Placement>) -> Result<()> {
        self.swap_placement(id, None, placement).await.map(drop)
    }

    /// Change slice `id`'s record from `expected` to `new` if it is still `expected`
    /// (`Some(None)` expects no record; `None` does not check). False if it changed.
    pub async fn swap_placement(
        &self,
        id: u64,
        expected: Option<Option<&Placement>>,
        new: Option<&Placement>,
    ) -> Result<bool> {
        let key = keys::placement(id);
        let key = &key;
        self.txn(|tx| {
            Box::pin(async move {
                if let Some(expected) = expected {
                    let now = tx.get(key).await?;
                    let now = now.map(|v| Placement::decode(key, &v)).transpose()?;
                    let same = match (&now, expected) {
                        (None, None) => true,
                        (Some(a), Some(b)) => a == b,
                        (Some(a), None) => a.is_default(),
                        (None, Some(b)) => b.is_default(),
                    };
                    if !same {
                        return Ok(false);
                    }
                }
                match new {
                    Some(p) if !p.is_default() => tx.put(key.clone(), p.encode()),
                    _ => tx.delete(key.clone()),
                }
                Ok(true)
            })
        })
        .await
    }

    /// Placement records of slices with ids above `after`, in id order, up to `limit`.
    pub async fn list_placements(&self, after: u64, limit: usize) -> Result<Vec<(u64, Placement)>> {
        let start = match after.checked_add(1) {
            Some(next) => keys::placement(next),
            None => return Ok(Vec::new()),
        };
        let start = &start;
        self.txn(|tx| {
            Box::pin(async move {
                let rows = tx.scan(start, b"Q", limit, false).await?;
                rows.iter()
                    .filter_map(|(k, v)| placement_id(k).map(|id| (id, k, v)))
                    .map(|(id, k, v)| Ok((id, Placement::decode(k, v)?)))
                    .collect()
            })
        })
        .await
    }

    /// Set (`Some`) or remove the tier policy of directory `dir`.
    pub async fn set_tier_policy(&self, dir: Ino, policy: Option<&TierPolicy>) -> Result<()> {
        let key = keys::tier_policy(dir);
        let key = &key;
        self.txn(|tx| {
            Box::pin(async move {
                match policy {
                    Some(p) => tx.put(key.clone(), p.encode()),
                    None => tx.delete(key.clone()),
                }
                Ok(())
            })
        })
        .await
    }

    /// Every directory's tier policy, in inode order.
    pub async fn tier_policies(&self) -> Result<Vec<(Ino, TierPolicy)>> {
        self.txn(|tx| {
            Box::pin(async move {
                let rows = tx.scan(b"G", b"H", usize::MAX, false).await?;
                rows.iter()
                    .map(|(k, v)| {
                        let ino = keys::be_u64(k, 1)
                            .ok_or_else(|| MetaError::corrupt(k, "tier policy key"))?;
                        Ok((Ino(ino), TierPolicy::decode(k, v)?))
                    })
                    .collect()
            })
        })
        .await
    }

    /// Take (or renew) the lease on moving directory `dir`'s data for `holder` until
    /// `until` (ns): false while another holder's lease has not expired.
    pub async fn take_mover_lease(&self, dir: Ino, holder: u64, until: Nanos) -> Result<bool> {
        let key = keys::mover_lease(dir);
        let key = &key;
        let now = super::now_ns();
        self.txn(|tx| {
            Box::pin(async move {
                if let Some(v) = tx.get(key).await? {
                    let raw: Option<[u8; 16]> = v.as_slice().try_into().ok();
                    let raw = raw.ok_or_else(|| MetaError::corrupt(key, "mover lease"))?;
                    let mut h = [0u8; 8];
                    h.copy_from_slice(&raw[..8]);
                    let mut e = [0u8; 8];
                    e.copy_from_slice(&raw[8..]);
                    if u64::from_le_bytes(h) != holder && i64::from_le_bytes(e) > now {
                        return Ok(false);
                    }
                }
                let mut v = holder.to_le_bytes().to_vec();
                v.extend_from_slice(&until.to_le_bytes());
                tx.put(key.clone(), v);
                Ok(true)
            })
        })
        .await
    }

    /// Give up `holder`'s lease on directory `dir` (another holder's stays).
    pub async fn release_mover_lease(&self, dir: Ino, holder: u64) -> Result<()> {
        let key = keys::mover_lease(dir);
        let key = &key;
        self.txn(|tx| {
            Box::pin(async move {
                let held = tx.get(key).await?;
                if held.is_some_and(|v| v.get(..8) == Some(&holder.to_le_bytes()[..])) {
                    tx.delete(key.clone());
                }
                Ok(())
            })
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_reject_garbage() {
        let p = Placement {
            stores: vec![2, 0],
            leaving: vec![1],
            leave_after: 1234,
        };
        assert_eq!(Placement::decode(b"P", &p.encode()).unwrap(), p);
        assert!(Placement::decode(b"P", &[1, 0, 0]).is_err());
        assert!(Placement::decode(b"P", &[9]).is_err());
        let mut long = p.encode();
        long.push(0);
        assert!(Placement::decode(b"P", &long).is_err());
        let t = TierPolicy {
            store: 3,
            copies: vec![1, 3],
            after_secs: 86400,
        };
        assert_eq!(TierPolicy::decode(b"G", &t.encode()).unwrap(), t);
        assert_eq!(t.placement().stores, vec![3, 1]);
        assert!(Placement::only(0).is_default());
        assert!(!Placement::only(1).is_default());
    }
}
