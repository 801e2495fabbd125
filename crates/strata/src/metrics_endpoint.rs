//! `--metrics ADDR` of the long-running commands (mount, gateway, webdav, cache-node): a
//! Prometheus endpoint at `http://ADDR/metrics` serving the client's metrics
//! (docs/METRICS.md). The default address is JuiceFS's, 127.0.0.1:9567; when another
//! process holds it (a second mount on the host), a free port on the same host is taken
//! and logged. An address given explicitly must be free.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;
use strata_vfs::Vfs;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// JuiceFS's default metrics address.
pub const DEFAULT_METRICS_ADDR: &str = "127.0.0.1:9567";

#[derive(Debug, Clone, Args)]
pub struct MetricsArgs {
    /// Serve Prometheus metrics at http://ADDR/metrics (docs/METRICS.md). If the default
    /// address is taken, a free port on the same host is used and logged
    #[arg(long, value_name = "ADDR", default_value = DEFAULT_METRICS_ADDR)]
    pub metrics: String,
    /// Do not serve metrics over HTTP (`.stats` still shows them on a mount)
    #[arg(long)]
    pub no_metrics: bool,
}

/// A running metrics endpoint; stopped when dropped.
#[derive(Debug)]
pub struct MetricsEndpoint {
    pub addr: SocketAddr,
    stop: CancellationToken,
}

impl Drop for MetricsEndpoint {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Start serving `vfs`'s metrics as `args` say; `None` with `--no-metrics`.
pub async fn start(args: &MetricsArgs, vfs: &Arc<Vfs>) -> Result<Option<MetricsEndpoint>> {
    if args.no_metrics {
        return Ok(None);
    }
    let listener = bind(&args.metrics).await?;
    let addr = listener.local_addr()?;
    let stop = CancellationToken::new();
    let vfs = vfs.clone();
    let render: strata_http::metrics::Render = Arc::new(move || vfs.metrics_text());
    tokio::spawn(strata_http::metrics::serve_metrics(
        listener,
        render,
        stop.clone(),
    ));
    tracing::info!("metrics at http://{addr}/metrics");
    Ok(Some(MetricsEndpoint { addr, stop }))
}

async fn bind(address: &str) -> Result<TcpListener> {
    match TcpListener::bind(address).await {
        Ok(listener) => Ok(listener),
        Err(e) if address == DEFAULT_METRICS_ADDR => {
            tracing::debug!("metrics address {address} not available ({e}): taking a free port");
            let host = address.rsplit_once(':').map_or(address, |(host, _)| host);
            TcpListener::bind((host, 0))
                .await
                .with_context(|| format!("cannot listen for metrics on {host}"))
        }
        Err(e) => Err(e).with_context(|| format!("cannot listen for metrics on {address}")),
    }
}
