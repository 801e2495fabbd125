//! A commit whose answer is lost is resolved, not blindly retried: through a fault proxy
//! that forwards a commit to etcd but loses the answer, the engine reports the commit as
//! applied exactly when it was (`strata_meta::conformance::lost_answers`): a retry would
//! have turned a create into EEXIST.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

use std::sync::Arc;

use strata_meta::kv::KvEngine;
use strata_meta_etcd::{EtcdEngine, EtcdUrl};
use strata_testkit::proxy::FaultProxy;

struct Cutter(FaultProxy);
strata_meta::answer_cutter_for_fault_proxy!(Cutter);

fn first_member() -> String {
    let members = std::env::var("STRATA_TEST_ETCD")
        .expect("STRATA_TEST_ETCD must name etcd members (scripts/test.sh starts a cluster)");
    members.split(',').next().unwrap().to_string()
}

async fn engines() -> (Arc<dyn KvEngine>, Arc<dyn KvEngine>, Cutter) {
    let member = first_member();
    let proxy = FaultProxy::start("etcd", &member).await.unwrap();
    let prefix = format!("t{}", uuid::Uuid::new_v4().simple());
    let url = EtcdUrl::parse(&format!("etcd://{}/{prefix}", proxy.addr())).unwrap();
    let engine = Arc::new(EtcdEngine::connect(&url).await.unwrap());
    let direct =
        EtcdEngine::connect(&EtcdUrl::parse(&format!("etcd://{member}/{prefix}")).unwrap())
            .await
            .unwrap();
    (engine, Arc::new(direct), Cutter(proxy))
}

strata_meta::lost_answer_tests!(engines, b"");
