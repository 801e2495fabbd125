//! Dev-only helpers shared by Strata's tests. Owns the layering rules of
//! `shared/design/ARCHITECTURE.md` as data, and the check that `cargo metadata` obeys them
//! and that no crate's modules import each other in a circle ([`modules`]);
//! the TCP fault proxy tests put between clients and servers ([`proxy`]); and the
//! history checker that tells whether what concurrent clients saw under faults could have
//! happened in some order of their operations ([`history`]); and a crash file system that
//! loses what was never `fsync`ed when the power is cut ([`crashfs`]); and free ports and
//! killed-on-drop processes for tests that start their own servers ([`servers`]).

pub mod crashfs;
pub mod history;
pub mod layering;
pub mod modules;
pub mod proxy;
pub mod servers;
