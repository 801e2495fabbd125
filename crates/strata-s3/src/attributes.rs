//! GetObjectAttributes: an object's ETag, size, storage class, checksum and parts in one
//! answer, as S3 gives them — attributes named in `x-amz-object-attributes` (others are
//! InvalidArgument), any version by `versionId`, the parts of a multipart object paged by
//! `x-amz-max-parts`/`x-amz-part-number-marker` and listed one by one only when the
//! object was uploaded with a checksum. (The ETag goes out without quotes: `serve.rs`
//! takes off the ones s3s's XML writer puts on.)

use s3s::dto::{
    Checksum, ETag, GetObjectAttributesInput, GetObjectAttributesOutput, GetObjectAttributesParts,
    ObjectPart,
};
use s3s::{S3Error, S3ErrorCode, S3Request, S3Response, S3Result};

use crate::Gateway;
use crate::objinfo::{Checksums, ObjectInfo};

/// The attributes S3 knows.
const ATTRIBUTES: [&str; 5] = [
    "ETag",
    "Checksum",
    "ObjectParts",
    "StorageClass",
    "ObjectSize",
];
/// Parts listed per answer unless fewer are asked for.
const MAX_PARTS_LISTED: i32 = 1000;

/// The attributes asked for, each one S3 knows. A header may carry several, separated by
/// commas.
fn attributes_asked(input: &GetObjectAttributesInput) -> S3Result<Vec<&'static str>> {
    let mut asked = Vec::new();
    for item in &input.object_attributes {
        for name in item.as_str().split(',').map(str::trim) {
            let known = ATTRIBUTES
                .iter()
                .find(|a| a.eq_ignore_ascii_case(name))
                .ok_or_else(|| {
                    S3Error::with_message(
                        S3ErrorCode::InvalidArgument,
                        format!("Invalid attribute name specified: {name}"),
                    )
                })?;
            asked.push(*known);
        }
    }
    if asked.is_empty() {
        return Err(S3Error::with_message(
            S3ErrorCode::InvalidArgument,
            "x-amz-object-attributes names no attribute",
        ));
    }
    Ok(asked)
}

/// The object's checksum as this call gives it: a composite one without its `-N`.
fn checksum_of(c: &Checksums) -> Option<Checksum> {
    let bare = |v: &Option<String>| {
        v.as_ref()
            .map(|v| v.split_once('-').map_or(v.as_str(), |(b, _)| b).to_owned())
    };
    let out = Checksum {
        checksum_crc32: bare(&c.crc32),
        checksum_crc32c: bare(&c.crc32c),
        checksum_crc64nvme: bare(&c.crc64nvme),
        checksum_sha1: bare(&c.sha1),
        checksum_sha256: bare(&c.sha256),
        checksum_type: c.kind.clone().map(Into::into),
    };
    let any = out.checksum_crc32.is_some()
        || out.checksum_crc32c.is_some()
        || out.checksum_crc64nvme.is_some()
        || out.checksum_sha1.is_some()
        || out.checksum_sha256.is_some();
    any.then_some(out)
}

/// A page of a multipart object's parts, after `marker`, at most `max`.
fn parts_page(info: &ObjectInfo, marker: i32, max: i32) -> Option<GetObjectAttributesParts> {
    let total = i32::try_from(info.part_sizes.len()).ok()?;
    if total == 0 {
        return None;
    }
    let first = usize::try_from(marker.max(0)).ok()?;
    let count = usize::try_from(max.clamp(0, MAX_PARTS_LISTED)).ok()?;
    let rest = info.part_sizes.len().saturating_sub(first);
    let shown = rest.min(count);
    let truncated = rest > count;
    let parts: Vec<ObjectPart> = (first..first + shown)
        .map(|i| {
            let sum = info
                .part_checksums
                .get(i)
                .map(|v| info.checksums.like(v.clone()))
                .unwrap_or_default();
            ObjectPart {
                part_number: i32::try_from(i + 1).ok(),
                size: i64::try_from(info.part_sizes[i]).ok(),
                checksum_crc32: sum.crc32,
                checksum_crc32c: sum.crc32c,
                checksum_crc64nvme: sum.crc64nvme,
                checksum_sha1: sum.sha1,
                checksum_sha256: sum.sha256,
            }
        })
        .collect();
    let next = i32::try_from(first + shown).ok();
    Some(GetObjectAttributesParts {
        total_parts_count: Some(total),
        part_number_marker: Some(marker),
        next_part_number_marker: next,
        max_parts: Some(max),
        is_truncated: Some(truncated),
        // Listed one by one only for an object uploaded with a checksum.
        parts: (!info.part_checksums.is_empty()).then_some(parts),
    })
}

impl Gateway {
    pub(crate) async fn get_object_attributes(
        &self,
        req: S3Request<GetObjectAttributesInput>,
    ) -> S3Result<S3Response<GetObjectAttributesOutput>> {
        let input = req.input;
        let asked = attributes_asked(&input)?;
        let wants = |name: &str| asked.contains(&name);
        let found = self
            .find_for_read(&input.bucket, &input.key, input.version_id.as_deref())
            .await?;
        let info = found.info.clone().unwrap_or_default();
        let marker = input.part_number_marker.unwrap_or(0);
        let max = input.max_parts.unwrap_or(MAX_PARTS_LISTED);
        let output = GetObjectAttributesOutput {
            e_tag: wants("ETag").then(|| ETag::Strong(found.etag())),
            object_size: wants("ObjectSize")
                .then(|| i64::try_from(found.size()).unwrap_or(i64::MAX)),
            storage_class: wants("StorageClass").then(|| "STANDARD".to_owned().into()),
            checksum: if wants("Checksum") {
                checksum_of(&info.checksums)
            } else {
                None
            },
            object_parts: if wants("ObjectParts") {
                parts_page(&info, marker, max)
            } else {
                None
            },
            last_modified: Some(found.modified()),
            version_id: found.version_id.clone(),
            ..GetObjectAttributesOutput::default()
        };
        Ok(S3Response::new(output))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(parts: usize, with_sums: bool) -> ObjectInfo {
        ObjectInfo {
            checksums: Checksums {
                sha256: Some("c3VtcyBvZiBzdW1z-3".into()),
                kind: Some("COMPOSITE".into()),
                ..Checksums::default()
            },
            part_sizes: vec![5; parts],
            part_checksums: if with_sums {
                (1..=parts).map(|i| format!("p{i}")).collect()
            } else {
                Vec::new()
            },
            ..ObjectInfo::default()
        }
    }

    #[test]
    fn parts_are_paged_and_listed_only_with_checksums() {
        let page = parts_page(&info(3, true), 1, 1).unwrap();
        assert_eq!(page.total_parts_count, Some(3));
        assert_eq!(page.is_truncated, Some(true));
        assert_eq!(page.next_part_number_marker, Some(2));
        let listed = page.parts.unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].part_number, Some(2));
        assert_eq!(listed[0].checksum_sha256.as_deref(), Some("p2"));
        let last = parts_page(&info(3, true), 2, 1000).unwrap();
        assert_eq!(last.is_truncated, Some(false));
        assert_eq!(last.parts.unwrap().len(), 1);
        assert!(
            parts_page(&info(3, false), 0, 1000)
                .unwrap()
                .parts
                .is_none()
        );
        assert!(parts_page(&info(0, false), 0, 1000).is_none());
    }

    #[test]
    fn composite_checksums_lose_their_part_count() {
        let c = checksum_of(&info(3, true).checksums).unwrap();
        assert_eq!(c.checksum_sha256.as_deref(), Some("c3VtcyBvZiBzdW1z"));
        assert!(checksum_of(&Checksums::default()).is_none());
    }

    #[test]
    fn unknown_attributes_are_refused() {
        let input = |names: Vec<&str>| GetObjectAttributesInput {
            bucket: "b".into(),
            key: "k".into(),
            object_attributes: names.into_iter().map(|n| n.to_owned().into()).collect(),
            ..GetObjectAttributesInput::default()
        };
        assert_eq!(
            attributes_asked(&input(vec!["ETag,ObjectSize"])).unwrap(),
            vec!["ETag", "ObjectSize"]
        );
        assert!(attributes_asked(&input(vec!["ETag", "Invalid_argument"])).is_err());
        assert!(attributes_asked(&input(vec![])).is_err());
    }
}
