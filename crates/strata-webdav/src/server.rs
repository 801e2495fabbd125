//! One WebDAV request, end to end: who is asking (HTTP basic auth, or anonymous when the
//! server was started that way), what a read-only server refuses, and the dav-server
//! handler over the volume's file system and lock table. Bad paths (`..` above the root,
//! reserved names) never reach the volume: dav-server refuses the first, the file system
//! hides the second.

use std::convert::Infallible;
use std::sync::Arc;

use dav_server::body::Body;
use dav_server::{DavConfig, DavHandler, DavMethodSet};
use http::{HeaderValue, Request, Response, StatusCode, header};
use hyper::body::Incoming;
use strata_types::Secret;
use strata_vfs::{Ctx, Vfs};

use crate::fs::VolumeFs;
use crate::locks::{LockOptions, VolumeLocks};

/// Size of each read of a file served by GET.
const READ_BUF: usize = 1 << 20;

/// Who may use the server.
#[derive(Clone, Debug)]
pub enum Auth {
    /// Everyone, without credentials (`--anonymous`).
    Anonymous,
    /// HTTP basic auth with this user and password (`WEBDAV_USER`, `WEBDAV_PASSWORD`).
    Basic { user: String, password: Secret },
}

/// How a server behaves.
#[derive(Clone, Debug)]
pub struct WebDavOptions {
    pub auth: Auth,
    /// Refuse every change (403).
    pub read_only: bool,
    pub locks: LockOptions,
}

/// A WebDAV server over one volume.
#[derive(Clone, Debug)]
pub struct WebDavServer {
    inner: Arc<Inner>,
}

struct Inner {
    handler: DavHandler,
    fs: VolumeFs,
    locks: VolumeLocks,
    opts: WebDavOptions,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inner")
            .field("fs", &self.fs)
            .field("opts", &self.opts)
            .finish_non_exhaustive()
    }
}

/// Compare without leaking where two byte strings differ.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The user and password of a basic `Authorization` header.
fn basic_credentials(value: &HeaderValue) -> Option<(String, String)> {
    let encoded = value.to_str().ok()?.strip_prefix("Basic ")?.trim();
    let decoded = base64_simd::STANDARD.decode_to_vec(encoded).ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

fn status(code: StatusCode) -> Response<Body> {
    let mut resp = Response::new(Body::from(String::new()));
    *resp.status_mut() = code;
    resp
}

/// The answer to a request without valid credentials.
fn ask_for_credentials() -> Response<Body> {
    let mut resp = status(StatusCode::UNAUTHORIZED);
    resp.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"strata\", charset=\"UTF-8\""),
    );
    resp
}

impl WebDavServer {
    /// A server for the volume `vfs` serves (its root or `--subdir`), acting as `ctx`.
    pub fn new(vfs: Arc<Vfs>, ctx: Ctx, opts: WebDavOptions) -> WebDavServer {
        let fs = VolumeFs::new(vfs.clone(), ctx.clone());
        let locks = VolumeLocks::new(vfs, ctx, opts.locks.clone());
        let methods = if opts.read_only {
            DavMethodSet::WEBDAV_RO
        } else {
            DavMethodSet::WEBDAV_RW
        };
        let handler = DavHandler::builder()
            .methods(methods)
            .autoindex(true)
            .read_buf_size(READ_BUF)
            .build_handler();
        WebDavServer {
            inner: Arc::new(Inner {
                handler,
                fs,
                locks,
                opts,
            }),
        }
    }

    /// Who a request comes from: a user, nobody in particular (anonymous server), or
    /// `None` when its credentials are missing or wrong.
    fn authenticate(&self, req: &Request<Incoming>) -> Option<Option<String>> {
        let Auth::Basic { user, password } = &self.inner.opts.auth else {
            return Some(None);
        };
        let (u, p) = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(basic_credentials)?;
        let good = same_secret(u.as_bytes(), user.as_bytes())
            && same_secret(p.as_bytes(), password.expose().as_bytes());
        good.then_some(Some(u))
    }

    /// Answer one request.
    pub async fn handle(&self, mut req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
        let Some(user) = self.authenticate(&req) else {
            return Ok(ask_for_credentials());
        };
        // dav-server answers PROPFIND with Depth: infinity only for litmus (which marks
        // its requests); the answer is streamed, so the server allows it for everyone.
        let infinite = req
            .headers()
            .get("depth")
            .is_some_and(|d| d.as_bytes().eq_ignore_ascii_case(b"infinity"));
        if infinite && req.method().as_str() == "PROPFIND" {
            req.headers_mut()
                .insert("x-litmus", HeaderValue::from_static("depth-infinity"));
        }
        let mut config = DavConfig::new()
            .filesystem(Box::new(self.inner.fs.for_request()))
            .locksystem(Box::new(self.inner.locks.for_request()));
        if let Some(user) = user {
            config = config.principal(user);
        }
        let mut resp = self.inner.handler.handle_with(config, req).await;
        if self.inner.opts.read_only && resp.status() == StatusCode::METHOD_NOT_ALLOWED {
            *resp.status_mut() = StatusCode::FORBIDDEN;
        }
        Ok(resp)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code
    use super::*;

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
}
