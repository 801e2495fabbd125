//! The metadata layer's error type, and its one mapping to errno ([`MetaError::errno`]).

use strata_types::Errno;

use crate::kv::{KvError, TxnError, display_key};

/// Everything a metadata operation can fail with.
#[derive(Debug, thiserror::Error)]
pub enum MetaError {
    /// A POSIX-level outcome (ENOENT, EEXIST, EACCES, ...), returned as is to callers.
    #[error("{0}")]
    Posix(Errno),
    /// The chunk already holds the most slices a chunk may have; compact it first.
    #[error(
        "chunk {index} of inode {ino} holds {count} slices, the most allowed: compact it first"
    )]
    TooManySlices { ino: u64, index: u32, count: usize },
    /// A value read from the engine does not decode.
    #[error("corrupt metadata under key {key}: {reason}")]
    Corrupt { key: String, reason: String },
    /// The volume has not been formatted.
    #[error("volume is not formatted (no format record found); run `strata format` first")]
    NotFormatted,
    /// `format` of an existing volume with different settings.
    #[error("volume already formatted with different settings: {0}")]
    FormatMismatch(String),
    /// An argument outside what the operation accepts (not a POSIX case).
    #[error("invalid argument: {0}")]
    Invalid(String),
    /// The engine failed or gave up.
    #[error(transparent)]
    Kv(#[from] KvError),
}

impl MetaError {
    /// A corrupt-value error naming `key`.
    pub fn corrupt(key: &[u8], reason: impl Into<String>) -> MetaError {
        MetaError::Corrupt {
            key: display_key(key),
            reason: reason.into(),
        }
    }

    /// The errno a file-system caller should see for this error.
    pub fn errno(&self) -> Errno {
        match self {
            MetaError::Posix(e) => *e,
            MetaError::TooManySlices { .. } => Errno::EAGAIN,
            MetaError::Invalid(_) => Errno::EINVAL,
            MetaError::Kv(KvError::Unavailable(_)) => Errno::EIO,
            MetaError::Kv(KvError::RetriesExhausted { .. }) => Errno::EIO,
            MetaError::Corrupt { .. }
            | MetaError::NotFormatted
            | MetaError::FormatMismatch(_)
            | MetaError::Kv(_) => Errno::EIO,
        }
    }
}

impl From<Errno> for MetaError {
    fn from(e: Errno) -> MetaError {
        MetaError::Posix(e)
    }
}

impl TxnError for MetaError {
    fn as_kv(&self) -> Option<&KvError> {
        match self {
            MetaError::Kv(e) => Some(e),
            _ => None,
        }
    }
}

/// Result of a metadata operation.
pub type Result<T, E = MetaError> = std::result::Result<T, E>;

/// Shorthand for returning a POSIX error.
pub fn posix<T>(e: Errno) -> Result<T> {
    Err(MetaError::Posix(e))
}
