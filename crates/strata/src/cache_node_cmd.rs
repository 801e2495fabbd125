//! `strata cache-node`: a member of a cache group without a mount — a host with a big
//! cache disk that serves the group's blocks to the other members (FUSE mounts,
//! gateways, SDK clients). It opens the volume like any client (its session announces
//! it), serves until SIGTERM or Ctrl-C, and logs its counters every minute.

use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{Result, bail};
use clap::Args;
use strata_chunk::group::Group;
use strata_object::metered::ObjectStats;
use strata_types::MetaUrl;
use strata_vfs::VfsOptions;

use crate::client::{ClientArgs, open_client};
use crate::{http_front, wiring};

#[derive(Debug, Args)]
pub struct CacheNodeArgs {
    /// The volume's metadata URL (sqlite3://..., redis://..., postgres://..., etcd://...)
    pub meta_url: MetaUrl,
    #[command(flatten)]
    pub client: ClientArgs,
    #[command(flatten)]
    pub metrics: crate::metrics_endpoint::MetricsArgs,
}

pub fn run_cache_node(a: CacheNodeArgs) -> Result<()> {
    wiring::init_logging("info");
    if a.client.cache_group.is_none() {
        bail!("a cache node needs --cache-group NAME");
    }
    if a.client.no_sharing {
        bail!("a cache node exists to serve: drop --no-sharing");
    }
    if a.client.cache_size == 0 {
        bail!("a cache node needs a cache: --cache-size must be above 0");
    }
    let rt = wiring::runtime()?;
    rt.block_on(serve(a))
}

async fn serve(a: CacheNodeArgs) -> Result<()> {
    let vfs_opts = VfsOptions {
        read_only: true,
        hide_internal: true,
        ..VfsOptions::default()
    };
    let client = open_client(&a.meta_url, &a.client, vfs_opts, "cache-node").await?;
    let Some(group) = client.vfs.chunks().group().cloned() else {
        client.close().await.ok();
        bail!("the cache group was not joined");
    };
    if let Some(me) = group.members().iter().find(|m| m.id == group.config().id) {
        tracing::info!(
            "cache node of group {} serving on {}",
            group.config().name,
            me.addr
        );
    }
    let _metrics = match crate::metrics_endpoint::start(&a.metrics, &client.vfs).await {
        Ok(endpoint) => endpoint,
        Err(e) => {
            client.close().await.ok();
            return Err(e);
        }
    };
    let objects = client.vfs.object_stats();
    let (group_now, objects_now) = (group.clone(), objects.clone());
    let report = tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(60)).await;
            log_counters(&group_now, objects_now.as_deref());
        }
    });
    http_front::wait_for_signal().await;
    report.abort();
    log_counters(&group, objects.as_deref());
    client.close().await.ok();
    Ok(())
}

fn log_counters(group: &Group, objects: Option<&ObjectStats>) {
    let s = &group.stats;
    let (gets, bytes) = objects.map_or((0, 0), |o| (o.requests("get", "ok"), o.bytes_down()));
    tracing::info!(
        "cache group {}: {} members; served {} requests, {} bytes; refused {}; \
         object GETs {gets}, {bytes} bytes",
        group.config().name,
        group.members().len(),
        s.served.load(Ordering::Relaxed),
        s.served_bytes.load(Ordering::Relaxed),
        s.refused.load(Ordering::Relaxed),
    );
}
