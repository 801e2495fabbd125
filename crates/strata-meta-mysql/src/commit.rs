//! A commit on MySQL: validate the transaction's reads with locking reads, apply its
//! writes, set the connection's commit marker, `COMMIT` — in at most two round trips.
//!
//! - Writes without reads: one batch, `START TRANSACTION; writes; marker; COMMIT`.
//! - Writes with reads: first `START TRANSACTION; SELECT ... FOR UPDATE` (each read once
//!   more, locking what it returns and, under REPEATABLE READ, the gaps of the ranges, so
//!   nothing it read can change or appear until the commit ends); if every read still
//!   holds, the write batch as above, else `ROLLBACK` and a conflict.
//! - Reads only: one batch of plain reads inside `START TRANSACTION WITH CONSISTENT
//!   SNAPSHOT, READ ONLY` (one snapshot for all of them), or one statement for point
//!   reads alone.
//!
//! InnoDB reports a cycle of lock waits as a deadlock (1213) and a long wait as a lock
//! wait timeout (1205): both become `KvError::Conflict`, retried by the transaction layer.
//! A lost answer to the write batch is settled (`settle.rs`); a lost answer before it
//! cannot have committed anything (no `COMMIT` was sent) and is retried as is.

use std::collections::HashMap;

use mysql_async::Row;
use strata_meta::kv::{CommitRequest, Key, KvError, ReadCheck, Value, Write};

use crate::pool::{Pooled, RunFailure};
use crate::settle::{self, LostCommit};
use crate::sql::{self, CHANGED, FENCED};
use crate::{MysqlEngine, pairs};

impl MysqlEngine {
    pub(crate) async fn commit_request(&self, req: CommitRequest) -> Result<(), KvError> {
        if req.writes.is_empty() && req.reads.is_empty() {
            return Ok(());
        }
        let mut puts: Vec<(&[u8], &[u8])> = Vec::new();
        let mut deletes: Vec<&[u8]> = Vec::new();
        for (key, write) in &req.writes {
            match write {
                Write::Put(v) => puts.push((key, v)),
                Write::Delete => deletes.push(key),
                Write::Fields(_) => {
                    return Err(KvError::Engine(
                        "field updates reach the MySQL engine unconverted".into(),
                    ));
                }
            }
        }
        let mut conn = self.pool.get().await?;
        if req.writes.is_empty() {
            return check_reads_only(&mut conn, self.pool.table(), &req.reads).await;
        }
        let table = self.pool.table();
        let mut batch: Vec<String> = vec!["START TRANSACTION".into()];
        let check_at = if req.reads.is_empty() {
            None
        } else {
            let Some(check) = check_statements(table, &req.reads) else {
                return Err(KvError::Conflict);
            };
            batch.extend(check);
            Some(batch.len() - 1)
        };
        batch.extend(sql::upserts(table, &puts));
        batch.extend(sql::deletes(table, &deletes));
        conn.commits += 1;
        let (applied, fence) = settle::states(conn.commits)?;
        let lost = LostCommit {
            marker: conn.marker,
            n: conn.commits,
            conn_id: conn.id(),
        };
        let mark_at = batch.len();
        batch.push(sql::mark(table, &conn.marker, applied, fence));
        batch.push("COMMIT".into());
        conn.in_transaction = true;
        match conn.run_failing(&batch.join("; ")).await {
            Ok(_) => {
                conn.in_transaction = false;
                Ok(())
            }
            Err(RunFailure {
                error: KvError::Unavailable(why),
                ..
            }) => {
                // The commit may have been applied: ask, from another connection.
                conn.broken = true;
                drop(conn);
                settle::settle(&self.pool, lost, why, &self.closing).await
            }
            Err(RunFailure { at, code, error }) => {
                rollback(&mut conn).await;
                if Some(at) == check_at && code == Some(CHANGED) {
                    return Err(KvError::Conflict);
                }
                if at == mark_at && code == Some(FENCED) {
                    return Err(KvError::Engine(
                        "MySQL: the commit was fenced off by a settlement".into(),
                    ));
                }
                Err(error)
            }
        }
    }
}

/// The statements that lock what `reads` read (the rows, and under REPEATABLE READ the
/// gaps of the ranges: nothing can change or appear there until the commit ends), then
/// fail with [`CHANGED`] if any read no longer returns what it returned. The check reads
/// without locks: its snapshot is taken then, after the locks, so it sees what they
/// hold. `None` when a read cannot hold (a range that cannot have rows returned some).
fn check_statements(table: &str, reads: &[ReadCheck]) -> Option<Vec<String>> {
    let mut statements = Vec::new();
    let mut differs = Vec::new();
    let mut points: Vec<(&[u8], Option<&[u8]>)> = Vec::new();
    for read in reads {
        match read {
            ReadCheck::Point { key, value } => points.push((key, value.as_deref())),
            ReadCheck::Range {
                start,
                end,
                limit,
                reverse,
                entries,
            } => {
                if start >= end || *limit == 0 {
                    if entries.is_empty() {
                        continue;
                    }
                    return None;
                }
                statements.push(sql::lock_range(table, start, end, *limit, *reverse));
                differs.push(sql::range_differs(
                    table, start, end, *limit, *reverse, entries,
                ));
            }
        }
    }
    if !points.is_empty() {
        let keys: Vec<Key> = points.iter().map(|(k, _)| k.to_vec()).collect();
        statements.insert(0, sql::lock_keys(table, &keys));
        differs.insert(0, sql::points_differ(table, &points));
    }
    if differs.is_empty() {
        return Some(statements);
    }
    statements.push(sql::fail_if(&differs));
    Some(statements)
}

/// Whether `reads` still hold, read from one snapshot, without locks.
async fn check_reads_only(
    conn: &mut Pooled,
    table: &str,
    reads: &[ReadCheck],
) -> Result<(), KvError> {
    let checks = Checks::of(table, reads);
    let held = if checks.sql.is_empty() {
        checks.hold(std::iter::empty())?
    } else if checks.sql.len() == 1 {
        // One statement sees one snapshot.
        let sets = conn.run(&checks.sql[0]).await?;
        checks.hold(sets.into_iter())?
    } else {
        conn.in_transaction = true;
        let sql = format!(
            "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY; {}; COMMIT",
            checks.sql.join("; ")
        );
        let sets = conn.run(&sql).await?;
        conn.in_transaction = false;
        checks.hold(sets.into_iter().skip(1))?
    };
    if held { Ok(()) } else { Err(KvError::Conflict) }
}

/// `ROLLBACK`, best effort: a connection it fails on is not reused.
async fn rollback(conn: &mut Pooled) {
    if conn.run("ROLLBACK").await.is_ok() {
        conn.in_transaction = false;
    }
}

/// The statements that re-read a transaction's reads: all point reads in one (when
/// there are any), then one per range read; and what each must return.
struct Checks<'a> {
    sql: Vec<String>,
    points: Vec<(&'a Key, &'a Option<Value>)>,
    /// Each range read: whether a statement re-reads it (an empty range or a limit of 0
    /// was read as nothing and stays so), and what it returned.
    ranges: Vec<(bool, &'a Vec<(Key, Value)>)>,
}

impl<'a> Checks<'a> {
    fn of(table: &str, reads: &'a [ReadCheck]) -> Checks<'a> {
        let mut checks = Checks {
            sql: Vec::new(),
            points: Vec::new(),
            ranges: Vec::new(),
        };
        for read in reads {
            match read {
                ReadCheck::Point { key, value } => checks.points.push((key, value)),
                ReadCheck::Range {
                    start,
                    end,
                    limit,
                    reverse,
                    entries,
                } => {
                    let asked = start < end && *limit > 0;
                    if asked {
                        checks
                            .sql
                            .push(sql::scan(table, start, end, *limit, *reverse));
                    }
                    checks.ranges.push((asked, entries));
                }
            }
        }
        if !checks.points.is_empty() {
            let keys: Vec<Key> = checks.points.iter().map(|(k, _)| (*k).clone()).collect();
            checks.sql.insert(0, sql::get_many(table, &keys));
        }
        checks
    }

    /// Whether the result sets (one per statement of [`Checks::sql`], in order) show the
    /// same as was read.
    fn hold(&self, mut sets: impl Iterator<Item = Vec<Row>>) -> Result<bool, KvError> {
        if !self.points.is_empty() {
            let rows = sets.next().ok_or_else(short_answer)?;
            let found: HashMap<Key, Value> = pairs(rows)?.into_iter().collect();
            if self.points.iter().any(|(k, v)| found.get(*k) != v.as_ref()) {
                return Ok(false);
            }
        }
        for (asked, entries) in &self.ranges {
            let now = if *asked {
                pairs(sets.next().ok_or_else(short_answer)?)?
            } else {
                Vec::new()
            };
            if now != **entries {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

fn short_answer() -> KvError {
    KvError::Unavailable("MySQL: fewer result sets than statements".into())
}
