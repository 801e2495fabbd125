//! The optimistic transaction, written once above every engine: buffered writes with
//! read-your-writes, a read set re-checked at commit, field updates, and the bounded,
//! jittered retry loop ([`run_txn`]).

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use rand::Rng;

use super::readcache::{ReadCache, Seen, Stamp};
use super::{
    CommitRequest, FieldOp, Key, KvEngine, KvError, KvSnapshot, Link, LinkedScan, ReadCheck, Value,
    Write, apply_field_ops,
};

mod field_locks;
mod retry;
mod stats;
use retry::recheck;
pub use retry::{RetryPolicy, TxnError, TxnFuture, run_txn, run_txn_cached};
pub use stats::{LostCommit, lost_commits, record_lost_commit, render_txn_metrics};

/// A map keyed by engine keys, hashed fast (keys come from this client's own reads).
type KeyMap<V> = std::collections::HashMap<Key, V, foldhash::fast::RandomState>;

/// One optimistic transaction over a [`KvEngine`].
pub struct Txn<'a> {
    engine: &'a dyn KvEngine,
    snapshot: Box<dyn KvSnapshot>,
    reads: Vec<ReadCheck>,
    /// Where in `reads` each key's point read is: a page of thousands of entries is
    /// looked up by key, never searched.
    points: KeyMap<usize>,
    writes: BTreeMap<Key, Write>,
    /// Calls made to the engine's read view (each one returns one consistent state).
    engine_calls: u32,
    /// The client's cache of recent values ([`ReadCache`]): told what this transaction
    /// read and wrote.
    cache: Option<&'a ReadCache>,
    /// Whether values found in `cache` are assumed instead of read.
    assume: bool,
    /// Keys whose values were assumed, not read: re-checked only by the commit.
    assumed: std::collections::HashSet<Key, foldhash::fast::RandomState>,
    /// Whether values the cache trusts (a live change feed) are used as reads.
    trust: bool,
    /// Whether some read came from the trusted cache (one more view of the volume).
    trusted_reads: bool,
    /// The values taken from the trusted cache so far: later ones must be one state
    /// with them ([`ReadCache::get_trusted_with`]).
    trusted_held: Vec<(Key, Seen)>,
    /// A listing's page came from the trusted cache: nothing more may (its rows are
    /// checked with its values only).
    trusted_page: bool,
    /// Some value was read from a second view of the engine (pending field updates read
    /// fresh at the commit): what this transaction read is not one snapshot.
    second_view: bool,
    /// The cache's stamp when this transaction started.
    generation: Option<Stamp>,
}

/// How a transaction uses the client's [`ReadCache`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheUse {
    /// Read everything from the engine (the cache is only told what was read).
    Inform,
    /// A writing transaction: assume recent values; the commit re-checks them.
    Assume,
    /// A read-only transaction: take values the cache trusts (a live change feed) as
    /// current, without a round trip.
    Trust,
}

impl std::fmt::Debug for Txn<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Txn")
            .field("engine", &self.engine.name())
            .field("reads", &self.reads.len())
            .field("writes", &self.writes.len())
            .finish()
    }
}

impl<'a> Txn<'a> {
    /// Start a transaction on `engine`.
    pub async fn begin(engine: &'a dyn KvEngine) -> Result<Txn<'a>, KvError> {
        Self::begin_with(engine, None, CacheUse::Inform).await
    }

    /// Start a transaction that tells `cache` what it read and wrote and uses it as `how`
    /// says (see [`CacheUse`] and [`ReadCache`]).
    pub async fn begin_with(
        engine: &'a dyn KvEngine,
        cache: Option<&'a ReadCache>,
        how: CacheUse,
    ) -> Result<Txn<'a>, KvError> {
        let generation = cache.map(ReadCache::stamp);
        let snapshot = engine.snapshot().await?;
        Ok(Txn {
            engine,
            snapshot,
            reads: Vec::new(),
            points: KeyMap::default(),
            writes: BTreeMap::new(),
            engine_calls: 0,
            cache,
            assume: how == CacheUse::Assume && cache.is_some(),
            assumed: Default::default(),
            trust: how == CacheUse::Trust && cache.is_some(),
            trusted_reads: false,
            trusted_held: Vec::new(),
            trusted_page: false,
            second_view: false,
            generation,
        })
    }

    /// Values of `keys` if the cache trusts every one, recorded as reads.
    fn trusted(&mut self, keys: &[Key]) -> Option<Vec<Option<Value>>> {
        if !self.trust || self.trusted_page {
            return None;
        }
        let values = self.cache?.get_trusted_with(keys, &mut self.trusted_held)?;
        self.trusted_reads = true;
        for (key, value) in keys.iter().zip(&values) {
            self.record_point(key, value.clone());
            self.assumed.insert(key.clone());
        }
        Some(values)
    }

    /// True when some value this transaction used was assumed rather than read.
    pub fn assumed_anything(&self) -> bool {
        !self.assumed.is_empty()
    }

    /// Take `key`'s value from the cache, if it is there, as a recorded read.
    fn assume(&mut self, key: &[u8]) -> Option<Option<Value>> {
        if !self.assume {
            return None;
        }
        let value = self.cache?.get(key)?;
        self.assumed.insert(key.to_vec());
        self.record_point(key, value.clone());
        Some(value)
    }

    /// The value under `key`, seeing this transaction's own writes.
    pub async fn get(&mut self, key: &[u8]) -> Result<Option<Value>, KvError> {
        match self.writes.get(key) {
            Some(Write::Put(v)) => return Ok(Some(v.clone())),
            Some(Write::Delete) => return Ok(None),
            Some(Write::Fields(_)) | None => {}
        }
        let base = self.read_engine(key).await?;
        self.materialize_fields(key, base)
    }

    /// Values of several keys in one engine round trip, in the order asked.
    pub async fn get_many(&mut self, keys: &[Key]) -> Result<Vec<Option<Value>>, KvError> {
        let mut missing: Vec<Key> = keys
            .iter()
            .filter(|k| !self.is_buffered_value(k))
            .cloned()
            .collect();
        if self.assume {
            missing.retain(|k| self.assume(k).is_none());
        }
        if !missing.is_empty() && self.trusted(&missing).is_some() {
            missing.clear();
        }
        let fetched = if missing.is_empty() {
            Vec::new()
        } else {
            self.engine_calls += 1;
            self.snapshot.get_many(&missing).await?
        };
        for (key, value) in missing.iter().zip(fetched) {
            self.record_point(key, value);
        }
        let mut out = Vec::with_capacity(keys.len());
        for key in keys {
            out.push(self.get(key).await?);
        }
        Ok(out)
    }

    /// Values of `keys`, then of the keys `link` names from one of them (`None` each when
    /// it names none): one engine call where the engine can (see
    /// [`KvSnapshot::get_linked`]), else two.
    pub async fn get_linked(
        &mut self,
        keys: &[Key],
        link: &Link,
    ) -> Result<Vec<Option<Value>>, KvError> {
        let fresh = self.writes.is_empty() && keys.iter().all(|k| !self.is_buffered_value(k));
        if fresh && let Some(values) = self.trusted_linked(keys, link) {
            return Ok(values);
        }
        // With the first keys cached, reading in two steps takes at most one call.
        let cached = self.assume && self.cache.is_some_and(|c| keys.iter().all(|k| c.holds(k)));
        if fresh
            && !cached
            && let Some(values) = self.snapshot.get_linked(keys, link).await?
        {
            if values.len() != keys.len() + link.targets.len() {
                return Err(KvError::Engine(format!(
                    "linked read returned {} values for {} keys",
                    values.len(),
                    keys.len() + link.targets.len()
                )));
            }
            self.engine_calls += 1;
            let targets = link.target_keys(values.get(link.from).and_then(|v| v.as_deref()));
            let mut read = keys.to_vec();
            read.extend(targets.into_iter().flatten());
            for (key, value) in read.iter().zip(&values) {
                // A target equal to a key read first is recorded once.
                if !self.is_buffered_value(key) {
                    self.record_point(key, value.clone());
                }
            }
            return Ok(values);
        }
        let mut values = self.get_many(keys).await?;
        let from = values.get(link.from).and_then(|v| v.as_deref());
        match link.target_keys(from) {
            Some(targets) => values.extend(self.get_many(&targets).await?),
            None => values.extend(link.targets.iter().map(|_| None)),
        }
        Ok(values)
    }

    /// Values of `keys`, the entries of `start..end` (ascending, at most `limit`) and the
    /// values each entry links to: one engine call where the engine can (see
    /// [`KvSnapshot::scan_linked`]), else three.
    pub async fn scan_linked(
        &mut self,
        keys: &[Key],
        start: &[u8],
        end: &[u8],
        limit: usize,
        link: &Link,
    ) -> Result<LinkedScan, KvError> {
        let fresh = self.writes.is_empty() && keys.iter().all(|k| !self.is_buffered_value(k));
        if fresh && let Some((got, wanted)) = self.trusted_scan(keys, start, end, limit, link) {
            self.record_linked_scan(keys, start, end, limit, link, &got)?;
            self.trusted_reads = true;
            self.trusted_page = true;
            self.assumed.extend(keys.iter().cloned().chain(wanted));
            return Ok(got);
        }
        if fresh
            && let Some(got) = self
                .snapshot
                .scan_linked(keys, start, end, limit, link)
                .await?
        {
            self.engine_calls += 1;
            self.record_linked_scan(keys, start, end, limit, link, &got)?;
            self.remember_range(start, end, limit, &got.rows);
            return Ok(got);
        }
        let values = self.get_many(keys).await?;
        let rows = self.scan(start, end, limit, false).await?;
        if fresh {
            self.remember_range(start, end, limit, &rows);
        }
        let targets = link.targets_of_rows(&rows);
        let wanted: Vec<Key> = targets.iter().flatten().flatten().cloned().collect();
        let linked = link.spread(&targets, self.get_many(&wanted).await?);
        Ok(LinkedScan {
            values,
            rows,
            linked,
        })
    }

    /// [`Txn::scan_linked`] answered by the trusted cache: a kept page of the range and
    /// every value it needs, all trusted and one state; with the linked keys it used. Only
    /// as the transaction's first trusted read.
    fn trusted_scan(
        &self,
        keys: &[Key],
        start: &[u8],
        end: &[u8],
        limit: usize,
        link: &Link,
    ) -> Option<(LinkedScan, Vec<Key>)> {
        if !self.trust || self.trusted_page || !self.trusted_held.is_empty() {
            return None;
        }
        let page = self
            .cache?
            .get_trusted_page(start, end, limit, keys, |rows| {
                link.targets_of_rows(rows)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .collect()
            })?;
        let targets = link.targets_of_rows(&page.rows);
        let linked = link.spread(&targets, page.linked);
        let scan = LinkedScan {
            values: page.values,
            rows: page.rows.to_vec(),
            linked,
        };
        Some((scan, page.wanted))
    }

    /// Offer the rows of a range this transaction read from the engine to the cache.
    fn remember_range(&self, start: &[u8], end: &[u8], limit: usize, rows: &[(Key, Value)]) {
        if let Some(cache) = self.cache {
            cache.remember_range(start, end, limit, rows, self.generation);
        }
    }

    /// Record what one [`KvSnapshot::scan_linked`] call returned as this transaction's
    /// reads.
    fn record_linked_scan(
        &mut self,
        keys: &[Key],
        start: &[u8],
        end: &[u8],
        limit: usize,
        link: &Link,
        got: &LinkedScan,
    ) -> Result<(), KvError> {
        if got.values.len() != keys.len() || got.linked.len() != got.rows.len() {
            return Err(KvError::Engine(format!(
                "linked scan returned {} values for {} keys, {} linked sets for {} rows",
                got.values.len(),
                keys.len(),
                got.linked.len(),
                got.rows.len()
            )));
        }
        for (key, value) in keys.iter().zip(&got.values) {
            self.record_point(key, value.clone());
        }
        self.reads.push(ReadCheck::Range {
            start: start.to_vec(),
            end: end.to_vec(),
            limit,
            reverse: false,
            entries: got.rows.clone(),
        });
        // Hard links name one inode from several rows, and a row may name the directory
        // itself: record each key once. Only the numbers need remembering.
        let mut seen = std::collections::HashSet::with_capacity_and_hasher(
            got.rows.len(),
            foldhash::fast::RandomState::default(),
        );
        for ((_, value), linked) in got.rows.iter().zip(&got.linked) {
            let Some(targets) = link.target_keys(Some(value)) else {
                continue;
            };
            let Some(number) = value.get(link.offset..link.offset + 8) else {
                continue;
            };
            if !seen.insert(number.to_vec()) {
                continue;
            }
            for (key, value) in targets.into_iter().zip(linked) {
                if !self.points.contains_key(&key) {
                    self.record_point(&key, value.clone());
                }
            }
        }
        Ok(())
    }

    /// Entries with `start <= key < end` in key order (descending with `reverse`), at most
    /// `limit`, merged with this transaction's own writes.
    pub async fn scan(
        &mut self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        reverse: bool,
    ) -> Result<Vec<(Key, Value)>, KvError> {
        let buffered: Vec<(Key, Write)> = self
            .writes
            .range::<[u8], _>((
                std::ops::Bound::Included(start),
                std::ops::Bound::Excluded(end),
            ))
            .map(|(k, w)| (k.clone(), w.clone()))
            .collect();
        // Buffered deletes may hide engine entries: ask for enough to still fill `limit`.
        let engine_limit = limit.saturating_add(buffered.len());
        self.engine_calls += 1;
        let entries = self
            .snapshot
            .scan(start, end, engine_limit, reverse)
            .await?;
        self.reads.push(ReadCheck::Range {
            start: start.to_vec(),
            end: end.to_vec(),
            limit: engine_limit,
            reverse,
            entries: entries.clone(),
        });
        let complete = entries.len() < engine_limit;
        let mut merged: BTreeMap<Key, Value> = entries.into_iter().collect();
        let boundary = if reverse {
            merged.keys().next()
        } else {
            merged.keys().next_back()
        }
        .cloned();
        for (key, write) in buffered {
            // Beyond what the engine returned we cannot merge correctly unless it returned all.
            let inside = complete
                || boundary
                    .as_ref()
                    .is_some_and(|b| if reverse { key >= *b } else { key <= *b });
            if !inside {
                continue;
            }
            let next = match write {
                Write::Put(v) => Some(v),
                Write::Delete => None,
                Write::Fields(ops) => {
                    apply_field_ops(&key, merged.get(&key).map(|v| &v[..]), &ops)?
                }
            };
            match next {
                Some(v) => merged.insert(key, v),
                None => merged.remove(&key),
            };
        }
        let iter: Box<dyn Iterator<Item = (Key, Value)>> = if reverse {
            Box::new(merged.into_iter().rev())
        } else {
            Box::new(merged.into_iter())
        };
        Ok(iter.take(limit).collect())
    }

    /// Buffer a write of `value` under `key`.
    pub fn put(&mut self, key: Key, value: Value) {
        self.writes.insert(key, Write::Put(value));
    }

    /// Buffer a deletion of `key`.
    pub fn delete(&mut self, key: Key) {
        self.writes.insert(key, Write::Delete);
    }

    /// Buffer field updates of the record under `key` (see [`FieldOp`]); they do not add
    /// `key` to the read set, so they never make this transaction conflict.
    pub fn update_fields(&mut self, key: Key, ops: &[FieldOp]) -> Result<(), KvError> {
        let next = match self.writes.remove(&key) {
            Some(Write::Put(v)) => match apply_field_ops(&key, Some(&v), ops)? {
                Some(v) => Write::Put(v),
                None => Write::Delete,
            },
            Some(Write::Delete) => Write::Delete,
            Some(Write::Fields(mut existing)) => {
                existing.extend_from_slice(ops);
                Write::Fields(existing)
            }
            None => Write::Fields(ops.to_vec()),
        };
        self.writes.insert(key, next);
        Ok(())
    }

    /// Commit: validate the read set and apply the writes, or fail with `Conflict`.
    pub async fn commit(mut self) -> Result<(), KvError> {
        if self.writes.is_empty() {
            return self.finish_read_only().await;
        }
        // Held until the commit returned (field_locks.rs).
        let mut _field_gates = Vec::new();
        if !self.engine.native_field_ops() {
            let pending: Vec<Key> = self
                .writes
                .iter()
                .filter(|(_, w)| matches!(w, Write::Fields(_)))
                .map(|(k, _)| k.clone())
                .collect();
            if !pending.is_empty() {
                _field_gates = field_locks::enter(&pending).await;
                self.materialize_pending(pending).await?;
            }
        }
        self.remember_reads();
        // Release the read view before waiting on the commit: a view held open across
        // commits keeps engines like SQLite from recycling their log.
        let Txn {
            engine,
            snapshot,
            reads,
            writes,
            cache,
            assumed,
            generation,
            ..
        } = self;
        drop(snapshot);
        let writes: Vec<(Key, Write)> = writes.into_iter().collect();
        let Some(cache) = cache else {
            return engine
                .commit(CommitRequest {
                    reads,
                    writes,
                    seq: 0,
                })
                .await;
        };
        let mut written = writes.clone();
        let seq = cache.next_commit();
        let outcome = engine
            .commit_fields(CommitRequest { reads, writes, seq })
            .await;
        // Stored before it counts as returned: a transaction that starts after it must
        // find what it stored.
        let result = match outcome {
            Ok(fields) => {
                if let Some(fields) = fields {
                    known_fields(&mut written, fields);
                }
                cache.committed(&written, generation, seq);
                Ok(())
            }
            // Whatever was assumed may be what conflicted (or may not have been applied).
            Err(e) => {
                assumed.iter().for_each(|k| cache.forget(k));
                if !matches!(e, KvError::Conflict) {
                    // It may still apply: what it wrote is unknown from now on.
                    cache.outcome_unknown(&written);
                }
                Err(e)
            }
        };
        cache.returned(seq, matches!(result, Ok(()) | Err(KvError::Conflict)));
        result
    }

    /// Tell the cache what this transaction read from the engine (not what it assumed).
    fn remember_reads(&self) {
        let Some(cache) = self.cache else { return };
        let reads = self.reads.iter().filter_map(|read| match read {
            ReadCheck::Point { key, value } if !self.assumed.contains(key) => {
                Some((&key[..], value.as_deref()))
            }
            _ => None,
        });
        cache.remember_all(reads, self.generation, self.engine_reads_are_one_view());
    }

    /// Whether every value this transaction read from the engine came from one snapshot:
    /// one call, or one snapshot-isolated view (values from the cache are not counted:
    /// they are not stored again).
    fn engine_reads_are_one_view(&self) -> bool {
        !self.second_view && (self.engine.snapshot_isolation() || self.engine_calls <= 1)
    }

    /// Whether everything this transaction read came from one consistent state: on an
    /// engine with snapshot isolation, or from at most one call to the read view (every
    /// call is atomic), so a read-only transaction needs no re-check.
    fn reads_are_one_view(&self) -> bool {
        let views = self.engine_calls + u32::from(self.trusted_reads);
        (self.engine.snapshot_isolation() && !self.trusted_reads)
            || self.reads.is_empty()
            || views <= 1
    }

    /// [`Txn::get_linked`] answered by the trusted cache: the keys, then the keys the
    /// linking value names, all trusted and one state with what it took before.
    fn trusted_linked(&mut self, keys: &[Key], link: &Link) -> Option<Vec<Option<Value>>> {
        if !self.trust || self.trusted_page {
            return None;
        }
        let cache = self.cache?;
        // Checked as a whole before any of it counts: the second call re-checks the first.
        let mut held = self.trusted_held.clone();
        let mut values = cache.get_trusted_with(keys, &mut held)?;
        let from = values.get(link.from).and_then(|v| v.as_deref());
        let targets = link.target_keys(from);
        let mut wanted = keys.to_vec();
        match &targets {
            Some(targets) => {
                values.extend(cache.get_trusted_with(targets, &mut held)?);
                wanted.extend(targets.iter().cloned());
            }
            None => values.extend(link.targets.iter().map(|_| None)),
        }
        self.trusted_held = held;
        self.trusted_reads = true;
        for (key, value) in wanted.iter().zip(&values) {
            if !self.is_buffered_value(key) {
                self.record_point(key, value.clone());
                self.assumed.insert(key.clone());
            }
        }
        Some(values)
    }

    /// End a transaction that wrote nothing: on engines without snapshot isolation its
    /// reads are re-checked so the caller never acts on a torn view.
    ///
    /// A re-check that holds proves every value read (from the engine or the cache) current
    /// at one moment: they are kept as one view, so the next answer needing them together
    /// comes from the cache.
    async fn finish_read_only(self) -> Result<(), KvError> {
        self.remember_reads();
        if self.reads_are_one_view() {
            return Ok(());
        }
        let Txn {
            engine,
            snapshot,
            reads,
            cache,
            generation,
            ..
        } = self;
        drop(snapshot);
        let Some(cache) = cache else {
            return recheck(engine, None, reads).await;
        };
        let points: Vec<(Key, Option<Value>)> = reads
            .iter()
            .filter_map(|read| match read {
                ReadCheck::Point { key, value } => Some((key.clone(), value.clone())),
                ReadCheck::Range { .. } => None,
            })
            .collect();
        recheck(engine, Some(cache), reads).await?;
        let points = points.iter().map(|(k, v)| (&k[..], v.as_deref()));
        cache.remember_all(points, generation, true);
        Ok(())
    }

    fn is_buffered_value(&self, key: &[u8]) -> bool {
        matches!(self.writes.get(key), Some(Write::Put(_) | Write::Delete))
            || self.points.contains_key(key)
    }

    /// Read `key` from the engine (once per transaction) and remember it for validation.
    async fn read_engine(&mut self, key: &[u8]) -> Result<Option<Value>, KvError> {
        if let Some(ReadCheck::Point { value, .. }) =
            self.points.get(key).and_then(|&at| self.reads.get(at))
        {
            return Ok(value.clone());
        }
        if let Some(value) = self.assume(key) {
            return Ok(value);
        }
        if let Some(mut values) = self.trusted(&[key.to_vec()]) {
            return Ok(values.pop().flatten());
        }
        self.engine_calls += 1;
        let value = self.snapshot.get(key).await?;
        self.record_point(key, value.clone());
        Ok(value)
    }

    fn record_point(&mut self, key: &[u8], value: Option<Value>) {
        self.points
            .entry(key.to_vec())
            .or_insert_with(|| self.reads.len());
        self.reads.push(ReadCheck::Point {
            key: key.to_vec(),
            value,
        });
    }

    /// Turn the pending field updates of `keys` into puts. A record the body read keeps
    /// the value it read; an attempt that assumes recent values assumes the record's too
    /// (no round trip; if it is stale the commit conflicts and the next attempt reads);
    /// the others are read now, in one call to a fresh view: their value only has to hold
    /// at the commit (which compares it), so reading it at the transaction's start would
    /// only widen the window in which it can conflict.
    async fn materialize_pending(&mut self, keys: Vec<Key>) -> Result<(), KvError> {
        let mut unread = Vec::new();
        for key in keys {
            let base = if self.points.contains_key(&key) {
                self.read_engine(&key).await?
            } else if let Some(value) = self.assume(&key) {
                value
            } else {
                unread.push(key);
                continue;
            };
            self.materialize_fields(&key, base)?;
        }
        if unread.is_empty() {
            return Ok(());
        }
        self.engine_calls += 1;
        self.second_view = true;
        let values = self.engine.snapshot().await?.get_many(&unread).await?;
        if values.len() != unread.len() {
            return Err(KvError::Engine(format!(
                "{} values for {} keys",
                values.len(),
                unread.len()
            )));
        }
        for (key, value) in unread.into_iter().zip(values) {
            self.record_point(&key, value.clone());
            self.materialize_fields(&key, value)?;
        }
        Ok(())
    }

    /// Once a field-updated key has been read, its result depends on the read: turn the
    /// pending updates into a plain put of the computed value.
    fn materialize_fields(
        &mut self,
        key: &[u8],
        base: Option<Value>,
    ) -> Result<Option<Value>, KvError> {
        let Some(Write::Fields(ops)) = self.writes.get(key) else {
            return Ok(base);
        };
        let value = apply_field_ops(key, base.as_deref(), ops)?;
        let write = match &value {
            Some(v) => Write::Put(v.clone()),
            None => Write::Delete,
        };
        self.writes.insert(key.to_vec(), write);
        Ok(value)
    }
}

/// Turn the field updates of `written` into the values the engine reported they left
/// (one per field update, in order), so the cache keeps them as this commit's values.
fn known_fields(written: &mut [(Key, Write)], fields: Vec<Option<Value>>) {
    let is_update = |w: &Write| matches!(w, Write::Fields(_));
    if written.iter().filter(|(_, w)| is_update(w)).count() != fields.len() {
        // Not what was asked for: keep treating the records as unknown.
        return;
    }
    let updates = written.iter_mut().filter(|(_, w)| is_update(w));
    for ((_, write), value) in updates.zip(fields) {
        *write = value.map_or(Write::Delete, Write::Put);
    }
}
