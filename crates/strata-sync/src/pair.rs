//! What SRC and DST name, read the way `juicefs sync` reads them, made safer: an address
//! ending in `/` (or naming a bucket, container or volume root) is a directory; one
//! without names a directory when one is there, one file when a file is there, and
//! otherwise a key prefix whose last name DST's last name replaces (`./te` → `test/`,
//! `text`). JuiceFS takes every address without `/` as a prefix, so `/data/a` would also
//! take `/data/ab`; here it takes only what it names. Opening is [`crate::open`]'s.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use strata_types::{redact_url, userinfo_bounds};

use crate::narrow::first_entry;
use crate::open::{OpenHow, OpenVolumes, open};
use crate::{Endpoint, Kind, Narrowed, Result, Shape, SyncError};

/// Both sides opened, and how SRC and DST were read.
pub struct Pair {
    pub src: Arc<dyn Endpoint>,
    pub dst: Arc<dyn Endpoint>,
    pub shape: Shape,
}

impl std::fmt::Debug for Pair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pair")
            .field("src", &self.src.describe())
            .field("dst", &self.dst.describe())
            .field("shape", &self.shape)
            .finish()
    }
}

/// `addr` split before its last name — (the directory's address, the name) — or `None`
/// when it ends in `/` or names a root (`s3://bucket`, `strata://VOL`, `/`).
pub fn split_last(addr: &str) -> Option<(String, String)> {
    if addr.ends_with('/') {
        return None;
    }
    let path_start = path_start(addr)?;
    let path = &addr[path_start..];
    let (parent, name) = match path.rfind('/') {
        Some(i) => (
            format!("{}{}", &addr[..path_start], &path[..=i]),
            &path[i + 1..],
        ),
        None if path_start == 0 => ("./".to_string(), path),
        None => (addr[..path_start].to_string(), path),
    };
    if name.is_empty() || name == "." || name == ".." {
        return None;
    }
    Some((parent, name.to_string()))
}

/// Where the path below an address's root begins; `None` when there is no path.
fn path_start(addr: &str) -> Option<usize> {
    let Some((scheme, _)) = addr.split_once("://") else {
        return Some(0);
    };
    if scheme == "file" {
        return Some("file://".len());
    }
    let after_userinfo = userinfo_bounds(addr).map_or(scheme.len() + 3, |(_, at)| at + 1);
    let host_end = after_userinfo + addr[after_userinfo..].find('/')? + 1;
    if scheme != "minio" {
        return (host_end < addr.len()).then_some(host_end);
    }
    // minio://HOST:PORT/BUCKET/PATH: the bucket is part of the root.
    let bucket_end = host_end + addr[host_end..].find('/')? + 1;
    (bucket_end < addr.len()).then_some(bucket_end)
}

/// Open SRC and DST, reading what they name (`known`: as a queued job recorded it).
pub async fn open_pair(
    src_addr: &str,
    dst_addr: &str,
    how: OpenHow,
    known: Option<Shape>,
    clients: &mut OpenVolumes,
) -> Result<Pair> {
    let split = split_last(src_addr).filter(|_| known != Some(Shape::Tree));
    let Some((src_parent, name)) = split else {
        return tree(None, src_addr, dst_addr, how, clients).await;
    };
    let Ok(parent) = open(&src_parent, how, false, clients).await else {
        // Its directory cannot be opened: say so of SRC itself.
        return tree(None, src_addr, dst_addr, how, clients).await;
    };
    let (shape, opened) = match known {
        Some(shape) => (shape, None),
        None => probe(parent.clone(), &name, src_addr, how, clients).await?,
    };
    let exact = match shape {
        Shape::Tree => return tree(opened, src_addr, dst_addr, how, clients).await,
        Shape::Prefix => false,
        Shape::File | Shape::FileInto => true,
    };
    let src: Arc<dyn Endpoint> = Arc::new(Narrowed::new(parent, &name, &name, exact));
    let (dst, shape) = open_dst(shape, &name, src_addr, dst_addr, how, known, clients).await?;
    Ok(Pair { src, dst, shape })
}

/// Two trees; SRC's endpoint `opened` already when the probe opened it.
async fn tree(
    opened: Option<Arc<dyn Endpoint>>,
    src_addr: &str,
    dst_addr: &str,
    how: OpenHow,
    clients: &mut OpenVolumes,
) -> Result<Pair> {
    let src = match opened {
        Some(src) => src,
        None => open(src_addr, how, false, clients).await?,
    };
    Ok(Pair {
        src,
        dst: open(dst_addr, how, true, clients).await?,
        shape: Shape::Tree,
    })
}

/// What `name` in `parent` is: a directory (also a bucket prefix holding keys), one
/// file, or the start of other names (a prefix). A name that nothing starts with is an
/// error on file systems and volumes, and an empty directory on object stores. A
/// directory found by opening it comes back opened.
async fn probe(
    parent: Arc<dyn Endpoint>,
    name: &str,
    src_addr: &str,
    how: OpenHow,
    clients: &mut OpenVolumes,
) -> Result<(Shape, Option<Arc<dyn Endpoint>>)> {
    // On object stores the keys below `name/` are looked for first: some S3 servers
    // that keep objects as files fail a HEAD of a directory.
    if !parent.has_dirs()
        && let Some(dir) = dir_below(&parent, name, src_addr, how, false, clients).await?
    {
        return Ok((Shape::Tree, Some(dir)));
    }
    match parent.stat(name).await? {
        Some(e) if e.kind == Kind::Dir => return Ok((Shape::Tree, None)),
        Some(_) => return Ok((Shape::File, None)),
        None => {}
    }
    let has_dirs = parent.has_dirs();
    let starting = Narrowed::new(parent, name, name, false);
    match first_entry(&starting).await? {
        Some(_) => {
            tracing::warn!(
                "SRC {}: nothing has this name; the keys starting with it are copied \
                 (a key prefix, as in juicefs sync)",
                redact_url(src_addr)
            );
            Ok((Shape::Prefix, None))
        }
        None if has_dirs => Err(SyncError::Usage(format!(
            "SRC {}: no such file or directory, and no name starts with it",
            redact_url(src_addr)
        ))),
        None => Ok((Shape::Tree, None)),
    }
}

/// DST for one file or a prefix named `name` on the source side.
async fn open_dst(
    shape: Shape,
    name: &str,
    src_addr: &str,
    dst_addr: &str,
    how: OpenHow,
    known: Option<Shape>,
    clients: &mut OpenVolumes,
) -> Result<(Arc<dyn Endpoint>, Shape)> {
    let exact = shape != Shape::Prefix;
    let split = split_last(dst_addr);
    let Some((dst_parent, dst_name)) = split.filter(|_| shape != Shape::FileInto) else {
        if shape == Shape::Prefix && dst_addr.ends_with('/') {
            return Err(SyncError::Usage(format!(
                "SRC {} names nothing, so it is a key prefix; DST {} must be one too: \
                 leave out its trailing '/'",
                redact_url(src_addr),
                redact_url(dst_addr)
            )));
        }
        // A file into a directory keeps its name; a prefix into a root keeps the
        // rest of each key.
        let dir = open(dst_addr, how, true, clients).await?;
        let own = if shape == Shape::Prefix { "" } else { name };
        let into = if shape == Shape::Prefix {
            Shape::Prefix
        } else {
            Shape::FileInto
        };
        return Ok((Arc::new(Narrowed::new(dir, name, own, exact)), into));
    };
    let parent = open(&dst_parent, how, true, clients).await?;
    if shape == Shape::File
        && known.is_none()
        && let Some(dir) = dir_below(&parent, &dst_name, dst_addr, how, true, clients).await?
    {
        let ep = Narrowed::new(dir, name, name, true);
        return Ok((Arc::new(ep), Shape::FileInto));
    }
    Ok((
        Arc::new(Narrowed::new(parent, name, &dst_name, exact)),
        shape,
    ))
}

/// `addr` (`name` in `parent`) opened as a directory, if it is one (on an object
/// store: if keys are below it).
async fn dir_below(
    parent: &Arc<dyn Endpoint>,
    name: &str,
    addr: &str,
    how: OpenHow,
    is_dst: bool,
    clients: &mut OpenVolumes,
) -> Result<Option<Arc<dyn Endpoint>>> {
    if parent.has_dirs() {
        if !parent.stat(name).await?.is_some_and(|e| e.is_dir()) {
            return Ok(None);
        }
        return Ok(Some(open(addr, how, is_dst, clients).await?));
    }
    let below = open(&format!("{addr}/"), how, is_dst, clients).await?;
    Ok(first_entry(below.as_ref()).await?.map(|_| below))
}

/// The keys listed in `path` (`--files-from`): one a line, a leading `/` dropped, blank
/// lines skipped.
pub fn read_key_list(path: &Path) -> Result<BTreeSet<String>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| SyncError::io(format_args!("--files-from {}", path.display()), e))?;
    Ok(text
        .lines()
        .map(|l| l.trim().trim_start_matches('/'))
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect())
}

/// A local DST inside a local SRC would be copied into itself.
pub fn refuse_dst_inside_src(src: &str, dst: &str) -> Result<()> {
    let local = |addr: &str| {
        let path = addr.strip_prefix("file://").unwrap_or(addr);
        (!path.contains("://")).then(|| PathBuf::from(path))
    };
    let (Some(src), Some(dst)) = (local(src), local(dst)) else {
        return Ok(());
    };
    let Ok(src) = src.canonicalize() else {
        return Ok(());
    };
    let dst = std::path::absolute(&dst).unwrap_or(dst);
    let dst = resolve_existing_part(&dst);
    if dst != src && dst.starts_with(&src) {
        return Err(SyncError::Usage(format!(
            "DST {} is inside SRC {}: the copy would copy itself",
            dst.display(),
            src.display()
        )));
    }
    Ok(())
}

/// `path` with its longest existing ancestor resolved (symlinks, `..`).
fn resolve_existing_part(path: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut at = path.to_path_buf();
    loop {
        if let Ok(real) = at.canonicalize() {
            return rest.iter().rev().fold(real, |p, name| p.join(name));
        }
        match (at.file_name().map(|n| n.to_os_string()), at.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                at = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(addr: &str) -> Option<(String, String)> {
        split_last(addr)
    }

    fn pair(parent: &str, name: &str) -> Option<(String, String)> {
        Some((parent.to_string(), name.to_string()))
    }

    #[test]
    fn addresses_split_before_their_last_name() {
        assert_eq!(split("/data/train"), pair("/data/", "train"));
        assert_eq!(split("train"), pair("./", "train"));
        assert_eq!(split("./te"), pair("./", "te"));
        assert_eq!(split("/x"), pair("/", "x"));
        assert_eq!(split("file:///x/y"), pair("file:///x/", "y"));
        assert_eq!(split("/data/train/"), None);
        assert_eq!(split("/data/.."), None);
        assert_eq!(split("s3://bucket"), None);
        assert_eq!(split("s3://bucket/"), None);
        assert_eq!(
            split("s3://b.s3.amazonaws.com/a"),
            pair("s3://b.s3.amazonaws.com/", "a")
        );
        assert_eq!(split("s3://ak:s/k@b/a/c"), pair("s3://ak:s/k@b/a/", "c"));
        assert_eq!(split("minio://h:9000/bucket"), None);
        assert_eq!(
            split("minio://h:9000/bucket/p"),
            pair("minio://h:9000/bucket/", "p")
        );
        assert_eq!(split("wasb://c/p/q"), pair("wasb://c/p/", "q"));
        assert_eq!(split("strata://VOL"), None);
        assert_eq!(split("strata://VOL/a"), pair("strata://VOL/", "a"));
    }
}

#[cfg(test)]
mod checks_tests {
    #![allow(clippy::unwrap_used)] // test code
    use super::*;

    #[test]
    fn a_local_dst_inside_src_is_refused_and_others_pass() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        std::fs::create_dir_all(src.join("a")).unwrap();
        let s = src.to_str().unwrap();
        let inside = format!("{s}/a/new");
        assert!(matches!(
            refuse_dst_inside_src(s, &inside),
            Err(SyncError::Usage(_))
        ));
        let through_dots = format!("{s}/a/../b");
        assert!(refuse_dst_inside_src(s, &through_dots).is_err());
        let beside = dir.path().join("dst");
        assert!(refuse_dst_inside_src(s, beside.to_str().unwrap()).is_ok());
        assert!(
            refuse_dst_inside_src(s, s).is_ok(),
            "the same tree is a no-op sync"
        );
        assert!(refuse_dst_inside_src("s3://b/x", &inside).is_ok());
    }

    #[test]
    fn a_key_list_drops_leading_slashes_and_blank_lines() {
        let dir = tempfile::tempdir().unwrap();
        let list = dir.path().join("keys");
        std::fs::write(&list, "/a/b\n\n  c \nd/\n").unwrap();
        let keys: Vec<String> = read_key_list(&list).unwrap().into_iter().collect();
        assert_eq!(keys, ["a/b", "c", "d/"]);
        assert!(matches!(
            read_key_list(&dir.path().join("missing")),
            Err(SyncError::Io { .. })
        ));
    }
}
