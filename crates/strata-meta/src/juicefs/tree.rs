//! The namespace of a JuiceFS dump, read node by node: a directory's entries are
//! emitted as they are read (each file's node right after its first entry, as the
//! loader wants for hard links), the directory's own node after them (with the usage of
//! its children, which the dump does not carry). Slice references are counted across
//! the whole tree, and slices named more than once get a reference-count line at the end.

use std::collections::{HashMap, HashSet};

use serde::Deserialize;
use serde::de::{DeserializeSeed, MapAccess, Visitor};
use strata_types::FileType;

use super::unescape;
use crate::error::{MetaError, Result};
use crate::meta::{DumpLine, DumpNode, Raw, space_of};

/// `attr` of a JuiceFS dump node.
#[derive(Clone, Copy, Debug, Default, Deserialize)]
#[serde(default)]
struct Attr {
    inode: u64,
    #[serde(rename = "type")]
    kind: Kind,
    mode: u16,
    uid: u32,
    gid: u32,
    rdev: u32,
    atime: i64,
    mtime: i64,
    ctime: i64,
    atimensec: i64,
    mtimensec: i64,
    ctimensec: i64,
    nlink: u32,
    length: u64,
}

#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum Kind {
    #[default]
    Regular,
    Directory,
    Symlink,
    Fifo,
    Socket,
    Chardev,
    Blockdev,
}

impl Kind {
    fn file_type(self) -> FileType {
        match self {
            Kind::Regular => FileType::Regular,
            Kind::Directory => FileType::Directory,
            Kind::Symlink => FileType::Symlink,
            Kind::Fifo => FileType::Fifo,
            Kind::Socket => FileType::Socket,
            Kind::Chardev => FileType::CharDevice,
            Kind::Blockdev => FileType::BlockDevice,
        }
    }
}

#[derive(Debug, Deserialize)]
struct Xattr {
    name: String,
    value: String,
}

#[derive(Debug, Deserialize)]
struct Chunk {
    index: u32,
    #[serde(default)]
    slices: Vec<JuiceSlice>,
}

#[derive(Clone, Copy, Debug, Default, Deserialize)]
#[serde(default)]
struct JuiceSlice {
    id: u64,
    pos: u32,
    size: u32,
    off: u32,
    len: u32,
}

/// Turns nodes into dump lines and keeps the counts.
pub(super) struct Converter<'e> {
    emit: &'e mut dyn FnMut(DumpLine) -> Result<()>,
    /// Hard-linked inodes whose node is out already.
    linked: HashSet<u64>,
    /// Records naming each (slice id, size).
    refs: HashMap<(u64, u32), i64>,
    nodes: u64,
    entries: u64,
    files: u64,
    directories: u64,
}

impl<'e> Converter<'e> {
    pub(super) fn new(emit: &'e mut dyn FnMut(DumpLine) -> Result<()>) -> Converter<'e> {
        Converter {
            emit,
            linked: HashSet::new(),
            refs: HashMap::new(),
            nodes: 0,
            entries: 0,
            files: 0,
            directories: 0,
        }
    }

    pub(super) fn emit(&mut self, line: DumpLine) -> Result<()> {
        match &line {
            DumpLine::Node(_) => self.nodes += 1,
            DumpLine::Entry { .. } => self.entries += 1,
            _ => {}
        }
        (self.emit)(line)
    }

    /// Reference counts of shared slices and the end line; (files, directories).
    pub(super) fn finish(&mut self) -> Result<(u64, u64)> {
        let mut shared: Vec<((u64, u32), i64)> = self
            .refs
            .iter()
            .filter(|(_, n)| **n > 1)
            .map(|(k, n)| (*k, *n))
            .collect();
        shared.sort_unstable();
        for ((id, size), refs) in shared {
            self.emit(DumpLine::SliceRef { id, size, refs })?;
        }
        let (nodes, entries) = (self.nodes, self.entries);
        self.emit(DumpLine::End { nodes, entries })?;
        Ok((self.files, self.directories))
    }

    /// A node read whole, as a dump node under `parent`.
    fn node_of(&self, node: Parsed, parent: u64) -> Result<DumpNode> {
        let attr = node.attr.ok_or_else(|| bad("a node without attr"))?;
        let kind = attr.kind.file_type();
        let ns = |s: i64, n: i64| s.saturating_mul(1_000_000_000).saturating_add(n);
        let target = node.symlink.as_deref().map(unescape).transpose()?;
        let length = match &target {
            Some(t) => u64::try_from(t.len()).unwrap_or(u64::MAX),
            None => attr.length,
        };
        let mut xattrs = Vec::with_capacity(node.xattrs.len());
        for x in &node.xattrs {
            xattrs.push((Raw::of(&unescape(&x.name)?), Raw::of(&unescape(&x.value)?)));
        }
        let mut chunks = Vec::with_capacity(node.chunks.len());
        for c in &node.chunks {
            let records: Vec<[u64; 5]> = c.slices.iter().map(record).collect();
            chunks.push((c.index, records));
        }
        let shared = kind != FileType::Directory && attr.nlink > 1;
        Ok(DumpNode {
            ino: attr.inode,
            kind: kind.code(),
            mode: attr.mode & 0o7777,
            uid: attr.uid,
            gid: attr.gid,
            rdev: attr.rdev,
            atime: ns(attr.atime, attr.atimensec),
            mtime: ns(attr.mtime, attr.mtimensec),
            ctime: ns(attr.ctime, attr.ctimensec),
            nlink: attr.nlink.max(1),
            length,
            parent: if shared { 0 } else { parent },
            target: target.map(|t| Raw::of(&t)),
            xattrs,
            chunks,
            usage: None,
            protection: None,
        })
    }

    /// Count the slice records of a node that goes out (once per inode).
    fn count_refs(&mut self, node: &DumpNode) {
        for (_, records) in &node.chunks {
            for r in records.iter().filter(|r| r[1] != 0) {
                let size = u32::try_from(r[2]).unwrap_or(u32::MAX);
                *self.refs.entry((r[1], size)).or_default() += 1;
            }
        }
    }
}

/// A slice record as Strata stores it (holes carry size = len).
fn record(s: &JuiceSlice) -> [u64; 5] {
    if s.id == 0 {
        return [u64::from(s.pos), 0, u64::from(s.len), 0, u64::from(s.len)];
    }
    [
        u64::from(s.pos),
        s.id,
        u64::from(s.size),
        u64::from(s.off),
        u64::from(s.len),
    ]
}

fn bad(what: &str) -> MetaError {
    MetaError::Invalid(format!("the JuiceFS dump: {what}"))
}

/// A node's fields as read (entries are handled as they stream by).
#[derive(Default)]
struct Parsed {
    attr: Option<Attr>,
    symlink: Option<String>,
    xattrs: Vec<Xattr>,
    chunks: Vec<Chunk>,
    /// Directories: usage of the children (bytes, inodes).
    usage: [i64; 2],
    /// Directories: subdirectories among the children.
    subdirs: u32,
}

/// What a finished child tells its directory: its inode, type and space, and (a file)
/// its node, which the directory emits after the entry.
pub(super) struct Child {
    ino: u64,
    kind: FileType,
    space: i64,
    node: Option<DumpNode>,
}

/// One node of the tree under directory `parent`.
pub(super) struct NodeSeed<'c, 'e> {
    pub conv: &'c mut Converter<'e>,
    pub parent: u64,
}

impl<'de> DeserializeSeed<'de> for NodeSeed<'_, '_> {
    type Value = Child;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Child, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for NodeSeed<'_, '_> {
    type Value = Child;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JuiceFS dump node (attr, entries, chunks, ...)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Child, A::Error> {
        use serde::de::Error;
        let mut parsed = Parsed::default();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "attr" => parsed.attr = Some(map.next_value()?),
                "symlink" => parsed.symlink = Some(map.next_value()?),
                "xattrs" => {
                    parsed.xattrs = map.next_value::<Option<Vec<Xattr>>>()?.unwrap_or_default()
                }
                "chunks" => {
                    parsed.chunks = map.next_value::<Option<Vec<Chunk>>>()?.unwrap_or_default()
                }
                "entries" => {
                    let ino = parsed
                        .attr
                        .map(|a| a.inode)
                        .ok_or_else(|| A::Error::custom("entries before attr"))?;
                    (parsed.usage, parsed.subdirs) = map.next_value_seed(EntriesSeed {
                        conv: &mut *self.conv,
                        dir: ino,
                    })?;
                }
                _ => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        let (usage, subdirs) = (parsed.usage, parsed.subdirs);
        let node = self
            .conv
            .node_of(parsed, self.parent)
            .map_err(A::Error::custom)?;
        let kind = FileType::from_code(node.kind).unwrap_or(FileType::Regular);
        let child = Child {
            ino: node.ino,
            kind,
            space: space_of(kind, node.length),
            node: None,
        };
        if kind == FileType::Directory {
            self.conv.directories += 1;
            // Two links and one per subdirectory, whatever the dump says (the trash's
            // count in JuiceFS follows other rules).
            let node = DumpNode {
                usage: Some(usage),
                nlink: subdirs.saturating_add(2),
                ..node
            };
            self.conv
                .emit(DumpLine::Node(node))
                .map_err(A::Error::custom)?;
            return Ok(child);
        }
        Ok(Child {
            node: Some(node),
            ..child
        })
    }
}

/// The `entries` of directory `dir`; the usage of its children and how many are
/// directories.
struct EntriesSeed<'c, 'e> {
    conv: &'c mut Converter<'e>,
    dir: u64,
}

impl<'de> DeserializeSeed<'de> for EntriesSeed<'_, '_> {
    type Value = ([i64; 2], u32);
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for EntriesSeed<'_, '_> {
    type Value = ([i64; 2], u32);

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a directory's entries (name: node)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        use serde::de::Error;
        let mut usage = [0i64; 2];
        let mut subdirs = 0u32;
        while let Some(name) = map.next_key::<String>()? {
            let child = map.next_value_seed(NodeSeed {
                conv: &mut *self.conv,
                parent: self.dir,
            })?;
            let name = unescape(&name).map_err(A::Error::custom)?;
            self.conv
                .emit(DumpLine::Entry {
                    parent: self.dir,
                    name: Raw::of(&name),
                    ino: child.ino,
                    kind: child.kind.code(),
                })
                .map_err(A::Error::custom)?;
            usage[0] = usage[0].saturating_add(child.space);
            usage[1] += 1;
            if child.kind == FileType::Directory {
                subdirs = subdirs.saturating_add(1);
            }
            let Some(node) = child.node else { continue };
            let first = node.parent != 0 || self.conv.linked.insert(node.ino);
            if first {
                self.conv.files += 1;
                self.conv.count_refs(&node);
                self.conv
                    .emit(DumpLine::Node(node))
                    .map_err(A::Error::custom)?;
            }
        }
        Ok((usage, subdirs))
    }
}
