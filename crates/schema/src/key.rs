//! Memcomparable keys: the values of a list of columns (a primary key, an
//! index, a distribution key) as bytes whose byte-wise order is the SQL
//! order of the values, and whose equality is SQL equality under each
//! column's collation.
//!
//! One encoding serves the ordered indexes (which compare keys as bytes),
//! the hash index (which compares them for equality) and the distribution
//! hash (which hashes them), so a key is canonical: values equal under the
//! column's type and collation have the same bytes (`'ABC'` and `'abc '`
//! in a `utf8mb4_general_ci` column; `-0.0` and `0.0`; `1.5` and `1.50`).
//! The bytes are part of the on-disk format (ordered index order, the hash
//! of every stored row) and shared with clients; they never change without
//! a format change. (They changed once, when `utf8mb4_general_ci` took
//! MySQL's weights: the sysfile went to version 3 and the wire to 8, so
//! that older data directories and builds are refused.)
//!
//! # Byte layout
//!
//! A key is its columns' encodings, concatenated in key order. Every column
//! encoding is prefix-free (fixed width or self-terminating), so byte order
//! of the concatenation is the order of the tuples, and the key of a prefix
//! of the columns is a byte prefix of the whole key (what range scans on a
//! prefix and the distribution key, a primary-key prefix, rely on).
//!
//! Each column:
//! - a nullable column starts with `0x00` for NULL (and nothing follows) or
//!   `0x01` followed by the value; NULL sorts first. A NOT NULL column has
//!   no marker byte.
//! - integers, DECIMAL, BINARY, DATE, DATETIME, TIMESTAMP, BIT: the bytes
//!   the row stores ([`super::row`]): big-endian, sign bit flipped, fixed
//!   width.
//! - FLOAT/DOUBLE: the IEEE bits big-endian, with `-0.0` first made `0.0`,
//!   then for a positive number the sign bit set and for a negative one all
//!   bits inverted. NaN never gets here (refused by the value check).
//! - CHAR/VARCHAR (PAD SPACE collations): trailing spaces dropped; under
//!   `utf8mb4_general_ci` every character replaced by its weight
//!   (`Collation::weight`: MySQL's, its uppercase base letter, U+FFFD
//!   outside the BMP); then the UTF-8 bytes cut into chunks of
//!   [`STRING_KEY_CHUNK_BYTES`] (the last one padded with spaces, an empty
//!   string being one chunk of spaces), each chunk followed by a marker:
//!   `0x02` if the string ends in this chunk, else `0x03` if the first
//!   non-space byte after the chunk is above a space and `0x01` if it is
//!   below. This orders strings as if the shorter were padded with spaces
//!   (MySQL's PAD SPACE: `'a' > 'a\t'`, `'a' < 'a b'`), which a terminator
//!   byte could not. (The scheme is MyRocks's.)
//! - VARBINARY (no padding, `'a' < 'a\0'`): each `0x00` byte written as
//!   `0x00 0xFF`, then the terminator `0x00 0x00`.
//! - BLOB and TEXT are never in a key.

use super::row::RowLayout;
use super::table::{IndexDef, TableDef};
use super::types::{Collation, ColumnType, UTF8MB4_CHAR_BYTES_MAX};
use super::value::{check_value, Value, ValueError, ValueRef};

/// Bytes of string data per chunk of a CHAR/VARCHAR key; each chunk costs
/// one marker byte, so 8 keeps the overhead at one byte in nine.
pub const STRING_KEY_CHUNK_BYTES: usize = 8;
/// Marker after a chunk: the string goes on below spaces.
const CHUNK_MORE_BELOW_SPACE: u8 = 0x01;
/// Marker after a chunk: the string ends here.
const CHUNK_END: u8 = 0x02;
/// Marker after a chunk: the string goes on above spaces.
const CHUNK_MORE_ABOVE_SPACE: u8 = 0x03;
const NULL_MARKER: u8 = 0x00;
const NOT_NULL_MARKER: u8 = 0x01;
/// VARBINARY escapes 0x00 as 0x00 0xFF and ends with 0x00 0x00.
const BYTES_ESCAPE: [u8; 2] = [0x00, 0xFF];
const BYTES_TERMINATOR: [u8; 2] = [0x00, 0x00];

/// One column of a key.
#[derive(Clone, Debug)]
struct KeyColumn {
    /// Position of the column in the table (and so in its rows).
    column: usize,
    name: String,
    ty: ColumnType,
    nullable: bool,
}

/// One column of an integer key, as the fast path encodes it: the bytes
/// the row stores, `width` bytes big-endian with the sign bit flipped for a
/// signed type.
#[derive(Copy, Clone, Debug)]
struct IntegerKeyColumn {
    width: u8,
    signed: bool,
}

/// Most columns of a key that takes the integer fast path; a key of more
/// integer columns goes through the general encoder.
const INTEGER_KEY_COLUMNS_MAX: usize = 4;

/// Encodes the values of a fixed list of a table's columns into keys.
#[derive(Clone, Debug)]
pub struct KeyEncoder {
    table: String,
    columns: Vec<KeyColumn>,
    max_encoded_bytes: usize,
    /// Set when every column is a NOT NULL integer (TINYINT … BIGINT,
    /// signed or not) and there are at most [`INTEGER_KEY_COLUMNS_MAX`]:
    /// the common primary key, encoded without the general per-type
    /// dispatch (see [`KeyEncoder::encode`]).
    integers: Option<([IntegerKeyColumn; INTEGER_KEY_COLUMNS_MAX], usize)>,
}

impl KeyEncoder {
    /// Bytes a batch key buffer needs after a key of the integer fast path:
    /// [`KeyEncoder::encode_integers_into`] stores every column as eight
    /// bytes.
    pub const INTEGER_KEY_SLACK_BYTES: usize = 8;

    /// An encoder for `columns` (positions in `table`, in key order). Panics
    /// on a column that does not exist or cannot be in a key (BLOB/TEXT):
    /// [`TableDef::validate`] refuses such keys, so this is a caller's bug.
    pub fn new(table: &TableDef, columns: &[usize]) -> KeyEncoder {
        let columns: Vec<KeyColumn> = columns
            .iter()
            .map(|&c| {
                let column = table
                    .columns
                    .get(c)
                    .unwrap_or_else(|| panic!("table `{}` has no column {c}", table.name));
                assert!(
                    !column.ty.is_blob(),
                    "column `{}` of `{}` is {} and cannot be in a key",
                    column.name,
                    table.name,
                    column.ty
                );
                KeyColumn {
                    column: c,
                    name: column.name.clone(),
                    ty: column.ty,
                    nullable: column.nullable,
                }
            })
            .collect();
        let max_encoded_bytes = columns
            .iter()
            .map(|c| column_max_encoded_bytes(&c.ty, c.nullable))
            .sum();
        let integers = integer_key_columns(&columns);
        KeyEncoder {
            table: table.name.clone(),
            columns,
            max_encoded_bytes,
            integers,
        }
    }

    /// The primary key's encoder.
    pub fn primary_key(table: &TableDef) -> KeyEncoder {
        KeyEncoder::new(table, &table.primary_key)
    }

    /// The distribution key's encoder; its keys are byte prefixes of the
    /// primary key's.
    pub fn distribution_key(table: &TableDef) -> KeyEncoder {
        KeyEncoder::new(table, &table.distribution_key)
    }

    /// An index's encoder.
    pub fn index(table: &TableDef, index: &IndexDef) -> KeyEncoder {
        KeyEncoder::new(table, &index.columns)
    }

    /// An ordered index's entry key: its columns, then the primary key's
    /// columns it does not hold. Rows equal in the index's columns then
    /// come in primary key order, as InnoDB's secondary indexes give them,
    /// so `ORDER BY created, id` follows an index of `(created)`. A scan's
    /// bounds name the index's columns only: they are prefixes of these
    /// keys ([`KeyEncoder::encode_prefix`]).
    pub fn ordered_index(table: &TableDef, index: &IndexDef) -> KeyEncoder {
        let mut columns = index.columns.clone();
        columns.extend(
            table
                .primary_key
                .iter()
                .filter(|c| !index.columns.contains(c)),
        );
        KeyEncoder::new(table, &columns)
    }

    /// Longest key this encoder can produce, in bytes.
    pub fn max_encoded_bytes(&self) -> usize {
        self.max_encoded_bytes
    }

    /// Number of columns in the key.
    pub fn column_count(&self) -> usize {
        self.columns.len()
    }

    /// Positions of the key's columns in the table.
    pub fn columns(&self) -> impl Iterator<Item = usize> + '_ {
        self.columns.iter().map(|c| c.column)
    }

    /// Appends the key of `values` (one per key column, in key order) to
    /// `out`. On an error `out` is left as it was.
    ///
    /// A key of NOT NULL integer columns (see [`KeyEncoder::fixed_width`])
    /// takes a fast path: a range check and a big-endian store per column,
    /// no dispatch on the column type; the bytes are the general encoder's
    /// (a test holds the two equal), and a value the fast path does not
    /// take (out of range, not an integer) goes to the general encoder,
    /// which reports it.
    #[inline]
    pub fn encode(&self, values: &[Value], out: &mut Vec<u8>) -> Result<(), ValueError> {
        if values.len() != self.columns.len() {
            return Err(self.wrong_count(values.len()));
        }
        if let Some((columns, count)) = &self.integers {
            if encode_integers(&columns[..*count], values, out) {
                return Ok(());
            }
        }
        self.encode_prefix(values, out)
    }

    /// The length of every key, when the key is NOT NULL integer columns
    /// (the fast path of [`KeyEncoder::encode`]); `None` for other keys.
    pub fn fixed_width(&self) -> Option<usize> {
        let (columns, count) = self.integers.as_ref()?;
        Some(columns[..*count].iter().map(|c| usize::from(c.width)).sum())
    }

    /// The integer fast path of [`KeyEncoder::encode`] for a batch of keys
    /// laid out at a fixed stride: writes the key of `values` (its
    /// [`KeyEncoder::fixed_width`] bytes, the same bytes `encode` appends)
    /// at the start of `out`, and may overwrite up to
    /// [`KeyEncoder::INTEGER_KEY_SLACK_BYTES`] bytes after them (each column is stored
    /// as eight bytes, the next column's overwriting the excess), so `out`
    /// is at least that much longer than the key. Returns false, with
    /// `out`'s first bytes unspecified, when the key does not take the
    /// fast path (see `encode`: the general encoder then says why or
    /// encodes it).
    #[inline]
    pub fn encode_integers_into(&self, values: &[Value], out: &mut [u8]) -> bool {
        let Some((columns, count)) = &self.integers else {
            return false;
        };
        let columns = &columns[..*count];
        if values.len() != columns.len() {
            return false;
        }
        let mut at = 0;
        for (column, value) in columns.iter().zip(values) {
            let Some(stored) = integer_key_bytes(*column, value) else {
                return false;
            };
            let Some(dst) = out.get_mut(at..at + KeyEncoder::INTEGER_KEY_SLACK_BYTES) else {
                panic!(
                    "a key buffer of {} bytes has no room for a key column at {at} and its slack",
                    out.len()
                );
            };
            dst.copy_from_slice(&stored);
            at += usize::from(column.width);
        }
        true
    }

    /// [`KeyEncoder::encode`] without the integer fast path (tests compare
    /// the two).
    #[cfg(test)]
    fn encode_general(&self, values: &[Value], out: &mut Vec<u8>) -> Result<(), ValueError> {
        if values.len() != self.columns.len() {
            return Err(self.wrong_count(values.len()));
        }
        self.encode_prefix(values, out)
    }

    /// Appends the key of the first `values.len()` key columns: a bound for
    /// a range scan on a prefix of an ordered index. On an error `out` is
    /// left as it was.
    pub fn encode_prefix(&self, values: &[Value], out: &mut Vec<u8>) -> Result<(), ValueError> {
        if values.len() > self.columns.len() {
            return Err(self.wrong_count(values.len()));
        }
        for (column, value) in self.columns.iter().zip(values) {
            check_value(value.as_ref(), &column.name, &column.ty, column.nullable)?;
        }
        for (column, value) in self.columns.iter().zip(values) {
            encode_value(column, value.as_ref(), out);
        }
        Ok(())
    }

    /// Appends the key of a whole row given as values in table order (an
    /// insert before it is encoded as a row). On an error `out` is left as
    /// it was.
    pub fn encode_from_values(&self, row: &[Value], out: &mut Vec<u8>) -> Result<(), ValueError> {
        for column in &self.columns {
            let value = row
                .get(column.column)
                .ok_or_else(|| ValueError::NoSuchColumn {
                    table: self.table.clone(),
                    column: column.column,
                    columns: row.len(),
                })?;
            check_value(value.as_ref(), &column.name, &column.ty, column.nullable)?;
        }
        for column in &self.columns {
            encode_value(column, row[column.column].as_ref(), out);
        }
        Ok(())
    }

    /// Appends the key of a stored row (fixed and var part of `layout`, the
    /// same table's). Copies the stored bytes of fixed-size columns; no
    /// value is decoded and nothing is allocated once `out` has room.
    pub fn encode_from_row(&self, layout: &RowLayout, fixed: &[u8], var: &[u8], out: &mut Vec<u8>) {
        self.encode_prefix_from_row(layout, fixed, var, self.columns.len(), out);
    }

    /// [`KeyEncoder::encode_from_row`] of the first `n` key columns only
    /// (at most all of them): rows equal in those columns, as the key
    /// orders them (strings by their collation's weights), have equal
    /// bytes.
    pub fn encode_prefix_from_row(
        &self,
        layout: &RowLayout,
        fixed: &[u8],
        var: &[u8],
        n: usize,
        out: &mut Vec<u8>,
    ) {
        for column in &self.columns[..n.min(self.columns.len())] {
            debug_assert_eq!(layout.column_type(column.column), column.ty);
            if column.nullable {
                if layout.is_null(fixed, column.column) {
                    out.push(NULL_MARKER);
                    continue;
                }
                out.push(NOT_NULL_MARKER);
            }
            match column.ty {
                ColumnType::Float => {
                    let stored = layout.fixed_column(fixed, column.column);
                    let bits = u32::from_be_bytes(stored.try_into().expect("FLOAT is 4 bytes"));
                    out.extend_from_slice(&float_key(f32::from_bits(bits)));
                }
                ColumnType::Double => {
                    let stored = layout.fixed_column(fixed, column.column);
                    let bits = u64::from_be_bytes(stored.try_into().expect("DOUBLE is 8 bytes"));
                    out.extend_from_slice(&double_key(f64::from_bits(bits)));
                }
                ColumnType::Char { collation, .. } | ColumnType::VarChar { collation, .. } => {
                    let stored = layout.var_column(var, column.column);
                    let text =
                        std::str::from_utf8(stored).expect("row store holds only valid rows");
                    encode_padded_string(collation, text, out);
                }
                ColumnType::VarBinary { .. } => {
                    encode_escaped_bytes(layout.var_column(var, column.column), out);
                }
                _ => out.extend_from_slice(layout.fixed_column(fixed, column.column)),
            }
        }
    }

    fn wrong_count(&self, given: usize) -> ValueError {
        ValueError::WrongColumnCount {
            table: self.table.clone(),
            expected: self.columns.len(),
            given,
        }
    }
}

/// The integer fast path's columns, if every column of the key can take
/// it.
fn integer_key_columns(
    columns: &[KeyColumn],
) -> Option<([IntegerKeyColumn; INTEGER_KEY_COLUMNS_MAX], usize)> {
    if columns.is_empty() || columns.len() > INTEGER_KEY_COLUMNS_MAX {
        return None;
    }
    let mut fast = [IntegerKeyColumn {
        width: 0,
        signed: false,
    }; INTEGER_KEY_COLUMNS_MAX];
    for (fast, column) in fast.iter_mut().zip(columns) {
        if column.nullable || column.ty.integer_range().is_none() {
            return None;
        }
        let width = column.ty.max_stored_bytes();
        assert!((1..=8).contains(&width), "an integer is 1 to 8 bytes");
        *fast = IntegerKeyColumn {
            width: width as u8,
            signed: column.ty.is_signed_integer(),
        };
    }
    Some((fast, columns.len()))
}

/// Appends the key of integer `values` to `out` (the integer fast path),
/// or returns false, with `out` as it was, when a value is not an integer
/// in its column's range (the general encoder then says why).
#[inline]
fn encode_integers(columns: &[IntegerKeyColumn], values: &[Value], out: &mut Vec<u8>) -> bool {
    debug_assert_eq!(columns.len(), values.len());
    let start = out.len();
    for (column, value) in columns.iter().zip(values) {
        let Some(stored) = integer_key_bytes(*column, value) else {
            out.truncate(start);
            return false;
        };
        // Eight bytes written, the column's `width` of them kept: fixed-size
        // stores rather than a copy of a run-time length.
        let at = out.len();
        out.extend_from_slice(&stored);
        out.truncate(at + usize::from(column.width));
    }
    true
}

/// The key bytes of one integer value in its column, the column's `width`
/// of them first, then zeroes to eight bytes; `None` when the value is not
/// an integer in the column's range.
#[inline(always)]
fn integer_key_bytes(column: IntegerKeyColumn, value: &Value) -> Option<[u8; 8]> {
    let bits = u32::from(column.width) * 8;
    // The value as the column's two's complement, if it is in range.
    let stored = match *value {
        Value::UInt(v) if column.signed => (v < 1 << (bits - 1)).then_some(v),
        Value::UInt(v) => (bits == 64 || v >> bits == 0).then_some(v),
        Value::Int(v) if column.signed => {
            // In range when the high bits are all copies of the sign.
            let shift = 64 - bits;
            ((v << shift) >> shift == v).then_some(v as u64)
        }
        Value::Int(v) => (v >= 0 && (bits == 64 || v >> bits == 0)).then_some(v as u64),
        _ => None,
    }?;
    let flip = u64::from(column.signed) << (bits - 1);
    Some(((stored ^ flip) << (64 - bits)).to_be_bytes())
}

/// Longest encoding of one key column.
pub(crate) fn column_max_encoded_bytes(ty: &ColumnType, nullable: bool) -> usize {
    let marker = usize::from(nullable);
    let value = match *ty {
        ColumnType::Char { len: chars, .. } | ColumnType::VarChar { max: chars, .. } => {
            // Folding keeps a character within four bytes (checked by a test
            // over every char), so the stored maximum bounds the folded one.
            let bytes = usize::from(chars) * UTF8MB4_CHAR_BYTES_MAX;
            bytes.div_ceil(STRING_KEY_CHUNK_BYTES).max(1) * (STRING_KEY_CHUNK_BYTES + 1)
        }
        ColumnType::VarBinary { max } => usize::from(max) * 2 + BYTES_TERMINATOR.len(),
        _ => ty.max_stored_bytes(),
    };
    marker + value
}

/// Appends one checked value's encoding.
fn encode_value(column: &KeyColumn, value: ValueRef<'_>, out: &mut Vec<u8>) {
    if column.nullable {
        if value.is_null() {
            out.push(NULL_MARKER);
            return;
        }
        out.push(NOT_NULL_MARKER);
    }
    debug_assert!(!value.is_null());
    match (column.ty, value) {
        (ColumnType::Float, ValueRef::Float(v)) => out.extend_from_slice(&float_key(v)),
        (ColumnType::Double, ValueRef::Double(v)) => out.extend_from_slice(&double_key(v)),
        (
            ColumnType::Char { collation, .. } | ColumnType::VarChar { collation, .. },
            ValueRef::Str(s),
        ) => encode_padded_string(collation, s, out),
        (ColumnType::VarBinary { .. }, ValueRef::Bytes(b)) => encode_escaped_bytes(b, out),
        (ty, _) => {
            let width = ty.max_stored_bytes();
            let at = out.len();
            out.resize(at + width, 0);
            super::row::write_fixed(&ty, value, &mut out[at..]);
        }
    }
}

/// FLOAT in key form: -0.0 made 0.0, then the sign trick.
fn float_key(v: f32) -> [u8; 4] {
    debug_assert!(!v.is_nan());
    let v = if v == 0.0 { 0.0 } else { v };
    let bits = v.to_bits();
    let key = if bits >> 31 == 1 {
        !bits
    } else {
        bits | 1 << 31
    };
    key.to_be_bytes()
}

/// DOUBLE in key form: -0.0 made 0.0, then the sign trick.
fn double_key(v: f64) -> [u8; 8] {
    debug_assert!(!v.is_nan());
    let v = if v == 0.0 { 0.0 } else { v };
    let bits = v.to_bits();
    let key = if bits >> 63 == 1 {
        !bits
    } else {
        bits | 1 << 63
    };
    key.to_be_bytes()
}

/// Appends a PAD SPACE string in chunks with markers (see the module doc).
/// The folded bytes are written first and then spread into chunks in place,
/// from the last chunk back, so no scratch buffer is needed.
fn encode_padded_string(collation: Collation, s: &str, out: &mut Vec<u8>) {
    let s = s.trim_end_matches(' ');
    let start = out.len();
    match collation {
        Collation::Utf8mb4Bin => out.extend_from_slice(s.as_bytes()),
        // The weights' UTF-8, as DISTINCT and ORDER BY weigh strings
        // (ASCII folded a word at a time, without decoding).
        Collation::Utf8mb4GeneralCi => collation.sort_key_into(s.as_bytes(), out),
    }
    let len = out.len() - start;
    let chunk = STRING_KEY_CHUNK_BYTES;
    let chunks = len.div_ceil(chunk).max(1);
    out.resize(start + chunks * (chunk + 1), b' ');
    // The marker of chunk c depends on the first non-space byte after it;
    // walking backwards, that is the first non-space byte of the nearest
    // later chunk that has one (the last chunk always has one, as trailing
    // spaces are gone, unless the string is empty).
    let mut marker = CHUNK_END;
    for c in (0..chunks).rev() {
        let source = start + c * chunk;
        let source_end = (source + chunk).min(start + len);
        let first_non_space = out[source..source_end]
            .iter()
            .find(|&&b| b != b' ')
            .copied();
        let target = start + c * (chunk + 1);
        // Chunk c's source lies at or before its target and after the
        // targets of earlier chunks, and later chunks have already moved.
        out.copy_within(source..source_end, target);
        let data = source_end - source;
        out[target + data..target + chunk].fill(b' ');
        out[target + chunk] = marker;
        if let Some(b) = first_non_space {
            marker = if b < b' ' {
                CHUNK_MORE_BELOW_SPACE
            } else {
                CHUNK_MORE_ABOVE_SPACE
            };
        }
    }
}

/// Appends bytes with 0x00 escaped and a terminator (see the module doc).
fn encode_escaped_bytes(bytes: &[u8], out: &mut Vec<u8>) {
    for part in bytes.split_inclusive(|&b| b == 0) {
        match part.split_last() {
            Some((0, head)) => {
                out.extend_from_slice(head);
                out.extend_from_slice(&BYTES_ESCAPE);
            }
            _ => out.extend_from_slice(part),
        }
    }
    out.extend_from_slice(&BYTES_TERMINATOR);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Column;

    fn padded(collation: Collation, s: &str) -> Vec<u8> {
        let mut out = vec![0xAA];
        encode_padded_string(collation, s, &mut out);
        assert_eq!(out[0], 0xAA, "appends");
        out.remove(0);
        out
    }

    #[test]
    fn padded_strings_by_example() {
        let bin = Collation::Utf8mb4Bin;
        assert_eq!(padded(bin, ""), b"        \x02");
        assert_eq!(padded(bin, "   "), b"        \x02");
        assert_eq!(padded(bin, "abc"), b"abc     \x02");
        assert_eq!(padded(bin, "abcdefgh"), b"abcdefgh\x02");
        assert_eq!(padded(bin, "abcdefgh!"), b"abcdefgh\x03!       \x02");
        assert_eq!(padded(bin, "abcdefgh\t"), b"abcdefgh\x01\t       \x02");
        assert_eq!(
            padded(bin, "abcdefgh        x"),
            b"abcdefgh\x03        \x03x       \x02"
        );
        let ci = Collation::Utf8mb4GeneralCi;
        assert_eq!(padded(ci, "ABC "), padded(ci, "abc"));
        assert_ne!(padded(bin, "ABC"), padded(bin, "abc"));
        assert!(padded(bin, "a\t") < padded(bin, "a"));
        assert!(padded(bin, "a") < padded(bin, "a b"));
        // general_ci keys hold weights: uppercase, accents dropped, U+FFFD
        // outside the BMP. MariaDB orders `a B z [ _ ~` (see types.rs).
        assert_eq!(padded(ci, "abc"), b"ABC     \x02");
        assert_eq!(
            padded(ci, "\u{e9}t\u{e9} stra\u{df}e"),
            padded(ci, "ETE STRASE")
        );
        assert_eq!(padded(ci, "\u{1F600}"), padded(ci, "\u{FFFD}"));
        let order = ["a", "B", "z", "[", "_", "~"].map(|s| padded(ci, s));
        assert!(order.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn escaped_bytes_by_example() {
        let enc = |b: &[u8]| {
            let mut out = Vec::new();
            encode_escaped_bytes(b, &mut out);
            out
        };
        assert_eq!(enc(b""), [0, 0]);
        assert_eq!(enc(b"a"), [b'a', 0, 0]);
        assert_eq!(enc(b"a\0"), [b'a', 0, 0xFF, 0, 0]);
        assert_eq!(enc(b"\0\0b"), [0, 0xFF, 0, 0xFF, b'b', 0, 0]);
        assert!(enc(b"a") < enc(b"a\0"));
        assert!(enc(b"a\0") < enc(b"a\x01"));
    }

    #[test]
    fn floats_order_and_zero() {
        assert_eq!(float_key(-0.0), float_key(0.0));
        assert_eq!(double_key(-0.0), double_key(0.0));
        let values = [
            f64::MIN,
            -1.5,
            -f64::MIN_POSITIVE,
            0.0,
            1e-300,
            1.0,
            f64::MAX,
        ];
        for pair in values.windows(2) {
            assert!(double_key(pair[0]) < double_key(pair[1]), "{pair:?}");
        }
    }

    #[test]
    fn folding_keeps_four_bytes_per_char() {
        // column_max_encoded_bytes relies on it.
        for c in (0..=0x10FFFFu32).filter_map(char::from_u32) {
            let folded = Collation::Utf8mb4GeneralCi.weight(c).len_utf8();
            assert!(
                folded <= UTF8MB4_CHAR_BYTES_MAX,
                "{c:?} folds to {folded} bytes"
            );
        }
    }

    #[test]
    fn errors_leave_the_output_alone_and_name_the_column() {
        let table = TableDef::new(
            "t",
            1,
            vec![
                Column::new("a", ColumnType::Int { unsigned: false }),
                Column::new("b", ColumnType::TinyInt { unsigned: true }),
            ],
        )
        .primary_key(vec![0, 1])
        .build()
        .unwrap();
        let encoder = KeyEncoder::primary_key(&table);
        let mut out = vec![7];
        let err = encoder
            .encode(&[Value::Int(1), Value::Int(256)], &mut out)
            .unwrap_err();
        assert!(matches!(err, ValueError::OutOfRange { ref column, .. } if column == "b"));
        assert_eq!(out, [7]);
        assert!(matches!(
            encoder.encode(&[Value::Int(1)], &mut out),
            Err(ValueError::WrongColumnCount {
                expected: 2,
                given: 1,
                ..
            })
        ));
        encoder
            .encode(&[Value::Int(-1), Value::UInt(255)], &mut out)
            .unwrap();
        assert_eq!(out, [7, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF]);
    }

    /// A table of NOT NULL integer columns of the given types, all in the
    /// primary key in this order.
    fn integer_key_table(types: &[ColumnType]) -> TableDef {
        let columns = types
            .iter()
            .enumerate()
            .map(|(i, ty)| Column::new(format!("c{i}"), *ty))
            .collect();
        TableDef::new("ints", 1, columns)
            .primary_key((0..types.len()).collect())
            .build()
            .unwrap()
    }

    fn integer_type() -> impl proptest::strategy::Strategy<Value = ColumnType> {
        use proptest::prelude::*;
        (0..5usize, any::<bool>()).prop_map(|(width, unsigned)| match width {
            0 => ColumnType::TinyInt { unsigned },
            1 => ColumnType::SmallInt { unsigned },
            2 => ColumnType::MediumInt { unsigned },
            3 => ColumnType::Int { unsigned },
            _ => ColumnType::BigInt { unsigned },
        })
    }

    /// A value near a type's edges or anywhere, as `Int` or `UInt`, in
    /// range or not: the fast path must agree with the general encoder on
    /// the bytes, and leave whatever it does not take to it.
    fn integer_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let edges = prop_oneof![
            Just(0i128),
            Just(-1),
            Just(1),
            (0..64u32).prop_map(|b| 1i128 << b),
            (0..64u32).prop_map(|b| -(1i128 << b)),
            (0..64u32).prop_map(|b| (1i128 << b) - 1),
            any::<i64>().prop_map(i128::from),
            any::<u64>().prop_map(i128::from),
        ];
        (edges, any::<bool>()).prop_map(|(v, as_uint)| {
            if (as_uint && v >= 0) || v > i128::from(i64::MAX) {
                Value::UInt(v as u64)
            } else {
                Value::Int(v as i64)
            }
        })
    }

    proptest::proptest! {
        #[test]
        fn the_integer_fast_path_encodes_as_the_general_encoder(
            types in proptest::collection::vec(integer_type(), 1..=INTEGER_KEY_COLUMNS_MAX),
            values in proptest::collection::vec(integer_value(), INTEGER_KEY_COLUMNS_MAX),
        ) {
            let table = integer_key_table(&types);
            let encoder = KeyEncoder::primary_key(&table);
            let width: usize = types.iter().map(ColumnType::max_stored_bytes).sum();
            proptest::prop_assert_eq!(encoder.fixed_width(), Some(width));
            let values = &values[..types.len()];
            let (mut fast, mut general) = (vec![9u8], vec![9u8]);
            let fast_result = encoder.encode(values, &mut fast);
            let general_result = encoder.encode_general(values, &mut general);
            proptest::prop_assert_eq!(&fast_result, &general_result);
            proptest::prop_assert_eq!(&fast, &general);
            if fast_result.is_ok() {
                proptest::prop_assert_eq!(fast.len(), 1 + width);
            }
            // The fixed-stride form: the same bytes, or refused where the
            // fast path refuses (the general encoder then decides).
            let mut into = vec![0xA5u8; width + KeyEncoder::INTEGER_KEY_SLACK_BYTES];
            let taken = encoder.encode_integers_into(values, &mut into);
            let mut appended = Vec::new();
            let fast_takes = encode_integers(
                &encoder.integers.as_ref().unwrap().0[..types.len()],
                values,
                &mut appended,
            );
            proptest::prop_assert_eq!(taken, fast_takes);
            if taken {
                proptest::prop_assert_eq!(&into[..width], &general[1..]);
            }
        }
    }

    #[test]
    fn the_integer_fast_path_takes_only_not_null_integer_keys() {
        let int = Column::new("i", ColumnType::Int { unsigned: false });
        let key_of = |columns: Vec<Column>, key: Vec<usize>| {
            let table = TableDef::new("t", 1, columns)
                .primary_key(key)
                .build()
                .unwrap();
            KeyEncoder::primary_key(&table).fixed_width()
        };
        assert_eq!(key_of(vec![int.clone()], vec![0]), Some(4));
        let big = Column::new("b", ColumnType::BigInt { unsigned: true });
        assert_eq!(key_of(vec![int.clone(), big], vec![1, 0]), Some(12));
        let double = Column::new("d", ColumnType::Double);
        assert_eq!(key_of(vec![int.clone(), double], vec![0, 1]), None);
        let date = Column::new("d", ColumnType::Date);
        assert_eq!(key_of(vec![date], vec![0]), None);
        let five: Vec<Column> = (0..5)
            .map(|i| Column::new(format!("c{i}"), ColumnType::TinyInt { unsigned: true }))
            .collect();
        assert_eq!(key_of(five, (0..5).collect()), None, "too many columns");
        // Wrong values go to the general encoder, which names them.
        let table = TableDef::new("t", 1, vec![int])
            .primary_key(vec![0])
            .build()
            .unwrap();
        let encoder = KeyEncoder::primary_key(&table);
        let mut out = vec![7];
        for wrong in [Value::Null, Value::UInt(1 << 31), Value::Double(1.0)] {
            assert!(encoder
                .encode(std::slice::from_ref(&wrong), &mut out)
                .is_err());
            assert_eq!(out, [7], "{wrong:?} left the output alone");
        }
        encoder.encode(&[Value::Int(-2)], &mut out).unwrap();
        assert_eq!(out, [7, 0x7F, 0xFF, 0xFF, 0xFE]);
    }
}
