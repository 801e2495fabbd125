//! Histories of what concurrent clients did and saw, and the check that some order of
//! those operations explains every result ([`check`]).
//!
//! A test's clients record each operation as it starts ([`History::call`]) and what it
//! returned when it ends ([`History::ret`]). An operation that got no answer (`EIO`, a
//! timeout) is recorded as [`Outcome::Unknown`]: it may have happened, at any time after
//! its call, or not at all. A read that may be answered from a cache kept current by a
//! change feed is recorded with its call moved back by the cache's staleness bound
//! ([`History::call_stale`]), so it may be placed at any state of that window.
//!
//! File contents are written and read whole: [`content`] turns a write's number into
//! bytes and bytes back into the number (or says they are no write's bytes at all).

pub mod check;
pub mod content;
pub mod model;

use std::fmt;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

pub use check::{Stats, Violation, check, check_within};
pub use model::{Content, Failure, InoKey, Name, Op, Outcome, State, Value};

/// One operation of the history.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Entry {
    /// Its number in the history (call order).
    pub id: u32,
    pub client: u32,
    pub op: Op,
    /// When it was called (nanoseconds since the history started).
    pub call: u64,
    /// How much older a state it may show than its call (nanoseconds): a lookup answered
    /// from a cache that a change feed keeps current.
    #[serde(default)]
    pub stale: u64,
    /// When it returned; `None` while running, or forever for an unknown outcome.
    pub ret: Option<u64>,
    pub outcome: Outcome,
}

impl fmt::Display for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = |ns: u64| ns as f64 / 1e6;
        let ret = match self.ret {
            Some(r) => format!("{:.3}", ms(r)),
            None => "open".into(),
        };
        write!(
            f,
            "#{} client {} [{:.3} .. {ret}] ms {:?} -> {:?}",
            self.id,
            self.client,
            ms(self.call),
            self.op,
            self.outcome
        )
    }
}

/// A model state as saved with a history (maps as lists: JSON keys are strings).
#[derive(serde::Serialize, serde::Deserialize)]
struct SavedState {
    names: Vec<(Name, InoKey)>,
    files: Vec<(InoKey, model::File)>,
}

/// A running operation, to be ended with [`History::ret`].
#[derive(Debug)]
#[must_use = "an operation's outcome must be recorded"]
pub struct Call {
    index: usize,
}

/// The operations of one run, in call order.
#[derive(Debug)]
pub struct History {
    started: Instant,
    entries: Mutex<Vec<Entry>>,
}

impl Default for History {
    fn default() -> History {
        History::new()
    }
}

impl History {
    pub fn new() -> History {
        History {
            started: Instant::now(),
            entries: Mutex::new(Vec::new()),
        }
    }

    fn now(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// `client` starts `op`.
    pub fn call(&self, client: u32, op: Op) -> Call {
        self.call_backdated(client, op, Duration::ZERO)
    }

    /// `client` starts `op`, which may see a state up to `stale` old (a cache kept
    /// current by a change feed).
    pub fn call_stale(&self, client: u32, op: Op, stale: Duration) -> Call {
        self.call_backdated(client, op, stale)
    }

    fn call_backdated(&self, client: u32, op: Op, by: Duration) -> Call {
        let stale = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        let call = self.now();
        let mut entries = self.entries.lock();
        let index = entries.len();
        entries.push(Entry {
            id: u32::try_from(index).unwrap_or(u32::MAX),
            client,
            op,
            call,
            stale,
            ret: None,
            outcome: Outcome::Unknown,
        });
        Call { index }
    }

    /// The operation ended with `outcome` (an unknown outcome stays open until
    /// [`History::close_unknown`]).
    pub fn ret(&self, call: Call, outcome: Outcome) {
        let now = self.now();
        let mut entries = self.entries.lock();
        if let Some(e) = entries.get_mut(call.index) {
            e.ret = (outcome != Outcome::Unknown).then_some(now);
            e.outcome = outcome;
        }
    }

    /// The operation never started: a step it needed failed first.
    pub fn abandon(&self, call: Call) {
        self.ret(call, Outcome::Abandoned);
    }

    /// Nothing that got no answer can still happen from now on (the harness waited for
    /// every client to finish and for everything buffered to land): close the windows
    /// of all unknown outcomes here.
    pub fn close_unknown(&self) {
        let now = self.now();
        for e in self.entries.lock().iter_mut() {
            if e.outcome == Outcome::Unknown && e.ret.is_none() {
                e.ret = Some(now);
            }
        }
    }

    /// The operation changed what it is about: a write's target known only once its
    /// path was resolved, say.
    pub fn amend(&self, call: &Call, op: Op) {
        if let Some(e) = self.entries.lock().get_mut(call.index) {
            e.op = op;
        }
    }

    /// A history made of recorded entries (a saved run, a generated one).
    pub fn from_entries(entries: Vec<Entry>) -> History {
        History {
            started: Instant::now(),
            entries: Mutex::new(entries),
        }
    }

    /// The history and the state it starts from, as JSON lines: the state first, then
    /// one entry per line (`strata-history-check` checks such a file again).
    pub fn save(&self, initial: &State) -> String {
        let start = SavedState {
            names: initial.names.iter().map(|(n, k)| (*n, *k)).collect(),
            files: initial.files.iter().map(|(k, f)| (*k, f.clone())).collect(),
        };
        let mut out = serde_json::to_string(&start).unwrap_or_default();
        out.push('\n');
        for e in self.entries.lock().iter() {
            if let Ok(line) = serde_json::to_string(e) {
                out.push_str(&line);
                out.push('\n');
            }
        }
        out
    }

    /// A history and its starting state saved by [`History::save`].
    pub fn load(text: &str) -> Result<(History, State), serde_json::Error> {
        let mut lines = text.lines().filter(|l| !l.trim().is_empty());
        let start: SavedState = serde_json::from_str(lines.next().unwrap_or("{}"))?;
        let entries = lines
            .map(serde_json::from_str)
            .collect::<Result<Vec<Entry>, _>>()?;
        let state = State {
            names: start.names.into_iter().collect(),
            files: start.files.into_iter().collect(),
        };
        Ok((History::from_entries(entries), state))
    }

    /// Every entry so far.
    pub fn entries(&self) -> Vec<Entry> {
        self.entries.lock().clone()
    }

    pub fn len(&self) -> usize {
        self.entries.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Counts of what happened: (operations, definite failures, unknown outcomes).
    pub fn counts(&self) -> (usize, usize, usize) {
        let entries = self.entries.lock();
        let failed = entries
            .iter()
            .filter(|e| matches!(e.outcome, Outcome::Failed(_)))
            .count();
        let unknown = entries
            .iter()
            .filter(|e| e.outcome == Outcome::Unknown)
            .count();
        (entries.len(), failed, unknown)
    }
}

#[cfg(test)]
mod tests;
