//! What SRC and DST name when they are not two directories: one file, or a key prefix
//! (`./te` stands for `test/` and `text`), as `juicefs sync` reads an address without a
//! trailing `/`. [`Narrowed`] shows the part of a directory that such an address names
//! under the keys the run uses: the source's own names (`test/a`, `text`), written on the
//! destination with its last name in place of the source's (`ab` → `abst/a`, `abxt`).

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use tokio::sync::mpsc;

use crate::endpoint::{Endpoint, Entry, ListSender, Prune, Writer};
use crate::{Result, SyncError};

/// How SRC and DST name what is copied (kept in a queued job so workers open the same).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Shape {
    /// Two directories (or bucket prefixes): the tree below SRC goes below DST.
    #[default]
    Tree,
    /// SRC is one file; DST is the file to write.
    File,
    /// SRC is one file; DST is a directory that gets it under SRC's name.
    FileInto,
    /// SRC names nothing: its last name is a key prefix, and DST's last name replaces it.
    Prefix,
}

/// The keys of a directory that start with `name` (exactly `name` when `exact`), seen
/// as keys that start with `outer` instead.
#[derive(Debug)]
pub struct Narrowed {
    inner: Arc<dyn Endpoint>,
    /// The start of every key the run sees.
    outer: String,
    /// What `outer` is on this side.
    name: String,
    exact: bool,
}

impl Narrowed {
    /// Keys `outer…` of the run are `name…` of `inner`; with `exact` only `outer` itself.
    pub fn new(inner: Arc<dyn Endpoint>, outer: &str, name: &str, exact: bool) -> Narrowed {
        Narrowed {
            inner,
            outer: outer.to_string(),
            name: name.to_string(),
            exact,
        }
    }

    fn to_inner(&self, key: &str) -> Result<String> {
        match key.strip_prefix(&self.outer) {
            Some(rest) => Ok(format!("{}{rest}", self.name)),
            None => Err(SyncError::Check(format!(
                "{key}: not a key of {} (it does not start with {:?})",
                self.describe(),
                self.outer
            ))),
        }
    }

    fn inner_entry(&self, entry: &Entry) -> Result<Entry> {
        let mut inner = entry.clone();
        inner.key = self.to_inner(&entry.key)?;
        Ok(inner)
    }

    /// The first entry: `name` itself when it is not a directory (a directory shows up
    /// in the listing as `name/`).
    async fn exact_entry(&self) -> Result<Option<Entry>> {
        if self.name.is_empty() {
            return Ok(None);
        }
        Ok(self
            .inner
            .stat(&self.name)
            .await?
            .filter(|e| !e.is_dir())
            .map(|mut e| {
                e.key = self.outer.clone();
                e
            }))
    }
}

/// `key` of `inner` as the run sees it, `None` when it does not start with `name`.
fn outer_key(key: &str, name: &str, outer: &str) -> Option<String> {
    key.strip_prefix(name).map(|rest| format!("{outer}{rest}"))
}

#[async_trait]
impl Endpoint for Narrowed {
    fn describe(&self) -> String {
        format!("{}{}", self.inner.describe(), self.name)
    }

    fn has_dirs(&self) -> bool {
        self.inner.has_dirs()
    }

    async fn list(&self, after: Option<String>, prune: Arc<Prune>, tx: ListSender) -> Result<()> {
        let inner_after = after.as_deref().map(|a| self.to_inner(a)).transpose()?;
        if inner_after.is_none()
            && let Some(entry) = self.exact_entry().await?
            && tx.send(Ok(entry)).await.is_err()
        {
            return Ok(());
        }
        if self.exact {
            return Ok(());
        }
        let (name, outer) = (self.name.clone(), self.outer.clone());
        let inner_prune: Arc<Prune> =
            Arc::new(move |key: &str| outer_key(key, &name, &outer).is_none_or(|k| prune(&k)));
        let start = inner_after.unwrap_or_else(|| self.name.clone());
        let (itx, mut irx) = mpsc::channel(256);
        let listing = self.inner.list(Some(start), inner_prune, itx);
        let forward = async move {
            // Keys with the prefix are together in key order: the first without it ends
            // the part this names, and dropping the receiver stops the listing.
            while let Some(item) = irx.recv().await {
                let item = match item {
                    Ok(mut e) => match outer_key(&e.key, &self.name, &self.outer) {
                        Some(k) => {
                            e.key = k;
                            Ok(e)
                        }
                        None => break,
                    },
                    Err(e) => Err(e),
                };
                if tx.send(item).await.is_err() {
                    break;
                }
            }
        };
        let (listed, ()) = tokio::join!(listing, forward);
        listed
    }

    async fn stat(&self, key: &str) -> Result<Option<Entry>> {
        let found = self.inner.stat(&self.to_inner(key)?).await?;
        Ok(found.map(|mut e| {
            e.key = key.trim_end_matches('/').to_string();
            e
        }))
    }

    async fn read(&self, entry: &Entry, offset: u64, len: u64) -> Result<Bytes> {
        self.inner
            .read(&self.inner_entry(entry)?, offset, len)
            .await
    }

    async fn create<'a>(&'a self, key: &str) -> Result<Box<dyn Writer + 'a>> {
        self.inner.create(&self.to_inner(key)?).await
    }

    async fn delete(&self, entry: &Entry) -> Result<()> {
        self.inner.delete(&self.inner_entry(entry)?).await
    }

    async fn mkdir(&self, key: &str) -> Result<()> {
        self.inner.mkdir(&self.to_inner(key)?).await
    }

    async fn symlink(&self, key: &str, target: &str) -> Result<()> {
        self.inner.symlink(&self.to_inner(key)?, target).await
    }

    async fn set_attrs(&self, key: &str, like: &Entry, perms: bool) -> Result<()> {
        self.inner
            .set_attrs(&self.to_inner(key)?, like, perms)
            .await
    }

    async fn sync(&self) -> Result<()> {
        self.inner.sync().await
    }
}

/// The first entry `endpoint` lists, if any (whether a bucket prefix holds anything).
pub async fn first_entry(endpoint: &dyn Endpoint) -> Result<Option<Entry>> {
    let (tx, mut rx) = mpsc::channel(1);
    let listing = endpoint.list(None, Arc::new(|_: &str| true), tx);
    let first = async move { rx.recv().await };
    let (listed, first) = tokio::join!(listing, first);
    match first {
        Some(entry) => entry.map(Some),
        None => listed.map(|()| None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::FsEndpoint;

    async fn keys(ep: &dyn Endpoint, after: Option<&str>) -> Vec<String> {
        let (tx, mut rx) = mpsc::channel(1000);
        ep.list(after.map(str::to_string), Arc::new(|_: &str| false), tx)
            .await
            .unwrap();
        let mut out = Vec::new();
        while let Ok(item) = rx.try_recv() {
            out.push(item.unwrap().key);
        }
        out
    }

    fn tree() -> (tempfile::TempDir, Arc<dyn Endpoint>) {
        let dir = tempfile::tempdir().unwrap();
        for (path, body) in [
            ("ta/x", "0"),
            ("te", "1"),
            ("test/a", "2"),
            ("test/b/c", "3"),
            ("text", "4"),
            ("tf/y", "5"),
        ] {
            let full = dir.path().join(path);
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(&full, body).unwrap();
        }
        let ep: Arc<dyn Endpoint> = Arc::new(FsEndpoint::open(dir.path(), false, false).unwrap());
        (dir, ep)
    }

    #[tokio::test]
    async fn a_prefix_lists_only_its_keys_under_the_outer_names() {
        let (_dir, ep) = tree();
        let narrowed = Narrowed::new(ep.clone(), "te", "te", false);
        assert_eq!(
            keys(&narrowed, None).await,
            ["te", "test/", "test/a", "test/b/", "test/b/c", "text"]
        );
        // Resumed after a key: only what follows it.
        assert_eq!(keys(&narrowed, Some("test/b/")).await, ["test/b/c", "text"]);
        // Seen from a destination whose last name is `ab`.
        let renamed = Narrowed::new(ep.clone(), "ab", "te", false);
        assert_eq!(keys(&renamed, None).await[..2], ["ab", "abst/"]);
        // Writing through it lands under the inner names.
        let dst = Narrowed::new(ep, "te", "zz", false);
        dst.mkdir("test/").await.unwrap();
        let mut w = dst.create("test/a").await.unwrap();
        w.write(Bytes::from_static(b"hi")).await.unwrap();
        let like = Entry::file("test/a".into(), 2, 0);
        w.finish(&like, false).await.unwrap();
        assert_eq!(keys(&dst, None).await, ["test/", "test/a"]);
        assert!(
            dst.create("other").await.is_err(),
            "a key outside is refused"
        );
    }

    #[tokio::test]
    async fn an_exact_name_is_one_file_and_nothing_beside_it() {
        let (_dir, ep) = tree();
        let one = Narrowed::new(ep.clone(), "text", "text", true);
        assert_eq!(keys(&one, None).await, ["text"]);
        let entry = one.stat("text").await.unwrap().unwrap();
        assert_eq!(one.read(&entry, 0, 10).await.unwrap(), "4");
        let missing = Narrowed::new(ep.clone(), "text", "nothing", true);
        assert!(keys(&missing, None).await.is_empty());
        assert!(first_entry(ep.as_ref()).await.unwrap().is_some());
    }
}
