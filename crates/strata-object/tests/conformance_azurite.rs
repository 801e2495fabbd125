//! The object store conformance suite on Azure Blob Storage's emulator, Azurite (started by
//! scripts/test.sh).
use strata_object::conformance::Azurite;

strata_object::object_conformance_tests!(Azurite, credentialed);
