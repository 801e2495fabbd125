//! The `Condition` element of bucket policy statements: IAM's operators (String*,
//! Numeric*, Date*, Bool, IpAddress/NotIpAddress, Null, each `...IfExists`) over the keys
//! the gateway knows a request by ([`Facts`]). Blocks and keys are ANDed, the values of
//! one key ORed; a negated operator holds when no value matches, and also when the key is
//! absent. A key the gateway cannot supply is refused when the policy is stored: a
//! condition on it would silently never hold, which turns a Deny into nothing.

use std::collections::HashMap;
use std::net::IpAddr;

use serde_json::Value;

/// Condition keys a request can carry (lower-case); `s3:existingobjecttag/` and
/// `s3:requestobjecttag/` take a tag key after the slash.
const KNOWN_KEYS: &[&str] = &[
    "aws:sourceip",
    "aws:securetransport",
    "aws:username",
    "aws:userid",
    "aws:currenttime",
    "aws:epochtime",
    "aws:useragent",
    "aws:referer",
    "s3:prefix",
    "s3:delimiter",
    "s3:max-keys",
    "s3:x-amz-acl",
    "s3:x-amz-copy-source",
    "s3:x-amz-metadata-directive",
    "s3:x-amz-content-sha256",
    "s3:x-amz-server-side-encryption",
    "s3:versionid",
];
/// Condition keys naming an object's tags (a tag key follows).
pub const EXISTING_TAG: &str = "s3:existingobjecttag/";
const REQUEST_TAG: &str = "s3:requestobjecttag/";

/// What a request is known by, for conditions: lower-case key → values.
#[derive(Clone, Debug, Default)]
pub struct Facts {
    values: HashMap<String, Vec<String>>,
}

impl Facts {
    /// Whether `key` (any case) has a value.
    pub fn has(&self, key: &str) -> bool {
        self.values.contains_key(&lower_key(key))
    }

    /// Set `key` (any case) to `value`.
    pub fn set(&mut self, key: &str, value: impl Into<String>) {
        self.values.insert(lower_key(key), vec![value.into()]);
    }

    fn get(&self, key: &str) -> Option<&[String]> {
        self.values.get(key).map(Vec::as_slice)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cmp {
    Eq,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Str { ignore_case: bool },
    Like,
    Numeric(Cmp),
    Date(Cmp),
    Bool,
    Ip,
    Null,
}

/// One key tested by one operator.
#[derive(Clone, Debug)]
struct Clause {
    kind: Kind,
    negated: bool,
    if_exists: bool,
    key: String,
    values: Vec<String>,
}

/// A statement's conditions (all must hold).
#[derive(Clone, Debug, Default)]
pub struct Conditions {
    clauses: Vec<Clause>,
}

fn operator(name: &str) -> Result<(Kind, bool, bool), String> {
    if name.contains(':') {
        return Err(format!(
            "condition operator {name:?}: ForAnyValue/ForAllValues are not supported"
        ));
    }
    let (base, if_exists) = match name.strip_suffix("IfExists") {
        Some(base) => (base, true),
        None => (name, false),
    };
    let cmp = |rest: &str| match rest {
        "Equals" => Some((Cmp::Eq, false)),
        "NotEquals" => Some((Cmp::Eq, true)),
        "LessThan" => Some((Cmp::Lt, false)),
        "LessThanEquals" => Some((Cmp::Le, false)),
        "GreaterThan" => Some((Cmp::Gt, false)),
        "GreaterThanEquals" => Some((Cmp::Ge, false)),
        _ => None,
    };
    let (kind, negated) = match base {
        "StringEquals" => (Kind::Str { ignore_case: false }, false),
        "StringNotEquals" => (Kind::Str { ignore_case: false }, true),
        "StringEqualsIgnoreCase" => (Kind::Str { ignore_case: true }, false),
        "StringNotEqualsIgnoreCase" => (Kind::Str { ignore_case: true }, true),
        "StringLike" => (Kind::Like, false),
        "StringNotLike" => (Kind::Like, true),
        "Bool" => (Kind::Bool, false),
        "IpAddress" => (Kind::Ip, false),
        "NotIpAddress" => (Kind::Ip, true),
        "Null" => (Kind::Null, false),
        other => match (other.strip_prefix("Numeric"), other.strip_prefix("Date")) {
            (Some(rest), _) if cmp(rest).is_some() => {
                let (c, n) = cmp(rest).unwrap_or((Cmp::Eq, false));
                (Kind::Numeric(c), n)
            }
            (_, Some(rest)) if cmp(rest).is_some() => {
                let (c, n) = cmp(rest).unwrap_or((Cmp::Eq, false));
                (Kind::Date(c), n)
            }
            _ => return Err(format!("condition operator {name:?} is not supported")),
        },
    };
    if if_exists && kind == Kind::Null {
        return Err("NullIfExists is not an operator".into());
    }
    Ok((kind, negated, if_exists))
}

/// A condition key as facts and clauses keep it: lower-case, but a tag key after the
/// `/` keeps its case (tags are case-sensitive).
fn lower_key(key: &str) -> String {
    match key.find('/') {
        Some(i) => format!("{}{}", key[..=i].to_ascii_lowercase(), &key[i + 1..]),
        None => key.to_ascii_lowercase(),
    }
}

fn check_key(key: &str) -> Result<String, String> {
    let lower = key.to_ascii_lowercase();
    let tag = [EXISTING_TAG, REQUEST_TAG]
        .iter()
        .any(|p| lower.strip_prefix(p).is_some_and(|t| !t.is_empty()));
    if tag || KNOWN_KEYS.contains(&lower.as_str()) {
        return Ok(lower_key(key));
    }
    Err(format!(
        "condition key {key:?} is not supported by the gateway"
    ))
}

fn values_of(v: &Value, key: &str) -> Result<Vec<String>, String> {
    let one = |v: &Value| match v {
        Value::String(s) => Ok(s.clone()),
        Value::Bool(b) => Ok(b.to_string()),
        Value::Number(n) => Ok(n.to_string()),
        _ => Err(format!(
            "condition values of {key:?} must be strings, numbers or booleans"
        )),
    };
    match v {
        Value::Array(items) => items.iter().map(one).collect(),
        other => Ok(vec![one(other)?]),
    }
}

impl Conditions {
    /// Parse a `Condition` element.
    pub fn parse(v: &Value) -> Result<Conditions, String> {
        let blocks = v.as_object().ok_or("Condition must be an object")?;
        let mut clauses = Vec::new();
        for (op, keys) in blocks {
            let (kind, negated, if_exists) = operator(op)?;
            let keys = keys
                .as_object()
                .ok_or_else(|| format!("condition {op:?} must map keys to values"))?;
            for (key, values) in keys {
                let values = values_of(values, key)?;
                for value in &values {
                    check_value(kind, value).map_err(|why| format!("{op} {key}: {why}"))?;
                }
                clauses.push(Clause {
                    kind,
                    negated,
                    if_exists,
                    key: check_key(key)?,
                    values,
                });
            }
        }
        Ok(Conditions { clauses })
    }

    /// Whether every clause holds for `facts`.
    pub fn hold(&self, facts: &Facts) -> bool {
        self.clauses.iter().all(|c| c.holds(facts))
    }

    /// Whether some clause reads an object's existing tags.
    pub fn reads_existing_tags(&self) -> bool {
        self.clauses.iter().any(|c| c.key.starts_with(EXISTING_TAG))
    }
}

/// A value the operator can never compare is refused when the policy is stored.
fn check_value(kind: Kind, value: &str) -> Result<(), String> {
    let ok = match kind {
        Kind::Numeric(_) => value.parse::<f64>().is_ok(),
        Kind::Date(_) => date(value).is_some(),
        Kind::Bool | Kind::Null => {
            value.eq_ignore_ascii_case("true") || value.eq_ignore_ascii_case("false")
        }
        Kind::Ip => cidr(value).is_some(),
        Kind::Str { .. } | Kind::Like => true,
    };
    if ok {
        Ok(())
    } else {
        Err(format!("{value:?} is not a valid value"))
    }
}

impl Clause {
    fn holds(&self, facts: &Facts) -> bool {
        let present = facts.get(&self.key);
        if self.kind == Kind::Null {
            let absent = present.is_none();
            return self
                .values
                .iter()
                .any(|v| v.eq_ignore_ascii_case("true") == absent);
        }
        let Some(actual) = present else {
            return self.if_exists || self.negated;
        };
        let any = actual
            .iter()
            .any(|a| self.values.iter().any(|v| matches(self.kind, a, v)));
        any != self.negated
    }
}

/// `*` matches any run of characters, `?` any one (IAM's wildcards).
pub fn wildcard_match(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ti));
                pi += 1;
            }
            Some(&c) if c == '?' || c == t[ti] => {
                pi += 1;
                ti += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    pi = sp + 1;
                    ti = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

fn matches(kind: Kind, actual: &str, wanted: &str) -> bool {
    match kind {
        Kind::Str { ignore_case: false } => actual == wanted,
        Kind::Str { ignore_case: true } => actual.eq_ignore_ascii_case(wanted),
        Kind::Like => wildcard_match(wanted, actual),
        Kind::Bool => actual.eq_ignore_ascii_case(wanted),
        Kind::Numeric(c) => match (actual.parse::<f64>(), wanted.parse::<f64>()) {
            (Ok(a), Ok(w)) => compare(c, a.partial_cmp(&w)),
            _ => false,
        },
        Kind::Date(c) => match (date(actual), date(wanted)) {
            (Some(a), Some(w)) => compare(c, Some(a.cmp(&w))),
            _ => false,
        },
        Kind::Ip => match (actual.parse::<IpAddr>(), cidr(wanted)) {
            (Ok(ip), Some((net, bits))) => in_network(ip, net, bits),
            _ => false,
        },
        Kind::Null => false,
    }
}

fn compare(c: Cmp, order: Option<std::cmp::Ordering>) -> bool {
    use std::cmp::Ordering::{Equal, Greater, Less};
    matches!(
        (c, order),
        (Cmp::Eq, Some(Equal))
            | (Cmp::Lt, Some(Less))
            | (Cmp::Le, Some(Less | Equal))
            | (Cmp::Gt, Some(Greater))
            | (Cmp::Ge, Some(Greater | Equal))
    )
}

/// A date as IAM takes it (ISO 8601 / RFC 3339, or seconds since the epoch), in ns.
fn date(text: &str) -> Option<i128> {
    if let Ok(secs) = text.parse::<i64>() {
        return Some(i128::from(secs) * 1_000_000_000);
    }
    let format = time::format_description::well_known::Rfc3339;
    time::OffsetDateTime::parse(text, &format)
        .ok()
        .map(time::OffsetDateTime::unix_timestamp_nanos)
}

/// `a.b.c.d/n`, `x::y/n` or a single address.
fn cidr(text: &str) -> Option<(IpAddr, u8)> {
    let (addr, bits) = match text.split_once('/') {
        Some((addr, bits)) => (addr.parse::<IpAddr>().ok()?, bits.parse::<u8>().ok()?),
        None => {
            let addr = text.parse::<IpAddr>().ok()?;
            (addr, if addr.is_ipv4() { 32 } else { 128 })
        }
    };
    let max = if addr.is_ipv4() { 32 } else { 128 };
    (bits <= max).then_some((addr, bits))
}

fn in_network(ip: IpAddr, net: IpAddr, bits: u8) -> bool {
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    };
    let (a, b, width) = match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(b)) => {
            (u128::from(u32::from(a)), u128::from(u32::from(b)), 32u32)
        }
        (IpAddr::V6(a), IpAddr::V6(b)) => (u128::from(a), u128::from(b), 128u32),
        _ => return false,
    };
    let shift = width - u32::from(bits);
    shift >= width || (a >> shift) == (b >> shift)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code
    use super::*;

    fn conds(json: &str) -> Conditions {
        Conditions::parse(&serde_json::from_str(json).unwrap()).unwrap()
    }

    fn facts(pairs: &[(&str, &str)]) -> Facts {
        let mut f = Facts::default();
        for (k, v) in pairs {
            f.set(k, *v);
        }
        f
    }

    #[test]
    fn operators_follow_iam() {
        let c = conds(r#"{"IpAddress":{"aws:SourceIp":["10.0.0.0/8","192.168.1.7"]}}"#);
        assert!(c.hold(&facts(&[("aws:SourceIp", "10.1.2.3")])));
        assert!(c.hold(&facts(&[("aws:SourceIp", "::ffff:192.168.1.7")])));
        assert!(!c.hold(&facts(&[("aws:SourceIp", "11.0.0.1")])));
        assert!(!c.hold(&facts(&[])));
        let c = conds(r#"{"NotIpAddress":{"aws:SourceIp":"127.0.0.0/8"}}"#);
        assert!(!c.hold(&facts(&[("aws:SourceIp", "127.0.0.1")])));
        assert!(c.hold(&facts(&[("aws:SourceIp", "10.0.0.1")])));
        let c = conds(r#"{"Bool":{"aws:SecureTransport":"false"}}"#);
        assert!(c.hold(&facts(&[("aws:SecureTransport", "false")])));
        assert!(!c.hold(&facts(&[("aws:SecureTransport", "true")])));
        let c = conds(r#"{"StringLike":{"s3:prefix":["home/","home/${x}*","docs/*"]}}"#);
        assert!(c.hold(&facts(&[("s3:prefix", "docs/a")])));
        assert!(!c.hold(&facts(&[("s3:prefix", "other")])));
        let c = conds(r#"{"StringNotEquals":{"s3:x-amz-acl":"public-read"}}"#);
        assert!(
            c.hold(&facts(&[])),
            "a negated operator holds when the key is absent"
        );
        assert!(!c.hold(&facts(&[("s3:x-amz-acl", "public-read")])));
        let c = conds(r#"{"StringEqualsIfExists":{"s3:x-amz-acl":"private"}}"#);
        assert!(c.hold(&facts(&[])));
        assert!(!c.hold(&facts(&[("s3:x-amz-acl", "public-read")])));
        let c = conds(r#"{"NumericLessThanEquals":{"s3:max-keys":"10"}}"#);
        assert!(c.hold(&facts(&[("s3:max-keys", "10")])));
        assert!(!c.hold(&facts(&[("s3:max-keys", "11")])));
        let c = conds(r#"{"DateLessThan":{"aws:CurrentTime":"2030-01-01T00:00:00Z"}}"#);
        assert!(c.hold(&facts(&[("aws:CurrentTime", "2029-12-31T23:59:59Z")])));
        assert!(!c.hold(&facts(&[("aws:CurrentTime", "2030-01-01T00:00:01Z")])));
        let c = conds(r#"{"Null":{"s3:x-amz-server-side-encryption":"true"}}"#);
        assert!(c.hold(&facts(&[])));
        assert!(!c.hold(&facts(&[("s3:x-amz-server-side-encryption", "AES256")])));
        let c = conds(
            r#"{"StringEquals":{"s3:ExistingObjectTag/Class":"Public","aws:username":"alice"}}"#,
        );
        assert!(c.reads_existing_tags());
        assert!(c.hold(&facts(&[
            ("s3:existingobjecttag/Class", "Public"),
            ("aws:username", "alice")
        ])));
        assert!(!c.hold(&facts(&[
            ("s3:existingobjecttag/Class", "Public"),
            ("aws:username", "bob")
        ])));
    }

    #[test]
    fn conditions_the_gateway_cannot_decide_are_refused() {
        for (doc, why) in [
            (
                r#"{"StringEquals":{"aws:PrincipalOrgID":"o-1"}}"#,
                "not supported by the gateway",
            ),
            (
                r#"{"ForAnyValue:StringEquals":{"s3:prefix":"a"}}"#,
                "ForAnyValue",
            ),
            (r#"{"StringSortOf":{"s3:prefix":"a"}}"#, "not supported"),
            (
                r#"{"IpAddress":{"aws:SourceIp":"10.0.0.0/99"}}"#,
                "not a valid value",
            ),
            (
                r#"{"DateLessThan":{"aws:CurrentTime":"soon"}}"#,
                "not a valid value",
            ),
            (
                r#"{"NumericEquals":{"s3:max-keys":"ten"}}"#,
                "not a valid value",
            ),
        ] {
            let err = Conditions::parse(&serde_json::from_str(doc).unwrap()).unwrap_err();
            assert!(err.contains(why), "{doc}: {err}");
        }
    }
}
