//! Frozen views ([`KvEngine::frozen_view`](strata_meta::kv::KvEngine::frozen_view)): etcd
//! keeps every revision until it is compacted, so a view is a revision, learned from one
//! read, at which every scan reads. A compaction past it while a dump reads fails the
//! dump with a message saying so (the next one starts from a newer revision).

use async_trait::async_trait;
use etcd_client::{GetOptions, KvClient};
use strata_meta::kv::{FrozenView, Key, KvError, KvSnapshot, Value};

use crate::{EtcdSnapshot, timed};

/// See the module doc.
pub(crate) struct EtcdFrozen {
    kv: KvClient,
    base: Vec<u8>,
    revision: i64,
}

/// A view of the store's current revision.
pub(crate) async fn open(mut kv: KvClient, base: Vec<u8>) -> Result<EtcdFrozen, KvError> {
    let resp = timed(kv.get(base.clone(), Some(GetOptions::new().with_limit(1)))).await?;
    let revision = resp
        .header()
        .map(|h| h.revision())
        .ok_or_else(|| KvError::Engine("etcd: a read answered without a revision".into()))?;
    Ok(EtcdFrozen { kv, base, revision })
}

#[async_trait]
impl FrozenView for EtcdFrozen {
    async fn scan(
        &self,
        start: &[u8],
        end: &[u8],
        limit: usize,
    ) -> Result<Vec<(Key, Value)>, KvError> {
        let mut at = EtcdSnapshot {
            kv: self.kv.clone(),
            base: self.base.clone(),
            revision: Some(self.revision),
        };
        at.scan(start, end, limit, false)
            .await
            .map_err(|e| match e {
                KvError::Conflict => KvError::Engine(format!(
                    "etcd: revision {} was compacted while it was being read; read again",
                    self.revision
                )),
                other => other,
            })
    }
}
