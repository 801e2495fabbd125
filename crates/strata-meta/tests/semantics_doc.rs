//! Runs the examples of docs/SEMANTICS.md. Every ```strata-example block is a script of
//! metadata operations, one per line, `[as UID:GID[:G1,G2]] COMMAND ARGS -> EXPECTED`, run
//! on a fresh volume of each embedded engine. EXPECTED is `ok`, an errno name, or the value
//! the command returns. So the promises in the document are checked, not just written.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed step fails the test

use strata_meta::acl::Acl;
use strata_meta::conformance::{MemoryStore, SqliteStore, TestStore, test_format, test_options};
use strata_meta::{Ctx, FallocateMode, Meta, RenameFlags, SetAttr, XattrFlags};
use strata_types::{FileType, Ino, Slice};

struct Example {
    line: usize,
    text: String,
}

fn blocks(doc: &str) -> Vec<Vec<Example>> {
    let mut out = Vec::new();
    let mut current: Option<Vec<Example>> = None;
    for (i, line) in doc.lines().enumerate() {
        let trimmed = line.trim();
        match (&mut current, trimmed) {
            (None, "```strata-example") => current = Some(Vec::new()),
            (Some(_), "```") => out.push(current.take().unwrap()),
            (Some(block), t) if !t.is_empty() && !t.starts_with('#') => block.push(Example {
                line: i + 1,
                text: t.to_string(),
            }),
            _ => {}
        }
    }
    out
}

fn parse_ctx(spec: &str) -> Ctx {
    let mut parts = spec.split(':');
    let uid = parts.next().unwrap().parse().unwrap();
    let gid = parts.next().unwrap().parse().unwrap();
    let groups = parts
        .next()
        .map(|g| g.split(',').map(|x| x.parse().unwrap()).collect())
        .unwrap_or_default();
    Ctx {
        uid,
        gid,
        groups,
        pid: 1,
        umask: 0,
        version_keeper: false,
    }
}

async fn resolve(meta: &Meta, ctx: &Ctx, path: &str) -> Result<Ino, String> {
    let mut ino = Ino::ROOT;
    for part in path.split('/').filter(|p| !p.is_empty()) {
        ino = meta
            .lookup(ctx, ino, part.as_bytes())
            .await
            .map_err(|e| e.errno().name().to_string())?
            .ino;
    }
    Ok(ino)
}

async fn parent_of(meta: &Meta, ctx: &Ctx, path: &str) -> Result<(Ino, Vec<u8>), String> {
    let (dir, name) = path.rsplit_once('/').unwrap();
    Ok((resolve(meta, ctx, dir).await?, name.as_bytes().to_vec()))
}

fn ok<T>(_: T) -> String {
    "ok".to_string()
}

fn octal(s: &str) -> u16 {
    u16::from_str_radix(s, 8).unwrap()
}

/// Run one command; returns "ok", an errno name, or a value.
async fn run(meta: &Meta, ctx: &Ctx, words: &[&str]) -> Result<String, String> {
    let e = |err: strata_meta::MetaError| err.errno().name().to_string();
    match words {
        ["mkdir", p, rest @ ..] => {
            let (dir, name) = parent_of(meta, ctx, p).await?;
            let mode = rest.first().map_or(0o755, |m| octal(m));
            meta.mkdir(ctx, dir, &name, mode).await.map(ok).map_err(e)
        }
        ["create", p, rest @ ..] => {
            let (dir, name) = parent_of(meta, ctx, p).await?;
            let mode = rest.first().map_or(0o644, |m| octal(m));
            meta.mknod(ctx, dir, &name, FileType::Regular, mode, 0)
                .await
                .map(ok)
                .map_err(e)
        }
        ["mknod", p, kind] => {
            let (dir, name) = parent_of(meta, ctx, p).await?;
            let kind = if *kind == "fifo" {
                FileType::Fifo
            } else {
                FileType::Socket
            };
            meta.mknod(ctx, dir, &name, kind, 0o644, 0)
                .await
                .map(ok)
                .map_err(e)
        }
        ["symlink", p, target] => {
            let (dir, name) = parent_of(meta, ctx, p).await?;
            meta.symlink(ctx, dir, &name, target.as_bytes())
                .await
                .map(ok)
                .map_err(e)
        }
        ["readlink", p] => {
            let ino = resolve(meta, ctx, p).await?;
            meta.readlink(ino)
                .await
                .map(|t| String::from_utf8_lossy(&t).into_owned())
                .map_err(e)
        }
        ["link", src, dst] => {
            let ino = resolve(meta, ctx, src).await?;
            let (dir, name) = parent_of(meta, ctx, dst).await?;
            meta.link(ctx, ino, dir, &name).await.map(ok).map_err(e)
        }
        ["unlink", p] => {
            let (dir, name) = parent_of(meta, ctx, p).await?;
            meta.unlink(ctx, dir, &name).await.map(ok).map_err(e)
        }
        ["rmdir", p] => {
            let (dir, name) = parent_of(meta, ctx, p).await?;
            meta.rmdir(ctx, dir, &name).await.map(ok).map_err(e)
        }
        ["rename", src, dst, rest @ ..] => {
            let (sd, sn) = parent_of(meta, ctx, src).await?;
            let (dd, dn) = parent_of(meta, ctx, dst).await?;
            let bits = rest.iter().fold(0, |bits, flag| {
                bits | match *flag {
                    "noreplace" => RenameFlags::NOREPLACE,
                    "exchange" => RenameFlags::EXCHANGE,
                    "whiteout" => RenameFlags::WHITEOUT,
                    _ => 0,
                }
            });
            let flags = RenameFlags::from_bits(bits).map_err(e)?;
            meta.rename(ctx, sd, &sn, dd, &dn, flags)
                .await
                .map(ok)
                .map_err(e)
        }
        ["chmod", p, mode] => {
            setattr(
                meta,
                ctx,
                p,
                SetAttr {
                    mode: Some(octal(mode)),
                    ..SetAttr::default()
                },
            )
            .await
        }
        ["chown", p, uid, gid] => {
            let id = |s: &str| s.parse::<i64>().ok().filter(|v| *v >= 0).map(|v| v as u32);
            setattr(
                meta,
                ctx,
                p,
                SetAttr {
                    uid: id(uid),
                    gid: id(gid),
                    ..SetAttr::default()
                },
            )
            .await
        }
        ["truncate", p, len] => {
            setattr(
                meta,
                ctx,
                p,
                SetAttr {
                    size: Some(len.parse().unwrap()),
                    ..SetAttr::default()
                },
            )
            .await
        }
        ["write", p, off, len, rest @ ..] => {
            let ino = resolve(meta, ctx, p).await?;
            let (off, len): (u64, u32) = (off.parse().unwrap(), len.parse().unwrap());
            // `write /f OFF LEN written-at NS`: the commit of writes that returned at NS.
            let written_at = match rest {
                ["written-at", ns] => ns.parse().unwrap(),
                _ => strata_meta::now_ns(),
            };
            let id = meta.new_slice_id().await.map_err(e)?;
            let index = (off / strata_types::CHUNK_SIZE) as u32;
            let pos = (off % strata_types::CHUNK_SIZE) as u32;
            let slice = Slice {
                pos,
                id,
                size: len,
                off: 0,
                len,
            };
            meta.write_chunk(ino, index, slice, Some(written_at))
                .await
                .map(|_| "ok".into())
                .map_err(e)
        }
        ["settime", p, ns] => {
            let set = SetAttr {
                mtime: Some(strata_meta::TimeSet::At(ns.parse().unwrap())),
                ..SetAttr::default()
            };
            setattr(meta, ctx, p, set).await
        }
        ["punch", p, off, len] => {
            let ino = resolve(meta, ctx, p).await?;
            let mode =
                FallocateMode::from_bits(FallocateMode::PUNCH_HOLE | FallocateMode::KEEP_SIZE)
                    .unwrap();
            meta.fallocate(ino, mode, off.parse().unwrap(), len.parse().unwrap())
                .await
                .map(|_| "ok".into())
                .map_err(e)
        }
        ["copy", src, off_in, dst, off_out, len] => {
            let (s, d) = (
                resolve(meta, ctx, src).await?,
                resolve(meta, ctx, dst).await?,
            );
            let (a, b, n) = (
                off_in.parse().unwrap(),
                off_out.parse().unwrap(),
                len.parse().unwrap(),
            );
            meta.copy_file_range(s, a, d, b, n, 0)
                .await
                .map(|(c, _)| c.to_string())
                .map_err(e)
        }
        // `chattr /f +i`, `-i`, `+a`, `-a`: the other flag is left as it is.
        ["chattr", p, change] => {
            let ino = resolve(meta, ctx, p).await?;
            let now = meta.getattr(ino).await.map_err(e)?.protection;
            let (mut i, mut a) = (now.immutable, now.append_only);
            match *change {
                "+i" | "-i" => i = change.starts_with('+'),
                "+a" | "-a" => a = change.starts_with('+'),
                other => panic!("unknown chattr change {other}"),
            }
            meta.set_inode_flags(ctx, ino, i, a)
                .await
                .map(ok)
                .map_err(e)
        }
        // `lock /f MODE SECONDS [bypass]` (`lock /f none 0 bypass` removes it);
        // `hold /f on|off`.
        ["lock", p, mode, secs, rest @ ..] => {
            let ino = resolve(meta, ctx, p).await?;
            let until = strata_meta::now_ns() + secs.parse::<i64>().unwrap() * 1_000_000_000;
            let retention = strata_types::RetentionMode::parse(mode)
                .map(|mode| strata_types::Retention { mode, until });
            let bypass = rest == ["bypass"];
            let set = meta.set_retention(ctx, ino, retention, bypass);
            set.await.map(ok).map_err(e)
        }
        ["hold", p, on] => {
            let ino = resolve(meta, ctx, p).await?;
            let set = meta.set_legal_hold(ctx, ino, *on == "on");
            set.await.map(ok).map_err(e)
        }
        // `open /f rw|w|wa|wt`: read-write, write, write-append, write-truncate.
        ["open", p, how] => {
            let ino = resolve(meta, ctx, p).await?;
            let flags = match *how {
                "rw" => 2,
                "w" => 1,
                "wa" => 1 | 0o2000,
                "wt" => 1 | 0o1000,
                other => panic!("unknown open mode {other}"),
            };
            meta.open(ctx, ino, flags).await.map(ok).map_err(e)
        }
        ["stat", p, field] => {
            let ino = resolve(meta, ctx, p).await?;
            let a = meta.getattr(ino).await.map_err(e)?;
            Ok(match *field {
                "nlink" => a.nlink.to_string(),
                "size" => a.length.to_string(),
                "mode" => format!("{:o}", a.mode),
                "uid" => a.uid.to_string(),
                "gid" => a.gid.to_string(),
                "kind" => format!("{:?}", a.kind).to_lowercase(),
                "rdev" => a.rdev.to_string(),
                "mtime" => a.mtime.to_string(),
                other => panic!("unknown stat field {other}"),
            })
        }
        ["ls", p] => {
            let ino = resolve(meta, ctx, p).await?;
            let entries = meta
                .readdir(ino, None, usize::MAX, false)
                .await
                .map_err(e)?;
            let names: Vec<String> = entries
                .iter()
                .map(|x| String::from_utf8_lossy(&x.name).into_owned())
                .collect();
            Ok(if names.is_empty() {
                "(empty)".into()
            } else {
                names.join(",")
            })
        }
        ["setxattr", p, name, value, rest @ ..] => {
            let ino = resolve(meta, ctx, p).await?;
            let flags = match rest.first() {
                Some(&"create") => XattrFlags {
                    create: true,
                    replace: false,
                },
                Some(&"replace") => XattrFlags {
                    create: false,
                    replace: true,
                },
                _ => XattrFlags::default(),
            };
            meta.setxattr(ctx, ino, name.as_bytes(), value.as_bytes(), flags)
                .await
                .map(ok)
                .map_err(e)
        }
        ["getxattr", p, name] => {
            let ino = resolve(meta, ctx, p).await?;
            meta.getxattr(ctx, ino, name.as_bytes(), 0)
                .await
                .map(|v| String::from_utf8_lossy(&v).into_owned())
                .map_err(e)
        }
        ["removexattr", p, name] => {
            let ino = resolve(meta, ctx, p).await?;
            meta.removexattr(ctx, ino, name.as_bytes())
                .await
                .map(ok)
                .map_err(e)
        }
        ["access", p, mask] => {
            let ino = resolve(meta, ctx, p).await?;
            let bits = mask
                .chars()
                .map(|c| match c {
                    'r' => 4,
                    'w' => 2,
                    'x' => 1,
                    _ => 0,
                })
                .sum();
            meta.access(ctx, ino, bits).await.map(ok).map_err(e)
        }
        ["quota", p, bytes, inodes] => {
            let target = strata_meta::QuotaTarget::Dir(resolve(meta, ctx, p).await?);
            set_quota(meta, target, bytes, inodes).await
        }
        ["quota-uid", uid, bytes, inodes] => {
            let target = strata_meta::QuotaTarget::User(uid.parse().unwrap());
            set_quota(meta, target, bytes, inodes).await
        }
        ["setfacl", p, rest @ ..] => {
            let ino = resolve(meta, ctx, p).await?;
            let (name, spec) = acl_target(rest);
            let value = parse_acl(spec).to_xattr();
            meta.setxattr(ctx, ino, name, &value, XattrFlags::default())
                .await
                .map(ok)
                .map_err(e)
        }
        ["getfacl", p, rest @ ..] => {
            let ino = resolve(meta, ctx, p).await?;
            let (name, _) = acl_target(&[rest, &[""]].concat());
            let value = meta.getxattr(ctx, ino, name, 0).await.map_err(e)?;
            Ok(show_acl(&Acl::from_xattr(&value).unwrap().unwrap()))
        }
        other => panic!("unknown example command {other:?}"),
    }
}

/// `[default] SPEC`: which list, and its text.
fn acl_target<'a>(words: &[&'a str]) -> (&'static [u8], &'a str) {
    match words {
        ["default", spec, ..] => (strata_meta::acl::XATTR_DEFAULT, spec),
        [spec, ..] => (strata_meta::acl::XATTR_ACCESS, spec),
        [] => panic!("setfacl needs a list"),
    }
}

fn perm_bits(text: &str) -> u8 {
    text.chars()
        .map(|c| match c {
            'r' => 4,
            'w' => 2,
            'x' => 1,
            _ => 0,
        })
        .sum()
}

fn perm_text(bits: u8) -> String {
    [(4, 'r'), (2, 'w'), (1, 'x')]
        .iter()
        .map(|(b, c)| if bits & b != 0 { *c } else { '-' })
        .collect()
}

/// `u::rw-,u:1001:r--,g::r--,g:50:rw-,m::rw-,o::---` (getfacl's short form).
fn parse_acl(spec: &str) -> Acl {
    let mut acl = Acl::from_mode(0);
    for entry in spec.split(',') {
        let mut parts = entry.split(':');
        let (tag, id, perm) = (
            parts.next().unwrap(),
            parts.next().unwrap(),
            perm_bits(parts.next().unwrap()),
        );
        match (tag, id) {
            ("u", "") => acl.owner = perm,
            ("u", id) => acl.users.push((id.parse().unwrap(), perm)),
            ("g", "") => acl.group = perm,
            ("g", id) => acl.groups.push((id.parse().unwrap(), perm)),
            ("m", _) => acl.mask = Some(perm),
            ("o", _) => acl.other = perm,
            other => panic!("unknown list entry {other:?}"),
        }
    }
    acl
}

fn show_acl(acl: &Acl) -> String {
    let mut out = vec![format!("u::{}", perm_text(acl.owner))];
    out.extend(
        acl.users
            .iter()
            .map(|(id, p)| format!("u:{id}:{}", perm_text(*p))),
    );
    out.push(format!("g::{}", perm_text(acl.group)));
    out.extend(
        acl.groups
            .iter()
            .map(|(id, p)| format!("g:{id}:{}", perm_text(*p))),
    );
    if let Some(mask) = acl.mask {
        out.push(format!("m::{}", perm_text(mask)));
    }
    out.push(format!("o::{}", perm_text(acl.other)));
    out.join(",")
}

async fn set_quota(
    meta: &Meta,
    target: strata_meta::QuotaTarget,
    bytes: &str,
    inodes: &str,
) -> Result<String, String> {
    let (bytes, inodes) = (bytes.parse().unwrap(), inodes.parse().unwrap());
    meta.set_quota(target, Some(bytes), Some(inodes))
        .await
        .map(ok)
        .map_err(|err| err.errno().name().to_string())
}

async fn setattr(meta: &Meta, ctx: &Ctx, p: &str, set: SetAttr) -> Result<String, String> {
    let ino = resolve(meta, ctx, p).await?;
    meta.setattr(ctx, ino, &set)
        .await
        .map(|_| "ok".into())
        .map_err(|e| e.errno().name().to_string())
}

async fn run_block<S: TestStore>(block: &[Example]) {
    let store = S::create();
    let meta = Meta::new(store.client(), test_options());
    meta.format(&test_format(0), false).await.unwrap();
    meta.load().await.unwrap();
    for ex in block {
        let (command, expected) = ex
            .text
            .split_once("->")
            .unwrap_or_else(|| panic!("line {}: no ->", ex.line));
        let mut words: Vec<&str> = command.split_whitespace().collect();
        let ctx = if words.first() == Some(&"as") {
            let spec = words[1];
            words.drain(..2);
            parse_ctx(spec)
        } else {
            Ctx::root()
        };
        let got = match run(&meta, &ctx, &words).await {
            Ok(v) | Err(v) => v,
        };
        assert_eq!(
            got,
            expected.trim(),
            "docs/SEMANTICS.md line {}: {}",
            ex.line,
            ex.text
        );
    }
}

fn document() -> String {
    // The crate directory asked at run time: a test binary reused from a build in another
    // checkout (shared target directory) must read this checkout's page.
    let crate_dir = std::env::var_os("CARGO_MANIFEST_DIR").map_or_else(
        || env!("CARGO_MANIFEST_DIR").into(),
        std::path::PathBuf::from,
    );
    let path = crate_dir.join("../../docs/SEMANTICS.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semantics_examples_hold_on_memory_engine() {
    let blocks = blocks(&document());
    let lines: usize = blocks.iter().map(Vec::len).sum();
    assert!(
        blocks.len() >= 6 && lines >= 60,
        "the document has its examples ({lines} lines)"
    );
    for block in &blocks {
        run_block::<MemoryStore>(block).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semantics_examples_hold_on_sqlite_engine() {
    for block in &blocks(&document()) {
        run_block::<SqliteStore>(block).await;
    }
}
