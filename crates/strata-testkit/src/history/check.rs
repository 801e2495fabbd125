//! Linearizability of a history against the model ([`model`](super::model)): is there
//! one order of the operations, each placed somewhere between its call and its return,
//! in which every result is what the model gives? Operations whose outcome is unknown
//! may be placed anywhere after their call — or nowhere.
//!
//! The search is Wing and Gong's, with Lowe's memo of (operations placed, state) pairs
//! already explored: it walks the calls and returns in time order, places an operation
//! whose call it meets if the model allows its result, and backs up when it meets the
//! return of an operation it has not placed.
//!
//! Operations with unknown outcomes have no return, so they could go anywhere after their
//! call; trying each everywhere explodes (a run with a hundred of them took minutes).
//! They are placed lazily instead: only when the search is stuck at a return does it try
//! to place one of them first (each in turn, the memo pruning repeats), and only one
//! related to the stuck operation (sharing a name, directory or inode with it, or with
//! another unknown one that does). Placing one later than needed never hurts an
//! operation in between (it did not need it), and one that needs it gets stuck and so
//! places it; not happening at all is never placing it — or, for one whose window was
//! closed (the harness waited until nothing could still land), dropping it at its return.

use std::collections::HashSet;

use super::model::{Outcome, State, Touch, related};
use super::{Entry, History};

/// Why a history is not linearizable, for the test's failure message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The operation that could not be placed before its return, in the deepest try.
    pub stuck: Entry,
    /// The operations placed before it in that try, in order.
    pub placed: Vec<Entry>,
    /// The model's state at that point.
    pub state: State,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "no order of the operations explains this result:")?;
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
    fn new(ops: &[Entry]) -> Events {
        let mut timed: Vec<(u64, u8, Event)> = Vec::with_capacity(ops.len() * 2);
        for (i, e) in ops.iter().enumerate() {
            timed.push((e.call, 1, Event::Call(i)));
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
    // Reads that got no answer tell nothing.
    let ops: Vec<Entry> = history
        .entries()
        .into_iter()
        .filter(|e| !(e.outcome == Outcome::Unknown && e.op.reads_only()))
        .collect();
    let mut stats = Stats {
        operations: ops.len(),
        unknown: ops.iter().filter(|e| e.outcome == Outcome::Unknown).count(),
        steps: 0,
    };
    let words = ops.len().div_ceil(64);
    let mut placed = vec![0u64; words];
    let mut seen: HashSet<(Vec<u64>, State)> = HashSet::new();
    let mut events = Events::new(&ops);
    let mut stack: Vec<Frame> = Vec::new();
    let mut state = initial;
    let mut at = events.head;
    let mut deepest: Option<(usize, Violation)> = None;
    loop {
        if events.only_open_calls() {
            return Ok(stats);
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
            Event::Call(op) if ops[op].outcome == Outcome::Unknown => at = events.next[pos],
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
            Event::Return(op) if ops[op].outcome == Outcome::Unknown => {
                // Its window closes: it happened now at the latest, or it did not happen.
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
                ) || drop_unknown(op, &mut stack, &mut events, &mut placed, &state, &mut seen)
                {
                    at = events.head;
                } else if !back_up(
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
            Event::Return(op) => {
                let depth = stack.len();
                if deepest.as_ref().is_none_or(|(d, _)| depth > *d) {
                    deepest = Some((
                        depth,
                        Violation {
                            stuck: ops[op].clone(),
                            placed: stack.iter().map(|f| ops[f.op].clone()).collect(),
                            state: state.clone(),
                        },
                    ));
                }
                if place_an_unknown(
                    pos,
                    op,
                    &ops,
                    &mut stack,
                    &mut events,
                    &mut placed,
                    &mut state,
                    &mut seen,
                    &mut stats,
                ) {
                    at = events.head;
                } else if !back_up(
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
    seen: &mut HashSet<(Vec<u64>, State)>,
    stats: &mut Stats,
) -> bool {
    let entry = &ops[op];
    stats.steps += 1;
    let nexts = state.step(&entry.op, &entry.outcome, entry.id);
    set(placed, op, true);
    for (branch, next) in nexts.into_iter().enumerate().skip(from_branch) {
        if seen.insert((placed.to_vec(), next.clone())) {
            let before = std::mem::replace(state, next);
            stack.push(Frame { op, before, branch });
            events.lift(op);
            return true;
        }
    }
    set(placed, op, false);
    false
}

/// Stuck at the return at `stuck` of `op`: place the first operation with an unknown
/// outcome, called before it and related to it, whose placement here was not explored
/// yet; true if one was placed.
#[allow(clippy::too_many_arguments)]
fn place_an_unknown(
    stuck: usize,
    op: usize,
    ops: &[Entry],
    stack: &mut Vec<Frame>,
    events: &mut Events,
    placed: &mut [u64],
    state: &mut State,
    seen: &mut HashSet<(Vec<u64>, State)>,
    stats: &mut Stats,
) -> bool {
    let mut open = Vec::new();
    let mut at = events.head;
    while let Some(pos) = at {
        if pos == stuck {
            break;
        }
        if let Event::Call(u) = events.event[pos]
            && ops[u].outcome == Outcome::Unknown
        {
            open.push((u, state.touches(&ops[u].op, &ops[u].outcome)));
        }
        at = events.next[pos];
    }
    if open.is_empty() {
        return false;
    }
    // The unknown operations related to the stuck one, directly or through each other.
    let mut about: Vec<Touch> = state.touches(&ops[op].op, &ops[op].outcome);
    let mut chosen = vec![false; open.len()];
    loop {
        let mut grew = false;
        for (i, (_, touches)) in open.iter().enumerate() {
            if !chosen[i] && related(touches, &about) {
                chosen[i] = true;
                about.extend_from_slice(touches);
                grew = true;
            }
        }
        if !grew {
            break;
        }
    }
    for (i, (u, _)) in open.iter().enumerate() {
        if chosen[i] && try_place(*u, 0, ops, stack, events, placed, state, seen, stats) {
            return true;
        }
    }
    false
}

/// Place unknown operation `op` as not having happened (at its return); false if that
/// was explored already.
fn drop_unknown(
    op: usize,
    stack: &mut Vec<Frame>,
    events: &mut Events,
    placed: &mut [u64],
    state: &State,
    seen: &mut HashSet<(Vec<u64>, State)>,
) -> bool {
    set(placed, op, true);
    if !seen.insert((placed.to_vec(), state.clone())) {
        set(placed, op, false);
        return false;
    }
    stack.push(Frame {
        op,
        before: state.clone(),
        branch: DROPPED,
    });
    events.lift(op);
    true
}

/// The branch of a frame that placed an unknown operation as not having happened.
const DROPPED: usize = usize::MAX - 1;

/// Undo the last placement and try its other branches, else move past its call; false
/// when there is nothing left to undo.
#[allow(clippy::too_many_arguments)]
fn back_up(
    stack: &mut Vec<Frame>,
    events: &mut Events,
    placed: &mut [u64],
    state: &mut State,
    at: &mut Option<usize>,
    ops: &[Entry],
    seen: &mut HashSet<(Vec<u64>, State)>,
    stats: &mut Stats,
) -> bool {
    let Some(frame) = stack.pop() else {
        return false;
    };
    events.unlift(frame.op);
    set(placed, frame.op, false);
    *state = frame.before;
    if frame.branch != DROPPED
        && try_place(
            frame.op,
            frame.branch + 1,
            ops,
            stack,
            events,
            placed,
            state,
            seen,
            stats,
        )
    {
        *at = events.head;
    } else {
        *at = events.next[events.call_at[frame.op]];
    }
    true
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
                stuck: ops[op].clone(),
                placed: stack.iter().map(|f| ops[f.op].clone()).collect(),
                state: state.clone(),
            };
        }
        at = events.next[pos];
    }
    Violation {
        stuck: ops[0].clone(),
        placed: Vec::new(),
        state: state.clone(),
    }
}
