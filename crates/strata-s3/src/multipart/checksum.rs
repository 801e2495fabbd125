//! Checksums of multipart uploads, as S3 defines them: the algorithm and type an upload
//! is created with (`x-amz-checksum-algorithm`, `x-amz-checksum-type`), the parts'
//! checksums named in a Complete checked against those the parts were stored with, and
//! the object's checksum made from the parts' — a checksum of their checksums with the
//! part count appended (`COMPOSITE`), or the CRC of the whole object joined from the
//! parts' CRCs (`FULL_OBJECT`, CRCs only).

use s3s::checksum::ChecksumHasher;
use s3s::crypto::{Checksum as _, Crc32, Crc32c, Crc64Nvme, Sha1, Sha256};
use s3s::dto::{ChecksumAlgorithm, ChecksumType, CompletedPart};
use s3s::{S3Error, S3ErrorCode, S3Result};
use serde::{Deserialize, Serialize};

use super::crc::{CRC32, CRC32C, CRC64NVME, Crc};
use crate::objinfo::Checksums;

/// An algorithm S3 checksums with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Algorithm {
    Crc32,
    Crc32c,
    Crc64nvme,
    Sha1,
    Sha256,
}

/// How a multipart object's checksum is made from its parts'.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Kind {
    Composite,
    FullObject,
}

/// The checksum an upload was created with (kept in its record).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadChecksum {
    pub algorithm: Algorithm,
    pub kind: Kind,
}

fn invalid_request(message: String) -> S3Error {
    S3Error::with_message(S3ErrorCode::InvalidRequest, message)
}

impl Algorithm {
    const ALL: [Algorithm; 5] = [
        Algorithm::Crc32,
        Algorithm::Crc32c,
        Algorithm::Crc64nvme,
        Algorithm::Sha1,
        Algorithm::Sha256,
    ];

    /// The algorithm S3 calls `name` (any case).
    pub fn parse(name: &str) -> Option<Algorithm> {
        Self::ALL
            .into_iter()
            .find(|a| a.name().eq_ignore_ascii_case(name))
    }

    /// S3's name of it: `CRC32`, `SHA256`, …
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Crc32 => "CRC32",
            Algorithm::Crc32c => "CRC32C",
            Algorithm::Crc64nvme => "CRC64NVME",
            Algorithm::Sha1 => "SHA1",
            Algorithm::Sha256 => "SHA256",
        }
    }

    /// Bytes of its digest.
    fn digest_len(self) -> usize {
        match self {
            Algorithm::Crc32 | Algorithm::Crc32c => 4,
            Algorithm::Crc64nvme => 8,
            Algorithm::Sha1 => 20,
            Algorithm::Sha256 => 32,
        }
    }

    /// Its value among `checksums`.
    pub fn get(self, checksums: &Checksums) -> Option<&String> {
        match self {
            Algorithm::Crc32 => checksums.crc32.as_ref(),
            Algorithm::Crc32c => checksums.crc32c.as_ref(),
            Algorithm::Crc64nvme => checksums.crc64nvme.as_ref(),
            Algorithm::Sha1 => checksums.sha1.as_ref(),
            Algorithm::Sha256 => checksums.sha256.as_ref(),
        }
    }

    /// `checksums` holding `value` for this algorithm alone, of `kind`.
    pub fn only(self, value: String, kind: Option<Kind>) -> Checksums {
        let mut c = Checksums {
            kind: kind.map(|k| k.name().to_owned()),
            ..Checksums::default()
        };
        let slot = match self {
            Algorithm::Crc32 => &mut c.crc32,
            Algorithm::Crc32c => &mut c.crc32c,
            Algorithm::Crc64nvme => &mut c.crc64nvme,
            Algorithm::Sha1 => &mut c.sha1,
            Algorithm::Sha256 => &mut c.sha256,
        };
        *slot = Some(value);
        c
    }

    /// Its value in a part of a Complete request.
    fn of_completed(self, part: &CompletedPart) -> Option<&String> {
        match self {
            Algorithm::Crc32 => part.checksum_crc32.as_ref(),
            Algorithm::Crc32c => part.checksum_crc32c.as_ref(),
            Algorithm::Crc64nvme => part.checksum_crc64nvme.as_ref(),
            Algorithm::Sha1 => part.checksum_sha1.as_ref(),
            Algorithm::Sha256 => part.checksum_sha256.as_ref(),
        }
    }

    /// The CRC it is, if it is one.
    fn crc(self) -> Option<Crc> {
        match self {
            Algorithm::Crc32 => Some(CRC32),
            Algorithm::Crc32c => Some(CRC32C),
            Algorithm::Crc64nvme => Some(CRC64NVME),
            Algorithm::Sha1 | Algorithm::Sha256 => None,
        }
    }

    /// A hasher computing this algorithm alone.
    pub fn hasher(self) -> ChecksumHasher {
        ChecksumHasher {
            crc32: (self == Algorithm::Crc32).then(Crc32::new),
            crc32c: (self == Algorithm::Crc32c).then(Crc32c::new),
            crc64nvme: (self == Algorithm::Crc64nvme).then(Crc64Nvme::new),
            sha1: (self == Algorithm::Sha1).then(Sha1::new),
            sha256: (self == Algorithm::Sha256).then(Sha256::new),
        }
    }

    /// Its base64 value in what a hasher computed.
    pub fn computed(self, sums: &s3s::dto::Checksum) -> Option<String> {
        match self {
            Algorithm::Crc32 => sums.checksum_crc32.clone(),
            Algorithm::Crc32c => sums.checksum_crc32c.clone(),
            Algorithm::Crc64nvme => sums.checksum_crc64nvme.clone(),
            Algorithm::Sha1 => sums.checksum_sha1.clone(),
            Algorithm::Sha256 => sums.checksum_sha256.clone(),
        }
    }
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Composite => "COMPOSITE",
            Kind::FullObject => "FULL_OBJECT",
        }
    }
}

impl UploadChecksum {
    /// What a CreateMultipartUpload asks for, checked as S3 checks it: a type needs an
    /// algorithm, CRC64NVME is full-object only, the SHAs composite only. Without a type,
    /// CRC64NVME is full-object and the others composite.
    pub fn for_create(
        algorithm: Option<&ChecksumAlgorithm>,
        kind: Option<&ChecksumType>,
    ) -> S3Result<Option<UploadChecksum>> {
        let kind = match kind.map(ChecksumType::as_str) {
            None => None,
            Some(k) if k.eq_ignore_ascii_case("COMPOSITE") => Some(Kind::Composite),
            Some(k) if k.eq_ignore_ascii_case("FULL_OBJECT") => Some(Kind::FullObject),
            Some(k) => {
                return Err(invalid_request(format!(
                    "Value for x-amz-checksum-type header is invalid: {k}"
                )));
            }
        };
        let Some(name) = algorithm.map(ChecksumAlgorithm::as_str) else {
            return match kind {
                None => Ok(None),
                Some(_) => Err(invalid_request(
                    "The x-amz-checksum-type header can only be used with the x-amz-checksum-algorithm header.".into(),
                )),
            };
        };
        let algorithm = Algorithm::parse(name).ok_or_else(|| {
            invalid_request(format!(
                "Value for x-amz-checksum-algorithm header is invalid: {name}"
            ))
        })?;
        let is_crc = algorithm.crc().is_some();
        let kind = kind.unwrap_or(if algorithm == Algorithm::Crc64nvme {
            Kind::FullObject
        } else {
            Kind::Composite
        });
        let allowed = match kind {
            Kind::Composite => algorithm != Algorithm::Crc64nvme,
            Kind::FullObject => is_crc,
        };
        if !allowed {
            return Err(invalid_request(format!(
                "The {} checksum type cannot be used with the {} checksum algorithm.",
                kind.name(),
                algorithm.name().to_ascii_lowercase()
            )));
        }
        Ok(Some(UploadChecksum { algorithm, kind }))
    }

    /// The algorithm as s3s answers it.
    pub fn algorithm_dto(self) -> ChecksumAlgorithm {
        ChecksumAlgorithm::from(self.algorithm.name().to_owned())
    }

    /// The type as s3s answers it.
    pub fn kind_dto(self) -> ChecksumType {
        ChecksumType::from(self.kind.name().to_owned())
    }

    /// The algorithms an UploadPart of this upload names: any but this one is refused,
    /// as S3 refuses it.
    pub fn check_part_algorithms(self, named: &[String]) -> S3Result<()> {
        match named
            .iter()
            .find(|n| !n.eq_ignore_ascii_case(self.algorithm.name()))
        {
            None => Ok(()),
            Some(other) => Err(invalid_request(format!(
                "Checksum Type mismatch occurred, expected checksum Type: {}, actual checksum Type: {}",
                self.algorithm.name().to_ascii_lowercase(),
                other.to_ascii_lowercase()
            ))),
        }
    }
}

/// One part of a Complete: its number, its stored checksum (the upload's algorithm) and
/// length, and what the request said of it.
pub struct PartSum<'a> {
    pub number: i32,
    pub stored: Option<&'a String>,
    pub length: u64,
    pub asked: &'a CompletedPart,
}

/// The object's checksum and its parts' checksums, from the parts of a Complete. A
/// composite upload needs every part's checksum in the request; a full-object upload may
/// leave them out. A checksum given that differs from the stored one is InvalidPart.
/// `whole` is a checksum the request gave for the object (BadDigest if it differs).
pub fn object_checksum(
    upload: UploadChecksum,
    parts: &[PartSum<'_>],
    whole: Option<&String>,
) -> S3Result<(Checksums, Vec<String>)> {
    let algorithm = upload.algorithm;
    let lower = algorithm.name().to_ascii_lowercase();
    let mut stored_sums = Vec::with_capacity(parts.len());
    for part in parts {
        let stored = part.stored.ok_or_else(|| {
            invalid_request(format!(
                "part {} was stored without a {lower} checksum",
                part.number
            ))
        })?;
        match algorithm.of_completed(part.asked) {
            None if upload.kind == Kind::Composite => {
                return Err(invalid_request(format!(
                    "The upload was created using a {lower} checksum. The complete request must include the checksum for each part. It was missing for part {} in the request.",
                    part.number
                )));
            }
            Some(given) if given != stored => {
                return Err(S3Error::with_message(
                    S3ErrorCode::InvalidPart,
                    format!(
                        "One or more of the specified parts could not be found. The {lower} checksum of part {} does not match.",
                        part.number
                    ),
                ));
            }
            _ => {}
        }
        stored_sums.push(stored.clone());
    }
    let value = match upload.kind {
        Kind::Composite => composite(algorithm, &stored_sums)?,
        Kind::FullObject => full_object(algorithm, parts, &stored_sums)?,
    };
    if let Some(given) = whole {
        check_whole(algorithm, &value, given)?;
    }
    Ok((algorithm.only(value, Some(upload.kind)), stored_sums))
}

fn decode(value: &str) -> S3Result<Vec<u8>> {
    base64_simd::STANDARD
        .decode_to_vec(value)
        .map_err(|_| invalid_request(format!("stored checksum {value} is not base64")))
}

/// The checksum of the parts' checksums, `-N` appended.
fn composite(algorithm: Algorithm, sums: &[String]) -> S3Result<String> {
    let mut hasher = algorithm.hasher();
    for sum in sums {
        hasher.update(&decode(sum)?);
    }
    let value = algorithm.computed(&hasher.finalize()).unwrap_or_default();
    Ok(format!("{value}-{}", sums.len()))
}

/// The CRC of the whole object, joined from the parts' CRCs.
fn full_object(algorithm: Algorithm, parts: &[PartSum<'_>], sums: &[String]) -> S3Result<String> {
    let crc = algorithm
        .crc()
        .ok_or_else(|| invalid_request(format!("{} is no CRC", algorithm.name())))?;
    let mut joined: Option<u64> = None;
    for (part, sum) in parts.iter().zip(sums) {
        let value = crc
            .value_of(&decode(sum)?)
            .ok_or_else(|| invalid_request(format!("stored checksum {sum} has a wrong length")))?;
        joined = Some(match joined {
            None => value,
            Some(before) => crc.combine(before, value, part.length),
        });
    }
    Ok(base64_simd::STANDARD.encode_to_string(crc.bytes_of(joined.unwrap_or(0))))
}

/// A whole-object checksum given with a Complete: malformed is InvalidRequest, different
/// is BadDigest. A composite one may be given with or without its `-N`.
fn check_whole(algorithm: Algorithm, computed: &str, given: &str) -> S3Result<()> {
    let bare = given.split_once('-').map_or(given, |(v, _)| v);
    if base64_simd::STANDARD
        .decode_to_vec(bare)
        .map_or(true, |b| b.len() != algorithm.digest_len())
    {
        return Err(invalid_request(format!(
            "Value for x-amz-checksum-{} header is invalid.",
            algorithm.name().to_ascii_lowercase()
        )));
    }
    let ours = computed.split_once('-').map_or(computed, |(v, _)| v);
    if bare != ours {
        return Err(S3Error::with_message(
            S3ErrorCode::BadDigest,
            format!(
                "The {} you specified for the object did not match what was computed: {computed}",
                algorithm.name()
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum(algorithm: Algorithm, data: &[u8]) -> String {
        let mut h = algorithm.hasher();
        h.update(data);
        algorithm.computed(&h.finalize()).unwrap()
    }

    fn part<'a>(n: i32, stored: &'a String, len: u64, asked: &'a CompletedPart) -> PartSum<'a> {
        PartSum {
            number: n,
            stored: Some(stored),
            length: len,
            asked,
        }
    }

    #[test]
    fn create_rules_follow_s3() {
        let algo = |s: &str| ChecksumAlgorithm::from(s.to_owned());
        let kind = |s: &str| ChecksumType::from(s.to_owned());
        let made = UploadChecksum::for_create(Some(&algo("SHA256")), None).unwrap();
        assert_eq!(made.unwrap().kind, Kind::Composite);
        let made = UploadChecksum::for_create(Some(&algo("CRC64NVME")), None).unwrap();
        assert_eq!(made.unwrap().kind, Kind::FullObject);
        assert!(UploadChecksum::for_create(None, Some(&kind("COMPOSITE"))).is_err());
        let bad = UploadChecksum::for_create(Some(&algo("SHA1")), Some(&kind("FULL_OBJECT")));
        assert!(bad.unwrap_err().message().unwrap().contains("sha1"));
        assert!(
            UploadChecksum::for_create(Some(&algo("CRC64NVME")), Some(&kind("COMPOSITE"))).is_err()
        );
        assert!(UploadChecksum::for_create(Some(&algo("MD5")), None).is_err());
        assert_eq!(UploadChecksum::for_create(None, None).unwrap(), None);
    }

    #[test]
    fn composite_is_the_checksum_of_the_part_checksums() {
        let (a, b) = (b"first part".as_slice(), b"second".as_slice());
        let (sa, sb) = (sum(Algorithm::Sha256, a), sum(Algorithm::Sha256, b));
        let asked_a = CompletedPart {
            checksum_sha256: Some(sa.clone()),
            ..CompletedPart::default()
        };
        let asked_b = CompletedPart {
            checksum_sha256: Some(sb.clone()),
            ..CompletedPart::default()
        };
        let upload = UploadChecksum {
            algorithm: Algorithm::Sha256,
            kind: Kind::Composite,
        };
        let parts = [part(1, &sa, 10, &asked_a), part(2, &sb, 6, &asked_b)];
        let (c, per_part) = object_checksum(upload, &parts, None).unwrap();
        let mut raw = base64_simd::STANDARD.decode_to_vec(&sa).unwrap();
        raw.extend(base64_simd::STANDARD.decode_to_vec(&sb).unwrap());
        let want = format!("{}-2", sum(Algorithm::Sha256, &raw));
        assert_eq!(c.sha256.as_deref(), Some(want.as_str()));
        assert_eq!(c.kind.as_deref(), Some("COMPOSITE"));
        assert_eq!(per_part, vec![sa.clone(), sb.clone()]);
        // A whole-object value is checked with or without its -2.
        let bare = want.trim_end_matches("-2").to_owned();
        assert!(object_checksum(upload, &parts, Some(&want)).is_ok());
        assert!(object_checksum(upload, &parts, Some(&bare)).is_ok());
        let other = sum(Algorithm::Sha256, b"other");
        let err = object_checksum(upload, &parts, Some(&other)).unwrap_err();
        assert_eq!(*err.code(), S3ErrorCode::BadDigest);
        let err = object_checksum(upload, &parts, Some(&"bad".to_owned())).unwrap_err();
        assert_eq!(*err.code(), S3ErrorCode::InvalidRequest);
        // Composite needs each part's checksum; a wrong one is InvalidPart.
        let missing = CompletedPart::default();
        let parts = [part(1, &sa, 10, &missing)];
        let err = object_checksum(upload, &parts, None).unwrap_err();
        assert!(err.message().unwrap().contains("missing for part 1"));
        let parts = [part(1, &sa, 10, &asked_b)];
        let err = object_checksum(upload, &parts, None).unwrap_err();
        assert_eq!(*err.code(), S3ErrorCode::InvalidPart);
    }

    #[test]
    fn full_object_is_the_crc_of_the_whole() {
        let (a, b) = (vec![7u8; 5000], b"tail".to_vec());
        for algorithm in [Algorithm::Crc32, Algorithm::Crc32c, Algorithm::Crc64nvme] {
            let (sa, sb) = (sum(algorithm, &a), sum(algorithm, &b));
            let none = CompletedPart::default();
            let upload = UploadChecksum {
                algorithm,
                kind: Kind::FullObject,
            };
            let parts = [part(1, &sa, 5000, &none), part(2, &sb, 4, &none)];
            let (c, _) = object_checksum(upload, &parts, None).unwrap();
            let whole: Vec<u8> = a.iter().chain(&b).copied().collect();
            assert_eq!(algorithm.get(&c), Some(&sum(algorithm, &whole)));
            assert_eq!(c.kind.as_deref(), Some("FULL_OBJECT"));
        }
    }
}
