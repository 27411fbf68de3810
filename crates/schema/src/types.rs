//! Column types, collations and column definitions: the vocabulary every
//! other part of the schema (rows, keys, tables) is written in.
//!
//! A column type fixes three things at once: which values a column accepts
//! ([`super::value`]), how many bytes it takes in a row ([`super::row`]) and
//! how it orders in a key ([`super::key`]). The limits of each type's
//! parameters are the named constants below, MySQL's where MySQL has one.

use std::cmp::Ordering;
use std::fmt;

use super::value::{Value, ValueRef};

/// Longest CHAR, in characters (MySQL's limit).
pub const CHAR_CHARS_MAX: u16 = 255;
/// Longest VARCHAR, in characters: MySQL's 65,535-byte column limit over
/// four bytes per utf8mb4 character. The row limit
/// ([`super::table::ROW_BYTES_MAX`]) cuts in well before this.
pub const VARCHAR_CHARS_MAX: u16 = 16_383;
/// Longest BINARY, in bytes (MySQL's limit).
pub const BINARY_BYTES_MAX: u16 = 255;
/// Longest VARBINARY, in bytes (MySQL's limit); again the row limit cuts in
/// first.
pub const VARBINARY_BYTES_MAX: u16 = u16::MAX;
/// Most digits of a DECIMAL (MySQL's limit).
pub const DECIMAL_PRECISION_MAX: u8 = 65;
/// Most digits after the point of a DECIMAL (MySQL's limit).
pub const DECIMAL_SCALE_MAX: u8 = 30;
/// Most fractional-second digits of DATETIME and TIMESTAMP (microseconds).
pub const FSP_MAX: u8 = 6;
/// Widest BIT column, in bits.
pub const BIT_BITS_MAX: u8 = 64;
/// Most bytes one utf8mb4 character takes.
pub const UTF8MB4_CHAR_BYTES_MAX: usize = 4;
/// Bytes of a BLOB/TEXT value kept in the row itself (NDB's inline head);
/// the rest lives in the column's hidden parts table.
pub const BLOB_INLINE_BYTES: usize = 256;
/// Bytes of the total-length field in front of a blob's inline bytes.
pub const BLOB_LENGTH_BYTES: usize = 8;
/// Bytes of a blob kept in one row of the hidden parts table. NDB uses
/// 2,000 (BLOB), 4,000 (TEXT) and 13,948 (MEDIUMBLOB and up); 8,000 keeps
/// four parts in a 32 KiB page, halves the per-part overhead (a key and a
/// row header per part) against NDB's 4,000, and leaves room in the
/// 30,000-byte row for the longest primary key.
pub const BLOB_PART_BYTES: usize = 8_000;
/// Longest value a TIMESTAMP holds, in seconds since 1970-01-01 UTC:
/// MySQL's 2038-01-19 03:14:07 limit (a signed 32-bit count).
pub const TIMESTAMP_SECONDS_MAX: i64 = i32::MAX as i64;
/// Largest year of a DATE or DATETIME.
pub const YEAR_MAX: u16 = 9_999;

/// How a character column compares: MySQL's and MariaDB's rules for the
/// two collations. Both are utf8mb4 and both are PAD SPACE: trailing
/// spaces do not count, so `'a'` and `'a  '` are equal and `'a'` sorts after
/// `'a\t'` (the shorter string compares as if padded with spaces).
///
/// A string compares as the sequence of its characters' weights
/// ([`Collation::weight`]): under `Utf8mb4Bin` a character weighs its code
/// point; under `Utf8mb4GeneralCi` it weighs its uppercase base letter
/// (`'a'` and `'á'` weigh `'A'`, so `'a' < 'B' < 'z' < '[' < '_'`; `'ß'`
/// weighs `'S'`), and every character outside the BMP weighs U+FFFD
/// (MariaDB's table, see `general_ci.rs`). The order is fixed forever: it
/// is the order of ordered indexes and the equality of hashed keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Collation {
    /// Compare by code point (and so by UTF-8 bytes), trailing spaces ignored.
    Utf8mb4Bin,
    /// Compare by MySQL's general_ci weights (uppercase, accents dropped),
    /// trailing spaces ignored.
    Utf8mb4GeneralCi,
}

impl Collation {
    /// MySQL's name of the collation.
    pub fn name(self) -> &'static str {
        match self {
            Collation::Utf8mb4Bin => "utf8mb4_bin",
            Collation::Utf8mb4GeneralCi => "utf8mb4_general_ci",
        }
    }

    /// Compares two strings under this collation (PAD SPACE). This is the
    /// order that [`super::key::KeyEncoder`] turns into byte order.
    pub fn compare(self, a: &str, b: &str) -> Ordering {
        if let Some(order) = self.ascii_order(a.as_bytes(), b.as_bytes()) {
            return order;
        }
        let a = a.trim_end_matches(' ');
        let b = b.trim_end_matches(' ');
        compare_padded(self.weights(a), self.weights(b))
    }

    /// The weight of one character: what it compares as. Under
    /// `Utf8mb4Bin` the character itself; under `Utf8mb4GeneralCi` its
    /// MySQL weight, a character of the BMP. A weight weighs itself, and
    /// only a space weighs a space.
    #[inline]
    pub fn weight(self, c: char) -> char {
        match self {
            Collation::Utf8mb4Bin => c,
            Collation::Utf8mb4GeneralCi => super::general_ci::weight(c),
        }
    }

    /// The weights of `s`'s characters, one per character: two strings
    /// compare as these sequences do (after trailing spaces, PAD SPACE),
    /// and a LIKE pattern matches character by character on them.
    pub fn weights(self, s: &str) -> impl Iterator<Item = char> + '_ {
        s.chars().map(move |c| self.weight(c))
    }

    /// A canonical form of `s`: its weights without trailing spaces.
    /// Strings equal under the collation have the same one (what hash
    /// tables of values, GROUP BY and DISTINCT use).
    pub fn sort_key(self, s: &str) -> String {
        self.weights(s.trim_end_matches(' ')).collect()
    }

    /// [`Collation::sort_key`] of bytes that are (almost always) UTF-8,
    /// appended to `out`: the same bytes, without an allocation and, for
    /// ASCII text (an ASCII character's weight is itself or its
    /// uppercase), without decoding; other bytes as their lossy decoding.
    pub fn sort_key_into(self, s: &[u8], out: &mut Vec<u8>) {
        let end = s.iter().rposition(|&c| c != b' ').map_or(0, |p| p + 1);
        let s = &s[..end];
        if is_ascii(s) {
            // Copied, then folded in place eight bytes at a time (a push
            // per byte cost 7 instructions a byte, 4 % of the SQL node's
            // work under sysbench's DISTINCT c).
            let start = out.len();
            out.extend_from_slice(s);
            if self == Collation::Utf8mb4GeneralCi {
                uppercase_ascii(&mut out[start..]);
            }
            return;
        }
        let text = String::from_utf8_lossy(s);
        let mut buf = [0u8; 4];
        for w in self.weights(&text) {
            out.extend_from_slice(w.encode_utf8(&mut buf).as_bytes());
        }
    }

    /// [`Collation::compare`] of bytes that are (almost always) UTF-8;
    /// bytes that are not compare as their lossy decoding.
    pub fn compare_bytes(self, a: &[u8], b: &[u8]) -> Ordering {
        if let Some(order) = self.ascii_order(a, b) {
            return order;
        }
        match (std::str::from_utf8(a), std::str::from_utf8(b)) {
            (Ok(a), Ok(b)) => self.compare(a, b),
            _ => self.compare(&String::from_utf8_lossy(a), &String::from_utf8_lossy(b)),
        }
    }

    /// The order of `a` and `b` when it is decided by ASCII bytes alone
    /// (the common case, and usually within a few bytes: nothing is
    /// decoded or validated past the first difference); None once a
    /// non-ASCII byte is reached first. An ASCII character's general_ci
    /// weight is its ASCII uppercase, and comparing the bytes left against
    /// the padding spaces is the PAD SPACE rule, so this agrees with the
    /// character-wise comparison.
    fn ascii_order(self, a: &[u8], b: &[u8]) -> Option<Ordering> {
        let fold = |c: u8| match self {
            Collation::Utf8mb4Bin => c,
            Collation::Utf8mb4GeneralCi => c.to_ascii_uppercase(),
        };
        let common = a.len().min(b.len());
        // Equal bytes are equal characters, whatever they encode, up to
        // the first difference: found a word at a time (sorted keys often
        // share a prefix). The byte there starts a character in both
        // strings, so the loop below may begin at it.
        let mut same = 0;
        let word = |s: &[u8], at: usize| {
            u64::from_ne_bytes(s[at..at + 8].try_into().expect("eight bytes"))
        };
        while same + 8 <= common && word(a, same) == word(b, same) {
            same += 8;
        }
        while same < common && a[same] == b[same] {
            same += 1;
        }
        for (&x, &y) in a[same..common].iter().zip(&b[same..common]) {
            if !x.is_ascii() || !y.is_ascii() {
                return None;
            }
            let (x, y) = (fold(x), fold(y));
            if x != y {
                return Some(x.cmp(&y));
            }
        }
        // The longer one's rest against the shorter one's padding.
        let (rest, flip) = if a.len() > common {
            (&a[common..], false)
        } else {
            (&b[common..], true)
        };
        for &x in rest {
            if !x.is_ascii() {
                return None;
            }
            let order = fold(x).cmp(&b' ');
            if order.is_ne() {
                return Some(if flip { order.reverse() } else { order });
            }
        }
        Some(Ordering::Equal)
    }

    /// Whether two strings are equal under this collation.
    pub fn equal(self, a: &str, b: &str) -> bool {
        self.compare(a, b) == Ordering::Equal
    }
}

/// Whether `s` is ASCII, eight bytes at a time. The standard library's
/// `is_ascii` takes 64-byte blocks and then goes a byte at a time: 5
/// instructions a byte for the last 55 of sysbench's 119-byte strings.
fn is_ascii(s: &[u8]) -> bool {
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    let mut words = s.chunks_exact(8);
    let mut all = 0u64;
    for word in &mut words {
        all |= u64::from_ne_bytes(word.try_into().expect("eight bytes"));
    }
    all & HIGH == 0 && words.remainder().iter().all(u8::is_ascii)
}

/// Makes the ASCII letters of `bytes`, all ASCII, uppercase: eight bytes
/// at a time, as one word each (`make_ascii_uppercase` goes a byte at a
/// time).
fn uppercase_ascii(bytes: &mut [u8]) {
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    debug_assert!(bytes.is_ascii());
    let mut words = bytes.chunks_exact_mut(8);
    for word in &mut words {
        let x = u64::from_ne_bytes((&*word).try_into().expect("eight bytes"));
        // Every byte is under 0x80, so no per-byte sum below carries into
        // the next byte; a byte's top bit then says how it compares.
        let from_a = x + ONES * (0x80 - u64::from(b'a'));
        let past_z = x + ONES * (0x7f - u64::from(b'z'));
        let lower = from_a & !past_z & (ONES * 0x80);
        // A lowercase letter loses 0x20: its top-bit flag, shifted to it.
        word.copy_from_slice(&(x ^ (lower >> 2)).to_ne_bytes());
    }
    words.into_remainder().make_ascii_uppercase();
}

/// Compares two weight sequences as if the shorter were padded with
/// spaces. Code point order equals UTF-8 byte order, so this is the byte
/// order of the weights' UTF-8.
fn compare_padded(
    mut a: impl Iterator<Item = char>,
    mut b: impl Iterator<Item = char>,
) -> Ordering {
    loop {
        let ordering = match (a.next(), b.next()) {
            (None, None) => return Ordering::Equal,
            (Some(x), Some(y)) => x.cmp(&y),
            (Some(x), None) => x.cmp(&' '),
            (None, Some(y)) => ' '.cmp(&y),
        };
        if ordering != Ordering::Equal {
            return ordering;
        }
    }
}

/// The type of a column. Lengths of character types count characters
/// (utf8mb4, up to four bytes each); lengths of binary types count bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ColumnType {
    TinyInt {
        unsigned: bool,
    },
    SmallInt {
        unsigned: bool,
    },
    /// Three bytes, as MySQL's MEDIUMINT.
    MediumInt {
        unsigned: bool,
    },
    Int {
        unsigned: bool,
    },
    BigInt {
        unsigned: bool,
    },
    /// IEEE single precision; NaN and infinities are refused.
    Float,
    /// IEEE double precision; NaN and infinities are refused.
    Double,
    /// Exact decimal of `precision` digits, `scale` of them after the point.
    Decimal {
        precision: u8,
        scale: u8,
    },
    /// Fixed-length character string; trailing spaces are not kept (MySQL
    /// strips them when reading a CHAR back).
    Char {
        len: u16,
        collation: Collation,
    },
    VarChar {
        max: u16,
        collation: Collation,
    },
    /// Fixed-length byte string, padded with zero bytes (as MySQL's BINARY).
    Binary {
        len: u16,
    },
    VarBinary {
        max: u16,
    },
    /// A calendar date, years 0 to 9999 (proleptic Gregorian).
    Date,
    /// Date and time of day, `fsp` digits of fractional seconds.
    DateTime {
        fsp: u8,
    },
    /// Microseconds since 1970-01-01 UTC, `fsp` digits of fractional seconds.
    Timestamp {
        fsp: u8,
    },
    Bit {
        bits: u8,
    },
    /// Bytes of any length: the first [`BLOB_INLINE_BYTES`] in the row, the
    /// rest in parts of [`BLOB_PART_BYTES`] in a hidden table.
    Blob,
    /// Text of any length, stored as a BLOB is.
    Text {
        collation: Collation,
    },
}

/// Where a column lives in a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Storage {
    /// Always this many bytes, in the row's fixed part.
    Fixed { bytes: usize },
    /// At most this many bytes of data, in the row's var part.
    Var { max_bytes: usize },
}

/// Bytes of MySQL's binary DECIMAL for a number of digits that do not fill
/// a whole 9-digit group.
const DECIMAL_PARTIAL_GROUP_BYTES: [usize; 10] = [0, 1, 1, 2, 2, 3, 3, 4, 4, 4];
/// Decimal digits packed into each 4-byte group of MySQL's binary DECIMAL.
pub(crate) const DECIMAL_GROUP_DIGITS: usize = 9;

/// Bytes of a DECIMAL(precision, scale) in MySQL's binary format.
pub(crate) fn decimal_bytes(precision: u8, scale: u8) -> usize {
    debug_assert!(scale <= precision);
    let int_digits = usize::from(precision - scale);
    let frac_digits = usize::from(scale);
    let group = DECIMAL_GROUP_DIGITS;
    int_digits / group * 4
        + DECIMAL_PARTIAL_GROUP_BYTES[int_digits % group]
        + frac_digits / group * 4
        + DECIMAL_PARTIAL_GROUP_BYTES[frac_digits % group]
}

/// Bytes partial groups of a DECIMAL take, for the digits of one group.
pub(crate) fn decimal_partial_group_bytes(digits: usize) -> usize {
    DECIMAL_PARTIAL_GROUP_BYTES[digits]
}

/// Bytes of the fractional seconds of a DATETIME or TIMESTAMP: two digits
/// per byte, rounded up (MySQL's DATETIME2/TIMESTAMP2).
pub(crate) fn fsp_bytes(fsp: u8) -> usize {
    usize::from(fsp).div_ceil(2)
}

/// The flag of an unsigned integer in [`ColumnType::integer_code`].
pub const INTEGER_CODE_UNSIGNED: u8 = 0x80;

/// Whether integer `v` fits a column of integer code `code`
/// ([`ColumnType::integer_code`]); false for code 0 and any other value.
#[inline(always)]
pub fn integer_code_fits(code: u8, v: ValueRef<'_>) -> bool {
    if code == 0 {
        return false;
    }
    let bits = u32::from(code & !INTEGER_CODE_UNSIGNED);
    match (v, code & INTEGER_CODE_UNSIGNED != 0) {
        (ValueRef::UInt(x), true) => bits == 64 || x >> bits == 0,
        (ValueRef::UInt(x), false) => x >> (bits - 1) == 0,
        (ValueRef::Int(x), true) => x >= 0 && (bits == 64 || (x as u64) >> bits == 0),
        (ValueRef::Int(x), false) => {
            let high = x >> (bits - 1);
            high == 0 || high == -1
        }
        _ => false,
    }
}

impl ColumnType {
    /// Where and in how many bytes the column is stored.
    pub fn storage(&self) -> Storage {
        use ColumnType::*;
        let fixed = |bytes: usize| Storage::Fixed { bytes };
        match *self {
            TinyInt { .. } => fixed(1),
            SmallInt { .. } => fixed(2),
            MediumInt { .. } => fixed(3),
            Int { .. } | Float => fixed(4),
            BigInt { .. } | Double => fixed(8),
            Decimal { precision, scale } => fixed(decimal_bytes(precision, scale)),
            Binary { len } => fixed(usize::from(len)),
            Date => fixed(3),
            DateTime { fsp } => fixed(5 + fsp_bytes(fsp)),
            Timestamp { fsp } => fixed(4 + fsp_bytes(fsp)),
            Bit { bits } => fixed(usize::from(bits).div_ceil(8)),
            Char { len, .. } => Storage::Var {
                max_bytes: usize::from(len) * UTF8MB4_CHAR_BYTES_MAX,
            },
            VarChar { max, .. } => Storage::Var {
                max_bytes: usize::from(max) * UTF8MB4_CHAR_BYTES_MAX,
            },
            VarBinary { max } => Storage::Var {
                max_bytes: usize::from(max),
            },
            Blob | Text { .. } => Storage::Var {
                max_bytes: BLOB_LENGTH_BYTES + BLOB_INLINE_BYTES,
            },
        }
    }

    /// Most bytes of data the column takes in a row (not counting the var
    /// part's offset entry or the NULL bit).
    pub fn max_stored_bytes(&self) -> usize {
        match self.storage() {
            Storage::Fixed { bytes } => bytes,
            Storage::Var { max_bytes } => max_bytes,
        }
    }

    /// Whether the column lives in the row's var part.
    pub fn is_var(&self) -> bool {
        matches!(self.storage(), Storage::Var { .. })
    }

    /// BLOB and TEXT: a head in the row, parts in a hidden table; never in a key.
    pub fn is_blob(&self) -> bool {
        matches!(self, ColumnType::Blob | ColumnType::Text { .. })
    }

    /// The collation of a character column.
    pub fn collation(&self) -> Option<Collation> {
        match *self {
            ColumnType::Char { collation, .. }
            | ColumnType::VarChar { collation, .. }
            | ColumnType::Text { collation } => Some(collation),
            _ => None,
        }
    }

    /// The inclusive range of an integer column, as i128 to hold both ends
    /// of signed and unsigned types.
    #[inline]
    pub fn integer_range(&self) -> Option<(i128, i128)> {
        let (bits, unsigned) = self.integer_width()?;
        Some(if unsigned {
            (0, (1i128 << bits) - 1)
        } else {
            (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
        })
    }

    /// Whether `v`, an integer value, fits this integer column: what
    /// `integer_range` decides, without its 128-bit arithmetic (this runs
    /// for every integer a request writes). False for any other value or
    /// column type.
    #[inline]
    pub fn integer_fits(&self, v: ValueRef<'_>) -> bool {
        integer_code_fits(self.integer_code(), v)
    }

    /// The type in one byte, for tables of such codes made once per table
    /// (a column per byte): 0 for any type but an integer, else its width
    /// in bits, with [`INTEGER_CODE_UNSIGNED`] for an unsigned one.
    #[inline]
    pub fn integer_code(&self) -> u8 {
        match self.integer_width() {
            Some((bits, unsigned)) => bits | if unsigned { INTEGER_CODE_UNSIGNED } else { 0 },
            None => 0,
        }
    }

    /// An integer type's width in bits and whether it is unsigned.
    #[inline]
    fn integer_width(&self) -> Option<(u8, bool)> {
        use ColumnType::*;
        Some(match *self {
            TinyInt { unsigned } => (8, unsigned),
            SmallInt { unsigned } => (16, unsigned),
            MediumInt { unsigned } => (24, unsigned),
            Int { unsigned } => (32, unsigned),
            BigInt { unsigned } => (64, unsigned),
            _ => return None,
        })
    }

    /// Whether an integer column is signed (false for every other type).
    pub fn is_signed_integer(&self) -> bool {
        matches!(self.integer_range(), Some((min, _)) if min < 0)
    }

    /// Checks the type's own parameters against their limits; the message
    /// names the limit that is broken.
    pub fn check_parameters(&self) -> Result<(), String> {
        use ColumnType::*;
        match *self {
            Decimal { precision, scale } => {
                if precision == 0 || precision > DECIMAL_PRECISION_MAX {
                    return Err(format!(
                        "DECIMAL precision {precision} is outside 1..={DECIMAL_PRECISION_MAX}"
                    ));
                }
                if scale > DECIMAL_SCALE_MAX {
                    return Err(format!(
                        "DECIMAL scale {scale} is above {DECIMAL_SCALE_MAX}"
                    ));
                }
                if scale > precision {
                    return Err(format!(
                        "DECIMAL scale {scale} is above its precision {precision}"
                    ));
                }
            }
            Char { len, .. } if len > CHAR_CHARS_MAX => {
                return Err(format!(
                    "CHAR({len}) is longer than {CHAR_CHARS_MAX} characters"
                ));
            }
            VarChar { max, .. } if max > VARCHAR_CHARS_MAX => {
                return Err(format!(
                    "VARCHAR({max}) is longer than {VARCHAR_CHARS_MAX} characters"
                ));
            }
            Binary { len } if len > BINARY_BYTES_MAX => {
                return Err(format!(
                    "BINARY({len}) is longer than {BINARY_BYTES_MAX} bytes"
                ));
            }
            DateTime { fsp } | Timestamp { fsp } if fsp > FSP_MAX => {
                return Err(format!("{fsp} fractional-second digits, at most {FSP_MAX}"));
            }
            Bit { bits } if bits == 0 || bits > BIT_BITS_MAX => {
                return Err(format!("BIT({bits}) is outside 1..={BIT_BITS_MAX} bits"));
            }
            _ => {}
        }
        Ok(())
    }
}

impl fmt::Display for ColumnType {
    /// SQL spelling of the type, for messages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use ColumnType::*;
        let unsigned = |u: bool| if u { " UNSIGNED" } else { "" };
        match *self {
            TinyInt { unsigned: u } => write!(f, "TINYINT{}", unsigned(u)),
            SmallInt { unsigned: u } => write!(f, "SMALLINT{}", unsigned(u)),
            MediumInt { unsigned: u } => write!(f, "MEDIUMINT{}", unsigned(u)),
            Int { unsigned: u } => write!(f, "INT{}", unsigned(u)),
            BigInt { unsigned: u } => write!(f, "BIGINT{}", unsigned(u)),
            Float => write!(f, "FLOAT"),
            Double => write!(f, "DOUBLE"),
            Decimal { precision, scale } => write!(f, "DECIMAL({precision},{scale})"),
            Char { len, collation } => write!(f, "CHAR({len}) COLLATE {}", collation.name()),
            VarChar { max, collation } => {
                write!(f, "VARCHAR({max}) COLLATE {}", collation.name())
            }
            Binary { len } => write!(f, "BINARY({len})"),
            VarBinary { max } => write!(f, "VARBINARY({max})"),
            Date => write!(f, "DATE"),
            DateTime { fsp } => write!(f, "DATETIME({fsp})"),
            Timestamp { fsp } => write!(f, "TIMESTAMP({fsp})"),
            Bit { bits } => write!(f, "BIT({bits})"),
            Blob => write!(f, "BLOB"),
            Text { collation } => write!(f, "TEXT COLLATE {}", collation.name()),
        }
    }
}

/// One column of a table.
#[derive(Clone, Debug, PartialEq)]
pub struct Column {
    pub name: String,
    pub ty: ColumnType,
    pub nullable: bool,
    /// The value an insert that leaves the column out gets; `None` means
    /// NULL for a nullable column and "must be given" for a NOT NULL one.
    pub default: Option<Value>,
}

impl Column {
    /// Whether `other` is this column under another name at most (what an
    /// online rename may change).
    pub fn same_but_name(&self, other: &Column) -> bool {
        self.ty == other.ty && self.nullable == other.nullable && self.default == other.default
    }

    /// A NOT NULL column without a default.
    pub fn new(name: impl Into<String>, ty: ColumnType) -> Column {
        Column {
            name: name.into(),
            ty,
            nullable: false,
            default: None,
        }
    }

    /// The same column, nullable.
    pub fn nullable(mut self) -> Column {
        self.nullable = true;
        self
    }

    /// The same column with a default value.
    pub fn with_default(mut self, value: Value) -> Column {
        self.default = Some(value);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_sizes_match_mysql() {
        // From MySQL's manual, "Precision Math / DECIMAL Data Type Characteristics".
        assert_eq!(decimal_bytes(18, 9), 8);
        assert_eq!(decimal_bytes(20, 6), 10);
        assert_eq!(decimal_bytes(65, 30), 30);
        assert_eq!(decimal_bytes(1, 0), 1);
        assert_eq!(decimal_bytes(10, 10), 5);
    }

    #[test]
    fn is_ascii_is_the_standard_is_ascii() {
        let mut bytes = [b'a'; 40];
        for len in 0..bytes.len() {
            for at in 0..len {
                assert!(is_ascii(&bytes[..len]));
                bytes[at] = 0x80;
                assert!(!is_ascii(&bytes[..len]), "a high byte at {at} of {len}");
                bytes[at] = b'a';
            }
        }
    }

    #[test]
    fn uppercase_ascii_is_make_ascii_uppercase() {
        let all: Vec<u8> = (0u8..0x80).collect();
        for start in 0..8 {
            let mut fast = all[start..].to_vec();
            uppercase_ascii(&mut fast);
            assert_eq!(fast, all[start..].to_ascii_uppercase());
        }
    }

    /// The byte form is the string form's bytes, ASCII or not, invalid
    /// UTF-8 as its lossy decoding.
    #[test]
    fn sort_key_into_is_sort_key() {
        let texts: [&[u8]; 9] = [
            b"",
            b"   ",
            b"abc",
            b"aBc  ",
            b"a b ",
            "\u{e1}b\u{df} ".as_bytes(),
            "x\u{1F600}y".as_bytes(),
            b"\xffab  ",
            b"ab\xe2 ",
        ];
        for c in [Collation::Utf8mb4Bin, Collation::Utf8mb4GeneralCi] {
            for t in texts {
                let mut out = vec![7];
                c.sort_key_into(t, &mut out);
                let want = c.sort_key(&String::from_utf8_lossy(t));
                assert_eq!(&out[1..], want.as_bytes(), "{c:?} {t:?}");
            }
        }
    }

    #[test]
    fn collations_are_pad_space() {
        let bin = Collation::Utf8mb4Bin;
        let ci = Collation::Utf8mb4GeneralCi;
        assert!(bin.equal("abc", "abc   "));
        assert!(!bin.equal("abc", "ABC"));
        assert!(ci.equal("ABC", "abc "));
        assert_eq!(bin.compare("a", "a\t"), Ordering::Greater);
        assert_eq!(bin.compare("a", "a b"), Ordering::Less);
        assert_eq!(ci.compare("B", "a"), Ordering::Greater);
        assert_eq!(bin.compare("B", "a"), Ordering::Less);
    }

    /// The ASCII path orders as decoding and weighing characters does, for
    /// strings that are ASCII, not ASCII, or ASCII up to a point.
    #[test]
    fn ascii_strings_compare_as_characters_do() {
        let reference = |c: Collation, a: &str, b: &str| {
            let (a, b) = (a.trim_end_matches(' '), b.trim_end_matches(' '));
            match c {
                Collation::Utf8mb4Bin => compare_padded(a.chars(), b.chars()),
                Collation::Utf8mb4GeneralCi => compare_padded(
                    a.chars().map(crate::general_ci::weight),
                    b.chars().map(crate::general_ci::weight),
                ),
            }
        };
        let alphabet = ['a', 'B', 'b', '_', '[', ' ', '\t', 'Z', '~', '\u{e9}'];
        let mut strings = vec![String::new()];
        for _ in 0..3 {
            let longer: Vec<String> = strings
                .iter()
                .flat_map(|s| alphabet.iter().map(move |c| format!("{s}{c}")))
                .collect();
            strings.extend(longer);
        }
        strings.sort();
        strings.dedup();
        let ci = Collation::Utf8mb4GeneralCi;
        for c in [Collation::Utf8mb4Bin, Collation::Utf8mb4GeneralCi] {
            for a in &strings {
                for b in &strings {
                    let wanted = reference(c, a, b);
                    assert_eq!(c.compare(a, b), wanted, "{c:?} {a:?} {b:?}");
                    assert_eq!(c.compare_bytes(a.as_bytes(), b.as_bytes()), wanted);
                    // Behind a shared prefix longer than a word (with a
                    // character of two bytes in it), which the fast path
                    // steps over.
                    let (a, b) = (
                        format!("prefix-\u{e9}-0123{a}"),
                        format!("prefix-\u{e9}-0123{b}"),
                    );
                    assert_eq!(c.compare_bytes(a.as_bytes(), b.as_bytes()), wanted);
                }
            }
        }
        // A difference inside a character of two bytes, past a word.
        assert_eq!(
            ci.compare_bytes("01234567\u{e9}".as_bytes(), "01234567\u{e8}".as_bytes()),
            Ordering::Equal
        );
        assert_eq!(
            Collation::Utf8mb4Bin
                .compare_bytes("01234567\u{e9}".as_bytes(), "01234567\u{e8}".as_bytes()),
            Ordering::Greater
        );
        assert_eq!(ci.compare("\u{c9}", "\u{e9}"), Ordering::Equal);
        // Bytes that are not UTF-8 compare as their lossy decoding.
        assert_eq!(
            ci.compare_bytes(b"a\xff", "a\u{fffd}".as_bytes()),
            Ordering::Equal
        );
    }

    /// Order and equality as MariaDB 10.11 gives them. The orders are
    /// `SELECT s FROM t ORDER BY s, BINARY s` of a column of the collation
    /// (ties, which the collation deems equal, by bytes); the equalities
    /// `SELECT a = b COLLATE …` of string literals.
    #[test]
    fn order_and_equality_match_mariadb() {
        let ci = Collation::Utf8mb4GeneralCi;
        let bin = Collation::Utf8mb4Bin;
        fn sorted(c: Collation, mut v: Vec<&'static str>) -> Vec<&'static str> {
            v.sort_by(|a, b| c.compare(a, b).then_with(|| a.cmp(b)));
            v
        }
        let input = vec![
            "~", "z", "[", "B", "_", "a", "`", "{", "^", "\\", "]", "@", "0", " ",
        ];
        // MariaDB: ' ' 0 @ a B z [ \ ] ^ _ ` { ~
        let want = [
            " ", "0", "@", "a", "B", "z", "[", "\\", "]", "^", "_", "`", "{", "~",
        ];
        assert_eq!(sorted(ci, input.clone()), want);
        // MariaDB: ' ' 0 @ B [ \ ] ^ _ ` a z { ~
        let want = [
            " ", "0", "@", "B", "[", "\\", "]", "^", "_", "`", "a", "z", "{", "~",
        ];
        assert_eq!(sorted(bin, input), want);
        // `s < 'a'` in general_ci finds none of `[ _ ~`.
        for s in ["[", "_", "~", "`"] {
            assert_eq!(ci.compare(s, "a"), Ordering::Greater, "{s}");
        }
        let accents = vec!["f", "\u{e9}", "E", "e", "\u{c9}", "d", "\u{e8}", "\u{ea}"];
        // MariaDB: d E e É è é ê f (ties by bytes)
        let want = ["d", "E", "e", "\u{c9}", "\u{e8}", "\u{e9}", "\u{ea}", "f"];
        assert_eq!(sorted(ci, accents), want);
        // Equal in general_ci, each pair (MariaDB: 1).
        let equal = [
            ("\u{e9}", "E"),
            ("\u{df}", "s"),
            ("stra\u{df}e", "STRASE"),
            ("\u{c5}", "a"),
            ("\u{f8}", "\u{d8}"),
            ("\u{1c5}", "\u{1c6}"),
            ("\u{1F600}", "\u{1F601}"),
            ("\u{1F600}", "\u{FFFD}"),
            ("\u{3ac}", "\u{391}"),
            ("\u{451}", "\u{415}"),
            ("a", "a   "),
            ("\u{131}", "I"),
            ("\u{17f}", "s"),
        ];
        for (a, b) in equal {
            assert_eq!(ci.compare(a, b), Ordering::Equal, "{a:?} {b:?}");
        }
        // Not equal in general_ci (MariaDB: 0).
        let unequal = [
            ("\u{f8}", "o"),
            ("\u{e6}", "ae"),
            ("\u{df}", "ss"),
            ("\u{111}", "d"),
            ("\u{142}", "l"),
            ("a\t", "a"),
            ("\u{10d0}", "\u{1c90}"),
            ("\u{1F600}", "\u{FFFF}"),
        ];
        for (a, b) in unequal {
            assert_ne!(ci.compare(a, b), Ordering::Equal, "{a:?} {b:?}");
        }
        // utf8mb4_bin: code points, PAD SPACE, every plane distinct.
        assert_eq!(bin.compare("a", "a  "), Ordering::Equal);
        assert_eq!(bin.compare("a\t", "a"), Ordering::Less);
        assert_eq!(bin.compare("\u{1F600}", "\u{1F601}"), Ordering::Less);
        assert_eq!(bin.compare("\u{FFFD}", "\u{1F600}"), Ordering::Less);
        assert_eq!(bin.compare("\u{e9}", "E"), Ordering::Greater);
    }

    #[test]
    fn parameters_are_checked() {
        let bad = [
            ColumnType::Decimal {
                precision: 0,
                scale: 0,
            },
            ColumnType::Decimal {
                precision: 66,
                scale: 0,
            },
            ColumnType::Decimal {
                precision: 40,
                scale: 31,
            },
            ColumnType::Decimal {
                precision: 5,
                scale: 6,
            },
            ColumnType::Char {
                len: 256,
                collation: Collation::Utf8mb4Bin,
            },
            ColumnType::VarChar {
                max: 16_384,
                collation: Collation::Utf8mb4Bin,
            },
            ColumnType::Binary { len: 256 },
            ColumnType::DateTime { fsp: 7 },
            ColumnType::Timestamp { fsp: 7 },
            ColumnType::Bit { bits: 0 },
            ColumnType::Bit { bits: 65 },
        ];
        for ty in bad {
            assert!(ty.check_parameters().is_err(), "{ty} passed");
        }
        assert!(ColumnType::Decimal {
            precision: 65,
            scale: 30
        }
        .check_parameters()
        .is_ok());
    }
}
