//! WebDAV locks kept in the volume's metadata, so every `strata webdav` process of a
//! volume sees the same locks and a lock lapses at its timeout even if the server that
//! granted it died.
//!
//! The table ([`LockTable`], JSON) is the xattr `user.dav.locks` of an empty file
//! `.strata-webdav/locks` at the volume root. A change writes a new file with the new
//! table and renames it over the old one only if the old one is still the file it read
//! (a compare-and-swap decided in the rename's transaction, [`Vfs::rename_replacing`]);
//! a server that lost the race reads again and retries. A check costs one lookup while
//! the table is unchanged (the parsed table is kept by the file's inode).

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dav_server::davpath::DavPath;
use dav_server::ls::{DavLock, DavLockSystem, LsFuture};
use futures::FutureExt;
use parking_lot::Mutex;
use strata_types::{Errno, Ino};
use strata_vfs::{Ctx, Vfs};
use xmltree::Element;

use crate::error::WebDavError;
use crate::fs::HIDDEN_DIR;
use crate::locktable::{LockTable, StoredLock, Submitted, TABLE_VERSION};

/// The file whose xattr holds the table.
const TABLE_FILE: &[u8] = b"locks";
/// The xattr holding the table.
pub const TABLE_XATTR: &[u8] = b"user.dav.locks";
/// RENAME_NOREPLACE.
const NOREPLACE: u32 = 1;
/// Compare-and-swap attempts before a change gives up.
const MAX_ATTEMPTS: usize = 64;

/// Tunables of the lock system.
#[derive(Clone, Debug)]
pub struct LockOptions {
    /// The served directory's volume path, URL-encoded (`""` for the volume root).
    pub prefix: String,
    /// Longest timeout granted (an infinite request gets this): a lock of a client that
    /// went away lapses within it.
    pub max_timeout: Duration,
}

/// The volume path of the directory `subdir` (`None`: the volume root), URL-encoded as
/// the paths of a server of the volume root are, without a trailing slash.
pub fn lock_prefix(subdir: Option<&str>) -> String {
    let mut encoded = String::new();
    for part in subdir.unwrap_or("").split('/').filter(|p| !p.is_empty()) {
        encoded.push('/');
        for b in part.bytes() {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
                encoded.push(char::from(b));
            } else {
                encoded.push_str(&format!("%{b:02X}"));
            }
        }
    }
    // The same spelling as the paths of a server of the volume root.
    match DavPath::new(&encoded) {
        Ok(p) if !encoded.is_empty() => p.as_url_string().trim_end_matches('/').to_string(),
        _ => String::new(),
    }
}

impl LockOptions {
    /// The options of a server of `subdir` (`--subdir`; `None` for the volume root).
    pub fn for_subdir(subdir: Option<&str>) -> LockOptions {
        LockOptions {
            prefix: lock_prefix(subdir),
            ..LockOptions::default()
        }
    }
}

impl Default for LockOptions {
    fn default() -> Self {
        LockOptions {
            prefix: String::new(),
            max_timeout: Duration::from_secs(3600),
        }
    }
}

/// The lock system of one server, as one request sees it.
#[derive(Clone, Debug)]
pub struct VolumeLocks {
    inner: Arc<Inner>,
    /// The table as this request first read it: a PROPFIND of many entries reads it
    /// once. Changes always read afresh.
    seen: Arc<Mutex<Option<Snapshot>>>,
    /// The volume path of the request's `/` ([`lock_prefix`]).
    prefix: Arc<str>,
}

#[derive(Debug)]
struct Inner {
    vfs: Arc<Vfs>,
    ctx: Ctx,
    opts: LockOptions,
    /// `.strata-webdav` at the volume root, once found.
    dir: tokio::sync::OnceCell<Ino>,
    /// The last table read, by the inode of its file.
    cached: Mutex<Option<(Ino, Arc<LockTable>)>>,
}

/// The table as read: the file it came from (if any) and its contents.
type Snapshot = (Option<Ino>, Arc<LockTable>);

fn now_ms() -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
}

/// A stored table, of this version.
fn parse_table(raw: &[u8]) -> Result<LockTable, WebDavError> {
    let table: LockTable = serde_json::from_slice(raw)
        .map_err(|e| WebDavError::LockTable(format!("not a lock table: {e}")))?;
    if table.v != TABLE_VERSION {
        return Err(WebDavError::LockTable(format!(
            "version {} (this server reads {TABLE_VERSION})",
            table.v
        )));
    }
    Ok(table)
}

impl VolumeLocks {
    /// The lock system of a server of the volume `vfs`, acting as `ctx`.
    pub fn new(vfs: Arc<Vfs>, ctx: Ctx, opts: LockOptions) -> VolumeLocks {
        VolumeLocks {
            prefix: opts.prefix.as_str().into(),
            inner: Arc::new(Inner {
                vfs,
                ctx,
                opts,
                dir: tokio::sync::OnceCell::new(),
                cached: Mutex::new(None),
            }),
            seen: Arc::default(),
        }
    }

    /// The same lock system for a new request whose `/` is the volume path `prefix`
    /// (the server's root when `None`).
    pub fn for_request(&self, prefix: Option<&str>) -> VolumeLocks {
        VolumeLocks {
            inner: self.inner.clone(),
            seen: Arc::default(),
            prefix: prefix.unwrap_or(&self.inner.opts.prefix).into(),
        }
    }

    /// The table as this request saw it first.
    async fn read(&self) -> Result<Snapshot, WebDavError> {
        if let Some(seen) = self.seen.lock().clone() {
            return Ok(seen);
        }
        let snapshot = self.read_fresh().await?;
        *self.seen.lock() = Some(snapshot.clone());
        Ok(snapshot)
    }

    async fn dir(&self) -> Result<Ino, Errno> {
        let i = &self.inner;
        i.dir
            .get_or_try_init(|| i.vfs.make_dirs(&i.ctx, Ino::ROOT, &[HIDDEN_DIR], 0o700))
            .await
            .copied()
    }

    /// The volume path of a request path.
    fn volume_path(&self, path: &DavPath) -> String {
        format!("{}{}", self.prefix, path.as_url_string())
    }

    /// The request path of a volume path (which is at or below the served directory).
    fn dav_path(&self, volume_path: &str) -> Option<DavPath> {
        let own = volume_path
            .strip_prefix(&*self.prefix)
            .unwrap_or(volume_path);
        DavPath::new(if own.is_empty() { "/" } else { own }).ok()
    }

    /// The current table.
    async fn read_fresh(&self) -> Result<Snapshot, WebDavError> {
        let fail = |e: Errno| WebDavError::Fs {
            what: "reading the lock table".into(),
            errno: e,
        };
        let i = &self.inner;
        let dir = match self.dir().await {
            Ok(dir) => dir,
            // A read-only server of a volume that never had a lock: there are none.
            Err(Errno::EROFS) => return Ok((None, Arc::new(LockTable::new()))),
            Err(e) => return Err(fail(e)),
        };
        for _ in 0..MAX_ATTEMPTS {
            let ino = match i.vfs.lookup(&i.ctx, dir, TABLE_FILE).await {
                Ok(e) => e.ino,
                Err(Errno::ENOENT) => {
                    // Made empty once, so later lookups find it (and a client with a
                    // change feed answers them from its cache): a missing name would be
                    // asked of the engine on every request.
                    match self.swap(None, LockTable::new()).await {
                        Ok(_) => continue,
                        Err(e) => {
                            tracing::debug!("cannot create the lock table ({e}): none yet");
                            return Ok((None, Arc::new(LockTable::new())));
                        }
                    }
                }
                Err(e) => return Err(fail(e)),
            };
            if let Some((cached_ino, table)) = i.cached.lock().as_ref()
                && *cached_ino == ino
            {
                return Ok((Some(ino), table.clone()));
            }
            let raw = match i.vfs.getxattr(&i.ctx, ino, TABLE_XATTR, 0).await {
                Ok(raw) => raw,
                // Replaced by another server between the lookup and the read: again.
                Err(Errno::ENOENT) => continue,
                Err(e) => return Err(fail(e)),
            };
            let table = Arc::new(parse_table(&raw)?);
            *i.cached.lock() = Some((ino, table.clone()));
            return Ok((Some(ino), table));
        }
        Err(WebDavError::LockTable(format!(
            "replaced {MAX_ATTEMPTS} times while being read"
        )))
    }

    /// Store `table` in place of the one read from `old`: false if another server
    /// changed it meanwhile.
    async fn swap(&self, old: Option<Ino>, table: LockTable) -> Result<bool, WebDavError> {
        let i = &self.inner;
        let fail = |e: Errno| WebDavError::Fs {
            what: "writing the lock table".into(),
            errno: e,
        };
        let dir = self.dir().await.map_err(fail)?;
        let json = serde_json::to_vec(&table)
            .map_err(|e| WebDavError::LockTable(format!("encoding: {e}")))?;
        let tmp = format!("locks.{}", uuid::Uuid::new_v4().simple()).into_bytes();
        // An empty regular file (no handle to open and release), its table in an xattr.
        let entry = i
            .vfs
            .mknod(&i.ctx, dir, &tmp, 0o100600, 0)
            .await
            .map_err(fail)?;
        let written = i
            .vfs
            .setxattr(&i.ctx, entry.ino, TABLE_XATTR, &json, 0)
            .await;
        let renamed = match (written, old) {
            (Err(e), _) => Err(e),
            (Ok(()), Some(old)) => {
                i.vfs
                    .rename_replacing(&i.ctx, (dir, &tmp), (dir, TABLE_FILE), old)
                    .await
            }
            (Ok(()), None) => {
                i.vfs
                    .rename(&i.ctx, dir, &tmp, dir, TABLE_FILE, NOREPLACE)
                    .await
            }
        };
        match renamed {
            Ok(()) => {
                let table = Arc::new(table);
                *i.cached.lock() = Some((entry.ino, table.clone()));
                *self.seen.lock() = Some((Some(entry.ino), table));
                Ok(true)
            }
            Err(e) => {
                if let Err(e) = i.vfs.unlink(&i.ctx, dir, &tmp).await {
                    tracing::warn!("removing an unused lock table: errno {e}");
                }
                match e {
                    Errno::ESTALE | Errno::EEXIST | Errno::ENOENT => Ok(false),
                    e => Err(fail(e)),
                }
            }
        }
    }

    /// Apply `change` to the current table and store the result, retrying when another
    /// server changed the table first. `change` returns its answer and whether it
    /// changed the table (lapsed locks are dropped on the way).
    async fn update<T>(
        &self,
        mut change: impl FnMut(&mut LockTable, i64) -> (T, bool),
    ) -> Result<T, WebDavError> {
        for _ in 0..MAX_ATTEMPTS {
            let (file, current) = self.read_fresh().await?;
            let mut table = (*current).clone();
            let now = now_ms();
            let pruned = table.prune(now);
            let (answer, changed) = change(&mut table, now);
            if !changed && !pruned {
                return Ok(answer);
            }
            if self.swap(file, table).await? {
                return Ok(answer);
            }
        }
        Err(WebDavError::LockTable(format!(
            "gave up after {MAX_ATTEMPTS} conflicting changes"
        )))
    }

    /// A stored lock as dav-server wants it; `at` is the path of the request (named if
    /// the stored path cannot be parsed).
    fn to_dav(&self, l: &StoredLock, at: &DavPath) -> DavLock {
        let owner = l
            .owner
            .as_deref()
            .and_then(|xml| Element::parse(xml.as_bytes()).ok())
            .map(Box::new);
        DavLock {
            token: l.token.clone(),
            path: Box::new(self.dav_path(&l.path).unwrap_or_else(|| at.clone())),
            principal: l.principal.clone(),
            owner,
            timeout_at: l
                .expires_ms
                .and_then(|ms| u64::try_from(ms).ok())
                .map(|ms| UNIX_EPOCH + Duration::from_millis(ms)),
            timeout: l.timeout_s.map(Duration::from_secs),
            shared: l.shared,
            deep: l.deep,
        }
    }

    /// A stand-in for the lock in the way when the table cannot be read: the request is
    /// refused (423) rather than let through unchecked.
    fn unknown_lock(&self, path: &DavPath, e: &WebDavError) -> DavLock {
        tracing::error!("WebDAV locks unavailable, refusing {path}: {e}");
        DavLock {
            token: String::new(),
            path: Box::new(path.clone()),
            principal: None,
            owner: None,
            timeout_at: None,
            timeout: None,
            shared: false,
            deep: false,
        }
    }

    /// The timeout granted for the one asked for, and in milliseconds.
    fn granted_timeout(&self, asked: Option<Duration>) -> (Duration, i64) {
        let max = self.inner.opts.max_timeout;
        let granted = asked
            .map_or(max, |t| t.min(max))
            .max(Duration::from_secs(1));
        let ms = i64::try_from(granted.as_millis()).unwrap_or(i64::MAX);
        (granted, ms)
    }

    async fn do_lock(
        &self,
        path: &DavPath,
        principal: Option<&str>,
        owner: Option<&Element>,
        timeout: Option<Duration>,
        shared: bool,
        deep: bool,
    ) -> Result<DavLock, DavLock> {
        let vpath = self.volume_path(path);
        let (timeout, timeout_ms) = self.granted_timeout(timeout);
        let owner = owner.and_then(owner_xml);
        let token = uuid::Uuid::new_v4().urn().to_string();
        let result = self
            .update(|table, now| {
                if let Some(l) = table.conflict(&vpath, shared, deep, now) {
                    return (Err(l.clone()), false);
                }
                let new = StoredLock {
                    token: token.clone(),
                    path: vpath.clone(),
                    principal: principal.map(str::to_string),
                    owner: owner.clone(),
                    expires_ms: Some(now.saturating_add(timeout_ms)),
                    timeout_s: Some(timeout.as_secs()),
                    shared,
                    deep,
                };
                table.locks.push(new.clone());
                (Ok(new), true)
            })
            .await;
        match result {
            Ok(Ok(new)) => Ok(self.to_dav(&new, path)),
            Ok(Err(in_the_way)) => Err(self.to_dav(&in_the_way, path)),
            Err(e) => Err(self.unknown_lock(path, &e)),
        }
    }

    async fn do_refresh(
        &self,
        path: &DavPath,
        token: &str,
        timeout: Option<Duration>,
    ) -> Result<DavLock, ()> {
        let vpath = self.volume_path(path);
        let (timeout, timeout_ms) = self.granted_timeout(timeout);
        let result = self
            .update(|table, now| match table.find(&vpath, token, now) {
                Some(at) => {
                    let l = &mut table.locks[at];
                    l.expires_ms = Some(now.saturating_add(timeout_ms));
                    l.timeout_s = Some(timeout.as_secs());
                    (Some(l.clone()), true)
                }
                None => (None, false),
            })
            .await;
        match result {
            Ok(Some(l)) => Ok(self.to_dav(&l, path)),
            Ok(None) => Err(()),
            Err(e) => {
                tracing::error!("refreshing a WebDAV lock: {e}");
                Err(())
            }
        }
    }

    async fn do_unlock(&self, path: &DavPath, token: &str) -> Result<(), ()> {
        let vpath = self.volume_path(path);
        let result = self
            .update(|table, now| match table.find(&vpath, token, now) {
                Some(at) => {
                    table.locks.remove(at);
                    (true, true)
                }
                None => (false, false),
            })
            .await;
        match result {
            Ok(true) => Ok(()),
            Ok(false) => Err(()),
            Err(e) => {
                tracing::error!("removing a WebDAV lock: {e}");
                Err(())
            }
        }
    }

    async fn do_check(
        &self,
        path: &DavPath,
        who: Submitted<'_>,
        deep: bool,
    ) -> Result<(), DavLock> {
        let (_, table) = self.read().await.map_err(|e| self.unknown_lock(path, &e))?;
        table
            .check(&self.volume_path(path), who, deep, now_ms())
            .map_err(|l| self.to_dav(l, path))
    }

    async fn do_discover(&self, path: &DavPath) -> Vec<DavLock> {
        match self.read().await {
            Ok((_, table)) => table
                .discover(&self.volume_path(path), now_ms())
                .iter()
                .map(|l| self.to_dav(l, path))
                .collect(),
            Err(e) => {
                tracing::error!("listing WebDAV locks: {e}");
                Vec::new()
            }
        }
    }

    async fn do_delete(&self, path: &DavPath) -> Result<(), ()> {
        let vpath = self.volume_path(path);
        self.update(|table, _| ((), table.remove_under(&vpath)))
            .await
            .map_err(|e| tracing::error!("removing the WebDAV locks of {path}: {e}"))
    }
}

/// The `<D:owner>` element as XML text. dav-server gives it the prefix `D` without
/// declaring it (the client may have used a default namespace): declared here, or the
/// element could not be written.
fn owner_xml(owner: &Element) -> Option<String> {
    let mut owner = owner.clone();
    if let (Some(prefix), Some(ns)) = (owner.prefix.clone(), owner.namespace.clone()) {
        let mut declared = owner
            .namespaces
            .take()
            .unwrap_or_else(xmltree::Namespace::empty);
        declared.force_put(prefix, ns);
        owner.namespaces = Some(declared);
    }
    let mut xml = Vec::new();
    owner.write(&mut xml).ok()?;
    String::from_utf8(xml).ok()
}

impl DavLockSystem for VolumeLocks {
    fn lock(
        &'_ self,
        path: &DavPath,
        principal: Option<&str>,
        owner: Option<&Element>,
        timeout: Option<Duration>,
        shared: bool,
        deep: bool,
    ) -> LsFuture<'_, Result<DavLock, DavLock>> {
        let (path, principal, owner) =
            (path.clone(), principal.map(str::to_string), owner.cloned());
        async move {
            self.do_lock(
                &path,
                principal.as_deref(),
                owner.as_ref(),
                timeout,
                shared,
                deep,
            )
            .await
        }
        .boxed()
    }

    fn unlock(&'_ self, path: &DavPath, token: &str) -> LsFuture<'_, Result<(), ()>> {
        let (path, token) = (path.clone(), token.to_string());
        async move { self.do_unlock(&path, &token).await }.boxed()
    }

    fn refresh(
        &'_ self,
        path: &DavPath,
        token: &str,
        timeout: Option<Duration>,
    ) -> LsFuture<'_, Result<DavLock, ()>> {
        let (path, token) = (path.clone(), token.to_string());
        async move { self.do_refresh(&path, &token, timeout).await }.boxed()
    }

    fn check(
        &'_ self,
        path: &DavPath,
        principal: Option<&str>,
        ignore_principal: bool,
        deep: bool,
        submitted_tokens: &[String],
    ) -> LsFuture<'_, Result<(), DavLock>> {
        let (path, principal, tokens) = (
            path.clone(),
            principal.map(str::to_string),
            submitted_tokens.to_vec(),
        );
        async move {
            let who = Submitted {
                principal: principal.as_deref(),
                ignore_principal,
                tokens: &tokens,
            };
            self.do_check(&path, who, deep).await
        }
        .boxed()
    }

    fn discover(&'_ self, path: &DavPath) -> LsFuture<'_, Vec<DavLock>> {
        let path = path.clone();
        async move { self.do_discover(&path).await }.boxed()
    }

    fn delete(&'_ self, path: &DavPath) -> LsFuture<'_, Result<(), ()>> {
        let path = path.clone();
        async move { self.do_delete(&path).await }.boxed()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code
    use super::*;

    /// An owner in the client's default namespace, given the prefix `D` by dav-server,
    /// comes back whole.
    #[test]
    fn owners_in_a_default_namespace_round_trip() {
        let xml = b"<?xml version=\"1.0\"?><lockinfo xmlns='DAV:'><owner>litmus</owner></lockinfo>";
        let info = Element::parse(&xml[..]).unwrap();
        let mut owner = info.get_child("owner").unwrap().clone();
        owner.prefix = Some("D".into());
        let back = Element::parse(owner_xml(&owner).unwrap().as_bytes()).unwrap();
        assert_eq!(back.name, "owner");
        assert_eq!(back.namespace.as_deref(), Some("DAV:"));
        assert_eq!(back.get_text().as_deref(), Some("litmus"));
    }

    /// A server of a subdirectory stores the same path as a server of the volume root.
    #[test]
    fn subdir_prefixes_spell_paths_like_the_root_server() {
        let sub = LockOptions::for_subdir(Some("/data sets/ä/"));
        let root_path = DavPath::new("/data%20sets/%C3%A4/x").unwrap();
        let sub_path = DavPath::new("/x").unwrap();
        assert_eq!(
            format!("{}{}", sub.prefix, sub_path.as_url_string()),
            root_path.as_url_string()
        );
        assert_eq!(LockOptions::for_subdir(None).prefix, "");
        assert_eq!(LockOptions::for_subdir(Some("/")).prefix, "");
    }
}
