//! What the command's HTTP front ends (`gateway`, `webdav`) share: the listener and TLS
//! their flags ask for (taken over from the Strata server already on that address, if
//! any: [`crate::listen_handover`]), and serving until SIGTERM, Ctrl-C or a hand-over to
//! a new server, with a clean stop (requests in flight finish, then the client session
//! closes).

use std::net::SocketAddr;
use std::path::Path;

use anyhow::{Context, Result};
use strata_http::TlsAcceptor;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::client::Client;

/// A bound listener and how it speaks.
pub struct Listening {
    pub listener: TcpListener,
    pub tls: Option<TlsAcceptor>,
    /// `http` or `https`.
    pub scheme: &'static str,
    pub local: SocketAddr,
    /// The server this one replaces, told once this one serves ([`Listening::serving`]).
    pub taken: Option<crate::listen_handover::Taken>,
}

/// Listen on `address`, with TLS when a certificate and key are given.
pub async fn listen(address: &str, cert: Option<&Path>, key: Option<&Path>) -> Result<Listening> {
    let tls = match (cert, key) {
        (Some(cert), Some(key)) => Some(strata_http::load_tls(cert, key)?),
        _ => None,
    };
    let (listener, taken) = match TcpListener::bind(address).await {
        Ok(listener) => (listener, None),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            match crate::listen_handover::take(address).await? {
                Some((listener, taken)) => (TcpListener::from_std(listener)?, Some(taken)),
                None => return Err(e).with_context(|| format!("cannot listen on {address}")),
            }
        }
        Err(e) => return Err(e).with_context(|| format!("cannot listen on {address}")),
    };
    let local = listener.local_addr()?;
    Ok(Listening {
        listener,
        scheme: if tls.is_some() { "https" } else { "http" },
        tls,
        local,
        taken,
    })
}

/// Offer the listener to a server that replaces this one (call before serving on it).
pub fn offer(listener: &TcpListener, local: SocketAddr) -> Option<crate::listen_handover::Offer> {
    match crate::listen_handover::offer(listener, local) {
        Ok(offer) => Some(offer),
        Err(e) => {
            tracing::warn!("{e:#}: this server cannot hand its socket over");
            None
        }
    }
}

/// This server accepts now: the one it replaces stops accepting and drains.
pub async fn serving(taken: Option<crate::listen_handover::Taken>) {
    if let Some(taken) = taken
        && let Err(e) = taken.serving().await
    {
        tracing::warn!("telling the replaced server: {e:#}");
    }
}

/// Wait for SIGTERM, Ctrl-C or another server taking the listener over (`offer`), then
/// stop the server `task` through `stop` and close `client`. `what` names the server in
/// log lines.
pub async fn run_until_signal(
    what: &str,
    task: JoinHandle<()>,
    stop: CancellationToken,
    client: Client,
    offer: Option<crate::listen_handover::Offer>,
) {
    let handed = offer.as_ref().map(|o| o.handed.clone()).unwrap_or_default();
    tokio::select! {
        () = wait_for_signal() => {}
        () = handed.cancelled() => {}
    }
    tracing::info!("stopping {what}: finishing requests in flight");
    stop.cancel();
    if let Err(e) = task.await {
        tracing::error!("the server task failed: {e}");
    }
    client.close().await.ok();
}

pub async fn wait_for_signal() {
    let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate());
    match term {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(e) => {
            tracing::warn!("cannot watch SIGTERM ({e}): only Ctrl-C stops the server");
            if let Err(e) = tokio::signal::ctrl_c().await {
                tracing::error!("cannot watch Ctrl-C either ({e}): stopping");
            }
        }
    }
}
