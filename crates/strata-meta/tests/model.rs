//! Model-based test: random sequences of namespace operations run against `Meta` (memory
//! engine) and against a plain in-memory model of a POSIX tree. After every step both must
//! agree on the errno and on the whole tree: names, types, link counts, hard-link identity
//! and per-directory usage. Failures found here become named regression tests below.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed step fails the test

use std::collections::BTreeMap;

use proptest::prelude::*;
use strata_meta::conformance::{MemoryStore, TestStore, test_format, test_options};
use strata_meta::{Ctx, Meta, RenameFlags};
use strata_types::{Errno, FileType, Ino};

const NAMES: [&str; 4] = ["a", "b", "c", "d"];

#[derive(Clone, Debug)]
enum Op {
    Create {
        dir: usize,
        name: usize,
    },
    Mkdir {
        dir: usize,
        name: usize,
    },
    Symlink {
        dir: usize,
        name: usize,
    },
    Unlink {
        dir: usize,
        name: usize,
    },
    Rmdir {
        dir: usize,
        name: usize,
    },
    Link {
        dir: usize,
        name: usize,
        to_dir: usize,
        to_name: usize,
    },
    Rename {
        dir: usize,
        name: usize,
        to_dir: usize,
        to_name: usize,
        flags: u32,
    },
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let d = 0..8usize;
    let n = 0..NAMES.len();
    prop_oneof![
        3 => (d.clone(), n.clone()).prop_map(|(dir, name)| Op::Create { dir, name }),
        3 => (d.clone(), n.clone()).prop_map(|(dir, name)| Op::Mkdir { dir, name }),
        1 => (d.clone(), n.clone()).prop_map(|(dir, name)| Op::Symlink { dir, name }),
        2 => (d.clone(), n.clone()).prop_map(|(dir, name)| Op::Unlink { dir, name }),
        2 => (d.clone(), n.clone()).prop_map(|(dir, name)| Op::Rmdir { dir, name }),
        2 => (d.clone(), n.clone(), d.clone(), n.clone())
            .prop_map(|(dir, name, to_dir, to_name)| Op::Link { dir, name, to_dir, to_name }),
        4 => (d.clone(), n.clone(), d, n, 0..3u32)
            .prop_map(|(dir, name, to_dir, to_name, flags)| Op::Rename { dir, name, to_dir, to_name, flags }),
    ]
}

#[derive(Clone, Debug, PartialEq)]
enum Node {
    File,
    Symlink,
    Dir {
        children: BTreeMap<String, usize>,
        parent: usize,
    },
}

/// The model: nodes by id, node 0 is the root.
#[derive(Clone, Debug)]
struct Model {
    nodes: Vec<Node>,
}

type Outcome = Result<(), Errno>;

impl Model {
    fn new() -> Model {
        Model {
            nodes: vec![Node::Dir {
                children: BTreeMap::new(),
                parent: 0,
            }],
        }
    }

    /// Live directories in a stable order (depth-first by name), root first.
    fn dirs(&self) -> Vec<usize> {
        let mut out = vec![0];
        let mut i = 0;
        while i < out.len() {
            if let Node::Dir { children, .. } = &self.nodes[out[i]] {
                for &c in children.values() {
                    if matches!(self.nodes[c], Node::Dir { .. }) {
                        out.push(c);
                    }
                }
            }
            i += 1;
        }
        out
    }

    fn children(&self, dir: usize) -> &BTreeMap<String, usize> {
        match &self.nodes[dir] {
            Node::Dir { children, .. } => children,
            _ => unreachable!("not a directory"),
        }
    }

    fn children_mut(&mut self, dir: usize) -> &mut BTreeMap<String, usize> {
        match &mut self.nodes[dir] {
            Node::Dir { children, .. } => children,
            _ => unreachable!("not a directory"),
        }
    }

    fn is_dir(&self, node: usize) -> bool {
        matches!(self.nodes[node], Node::Dir { .. })
    }

    fn set_parent(&mut self, node: usize, to: usize) {
        if let Node::Dir { parent, .. } = &mut self.nodes[node] {
            *parent = to;
        }
    }

    fn is_ancestor(&self, anc: usize, mut node: usize) -> bool {
        loop {
            if node == anc {
                return true;
            }
            match &self.nodes[node] {
                Node::Dir { parent, .. } if node != 0 => node = *parent,
                _ => return false,
            }
        }
    }

    fn add(&mut self, dir: usize, name: &str, node: Node) -> Outcome {
        if self.children(dir).contains_key(name) {
            return Err(Errno::EEXIST);
        }
        self.nodes.push(node);
        let id = self.nodes.len() - 1;
        self.children_mut(dir).insert(name.into(), id);
        Ok(())
    }

    fn apply(&mut self, op: &Op, dirs: &[usize]) -> Outcome {
        let dir_of = |i: usize| dirs[i % dirs.len()];
        match *op {
            Op::Create { dir, name } => self.add(dir_of(dir), NAMES[name], Node::File),
            Op::Symlink { dir, name } => self.add(dir_of(dir), NAMES[name], Node::Symlink),
            Op::Mkdir { dir, name } => {
                let d = dir_of(dir);
                self.add(
                    d,
                    NAMES[name],
                    Node::Dir {
                        children: BTreeMap::new(),
                        parent: d,
                    },
                )
            }
            Op::Unlink { dir, name } => {
                let d = dir_of(dir);
                let Some(&c) = self.children(d).get(NAMES[name]) else {
                    return Err(Errno::ENOENT);
                };
                if self.is_dir(c) {
                    return Err(Errno::EISDIR);
                }
                self.children_mut(d).remove(NAMES[name]);
                Ok(())
            }
            Op::Rmdir { dir, name } => {
                let d = dir_of(dir);
                let Some(&c) = self.children(d).get(NAMES[name]) else {
                    return Err(Errno::ENOENT);
                };
                if !self.is_dir(c) {
                    return Err(Errno::ENOTDIR);
                }
                if !self.children(c).is_empty() {
                    return Err(Errno::ENOTEMPTY);
                }
                self.children_mut(d).remove(NAMES[name]);
                Ok(())
            }
            Op::Link {
                dir,
                name,
                to_dir,
                to_name,
            } => {
                let (d, t) = (dir_of(dir), dir_of(to_dir));
                let Some(&c) = self.children(d).get(NAMES[name]) else {
                    return Err(Errno::ENOENT);
                };
                if self.is_dir(c) {
                    return Err(Errno::EPERM);
                }
                if self.children(t).contains_key(NAMES[to_name]) {
                    return Err(Errno::EEXIST);
                }
                self.children_mut(t).insert(NAMES[to_name].into(), c);
                Ok(())
            }
            Op::Rename {
                dir,
                name,
                to_dir,
                to_name,
                flags,
            } => self.rename(
                dir_of(dir),
                NAMES[name],
                dir_of(to_dir),
                NAMES[to_name],
                flags,
            ),
        }
    }

    fn rename(&mut self, d: usize, name: &str, t: usize, to: &str, flags: u32) -> Outcome {
        let (noreplace, exchange) = (flags == 1, flags == 2);
        let Some(&src) = self.children(d).get(name) else {
            return Err(Errno::ENOENT);
        };
        let dst = self.children(t).get(to).copied();
        if d == t && name == to {
            return if noreplace {
                Err(Errno::EEXIST)
            } else {
                Ok(())
            };
        }
        if self.is_dir(src) && d != t && self.is_ancestor(src, t) {
            return Err(Errno::EINVAL);
        }
        if let Some(dst) = dst
            && exchange
            && self.is_dir(dst)
            && d != t
            && self.is_ancestor(dst, d)
        {
            return Err(Errno::EINVAL);
        }
        match dst {
            None if exchange => Err(Errno::ENOENT),
            None => {
                self.children_mut(d).remove(name);
                self.children_mut(t).insert(to.into(), src);
                self.set_parent(src, t);
                Ok(())
            }
            Some(_) if noreplace => Err(Errno::EEXIST),
            Some(dst) if dst == src => Ok(()),
            Some(dst) if exchange => {
                self.children_mut(d).insert(name.into(), dst);
                self.children_mut(t).insert(to.into(), src);
                self.set_parent(dst, d);
                self.set_parent(src, t);
                Ok(())
            }
            Some(dst) => {
                match (self.is_dir(src), self.is_dir(dst)) {
                    (true, false) => return Err(Errno::ENOTDIR),
                    (false, true) => return Err(Errno::EISDIR),
                    (true, true) if !self.children(dst).is_empty() => return Err(Errno::ENOTEMPTY),
                    _ => {}
                }
                self.children_mut(d).remove(name);
                self.children_mut(t).insert(to.into(), src);
                self.set_parent(src, t);
                Ok(())
            }
        }
    }

    /// Link count of a node as POSIX defines it.
    fn nlink(&self, node: usize) -> u32 {
        match &self.nodes[node] {
            Node::Dir { children, .. } => {
                2 + children.values().filter(|&&c| self.is_dir(c)).count() as u32
            }
            _ => self
                .dirs()
                .iter()
                .map(|&d| self.children(d).values().filter(|&&c| c == node).count() as u32)
                .sum(),
        }
    }
}

struct Harness {
    meta: Meta,
    model: Model,
    /// Meta inode of each model directory node.
    inos: BTreeMap<usize, Ino>,
}

impl Harness {
    async fn new(trash_days: u32) -> Harness {
        let store = MemoryStore::create();
        let meta = Meta::new(store.client(), test_options());
        meta.format(&test_format(trash_days), false).await.unwrap();
        meta.load().await.unwrap();
        Harness {
            meta,
            model: Model::new(),
            inos: BTreeMap::from([(0, Ino::ROOT)]),
        }
    }

    async fn step(&mut self, op: &Op) {
        let dirs = self.model.dirs();
        let ino = |i: usize| self.inos[&dirs[i % dirs.len()]];
        let root = Ctx::root();
        let n = |i: usize| NAMES[i].as_bytes();
        let actual: Outcome = match *op {
            Op::Create { dir, name } => self
                .meta
                .mknod(&root, ino(dir), n(name), FileType::Regular, 0o644, 0)
                .await
                .map(drop),
            Op::Symlink { dir, name } => self
                .meta
                .symlink(&root, ino(dir), n(name), b"target")
                .await
                .map(drop),
            Op::Mkdir { dir, name } => self
                .meta
                .mkdir(&root, ino(dir), n(name), 0o755)
                .await
                .map(drop),
            Op::Unlink { dir, name } => self.meta.unlink(&root, ino(dir), n(name)).await,
            Op::Rmdir { dir, name } => self.meta.rmdir(&root, ino(dir), n(name)).await,
            Op::Link {
                dir,
                name,
                to_dir,
                to_name,
            } => match self.meta.lookup(&root, ino(dir), n(name)).await {
                Ok(src) => self
                    .meta
                    .link(&root, src.ino, ino(to_dir), n(to_name))
                    .await
                    .map(drop),
                Err(e) => Err(e),
            },
            Op::Rename {
                dir,
                name,
                to_dir,
                to_name,
                flags,
            } => {
                let flags = RenameFlags::from_bits(flags).unwrap();
                self.meta
                    .rename(&root, ino(dir), n(name), ino(to_dir), n(to_name), flags)
                    .await
            }
        }
        .map_err(|e| e.errno());
        let expected = self.model.apply(op, &dirs);
        assert_eq!(actual, expected, "outcome of {op:?}");
        self.check_tree().await;
    }

    /// Walk both trees and compare them entry by entry.
    async fn check_tree(&mut self) {
        let mut seen: BTreeMap<usize, Ino> = BTreeMap::new();
        let mut stack = vec![(0usize, Ino::ROOT)];
        self.inos = BTreeMap::new();
        while let Some((node, ino)) = stack.pop() {
            self.inos.insert(node, ino);
            let entries = self
                .meta
                .readdir(ino, None, usize::MAX, true)
                .await
                .unwrap();
            let children = self.model.children(node).clone();
            let names: Vec<&[u8]> = entries.iter().map(|e| e.name.as_slice()).collect();
            let expected: Vec<&[u8]> = children.keys().map(|k| k.as_bytes()).collect();
            assert_eq!(names, expected, "entries of directory node {node}");
            let attr = self.meta.getattr(ino).await.unwrap();
            assert_eq!(
                attr.nlink,
                self.model.nlink(node),
                "link count of directory node {node}"
            );
            assert_eq!(
                self.meta.dir_usage(ino).await.unwrap().1,
                entries.len() as i64,
                "usage of node {node}"
            );
            for e in entries {
                let child = children[std::str::from_utf8(&e.name).unwrap()];
                let attr = e.attr.unwrap();
                if let Some(prev) = seen.insert(child, e.ino) {
                    assert_eq!(prev, e.ino, "hard links of one node share an inode");
                }
                match &self.model.nodes[child] {
                    Node::Dir { .. } => {
                        assert_eq!(attr.kind, FileType::Directory);
                        assert_eq!(attr.parent, ino, "parent of a directory");
                        stack.push((child, e.ino));
                    }
                    Node::File => assert_eq!(attr.kind, FileType::Regular),
                    Node::Symlink => assert_eq!(attr.kind, FileType::Symlink),
                }
                if !self.model.is_dir(child) {
                    assert_eq!(
                        attr.nlink,
                        self.model.nlink(child),
                        "link count of node {child}"
                    );
                }
            }
        }
        let distinct: std::collections::BTreeSet<Ino> = seen.values().copied().collect();
        assert_eq!(
            distinct.len(),
            seen.len(),
            "distinct nodes have distinct inodes"
        );
    }
}

fn run(ops: &[Op], trash_days: u32) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut h = Harness::new(trash_days).await;
        for op in ops {
            h.step(op).await;
        }
    });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn namespace_matches_model(ops in prop::collection::vec(op_strategy(), 1..40), trash in any::<bool>()) {
        run(&ops, u32::from(trash));
    }
}

#[test]
fn regression_exchange_directory_with_file_across_parents() {
    run(
        &[
            Op::Mkdir { dir: 0, name: 0 },
            Op::Create { dir: 0, name: 1 },
            Op::Mkdir { dir: 1, name: 2 },
            Op::Rename {
                dir: 1,
                name: 2,
                to_dir: 0,
                to_name: 1,
                flags: 2,
            },
        ],
        0,
    );
}

#[test]
fn regression_hard_link_survives_rename_and_unlink() {
    run(
        &[
            Op::Create { dir: 0, name: 0 },
            Op::Mkdir { dir: 0, name: 1 },
            Op::Link {
                dir: 0,
                name: 0,
                to_dir: 1,
                to_name: 0,
            },
            Op::Rename {
                dir: 0,
                name: 0,
                to_dir: 1,
                to_name: 2,
                flags: 0,
            },
            Op::Unlink { dir: 1, name: 0 },
        ],
        1,
    );
}
