//! A cache group of three in-process members over one object store, talking over
//! loopback TCP: a file read through one member costs one GET per block, and zero when
//! read again through the others; ranged reads go to the owner too; a dead owner costs
//! the reader a fall back to the store, not an error; a member with another secret is
//! refused; warmup through one member fills the owners' caches.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

mod common;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use strata_chunk::ChunkOptions;
use strata_chunk::cache::BlockCache;
use strata_chunk::cache::memory::MemoryCache;
use strata_chunk::group::{Group, GroupConfig, Member, serve};
use strata_chunk::{ChunkStore, block_key};
use strata_object::ObjectStore;
use strata_object::backend::Backend;
use strata_object::metered::ObjectStats;
use strata_object::seal::{Cipher, DataKey, KeyRing, Keys};
use strata_object::stack::{StackOptions, build};
use strata_types::{Secret, Slice};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

const BS: u32 = 256 << 10;

struct Node {
    chunks: ChunkStore,
    stats: Arc<ObjectStats>,
    cache: Arc<MemoryCache>,
    group: Arc<Group>,
    member: Member,
    stop: CancellationToken,
}

async fn node(backend: Arc<dyn ObjectStore>, id: u64, secret: &str) -> Node {
    node_with(backend, id, secret, None).await
}

async fn node_with(
    backend: Arc<dyn ObjectStore>,
    id: u64,
    secret: &str,
    keys: Option<Arc<Keys>>,
) -> Node {
    let stack = StackOptions {
        keys: keys.clone(),
        ..StackOptions::default()
    };
    let (store, stats) = build(backend, &stack);
    let cache = Arc::new(MemoryCache::new(1 << 30));
    let opts = ChunkOptions {
        block_size: BS,
        read_buffer: 0,
        segment_buffer: 0,
        ..ChunkOptions::default()
    };
    let chunks = ChunkStore::new(store, cache.clone(), opts);
    let group = Group::new(GroupConfig {
        name: "g".into(),
        secret: Secret::new(secret),
        id,
        serving: true,
        timeouts: GroupConfig::default_timeouts(),
        keys,
    });
    assert!(chunks.set_group(group.clone()));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let member = Member {
        id,
        addr: listener.local_addr().unwrap(),
        weight_mib: 1024,
    };
    let stop = CancellationToken::new();
    tokio::spawn(serve::serve(
        listener,
        chunks.clone(),
        group.clone(),
        stop.clone(),
    ));
    Node {
        chunks,
        stats,
        cache,
        group,
        member,
        stop,
    }
}

async fn three(backend: &Arc<dyn ObjectStore>) -> Vec<Node> {
    let mut nodes = Vec::new();
    for id in 1..=3 {
        nodes.push(node(backend.clone(), id, "volume secret").await);
    }
    let members: Vec<Member> = nodes.iter().map(|n| n.member.clone()).collect();
    for n in &nodes {
        n.group.set_members(members.clone());
    }
    nodes
}

fn gets(n: &Node) -> u64 {
    n.stats.requests("get", "ok")
}

/// A 40-block file written through `writer`; returns its slice.
async fn write_file(writer: &ChunkStore, id: u64) -> (Slice, Vec<u8>) {
    let data = common::bytes(usize::try_from(BS).unwrap() * 40, id);
    (common::write_slice(writer, id, 0, &data).await, data)
}

async fn read_all(chunks: &ChunkStore, slice: &Slice) -> Vec<u8> {
    chunks
        .read(std::slice::from_ref(slice), 0, slice.len)
        .await
        .unwrap()
        .to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_block_is_fetched_from_the_store_once_for_the_whole_group() {
    let backend: Arc<dyn ObjectStore> = Arc::new(Backend::memory());
    let nodes = three(&backend).await;
    let writer = node(backend.clone(), 99, "volume secret").await;
    let (slice, data) = write_file(&writer.chunks, 7).await;

    assert_eq!(read_all(&nodes[0].chunks, &slice).await, data);
    let total: u64 = nodes.iter().map(gets).sum();
    assert_eq!(total, 40, "one GET per block across the group");
    let served: u64 = nodes
        .iter()
        .map(|n| n.group.stats.served.load(Ordering::Relaxed))
        .sum();
    assert!(served > 0 && nodes[0].group.stats.peer_hits.load(Ordering::Relaxed) > 0);
    // Each block sits in its owner's cache.
    for i in 0..40u32 {
        let key = block_key(7, i, BS);
        let holders = nodes
            .iter()
            .filter(|n| n.cache.cached_bytes(&key) > 0)
            .count();
        assert!(holders >= 1, "block {i} cached nowhere");
    }

    for n in &nodes[1..] {
        assert_eq!(read_all(&n.chunks, &slice).await, data);
    }
    let total_after: u64 = nodes.iter().map(gets).sum();
    assert_eq!(
        total_after, 40,
        "reads through the other members cost no GET"
    );

    // Random (ranged) reads of blocks owned by peers are served by them too.
    for (i, n) in nodes.iter().enumerate() {
        let off = u32::try_from(i).unwrap() * 300_001 + 17;
        let got = n
            .chunks
            .read_ranged(std::slice::from_ref(&slice), off, 5000)
            .await
            .unwrap();
        let from = usize::try_from(off).unwrap();
        assert_eq!(got.as_ref(), &data[from..from + 5000]);
    }
    assert_eq!(nodes.iter().map(gets).sum::<u64>(), 40);
}

/// Loopback traffic of an encrypted volume's group carries sealed blocks: peers open
/// them (one GET per block for the group, as in the clear), and a member with other keys
/// cannot (it falls back to the store, whose sealed objects it cannot open either).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_encrypted_group_shares_sealed_blocks() {
    let backend: Arc<dyn ObjectStore> = Arc::new(Backend::memory());
    let ring = || KeyRing::new(1, vec![DataKey::new(1, Cipher::Aes256Gcm, [8; 32])]).unwrap();
    let mut nodes = Vec::new();
    for id in 1..=3 {
        let keys = Arc::new(Keys::new(ring(), None));
        nodes.push(node_with(backend.clone(), id, "volume secret", Some(keys)).await);
    }
    let members: Vec<Member> = nodes.iter().map(|n| n.member.clone()).collect();
    for n in &nodes {
        n.group.set_members(members.clone());
    }
    let (slice, data) = write_file(&nodes[0].chunks, 11).await;
    for n in &nodes {
        assert_eq!(read_all(&n.chunks, &slice).await, data);
    }
    assert_eq!(nodes.iter().map(gets).sum::<u64>(), 40, "one GET per block");
    let hits: u64 = nodes
        .iter()
        .map(|n| n.group.stats.peer_hits.load(Ordering::Relaxed))
        .sum();
    assert!(hits > 0);
    // Other keys: replies do not open.
    let other = KeyRing::new(1, vec![DataKey::new(1, Cipher::Aes256Gcm, [9; 32])]).unwrap();
    let stranger = node_with(
        backend.clone(),
        4,
        "volume secret",
        Some(Arc::new(Keys::new(other, None))),
    )
    .await;
    stranger.group.set_members(members);
    assert!(
        stranger
            .chunks
            .read(std::slice::from_ref(&slice), 0, slice.len)
            .await
            .is_err()
    );
    assert!(stranger.group.stats.peer_fallbacks.load(Ordering::Relaxed) > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dead_owner_costs_a_fall_back_not_an_error() {
    let backend: Arc<dyn ObjectStore> = Arc::new(Backend::memory());
    let nodes = three(&backend).await;
    let writer = node(backend.clone(), 99, "volume secret").await;
    let (slice, data) = write_file(&writer.chunks, 8).await;
    // Member 3 dies: its listener and connections close. Wait for the condition (a
    // connection refused): a listener still accepting for a moment would answer some
    // reads, and a success after the first failure marks the member up again.
    nodes[2].stop.cancel();
    let closing = Instant::now();
    while tokio::net::TcpStream::connect(nodes[2].member.addr)
        .await
        .is_ok()
    {
        assert!(
            closing.elapsed() < Duration::from_secs(5),
            "member 3 still accepts"
        );
        tokio::time::sleep(Duration::from_millis(5)).await; // poll interval of a wait for the condition
    }
    let start = Instant::now();
    assert_eq!(read_all(&nodes[0].chunks, &slice).await, data);
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    assert!(nodes[0].group.stats.peer_fallbacks.load(Ordering::Relaxed) >= 1);
    // Marked down: the next reads pass member 3 over without asking it.
    let dead = nodes[0]
        .group
        .peers()
        .into_iter()
        .find(|p| p.member.id == 3)
        .unwrap();
    assert!(dead.is_down());
    let asked = dead.counters.requests.load(Ordering::Relaxed);
    assert_eq!(read_all(&nodes[1].chunks, &slice).await, data);
    assert_eq!(dead.counters.requests.load(Ordering::Relaxed), asked);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_member_with_another_secret_is_refused() {
    let backend: Arc<dyn ObjectStore> = Arc::new(Backend::memory());
    let nodes = three(&backend).await;
    let (slice, data) = write_file(&nodes[0].chunks, 9).await;
    let stranger = node(backend.clone(), 50, "guessed").await;
    let mut members: Vec<Member> = nodes.iter().map(|n| n.member.clone()).collect();
    members.push(stranger.member.clone());
    stranger.group.set_members(members);
    // Its reads still work (from the store), but no member served it anything.
    assert_eq!(read_all(&stranger.chunks, &slice).await, data);
    assert_eq!(stranger.group.stats.peer_hits.load(Ordering::Relaxed), 0);
    let refused: u64 = nodes
        .iter()
        .map(|n| n.group.stats.refused.load(Ordering::Relaxed))
        .sum();
    let served: u64 = nodes
        .iter()
        .map(|n| n.group.stats.served.load(Ordering::Relaxed))
        .sum();
    assert!(refused >= 1, "the stranger's requests were refused");
    assert_eq!(served, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn warmup_through_one_member_fills_the_owners() {
    let backend: Arc<dyn ObjectStore> = Arc::new(Backend::memory());
    let nodes = three(&backend).await;
    let writer = node(backend.clone(), 99, "volume secret").await;
    let (slice, data) = write_file(&writer.chunks, 10).await;
    let blocks = nodes[0]
        .chunks
        .blocks_of(std::slice::from_ref(&slice), 0, slice.len);
    assert_eq!(blocks.len(), 40);
    // Only the first ten blocks: a range warms only its blocks.
    for (key, len) in &blocks[..10] {
        nodes[0].chunks.warm_block(key, *len).await.unwrap();
    }
    let mut cached = 0;
    for (key, len) in &blocks {
        cached += u32::from(nodes[1].chunks.cached_block_bytes(key, *len).await > 0);
    }
    assert_eq!(cached, 10);
    assert_eq!(nodes.iter().map(gets).sum::<u64>(), 10);
    let first_ten = usize::try_from(BS).unwrap() * 10;
    let got = nodes[2]
        .chunks
        .read(std::slice::from_ref(&slice), 0, BS * 10)
        .await
        .unwrap();
    assert_eq!(got.as_ref(), &data[..first_ten]);
    assert_eq!(
        nodes.iter().map(gets).sum::<u64>(),
        10,
        "warmed blocks cost no GET"
    );
    for (key, len) in &blocks[..10] {
        nodes[1].chunks.evict_block(key, *len).await.unwrap();
        assert_eq!(nodes[0].chunks.cached_block_bytes(key, *len).await, 0);
    }
}
