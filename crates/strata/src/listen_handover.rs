//! Restarting the gateway or the WebDAV server without dropping a connection: a new
//! server started on an address another Strata server listens on takes its listening
//! socket over a Unix socket named after the address (`SCM_RIGHTS`), starts accepting on
//! it, and says so; the old server then stops accepting, finishes the requests in flight
//! and exits. Connections waiting to be accepted stay in the shared socket's queue, so
//! none is refused or reset. Messages: docs/FORMAT.md "Mount hand-over" (the same framing).

use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::fd_pass;
use crate::mount_handover::{HANDOVER_PROTOCOL, build_name};

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Message {
    /// The new server asks for the socket.
    Hello {
        protocol: u32,
        build: String,
    },
    /// The old server's answer (the socket rides on it).
    Listener {
        build: String,
    },
    Refused {
        why: String,
    },
    /// The new server accepts on it now.
    Serving {
        build: String,
    },
}

/// The hand-over socket of the server listening on `addr`.
fn socket_path(addr: SocketAddr) -> PathBuf {
    crate::mount_handover::runtime_socket("listen", addr.to_string().as_bytes())
}

fn send(
    stream: &mut UnixStream,
    m: &Message,
    fd: Option<std::os::fd::BorrowedFd<'_>>,
) -> Result<()> {
    fd_pass::send(stream, &serde_json::to_vec(m)?, fd)?;
    Ok(())
}

fn receive(stream: &mut UnixStream) -> Result<(Message, Option<std::os::fd::OwnedFd>)> {
    let (body, fd) = fd_pass::receive(stream)?.context("the other server closed the connection")?;
    Ok((serde_json::from_slice(&body)?, fd))
}

/// Take the listening socket of the Strata server on `address` (after binding it failed
/// because that server holds it). `None` when no Strata server there offers it.
pub async fn take(address: &str) -> Result<Option<(std::net::TcpListener, Taken)>> {
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host(address).await?.collect();
    for addr in addrs {
        let path = socket_path(addr);
        let taken = tokio::task::spawn_blocking(move || -> Result<_> {
            let Ok(mut stream) = UnixStream::connect(&path) else {
                // No socket there, or one left behind: nobody offers anything.
                return Ok(None);
            };
            let hello = Message::Hello {
                protocol: HANDOVER_PROTOCOL,
                build: build_name(),
            };
            send(&mut stream, &hello, None)?;
            match receive(&mut stream)? {
                (Message::Listener { build }, Some(fd)) => {
                    let listener = std::net::TcpListener::from(fd);
                    listener.set_nonblocking(true)?;
                    tracing::info!("took the listening socket on {addr} over from {build}");
                    Ok(Some((listener, Taken { stream })))
                }
                (Message::Refused { why }, _) => bail!("the server on {addr} refused: {why}"),
                (other, _) => bail!("unexpected answer from the server on {addr}: {other:?}"),
            }
        })
        .await??;
        if taken.is_some() {
            return Ok(taken);
        }
    }
    Ok(None)
}

/// The taking side, until it serves.
#[derive(Debug)]
pub struct Taken {
    stream: UnixStream,
}

impl Taken {
    /// This server accepts now: the old one stops accepting and drains.
    pub async fn serving(self) -> Result<()> {
        let mut stream = self.stream;
        tokio::task::spawn_blocking(move || {
            send(
                &mut stream,
                &Message::Serving {
                    build: build_name(),
                },
                None,
            )
        })
        .await?
    }
}

/// A listening socket offered to a server that replaces this one; the offer ends (and its
/// socket file goes) when dropped.
#[derive(Debug)]
pub struct Offer {
    task: tokio::task::JoinHandle<()>,
    path: PathBuf,
    ino: Option<u64>,
    /// Cancelled once another server accepts on the socket.
    pub handed: CancellationToken,
}

impl Drop for Offer {
    fn drop(&mut self) {
        self.task.abort();
        use std::os::unix::fs::MetadataExt;
        let now = std::fs::metadata(&self.path).ok().map(|m| m.ino());
        if now.is_some() && now == self.ino {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Offer `listener` (bound to `addr`) to a server that will replace this one.
pub fn offer(listener: &tokio::net::TcpListener, addr: SocketAddr) -> Result<Offer> {
    let handed = CancellationToken::new();
    let task = offer_task(listener, addr, handed.clone())?;
    use std::os::unix::fs::MetadataExt;
    let path = socket_path(addr);
    let ino = std::fs::metadata(&path).ok().map(|m| m.ino());
    Ok(Offer {
        task,
        path,
        ino,
        handed,
    })
}

fn offer_task(
    listener: &tokio::net::TcpListener,
    addr: SocketAddr,
    handed: CancellationToken,
) -> Result<tokio::task::JoinHandle<()>> {
    let path = socket_path(addr);
    if let Some(dir) = path.parent() {
        crate::wiring::create_private_dir(dir)?;
    }
    let _ = std::fs::remove_file(&path);
    let unix = tokio::net::UnixListener::bind(&path)
        .with_context(|| format!("hand-over socket {}", path.display()))?;
    let device = listener.as_fd().try_clone_to_owned()?;
    Ok(tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = unix.accept().await else {
                continue;
            };
            if !crate::mount_handover::peer_may_take_over(&stream) {
                continue;
            }
            let Ok(stream) = stream.into_std() else {
                continue;
            };
            let device = match device.try_clone() {
                Ok(d) => d,
                Err(e) => {
                    tracing::warn!("listener hand-over: {e}");
                    continue;
                }
            };
            let given = tokio::task::spawn_blocking(move || give(stream, device)).await;
            match given {
                Ok(Ok(build)) => {
                    tracing::info!("{build} accepts on {addr} now: finishing requests in flight");
                    handed.cancel();
                    return;
                }
                Ok(Err(e)) => tracing::warn!("listener hand-over failed, serving on: {e:#}"),
                Err(e) => tracing::warn!("listener hand-over: {e}"),
            }
        }
    }))
}

fn give(mut stream: UnixStream, device: std::os::fd::OwnedFd) -> Result<String> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(std::time::Duration::from_secs(60)))?;
    match receive(&mut stream)? {
        (Message::Hello { protocol, .. }, _) if protocol != HANDOVER_PROTOCOL => {
            let why = format!("protocol {protocol} (this server speaks {HANDOVER_PROTOCOL})");
            send(&mut stream, &Message::Refused { why: why.clone() }, None)?;
            bail!("{why}")
        }
        (Message::Hello { .. }, _) => {}
        (other, _) => bail!("unexpected message {other:?}"),
    }
    let answer = Message::Listener {
        build: build_name(),
    };
    send(&mut stream, &answer, Some(device.as_fd()))?;
    match receive(&mut stream)? {
        (Message::Serving { build }, _) => Ok(build),
        (other, _) => bail!("unexpected message {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_address_has_its_own_socket() {
        let a = socket_path("127.0.0.1:9000".parse().unwrap());
        assert_ne!(a, socket_path("127.0.0.1:9001".parse().unwrap()));
        assert_eq!(a, socket_path("127.0.0.1:9000".parse().unwrap()));
    }
}
