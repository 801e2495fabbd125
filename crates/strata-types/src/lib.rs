//! Strata's shared vocabulary: inode numbers, file types, attributes, slice records,
//! errno values, size constants, and secrets that redact themselves. Plain data only — no
//! I/O, no async, no dependency but serde — so every other crate can use it.

use std::fmt;

pub mod hex;
pub mod metrics;
mod protection;
mod secret;

pub use protection::{FS_APPEND_FL, FS_IMMUTABLE_FL, Protection, Retention, RetentionMode};
pub use secret::{MetaUrl, Secret, redact_url, userinfo_bounds};

/// Size of one chunk: a file is cut into chunks of this many bytes.
pub const CHUNK_SIZE: u64 = 64 << 20;
/// Default size of one stored block (object) of a slice.
pub const DEFAULT_BLOCK_SIZE: u32 = 4 << 20;
/// Longest file name, as on Linux (ENAMETOOLONG beyond).
pub const MAX_NAME_LEN: usize = 255;
/// Longest symlink target, as on Linux (ENAMETOOLONG beyond).
pub const MAX_SYMLINK_LEN: usize = 4096;
/// Number of chunks a file may have: chunk indexes are `u32` in the metadata keys.
pub const MAX_CHUNKS: u64 = 1 << 32;
/// Largest file length Strata accepts (EFBIG beyond): what the key format can address,
/// 2^32 chunks of 64 MiB = 2^58 bytes (256 PiB).
pub const MAX_FILE_SIZE: u64 = MAX_CHUNKS * CHUNK_SIZE;

/// An inode number. The root directory is 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Ino(pub u64);

impl Ino {
    /// The volume's root directory.
    pub const ROOT: Ino = Ino(1);
    /// The trash directory (`.trash` at the root), outside the normal inode range.
    pub const TRASH: Ino = Ino(0x7FFF_FFFF_1000_0000);
    /// Inodes at or above this value are reserved for internal use.
    pub const FIRST_RESERVED: u64 = 0x7FFF_FFFF_0000_0000;

    /// True for the trash root and anything else in the reserved range.
    pub fn is_reserved(self) -> bool {
        self.0 >= Self::FIRST_RESERVED
    }
}

impl fmt::Display for Ino {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// The type of an inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FileType {
    Regular,
    Directory,
    Symlink,
    Fifo,
    Socket,
    CharDevice,
    BlockDevice,
}

impl FileType {
    /// Stable one-byte code used in persistent records (see docs/FORMAT.md).
    pub fn code(self) -> u8 {
        match self {
            FileType::Regular => 1,
            FileType::Directory => 2,
            FileType::Symlink => 3,
            FileType::Fifo => 4,
            FileType::Socket => 5,
            FileType::CharDevice => 6,
            FileType::BlockDevice => 7,
        }
    }

    /// Inverse of [`FileType::code`].
    pub fn from_code(code: u8) -> Option<FileType> {
        Some(match code {
            1 => FileType::Regular,
            2 => FileType::Directory,
            3 => FileType::Symlink,
            4 => FileType::Fifo,
            5 => FileType::Socket,
            6 => FileType::CharDevice,
            7 => FileType::BlockDevice,
            _ => return None,
        })
    }

    /// The `S_IFMT` bits of this type.
    pub fn mode_bits(self) -> u32 {
        match self {
            FileType::Regular => 0o100000,
            FileType::Directory => 0o040000,
            FileType::Symlink => 0o120000,
            FileType::Fifo => 0o010000,
            FileType::Socket => 0o140000,
            FileType::CharDevice => 0o020000,
            FileType::BlockDevice => 0o060000,
        }
    }

    /// The type named by the `S_IFMT` bits of `mode`.
    pub fn from_mode(mode: u32) -> Option<FileType> {
        Some(match mode & 0o170000 {
            0o100000 | 0 => FileType::Regular,
            0o040000 => FileType::Directory,
            0o120000 => FileType::Symlink,
            0o010000 => FileType::Fifo,
            0o140000 => FileType::Socket,
            0o020000 => FileType::CharDevice,
            0o060000 => FileType::BlockDevice,
            _ => return None,
        })
    }
}

/// A point in time, in nanoseconds since the Unix epoch.
pub type Nanos = i64;

/// Attributes of an inode, as `stat(2)` reports them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attr {
    pub kind: FileType,
    /// Permission bits including setuid, setgid and sticky (`mode & 0o7777`).
    pub mode: u16,
    pub uid: u32,
    pub gid: u32,
    pub rdev: u32,
    pub atime: Nanos,
    pub mtime: Nanos,
    pub ctime: Nanos,
    pub nlink: u32,
    /// File length in bytes (for symlinks: the target's length; directories: 4096).
    pub length: u64,
    /// The parent directory; 0 for a file with several hard links.
    pub parent: Ino,
    /// The inode may have extended attributes; when false it has none, so a front end
    /// may answer a getxattr with ENODATA from these attributes (while they are fresh).
    pub xattrs: bool,
    /// Immutable or append-only flags and object lock (docs/SEMANTICS.md).
    pub protection: Protection,
}

impl Attr {
    /// `st_mode` as the kernel wants it: type bits plus permission bits.
    pub fn st_mode(&self) -> u32 {
        self.kind.mode_bits() | u32::from(self.mode & 0o7777)
    }

    /// Number of 512-byte blocks, the way `st_blocks` counts them (4 KiB granularity).
    pub fn blocks(&self) -> u64 {
        align_4k(self.length) / 512
    }

    pub fn is_dir(&self) -> bool {
        self.kind == FileType::Directory
    }
}

/// Space accounting unit: lengths are charged rounded up to 4 KiB.
pub fn align_4k(length: u64) -> u64 {
    length.div_ceil(4096) * 4096
}

/// One slice record in a chunk's slice list: bytes `[off, off+len)` of slice `id`
/// (whose total stored size is `size`) appear at `pos` within the chunk.
/// A slice with `id == 0` is a hole: it reads as zeros.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Slice {
    pub pos: u32,
    pub id: u64,
    pub size: u32,
    pub off: u32,
    pub len: u32,
}

impl Slice {
    /// Encoded size of one slice record.
    pub const ENCODED_LEN: usize = 24;

    /// A hole covering `[pos, pos+len)`.
    pub fn hole(pos: u32, len: u32) -> Slice {
        Slice {
            pos,
            id: 0,
            size: len,
            off: 0,
            len,
        }
    }

    /// Holes carry `size == len` and `off == 0`; other slices are returned unchanged.
    pub fn normalized(self) -> Slice {
        if self.id == 0 {
            Slice::hole(self.pos, self.len)
        } else {
            self
        }
    }

    /// End of the range this record covers within the chunk.
    pub fn end(&self) -> u64 {
        u64::from(self.pos) + u64::from(self.len)
    }
}

/// Resolve a chunk's slice list into what a reader sees in `[start, end)`: a sorted list
/// of non-overlapping pieces covering the whole range, later slices winning over earlier
/// ones, uncovered ranges returned as holes (`id == 0`). Each piece keeps its slice's id
/// and size, with `off` pointing at the piece's first byte inside the slice.
pub fn build_read_plan(slices: &[Slice], start: u32, end: u32) -> Vec<Slice> {
    let mut pieces: Vec<Slice> = Vec::new();
    if start >= end {
        return pieces;
    }
    pieces.push(Slice::hole(start, end - start));
    for s in slices {
        let (lo, hi) = (
            u64::from(s.pos).max(u64::from(start)),
            s.end().min(u64::from(end)),
        );
        if lo >= hi {
            continue;
        }
        // Both bounds are within [start, end), so they fit in u32.
        let (lo, hi) = (lo as u32, hi as u32);
        let cover = Slice {
            pos: lo,
            id: s.id,
            size: s.size,
            off: s.off + (lo - s.pos),
            len: hi - lo,
        };
        let first = pieces.partition_point(|p| p.end() <= u64::from(lo));
        let mut replaced = Vec::with_capacity(3);
        let mut last = first;
        while last < pieces.len() && pieces[last].pos < hi {
            let p = pieces[last];
            if p.pos < lo {
                replaced.push(
                    Slice {
                        len: lo - p.pos,
                        ..p
                    }
                    .normalized(),
                );
            }
            if p.end() > u64::from(hi) {
                let cut = hi - p.pos;
                let tail_off = if p.id == 0 { 0 } else { p.off + cut };
                replaced.push(
                    Slice {
                        pos: hi,
                        off: tail_off,
                        len: p.len - cut,
                        ..p
                    }
                    .normalized(),
                );
            }
            last += 1;
        }
        let at = replaced
            .iter()
            .position(|p| p.pos > lo)
            .unwrap_or(replaced.len());
        replaced.insert(at, cover);
        pieces.splice(first..last, replaced);
    }
    pieces
}

/// A Linux errno value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Errno(pub i32);

impl Errno {
    pub const EPERM: Errno = Errno(1);
    pub const ENOENT: Errno = Errno(2);
    pub const EINTR: Errno = Errno(4);
    pub const E2BIG: Errno = Errno(7);
    pub const EIO: Errno = Errno(5);
    pub const EBADF: Errno = Errno(9);
    pub const EAGAIN: Errno = Errno(11);
    pub const EACCES: Errno = Errno(13);
    pub const EBUSY: Errno = Errno(16);
    pub const EEXIST: Errno = Errno(17);
    pub const EXDEV: Errno = Errno(18);
    pub const ENODEV: Errno = Errno(19);
    pub const ENOTDIR: Errno = Errno(20);
    pub const EISDIR: Errno = Errno(21);
    pub const EINVAL: Errno = Errno(22);
    pub const ENOTTY: Errno = Errno(25);
    pub const EFBIG: Errno = Errno(27);
    pub const ENOSPC: Errno = Errno(28);
    pub const EROFS: Errno = Errno(30);
    pub const EMLINK: Errno = Errno(31);
    pub const ERANGE: Errno = Errno(34);
    pub const EDEADLK: Errno = Errno(35);
    pub const ENAMETOOLONG: Errno = Errno(36);
    pub const ENOLCK: Errno = Errno(37);
    pub const ENOSYS: Errno = Errno(38);
    pub const ENOTEMPTY: Errno = Errno(39);
    pub const ELOOP: Errno = Errno(40);
    pub const ENODATA: Errno = Errno(61);
    pub const EPROTO: Errno = Errno(71);
    pub const EOVERFLOW: Errno = Errno(75);
    pub const EOPNOTSUPP: Errno = Errno(95);
    pub const ETIMEDOUT: Errno = Errno(110);
    pub const EDQUOT: Errno = Errno(122);
    /// Stale handle: here, a compare-and-swap rename found another inode.
    pub const ESTALE: Errno = Errno(116);

    /// The symbolic name, for messages and logs.
    pub fn name(self) -> &'static str {
        match self.0 {
            1 => "EPERM",
            2 => "ENOENT",
            4 => "EINTR",
            7 => "E2BIG",
            5 => "EIO",
            9 => "EBADF",
            11 => "EAGAIN",
            13 => "EACCES",
            16 => "EBUSY",
            17 => "EEXIST",
            18 => "EXDEV",
            19 => "ENODEV",
            20 => "ENOTDIR",
            21 => "EISDIR",
            22 => "EINVAL",
            25 => "ENOTTY",
            27 => "EFBIG",
            28 => "ENOSPC",
            30 => "EROFS",
            31 => "EMLINK",
            34 => "ERANGE",
            35 => "EDEADLK",
            36 => "ENAMETOOLONG",
            37 => "ENOLCK",
            38 => "ENOSYS",
            39 => "ENOTEMPTY",
            40 => "ELOOP",
            61 => "ENODATA",
            71 => "EPROTO",
            95 => "EOPNOTSUPP",
            110 => "ETIMEDOUT",
            116 => "ESTALE",
            122 => "EDQUOT",
            _ => "E?",
        }
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_type_codes_round_trip() {
        for kind in [
            FileType::Regular,
            FileType::Directory,
            FileType::Symlink,
            FileType::Fifo,
            FileType::Socket,
            FileType::CharDevice,
            FileType::BlockDevice,
        ] {
            assert_eq!(FileType::from_code(kind.code()), Some(kind));
            assert_eq!(FileType::from_mode(kind.mode_bits() | 0o644), Some(kind));
        }
        assert_eq!(FileType::from_code(0), None);
        assert_eq!(FileType::from_code(8), None);
    }

    #[test]
    fn space_is_charged_in_4k_units() {
        assert_eq!(align_4k(0), 0);
        assert_eq!(align_4k(1), 4096);
        assert_eq!(align_4k(4096), 4096);
        assert_eq!(align_4k(4097), 8192);
    }

    #[test]
    fn read_plan_later_slices_win_and_gaps_are_holes() {
        let a = Slice {
            pos: 0,
            id: 1,
            size: 100,
            off: 0,
            len: 100,
        };
        let b = Slice {
            pos: 20,
            id: 2,
            size: 10,
            off: 0,
            len: 10,
        };
        let plan = build_read_plan(&[a, b], 0, 120);
        assert_eq!(
            plan,
            vec![
                Slice {
                    pos: 0,
                    id: 1,
                    size: 100,
                    off: 0,
                    len: 20
                },
                Slice {
                    pos: 20,
                    id: 2,
                    size: 10,
                    off: 0,
                    len: 10
                },
                Slice {
                    pos: 30,
                    id: 1,
                    size: 100,
                    off: 30,
                    len: 70
                },
                Slice::hole(100, 20),
            ]
        );
        // Only the requested window, offsets shifted accordingly.
        let window = build_read_plan(&[a, b], 25, 35);
        assert_eq!(
            window,
            vec![
                Slice {
                    pos: 25,
                    id: 2,
                    size: 10,
                    off: 5,
                    len: 5
                },
                Slice {
                    pos: 30,
                    id: 1,
                    size: 100,
                    off: 30,
                    len: 5
                },
            ]
        );
        // An earlier slice fully covered disappears.
        let c = Slice {
            pos: 0,
            id: 3,
            size: 200,
            off: 0,
            len: 200,
        };
        assert_eq!(build_read_plan(&[a, b, c], 0, 200), vec![c]);
    }

    #[test]
    fn read_plan_matches_a_byte_model() {
        // Pseudo-random overlapping slices checked against painting a byte array.
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = |m: u32| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % u64::from(m)) as u32
        };
        for _ in 0..200 {
            let mut model = vec![(0u64, 0u32); 256];
            let mut slices = Vec::new();
            for id in 1..=8u64 {
                let pos = next(200);
                let len = 1 + next(56);
                let off = next(10);
                let s = Slice {
                    pos,
                    id,
                    size: off + len,
                    off,
                    len,
                };
                for i in 0..len {
                    model[(pos + i) as usize] = (id, off + i);
                }
                slices.push(s);
            }
            let plan = build_read_plan(&slices, 0, 256);
            let mut painted = vec![(0u64, 0u32); 256];
            let mut expect_pos = 0;
            for p in &plan {
                assert_eq!(p.pos, expect_pos, "pieces must be contiguous");
                expect_pos = p.pos + p.len;
                for i in 0..p.len {
                    painted[(p.pos + i) as usize] =
                        if p.id == 0 { (0, 0) } else { (p.id, p.off + i) };
                }
            }
            assert_eq!(expect_pos, 256);
            let model: Vec<_> = model
                .iter()
                .map(|&(id, o)| if id == 0 { (0, 0) } else { (id, o) })
                .collect();
            assert_eq!(painted, model);
        }
    }

    #[test]
    fn reserved_inodes() {
        assert!(Ino::TRASH.is_reserved());
        assert!(!Ino::ROOT.is_reserved());
    }
}
