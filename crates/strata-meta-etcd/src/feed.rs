//! The etcd change feed: a watch on the volume's keys. etcd delivers every change in
//! revision order on the watch stream, whoever made it, so commits need no announcement.
//! The watch also covers the commit markers (`{prefix}#commit/{client}/{slot}`, written by
//! every commit with its number): a revision holding one of this client's markers is its
//! commit, and carries its number — known from the event itself, however the watch and
//! the commit's answer race.
//! A liveness beat is a progress request on the same stream (its answer is a response
//! without events). A barrier beat is a write of this client's beat key
//! `{prefix}/\xFFbeat/{origin}` (outside the metadata key space, inside the watched
//! range): its event comes after every change of a lower revision. (Progress answers
//! cannot serve as barriers: etcd before 3.4.24/3.5.8 may send one ahead of events.)

use std::collections::VecDeque;

use async_trait::async_trait;
use etcd_client::{WatchOptions, WatchResponseStream};
use strata_meta::kv::{Change, ChangeFeed, KvError, prefix_end};

use crate::{EtcdEngine, etcd_error, timed};

/// What the engine remembers for its feed.
#[derive(Default)]
pub(crate) struct FeedState {
    /// Sends progress requests on the current watch stream.
    sender: Option<etcd_client::WatchRequestSender>,
    /// Beats asked for and not answered yet, oldest first.
    beats: VecDeque<u64>,
}

/// One watch of the volume's keys.
pub(crate) struct EtcdFeed {
    stream: WatchResponseStream,
    engine_state: std::sync::Arc<parking_lot::Mutex<FeedState>>,
    base: Vec<u8>,
    /// This client's beat key (without the prefix).
    beat_key: Vec<u8>,
    /// `{prefix}#commit/`, and this client's markers' prefix under it.
    markers: Vec<u8>,
    marker: Vec<u8>,
    origin: u64,
    /// Changes of one response not handed out yet.
    pending: VecDeque<Change>,
}

/// Where beat keys start, after the volume's prefix.
const BEAT_PREFIX: &[u8] = b"\xFFbeat/";

impl EtcdEngine {
    /// This client's beat key (without the volume's prefix).
    fn beat_key(&self) -> Vec<u8> {
        [BEAT_PREFIX, format!("{:016x}", self.origin).as_bytes()].concat()
    }

    pub(crate) async fn write_beat(&self, seq: u64) -> Result<(), KvError> {
        let mut kv = self.kv().await?;
        let key = [&self.base[..], &self.beat_key()].concat();
        timed(kv.put(key, seq.to_string(), None)).await.map(|_| ())
    }

    pub(crate) async fn open_feed(&self) -> Result<EtcdFeed, KvError> {
        let mut watch = self.client().await?.watch_client();
        // From the commit markers (`#` sorts before `/`) to the end of the volume's keys.
        let markers = self.marker_prefix();
        let options = WatchOptions::new().with_range(prefix_end(&self.base));
        let stream = timed(watch.watch(markers.clone(), Some(options))).await?;
        let (sender, stream) = stream.split();
        {
            let mut state = self.feed.lock();
            state.sender = Some(sender);
            state.beats.clear();
        }
        Ok(EtcdFeed {
            stream,
            engine_state: self.feed.clone(),
            base: self.base.clone(),
            beat_key: self.beat_key(),
            markers,
            marker: self.marker.clone(),
            origin: self.origin,
            pending: VecDeque::new(),
        })
    }

    pub(crate) async fn request_beat(&self, seq: u64) -> Result<(), KvError> {
        let sender = {
            let mut state = self.feed.lock();
            state.beats.push_back(seq);
            state.sender.take()
        };
        let Some(mut sender) = sender else {
            return Err(KvError::Unavailable(
                "etcd: no watch to beat through".into(),
            ));
        };
        let sent = sender.request_progress().await.map_err(etcd_error);
        self.feed.lock().sender.get_or_insert(sender);
        sent
    }
}

#[async_trait]
impl ChangeFeed for EtcdFeed {
    async fn next(&mut self) -> Result<Change, KvError> {
        loop {
            if let Some(change) = self.pending.pop_front() {
                return Ok(change);
            }
            let resp = match self.stream.message().await.map_err(etcd_error)? {
                Some(resp) => resp,
                None => return Err(KvError::Unavailable("etcd: watch ended".into())),
            };
            if resp.canceled() {
                return Err(KvError::Unavailable(format!(
                    "etcd: watch canceled ({})",
                    resp.cancel_reason()
                )));
            }
            if resp.created() {
                continue;
            }
            let mut state = self.engine_state.lock();
            if resp.events().is_empty() {
                if let Some(seq) = state.beats.pop_front() {
                    self.pending.push_back(Change::Beat {
                        origin: self.origin,
                        seq,
                        barrier: false,
                    });
                }
                continue;
            }
            drop(state);
            self.take_events(&resp);
        }
    }
}

/// The changes of one revision while its events are read.
struct Revision {
    revision: i64,
    keys: Vec<Vec<u8>>,
    /// This client's commit number, when its marker is among the events.
    own: Option<u64>,
}

impl EtcdFeed {
    /// Turn one response's events (one or more revisions, in order) into changes.
    fn take_events(&mut self, resp: &etcd_client::WatchResponse) {
        let mut current: Option<Revision> = None;
        for event in resp.events() {
            let Some(kv) = event.kv() else { continue };
            let revision = kv.mod_revision();
            if current.as_ref().is_some_and(|c| c.revision != revision)
                && let Some(done) = current.take()
            {
                self.pending.push_back(self.change(done));
            }
            let now = current.get_or_insert_with(|| Revision {
                revision,
                keys: Vec::new(),
                own: None,
            });
            let number = || std::str::from_utf8(kv.value()).ok()?.parse::<u64>().ok();
            if kv.key().starts_with(&self.markers) {
                if kv.key().starts_with(&self.marker) {
                    now.own = crate::marker_client_seq(kv.value());
                }
                continue;
            }
            let Some(key) = kv.key().strip_prefix(&self.base[..]) else {
                continue;
            };
            if key.starts_with(BEAT_PREFIX) {
                if key == self.beat_key.as_slice()
                    && let Some(seq) = number()
                {
                    self.pending.push_back(Change::Beat {
                        origin: self.origin,
                        seq,
                        barrier: true,
                    });
                }
                continue;
            }
            now.keys.push(key.to_vec());
        }
        if let Some(done) = current {
            self.pending.push_back(self.change(done));
        }
    }

    fn change(&self, done: Revision) -> Change {
        let (origin, seq) = match done.own {
            Some(seq) => (self.origin, seq),
            None => (!self.origin, 0),
        };
        Change::Keys {
            origin,
            seq,
            keys: Some(done.keys),
        }
    }
}
