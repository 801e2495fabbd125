//! Round trips per operation: an engine wrapper that counts every call a client makes
//! (each is one round trip on a network engine), and the cases that hold the metadata
//! layer to its budget (docs/DESIGN.md, "Round trips per operation").

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use async_trait::async_trait;
use strata_types::{Errno, Ino};

use super::{TestStore, errno_of, mkdir, test_format, test_options, touch};
use crate::kv::{CommitRequest, Key, KvEngine, KvError, KvSnapshot, Link, LinkedScan, Value};
use crate::meta::{Ctx, Meta, MetaOptions};

/// An engine that counts the calls made to it (reads and commits) and reports itself as
/// remote, so clients use their read cache whatever the engine underneath.
#[derive(Debug)]
pub struct Counting {
    inner: Arc<dyn KvEngine>,
    calls: Arc<AtomicU64>,
    /// Whether the engine answered a linked scan in one call.
    scans_linked: Arc<AtomicBool>,
    /// Whether the engine reported what a commit's field updates left.
    reports_fields: AtomicBool,
    /// Barrier beats sent (also counted in `calls`: each is a round trip).
    barriers: AtomicU64,
    /// While true, the change feed hands out nothing (changes wait, in order).
    feed_held: Arc<tokio::sync::watch::Sender<bool>>,
}

impl Counting {
    pub fn new(inner: Arc<dyn KvEngine>) -> Counting {
        Counting {
            inner,
            calls: Arc::default(),
            scans_linked: Arc::default(),
            reports_fields: AtomicBool::new(false),
            barriers: AtomicU64::new(0),
            feed_held: Arc::new(tokio::sync::watch::Sender::new(false)),
        }
    }

    /// Hold back (or let go) every change the client's feed would deliver: as a feed
    /// running behind.
    pub fn hold_feed(&self, held: bool) {
        self.feed_held.send_replace(held);
    }

    /// Barriers since the last call.
    pub fn take_barriers(&self) -> u64 {
        self.barriers.swap(0, Ordering::SeqCst)
    }

    /// Calls since the last [`take`](Self::take).
    pub fn take(&self) -> u64 {
        self.calls.swap(0, Ordering::SeqCst)
    }
}

struct CountingSnapshot {
    inner: Box<dyn KvSnapshot>,
    calls: Arc<AtomicU64>,
    scans_linked: Arc<AtomicBool>,
}

impl CountingSnapshot {
    fn count(&self) {
        self.calls.fetch_add(1, Ordering::SeqCst);
    }
}

#[async_trait]
impl KvSnapshot for CountingSnapshot {
    async fn get(&mut self, key: &[u8]) -> Result<Option<Value>, KvError> {
        self.count();
        self.inner.get(key).await
    }
    async fn get_many(&mut self, keys: &[Key]) -> Result<Vec<Option<Value>>, KvError> {
        self.count();
        self.inner.get_many(keys).await
    }
    async fn scan(
        &mut self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        reverse: bool,
    ) -> Result<Vec<(Key, Value)>, KvError> {
        self.count();
        self.inner.scan(start, end, limit, reverse).await
    }
    async fn get_linked(
        &mut self,
        keys: &[Key],
        link: &Link,
    ) -> Result<Option<Vec<Option<Value>>>, KvError> {
        let got = self.inner.get_linked(keys, link).await?;
        if got.is_some() {
            self.count();
        }
        Ok(got)
    }
    async fn scan_linked(
        &mut self,
        keys: &[Key],
        start: &[u8],
        end: &[u8],
        limit: usize,
        link: &Link,
    ) -> Result<Option<LinkedScan>, KvError> {
        let got = self
            .inner
            .scan_linked(keys, start, end, limit, link)
            .await?;
        if got.is_some() {
            self.count();
            self.scans_linked.store(true, Ordering::SeqCst);
        }
        Ok(got)
    }
}

#[async_trait]
impl KvEngine for Counting {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    async fn snapshot(&self) -> Result<Box<dyn KvSnapshot>, KvError> {
        Ok(Box::new(CountingSnapshot {
            inner: self.inner.snapshot().await?,
            calls: self.calls.clone(),
            scans_linked: self.scans_linked.clone(),
        }))
    }
    async fn commit(&self, req: CommitRequest) -> Result<(), KvError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.commit(req).await
    }
    async fn commit_fields(
        &self,
        req: CommitRequest,
    ) -> Result<Option<Vec<Option<Value>>>, KvError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let fields = self.inner.commit_fields(req).await?;
        if fields.is_some() {
            self.reports_fields.store(true, Ordering::SeqCst);
        }
        Ok(fields)
    }
    fn set_deferred_sync(&self, deferred: bool) {
        self.inner.set_deferred_sync(deferred);
    }
    async fn sync(&self) -> Result<(), KvError> {
        self.inner.sync().await
    }
    fn begin_closing(&self) {
        self.inner.begin_closing();
    }
    fn snapshot_isolation(&self) -> bool {
        self.inner.snapshot_isolation()
    }
    fn native_field_ops(&self) -> bool {
        self.inner.native_field_ops()
    }
    fn remote(&self) -> bool {
        true
    }
    fn origin(&self) -> u64 {
        self.inner.origin()
    }
    async fn subscribe(&self) -> Result<Option<Box<dyn crate::kv::ChangeFeed>>, KvError> {
        Ok(self.inner.subscribe().await?.map(|inner| {
            Box::new(HeldFeed {
                inner,
                held: self.feed_held.subscribe(),
            }) as Box<dyn crate::kv::ChangeFeed>
        }))
    }
    async fn send_beat(&self, seq: u64, barrier: bool) -> Result<(), KvError> {
        // A barrier is a round trip an operation waits for; the follower's periodic
        // beats are not.
        if barrier {
            self.calls.fetch_add(1, Ordering::SeqCst);
            self.barriers.fetch_add(1, Ordering::SeqCst);
        }
        self.inner.send_beat(seq, barrier).await
    }
}

/// A change feed that hands out nothing while held.
struct HeldFeed {
    inner: Box<dyn crate::kv::ChangeFeed>,
    held: tokio::sync::watch::Receiver<bool>,
}

#[async_trait]
impl crate::kv::ChangeFeed for HeldFeed {
    async fn next(&mut self) -> Result<crate::kv::Change, KvError> {
        let change = self.inner.next().await?;
        let _ = self.held.wait_for(|held| !held).await;
        Ok(change)
    }
}

/// `chmod` of `ino` to `mode` by `meta`, as root.
async fn chmod(meta: &Meta, ino: Ino, mode: u16) {
    let change = crate::meta::SetAttr {
        mode: Some(mode),
        ..Default::default()
    };
    meta.setattr(&Ctx::root(), ino, &change).await.unwrap();
}

/// A client on a counting engine, with inode batches large enough that no allocation
/// falls inside a counted step.
pub(super) async fn counted_volume<S: TestStore>(store: &S) -> (Meta, Arc<Counting>) {
    counted_volume_with(store, test_options()).await
}

/// A counted client `a` following the change feed, and a second client `b`.
async fn watched_pair<S: TestStore>(store: &S) -> (Meta, Arc<Counting>, Meta) {
    let (a, counting) = counted_volume(store).await;
    let a = super::following(a).await;
    (a, counting, super::client(store).await)
}

/// [`counted_volume`] with `opts` (inode batches still large).
async fn counted_volume_with<S: TestStore>(store: &S, opts: MetaOptions) -> (Meta, Arc<Counting>) {
    let counting = Arc::new(Counting::new(store.client()));
    let opts = MetaOptions {
        inode_batch: 4096,
        ..opts
    };
    let meta = Meta::new(counting.clone(), opts);
    meta.format(&test_format(0), false).await.expect("format");
    meta.load().await.expect("load");
    (meta, counting)
}

/// `ls -l` of 1,000 entries is one engine call per page of readdirplus where the engine
/// reads linked keys (Redis, PostgreSQL), at most four elsewhere; every entry carries
/// attributes that say it has no xattrs (so the VFS answers `ls`'s getxattr itself).
/// A create after the kernel's negative lookup, and an unlink and a rename after its
/// lookup, are one call each: the commit.
pub async fn listing_and_changes_are_one_call_each<S: TestStore>() {
    let store = S::create();
    let (meta, counting) = counted_volume(&store).await;
    let root = Ctx::root();
    let dir = mkdir(&meta, Ino::ROOT, "d").await.ino;
    for i in 0..1000 {
        touch(&meta, dir, &format!("f{i:04}")).await;
    }
    counting.take();
    let (mut after, mut pages, mut seen) = (None::<Vec<u8>>, 0u64, 0);
    loop {
        let page = meta
            .readdir(dir, after.as_deref(), 512, true)
            .await
            .unwrap();
        pages += 1;
        seen += page.len();
        for e in &page {
            let attr = e.attr.as_ref().expect("readdirplus gives attributes");
            assert!(!attr.xattrs, "{:?} has no xattrs", e.name);
        }
        match page.last() {
            Some(last) if page.len() == 512 => after = Some(last.name.clone()),
            _ => break,
        }
    }
    assert_eq!(seen, 1000);
    let per_page = if counting.scans_linked.load(Ordering::SeqCst) {
        1
    } else {
        // The directory, the entries, their inodes, and a re-check of the three.
        4
    };
    let calls = counting.take();
    assert!(
        calls <= pages * per_page,
        "{calls} engine calls for {pages} pages of readdirplus"
    );

    assert_eq!(
        errno_of(meta.lookup(&root, dir, b"new").await),
        Errno::ENOENT
    );
    counting.take();
    touch(&meta, dir, "new").await;
    assert_eq!(counting.take(), 1, "create after a negative lookup");

    // The kernel looks up both names first.
    meta.lookup(&root, dir, b"f0001").await.unwrap();
    assert_eq!(
        errno_of(meta.lookup(&root, dir, b"moved").await),
        Errno::ENOENT
    );
    counting.take();
    meta.rename(&root, dir, b"f0001", dir, b"moved", Default::default())
        .await
        .unwrap();
    assert_eq!(counting.take(), 1, "rename after a lookup");

    meta.lookup(&root, dir, b"f0002").await.unwrap();
    counting.take();
    meta.unlink(&root, dir, b"f0002").await.unwrap();
    assert_eq!(counting.take(), 1, "unlink after a lookup");
}

/// A value a client assumed from its cache that another client changed meanwhile costs
/// a retry, never a wrong answer: the commit re-checks it.
pub async fn stale_assumptions_are_caught<S: TestStore>() {
    let store = S::create();
    let (first, _) = counted_volume(&store).await;
    let second = Meta::new(Arc::new(Counting::new(store.client())), test_options());
    second.load().await.expect("load");
    let root = Ctx::root();
    let dir = mkdir(&first, Ino::ROOT, "d").await.ino;
    // The first client learns "x" is absent; the second creates it.
    assert_eq!(
        errno_of(first.lookup(&root, dir, b"x").await),
        Errno::ENOENT
    );
    touch(&second, dir, "x").await;
    assert_eq!(
        errno_of(
            first
                .mknod(&root, dir, b"x", strata_types::FileType::Regular, 0o644, 0)
                .await
        ),
        Errno::EEXIST
    );
    // The first client learns "y" exists; the second removes it.
    touch(&second, dir, "y").await;
    first.lookup(&root, dir, b"y").await.unwrap();
    second.unlink(&root, dir, b"y").await.unwrap();
    assert_eq!(
        errno_of(first.unlink(&root, dir, b"y").await),
        Errno::ENOENT
    );
    // The first client saw the directory writable by all; the second takes that away.
    let mode = |m| crate::meta::SetAttr {
        mode: Some(m),
        ..Default::default()
    };
    first.setattr(&root, dir, &mode(0o777)).await.unwrap();
    let user = Ctx {
        uid: 1000,
        gid: 1000,
        groups: Vec::new(),
        pid: 1,
        umask: 0,
        version_keeper: false,
    };
    assert_eq!(
        errno_of(first.lookup(&user, dir, b"z").await),
        Errno::ENOENT
    );
    second.setattr(&root, dir, &mode(0o755)).await.unwrap();
    assert_eq!(
        errno_of(
            first
                .mknod(&user, dir, b"z", strata_types::FileType::Regular, 0o644, 0)
                .await
        ),
        Errno::EACCES
    );
}

/// With the change feed followed (every case's clients do), lookups and attribute reads
/// of unchanged files cost no engine call; another client's change is seen once the
/// feed has delivered it (`sync_changes` waits for that), and a name another client
/// just created is found at once (absences are never answered from the cache).
/// Engines without a feed read the engine every time.
pub async fn unchanged_lookups_cost_nothing<S: TestStore>() {
    let store = S::create();
    let (a, counting, b) = watched_pair(&store).await;
    let root = Ctx::root();
    let dir = mkdir(&a, Ino::ROOT, "d").await.ino;
    let f = touch(&a, dir, "f").await.ino;
    a.lookup(&root, dir, b"f").await.unwrap();
    a.getattr(f).await.unwrap();
    counting.take();
    for _ in 0..3 {
        assert_eq!(a.lookup(&root, dir, b"f").await.unwrap().ino, f);
        assert_eq!(a.getattr(f).await.unwrap().mode & 0o777, 0o644);
    }
    let cached_calls = counting.take();
    if !a.can_follow_changes() {
        assert!(cached_calls >= 6, "{cached_calls} calls without a feed");
        return;
    }
    assert_eq!(cached_calls, 0, "unchanged lookups and stats");

    chmod(&b, f, 0o600).await;
    a.sync_changes().await.unwrap();
    assert_eq!(a.getattr(f).await.unwrap().mode & 0o777, 0o600);
    counting.take();
    assert_eq!(a.getattr(f).await.unwrap().mode & 0o777, 0o600);
    assert_eq!(counting.take(), 0, "read again, then cached again");

    b.rename(&root, dir, b"f", dir, b"g", Default::default())
        .await
        .unwrap();
    a.sync_changes().await.unwrap();
    assert_eq!(errno_of(a.lookup(&root, dir, b"f").await), Errno::ENOENT);
    assert_eq!(a.lookup(&root, dir, b"g").await.unwrap().ino, f);

    b.unlink(&root, dir, b"g").await.unwrap();
    a.sync_changes().await.unwrap();
    assert_eq!(errno_of(a.lookup(&root, dir, b"g").await), Errno::ENOENT);
    assert_eq!(errno_of(a.getattr(f).await), Errno::ENOENT);

    // No waiting: a new name is never hidden by a cached absence.
    assert_eq!(errno_of(a.lookup(&root, dir, b"h").await), Errno::ENOENT);
    let h = touch(&b, dir, "h").await.ino;
    assert_eq!(a.lookup(&root, dir, b"h").await.unwrap().ino, h);
}

/// A lookup answered partly from the cache (the entry) and partly from the engine (the
/// inode, dropped from the cache by an earlier change) may see two moments: another
/// client removing the file in between leaves an entry naming a missing inode. That is
/// a stale cache, not corruption: the lookup runs again on the engine and says ENOENT
/// (found by the fault harness on etcd, where lookups failed with EIO).
pub async fn a_cached_entry_of_a_removed_file_is_not_corruption<S: TestStore>() {
    let store = S::create();
    let (a, counting, b) = watched_pair(&store).await;
    let root = Ctx::root();
    let dir = mkdir(&a, Ino::ROOT, "d").await.ino;
    let f = touch(&a, dir, "f").await.ino;
    assert_eq!(a.lookup(&root, dir, b"f").await.unwrap().ino, f);
    // The inode's records leave a's cache; the entry stays.
    chmod(&b, f, 0o600).await;
    a.sync_changes().await.unwrap();
    // a's feed runs behind while b removes the file.
    counting.hold_feed(true);
    b.unlink(&root, dir, b"f").await.unwrap();
    let seen = a.lookup(&root, dir, b"f").await;
    counting.hold_feed(false);
    assert_eq!(errno_of(seen), Errno::ENOENT);
}

/// A create or mkdir changes its directory's times and link count: by field updates the
/// engine applies (Redis, whose commit reports what they left) or by writing the record
/// whole (PostgreSQL, etcd). Either way the client keeps the directory's record, and the
/// kernel's getattr of it right after costs no call where a change feed keeps the cache
/// trusted. Everywhere the record read back is the one the change left.
pub async fn records_a_commit_changed_are_known<S: TestStore>() {
    let store = S::create();
    let (a, counting) = counted_volume(&store).await;
    let a = super::following(a).await;
    let dir = mkdir(&a, Ino::ROOT, "d").await.ino;
    let before = a.getattr(dir).await.unwrap();
    for i in 0..3u32 {
        touch(&a, dir, &format!("f{i}")).await;
        mkdir(&a, dir, &format!("s{i}")).await;
        a.sync_changes().await.unwrap();
        counting.take();
        let now = a.getattr(dir).await.unwrap();
        let calls = counting.take();
        assert_eq!(now.nlink, before.nlink + i + 1, "a subdirectory's link");
        assert!(now.mtime >= before.mtime);
        // Known: reported by the engine, or computed by the client (engines without
        // server-side field updates read the record and write it whole).
        let known = counting.reports_fields.load(Ordering::SeqCst) || !counting.native_field_ops();
        if a.can_follow_changes() && known {
            assert_eq!(
                calls, 0,
                "the directory's record after a create and a mkdir"
            );
        } else {
            assert!(calls <= 1, "{calls} calls for one getattr");
        }
    }
    // Another client's create changes the record: the cached one is not used.
    let b = super::client(&store).await;
    let seen = a.getattr(dir).await.unwrap();
    mkdir(&b, dir, "other").await;
    a.sync_changes().await.unwrap();
    assert_eq!(a.getattr(dir).await.unwrap().nlink, seen.nlink + 1);
}

/// Every entry of `dir` (names, inode numbers, modes) through pages of 512 with
/// attributes, as the VFS reads them.
async fn list_all(meta: &Meta, dir: Ino) -> Vec<(Vec<u8>, Ino, u16)> {
    let mut out = Vec::new();
    let mut after: Option<Vec<u8>> = None;
    loop {
        let page = meta
            .readdir(dir, after.as_deref(), 512, true)
            .await
            .unwrap();
        let done = page.len() < 512;
        after = page.last().map(|e| e.name.clone());
        for e in page {
            let mode = e.attr.expect("readdirplus attributes").mode;
            out.push((e.name, e.ino, mode));
        }
        if done {
            return out;
        }
    }
}

/// Listing an unchanged directory again reads no entries where a change feed keeps the
/// cache current: one barrier per page (so whatever another client changed before the
/// listing began is in it), nothing else. Another client's create, unlink and chmod, and
/// this client's own unlink, show in the very next listing without waiting.
pub async fn unchanged_listings_read_no_entries<S: TestStore>() {
    let store = S::create();
    let (a, counting, b) = watched_pair(&store).await;
    let root = Ctx::root();
    let dir = mkdir(&a, Ino::ROOT, "d").await.ino;
    for i in 0..1000 {
        touch(&b, dir, &format!("f{i:04}")).await;
    }
    a.sync_changes().await.unwrap();
    let first = list_all(&a, dir).await;
    assert_eq!(first.len(), 1000);
    counting.take();
    counting.take_barriers();
    assert_eq!(list_all(&a, dir).await, first);
    let (calls, barriers) = (counting.take(), counting.take_barriers());
    if !a.can_follow_changes() {
        assert!(calls >= 2 && barriers == 0, "{calls} calls without a feed");
        return;
    }
    assert_eq!(barriers, 2, "a barrier for each of the two pages");
    assert_eq!(calls, 2, "the barriers, nothing read");

    let new = touch(&b, dir, "f0000x").await.ino;
    b.unlink(&root, dir, b"f0999").await.unwrap();
    let f0600 = b.lookup(&root, dir, b"f0600").await.unwrap().ino;
    chmod(&b, f0600, 0o600).await;
    let seen = list_all(&a, dir).await;
    let names: Vec<&[u8]> = seen.iter().map(|(n, _, _)| &n[..]).collect();
    assert_eq!(seen.len(), 1000);
    assert!(seen.iter().any(|(n, i, _)| n == b"f0000x" && *i == new));
    assert!(!names.contains(&&b"f0999"[..]));
    let mode = seen
        .iter()
        .find(|(n, _, _)| n == b"f0600")
        .map(|e| e.2 & 0o7777);
    assert_eq!(mode, Some(0o600), "another client's chmod");

    a.unlink(&root, dir, b"f0001").await.unwrap();
    let names: Vec<Vec<u8>> = list_all(&a, dir).await.into_iter().map(|e| e.0).collect();
    assert_eq!(names.len(), 999);
    assert!(
        !names.contains(&b"f0001".to_vec()),
        "this client's own unlink"
    );
}

/// `--open-cache`: a read-only open of a file whose attributes the feed-kept cache read
/// recently costs no call; a write open, and every open without the option, reads the
/// engine. Another client's chmod is seen by the next read-only open once the feed has
/// delivered it.
pub async fn read_opens_use_the_open_cache<S: TestStore>() {
    let store = S::create();
    let opts = MetaOptions {
        open_cache: std::time::Duration::from_secs(30),
        ..test_options()
    };
    let (a, counting) = counted_volume_with(&store, opts).await;
    let a = super::following(a).await;
    let b = super::client(&store).await;
    let root = Ctx::root();
    let f = touch(&b, Ino::ROOT, "f").await.ino;
    a.lookup(&root, Ino::ROOT, b"f").await.unwrap();
    a.getattr(f).await.unwrap();
    counting.take();
    let attr = a.open(&root, f, 0).await.unwrap();
    let read_open = counting.take();
    assert_eq!(attr.mode & 0o777, 0o644);
    a.open(&root, f, 1).await.unwrap();
    assert!(counting.take() >= 1, "a write open reads the engine");
    if !a.can_follow_changes() {
        assert!(read_open >= 1, "no feed: {read_open} calls");
        return;
    }
    assert_eq!(read_open, 0, "a read-only open of a cached file");
    chmod(&b, f, 0o640).await;
    a.sync_changes().await.unwrap();
    assert_eq!(a.open(&root, f, 0).await.unwrap().mode & 0o777, 0o640);

    // Without the option, every open reads the engine.
    let counting = Arc::new(Counting::new(store.client()));
    let c = Meta::new(counting.clone(), test_options());
    c.load().await.expect("load");
    let c = super::following(c).await;
    c.getattr(f).await.unwrap();
    counting.take();
    c.open(&root, f, 0).await.unwrap();
    assert_eq!(counting.take(), 1, "strict close-to-open");
}

/// A directory this client created and alone changed is listed without reading it: its
/// entries are known from this client's own commits (creates, unlinks, renames in and
/// out), so a listing is one barrier per page. Another client's create in it is in the
/// very next listing.
pub async fn own_new_directories_are_listed_from_the_cache<S: TestStore>() {
    let store = S::create();
    let (a, counting, b) = watched_pair(&store).await;
    let root = Ctx::root();
    let dir = mkdir(&a, Ino::ROOT, "d").await.ino;
    let mut expected: Vec<Vec<u8>> = Vec::new();
    for i in 0..600 {
        let name = format!("f{i:04}");
        touch(&a, dir, &name).await;
        expected.push(name.into_bytes());
    }
    a.unlink(&root, dir, b"f0003").await.unwrap();
    a.rename(&root, dir, b"f0004", dir, b"g0004", Default::default())
        .await
        .unwrap();
    a.rename(
        &root,
        dir,
        b"f0005",
        Ino::ROOT,
        b"moved",
        Default::default(),
    )
    .await
    .unwrap();
    let sub = mkdir(&a, dir, "sub").await.ino;
    touch(&a, sub, "inner").await;
    expected.retain(|n| !matches!(&n[..], b"f0003" | b"f0004" | b"f0005"));
    expected.extend([b"g0004".to_vec(), b"sub".to_vec()]);
    expected.sort();
    counting.take();
    counting.take_barriers();
    let names: Vec<Vec<u8>> = list_all(&a, dir).await.into_iter().map(|e| e.0).collect();
    let inner: Vec<Vec<u8>> = list_all(&a, sub).await.into_iter().map(|e| e.0).collect();
    let (calls, barriers) = (counting.take(), counting.take_barriers());
    assert_eq!(names, expected);
    assert_eq!(inner, [b"inner".to_vec()]);
    if !a.can_follow_changes() {
        assert_eq!(barriers, 0);
        return;
    }
    assert_eq!(
        (calls, barriers),
        (3, 3),
        "a barrier per page, nothing read"
    );

    let other = touch(&b, dir, "f0000x").await.ino;
    let seen = list_all(&a, dir).await;
    assert!(seen.iter().any(|(n, i, _)| n == b"f0000x" && *i == other));
    assert_eq!(seen.len(), expected.len() + 1);
}

/// A permission check through an access control list costs what a check by the mode
/// costs once the list was read: lists are immutable records kept in memory, so a
/// lookup or access(2) on an inode whose attributes are cached makes no engine call.
pub async fn list_checks_cost_what_mode_checks_cost<S: TestStore>() {
    let store = S::create();
    let (a, counting, _b) = watched_pair(&store).await;
    let root = Ctx::root();
    let bob = Ctx {
        uid: 1001,
        gid: 1001,
        groups: Vec::new(),
        pid: 1,
        umask: 0,
        version_keeper: false,
    };
    let shared = a
        .mkdir(&root, Ino::ROOT, b"shared", 0o700)
        .await
        .unwrap()
        .ino;
    let list = crate::acl::Acl {
        owner: 7,
        group: 0,
        mask: Some(5),
        other: 0,
        users: vec![(bob.uid, 5)],
        groups: Vec::new(),
    };
    let name = crate::acl::XATTR_ACCESS;
    a.setxattr(&root, shared, name, &list.to_xattr(), Default::default())
        .await
        .unwrap();
    let plain = mkdir(&a, Ino::ROOT, "plain").await.ino;
    let mut calls = Vec::new();
    for dir in [shared, plain] {
        touch(&a, dir, "f").await;
        // Once each, so what they read is cached together: a lookup and an access need
        // different records of the directory, each set one state (kv/readcache/views.rs).
        a.lookup(&bob, dir, b"f").await.unwrap();
        a.access(&bob, dir, crate::meta::MAY_READ | crate::meta::MAY_EXEC)
            .await
            .unwrap();
        counting.take();
        for _ in 0..3 {
            a.lookup(&bob, dir, b"f").await.unwrap();
            a.access(&bob, dir, crate::meta::MAY_READ | crate::meta::MAY_EXEC)
                .await
                .unwrap();
        }
        calls.push(counting.take());
    }
    assert_eq!(calls[0], calls[1], "through a list vs by the mode");
    if a.can_follow_changes() {
        assert_eq!(calls[0], 0, "cached attributes, cached list");
    }
}
