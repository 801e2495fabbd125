//! Key records: data keys wrapped by a KEK (file, variable, command; raw, hex, base64)
//! or an RSA key (protected PKCS#8 from `openssl genrsa -aes256`, plain PKCS#8, PKCS#1)
//! unwrap to the same keys, wrong keys and passphrases are one clear error, and the two
//! rotations keep every data key readable.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

use std::process::Command;

use super::*;

const UUID: &str = "8d1f0c2e-0000-4000-8000-000000000001";

fn kek_file(dir: &tempfile::TempDir, name: &str, contents: &[u8]) -> KekSource {
    let path = dir.path().join(name);
    std::fs::write(&path, contents).unwrap();
    KekSource::File(path)
}

fn secrets(ring: &KeyRing) -> Vec<(u32, [u8; KEY_LEN])> {
    ring.ids()
        .map(|id| (id, *ring.get(id).unwrap().secret()))
        .collect()
}

fn opts_with(kek: KekSource) -> KeyOptions {
    KeyOptions {
        kek: Some(kek),
        rsa_passphrase: None,
    }
}

#[test]
fn a_kek_in_any_spelling_unwraps_the_same_keys() {
    let dir = tempfile::tempdir().unwrap();
    let raw = [0x5au8; KEY_LEN];
    let hex = kek_file(&dir, "hex", format!("{}\n", hex::encode(&raw)).as_bytes());
    let record = new_encryption(UUID, Cipher::Aes256Gcm, &NewWrapping::Kek(hex.clone())).unwrap();
    assert_eq!(record.wrapping, "kek");
    assert_eq!(record.kek_source.as_deref(), Some(hex.hint().as_str()));
    let from = |source| {
        unwrap_ring(
            &record,
            UUID,
            &open_wrapper(&record, &opts_with(source)).unwrap(),
        )
    };
    let expected = secrets(&from(hex.clone()).unwrap());
    let b64 = kek_file(
        &dir,
        "b64",
        b"WlpaWlpaWlpaWlpaWlpaWlpaWlpaWlpaWlpaWlpaWlo=\n",
    );
    let rawf = kek_file(&dir, "raw", &raw);
    let cmd = KekSource::Command(format!("cat {}", dir.path().join("hex").display()));
    for source in [b64, rawf, cmd] {
        assert_eq!(
            secrets(&from(source.clone()).unwrap()),
            expected,
            "{source:?}"
        );
    }
    // The recorded file is used when no source is given.
    let ring = unwrap_ring(
        &record,
        UUID,
        &open_wrapper(&record, &KeyOptions::default()).unwrap(),
    )
    .unwrap();
    assert_eq!(secrets(&ring), expected);
    // A wrong key says so; so does a missing one or a bad spelling.
    let wrong = kek_file(&dir, "wrong", hex::encode(&[1u8; KEY_LEN]).as_bytes());
    let e = from(wrong).unwrap_err();
    assert!(
        matches!(e, KeyError::Wrong(_)) && e.to_string().contains("wrong key"),
        "{e}"
    );
    let short = kek_file(&dir, "short", b"abcd");
    assert!(matches!(
        open_wrapper(&record, &opts_with(short)),
        Err(KeyError::Invalid(_))
    ));
    let gone = KekSource::File(dir.path().join("nothing"));
    assert!(matches!(
        open_wrapper(&record, &opts_with(gone)),
        Err(KeyError::Missing(_))
    ));
    let failing = KekSource::Command("echo no >&2; exit 3".into());
    let e = open_wrapper(&record, &opts_with(failing)).unwrap_err();
    assert!(e.to_string().contains("no"), "{e}");
    // Keys are bound to their volume.
    let other_volume = unwrap_ring(
        &record,
        "another-uuid",
        &open_wrapper(&record, &KeyOptions::default()).unwrap(),
    );
    assert!(matches!(other_volume, Err(KeyError::Wrong(_))));
}

#[test]
fn a_recorded_command_is_never_run_by_default() {
    let record = Encryption {
        wrapping: "kek".into(),
        kek_source: Some("cmd:touch /tmp/strata-should-not-exist".into()),
        rsa_private_key: None,
        current_key: 1,
        keys: Vec::new(),
        object_unit_kib: None,
    };
    let e = open_wrapper(&record, &KeyOptions::default()).unwrap_err();
    assert!(e.to_string().contains("--encrypt-key-cmd"), "{e}");
    assert!(!std::path::Path::new("/tmp/strata-should-not-exist").exists());
}

fn openssl(args: &[&str]) {
    let out = Command::new("openssl").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn rsa_keys_as_openssl_writes_them_wrap_and_unwrap() {
    let dir = tempfile::tempdir().unwrap();
    let protected = dir.path().join("protected.pem");
    openssl(&[
        "genrsa",
        "-aes256",
        "-passout",
        "pass:s3cret",
        "-out",
        protected.to_str().unwrap(),
        "2048",
    ]);
    let pem = std::fs::read_to_string(&protected).unwrap();
    assert!(pem.contains("ENCRYPTED PRIVATE KEY"));
    let pass = Some(Secret::new("s3cret"));
    let how = NewWrapping::Rsa {
        pem: Secret::new(pem.clone()),
        passphrase: pass.clone(),
    };
    let record = new_encryption(UUID, Cipher::ChaCha20Poly1305, &how).unwrap();
    assert_eq!(
        record.rsa_private_key.as_ref().map(Secret::expose),
        Some(pem.as_str())
    );
    assert!(
        !format!("{record:?}").contains("PRIVATE KEY"),
        "no key in Debug"
    );
    let opts = KeyOptions {
        kek: None,
        rsa_passphrase: pass,
    };
    let ring = unwrap_ring(&record, UUID, &open_wrapper(&record, &opts).unwrap()).unwrap();
    assert_eq!(ring.current().cipher, Cipher::ChaCha20Poly1305);
    let wrong = KeyOptions {
        kek: None,
        rsa_passphrase: Some(Secret::new("guess")),
    };
    let e = open_wrapper(&record, &wrong).unwrap_err();
    assert!(e.to_string().contains("wrong passphrase"), "{e}");
    // Unprotected keys, PKCS#8 and PKCS#1.
    let plain8 = dir.path().join("plain8.pem");
    openssl(&[
        "pkey",
        "-in",
        protected.to_str().unwrap(),
        "-passin",
        "pass:s3cret",
        "-out",
        plain8.to_str().unwrap(),
    ]);
    let plain1 = dir.path().join("plain1.pem");
    openssl(&[
        "rsa",
        "-in",
        plain8.to_str().unwrap(),
        "-traditional",
        "-out",
        plain1.to_str().unwrap(),
    ]);
    for path in [plain8, plain1] {
        let pem = std::fs::read_to_string(&path).unwrap();
        let how = NewWrapping::Rsa {
            pem: Secret::new(pem),
            passphrase: None,
        };
        let record = new_encryption(UUID, Cipher::Aes256Gcm, &how).unwrap();
        let ring = unwrap_ring(
            &record,
            UUID,
            &open_wrapper(&record, &KeyOptions::default()).unwrap(),
        );
        assert!(ring.is_ok(), "{path:?}");
    }
}

#[test]
fn rotations_keep_every_data_key() {
    let dir = tempfile::tempdir().unwrap();
    let old = kek_file(&dir, "old", hex::encode(&[3u8; KEY_LEN]).as_bytes());
    let new = kek_file(&dir, "new", hex::encode(&[4u8; KEY_LEN]).as_bytes());
    let record = new_encryption(UUID, Cipher::Aes256Gcm, &NewWrapping::Kek(old.clone())).unwrap();
    let old_wrapper = open_wrapper(&record, &opts_with(old.clone())).unwrap();
    let before = secrets(&unwrap_ring(&record, UUID, &old_wrapper).unwrap());
    // A data key added: current, the first still there.
    let added = add_data_key(&record, UUID, &old_wrapper, Cipher::ChaCha20Poly1305).unwrap();
    assert_eq!(added.current_key, 2);
    let ring = unwrap_ring(&added, UUID, &old_wrapper).unwrap();
    assert_eq!(ring.current().id, 2);
    assert_eq!(secrets(&ring)[0], before[0]);
    // The KEK replaced: same data keys, the old KEK no longer opens them.
    let rewrapped = rewrap(&added, UUID, &old_wrapper, &NewWrapping::Kek(new.clone())).unwrap();
    assert_eq!(rewrapped.current_key, 2);
    assert_eq!(rewrapped.kek_source.as_deref(), Some(new.hint().as_str()));
    let new_wrapper = open_wrapper(&rewrapped, &opts_with(new)).unwrap();
    assert_eq!(
        secrets(&unwrap_ring(&rewrapped, UUID, &new_wrapper).unwrap()),
        secrets(&ring)
    );
    assert!(unwrap_ring(&rewrapped, UUID, &old_wrapper).is_err());
    // Rotating needs the volume's current wrapper.
    let stranger = Wrapper::Kek(
        kek_file(&dir, "x", hex::encode(&[9u8; KEY_LEN]).as_bytes())
            .read()
            .unwrap(),
    );
    assert!(add_data_key(&record, UUID, &stranger, Cipher::Aes256Gcm).is_err());
}

#[test]
fn wrappers_and_keys_never_show_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let kek = kek_file(&dir, "k", hex::encode(&[0xcdu8; KEY_LEN]).as_bytes())
        .read()
        .unwrap();
    let shown = format!("{kek:?} {:?}", Wrapper::Kek(kek.clone()));
    assert!(!shown.contains("cd") && !shown.contains("205"), "{shown}");
}

/// A test key (2048 bits) in OpenSSL's legacy encrypted PEM, AES-256-CBC and AES-128-CBC,
/// and DES-EDE3-CBC; passphrase `fixture-pw`. The JuiceFS objects below were written by
/// JuiceFS 1.4.2 with it (`--encrypt-algo chacha20-rsa --compress lz4`).
const LEGACY_AES256: &str = include_str!("testdata/legacy-aes256.pem");
const LEGACY_AES128: &str = include_str!("testdata/legacy-aes128.pem");
const LEGACY_DES3: &str = include_str!("testdata/legacy-des3.pem");
const FIXTURE_PASS: &str = "fixture-pw";

fn rsa_record(pem: &str) -> Encryption {
    let how = NewWrapping::Rsa {
        pem: Secret::new(pem),
        passphrase: Some(Secret::new(FIXTURE_PASS)),
    };
    new_encryption(UUID, Cipher::Aes256Gcm, &how).unwrap()
}

fn with_pass(pass: &str) -> KeyOptions {
    KeyOptions {
        kek: None,
        rsa_passphrase: Some(Secret::new(pass)),
    }
}

#[test]
fn legacy_encrypted_pem_keys_open_with_their_passphrase() {
    let by_256 = rsa_record(LEGACY_AES256);
    // The same key under another legacy cipher unwraps what the first one wrapped.
    let other = Encryption {
        rsa_private_key: Some(Secret::new(LEGACY_AES128)),
        ..by_256.clone()
    };
    let ring = |record: &Encryption| {
        let wrapper = open_wrapper(record, &with_pass(FIXTURE_PASS)).unwrap();
        secrets(&unwrap_ring(record, UUID, &wrapper).unwrap())
    };
    assert_eq!(ring(&by_256), ring(&other));
    let e = open_wrapper(&by_256, &with_pass("guess")).unwrap_err();
    assert!(e.to_string().contains("wrong passphrase"), "{e}");
    let e = open_wrapper(&by_256, &KeyOptions::default());
    if std::env::var_os("JFS_RSA_PASSPHRASE").is_none()
        && std::env::var_os("STRATA_RSA_PASSPHRASE").is_none()
    {
        let e = e.unwrap_err();
        assert!(e.to_string().contains("JFS_RSA_PASSPHRASE"), "{e}");
    }
    let how = NewWrapping::Rsa {
        pem: Secret::new(LEGACY_DES3),
        passphrase: Some(Secret::new(FIXTURE_PASS)),
    };
    let e = new_encryption(UUID, Cipher::Aes256Gcm, &how).unwrap_err();
    assert!(e.to_string().contains("openssl pkcs8 -topk8"), "{e}");
}

#[test]
fn juicefs_sealed_settings_secrets_open_with_the_volume_uuid() {
    // From `juicefs dump --keep-secret-key` of a JuiceFS 1.4.2 volume formatted with
    // `--secret-key fixture-secret`.
    let uuid = "3d40527f-0608-4420-8d3e-2ef3edac00d0";
    let sealed = Secret::new("ozcIzdDAfMBRrbNwpm5J8mel99uxpWyiEo2zht3HjuAc1LFtkblQbSed");
    assert_eq!(
        open_juicefs_secret(uuid, &sealed).unwrap().expose(),
        "fixture-secret"
    );
    let e = open_juicefs_secret("another-uuid", &sealed).unwrap_err();
    assert!(e.to_string().contains("UUID"), "{e}");
    assert!(open_juicefs_secret(uuid, &Secret::new("%%")).is_err());
    assert!(
        open_juicefs_secret(uuid, &Secret::new(""))
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn juicefs_encrypted_objects_read_as_foreign_blocks() {
    use bytes::Bytes;
    use strata_object::ObjectStore;
    use strata_object::adopted::{ForeignBlocks, ForeignCipher, ForeignCodec};
    use strata_object::backend::Backend;
    use strata_object::stack::{StackOptions, build};

    let record = rsa_record(LEGACY_AES256);
    let cipher = foreign_cipher(&record, "chacha20", &with_pass(FIXTURE_PASS)).unwrap();
    let backend = std::sync::Arc::new(Backend::memory());
    let key = "chunks/0/0/1_0_5890";
    let stored = include_bytes!("testdata/juicefs-chacha20-lz4-1_0_5890.obj");
    backend
        .put(&format!("jfix/{key}"), Bytes::from_static(stored))
        .await
        .unwrap();
    let stack = |cipher: Option<ForeignCipher>| {
        let opts = StackOptions {
            prefix: "jfix".into(),
            foreign: Some(ForeignBlocks {
                below: 2,
                codec: ForeignCodec::Lz4,
                encrypted: true,
                cipher,
                checksums: false,
            }),
            ..StackOptions::default()
        };
        build(backend.clone(), &opts).0
    };
    let store = stack(Some(cipher.clone()));
    let expected: String = (0..200)
        .map(|i| format!("line {i} of a JuiceFS fixture\n"))
        .collect();
    assert_eq!(store.get(key, None).await.unwrap(), expected.as_bytes());
    let part = store.get(key, Some(100..200)).await.unwrap();
    assert_eq!(part, expected.as_bytes()[100..200]);
    assert!(
        !store.cheap_ranges_of(key),
        "an encrypted block is read whole"
    );
    assert!(
        store.cheap_ranges_of("chunks/0/0/2_0_5890"),
        "a native one by range"
    );
    // The volume's uuid object, encrypted (not compressed) the same way.
    let uuid = cipher
        .open(include_bytes!("testdata/juicefs-chacha20-uuid.obj"))
        .unwrap();
    assert_eq!(uuid, b"3d40527f-0608-4420-8d3e-2ef3edac00d0");
    // Without a key: a clear error, never bytes.
    let e = stack(None).get(key, None).await.unwrap_err();
    assert!(e.to_string().contains("no key"), "{e}");
    // The wrong cipher, or one flipped byte: corrupt.
    let aes = foreign_cipher(&record, "aes256gcm", &with_pass(FIXTURE_PASS)).unwrap();
    let e = stack(Some(aes)).get(key, None).await.unwrap_err();
    assert!(e.to_string().contains("authentication failed"), "{e}");
    let mut damaged = stored.to_vec();
    let last = damaged.len() - 1;
    damaged[last] ^= 1;
    backend
        .put(&format!("jfix/{key}"), Bytes::from(damaged))
        .await
        .unwrap();
    assert!(store.get(key, None).await.is_err());
}
