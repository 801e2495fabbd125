//! The serving side of the cache group: accept peers' connections and answer their
//! signed requests from this client's caches, fetching a missing block from the object
//! store once (concurrent requests share the fetch) and keeping it. A request whose
//! signature or clock is wrong is refused and the connection closed. Requests are
//! answered locally only — a member never forwards to another — so inconsistent views of
//! the ring cannot make requests go round.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use super::wire::{self, Op, Reply, Request, WireError};
use super::{Group, bump, unix_now};
use crate::cache::BlockCache;
use crate::store::ChunkStore;

/// How long a connection may wait for its next request.
const IDLE_CONNECTION: std::time::Duration = std::time::Duration::from_secs(120);

/// Serve peers on `listener` until `cancel` fires.
pub async fn serve(
    listener: TcpListener,
    chunks: ChunkStore,
    group: Arc<Group>,
    cancel: CancellationToken,
) {
    loop {
        let accepted = tokio::select! {
            _ = cancel.cancelled() => return,
            a = listener.accept() => a,
        };
        match accepted {
            Ok((stream, _)) => {
                let (chunks, group, cancel) = (chunks.clone(), group.clone(), cancel.clone());
                tokio::spawn(async move {
                    tokio::select! {
                        _ = cancel.cancelled() => {}
                        _ = connection(stream, &chunks, &group) => {}
                    }
                });
            }
            Err(e) => {
                tracing::warn!("cache group: accepting a connection: {e}");
                // Out of file descriptors and the like: give the process a moment.
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
}

async fn connection(mut stream: TcpStream, chunks: &ChunkStore, group: &Group) {
    let _ = stream.set_nodelay(true);
    let peer = stream
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    loop {
        let next = Request::receive(&mut stream, group.secret(), unix_now());
        // Peers keep idle connections for their next requests; one idle this long (or a
        // stranger who never sends a whole request) is closed and its descriptor freed.
        let Ok(next) = tokio::time::timeout(IDLE_CONNECTION, next).await else {
            return;
        };
        let req = match next {
            Ok(Some(req)) => req,
            Ok(None) | Err(WireError::Io(_)) => return,
            Err(WireError::BadSignature) => {
                bump(&group.stats.refused);
                tracing::warn!(
                    "cache group: refused a request from {peer}: wrong group secret or clock"
                );
                let _ = wire::send_ack(&mut stream, wire::ACK_DENIED).await;
                return;
            }
            Err(e) => {
                tracing::warn!("cache group: bad request from {peer}: {e}");
                let _ = wire::send_ack(&mut stream, wire::ACK_BAD).await;
                return;
            }
        };
        if !is_block_key(&req.key, req.block_len) {
            let _ = wire::send_ack(&mut stream, wire::ACK_BAD).await;
            return;
        }
        if wire::send_ack(&mut stream, wire::ACK_OK).await.is_err() {
            return;
        }
        let mut reply = chunks.answer_peer(&req).await;
        if matches!(req.op, Op::Get | Op::Staged) && reply.status == wire::REPLY_OK {
            match super::seal_payload(group.config().keys.as_ref(), &req, reply.payload).await {
                Ok(sealed) => reply.payload = sealed,
                Err(e) => {
                    tracing::warn!("cache group: {e}");
                    reply = failed();
                }
            }
        }
        bump(&group.stats.served);
        let n = u64::try_from(reply.payload.len()).unwrap_or(u64::MAX);
        group.stats.served_bytes.fetch_add(n, Ordering::Relaxed);
        if reply
            .send(&mut stream, group.secret(), &req.nonce)
            .await
            .is_err()
        {
            return;
        }
    }
}

/// Whether `key` names a block of `block_len` bytes (`chunks/.../{id}_{index}_{len}`).
fn is_block_key(key: &str, block_len: u32) -> bool {
    key.starts_with("chunks/")
        && !key.contains("..")
        && crate::block_len_of(key) == usize::try_from(block_len).ok()
}

fn failed() -> Reply {
    Reply {
        status: wire::REPLY_FAILED,
        payload: Bytes::new(),
    }
}

impl ChunkStore {
    /// Answer a peer's request from this client's caches and the object store.
    async fn answer_peer(&self, req: &Request) -> Reply {
        let (Ok(len), Ok(from), Ok(to)) = (
            usize::try_from(req.block_len),
            usize::try_from(req.from),
            usize::try_from(req.to),
        ) else {
            return failed();
        };
        // The owner keeps whole blocks: a range costs one GET of the block the first
        // time, and every later request for any part of it is a cache hit.
        let read = || async {
            let block = self.fetch_block_via(req.key.clone(), len, true).await?;
            Ok::<_, crate::ChunkError>(block.slice(from..to))
        };
        let ok = |payload: Bytes| Reply {
            status: wire::REPLY_OK,
            payload,
        };
        match req.op {
            Op::Get | Op::Warm => match read().await {
                Ok(data) if req.op == Op::Get => ok(data),
                Ok(_) => ok(Bytes::new()),
                Err(e) => {
                    tracing::warn!("cache group: serving {}: {e}", req.key);
                    failed()
                }
            },
            Op::Cached => {
                let held = self.shared.cache.cached_bytes(&req.key);
                ok(Bytes::copy_from_slice(&held.to_be_bytes()))
            }
            Op::Staged => {
                let staged = match self.shared.staging.get() {
                    Some(wb) => {
                        let range = u64::from(req.from)..u64::from(req.to);
                        wb.get_staged(&req.key, Some(range)).await
                    }
                    None => None,
                };
                match staged {
                    Some(Ok(data)) if data.len() == to - from => ok(data),
                    Some(Err(e)) => {
                        tracing::warn!("cache group: reading staged {}: {e}", req.key);
                        failed()
                    }
                    _ => failed(),
                }
            }
            Op::Evict => {
                self.shared.recent.remove(&req.key).await;
                self.shared.cache.remove(&req.key).await;
                ok(Bytes::new())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_block_keys_are_served() {
        assert!(is_block_key("chunks/0/0/7_0_100", 100));
        assert!(!is_block_key("chunks/0/0/7_0_100", 99));
        assert!(!is_block_key("meta/dump-1.json.gz", 100));
        assert!(!is_block_key("chunks/../x_0_100", 100));
    }
}
