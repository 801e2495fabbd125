//! Who a request comes from, and what it may see and do. HTTP basic auth against the
//! server's own user (`WEBDAV_USER`/`WEBDAV_PASSWORD`), who sees the server's root, or
//! against the users kept in the volume (shared with the S3 gateway: access key and
//! secret), each with the WebDAV directory and read-only flag stored with it; or anyone,
//! when the server was started with `--anonymous`.

use std::sync::Arc;

use http::HeaderValue;
use strata_http::{UserStore, WebDavLimits};
use strata_types::{Errno, Ino, Secret};
use strata_vfs::paths::PathWalk;
use strata_vfs::{Ctx, Vfs};

use crate::fs::RESERVED_PREFIX;
use crate::locks::lock_prefix;

/// Who may use the server.
#[derive(Clone, Debug)]
pub enum Auth {
    /// Everyone, without credentials (`--anonymous`).
    Anonymous,
    /// HTTP basic auth: the server's own user if there is one, then the volume's users.
    Users { own: Option<(String, Secret)> },
}

/// What a request may see and do.
#[derive(Clone, Debug)]
pub(crate) struct Login {
    /// The user, owner of the locks it takes (`None`: anonymous).
    pub principal: Option<String>,
    /// The directory the request sees as `/`.
    pub root: Ino,
    /// The volume path of `root` for the lock table; `None`: the server's root.
    pub lock_prefix: Option<String>,
    pub read_only: bool,
    /// Who the request acts as in the file system: a volume user kept with POSIX ids;
    /// `None`: the server itself.
    pub ctx: Option<Ctx>,
}

/// Why a request is refused before it reaches the volume.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// No credentials or wrong ones (401).
    Credentials,
    /// The user's directory is not there or not under the server's root (403).
    Forbidden(String),
    /// The users cannot be read (503).
    Unavailable(String),
}

/// Checks credentials for one server.
#[derive(Debug)]
pub(crate) struct Authenticator {
    auth: Auth,
    users: UserStore,
    vfs: Arc<Vfs>,
    ctx: Ctx,
    server_root: Ino,
    /// The server's `--subdir` as path parts.
    server_subdir: Vec<String>,
}

/// Compare without leaking where two byte strings differ.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The user and password of a basic `Authorization` header.
pub(crate) fn basic_credentials(value: &HeaderValue) -> Option<(String, String)> {
    let encoded = value.to_str().ok()?.strip_prefix("Basic ")?.trim();
    let decoded = base64_simd::STANDARD.decode_to_vec(encoded).ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

fn parts(path: &str) -> Vec<String> {
    path.split('/')
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect()
}

impl Authenticator {
    pub fn new(auth: Auth, vfs: Arc<Vfs>, ctx: Ctx, server_subdir: Option<&str>) -> Self {
        Authenticator {
            auth,
            users: UserStore::new(vfs.clone(), ctx.clone()),
            server_root: vfs.options().root,
            vfs,
            ctx,
            server_subdir: parts(server_subdir.unwrap_or("")),
        }
    }

    fn whole_server(&self, principal: Option<String>) -> Login {
        Login {
            principal,
            root: self.server_root,
            lock_prefix: None,
            read_only: false,
            ctx: None,
        }
    }

    /// Who sent a request with this `Authorization` header.
    pub async fn login(&self, header: Option<&HeaderValue>) -> Result<Login, Refusal> {
        let Auth::Users { own } = &self.auth else {
            return Ok(self.whole_server(None));
        };
        let (user, password) = header
            .and_then(basic_credentials)
            .ok_or(Refusal::Credentials)?;
        if let Some((own_user, own_password)) = own
            && same_secret(user.as_bytes(), own_user.as_bytes())
            && same_secret(password.as_bytes(), own_password.expose().as_bytes())
        {
            return Ok(self.whole_server(Some(user)));
        }
        let found = self
            .users
            .user(&user)
            .await
            .map_err(|e| Refusal::Unavailable(format!("reading the volume's users: {e}")))?;
        let Some(found) = found else {
            return Err(Refusal::Credentials);
        };
        if !same_secret(password.as_bytes(), found.secret.expose().as_bytes()) {
            return Err(Refusal::Credentials);
        }
        let mut login = self.limited(user, &found.webdav).await?;
        login.ctx = found.posix.map(|ids| {
            self.vfs
                .options()
                .identity
                .volume_user(ids.uid, ids.gid, &ids.groups)
        });
        Ok(login)
    }

    /// The login of a volume user with its WebDAV limits.
    async fn limited(&self, user: String, limits: &WebDavLimits) -> Result<Login, Refusal> {
        let Some(subdir) = &limits.subdir else {
            let mut login = self.whole_server(Some(user));
            login.read_only = limits.read_only;
            return Ok(login);
        };
        let wanted = parts(subdir);
        if !wanted.starts_with(&self.server_subdir) {
            return Err(Refusal::Forbidden(format!(
                "user {user}: its directory {subdir} is outside this server's root"
            )));
        }
        let root = self.user_root(&wanted).await.map_err(|e| {
            Refusal::Forbidden(format!("user {user}: its directory {subdir}: errno {e}"))
        })?;
        Ok(Login {
            principal: Some(user),
            root,
            lock_prefix: Some(lock_prefix(Some(subdir))),
            read_only: limits.read_only,
            ctx: None,
        })
    }

    /// The directory at `parts` from the volume root.
    /// The directory at `parts` (from the volume root, starting with the server's own
    /// subdirectory), walked from the server's root so that no symlink on the way leads
    /// out of it.
    async fn user_root(&self, parts: &[String]) -> Result<Ino, Errno> {
        let below = parts.get(self.server_subdir.len()..).unwrap_or_default();
        let path = format!("{}/", below.join("/"));
        let how = PathWalk::from(self.server_root).reserving(RESERVED_PREFIX);
        Ok(self.vfs.resolve(&self.ctx, how, path.as_bytes()).await?.ino)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code
    use super::*;
    use strata_http::{PosixIds, UserGrants};

    #[test]
    fn basic_credentials_are_decoded() {
        let v = HeaderValue::from_static("Basic dXNlcjpwYTpzcw==");
        assert_eq!(
            basic_credentials(&v),
            Some(("user".to_string(), "pa:ss".to_string()))
        );
        assert_eq!(
            basic_credentials(&HeaderValue::from_static("Bearer x")),
            None
        );
        assert_eq!(
            basic_credentials(&HeaderValue::from_static("Basic !!!")),
            None
        );
    }

    #[test]
    fn secrets_compare_exactly() {
        assert!(same_secret(b"abc", b"abc"));
        assert!(!same_secret(b"abc", b"abd"));
        assert!(!same_secret(b"abc", b"abcd"));
    }

    async fn authenticator(subdir: Option<&str>) -> (Authenticator, Arc<Vfs>) {
        let vfs = Arc::new(strata_vfs::testing::memory_vfs().await);
        let ctx = Ctx::root();
        vfs.make_dirs(&ctx, Ino::ROOT, &["shared", "team"], 0o755)
            .await
            .unwrap();
        let own = Some(("admin".to_string(), Secret::new("admin-password")));
        let auth = Authenticator::new(Auth::Users { own }, vfs.clone(), ctx, subdir);
        (auth, vfs)
    }

    fn basic(user: &str, password: &str) -> HeaderValue {
        let token = base64_simd::STANDARD.encode_to_string(format!("{user}:{password}"));
        HeaderValue::from_str(&format!("Basic {token}")).unwrap()
    }

    #[tokio::test]
    async fn the_servers_user_and_the_volumes_users_log_in_with_their_limits() {
        let (auth, _vfs) = authenticator(None).await;
        let admin = auth.login(Some(&basic("admin", "admin-password"))).await;
        let admin = admin.unwrap();
        assert_eq!(admin.principal.as_deref(), Some("admin"));
        assert!(!admin.read_only && admin.lock_prefix.is_none());
        assert!(matches!(
            auth.login(Some(&basic("admin", "wrong"))).await,
            Err(Refusal::Credentials)
        ));
        assert!(matches!(auth.login(None).await, Err(Refusal::Credentials)));
        let grants = UserGrants {
            webdav: WebDavLimits {
                subdir: Some("/shared/team".into()),
                read_only: true,
            },
            posix: Some(PosixIds {
                uid: 1001,
                gid: 1002,
                groups: vec![300],
            }),
        };
        auth.users
            .add("alice", &Secret::new("alice-secret"), &grants)
            .await
            .unwrap();
        let alice = auth
            .login(Some(&basic("alice", "alice-secret")))
            .await
            .unwrap();
        assert!(alice.read_only);
        let ctx = alice.ctx.as_ref().unwrap();
        assert_eq!(
            (ctx.uid, ctx.gid, ctx.groups.as_slice()),
            (1001, 1002, &[300][..])
        );
        // The server's own user acts as the server.
        let admin = auth.login(Some(&basic("admin", "admin-password"))).await;
        assert!(admin.unwrap().ctx.is_none());
        assert_eq!(alice.lock_prefix.as_deref(), Some("/shared/team"));
        assert_ne!(alice.root, Ino::ROOT);
        assert!(matches!(
            auth.login(Some(&basic("alice", "admin-password"))).await,
            Err(Refusal::Credentials)
        ));
    }

    #[tokio::test]
    async fn a_users_directory_outside_the_servers_root_is_refused() {
        let (auth, vfs) = authenticator(Some("/shared")).await;
        let users = UserStore::new(vfs, Ctx::root());
        let outside = UserGrants {
            webdav: WebDavLimits {
                subdir: Some("/elsewhere".into()),
                read_only: false,
            },
            posix: None,
        };
        users
            .add("bob", &Secret::new("bob-secret-1"), &outside)
            .await
            .unwrap();
        assert!(matches!(
            auth.login(Some(&basic("bob", "bob-secret-1"))).await,
            Err(Refusal::Forbidden(_))
        ));
    }
}
