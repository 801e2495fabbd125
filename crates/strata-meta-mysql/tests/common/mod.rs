//! What the lost-answer tests share: engines of one fresh table, one through a fault proxy
//! in front of the server named by an environment variable, one direct.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

use std::sync::Arc;

use strata_meta::kv::KvEngine;
use strata_meta_mysql::{Address, MysqlEngine, MysqlUrl};
use strata_testkit::proxy::FaultProxy;

pub struct Cutter(pub FaultProxy);
strata_meta::answer_cutter_for_fault_proxy!(Cutter);

/// An engine through a fault proxy in front of `var`'s server, one direct to it, and the
/// proxy's cutter.
pub async fn engines_for(var: &str) -> (Arc<dyn KvEngine>, Arc<dyn KvEngine>, Cutter) {
    let server = std::env::var(var)
        .unwrap_or_else(|_| panic!("{var} must name a database (scripts/test.sh starts one)"));
    let prefix = format!("t{}", uuid::Uuid::new_v4().simple());
    let sep = if server.contains('?') { '&' } else { '?' };
    let direct_url = MysqlUrl::parse(&format!("{server}{sep}prefix={prefix}")).unwrap();
    let Address::Tcp { host, port } = &direct_url.address else {
        panic!("{var} must name a TCP address");
    };
    let proxy = FaultProxy::start("mysql", &format!("{host}:{port}"))
        .await
        .unwrap();
    let mut url = direct_url.clone();
    url.address = Address::Tcp {
        host: proxy.addr().ip().to_string(),
        port: proxy.addr().port(),
    };
    let engine = Arc::new(MysqlEngine::connect(&url).await.unwrap());
    let direct = Arc::new(MysqlEngine::connect(&direct_url).await.unwrap());
    (engine, direct, Cutter(proxy))
}
