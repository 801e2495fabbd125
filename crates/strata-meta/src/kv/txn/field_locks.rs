//! Commit gates for field records on engines that cannot apply field updates themselves
//! (PostgreSQL, etcd): there a field update is a read of the record's current value and a
//! compare-and-put at commit, so two commits of one record at once conflict.
//!
//! Within one client such commits would only fight each other (every create in a directory
//! updates the directory's times and usage): a transaction about to commit field updates
//! first takes the gates of those records, so a client's commits of one record queue
//! instead of conflicting, and the conflicts left are with other clients. A gate is held
//! only for the fresh read of the records and the commit itself — the same serialization
//! the engine would impose, without the wasted attempts that starved some transactions
//! into `RetriesExhausted` under load.

use std::hash::{BuildHasher, BuildHasherDefault};

use tokio::sync::{Mutex, MutexGuard};

use super::Key;

/// Gates per process; keys hash onto them (two records sharing a gate only queue).
const GATES: usize = 64;

static FIELD_GATES: [Mutex<()>; GATES] = [const { Mutex::const_new(()) }; GATES];

/// The gates of `keys`, taken in ascending order (so two callers never wait on each
/// other in a cycle); released when the returned guards drop.
pub(super) async fn enter(keys: &[Key]) -> Vec<MutexGuard<'static, ()>> {
    let hasher = BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default();
    let mut gates: Vec<usize> = keys
        .iter()
        .map(|k| {
            let h = hasher.hash_one(k);
            usize::try_from(h % u64::try_from(GATES).unwrap_or(1)).unwrap_or(0)
        })
        .collect();
    gates.sort_unstable();
    gates.dedup();
    let mut guards = Vec::with_capacity(gates.len());
    for gate in gates {
        if let Some(m) = FIELD_GATES.get(gate) {
            guards.push(m.lock().await);
        }
    }
    guards
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn one_record_queues_and_disjoint_sets_in_any_order_never_deadlock() {
        let a = b"record-a".to_vec();
        let held = enter(std::slice::from_ref(&a)).await;
        let waiter = tokio::spawn({
            let a = a.clone();
            async move { enter(&[a]).await.len() }
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "a second commit of one record waits");
        drop(held);
        assert_eq!(waiter.await.unwrap(), 1);

        // Many tasks taking overlapping sets in opposite orders all finish.
        let keys: Vec<Key> = (0..16u8).map(|i| vec![b'k', i]).collect();
        let mut tasks = Vec::new();
        for t in 0..32usize {
            let mut mine = keys.clone();
            if t % 2 == 1 {
                mine.reverse();
            }
            tasks.push(tokio::spawn(async move {
                let guards = enter(&mine).await;
                tokio::task::yield_now().await;
                guards.len()
            }));
        }
        let all = async {
            for t in tasks {
                assert!(t.await.unwrap() > 0);
            }
        };
        tokio::time::timeout(Duration::from_secs(10), all)
            .await
            .expect("no deadlock");
    }
}
