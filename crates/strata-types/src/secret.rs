//! Values that must never be printed: passwords, secret keys, session tokens. [`Secret`]
//! and [`MetaUrl`] show `****` in place of the secret in `Debug` and `Display`, so logging
//! or formatting a struct that holds one cannot leak it; the value itself is reached only
//! through `expose`, at the point where it is handed to a client library.

use std::fmt;

/// A secret string. Serialized as the plain value (it is stored, e.g. in the format
/// record), never shown.
#[derive(Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The secret itself, for the client library that needs it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(****)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("****")
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Secret {
        Secret(value)
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Secret {
        Secret(value.to_string())
    }
}

/// A URL that may carry a password (`scheme://user:password@host/...`): shown with the
/// password replaced by `****`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct MetaUrl(String);

impl MetaUrl {
    pub fn new(url: impl Into<String>) -> MetaUrl {
        MetaUrl(url.into())
    }

    /// The full URL, password included, for the client library that connects with it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The URL with its password hidden (what `Display` shows).
    pub fn redacted(&self) -> String {
        redact_url(&self.0)
    }

    /// The password in the URL, if any.
    pub fn password(&self) -> Option<&str> {
        let (start, at) = userinfo(&self.0)?;
        let colon = self.0[start..at].find(':')?;
        Some(&self.0[start + colon + 1..at])
    }

    /// The URL without its password (`user@host`), and the password taken out.
    pub fn without_password(&self) -> (MetaUrl, Option<Secret>) {
        match (userinfo(&self.0), self.password()) {
            (Some((start, at)), Some(pw)) => {
                let colon = start + self.0[start..at].find(':').unwrap_or(0);
                // No user left: the `@` goes too.
                let rest = if colon == start { at + 1 } else { at };
                let bare = format!("{}{}", &self.0[..colon], &self.0[rest..]);
                (MetaUrl(bare), Some(Secret::new(pw)))
            }
            _ => (self.clone(), None),
        }
    }

    /// This URL with `password` as its password, unless it has one already.
    pub fn with_password(&self, password: &str) -> MetaUrl {
        let url = &self.0;
        let joined = match userinfo(url) {
            Some((start, at)) if url[start..at].contains(':') => url.clone(),
            Some((_, at)) => format!("{}:{password}{}", &url[..at], &url[at..]),
            None => match url.find("://") {
                Some(i) => format!("{}:{password}@{}", &url[..i + 3], &url[i + 3..]),
                None => url.clone(),
            },
        };
        MetaUrl(joined)
    }
}

impl fmt::Debug for MetaUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MetaUrl({:?})", self.redacted())
    }
}

impl fmt::Display for MetaUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl std::str::FromStr for MetaUrl {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<MetaUrl, Self::Err> {
        Ok(MetaUrl(s.to_string()))
    }
}

/// The `user:password` part of a URL's authority: (start, position of the `@`).
/// Where the userinfo (`user:password`) of `url` starts, and where its `@` is. It ends at
/// an `@` before the first `/`, or, since secrets may hold `/` (AWS and Azure keys do), at
/// the first `@` further on when what precedes it holds a `:`.
pub fn userinfo_bounds(url: &str) -> Option<(usize, usize)> {
    userinfo(url)
}

fn userinfo(url: &str) -> Option<(usize, usize)> {
    let start = url.find("://")? + 3;
    let authority_end = url[start..].find('/').map_or(url.len(), |i| start + i);
    if let Some(at) = url[start..authority_end].rfind('@') {
        return Some((start, at + start));
    }
    let at = url[start..].find('@')? + start;
    url[start..at].contains(':').then_some((start, at))
}

/// `url` with its password (if any) replaced by `****`, for messages.
pub fn redact_url(url: &str) -> String {
    match userinfo(url) {
        Some((start, at)) => match url[start..at].find(':') {
            Some(colon) => format!("{}:****{}", &url[..start + colon], &url[at..]),
            None => url.to_string(),
        },
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_print() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s} {s:?}"), "**** Secret(****)");
        assert_eq!(s.expose(), "hunter2");
        assert_eq!(
            serde_json::to_string(&s).unwrap(),
            "\"hunter2\"",
            "stored as is"
        );
    }

    #[test]
    fn a_secret_holding_a_slash_is_still_hidden() {
        let url = "wasb://acct:ab/cd+ef==@box.127.0.0.1:10000/pre/fix";
        assert_eq!(
            redact_url(url),
            "wasb://acct:****@box.127.0.0.1:10000/pre/fix"
        );
        let (bare, secret) = MetaUrl::new(url).without_password();
        assert_eq!(bare.expose(), "wasb://acct@box.127.0.0.1:10000/pre/fix");
        assert_eq!(
            secret.map(|s| s.expose().to_string()).as_deref(),
            Some("ab/cd+ef==")
        );
        // An `@` in a path without a `:` before it is not a userinfo.
        assert_eq!(redact_url("s3://bucket/a@b"), "s3://bucket/a@b");
    }

    #[test]
    fn urls_hide_their_password() {
        let u = MetaUrl::new("redis://:pw@h:6379/1");
        assert_eq!(u.to_string(), "redis://:****@h:6379/1");
        assert!(!format!("{u:?}").contains("pw@"));
        assert_eq!(u.password(), Some("pw"));
        let (bare, pw) = u.without_password();
        assert_eq!(bare.expose(), "redis://h:6379/1");
        assert_eq!(pw.unwrap().expose(), "pw");
        assert_eq!(
            redact_url("postgres://u:p@h/db?x=a@b"),
            "postgres://u:****@h/db?x=a@b"
        );
        assert_eq!(
            redact_url("sqlite3:///var/lib/a.db"),
            "sqlite3:///var/lib/a.db"
        );
        assert_eq!(
            redact_url("etcd://h1:2379,h2:2379/p"),
            "etcd://h1:2379,h2:2379/p"
        );
        let pg = MetaUrl::new("postgres://u@h:5432/db");
        assert_eq!(pg.with_password("pw").expose(), "postgres://u:pw@h:5432/db");
        assert_eq!(
            MetaUrl::new("postgres://u:old@h/db")
                .with_password("pw")
                .expose(),
            "postgres://u:old@h/db",
            "a password in the URL wins"
        );
        assert_eq!(
            MetaUrl::new("redis://h:6379/1")
                .with_password("pw")
                .expose(),
            "redis://:pw@h:6379/1"
        );
        let (bare, _) = MetaUrl::new("postgres://u:p@h/db").without_password();
        assert_eq!(bare.expose(), "postgres://u@h/db");
    }
}
