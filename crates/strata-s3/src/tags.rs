//! Tags and object attributes: object tags (the `x-amz-tagging` header of PUT, copies and
//! multipart uploads, Get/Put/DeleteObjectTagging, the tag count on GET) live in the
//! object's record, so a GET reads them with everything else; bucket tags (and those of
//! directory keys) in the directory's xattr `user.s3.tags` (FORMAT.md "s3 v1").

use s3s::dto::{
    DeleteBucketTaggingInput, DeleteBucketTaggingOutput, DeleteObjectTaggingInput,
    DeleteObjectTaggingOutput, GetBucketTaggingInput, GetBucketTaggingOutput,
    GetObjectTaggingInput, GetObjectTaggingOutput, PutBucketTaggingInput, PutBucketTaggingOutput,
    PutObjectTaggingInput, PutObjectTaggingOutput, Tag, Tagging,
};
use s3s::{S3Error, S3ErrorCode, S3Request, S3Response, S3Result};
use strata_types::{Errno, Ino};

use crate::Gateway;
use crate::error::fs_error;
use crate::objinfo::{INFO_VERSION, INFO_XATTR, ObjectInfo};
use crate::read::Found;

/// The xattr holding a bucket's (a directory's) tags: a JSON array of `[key, value]`.
pub const TAGS_XATTR: &[u8] = b"user.s3.tags";
/// S3's limits: tags per object and per bucket, key and value lengths (characters).
const MAX_OBJECT_TAGS: usize = 10;
const MAX_BUCKET_TAGS: usize = 50;
const MAX_TAG_KEY: usize = 128;
const MAX_TAG_VALUE: usize = 256;

use crate::objinfo::Tags;

fn invalid_tag(msg: String) -> S3Error {
    S3Error::with_message(S3ErrorCode::InvalidTag, msg)
}

/// Check tags against S3's limits: unique keys, lengths, count.
pub fn check_tags(tags: &Tags, max: usize) -> S3Result<()> {
    if tags.len() > max {
        return Err(invalid_tag(format!("at most {max} tags")));
    }
    for (i, (key, value)) in tags.iter().enumerate() {
        if key.is_empty() || key.chars().count() > MAX_TAG_KEY {
            return Err(invalid_tag(format!(
                "a tag key is 1 to {MAX_TAG_KEY} characters"
            )));
        }
        if value.chars().count() > MAX_TAG_VALUE {
            return Err(invalid_tag(format!(
                "a tag value is at most {MAX_TAG_VALUE} characters"
            )));
        }
        if tags[..i].iter().any(|(k, _)| k == key) {
            return Err(invalid_tag(format!("tag key {key:?} given twice")));
        }
    }
    Ok(())
}

/// The tags of an `x-amz-tagging` header (`k1=v1&k2=v2`, URL-encoded).
pub fn parse_tag_header(header: &str) -> S3Result<Tags> {
    let mut tags = Tags::new();
    for pair in header.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        tags.push((url_decode(k)?, url_decode(v)?));
    }
    check_tags(&tags, MAX_OBJECT_TAGS)?;
    Ok(tags)
}

pub(crate) fn url_decode(text: &str) -> S3Result<String> {
    let bad = || invalid_tag(format!("x-amz-tagging is not URL-encoded: {text}"));
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = text.get(i + 1..i + 3).ok_or_else(bad)?;
                out.push(u8::from_str_radix(hex, 16).map_err(|_| bad())?);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).map_err(|_| bad())
}

fn tag_set(tags: Tags) -> Vec<Tag> {
    tags.into_iter()
        .map(|(key, value)| Tag {
            key: Some(key),
            value: Some(value),
        })
        .collect()
}

fn from_tagging(tagging: Tagging, max: usize) -> S3Result<Tags> {
    let tags: Tags = tagging
        .tag_set
        .into_iter()
        .map(|t| (t.key.unwrap_or_default(), t.value.unwrap_or_default()))
        .collect();
    check_tags(&tags, max)?;
    Ok(tags)
}

impl Gateway {
    /// The tags stored on `ino` (none when it has no tags xattr).
    pub(crate) async fn load_tags(&self, ino: Ino, has_xattrs: bool) -> S3Result<Tags> {
        if !has_xattrs {
            return Ok(Tags::new());
        }
        match self
            .vfs
            .getxattr(&self.server_ctx, ino, TAGS_XATTR, 0)
            .await
        {
            Ok(value) => Ok(serde_json::from_slice(&value).unwrap_or_default()),
            Err(Errno::ENODATA) => Ok(Tags::new()),
            Err(e) => Err(fs_error(e, "tags")),
        }
    }

    /// Replace the tags of `ino` (none removes the xattr).
    pub(crate) async fn store_tags(&self, ino: Ino, tags: &Tags) -> S3Result<()> {
        let done = if tags.is_empty() {
            match self
                .vfs
                .removexattr(&self.server_ctx, ino, TAGS_XATTR)
                .await
            {
                Err(Errno::ENODATA) => Ok(()),
                other => other,
            }
        } else {
            let value = serde_json::to_vec(tags).unwrap_or_default();
            self.vfs
                .setxattr(&self.server_ctx, ino, TAGS_XATTR, &value, 0)
                .await
        };
        done.map_err(|e| fs_error(e, "tags"))
    }

    /// The tags of an object: those of its record, or of a directory key's directory.
    async fn object_tags(&self, found: &Found) -> S3Result<Tags> {
        if found.is_dir {
            return self.load_tags(found.ino, found.attr.xattrs).await;
        }
        Ok(found
            .info
            .as_ref()
            .map(|i| i.tags.clone())
            .unwrap_or_default())
    }

    /// Replace an object's tags. A file without a valid record (written through a mount)
    /// gets one, holding its derived ETag, so the tags stay with these bytes.
    async fn set_object_tags(&self, found: &Found, tags: Tags) -> S3Result<()> {
        if found.is_dir {
            return self.store_tags(found.ino, &tags).await;
        }
        let mut info = found.info.clone().unwrap_or_else(|| ObjectInfo {
            version: INFO_VERSION,
            etag: found.etag(),
            size: found.attr.length,
            mtime: found.attr.mtime,
            ..ObjectInfo::default()
        });
        info.tags = tags;
        self.vfs
            .setxattr(&self.server_ctx, found.ino, INFO_XATTR, &info.encode(), 0)
            .await
            .map_err(|e| fs_error(e, "tags"))
    }

    pub(crate) async fn get_object_tagging(
        &self,
        req: S3Request<GetObjectTaggingInput>,
    ) -> S3Result<S3Response<GetObjectTaggingOutput>> {
        let found = self.find(&req.input.bucket, &req.input.key).await?;
        let tags = self.object_tags(&found).await?;
        Ok(S3Response::new(GetObjectTaggingOutput {
            tag_set: tag_set(tags),
            version_id: None,
        }))
    }

    pub(crate) async fn put_object_tagging(
        &self,
        req: S3Request<PutObjectTaggingInput>,
    ) -> S3Result<S3Response<PutObjectTaggingOutput>> {
        let input = req.input;
        let tags = from_tagging(input.tagging, MAX_OBJECT_TAGS)?;
        let found = self.find(&input.bucket, &input.key).await?;
        self.set_object_tags(&found, tags).await?;
        Ok(S3Response::new(PutObjectTaggingOutput { version_id: None }))
    }

    pub(crate) async fn delete_object_tagging(
        &self,
        req: S3Request<DeleteObjectTaggingInput>,
    ) -> S3Result<S3Response<DeleteObjectTaggingOutput>> {
        let found = self.find(&req.input.bucket, &req.input.key).await?;
        self.set_object_tags(&found, Tags::new()).await?;
        Ok(S3Response::new(DeleteObjectTaggingOutput {
            version_id: None,
        }))
    }

    pub(crate) async fn get_bucket_tagging(
        &self,
        req: S3Request<GetBucketTaggingInput>,
    ) -> S3Result<S3Response<GetBucketTaggingOutput>> {
        let dir = self.bucket_dir(&req.input.bucket).await?;
        let tags = self.load_tags(dir, true).await?;
        if tags.is_empty() {
            return Err(S3Error::with_message(
                S3ErrorCode::NoSuchTagSet,
                "the bucket has no tags",
            ));
        }
        Ok(S3Response::new(GetBucketTaggingOutput {
            tag_set: tag_set(tags),
        }))
    }

    pub(crate) async fn put_bucket_tagging(
        &self,
        req: S3Request<PutBucketTaggingInput>,
    ) -> S3Result<S3Response<PutBucketTaggingOutput>> {
        let input = req.input;
        let tags = from_tagging(input.tagging, MAX_BUCKET_TAGS)?;
        let dir = self.bucket_dir(&input.bucket).await?;
        self.store_tags(dir, &tags).await?;
        Ok(S3Response::new(PutBucketTaggingOutput {}))
    }

    pub(crate) async fn delete_bucket_tagging(
        &self,
        req: S3Request<DeleteBucketTaggingInput>,
    ) -> S3Result<S3Response<DeleteBucketTaggingOutput>> {
        let dir = self.bucket_dir(&req.input.bucket).await?;
        self.store_tags(dir, &Tags::new()).await?;
        Ok(S3Response::new(DeleteBucketTaggingOutput {}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_headers_decode_and_limits_hold() {
        let tags = parse_tag_header("project=alpha&team=ml%20ops&empty=").unwrap();
        assert_eq!(
            tags,
            vec![
                ("project".into(), "alpha".into()),
                ("team".into(), "ml ops".into()),
                ("empty".into(), String::new())
            ]
        );
        assert!(parse_tag_header("a=1&a=2").is_err());
        let many: Vec<String> = (0..11).map(|i| format!("k{i}=v")).collect();
        assert!(parse_tag_header(&many.join("&")).is_err());
        assert!(parse_tag_header(&format!("{}=v", "k".repeat(129))).is_err());
        assert!(parse_tag_header("k=%zz").is_err());
    }
}
