//! What tests that start their own servers share: a free loopback port, and a child
//! process killed (SIGKILL) and reaped when dropped, so a failing test leaves none behind
//! and a test can kill a server as a crash would.

use std::process::Child;

/// A loopback port free now (taken from the kernel, then released for the server).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("no free loopback port: {e}"))
}

/// `n` loopback ports, distinct from each other and free now: all are held until all are
/// found (one at a time, the kernel may hand the same port out twice).
pub fn free_ports(n: usize) -> Vec<u16> {
    let held: Vec<std::net::TcpListener> = (0..n)
        .map(|_| {
            std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap_or_else(|e| panic!("no free loopback port: {e}"))
        })
        .collect();
    held.iter()
        .map(|l| {
            l.local_addr()
                .map(|a| a.port())
                .unwrap_or_else(|e| panic!("no local address: {e}"))
        })
        .collect()
}

/// A server process, killed with SIGKILL and reaped when dropped.
#[derive(Debug)]
pub struct Server(pub Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
