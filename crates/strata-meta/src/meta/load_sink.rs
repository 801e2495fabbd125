//! Where a load's batches of records go (JSON and binary loads, `bench populate`): the
//! engine's bulk writer when it has one (PostgreSQL: one `COPY` transaction; SQLite:
//! large transactions of plain inserts and one `fsync`), otherwise commits of blind puts,
//! a bounded number at once (a network engine's round trips overlap).

use std::future::Future;
use std::pin::Pin;

use futures::StreamExt;
use futures::stream::FuturesUnordered;

use super::Meta;
use crate::error::Result;
use crate::kv::{BulkWriter, Key, Value};

type Commit<'m> = Pin<Box<dyn Future<Output = Result<()>> + Send + 'm>>;

/// A load's destination (see the module doc).
pub(super) enum LoadSink<'m> {
    Bulk(Box<dyn BulkWriter>),
    Commits {
        meta: &'m Meta,
        writing: FuturesUnordered<Commit<'m>>,
        in_flight: usize,
    },
}

impl<'m> LoadSink<'m> {
    /// The engine's bulk writer, or commits `in_flight` at once. Call once the engine
    /// was found empty.
    pub(super) async fn open(meta: &'m Meta, in_flight: usize) -> Result<LoadSink<'m>> {
        Ok(match meta.engine.bulk_writer().await? {
            Some(writer) => LoadSink::Bulk(writer),
            None => LoadSink::Commits {
                meta,
                writing: FuturesUnordered::new(),
                in_flight: in_flight.max(1),
            },
        })
    }

    /// Write `batch` (keys no earlier batch had).
    pub(super) async fn put(&mut self, batch: Vec<(Key, Value)>) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        match self {
            LoadSink::Bulk(writer) => Ok(writer.put(batch).await?),
            LoadSink::Commits {
                meta,
                writing,
                in_flight,
            } => {
                if writing.len() >= *in_flight
                    && let Some(done) = writing.next().await
                {
                    done?;
                }
                let meta: &'m Meta = meta;
                writing.push(Box::pin(meta.put_batch(batch)));
                Ok(())
            }
        }
    }

    /// End the load's stream: `read` is how reading the input went. Commits in flight are
    /// all awaited, also after a failure (none is left half done); a bulk writer finishes
    /// only when everything was read, and is dropped (writing nothing) otherwise. The
    /// first error is returned, the input's before the engine's.
    pub(super) async fn finish(self, read: Result<()>) -> Result<()> {
        match self {
            LoadSink::Bulk(writer) => {
                read?;
                Ok(writer.finish().await?)
            }
            LoadSink::Commits { mut writing, .. } => {
                let mut written = Ok(());
                while let Some(done) = writing.next().await {
                    written = written.and(done);
                }
                read?;
                written
            }
        }
    }
}
