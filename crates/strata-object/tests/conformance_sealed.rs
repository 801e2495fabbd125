//! ObjectStore conformance of an encrypted volume's stack (sealing, retries, limits,
//! metering) over a local directory: sealed objects behave as any store's to the layers
//! above (sizes, ranges, listings, uploads in pieces).
#![allow(clippy::expect_used)] // test code
use std::sync::Arc;

use strata_object::ObjectStore;
use strata_object::backend::Backend;
use strata_object::conformance::TestBackend;
use strata_object::seal::{Cipher, DataKey, KeyRing, Keys};
use strata_object::stack::{StackOptions, build};

#[derive(Debug)]
pub struct SealedLocal {
    _dir: tempfile::TempDir,
    store: Arc<dyn ObjectStore>,
}

impl TestBackend for SealedLocal {
    fn start() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let backend: Arc<dyn ObjectStore> =
            Arc::new(Backend::local(dir.path()).expect("local backend"));
        let ring = KeyRing::new(1, vec![DataKey::new(1, Cipher::ChaCha20Poly1305, [6; 32])])
            .expect("key ring");
        let opts = StackOptions {
            prefix: "vol".into(),
            keys: Some(Arc::new(Keys::new(ring, None))),
            ..StackOptions::default()
        };
        SealedLocal {
            _dir: dir,
            store: build(backend, &opts).0,
        }
    }

    fn store(&self) -> Arc<dyn ObjectStore> {
        self.store.clone()
    }
}

strata_object::object_conformance_tests!(SealedLocal);
