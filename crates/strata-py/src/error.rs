//! The SDK's errors and the one place they become Python exceptions: an errno becomes
//! `OSError(errno, strerror, path)` (Python picks the subclass: `FileNotFoundError`,
//! `PermissionError`, ...); a volume that cannot be opened becomes `ValueError` (bad
//! input), `FileNotFoundError` (no volume there) or `ConnectionError` (unreachable).

use pyo3::PyErr;
use pyo3::exceptions::{
    PyConnectionError, PyOSError, PyPermissionError, PyRuntimeError, PyValueError,
};
use strata_client::OpenError;
use strata_types::Errno;

/// What an SDK call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum SdkError {
    /// A file-system call failed with this errno on `path`.
    #[error("errno {errno} on {path}")]
    Posix { errno: Errno, path: String },
    /// The volume could not be opened.
    #[error("cannot open the volume")]
    Open(#[from] OpenError),
    /// The operation needs an open file or client, and it was closed.
    #[error("I/O operation on closed {0}")]
    Closed(&'static str),
    /// An argument is out of range or malformed.
    #[error("{0}")]
    BadArgument(String),
    /// The async runtime could not be started.
    #[error("cannot start the async runtime")]
    Runtime(#[source] std::io::Error),
}

/// The SDK's results.
pub type Result<T, E = SdkError> = std::result::Result<T, E>;

/// An errno with the path it is about.
pub fn posix(errno: Errno, path: &[u8]) -> SdkError {
    SdkError::Posix {
        errno,
        path: String::from_utf8_lossy(path).into_owned(),
    }
}

/// Attach `path` to a VFS failure.
pub trait OnPath<T> {
    fn on(self, path: &[u8]) -> Result<T>;
}

impl<T> OnPath<T> for std::result::Result<T, Errno> {
    fn on(self, path: &[u8]) -> Result<T> {
        self.map_err(|errno| posix(errno, path))
    }
}

/// "cause: its cause: ..." — the whole chain on one line.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

impl From<SdkError> for PyErr {
    fn from(e: SdkError) -> PyErr {
        match e {
            SdkError::Posix { errno, path } => {
                let code = errno.0;
                let text = nix::errno::Errno::from_raw(code).desc();
                PyOSError::new_err((code, text, path))
            }
            SdkError::Open(open) => {
                let text = chain(&open);
                match open {
                    OpenError::BadUrl(_)
                    | OpenError::UnknownEngine(_)
                    | OpenError::UnknownStorage(_)
                    | OpenError::Compression(_)
                    | OpenError::Foreign(_)
                    | OpenError::Subdir { .. } => PyValueError::new_err(text),
                    OpenError::NotFormatted { .. } => PyOSError::new_err((2, text)),
                    OpenError::Engine { .. } | OpenError::Bucket { .. } => {
                        PyConnectionError::new_err(text)
                    }
                    OpenError::Keys(_) => PyPermissionError::new_err(text),
                    OpenError::Meta { .. }
                    | OpenError::Cache(_)
                    | OpenError::Group { .. }
                    | OpenError::Writeback(_) => PyOSError::new_err(text),
                }
            }
            SdkError::Closed(what) => {
                PyValueError::new_err(format!("I/O operation on closed {what}"))
            }
            SdkError::BadArgument(text) => PyValueError::new_err(text),
            SdkError::Runtime(io) => PyRuntimeError::new_err(chain(&io)),
        }
    }
}
