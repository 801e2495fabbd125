//! The `/metrics` endpoint of a long-running process (mount, gateway, WebDAV server,
//! cache node): `GET /metrics` answers the Prometheus text format that `render` produces
//! at that moment; anything else is 404. Plain HTTP on its own listener, which by
//! default is on loopback only (`--metrics`).

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::ServeOptions;

/// What produces the metrics document.
pub type Render = Arc<dyn Fn() -> String + Send + Sync>;

/// Content type of the Prometheus text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Serve `render`'s document at `/metrics` on `listener` until `stop` is cancelled.
pub async fn serve_metrics(listener: TcpListener, render: Render, stop: CancellationToken) {
    let opts = ServeOptions {
        max_connections: 64,
        ..ServeOptions::default()
    };
    let handler = move |req: Request<Incoming>| {
        let render = render.clone();
        async move { Ok::<_, Infallible>(answer(&req, &render)) }
    };
    crate::serve(listener, handler, opts, None, stop).await;
}

fn answer(req: &Request<Incoming>, render: &Render) -> Response<Full<Bytes>> {
    let found = req.uri().path() == "/metrics";
    let method_ok = req.method() == Method::GET || req.method() == Method::HEAD;
    let (status, body) = match (found, method_ok) {
        (true, true) => (StatusCode::OK, render()),
        (true, false) => (StatusCode::METHOD_NOT_ALLOWED, String::new()),
        (false, _) => (StatusCode::NOT_FOUND, "see /metrics\n".to_string()),
    };
    let body = if req.method() == Method::HEAD {
        Bytes::new()
    } else {
        Bytes::from(body)
    };
    let mut resp = Response::new(Full::new(body));
    *resp.status_mut() = status;
    if let Ok(v) = hyper::header::HeaderValue::from_str(CONTENT_TYPE) {
        resp.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    resp
}
