//! ObjectStore conformance on a real S3 server: s3s-fs (checks SigV4), started per test.
use strata_object::conformance::S3sFs;

strata_object::object_conformance_tests!(S3sFs, s3);

/// A store's storage class goes with its puts: s3s-fs refuses classes it does not know
/// on PutObject, so a bogus one fails and a known one is stored. (It does not check them
/// on CreateMultipartUpload, so multipart uploads, which send it too, are not shown here.)
#[tokio::test]
async fn puts_carry_the_storage_class() {
    use bytes::Bytes;
    use strata_object::ObjectStore;
    use strata_object::backend::Backend;
    use strata_object::conformance::{S3TestBackend, TestBackend};
    let server = S3sFs::start();
    let with_class = |class: &str| {
        Backend::s3(&server.config())
            .map(|b| b.with_storage_class(Some(class.to_string())))
            .map_err(|e| e.to_string())
    };
    let known = with_class("REDUCED_REDUNDANCY").unwrap_or_else(|e| panic!("{e}"));
    known
        .put("a", Bytes::from_static(b"x"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let bogus = with_class("NO_SUCH_CLASS").unwrap_or_else(|e| panic!("{e}"));
    let refused = bogus.put("b", Bytes::from_static(b"x")).await;
    assert!(refused.is_err(), "a bogus class is sent, and refused");
    assert!(known.head("a").await.is_ok());
}
