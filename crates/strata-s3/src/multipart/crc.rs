//! Joining CRCs without the data: the CRC of `A ‖ B` from CRC(A), CRC(B) and the length
//! of B, for the reflected CRCs S3 uses (CRC32, CRC32C, CRC64NVME; all start from and
//! end with all ones). This is what makes a multipart object's `FULL_OBJECT` checksum
//! from its parts' checksums.
//!
//! The arithmetic is over GF(2) polynomials modulo the CRC's polynomial, kept in the
//! reflected form (the top bit is x⁰): CRC(A ‖ B) = CRC(A)·x^(8·len B) + CRC(B).

/// A reflected CRC: its width in bits and its polynomial, reflected.
#[derive(Clone, Copy, Debug)]
pub struct Crc {
    width: u32,
    poly: u64,
}

/// CRC-32 (ISO-HDLC), S3's CRC32.
pub const CRC32: Crc = Crc {
    width: 32,
    poly: 0xEDB8_8320,
};
/// CRC-32C (Castagnoli), S3's CRC32C.
pub const CRC32C: Crc = Crc {
    width: 32,
    poly: 0x82F6_3B78,
};
/// CRC-64/NVME, S3's CRC64NVME.
pub const CRC64NVME: Crc = Crc {
    width: 64,
    poly: 0x9A6C_9329_AC4B_C9B5,
};

impl Crc {
    /// The polynomial x⁰ (one) in the reflected form.
    fn one(self) -> u64 {
        1 << (self.width - 1)
    }

    /// `a · b` modulo the polynomial.
    fn multiply(self, a: u64, mut b: u64) -> u64 {
        let mut product = 0;
        let mut bit = self.one();
        while bit != 0 {
            if a & bit != 0 {
                product ^= b;
            }
            // b · x: a shift toward the low bits, reduced when x^width falls out.
            b = if b & 1 != 0 {
                (b >> 1) ^ self.poly
            } else {
                b >> 1
            };
            bit >>= 1;
        }
        product
    }

    /// x^(8·bytes) modulo the polynomial, by squaring: x^(2^k) for each set bit of
    /// `8·bytes`.
    fn shift_of(self, bytes: u64) -> u64 {
        let mut result = self.one();
        // x^(2^3) = x^8, one byte.
        let mut power = self.one() >> 1; // x¹
        for _ in 0..3 {
            power = self.multiply(power, power);
        }
        let mut n = bytes;
        while n != 0 {
            if n & 1 != 0 {
                result = self.multiply(power, result);
            }
            power = self.multiply(power, power);
            n >>= 1;
        }
        result
    }

    /// The CRC of `A ‖ B` given CRC(A), CRC(B) and B's length in bytes.
    pub fn combine(self, crc_a: u64, crc_b: u64, len_b: u64) -> u64 {
        self.multiply(self.shift_of(len_b), crc_a) ^ crc_b
    }

    /// Bytes of a CRC value in S3's checksums (big-endian).
    pub fn byte_len(self) -> usize {
        if self.width == 32 { 4 } else { 8 }
    }

    /// The value of a CRC from its big-endian bytes, if they are as long as it is.
    pub fn value_of(self, bytes: &[u8]) -> Option<u64> {
        (bytes.len() == self.byte_len())
            .then(|| bytes.iter().fold(0u64, |v, b| (v << 8) | u64::from(*b)))
    }

    /// The big-endian bytes of a CRC value.
    pub fn bytes_of(self, value: u64) -> Vec<u8> {
        let all = value.to_be_bytes();
        all[all.len() - self.byte_len()..].to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use s3s::crypto::{Checksum as _, Crc32, Crc32c, Crc64Nvme};

    fn crc32(data: &[u8]) -> u64 {
        let mut h = Crc32::new();
        h.update(data);
        CRC32.value_of(h.finalize().as_ref()).unwrap()
    }

    fn crc32c(data: &[u8]) -> u64 {
        let mut h = Crc32c::new();
        h.update(data);
        CRC32C.value_of(h.finalize().as_ref()).unwrap()
    }

    fn crc64(data: &[u8]) -> u64 {
        let mut h = Crc64Nvme::new();
        h.update(data);
        CRC64NVME.value_of(h.finalize().as_ref()).unwrap()
    }

    #[test]
    fn known_values_hold() {
        // The check values of the catalogue of CRCs ("123456789").
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc64(b"123456789"), 0xAE8B_1486_0A79_9888);
        let joined = CRC32.combine(crc32(b"1234"), crc32(b"56789"), 5);
        assert_eq!(joined, 0xCBF4_3926);
        assert_eq!(CRC32.bytes_of(0xCBF4_3926), vec![0xCB, 0xF4, 0x39, 0x26]);
    }

    proptest! {
        #[test]
        fn combining_equals_the_crc_of_the_whole(
            a in proptest::collection::vec(any::<u8>(), 0..300),
            b in proptest::collection::vec(any::<u8>(), 0..300),
        ) {
            let whole: Vec<u8> = a.iter().chain(&b).copied().collect();
            let len = u64::try_from(b.len()).unwrap();
            prop_assert_eq!(CRC32.combine(crc32(&a), crc32(&b), len), crc32(&whole));
            prop_assert_eq!(CRC32C.combine(crc32c(&a), crc32c(&b), len), crc32c(&whole));
            prop_assert_eq!(CRC64NVME.combine(crc64(&a), crc64(&b), len), crc64(&whole));
        }
    }
}
