//! A commit whose answer is lost, through PgBouncer in transaction mode
//! (`STRATA_TEST_PGBOUNCER`): the fault proxy sits between the client and the pooler, so
//! the pooler sees its client go away mid-commit and the fence alone must settle the
//! commit (a pooled client never ends a server process). Each test gets its own table.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

mod common;

use std::sync::Arc;

use common::Cutter;
use strata_meta::kv::KvEngine;

async fn engines() -> (Arc<dyn KvEngine>, Arc<dyn KvEngine>, Cutter) {
    common::engines_for("STRATA_TEST_PGBOUNCER").await
}

strata_meta::lost_answer_tests!(engines, b"COMMIT");
