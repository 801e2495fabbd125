//! ObjectStore conformance on SeaweedFS's S3 API (started by scripts/test.sh), an
//! independent production implementation.
use strata_object::conformance::SeaweedFs;

strata_object::object_conformance_tests!(SeaweedFs, s3);
