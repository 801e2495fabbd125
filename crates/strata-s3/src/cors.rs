//! CORS, enforced as S3 does: a preflight `OPTIONS` is answered from the bucket's CORS
//! configuration (403 when no rule allows the origin, method and requested headers), and
//! a request carrying `Origin` gets the `Access-Control-*` headers of the first rule that
//! allows it. Preflights are not signed, so they are answered here, before `s3s`.

use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, StatusCode};
use s3s::dto::{CORSConfiguration, CORSRule};
use s3s::{Body, HttpResponse};

use crate::Gateway;
use crate::config::CORS_XATTR;
use crate::policy::wildcard_match;

/// The bucket a path-style request addresses.
fn bucket_of(path: &str) -> Option<&str> {
    let first = path.trim_start_matches('/').split('/').next()?;
    (!first.is_empty()).then_some(first)
}

/// The headers a preflight asks to send (lower case).
fn requested_headers(headers: &HeaderMap) -> Vec<String> {
    headers
        .get("access-control-request-headers")
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(',')
                .map(|h| h.trim().to_ascii_lowercase())
                .filter(|h| !h.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `rule` allows `origin` to send `method` with `headers`.
fn rule_allows(rule: &CORSRule, origin: &str, method: &str, headers: &[String]) -> bool {
    let origin_ok = rule
        .allowed_origins
        .iter()
        .any(|o| wildcard_match(o, origin));
    let method_ok = rule.allowed_methods.iter().any(|m| m == method);
    let allowed: Vec<String> = rule
        .allowed_headers
        .iter()
        .flatten()
        .map(|h| h.to_ascii_lowercase())
        .collect();
    let headers_ok = headers
        .iter()
        .all(|h| allowed.iter().any(|a| wildcard_match(a, h)));
    origin_ok && method_ok && headers_ok
}

fn set(map: &mut HeaderMap, name: &'static str, value: &str) {
    if let Ok(v) = HeaderValue::from_str(value) {
        map.insert(HeaderName::from_static(name), v);
    }
}

/// The `Access-Control-*` headers of `rule` answering `origin`.
fn add_headers(map: &mut HeaderMap, rule: &CORSRule, origin: &str, preflight: &[String]) {
    let any_origin = rule.allowed_origins.iter().any(|o| o == "*");
    set(
        map,
        "access-control-allow-origin",
        if any_origin { "*" } else { origin },
    );
    set(
        map,
        "access-control-allow-methods",
        &rule.allowed_methods.join(", "),
    );
    if !preflight.is_empty() {
        set(map, "access-control-allow-headers", &preflight.join(", "));
    }
    if let Some(expose) = rule.expose_headers.as_ref().filter(|e| !e.is_empty()) {
        set(map, "access-control-expose-headers", &expose.join(", "));
    }
    if let Some(age) = rule.max_age_seconds {
        set(map, "access-control-max-age", &age.to_string());
    }
    if !any_origin {
        set(map, "access-control-allow-credentials", "true");
    }
    set(
        map,
        "vary",
        "Origin, Access-Control-Request-Headers, Access-Control-Request-Method",
    );
}

impl Gateway {
    /// The first CORS rule of the bucket at `path` allowing the request, if any.
    async fn cors_rule(
        &self,
        path: &str,
        origin: &str,
        method: &str,
        headers: &[String],
    ) -> Option<CORSRule> {
        let bucket = match bucket_of(path) {
            Some(b) => b,
            None if !self.opts.multi_buckets => &self.opts.bucket,
            None => return None,
        };
        let dir = self.bucket_dir(bucket).await.ok()?;
        let config: CORSConfiguration = self.load_doc(dir, CORS_XATTR).await.ok()??;
        config
            .cors_rules
            .into_iter()
            .find(|r| rule_allows(r, origin, method, headers))
    }

    /// Answer a preflight `OPTIONS` request.
    pub(crate) async fn preflight(&self, path: &str, headers: &HeaderMap) -> HttpResponse {
        let origin = headers.get("origin").and_then(|v| v.to_str().ok());
        let method = headers
            .get("access-control-request-method")
            .and_then(|v| v.to_str().ok());
        let wanted = requested_headers(headers);
        let rule = match (origin, method) {
            (Some(o), Some(m)) => self.cors_rule(path, o, m, &wanted).await,
            _ => None,
        };
        let mut resp = HttpResponse::new(Body::empty());
        match (rule, origin) {
            (Some(rule), Some(origin)) => {
                add_headers(resp.headers_mut(), &rule, origin, &wanted);
            }
            _ => {
                *resp.status_mut() = StatusCode::FORBIDDEN;
                *resp.body_mut() = Body::from(
                    "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>AccessForbidden</Code><Message>CORSResponse: This CORS request is not allowed. This is usually because the evalution of Origin, request method / Access-Control-Request-Method or Access-Control-Request-Headers are not whitelisted by the resource's CORS spec.</Message></Error>".to_string(),
                );
            }
        }
        resp
    }

    /// Add the CORS headers an actual (not preflight) request with `Origin` earns.
    pub(crate) async fn add_cors(
        &self,
        path: &str,
        origin: &str,
        method: &Method,
        resp: &mut HttpResponse,
    ) {
        if let Some(rule) = self.cors_rule(path, origin, method.as_str(), &[]).await {
            add_headers(resp.headers_mut(), &rule, origin, &[]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(origins: &[&str], methods: &[&str], headers: &[&str]) -> CORSRule {
        CORSRule {
            allowed_headers: Some(headers.iter().map(|s| s.to_string()).collect()),
            allowed_methods: methods.iter().map(|s| s.to_string()).collect(),
            allowed_origins: origins.iter().map(|s| s.to_string()).collect(),
            expose_headers: Some(vec!["ETag".into()]),
            id: None,
            max_age_seconds: Some(600),
        }
    }

    #[test]
    fn rules_match_origin_method_and_every_requested_header() {
        let r = rule(
            &["https://*.example.com"],
            &["GET", "PUT"],
            &["x-amz-*", "content-type"],
        );
        let h = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(rule_allows(
            &r,
            "https://app.example.com",
            "PUT",
            &h(&["content-type", "x-amz-date"])
        ));
        assert!(!rule_allows(&r, "https://evil.com", "PUT", &[]));
        assert!(!rule_allows(&r, "https://app.example.com", "DELETE", &[]));
        assert!(!rule_allows(
            &r,
            "https://app.example.com",
            "GET",
            &h(&["authorization"])
        ));
        let mut map = HeaderMap::new();
        add_headers(
            &mut map,
            &r,
            "https://app.example.com",
            &h(&["content-type"]),
        );
        assert_eq!(
            map["access-control-allow-origin"],
            "https://app.example.com"
        );
        assert_eq!(map["access-control-allow-methods"], "GET, PUT");
        assert_eq!(map["access-control-expose-headers"], "ETag");
        assert_eq!(map["access-control-max-age"], "600");
        assert_eq!(bucket_of("/b/k/x"), Some("b"));
        assert_eq!(bucket_of("/"), None);
    }
}
