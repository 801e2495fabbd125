//! The metadata conformance suite on Redis. The server comes from `STRATA_TEST_REDIS`
//! (`scripts/test.sh` starts one on loopback); each test gets its own key prefix.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code
use std::sync::Arc;

use strata_meta::conformance::TestStore;
use strata_meta::kv::KvEngine;
use strata_meta_redis::{RedisEngine, RedisUrl};

struct RedisStore {
    url: RedisUrl,
}

impl TestStore for RedisStore {
    fn create() -> Self {
        let server = std::env::var("STRATA_TEST_REDIS")
            .expect("STRATA_TEST_REDIS must name a Redis server (scripts/test.sh starts one)");
        let prefix = format!("t{}", uuid::Uuid::new_v4().simple());
        let url = RedisUrl::parse(&format!("{server}?prefix={prefix}")).unwrap();
        RedisStore { url }
    }

    fn client(&self) -> Arc<dyn KvEngine> {
        Arc::new(RedisEngine::lazy(&self.url).unwrap())
    }
}

strata_meta::meta_conformance_tests!(RedisStore);
