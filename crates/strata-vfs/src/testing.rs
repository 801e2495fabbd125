//! A volume kept entirely in memory (metadata engine, object store, block cache), for the
//! tests of front ends that may depend on nothing below the VFS (feature `testing`).

use std::sync::Arc;

use strata_chunk::ChunkOptions;
use strata_chunk::ChunkStore;
use strata_chunk::cache::memory::MemoryCache;
use strata_meta::Meta;
use strata_meta::conformance::{MemoryStore, TestStore, test_format, test_options};
use strata_object::backend::Backend;
use strata_object::stack::{StackOptions, build};

use strata_meta::Ctx;
use strata_types::{Errno, Ino};

use crate::{Vfs, VfsOptions};

/// A formatted in-memory volume and one client of it.
///
/// # Panics
/// If formatting the fresh memory engine fails (it cannot).
pub async fn memory_vfs() -> Vfs {
    let store = MemoryStore::create();
    let meta = Meta::new(store.client(), test_options());
    #[allow(clippy::expect_used)] // test helper
    meta.format(&test_format(0), false)
        .await
        .expect("formatting a memory volume");
    let (objects, _) = build(Arc::new(Backend::memory()), &StackOptions::default());
    let opts = ChunkOptions {
        block_size: 64 << 10,
        ..ChunkOptions::default()
    };
    let chunks = ChunkStore::new(objects, Arc::new(MemoryCache::new(64 << 20)), opts);
    Vfs::new(Arc::new(meta), chunks, VfsOptions::default())
}

/// One row of the path table (`path_table.json`): a path and what reading the file at it
/// gives through any front end.
#[derive(Clone, Debug)]
pub struct PathCase {
    pub path: String,
    /// The file's bytes, or the errno.
    pub expect: Result<Vec<u8>, Errno>,
    /// The path holds `..` (S3 keys and WebDAV URLs cannot).
    pub dots: bool,
    /// Its last name is a symlink (sync copies links as links).
    pub final_link: bool,
}

/// The path table: the same tricky paths for every front end's tests.
const PATH_TABLE: &str = include_str!("path_table.json");

fn errno_named(name: &str) -> Errno {
    match name {
        "ENOENT" => Errno::ENOENT,
        "ENOTDIR" => Errno::ENOTDIR,
        "EISDIR" => Errno::EISDIR,
        "ELOOP" => Errno::ELOOP,
        other => panic!("path table: unknown errno {other}"),
    }
}

/// Every row of the path table.
///
/// # Panics
/// If the table is malformed (it is a file of the source tree).
pub fn path_table() -> Vec<PathCase> {
    #[allow(clippy::expect_used)] // test helper over a file of the source tree
    let table: serde_json::Value = serde_json::from_str(PATH_TABLE).expect("path_table.json");
    let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
    table["rows"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|row| PathCase {
            path: text(&row["path"]),
            expect: match row.get("error") {
                Some(e) => Err(errno_named(&text(e))),
                None => Ok(text(&row["expect"]).into_bytes()),
            },
            dots: row["dots"].as_bool().unwrap_or(false),
            final_link: row["final_link"].as_bool().unwrap_or(false),
        })
        .collect()
}

/// Make the path table's tree in directory `top` of `vfs`, as `ctx`.
///
/// # Panics
/// If a part of it cannot be made.
#[allow(clippy::expect_used, clippy::unwrap_used)] // test helper
pub async fn make_path_tree(vfs: &Vfs, ctx: &Ctx, top: Ino) {
    let table: serde_json::Value = serde_json::from_str(PATH_TABLE).expect("path_table.json");
    let tree = &table["tree"];
    let parent_of = |path: &str| {
        let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
        (dir.to_string(), name.as_bytes().to_vec())
    };
    let dir_at = |dir: String| async move {
        let parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
        vfs.make_dirs(ctx, top, &parts, 0o755).await.unwrap()
    };
    for dir in tree["dirs"].as_array().unwrap() {
        dir_at(dir.as_str().unwrap().to_string()).await;
    }
    for (path, content) in tree["files"].as_object().unwrap() {
        let (dir, name) = parent_of(path);
        let at = dir_at(dir).await;
        let (_, fh) = vfs.create(ctx, at, &name, 0o644).await.unwrap();
        vfs.write(fh, 0, content.as_str().unwrap().as_bytes())
            .await
            .unwrap();
        vfs.flush(fh, 0).await.unwrap();
        vfs.release(fh).await.unwrap();
    }
    for (path, target) in tree["symlinks"].as_object().unwrap() {
        let (dir, name) = parent_of(path);
        let at = dir_at(dir).await;
        vfs.symlink(ctx, at, &name, target.as_str().unwrap().as_bytes())
            .await
            .unwrap();
    }
}

/// What reading the file at `path` gives through the VFS's own walker, from `top`.
pub async fn read_through_vfs(
    vfs: &Vfs,
    ctx: &Ctx,
    top: Ino,
    path: &str,
) -> Result<Vec<u8>, Errno> {
    let found = vfs
        .resolve(ctx, crate::paths::PathWalk::from(top), path.as_bytes())
        .await?;
    let attr = match found.attr {
        Some(attr) => attr,
        None => vfs.getattr(found.ino).await?,
    };
    if attr.is_dir() {
        return Err(Errno::EISDIR);
    }
    // Read-only (O_RDONLY is 0).
    let (fh, _) = vfs.open(ctx, found.ino, 0).await?;
    let read = vfs.read(fh, 0, 1 << 20).await.map(|b| b.to_vec());
    vfs.release(fh).await?;
    read
}
