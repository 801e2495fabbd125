//! Sessions and open files: every client registers a session and heartbeats; open files
//! are counted per client, and an unlinked file that is still open is "sustained" by the
//! session until its last close. A session that stops heartbeating is cleaned by any live
//! client: its locks are released and its sustained files deleted.

use serde::{Deserialize, Serialize};
use strata_types::{Attr, Errno, FileType, Ino, Nanos};

use super::access::{MAY_READ, MAY_WRITE, check_access};
use super::acl_store::AclCache;
use super::delete::{Unlinked, delete_sustained};
use super::locks::release_session_locks;
use super::{Ctx, Meta, NEXT_SESSION, get_inode, now_ns};
use crate::codec;
use crate::error::{MetaError, Result, posix};
use crate::keys;
use crate::kv::{Key, Txn, prefix_end};

/// What a session says about itself (stored as JSON under `SI sid`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionInfo {
    #[serde(default)]
    pub sid: u64,
    pub host: String,
    pub pid: u32,
    pub mount_point: String,
    pub version: String,
    /// Start time, ns.
    pub started_at: Nanos,
    /// Expiry time as last heartbeated, ns (filled in when listing).
    #[serde(default)]
    pub expires_at: Nanos,
    /// The cache group this client is in, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_group: Option<super::GroupMember>,
    /// The client stages writes locally (`--writeback`): other clients wait for its
    /// blocks to land rather than failing at once.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub writeback: bool,
}

/// Open counts and kept-alive inodes of a client, passed to the client that takes its
/// session over.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenState {
    /// Inodes open here, with how many handles.
    pub open: Vec<(u64, u32)>,
    /// Inodes unlinked while open here: deleted at their last close.
    pub sustained: Vec<u64>,
}

/// A session with what it holds (`Meta::session_detail`).
#[derive(Clone, Debug)]
pub struct SessionDetail {
    pub info: SessionInfo,
    /// Inodes unlinked while open here: kept until this session closes them.
    pub sustained: Vec<Ino>,
    /// Inodes this session holds flocks or POSIX locks on.
    pub locked: Vec<Ino>,
}

/// Sustained inodes of a dead session deleted per transaction.
const SUSTAINED_BATCH: usize = 256;
/// Counter record: when a client last started cleaning stale sessions (ns).
const LAST_SESSION_CLEANUP: &str = "lastSessionCleanup";

/// Delete a session's sustained inodes `batch` (their records read in one engine call):
/// each one's `SS` record goes, and the inode with it unless it has links again.
async fn delete_sustained_batch(
    tx: &mut Txn<'_>,
    sid: u64,
    batch: &[Ino],
    flags_kept: bool,
) -> Result<Vec<Unlinked>> {
    let records: Vec<Key> = batch
        .iter()
        .flat_map(|&ino| [keys::inode_core(ino), keys::inode_fields(ino)])
        .collect();
    tx.get_many(&records).await?;
    let mut unlinked = Vec::with_capacity(batch.len());
    for &ino in batch {
        match get_inode(tx, ino).await? {
            // Deletes the `SS` record with the inode.
            Some(inode) if inode.fields.nlink == 0 => {
                unlinked.push(delete_sustained(tx, sid, &inode, flags_kept).await?);
            }
            _ => tx.delete(keys::sustained(sid, ino)),
        }
    }
    Ok(unlinked)
}

/// Open-flag bits that matter for access checks.
const O_ACCMODE: u32 = 3;
const O_WRONLY: u32 = 1;
const O_RDWR: u32 = 2;
const O_TRUNC: u32 = 0o1000;
const O_APPEND: u32 = 0o2000;

impl Meta {
    /// This client's session id (0 before [`Meta::new_session`]).
    pub fn session_id(&self) -> u64 {
        self.sid.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn expiry(&self) -> Nanos {
        let timeout = i64::try_from(self.opts.session_timeout.as_nanos()).unwrap_or(i64::MAX);
        now_ns().saturating_add(timeout)
    }

    /// Register this client's session.
    pub async fn new_session(&self, info: SessionInfo) -> Result<u64> {
        let sid = self.alloc_counter(NEXT_SESSION, 1).await?;
        let info = SessionInfo { sid, ..info };
        let json = serde_json::to_vec(&info).map_err(|e| MetaError::Invalid(e.to_string()))?;
        let json = &json;
        let expiry = self.expiry();
        self.txn(|tx| {
            Box::pin(async move {
                tx.put(keys::session_expiry(sid), codec::encode_slots(&[expiry]));
                tx.put(keys::session_info(sid), json.clone());
                Ok(())
            })
        })
        .await?;
        self.sid.store(sid, std::sync::atomic::Ordering::Relaxed);
        Ok(sid)
    }

    /// Extend this session's life; also flushes pending usage counters.
    pub async fn heartbeat(&self) -> Result<()> {
        let sid = self.session_id();
        if sid == 0 {
            return Err(MetaError::Invalid("no session to heartbeat".into()));
        }
        let expiry = self.expiry();
        self.txn(|tx| {
            Box::pin(async move {
                let key = keys::session_expiry(sid);
                if tx.get(&key).await?.is_none() {
                    // Another client judged us dead and cleaned our session.
                    return Err(MetaError::Invalid(format!(
                        "session {sid} was cleaned as stale"
                    )));
                }
                tx.put(key, codec::encode_slots(&[expiry]));
                Ok(())
            })
        })
        .await?;
        self.flush_usage().await
    }

    /// Take over session `sid` of a client this one replaces (a mount handed over, or
    /// restarted after a crash): its locks and the files it keeps alive become this
    /// client's, and the session this client registered is removed (it holds nothing
    /// yet). Fails if `sid` is gone, as when it was cleaned as stale.
    pub async fn adopt_session(&self, sid: u64) -> Result<()> {
        let own = self.session_id();
        if own == sid {
            return Ok(());
        }
        let expiry = self.expiry();
        self.txn(|tx| {
            Box::pin(async move {
                if tx.get(&keys::session_expiry(sid)).await?.is_none() {
                    return Err(MetaError::Invalid(format!(
                        "session {sid} is gone (cleaned as stale?): nothing to take over"
                    )));
                }
                let info = match tx.get(&keys::session_info(own)).await? {
                    Some(json) => {
                        let mut info: SessionInfo = serde_json::from_slice(&json)
                            .map_err(|e| MetaError::Invalid(e.to_string()))?;
                        info.sid = sid;
                        serde_json::to_vec(&info).map_err(|e| MetaError::Invalid(e.to_string()))?
                    }
                    None => return Err(MetaError::Invalid(format!("session {own} has no record"))),
                };
                tx.put(keys::session_expiry(sid), codec::encode_slots(&[expiry]));
                tx.put(keys::session_info(sid), info);
                tx.delete(keys::session_expiry(own));
                tx.delete(keys::session_info(own));
                Ok(())
            })
        })
        .await?;
        self.sid.store(sid, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// What this client has open and keeps alive, for the client that takes its session
    /// over ([`Meta::restore_open_state`]).
    pub fn open_state(&self) -> OpenState {
        let mut open: Vec<(u64, u32)> = self
            .open_files
            .lock()
            .iter()
            .map(|(&ino, &n)| (ino.0, n))
            .collect();
        open.sort_unstable();
        let mut sustained: Vec<u64> = self.sustained_here.lock().iter().map(|i| i.0).collect();
        sustained.sort_unstable();
        OpenState { open, sustained }
    }

    /// Continue from another client's [`Meta::open_state`] (this client has nothing open).
    pub fn restore_open_state(&self, state: &OpenState) {
        let open = state.open.iter().map(|&(ino, n)| (Ino(ino), n));
        self.open_files.lock().extend(open);
        let sustained = state.sustained.iter().map(|&ino| Ino(ino));
        self.sustained_here.lock().extend(sustained);
    }

    /// The client is shutting down: from now on a transaction that finds the engine
    /// unreachable fails after one more attempt instead of retrying for
    /// `unavailable_timeout`. Called once buffered writes are committed (or given up on),
    /// before background jobs stop and the session closes.
    ///
    /// Network engines only: SQLite reports a database another process holds locked as
    /// unavailable too, and that always clears within moments (an `fsck` started as the
    /// mount unmounts must not cost the mount its last usage update).
    pub fn begin_closing(&self) {
        if self.engine().remote() {
            self.options().retry.closing.cancel();
            self.engine().begin_closing();
        }
    }

    /// End this client's session: flush counters, release its locks, delete files it kept
    /// alive, remove its records.
    pub async fn close_session(&self) -> Result<()> {
        self.flush_usage().await?;
        let sid = self.session_id();
        if sid != 0 {
            self.clean_session(sid).await?;
            self.sid.store(0, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(())
    }

    /// Every registered session with its expiry.
    pub async fn list_sessions(&self) -> Result<Vec<SessionInfo>> {
        self.txn(|tx| {
            Box::pin(async move {
                let prefix = keys::session_expiry_prefix();
                let rows = tx
                    .scan(&prefix, &prefix_end(&prefix), usize::MAX, false)
                    .await?;
                let mut out = Vec::with_capacity(rows.len());
                for (key, value) in rows {
                    let sid = keys::be_u64(&key, 2)
                        .ok_or_else(|| MetaError::corrupt(&key, "short key"))?;
                    let expires_at = codec::decode_slots(&key, &value, 1)?[0];
                    let info_key = keys::session_info(sid);
                    let info = match tx.get(&info_key).await? {
                        Some(v) => serde_json::from_slice(&v)
                            .map_err(|e| MetaError::corrupt(&info_key, e.to_string()))?,
                        None => SessionInfo::default(),
                    };
                    out.push(SessionInfo {
                        sid,
                        expires_at,
                        ..info
                    });
                }
                Ok(out)
            })
        })
        .await
    }

    /// Clean every session whose expiry is before `now` (ns). Returns how many.
    pub async fn clean_stale_sessions(&self, now: Nanos) -> Result<usize> {
        let stale: Vec<u64> = self
            .list_sessions()
            .await?
            .into_iter()
            .filter(|s| s.expires_at < now && s.sid != self.session_id())
            .map(|s| s.sid)
            .collect();
        for sid in &stale {
            tracing::info!(sid, "cleaning stale session");
            self.clean_session(*sid).await?;
        }
        Ok(stale.len())
    }

    /// [`Meta::clean_stale_sessions`], unless some client started a cleaning less than
    /// `every` ago (the volume's `lastSessionCleanup` record): each heartbeat of each client
    /// costs the engine one small transaction, and the scan of every session runs about
    /// once per `every` for the whole volume, not once per client. Returns how many
    /// sessions this call cleaned.
    pub async fn clean_stale_sessions_if_due(
        &self,
        now: Nanos,
        every: std::time::Duration,
    ) -> Result<usize> {
        let every = i64::try_from(every.as_nanos()).unwrap_or(i64::MAX);
        let due = self
            .txn(|tx| {
                Box::pin(async move {
                    let key = keys::counter(LAST_SESSION_CLEANUP);
                    let last = codec::decode_counter(&key, tx.get(&key).await?.as_deref())?;
                    // A stamp from a clock far ahead does not stop cleaning for long.
                    let recent =
                        last <= now.saturating_add(every) && now.saturating_sub(last) < every;
                    if !recent {
                        tx.put(key, codec::encode_slots(&[now]));
                    }
                    Ok(!recent)
                })
            })
            .await?;
        if !due {
            return Ok(0);
        }
        self.clean_stale_sessions(now).await
    }

    async fn clean_session(&self, sid: u64) -> Result<()> {
        release_session_locks(self, sid).await?;
        let flags_kept = self.keeps_xattr_flags();
        loop {
            let batch = self.sustained_inodes(sid, SUSTAINED_BATCH).await?;
            if batch.is_empty() {
                break;
            }
            let batch = &batch;
            let unlinked = self
                .txn(|tx| Box::pin(delete_sustained_batch(tx, sid, batch, flags_kept)))
                .await?;
            for fate in unlinked {
                self.after_unlink(fate);
            }
        }
        self.txn(|tx| {
            Box::pin(async move {
                tx.delete(keys::session_expiry(sid));
                tx.delete(keys::session_info(sid));
                Ok(())
            })
        })
        .await
    }

    async fn sustained_inodes(&self, sid: u64, limit: usize) -> Result<Vec<Ino>> {
        self.session_inodes(keys::sustained_prefix(sid), limit)
            .await
    }

    /// Inodes of a session's records under `prefix` (sustained, locked), up to `limit`.
    pub(crate) async fn session_inodes(&self, prefix: Key, limit: usize) -> Result<Vec<Ino>> {
        self.txn(|tx| {
            let prefix = prefix.clone();
            Box::pin(async move {
                let rows = tx.scan(&prefix, &prefix_end(&prefix), limit, false).await?;
                rows.iter()
                    .map(|(k, _)| {
                        keys::be_u64(k, 10)
                            .map(Ino)
                            .ok_or_else(|| MetaError::corrupt(k, "short key"))
                    })
                    .collect()
            })
        })
        .await
    }

    /// One session in detail (`strata status --session`): its record, the inodes it
    /// keeps alive (open after their last unlink) and those it holds locks on. `None` if
    /// there is no such session.
    pub async fn session_detail(&self, sid: u64) -> Result<Option<SessionDetail>> {
        let Some(info) = self
            .list_sessions()
            .await?
            .into_iter()
            .find(|s| s.sid == sid)
        else {
            return Ok(None);
        };
        let sustained = self
            .session_inodes(keys::sustained_prefix(sid), usize::MAX)
            .await?;
        let locked = self
            .session_inodes(keys::session_lock_prefix(sid), usize::MAX)
            .await?;
        Ok(Some(SessionDetail {
            info,
            sustained,
            locked,
        }))
    }

    /// Open `ino` with `open(2)` flags: checks access and counts the open.
    pub async fn open(&self, ctx: &Ctx, ino: Ino, flags: u32) -> Result<Attr> {
        self.open_file(ctx, ino, flags).await.map(|o| o.attr)
    }

    /// [`Meta::open`], also telling whether a write by an unprivileged caller must first
    /// drop the file's privileges (setuid, setgid with group execute, or a
    /// `security.capability` attribute) — read in the same round trip, for write opens.
    pub async fn open_file(&self, ctx: &Ctx, ino: Ino, flags: u32) -> Result<Opened> {
        self.open_file_after(ctx, ino, flags, None).await
    }

    /// [`Meta::open_file`] by a caller that looked the file up after `began` (the start of
    /// its open): a read-only open takes the attributes that lookup read from the engine,
    /// which hold everything committed before the open began, instead of reading them
    /// again — close-to-open in one round trip less. Without a live change feed, or if
    /// the records were read before `began`, it reads them as `open_file` does.
    pub async fn open_file_after(
        &self,
        ctx: &Ctx,
        ino: Ino,
        flags: u32,
        began: Option<std::time::Instant>,
    ) -> Result<Opened> {
        let mask = match flags & O_ACCMODE {
            O_WRONLY => MAY_WRITE,
            O_RDWR => MAY_READ | MAY_WRITE,
            _ => MAY_READ,
        } | if flags & O_TRUNC != 0 { MAY_WRITE } else { 0 };
        let looked_up = began.is_some_and(|t| self.read_since(ino, t));
        let opened = if mask == MAY_READ && (looked_up || self.open_cache_holds(ino)) {
            self.cached_txn(|tx| Box::pin(read_opened(&self.acls, tx, ctx, ino, (mask, flags))))
                .await?
        } else {
            self.txn(|tx| Box::pin(read_opened(&self.acls, tx, ctx, ino, (mask, flags))))
                .await?
        };
        self.mark_open_attr(ino, &opened.attr);
        Ok(opened)
    }

    /// Whether `ino`'s records in the cache were read by a transaction started at or
    /// after `began`.
    fn read_since(&self, ino: Ino, began: std::time::Instant) -> bool {
        let keys = [keys::inode_core(ino), keys::inode_fields(ino)];
        self.read_cache
            .as_ref()
            .is_some_and(|c| c.read_since(&keys, began))
    }

    /// Whether a read-only open of `ino` may take its attributes from the cache
    /// (`MetaOptions::open_cache`): its records are trusted and younger than that.
    fn open_cache_holds(&self, ino: Ino) -> bool {
        let limit = self.opts.open_cache;
        let keys = [keys::inode_core(ino), keys::inode_fields(ino)];
        !limit.is_zero()
            && self
                .read_cache
                .as_ref()
                .and_then(|c| c.trusted_age(&keys))
                .is_some_and(|age| age < limit)
    }

    /// Count an open of `ino` by this client (create+open, or an open checked elsewhere).
    pub fn mark_open(&self, ino: Ino) {
        *self.open_files.lock().entry(ino).or_insert(0) += 1;
    }

    /// [`Meta::mark_open`], remembering where the file's growth is charged (quotas).
    pub fn mark_open_attr(&self, ino: Ino, attr: &strata_types::Attr) {
        self.mark_open(ino);
        self.note_open_owner(ino, attr.parent, attr.uid, attr.gid);
    }

    /// Release one open of `ino`; the last close of an unlinked file deletes it.
    pub async fn close(&self, ino: Ino) -> Result<()> {
        let last = {
            let mut open = self.open_files.lock();
            match open.get_mut(&ino) {
                Some(n) if *n > 1 => {
                    *n -= 1;
                    false
                }
                Some(_) => {
                    open.remove(&ino);
                    true
                }
                None => false,
            }
        };
        if !last {
            return Ok(());
        }
        self.forget_open_owner(ino);
        // Only an inode this client kept alive (unlinked while open here, or an unnamed
        // O_TMPFILE) can need deleting: nothing to read for any other.
        if self.sustained_here.lock().contains(&ino) {
            self.delete_if_unlinked(ino).await?;
            self.sustained_here.lock().remove(&ino);
        }
        Ok(())
    }

    /// `ino` lost its last name while open here (or never had one): check it at its last
    /// close.
    pub(crate) fn note_sustained(&self, ino: Ino) {
        self.sustained_here.lock().insert(ino);
    }

    /// True when this client has `ino` open.
    pub fn is_open(&self, ino: Ino) -> bool {
        self.open_files.lock().contains_key(&ino)
    }
}

/// What [`Meta::open_file`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Opened {
    pub attr: Attr,
    /// A write by an unprivileged caller must drop privileges first
    /// ([`Meta::drop_privileges`]).
    pub privileged: bool,
}

/// What [`Meta::open_file`] reads and checks: the inode (and, for a write open, whether
/// it has file capabilities), access for `mask`.
async fn read_opened(
    acls: &AclCache,
    tx: &mut Txn<'_>,
    ctx: &Ctx,
    ino: Ino,
    (mask, flags): (u32, u32),
) -> Result<Opened> {
    let caps_key = keys::xattr(ino, super::attr::CAPABILITY_XATTR);
    let mut ks = vec![keys::inode_core(ino), keys::inode_fields(ino)];
    if mask & MAY_WRITE != 0 {
        ks.push(caps_key);
    }
    let vals = tx.get_many(&ks).await?;
    let inode = match (&vals[0], &vals[1]) {
        (Some(c), Some(f)) => codec::Inode {
            ino,
            core: codec::InodeCore::decode(&ks[0], c)?,
            fields: codec::InodeFields::decode(&ks[1], f)?,
        },
        _ => return posix(Errno::ENOENT),
    };
    if inode.core.kind == FileType::Directory && mask & MAY_WRITE != 0 {
        return posix(Errno::EISDIR);
    }
    let (append, trunc) = (flags & O_APPEND != 0, flags & O_TRUNC != 0);
    super::protect::check_open(&inode.core, mask & MAY_WRITE != 0, (append, trunc))?;
    check_access(acls, tx, ctx, &inode.core, mask).await?;
    let has_caps = vals.get(2).is_some_and(Option::is_some);
    let attr = inode.attr();
    Ok(Opened {
        privileged: has_caps || super::attr::has_privilege_bits(attr.mode),
        attr,
    })
}
