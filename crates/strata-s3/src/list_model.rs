//! Model-based tests of listings: random trees of keys (names chosen so that `-`, `!` and
//! `0` sort around `/`), listed with random prefixes, delimiters, markers and page sizes,
//! must give exactly what sorting the whole keys gives; paging by the last item returned
//! must give every item once.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

use std::collections::BTreeSet;

use proptest::prelude::*;
use strata_types::{Errno, Ino};
use strata_vfs::Ctx;

use crate::Gateway;
use crate::list::{Item, ListQuery};

fn component() -> impl Strategy<Value = String> {
    proptest::string::string_regex("[ab!0-]{1,3}").unwrap()
}

fn path() -> impl Strategy<Value = (Vec<String>, bool)> {
    (
        proptest::collection::vec(component(), 1..4),
        proptest::bool::weighted(0.15),
    )
}

/// Build the tree; returns the keys it holds (files, and empty directories as `d/`).
async fn build(gw: &Gateway, paths: &[(Vec<String>, bool)]) -> BTreeSet<String> {
    let ctx = Ctx::root();
    for (parts, is_dir) in paths {
        let (dirs, last) = parts.split_at(parts.len() - 1);
        let dirs: Vec<&str> = dirs.iter().map(String::as_str).collect();
        let Ok(parent) = gw.make_dirs(gw.root(), &dirs).await else {
            continue;
        };
        let made = if *is_dir {
            gw.vfs
                .mkdir(&ctx, parent, last[0].as_bytes(), 0o755)
                .await
                .map(drop)
        } else {
            match gw.vfs.create(&ctx, parent, last[0].as_bytes(), 0o644).await {
                Ok((_, fh)) => gw.vfs.release(fh).await,
                Err(e) => Err(e),
            }
        };
        assert!(matches!(made, Ok(()) | Err(Errno::EEXIST)), "{made:?}");
    }
    let mut keys = BTreeSet::new();
    collect(gw, gw.root(), String::new(), &mut keys).await;
    keys
}

/// Every key of the tree below `dir`, walking it directly.
async fn collect(gw: &Gateway, dir: Ino, prefix: String, keys: &mut BTreeSet<String>) {
    let page = gw.vfs.list_page(dir, None, 10_000).await.unwrap();
    if page.is_empty() && !prefix.is_empty() {
        keys.insert(prefix.clone());
    }
    for entry in page {
        let name = String::from_utf8(entry.name).unwrap();
        if entry.kind == strata_types::FileType::Directory {
            Box::pin(collect(gw, entry.ino, format!("{prefix}{name}/"), keys)).await;
        } else {
            keys.insert(format!("{prefix}{name}"));
        }
    }
}

/// What S3 answers, from the sorted keys.
fn model(keys: &BTreeSet<String>, q: &ListQuery<'_>) -> (Vec<String>, bool) {
    let mut out = Vec::new();
    let mut last_cp: Option<String> = None;
    for key in keys {
        if !key.starts_with(q.prefix) || q.after.is_some_and(|a| key.as_str() <= a) {
            continue;
        }
        let cp = q.delimiter.filter(|d| !d.is_empty()).and_then(|d| {
            key[q.prefix.len()..]
                .find(d)
                .map(|i| key[..q.prefix.len() + i + d.len()].to_owned())
        });
        let item = match cp {
            Some(cp) => {
                if last_cp.as_deref() == Some(cp.as_str())
                    || q.after
                        .is_some_and(|a| cp.as_str() <= a || a.starts_with(cp.as_str()))
                {
                    continue;
                }
                last_cp = Some(cp.clone());
                format!("P:{cp}")
            }
            None => format!("K:{key}"),
        };
        if out.len() == q.max_keys {
            return (out, true);
        }
        out.push(item);
    }
    (out, false)
}

fn shown(items: &[Item]) -> Vec<String> {
    items
        .iter()
        .map(|i| match i {
            Item::Object { key, .. } => format!("K:{key}"),
            Item::Prefix(p) => format!("P:{p}"),
        })
        .collect()
}

fn gateway(rt: &tokio::runtime::Runtime) -> Gateway {
    rt.block_on(crate::test_gateway(false))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn listings_match_sorted_keys(
        paths in proptest::collection::vec(path(), 1..40),
        prefix in proptest::string::string_regex("([ab!0-]{0,2}/?){0,2}").unwrap(),
        delimiter in proptest::option::of(prop_oneof![Just("/".to_owned()), Just("-".to_owned()), Just("b/".to_owned())]),
        after in proptest::option::of(proptest::string::string_regex("[ab!0/-]{0,5}").unwrap()),
        max_keys in 1usize..6,
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let gw = gateway(&rt);
        rt.block_on(async {
            let keys = build(&gw, &paths).await;
            let q = ListQuery { prefix: &prefix, delimiter: delimiter.as_deref(), after: after.as_deref(), max_keys, store: false };
            let got = gw.list(gw.root(), &q).await.unwrap();
            let (want, truncated) = model(&keys, &q);
            prop_assert_eq!(shown(&got.items), want, "keys {:?}", keys);
            prop_assert_eq!(got.truncated, truncated);
            // Page through everything by the last item returned.
            let all = ListQuery { max_keys: 100_000, after: None, ..q };
            let (want_all, _) = model(&keys, &all);
            let mut seen = Vec::new();
            let mut marker: Option<String> = None;
            loop {
                let page_q = ListQuery { after: marker.as_deref(), max_keys, ..all };
                let page = gw.list(gw.root(), &page_q).await.unwrap();
                seen.extend(shown(&page.items));
                if !page.truncated {
                    break;
                }
                marker = page.items.last().map(|i| i.key().to_owned());
            }
            prop_assert_eq!(seen, want_all, "keys {:?}", keys);
            Ok(())
        })?;
    }
}
