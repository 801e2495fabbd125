//! `clone`: a metadata-only copy of a file or a tree. Every copied chunk record names the
//! same slices as the source (each gaining a reference), so no data is copied; later
//! writes to either side create new slices and never change the other. Hard links inside
//! a cloned tree become separate files.

use strata_types::{Errno, FileType, Ino};

use super::access::check_access;
use super::delete::add_slice_ref;
use super::namespace::{get_dir_and_entry, in_trash};
use super::{Ctx, MAY_EXEC, MAY_WRITE, Meta, must_get_inode, now_ns, put_inode, space_of};
use crate::MAY_READ;
use crate::codec::{self, usage_slot};
use crate::error::{Result, posix};
use crate::keys;
use crate::kv::prefix_end;

impl Meta {
    /// Clone `src` (file or directory tree) as `dst_parent/dst_name`. With `preserve`, the
    /// copy keeps owner, mode and times; otherwise it belongs to the caller and gets the
    /// current time. Returns the number of inodes created; `done` is told after each.
    pub async fn clone_tree(
        &self,
        ctx: &Ctx,
        src: Ino,
        dst_parent: Ino,
        dst_name: &[u8],
        preserve: bool,
        done: &mut (dyn FnMut(u64) -> bool + Send),
    ) -> Result<u64> {
        super::check_name(dst_name)?;
        let is_dir = self.getattr(src).await?.kind == FileType::Directory;
        let top = self
            .clone_node(ctx, src, dst_parent, dst_name, preserve)
            .await?;
        let mut step = |n| {
            if done(n) { Ok(()) } else { posix(Errno::EINTR) }
        };
        step(1)?;
        let mut count = 1;
        let mut stack = if is_dir { vec![(src, top)] } else { Vec::new() };
        while let Some((from, to)) = stack.pop() {
            let mut pages = self.entry_pages(from, false);
            while let Some(page) = pages.next(self).await? {
                for e in &page {
                    let copy = self.clone_node(ctx, e.ino, to, &e.name, preserve).await?;
                    count += 1;
                    step(1)?;
                    if e.kind == FileType::Directory {
                        stack.push((e.ino, copy));
                    }
                }
            }
        }
        Ok(count)
    }

    /// Copy one inode (not a directory's entries) into `parent/name`; returns the new inode.
    async fn clone_node(
        &self,
        ctx: &Ctx,
        src: Ino,
        parent: Ino,
        name: &[u8],
        preserve: bool,
    ) -> Result<Ino> {
        self.check_limits(0, 1)?;
        let ino = self.next_inode().await?;
        let (space, owner) = self
            .txn(|tx| {
                Box::pin(async move {
                    let (dir, existing) = get_dir_and_entry(tx, parent, name).await?;
                    if in_trash(&dir) {
                        return posix(Errno::EPERM);
                    }
                    check_access(&self.acls, tx, ctx, &dir.core, MAY_WRITE | MAY_EXEC).await?;
                    if existing.is_some() {
                        return posix(Errno::EEXIST);
                    }
                    let source = must_get_inode(tx, src).await?;
                    check_access(&self.acls, tx, ctx, &source.core, MAY_READ).await?;
                    let mut copy = source.clone();
                    copy.ino = ino;
                    copy.core.parent = parent;
                    let now = now_ns();
                    if !preserve {
                        copy.core.uid = ctx.uid;
                        copy.core.gid = ctx.gid;
                        copy.fields.atime = now;
                        copy.fields.mtime = now;
                        copy.fields.ctime = now;
                    }
                    let kind = copy.core.kind;
                    let owner = (copy.core.uid, copy.core.gid);
                    let space = space_of(kind, copy.fields.length);
                    self.check_quota(tx, Some(parent), Some(owner), space, 1)
                        .await?;
                    copy.fields.nlink = if kind == FileType::Directory { 2 } else { 1 };
                    put_inode(tx, &copy);
                    // Chunks, symlink target and xattrs: everything under the source's
                    // prefix except its entries, core, fields and parent records.
                    let prefix = keys::inode_prefix(src);
                    for (key, value) in tx
                        .scan(&prefix, &prefix_end(&prefix), usize::MAX, false)
                        .await?
                    {
                        match key.get(9) {
                            Some(b'C') => {
                                for s in codec::decode_slices(&key, &value)? {
                                    add_slice_ref(tx, &s).await?;
                                }
                                let index = keys::be_u32(&key, 10).unwrap_or(0);
                                tx.put(keys::chunk(ino, index), value);
                            }
                            Some(b'S') => tx.put(keys::symlink(ino), value),
                            Some(b'X') => tx.put(keys::xattr(ino, &key[10..]), value),
                            _ => {}
                        }
                    }
                    if kind == FileType::Directory {
                        tx.put(
                            keys::dir_usage(ino),
                            codec::encode_slots(&[0; usage_slot::COUNT]),
                        );
                    }
                    tx.put(keys::dentry(parent, name), codec::encode_dentry(kind, ino));
                    self.touch_dir(
                        tx,
                        parent,
                        now,
                        i64::from(kind == FileType::Directory),
                        space,
                        1,
                    )
                    .await?;
                    Ok((space, owner))
                })
            })
            .await?;
        self.add_usage(space, 1);
        self.add_owner_usage(owner, space, 1);
        Ok(ino)
    }
}
