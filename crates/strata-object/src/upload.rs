//! Objects written piece by piece ([`Upload`]): what copies of big files (`strata sync`)
//! use so that a 4 GiB object never sits in memory. S3 stores send the pieces as a
//! multipart upload; stores and wrappers that need the whole object (compression,
//! checksums) collect the pieces and put them at the end ([`BufferedUpload`]).

use async_trait::async_trait;
use bytes::Bytes;

use crate::{ObjectStore, Result};

/// An object being written: nothing is visible under its key until [`finish`] returns,
/// and an aborted or dropped upload leaves nothing a listing shows.
///
/// [`finish`]: Upload::finish
#[async_trait]
pub trait Upload: Send {
    /// Append `data` to the object.
    async fn write(&mut self, data: Bytes) -> Result<()>;
    /// Make the object visible with every byte written.
    async fn finish(self: Box<Self>) -> Result<()>;
    /// Give the upload up and free what the store kept of it.
    async fn abort(self: Box<Self>) -> Result<()>;
}

/// The upload of a store without a piecewise path: pieces kept in memory, one put at the end.
#[derive(Debug)]
pub struct BufferedUpload<'a, S: ?Sized> {
    store: &'a S,
    key: String,
    parts: Vec<Bytes>,
}

impl<'a, S: ObjectStore + ?Sized> BufferedUpload<'a, S> {
    pub fn new(store: &'a S, key: &str) -> BufferedUpload<'a, S> {
        BufferedUpload {
            store,
            key: key.to_string(),
            parts: Vec::new(),
        }
    }
}

#[async_trait]
impl<S: ObjectStore + ?Sized> Upload for BufferedUpload<'_, S> {
    async fn write(&mut self, data: Bytes) -> Result<()> {
        self.parts.push(data);
        Ok(())
    }

    async fn finish(self: Box<Self>) -> Result<()> {
        let this = *self;
        this.store.put_parts(&this.key, this.parts).await
    }

    async fn abort(self: Box<Self>) -> Result<()> {
        Ok(())
    }
}

/// Pieces of an upload are sent in parts of this size (S3 wants at least 5 MiB but for the
/// last); an object that ends before its first part is full goes up as one plain put.
pub const PART_SIZE: usize = 8 << 20;
/// Parts of one upload in flight at once.
pub const PARTS_IN_FLIGHT: usize = 4;

/// An upload through a wrapper that can only act on whole requests (retries): pieces are
/// kept until [`PART_SIZE`]; an object that ends before goes up as one put through the
/// wrapper, a bigger one streams through the inner store's own upload.
#[allow(missing_debug_implementations)] // holds an upload in flight
pub struct SmallFirstUpload<'a, W: ?Sized, S: ?Sized> {
    wrapper: &'a W,
    inner: &'a S,
    key: String,
    pending: Vec<Bytes>,
    pending_len: usize,
    streaming: Option<Box<dyn Upload + 'a>>,
}

impl<'a, W: ObjectStore + ?Sized, S: ObjectStore + ?Sized> SmallFirstUpload<'a, W, S> {
    pub fn new(wrapper: &'a W, inner: &'a S, key: &str) -> SmallFirstUpload<'a, W, S> {
        SmallFirstUpload {
            wrapper,
            inner,
            key: key.to_string(),
            pending: Vec::new(),
            pending_len: 0,
            streaming: None,
        }
    }
}

#[async_trait]
impl<W: ObjectStore + ?Sized, S: ObjectStore + ?Sized> Upload for SmallFirstUpload<'_, W, S> {
    async fn write(&mut self, data: Bytes) -> Result<()> {
        if let Some(up) = self.streaming.as_mut() {
            return up.write(data).await;
        }
        self.pending_len += data.len();
        self.pending.push(data);
        if self.pending_len >= PART_SIZE {
            let mut up = self.inner.upload(&self.key).await?;
            for piece in std::mem::take(&mut self.pending) {
                up.write(piece).await?;
            }
            self.streaming = Some(up);
        }
        Ok(())
    }

    async fn finish(self: Box<Self>) -> Result<()> {
        let this = *self;
        match this.streaming {
            Some(up) => up.finish().await,
            None => this.wrapper.put_parts(&this.key, this.pending).await,
        }
    }

    async fn abort(self: Box<Self>) -> Result<()> {
        match self.streaming {
            Some(up) => up.abort().await,
            None => Ok(()),
        }
    }
}
