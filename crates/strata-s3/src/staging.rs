//! The types of an object on its way in: the temporary file it is written to in the
//! gateway's hidden directory, and what it may replace when renamed into place.

use strata_types::Ino;

/// RENAME_NOREPLACE.
pub(crate) const NOREPLACE: u32 = 1;

/// What a new object may replace when it is renamed into place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Replace {
    /// Whatever is there.
    Any,
    /// Nothing: an existing object fails the request (`If-None-Match: *`).
    Nothing,
    /// Only this inode, the object whose ETag `If-Match` checked: if another writer
    /// replaced or deleted it meanwhile, the request fails.
    Only(Ino),
}

/// A temporary file being written in the gateway's hidden directory.
#[derive(Debug)]
pub(crate) struct TempFile {
    pub dir: Ino,
    pub name: String,
    pub ino: Ino,
    /// The ACL (`AccessControlPolicy` XML) the object gets when it is installed.
    pub acl: Option<Vec<u8>>,
    /// The object lock its request asked for (`lock.rs`), given once it is installed
    /// with the bucket's default retention.
    pub lock: crate::lock::LockRequest,
}
