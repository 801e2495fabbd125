//! Strata's WebDAV server: the volume in every file manager. The WebDAV protocol comes
//! from `dav-server`; this crate gives it the volume through the VFS ([`dav`], [`fs`], [`file`]),
//! dead properties kept in xattrs ([`props`]), and locks kept in the volume's metadata so
//! that every server of a volume sees the same locks ([`locks`], rules in
//! [`locktable`]). [`server`] answers one request (who asks is [`auth`]'s: the server's
//! user or the volume's users, with their directory and read-only flag; `--gzip` is
//! [`gzip`]'s);
//! [`serve`] runs the HTTP server (shared with the S3 gateway, `strata-http`).

mod auth;
mod dav;
mod error;
mod file;
mod fs;
mod gzip;
pub mod locks;
pub mod locktable;
mod props;
mod server;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use auth::Auth;
pub use error::WebDavError;
pub use fs::VolumeFs;
pub use gzip::AnyBody;
pub use locks::{LockOptions, VolumeLocks, lock_prefix};
pub use props::PROP_PREFIX;
pub use server::{WebDavOptions, WebDavServer};
pub use strata_http::{ServeOptions, TlsAcceptor};

/// Serve `server` on `listener` until `stop` is cancelled.
pub async fn serve(
    listener: TcpListener,
    server: WebDavServer,
    opts: ServeOptions,
    tls: Option<TlsAcceptor>,
    stop: CancellationToken,
) {
    let handler = move |req| {
        let server = server.clone();
        async move { server.handle(req).await }
    };
    strata_http::serve(listener, handler, opts, tls, stop).await;
}
