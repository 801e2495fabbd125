//! POSIX.1e access control lists as Linux implements them: the `system.posix_acl_*`
//! extended attributes' binary format, the rules a valid list obeys, the access check
//! (`posix_acl_permission`), what a new inode inherits from its directory's default list
//! (`posix_acl_create`), and how the list and the mode bits stay one (`chmod` moves the
//! mask). Pure logic; storing lists is `meta/acl.rs`'s.

use strata_types::Errno;

/// The access list's extended attribute.
pub const XATTR_ACCESS: &[u8] = b"system.posix_acl_access";
/// A directory's default list, which new entries inherit.
pub const XATTR_DEFAULT: &[u8] = b"system.posix_acl_default";

/// True for the names of the two access control list attributes.
pub fn is_acl_xattr(name: &[u8]) -> bool {
    name == XATTR_ACCESS || name == XATTR_DEFAULT
}

/// Version word at the start of the attribute (`POSIX_ACL_XATTR_VERSION`).
const XATTR_VERSION: u32 = 2;
const TAG_USER_OBJ: u16 = 0x01;
const TAG_USER: u16 = 0x02;
const TAG_GROUP_OBJ: u16 = 0x04;
const TAG_GROUP: u16 = 0x08;
const TAG_MASK: u16 = 0x10;
const TAG_OTHER: u16 = 0x20;
/// The id written in entries that name nobody (`ACL_UNDEFINED_ID`).
const UNDEFINED_ID: u32 = u32::MAX;
/// Most entries a list may have: what a 64 KiB attribute holds.
pub const MAX_ENTRIES: usize = (65536 - 4) / 8;

/// One list in full. Permissions are `rwx` bits (4, 2, 1).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Acl {
    /// `ACL_USER_OBJ`: the owner.
    pub owner: u8,
    /// `ACL_GROUP_OBJ`: the owning group.
    pub group: u8,
    /// `ACL_MASK`: the most any named entry or the owning group may grant.
    pub mask: Option<u8>,
    /// `ACL_OTHER`.
    pub other: u8,
    /// `ACL_USER` entries, by increasing uid.
    pub users: Vec<(u32, u8)>,
    /// `ACL_GROUP` entries, by increasing gid.
    pub groups: Vec<(u32, u8)>,
}

/// Who asks: the caller's uid and whether it is in a group.
pub trait Caller {
    fn uid(&self) -> u32;
    fn in_group(&self, gid: u32) -> bool;
}

impl Acl {
    /// The three-entry list that says what `mode`'s permission bits say.
    pub fn from_mode(mode: u16) -> Acl {
        let bits = |shift: u16| u8::try_from((mode >> shift) & 7).unwrap_or(0);
        Acl {
            owner: bits(6),
            group: bits(3),
            mask: None,
            other: bits(0),
            users: Vec::new(),
            groups: Vec::new(),
        }
    }

    /// True when the list says no more than mode bits can (no mask, no named entries):
    /// such a list is kept as the mode alone.
    pub fn is_minimal(&self) -> bool {
        self.mask.is_none() && self.users.is_empty() && self.groups.is_empty()
    }

    /// The permission bits (`0o777` part of a mode) this list implies: the group bits
    /// are the mask when there is one.
    pub fn mode_bits(&self) -> u16 {
        let group = self.mask.unwrap_or(self.group);
        (u16::from(self.owner) << 6) | (u16::from(group) << 3) | u16::from(self.other)
    }

    /// This access list with its owner, mask (or owning group) and other entries taken
    /// from `mode`, where they live (`chmod` changes them there).
    pub fn with_mode(&self, mode: u16) -> Acl {
        let from = Acl::from_mode(mode);
        let mut acl = self.clone();
        acl.owner = from.owner;
        acl.other = from.other;
        match acl.mask {
            Some(_) => acl.mask = Some(from.group),
            None => acl.group = from.group,
        }
        acl
    }

    /// The part of an access list kept in its stored record: owner, other and mask
    /// permissions live in the mode, so they are cleared (the mask's presence stays).
    /// Lists that differ only there share one record.
    pub fn without_mode(&self) -> Acl {
        let mut acl = self.clone();
        acl.owner = 0;
        acl.other = 0;
        if acl.mask.is_some() {
            acl.mask = Some(0);
        } else {
            acl.group = 0;
        }
        acl
    }

    /// Parse the kernel's binary form: `Ok(None)` for a list of no entries (which
    /// removes a list). EINVAL for a malformed or invalid list, EOPNOTSUPP for another
    /// version, as Linux answers.
    pub fn from_xattr(value: &[u8]) -> Result<Option<Acl>, Errno> {
        let Some((header, body)) = value.split_first_chunk::<4>() else {
            return Err(Errno::EINVAL);
        };
        if u32::from_le_bytes(*header) != XATTR_VERSION {
            return Err(Errno::EOPNOTSUPP);
        }
        if body.len() % 8 != 0 || body.len() / 8 > MAX_ENTRIES {
            return Err(Errno::EINVAL);
        }
        if body.is_empty() {
            return Ok(None);
        }
        let entries = body.chunks_exact(8).map(|e| {
            let tag = u16::from_le_bytes([e[0], e[1]]);
            let perm = u16::from_le_bytes([e[2], e[3]]);
            let id = u32::from_le_bytes([e[4], e[5], e[6], e[7]]);
            (tag, perm, id)
        });
        Self::from_entries(entries).map(Some)
    }

    /// The rules of `posix_acl_valid`: the owner, named users, the owning group, named
    /// groups, the mask and other, in that order; one of each unnamed tag; a mask when
    /// anything is named; permissions within `rwx`. Named entries may come in any id
    /// order (they are kept sorted); one id twice is EINVAL.
    fn from_entries(entries: impl Iterator<Item = (u16, u16, u32)>) -> Result<Acl, Errno> {
        let mut acl = Acl::from_mode(0);
        // Where in the order the next entry may be: 0 expects the owner, 1 named users
        // or the owning group, 2 named groups, the mask or other, 3 other, 4 nothing.
        let mut state = 0u8;
        for (tag, perm, id) in entries {
            let perm = u8::try_from(perm)
                .ok()
                .filter(|p| *p <= 7)
                .ok_or(Errno::EINVAL)?;
            state = match (tag, state) {
                (TAG_USER_OBJ, 0) => {
                    acl.owner = perm;
                    1
                }
                (TAG_USER, 1) => {
                    acl.users.push((id, perm));
                    1
                }
                (TAG_GROUP_OBJ, 1) => {
                    acl.group = perm;
                    2
                }
                (TAG_GROUP, 2) => {
                    acl.groups.push((id, perm));
                    2
                }
                (TAG_MASK, 2) => {
                    acl.mask = Some(perm);
                    3
                }
                (TAG_OTHER, 2 | 3) => {
                    acl.other = perm;
                    4
                }
                _ => return Err(Errno::EINVAL),
            };
        }
        let named = !acl.users.is_empty() || !acl.groups.is_empty();
        if state != 4 || (named && acl.mask.is_none()) {
            return Err(Errno::EINVAL);
        }
        sort_named(&mut acl.users)?;
        sort_named(&mut acl.groups)?;
        Ok(acl)
    }

    /// The kernel's binary form, entries in the canonical order.
    pub fn to_xattr(&self) -> Vec<u8> {
        let count = 4 + self.users.len() + self.groups.len() + usize::from(self.mask.is_some());
        let mut out = Vec::with_capacity(4 + 8 * count);
        out.extend_from_slice(&XATTR_VERSION.to_le_bytes());
        let mut entry = |tag: u16, perm: u8, id: u32| {
            out.extend_from_slice(&tag.to_le_bytes());
            out.extend_from_slice(&u16::from(perm).to_le_bytes());
            out.extend_from_slice(&id.to_le_bytes());
        };
        entry(TAG_USER_OBJ, self.owner, UNDEFINED_ID);
        for (uid, perm) in &self.users {
            entry(TAG_USER, *perm, *uid);
        }
        entry(TAG_GROUP_OBJ, self.group, UNDEFINED_ID);
        for (gid, perm) in &self.groups {
            entry(TAG_GROUP, *perm, *gid);
        }
        if let Some(mask) = self.mask {
            entry(TAG_MASK, mask, UNDEFINED_ID);
        }
        entry(TAG_OTHER, self.other, UNDEFINED_ID);
        out
    }

    /// Whether `caller` gets every bit of `want` (`rwx`) from this access list of a file
    /// owned by `owner_uid`:`owner_gid` (`posix_acl_permission`; root's privileges are
    /// the caller's business). The owner entry for the owner; else a named user entry,
    /// masked; else every group entry that matches and grants `want`, masked (a match
    /// that grants too little denies, rather than falling to other); else other.
    pub fn permits(&self, caller: &impl Caller, owner_uid: u32, owner_gid: u32, want: u8) -> bool {
        let mask = self.mask.unwrap_or(7);
        let grants = |perm: u8| perm & want == want;
        if caller.uid() == owner_uid {
            return grants(self.owner);
        }
        if let Some((_, perm)) = self.users.iter().find(|(uid, _)| *uid == caller.uid()) {
            return grants(perm & mask);
        }
        let mut group_matched = false;
        let groups = std::iter::once((owner_gid, self.group)).chain(self.groups.iter().copied());
        for (gid, perm) in groups {
            if caller.in_group(gid) {
                group_matched = true;
                if grants(perm & mask) {
                    return true;
                }
            }
        }
        !group_matched && grants(self.other)
    }

    /// What a new inode gets from its directory's default list (`posix_acl_create`):
    /// the list with owner, mask (or owning group) and other cut down to `mode`'s
    /// bits, and the mode's permission bits cut down to match. Returns the new mode
    /// (special bits kept) and the access list, or `None` when the result says no more
    /// than the mode (no access list is kept then). The umask does not apply.
    pub fn inherit(&self, mode: u16) -> (u16, Option<Acl>) {
        let mut acl = self.clone();
        let cut = Acl::from_mode(mode);
        acl.owner &= cut.owner;
        acl.other &= cut.other;
        match acl.mask.as_mut() {
            Some(mask) => *mask &= cut.group,
            None => acl.group &= cut.group,
        }
        let mode = (mode & !0o777) | acl.mode_bits();
        if acl.is_minimal() {
            (mode, None)
        } else {
            (mode, Some(acl))
        }
    }
}

/// `value` (the kernel's binary form of a list) with the id of every named user entry
/// passed through `uid` and of every named group entry through `gid`, everything else as
/// it was — also a malformed value, which the caller's validation still refuses.
pub fn map_named_ids(value: &[u8], uid: impl Fn(u32) -> u32, gid: impl Fn(u32) -> u32) -> Vec<u8> {
    let mut out = value.to_vec();
    let Some((_, body)) = out.split_first_chunk_mut::<4>() else {
        return out;
    };
    if body.len() % 8 != 0 {
        return out;
    }
    for entry in body.chunks_exact_mut(8) {
        let tag = u16::from_le_bytes([entry[0], entry[1]]);
        let map: &dyn Fn(u32) -> u32 = match tag {
            TAG_USER => &uid,
            TAG_GROUP => &gid,
            _ => continue,
        };
        let id = u32::from_le_bytes([entry[4], entry[5], entry[6], entry[7]]);
        entry[4..8].copy_from_slice(&map(id).to_le_bytes());
    }
    out
}

/// Named entries by increasing id; EINVAL when one id is named twice.
fn sort_named(list: &mut [(u32, u8)]) -> Result<(), Errno> {
    list.sort_unstable_by_key(|(id, _)| *id);
    if list.windows(2).any(|w| w[0].0 == w[1].0) {
        return Err(Errno::EINVAL);
    }
    Ok(())
}

#[cfg(test)]
#[path = "acl_tests.rs"]
mod tests;
