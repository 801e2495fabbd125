//! Loads into an empty SQLite volume (`KvEngine::bulk_writer`): rows gathered into
//! transactions of [`CHUNK_ROWS`] plain inserts that wait for no `fsync`, one inserting
//! on a blocking thread while the next is gathered, and one WAL `fsync` at the end.
//! Against commits of the load's batches (a transaction, a savepoint and an `fsync` per
//! 2,000 records, through the commit thread): a million files' 3 M records in 2.2 s
//! instead of 2.5 s, and in 1.4 s when the dump holds them in key order (SQLite then
//! appends instead of seeking; its own `INSERT … SELECT` takes 1.2 s; docs/PERFORMANCE.md,
//! session 36).
//!
//! A load that fails or is dropped half way leaves the chunks already inserted: records
//! without a volume, which `strata load --force` erases, as after commits.

use async_trait::async_trait;
use tokio::task::JoinHandle;

use super::sqlite_writer::SharedWriter;
use super::{BulkWriter, Key, KvError, Value};

/// Rows per transaction (about 2.5 MB of a typical volume's records).
const CHUNK_ROWS: usize = 16_384;

/// A bulk load in progress on one engine's write connection.
pub(super) struct SqliteBulk {
    writer: SharedWriter,
    pending: Vec<Vec<(Key, Value)>>,
    pending_rows: usize,
    inserting: Option<JoinHandle<Result<(), KvError>>>,
}

impl SqliteBulk {
    pub(super) fn new(writer: SharedWriter) -> SqliteBulk {
        SqliteBulk {
            writer,
            pending: Vec::new(),
            pending_rows: 0,
            inserting: None,
        }
    }

    /// Wait for the chunk being inserted, and its outcome.
    async fn wait_inserted(&mut self) -> Result<(), KvError> {
        match self.inserting.take() {
            Some(handle) => handle
                .await
                .map_err(|e| KvError::Engine(format!("sqlite: bulk insert stopped: {e}")))?,
            None => Ok(()),
        }
    }

    /// Insert the rows gathered, once the chunk before them is in.
    async fn insert_pending(&mut self) -> Result<(), KvError> {
        self.wait_inserted().await?;
        let chunk = std::mem::take(&mut self.pending);
        self.pending_rows = 0;
        let writer = self.writer.clone();
        self.inserting = Some(tokio::task::spawn_blocking(move || {
            writer.lock().insert_new(&chunk)
        }));
        Ok(())
    }
}

#[async_trait]
impl BulkWriter for SqliteBulk {
    async fn put(&mut self, rows: Vec<(Key, Value)>) -> Result<(), KvError> {
        self.pending_rows += rows.len();
        self.pending.push(rows);
        if self.pending_rows >= CHUNK_ROWS {
            self.insert_pending().await?;
        }
        Ok(())
    }

    async fn finish(mut self: Box<Self>) -> Result<(), KvError> {
        if !self.pending.is_empty() {
            self.insert_pending().await?;
        }
        self.wait_inserted().await?;
        let writer = self.writer.clone();
        tokio::task::spawn_blocking(move || writer.lock().sync())
            .await
            .map_err(|e| KvError::Engine(format!("sqlite: final sync stopped: {e}")))?
    }
}

#[cfg(test)]
mod tests {
    use crate::kv::KvEngine;
    use crate::kv::sqlite::SqliteEngine;

    fn key(i: u32) -> Vec<u8> {
        format!("k{i:08}").into_bytes()
    }

    #[tokio::test]
    async fn rows_in_any_order_over_several_chunks_all_land() {
        let dir = tempfile::tempdir().unwrap();
        let engine = SqliteEngine::open(dir.path().join("m.db")).unwrap();
        let mut writer = engine.bulk_writer().await.unwrap().expect("a bulk writer");
        let total = u32::try_from(super::CHUNK_ROWS * 2 + 300).unwrap();
        // Batches from two interleaved streams, as an old dump's scans wrote them.
        let (low, high): (Vec<u32>, Vec<u32>) = (0..total).partition(|i| *i < total / 2);
        for (a, b) in low.chunks(1000).zip(high.chunks(1000)) {
            for part in [a, b] {
                let rows = part.iter().map(|i| (key(*i), i.to_le_bytes().to_vec()));
                writer.put(rows.collect()).await.unwrap();
            }
        }
        writer.finish().await.unwrap();
        let mut snap = engine.snapshot().await.unwrap();
        let all = snap.scan(b"k", b"l", usize::MAX, false).await.unwrap();
        assert_eq!(all.len(), usize::try_from(total).unwrap());
        for (i, (k, v)) in (0..total).zip(&all) {
            assert_eq!((k, v), (&key(i), &i.to_le_bytes().to_vec()));
        }
    }

    #[tokio::test]
    async fn a_repeated_key_fails_the_load_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let engine = SqliteEngine::open(dir.path().join("m.db")).unwrap();
        let mut writer = engine.bulk_writer().await.unwrap().expect("a bulk writer");
        writer.put(vec![(key(1), b"a".to_vec())]).await.unwrap();
        writer.put(vec![(key(1), b"b".to_vec())]).await.unwrap();
        let err = writer.finish().await.unwrap_err();
        assert!(err.to_string().contains("repeat a key"), "{err}");
        let mut snap = engine.snapshot().await.unwrap();
        assert_eq!(
            snap.get(&key(1)).await.unwrap(),
            None,
            "the chunk rolled back"
        );
    }
}
