//! The S3 operations of versioned buckets: Get/PutBucketVersioning, finding and deleting
//! one version, DELETE on a versioned bucket (a delete marker), and ListObjectVersions
//! (the bucket's tree and the version store's tree listed side by side in key order).

use std::collections::BTreeMap;

use s3s::dto::{
    BucketVersioningStatus, CommonPrefix, DeleteMarkerEntry, ETag, GetBucketVersioningInput,
    GetBucketVersioningOutput, ListObjectVersionsInput, ListObjectVersionsOutput, ObjectVersion,
    Owner, PutBucketVersioningInput, PutBucketVersioningOutput, Timestamp,
};
use s3s::{S3Error, S3ErrorCode, S3Request, S3Response, S3Result};
use strata_types::{Errno, Ino};

use crate::Gateway;
use crate::bucket::{checked_max_keys, encode};
use crate::error::fs_error;
use crate::keys::{ObjectPath, parse_key};
use crate::list::{Item, ListQuery, Listing};
use crate::objinfo::derived_etag;
use crate::read::{EMPTY_ETAG, Found, no_such_key, system_time};
use crate::versions::{
    NULL_VERSION, VERSIONING_XATTR, Version, Versioning, invalid_version, shown_id,
    valid_version_id,
};

/// What deleting a key or a version did, for DeleteObject(s)'s answer.
#[derive(Debug, Default)]
pub struct Deleted {
    pub version_id: Option<String>,
    pub delete_marker: bool,
}

fn no_such_version(key: &str, id: &str) -> S3Error {
    S3Error::with_message(
        S3ErrorCode::NoSuchVersion,
        format!("no version {id} of {key}"),
    )
}

/// A GET or HEAD of a delete marker by its id: 405 with the marker's headers.
fn marker_not_allowed(id: &str) -> S3Error {
    let mut e = S3Error::with_message(
        S3ErrorCode::MethodNotAllowed,
        "The specified method is not allowed against this resource.",
    );
    e.set_headers(marker_headers(id));
    e
}

fn marker_headers(id: &str) -> hyper::HeaderMap {
    let mut headers = hyper::HeaderMap::new();
    headers.insert(
        "x-amz-delete-marker",
        hyper::header::HeaderValue::from_static("true"),
    );
    if let Ok(value) = hyper::header::HeaderValue::from_str(id) {
        headers.insert("x-amz-version-id", value);
    }
    headers
}

impl Gateway {
    pub(crate) async fn get_bucket_versioning(
        &self,
        req: S3Request<GetBucketVersioningInput>,
    ) -> S3Result<S3Response<GetBucketVersioningOutput>> {
        let dir = self.bucket_dir(&req.input.bucket).await?;
        let status = match self.versioning(dir).await? {
            Versioning::Off => None,
            Versioning::Enabled => Some(BucketVersioningStatus::from_static(
                BucketVersioningStatus::ENABLED,
            )),
            Versioning::Suspended => Some(BucketVersioningStatus::from_static(
                BucketVersioningStatus::SUSPENDED,
            )),
        };
        Ok(S3Response::new(GetBucketVersioningOutput {
            status,
            mfa_delete: None,
        }))
    }

    pub(crate) async fn put_bucket_versioning(
        &self,
        req: S3Request<PutBucketVersioningInput>,
    ) -> S3Result<S3Response<PutBucketVersioningOutput>> {
        let dir = self.bucket_dir(&req.input.bucket).await?;
        let config = &req.input.versioning_configuration;
        if config
            .mfa_delete
            .as_ref()
            .is_some_and(|m| m.as_str() == "Enabled")
        {
            return Err(S3Error::with_message(
                S3ErrorCode::NotImplemented,
                "MFA delete is not supported",
            ));
        }
        let status = match config.status.as_ref().map(BucketVersioningStatus::as_str) {
            Some(s @ (BucketVersioningStatus::ENABLED | BucketVersioningStatus::SUSPENDED)) => s,
            _ => {
                return Err(S3Error::with_message(
                    S3ErrorCode::MalformedXML,
                    "the versioning status must be Enabled or Suspended",
                ));
            }
        };
        if status == BucketVersioningStatus::SUSPENDED && self.bucket_lock(dir).await?.is_some() {
            return Err(S3Error::with_message(
                S3ErrorCode::InvalidBucketState,
                "An Object Lock configuration is present on this bucket, so the versioning state cannot be changed.",
            ));
        }
        self.store_xattr(dir, VERSIONING_XATTR, Some(status.as_bytes()))
            .await?;
        Ok(S3Response::new(PutBucketVersioningOutput {}))
    }

    /// The version `id` of `key` in `bucket`: the key's file if it is that version, else
    /// the store's. A delete marker is 405, an unknown id NoSuchVersion.
    pub(crate) async fn find_version(&self, bucket: &str, key: &str, id: &str) -> S3Result<Found> {
        if !valid_version_id(id) {
            return Err(invalid_version(id));
        }
        let path = parse_key(key)?;
        let bucket_dir = self.bucket_dir(bucket).await?;
        match self.find(bucket, key).await {
            Ok(found) if shown_id(found.version_id.as_deref()) == id => return Ok(found),
            Ok(_) => {}
            Err(e) if *e.code() == S3ErrorCode::NoSuchKey => {}
            Err(e) => return Err(e),
        }
        let Some(store) = self.key_store(bucket_dir, &path, false).await? else {
            return Err(no_such_version(key, id));
        };
        let entry = match self
            .vfs
            .lookup(&self.server_ctx, store, id.as_bytes())
            .await
        {
            Ok(entry) => entry,
            Err(Errno::ENOENT) => return Err(no_such_version(key, id)),
            Err(e) => return Err(fs_error(e, key)),
        };
        let record = self.load_record(entry.ino, &entry.attr).await;
        if record.as_ref().is_some_and(|r| r.delete_marker) {
            return Err(marker_not_allowed(id));
        }
        Ok(Found::file(entry, record))
    }

    /// NoSuchKey for `key`, with the delete marker's headers when the key's newest
    /// version is one (as AWS answers a GET or HEAD of a deleted key).
    pub(crate) async fn missing_key(&self, bucket: &str, key: &str) -> S3Error {
        let mut e = no_such_key(key);
        let (Ok(path), Ok(dir)) = (parse_key(key), self.bucket_dir(bucket).await) else {
            return e;
        };
        if let Ok(Some(store)) = self.key_store(dir, &path, false).await
            && let Ok(versions) = self.stored_versions(store).await
            && let Some(newest) = versions.first().filter(|v| v.is_marker())
        {
            e.set_headers(marker_headers(&newest.id));
        }
        e
    }

    /// DeleteObject and each key of DeleteObjects: a version when `version_id` names
    /// one, else the key (leaving a delete marker when the bucket's `state`, read once
    /// per request, is versioned).
    pub(crate) async fn delete_one(
        &self,
        (bucket_dir, state): (Ino, Versioning),
        key: &str,
        (version_id, bypass): (Option<&str>, bool),
    ) -> S3Result<Deleted> {
        if let Some(id) = version_id {
            return self.delete_version(bucket_dir, key, (id, bypass)).await;
        }
        let path = parse_key(key)?;
        if state == Versioning::Off || path.is_dir() {
            self.delete_key(bucket_dir, key).await?;
            return Ok(Deleted::default());
        }
        let (parent, chain) = match self.walk_chain(bucket_dir, &path.dirs).await {
            Ok((parent, chain)) => (Some(parent), chain),
            Err(Errno::ENOENT | Errno::ENOTDIR) => (None, None),
            Err(e) => return Err(fs_error(e, key)),
        };
        let id = self
            .delete_versioned(bucket_dir, &path, parent, state)
            .await?;
        if let Some(chain) = chain {
            self.remove_empty_dirs(&chain, &path.dirs).await;
        }
        Ok(Deleted {
            version_id: Some(id),
            delete_marker: true,
        })
    }

    /// Remove the version `id` of `key` for good; the newest remaining version becomes
    /// current when it was the current one. An id the key never had is not an error.
    async fn delete_version(
        &self,
        bucket_dir: Ino,
        key: &str,
        (id, bypass): (&str, bool),
    ) -> S3Result<Deleted> {
        if !valid_version_id(id) {
            return Err(invalid_version(id));
        }
        let path = parse_key(key)?;
        let done = Deleted {
            version_id: Some(id.to_owned()),
            delete_marker: false,
        };
        let Some(name) = path.name else {
            return Ok(done);
        };
        let (parent, chain) = match self.walk_chain(bucket_dir, &path.dirs).await {
            Ok((parent, chain)) => (Some(parent), chain),
            Err(Errno::ENOENT | Errno::ENOTDIR) => (None, None),
            Err(e) => return Err(fs_error(e, key)),
        };
        let store = self.key_store(bucket_dir, &path, false).await?;
        if let Some(parent) = parent
            && let Some(cur) = self.current_version(parent, name).await?
            && cur.id == id
        {
            self.check_deletable((cur.ino, &cur.attr), key, bypass)
                .await?;
            match self.vfs.unlink(self.ctx(), parent, name.as_bytes()).await {
                Ok(()) | Err(Errno::ENOENT) => {}
                Err(e) => return Err(fs_error(e, key)),
            }
            if let Some(store) = store {
                self.settle_current(bucket_dir, &path, store).await?;
                self.prune_store(bucket_dir, &path).await;
            }
            // Nothing came back to the key's place: its emptied directories go.
            if let Some(chain) = chain {
                self.remove_empty_dirs(&chain, &path.dirs).await;
            }
            return Ok(done);
        }
        let Some(store) = store else {
            return Ok(done);
        };
        let stored = self.stored_versions(store).await?;
        let Some(version) = stored.iter().find(|v| v.id == id) else {
            return Ok(done);
        };
        self.may_remove_from(parent.unwrap_or(bucket_dir), key)
            .await?;
        self.check_deletable((version.ino, &version.attr), key, bypass)
            .await?;
        self.unlink_stored(store, id).await?;
        self.settle_current(bucket_dir, &path, store).await?;
        self.prune_store(bucket_dir, &path).await;
        Ok(Deleted {
            delete_marker: version.is_marker(),
            ..done
        })
    }

    /// Remove the key's store directories that became empty, innermost first.
    async fn prune_store(&self, bucket_dir: Ino, path: &ObjectPath<'_>) {
        let (Some(name), Ok(Some(root))) = (path.name, self.store_root(bucket_dir, false).await)
        else {
            return;
        };
        let mut parts = path.dirs.clone();
        parts.push(name);
        let walk = strata_vfs::paths::PathWalk::from(root);
        let joined = format!("{}/", parts.join("/"));
        let Ok(found) = self
            .vfs
            .resolve(&self.server_ctx, walk, joined.as_bytes())
            .await
        else {
            return;
        };
        let Some(chain) = found.chain else {
            return;
        };
        for (parent, name) in chain.iter().zip(&parts).rev() {
            if self
                .vfs
                .rmdir(&self.server_ctx, *parent, name.as_bytes())
                .await
                .is_err()
            {
                return;
            }
        }
    }

    /// DeleteBucket: a bucket whose store still holds versions is not empty; an empty
    /// store goes with the bucket.
    pub(crate) async fn drop_store(&self, bucket_dir: Ino) -> S3Result<()> {
        let Some(store) = self.store_base().await? else {
            return Ok(());
        };
        let name = bucket_dir.0.to_string();
        match self
            .vfs
            .rmdir(&self.server_ctx, store, name.as_bytes())
            .await
        {
            Ok(()) | Err(Errno::ENOENT) => Ok(()),
            Err(Errno::ENOTEMPTY) => Err(S3Error::with_message(
                S3ErrorCode::BucketNotEmpty,
                "the bucket you tried to delete still holds object versions",
            )),
            Err(e) => Err(fs_error(e, "version store")),
        }
    }

    pub(crate) async fn list_object_versions(
        &self,
        req: S3Request<ListObjectVersionsInput>,
    ) -> S3Result<S3Response<ListObjectVersionsOutput>> {
        let input = req.input;
        let dir = self.bucket_dir(&input.bucket).await?;
        let max_keys = checked_max_keys(input.max_keys)?;
        let url = input
            .encoding_type
            .as_ref()
            .is_some_and(|e| e.as_str() == "url");
        let key_marker = input.key_marker.clone().filter(|m| !m.is_empty());
        let id_marker = input.version_id_marker.clone().filter(|m| !m.is_empty());
        if id_marker.is_some() && key_marker.is_none() {
            return Err(S3Error::with_message(
                S3ErrorCode::InvalidArgument,
                "A version-id marker cannot be specified without a key marker.",
            ));
        }
        let owner = self.owner_of(&self.bucket_owner(dir).await?);
        let prefix = input.prefix.clone().unwrap_or_default();
        let query = ListQuery {
            prefix: &prefix,
            delimiter: input.delimiter.as_deref(),
            after: key_marker.as_deref(),
            max_keys: usize::try_from(max_keys).unwrap_or(0),
            store: false,
        };
        let mut page = VersionPage {
            owner,
            url,
            ..VersionPage::default()
        };
        self.version_page(dir, query, id_marker.as_deref(), &mut page)
            .await?;
        let output = ListObjectVersionsOutput {
            name: Some(input.bucket),
            prefix: Some(encode(&prefix, url)),
            delimiter: input.delimiter.map(|d| encode(&d, url)),
            key_marker: Some(key_marker.map(|m| encode(&m, url)).unwrap_or_default()),
            version_id_marker: Some(id_marker.unwrap_or_default()),
            max_keys: Some(max_keys),
            is_truncated: Some(page.truncated),
            next_key_marker: page.next_key.map(|k| encode(&k, url)),
            next_version_id_marker: page.next_id,
            versions: Some(page.versions),
            delete_markers: Some(page.markers),
            common_prefixes: Some(page.prefixes),
            encoding_type: input.encoding_type,
            ..ListObjectVersionsOutput::default()
        };
        Ok(S3Response::new(output))
    }

    /// Fill `page` with the versions `query` selects (its `after` is the key marker,
    /// `id_marker` the version-id marker, its `max_keys` the page's size).
    pub(crate) async fn version_page(
        &self,
        dir: Ino,
        query: ListQuery<'_>,
        id_marker: Option<&str>,
        page: &mut VersionPage,
    ) -> S3Result<()> {
        page.max = query.max_keys;
        let store = self.store_root(dir, false).await?;
        if let (Some(km), Some(vm)) = (query.after, id_marker) {
            self.versions_after(dir, store, km, vm, page).await?;
        }
        let query = ListQuery {
            max_keys: page.max + 1,
            ..query
        };
        self.fill_versions(dir, store, query, page).await
    }

    /// The versions of the marker's key older than the version-id marker.
    async fn versions_after(
        &self,
        dir: Ino,
        store: Option<Ino>,
        key: &str,
        id: &str,
        page: &mut VersionPage,
    ) -> S3Result<()> {
        let path = match parse_key(key) {
            Ok(path) => path,
            Err(_) => return Ok(()),
        };
        let live = match (path.name, self.walk(dir, &path.dirs).await) {
            (Some(name), Ok(parent)) => self.current_version(parent, name).await?,
            _ => None,
        };
        let stored = match store {
            Some(_) => self.key_store(dir, &path, false).await?,
            None => None,
        };
        let versions = self.versions_of(live, stored).await?;
        let Some(at) = versions.iter().position(|v| v.id == id) else {
            return Ok(());
        };
        for v in versions.iter().skip(at + 1) {
            if !page.add_version(key, v, false) {
                break;
            }
        }
        Ok(())
    }

    /// The current version (if any) then the stored ones, newest first.
    async fn versions_of(
        &self,
        live: Option<Version>,
        stored: Option<Ino>,
    ) -> S3Result<Vec<Version>> {
        let mut versions: Vec<Version> = live.into_iter().collect();
        if let Some(dir) = stored {
            let current = versions.first().map(|v| v.ino);
            versions.extend(
                self.stored_versions(dir)
                    .await?
                    .into_iter()
                    .filter(|v| Some(v.ino) != current),
            );
        }
        Ok(versions)
    }

    /// Page through the bucket and the store side by side until the page is full.
    async fn fill_versions(
        &self,
        dir: Ino,
        store: Option<Ino>,
        query: ListQuery<'_>,
        page: &mut VersionPage,
    ) -> S3Result<()> {
        let mut after = query.after.map(str::to_owned);
        while !page.truncated {
            let query = ListQuery {
                after: after.as_deref(),
                ..query
            };
            let live = self.list(dir, &query).await?;
            let kept = match store {
                Some(root) => {
                    let q = ListQuery {
                        store: true,
                        ..query
                    };
                    self.list(root, &q).await?
                }
                None => Listing::default(),
            };
            let bound = [&live, &kept]
                .iter()
                .filter(|l| l.truncated)
                .filter_map(|l| l.items.last().map(|i| i.key().to_owned()))
                .min();
            let mut merged: BTreeMap<String, (Option<Item>, Option<Item>)> = BTreeMap::new();
            for item in live.items {
                let key = item.key().to_owned();
                merged.entry(key).or_default().0 = Some(item);
            }
            for item in kept.items {
                let key = item.key().to_owned();
                merged.entry(key).or_default().1 = Some(item);
            }
            for (key, (live, kept)) in merged {
                if bound.as_ref().is_some_and(|b| key > *b) {
                    break;
                }
                if !self.add_key(&key, live, kept, page).await? {
                    return Ok(());
                }
            }
            match bound {
                Some(b) => after = Some(b),
                None => return Ok(()),
            }
        }
        Ok(())
    }

    /// Add one key's versions (or a common prefix); false when the page filled up.
    async fn add_key(
        &self,
        key: &str,
        live: Option<Item>,
        kept: Option<Item>,
        page: &mut VersionPage,
    ) -> S3Result<bool> {
        if matches!(live, Some(Item::Prefix(_))) || matches!(kept, Some(Item::Prefix(_))) {
            return Ok(page.add_prefix(key));
        }
        let current = match live {
            Some(Item::Object {
                ino,
                attr,
                is_dir: false,
                ..
            }) => {
                let record = self.load_record(ino, &attr).await;
                Some(Version {
                    id: shown_id(record.as_ref().and_then(|r| r.version_id.as_deref())),
                    ino,
                    attr,
                    record,
                })
            }
            Some(Item::Object {
                ino,
                attr,
                is_dir: true,
                ..
            }) => Some(Version {
                id: NULL_VERSION.into(),
                ino,
                attr,
                record: None,
            }),
            _ => None,
        };
        let stored = match kept {
            Some(Item::Object { ino, .. }) => Some(ino),
            _ => None,
        };
        let dir_key = current
            .as_ref()
            .is_some_and(|c| c.record.is_none() && c.attr.is_dir());
        let versions = self.versions_of(current, stored).await?;
        for (i, v) in versions.iter().enumerate() {
            let shown = if dir_key {
                EMPTY_ETAG.to_owned()
            } else {
                String::new()
            };
            if !page.add_version_etag(key, v, i == 0, shown) {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// One page of ListObjectVersions being filled.
#[derive(Default)]
pub(crate) struct VersionPage {
    max: usize,
    count: usize,
    owner: Owner,
    url: bool,
    pub versions: Vec<ObjectVersion>,
    pub markers: Vec<DeleteMarkerEntry>,
    pub prefixes: Vec<CommonPrefix>,
    last_prefix: Option<String>,
    pub truncated: bool,
    next_key: Option<String>,
    next_id: Option<String>,
    /// Every entry in the order added: key, version id, latest, delete marker.
    pub order: Vec<(String, String, bool, bool)>,
}

impl VersionPage {
    /// Room for one more entry; marks the page truncated when there is none.
    fn room(&mut self) -> bool {
        if self.count < self.max {
            return true;
        }
        self.truncated = true;
        false
    }

    fn add_prefix(&mut self, prefix: &str) -> bool {
        if self.last_prefix.as_deref() == Some(prefix) {
            return true;
        }
        if !self.room() {
            return false;
        }
        self.count += 1;
        self.last_prefix = Some(prefix.to_owned());
        self.prefixes.push(CommonPrefix {
            prefix: Some(encode(prefix, self.url)),
        });
        self.next_key = Some(prefix.to_owned());
        self.next_id = None;
        true
    }

    fn add_version(&mut self, key: &str, v: &Version, latest: bool) -> bool {
        self.add_version_etag(key, v, latest, String::new())
    }

    /// Add `v` of `key`; `etag` overrides the version's own when not empty.
    fn add_version_etag(&mut self, key: &str, v: &Version, latest: bool, etag: String) -> bool {
        if !self.room() {
            return false;
        }
        self.count += 1;
        self.next_key = Some(key.to_owned());
        self.next_id = Some(v.id.clone());
        self.order
            .push((key.to_owned(), v.id.clone(), latest, v.is_marker()));
        let modified = Some(Timestamp::from(system_time(v.attr.mtime)));
        if v.is_marker() {
            self.markers.push(DeleteMarkerEntry {
                is_latest: Some(latest),
                key: Some(encode(key, self.url)),
                last_modified: modified,
                owner: Some(self.owner.clone()),
                version_id: Some(v.id.clone()),
            });
            return true;
        }
        let etag = if !etag.is_empty() {
            etag
        } else {
            v.info()
                .map_or_else(|| derived_etag(v.ino, &v.attr), |i| i.etag)
        };
        let size = if v.attr.is_dir() { 0 } else { v.attr.length };
        self.versions.push(ObjectVersion {
            e_tag: Some(ETag::Strong(etag)),
            is_latest: Some(latest),
            key: Some(encode(key, self.url)),
            last_modified: modified,
            owner: Some(self.owner.clone()),
            size: Some(i64::try_from(size).unwrap_or(i64::MAX)),
            storage_class: Some("STANDARD".to_owned().into()),
            version_id: Some(v.id.clone()),
            ..ObjectVersion::default()
        });
        true
    }
}
