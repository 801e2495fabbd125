//! Nothing to call: this crate exists for its `Cargo.toml`, which names the features the
//! workspace's test build turns on in shared dependencies (see the comment there).
