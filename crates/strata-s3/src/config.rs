//! Bucket configuration kept in the bucket directory's xattrs (FORMAT.md "s3 v1"): the
//! owner (an access key; none means the root user), the ACL, the policy, the public access
//! block, ownership controls, CORS and lifecycle. Each is its own xattr, so two gateways
//! changing two different settings never overwrite each other. Documents S3 defines in
//! XML are stored as the XML `s3s` writes for them; the policy as the JSON it was given.
//! Objects carry their ACL in the same `user.s3.acl` xattr on their file.

use s3s::dto::{AccessControlPolicy, Grant, Grantee, Owner, PublicAccessBlockConfiguration};
use s3s::xml::{Deserialize, Deserializer, Serialize, Serializer};
use s3s::{S3Error, S3ErrorCode, S3Result};
use strata_types::{Errno, Ino};

use crate::Gateway;
use crate::error::fs_error;
use crate::policy::{Policy, Who};

/// The access key owning a bucket (absent: the root user).
pub const OWNER_XATTR: &[u8] = b"user.s3.owner";
/// A bucket's or an object's ACL grants (`AccessControlPolicy` XML).
pub const ACL_XATTR: &[u8] = b"user.s3.acl";
/// A bucket policy, the JSON as given.
pub const POLICY_XATTR: &[u8] = b"user.s3.policy";
/// `PublicAccessBlockConfiguration` XML.
pub const PAB_XATTR: &[u8] = b"user.s3.pab";
/// `OwnershipControls` XML.
pub const OWNERSHIP_XATTR: &[u8] = b"user.s3.ownership";
/// `CORSConfiguration` XML.
pub const CORS_XATTR: &[u8] = b"user.s3.cors";
/// `BucketLifecycleConfiguration` XML.
pub const LIFECYCLE_XATTR: &[u8] = b"user.s3.lifecycle";

const ALL_USERS: &str = "http://acs.amazonaws.com/groups/global/AllUsers";
const AUTHENTICATED_USERS: &str = "http://acs.amazonaws.com/groups/global/AuthenticatedUsers";
/// S3's log delivery group: granted by `log-delivery-write`, it gives no access here
/// (the gateway delivers no server access logs), but is kept and shown as S3 shows it.
const LOG_DELIVERY: &str = "http://acs.amazonaws.com/groups/s3/LogDelivery";

/// The public access block's four switches (all off when none is set).
#[derive(Clone, Copy, Debug, Default)]
pub struct PublicBlock {
    pub block_public_acls: bool,
    pub ignore_public_acls: bool,
    pub block_public_policy: bool,
    pub restrict_public_buckets: bool,
}

impl PublicBlock {
    pub fn from_config(c: &PublicAccessBlockConfiguration) -> PublicBlock {
        PublicBlock {
            block_public_acls: c.block_public_acls.unwrap_or(false),
            ignore_public_acls: c.ignore_public_acls.unwrap_or(false),
            block_public_policy: c.block_public_policy.unwrap_or(false),
            restrict_public_buckets: c.restrict_public_buckets.unwrap_or(false),
        }
    }
}

/// What deciding a request on a bucket needs.
#[derive(Debug)]
pub struct BucketAccess {
    /// The owner's access key (the root user's for buckets without an owner record).
    pub owner: String,
    pub acl: Vec<Grant>,
    pub policy: Option<Policy>,
    pub block: PublicBlock,
}

/// Whether `grantee` is `who`. Public groups count unless `ignore_public`.
pub fn grantee_matches(grantee: &Grantee, who: &Who, ignore_public: bool) -> bool {
    match (grantee.uri.as_deref(), grantee.id.as_deref(), who) {
        (Some(ALL_USERS), _, _) => !ignore_public,
        (Some(AUTHENTICATED_USERS), _, Who::User(_)) => !ignore_public,
        (_, Some(id), Who::User(me)) => id == me,
        _ => false,
    }
}

/// Whether a grant gives something to everyone or every signed user.
pub fn is_public_grant(grant: &Grant) -> bool {
    grant.grantee.as_ref().is_some_and(|g| {
        matches!(
            g.uri.as_deref(),
            Some(ALL_USERS) | Some(AUTHENTICATED_USERS)
        )
    })
}

/// A grantee: one user by id, or one of the public groups.
pub fn grantee(id: Option<&str>, uri: Option<&str>) -> Grantee {
    let kind = if uri.is_some() {
        s3s::dto::Type::GROUP
    } else {
        s3s::dto::Type::CANONICAL_USER
    };
    Grantee {
        display_name: None,
        email_address: None,
        id: id.map(str::to_string),
        type_: s3s::dto::Type::from_static(kind),
        uri: uri.map(str::to_string),
    }
}

/// The grants of a canned ACL (`private`, `public-read`, ...) besides the owner's own
/// FULL_CONTROL, which every ACL shows first.
///
/// Objects belong to their bucket's owner here, so `bucket-owner-read` and
/// `bucket-owner-full-control` grant the owner nothing it lacks: the owner's one grant.
/// `aws-exec-read` would grant the EC2 bundler, an AWS account, and is the owner alone
/// here.
pub fn canned_grants(canned: &str) -> S3Result<Vec<Grant>> {
    let grant = |g: Grantee, p: &'static str| Grant {
        grantee: Some(g),
        permission: Some(s3s::dto::Permission::from_static(p)),
    };
    use s3s::dto::Permission as P;
    Ok(match canned {
        "private" | "bucket-owner-full-control" | "bucket-owner-read" | "aws-exec-read" => {
            Vec::new()
        }
        "public-read" => vec![grant(grantee(None, Some(ALL_USERS)), P::READ)],
        "public-read-write" => vec![
            grant(grantee(None, Some(ALL_USERS)), P::READ),
            grant(grantee(None, Some(ALL_USERS)), P::WRITE),
        ],
        "authenticated-read" => vec![grant(grantee(None, Some(AUTHENTICATED_USERS)), P::READ)],
        "log-delivery-write" => vec![
            grant(grantee(None, Some(LOG_DELIVERY)), P::WRITE),
            grant(grantee(None, Some(LOG_DELIVERY)), P::READ_ACP),
        ],
        other => {
            return Err(S3Error::with_message(
                S3ErrorCode::InvalidArgument,
                format!("unknown canned ACL {other:?}"),
            ));
        }
    })
}

/// The grants of `x-amz-grant-*` headers: `id="..."` and `uri="..."` lists per
/// permission. E-mail grantees cannot be resolved here.
pub fn header_grants(headers: &[(&'static str, Option<&String>)]) -> S3Result<Vec<Grant>> {
    let mut grants = Vec::new();
    for (permission, value) in headers {
        let Some(value) = value else { continue };
        for part in value.split(',') {
            let Some((kind, v)) = part.trim().split_once('=') else {
                return Err(S3Error::with_message(
                    S3ErrorCode::InvalidArgument,
                    format!("grant {part:?} is not id=\"...\" or uri=\"...\""),
                ));
            };
            let v = v.trim().trim_matches('"');
            let g = match kind.trim() {
                "id" => grantee(Some(v), None),
                "uri" if [ALL_USERS, AUTHENTICATED_USERS, LOG_DELIVERY].contains(&v) => {
                    grantee(None, Some(v))
                }
                "emailAddress" => {
                    return Err(S3Error::with_message(
                        S3ErrorCode::UnresolvableGrantByEmailAddress,
                        "grants by e-mail address are not supported: use id=\"ACCESS-KEY\"",
                    ));
                }
                _ => {
                    return Err(S3Error::with_message(
                        S3ErrorCode::InvalidArgument,
                        format!("grantee {part:?} is not supported"),
                    ));
                }
            };
            grants.push(Grant {
                grantee: Some(g),
                permission: Some(s3s::dto::Permission::from_static(permission)),
            });
        }
    }
    Ok(grants)
}

/// An S3 XML document as stored.
pub fn to_xml<T: Serialize>(value: &T) -> S3Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut ser = Serializer::new(&mut out);
    value
        .serialize(&mut ser)
        .map_err(|e| S3Error::with_message(S3ErrorCode::InternalError, format!("{e:?}")))?;
    Ok(out)
}

/// A stored S3 XML document read back.
pub fn from_xml<T: for<'x> Deserialize<'x>>(raw: &[u8], what: &str) -> S3Result<T> {
    let mut de = Deserializer::new(raw);
    T::deserialize(&mut de).map_err(|e| {
        S3Error::with_message(
            S3ErrorCode::InternalError,
            format!("stored {what} is damaged: {e:?}"),
        )
    })
}

impl Gateway {
    /// The xattr `name` of `ino`, if set.
    pub(crate) async fn load_xattr(&self, ino: Ino, name: &[u8]) -> S3Result<Option<Vec<u8>>> {
        match self.vfs.getxattr(&self.server_ctx, ino, name, 0).await {
            Ok(v) => Ok(Some(v)),
            Err(Errno::ENODATA) => Ok(None),
            Err(e) => Err(fs_error(e, &String::from_utf8_lossy(name))),
        }
    }

    /// Set the xattr `name` of `ino`, or remove it (`None`; removing nothing is fine).
    pub(crate) async fn store_xattr(
        &self,
        ino: Ino,
        name: &[u8],
        value: Option<&[u8]>,
    ) -> S3Result<()> {
        let what = String::from_utf8_lossy(name);
        match value {
            Some(v) => self
                .vfs
                .setxattr(&self.server_ctx, ino, name, v, 0)
                .await
                .map_err(|e| fs_error(e, &what)),
            None => match self.vfs.removexattr(&self.server_ctx, ino, name).await {
                Ok(()) | Err(Errno::ENODATA) => Ok(()),
                Err(e) => Err(fs_error(e, &what)),
            },
        }
    }

    /// A stored S3 XML document of `ino`.
    pub(crate) async fn load_doc<T: for<'x> Deserialize<'x>>(
        &self,
        ino: Ino,
        name: &[u8],
    ) -> S3Result<Option<T>> {
        match self.load_xattr(ino, name).await? {
            Some(raw) => from_xml(&raw, &String::from_utf8_lossy(name)).map(Some),
            None => Ok(None),
        }
    }

    /// The owner of the bucket at `dir`: its owner record, or the root user.
    pub(crate) async fn bucket_owner(&self, dir: Ino) -> S3Result<String> {
        Ok(match self.load_xattr(dir, OWNER_XATTR).await? {
            Some(raw) => String::from_utf8_lossy(&raw).into_owned(),
            None => self.opts.root_access_key.clone(),
        })
    }

    /// How S3 shows the owner `key`: a user by their access key; the root user as the
    /// volume's id named "strata" (its access key is never shown).
    pub(crate) fn owner_of(&self, key: &str) -> Owner {
        if key == self.opts.root_access_key {
            return Owner {
                display_name: Some("strata".into()),
                id: Some(self.opts.owner_id.clone()),
            };
        }
        Owner {
            display_name: Some(key.to_string()),
            id: Some(key.to_string()),
        }
    }

    /// The root user as an owner.
    pub(crate) fn root_owner(&self) -> Owner {
        self.owner_of(&self.opts.root_access_key)
    }

    /// Everything deciding access to the bucket at `dir` (its xattrs read at once).
    pub(crate) async fn bucket_access(&self, dir: Ino, bucket: &str) -> S3Result<BucketAccess> {
        let (owner, acl, policy, block) = tokio::join!(
            self.bucket_owner(dir),
            self.load_doc::<AccessControlPolicy>(dir, ACL_XATTR),
            self.load_xattr(dir, POLICY_XATTR),
            self.load_doc::<PublicAccessBlockConfiguration>(dir, PAB_XATTR),
        );
        let policy = match policy? {
            Some(raw) => {
                let text = String::from_utf8_lossy(&raw);
                // Stored only after it parsed: a failure now is damage, refuse.
                Some(Policy::parse(&text, bucket).map_err(|why| {
                    S3Error::with_message(
                        S3ErrorCode::InternalError,
                        format!("the stored bucket policy is damaged: {why}"),
                    )
                })?)
            }
            None => None,
        };
        Ok(BucketAccess {
            owner: owner?,
            acl: acl?.and_then(|a| a.grants).unwrap_or_default(),
            policy,
            block: block?
                .as_ref()
                .map(PublicBlock::from_config)
                .unwrap_or_default(),
        })
    }

    /// The ACL grants of the object `key` in `bucket` (`None`: no such object or no ACL).
    pub(crate) async fn object_acl(&self, bucket: &str, key: &str) -> S3Result<Option<Vec<Grant>>> {
        let found = match self.find(bucket, key).await {
            Ok(found) => found,
            Err(e) if *e.code() == S3ErrorCode::NoSuchKey => return Ok(None),
            Err(e) => return Err(e),
        };
        if !found.attr.xattrs {
            return Ok(None);
        }
        let acl: Option<AccessControlPolicy> = self.load_doc(found.ino, ACL_XATTR).await?;
        Ok(acl.and_then(|a| a.grants))
    }
}
