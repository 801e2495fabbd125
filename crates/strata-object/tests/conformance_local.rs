//! ObjectStore conformance on the local-directory backend.
use strata_object::conformance::LocalBackend;

strata_object::object_conformance_tests!(LocalBackend);
