//! `mysql://` META-URLs: Strata's form (`mysql://user:pass@host:3306/db`) and JuiceFS's
//! Go-driver forms (`mysql://user:pass@(host:3306)/db`, `@tcp(host:3306)/db`,
//! `@unix(/run/mysqld/mysqld.sock)/db`), with `?prefix=NAME` choosing the volume's table.

use strata_meta::kv::{KvError, take_prefix_param, take_query_param};
use strata_types::{Secret, redact_url};

/// What [`valid_prefix`] accepts, for the error.
const PREFIX_RULE: &str = "1-48 letters, digits and '_'";

/// Go MySQL driver parameters JuiceFS users carry in their URLs that change nothing here
/// (the engine stores bytes, never text or times, and has its own timeouts).
const IGNORED_PARAMS: &[&str] = &[
    "charset",
    "collation",
    "parseTime",
    "loc",
    "timeout",
    "readTimeout",
    "writeTimeout",
    "interpolateParams",
    "maxAllowedPacket",
];

/// Where the server listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Address {
    Tcp { host: String, port: u16 },
    Socket(String),
}

/// A `mysql://` META-URL taken apart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MysqlUrl {
    pub address: Address,
    pub user: Option<String>,
    /// Hidden when printed.
    pub password: Option<Secret>,
    pub database: String,
    /// The volume's table is `strata_{prefix}` (lower case).
    pub prefix: String,
}

impl MysqlUrl {
    /// Parse a META-URL (see the module doc). Errors never show the password.
    pub fn parse(url: &str) -> Result<MysqlUrl, KvError> {
        let bad = |why: &str| {
            KvError::Engine(format!(
                "{why} in {} (expected mysql://user:pass@(host:3306)/db)",
                redact_url(url)
            ))
        };
        let Some(rest) = url.strip_prefix("mysql://") else {
            return Err(bad("not a MySQL URL"));
        };
        let (rest, prefix) = take_prefix_param(rest, "strata", valid_prefix, PREFIX_RULE)?;
        let (rest, tls) = take_query_param(&rest, "tls");
        if tls.as_deref().is_some_and(|t| t != "false") {
            return Err(bad("TLS to MySQL is not supported (tls=false or no tls)"));
        }
        let mut rest = rest;
        for name in IGNORED_PARAMS {
            rest = take_query_param(&rest, name).0;
        }
        let (rest, query) = rest.split_once('?').unwrap_or((&rest, ""));
        if !query.is_empty() {
            return Err(bad(&format!(
                "unknown parameter {:?}",
                query.split('&').next().unwrap_or(query)
            )));
        }
        let (userinfo, hostdb) = match rest.rfind('@') {
            Some(at) if rest[..at].find('/').is_none() => (Some(&rest[..at]), &rest[at + 1..]),
            _ => (None, rest),
        };
        let (address, database) = split_address(hostdb).map_err(&bad)?;
        if database.is_empty() {
            return Err(bad("no database name"));
        }
        let (user, password) = match userinfo {
            None => (None, None),
            Some(info) => {
                let (user, pass) = match info.split_once(':') {
                    Some((u, p)) => (u, Some(p)),
                    None => (info, None),
                };
                (
                    Some(percent_decode(user).ok_or_else(|| bad("bad %-escape in the user"))?),
                    pass.map(|p| {
                        percent_decode(p)
                            .map(Secret::new)
                            .ok_or_else(|| bad("bad %-escape in the password"))
                    })
                    .transpose()?,
                )
            }
        };
        Ok(MysqlUrl {
            address,
            user: user.filter(|u| !u.is_empty()),
            password,
            database: percent_decode(database)
                .ok_or_else(|| bad("bad %-escape in the database"))?,
            prefix: prefix.to_lowercase(),
        })
    }

    /// The volume's table.
    pub fn table(&self) -> String {
        format!("strata_{}", self.prefix)
    }
}

/// `(host:port)/db`, `tcp(host:port)/db`, `unix(/path)/db` or `host:port/db`.
fn split_address(hostdb: &str) -> Result<(Address, &str), &'static str> {
    let (address, database) = if let Some(inner) = hostdb
        .strip_prefix("unix(")
        .or_else(|| hostdb.strip_prefix("tcp("))
        .or_else(|| hostdb.strip_prefix('('))
    {
        let close = inner.find(')').ok_or("no ')' after the address")?;
        let database = inner[close + 1..]
            .strip_prefix('/')
            .ok_or("no '/db' after the address")?;
        if hostdb.starts_with("unix(") {
            return Ok((Address::Socket(inner[..close].to_string()), database));
        }
        (&inner[..close], database)
    } else {
        hostdb.split_once('/').ok_or("no '/db' after the host")?
    };
    let (host, port) = match address.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => {
            (h, p.parse::<u16>().map_err(|_| "bad port")?)
        }
        _ => (address, 3306),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err("no host");
    }
    Ok((
        Address::Tcp {
            host: host.to_string(),
            port,
        },
        database,
    ))
}

fn valid_prefix(p: &str) -> bool {
    !p.is_empty() && p.len() <= 48 && p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// `%XX` escapes decoded; `None` for a broken escape or bytes that are not UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let mut out = Vec::with_capacity(s.len());
    let mut bytes = s.bytes();
    while let Some(b) = bytes.next() {
        if b == b'%' {
            let hi = char::from(bytes.next()?).to_digit(16)?;
            let lo = char::from(bytes.next()?).to_digit(16)?;
            out.push(u8::try_from(hi * 16 + lo).ok()?);
        } else {
            out.push(b);
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp(host: &str, port: u16) -> Address {
        Address::Tcp {
            host: host.into(),
            port,
        }
    }

    #[test]
    fn juicefs_and_plain_forms_parse_alike() {
        for url in [
            "mysql://u:p%40ss@(db.local:3307)/vol?prefix=Vol_1",
            "mysql://u:p%40ss@tcp(db.local:3307)/vol?charset=utf8mb4&prefix=Vol_1",
            "mysql://u:p%40ss@db.local:3307/vol?prefix=Vol_1&parseTime=true",
        ] {
            let u = MysqlUrl::parse(url).unwrap();
            assert_eq!(u.address, tcp("db.local", 3307), "{url}");
            assert_eq!(u.user.as_deref(), Some("u"));
            assert_eq!(u.password.as_ref().map(|p| p.expose()), Some("p@ss"));
            assert_eq!(u.database, "vol");
            assert_eq!(u.table(), "strata_vol_1");
            assert!(
                !format!("{u:?}").contains("p@ss"),
                "the password never prints"
            );
        }
    }

    #[test]
    fn defaults_sockets_and_ipv6() {
        let u = MysqlUrl::parse("mysql://root@(127.0.0.1)/m").unwrap();
        assert_eq!(u.address, tcp("127.0.0.1", 3306));
        assert_eq!(u.password, None);
        assert_eq!(u.table(), "strata_strata");
        let s = MysqlUrl::parse("mysql://u:p@unix(/run/mysqld/mysqld.sock)/m").unwrap();
        assert_eq!(s.address, Address::Socket("/run/mysqld/mysqld.sock".into()));
        let v6 = MysqlUrl::parse("mysql://u@([::1]:3310)/m").unwrap();
        assert_eq!(v6.address, tcp("::1", 3310));
        let anon = MysqlUrl::parse("mysql://(h:1)/m").unwrap();
        assert_eq!(anon.user, None);
    }

    #[test]
    fn bad_urls_say_why_without_the_password() {
        for (url, why) in [
            ("postgres://u:secret@h/db", "not a MySQL URL"),
            ("mysql://u:secret@(h:3306)", "no '/db'"),
            ("mysql://u:secret@(h:3306)/", "no database"),
            ("mysql://u:secret@(h:x)/db", "bad port"),
            ("mysql://u:secret@(h/db", "no ')'"),
            ("mysql://u:secret@(h)/db?tls=true", "TLS"),
            ("mysql://u:secret@(h)/db?pool=9", "unknown parameter"),
            ("mysql://u:secret@(h)/db?prefix=a;drop", "bad prefix"),
        ] {
            let e = MysqlUrl::parse(url).unwrap_err().to_string();
            assert!(e.contains(why), "{url}: {e}");
            assert!(!e.contains("secret"), "{url}: {e}");
        }
    }
}
