//! Model-based test of versioned buckets: random sequences of PUTs, DELETEs, deletes of
//! one version and state changes (Enabled, Suspended) against a model that keeps each
//! key's versions newest first. After every step the version listing must equal the
//! model's, and the file at each key's path must be the model's current version.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::collections::BTreeMap;

use proptest::prelude::*;

use crate::Gateway;
use crate::keys::parse_key;
use crate::list::ListQuery;
use crate::objects::Replace;
use crate::objinfo::ObjectInfo;
use crate::versions::{NULL_VERSION, VERSIONING_XATTR, Versioning};
use crate::versions_ops::VersionPage;

const KEYS: [&str; 3] = ["a", "b/c", "b/d"];

#[derive(Clone, Debug)]
enum Op {
    Put(usize),
    Delete(usize),
    DeleteVersion(usize, usize),
    State(bool),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..KEYS.len()).prop_map(Op::Put),
        2 => (0..KEYS.len()).prop_map(Op::Delete),
        2 => (0..KEYS.len(), 0usize..8).prop_map(|(k, i)| Op::DeleteVersion(k, i)),
        1 => any::<bool>().prop_map(Op::State),
    ]
}

/// One version in the model: its id and body (`None`: a delete marker).
type Entry = (String, Option<Vec<u8>>);

async fn put(gw: &Gateway, key: &str, body: &[u8]) -> String {
    let (temp, fh) = gw.temp_file().await.unwrap();
    gw.vfs.write(fh, 0, body).await.unwrap();
    gw.finish_temp(&temp, fh, Ok(())).await.unwrap();
    let path = parse_key(key).unwrap();
    let mut info = ObjectInfo::default();
    gw.install(&temp, gw.root(), &path, key, &mut info, Replace::Any)
        .await
        .unwrap();
    info.version_id.unwrap_or_else(|| NULL_VERSION.into())
}

async fn read_current(gw: &Gateway, key: &str) -> Option<Vec<u8>> {
    let found = gw.find("b", key).await.ok()?;
    let (fh, _) = gw.vfs.open(gw.ctx(), found.ino, 0).await.unwrap();
    let bytes = gw.vfs.read(fh, 0, 1 << 20).await.unwrap().to_vec();
    gw.vfs.release(fh).await.unwrap();
    Some(bytes)
}

/// The whole version listing (with `delimiter`): its entries and common prefixes.
async fn listing(
    gw: &Gateway,
    delimiter: Option<&str>,
) -> (Vec<(String, String, bool, bool)>, Vec<String>) {
    let query = ListQuery {
        prefix: "",
        delimiter,
        after: None,
        max_keys: 1000,
        store: false,
    };
    let mut page = VersionPage::default();
    gw.version_page(gw.root(), query, None, &mut page)
        .await
        .unwrap();
    let prefixes = page
        .prefixes
        .iter()
        .filter_map(|p| p.prefix.clone())
        .collect();
    (page.order, prefixes)
}

/// The same listing two entries a page, each page starting at the last one's markers.
async fn paged(gw: &Gateway) -> Vec<(String, String, bool, bool)> {
    let mut rows: Vec<(String, String, bool, bool)> = Vec::new();
    loop {
        let last = rows.last().map(|(k, v, _, _)| (k.clone(), v.clone()));
        let query = ListQuery {
            prefix: "",
            delimiter: None,
            after: last.as_ref().map(|(k, _)| k.as_str()),
            max_keys: 2,
            store: false,
        };
        let mut page = VersionPage::default();
        let id_marker = last.as_ref().map(|(_, v)| v.as_str());
        gw.version_page(gw.root(), query, id_marker, &mut page)
            .await
            .unwrap();
        assert!(page.order.len() <= 2);
        rows.extend(page.order);
        if !page.truncated {
            return rows;
        }
    }
}

fn expected(model: &BTreeMap<&str, Vec<Entry>>) -> Vec<(String, String, bool, bool)> {
    let mut rows = Vec::new();
    for (key, entries) in model {
        for (i, (id, body)) in entries.iter().enumerate() {
            rows.push((key.to_string(), id.clone(), i == 0, body.is_none()));
        }
    }
    rows
}

fn want_state(enabled: bool) -> Versioning {
    if enabled {
        Versioning::Enabled
    } else {
        Versioning::Suspended
    }
}

async fn run(ops: Vec<Op>) {
    let gw = crate::test_gateway(false).await;
    let mut model: BTreeMap<&str, Vec<Entry>> = BTreeMap::new();
    let mut enabled = true;
    gw.store_xattr(gw.root(), VERSIONING_XATTR, Some(b"Enabled"))
        .await
        .unwrap();
    for (step, op) in ops.into_iter().enumerate() {
        match op {
            Op::Put(k) => {
                let key = KEYS[k];
                let body = format!("{key}@{step}").into_bytes();
                let id = put(&gw, key, &body).await;
                let entries = model.entry(key).or_default();
                if !enabled {
                    entries.retain(|(v, _)| v != NULL_VERSION);
                }
                entries.insert(0, (id, Some(body)));
            }
            Op::Delete(k) => {
                let key = KEYS[k];
                let done = gw
                    .delete_one((gw.root(), want_state(enabled)), key, (None, false))
                    .await
                    .unwrap();
                assert!(done.delete_marker);
                let entries = model.entry(key).or_default();
                if !enabled {
                    entries.retain(|(v, _)| v != NULL_VERSION);
                }
                entries.insert(0, (done.version_id.unwrap(), None));
            }
            Op::DeleteVersion(k, i) => {
                let key = KEYS[k];
                let Some(entries) = model.get_mut(key).filter(|e| !e.is_empty()) else {
                    continue;
                };
                let (id, _) = entries.remove(i % entries.len());
                gw.delete_one((gw.root(), want_state(enabled)), key, (Some(&id), false))
                    .await
                    .unwrap();
                if entries.is_empty() {
                    model.remove(key);
                }
            }
            Op::State(on) => {
                enabled = on;
                let state: &[u8] = if on { b"Enabled" } else { b"Suspended" };
                gw.store_xattr(gw.root(), VERSIONING_XATTR, Some(state))
                    .await
                    .unwrap();
                let want = if on {
                    Versioning::Enabled
                } else {
                    Versioning::Suspended
                };
                assert_eq!(gw.versioning(gw.root()).await.unwrap(), want);
            }
        }
        let want = expected(&model);
        assert_eq!(
            listing(&gw, None).await,
            (want.clone(), vec![]),
            "after step {step}"
        );
        assert_eq!(paged(&gw).await, want, "pages after step {step}");
        let top: Vec<_> = want
            .iter()
            .filter(|r| !r.0.contains('/'))
            .cloned()
            .collect();
        let mut dirs: Vec<String> = want
            .iter()
            .filter(|r| r.0.contains('/'))
            .map(|_| "b/".to_owned())
            .collect();
        dirs.dedup();
        assert_eq!(
            listing(&gw, Some("/")).await,
            (top, dirs),
            "delimiter after step {step}"
        );
        for key in KEYS {
            let current = model
                .get(key)
                .and_then(|e| e.first())
                .and_then(|(_, body)| body.clone());
            assert_eq!(
                read_current(&gw, key).await,
                current,
                "{key} after step {step}"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn versions_follow_the_model(ops in proptest::collection::vec(op(), 1..24)) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(run(ops));
    }
}
