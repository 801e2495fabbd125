//! The engine's statements and how a connection runs them: prepared once per connection
//! when it talks to PostgreSQL itself, or sent as unnamed statements with their parameter
//! types (`Parse`, `Bind`, `Execute` and `Sync` together, one round trip) through a
//! transaction pooler such as PgBouncer (`?pooler=transaction`), where consecutive
//! statements may run on different server connections and a statement prepared on one
//! does not exist on the next.

use std::sync::Arc;

use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Client, Error, Row, Statement};

use strata_meta::kv::KvError;

/// One of the engine's statements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sql {
    /// `$1` key: its value.
    Get,
    /// `$1` keys: their rows.
    GetMany,
    /// `$1` keys, `$2` the key holding a little-endian `u64` at byte `$3` (0-based), `$4`
    /// and `$5` prefixes and suffixes: the rows of the keys and of `prefix || number
    /// big-endian || suffix`, in one statement (one snapshot).
    Linked,
    /// `$1` keys, rows `$2 <= k < $3` (at most `$4`), and the rows each of those links
    /// to (number at byte `$5`, `$6`/`$7` prefixes and suffixes), in one statement: each
    /// row's first column says which part it is (0 keys, 1 range, 2 linked).
    ScanLinked,
    ScanAsc,
    ScanDesc,
    Upsert,
    Delete,
    /// `pg_notify($1, $2)`: a change announcement or a beat.
    Notify,
    /// The check of a pipelined commit (`pipelined.rs`).
    CheckPoints,
    /// Sets this connection's commit marker (`settle.rs`): `$1` the connection's marker
    /// id, `$2` the commit's state, `$3` its fence; divides by zero (aborting the
    /// transaction) when the commit was fenced off.
    Mark,
}

const BYTEA_ARRAY: Type = Type::BYTEA_ARRAY;

impl Sql {
    pub(crate) const COUNT: usize = 11;
    const ALL: [Sql; Sql::COUNT] = [
        Sql::Get,
        Sql::GetMany,
        Sql::Linked,
        Sql::ScanLinked,
        Sql::ScanAsc,
        Sql::ScanDesc,
        Sql::Upsert,
        Sql::Delete,
        Sql::Notify,
        Sql::CheckPoints,
        Sql::Mark,
    ];

    /// Its place in [`Sql::ALL`].
    const fn index(self) -> usize {
        match self {
            Sql::Get => 0,
            Sql::GetMany => 1,
            Sql::Linked => 2,
            Sql::ScanLinked => 3,
            Sql::ScanAsc => 4,
            Sql::ScanDesc => 5,
            Sql::Upsert => 6,
            Sql::Delete => 7,
            Sql::Notify => 8,
            Sql::CheckPoints => 9,
            Sql::Mark => 10,
        }
    }

    /// Its text for the volume's `table`.
    fn text(self, table: &str) -> String {
        use crate::sql::{check_points_sql, linked_sql, mark_sql, scan_linked_sql};
        match self {
            Sql::Get => format!("SELECT v FROM {table} WHERE k = $1"),
            Sql::GetMany => format!("SELECT k, v FROM {table} WHERE k = ANY($1)"),
            Sql::Linked => linked_sql(table),
            Sql::ScanLinked => scan_linked_sql(table),
            Sql::ScanAsc => {
                format!("SELECT k, v FROM {table} WHERE k >= $1 AND k < $2 ORDER BY k LIMIT $3")
            }
            Sql::ScanDesc => format!(
                "SELECT k, v FROM {table} WHERE k >= $1 AND k < $2 ORDER BY k DESC LIMIT $3"
            ),
            Sql::Upsert => format!(
                "INSERT INTO {table} (k, v) SELECT * FROM UNNEST($1::bytea[], $2::bytea[]) \
                 ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v"
            ),
            Sql::Delete => format!("DELETE FROM {table} WHERE k = ANY($1)"),
            Sql::Notify => "SELECT pg_notify($1, $2)".to_string(),
            Sql::CheckPoints => check_points_sql(table),
            Sql::Mark => mark_sql(table),
        }
    }

    /// Its parameters' types (what an unnamed statement must state).
    fn types(self) -> &'static [Type] {
        match self {
            Sql::Get => &[Type::BYTEA],
            Sql::GetMany | Sql::Delete => &[BYTEA_ARRAY],
            Sql::Linked => &[
                BYTEA_ARRAY,
                Type::BYTEA,
                Type::INT4,
                BYTEA_ARRAY,
                BYTEA_ARRAY,
            ],
            Sql::ScanLinked => &[
                BYTEA_ARRAY,
                Type::BYTEA,
                Type::BYTEA,
                Type::INT8,
                Type::INT4,
                BYTEA_ARRAY,
                BYTEA_ARRAY,
            ],
            Sql::ScanAsc | Sql::ScanDesc => &[Type::BYTEA, Type::BYTEA, Type::INT8],
            Sql::Upsert => &[BYTEA_ARRAY, BYTEA_ARRAY],
            Sql::Notify => &[Type::TEXT, Type::TEXT],
            Sql::CheckPoints => &[BYTEA_ARRAY, BYTEA_ARRAY, Type::BOOL_ARRAY],
            Sql::Mark => &[Type::BYTEA, Type::INT8, Type::INT8],
        }
    }
}

/// How one connection runs the statements.
pub(crate) enum Statements {
    /// Prepared on this connection, in [`Sql::ALL`] order.
    Prepared(Box<[Statement; Sql::COUNT]>),
    /// Sent unnamed each time (through a transaction pooler); the texts in [`Sql::ALL`]
    /// order, shared by the pool's connections.
    Unnamed(Arc<[String; Sql::COUNT]>),
}

impl Statements {
    /// Every statement prepared on `client`.
    pub async fn prepare(client: &Client, table: &str) -> Result<Statements, KvError> {
        let mut prepared = Vec::with_capacity(Sql::COUNT);
        for sql in Sql::ALL {
            prepared.push(
                client
                    .prepare_typed(&sql.text(table), sql.types())
                    .await
                    .map_err(crate::pg_error)?,
            );
        }
        let prepared = <[Statement; Sql::COUNT]>::try_from(prepared)
            .map_err(|_| KvError::Engine("PostgreSQL: statements not all prepared".into()))?;
        Ok(Statements::Prepared(Box::new(prepared)))
    }

    /// The texts of every statement, for [`Statements::Unnamed`].
    pub fn texts(table: &str) -> Arc<[String; Sql::COUNT]> {
        Arc::new(Sql::ALL.map(|s| s.text(table)))
    }
}

pub(crate) type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

fn typed<'a>(sql: Sql, params: Params<'a>) -> Vec<(&'a (dyn ToSql + Sync), Type)> {
    params
        .iter()
        .zip(sql.types())
        .map(|(p, t)| (*p, t.clone()))
        .collect()
}

impl Statements {
    /// The rows `sql` returns, run on `client`.
    pub async fn query(
        &self,
        client: &Client,
        sql: Sql,
        params: Params<'_>,
    ) -> Result<Vec<Row>, Error> {
        match self {
            Statements::Prepared(p) => client.query(&p[sql.index()], params).await,
            Statements::Unnamed(texts) => {
                client
                    .query_typed(&texts[sql.index()], &typed(sql, params))
                    .await
            }
        }
    }

    /// The one row `sql` returns (an error when it returns none or several).
    pub async fn query_one(
        &self,
        client: &Client,
        sql: Sql,
        params: Params<'_>,
    ) -> Result<Row, Error> {
        match self {
            Statements::Prepared(p) => client.query_one(&p[sql.index()], params).await,
            Statements::Unnamed(texts) => {
                client
                    .query_typed_one(&texts[sql.index()], &typed(sql, params))
                    .await
            }
        }
    }

    /// The row `sql` returns, if any.
    pub async fn query_opt(
        &self,
        client: &Client,
        sql: Sql,
        params: Params<'_>,
    ) -> Result<Option<Row>, Error> {
        match self {
            Statements::Prepared(p) => client.query_opt(&p[sql.index()], params).await,
            Statements::Unnamed(texts) => {
                client
                    .query_typed_opt(&texts[sql.index()], &typed(sql, params))
                    .await
            }
        }
    }

    /// Run `sql`; the number of rows it changed.
    pub async fn execute(
        &self,
        client: &Client,
        sql: Sql,
        params: Params<'_>,
    ) -> Result<u64, Error> {
        match self {
            Statements::Prepared(p) => client.execute(&p[sql.index()], params).await,
            Statements::Unnamed(texts) => {
                client
                    .execute_typed(&texts[sql.index()], &typed(sql, params))
                    .await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_statement_has_its_place_and_its_types() {
        for (i, sql) in Sql::ALL.iter().enumerate() {
            assert_eq!(sql.index(), i, "{sql:?}");
            let text = sql.text("strata_t");
            let highest = (1..=9).rev().find(|n| text.contains(&format!("${n}")));
            assert_eq!(highest, Some(sql.types().len()), "{sql:?}: {text}");
        }
    }
}
