//! The etcd metadata engine: Strata's `Kv` trait on an etcd cluster.
//!
//! Layout (docs/FORMAT.md, "etcd engine"): key `K` of the volume is the etcd key
//! `{prefix}/{K}`; etcd orders keys bytewise, so range reads are native.
//!
//! A read view pins one revision: its first read takes the cluster's current revision and
//! every later read asks for that revision, so all reads of one transaction see one state
//! (`snapshot_isolation`). A commit is one etcd transaction whose compares re-check what
//! the transaction read — a point read by value (or "does not exist"), a range read by the
//! value of every key it returned plus "no key in the scanned span changed since the range
//! was re-read at commit" — and whose success branch holds the writes. A failed compare is
//! `KvError::Conflict`, retried by the transaction layer.
//!
//! A commit whose answer is lost (the member died, the connection broke) may or may not
//! have been applied, and may even still be on its way; retrying it blindly would turn
//! an applied `create` into `EEXIST`. So every commit also writes a commit marker of its
//! own slot, `{prefix}#commit/{client}/{slot}`, and after a lost answer the engine fences
//! that slot in one transaction, which says whether the commit was applied and makes sure
//! it never applies later (`slots.rs`).
//!
//! etcd limits a transaction to `--max-txn-ops` operations (128 by default) and a request
//! to `--max-request-bytes` (1.5 MiB); Strata's slice cap keeps single values small, and
//! servers should run with `--max-txn-ops 10000` (scripts/test.sh does) so large deletes
//! fit in one transaction.

mod feed;
mod frozen;
mod slots;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

use async_trait::async_trait;
use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, GetOptions, KvClient, SortOrder, SortTarget, Txn,
    TxnOp, TxnOpResponse,
};
use strata_meta::kv::{
    ChangeFeed, CommitRequest, FrozenView, Key, KvEngine, KvError, KvSnapshot, LostCommit,
    ReadCheck, Value, Write, new_origin, record_lost_commit, within,
};
use strata_types::{Secret, redact_url};
use tokio::sync::OnceCell;

/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// An `etcd://` META-URL taken apart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EtcdUrl {
    /// `http://host:port` per member.
    pub endpoints: Vec<String>,
    /// Key prefix of the volume (the URL's path; `strata` when empty).
    pub prefix: String,
    /// User and password (hidden when printed).
    pub user: Option<(String, Secret)>,
}

impl EtcdUrl {
    /// Parse `etcd://[user:password@]host1:2379,host2:2379,host3:2379/prefix`.
    pub fn parse(url: &str) -> Result<EtcdUrl, KvError> {
        let rest = url.strip_prefix("etcd://").ok_or_else(|| {
            KvError::Engine(format!(
                "not an etcd URL: {} (expected etcd://host1:2379,host2:2379/prefix)",
                redact_url(url)
            ))
        })?;
        let (hosts, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let (user, hosts) = match hosts.rsplit_once('@') {
            Some((cred, hosts)) => {
                let (name, pass) = cred.split_once(':').unwrap_or((cred, ""));
                (Some((name.to_string(), Secret::new(pass))), hosts)
            }
            None => (None, hosts),
        };
        let endpoints: Vec<String> = hosts
            .split(',')
            .filter(|h| !h.is_empty())
            .map(|h| format!("http://{h}"))
            .collect();
        if endpoints.is_empty() {
            return Err(KvError::Engine(format!(
                "etcd URL {} names no host",
                redact_url(url)
            )));
        }
        let prefix = prefix.trim_matches('/');
        let prefix = if prefix.is_empty() { "strata" } else { prefix };
        Ok(EtcdUrl {
            endpoints,
            prefix: prefix.to_string(),
            user,
        })
    }
}

/// A client of one volume's keys on one etcd cluster.
pub struct EtcdEngine {
    url: EtcdUrl,
    client: OnceCell<Client>,
    /// This client's id in the change feed.
    origin: u64,
    /// The watch that is the change feed, and which revisions were this client's commits.
    feed: std::sync::Arc<parking_lot::Mutex<feed::FeedState>>,
    /// `{prefix}/`
    base: Vec<u8>,
    /// `{prefix}#commit/{random client id}/`: this client's marker slots (`slots.rs`).
    marker: Vec<u8>,
    /// Slots not in use by a commit.
    slots: slots::Slots,
    /// Sequence number of this client's last commit.
    commits: AtomicU64,
    /// Cancelled when the client shuts down ([`KvEngine::begin_closing`]).
    closing: CancellationToken,
}

/// Keys read per request by `get_many` (etcd's default `--max-txn-ops` is 128).
const GET_MANY_BATCH: usize = 128;

/// How long a lost commit answer may take to resolve (members re-electing a leader).
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(20);
/// How long one read of the marker may take before it is given up and tried again: a
/// request sent on the connection that lost the answer can otherwise wait for the
/// client's whole request timeout, longer than [`RESOLVE_TIMEOUT`] (seen under load).
const RESOLVE_ATTEMPT: Duration = Duration::from_secs(2);

impl std::fmt::Debug for EtcdEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdEngine")
            .field("endpoints", &self.url.endpoints)
            .field("prefix", &self.url.prefix)
            .finish()
    }
}

impl EtcdEngine {
    /// An engine that connects on first use (tests; the binary uses [`connect`]).
    ///
    /// [`connect`]: EtcdEngine::connect
    pub fn lazy(url: &EtcdUrl) -> EtcdEngine {
        EtcdEngine {
            url: url.clone(),
            client: OnceCell::new(),
            origin: new_origin(),
            feed: std::sync::Arc::default(),
            base: format!("{}/", url.prefix).into_bytes(),
            marker: format!("{}#commit/{:016x}/", url.prefix, rand::random::<u64>()).into_bytes(),
            slots: slots::Slots::default(),
            commits: AtomicU64::new(0),
            closing: CancellationToken::new(),
        }
    }

    /// Connect now and check the cluster answers, in bounded time.
    pub async fn connect(url: &EtcdUrl) -> Result<EtcdEngine, KvError> {
        let engine = EtcdEngine::lazy(url);
        let mut kv = engine.kv().await?;
        timed(kv.get(engine.base.clone(), Some(GetOptions::new().with_limit(1)))).await?;
        Ok(engine)
    }

    async fn kv(&self) -> Result<KvClient, KvError> {
        Ok(self.client().await?.kv_client())
    }

    async fn client(&self) -> Result<Client, KvError> {
        let client = self
            .client
            .get_or_try_init(|| async {
                let mut options = ConnectOptions::new()
                    .with_connect_timeout(CONNECT_TIMEOUT)
                    .with_timeout(REQUEST_TIMEOUT)
                    .with_keep_alive(Duration::from_secs(10), Duration::from_secs(5));
                if let Some((name, pass)) = &self.url.user {
                    options = options.with_user(name.clone(), pass.expose().to_string());
                }
                let connecting = async {
                    Client::connect(&self.url.endpoints, Some(options))
                        .await
                        .map_err(etcd_error)
                };
                within(CONNECT_TIMEOUT, "etcd", connecting).await
            })
            .await?;
        Ok(client.clone())
    }

    fn full_key(&self, key: &[u8]) -> Vec<u8> {
        full_key(&self.base, key)
    }

    /// This client's marker of slot `index`.
    fn slot_key(&self, index: u32) -> Vec<u8> {
        [&self.marker[..], index.to_string().as_bytes()].concat()
    }

    /// What the marker of a slot holds now.
    async fn read_slot(&self, kv: &mut KvClient, index: u32) -> Result<slots::Known, KvError> {
        let resp = timed(kv.get(self.slot_key(index), None)).await?;
        Ok(match resp.kvs().first() {
            Some(kv) => slots::Known::Value(kv.value().to_vec()),
            None => slots::Known::Absent,
        })
    }

    /// Whether commit `seq`, whose answer was lost (`why`), was applied: fence its slot
    /// (`slots.rs`) until a member answers. `before` is what the marker held before the
    /// commit, `value` what the commit wrote. Applied is `Ok`; not applied is the
    /// original error, which the transaction layer retries.
    async fn resolve_lost_commit(
        &self,
        slot: &mut slots::SlotGuard<'_>,
        before: &slots::Known,
        seq: u64,
        value: &[u8],
        why: String,
    ) -> Result<(), KvError> {
        let marker = self.slot_key(slot.index());
        let fence = Txn::new()
            .when(vec![slots::unchanged(marker.clone(), before)])
            .and_then(vec![TxnOp::put(
                marker.clone(),
                slots::fence_value(seq),
                None,
            )])
            .or_else(slots::read_marker(marker.clone()));
        let started = std::time::Instant::now();
        let mut pause = Duration::from_millis(20);
        loop {
            let sent = within(RESOLVE_ATTEMPT, "etcd", async {
                let mut kv = self.kv().await?;
                timed(kv.txn(fence.clone())).await
            });
            match sent.await {
                Ok(resp) if resp.succeeded() => {
                    slot.set(slots::Known::Value(slots::fence_value(seq)));
                    tracing::info!(seq, "etcd: a commit whose answer was lost was not applied");
                    record_lost_commit(LostCommit::NotApplied);
                    return Err(KvError::Unavailable(why));
                }
                Ok(resp) => {
                    let now = slots::read_back(&resp)?;
                    // An earlier attempt of this fence took, though its answer was lost.
                    if now == slots::Known::Value(slots::fence_value(seq)) {
                        slot.set(now);
                        record_lost_commit(LostCommit::NotApplied);
                        return Err(KvError::Unavailable(why));
                    }
                    let applied = now == slots::Known::Value(value.to_vec());
                    slot.set(now);
                    tracing::info!(
                        seq,
                        applied,
                        "etcd: resolved a commit whose answer was lost"
                    );
                    return if applied {
                        Ok(())
                    } else {
                        Err(KvError::Engine(format!(
                            "etcd: {why}; the commit's marker holds another commit's number"
                        )))
                    };
                }
                Err(KvError::Unavailable(_))
                    if started.elapsed() < RESOLVE_TIMEOUT && !self.closing.is_cancelled() =>
                {
                    tokio::select! {
                        () = tokio::time::sleep(pause) => {}
                        () = self.closing.cancelled() => {}
                    }
                    pause = (pause * 2).min(Duration::from_secs(1));
                }
                // Not retried: a blind retry could report a create that happened as EEXIST.
                Err(e) => {
                    record_lost_commit(LostCommit::Unknown);
                    return Err(KvError::Engine(format!(
                        "{why}; whether the commit was applied is unknown: {e}"
                    )));
                }
            }
        }
    }
}

fn full_key(base: &[u8], key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(base.len() + key.len());
    k.extend_from_slice(base);
    k.extend_from_slice(key);
    k
}

async fn timed<T>(fut: impl Future<Output = Result<T, etcd_client::Error>>) -> Result<T, KvError> {
    within(REQUEST_TIMEOUT, "etcd", async {
        fut.await.map_err(etcd_error)
    })
    .await
}

/// Unreachable members and lost leaders are worth retrying; a compacted snapshot revision
/// means the transaction must start over (a conflict).
fn etcd_error(e: etcd_client::Error) -> KvError {
    use etcd_client::Error as E;
    match e {
        E::GRpcStatus(status) => {
            let message = status.message().to_string();
            if message.contains("compacted") {
                return KvError::Conflict;
            }
            // gRPC codes: 1 cancelled, 2 unknown (a broken stream), 4 deadline exceeded,
            // 10 aborted, 13 internal (a closing transport), 14 unavailable: the member
            // or the connection went away, another member may answer. 7 permission
            // denied, 16 unauthenticated.
            match status.code() as i32 {
                1 | 2 | 4 | 10 | 13 | 14 => KvError::Unavailable(format!("etcd: {message}")),
                7 | 16 => KvError::Engine(format!("etcd: authentication failed: {message}")),
                _ if message.contains("leader") || message.contains("timed out") => {
                    KvError::Unavailable(format!("etcd: {message}"))
                }
                _ => KvError::Engine(format!("etcd: {message}{}", limit_hint(&message))),
            }
        }
        E::TransportError(t) => KvError::Unavailable(format!("etcd: {t}")),
        E::IoError(io) => KvError::Unavailable(format!("etcd: {io}")),
        other => KvError::Engine(format!("etcd: {other}")),
    }
}

/// What to do about an etcd server limit that `message` reports, or "".
fn limit_hint(message: &str) -> &'static str {
    if message.contains("too many operations in txn") {
        " (start etcd with --max-txn-ops 10000: large deletes, loads and populate write \
         more than etcd's default 128 operations per transaction)"
    } else if message.contains("request is too large") {
        " (start etcd with --max-request-bytes 10485760)"
    } else if message.contains("database space exceeded") {
        " (etcd's --quota-backend-bytes is used up: compact and defragment it and \
         `etcdctl alarm disarm`, or raise the quota, at most 8 GiB)"
    } else {
        ""
    }
}

/// Read view pinned at one revision.
struct EtcdSnapshot {
    kv: KvClient,
    base: Vec<u8>,
    revision: Option<i64>,
}

impl EtcdSnapshot {
    fn options(&self) -> GetOptions {
        match self.revision {
            Some(r) => GetOptions::new().with_revision(r),
            None => GetOptions::new(),
        }
    }

    fn pin(&mut self, header: Option<&etcd_client::ResponseHeader>) {
        if self.revision.is_none() {
            self.revision = header.map(|h| h.revision());
        }
    }
}

#[async_trait]
impl KvSnapshot for EtcdSnapshot {
    async fn get(&mut self, key: &[u8]) -> Result<Option<Value>, KvError> {
        let options = self.options();
        let resp = timed(self.kv.get(full_key(&self.base, key), Some(options))).await?;
        self.pin(resp.header());
        Ok(resp.kvs().first().map(|kv| kv.value().to_vec()))
    }

    async fn get_many(&mut self, keys: &[Key]) -> Result<Vec<Option<Value>>, KvError> {
        if keys.len() < 2 {
            let mut out = Vec::with_capacity(keys.len());
            for key in keys {
                out.push(self.get(key).await?);
            }
            return Ok(out);
        }
        // Many keys in one request: a read-only etcd transaction of range reads, at the
        // pinned revision (a request per key made a readdirplus page 1,000 round trips).
        let mut out = Vec::with_capacity(keys.len());
        for batch in keys.chunks(GET_MANY_BATCH) {
            let ops: Vec<TxnOp> = batch
                .iter()
                .map(|k| TxnOp::get(full_key(&self.base, k), Some(self.options())))
                .collect();
            let resp = timed(self.kv.txn(Txn::new().and_then(ops))).await?;
            self.pin(resp.header());
            for reply in resp.op_responses() {
                let TxnOpResponse::Get(got) = reply else {
                    return Err(KvError::Engine("etcd: a read returned no range".into()));
                };
                out.push(got.kvs().first().map(|kv| kv.value().to_vec()));
            }
        }
        if out.len() != keys.len() {
            return Err(KvError::Engine(format!(
                "etcd: {} values for {} keys",
                out.len(),
                keys.len()
            )));
        }
        Ok(out)
    }

    async fn scan(
        &mut self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        reverse: bool,
    ) -> Result<Vec<(Key, Value)>, KvError> {
        if start >= end || limit == 0 {
            return Ok(Vec::new());
        }
        let order = if reverse {
            SortOrder::Descend
        } else {
            SortOrder::Ascend
        };
        let options = self
            .options()
            .with_range(full_key(&self.base, end))
            .with_limit(i64::try_from(limit).unwrap_or(0))
            .with_sort(SortTarget::Key, order);
        let resp = timed(self.kv.get(full_key(&self.base, start), Some(options))).await?;
        self.pin(resp.header());
        let skip = self.base.len();
        Ok(resp
            .kvs()
            .iter()
            .map(|kv| (kv.key()[skip..].to_vec(), kv.value().to_vec()))
            .collect())
    }
}

#[async_trait]
impl KvEngine for EtcdEngine {
    fn name(&self) -> &'static str {
        "etcd"
    }

    async fn snapshot(&self) -> Result<Box<dyn KvSnapshot>, KvError> {
        Ok(Box::new(EtcdSnapshot {
            kv: self.kv().await?,
            base: self.base.clone(),
            revision: None,
        }))
    }

    async fn commit(&self, req: CommitRequest) -> Result<(), KvError> {
        let mut kv = self.kv().await?;
        let mut compares = Vec::new();
        for read in &req.reads {
            match read {
                ReadCheck::Point { key, value } => {
                    compares.push(point_compare(self.full_key(key), value))
                }
                ReadCheck::Range { .. } => {
                    if !self.range_compares(&mut kv, read, &mut compares).await? {
                        return Err(KvError::Conflict);
                    }
                }
            }
        }
        if req.writes.is_empty() {
            // A re-check of reads that were not one pinned revision (some came from the
            // client's cache): they must all still hold. Nothing is written, so a lost
            // answer is simply asked again.
            let resp = timed(kv.txn(Txn::new().when(compares))).await?;
            return if resp.succeeded() {
                Ok(())
            } else {
                Err(KvError::Conflict)
            };
        }
        let mut ops = Vec::with_capacity(req.writes.len());
        for (key, write) in &req.writes {
            match write {
                Write::Put(v) => ops.push(TxnOp::put(self.full_key(key), v.clone(), None)),
                Write::Delete => ops.push(TxnOp::delete(self.full_key(key), None)),
                Write::Fields(_) => {
                    return Err(KvError::Engine(
                        "field updates reach the etcd engine unconverted".into(),
                    ));
                }
            }
        }
        let seq = self.commits.fetch_add(1, Ordering::Relaxed) + 1;
        let mut slot = self.slots.take();
        if slot.known() == slots::Known::Unknown {
            let now = self.read_slot(&mut kv, slot.index()).await?;
            slot.set(now);
        }
        // The slot's marker holds this engine's commit number (to settle a lost answer)
        // and the client's number for the commit (its own announcement, feed.rs).
        let marker = self.slot_key(slot.index());
        let value = format!("{seq} {}", req.seq).into_bytes();
        compares.push(slots::unchanged(marker.clone(), &slot.known()));
        ops.push(TxnOp::put(marker.clone(), value.clone(), None));
        let txn = Txn::new()
            .when(compares)
            .and_then(ops)
            .or_else(slots::read_marker(marker));
        let before = slot.in_doubt();
        match timed(kv.txn(txn)).await {
            Ok(resp) if resp.succeeded() => {
                slot.set(slots::Known::Value(value));
                Ok(())
            }
            Ok(resp) => {
                slot.set(slots::read_back(&resp)?);
                Err(KvError::Conflict)
            }
            Err(KvError::Unavailable(why)) => {
                self.resolve_lost_commit(&mut slot, &before, seq, &value, why)
                    .await
            }
            Err(e) => Err(e),
        }
    }

    fn begin_closing(&self) {
        self.closing.cancel();
    }

    async fn frozen_view(
        &self,
        _readers: usize,
    ) -> Result<Option<std::sync::Arc<dyn FrozenView>>, KvError> {
        let view = frozen::open(self.kv().await?, self.base.clone()).await?;
        Ok(Some(std::sync::Arc::new(view)))
    }

    fn snapshot_isolation(&self) -> bool {
        true
    }

    fn native_field_ops(&self) -> bool {
        false
    }

    fn remote(&self) -> bool {
        true
    }

    fn origin(&self) -> u64 {
        self.origin
    }

    async fn subscribe(&self) -> Result<Option<Box<dyn ChangeFeed>>, KvError> {
        Ok(Some(Box::new(self.open_feed().await?)))
    }

    async fn send_beat(&self, seq: u64, barrier: bool) -> Result<(), KvError> {
        if barrier {
            self.write_beat(seq).await
        } else {
            self.request_beat(seq).await
        }
    }
}

/// The client's number for the commit in a commit marker's value
/// (`"{engine's commit number} {client's number}"`).
pub(crate) fn marker_client_seq(value: &[u8]) -> Option<u64> {
    std::str::from_utf8(value)
        .ok()?
        .split(' ')
        .nth(1)?
        .parse()
        .ok()
}

impl EtcdEngine {
    /// `{prefix}#commit/`: where every client's commit marker lives.
    pub(crate) fn marker_prefix(&self) -> Vec<u8> {
        format!("{}#commit/", self.url.prefix).into_bytes()
    }
}

/// "The key still holds `value`" (or still does not exist).
fn point_compare(key: Vec<u8>, value: &Option<Value>) -> Compare {
    match value {
        Some(v) => Compare::value(key, CompareOp::Equal, v.clone()),
        None => Compare::version(key, CompareOp::Equal, 0),
    }
}

impl EtcdEngine {
    /// Re-read a range now; if it still returns what the transaction saw, add compares
    /// that hold only while nothing in the scanned span changes: each returned key keeps
    /// its value (catches updates and deletions) and no key of the span was modified
    /// after the re-read (catches insertions). Returns false if the range already changed.
    async fn range_compares(
        &self,
        kv: &mut KvClient,
        read: &ReadCheck,
        compares: &mut Vec<Compare>,
    ) -> Result<bool, KvError> {
        let ReadCheck::Range {
            start,
            end,
            limit,
            reverse,
            entries,
        } = read
        else {
            return Ok(true);
        };
        let mut now = EtcdSnapshot {
            kv: kv.clone(),
            base: self.base.clone(),
            revision: None,
        };
        if now.scan(start, end, *limit, *reverse).await? != *entries {
            return Ok(false);
        }
        let Some(revision) = now.revision else {
            return Ok(true); // an empty range (start >= end or limit 0) cannot change
        };
        // The span the scan covered: all of [start, end) unless it stopped at the limit.
        let (lo, hi) = match (entries.len() >= *limit, entries.last(), *reverse) {
            (true, Some((last, _)), false) => (start.clone(), next_key(last)),
            (true, Some((last, _)), true) => (last.clone(), end.clone()),
            _ => (start.clone(), end.clone()),
        };
        compares.push(
            Compare::mod_revision(self.full_key(&lo), CompareOp::Less, revision + 1)
                .with_range(self.full_key(&hi)),
        );
        for (k, v) in entries {
            compares.push(Compare::value(
                self.full_key(k),
                CompareOp::Equal,
                v.clone(),
            ));
        }
        Ok(true)
    }
}

/// The smallest key after `key`.
fn next_key(key: &[u8]) -> Vec<u8> {
    let mut k = key.to_vec();
    k.push(0);
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_limits_say_which_flag_lifts_them() {
        // The messages etcd 3.4 and 3.5 send for each limit.
        let hint = limit_hint;
        assert!(hint("etcdserver: too many operations in txn request").contains("--max-txn-ops"));
        assert!(hint("etcdserver: request is too large").contains("--max-request-bytes"));
        assert!(hint("etcdserver: mvcc: database space exceeded").contains("alarm disarm"));
        assert_eq!(hint("etcdserver: key not found"), "");
    }

    #[test]
    fn urls_name_members_prefix_and_user() {
        let u = EtcdUrl::parse("etcd://127.0.0.1:2379,127.0.0.1:22379/vols/a").unwrap();
        assert_eq!(
            u.endpoints,
            vec!["http://127.0.0.1:2379", "http://127.0.0.1:22379"]
        );
        assert_eq!(u.prefix, "vols/a");
        assert_eq!(u.user, None);
        let v = EtcdUrl::parse("etcd://root:pw@h:2379").unwrap();
        assert_eq!(v.prefix, "strata");
        assert_eq!(v.user, Some(("root".into(), Secret::new("pw"))));
        assert!(
            !format!("{v:?}").contains("pw"),
            "the password never prints"
        );
        assert!(EtcdUrl::parse("etcd:///x").is_err());
        assert!(EtcdUrl::parse("redis://h").is_err());
    }

    #[test]
    fn next_key_is_the_immediate_successor() {
        assert_eq!(next_key(b"ab"), b"ab\0");
        assert!(next_key(b"ab").as_slice() > b"ab".as_slice());
    }

    /// A commit whose fence landed first (its answer was lost, the client settled it as
    /// not applied, and only then did the commit reach the cluster) is refused; the slot
    /// then knows the fence and the next commit goes through. The cluster is
    /// `STRATA_TEST_ETCD`.
    #[tokio::test]
    async fn a_commit_arriving_after_its_fence_is_not_applied() {
        let members = std::env::var("STRATA_TEST_ETCD")
            .expect("STRATA_TEST_ETCD must name etcd members (scripts/test.sh starts a cluster)");
        let prefix = format!("t{:016x}", rand::random::<u64>());
        let url = EtcdUrl::parse(&format!("etcd://{members}/{prefix}")).unwrap();
        let engine = EtcdEngine::connect(&url).await.unwrap();
        let marker = engine.slot_key(0);
        let fence = Txn::new()
            .when(vec![slots::unchanged(
                marker.clone(),
                &slots::Known::Absent,
            )])
            .and_then(vec![TxnOp::put(marker, slots::fence_value(1), None)]);
        let mut kv = engine.kv().await.unwrap();
        assert!(timed(kv.txn(fence)).await.unwrap().succeeded());
        let create = || CommitRequest {
            seq: 0,
            reads: vec![ReadCheck::Point {
                key: b"k".to_vec(),
                value: None,
            }],
            writes: vec![(b"k".to_vec(), Write::Put(b"v".to_vec()))],
        };
        let late = engine.commit(create()).await;
        assert!(matches!(late, Err(KvError::Conflict)), "{late:?}");
        let mut snap = engine.snapshot().await.unwrap();
        assert_eq!(snap.get(b"k").await.unwrap(), None);
        engine.commit(create()).await.unwrap();
        let mut snap = engine.snapshot().await.unwrap();
        assert_eq!(snap.get(b"k").await.unwrap(), Some(b"v".to_vec()));
    }

    /// A fence tried again after the first one took (its answer lost) finds its own
    /// fence in the marker: the commit was not applied, and that is the verdict (not an
    /// "unknown" EIO). The cluster is `STRATA_TEST_ETCD`.
    #[tokio::test]
    async fn a_fence_tried_again_after_it_took_says_not_applied() {
        let members = std::env::var("STRATA_TEST_ETCD")
            .expect("STRATA_TEST_ETCD must name etcd members (scripts/test.sh starts a cluster)");
        let prefix = format!("t{:016x}", rand::random::<u64>());
        let url = EtcdUrl::parse(&format!("etcd://{members}/{prefix}")).unwrap();
        let engine = EtcdEngine::connect(&url).await.unwrap();
        let mut slot = engine.slots.take();
        let before = slots::Known::Absent;
        let value = b"commit-7".to_vec();
        let first = engine
            .resolve_lost_commit(&mut slot, &before, 7, &value, "lost".into())
            .await;
        assert!(matches!(first, Err(KvError::Unavailable(_))), "{first:?}");
        let again = engine
            .resolve_lost_commit(&mut slot, &before, 7, &value, "lost".into())
            .await;
        assert!(matches!(again, Err(KvError::Unavailable(_))), "{again:?}");
    }
}
