//! Several stores as one (docs/PLACEMENT.md): [`Routed`] sits where a volume's single
//! backend would, below every wrapper, and sends each block to the stores its slice's
//! placement names ([`PlacementLookup`], kept in metadata). Reads try those stores in
//! order, then every other store (a move may have left the record behind the data);
//! a store that fails is skipped for a while ([`Routed::down_for`]) and tried last.
//! Writes go to every store the placement names; when none of them takes the block it
//! goes to store 0, and the placement is told where it went, so a slow or stopped cold
//! store never fails a write. Objects that are not blocks (no slice id in their name)
//! live in store 0 only. Deletes go to every store; listings merge every store's.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use parking_lot::Mutex;

use strata_types::metrics::{Exposition, Kind};

use crate::upload::Upload;
use crate::{ObjectError, ObjectInfo, ObjectStore, Result};

/// Where slices are, as metadata records them.
#[async_trait]
pub trait PlacementLookup: Send + Sync + fmt::Debug {
    /// The stores holding slice `id`'s blocks, the one to read first first (empty: store
    /// 0 only). Stores it is leaving after a move come last.
    async fn stores_of(&self, id: u64) -> Result<Vec<u8>>;
    /// The blocks of new slice `id` went to `stores` only, not to all the placement named
    /// (some were down): record that before the writer commits the slice.
    async fn written_to(&self, id: u64, stores: &[u8]) -> Result<()>;
}

/// Counters of a routed store.
#[derive(Debug, Default)]
pub struct RouteStats {
    /// Reads answered by a store other than the first one tried.
    pub fallback_reads: AtomicU64,
    /// Requests that passed over a store marked down.
    pub skipped_down: AtomicU64,
    /// Failures of a store that marked it down.
    pub store_failures: AtomicU64,
    /// Blocks written to fewer stores than their placement named.
    pub partial_writes: AtomicU64,
    /// Blocks written to store 0 because no store their placement named took them.
    pub fallback_writes: AtomicU64,
    /// Reads that asked a second store because the first was slow to answer.
    pub hedged_reads: AtomicU64,
    /// Writes that left a store out because it was still busy after the others were done.
    pub slow_writes: AtomicU64,
}

impl RouteStats {
    fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// The counters, as `(name, help, value)`.
    pub fn snapshot(&self) -> Vec<(&'static str, &'static str, u64)> {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        vec![
            (
                "fallback_reads",
                "Reads answered by a store other than the first one tried.",
                get(&self.fallback_reads),
            ),
            (
                "skipped_down",
                "Requests that passed over a store marked down.",
                get(&self.skipped_down),
            ),
            (
                "store_failures",
                "Store failures that marked a store down for a while.",
                get(&self.store_failures),
            ),
            (
                "partial_writes",
                "Blocks written to fewer stores than their placement named.",
                get(&self.partial_writes),
            ),
            (
                "fallback_writes",
                "Blocks written to store 0 because no store their placement named took them.",
                get(&self.fallback_writes),
            ),
            (
                "hedged_reads",
                "Reads that also asked the next store because the first was slow to answer.",
                get(&self.hedged_reads),
            ),
            (
                "slow_writes",
                "Writes that left out a store still busy after the others had the block.",
                get(&self.slow_writes),
            ),
        ]
    }
}

/// One store of a routed set.
#[derive(Debug)]
pub struct Member {
    pub id: u8,
    pub name: String,
    pub store: Arc<dyn ObjectStore>,
    down_until: Mutex<Option<Instant>>,
}

impl Member {
    pub fn new(id: u8, name: &str, store: Arc<dyn ObjectStore>) -> Member {
        Member {
            id,
            name: name.to_string(),
            store,
            down_until: Mutex::new(None),
        }
    }

    fn is_down(&self) -> bool {
        let mut until = self.down_until.lock();
        match *until {
            Some(t) if t > Instant::now() => true,
            Some(_) => {
                *until = None;
                false
            }
            None => false,
        }
    }
}

/// Stores by id, blocks routed by their slice's placement.
pub struct Routed {
    members: Vec<Member>,
    lookup: Arc<dyn PlacementLookup>,
    down_for: Duration,
    hedge_after: Duration,
    write_patience: Duration,
    stats: Arc<RouteStats>,
}

/// How long a read waits for a store before also asking the next one.
pub const HEDGE_AFTER: Duration = Duration::from_secs(2);
/// How long a write waits for the other stores once one has the block.
pub const WRITE_PATIENCE: Duration = Duration::from_secs(5);

impl fmt::Debug for Routed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Routed")
            .field("stores", &self.describe())
            .finish()
    }
}

/// Whether an error says something of the store rather than of the object.
fn store_failed(e: &ObjectError) -> bool {
    !matches!(
        e,
        ObjectError::NotFound(_) | ObjectError::InvalidKey(_) | ObjectError::Corrupt { .. }
    )
}

/// The slice id in a block object's key (`[prefix/]chunks/…/{id}_{index}_{len}`): after
/// a whole `chunks` segment, so a volume named e.g. `datachunks` has no blocks elsewhere.
pub fn slice_of(key: &str) -> Option<u64> {
    let at = match key.strip_prefix("chunks/") {
        Some(_) => 0,
        None => key.find("/chunks/")? + 1,
    };
    crate::parse_block_name(&key[at..]).map(|(id, _, _)| id)
}

impl Routed {
    /// `members` must hold store 0, the volume's own; a store that fails is skipped for
    /// `down_for`.
    pub fn new(
        members: Vec<Member>,
        lookup: Arc<dyn PlacementLookup>,
        down_for: Duration,
    ) -> Result<Routed> {
        if !members.iter().any(|m| m.id == 0) {
            return Err(ObjectError::Other("a routed store needs store 0".into()));
        }
        Ok(Routed {
            members,
            lookup,
            down_for,
            hedge_after: HEDGE_AFTER,
            write_patience: WRITE_PATIENCE,
            stats: Arc::new(RouteStats::default()),
        })
    }

    /// This set with other waits for slow stores (tests).
    #[cfg(test)]
    pub(crate) fn with_patience(self, hedge_after: Duration, write_patience: Duration) -> Routed {
        Routed {
            hedge_after,
            write_patience,
            ..self
        }
    }

    pub fn stats(&self) -> &Arc<RouteStats> {
        &self.stats
    }

    /// The store with id `id`.
    pub fn member(&self, id: u8) -> Option<&Member> {
        self.members.iter().find(|m| m.id == id)
    }

    pub fn members(&self) -> &[Member] {
        &self.members
    }

    /// The routing counters and which stores are passed over now, for Prometheus.
    pub fn render_metrics(&self, e: &mut Exposition) {
        for (name, help, value) in self.stats.snapshot() {
            e.single(&format!("strata_store_{name}"), Kind::Counter, help, value);
        }
        e.family(
            "strata_store_down",
            Kind::Gauge,
            "1 while a store is passed over after failing, else 0.",
        );
        for m in &self.members {
            e.sample(
                "strata_store_down",
                &[("store", m.name.as_str())],
                u64::from(m.is_down()),
            );
        }
    }

    fn home(&self) -> &Member {
        // `new` checked that store 0 is there.
        self.member(0).unwrap_or(&self.members[0])
    }

    fn mark_down(&self, m: &Member, e: &ObjectError) {
        RouteStats::bump(&self.stats.store_failures);
        *m.down_until.lock() = Some(Instant::now() + self.down_for);
        tracing::warn!(
            "store {} failed ({e}); skipping it for {:?}",
            m.name,
            self.down_for
        );
    }

    /// The stores to try for `key`, in order: its placement's, then the others; stores
    /// marked down go last.
    async fn read_order(&self, key: &str) -> Result<Vec<&Member>> {
        let Some(id) = slice_of(key) else {
            return Ok(vec![self.home()]);
        };
        let mut ids = self.lookup.stores_of(id).await?;
        if ids.is_empty() {
            ids.push(0);
        }
        for m in &self.members {
            if !ids.contains(&m.id) {
                ids.push(m.id);
            }
        }
        let order: Vec<&Member> = ids.iter().filter_map(|&i| self.member(i)).collect();
        let (up, down): (Vec<&Member>, Vec<&Member>) = order.into_iter().partition(|m| {
            let down = m.is_down();
            if down {
                RouteStats::bump(&self.stats.skipped_down);
            }
            !down
        });
        Ok(up.into_iter().chain(down).collect())
    }

    /// Ask each store of `key`'s read order in turn until one has it. A store that has
    /// not answered after [`HEDGE_AFTER`] gets company: the next store is asked too, and
    /// the first answer wins (a slow store delays a read by that much at most).
    async fn first_answer<'s, T, F>(&'s self, key: &str, ask: F) -> Result<T>
    where
        F: Fn(&'s Member) -> futures::future::BoxFuture<'s, Result<T>>,
    {
        let mut order = self.read_order(key).await?.into_iter().enumerate();
        let mut asking = FuturesUnordered::new();
        let ask_next = |order: &mut dyn Iterator<Item = (usize, &'s Member)>,
                        asking: &mut FuturesUnordered<_>| {
            if let Some((tried, m)) = order.next() {
                let answer = ask(m);
                asking.push(async move { (tried, m, answer.await) });
            }
        };
        ask_next(&mut order, &mut asking);
        // A store that failed may hold the object: its error, not NotFound, is the answer
        // when no store has it, so the caller tries again rather than call it missing.
        let mut failure: Option<ObjectError> = None;
        loop {
            let answered = match order.len() {
                // Nobody left to ask besides those asked: wait for them.
                0 => asking.next().await,
                _ => match tokio::time::timeout(self.hedge_after, asking.next()).await {
                    Ok(answered) => answered,
                    Err(_) => {
                        RouteStats::bump(&self.stats.hedged_reads);
                        ask_next(&mut order, &mut asking);
                        continue;
                    }
                },
            };
            let Some((tried, m, answer)) = answered else {
                break;
            };
            match answer {
                Ok(v) => {
                    if tried > 0 {
                        RouteStats::bump(&self.stats.fallback_reads);
                    }
                    return Ok(v);
                }
                Err(ObjectError::NotFound(_)) => {}
                Err(e) => {
                    if store_failed(&e) {
                        self.mark_down(m, &e);
                    }
                    failure.get_or_insert(e);
                }
            }
            if asking.is_empty() {
                ask_next(&mut order, &mut asking);
            }
        }
        Err(failure.unwrap_or_else(|| ObjectError::NotFound(key.to_string())))
    }

    /// Put `data` to each of `targets` at once; the ids that took it, and the last error.
    /// Once one store has it, the others get [`WRITE_PATIENCE`] more: a store still busy
    /// then is left out (and passed over for a while), so a slow copy never stalls a write.
    async fn put_each(
        &self,
        key: &str,
        data: &Bytes,
        targets: &[&Member],
    ) -> (Vec<u8>, Option<ObjectError>) {
        let mut puts: FuturesUnordered<_> = targets
            .iter()
            .map(|m| async move { (*m, m.store.put(key, data.clone()).await) })
            .collect();
        let mut took = Vec::new();
        let mut answered = Vec::new();
        let mut last = None;
        let mut until: Option<tokio::time::Instant> = None;
        loop {
            let next = match until {
                None => puts.next().await,
                Some(t) => match tokio::time::timeout_at(t, puts.next()).await {
                    Ok(next) => next,
                    Err(_) => break,
                },
            };
            let Some((m, r)) = next else {
                return (took, last);
            };
            answered.push(m.id);
            match r {
                Ok(()) => {
                    took.push(m.id);
                    until.get_or_insert_with(|| tokio::time::Instant::now() + self.write_patience);
                }
                Err(e) => {
                    if store_failed(&e) {
                        self.mark_down(m, &e);
                    }
                    last = Some(e);
                }
            }
        }
        // Stores that did not answer in time: the block is not theirs.
        for m in targets.iter().filter(|m| !answered.contains(&m.id)) {
            RouteStats::bump(&self.stats.slow_writes);
            self.mark_down(m, &ObjectError::Timeout(self.write_patience));
        }
        (took, last)
    }

    async fn put_block(&self, key: &str, id: u64, data: Bytes) -> Result<()> {
        let mut wanted = self.lookup.stores_of(id).await?;
        if wanted.is_empty() {
            wanted.push(0);
        }
        let targets: Vec<&Member> = wanted
            .iter()
            .filter_map(|&i| self.member(i))
            .filter(|m| {
                let down = m.is_down();
                if down {
                    RouteStats::bump(&self.stats.skipped_down);
                }
                !down
            })
            .collect();
        let (mut took, mut last) = self.put_each(key, &data, &targets).await;
        if took.is_empty() && !targets.iter().any(|m| m.id == 0) {
            let (home_took, home_err) = self.put_each(key, &data, &[self.home()]).await;
            if !home_took.is_empty() {
                RouteStats::bump(&self.stats.fallback_writes);
            }
            took = home_took;
            last = home_err.or(last);
        }
        if took.is_empty() {
            return Err(last.unwrap_or_else(|| {
                ObjectError::Other(format!("no store of slice {id} is up to take {key}"))
            }));
        }
        // `took` is in completion order; the record keeps the placement's (read) order.
        let within = took.iter().all(|t| wanted.contains(t));
        if !within || took.len() < wanted.len() {
            let kept: Vec<u8> = match within {
                true => wanted
                    .iter()
                    .copied()
                    .filter(|w| took.contains(w))
                    .collect(),
                false => took,
            };
            RouteStats::bump(&self.stats.partial_writes);
            self.lookup.written_to(id, &kept).await?;
        }
        Ok(())
    }

    /// Every store's listing of `prefix` merged (one key once), up to `limit`.
    async fn merged_list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ObjectInfo>> {
        let mut merged = BTreeMap::new();
        for m in &self.members {
            for info in m.store.list(prefix, start_after, limit).await? {
                merged.entry(info.key.clone()).or_insert(info);
            }
        }
        Ok(merged.into_values().take(limit).collect())
    }
}

#[async_trait]
impl ObjectStore for Routed {
    fn describe(&self) -> String {
        let names: Vec<String> = self
            .members
            .iter()
            .map(|m| format!("{}={}", m.name, m.store.describe()))
            .collect();
        format!("stores({})", names.join(", "))
    }

    fn cheap_ranges(&self) -> bool {
        self.members.iter().all(|m| m.store.cheap_ranges())
    }

    fn range_unit(&self) -> usize {
        self.home().store.range_unit()
    }

    async fn get(&self, key: &str, range: Option<Range<u64>>) -> Result<Bytes> {
        self.first_answer(key, |m| {
            let range = range.clone();
            Box::pin(m.store.get(key, range))
        })
        .await
    }

    async fn put(&self, key: &str, data: Bytes) -> Result<()> {
        match slice_of(key) {
            Some(id) => self.put_block(key, id, data).await,
            None => self.home().store.put(key, data).await,
        }
    }

    async fn upload<'a>(&'a self, key: &str) -> Result<Box<dyn Upload + 'a>> {
        match slice_of(key) {
            Some(_) => Ok(Box::new(crate::upload::BufferedUpload::new(self, key))),
            None => self.home().store.upload(key).await,
        }
    }

    async fn sync(&self) -> Result<u64> {
        let mut synced = 0;
        for m in &self.members {
            synced += m.store.sync().await?;
        }
        Ok(synced)
    }

    async fn delete(&self, key: &str) -> Result<()> {
        if slice_of(key).is_none() {
            return self.home().store.delete(key).await;
        }
        let deletes = self.members.iter().map(|m| m.store.delete(key));
        for r in futures::future::join_all(deletes).await {
            r?;
        }
        Ok(())
    }

    async fn head(&self, key: &str) -> Result<ObjectInfo> {
        self.first_answer(key, |m| Box::pin(m.store.head(key)))
            .await
    }

    /// Every store's listing merged, each key once (a copy is one object): pages of the
    /// merged order, so the default `scan_all` over it also sees each key once.
    async fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ObjectInfo>> {
        self.merged_list(prefix, start_after, limit).await
    }

    async fn check(&self) -> Result<()> {
        for m in &self.members {
            m.store.check().await.map_err(|e| match e {
                ObjectError::Other(text) => ObjectError::Other(format!("store {}: {text}", m.name)),
                other => other,
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "routed/tests.rs"]
mod tests;
