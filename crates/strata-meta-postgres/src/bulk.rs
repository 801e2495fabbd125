//! Loading into an empty volume's table by `COPY`, as `pg_restore` does: rows first, the
//! primary key after.
//!
//! One transaction: it locks the table, checks that it is still empty, drops the
//! primary-key constraint, streams every row in `COPY … FROM STDIN (FORMAT binary)`, adds
//! the constraint back (one sorted index build instead of an index insert per row; rows
//! that repeat a key fail it) and commits with the connection's commit marker set, so a
//! lost answer is settled as any commit's is (`settle.rs`). Until it commits nobody sees
//! a row, and a load that fails or is dropped half way leaves the table as it was, with
//! its primary key: PostgreSQL rolls the `ALTER TABLE`s back with the rest.
//!
//! Measured (docs/PERFORMANCE.md, session 36): 3 M records copied by the server into an
//! indexed table took 3.3 s, into a bare one plus the index build 2.2 s; an upsert of
//! them, what commits do, 9.5 s.

use std::pin::Pin;

use async_trait::async_trait;
use bytes::{BufMut, Bytes, BytesMut};
use futures::SinkExt;
use strata_meta::kv::{BulkWriter, Key, KvError, Value};
use tokio_postgres::CopyInSink;
use tokio_postgres::error::SqlState;
use tokio_util::sync::CancellationToken;

use crate::pool::{Pool, Pooled};
use crate::stmt::Sql;
use crate::{pg_error, settle, timed};

/// The binary `COPY` stream's header: signature, flags, header extension length.
const COPY_HEADER: &[u8] = b"PGCOPY\n\xff\r\n\0\0\0\0\0\0\0\0\0";
/// Memory the index build may use (the server's default is 64 MB, which makes it sort
/// on disk beyond a few million rows); for this transaction only.
const INDEX_BUILD_MEMORY: &str = "256MB";

/// A load in progress on one connection (see the module doc).
pub(crate) struct CopyLoad {
    conn: Pooled,
    sink: Pin<Box<CopyInSink<Bytes>>>,
    buf: BytesMut,
    table: String,
    /// The primary-key constraint's name, to add it back as it was.
    pkey: String,
    pool: Pool,
    closing: CancellationToken,
}

/// An identifier quoted for SQL.
fn quoted(ident: &str) -> String {
    format!("\"{}\"", ident.replace('"', "\"\""))
}

/// Begin a load into `pool`'s table, which must hold no rows.
pub(crate) async fn start(pool: &Pool, closing: &CancellationToken) -> Result<CopyLoad, KvError> {
    let mut conn = pool.get().await?;
    let table = pool.table().to_string();
    // Until COMMIT or ROLLBACK answers, a connection dropped on the way is closed (and its
    // transaction rolled back by the server), never reused.
    conn.in_transaction = true;
    timed(conn.client.batch_execute(&format!(
        "BEGIN; LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE; \
         SET LOCAL maintenance_work_mem = '{INDEX_BUILD_MEMORY}'"
    )))
    .await?;
    let rows = timed(
        conn.client
            .simple_query(&format!("SELECT 1 FROM {table} LIMIT 1")),
    )
    .await?;
    if rows
        .iter()
        .any(|m| matches!(m, tokio_postgres::SimpleQueryMessage::Row(_)))
    {
        return Err(KvError::Engine(format!(
            "PostgreSQL: table {table} already holds rows; a load needs an empty volume"
        )));
    }
    let pkey = primary_key_name(&conn, &table).await?;
    timed(conn.client.batch_execute(&format!(
        "ALTER TABLE {table} DROP CONSTRAINT {}",
        quoted(&pkey)
    )))
    .await?;
    let sink = timed(
        conn.client
            .copy_in::<_, Bytes>(&format!("COPY {table} (k, v) FROM STDIN (FORMAT binary)")),
    )
    .await?;
    let mut buf = BytesMut::with_capacity(256 * 1024);
    buf.put_slice(COPY_HEADER);
    Ok(CopyLoad {
        conn,
        sink: Box::pin(sink),
        buf,
        table,
        pkey,
        pool: pool.clone(),
        closing: closing.clone(),
    })
}

/// The name of `table`'s primary-key constraint.
async fn primary_key_name(conn: &Pooled, table: &str) -> Result<String, KvError> {
    let sql = format!(
        "SELECT conname FROM pg_constraint WHERE conrelid = '{table}'::regclass AND contype = 'p'"
    );
    let messages = timed(conn.client.simple_query(&sql)).await?;
    messages
        .iter()
        .find_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_string),
            _ => None,
        })
        .ok_or_else(|| {
            KvError::Engine(format!(
                "PostgreSQL: table {table} has no primary key (it was made by another program?)"
            ))
        })
}

/// Append one row to a binary `COPY` stream: two fields, each a length and its bytes.
fn encode_row(buf: &mut BytesMut, key: &[u8], value: &[u8]) -> Result<(), KvError> {
    let len = |field: &[u8]| {
        i32::try_from(field.len())
            .map_err(|_| KvError::Engine(format!("a field of {} bytes is too long", field.len())))
    };
    buf.put_i16(2);
    buf.put_i32(len(key)?);
    buf.put_slice(key);
    buf.put_i32(len(value)?);
    buf.put_slice(value);
    Ok(())
}

#[async_trait]
impl BulkWriter for CopyLoad {
    async fn put(&mut self, rows: Vec<(Key, Value)>) -> Result<(), KvError> {
        for (key, value) in &rows {
            encode_row(&mut self.buf, key, value)?;
        }
        let chunk = self.buf.split().freeze();
        timed(self.sink.send(chunk)).await
    }

    async fn finish(mut self: Box<Self>) -> Result<(), KvError> {
        // The trailer: a field count of -1.
        self.buf.put_i16(-1);
        let chunk = self.buf.split().freeze();
        timed(self.sink.send(chunk)).await?;
        timed(self.sink.as_mut().finish()).await?;
        let add_key = format!(
            "ALTER TABLE {} ADD CONSTRAINT {} PRIMARY KEY (k)",
            self.table,
            quoted(&self.pkey)
        );
        // No statement timeout here: the index build takes as long as the rows need
        // (minutes at a hundred million); a broken connection still ends it.
        self.conn
            .client
            .batch_execute(&add_key)
            .await
            .map_err(|e| match e.code() {
                Some(c) if *c == SqlState::UNIQUE_VIOLATION => KvError::Engine(format!(
                    "PostgreSQL: the rows loaded repeat a key, nothing was loaded ({e})"
                )),
                _ => pg_error(e),
            })?;
        self.commit().await
    }
}

impl CopyLoad {
    /// Set the commit marker and commit; a lost answer is settled.
    async fn commit(mut self: Box<Self>) -> Result<(), KvError> {
        self.conn.commits += 1;
        let (state, fence) = settle::states(self.conn.commits)?;
        let lost = settle::LostCommit {
            marker: self.conn.marker,
            n: self.conn.commits,
            backend: self.conn.backend,
        };
        let marker = self.conn.marker;
        let outcome = async {
            timed(
                self.conn
                    .query_one(Sql::Mark, &[&&marker[..], &state, &fence]),
            )
            .await?;
            timed(self.conn.client.batch_execute("COMMIT")).await
        }
        .await;
        match outcome {
            Ok(()) => {
                self.conn.in_transaction = false;
                Ok(())
            }
            Err(KvError::Unavailable(why)) => {
                self.conn.broken = true;
                let CopyLoad { pool, closing, .. } = *self;
                settle::settle(&pool, lost, why, &closing).await
            }
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_encoded_as_binary_copy_fields() {
        let mut buf = BytesMut::new();
        encode_row(&mut buf, b"ab", b"xyz").unwrap();
        assert_eq!(
            &buf[..],
            b"\x00\x02\x00\x00\x00\x02ab\x00\x00\x00\x03xyz",
            "field count, then each field's length and bytes"
        );
        assert_eq!(
            COPY_HEADER.len(),
            19,
            "signature (11), flags (4), extension (4)"
        );
    }
}
