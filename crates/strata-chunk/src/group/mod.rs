//! The cache group (`--cache-group NAME`): clients of one volume that share their block
//! caches. Each block belongs to one member ([`ring`], weighted rendezvous hashing); on a
//! local miss a client asks the owner ([`peer`]), which serves the block from its cache or
//! fetches it from the object store once and keeps it ([`serve`]). Requests are signed
//! with the volume's group secret and replies carry checksums ([`wire`]). A peer that
//! does not answer in time is skipped and marked down: the reader falls back to the
//! object store, never to an error.
//!
//! On an encrypted volume the blocks a peer sends are sealed (`strata_object::seal`,
//! domain `Peer`) under a key bound to the block, the range and the request's nonce: the
//! network carries no plaintext, and a reply cannot be replayed for another request.
//!
//! A block written with `--writeback` and not uploaded yet is asked of its writer
//! ([`Group::get_staged`]), which answers from its staging area.
//!
//! Membership comes from outside (the client layer reads the volume's sessions): this
//! module only takes the current member list ([`Group::set_members`]).

mod metrics;
pub mod peer;
pub mod ring;
pub mod serve;
pub mod wire;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use parking_lot::RwLock;
use strata_object::seal::{Domain, Keys};
use strata_types::Secret;

pub use peer::{Peer, Timeouts};
pub use ring::{Member, Ring};
use wire::{Op, Reply, Request, WireError};

/// How a client takes part in a group.
#[derive(Clone, Debug)]
pub struct GroupConfig {
    pub name: String,
    pub secret: Secret,
    /// This client's id in the ring; it owns blocks only when it serves (`serving`).
    pub id: u64,
    /// Whether this client serves peers (false with `--no-sharing`).
    pub serving: bool,
    pub timeouts: Timeouts,
    /// An encrypted volume's keys: block bytes travel sealed.
    pub keys: Option<Arc<Keys>>,
}

/// Segment tag of a sealed peer payload.
const PEER_TAG: &[u8; 4] = b"PER3";

/// What a sealed payload is bound to: the block, the range and the request's nonce.
fn payload_name(req: &Request) -> String {
    let nonce = strata_types::hex::encode(&req.nonce);
    format!("{}:{}-{}:{nonce}", req.key, req.from, req.to)
}

/// Payloads at least this big are sealed and opened on the blocking pool.
const OFFLOAD_BYTES: usize = 256 << 10;

/// Block bytes answering `req`, sealed when the volume is encrypted.
pub(crate) async fn seal_payload(
    keys: Option<&Arc<Keys>>,
    req: &Request,
    data: Bytes,
) -> Result<Bytes, WireError> {
    let Some(keys) = keys else {
        return Ok(data);
    };
    let (ring, name) = (keys.ring(), payload_name(req));
    let seal = move || {
        ring.sealer(Domain::Peer, &name)
            .and_then(|s| s.seal_to_vec(0, PEER_TAG, &data))
            .map(Bytes::from)
            .map_err(|e| WireError::Malformed(format!("sealing a reply: {e}")))
    };
    off_the_workers(OFFLOAD_BYTES <= req_len(req), seal).await?
}

/// The block bytes of a reply to `req`, opened when the volume is encrypted.
async fn open_payload(
    keys: Option<&Arc<Keys>>,
    req: &Request,
    payload: Bytes,
) -> Result<Bytes, WireError> {
    let Some(keys) = keys else {
        return Ok(payload);
    };
    let (ring, name) = (keys.ring(), payload_name(req));
    let open = move || {
        ring.opener(Domain::Peer, &name)
            .open_to_vec(0, &payload, &[PEER_TAG])
            .map(|(plain, _)| Bytes::from(plain))
            .map_err(|e| WireError::Malformed(format!("a peer's reply does not open: {e}")))
    };
    off_the_workers(OFFLOAD_BYTES <= req_len(req), open).await?
}

/// Bytes a request asks for.
fn req_len(req: &Request) -> usize {
    usize::try_from(req.to.saturating_sub(req.from)).unwrap_or(usize::MAX)
}

/// `job`'s result, computed on the blocking pool when it is `big` (CPU work of a
/// millisecond or more must not hold up an async worker).
async fn off_the_workers<T: Send + 'static>(
    big: bool,
    job: impl FnOnce() -> T + Send + 'static,
) -> Result<T, WireError> {
    if !big {
        return Ok(job());
    }
    tokio::task::spawn_blocking(job)
        .await
        .map_err(|e| WireError::Malformed(format!("sealing on the blocking pool: {e}")))
}

impl GroupConfig {
    /// Default timeouts: a peer must acknowledge within 500 ms and answer within 60 s.
    pub fn default_timeouts() -> Timeouts {
        Timeouts {
            ack: Duration::from_millis(500),
            reply: Duration::from_secs(60),
        }
    }
}

/// Counters of the group as this client saw it.
#[derive(Debug, Default)]
pub struct GroupStats {
    /// Blocks or ranges a peer served to this client, and their bytes.
    pub peer_hits: AtomicU64,
    pub peer_bytes: AtomicU64,
    /// Requests to peers that failed (the object store answered instead).
    pub peer_fallbacks: AtomicU64,
    /// Requests this client served to peers, and their bytes.
    pub served: AtomicU64,
    pub served_bytes: AtomicU64,
    /// Requests refused: wrong signature or clock.
    pub refused: AtomicU64,
    /// Blocks or ranges a writer handed over from its staging area before uploading
    /// them (`--writeback`), and their bytes.
    pub staged_hits: AtomicU64,
    pub staged_bytes: AtomicU64,
}

/// This client's view of its group.
#[derive(Debug)]
pub struct Group {
    config: GroupConfig,
    ring: RwLock<Arc<Ring>>,
    peers: RwLock<Arc<HashMap<u64, Arc<Peer>>>>,
    pub stats: GroupStats,
}

impl Group {
    pub fn new(config: GroupConfig) -> Arc<Group> {
        Arc::new(Group {
            config,
            ring: RwLock::default(),
            peers: RwLock::default(),
            stats: GroupStats::default(),
        })
    }

    pub fn config(&self) -> &GroupConfig {
        &self.config
    }

    pub fn secret(&self) -> &Secret {
        &self.config.secret
    }

    /// Replace the member list (serving members, this client included if it serves).
    /// Peers already known keep their connections and down marks.
    pub fn set_members(&self, members: Vec<Member>) {
        let ring = Ring::new(members);
        let old = self.peers.read().clone();
        let peers: HashMap<u64, Arc<Peer>> = ring
            .members()
            .iter()
            .filter(|m| m.id != self.config.id)
            .map(|m| {
                let peer = match old.get(&m.id) {
                    Some(p) if p.member == *m => p.clone(),
                    _ => Arc::new(Peer::new(m.clone())),
                };
                (m.id, peer)
            })
            .collect();
        *self.peers.write() = Arc::new(peers);
        *self.ring.write() = Arc::new(ring);
    }

    /// Serving members, this client included.
    pub fn members(&self) -> Vec<Member> {
        self.ring.read().members().to_vec()
    }

    /// The other members as this client talks to them.
    pub fn peers(&self) -> Vec<Arc<Peer>> {
        let mut peers: Vec<_> = self.peers.read().values().cloned().collect();
        peers.sort_by_key(|p| p.member.id);
        peers
    }

    /// The peer that owns `key`, or `None` when this client owns it (or is alone).
    /// Peers marked down are passed over: their blocks go to the next-best member.
    pub fn owner(&self, key: &str) -> Option<Arc<Peer>> {
        let (ring, peers) = (self.ring.read().clone(), self.peers.read().clone());
        let me = self.config.id;
        let usable = |m: &Member| m.id == me || peers.get(&m.id).is_some_and(|p| !p.is_down());
        let owner = ring.owner(key, usable)?;
        peers.get(&owner.id).cloned()
    }

    /// Ask `peer` to do `op` on bytes `[from, to)` of block `key` (`block_len` bytes).
    pub async fn call(
        &self,
        peer: &Peer,
        op: Op,
        key: &str,
        block_len: usize,
        range: (usize, usize),
    ) -> Result<Reply, WireError> {
        let len32 =
            |n: usize| u32::try_from(n).map_err(|_| WireError::Malformed("block too large".into()));
        let req = Request {
            op,
            key: key.to_string(),
            block_len: len32(block_len)?,
            from: len32(range.0)?,
            to: len32(range.1)?,
            time: unix_now(),
            nonce: rand::random(),
        };
        let mut reply = peer
            .call(&req, &self.config.secret, self.config.timeouts)
            .await;
        if let Ok(r) = &mut reply
            && matches!(op, Op::Get | Op::Staged)
            && r.status == wire::REPLY_OK
        {
            let payload = std::mem::take(&mut r.payload);
            match open_payload(self.config.keys.as_ref(), &req, payload).await {
                Ok(opened) => r.payload = opened,
                Err(e) => reply = Err(e),
            }
        }
        if reply.is_err() {
            bump(&self.stats.peer_fallbacks);
        }
        reply
    }

    /// Bytes `[from, to)` of block `key` from `peer`, or `None` (counted) when the peer
    /// failed or answered something else — the caller reads the object store then.
    pub async fn get(
        &self,
        peer: &Peer,
        key: &str,
        block_len: usize,
        from: usize,
        to: usize,
    ) -> Option<Bytes> {
        match self.call(peer, Op::Get, key, block_len, (from, to)).await {
            Ok(r) if r.status == wire::REPLY_OK && r.payload.len() == to - from => {
                bump(&self.stats.peer_hits);
                let n = u64::try_from(r.payload.len()).unwrap_or(u64::MAX);
                self.stats.peer_bytes.fetch_add(n, Ordering::Relaxed);
                Some(r.payload)
            }
            Ok(_) => {
                bump(&self.stats.peer_fallbacks);
                None
            }
            Err(_) => None,
        }
    }
}

impl Group {
    /// Bytes `[from, to)` of block `key` from the staged copy of the member `writer`
    /// (`--writeback`, not uploaded yet), or `None` when it holds none or does not answer.
    /// `writer` need not be in the ring (its membership may not be read yet).
    pub async fn get_staged(
        &self,
        writer: &Member,
        key: &str,
        block_len: usize,
        from: usize,
        to: usize,
    ) -> Option<Bytes> {
        let known = self.peers.read().get(&writer.id).cloned();
        let peer = match known {
            Some(p) if p.member == *writer => p,
            _ => Arc::new(Peer::new(writer.clone())),
        };
        let reply = self
            .call(&peer, Op::Staged, key, block_len, (from, to))
            .await
            .ok()?;
        if reply.status != wire::REPLY_OK || reply.payload.len() != to - from {
            return None;
        }
        bump(&self.stats.staged_hits);
        let n = u64::try_from(reply.payload.len()).unwrap_or(u64::MAX);
        self.stats.staged_bytes.fetch_add(n, Ordering::Relaxed);
        Some(reply.payload)
    }
}

pub(crate) fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// Seconds since the Unix epoch (0 if the clock is before it).
pub(crate) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
