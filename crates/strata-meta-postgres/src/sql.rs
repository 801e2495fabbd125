//! The SQL of the commit path that more than one module needs: the commit-marker table
//! and its update ([`crate::settle`] reads the markers, every pooled connection prepares
//! the update), the check of a pipelined commit's reads ([`crate::pipelined`]), and
//! which server process runs a connection (asked when a connection is opened, used to end
//! it when a commit's answer is lost).

use strata_meta::kv::{KvError, within};
use tokio_postgres::Client;

use crate::{QUERY_TIMEOUT, pg_error};

/// The commit-marker table of a volume's table. `$` never occurs in a volume's prefix,
/// so no volume's table has this name.
pub(crate) fn markers_table(table: &str) -> String {
    format!("{table}$commits")
}

/// See [`crate::stmt::Sql::Mark`].
pub(crate) fn mark_sql(table: &str) -> String {
    let markers = markers_table(table);
    format!(
        "WITH m AS (INSERT INTO {markers} (conn, state, at) VALUES ($1, $2, now()) \
           ON CONFLICT (conn) DO UPDATE SET state = EXCLUDED.state, at = EXCLUDED.at \
           WHERE {markers}.state < $3 RETURNING 1) \
         SELECT 1 / (SELECT count(*)::int FROM m)"
    )
}

/// `$1` keys, `$2` values, `$3` whether each was present: 0 when every read still holds,
/// a division by zero otherwise.
pub(crate) fn check_points_sql(table: &str) -> String {
    format!(
        "SELECT CASE WHEN m.bad = 0 THEN 0 ELSE 1 / (m.bad - m.bad) END FROM ( \
           SELECT count(*)::int AS bad FROM UNNEST($1::bytea[], $2::bytea[], $3::bool[]) \
             AS r(k, v, present) LEFT JOIN {table} t ON t.k = r.k \
           WHERE (r.present AND (t.v IS NULL OR t.v <> r.v)) \
              OR (NOT r.present AND t.k IS NOT NULL)) m"
    )
}

/// The pid and start time (µs since the epoch) of the server process of `client`.
pub(crate) async fn backend_of(client: &Client) -> Result<Option<(i32, i64)>, KvError> {
    let row = within(QUERY_TIMEOUT, "PostgreSQL", async {
        client
            .query_opt(
                "SELECT pid, (extract(epoch FROM backend_start) * 1000000)::int8 \
                 FROM pg_stat_activity WHERE pid = pg_backend_pid()",
                &[],
            )
            .await
            .map_err(pg_error)
    })
    .await?;
    Ok(match row {
        Some(r) => Some((
            r.try_get(0).map_err(pg_error)?,
            r.try_get(1).map_err(pg_error)?,
        )),
        None => None,
    })
}

/// See [`crate::stmt::Sql::ScanLinked`]: a page of readdirplus (the directory, its entries and
/// their inodes) in one statement, so one snapshot and one round trip.
pub(crate) fn scan_linked_sql(table: &str) -> String {
    let number = big_endian_number("page.v", "$5");
    format!(
        "WITH page AS (SELECT k, v FROM {table} WHERE k >= $2 AND k < $3 ORDER BY k LIMIT $4) \
         SELECT 0::int2, k, v FROM {table} WHERE k = ANY($1::bytea[]) \
         UNION ALL SELECT 1::int2, k, v FROM page \
         UNION ALL SELECT 2::int2, k, v FROM {table} WHERE k = ANY(ARRAY( \
           SELECT u.p || {number} || u.s FROM page, \
             UNNEST($6::bytea[], $7::bytea[]) AS u(p, s) \
           WHERE length(page.v) >= $5::int + 8))"
    )
}

/// See [`crate::stmt::Sql::Linked`]: one index scan for the keys and the linked keys, which a
/// sub-select computes from the holder's value (its number's eight bytes reversed one by
/// one: bytea has no reverse).
pub(crate) fn linked_sql(table: &str) -> String {
    let number = big_endian_number("v", "$3");
    format!(
        "SELECT k, v FROM {table} WHERE k = ANY($1::bytea[] || ARRAY( \
           SELECT u.p || h.n || u.s FROM \
             (SELECT {number} AS n FROM {table} WHERE k = $2 AND length(v) >= $3::int + 8) h, \
             UNNEST($4::bytea[], $5::bytea[]) AS u(p, s)))"
    )
}

/// SQL for the little-endian `u64` in `value` at the byte offset in parameter `offset`
/// (0-based), as eight big-endian bytes: its bytes one by one in reverse (bytea has no
/// reverse).
fn big_endian_number(value: &str, offset: &str) -> String {
    (1..=8)
        .rev()
        .map(|i| format!("substring({value} from {offset}::int + {i} for 1)"))
        .collect::<Vec<_>>()
        .join(" || ")
}
