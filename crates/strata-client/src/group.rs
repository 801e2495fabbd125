//! Joining a cache group: bind the listener peers will call, read the volume's group
//! secret, describe this member in its session record, then serve peers and follow the
//! membership (the live sessions of the group, read again every heartbeat) until the
//! client closes.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::Duration;

use strata_chunk::ChunkStore;
use strata_chunk::group::{Group, GroupConfig, Member, serve};
use strata_meta::{GroupMember, Meta};
use strata_types::Secret;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::error::{OpenError, Result};

/// How a client takes part in a cache group (`--cache-group` and its flags).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupOptions {
    /// The group's name: clients of one volume with the same name share their caches.
    pub name: String,
    /// Where to serve peers; port 0 picks a free one, an unspecified address
    /// (0.0.0.0) listens everywhere and advertises this host's outward address.
    pub listen: SocketAddr,
    /// Read from the group but serve nothing (`--no-sharing`).
    pub no_sharing: bool,
    /// How long a peer may take to accept a request before the object store is asked.
    pub ack_timeout: Duration,
}

/// A group joined but not yet announced: its listener and this member's record.
#[derive(Debug)]
pub struct Joining {
    pub group: Arc<Group>,
    pub record: GroupMember,
    listener: Option<TcpListener>,
}

/// Bind the listener and build this client's view of `o.name` (weight: `cache_size`).
pub async fn join(
    meta: &Meta,
    o: &GroupOptions,
    cache_size: u64,
    keys: Option<Arc<strata_object::seal::Keys>>,
) -> Result<Joining> {
    let bad = |reason: String| OpenError::Group {
        group: o.name.clone(),
        reason,
    };
    if o.name.is_empty() || o.name.len() > 255 {
        return Err(bad("the group name must have 1 to 255 characters".into()));
    }
    let secret = meta
        .group_secret()
        .await
        .map_err(|source| OpenError::Meta {
            context: "cannot read the cache group secret".into(),
            source,
        })?;
    let serving = !o.no_sharing && cache_size > 0;
    if !o.no_sharing && cache_size == 0 {
        tracing::warn!(
            "cache group {}: --cache-size 0, so this member serves nothing",
            o.name
        );
    }
    let (listener, addr) = if serving {
        let listener = TcpListener::bind(o.listen)
            .await
            .map_err(|e| bad(format!("cannot listen on {}: {e}", o.listen)))?;
        let bound = listener
            .local_addr()
            .map_err(|e| bad(format!("listener address: {e}")))?;
        (Some(listener), advertised(bound).to_string())
    } else {
        (None, String::new())
    };
    let id: u64 = rand::random();
    let weight_mib = u32::try_from((cache_size >> 20).max(1)).unwrap_or(u32::MAX);
    let group = Group::new(GroupConfig {
        name: o.name.clone(),
        secret: Secret::new(secret),
        id,
        serving,
        timeouts: strata_chunk::group::Timeouts {
            ack: o.ack_timeout,
            ..GroupConfig::default_timeouts()
        },
        keys,
    });
    let record = GroupMember {
        group: o.name.clone(),
        id,
        addr,
        weight_mib,
    };
    Ok(Joining {
        group,
        record,
        listener,
    })
}

impl Joining {
    /// Serve peers and follow the membership every `every` until `stop` fires.
    pub async fn run(
        self,
        meta: Arc<Meta>,
        chunks: ChunkStore,
        every: Duration,
        stop: CancellationToken,
    ) {
        refresh(&meta, &self.group).await;
        let config = self.group.config();
        match &self.listener {
            Some(_) => tracing::info!(
                "cache group {}: member {:016x} serving peers on {}",
                config.name,
                config.id,
                self.record.addr
            ),
            None => tracing::info!(
                "cache group {}: member {:016x} reading from peers, serving none",
                config.name,
                config.id
            ),
        }
        if let Some(listener) = self.listener {
            tokio::spawn(serve::serve(
                listener,
                chunks,
                self.group.clone(),
                stop.clone(),
            ));
        }
        let group = self.group;
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(every) => refresh(&meta, &group).await,
                }
            }
        });
    }
}

/// Read the group's live members from the sessions into `group`.
async fn refresh(meta: &Meta, group: &Group) {
    match meta.group_members(&group.config().name).await {
        Ok(records) => {
            let members = records
                .into_iter()
                .filter_map(|r| {
                    let addr = r.addr.parse().ok().or_else(|| {
                        tracing::warn!(
                            "cache group member {} advertises a bad address {:?}",
                            r.id,
                            r.addr
                        );
                        None
                    })?;
                    Some(Member {
                        id: r.id,
                        addr,
                        weight_mib: r.weight_mib,
                    })
                })
                .collect();
            group.set_members(members);
        }
        Err(e) => tracing::warn!("cache group: reading the members: {e} (keeping the last list)"),
    }
}

/// The address peers should call: `bound` itself, or, when it listens on every
/// address, this host's outward address (the one a route to the outside would use;
/// loopback when there is none).
fn advertised(bound: SocketAddr) -> SocketAddr {
    if !bound.ip().is_unspecified() {
        return bound;
    }
    let outward = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))
        .and_then(|s| {
            // No packet is sent: connecting a UDP socket only picks a route.
            s.connect((Ipv4Addr::new(192, 0, 2, 1), 9))?;
            s.local_addr()
        })
        .map(|a| a.ip())
        .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
    SocketAddr::new(outward, bound.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_specific_address_is_advertised_as_is() {
        let a: SocketAddr = "127.0.0.1:7000".parse().unwrap();
        assert_eq!(advertised(a), a);
        let any: SocketAddr = "0.0.0.0:7001".parse().unwrap();
        let shown = advertised(any);
        assert_eq!(shown.port(), 7001);
        assert!(!shown.ip().is_unspecified());
    }
}
