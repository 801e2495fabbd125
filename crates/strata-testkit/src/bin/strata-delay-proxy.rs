//! A TCP proxy that delays every answer by a fixed time, to measure metadata engines as
//! if they were across a network (`benches/metadata.sh`). This kernel has no `netem`
//! qdisc, so the delay is made here: bytes from the server are forwarded to the client
//! no earlier than DELAY after they arrived (order and content kept; requests pass at
//! once), so each round trip costs DELAY more.
//!
//! It also counts round trips: an answer that arrives after the client sent something
//! since the previous answer starts a new one (pipelined requests count once). Any
//! connection to STATS_ADDR reads the count so far as one line.
//!
//! Usage: strata-delay-proxy LISTEN_ADDR SERVER_ADDR DELAY_MICROS [STATS_ADDR]
//! Threads, not an async runtime: `thread::sleep` is precise to tens of microseconds,
//! where an async timer wheel rounds up to a millisecond.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(listen), Some(server), Some(delay)) = (args.get(1), args.get(2), args.get(3)) else {
        eprintln!("usage: strata-delay-proxy LISTEN_ADDR SERVER_ADDR DELAY_MICROS");
        std::process::exit(2);
    };
    let delay = match delay.parse::<u64>() {
        Ok(us) => Duration::from_micros(us),
        Err(e) => {
            eprintln!("strata-delay-proxy: delay {delay:?}: {e}");
            std::process::exit(2);
        }
    };
    let listener = match TcpListener::bind(listen) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("strata-delay-proxy: listening on {listen}: {e}");
            std::process::exit(1);
        }
    };
    let round_trips = Arc::new(AtomicU64::new(0));
    if let Some(stats) = args.get(4) {
        serve_stats(stats, round_trips.clone());
    }
    for client in listener.incoming() {
        let client = match client {
            Ok(c) => c,
            Err(e) => {
                eprintln!("strata-delay-proxy: accept: {e}");
                continue;
            }
        };
        let server_addr = server.clone();
        let round_trips = round_trips.clone();
        thread::spawn(move || {
            if let Err(e) = serve(client, &server_addr, delay, &round_trips) {
                eprintln!("strata-delay-proxy: connection to {server_addr}: {e}");
            }
        });
    }
}

/// Answer every connection to `addr` with the round trips counted so far.
fn serve_stats(addr: &str, round_trips: Arc<AtomicU64>) {
    let listener = match TcpListener::bind(addr) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("strata-delay-proxy: listening on {addr}: {e}");
            std::process::exit(1);
        }
    };
    thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let _ = writeln!(conn, "{}", round_trips.load(Ordering::Relaxed));
        }
    });
}

/// Relay one connection: requests straight through, answers after `delay`.
fn serve(
    client: TcpStream,
    server_addr: &str,
    delay: Duration,
    round_trips: &AtomicU64,
) -> std::io::Result<()> {
    let server = TcpStream::connect(server_addr)?;
    client.set_nodelay(true)?;
    server.set_nodelay(true)?;
    let (client_in, server_out) = (client.try_clone()?, server.try_clone()?);
    let asked = Arc::new(AtomicBool::new(false));
    let asked_by_client = asked.clone();
    thread::spawn(move || pump_now(client_in, server_out, &asked_by_client));
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    let client_out = client.try_clone()?;
    thread::spawn(move || deliver_late(rx, client_out));
    let mut server_in = server;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = server_in.read(&mut buf)?;
        if n == 0 {
            break;
        }
        if asked.swap(false, Ordering::Relaxed) {
            round_trips.fetch_add(1, Ordering::Relaxed);
        }
        let due = Instant::now() + delay;
        let chunk = buf.get(..n).unwrap_or_default().to_vec();
        if tx.send((due, chunk)).is_err() {
            break;
        }
    }
    Ok(())
}

/// Forward client → server as it comes (noting that an answer is now due); close the
/// server side at the end.
fn pump_now(mut from: TcpStream, mut to: TcpStream, asked: &AtomicBool) {
    let mut buf = vec![0u8; 64 * 1024];
    while let Ok(n) = from.read(&mut buf) {
        if n == 0 {
            break;
        }
        // Before the write: the answer may come back before this thread runs again.
        asked.store(true, Ordering::Relaxed);
        if to.write_all(buf.get(..n).unwrap_or_default()).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

/// Write each chunk of the server's answer to the client once it is due.
fn deliver_late(rx: mpsc::Receiver<(Instant, Vec<u8>)>, mut to: TcpStream) {
    for (due, chunk) in rx {
        let now = Instant::now();
        if due > now {
            thread::sleep(due - now);
        }
        if to.write_all(&chunk).is_err() {
            return;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}
