//! Model-based test of the VFS: random sequences of opens, unflushed writes, reads,
//! truncates, renames, unlinks and closes, checked step by step against a plain model
//! (names → inodes → bytes). At the end every file is read back through a second client,
//! which sees only what was closed (close-to-open).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;
use strata_chunk::ChunkOptions;
use strata_chunk::ChunkStore;
use strata_chunk::cache::memory::MemoryCache;
use strata_meta::conformance::{MemoryStore, TestStore, test_format, test_options};
use strata_meta::{Ctx, Meta, SetAttr};
use strata_object::backend::Backend;
use strata_object::stack::{StackOptions, build};
use strata_types::Ino;
use strata_vfs::{Vfs, VfsOptions};

const NAMES: [&str; 3] = ["a", "b", "c"];
/// Small blocks and a small chunk span of interest so writes cross block borders often.
const BLOCK: u32 = 4096;
const SPAN: u64 = 40_000;

#[derive(Clone, Debug)]
enum Op {
    Open(usize),
    Write {
        handle: usize,
        off: u64,
        len: usize,
        seed: u8,
    },
    Read {
        handle: usize,
        off: u64,
        len: u32,
    },
    Truncate {
        name: usize,
        size: u64,
    },
    Rename {
        from: usize,
        to: usize,
    },
    Unlink(usize),
    Close(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..NAMES.len()).prop_map(Op::Open),
        6 => (0..4usize, 0..SPAN, 1..9000usize, any::<u8>()).prop_map(|(handle, off, len, seed)| Op::Write { handle, off, len, seed }),
        4 => (0..4usize, 0..SPAN + 5000, 1..12_000u32).prop_map(|(handle, off, len)| Op::Read { handle, off, len }),
        1 => (0..NAMES.len(), 0..SPAN).prop_map(|(name, size)| Op::Truncate { name, size }),
        1 => (0..NAMES.len(), 0..NAMES.len()).prop_map(|(from, to)| Op::Rename { from, to }),
        1 => (0..NAMES.len()).prop_map(Op::Unlink),
        2 => (0..4usize).prop_map(Op::Close),
    ]
}

#[derive(Default)]
struct Model {
    files: Vec<Vec<u8>>,
    names: BTreeMap<&'static str, usize>,
    /// Open handles: (vfs handle, model file).
    handles: Vec<(u64, usize)>,
}

fn data(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) | 1)
        .collect()
}

async fn step(vfs: &Vfs, m: &mut Model, op: &Op) {
    let ctx = Ctx::root();
    match *op {
        Op::Open(n) => {
            let name = NAMES[n];
            if let Some(&file) = m.names.get(name) {
                let entry = vfs.lookup(&ctx, Ino::ROOT, name.as_bytes()).await.unwrap();
                let (fh, attr) = vfs.open(&ctx, entry.ino, 2).await.unwrap();
                assert_eq!(
                    attr.length,
                    m.files[file].len() as u64,
                    "length at open of {name}"
                );
                m.handles.push((fh, file));
            } else {
                let (_, fh) = vfs
                    .create(&ctx, Ino::ROOT, name.as_bytes(), 0o644)
                    .await
                    .unwrap();
                m.files.push(Vec::new());
                m.names.insert(name, m.files.len() - 1);
                m.handles.push((fh, m.files.len() - 1));
            }
        }
        Op::Write {
            handle,
            off,
            len,
            seed,
        } => {
            let Some(&(fh, file)) = m.handles.get(handle) else {
                return;
            };
            let bytes = data(len, seed);
            vfs.write(fh, off, &bytes).await.unwrap();
            let f = &mut m.files[file];
            let end = off as usize + len;
            if f.len() < end {
                f.resize(end, 0);
            }
            f[off as usize..end].copy_from_slice(&bytes);
        }
        Op::Read { handle, off, len } => {
            let Some(&(fh, file)) = m.handles.get(handle) else {
                return;
            };
            let got = vfs.read(fh, off, len).await.unwrap();
            let f = &m.files[file];
            let start = (off as usize).min(f.len());
            let end = (off as usize + len as usize).min(f.len());
            assert_eq!(
                &got[..],
                &f[start..end],
                "read [{off}, +{len}) of file {file}"
            );
        }
        Op::Truncate { name, size } => {
            let Some(&file) = m.names.get(NAMES[name]) else {
                return;
            };
            let entry = vfs
                .lookup(&ctx, Ino::ROOT, NAMES[name].as_bytes())
                .await
                .unwrap();
            let set = SetAttr {
                size: Some(size),
                ..SetAttr::default()
            };
            assert_eq!(
                vfs.setattr(&ctx, entry.ino, &set).await.unwrap().length,
                size
            );
            m.files[file].resize(size as usize, 0);
        }
        Op::Rename { from, to } => {
            let (a, b) = (NAMES[from], NAMES[to]);
            let r = vfs
                .rename(&ctx, Ino::ROOT, a.as_bytes(), Ino::ROOT, b.as_bytes(), 0)
                .await;
            match m.names.remove(a) {
                None => assert_eq!(r, Err(strata_types::Errno::ENOENT)),
                Some(file) => {
                    r.unwrap();
                    m.names.insert(b, file);
                }
            }
        }
        Op::Unlink(n) => {
            let r = vfs.unlink(&ctx, Ino::ROOT, NAMES[n].as_bytes()).await;
            match m.names.remove(NAMES[n]) {
                None => assert_eq!(r, Err(strata_types::Errno::ENOENT)),
                Some(_) => r.unwrap(),
            }
        }
        Op::Close(handle) => {
            if handle < m.handles.len() {
                let (fh, _) = m.handles.remove(handle);
                vfs.release(fh).await.unwrap();
            }
        }
    }
}

async fn client(store: &MemoryStore, objects: &Arc<dyn strata_object::ObjectStore>) -> Vfs {
    let meta = Meta::new(store.client(), test_options());
    meta.load().await.unwrap();
    let opts = ChunkOptions {
        block_size: BLOCK,
        ..ChunkOptions::default()
    };
    let chunks = ChunkStore::new(objects.clone(), Arc::new(MemoryCache::new(1 << 20)), opts);
    Vfs::new(Arc::new(meta), chunks, VfsOptions::default())
}

fn run(ops: Vec<Op>) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store = MemoryStore::create();
        let meta = Meta::new(store.client(), test_options());
        meta.format(&test_format(0), false).await.unwrap();
        let (objects, _) = build(Arc::new(Backend::memory()), &StackOptions::default());
        let vfs = client(&store, &objects).await;
        let mut model = Model::default();
        for op in &ops {
            step(&vfs, &mut model, op).await;
        }
        for (fh, _) in std::mem::take(&mut model.handles) {
            vfs.release(fh).await.unwrap();
        }
        // A second client sees every closed file exactly.
        let other = client(&store, &objects).await;
        let ctx = Ctx::root();
        for (name, &file) in &model.names {
            let entry = other
                .lookup(&ctx, Ino::ROOT, name.as_bytes())
                .await
                .unwrap();
            let (fh, attr) = other.open(&ctx, entry.ino, 0).await.unwrap();
            assert_eq!(attr.length, model.files[file].len() as u64, "{name}");
            let got = other
                .read(fh, 0, model.files[file].len() as u32 + 10)
                .await
                .unwrap();
            assert_eq!(
                &got[..],
                &model.files[file][..],
                "content of {name} on another client"
            );
            other.release(fh).await.unwrap();
        }
        let listed = other
            .meta()
            .readdir(Ino::ROOT, None, 100, false)
            .await
            .unwrap();
        assert_eq!(listed.len(), model.names.len());
    });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn vfs_matches_model(ops in prop::collection::vec(op(), 1..40)) {
        run(ops);
    }
}

#[test]
fn regression_write_read_truncate_across_blocks() {
    run(vec![
        Op::Open(0),
        Op::Write {
            handle: 0,
            off: 4000,
            len: 5000,
            seed: 1,
        },
        Op::Read {
            handle: 0,
            off: 3000,
            len: 7000,
        },
        Op::Truncate {
            name: 0,
            size: 4100,
        },
        Op::Write {
            handle: 0,
            off: 8000,
            len: 10,
            seed: 2,
        },
        Op::Read {
            handle: 0,
            off: 0,
            len: 9000,
        },
        Op::Open(0),
        Op::Read {
            handle: 1,
            off: 4090,
            len: 100,
        },
        Op::Close(0),
    ]);
}
