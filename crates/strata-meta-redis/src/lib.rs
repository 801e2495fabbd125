//! The Redis metadata engine: Strata's `Kv` trait on a Redis server.
//!
//! Layout (docs/FORMAT.md, "Redis engine"): every key `K` of the volume is stored as the
//! Redis string `{prefix}:k{K}`, and `K` is also a member (score 0) of the sorted set
//! `{prefix}:i`. Members of equal score are ordered bytewise, so `ZRANGEBYLEX` gives the
//! ordered range scans the metadata layer needs. Both are only ever changed together,
//! inside one script.
//!
//! Reads are single commands (`GET`, `MGET`) or a read-only script (scan: the index range
//! and the values in one atomic step); a readdirplus page is a script for its first
//! entries and native commands for the rest (`listing.rs`). A commit is one script that re-runs every read the
//! transaction made, returns 0 if any result differs, and otherwise applies all writes;
//! Redis runs scripts atomically, so validation and writes cannot interleave with another
//! client. Field updates (directory times, link counts, usage) are applied by the same
//! script at commit, so concurrent creates in one directory do not conflict. The script
//! also publishes the keys it wrote (`feed.rs`). No WATCH is
//! ever used, so the shared multiplexed connection is safe.
//! Durability is the server's: run Redis with `appendonly yes` (and `appendfsync always`
//! for fsync-on-commit) for a file system that survives a server crash.

mod feed;
mod listing;
mod scripts;
mod source;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{RedisError, Script, Value as RedisValue};
use strata_meta::kv::{
    ChangeFeed, CommitRequest, FieldUpdate, Key, KvEngine, KvError, KvSnapshot, Link, LinkedScan,
    LostCommit, ReadCheck, Value, Write, encode_change, new_origin, record_lost_commit,
    take_prefix_param, take_query_param, within,
};
use strata_types::{Secret, redact_url};
use tokio_util::sync::CancellationToken;

/// How long connecting (and the first PING) may take before the engine is unavailable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one command may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);
/// Reconnect attempts a command on a lost connection waits for.
const RECONNECTS: usize = 2;

/// A `redis://` META-URL taken apart: the server URL for the client library (or the
/// Sentinel form `redis://[:PASSWORD@]MASTER,HOST:PORT,.../DB`) and the key prefix of the
/// volume (`?prefix=NAME`, default `strata`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedisUrl {
    /// The server URL, password included (hidden when printed).
    pub server: Secret,
    pub prefix: String,
    /// `?replicas=N`: a writing commit is acknowledged only once N replicas have it
    /// (Redis `WAIT`), so a failover to any of them loses nothing acknowledged; 0 (the
    /// default) acknowledges it when the master has applied it.
    pub replicas: u32,
}

impl RedisUrl {
    /// Parse `redis://[[user]:password@]host:port[/db][?prefix=NAME]` (or `rediss://`).
    pub fn parse(url: &str) -> Result<RedisUrl, KvError> {
        if !(url.starts_with("redis://") || url.starts_with("rediss://")) {
            return Err(KvError::Engine(format!(
                "not a Redis URL: {} (expected redis://host:port/db)",
                redact_url(url)
            )));
        }
        let (server, prefix) = take_prefix_param(url, "strata", valid_prefix, PREFIX_RULE)?;
        let (server, replicas) = take_query_param(&server, "replicas");
        let replicas = match replicas {
            None => 0,
            Some(n) => n.parse::<u32>().map_err(|_| {
                KvError::Engine(format!(
                    "bad replicas={n:?} in {}: expected a number of replicas",
                    redact_url(&server)
                ))
            })?,
        };
        Ok(RedisUrl {
            server: Secret::new(server),
            prefix,
            replicas,
        })
    }
}

/// What [`valid_prefix`] accepts, for the error.
const PREFIX_RULE: &str = "1-64 letters, digits, '-' and '_'";

fn valid_prefix(p: &str) -> bool {
    !p.is_empty()
        && p.len() <= 64
        && p.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// A client of one volume's keys on one Redis server.
pub struct RedisEngine {
    source: source::Source,
    /// The connection in use; dropped after a failure when following a Sentinel group.
    conn: ConnSlot,
    /// `{prefix}:` — every key of the volume starts with it.
    base: Vec<u8>,
    /// `{prefix}:i` — the sorted-set index of all keys.
    index: Vec<u8>,
    scan: Script,
    linked: Script,
    scan_linked: Script,
    commit: Script,
    fence: Script,
    /// This client's id in the change feed.
    origin: u64,
    /// Replicas a writing commit must reach before it is acknowledged ([`RedisUrl::replicas`]).
    replicas: u32,
    /// Cancelled when the client shuts down ([`KvEngine::begin_closing`]).
    closing: CancellationToken,
}

impl std::fmt::Debug for RedisEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisEngine")
            .field("prefix", &String::from_utf8_lossy(&self.base))
            .finish()
    }
}

impl RedisEngine {
    /// An engine that connects on first use (tests; the binary uses [`connect`]).
    ///
    /// [`connect`]: RedisEngine::connect
    pub fn lazy(url: &RedisUrl) -> Result<RedisEngine, KvError> {
        let source = source::Source::new(url.server.expose())?;
        let base = format!("{}:", url.prefix).into_bytes();
        let mut index = base.clone();
        index.push(b'i');
        Ok(RedisEngine {
            conn: ConnSlot {
                current: Arc::new(Mutex::new(None)),
                resettable: source.follows_failover(),
            },
            source,
            base,
            index,
            scan: Script::new(scripts::SCAN),
            linked: Script::new(scripts::LINKED),
            scan_linked: Script::new(scripts::SCAN_LINKED),
            commit: Script::new(scripts::COMMIT),
            fence: Script::new(scripts::FENCE),
            origin: new_origin(),
            replicas: url.replicas,
            closing: CancellationToken::new(),
        })
    }

    /// Connect now and check the server answers (bounded time, clear errors).
    pub async fn connect(url: &RedisUrl) -> Result<RedisEngine, KvError> {
        let engine = RedisEngine::lazy(url)?;
        // One plain connection first: a refused or unauthenticated server fails at once,
        // where the reconnecting manager would keep retrying.
        let client = engine.source.client().await?;
        let probe = async {
            client
                .get_multiplexed_async_connection()
                .await
                .map_err(redis_error)
        };
        within(CONNECT_TIMEOUT, "Redis", probe).await?;
        let mut conn = engine.conn().await?;
        let pong: String = timed(redis::cmd("PING").query_async(&mut conn)).await?;
        if pong != "PONG" {
            return Err(KvError::Engine(format!("unexpected PING reply {pong:?}")));
        }
        Ok(engine)
    }

    async fn conn(&self) -> Result<ConnectionManager, KvError> {
        if let Some(conn) = self.conn.get() {
            return Ok(conn);
        }
        let client = self.source.client().await?;
        // The library's default 500 ms response timeout would turn a slow commit into an
        // error the client cannot interpret; commands get COMMAND_TIMEOUT. A command on a
        // lost connection waits for at most two reconnects (0.1 + 0.2 s), not the
        // library's six (6.3 s): the transaction's own retry loop waits out an outage, and
        // one that must end (a client shutting down) then ends in a second, not minutes.
        let config = ConnectionManagerConfig::new()
            .set_response_timeout(Some(COMMAND_TIMEOUT))
            .set_number_of_retries(RECONNECTS);
        let connecting = async {
            client
                .get_connection_manager_with_config(config)
                .await
                .map_err(redis_error)
        };
        let conn = within(CONNECT_TIMEOUT, "Redis", connecting).await?;
        self.conn.set(conn.clone());
        Ok(conn)
    }
}

/// How long a commit waits for its replicas ([`RedisUrl::replicas`]).
const REPLICA_WAIT: Duration = Duration::from_secs(5);

impl RedisEngine {
    /// With `?replicas=N`, wait until N replicas have every write this connection made
    /// (the commit just applied included). Fewer within [`REPLICA_WAIT`] fails the
    /// operation with an engine error (`EIO`): the commit is applied on the master but a
    /// failover now could lose it, which an acknowledgement must not hide.
    async fn wait_for_replicas(&self, conn: &mut ConnectionManager) -> Result<(), KvError> {
        if self.replicas == 0 {
            return Ok(());
        }
        let millis = u64::try_from(REPLICA_WAIT.as_millis()).unwrap_or(u64::MAX);
        let asked = timed(
            redis::cmd("WAIT")
                .arg(self.replicas)
                .arg(millis)
                .query_async::<u64>(conn),
        )
        .await;
        let reached = self.conn.check(asked)?;
        if reached < u64::from(self.replicas) {
            return Err(KvError::Engine(format!(
                "Redis: a commit reached {reached} of the {} replicas asked for (replicas=) \
                 within {} s; it is applied on the master but a failover could lose it",
                self.replicas,
                REPLICA_WAIT.as_secs()
            )));
        }
        Ok(())
    }

    /// A commit whose answer was lost (timeout, dropped connection) may or may not have
    /// been applied, and may even still be on its way to the server. Fence its id until
    /// the server answers ([`scripts::FENCE`]): applied means success; fenced means it
    /// was not applied and never will be, so the transaction can safely be retried.
    async fn settle_lost_commit(&self, commit_id: &str, why: String) -> Result<(), KvError> {
        let mut marker = self.base.clone();
        marker.push(b'c');
        marker.extend_from_slice(commit_id.as_bytes());
        let started = std::time::Instant::now();
        while started.elapsed() < COMMAND_TIMEOUT && !self.closing.is_cancelled() {
            if let Ok(mut conn) = self.conn().await {
                let asked = timed(self.fence.key(&marker).invoke_async(&mut conn)).await;
                if let Ok(verdict) = self.conn.check::<Vec<u8>>(asked) {
                    let applied = verdict == b"1";
                    tracing::info!(applied, "Redis: settled a commit whose answer was lost");
                    record_lost_commit(if applied {
                        LostCommit::Applied
                    } else {
                        LostCommit::NotApplied
                    });
                    return if applied {
                        Ok(())
                    } else {
                        Err(KvError::Unavailable(why))
                    };
                }
            }
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(200)) => {}
                () = self.closing.cancelled() => {}
            }
        }
        record_lost_commit(LostCommit::Unknown);
        Err(KvError::Engine(format!(
            "Redis: cannot tell whether a commit was applied ({why})"
        )))
    }
}

/// A commit id unique across clients: process, time and a counter.
fn new_commit_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{:x}.{nanos:x}.{n:x}", std::process::id())
}

/// The connection an engine uses, shared with its read views.
#[derive(Clone)]
struct ConnSlot {
    current: Arc<Mutex<Option<ConnectionManager>>>,
    /// Drop the connection when it fails (the server may have moved: Sentinel).
    resettable: bool,
}

impl ConnSlot {
    fn get(&self) -> Option<ConnectionManager> {
        self.current.lock().clone()
    }

    fn set(&self, conn: ConnectionManager) {
        *self.current.lock() = Some(conn);
    }

    /// Pass `result` through; an unavailable server makes a Sentinel client look up the
    /// master again at its next use.
    fn check<T>(&self, result: Result<T, KvError>) -> Result<T, KvError> {
        if self.resettable && matches!(result, Err(KvError::Unavailable(_))) {
            *self.current.lock() = None;
        }
        result
    }
}

/// The Redis key holding the value of `key`: `{prefix}:k{key}`.
fn value_key(base: &[u8], key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(base.len() + 1 + key.len());
    k.extend_from_slice(base);
    k.push(b'k');
    k.extend_from_slice(key);
    k
}

/// Run one Redis command with the command timeout.
async fn timed<T>(fut: impl Future<Output = Result<T, RedisError>>) -> Result<T, KvError> {
    within(COMMAND_TIMEOUT, "Redis", async {
        fut.await.map_err(redis_error)
    })
    .await
}

/// Connection trouble is worth retrying; everything else is an engine error.
fn redis_error(e: RedisError) -> KvError {
    if e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() || e.is_timeout() {
        KvError::Unavailable(format!("Redis: {e}"))
    } else {
        let text = e.to_string();
        // LOADING/BUSY/TRYAGAIN: a server starting or busy; READONLY: a demoted master;
        // Sentinel errors: a failover in progress.
        if ["LOADING", "BUSY", "TRYAGAIN", "READONLY", "entinel"]
            .iter()
            .any(|t| text.contains(t))
        {
            KvError::Unavailable(format!("Redis: {e}"))
        } else {
            KvError::Engine(format!("Redis: {e}"))
        }
    }
}

/// `ZRANGEBYLEX` bounds for `[start, end)`.
fn lex_bounds(start: &[u8], end: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let mut lo = vec![b'['];
    lo.extend_from_slice(start);
    let mut hi = vec![b'('];
    hi.extend_from_slice(end);
    (lo, hi)
}

/// The `LIMIT` count for a scan (negative: no limit).
fn lex_limit(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(-1)
}

fn bytes_of(v: RedisValue) -> Result<Option<Vec<u8>>, KvError> {
    match v {
        RedisValue::Nil => Ok(None),
        RedisValue::BulkString(b) => Ok(Some(b)),
        RedisValue::SimpleString(s) => Ok(Some(s.into_bytes())),
        other => Err(KvError::Engine(format!("unexpected Redis reply {other:?}"))),
    }
}

/// A read view: every read is its own command (not isolated; commits validate reads).
struct RedisSnapshot {
    base: Vec<u8>,
    index: Vec<u8>,
    scan: Script,
    linked: Script,
    scan_linked: Script,
    conn: ConnectionManager,
    slot: ConnSlot,
}

impl RedisSnapshot {
    fn value_key(&self, key: &[u8]) -> Vec<u8> {
        value_key(&self.base, key)
    }
}

#[async_trait]
impl KvSnapshot for RedisSnapshot {
    async fn get(&mut self, key: &[u8]) -> Result<Option<Value>, KvError> {
        let k = self.value_key(key);
        let got = timed(redis::cmd("GET").arg(k).query_async(&mut self.conn)).await;
        self.slot.check(got)
    }

    async fn get_many(&mut self, keys: &[Key]) -> Result<Vec<Option<Value>>, KvError> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let mut cmd = redis::cmd("MGET");
        for key in keys {
            cmd.arg(self.value_key(key));
        }
        let got = timed(cmd.query_async(&mut self.conn)).await;
        self.slot.check(got)
    }

    async fn get_linked(
        &mut self,
        keys: &[Key],
        link: &Link,
    ) -> Result<Option<Vec<Option<Value>>>, KvError> {
        let mut call = self.linked.prepare_invoke();
        call.arg(&self.base).arg(keys.len());
        for key in keys {
            call.arg(key);
        }
        call.arg(link.from).arg(link.offset).arg(link.targets.len());
        for (prefix, suffix) in &link.targets {
            call.arg(prefix).arg(suffix);
        }
        let flat: Vec<RedisValue> = self
            .slot
            .check(timed(call.invoke_async(&mut self.conn)).await)?;
        flat.into_iter()
            .map(bytes_of)
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    async fn scan_linked(
        &mut self,
        keys: &[Key],
        start: &[u8],
        end: &[u8],
        limit: usize,
        link: &Link,
    ) -> Result<Option<LinkedScan>, KvError> {
        if start >= end || limit == 0 {
            return Ok(None);
        }
        self.linked_page(keys, start, end, limit, link)
            .await
            .map(Some)
    }

    async fn scan(
        &mut self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        reverse: bool,
    ) -> Result<Vec<(Key, Value)>, KvError> {
        if start >= end || limit == 0 {
            return Ok(Vec::new());
        }
        let (lo, hi) = lex_bounds(start, end);
        let mut call = self.scan.key(&self.index);
        call.arg(&self.base)
            .arg(lo)
            .arg(hi)
            .arg(lex_limit(limit))
            .arg(if reverse { "1" } else { "0" });
        let flat: Vec<RedisValue> = self
            .slot
            .check(timed(call.invoke_async(&mut self.conn)).await)?;
        let mut out = Vec::with_capacity(flat.len() / 2);
        let mut items = flat.into_iter();
        while let (Some(k), Some(v)) = (items.next(), items.next()) {
            let key = bytes_of(k)?.unwrap_or_default();
            // A member without a value cannot happen (both change in one script).
            if let Some(value) = bytes_of(v)? {
                out.push((key, value));
            }
        }
        Ok(out)
    }
}

#[async_trait]
impl KvEngine for RedisEngine {
    fn name(&self) -> &'static str {
        "redis"
    }

    async fn snapshot(&self) -> Result<Box<dyn KvSnapshot>, KvError> {
        let conn = self.conn().await?;
        Ok(Box::new(RedisSnapshot {
            base: self.base.clone(),
            index: self.index.clone(),
            scan: self.scan.clone(),
            linked: self.linked.clone(),
            scan_linked: self.scan_linked.clone(),
            conn,
            slot: self.conn.clone(),
        }))
    }

    async fn commit(&self, req: CommitRequest) -> Result<(), KvError> {
        self.commit_fields(req).await.map(|_| ())
    }

    async fn commit_fields(
        &self,
        req: CommitRequest,
    ) -> Result<Option<Vec<Option<Value>>>, KvError> {
        if req.writes.is_empty() && req.reads.is_empty() {
            return Ok(None);
        }
        let mut conn = self.conn().await?;
        let mut call = self.commit.key(&self.index);
        let commit_id = if req.writes.is_empty() {
            String::new()
        } else {
            new_commit_id()
        };
        let notice = if req.writes.is_empty() {
            Vec::new()
        } else {
            encode_change(self.origin, &req, feed::MAX_NOTICE)
        };
        call.arg(&self.base).arg(&commit_id).arg(notice);
        let points: Vec<_> = req
            .reads
            .iter()
            .filter_map(|r| match r {
                ReadCheck::Point { key, value } => Some((key, value)),
                ReadCheck::Range { .. } => None,
            })
            .collect();
        call.arg(points.len());
        for (key, value) in points {
            call.arg(key.as_slice());
            match value {
                Some(v) => call.arg("1").arg(v.as_slice()),
                None => call.arg("0").arg(""),
            };
        }
        let ranges: Vec<_> = req
            .reads
            .iter()
            .filter(|r| matches!(r, ReadCheck::Range { .. }))
            .collect();
        call.arg(ranges.len());
        for r in ranges {
            if let ReadCheck::Range {
                start,
                end,
                limit,
                reverse,
                entries,
            } = r
            {
                let (lo, hi) = lex_bounds(start, end);
                let empty = start >= end || *limit == 0;
                call.arg(lo)
                    .arg(hi)
                    .arg(if empty { 0 } else { lex_limit(*limit) })
                    .arg(if *reverse { "1" } else { "0" })
                    .arg(if empty { "1" } else { "0" })
                    .arg(entries.len());
                for (k, v) in entries {
                    call.arg(k.as_slice()).arg(v.as_slice());
                }
            }
        }
        call.arg(req.writes.len());
        for (key, write) in &req.writes {
            match write {
                Write::Put(v) => call.arg("P").arg(key.as_slice()).arg(v.as_slice()),
                Write::Delete => call.arg("D").arg(key.as_slice()),
                Write::Fields(ops) => {
                    call.arg("F").arg(key.as_slice()).arg(ops.len());
                    for op in ops {
                        let (kind, operand) = match op.update {
                            FieldUpdate::Add(v) => ("A", v),
                            FieldUpdate::Max(v) => ("M", v),
                            FieldUpdate::Set(v) => ("S", v),
                        };
                        call.arg(op.slot).arg(kind).arg(&operand.to_le_bytes()[..]);
                    }
                    &mut call
                }
            };
        }
        let sent = within(COMMAND_TIMEOUT, "Redis", async {
            Ok(call.invoke_async::<RedisValue>(&mut conn).await)
        })
        .await;
        let failed = match sent {
            Ok(Ok(reply)) => {
                let fields = commit_reply(reply)?;
                if !commit_id.is_empty() {
                    self.wait_for_replicas(&mut conn).await?;
                }
                return Ok(fields);
            }
            // Refused: the commit never left this client, so it was not applied.
            Ok(Err(e)) if e.is_connection_refusal() => return self.conn.check(Err(redis_error(e))),
            Ok(Err(e)) => redis_error(e),
            Err(no_answer) => no_answer,
        };
        match self.conn.check(Err(failed)) {
            Err(KvError::Unavailable(why)) if !commit_id.is_empty() => {
                // Applied or not, what its field updates left is unknown.
                self.settle_lost_commit(&commit_id, why)
                    .await
                    .map(|()| None)
            }
            other => other,
        }
    }

    fn begin_closing(&self) {
        self.closing.cancel();
    }

    fn snapshot_isolation(&self) -> bool {
        false
    }

    fn native_field_ops(&self) -> bool {
        // Applied in the commit script, with exact 64-bit arithmetic on two 32-bit halves
        // (Lua numbers are doubles), so creates in one directory do not conflict.
        true
    }

    fn remote(&self) -> bool {
        true
    }

    fn origin(&self) -> u64 {
        self.origin
    }

    async fn subscribe(&self) -> Result<Option<Box<dyn ChangeFeed>>, KvError> {
        Ok(Some(Box::new(self.open_feed().await?)))
    }

    async fn send_beat(&self, seq: u64, _barrier: bool) -> Result<(), KvError> {
        self.publish_beat(seq).await
    }
}

/// What a commit's reply says: the fields it computed, or a conflict.
fn commit_reply(reply: RedisValue) -> Result<Option<Vec<Option<Value>>>, KvError> {
    match reply {
        RedisValue::Array(items) => {
            let fields = items
                .into_iter()
                .skip(1)
                .map(bytes_of)
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Some(fields))
        }
        RedisValue::Int(0) => Err(KvError::Conflict),
        other => Err(KvError::Engine(format!(
            "unexpected Redis commit reply {other:?}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_server_and_prefix() {
        let u = RedisUrl::parse("redis://:pw@127.0.0.1:6379/2?prefix=vol_a").unwrap();
        assert_eq!(u.server.expose(), "redis://:pw@127.0.0.1:6379/2");
        assert!(
            !format!("{u:?}").contains("pw"),
            "the password never prints"
        );
        assert_eq!(u.prefix, "vol_a");
        let d = RedisUrl::parse("rediss://host:6380/0?protocol=resp3").unwrap();
        assert_eq!(d.prefix, "strata");
        assert_eq!(d.server.expose(), "rediss://host:6380/0?protocol=resp3");
        assert!(RedisUrl::parse("postgres://x").is_err());
        assert!(RedisUrl::parse("redis://h/0?prefix=a:b").is_err());
        let w = RedisUrl::parse("redis://:pw@m,h:26379/0?replicas=1&prefix=v").unwrap();
        assert_eq!((w.replicas, w.prefix.as_str()), (1, "v"));
        assert_eq!(w.server.expose(), "redis://:pw@m,h:26379/0");
        assert_eq!(u.replicas, 0);
        let bad = RedisUrl::parse("redis://:pw@h/0?replicas=all").unwrap_err();
        assert!(bad.to_string().contains("replicas") && !bad.to_string().contains("pw@"));
    }

    #[test]
    fn lex_bounds_include_start_and_exclude_end() {
        let (lo, hi) = lex_bounds(b"A1", b"A2");
        assert_eq!(lo, b"[A1");
        assert_eq!(hi, b"(A2");
        assert_eq!(lex_limit(usize::MAX), -1);
        assert_eq!(lex_limit(5), 5);
    }
}
