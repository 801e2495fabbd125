//! Multipart uploads, kept in the volume so any gateway process can continue one: an
//! upload is a directory `.strata-s3/uploads/ID` whose xattr records the bucket, key and
//! headers; each part is a file named by its number with its own record (ETag,
//! checksums). Completing shares the parts' slices into one new file (no data copied),
//! renames it into place and removes the upload; completing again answers the same ETag.

use md5::{Digest, Md5};
use s3s::dto::{
    CopyPartResult, CreateMultipartUploadInput, CreateMultipartUploadOutput, ETag, Timestamp,
    UploadPartCopyInput, UploadPartCopyOutput, UploadPartInput, UploadPartOutput,
};
use s3s::{S3Error, S3ErrorCode, S3Request, S3Response, S3Result};
use serde::{Deserialize, Serialize};
use strata_types::{Errno, Ino};

use crate::Gateway;
use crate::body::Expected;
use crate::error::fs_error;
use crate::keys::parse_key;
use crate::lock::{LockHeaders, LockRequest};
use crate::objects::{TempFile, headers_of};
use crate::objinfo::{Checksums, Headers, ObjectInfo, hex, md5_of_etag};
use crate::paths::DIR_MODE;
use crate::read::Conditions;
use checksum::UploadChecksum;

/// The xattr of an upload's directory.
const UPLOAD_XATTR: &[u8] = b"user.s3.upload";
/// Smallest part but the last (S3's limit).
pub const MIN_PART: u64 = 5 << 20;
/// Largest part (S3's limit).
pub const MAX_PART: u64 = 5 << 30;
pub use crate::objinfo::MAX_PARTS;

/// What an upload's directory records.
#[derive(Debug, Default, Serialize, Deserialize)]
struct UploadInfo {
    version: u32,
    bucket: String,
    key: String,
    /// When it started (ns since the epoch).
    started: i64,
    #[serde(default)]
    headers: Headers,
    #[serde(default)]
    meta: std::collections::BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    tags: crate::objinfo::Tags,
    /// The object's ACL from `x-amz-acl` (`AccessControlPolicy` XML).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    acl: Option<String>,
    /// The object lock its headers asked for.
    #[serde(default, skip_serializing_if = "LockRequest::is_empty")]
    lock: LockRequest,
    /// The checksum algorithm and type it was created with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    checksum: Option<UploadChecksum>,
}

/// An upload found by its ID.
struct Upload {
    dir: Ino,
    info: UploadInfo,
}

fn no_such_upload(id: &str) -> S3Error {
    S3Error::with_message(
        S3ErrorCode::NoSuchUpload,
        format!("no such upload: {id} (it may have been completed or aborted)"),
    )
}

fn part_name(n: i32) -> S3Result<String> {
    if !(1..=MAX_PARTS).contains(&n) {
        return Err(S3Error::with_message(
            S3ErrorCode::InvalidArgument,
            format!("part numbers run from 1 to {MAX_PARTS}"),
        ));
    }
    Ok(n.to_string())
}

impl Gateway {
    async fn upload(&self, bucket: &str, key: &str, id: &str) -> S3Result<Upload> {
        if id.len() != 32 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(no_such_upload(id));
        }
        let uploads = self.hidden_dir("uploads").await?;
        let entry = match self.lookup(uploads, id).await {
            Ok(entry) => entry,
            Err(Errno::ENOENT) => return Err(no_such_upload(id)),
            Err(e) => return Err(fs_error(e, key)),
        };
        let value = self
            .vfs
            .getxattr(&self.server_ctx, entry.ino, UPLOAD_XATTR, 0)
            .await
            .map_err(|_| no_such_upload(id))?;
        let info: UploadInfo = serde_json::from_slice(&value).map_err(|_| no_such_upload(id))?;
        if info.bucket != bucket || info.key != key {
            return Err(no_such_upload(id));
        }
        Ok(Upload {
            dir: entry.ino,
            info,
        })
    }

    pub(crate) async fn create_multipart_upload(
        &self,
        req: S3Request<CreateMultipartUploadInput>,
    ) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
        let input = req.input;
        let path = parse_key(&input.key)?;
        if path.is_dir() {
            return Err(fs_error(Errno::EISDIR, &input.key));
        }
        let bucket_dir = self.bucket_dir(&input.bucket).await?;
        let lock = LockHeaders {
            mode: input.object_lock_mode.as_ref(),
            until: input.object_lock_retain_until_date.as_ref(),
            hold: input.object_lock_legal_hold_status.as_ref(),
        }
        .request()?;
        // Refused now, not at completion, on a bucket without object lock.
        self.new_lock(bucket_dir, &lock).await?;
        let checksum = UploadChecksum::for_create(
            input.checksum_algorithm.as_ref(),
            input.checksum_type.as_ref(),
        )?;
        let uploads = self.hidden_dir("uploads").await?;
        let id = uuid::Uuid::new_v4().simple().to_string();
        let info = UploadInfo {
            version: 1,
            bucket: input.bucket.clone(),
            key: input.key.clone(),
            started: crate::clock::now_ns(),
            headers: headers_of(
                input.content_type,
                input.cache_control,
                input.content_disposition,
                input.content_encoding,
                input.content_language,
                input.expires,
            ),
            meta: input.metadata.unwrap_or_default().into_iter().collect(),
            tags: match &input.tagging {
                Some(header) => crate::tags::parse_tag_header(header)?,
                None => Vec::new(),
            },
            acl: self
                .object_acl_for_put(&input.bucket, input.acl.as_ref())
                .await?
                .map(|xml| String::from_utf8_lossy(&xml).into_owned()),
            lock,
            checksum,
        };
        let dir = self
            .vfs
            .mkdir(self.ctx(), uploads, id.as_bytes(), DIR_MODE)
            .await
            .map_err(|e| fs_error(e, &input.key))?;
        let value = serde_json::to_vec(&info).unwrap_or_default();
        if let Err(e) = self
            .vfs
            .setxattr(self.ctx(), dir.ino, UPLOAD_XATTR, &value, 0)
            .await
        {
            let _ = self.vfs.rmdir(self.ctx(), uploads, id.as_bytes()).await;
            return Err(fs_error(e, &input.key));
        }
        let output = CreateMultipartUploadOutput {
            bucket: Some(input.bucket),
            key: Some(input.key),
            upload_id: Some(id),
            checksum_algorithm: checksum.map(UploadChecksum::algorithm_dto),
            checksum_type: checksum.map(UploadChecksum::kind_dto),
            ..CreateMultipartUploadOutput::default()
        };
        Ok(S3Response::new(output))
    }

    pub(crate) async fn upload_part(
        &self,
        req: S3Request<UploadPartInput>,
    ) -> S3Result<S3Response<UploadPartOutput>> {
        let trailers = req.trailing_headers.clone();
        let i = &req.input;
        let sums = [
            i.checksum_crc32.clone(),
            i.checksum_crc32c.clone(),
            i.checksum_crc64nvme.clone(),
            i.checksum_sha1.clone(),
            i.checksum_sha256.clone(),
        ];
        let mut expected = Expected::new(i.content_md5.clone(), sums, &req.headers);
        let input = req.input;
        let name = part_name(input.part_number)?;
        let upload = self
            .upload(&input.bucket, &input.key, &input.upload_id)
            .await?;
        if let Some(checksum) = upload.info.checksum {
            // Parts of a checksum upload carry its checksum: computed when not sent.
            checksum.check_part_algorithms(&expected.named_algorithms())?;
            expected.also_compute(checksum.algorithm.name());
        }
        let (temp, written) = self
            .upload_body(input.body, &expected, trailers.as_ref(), MAX_PART)
            .await?;
        let mut info = ObjectInfo {
            etag: hex(&written.md5),
            checksums: written.checksums.clone(),
            ..ObjectInfo::default()
        };
        self.place_part(&temp, upload.dir, &name, &input.key, &mut info)
            .await?;
        let c = written.checksums;
        let output = UploadPartOutput {
            e_tag: Some(ETag::Strong(info.etag)),
            checksum_crc32: c.crc32,
            checksum_crc32c: c.crc32c,
            checksum_crc64nvme: c.crc64nvme,
            checksum_sha1: c.sha1,
            checksum_sha256: c.sha256,
            ..UploadPartOutput::default()
        };
        Ok(S3Response::new(output))
    }

    pub(crate) async fn upload_part_copy(
        &self,
        req: S3Request<UploadPartCopyInput>,
    ) -> S3Result<S3Response<UploadPartCopyOutput>> {
        let input = req.input;
        let name = part_name(input.part_number)?;
        let upload = self
            .upload(&input.bucket, &input.key, &input.upload_id)
            .await?;
        let conditions = Conditions::new(
            input.copy_source_if_match.as_ref(),
            input.copy_source_if_none_match.as_ref(),
            input.copy_source_if_modified_since.as_ref(),
            input.copy_source_if_unmodified_since.as_ref(),
        );
        let source = self.copy_source(&input.copy_source, conditions).await?;
        let size = source.size();
        let range = match &input.copy_source_range {
            Some(text) => copy_range(text, size)?,
            None => 0..size,
        };
        // The part's ETag is the MD5 of its bytes: the source's own when the whole of
        // an object with an MD5 ETag is copied, else computed by reading the range.
        let whole_md5 = (range == (0..size))
            .then(|| md5_of_etag(&source.etag()))
            .flatten();
        let algorithm = upload.info.checksum.map(|c| c.algorithm);
        let (md5, checksums) = match (whole_md5, algorithm) {
            (Some(md5), None) => (md5, Checksums::default()),
            _ => {
                self.digest_range(source.ino, range.clone(), algorithm)
                    .await?
            }
        };
        let (temp, fh) = self.temp_file().await?;
        let copied = self
            .share_range(source.ino, range.start, range.end - range.start, fh, 0)
            .await;
        self.finish_temp(&temp, fh, copied).await?;
        let mut info = ObjectInfo {
            etag: hex(&md5),
            checksums: checksums.clone(),
            ..ObjectInfo::default()
        };
        self.place_part(&temp, upload.dir, &name, &input.key, &mut info)
            .await?;
        let result = CopyPartResult {
            e_tag: Some(ETag::Strong(info.etag)),
            checksum_crc32: checksums.crc32,
            checksum_crc32c: checksums.crc32c,
            checksum_crc64nvme: checksums.crc64nvme,
            checksum_sha1: checksums.sha1,
            checksum_sha256: checksums.sha256,
            last_modified: Some(Timestamp::from(std::time::SystemTime::now())),
        };
        Ok(S3Response::new(UploadPartCopyOutput {
            copy_part_result: Some(result),
            ..UploadPartCopyOutput::default()
        }))
    }

    /// MD5 of `range` of file `ino`, and its checksum by `algorithm`, read through the
    /// VFS.
    async fn digest_range(
        &self,
        ino: Ino,
        range: std::ops::Range<u64>,
        algorithm: Option<checksum::Algorithm>,
    ) -> S3Result<([u8; 16], Checksums)> {
        let (fh, _) = self
            .vfs
            .open(self.ctx(), ino, 0)
            .await
            .map_err(|e| fs_error(e, "copy source"))?;
        let mut md5 = Md5::new();
        let mut sums = algorithm.map(checksum::Algorithm::hasher);
        let mut off = range.start;
        let mut result = Ok(());
        while off < range.end {
            let want = u32::try_from((range.end - off).min(1 << 20)).unwrap_or(1 << 20);
            match self.vfs.read(fh, off, want).await {
                Ok(data) if data.is_empty() => {
                    result = Err(fs_error(Errno::EIO, "copy source (shorter than expected)"));
                    break;
                }
                Ok(data) => {
                    md5.update(&data);
                    if let Some(h) = sums.as_mut() {
                        h.update(&data);
                    }
                    off += u64::try_from(data.len()).unwrap_or(0);
                }
                Err(e) => {
                    result = Err(fs_error(e, "copy source"));
                    break;
                }
            }
        }
        if let Err(e) = self.vfs.release(fh).await {
            tracing::warn!("closing a copy source: errno {e}");
        }
        result?;
        let checksums = match (algorithm, sums) {
            (Some(a), Some(h)) => a
                .computed(&h.finalize())
                .map(|v| a.only(v, None))
                .unwrap_or_default(),
            _ => Checksums::default(),
        };
        Ok((md5.finalize().into(), checksums))
    }
}

impl Gateway {
    /// Make a closed temporary file part `name` of the upload in `dir` (replacing an
    /// earlier upload of that part); the temporary file is gone afterwards either way.
    async fn place_part(
        &self,
        temp: &TempFile,
        dir: Ino,
        name: &str,
        key: &str,
        info: &mut ObjectInfo,
    ) -> S3Result<()> {
        let placed = async {
            self.record(temp, key, info).await?;
            self.rename_into(temp, dir, name, key, crate::objects::Replace::Any)
                .await
        };
        let placed = placed.await;
        if placed.is_err() {
            self.discard(temp).await;
        }
        placed
    }
}

/// `bytes=first-last` of a part copy, checked against the source's size.
fn copy_range(text: &str, size: u64) -> S3Result<std::ops::Range<u64>> {
    let bad = || {
        S3Error::with_message(
            S3ErrorCode::InvalidArgument,
            format!("invalid x-amz-copy-source-range: {text}"),
        )
    };
    let spec = text.strip_prefix("bytes=").ok_or_else(bad)?;
    let (first, last) = spec.split_once('-').ok_or_else(bad)?;
    let first: u64 = first.parse().map_err(|_| bad())?;
    let last: u64 = last.parse().map_err(|_| bad())?;
    if first > last || last >= size {
        return Err(S3Error::with_message(
            S3ErrorCode::InvalidRange,
            format!("the range {text} is not within the source's {size} bytes"),
        ));
    }
    Ok(first..last + 1)
}

mod checksum;
mod complete;
mod crc;
