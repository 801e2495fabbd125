//! A lingering close for the front ends' connections. A server that answers before it has
//! read a request's body (413 for a body over the limit, 401 before an upload) and then
//! closes its socket with the unread upload still arriving makes the kernel answer the
//! client's next bytes with a reset — and a client still sending (curl, SDKs) fails with
//! "connection reset" instead of reading the answer that is already on its way. So when
//! the HTTP layer shuts a connection down, [`Lingering`] first sends its FIN (the answer is
//! complete), then reads and discards what the client still sends until it closes its
//! side, for at most [`LINGER_TIME`] and [`LINGER_BYTES`] — as Apache and nginx do.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// How long a closing connection keeps reading what the client still sends.
pub const LINGER_TIME: Duration = Duration::from_secs(2);
/// How much it reads and discards at most.
pub const LINGER_BYTES: usize = 8 << 20;

/// Where a connection is in its close.
enum Closing {
    Open,
    /// The FIN is sent: draining until the client's side ends or the bounds are reached.
    Draining {
        until: Pin<Box<Sleep>>,
        drained: usize,
    },
    Closed,
}

/// A connection's stream whose shutdown lingers (see the module doc).
pub struct Lingering<S> {
    inner: S,
    closing: Closing,
}

impl<S> std::fmt::Debug for Lingering<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match self.closing {
            Closing::Open => "open",
            Closing::Draining { drained, .. } => return write!(f, "Lingering(drained {drained})"),
            Closing::Closed => "closed",
        };
        write!(f, "Lingering({state})")
    }
}

impl<S> Lingering<S> {
    pub fn new(inner: S) -> Lingering<S> {
        Lingering {
            inner,
            closing: Closing::Open,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Lingering<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Lingering<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Closing::Open = this.closing {
            ready!(Pin::new(&mut this.inner).poll_shutdown(cx))?;
            this.closing = Closing::Draining {
                until: Box::pin(tokio::time::sleep(LINGER_TIME)),
                drained: 0,
            };
        }
        if let Closing::Draining { until, drained } = &mut this.closing {
            ready!(drain(&mut this.inner, cx, until.as_mut(), drained));
            this.closing = Closing::Closed;
        }
        Poll::Ready(Ok(()))
    }
}

/// Read and discard until the peer's side ends, an error, `until` or [`LINGER_BYTES`].
fn drain<S: AsyncRead + Unpin>(
    inner: &mut S,
    cx: &mut Context<'_>,
    until: Pin<&mut Sleep>,
    drained: &mut usize,
) -> Poll<()> {
    if until.poll(cx).is_ready() {
        return Poll::Ready(());
    }
    let mut scratch = [0u8; 16 * 1024];
    loop {
        let mut buf = ReadBuf::new(&mut scratch);
        match Pin::new(&mut *inner).poll_read(cx, &mut buf) {
            Poll::Ready(Ok(())) if buf.filled().is_empty() => return Poll::Ready(()),
            Poll::Ready(Ok(())) => {
                *drained += buf.filled().len();
                if *drained >= LINGER_BYTES {
                    return Poll::Ready(());
                }
            }
            Poll::Ready(Err(_)) => return Poll::Ready(()),
            Poll::Pending => return Poll::Pending,
        }
    }
}
