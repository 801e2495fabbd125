//! Who may do what: every request passes [`Access`] before the gateway runs it. The root
//! user (the environment's key pair) may do everything. For anyone else — users kept in
//! the volume ([`crate::users`]) and anonymous requests — the bucket's configuration
//! decides, in AWS's order: an explicit Deny in the bucket policy refuses; the bucket's
//! owner may do everything else; then a policy Allow grants; then the bucket's ACL (and,
//! for reading an object, the object's ACL). The public access block removes what
//! public grants would give. Anything not granted is AccessDenied. The check also names
//! the request's operation for the metrics ([`OpName`]).

use std::sync::{Arc, OnceLock};

use s3s::access::{S3Access, S3AccessContext};
use s3s::dto::{CopySource, Grant, Permission};
use s3s::path::S3Path;
use s3s::{S3Error, S3ErrorCode, S3Request, S3Result};

use strata_http::{Peer, UserStore};
use strata_vfs::Ctx;

use crate::Gateway;
use crate::config::{BucketAccess, PublicBlock, grantee_matches};
use crate::policy::{Facts, Verdict, Who};

/// The access control of one gateway.
pub(crate) struct Access {
    pub gateway: Gateway,
}

/// Who a request acts as in the file system when not as the gateway itself: a user kept
/// in the volume with POSIX ids (`strata gateway user add --uid`). The access check puts
/// it in the request's extensions; [`Gateway::acting_for`] takes it from there.
#[derive(Clone, Debug)]
pub(crate) struct Caller(pub(crate) Arc<Ctx>);

fn denied() -> S3Error {
    S3Error::with_message(S3ErrorCode::AccessDenied, "Access Denied")
}

/// The IAM action an S3 operation needs (AWS's names where they differ from the
/// operation's).
pub(crate) fn iam_action(op: &str) -> String {
    let action = match op {
        "HeadObject" => "GetObject",
        "ListObjects" | "ListObjectsV2" | "HeadBucket" => "ListBucket",
        "ListObjectVersions" => "ListBucketVersions",
        "ListMultipartUploads" => "ListBucketMultipartUploads",
        "ListParts" => "ListMultipartUploadParts",
        "PostObject"
        | "CopyObject"
        | "CreateMultipartUpload"
        | "UploadPart"
        | "UploadPartCopy"
        | "CompleteMultipartUpload" => "PutObject",
        "DeleteObjects" => "DeleteObject",
        "GetBucketCors" => "GetBucketCORS",
        "PutBucketCors" | "DeleteBucketCors" => "PutBucketCORS",
        "GetBucketLifecycleConfiguration" => "GetLifecycleConfiguration",
        "PutBucketLifecycleConfiguration" | "DeleteBucketLifecycle" => "PutLifecycleConfiguration",
        "DeleteBucketTagging" => "PutBucketTagging",
        "GetPublicAccessBlock" => "GetBucketPublicAccessBlock",
        "PutPublicAccessBlock" | "DeletePublicAccessBlock" => "PutBucketPublicAccessBlock",
        "DeleteBucketOwnershipControls" => "PutBucketOwnershipControls",
        "GetObjectLockConfiguration" => "GetBucketObjectLockConfiguration",
        "PutObjectLockConfiguration" => "PutBucketObjectLockConfiguration",
        other => other,
    };
    format!("s3:{action}")
}

/// The action a request for one version (`versionId` given) needs instead of `action`,
/// as AWS names them: deleting a version is `s3:DeleteObjectVersion`, reading one
/// `s3:GetObjectVersion`, and so on. A policy denying `s3:DeleteObjectVersion` is how
/// buckets keep their versions.
pub(crate) fn version_action(action: String, of_version: bool) -> String {
    if !of_version {
        return action;
    }
    let versioned = match action.as_str() {
        "s3:DeleteObject" => "s3:DeleteObjectVersion",
        "s3:GetObject" => "s3:GetObjectVersion",
        "s3:GetObjectAttributes" => "s3:GetObjectVersionAttributes",
        "s3:GetObjectTagging" => "s3:GetObjectVersionTagging",
        "s3:PutObjectTagging" => "s3:PutObjectVersionTagging",
        "s3:DeleteObjectTagging" => "s3:DeleteObjectVersionTagging",
        "s3:GetObjectAcl" => "s3:GetObjectVersionAcl",
        "s3:PutObjectAcl" => "s3:PutObjectVersionAcl",
        _ => return action,
    };
    versioned.to_owned()
}

/// The ACL permission that grants `action`, on a bucket's ACL or on an object's.
fn acl_permission(action: &str, on_object: bool) -> Option<&'static str> {
    match (action, on_object) {
        ("s3:ListBucket" | "s3:ListBucketVersions" | "s3:ListBucketMultipartUploads", false) => {
            Some(Permission::READ)
        }
        (
            "s3:PutObject"
            | "s3:DeleteObject"
            | "s3:DeleteObjectVersion"
            | "s3:AbortMultipartUpload"
            | "s3:ListMultipartUploadParts",
            false,
        ) => Some(Permission::WRITE),
        ("s3:GetBucketAcl", false) | ("s3:GetObjectAcl" | "s3:GetObjectVersionAcl", true) => {
            Some(Permission::READ_ACP)
        }
        ("s3:PutBucketAcl", false) | ("s3:PutObjectAcl" | "s3:PutObjectVersionAcl", true) => {
            Some(Permission::WRITE_ACP)
        }
        (
            "s3:GetObject"
            | "s3:GetObjectAttributes"
            | "s3:GetObjectTagging"
            | "s3:GetObjectVersion"
            | "s3:GetObjectVersionAttributes"
            | "s3:GetObjectVersionTagging",
            true,
        ) => Some(Permission::READ),
        _ => None,
    }
}

/// Whether `grants` give `who` the permission `wanted` (FULL_CONTROL gives all).
pub(crate) fn acl_allows(grants: &[Grant], who: &Who, wanted: &str, block: &PublicBlock) -> bool {
    grants.iter().any(|g| {
        let perm = g.permission.as_ref().map(Permission::as_str);
        let perm_ok = perm == Some(wanted) || perm == Some(Permission::FULL_CONTROL);
        perm_ok
            && g.grantee
                .as_ref()
                .is_some_and(|grantee| grantee_matches(grantee, who, block.ignore_public_acls))
    })
}

impl Gateway {
    /// Decide whether `who` may do `op` on `bucket` (and `key`).
    pub(crate) async fn authorize(
        &self,
        (who, facts): (&Who, &Facts),
        op: &str,
        bucket: &str,
        key: Option<&str>,
    ) -> S3Result<()> {
        let dir = self.bucket_dir(bucket).await?;
        let access = self.bucket_access(dir, bucket).await?;
        let action = version_action(iam_action(op), facts.has("s3:VersionId"));
        let resource = match key {
            Some(k) => format!("arn:aws:s3:::{bucket}/{k}"),
            None => format!("arn:aws:s3:::{bucket}"),
        };
        self.decide((who, facts), &access, (&action, &resource), bucket, key)
            .await
    }

    async fn decide(
        &self,
        (who, facts): (&Who, &Facts),
        access: &BucketAccess,
        (action, resource): (&str, &str),
        bucket: &str,
        key: Option<&str>,
    ) -> S3Result<()> {
        let restrict = access.block.restrict_public_buckets;
        let verdict = match &access.policy {
            Some(p) => {
                let facts = match key {
                    Some(key) if p.reads_existing_tags() => {
                        self.with_existing_tags(facts, bucket, key).await?
                    }
                    _ => facts.clone(),
                };
                p.evaluate(who, (action, resource), restrict, &facts)
            }
            None => Verdict::Silent,
        };
        if verdict == Verdict::Deny {
            return Err(denied());
        }
        if matches!(who, Who::User(me) if *me == access.owner) || verdict == Verdict::Allow {
            return Ok(());
        }
        if let Some(perm) = acl_permission(action, false)
            && acl_allows(&access.acl, who, perm, &access.block)
        {
            return Ok(());
        }
        if let (Some(key), Some(perm)) = (key, acl_permission(action, true))
            && let Some(grants) = self.object_acl(bucket, key).await?
            && acl_allows(&grants, who, perm, &access.block)
        {
            return Ok(());
        }
        Err(denied())
    }

    /// Like [`Gateway::authorize`] for each of `keys` (the bucket's settings read once),
    /// each a key and whether a version of it is named.
    pub(crate) async fn authorize_keys(
        &self,
        who: (&Who, &Facts),
        op: &str,
        bucket: &str,
        keys: &[(&str, bool)],
    ) -> S3Result<()> {
        match self.denied_keys(who, op, bucket, keys).await?.is_empty() {
            true => Ok(()),
            false => Err(denied()),
        }
    }

    /// The positions in `keys` of those the caller may not act on with `op`; other
    /// errors (no such bucket, …) fail the whole request.
    pub(crate) async fn denied_keys(
        &self,
        (who, facts): (&Who, &Facts),
        op: &str,
        bucket: &str,
        keys: &[(&str, bool)],
    ) -> S3Result<Vec<usize>> {
        let dir = self.bucket_dir(bucket).await?;
        let access = self.bucket_access(dir, bucket).await?;
        let action = iam_action(op);
        let versioned = version_action(action.clone(), true);
        let mut refused = Vec::new();
        for (at, (key, of_version)) in keys.iter().enumerate() {
            let action = if *of_version { &versioned } else { &action };
            let resource = format!("arn:aws:s3:::{bucket}/{key}");
            let decided = self
                .decide(
                    (who, facts),
                    &access,
                    (action, &resource),
                    bucket,
                    Some(key),
                )
                .await;
            match decided {
                Ok(()) => {}
                Err(e) if *e.code() == S3ErrorCode::AccessDenied => refused.push(at),
                Err(e) => return Err(e),
            }
        }
        Ok(refused)
    }

    /// A copy's source must be readable by the caller too.
    async fn authorize_copy_source(
        &self,
        who: (&Who, &Facts),
        source: &CopySource,
    ) -> S3Result<()> {
        match source {
            CopySource::Bucket {
                bucket,
                key,
                version_id,
            } => {
                let key = [(&**key, version_id.is_some())];
                self.authorize_keys(who, "GetObject", bucket, &key).await
            }
            _ => Err(S3Error::with_message(
                S3ErrorCode::NotImplemented,
                "access points and outposts are not supported",
            )),
        }
    }
}

impl Access {
    /// A copy's source must be readable by `who` (`None`: the root user).
    async fn check_source<T>(&self, req: &S3Request<T>, source: &CopySource) -> S3Result<()> {
        match self.who(req) {
            Some(who) => {
                let facts = request_facts(&req.headers, &req.uri, req.extensions.get(), &who);
                self.gateway
                    .authorize_copy_source((&who, &facts), source)
                    .await
            }
            None => Ok(()),
        }
    }

    /// The ids the user `access_key` acts as, when it was given its own.
    async fn caller(&self, access_key: &str) -> S3Result<Option<Ctx>> {
        let gw = &self.gateway;
        let users = UserStore::new(gw.vfs.clone(), gw.server_ctx.clone());
        let user = users.user(access_key).await.map_err(|e| {
            tracing::error!("reading the gateway's users: {e}");
            S3Error::with_message(
                S3ErrorCode::InternalError,
                "cannot read the gateway's users",
            )
        })?;
        let identity = &gw.vfs.options().identity;
        Ok(user
            .and_then(|u| u.posix)
            .map(|ids| identity.volume_user(ids.uid, ids.gid, &ids.groups)))
    }

    /// Who signed the request; `None` for the root user (no checks).
    fn who<T>(&self, req: &S3Request<T>) -> Option<Who> {
        self.who_of(req.credentials.as_ref())
    }

    /// Who `credentials` are: `None` for the root user (no checks), else a user or
    /// anonymous.
    fn who_of(&self, credentials: Option<&s3s::auth::Credentials>) -> Option<Who> {
        match credentials {
            Some(c) if c.access_key == self.gateway.opts.root_access_key => None,
            Some(c) => Some(Who::User(c.access_key.clone())),
            None => Some(Who::Anonymous),
        }
    }
}

#[async_trait::async_trait]
impl S3Access for Access {
    async fn check(&self, cx: &mut S3AccessContext<'_>) -> S3Result<()> {
        let op_name = cx.s3_op().name().to_string();
        if let Some(slot) = cx.extensions_mut().get::<OpName>() {
            let _ = slot.0.set(op_name);
        }
        let Some(who) = self.who_of(cx.credentials()) else {
            return Ok(());
        };
        if let Who::User(key) = &who
            && let Some(ctx) = self.caller(key).await?
        {
            cx.extensions_mut().insert(Caller(Arc::new(ctx)));
        }
        let peer = cx.extensions_mut().get::<Peer>().copied();
        let facts = request_facts(cx.headers(), cx.uri(), peer.as_ref(), &who);
        let asker = (&who, &facts);
        let op = cx.s3_op().name();
        match cx.s3_path() {
            // ListBuckets lists what the caller owns.
            S3Path::Root => match who {
                Who::Anonymous => Err(denied()),
                Who::User(_) => Ok(()),
            },
            S3Path::Bucket { bucket } => match (op, &who) {
                ("CreateBucket", Who::User(_)) => Ok(()),
                ("CreateBucket", Who::Anonymous) => Err(denied()),
                // Decided per key once the request is read (the hooks below).
                ("DeleteObjects" | "PostObject", _) => Ok(()),
                _ => self.gateway.authorize(asker, op, bucket, None).await,
            },
            S3Path::Object { bucket, key } => {
                self.gateway.authorize(asker, op, bucket, Some(key)).await?;
                if bypasses_governance(cx.headers()) {
                    let bypass = "BypassGovernanceRetention";
                    self.gateway
                        .authorize(asker, bypass, bucket, Some(key))
                        .await?;
                }
                Ok(())
            }
        }
    }

    async fn copy_object(&self, req: &mut S3Request<s3s::dto::CopyObjectInput>) -> S3Result<()> {
        self.check_source(req, &req.input.copy_source).await
    }

    async fn upload_part_copy(
        &self,
        req: &mut S3Request<s3s::dto::UploadPartCopyInput>,
    ) -> S3Result<()> {
        self.check_source(req, &req.input.copy_source).await
    }

    /// Each key of a DeleteObjects the caller may not delete (or may not bypass a
    /// governance retention of, when asked to) is answered AccessDenied in the response,
    /// as S3 answers; the others are deleted.
    async fn delete_objects(
        &self,
        req: &mut S3Request<s3s::dto::DeleteObjectsInput>,
    ) -> S3Result<()> {
        let Some(who) = self.who(req) else {
            return Ok(());
        };
        let keys: Vec<(&str, bool)> = req
            .input
            .delete
            .objects
            .iter()
            .map(|o| (o.key.as_str(), o.version_id.is_some()))
            .collect();
        let facts = request_facts(&req.headers, &req.uri, req.extensions.get(), &who);
        let bucket = &req.input.bucket;
        let mut refused = self
            .gateway
            .denied_keys((&who, &facts), "DeleteObject", bucket, &keys)
            .await?;
        if bypasses_governance(&req.headers) {
            let bypass = "BypassGovernanceRetention";
            let more = self
                .gateway
                .denied_keys((&who, &facts), bypass, bucket, &keys)
                .await?;
            refused.extend(more);
        }
        if !refused.is_empty() {
            req.extensions.insert(DeniedKeys(Arc::new(refused)));
        }
        Ok(())
    }

    /// A form upload writes the key its form names.
    async fn post_object(&self, req: &mut S3Request<s3s::dto::PostObjectInput>) -> S3Result<()> {
        match self.who(req) {
            Some(who) => {
                let key = [(req.input.key.as_str(), false)];
                let facts = request_facts(&req.headers, &req.uri, req.extensions.get(), &who);
                self.gateway
                    .authorize_keys((&who, &facts), "PutObject", &req.input.bucket, &key)
                    .await
            }
            None => Ok(()),
        }
    }
}

/// The positions of a DeleteObjects' keys the caller may not delete (set by the access
/// check, answered per key by the operation).
#[derive(Clone, Debug, Default)]
pub(crate) struct DeniedKeys(pub Arc<Vec<usize>>);

/// The request asks to bypass governance retentions (`s3:BypassGovernanceRetention`).
fn bypasses_governance(headers: &hyper::HeaderMap) -> bool {
    headers
        .get("x-amz-bypass-governance-retention")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

/// The S3 operation a request turned out to be, filled in by the access check once s3s
/// has routed it (requests refused before routing stay "Unrouted").
#[derive(Clone, Debug, Default)]
pub(crate) struct OpName(pub(crate) Arc<OnceLock<String>>);

/// What a request is known by for policy conditions: the client's address and transport,
/// the signing user, the time, and the headers and query parameters S3's keys name.
pub(crate) fn request_facts(
    headers: &hyper::HeaderMap,
    uri: &hyper::Uri,
    peer: Option<&Peer>,
    who: &Who,
) -> Facts {
    let mut facts = Facts::default();
    if let Some(peer) = peer {
        let ip = match peer.addr.ip() {
            std::net::IpAddr::V6(v6) => v6
                .to_ipv4_mapped()
                .map_or(std::net::IpAddr::V6(v6), std::net::IpAddr::V4),
            v4 => v4,
        };
        facts.set("aws:SourceIp", ip.to_string());
        facts.set("aws:SecureTransport", peer.tls.to_string());
    }
    if let Who::User(key) = who {
        facts.set("aws:username", key.clone());
        facts.set("aws:userid", key.clone());
    }
    let now = time::OffsetDateTime::now_utc();
    if let Ok(text) = now.format(&time::format_description::well_known::Rfc3339) {
        facts.set("aws:CurrentTime", text);
    }
    facts.set("aws:EpochTime", now.unix_timestamp().to_string());
    for (header, key) in [
        ("user-agent", "aws:UserAgent"),
        ("referer", "aws:Referer"),
        ("x-amz-acl", "s3:x-amz-acl"),
        ("x-amz-copy-source", "s3:x-amz-copy-source"),
        ("x-amz-metadata-directive", "s3:x-amz-metadata-directive"),
        ("x-amz-content-sha256", "s3:x-amz-content-sha256"),
        (
            "x-amz-server-side-encryption",
            "s3:x-amz-server-side-encryption",
        ),
    ] {
        if let Some(value) = headers.get(header).and_then(|v| v.to_str().ok()) {
            facts.set(key, value);
        }
    }
    if let Some(tagging) = headers.get("x-amz-tagging").and_then(|v| v.to_str().ok())
        && let Ok(tags) = crate::tags::parse_tag_header(tagging)
    {
        for (k, v) in tags {
            facts.set(&format!("s3:RequestObjectTag/{k}"), v);
        }
    }
    for pair in uri.query().unwrap_or("").split('&') {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let key = match name {
            "prefix" => "s3:prefix",
            "delimiter" => "s3:delimiter",
            "max-keys" => "s3:max-keys",
            "versionId" => "s3:VersionId",
            _ => continue,
        };
        if let Ok(value) = crate::tags::url_decode(value) {
            facts.set(key, value);
        }
    }
    facts
}

impl Gateway {
    /// `facts` plus the tags of the object `key` (`s3:ExistingObjectTag/...`).
    async fn with_existing_tags(&self, facts: &Facts, bucket: &str, key: &str) -> S3Result<Facts> {
        let mut facts = facts.clone();
        match self.find(bucket, key).await {
            Ok(found) => {
                for (k, v) in found.info.map(|i| i.tags).unwrap_or_default() {
                    facts.set(&format!("{}{k}", crate::policy_cond::EXISTING_TAG), v);
                }
            }
            Err(e) if *e.code() == S3ErrorCode::NoSuchKey => {}
            Err(e) => return Err(e),
        }
        Ok(facts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_for_a_version_take_the_version_actions() {
        let of = |op: &str, version: bool| version_action(iam_action(op), version);
        assert_eq!(of("DeleteObject", true), "s3:DeleteObjectVersion");
        assert_eq!(of("DeleteObjects", true), "s3:DeleteObjectVersion");
        assert_eq!(of("DeleteObject", false), "s3:DeleteObject");
        assert_eq!(of("HeadObject", true), "s3:GetObjectVersion");
        assert_eq!(of("PutObjectTagging", true), "s3:PutObjectVersionTagging");
        assert_eq!(of("GetObjectAcl", true), "s3:GetObjectVersionAcl");
        assert_eq!(of("PutObjectRetention", true), "s3:PutObjectRetention");
        assert_eq!(
            acl_permission("s3:DeleteObjectVersion", false),
            Some("WRITE")
        );
        assert_eq!(acl_permission("s3:GetObjectVersion", true), Some("READ"));
    }
}
