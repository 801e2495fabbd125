//! The `Kv` transaction layer: what a metadata engine must provide, and the generic
//! optimistic transaction written once above all engines.
//!
//! An engine ([`KvEngine`]) only has to offer two things: a read view ([`KvSnapshot`]:
//! point get, batch get, ordered range scan with a limit, forward or reverse) and an
//! atomic, validated commit ([`CommitRequest`]: "if every read I made still returns what
//! it returned, apply these writes"). Read-your-writes, write buffering, field updates that
//! never conflict ([`FieldOp`]) and the bounded, jittered retry loop live in [`txn`], once.

pub mod memory;
pub mod readcache;
pub mod settle;
pub mod sqlite;
mod sqlite_bulk;
mod sqlite_sql;
mod sqlite_writer;
pub mod txn;

use std::fmt;

use async_trait::async_trait;

pub use txn::{
    CacheUse, LostCommit, RetryPolicy, Txn, TxnError, TxnFuture, lost_commits, record_lost_commit,
    render_txn_metrics, run_txn, run_txn_cached,
};

/// A key in the engine's ordered key space.
pub type Key = Vec<u8>;
/// A value stored under a key.
pub type Value = Vec<u8>;

/// Errors an engine or the transaction layer reports.
#[derive(Debug, thiserror::Error)]
pub enum KvError {
    /// Another transaction changed something this one read; the caller retries.
    #[error("transaction conflict")]
    Conflict,
    /// The retry loop gave up.
    #[error("metadata transaction gave up after {attempts} attempts ({last})")]
    RetriesExhausted { attempts: u32, last: String },
    /// The engine cannot be reached right now (may succeed later).
    #[error("metadata engine unavailable: {0}")]
    Unavailable(String),
    /// Any other engine failure.
    #[error("metadata engine error: {0}")]
    Engine(String),
    /// A stored value does not have the shape the transaction layer expects.
    #[error("corrupt value under key {key}: {reason}")]
    Corrupt { key: String, reason: String },
}

impl KvError {
    /// Errors worth another attempt of the whole transaction.
    pub fn is_retryable(&self) -> bool {
        matches!(self, KvError::Conflict | KvError::Unavailable(_))
    }
}

/// Render a key for messages: printable bytes as text, the rest as hex escapes.
pub fn display_key(key: &[u8]) -> String {
    let mut out = String::with_capacity(key.len() * 2);
    for &b in key {
        if b.is_ascii_graphic() && b != b'\\' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// Await an engine call for at most `limit`; past it the engine is unavailable
/// ("no answer from {what} within N s"), which the transaction layer retries.
pub async fn within<T>(
    limit: std::time::Duration,
    what: &str,
    call: impl Future<Output = Result<T, KvError>>,
) -> Result<T, KvError> {
    match tokio::time::timeout(limit, call).await {
        Ok(result) => result,
        Err(_) => Err(KvError::Unavailable(format!(
            "no answer from {what} within {} s",
            limit.as_secs()
        ))),
    }
}

/// Take the `prefix=NAME` parameter out of an engine URL's query: returns the URL without
/// it and NAME (`default` when absent). Engines use NAME to keep volumes apart on one
/// server; `valid` says which names the engine accepts and `rule` says it in words. The
/// error names the prefix and the rule, never the URL (it may hold a password).
pub fn take_prefix_param(
    url: &str,
    default: &str,
    valid: impl Fn(&str) -> bool,
    rule: &str,
) -> Result<(String, String), KvError> {
    let (url, prefix) = take_query_param(url, "prefix");
    match prefix {
        None => Ok((url, default.to_string())),
        Some(p) if valid(&p) => Ok((url, p)),
        Some(p) => Err(KvError::Engine(format!("bad prefix {p:?}: use {rule}"))),
    }
}

/// Take every `name=VALUE` parameter out of a URL's query: the URL without them, and the
/// last VALUE given.
pub fn take_query_param(url: &str, name: &str) -> (String, Option<String>) {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let mut value = None;
    let mut rest = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some((n, v)) if n == name => value = Some(v.to_string()),
            _ => rest.push(pair),
        }
    }
    let url = if rest.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", rest.join("&"))
    };
    (url, value)
}

/// The smallest key greater than every key starting with `prefix`.
pub fn prefix_end(prefix: &[u8]) -> Key {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xFF {
            end.push(last + 1);
            return end;
        }
    }
    // Every byte was 0xFF: no finite upper bound shorter than this; use a long one.
    vec![0xFF; prefix.len() + 1]
}

/// One update of a field record: a value made of little-endian `i64` slots.
///
/// Field updates commute with each other, so engines that apply them at commit time
/// ([`KvEngine::native_field_ops`]) let concurrent transactions update the same record
/// (a directory's mtime, its usage counters) without conflicting. Applying field updates
/// to a missing key does nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldOp {
    pub slot: usize,
    pub update: FieldUpdate,
}

/// How a [`FieldOp`] changes its slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldUpdate {
    Add(i64),
    Max(i64),
    Set(i64),
}

/// Apply field updates to a record. `None` stays `None` (updates to a missing key vanish).
pub fn apply_field_ops(
    key: &[u8],
    value: Option<&[u8]>,
    ops: &[FieldOp],
) -> Result<Option<Value>, KvError> {
    let Some(value) = value else { return Ok(None) };
    let mut out = value.to_vec();
    for op in ops {
        let start = op.slot * 8;
        let Some(bytes) = out.get_mut(start..start + 8) else {
            return Err(KvError::Corrupt {
                key: display_key(key),
                reason: format!(
                    "field record of {} bytes has no slot {}",
                    value.len(),
                    op.slot
                ),
            });
        };
        let mut raw = [0u8; 8];
        raw.copy_from_slice(bytes);
        let current = i64::from_le_bytes(raw);
        let next = match op.update {
            FieldUpdate::Add(delta) => current.wrapping_add(delta),
            FieldUpdate::Max(candidate) => current.max(candidate),
            FieldUpdate::Set(v) => v,
        };
        bytes.copy_from_slice(&next.to_le_bytes());
    }
    Ok(Some(out))
}

/// A read the transaction made, to be re-checked at commit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadCheck {
    /// `get(key)` returned `value`.
    Point { key: Key, value: Option<Value> },
    /// `scan(start, end, limit, reverse)` returned `entries`.
    Range {
        start: Key,
        end: Key,
        limit: usize,
        reverse: bool,
        entries: Vec<(Key, Value)>,
    },
}

/// A buffered write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Write {
    Put(Value),
    Delete,
    /// Field updates applied to the value current at commit time.
    Fields(Vec<FieldOp>),
}

/// What a transaction asks an engine to commit atomically.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommitRequest {
    /// Reads to re-check; if any returns something else now, the commit is a `Conflict`.
    pub reads: Vec<ReadCheck>,
    /// Writes in key order, applied only if every read still holds.
    pub writes: Vec<(Key, Write)>,
    /// The committing client's number for this commit, carried by its announcement in
    /// the change feed (0: none; see `readcache`).
    pub seq: u64,
}

/// How [`KvSnapshot::get_linked`] finds more keys from the value of one key: the value
/// holds a `u64` (little-endian, at `offset`), and each target key is `prefix`, that
/// number big-endian, `suffix` — the way a directory entry names an inode's records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    /// Index (in the keys read first) of the key whose value holds the number.
    pub from: usize,
    /// Where the little-endian `u64` starts in that value.
    pub offset: usize,
    /// `(prefix, suffix)` of each key to read next.
    pub targets: Vec<(Key, Key)>,
}

impl Link {
    /// The keys `value` links to; `None` when it holds no number at `offset`.
    pub fn target_keys(&self, value: Option<&[u8]>) -> Option<Vec<Key>> {
        let raw: [u8; 8] = value?.get(self.offset..self.offset + 8)?.try_into().ok()?;
        let id = u64::from_le_bytes(raw).to_be_bytes();
        Some(
            self.targets
                .iter()
                .map(|(prefix, suffix)| [&prefix[..], &id, &suffix[..]].concat())
                .collect(),
        )
    }

    /// What [`KvSnapshot::get_linked`] answers when an engine read `keys` and the keys
    /// this link names, in one statement, as `found` rows (absent keys have none): the
    /// values of `keys`, then of the linked keys (`None` each when the holder names none).
    pub fn values_from(&self, keys: &[Key], found: Vec<(Key, Value)>) -> Vec<Option<Value>> {
        let found: std::collections::HashMap<Key, Value> = found.into_iter().collect();
        let mut values: Vec<Option<Value>> = keys.iter().map(|k| found.get(k).cloned()).collect();
        // The number came from the same snapshot, so these are the keys the engine read.
        let holder = values.get(self.from).cloned().flatten();
        match self.target_keys(holder.as_deref()) {
            Some(targets) => values.extend(targets.iter().map(|k| found.get(k).cloned())),
            None => values.extend(self.targets.iter().map(|_| None)),
        }
        values
    }

    /// The keys each of `rows` links to (`None` for a row that names none).
    pub fn targets_of_rows(&self, rows: &[(Key, Value)]) -> Vec<Option<Vec<Key>>> {
        rows.iter()
            .map(|(_, v)| self.target_keys(Some(v)))
            .collect()
    }

    /// Each row's linked values, from `fetched`: the values of all of `targets`' keys, in
    /// order (`None` each for a row that names none).
    pub fn spread(
        &self,
        targets: &[Option<Vec<Key>>],
        fetched: Vec<Option<Value>>,
    ) -> Vec<Vec<Option<Value>>> {
        let mut fetched = fetched.into_iter();
        targets
            .iter()
            .map(|t| match t {
                Some(keys) => keys.iter().map(|_| fetched.next().flatten()).collect(),
                None => vec![None; self.targets.len()],
            })
            .collect()
    }
}

/// What [`KvSnapshot::scan_linked`] read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LinkedScan {
    /// Values of the keys asked for, in order.
    pub values: Vec<Option<Value>>,
    /// Entries of the range, ascending.
    pub rows: Vec<(Key, Value)>,
    /// For each row, the values of the keys the link names from its value (`None` each
    /// when it names none).
    pub linked: Vec<Vec<Option<Value>>>,
}

impl LinkedScan {
    /// Put together what an engine read in one statement, in any order: the rows of the
    /// keys asked for (`found`), the page of the range, and the rows the page links to.
    pub fn from_parts(
        keys: &[Key],
        found: Vec<(Key, Value)>,
        mut page: Vec<(Key, Value)>,
        linked: Vec<(Key, Value)>,
        link: &Link,
    ) -> LinkedScan {
        let found: std::collections::HashMap<Key, Value> = found.into_iter().collect();
        let linked: std::collections::HashMap<Key, Value> = linked.into_iter().collect();
        page.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let linked = page
            .iter()
            .map(|(_, v)| match link.target_keys(Some(v)) {
                Some(targets) => targets.iter().map(|k| linked.get(k).cloned()).collect(),
                None => vec![None; link.targets.len()],
            })
            .collect();
        LinkedScan {
            values: keys.iter().map(|k| found.get(k).cloned()).collect(),
            rows: page,
            linked,
        }
    }
}

/// A read view of an engine. Each call returns values of one consistent state (a single
/// atomic command or statement); a read-only transaction that made one call is therefore
/// not re-checked.
#[async_trait]
pub trait KvSnapshot: Send {
    async fn get(&mut self, key: &[u8]) -> Result<Option<Value>, KvError>;
    /// Values of several keys, in the order asked.
    async fn get_many(&mut self, keys: &[Key]) -> Result<Vec<Option<Value>>, KvError>;
    /// Entries with `start <= key < end`, ascending (or descending with `reverse`), at
    /// most `limit` of them.
    async fn scan(
        &mut self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        reverse: bool,
    ) -> Result<Vec<(Key, Value)>, KvError>;
    /// Values of `keys`, then of the keys `link` names from one of them (`None` each when
    /// it names none), read in one call from one consistent state: a lookup (directory,
    /// entry, then the inode it names) in one round trip. `Ok(None)` when the engine
    /// cannot, and the caller reads in two steps.
    async fn get_linked(
        &mut self,
        keys: &[Key],
        link: &Link,
    ) -> Result<Option<Vec<Option<Value>>>, KvError> {
        let _ = (keys, link);
        Ok(None)
    }
    /// Values of `keys`, the entries with `start <= key < end` (ascending, at most
    /// `limit`), and for each entry the keys `link` names from its value (`link.from` is
    /// not used), in one call: a page of readdirplus (the directory, its entries, their
    /// inodes). Engines with snapshot reads answer from one consistent state; others may
    /// read in steps (the keys and the entries' names, then the entries' values, then the
    /// linked values: each as new as the step before or newer, an entry whose value
    /// vanished meanwhile left out, a missing linked value `None`). A directory listing
    /// promises no snapshot, and a transaction that writes re-checks every read at commit.
    /// `Ok(None)` when the engine cannot, and the caller reads in steps.
    async fn scan_linked(
        &mut self,
        keys: &[Key],
        start: &[u8],
        end: &[u8],
        limit: usize,
        link: &Link,
    ) -> Result<Option<LinkedScan>, KvError> {
        let _ = (keys, start, end, limit, link);
        Ok(None)
    }
}

/// What an engine's change feed ([`KvEngine::subscribe`]) delivers, in commit order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// Commit `seq` ([`CommitRequest::seq`]) of the client `origin` ([`KvEngine::origin`])
    /// wrote these keys; `None`: it wrote too many to list, so anything may have changed.
    Keys {
        origin: u64,
        seq: u64,
        keys: Option<Vec<Key>>,
    },
    /// A beat ([`KvEngine::send_beat`]) sent by `origin` with number `seq`. With
    /// `barrier`, every change committed before it was sent has been delivered before
    /// it; otherwise it only shows the feed is alive.
    Beat {
        origin: u64,
        seq: u64,
        barrier: bool,
    },
}

/// A subscription to an engine's changes.
#[async_trait]
pub trait ChangeFeed: Send {
    /// The next change. An error means the subscription is lost and changes may have
    /// been missed; subscribe again.
    async fn next(&mut self) -> Result<Change, KvError>;
}

/// A commit's written keys as one announcement: the origin and the commit's number (8
/// bytes each, big-endian), then each key as a big-endian u16 length and its bytes. Keys
/// that do not fit in `max` bytes make it "everything changed" (no keys).
pub fn encode_change(origin: u64, req: &CommitRequest, max: usize) -> Vec<u8> {
    let mut out = origin.to_be_bytes().to_vec();
    out.extend_from_slice(&req.seq.to_be_bytes());
    for (key, _) in &req.writes {
        let Ok(len) = u16::try_from(key.len()) else {
            out.truncate(16);
            return out;
        };
        if out.len() + 2 + key.len() > max {
            out.truncate(16);
            return out;
        }
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(key);
    }
    out
}

/// A random, non-zero id for one client in a change feed ([`KvEngine::origin`]).
pub fn new_origin() -> u64 {
    loop {
        let id: u64 = rand::random();
        if id != 0 {
            return id;
        }
    }
}

/// Read an announcement made by [`encode_change`] (`keys` is `None` for "everything").
pub fn decode_change(payload: &[u8]) -> Result<Change, KvError> {
    let bad = || {
        KvError::Engine(format!(
            "malformed change announcement of {} bytes",
            payload.len()
        ))
    };
    let number = |at: usize| -> Result<u64, KvError> {
        let raw: [u8; 8] = payload
            .get(at..at + 8)
            .ok_or_else(bad)?
            .try_into()
            .map_err(|_| bad())?;
        Ok(u64::from_be_bytes(raw))
    };
    let (origin, seq) = (number(0)?, number(8)?);
    let mut rest = &payload[16..];
    if rest.is_empty() {
        return Ok(Change::Keys {
            origin,
            seq,
            keys: None,
        });
    }
    let mut keys = Vec::new();
    while !rest.is_empty() {
        let len: [u8; 2] = rest
            .get(..2)
            .ok_or_else(bad)?
            .try_into()
            .map_err(|_| bad())?;
        let len = usize::from(u16::from_be_bytes(len));
        keys.push(rest.get(2..2 + len).ok_or_else(bad)?.to_vec());
        rest = &rest[2 + len..];
    }
    Ok(Change::Keys {
        origin,
        seq,
        keys: Some(keys),
    })
}

/// Reads of one moment of an engine, by several tasks at once and for as long as the
/// view is kept ([`KvEngine::frozen_view`]): what a dump of a whole volume reads, so that
/// it is one state of the volume however long it takes and whatever clients write
/// meanwhile. Dropping the view releases what holds the moment.
#[async_trait]
pub trait FrozenView: Send + Sync {
    /// The entries with `start <= key < end`, ascending, at most `limit`, as they were at
    /// the view's moment.
    async fn scan(
        &self,
        start: &[u8],
        end: &[u8],
        limit: usize,
    ) -> Result<Vec<(Key, Value)>, KvError>;
}

/// Rows streamed into an engine whose keys none of them already has (a load into an
/// empty volume), by the engine's own bulk path: see [`KvEngine::bulk_writer`].
#[async_trait]
pub trait BulkWriter: Send {
    /// Add `rows` (keys distinct from each other and from every row added before).
    async fn put(&mut self, rows: Vec<(Key, Value)>) -> Result<(), KvError>;
    /// Make every row added visible and durable. Rows that repeat a key fail the load. A
    /// writer dropped before this returns may leave rows behind (records without a
    /// volume, as commits would: `strata load --force` erases them), or none where the
    /// engine writes everything in one transaction (PostgreSQL).
    async fn finish(self: Box<Self>) -> Result<(), KvError>;
}

/// A transactional, ordered key-value engine under the metadata layer.
#[async_trait]
pub trait KvEngine: Send + Sync + fmt::Debug {
    /// Short engine name for messages ("memory", "sqlite", ...).
    fn name(&self) -> &'static str;
    /// Open a read view.
    async fn snapshot(&self) -> Result<Box<dyn KvSnapshot>, KvError>;
    /// Validate `req.reads` and apply `req.writes` atomically, or return
    /// `KvError::Conflict` and change nothing. A commit that returned is seen by every
    /// later snapshot of every client and survives a crash of this process; it also
    /// survives a crash of the machine when it returns, unless syncs are deferred (see
    /// [`set_deferred_sync`](Self::set_deferred_sync)).
    async fn commit(&self, req: CommitRequest) -> Result<(), KvError>;
    /// [`commit`](Self::commit), also returning what the commit's field updates left:
    /// one value per `Write::Fields` of `req`, in order (`None` for a key that was
    /// missing), when the engine learns them while committing (`Ok(None)` otherwise). A
    /// client that knows them keeps the records it just changed (a directory's times and
    /// link count after a create) instead of reading them again.
    async fn commit_fields(
        &self,
        req: CommitRequest,
    ) -> Result<Option<Vec<Option<Value>>>, KvError> {
        self.commit(req).await.map(|()| None)
    }
    /// With `deferred`, commits stop waiting for the disk and [`sync`](Self::sync) makes
    /// them durable (an engine that writes its own disk: SQLite); engines whose server
    /// decides durability ignore it.
    fn set_deferred_sync(&self, deferred: bool) {
        let _ = deferred;
    }
    /// Make every commit that returned so far survive a crash of the machine. Nothing to
    /// do for engines whose commits are durable when they return.
    async fn sync(&self) -> Result<(), KvError> {
        Ok(())
    }
    /// The client is shutting down: an engine that waits to learn the fate of a commit
    /// whose answer was lost stops waiting (the commit then fails as undecided), since
    /// nothing will act on the answer.
    fn begin_closing(&self) {}
    /// True when all reads of one snapshot see one consistent state, so read-only
    /// transactions need no validation at the end.
    fn snapshot_isolation(&self) -> bool;
    /// True when the engine applies [`Write::Fields`] itself at commit time; otherwise the
    /// transaction layer turns them into a read plus a put before committing.
    fn native_field_ops(&self) -> bool;
    /// True when every call is a network round trip (Redis, PostgreSQL, etcd): clients
    /// then let writing transactions assume recently read values ([`readcache`]).
    fn remote(&self) -> bool {
        false
    }
    /// A writer for a load into this engine while it holds no volume, when the engine has
    /// a path faster than commits of puts (`Ok(None)`: it has not). Nobody else may be
    /// using the volume's keys meanwhile: the writer announces nothing and may lock them.
    async fn bulk_writer(&self) -> Result<Option<Box<dyn BulkWriter>>, KvError> {
        Ok(None)
    }
    /// A [`FrozenView`] of this moment for up to `readers` scans at once (`Ok(None)`: the
    /// engine cannot hold a moment, and a dump reads each page as it stands then).
    async fn frozen_view(
        &self,
        readers: usize,
    ) -> Result<Option<std::sync::Arc<dyn FrozenView>>, KvError> {
        let _ = readers;
        Ok(None)
    }
    /// This client's id in the change feed; 0 when the engine has none.
    fn origin(&self) -> u64 {
        0
    }
    /// Subscribe to every commit's written keys, from every client (`Ok(None)`: the
    /// engine has no change feed). Engines with a feed announce each commit atomically
    /// with it, whoever made it.
    async fn subscribe(&self) -> Result<Option<Box<dyn ChangeFeed>>, KvError> {
        Ok(None)
    }
    /// Send beat `seq` through the change feed (see [`Change::Beat`]). A `barrier` beat
    /// must come back after every change committed before it was sent; other beats only
    /// show the feed is alive (an engine may send those more cheaply).
    async fn send_beat(&self, seq: u64, barrier: bool) -> Result<(), KvError> {
        let _ = (seq, barrier);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_increments_last_byte() {
        assert_eq!(prefix_end(b"A\x01"), b"A\x02".to_vec());
        assert_eq!(prefix_end(b"A\xff"), b"B".to_vec());
        assert_eq!(prefix_end(b"\xff\xff"), vec![0xFF, 0xFF, 0xFF]);
    }

    #[test]
    fn field_ops_apply_and_skip_missing() {
        let mut v = Vec::new();
        v.extend_from_slice(&5i64.to_le_bytes());
        v.extend_from_slice(&7i64.to_le_bytes());
        let ops = [
            FieldOp {
                slot: 0,
                update: FieldUpdate::Add(3),
            },
            FieldOp {
                slot: 1,
                update: FieldUpdate::Max(6),
            },
            FieldOp {
                slot: 1,
                update: FieldUpdate::Max(9),
            },
        ];
        let out = apply_field_ops(b"k", Some(&v), &ops).unwrap().unwrap();
        assert_eq!(&out[0..8], &8i64.to_le_bytes());
        assert_eq!(&out[8..16], &9i64.to_le_bytes());
        assert_eq!(apply_field_ops(b"k", None, &ops).unwrap(), None);
        let bad = [FieldOp {
            slot: 2,
            update: FieldUpdate::Set(1),
        }];
        assert!(matches!(
            apply_field_ops(b"k", Some(&v), &bad),
            Err(KvError::Corrupt { .. })
        ));
    }

    #[test]
    fn change_announcements_round_trip_and_overflow_to_everything() {
        let req = CommitRequest {
            writes: vec![
                (b"A1".to_vec(), Write::Delete),
                (b"B22".to_vec(), Write::Put(b"v".to_vec())),
            ],
            seq: 9,
            ..CommitRequest::default()
        };
        let got = decode_change(&encode_change(7, &req, 100)).unwrap();
        assert_eq!(
            got,
            Change::Keys {
                origin: 7,
                seq: 9,
                keys: Some(vec![b"A1".to_vec(), b"B22".to_vec()])
            }
        );
        let got = decode_change(&encode_change(7, &req, 20)).unwrap();
        assert_eq!(
            got,
            Change::Keys {
                origin: 7,
                seq: 9,
                keys: None
            }
        );
        assert!(decode_change(b"12345678").is_err());
        assert!(decode_change(b"1234567812345678\x00\x05ab").is_err());
    }

    #[test]
    fn a_bad_prefix_is_named_and_the_url_is_not() {
        let valid = |p: &str| p.bytes().all(|b| b.is_ascii_lowercase());
        let url = "postgres://u:hunter2@h/db?prefix=Bad-1&sslmode=disable";
        let err = take_prefix_param(url, "strata", valid, "a-z only")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("\"Bad-1\"") && err.contains("a-z only"),
            "{err}"
        );
        assert!(!err.contains("hunter2") && !err.contains("u:"), "{err}");
        let (rest, prefix) =
            take_prefix_param(url.replace("Bad-1", "ok").as_str(), "s", valid, "").unwrap();
        assert_eq!(
            (rest.as_str(), prefix.as_str()),
            ("postgres://u:hunter2@h/db?sslmode=disable", "ok")
        );
    }

    #[test]
    fn keys_display_readably() {
        assert_eq!(display_key(b"A\x00\x01x"), "A\\x00\\x01x");
    }
}
