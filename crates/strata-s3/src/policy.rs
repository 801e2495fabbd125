//! Bucket policies: the JSON document of PutBucketPolicy, checked when stored (elements the
//! gateway cannot enforce are refused, never silently ignored) and evaluated per request:
//! an explicit Deny wins, then an Allow; statements match on principal (`*`, an access
//! key, or an IAM user ARN ending in `user/ACCESS-KEY`) or `NotPrincipal`, action
//! (`s3:GetObject`, wildcards) or `NotAction`, resource (`arn:aws:s3:::bucket/prefix*`,
//! wildcards, any bucket) or `NotResource`, and their `Condition` ([`crate::policy_cond`]).

use serde_json::Value;

use crate::policy_cond::Conditions;
pub use crate::policy_cond::Facts;
pub use crate::policy_cond::wildcard_match;

/// Who is asking.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Who {
    Anonymous,
    /// A signed request by this access key.
    User(String),
}

/// What a policy says about one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Deny,
    Allow,
    /// No statement matched.
    Silent,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Principal {
    Everyone,
    Keys(Vec<String>),
}

/// A list of patterns, or (the `Not...` form of the element) everything but them.
#[derive(Clone, Debug)]
struct Patterns {
    items: Vec<String>,
    negated: bool,
}

#[derive(Clone, Debug)]
struct Statement {
    allow: bool,
    principal: Principal,
    /// `NotPrincipal`: the statement is about everyone but `principal`.
    not_principal: bool,
    actions: Patterns,
    resources: Patterns,
    conditions: Conditions,
}

/// The element `name` or its `Not` form (exactly one of them) as strings.
fn either(map: &serde_json::Map<String, Value>, name: &str) -> Result<(Vec<String>, bool), String> {
    let not = format!("Not{name}");
    match (map.get(name), map.get(&not)) {
        (Some(v), None) => Ok((strings(v, name)?, false)),
        (None, Some(v)) => Ok((strings(v, &not)?, true)),
        (Some(_), Some(_)) => Err(format!("a statement has {name} or {not}, not both")),
        (None, None) => Err(format!("a statement needs an {name} or {not}")),
    }
}

/// A parsed bucket policy.
#[derive(Clone, Debug)]
pub struct Policy {
    statements: Vec<Statement>,
}

/// One of a policy element's forms: a string or an array of strings.
fn strings(v: &Value, what: &str) -> Result<Vec<String>, String> {
    match v {
        Value::String(s) => Ok(vec![s.clone()]),
        Value::Array(items) => items
            .iter()
            .map(|i| {
                i.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| format!("{what} must hold strings"))
            })
            .collect(),
        _ => Err(format!("{what} must be a string or an array of strings")),
    }
}

/// The access key an ARN or plain name in `Principal` stands for.
fn principal_key(p: &str) -> String {
    match p.rsplit_once(":user/") {
        Some((_, key)) => key.to_string(),
        None => p.to_string(),
    }
}

fn parse_principal(v: &Value) -> Result<Principal, String> {
    match v {
        Value::String(s) if s == "*" => Ok(Principal::Everyone),
        Value::Object(map) => {
            let mut keys = Vec::new();
            for (kind, ids) in map {
                if kind != "AWS" {
                    return Err(format!(
                        "principal type {kind:?} is not supported (use \"AWS\")"
                    ));
                }
                for id in strings(ids, "Principal.AWS")? {
                    if id == "*" {
                        return Ok(Principal::Everyone);
                    }
                    keys.push(principal_key(&id));
                }
            }
            Ok(Principal::Keys(keys))
        }
        _ => Err("Principal must be \"*\" or {\"AWS\": ...}".into()),
    }
}

fn parse_statement(v: &Value) -> Result<Statement, String> {
    let map = v.as_object().ok_or("a statement must be an object")?;
    for key in map.keys() {
        if !matches!(
            key.as_str(),
            "Sid"
                | "Effect"
                | "Principal"
                | "NotPrincipal"
                | "Action"
                | "NotAction"
                | "Resource"
                | "NotResource"
                | "Condition"
        ) {
            return Err(format!(
                "policy element {key:?} is not supported by the gateway"
            ));
        }
    }
    let allow = match map.get("Effect").and_then(Value::as_str) {
        Some("Allow") => true,
        Some("Deny") => false,
        _ => return Err("Effect must be \"Allow\" or \"Deny\"".into()),
    };
    let (principal, not_principal) = match (map.get("Principal"), map.get("NotPrincipal")) {
        (Some(p), None) => (parse_principal(p)?, false),
        (None, Some(p)) => (parse_principal(p)?, true),
        (Some(_), Some(_)) => {
            return Err("a statement has Principal or NotPrincipal, not both".into());
        }
        (None, None) => return Err("a statement needs a Principal".into()),
    };
    let (actions, not_actions) = either(map, "Action")?;
    for a in &actions {
        if !(a == "*" || a.to_ascii_lowercase().starts_with("s3:")) {
            return Err(format!("action {a:?} is not an s3: action"));
        }
    }
    let (resources, not_resources) = either(map, "Resource")?;
    for r in &resources {
        if !(r == "*" || r.starts_with("arn:aws:s3:::")) {
            return Err(format!(
                "resource {r:?} is not an S3 ARN (arn:aws:s3:::...)"
            ));
        }
    }
    let conditions = match map.get("Condition") {
        Some(c) => Conditions::parse(c)?,
        None => Conditions::default(),
    };
    Ok(Statement {
        allow,
        principal,
        not_principal,
        actions: Patterns {
            items: actions,
            negated: not_actions,
        },
        resources: Patterns {
            items: resources,
            negated: not_resources,
        },
        conditions,
    })
}

impl Patterns {
    fn matches(&self, text: &str, ignore_case: bool) -> bool {
        let any = self.items.iter().any(|p| {
            if ignore_case {
                wildcard_match(&p.to_ascii_lowercase(), &text.to_ascii_lowercase())
            } else {
                wildcard_match(p, text)
            }
        });
        any != self.negated
    }
}

impl Policy {
    /// Parse and check the policy of `bucket`; the error says which element is wrong.
    pub fn parse(text: &str, _bucket: &str) -> Result<Policy, String> {
        let doc: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        let map = doc.as_object().ok_or("a policy is a JSON object")?;
        for key in map.keys() {
            if !matches!(key.as_str(), "Version" | "Id" | "Statement") {
                return Err(format!("policy element {key:?} is not supported"));
            }
        }
        let statements = match map.get("Statement") {
            Some(Value::Array(items)) => items
                .iter()
                .map(parse_statement)
                .collect::<Result<Vec<_>, _>>()?,
            Some(one @ Value::Object(_)) => vec![parse_statement(one)?],
            _ => return Err("a policy needs a Statement".into()),
        };
        if statements.is_empty() {
            return Err("a policy needs at least one statement".into());
        }
        Ok(Policy { statements })
    }

    /// Whether some Allow statement grants anything to everyone (a public policy): a
    /// `*` principal, or `NotPrincipal`, without conditions narrowing who.
    pub fn is_public(&self) -> bool {
        self.statements
            .iter()
            .any(|s| s.allow && (s.principal == Principal::Everyone) != s.not_principal)
    }

    /// Whether some statement's conditions read the object's existing tags.
    pub fn reads_existing_tags(&self) -> bool {
        self.statements
            .iter()
            .any(|s| s.conditions.reads_existing_tags())
    }

    /// What the policy says about `who` doing `action` (`s3:GetObject`) on `resource`
    /// (`arn:aws:s3:::bucket/key`), the request known by `facts`. With `restrict`
    /// (RestrictPublicBuckets), Allow statements for everyone grant nothing.
    pub fn evaluate(
        &self,
        who: &Who,
        (action, resource): (&str, &str),
        restrict: bool,
        facts: &Facts,
    ) -> Verdict {
        let mut verdict = Verdict::Silent;
        for s in &self.statements {
            let named = match (&s.principal, who) {
                (Principal::Everyone, _) => true,
                (Principal::Keys(keys), Who::User(me)) => keys.iter().any(|k| k == me),
                (Principal::Keys(_), Who::Anonymous) => false,
            };
            if named == s.not_principal
                || !s.actions.matches(action, true)
                || !s.resources.matches(resource, false)
                || !s.conditions.hold(facts)
            {
                continue;
            }
            if !s.allow {
                return Verdict::Deny;
            }
            let public = (s.principal == Principal::Everyone) != s.not_principal;
            if !(restrict && public) {
                verdict = Verdict::Allow;
            }
        }
        verdict
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PUBLIC_READ: &str = r#"{"Version":"2012-10-17","Statement":[
        {"Sid":"r","Effect":"Allow","Principal":"*","Action":["s3:GetObject"],
         "Resource":["arn:aws:s3:::b/pub/*"]},
        {"Effect":"Allow","Principal":{"AWS":["arn:aws:iam::123:user/alice","bob"]},
         "Action":"s3:*","Resource":["arn:aws:s3:::b","arn:aws:s3:::b/*"]},
        {"Effect":"Deny","Principal":{"AWS":"bob"},"Action":"s3:Delete*",
         "Resource":"arn:aws:s3:::b/keep/*"}]}"#;

    #[test]
    fn statements_allow_and_deny_by_principal_action_and_resource() {
        let p = Policy::parse(PUBLIC_READ, "b").unwrap();
        assert!(p.is_public());
        let anon = Who::Anonymous;
        let (alice, bob, eve) = (
            Who::User("alice".into()),
            Who::User("bob".into()),
            Who::User("eve".into()),
        );
        let get = |k: &str| format!("arn:aws:s3:::b/{k}");
        assert_eq!(
            p.evaluate(
                &anon,
                ("s3:GetObject", &get("pub/x")),
                false,
                &Facts::default()
            ),
            Verdict::Allow
        );
        assert_eq!(
            p.evaluate(
                &anon,
                ("s3:GetObject", &get("pub/x")),
                true,
                &Facts::default()
            ),
            Verdict::Silent
        );
        assert_eq!(
            p.evaluate(
                &anon,
                ("s3:GetObject", &get("priv/x")),
                false,
                &Facts::default()
            ),
            Verdict::Silent
        );
        assert_eq!(
            p.evaluate(
                &anon,
                ("s3:PutObject", &get("pub/x")),
                false,
                &Facts::default()
            ),
            Verdict::Silent
        );
        assert_eq!(
            p.evaluate(
                &alice,
                ("s3:PutObject", &get("any")),
                false,
                &Facts::default()
            ),
            Verdict::Allow
        );
        assert_eq!(
            p.evaluate(
                &alice,
                ("s3:ListBucket", "arn:aws:s3:::b"),
                false,
                &Facts::default()
            ),
            Verdict::Allow
        );
        assert_eq!(
            p.evaluate(
                &bob,
                ("s3:DeleteObject", &get("keep/1")),
                false,
                &Facts::default()
            ),
            Verdict::Deny
        );
        assert_eq!(
            p.evaluate(
                &bob,
                ("s3:DeleteObject", &get("tmp/1")),
                false,
                &Facts::default()
            ),
            Verdict::Allow
        );
        assert_eq!(
            p.evaluate(
                &eve,
                ("s3:PutObject", &get("pub/x")),
                false,
                &Facts::default()
            ),
            Verdict::Silent
        );
    }

    #[test]
    fn not_elements_and_conditions_narrow_statements() {
        let doc = r#"{"Statement":[
            {"Effect":"Deny","NotPrincipal":{"AWS":"admin"},"Action":"s3:DeleteObject",
             "Resource":"arn:aws:s3:::b/*"},
            {"Effect":"Allow","Principal":"*","NotAction":["s3:Delete*","s3:Put*"],
             "NotResource":"arn:aws:s3:::b/secret/*",
             "Condition":{"IpAddress":{"aws:SourceIp":"10.0.0.0/8"},
                          "Bool":{"aws:SecureTransport":"true"}}},
            {"Effect":"Allow","Principal":"*","Action":"s3:GetObject",
             "Resource":"arn:aws:s3:::other-bucket/*"}]}"#;
        let p = Policy::parse(doc, "b").unwrap();
        let (admin, eve) = (Who::User("admin".into()), Who::User("eve".into()));
        let inside = {
            let mut f = Facts::default();
            f.set("aws:SourceIp", "10.2.3.4");
            f.set("aws:SecureTransport", "true");
            f
        };
        let outside = {
            let mut f = inside.clone();
            f.set("aws:SourceIp", "192.0.2.1");
            f
        };
        let key = |k: &str| format!("arn:aws:s3:::b/{k}");
        let del = ("s3:DeleteObject", key("x"));
        assert_eq!(
            p.evaluate(&eve, (del.0, &del.1), false, &inside),
            Verdict::Deny
        );
        assert_eq!(
            p.evaluate(&admin, (del.0, &del.1), false, &inside),
            Verdict::Silent
        );
        let get = key("pub/x");
        assert_eq!(
            p.evaluate(&eve, ("s3:GetObject", &get), false, &inside),
            Verdict::Allow
        );
        assert_eq!(
            p.evaluate(&eve, ("s3:GetObject", &get), false, &outside),
            Verdict::Silent
        );
        let secret = key("secret/x");
        assert_eq!(
            p.evaluate(&eve, ("s3:GetObject", &secret), false, &inside),
            Verdict::Silent
        );
        assert_eq!(
            p.evaluate(&eve, ("s3:PutObject", &get), false, &inside),
            Verdict::Silent
        );
        // Another bucket's resources are accepted and never match this bucket's requests.
        assert_eq!(
            p.evaluate(&eve, ("s3:GetObject", &get), false, &outside),
            Verdict::Silent
        );
    }

    #[test]
    fn unsupported_or_foreign_policies_are_refused_with_the_reason() {
        let cases = [
            ("nope", "not JSON"),
            (r#"{"Statement":[]}"#, "at least one"),
            (
                r#"{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*","Condition":{"StringEquals":{"aws:PrincipalOrgID":"x"}}}]}"#,
                "aws:PrincipalOrgID",
            ),
            (
                r#"{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:sqs:::q"}]}"#,
                "not an S3 ARN",
            ),
            (
                r#"{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","NotAction":"s3:PutObject","Resource":"arn:aws:s3:::b/*"}]}"#,
                "not both",
            ),
            (
                r#"{"Statement":[{"Effect":"Maybe","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}]}"#,
                "Effect",
            ),
            (
                r#"{"Statement":[{"Effect":"Allow","Principal":{"Service":"x"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}]}"#,
                "principal type",
            ),
        ];
        for (doc, why) in cases {
            let err = Policy::parse(doc, "b").unwrap_err();
            assert!(err.contains(why), "{doc}: {err}");
        }
    }

    #[test]
    fn wildcards_match_like_iam() {
        assert!(wildcard_match("s3:get*", "s3:getobject"));
        assert!(wildcard_match("a*b*c", "axxbyyc"));
        assert!(wildcard_match("a?c", "abc"));
        assert!(!wildcard_match("a?c", "ac"));
        assert!(!wildcard_match(
            "arn:aws:s3:::b/pub/*",
            "arn:aws:s3:::b/private"
        ));
        assert!(wildcard_match("*", ""));
    }
}
