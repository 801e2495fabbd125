//! What the command's HTTP front ends (`gateway`, `webdav`) share: the listener and TLS
//! their flags ask for, and serving until SIGTERM or Ctrl-C with a clean stop (requests
//! in flight finish, then the client session closes).

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
}

/// Listen on `address`, with TLS when a certificate and key are given.
pub async fn listen(address: &str, cert: Option<&Path>, key: Option<&Path>) -> Result<Listening> {
    let tls = match (cert, key) {
        (Some(cert), Some(key)) => Some(strata_http::load_tls(cert, key)?),
        _ => None,
    };
    let listener = TcpListener::bind(address)
        .await
        .with_context(|| format!("cannot listen on {address}"))?;
    let local = listener.local_addr()?;
    Ok(Listening {
        listener,
        scheme: if tls.is_some() { "https" } else { "http" },
        tls,
        local,
    })
}

/// Wait for SIGTERM or Ctrl-C, then stop the server `task` through `stop` and close
/// `client`. `what` names the server in log lines.
pub async fn run_until_signal(
    what: &str,
    task: JoinHandle<()>,
    stop: CancellationToken,
    client: Client,
) {
    wait_for_signal().await;
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
