//! What AWS checks of a presigned URL's `X-Amz-Expires` before its signature: a number,
//! not negative, at most a week. s3s would check the signature first and answer 403
//! SignatureDoesNotMatch for a URL whose expiry was edited; AWS answers 400
//! AuthorizationQueryParametersError with these messages, which SDKs and tests match.

/// Longest expiry of a SigV4 presigned URL, in seconds.
const MAX_EXPIRES: i64 = 604_800;

/// AWS's message for the `X-Amz-Expires` of a SigV4 presigned URL's `query`, if wrong.
pub(crate) fn expires_error(query: &str) -> Option<&'static str> {
    let mut sigv4 = false;
    let mut expires = None;
    for pair in query.split('&') {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        match name {
            "X-Amz-Algorithm" => sigv4 = value == "AWS4-HMAC-SHA256",
            "X-Amz-Expires" => expires = Some(value),
            _ => {}
        }
    }
    let value = expires.filter(|_| sigv4)?;
    match value.parse::<i64>() {
        Err(_) => Some("X-Amz-Expires should be a number"),
        Ok(n) if n < 0 => Some("X-Amz-Expires must be non-negative"),
        Ok(n) if n > MAX_EXPIRES => {
            Some("X-Amz-Expires must be less than a week (in seconds) that is; 604800")
        }
        Ok(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiries_are_checked_as_aws_checks_them() {
        let url = |e: &str| {
            format!("X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Expires={e}&X-Amz-Signature=s")
        };
        assert_eq!(expires_error(&url("3600")), None);
        assert_eq!(expires_error(&url("604800")), None);
        assert!(
            expires_error(&url("604801"))
                .unwrap()
                .contains("less than a week")
        );
        assert!(expires_error(&url("-1")).unwrap().contains("non-negative"));
        assert!(expires_error(&url("soon")).unwrap().contains("a number"));
        // Not a SigV4 presigned URL: not this check's business.
        assert_eq!(expires_error("X-Amz-Expires=soon"), None);
        assert_eq!(expires_error("versionId=1"), None);
    }
}
