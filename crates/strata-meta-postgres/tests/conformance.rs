//! The metadata conformance suite on PostgreSQL. The database comes from
//! `STRATA_TEST_POSTGRES` (`scripts/test.sh` starts a server); each test gets its own table.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code
use std::sync::Arc;

use strata_meta::conformance::TestStore;
use strata_meta::kv::KvEngine;
use strata_meta_postgres::{PostgresEngine, PostgresUrl};

struct PostgresStore {
    url: PostgresUrl,
}

impl TestStore for PostgresStore {
    fn create() -> Self {
        let server = std::env::var("STRATA_TEST_POSTGRES").expect(
            "STRATA_TEST_POSTGRES must name a PostgreSQL database (scripts/test.sh starts one)",
        );
        let prefix = format!("t{}", uuid::Uuid::new_v4().simple());
        let sep = if server.contains('?') { '&' } else { '?' };
        let url = PostgresUrl::parse(&format!("{server}{sep}prefix={prefix}")).unwrap();
        PostgresStore { url }
    }

    fn client(&self) -> Arc<dyn KvEngine> {
        Arc::new(PostgresEngine::lazy(&self.url).unwrap())
    }
}

strata_meta::meta_conformance_tests!(PostgresStore);
