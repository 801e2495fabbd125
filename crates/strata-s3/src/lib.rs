//! Strata's S3 gateway: the S3 protocol (parsed, signed and serialized by `s3s`) over
//! the VFS. A key `a/b/c` is the file `c` in directory `a/b` of the bucket's directory;
//! what S3 keeps beside the bytes lives in an xattr (see [`objinfo`]). One bucket is the
//! served directory itself, or with `multi_buckets` each top-level directory is one.
//! Everything a request changes is decided by the metadata engine, so any number of
//! gateway processes (and mounts) can serve one volume.

mod access;
mod attributes;
mod body;
mod bucket;
mod clock;
mod config;
mod config_ops;
mod cors;
pub mod error;
pub mod keys;
mod list;
#[cfg(test)]
mod list_model;
mod lock;
mod lock_ops;
mod multipart;
mod objects;
pub mod objinfo;
mod paths;
pub mod policy;
mod policy_cond;
mod presign;
mod read;
mod serve;
mod service;
mod sigv2;
mod staging;
mod tags;
mod versions;
#[cfg(test)]
mod versions_model;
mod versions_ops;

use std::sync::Arc;

use std::borrow::Cow;

use strata_vfs::{Ctx, Vfs};

pub use serve::serve;
pub use service::{Credentials, GatewayService, build_service};
pub use strata_http::ServeOptions;

/// How a gateway serves its volume.
#[derive(Clone, Debug)]
pub struct GatewayOptions {
    /// Each top-level directory is a bucket (`--multi-buckets`); otherwise the served
    /// directory is the one bucket named [`GatewayOptions::bucket`].
    pub multi_buckets: bool,
    /// The one bucket's name (the volume's name).
    pub bucket: String,
    /// Shown as the owner of the root user's buckets and objects.
    pub owner_id: String,
    /// The root user's access key: may do everything; owns buckets without an owner.
    pub root_access_key: String,
}

/// The S3 service over one volume.
#[derive(Debug, Clone)]
pub struct Gateway {
    vfs: Arc<Vfs>,
    opts: GatewayOptions,
    /// Who the gateway acts as in the file system.
    server_ctx: Ctx,
    /// Who this request acts as instead: a user kept in the volume with its own POSIX
    /// ids ([`access::Caller`]).
    caller: Option<Arc<Ctx>>,
}

impl Gateway {
    /// A gateway acting as the user `ctx` in the volume `vfs` serves.
    pub fn new(vfs: Arc<Vfs>, opts: GatewayOptions, ctx: Ctx) -> Gateway {
        Gateway {
            vfs,
            opts,
            // The gateway keeps object versions: it may move the names of locked ones
            // into its version store and back (strata-meta `protect.rs`).
            server_ctx: Ctx {
                version_keeper: true,
                ..ctx
            },
            caller: None,
        }
    }

    /// Who the request acts as in the file system.
    pub(crate) fn ctx(&self) -> &Ctx {
        self.caller.as_deref().unwrap_or(&self.server_ctx)
    }

    /// [`Gateway::ctx`], allowed to replace a locked version's name while the version
    /// keeps another (its link in the version store).
    pub(crate) fn keeper_ctx(&self) -> Ctx {
        Ctx {
            version_keeper: true,
            ..self.ctx().clone()
        }
    }

    /// The gateway as it serves `req`: acting as the request's user where the access
    /// check found one with POSIX ids.
    pub(crate) fn acting_for<T>(&self, req: &s3s::S3Request<T>) -> Cow<'_, Gateway> {
        match req.extensions.get::<access::Caller>() {
            Some(caller) => Cow::Owned(Gateway {
                caller: Some(caller.0.clone()),
                ..self.clone()
            }),
            None => Cow::Borrowed(self),
        }
    }
}

/// A gateway over a fresh in-memory volume for unit tests: bucket `b` (or one per
/// top-level directory with `multi_buckets`), root user `root`.
#[cfg(test)]
pub(crate) async fn test_gateway(multi_buckets: bool) -> Gateway {
    let vfs = Arc::new(strata_vfs::testing::memory_vfs().await);
    let opts = GatewayOptions {
        multi_buckets,
        bucket: "b".into(),
        owner_id: "o".into(),
        root_access_key: "root".into(),
    };
    let ctx = Ctx {
        umask: 0o022,
        ..Ctx::root()
    };
    Gateway::new(vfs, opts, ctx)
}
