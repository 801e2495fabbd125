//! `--gzip`: GET answers compressed on the way out for clients that accept gzip (as
//! `juicefs webdav --gzip` does). Only whole answers (200) with a body worth it are
//! compressed — never a range (206), whose offsets are the file's — and the ETag turns
//! weak, as the bytes sent are no longer the file's. Compression runs off the async
//! worker threads, one chunk (up to 1 MiB) at a time, so memory stays bounded.

use std::io::{self, Write};

use bytes::Bytes;
use dav_server::body::Body;
use flate2::Compression;
use flate2::write::GzEncoder;
use futures::StreamExt;
use http::{HeaderMap, HeaderValue, Method, Response, StatusCode, header};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;

/// The body every answer is sent with.
pub type AnyBody = UnsyncBoxBody<Bytes, io::Error>;

/// Bodies shorter than this are sent as they are (the gzip framing would not pay).
const MIN_SIZE: u64 = 1024;

/// Whether the client accepts gzip (`Accept-Encoding: gzip`, not `gzip;q=0`).
pub(crate) fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|coding| {
            let mut parts = coding.split(';').map(str::trim);
            let name = parts.next().unwrap_or("");
            let refused = parts.any(|p| p.replace(' ', "") == "q=0");
            (name.eq_ignore_ascii_case("gzip") || name == "*") && !refused
        })
}

/// Whether an answer to `method` should be compressed.
fn worth_compressing(method: &Method, resp: &Response<Body>) -> bool {
    let h = resp.headers();
    let long_enough = h
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .is_none_or(|n| n >= MIN_SIZE);
    method == Method::GET
        && resp.status() == StatusCode::OK
        && !h.contains_key(header::CONTENT_ENCODING)
        && long_enough
}

/// The answer as sent: compressed when asked for and worth it, as it is otherwise.
pub(crate) fn finish(method: &Method, gzip: bool, resp: Response<Body>) -> Response<AnyBody> {
    if !gzip || !worth_compressing(method, &resp) {
        return resp.map(BodyExt::boxed_unsync);
    }
    let (mut parts, body) = resp.into_parts();
    let h = &mut parts.headers;
    h.remove(header::CONTENT_LENGTH);
    h.remove(header::ACCEPT_RANGES);
    h.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    h.append(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    if let Some(tag) = h.get(header::ETAG).and_then(|v| v.to_str().ok())
        && !tag.starts_with("W/")
        && let Ok(weak) = HeaderValue::from_str(&format!("W/{tag}"))
    {
        h.insert(header::ETAG, weak);
    }
    Response::from_parts(parts, compressed(body))
}

/// Where a compressed stream is.
struct Compressing {
    body: Body,
    encoder: Option<GzEncoder<Vec<u8>>>,
}

/// Feed `chunk` (or the end, when `None`) to the encoder on a blocking thread; the
/// encoder comes back with what it produced.
async fn encode(
    mut encoder: GzEncoder<Vec<u8>>,
    chunk: Option<Bytes>,
) -> io::Result<(Option<GzEncoder<Vec<u8>>>, Bytes)> {
    let joined = tokio::task::spawn_blocking(move || match chunk {
        Some(chunk) => {
            encoder.write_all(&chunk)?;
            let out = std::mem::take(encoder.get_mut());
            Ok((Some(encoder), Bytes::from(out)))
        }
        None => Ok((None, Bytes::from(encoder.finish()?))),
    })
    .await;
    joined.map_err(io::Error::other)?
}

fn compressed(body: Body) -> AnyBody {
    let start = Compressing {
        body,
        encoder: Some(GzEncoder::new(Vec::new(), Compression::fast())),
    };
    let frames = futures::stream::unfold(start, |mut at| async move {
        loop {
            let encoder = at.encoder.take()?;
            let chunk = match at.body.next().await {
                Some(Ok(chunk)) => Some(chunk),
                Some(Err(e)) => return Some((Err(e), at)),
                None => None,
            };
            match encode(encoder, chunk).await {
                Ok((encoder, out)) => {
                    at.encoder = encoder;
                    if !out.is_empty() {
                        return Some((Ok(Frame::data(out)), at));
                    }
                }
                Err(e) => return Some((Err(e), at)),
            }
        }
    });
    BodyExt::boxed_unsync(StreamBody::new(frames))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code
    use super::*;
    use std::io::Read;

    fn headers(accept: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            header::ACCEPT_ENCODING,
            HeaderValue::from_str(accept).unwrap(),
        );
        h
    }

    #[test]
    fn accept_encoding_is_read_with_its_weights() {
        assert!(accepts_gzip(&headers("gzip, deflate, br")));
        assert!(accepts_gzip(&headers("br;q=1.0, gzip;q=0.8")));
        assert!(accepts_gzip(&headers("*")));
        assert!(!accepts_gzip(&headers("gzip;q=0")));
        assert!(!accepts_gzip(&headers("deflate")));
        assert!(!accepts_gzip(&HeaderMap::new()));
    }

    #[tokio::test]
    async fn a_whole_get_is_compressed_and_decompresses_to_the_file() {
        let text = "a line of a text file that compresses well\n".repeat(20_000);
        let mut resp = Response::new(Body::from(text.clone()));
        resp.headers_mut()
            .insert(header::CONTENT_LENGTH, HeaderValue::from(text.len()));
        resp.headers_mut()
            .insert(header::ETAG, HeaderValue::from_static("\"1-2-3\""));
        let sent = finish(&Method::GET, true, resp);
        let h = sent.headers();
        assert_eq!(h.get(header::CONTENT_ENCODING).unwrap(), "gzip");
        assert!(h.get(header::CONTENT_LENGTH).is_none());
        assert_eq!(h.get(header::ETAG).unwrap(), "W/\"1-2-3\"");
        let bytes = sent.into_body().collect().await.unwrap().to_bytes();
        assert!(bytes.len() < text.len() / 10, "{} bytes", bytes.len());
        let mut back = String::new();
        flate2::read::GzDecoder::new(&bytes[..])
            .read_to_string(&mut back)
            .unwrap();
        assert_eq!(back, text);
    }

    #[tokio::test]
    async fn ranges_small_bodies_and_other_methods_go_as_they_are() {
        let mut partial = Response::new(Body::from("x".repeat(4096)));
        *partial.status_mut() = StatusCode::PARTIAL_CONTENT;
        let small = Response::new(Body::from("tiny"));
        let mut small_len = small;
        small_len
            .headers_mut()
            .insert(header::CONTENT_LENGTH, HeaderValue::from(4));
        for (method, resp) in [(Method::GET, partial), (Method::GET, small_len)] {
            let sent = finish(&method, true, resp);
            assert!(sent.headers().get(header::CONTENT_ENCODING).is_none());
        }
        let put = finish(
            &Method::PUT,
            true,
            Response::new(Body::from("x".repeat(4096))),
        );
        assert!(put.headers().get(header::CONTENT_ENCODING).is_none());
        let off = finish(
            &Method::GET,
            false,
            Response::new(Body::from("x".repeat(4096))),
        );
        let bytes = off.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(bytes.len(), 4096);
    }
}
