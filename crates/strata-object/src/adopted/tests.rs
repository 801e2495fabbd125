//! Foreign blocks: raw, LZ4-block and zstd objects under Strata's block names read back
//! whole and by range; native blocks still go through their framing; damaged or
//! misnamed foreign blocks are corrupt, never data.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

use std::sync::Arc;

use super::*;
use crate::backend::Backend;
use crate::stack::{StackOptions, build};

fn payload(len: usize) -> Vec<u8> {
    (0..len).map(|i| u8::try_from(i % 97).unwrap()).collect()
}

/// A stack over `backend` whose slices below 100 are foreign with `codec`.
fn stack(backend: &Arc<Backend>, codec: ForeignCodec) -> Arc<dyn ObjectStore> {
    let opts = StackOptions {
        prefix: "vol".into(),
        foreign: Some(ForeignBlocks {
            below: 100,
            codec,
            encrypted: false,
            cipher: None,
            checksums: false,
        }),
        ..StackOptions::default()
    };
    build(backend.clone(), &opts).0
}

#[test]
fn foreign_block_names_are_recognised_by_id() {
    let f = ForeignBlocks {
        below: 100,
        codec: ForeignCodec::Raw,
        encrypted: false,
        cipher: None,
        checksums: false,
    };
    assert_eq!(f.block_of("chunks/0/0/7_2_4096"), Some((7, 4096)));
    assert_eq!(f.block_of("chunks/0/0/100_0_4096"), None, "a native id");
    assert_eq!(f.block_of("chunks/0/0/0_0_4096"), None, "no slice has id 0");
    assert_eq!(f.block_of("meta/dump-1.bin"), None);
    assert_eq!(f.block_of("chunks/0/0/7_2"), None);
    assert_eq!(f.block_of("chunks/0/0/7_2_4096_1"), None);
    assert!(ForeignCodec::parse("brotli").is_err());
}

#[tokio::test]
async fn every_codec_reads_whole_and_by_range() {
    let data = payload(300_000);
    let encodings = [
        (ForeignCodec::Raw, data.clone()),
        (ForeignCodec::Lz4, lz4_flex::block::compress(&data)),
        (ForeignCodec::Zstd, zstd::bulk::compress(&data, 3).unwrap()),
    ];
    for (codec, stored) in encodings {
        let backend = Arc::new(Backend::memory());
        let key = "chunks/0/0/42_0_300000";
        backend
            .put(&format!("vol/{key}"), Bytes::from(stored))
            .await
            .unwrap();
        let store = stack(&backend, codec);
        assert_eq!(store.get(key, None).await.unwrap(), data, "{codec:?}");
        let got = store.get(key, Some(123_456..130_000)).await.unwrap();
        assert_eq!(got, data[123_456..130_000], "{codec:?}");
        // Native blocks (ids past the import) keep their framing.
        let native = "chunks/0/0/100_0_5";
        store
            .put(native, Bytes::from_static(b"hello"))
            .await
            .unwrap();
        assert_eq!(store.get(native, None).await.unwrap(), &b"hello"[..]);
        let raw = backend.get(&format!("vol/{native}"), None).await.unwrap();
        assert_ne!(raw, &b"hello"[..], "framed");
    }
}

#[tokio::test]
async fn damaged_or_misnamed_foreign_blocks_are_corrupt() {
    let data = payload(10_000);
    let backend = Arc::new(Backend::memory());
    let lz4 = stack(&backend, ForeignCodec::Lz4);
    let mut stored = lz4_flex::block::compress(&data);
    let last = stored.len() - 1;
    stored.truncate(last);
    backend
        .put("vol/chunks/0/0/5_0_10000", Bytes::from(stored))
        .await
        .unwrap();
    let e = lz4.get("chunks/0/0/5_0_10000", None).await.unwrap_err();
    assert!(matches!(e, ObjectError::Corrupt { .. }), "{e:?}");
    // A raw block whose length is not its name's.
    let raw = stack(&backend, ForeignCodec::Raw);
    backend
        .put(
            "vol/chunks/0/0/6_0_10000",
            Bytes::from(data[..9_000].to_vec()),
        )
        .await
        .unwrap();
    let e = raw.get("chunks/0/0/6_0_10000", None).await.unwrap_err();
    assert!(matches!(e, ObjectError::Corrupt { .. }), "{e:?}");
}

#[test]
fn only_blocks_stored_as_they_are_are_read_by_range() {
    let backend = Arc::new(Backend::memory());
    let (foreign, native) = ("chunks/0/0/7_0_4096", "chunks/0/0/100_0_4096");
    let raw = stack(&backend, ForeignCodec::Raw);
    assert!(raw.cheap_ranges_of(foreign) && raw.cheap_ranges_of(native));
    let lz4 = stack(&backend, ForeignCodec::Lz4);
    assert!(
        !lz4.cheap_ranges_of(foreign),
        "a compressed foreign block is read whole"
    );
    assert!(
        lz4.cheap_ranges_of(native),
        "native blocks keep their ranged reads"
    );
    // Encrypted raw ones too (each object is sealed whole), and with no key they fail.
    let opts = StackOptions {
        prefix: "vol".into(),
        foreign: Some(ForeignBlocks {
            below: 100,
            codec: ForeignCodec::Raw,
            encrypted: true,
            cipher: None,
            checksums: false,
        }),
        ..StackOptions::default()
    };
    let sealed = build(backend.clone(), &opts).0;
    assert!(!sealed.cheap_ranges_of(foreign));
    assert!(!ForeignBlocks::stored_as_is(opts.foreign.as_ref().unwrap()));
}

#[tokio::test]
async fn hashed_names_are_shown_as_strata_names_and_requests_follow_them() {
    let backend = Arc::new(Backend::memory());
    // JuiceFS `--hash-prefix`: slice 10 under `0A`, slice 1_000_300 under `6C/1`.
    for (stored, body) in [
        ("vol/chunks/0A/0/10_0_5", "ten.."),
        ("vol/chunks/6C/1/1000300_1_3", "big"),
        ("vol/chunks/0/0/7_0_5", "plain"),
        ("vol/juicefs_uuid", "u"),
    ] {
        backend.put(stored, Bytes::from(body)).await.unwrap();
    }
    let named = ForeignNames::new(backend.clone(), "vol", 2_000_000, true);
    let shown = |key: &str| key.to_string();
    assert_eq!(
        named.get("vol/chunks/0/0/10_0_5", None).await.unwrap(),
        &b"ten.."[..]
    );
    assert_eq!(
        named
            .get("vol/chunks/1/1000/1000300_1_3", None)
            .await
            .unwrap(),
        &b"big"[..]
    );
    let mut listed = Vec::new();
    named
        .scan_all("vol/chunks/", &mut |info| {
            listed.push(info.key);
            Ok(())
        })
        .await
        .unwrap();
    listed.sort();
    assert_eq!(
        listed,
        [
            shown("vol/chunks/0/0/10_0_5"),
            shown("vol/chunks/0/0/7_0_5"),
            shown("vol/chunks/1/1000/1000300_1_3"),
        ]
    );
    // A name that only looks hashed (wrong digits for its id) is left as it is, and
    // native ids keep Strata's names when written.
    backend
        .put("vol/chunks/0B/0/10_0_5", Bytes::from("stray"))
        .await
        .unwrap();
    let page = named.list("vol/chunks/0B/", None, 10).await.unwrap();
    assert_eq!(page[0].key, "vol/chunks/0B/0/10_0_5");
    named
        .put("vol/chunks/2/2000/2000001_0_1", Bytes::from("n"))
        .await
        .unwrap();
    assert!(backend.head("vol/chunks/2/2000/2000001_0_1").await.is_ok());
    // A foreign block's recorded checksums go with it.
    backend
        .put("vol/chunks/0/0/10_0_5.sums", Bytes::from("s"))
        .await
        .unwrap();
    named.delete("vol/chunks/0/0/10_0_5").await.unwrap();
    assert!(backend.head("vol/chunks/0A/0/10_0_5").await.is_err());
    assert!(backend.head("vol/chunks/0/0/10_0_5.sums").await.is_err());
}

#[tokio::test]
async fn recorded_checksums_are_checked_by_every_read() {
    let data = payload(300_000);
    let key = "chunks/0/0/42_0_300000";
    let backend = Arc::new(Backend::memory());
    backend
        .put(&format!("vol/{key}"), Bytes::from(data.clone()))
        .await
        .unwrap();
    let opts = StackOptions {
        prefix: "vol".into(),
        foreign: Some(ForeignBlocks {
            below: 100,
            codec: ForeignCodec::Raw,
            encrypted: false,
            cipher: None,
            checksums: true,
        }),
        ..StackOptions::default()
    };
    let store = build(backend.clone(), &opts).0;
    let e = store.get(key, None).await.unwrap_err();
    assert!(e.to_string().contains("checksums are missing"), "{e}");
    backend
        .put(&format!("vol/{key}.sums"), sums::encode(&data))
        .await
        .unwrap();
    let store = build(backend.clone(), &opts).0;
    assert_eq!(store.get(key, None).await.unwrap(), data);
    for (from, to) in [
        (0, 1),
        (65_535, 65_537),
        (123_456, 130_000),
        (299_999, 400_000),
    ] {
        let got = store.get(key, Some(from..to)).await.unwrap();
        let to = usize::try_from(to).unwrap().min(data.len());
        assert_eq!(
            got,
            data[usize::try_from(from).unwrap()..to],
            "{from}..{to}"
        );
    }
    // One flipped byte in segment 2 (same length): reads of it fail, others do not.
    let mut damaged = data.clone();
    damaged[140_000] ^= 1;
    backend
        .put(&format!("vol/{key}"), Bytes::from(damaged))
        .await
        .unwrap();
    assert!(store.get(key, None).await.is_err());
    assert!(store.get(key, Some(139_000..139_001)).await.is_err());
    assert_eq!(
        store.get(key, Some(0..1000)).await.unwrap(),
        data[..1000],
        "segment 0 is intact"
    );
    // A damaged checksums object is not trusted.
    let mut bad = sums::encode(&data).to_vec();
    bad[20] ^= 1;
    assert!(sums::Sums::decode(&bad).is_err());
}
