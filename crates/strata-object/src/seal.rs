//! The data keys of an encrypted volume and sealing with them (FORMAT.md, "sealed
//! segments"). A volume has one or more 256-bit data keys, each with an id and a cipher
//! (AES-256-GCM or ChaCha20-Poly1305); new data is sealed with the current one, and data
//! sealed with an older one keeps its key id. Nothing is sealed under a data key itself:
//! each use (an object, a cache file, a staged block, a dump) gets its own key derived
//! with HKDF-SHA256 from the data key, a domain label and the thing's name, and every
//! segment a fresh random 96-bit nonce. A sealed segment is the ciphertext followed by a
//! 36-byte trailer: a 4-byte tag (what the segment is: more follow, the last, a cache slot),
//! the key id, the nonce and the 16-byte authentication tag. The name, the segment's index,
//! the tag and the key id are associated data, so a segment moved to another object, place
//! or key fails to open.
//!
//! Key wrapping (RSA, key-encryption keys) is not here: this module gets plain data keys
//! from whoever unwrapped them (`strata-client`).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use aws_lc_rs::aead::{self, Aad, LessSafeKey, Nonce, UnboundKey};
use aws_lc_rs::hkdf;
use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use parking_lot::{Mutex, RwLock};
use zeroize::Zeroizing;

use crate::{ObjectError, Result};

/// Bytes after each sealed segment: tag, key id, nonce, authentication tag.
pub const SEALED_TRAILER: usize = 4 + 4 + NONCE_LEN + TAG_LEN;
const NONCE_LEN: usize = 12;
const TAG_LEN: usize = 16;
/// Bytes of a data key.
pub const KEY_LEN: usize = 32;

/// The authenticated cipher of a data key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cipher {
    Aes256Gcm,
    ChaCha20Poly1305,
}

impl Cipher {
    /// From a name as `format --encrypt-algo` takes it: `aes256gcm` or `chacha20`, with
    /// or without JuiceFS's `-rsa` suffix (the wrapping is chosen by the key flags).
    pub fn parse(name: &str) -> Result<Cipher, String> {
        match name.strip_suffix("-rsa").unwrap_or(name) {
            "aes256gcm" | "aes-256-gcm" => Ok(Cipher::Aes256Gcm),
            "chacha20" | "chacha20-poly1305" => Ok(Cipher::ChaCha20Poly1305),
            _ => Err(format!(
                "encryption algorithm {name:?}: use aes256gcm-rsa or chacha20-rsa \
                 (aes256gcm or chacha20 with a key-encryption key)"
            )),
        }
    }

    /// The name stored in the volume's settings.
    pub fn name(self) -> &'static str {
        match self {
            Cipher::Aes256Gcm => "aes256gcm",
            Cipher::ChaCha20Poly1305 => "chacha20",
        }
    }

    fn aead(self) -> &'static aead::Algorithm {
        match self {
            Cipher::Aes256Gcm => &aead::AES_256_GCM,
            Cipher::ChaCha20Poly1305 => &aead::CHACHA20_POLY1305,
        }
    }
}

/// What a derived key protects: keys of different uses never open each other's bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Domain {
    /// Blocks in the object store.
    Object,
    /// Segments in the disk cache.
    Cache,
    /// Blocks in the writeback staging log.
    Staging,
    /// Segments sent to a cache-group peer.
    Peer,
    /// Metadata dumps and backups.
    Dump,
}

impl Domain {
    fn label(self) -> &'static [u8] {
        match self {
            Domain::Object => b"strata sealed object v3",
            Domain::Cache => b"strata sealed cache v4",
            Domain::Staging => b"strata sealed staging v3",
            Domain::Peer => b"strata sealed peer v3",
            Domain::Dump => b"strata sealed dump v1",
        }
    }
}

/// One data key: its id, cipher and secret bytes (redacted in `Debug`, zeroed on drop).
pub struct DataKey {
    pub id: u32,
    pub cipher: Cipher,
    secret: Zeroizing<[u8; KEY_LEN]>,
    prk: hkdf::Prk,
}

impl fmt::Debug for DataKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "DataKey({}, {}, <redacted>)",
            self.id,
            self.cipher.name()
        )
    }
}

impl DataKey {
    pub fn new(id: u32, cipher: Cipher, secret: [u8; KEY_LEN]) -> DataKey {
        let secret = Zeroizing::new(secret);
        let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, b"strata data key").extract(&*secret);
        DataKey {
            id,
            cipher,
            secret,
            prk,
        }
    }

    /// A new random key.
    pub fn generate(id: u32, cipher: Cipher) -> Result<DataKey> {
        let mut secret = Zeroizing::new([0u8; KEY_LEN]);
        aws_lc_rs::rand::fill(&mut *secret)
            .map_err(|_| ObjectError::Other("no random bytes for a data key".into()))?;
        Ok(DataKey::new(id, cipher, *secret))
    }

    /// The secret bytes, for wrapping.
    pub fn secret(&self) -> &[u8; KEY_LEN] {
        &self.secret
    }

    /// The key for `name` in `domain`.
    fn derive(&self, domain: Domain, name: &str) -> Result<LessSafeKey> {
        let info = [domain.label(), b"\0", name.as_bytes()];
        let algorithm = self.cipher.aead();
        let okm = self
            .prk
            .expand(&info, algorithm)
            .map_err(|_| ObjectError::Other("deriving a key failed".into()))?;
        Ok(LessSafeKey::new(UnboundKey::from(okm)))
    }
}

/// A volume's data keys: every id its data may be sealed with, and the current one.
pub struct KeyRing {
    current: u32,
    keys: BTreeMap<u32, DataKey>,
    /// Keys derived lately, by (domain, key id, name): a random reader of one block derives
    /// its key once, not per read (HKDF and the cipher's key schedule cost microseconds).
    derived: Mutex<HashMap<(Domain, u32, String), Arc<LessSafeKey>>>,
}

/// Derived keys kept at most (then forgotten all at once).
const DERIVED_KEPT: usize = 4096;

impl fmt::Debug for KeyRing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ids: Vec<u32> = self.keys.keys().copied().collect();
        write!(f, "KeyRing(current {}, keys {ids:?})", self.current)
    }
}

impl KeyRing {
    /// `keys` must hold `current`.
    pub fn new(current: u32, keys: Vec<DataKey>) -> Result<KeyRing> {
        let keys: BTreeMap<u32, DataKey> = keys.into_iter().map(|k| (k.id, k)).collect();
        if !keys.contains_key(&current) {
            return Err(ObjectError::NoKey(format!(
                "the current data key {current} is not among the volume's keys"
            )));
        }
        Ok(KeyRing {
            current,
            keys,
            derived: Mutex::default(),
        })
    }

    /// The key for `name` in `domain` under data key `id` (derived once, then kept).
    fn derived(&self, domain: Domain, id: u32, name: &str) -> Option<Result<Arc<LessSafeKey>>> {
        let data_key = self.keys.get(&id)?;
        let wanted = (domain, id, name.to_string());
        if let Some(key) = self.derived.lock().get(&wanted) {
            return Some(Ok(key.clone()));
        }
        Some(data_key.derive(domain, name).map(|key| {
            let key = Arc::new(key);
            let mut derived = self.derived.lock();
            if derived.len() >= DERIVED_KEPT {
                derived.clear();
            }
            derived.insert(wanted, key.clone());
            key
        }))
    }

    pub fn current(&self) -> &DataKey {
        // `new` checked that the current key is there.
        &self.keys[&self.current]
    }

    pub fn get(&self, id: u32) -> Option<&DataKey> {
        self.keys.get(&id)
    }

    pub fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.keys.keys().copied()
    }

    /// A sealer for `name` in `domain` with the current key.
    pub fn sealer(&self, domain: Domain, name: &str) -> Result<Sealer> {
        let id = self.current;
        let key = self
            .derived(domain, id, name)
            .ok_or_else(|| ObjectError::NoKey(format!("data key {id}")))??;
        Ok(Sealer {
            key,
            key_id: id,
            name: name.to_string(),
        })
    }

    /// An opener for `name` in `domain` (keys derived as segments ask for them).
    pub fn opener<'a>(&'a self, domain: Domain, name: &'a str) -> Opener<'a> {
        Opener {
            ring: self,
            domain,
            name,
            derived: Vec::new(),
        }
    }
}

/// Where a volume's keys are fetched again when data names a key id this client does not
/// have (a data key added by `config --rotate-data-key` after this client started).
#[async_trait]
pub trait KeySource: Send + Sync + fmt::Debug {
    async fn reload(&self) -> Result<KeyRing>;
}

/// A reload of the keys under way, awaited by every reader that needs it.
type Reload = Shared<BoxFuture<'static, Result<Arc<KeyRing>>>>;

/// The keys a client holds, replaced when a rotation adds one.
#[derive(Debug)]
pub struct Keys {
    ring: RwLock<Arc<KeyRing>>,
    source: Option<Arc<dyn KeySource>>,
    /// The reload in flight: readers meeting a new key id together read the settings
    /// once, and no lock is held while they do.
    reloading: Mutex<Option<Reload>>,
}

impl Keys {
    pub fn new(ring: KeyRing, source: Option<Arc<dyn KeySource>>) -> Keys {
        Keys {
            ring: RwLock::new(Arc::new(ring)),
            source,
            reloading: Mutex::new(None),
        }
    }

    pub fn ring(&self) -> Arc<KeyRing> {
        self.ring.read().clone()
    }

    /// Fetch the keys again if `missing` is not held; whether it is now.
    pub async fn reload_for(&self, missing: u32) -> Result<bool> {
        if self.ring().get(missing).is_some() {
            return Ok(true);
        }
        let Some(source) = &self.source else {
            return Ok(false);
        };
        let reload = {
            let mut reloading = self.reloading.lock();
            match reloading.as_ref() {
                Some(under_way) => under_way.clone(),
                None => {
                    let source = source.clone();
                    let fresh: Reload = async move { source.reload().await.map(Arc::new) }
                        .boxed()
                        .shared();
                    *reloading = Some(fresh.clone());
                    fresh
                }
            }
        };
        let result = reload.clone().await;
        {
            // The first reader back publishes the keys and ends the reload.
            let mut reloading = self.reloading.lock();
            if reloading.as_ref().is_some_and(|r| r.ptr_eq(&reload)) {
                *reloading = None;
                if let Ok(ring) = &result {
                    *self.ring.write() = ring.clone();
                }
            }
        }
        Ok(result?.get(missing).is_some())
    }
}

/// Seals segments of one thing (the name its key was derived for) with one derived key.
pub struct Sealer {
    key: Arc<LessSafeKey>,
    key_id: u32,
    name: String,
}

impl fmt::Debug for Sealer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Sealer({}, key {})", self.name, self.key_id)
    }
}

fn aad(name: &str, index: u32, tag: &[u8; 4], key_id: u32) -> Vec<u8> {
    let mut aad = Vec::with_capacity(name.len() + 12);
    aad.extend_from_slice(name.as_bytes());
    aad.extend_from_slice(&index.to_le_bytes());
    aad.extend_from_slice(tag);
    aad.extend_from_slice(&key_id.to_le_bytes());
    aad
}

impl Sealer {
    pub fn key_id(&self) -> u32 {
        self.key_id
    }

    /// Encrypt `in_out` (segment `index`) in place and return its trailer.
    pub fn seal(
        &self,
        index: u32,
        tag: &[u8; 4],
        in_out: &mut [u8],
    ) -> Result<[u8; SEALED_TRAILER]> {
        let mut nonce = [0u8; NONCE_LEN];
        aws_lc_rs::rand::fill(&mut nonce)
            .map_err(|_| ObjectError::Other("no random bytes for a nonce".into()))?;
        let auth = self
            .key
            .seal_in_place_separate_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(aad(&self.name, index, tag, self.key_id)),
                in_out,
            )
            .map_err(|_| ObjectError::Other(format!("sealing {} failed", self.name)))?;
        let mut trailer = [0u8; SEALED_TRAILER];
        trailer[..4].copy_from_slice(tag);
        trailer[4..8].copy_from_slice(&self.key_id.to_le_bytes());
        trailer[8..8 + NONCE_LEN].copy_from_slice(&nonce);
        trailer[8 + NONCE_LEN..].copy_from_slice(auth.as_ref());
        Ok(trailer)
    }

    /// `data` sealed as one segment: ciphertext then trailer.
    pub fn seal_to_vec(&self, index: u32, tag: &[u8; 4], data: &[u8]) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(data.len() + SEALED_TRAILER);
        out.extend_from_slice(data);
        let trailer = self.seal(index, tag, &mut out)?;
        out.extend_from_slice(&trailer);
        Ok(out)
    }
}

/// Why a sealed segment did not open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenFailure {
    /// Too short to hold a trailer.
    CutShort,
    /// The trailer's tag is not one the caller accepts.
    UnknownTag([u8; 4]),
    /// Sealed with a key id this ring does not hold.
    NoKey(u32),
    /// The bytes fail authentication: tampered, moved, or sealed with another key.
    Forged,
}

impl fmt::Display for OpenFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpenFailure::CutShort => write!(f, "sealed segment cut short"),
            OpenFailure::UnknownTag(t) => write!(f, "unknown segment tag {t:02x?}"),
            OpenFailure::NoKey(id) => write!(
                f,
                "sealed with data key {id}, which this client does not have"
            ),
            OpenFailure::Forged => {
                write!(f, "authentication failed (tampered, moved or wrong key)")
            }
        }
    }
}

/// The tag, key id and nonce of a trailer whose tag is one of `accept`.
fn parse_trailer(
    trailer: &[u8],
    accept: &[&[u8; 4]],
) -> std::result::Result<([u8; 4], u32, [u8; NONCE_LEN]), OpenFailure> {
    let mut tag = [0u8; 4];
    tag.copy_from_slice(&trailer[..4]);
    if !accept.iter().any(|t| **t == tag) {
        return Err(OpenFailure::UnknownTag(tag));
    }
    let key_id = u32::from_le_bytes([trailer[4], trailer[5], trailer[6], trailer[7]]);
    let mut nonce = [0u8; NONCE_LEN];
    nonce.copy_from_slice(&trailer[8..8 + NONCE_LEN]);
    Ok((tag, key_id, nonce))
}

/// The data key id the sealed segment `sealed` (ciphertext then trailer) names.
pub fn key_id_of(sealed: &[u8]) -> Option<u32> {
    let at = sealed.len().checked_sub(SEALED_TRAILER)?;
    let id = sealed.get(at + 4..at + 8)?;
    Some(u32::from_le_bytes([id[0], id[1], id[2], id[3]]))
}

/// Opens the segments of one thing; derives each key id's key once.
pub struct Opener<'a> {
    ring: &'a KeyRing,
    domain: Domain,
    name: &'a str,
    derived: Vec<(u32, Arc<LessSafeKey>)>,
}

impl fmt::Debug for Opener<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Opener({:?}, {})", self.domain, self.name)
    }
}

impl Opener<'_> {
    /// The tag of a sealed segment (its last 36 bytes are the trailer).
    pub fn tag_of(sealed: &[u8]) -> Option<[u8; 4]> {
        let at = sealed.len().checked_sub(SEALED_TRAILER)?;
        let mut tag = [0u8; 4];
        tag.copy_from_slice(&sealed[at..at + 4]);
        Some(tag)
    }

    /// Decrypt segment `index` (`sealed`: ciphertext then trailer) into `out` (which must
    /// be `sealed.len() - SEALED_TRAILER` bytes); returns the segment's tag.
    pub fn open_into(
        &mut self,
        index: u32,
        sealed: &[u8],
        accept: &[&[u8; 4]],
        out: &mut [u8],
    ) -> std::result::Result<[u8; 4], OpenFailure> {
        let at = sealed
            .len()
            .checked_sub(SEALED_TRAILER)
            .ok_or(OpenFailure::CutShort)?;
        let (ciphertext, trailer) = sealed.split_at(at);
        let (tag, key_id, nonce) = parse_trailer(trailer, accept)?;
        let auth = &trailer[8 + NONCE_LEN..];
        let aad = aad(self.name, index, &tag, key_id);
        let key = self.key(key_id)?;
        let out = out
            .get_mut(..ciphertext.len())
            .ok_or(OpenFailure::CutShort)?;
        key.open_separate_gather(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(aad),
            ciphertext,
            auth,
            out,
        )
        .map_err(|_| OpenFailure::Forged)?;
        Ok(tag)
    }

    /// Decrypt segment `index` in place: `sealed` is its ciphertext then trailer, and its
    /// first `sealed.len() - SEALED_TRAILER` bytes become the plaintext. Returns the tag.
    pub fn open_in_place(
        &mut self,
        index: u32,
        sealed: &mut [u8],
        accept: &[&[u8; 4]],
    ) -> std::result::Result<[u8; 4], OpenFailure> {
        let at = sealed
            .len()
            .checked_sub(SEALED_TRAILER)
            .ok_or(OpenFailure::CutShort)?;
        let (ciphertext, trailer) = sealed.split_at_mut(at);
        self.open_detached(index, ciphertext, trailer, accept)
    }

    /// Decrypt segment `index` in place when its ciphertext and its trailer were read
    /// apart (`trailer`: [`SEALED_TRAILER`] bytes). Returns the tag.
    pub fn open_detached(
        &mut self,
        index: u32,
        ciphertext: &mut [u8],
        trailer: &[u8],
        accept: &[&[u8; 4]],
    ) -> std::result::Result<[u8; 4], OpenFailure> {
        if trailer.len() != SEALED_TRAILER {
            return Err(OpenFailure::CutShort);
        }
        let (tag, key_id, nonce) = parse_trailer(trailer, accept)?;
        let aad = aad(self.name, index, &tag, key_id);
        let key = self.key(key_id)?;
        key.open_in_place_separate_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(aad),
            &trailer[8 + NONCE_LEN..],
            ciphertext,
        )
        .map_err(|_| OpenFailure::Forged)?;
        Ok(tag)
    }

    /// Decrypt one sealed segment into a new buffer.
    pub fn open_to_vec(
        &mut self,
        index: u32,
        sealed: &[u8],
        accept: &[&[u8; 4]],
    ) -> std::result::Result<(Vec<u8>, [u8; 4]), OpenFailure> {
        let len = sealed
            .len()
            .checked_sub(SEALED_TRAILER)
            .ok_or(OpenFailure::CutShort)?;
        let mut out = vec![0u8; len];
        let tag = self.open_into(index, sealed, accept, &mut out)?;
        Ok((out, tag))
    }

    fn key(&mut self, id: u32) -> std::result::Result<&LessSafeKey, OpenFailure> {
        let at = match self.derived.iter().position(|(k, _)| *k == id) {
            Some(at) => at,
            None => {
                let derived = self
                    .ring
                    .derived(self.domain, id, self.name)
                    .ok_or(OpenFailure::NoKey(id))?
                    .map_err(|_| OpenFailure::Forged)?;
                self.derived.push((id, derived));
                self.derived.len() - 1
            }
        };
        Ok(&self.derived[at].1)
    }
}

pub mod stream;

#[cfg(test)]
mod tests;
