//! Reading a JuiceFS metadata dump (what `juicefs dump` writes: one JSON object with the
//! volume's `Setting`, `Counters`, `Quotas`, and the namespace as a nested `FSTree` and
//! `Trash`) as the lines of a Strata dump (dump v1), so `strata import juicefs` loads it
//! with the same loader as `strata load`. The tree is read as a stream — a directory at a
//! time, never the whole document — so a dump of any size converts in bounded memory
//! (plus one counter per shared slice). Data is not touched: every slice keeps its
//! JuiceFS id, and the format record names the ids below JuiceFS's `nextChunk` as
//! foreign blocks (docs/FORMAT.md, "Foreign blocks").

mod export;
mod tree;

pub use export::{Exported, escape};

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, Read};

use serde::Deserialize;
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use strata_types::{Ino, Secret};

use crate::error::{MetaError, Result};
use crate::format::{Foreign, Format, META_VERSION};
use crate::meta::{DUMP_VERSION, DumpLine};

/// The `Setting` of a JuiceFS dump: what the import uses of it.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct JuiceSetting {
    pub name: String,
    #[serde(rename = "UUID")]
    pub uuid: String,
    pub storage: String,
    pub bucket: String,
    pub access_key: String,
    pub secret_key: Secret,
    pub session_token: Secret,
    pub block_size: u32,
    pub compression: String,
    /// The volume's RSA private key (PEM), when its objects are encrypted.
    pub encrypt_key: Secret,
    /// `aes256gcm-rsa` (also when empty) or `chacha20-rsa`.
    pub encrypt_algo: String,
    /// The secrets above (`SecretKey`, `SessionToken`, `EncryptKey`) are themselves
    /// encrypted with a key derived from the volume's UUID (JuiceFS 1.1 and later).
    pub key_encrypted: bool,
    pub hash_prefix: bool,
    pub shards: u32,
    pub trash_days: u32,
    pub capacity: u64,
    pub inodes: u64,
    #[serde(rename = "EnableACL")]
    pub enable_acl: bool,
}

/// A directory quota of a JuiceFS dump (by inode).
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", default)]
pub struct JuiceQuota {
    pub max_space: i64,
    pub max_inodes: i64,
}

/// What converting a dump found besides its lines.
#[derive(Clone, Debug, Default)]
pub struct Imported {
    /// Directory quotas: (inode, space limit, inode limit).
    pub quotas: Vec<(u64, i64, i64)>,
    pub files: u64,
    pub directories: u64,
}

/// Decode JuiceFS's escaping of names, link targets and attributes: bytes outside the
/// safe set are written `%XX` (and `%` itself `%25`).
pub fn unescape(text: &str) -> Result<Vec<u8>> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'%' {
            out.push(bytes[i]);
            i += 1;
            continue;
        }
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok())
            .ok_or_else(|| MetaError::Invalid(format!("bad %-escape in {text:?}")))?;
        out.push(hex);
        i += 3;
    }
    Ok(out)
}

/// Why a JuiceFS volume cannot be imported as it is, if it cannot.
fn refusal(s: &JuiceSetting) -> Option<String> {
    if !s.encrypt_key.is_empty()
        && !matches!(
            s.encrypt_algo.as_str(),
            "" | "aes256gcm-rsa" | "chacha20-rsa"
        )
    {
        return Some(format!(
            "the JuiceFS volume is encrypted with {:?}; only aes256gcm-rsa and chacha20-rsa \
             volumes can be imported",
            s.encrypt_algo
        ));
    }
    if s.shards > 1 {
        return Some(
            "the JuiceFS volume spreads objects over several buckets (--shards); only \
             single-bucket volumes can be imported"
                .into(),
        );
    }
    if !matches!(s.compression.as_str(), "" | "none" | "lz4" | "zstd") {
        return Some(format!("unknown JuiceFS compression {:?}", s.compression));
    }
    None
}

/// What the import adds to a format record that the dump alone cannot give: JuiceFS's
/// secrets opened (`key_encrypted`), the encryption record of an encrypted volume.
pub type Complete<'a> = &'a mut dyn FnMut(&JuiceSetting, Format) -> Result<Format>;

/// Strata's format record for the imported volume: the JuiceFS volume's name, bucket
/// and settings, a new uuid, and the foreign blocks (ids below `next_chunk`). Secrets
/// JuiceFS keeps encrypted are left out, and an encrypted volume has no encryption
/// record yet: the caller completes those.
pub fn strata_format(s: &JuiceSetting, next_chunk: u64) -> Result<Format> {
    if let Some(why) = refusal(s) {
        return Err(MetaError::Invalid(why));
    }
    let compression = match s.compression.as_str() {
        "" => "none".to_string(),
        other => other.to_string(),
    };
    // `juicefs dump` writes `removed` where it left a secret out.
    let secret = |v: &Secret| {
        (!s.key_encrypted && !v.is_empty() && v.expose() != "removed").then(|| v.clone())
    };
    // JuiceFS's `minio` is an S3 endpoint URL with the bucket in the path, as Strata's
    // `s3` takes it.
    let storage = match s.storage.as_str() {
        "minio" => "s3".to_string(),
        other => other.to_string(),
    };
    let format = Format {
        name: s.name.clone(),
        uuid: uuid::Uuid::new_v4().to_string(),
        storage,
        bucket: s.bucket.clone(),
        access_key: (!s.access_key.is_empty()).then(|| s.access_key.clone()),
        secret_key: secret(&s.secret_key),
        session_token: secret(&s.session_token),
        block_size_kib: if s.block_size == 0 {
            4096
        } else {
            s.block_size
        },
        compression: compression.clone(),
        trash_days: s.trash_days,
        capacity: s.capacity,
        inodes: s.inodes,
        created_at: crate::meta::now_ns() / 1_000_000_000,
        meta_version: META_VERSION,
        enable_acl: false,
        encryption: None,
        foreign: None,
        stores: Vec::new(),
    }
    .with_foreign(Some(Foreign {
        kind: "juicefs".into(),
        uuid: s.uuid.clone(),
        slices_below: next_chunk,
        compression,
        encryption: (!s.encrypt_key.is_empty()).then(|| cipher_name(&s.encrypt_algo).into()),
        hash_prefix: s.hash_prefix,
        checksums: false,
    }));
    Ok(format)
}

/// Strata's name of the cipher JuiceFS's `EncryptAlgo` names.
pub fn cipher_name(encrypt_algo: &str) -> &'static str {
    match encrypt_algo {
        "chacha20-rsa" => "chacha20",
        _ => "aes256gcm",
    }
}

/// Read the JuiceFS dump in `input` and hand its lines, as a Strata dump, to `emit` in
/// order (header first, end last); `complete` finishes the format record.
pub fn convert(
    input: impl Read,
    complete: Complete<'_>,
    emit: &mut dyn FnMut(DumpLine) -> Result<()>,
) -> Result<Imported> {
    let mut input = std::io::BufReader::new(input);
    let head = input
        .fill_buf()
        .map_err(|e| MetaError::Invalid(format!("reading the JuiceFS dump: {e}")))?;
    if head
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|b| *b != b'{')
    {
        return Err(MetaError::Invalid(
            "not a JSON JuiceFS dump: binary dumps (`juicefs dump --binary`) are not read \
             yet; dump without --binary"
                .into(),
        ));
    }
    let mut de = serde_json::Deserializer::from_reader(input);
    let mut conv = tree::Converter::new(emit);
    let imported = TopSeed {
        conv: &mut conv,
        complete,
    }
    .deserialize(&mut de)
    .map_err(|e| MetaError::Invalid(format!("the JuiceFS dump: {e}")))?;
    de.end()
        .map_err(|e| MetaError::Invalid(format!("the JuiceFS dump: {e}")))?;
    Ok(imported)
}

/// The dump's top-level object: settings and counters first, then the trees.
struct TopSeed<'c, 'e, 'f> {
    conv: &'c mut tree::Converter<'e>,
    complete: Complete<'f>,
}

impl<'de> DeserializeSeed<'de> for TopSeed<'_, '_, '_> {
    type Value = Imported;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Imported, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for TopSeed<'_, '_, '_> {
    type Value = Imported;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JuiceFS metadata dump (a JSON object with Setting and FSTree)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Imported, A::Error> {
        use serde::de::Error;
        let mut imported = Imported::default();
        let mut setting: Option<JuiceSetting> = None;
        let mut counters: HashMap<String, i64> = HashMap::new();
        let mut trees = 0;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "Setting" => setting = Some(map.next_value()?),
                "Counters" => counters = map.next_value()?,
                "Quotas" => {
                    let quotas: BTreeMap<String, JuiceQuota> = map.next_value()?;
                    for (ino, q) in quotas {
                        let ino = ino.parse().map_err(A::Error::custom)?;
                        imported.quotas.push((ino, q.max_space, q.max_inodes));
                    }
                }
                "FSTree" | "Trash" => {
                    if trees == 0 {
                        let s = setting.as_ref().ok_or_else(|| {
                            A::Error::custom("no Setting before the tree (not a JuiceFS dump?)")
                        })?;
                        let next_chunk = counter(&counters, "nextChunk");
                        let header = header(s, &counters, next_chunk, &mut *self.complete)
                            .map_err(A::Error::custom)?;
                        self.conv.emit(header).map_err(A::Error::custom)?;
                    }
                    trees += 1;
                    let parent = Ino::ROOT.0;
                    map.next_value_seed(tree::NodeSeed {
                        conv: &mut *self.conv,
                        parent,
                    })?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if trees == 0 {
            return Err(A::Error::custom("the dump has no FSTree"));
        }
        let (files, directories) = self.conv.finish().map_err(A::Error::custom)?;
        imported.files = files;
        imported.directories = directories;
        Ok(imported)
    }
}

fn counter(counters: &HashMap<String, i64>, name: &str) -> u64 {
    counters
        .get(name)
        .and_then(|v| u64::try_from(*v).ok())
        .unwrap_or(0)
}

/// The header line: Strata's format record and id counters past JuiceFS's.
fn header(
    s: &JuiceSetting,
    counters: &HashMap<String, i64>,
    next_chunk: u64,
    complete: Complete<'_>,
) -> Result<DumpLine> {
    let format = complete(s, strata_format(s, next_chunk)?)?;
    format.validate()?;
    let as_i64 = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    let counters = BTreeMap::from([
        (
            crate::meta::NEXT_INODE.to_string(),
            as_i64(counter(counters, "nextInodes").max(counter(counters, "nextInode"))),
        ),
        (crate::meta::NEXT_SLICE.to_string(), as_i64(next_chunk)),
    ]);
    let format = serde_json::to_value(&format)
        .map_err(|e| MetaError::Invalid(format!("format record: {e}")))?;
    Ok(DumpLine::Header {
        strata_dump: DUMP_VERSION,
        format,
        counters,
        subdir: None,
    })
}

#[cfg(test)]
mod tests;
