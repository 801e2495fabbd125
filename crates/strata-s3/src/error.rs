//! The one place where a file system errno becomes an S3 error code ([`fs_error`]). The
//! gateway has no errors of its own outside requests (users and serving are
//! `strata-http`'s).

use s3s::{S3Error, S3ErrorCode};
use strata_types::Errno;

/// What a request's file system call failed with, as an S3 error. `key` names the
/// object in messages.
pub fn fs_error(errno: Errno, key: &str) -> S3Error {
    let (code, msg) = match errno {
        Errno::ENOENT => (S3ErrorCode::NoSuchKey, format!("no such key: {key}")),
        Errno::EACCES | Errno::EPERM => (
            S3ErrorCode::AccessDenied,
            format!("{key}: access denied by the file system"),
        ),
        Errno::EROFS => (S3ErrorCode::AccessDenied, "the gateway is read-only".into()),
        Errno::ENOSPC | Errno::EDQUOT => (
            storage_full(),
            format!("{key}: the volume or a directory quota is full"),
        ),
        Errno::ENAMETOOLONG => (
            S3ErrorCode::KeyTooLongError,
            format!("{key}: a part of the key is too long"),
        ),
        Errno::ENOTDIR => (
            parent_is_object(),
            format!(
                "{key}: a part of the key's path is an object (a key and a longer key under it as a prefix cannot both exist)"
            ),
        ),
        Errno::EISDIR | Errno::ENOTEMPTY | Errno::EEXIST => (
            exists_as_directory(),
            format!(
                "{key}: the key is a prefix of other keys (a directory), so it cannot be an object"
            ),
        ),
        Errno::EFBIG => (
            S3ErrorCode::EntityTooLarge,
            format!("{key}: larger than a file may be"),
        ),
        Errno::EINVAL => (
            S3ErrorCode::InvalidArgument,
            format!("{key}: invalid argument"),
        ),
        _ => {
            tracing::error!("{key}: file system error, errno {errno}");
            (
                S3ErrorCode::InternalError,
                format!("{key}: file system error, errno {errno}"),
            )
        }
    };
    let conflict = matches!(
        errno,
        Errno::ENOTDIR | Errno::EISDIR | Errno::ENOTEMPTY | Errno::EEXIST
    );
    let full = matches!(errno, Errno::ENOSPC | Errno::EDQUOT);
    let mut err = S3Error::with_message(code, msg);
    if conflict {
        err.set_status_code(http_conflict());
    }
    if full {
        err.set_status_code(hyper::StatusCode::INSUFFICIENT_STORAGE);
    }
    err
}

/// MinIO's code for a key whose parent path is an object; clients that know MinIO know it.
fn parent_is_object() -> S3ErrorCode {
    S3ErrorCode::Custom("XMinioParentIsObject".into())
}

/// MinIO's code for a key that is a directory holding other keys.
fn exists_as_directory() -> S3ErrorCode {
    S3ErrorCode::Custom("XMinioObjectExistsAsDirectory".into())
}

/// MinIO's code for a full backend (HTTP 507).
fn storage_full() -> S3ErrorCode {
    S3ErrorCode::Custom("XMinioStorageFull".into())
}

fn http_conflict() -> hyper::StatusCode {
    hyper::StatusCode::CONFLICT
}

/// A request the gateway does not serve (yet), with why.
pub fn not_implemented(what: &str) -> S3Error {
    S3Error::with_message(
        S3ErrorCode::NotImplemented,
        format!("{what} is not supported by strata gateway"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errnos_become_s3_codes() {
        assert_eq!(*fs_error(Errno::ENOENT, "k").code(), S3ErrorCode::NoSuchKey);
        assert_eq!(
            *fs_error(Errno::EROFS, "k").code(),
            S3ErrorCode::AccessDenied
        );
        let conflict = fs_error(Errno::ENOTDIR, "a/b");
        assert_eq!(conflict.code().as_str(), "XMinioParentIsObject");
        assert_eq!(conflict.status_code(), Some(hyper::StatusCode::CONFLICT));
        assert_eq!(
            *fs_error(Errno::EIO, "k").code(),
            S3ErrorCode::InternalError
        );
    }
}
