//! `strata quota set|get|delete|list|check`: limits on a directory tree (`--path`), a user
//! (`--uid`) or a group (`--gid`), in bytes (`--capacity`) and inodes (`--inodes`). Writes
//! beyond a limit fail with EDQUOT ("Disk quota exceeded").

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use indicatif::HumanBytes;
use strata_meta::{Meta, Quota, QuotaTarget};
use strata_types::MetaUrl;

use crate::{units, wiring};

#[derive(Debug, Args)]
pub struct QuotaArgs {
    #[command(subcommand)]
    action: QuotaAction,
}

#[derive(Debug, Subcommand)]
enum QuotaAction {
    /// Set or change a quota (a new one starts with current usage counted)
    Set(SetArgs),
    /// Show one quota
    Get(TargetArgs),
    /// Remove a quota
    Delete(TargetArgs),
    /// Show every quota
    List(UrlArg),
    /// Recount usage and compare with the quota records; --repair fixes them
    Check(CheckArgs),
}

#[derive(Debug, Args)]
struct UrlArg {
    /// Metadata engine URL of the volume
    meta_url: MetaUrl,
}

#[derive(Debug, Args)]
struct TargetArgs {
    /// Metadata engine URL of the volume
    meta_url: MetaUrl,
    /// A directory of the volume (path from its root, e.g. /datasets/imagenet)
    #[arg(long, conflicts_with_all = ["uid", "gid"])]
    path: Option<String>,
    /// A user id
    #[arg(long, conflicts_with = "gid")]
    uid: Option<u32>,
    /// A group id
    #[arg(long)]
    gid: Option<u32>,
}

#[derive(Debug, Args)]
struct SetArgs {
    #[command(flatten)]
    target: TargetArgs,
    /// Byte limit: a number of GiB (as juicefs), or with a unit: 500M, 2G, 1T (0 = none)
    #[arg(long, value_parser = units::gib)]
    capacity: Option<u64>,
    /// Inode limit (0 = none)
    #[arg(long)]
    inodes: Option<i64>,
}

#[derive(Debug, Args)]
struct CheckArgs {
    /// Metadata engine URL of the volume
    meta_url: MetaUrl,
    /// Correct usage that differs from the recount
    #[arg(long)]
    repair: bool,
}

async fn target_of(meta: &Meta, t: &TargetArgs) -> Result<QuotaTarget> {
    match (&t.path, t.uid, t.gid) {
        (Some(path), None, None) => {
            let ino = strata_client::resolve_subdir(meta, Some(path)).await?;
            Ok(QuotaTarget::Dir(ino))
        }
        (None, Some(uid), None) => Ok(QuotaTarget::User(uid)),
        (None, None, Some(gid)) => Ok(QuotaTarget::Group(gid)),
        _ => bail!("name the quota with one of --path, --uid or --gid"),
    }
}

async fn describe(meta: &Meta, target: QuotaTarget) -> String {
    match target {
        QuotaTarget::Dir(ino) => match meta.path_of(ino).await {
            Ok(Some(p)) => format!("path {p}"),
            _ => format!("directory inode {ino}"),
        },
        QuotaTarget::User(uid) => format!("uid {uid}"),
        QuotaTarget::Group(gid) => format!("gid {gid}"),
    }
}

fn show(q: &Quota) -> String {
    let limit =
        |max: i64, f: &dyn Fn(i64) -> String| if max > 0 { f(max) } else { "unlimited".into() };
    let bytes = |v: i64| HumanBytes(v.max(0) as u64).to_string();
    format!(
        "used {} of {}, {} of {} inodes",
        bytes(q.used_space),
        limit(q.max_space, &bytes),
        q.used_inodes,
        limit(q.max_inodes, &|v| v.to_string())
    )
}

pub fn run_quota(a: QuotaArgs) -> Result<()> {
    let rt = wiring::runtime()?;
    rt.block_on(async {
        match a.action {
            QuotaAction::Set(s) => {
                let (meta, _) = wiring::load_meta(&s.target.meta_url).await?;
                let target = target_of(&meta, &s.target).await?;
                let capacity = s
                    .capacity
                    .map(|bytes| i64::try_from(bytes).context("--capacity is too large"))
                    .transpose()?;
                if capacity.is_none() && s.inodes.is_none() {
                    bail!("give --capacity and/or --inodes");
                }
                let q = meta.set_quota(target, capacity, s.inodes).await?;
                println!("{}: {}", describe(&meta, target).await, show(&q));
            }
            QuotaAction::Get(t) => {
                let (meta, _) = wiring::load_meta(&t.meta_url).await?;
                let target = target_of(&meta, &t).await?;
                match meta.get_quota(target).await? {
                    Some(q) => println!("{}: {}", describe(&meta, target).await, show(&q)),
                    None => bail!("{} has no quota", describe(&meta, target).await),
                }
            }
            QuotaAction::Delete(t) => {
                let (meta, _) = wiring::load_meta(&t.meta_url).await?;
                let target = target_of(&meta, &t).await?;
                if !meta.delete_quota(target).await? {
                    bail!("{} has no quota", describe(&meta, target).await);
                }
                println!("deleted the quota of {}", describe(&meta, target).await);
            }
            QuotaAction::List(u) => {
                let (meta, _) = wiring::load_meta(&u.meta_url).await?;
                for (target, q) in meta.list_quotas().await? {
                    println!("{}: {}", describe(&meta, target).await, show(&q));
                }
            }
            QuotaAction::Check(c) => {
                let (meta, _) = wiring::load_meta(&c.meta_url).await?;
                let mut wrong = 0;
                for (target, recorded, (space, inodes)) in meta.check_quotas(c.repair).await? {
                    let ok = (recorded.used_space, recorded.used_inodes) == (space, inodes);
                    let verdict = match (ok, c.repair) {
                        (true, _) => "ok".to_string(),
                        (false, true) => format!("repaired to {space} bytes / {inodes} inodes"),
                        (false, false) => format!("counted {space} bytes / {inodes} inodes"),
                    };
                    wrong += usize::from(!ok);
                    println!(
                        "{}: {} — {verdict}",
                        describe(&meta, target).await,
                        show(&recorded)
                    );
                }
                if wrong > 0 && !c.repair {
                    bail!("{wrong} quotas disagree with a recount; run with --repair");
                }
            }
        }
        Ok(())
    })
}
