//! Object bodies: an upload streamed into an open file while its MD5 and the checksums
//! the client asked for are computed and checked (Content-MD5, `x-amz-checksum-*` in
//! headers or in an aws-chunked trailer), and a download streamed out of an open file by
//! a task that stops, and closes the file, when the client goes away.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use futures::{Stream, StreamExt};
use md5::{Digest, Md5};
use s3s::checksum::ChecksumHasher;
use s3s::crypto::{Checksum as _, Crc32, Crc32c, Crc64Nvme, Sha1, Sha256};
use s3s::dto::StreamingBlob;
use s3s::{S3Error, S3ErrorCode, S3Result};
use strata_vfs::Vfs;

use crate::error::fs_error;
use crate::objinfo::Checksums;

/// Bytes handed to the file system per write, and read per read.
const IO_SIZE: usize = 1 << 20;
const IO_SIZE_U64: u64 = 1 << 20;
/// A client that sends nothing of its body for this long loses the request
/// (RequestTimeout) instead of holding a connection and a temporary file forever.
pub const BODY_IDLE: std::time::Duration = std::time::Duration::from_secs(60);
/// Reads a download keeps ahead of the client.
const READ_AHEAD: usize = 4;

/// What the client said the body's digests are.
#[derive(Debug, Default)]
pub struct Expected {
    /// Content-MD5, base64.
    pub md5: Option<String>,
    /// `x-amz-checksum-*` headers, base64.
    pub checksums: Checksums,
    /// The algorithm asked for (`x-amz-sdk-checksum-algorithm`) or announced for the
    /// trailer (`x-amz-trailer: x-amz-checksum-crc32`), upper-case.
    pub algorithms: Vec<String>,
}

/// What an upload wrote.
#[derive(Debug)]
pub struct Written {
    pub size: u64,
    pub md5: [u8; 16],
    /// The checksums the client sent or asked for, computed over the body.
    pub checksums: Checksums,
}

impl Expected {
    /// What a PUT or UploadPart declares: Content-MD5, the `x-amz-checksum-*` values in
    /// the order crc32, crc32c, crc64nvme, sha1, sha256, and the headers naming
    /// algorithms.
    pub fn new(
        md5: Option<String>,
        sums: [Option<String>; 5],
        headers: &hyper::HeaderMap,
    ) -> Expected {
        let [crc32, crc32c, crc64nvme, sha1, sha256] = sums;
        let checksums = Checksums {
            crc32,
            crc32c,
            crc64nvme,
            sha1,
            sha256,
            kind: None,
        };
        Expected {
            md5,
            checksums,
            algorithms: Vec::new(),
        }
        .with_headers(headers)
    }

    /// The algorithms named in `x-amz-trailer` and `x-amz-sdk-checksum-algorithm`.
    fn with_headers(mut self, headers: &hyper::HeaderMap) -> Expected {
        for name in ["x-amz-trailer", "x-amz-sdk-checksum-algorithm"] {
            if let Some(value) = headers.get(name).and_then(|v| v.to_str().ok()) {
                for item in value.split(',') {
                    let algo = item.trim().trim_start_matches("x-amz-checksum-");
                    self.algorithms.push(algo.to_ascii_uppercase());
                }
            }
        }
        self
    }

    /// The algorithms the request names: by a checksum header, a trailer or
    /// `x-amz-sdk-checksum-algorithm`, upper-case.
    pub fn named_algorithms(&self) -> Vec<String> {
        let c = &self.checksums;
        let given = [
            ("CRC32", &c.crc32),
            ("CRC32C", &c.crc32c),
            ("CRC64NVME", &c.crc64nvme),
            ("SHA1", &c.sha1),
            ("SHA256", &c.sha256),
        ];
        let mut names: Vec<String> = given
            .iter()
            .filter(|(_, v)| v.is_some())
            .map(|(n, _)| (*n).to_owned())
            .collect();
        for name in &self.algorithms {
            if !names.contains(name) {
                names.push(name.clone());
            }
        }
        names
    }

    /// Compute `algorithm` (upper-case) over the body even if the request did not ask.
    pub fn also_compute(&mut self, algorithm: &str) {
        if !self.algorithms.iter().any(|a| a == algorithm) {
            self.algorithms.push(algorithm.to_owned());
        }
    }

    fn wants(&self, algo: &str, given: &Option<String>) -> bool {
        given.is_some() || self.algorithms.iter().any(|a| a == algo)
    }

    fn hasher(&self) -> ChecksumHasher {
        let c = &self.checksums;
        ChecksumHasher {
            crc32: self.wants("CRC32", &c.crc32).then(Crc32::new),
            crc32c: self.wants("CRC32C", &c.crc32c).then(Crc32c::new),
            sha1: self.wants("SHA1", &c.sha1).then(Sha1::new),
            sha256: self.wants("SHA256", &c.sha256).then(Sha256::new),
            crc64nvme: self.wants("CRC64NVME", &c.crc64nvme).then(Crc64Nvme::new),
        }
    }

    /// Compare what was computed with what the client sent in headers or trailers.
    fn verify(
        &self,
        md5: &[u8; 16],
        computed: s3s::dto::Checksum,
        trailers: Option<&s3s::TrailingHeaders>,
    ) -> S3Result<Checksums> {
        if let Some(want) = &self.md5
            && *want != base64_simd::STANDARD.encode_to_string(md5)
        {
            return Err(S3Error::with_message(
                S3ErrorCode::BadDigest,
                "the Content-MD5 you specified did not match what was received",
            ));
        }
        let got = Checksums {
            crc32: computed.checksum_crc32,
            crc32c: computed.checksum_crc32c,
            crc64nvme: computed.checksum_crc64nvme,
            sha1: computed.checksum_sha1,
            sha256: computed.checksum_sha256,
            kind: None,
        };
        let pairs = [
            ("crc32", &self.checksums.crc32, &got.crc32),
            ("crc32c", &self.checksums.crc32c, &got.crc32c),
            ("crc64nvme", &self.checksums.crc64nvme, &got.crc64nvme),
            ("sha1", &self.checksums.sha1, &got.sha1),
            ("sha256", &self.checksums.sha256, &got.sha256),
        ];
        for (name, header, computed) in pairs {
            let trailer = trailers.and_then(|t| {
                t.read(|h| {
                    h.get(format!("x-amz-checksum-{name}"))
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_owned)
                })
                .flatten()
            });
            if let Some(want) = header.as_ref().or(trailer.as_ref())
                && Some(want) != computed.as_ref()
            {
                return Err(S3Error::with_message(
                    S3ErrorCode::BadDigest,
                    format!(
                        "the {} you specified did not match the calculated checksum",
                        name.to_ascii_uppercase()
                    ),
                ));
            }
        }
        Ok(got)
    }
}

/// Write `body` into the open file `fh` from offset 0: at most `limit` bytes
/// (EntityTooLarge beyond). Digests are checked once the body has ended; the caller
/// discards the file on any error.
pub async fn write_body(
    vfs: &Vfs,
    fh: u64,
    body: Option<StreamingBlob>,
    expected: &Expected,
    trailers: Option<&s3s::TrailingHeaders>,
    limit: u64,
) -> S3Result<Written> {
    let mut md5 = Md5::new();
    let mut hasher = expected.hasher();
    let mut size = 0u64;
    let mut buf = BytesMut::new();
    if let Some(mut body) = body {
        loop {
            let Ok(next) = tokio::time::timeout(BODY_IDLE, body.next()).await else {
                return Err(S3Error::with_message(
                    S3ErrorCode::RequestTimeout,
                    format!("no part of the body arrived for {} s", BODY_IDLE.as_secs()),
                ));
            };
            let Some(piece) = next else {
                break;
            };
            let piece = piece.map_err(|e| {
                S3Error::with_message(
                    S3ErrorCode::IncompleteBody,
                    format!("reading the body: {e}"),
                )
            })?;
            size = size.saturating_add(u64::try_from(piece.len()).unwrap_or(u64::MAX));
            if size > limit {
                return Err(S3Error::with_message(
                    S3ErrorCode::EntityTooLarge,
                    format!("a body is at most {limit} bytes here"),
                ));
            }
            md5.update(&piece);
            hasher.update(&piece);
            buf.extend_from_slice(&piece);
            if buf.len() >= IO_SIZE {
                let written = size - u64::try_from(buf.len()).unwrap_or(0);
                write_all(vfs, fh, written, buf.split().freeze()).await?;
            }
        }
    }
    if !buf.is_empty() {
        let written = size - u64::try_from(buf.len()).unwrap_or(0);
        write_all(vfs, fh, written, buf.freeze()).await?;
    }
    let md5: [u8; 16] = md5.finalize().into();
    let checksums = expected.verify(&md5, hasher.finalize(), trailers)?;
    Ok(Written {
        size,
        md5,
        checksums,
    })
}

async fn write_all(vfs: &Vfs, fh: u64, mut off: u64, mut data: Bytes) -> S3Result<()> {
    while !data.is_empty() {
        let n = vfs
            .write(fh, off, &data)
            .await
            .map_err(|e| fs_error(e, "upload"))?;
        let n = usize::try_from(n).unwrap_or(0).min(data.len());
        if n == 0 {
            return Err(fs_error(strata_types::Errno::EIO, "upload"));
        }
        off += u64::try_from(n).unwrap_or(0);
        data = data.slice(n..);
    }
    Ok(())
}

/// Why a download stopped early.
#[derive(Debug, thiserror::Error)]
#[error("reading the object failed: errno {0}")]
pub struct ReadFailed(strata_types::Errno);

/// A download of `[start, end)` of the open file `fh`; the file is closed when the
/// download ends or the client goes away.
pub fn read_body(vfs: Arc<Vfs>, fh: u64, start: u64, end: u64) -> StreamingBlob {
    let (tx, rx) = tokio::sync::mpsc::channel(READ_AHEAD);
    tokio::spawn(async move {
        let mut off = start;
        while off < end {
            let want = u32::try_from((end - off).min(IO_SIZE_U64)).unwrap_or(1 << 20);
            let item = match vfs.read(fh, off, want).await {
                Ok(data) if data.is_empty() => Err(ReadFailed(strata_types::Errno::EIO)),
                Ok(data) => Ok(data),
                Err(e) => Err(ReadFailed(e)),
            };
            let failed = item.is_err();
            if let Ok(data) = &item {
                off += u64::try_from(data.len()).unwrap_or(0);
            }
            if tx.send(item).await.is_err() || failed {
                break;
            }
        }
        if let Err(e) = vfs.release(fh).await {
            tracing::warn!("closing a downloaded object: errno {e}");
        }
    });
    StreamingBlob::wrap(Download { rx })
}

struct Download {
    rx: tokio::sync::mpsc::Receiver<Result<Bytes, ReadFailed>>,
}

impl Stream for Download {
    type Item = Result<Bytes, ReadFailed>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.rx.poll_recv(cx)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("never")]
    struct Never;

    /// A body that sends one piece and then nothing: the request ends with RequestTimeout
    /// after [`BODY_IDLE`], and what arrived was written.
    #[tokio::test(start_paused = true)]
    async fn a_stalled_body_times_out() {
        let vfs = strata_vfs::testing::memory_vfs().await;
        let ctx = strata_vfs::Ctx::root();
        let (_, fh) = vfs
            .create(&ctx, strata_types::Ino::ROOT, b"slow", 0o644)
            .await
            .unwrap();
        let first = futures::stream::iter([Ok::<_, Never>(Bytes::from_static(b"first"))]);
        let stalled = first.chain(futures::stream::pending());
        let started = tokio::time::Instant::now();
        let result = write_body(
            &vfs,
            fh,
            Some(StreamingBlob::wrap(stalled)),
            &Expected::default(),
            None,
            1 << 20,
        )
        .await;
        let err = result.unwrap_err();
        assert_eq!(*err.code(), S3ErrorCode::RequestTimeout);
        assert!(started.elapsed() >= BODY_IDLE);
        vfs.release(fh).await.unwrap();
    }

    /// A body beyond the limit ends with EntityTooLarge as soon as it crosses it.
    #[tokio::test]
    async fn a_body_over_the_limit_is_entity_too_large() {
        let vfs = strata_vfs::testing::memory_vfs().await;
        let ctx = strata_vfs::Ctx::root();
        let (_, fh) = vfs
            .create(&ctx, strata_types::Ino::ROOT, b"big", 0o644)
            .await
            .unwrap();
        let pieces = (0..4).map(|_| Ok::<_, Never>(Bytes::from_static(b"0123456789")));
        let result = write_body(
            &vfs,
            fh,
            Some(StreamingBlob::wrap(futures::stream::iter(pieces))),
            &Expected::default(),
            None,
            25,
        )
        .await;
        assert_eq!(*result.unwrap_err().code(), S3ErrorCode::EntityTooLarge);
        vfs.release(fh).await.unwrap();
    }

    /// Digests are checked: a wrong Content-MD5 is BadDigest, the right one passes.
    #[tokio::test]
    async fn content_md5_is_verified() {
        let vfs = strata_vfs::testing::memory_vfs().await;
        let ctx = strata_vfs::Ctx::root();
        for (md5, ok) in [
            ("kAFQmDzST7DWlj99KOF/cg==", true),
            ("AAAAAAAAAAAAAAAAAAAAAA==", false),
        ] {
            let (_, fh) = vfs
                .create(
                    &ctx,
                    strata_types::Ino::ROOT,
                    if ok { b"good" } else { b"bad_" },
                    0o644,
                )
                .await
                .unwrap();
            let body = futures::stream::iter([Ok::<_, Never>(Bytes::from_static(b"abc"))]);
            let expected = Expected {
                md5: Some(md5.into()),
                ..Expected::default()
            };
            let result = write_body(
                &vfs,
                fh,
                Some(StreamingBlob::wrap(body)),
                &expected,
                None,
                1 << 20,
            )
            .await;
            match result {
                Ok(written) => assert!(ok && written.size == 3),
                Err(e) => assert!(!ok && *e.code() == S3ErrorCode::BadDigest),
            }
            vfs.release(fh).await.unwrap();
        }
    }
}
