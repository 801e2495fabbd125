//! The one place where errors of the layers below become errno values. Anything that is
//! not a POSIX outcome (engine failures, object store failures, corrupt data) is logged
//! here and reported as EIO; running out of space stays ENOSPC.

use strata_chunk::ChunkError;
use strata_meta::MetaError;
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
        _ => Errno::EIO,
    }
}
