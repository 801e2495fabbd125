//! ObjectStore conformance on a real S3 server: s3s-fs (checks SigV4), started per test.
use strata_object::conformance::S3sFs;

strata_object::object_conformance_tests!(S3sFs, s3);
