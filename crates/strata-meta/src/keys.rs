//! The metadata key space (version 1, see docs/FORMAT.md): one function per kind of key,
//! so the layout is written down in exactly one place.
//!
//! Integers in keys are big-endian so that byte order is numeric order.

use strata_types::Ino;

use crate::kv::{Key, Link};

fn with_ino(tag: u8, ino: Ino, sub: u8, extra: usize) -> Key {
    let mut k = Vec::with_capacity(10 + extra);
    k.push(tag);
    k.extend_from_slice(&ino.0.to_be_bytes());
    k.push(sub);
    k
}

/// `C` + name: volume settings (the format record is `Cformat`).
pub fn setting(name: &str) -> Key {
    [b"C", name.as_bytes()].concat()
}

/// `N` + name: a counter.
pub fn counter(name: &str) -> Key {
    [b"N", name.as_bytes()].concat()
}

/// `R` + id (u32): an access control list, in the kernel's binary form.
pub fn acl(id: u32) -> Key {
    let mut k = Vec::with_capacity(5);
    k.push(b'R');
    k.extend_from_slice(&id.to_be_bytes());
    k
}

/// `A` ino `I`: an inode's core attributes.
pub fn inode_core(ino: Ino) -> Key {
    with_ino(b'A', ino, b'I', 0)
}

/// `A` ino `T`: an inode's field record (times, nlink, length).
pub fn inode_fields(ino: Ino) -> Key {
    with_ino(b'A', ino, b'T', 0)
}

/// From a directory entry (`codec::encode_dentry`: kind, then the inode number), read as
/// key number `from`, to the inode's core and field records: one-round-trip lookups.
pub fn entry_to_inode(from: usize) -> Link {
    Link {
        from,
        offset: 1,
        targets: vec![
            (b"A".to_vec(), b"I".to_vec()),
            (b"A".to_vec(), b"T".to_vec()),
        ],
    }
}

/// `A` ino: every key of one inode starts with this.
pub fn inode_prefix(ino: Ino) -> Key {
    let mut k = Vec::with_capacity(9);
    k.push(b'A');
    k.extend_from_slice(&ino.0.to_be_bytes());
    k
}

/// `A` parent `D` name: a directory entry.
pub fn dentry(parent: Ino, name: &[u8]) -> Key {
    let mut k = with_ino(b'A', parent, b'D', name.len());
    k.extend_from_slice(name);
    k
}

/// Keys a writing transaction may assume from the client's recent reads
/// (`kv::readcache`): inode core and field records, directory entries, usage records.
pub fn assumable(key: &[u8]) -> bool {
    match (key.first(), key.get(9)) {
        (Some(b'A'), Some(b'I' | b'T')) => key.len() == 10,
        (Some(b'A'), Some(b'D')) => key.len() > 10,
        (Some(b'U'), _) => key.len() == 9,
        _ => false,
    }
}

/// `A` parent `D`: prefix of all entries of a directory.
pub fn dentry_prefix(parent: Ino) -> Key {
    with_ino(b'A', parent, b'D', 0)
}

/// `A` ino `C` index: a chunk's slice list.
pub fn chunk(ino: Ino, index: u32) -> Key {
    let mut k = with_ino(b'A', ino, b'C', 4);
    k.extend_from_slice(&index.to_be_bytes());
    k
}

/// `A` ino `C`: prefix of all chunks of a file.
pub fn chunk_prefix(ino: Ino) -> Key {
    with_ino(b'A', ino, b'C', 0)
}

/// `A` ino `S`: a symlink's target.
pub fn symlink(ino: Ino) -> Key {
    with_ino(b'A', ino, b'S', 0)
}

/// `A` ino `X` name: an extended attribute.
pub fn xattr(ino: Ino, name: &[u8]) -> Key {
    let mut k = with_ino(b'A', ino, b'X', name.len());
    k.extend_from_slice(name);
    k
}

/// `A` ino `X`: prefix of all extended attributes of an inode.
pub fn xattr_prefix(ino: Ino) -> Key {
    with_ino(b'A', ino, b'X', 0)
}

/// `A` ino `P` parent: how many links from `parent` a multiply-linked inode has.
pub fn link_parent(ino: Ino, parent: Ino) -> Key {
    let mut k = with_ino(b'A', ino, b'P', 8);
    k.extend_from_slice(&parent.0.to_be_bytes());
    k
}

/// `A` ino `P`: prefix of the parent records of an inode.
pub fn link_parent_prefix(ino: Ino) -> Key {
    with_ino(b'A', ino, b'P', 0)
}

/// `U` ino: a directory's usage record (bytes, inodes of its direct children).
pub fn dir_usage(ino: Ino) -> Key {
    let mut k = Vec::with_capacity(9);
    k.push(b'U');
    k.extend_from_slice(&ino.0.to_be_bytes());
    k
}

/// `K` id size: reference count of a shared slice (absent = one reference).
pub fn slice_ref(id: u64, size: u32) -> Key {
    let mut k = Vec::with_capacity(13);
    k.push(b'K');
    k.extend_from_slice(&id.to_be_bytes());
    k.extend_from_slice(&size.to_be_bytes());
    k
}

/// `P` id: where slice `id`'s blocks are, when not (only) in the volume's own store.
pub fn placement(id: u64) -> Key {
    let mut k = Vec::with_capacity(9);
    k.push(b'P');
    k.extend_from_slice(&id.to_be_bytes());
    k
}

/// `G` ino: the tier policy of directory `ino`.
pub fn tier_policy(ino: Ino) -> Key {
    let mut k = Vec::with_capacity(9);
    k.push(b'G');
    k.extend_from_slice(&ino.0.to_be_bytes());
    k
}

/// `O` ino: the lease of the mover working on directory `ino`'s policy.
pub fn mover_lease(ino: Ino) -> Key {
    let mut k = Vec::with_capacity(9);
    k.push(b'O');
    k.extend_from_slice(&ino.0.to_be_bytes());
    k
}

/// `H` ino index: hint that a chunk has many slices and should be compacted.
pub fn compact_hint(ino: Ino, index: u32) -> Key {
    let mut k = Vec::with_capacity(13);
    k.push(b'H');
    k.extend_from_slice(&ino.0.to_be_bytes());
    k.extend_from_slice(&index.to_be_bytes());
    k
}

/// `D` ino: a file whose chunks await deletion.
pub fn delete_file(ino: Ino) -> Key {
    let mut k = Vec::with_capacity(9);
    k.push(b'D');
    k.extend_from_slice(&ino.0.to_be_bytes());
    k
}

/// `L` time id size: a slice whose blocks await deletion, queued at `time` (ns).
pub fn delete_slice(time: i64, id: u64, size: u32) -> Key {
    let mut k = Vec::with_capacity(21);
    k.push(b'L');
    k.extend_from_slice(&time.max(0).to_be_bytes());
    k.extend_from_slice(&id.to_be_bytes());
    k.extend_from_slice(&size.to_be_bytes());
    k
}

/// `Q` kind id: a quota (kind `d` directory inode, `u` user id, `g` group id).
pub fn quota(kind: u8, id: u64) -> Key {
    let mut k = Vec::with_capacity(10);
    k.push(b'Q');
    k.push(kind);
    k.extend_from_slice(&id.to_be_bytes());
    k
}

fn session_key(sub: u8, sid: u64, ino: Option<Ino>) -> Key {
    let mut k = Vec::with_capacity(18);
    k.push(b'S');
    k.push(sub);
    k.extend_from_slice(&sid.to_be_bytes());
    if let Some(ino) = ino {
        k.extend_from_slice(&ino.0.to_be_bytes());
    }
    k
}

/// `SE` sid: a session's expiry time (ns).
pub fn session_expiry(sid: u64) -> Key {
    session_key(b'E', sid, None)
}

/// `SE`: prefix of all session expiry records.
pub fn session_expiry_prefix() -> Key {
    b"SE".to_vec()
}

/// `SI` sid: a session's description (JSON).
pub fn session_info(sid: u64) -> Key {
    session_key(b'I', sid, None)
}

/// `SS` sid ino: an unlinked inode kept alive because the session has it open.
pub fn sustained(sid: u64, ino: Ino) -> Key {
    session_key(b'S', sid, Some(ino))
}

/// `SS` sid: prefix of a session's sustained inodes.
pub fn sustained_prefix(sid: u64) -> Key {
    session_key(b'S', sid, None)
}

/// `SK` sid ino: the session holds locks on `ino`.
pub fn session_lock(sid: u64, ino: Ino) -> Key {
    session_key(b'K', sid, Some(ino))
}

/// `SK` sid: prefix of the inodes a session holds locks on.
pub fn session_lock_prefix(sid: u64) -> Key {
    session_key(b'K', sid, None)
}

/// `F` ino `F`: flock holders of an inode.
pub fn flocks(ino: Ino) -> Key {
    with_ino(b'F', ino, b'F', 0)
}

/// `F` ino `P`: POSIX record locks of an inode.
pub fn plocks(ino: Ino) -> Key {
    with_ino(b'F', ino, b'P', 0)
}

/// Read a big-endian u64 at `at` in `key`.
pub fn be_u64(key: &[u8], at: usize) -> Option<u64> {
    key.get(at..at + 8)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_be_bytes)
}

/// Read a big-endian u32 at `at` in `key`.
pub fn be_u32(key: &[u8], at: usize) -> Option<u32> {
    key.get(at..at + 4)
        .and_then(|b| b.try_into().ok())
        .map(u32::from_be_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_attribute_records_entries_and_usage_are_assumable() {
        let ino = Ino(7);
        assert!(assumable(&inode_core(ino)));
        assert!(assumable(&inode_fields(ino)));
        assert!(assumable(&dentry(ino, b"name")));
        assert!(assumable(&dir_usage(ino)));
        assert!(!assumable(&dentry_prefix(ino)));
        assert!(!assumable(&chunk(ino, 0)));
        assert!(!assumable(&xattr(ino, b"user.a")));
        assert!(!assumable(&symlink(ino)));
        assert!(!assumable(&setting("format")));
        assert!(!assumable(&counter("nextInode")));
        assert!(!assumable(b""));
    }

    #[test]
    fn an_entry_links_to_its_inode_records() {
        let ino = Ino(0x0102_0304_0506);
        let entry = crate::codec::encode_dentry(strata_types::FileType::Regular, ino);
        let targets = entry_to_inode(1).target_keys(Some(&entry)).unwrap();
        assert_eq!(targets, vec![inode_core(ino), inode_fields(ino)]);
    }

    #[test]
    fn keys_of_one_inode_share_a_prefix_and_sort_numerically() {
        let ino = Ino(0x0102);
        for k in [
            inode_core(ino),
            inode_fields(ino),
            dentry(ino, b"x"),
            chunk(ino, 3),
        ] {
            assert!(k.starts_with(&inode_prefix(ino)));
        }
        assert!(chunk(ino, 1) < chunk(ino, 256));
        assert!(inode_prefix(Ino(255)) < inode_prefix(Ino(256)));
        assert!(delete_slice(5, 1, 1) < delete_slice(300, 0, 0));
        assert_eq!(be_u32(&chunk(ino, 7), 10), Some(7));
        assert_eq!(be_u64(&session_lock(9, Ino(4)), 10), Some(4));
    }
}
