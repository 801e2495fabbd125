//! The metadata conformance suite on the SQLite engine (clients are separate engine
//! instances on one database file, as separate processes would be).
use strata_meta::conformance::SqliteStore;

strata_meta::meta_conformance_tests!(SqliteStore);
