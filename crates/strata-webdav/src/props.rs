//! Dead properties (PROPPATCH) kept in extended attributes, so every server of a volume,
//! a FUSE mount (`getfattr`) and `dump`/`load` see them: one xattr per property named
//! `user.dav:{NAMESPACE}NAME`, holding the property's XML element as the client sent it
//! (FORMAT.md "webdav v1"). A PROPPATCH is checked in full before anything is stored, so
//! a request with one bad property changes nothing (RFC 4918 §9.2).

use dav_server::davpath::DavPath;
use dav_server::fs::{DavProp, FsError, FsResult};
use http::StatusCode;
use strata_types::{Errno, Ino};
use strata_vfs::{Ctx, Vfs};

use crate::error::fs_error;
use crate::fs::VolumeFs;

/// The prefix of every dead property's xattr.
pub const PROP_PREFIX: &[u8] = b"user.dav:";
/// Longest xattr name (Linux XATTR_NAME_MAX).
const MAX_NAME: usize = 255;
/// Largest xattr value (Linux XATTR_SIZE_MAX).
const MAX_VALUE: usize = 64 << 10;

/// The xattr name of a property.
pub(crate) fn xattr_name(prop: &DavProp) -> Vec<u8> {
    let ns = prop.namespace.as_deref().unwrap_or("");
    let mut name = PROP_PREFIX.to_vec();
    name.push(b'{');
    name.extend_from_slice(ns.as_bytes());
    name.push(b'}');
    name.extend_from_slice(prop.name.as_bytes());
    name
}

/// The property an xattr name stands for (namespace and name), if it is one.
pub(crate) fn prop_of(xattr: &[u8]) -> Option<DavProp> {
    let rest = std::str::from_utf8(xattr.strip_prefix(PROP_PREFIX)?).ok()?;
    let rest = rest.strip_prefix('{')?;
    // A property's name never holds '}', a namespace URI may: split at the last one.
    let close = rest.rfind('}')?;
    let (ns, name) = (&rest[..close], &rest[close + 1..]);
    if name.is_empty() {
        return None;
    }
    Some(DavProp {
        name: name.to_string(),
        prefix: None,
        namespace: (!ns.is_empty()).then(|| ns.to_string()),
        xml: None,
    })
}

/// Names of the dead-property xattrs of `ino`.
async fn prop_xattrs(vfs: &Vfs, ctx: &Ctx, ino: Ino) -> Result<Vec<Vec<u8>>, Errno> {
    let list = vfs.listxattr(ctx, ino, 0).await?;
    Ok(list
        .split(|&b| b == 0)
        .filter(|n| n.starts_with(PROP_PREFIX))
        .map(<[u8]>::to_vec)
        .collect())
}

/// Every dead property of `path`, with its XML when `with_content`.
pub(crate) async fn get_all(
    fs: &VolumeFs,
    path: &DavPath,
    with_content: bool,
) -> FsResult<Vec<DavProp>> {
    // A listing just read the entry's attributes: one without extended attributes has
    // no dead properties, and a PROPFIND of a big directory asks nothing more of it.
    if let Some(Some(entry)) = fs.known(path)
        && !entry.attr.xattrs
    {
        return Ok(Vec::new());
    }
    let ino = fs.resolve(path).await.map_err(fs_error)?;
    let (vfs, ctx) = (fs.vfs(), fs.ctx());
    let mut props = Vec::new();
    for name in prop_xattrs(vfs, ctx, ino).await.map_err(fs_error)? {
        let Some(mut prop) = prop_of(&name) else {
            continue;
        };
        if with_content {
            match vfs.getxattr(ctx, ino, &name, 0).await {
                Ok(xml) => prop.xml = Some(xml),
                // Removed since the listing.
                Err(Errno::ENODATA) => continue,
                Err(e) => return Err(fs_error(e)),
            }
        }
        props.push(prop);
    }
    Ok(props)
}

/// The XML of one dead property of `path`.
pub(crate) async fn get_one(fs: &VolumeFs, path: &DavPath, prop: &DavProp) -> FsResult<Vec<u8>> {
    let ino = fs.resolve(path).await.map_err(fs_error)?;
    match fs.vfs().getxattr(fs.ctx(), ino, &xattr_name(prop), 0).await {
        Ok(xml) => Ok(xml),
        Err(Errno::ENODATA) => Err(FsError::NotFound),
        Err(e) => Err(fs_error(e)),
    }
}

/// Why a property cannot be stored, if it cannot.
fn refusal(set: bool, prop: &DavProp) -> Option<StatusCode> {
    if prop.name.is_empty() || xattr_name(prop).len() > MAX_NAME {
        return Some(StatusCode::FORBIDDEN);
    }
    if set && prop.xml.as_ref().is_some_and(|x| x.len() > MAX_VALUE) {
        return Some(StatusCode::INSUFFICIENT_STORAGE);
    }
    None
}

/// Set (`true`) and remove (`false`) dead properties of `path`, all or none.
pub(crate) async fn patch(
    fs: &VolumeFs,
    path: &DavPath,
    patch: Vec<(bool, DavProp)>,
) -> FsResult<Vec<(StatusCode, DavProp)>> {
    let ino = fs.resolve(path).await.map_err(fs_error)?;
    if patch.iter().any(|(set, p)| refusal(*set, p).is_some()) {
        return Ok(patch
            .into_iter()
            .map(|(set, p)| {
                let status = refusal(set, &p).unwrap_or(StatusCode::FAILED_DEPENDENCY);
                (status, strip(p))
            })
            .collect());
    }
    let (vfs, ctx) = (fs.vfs(), fs.ctx());
    let mut done = Vec::with_capacity(patch.len());
    for (set, prop) in patch {
        let name = xattr_name(&prop);
        let stored = if set {
            let xml = prop.xml.as_deref().unwrap_or_default();
            vfs.setxattr(ctx, ino, &name, xml, 0).await
        } else {
            match vfs.removexattr(ctx, ino, &name).await {
                Err(Errno::ENODATA) => Ok(()),
                other => other,
            }
        };
        stored.map_err(fs_error)?;
        done.push((StatusCode::OK, strip(prop)));
    }
    Ok(done)
}

/// A property as answered (name only).
fn strip(mut prop: DavProp) -> DavProp {
    prop.xml = None;
    prop
}

/// Copy the dead properties of `from` to `to` (a PUT replacing a file keeps them).
pub(crate) async fn copy_props(vfs: &Vfs, ctx: &Ctx, from: Ino, to: Ino) -> Result<(), Errno> {
    for name in prop_xattrs(vfs, ctx, from).await? {
        match vfs.getxattr(ctx, from, &name, 0).await {
            Ok(value) => vfs.setxattr(ctx, to, &name, &value, 0).await?,
            Err(Errno::ENODATA) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code
    use super::*;
    use proptest::prelude::*;

    fn prop(ns: Option<&str>, name: &str) -> DavProp {
        DavProp {
            name: name.into(),
            prefix: None,
            namespace: ns.map(str::to_string),
            xml: None,
        }
    }

    #[test]
    fn names_round_trip_with_and_without_namespace() {
        for p in [prop(Some("http://ex.com/ns"), "color"), prop(None, "x")] {
            let back = prop_of(&xattr_name(&p)).unwrap();
            assert_eq!((back.namespace, back.name), (p.namespace, p.name));
        }
        assert!(prop_of(b"user.other").is_none());
        assert!(prop_of(b"user.dav:{ns}").is_none());
    }

    proptest! {
        /// Any namespace (even one holding braces) and any name without a brace come back.
        #[test]
        fn any_namespace_round_trips(ns in "[ -~]{0,40}", name in "[a-zA-Z_][a-zA-Z0-9_.-]{0,20}") {
            let p = prop(Some(&ns), &name);
            let back = prop_of(&xattr_name(&p)).unwrap();
            prop_assert_eq!(back.name, name);
            prop_assert_eq!(back.namespace.unwrap_or_default(), ns);
        }
    }

    #[test]
    fn an_overlong_name_or_value_is_refused() {
        let long = prop(Some(&"n".repeat(300)), "p");
        assert_eq!(refusal(true, &long), Some(StatusCode::FORBIDDEN));
        let mut big = prop(None, "p");
        big.xml = Some(vec![b'x'; MAX_VALUE + 1]);
        assert_eq!(refusal(true, &big), Some(StatusCode::INSUFFICIENT_STORAGE));
        assert_eq!(refusal(false, &big), None);
    }
}
