//! Encoding of metadata values (version 1, see docs/FORMAT.md). Every decoder checks the
//! shape of what it reads and reports a corrupt value with the key it came from.

use strata_types::{Attr, FileType, Ino, Nanos, Protection, Retention, RetentionMode, Slice};

use crate::error::{MetaError, Result};

/// Version byte at the start of an inode core record.
pub const INODE_CORE_VERSION: u8 = 1;
const INODE_CORE_LEN: usize = 25;
/// Bytes the list ids add to a core record (flags bit 2; metadata version 5).
const INODE_CORE_ACL_TAIL: usize = 8;
/// Bytes protections add to a core record (flags bit 3; metadata version 11): a byte
/// of [`protection_bit`]s and the retention's end (i64 ns, 0 without one).
const INODE_CORE_PROTECTION_TAIL: usize = 9;

/// Bits of a core record's protection byte.
pub mod protection_bit {
    pub const IMMUTABLE: u8 = 1;
    pub const APPEND_ONLY: u8 = 2;
    pub const LEGAL_HOLD: u8 = 4;
    pub const GOVERNANCE: u8 = 8;
    pub const COMPLIANCE: u8 = 16;
}

/// Slots of the inode field record (`A ino T`), each a little-endian i64.
pub mod slot {
    pub const ATIME: usize = 0;
    pub const MTIME: usize = 1;
    pub const CTIME: usize = 2;
    pub const NLINK: usize = 3;
    pub const LENGTH: usize = 4;
    pub const COUNT: usize = 5;
}

/// Slots of a directory usage record (`U ino`).
pub mod usage_slot {
    pub const BYTES: usize = 0;
    pub const INODES: usize = 1;
    pub const COUNT: usize = 2;
}

/// The parts of an inode's attributes that rarely change (`A ino I`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InodeCore {
    pub kind: FileType,
    pub mode: u16,
    pub uid: u32,
    pub gid: u32,
    pub rdev: u32,
    pub parent: Ino,
    /// An `O_TMPFILE` inode not linked yet: `linkat` may give it its first name (flags bit
    /// 0; Linux's `I_LINKABLE`).
    pub linkable: bool,
    /// The inode may have extended attributes (flags bit 1): set by the first setxattr,
    /// never cleared. When clear it has none, so a getxattr needs no engine read (kept
    /// from metadata version 3 on; see docs/FORMAT.md).
    pub xattrs: bool,
    /// Id of the access control list's `R` record, 0 for none (then the mode alone
    /// decides). Owner, mask and other entries live in `mode`.
    pub access_acl: u32,
    /// Id of a directory's default list's `R` record, 0 for none.
    pub default_acl: u32,
    /// Immutable, append-only, object lock (flags bit 3 and the record's tail).
    pub protection: Protection,
}

/// Bit of the core record's flags byte: [`InodeCore::linkable`].
const FLAG_LINKABLE: u8 = 1;
/// Bit of the core record's flags byte: [`InodeCore::xattrs`].
const FLAG_XATTRS: u8 = 2;
/// Bit of the core record's flags byte: the record ends with two list ids.
const FLAG_ACL: u8 = 4;
/// Bit of the core record's flags byte: the record ends with protections.
const FLAG_PROTECTED: u8 = 8;

impl InodeCore {
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(INODE_CORE_LEN);
        v.push(INODE_CORE_VERSION);
        v.push(self.kind.code());
        v.extend_from_slice(&self.mode.to_le_bytes());
        v.extend_from_slice(&self.uid.to_le_bytes());
        v.extend_from_slice(&self.gid.to_le_bytes());
        v.extend_from_slice(&self.rdev.to_le_bytes());
        v.extend_from_slice(&self.parent.0.to_le_bytes());
        let mut flags = 0;
        if self.linkable {
            flags |= FLAG_LINKABLE;
        }
        if self.xattrs {
            flags |= FLAG_XATTRS;
        }
        let acl = self.access_acl != 0 || self.default_acl != 0;
        if acl {
            flags |= FLAG_ACL;
        }
        let protected = !self.protection.is_none();
        if protected {
            flags |= FLAG_PROTECTED;
        }
        v.push(flags);
        if acl {
            v.extend_from_slice(&self.access_acl.to_le_bytes());
            v.extend_from_slice(&self.default_acl.to_le_bytes());
        }
        if protected {
            encode_protection(&mut v, &self.protection);
        }
        v
    }

    pub fn decode(key: &[u8], v: &[u8]) -> Result<InodeCore> {
        let flags = v.get(24).copied().unwrap_or(0);
        let acl = flags & FLAG_ACL != 0;
        let protected = flags & FLAG_PROTECTED != 0;
        let mut want = INODE_CORE_LEN;
        if acl {
            want += INODE_CORE_ACL_TAIL;
        }
        let protection_at = want;
        if protected {
            want += INODE_CORE_PROTECTION_TAIL;
        }
        if v.len() != want {
            return Err(MetaError::corrupt(
                key,
                format!("inode record of {} bytes", v.len()),
            ));
        }
        if v[0] != INODE_CORE_VERSION {
            return Err(MetaError::corrupt(
                key,
                format!("inode record version {}", v[0]),
            ));
        }
        let kind = FileType::from_code(v[1])
            .ok_or_else(|| MetaError::corrupt(key, format!("file type code {}", v[1])))?;
        let u32_at = |i: usize| u32::from_le_bytes([v[i], v[i + 1], v[i + 2], v[i + 3]]);
        let mut parent = [0u8; 8];
        parent.copy_from_slice(&v[16..24]);
        Ok(InodeCore {
            kind,
            mode: u16::from_le_bytes([v[2], v[3]]),
            uid: u32_at(4),
            gid: u32_at(8),
            rdev: u32_at(12),
            parent: Ino(u64::from_le_bytes(parent)),
            linkable: v[24] & FLAG_LINKABLE != 0,
            xattrs: v[24] & FLAG_XATTRS != 0,
            access_acl: if acl { u32_at(25) } else { 0 },
            default_acl: if acl { u32_at(29) } else { 0 },
            protection: if protected {
                decode_protection(key, &v[protection_at..])?
            } else {
                Protection::default()
            },
        })
    }
}

fn encode_protection(v: &mut Vec<u8>, p: &Protection) {
    use protection_bit::*;
    let mut bits = 0;
    for (on, bit) in [
        (p.immutable, IMMUTABLE),
        (p.append_only, APPEND_ONLY),
        (p.legal_hold, LEGAL_HOLD),
    ] {
        if on {
            bits |= bit;
        }
    }
    bits |= match p.retention.map(|r| r.mode) {
        Some(RetentionMode::Governance) => GOVERNANCE,
        Some(RetentionMode::Compliance) => COMPLIANCE,
        None => 0,
    };
    v.push(bits);
    v.extend_from_slice(&p.retention.map_or(0, |r| r.until).to_le_bytes());
}

/// The 9-byte protection tail of a core record.
fn decode_protection(key: &[u8], tail: &[u8]) -> Result<Protection> {
    use protection_bit::*;
    let bits = tail[0];
    let mut until = [0u8; 8];
    until.copy_from_slice(&tail[1..9]);
    let until = i64::from_le_bytes(until);
    let known = IMMUTABLE | APPEND_ONLY | LEGAL_HOLD | GOVERNANCE | COMPLIANCE;
    let mode = match (bits & GOVERNANCE != 0, bits & COMPLIANCE != 0) {
        (false, false) => None,
        (true, false) => Some(RetentionMode::Governance),
        (false, true) => Some(RetentionMode::Compliance),
        (true, true) => return Err(MetaError::corrupt(key, "both retention modes")),
    };
    if bits & !known != 0 {
        return Err(MetaError::corrupt(
            key,
            format!("protection bits {bits:#x}"),
        ));
    }
    Ok(Protection {
        immutable: bits & IMMUTABLE != 0,
        append_only: bits & APPEND_ONLY != 0,
        legal_hold: bits & LEGAL_HOLD != 0,
        retention: mode.map(|mode| Retention { mode, until }),
    })
}

/// The frequently changing attributes (`A ino T`): a field record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InodeFields {
    pub atime: Nanos,
    pub mtime: Nanos,
    pub ctime: Nanos,
    pub nlink: u32,
    pub length: u64,
}

impl InodeFields {
    pub fn encode(&self) -> Vec<u8> {
        encode_slots(&[
            self.atime,
            self.mtime,
            self.ctime,
            i64::from(self.nlink),
            i64::try_from(self.length).unwrap_or(i64::MAX),
        ])
    }

    pub fn decode(key: &[u8], v: &[u8]) -> Result<InodeFields> {
        let s = decode_slots(key, v, slot::COUNT)?;
        let nlink = u32::try_from(s[slot::NLINK])
            .map_err(|_| MetaError::corrupt(key, format!("link count {}", s[slot::NLINK])))?;
        let length = u64::try_from(s[slot::LENGTH])
            .map_err(|_| MetaError::corrupt(key, format!("length {}", s[slot::LENGTH])))?;
        Ok(InodeFields {
            atime: s[slot::ATIME],
            mtime: s[slot::MTIME],
            ctime: s[slot::CTIME],
            nlink,
            length,
        })
    }
}

/// An inode as stored: core plus fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inode {
    pub ino: Ino,
    pub core: InodeCore,
    pub fields: InodeFields,
}

impl Inode {
    pub fn attr(&self) -> Attr {
        Attr {
            kind: self.core.kind,
            mode: self.core.mode,
            uid: self.core.uid,
            gid: self.core.gid,
            rdev: self.core.rdev,
            atime: self.fields.atime,
            mtime: self.fields.mtime,
            ctime: self.fields.ctime,
            nlink: self.fields.nlink,
            length: self.fields.length,
            parent: self.core.parent,
            // The access control lists are extended attributes too.
            xattrs: self.core.xattrs || self.core.access_acl != 0 || self.core.default_acl != 0,
            protection: self.core.protection,
        }
    }
}

/// Encode i64 slots, little-endian.
pub fn encode_slots(values: &[i64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Decode exactly `count` i64 slots.
pub fn decode_slots(key: &[u8], v: &[u8], count: usize) -> Result<Vec<i64>> {
    if v.len() != count * 8 {
        return Err(MetaError::corrupt(
            key,
            format!("field record of {} bytes, expected {}", v.len(), count * 8),
        ));
    }
    Ok(v.chunks_exact(8)
        .map(|c| {
            let mut raw = [0u8; 8];
            raw.copy_from_slice(c);
            i64::from_le_bytes(raw)
        })
        .collect())
}

/// Decode a one-slot counter (absent = 0).
pub fn decode_counter(key: &[u8], v: Option<&[u8]>) -> Result<i64> {
    match v {
        None => Ok(0),
        Some(v) => Ok(decode_slots(key, v, 1)?[0]),
    }
}

/// A directory entry's value: type code and inode.
pub fn encode_dentry(kind: FileType, ino: Ino) -> Vec<u8> {
    let mut v = Vec::with_capacity(9);
    v.push(kind.code());
    v.extend_from_slice(&ino.0.to_le_bytes());
    v
}

pub fn decode_dentry(key: &[u8], v: &[u8]) -> Result<(FileType, Ino)> {
    if v.len() != 9 {
        return Err(MetaError::corrupt(
            key,
            format!("entry of {} bytes", v.len()),
        ));
    }
    let kind = FileType::from_code(v[0])
        .ok_or_else(|| MetaError::corrupt(key, format!("file type code {}", v[0])))?;
    let mut raw = [0u8; 8];
    raw.copy_from_slice(&v[1..9]);
    Ok((kind, Ino(u64::from_le_bytes(raw))))
}

/// A chunk's slice list: 24-byte records, little-endian (pos u32, id u64, size u32,
/// off u32, len u32).
pub fn encode_slices(slices: &[Slice]) -> Vec<u8> {
    let mut v = Vec::with_capacity(slices.len() * Slice::ENCODED_LEN);
    for s in slices {
        push_slice(&mut v, s);
    }
    v
}

pub fn push_slice(v: &mut Vec<u8>, s: &Slice) {
    v.extend_from_slice(&s.pos.to_le_bytes());
    v.extend_from_slice(&s.id.to_le_bytes());
    v.extend_from_slice(&s.size.to_le_bytes());
    v.extend_from_slice(&s.off.to_le_bytes());
    v.extend_from_slice(&s.len.to_le_bytes());
}

pub fn decode_slices(key: &[u8], v: &[u8]) -> Result<Vec<Slice>> {
    if !v.len().is_multiple_of(Slice::ENCODED_LEN) {
        return Err(MetaError::corrupt(
            key,
            format!("slice list of {} bytes", v.len()),
        ));
    }
    let mut out = Vec::with_capacity(v.len() / Slice::ENCODED_LEN);
    for r in v.chunks_exact(Slice::ENCODED_LEN) {
        let u32_at = |i: usize| u32::from_le_bytes([r[i], r[i + 1], r[i + 2], r[i + 3]]);
        let mut id = [0u8; 8];
        id.copy_from_slice(&r[4..12]);
        let s = Slice {
            pos: u32_at(0),
            id: u64::from_le_bytes(id),
            size: u32_at(12),
            off: u32_at(16),
            len: u32_at(20),
        };
        let fits = u64::from(s.off) + u64::from(s.len) <= u64::from(s.size)
            && s.end() <= strata_types::CHUNK_SIZE;
        if !fits {
            return Err(MetaError::corrupt(
                key,
                format!("slice record out of range: {s:?}"),
            ));
        }
        out.push(s);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inode_records_round_trip_and_reject_garbage() {
        let core = InodeCore {
            kind: FileType::Symlink,
            mode: 0o4755,
            uid: 1000,
            gid: 100,
            rdev: 7,
            parent: Ino(42),
            linkable: true,
            xattrs: true,
            access_acl: 0,
            default_acl: 0,
            protection: Protection::default(),
        };
        assert_eq!(core.encode().len(), INODE_CORE_LEN);
        assert_eq!(InodeCore::decode(b"k", &core.encode()).unwrap(), core);
        for (access_acl, default_acl) in [(7, 0), (0, u32::MAX), (1, 2)] {
            let with_acl = InodeCore {
                access_acl,
                default_acl,
                ..core.clone()
            };
            let bytes = with_acl.encode();
            assert_eq!(bytes.len(), INODE_CORE_LEN + INODE_CORE_ACL_TAIL);
            assert_eq!(InodeCore::decode(b"k", &bytes).unwrap(), with_acl);
            assert!(InodeCore::decode(b"k", &bytes[..INODE_CORE_LEN]).is_err());
        }
        let fields = InodeFields {
            atime: -5,
            mtime: 1,
            ctime: 2,
            nlink: 3,
            length: 1 << 40,
        };
        assert_eq!(InodeFields::decode(b"k", &fields.encode()).unwrap(), fields);
        let err = InodeCore::decode(b"Akey", &[1, 2, 3]).unwrap_err();
        assert!(err.to_string().contains("Akey"), "{err}");
        let mut bad_kind = core.encode();
        bad_kind[1] = 99;
        assert!(InodeCore::decode(b"k", &bad_kind).is_err());
        assert!(InodeFields::decode(b"k", &[0; 39]).is_err());
    }

    #[test]
    fn protections_round_trip_with_and_without_lists() {
        let base = InodeCore {
            kind: FileType::Regular,
            mode: 0o644,
            uid: 1,
            gid: 2,
            rdev: 0,
            parent: Ino(1),
            linkable: false,
            xattrs: false,
            access_acl: 0,
            default_acl: 0,
            protection: Protection::default(),
        };
        let protections = [
            Protection {
                immutable: true,
                ..Protection::default()
            },
            Protection {
                append_only: true,
                legal_hold: true,
                ..Protection::default()
            },
            Protection {
                retention: Some(Retention {
                    mode: RetentionMode::Compliance,
                    until: 1_900_000_000_000_000_000,
                }),
                ..Protection::default()
            },
        ];
        for protection in protections {
            for acl in [0, 9] {
                let core = InodeCore {
                    protection,
                    access_acl: acl,
                    ..base.clone()
                };
                let bytes = core.encode();
                let tails = INODE_CORE_PROTECTION_TAIL + if acl != 0 { 8 } else { 0 };
                assert_eq!(bytes.len(), INODE_CORE_LEN + tails);
                assert_eq!(InodeCore::decode(b"k", &bytes).unwrap(), core);
                assert!(InodeCore::decode(b"k", &bytes[..bytes.len() - 1]).is_err());
            }
        }
        let mut both_modes = InodeCore {
            protection: protections[2],
            ..base
        }
        .encode();
        both_modes[INODE_CORE_LEN] |= protection_bit::GOVERNANCE;
        let err = InodeCore::decode(b"k", &both_modes).unwrap_err();
        assert!(err.to_string().contains("both retention modes"), "{err}");
    }

    #[test]
    fn slices_round_trip_and_reject_out_of_range() {
        let s = vec![
            Slice {
                pos: 0,
                id: 9,
                size: 100,
                off: 10,
                len: 90,
            },
            Slice::hole(100, 5),
        ];
        let enc = encode_slices(&s);
        assert_eq!(enc.len(), 48);
        assert_eq!(decode_slices(b"k", &enc).unwrap(), s);
        assert!(decode_slices(b"k", &enc[..47]).is_err());
        let bad = encode_slices(&[Slice {
            pos: 0,
            id: 1,
            size: 10,
            off: 5,
            len: 6,
        }]);
        assert!(decode_slices(b"k", &bad).is_err());
    }

    proptest::proptest! {
        /// Whatever bytes an engine returns, decoding succeeds or fails with an error naming
        /// the key; it never panics.
        #[test]
        fn decoders_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
            let key = b"KEY-UNDER-TEST";
            let names_key = |e: MetaError| e.to_string().contains("KEY-UNDER-TEST");
            proptest::prop_assert!(InodeCore::decode(key, &bytes).err().is_none_or(names_key));
            proptest::prop_assert!(InodeFields::decode(key, &bytes).err().is_none_or(names_key));
            proptest::prop_assert!(decode_slices(key, &bytes).err().is_none_or(names_key));
            proptest::prop_assert!(decode_dentry(key, &bytes).err().is_none_or(names_key));
            proptest::prop_assert!(decode_counter(key, Some(&bytes)).err().is_none_or(names_key));
            proptest::prop_assert!(crate::format::Format::decode(key, &bytes).err().is_none_or(names_key));
        }
    }

    #[test]
    fn dentries_round_trip() {
        let v = encode_dentry(FileType::Directory, Ino(77));
        assert_eq!(
            decode_dentry(b"k", &v).unwrap(),
            (FileType::Directory, Ino(77))
        );
        assert!(decode_dentry(b"k", &v[..8]).is_err());
    }
}
