//! What the lost-answer tests share: engines of one fresh table, one through a fault proxy
//! in front of the server named by an environment variable, one direct.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

use std::sync::Arc;

use strata_meta::kv::KvEngine;
use strata_meta_postgres::{PostgresEngine, PostgresUrl};
use strata_testkit::proxy::FaultProxy;

pub struct Cutter(pub FaultProxy);
strata_meta::answer_cutter_for_fault_proxy!(Cutter);

/// The server's URL (from `var`) with a fresh table prefix, and its `host:port`.
fn urls(var: &str, prefix: &str) -> (PostgresUrl, String) {
    let server = std::env::var(var)
        .unwrap_or_else(|_| panic!("{var} must name a database (scripts/test.sh starts one)"));
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

/// An engine through a fault proxy in front of `var`'s server, one direct to it, and the
/// proxy's cutter.
pub async fn engines_for(var: &str) -> (Arc<dyn KvEngine>, Arc<dyn KvEngine>, Cutter) {
    let prefix = format!("t{}", uuid::Uuid::new_v4().simple());
    let (direct_url, host_port) = urls(var, &prefix);
    let proxy = FaultProxy::start("postgres", &host_port).await.unwrap();
    let server = std::env::var(var).unwrap();
    let proxied = server.replace(&host_port, &proxy.addr().to_string());
    let sep = if proxied.contains('?') { '&' } else { '?' };
    let url = PostgresUrl::parse(&format!("{proxied}{sep}prefix={prefix}")).unwrap();
    let engine = Arc::new(PostgresEngine::connect(&url).await.unwrap());
    let direct = Arc::new(PostgresEngine::connect(&direct_url).await.unwrap());
    (engine, direct, Cutter(proxy))
}
