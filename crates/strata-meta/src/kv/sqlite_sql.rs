//! The SQL both sides of the SQLite engine run ([`super::sqlite`] reads,
//! [`super::sqlite_writer`] commits): reads of the `kv` table and what a SQLite error means
//! to a caller (locked: try again; anything else: an engine error), and how long a
//! connection waits for another's lock.

use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, params};

use super::{Key, KvError, Value};

/// How long to wait for another process's write lock before reporting the engine busy.
pub(super) const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// A SQLite error as a [`KvError`]: a locked database is unavailable for now.
pub(super) fn sql_err(e: rusqlite::Error) -> KvError {
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
            KvError::Unavailable(format!("sqlite database is locked: {e}"))
        }
        _ => KvError::Engine(format!("sqlite: {e}")),
    }
}

/// The value at `key`.
pub(super) fn get(conn: &Connection, key: &[u8]) -> Result<Option<Value>, KvError> {
    let mut stmt = conn
        .prepare_cached("SELECT v FROM kv WHERE k = ?1")
        .map_err(sql_err)?;
    stmt.query_row(params![key], |row| row.get::<_, Vec<u8>>(0))
        .optional()
        .map_err(sql_err)
}

/// Up to `limit` pairs with keys in `[start, end)`, in key order (descending when `reverse`).
pub(super) fn scan(
    conn: &Connection,
    start: &[u8],
    end: &[u8],
    limit: usize,
    reverse: bool,
) -> Result<Vec<(Key, Value)>, KvError> {
    let sql = if reverse {
        "SELECT k, v FROM kv WHERE k >= ?1 AND k < ?2 ORDER BY k DESC LIMIT ?3"
    } else {
        "SELECT k, v FROM kv WHERE k >= ?1 AND k < ?2 ORDER BY k ASC LIMIT ?3"
    };
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut stmt = conn.prepare_cached(sql).map_err(sql_err)?;
    let rows = stmt
        .query_map(params![start, end, limit], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })
        .map_err(sql_err)?;
    rows.collect::<Result<Vec<_>, _>>().map_err(sql_err)
}
