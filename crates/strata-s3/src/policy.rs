//! Bucket policies: the JSON document of PutBucketPolicy, checked when stored (elements the
//! gateway cannot enforce are refused, never silently ignored) and evaluated per request:
//! an explicit Deny wins, then an Allow; statements match on principal (`*`, an access
//! key, or an IAM user ARN ending in `user/ACCESS-KEY`), action (`s3:GetObject`,
//! wildcards) and resource (`arn:aws:s3:::bucket/prefix*`, wildcards).

use serde_json::Value;

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

#[derive(Clone, Debug)]
struct Statement {
    allow: bool,
    principal: Principal,
    actions: Vec<String>,
    resources: Vec<String>,
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

fn parse_statement(v: &Value, bucket: &str) -> Result<Statement, String> {
    let map = v.as_object().ok_or("a statement must be an object")?;
    for key in map.keys() {
        if !matches!(
            key.as_str(),
            "Sid" | "Effect" | "Principal" | "Action" | "Resource"
        ) {
            return Err(format!(
                "policy element {key:?} is not supported by the gateway (supported: Sid, Effect, Principal, Action, Resource)"
            ));
        }
    }
    let allow = match map.get("Effect").and_then(Value::as_str) {
        Some("Allow") => true,
        Some("Deny") => false,
        _ => return Err("Effect must be \"Allow\" or \"Deny\"".into()),
    };
    let principal = parse_principal(
        map.get("Principal")
            .ok_or("a statement needs a Principal")?,
    )?;
    let actions = strings(
        map.get("Action").ok_or("a statement needs an Action")?,
        "Action",
    )?;
    for a in &actions {
        if !(a == "*" || a.to_ascii_lowercase().starts_with("s3:")) {
            return Err(format!("action {a:?} is not an s3: action"));
        }
    }
    let resources = strings(
        map.get("Resource").ok_or("a statement needs a Resource")?,
        "Resource",
    )?;
    let arn = format!("arn:aws:s3:::{bucket}");
    for r in &resources {
        let inside = r == &arn || r.starts_with(&format!("{arn}/")) || r == "*";
        if !inside {
            return Err(format!("resource {r:?} is not this bucket ({arn})"));
        }
    }
    Ok(Statement {
        allow,
        principal,
        actions,
        resources,
    })
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

impl Policy {
    /// Parse and check the policy of `bucket`; the error says which element is wrong.
    pub fn parse(text: &str, bucket: &str) -> Result<Policy, String> {
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
                .map(|s| parse_statement(s, bucket))
                .collect::<Result<Vec<_>, _>>()?,
            Some(one @ Value::Object(_)) => vec![parse_statement(one, bucket)?],
            _ => return Err("a policy needs a Statement".into()),
        };
        if statements.is_empty() {
            return Err("a policy needs at least one statement".into());
        }
        Ok(Policy { statements })
    }

    /// Whether some Allow statement grants anything to everyone (a public policy).
    pub fn is_public(&self) -> bool {
        self.statements
            .iter()
            .any(|s| s.allow && s.principal == Principal::Everyone)
    }

    /// What the policy says about `who` doing `action` (`s3:GetObject`) on `resource`
    /// (`arn:aws:s3:::bucket/key`). With `public_only_for_owner` (RestrictPublicBuckets),
    /// Allow statements for everyone grant nothing.
    pub fn evaluate(&self, who: &Who, action: &str, resource: &str, restrict: bool) -> Verdict {
        let mut verdict = Verdict::Silent;
        for s in &self.statements {
            let principal = match (&s.principal, who) {
                (Principal::Everyone, _) => true,
                (Principal::Keys(keys), Who::User(me)) => keys.iter().any(|k| k == me),
                (Principal::Keys(_), Who::Anonymous) => false,
            };
            let action_ok = s
                .actions
                .iter()
                .any(|a| wildcard_match(&a.to_ascii_lowercase(), &action.to_ascii_lowercase()));
            let resource_ok = s.resources.iter().any(|r| wildcard_match(r, resource));
            if !(principal && action_ok && resource_ok) {
                continue;
            }
            if !s.allow {
                return Verdict::Deny;
            }
            if !(restrict && s.principal == Principal::Everyone) {
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
            p.evaluate(&anon, "s3:GetObject", &get("pub/x"), false),
            Verdict::Allow
        );
        assert_eq!(
            p.evaluate(&anon, "s3:GetObject", &get("pub/x"), true),
            Verdict::Silent
        );
        assert_eq!(
            p.evaluate(&anon, "s3:GetObject", &get("priv/x"), false),
            Verdict::Silent
        );
        assert_eq!(
            p.evaluate(&anon, "s3:PutObject", &get("pub/x"), false),
            Verdict::Silent
        );
        assert_eq!(
            p.evaluate(&alice, "s3:PutObject", &get("any"), false),
            Verdict::Allow
        );
        assert_eq!(
            p.evaluate(&alice, "s3:ListBucket", "arn:aws:s3:::b", false),
            Verdict::Allow
        );
        assert_eq!(
            p.evaluate(&bob, "s3:DeleteObject", &get("keep/1"), false),
            Verdict::Deny
        );
        assert_eq!(
            p.evaluate(&bob, "s3:DeleteObject", &get("tmp/1"), false),
            Verdict::Allow
        );
        assert_eq!(
            p.evaluate(&eve, "s3:PutObject", &get("pub/x"), false),
            Verdict::Silent
        );
    }

    #[test]
    fn unsupported_or_foreign_policies_are_refused_with_the_reason() {
        let cases = [
            ("nope", "not JSON"),
            (r#"{"Statement":[]}"#, "at least one"),
            (
                r#"{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*","Condition":{}}]}"#,
                "Condition",
            ),
            (
                r#"{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::other/*"}]}"#,
                "not this bucket",
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
