//! Serving the S3 service over HTTP until cancelled, on the HTTP server shared with the
//! other front ends (`strata-http`: HTTP/1.1 and HTTP/2, TLS, connection limit, header
//! timeout, graceful stop). What is S3's own: CORS preflights, presigned URLs' expiry
//! checks and SigV2 header checks answered before s3s, GetObjectAttributes' unquoted
//! ETag, CORS
//! headers on answers to browsers, and closing connections whose client may still be
//! holding back a body it announced with `Expect: 100-continue`.

use std::time::Instant;

use crate::access::OpName;
use crate::service::GatewayService;
use strata_http::{ServeOptions, TlsAcceptor};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Answer one request. A client that sent `Expect: 100-continue` may still be holding
/// its body back when the answer comes without a "100 Continue" — an error decided from
/// the headers, or an announced empty body (hyper sends no 100 then, and botocore before
/// 1.36 stalls its next request on that connection until the server drops it). Such a
/// connection cannot carry another request safely, so the answer closes it.
async fn respond(
    service: GatewayService,
    mut req: hyper::Request<hyper::body::Incoming>,
) -> Result<s3s::HttpResponse, s3s::HttpError> {
    let started = Instant::now();
    let op = OpName::default();
    req.extensions_mut().insert(op.clone());
    let vfs = service.gateway.vfs.clone();
    let preflight = req.method() == hyper::Method::OPTIONS;
    let mut resp = respond_timed(service, req).await;
    let name = match op.0.get() {
        Some(name) => name.as_str(),
        None if preflight => "CorsPreflight",
        None => "Unrouted",
    };
    if name == "GetObjectAttributes"
        && let Ok(resp) = resp.as_mut()
    {
        unquote_etag(resp).await;
    }
    vfs.front_metrics().s3.observe(name, started.elapsed());
    resp
}

async fn respond_timed(
    service: GatewayService,
    req: hyper::Request<hyper::body::Incoming>,
) -> Result<s3s::HttpResponse, s3s::HttpError> {
    if req.method() == hyper::Method::OPTIONS {
        return Ok(service
            .gateway
            .preflight(req.uri().path(), req.headers())
            .await);
    }
    if let Some(message) = req.uri().query().and_then(crate::presign::expires_error) {
        let status = hyper::StatusCode::BAD_REQUEST;
        return Ok(error_answer(
            status,
            "AuthorizationQueryParametersError",
            message,
        ));
    }
    if let Some(r) = crate::sigv2::refusal(req.headers(), crate::clock::now_secs()) {
        return Ok(error_answer(r.status, r.code, r.message));
    }
    let headers = req.headers();
    let expecting = headers
        .get(hyper::header::EXPECT)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    let empty = headers
        .get(hyper::header::CONTENT_LENGTH)
        .is_none_or(|v| v.as_bytes() == b"0");
    let origin = headers
        .get(hyper::header::ORIGIN)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let (path, method) = (req.uri().path().to_string(), req.method().clone());
    let mut resp = hyper::service::Service::call(&service.s3, req).await?;
    if expecting && (empty || !resp.status().is_success()) {
        resp.headers_mut().insert(
            hyper::header::CONNECTION,
            hyper::header::HeaderValue::from_static("close"),
        );
    }
    if let Some(origin) = origin {
        service
            .gateway
            .add_cors(&path, &origin, &method, &mut resp)
            .await;
    }
    Ok(resp)
}

/// An S3 error answer decided before s3s sees the request.
fn error_answer(status: hyper::StatusCode, code: &str, message: &str) -> s3s::HttpResponse {
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{code}</Code><Message>{message}</Message></Error>"
    );
    let mut resp = s3s::HttpResponse::new(s3s::Body::from(body));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/xml"),
    );
    resp
}

/// GetObjectAttributes answers its ETag without quotes (`<ETag>abc</ETag>`), unlike
/// every other S3 call; s3s's XML writer always quotes ETags, so they come off here.
async fn unquote_etag(resp: &mut s3s::HttpResponse) {
    if !resp.status().is_success() {
        return;
    }
    let body = match resp.body_mut().take_bytes() {
        Some(bytes) => bytes,
        None => match resp.body_mut().store_all_limited(1 << 20).await {
            Ok(bytes) => bytes,
            Err(e) => {
                tracing::warn!("GetObjectAttributes answer unreadable: {e}");
                return;
            }
        },
    };
    let text = String::from_utf8_lossy(&body);
    let fixed = match (text.find("<ETag>\""), text.find("\"</ETag>")) {
        (Some(open), Some(close)) if open + 6 < close => format!(
            "{}<ETag>{}</ETag>{}",
            &text[..open],
            &text[open + 7..close],
            &text[close + 8..]
        ),
        _ => text.into_owned(),
    };
    resp.headers_mut().insert(
        hyper::header::CONTENT_LENGTH,
        hyper::header::HeaderValue::from(fixed.len()),
    );
    *resp.body_mut() = s3s::Body::from(fixed);
}

/// Serve `service` on `listener` until `stop` is cancelled.
pub async fn serve(
    listener: TcpListener,
    service: GatewayService,
    opts: ServeOptions,
    tls: Option<TlsAcceptor>,
    stop: CancellationToken,
) {
    let handler = move |req| respond(service.clone(), req);
    strata_http::serve(listener, handler, opts, tls, stop).await;
}
