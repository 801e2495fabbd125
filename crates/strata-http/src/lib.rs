//! What Strata's HTTP front ends (the S3 gateway and the WebDAV server) share: the users
//! kept in the volume ([`users`]), and serving a request handler until cancelled — HTTP/1.1 and HTTP/2 on one
//! listener, optionally over TLS (rustls), a bound on concurrent connections, a
//! header-read timeout for slow clients, a lingering close ([`linger`]) and a graceful
//! stop that lets requests in flight finish — and loading a certificate and key for TLS.

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::{Body, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_util::sync::CancellationToken;

pub use tokio_rustls::TlsAcceptor;

pub mod linger;
pub mod metrics;
pub mod users;

pub use linger::Lingering;
pub use users::{PosixIds, User, UserGrants, UserInfo, UserStore, WebDavLimits};

/// What can go wrong outside a request: setting up a listener, managing users.
#[derive(Debug, thiserror::Error)]
pub enum FrontError {
    /// The certificate or key cannot be used.
    #[error("TLS: {0}")]
    Tls(String),
    #[error("user {0} already exists")]
    UserExists(String),
    #[error("no user {0}")]
    NoSuchUser(String),
    #[error("{0}")]
    InvalidUser(String),
    #[error("{what}: {errno}")]
    Fs {
        what: String,
        errno: strata_types::Errno,
    },
    #[error("damaged user record {what}: {why}")]
    Corrupt { what: String, why: String },
}

/// Limits of the HTTP server.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// Connections served at once; more wait to be accepted.
    pub max_connections: usize,
    /// A client must send a request's headers within this.
    pub header_timeout: Duration,
    /// How long a stop waits for requests in flight.
    pub grace: Duration,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            max_connections: 1024,
            header_timeout: Duration::from_secs(30),
            grace: Duration::from_secs(30),
        }
    }
}

/// The certificate chain and private key (PEM files) of an HTTPS listener.
pub fn load_tls(cert_file: &Path, key_file: &Path) -> Result<TlsAcceptor, FrontError> {
    let tls_err = |what: String| FrontError::Tls(what);
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert_file)
        .and_then(|certs| certs.collect::<Result<_, _>>())
        .map_err(|e| tls_err(format!("{}: {e}", cert_file.display())))?;
    if certs.is_empty() {
        return Err(tls_err(format!(
            "{}: no certificate in it",
            cert_file.display()
        )));
    }
    let key = PrivateKeyDer::from_pem_file(key_file)
        .map_err(|e| tls_err(format!("{}: {e}", key_file.display())))?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_err(format!("protocol versions: {e}")))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| tls_err(format!("certificate and key: {e}")))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Where a request came from, in its extensions (for policies on the client's address
/// and transport).
#[derive(Clone, Copy, Debug)]
pub struct Peer {
    pub addr: std::net::SocketAddr,
    /// The connection is TLS.
    pub tls: bool,
}

/// Serve `handler` on `listener` until `stop` is cancelled. The handler answers every
/// request; an error it returns ends the connection.
pub async fn serve<H, F, B, E>(
    listener: TcpListener,
    handler: H,
    opts: ServeOptions,
    tls: Option<TlsAcceptor>,
    stop: CancellationToken,
) where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Result<Response<B>, E>> + Send + 'static,
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut http = ConnBuilder::new(TokioExecutor::new());
    http.http1()
        .timer(TokioTimer::new())
        .header_read_timeout(opts.header_timeout);
    let open = Arc::new(OpenConnections::default());
    let slots = Arc::new(Semaphore::new(opts.max_connections.max(1)));
    loop {
        let permit = tokio::select! {
            permit = slots.clone().acquire_owned() => permit,
            () = stop.cancelled() => break,
        };
        let Ok(permit) = permit else {
            break;
        };
        let (socket, peer_addr) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((socket, peer_addr)) => {
                    // Headers and body go out as separate writes: without NODELAY a small
                    // GET waits out the client's delayed ACK (40 ms).
                    if let Err(e) = socket.set_nodelay(true) {
                        tracing::debug!("TCP_NODELAY: {e}");
                    }
                    (socket, peer_addr)
                }
                Err(e) => {
                    tracing::warn!("accepting a connection: {e}");
                    continue;
                }
            },
            () = stop.cancelled() => break,
        };
        let (handler, http, tls, stop) = (handler.clone(), http.clone(), tls.clone(), stop.clone());
        let handshake_timeout = opts.header_timeout;
        let counted = open.enter();
        tokio::spawn(async move {
            let first = Arc::new(FirstRequest::default());
            let seen = first.clone();
            let peer = Peer {
                addr: peer_addr,
                tls: tls.is_some(),
            };
            let service = hyper::service::service_fn(move |mut req: Request<Incoming>| {
                seen.arrived();
                req.extensions_mut().insert(peer);
                handler(req)
            });
            let ended = match tls {
                None => {
                    let conn = http
                        .serve_connection(TokioIo::new(Lingering::new(socket)), service)
                        .into_owned();
                    until_stopped(conn, &first, &stop, handshake_timeout).await
                }
                Some(acceptor) => {
                    match tokio::time::timeout(
                        handshake_timeout,
                        acceptor.accept(Lingering::new(socket)),
                    )
                    .await
                    {
                        Ok(Ok(stream)) => {
                            let conn = http
                                .serve_connection(TokioIo::new(stream), service)
                                .into_owned();
                            until_stopped(conn, &first, &stop, handshake_timeout).await
                        }
                        Ok(Err(e)) => {
                            tracing::debug!("TLS handshake failed: {e}");
                            Ok(())
                        }
                        Err(_) => {
                            tracing::debug!("TLS handshake timed out");
                            Ok(())
                        }
                    }
                }
            };
            if let Err(e) = ended {
                tracing::debug!("connection ended: {e}");
            }
            drop((permit, counted));
        });
    }
    if tokio::time::timeout(opts.grace, open.closed())
        .await
        .is_err()
    {
        tracing::warn!(
            "stopping: requests still running after {:?} were cut off",
            opts.grace
        );
    }
}

/// Serve connection `conn` until it ends. Once `stop` is cancelled it ends after the
/// request in flight; a connection accepted just before the stop whose first request has
/// not arrived yet gets that request answered first (its client sent it to a server that
/// accepted it: closing would lose it), if it comes within `first_wait` (the header
/// timeout).
async fn until_stopped<C>(
    conn: C,
    first: &FirstRequest,
    stop: &CancellationToken,
    first_wait: Duration,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>>
where
    C: Future<Output = Result<(), Box<dyn std::error::Error + Send + Sync>>> + GracefulConn,
{
    tokio::pin!(conn);
    tokio::select! {
        ended = conn.as_mut() => return ended,
        () = stop.cancelled() => {}
    }
    tokio::select! {
        ended = conn.as_mut() => return ended,
        _ = tokio::time::timeout(first_wait, first.wait()) => {}
    }
    conn.as_mut().begin_graceful_shutdown();
    conn.await
}

/// A connection that can be told to finish after its request in flight.
trait GracefulConn {
    fn begin_graceful_shutdown(self: std::pin::Pin<&mut Self>);
}

impl<I, S, E, B> GracefulConn for hyper_util::server::conn::auto::Connection<'static, I, S, E>
where
    S: hyper::service::HttpService<Incoming, ResBody = B>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    I: hyper::rt::Read + hyper::rt::Write + Unpin,
    B: Body + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    E: hyper_util::server::conn::auto::HttpServerConnExec<S::Future, B>,
{
    fn begin_graceful_shutdown(self: std::pin::Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}

/// Whether a connection's first request arrived.
#[derive(Debug, Default)]
struct FirstRequest {
    arrived: std::sync::atomic::AtomicBool,
    notify: tokio::sync::Notify,
}

impl FirstRequest {
    fn arrived(&self) {
        if !self.arrived.swap(true, std::sync::atomic::Ordering::AcqRel) {
            self.notify.notify_waiters();
        }
    }

    async fn wait(&self) {
        let notified = self.notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if self.arrived.load(std::sync::atomic::Ordering::Acquire) {
            return;
        }
        notified.await;
    }
}

/// Connections being served, so a stop can wait for them.
#[derive(Debug, Default)]
struct OpenConnections {
    count: std::sync::atomic::AtomicUsize,
    idle: tokio::sync::Notify,
}

struct Counted(Arc<OpenConnections>);

impl OpenConnections {
    fn enter(self: &Arc<Self>) -> Counted {
        self.count.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        Counted(self.clone())
    }

    async fn closed(&self) {
        loop {
            let idle = self.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            if self.count.load(std::sync::atomic::Ordering::Acquire) == 0 {
                return;
            }
            idle.await;
        }
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        if self
            .0
            .count
            .fetch_sub(1, std::sync::atomic::Ordering::AcqRel)
            == 1
        {
            self.0.idle.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code
    use super::*;
    use bytes::Bytes;
    use http_body_util::Full;
    use std::convert::Infallible;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn hello(_req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
        Ok(Response::new(Full::new(Bytes::from_static(b"hello"))))
    }

    /// With `max_connections` 1, a second connection is not served while the first is
    /// open, and is served as soon as it closes.
    #[tokio::test]
    async fn connections_beyond_the_limit_wait_their_turn() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = CancellationToken::new();
        let opts = ServeOptions {
            max_connections: 1,
            ..ServeOptions::default()
        };
        let server = tokio::spawn(serve(listener, hello, opts, None, stop.clone()));
        let first = tokio::net::TcpStream::connect(addr).await.unwrap();
        let mut probe = tokio::net::TcpStream::connect(addr).await.unwrap();
        probe
            .write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut answer = Vec::new();
        let waited =
            tokio::time::timeout(Duration::from_millis(300), probe.read_to_end(&mut answer)).await;
        assert!(waited.is_err(), "served past the limit: {answer:?}");
        drop(first);
        tokio::time::timeout(Duration::from_secs(10), probe.read_to_end(&mut answer))
            .await
            .unwrap()
            .unwrap();
        assert!(answer.starts_with(b"HTTP/1.1 200"), "{answer:?}");
        assert!(answer.ends_with(b"hello"), "{answer:?}");
        stop.cancel();
        server.await.unwrap();
    }

    async fn too_large(_req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
        let mut answer = Response::new(Full::new(Bytes::from_static(b"too large")));
        *answer.status_mut() = hyper::StatusCode::PAYLOAD_TOO_LARGE;
        Ok(answer)
    }

    /// A server that answers before reading an upload does not reset the client still
    /// sending it: every byte of the body goes out, and the answer is read after.
    #[tokio::test]
    async fn an_early_answer_does_not_reset_the_upload_behind_it() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = CancellationToken::new();
        let server = tokio::spawn(serve(
            listener,
            too_large,
            ServeOptions::default(),
            None,
            stop.clone(),
        ));
        let body_len = 4 << 20;
        let mut client = tokio::net::TcpStream::connect(addr).await.unwrap();
        let head = format!("PUT /big HTTP/1.1\r\nHost: x\r\nContent-Length: {body_len}\r\n\r\n");
        client.write_all(head.as_bytes()).await.unwrap();
        let piece = vec![7u8; 64 * 1024];
        client.write_all(&piece).await.unwrap();
        // The answer comes before the body is read; wait for its first bytes.
        let mut answer = vec![0u8; 12];
        client.read_exact(&mut answer).await.unwrap();
        assert_eq!(&answer, b"HTTP/1.1 413");
        // The rest of the upload: without a lingering close the server's socket is gone
        // by now, and the kernel resets these writes.
        let mut sent = piece.len();
        while sent < body_len {
            client
                .write_all(&piece)
                .await
                .unwrap_or_else(|e| panic!("upload reset after {sent} bytes: {e}"));
            sent += piece.len();
        }
        let mut rest = Vec::new();
        client.read_to_end(&mut rest).await.unwrap();
        assert!(rest.ends_with(b"too large"), "{rest:?}");
        stop.cancel();
        server.await.unwrap();
    }

    /// A missing certificate file is a clear error naming the file.
    #[test]
    fn a_missing_certificate_names_the_file() {
        let err = load_tls(
            Path::new("/nonexistent/cert.pem"),
            Path::new("/nonexistent/key.pem"),
        )
        .err()
        .unwrap();
        assert!(err.to_string().contains("/nonexistent/cert.pem"), "{err}");
    }
}
