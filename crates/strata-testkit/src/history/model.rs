//! The sequential model the checker compares histories with: a few fixed directories of a
//! few names each, every name a regular file or absent; files are inodes with a content,
//! a mode and a link count. Each operation of [`Op`] is one step of the model, with the
//! POSIX result Linux gives (`ENOENT`, `EEXIST`, rename over a name, rename between two
//! links of one inode doing nothing).
//!
//! Inodes are the real inode numbers the clients saw. A create whose result is unknown
//! (it may have happened) makes a placeholder inode, bound to a real number the first
//! time an operation observes the name.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A name of the model: `dir` and `name` are indexes into the harness's fixed tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Name {
    pub dir: u8,
    pub name: u8,
}

/// An inode as the model knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum InoKey {
    /// A real inode number a client saw.
    Real(u64),
    /// Made by the create of this history entry, whose result is unknown; no client
    /// has seen its number yet.
    Pending(u32),
}

/// What a file holds: 0 is empty; any other number is the write that wrote it.
pub type Content = u64;

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct File {
    pub content: Content,
    pub mode: u32,
    pub nlink: u32,
}

/// One operation, as a step of the model.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Op {
    /// Create an empty file (`O_CREAT | O_EXCL`, mode 0o644).
    Create {
        at: Name,
    },
    /// Look a name up (an `open`'s path walk).
    Resolve {
        at: Name,
    },
    /// Look a name up and read its attributes.
    Stat {
        at: Name,
    },
    /// Replace the whole content of an inode (open handle: works after an unlink too).
    Write {
        ino: u64,
        content: Content,
    },
    /// Read the whole content of an inode (open handle).
    Read {
        ino: u64,
    },
    /// `rename(from, to)`, replacing `to`.
    Rename {
        from: Name,
        to: Name,
    },
    /// `link(ino, to)`.
    Link {
        ino: u64,
        to: Name,
    },
    Unlink {
        at: Name,
    },
    /// `chmod` of an inode (permission bits).
    Chmod {
        ino: u64,
        mode: u32,
    },
    /// List a directory.
    List {
        dir: u8,
    },
}

impl Op {
    /// Operations that change nothing (their unknown outcomes are dropped).
    pub fn reads_only(&self) -> bool {
        matches!(
            self,
            Op::Resolve { .. } | Op::Stat { .. } | Op::Read { .. } | Op::List { .. }
        )
    }
}

/// An error result, by name (errno numbers differ between systems).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Failure {
    NotFound,
    Exists,
}

/// What an operation returned.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Outcome {
    /// Success, with what it returned.
    Ok(Value),
    /// A definite failure: nothing changed.
    Failed(Failure),
    /// No answer (EIO, a timeout): it may or may not have happened, now or later.
    Unknown,
    /// It never started (the step before it failed: the `open` of a write found the
    /// inode gone); the checker leaves it out.
    Abandoned,
}

/// What a successful operation returned.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Value {
    None,
    /// The inode a create made or a resolve found.
    Ino(u64),
    /// Resolve or stat of an absent name.
    Absent,
    /// Stat: inode, mode bits, link count, and whether the file is empty (every write
    /// writes the same length, so the size says only that) when it is to be checked: a
    /// client's stat also counts its own writes not yet committed, which the model
    /// cannot tell apart, so only a client with nothing buffered checks it.
    Attr {
        ino: u64,
        mode: u32,
        nlink: u32,
        empty: Option<bool>,
    },
    /// Read: the content found.
    Content(Content),
    /// List: the name indexes present, ascending.
    Names(Vec<u8>),
}

/// The model's state.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct State {
    pub names: BTreeMap<Name, InoKey>,
    pub files: BTreeMap<InoKey, File>,
}

/// The mode of a new file.
pub const NEW_MODE: u32 = 0o644;

impl State {
    /// The states `op` can lead to when it returned `outcome` (empty: impossible here).
    /// For an unknown outcome: the state if it happened and changed something.
    pub fn step(&self, op: &Op, outcome: &Outcome, entry: u32) -> Vec<State> {
        match outcome {
            // Happened: the one state that differs. Not happening is the checker's
            // business (it never places the operation).
            Outcome::Unknown => match self.apply(op, entry, None) {
                Some((next, _)) if next != *self => vec![next],
                _ => Vec::new(),
            },
            Outcome::Abandoned => Vec::new(),
            Outcome::Failed(Failure::NotFound) if self.unlinked_inode(op) => vec![self.clone()],
            known => match self.apply(op, entry, Some(known)) {
                Some((next, result)) if &result == known => vec![next],
                _ => Vec::new(),
            },
        }
    }

    /// Run `op` as a real system would (a create takes inode number `new_ino`): the
    /// state after it and its result. For generating histories to check the checker.
    pub fn run(&self, op: &Op, new_ino: u64) -> Option<(State, Outcome)> {
        match op {
            Op::Create { at } if !self.names.contains_key(at) => {
                let outcome = Outcome::Ok(Value::Ino(new_ino));
                let next = self.apply(op, 0, Some(&outcome))?.0;
                Some((next, outcome))
            }
            _ => self.apply(op, 0, None),
        }
    }

    /// Apply `op`; returns the new state and the result the model gives, or None when
    /// `expected` contradicts this state in a way no result can express (an inode the
    /// model does not know, a placeholder that cannot be bound).
    fn apply(&self, op: &Op, entry: u32, expected: Option<&Outcome>) -> Option<(State, Outcome)> {
        let mut s = self.clone();
        let result = match op {
            Op::Create { at } => {
                if s.names.contains_key(at) {
                    Outcome::Failed(Failure::Exists)
                } else {
                    let key = match expected {
                        Some(Outcome::Ok(Value::Ino(ino))) => {
                            if s.files.contains_key(&InoKey::Real(*ino)) {
                                return None; // inode numbers are never reused while known
                            }
                            InoKey::Real(*ino)
                        }
                        _ => InoKey::Pending(entry),
                    };
                    s.names.insert(*at, key);
                    s.files.insert(
                        key,
                        File {
                            content: 0,
                            mode: NEW_MODE,
                            nlink: 1,
                        },
                    );
                    match key {
                        InoKey::Real(ino) => Outcome::Ok(Value::Ino(ino)),
                        InoKey::Pending(_) => Outcome::Ok(Value::None),
                    }
                }
            }
            Op::Resolve { at } => match s.names.get(at).copied() {
                None => Outcome::Ok(Value::Absent),
                Some(key) => {
                    let seen = match expected {
                        Some(Outcome::Ok(Value::Ino(ino))) => *ino,
                        _ => {
                            return s
                                .real(key)
                                .map(|ino| (s.clone(), Outcome::Ok(Value::Ino(ino))));
                        }
                    };
                    s.bind(key, seen)?;
                    Outcome::Ok(Value::Ino(seen))
                }
            },
            Op::Stat { at } => match s.names.get(at).copied() {
                None => Outcome::Ok(Value::Absent),
                Some(key) => {
                    let seen = match expected {
                        Some(Outcome::Ok(Value::Attr { ino, .. })) => *ino,
                        _ => s.real(key)?,
                    };
                    s.bind(key, seen)?;
                    let f = s.files.get(&InoKey::Real(seen))?;
                    let checked = matches!(
                        expected,
                        Some(Outcome::Ok(Value::Attr { empty: Some(_), .. }))
                    );
                    Outcome::Ok(Value::Attr {
                        ino: seen,
                        mode: f.mode,
                        nlink: f.nlink,
                        empty: checked.then_some(f.content == 0),
                    })
                }
            },
            Op::Write { ino, content } => {
                s.files.get_mut(&InoKey::Real(*ino))?.content = *content;
                Outcome::Ok(Value::None)
            }
            Op::Read { ino } => {
                Outcome::Ok(Value::Content(s.files.get(&InoKey::Real(*ino))?.content))
            }
            Op::Chmod { ino, mode } => {
                s.files.get_mut(&InoKey::Real(*ino))?.mode = *mode;
                Outcome::Ok(Value::None)
            }
            Op::Rename { from, to } => s.rename(*from, *to),
            Op::Link { ino, to } => {
                let key = InoKey::Real(*ino);
                let nlink = s.files.get(&key)?.nlink;
                if nlink == 0 {
                    Outcome::Failed(Failure::NotFound)
                } else if s.names.contains_key(to) {
                    Outcome::Failed(Failure::Exists)
                } else {
                    s.names.insert(*to, key);
                    s.files.get_mut(&key)?.nlink += 1;
                    Outcome::Ok(Value::None)
                }
            }
            Op::Unlink { at } => match s.names.remove(at) {
                None => Outcome::Failed(Failure::NotFound),
                Some(key) => {
                    s.drop_link(key);
                    Outcome::Ok(Value::None)
                }
            },
            Op::List { dir } => {
                let names = s
                    .names
                    .keys()
                    .filter(|n| n.dir == *dir)
                    .map(|n| n.name)
                    .collect();
                Outcome::Ok(Value::Names(names))
            }
        };
        Some((s, result))
    }

    /// Whether `op` works on an inode through a handle and that inode has no name left:
    /// Strata does not protect a file another client unlinked while this one had it
    /// open (docs/SEMANTICS.md), so such a handle may find it gone (`ENOENT`).
    fn unlinked_inode(&self, op: &Op) -> bool {
        match op {
            Op::Write { ino, .. } | Op::Read { ino } | Op::Chmod { ino, .. } => self
                .files
                .get(&InoKey::Real(*ino))
                .is_some_and(|f| f.nlink == 0),
            _ => false,
        }
    }

    fn rename(&mut self, from: Name, to: Name) -> Outcome {
        let Some(src) = self.names.get(&from).copied() else {
            return Outcome::Failed(Failure::NotFound);
        };
        // The same name, or two links of one inode: nothing happens.
        if from == to || self.names.get(&to) == Some(&src) {
            return Outcome::Ok(Value::None);
        }
        if let Some(old) = self.names.insert(to, src) {
            self.drop_link(old);
        }
        self.names.remove(&from);
        Outcome::Ok(Value::None)
    }

    fn drop_link(&mut self, key: InoKey) {
        if let Some(f) = self.files.get_mut(&key) {
            f.nlink = f.nlink.saturating_sub(1);
        }
    }

    /// The real number of `key`, if it has one.
    fn real(&self, key: InoKey) -> Option<u64> {
        match key {
            InoKey::Real(ino) => Some(ino),
            InoKey::Pending(_) => None,
        }
    }

    /// Make `key` the real inode `ino`: a placeholder is bound (if `ino` is new to the
    /// model); a real key must already be `ino`.
    fn bind(&mut self, key: InoKey, ino: u64) -> Option<()> {
        match key {
            InoKey::Real(have) => (have == ino).then_some(()),
            InoKey::Pending(_) => {
                let real = InoKey::Real(ino);
                if self.files.contains_key(&real) {
                    return None;
                }
                let file = self.files.remove(&key)?;
                self.files.insert(real, file);
                for v in self.names.values_mut() {
                    if *v == key {
                        *v = real;
                    }
                }
                Some(())
            }
        }
    }
}

/// What an operation is about, to tell which unknown operations could explain a stuck
/// one: its names, its directory, and the inodes it names, finds or returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Touch {
    Name(Name),
    Dir(u8),
    Ino(InoKey),
}

impl Touch {
    fn meets(&self, other: &Touch) -> bool {
        match (self, other) {
            (Touch::Name(n), Touch::Dir(d)) | (Touch::Dir(d), Touch::Name(n)) => n.dir == *d,
            _ => self == other,
        }
    }
}

/// Whether two sets of touches share something.
pub fn related(a: &[Touch], b: &[Touch]) -> bool {
    a.iter().any(|x| b.iter().any(|y| x.meets(y)))
}

impl State {
    /// Whether `op` or its result names an inode this state does not know: it can only
    /// be one an unknown create made, still a placeholder here.
    pub fn names_unknown_inode(&self, op: &Op, outcome: &Outcome) -> bool {
        let unknown = |ino: &u64| !self.files.contains_key(&InoKey::Real(*ino));
        let by_op = match op {
            Op::Write { ino, .. }
            | Op::Read { ino }
            | Op::Chmod { ino, .. }
            | Op::Link { ino, .. } => unknown(ino),
            _ => false,
        };
        let by_result = match outcome {
            Outcome::Ok(Value::Ino(ino)) | Outcome::Ok(Value::Attr { ino, .. }) => unknown(ino),
            _ => false,
        };
        by_op || by_result
    }

    /// What `op` (which returned `outcome`) is about, in this state.
    pub fn touches(&self, op: &Op, outcome: &Outcome) -> Vec<Touch> {
        let mut out = Vec::new();
        let name = |n: &Name, out: &mut Vec<Touch>| {
            out.push(Touch::Name(*n));
            if let Some(key) = self.names.get(n) {
                out.push(Touch::Ino(*key));
            }
        };
        match op {
            Op::Create { at } | Op::Resolve { at } | Op::Stat { at } | Op::Unlink { at } => {
                name(at, &mut out)
            }
            Op::Rename { from, to } => {
                name(from, &mut out);
                name(to, &mut out);
            }
            Op::Link { ino, to } => {
                out.push(Touch::Ino(InoKey::Real(*ino)));
                name(to, &mut out);
            }
            Op::Write { ino, .. } | Op::Read { ino } | Op::Chmod { ino, .. } => {
                out.push(Touch::Ino(InoKey::Real(*ino)))
            }
            Op::List { dir } => out.push(Touch::Dir(*dir)),
        }
        match outcome {
            Outcome::Ok(Value::Ino(ino)) | Outcome::Ok(Value::Attr { ino, .. }) => {
                out.push(Touch::Ino(InoKey::Real(*ino)))
            }
            _ => {}
        }
        out
    }
}
