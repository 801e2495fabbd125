//! Fault injection for tests: failing requests (all, after N calls, or every Nth), failing
//! syncs, delays, puts held until released, short reads and flipped bits, and random
//! faults from a seed (server errors, timeouts, truncated bodies, a slow first byte),
//! switchable at run time through a shared [`FaultControl`].

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use parking_lot::Mutex;

use crate::{ObjectError, ObjectInfo, ObjectStore, Result};

/// What to break. The default breaks nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FaultPlan {
    /// Puts fail once this many puts have succeeded.
    pub fail_puts_after: Option<u64>,
    /// Gets fail once this many gets have succeeded.
    pub fail_gets_after: Option<u64>,
    /// Every Nth request (of any kind) fails.
    pub fail_every: Option<u64>,
    /// Added to every request.
    pub delay: Duration,
    /// Gets return only the first half of the bytes.
    pub short_reads: bool,
    /// Gets return the bytes with one bit flipped.
    pub flip_bits: bool,
    /// Syncs fail (as an `fsync` that hit a disk error).
    pub fail_syncs: bool,
    /// Puts wait until a plan without this is set.
    pub hold_puts: bool,
    /// Syncs wait until a plan without this is set.
    pub hold_syncs: bool,
    /// Faults drawn at random for each request.
    pub random: Option<RandomFaults>,
}

/// Faults drawn for each request from a seeded generator, as a flaky object store
/// gives them. Rates are per thousand requests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RandomFaults {
    pub seed: u64,
    /// The request fails as a server error would (503).
    pub server_errors: u32,
    /// The request hangs for `timeout`, then fails as timed out.
    pub timeouts: u32,
    pub timeout: Duration,
    /// A get returns only a random prefix of its bytes (a body cut off mid-way).
    pub truncated: u32,
    /// A get waits `first_byte` before answering.
    pub slow: u32,
    pub first_byte: Duration,
}

/// Random faults fired so far, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FiredFaults {
    pub server_errors: u64,
    pub timeouts: u64,
    pub truncated: u64,
    pub slow: u64,
}

impl FiredFaults {
    pub fn total(&self) -> u64 {
        self.server_errors + self.timeouts + self.truncated + self.slow
    }
}

/// The switch board of a [`Faulty`] store.
#[derive(Debug, Default)]
pub struct FaultControl {
    plan: Mutex<FaultPlan>,
    puts: AtomicU64,
    gets: AtomicU64,
    deletes: AtomicU64,
    calls: AtomicU64,
    /// Woken whenever the plan changes (held puts look again).
    changed: tokio::sync::Notify,
    /// Puts waiting while held.
    held: AtomicU64,
    /// Syncs waiting while held.
    held_syncs: AtomicU64,
    /// The generator of random faults and the seed it was made from.
    rng: Mutex<Option<(u64, rand::rngs::StdRng)>>,
    fired: Mutex<FiredFaults>,
}

impl FaultControl {
    pub fn set(&self, plan: FaultPlan) {
        *self.plan.lock() = plan;
        self.changed.notify_waiters();
    }

    /// Random faults fired so far.
    pub fn fired(&self) -> FiredFaults {
        *self.fired.lock()
    }

    /// Draw this request's random fault (`get`: may truncate or be slow).
    fn draw(&self, random: &RandomFaults, kind: &str) -> Drawn {
        use rand::{Rng, SeedableRng};
        let mut rng = self.rng.lock();
        if rng.as_ref().is_none_or(|(seed, _)| *seed != random.seed) {
            *rng = Some((random.seed, rand::rngs::StdRng::seed_from_u64(random.seed)));
        }
        let Some((_, rng)) = rng.as_mut() else {
            return Drawn::Nothing;
        };
        let mut roll = |rate: u32| rate > 0 && rng.random_range(0..1000) < rate;
        let mut fired = self.fired.lock();
        if roll(random.server_errors) {
            fired.server_errors += 1;
            return Drawn::ServerError;
        }
        if roll(random.timeouts) {
            fired.timeouts += 1;
            return Drawn::Timeout;
        }
        if kind == "get" && roll(random.truncated) {
            fired.truncated += 1;
            return Drawn::Truncate(rng.random_range(0..1000));
        }
        if kind == "get" && roll(random.slow) {
            fired.slow += 1;
            return Drawn::Slow;
        }
        Drawn::Nothing
    }

    /// Deletes seen so far.
    pub fn deletes(&self) -> u64 {
        self.deletes.load(Ordering::Relaxed)
    }

    /// Puts waiting right now because puts are held.
    pub fn held_puts(&self) -> u64 {
        self.held.load(Ordering::Relaxed)
    }

    /// Syncs waiting right now because syncs are held.
    pub fn held_syncs(&self) -> u64 {
        self.held_syncs.load(Ordering::Relaxed)
    }

    /// Wait while requests of `kind` (puts or syncs) are held.
    async fn wait_while_held(&self, kind: &str) {
        let count = match kind {
            "put" => &self.held,
            "sync" => &self.held_syncs,
            _ => return,
        };
        let held = |p: &FaultPlan| {
            if kind == "put" {
                p.hold_puts
            } else {
                p.hold_syncs
            }
        };
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if !held(&self.plan()) {
                return;
            }
            count.fetch_add(1, Ordering::Relaxed);
            changed.await;
            count.fetch_sub(1, Ordering::Relaxed);
        }
    }

    pub fn plan(&self) -> FaultPlan {
        self.plan.lock().clone()
    }

    /// Successful-or-attempted puts and gets seen so far.
    pub fn counts(&self) -> (u64, u64) {
        (
            self.puts.load(Ordering::Relaxed),
            self.gets.load(Ordering::Relaxed),
        )
    }

    /// Apply the plan to a request of `kind`: the plan, and for a get the thousandths of
    /// its body to keep when a random fault truncates it.
    async fn before(&self, kind: &str) -> Result<(FaultPlan, Option<u64>)> {
        self.wait_while_held(kind).await;
        if kind == "delete" {
            self.deletes.fetch_add(1, Ordering::Relaxed);
        }
        let plan = self.plan();
        if kind == "sync" && plan.fail_syncs {
            return Err(ObjectError::Other("injected: sync failed".into()));
        }
        if !plan.delay.is_zero() {
            tokio::time::sleep(plan.delay).await;
        }
        let call = self.calls.fetch_add(1, Ordering::Relaxed) + 1;
        let mut truncate = None;
        // Syncs are the disk's business, broken by `fail_syncs`, not by a flaky server.
        if let Some(random) = plan.random.as_ref().filter(|_| kind != "sync") {
            match self.draw(random, kind) {
                Drawn::ServerError => {
                    return Err(ObjectError::Injected(format!(
                        "{kind} #{call}: 503 Service Unavailable"
                    )));
                }
                Drawn::Timeout => {
                    tokio::time::sleep(random.timeout).await;
                    return Err(ObjectError::Timeout(random.timeout));
                }
                Drawn::Slow => tokio::time::sleep(random.first_byte).await,
                Drawn::Truncate(keep) => truncate = Some(keep),
                Drawn::Nothing => {}
            }
        }
        if plan
            .fail_every
            .is_some_and(|n| n > 0 && call.is_multiple_of(n))
        {
            return Err(ObjectError::Injected(format!(
                "{kind} #{call} fails (every Nth)"
            )));
        }
        let (counter, limit) = match kind {
            "put" => (&self.puts, plan.fail_puts_after),
            "get" => (&self.gets, plan.fail_gets_after),
            _ => return Ok((plan, truncate)),
        };
        let done = counter.fetch_add(1, Ordering::Relaxed);
        if limit.is_some_and(|n| done >= n) {
            return Err(ObjectError::Injected(format!(
                "{kind} fails after {done} calls"
            )));
        }
        Ok((plan, truncate))
    }
}

/// One request's random fault.
enum Drawn {
    Nothing,
    ServerError,
    Timeout,
    Slow,
    /// Keep this many thousandths of the body.
    Truncate(u64),
}

/// A store that breaks on command.
#[derive(Debug)]
pub struct Faulty<S> {
    inner: S,
    control: Arc<FaultControl>,
}

impl<S: ObjectStore> Faulty<S> {
    /// A faulty store switched by `control` (which may switch several stores at once).
    pub fn sharing(inner: S, control: Arc<FaultControl>) -> Faulty<S> {
        Faulty { inner, control }
    }

    pub fn new(inner: S) -> (Faulty<S>, Arc<FaultControl>) {
        let control = Arc::new(FaultControl::default());
        (
            Faulty {
                inner,
                control: control.clone(),
            },
            control,
        )
    }
}

#[async_trait]
impl<S: ObjectStore> ObjectStore for Faulty<S> {
    fn describe(&self) -> String {
        format!("faulty+{}", self.inner.describe())
    }

    async fn get(&self, key: &str, range: Option<Range<u64>>) -> Result<Bytes> {
        let (plan, truncate) = self.control.before("get").await?;
        let data = self.inner.get(key, range).await?;
        let mut data = if plan.short_reads {
            data.slice(..data.len() / 2)
        } else {
            data
        };
        if let Some(keep) = truncate {
            let len = u64::try_from(data.len()).unwrap_or(u64::MAX);
            let kept = usize::try_from(len.saturating_mul(keep) / 1000).unwrap_or(0);
            data = data.slice(..kept.min(data.len().saturating_sub(1)));
        }
        if plan.flip_bits && !data.is_empty() {
            let mut v = data.to_vec();
            let mid = v.len() / 2;
            v[mid] ^= 0x01;
            data = Bytes::from(v);
        }
        Ok(data)
    }

    async fn put(&self, key: &str, data: Bytes) -> Result<()> {
        self.control.before("put").await?;
        self.inner.put(key, data).await
    }

    async fn put_parts(&self, key: &str, parts: Vec<Bytes>) -> Result<()> {
        self.control.before("put").await?;
        self.inner.put_parts(key, parts).await
    }

    async fn delete(&self, key: &str) -> Result<()> {
        self.control.before("delete").await?;
        self.inner.delete(key).await
    }

    async fn sync(&self) -> Result<u64> {
        self.control.before("sync").await?;
        self.inner.sync().await
    }

    async fn head(&self, key: &str) -> Result<ObjectInfo> {
        self.control.before("head").await?;
        self.inner.head(key).await
    }

    async fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ObjectInfo>> {
        self.control.before("list").await?;
        self.inner.list(prefix, start_after, limit).await
    }
}
