//! Object keys as paths: which keys a volume can hold, and how one splits into the names
//! of the directories above it and its own name. A key never leaves its bucket: empty,
//! `.` and `..` components, NUL bytes, keys over 1024 bytes and components over 255
//! bytes are refused with S3's error codes before any file system call.

use s3s::{S3Error, S3ErrorCode};

/// S3's limit on a key's length, in bytes.
pub const MAX_KEY: usize = 1024;
/// The file system's limit on one name, in bytes.
pub const MAX_NAME: usize = 255;
/// The gateway's own directory at the root it serves: temporary uploads and multipart
/// parts. Listings skip it and no key may start with it.
pub const HIDDEN_DIR: &str = ".strata-s3";

/// A key split into path components.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectPath<'a> {
    /// The directories above the object, outermost first.
    pub dirs: Vec<&'a str>,
    /// The object's own name; `None` for a directory key (`a/b/`).
    pub name: Option<&'a str>,
}

impl ObjectPath<'_> {
    /// Whether the key names a directory (it ends in `/`).
    pub fn is_dir(&self) -> bool {
        self.name.is_none()
    }
}

fn invalid(msg: String) -> S3Error {
    S3Error::with_message(S3ErrorCode::InvalidArgument, msg)
}

/// Check `key` and split it into components.
pub fn parse_key(key: &str) -> Result<ObjectPath<'_>, S3Error> {
    if key.is_empty() {
        return Err(invalid("the object key is empty".into()));
    }
    if key.len() > MAX_KEY {
        return Err(S3Error::with_message(
            S3ErrorCode::KeyTooLongError,
            format!("keys are at most {MAX_KEY} bytes"),
        ));
    }
    let (body, is_dir) = match key.strip_suffix('/') {
        Some(body) => (body, true),
        None => (key, false),
    };
    let mut parts: Vec<&str> = Vec::new();
    for part in body.split('/') {
        check_component(key, part)?;
        parts.push(part);
    }
    if parts.first() == Some(&HIDDEN_DIR) {
        return Err(invalid(format!(
            "keys under {HIDDEN_DIR}/ are reserved for the gateway's own files"
        )));
    }
    let name = if is_dir { None } else { parts.pop() };
    Ok(ObjectPath { dirs: parts, name })
}

fn check_component(key: &str, part: &str) -> Result<(), S3Error> {
    if part.is_empty() {
        return Err(invalid(format!(
            "key {key:?} has an empty path component (a leading '/' or '//'): \
             keys are stored as paths"
        )));
    }
    if part == "." || part == ".." {
        return Err(invalid(format!(
            "key {key:?} has a '{part}' component: keys are stored as paths"
        )));
    }
    if part.contains('\0') {
        return Err(invalid(format!("key {key:?} holds a NUL byte")));
    }
    if part.len() > MAX_NAME {
        return Err(S3Error::with_message(
            S3ErrorCode::KeyTooLongError,
            format!("each '/'-separated part of a key is at most {MAX_NAME} bytes"),
        ));
    }
    Ok(())
}

/// Where a listing prefix starts: the directories it names in full and the beginning of
/// the names it matches in the last one (`a/b/c` → `[a, b]` and `c`). `None` when the
/// prefix cannot match any key a volume holds (an empty or `..` component).
pub fn split_prefix(prefix: &str) -> Option<(Vec<&str>, &str)> {
    let (dirs, rest) = match prefix.rfind('/') {
        Some(i) => (&prefix[..i], &prefix[i + 1..]),
        None => ("", prefix),
    };
    let mut parts = Vec::new();
    if !dirs.is_empty() || prefix.starts_with('/') {
        for part in dirs.split('/') {
            if part.is_empty() || part == "." || part == ".." || part.len() > MAX_NAME {
                return None;
            }
            parts.push(part);
        }
    }
    Some((parts, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_split_into_directories_and_a_name() {
        let p = parse_key("a/b/c.txt").unwrap();
        assert_eq!(p.dirs, vec!["a", "b"]);
        assert_eq!(p.name, Some("c.txt"));
        let d = parse_key("a/b/").unwrap();
        assert_eq!(d.dirs, vec!["a", "b"]);
        assert!(d.is_dir());
        assert_eq!(parse_key("x").unwrap().dirs, Vec::<&str>::new());
    }

    #[test]
    fn keys_that_would_escape_or_cannot_be_paths_are_refused() {
        for key in [
            "", "/a", "a//b", "a/../b", "..", "a/./b", "./a", "a/\0", "/", "//",
        ] {
            let err = parse_key(key).unwrap_err();
            assert_eq!(*err.code(), S3ErrorCode::InvalidArgument, "{key:?}");
        }
        let long = "k".repeat(MAX_KEY + 1);
        assert_eq!(
            *parse_key(&long).unwrap_err().code(),
            S3ErrorCode::KeyTooLongError
        );
        let long_part = format!("a/{}", "n".repeat(MAX_NAME + 1));
        assert_eq!(
            *parse_key(&long_part).unwrap_err().code(),
            S3ErrorCode::KeyTooLongError
        );
        let reserved = format!("{HIDDEN_DIR}/tmp/x");
        assert!(parse_key(&reserved).is_err());
        assert!(parse_key(&format!("a/{HIDDEN_DIR}")).is_ok());
    }

    #[test]
    fn prefixes_split_at_their_last_slash() {
        assert_eq!(split_prefix(""), Some((vec![], "")));
        assert_eq!(split_prefix("abc"), Some((vec![], "abc")));
        assert_eq!(split_prefix("a/b/c"), Some((vec!["a", "b"], "c")));
        assert_eq!(split_prefix("a/"), Some((vec!["a"], "")));
        assert_eq!(split_prefix("/a"), None);
        assert_eq!(split_prefix("a//b"), None);
        assert_eq!(split_prefix("../x"), None);
    }
}
