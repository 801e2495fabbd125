//! `open(O_TMPFILE)`: a regular file without a name. It is created with link count 0 and
//! no directory entry, kept by this client's session (like an unlinked file still open)
//! and deleted at its last close — unless `linkat` gives it a name first, which only an
//! inode created this way may receive at link count 0 (Linux's `I_LINKABLE`).

use strata_types::{Errno, FileType, Ino};

use super::access::{MAY_EXEC, MAY_WRITE, check_access};
use super::namespace::{Entry, NewNode, in_trash, new_inode};
use super::{Ctx, Meta, get_dir, now_ns, put_inode};
use crate::codec::{self, Inode};
use crate::error::{Result, posix};
use crate::keys;
use crate::kv::Txn;

impl Meta {
    /// Create an unnamed regular file "in" directory `dir` (which must allow the caller to
    /// create entries). The caller opens it: the file lives until its last close.
    pub async fn tmpfile(&self, ctx: &Ctx, dir: Ino, mode: u16) -> Result<Entry> {
        self.check_limits(0, 1)?;
        let ino = self.next_inode().await?;
        let sid = self.session_id();
        let entry = self
            .txn(|tx| {
                Box::pin(async move {
                    let parent = get_dir(tx, dir).await?;
                    if in_trash(&parent) {
                        return posix(Errno::EPERM);
                    }
                    check_access(&self.acls, tx, ctx, &parent.core, MAY_WRITE | MAY_EXEC).await?;
                    let node = NewNode {
                        kind: FileType::Regular,
                        mode,
                        rdev: 0,
                        target: None,
                    };
                    let mut inode = new_inode(ctx, &parent, ino, &node, 0, now_ns());
                    self.inherit_acl(tx, ctx, &parent.core, &node, &mut inode)
                        .await?;
                    inode.core.parent = Ino(0);
                    inode.core.linkable = true;
                    inode.fields.nlink = 0;
                    let owner = (inode.core.uid, inode.core.gid);
                    self.check_quota(tx, None, Some(owner), 0, 1).await?;
                    put_inode(tx, &inode);
                    if sid != 0 {
                        tx.put(keys::sustained(sid, ino), Vec::new());
                    }
                    Ok(Entry {
                        ino,
                        attr: inode.attr(),
                    })
                })
            })
            .await?;
        self.add_usage(0, 1);
        self.add_owner_usage((entry.attr.uid, entry.attr.gid), 0, 1);
        self.note_sustained(ino);
        Ok(entry)
    }

    /// Give an unnamed `O_TMPFILE` inode its first name `newparent/newname` (inside
    /// [`Meta::link`]'s transaction, which checked the directory and the name).
    pub(super) async fn link_tmpfile(
        &self,
        tx: &mut Txn<'_>,
        inode: &mut Inode,
        newparent: Ino,
        newname: &[u8],
        space: i64,
    ) -> Result<()> {
        let now = now_ns();
        inode.core.linkable = false;
        inode.core.parent = newparent;
        inode.fields.nlink = 1;
        inode.fields.ctime = now;
        put_inode(tx, inode);
        let sid = self.session_id();
        if sid != 0 {
            tx.delete(keys::sustained(sid, inode.ino));
        }
        tx.put(
            keys::dentry(newparent, newname),
            codec::encode_dentry(inode.core.kind, inode.ino),
        );
        self.touch_dir(tx, newparent, now, 0, space, 1).await
    }
}
