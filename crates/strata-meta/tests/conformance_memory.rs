//! The metadata conformance suite on the in-memory engine.
use strata_meta::conformance::MemoryStore;

strata_meta::meta_conformance_tests!(MemoryStore);
