//! One WebDAV request, end to end: who is asking (HTTP basic auth, or anonymous when the
//! server was started that way), what a read-only server refuses, and the dav-server
//! handler over the volume's file system and lock table. Bad paths (`..` above the root,
//! reserved names) never reach the volume: dav-server refuses the first, the file system
//! hides the second.

use std::convert::Infallible;
use std::sync::Arc;

use dav_server::body::Body;
use dav_server::{DavConfig, DavHandler, DavMethodSet};
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use hyper::body::Incoming;
use strata_vfs::{Ctx, Vfs};

use crate::auth::{Auth, Authenticator, Login, Refusal};
use crate::fs::VolumeFs;
use crate::gzip::{AnyBody, accepts_gzip, finish};
use crate::locks::{LockOptions, VolumeLocks};

/// Size of each read of a file served by GET.
const READ_BUF: usize = 1 << 20;

/// How a server behaves.
#[derive(Clone, Debug)]
pub struct WebDavOptions {
    pub auth: Auth,
    /// Refuse every change (403).
    pub read_only: bool,
    /// The server's `--subdir` (a path from the volume root), `None` for the root.
    pub subdir: Option<String>,
    /// Refuse directory listings: PROPFIND with a depth and GET of a directory (JuiceFS's
    /// `--disallowList`).
    pub disallow_list: bool,
    /// Compress GET answers for clients that accept gzip (`--gzip`).
    pub gzip: bool,
    pub locks: LockOptions,
}

/// The metrics label of an HTTP method: WebDAV's methods by name, anything else "other"
/// (labels come from a fixed set, whatever clients send).
fn method_label(method: &Method) -> &'static str {
    const KNOWN: [&str; 15] = [
        "GET",
        "HEAD",
        "PUT",
        "POST",
        "DELETE",
        "OPTIONS",
        "PROPFIND",
        "PROPPATCH",
        "MKCOL",
        "COPY",
        "MOVE",
        "LOCK",
        "UNLOCK",
        "PATCH",
        "TRACE",
    ];
    KNOWN
        .iter()
        .find(|m| **m == method.as_str())
        .copied()
        .unwrap_or("other")
}

/// A WebDAV server over one volume.
#[derive(Clone, Debug)]
pub struct WebDavServer {
    inner: Arc<Inner>,
}

struct Inner {
    vfs: Arc<Vfs>,
    handler: DavHandler,
    fs: VolumeFs,
    locks: VolumeLocks,
    auth: Authenticator,
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

fn status(code: StatusCode) -> Response<Body> {
    let mut resp = Response::new(Body::from(String::new()));
    *resp.status_mut() = code;
    resp
}

/// The answer to a request refused before it reached the volume.
fn refusal(why: Refusal) -> Response<Body> {
    match why {
        Refusal::Credentials => {
            let mut resp = status(StatusCode::UNAUTHORIZED);
            resp.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Basic realm=\"strata\", charset=\"UTF-8\""),
            );
            resp
        }
        Refusal::Forbidden(why) => {
            tracing::warn!("WebDAV login refused: {why}");
            status(StatusCode::FORBIDDEN)
        }
        Refusal::Unavailable(why) => {
            tracing::error!("WebDAV login failed: {why}");
            status(StatusCode::SERVICE_UNAVAILABLE)
        }
    }
}

/// Methods that change nothing.
fn reads_only(method: &Method) -> bool {
    matches!(method.as_str(), "GET" | "HEAD" | "OPTIONS" | "PROPFIND")
}

/// A PROPFIND that lists a directory's entries (Depth 1 or infinity, or no Depth).
fn lists(req: &Request<Incoming>) -> bool {
    req.method().as_str() == "PROPFIND"
        && req
            .headers()
            .get("depth")
            .is_none_or(|d| d.as_bytes() != b"0")
}

impl WebDavServer {
    /// A server for the volume `vfs` serves (its root or `--subdir`), acting as `ctx`.
    pub fn new(vfs: Arc<Vfs>, ctx: Ctx, opts: WebDavOptions) -> WebDavServer {
        let fs = VolumeFs::new(vfs.clone(), ctx.clone());
        let locks = VolumeLocks::new(vfs.clone(), ctx.clone(), opts.locks.clone());
        let auth = Authenticator::new(opts.auth.clone(), vfs.clone(), ctx, opts.subdir.as_deref());
        let methods = if opts.read_only {
            DavMethodSet::WEBDAV_RO
        } else {
            DavMethodSet::WEBDAV_RW
        };
        let handler = DavHandler::builder()
            .methods(methods)
            .autoindex(!opts.disallow_list)
            .read_buf_size(READ_BUF)
            .build_handler();
        WebDavServer {
            inner: Arc::new(Inner {
                vfs,
                handler,
                fs,
                locks,
                auth,
                opts,
            }),
        }
    }

    /// Answer one request.
    /// Answer one request; its latency (to the response's headers) is recorded by method.
    pub async fn handle(&self, req: Request<Incoming>) -> Result<Response<AnyBody>, Infallible> {
        let started = std::time::Instant::now();
        let method = req.method().clone();
        let gzip = self.inner.opts.gzip && accepts_gzip(req.headers());
        let resp = self.answer(req).await;
        let resp = finish(&method, gzip, resp);
        self.inner
            .vfs
            .front_metrics()
            .webdav
            .observe(method_label(&method), started.elapsed());
        Ok(resp)
    }

    async fn answer(&self, mut req: Request<Incoming>) -> Response<Body> {
        let inner = &self.inner;
        let login: Login = match inner
            .auth
            .login(req.headers().get(header::AUTHORIZATION))
            .await
        {
            Ok(login) => login,
            Err(why) => return refusal(why),
        };
        if (login.read_only && !reads_only(req.method()))
            || (inner.opts.disallow_list && lists(&req))
        {
            return status(StatusCode::FORBIDDEN);
        }
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
            .filesystem(Box::new(inner.fs.for_request(login.root, login.ctx)))
            .locksystem(Box::new(
                inner.locks.for_request(login.lock_prefix.as_deref()),
            ));
        if let Some(user) = login.principal {
            config = config.principal(user);
        }
        let mut resp = inner.handler.handle_with(config, req).await;
        if inner.opts.read_only && resp.status() == StatusCode::METHOD_NOT_ALLOWED {
            *resp.status_mut() = StatusCode::FORBIDDEN;
        }
        resp
    }
}
