//! The keys of an encrypted volume (docs/FORMAT.md, "key records"): making a volume's
//! first data key, wrapping data keys with an RSA key or a key-encryption key (KEK),
//! unwrapping them when a client opens the volume, and the two rotations (`config
//! --rotate-kek` re-wraps the same data keys; `--rotate-data-key` adds one that new data
//! is sealed with). Sealing itself is `strata_object::seal`.
//!
//! - KEK: 32 bytes from a file, an environment variable or a command's output (raw, 64
//!   hex digits or base64); each data key is sealed with AES-256-GCM under it.
//! - RSA: the PEM private key (passphrase-protected PKCS#8, as `openssl genrsa -aes256`
//!   writes it, or unencrypted) is kept in the settings as given; each data key is
//!   encrypted with RSA-OAEP (SHA-256) to its public key. The passphrase comes from
//!   `JFS_RSA_PASSPHRASE` (as JuiceFS reads it) or `STRATA_RSA_PASSPHRASE`. OpenSSL's
//!   legacy encrypted PEM is read too (`legacy_pem`).
//! - JuiceFS's own secrets and object encryption, for imported volumes: `juicefs`.

mod juicefs;
mod legacy_pem;

pub use juicefs::{foreign_cipher, open_juicefs_secret};

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, Nonce, UnboundKey};
use aws_lc_rs::rsa::{
    OAEP_SHA256_MGF1SHA256, OaepPrivateDecryptingKey, OaepPublicEncryptingKey, PrivateDecryptingKey,
};
use strata_meta::{Encryption, Meta, WrappedKey};
use strata_object::seal::{Cipher, DataKey, KEY_LEN, KeyRing, KeySource};
use strata_types::{Secret, hex};
use zeroize::Zeroizing;

/// What went wrong with a volume's keys: one line a user can act on.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("{0}")]
    Missing(String),
    #[error("{0}")]
    Wrong(String),
    #[error("{0}")]
    Invalid(String),
}

type Result<T, E = KeyError> = std::result::Result<T, E>;

/// Where a key-encryption key comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KekSource {
    File(PathBuf),
    Env(String),
    Command(String),
}

impl KekSource {
    /// As the settings record it.
    pub fn hint(&self) -> String {
        match self {
            KekSource::File(p) => format!("file:{}", p.display()),
            KekSource::Env(v) => format!("env:{v}"),
            KekSource::Command(c) => format!("cmd:{c}"),
        }
    }

    /// A recorded source a client may use without being told: files and variables,
    /// never a command (whoever can write the settings must not choose what runs).
    fn from_hint(hint: &str) -> Option<KekSource> {
        if let Some(p) = hint.strip_prefix("file:") {
            return Some(KekSource::File(p.into()));
        }
        hint.strip_prefix("env:").map(|v| KekSource::Env(v.into()))
    }

    /// Read the key.
    pub fn read(&self) -> Result<Kek> {
        let text: Zeroizing<Vec<u8>> = match self {
            KekSource::File(p) => Zeroizing::new(std::fs::read(p).map_err(|e| {
                KeyError::Missing(format!("key-encryption key file {}: {e}", p.display()))
            })?),
            KekSource::Env(v) => match std::env::var(v) {
                Ok(s) => Zeroizing::new(s.into_bytes()),
                Err(_) => {
                    return Err(KeyError::Missing(format!(
                        "the key-encryption key variable {v} is not set"
                    )));
                }
            },
            KekSource::Command(c) => Zeroizing::new(run_key_command(c)?),
        };
        parse_key(&text).map(|k| Kek(Zeroizing::new(k))).ok_or_else(|| {
            KeyError::Invalid(format!(
                "key-encryption key from {}: expected 32 bytes, 64 hex digits or base64 of 32 bytes",
                self.hint()
            ))
        })
    }
}

fn run_key_command(command: &str) -> Result<Vec<u8>> {
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| KeyError::Missing(format!("running key command {command:?}: {e}")))?;
    if !out.status.success() {
        return Err(KeyError::Missing(format!(
            "key command {command:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(out.stdout)
}

/// 32 raw bytes, or 64 hex digits, or base64 of 32 bytes (surrounding whitespace ignored).
fn parse_key(text: &[u8]) -> Option<[u8; KEY_LEN]> {
    if let Ok(raw) = <[u8; KEY_LEN]>::try_from(text) {
        return Some(raw);
    }
    let trimmed = std::str::from_utf8(text).ok()?.trim();
    let bytes = match trimmed.len() {
        64 => Zeroizing::new(hex::decode(trimmed)?),
        _ => {
            use base64::Engine;
            Zeroizing::new(
                base64::engine::general_purpose::STANDARD
                    .decode(trimmed)
                    .ok()?,
            )
        }
    };
    <[u8; KEY_LEN]>::try_from(bytes.as_slice()).ok()
}

/// A key-encryption key (redacted in `Debug`, zeroed on drop).
#[derive(Clone)]
pub struct Kek(Zeroizing<[u8; KEY_LEN]>);

impl fmt::Debug for Kek {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Kek(<redacted>)")
    }
}

/// What a client was told about the volume's keys (flags, environment).
#[derive(Clone, Debug, Default)]
pub struct KeyOptions {
    /// Where the key-encryption key is (else the source recorded at format time, if it is
    /// a file or a variable).
    pub kek: Option<KekSource>,
    /// The RSA key's passphrase (else `JFS_RSA_PASSPHRASE` / `STRATA_RSA_PASSPHRASE`).
    pub rsa_passphrase: Option<Secret>,
}

/// How new data keys are to be wrapped (`format`, `config --rotate-kek`).
#[derive(Debug)]
pub enum NewWrapping {
    Kek(KekSource),
    /// A PEM private key file, and its passphrase (if the key has one).
    Rsa {
        pem: Secret,
        passphrase: Option<Secret>,
    },
}

/// Wraps and unwraps a volume's data keys.
#[derive(Clone)]
pub enum Wrapper {
    Kek(Kek),
    Rsa(Box<PrivateDecryptingKey>),
}

impl fmt::Debug for Wrapper {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Wrapper::Kek(_) => f.write_str("Wrapper::Kek(<redacted>)"),
            Wrapper::Rsa(_) => f.write_str("Wrapper::Rsa(<redacted>)"),
        }
    }
}

/// What ties a wrapped key to its place: the volume, the key id and cipher.
fn binding(uuid: &str, id: u32, cipher: &str) -> Vec<u8> {
    let mut b = b"strata data key v1\0".to_vec();
    b.extend_from_slice(uuid.as_bytes());
    b.push(0);
    b.extend_from_slice(&id.to_le_bytes());
    b.extend_from_slice(cipher.as_bytes());
    b
}

fn kek_cipher(kek: &Kek) -> Result<LessSafeKey> {
    let key = UnboundKey::new(&AES_256_GCM, &kek.0[..])
        .map_err(|_| KeyError::Invalid("unusable key-encryption key".into()))?;
    Ok(LessSafeKey::new(key))
}

impl Wrapper {
    fn wrap(&self, uuid: &str, key: &DataKey) -> Result<String> {
        let bind = binding(uuid, key.id, key.cipher.name());
        let failed = |_| KeyError::Invalid("wrapping a data key failed".into());
        match self {
            Wrapper::Kek(kek) => {
                let mut nonce = [0u8; 12];
                aws_lc_rs::rand::fill(&mut nonce).map_err(failed)?;
                let mut sealed = Zeroizing::new(key.secret().to_vec());
                kek_cipher(kek)?
                    .seal_in_place_append_tag(
                        Nonce::assume_unique_for_key(nonce),
                        Aad::from(bind),
                        &mut *sealed,
                    )
                    .map_err(failed)?;
                Ok(format!("{}{}", hex::encode(&nonce), hex::encode(&sealed)))
            }
            Wrapper::Rsa(private) => rsa_wrap(
                &OaepPublicEncryptingKey::new(private.public_key()).map_err(failed)?,
                &bind,
                key,
            ),
        }
    }

    fn unwrap(&self, uuid: &str, record: &WrappedKey) -> Result<DataKey> {
        let cipher = Cipher::parse(&record.cipher).map_err(KeyError::Invalid)?;
        let bind = binding(uuid, record.id, cipher.name());
        let bytes = hex::decode(&record.wrapped)
            .ok_or_else(|| KeyError::Invalid(format!("data key {}: not hex", record.id)))?;
        let mut plain = Zeroizing::new(vec![0u8; bytes.len()]);
        let secret: &[u8] = match self {
            Wrapper::Kek(kek) => {
                let nonce = bytes.get(..12).ok_or_else(|| {
                    KeyError::Invalid(format!("data key {}: too short", record.id))
                })?;
                let nonce = Nonce::try_assume_unique_for_key(nonce)
                    .map_err(|_| KeyError::Invalid("bad nonce".into()))?;
                plain.copy_from_slice(&bytes);
                kek_cipher(kek)?
                    .open_in_place(nonce, Aad::from(bind), &mut plain[12..])
                    .map_err(|_| {
                        KeyError::Wrong(
                            "the key-encryption key does not open this volume's data keys \
                             (wrong key?)"
                                .into(),
                        )
                    })?
            }
            Wrapper::Rsa(private) => {
                let oaep = OaepPrivateDecryptingKey::new((**private).clone())
                    .map_err(|_| KeyError::Invalid("unusable RSA key".into()))?;
                oaep.decrypt(&OAEP_SHA256_MGF1SHA256, &bytes, &mut plain, Some(&bind))
                    .map_err(|_| {
                        KeyError::Wrong(
                            "the RSA key does not open this volume's data keys (another key?)"
                                .into(),
                        )
                    })?
            }
        };
        let secret = <[u8; KEY_LEN]>::try_from(secret)
            .map_err(|_| KeyError::Invalid(format!("data key {}: wrong length", record.id)))?;
        Ok(DataKey::new(record.id, cipher, secret))
    }
}

fn rsa_wrap(public: &OaepPublicEncryptingKey, bind: &[u8], key: &DataKey) -> Result<String> {
    let mut out = vec![0u8; public.ciphertext_size()];
    let sealed = public
        .encrypt(&OAEP_SHA256_MGF1SHA256, key.secret(), &mut out, Some(bind))
        .map_err(|_| KeyError::Invalid("wrapping a data key with RSA failed".into()))?;
    Ok(hex::encode(sealed))
}

/// The private key in `pem`, decrypted with `passphrase` if it is protected.
pub fn rsa_private_key(pem: &str, passphrase: Option<&Secret>) -> Result<PrivateDecryptingKey> {
    if legacy_pem::is_legacy_encrypted(pem) {
        let pkcs1 = legacy_pem::decrypt(pem, passphrase)?;
        let pkcs8_der = Zeroizing::new(pkcs1_to_pkcs8(&pkcs1)?);
        return PrivateDecryptingKey::from_pkcs8(&pkcs8_der)
            .map_err(|e| KeyError::Invalid(format!("the RSA key is not usable: {e}")));
    }
    let (label, der) = pkcs8::der::pem::decode_vec(pem.as_bytes())
        .map_err(|e| KeyError::Invalid(format!("the RSA key is not PEM: {e}")))?;
    let der = Zeroizing::new(der);
    let pkcs8_der: Zeroizing<Vec<u8>> = match label {
        "ENCRYPTED PRIVATE KEY" => {
            let pass = passphrase.ok_or_else(|| {
                KeyError::Missing(
                    "the volume's RSA key needs its passphrase: set JFS_RSA_PASSPHRASE \
                     (or STRATA_RSA_PASSPHRASE)"
                        .into(),
                )
            })?;
            let info = pkcs8::EncryptedPrivateKeyInfo::try_from(der.as_slice())
                .map_err(|e| KeyError::Invalid(format!("the RSA key: {e}")))?;
            let doc = info
                .decrypt(pass.expose())
                .map_err(|_| KeyError::Wrong("wrong passphrase for the volume's RSA key".into()))?;
            Zeroizing::new(doc.as_bytes().to_vec())
        }
        "PRIVATE KEY" => der.clone(),
        "RSA PRIVATE KEY" => Zeroizing::new(pkcs1_to_pkcs8(&der)?),
        other => {
            return Err(KeyError::Invalid(format!(
                "the RSA key file holds a {other:?}, not a private key"
            )));
        }
    };
    PrivateDecryptingKey::from_pkcs8(&pkcs8_der)
        .map_err(|e| KeyError::Invalid(format!("the RSA key is not usable: {e}")))
}

/// A PKCS#1 RSA private key as PKCS#8.
fn pkcs1_to_pkcs8(der: &[u8]) -> Result<Vec<u8>> {
    use pkcs8::der::Encode;
    let rsa = pkcs8::ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.1");
    let info = pkcs8::PrivateKeyInfo::new(
        pkcs8::AlgorithmIdentifierRef {
            oid: rsa,
            parameters: Some(pkcs8::der::asn1::AnyRef::NULL),
        },
        der,
    );
    info.to_der()
        .map_err(|e| KeyError::Invalid(format!("the RSA key: {e}")))
}

fn passphrase(given: Option<&Secret>) -> Option<Secret> {
    given.cloned().or_else(|| {
        ["STRATA_RSA_PASSPHRASE", "JFS_RSA_PASSPHRASE"]
            .iter()
            .find_map(|v| std::env::var(v).ok())
            .map(Secret::new)
    })
}

/// The wrapper for new keys.
fn new_wrapper(how: &NewWrapping) -> Result<(Wrapper, Encryption)> {
    let empty = |wrapping: &str| Encryption {
        wrapping: wrapping.into(),
        kek_source: None,
        rsa_private_key: None,
        current_key: 1,
        keys: Vec::new(),
        object_unit_kib: None,
    };
    match how {
        NewWrapping::Kek(source) => Ok((
            Wrapper::Kek(source.read()?),
            Encryption {
                kek_source: Some(source.hint()),
                ..empty("kek")
            },
        )),
        NewWrapping::Rsa { pem, passphrase: p } => {
            let private = rsa_private_key(pem.expose(), passphrase(p.as_ref()).as_ref())?;
            Ok((
                Wrapper::Rsa(Box::new(private)),
                Encryption {
                    rsa_private_key: Some(pem.clone()),
                    ..empty("rsa")
                },
            ))
        }
    }
}

/// The encryption record of a new volume: one data key of `cipher`, wrapped as asked.
pub fn new_encryption(uuid: &str, cipher: Cipher, how: &NewWrapping) -> Result<Encryption> {
    let (wrapper, mut record) = new_wrapper(how)?;
    record.object_unit_kib = Some(strata_meta::format::OBJECT_UNIT_KIB);
    let key = DataKey::generate(1, cipher).map_err(|e| KeyError::Invalid(e.to_string()))?;
    record.keys.push(wrapped_record(&wrapper, uuid, &key)?);
    Ok(record)
}

fn wrapped_record(wrapper: &Wrapper, uuid: &str, key: &DataKey) -> Result<WrappedKey> {
    Ok(WrappedKey {
        id: key.id,
        cipher: key.cipher.name().into(),
        wrapped: wrapper.wrap(uuid, key)?,
        created_at: strata_meta::now_ns() / 1_000_000_000,
    })
}

/// A KEK source from `STRATA_ENCRYPT_KEY_FILE` or `STRATA_ENCRYPT_KEY_CMD` (the CLI's
/// flags read them too), for clients without flags: the SDK, `strata sync`.
fn kek_from_environment() -> Option<KekSource> {
    if let Some(path) = std::env::var_os("STRATA_ENCRYPT_KEY_FILE") {
        return Some(KekSource::File(path.into()));
    }
    std::env::var("STRATA_ENCRYPT_KEY_CMD")
        .ok()
        .map(KekSource::Command)
}

/// The wrapper a client opens the volume's keys with: from `opts`, else the environment
/// and the source recorded at format time.
pub fn open_wrapper(record: &Encryption, opts: &KeyOptions) -> Result<Wrapper> {
    match record.wrapping.as_str() {
        "kek" => {
            let recorded = record.kek_source.as_deref();
            let source = opts
                .kek
                .clone()
                .or_else(kek_from_environment)
                .or_else(|| recorded.and_then(KekSource::from_hint))
                .ok_or_else(|| {
                    KeyError::Missing(format!(
                        "this volume is encrypted: give its key-encryption key with \
                         --encrypt-key-file, --encrypt-key-env or --encrypt-key-cmd{}",
                        recorded
                            .map(|h| format!(" (formatted with {h})"))
                            .unwrap_or_default()
                    ))
                })?;
            Ok(Wrapper::Kek(source.read()?))
        }
        "rsa" => {
            let pem = record
                .rsa_private_key
                .as_ref()
                .map(Secret::expose)
                .ok_or_else(|| {
                    KeyError::Invalid("the volume's settings lack its RSA key".into())
                })?;
            let pass = passphrase(opts.rsa_passphrase.as_ref());
            Ok(Wrapper::Rsa(Box::new(rsa_private_key(pem, pass.as_ref())?)))
        }
        other => Err(KeyError::Invalid(format!(
            "unknown key wrapping {other:?} (a newer Strata?)"
        ))),
    }
}

/// Every data key of the volume, unwrapped.
pub fn unwrap_ring(record: &Encryption, uuid: &str, wrapper: &Wrapper) -> Result<KeyRing> {
    let keys = record
        .keys
        .iter()
        .map(|k| wrapper.unwrap(uuid, k))
        .collect::<Result<Vec<_>>>()?;
    KeyRing::new(record.current_key, keys).map_err(|e| KeyError::Invalid(e.to_string()))
}

/// The record with every data key wrapped anew as `new` says (`config --rotate-kek`):
/// the data keys, and so the data, stay as they are.
pub fn rewrap(
    record: &Encryption,
    uuid: &str,
    old: &Wrapper,
    new: &NewWrapping,
) -> Result<Encryption> {
    let ring = unwrap_ring(record, uuid, old)?;
    let (wrapper, mut fresh) = new_wrapper(new)?;
    fresh.current_key = record.current_key;
    fresh.object_unit_kib = record.object_unit_kib;
    for id in ring.ids() {
        if let (Some(key), Some(old)) = (ring.get(id), record.keys.iter().find(|k| k.id == id)) {
            fresh.keys.push(WrappedKey {
                wrapped: wrapper.wrap(uuid, key)?,
                ..old.clone()
            });
        }
    }
    Ok(fresh)
}

/// The record with a new data key that new data is sealed with (`config
/// --rotate-data-key`); data sealed with the older keys keeps them.
pub fn add_data_key(
    record: &Encryption,
    uuid: &str,
    wrapper: &Wrapper,
    cipher: Cipher,
) -> Result<Encryption> {
    // Unwrapping first proves the wrapper is the volume's.
    unwrap_ring(record, uuid, wrapper)?;
    let id = record.keys.iter().map(|k| k.id).max().unwrap_or(0) + 1;
    let key = DataKey::generate(id, cipher).map_err(|e| KeyError::Invalid(e.to_string()))?;
    let mut updated = record.clone();
    updated.keys.push(wrapped_record(wrapper, uuid, &key)?);
    updated.current_key = id;
    Ok(updated)
}

/// The header of an encrypted volume's sealed files (backups, `dump --encrypt`): its
/// name, uuid and wrapped keys — enough to open the file with the volume's KEK or RSA
/// key when the engine it came from is gone, and nothing secret.
pub fn sealed_file_header(format: &strata_meta::Format) -> Result<Vec<u8>> {
    let record = format
        .encryption
        .as_ref()
        .ok_or_else(|| KeyError::Missing(format!("volume {} is not encrypted", format.name)))?;
    let header = serde_json::json!({
        "volume": format.name,
        "uuid": format.uuid,
        "encryption": record,
    });
    serde_json::to_vec(&header).map_err(|e| KeyError::Invalid(e.to_string()))
}

/// The data keys a sealed file's header names, unwrapped as `opts` says.
pub fn sealed_file_keys(header: &[u8], opts: &KeyOptions) -> Result<KeyRing> {
    let bad = |e: String| KeyError::Invalid(format!("the sealed file's header: {e}"));
    let value: serde_json::Value =
        serde_json::from_slice(header).map_err(|e| bad(e.to_string()))?;
    let uuid = value["uuid"]
        .as_str()
        .ok_or_else(|| bad("no uuid".into()))?;
    let record: Encryption =
        serde_json::from_value(value["encryption"].clone()).map_err(|e| bad(e.to_string()))?;
    unwrap_ring(&record, uuid, &open_wrapper(&record, opts)?)
}

/// Fetches the volume's keys again from its settings (a data key added since the client
/// started), unwrapped with the wrapper it opened with.
pub struct SettingsKeys {
    pub meta: Arc<Meta>,
    pub wrapper: Wrapper,
}

impl fmt::Debug for SettingsKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SettingsKeys")
    }
}

#[async_trait]
impl KeySource for SettingsKeys {
    async fn reload(&self) -> strata_object::Result<KeyRing> {
        let no_key = |e: String| strata_object::ObjectError::NoKey(e);
        let format = self
            .meta
            .load()
            .await
            .map_err(|e| no_key(format!("reading the volume's keys: {e}")))?;
        let record = format
            .encryption
            .as_ref()
            .ok_or_else(|| no_key("the volume's settings lost their keys".into()))?;
        unwrap_ring(record, &format.uuid, &self.wrapper).map_err(|e| no_key(e.to_string()))
    }
}

#[cfg(test)]
mod tests;
