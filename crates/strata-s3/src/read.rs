//! Finding an object and serving GET and HEAD: conditional requests (If-Match,
//! If-None-Match, If-(Un)Modified-Since), byte ranges, `partNumber`, the stored headers,
//! metadata and checksums.

use s3s::dto::{
    ChecksumType, CopySource, ETag, ETagCondition, GetObjectInput, GetObjectOutput,
    HeadObjectInput, HeadObjectOutput, Metadata, Range, Timestamp,
};
use s3s::{S3Error, S3ErrorCode, S3Request, S3Response, S3Result};
use strata_types::{Attr, Errno, FileType, Ino};

use crate::Gateway;
use crate::body::read_body;
pub use crate::clock::system_time;
use crate::error::fs_error;
use crate::keys::parse_key;
use crate::objinfo::{Checksums, MAX_PARTS, ObjectInfo, derived_etag};

/// MD5 of nothing: the ETag of a directory key.
pub const EMPTY_ETAG: &str = "d41d8cd98f00b204e9800998ecf8427e";
/// Content-Type of objects stored without one (AWS's default).
pub const DEFAULT_TYPE: &str = "binary/octet-stream";

/// An object found by key.
#[derive(Debug)]
pub struct Found {
    pub ino: Ino,
    pub attr: Attr,
    /// Its record, if it still describes the file.
    pub info: Option<ObjectInfo>,
    /// A directory key (`a/b/`).
    pub is_dir: bool,
    /// The version id its record names (`None`: the null version).
    pub version_id: Option<String>,
}

impl Found {
    /// A regular file and its record as stored (kept as `info` only while it holds).
    pub fn file(entry: strata_vfs::Entry, record: Option<ObjectInfo>) -> Found {
        Found {
            ino: entry.ino,
            version_id: record.as_ref().and_then(|r| r.version_id.clone()),
            info: record.filter(|r| r.holds_for(&entry.attr)),
            attr: entry.attr,
            is_dir: false,
        }
    }

    pub fn etag(&self) -> String {
        match (&self.info, self.is_dir) {
            (Some(info), _) => info.etag.clone(),
            (None, true) => EMPTY_ETAG.into(),
            (None, false) => derived_etag(self.ino, &self.attr),
        }
    }

    pub fn size(&self) -> u64 {
        if self.is_dir { 0 } else { self.attr.length }
    }

    pub fn modified(&self) -> Timestamp {
        Timestamp::from(system_time(self.attr.mtime))
    }
}

/// Nanoseconds since the epoch as a time.
impl Gateway {
    /// The object at `key` in `bucket`, or NoSuchKey (a file key naming a directory, a
    /// directory key naming a file, and keys under a file do not exist).
    pub(crate) async fn find(&self, bucket: &str, key: &str) -> S3Result<Found> {
        let path = parse_key(key)?;
        let bucket_dir = self.bucket_dir(bucket).await?;
        let missing = |e: Errno| match e {
            Errno::ENOENT | Errno::ENOTDIR => no_such_key(key),
            e => fs_error(e, key),
        };
        let Some(name) = path.name else {
            let dir = self.walk(bucket_dir, &path.dirs).await.map_err(missing)?;
            let attr = self.vfs.getattr(dir).await.map_err(missing)?;
            return Ok(Found {
                ino: dir,
                attr,
                info: None,
                is_dir: true,
                version_id: None,
            });
        };
        // The whole key through the path walker: a symlink at its end is followed, as
        // reading the file at that path does.
        let key_path = format!(
            "{}{name}",
            path.dirs
                .iter()
                .map(|d| format!("{d}/"))
                .collect::<String>()
        );
        let found = self
            .vfs
            .resolve(self.ctx(), Self::key_walk(bucket_dir), key_path.as_bytes())
            .await
            .map_err(missing)?;
        let attr = match found.attr {
            Some(attr) => attr,
            None => self.vfs.getattr(found.ino).await.map_err(missing)?,
        };
        let entry = strata_vfs::Entry {
            ino: found.ino,
            attr,
        };
        if entry.attr.kind != FileType::Regular {
            return Err(no_such_key(key));
        }
        let record = self.load_record(entry.ino, &entry.attr).await;
        Ok(Found::file(entry, record))
    }

    /// The record of a file, if it has one that still holds.
    pub(crate) async fn load_info(&self, ino: Ino, attr: &Attr) -> Option<ObjectInfo> {
        self.load_record(ino, attr)
            .await
            .filter(|info| info.holds_for(attr))
    }

    /// The object a read names: the key's current one, or the version asked for. A key
    /// that is missing answers NoSuchKey, with a delete marker's headers if it has one.
    pub(crate) async fn find_for_read(
        &self,
        bucket: &str,
        key: &str,
        version_id: Option<&str>,
    ) -> S3Result<Found> {
        if let Some(id) = version_id {
            return self.find_version(bucket, key, id).await;
        }
        match self.find(bucket, key).await {
            Err(e) if *e.code() == S3ErrorCode::NoSuchKey => {
                Err(self.missing_key(bucket, key).await)
            }
            other => other,
        }
    }

    /// The object a GET or HEAD reads, its conditions checked, and the byte range and
    /// part count asked for.
    async fn read_target(
        &self,
        bucket: &str,
        key: &str,
        conditions: Conditions<'_>,
        range: Option<&Range>,
        (part_number, version_id): (Option<i32>, Option<&str>),
    ) -> S3Result<(Found, Selection)> {
        let found = self.find_for_read(bucket, key, version_id).await?;
        conditions.check(&found)?;
        let selection = byte_range(&found, range, part_number)?;
        Ok((found, selection))
    }

    pub(crate) async fn get_object(
        &self,
        req: S3Request<GetObjectInput>,
    ) -> S3Result<S3Response<GetObjectOutput>> {
        let input = req.input;
        let conditions = Conditions::new(
            input.if_match.as_ref(),
            input.if_none_match.as_ref(),
            input.if_modified_since.as_ref(),
            input.if_unmodified_since.as_ref(),
        );
        let (found, selection) = self
            .read_target(
                &input.bucket,
                &input.key,
                conditions,
                input.range.as_ref(),
                (input.part_number, input.version_id.as_deref()),
            )
            .await?;
        let size = found.size();
        let head = head_output(&found, &selection, input.checksum_mode.is_some());
        let (range, parts) = (selection.range, selection.parts_count);
        let (start, end) = range.clone().map_or((0, size), |r| (r.start, r.end));
        let body = if found.is_dir || start == end {
            None
        } else {
            let (fh, _) = self
                .vfs
                .open(self.ctx(), found.ino, 0)
                .await
                .map_err(|e| fs_error(e, &input.key))?;
            Some(read_body(self.vfs.clone(), fh, start, end))
        };
        let output = GetObjectOutput {
            body,
            content_length: Some(i64::try_from(end - start).unwrap_or(i64::MAX)),
            content_range: range
                .map(|r| format!("bytes {}-{}/{size}", r.start, r.end.saturating_sub(1))),
            accept_ranges: Some("bytes".into()),
            e_tag: head.e_tag,
            last_modified: head.last_modified,
            content_type: head.content_type,
            cache_control: head.cache_control,
            content_disposition: head.content_disposition,
            content_encoding: head.content_encoding,
            content_language: head.content_language,
            expires: head.expires,
            metadata: head.metadata,
            checksum_crc32: head.checksum_crc32,
            checksum_crc32c: head.checksum_crc32c,
            checksum_crc64nvme: head.checksum_crc64nvme,
            checksum_sha1: head.checksum_sha1,
            checksum_sha256: head.checksum_sha256,
            checksum_type: head.checksum_type,
            parts_count: parts,
            version_id: head.version_id.or_else(|| input.version_id.clone()),
            object_lock_mode: head.object_lock_mode,
            object_lock_retain_until_date: head.object_lock_retain_until_date,
            object_lock_legal_hold_status: head.object_lock_legal_hold_status,
            tag_count: found
                .info
                .as_ref()
                .and_then(|i| i32::try_from(i.tags.len()).ok())
                .filter(|n| *n > 0),
            ..GetObjectOutput::default()
        };
        Ok(S3Response::new(output))
    }

    pub(crate) async fn head_object(
        &self,
        req: S3Request<HeadObjectInput>,
    ) -> S3Result<S3Response<HeadObjectOutput>> {
        let input = req.input;
        let conditions = Conditions::new(
            input.if_match.as_ref(),
            input.if_none_match.as_ref(),
            input.if_modified_since.as_ref(),
            input.if_unmodified_since.as_ref(),
        );
        let (found, selection) = self
            .read_target(
                &input.bucket,
                &input.key,
                conditions,
                input.range.as_ref(),
                (input.part_number, input.version_id.as_deref()),
            )
            .await?;
        let mut head = head_output(&found, &selection, input.checksum_mode.is_some());
        let (range, parts) = (selection.range, selection.parts_count);
        if let Some(r) = range {
            head.content_length = Some(i64::try_from(r.end - r.start).unwrap_or(i64::MAX));
        }
        head.parts_count = parts;
        head.version_id = head.version_id.or(input.version_id);
        Ok(S3Response::new(head))
    }
}

impl Gateway {
    /// The source of a copy, if its `x-amz-copy-source-if-*` conditions hold (each
    /// failure is PreconditionFailed).
    pub(crate) async fn copy_source(
        &self,
        source: &CopySource,
        conditions: Conditions<'_>,
    ) -> S3Result<Found> {
        let CopySource::Bucket {
            bucket,
            key,
            version_id,
        } = source
        else {
            return Err(S3Error::with_message(
                S3ErrorCode::InvalidArgument,
                "copy sources are bucket/key",
            ));
        };
        let found = self
            .find_for_read(bucket, key, version_id.as_deref())
            .await?;
        conditions.check_with(&found, S3ErrorCode::PreconditionFailed)?;
        Ok(found)
    }
}

pub fn no_such_key(key: &str) -> S3Error {
    S3Error::with_message(S3ErrorCode::NoSuchKey, format!("no such key: {key}"))
}

/// HEAD's answer for an object (GET adds its body) and the part or range selected, with
/// its checksums when `x-amz-checksum-mode` asked for them.
pub fn head_output(found: &Found, selection: &Selection, checksum_mode: bool) -> HeadObjectOutput {
    let lock = crate::lock::lock_fields(&found.attr);
    let info = found.info.clone().unwrap_or_default();
    let h = info.headers;
    let metadata: Option<Metadata> =
        (!info.meta.is_empty()).then(|| info.meta.into_iter().collect());
    let c = match checksum_mode {
        true => answered_checksums(found, selection),
        false => Checksums::default(),
    };
    let expires = h
        .expires
        .as_deref()
        .and_then(|t| Timestamp::parse(s3s::dto::TimestampFormat::HttpDate, t).ok());
    HeadObjectOutput {
        content_length: Some(i64::try_from(found.size()).unwrap_or(i64::MAX)),
        accept_ranges: Some("bytes".into()),
        e_tag: Some(ETag::Strong(found.etag())),
        last_modified: Some(found.modified()),
        content_type: Some(h.content_type.unwrap_or_else(|| DEFAULT_TYPE.into())),
        cache_control: h.cache_control,
        content_disposition: h.content_disposition,
        content_encoding: h.content_encoding,
        content_language: h.content_language,
        expires,
        metadata,
        checksum_type: c.kind.clone().map(ChecksumType::from),
        checksum_crc32: c.crc32,
        checksum_crc32c: c.crc32c,
        checksum_crc64nvme: c.crc64nvme,
        checksum_sha1: c.sha1,
        checksum_sha256: c.sha256,
        version_id: found.version_id.clone(),
        object_lock_mode: lock.0,
        object_lock_retain_until_date: lock.1,
        object_lock_legal_hold_status: lock.2,
        ..HeadObjectOutput::default()
    }
}

/// What a GET or HEAD reads: a byte range (`None` for the whole object) and, when a
/// part of a multipart object was asked for, the object's part count and the part's index.
#[derive(Debug, Default)]
pub struct Selection {
    pub range: Option<std::ops::Range<u64>>,
    pub parts_count: Option<i32>,
    pub part: Option<usize>,
}

/// The bytes a GET or HEAD asks for (`Range` or `partNumber`). Part 1 of an object not
/// uploaded in parts is the whole object; any other part of it is 400 InvalidPart, and a
/// part past a multipart object's last is 416 InvalidPartNumber, as S3 answers.
fn byte_range(
    found: &Found,
    range: Option<&Range>,
    part_number: Option<i32>,
) -> S3Result<Selection> {
    let size = found.size();
    let Some(n) = part_number else {
        return Ok(Selection {
            range: range.map(|r| r.check(size)).transpose()?,
            ..Selection::default()
        });
    };
    if range.is_some() {
        return Err(S3Error::with_message(
            S3ErrorCode::InvalidRequest,
            "Cannot specify both Range header and partNumber query parameter",
        ));
    }
    if !(1..=MAX_PARTS).contains(&n) {
        return Err(S3Error::with_message(
            S3ErrorCode::InvalidArgument,
            "Part number must be an integer between 1 and 10000, inclusive",
        ));
    }
    let sizes = found
        .info
        .as_ref()
        .map(|i| i.part_sizes.as_slice())
        .unwrap_or_default();
    if sizes.is_empty() {
        return match n {
            1 => Ok(Selection::default()),
            _ => Err(S3Error::with_message(
                S3ErrorCode::InvalidPart,
                format!("part {n} of an object not uploaded in parts: it has only part 1"),
            )),
        };
    }
    let index = usize::try_from(n)
        .ok()
        .filter(|i| *i <= sizes.len())
        .ok_or_else(|| {
            let mut e = S3Error::with_message(
                S3ErrorCode::Custom("InvalidPartNumber".into()),
                "The requested partnumber is not satisfiable",
            );
            e.set_status_code(hyper::StatusCode::RANGE_NOT_SATISFIABLE);
            e
        })?;
    let start: u64 = sizes[..index - 1].iter().sum();
    Ok(Selection {
        range: Some(start..start + sizes[index - 1]),
        parts_count: i32::try_from(sizes.len()).ok(),
        part: Some(index - 1),
    })
}

/// The checksums a GET or HEAD answers with `x-amz-checksum-mode: ENABLED`: the object's
/// for the whole object, a part's for a part of a composite multipart object, none for
/// other ranges.
fn answered_checksums(found: &Found, selection: &Selection) -> Checksums {
    let Some(info) = found.info.as_ref() else {
        return Checksums::default();
    };
    match (selection.part, &selection.range) {
        (None, None) => info.checksums.clone(),
        (Some(i), _) => {
            let composite = info.checksums.kind.as_deref() == Some("COMPOSITE");
            match info.part_checksums.get(i) {
                Some(value) if composite => info.checksums.like(value.clone()),
                _ => Checksums::default(),
            }
        }
        (None, Some(_)) => Checksums::default(),
    }
}

/// The conditions of a GET, HEAD or copy source, checked as RFC 9110 orders them.
#[derive(Debug)]
pub struct Conditions<'a> {
    pub if_match: Option<&'a ETagCondition>,
    pub if_none_match: Option<&'a ETagCondition>,
    pub if_modified_since: Option<&'a Timestamp>,
    pub if_unmodified_since: Option<&'a Timestamp>,
}

impl<'a> Conditions<'a> {
    pub fn new(
        if_match: Option<&'a ETagCondition>,
        if_none_match: Option<&'a ETagCondition>,
        if_modified_since: Option<&'a Timestamp>,
        if_unmodified_since: Option<&'a Timestamp>,
    ) -> Conditions<'a> {
        Conditions {
            if_match,
            if_none_match,
            if_modified_since,
            if_unmodified_since,
        }
    }

    /// PreconditionFailed or NotModified when a condition fails.
    pub fn check(&self, found: &Found) -> S3Result<()> {
        self.check_with(found, S3ErrorCode::NotModified)
    }

    /// As [`Conditions::check`], with the code for a failed If-None-Match or
    /// If-Modified-Since (copies fail with PreconditionFailed where GET says NotModified).
    pub fn check_with(&self, found: &Found, not_modified: S3ErrorCode) -> S3Result<()> {
        let etag = found.etag();
        let mtime = found.attr.mtime.div_euclid(1_000_000_000);
        let matches = |c: &ETagCondition| match c {
            ETagCondition::Any => true,
            ETagCondition::ETag(t) => t.value() == etag,
        };
        if let Some(c) = self.if_match {
            if !matches(c) {
                return Err(precondition_failed());
            }
        } else if let Some(t) = self.if_unmodified_since
            && mtime > seconds(t)
        {
            return Err(precondition_failed());
        }
        if let Some(c) = self.if_none_match {
            if matches(c) {
                return Err(S3Error::new(not_modified));
            }
        } else if let Some(t) = self.if_modified_since
            && mtime <= seconds(t)
        {
            return Err(S3Error::new(not_modified));
        }
        Ok(())
    }
}

fn seconds(t: &Timestamp) -> i64 {
    let t: time::OffsetDateTime = t.clone().into();
    t.unix_timestamp()
}

pub fn precondition_failed() -> S3Error {
    S3Error::with_message(
        S3ErrorCode::PreconditionFailed,
        "at least one of the preconditions you specified did not hold",
    )
}
