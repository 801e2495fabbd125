//! A commit whose answer is lost is settled, not blindly retried: through a fault proxy
//! that forwards a commit to MySQL and loses the answer, the engine reports the commit as
//! applied exactly when it was (`strata_meta::conformance::lost_answers`). The server is
//! `STRATA_TEST_MYSQL`; each test gets its own table.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

mod common;

use std::sync::Arc;

use common::Cutter;
use strata_meta::kv::KvEngine;

async fn engines() -> (Arc<dyn KvEngine>, Arc<dyn KvEngine>, Cutter) {
    common::engines_for("STRATA_TEST_MYSQL").await
}

strata_meta::lost_answer_tests!(engines, b"COMMIT");
