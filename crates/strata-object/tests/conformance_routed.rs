//! ObjectStore conformance of a routed set of three local directories (docs/PLACEMENT.md)
//! under a volume's stack: blocks placed in two of them (a store and a copy), other
//! objects in store 0, all behaving as one store to the layers above.
#![allow(clippy::expect_used)] // test code
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use strata_object::backend::Backend;
use strata_object::conformance::TestBackend;
use strata_object::routed::{Member, PlacementLookup, Routed};
use strata_object::stack::{StackOptions, build};
use strata_object::{ObjectStore, Result};

/// Every slice in store 2, with a copy in store 1.
#[derive(Debug)]
struct ColdWithCopy;

#[async_trait]
impl PlacementLookup for ColdWithCopy {
    async fn stores_of(&self, _id: u64) -> Result<Vec<u8>> {
        Ok(vec![2, 1])
    }
    async fn written_to(&self, _id: u64, _stores: &[u8]) -> Result<()> {
        Ok(())
    }
}

#[derive(Debug)]
pub struct RoutedLocal {
    _dirs: Vec<tempfile::TempDir>,
    store: Arc<dyn ObjectStore>,
}

impl TestBackend for RoutedLocal {
    fn start() -> Self {
        let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().expect("dir")).collect();
        let members = dirs
            .iter()
            .zip([0u8, 1, 2])
            .map(|(d, id)| {
                let store = Backend::local(d.path()).expect("local backend");
                Member::new(id, &format!("s{id}"), Arc::new(store))
            })
            .collect();
        let routed =
            Routed::new(members, Arc::new(ColdWithCopy), Duration::from_secs(5)).expect("routed");
        let opts = StackOptions {
            prefix: "vol".into(),
            ..StackOptions::default()
        };
        RoutedLocal {
            _dirs: dirs,
            store: build(Arc::new(routed), &opts).0,
        }
    }

    fn store(&self) -> Arc<dyn ObjectStore> {
        self.store.clone()
    }
}

strata_object::object_conformance_tests!(RoutedLocal);
