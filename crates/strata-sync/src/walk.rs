//! The walk of a directory tree in key order, shared by local directories and volumes:
//! each directory is read whole, sorted, and its entries are sent in order, a directory
//! entered right after its own entry (depth first).
//!
//! With a read-ahead of N (`--list-threads N`, N ≥ 2), up to N directory reads run at
//! once ahead of the walk. The walk enters directories in ascending key order, so the
//! ones it needs next are the smallest keys among those known and not yet read: every
//! listing, the walk's own or one read ahead, adds its subdirectories to that ordered
//! set, and reads start from its front. A listing read early waits, whole, until the
//! walk gets there; at most `4N` wait at once, so memory stays bounded. Entries go out
//! in exactly the order of a walk without read-ahead.

use std::collections::{BTreeMap, HashMap, VecDeque};

use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, StreamExt};

use crate::endpoint::{Entry, ListSender, Prune, wanted};
use crate::{Result, SyncError};

/// One directory's entries in key order, or why it could not be read.
pub(crate) type Listing = Result<Vec<Result<Entry>>>;

/// Listings read ahead (waiting or being read), per directory read at once.
const HELD_PER_READ: usize = 4;

/// A directory being walked: what is left of its entries.
struct Level {
    items: VecDeque<Result<Entry>>,
    /// Its handle (an inode), to refuse entering a directory inside itself.
    id: u64,
}

struct Walker<'a, 'w, F> {
    read: &'w F,
    after: Option<&'w str>,
    prune: &'w Prune,
    /// Directory reads at once; below 2, none runs ahead.
    ahead: usize,
    levels: Vec<Level>,
    /// Directories the walk will enter, known but not read yet, by key.
    known: BTreeMap<String, u64>,
    /// Directories read ahead: their listing once read.
    started: HashMap<String, Option<Listing>>,
    running: FuturesUnordered<BoxFuture<'a, (String, Listing)>>,
}

/// Send every entry below the root (read as `read("", root_id)`) whose key sorts after
/// `after` to `tx`, as [`crate::Endpoint::list`] promises, with up to `ahead` directory
/// reads at once. `read(key, id)` reads directory `key` (ending in `/`) whose entry had
/// `id`. An unreadable root is the error returned; any other unreadable directory is sent
/// as an error entry and the walk goes on.
pub(crate) async fn walk<'a, F>(
    read: &F,
    root_id: u64,
    ahead: usize,
    after: Option<&str>,
    prune: &Prune,
    tx: &ListSender,
) -> Result<()>
where
    F: Fn(String, u64) -> BoxFuture<'a, Listing> + Sync,
{
    let root = read(String::new(), root_id).await?;
    let mut w = Walker {
        read,
        after,
        prune,
        ahead,
        levels: Vec::new(),
        known: BTreeMap::new(),
        started: HashMap::new(),
        running: FuturesUnordered::new(),
    };
    w.discover(&root);
    w.levels.push(Level {
        items: root.into(),
        id: root_id,
    });
    w.top_up();
    while let Some(level) = w.levels.last_mut() {
        let Some(item) = level.items.pop_front() else {
            w.levels.pop();
            continue;
        };
        let entry = match item {
            Ok(entry) => entry,
            Err(e) => {
                if !w.send(tx, Err(e)).await {
                    return Ok(());
                }
                continue;
            }
        };
        let (send, _) = wanted(&entry.key, after);
        let descend = w.enters(&entry);
        let (key, id) = (entry.key.clone(), entry.id);
        if send && !w.send(tx, Ok(entry)).await {
            return Ok(());
        }
        if !descend {
            continue;
        }
        if w.levels.iter().any(|l| l.id == id) {
            w.forget(&key);
            let loop_error = SyncError::Check(format!("{key}: directory loop through a symlink"));
            if !w.send(tx, Err(loop_error)).await {
                return Ok(());
            }
            continue;
        }
        match w.listing(key, id).await {
            Ok(items) => w.levels.push(Level {
                items: items.into(),
                id,
            }),
            Err(e) => {
                if !w.send(tx, Err(e)).await {
                    return Ok(());
                }
            }
        }
        w.top_up();
    }
    Ok(())
}

impl<'a, F> Walker<'a, '_, F>
where
    F: Fn(String, u64) -> BoxFuture<'a, Listing> + Sync,
{
    /// Whether the walk goes into `entry` (the same answer before and when it gets there).
    fn enters(&self, entry: &Entry) -> bool {
        entry.is_dir() && wanted(&entry.key, self.after).1 && !(self.prune)(&entry.key)
    }

    /// Note the directories of a listing the walk will enter.
    fn discover(&mut self, items: &[Result<Entry>]) {
        if self.ahead < 2 {
            return;
        }
        for entry in items.iter().flatten() {
            if self.enters(entry) {
                self.known.insert(entry.key.clone(), entry.id);
            }
        }
    }

    /// Drop what was known or read of `dir` and below (the walk will not go there).
    fn forget(&mut self, dir: &str) {
        let below: Vec<String> = self
            .known
            .range(dir.to_string()..)
            .map(|(k, _)| k)
            .take_while(|k| k.starts_with(dir))
            .cloned()
            .collect();
        for key in below {
            self.known.remove(&key);
        }
        self.started.retain(|k, _| !k.starts_with(dir));
    }

    fn spawn(&mut self, key: String, id: u64) {
        let read = (self.read)(key.clone(), id);
        self.running
            .push(Box::pin(async move { (key, read.await) }));
    }

    /// Start reads ahead of the walk, smallest key first, within the limits.
    fn top_up(&mut self) {
        while self.running.len() < self.ahead
            && self.started.len() < self.ahead.saturating_mul(HELD_PER_READ)
        {
            let Some((key, id)) = self.known.pop_first() else {
                return;
            };
            self.spawn(key.clone(), id);
            self.started.insert(key, None);
        }
    }

    /// Directory `key`'s listing: the one read ahead, or read now.
    async fn listing(&mut self, key: String, id: u64) -> Listing {
        match self.started.remove(&key) {
            Some(Some(listing)) => return listing,
            Some(None) => {}
            None => {
                self.known.remove(&key);
                self.spawn(key.clone(), id);
            }
        }
        while let Some((done, listing)) = self.running.next().await {
            if done == key {
                if let Ok(items) = &listing {
                    self.discover(items);
                }
                return listing;
            }
            self.keep(done, listing);
        }
        Err(SyncError::Check(format!("{key}: listing lost")))
    }

    /// Keep a listing read ahead until the walk gets to it (unless it was forgotten).
    fn keep(&mut self, key: String, listing: Listing) {
        if !self.started.contains_key(&key) {
            return;
        }
        if let Ok(items) = &listing {
            self.discover(items);
        }
        self.started.insert(key, Some(listing));
        self.top_up();
    }

    /// Send one item, reading ahead meanwhile; false when nobody listens any more.
    async fn send(&mut self, tx: &ListSender, item: Result<Entry>) -> bool {
        let sending = tx.send(item);
        tokio::pin!(sending);
        loop {
            tokio::select! {
                sent = &mut sending => return sent.is_ok(),
                Some((key, listing)) = self.running.next(), if !self.running.is_empty() => {
                    self.keep(key, listing);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use proptest::prelude::*;
    use tokio::sync::mpsc;

    use super::*;
    use crate::endpoint::sort_as_keys;

    /// A tree in memory: each directory key ("" for the root) with its entries.
    struct Tree {
        dirs: BTreeMap<String, Vec<Entry>>,
        keys: BTreeSet<String>,
        /// Reads running now, and the most ever at once.
        now: AtomicUsize,
        most: AtomicUsize,
        /// Directories read in all.
        reads: AtomicUsize,
    }

    fn dir_entry(key: String, id: u64) -> Entry {
        Entry {
            kind: crate::Kind::Dir,
            id,
            ..Entry::file(key, 0, 0)
        }
    }

    impl Tree {
        fn of(files: &[String]) -> Tree {
            let mut dirs: BTreeMap<String, Vec<Entry>> = BTreeMap::new();
            let mut keys = BTreeSet::new();
            dirs.insert(String::new(), Vec::new());
            for file in files {
                let parts: Vec<&str> = file.split('/').collect();
                let mut dir = String::new();
                for (i, part) in parts.iter().enumerate() {
                    let last = i + 1 == parts.len();
                    let key = if last {
                        format!("{dir}{part}")
                    } else {
                        format!("{dir}{part}/")
                    };
                    if keys.insert(key.clone()) {
                        let id = u64::try_from(dirs.len()).unwrap_or(0) + 100;
                        let entry = if last {
                            Entry::file(key.clone(), 1, 0)
                        } else {
                            dirs.insert(key.clone(), Vec::new());
                            dir_entry(key.clone(), id)
                        };
                        dirs.get_mut(&dir).unwrap().push(entry);
                    }
                    dir = key;
                }
            }
            for items in dirs.values_mut() {
                sort_as_keys(items, |e| (e.key.trim_end_matches('/'), e.is_dir()));
            }
            Tree {
                dirs,
                keys,
                now: AtomicUsize::new(0),
                most: AtomicUsize::new(0),
                reads: AtomicUsize::new(0),
            }
        }

        async fn read(&self, key: String) -> Listing {
            self.reads.fetch_add(1, Ordering::SeqCst);
            let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
            self.most.fetch_max(now, Ordering::SeqCst);
            for _ in 0..3 {
                tokio::task::yield_now().await;
            }
            self.now.fetch_sub(1, Ordering::SeqCst);
            if key.contains("bad") {
                return Err(SyncError::Check(format!("{key}: unreadable")));
            }
            Ok(self.dirs[&key].iter().cloned().map(Ok).collect())
        }

        /// What the walk sends: keys, and errors as `!message`.
        async fn walk(&self, ahead: usize, after: Option<&str>, pruned: &[String]) -> Vec<String> {
            let read = |key: String, _: u64| -> BoxFuture<'_, Listing> { Box::pin(self.read(key)) };
            let pruned = pruned.to_vec();
            let prune = move |dir: &str| pruned.iter().any(|p| p == dir);
            let (tx, mut rx) = mpsc::channel(2);
            let walking = async move { walk(&read, 1, ahead, after, &prune, &tx).await };
            let collect = async {
                let mut got = Vec::new();
                while let Some(item) = rx.recv().await {
                    got.push(match item {
                        Ok(e) => e.key,
                        Err(e) => format!("!{e}"),
                    });
                }
                got
            };
            let (walked, got) = tokio::join!(walking, collect);
            walked.unwrap();
            got
        }
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
    }

    fn names() -> impl Strategy<Value = Vec<String>> {
        let part = prop::sample::select(vec!["a", "a-b", "a0", "b", "B"]);
        prop::collection::vec(prop::collection::vec(part, 1..5), 1..40)
            .prop_map(|files| files.into_iter().map(|p| p.join("/")).collect())
    }

    proptest! {
        /// With any read-ahead, the walk sends exactly the keys a walk without read-ahead
        /// sends: in ascending byte order, after `after`, nothing under a pruned directory.
        #[test]
        fn read_ahead_changes_nothing_in_what_is_sent(
            files in names(),
            ahead in 1usize..9,
            after_pick in any::<prop::sample::Index>(),
            prune_pick in any::<prop::sample::Index>(),
        ) {
            let tree = Tree::of(&files);
            let all: Vec<String> = tree.keys.iter().cloned().collect();
            let after = all[after_pick.index(all.len())].clone();
            let dirs: Vec<String> = all.iter().filter(|k| k.ends_with('/')).cloned().collect();
            let pruned: Vec<String> =
                dirs.get(prune_pick.index(dirs.len().max(1))).cloned().into_iter().collect();
            let rt = runtime();
            prop_assert_eq!(rt.block_on(tree.walk(ahead, None, &[])), all.clone());
            let later: Vec<String> = all.iter().filter(|k| **k > after).cloned().collect();
            prop_assert_eq!(rt.block_on(tree.walk(ahead, Some(&after), &[])), later);
            let kept: Vec<String> = all
                .iter()
                .filter(|k| !pruned.iter().any(|p| k.starts_with(p.as_str()) && *k != p))
                .cloned()
                .collect();
            prop_assert_eq!(rt.block_on(tree.walk(ahead, None, &pruned)), kept);
            prop_assert!(tree.most.load(Ordering::SeqCst) <= ahead.max(1) + 1);
        }
    }

    fn wide_tree() -> Tree {
        let files: Vec<String> = (0..30)
            .flat_map(|d| (0..3).map(move |f| format!("d{d:02}/s{f}/file")))
            .collect();
        Tree::of(&files)
    }

    #[test]
    fn reads_run_at_once_only_with_read_ahead() {
        let rt = runtime();
        let serial = wide_tree();
        let walked = rt.block_on(serial.walk(1, None, &[]));
        assert_eq!(walked.len(), 30 + 90 + 90);
        assert_eq!(serial.most.load(Ordering::SeqCst), 1);
        let parallel = Arc::new(wide_tree());
        assert_eq!(rt.block_on(parallel.walk(4, None, &[])), walked);
        let most = parallel.most.load(Ordering::SeqCst);
        assert!((3..=5).contains(&most), "{most} reads at once with 4 ahead");
    }

    #[test]
    fn an_unreadable_directory_is_an_error_entry_and_the_walk_goes_on() {
        let files = ["a/x", "bad/x", "bad/y/z", "c/x"].map(String::from);
        let tree = Tree::of(&files);
        let rt = runtime();
        for ahead in [1, 2, 6] {
            assert_eq!(
                rt.block_on(tree.walk(ahead, None, &[])),
                ["a/", "a/x", "bad/", "!bad/: unreadable", "c/", "c/x"],
                "read-ahead {ahead}"
            );
        }
    }

    #[test]
    fn a_walk_nobody_listens_to_stops() {
        let tree = wide_tree();
        let rt = runtime();
        let read = |key: String, _: u64| -> BoxFuture<'_, Listing> { Box::pin(tree.read(key)) };
        let (tx, rx) = mpsc::channel(1);
        drop(rx);
        let none = |_: &str| false;
        let walking = walk(&read, 1, 4, None, &none, &tx);
        let limit = std::time::Duration::from_secs(30);
        rt.block_on(async { tokio::time::timeout(limit, walking).await })
            .expect("the walk stops instead of hanging")
            .unwrap();
        let reads = tree.reads.load(Ordering::SeqCst);
        // The root, then at most what was read ahead when the first send failed.
        assert!(reads <= 1 + 4, "{reads} directories read for nobody");
    }
}
