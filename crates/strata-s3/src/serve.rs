//! Serving the S3 service over HTTP until cancelled: HTTP/1.1 and HTTP/2 on one listener,
//! a bound on concurrent connections, a header-read timeout for slow clients, and a
//! graceful stop that lets requests in flight finish.

use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use s3s::service::S3Service;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

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

/// Answer one request. A request that announced an empty body with `Expect:
/// 100-continue` never gets a "100 Continue" (there is nothing to send); botocore before
/// 1.36 then leaves its connection in a state where the next request on it stalls until
/// the server drops it, so such a response closes the connection.
async fn respond(
    service: S3Service,
    req: hyper::Request<hyper::body::Incoming>,
) -> Result<s3s::HttpResponse, s3s::HttpError> {
    let headers = req.headers();
    let empty_expecting = headers
        .get(hyper::header::EXPECT)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"))
        && headers
            .get(hyper::header::CONTENT_LENGTH)
            .is_none_or(|v| v.as_bytes() == b"0");
    let mut resp = hyper::service::Service::call(&service, req).await?;
    if empty_expecting {
        resp.headers_mut().insert(
            hyper::header::CONNECTION,
            hyper::header::HeaderValue::from_static("close"),
        );
    }
    Ok(resp)
}

/// Serve `service` on `listener` until `stop` is cancelled.
pub async fn serve(
    listener: TcpListener,
    service: S3Service,
    opts: ServeOptions,
    stop: CancellationToken,
) {
    let mut http = ConnBuilder::new(TokioExecutor::new());
    http.http1()
        .timer(TokioTimer::new())
        .header_read_timeout(opts.header_timeout);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let slots = Arc::new(Semaphore::new(opts.max_connections.max(1)));
    loop {
        let permit = tokio::select! {
            permit = slots.clone().acquire_owned() => permit,
            () = stop.cancelled() => break,
        };
        let Ok(permit) = permit else {
            break;
        };
        let socket = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((socket, _)) => socket,
                Err(e) => {
                    tracing::warn!("accepting a connection: {e}");
                    continue;
                }
            },
            () = stop.cancelled() => break,
        };
        let service = service.clone();
        let handler = hyper::service::service_fn(move |req| respond(service.clone(), req));
        let conn = http
            .serve_connection(TokioIo::new(socket), handler)
            .into_owned();
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!("connection ended: {e}");
            }
            drop(permit);
        });
    }
    if tokio::time::timeout(opts.grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            "stopping: requests still running after {:?} were cut off",
            opts.grace
        );
    }
}
