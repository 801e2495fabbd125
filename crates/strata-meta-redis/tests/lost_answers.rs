//! A commit whose answer is lost is settled by its commit id, not blindly retried:
//! through a fault proxy that forwards a commit to Redis and loses the answer, the engine
//! reports the commit as applied exactly when it was
//! (`strata_meta::conformance::lost_answers`). The server is `STRATA_TEST_REDIS`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

use std::sync::Arc;

use strata_meta::kv::KvEngine;
use strata_meta_redis::{RedisEngine, RedisUrl};
use strata_testkit::proxy::FaultProxy;

struct Cutter(FaultProxy);
strata_meta::answer_cutter_for_fault_proxy!(Cutter);

async fn engines() -> (Arc<dyn KvEngine>, Arc<dyn KvEngine>, Cutter) {
    let server = std::env::var("STRATA_TEST_REDIS")
        .expect("STRATA_TEST_REDIS must name a Redis server (scripts/test.sh starts one)");
    let host_port = server
        .trim_start_matches("redis://")
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let proxy = FaultProxy::start("redis", &host_port).await.unwrap();
    let prefix = format!("t{}", uuid::Uuid::new_v4().simple());
    let proxied = server.replace(&host_port, &proxy.addr().to_string());
    let url = RedisUrl::parse(&format!("{proxied}?prefix={prefix}")).unwrap();
    let engine = Arc::new(RedisEngine::connect(&url).await.unwrap());
    let direct =
        RedisEngine::connect(&RedisUrl::parse(&format!("{server}?prefix={prefix}")).unwrap())
            .await
            .unwrap();
    (engine, Arc::new(direct), Cutter(proxy))
}

strata_meta::lost_answer_tests!(engines, b"EVAL");
