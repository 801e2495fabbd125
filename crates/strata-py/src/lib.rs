//! `strata._native`, the Python SDK's native module: a Strata volume opened in the
//! Python process through the VFS — no FUSE, no kernel round trips. I/O runs without the
//! GIL; one client is safe to share across threads and survives `fork()` (the child gets
//! its own session). The `strata` Python package wraps it in Python's own file objects,
//! `os`-like calls and an fsspec file system.

mod client;
mod dircache;
mod error;
mod file;
mod options;
mod paths;
mod shared;
mod volume;

use pyo3::prelude::*;

// Rust's allocations (block buffers, read pieces) reuse freed memory instead of mapping
// fresh pages for every 4 MiB read, as the system allocator did (page faults were half
// of a sequential read's time).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<client::Client>()?;
    m.add_class::<file::NativeFile>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
