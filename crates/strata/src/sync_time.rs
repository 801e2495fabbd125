//! The times `--start-time` and `--end-time` take, as `juicefs sync` writes them:
//! `2006-01-02 15:04:05` in local time (a `T` for the space, a trailing `Z` or `±HH:MM`
//! offset and a date alone are taken too), read into Unix seconds.

use time::{Date, Month, PrimitiveDateTime, Time, UtcOffset};

/// Unix seconds of `text`.
pub fn parse_time(text: &str) -> Result<i64, String> {
    let bad = || format!("{text:?}: expected a time like \"2006-01-02 15:04:05\"");
    let text = text.trim();
    let (body, offset) = split_offset(text).ok_or_else(bad)?;
    let (date, clock) = match body.split_once([' ', 'T']) {
        Some((date, clock)) => (date, clock.trim()),
        None => (body, "00:00:00"),
    };
    let date: Vec<&str> = date.split('-').collect();
    let clock: Vec<&str> = clock.split(':').collect();
    let ([y, mo, d], [h, mi, s]) = (date.as_slice(), clock.as_slice()) else {
        return Err(bad());
    };
    let number = |part: &str| part.parse::<u8>().map_err(|_| bad());
    let year = y.parse::<i32>().map_err(|_| bad())?;
    let month = Month::try_from(number(mo)?).map_err(|_| bad())?;
    let date = Date::from_calendar_date(year, month, number(d)?).map_err(|_| bad())?;
    let clock = Time::from_hms(number(h)?, number(mi)?, number(s)?).map_err(|_| bad())?;
    let at = PrimitiveDateTime::new(date, clock);
    let offset = match offset {
        Some(offset) => offset,
        None => UtcOffset::local_offset_at(at.assume_utc()).map_err(|_| {
            format!(
                "{text:?}: the local time zone is unknown here; add an offset (\"Z\", \"+08:00\")"
            )
        })?,
    };
    Ok(at.assume_offset(offset).unix_timestamp())
}

/// The time without its offset, and the offset when one is written (`Z`, `+08:00`).
fn split_offset(text: &str) -> Option<(&str, Option<UtcOffset>)> {
    if let Some(body) = text.strip_suffix('Z') {
        return Some((body, Some(UtcOffset::UTC)));
    }
    let Some(at) = text
        .rfind(['+', '-'])
        .filter(|&i| text[i..].contains(':') && i > 10)
    else {
        return Some((text, None));
    };
    let sign: i8 = if text[at..].starts_with('-') { -1 } else { 1 };
    let (h, m) = text[at + 1..].split_once(':')?;
    let (h, m) = (h.parse::<i8>().ok()?, m.parse::<i8>().ok()?);
    let offset = UtcOffset::from_hms(sign * h, sign * m, 0).ok()?;
    Some((text[..at].trim_end(), Some(offset)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_as_juicefs_writes_them() {
        assert_eq!(parse_time("2006-01-02 15:04:05Z"), Ok(1_136_214_245));
        assert_eq!(parse_time("2006-01-02T15:04:05+01:00"), Ok(1_136_210_645));
        assert_eq!(parse_time("2006-01-02 15:04:05 -02:30"), Ok(1_136_223_245));
        assert_eq!(parse_time("2006-01-02Z"), Ok(1_136_160_000));
        for bad in [
            "",
            "2006-13-02 00:00:00Z",
            "yesterday",
            "2006-01-02 25:00:00Z",
            "1/2/2006",
        ] {
            let e = parse_time(bad).unwrap_err();
            assert!(e.contains("expected a time"), "{bad}: {e}");
        }
    }
}
