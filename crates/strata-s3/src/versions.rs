//! Versioned buckets: the bucket's state (never enabled, Enabled, Suspended), version
//! ids, and the hidden version store that keeps the versions a key no longer shows.
//!
//! The current version of a key is the file at the key's path, as in an unversioned
//! bucket, so a mount sees exactly the current objects. A version that stops being
//! current is kept by a hard link (PUT, copy, multipart complete) or a rename (DELETE)
//! into `.strata-s3/versions/<bucket inode>/<key>/<version id>`: metadata only, no byte is
//! copied. Delete markers are empty files there with `delete_marker` in their record.
//! The version id sits in the object's record (`objinfo`); a file without one is S3's
//! `null` version. Ids are 32 hex digits, the first 16 counting down with time, so the
//! newest sorts first.

use s3s::{S3Error, S3ErrorCode, S3Result};
use strata_types::{Attr, Errno, FileType, Ino};

use crate::Gateway;
use crate::error::fs_error;
use crate::keys::{HIDDEN_DIR, ObjectPath};

use crate::objinfo::ObjectInfo;
use crate::paths::{DIR_MODE, FILE_MODE};
use crate::staging::{NOREPLACE, Replace, TempFile};

/// The xattr of a bucket's directory holding its versioning state.
pub const VERSIONING_XATTR: &[u8] = b"user.s3.versioning";
/// The id S3 shows for a version written while versioning was off or suspended.
pub const NULL_VERSION: &str = "null";
/// The store's directory below the gateway's hidden directory.
const STORE: &str = "versions";
/// Names of files in transit inside the store start with this (listings skip them).
const PENDING: &str = ".pending-";
/// A write that lost a race with another writer of the key tries this many times.
const ATTEMPTS: usize = 16;

/// A bucket's versioning state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Versioning {
    /// Never enabled: no version is kept.
    Off,
    Enabled,
    /// Enabled once, then suspended: new writes are `null` versions.
    Suspended,
}

impl Versioning {
    fn parse(raw: &[u8]) -> Versioning {
        match raw {
            b"Enabled" => Versioning::Enabled,
            b"Suspended" => Versioning::Suspended,
            _ => Versioning::Off,
        }
    }

    /// The id a new object written now gets (`None`: the null version).
    pub fn new_id(self) -> Option<String> {
        (self == Versioning::Enabled).then(new_version_id)
    }
}

/// A fresh version id: newer ids sort first.
pub fn new_version_id() -> String {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let now = u64::try_from(since.as_nanos()).unwrap_or(u64::MAX);
    let random = uuid::Uuid::new_v4().as_u64_pair().0;
    format!("{:016x}{random:016x}", u64::MAX - now)
}

/// Whether `id` is one this gateway could have given (or `null`).
pub fn valid_version_id(id: &str) -> bool {
    id == NULL_VERSION || (id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The id S3 shows for a record's version.
pub fn shown_id(id: Option<&str>) -> String {
    id.unwrap_or(NULL_VERSION).to_owned()
}

/// One version kept in the store or shown at the key.
#[derive(Debug, Clone)]
pub struct Version {
    /// The id S3 shows (`null` included).
    pub id: String,
    pub ino: Ino,
    pub attr: Attr,
    /// The record, unchecked against the file (a marker's size and mtime are its own).
    pub record: Option<ObjectInfo>,
}

impl Version {
    pub fn is_marker(&self) -> bool {
        self.record.as_ref().is_some_and(|r| r.delete_marker)
    }

    /// Its record if that still describes the file.
    pub fn info(&self) -> Option<ObjectInfo> {
        self.record.clone().filter(|r| r.holds_for(&self.attr))
    }
}

/// An invalid version id, in AWS's words.
pub fn invalid_version(id: &str) -> S3Error {
    S3Error::with_message(
        S3ErrorCode::InvalidArgument,
        format!("Invalid version id specified: {id}"),
    )
}

impl Gateway {
    /// The versioning state of the bucket at `bucket_dir`.
    pub(crate) async fn versioning(&self, bucket_dir: Ino) -> S3Result<Versioning> {
        Ok(self
            .load_xattr(bucket_dir, VERSIONING_XATTR)
            .await?
            .map_or(Versioning::Off, |raw| Versioning::parse(&raw)))
    }

    /// The record of `ino` as stored, whether or not it still holds.
    pub(crate) async fn load_record(&self, ino: Ino, attr: &Attr) -> Option<ObjectInfo> {
        if !attr.xattrs {
            return None;
        }
        let value = self
            .vfs
            .getxattr(&self.server_ctx, ino, crate::objinfo::INFO_XATTR, 0)
            .await
            .ok()?;
        ObjectInfo::decode(&value)
    }

    /// The store's directory for the bucket at `bucket_dir` (the one per bucket inode, so
    /// a bucket deleted and made again starts empty); made when `create`.
    pub(crate) async fn store_root(&self, bucket_dir: Ino, create: bool) -> S3Result<Option<Ino>> {
        let bucket = bucket_dir.0.to_string();
        if create {
            let store = self.hidden_dir(STORE).await?;
            return self
                .vfs
                .make_dirs(&self.server_ctx, store, &[bucket.as_str()], DIR_MODE)
                .await
                .map(Some)
                .map_err(|e| fs_error(e, HIDDEN_DIR));
        }
        match self.store_base().await? {
            Some(base) => self.resolve_store(base, &format!("{bucket}/")).await,
            None => Ok(None),
        }
    }

    /// The store's own directory (`.strata-s3/versions`), if made.
    pub(crate) async fn store_base(&self) -> S3Result<Option<Ino>> {
        let path = format!("{HIDDEN_DIR}/{STORE}/");
        self.resolve_store(self.root(), &path).await
    }

    /// The store's directory of `key` (`path` split), made when `create`.
    pub(crate) async fn key_store(
        &self,
        bucket_dir: Ino,
        path: &ObjectPath<'_>,
        create: bool,
    ) -> S3Result<Option<Ino>> {
        let Some(name) = path.name else {
            return Ok(None);
        };
        let Some(root) = self.store_root(bucket_dir, create).await? else {
            return Ok(None);
        };
        let mut parts = path.dirs.clone();
        parts.push(name);
        if create {
            return self
                .vfs
                .make_dirs(&self.server_ctx, root, &parts, DIR_MODE)
                .await
                .map(Some)
                .map_err(|e| fs_error(e, "version store"));
        }
        self.resolve_store(root, &format!("{}/", parts.join("/")))
            .await
    }

    async fn resolve_store(&self, from: Ino, path: &str) -> S3Result<Option<Ino>> {
        let walk = strata_vfs::paths::PathWalk::from(from);
        match self
            .vfs
            .resolve(&self.server_ctx, walk, path.as_bytes())
            .await
        {
            Ok(found) => Ok(Some(found.ino)),
            Err(Errno::ENOENT | Errno::ENOTDIR) => Ok(None),
            Err(e) => Err(fs_error(e, "version store")),
        }
    }

    /// The versions kept in the store directory `dir`, newest first.
    pub(crate) async fn stored_versions(&self, dir: Ino) -> S3Result<Vec<Version>> {
        let entries = self.entries(dir, "version store").await?;
        let mut versions = Vec::new();
        for entry in entries {
            if entry.kind != FileType::Regular || entry.name.starts_with(PENDING.as_bytes()) {
                continue;
            }
            let Ok(id) = String::from_utf8(entry.name) else {
                continue;
            };
            let attr = match entry.attr {
                Some(attr) => attr,
                None => match self.vfs.getattr(entry.ino).await {
                    Ok(attr) => attr,
                    Err(Errno::ENOENT) => continue,
                    Err(e) => return Err(fs_error(e, "version store")),
                },
            };
            let record = self.load_record(entry.ino, &attr).await;
            versions.push(Version {
                id,
                ino: entry.ino,
                attr,
                record,
            });
        }
        versions.sort_by(|a, b| b.attr.mtime.cmp(&a.attr.mtime).then(a.id.cmp(&b.id)));
        Ok(versions)
    }

    /// The file at the key's path, if it is a regular file.
    pub(crate) async fn current_version(
        &self,
        parent: Ino,
        name: &str,
    ) -> S3Result<Option<Version>> {
        let entry = match self.lookup(parent, name).await {
            Ok(entry) if entry.attr.kind == FileType::Regular => entry,
            Ok(_) | Err(Errno::ENOENT | Errno::ENOTDIR) => return Ok(None),
            Err(e) => return Err(fs_error(e, name)),
        };
        let record = self.load_record(entry.ino, &entry.attr).await;
        Ok(Some(Version {
            id: shown_id(record.as_ref().and_then(|r| r.version_id.as_deref())),
            ino: entry.ino,
            attr: entry.attr,
            record,
        }))
    }

    /// Put the closed temporary file `temp` at `name` in `parent` in a bucket whose state
    /// is `state`, keeping the version it replaces: linked into the store first, then
    /// replaced only if it is still the key's file (a writer that raced is retried).
    pub(crate) async fn install_versioned(
        &self,
        temp: &TempFile,
        (bucket_dir, path, parent, name): (Ino, &ObjectPath<'_>, Ino, &str),
        key: &str,
        state: Versioning,
        replace: Replace,
    ) -> S3Result<()> {
        for _ in 0..ATTEMPTS {
            let current = self.current_version(parent, name).await?;
            let now = match (replace, &current) {
                (Replace::Any, Some(cur)) => Replace::Only(cur.ino),
                (Replace::Any, None) => Replace::Nothing,
                (asked, _) => asked,
            };
            let kept = match &current {
                Some(cur) if state == Versioning::Enabled || cur.id != NULL_VERSION => {
                    Some(self.keep_linked(bucket_dir, path, cur).await?)
                }
                _ => None,
            };
            match self.rename_into(temp, parent, name, key, now).await {
                Ok(()) => {
                    if state == Versioning::Suspended {
                        self.drop_stored_null(bucket_dir, path).await?;
                    }
                    return Ok(());
                }
                Err(e) => {
                    if let (Some(store), Some(cur)) = (kept, &current) {
                        self.unkeep_if_current(store, parent, name, cur).await;
                    }
                    if replace != Replace::Any || *e.code() != S3ErrorCode::PreconditionFailed {
                        return Err(e);
                    }
                }
            }
        }
        Err(S3Error::with_message(
            S3ErrorCode::SlowDown,
            format!("{key} is being written by others; try again"),
        ))
    }

    /// Link the version `cur` into its key's store directory under its id.
    async fn keep_linked(
        &self,
        bucket_dir: Ino,
        path: &ObjectPath<'_>,
        cur: &Version,
    ) -> S3Result<Ino> {
        let store = self
            .key_store(bucket_dir, path, true)
            .await?
            .ok_or_else(|| fs_error(Errno::EISDIR, "version store"))?;
        let id = cur.id.as_bytes();
        for _ in 0..ATTEMPTS {
            match self.vfs.link(&self.server_ctx, cur.ino, store, id).await {
                Ok(_) => return Ok(store),
                Err(Errno::EEXIST) => {}
                Err(e) => return Err(fs_error(e, "version store")),
            }
            match self.vfs.lookup(&self.server_ctx, store, id).await {
                Ok(there) if there.ino == cur.ino => return Ok(store),
                // Another file under the id: only `null` can be taken twice (a null
                // version replaced by a newer null one); the newer one wins.
                Ok(_) => self.unlink_stored(store, &cur.id).await?,
                Err(Errno::ENOENT) => {}
                Err(e) => return Err(fs_error(e, "version store")),
            }
        }
        Err(fs_error(Errno::EBUSY, "version store"))
    }

    /// Undo [`Gateway::keep_linked`] when the install failed and `cur` is still current.
    async fn unkeep_if_current(&self, store: Ino, parent: Ino, name: &str, cur: &Version) {
        let still = matches!(self.lookup(parent, name).await, Ok(e) if e.ino == cur.ino);
        let linked = matches!(
            self.vfs.lookup(&self.server_ctx, store, cur.id.as_bytes()).await,
            Ok(e) if e.ino == cur.ino
        );
        if still && linked {
            let _ = self.unlink_stored(store, &cur.id).await;
        }
    }

    pub(crate) async fn unlink_stored(&self, store: Ino, id: &str) -> S3Result<()> {
        match self
            .vfs
            .unlink(&self.server_ctx, store, id.as_bytes())
            .await
        {
            Ok(()) | Err(Errno::ENOENT) => Ok(()),
            Err(e) => Err(fs_error(e, "version store")),
        }
    }

    /// A new null version replaced the stored one, if any.
    async fn drop_stored_null(&self, bucket_dir: Ino, path: &ObjectPath<'_>) -> S3Result<()> {
        if let Some(store) = self.key_store(bucket_dir, path, false).await? {
            self.unlink_stored(store, NULL_VERSION).await?;
        }
        Ok(())
    }

    /// Move the key's current file (if any) into the store and leave a delete marker:
    /// DELETE without a version id on a versioned bucket. Returns the marker's id.
    pub(crate) async fn delete_versioned(
        &self,
        bucket_dir: Ino,
        path: &ObjectPath<'_>,
        parent: Option<Ino>,
        state: Versioning,
    ) -> S3Result<String> {
        let store = self
            .key_store(bucket_dir, path, true)
            .await?
            .ok_or_else(|| fs_error(Errno::EISDIR, "version store"))?;
        if let (Some(parent), Some(name)) = (parent, path.name)
            && let Some(cur) = self.current_version(parent, name).await?
        {
            if state == Versioning::Suspended && cur.id == NULL_VERSION {
                match self.vfs.unlink(self.ctx(), parent, name.as_bytes()).await {
                    Ok(()) | Err(Errno::ENOENT) => {}
                    Err(e) => return Err(fs_error(e, name)),
                }
            } else {
                self.may_remove_from(parent, name).await?;
                self.move_to_store(parent, name, store).await?;
            }
        }
        let marker_id = state.new_id();
        self.write_marker(store, marker_id.clone()).await?;
        Ok(shown_id(marker_id.as_deref()))
    }

    /// A caller with its own POSIX ids may remove entries of `parent` (the store itself
    /// belongs to the gateway, so moves into it run as the gateway once this holds).
    pub(crate) async fn may_remove_from(&self, parent: Ino, name: &str) -> S3Result<()> {
        let Some(caller) = self.caller.as_deref() else {
            return Ok(());
        };
        self.vfs
            .access(caller, parent, strata_vfs::MAY_WRITE | strata_vfs::MAY_EXEC)
            .await
            .map_err(|e| fs_error(e, name))
    }

    /// Rename the key's file into the store under the id its record names, in one rename
    /// that happens only if the key still names the file whose id was read (a writer that
    /// replaced it meanwhile makes the move start again with the new file). One rename:
    /// a crash leaves the version either current or stored under its id, never hidden.
    async fn move_to_store(&self, parent: Ino, name: &str, store: Ino) -> S3Result<()> {
        for _ in 0..ATTEMPTS {
            let Some(cur) = self.current_version(parent, name).await? else {
                return Ok(());
            };
            match self
                .vfs
                .rename_moving(
                    &self.server_ctx,
                    (parent, name.as_bytes()),
                    (store, cur.id.as_bytes()),
                    cur.ino,
                )
                .await
            {
                Ok(()) | Err(Errno::ENOENT) => return Ok(()),
                Err(Errno::ESTALE) => {}
                Err(e) => return Err(fs_error(e, name)),
            }
        }
        Err(S3Error::with_message(
            S3ErrorCode::SlowDown,
            format!("{name} is being written by others; try again"),
        ))
    }

    /// A delete marker named `id` (`None`: `null`, replacing a stored null version).
    async fn write_marker(&self, store: Ino, id: Option<String>) -> S3Result<()> {
        let name = format!("{PENDING}{}", uuid::Uuid::new_v4().simple());
        let (entry, fh) = self
            .vfs
            .create(&self.server_ctx, store, name.as_bytes(), FILE_MODE)
            .await
            .map_err(|e| fs_error(e, "delete marker"))?;
        let temp = TempFile {
            dir: store,
            name,
            ino: entry.ino,
            acl: None,
            lock: crate::lock::LockRequest::default(),
        };
        self.close_temp(&temp, fh).await?;
        let mut info = ObjectInfo {
            etag: crate::read::EMPTY_ETAG.into(),
            delete_marker: true,
            version_id: id.clone(),
            ..ObjectInfo::default()
        };
        let shown = shown_id(id.as_deref());
        let placed = async {
            self.record(&temp, &shown, &mut info).await?;
            self.vfs
                .rename(
                    &self.server_ctx,
                    store,
                    temp.name.as_bytes(),
                    store,
                    shown.as_bytes(),
                    0,
                )
                .await
                .map_err(|e| fs_error(e, "delete marker"))
        };
        let placed = placed.await;
        if placed.is_err() {
            self.discard(&temp).await;
        }
        placed
    }

    /// After a version was removed: when the key has no file, the newest stored version
    /// becomes current again (moved back to the key's path) unless it is a delete marker.
    pub(crate) async fn settle_current(
        &self,
        bucket_dir: Ino,
        path: &ObjectPath<'_>,
        store: Ino,
    ) -> S3Result<()> {
        let Some(name) = path.name else {
            return Ok(());
        };
        let parent = match self.walk(bucket_dir, &path.dirs).await {
            Ok(parent) => Some(parent),
            Err(Errno::ENOENT) => None,
            Err(e) => return Err(fs_error(e, name)),
        };
        if let Some(parent) = parent
            && self.current_version(parent, name).await?.is_some()
        {
            return Ok(());
        }
        let versions = self.stored_versions(store).await?;
        let Some(newest) = versions.first().filter(|v| !v.is_marker()) else {
            return Ok(());
        };
        let parent = match parent {
            Some(parent) => parent,
            None => self
                .make_dirs(bucket_dir, &path.dirs)
                .await
                .map_err(|e| fs_error(e, name))?,
        };
        match self
            .vfs
            .rename(
                &self.server_ctx,
                store,
                newest.id.as_bytes(),
                parent,
                name.as_bytes(),
                NOREPLACE,
            )
            .await
        {
            // A writer put a new current version meanwhile: it wins.
            Ok(()) | Err(Errno::EEXIST | Errno::ENOENT) => Ok(()),
            Err(e) => Err(fs_error(e, name)),
        }
    }
}
