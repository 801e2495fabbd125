//! `fsck` on a volume with several stores (docs/PLACEMENT.md): every block of a slice
//! with a placement record must be in each store the record names (a missing one is a
//! lost copy even when another store still serves reads), and stores the record neither
//! names nor is leaving should hold none of it (stray copies: space a move should have
//! given back). Slices without a record are checked by the listing comparison of
//! [`super::fsck`], across all stores.

use std::collections::HashMap;

use strata_meta::{Meta, Placement};
use strata_object::ObjectError;
use strata_object::routed::Routed;

use super::{Progress, Result, for_each_block_ref};

/// Examples of missing blocks kept for the report, at most.
const EXAMPLES: usize = 20;
/// Placement records read per page.
const PAGE: usize = 1000;

/// What the placement check found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PlacementReport {
    /// Slices with a placement record that files reference.
    pub slices: u64,
    /// (block, store) pairs checked.
    pub blocks_checked: u64,
    /// Blocks missing from a store their record names, and examples (`store: key`).
    pub missing: u64,
    pub examples: Vec<String>,
    /// Blocks found in stores their record neither names nor is leaving.
    pub stray: u64,
    /// Placement records of slices no file references (left by a crashed writer).
    pub orphan_records: u64,
}

impl PlacementReport {
    pub fn is_clean(&self) -> bool {
        self.missing == 0
    }
}

/// Check the placement of every slice with a record on the volume of `meta`.
pub async fn check_placements(
    meta: &Meta,
    stores: &Routed,
    prefix: &str,
    block_size: u32,
    progress: &Progress,
) -> Result<PlacementReport> {
    let mut report = PlacementReport::default();
    let mut records: HashMap<u64, Placement> = HashMap::new();
    let mut after = 0;
    loop {
        let page = meta.list_placements(after, PAGE).await?;
        let Some(&(last, _)) = page.last() else { break };
        after = last;
        records.extend(page);
    }
    if records.is_empty() {
        return Ok(report);
    }
    progress.stage("checking placements", 0);
    let mut blocks: Vec<(u64, String)> = Vec::new();
    for_each_block_ref(meta, block_size, progress, |_, key| {
        if let Some(id) = strata_object::routed::slice_of(&key)
            && records.contains_key(&id)
        {
            blocks.push((id, key));
        }
        Ok(())
    })
    .await?;
    blocks.sort_unstable();
    blocks.dedup();
    let mut referenced: Vec<u64> = blocks.iter().map(|(id, _)| *id).collect();
    referenced.dedup();
    report.slices = u64::try_from(referenced.len()).unwrap_or(u64::MAX);
    report.orphan_records = u64::try_from(records.len() - referenced.len()).unwrap_or(0);
    for (id, key) in &blocks {
        let Some(p) = records.get(id) else { continue };
        let full = format!("{prefix}/{key}");
        for m in stores.members() {
            let named = p.stores.contains(&m.id);
            if !named && p.leaving.contains(&m.id) {
                continue;
            }
            report.blocks_checked += 1;
            let held = match m.store.head(&full).await {
                Ok(_) => true,
                Err(ObjectError::NotFound(_)) => false,
                Err(e) => return Err(e.into()),
            };
            match (named, held) {
                (true, false) => {
                    report.missing += 1;
                    if report.examples.len() < EXAMPLES {
                        report.examples.push(format!("{}: {key}", m.name));
                    }
                }
                (false, true) => report.stray += 1,
                _ => {}
            }
        }
        progress.add(1, 0);
    }
    Ok(report)
}
