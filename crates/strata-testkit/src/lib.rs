//! Dev-only helpers shared by Strata's tests. Owns the layering rules of
//! `shared/design/ARCHITECTURE.md` as data, and the check that `cargo metadata` obeys them.

pub mod layering;
