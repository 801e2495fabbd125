//! The in-memory engine: an ordered map behind a lock. For tests and models; nothing is
//! persisted. Reads are not isolated (each read sees the latest state), so the transaction
//! layer validates read-only transactions too.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use parking_lot::RwLock;

use async_trait::async_trait;

use super::{
    CommitRequest, FrozenView, Key, KvEngine, KvError, KvSnapshot, ReadCheck, Value, Write,
    apply_field_ops,
};

type Map = BTreeMap<Key, Value>;

/// An engine holding everything in one process's memory.
#[derive(Debug, Default, Clone)]
pub struct MemoryEngine {
    map: Arc<RwLock<Map>>,
}

impl MemoryEngine {
    pub fn new() -> MemoryEngine {
        MemoryEngine::default()
    }

    fn read(&self) -> parking_lot::RwLockReadGuard<'_, Map> {
        self.map.read()
    }
}

fn scan_map(map: &Map, start: &[u8], end: &[u8], limit: usize, reverse: bool) -> Vec<(Key, Value)> {
    if start >= end {
        return Vec::new();
    }
    let range = map.range::<[u8], _>((Bound::Included(start), Bound::Excluded(end)));
    let cloned = |(k, v): (&Key, &Value)| (k.clone(), v.clone());
    if reverse {
        range.rev().take(limit).map(cloned).collect()
    } else {
        range.take(limit).map(cloned).collect()
    }
}

fn holds(map: &Map, check: &ReadCheck) -> bool {
    match check {
        ReadCheck::Point { key, value } => map.get(key) == value.as_ref(),
        ReadCheck::Range {
            start,
            end,
            limit,
            reverse,
            entries,
        } => scan_map(map, start, end, *limit, *reverse) == *entries,
    }
}

#[derive(Debug)]
struct MemorySnapshot {
    engine: MemoryEngine,
}

#[async_trait]
impl KvSnapshot for MemorySnapshot {
    async fn get(&mut self, key: &[u8]) -> Result<Option<Value>, KvError> {
        Ok(self.engine.read().get(key).cloned())
    }

    async fn get_many(&mut self, keys: &[Key]) -> Result<Vec<Option<Value>>, KvError> {
        let map = self.engine.read();
        Ok(keys.iter().map(|k| map.get(k).cloned()).collect())
    }

    async fn scan(
        &mut self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        reverse: bool,
    ) -> Result<Vec<(Key, Value)>, KvError> {
        let map = self.engine.read();
        Ok(scan_map(&map, start, end, limit, reverse))
    }
}

/// A frozen view: a copy of the map (the engine is for tests and models).
struct MemoryFrozen(Map);

#[async_trait]
impl FrozenView for MemoryFrozen {
    async fn scan(
        &self,
        start: &[u8],
        end: &[u8],
        limit: usize,
    ) -> Result<Vec<(Key, Value)>, KvError> {
        Ok(scan_map(&self.0, start, end, limit, false))
    }
}

#[async_trait]
impl KvEngine for MemoryEngine {
    fn name(&self) -> &'static str {
        "memory"
    }

    async fn snapshot(&self) -> Result<Box<dyn KvSnapshot>, KvError> {
        Ok(Box::new(MemorySnapshot {
            engine: self.clone(),
        }))
    }

    async fn frozen_view(&self, _readers: usize) -> Result<Option<Arc<dyn FrozenView>>, KvError> {
        Ok(Some(Arc::new(MemoryFrozen(self.read().clone()))))
    }

    async fn commit(&self, req: CommitRequest) -> Result<(), KvError> {
        let mut map = self.map.write();
        if !req.reads.iter().all(|r| holds(&map, r)) {
            return Err(KvError::Conflict);
        }
        // Compute every new value first so a corrupt record changes nothing.
        let mut staged = Vec::with_capacity(req.writes.len());
        for (key, write) in req.writes {
            let next = match write {
                Write::Put(v) => Some(v),
                Write::Delete => None,
                Write::Fields(ops) => {
                    match apply_field_ops(&key, map.get(&key).map(|v| &v[..]), &ops)? {
                        Some(v) => Some(v),
                        None => continue,
                    }
                }
            };
            staged.push((key, next));
        }
        for (key, next) in staged {
            match next {
                Some(v) => map.insert(key, v),
                None => map.remove(&key),
            };
        }
        Ok(())
    }

    fn snapshot_isolation(&self) -> bool {
        false
    }

    fn native_field_ops(&self) -> bool {
        true
    }
}
