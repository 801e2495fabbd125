//! Values with units, as `juicefs` flags take them: sizes (`100G`, `300M`, `4M`, `1.5T`,
//! `512K`; binary multiples, an optional `i`/`iB`/`B` after the letter) and durations
//! (`1.0s`, `500ms`, `60s`, `5m`, `1h`, `2d`). A plain number keeps the flag's own unit
//! (MiB for `--cache-size`, seconds for `--attr-cache`, ...), so existing command lines
//! mean what they meant before.

use std::time::Duration;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// Bytes in a size written with a unit, or `plain_unit` bytes per unit for a plain number.
pub fn parse_size(text: &str, plain_unit: u64) -> Result<u64, String> {
    let bad = || format!("{text:?}: expected a size such as 100G, 300M, 4M, 512K or a number");
    let (number, unit) = number_and_unit(text);
    let explicit_bytes = unit.ends_with(['B', 'b']);
    let unit = unit
        .trim()
        .trim_end_matches(['B', 'b'])
        .trim_end_matches('i')
        .to_ascii_uppercase();
    let multiple = match unit.as_str() {
        "" if explicit_bytes => 1,
        "" => plain_unit,
        "K" => KIB,
        "M" => MIB,
        "G" => GIB,
        "T" => GIB * KIB,
        "P" => GIB * MIB,
        _ => return Err(bad()),
    };
    scale(number, multiple).ok_or_else(bad)
}

/// The leading decimal number of `text` and what follows it.
fn number_and_unit(text: &str) -> (&str, &str) {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    t.split_at(split)
}

/// `number` (decimal, maybe with a fraction) times `multiple`, rounded down.
fn scale(number: &str, multiple: u64) -> Option<u64> {
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() {
        return None;
    }
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    let mut value = whole.checked_mul(multiple)?;
    if !fraction.is_empty() {
        let digits = u32::try_from(fraction.len()).ok().filter(|d| *d <= 18)?;
        let numerator: u64 = fraction.parse().ok()?;
        let part = u128::from(numerator) * u128::from(multiple) / 10u128.pow(digits);
        value = value.checked_add(u64::try_from(part).ok()?)?;
    }
    Some(value)
}

/// A duration written with a unit (`ms`, `s`, `m`, `h`, `d`), or seconds for a plain number.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = || format!("{text:?}: expected a duration such as 1.5s, 500ms, 5m, 1h or seconds");
    let (number, unit) = number_and_unit(text);
    let nanos_per_unit: u64 = match unit.trim() {
        "" | "s" => 1_000_000_000,
        "ms" => 1_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        "d" => 86_400_000_000_000,
        _ => return Err(bad()),
    };
    scale(number, nanos_per_unit)
        .map(Duration::from_nanos)
        .ok_or_else(bad)
}

/// clap value parsers: a size whose plain numbers are KiB, MiB or GiB; returns bytes.
pub fn kib(text: &str) -> Result<u64, String> {
    parse_size(text, KIB)
}

pub fn mib(text: &str) -> Result<u64, String> {
    parse_size(text, MIB)
}

pub fn gib(text: &str) -> Result<u64, String> {
    parse_size(text, GIB)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_juicefs_units_and_plain_numbers_keep_theirs() {
        assert_eq!(mib("100G").unwrap(), 100 << 30);
        assert_eq!(mib("300M").unwrap(), 300 << 20);
        assert_eq!(mib("300").unwrap(), 300 << 20, "plain number: MiB");
        assert_eq!(kib("4M").unwrap(), 4 << 20);
        assert_eq!(kib("4096").unwrap(), 4 << 20, "plain number: KiB");
        assert_eq!(gib("1.5T").unwrap(), 1536 << 30);
        assert_eq!(gib("10").unwrap(), 10 << 30);
        assert_eq!(mib("512KiB").unwrap(), 512 << 10);
        assert_eq!(mib("2GB").unwrap(), 2 << 30);
        assert_eq!(mib("0.5G").unwrap(), 512 << 20);
        assert_eq!(mib("4096B").unwrap(), 4096, "explicit bytes");
        assert_eq!(mib("0").unwrap(), 0);
        for bad in ["", "G", "12X", "1..2M", "-1M", "99999999999999999999P"] {
            assert!(mib(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn durations_take_units_and_plain_numbers_are_seconds() {
        assert_eq!(parse_duration("1.0s").unwrap(), Duration::from_secs(1));
        assert_eq!(parse_duration("60s").unwrap(), Duration::from_secs(60));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert_eq!(parse_duration("2d").unwrap(), Duration::from_secs(172_800));
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        for bad in ["", "s", "1x", "1 fortnight", "-1s"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} accepted");
        }
    }
}
