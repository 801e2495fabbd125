//! Directory handles and paged readdir. FUSE asks for entries by offset; a handle
//! remembers where its last page ended (offset and name) so the next page continues from
//! that name without holding the whole directory in memory. Offsets 0 and 1 are `.` and
//! `..`. While the kernel consumes one page, the next one is already being read (one
//! page of readahead), so a listing costs the engine's time or the kernel's, not both.

use std::sync::Arc;

use strata_meta::{Ctx, DirEntry, Entry, Meta, SetAttr};
use strata_types::{Attr, Errno, FileType, Ino};
use tokio::task::JoinHandle;

use crate::errno::from_meta;
use crate::{Result, Vfs};

/// Entries returned per readdir call.
const PAGE: usize = 512;

#[derive(Debug)]
pub(crate) struct DirHandle {
    ino: Ino,
    /// Offset of the entry after the last one returned, and that entry's name.
    cursor: Option<(u64, Vec<u8>)>,
    /// The offset past the last entry, once a page reached the end: the kernel's next
    /// call there (which ends every listing) is answered without a round trip.
    end: Option<u64>,
    /// The last page read (and whether with attributes): the kernel takes what fits in
    /// its buffer (about 200 entries with attributes) and asks again from there, and the
    /// rest is served from here instead of being read again.
    page: Vec<DirEntryPlus>,
    page_plus: bool,
    /// The read epoch taken before the page was read ([`Vfs::read_epoch`]).
    page_epoch: u64,
    /// The page after the last one, being read ahead.
    next: Option<ReadAhead>,
}

/// A page read ahead: the entries after `after`, with attributes when `plus`.
#[derive(Debug)]
struct ReadAhead {
    after: Vec<u8>,
    plus: bool,
    /// The read epoch when it started.
    epoch: u64,
    task: JoinHandle<strata_meta::Result<Vec<DirEntry>>>,
}

impl ReadAhead {
    /// Start reading the `PAGE` entries of `ino` after `after`.
    fn start(meta: &Arc<Meta>, ino: Ino, after: Vec<u8>, plus: bool, epoch: u64) -> ReadAhead {
        let meta = Arc::clone(meta);
        let from = after.clone();
        let task = tokio::spawn(async move { meta.readdir(ino, Some(&from), PAGE, plus).await });
        ReadAhead {
            after,
            plus,
            epoch,
            task,
        }
    }
}

/// One entry of a readdir page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntryPlus {
    pub name: Vec<u8>,
    pub ino: Ino,
    pub kind: FileType,
    /// Offset of the next entry (what the kernel passes back to continue).
    pub next_offset: u64,
    /// Attributes, for readdirplus.
    pub attr: Option<Attr>,
}

impl Vfs {
    /// opendir(3): needs read permission on the directory. An open directory stays
    /// readable (`fstat`, an empty listing) after rmdir or a rename replaced it, until
    /// closed.
    pub async fn opendir(&self, ctx: &Ctx, ino: Ino) -> Result<u64> {
        self.meta
            .access(ctx, ino, strata_meta::MAY_READ)
            .await
            .map_err(from_meta)?;
        self.meta.mark_open(ino);
        let fh = self.new_fh();
        self.insert_dir_handle(fh, ino, None, None);
        Ok(fh)
    }

    /// Register directory handle `fh` at `cursor` (a handed-over mount's handle); false,
    /// changing nothing, if it is registered already.
    pub(crate) fn insert_dir_handle(
        &self,
        fh: u64,
        ino: Ino,
        cursor: Option<(u64, Vec<u8>)>,
        end: Option<u64>,
    ) -> bool {
        let handle = DirHandle {
            ino,
            cursor,
            end,
            page: Vec::new(),
            page_plus: false,
            page_epoch: 0,
            next: None,
        };
        match self.dirs.lock().entry(fh) {
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(handle);
                true
            }
            std::collections::hash_map::Entry::Occupied(_) => false,
        }
    }

    /// The directory handles open here, for a mount that takes over.
    pub(crate) fn dir_states(&self) -> Vec<crate::handover::DirHandleState> {
        let dirs = self.dirs.lock();
        let mut states: Vec<_> = dirs
            .iter()
            .map(|(&fh, d)| crate::handover::DirHandleState {
                fh,
                ino: d.ino.0,
                cursor: d.cursor.clone(),
                end: d.end,
            })
            .collect();
        states.sort_unstable_by_key(|d| d.fh);
        states
    }

    /// The entries of directory handle `fh` from `offset` on (one page). Attributes
    /// count this client's unflushed writes: the kernel takes them as the files' sizes.
    pub async fn readdir(&self, fh: u64, offset: u64, plus: bool) -> Result<Vec<DirEntryPlus>> {
        let (mut entries, read_epoch) = self.readdir_page(fh, offset, plus).await?;
        for e in &mut entries {
            if let Some(attr) = e.attr.as_mut() {
                self.apply_pending(e.ino, attr, read_epoch);
            }
        }
        Ok(entries)
    }

    /// A page of entries, and the read epoch taken before the engine was read for it.
    async fn readdir_page(
        &self,
        fh: u64,
        offset: u64,
        plus: bool,
    ) -> Result<(Vec<DirEntryPlus>, u64)> {
        let read_epoch = self.read_epoch();
        let (ino, cursor, mut ahead) = {
            let mut dirs = self.dirs.lock();
            let handle = dirs.get_mut(&fh).ok_or(strata_types::Errno::EBADF)?;
            if offset >= 2 && handle.end == Some(offset) {
                return Ok((Vec::new(), read_epoch));
            }
            // The kernel switches to plain readdir after the first request when nothing
            // was looked up meanwhile: a page with attributes serves both.
            if offset >= 2 && (handle.page_plus || !plus) {
                let at = handle.page.iter().position(|e| e.next_offset == offset + 1);
                if let Some(at) = at {
                    return Ok((handle.page[at..].to_vec(), handle.page_epoch));
                }
            }
            (handle.ino, handle.cursor.clone(), handle.next.take())
        };
        let mut out = Vec::new();
        let mut reached_end = false;
        let mut page_epoch = read_epoch;
        if offset < 2 {
            let attr = self.meta.getattr(ino).await.map_err(from_meta)?;
            self.note_times(ino, &attr);
            self.accessed(ino).await;
            if offset == 0 {
                out.push(DirEntryPlus {
                    name: b".".to_vec(),
                    ino,
                    kind: FileType::Directory,
                    next_offset: 1,
                    attr: None,
                });
            }
            out.push(DirEntryPlus {
                name: b"..".to_vec(),
                ino: attr.parent,
                kind: FileType::Directory,
                next_offset: 2,
                attr: None,
            });
        }
        // Continue after the remembered name, or skip from the start after a seek.
        let (after, skip) = match &cursor {
            Some((next, name)) if *next == offset => (Some(name.clone()), 0),
            _ => (None, offset.saturating_sub(2)),
        };
        let mut position = offset.max(2);
        let mut after = after;
        let mut to_skip = skip;
        while out.len() < PAGE {
            // Skipping reads at most four pages' worth of entries per call.
            let skip_now = usize::try_from(to_skip).map_or(PAGE * 4, |n| n.min(PAGE * 4));
            let want = (PAGE - out.len()) + skip_now;
            let ready = match ahead.take() {
                Some(read)
                    if want == PAGE && read.plus == plus && after.as_ref() == Some(&read.after) =>
                {
                    page_epoch = page_epoch.min(read.epoch);
                    // A task that did not finish (the runtime shutting down): read here.
                    read.task.await.ok()
                }
                _ => None,
            };
            let page = match ready {
                Some(page) => page,
                None => self.meta.readdir(ino, after.as_deref(), want, plus).await,
            }
            .map_err(from_meta)?;
            let done = page.len() < want;
            for e in page {
                after = Some(e.name.clone());
                if let Some(attr) = &e.attr {
                    self.xattr_free.seen(e.ino, attr);
                }
                if to_skip > 0 {
                    to_skip -= 1;
                    continue;
                }
                position += 1;
                out.push(DirEntryPlus {
                    name: e.name,
                    ino: e.ino,
                    kind: e.kind,
                    next_offset: position,
                    attr: e.attr,
                });
                if out.len() >= PAGE {
                    break;
                }
            }
            if done {
                reached_end = out.len() < PAGE || to_skip > 0;
                break;
            }
        }
        if let Some(handle) = self.dirs.lock().get_mut(&fh) {
            if let Some(last) = out.last() {
                handle.cursor = Some((last.next_offset, last.name.clone()));
            }
            handle.end = reached_end.then_some(position);
            handle.page.clone_from(&out);
            handle.page_plus = plus;
            handle.page_epoch = page_epoch;
            if !reached_end && let Some(last) = out.last().filter(|_| out.len() >= PAGE) {
                let after = last.name.clone();
                handle.next = Some(ReadAhead::start(
                    &self.meta,
                    ino,
                    after,
                    plus,
                    self.read_epoch(),
                ));
            }
        }
        Ok((out, page_epoch))
    }

    /// Record the last entry the caller actually consumed, so the next page continues
    /// after it (the kernel may take fewer entries than a page holds).
    pub fn set_dir_cursor(&self, fh: u64, next_offset: u64, name: Vec<u8>) {
        if let Some(handle) = self.dirs.lock().get_mut(&fh) {
            handle.cursor = Some((next_offset, name));
        }
    }

    /// closedir(3): the last close of a directory removed meanwhile deletes it.
    pub async fn releasedir(&self, fh: u64) -> Result<()> {
        let Some(handle) = self.dirs.lock().remove(&fh) else {
            return Err(strata_types::Errno::EBADF);
        };
        self.meta.close(handle.ino).await.map_err(from_meta)
    }
}

impl Vfs {
    /// Up to `limit` entries of directory `ino` whose names are `>= from` (all when
    /// `None`), in name order, with attributes (as this client sees them). For front ends
    /// that page by name rather than by handle and offset (the S3 gateway's listings);
    /// the internal files are not among them.
    pub async fn list_page(
        &self,
        ino: Ino,
        from: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<DirEntry>> {
        let read_epoch = self.read_epoch();
        let mut page = self
            .meta
            .readdir_from(ino, from, limit, true)
            .await
            .map_err(from_meta)?;
        for entry in &mut page {
            if let Some(attr) = entry.attr.as_mut() {
                self.apply_pending(entry.ino, attr, read_epoch);
            }
        }
        Ok(page)
    }

    /// Every entry of `dir`, read a page at a time (for the front ends' own small
    /// directories: buckets, uploads, users).
    pub async fn list_all(&self, dir: Ino) -> Result<Vec<DirEntry>> {
        const PAGE: usize = 1000;
        let mut all = Vec::new();
        let mut from: Option<Vec<u8>> = None;
        loop {
            let page = self.list_page(dir, from.as_deref(), PAGE).await?;
            let full = page.len() == PAGE;
            from = page.last().map(|e| [&e.name[..], &[0]].concat());
            all.extend(page);
            if !full {
                return Ok(all);
            }
        }
    }

    /// The directory at `dirs` below `from`, making missing ones with `mode` (`mkdir
    /// -p`); one another client makes at the same moment is used as found. ENOTDIR if a
    /// part is not a directory.
    pub async fn make_dirs<N: AsRef<[u8]>>(
        &self,
        ctx: &Ctx,
        from: Ino,
        dirs: &[N],
        mode: u32,
    ) -> Result<Ino> {
        Ok(self
            .make_dirs_entry(ctx, from, dirs, mode)
            .await?
            .map_or(from, |e| e.ino))
    }

    /// [`Vfs::make_dirs`] for a directory the servers share among their users (their
    /// temporary files): made by `ctx` (those above it with `mode`), then mode 1777 —
    /// anyone may add entries, each may remove or rename only its own (as `/tmp`) —
    /// unless it is already. Costs nothing more than `make_dirs` once it is.
    pub async fn make_shared_dir<N: AsRef<[u8]>>(
        &self,
        ctx: &Ctx,
        from: Ino,
        dirs: &[N],
        mode: u32,
    ) -> Result<Ino> {
        const SHARED_STICKY: u16 = 0o1777;
        let Some(entry) = self.make_dirs_entry(ctx, from, dirs, mode).await? else {
            return Ok(from);
        };
        if entry.attr.mode & 0o7777 != SHARED_STICKY {
            let set = SetAttr {
                mode: Some(SHARED_STICKY),
                ..Default::default()
            };
            self.setattr(ctx, entry.ino, &set).await?;
        }
        Ok(entry.ino)
    }

    /// The entry of the last of `dirs` below `from` (`None` when `dirs` is empty), making
    /// missing ones with `mode`.
    async fn make_dirs_entry<N: AsRef<[u8]>>(
        &self,
        ctx: &Ctx,
        from: Ino,
        dirs: &[N],
        mode: u32,
    ) -> Result<Option<Entry>> {
        let mut at = from;
        let mut last = None;
        for part in dirs {
            let name = part.as_ref();
            let entry = match self.lookup(ctx, at, name).await {
                Err(Errno::ENOENT) => match self.mkdir(ctx, at, name, mode).await {
                    Err(Errno::EEXIST) => self.lookup(ctx, at, name).await?,
                    made => made?,
                },
                found => found?,
            };
            if !entry.attr.is_dir() {
                return Err(Errno::ENOTDIR);
            }
            at = entry.ino;
            last = Some(entry);
        }
        Ok(last)
    }
}
