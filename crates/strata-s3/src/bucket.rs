//! Buckets and listings: ListBuckets, Create/Delete/HeadBucket, GetBucketLocation, and
//! ListObjects v1 and v2 (markers, continuation tokens, `encoding-type=url`, ETags read
//! for a page at a time in parallel).

use futures::StreamExt;
use s3s::dto::{
    Bucket, CommonPrefix, CreateBucketInput, CreateBucketOutput, DeleteBucketInput,
    DeleteBucketOutput, ETag, GetBucketLocationInput, GetBucketLocationOutput, HeadBucketInput,
    HeadBucketOutput, ListBucketsInput, ListBucketsOutput, ListObjectsInput, ListObjectsOutput,
    ListObjectsV2Input, ListObjectsV2Output, Object, Owner, Timestamp,
};
use s3s::{S3Error, S3ErrorCode, S3Request, S3Response, S3Result};
use strata_types::Errno;

use crate::Gateway;
use crate::config::{ACL_XATTR, OWNER_XATTR, canned_grants, to_xml};
use crate::error::fs_error;
use crate::list::{Item, ListQuery, Listing};
use crate::objinfo::derived_etag;
use crate::paths::DIR_MODE;
use crate::read::{EMPTY_ETAG, system_time};

/// Default and largest page of a listing.
const MAX_KEYS: i32 = 1000;
/// Records read at once while answering a listing.
const INFO_PARALLEL: usize = 32;

impl Gateway {
    /// The caller's access key (the root user's for unsigned requests, which only reach
    /// an operation when a policy or ACL allowed them).
    pub(crate) fn caller<T>(&self, req: &S3Request<T>) -> String {
        req.credentials.as_ref().map_or_else(
            || self.opts.root_access_key.clone(),
            |c| c.access_key.clone(),
        )
    }

    pub(crate) async fn list_buckets(
        &self,
        req: S3Request<ListBucketsInput>,
    ) -> S3Result<S3Response<ListBucketsOutput>> {
        let caller = self.caller(&req);
        let root = caller == self.opts.root_access_key;
        let mut buckets = Vec::new();
        if self.opts.multi_buckets {
            for entry in self.entries(self.root(), "/").await? {
                let (Ok(name), Some(attr)) = (std::str::from_utf8(&entry.name), &entry.attr) else {
                    continue;
                };
                if !attr.is_dir() || !s3s::path::check_bucket_name(name) {
                    continue;
                }
                // Users see the buckets they own; the root user sees all.
                if root || self.bucket_owner(entry.ino).await? == caller {
                    buckets.push(bucket(name, attr.ctime));
                }
            }
        } else if root || self.bucket_owner(self.root()).await? == caller {
            let attr = self
                .vfs
                .getattr(self.root())
                .await
                .map_err(|e| fs_error(e, "/"))?;
            buckets.push(bucket(&self.opts.bucket, attr.ctime));
        }
        let output = ListBucketsOutput {
            buckets: Some(buckets),
            owner: Some(self.owner_of(&caller)),
            ..ListBucketsOutput::default()
        };
        Ok(S3Response::new(output))
    }

    pub(crate) async fn create_bucket(
        &self,
        req: S3Request<CreateBucketInput>,
    ) -> S3Result<S3Response<CreateBucketOutput>> {
        let caller = self.caller(&req);
        let name = req.input.bucket;
        if !self.opts.multi_buckets {
            if name == self.opts.bucket {
                return Err(S3Error::with_message(
                    S3ErrorCode::BucketAlreadyOwnedByYou,
                    format!("{name} exists"),
                ));
            }
            return Err(S3Error::with_message(
                S3ErrorCode::InvalidRequest,
                format!(
                    "this gateway serves the one bucket {}; start it with --multi-buckets to create buckets",
                    self.opts.bucket
                ),
            ));
        }
        let acl = match &req.input.acl {
            Some(canned) => Some(canned_grants(canned.as_str())?),
            None => None,
        };
        match self
            .vfs
            .mkdir(self.ctx(), self.root(), name.as_bytes(), DIR_MODE)
            .await
        {
            Ok(entry) => {
                self.claim_bucket(entry.ino, &name, &caller, acl).await?;
                if req.input.object_lock_enabled_for_bucket == Some(true) {
                    // Object lock needs versioning, on for good.
                    let xattr = crate::versions::VERSIONING_XATTR;
                    self.store_xattr(entry.ino, xattr, Some(b"Enabled")).await?;
                    let lock = crate::lock::BucketLock::default();
                    self.store_bucket_lock(entry.ino, &lock).await?;
                }
            }
            Err(Errno::EEXIST) => {
                let dir = self.bucket_dir(&name).await?;
                let code = if self.bucket_owner(dir).await? == caller {
                    S3ErrorCode::BucketAlreadyOwnedByYou
                } else {
                    S3ErrorCode::BucketAlreadyExists
                };
                return Err(S3Error::with_message(code, format!("{name} exists")));
            }
            Err(e) => return Err(fs_error(e, &name)),
        }
        let output = CreateBucketOutput {
            location: Some(format!("/{name}")),
        };
        Ok(S3Response::new(output))
    }

    /// Record who owns a bucket just made (nothing for the root user) and its canned ACL;
    /// if that fails the bucket is removed again.
    async fn claim_bucket(
        &self,
        dir: strata_types::Ino,
        name: &str,
        caller: &str,
        acl: Option<Vec<s3s::dto::Grant>>,
    ) -> S3Result<()> {
        let mut recorded = Ok(());
        if caller != self.opts.root_access_key {
            recorded = self
                .store_xattr(dir, OWNER_XATTR, Some(caller.as_bytes()))
                .await;
        }
        if let (Ok(()), Some(grants)) = (&recorded, acl) {
            let policy = s3s::dto::AccessControlPolicy {
                grants: Some(grants),
                owner: Some(self.owner_of(caller)),
            };
            recorded = match to_xml(&policy) {
                Ok(xml) => self.store_xattr(dir, ACL_XATTR, Some(&xml)).await,
                Err(e) => Err(e),
            };
        }
        if recorded.is_err()
            && let Err(e) = self
                .vfs
                .rmdir(self.ctx(), self.root(), name.as_bytes())
                .await
        {
            tracing::warn!("bucket {name} is left without its owner record: {e}");
        }
        recorded
    }

    pub(crate) async fn delete_bucket(
        &self,
        req: S3Request<DeleteBucketInput>,
    ) -> S3Result<S3Response<DeleteBucketOutput>> {
        let name = req.input.bucket;
        self.bucket_dir(&name).await?;
        if !self.opts.multi_buckets {
            return Err(S3Error::with_message(
                S3ErrorCode::InvalidRequest,
                "the volume's own bucket cannot be deleted through the gateway",
            ));
        }
        let dir = self.bucket_dir(&name).await?;
        self.drop_store(dir).await?;
        match self
            .vfs
            .rmdir(self.ctx(), self.root(), name.as_bytes())
            .await
        {
            Ok(()) => Ok(S3Response::new(DeleteBucketOutput {})),
            Err(Errno::ENOTEMPTY) => Err(S3Error::with_message(
                S3ErrorCode::BucketNotEmpty,
                "the bucket you tried to delete is not empty",
            )),
            Err(e) => Err(fs_error(e, &name)),
        }
    }

    pub(crate) async fn head_bucket(
        &self,
        req: S3Request<HeadBucketInput>,
    ) -> S3Result<S3Response<HeadBucketOutput>> {
        self.bucket_dir(&req.input.bucket).await?;
        Ok(S3Response::new(HeadBucketOutput::default()))
    }

    pub(crate) async fn get_bucket_location(
        &self,
        req: S3Request<GetBucketLocationInput>,
    ) -> S3Result<S3Response<GetBucketLocationOutput>> {
        self.bucket_dir(&req.input.bucket).await?;
        Ok(S3Response::new(GetBucketLocationOutput::default()))
    }

    pub(crate) async fn list_objects_v2(
        &self,
        req: S3Request<ListObjectsV2Input>,
    ) -> S3Result<S3Response<ListObjectsV2Output>> {
        let input = req.input;
        let dir = self.bucket_dir(&input.bucket).await?;
        let max_keys = checked_max_keys(input.max_keys)?;
        let token = match &input.continuation_token {
            Some(t) => Some(decode_token(t)?),
            None => None,
        };
        let after = token.as_deref().or(input.start_after.as_deref());
        let prefix = input.prefix.clone().unwrap_or_default();
        let q = ListQuery {
            prefix: &prefix,
            delimiter: input.delimiter.as_deref(),
            after,
            max_keys: usize::try_from(max_keys).unwrap_or(0),
            store: false,
        };
        let listing = self.list(dir, &q).await?;
        let next = listing
            .truncated
            .then(|| listing.items.last().map(|i| encode_token(i.key())))
            .flatten();
        let url = input
            .encoding_type
            .as_ref()
            .is_some_and(|e| e.as_str() == "url");
        let owner = match input.fetch_owner {
            Some(true) => Some(self.owner_of(&self.bucket_owner(dir).await?)),
            _ => None,
        };
        let (contents, prefixes) = self.page_items(listing, url, owner).await;
        let output = ListObjectsV2Output {
            name: Some(input.bucket),
            prefix: Some(encode(&prefix, url)),
            delimiter: input.delimiter.map(|d| encode(&d, url)),
            start_after: input.start_after.map(|s| encode(&s, url)),
            max_keys: Some(max_keys),
            key_count: Some(i32::try_from(contents.len() + prefixes.len()).unwrap_or(i32::MAX)),
            continuation_token: input.continuation_token,
            next_continuation_token: next.clone(),
            is_truncated: Some(next.is_some()),
            contents: Some(contents),
            common_prefixes: Some(prefixes),
            encoding_type: input.encoding_type,
            ..ListObjectsV2Output::default()
        };
        Ok(S3Response::new(output))
    }

    pub(crate) async fn list_objects(
        &self,
        req: S3Request<ListObjectsInput>,
    ) -> S3Result<S3Response<ListObjectsOutput>> {
        let input = req.input;
        let dir = self.bucket_dir(&input.bucket).await?;
        let max_keys = checked_max_keys(input.max_keys)?;
        let prefix = input.prefix.clone().unwrap_or_default();
        let q = ListQuery {
            prefix: &prefix,
            delimiter: input.delimiter.as_deref(),
            after: input.marker.as_deref().filter(|m| !m.is_empty()),
            max_keys: usize::try_from(max_keys).unwrap_or(0),
            store: false,
        };
        let listing = self.list(dir, &q).await?;
        let truncated = listing.truncated;
        let url = input
            .encoding_type
            .as_ref()
            .is_some_and(|e| e.as_str() == "url");
        // NextMarker only comes with a delimiter (without one, clients use the last key).
        let next_marker = (truncated && input.delimiter.is_some())
            .then(|| listing.items.last().map(|i| encode(i.key(), url)))
            .flatten();
        // ListObjects (v1) names each object's owner, as AWS does.
        let owner = Some(self.owner_of(&self.bucket_owner(dir).await?));
        let (contents, prefixes) = self.page_items(listing, url, owner).await;
        let output = ListObjectsOutput {
            name: Some(input.bucket),
            prefix: Some(encode(&prefix, url)),
            delimiter: input.delimiter.map(|d| encode(&d, url)),
            marker: Some(input.marker.map(|m| encode(&m, url)).unwrap_or_default()),
            next_marker,
            max_keys: Some(max_keys),
            is_truncated: Some(truncated),
            contents: Some(contents),
            common_prefixes: Some(prefixes),
            encoding_type: input.encoding_type,
            ..ListObjectsOutput::default()
        };
        Ok(S3Response::new(output))
    }

    /// The listing's objects (with their ETags, and `owner` when given) and common
    /// prefixes.
    async fn page_items(
        &self,
        listing: Listing,
        url: bool,
        owner: Option<Owner>,
    ) -> (Vec<Object>, Vec<CommonPrefix>) {
        let mut prefixes = Vec::new();
        let mut objects = Vec::new();
        for item in listing.items {
            match item {
                Item::Prefix(p) => prefixes.push(CommonPrefix {
                    prefix: Some(encode(&p, url)),
                }),
                Item::Object {
                    key,
                    ino,
                    attr,
                    is_dir,
                } => objects.push((key, ino, attr, is_dir)),
            }
        }
        let contents = futures::stream::iter(objects)
            .map(|(key, ino, attr, is_dir)| {
                let owner = owner.clone();
                async move {
                    let etag = if is_dir {
                        EMPTY_ETAG.to_owned()
                    } else {
                        match self.load_info(ino, &attr).await {
                            Some(info) => info.etag,
                            None => derived_etag(ino, &attr),
                        }
                    };
                    Object {
                        key: Some(encode(&key, url)),
                        size: Some(if is_dir {
                            0
                        } else {
                            i64::try_from(attr.length).unwrap_or(i64::MAX)
                        }),
                        last_modified: Some(Timestamp::from(system_time(attr.mtime))),
                        e_tag: Some(ETag::Strong(etag)),
                        storage_class: Some("STANDARD".to_owned().into()),
                        owner,
                        ..Object::default()
                    }
                }
            })
            .buffered(INFO_PARALLEL)
            .collect()
            .await;
        (contents, prefixes)
    }
}

fn bucket(name: &str, ctime: i64) -> Bucket {
    Bucket {
        name: Some(name.to_owned()),
        creation_date: Some(Timestamp::from(system_time(ctime))),
        bucket_region: None,
    }
}

pub(crate) fn checked_max_keys(max_keys: Option<i32>) -> S3Result<i32> {
    match max_keys {
        None => Ok(MAX_KEYS),
        Some(n) if n < 0 => Err(S3Error::with_message(
            S3ErrorCode::InvalidArgument,
            "max-keys cannot be negative",
        )),
        Some(n) => Ok(n.min(MAX_KEYS)),
    }
}

/// A continuation token: the last key or prefix returned, base64 (opaque to clients).
fn encode_token(key: &str) -> String {
    base64_simd::URL_SAFE_NO_PAD.encode_to_string(key.as_bytes())
}

fn decode_token(token: &str) -> S3Result<String> {
    base64_simd::URL_SAFE_NO_PAD
        .decode_to_vec(token.as_bytes())
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or_else(|| {
            S3Error::with_message(
                S3ErrorCode::InvalidArgument,
                "the continuation token is not valid",
            )
        })
}

/// A key for `encoding-type=url`: every byte but unreserved ones and '/' percent-encoded.
pub(crate) fn encode(text: &str, url: bool) -> String {
    if !url {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b'/') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_encoding_keeps_slashes_and_unreserved_bytes() {
        assert_eq!(encode("a b/c+d/ü", true), "a%20b/c%2Bd/%C3%BC");
        assert_eq!(encode("a b", false), "a b");
    }

    #[test]
    fn tokens_round_trip() {
        let t = encode_token("dir/ключ");
        assert_eq!(decode_token(&t).unwrap(), "dir/ключ");
        assert!(decode_token("***").is_err());
    }

    #[test]
    fn max_keys_is_bounded() {
        assert_eq!(checked_max_keys(None).unwrap(), 1000);
        assert_eq!(checked_max_keys(Some(5000)).unwrap(), 1000);
        assert_eq!(checked_max_keys(Some(0)).unwrap(), 0);
        assert!(checked_max_keys(Some(-1)).is_err());
    }
}
