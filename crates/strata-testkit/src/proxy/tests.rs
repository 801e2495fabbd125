#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

use super::*;

/// An echo server that also counts the bytes it received.
async fn echo_server() -> (String, Arc<AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let received = Arc::new(AtomicU64::new(0));
    let counter = received.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let counter = counter.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                while let Ok(n) = s.read(&mut buf).await {
                    if n == 0 {
                        return;
                    }
                    counter.fetch_add(n as u64, Ordering::SeqCst);
                    if s.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, received)
}

/// Send `msg` and read the echo back, within `limit`.
async fn round_trip(s: &mut TcpStream, msg: &[u8], limit: Duration) -> std::io::Result<Vec<u8>> {
    s.write_all(msg).await?;
    let mut back = vec![0u8; msg.len()];
    match tokio::time::timeout(limit, s.read_exact(&mut back)).await {
        Ok(r) => r.map(|_| back),
        Err(_) => Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "no echo")),
    }
}

async fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let started = Instant::now();
    while !cond() {
        assert!(started.elapsed() < Duration::from_secs(10), "{what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn passes_bytes_and_delays_them() {
    let (server, _) = echo_server().await;
    let proxy = FaultProxy::start("t", &server).await.unwrap();
    let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
    assert_eq!(
        round_trip(&mut s, b"hello", Duration::from_secs(5))
            .await
            .unwrap(),
        b"hello"
    );
    proxy.set(Fault::Delay(Duration::from_millis(60)));
    let t = Instant::now();
    assert_eq!(
        round_trip(&mut s, b"again", Duration::from_secs(5))
            .await
            .unwrap(),
        b"again"
    );
    // Once on the way in, once on the way back.
    assert!(
        t.elapsed() >= Duration::from_millis(120),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(proxy.counts().faults, 1);
}

#[tokio::test]
async fn cut_answers_reach_the_server_but_not_the_client() {
    let (server, received) = echo_server().await;
    let proxy = FaultProxy::start("t", &server).await.unwrap();
    let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
    round_trip(&mut s, b"x", Duration::from_secs(5))
        .await
        .unwrap();
    proxy.set(Fault::CutAnswers);
    let lost = round_trip(&mut s, b"yz", Duration::from_millis(300)).await;
    assert!(lost.is_err());
    wait_for("the server got the request", || {
        received.load(Ordering::SeqCst) == 3
    })
    .await;
    // A stream that lost bytes does not go on once the fault ends.
    proxy.set(Fault::Pass);
    assert!(
        round_trip(&mut s, b"d", Duration::from_secs(5))
            .await
            .is_err()
    );
    let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
    round_trip(&mut s, b"e", Duration::from_secs(5))
        .await
        .unwrap();
    proxy.set(Fault::CutRequests);
    let lost = round_trip(&mut s, b"abc", Duration::from_millis(300)).await;
    assert!(lost.is_err());
    assert_eq!(received.load(Ordering::SeqCst), 4, "requests are dropped");
    assert!(proxy.counts().discarded >= 5, "{:?}", proxy.counts());
}

#[tokio::test]
async fn a_lost_answer_was_acted_on_and_the_client_sees_a_reset() {
    let (server, received) = echo_server().await;
    let proxy = FaultProxy::start("t", &server).await.unwrap();
    let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
    proxy.lose_answers(1, b"COMMIT");
    // A request without the pattern is answered.
    assert_eq!(
        round_trip(&mut s, b"SELECT", Duration::from_secs(5))
            .await
            .unwrap(),
        b"SELECT"
    );
    let lost = round_trip(&mut s, b"COMMIT", Duration::from_secs(5)).await;
    assert!(lost.is_err(), "{lost:?}");
    assert_eq!(
        received.load(Ordering::SeqCst),
        12,
        "the server saw the request"
    );
    assert_eq!(proxy.counts().lost_answers, 1);
    assert_eq!(proxy.armed_lost_answers(), 0);
    // A new connection works.
    let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
    assert_eq!(
        round_trip(&mut s, b"COMMIT", Duration::from_secs(5))
            .await
            .unwrap(),
        b"COMMIT"
    );
    let log: Vec<String> = proxy.events().iter().map(|e| e.to_string()).collect();
    assert!(log.iter().any(|l| l.contains("lost an answer")), "{log:?}");
}

#[tokio::test]
async fn a_stall_holds_bytes_until_it_lifts() {
    let (server, received) = echo_server().await;
    let proxy = FaultProxy::start("t", &server).await.unwrap();
    let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
    round_trip(&mut s, b"1", Duration::from_secs(5))
        .await
        .unwrap();
    proxy.set(Fault::Stall);
    s.write_all(b"held").await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await; // the thing under test: nothing moves
    assert_eq!(received.load(Ordering::SeqCst), 1, "nothing passes a stall");
    proxy.set(Fault::Pass);
    let mut back = [0u8; 4];
    tokio::time::timeout(Duration::from_secs(5), s.read_exact(&mut back))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&back, b"held");
}

#[tokio::test]
async fn refuse_resets_open_and_new_connections_and_blackhole_stays_silent() {
    let (server, _) = echo_server().await;
    let proxy = FaultProxy::start("t", &server).await.unwrap();
    let mut open = TcpStream::connect(proxy.addr()).await.unwrap();
    round_trip(&mut open, b"1", Duration::from_secs(5))
        .await
        .unwrap();
    proxy.set(Fault::Refuse);
    assert!(
        round_trip(&mut open, b"2", Duration::from_secs(5))
            .await
            .is_err()
    );
    if let Ok(mut fresh) = TcpStream::connect(proxy.addr()).await {
        assert!(
            round_trip(&mut fresh, b"3", Duration::from_secs(5))
                .await
                .is_err()
        );
    }
    proxy.set(Fault::Blackhole);
    let mut silent = TcpStream::connect(proxy.addr()).await.unwrap();
    let err = round_trip(&mut silent, b"4", Duration::from_millis(300))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
    proxy.set(Fault::Pass);
    // The connection accepted during the blackhole lost what it sent: it is reset, never
    // continued as if nothing was missing; a new one works.
    assert!(
        round_trip(&mut silent, b"5", Duration::from_secs(5))
            .await
            .is_err()
    );
    let mut fresh = TcpStream::connect(proxy.addr()).await.unwrap();
    assert_eq!(
        round_trip(&mut fresh, b"6", Duration::from_secs(5))
            .await
            .unwrap(),
        b"6"
    );
    assert!(proxy.counts().resets >= 3, "{:?}", proxy.counts());
}

#[tokio::test]
async fn chaos_from_one_seed_makes_the_same_choices() {
    let (server, _) = echo_server().await;
    let plan = ChaosPlan {
        calm: Duration::from_millis(1)..Duration::from_millis(3),
        length: Duration::from_millis(1)..Duration::from_millis(3),
        ..ChaosPlan::default()
    };
    let mut runs = Vec::new();
    for _ in 0..2 {
        let proxy = FaultProxy::start("t", &server).await.unwrap();
        let stop = CancellationToken::new();
        let run = proxy.chaos(42, plan.clone(), stop.clone());
        wait_for("chaos fires", || proxy.counts().faults >= 12).await;
        stop.cancel();
        assert!(run.finish().await >= 12);
        let decisions: Vec<String> = proxy
            .events()
            .into_iter()
            .map(|e| e.what)
            .filter(|w| w.starts_with("fault") || w.starts_with("armed"))
            .collect();
        assert_eq!(proxy.fault(), Fault::Pass, "chaos leaves the proxy passing");
        runs.push(decisions);
    }
    let n = runs[0].len().min(runs[1].len()).saturating_sub(2);
    assert!(n >= 10, "{runs:?}");
    assert_eq!(runs[0][..n], runs[1][..n]);
}
