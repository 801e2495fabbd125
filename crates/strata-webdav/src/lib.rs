//! Strata's WebDAV server: the volume in every file manager. The WebDAV protocol comes
//! from `dav-server`; this crate gives it the volume through the VFS ([`fs`], [`file`]),
//! dead properties kept in xattrs ([`props`]), and locks kept in the volume's metadata so
//! that every server of a volume sees the same locks ([`locks`], rules in
//! [`locktable`]). [`server`] answers one request (authentication, read-only);
//! [`serve`] runs the HTTP server (shared with the S3 gateway, `strata-http`).

mod error;
mod file;
mod fs;
pub mod locks;
pub mod locktable;
mod props;
mod server;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use error::WebDavError;
pub use fs::VolumeFs;
pub use locks::{LockOptions, VolumeLocks};
pub use props::PROP_PREFIX;
pub use server::{Auth, WebDavOptions, WebDavServer};
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
