//! Keys of a volume imported from JuiceFS (docs/FORMAT.md, "Foreign blocks"):
//!
//! - JuiceFS 1.1+ keeps the secrets in its settings (`SecretKey`, `SessionToken`,
//!   `EncryptKey`) encrypted when `KeyEncrypted` is set: base64 of a 12-byte nonce and the
//!   AES-128-GCM ciphertext under the MD5 digest of the volume's UUID (text). That hides
//!   them from a casual reader only — the UUID is beside them — and the import opens them.
//! - An encrypted JuiceFS volume's objects are opened with its RSA private key, which the
//!   imported volume keeps as its own RSA key (the encryption record), so one key and one
//!   passphrase serve both the foreign blocks and the native ones written after.

use aws_lc_rs::aead::{AES_128_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use md5::{Digest, Md5};
use strata_meta::Encryption;
use strata_object::adopted::ForeignCipher;
use strata_object::seal::Cipher;
use strata_types::Secret;

use super::{KeyError, KeyOptions, Result, passphrase, rsa_private_key};

/// The secret JuiceFS keeps as `sealed` in the settings of the volume `uuid`.
pub fn open_juicefs_secret(uuid: &str, sealed: &Secret) -> Result<Secret> {
    use base64::Engine;
    let invalid = |why: &str| KeyError::Invalid(format!("a secret in the JuiceFS settings: {why}"));
    if sealed.is_empty() {
        return Ok(Secret::new(String::new()));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(sealed.expose().trim())
        .map_err(|_| invalid("not base64"))?;
    if bytes.len() < NONCE_LEN {
        return Err(invalid("too short"));
    }
    let (nonce, ciphertext) = bytes.split_at(NONCE_LEN);
    let key = Md5::digest(uuid.as_bytes());
    let opener = UnboundKey::new(&AES_128_GCM, key.as_slice())
        .map(LessSafeKey::new)
        .map_err(|_| invalid("no key"))?;
    let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| invalid("a bad nonce"))?;
    let mut buf = ciphertext.to_vec();
    let plain = opener
        .open_in_place(nonce, Aad::empty(), &mut buf)
        .map_err(|_| invalid("it does not open with the volume's UUID (edited settings?)"))?;
    let text = String::from_utf8(plain.to_vec()).map_err(|_| invalid("not text"))?;
    Ok(Secret::new(text))
}

/// What opens the foreign blocks of an imported volume encrypted with `cipher`
/// (`aes256gcm` or `chacha20`): the volume's RSA key from its encryption `record`,
/// unlocked with the passphrase `opts` or the environment give.
pub fn foreign_cipher(
    record: &Encryption,
    cipher: &str,
    opts: &KeyOptions,
) -> Result<ForeignCipher> {
    let pem = record
        .rsa_private_key
        .as_ref()
        .filter(|_| record.wrapping == "rsa")
        .ok_or_else(|| {
            KeyError::Invalid(
                "the imported blocks are encrypted, and the settings hold no RSA key".into(),
            )
        })?;
    let cipher = Cipher::parse(cipher).map_err(KeyError::Invalid)?;
    let pass = passphrase(opts.rsa_passphrase.as_ref());
    let rsa = rsa_private_key(pem.expose(), pass.as_ref())?;
    ForeignCipher::new(cipher, rsa).map_err(KeyError::Invalid)
}
