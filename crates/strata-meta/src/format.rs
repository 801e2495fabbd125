//! The volume format record (`Cformat`, JSON): what `strata format` writes and every
//! client reads first.

use serde::{Deserialize, Serialize};
use strata_types::Secret;

use crate::error::{MetaError, Result};

/// Version of the metadata layout described in docs/FORMAT.md.
pub const META_VERSION: u32 = 5;
/// First metadata version whose inode records keep the "may have xattrs" flag.
pub const XATTR_FLAG_VERSION: u32 = 3;
/// First metadata version whose inode records may refer to access control lists.
pub const ACL_VERSION: u32 = 5;
/// First metadata version of encrypted volumes (data sealed, object v3): older clients,
/// which would read sealed blocks as corrupt and write plain ones, refuse them.
pub const ENCRYPTION_VERSION: u32 = 6;
/// First metadata version of encrypted volumes whose objects are sealed in 16 KiB
/// segments (their encryption record names `object_unit_kib`): clients that would read
/// them in 32 KiB segments refuse them.
pub const OBJECT_UNIT_VERSION: u32 = 7;
/// First metadata version of volumes that may hold foreign blocks (imported from
/// JuiceFS, `foreign` in the format record): older clients would read them as corrupt.
pub const FOREIGN_VERSION: u32 = 8;
/// First metadata version of volumes whose foreign blocks are encrypted (`encryption` in
/// the `foreign` record): older clients would read them as corrupt.
pub const FOREIGN_ENCRYPTION_VERSION: u32 = 9;
/// First metadata version of volumes whose foreign blocks have JuiceFS's hashed names
/// (`hash_prefix` in the `foreign` record): older clients would find none of them.
pub const FOREIGN_HASHED_VERSION: u32 = 10;
/// First metadata version whose inodes may carry protections (immutable, append-only,
/// object lock): older clients would not enforce them. A volume rises to it when the
/// first protection is set.
pub const PROTECTION_VERSION: u32 = 11;
/// First metadata version of volumes with several stores (`stores` in the format record,
/// placement records `P`, tier policies `G`): older clients would look for moved data in
/// the volume's first store only. A volume rises to it when its first store is added.
pub const PLACEMENT_VERSION: u32 = 12;
/// The newest metadata version this build serves (new volumes get [`META_VERSION`], or
/// the version a feature they use needs).
pub const UNDERSTOOD_VERSION: u32 = 12;
/// Payload KiB per sealed object segment on volumes encrypted since session 40.
pub const OBJECT_UNIT_KIB: u32 = 16;

/// Encryption at rest (docs/FORMAT.md, "key records"): the volume's data keys, each
/// stored only wrapped, and what wraps them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Encryption {
    /// `rsa` (an RSA key whose passphrase-protected private key is kept here) or `kek`
    /// (a 256-bit key-encryption key the clients get from a file, a variable or a command).
    pub wrapping: String,
    /// With `kek`: where the key came from at format time (`file:PATH`, `env:NAME`,
    /// `cmd:COMMAND`); clients use a `file:` or `env:` source when given none, never run
    /// a command from here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kek_source: Option<String>,
    /// With `rsa`: the private key as given (PEM, normally encrypted with its passphrase;
    /// a `Secret` all the same, for an unprotected one is the key itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rsa_private_key: Option<Secret>,
    /// The id new data is sealed with.
    pub current_key: u32,
    /// Every data key the volume's data may be sealed with.
    pub keys: Vec<WrappedKey>,
    /// Payload KiB per sealed segment of an object ([`OBJECT_UNIT_KIB`] for volumes
    /// encrypted since session 40); absent: 32, the unit of volumes encrypted before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_unit_kib: Option<u32>,
}

/// Blocks another file system wrote, adopted in place by an import (docs/FORMAT.md,
/// "Foreign blocks"): every slice whose id is below `slices_below` is such a block.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Foreign {
    /// Whose blocks: `juicefs`.
    pub kind: String,
    /// The imported volume's uuid (JuiceFS's `UUID`).
    pub uuid: String,
    /// Slice ids below this are foreign (JuiceFS's `nextChunk` at the import).
    pub slices_below: u64,
    /// How the foreign blocks are compressed: `none`, `lz4` (LZ4 block format) or `zstd`.
    pub compression: String,
    /// How they are encrypted, if they are: `aes256gcm` or `chacha20`, each object's key
    /// wrapped with the volume's RSA key (the one in `encryption`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encryption: Option<String>,
    /// They are stored under JuiceFS's `--hash-prefix` names.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hash_prefix: bool,
    /// Every one has recorded checksums (`fsck --verify --record-checksums`), which
    /// reads check. Older clients read them unchecked.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub checksums: bool,
}

/// One data key, wrapped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WrappedKey {
    pub id: u32,
    /// `aes256gcm` or `chacha20`.
    pub cipher: String,
    /// The wrapped key, hex.
    pub wrapped: String,
    /// Unix seconds.
    pub created_at: i64,
}

/// A volume's settings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Format {
    pub name: String,
    pub uuid: String,
    /// Object store kind: `file`, `s3`, `mem`.
    pub storage: String,
    pub bucket: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_key: Option<Secret>,
    /// Session token of temporary S3 credentials (`--session-token`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_token: Option<Secret>,
    /// Block size in KiB.
    pub block_size_kib: u32,
    /// `none`, `lz4` or `zstd`.
    pub compression: String,
    /// Days deleted files stay in `.trash`; 0 disables the trash.
    pub trash_days: u32,
    /// Capacity limit in bytes; 0 = unlimited.
    pub capacity: u64,
    /// Inode limit; 0 = unlimited.
    pub inodes: u64,
    /// Creation time, Unix seconds.
    pub created_at: i64,
    pub meta_version: u32,
    /// POSIX access control lists are kept and enforced (`--enable-acl`; metadata
    /// version 5 or later). Once on, never off: see docs/SEMANTICS.md.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub enable_acl: bool,
    /// Encryption at rest, chosen at format time and never removed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encryption: Option<Encryption>,
    /// Blocks adopted from another file system by an import (never added later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub foreign: Option<Foreign>,
    /// Stores beyond the volume's own (`storage`/`bucket`, store 0, named `default`),
    /// added by `config --add-store` (docs/PLACEMENT.md); never removed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stores: Vec<StoreSpec>,
}

/// One more store of a volume: where it is, and the id placement records name it by.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreSpec {
    /// 1-255, never reused (0 is the volume's own store).
    pub id: u8,
    /// What policies and commands call it: 1-32 characters of a-z, 0-9, '-' and '_'.
    pub name: String,
    /// Object store kind, as the volume's `storage`.
    pub storage: String,
    pub bucket: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_key: Option<Secret>,
    /// The storage class new objects get (S3 `x-amz-storage-class`), shown by `info`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class: Option<String>,
}

/// The name of the volume's own store (id 0) in policies and commands.
pub const DEFAULT_STORE: &str = "default";

impl Format {
    /// Check the settings a user chose.
    pub fn validate(&self) -> Result<()> {
        let n = self.name.as_bytes();
        let ok_char = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-';
        let valid_name = (3..=63).contains(&n.len())
            && n.iter().all(ok_char)
            && n.first() != Some(&b'-')
            && n.last() != Some(&b'-');
        if !valid_name {
            return Err(MetaError::Invalid(format!(
                "volume name {:?}: use 3-63 characters of a-z, 0-9 and '-', not starting or ending with '-'",
                self.name
            )));
        }
        if !(64..=16384).contains(&self.block_size_kib) || !self.block_size_kib.is_power_of_two() {
            return Err(MetaError::Invalid(format!(
                "block size {} KiB: use a power of two from 64 to 16384",
                self.block_size_kib
            )));
        }
        if !["none", "lz4", "zstd"].contains(&self.compression.as_str()) {
            return Err(MetaError::Invalid(format!(
                "compression {:?}: use none, lz4 or zstd",
                self.compression
            )));
        }
        let foreign_encrypted = self
            .foreign
            .as_ref()
            .is_some_and(|f| f.encryption.is_some());
        let rsa_wrapped = self
            .encryption
            .as_ref()
            .is_some_and(|e| e.wrapping == "rsa");
        if foreign_encrypted && !rsa_wrapped {
            return Err(MetaError::Invalid(
                "the imported blocks are encrypted but the settings hold no RSA key to read \
                 them with"
                    .into(),
            ));
        }
        Ok(())
    }

    /// Differences in settings that cannot change after formatting.
    pub fn immutable_differences(&self, other: &Format) -> Vec<String> {
        let mut diffs = Vec::new();
        let mut cmp = |what: &str, a: &dyn std::fmt::Display, b: &dyn std::fmt::Display| {
            if a.to_string() != b.to_string() {
                diffs.push(format!("{what} is {a}, not {b}"));
            }
        };
        cmp("name", &self.name, &other.name);
        cmp("storage", &self.storage, &other.storage);
        cmp("bucket", &self.bucket, &other.bucket);
        cmp(
            "block size (KiB)",
            &self.block_size_kib,
            &other.block_size_kib,
        );
        cmp("compression", &self.compression, &other.compression);
        let sealed = |f: &Format| if f.encryption.is_some() { "on" } else { "off" };
        // Settings that do not mention encryption keep the volume's (see `Meta::format`).
        if other.encryption.is_some() {
            cmp("encryption", &sealed(self), &sealed(other));
        }
        if let (Some(a), Some(b)) = (&self.encryption, &other.encryption) {
            let unit = |e: &Encryption| e.object_unit_kib.unwrap_or(32);
            cmp("object segment size (KiB)", &unit(a), &unit(b));
        }
        diffs
    }

    /// These settings with access control lists turned on when `on` (the metadata
    /// version rises to the first that has them, so older clients refuse the volume);
    /// unchanged otherwise, since lists once on stay on.
    pub fn with_acl(self, on: bool) -> Format {
        if !on {
            return self;
        }
        Format {
            enable_acl: true,
            meta_version: self.meta_version.max(ACL_VERSION),
            ..self
        }
    }

    /// These settings on a volume whose inodes carry protections when `on` (the metadata
    /// version rises to the first that enforces them, so older clients refuse the
    /// volume); unchanged otherwise.
    pub fn with_protection(self, on: bool) -> Format {
        Format {
            meta_version: match on {
                true => self.meta_version.max(PROTECTION_VERSION),
                false => self.meta_version,
            },
            ..self
        }
    }

    /// These settings with `encryption` (the metadata version rises to the first that
    /// has it, so older clients refuse the volume).
    pub fn with_encryption(self, encryption: Option<Encryption>) -> Format {
        match encryption {
            None => self,
            Some(e) => Format {
                meta_version: self.meta_version.max(if e.object_unit_kib.is_some() {
                    OBJECT_UNIT_VERSION
                } else {
                    ENCRYPTION_VERSION
                }),
                encryption: Some(e),
                ..self
            },
        }
    }

    /// These settings with `foreign` blocks (the metadata version rises to the first
    /// that reads them, so older clients refuse the volume).
    pub fn with_foreign(self, foreign: Option<Foreign>) -> Format {
        match foreign {
            None => self,
            Some(f) => Format {
                meta_version: self.meta_version.max(match (f.hash_prefix, &f.encryption) {
                    (true, _) => FOREIGN_HASHED_VERSION,
                    (false, Some(_)) => FOREIGN_ENCRYPTION_VERSION,
                    (false, None) => FOREIGN_VERSION,
                }),
                foreign: Some(f),
                ..self
            },
        }
    }

    /// These settings with one more store (the metadata version rises to the first that
    /// routes by placement, so older clients refuse the volume). The store gets the next
    /// free id; a name already taken, a bad name or more than 255 stores are refused.
    pub fn with_store(self, mut spec: StoreSpec) -> Result<Format> {
        let name_ok = (1..=32).contains(&spec.name.len())
            && spec
                .name
                .bytes()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-' || c == b'_');
        if !name_ok {
            return Err(MetaError::Invalid(format!(
                "store name {:?}: use 1-32 characters of a-z, 0-9, '-' and '_'",
                spec.name
            )));
        }
        if spec.name == DEFAULT_STORE || self.stores.iter().any(|s| s.name == spec.name) {
            return Err(MetaError::Invalid(format!(
                "the volume has a store named {:?} already",
                spec.name
            )));
        }
        let next = self.stores.iter().map(|s| s.id).max().unwrap_or(0);
        spec.id = next.checked_add(1).ok_or_else(|| {
            MetaError::Invalid("a volume has at most 255 stores besides its own".into())
        })?;
        let mut stores = self.stores;
        stores.push(spec);
        Ok(Format {
            meta_version: self.meta_version.max(PLACEMENT_VERSION),
            stores,
            ..self
        })
    }

    /// The id of the store called `name` (`default` is the volume's own, 0).
    pub fn store_id(&self, name: &str) -> Option<u8> {
        if name == DEFAULT_STORE {
            return Some(0);
        }
        self.stores.iter().find(|s| s.name == name).map(|s| s.id)
    }

    /// The name of store `id`, for messages (`store-ID` for an id the settings lack).
    pub fn store_name(&self, id: u8) -> String {
        match id {
            0 => DEFAULT_STORE.to_string(),
            _ => self
                .stores
                .iter()
                .find(|s| s.id == id)
                .map_or_else(|| format!("store-{id}"), |s| s.name.clone()),
        }
    }

    pub fn encode(&self) -> Result<Vec<u8>> {
        serde_json::to_vec(self).map_err(|e| MetaError::Invalid(format!("format record: {e}")))
    }

    pub fn decode(key: &[u8], v: &[u8]) -> Result<Format> {
        serde_json::from_slice(v)
            .map_err(|e| MetaError::corrupt(key, format!("format record: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn sample() -> Format {
        Format {
            name: "vol-1".into(),
            uuid: "u".into(),
            storage: "file".into(),
            bucket: "/tmp/b".into(),
            access_key: None,
            secret_key: None,
            session_token: None,
            block_size_kib: 4096,
            compression: "none".into(),
            trash_days: 1,
            capacity: 0,
            inodes: 0,
            created_at: 0,
            meta_version: META_VERSION,
            enable_acl: false,
            encryption: None,
            foreign: None,
            stores: Vec::new(),
        }
    }

    fn store(name: &str) -> StoreSpec {
        StoreSpec {
            id: 0,
            name: name.into(),
            storage: "file".into(),
            bucket: format!("/tmp/{name}"),
            access_key: None,
            secret_key: None,
            storage_class: None,
        }
    }

    #[test]
    fn stores_get_ids_in_order_and_raise_the_version() {
        let f = sample().with_store(store("cold")).unwrap();
        let f = f.with_store(store("backup")).unwrap();
        assert_eq!(f.meta_version, PLACEMENT_VERSION);
        assert_eq!(f.store_id("default"), Some(0));
        assert_eq!(f.store_id("cold"), Some(1));
        assert_eq!(f.store_id("backup"), Some(2));
        assert_eq!(f.store_id("nope"), None);
        assert_eq!(f.store_name(2), "backup");
        assert_eq!(f.store_name(9), "store-9");
        let again = f.clone().with_store(store("cold")).unwrap_err().to_string();
        assert!(again.contains("already"), "{again}");
        assert!(f.clone().with_store(store("default")).is_err());
        assert!(f.clone().with_store(store("Bad Name")).is_err());
        let back = Format::decode(b"Cformat", &f.encode().unwrap()).unwrap();
        assert_eq!(back, f);
        let plain = sample().encode().unwrap();
        assert!(!String::from_utf8(plain).unwrap().contains("stores"));
    }

    fn keys(ids: &[u32]) -> Encryption {
        Encryption {
            wrapping: "kek".into(),
            kek_source: None,
            rsa_private_key: None,
            current_key: ids.last().copied().unwrap_or(1),
            keys: ids
                .iter()
                .map(|&id| WrappedKey {
                    id,
                    cipher: "aes256gcm".into(),
                    wrapped: "00".into(),
                    created_at: 0,
                })
                .collect(),
            object_unit_kib: None,
        }
    }

    #[test]
    fn encryption_raises_the_version_and_cannot_be_turned_on_later() {
        let on = sample().with_encryption(Some(keys(&[1])));
        assert_eq!(on.meta_version, ENCRYPTION_VERSION);
        assert!(on.meta_version <= UNDERSTOOD_VERSION);
        assert_eq!(sample().with_encryption(None), sample());
        // Settings that say nothing of encryption differ in nothing immutable.
        assert!(on.immutable_differences(&sample()).is_empty());
        assert_eq!(
            sample().immutable_differences(&on),
            vec!["encryption is off, not on".to_string()]
        );
        let back = Format::decode(b"k", &on.encode().unwrap()).unwrap();
        assert_eq!(back, on);
    }

    #[test]
    fn small_object_units_raise_the_version_further_and_never_change() {
        let small = Encryption {
            object_unit_kib: Some(OBJECT_UNIT_KIB),
            ..keys(&[1])
        };
        let on = sample().with_encryption(Some(small.clone()));
        assert_eq!(on.meta_version, OBJECT_UNIT_VERSION);
        assert!(on.meta_version <= UNDERSTOOD_VERSION);
        let large = sample().with_encryption(Some(keys(&[1])));
        assert_eq!(
            on.immutable_differences(&large),
            vec!["object segment size (KiB) is 16, not 32".to_string()]
        );
        // A rotation's record keeps the unit: nothing immutable differs.
        let rotated = Encryption {
            keys: keys(&[1, 2]).keys,
            ..small
        };
        let again = sample().with_encryption(Some(rotated));
        assert!(on.immutable_differences(&again).is_empty());
        let back = Format::decode(b"k", &on.encode().unwrap()).unwrap();
        assert_eq!(back.encryption.unwrap().object_unit_kib, Some(16));
    }

    #[test]
    fn names_and_settings_are_validated() {
        assert!(sample().validate().is_ok());
        for bad in ["ab", "-abc", "abc-", "Abc", "a_b_c"] {
            let f = Format {
                name: bad.into(),
                ..sample()
            };
            assert!(f.validate().is_err(), "{bad}");
        }
        assert!(
            Format {
                block_size_kib: 100,
                ..sample()
            }
            .validate()
            .is_err()
        );
        assert!(
            Format {
                compression: "gzip".into(),
                ..sample()
            }
            .validate()
            .is_err()
        );
    }

    #[test]
    fn round_trip_and_differences() {
        let f = sample();
        assert_eq!(Format::decode(b"k", &f.encode().unwrap()).unwrap(), f);
        let g = Format {
            bucket: "/other".into(),
            trash_days: 5,
            ..sample()
        };
        assert_eq!(f.immutable_differences(&g).len(), 1);
        assert!(
            Format::decode(b"Cformat", b"{")
                .unwrap_err()
                .to_string()
                .contains("Cformat")
        );
    }
}
