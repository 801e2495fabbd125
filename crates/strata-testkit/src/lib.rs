//! Dev-only helpers shared by Strata's tests. Owns the layering rules of
//! `shared/design/ARCHITECTURE.md` as data, and the check that `cargo metadata` obeys them;
//! the TCP fault proxy tests put between clients and servers ([`proxy`]); and the
//! history checker that tells whether what concurrent clients saw under faults could have
//! happened in some order of their operations ([`history`]).

pub mod history;
pub mod layering;
pub mod proxy;
