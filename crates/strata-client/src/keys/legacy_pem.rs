//! OpenSSL's legacy encrypted PEM (`Proc-Type: 4,ENCRYPTED` with a `DEK-Info` header),
//! which `openssl genrsa -aes256` wrote before OpenSSL 3 and `-traditional` still writes,
//! and which JuiceFS accepts: the PKCS#1 key encrypted with AES-CBC under a key derived
//! from the passphrase by one round of MD5 over (previous digest, passphrase, salt), the
//! salt being the IV's first 8 bytes. Only the AES ciphers are read; a DES-encrypted key
//! is refused with the command that converts it.

use aws_lc_rs::cipher::{
    AES_128, AES_192, AES_256, Algorithm, DecryptionContext, PaddedBlockDecryptingKey,
    UnboundCipherKey,
};
use aws_lc_rs::iv::FixedLength;
use md5::{Digest, Md5};
use strata_types::{Secret, hex};
use zeroize::Zeroizing;

use super::{KeyError, Result};

/// Bytes of the salt taken from the IV.
const SALT_LEN: usize = 8;

/// Whether `pem` is a legacy encrypted PEM.
pub fn is_legacy_encrypted(pem: &str) -> bool {
    pem.lines().any(|l| l.trim() == "Proc-Type: 4,ENCRYPTED")
}

/// The PKCS#1 DER of the legacy encrypted PEM key `pem`.
pub fn decrypt(pem: &str, passphrase: Option<&Secret>) -> Result<Zeroizing<Vec<u8>>> {
    let invalid = |why: &str| KeyError::Invalid(format!("the RSA key (legacy PEM): {why}"));
    let (cipher, iv_hex) = pem
        .lines()
        .find_map(|l| l.trim().strip_prefix("DEK-Info:"))
        .and_then(|v| v.trim().split_once(','))
        .ok_or_else(|| invalid("no DEK-Info header"))?;
    let (algorithm, key_len) = cbc_algorithm(cipher.trim())?;
    let iv: [u8; 16] = hex::decode(iv_hex.trim())
        .and_then(|iv| <[u8; 16]>::try_from(iv).ok())
        .ok_or_else(|| invalid("the DEK-Info IV is not 16 bytes of hex"))?;
    let pass = passphrase.ok_or_else(|| {
        KeyError::Missing(
            "the volume's RSA key needs its passphrase: set JFS_RSA_PASSPHRASE (or \
             STRATA_RSA_PASSPHRASE)"
                .into(),
        )
    })?;
    let mut der = Zeroizing::new(body(pem).ok_or_else(|| invalid("its body is not base64"))?);
    let key = derive_key(pass.expose().as_bytes(), &iv[..SALT_LEN], key_len);
    let wrong = || KeyError::Wrong("wrong passphrase for the volume's RSA key".into());
    let unbound = UnboundCipherKey::new(algorithm, &key).map_err(|_| invalid("a bad key"))?;
    let decrypting = PaddedBlockDecryptingKey::cbc_pkcs7(unbound).map_err(|_| wrong())?;
    let context = DecryptionContext::Iv128(FixedLength::from(iv));
    let len = decrypting
        .decrypt(&mut der, context)
        .map_err(|_| wrong())?
        .len();
    der.truncate(len);
    // A wrong passphrase can still unpad by chance: the key must then parse as a DER
    // SEQUENCE that fills the buffer.
    if !is_der_sequence(&der) {
        return Err(wrong());
    }
    Ok(der)
}

/// The cipher a `DEK-Info` header names, and its key length.
fn cbc_algorithm(name: &str) -> Result<(&'static Algorithm, usize)> {
    match name {
        "AES-128-CBC" => Ok((&AES_128, 16)),
        "AES-192-CBC" => Ok((&AES_192, 24)),
        "AES-256-CBC" => Ok((&AES_256, 32)),
        other => Err(KeyError::Invalid(format!(
            "the RSA key is encrypted with {other}, which is not read: convert it with \
             `openssl pkcs8 -topk8 -v2 aes256 -in OLD.pem -out NEW.pem` (same key, same \
             passphrase or a new one)"
        ))),
    }
}

/// The base64 body between the headers and the END line.
fn body(pem: &str) -> Option<Vec<u8>> {
    use base64::Engine;
    let text: String = pem
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("-----") && !l.contains(':'))
        .collect();
    base64::engine::general_purpose::STANDARD.decode(text).ok()
}

/// OpenSSL's `EVP_BytesToKey` with MD5 and one round: digests of (previous digest,
/// passphrase, salt) concatenated until `len` bytes.
fn derive_key(pass: &[u8], salt: &[u8], len: usize) -> Zeroizing<Vec<u8>> {
    let mut key = Zeroizing::new(Vec::with_capacity(len + 16));
    let mut previous: Option<Zeroizing<Vec<u8>>> = None;
    while key.len() < len {
        let mut md5 = Md5::new();
        if let Some(p) = &previous {
            md5.update(p.as_slice());
        }
        md5.update(pass);
        md5.update(salt);
        let digest = Zeroizing::new(md5.finalize().to_vec());
        key.extend_from_slice(&digest);
        previous = Some(digest);
    }
    key.truncate(len);
    key
}

/// Whether `der` is one DER SEQUENCE, exactly.
fn is_der_sequence(der: &[u8]) -> bool {
    use pkcs8::der::{Decode, Tagged, asn1::AnyRef};
    AnyRef::from_der(der).is_ok_and(|any| any.tag() == pkcs8::der::Tag::Sequence)
}
