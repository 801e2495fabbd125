//! The Redis change feed: the commit script publishes the keys it wrote on the channel
//! `{prefix}:n` (atomically with the commit, in commit order); each client subscribes to
//! it and to its own beat channel `{prefix}:b{origin}` on one connection, so a beat it
//! publishes arrives after every change published before it.
//!
//! Channels are server-wide (not per database): volumes with the same prefix in different
//! databases of one server see each other's announcements, which only costs them cache
//! misses.

use async_trait::async_trait;
use futures::StreamExt;
use redis::aio::{PubSubSink, PubSubStream};
use strata_meta::kv::{Change, ChangeFeed, KvError, decode_change, within};

use crate::{CONNECT_TIMEOUT, RedisEngine, redis_error, timed};

/// Announcements larger than this say "everything changed" instead of listing keys.
pub(crate) const MAX_NOTICE: usize = 64 << 10;

/// One subscription: the connection's two halves (the sink keeps it subscribed).
pub(crate) struct RedisFeed {
    _sink: PubSubSink,
    stream: PubSubStream,
    changes: String,
    origin: u64,
}

impl RedisEngine {
    /// `{prefix}:n`: where commits are announced.
    pub(crate) fn changes_channel(&self) -> Vec<u8> {
        let mut c = self.base.clone();
        c.push(b'n');
        c
    }

    /// `{prefix}:b{origin}`: where this client's beats come back.
    pub(crate) fn beat_channel(&self) -> Vec<u8> {
        let mut c = self.base.clone();
        c.extend_from_slice(format!("b{:016x}", self.origin).as_bytes());
        c
    }

    pub(crate) async fn open_feed(&self) -> Result<RedisFeed, KvError> {
        let client = self.source.client().await?;
        let connecting = async { client.get_async_pubsub().await.map_err(redis_error) };
        let mut pubsub = within(CONNECT_TIMEOUT, "Redis", connecting).await?;
        timed(pubsub.subscribe(self.changes_channel())).await?;
        timed(pubsub.subscribe(self.beat_channel())).await?;
        let (sink, stream) = pubsub.split();
        Ok(RedisFeed {
            _sink: sink,
            stream,
            changes: String::from_utf8_lossy(&self.changes_channel()).into_owned(),
            origin: self.origin,
        })
    }

    pub(crate) async fn publish_beat(&self, seq: u64) -> Result<(), KvError> {
        let mut conn = self.conn().await?;
        let sent = timed(
            redis::cmd("PUBLISH")
                .arg(self.beat_channel())
                .arg(seq.to_string())
                .query_async::<i64>(&mut conn),
        )
        .await;
        self.conn.check(sent).map(|_| ())
    }
}

#[async_trait]
impl ChangeFeed for RedisFeed {
    async fn next(&mut self) -> Result<Change, KvError> {
        let Some(msg) = self.stream.next().await else {
            return Err(KvError::Unavailable(
                "Redis: change feed disconnected".into(),
            ));
        };
        if msg.get_channel_name() == self.changes {
            return decode_change(msg.get_payload_bytes());
        }
        let seq = std::str::from_utf8(msg.get_payload_bytes())
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| KvError::Engine("Redis: malformed beat".into()))?;
        Ok(Change::Beat {
            origin: self.origin,
            seq,
            barrier: true,
        })
    }
}
