//! The bucket configuration operations: policy (and its status), ACLs of buckets and
//! objects, public access block, ownership controls, CORS and lifecycle. Each stores or
//! returns one xattr ([`crate::config`]); what they enforce is in [`crate::access`] and
//! [`crate::cors`]. Lifecycle rules are kept and returned, not applied (docs/S3.md).

use s3s::dto::*;
use s3s::xml::{Deserialize, Serialize};
use s3s::{S3Error, S3ErrorCode, S3Request, S3Response, S3Result};
use strata_types::Ino;

use crate::Gateway;
use crate::config::*;
use crate::policy::Policy as BucketPolicy;

fn missing(code: S3ErrorCode, what: &str) -> S3Error {
    let mut e = S3Error::with_message(code, format!("the bucket has no {what}"));
    e.set_status_code(hyper::StatusCode::NOT_FOUND);
    e
}

/// The grants an ACL request asks for: a canned ACL, `x-amz-grant-*` headers, or a body.
struct AclRequest<'a> {
    canned: Option<&'a str>,
    headers: [(&'static str, Option<&'a String>); 5],
    body: Option<&'a AccessControlPolicy>,
}

impl AclRequest<'_> {
    fn grants(&self) -> S3Result<Vec<Grant>> {
        let from_headers = self.headers.iter().any(|(_, v)| v.is_some());
        match (self.canned, from_headers, self.body) {
            (Some(c), false, None) => canned_grants(c),
            (None, true, None) => header_grants(&self.headers),
            (None, false, Some(body)) => Ok(body.grants.clone().unwrap_or_default()),
            (None, false, None) => Err(S3Error::with_message(
                S3ErrorCode::MalformedACLError,
                "give a canned ACL, grant headers or an AccessControlPolicy",
            )),
            _ => Err(S3Error::with_message(
                S3ErrorCode::InvalidRequest,
                "give only one of a canned ACL, grant headers and an AccessControlPolicy",
            )),
        }
    }
}

fn grant_headers<'a>(
    full: Option<&'a String>,
    read: Option<&'a String>,
    read_acp: Option<&'a String>,
    write: Option<&'a String>,
    write_acp: Option<&'a String>,
) -> [(&'static str, Option<&'a String>); 5] {
    [
        (Permission::FULL_CONTROL, full),
        (Permission::READ, read),
        (Permission::READ_ACP, read_acp),
        (Permission::WRITE, write),
        (Permission::WRITE_ACP, write_acp),
    ]
}

impl Gateway {
    /// Store `grants` as the ACL of `ino`, unless the public access block refuses them
    /// or a grantee is no user of the gateway (AWS: InvalidArgument for an unknown id,
    /// UnresolvableGrantByEmailAddress for an e-mail address).
    async fn store_acl(
        &self,
        ino: Ino,
        owner: &str,
        grants: Vec<Grant>,
        block: PublicBlock,
    ) -> S3Result<()> {
        for grantee in grants.iter().filter_map(|g| g.grantee.as_ref()) {
            self.check_grantee(grantee).await?;
        }
        if block.block_public_acls && grants.iter().any(is_public_grant) {
            return Err(S3Error::with_message(
                S3ErrorCode::AccessDenied,
                "the bucket's public access block refuses public ACLs",
            ));
        }
        let acl = AccessControlPolicy {
            grants: Some(grants),
            owner: Some(self.owner_of(owner)),
        };
        self.store_xattr(ino, ACL_XATTR, Some(&to_xml(&acl)?)).await
    }

    /// A grantee must be a public group or a user the gateway knows: the root user (by
    /// its owner id or access key) or one kept in the volume.
    async fn check_grantee(&self, g: &Grantee) -> S3Result<()> {
        if g.email_address.is_some() {
            return Err(S3Error::with_message(
                S3ErrorCode::UnresolvableGrantByEmailAddress,
                "The e-mail address you provided does not match any account on record.",
            ));
        }
        let Some(id) = g.id.as_deref() else {
            return Ok(());
        };
        if id == self.opts.owner_id || id == self.opts.root_access_key {
            return Ok(());
        }
        let users = strata_http::UserStore::new(self.vfs.clone(), self.server_ctx.clone());
        match users.user(id).await {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err(S3Error::with_message(
                S3ErrorCode::InvalidArgument,
                "Invalid id",
            )),
            Err(e) => Err(S3Error::with_message(
                S3ErrorCode::InternalError,
                format!("reading the gateway's users: {e}"),
            )),
        }
    }

    /// The ACL as S3 shows it: the owner's FULL_CONTROL, then what was granted; users
    /// named with their display names.
    fn shown_grants(&self, owner: &str, stored: Option<AccessControlPolicy>) -> Vec<Grant> {
        let owner_id = self.owner_of(owner).id;
        let mut grants = vec![Grant {
            grantee: Some(grantee(owner_id.as_deref(), None)),
            permission: Some(Permission::from_static(Permission::FULL_CONTROL)),
        }];
        grants.extend(stored.and_then(|a| a.grants).unwrap_or_default());
        for g in grants.iter_mut().filter_map(|g| g.grantee.as_mut()) {
            if let Some(id) = g.id.as_deref()
                && g.display_name.is_none()
            {
                let key = match id == self.opts.owner_id {
                    true => self.opts.root_access_key.as_str(),
                    false => id,
                };
                g.display_name = self.owner_of(key).display_name;
            }
        }
        grants
    }

    async fn block_of(&self, dir: Ino) -> S3Result<PublicBlock> {
        let pab: Option<PublicAccessBlockConfiguration> = self.load_doc(dir, PAB_XATTR).await?;
        Ok(pab
            .as_ref()
            .map(PublicBlock::from_config)
            .unwrap_or_default())
    }

    pub(crate) async fn put_bucket_policy(
        &self,
        req: S3Request<PutBucketPolicyInput>,
    ) -> S3Result<S3Response<PutBucketPolicyOutput>> {
        let bucket = &req.input.bucket;
        let dir = self.bucket_dir(bucket).await?;
        let policy = BucketPolicy::parse(&req.input.policy, bucket)
            .map_err(|why| S3Error::with_message(S3ErrorCode::MalformedPolicy, why))?;
        if policy.is_public() && self.block_of(dir).await?.block_public_policy {
            return Err(S3Error::with_message(
                S3ErrorCode::AccessDenied,
                "the bucket's public access block refuses public policies",
            ));
        }
        let text = req.input.policy.as_bytes();
        self.store_xattr(dir, POLICY_XATTR, Some(text)).await?;
        Ok(S3Response::new(PutBucketPolicyOutput {}))
    }

    pub(crate) async fn get_bucket_policy(
        &self,
        req: S3Request<GetBucketPolicyInput>,
    ) -> S3Result<S3Response<GetBucketPolicyOutput>> {
        let dir = self.bucket_dir(&req.input.bucket).await?;
        match self.load_xattr(dir, POLICY_XATTR).await? {
            Some(raw) => Ok(S3Response::new(GetBucketPolicyOutput {
                policy: Some(String::from_utf8_lossy(&raw).into_owned()),
            })),
            None => Err(missing(S3ErrorCode::NoSuchBucketPolicy, "policy")),
        }
    }

    pub(crate) async fn delete_bucket_policy(
        &self,
        req: S3Request<DeleteBucketPolicyInput>,
    ) -> S3Result<S3Response<DeleteBucketPolicyOutput>> {
        self.delete_bucket_doc(&req.input.bucket, POLICY_XATTR)
            .await?;
        Ok(S3Response::new(DeleteBucketPolicyOutput {}))
    }

    pub(crate) async fn get_bucket_policy_status(
        &self,
        req: S3Request<GetBucketPolicyStatusInput>,
    ) -> S3Result<S3Response<GetBucketPolicyStatusOutput>> {
        let bucket = &req.input.bucket;
        let dir = self.bucket_dir(bucket).await?;
        let access = self.bucket_access(dir, bucket).await?;
        let Some(policy) = access.policy else {
            return Err(missing(S3ErrorCode::NoSuchBucketPolicy, "policy"));
        };
        let public = policy.is_public() && !access.block.restrict_public_buckets;
        Ok(S3Response::new(GetBucketPolicyStatusOutput {
            policy_status: Some(PolicyStatus {
                is_public: Some(public),
            }),
        }))
    }

    pub(crate) async fn put_bucket_acl(
        &self,
        req: S3Request<PutBucketAclInput>,
    ) -> S3Result<S3Response<PutBucketAclOutput>> {
        let i = &req.input;
        let dir = self.bucket_dir(&i.bucket).await?;
        let owner = self.bucket_owner(dir).await?;
        let request = AclRequest {
            canned: i.acl.as_ref().map(BucketCannedACL::as_str),
            headers: grant_headers(
                i.grant_full_control.as_ref(),
                i.grant_read.as_ref(),
                i.grant_read_acp.as_ref(),
                i.grant_write.as_ref(),
                i.grant_write_acp.as_ref(),
            ),
            body: i.access_control_policy.as_ref(),
        };
        let grants = request.grants()?;
        let block = self.block_of(dir).await?;
        self.store_acl(dir, &owner, grants, block).await?;
        Ok(S3Response::new(PutBucketAclOutput {}))
    }

    pub(crate) async fn get_bucket_acl(
        &self,
        req: S3Request<GetBucketAclInput>,
    ) -> S3Result<S3Response<GetBucketAclOutput>> {
        let dir = self.bucket_dir(&req.input.bucket).await?;
        let owner = self.bucket_owner(dir).await?;
        let stored = self.load_doc(dir, ACL_XATTR).await?;
        Ok(S3Response::new(GetBucketAclOutput {
            grants: Some(self.shown_grants(&owner, stored)),
            owner: Some(self.owner_of(&owner)),
        }))
    }

    pub(crate) async fn put_object_acl(
        &self,
        req: S3Request<PutObjectAclInput>,
    ) -> S3Result<S3Response<PutObjectAclOutput>> {
        let i = &req.input;
        let found = self.find(&i.bucket, &i.key).await?;
        let dir = self.bucket_dir(&i.bucket).await?;
        let owner = self.bucket_owner(dir).await?;
        let request = AclRequest {
            canned: i.acl.as_ref().map(ObjectCannedACL::as_str),
            headers: grant_headers(
                i.grant_full_control.as_ref(),
                i.grant_read.as_ref(),
                i.grant_read_acp.as_ref(),
                i.grant_write.as_ref(),
                i.grant_write_acp.as_ref(),
            ),
            body: i.access_control_policy.as_ref(),
        };
        let grants = request.grants()?;
        let block = self.block_of(dir).await?;
        self.store_acl(found.ino, &owner, grants, block).await?;
        Ok(S3Response::new(PutObjectAclOutput::default()))
    }

    /// The ACL an object is written with (`x-amz-acl` of PUT, POST, copy or multipart).
    pub(crate) async fn object_acl_for_put(
        &self,
        bucket: &str,
        canned: Option<&ObjectCannedACL>,
    ) -> S3Result<Option<Vec<u8>>> {
        let Some(canned) = canned else {
            return Ok(None);
        };
        let dir = self.bucket_dir(bucket).await?;
        let owner = self.bucket_owner(dir).await?;
        let grants = canned_grants(canned.as_str())?;
        if grants.is_empty() {
            return Ok(None);
        }
        if self.block_of(dir).await?.block_public_acls && grants.iter().any(is_public_grant) {
            return Err(S3Error::with_message(
                S3ErrorCode::AccessDenied,
                "the bucket's public access block refuses public ACLs",
            ));
        }
        let acl = AccessControlPolicy {
            grants: Some(grants),
            owner: Some(self.owner_of(&owner)),
        };
        to_xml(&acl).map(Some)
    }

    pub(crate) async fn get_object_acl(
        &self,
        req: S3Request<GetObjectAclInput>,
    ) -> S3Result<S3Response<GetObjectAclOutput>> {
        let found = self.find(&req.input.bucket, &req.input.key).await?;
        let dir = self.bucket_dir(&req.input.bucket).await?;
        let owner = self.bucket_owner(dir).await?;
        let stored = if found.attr.xattrs {
            self.load_doc(found.ino, ACL_XATTR).await?
        } else {
            None
        };
        Ok(S3Response::new(GetObjectAclOutput {
            grants: Some(self.shown_grants(&owner, stored)),
            owner: Some(self.owner_of(&owner)),
            request_charged: None,
        }))
    }

    /// Store the S3 document `doc` as the xattr `name` of `bucket`.
    async fn put_bucket_doc<T: Serialize>(
        &self,
        bucket: &str,
        name: &[u8],
        doc: &T,
    ) -> S3Result<()> {
        let dir = self.bucket_dir(bucket).await?;
        self.store_xattr(dir, name, Some(&to_xml(doc)?)).await
    }

    /// The S3 document in the xattr `name` of `bucket`, or `code` (404) when none.
    async fn bucket_doc<T: for<'x> Deserialize<'x>>(
        &self,
        bucket: &str,
        name: &[u8],
        code: S3ErrorCode,
        what: &str,
    ) -> S3Result<T> {
        let dir = self.bucket_dir(bucket).await?;
        self.load_doc(dir, name)
            .await?
            .ok_or_else(|| missing(code, what))
    }

    /// Remove the xattr `name` of `bucket` (nothing to remove is fine).
    async fn delete_bucket_doc(&self, bucket: &str, name: &[u8]) -> S3Result<()> {
        let dir = self.bucket_dir(bucket).await?;
        self.store_xattr(dir, name, None).await
    }

    pub(crate) async fn put_public_access_block(
        &self,
        req: S3Request<PutPublicAccessBlockInput>,
    ) -> S3Result<S3Response<PutPublicAccessBlockOutput>> {
        let i = &req.input;
        self.put_bucket_doc(&i.bucket, PAB_XATTR, &i.public_access_block_configuration)
            .await?;
        Ok(S3Response::new(PutPublicAccessBlockOutput {}))
    }

    pub(crate) async fn get_public_access_block(
        &self,
        req: S3Request<GetPublicAccessBlockInput>,
    ) -> S3Result<S3Response<GetPublicAccessBlockOutput>> {
        let code = S3ErrorCode::Custom("NoSuchPublicAccessBlockConfiguration".into());
        let c = self
            .bucket_doc(&req.input.bucket, PAB_XATTR, code, "public access block")
            .await?;
        Ok(S3Response::new(GetPublicAccessBlockOutput {
            public_access_block_configuration: Some(c),
        }))
    }

    pub(crate) async fn delete_public_access_block(
        &self,
        req: S3Request<DeletePublicAccessBlockInput>,
    ) -> S3Result<S3Response<DeletePublicAccessBlockOutput>> {
        self.delete_bucket_doc(&req.input.bucket, PAB_XATTR).await?;
        Ok(S3Response::new(DeletePublicAccessBlockOutput {}))
    }

    pub(crate) async fn put_bucket_ownership_controls(
        &self,
        req: S3Request<PutBucketOwnershipControlsInput>,
    ) -> S3Result<S3Response<PutBucketOwnershipControlsOutput>> {
        let i = &req.input;
        self.put_bucket_doc(&i.bucket, OWNERSHIP_XATTR, &i.ownership_controls)
            .await?;
        Ok(S3Response::new(PutBucketOwnershipControlsOutput {}))
    }

    pub(crate) async fn get_bucket_ownership_controls(
        &self,
        req: S3Request<GetBucketOwnershipControlsInput>,
    ) -> S3Result<S3Response<GetBucketOwnershipControlsOutput>> {
        let code = S3ErrorCode::OwnershipControlsNotFoundError;
        let c = self
            .bucket_doc(
                &req.input.bucket,
                OWNERSHIP_XATTR,
                code,
                "ownership controls",
            )
            .await?;
        Ok(S3Response::new(GetBucketOwnershipControlsOutput {
            ownership_controls: Some(c),
        }))
    }

    pub(crate) async fn delete_bucket_ownership_controls(
        &self,
        req: S3Request<DeleteBucketOwnershipControlsInput>,
    ) -> S3Result<S3Response<DeleteBucketOwnershipControlsOutput>> {
        self.delete_bucket_doc(&req.input.bucket, OWNERSHIP_XATTR)
            .await?;
        Ok(S3Response::new(DeleteBucketOwnershipControlsOutput {}))
    }

    pub(crate) async fn put_bucket_cors(
        &self,
        req: S3Request<PutBucketCorsInput>,
    ) -> S3Result<S3Response<PutBucketCorsOutput>> {
        let i = &req.input;
        self.put_bucket_doc(&i.bucket, CORS_XATTR, &i.cors_configuration)
            .await?;
        Ok(S3Response::new(PutBucketCorsOutput {}))
    }

    pub(crate) async fn get_bucket_cors(
        &self,
        req: S3Request<GetBucketCorsInput>,
    ) -> S3Result<S3Response<GetBucketCorsOutput>> {
        let code = S3ErrorCode::NoSuchCORSConfiguration;
        let c: CORSConfiguration = self
            .bucket_doc(&req.input.bucket, CORS_XATTR, code, "CORS configuration")
            .await?;
        Ok(S3Response::new(GetBucketCorsOutput {
            cors_rules: Some(c.cors_rules),
        }))
    }

    pub(crate) async fn delete_bucket_cors(
        &self,
        req: S3Request<DeleteBucketCorsInput>,
    ) -> S3Result<S3Response<DeleteBucketCorsOutput>> {
        self.delete_bucket_doc(&req.input.bucket, CORS_XATTR)
            .await?;
        Ok(S3Response::new(DeleteBucketCorsOutput {}))
    }

    pub(crate) async fn put_bucket_lifecycle_configuration(
        &self,
        req: S3Request<PutBucketLifecycleConfigurationInput>,
    ) -> S3Result<S3Response<PutBucketLifecycleConfigurationOutput>> {
        let Some(config) = &req.input.lifecycle_configuration else {
            return Err(S3Error::with_message(
                S3ErrorCode::MalformedXML,
                "a lifecycle configuration is needed",
            ));
        };
        check_lifecycle(config)?;
        self.put_bucket_doc(&req.input.bucket, LIFECYCLE_XATTR, config)
            .await?;
        Ok(S3Response::new(
            PutBucketLifecycleConfigurationOutput::default(),
        ))
    }

    pub(crate) async fn get_bucket_lifecycle_configuration(
        &self,
        req: S3Request<GetBucketLifecycleConfigurationInput>,
    ) -> S3Result<S3Response<GetBucketLifecycleConfigurationOutput>> {
        let code = S3ErrorCode::NoSuchLifecycleConfiguration;
        let c: BucketLifecycleConfiguration = self
            .bucket_doc(
                &req.input.bucket,
                LIFECYCLE_XATTR,
                code,
                "lifecycle configuration",
            )
            .await?;
        Ok(S3Response::new(GetBucketLifecycleConfigurationOutput {
            rules: Some(c.rules),
            ..Default::default()
        }))
    }

    pub(crate) async fn delete_bucket_lifecycle(
        &self,
        req: S3Request<DeleteBucketLifecycleInput>,
    ) -> S3Result<S3Response<DeleteBucketLifecycleOutput>> {
        self.delete_bucket_doc(&req.input.bucket, LIFECYCLE_XATTR)
            .await?;
        Ok(S3Response::new(DeleteBucketLifecycleOutput {}))
    }
}

/// What AWS refuses in a lifecycle configuration: a rule id over 255 characters or given
/// twice, a status other than Enabled or Disabled, an expiration date not at midnight UTC,
/// and days that are not positive.
fn check_lifecycle(config: &BucketLifecycleConfiguration) -> S3Result<()> {
    let invalid = |msg: String| S3Error::with_message(S3ErrorCode::InvalidArgument, msg);
    let mut ids = std::collections::HashSet::new();
    for rule in &config.rules {
        if let Some(id) = &rule.id {
            if id.chars().count() > 255 {
                return Err(invalid(
                    "ID length should not exceed allowed limit of 255".into(),
                ));
            }
            if !ids.insert(id.as_str()) {
                return Err(invalid(format!(
                    "Rule ID must be unique. Found same ID for more than one rule: {id}"
                )));
            }
        }
        if !matches!(rule.status.as_str(), "Enabled" | "Disabled") {
            return Err(S3Error::with_message(
                S3ErrorCode::MalformedXML,
                "a rule's Status must be Enabled or Disabled",
            ));
        }
        let Some(expiration) = &rule.expiration else {
            continue;
        };
        if expiration.days.is_some_and(|d| d <= 0) {
            return Err(invalid(
                "'Days' for Expiration action must be a positive integer".into(),
            ));
        }
        if let Some(date) = &expiration.date {
            let at = time::OffsetDateTime::from(date.clone()).to_offset(time::UtcOffset::UTC);
            if at.time() != time::Time::MIDNIGHT {
                return Err(invalid("'Date' must be at midnight GMT".into()));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod lifecycle_tests {
    use super::*;
    use s3s::dto::{ExpirationStatus, LifecycleExpiration, LifecycleRule, Timestamp};

    fn rule(id: &str, status: &'static str) -> LifecycleRule {
        LifecycleRule {
            id: Some(id.into()),
            status: ExpirationStatus::from_static(status),
            abort_incomplete_multipart_upload: None,
            expiration: None,
            filter: None,
            noncurrent_version_expiration: None,
            noncurrent_version_transitions: None,
            prefix: None,
            transitions: None,
        }
    }

    fn code(rules: Vec<LifecycleRule>) -> Option<String> {
        check_lifecycle(&BucketLifecycleConfiguration { rules })
            .err()
            .map(|e| e.code().as_str().to_owned())
    }

    #[test]
    fn rules_aws_refuses_are_refused() {
        assert_eq!(
            code(vec![rule("a", "Enabled"), rule("b", "Disabled")]),
            None
        );
        assert_eq!(
            code(vec![rule("a", "Enabled"), rule("a", "Enabled")]).as_deref(),
            Some("InvalidArgument")
        );
        assert_eq!(
            code(vec![rule(&"x".repeat(256), "Enabled")]).as_deref(),
            Some("InvalidArgument")
        );
        assert_eq!(
            code(vec![rule("a", "enabled")]).as_deref(),
            Some("MalformedXML")
        );
        let with = |days: Option<i32>, date: Option<&str>| {
            let mut r = rule("a", "Enabled");
            r.expiration = Some(LifecycleExpiration {
                days,
                date: date
                    .map(|d| Timestamp::parse(s3s::dto::TimestampFormat::DateTime, d).unwrap()),
                expired_object_delete_marker: None,
            });
            code(vec![r])
        };
        assert_eq!(with(Some(30), None), None);
        assert_eq!(with(Some(0), None).as_deref(), Some("InvalidArgument"));
        assert_eq!(with(None, Some("2030-01-01T00:00:00Z")), None);
        assert_eq!(
            with(None, Some("2030-01-01T10:00:00Z")).as_deref(),
            Some("InvalidArgument")
        );
    }
}
