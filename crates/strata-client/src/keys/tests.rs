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
