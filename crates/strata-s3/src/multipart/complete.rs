//! Finishing multipart uploads: Complete (parts checked, their slices shared into one
//! file, the upload removed), Abort, ListParts and ListMultipartUploads.

use futures::StreamExt;
use s3s::dto::{
    AbortMultipartUploadInput, AbortMultipartUploadOutput, ChecksumType,
    CompleteMultipartUploadInput, CompleteMultipartUploadOutput, ETag, ListMultipartUploadsInput,
    ListMultipartUploadsOutput, ListPartsInput, ListPartsOutput, MultipartUpload, Part, Timestamp,
};
use s3s::{S3Error, S3ErrorCode, S3Request, S3Response, S3Result};
use strata_types::{Attr, Ino};

use super::checksum::{PartSum, UploadChecksum, object_checksum};
use super::{MAX_PARTS, MIN_PART, Upload, UploadInfo};
use crate::Gateway;
use crate::keys::parse_key;
use crate::objects::Replace;
use crate::objinfo::{Checksums, ObjectInfo, md5_of_etag, multipart_etag};
use crate::read::system_time;

/// Parts' records read at once.
const PARALLEL: usize = 16;

/// One stored part.
#[derive(Debug)]
pub(crate) struct PartRecord {
    pub number: i32,
    pub ino: Ino,
    pub attr: Attr,
    pub info: Option<ObjectInfo>,
}

impl PartRecord {
    fn etag(&self) -> Option<&str> {
        self.info.as_ref().map(|i| i.etag.as_str())
    }
}

impl Gateway {
    /// The parts of an upload, by number (every one: at most 10,000).
    async fn parts(&self, upload: &Upload) -> S3Result<Vec<PartRecord>> {
        let entries = self.entries(upload.dir, &upload.info.key).await?;
        // Records are read PARALLEL at a time (a Complete may name 10,000 parts).
        let parts: Vec<Option<PartRecord>> = futures::stream::iter(entries)
            .map(|e| async move {
                let number: i32 = std::str::from_utf8(&e.name).ok()?.parse().ok()?;
                let attr = e.attr?;
                let info = self.load_info(e.ino, &attr).await;
                Some(PartRecord {
                    number,
                    ino: e.ino,
                    attr,
                    info,
                })
            })
            .buffered(PARALLEL)
            .collect()
            .await;
        let mut parts: Vec<PartRecord> = parts.into_iter().flatten().collect();
        parts.sort_by_key(|p| p.number);
        Ok(parts)
    }

    pub(crate) async fn complete_multipart_upload(
        &self,
        req: S3Request<CompleteMultipartUploadInput>,
    ) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
        let input = req.input;
        let asked: Vec<(i32, String)> = input
            .multipart_upload
            .as_ref()
            .and_then(|m| m.parts.as_ref())
            .map(|parts| {
                parts
                    .iter()
                    .map(|p| {
                        (
                            p.part_number.unwrap_or(0),
                            p.e_tag
                                .as_ref()
                                .map(|t| t.value().to_owned())
                                .unwrap_or_default(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        if asked.is_empty() {
            return Err(S3Error::with_message(
                S3ErrorCode::MalformedXML,
                "the upload names no parts",
            ));
        }
        if asked.windows(2).any(|w| w[0].0 >= w[1].0) {
            return Err(S3Error::with_message(
                S3ErrorCode::InvalidPartOrder,
                "parts must be listed in ascending order",
            ));
        }
        let md5s: Vec<[u8; 16]> = asked
            .iter()
            .filter_map(|(_, etag)| md5_of_etag(etag))
            .collect();
        let upload = match self
            .upload(&input.bucket, &input.key, &input.upload_id)
            .await
        {
            Ok(upload) => upload,
            Err(e) if *e.code() == S3ErrorCode::NoSuchUpload && md5s.len() == asked.len() => {
                // Completed already (by this or another gateway): the same answer again.
                return self
                    .completed_before(&input.bucket, &input.key, &multipart_etag(&md5s), e)
                    .await;
            }
            Err(e) => return Err(e),
        };
        if input.if_none_match.as_ref().is_some_and(|c| !c.is_any()) {
            return Err(S3Error::with_message(
                S3ErrorCode::NotImplemented,
                "If-None-Match takes only *",
            ));
        }
        let mut replace = match input.if_none_match {
            Some(_) => Replace::Nothing,
            None => Replace::Any,
        };
        if let Some(cond) = &input.if_match {
            replace = Replace::Only(self.check_current(&input.bucket, &input.key, cond).await?);
        }
        let stored = self.parts(&upload).await?;
        let chosen = choose_parts(&asked, &stored)?;
        let total: u64 = chosen.iter().map(|p| p.attr.length).sum();
        if let Some(size) = input.mpu_object_size
            && u64::try_from(size).ok() != Some(total)
        {
            return Err(S3Error::with_message(
                S3ErrorCode::InvalidRequest,
                format!(
                    "The provided 'x-amz-mp-object-size' header value {size} does not match what was computed: {total}"
                ),
            ));
        }
        let (checksums, part_checksums) = match upload.info.checksum {
            Some(upload_sum) => completed_checksum(upload_sum, &input, &chosen)?,
            None => (Checksums::default(), Vec::new()),
        };
        let path = parse_key(&input.key)?;
        let bucket_dir = self.bucket_dir(&input.bucket).await?;
        let (mut temp, fh) = self.temp_file().await?;
        temp.acl = upload.info.acl.clone().map(String::into_bytes);
        temp.lock = upload.info.lock.clone();
        let joined = self.join_parts(&chosen, fh).await;
        self.finish_temp(&temp, fh, joined).await?;
        let etag = multipart_etag(&md5s);
        let mut info = ObjectInfo {
            etag: etag.clone(),
            headers: upload.info.headers.clone(),
            meta: upload.info.meta.clone(),
            tags: upload.info.tags.clone(),
            checksums: checksums.clone(),
            parts: u32::try_from(chosen.len()).ok(),
            part_sizes: chosen.iter().map(|p| p.attr.length).collect(),
            part_checksums,
            ..ObjectInfo::default()
        };
        self.install(&temp, bucket_dir, &path, &input.key, &mut info, replace)
            .await?;
        self.remove_upload(&upload, &input.upload_id).await;
        let output = completed(&input.bucket, &input.key, etag, info.version_id, checksums);
        Ok(S3Response::new(output))
    }

    /// A Complete repeated after success: the object must be the one it made.
    async fn completed_before(
        &self,
        bucket: &str,
        key: &str,
        etag: &str,
        missing: S3Error,
    ) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
        match self.find(bucket, key).await {
            Ok(found) if found.etag() == etag => {
                let c = found.info.map(|i| i.checksums).unwrap_or_default();
                let output = completed(bucket, key, etag.to_owned(), found.version_id, c);
                Ok(S3Response::new(output))
            }
            _ => Err(missing),
        }
    }

    /// Share each part's slices into the open file `fh`, one after another.
    async fn join_parts(&self, parts: &[&PartRecord], fh: u64) -> S3Result<()> {
        let mut off = 0;
        for part in parts {
            self.share_range(part.ino, 0, part.attr.length, fh, off)
                .await?;
            off += part.attr.length;
        }
        Ok(())
    }

    /// Remove an upload's parts and directory.
    async fn remove_upload(&self, upload: &Upload, id: &str) {
        // Only the names: no part's record is needed to remove it.
        let names: Vec<String> = match self.entries(upload.dir, id).await {
            Ok(entries) => entries
                .into_iter()
                .filter_map(|e| String::from_utf8(e.name).ok())
                .collect(),
            Err(_) => Vec::new(),
        };
        for name in names {
            if let Err(e) = self
                .vfs
                .unlink(self.ctx(), upload.dir, name.as_bytes())
                .await
            {
                tracing::warn!("removing part {name} of upload {id}: errno {e}");
            }
        }
        if let Ok(uploads) = self.hidden_dir("uploads").await
            && let Err(e) = self.vfs.rmdir(self.ctx(), uploads, id.as_bytes()).await
        {
            tracing::warn!("removing upload {id}: errno {e}");
        }
    }

    pub(crate) async fn abort_multipart_upload(
        &self,
        req: S3Request<AbortMultipartUploadInput>,
    ) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
        let input = req.input;
        let upload = self
            .upload(&input.bucket, &input.key, &input.upload_id)
            .await?;
        self.remove_upload(&upload, &input.upload_id).await;
        Ok(S3Response::new(AbortMultipartUploadOutput::default()))
    }

    pub(crate) async fn list_parts(
        &self,
        req: S3Request<ListPartsInput>,
    ) -> S3Result<S3Response<ListPartsOutput>> {
        let input = req.input;
        let upload = self
            .upload(&input.bucket, &input.key, &input.upload_id)
            .await?;
        let marker = input.part_number_marker.unwrap_or(0);
        let max = input.max_parts.unwrap_or(1000).clamp(0, 1000);
        let parts = self.parts(&upload).await?;
        let after: Vec<&PartRecord> = parts.iter().filter(|p| p.number > marker).collect();
        let max_len = usize::try_from(max).unwrap_or(0);
        let truncated = after.len() > max_len;
        let page: Vec<Part> = after
            .iter()
            .take(max_len)
            .map(|p| Part {
                part_number: Some(p.number),
                size: Some(i64::try_from(p.attr.length).unwrap_or(i64::MAX)),
                e_tag: p.etag().map(|e| ETag::Strong(e.to_owned())),
                last_modified: Some(Timestamp::from(system_time(p.attr.mtime))),
                checksum_crc32: p.info.as_ref().and_then(|i| i.checksums.crc32.clone()),
                checksum_crc32c: p.info.as_ref().and_then(|i| i.checksums.crc32c.clone()),
                checksum_crc64nvme: p.info.as_ref().and_then(|i| i.checksums.crc64nvme.clone()),
                checksum_sha1: p.info.as_ref().and_then(|i| i.checksums.sha1.clone()),
                checksum_sha256: p.info.as_ref().and_then(|i| i.checksums.sha256.clone()),
            })
            .collect();
        let output = ListPartsOutput {
            bucket: Some(input.bucket),
            key: Some(input.key),
            upload_id: Some(input.upload_id),
            part_number_marker: Some(marker),
            next_part_number_marker: page.last().and_then(|p| p.part_number),
            max_parts: Some(max),
            is_truncated: Some(truncated),
            parts: Some(page),
            owner: Some(self.root_owner()),
            checksum_algorithm: upload.info.checksum.map(UploadChecksum::algorithm_dto),
            checksum_type: upload.info.checksum.map(UploadChecksum::kind_dto),
            ..ListPartsOutput::default()
        };
        Ok(S3Response::new(output))
    }

    pub(crate) async fn list_multipart_uploads(
        &self,
        req: S3Request<ListMultipartUploadsInput>,
    ) -> S3Result<S3Response<ListMultipartUploadsOutput>> {
        let input = req.input;
        self.bucket_dir(&input.bucket).await?;
        let uploads_dir = self.hidden_dir("uploads").await?;
        let prefix = input.prefix.clone().unwrap_or_default();
        let mut found: Vec<(String, i64, String, Option<UploadChecksum>)> = Vec::new();
        let entries = self.entries(uploads_dir, "uploads").await?;
        let infos: Vec<Option<(String, UploadInfo)>> = futures::stream::iter(entries)
            .map(|e| async move {
                let id = String::from_utf8(e.name).ok()?;
                let value = self
                    .vfs
                    .getxattr(&self.server_ctx, e.ino, super::UPLOAD_XATTR, 0)
                    .await
                    .ok()?;
                Some((id, serde_json::from_slice::<UploadInfo>(&value).ok()?))
            })
            .buffered(PARALLEL)
            .collect()
            .await;
        for (id, info) in infos.into_iter().flatten() {
            if info.bucket == input.bucket && info.key.starts_with(&prefix) {
                found.push((info.key, info.started, id, info.checksum));
            }
        }
        found.sort_by(|a, b| (&a.0, a.1, &a.2).cmp(&(&b.0, b.1, &b.2)));
        let key_marker = input.key_marker.clone().unwrap_or_default();
        let id_marker = input.upload_id_marker.clone().unwrap_or_default();
        let max = usize::try_from(input.max_uploads.unwrap_or(1000).clamp(0, 1000)).unwrap_or(0);
        let rest: Vec<&(String, i64, String, Option<UploadChecksum>)> = found
            .iter()
            .filter(|(key, _, id, _)| {
                key_marker.is_empty()
                    || *key > key_marker
                    || (*key == key_marker && !id_marker.is_empty() && *id > id_marker)
            })
            .collect();
        let truncated = rest.len() > max;
        let page: Vec<MultipartUpload> = rest
            .iter()
            .take(max)
            .map(|(key, started, id, checksum)| MultipartUpload {
                key: Some(key.clone()),
                upload_id: Some(id.clone()),
                initiated: Some(Timestamp::from(system_time(*started))),
                owner: Some(self.root_owner()),
                storage_class: Some("STANDARD".to_owned().into()),
                checksum_algorithm: checksum.map(UploadChecksum::algorithm_dto),
                checksum_type: checksum.map(UploadChecksum::kind_dto),
                ..MultipartUpload::default()
            })
            .collect();
        let last = page.last().map(|u| (u.key.clone(), u.upload_id.clone()));
        let output = ListMultipartUploadsOutput {
            bucket: Some(input.bucket),
            prefix: input.prefix,
            key_marker: input.key_marker,
            upload_id_marker: input.upload_id_marker,
            max_uploads: Some(i32::try_from(max).unwrap_or(1000)),
            is_truncated: Some(truncated),
            next_key_marker: last
                .as_ref()
                .and_then(|l| l.0.clone())
                .filter(|_| truncated),
            next_upload_id_marker: last.and_then(|l| l.1).filter(|_| truncated),
            uploads: Some(page),
            ..ListMultipartUploadsOutput::default()
        };
        Ok(S3Response::new(output))
    }
}

/// The stored parts a Complete names, checked: each exists with the ETag given
/// (InvalidPart), all but the last are at least 5 MiB (EntityTooSmall).
fn choose_parts<'a>(
    asked: &[(i32, String)],
    stored: &'a [PartRecord],
) -> S3Result<Vec<&'a PartRecord>> {
    let mut chosen = Vec::with_capacity(asked.len());
    for (i, (number, etag)) in asked.iter().enumerate() {
        if !(1..=MAX_PARTS).contains(number) {
            return Err(invalid_part(*number));
        }
        let part = stored
            .binary_search_by_key(number, |p| p.number)
            .ok()
            .map(|at| &stored[at])
            .filter(|p| p.etag() == Some(etag.trim_matches('"')))
            .ok_or_else(|| invalid_part(*number))?;
        if i + 1 < asked.len() && part.attr.length < MIN_PART {
            return Err(S3Error::with_message(
                S3ErrorCode::EntityTooSmall,
                format!(
                    "part {number} is {} bytes; every part but the last must be at least 5 MiB",
                    part.attr.length
                ),
            ));
        }
        chosen.push(part);
    }
    Ok(chosen)
}

/// CompleteMultipartUpload's answer.
fn completed(
    bucket: &str,
    key: &str,
    etag: String,
    version_id: Option<String>,
    c: Checksums,
) -> CompleteMultipartUploadOutput {
    CompleteMultipartUploadOutput {
        bucket: Some(bucket.to_owned()),
        key: Some(key.to_owned()),
        e_tag: Some(ETag::Strong(etag)),
        location: Some(format!("/{bucket}/{key}")),
        version_id,
        checksum_crc32: c.crc32,
        checksum_crc32c: c.crc32c,
        checksum_crc64nvme: c.crc64nvme,
        checksum_sha1: c.sha1,
        checksum_sha256: c.sha256,
        checksum_type: c.kind.map(ChecksumType::from),
        ..CompleteMultipartUploadOutput::default()
    }
}

/// The object's checksum and its parts', for an upload created with a checksum.
fn completed_checksum(
    upload: UploadChecksum,
    input: &CompleteMultipartUploadInput,
    chosen: &[&PartRecord],
) -> S3Result<(Checksums, Vec<String>)> {
    let asked = input
        .multipart_upload
        .as_ref()
        .and_then(|m| m.parts.as_deref())
        .unwrap_or_default();
    let sums: Vec<PartSum<'_>> = chosen
        .iter()
        .zip(asked)
        .map(|(part, asked)| PartSum {
            number: part.number,
            stored: part
                .info
                .as_ref()
                .and_then(|i| upload.algorithm.get(&i.checksums)),
            length: part.attr.length,
            asked,
        })
        .collect();
    let whole = Checksums {
        crc32: input.checksum_crc32.clone(),
        crc32c: input.checksum_crc32c.clone(),
        crc64nvme: input.checksum_crc64nvme.clone(),
        sha1: input.checksum_sha1.clone(),
        sha256: input.checksum_sha256.clone(),
        kind: None,
    };
    object_checksum(upload, &sums, upload.algorithm.get(&whole))
}

fn invalid_part(number: i32) -> S3Error {
    S3Error::with_message(
        S3ErrorCode::InvalidPart,
        format!("part {number} was not uploaded, or its ETag does not match"),
    )
}
