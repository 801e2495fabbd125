//! A TCP fault proxy for tests: put between a client and a server (Redis, PostgreSQL,
//! etcd, an S3 server), it forwards bytes unchanged until told to break the connection
//! in one of the ways networks and servers break: delay, lose bytes silently (a
//! blackhole), stall (nothing read, so the peer's buffers fill), cut one direction,
//! refuse and reset (a partition the client notices at once), or lose the answer to a
//! request that was forwarded (the server acted; the client never hears of it).
//!
//! A standing [`Fault`] applies to every connection until changed; [`FaultProxy::lose_answers`]
//! arms the lost-answer fault for the next requests; [`FaultProxy::chaos`] picks faults at
//! random from a seed. Every decision is logged ([`FaultProxy::events`]) with the time
//! since the proxy started, so a failing run says what happened to which connection.
//!
//! Each client under test gets its own proxy, so "partition one client from the engine"
//! is a fault of that client's proxy.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// What the proxy does to the bytes of every connection, until changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Forward everything at once.
    Pass,
    /// Forward everything, each read chunk this much later (order kept).
    Delay(Duration),
    /// Read and discard every byte either way; new connections are accepted and never
    /// answered (packets lost: the client only notices by its own timeouts). When it
    /// lifts, the connections that lost bytes are reset.
    Blackhole,
    /// Read nothing either way (bytes wait in the kernels' buffers; they flow again,
    /// in order, once the fault is lifted).
    Stall,
    /// Discard what the client sends; answers still flow (reset when it lifts).
    CutRequests,
    /// Discard what the server sends; requests still reach it (every answer is lost;
    /// reset when it lifts).
    CutAnswers,
    /// Reset every open connection, and every new one at once (the client is told).
    Refuse,
}

impl Fault {
    /// Whether bytes are lost under this fault (the connections must end with it).
    pub fn discards(&self) -> bool {
        matches!(
            self,
            Fault::Blackhole | Fault::CutRequests | Fault::CutAnswers
        )
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Pass => write!(f, "pass"),
            Fault::Delay(d) => write!(f, "delay {} ms", d.as_millis()),
            Fault::Blackhole => write!(f, "blackhole"),
            Fault::Stall => write!(f, "stall"),
            Fault::CutRequests => write!(f, "cut requests"),
            Fault::CutAnswers => write!(f, "cut answers"),
            Fault::Refuse => write!(f, "refuse"),
        }
    }
}

/// One decision of the proxy, for the test's log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultEvent {
    /// Time since the proxy started.
    pub at: Duration,
    /// The connection it concerns (numbered from 1 in accept order), if one.
    pub conn: Option<u64>,
    pub what: String,
}

impl fmt::Display for FaultEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.at.as_millis();
        match self.conn {
            Some(c) => write!(f, "{ms:>7} ms conn {c}: {}", self.what),
            None => write!(f, "{ms:>7} ms: {}", self.what),
        }
    }
}

/// Counts of what the proxy did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProxyCounts {
    pub connections: u64,
    /// Connections reset by a fault (not closed by a peer).
    pub resets: u64,
    /// Answers lost on purpose by [`FaultProxy::lose_answers`] (the connection was reset
    /// after the server answered, or after the wait for an answer ran out).
    pub lost_answers: u64,
    /// Bytes discarded, either way.
    pub discarded: u64,
    /// Standing faults set (other than `Pass`).
    pub faults: u64,
}

struct Shared {
    name: String,
    target: String,
    started: Instant,
    fault: watch::Sender<Fault>,
    /// Bumped to reset every open connection.
    reset_all: watch::Sender<u64>,
    /// Requests whose answers are still to be lost, and the bytes a request must contain.
    lose: Mutex<(u64, Vec<u8>)>,
    log: Mutex<Vec<FaultEvent>>,
    next_conn: AtomicU64,
    resets: AtomicU64,
    lost_answers: AtomicU64,
    discarded: AtomicU64,
    faults: AtomicU64,
    /// Mirror every event to stderr as it happens (`STRATA_PROXY_LOG=1`).
    echo: bool,
}

impl Shared {
    fn note(&self, conn: Option<u64>, what: String) {
        let event = FaultEvent {
            at: self.started.elapsed(),
            conn,
            what,
        };
        if self.echo {
            eprintln!("proxy {}: {event}", self.name);
        }
        self.log.lock().push(event);
    }

    /// Whether a request chunk should have its answer lost (consumes one arming).
    fn take_lost_answer(&self, chunk: &[u8]) -> bool {
        let mut lose = self.lose.lock();
        let (left, pattern) = &mut *lose;
        if *left == 0 {
            return false;
        }
        let matches = pattern.is_empty() || chunk.windows(pattern.len()).any(|w| w == &pattern[..]);
        if matches {
            *left -= 1;
        }
        matches
    }
}

/// A running proxy; stops (and resets its connections) when dropped.
pub struct FaultProxy {
    addr: std::net::SocketAddr,
    shared: Arc<Shared>,
    stop: CancellationToken,
}

impl fmt::Debug for FaultProxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultProxy")
            .field("name", &self.shared.name)
            .field("addr", &self.addr)
            .field("target", &self.shared.target)
            .finish()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl FaultProxy {
    /// Listen on a free loopback port and forward each connection to `target`
    /// (`host:port`). `name` labels its log lines.
    pub async fn start(name: &str, target: &str) -> std::io::Result<FaultProxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            name: name.to_string(),
            target: target.to_string(),
            started: Instant::now(),
            fault: watch::Sender::new(Fault::Pass),
            reset_all: watch::Sender::new(0),
            lose: Mutex::new((0, Vec::new())),
            log: Mutex::new(Vec::new()),
            next_conn: AtomicU64::new(0),
            resets: AtomicU64::new(0),
            lost_answers: AtomicU64::new(0),
            discarded: AtomicU64::new(0),
            faults: AtomicU64::new(0),
            echo: std::env::var_os("STRATA_PROXY_LOG").is_some(),
        });
        let stop = CancellationToken::new();
        tokio::spawn(accept_loop(listener, shared.clone(), stop.clone()));
        Ok(FaultProxy { addr, shared, stop })
    }

    /// Where clients connect.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }

    /// Set the standing fault. `Refuse` also resets every open connection; so does the
    /// end of a fault that discarded bytes (`Blackhole`, `CutRequests`, `CutAnswers`):
    /// TCP never drops bytes from the middle of a live stream, so a connection that lost
    /// some must not go on (its requests and answers would no longer pair up).
    pub fn set(&self, fault: Fault) {
        let before = self.shared.fault.send_replace(fault);
        if before != fault {
            if fault != Fault::Pass {
                self.shared.faults.fetch_add(1, Ordering::Relaxed);
            }
            self.shared.note(None, format!("fault {before} -> {fault}"));
        }
        if fault == Fault::Refuse || (before != fault && before.discards()) {
            self.reset_all();
        }
    }

    /// The standing fault.
    pub fn fault(&self) -> Fault {
        *self.shared.fault.borrow()
    }

    /// Reset every open connection now (new ones are accepted as the standing fault says).
    pub fn reset_all(&self) {
        self.shared.reset_all.send_modify(|n| *n += 1);
        self.shared.note(None, "reset every connection".into());
    }

    /// Lose the answers to the next `count` requests that contain `pattern` (any request
    /// when empty): each such request is forwarded, then whatever the server sends back
    /// on that connection is discarded, and once the server has answered (or 2 s passed)
    /// the connection is reset. The server acted; the client never hears of it.
    pub fn lose_answers(&self, count: u64, pattern: &[u8]) {
        *self.shared.lose.lock() = (count, pattern.to_vec());
        self.shared.note(
            None,
            format!(
                "armed: lose the answers to {count} request(s) containing {:?}",
                String::from_utf8_lossy(pattern)
            ),
        );
    }

    /// Armed lost answers not yet used.
    pub fn armed_lost_answers(&self) -> u64 {
        self.shared.lose.lock().0
    }

    /// What the proxy did so far.
    pub fn counts(&self) -> ProxyCounts {
        let s = &self.shared;
        ProxyCounts {
            connections: s.next_conn.load(Ordering::Relaxed),
            resets: s.resets.load(Ordering::Relaxed),
            lost_answers: s.lost_answers.load(Ordering::Relaxed),
            discarded: s.discarded.load(Ordering::Relaxed),
            faults: s.faults.load(Ordering::Relaxed),
        }
    }

    /// Every decision so far, in order.
    pub fn events(&self) -> Vec<FaultEvent> {
        self.shared.log.lock().clone()
    }

    /// Add a line of the test's own to the log (what the test did between faults).
    pub fn note(&self, what: impl Into<String>) {
        self.shared.note(None, what.into());
    }

    /// Break the connections at random until `stop` is cancelled: the choices come from
    /// `seed`, so a run's sequence of faults can be replayed (their timing follows the
    /// clock). Leaves the proxy passing bytes when it ends.
    pub fn chaos(&self, seed: u64, plan: ChaosPlan, stop: CancellationToken) -> ChaosRun {
        let proxy = FaultProxy {
            addr: self.addr,
            shared: self.shared.clone(),
            // The chaos task's copy must not stop the proxy when it is dropped.
            stop: CancellationToken::new(),
        };
        let handle = tokio::spawn(async move {
            let mut rng = StdRng::seed_from_u64(seed);
            let mut fired = 0u64;
            loop {
                let calm = pick(&mut rng, &plan.calm);
                if sleep_or_stop(calm, &stop).await {
                    break;
                }
                fired += 1;
                match plan.pick(&mut rng) {
                    ChaosFault::LostAnswer => proxy.lose_answers(1, &plan.lost_answer_pattern),
                    ChaosFault::Reset => proxy.reset_all(),
                    ChaosFault::Standing(fault) => {
                        proxy.set(fault);
                        let length = pick(&mut rng, &plan.length);
                        let stopped = sleep_or_stop(length, &stop).await;
                        proxy.set(Fault::Pass);
                        if stopped {
                            break;
                        }
                    }
                }
            }
            proxy.set(Fault::Pass);
            proxy.lose_answers(0, b"");
            fired
        });
        ChaosRun { handle }
    }
}

/// A chaos schedule running on a proxy.
#[derive(Debug)]
pub struct ChaosRun {
    handle: tokio::task::JoinHandle<u64>,
}

impl ChaosRun {
    /// Wait for it to end (its stop token cancelled); how many faults it fired.
    pub async fn finish(self) -> u64 {
        self.handle.await.unwrap_or(0)
    }
}

/// What [`FaultProxy::chaos`] may do, and how often.
#[derive(Clone, Debug)]
pub struct ChaosPlan {
    /// Quiet time between two faults.
    pub calm: std::ops::Range<Duration>,
    /// How long a standing fault lasts.
    pub length: std::ops::Range<Duration>,
    /// Relative weights: lost answer, reset, delay, blackhole, stall, cut requests,
    /// cut answers, refuse.
    pub weights: [u32; 8],
    /// A request must contain this to have its answer lost (empty: any request).
    pub lost_answer_pattern: Vec<u8>,
    /// The delay of a `Delay` fault.
    pub delay: Duration,
}

impl Default for ChaosPlan {
    fn default() -> ChaosPlan {
        ChaosPlan {
            calm: Duration::from_millis(200)..Duration::from_millis(1200),
            length: Duration::from_millis(100)..Duration::from_millis(1500),
            weights: [6, 2, 2, 1, 1, 1, 1, 1],
            lost_answer_pattern: Vec::new(),
            delay: Duration::from_millis(30),
        }
    }
}

enum ChaosFault {
    LostAnswer,
    Reset,
    Standing(Fault),
}

impl ChaosPlan {
    fn pick(&self, rng: &mut StdRng) -> ChaosFault {
        let total: u32 = self.weights.iter().sum();
        let mut n = rng.random_range(0..total.max(1));
        let mut index = 0;
        for (i, w) in self.weights.iter().enumerate() {
            if n < *w {
                index = i;
                break;
            }
            n -= w;
        }
        match index {
            0 => ChaosFault::LostAnswer,
            1 => ChaosFault::Reset,
            2 => ChaosFault::Standing(Fault::Delay(self.delay)),
            3 => ChaosFault::Standing(Fault::Blackhole),
            4 => ChaosFault::Standing(Fault::Stall),
            5 => ChaosFault::Standing(Fault::CutRequests),
            6 => ChaosFault::Standing(Fault::CutAnswers),
            _ => ChaosFault::Standing(Fault::Refuse),
        }
    }
}

fn pick(rng: &mut StdRng, range: &std::ops::Range<Duration>) -> Duration {
    if range.start >= range.end {
        return range.start;
    }
    rng.random_range(range.clone())
}

/// Sleep for `d`; true if `stop` came first.
async fn sleep_or_stop(d: Duration, stop: &CancellationToken) -> bool {
    tokio::select! {
        () = tokio::time::sleep(d) => false,
        () = stop.cancelled() => true,
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, stop: CancellationToken) {
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            () = stop.cancelled() => return,
        };
        let Ok((client, _)) = accepted else {
            continue;
        };
        let id = shared.next_conn.fetch_add(1, Ordering::Relaxed) + 1;
        let _ = client.set_nodelay(true);
        let fault = *shared.fault.borrow();
        if fault == Fault::Refuse {
            let _ = client.set_zero_linger();
            shared.resets.fetch_add(1, Ordering::Relaxed);
            shared.note(Some(id), "refused".into());
            continue;
        }
        tokio::spawn(serve(client, id, shared.clone(), stop.child_token()));
    }
}

/// One proxied connection: two pumps, one per direction, sharing a reset token.
async fn serve(mut client: TcpStream, id: u64, shared: Arc<Shared>, stop: CancellationToken) {
    // A connection accepted during a blackhole looks to the client like a server that
    // never answers: what it sends is lost until the fault lifts, then it is connected.
    let mut fault = shared.fault.subscribe();
    if *fault.borrow_and_update() == Fault::Blackhole {
        shared.note(Some(id), "accepted into a blackhole".into());
        let mut buf = vec![0u8; 16 << 10];
        let mut lost = false;
        while *fault.borrow_and_update() == Fault::Blackhole {
            tokio::select! {
                changed = fault.changed() => if changed.is_err() { return },
                read = client.read(&mut buf) => match read {
                    Ok(0) | Err(_) => return,
                    Ok(n) => {
                        let n = u64::try_from(n).unwrap_or(u64::MAX);
                        shared.discarded.fetch_add(n, Ordering::Relaxed);
                        lost = true;
                    }
                },
                () = stop.cancelled() => return,
            };
        }
        if lost {
            // What it sent is gone: it cannot go on as one stream.
            let _ = client.set_zero_linger();
            shared.resets.fetch_add(1, Ordering::Relaxed);
            shared.note(Some(id), "lost bytes in a blackhole: reset".into());
            return;
        }
    }
    let server = match TcpStream::connect(&shared.target).await {
        Ok(s) => s,
        Err(e) => {
            shared.note(Some(id), format!("cannot reach {}: {e}", shared.target));
            let _ = client.set_zero_linger();
            return;
        }
    };
    let _ = server.set_nodelay(true);
    // Every close the proxy decides on is a reset, not a clean end of stream.
    let _ = client.set_zero_linger();
    let _ = server.set_zero_linger();
    let reset = stop.child_token();
    let losing = Arc::new(AtomicBool::new(false));
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let generation = *shared.reset_all.borrow();
    let up = Pump {
        id,
        generation,
        up: true,
        shared: shared.clone(),
        reset: reset.clone(),
        losing: losing.clone(),
    };
    let down = Pump {
        up: false,
        ..up.clone()
    };
    let mut resets = shared.reset_all.subscribe();
    resets.mark_unchanged();
    let watch_resets = {
        let reset = reset.clone();
        let shared = shared.clone();
        async move {
            tokio::select! {
                changed = resets.changed() => {
                    if changed.is_ok() {
                        shared.resets.fetch_add(1, Ordering::Relaxed);
                        shared.note(Some(id), "reset".into());
                        reset.cancel();
                    }
                }
                () = reset.cancelled() => {}
            }
        }
    };
    tokio::join!(
        up.run(client_read, server_write),
        down.run(server_read, client_write),
        watch_resets,
    );
}

#[derive(Clone)]
struct Pump {
    id: u64,
    /// `reset_all`'s count when the connection opened: once it moves, nothing more is
    /// forwarded, even before the reset task has run (a test that resets and then lets
    /// answers pass must not see the tail of an answer it cut).
    generation: u64,
    /// Client to server.
    up: bool,
    shared: Arc<Shared>,
    /// Cancelled to reset the connection (both pumps end, dropping both sockets).
    reset: CancellationToken,
    /// A request's answer is being lost on this connection.
    losing: Arc<AtomicBool>,
}

impl Pump {
    async fn run(self, mut from: OwnedReadHalf, mut to: OwnedWriteHalf) {
        let mut buf = vec![0u8; 64 << 10];
        let mut fault = self.shared.fault.subscribe();
        loop {
            // Stalled: read nothing until the fault lifts.
            if *fault.borrow_and_update() == Fault::Stall {
                tokio::select! {
                    f = fault.wait_for(|f| *f != Fault::Stall) => if f.is_err() { return },
                    () = self.reset.cancelled() => return,
                }
            }
            let read = tokio::select! {
                r = from.read(&mut buf) => r,
                () = self.reset.cancelled() => return,
                _ = fault.changed() => continue,
            };
            let n = match read {
                Ok(0) | Err(_) => {
                    // The peer closed: pass the end of stream on, and let the other
                    // direction finish by itself.
                    let _ = to.shutdown().await;
                    return;
                }
                Ok(n) => n,
            };
            let chunk = &buf[..n];
            if !self.forward(chunk, &mut to).await {
                return;
            }
        }
    }

    /// Apply the standing fault to one chunk; false when the connection is done.
    async fn forward(&self, chunk: &[u8], to: &mut OwnedWriteHalf) -> bool {
        if *self.shared.reset_all.borrow() != self.generation {
            self.reset.cancel();
            return false;
        }
        let fault = *self.shared.fault.borrow();
        let discard = match fault {
            Fault::Blackhole => true,
            Fault::CutRequests => self.up,
            Fault::CutAnswers => !self.up,
            _ => false,
        };
        if !self.up && self.losing.load(Ordering::SeqCst) {
            // The answer to a request whose answer is lost: drop it and reset.
            self.discard(chunk.len());
            self.shared.lost_answers.fetch_add(1, Ordering::Relaxed);
            self.shared.note(
                Some(self.id),
                format!("lost an answer ({} bytes), reset", chunk.len()),
            );
            self.reset.cancel();
            return false;
        }
        if discard {
            self.discard(chunk.len());
            return true;
        }
        if let Fault::Delay(d) = fault {
            tokio::select! {
                () = tokio::time::sleep(d) => {}
                () = self.reset.cancelled() => return false,
            }
        }
        if self.up && self.shared.take_lost_answer(chunk) {
            self.losing.store(true, Ordering::SeqCst);
            self.shared.note(
                Some(self.id),
                format!(
                    "request of {} bytes forwarded; its answer will be lost",
                    chunk.len()
                ),
            );
            self.reset_if_unanswered();
        }
        tokio::select! {
            w = to.write_all(chunk) => w.is_ok(),
            () = self.reset.cancelled() => false,
        }
    }

    fn discard(&self, n: usize) {
        let n = u64::try_from(n).unwrap_or(u64::MAX);
        self.shared.discarded.fetch_add(n, Ordering::Relaxed);
    }

    /// A request whose answer is to be lost but that the server never answers still ends
    /// in a reset, 2 s later.
    fn reset_if_unanswered(&self) {
        let reset = self.reset.clone();
        let shared = self.shared.clone();
        let id = self.id;
        tokio::spawn(async move {
            tokio::select! {
                () = tokio::time::sleep(Duration::from_secs(2)) => {
                    shared.lost_answers.fetch_add(1, Ordering::Relaxed);
                    shared.note(Some(id), "no answer within 2 s, reset".into());
                    reset.cancel();
                }
                () = reset.cancelled() => {}
            }
        });
    }
}

#[cfg(test)]
mod tests;
