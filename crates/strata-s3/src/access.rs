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

use strata_http::UserStore;
use strata_vfs::Ctx;

use crate::Gateway;
use crate::config::{BucketAccess, PublicBlock, grantee_matches};
use crate::policy::{Verdict, Who};

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
        other => other,
    };
    format!("s3:{action}")
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
            | "s3:AbortMultipartUpload"
            | "s3:ListMultipartUploadParts",
            false,
        ) => Some(Permission::WRITE),
        ("s3:GetBucketAcl", false) | ("s3:GetObjectAcl", true) => Some(Permission::READ_ACP),
        ("s3:PutBucketAcl", false) | ("s3:PutObjectAcl", true) => Some(Permission::WRITE_ACP),
        ("s3:GetObject" | "s3:GetObjectAttributes" | "s3:GetObjectTagging", true) => {
            Some(Permission::READ)
        }
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
        who: &Who,
        op: &str,
        bucket: &str,
        key: Option<&str>,
    ) -> S3Result<()> {
        let dir = self.bucket_dir(bucket).await?;
        let access = self.bucket_access(dir, bucket).await?;
        let action = iam_action(op);
        let resource = match key {
            Some(k) => format!("arn:aws:s3:::{bucket}/{k}"),
            None => format!("arn:aws:s3:::{bucket}"),
        };
        self.decide(who, &access, &action, &resource, bucket, key)
            .await
    }

    async fn decide(
        &self,
        who: &Who,
        access: &BucketAccess,
        action: &str,
        resource: &str,
        bucket: &str,
        key: Option<&str>,
    ) -> S3Result<()> {
        let restrict = access.block.restrict_public_buckets;
        let verdict = access.policy.as_ref().map_or(Verdict::Silent, |p| {
            p.evaluate(who, action, resource, restrict)
        });
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

    /// Like [`Gateway::authorize`] for each of `keys` (the bucket's settings read once).
    pub(crate) async fn authorize_keys(
        &self,
        who: &Who,
        op: &str,
        bucket: &str,
        keys: &[&str],
    ) -> S3Result<()> {
        let dir = self.bucket_dir(bucket).await?;
        let access = self.bucket_access(dir, bucket).await?;
        let action = iam_action(op);
        for key in keys {
            let resource = format!("arn:aws:s3:::{bucket}/{key}");
            self.decide(who, &access, &action, &resource, bucket, Some(key))
                .await?;
        }
        Ok(())
    }

    /// A copy's source must be readable by the caller too.
    async fn authorize_copy_source(&self, who: &Who, source: &CopySource) -> S3Result<()> {
        match source {
            CopySource::Bucket { bucket, key, .. } => {
                self.authorize(who, "GetObject", bucket, Some(key)).await
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
    async fn check_source(&self, who: Option<Who>, source: &CopySource) -> S3Result<()> {
        match who {
            Some(who) => self.gateway.authorize_copy_source(&who, source).await,
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
                _ => self.gateway.authorize(&who, op, bucket, None).await,
            },
            S3Path::Object { bucket, key } => {
                self.gateway.authorize(&who, op, bucket, Some(key)).await
            }
        }
    }

    async fn copy_object(&self, req: &mut S3Request<s3s::dto::CopyObjectInput>) -> S3Result<()> {
        self.check_source(self.who(req), &req.input.copy_source)
            .await
    }

    async fn upload_part_copy(
        &self,
        req: &mut S3Request<s3s::dto::UploadPartCopyInput>,
    ) -> S3Result<()> {
        self.check_source(self.who(req), &req.input.copy_source)
            .await
    }

    /// Every key of a DeleteObjects must be deletable by the caller; one that is not
    /// refuses the whole request (AWS answers per key: docs/S3.md).
    async fn delete_objects(
        &self,
        req: &mut S3Request<s3s::dto::DeleteObjectsInput>,
    ) -> S3Result<()> {
        let Some(who) = self.who(req) else {
            return Ok(());
        };
        let keys: Vec<&str> = req
            .input
            .delete
            .objects
            .iter()
            .map(|o| o.key.as_str())
            .collect();
        self.gateway
            .authorize_keys(&who, "DeleteObject", &req.input.bucket, &keys)
            .await
    }

    /// A form upload writes the key its form names.
    async fn post_object(&self, req: &mut S3Request<s3s::dto::PostObjectInput>) -> S3Result<()> {
        match self.who(req) {
            Some(who) => {
                let key = [req.input.key.as_str()];
                self.gateway
                    .authorize_keys(&who, "PutObject", &req.input.bucket, &key)
                    .await
            }
            None => Ok(()),
        }
    }
}

/// The S3 operation a request turned out to be, filled in by the access check once s3s
/// has routed it (requests refused before routing stay "Unrouted").
#[derive(Clone, Debug, Default)]
pub(crate) struct OpName(pub(crate) Arc<OnceLock<String>>);
