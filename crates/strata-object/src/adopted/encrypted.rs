//! JuiceFS's encrypted objects (docs/FORMAT.md, "Foreign blocks"): each object has its
//! own random 256-bit key, encrypted to the volume's RSA key with RSA-OAEP (SHA-256,
//! label `keys`), and its (possibly compressed) payload sealed with AES-256-GCM or
//! ChaCha20-Poly1305 under it:
//!
//! `[key length: u16 BE][nonce length: u8][wrapped key][nonce][ciphertext + 16-byte tag]`
//!
//! The tag authenticates the payload, so a damaged encrypted foreign block is found
//! (a plain one is not).

use std::fmt;
use std::sync::Arc;

use aws_lc_rs::aead::{AES_256_GCM, Aad, CHACHA20_POLY1305, LessSafeKey, Nonce, UnboundKey};
use aws_lc_rs::rsa::{OAEP_SHA256_MGF1SHA256, OaepPrivateDecryptingKey, PrivateDecryptingKey};
use zeroize::Zeroizing;

use crate::seal::Cipher;

/// The OAEP label JuiceFS encrypts each object's key with.
const KEY_LABEL: &[u8] = b"keys";
/// Bytes of an object key.
const OBJECT_KEY_LEN: usize = 32;
/// Bytes of the AEAD tag after the ciphertext.
const TAG_LEN: usize = 16;

/// How a foreign volume's objects are encrypted, and the key to open them with.
#[derive(Clone)]
pub struct ForeignCipher {
    cipher: Cipher,
    rsa: Arc<OaepPrivateDecryptingKey>,
}

impl fmt::Debug for ForeignCipher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ForeignCipher({:?}, <rsa key redacted>)", self.cipher)
    }
}

impl PartialEq for ForeignCipher {
    fn eq(&self, other: &ForeignCipher) -> bool {
        self.cipher == other.cipher && Arc::ptr_eq(&self.rsa, &other.rsa)
    }
}

impl Eq for ForeignCipher {}

impl ForeignCipher {
    pub fn new(cipher: Cipher, rsa: PrivateDecryptingKey) -> Result<ForeignCipher, String> {
        let rsa = OaepPrivateDecryptingKey::new(rsa)
            .map_err(|_| "the RSA key cannot decrypt with OAEP".to_string())?;
        Ok(ForeignCipher {
            cipher,
            rsa: Arc::new(rsa),
        })
    }

    /// The payload of the encrypted object `stored` (as JuiceFS compressed it, if it
    /// did), or why it cannot be opened.
    pub fn open(&self, stored: &[u8]) -> Result<Vec<u8>, String> {
        let Parts {
            wrapped,
            nonce,
            sealed,
        } = split(stored)?;
        let key = self.unwrap_key(wrapped)?;
        let algorithm = match self.cipher {
            Cipher::Aes256Gcm => &AES_256_GCM,
            Cipher::ChaCha20Poly1305 => &CHACHA20_POLY1305,
        };
        let opener = UnboundKey::new(algorithm, &key)
            .map(LessSafeKey::new)
            .map_err(|_| "a bad object key".to_string())?;
        let nonce = Nonce::try_assume_unique_for_key(nonce)
            .map_err(|_| format!("a {}-byte nonce", nonce.len()))?;
        let mut buf = sealed.to_vec();
        let plain_len = opener
            .open_in_place(nonce, Aad::empty(), &mut buf)
            .map_err(|_| "authentication failed (damaged, or another volume's key)".to_string())?
            .len();
        buf.truncate(plain_len);
        Ok(buf)
    }

    /// The object's own key, decrypted with the volume's RSA key.
    fn unwrap_key(&self, wrapped: &[u8]) -> Result<Zeroizing<Vec<u8>>, String> {
        let mut plain = Zeroizing::new(vec![0u8; self.rsa.min_output_size()]);
        let len = self
            .rsa
            .decrypt(
                &OAEP_SHA256_MGF1SHA256,
                wrapped,
                &mut plain,
                Some(KEY_LABEL),
            )
            .map_err(|_| "its key does not decrypt with the volume's RSA key".to_string())?
            .len();
        if len != OBJECT_KEY_LEN {
            return Err(format!("a {len}-byte object key"));
        }
        plain.truncate(len);
        Ok(plain)
    }
}

/// The pieces of an encrypted object.
struct Parts<'a> {
    wrapped: &'a [u8],
    nonce: &'a [u8],
    /// Ciphertext and tag.
    sealed: &'a [u8],
}

fn split(stored: &[u8]) -> Result<Parts<'_>, String> {
    let short = || format!("{} bytes, too short for an encrypted object", stored.len());
    let [hi, lo, nonce_len, rest @ ..] = stored else {
        return Err(short());
    };
    let key_len = usize::from(u16::from_be_bytes([*hi, *lo]));
    let nonce_len = usize::from(*nonce_len);
    if rest.len() < key_len + nonce_len + TAG_LEN {
        return Err(short());
    }
    let (wrapped, rest) = rest.split_at(key_len);
    let (nonce, sealed) = rest.split_at(nonce_len);
    Ok(Parts {
        wrapped,
        nonce,
        sealed,
    })
}
