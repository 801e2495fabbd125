//! The S3 object lock operations: Get/PutObjectLockConfiguration, Get/PutObjectRetention
//! and Get/PutObjectLegalHold, and deleting a version under a governance retention with
//! the bypass (see `lock.rs` for the configuration and what new objects get).

use s3s::dto::{
    GetObjectLegalHoldInput, GetObjectLegalHoldOutput, GetObjectLockConfigurationInput,
    GetObjectLockConfigurationOutput, GetObjectRetentionInput, GetObjectRetentionOutput,
    ObjectLockConfiguration, ObjectLockEnabled, ObjectLockLegalHold, ObjectLockLegalHoldStatus,
    ObjectLockRetention, ObjectLockRetentionMode, ObjectLockRule, PutObjectLegalHoldInput,
    PutObjectLegalHoldOutput, PutObjectLockConfigurationInput, PutObjectLockConfigurationOutput,
    PutObjectRetentionInput, PutObjectRetentionOutput,
};
use s3s::{S3Error, S3ErrorCode, S3Request, S3Response, S3Result};
use strata_types::{Attr, Errno, Ino, Retention, RetentionMode};

use crate::Gateway;
use crate::error::fs_error;
use crate::lock::{
    BucketLock, DefaultPeriod, HELD_XATTR, invalid_argument, lock_not_enabled, locked, nanos_of,
    timestamp_of,
};
use crate::read::Found;
use crate::versions::Versioning;

/// Whether a request carries `x-amz-bypass-governance-retention: true` (its permission,
/// `s3:BypassGovernanceRetention`, was checked with the request's).
pub(crate) fn bypasses(flag: Option<bool>) -> bool {
    flag == Some(true)
}

fn not_found(what: &str) -> S3Error {
    S3Error::with_message(S3ErrorCode::NoSuchObjectLockConfiguration, what.to_string())
}

impl Gateway {
    pub(crate) async fn put_object_lock_configuration(
        &self,
        req: S3Request<PutObjectLockConfigurationInput>,
    ) -> S3Result<S3Response<PutObjectLockConfigurationOutput>> {
        let dir = self.bucket_dir(&req.input.bucket).await?;
        let config = req
            .input
            .object_lock_configuration
            .as_ref()
            .ok_or_else(|| S3Error::new(S3ErrorCode::MalformedXML))?;
        let enabled = config
            .object_lock_enabled
            .as_ref()
            .map(ObjectLockEnabled::as_str);
        if enabled != Some(ObjectLockEnabled::ENABLED) {
            return Err(S3Error::with_message(
                S3ErrorCode::MalformedXML,
                "ObjectLockEnabled must be Enabled",
            ));
        }
        if self.versioning(dir).await? != Versioning::Enabled {
            return Err(S3Error::with_message(
                S3ErrorCode::InvalidBucketState,
                "Versioning must be 'Enabled' on the bucket to apply a Object Lock configuration",
            ));
        }
        let default = match config
            .rule
            .as_ref()
            .and_then(|r| r.default_retention.as_ref())
        {
            Some(rule) => Some(DefaultPeriod::parse(rule)?),
            None => None,
        };
        self.store_bucket_lock(dir, &BucketLock { default }).await?;
        Ok(S3Response::new(PutObjectLockConfigurationOutput::default()))
    }

    pub(crate) async fn get_object_lock_configuration(
        &self,
        req: S3Request<GetObjectLockConfigurationInput>,
    ) -> S3Result<S3Response<GetObjectLockConfigurationOutput>> {
        let dir = self.bucket_dir(&req.input.bucket).await?;
        let Some(lock) = self.bucket_lock(dir).await? else {
            return Err(S3Error::with_message(
                S3ErrorCode::ObjectLockConfigurationNotFoundError,
                "Object Lock configuration does not exist for this bucket",
            ));
        };
        let config = ObjectLockConfiguration {
            object_lock_enabled: Some(ObjectLockEnabled::from_static(ObjectLockEnabled::ENABLED)),
            rule: lock.default.map(|d| ObjectLockRule {
                default_retention: Some(d.rule()),
            }),
        };
        Ok(S3Response::new(GetObjectLockConfigurationOutput {
            object_lock_configuration: Some(config),
        }))
    }

    /// The object (or version) a retention or legal hold call is about, in a bucket with
    /// object lock.
    async fn lock_target(&self, bucket: &str, key: &str, version: Option<&str>) -> S3Result<Found> {
        let dir = self.bucket_dir(bucket).await?;
        if self.bucket_lock(dir).await?.is_none() {
            return Err(lock_not_enabled());
        }
        let found = self.find_for_read(bucket, key, version).await?;
        if found.is_dir {
            return Err(lock_not_enabled());
        }
        Ok(found)
    }

    pub(crate) async fn put_object_retention(
        &self,
        req: S3Request<PutObjectRetentionInput>,
    ) -> S3Result<S3Response<PutObjectRetentionOutput>> {
        let i = &req.input;
        let found = self
            .lock_target(&i.bucket, &i.key, i.version_id.as_deref())
            .await?;
        let asked = i.retention.as_ref();
        let retention = match (
            asked.and_then(|r| r.mode.as_ref()),
            asked.and_then(|r| r.retain_until_date.as_ref()),
        ) {
            (None, None) => None,
            (Some(mode), Some(until)) => Some(Retention {
                mode: RetentionMode::parse(mode.as_str())
                    .ok_or_else(|| S3Error::new(S3ErrorCode::MalformedXML))?,
                until: nanos_of(until)?,
            }),
            _ => return Err(invalid_argument("Mode and RetainUntilDate come together")),
        };
        if retention.is_some_and(|r| r.until <= crate::clock::now_ns()) {
            return Err(invalid_argument(
                "the retain until date must be in the future",
            ));
        }
        let bypass = bypasses(i.bypass_governance_retention);
        self.vfs
            .set_retention(&self.server_ctx, found.ino, retention, bypass)
            .await
            .map_err(|e| lock_error(e, &i.key))?;
        Ok(S3Response::new(PutObjectRetentionOutput::default()))
    }

    pub(crate) async fn get_object_retention(
        &self,
        req: S3Request<GetObjectRetentionInput>,
    ) -> S3Result<S3Response<GetObjectRetentionOutput>> {
        let i = &req.input;
        let found = self
            .lock_target(&i.bucket, &i.key, i.version_id.as_deref())
            .await?;
        let Some(r) = found.attr.protection.retention else {
            return Err(not_found(
                "The specified object does not have a ObjectLock configuration",
            ));
        };
        Ok(S3Response::new(GetObjectRetentionOutput {
            retention: Some(ObjectLockRetention {
                mode: Some(ObjectLockRetentionMode::from(r.mode.as_str().to_string())),
                retain_until_date: Some(timestamp_of(r.until)),
            }),
        }))
    }

    pub(crate) async fn put_object_legal_hold(
        &self,
        req: S3Request<PutObjectLegalHoldInput>,
    ) -> S3Result<S3Response<PutObjectLegalHoldOutput>> {
        let i = &req.input;
        let found = self
            .lock_target(&i.bucket, &i.key, i.version_id.as_deref())
            .await?;
        let status = i.legal_hold.as_ref().and_then(|h| h.status.as_ref());
        let on = match status.map(ObjectLockLegalHoldStatus::as_str) {
            Some(ObjectLockLegalHoldStatus::ON) => true,
            Some(ObjectLockLegalHoldStatus::OFF) => false,
            _ => return Err(S3Error::new(S3ErrorCode::MalformedXML)),
        };
        self.mark_held(found.ino).await?;
        self.vfs
            .set_legal_hold(&self.server_ctx, found.ino, on)
            .await
            .map_err(|e| lock_error(e, &i.key))?;
        Ok(S3Response::new(PutObjectLegalHoldOutput::default()))
    }

    pub(crate) async fn get_object_legal_hold(
        &self,
        req: S3Request<GetObjectLegalHoldInput>,
    ) -> S3Result<S3Response<GetObjectLegalHoldOutput>> {
        let i = &req.input;
        let found = self
            .lock_target(&i.bucket, &i.key, i.version_id.as_deref())
            .await?;
        let status = match found.attr.protection.legal_hold {
            true => ObjectLockLegalHoldStatus::ON,
            // A version whose legal hold was never set has none to show, as S3 answers.
            false if self.load_xattr(found.ino, HELD_XATTR).await?.is_none() => {
                return Err(not_found(
                    "The specified object does not have a ObjectLock configuration",
                ));
            }
            false => ObjectLockLegalHoldStatus::OFF,
        };
        Ok(S3Response::new(GetObjectLegalHoldOutput {
            legal_hold: Some(ObjectLockLegalHold {
                status: Some(ObjectLockLegalHoldStatus::from_static(status)),
            }),
        }))
    }

    /// Whether the version `ino` of `key` (attributes `attr`, as just read) may be
    /// deleted for good: AccessDenied while a lock holds it. With the governance bypass
    /// a governance retention is lifted first (a legal hold or a compliance retention
    /// still refuses).
    pub(crate) async fn check_deletable(
        &self,
        (ino, attr): (Ino, &Attr),
        key: &str,
        bypass: bool,
    ) -> S3Result<()> {
        let p = attr.protection;
        let now = crate::clock::now_ns();
        if !p.frozen_at(now) {
            return Ok(());
        }
        let governed = p
            .retention
            .is_some_and(|r| r.mode == RetentionMode::Governance);
        if !bypass || !governed || p.legal_hold || p.immutable {
            return Err(locked(key));
        }
        self.vfs
            .set_retention(&self.server_ctx, ino, None, true)
            .await
            .map_err(|e| lock_error(e, key))?;
        Ok(())
    }
}

/// AccessDenied for what a lock forbids (EPERM), the usual mapping otherwise.
pub(crate) fn lock_error(e: Errno, key: &str) -> S3Error {
    match e {
        Errno::EPERM => locked(key),
        e => fs_error(e, key),
    }
}
