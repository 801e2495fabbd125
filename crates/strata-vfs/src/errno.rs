//! The one place where errors of the layers below become errno values. What the caller
//! can act on keeps its meaning from the store to the caller: no space (ENOSPC), over
//! quota (EDQUOT), a read-only store (EROFS), a store that did not answer in time
//! (ETIMEDOUT). Anything else that is not a POSIX outcome (engine failures, other store
//! failures, corrupt data) is logged here and reported as EIO.

use strata_chunk::ChunkError;
use strata_meta::MetaError;
use strata_object::ObjectError;
use strata_types::Errno;

/// The errno for a metadata error.
pub fn from_meta(e: MetaError) -> Errno {
    let errno = e.errno();
    if !matches!(e, MetaError::Posix(_)) {
        tracing::warn!("metadata error ({}): {e}", errno.name());
    }
    errno
}

/// The errno for a data-layer error.
pub fn from_chunk(e: ChunkError) -> Errno {
    tracing::warn!("data error: {e}");
    match e {
        ChunkError::OutOfChunk { .. } => Errno::EFBIG,
        ChunkError::Object(o) => from_object(&o),
        _ => Errno::EIO,
    }
}

/// The errno for an object store error.
pub fn from_object(e: &ObjectError) -> Errno {
    match e {
        ObjectError::NoSpace(_) => Errno::ENOSPC,
        ObjectError::Quota(_) => Errno::EDQUOT,
        ObjectError::ReadOnly(_) => Errno::EROFS,
        ObjectError::Timeout(_) => Errno::ETIMEDOUT,
        _ => Errno::EIO,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_errors_a_caller_can_act_on_keep_their_meaning() {
        let object = |e: ObjectError| from_chunk(ChunkError::Object(e));
        assert_eq!(object(ObjectError::NoSpace("x".into())), Errno::ENOSPC);
        assert_eq!(object(ObjectError::Quota("x".into())), Errno::EDQUOT);
        assert_eq!(object(ObjectError::ReadOnly("x".into())), Errno::EROFS);
        let slow = ObjectError::Timeout(std::time::Duration::from_secs(1));
        assert_eq!(object(slow), Errno::ETIMEDOUT);
        assert_eq!(object(ObjectError::Other("x".into())), Errno::EIO);
        assert_eq!(
            object(ObjectError::Corrupt {
                key: "k".into(),
                reason: "r".into()
            }),
            Errno::EIO
        );
    }
}
