//! The engine's SQL text, and what MySQL's errors mean to the transaction layer.
//!
//! Every statement goes by the text protocol with keys and values written as hex
//! literals (`X'6b6579'`): no statement is prepared, so nothing depends on session state
//! beyond the connection's settings, any number of statements go in one round trip
//! (multi-statements), and no byte of user data can change a statement's meaning.

use std::fmt::Write as _;

use strata_meta::kv::{KvError, Link};

/// The most SQL text one write statement carries; several are sent in one round trip.
/// Servers refuse statements above their `max_allowed_packet` (16 MiB by default on
/// MariaDB, 64 MiB on MySQL 8); a value is written in hex, twice its size.
const MAX_STATEMENT: usize = 4 << 20;

/// The commit-marker table of a volume's table. `$` never occurs in a volume's prefix,
/// so no volume's table has this name.
pub(crate) fn markers_table(table: &str) -> String {
    format!("{table}$commits")
}

/// `bytes` as a hex literal.
pub(crate) fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2 + 3);
    push_hex(&mut out, bytes);
    out
}

fn push_hex(out: &mut String, bytes: &[u8]) {
    out.push_str("X'");
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out.push('\'');
}

fn hex_list(keys: &[Vec<u8>]) -> String {
    let mut out = String::new();
    for (i, k) in keys.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_hex(&mut out, k);
    }
    out
}

/// The volume's table and its markers' table, created if missing; old markers dropped.
pub(crate) fn create_tables(table: &str) -> [String; 3] {
    let markers = markers_table(table);
    [
        format!(
            "CREATE TABLE IF NOT EXISTS `{table}` (k VARBINARY(3072) NOT NULL, \
             v LONGBLOB NOT NULL, PRIMARY KEY (k)) ENGINE=InnoDB"
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS `{markers}` (conn BINARY(16) NOT NULL PRIMARY KEY, \
             state BIGINT NOT NULL, at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP) \
             ENGINE=InnoDB"
        ),
        format!("DELETE FROM `{markers}` WHERE at < NOW() - INTERVAL 7 DAY"),
    ]
}

pub(crate) fn get(table: &str, key: &[u8]) -> String {
    format!("SELECT v FROM `{table}` WHERE k = {}", hex(key))
}

/// Rows of `keys` (not empty).
pub(crate) fn get_many(table: &str, keys: &[Vec<u8>]) -> String {
    format!("SELECT k, v FROM `{table}` WHERE k IN ({})", hex_list(keys))
}

/// Lock the rows of `keys` (not empty), and the gaps where absent ones would go.
pub(crate) fn lock_keys(table: &str, keys: &[Vec<u8>]) -> String {
    format!(
        "SELECT k FROM `{table}` WHERE k IN ({}) FOR UPDATE",
        hex_list(keys)
    )
}

/// Rows `start <= k < end`, ordered, at most `limit`.
pub(crate) fn scan(table: &str, start: &[u8], end: &[u8], limit: usize, reverse: bool) -> String {
    format!(
        "SELECT k, v FROM `{table}` WHERE k >= {} AND k < {} ORDER BY k {} LIMIT {limit}",
        hex(start),
        hex(end),
        if reverse { "DESC" } else { "ASC" },
    )
}

/// Lock what [`scan`] reads: its rows and, under REPEATABLE READ, the gaps between them,
/// so no row can appear in the part of the range it covers.
pub(crate) fn lock_range(
    table: &str,
    start: &[u8],
    end: &[u8],
    limit: usize,
    reverse: bool,
) -> String {
    format!(
        "SELECT k FROM `{table}` WHERE k >= {} AND k < {} ORDER BY k {} LIMIT {limit} FOR UPDATE",
        hex(start),
        hex(end),
        if reverse { "DESC" } else { "ASC" },
    )
}

/// The key `prefix || number || suffix`, the number being the little-endian `u64` at byte
/// `offset` of the column `value`, written big-endian (its eight bytes reversed).
fn linked_key(value: &str, offset: usize, prefix: &[u8], suffix: &[u8]) -> String {
    format!(
        "CONCAT({}, REVERSE(SUBSTRING({value}, {}, 8)), {})",
        hex(prefix),
        offset + 1,
        hex(suffix)
    )
}

/// The rows of `keys` and of the keys `link` names from the value of `keys[link.from]`,
/// in one statement (one snapshot).
pub(crate) fn linked(table: &str, keys: &[Vec<u8>], holder: &[u8], link: &Link) -> String {
    let mut sql = format!("SELECT k, v FROM `{table}` WHERE k IN ({})", hex_list(keys));
    for (prefix, suffix) in &link.targets {
        let _ = write!(
            sql,
            " UNION ALL SELECT l.k, l.v FROM `{table}` h JOIN `{table}` l ON l.k = {} \
             WHERE h.k = {} AND LENGTH(h.v) >= {}",
            linked_key("h.v", link.offset, prefix, suffix),
            hex(holder),
            link.offset + 8
        );
    }
    sql
}

/// `keys` (part 0), the page `start <= k < end` (part 1, at most `limit`) and the rows
/// each page row links to (part 2), in one statement: the first column names the part.
pub(crate) fn scan_linked(
    table: &str,
    keys: &[Vec<u8>],
    start: &[u8],
    end: &[u8],
    limit: usize,
    link: &Link,
) -> String {
    let page = format!(
        "(SELECT k, v FROM `{table}` WHERE k >= {} AND k < {} ORDER BY k LIMIT {limit})",
        hex(start),
        hex(end)
    );
    let mut sql = format!("SELECT 1 AS part, p.k, p.v FROM {page} p");
    if !keys.is_empty() {
        let _ = write!(
            sql,
            " UNION ALL SELECT 0, k, v FROM `{table}` WHERE k IN ({})",
            hex_list(keys)
        );
    }
    for (prefix, suffix) in &link.targets {
        let _ = write!(
            sql,
            " UNION ALL SELECT 2, l.k, l.v FROM {page} p JOIN `{table}` l ON l.k = {} \
             WHERE LENGTH(p.v) >= {}",
            linked_key("p.v", link.offset, prefix, suffix),
            link.offset + 8
        );
    }
    sql
}

/// True (as SQL) when `key` no longer holds `value` (`None`: absent). One primary-key
/// lookup; the literal is compared as is (a derived table of literals would cut values
/// longer than 64 KiB to its column's type).
fn value_differs(table: &str, key: &[u8], value: Option<&[u8]>) -> String {
    match value {
        None => format!("EXISTS (SELECT 1 FROM `{table}` WHERE k = {})", hex(key)),
        Some(v) => format!(
            "NOT ({} <=> (SELECT v FROM `{table}` WHERE k = {}))",
            hex(v),
            hex(key)
        ),
    }
}

/// True (as SQL) when a point read no longer returns what it returned: any of `points`
/// (key, value or `None` for absent) differs from the table.
pub(crate) fn points_differ(table: &str, points: &[(&[u8], Option<&[u8]>)]) -> String {
    let each: Vec<String> = points
        .iter()
        .map(|(k, v)| value_differs(table, k, *v))
        .collect();
    each.join(" OR ")
}

/// True (as SQL) when the range read `start..end` (at most `limit`, `reverse`) no longer
/// returns `entries`. Each entry must still hold its value, and the part of the range
/// the read covered must hold no other row: the whole range (capped at `limit`) when the
/// read returned fewer than `limit`, else the range up to its last entry. (Every entry
/// lies in that part, so with as many rows there as entries, they are the rows.)
pub(crate) fn range_differs(
    table: &str,
    start: &[u8],
    end: &[u8],
    limit: usize,
    reverse: bool,
    entries: &[(Vec<u8>, Vec<u8>)],
) -> String {
    let covered = match entries.last() {
        Some((last, _)) if entries.len() >= limit => {
            if reverse {
                format!("k >= {} AND k < {}", hex(last), hex(end))
            } else {
                format!("k >= {} AND k <= {}", hex(start), hex(last))
            }
        }
        _ => format!("k >= {} AND k < {}", hex(start), hex(end)),
    };
    // Counting one row past the entries tells "another number of rows".
    let mut out = format!(
        "(SELECT COUNT(*) FROM (SELECT 1 FROM `{table}` WHERE {covered} LIMIT {}) p) <> {}",
        entries.len() + 1,
        entries.len()
    );
    for (k, v) in entries {
        out.push_str(" OR ");
        out.push_str(&value_differs(table, k, Some(v)));
    }
    out
}

/// A statement that fails with [`CHANGED`] when `differs` (SQL) is true: its subquery
/// then returns two rows where one is allowed.
pub(crate) fn fail_if(differs: &[String]) -> String {
    format!(
        "SET @strata_held = (SELECT 1 UNION ALL SELECT 2 FROM DUAL WHERE {})",
        differs.join(" OR ")
    )
}

/// The error of [`fail_if`] when what it checks is true ("Subquery returns more than 1
/// row").
pub(crate) const CHANGED: u16 = 1242;

/// Upserts of `puts`, as few statements as fit [`MAX_STATEMENT`] each.
pub(crate) fn upserts(table: &str, puts: &[(&[u8], &[u8])]) -> Vec<String> {
    let head = format!("INSERT INTO `{table}` (k, v) VALUES ");
    let tail = " ON DUPLICATE KEY UPDATE v = VALUES(v)";
    let mut out = Vec::new();
    let mut sql = String::new();
    for (k, v) in puts {
        if sql.len() + 2 * (k.len() + v.len()) > MAX_STATEMENT && !sql.is_empty() {
            sql.push_str(tail);
            out.push(std::mem::take(&mut sql));
        }
        sql.push_str(if sql.is_empty() { &head } else { "," });
        sql.push('(');
        push_hex(&mut sql, k);
        sql.push(',');
        push_hex(&mut sql, v);
        sql.push(')');
    }
    if !sql.is_empty() {
        sql.push_str(tail);
        out.push(sql);
    }
    out
}

/// Deletes of `keys`, as few statements as fit [`MAX_STATEMENT`] each.
pub(crate) fn deletes(table: &str, keys: &[&[u8]]) -> Vec<String> {
    let mut out = Vec::new();
    for group in keys.chunks(MAX_STATEMENT / 1024) {
        let list: Vec<Vec<u8>> = group.iter().map(|k| k.to_vec()).collect();
        out.push(format!(
            "DELETE FROM `{table}` WHERE k IN ({})",
            hex_list(&list)
        ));
    }
    out
}

/// Sets a connection's commit marker to `applied` (`settle.rs`), or fails the statement
/// (a NOT NULL column set to NULL, which strict mode refuses) when the marker has reached
/// `fence`: the commit was fenced off and must not apply.
pub(crate) fn mark(table: &str, marker: &[u8; 16], applied: i64, fence: i64) -> String {
    format!(
        "INSERT INTO `{}` (conn, state) VALUES ({}, {applied}) ON DUPLICATE KEY UPDATE \
         state = IF(state < {fence}, {applied}, NULL), at = CURRENT_TIMESTAMP",
        markers_table(table),
        hex(marker)
    )
}

/// The MySQL server error code of a commit marker that was fenced (`mark`).
pub(crate) const FENCED: u16 = 1048;

/// What a MySQL error means: lock conflicts are retried as conflicts, lost connections
/// and a server that is not (or no longer) the writable primary as unavailability.
pub(crate) fn my_error(e: mysql_async::Error) -> KvError {
    use mysql_async::{DriverError, Error};
    match e {
        Error::Server(s) => match s.code {
            // Deadlock, lock wait timeout; TiDB: write conflict, retry limits.
            1213 | 1205 | 9007 | 8002 | 8022 | 8028 => KvError::Conflict,
            1045 | 1698 => KvError::Engine(format!("MySQL: authentication failed: {}", s.message)),
            // Read-only server (a replica, or a primary being switched over); shutdown,
            // connection killed, network errors reported by the server.
            1290 | 1792 | 1836 | 1053 | 1927 | 1152 | 1153 | 1158..=1161 | 2006 | 2013 => {
                KvError::Unavailable(format!("MySQL: {}", s.message))
            }
            _ => KvError::Engine(format!("MySQL: {} (error {})", s.message, s.code)),
        },
        Error::Io(io) => KvError::Unavailable(format!("MySQL: {}", io_text(&io))),
        Error::Driver(DriverError::FromValue { .. } | DriverError::FromRow { .. }) => {
            KvError::Engine("MySQL: a value of an unexpected type".into())
        }
        Error::Driver(d) => KvError::Unavailable(format!("MySQL: {d}")),
        Error::Url(u) => KvError::Engine(format!("MySQL: {u}")),
        Error::Other(o) => KvError::Unavailable(format!("MySQL: {o}")),
    }
}

/// An I/O error's own text (the library's wrappers each add "Input/output error").
pub(crate) fn io_text(io: &mysql_async::IoError) -> String {
    match io {
        mysql_async::IoError::Io(e) => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_are_hex_only() {
        assert_eq!(hex(b""), "X''");
        assert_eq!(hex(b"'; DROP"), "X'273b2044524f50'");
        let sql = lock_keys("strata_v", &[b"a".to_vec(), b"\xff".to_vec()]);
        assert_eq!(
            sql,
            "SELECT k FROM `strata_v` WHERE k IN (X'61',X'ff') FOR UPDATE"
        );
    }

    #[test]
    fn big_writes_split_into_statements() {
        let value = vec![7u8; 900 << 10];
        let puts: Vec<(&[u8], &[u8])> = (0..5).map(|_| (&b"k"[..], &value[..])).collect();
        let sqls = upserts("t", &puts);
        assert_eq!(sqls.len(), 3, "two 1.8 MiB-hex values per statement");
        assert!(sqls.iter().all(|s| s.len() <= MAX_STATEMENT + 200));
        assert!(sqls.iter().all(|s| s.ends_with("VALUES(v)")));
        let keys: Vec<&[u8]> = (0..5000).map(|_| &b"key"[..]).collect();
        assert_eq!(deletes("t", &keys).len(), 2);
    }
}
