//! The PostgreSQL metadata engine: Strata's `Kv` trait on a PostgreSQL database.
//!
//! Layout (docs/FORMAT.md, "PostgreSQL engine"): one table per volume,
//! `strata_{prefix}(k BYTEA PRIMARY KEY, v BYTEA NOT NULL)`; `bytea` compares bytewise, so
//! the primary-key index gives ordered range scans. Several volumes share a database by
//! using different prefixes (`?prefix=NAME`, default `strata`).
//!
//! Reads run outside transactions (not isolated; every read is validated at commit). A
//! commit is one SERIALIZABLE transaction: it re-runs every read the transaction made
//! (point reads in one query, range reads concurrently), and if all still hold, applies
//! the writes (one upsert, one delete) and announces them (`feed.rs`). A commit whose reads
//! are all point reads is sent as one pipeline, one round trip (`pipelined.rs`). PostgreSQL reports a concurrent conflict as a
//! serialization failure (SQLSTATE 40001) or deadlock (40P01), which becomes
//! `KvError::Conflict` and is retried by the transaction layer. Connections come from a
//! small pool; broken ones are dropped and replaced. A commit whose answer is lost is
//! settled (applied or not) through its connection's commit marker, never blindly
//! retried (`settle.rs`). A load into an empty volume streams its rows by `COPY` in one
//! transaction instead (`bulk.rs`).

mod bulk;
mod feed;
mod frozen;
mod pipelined;
mod pool;
mod settle;
mod sql;
mod stmt;

use std::time::Duration;

use async_trait::async_trait;
use strata_meta::kv::{
    BulkWriter, ChangeFeed, CommitRequest, FrozenView, Key, KvEngine, KvError, KvSnapshot, Link,
    LinkedScan, ReadCheck, Value, Write, encode_change, new_origin, take_prefix_param,
    take_query_param, within,
};
use strata_types::{Secret, redact_url};
use tokio_postgres::Row;
use tokio_postgres::error::SqlState;
use tokio_util::sync::CancellationToken;

use crate::pool::{Pool, Pooled};
use crate::stmt::Sql;

/// How long connecting may take before the engine is unavailable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one statement may take.
const QUERY_TIMEOUT: Duration = Duration::from_secs(30);
/// Connections per engine.
const POOL_SIZE: usize = 8;

/// A `postgres://` META-URL taken apart: the connection string for the client library and
/// the volume's table prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PostgresUrl {
    /// The connection URL for the client library, password included (hidden when printed).
    pub conninfo: Secret,
    pub prefix: String,
    /// `?pooler=transaction`: the server is reached through a transaction pooler
    /// (PgBouncer `pool_mode = transaction`): statements are sent unnamed, nothing relies
    /// on session state, and the client follows no change feed (`LISTEN` needs a session).
    pub pooler: bool,
}

impl PostgresUrl {
    /// Parse `postgres://user:password@host:port/db[?sslmode=disable][&prefix=NAME]`.
    pub fn parse(url: &str) -> Result<PostgresUrl, KvError> {
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return Err(KvError::Engine(format!(
                "not a PostgreSQL URL: {} (expected postgres://user:pass@host:port/db)",
                redact_url(url)
            )));
        }
        let (conninfo, prefix) = take_prefix_param(url, "strata", valid_prefix, PREFIX_RULE)?;
        let (conninfo, pooler) = take_pooler_param(&conninfo)?;
        let prefix = prefix.to_lowercase();
        Ok(PostgresUrl {
            conninfo: Secret::new(conninfo),
            prefix,
            pooler,
        })
    }

    /// The volume's table.
    pub fn table(&self) -> String {
        format!("strata_{}", self.prefix)
    }
}

/// Take `pooler=MODE` out of a URL's query: true for `transaction` (and `statement`:
/// PgBouncer's modes where consecutive statements may reach different server
/// connections), false for `session` or `none` (a session pooler behaves as the server).
fn take_pooler_param(url: &str) -> Result<(String, bool), KvError> {
    let (url, mode) = take_query_param(url, "pooler");
    let pooler = match mode.as_deref() {
        None | Some("session" | "none") => false,
        Some("transaction" | "statement") => true,
        Some(other) => {
            let base = url.split_once('?').map_or(&url[..], |(b, _)| b);
            return Err(KvError::Engine(format!(
                "bad pooler={other:?} in {}: expected transaction, session or none",
                redact_url(base)
            )));
        }
    };
    Ok((url, pooler))
}

/// What [`valid_prefix`] accepts, for the error.
const PREFIX_RULE: &str = "1-48 letters, digits and '_'";

fn valid_prefix(p: &str) -> bool {
    !p.is_empty() && p.len() <= 48 && p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// A client of one volume's table in one PostgreSQL database.
#[derive(Debug)]
pub struct PostgresEngine {
    pool: Pool,
    /// This client's id in the change feed (its announcements carry it).
    origin: u64,
    /// Reached through a transaction pooler: no feed to follow ([`PostgresUrl::pooler`]).
    pooler: bool,
    /// Cancelled when the client shuts down ([`KvEngine::begin_closing`]): settling a
    /// lost commit stops waiting for an unreachable server.
    closing: CancellationToken,
}

impl PostgresEngine {
    /// An engine that connects on first use (tests; the binary uses [`connect`]).
    ///
    /// [`connect`]: PostgresEngine::connect
    pub fn lazy(url: &PostgresUrl) -> Result<PostgresEngine, KvError> {
        let config: tokio_postgres::Config = url
            .conninfo
            .expose()
            .parse()
            .map_err(|e| KvError::Engine(format!("bad PostgreSQL URL: {e}")))?;
        Ok(PostgresEngine {
            pool: Pool::new(config, url.table(), POOL_SIZE, url.pooler),
            origin: new_origin(),
            pooler: url.pooler,
            closing: CancellationToken::new(),
        })
    }

    /// Connect now (creating the volume's table if needed), in bounded time.
    pub async fn connect(url: &PostgresUrl) -> Result<PostgresEngine, KvError> {
        let engine = PostgresEngine::lazy(url)?;
        drop(engine.pool.get().await?);
        Ok(engine)
    }
}

/// Run one statement with the query timeout.
async fn timed<T>(
    fut: impl Future<Output = Result<T, tokio_postgres::Error>>,
) -> Result<T, KvError> {
    within(QUERY_TIMEOUT, "PostgreSQL", async {
        fut.await.map_err(pg_error)
    })
    .await
}

/// Conflicts are retried as conflicts, lost connections as unavailability.
pub(crate) fn pg_error(e: tokio_postgres::Error) -> KvError {
    match e.code() {
        Some(c)
            if *c == SqlState::T_R_SERIALIZATION_FAILURE
                || *c == SqlState::T_R_DEADLOCK_DETECTED =>
        {
            KvError::Conflict
        }
        Some(c)
            if *c == SqlState::INVALID_PASSWORD
                || *c == SqlState::INVALID_AUTHORIZATION_SPECIFICATION =>
        {
            KvError::Engine(format!(
                "PostgreSQL: authentication failed: {}",
                db_message(&e)
            ))
        }
        Some(c) if *c == SqlState::INVALID_CATALOG_NAME => {
            KvError::Engine(format!("PostgreSQL: {}", db_message(&e)))
        }
        // A server that is read-only now is a primary demoted by a failover (or a
        // standby reached by a multi-host URL): another connection finds the primary.
        Some(c) if *c == SqlState::READ_ONLY_SQL_TRANSACTION => KvError::Unavailable(format!(
            "PostgreSQL: the server is read-only (a standby): {}",
            db_message(&e)
        )),
        Some(c) if c.code().starts_with("08") || c.code().starts_with("57P") => {
            KvError::Unavailable(format!("PostgreSQL: {}", db_message(&e)))
        }
        Some(_) => KvError::Engine(format!("PostgreSQL: {}", db_message(&e))),
        None if e.is_closed() => KvError::Unavailable("PostgreSQL connection closed".into()),
        None => KvError::Unavailable(format!("PostgreSQL: {}", pool::with_causes(&e))),
    }
}

fn db_message(e: &tokio_postgres::Error) -> String {
    e.as_db_error()
        .map(|d| d.message().to_string())
        .unwrap_or_else(|| e.to_string())
}

fn pairs(rows: Vec<Row>) -> Result<Vec<(Key, Value)>, KvError> {
    rows.into_iter()
        .map(|r| {
            let k: Vec<u8> = r.try_get(0).map_err(pg_error)?;
            let v: Vec<u8> = r.try_get(1).map_err(pg_error)?;
            Ok((k, v))
        })
        .collect()
}

/// Rows `start <= k < end`, ordered, at most `limit`.
async fn scan_rows(
    conn: &Pooled,
    start: &[u8],
    end: &[u8],
    limit: usize,
    reverse: bool,
) -> Result<Vec<(Key, Value)>, KvError> {
    if start >= end || limit == 0 {
        return Ok(Vec::new());
    }
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let sql = if reverse { Sql::ScanDesc } else { Sql::ScanAsc };
    let rows = timed(conn.query(sql, &[&start, &end, &limit])).await?;
    pairs(rows)
}

/// Values of `keys`, in order.
async fn get_rows(conn: &Pooled, keys: &[Key]) -> Result<Vec<Option<Value>>, KvError> {
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let rows = timed(conn.query(Sql::GetMany, &[&keys])).await?;
    let found: std::collections::HashMap<Key, Value> = pairs(rows)?.into_iter().collect();
    Ok(keys.iter().map(|k| found.get(k).cloned()).collect())
}

/// A read view: each read borrows a pooled connection (not isolated).
struct PostgresSnapshot {
    pool: Pool,
}

#[async_trait]
impl KvSnapshot for PostgresSnapshot {
    async fn get(&mut self, key: &[u8]) -> Result<Option<Value>, KvError> {
        let conn = self.pool.get().await?;
        let row = timed(conn.query_opt(Sql::Get, &[&key])).await?;
        row.map(|r| r.try_get(0).map_err(pg_error)).transpose()
    }

    async fn get_many(&mut self, keys: &[Key]) -> Result<Vec<Option<Value>>, KvError> {
        let conn = self.pool.get().await?;
        get_rows(&conn, keys).await
    }

    async fn get_linked(
        &mut self,
        keys: &[Key],
        link: &Link,
    ) -> Result<Option<Vec<Option<Value>>>, KvError> {
        let Some(holder) = keys.get(link.from) else {
            return Ok(None);
        };
        let conn = self.pool.get().await?;
        let (prefixes, suffixes): (Vec<Key>, Vec<Key>) = link.targets.iter().cloned().unzip();
        let offset = i32::try_from(link.offset)
            .map_err(|_| KvError::Engine(format!("link offset {}", link.offset)))?;
        let rows =
            timed(conn.query(Sql::Linked, &[&keys, holder, &offset, &prefixes, &suffixes])).await?;
        Ok(Some(link.values_from(keys, pairs(rows)?)))
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
        let conn = self.pool.get().await?;
        let (prefixes, suffixes): (Vec<Key>, Vec<Key>) = link.targets.iter().cloned().unzip();
        let offset = i32::try_from(link.offset)
            .map_err(|_| KvError::Engine(format!("link offset {}", link.offset)))?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 7] =
            [&keys, &start, &end, &limit, &offset, &prefixes, &suffixes];
        let rows = timed(conn.query(Sql::ScanLinked, &params)).await?;
        let mut parts: [Vec<(Key, Value)>; 3] = Default::default();
        for row in rows {
            let part: i16 = row.try_get(0).map_err(pg_error)?;
            let k: Vec<u8> = row.try_get(1).map_err(pg_error)?;
            let v: Vec<u8> = row.try_get(2).map_err(pg_error)?;
            let slot = usize::try_from(part)
                .ok()
                .and_then(|i| parts.get_mut(i))
                .ok_or_else(|| KvError::Engine(format!("linked scan part {part}")))?;
            slot.push((k, v));
        }
        let [found, page, linked] = parts;
        Ok(Some(LinkedScan::from_parts(
            keys, found, page, linked, link,
        )))
    }

    async fn scan(
        &mut self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        reverse: bool,
    ) -> Result<Vec<(Key, Value)>, KvError> {
        let conn = self.pool.get().await?;
        scan_rows(&conn, start, end, limit, reverse).await
    }
}

/// Whether every read of `req` still returns what it returned, inside the transaction.
async fn reads_hold(conn: &Pooled, reads: &[ReadCheck]) -> Result<bool, KvError> {
    let (keys, expected): (Vec<Key>, Vec<Option<Value>>) = reads
        .iter()
        .filter_map(|r| match r {
            ReadCheck::Point { key, value } => Some((key.clone(), value.clone())),
            ReadCheck::Range { .. } => None,
        })
        .unzip();
    let ranges = reads.iter().filter_map(|r| match r {
        ReadCheck::Range {
            start,
            end,
            limit,
            reverse,
            entries,
        } => Some(async move {
            Ok::<bool, KvError>(scan_rows(conn, start, end, *limit, *reverse).await? == *entries)
        }),
        ReadCheck::Point { .. } => None,
    });
    let (points, ranges) =
        futures::future::join(get_rows(conn, &keys), futures::future::try_join_all(ranges)).await;
    Ok(points? == expected && ranges?.into_iter().all(|held| held))
}

#[async_trait]
impl KvEngine for PostgresEngine {
    fn name(&self) -> &'static str {
        "postgres"
    }

    async fn snapshot(&self) -> Result<Box<dyn KvSnapshot>, KvError> {
        Ok(Box::new(PostgresSnapshot {
            pool: self.pool.clone(),
        }))
    }

    async fn commit(&self, req: CommitRequest) -> Result<(), KvError> {
        if req.writes.is_empty() && req.reads.is_empty() {
            return Ok(());
        }
        let mut writes = Writes::default();
        for (key, write) in &req.writes {
            match write {
                Write::Put(v) => {
                    writes.put_keys.push(key);
                    writes.put_values.push(v);
                }
                Write::Delete => writes.deletes.push(key),
                Write::Fields(_) => {
                    return Err(KvError::Engine(
                        "field updates reach the PostgreSQL engine unconverted".into(),
                    ));
                }
            }
        }
        let mut conn = self.pool.get().await?;
        let mut lost = None;
        let only_points = req
            .reads
            .iter()
            .all(|r| matches!(r, ReadCheck::Point { .. }));
        let outcome = if req.writes.is_empty() && only_points {
            // A read-only check of point reads is one statement, and one statement sees
            // one snapshot: no transaction needed.
            match reads_hold(&conn, &req.reads).await {
                Ok(true) => Ok(()),
                Ok(false) => Err(KvError::Conflict),
                Err(e) => Err(e),
            }
        } else {
            writes.notice = (!req.writes.is_empty()).then(|| {
                let payload = encode_change(self.origin, &req, feed::MAX_NOTICE);
                (self.changes_channel(), feed::notice_text(&payload))
            });
            if !req.writes.is_empty() {
                conn.commits += 1;
                let (state, fence) = settle::states(conn.commits)?;
                writes.mark = Some((conn.marker, state, fence));
                lost = Some(settle::LostCommit {
                    marker: conn.marker,
                    n: conn.commits,
                    backend: conn.backend,
                });
            }
            if pipelined::can_pipeline(&req.reads) {
                pipelined::commit_pipelined(&mut conn, &req.reads, &writes).await
            } else {
                commit_on(&mut conn, &req.reads, &writes).await
            }
        };
        if let Err(KvError::Unavailable(why)) = &outcome {
            conn.broken = true;
            // The commit may have been applied: ask, from another connection.
            if let Some(lost) = lost {
                drop(conn);
                return settle::settle(&self.pool, lost, why.clone(), &self.closing).await;
            }
        }
        outcome
    }

    fn begin_closing(&self) {
        self.closing.cancel();
    }

    async fn bulk_writer(&self) -> Result<Option<Box<dyn BulkWriter>>, KvError> {
        Ok(Some(Box::new(
            bulk::start(&self.pool, &self.closing).await?,
        )))
    }

    async fn frozen_view(
        &self,
        readers: usize,
    ) -> Result<Option<std::sync::Arc<dyn FrozenView>>, KvError> {
        Ok(Some(std::sync::Arc::new(
            frozen::open(&self.pool, readers).await?,
        )))
    }

    fn snapshot_isolation(&self) -> bool {
        false
    }

    fn native_field_ops(&self) -> bool {
        // Under SERIALIZABLE, two updates of one row conflict however they are written.
        false
    }

    fn remote(&self) -> bool {
        true
    }

    fn origin(&self) -> u64 {
        // Through a pooler this client follows no feed (it still announces its commits,
        // for clients connected directly).
        if self.pooler { 0 } else { self.origin }
    }

    async fn subscribe(&self) -> Result<Option<Box<dyn ChangeFeed>>, KvError> {
        if self.pooler {
            return Ok(None);
        }
        Ok(Some(Box::new(self.open_feed().await?)))
    }

    async fn send_beat(&self, seq: u64, _barrier: bool) -> Result<(), KvError> {
        self.notify_beat(seq).await
    }
}

/// What a commit writes: upserts, deletes, its announcement (channel, payload) and its
/// commit marker (marker id, state, fence: `settle.rs`).
#[derive(Default)]
pub(crate) struct Writes<'a> {
    put_keys: Vec<&'a [u8]>,
    put_values: Vec<&'a [u8]>,
    deletes: Vec<&'a [u8]>,
    notice: Option<(String, String)>,
    mark: Option<([u8; 16], i64, i64)>,
}

impl Writes<'_> {
    /// Send the upsert, the delete and the announcement together (pipelined).
    async fn apply(&self, conn: &Pooled) -> Result<(), KvError> {
        let upsert = async {
            if self.put_keys.is_empty() {
                return Ok(0);
            }
            timed(conn.execute(Sql::Upsert, &[&self.put_keys, &self.put_values])).await
        };
        let delete = async {
            if self.deletes.is_empty() {
                return Ok(0);
            }
            timed(conn.execute(Sql::Delete, &[&self.deletes])).await
        };
        let announce = async {
            match &self.notice {
                Some((channel, text)) => timed(conn.execute(Sql::Notify, &[channel, text])).await,
                None => Ok(0),
            }
        };
        let mark = async {
            match &self.mark {
                Some((marker, state, fence)) => {
                    timed(conn.query_one(Sql::Mark, &[&&marker[..], state, fence]))
                        .await
                        .map(|_| ())
                }
                None => Ok(()),
            }
        };
        let (u, d, n, m) = futures::future::join4(upsert, delete, announce, mark).await;
        u?;
        d?;
        n?;
        m
    }
}

async fn commit_on(
    conn: &mut Pooled,
    reads: &[ReadCheck],
    writes: &Writes<'_>,
) -> Result<(), KvError> {
    // Until the transaction has ended either way, this connection must not be reused: if
    // this future is dropped on the way, the pool closes the connection instead.
    conn.in_transaction = true;
    timed(
        conn.client
            .batch_execute("BEGIN ISOLATION LEVEL SERIALIZABLE"),
    )
    .await?;
    let result = async {
        if !reads_hold(conn, reads).await? {
            return Err(KvError::Conflict);
        }
        writes.apply(conn).await?;
        timed(conn.client.batch_execute("COMMIT")).await
    }
    .await;
    if result.is_err() {
        // Best effort: a failed COMMIT already ended the transaction; a broken connection
        // is dropped by the pool.
        if timed(conn.client.batch_execute("ROLLBACK")).await.is_err() {
            return result;
        }
    }
    conn.in_transaction = false;
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_conninfo_and_table() {
        let u = PostgresUrl::parse("postgres://u:p@127.0.0.1:5432/db?sslmode=disable&prefix=Vol_1")
            .unwrap();
        assert_eq!(
            u.conninfo.expose(),
            "postgres://u:p@127.0.0.1:5432/db?sslmode=disable"
        );
        assert!(
            !format!("{u:?}").contains(":p@"),
            "the password never prints"
        );
        assert_eq!(u.table(), "strata_vol_1");
        let d = PostgresUrl::parse("postgresql://h/db").unwrap();
        assert_eq!(d.table(), "strata_strata");
        assert!(PostgresUrl::parse("redis://h").is_err());
        assert!(PostgresUrl::parse("postgres://h/db?prefix=a;drop").is_err());
        assert!(!u.pooler);
        let p = PostgresUrl::parse("postgres://u:p@h:6432/db?pooler=transaction&prefix=v").unwrap();
        assert!(p.pooler);
        assert_eq!(p.conninfo.expose(), "postgres://u:p@h:6432/db");
        assert_eq!(p.table(), "strata_v");
        let s = PostgresUrl::parse("postgres://h/db?sslmode=disable&pooler=session").unwrap();
        assert!(!s.pooler);
        assert_eq!(s.conninfo.expose(), "postgres://h/db?sslmode=disable");
        let ha = PostgresUrl::parse(
            "postgres://u:p@h1:5432,h2:5433/db?target_session_attrs=read-write&prefix=v",
        )
        .unwrap();
        assert_eq!(
            ha.conninfo.expose(),
            "postgres://u:p@h1:5432,h2:5433/db?target_session_attrs=read-write",
            "several hosts and the session kind go to the client library as given"
        );
        assert!(PostgresEngine::lazy(&ha).is_ok());
        let bad = PostgresUrl::parse("postgres://u:secret@h/db?pooler=yes").unwrap_err();
        assert!(bad.to_string().contains("pooler"), "{bad}");
        assert!(!bad.to_string().contains("secret"), "{bad}");
    }
}
