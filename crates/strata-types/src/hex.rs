//! Lower-case hexadecimal, the one spelling every crate uses for bytes in text (wrapped
//! keys, dump records, change notices, ETags, names derived from nonces).

const DIGITS: &[u8; 16] = b"0123456789abcdef";

/// `bytes` as lower-case hex, two digits a byte.
pub fn encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    out
}

/// The bytes `text` spells (either case); `None` for an odd length or a non-hex digit.
pub fn decode(text: &str) -> Option<Vec<u8>> {
    let digits = text.as_bytes();
    if !digits.len().is_multiple_of(2) {
        return None;
    }
    let value = |d: u8| {
        char::from(d)
            .to_digit(16)
            .and_then(|v| u8::try_from(v).ok())
    };
    digits
        .chunks(2)
        .map(|pair| Some(value(pair[0])? << 4 | value(pair[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_what_is_not_hex() {
        let bytes = [0u8, 1, 0x7f, 0xab, 0xff];
        assert_eq!(encode(&bytes), "00017fabff");
        assert_eq!(decode("00017fabff").as_deref(), Some(&bytes[..]));
        assert_eq!(decode("00017FABFF").as_deref(), Some(&bytes[..]));
        assert_eq!(decode(""), Some(Vec::new()));
        for bad in ["abc", "zz", "0g", "+1"] {
            assert_eq!(decode(bad), None, "{bad}");
        }
    }
}
