//! Exact decimal numbers for DECIMAL columns, and MySQL's binary DECIMAL
//! format in which rows and keys store them.
//!
//! A DECIMAL holds up to 65 digits, more than any machine integer, and must
//! never pass through a float. [`Decimal`] keeps the digits in base-10⁹
//! limbs aligned at the decimal point (integer limbs, then fraction limbs),
//! so that equal numbers are equal structs whatever their written scale
//! (`1.50 == 1.5`) and comparison is a lexicographic walk over the limbs.
//!
//! Stored, a DECIMAL(p,s) uses MySQL's binary format (`decimal2bin`), fixed
//! size for its (p,s) and memcomparable:
//! - the `p-s` integer digits and the `s` fraction digits are each cut into
//!   groups of 9 digits, counted outwards from the point; a full group takes
//!   4 bytes, a partial group of `n` digits `[0,1,1,2,2,3,3,4,4,4][n]` bytes;
//! - groups are written big-endian: the partial integer group first, then the
//!   full integer groups, the full fraction groups, the partial fraction group
//!   (whose value is its digits read as an integer: `.12` in a 2-digit group
//!   is 12);
//! - a negative number has every byte inverted; then the top bit of the first
//!   byte is flipped (set for zero and positive numbers).
//!
//! No group value reaches its byte width's top bit, so the flipped bit is the
//! sign and byte order is numeric order. Zero is always positive.

use std::cmp::Ordering;
use std::fmt;

use super::types::{
    decimal_bytes, decimal_partial_group_bytes, DECIMAL_GROUP_DIGITS, DECIMAL_PRECISION_MAX,
    DECIMAL_SCALE_MAX,
};

/// Integer limbs: 8 × 9 = 72 digits, enough for 65.
const INT_LIMBS: usize = 8;
/// Fraction limbs: 4 × 9 = 36 digits, enough for 30.
const FRAC_LIMBS: usize = 4;
/// Each limb holds nine decimal digits.
const LIMB_BASE: u32 = 1_000_000_000;
const _: () = assert!(INT_LIMBS * DECIMAL_GROUP_DIGITS >= DECIMAL_PRECISION_MAX as usize);
const _: () = assert!(FRAC_LIMBS * DECIMAL_GROUP_DIGITS >= DECIMAL_SCALE_MAX as usize);

/// Powers of ten up to one limb.
const POW10: [u32; 10] = [
    1,
    10,
    100,
    1_000,
    10_000,
    100_000,
    1_000_000,
    10_000_000,
    100_000_000,
    1_000_000_000,
];

/// An exact decimal number of up to [`DECIMAL_PRECISION_MAX`] integer digits
/// and [`DECIMAL_SCALE_MAX`] fraction digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Decimal {
    /// Never set for zero, so that `-0` and `0` are one value.
    negative: bool,
    /// Integer digits, nine per limb, most significant limb first; the last
    /// limb holds the units.
    int: [u32; INT_LIMBS],
    /// Fraction digits, nine per limb, the first limb right after the point.
    frac: [u32; FRAC_LIMBS],
}

/// Why a string is not a decimal number.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecimalParseError {
    #[error("`{text}` is not a decimal number (digits, an optional sign and point)")]
    Syntax { text: String },
    #[error("`{text}` has {digits} integer digits, at most {DECIMAL_PRECISION_MAX}")]
    TooManyIntegerDigits { text: String, digits: usize },
    #[error("`{text}` has {digits} fraction digits, at most {DECIMAL_SCALE_MAX}")]
    TooManyFractionDigits { text: String, digits: usize },
}

impl Decimal {
    pub const ZERO: Decimal = Decimal {
        negative: false,
        int: [0; INT_LIMBS],
        frac: [0; FRAC_LIMBS],
    };

    /// Parses `[+-]digits[.digits]` (either side of the point may be empty,
    /// not both). Leading integer zeros and trailing fraction zeros do not
    /// count against the limits.
    pub fn parse(text: &str) -> Result<Decimal, DecimalParseError> {
        let syntax = || DecimalParseError::Syntax {
            text: text.to_string(),
        };
        let (negative, unsigned) = match text.as_bytes().first() {
            Some(b'-') => (true, &text[1..]),
            Some(b'+') => (false, &text[1..]),
            _ => (false, text),
        };
        let (int_text, frac_text) = match unsigned.split_once('.') {
            Some((i, f)) => (i, f),
            None => (unsigned, ""),
        };
        let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if int_text.len() + frac_text.len() == 0 || !all_digits(int_text) || !all_digits(frac_text)
        {
            return Err(syntax());
        }
        let int_text = int_text.trim_start_matches('0');
        let frac_text = frac_text.trim_end_matches('0');
        if int_text.len() > usize::from(DECIMAL_PRECISION_MAX) {
            return Err(DecimalParseError::TooManyIntegerDigits {
                text: text.to_string(),
                digits: int_text.len(),
            });
        }
        if frac_text.len() > usize::from(DECIMAL_SCALE_MAX) {
            return Err(DecimalParseError::TooManyFractionDigits {
                text: text.to_string(),
                digits: frac_text.len(),
            });
        }
        let mut value = Decimal::ZERO;
        // Integer limbs fill from the units outwards.
        let int_bytes = int_text.as_bytes();
        for (k, chunk) in int_bytes.rchunks(DECIMAL_GROUP_DIGITS).enumerate() {
            value.int[INT_LIMBS - 1 - k] = digits_value(chunk);
        }
        // Fraction limbs fill from the point outwards; a short last chunk
        // stands for its digits followed by zeros.
        for (k, chunk) in frac_text
            .as_bytes()
            .chunks(DECIMAL_GROUP_DIGITS)
            .enumerate()
        {
            value.frac[k] = digits_value(chunk) * POW10[DECIMAL_GROUP_DIGITS - chunk.len()];
        }
        value.negative = negative && !value.is_zero();
        Ok(value)
    }

    /// `mantissa / 10^scale`, for a scale up to [`DECIMAL_SCALE_MAX`].
    pub fn from_scaled(mantissa: i128, scale: u8) -> Option<Decimal> {
        if scale > DECIMAL_SCALE_MAX {
            return None;
        }
        let magnitude = mantissa.unsigned_abs();
        let divisor = 10u128.pow(u32::from(scale));
        let mut int_part = magnitude / divisor;
        // The fraction, widened to all fraction limbs' digits:
        // below 10^scale × 10^(36-scale) = 10^36 < 2^128.
        let frac_digits_total = (FRAC_LIMBS * DECIMAL_GROUP_DIGITS) as u32;
        let mut frac_part =
            (magnitude % divisor) * 10u128.pow(frac_digits_total - u32::from(scale));
        let mut value = Decimal::ZERO;
        for limb in value.int.iter_mut().rev() {
            *limb = (int_part % u128::from(LIMB_BASE)) as u32;
            int_part /= u128::from(LIMB_BASE);
        }
        assert_eq!(int_part, 0, "an i128 has at most 39 digits");
        for limb in value.frac.iter_mut().rev() {
            *limb = (frac_part % u128::from(LIMB_BASE)) as u32;
            frac_part /= u128::from(LIMB_BASE);
        }
        value.negative = mantissa < 0;
        Some(value)
    }

    /// `mantissa` with `self = mantissa / 10^scale`, when that is exact (no
    /// digit past `scale`) and fits an i128 (38 digits): the inverse of
    /// [`Decimal::from_scaled`], without the text a caller would otherwise
    /// go through (a DECIMAL(10,2) column's values in the SQL node).
    pub fn to_scaled(&self, scale: u8) -> Option<i128> {
        if scale > DECIMAL_SCALE_MAX {
            return None;
        }
        // The limbs holding the scale's fraction digits; the others, and
        // the last one's digits past the scale, must be zero. Word
        // arithmetic only: a DECIMAL(10,2) value is one limb each side.
        let group = DECIMAL_GROUP_DIGITS as u32;
        let needed = u32::from(scale).div_ceil(group) as usize;
        if self.frac[needed..].iter().any(|&l| l != 0) {
            return None;
        }
        let mut magnitude: u128 = 0;
        for &limb in self.int.iter().skip_while(|&&l| l == 0) {
            magnitude = magnitude
                .checked_mul(u128::from(LIMB_BASE))?
                .checked_add(u128::from(limb))?;
        }
        for (at, &limb) in self.frac[..needed].iter().enumerate() {
            let digits = (u32::from(scale) - at as u32 * group).min(group);
            let cut = 10u32.pow(group - digits);
            if limb % cut != 0 {
                return None;
            }
            magnitude = magnitude
                .checked_mul(10u128.pow(digits))?
                .checked_add(u128::from(limb / cut))?;
        }
        let magnitude = i128::try_from(magnitude).ok()?;
        Some(if self.negative { -magnitude } else { magnitude })
    }

    /// An integer as a decimal.
    pub fn from_i64(value: i64) -> Decimal {
        Decimal::from_scaled(i128::from(value), 0).expect("scale 0 is in range")
    }

    pub fn is_zero(&self) -> bool {
        self.int.iter().chain(self.frac.iter()).all(|&l| l == 0)
    }

    pub fn is_negative(&self) -> bool {
        self.negative
    }

    /// Number of integer digits, leading zeros not counted (0 for |x| < 1).
    pub fn int_digits(&self) -> usize {
        match self.int.iter().position(|&l| l != 0) {
            None => 0,
            Some(first) => {
                (INT_LIMBS - 1 - first) * DECIMAL_GROUP_DIGITS + digit_count(self.int[first])
            }
        }
    }

    /// Number of fraction digits, trailing zeros not counted.
    pub fn frac_digits(&self) -> usize {
        match self.frac.iter().rposition(|&l| l != 0) {
            None => 0,
            Some(last) => {
                let limb = self.frac[last];
                let trailing_zeros = (0..DECIMAL_GROUP_DIGITS)
                    .take_while(|&k| limb.is_multiple_of(POW10[k + 1]))
                    .count();
                last * DECIMAL_GROUP_DIGITS + DECIMAL_GROUP_DIGITS - trailing_zeros
            }
        }
    }

    /// Whether the number fits DECIMAL(precision, scale) without rounding.
    pub fn fits(&self, precision: u8, scale: u8) -> bool {
        debug_assert!(scale <= precision);
        self.int_digits() <= usize::from(precision - scale)
            && self.frac_digits() <= usize::from(scale)
    }

    /// Writes the number in MySQL's binary DECIMAL(precision, scale) format
    /// (see the module doc). The number must fit.
    pub(crate) fn write_binary(&self, precision: u8, scale: u8, out: &mut [u8]) {
        debug_assert!(self.fits(precision, scale));
        assert_eq!(out.len(), decimal_bytes(precision, scale));
        let layout = GroupLayout::new(precision, scale);
        let mask = if self.negative { u32::MAX } else { 0 };
        let mut at = 0;
        let mut put = |value: u32, bytes: usize| {
            let be = (value ^ mask).to_be_bytes();
            out[at..at + bytes].copy_from_slice(&be[4 - bytes..]);
            at += bytes;
        };
        if layout.int_partial_digits > 0 {
            put(
                self.int[INT_LIMBS - 1 - layout.int_groups],
                decimal_partial_group_bytes(layout.int_partial_digits),
            );
        }
        for limb in &self.int[INT_LIMBS - layout.int_groups..] {
            put(*limb, 4);
        }
        for limb in &self.frac[..layout.frac_groups] {
            put(*limb, 4);
        }
        if layout.frac_partial_digits > 0 {
            let limb = self.frac[layout.frac_groups];
            put(
                limb / POW10[DECIMAL_GROUP_DIGITS - layout.frac_partial_digits],
                decimal_partial_group_bytes(layout.frac_partial_digits),
            );
        }
        debug_assert_eq!(at, out.len());
        out[0] ^= 0x80;
    }

    /// Reads MySQL's binary DECIMAL(precision, scale); `None` when the bytes
    /// are not one (wrong length, a group out of its digits' range, or a
    /// negative zero, which [`Decimal::write_binary`] never writes).
    pub(crate) fn read_binary(precision: u8, scale: u8, bytes: &[u8]) -> Option<Decimal> {
        if bytes.len() != decimal_bytes(precision, scale) || bytes.is_empty() {
            return None;
        }
        let layout = GroupLayout::new(precision, scale);
        let negative = bytes[0] & 0x80 == 0;
        let mask: u8 = if negative { 0xFF } else { 0 };
        let mut at = 0;
        let mut take = |n: usize, digits: usize| -> Option<u32> {
            let mut value = 0u32;
            for k in 0..n {
                let flip = if at + k == 0 { 0x80 } else { 0 };
                value = (value << 8) | u32::from(bytes[at + k] ^ mask ^ flip);
            }
            at += n;
            (value < POW10[digits]).then_some(value)
        };
        let mut value = Decimal::ZERO;
        if layout.int_partial_digits > 0 {
            let digits = layout.int_partial_digits;
            value.int[INT_LIMBS - 1 - layout.int_groups] =
                take(decimal_partial_group_bytes(digits), digits)?;
        }
        for k in INT_LIMBS - layout.int_groups..INT_LIMBS {
            value.int[k] = take(4, DECIMAL_GROUP_DIGITS)?;
        }
        for k in 0..layout.frac_groups {
            value.frac[k] = take(4, DECIMAL_GROUP_DIGITS)?;
        }
        if layout.frac_partial_digits > 0 {
            let digits = layout.frac_partial_digits;
            let group = take(decimal_partial_group_bytes(digits), digits)?;
            value.frac[layout.frac_groups] = group * POW10[DECIMAL_GROUP_DIGITS - digits];
        }
        if negative && value.is_zero() {
            return None;
        }
        value.negative = negative;
        Some(value)
    }

    fn magnitude_cmp(&self, other: &Decimal) -> Ordering {
        self.int
            .cmp(&other.int)
            .then_with(|| self.frac.cmp(&other.frac))
    }
}

/// How MySQL's binary DECIMAL(p,s) cuts its digits into groups.
struct GroupLayout {
    int_groups: usize,
    int_partial_digits: usize,
    frac_groups: usize,
    frac_partial_digits: usize,
}

impl GroupLayout {
    fn new(precision: u8, scale: u8) -> GroupLayout {
        let int_digits = usize::from(precision - scale);
        let frac_digits = usize::from(scale);
        GroupLayout {
            int_groups: int_digits / DECIMAL_GROUP_DIGITS,
            int_partial_digits: int_digits % DECIMAL_GROUP_DIGITS,
            frac_groups: frac_digits / DECIMAL_GROUP_DIGITS,
            frac_partial_digits: frac_digits % DECIMAL_GROUP_DIGITS,
        }
    }
}

/// The value of up to nine ASCII digits.
fn digits_value(digits: &[u8]) -> u32 {
    debug_assert!(digits.len() <= DECIMAL_GROUP_DIGITS);
    digits
        .iter()
        .fold(0u32, |acc, &d| acc * 10 + u32::from(d - b'0'))
}

/// Number of digits of a limb (at least 1).
fn digit_count(limb: u32) -> usize {
    (1..=DECIMAL_GROUP_DIGITS)
        .find(|&n| limb < POW10[n])
        .unwrap_or(DECIMAL_GROUP_DIGITS)
}

impl Ord for Decimal {
    fn cmp(&self, other: &Decimal) -> Ordering {
        match (self.negative, other.negative) {
            (false, true) => Ordering::Greater,
            (true, false) => Ordering::Less,
            (false, false) => self.magnitude_cmp(other),
            (true, true) => other.magnitude_cmp(self),
        }
    }
}

impl PartialOrd for Decimal {
    fn partial_cmp(&self, other: &Decimal) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Decimal {
    /// The shortest exact spelling: no leading integer zeros beyond one, no
    /// trailing fraction zeros.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.negative {
            f.write_str("-")?;
        }
        match self.int.iter().position(|&l| l != 0) {
            None => f.write_str("0")?,
            Some(first) => {
                write!(f, "{}", self.int[first])?;
                for limb in &self.int[first + 1..] {
                    write!(f, "{limb:09}")?;
                }
            }
        }
        let frac_digits = self.frac_digits();
        if frac_digits > 0 {
            f.write_str(".")?;
            let mut left = frac_digits;
            for limb in &self.frac {
                if left == 0 {
                    break;
                }
                let shown = left.min(DECIMAL_GROUP_DIGITS);
                let digits = limb / POW10[DECIMAL_GROUP_DIGITS - shown];
                write!(f, "{digits:0width$}", width = shown)?;
                left -= shown;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for Decimal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Decimal({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(text: &str) -> Decimal {
        Decimal::parse(text).unwrap()
    }

    #[test]
    fn parse_and_display() {
        for (text, shown) in [
            ("0", "0"),
            ("-0", "0"),
            ("-0.000", "0"),
            ("007.50", "7.5"),
            (".5", "0.5"),
            ("5.", "5"),
            (
                "+12345678901234567890.123456789012",
                "12345678901234567890.123456789012",
            ),
            ("-1000000000", "-1000000000"),
            ("0.000000001", "0.000000001"),
            ("0.0000000001", "0.0000000001"),
        ] {
            assert_eq!(d(text).to_string(), shown, "{text}");
        }
        let max = format!("{}.{}", "9".repeat(35), "9".repeat(30));
        assert_eq!(d(&max).to_string(), max);
        assert_eq!(d(&max).int_digits(), 35);
        assert_eq!(d(&max).frac_digits(), 30);
        for bad in ["", "-", ".", "1e5", "1.2.3", "--1", " 1", "0x10"] {
            assert!(
                matches!(Decimal::parse(bad), Err(DecimalParseError::Syntax { .. })),
                "{bad:?}"
            );
        }
        assert!(matches!(
            Decimal::parse(&"1".repeat(66)),
            Err(DecimalParseError::TooManyIntegerDigits { digits: 66, .. })
        ));
        assert!(matches!(
            Decimal::parse(&format!("0.{}", "1".repeat(31))),
            Err(DecimalParseError::TooManyFractionDigits { digits: 31, .. })
        ));
    }

    #[test]
    fn from_scaled_equals_parse() {
        assert_eq!(Decimal::from_scaled(-12345, 2).unwrap(), d("-123.45"));
        assert_eq!(Decimal::from_scaled(150, 2).unwrap(), d("1.5"));
        assert_eq!(Decimal::from_scaled(0, 30).unwrap(), Decimal::ZERO);
        assert_eq!(
            Decimal::from_scaled(i128::MIN, 30).unwrap().to_string(),
            "-170141183.460469231731687303715884105728"
        );
        assert_eq!(Decimal::from_scaled(1, 31), None);
    }

    #[test]
    fn to_scaled_inverts_from_scaled() {
        assert_eq!(d("-123.45").to_scaled(2), Some(-12345));
        assert_eq!(d("1.5").to_scaled(2), Some(150));
        assert_eq!(d("7").to_scaled(0), Some(7));
        assert_eq!(d("-1.0000000001").to_scaled(10), Some(-10_000_000_001));
        assert_eq!(d("1.00000000010").to_scaled(12), Some(1_000_000_000_100));
        assert_eq!(d("0").to_scaled(30), Some(0));
        assert_eq!(
            d("123456789012.000000001").to_scaled(9),
            Some(123_456_789_012_000_000_001)
        );
        // A digit past the scale, or past an i128's.
        assert_eq!(d("1.25").to_scaled(1), None);
        assert_eq!(
            d("99999999999999999999999999999999999999999").to_scaled(0),
            None
        );
        assert_eq!(d("1").to_scaled(31), None);
        for (m, scale) in [
            (i128::MAX, 30),
            (i128::MIN + 1, 0),
            (-5, 30),
            (10i128.pow(38) - 1, 4),
        ] {
            let x = Decimal::from_scaled(m, scale).unwrap();
            assert_eq!(x.to_scaled(scale), Some(m), "{x}");
        }
    }

    #[test]
    fn order_is_numeric() {
        let sorted = [
            "-100", "-99.99", "-1", "-0.5", "0", "0.000001", "0.5", "1", "1.01", "100",
        ];
        for pair in sorted.windows(2) {
            assert!(d(pair[0]) < d(pair[1]), "{} < {}", pair[0], pair[1]);
        }
        assert_eq!(d("1.50"), d("1.5"));
    }

    #[test]
    fn binary_matches_mysql_example() {
        // MySQL's strings/decimal.cc: 1234567890.1234 as DECIMAL(14,4) is
        // 81 0D FB 38 D2 04 D2 and its negative is 7E F2 04 C7 2D FB 2D.
        let mut out = [0u8; 7];
        d("1234567890.1234").write_binary(14, 4, &mut out);
        assert_eq!(out, [0x81, 0x0D, 0xFB, 0x38, 0xD2, 0x04, 0xD2]);
        d("-1234567890.1234").write_binary(14, 4, &mut out);
        assert_eq!(out, [0x7E, 0xF2, 0x04, 0xC7, 0x2D, 0xFB, 0x2D]);
        assert_eq!(
            Decimal::read_binary(14, 4, &out),
            Some(d("-1234567890.1234"))
        );
    }

    #[test]
    fn binary_round_trip_and_order() {
        let values = [
            "-99999.99999",
            "-1",
            "-0.00001",
            "0",
            "0.00001",
            "3.14159",
            "99999.99999",
        ];
        let mut previous: Option<[u8; 8]> = None;
        for text in values {
            let mut out = [0u8; 8];
            assert_eq!(decimal_bytes(10, 5), 6);
            d(text).write_binary(10, 5, &mut out[..6]);
            assert_eq!(Decimal::read_binary(10, 5, &out[..6]), Some(d(text)));
            if let Some(p) = previous {
                assert!(p < out, "{text}");
            }
            previous = Some(out);
        }
        // A negative zero and an out-of-range group are refused.
        let mut out = [0u8; 6];
        d("0").write_binary(10, 5, &mut out);
        let negative_zero: Vec<u8> = out.iter().map(|b| !b).collect();
        assert_eq!(Decimal::read_binary(10, 5, &negative_zero), None);
        assert_eq!(Decimal::read_binary(10, 5, &[0xFF; 6]), None);
        assert_eq!(Decimal::read_binary(10, 5, &[0x80; 5]), None);
    }
}
