//! The metadata conformance suite on MySQL/MariaDB. The database comes from
//! `STRATA_TEST_MYSQL` (`scripts/test.sh` starts a MariaDB server); each test gets its
//! own table.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code
use std::sync::Arc;

use strata_meta::conformance::TestStore;
use strata_meta::kv::KvEngine;
use strata_meta_mysql::{MysqlEngine, MysqlUrl};

struct MysqlStore {
    url: MysqlUrl,
}

impl TestStore for MysqlStore {
    fn create() -> Self {
        let server = std::env::var("STRATA_TEST_MYSQL").expect(
            "STRATA_TEST_MYSQL must name a MySQL database (scripts/test.sh starts MariaDB)",
        );
        let prefix = format!("t{}", uuid::Uuid::new_v4().simple());
        let sep = if server.contains('?') { '&' } else { '?' };
        let url = MysqlUrl::parse(&format!("{server}{sep}prefix={prefix}")).unwrap();
        MysqlStore { url }
    }

    fn client(&self) -> Arc<dyn KvEngine> {
        Arc::new(MysqlEngine::lazy(&self.url))
    }
}

strata_meta::meta_conformance_tests!(MysqlStore);
