//! Opening a Strata volume from a META-URL: the metadata engine it names, the object
//! store its format record names, the block cache, the session and the VFS. The `strata`
//! binary and the Python SDK both open volumes through this crate; it is the only
//! library that names concrete engines and stores.

mod client;
mod error;
mod group;
pub mod keys;
mod volume;

pub use client::{Client, ClientOptions, StoreWrapper, resolve_subdir, session_timeout};
pub use error::{OpenError, Result};
pub use group::GroupOptions;
pub use keys::{KekSource, KeyOptions};
pub use volume::{
    RoutedStores, azure_config, check_backend, foreign_blocks, home_path, load_meta,
    load_meta_with, open_backend, open_engine, route_stores, seal_unit, volume_keys,
};
