//! Following the engine's change feed, so lookups and stats of unchanged files cost no
//! round trip (docs/DESIGN.md, "Client metadata cache").
//!
//! Every commit on Redis, PostgreSQL and etcd is announced with the keys it wrote
//! (`KvEngine::subscribe`). The task [`Meta::start_following`] starts applies other
//! clients' announcements to the read cache in commit order and sends a beat through the
//! feed every [`BEAT_EVERY`]; while beats keep coming back the cache is trusted by
//! read-only operations (`kv::readcache`). A lost subscription, or beats silent for
//! [`BEAT_GRACE`], drops all trust until the feed is back. [`Meta::sync_changes`] is a
//! barrier: once it returns, every change committed anywhere before it was called is in
//! the cache.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::Meta;
use crate::error::{MetaError, Result};
use crate::kv::readcache::ReadCache;
use crate::kv::{Change, ChangeFeed, KvEngine, KvError};

/// How often a following client sends a beat through the feed.
pub const BEAT_EVERY: Duration = Duration::from_millis(500);
/// How long after its last returned beat the cache stays trusted.
pub const BEAT_GRACE: Duration = Duration::from_millis(1500);
/// How often the follower sweeps the cache (`ReadCache::sweep`).
const SWEEP_EVERY: Duration = Duration::from_secs(5);
/// How long [`Meta::sync_changes`] waits for its beat.
const SYNC_TIMEOUT: Duration = Duration::from_secs(10);
/// First metadata version whose every writer announces its commits.
pub const FEED_VERSION: u32 = 4;

/// Beats sent and returned.
#[derive(Debug)]
pub(crate) struct Beats {
    /// The highest barrier beat that came back.
    returned: tokio::sync::watch::Sender<u64>,
    /// How many beats of any kind came back.
    alive: tokio::sync::watch::Sender<u64>,
    next: AtomicU64,
    /// When barrier beats still out were sent (taken before sending), oldest first.
    sent: parking_lot::Mutex<std::collections::VecDeque<(u64, Instant)>>,
}

/// Beats remembered as sent at most (more are not out at once unless the feed is stuck).
const MAX_SENT: usize = 1024;

impl Default for Beats {
    fn default() -> Self {
        Beats {
            returned: tokio::sync::watch::Sender::new(0),
            alive: tokio::sync::watch::Sender::new(0),
            next: AtomicU64::new(0),
            sent: Default::default(),
        }
    }
}

impl Beats {
    /// The number of a beat about to be sent. A barrier's sending time is kept: when it
    /// comes back, everything committed before then has arrived. (A liveness beat's is
    /// not: etcd may answer one ahead of events, and it must not push a barrier out.)
    fn next_seq(&self, barrier: bool) -> u64 {
        if !barrier {
            return self.next.fetch_add(1, Ordering::Relaxed) + 1;
        }
        let mut sent = self.sent.lock();
        let seq = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        if sent.len() >= MAX_SENT {
            sent.pop_front();
        }
        sent.push_back((seq, Instant::now()));
        seq
    }

    /// When barrier `seq` of this client was sent (forgetting it and older ones), if known.
    fn sent_at(&self, seq: u64) -> Option<Instant> {
        let mut sent = self.sent.lock();
        let mut found = None;
        while let Some(&(s, at)) = sent.front() {
            if s > seq {
                break;
            }
            sent.pop_front();
            if s == seq {
                found = Some(at);
            }
        }
        found
    }

    fn returned(&self, seq: u64) {
        self.returned.send_if_modified(|seen| {
            let newer = seq > *seen;
            if newer {
                *seen = seq;
            }
            newer
        });
    }
}

/// The task that follows the feed: what it needs of its client, owned.
struct Follower {
    engine: Arc<dyn KvEngine>,
    cache: Arc<ReadCache>,
    beats: Arc<Beats>,
}

impl Meta {
    /// True when this client can keep a trusted metadata cache: the engine has a change
    /// feed, the volume's writers all announce their commits (metadata version 4 on) and
    /// the cache is not turned off ([`crate::MetaOptions::cache_metadata`]).
    pub fn can_follow_changes(&self) -> bool {
        self.read_cache.is_some()
            && self.opts.cache_metadata
            && self.engine.origin() != 0
            && self
                .current_format()
                .is_ok_and(|f| f.meta_version >= FEED_VERSION)
    }

    /// Follow the change feed in a task until `stop` is cancelled or this client is
    /// dropped (re-subscribing after failures, with backoff). Does nothing when
    /// [`Meta::can_follow_changes`] is false. Call after [`Meta::load`].
    pub fn start_following(&self, stop: CancellationToken) {
        if !self.can_follow_changes() {
            return;
        }
        let Some(cache) = self.read_cache.clone() else {
            return;
        };
        let follower = Follower {
            engine: self.engine.clone(),
            cache,
            beats: self.beats.clone(),
        };
        let own = self.feed_stop.clone();
        // The follower runs no transaction: stopping it anywhere is safe.
        tokio::spawn(async move {
            tokio::select! {
                () = own.cancelled() => {}
                () = follower.run(stop) => {}
            }
            follower.cache.feed_lost();
        });
    }

    /// Whether read-only operations may answer from this client's metadata cache right
    /// now (the feed is up and its beats come back).
    pub fn cache_trusted(&self) -> bool {
        self.read_cache.as_ref().is_some_and(|c| c.is_trusting())
    }

    /// Wait (at most `limit`) until the cache is trusted; at once when this client does
    /// not follow a feed. False if the feed did not come up in time.
    pub async fn wait_for_feed(&self, limit: Duration) -> bool {
        if !self.can_follow_changes() {
            return true;
        }
        let mut alive = self.beats.alive.subscribe();
        tokio::time::timeout(limit, alive.wait_for(|n| *n > 0))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// Wait until every change committed by any client before this call has reached this
    /// client's cache (one beat through the feed). Nothing to wait for when the cache is
    /// not trusted.
    pub async fn sync_changes(&self) -> Result<()> {
        if !self.cache_trusted() {
            return Ok(());
        }
        let mut returned = self.beats.returned.subscribe();
        let seq = self.beats.next_seq(true);
        self.engine.send_beat(seq, true).await?;
        let waited = tokio::time::timeout(SYNC_TIMEOUT, returned.wait_for(|s| *s >= seq)).await;
        match waited {
            Ok(Ok(_)) => Ok(()),
            _ => Err(MetaError::from(KvError::Unavailable(
                "the metadata change feed did not answer".into(),
            ))),
        }
    }
}

impl Follower {
    async fn run(&self, stop: CancellationToken) {
        let mut backoff = Duration::from_millis(100);
        while !stop.is_cancelled() {
            let why = match self.engine.subscribe().await {
                Ok(Some(feed)) => {
                    backoff = Duration::from_millis(100);
                    self.follow(feed, &stop).await
                }
                Ok(None) => break,
                Err(e) => e,
            };
            self.cache.feed_lost();
            if stop.is_cancelled() {
                break;
            }
            tracing::warn!(
                "metadata change feed lost ({why}); cached lookups are off until it is back"
            );
            tokio::select! {
                () = stop.cancelled() => break,
                () = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(Duration::from_secs(5));
        }
        self.cache.feed_lost();
    }

    /// Apply one subscription's changes until it fails, its beats fall silent or `stop`.
    async fn follow(&self, mut feed: Box<dyn ChangeFeed>, stop: &CancellationToken) -> KvError {
        let origin = self.engine.origin();
        let mut last_beat = Instant::now();
        let mut last_sweep = Instant::now();
        let mut ticker = tokio::time::interval(BEAT_EVERY);
        loop {
            tokio::select! {
                () = stop.cancelled() => return KvError::Unavailable("stopping".into()),
                change = feed.next() => match change {
                    Err(e) => return e,
                    Ok(Change::Keys { origin: from, seq, keys }) => {
                        let own = (from == origin).then_some(seq);
                        self.cache.invalidate(keys.as_deref(), own);
                    }
                    Ok(Change::Beat { origin: from, seq, barrier }) if from == origin => {
                        last_beat = Instant::now();
                        // Only a barrier is ordered after every earlier change on every
                        // engine (etcd may answer a liveness beat ahead of events).
                        let sent = if barrier { self.beats.sent_at(seq) } else { None };
                        self.cache.beat_returned(BEAT_GRACE, sent);
                        self.beats.alive.send_modify(|n| *n += 1);
                        if barrier {
                            self.beats.returned(seq);
                        }
                    }
                    Ok(Change::Beat { .. }) => {}
                },
                _ = ticker.tick() => {
                    if last_beat.elapsed() > BEAT_GRACE * 4 {
                        return KvError::Unavailable("no beat came back".into());
                    }
                    if last_sweep.elapsed() >= SWEEP_EVERY {
                        last_sweep = Instant::now();
                        self.cache.sweep();
                    }
                    if let Err(e) = self.engine.send_beat(self.beats.next_seq(false), false).await {
                        return e;
                    }
                }
            }
        }
    }
}
