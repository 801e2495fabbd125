//! Dev-only helpers shared by Strata's tests. Owns the layering rules of
//! `shared/design/ARCHITECTURE.md` as data, and the check that `cargo metadata` obeys them;
//! and the TCP fault proxy tests put between clients and servers ([`proxy`]).

pub mod layering;
pub mod proxy;
