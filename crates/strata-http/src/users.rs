//! Users kept in the volume, so every S3 gateway and WebDAV server of one volume accepts
//! the same keys (S3: access key and secret; WebDAV basic auth: the access key as user
//! name, the secret as password): one empty file per user in `.strata-s3/users/` at the volume root (mode
//! 0600, directory 0700), its record in the xattr `user.s3.user` (FORMAT.md "s3 v1").
//! A user is added under a temporary name and renamed into place without replacing, so
//! a reader never sees half a user and two `user add` of one name cannot both succeed.
//! The key pair from the environment is the gateway's root user and is not stored.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use strata_types::{Errno, Ino, Secret};
use strata_vfs::paths::PathWalk;
use strata_vfs::{Ctx, Vfs};

use crate::FrontError;

/// The S3 gateway's hidden directory at the volume root, which holds the users.
const HIDDEN_DIR: &str = ".strata-s3";
/// The directory of users under the hidden directory.
const USERS_DIR: &str = "users";
/// The xattr holding a user's record.
pub const USER_XATTR: &[u8] = b"user.s3.user";
/// Version of a user record without POSIX ids (any reader may act for it as the server).
const USER_VERSION: u32 = 1;
/// Version of a user record with POSIX ids: a reader that did not know them would act
/// for the user as the server, so older servers refuse such a record.
const USER_VERSION_POSIX: u32 = 2;
/// RENAME_NOREPLACE.
const NOREPLACE: u32 = 1;

/// What a user may do through WebDAV (the S3 gateway has bucket policies instead).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebDavLimits {
    /// The directory of the volume the user sees as the root (`/projects/a`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subdir: Option<String>,
    /// The user may not change anything.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub read_only: bool,
}

impl WebDavLimits {
    fn is_none(&self) -> bool {
        *self == WebDavLimits::default()
    }
}

/// Who a user's requests act as in the file system, when not as the server itself: the
/// volume's user and group ids and the supplementary groups.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PosixIds {
    pub uid: u32,
    pub gid: u32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<u32>,
}

/// A user's record as stored.
#[derive(Serialize, Deserialize)]
struct UserRecord {
    v: u32,
    access_key: String,
    secret_key: String,
    /// Seconds since the epoch.
    created: i64,
    #[serde(default, skip_serializing_if = "WebDavLimits::is_none")]
    webdav: WebDavLimits,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    posix: Option<PosixIds>,
}

/// A user as listed (no secret).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserInfo {
    pub access_key: String,
    /// Seconds since the epoch.
    pub created: i64,
    pub webdav: WebDavLimits,
    pub posix: Option<PosixIds>,
}

/// A user as a server checks it.
#[derive(Clone, Debug)]
pub struct User {
    pub secret: Secret,
    pub webdav: WebDavLimits,
    /// The ids its requests act as; `None`: as the server.
    pub posix: Option<PosixIds>,
}

/// What a new user is given beside its keys.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserGrants {
    pub webdav: WebDavLimits,
    pub posix: Option<PosixIds>,
}

/// An access key: 3 to 128 of `A-Z a-z 0-9 . _ -`, not starting with a dot.
pub fn check_access_key(key: &str) -> Result<(), FrontError> {
    let ok_chars = key
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if !(3..=128).contains(&key.len()) || !ok_chars || key.starts_with('.') {
        return Err(FrontError::InvalidUser(format!(
            "access key {key:?}: use 3 to 128 letters, digits, '.', '_' or '-' (not starting with '.')"
        )));
    }
    Ok(())
}

/// A secret key: 8 to 128 printable ASCII characters without spaces.
pub fn check_secret_key(secret: &Secret) -> Result<(), FrontError> {
    let s = secret.expose();
    if !(8..=128).contains(&s.len()) || !s.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(FrontError::InvalidUser(
            "a secret key is 8 to 128 printable ASCII characters without spaces".into(),
        ));
    }
    Ok(())
}

/// The users of one volume.
#[derive(Clone, Debug)]
pub struct UserStore {
    vfs: Arc<Vfs>,
    ctx: Ctx,
}

impl UserStore {
    /// The users of the volume `vfs` serves, read and written as `ctx`.
    pub fn new(vfs: Arc<Vfs>, ctx: Ctx) -> UserStore {
        UserStore { vfs, ctx }
    }

    fn fs(what: &str, errno: Errno) -> FrontError {
        FrontError::Fs {
            what: what.to_string(),
            errno,
        }
    }

    /// `.strata-s3/users` at the volume root, made (0700) if missing.
    async fn make_users_dir(&self) -> Result<Ino, FrontError> {
        let parts = [HIDDEN_DIR, USERS_DIR];
        self.vfs
            .make_dirs(&self.ctx, Ino::ROOT, &parts, 0o700)
            .await
            .map_err(|e| Self::fs(USERS_DIR, e))
    }

    /// `.strata-s3/users` at the volume root, `None` when there is none yet.
    async fn users_dir(&self) -> Result<Option<Ino>, FrontError> {
        let path = format!("{HIDDEN_DIR}/{USERS_DIR}/");
        let how = PathWalk::from(Ino::ROOT).no_symlinks();
        match self.vfs.resolve(&self.ctx, how, path.as_bytes()).await {
            Ok(found) => Ok(Some(found.ino)),
            Err(Errno::ENOENT) => Ok(None),
            Err(e) => Err(Self::fs(&path, e)),
        }
    }

    /// Add a user; `UserExists` if the access key is taken.
    pub async fn add(
        &self,
        access_key: &str,
        secret: &Secret,
        grants: &UserGrants,
    ) -> Result<(), FrontError> {
        check_access_key(access_key)?;
        check_secret_key(secret)?;
        if let Some(subdir) = &grants.webdav.subdir
            && !subdir.starts_with('/')
        {
            return Err(FrontError::InvalidUser(format!(
                "WebDAV directory {subdir:?}: give a path from the volume root, e.g. /projects/a"
            )));
        }
        let dir = self.make_users_dir().await?;
        let created = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        let record = UserRecord {
            v: if grants.posix.is_some() {
                USER_VERSION_POSIX
            } else {
                USER_VERSION
            },
            access_key: access_key.to_string(),
            secret_key: secret.expose().to_string(),
            created,
            webdav: grants.webdav.clone(),
            posix: grants.posix.clone(),
        };
        let value = serde_json::to_vec(&record).map_err(|e| FrontError::Corrupt {
            what: access_key.to_string(),
            why: e.to_string(),
        })?;
        let temp = format!(".new-{}", uuid::Uuid::new_v4().simple());
        let entry = self
            .vfs
            .mknod(&self.ctx, dir, temp.as_bytes(), 0o100600, 0)
            .await
            .map_err(|e| Self::fs(&temp, e))?;
        let placed = async {
            self.vfs
                .setxattr(&self.ctx, entry.ino, USER_XATTR, &value, 0)
                .await?;
            self.vfs
                .rename(
                    &self.ctx,
                    dir,
                    temp.as_bytes(),
                    dir,
                    access_key.as_bytes(),
                    NOREPLACE,
                )
                .await
        }
        .await;
        if let Err(e) = placed {
            if let Err(cleanup) = self.vfs.unlink(&self.ctx, dir, temp.as_bytes()).await {
                tracing::warn!("cannot remove the temporary user file {temp}: {cleanup}");
            }
            return Err(match e {
                Errno::EEXIST => FrontError::UserExists(access_key.to_string()),
                e => Self::fs(access_key, e),
            });
        }
        Ok(())
    }

    /// Remove a user; `NoSuchUser` if there is none.
    pub async fn remove(&self, access_key: &str) -> Result<(), FrontError> {
        check_access_key(access_key)?;
        let Some(dir) = self.users_dir().await? else {
            return Err(FrontError::NoSuchUser(access_key.to_string()));
        };
        match self.vfs.unlink(&self.ctx, dir, access_key.as_bytes()).await {
            Ok(()) => Ok(()),
            Err(Errno::ENOENT) => Err(FrontError::NoSuchUser(access_key.to_string())),
            Err(e) => Err(Self::fs(access_key, e)),
        }
    }

    /// Every user, by access key.
    pub async fn list(&self) -> Result<Vec<UserInfo>, FrontError> {
        let Some(dir) = self.users_dir().await? else {
            return Ok(Vec::new());
        };
        let entries = self
            .vfs
            .list_all(dir)
            .await
            .map_err(|e| Self::fs(USERS_DIR, e))?;
        let mut out = Vec::new();
        for entry in entries {
            let Ok(name) = std::str::from_utf8(&entry.name) else {
                continue;
            };
            if name.starts_with('.') {
                continue;
            }
            if let Some(record) = self.record(entry.ino, name).await? {
                out.push(UserInfo {
                    access_key: record.access_key,
                    created: record.created,
                    webdav: record.webdav,
                    posix: record.posix,
                });
            }
        }
        Ok(out)
    }

    /// The secret of `access_key`, or `None` if there is no such user.
    pub async fn secret(&self, access_key: &str) -> Result<Option<Secret>, FrontError> {
        Ok(self.user(access_key).await?.map(|u| u.secret))
    }

    /// The user `access_key`, or `None` if there is no such user.
    pub async fn user(&self, access_key: &str) -> Result<Option<User>, FrontError> {
        if check_access_key(access_key).is_err() {
            return Ok(None);
        }
        let Some(dir) = self.users_dir().await? else {
            return Ok(None);
        };
        let entry = match self.vfs.lookup(&self.ctx, dir, access_key.as_bytes()).await {
            Ok(e) => e,
            Err(Errno::ENOENT) => return Ok(None),
            Err(e) => return Err(Self::fs(access_key, e)),
        };
        let record = self.record(entry.ino, access_key).await?;
        Ok(record.map(|r| User {
            secret: Secret::new(r.secret_key),
            webdav: r.webdav,
            posix: r.posix,
        }))
    }

    /// The record on the file `ino` named `name`; `None` when it has none.
    async fn record(&self, ino: Ino, name: &str) -> Result<Option<UserRecord>, FrontError> {
        let raw = match self.vfs.getxattr(&self.ctx, ino, USER_XATTR, 0).await {
            Ok(raw) => raw,
            Err(Errno::ENODATA) => return Ok(None),
            Err(e) => return Err(Self::fs(name, e)),
        };
        let corrupt = |why: String| FrontError::Corrupt {
            what: name.to_string(),
            why,
        };
        let record: UserRecord =
            serde_json::from_slice(&raw).map_err(|e| corrupt(e.to_string()))?;
        let known = match record.v {
            USER_VERSION => record.posix.is_none(),
            USER_VERSION_POSIX => record.posix.is_some(),
            _ => false,
        };
        if !known || record.access_key != name {
            return Err(corrupt(format!(
                "version {} for access key {:?}",
                record.v, record.access_key
            )));
        }
        Ok(Some(record))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn store() -> UserStore {
        let vfs = strata_vfs::testing::memory_vfs().await;
        UserStore::new(Arc::new(vfs), Ctx::root())
    }

    #[tokio::test]
    async fn users_are_added_found_listed_and_removed() {
        let users = store().await;
        let none = UserGrants::default();
        let limited = UserGrants {
            webdav: WebDavLimits {
                subdir: Some("/projects/b".into()),
                read_only: true,
            },
            posix: Some(PosixIds {
                uid: 1001,
                gid: 1002,
                groups: vec![7, 8],
            }),
        };
        assert!(users.list().await.unwrap().is_empty());
        assert!(users.secret("alice").await.unwrap().is_none());
        users
            .add("alice", &Secret::new("alice-secret-1"), &none)
            .await
            .unwrap();
        users
            .add("bob", &Secret::new("bob-secret-22"), &limited)
            .await
            .unwrap();
        let again = users
            .add("alice", &Secret::new("other-secret"), &none)
            .await;
        assert!(matches!(again, Err(FrontError::UserExists(_))), "{again:?}");
        let secret = users.secret("alice").await.unwrap().unwrap();
        assert_eq!(secret.expose(), "alice-secret-1");
        let names: Vec<String> = users
            .list()
            .await
            .unwrap()
            .into_iter()
            .map(|u| u.access_key)
            .collect();
        assert_eq!(names, ["alice", "bob"]);
        // WebDAV limits and POSIX ids are kept with the user.
        let bob = users.user("bob").await.unwrap().unwrap();
        assert_eq!((bob.webdav, bob.posix), (limited.webdav, limited.posix));
        let alice = users.user("alice").await.unwrap().unwrap();
        assert_eq!((alice.webdav, alice.posix), (none.webdav, None));
        let relative = UserGrants {
            webdav: WebDavLimits {
                subdir: Some("projects".into()),
                read_only: false,
            },
            posix: None,
        };
        let r = users
            .add("dave", &Secret::new("dave-secret-1"), &relative)
            .await;
        assert!(matches!(r, Err(FrontError::InvalidUser(_))), "{r:?}");
        users.remove("alice").await.unwrap();
        assert!(users.secret("alice").await.unwrap().is_none());
        let gone = users.remove("alice").await;
        assert!(matches!(gone, Err(FrontError::NoSuchUser(_))), "{gone:?}");
    }

    #[tokio::test]
    async fn bad_names_and_secrets_are_refused() {
        let none = UserGrants::default();
        let users = store().await;
        for bad in ["ab", "../x", ".hidden", "a/b", "sp ace", &"x".repeat(129)] {
            let r = users.add(bad, &Secret::new("good-secret"), &none).await;
            assert!(matches!(r, Err(FrontError::InvalidUser(_))), "{bad}: {r:?}");
            assert!(users.secret(bad).await.unwrap().is_none());
        }
        for bad in ["short", "has space in it", "tab\there-x"] {
            let r = users.add("carol", &Secret::new(bad), &none).await;
            assert!(matches!(r, Err(FrontError::InvalidUser(_))), "{r:?}");
        }
    }

    /// A record's version says whether it has POSIX ids: a v1 record with ids (which an
    /// older server would serve as itself) and a v2 record without are refused.
    #[tokio::test]
    async fn a_record_whose_version_disagrees_with_its_ids_is_refused() {
        let users = store().await;
        let grants = UserGrants {
            posix: Some(PosixIds {
                uid: 5,
                gid: 6,
                groups: Vec::new(),
            }),
            ..UserGrants::default()
        };
        users
            .add("erin", &Secret::new("erin-secret-1"), &grants)
            .await
            .unwrap();
        let dir = users.users_dir().await.unwrap().unwrap();
        let ino = users
            .vfs
            .lookup(&users.ctx, dir, b"erin")
            .await
            .unwrap()
            .ino;
        let raw = users
            .vfs
            .getxattr(&users.ctx, ino, USER_XATTR, 0)
            .await
            .unwrap();
        let text = String::from_utf8(raw).unwrap();
        assert!(text.contains(r#""v":2"#), "{text}");
        for forged in [
            text.replace(r#""v":2"#, r#""v":1"#),
            text.replace(r#""v":2"#, r#""v":3"#),
        ] {
            users
                .vfs
                .setxattr(&users.ctx, ino, USER_XATTR, forged.as_bytes(), 0)
                .await
                .unwrap();
            let r = users.user("erin").await;
            assert!(
                matches!(r, Err(FrontError::Corrupt { .. })),
                "{forged}: {r:?}"
            );
        }
    }
}
