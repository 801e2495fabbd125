//! The metadata conformance suite on etcd. The cluster comes from `STRATA_TEST_ETCD`
//! (`scripts/test.sh` starts a 3-member cluster); each test gets its own key prefix.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code
use std::sync::Arc;

use strata_meta::conformance::TestStore;
use strata_meta::kv::KvEngine;
use strata_meta_etcd::{EtcdEngine, EtcdUrl};

struct EtcdStore {
    url: EtcdUrl,
}

impl TestStore for EtcdStore {
    fn create() -> Self {
        let members = std::env::var("STRATA_TEST_ETCD")
            .expect("STRATA_TEST_ETCD must name etcd members (scripts/test.sh starts a cluster)");
        let prefix = format!("t{}", uuid::Uuid::new_v4().simple());
        let url = EtcdUrl::parse(&format!("etcd://{members}/{prefix}")).unwrap();
        EtcdStore { url }
    }

    fn client(&self) -> Arc<dyn KvEngine> {
        Arc::new(EtcdEngine::lazy(&self.url))
    }
}

strata_meta::meta_conformance_tests!(EtcdStore);
