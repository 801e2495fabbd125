//! Sealed segments: what is sealed opens to the same bytes under the same name, index,
//! tag and key only; any changed byte, a wrong key or an unknown key id is refused.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

use proptest::prelude::*;

use super::*;

fn ring(cipher: Cipher) -> KeyRing {
    KeyRing::new(1, vec![DataKey::generate(1, cipher).unwrap()]).unwrap()
}

const MORE: &[u8; 4] = b"SEG3";
const LAST: &[u8; 4] = b"END3";

#[test]
fn segments_open_only_where_they_were_sealed() {
    for cipher in [Cipher::Aes256Gcm, Cipher::ChaCha20Poly1305] {
        let ring = ring(cipher);
        let sealer = ring.sealer(Domain::Object, "a/b_0_9").unwrap();
        let sealed = sealer.seal_to_vec(3, MORE, b"plaintext").unwrap();
        assert_eq!(sealed.len(), 9 + SEALED_TRAILER);
        assert!(!sealed.windows(9).any(|w| w == b"plaintext"));
        let open = |domain, name, index, accept: &[&[u8; 4]]| {
            ring.opener(domain, name)
                .open_to_vec(index, &sealed, accept)
        };
        let (plain, tag) = open(Domain::Object, "a/b_0_9", 3, &[MORE, LAST]).unwrap();
        assert_eq!((plain.as_slice(), &tag), (&b"plaintext"[..], MORE));
        let forged = Err(OpenFailure::Forged);
        assert_eq!(
            open(Domain::Object, "a/c_0_9", 3, &[MORE]),
            forged,
            "other name"
        );
        assert_eq!(
            open(Domain::Object, "a/b_0_9", 4, &[MORE]),
            forged,
            "other index"
        );
        assert_eq!(
            open(Domain::Cache, "a/b_0_9", 3, &[MORE]),
            forged,
            "other domain"
        );
        assert_eq!(
            open(Domain::Object, "a/b_0_9", 3, &[LAST]),
            Err(OpenFailure::UnknownTag(*MORE))
        );
        let other = self::ring(cipher);
        let mut o = other.opener(Domain::Object, "a/b_0_9");
        assert_eq!(o.open_to_vec(3, &sealed, &[MORE]), forged, "other key");
    }
}

#[test]
fn a_segment_names_its_key_and_older_keys_still_open() {
    let old = DataKey::new(1, Cipher::Aes256Gcm, [7; KEY_LEN]);
    let before = KeyRing::new(1, vec![old]).unwrap();
    let sealed = before
        .sealer(Domain::Object, "k")
        .unwrap()
        .seal_to_vec(0, LAST, b"old data")
        .unwrap();
    let rotated = KeyRing::new(
        2,
        vec![
            DataKey::new(1, Cipher::Aes256Gcm, [7; KEY_LEN]),
            DataKey::new(2, Cipher::ChaCha20Poly1305, [9; KEY_LEN]),
        ],
    )
    .unwrap();
    assert_eq!(rotated.sealer(Domain::Object, "k").unwrap().key_id(), 2);
    let (plain, _) = rotated
        .opener(Domain::Object, "k")
        .open_to_vec(0, &sealed, &[LAST])
        .unwrap();
    assert_eq!(plain, b"old data");
    let newer = rotated
        .sealer(Domain::Object, "k")
        .unwrap()
        .seal_to_vec(0, LAST, b"new data")
        .unwrap();
    let mut o = before.opener(Domain::Object, "k");
    assert_eq!(
        o.open_to_vec(0, &newer, &[LAST]),
        Err(OpenFailure::NoKey(2))
    );
    assert!(KeyRing::new(3, vec![DataKey::new(1, Cipher::Aes256Gcm, [0; 32])]).is_err());
}

#[test]
fn keys_never_show_their_secret() {
    let key = DataKey::new(5, Cipher::Aes256Gcm, [0xab; KEY_LEN]);
    let shown = format!("{key:?} {:?}", ring(Cipher::Aes256Gcm));
    assert!(shown.contains("redacted"), "{shown}");
    assert!(!shown.to_lowercase().contains("abab"), "{shown}");
    assert!(!shown.contains("171, 171"), "{shown}");
}

#[test]
fn cipher_names_are_juicefs_compatible() {
    assert_eq!(Cipher::parse("aes256gcm-rsa"), Ok(Cipher::Aes256Gcm));
    assert_eq!(Cipher::parse("chacha20-rsa"), Ok(Cipher::ChaCha20Poly1305));
    assert_eq!(Cipher::parse("chacha20"), Ok(Cipher::ChaCha20Poly1305));
    assert!(Cipher::parse("aes128").is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Flipping any bit of a sealed segment (data, tag, key id, nonce or authentication
    /// tag) makes it fail to open.
    #[test]
    fn any_flipped_bit_is_refused(
        data in proptest::collection::vec(any::<u8>(), 0..300),
        at in any::<prop::sample::Index>(),
        bit in 0u8..8,
    ) {
        let ring = ring(Cipher::Aes256Gcm);
        let mut sealed = ring.sealer(Domain::Cache, "x").unwrap().seal_to_vec(1, MORE, &data).unwrap();
        let i = at.index(sealed.len());
        sealed[i] ^= 1 << bit;
        let opened = ring.opener(Domain::Cache, "x").open_to_vec(1, &sealed, &[MORE]);
        prop_assert!(opened.is_err());
    }
}
