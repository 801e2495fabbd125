//! Listing keys in S3's order from a tree of directories. S3 orders whole keys byte by
//! byte, and a directory `a` holds keys that sort as `a/...`, so a file `a-b` ('-' is
//! below '/') comes before everything under `a` although readdir returns `a` first. Each
//! directory is read a page at a time, in name order, and a subdirectory is held back
//! until the next name sorts after `name/`: memory stays bounded by the depth of the
//! tree and one page per level, whatever the size of a directory. A listing starts at the
//! directory its prefix names and seeks to its marker, so page N costs what page 1 does.

use std::collections::{BTreeMap, VecDeque};

use s3s::S3Result;
use strata_types::{Attr, FileType, Ino};
use strata_vfs::DirEntry;

use crate::Gateway;
use crate::error::fs_error;
use crate::keys::{HIDDEN_DIR, split_prefix};

/// Entries read per directory page.
const PAGE: usize = 1000;

/// What to list.
#[derive(Debug)]
pub struct ListQuery<'a> {
    pub prefix: &'a str,
    pub delimiter: Option<&'a str>,
    /// List keys after this one (marker, StartAfter or continuation token).
    pub after: Option<&'a str>,
    pub max_keys: usize,
    /// List the version store's tree instead of a bucket's: each directory there is a
    /// key (listed as an object whose inode is that directory; it may hold no version)
    /// and a prefix of longer keys; its files are versions, not keys.
    pub store: bool,
}

/// One item of a listing.
#[derive(Debug)]
pub enum Item {
    Object {
        key: String,
        ino: Ino,
        attr: Attr,
        is_dir: bool,
    },
    Prefix(String),
}

impl Item {
    pub fn key(&self) -> &str {
        match self {
            Item::Object { key, .. } | Item::Prefix(key) => key,
        }
    }
}

/// A page of a listing.
#[derive(Debug, Default)]
pub struct Listing {
    pub items: Vec<Item>,
    /// More items follow the last one.
    pub truncated: bool,
}

/// One directory being read.
#[derive(Debug)]
struct Cursor {
    ino: Ino,
    /// The key prefix of its entries (`a/b/`, empty at the bucket's root).
    key_prefix: String,
    /// Only names starting with this (the prefix's last part, at the first level).
    filter: String,
    /// Where the next page starts (inclusive); `None` once read to the end.
    next_from: Option<Vec<u8>>,
    raw: VecDeque<DirEntry>,
    /// Subdirectories waiting for their turn, by `name/`.
    held: BTreeMap<Vec<u8>, DirEntry>,
    /// It held anything at all (an empty directory is listed as its own key).
    seen_any: bool,
    /// Its own key, when it may be listed as an empty directory.
    own_key: Option<String>,
    /// The gateway's hidden directory lives here.
    hides: bool,
    /// A directory of the version store ([`ListQuery::store`]).
    store: bool,
}

impl Cursor {
    fn sort_key(entry: &DirEntry) -> Vec<u8> {
        let mut key = entry.name.clone();
        if entry.kind == FileType::Directory {
            key.push(b'/');
        }
        key
    }
}

impl Gateway {
    /// The items of `bucket_dir` matching `q`, in S3's order, at most `q.max_keys`.
    pub(crate) async fn list(&self, bucket_dir: Ino, q: &ListQuery<'_>) -> S3Result<Listing> {
        let mut out = Listing::default();
        if q.max_keys == 0 {
            return Ok(out);
        }
        let Some((dirs, filter)) = split_prefix(q.prefix) else {
            return Ok(out);
        };
        let start = match self.walk(bucket_dir, &dirs).await {
            Ok(ino) => ino,
            Err(strata_types::Errno::ENOENT | strata_types::Errno::ENOTDIR) => return Ok(out),
            Err(e) => return Err(fs_error(e, q.prefix)),
        };
        if !self.may_list(start).await? {
            return Err(fs_error(strata_types::Errno::EACCES, q.prefix));
        }
        let key_prefix: String = dirs.iter().map(|d| format!("{d}/")).collect();
        let own_key =
            (!q.store && !dirs.is_empty() && filter.is_empty()).then(|| key_prefix.clone());
        let mut stack = vec![self.cursor(start, key_prefix, filter.to_owned(), own_key, q)];
        let mut last_prefix: Option<String> = None;
        while let Some(top) = stack.last_mut() {
            let Some((entry, held)) = self.next_entry(top).await? else {
                let done = stack.pop();
                if let Some(Cursor {
                    seen_any: false,
                    own_key: Some(key),
                    ino,
                    ..
                }) = done
                    && after_marker(&key, q.after)
                    && self
                        .emit_key(&mut out, q, &mut last_prefix, key, ino)
                        .await?
                {
                    break;
                }
                continue;
            };
            let Ok(name) = std::str::from_utf8(&entry.name) else {
                continue;
            };
            let key = format!("{}{name}", top.key_prefix);
            let kind = match (entry.kind, q.store, held) {
                // In the store a directory first shows as a key, then as a prefix.
                (FileType::Directory, true, false) => FileType::Regular,
                (FileType::Regular, true, _) => continue,
                (kind, _, _) => kind,
            };
            match kind {
                FileType::Regular => {
                    if !after_marker(&key, q.after) {
                        continue;
                    }
                    let attr = entry.attr.clone();
                    let item = match common_prefix(&key, q) {
                        Some(cp) => Item::Prefix(cp),
                        None => match attr {
                            Some(attr) => Item::Object {
                                key,
                                ino: entry.ino,
                                attr,
                                is_dir: false,
                            },
                            None => continue,
                        },
                    };
                    if push(&mut out, q, &mut last_prefix, item) {
                        break;
                    }
                }
                FileType::Directory => {
                    let dir_key = format!("{key}/");
                    if let Some(after) = q.after
                        && dir_key.as_str() <= after
                        && !after.starts_with(&dir_key)
                    {
                        continue;
                    }
                    if let Some(cp) = common_prefix(&dir_key, q) {
                        // In the store a key's directory is a prefix only if longer keys
                        // live below it (its files are the key's own versions).
                        if q.store
                            && cp.len() >= dir_key.len()
                            && !self.holds_subdir(entry.ino).await?
                        {
                            continue;
                        }
                        if after_marker(&cp, q.after)
                            && push(&mut out, q, &mut last_prefix, Item::Prefix(cp))
                        {
                            break;
                        }
                        continue;
                    }
                    if !self.may_list(entry.ino).await? {
                        // Its keys are not this caller's to see (as `find` skips a
                        // directory it may not read).
                        continue;
                    }
                    let own_key = (!q.store).then(|| dir_key.clone());
                    let child = self.cursor(entry.ino, dir_key, String::new(), own_key, q);
                    stack.push(child);
                }
                _ => {}
            }
        }
        Ok(out)
    }

    /// Whether the request may read and search the directory `dir`: checked for a user
    /// with its own POSIX ids; the gateway acting as itself lists what it serves.
    async fn may_list(&self, dir: Ino) -> S3Result<bool> {
        let Some(caller) = self.caller.as_deref() else {
            return Ok(true);
        };
        let mask = strata_vfs::MAY_READ | strata_vfs::MAY_EXEC;
        match self.vfs.access(caller, dir, mask).await {
            Ok(()) => Ok(true),
            Err(strata_types::Errno::EACCES) => Ok(false),
            Err(e) => Err(fs_error(e, "listing")),
        }
    }

    /// Whether the directory `dir` has a subdirectory.
    async fn holds_subdir(&self, dir: Ino) -> S3Result<bool> {
        let mut from: Option<Vec<u8>> = None;
        loop {
            let page = self
                .vfs
                .list_page(dir, from.as_deref(), PAGE)
                .await
                .map_err(|e| fs_error(e, "version store"))?;
            if page.iter().any(|e| e.kind == FileType::Directory) {
                return Ok(true);
            }
            match page.last() {
                Some(last) if page.len() == PAGE => from = Some([&last.name[..], &[0]].concat()),
                _ => return Ok(false),
            }
        }
    }

    /// Emit an empty directory's own key; true when the page is full.
    async fn emit_key(
        &self,
        out: &mut Listing,
        q: &ListQuery<'_>,
        last_prefix: &mut Option<String>,
        key: String,
        ino: Ino,
    ) -> S3Result<bool> {
        let item = match common_prefix(&key, q) {
            Some(cp) => Item::Prefix(cp),
            None => {
                let attr = self.vfs.getattr(ino).await.map_err(|e| fs_error(e, &key))?;
                Item::Object {
                    key,
                    ino,
                    attr,
                    is_dir: true,
                }
            }
        };
        Ok(push(out, q, last_prefix, item))
    }

    fn cursor(
        &self,
        ino: Ino,
        key_prefix: String,
        filter: String,
        own_key: Option<String>,
        q: &ListQuery<'_>,
    ) -> Cursor {
        let mut from = filter.as_bytes().to_vec();
        if let Some(rest) = q.after.and_then(|a| a.strip_prefix(key_prefix.as_str())) {
            let seek = seek_name(rest.split('/').next().unwrap_or(""));
            from = from.max(seek.to_vec());
        }
        Cursor {
            ino,
            key_prefix,
            filter,
            next_from: Some(from),
            raw: VecDeque::new(),
            held: BTreeMap::new(),
            seen_any: false,
            own_key,
            hides: ino == self.root(),
            store: q.store,
        }
    }

    /// The cursor's next entry in S3 order (and whether it is a directory coming up as a
    /// prefix), `None` at its end.
    async fn next_entry(&self, c: &mut Cursor) -> S3Result<Option<(DirEntry, bool)>> {
        loop {
            if c.raw.is_empty() && c.next_from.is_some() {
                self.read_page(c).await?;
            }
            let next_raw = c.raw.front().map(Cursor::sort_key);
            if let Some(held) = c.held.first_key_value().map(|(k, _)| k.clone())
                && next_raw.as_ref().is_none_or(|raw| held < *raw)
            {
                return Ok(c.held.remove(&held).map(|e| (e, true)));
            }
            let Some(entry) = c.raw.pop_front() else {
                return Ok(None);
            };
            if entry.kind == FileType::Directory {
                c.held.insert(Cursor::sort_key(&entry), entry.clone());
                if !c.store {
                    continue;
                }
            }
            return Ok(Some((entry, false)));
        }
    }

    async fn read_page(&self, c: &mut Cursor) -> S3Result<()> {
        let from = c.next_from.take();
        let page = self
            .vfs
            .list_page(c.ino, from.as_deref(), PAGE)
            .await
            .map_err(|e| fs_error(e, &c.key_prefix))?;
        if page.len() == PAGE
            && let Some(last) = page.last()
        {
            let mut next = last.name.clone();
            next.push(0);
            c.next_from = Some(next);
        }
        c.seen_any |= !page.is_empty();
        for entry in page {
            if !entry.name.starts_with(c.filter.as_bytes()) {
                // Names sort in order: past the filter's range nothing more can match.
                c.next_from = None;
                break;
            }
            if c.hides && entry.name == HIDDEN_DIR.as_bytes() {
                continue;
            }
            c.raw.push_back(entry);
        }
        Ok(())
    }
}

/// Where to start reading a directory so nothing sorting after `rest` (the marker's
/// part at this level) is missed: a subdirectory whose name is a prefix of `rest`
/// followed by a byte below '/' sorts after it, so start at the shortest such prefix.
fn seek_name(rest: &str) -> &[u8] {
    let bytes = rest.as_bytes();
    match bytes.iter().enumerate().skip(1).find(|(_, b)| **b < b'/') {
        Some((i, _)) => &bytes[..i],
        None => bytes,
    }
}

/// Whether `key` comes after the marker (and is not rolled into a prefix the marker ends).
fn after_marker(key: &str, after: Option<&str>) -> bool {
    after.is_none_or(|a| key > a)
}

/// The common prefix `key` rolls up into under the query's delimiter.
fn common_prefix(key: &str, q: &ListQuery<'_>) -> Option<String> {
    let delimiter = q.delimiter.filter(|d| !d.is_empty())?;
    let rest = key.strip_prefix(q.prefix)?;
    let i = rest.find(delimiter)?;
    Some(key[..q.prefix.len() + i + delimiter.len()].to_owned())
}

/// Add an item unless it repeats the last common prefix or is covered by the marker;
/// true when the page was already full (the listing is truncated).
fn push(
    out: &mut Listing,
    q: &ListQuery<'_>,
    last_prefix: &mut Option<String>,
    item: Item,
) -> bool {
    if let Item::Prefix(cp) = &item {
        if last_prefix.as_deref() == Some(cp.as_str()) {
            return false;
        }
        if let Some(after) = q.after
            && (cp.as_str() <= after || after.starts_with(cp.as_str()))
        {
            return false;
        }
        *last_prefix = Some(cp.clone());
    }
    if out.items.len() == q.max_keys {
        out.truncated = true;
        return true;
    }
    out.items.push(item);
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeking_keeps_directories_that_sort_after_the_marker() {
        assert_eq!(seek_name("a-b"), b"a");
        assert_eq!(seek_name("abc"), b"abc");
        assert_eq!(seek_name("ab!c"), b"ab");
        assert_eq!(seek_name(""), b"");
    }

    #[test]
    fn common_prefixes_follow_the_delimiter() {
        let q = ListQuery {
            prefix: "a/",
            delimiter: Some("/"),
            after: None,
            max_keys: 10,
            store: false,
        };
        assert_eq!(common_prefix("a/b/c", &q).as_deref(), Some("a/b/"));
        assert_eq!(common_prefix("a/b", &q), None);
        let q = ListQuery {
            prefix: "",
            delimiter: Some("-"),
            after: None,
            max_keys: 10,
            store: false,
        };
        assert_eq!(common_prefix("x-y/z", &q).as_deref(), Some("x-"));
    }
}
