//! Linearizability of a history against the model ([`model`](super::model)): is there
//! one order of the operations, each placed somewhere between its call and its return,
//! in which every result is what the model gives?
//!
//! The search is Wing and Gong's, with Lowe's memo of (operations placed, state) pairs
//! already explored: it walks the calls and returns in time order, places an operation
//! whose call it meets if the model allows its result, and backs up when it meets the
//! return of an operation it has not placed. It is complete: a history is reported only
//! when no order explains it.
//!
//! An operation whose outcome is unknown is placed like any other, with two branches:
//! it happened, or it did not. Its window ends where the harness closed it (a barrier
//! after which nothing can still land) or never; one that never closes may stay
//! unplaced. The harness keeps such operations few (lost commits are settled).
//!
//! The memo holds 128-bit fingerprints of the pairs, not the pairs: a model state is
//! kilobytes and a hard epoch explores hundreds of millions of them, which held as
//! values filled this machine's memory. Two pairs sharing a fingerprint (odds about
//! 2^-64 at a billion entries) would prune a branch never explored, which could only
//! report a violation, never hide one. Past [`MEMO_CAP`] entries the memo starts
//! afresh: forgetting what was explored costs time, never an answer.
//!
//! One pruning, sound for any history: a read whose placement changed nothing is never
//! tried at a later place when the search backs up over it. Any order placing it later can place it where it was
//! instead — its result held there, nothing else saw a different state, and moving an
//! operation earlier breaks no order between calls and returns. Without this, reads
//! of a client's metadata cache, whose windows reach back by the cache's staleness
//! bound, overlap so many operations that the search explodes.

use std::collections::HashSet;
use std::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher};

use foldhash::fast::FixedState;

use super::model::{Outcome, State};
use super::{Entry, History};

/// Why a history is not linearizable, for the test's failure message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The search gave up after its budget of steps: the history was neither shown
    /// linearizable nor shown not to be.
    pub inconclusive: bool,
    /// The operation that could not be placed before its return, in the deepest try.
    pub stuck: Entry,
    /// The operations placed before it in that try, in order.
    pub placed: Vec<Entry>,
    /// The model's state at that point.
    pub state: State,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.inconclusive {
            writeln!(
                f,
                "the search gave up (step budget spent); deepest point reached:"
            )?;
        } else {
            writeln!(f, "no order of the operations explains this result:")?;
        }
        writeln!(f, "  {}", self.stuck)?;
        writeln!(f, "state of the model there: {:?}", self.state)?;
        writeln!(f, "after these operations (deepest order found, last 40):")?;
        let from = self.placed.len().saturating_sub(40);
        for e in &self.placed[from..] {
            writeln!(f, "  {e}")?;
        }
        Ok(())
    }
}

/// What the search did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Operations checked (reads with unknown outcomes dropped).
    pub operations: usize,
    /// Of them, changes whose outcome was unknown.
    pub unknown: usize,
    /// Model steps tried.
    pub steps: u64,
}

/// Entries the memo holds before it starts afresh (about 1.5 GB of fingerprints).
const MEMO_CAP: usize = 64 << 20;

/// The (operations placed, state) pairs already explored, by fingerprint.
#[derive(Default)]
struct Memo {
    seen: HashSet<u128, BuildHasherDefault<Spread>>,
}

impl Memo {
    /// Whether the pair is new (and now remembered).
    fn insert(&mut self, placed: &[u64], state: &State) -> bool {
        if self.seen.len() >= MEMO_CAP {
            self.seen = HashSet::default();
        }
        self.seen.insert(fingerprint(placed, state))
    }
}

/// 128 bits: two differently seeded 64-bit hashes of the pair. foldhash, not SipHash:
/// a model state is hashed at every step, and SipHash was half the checker's time.
fn fingerprint(placed: &[u64], state: &State) -> u128 {
    let half = |seed: u64| {
        let mut h = FixedState::with_seed(seed).build_hasher();
        placed.hash(&mut h);
        state.hash(&mut h);
        h.finish()
    };
    (u128::from(half(0x5eed_0001)) << 64) | u128::from(half(0x5eed_0002))
}

/// The memo's keys are hashes already: their low bits index the table as they are.
#[derive(Default)]
struct Spread(u64);

impl Hasher for Spread {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }

    fn write_u128(&mut self, v: u128) {
        // The low half of a fingerprint; truncation is the point.
        self.0 = u64::try_from(v & u128::from(u64::MAX)).unwrap_or_default();
    }
}

#[derive(Clone, Copy)]
enum Event {
    Call(usize),
    Return(usize),
}

/// A doubly linked list of events, in time order; an operation's events are taken out
/// when it is placed and put back when the search backs up.
struct Events {
    event: Vec<Event>,
    next: Vec<Option<usize>>,
    prev: Vec<Option<usize>>,
    head: Option<usize>,
    /// Per operation: its call's and its return's positions.
    call_at: Vec<usize>,
    return_at: Vec<Option<usize>>,
    /// Returns still in the list.
    returns_left: usize,
}

impl Events {
    /// The events of `ops`, each call moved back by its staleness allowance up to `cap`.
    fn new(ops: &[Entry], cap: u64) -> Events {
        let mut timed: Vec<(u64, u8, Event)> = Vec::with_capacity(ops.len() * 2);
        for (i, e) in ops.iter().enumerate() {
            timed.push((e.call.saturating_sub(e.stale.min(cap)), 1, Event::Call(i)));
            if let Some(ret) = e.ret {
                // A return at the same instant as a call does not precede it.
                timed.push((ret, 2, Event::Return(i)));
            }
        }
        timed.sort_by_key(|(t, order, _)| (*t, *order));
        let n = timed.len();
        let mut call_at = vec![0; ops.len()];
        let mut return_at = vec![None; ops.len()];
        for (pos, (_, _, ev)) in timed.iter().enumerate() {
            match ev {
                Event::Call(i) => call_at[*i] = pos,
                Event::Return(i) => return_at[*i] = Some(pos),
            }
        }
        let returns_left = return_at.iter().flatten().count();
        Events {
            returns_left,
            event: timed.into_iter().map(|(_, _, e)| e).collect(),
            next: (0..n).map(|i| (i + 1 < n).then_some(i + 1)).collect(),
            prev: (0..n).map(|i| i.checked_sub(1)).collect(),
            head: (n > 0).then_some(0),
            call_at,
            return_at,
        }
    }

    fn unlink(&mut self, pos: usize) {
        let (p, n) = (self.prev[pos], self.next[pos]);
        match p {
            Some(p) => self.next[p] = n,
            None => self.head = n,
        }
        if let Some(n) = n {
            self.prev[n] = p;
        }
    }

    /// Put back what `unlink` took (in the reverse order of the unlinks).
    fn relink(&mut self, pos: usize) {
        let (p, n) = (self.prev[pos], self.next[pos]);
        match p {
            Some(p) => self.next[p] = Some(pos),
            None => self.head = Some(pos),
        }
        if let Some(n) = n {
            self.prev[n] = Some(pos);
        }
    }

    fn lift(&mut self, op: usize) {
        self.unlink(self.call_at[op]);
        if let Some(r) = self.return_at[op] {
            self.unlink(r);
            self.returns_left -= 1;
        }
    }

    fn unlift(&mut self, op: usize) {
        if let Some(r) = self.return_at[op] {
            self.relink(r);
            self.returns_left += 1;
        }
        self.relink(self.call_at[op]);
    }

    /// Whether only calls of operations without a return are left.
    fn only_open_calls(&self) -> bool {
        self.returns_left == 0
    }
}

struct Frame {
    op: usize,
    before: State,
    /// Which of the op's possible next states this frame took.
    branch: usize,
}

/// Check `history` starting from `initial`; the operations it checks and the search's
/// counts, or the violation found.
pub fn check(history: &History, initial: State) -> Result<Stats, Box<Violation>> {
    check_within(history, initial, 50_000_000)
}

/// Staleness allowed on the first tries: none, then 20 ms; then each read's own.
const RUNGS: [u64; 2] = [0, 20_000_000];

/// [`check`] with at most `budget` model steps in all. Reads that may be stale are first
/// held to narrower windows (most are fresh, and narrow windows keep the search small);
/// an order that fits them fits the wider ones, so only a history no narrow order
/// explains is searched with each read's whole allowance, which alone decides.
pub fn check_within(
    history: &History,
    initial: State,
    budget: u64,
) -> Result<Stats, Box<Violation>> {
    let entries = history.entries();
    let mut spent = 0;
    if entries.iter().any(|e| e.stale > 0) {
        for cap in RUNGS {
            if let Ok(mut stats) = search(&entries, initial.clone(), budget / 4, cap) {
                stats.steps += spent;
                return Ok(stats);
            }
            spent += budget / 4;
        }
    }
    search(&entries, initial, budget.saturating_sub(spent), u64::MAX).map(|mut stats| {
        stats.steps += spent;
        stats
    })
}

/// One search with staleness capped at `cap`.
fn search(
    entries: &[Entry],
    initial: State,
    budget: u64,
    cap: u64,
) -> Result<Stats, Box<Violation>> {
    // Reads that got no answer tell nothing; operations that never started did nothing.
    let ops: Vec<Entry> = entries
        .iter()
        .filter(|e| !(e.outcome == Outcome::Unknown && e.op.reads_only()))
        .filter(|e| e.outcome != Outcome::Abandoned)
        .cloned()
        .collect();
    let mut stats = Stats {
        operations: ops.len(),
        unknown: ops.iter().filter(|e| e.outcome == Outcome::Unknown).count(),
        steps: 0,
    };
    let words = ops.len().div_ceil(64);
    let mut placed = vec![0u64; words];
    let mut seen = Memo::default();
    let mut events = Events::new(&ops, cap);
    let mut stack: Vec<Frame> = Vec::new();
    let mut state = initial;
    let mut at = events.head;
    let mut deepest: Option<(usize, Violation)> = None;
    loop {
        if events.only_open_calls() {
            return Ok(stats);
        }
        if stats.steps > budget {
            let mut v = violation(deepest, &ops, &stack, &state, &events);
            v.inconclusive = true;
            return Err(Box::new(v));
        }
        let Some(pos) = at else {
            // Nothing placeable before the first return: back up.
            if !back_up(
                &mut stack,
                &mut events,
                &mut placed,
                &mut state,
                &mut at,
                &ops,
                &mut seen,
                &mut stats,
            ) {
                return Err(Box::new(violation(deepest, &ops, &stack, &state, &events)));
            }
            continue;
        };
        match events.event[pos] {
            Event::Call(op) => {
                if try_place(
                    op,
                    0,
                    &ops,
                    &mut stack,
                    &mut events,
                    &mut placed,
                    &mut state,
                    &mut seen,
                    &mut stats,
                ) {
                    at = events.head;
                } else {
                    at = events.next[pos];
                }
            }
            Event::Return(op) => {
                let depth = stack.len();
                if deepest.as_ref().is_none_or(|(d, _)| depth > *d) {
                    deepest = Some((
                        depth,
                        Violation {
                            inconclusive: false,
                            stuck: ops[op].clone(),
                            placed: stack.iter().map(|f| ops[f.op].clone()).collect(),
                            state: state.clone(),
                        },
                    ));
                }
                if !back_up(
                    &mut stack,
                    &mut events,
                    &mut placed,
                    &mut state,
                    &mut at,
                    &ops,
                    &mut seen,
                    &mut stats,
                ) {
                    return Err(Box::new(violation(deepest, &ops, &stack, &state, &events)));
                }
            }
        }
    }
}

/// Place `op` with its first possible next state from `from_branch` on that was not
/// explored yet; true if placed.
#[allow(clippy::too_many_arguments)]
fn try_place(
    op: usize,
    from_branch: usize,
    ops: &[Entry],
    stack: &mut Vec<Frame>,
    events: &mut Events,
    placed: &mut [u64],
    state: &mut State,
    seen: &mut Memo,
    stats: &mut Stats,
) -> bool {
    let entry = &ops[op];
    stats.steps += 1;
    let mut nexts = state.step(&entry.op, &entry.outcome, entry.id);
    if entry.outcome == Outcome::Unknown {
        // Or it did not happen.
        nexts.push(state.clone());
    }
    set(placed, op, true);
    for (branch, next) in nexts.into_iter().enumerate().skip(from_branch) {
        if seen.insert(placed, &next) {
            let before = std::mem::replace(state, next);
            stack.push(Frame { op, before, branch });
            events.lift(op);
            return true;
        }
    }
    set(placed, op, false);
    false
}

/// Undo the last placement and try its other branches, else move past its call; false
/// when there is nothing left to undo. Placements that changed nothing are undone
/// without trying them elsewhere (see the module doc).
#[allow(clippy::too_many_arguments)]
fn back_up(
    stack: &mut Vec<Frame>,
    events: &mut Events,
    placed: &mut [u64],
    state: &mut State,
    at: &mut Option<usize>,
    ops: &[Entry],
    seen: &mut Memo,
    stats: &mut Stats,
) -> bool {
    loop {
        let Some(frame) = stack.pop() else {
            return false;
        };
        events.unlift(frame.op);
        set(placed, frame.op, false);
        // A read that bound no placeholder (an unknown operation's "did not happen" is
        // not such a placement: it may still happen later).
        let changed_nothing = *state == frame.before && ops[frame.op].op.reads_only();
        *state = frame.before;
        if try_place(
            frame.op,
            frame.branch + 1,
            ops,
            stack,
            events,
            placed,
            state,
            seen,
            stats,
        ) {
            *at = events.head;
            return true;
        }
        if !changed_nothing {
            *at = events.next[events.call_at[frame.op]];
            return true;
        }
    }
}

fn set(bits: &mut [u64], i: usize, on: bool) {
    let (w, b) = (i / 64, i % 64);
    if on {
        bits[w] |= 1 << b;
    } else {
        bits[w] &= !(1 << b);
    }
}

fn violation(
    deepest: Option<(usize, Violation)>,
    ops: &[Entry],
    stack: &[Frame],
    state: &State,
    events: &Events,
) -> Violation {
    if let Some((_, v)) = deepest {
        return v;
    }
    // No return was ever met unplaced: name the first return left.
    let mut at = events.head;
    while let Some(pos) = at {
        if let Event::Return(op) = events.event[pos] {
            return Violation {
                inconclusive: false,
                stuck: ops[op].clone(),
                placed: stack.iter().map(|f| ops[f.op].clone()).collect(),
                state: state.clone(),
            };
        }
        at = events.next[pos];
    }
    Violation {
        inconclusive: false,
        stuck: ops[0].clone(),
        placed: Vec::new(),
        state: state.clone(),
    }
}
