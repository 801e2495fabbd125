//! Writing and removing objects: PUT (a hidden temporary file renamed into place, so
//! readers never see half an object), CopyObject (slices shared, no data copied),
//! DeleteObject and DeleteObjects (directory keys included; directories emptied by a
//! delete go with it).

use futures::StreamExt;
use s3s::dto::{
    CopyObjectInput, CopyObjectOutput, CopyObjectResult, CopySource, DeleteObjectInput,
    DeleteObjectOutput, DeleteObjectsInput, DeleteObjectsOutput, DeletedObject, ETag,
    ETagCondition, MetadataDirective, ObjectIdentifier, PutObjectInput, PutObjectOutput, Timestamp,
    TimestampFormat,
};
use s3s::{S3Error, S3ErrorCode, S3Request, S3Response, S3Result};
use strata_types::{Errno, Ino};

use crate::Gateway;
use crate::access::DeniedKeys;
use crate::body::{Expected, write_body};
use crate::error::fs_error;
use crate::keys::{ObjectPath, parse_key};
use crate::lock::{LockHeaders, LockRequest, lock_not_enabled};
use crate::objinfo::{Checksums, Headers, INFO_VERSION, INFO_XATTR, ObjectInfo, Tags, hex};
use crate::paths::FILE_MODE;
use crate::read::{Conditions, EMPTY_ETAG, precondition_failed};
pub(crate) use crate::staging::{NOREPLACE, Replace, TempFile};
use crate::tags::parse_tag_header;
use crate::versions::{NULL_VERSION, Versioning};
use crate::versions_ops::Deleted;

/// Largest single PUT (S3's limit).
pub const MAX_PUT: u64 = 5 << 30;
/// Keys one DeleteObjects request may name (S3's limit).
const MAX_DELETE_KEYS: usize = 1000;
/// Deletions of one DeleteObjects request run this many at a time.
const DELETE_PARALLEL: usize = 16;

impl Gateway {
    /// Create a temporary file, open for writing.
    pub(crate) async fn temp_file(&self) -> S3Result<(TempFile, u64)> {
        let dir = self.hidden_dir("tmp").await?;
        let name = uuid::Uuid::new_v4().simple().to_string();
        let (entry, fh) = self
            .vfs
            .create(self.ctx(), dir, name.as_bytes(), FILE_MODE)
            .await
            .map_err(|e| fs_error(e, "temporary file"))?;
        Ok((
            TempFile {
                dir,
                name,
                ino: entry.ino,
                acl: None,
                lock: LockRequest::default(),
            },
            fh,
        ))
    }

    /// Remove a temporary file that will not become an object.
    pub(crate) async fn discard(&self, temp: &TempFile) {
        if let Err(e) = self
            .vfs
            .unlink(self.ctx(), temp.dir, temp.name.as_bytes())
            .await
        {
            tracing::warn!("removing temporary file {}: errno {e}", temp.name);
        }
    }

    /// Close a written temporary file (committing its data); discard it on failure.
    pub(crate) async fn close_temp(&self, temp: &TempFile, fh: u64) -> S3Result<()> {
        if let Err(e) = self.vfs.release(fh).await {
            self.discard(temp).await;
            return Err(fs_error(e, "upload"));
        }
        Ok(())
    }

    /// Close and remove a temporary file whose writing failed.
    pub(crate) async fn abandon(&self, temp: &TempFile, fh: u64) {
        if let Err(e) = self.vfs.release(fh).await {
            tracing::debug!("closing an abandoned upload: errno {e}");
        }
        self.discard(temp).await;
    }

    /// Close a temporary file after writing it: kept if `written` is Ok.
    pub(crate) async fn finish_temp<T>(
        &self,
        temp: &TempFile,
        fh: u64,
        written: S3Result<T>,
    ) -> S3Result<T> {
        match written {
            Ok(value) => {
                self.close_temp(temp, fh).await?;
                Ok(value)
            }
            Err(e) => {
                self.abandon(temp, fh).await;
                Err(e)
            }
        }
    }

    /// Write `body` to a new temporary file and close it: the file and what was written.
    pub(crate) async fn upload_body(
        &self,
        body: Option<s3s::dto::StreamingBlob>,
        expected: &Expected,
        trailers: Option<&s3s::TrailingHeaders>,
        limit: u64,
    ) -> S3Result<(TempFile, crate::body::Written)> {
        let (temp, fh) = self.temp_file().await?;
        let written = write_body(&self.vfs, fh, body, expected, trailers, limit).await;
        let written = self.finish_temp(&temp, fh, written).await?;
        Ok((temp, written))
    }

    /// Make a closed temporary file the object at `path`: store its record (naming the
    /// file's final length and mtime), create the key's directories, rename it in place.
    /// `replace` says what it may replace (`If-None-Match: *`, `If-Match`), decided by the
    /// rename itself. The temporary file is gone afterwards either way.
    pub(crate) async fn install(
        &self,
        temp: &TempFile,
        bucket_dir: Ino,
        path: &ObjectPath<'_>,
        key: &str,
        info: &mut ObjectInfo,
        replace: Replace,
    ) -> S3Result<()> {
        let installed = self
            .try_install(temp, bucket_dir, path, key, info, replace)
            .await;
        if installed.is_err() {
            self.discard(temp).await;
        }
        installed
    }

    async fn try_install(
        &self,
        temp: &TempFile,
        bucket_dir: Ino,
        path: &ObjectPath<'_>,
        key: &str,
        info: &mut ObjectInfo,
        replace: Replace,
    ) -> S3Result<()> {
        let name = path.name.ok_or_else(|| fs_error(Errno::EISDIR, key))?;
        let state = self.versioning(bucket_dir).await?;
        // Object lock needs versioning: an unversioned write reads nothing more.
        let lock = match state {
            Versioning::Enabled => self.new_lock(bucket_dir, &temp.lock).await?,
            _ if temp.lock.given => return Err(lock_not_enabled()),
            _ => None,
        };
        info.version_id = state.new_id();
        self.record(temp, key, info).await?;
        if let Some(acl) = &temp.acl {
            self.store_xattr(temp.ino, crate::config::ACL_XATTR, Some(acl))
                .await?;
        }
        let parent = self
            .make_dirs(bucket_dir, &path.dirs)
            .await
            .map_err(|e| fs_error(e, key))?;
        if state == Versioning::Off {
            return self.rename_into(temp, parent, name, key, replace).await;
        }
        let at = (bucket_dir, path, parent, name);
        self.install_versioned(temp, at, key, state, replace)
            .await?;
        if state == Versioning::Suspended {
            info.version_id = Some(NULL_VERSION.into());
        }
        // Locked once in place: a lock on the temporary file would keep it forever
        // should the install fail (docs/SEMANTICS.md).
        if let Some(lock) = &lock {
            self.apply_lock(temp.ino, lock, key).await?;
        }
        Ok(())
    }

    /// Store `info` on a closed temporary file, naming its final length and mtime.
    pub(crate) async fn record(
        &self,
        temp: &TempFile,
        key: &str,
        info: &mut ObjectInfo,
    ) -> S3Result<()> {
        let attr = self
            .vfs
            .getattr(temp.ino)
            .await
            .map_err(|e| fs_error(e, key))?;
        info.version = INFO_VERSION;
        info.size = attr.length;
        info.mtime = attr.mtime;
        self.vfs
            .setxattr(self.ctx(), temp.ino, INFO_XATTR, &info.encode(), 0)
            .await
            .map_err(|e| fs_error(e, key))
    }

    /// Rename a temporary file to `name` in `parent`, replacing what `replace` allows
    /// (anything else fails with PreconditionFailed).
    pub(crate) async fn rename_into(
        &self,
        temp: &TempFile,
        parent: Ino,
        name: &str,
        key: &str,
        replace: Replace,
    ) -> S3Result<()> {
        let from = (temp.dir, temp.name.as_bytes());
        let ctx = &self.keeper_ctx();
        let to = (parent, name.as_bytes());
        let renamed = match replace {
            Replace::Any => self.vfs.rename(ctx, from.0, from.1, to.0, to.1, 0).await,
            Replace::Nothing => {
                self.vfs
                    .rename(ctx, from.0, from.1, to.0, to.1, NOREPLACE)
                    .await
            }
            Replace::Only(ino) => self.vfs.rename_replacing(ctx, from, to, ino).await,
        };
        match (renamed, replace) {
            (Ok(()), _) => Ok(()),
            (Err(Errno::EEXIST), Replace::Nothing) | (Err(Errno::ESTALE), Replace::Only(_)) => {
                Err(precondition_failed())
            }
            (Err(e), _) => Err(fs_error(e, key)),
        }
    }

    pub(crate) async fn put_object(
        &self,
        req: S3Request<PutObjectInput>,
    ) -> S3Result<S3Response<PutObjectOutput>> {
        let trailers = req.trailing_headers.clone();
        let i = &req.input;
        let sums = [
            i.checksum_crc32.clone(),
            i.checksum_crc32c.clone(),
            i.checksum_crc64nvme.clone(),
            i.checksum_sha1.clone(),
            i.checksum_sha256.clone(),
        ];
        let expected = Expected::new(i.content_md5.clone(), sums, &req.headers);
        let mut input = req.input;
        let path = parse_key(&input.key)?;
        let bucket_dir = self.bucket_dir(&input.bucket).await?;
        if path.is_dir() {
            let body = input.body.take();
            return self
                .put_directory(bucket_dir, &path, &input.key, body)
                .await;
        }
        let mut replace = match &input.if_none_match {
            Some(ETagCondition::Any) => Replace::Nothing,
            Some(_) => {
                return Err(S3Error::with_message(
                    S3ErrorCode::NotImplemented,
                    "If-None-Match on PUT takes only *",
                ));
            }
            None => Replace::Any,
        };
        if let Some(cond) = &input.if_match {
            replace = Replace::Only(self.check_current(&input.bucket, &input.key, cond).await?);
        }
        let tags = match &input.tagging {
            Some(header) => parse_tag_header(header)?,
            None => Tags::new(),
        };
        let acl = self
            .object_acl_for_put(&input.bucket, input.acl.as_ref())
            .await?;
        let headers = LockHeaders {
            mode: input.object_lock_mode.as_ref(),
            until: input.object_lock_retain_until_date.as_ref(),
            hold: input.object_lock_legal_hold_status.as_ref(),
        };
        let lock = headers.request()?;
        let (mut temp, written) = self
            .upload_body(input.body, &expected, trailers.as_ref(), MAX_PUT)
            .await?;
        temp.acl = acl;
        temp.lock = lock;
        let mut info = ObjectInfo {
            etag: hex(&written.md5),
            headers: headers_of(
                input.content_type,
                input.cache_control,
                input.content_disposition,
                input.content_encoding,
                input.content_language,
                input.expires,
            ),
            meta: input.metadata.unwrap_or_default().into_iter().collect(),
            tags,
            checksums: Checksums {
                kind: Some("FULL_OBJECT".into()),
                ..written.checksums.clone()
            },
            ..ObjectInfo::default()
        };
        self.install(&temp, bucket_dir, &path, &input.key, &mut info, replace)
            .await?;
        let c = written.checksums;
        let output = PutObjectOutput {
            e_tag: Some(ETag::Strong(info.etag)),
            version_id: info.version_id,
            size: Some(i64::try_from(written.size).unwrap_or(i64::MAX)),
            checksum_crc32: c.crc32,
            checksum_crc32c: c.crc32c,
            checksum_crc64nvme: c.crc64nvme,
            checksum_sha1: c.sha1,
            checksum_sha256: c.sha256,
            ..PutObjectOutput::default()
        };
        Ok(S3Response::new(output))
    }

    /// `If-Match` on a write: the current object must have that ETag; returns its inode,
    /// which the rename into place then replaces only if it is still there
    /// ([`Replace::Only`]), so a concurrent writer in between fails this request.
    pub(crate) async fn check_current(
        &self,
        bucket: &str,
        key: &str,
        cond: &ETagCondition,
    ) -> S3Result<Ino> {
        let found = match self.find(bucket, key).await {
            Ok(found) => found,
            Err(e) if *e.code() == S3ErrorCode::NoSuchKey => {
                return Err(no_such_key_for_match(key));
            }
            Err(e) => return Err(e),
        };
        Conditions::new(Some(cond), None, None, None).check(&found)?;
        Ok(found.ino)
    }

    /// PUT of `a/b/`: the directory, created with its parents; a body must be empty (it
    /// is read to its end, so a client waiting to send it is not left hanging).
    async fn put_directory(
        &self,
        bucket_dir: Ino,
        path: &ObjectPath<'_>,
        key: &str,
        body: Option<s3s::dto::StreamingBlob>,
    ) -> S3Result<S3Response<PutObjectOutput>> {
        let mut received = 0usize;
        if let Some(mut body) = body {
            while let Some(piece) = body.next().await {
                received += piece
                    .map_err(|e| S3Error::with_message(S3ErrorCode::IncompleteBody, e.to_string()))?
                    .len();
            }
        }
        if received > 0 {
            return Err(S3Error::with_message(
                S3ErrorCode::InvalidArgument,
                "a key ending in '/' is a directory here and cannot hold data",
            ));
        }
        self.make_dirs(bucket_dir, &path.dirs)
            .await
            .map_err(|e| fs_error(e, key))?;
        let output = PutObjectOutput {
            e_tag: Some(ETag::Strong(EMPTY_ETAG.into())),
            size: Some(0),
            ..PutObjectOutput::default()
        };
        Ok(S3Response::new(output))
    }

    /// Delete one key; a missing key is not an error (S3 answers 204 either way).
    pub(crate) async fn delete_key(&self, bucket_dir: Ino, key: &str) -> S3Result<()> {
        let path = parse_key(key)?;
        let (parent, chain) = match self.walk_chain(bucket_dir, &path.dirs).await {
            Ok(found) => found,
            Err(Errno::ENOENT | Errno::ENOTDIR) => return Ok(()),
            Err(e) => return Err(fs_error(e, key)),
        };
        let depth = path.dirs.len();
        let (removed, emptied) = match (path.name, &chain) {
            (Some(name), _) => (
                self.vfs.unlink(self.ctx(), parent, name.as_bytes()).await,
                depth,
            ),
            // The directory key itself: its directory goes if empty; one still holding
            // keys stays (they keep their prefix), as S3's placeholder objects do.
            (None, Some(chain)) => match (
                depth.checked_sub(1).and_then(|i| chain.get(i)),
                path.dirs.last(),
            ) {
                (Some(above), Some(last)) => {
                    match self.vfs.rmdir(self.ctx(), *above, last.as_bytes()).await {
                        Err(Errno::ENOTEMPTY) => return Ok(()),
                        other => (other, depth - 1),
                    }
                }
                _ => return Ok(()),
            },
            (None, None) => return Ok(()),
        };
        match removed {
            Ok(()) => {}
            Err(Errno::ENOENT | Errno::EISDIR | Errno::ENOTDIR) => return Ok(()),
            Err(e) => return Err(fs_error(e, key)),
        }
        if let Some(chain) = chain {
            self.remove_empty_dirs(&chain, &path.dirs[..emptied]).await;
        }
        Ok(())
    }

    pub(crate) async fn delete_object(
        &self,
        req: S3Request<DeleteObjectInput>,
    ) -> S3Result<S3Response<DeleteObjectOutput>> {
        let input = &req.input;
        let bucket_dir = self.bucket_dir(&input.bucket).await?;
        let bucket = (bucket_dir, self.versioning(bucket_dir).await?);
        let bypass = crate::lock_ops::bypasses(input.bypass_governance_retention);
        let version = (input.version_id.as_deref(), bypass);
        let done = self.delete_one(bucket, &input.key, version).await?;
        Ok(S3Response::new(DeleteObjectOutput {
            delete_marker: done.delete_marker.then_some(true),
            version_id: done.version_id,
            ..DeleteObjectOutput::default()
        }))
    }

    pub(crate) async fn delete_objects(
        &self,
        req: S3Request<DeleteObjectsInput>,
    ) -> S3Result<S3Response<DeleteObjectsOutput>> {
        let input = req.input;
        if input.delete.objects.len() > MAX_DELETE_KEYS {
            return Err(S3Error::with_message(
                S3ErrorCode::MalformedXML,
                format!("DeleteObjects takes at most {MAX_DELETE_KEYS} keys"),
            ));
        }
        let bucket_dir = self.bucket_dir(&input.bucket).await?;
        let bucket = (bucket_dir, self.versioning(bucket_dir).await?);
        let quiet = input.delete.quiet.unwrap_or(false);
        let bypass = crate::lock_ops::bypasses(input.bypass_governance_retention);
        let refused = req
            .extensions
            .get::<DeniedKeys>()
            .cloned()
            .unwrap_or_default();
        let refused = &refused.0;
        let results: Vec<_> = futures::stream::iter(input.delete.objects.into_iter().enumerate())
            .map(|(at, obj)| async move {
                if refused.contains(&at) {
                    let message = "Access Denied";
                    return (
                        obj,
                        Err(S3Error::with_message(S3ErrorCode::AccessDenied, message)),
                    );
                }
                let version = (obj.version_id.as_deref(), bypass);
                let done = self.delete_one(bucket, &obj.key, version).await;
                (obj, done)
            })
            .buffered(DELETE_PARALLEL)
            .collect()
            .await;
        let mut deleted = Vec::new();
        let mut errors = Vec::new();
        for (obj, done) in results {
            match done {
                Ok(done) if !quiet => deleted.push(deleted_object(obj, done)),
                Ok(_) => {}
                Err(e) => errors.push(s3s::dto::Error {
                    code: Some(e.code().as_str().to_owned()),
                    message: e.message().map(str::to_owned),
                    key: Some(obj.key),
                    version_id: obj.version_id,
                }),
            }
        }
        let output = DeleteObjectsOutput {
            deleted: Some(deleted),
            errors: (!errors.is_empty()).then_some(errors),
            ..DeleteObjectsOutput::default()
        };
        Ok(S3Response::new(output))
    }

    pub(crate) async fn copy_object(
        &self,
        req: S3Request<CopyObjectInput>,
    ) -> S3Result<S3Response<CopyObjectOutput>> {
        let input = req.input;
        let conditions = Conditions::new(
            input.copy_source_if_match.as_ref(),
            input.copy_source_if_none_match.as_ref(),
            input.copy_source_if_modified_since.as_ref(),
            input.copy_source_if_unmodified_since.as_ref(),
        );
        let source = self.copy_source(&input.copy_source, conditions).await?;
        let to_itself = matches!(&input.copy_source,
            CopySource::Bucket { bucket, key, version_id: None } if **bucket == *input.bucket && **key == *input.key);
        let replace = input
            .metadata_directive
            .as_ref()
            .is_some_and(|d| d.as_str() == MetadataDirective::REPLACE);
        if !replace && to_itself {
            return Err(S3Error::with_message(
                S3ErrorCode::InvalidRequest,
                "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes.",
            ));
        }
        let path = parse_key(&input.key)?;
        let bucket_dir = self.bucket_dir(&input.bucket).await?;
        let mut info = source.info.clone().unwrap_or_default();
        info.etag = source.etag();
        info.version_id = None;
        if replace {
            info.headers = headers_of(
                input.content_type,
                input.cache_control,
                input.content_disposition,
                input.content_encoding,
                input.content_language,
                input.expires,
            );
            info.meta = input.metadata.unwrap_or_default().into_iter().collect();
        }
        let replace_tags = input
            .tagging_directive
            .as_ref()
            .is_some_and(|d| d.as_str() == "REPLACE");
        if replace_tags {
            info.tags = match &input.tagging {
                Some(header) => parse_tag_header(header)?,
                None => Tags::new(),
            };
        }
        if path.is_dir() || source.is_dir {
            self.make_dirs(bucket_dir, &path.dirs)
                .await
                .map_err(|e| fs_error(e, &input.key))?;
        } else {
            let acl = self
                .object_acl_for_put(&input.bucket, input.acl.as_ref())
                .await?;
            let headers = LockHeaders {
                mode: input.object_lock_mode.as_ref(),
                until: input.object_lock_retain_until_date.as_ref(),
                hold: input.object_lock_legal_hold_status.as_ref(),
            };
            let lock = headers.request()?;
            let target = (bucket_dir, &path, input.key.as_str());
            self.copy_file(
                source.ino,
                source.attr.length,
                target,
                &mut info,
                (acl, lock),
            )
            .await?;
        }
        let result = CopyObjectResult {
            e_tag: Some(ETag::Strong(info.etag.clone())),
            last_modified: Some(Timestamp::from(std::time::SystemTime::now())),
            ..CopyObjectResult::default()
        };
        let source_version = match &input.copy_source {
            CopySource::Bucket {
                version_id: Some(id),
                ..
            } => Some(id.to_string()),
            _ => source.version_id.clone(),
        };
        Ok(S3Response::new(CopyObjectOutput {
            copy_object_result: Some(result),
            version_id: info.version_id,
            copy_source_version_id: source_version,
            ..CopyObjectOutput::default()
        }))
    }

    /// A new object at `path` showing the bytes of file `src` (its slices shared).
    async fn copy_file(
        &self,
        src: Ino,
        len: u64,
        (bucket_dir, path, key): (Ino, &ObjectPath<'_>, &str),
        info: &mut ObjectInfo,
        (acl, lock): (Option<Vec<u8>>, LockRequest),
    ) -> S3Result<()> {
        let (mut temp, fh) = self.temp_file().await?;
        temp.acl = acl;
        temp.lock = lock;
        let copied = self.share_range(src, 0, len, fh, 0).await;
        self.finish_temp(&temp, fh, copied).await?;
        self.install(&temp, bucket_dir, path, key, info, Replace::Any)
            .await
    }

    /// Make `[dst_off, dst_off+len)` of the open file `dst_fh` show `[off, off+len)` of
    /// file `src`, sharing slices.
    pub(crate) async fn share_range(
        &self,
        src: Ino,
        off: u64,
        len: u64,
        dst_fh: u64,
        dst_off: u64,
    ) -> S3Result<()> {
        let (src_fh, _) = self
            .vfs
            .open(self.ctx(), src, 0)
            .await
            .map_err(|e| fs_error(e, "copy source"))?;
        let mut done = 0;
        let mut result = Ok(());
        while done < len {
            match self
                .vfs
                .copy_file_range(src_fh, off + done, dst_fh, dst_off + done, len - done, 0)
                .await
            {
                Ok(0) => {
                    result = Err(fs_error(Errno::EIO, "copy source (shorter than expected)"));
                    break;
                }
                Ok(n) => done += n,
                Err(e) => {
                    result = Err(fs_error(e, "copy"));
                    break;
                }
            }
        }
        if let Err(e) = self.vfs.release(src_fh).await {
            tracing::warn!("closing a copy source: errno {e}");
        }
        result
    }
}

/// DeleteObjects's entry for one deleted key or version.
fn deleted_object(obj: ObjectIdentifier, done: Deleted) -> DeletedObject {
    let asked = obj.version_id.is_some();
    DeletedObject {
        key: Some(obj.key),
        delete_marker: done.delete_marker.then_some(true),
        delete_marker_version_id: done.version_id.clone().filter(|_| !asked),
        version_id: obj.version_id,
    }
}

fn no_such_key_for_match(key: &str) -> S3Error {
    S3Error::with_message(
        S3ErrorCode::NoSuchKey,
        format!("If-Match: no such key: {key}"),
    )
}

/// The standard headers given with a PUT, copy or multipart upload.
pub(crate) fn headers_of(
    content_type: Option<String>,
    cache_control: Option<String>,
    content_disposition: Option<String>,
    content_encoding: Option<String>,
    content_language: Option<String>,
    expires: Option<Timestamp>,
) -> Headers {
    let expires = expires.and_then(|t| {
        let mut out = Vec::new();
        t.format(TimestampFormat::HttpDate, &mut out).ok()?;
        String::from_utf8(out).ok()
    });
    Headers {
        content_type,
        cache_control,
        content_disposition,
        content_encoding,
        content_language,
        expires,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `If-Match` on a write is a compare-and-swap: the rename into place replaces only the
    /// object whose ETag was checked; one another writer put there meanwhile survives.
    #[tokio::test]
    async fn if_match_replaces_only_the_object_it_checked() {
        let gw = crate::test_gateway(false).await;
        let root = gw.root();
        let new_object = || async {
            let (temp, fh) = gw.temp_file().await.unwrap();
            gw.finish_temp(&temp, fh, Ok(())).await.unwrap();
            temp
        };
        let first = new_object().await;
        gw.rename_into(&first, root, "k", "k", Replace::Any)
            .await
            .unwrap();
        let checked = gw.lookup(root, "k").await.unwrap().ino;
        // Another writer replaces the object after the ETag check.
        let other = new_object().await;
        gw.rename_into(&other, root, "k", "k", Replace::Any)
            .await
            .unwrap();
        let current = gw.lookup(root, "k").await.unwrap().ino;
        let mine = new_object().await;
        let refused = gw
            .rename_into(&mine, root, "k", "k", Replace::Only(checked))
            .await
            .unwrap_err();
        assert_eq!(*refused.code(), S3ErrorCode::PreconditionFailed);
        assert_eq!(gw.lookup(root, "k").await.unwrap().ino, current);
        gw.rename_into(&mine, root, "k", "k", Replace::Only(current))
            .await
            .unwrap();
        let last = new_object().await;
        let exists = gw
            .rename_into(&last, root, "k", "k", Replace::Nothing)
            .await;
        assert_eq!(*exists.unwrap_err().code(), S3ErrorCode::PreconditionFailed);
    }
}
