//! ObjectStore conformance on the in-memory backend.
use strata_object::conformance::MemoryBackend;

strata_object::object_conformance_tests!(MemoryBackend);
