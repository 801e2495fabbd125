//! What a client and the files it opened share: how to open the volume, and the volume
//! this process opened. After a `fork()` the child finds the parent's volume, opens its
//! own (a new session) and swaps it in without locks — a lock held by a parent thread at
//! the moment of the fork would stay held in the child forever.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use arc_swap::ArcSwapOption;
use strata_client::ClientOptions;
use strata_types::MetaUrl;
use strata_vfs::Identity;

use crate::error::{Result, SdkError};
use crate::volume::Volume;

/// A client's settings and its current process's volume.
#[derive(Debug)]
pub struct Shared {
    url: MetaUrl,
    opts: ClientOptions,
    identity: Identity,
    read_only: bool,
    current: ArcSwapOption<Volume>,
    closed: AtomicBool,
}

impl Shared {
    /// Open the volume in this process (blocking; call without the GIL).
    pub fn open(
        url: MetaUrl,
        opts: ClientOptions,
        identity: Identity,
        read_only: bool,
    ) -> Result<Shared> {
        let volume = Volume::open(&url, &opts, &identity, read_only)?;
        Ok(Shared {
            url,
            opts,
            identity,
            read_only,
            current: ArcSwapOption::from_pointee(volume),
            closed: AtomicBool::new(false),
        })
    }

    /// This process's volume, opened now if this process is a fork of the one that
    /// opened the client.
    pub fn volume(&self) -> Result<Arc<Volume>> {
        if self.closed.load(Ordering::Acquire) {
            return Err(SdkError::Closed("client"));
        }
        let seen = self.current.load_full();
        match &seen {
            Some(vol) if vol.is_current() => return Ok(vol.clone()),
            None => return Err(SdkError::Closed("client")),
            Some(_) => {}
        }
        let fresh = Arc::new(Volume::open(
            &self.url,
            &self.opts,
            &self.identity,
            self.read_only,
        )?);
        let before = self.current.compare_and_swap(&seen, Some(fresh.clone()));
        let won = match (&*before, &seen) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        };
        if won {
            return Ok(fresh);
        }
        // Another thread of this child opened one first: use it (ours closes as it drops).
        match &*before {
            Some(vol) if vol.is_current() => Ok(vol.clone()),
            _ => Err(SdkError::Closed("client")),
        }
    }

    /// Close this process's volume: flush, end the session. Later calls fail as closed.
    pub fn close(&self) -> Result<()> {
        self.closed.store(true, Ordering::Release);
        match self.current.swap(None) {
            Some(vol) if vol.is_current() => match Arc::try_unwrap(vol) {
                Ok(mut only) => only.close(),
                // Files still open keep it; it closes when the last of them goes.
                Err(shared) => shared.vfs_flush_all(),
            },
            _ => Ok(()),
        }
    }
}
