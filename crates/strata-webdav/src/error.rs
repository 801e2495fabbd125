//! The WebDAV server's errors, and the one place where a VFS errno becomes a dav-server
//! file-system error (and so an HTTP status).

use dav_server::fs::FsError;
use strata_types::Errno;

/// What can go wrong in the WebDAV server outside a request.
#[derive(Debug, thiserror::Error)]
pub enum WebDavError {
    /// The file system refused an operation.
    #[error("{what}: errno {errno}")]
    Fs { what: String, errno: Errno },
    /// The lock table in the volume cannot be read.
    #[error("lock table: {0}")]
    LockTable(String),
}

/// The dav-server error (and HTTP status) for a VFS errno.
pub(crate) fn fs_error(e: Errno) -> FsError {
    match e {
        Errno::ENOENT => FsError::NotFound,
        Errno::EEXIST | Errno::ENOTEMPTY => FsError::Exists,
        Errno::EACCES | Errno::EPERM | Errno::EROFS | Errno::EISDIR | Errno::ENOTDIR => {
            FsError::Forbidden
        }
        Errno::ENOSPC | Errno::EDQUOT | Errno::EMLINK => FsError::InsufficientStorage,
        Errno::EFBIG => FsError::TooLarge,
        Errno::ELOOP => FsError::LoopDetected,
        Errno::ENAMETOOLONG => FsError::PathTooLong,
        Errno::EXDEV => FsError::IsRemote,
        Errno::ENOSYS | Errno::EOPNOTSUPP => FsError::NotImplemented,
        other => {
            tracing::warn!("WebDAV request failed: errno {other}");
            FsError::GeneralFailure
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errnos_map_to_the_statuses_clients_expect() {
        assert_eq!(fs_error(Errno::ENOENT), FsError::NotFound);
        assert_eq!(fs_error(Errno::ENOTEMPTY), FsError::Exists);
        assert_eq!(fs_error(Errno::EROFS), FsError::Forbidden);
        assert_eq!(fs_error(Errno::EDQUOT), FsError::InsufficientStorage);
        assert_eq!(fs_error(Errno::ENAMETOOLONG), FsError::PathTooLong);
        assert_eq!(fs_error(Errno::EIO), FsError::GeneralFailure);
    }
}
