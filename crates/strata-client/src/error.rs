//! What can go wrong while opening a volume. Each variant keeps its cause; messages name
//! the META-URL with its password hidden, never a secret.

use strata_meta::MetaError;
use strata_meta::kv::KvError;
use strata_object::ObjectError;

/// Opening a volume failed.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The META-URL or a bucket URL cannot be parsed.
    #[error("{0}")]
    BadUrl(String),
    /// The engine named in the META-URL is not one Strata has.
    #[error(
        "unknown metadata engine {0:?} in META-URL (supported: sqlite3://PATH, \
         redis://HOST:PORT/DB, postgres://USER@HOST:PORT/DB, mysql://USER@(HOST:3306)/DB, \
         etcd://HOST:PORT,.../PREFIX)"
    )]
    UnknownEngine(String),
    /// The engine could not be opened or reached.
    #[error("cannot open metadata engine {url}")]
    Engine {
        url: String,
        #[source]
        source: KvError,
    },
    /// The engine holds no volume.
    #[error("{url}: no volume here; create one with `strata format {url} NAME`")]
    NotFormatted { url: String },
    /// The volume's records could not be read or a metadata call failed.
    #[error("{context}")]
    Meta {
        context: String,
        #[source]
        source: MetaError,
    },
    /// The volume names a storage kind Strata does not have.
    #[error("unknown storage {0:?} (supported: file, s3, mem)")]
    UnknownStorage(String),
    /// The bucket could not be opened or does not answer.
    #[error("bucket {bucket}")]
    Bucket {
        bucket: String,
        #[source]
        source: ObjectError,
    },
    /// The volume's compression is unknown to this build.
    #[error("compression {0}")]
    Compression(String),
    /// The volume holds blocks of another file system this build does not read.
    #[error("{0}")]
    Foreign(String),
    /// The cache directory cannot be used.
    #[error("cache directory")]
    Cache(#[source] std::io::Error),
    /// The cache group cannot be joined.
    #[error("cache group {group}: {reason}")]
    Group { group: String, reason: String },
    /// The writeback staging area cannot be used.
    #[error("writeback: {0}")]
    Writeback(String),
    /// The keys of an encrypted volume cannot be had (missing, wrong, unusable).
    #[error(transparent)]
    Keys(#[from] crate::keys::KeyError),
    /// `subdir` does not name a directory of the volume.
    #[error("--subdir {subdir}: {reason}")]
    Subdir { subdir: String, reason: String },
}

/// This crate's results.
pub type Result<T, E = OpenError> = std::result::Result<T, E>;
