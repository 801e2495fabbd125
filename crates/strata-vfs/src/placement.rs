//! Placement on a volume with several stores (docs/PLACEMENT.md), as the data path sees
//! it: [`Placements`] answers the routed store's questions (where is slice N; slice N
//! went only there) from the metadata's placement records with a short-lived cache, and
//! tells the write path where a new slice of a file goes, from the tier policies of the
//! file's directories (inherited upward; refreshed every few seconds).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use parking_lot::Mutex;
use strata_meta::{Meta, MetaError, Placement, TierPolicy};
use strata_object::routed::PlacementLookup;
use strata_object::{ObjectError, Result as ObjectResult};
use strata_types::Ino;

/// How long a slice's looked-up stores are trusted. A move keeps the old copy for longer
/// (the mover's safety window), and a read that finds nothing where the record said tries
/// every other store, so a stale answer costs time, never data.
const PLACEMENT_TTL: Duration = Duration::from_secs(5);
/// Slices whose placement is remembered, at most (the cache is emptied when full).
const PLACEMENT_CACHE: usize = 200_000;
/// How long the policy table is trusted before it is read again.
const POLICY_TTL: Duration = Duration::from_secs(5);
/// Directory levels walked up looking for a policy, at most.
const MAX_DEPTH: usize = 256;

/// Every directory's tier policy, by directory.
pub type PolicyTable = Arc<BTreeMap<Ino, TierPolicy>>;

/// Where slices are and where new ones go, for one client.
#[derive(Debug)]
pub struct Placements {
    meta: Arc<Meta>,
    cache: Mutex<HashMap<u64, (Vec<u8>, Instant)>>,
    policies: Mutex<Option<(Instant, PolicyTable)>>,
    /// The write policy found for a file lately (a file takes many slices; the walk up
    /// its directories is made once per [`POLICY_TTL`]).
    resolved: Mutex<HashMap<Ino, (Option<TierPolicy>, Instant)>>,
}

fn meta_failed(e: MetaError) -> ObjectError {
    ObjectError::Other(format!("placement record: {e}"))
}

/// The order reads try a placement's stores in: where it is, then where it is leaving.
pub fn read_order(p: &Placement) -> Vec<u8> {
    let mut order = p.stores.clone();
    order.extend(p.leaving.iter().filter(|s| !p.stores.contains(s)));
    order
}

impl Placements {
    pub fn new(meta: Arc<Meta>) -> Placements {
        Placements {
            meta,
            cache: Mutex::new(HashMap::new()),
            policies: Mutex::new(None),
            resolved: Mutex::new(HashMap::new()),
        }
    }

    fn remember(&self, id: u64, stores: Vec<u8>) {
        let mut cache = self.cache.lock();
        if cache.len() >= PLACEMENT_CACHE {
            cache.clear();
        }
        cache.insert(id, (stores, Instant::now()));
    }

    /// Forget what this client knew of slice `id` (after changing its record).
    pub fn forget(&self, id: u64) {
        self.cache.lock().remove(&id);
    }

    /// Every directory's policy, read again when older than a few seconds.
    pub async fn policies(&self) -> Result<PolicyTable, MetaError> {
        if let Some((at, table)) = self.policies.lock().as_ref()
            && at.elapsed() < POLICY_TTL
        {
            return Ok(table.clone());
        }
        let table: PolicyTable = Arc::new(self.meta.tier_policies().await?.into_iter().collect());
        *self.policies.lock() = Some((Instant::now(), table.clone()));
        Ok(table)
    }

    /// The policy deciding where new data of inode `ino` goes: the nearest one of it or a
    /// directory above it that takes new data at once (no `after`); `None` when there is
    /// none (or the file has several links, so no one parent).
    pub async fn write_policy(&self, ino: Ino) -> Result<Option<TierPolicy>, MetaError> {
        let table = self.policies().await?;
        if table.is_empty() {
            return Ok(None);
        }
        if let Some((policy, at)) = self.resolved.lock().get(&ino)
            && at.elapsed() < POLICY_TTL
        {
            return Ok(policy.clone());
        }
        let policy = self.walk_up(ino, &table).await?;
        let mut resolved = self.resolved.lock();
        if resolved.len() >= PLACEMENT_CACHE {
            resolved.clear();
        }
        resolved.insert(ino, (policy.clone(), Instant::now()));
        Ok(policy)
    }

    /// The nearest policy without `after` of `ino` or a directory above it.
    async fn walk_up(
        &self,
        ino: Ino,
        table: &BTreeMap<Ino, TierPolicy>,
    ) -> Result<Option<TierPolicy>, MetaError> {
        let mut at = ino;
        for _ in 0..MAX_DEPTH {
            if let Some(p) = table.get(&at)
                && p.after_secs == 0
            {
                return Ok(Some(p.clone()));
            }
            if at == Ino::ROOT {
                return Ok(None);
            }
            let parent = self.meta.getattr(at).await?.parent;
            if parent.0 == 0 {
                return Ok(None);
            }
            at = parent;
        }
        Ok(None)
    }

    /// Record where new slice `id` of file `ino` goes, before its blocks are written.
    pub async fn place_new_slice(&self, ino: Ino, id: u64) -> Result<(), MetaError> {
        let Some(policy) = self.write_policy(ino).await? else {
            return Ok(());
        };
        let placement = policy.placement();
        if placement.is_default() {
            return Ok(());
        }
        self.meta.set_placement(id, Some(&placement)).await?;
        self.remember(id, placement.stores);
        Ok(())
    }
}

#[async_trait]
impl PlacementLookup for Placements {
    async fn stores_of(&self, id: u64) -> ObjectResult<Vec<u8>> {
        if let Some((stores, at)) = self.cache.lock().get(&id)
            && at.elapsed() < PLACEMENT_TTL
        {
            return Ok(stores.clone());
        }
        let found = self.meta.placements(&[id]).await.map_err(meta_failed)?;
        let stores = match found.into_iter().next().flatten() {
            Some(p) => read_order(&p),
            None => Vec::new(),
        };
        self.remember(id, stores.clone());
        Ok(stores)
    }

    async fn written_to(&self, id: u64, stores: &[u8]) -> ObjectResult<()> {
        let placement = Placement {
            stores: stores.to_vec(),
            ..Placement::default()
        };
        self.meta
            .set_placement(id, Some(&placement))
            .await
            .map_err(meta_failed)?;
        self.remember(id, stores.to_vec());
        Ok(())
    }
}
