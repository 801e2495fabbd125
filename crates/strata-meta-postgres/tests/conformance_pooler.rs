//! The metadata conformance suite on PostgreSQL reached through PgBouncer in transaction
//! pooling mode (`?pooler=transaction`): consecutive statements of one client may run on
//! different server connections, so nothing may rely on session state (prepared
//! statements, settings, `LISTEN`). The pooler comes from `STRATA_TEST_PGBOUNCER`
//! (`scripts/test.sh` starts one in front of its PostgreSQL); each test gets its own table.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code
use std::sync::Arc;

use strata_meta::conformance::TestStore;
use strata_meta::kv::KvEngine;
use strata_meta_postgres::{PostgresEngine, PostgresUrl};

struct PooledStore {
    url: PostgresUrl,
}

impl TestStore for PooledStore {
    fn create() -> Self {
        let server = std::env::var("STRATA_TEST_PGBOUNCER").expect(
            "STRATA_TEST_PGBOUNCER must name a database through PgBouncer in transaction mode \
             (scripts/test.sh starts one)",
        );
        let prefix = format!("t{}", uuid::Uuid::new_v4().simple());
        let sep = if server.contains('?') { '&' } else { '?' };
        let url = PostgresUrl::parse(&format!("{server}{sep}prefix={prefix}")).unwrap();
        assert!(
            url.pooler,
            "STRATA_TEST_PGBOUNCER must say ?pooler=transaction"
        );
        PooledStore { url }
    }

    fn client(&self) -> Arc<dyn KvEngine> {
        Arc::new(PostgresEngine::lazy(&self.url).unwrap())
    }
}

strata_meta::meta_conformance_tests!(PooledStore);
