//! A commit whose answer is lost is settled, not blindly retried: through a fault proxy
//! that forwards a commit to PostgreSQL and loses the answer, the engine reports the
//! commit as applied exactly when it was (`strata_meta::conformance::lost_answers`).
//! The server is `STRATA_TEST_POSTGRES`; each test gets its own table.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

use std::sync::Arc;

use strata_meta::kv::KvEngine;
use strata_meta_postgres::{PostgresEngine, PostgresUrl};
use strata_testkit::proxy::FaultProxy;

struct Cutter(FaultProxy);
strata_meta::answer_cutter_for_fault_proxy!(Cutter);

/// The test server's URL with `host:port` replaced by `addr`, and a fresh table prefix.
fn urls(prefix: &str) -> (PostgresUrl, String) {
    let server = std::env::var("STRATA_TEST_POSTGRES").expect(
        "STRATA_TEST_POSTGRES must name a PostgreSQL database (scripts/test.sh starts one)",
    );
    let sep = if server.contains('?') { '&' } else { '?' };
    let url = PostgresUrl::parse(&format!("{server}{sep}prefix={prefix}")).unwrap();
    let host_port = server
        .split('@')
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap()
        .to_string();
    (url, host_port)
}

async fn engines() -> (Arc<dyn KvEngine>, Arc<dyn KvEngine>, Cutter) {
    let prefix = format!("t{}", uuid::Uuid::new_v4().simple());
    let (direct_url, host_port) = urls(&prefix);
    let proxy = FaultProxy::start("postgres", &host_port).await.unwrap();
    let server = std::env::var("STRATA_TEST_POSTGRES").unwrap();
    let proxied = server.replace(&host_port, &proxy.addr().to_string());
    let sep = if proxied.contains('?') { '&' } else { '?' };
    let url = PostgresUrl::parse(&format!("{proxied}{sep}prefix={prefix}")).unwrap();
    let engine = Arc::new(PostgresEngine::connect(&url).await.unwrap());
    let direct = Arc::new(PostgresEngine::connect(&direct_url).await.unwrap());
    (engine, direct, Cutter(proxy))
}

strata_meta::lost_answer_tests!(engines, b"COMMIT");
