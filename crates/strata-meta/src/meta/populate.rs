//! A generated namespace, as dump lines for [`Meta::load_lines`](super::Meta::load_lines):
//! N files in a chosen shape, made at the engine's speed (blind batched puts, as a load),
//! so volumes of millions to hundreds of millions of files can be built for measurement
//! (`strata bench populate`). Files have lengths but no data: they read as zeros (holes),
//! and no object is written.
//!
//! The files are spread over leaf directories of at most `per_dir` files each; leaf `i`
//! sits at the path spelled by `i`'s digits in base `fanout`, `levels` directories below
//! the top directory (named after the shape). Lines come in the order a dump writes them,
//! each directory's record after its children (its usage is their sum), and only the
//! open path is held in memory.

use std::collections::VecDeque;

use strata_types::{FileType, Ino};

use super::dump::{DUMP_VERSION, DumpLine, DumpNode, Raw};
use super::{NEXT_INODE, NEXT_SESSION, NEXT_SLICE, space_of};
use crate::error::{MetaError, Result};
use crate::format::Format;

/// How the files are laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PopulateShape {
    /// Every file in one directory.
    Flat,
    /// Leaf directories of `per_dir` files, grouped `per_dir` to a directory, as few
    /// levels as that takes.
    Wide,
    /// Leaf directories of `per_dir` files, each `depth` directories below the top.
    Deep { depth: u32 },
}

impl PopulateShape {
    /// The top directory's name (under the root), which the files go below.
    pub fn top_name(self) -> &'static str {
        match self {
            PopulateShape::Flat => "flat",
            PopulateShape::Wide => "wide",
            PopulateShape::Deep { .. } => "deep",
        }
    }
}

/// What to generate.
#[derive(Clone, Debug)]
pub struct PopulateSpec {
    pub files: u64,
    pub shape: PopulateShape,
    /// Files per leaf directory (and directories per directory for `Wide`).
    pub per_dir: u64,
    /// File lengths: all `min` when equal, else log-uniform in `min..=max`.
    pub size_min: u64,
    pub size_max: u64,
    /// Picks the lengths (the same seed gives the same volume).
    pub seed: u64,
}

/// The layout a spec makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PopulateLayout {
    pub leaves: u64,
    pub levels: u32,
    pub fanout: u64,
    /// Directories made, the top one included.
    pub dirs: u64,
}

impl PopulateSpec {
    /// Where the files go; an error for a spec that makes no sense.
    pub fn layout(&self) -> Result<PopulateLayout> {
        let invalid = |why: &str| Err(MetaError::Invalid(why.into()));
        if self.per_dir == 0 {
            return invalid("files per directory must be at least 1");
        }
        if self.size_min > self.size_max {
            return invalid("the smallest file size is above the largest");
        }
        let (leaves, levels, fanout) = match self.shape {
            PopulateShape::Flat => (1, 0, 1),
            PopulateShape::Wide => {
                let leaves = self.files.div_ceil(self.per_dir).max(1);
                let fanout = self.per_dir.max(2);
                (leaves, levels_for(leaves, fanout), fanout)
            }
            PopulateShape::Deep { depth } => {
                if depth == 0 {
                    return invalid("the depth must be at least 1");
                }
                let leaves = self.files.div_ceil(self.per_dir).max(1);
                let fanout = (2..).find(|f| reach(*f, depth) >= leaves).unwrap_or(2);
                (leaves, depth, fanout)
            }
        };
        let dirs = 1
            + (1..=levels)
                .map(|level| leaves.div_ceil(reach(fanout, levels - level)))
                .sum::<u64>();
        Ok(PopulateLayout {
            leaves,
            levels,
            fanout,
            dirs,
        })
    }

    /// Length of file `index`, from a hash of it and the seed: log-uniform between the
    /// bounds (a power-of-two band picked uniformly, then a length in it uniformly).
    fn size_of(&self, index: u64) -> u64 {
        let (min, max) = (self.size_min, self.size_max);
        if min == max {
            return min;
        }
        let hash = mix(self.seed ^ mix(index));
        let (low_band, high_band) = (bit_length(min), bit_length(max));
        let band =
            low_band + u32::try_from(hash % u64::from(high_band - low_band + 1)).unwrap_or(0);
        let band_start = if band == 0 { 0 } else { 1u64 << (band - 1) };
        let band_len = band_start.max(1);
        let size = band_start.saturating_add(mix(hash) % band_len);
        size.clamp(min, max)
    }
}

/// Bits needed to write `n` (0 for 0).
fn bit_length(n: u64) -> u32 {
    u64::BITS - n.leading_zeros()
}

/// SplitMix64's finaliser: a well-spread hash of `x`.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// `fanout` to the power `levels`, saturating.
fn reach(fanout: u64, levels: u32) -> u64 {
    fanout.saturating_pow(levels)
}

/// Fewest levels under which `fanout`-way directories hold `leaves` leaves.
fn levels_for(leaves: u64, fanout: u64) -> u32 {
    (1..64).find(|l| reach(fanout, *l) >= leaves).unwrap_or(64)
}

/// A directory whose children are being written.
#[derive(Debug)]
struct OpenDir {
    ino: u64,
    parent: u64,
    /// Usage of its direct children (bytes, inodes) and its subdirectories.
    bytes: i64,
    inodes: i64,
    subdirs: u32,
}

/// The generator: an iterator of dump lines.
#[derive(Debug)]
pub struct Population {
    spec: PopulateSpec,
    layout: PopulateLayout,
    now: i64,
    pending: VecDeque<DumpLine>,
    /// The open path: root, the top directory, then one per level.
    open: Vec<OpenDir>,
    /// Digits of the current leaf's path.
    path: Vec<u64>,
    next_ino: u64,
    next_leaf: u64,
    next_file: u64,
    leaf_end: u64,
    file_width: usize,
    dir_width: usize,
    nodes: u64,
    entries: u64,
    done: bool,
}

impl Population {
    /// The lines of a new volume with `format`'s settings holding `spec`'s files.
    pub fn new(spec: PopulateSpec, format: &Format, now: i64) -> Result<Population> {
        let layout = spec.layout()?;
        let format = serde_json::to_value(format)
            .map_err(|e| MetaError::Invalid(format!("format record: {e}")))?;
        let counters = [(NEXT_INODE, 2), (NEXT_SLICE, 1), (NEXT_SESSION, 1)]
            .into_iter()
            .map(|(name, value)| (name.to_string(), value))
            .collect();
        let mut population = Population {
            file_width: digits(spec.files.saturating_sub(1)),
            dir_width: digits(layout.fanout.saturating_sub(1)),
            spec,
            layout,
            now,
            pending: VecDeque::new(),
            open: Vec::new(),
            path: Vec::new(),
            next_ino: 2,
            next_leaf: 0,
            next_file: 0,
            leaf_end: 0,
            nodes: 0,
            entries: 0,
            done: false,
        };
        population.pending.push_back(DumpLine::Header {
            strata_dump: DUMP_VERSION,
            format,
            counters,
            subdir: None,
        });
        let trash = population.dir_node(Ino::TRASH.0, Ino::ROOT.0, 0o555, 0, 0, 0);
        population.push_node(trash);
        population.open.push(OpenDir {
            ino: Ino::ROOT.0,
            parent: Ino::ROOT.0,
            bytes: 0,
            inodes: 0,
            subdirs: 0,
        });
        let top = population.spec.shape.top_name().as_bytes().to_vec();
        population.open_dir(top);
        Ok(population)
    }

    /// Directories this population makes (the top one included).
    pub fn layout(&self) -> PopulateLayout {
        self.layout
    }

    fn push_node(&mut self, node: DumpNode) {
        self.nodes += 1;
        self.pending.push_back(DumpLine::Node(node));
    }

    fn dir_node(
        &self,
        ino: u64,
        parent: u64,
        mode: u16,
        bytes: i64,
        inodes: i64,
        subdirs: u32,
    ) -> DumpNode {
        DumpNode {
            nlink: 2 + subdirs,
            length: 4096,
            usage: Some([bytes, inodes]),
            ..self.node(ino, FileType::Directory, mode, parent)
        }
    }

    /// A record owned by root, made now, with one link and no length.
    fn node(&self, ino: u64, kind: FileType, mode: u16, parent: u64) -> DumpNode {
        DumpNode {
            ino,
            kind: kind.code(),
            mode,
            uid: 0,
            gid: 0,
            rdev: 0,
            atime: self.now,
            mtime: self.now,
            ctime: self.now,
            nlink: 1,
            length: 0,
            parent,
            target: None,
            xattrs: Vec::new(),
            chunks: Vec::new(),
            usage: None,
            protection: None,
        }
    }

    /// Write the entry of a new directory under the innermost open one, and open it.
    fn open_dir(&mut self, name: Vec<u8>) {
        let ino = self.take_ino();
        let Some(parent) = self.open.last_mut() else {
            return;
        };
        parent.subdirs += 1;
        parent.bytes += space_of(FileType::Directory, 4096);
        parent.inodes += 1;
        let parent = parent.ino;
        self.entries += 1;
        self.pending.push_back(DumpLine::Entry {
            parent,
            name: Raw::Text(String::from_utf8_lossy(&name).into_owned()),
            ino,
            kind: FileType::Directory.code(),
        });
        self.open.push(OpenDir {
            ino,
            parent,
            bytes: 0,
            inodes: 0,
            subdirs: 0,
        });
    }

    /// Write the record of the innermost open directory, now that its children are known.
    fn close_dir(&mut self) {
        let Some(dir) = self.open.pop() else { return };
        let mode = if dir.ino == Ino::ROOT.0 { 0o777 } else { 0o755 };
        let node = self.dir_node(
            dir.ino,
            dir.parent,
            mode,
            dir.bytes,
            dir.inodes,
            dir.subdirs,
        );
        self.push_node(node);
    }

    fn take_ino(&mut self) -> u64 {
        let ino = self.next_ino;
        self.next_ino += 1;
        ino
    }

    /// Move to the next leaf: close the directories its path leaves, open the new ones.
    /// False when every leaf is done (everything closed, the end line written).
    fn next_leaf(&mut self) -> bool {
        if self.next_leaf >= self.layout.leaves {
            while !self.open.is_empty() {
                self.close_dir();
            }
            self.pending.push_back(DumpLine::End {
                nodes: self.nodes,
                entries: self.entries,
            });
            return false;
        }
        let leaf = self.next_leaf;
        self.next_leaf += 1;
        let levels = usize::try_from(self.layout.levels).unwrap_or(0);
        let mut digits = vec![0u64; levels];
        let mut rest = leaf;
        for digit in digits.iter_mut().rev() {
            *digit = rest % self.layout.fanout;
            rest /= self.layout.fanout;
        }
        let shared = if leaf == 0 {
            0
        } else {
            digits
                .iter()
                .zip(&self.path)
                .take_while(|(a, b)| a == b)
                .count()
        };
        // The open path is root, top, then one directory per level.
        for _ in shared..self.path.len() {
            self.close_dir();
        }
        for digit in &digits[shared..] {
            let name = format!("d{digit:0width$}", width = self.dir_width);
            self.open_dir(name.into_bytes());
        }
        self.path = digits;
        self.next_file = leaf.saturating_mul(self.spec.per_dir);
        self.leaf_end = match self.spec.shape {
            PopulateShape::Flat => self.spec.files,
            _ => self
                .next_file
                .saturating_add(self.spec.per_dir)
                .min(self.spec.files),
        };
        true
    }

    /// Write the entry and record of the next file of the current leaf.
    fn next_file(&mut self) {
        let index = self.next_file;
        self.next_file += 1;
        let ino = self.take_ino();
        let length = self.spec.size_of(index);
        let Some(dir) = self.open.last_mut() else {
            return;
        };
        dir.bytes += space_of(FileType::Regular, length);
        dir.inodes += 1;
        let parent = dir.ino;
        self.entries += 1;
        self.pending.push_back(DumpLine::Entry {
            parent,
            name: Raw::Text(format!("f{index:0width$}", width = self.file_width)),
            ino,
            kind: FileType::Regular.code(),
        });
        let node = DumpNode {
            length,
            ..self.node(ino, FileType::Regular, 0o644, parent)
        };
        self.push_node(node);
    }
}

/// Decimal digits of `n`.
fn digits(n: u64) -> usize {
    n.checked_ilog10()
        .map_or(1, |d| usize::try_from(d).unwrap_or(19) + 1)
}

impl Iterator for Population {
    type Item = Result<DumpLine>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(line) = self.pending.pop_front() {
                return Some(Ok(line));
            }
            if self.done {
                return None;
            }
            if self.next_file < self.leaf_end {
                self.next_file();
            } else if !self.next_leaf() {
                self.done = true;
            }
        }
    }
}

#[cfg(test)]
#[path = "populate_tests.rs"]
mod tests;
