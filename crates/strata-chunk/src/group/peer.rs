//! The requesting side of the cache group: one [`Peer`] per other member, with a pool of
//! idle connections, counters, and a down mark with backoff. A request must be
//! acknowledged within the group's short timeout (connect, send, ack) — a dead or stuck
//! peer costs the reader at most that before it falls back to the object store — and then
//! answered within the long one (the peer may be fetching the block itself).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::net::TcpStream;

use super::ring::Member;
use super::wire::{self, Reply, Request, WireError};
use strata_types::Secret;

/// Idle connections kept per peer.
const IDLE_CONNECTIONS: usize = 16;
/// Longest a peer stays marked down after repeated failures.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Another member of the group, as this client talks to it.
#[derive(Debug)]
pub struct Peer {
    pub member: Member,
    idle: Mutex<Vec<TcpStream>>,
    down_until: Mutex<Option<Instant>>,
    failures: AtomicU32,
    pub counters: PeerCounters,
}

/// What this client saw of one peer.
#[derive(Debug, Default)]
pub struct PeerCounters {
    pub requests: AtomicU64,
    pub errors: AtomicU64,
    pub bytes: AtomicU64,
    /// Latency of requests to this peer, whatever their result.
    pub latency: strata_types::metrics::Histogram,
}

/// Timeouts of a request.
#[derive(Clone, Copy, Debug)]
pub struct Timeouts {
    /// Connect, send and acknowledgement.
    pub ack: Duration,
    /// The reply after the acknowledgement.
    pub reply: Duration,
}

impl Peer {
    pub fn new(member: Member) -> Peer {
        Peer {
            member,
            idle: Mutex::new(Vec::new()),
            down_until: Mutex::new(None),
            failures: AtomicU32::new(0),
            counters: PeerCounters::default(),
        }
    }

    /// Whether the peer is marked down now.
    pub fn is_down(&self) -> bool {
        matches!(*self.down_until.lock(), Some(t) if Instant::now() < t)
    }

    fn mark_down(&self) {
        let failures = self.failures.fetch_add(1, Ordering::Relaxed).min(5);
        let backoff = Duration::from_secs(1)
            .saturating_mul(1 << failures)
            .min(MAX_BACKOFF);
        *self.down_until.lock() = Some(Instant::now() + backoff);
    }

    fn mark_up(&self) {
        if self.failures.swap(0, Ordering::Relaxed) > 0 {
            *self.down_until.lock() = None;
        }
    }

    /// Send `req` and return the verified reply; on failure the peer is marked down
    /// (backing off longer after each consecutive failure).
    pub async fn call(
        &self,
        req: &Request,
        secret: &Secret,
        t: Timeouts,
    ) -> Result<Reply, WireError> {
        let start = Instant::now();
        self.counters.requests.fetch_add(1, Ordering::Relaxed);
        let result = self.call_once(req, secret, t).await;
        self.counters.latency.observe(start.elapsed());
        match &result {
            Ok(reply) => {
                let n = u64::try_from(reply.payload.len()).unwrap_or(u64::MAX);
                self.counters.bytes.fetch_add(n, Ordering::Relaxed);
                self.mark_up();
            }
            Err(e) => {
                self.counters.errors.fetch_add(1, Ordering::Relaxed);
                tracing::debug!("cache group peer {}: {e}", self.member.addr);
                self.mark_down();
            }
        }
        result
    }

    async fn call_once(
        &self,
        req: &Request,
        secret: &Secret,
        t: Timeouts,
    ) -> Result<Reply, WireError> {
        // A pooled connection may have been closed by the peer since: one retry on a new one.
        let pooled = self.idle.lock().pop();
        let mut stream = match pooled {
            Some(mut s) => match timed(t.ack, send_and_ack(&mut s, req, secret)).await {
                Ok(()) => s,
                Err(_) => self.connect_and_send(req, secret, t.ack).await?,
            },
            None => self.connect_and_send(req, secret, t.ack).await?,
        };
        let reply = timed(t.reply, Reply::receive(&mut stream, secret, &req.nonce)).await?;
        let mut idle = self.idle.lock();
        if idle.len() < IDLE_CONNECTIONS {
            idle.push(stream);
        }
        Ok(reply)
    }

    async fn connect_and_send(
        &self,
        req: &Request,
        secret: &Secret,
        limit: Duration,
    ) -> Result<TcpStream, WireError> {
        timed(limit, async {
            let mut s = TcpStream::connect(self.member.addr).await?;
            s.set_nodelay(true)?;
            send_and_ack(&mut s, req, secret).await?;
            Ok(s)
        })
        .await
    }
}

async fn send_and_ack(s: &mut TcpStream, req: &Request, secret: &Secret) -> Result<(), WireError> {
    req.send(s, secret).await?;
    wire::receive_ack(s).await
}

async fn timed<T>(
    limit: Duration,
    f: impl std::future::Future<Output = Result<T, WireError>>,
) -> Result<T, WireError> {
    tokio::time::timeout(limit, f).await.map_err(|_| {
        WireError::Io(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("no answer within {limit:?}"),
        ))
    })?
}
