//! Removing whole trees (`rmr`, the trash's expiry): entry by entry with `rm -r`'s
//! permission checks, the files of a directory removed in batches of transactions.
//!
//! A batch is one transaction doing what `unlink` does for each of up to
//! [`BATCH_ENTRIES`] files of one directory, so what a crash or an error leaves is a tree
//! partly removed and never an inconsistent one. Batches in one directory touch only
//! commutative fields of it (times, counts, usage), so several run at once without
//! conflicting. A batch that fails (a file the caller may not remove, an engine's limit on
//! a transaction's size) is redone one `unlink` at a time, which removes what may be
//! removed before the failing entry and reports that entry's error.

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use strata_types::{Errno, FileType, Ino};

use super::{Ctx, MAY_EXEC, MAY_READ, Meta};
use crate::error::{MetaError, Result, posix};

/// Whether a removal goes through the trash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrashUse {
    /// Into the trash when the volume keeps one (what `unlink` and `rmdir` do).
    Volume,
    /// Deleted for good even when the volume keeps a trash (`rmr --skip-trash`).
    Never,
}

/// Files of one directory removed per transaction.
pub const BATCH_ENTRIES: usize = 64;

/// How [`Meta::remove_tree`] removes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoveOptions {
    /// Transactions in flight at once (at least one), each removing up to
    /// [`BATCH_ENTRIES`] files of one directory.
    pub threads: usize,
    /// Through the trash (when the volume keeps one) or deleted for good.
    pub trash: TrashUse,
}

impl RemoveOptions {
    /// What `rmr` does by default: through the trash, 50 transactions at once (JuiceFS's
    /// `rmr --threads` default).
    pub const RMR: Self = Self {
        threads: 50,
        trash: TrashUse::Volume,
    };
    /// The background expiry of trash hours: a few at once, so that it does not crowd
    /// out the volume's users.
    pub const PURGE: Self = Self {
        threads: 8,
        trash: TrashUse::Volume,
    };
}

/// Counts removals and keeps the first error of a batch running at once.
struct Tally<'a> {
    removed: u64,
    failed: Option<MetaError>,
    done: &'a mut (dyn FnMut(u64) -> bool + Send),
}

impl Tally<'_> {
    /// Removals finished: `Ok(n)` entries, or one entry already gone (someone else
    /// removed it), which counts as removed; `done` returning false stops the walk with
    /// EINTR.
    fn settle(&mut self, outcome: Result<u64>) {
        let n = match outcome {
            Ok(n) => n,
            Err(MetaError::Posix(Errno::ENOENT)) => 1,
            Err(e) => {
                self.failed.get_or_insert(e);
                return;
            }
        };
        self.removed += n;
        if !(self.done)(n) && self.failed.is_none() {
            self.failed = Some(MetaError::Posix(Errno::EINTR));
        }
    }

    fn check(&mut self) -> Result<()> {
        match self.failed.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

impl Meta {
    /// Remove `parent/name` and everything under it, entry by entry (through the trash
    /// when `options` and the volume say so, unless it already is in the trash), with the
    /// permission checks `rm -r` meets: each directory must be readable and searchable to
    /// be listed, and each removal is checked as `unlink`/`rmdir` check it. The files of
    /// a directory go [`BATCH_ENTRIES`] per transaction, up to `options.threads`
    /// transactions at once; directories one at a time. Returns the number of
    /// entries removed; `done` is told after each and stops the walk (EINTR) by returning
    /// false. On an error no new removal starts, the ones under way finish, and the first
    /// error is returned.
    pub async fn remove_tree(
        &self,
        ctx: &Ctx,
        (parent, name): (Ino, &[u8]),
        options: RemoveOptions,
        done: &mut (dyn FnMut(u64) -> bool + Send),
    ) -> Result<u64> {
        if options.trash == TrashUse::Never && ctx.uid != 0 {
            // Skipping the trash makes a deletion final for everyone: root's decision.
            return posix(Errno::EPERM);
        }
        let entry = self.lookup(ctx, parent, name).await?;
        if entry.attr.kind != FileType::Directory {
            self.unlink_with(ctx, parent, name, options.trash).await?;
            done(1);
            return Ok(1);
        }
        let mut tally = Tally {
            removed: 0,
            failed: None,
            done,
        };
        // Directories still to empty, deepest last; each with its parent and name.
        let mut stack = vec![(parent, name.to_vec(), entry.ino, false)];
        while let Some((dir_parent, dir_name, dir, expanded)) = stack.pop() {
            if expanded {
                let outcome = self
                    .rmdir_with(ctx, dir_parent, &dir_name, options.trash)
                    .await;
                tally.settle(outcome.map(|()| 1));
                tally.check()?;
                continue;
            }
            self.access(ctx, dir, MAY_READ | MAY_EXEC).await?;
            stack.push((dir_parent, dir_name, dir, true));
            let mut pages = self.entry_pages(dir, false);
            while let Some(page) = pages.next(self).await? {
                let mut files = Vec::with_capacity(page.len());
                for e in page {
                    if e.kind == FileType::Directory {
                        // Removed when its turn comes, after its own entries.
                        stack.push((dir, e.name, e.ino, false));
                    } else {
                        files.push((e.name, e.ino));
                    }
                }
                let mut running = FuturesUnordered::new();
                for batch in files.chunks(BATCH_ENTRIES) {
                    if tally.failed.is_some() {
                        break;
                    }
                    running.push(self.remove_files(ctx, dir, batch, options.trash));
                    if running.len() >= options.threads.max(1)
                        && let Some(outcome) = running.next().await
                    {
                        tally.settle(outcome);
                    }
                }
                while let Some(outcome) = running.next().await {
                    tally.settle(outcome);
                }
                tally.check()?;
            }
        }
        Ok(tally.removed)
    }

    /// Remove the files `batch` (names and the inodes listed for them) of `dir`: in one
    /// transaction, or, if that fails, one `unlink` at a time up to the first error.
    /// Returns the entries removed (those already gone included).
    async fn remove_files(
        &self,
        ctx: &Ctx,
        dir: Ino,
        batch: &[(Vec<u8>, Ino)],
        trash: TrashUse,
    ) -> Result<u64> {
        let count = u64::try_from(batch.len()).unwrap_or(u64::MAX);
        let names: Vec<(&[u8], Option<Ino>)> = batch
            .iter()
            .map(|(name, ino)| (name.as_slice(), Some(*ino)))
            .collect();
        if batch.len() > 1 && self.unlink_names(ctx, dir, &names, trash).await.is_ok() {
            return Ok(count);
        }
        for (name, _) in batch {
            match self.unlink_with(ctx, dir, name, trash).await {
                Ok(()) | Err(MetaError::Posix(Errno::ENOENT)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(count)
    }
}
