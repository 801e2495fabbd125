//! S3 object lock, the gateway's side (docs/S3.md): a bucket's lock configuration (kept
//! in the bucket directory's `user.s3.object-lock` attribute), the lock a new object
//! gets from its request's headers or the bucket's default retention, and the lock
//! fields of HEAD and GET answers. The lock itself is an inode protection the metadata
//! layer enforces for every front end (strata-meta `protect.rs`).

use s3s::dto::{
    DefaultRetention, ObjectLockLegalHoldStatus, ObjectLockMode, ObjectLockRetainUntilDate,
    ObjectLockRetentionMode, Timestamp,
};
use s3s::{S3Error, S3ErrorCode, S3Result};
use serde::{Deserialize, Serialize};
use strata_types::{Attr, Errno, Ino, Nanos, Protection, Retention, RetentionMode};

use crate::Gateway;
use crate::clock::{now_ns, system_time};
use crate::error::fs_error;

/// The bucket attribute holding its lock configuration (present: lock enabled).
pub(crate) const LOCK_XATTR: &[u8] = b"user.s3.object-lock";
/// The xattr of an object version whose legal hold has ever been set (value `1`).
pub(crate) const HELD_XATTR: &[u8] = b"user.s3.legal-hold";
const DAY_NS: i64 = 86_400 * 1_000_000_000;
/// AWS's limits on a default retention's period.
const MAX_DAYS: i32 = 36_500;
const MAX_YEARS: i32 = 100;

/// A bucket's lock configuration: enabled, with or without a default retention.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct BucketLock {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<DefaultPeriod>,
}

/// A default retention: mode and a period in days or years (exactly one).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct DefaultPeriod {
    pub mode: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub days: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub years: Option<i32>,
}

impl DefaultPeriod {
    /// The configuration's rule, checked as AWS checks it.
    pub fn parse(rule: &DefaultRetention) -> S3Result<DefaultPeriod> {
        let mode = rule
            .mode
            .as_ref()
            .map(|m| m.as_str().to_string())
            .filter(|m| RetentionMode::parse(m).is_some())
            .ok_or_else(|| malformed("DefaultRetention needs Mode GOVERNANCE or COMPLIANCE"))?;
        let period = DefaultPeriod {
            mode,
            days: rule.days,
            years: rule.years,
        };
        match (period.days, period.years) {
            (Some(d), None) if (1..=MAX_DAYS).contains(&d) => Ok(period),
            (None, Some(y)) if (1..=MAX_YEARS).contains(&y) => Ok(period),
            (Some(_), Some(_)) | (None, None) => Err(malformed(
                "DefaultRetention takes exactly one of Days and Years",
            )),
            _ => Err(S3Error::with_message(
                S3ErrorCode::InvalidArgument,
                "the default retention period must be positive (and at most 100 years)",
            )),
        }
    }

    /// The retention an object written at `now` gets.
    pub fn retention_from(&self, now: Nanos) -> Option<Retention> {
        let days = match (self.days, self.years) {
            (Some(d), _) => i64::from(d),
            (None, Some(y)) => i64::from(y) * 365,
            (None, None) => return None,
        };
        Some(Retention {
            mode: RetentionMode::parse(&self.mode)?,
            until: now.saturating_add(days.saturating_mul(DAY_NS)),
        })
    }

    pub fn rule(&self) -> DefaultRetention {
        DefaultRetention {
            days: self.days,
            years: self.years,
            mode: Some(ObjectLockRetentionMode::from(self.mode.clone())),
        }
    }
}

fn malformed(msg: &str) -> S3Error {
    S3Error::with_message(S3ErrorCode::MalformedXML, msg.to_string())
}

/// The lock a new object is given.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct NewLock {
    pub retention: Option<Retention>,
    pub legal_hold: bool,
}

/// The lock headers of a write (`x-amz-object-lock-*`), checked as AWS checks them: mode
/// and date come together, the date lies ahead.
pub(crate) struct LockHeaders<'a> {
    pub mode: Option<&'a ObjectLockMode>,
    pub until: Option<&'a ObjectLockRetainUntilDate>,
    pub hold: Option<&'a ObjectLockLegalHoldStatus>,
}

impl LockHeaders<'_> {
    /// The lock the headers ask for, checked.
    pub fn request(&self) -> S3Result<LockRequest> {
        let retention = self.retention(now_ns())?;
        Ok(LockRequest {
            retain_mode: retention.map(|r| r.mode.as_str().to_string()),
            retain_until: retention.map(|r| r.until),
            legal_hold: self.legal_hold()?,
            given: self.mode.is_some() || self.until.is_some() || self.hold.is_some(),
        })
    }

    fn retention(&self, now: Nanos) -> S3Result<Option<Retention>> {
        let (mode, until) = match (self.mode, self.until) {
            (None, None) => return Ok(None),
            (Some(mode), Some(until)) => (mode, until),
            _ => {
                return Err(invalid_argument(
                    "x-amz-object-lock-mode and x-amz-object-lock-retain-until-date come together",
                ));
            }
        };
        let mode = RetentionMode::parse(mode.as_str())
            .ok_or_else(|| invalid_argument("unknown x-amz-object-lock-mode"))?;
        let until = nanos_of(until)?;
        if until <= now {
            return Err(invalid_argument(
                "the retain until date must be in the future",
            ));
        }
        Ok(Some(Retention { mode, until }))
    }

    fn legal_hold(&self) -> S3Result<bool> {
        match self.hold.map(ObjectLockLegalHoldStatus::as_str) {
            None | Some(ObjectLockLegalHoldStatus::OFF) => Ok(false),
            Some(ObjectLockLegalHoldStatus::ON) => Ok(true),
            Some(_) => Err(invalid_argument(
                "x-amz-object-lock-legal-hold is ON or OFF",
            )),
        }
    }
}

/// The lock a write asked for in its headers, as a multipart upload keeps it until it
/// completes (docs/FORMAT.md, the upload record).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LockRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retain_mode: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retain_until: Option<Nanos>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub legal_hold: bool,
    /// Some lock header was there (refused on a bucket without object lock).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub given: bool,
}

impl LockRequest {
    pub fn is_empty(&self) -> bool {
        *self == LockRequest::default()
    }

    fn retention(&self) -> Option<Retention> {
        Some(Retention {
            mode: RetentionMode::parse(self.retain_mode.as_deref()?)?,
            until: self.retain_until?,
        })
    }
}

pub(crate) fn invalid_argument(msg: &str) -> S3Error {
    S3Error::with_message(S3ErrorCode::InvalidArgument, msg.to_string())
}

/// InvalidRequest for a lock asked of a bucket without object lock (AWS's answer).
pub(crate) fn lock_not_enabled() -> S3Error {
    S3Error::with_message(
        S3ErrorCode::InvalidRequest,
        "Bucket is missing Object Lock Configuration",
    )
}

/// AccessDenied for a change a lock forbids.
pub(crate) fn locked(key: &str) -> S3Error {
    S3Error::with_message(
        S3ErrorCode::AccessDenied,
        format!("Access Denied because object protected by object lock: {key}"),
    )
}

/// Nanoseconds since the epoch of an S3 date.
pub(crate) fn nanos_of(t: &Timestamp) -> S3Result<Nanos> {
    let t = time::OffsetDateTime::from(t.clone());
    i64::try_from(t.unix_timestamp_nanos()).map_err(|_| invalid_argument("date out of range"))
}

pub(crate) fn timestamp_of(ns: Nanos) -> Timestamp {
    Timestamp::from(system_time(ns))
}

/// The lock fields of a HEAD or GET answer for a file with attributes `attr`.
pub(crate) fn lock_fields(
    attr: &Attr,
) -> (
    Option<ObjectLockMode>,
    Option<ObjectLockRetainUntilDate>,
    Option<ObjectLockLegalHoldStatus>,
) {
    let p: &Protection = &attr.protection;
    let mode = p
        .retention
        .map(|r| ObjectLockMode::from(r.mode.as_str().to_string()));
    let until = p.retention.map(|r| timestamp_of(r.until));
    let hold = p
        .legal_hold
        .then(|| ObjectLockLegalHoldStatus::from_static(ObjectLockLegalHoldStatus::ON));
    (mode, until, hold)
}

impl Gateway {
    /// The bucket's lock configuration, `None` when object lock is not enabled.
    pub(crate) async fn bucket_lock(&self, bucket_dir: Ino) -> S3Result<Option<BucketLock>> {
        let Some(raw) = self.load_xattr(bucket_dir, LOCK_XATTR).await? else {
            return Ok(None);
        };
        serde_json::from_slice(&raw)
            .map(Some)
            .map_err(|e| fs_error(Errno::EIO, &format!("object lock configuration: {e}")))
    }

    pub(crate) async fn store_bucket_lock(
        &self,
        bucket_dir: Ino,
        lock: &BucketLock,
    ) -> S3Result<()> {
        let raw = serde_json::to_vec(lock)
            .map_err(|e| fs_error(Errno::EIO, &format!("object lock configuration: {e}")))?;
        self.store_xattr(bucket_dir, LOCK_XATTR, Some(&raw)).await
    }

    /// The lock a new object of the bucket gets: the request's retention, else the
    /// bucket's default one; the request's legal hold. InvalidRequest for lock headers
    /// on a bucket without object lock.
    pub(crate) async fn new_lock(
        &self,
        bucket_dir: Ino,
        asked: &LockRequest,
    ) -> S3Result<Option<NewLock>> {
        let Some(config) = self.bucket_lock(bucket_dir).await? else {
            return match asked.given {
                true => Err(lock_not_enabled()),
                false => Ok(None),
            };
        };
        let now = now_ns();
        let retention = asked
            .retention()
            .or_else(|| config.default.as_ref()?.retention_from(now));
        let lock = NewLock {
            retention,
            legal_hold: asked.legal_hold,
        };
        Ok(Some(lock).filter(|l| l.retention.is_some() || l.legal_hold))
    }

    /// Note that the legal hold of `ino` has been set (ON or OFF), so GetObjectLegalHold
    /// tells "lifted" from "never held" as S3 does.
    pub(crate) async fn mark_held(&self, ino: Ino) -> S3Result<()> {
        self.store_xattr(ino, HELD_XATTR, Some(b"1")).await
    }

    /// Lock the installed object `ino` (as the gateway: the request's permission to
    /// write it was checked).
    pub(crate) async fn apply_lock(&self, ino: Ino, lock: &NewLock, key: &str) -> S3Result<()> {
        if lock.legal_hold {
            self.mark_held(ino).await?;
        }
        if lock.retention.is_some() {
            self.vfs
                .set_retention(&self.server_ctx, ino, lock.retention, false)
                .await
                .map_err(|e| fs_error(e, key))?;
        }
        if lock.legal_hold {
            self.vfs
                .set_legal_hold(&self.server_ctx, ino, true)
                .await
                .map_err(|e| fs_error(e, key))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(mode: &str, days: Option<i32>, years: Option<i32>) -> DefaultRetention {
        DefaultRetention {
            mode: Some(ObjectLockRetentionMode::from(mode.to_string())),
            days,
            years,
        }
    }

    #[test]
    fn default_retentions_are_checked_and_applied() {
        let days = DefaultPeriod::parse(&rule("GOVERNANCE", Some(2), None)).unwrap();
        let r = days.retention_from(10).unwrap();
        assert_eq!(
            (r.mode, r.until),
            (RetentionMode::Governance, 10 + 2 * DAY_NS)
        );
        let years = DefaultPeriod::parse(&rule("COMPLIANCE", None, Some(1))).unwrap();
        assert_eq!(years.retention_from(0).unwrap().until, 365 * DAY_NS);
        assert_eq!(years.rule().years, Some(1));
        for (r, code) in [
            (
                rule("GOVERNANCE", Some(1), Some(1)),
                S3ErrorCode::MalformedXML,
            ),
            (rule("GOVERNANCE", None, None), S3ErrorCode::MalformedXML),
            (rule("SOMETIMES", Some(1), None), S3ErrorCode::MalformedXML),
            (
                rule("GOVERNANCE", Some(0), None),
                S3ErrorCode::InvalidArgument,
            ),
            (
                rule("GOVERNANCE", None, Some(101)),
                S3ErrorCode::InvalidArgument,
            ),
        ] {
            assert_eq!(*DefaultPeriod::parse(&r).unwrap_err().code(), code, "{r:?}");
        }
    }

    #[test]
    fn lock_headers_come_together_and_look_ahead() {
        let mode = ObjectLockMode::from("COMPLIANCE".to_string());
        let soon = timestamp_of(2_000_000_000_000_000_000);
        let past = timestamp_of(1_000_000_000);
        let on = ObjectLockLegalHoldStatus::from_static(ObjectLockLegalHoldStatus::ON);
        let full = LockHeaders {
            mode: Some(&mode),
            until: Some(&soon),
            hold: Some(&on),
        };
        let asked = full.request().unwrap();
        assert_eq!(asked.retention().unwrap().until, 2_000_000_000_000_000_000);
        assert!(asked.legal_hold && asked.given);
        assert!(
            LockHeaders {
                mode: None,
                until: None,
                hold: None
            }
            .request()
            .unwrap()
            .is_empty()
        );
        let half = LockHeaders {
            mode: Some(&mode),
            until: None,
            hold: None,
        };
        assert_eq!(
            *half.retention(0).unwrap_err().code(),
            S3ErrorCode::InvalidArgument
        );
        let late = LockHeaders {
            mode: Some(&mode),
            until: Some(&past),
            hold: None,
        };
        assert!(late.retention(2_000_000_000).is_err());
    }
}
