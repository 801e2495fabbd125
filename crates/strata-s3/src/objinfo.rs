//! What S3 knows about an object beyond its bytes — ETag, standard headers, user metadata,
//! checksums, part count — kept as one JSON value in the file's `user.s3.object` xattr
//! (format in docs/FORMAT.md). The record names the length and mtime the file had when it
//! was written; a file changed since (through a mount, say) has outlived it, and gets an
//! ETag derived from its inode, length and mtime instead (never mistaken for an MD5: it
//! ends in `-0`).

use std::collections::BTreeMap;

use md5::{Digest, Md5};
use serde::{Deserialize, Serialize};
use strata_types::{Attr, Ino};

/// The xattr holding an object's record.
pub const INFO_XATTR: &[u8] = b"user.s3.object";
/// Version of the record's format.
pub const INFO_VERSION: u32 = 1;

/// The checksums of an object, base64 as S3 sends them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checksums {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crc32: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crc32c: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crc64nvme: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha1: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// `COMPOSITE` for checksums of a multipart object's parts, else `FULL_OBJECT`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

impl Checksums {
    /// `value` in the place of the one algorithm these hold, of the same kind: a part's
    /// checksum of a multipart object.
    pub fn like(&self, value: String) -> Checksums {
        let mut out = Checksums {
            kind: self.kind.clone(),
            ..Checksums::default()
        };
        let slots = [
            (&self.crc32, &mut out.crc32),
            (&self.crc32c, &mut out.crc32c),
            (&self.crc64nvme, &mut out.crc64nvme),
            (&self.sha1, &mut out.sha1),
            (&self.sha256, &mut out.sha256),
        ];
        if let Some((_, slot)) = slots.into_iter().find(|(have, _)| have.is_some()) {
            *slot = Some(value);
        }
        out
    }
}

/// Part numbers run from 1 to this (S3's limit).
pub const MAX_PARTS: i32 = 10_000;

/// Standard headers stored with an object and returned on GET and HEAD.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Headers {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_control: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_disposition: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_encoding: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_language: Option<String>,
    /// `Expires` as an HTTP date.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<String>,
}

/// The record of one object.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectInfo {
    pub version: u32,
    /// The ETag without quotes: an MD5 in hex, or `md5-of-part-md5s-N` for multipart.
    pub etag: String,
    /// The file's length and mtime (ns) when the record was written.
    pub size: u64,
    pub mtime: i64,
    #[serde(default)]
    pub headers: Headers,
    /// `x-amz-meta-*` without the prefix, keys lower-case, values as sent.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub meta: BTreeMap<String, String>,
    #[serde(default)]
    pub checksums: Checksums,
    /// Number of parts of a multipart object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parts: Option<u32>,
    /// Sizes of the parts of a multipart object (for GET with `partNumber`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub part_sizes: Vec<u64>,
    /// The parts' checksums (base64) by the algorithm of `checksums`, for an object
    /// uploaded with one in parts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub part_checksums: Vec<String>,
    /// Object tags, in the order given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Tags,
    /// The version id given when a versioned bucket took the object; `None` is S3's
    /// `null` version (written while versioning was off or suspended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_id: Option<String>,
    /// The record is a delete marker (an empty file in the version store).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub delete_marker: bool,
}

/// Tags as `(key, value)` pairs.
pub type Tags = Vec<(String, String)>;

impl ObjectInfo {
    /// Whether the record still describes a file with these attributes.
    pub fn holds_for(&self, attr: &Attr) -> bool {
        self.size == attr.length && self.mtime == attr.mtime
    }

    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// The record in `value`, if it is one this version understands.
    pub fn decode(value: &[u8]) -> Option<ObjectInfo> {
        serde_json::from_slice::<ObjectInfo>(value)
            .ok()
            .filter(|info| info.version == INFO_VERSION)
    }
}

/// The ETag of a file without a valid record: stable while the file is unchanged.
pub fn derived_etag(ino: Ino, attr: &Attr) -> String {
    let mut md5 = Md5::new();
    md5.update(ino.0.to_le_bytes());
    md5.update(attr.length.to_le_bytes());
    md5.update(attr.mtime.to_le_bytes());
    format!("{}-0", hex(&md5.finalize()))
}

/// Lower-case hex of `bytes`.
pub use strata_types::hex::encode as hex;

/// The ETag of a multipart object from its parts' MD5s: MD5 of their concatenation,
/// then `-N`.
pub fn multipart_etag(part_md5s: &[[u8; 16]]) -> String {
    let mut md5 = Md5::new();
    for part in part_md5s {
        md5.update(part);
    }
    format!("{}-{}", hex(&md5.finalize()), part_md5s.len())
}

/// The 16 bytes of an MD5 ETag in hex (quotes allowed), if it is one.
pub fn md5_of_etag(etag: &str) -> Option<[u8; 16]> {
    let text = etag.trim_matches('"');
    if text.len() != 32 {
        return None;
    }
    <[u8; 16]>::try_from(strata_types::hex::decode(text)?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(length: u64, mtime: i64) -> Attr {
        Attr {
            kind: strata_types::FileType::Regular,
            mode: 0o644,
            uid: 0,
            gid: 0,
            rdev: 0,
            atime: 0,
            mtime,
            ctime: 0,
            nlink: 1,
            length,
            parent: Ino(1),
            xattrs: true,
            protection: Default::default(),
        }
    }

    #[test]
    fn records_round_trip_and_expire_when_the_file_changes() {
        let info = ObjectInfo {
            version: INFO_VERSION,
            etag: "900150983cd24fb0d6963f7d28e17f72".into(),
            size: 3,
            mtime: 42,
            meta: BTreeMap::from([("ü-key".into(), "wert ✓".into())]),
            ..ObjectInfo::default()
        };
        let back = ObjectInfo::decode(&info.encode()).unwrap();
        assert_eq!(back, info);
        assert!(back.holds_for(&attr(3, 42)));
        assert!(!back.holds_for(&attr(4, 42)));
        assert!(!back.holds_for(&attr(3, 43)));
        assert!(
            ObjectInfo::decode(b"{\"version\":99,\"etag\":\"x\",\"size\":0,\"mtime\":0}").is_none()
        );
    }

    #[test]
    fn etags_of_parts_follow_s3() {
        // md5("abc") and md5("") → known multipart ETag shape.
        let a = md5_of_etag("\"900150983cd24fb0d6963f7d28e17f72\"").unwrap();
        let b = md5_of_etag("d41d8cd98f00b204e9800998ecf8427e").unwrap();
        let etag = multipart_etag(&[a, b]);
        assert!(etag.ends_with("-2"));
        assert_eq!(etag.len(), 34);
        assert!(md5_of_etag("abc").is_none());
        let derived = derived_etag(Ino(7), &attr(3, 42));
        assert!(derived.ends_with("-0"));
        assert_ne!(derived, derived_etag(Ino(7), &attr(3, 43)));
    }
}
