//! Recently read values that a writing transaction may assume instead of reading them
//! again: speculative reads, so a create, unlink or rename after the kernel's lookup is
//! one round trip (the commit) on a network engine.
//!
//! Nothing here is ever trusted: a value taken from this cache is recorded in the
//! transaction's read set like any other read and re-checked by the engine at commit.
//! If it was stale the commit conflicts, the keys it used are dropped, and the
//! transaction runs again with fresh reads. A speculative attempt that fails or writes
//! nothing is also run again before anything is returned, since nothing validated what
//! it read. Which keys may be cached is the metadata layer's choice (small, rarely
//! changing records: inode attributes and directory entries).
//!
//! On an engine with a change feed the cache is also *trusted* by read-only operations
//! (lookups, getattr): while this client's own beats keep coming back through the feed,
//! every change another client commits reaches [`ReadCache::invalidate`] in commit
//! order, so a value read after the feed came up and not invalidated since is current up
//! to the feed's delay. A read races with invalidations: a value is trusted only if no
//! invalidation of its key arrived between the start of the transaction that read it and
//! the moment it is stored (generations, and a bounded history of which key was
//! invalidated when). This client's own commits are announced too, with their numbers:
//! the values a commit stored are kept when its own announcement arrives, and anything
//! else under its keys (an older value of a concurrent commit of this client) is dropped —
//! unless the transaction that stored it started after that commit had returned (it saw
//! that commit's effects: sequential creates in one directory keep the directory's
//! record). A commit whose outcome is uncertain (an error other than a conflict) may
//! still apply later, so its announcement always counts.
//! Losing the feed, or its beats falling silent, drops all trust at once.
//!
//! Each trusted value is current *on its own*; an answer built from several (a lookup's
//! entry and the inode it names, a listing's page and its records) must also be one state
//! of the volume, or it could pair an entry from before a rename with the inode's record
//! from after it. Values are answered together only if they were read (or written) by one
//! view of the engine — one transaction whose reads were a single snapshot — or if the feed
//! has passed a moment at which each was current, and none was dropped since: a barrier
//! beat this client sent after it was stored came back (every change committed before
//! that beat has arrived), or this client's own commit that wrote it was announced
//! (announcements come in commit order: it was current at that commit's place) — see
//! [`Seen`]. A transaction's trusted reads are checked together the same
//! way ([`ReadCache::get_trusted_with`]). An own commit counts as an invalidation of what
//! it wrote the moment it returns: a read that began before then and is stored after is
//! not trusted (it may predate the commit, whose announcement has not arrived).
//!
//! Pages of directory listings (range reads) are kept too while the feed is live
//! ([`ranges`]); a listing may use them after a barrier (`Meta::sync_changes`).

use std::collections::{HashMap, VecDeque};

use foldhash::fast::RandomState;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::{Key, Value, Write};

mod budget;
mod ranges;
mod views;
mod whole;
pub use ranges::Rows;
pub use views::Seen;
use views::Views;

/// The memory budget of a cache when none is given (`MetaOptions::cache_size`).
pub const DEFAULT_BUDGET: usize = 32 << 20;
/// Commits that returned after one still outstanding, remembered at most.
const MAX_OUT_OF_ORDER: usize = 4096;
/// Commits with an uncertain outcome remembered at most.
const MAX_UNCERTAIN: usize = 1024;
/// How long a value stays worth assuming: a stale one costs a retry, nothing more.
const FRESH_FOR: Duration = Duration::from_secs(10);
/// How long a value read through a live feed is trusted without reading it again (a
/// bound against a feed that delivers beats but somehow missed a change).
const TRUSTED_FOR: Duration = Duration::from_secs(60);

#[derive(Debug)]
struct Entry {
    value: Option<Value>,
    at: Instant,
    /// The views it was seen in with this value ([`views`]).
    views: Views,
    /// Which store this is (every store of a key is a new one).
    version: u64,
    /// Read while the feed was live, with no invalidation racing the read.
    trusted: bool,
    /// The number of this client's commit that stored it.
    commit: Option<u64>,
    /// That commit's own announcement has arrived ([`Seen::confirmed`]).
    confirmed: bool,
    /// Every commit of this client up to this number had returned when the transaction
    /// that stored it started: their announcements cannot make it stale.
    after: u64,
    /// When the transaction that stored it started (unknown without a stamp).
    read_from: Option<Instant>,
}

/// When a transaction started, as the cache counts: its generation, and the number up to
/// which every commit of this client had returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    generation: u64,
    own_done: u64,
    taken: Instant,
    /// Names this transaction's view, if what it stores is one ([`views`]).
    batch: u64,
}

impl Entry {
    fn seen(&self) -> Seen {
        Seen {
            views: self.views,
            at: self.at,
            version: self.version,
            confirmed: self.confirmed,
        }
    }
}

/// Keys hash with foldhash: a readdirplus page stores a thousand of them, and SipHash
/// was a tenth of the CPU of `ls -l` (seeded per process, so names cannot be chosen to
/// collide).
#[derive(Debug, Default)]
struct State {
    /// How many entries and rows are kept at most ([`budget`]); past that expired ones
    /// are dropped, and all of them when that did not free a quarter.
    limits: budget::Limits,
    entries: HashMap<Key, Entry, RandomState>,
    /// The most values `entries` had room for since it last shrank: its size, which
    /// removals' marks hide from `capacity()`.
    entries_room: usize,
    /// Bumped by every invalidation and every change of the feed's state.
    generation: u64,
    /// Trust holds until then (extended by each beat of ours the feed returns).
    trusted_until: Option<Instant>,
    /// Each key's last invalidation: its generation and, for one of this client's own
    /// commits, that commit's number (0 otherwise).
    invalidated: HashMap<Key, (u64, u64), RandomState>,
    history: VecDeque<(u64, Key)>,
    /// Reads started before this generation are never trusted (history forgotten, feed
    /// lost or just up).
    floor: u64,
    /// Every commit of this client up to this number has returned.
    own_done: u64,
    /// Commits above `own_done` that returned out of order.
    own_returned: std::collections::BTreeSet<u64>,
    /// Commits that returned an error other than a conflict: applied or not, maybe
    /// later. Their announcements always count.
    own_uncertain: std::collections::BTreeSet<u64>,
    /// Pages of range reads (directory listings).
    ranges: ranges::Ranges,
    /// Directories this client created and alone changed since, entry by entry.
    wholes: whole::Wholes,
    /// Commits whose written values were stored, about to count as returned.
    stored: std::collections::BTreeSet<u64>,
    /// Commits announced by the feed before they returned: what they store is confirmed.
    announced_early: std::collections::BTreeSet<u64>,
    /// Every change committed before this moment has arrived (a beat this client sent
    /// then came back through the feed).
    covered_until: Option<Instant>,
    /// Numbers the stamps' batches.
    batches: u64,
    /// Numbers the stores of entries.
    versions: u64,
}

impl State {
    /// Whether a value of `key` read (or, with `commit`, written by that commit) by a
    /// transaction that started at generation `since` may be trusted.
    ///
    /// An invalidation by one of this client's own commits that had returned before the
    /// transaction started does not count: the transaction saw that commit's effects.
    fn may_trust(&self, key: &[u8], since: Option<Stamp>, commit: Option<u64>) -> bool {
        let Some(since) = since else { return false };
        if self.trusted_until.is_none() || since.generation < self.floor {
            return false;
        }
        match self.invalidated.get(key) {
            None => true,
            Some((at, by)) => {
                *at <= since.generation
                    || commit.is_some_and(|c| c == *by)
                    || self.seen_by(*by, since.own_done)
            }
        }
    }

    /// Whether trust holds at `now` (beats keep coming back).
    fn trusting(&self, now: Instant) -> bool {
        self.trusted_until.is_some_and(|t| t > now)
    }

    /// `key`'s entry if its value is trusted at `now`.
    fn trusted_entry(&self, key: &[u8], now: Instant) -> Option<&Entry> {
        let e = self.entries.get(key)?;
        (e.trusted && e.value.is_some() && now.duration_since(e.at) < TRUSTED_FOR).then_some(e)
    }

    /// Whether kept values seen as `seen` show one state of the volume ([`views`]).
    fn one_moment(&self, seen: impl IntoIterator<Item = Seen>) -> bool {
        views::one_moment(seen, self.covered_until)
    }

    /// Whether `entry` is worth assuming: read recently, or trusted while trust holds.
    fn is_recent(&self, entry: &Entry) -> bool {
        let now = Instant::now();
        budget::worth_keeping(entry, now, self.trusting(now))
    }

    /// Whether this client's commit `by` (0: another client's) had surely taken effect
    /// for a transaction that started when every commit up to `own_done` had returned.
    fn seen_by(&self, by: u64, own_done: u64) -> bool {
        by != 0 && by <= own_done && !self.own_uncertain.contains(&by)
    }

    fn note_invalidated(&mut self, key: &[u8], commit: u64) {
        let generation = self.generation;
        self.invalidated.insert(key.to_vec(), (generation, commit));
        self.history.push_back((generation, key.to_vec()));
        while self.history.len() > self.limits.history {
            let Some((at, old)) = self.history.pop_front() else {
                break;
            };
            if self.invalidated.get(&old).is_some_and(|(g, _)| *g == at) {
                self.invalidated.remove(&old);
            }
            self.floor = self.floor.max(at + 1);
        }
    }

    /// This client's commit `seq` may be applied at any time (its announcement counts).
    fn note_uncertain(&mut self, seq: u64) {
        if self.own_uncertain.len() >= MAX_UNCERTAIN {
            // Rare; past the bound, trust nothing read so far instead.
            self.own_uncertain.clear();
            self.distrust_all();
        }
        self.own_uncertain.insert(seq);
    }

    /// The feed delivered this client's own commit `seq` of `keys`: the values that commit
    /// stored were current at its place in the feed's order. One announced before it
    /// returned confirms what it stores when it does.
    fn own_announced(&mut self, keys: &[Key], seq: u64) {
        let returned =
            seq <= self.own_done || self.own_returned.contains(&seq) || self.stored.contains(&seq);
        if returned {
            self.confirm(keys.iter().map(|k| &k[..]), seq);
        } else if !self.own_uncertain.contains(&seq) {
            if self.announced_early.len() >= MAX_OUT_OF_ORDER {
                self.announced_early.clear();
            }
            self.announced_early.insert(seq);
        }
    }

    /// Mark what commit `seq` stored under `keys` (and still holds) as confirmed.
    fn confirm<'k>(&mut self, keys: impl IntoIterator<Item = &'k [u8]>, seq: u64) {
        for key in keys {
            if let Some(e) = self.entries.get_mut(key)
                && e.commit == Some(seq)
            {
                e.confirmed = true;
            }
        }
    }

    fn distrust_all(&mut self) {
        self.generation += 1;
        self.floor = self.generation;
        self.invalidated.clear();
        self.history.clear();
        self.entries.values_mut().for_each(|e| e.trusted = false);
        self.ranges.clear(self.generation);
        self.wholes.clear();
        self.covered_until = None;
    }
}

/// A listing's page answered by the cache ([`ReadCache::get_trusted_page`]).
#[derive(Debug)]
pub struct TrustedPage {
    pub rows: Rows,
    /// The values of the keys asked for.
    pub values: Vec<Option<Value>>,
    /// The keys the rows link to, and their values.
    pub wanted: Vec<Key>,
    pub linked: Vec<Option<Value>>,
}

/// Values (or absences) recently read or written by this client.
pub struct ReadCache {
    cacheable: fn(&[u8]) -> bool,
    state: Mutex<State>,
    /// Numbers this client's commits (1, 2, ...).
    commits: AtomicU64,
}

impl std::fmt::Debug for ReadCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadCache")
            .field("entries", &self.state.lock().entries.len())
            .finish()
    }
}

impl ReadCache {
    /// A cache of the keys `cacheable` accepts, within about `budget` bytes.
    pub fn new(cacheable: fn(&[u8]) -> bool, budget: usize) -> ReadCache {
        let limits = budget::Limits::within(budget);
        let state = State {
            limits,
            ranges: ranges::Ranges::with_limit(limits.rows, limits.history),
            wholes: whole::Wholes::with_limit(limits.rows),
            ..State::default()
        };
        ReadCache {
            cacheable,
            state: Mutex::new(state),
            commits: AtomicU64::new(0),
        }
    }

    /// The number of this client's next commit (announced with it).
    pub fn next_commit(&self) -> u64 {
        self.commits.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// The value last seen under `key`, if recent (`Some(None)`: seen absent).
    ///
    /// Recent: read less than [`FRESH_FOR`] ago, or trusted (the feed keeps it current)
    /// and read less than [`TRUSTED_FOR`] ago — listings answered from the cache do not
    /// read their records again, and an unlink after one should still assume them.
    pub fn get(&self, key: &[u8]) -> Option<Option<Value>> {
        let state = self.state.lock();
        let entry = state.entries.get(key)?;
        state.is_recent(entry).then(|| entry.value.clone())
    }

    /// True when a recent value of `key` is here (as [`get`](Self::get) counts it).
    pub fn holds(&self, key: &[u8]) -> bool {
        let state = self.state.lock();
        state.entries.get(key).is_some_and(|e| state.is_recent(e))
    }

    /// [`get_trusted_with`](Self::get_trusted_with) with nothing taken before (the unit
    /// cases' shorthand).
    #[cfg(test)]
    pub fn get_trusted(&self, keys: &[Key]) -> Option<Vec<Option<Value>>> {
        self.get_trusted_with(keys, &mut Vec::new())
    }

    /// Values of all `keys` if every one is trusted right now and, with the values `held`
    /// names (taken before by the same transaction, and still kept as they were), they are
    /// one state of the volume (see the module's doc); the new ones are then added to
    /// `held`. Absences are never trusted: a name another client just created must be
    /// found at once (close-to-open), as no negative entry is cached by the kernel either.
    pub fn get_trusted_with(
        &self,
        keys: &[Key],
        held: &mut Vec<(Key, Seen)>,
    ) -> Option<Vec<Option<Value>>> {
        let state = self.state.lock();
        let now = Instant::now();
        if !state.trusting(now) {
            return None;
        }
        let mut values = Vec::with_capacity(keys.len());
        let mut seen = Vec::with_capacity(keys.len());
        for key in keys {
            let e = state.trusted_entry(key, now)?;
            values.push(e.value.clone());
            seen.push((key.clone(), e.seen()));
        }
        let unchanged = held.iter().all(|(key, then)| {
            state
                .trusted_entry(key, now)
                .is_some_and(|e| e.version == then.version)
        });
        if !unchanged || !state.one_moment(held.iter().chain(&seen).map(|(_, s)| *s)) {
            return None;
        }
        held.extend(seen);
        Some(values)
    }

    /// How long ago the oldest of `keys` was read, if every one is trusted right now
    /// (see [`get_trusted_with`](Self::get_trusted_with)).
    pub fn trusted_age(&self, keys: &[Key]) -> Option<Duration> {
        let state = self.state.lock();
        let now = Instant::now();
        if !state.trusting(now) {
            return None;
        }
        keys.iter().try_fold(Duration::ZERO, |oldest, k| {
            let e = state.entries.get(k)?;
            let age = now.duration_since(e.at);
            (e.trusted && e.value.is_some() && age < TRUSTED_FOR).then_some(oldest.max(age))
        })
    }

    /// True when every one of `keys` is trusted right now and was read by a transaction
    /// that started at or after `since`: anything committed before `since` is in it, so
    /// it is as good as reading it again (what close-to-open asks of an open that began
    /// at `since` and looked the file up since).
    pub fn read_since(&self, keys: &[Key], since: Instant) -> bool {
        let state = self.state.lock();
        let now = Instant::now();
        if !state.trusting(now) {
            return false;
        }
        keys.iter().all(|k| {
            state.entries.get(k).is_some_and(|e| {
                e.trusted
                    && e.value.is_some()
                    && now.duration_since(e.at) < TRUSTED_FOR
                    && e.read_from.is_some_and(|r| r >= since)
            })
        })
    }

    /// True while trust holds (beats keep coming back through a live feed).
    pub fn is_trusting(&self) -> bool {
        self.state
            .lock()
            .trusted_until
            .is_some_and(|t| t > Instant::now())
    }

    /// The stamp to pass to [`remember_all`](Self::remember_all) and
    /// [`committed`](Self::committed), taken before reading.
    pub fn stamp(&self) -> Stamp {
        let mut state = self.state.lock();
        state.batches += 1;
        Stamp {
            generation: state.generation,
            own_done: state.own_done,
            taken: Instant::now(),
            batch: state.batches,
        }
    }

    /// This client's commit `seq` (from [`next_commit`](Self::next_commit)) returned:
    /// `certain` when it was applied or surely not (a conflict), not after other errors
    /// (it may still be applied later).
    pub fn returned(&self, seq: u64, certain: bool) {
        let mut state = self.state.lock();
        if !certain {
            state.note_uncertain(seq);
        }
        state.stored.remove(&seq);
        state.announced_early.remove(&seq);
        state.own_returned.insert(seq);
        loop {
            let next = state.own_done + 1;
            if !state.own_returned.remove(&next) {
                // A commit that never reported back (its caller gave up waiting) must not
                // hold the count back forever: past the bound it counts as uncertain.
                if state.own_returned.len() <= MAX_OUT_OF_ORDER {
                    break;
                }
                state.note_uncertain(next);
            }
            state.own_done = next;
        }
    }

    /// Remember what a read returned (ignored for keys not cacheable).
    pub fn remember(&self, key: &[u8], value: Option<&[u8]>) {
        self.remember_all([(key, value)], None, false);
    }

    /// Remember what several reads returned, under one lock (a readdirplus page is a
    /// thousand records). With the generation taken before the reads, and no invalidation
    /// of a key since, its value is trusted. `one_view`: the reads came from one snapshot
    /// of the engine, so they may be answered together ([`Seen`]).
    pub fn remember_all<'k>(
        &self,
        reads: impl IntoIterator<Item = (&'k [u8], Option<&'k [u8]>)>,
        since: Option<Stamp>,
        one_view: bool,
    ) {
        let batch = since.filter(|_| one_view).map_or(0, |s| s.batch);
        self.store(&mut self.state.lock(), reads, since, None, batch);
    }

    fn store<'k>(
        &self,
        state: &mut State,
        values: impl IntoIterator<Item = (&'k [u8], Option<&'k [u8]>)>,
        since: Option<Stamp>,
        commit: Option<u64>,
        batch: u64,
    ) {
        let after = since.map_or(0, |s| s.own_done);
        let read_from = since.map(|s| s.taken);
        let now = Instant::now();
        for (key, value) in values {
            if !(self.cacheable)(key) {
                continue;
            }
            state.before_insert(now);
            let trusted = state.may_trust(key, since, commit);
            state.versions += 1;
            let version = state.versions;
            if let Some(entry) = state.entries.get_mut(key) {
                // Re-read: reuse the key and, when equal, the value's buffer; a trusted
                // value seen again unchanged belongs to both views.
                if entry.value.as_deref() != value {
                    entry.value = value.map(<[u8]>::to_vec);
                    entry.views = Views::one(batch);
                    entry.confirmed = false;
                } else if entry.trusted && trusted {
                    // Kept all along: still current since it was confirmed.
                    entry.views.add(batch);
                } else {
                    entry.views = Views::one(batch);
                    entry.confirmed = false;
                }
                (entry.at, entry.trusted, entry.commit, entry.after) =
                    (now, trusted, commit, after);
                (entry.read_from, entry.version) = (read_from, version);
                continue;
            }
            let entry = Entry {
                value: value.map(<[u8]>::to_vec),
                at: now,
                views: Views::one(batch),
                version,
                trusted,
                commit,
                confirmed: false,
                after,
                read_from,
            };
            state.entries.insert(key.to_vec(), entry);
        }
    }

    /// Commit number `commit` of `writes`, by a transaction that started at `since`,
    /// succeeded: what it put or deleted is now known; records changed by field updates
    /// (applied by the engine to whatever was current) are not, unless the engine
    /// reported them (the caller turned those into puts). All of it under one lock, so
    /// no answer sees part of the commit; its values are one view with what the
    /// transaction read (the commit validated those reads).
    pub fn committed(&self, writes: &[(Key, Write)], since: Option<Stamp>, commit: u64) {
        let known = writes.iter().filter_map(|(key, write)| match write {
            Write::Put(v) => Some((&key[..], Some(&v[..]))),
            Write::Delete => Some((&key[..], None)),
            Write::Fields(_) => None,
        });
        let mut state = self.state.lock();
        let batch = since.map_or(0, |s| s.batch);
        self.store(&mut state, known, since, Some(commit), batch);
        if state.announced_early.remove(&commit) {
            state.confirm(writes.iter().map(|(key, _)| &key[..]), commit);
        }
        // Kept pages that hold a written key are stale now, and one being read may not be
        // kept; whole directories take the change in place.
        state.generation += 1;
        let generation = state.generation;
        for (key, write) in writes {
            let value = match write {
                Write::Put(v) => Some(Some(&v[..])),
                Write::Delete => Some(None),
                Write::Fields(_) => {
                    state.entries.remove(key);
                    None
                }
            };
            state.ranges.changed(key, generation);
            state.wholes.own_write(key, value, commit);
            // A read that began before this commit returned may be older than it: when it
            // is stored later, it is not trusted (nor is a concurrent commit's value).
            if (self.cacheable)(key) {
                state.note_invalidated(key, commit);
            }
        }
        state.stored.insert(commit);
    }

    /// A commit of `writes` failed in a way that leaves open whether it was (or will be)
    /// applied: whole directories it wrote into are no longer known entry by entry.
    pub fn outcome_unknown(&self, writes: &[(Key, Write)]) {
        let mut state = self.state.lock();
        for (key, _) in writes {
            state.wholes.changed(key);
        }
    }

    /// Drop `key` (it may be stale).
    pub fn forget(&self, key: &[u8]) {
        self.state.lock().entries.remove(key);
    }

    /// A commit changed `keys` (`None`: anything): another client's, or with `own`, this
    /// client's commit of that number, whose own stored values are kept.
    pub fn invalidate(&self, keys: Option<&[Key]>, own: Option<u64>) {
        let mut state = self.state.lock();
        state.generation += 1;
        let Some(keys) = keys else {
            state.entries.clear();
            state.floor = state.generation;
            let generation = state.generation;
            state.ranges.clear(generation);
            state.wholes.clear();
            return;
        };
        let generation = state.generation;
        if let Some(seq) = own.filter(|s| *s != 0) {
            state.own_announced(keys, seq);
        }
        for key in keys {
            state.ranges.changed(key, generation);
            match own {
                // Kept when it already holds that commit's effect: applied in place (the
                // commit returned, surely applied), or known after the commit returned.
                // Number 0: a commit made without this cache, as another client's.
                Some(seq) if seq != 0 => {
                    let how = whole::Announced {
                        certain: !state.own_uncertain.contains(&seq),
                        returned: seq <= state.own_done
                            || state.own_returned.contains(&seq)
                            || state.stored.contains(&seq),
                    };
                    state.wholes.own_announced(key, seq, how);
                }
                _ => state.wholes.changed(key),
            }
            // Kept: what that commit stored, or what a transaction that started after it
            // returned read or wrote.
            let keep = own.is_some_and(|own| {
                state
                    .entries
                    .get(key)
                    .is_some_and(|e| e.commit == Some(own) || state.seen_by(own, e.after))
            });
            if !keep {
                state.entries.remove(key);
            }
            state.note_invalidated(key, own.unwrap_or(0));
        }
    }

    /// The rows of the range page `start..end` (at most `limit`) if one is kept and
    /// trust holds, with the trusted values of `keys` and of the keys `linked` names from
    /// the rows — all one state of the volume, or nothing. Using them keeps close-to-open
    /// only after a barrier: every change committed before the listing began must have
    /// arrived (`Meta::sync_changes`).
    pub fn get_trusted_page(
        &self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        keys: &[Key],
        linked: impl FnOnce(&[(Key, Value)]) -> Vec<Key>,
    ) -> Option<TrustedPage> {
        let state = self.state.lock();
        let now = Instant::now();
        if !state.trusting(now) {
            return None;
        }
        let (rows, page) = state
            .wholes
            .get(start, end, limit, now)
            .or_else(|| state.ranges.get(start, end, limit, now))?;
        let wanted = linked(&rows);
        let mut seen = vec![page];
        let mut trusted = |keys: &[Key]| -> Option<Vec<Option<Value>>> {
            keys.iter()
                .map(|key| {
                    let e = state.trusted_entry(key, now)?;
                    seen.push(e.seen());
                    Some(e.value.clone())
                })
                .collect()
        };
        let values = trusted(keys)?;
        let linked = trusted(&wanted)?;
        state.one_moment(seen).then_some(TrustedPage {
            rows,
            values,
            wanted,
            linked,
        })
    }

    /// Whether [`get_trusted_page`](Self::get_trusted_page) may find the page now.
    pub fn holds_trusted_range(&self, start: &[u8], end: &[u8], limit: usize) -> bool {
        let state = self.state.lock();
        let now = Instant::now();
        state.trusting(now)
            && (state.wholes.holds(start, end, now)
                || state.ranges.get(start, end, limit, now).is_some())
    }

    /// `start..end` is the range of a directory this client is creating: known empty, and
    /// kept whole while only this client changes it, if nothing in it changed since
    /// `since` (taken before the creating transaction began) and the feed is live.
    pub fn remember_new_range(&self, start: &[u8], end: &[u8], since: Stamp) {
        let mut state = self.state.lock();
        if state.trusted_until.is_none()
            || since.generation < state.floor
            || !state.ranges.unchanged_since(start, end, since.generation)
        {
            return;
        }
        state
            .wholes
            .insert_empty(start, end, since.own_done, Instant::now());
    }

    /// Keep what a range read by a transaction that started at `since` returned, while
    /// the feed is live and if nothing in the range changed since (see [`ranges`]).
    pub fn remember_range(
        &self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        rows: &[(Key, Value)],
        since: Option<Stamp>,
    ) {
        let Some(since) = since else { return };
        let mut state = self.state.lock();
        if state.trusted_until.is_none() || since.generation < state.floor {
            return;
        }
        // A page is only ever taken alone, first in its transaction: no version to check.
        let seen = Seen {
            views: Views::one(since.batch),
            at: Instant::now(),
            version: 0,
            confirmed: false,
        };
        state
            .ranges
            .store(start, end, limit, rows, since.generation, seen);
    }

    /// One of this client's beats came back through the feed: trust holds for `grace`,
    /// and when it was `sent` is known, every change committed before then has arrived.
    pub fn beat_returned(&self, grace: Duration, sent: Option<Instant>) {
        let mut state = self.state.lock();
        if state.trusted_until.is_none() {
            // Coming up: nothing read before now was covered by the feed.
            state.distrust_all();
        }
        state.trusted_until = Some(Instant::now() + grace);
        if let Some(sent) = sent {
            state.covered_until = state.covered_until.max(Some(sent));
        }
    }

    /// Drop what is no longer worth keeping (values no longer recent, pages and whole
    /// directories too old to answer) and give back the tables' room when they are
    /// mostly empty: what a burst took (a listing of a million entries) returns once it
    /// is over. Called every few seconds by the feed's follower.
    pub fn sweep(&self) {
        self.sweep_at(Instant::now());
    }

    fn sweep_at(&self, now: Instant) {
        let mut state = self.state.lock();
        let trusting = state.trusting(now);
        state
            .entries
            .retain(|_, e| budget::worth_keeping(e, now, trusting));
        if budget::shrink_if_sparse(&mut state.entries) {
            state.entries_room = state.entries.capacity();
        }
        budget::shrink_if_sparse(&mut state.invalidated);
        if state.history.len() < state.history.capacity() / 4 {
            let keep = state.history.len() * 2;
            state.history.shrink_to(keep);
        }
        state.ranges.sweep(now);
        state.wholes.sweep(now);
    }

    /// The feed is lost: trust nothing until it is back.
    pub fn feed_lost(&self) {
        let mut state = self.state.lock();
        state.distrust_all();
        state.trusted_until = None;
    }
}

#[cfg(test)]
mod tests;
