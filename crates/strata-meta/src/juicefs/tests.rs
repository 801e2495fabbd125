//! A JuiceFS dump (as `juicefs dump` 1.4 writes it) converted to Strata dump lines.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

use super::*;
use crate::meta::{DumpNode, Raw};

/// A small dump in JuiceFS 1.4's layout: a hard link in two directories, a sparse file
/// with holes, a symlink and names with escaped bytes, an xattr with binary bytes, a
/// slice shared by two files, a quota and a trashed file.
const DUMP: &str = r#"{
  "Setting": {"Name": "jvol", "UUID": "u-1", "Storage": "file", "Bucket": "/b/",
    "BlockSize": 4096, "Compression": "lz4", "EncryptAlgo": "aes256gcm-rsa",
    "TrashDays": 1, "MetaVersion": 1, "DirStats": true},
  "Counters": {"usedSpace": 0, "usedInodes": 9, "nextInodes": 1026, "nextChunk": 4097,
    "nextSession": 3, "nextTrash": 1},
  "Sustained": [],
  "DelFiles": [],
  "Quotas": {"2": {"maxSpace": 1073741824, "maxInodes": 1000, "usedSpace": 4096}},
  "FSTree": {
    "attr": {"inode":1,"type":"directory","mode":511,"uid":0,"gid":0,"atime":10,"mtime":11,"ctime":12,"atimensec":1,"mtimensec":2,"ctimensec":3,"nlink":3,"length":0},
    "entries": {
      "hard1": {
        "attr": {"inode":6,"type":"regular","mode":420,"uid":0,"gid":0,"atime":1,"mtime":1,"ctime":1,"nlink":2,"length":413},
        "chunks": [{"index":0,"slices":[{"id":1,"size":413,"len":413}]}]
      },
      "sparse.bin": {
        "attr": {"inode":57,"type":"regular","mode":2541,"uid":5,"gid":6,"atime":1,"mtime":1,"ctime":1,"nlink":1,"length":209715200},
        "chunks": [
          {"index":0,"slices":[{"id":0,"size":0,"len":67108864}]},
          {"index":1,"slices":[{"id":52,"pos":32891136,"size":6,"len":6}]}
        ]
      },
      "src": {
        "attr": {"inode":2,"type":"directory","mode":493,"uid":0,"gid":0,"atime":1,"mtime":1,"ctime":1,"nlink":2,"length":0},
        "entries": {
          "f1.txt": {
            "attr": {"inode":6,"type":"regular","mode":420,"uid":0,"gid":0,"atime":1,"mtime":1,"ctime":1,"nlink":2,"length":413},
            "xattrs": [{"name":"user.bin","value":"x%FF%00y"}],
            "chunks": [{"index":0,"slices":[{"id":1,"size":413,"len":413}]}]
          },
          "bad%FFname": {
            "attr": {"inode":7,"type":"regular","mode":420,"uid":0,"gid":0,"atime":1,"mtime":1,"ctime":1,"nlink":1,"length":100},
            "chunks": [{"index":0,"slices":[{"id":52,"size":6,"off":2,"len":4},{"id":9,"pos":10,"size":90,"len":90}]}]
          }
        }
      },
      "sym": {
        "attr": {"inode":58,"type":"symlink","mode":511,"uid":0,"gid":0,"atime":1,"mtime":1,"ctime":1,"nlink":1,"length":0},
        "symlink": "t%FE%25"
      },
      "fifo": {
        "attr": {"inode":59,"type":"fifo","mode":420,"uid":0,"gid":0,"atime":1,"mtime":1,"ctime":1,"nlink":1,"length":0}
      }
    }
  },
  "Trash": {
    "attr": {"inode":9223372032828243968,"type":"directory","mode":365,"uid":0,"gid":0,"atime":1,"mtime":1,"ctime":1,"nlink":3,"length":0},
    "entries": {
      "2026-12-06-17": {
        "attr": {"inode":9223372032828243969,"type":"directory","mode":365,"uid":0,"gid":0,"atime":1,"mtime":1,"ctime":1,"nlink":2,"length":0},
        "entries": {
          "2-12-gone.txt": {
            "attr": {"inode":12,"type":"regular","mode":420,"uid":0,"gid":0,"atime":1,"mtime":1,"ctime":1,"nlink":1,"length":413},
            "chunks": [{"index":0,"slices":[{"id":7,"size":413,"len":413}]}]
          }
        }
      }
    }
  }
}"#;

/// A completion that adds nothing.
fn keep(_: &JuiceSetting, f: Format) -> Result<Format> {
    Ok(f)
}

fn lines_of(dump: &str) -> (Vec<DumpLine>, Imported) {
    let mut lines = Vec::new();
    let imported = convert(dump.as_bytes(), &mut keep, &mut |l| {
        lines.push(l);
        Ok(())
    })
    .unwrap();
    (lines, imported)
}

fn node(lines: &[DumpLine], ino: u64) -> Vec<&DumpNode> {
    lines
        .iter()
        .filter_map(|l| match l {
            DumpLine::Node(n) if n.ino == ino => Some(n),
            _ => None,
        })
        .collect()
}

#[test]
fn percent_escapes_are_decoded_and_bad_ones_refused() {
    assert_eq!(unescape("x%FF%00y").unwrap(), b"x\xff\x00y");
    assert_eq!(unescape("50%25 a%20b").unwrap(), b"50% a b");
    assert_eq!(unescape("plain").unwrap(), b"plain");
    assert!(unescape("cut%F").is_err());
    assert!(unescape("bad%ZZ").is_err());
}

#[test]
fn a_dump_becomes_strata_lines() {
    let (lines, imported) = lines_of(DUMP);
    let DumpLine::Header {
        format, counters, ..
    } = &lines[0]
    else {
        panic!("no header first: {:?}", lines[0]);
    };
    let format: Format = serde_json::from_value(format.clone()).unwrap();
    assert_eq!(
        (format.name.as_str(), format.bucket.as_str()),
        ("jvol", "/b/")
    );
    assert_eq!(format.meta_version, crate::format::FOREIGN_VERSION);
    let foreign = format.foreign.unwrap();
    assert_eq!(
        (foreign.slices_below, foreign.compression.as_str()),
        (4097, "lz4")
    );
    assert_eq!(counters["nextSlice"], 4097);
    assert_eq!(counters["nextInode"], 1026);
    assert_eq!(imported.quotas, vec![(2, 1 << 30, 1000)]);
    assert_eq!((imported.files, imported.directories), (6, 4));

    // The hard link: one node (parent 0), right after its first entry; both entries.
    let hard = node(&lines, 6);
    assert_eq!(hard.len(), 1);
    assert_eq!(hard[0].parent, 0);
    let at = lines
        .iter()
        .position(|l| matches!(l, DumpLine::Node(n) if n.ino == 6))
        .unwrap();
    assert!(matches!(&lines[at - 1], DumpLine::Entry { ino: 6, .. }));
    let links = lines
        .iter()
        .filter(|l| matches!(l, DumpLine::Entry { ino: 6, .. }))
        .count();
    assert_eq!(links, 2);

    // Holes carry size = len; mode keeps setuid; times in ns.
    let sparse = node(&lines, 57)[0];
    assert_eq!(sparse.chunks[0].1, vec![[0, 0, 67_108_864, 0, 67_108_864]]);
    assert_eq!(sparse.chunks[1].1, vec![[32_891_136, 52, 6, 0, 6]]);
    assert_eq!((sparse.mode, sparse.uid, sparse.gid), (0o4755, 5, 6));
    let root = node(&lines, 1)[0];
    assert_eq!(
        (root.atime, root.mtime, root.ctime),
        (10_000_000_001, 11_000_000_002, 12_000_000_003)
    );
    // Escaped bytes decoded; a symlink's length is its target's.
    let sym = node(&lines, 58)[0];
    assert_eq!(sym.target, Some(Raw::of(b"t\xfe%")));
    assert_eq!(sym.length, 3);
    assert!(lines.iter().any(|l| matches!(l,
        DumpLine::Entry { name, ino: 7, .. } if name.bytes().unwrap() == b"bad\xffname")));
    let xattrs = &node(&lines, 6)[0].xattrs;
    assert!(
        xattrs.is_empty(),
        "the first entry of inode 6 has no xattrs"
    );
    // Directories carry their children's usage; the trash keeps its entries.
    let src = node(&lines, 2)[0];
    assert_eq!(src.usage, Some([4096 + 4096, 2]));
    assert_eq!(
        (root.nlink, src.nlink),
        (3, 2),
        "two links and one per subdirectory"
    );
    assert_eq!(node(&lines, 9_223_372_032_828_243_968)[0].nlink, 3);
    assert_eq!(node(&lines, 12)[0].parent, 9_223_372_032_828_243_969);
    // Slice 52 is named by two records: its count is kept; the end line counts right.
    assert!(lines.iter().any(|l| matches!(
        l,
        DumpLine::SliceRef {
            id: 52,
            size: 6,
            refs: 2
        }
    )));
    let (nodes, entries) = lines.iter().fold((0, 0), |(n, e), l| match l {
        DumpLine::Node(_) => (n + 1, e),
        DumpLine::Entry { .. } => (n, e + 1),
        _ => (n, e),
    });
    assert_eq!(lines.last(), Some(&DumpLine::End { nodes, entries }));
}

#[test]
fn settings_map_to_strata_settings() {
    let s = JuiceSetting {
        name: "vol-1".into(),
        uuid: "u".into(),
        storage: "minio".into(),
        bucket: "http://127.0.0.1:9000/data".into(),
        access_key: "ak".into(),
        secret_key: "removed".into(),
        block_size: 1024,
        compression: "zstd".into(),
        trash_days: 3,
        capacity: 1 << 40,
        ..JuiceSetting::default()
    };
    let f = strata_format(&s, 77).unwrap();
    assert_eq!((f.storage.as_str(), f.block_size_kib), ("s3", 1024));
    assert_eq!((f.trash_days, f.capacity), (3, 1 << 40));
    assert_eq!(f.access_key.as_deref(), Some("ak"));
    assert!(f.secret_key.is_none(), "a removed secret is not a secret");
    assert_ne!(f.uuid, "u", "the Strata volume gets its own uuid");
    assert_eq!(f.foreign.unwrap().uuid, "u");
    let bad = JuiceSetting {
        name: "No_Good".into(),
        ..s
    };
    assert!(strata_format(&bad, 77).unwrap().validate().is_err());
}

#[test]
fn encrypted_volumes_name_their_cipher_and_leave_sealed_secrets_to_the_caller() {
    let s = JuiceSetting {
        name: "vol-1".into(),
        uuid: "u".into(),
        storage: "s3".into(),
        secret_key: "c2VhbGVk".into(),
        encrypt_key: "c2VhbGVkIHBlbQ==".into(),
        encrypt_algo: "chacha20-rsa".into(),
        key_encrypted: true,
        ..JuiceSetting::default()
    };
    let f = strata_format(&s, 5).unwrap();
    assert!(f.secret_key.is_none(), "a sealed secret is not the secret");
    assert_eq!(
        f.foreign.as_ref().unwrap().encryption.as_deref(),
        Some("chacha20")
    );
    assert_eq!(f.meta_version, crate::format::FOREIGN_ENCRYPTION_VERSION);
    assert!(f.validate().is_err(), "no RSA key record yet");
    let aes = JuiceSetting {
        encrypt_algo: String::new(),
        ..s
    };
    let f = strata_format(&aes, 5).unwrap();
    assert_eq!(f.foreign.unwrap().encryption.as_deref(), Some("aes256gcm"));
    let hashed = JuiceSetting {
        hash_prefix: true,
        encrypt_key: Secret::default(),
        ..aes
    };
    let f = strata_format(&hashed, 5).unwrap();
    assert!(f.foreign.unwrap().hash_prefix);
    assert_eq!(f.meta_version, crate::format::FOREIGN_HASHED_VERSION);
}

#[test]
fn volumes_the_import_cannot_read_are_refused() {
    // An encrypted volume needs the caller to add the RSA key record.
    let encrypted = DUMP.replace("\"DirStats\": true", "\"EncryptKey\": \"abc\"");
    let e = convert(encrypted.as_bytes(), &mut keep, &mut |_| Ok(())).unwrap_err();
    assert!(e.to_string().contains("no RSA key"), "{e}");
    let sm4 = encrypted.replace("aes256gcm-rsa", "sm4gcm-rsa");
    let e = convert(sm4.as_bytes(), &mut keep, &mut |_| Ok(())).unwrap_err();
    assert!(e.to_string().contains("sm4gcm-rsa"), "{e}");
    let sharded = DUMP.replace("\"DirStats\": true", "\"Shards\": 4");
    let e = convert(sharded.as_bytes(), &mut keep, &mut |_| Ok(())).unwrap_err();
    assert!(e.to_string().contains("--shards"), "{e}");
    let e = convert(&b"{\"Counters\": {}}"[..], &mut keep, &mut |_| Ok(())).unwrap_err();
    assert!(e.to_string().contains("no FSTree"), "{e}");
    let e = convert(&b" [1, 2]"[..], &mut keep, &mut |_| Ok(())).unwrap_err();
    assert!(e.to_string().contains("JuiceFS"), "{e}");
    // What `juicefs dump --binary` writes starts with a frame header, not `{`.
    let e = convert(
        &b"\x00\x00\x00\x01\x00\x00\x00\x00"[..],
        &mut keep,
        &mut |_| Ok(()),
    )
    .unwrap_err();
    assert!(e.to_string().contains("--binary"), "{e}");
}

#[test]
fn escaping_for_the_way_back_is_undone_by_unescape() {
    let cases: [&[u8]; 5] = [
        b"plain-name.txt",
        b"per%cent",
        b"bad\xffbyte",
        "café ☕".as_bytes(),
        b"tab\there\nnew\x00line\x7f",
    ];
    for bytes in cases {
        let text = escape(bytes);
        assert!(text.bytes().all(|b| (0x20..0x7f).contains(&b)), "{text}");
        assert_eq!(unescape(&text).unwrap(), bytes, "{text}");
    }
    assert_eq!(escape(b"a%b"), "a%25b");
}
