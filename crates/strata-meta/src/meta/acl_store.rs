//! Where access control lists live: each distinct list is one immutable `R` record,
//! found by a hash of its bytes and shared by every inode that has it (an inode's core
//! holds the record's id), and an in-memory cache of the records read, so a check on an
//! inode whose attributes are at hand needs no engine read. What inodes do with lists is
//! `acl.rs`'s.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::acl::{Acl, XATTR_ACCESS, XATTR_DEFAULT};
use crate::codec::InodeCore;
use crate::error::{MetaError, Result};
use crate::keys;
use crate::kv::Txn;

/// Slots tried after a list's home id before giving up (ids collide only when two
/// distinct lists hash alike; each later one takes the next free id).
const MAX_PROBES: u32 = 4096;

/// Which of an inode's two lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AclKind {
    Access,
    Default,
}

impl AclKind {
    /// The list an extended attribute name stands for.
    pub(crate) fn of_xattr(name: &[u8]) -> Option<AclKind> {
        match name {
            XATTR_ACCESS => Some(AclKind::Access),
            XATTR_DEFAULT => Some(AclKind::Default),
            _ => None,
        }
    }
}

/// Records read so far, by id. Records never change once written, so entries are
/// never stale.
#[derive(Debug, Default)]
pub(crate) struct AclCache {
    records: Mutex<HashMap<u32, Arc<Acl>>>,
}

impl AclCache {
    /// Record `id`, from memory or read in `tx`.
    pub(crate) async fn record(&self, tx: &mut Txn<'_>, id: u32) -> Result<Arc<Acl>> {
        if let Some(acl) = self.records.lock().get(&id) {
            return Ok(acl.clone());
        }
        let key = keys::acl(id);
        let bytes = tx
            .get(&key)
            .await?
            .ok_or_else(|| MetaError::corrupt(&key, "an inode refers to a missing list"))?;
        let acl = decode_record(&key, &bytes)?;
        let acl = Arc::new(acl);
        self.records.lock().insert(id, acl.clone());
        Ok(acl)
    }

    /// The id of a record holding `acl` (as stored: see [`Acl::without_mode`] for access
    /// lists), writing one in `tx` when no record holds it yet.
    pub(crate) async fn store(&self, tx: &mut Txn<'_>, acl: &Acl) -> Result<u32> {
        let bytes = acl.to_xattr();
        let mut id = home_id(&bytes);
        for _ in 0..MAX_PROBES {
            if self.records.lock().get(&id).is_some_and(|a| **a == *acl) {
                return Ok(id);
            }
            let key = keys::acl(id);
            match tx.get(&key).await? {
                None => {
                    tx.put(key, bytes);
                    return Ok(id);
                }
                Some(found) if found == bytes => return Ok(id),
                Some(_) => id = next_id(id),
            }
        }
        Err(MetaError::corrupt(
            &keys::acl(home_id(&bytes)),
            "no free list id near this list's hash",
        ))
    }

    /// The access list of an inode whose core is `core`, with its mode applied, or
    /// `None` when the mode alone says who may do what.
    pub(crate) async fn access_list(
        &self,
        tx: &mut Txn<'_>,
        core: &InodeCore,
    ) -> Result<Option<Acl>> {
        if core.access_acl == 0 {
            return Ok(None);
        }
        let stored = self.record(tx, core.access_acl).await?;
        Ok(Some(stored.with_mode(core.mode)))
    }
}

/// Ids given to lists by a writer that is the only one (a `load` into an empty
/// volume): the same probing as [`AclCache::store`], over a map instead of the engine.
#[derive(Debug, Default)]
pub(crate) struct AclIds {
    by_id: HashMap<u32, Acl>,
}

impl AclIds {
    /// The id of `acl`, and its record's bytes when this is the first time it is seen.
    pub(crate) fn id_of(&mut self, acl: &Acl) -> (u32, Option<Vec<u8>>) {
        let bytes = acl.to_xattr();
        let mut id = home_id(&bytes);
        loop {
            match self.by_id.get(&id) {
                Some(found) if found == acl => return (id, None),
                Some(_) => id = next_id(id),
                None => {
                    self.by_id.insert(id, acl.clone());
                    return (id, Some(bytes));
                }
            }
        }
    }
}

fn decode_record(key: &[u8], bytes: &[u8]) -> Result<Acl> {
    match Acl::from_xattr(bytes) {
        Ok(Some(acl)) => Ok(acl),
        _ => Err(MetaError::corrupt(key, "not an access control list")),
    }
}

/// FNV-1a of the record's bytes, folded to a non-zero u32 (0 means "no list").
fn home_id(bytes: &[u8]) -> u32 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    let folded = (hash >> 32) ^ (hash & 0xffff_ffff);
    u32::try_from(folded).unwrap_or(1).max(1)
}

fn next_id(id: u32) -> u32 {
    id.checked_add(1).unwrap_or(1)
}
