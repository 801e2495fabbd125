//! The S3 service: the `s3s::S3` trait answered by [`Gateway`], and who may call it
//! (SigV4 with the root user's keys or those of users kept in the volume, then
//! [`Access`]).

use s3s::auth::{S3Auth, SecretKey};
use s3s::dto::*;
use s3s::service::{S3Service, S3ServiceBuilder};
use s3s::{S3, S3Error, S3ErrorCode, S3Request, S3Response, S3Result};

use crate::Gateway;
use crate::access::Access;
use strata_http::UserStore;

/// An access key and its secret; the secret never shows in `Debug` or logs.
#[derive(Clone)]
pub struct Credentials {
    pub access_key: String,
    secret: String,
}

impl Credentials {
    pub fn new(access_key: impl Into<String>, secret: impl Into<String>) -> Credentials {
        Credentials {
            access_key: access_key.into(),
            secret: secret.into(),
        }
    }
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("access_key", &self.access_key)
            .field("secret", &"<redacted>")
            .finish()
    }
}

/// The keys the gateway accepts: the root user's, then the users kept in the volume
/// (read on each request, so a user added or removed on any gateway counts at once).
struct Keys {
    root: Credentials,
    users: UserStore,
}

#[async_trait::async_trait]
impl S3Auth for Keys {
    async fn get_secret_key(&self, access_key: &str) -> S3Result<SecretKey> {
        if access_key == self.root.access_key {
            return Ok(SecretKey::from(self.root.secret.as_str()));
        }
        match self.users.secret(access_key).await {
            Ok(Some(secret)) => Ok(SecretKey::from(secret.expose())),
            Ok(None) => Err(S3Error::with_message(
                S3ErrorCode::InvalidAccessKeyId,
                "the access key ID you provided does not exist in our records",
            )),
            Err(e) => {
                tracing::error!("reading the gateway's users: {e}");
                Err(S3Error::with_message(
                    S3ErrorCode::InternalError,
                    "cannot read the gateway's users",
                ))
            }
        }
    }
}

/// The gateway's HTTP service: S3 (`s3s`) plus what is answered before it (CORS
/// preflights).
#[derive(Clone)]
pub struct GatewayService {
    pub(crate) s3: S3Service,
    pub(crate) gateway: Gateway,
}

impl std::fmt::Debug for GatewayService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayService")
            .field("gateway", &self.gateway)
            .finish_non_exhaustive()
    }
}

/// The HTTP service of `gateway`, whose root user is `root`; other users are those kept
/// in the volume.
pub fn build_service(mut gateway: Gateway, root: Credentials) -> GatewayService {
    gateway.opts.root_access_key = root.access_key.clone();
    let users = UserStore::new(gateway.vfs.clone(), gateway.server_ctx.clone());
    let mut builder = S3ServiceBuilder::new(gateway.clone());
    builder.set_auth(Keys { root, users });
    builder.set_access(Access {
        gateway: gateway.clone(),
    });
    GatewayService {
        s3: builder.build(),
        gateway,
    }
}

#[async_trait::async_trait]
impl S3 for Gateway {
    async fn list_buckets(
        &self,
        req: S3Request<ListBucketsInput>,
    ) -> S3Result<S3Response<ListBucketsOutput>> {
        Gateway::list_buckets(&self.acting_for(&req), req).await
    }

    async fn create_bucket(
        &self,
        req: S3Request<CreateBucketInput>,
    ) -> S3Result<S3Response<CreateBucketOutput>> {
        Gateway::create_bucket(&self.acting_for(&req), req).await
    }

    async fn delete_bucket(
        &self,
        req: S3Request<DeleteBucketInput>,
    ) -> S3Result<S3Response<DeleteBucketOutput>> {
        Gateway::delete_bucket(&self.acting_for(&req), req).await
    }

    async fn head_bucket(
        &self,
        req: S3Request<HeadBucketInput>,
    ) -> S3Result<S3Response<HeadBucketOutput>> {
        Gateway::head_bucket(&self.acting_for(&req), req).await
    }

    async fn get_bucket_location(
        &self,
        req: S3Request<GetBucketLocationInput>,
    ) -> S3Result<S3Response<GetBucketLocationOutput>> {
        Gateway::get_bucket_location(&self.acting_for(&req), req).await
    }

    async fn list_objects(
        &self,
        req: S3Request<ListObjectsInput>,
    ) -> S3Result<S3Response<ListObjectsOutput>> {
        Gateway::list_objects(&self.acting_for(&req), req).await
    }

    async fn list_objects_v2(
        &self,
        req: S3Request<ListObjectsV2Input>,
    ) -> S3Result<S3Response<ListObjectsV2Output>> {
        Gateway::list_objects_v2(&self.acting_for(&req), req).await
    }

    async fn get_bucket_versioning(
        &self,
        req: S3Request<GetBucketVersioningInput>,
    ) -> S3Result<S3Response<GetBucketVersioningOutput>> {
        Gateway::get_bucket_versioning(&self.acting_for(&req), req).await
    }

    async fn put_bucket_versioning(
        &self,
        req: S3Request<PutBucketVersioningInput>,
    ) -> S3Result<S3Response<PutBucketVersioningOutput>> {
        Gateway::put_bucket_versioning(&self.acting_for(&req), req).await
    }

    async fn put_object_lock_configuration(
        &self,
        req: S3Request<PutObjectLockConfigurationInput>,
    ) -> S3Result<S3Response<PutObjectLockConfigurationOutput>> {
        Gateway::put_object_lock_configuration(&self.acting_for(&req), req).await
    }

    async fn get_object_lock_configuration(
        &self,
        req: S3Request<GetObjectLockConfigurationInput>,
    ) -> S3Result<S3Response<GetObjectLockConfigurationOutput>> {
        Gateway::get_object_lock_configuration(&self.acting_for(&req), req).await
    }

    async fn put_object_retention(
        &self,
        req: S3Request<PutObjectRetentionInput>,
    ) -> S3Result<S3Response<PutObjectRetentionOutput>> {
        Gateway::put_object_retention(&self.acting_for(&req), req).await
    }

    async fn get_object_retention(
        &self,
        req: S3Request<GetObjectRetentionInput>,
    ) -> S3Result<S3Response<GetObjectRetentionOutput>> {
        Gateway::get_object_retention(&self.acting_for(&req), req).await
    }

    async fn put_object_legal_hold(
        &self,
        req: S3Request<PutObjectLegalHoldInput>,
    ) -> S3Result<S3Response<PutObjectLegalHoldOutput>> {
        Gateway::put_object_legal_hold(&self.acting_for(&req), req).await
    }

    async fn get_object_legal_hold(
        &self,
        req: S3Request<GetObjectLegalHoldInput>,
    ) -> S3Result<S3Response<GetObjectLegalHoldOutput>> {
        Gateway::get_object_legal_hold(&self.acting_for(&req), req).await
    }

    async fn list_object_versions(
        &self,
        req: S3Request<ListObjectVersionsInput>,
    ) -> S3Result<S3Response<ListObjectVersionsOutput>> {
        Gateway::list_object_versions(&self.acting_for(&req), req).await
    }

    async fn put_object(
        &self,
        req: S3Request<PutObjectInput>,
    ) -> S3Result<S3Response<PutObjectOutput>> {
        Gateway::put_object(&self.acting_for(&req), req).await
    }

    async fn get_object(
        &self,
        req: S3Request<GetObjectInput>,
    ) -> S3Result<S3Response<GetObjectOutput>> {
        Gateway::get_object(&self.acting_for(&req), req).await
    }

    async fn head_object(
        &self,
        req: S3Request<HeadObjectInput>,
    ) -> S3Result<S3Response<HeadObjectOutput>> {
        Gateway::head_object(&self.acting_for(&req), req).await
    }

    async fn delete_object(
        &self,
        req: S3Request<DeleteObjectInput>,
    ) -> S3Result<S3Response<DeleteObjectOutput>> {
        Gateway::delete_object(&self.acting_for(&req), req).await
    }

    async fn delete_objects(
        &self,
        req: S3Request<DeleteObjectsInput>,
    ) -> S3Result<S3Response<DeleteObjectsOutput>> {
        Gateway::delete_objects(&self.acting_for(&req), req).await
    }

    async fn copy_object(
        &self,
        req: S3Request<CopyObjectInput>,
    ) -> S3Result<S3Response<CopyObjectOutput>> {
        Gateway::copy_object(&self.acting_for(&req), req).await
    }

    async fn create_multipart_upload(
        &self,
        req: S3Request<CreateMultipartUploadInput>,
    ) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
        Gateway::create_multipart_upload(&self.acting_for(&req), req).await
    }

    async fn upload_part(
        &self,
        req: S3Request<UploadPartInput>,
    ) -> S3Result<S3Response<UploadPartOutput>> {
        Gateway::upload_part(&self.acting_for(&req), req).await
    }

    async fn upload_part_copy(
        &self,
        req: S3Request<UploadPartCopyInput>,
    ) -> S3Result<S3Response<UploadPartCopyOutput>> {
        Gateway::upload_part_copy(&self.acting_for(&req), req).await
    }

    async fn complete_multipart_upload(
        &self,
        req: S3Request<CompleteMultipartUploadInput>,
    ) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
        Gateway::complete_multipart_upload(&self.acting_for(&req), req).await
    }

    async fn abort_multipart_upload(
        &self,
        req: S3Request<AbortMultipartUploadInput>,
    ) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
        Gateway::abort_multipart_upload(&self.acting_for(&req), req).await
    }

    async fn list_parts(
        &self,
        req: S3Request<ListPartsInput>,
    ) -> S3Result<S3Response<ListPartsOutput>> {
        Gateway::list_parts(&self.acting_for(&req), req).await
    }

    async fn list_multipart_uploads(
        &self,
        req: S3Request<ListMultipartUploadsInput>,
    ) -> S3Result<S3Response<ListMultipartUploadsOutput>> {
        Gateway::list_multipart_uploads(&self.acting_for(&req), req).await
    }

    async fn get_object_tagging(
        &self,
        req: S3Request<GetObjectTaggingInput>,
    ) -> S3Result<S3Response<GetObjectTaggingOutput>> {
        Gateway::get_object_tagging(&self.acting_for(&req), req).await
    }

    async fn put_object_tagging(
        &self,
        req: S3Request<PutObjectTaggingInput>,
    ) -> S3Result<S3Response<PutObjectTaggingOutput>> {
        Gateway::put_object_tagging(&self.acting_for(&req), req).await
    }

    async fn delete_object_tagging(
        &self,
        req: S3Request<DeleteObjectTaggingInput>,
    ) -> S3Result<S3Response<DeleteObjectTaggingOutput>> {
        Gateway::delete_object_tagging(&self.acting_for(&req), req).await
    }

    async fn get_bucket_tagging(
        &self,
        req: S3Request<GetBucketTaggingInput>,
    ) -> S3Result<S3Response<GetBucketTaggingOutput>> {
        Gateway::get_bucket_tagging(&self.acting_for(&req), req).await
    }

    async fn put_bucket_tagging(
        &self,
        req: S3Request<PutBucketTaggingInput>,
    ) -> S3Result<S3Response<PutBucketTaggingOutput>> {
        Gateway::put_bucket_tagging(&self.acting_for(&req), req).await
    }

    async fn delete_bucket_tagging(
        &self,
        req: S3Request<DeleteBucketTaggingInput>,
    ) -> S3Result<S3Response<DeleteBucketTaggingOutput>> {
        Gateway::delete_bucket_tagging(&self.acting_for(&req), req).await
    }

    async fn get_object_attributes(
        &self,
        req: S3Request<GetObjectAttributesInput>,
    ) -> S3Result<S3Response<GetObjectAttributesOutput>> {
        Gateway::get_object_attributes(&self.acting_for(&req), req).await
    }

    async fn put_bucket_policy(
        &self,
        req: S3Request<PutBucketPolicyInput>,
    ) -> S3Result<S3Response<PutBucketPolicyOutput>> {
        Gateway::put_bucket_policy(&self.acting_for(&req), req).await
    }

    async fn get_bucket_policy(
        &self,
        req: S3Request<GetBucketPolicyInput>,
    ) -> S3Result<S3Response<GetBucketPolicyOutput>> {
        Gateway::get_bucket_policy(&self.acting_for(&req), req).await
    }

    async fn delete_bucket_policy(
        &self,
        req: S3Request<DeleteBucketPolicyInput>,
    ) -> S3Result<S3Response<DeleteBucketPolicyOutput>> {
        Gateway::delete_bucket_policy(&self.acting_for(&req), req).await
    }

    async fn get_bucket_policy_status(
        &self,
        req: S3Request<GetBucketPolicyStatusInput>,
    ) -> S3Result<S3Response<GetBucketPolicyStatusOutput>> {
        Gateway::get_bucket_policy_status(&self.acting_for(&req), req).await
    }

    async fn put_bucket_acl(
        &self,
        req: S3Request<PutBucketAclInput>,
    ) -> S3Result<S3Response<PutBucketAclOutput>> {
        Gateway::put_bucket_acl(&self.acting_for(&req), req).await
    }

    async fn get_bucket_acl(
        &self,
        req: S3Request<GetBucketAclInput>,
    ) -> S3Result<S3Response<GetBucketAclOutput>> {
        Gateway::get_bucket_acl(&self.acting_for(&req), req).await
    }

    async fn put_object_acl(
        &self,
        req: S3Request<PutObjectAclInput>,
    ) -> S3Result<S3Response<PutObjectAclOutput>> {
        Gateway::put_object_acl(&self.acting_for(&req), req).await
    }

    async fn get_object_acl(
        &self,
        req: S3Request<GetObjectAclInput>,
    ) -> S3Result<S3Response<GetObjectAclOutput>> {
        Gateway::get_object_acl(&self.acting_for(&req), req).await
    }

    async fn put_public_access_block(
        &self,
        req: S3Request<PutPublicAccessBlockInput>,
    ) -> S3Result<S3Response<PutPublicAccessBlockOutput>> {
        Gateway::put_public_access_block(&self.acting_for(&req), req).await
    }

    async fn get_public_access_block(
        &self,
        req: S3Request<GetPublicAccessBlockInput>,
    ) -> S3Result<S3Response<GetPublicAccessBlockOutput>> {
        Gateway::get_public_access_block(&self.acting_for(&req), req).await
    }

    async fn delete_public_access_block(
        &self,
        req: S3Request<DeletePublicAccessBlockInput>,
    ) -> S3Result<S3Response<DeletePublicAccessBlockOutput>> {
        Gateway::delete_public_access_block(&self.acting_for(&req), req).await
    }

    async fn put_bucket_ownership_controls(
        &self,
        req: S3Request<PutBucketOwnershipControlsInput>,
    ) -> S3Result<S3Response<PutBucketOwnershipControlsOutput>> {
        Gateway::put_bucket_ownership_controls(&self.acting_for(&req), req).await
    }

    async fn get_bucket_ownership_controls(
        &self,
        req: S3Request<GetBucketOwnershipControlsInput>,
    ) -> S3Result<S3Response<GetBucketOwnershipControlsOutput>> {
        Gateway::get_bucket_ownership_controls(&self.acting_for(&req), req).await
    }

    async fn delete_bucket_ownership_controls(
        &self,
        req: S3Request<DeleteBucketOwnershipControlsInput>,
    ) -> S3Result<S3Response<DeleteBucketOwnershipControlsOutput>> {
        Gateway::delete_bucket_ownership_controls(&self.acting_for(&req), req).await
    }

    async fn put_bucket_cors(
        &self,
        req: S3Request<PutBucketCorsInput>,
    ) -> S3Result<S3Response<PutBucketCorsOutput>> {
        Gateway::put_bucket_cors(&self.acting_for(&req), req).await
    }

    async fn get_bucket_cors(
        &self,
        req: S3Request<GetBucketCorsInput>,
    ) -> S3Result<S3Response<GetBucketCorsOutput>> {
        Gateway::get_bucket_cors(&self.acting_for(&req), req).await
    }

    async fn delete_bucket_cors(
        &self,
        req: S3Request<DeleteBucketCorsInput>,
    ) -> S3Result<S3Response<DeleteBucketCorsOutput>> {
        Gateway::delete_bucket_cors(&self.acting_for(&req), req).await
    }

    async fn put_bucket_lifecycle_configuration(
        &self,
        req: S3Request<PutBucketLifecycleConfigurationInput>,
    ) -> S3Result<S3Response<PutBucketLifecycleConfigurationOutput>> {
        Gateway::put_bucket_lifecycle_configuration(&self.acting_for(&req), req).await
    }

    async fn get_bucket_lifecycle_configuration(
        &self,
        req: S3Request<GetBucketLifecycleConfigurationInput>,
    ) -> S3Result<S3Response<GetBucketLifecycleConfigurationOutput>> {
        Gateway::get_bucket_lifecycle_configuration(&self.acting_for(&req), req).await
    }

    async fn delete_bucket_lifecycle(
        &self,
        req: S3Request<DeleteBucketLifecycleInput>,
    ) -> S3Result<S3Response<DeleteBucketLifecycleOutput>> {
        Gateway::delete_bucket_lifecycle(&self.acting_for(&req), req).await
    }
}
