//! The cache group's metrics (docs/METRICS.md): what peers served this client, what it
//! served them, and per peer its requests, errors, bytes, latency and down mark.

use std::sync::atomic::{AtomicU64, Ordering};

use strata_types::metrics::{Exposition, Kind};

use super::Group;
use super::peer::Peer;

/// A per-peer metric: name, kind, help, and how to read it off a peer.
type PeerMetric = (&'static str, Kind, &'static str, fn(&Peer) -> u64);

impl Group {
    /// This client's group counters in the Prometheus text format.
    pub fn render_metrics(&self, e: &mut Exposition) {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let s = &self.stats;
        let members = u64::try_from(self.members().len()).unwrap_or(u64::MAX);
        e.single(
            "strata_group_members",
            Kind::Gauge,
            "Serving members of the cache group, this client included if it serves.",
            members,
        );
        for (name, help, value) in [
            (
                "strata_group_peer_hits",
                "Blocks or ranges peers served to this client.",
                load(&s.peer_hits),
            ),
            (
                "strata_group_peer_bytes",
                "Bytes peers served to this client.",
                load(&s.peer_bytes),
            ),
            (
                "strata_group_peer_fallbacks",
                "Peer requests that failed; the object store answered instead.",
                load(&s.peer_fallbacks),
            ),
            (
                "strata_group_served",
                "Requests this client served to peers.",
                load(&s.served),
            ),
            (
                "strata_group_served_bytes",
                "Bytes this client served to peers.",
                load(&s.served_bytes),
            ),
            (
                "strata_group_staged_hits",
                "Blocks or ranges a writer handed over from its staging area (--writeback).",
                load(&s.staged_hits),
            ),
            (
                "strata_group_staged_bytes",
                "Bytes writers handed over from their staging areas.",
                load(&s.staged_bytes),
            ),
            (
                "strata_group_refused",
                "Peer requests refused: wrong signature or clock.",
                load(&s.refused),
            ),
        ] {
            e.single(name, Kind::Counter, help, value);
        }
        self.render_peers(e);
    }

    fn render_peers(&self, e: &mut Exposition) {
        let peers = self.peers();
        let addrs: Vec<String> = peers.iter().map(|p| p.member.addr.to_string()).collect();
        let per_peer: [PeerMetric; 4] = [
            (
                "strata_group_peer_requests",
                Kind::Counter,
                "Requests to each peer.",
                |p| p.counters.requests.load(Ordering::Relaxed),
            ),
            (
                "strata_group_peer_errors",
                Kind::Counter,
                "Failed requests to each peer.",
                |p| p.counters.errors.load(Ordering::Relaxed),
            ),
            (
                "strata_group_peer_received_bytes",
                Kind::Counter,
                "Bytes received from each peer.",
                |p| p.counters.bytes.load(Ordering::Relaxed),
            ),
            (
                "strata_group_peer_down",
                Kind::Gauge,
                "1 while a peer is marked down (skipped), else 0.",
                |p| u64::from(p.is_down()),
            ),
        ];
        for (name, kind, help, value) in per_peer {
            e.family(name, kind, help);
            for (peer, addr) in peers.iter().zip(&addrs) {
                e.sample(name, &[("peer", addr)], value(peer));
            }
        }
        e.family(
            "strata_group_peer_duration_seconds",
            Kind::Histogram,
            "Latency of requests to each peer, whatever their result.",
        );
        for (peer, addr) in peers.iter().zip(&addrs) {
            e.histogram(
                "strata_group_peer_duration_seconds",
                &[("peer", addr)],
                &peer.counters.latency,
            );
        }
    }
}
