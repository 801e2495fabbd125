//! What AWS checks of a SigV2 request (`Authorization: AWS key:signature`) before its
//! signature, with AWS's codes: a header not of that form is 400 InvalidArgument; a
//! missing, empty, unreadable or pre-1970 `Date`/`x-amz-date` is 403 AccessDenied; one
//! more than 15 minutes from now is 403 RequestTimeTooSkewed. s3s checks only that some
//! date header is there (InvalidRequest otherwise) and never how old it is, so a SigV2
//! request could be replayed forever.

/// How far a request's date may be from the gateway's clock (AWS's limit).
const MAX_SKEW_SECS: i64 = 15 * 60;

/// An answer decided from the headers alone.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub status: hyper::StatusCode,
    pub code: &'static str,
    pub message: &'static str,
}

/// The refusal a SigV2 request earns before its signature is checked, given the time now
/// (seconds since the epoch); `None` for requests that are not SigV2 or pass.
pub(crate) fn refusal(headers: &hyper::HeaderMap, now_secs: i64) -> Option<Refusal> {
    let auth = headers.get(hyper::header::AUTHORIZATION)?.as_bytes();
    let rest = auth.strip_prefix(b"AWS ")?;
    let well_formed = match rest.iter().position(|b| *b == b':') {
        Some(at) => at > 0 && at + 1 < rest.len(),
        None => false,
    };
    if !well_formed {
        return Some(Refusal {
            status: hyper::StatusCode::BAD_REQUEST,
            code: "InvalidArgument",
            message: "AWS authorization header is invalid.  Expected AwsAccessKeyId:signature",
        });
    }
    let no_date = Refusal {
        status: hyper::StatusCode::FORBIDDEN,
        code: "AccessDenied",
        message: "AWS authentication requires a valid Date or x-amz-date header",
    };
    let date = headers
        .get("x-amz-date")
        .or_else(|| headers.get(hyper::header::DATE))
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty());
    let Some(secs) = date.and_then(seconds_of) else {
        return Some(no_date);
    };
    if secs < 0 {
        return Some(no_date);
    }
    if (secs - now_secs).abs() > MAX_SKEW_SECS {
        return Some(Refusal {
            status: hyper::StatusCode::FORBIDDEN,
            code: "RequestTimeTooSkewed",
            message: "The difference between the request time and the current time is too large.",
        });
    }
    None
}

/// Seconds since the epoch of a request date: an HTTP date (`Tue, 07 Jul 2026 21:53:04
/// GMT`; the weekday is not checked, as AWS does not) or an ISO 8601 basic `x-amz-date`
/// (`20260707T215304Z`).
fn seconds_of(text: &str) -> Option<i64> {
    http_date(text).or_else(|| iso_basic(text))
}

fn http_date(text: &str) -> Option<i64> {
    let (_, rest) = text.split_once(", ")?;
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    let [day, month, year, clock, "GMT"] = fields.as_slice() else {
        return None;
    };
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = MONTHS.iter().position(|m| m == month)?;
    let (hour, minute, second) = hms(clock)?;
    seconds_at(
        year.parse().ok()?,
        month,
        day.parse().ok()?,
        (hour, minute, second),
    )
}

/// `HH:MM:SS` as numbers.
fn hms(text: &str) -> Option<(u8, u8, u8)> {
    let parts: Vec<&str> = text.split(':').collect();
    let [h, m, s] = parts.as_slice() else {
        return None;
    };
    Some((h.parse().ok()?, m.parse().ok()?, s.parse().ok()?))
}

fn iso_basic(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    if b.len() != 16 || b[8] != b'T' || b[15] != b'Z' || !text.is_ascii() {
        return None;
    }
    let month: usize = text[4..6].parse().ok()?;
    let clock = format!("{}:{}:{}", &text[9..11], &text[11..13], &text[13..15]);
    seconds_at(
        text[0..4].parse().ok()?,
        month.checked_sub(1)?,
        text[6..8].parse().ok()?,
        hms(&clock)?,
    )
}

/// Seconds since the epoch of a UTC calendar time (`month0` counts from 0).
fn seconds_at(year: i32, month0: usize, day: u8, (h, m, s): (u8, u8, u8)) -> Option<i64> {
    let month = time::Month::try_from(u8::try_from(month0 + 1).ok()?).ok()?;
    let date = time::Date::from_calendar_date(year, month, day).ok()?;
    let clock = time::Time::from_hms(h, m, s).ok()?;
    Some(date.with_time(clock).assume_utc().unix_timestamp())
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_796_600_000; // 2026-12-06 23:33:20 UTC

    fn request(auth: &str, date: Option<&str>) -> hyper::HeaderMap {
        let mut h = hyper::HeaderMap::new();
        h.insert(hyper::header::AUTHORIZATION, auth.parse().unwrap());
        if let Some(d) = date {
            h.insert(hyper::header::DATE, d.parse().unwrap());
        }
        h
    }

    fn code(auth: &str, date: Option<&str>) -> Option<&'static str> {
        refusal(&request(auth, date), NOW).map(|r| r.code)
    }

    #[test]
    fn sigv2_headers_are_checked_as_aws_checks_them() {
        let good = "AWS key:c2lnbmF0dXJl";
        let today = "Sun, 06 Dec 2026 23:33:20 GMT";
        assert_eq!(seconds_of(today), Some(NOW));
        assert_eq!(code(good, Some(today)), None);
        assert_eq!(code("AWS HAHAHA", Some(today)), Some("InvalidArgument"));
        assert_eq!(code("AWS :sig", Some(today)), Some("InvalidArgument"));
        assert_eq!(code(good, None), Some("AccessDenied"));
        assert_eq!(code(good, Some("Bad Date")), Some("AccessDenied"));
        let before_epoch = "Tue, 07 Jul 1950 21:53:04 GMT";
        assert_eq!(code(good, Some(before_epoch)), Some("AccessDenied"));
        let old = "Wed, 07 Jul 2010 21:53:04 GMT";
        assert_eq!(code(good, Some(old)), Some("RequestTimeTooSkewed"));
        let far = "Tue, 07 Jul 9999 21:53:04 GMT";
        assert_eq!(code(good, Some(far)), Some("RequestTimeTooSkewed"));
        // x-amz-date wins over Date, in either form.
        let mut h = request(good, Some("Bad Date"));
        h.insert("x-amz-date", "20261206T233320Z".parse().unwrap());
        assert_eq!(refusal(&h, NOW), None);
        // Not SigV2: not this check's business.
        assert_eq!(code("AWS4-HMAC-SHA256 Credential=x", None), None);
    }
}
