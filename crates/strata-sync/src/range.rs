//! `--start KEY` and `--end KEY` (`juicefs sync`'s): a run over the keys from START to
//! END, both included, in key order. [`Ranged`] shows only those keys of an endpoint: its
//! listing starts after START (START itself comes from a stat, so a big bucket is not
//! listed from its first key) and stops at the first key past END. Both sides of a run
//! are ranged alike, so `--delete-dst` never reaches a key outside the range.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use tokio::sync::mpsc;

use crate::Result;
use crate::endpoint::{Endpoint, Entry, ListSender, Prune, Writer};

/// The keys of `inner` from `start` to `end` (either open when `None`).
#[derive(Debug)]
pub struct Ranged {
    inner: Arc<dyn Endpoint>,
    start: Option<String>,
    end: Option<String>,
}

impl Ranged {
    pub fn new(inner: Arc<dyn Endpoint>, start: Option<String>, end: Option<String>) -> Ranged {
        Ranged { inner, start, end }
    }

    fn past_end(&self, key: &str) -> bool {
        self.end.as_deref().is_some_and(|end| key > end)
    }

    /// START itself, when something has exactly that key (a directory named START lists
    /// as `START/`, after START).
    async fn start_entry(&self, after: Option<&str>) -> Result<Option<Entry>> {
        let Some(start) = self.start.as_deref() else {
            return Ok(None);
        };
        if after.is_some_and(|a| a >= start) || self.past_end(start) {
            return Ok(None);
        }
        Ok(self.inner.stat(start).await?.filter(|e| e.key == start))
    }
}

#[async_trait]
impl Endpoint for Ranged {
    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn has_dirs(&self) -> bool {
        self.inner.has_dirs()
    }

    async fn list(&self, after: Option<String>, prune: Arc<Prune>, tx: ListSender) -> Result<()> {
        if let Some(entry) = self.start_entry(after.as_deref()).await?
            && tx.send(Ok(entry)).await.is_err()
        {
            return Ok(());
        }
        let from = match (after, self.start.clone()) {
            (Some(a), Some(s)) => Some(a.max(s)),
            (a, s) => a.or(s),
        };
        let end = self.end.clone();
        // A directory past END holds only keys past END.
        let inner_prune: Arc<Prune> =
            Arc::new(move |dir: &str| end.as_deref().is_some_and(|end| dir > end) || prune(dir));
        let (itx, mut irx) = mpsc::channel(256);
        let listing = self.inner.list(from, inner_prune, itx);
        let forward = async move {
            // Keys come in order: the first past END ends the range, and dropping the
            // receiver stops the listing.
            while let Some(item) = irx.recv().await {
                if item.as_ref().is_ok_and(|e| self.past_end(&e.key)) {
                    break;
                }
                if tx.send(item).await.is_err() {
                    break;
                }
            }
        };
        let (listed, ()) = tokio::join!(listing, forward);
        listed
    }

    async fn stat(&self, key: &str) -> Result<Option<Entry>> {
        self.inner.stat(key).await
    }

    async fn read(&self, entry: &Entry, offset: u64, len: u64) -> Result<Bytes> {
        self.inner.read(entry, offset, len).await
    }

    async fn create<'a>(&'a self, key: &str) -> Result<Box<dyn Writer + 'a>> {
        self.inner.create(key).await
    }

    async fn delete(&self, entry: &Entry) -> Result<()> {
        self.inner.delete(entry).await
    }

    async fn mkdir(&self, key: &str) -> Result<()> {
        self.inner.mkdir(key).await
    }

    async fn symlink(&self, key: &str, target: &str) -> Result<()> {
        self.inner.symlink(key, target).await
    }

    async fn set_attrs(&self, key: &str, like: &Entry, perms: bool) -> Result<()> {
        self.inner.set_attrs(key, like, perms).await
    }

    async fn sync(&self) -> Result<()> {
        self.inner.sync().await
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::fs::FsEndpoint;
    use crate::narrow::first_entry;

    /// Every key `ep` lists, after `after`.
    async fn keys(ep: &dyn Endpoint, after: Option<&str>) -> Vec<String> {
        let (tx, mut rx) = mpsc::channel(8);
        let listing = ep.list(after.map(str::to_string), Arc::new(|_: &str| false), tx);
        let collect = async {
            let mut got = Vec::new();
            while let Some(item) = rx.recv().await {
                got.push(item.unwrap().key);
            }
            got
        };
        let (listed, got) = tokio::join!(listing, collect);
        listed.unwrap();
        got
    }

    fn tree() -> (tempfile::TempDir, Arc<dyn Endpoint>) {
        let dir = tempfile::tempdir().unwrap();
        for file in ["a", "a-b", "b/c", "b/d/e", "b0", "c/x", "c/y", "d"] {
            let path = dir.path().join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, file).unwrap();
        }
        let ep = FsEndpoint::open(dir.path(), false, false).unwrap();
        (dir, Arc::new(ep))
    }

    const BOUNDS: [&str; 12] = [
        "", "a", "a-b", "a/", "b", "b/", "b/c", "b/d/", "b/d/e", "b0", "c/xx", "zz",
    ];

    proptest! {
        /// A ranged listing is the whole listing cut to START ≤ key ≤ END, from any
        /// bound (keys and names between keys), resumed after any key.
        #[test]
        fn a_range_lists_exactly_the_keys_between_its_bounds(
            start in prop::sample::select(BOUNDS.to_vec()),
            end in prop::sample::select(BOUNDS.to_vec()),
            after in prop::sample::select(BOUNDS.to_vec()),
            open_start: bool,
            open_end: bool,
        ) {
            let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
            let (_dir, ep) = tree();
            let all = rt.block_on(keys(&*ep, None));
            let start = (!open_start).then(|| start.to_string());
            let end = (!open_end).then(|| end.to_string());
            let ranged = Ranged::new(ep, start.clone(), end.clone());
            let within = |k: &String| {
                start.as_ref().is_none_or(|s| k >= s) && end.as_ref().is_none_or(|e| k <= e)
            };
            let want: Vec<String> = all.iter().filter(|k| within(k)).cloned().collect();
            prop_assert_eq!(rt.block_on(keys(&ranged, None)), want.clone());
            let (after, want_after): (Option<&str>, Vec<String>) = if after.is_empty() {
                (None, want)
            } else {
                (Some(after), want.into_iter().filter(|k| k.as_str() > after).collect())
            };
            prop_assert_eq!(rt.block_on(keys(&ranged, after)), want_after);
        }
    }

    #[tokio::test]
    async fn an_empty_range_lists_nothing() {
        let (_dir, ep) = tree();
        let ranged = Ranged::new(ep, Some("c".into()), Some("b".into()));
        assert_eq!(first_entry(&ranged).await.unwrap(), None);
    }
}
