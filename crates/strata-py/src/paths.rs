//! Paths → inodes for the SDK: the VFS's one path walker ([`strata_vfs::paths`]) from the
//! client's root (the volume root, or its `subdir`), with the directories it reaches
//! remembered for a second ([`crate::dircache`]) and errors naming the path.

use strata_types::{Attr, Errno, Ino};
use strata_vfs::paths::PathWalk;

use crate::error::{OnPath, Result};
use crate::volume::Volume;

fn walk(vol: &Volume, follow: bool) -> PathWalk<'_> {
    PathWalk::from(vol.vfs.options().root)
        .follow(follow)
        .cached(&vol.dirs)
}

/// The inode at `path`; a symlink at its end is followed when `follow`. A trailing `/`
/// asks for a directory (ENOTDIR otherwise), following a final symlink.
pub async fn resolve(vol: &Volume, path: &[u8], follow: bool) -> Result<Ino> {
    Ok(resolve_attr(vol, path, follow).await?.0)
}

/// [`resolve`], with the attributes the walk's last lookup returned (none for the root
/// or a path ending in `..`).
pub async fn resolve_attr(vol: &Volume, path: &[u8], follow: bool) -> Result<(Ino, Option<Attr>)> {
    let found = vol
        .vfs
        .resolve(&vol.ctx, walk(vol, follow), path)
        .await
        .on(path)?;
    Ok((found.ino, found.attr))
}

/// The directory that holds `path`'s last name, and that name. `at_root` is the errno
/// when `path` names the root itself (or ends in `.`/`..`), which has no such name.
pub async fn parent_of(vol: &Volume, path: &[u8], at_root: Errno) -> Result<(Ino, Vec<u8>)> {
    let (dir, name) = vol
        .vfs
        .resolve_parent(&vol.ctx, walk(vol, true), path, at_root)
        .await
        .on(path)?;
    Ok((dir.ino, name))
}
