//! What the cache group keeps in the volume: the group secret (`C group-secret`, made on
//! first use; peers sign their requests with it, so only clients that can open the volume
//! can read blocks from a peer) and the members, found in the live sessions' records.

use serde::{Deserialize, Serialize};

use super::{Meta, now_ns};
use crate::error::{MetaError, Result};
use crate::keys;

/// The settings key of the group secret.
const SECRET_KEY: &str = "group-secret";

/// A session's membership of a cache group (in its `SI` record).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupMember {
    /// The group's name (`--cache-group`).
    pub group: String,
    /// The member's random id, its identity in the placement of blocks.
    pub id: u64,
    /// Where it serves peers (`host:port`); empty for a member that serves nothing
    /// (`--no-sharing`).
    pub addr: String,
    /// Its share of the blocks: its cache size in MiB.
    pub weight_mib: u32,
}

impl Meta {
    /// The volume's group secret (64 hex digits), made on first use.
    pub async fn group_secret(&self) -> Result<String> {
        let fresh: [u8; 32] = rand::random();
        let fresh = strata_types::hex::encode(&fresh);
        let fresh = &fresh;
        self.txn(|tx| {
            Box::pin(async move {
                let key = keys::setting(SECRET_KEY);
                if let Some(v) = tx.get(&key).await? {
                    return String::from_utf8(v.to_vec())
                        .map_err(|_| MetaError::corrupt(&key, "group secret is not text"));
                }
                tx.put(key, fresh.as_bytes().to_vec());
                Ok(fresh.clone())
            })
        })
        .await
    }

    /// The serving members of `group` among the sessions that have not expired.
    pub async fn group_members(&self, group: &str) -> Result<Vec<GroupMember>> {
        let now = now_ns();
        Ok(self
            .list_sessions()
            .await?
            .into_iter()
            .filter(|s| s.expires_at > now)
            .filter_map(|s| s.cache_group)
            .filter(|m| m.group == group && !m.addr.is_empty())
            .collect())
    }
}
