//! One value on the wire, and the bounds-checked [`Reader`] every format of
//! this crate is read with.
//!
//! Op batches, results, scan bounds and filters all carry column values;
//! they share this one tagged encoding so that the transaction coordinator
//! can copy a value's bytes from one batch to another without decoding it.
//! Reading borrows: strings and byte strings are slices of the buffer.
//!
//! # Value layout
//!
//! One tag byte, then its payload (little-endian):
//!
//! | tag | value | payload |
//! | --- | --- | --- |
//! | 0 | NULL | nothing |
//! | 1 | signed integer | `i64` |
//! | 2 | unsigned integer | `u64` |
//! | 3 | FLOAT | `u32`, the IEEE bits |
//! | 4 | DOUBLE | `u64`, the IEEE bits |
//! | 5 | DECIMAL | `u8` length, then that many ASCII bytes as `Decimal`'s `Display` writes them |
//! | 6 | string | `u32` length, then that many bytes of UTF-8 |
//! | 7 | byte string | `u32` length, then the bytes |
//! | 8 | DATE | `u16` year, `u8` month, `u8` day |
//! | 9 | DATETIME | the DATE's 4 bytes, then `u8` hour, `u8` minute, `u8` second, `u32` microseconds |
//! | 10 | TIMESTAMP | `i64` microseconds since 1970-01-01 UTC |
//! | 11 | BIT | `u64` |
//! | 12 | blob head | `u64` total bytes, `u32` inline length, then the inline bytes |
//!
//! The tags and payloads are those of a default value in the table
//! definition format (`schema` codec), so one spelling of a value
//! serves both. DECIMAL travels as its shortest exact text: storage's
//! compact binary form (MySQL's `decimal2bin`) needs the column's precision
//! and scale to be read, which a reader of a batch does not have, and the
//! text of a typical amount ("1234.50" → 7 bytes) is as short. The reader
//! checks structure only (tags, lengths, UTF-8, decimal syntax); whether a
//! value fits its column is [`check_value`]'s question.

use std::io::Write as _;

use schema::{Column, Date, DateTime, Decimal, ValueRef};

use crate::ops::Values;

use crate::ProtoError;

/// Tags of the value encoding (see the module doc).
const TAG_NULL: u8 = 0;
pub(crate) const TAG_INT: u8 = 1;
pub(crate) const TAG_UINT: u8 = 2;
// Integer tests take a tag's distance from `TAG_INT`: 0 or 1 for an integer.
const _: () = assert!(TAG_UINT == TAG_INT + 1);
const TAG_FLOAT: u8 = 3;
const TAG_DOUBLE: u8 = 4;
const TAG_DECIMAL: u8 = 5;
const TAG_STR: u8 = 6;
const TAG_BYTES: u8 = 7;
const TAG_DATE: u8 = 8;
const TAG_DATETIME: u8 = 9;
const TAG_TIMESTAMP: u8 = 10;
const TAG_BIT: u8 = 11;
const TAG_BLOB_HEAD: u8 = 12;

/// Longest DECIMAL text: a sign, 65 integer digits, a point, 30 fraction
/// digits. A reader refuses longer text before parsing it.
pub const DECIMAL_TEXT_BYTES_MAX: usize = 1 + 65 + 1 + 30;

/// Reads little-endian fields from a buffer; every read is checked against
/// the bytes left, so no length from the wire is trusted before it is.
#[derive(Clone, Debug)]
pub struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    /// The structure being read, for errors ("op batch", "filter", …).
    what: &'static str,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8], what: &'static str) -> Reader<'a> {
        Reader {
            bytes,
            pos: 0,
            what,
        }
    }

    /// Bytes not yet read.
    #[inline]
    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    /// Offset of the next byte to read.
    #[inline]
    pub fn position(&self) -> usize {
        self.pos
    }

    /// What this reader reads, as errors name it.
    pub fn what(&self) -> &'static str {
        self.what
    }

    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// The whole buffer, read or not (for slicing parts already checked).
    pub(crate) fn whole(&self) -> &'a [u8] {
        self.bytes
    }

    /// Moves on to `at`, a position at or after this one that a check has
    /// found inside the buffer (an op's end, within its checked length).
    #[inline(always)]
    pub(crate) fn skip_to(&mut self, at: usize) {
        assert!(
            self.pos <= at && at <= self.bytes.len(),
            "{}: a skip to {at}, from {} in {} bytes",
            self.what,
            self.pos,
            self.bytes.len()
        );
        self.pos = at;
    }

    /// The next `len` bytes.
    #[inline]
    pub fn bytes(&mut self, len: usize) -> Result<&'a [u8], ProtoError> {
        if len > self.remaining() {
            return Err(ProtoError::Truncated {
                what: self.what,
                offset: self.pos,
                needed: len,
                available: self.remaining(),
            });
        }
        let slice = &self.bytes[self.pos..self.pos + len];
        self.pos += len;
        Ok(slice)
    }

    #[inline]
    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N], ProtoError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.bytes(N)?);
        Ok(out)
    }

    #[inline]
    pub fn u8(&mut self) -> Result<u8, ProtoError> {
        Ok(self.array::<1>()?[0])
    }

    /// [`Reader::u16`] without a `Result` (see [`get_integer`] for why):
    /// for bytes already validated.
    #[inline(always)]
    pub(crate) fn try_u16(&mut self) -> Option<u16> {
        let &[a, b] = self.bytes.get(self.pos..self.pos + 2)? else {
            return None;
        };
        self.pos += 2;
        Some(u16::from_le_bytes([a, b]))
    }

    #[inline]
    pub fn u16(&mut self) -> Result<u16, ProtoError> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    #[inline]
    pub fn u32(&mut self) -> Result<u32, ProtoError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    #[inline]
    pub fn u64(&mut self) -> Result<u64, ProtoError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    #[inline]
    pub fn i64(&mut self) -> Result<i64, ProtoError> {
        Ok(i64::from_le_bytes(self.array()?))
    }

    /// A `u32` length followed by that many bytes.
    pub fn len32_bytes(&mut self) -> Result<&'a [u8], ProtoError> {
        let len = self.u32()? as usize;
        self.bytes(len)
    }

    /// An error for a field whose value is not one of the known ones, at
    /// `offset`.
    pub fn bad_field(&self, offset: usize, field: &'static str, value: u64) -> ProtoError {
        ProtoError::BadField {
            what: self.what,
            offset,
            field,
            value,
        }
    }

    /// Checks a two-byte magic and a one-byte format version.
    pub(crate) fn header(&mut self, magic: [u8; 2], version: u8) -> Result<(), ProtoError> {
        let found = self.array::<2>()?;
        if found != magic {
            return Err(ProtoError::BadMagic {
                what: self.what,
                found,
                expected: magic,
            });
        }
        let given = self.u8()?;
        if given != version {
            return Err(ProtoError::UnsupportedVersion {
                what: self.what,
                version: given,
                known: version,
            });
        }
        Ok(())
    }

    /// Refuses bytes after the end of the structure.
    pub(crate) fn finish(&self) -> Result<(), ProtoError> {
        if self.remaining() != 0 {
            return Err(ProtoError::TrailingBytes {
                what: self.what,
                bytes: self.remaining(),
            });
        }
        Ok(())
    }

    /// A count that cannot be above `max`.
    pub(crate) fn limit(
        &self,
        field: &'static str,
        value: usize,
        max: usize,
    ) -> Result<(), ProtoError> {
        if value > max {
            return Err(ProtoError::OverLimit {
                what: self.what,
                field,
                value: value as u64,
                max: max as u64,
            });
        }
        Ok(())
    }
}

/// Appends one value (see the module doc). Panics only on a string, byte
/// string or blob head over 4 GiB, which no batch can hold.
/// [`put_value`] of a `ValueRef::Int`, in one copy.
#[inline]
pub fn put_int(out: &mut Vec<u8>, x: i64) {
    put_tagged_word(out, TAG_INT, x as u64);
}

/// Bytes of an encoded integer (signed or unsigned): the tag and 8 bytes.
pub const INTEGER_VALUE_BYTES: usize = 1 + 8;

/// [`put_value`] of a `ValueRef::UInt`, in one copy.
#[inline]
pub fn put_uint(out: &mut Vec<u8>, x: u64) {
    put_tagged_word(out, TAG_UINT, x);
}

/// The bytes [`put_int`] (`signed`, `x` the two's complement) or
/// [`put_uint`] appends: for a writer that sized its buffer for a row of
/// integers once.
#[inline]
pub fn integer_value(signed: bool, x: u64) -> [u8; INTEGER_VALUE_BYTES] {
    let [a, b, c, d, e, f, g, h] = x.to_le_bytes();
    let tag = if signed { TAG_INT } else { TAG_UINT };
    [tag, a, b, c, d, e, f, g, h]
}

#[inline]
fn put_tagged_word(out: &mut Vec<u8>, tag: u8, x: u64) {
    let [a, b, c, d, e, f, g, h] = x.to_le_bytes();
    out.extend_from_slice(&[tag, a, b, c, d, e, f, g, h]);
}

/// A string value from bytes its holder keeps as UTF-8 (a row store's
/// text columns), not checked again here: every reader of a batch checks
/// each string it decodes, and a check here too was 4 % of a data node's
/// instructions under sysbench's ranges of CHAR(120).
#[inline]
pub fn put_text_bytes(out: &mut Vec<u8>, utf8: &[u8]) {
    let len = u32::try_from(utf8.len()).expect("a value over 4 GiB cannot be in a batch");
    out.push(TAG_STR);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(utf8);
}

pub fn put_value(out: &mut Vec<u8>, v: ValueRef<'_>) {
    let len32 = |len: usize| u32::try_from(len).expect("a value over 4 GiB cannot be in a batch");
    match v {
        ValueRef::Null => out.push(TAG_NULL),
        ValueRef::Int(x) => put_int(out, x),
        ValueRef::UInt(x) => put_uint(out, x),
        ValueRef::Float(x) => {
            out.push(TAG_FLOAT);
            out.extend_from_slice(&x.to_bits().to_le_bytes());
        }
        ValueRef::Double(x) => {
            out.push(TAG_DOUBLE);
            out.extend_from_slice(&x.to_bits().to_le_bytes());
        }
        ValueRef::Decimal(d) => {
            out.push(TAG_DECIMAL);
            let len_at = out.len();
            out.push(0);
            write!(out, "{d}").expect("writing to a Vec cannot fail");
            let len = out.len() - len_at - 1;
            assert!(
                len <= DECIMAL_TEXT_BYTES_MAX,
                "a Decimal's text is at most {DECIMAL_TEXT_BYTES_MAX} bytes"
            );
            out[len_at] = len as u8;
        }
        ValueRef::Str(s) => put_text_bytes(out, s.as_bytes()),
        ValueRef::Bytes(b) => {
            out.push(TAG_BYTES);
            out.extend_from_slice(&len32(b.len()).to_le_bytes());
            out.extend_from_slice(b);
        }
        ValueRef::Date(d) => {
            out.push(TAG_DATE);
            put_date(out, d);
        }
        ValueRef::DateTime(t) => {
            out.push(TAG_DATETIME);
            put_date(out, t.date);
            out.extend_from_slice(&[t.hour, t.minute, t.second]);
            out.extend_from_slice(&t.micros.to_le_bytes());
        }
        ValueRef::Timestamp(x) => {
            out.push(TAG_TIMESTAMP);
            out.extend_from_slice(&x.to_le_bytes());
        }
        ValueRef::Bit(x) => {
            out.push(TAG_BIT);
            out.extend_from_slice(&x.to_le_bytes());
        }
        ValueRef::BlobHead {
            total_bytes,
            inline,
        } => {
            out.push(TAG_BLOB_HEAD);
            out.extend_from_slice(&total_bytes.to_le_bytes());
            out.extend_from_slice(&len32(inline.len()).to_le_bytes());
            out.extend_from_slice(inline);
        }
    }
}

fn put_date(out: &mut Vec<u8>, d: Date) {
    out.extend_from_slice(&d.year.to_le_bytes());
    out.extend_from_slice(&[d.month, d.day]);
}

fn get_date(r: &mut Reader<'_>) -> Result<Date, ProtoError> {
    let year = r.u16()?;
    let month = r.u8()?;
    let day = r.u8()?;
    Ok(Date::new(year, month, day))
}

/// Reads one value, borrowing strings and bytes from the buffer. Allocates
/// nothing unless it fails.
#[inline]
pub fn get_value<'a>(r: &mut Reader<'a>) -> Result<ValueRef<'a>, ProtoError> {
    match get_integer(r) {
        Some(v) => Ok(v),
        None => get_value_general(r),
    }
}

/// Reads an integer value, the most of what ops and rows carry
/// (flexAsynch's rows are all INT UNSIGNED); `None` (nothing read) for
/// any other tag or too few bytes. Returns no `Result`: a `Result` with a
/// `ProtoError` is built in memory, and reading it back costs a
/// store-forwarding stall per value in the loops that decode rows.
#[inline(always)]
pub(crate) fn get_integer<'a>(r: &mut Reader<'a>) -> Option<ValueRef<'a>> {
    let &[tag, a, b, c, d, e, f, g, h] = r.bytes.get(r.pos..r.pos + 9)? else {
        return None;
    };
    let v = [a, b, c, d, e, f, g, h];
    let value = match tag {
        TAG_UINT => ValueRef::UInt(u64::from_le_bytes(v)),
        TAG_INT => ValueRef::Int(i64::from_le_bytes(v)),
        _ => return None,
    };
    r.pos += 9;
    Some(value)
}

/// A batch's header (checked against `magic` and `version`), its item
/// count (`count_field`, at most `count_max`) and every item, read by
/// `parse` and handed to `each`; the whole buffer must be read. Returns the
/// count. What op and result batches share.
pub(crate) fn read_batch<'a, T>(
    bytes: &'a [u8],
    what: &'static str,
    (magic, version): ([u8; 2], u8),
    (count_field, count_max): (&'static str, usize),
    mut parse: impl FnMut(&mut Reader<'a>) -> Result<T, ProtoError>,
    mut each: impl FnMut(T),
) -> Result<usize, ProtoError> {
    let mut r = Reader::new(bytes, what);
    r.limit("batch bytes", bytes.len(), crate::ops::BATCH_BYTES_MAX)?;
    r.header(magic, version)?;
    let count = r.u32()? as usize;
    r.limit(count_field, count, count_max)?;
    for _ in 0..count {
        each(parse(&mut r)?);
    }
    r.finish()?;
    Ok(count)
}

/// Bytes of the fixed-width values [`Reader::skip_fixed_pairs`] steps over,
/// by tag; `None` for a tag whose value has a length or needs checking.
#[inline(always)]
fn fixed_width(tag: u8) -> Option<usize> {
    match tag {
        TAG_NULL => Some(0),
        TAG_INT | TAG_UINT | TAG_DOUBLE | TAG_TIMESTAMP | TAG_BIT => Some(8),
        TAG_FLOAT => Some(4),
        _ => None,
    }
}

impl<'a> Reader<'a> {
    /// Steps over up to `count` (u16 column, value) pairs of an op while
    /// each value is one of fixed width and whole; returns how many. An
    /// update of a key-value table is such pairs only: one bounds check and
    /// one tag test per pair, where the general read (`u16`, `skip_value`)
    /// returns a `Result` for each field. The caller reads what is left,
    /// and reports what is wrong, the general way.
    pub(crate) fn skip_fixed_pairs(&mut self, count: usize) -> usize {
        self.skip_fixed::<2>(count)
    }

    /// [`Reader::skip_fixed_pairs`] for values without column numbers (a
    /// row's values in a result).
    pub(crate) fn skip_fixed_values(&mut self, count: usize) -> usize {
        self.skip_fixed::<0>(count)
    }

    /// Steps over up to `count` fixed-width values, each after `PREFIX`
    /// bytes; see [`Reader::skip_fixed_pairs`].
    #[inline(always)]
    fn skip_fixed<const PREFIX: usize>(&mut self, count: usize) -> usize {
        let bytes = self.bytes;
        // Integers (most values of key-value tables) first, in chunks of
        // their fixed size: a tag test each, the bounds checked per chunk
        // by `chunks_exact`. The general loop below takes what follows.
        let mut stepped = 0;
        if count == 0 {
            // An op of no values (every read): not even the chunks' setup.
            return 0;
        }
        let integer_bytes = PREFIX + 1 + 8;
        for chunk in bytes[self.pos..].chunks_exact(integer_bytes).take(count) {
            if chunk[PREFIX].wrapping_sub(TAG_INT) > TAG_UINT - TAG_INT {
                break;
            }
            stepped += 1;
        }
        let mut pos = self.pos + stepped * integer_bytes;
        while stepped < count {
            let Some(&tag) = bytes.get(pos + PREFIX) else {
                break;
            };
            // Integers first, as a branch: predicted, the next value's address
            // does not wait for this tag's load (a table lookup would).
            let width = if tag == TAG_UINT || tag == TAG_INT {
                8
            } else if let Some(width) = fixed_width(tag) {
                width
            } else {
                break;
            };
            let next = pos + PREFIX + 1 + width;
            if next > bytes.len() {
                break;
            }
            pos = next;
            stepped += 1;
        }
        self.pos = pos;
        stepped
    }
}

impl Reader<'_> {
    /// Reads up to `count` (u16 column, integer) pairs, handing each to
    /// `apply` as `(column, Ok(signed) | Err(unsigned))` while it returns
    /// true; returns how many it took. Stops, having read nothing of it, at
    /// the pair `apply` refuses, at one that is not an integer, or at too
    /// few bytes. Each pair is a fixed [`INTEGER_PAIR_BYTES`]: one bounds
    /// check and one tag test, with nothing kept in memory between pairs.
    #[inline(always)]
    pub(crate) fn integer_pairs(
        &mut self,
        count: usize,
        mut apply: impl FnMut(u16, Result<i64, u64>) -> bool,
    ) -> usize {
        // The whole pairs there are, at most `count`: the loop below then
        // reads fixed-size chunks with no bounds check of its own.
        let whole = (self.bytes.len() - self.pos) / INTEGER_PAIR_BYTES;
        let end = self.pos + count.min(whole) * INTEGER_PAIR_BYTES;
        let (pairs, _) = self.bytes[self.pos..end].as_chunks::<INTEGER_PAIR_BYTES>();
        let mut taken = 0;
        for &[c0, c1, tag, v @ ..] in pairs {
            let value = match tag {
                TAG_UINT => Err(u64::from_le_bytes(v)),
                TAG_INT => Ok(i64::from_le_bytes(v)),
                _ => break,
            };
            if !apply(u16::from_le_bytes([c0, c1]), value) {
                break;
            }
            taken += 1;
        }
        self.pos += taken * INTEGER_PAIR_BYTES;
        taken
    }
}

/// Bytes of a (u16 column, integer) pair: the column, the tag, the `i64`
/// or `u64`.
pub(crate) const INTEGER_PAIR_BYTES: usize = 2 + 1 + 8;

/// [`get_value`] for every tag.
#[inline(never)]
pub(crate) fn get_value_general<'a>(r: &mut Reader<'a>) -> Result<ValueRef<'a>, ProtoError> {
    let at = r.position();
    let tag = r.u8()?;
    Ok(match tag {
        TAG_NULL => ValueRef::Null,
        TAG_INT => ValueRef::Int(r.i64()?),
        TAG_UINT => ValueRef::UInt(r.u64()?),
        TAG_FLOAT => ValueRef::Float(f32::from_bits(r.u32()?)),
        TAG_DOUBLE => ValueRef::Double(f64::from_bits(r.u64()?)),
        TAG_DECIMAL => {
            let len = usize::from(r.u8()?);
            let text_at = r.position();
            r.limit("decimal text length", len, DECIMAL_TEXT_BYTES_MAX)?;
            let text = r.bytes(len)?;
            let bad = || ProtoError::BadDecimal {
                what: r.what(),
                offset: text_at,
            };
            let text = std::str::from_utf8(text).map_err(|_| bad())?;
            ValueRef::Decimal(Decimal::parse(text).map_err(|_| bad())?)
        }
        TAG_STR => {
            let text_at = r.position() + 4;
            let bytes = r.len32_bytes()?;
            let text = std::str::from_utf8(bytes).map_err(|_| ProtoError::BadUtf8 {
                what: r.what(),
                offset: text_at,
            })?;
            ValueRef::Str(text)
        }
        TAG_BYTES => ValueRef::Bytes(r.len32_bytes()?),
        TAG_DATE => ValueRef::Date(get_date(r)?),
        TAG_DATETIME => {
            let date = get_date(r)?;
            let hour = r.u8()?;
            let minute = r.u8()?;
            let second = r.u8()?;
            let micros = r.u32()?;
            ValueRef::DateTime(DateTime::new(date, hour, minute, second, micros))
        }
        TAG_TIMESTAMP => ValueRef::Timestamp(r.i64()?),
        TAG_BIT => ValueRef::Bit(r.u64()?),
        TAG_BLOB_HEAD => {
            let total_bytes = r.u64()?;
            let inline = r.len32_bytes()?;
            ValueRef::BlobHead {
                total_bytes,
                inline,
            }
        }
        other => return Err(r.bad_field(at, "value tag", u64::from(other))),
    })
}

/// Checks that a value fits a column of `table`: storage's own check
/// ([`ValueRef::check`]: type, range, length, precision, nullability), with
/// the table's name added to its error.
#[inline]
pub fn check_value(table: &str, column: &Column, v: ValueRef<'_>) -> Result<(), ProtoError> {
    v.check(column).map_err(|source| ProtoError::Value {
        table: table.to_string(),
        source,
    })
}

/// Bytes of a row's framing: u16 value count, u16 key count, u32 value
/// bytes, u32 key bytes.
pub(crate) const ROW_FRAME_BYTES: usize = 2 + 2 + 4 + 4;

/// A row being written into a result or row batch: its values, then its
/// key values, behind a frame (counts and byte lengths) filled in when it
/// ends. Shared by `results::ResultWriter` and `scan::RowBatchWriter`,
/// whose rows differ only in what comes before the frame.
///
/// The byte lengths let a reader that only passes a batch on (the TC)
/// step over a row without reading its values.
#[derive(Debug)]
pub(crate) struct OpenRow {
    /// Where the row's bytes begin: a row that breaks a limit is cut here.
    pub(crate) start: usize,
    frame_at: usize,
    values: usize,
    keys: usize,
    /// Where the key values begin, once the first is written.
    keys_at: Option<usize>,
}

impl OpenRow {
    /// Reserves the frame at the end of `out`; the row began at `start`.
    pub(crate) fn begin(out: &mut Vec<u8>, start: usize) -> OpenRow {
        let frame_at = out.len();
        out.extend_from_slice(&[0u8; ROW_FRAME_BYTES]);
        OpenRow {
            start,
            frame_at,
            values: 0,
            keys: 0,
            keys_at: None,
        }
    }

    pub(crate) fn value(&mut self, out: &mut Vec<u8>, v: ValueRef<'_>) {
        assert!(
            self.keys_at.is_none(),
            "a row's values come before its key values"
        );
        self.values += 1;
        put_value(out, v);
    }

    pub(crate) fn key(&mut self, out: &mut Vec<u8>, v: ValueRef<'_>) {
        self.keys_at.get_or_insert(out.len());
        self.keys += 1;
        put_value(out, v);
    }

    /// Appends `values` values that `encode` writes at the end of `out`,
    /// each as [`put_value`] encodes it (a row copied out of storage in its
    /// wire encoding, not value by value); key values may follow.
    pub(crate) fn encoded_values(
        &mut self,
        out: &mut Vec<u8>,
        values: usize,
        encode: impl FnOnce(&mut Vec<u8>),
    ) {
        assert!(
            self.keys_at.is_none() && self.values == 0,
            "encoded values are all of a row's values, before its key values"
        );
        let at = out.len();
        encode(out);
        debug_assert!(
            each_value(&out[at..], values, "encoded values", |_| ()).is_ok(),
            "`encode` wrote exactly {values} values"
        );
        self.values = values;
    }

    /// Appends values and key values already encoded by [`put_value`] (as
    /// read from another batch), `values` of them and `keys` of them.
    pub(crate) fn encoded(
        &mut self,
        out: &mut Vec<u8>,
        (values, value_bytes): EncodedValues<'_>,
        (keys, key_bytes): EncodedValues<'_>,
    ) {
        assert!(
            self.keys_at.is_none() && self.values == 0,
            "encoded parts make a whole row"
        );
        debug_assert!(
            each_value(value_bytes, values, "encoded values", |_| ()).is_ok()
                && each_value(key_bytes, keys, "encoded keys", |_| ()).is_ok(),
            "encoded parts hold exactly their values"
        );
        self.values = values;
        out.extend_from_slice(value_bytes);
        if keys > 0 {
            self.keys_at = Some(out.len());
            self.keys = keys;
            out.extend_from_slice(key_bytes);
        }
    }

    /// The counts and lengths that break their limits, as (field, value).
    pub(crate) fn over_limit(&self, out: &[u8]) -> Option<(&'static str, usize)> {
        let (value_bytes, key_bytes) = self.byte_lengths(out);
        [
            ("values of one row", self.values, usize::from(u16::MAX)),
            ("key values of one row", self.keys, usize::from(u16::MAX)),
            ("value bytes of one row", value_bytes, u32::MAX as usize),
            ("key bytes of one row", key_bytes, u32::MAX as usize),
        ]
        .into_iter()
        .find(|&(_, value, max)| value > max)
        .map(|(field, value, _)| (field, value))
    }

    fn byte_lengths(&self, out: &[u8]) -> (usize, usize) {
        let values_at = self.frame_at + ROW_FRAME_BYTES;
        let keys_at = self.keys_at.unwrap_or(out.len());
        (keys_at - values_at, out.len() - keys_at)
    }

    /// Writes the frame; the row must be within its limits.
    pub(crate) fn finish(&self, out: &mut [u8]) {
        debug_assert!(self.over_limit(out).is_none());
        let (value_bytes, key_bytes) = self.byte_lengths(out);
        let at = self.frame_at;
        out[at..at + 2].copy_from_slice(&(self.values as u16).to_le_bytes());
        out[at + 2..at + 4].copy_from_slice(&(self.keys as u16).to_le_bytes());
        out[at + 4..at + 8].copy_from_slice(&(value_bytes as u32).to_le_bytes());
        out[at + 8..at + 12].copy_from_slice(&(key_bytes as u32).to_le_bytes());
    }
}

/// Values already encoded by [`put_value`]: how many, and their bytes.
pub type EncodedValues<'a> = (usize, &'a [u8]);

/// How much of a row a reader checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Check {
    /// Every value: tags, lengths, UTF-8, decimal syntax.
    Values,
    /// The frame only: counts and byte lengths against the bytes present.
    Frame,
}

/// A row of a result or row batch, borrowing the batch: its values and key
/// values, each a run of encoded values.
#[derive(Clone, Copy, Debug, Default)]
pub struct RowParts<'a> {
    value_count: u16,
    key_count: u16,
    values: &'a [u8],
    keys: &'a [u8],
}

impl<'a> RowParts<'a> {
    pub fn value_count(&self) -> usize {
        usize::from(self.value_count)
    }

    pub fn key_count(&self) -> usize {
        usize::from(self.key_count)
    }

    /// The values, from a batch whose values were checked (a reader's
    /// `new`); from one checked by frame only, use [`RowParts::try_values`].
    pub fn values(&self) -> Values<'a> {
        Values {
            r: Reader::new(self.values, "row values"),
            left: self.value_count(),
        }
    }

    /// The primary-key values (key info), else none; see `values`.
    pub fn keys(&self) -> Values<'a> {
        Values {
            r: Reader::new(self.keys, "row keys"),
            left: self.key_count(),
        }
    }

    /// The values as encoded, to keep or copy without decoding them.
    pub fn encoded_values(&self) -> EncodedValues<'a> {
        (self.value_count(), self.values)
    }

    /// The key values as encoded.
    pub fn encoded_keys(&self) -> EncodedValues<'a> {
        (self.key_count(), self.keys)
    }

    /// Reads and checks every value, in order, handing each to `each`: the
    /// one pass a reader of a batch checked by frame only makes.
    pub fn try_values(&self, each: impl FnMut(ValueRef<'a>)) -> Result<(), ProtoError> {
        each_value(self.values, self.value_count(), "row values", each)
    }

    /// [`RowParts::try_values`] for the key values.
    pub fn try_keys(&self, each: impl FnMut(ValueRef<'a>)) -> Result<(), ProtoError> {
        each_value(self.keys, self.key_count(), "row keys", each)
    }

    /// Checks the values and the key values (as [`RowParts::try_values`]
    /// and `try_keys` would) without decoding them: for rows whose values
    /// are kept encoded and decoded later by [`checked_values`].
    pub fn check(&self) -> Result<(), ProtoError> {
        check_all(self.values, self.value_count(), "row values")?;
        check_all(self.keys, self.key_count(), "row keys")
    }
}

/// Decodes values already checked (by a reader's `new`, or by
/// [`RowParts::try_values`] when they arrived): `count` of them in `bytes`.
pub fn checked_values(bytes: &[u8], count: usize) -> Values<'_> {
    Values {
        r: Reader::new(bytes, "checked values"),
        left: count,
    }
}

/// [`checked_values`] that takes each string as it is, without validating
/// its UTF-8 again: for values kept encoded after their check (a client's
/// rows), decoded later, perhaps more than once.
///
/// # Safety
///
/// `bytes` must be exactly bytes whose `count` values passed
/// [`RowParts::check`] (or `try_values`), unchanged since: a string that
/// is not UTF-8 would otherwise become a `&str`.
pub unsafe fn trusted_values(bytes: &[u8], count: usize) -> TrustedValues<'_> {
    debug_assert!(
        check_all(bytes, count, "trusted values").is_ok(),
        "trusted values were checked"
    );
    TrustedValues {
        r: Reader::new(bytes, "trusted values"),
        left: count,
    }
}

/// The values of [`trusted_values`]: as [`Values`] gives them, each string
/// taken as it is (validating it a second time was a quarter of the
/// decoding of a row of sysbench's strings). A type of its own, so that
/// the decoders of requests (`Values`) carry no test for it.
#[derive(Clone, Debug)]
pub struct TrustedValues<'a> {
    r: Reader<'a>,
    left: usize,
}

impl<'a> Iterator for TrustedValues<'a> {
    type Item = ValueRef<'a>;

    #[inline]
    fn next(&mut self) -> Option<ValueRef<'a>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let r = &mut self.r;
        if let Some(v) = get_integer(r) {
            return Some(v);
        }
        if r.bytes.get(r.pos) != Some(&TAG_STR) {
            return crate::ops::validated(get_value_general(r));
        }
        r.pos += 1;
        let text = crate::ops::validated(r.len32_bytes())?;
        // SAFETY: `trusted_values`' caller promises that these bytes
        // passed `check_all`, which validated this string's UTF-8 (as
        // `get_value_general` does), and a `Reader` never changes its
        // bytes.
        Some(ValueRef::Str(unsafe {
            std::str::from_utf8_unchecked(text)
        }))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.left))
    }
}

/// Checks one value at `r` and steps over it: exactly what [`get_value`]
/// accepts, without building the value. Fixed-width values (integers,
/// floats, timestamps, bits) need only their length checked; the rest go
/// through `get_value`.
#[inline]
pub(crate) fn skip_value(r: &mut Reader<'_>) -> Result<(), ProtoError> {
    let Some(width) = r.bytes.get(r.pos).and_then(|&tag| fixed_width(tag)) else {
        return get_value(r).map(|_| ());
    };
    if r.bytes.len() - r.pos > width {
        r.pos += 1 + width;
        Ok(())
    } else {
        get_value(r).map(|_| ())
    }
}

/// Integer values read in one step of [`integer_tags_only`].
const INTEGER_VALUES_PER_STEP: usize = 8;

/// Whether every value of `bytes`, integers back to back (a multiple of
/// `INTEGER_VALUE_BYTES`), has an integer's tag. A step takes several
/// values at fixed offsets of a fixed-size group (a load, a subtraction and
/// an or each, no bounds check), so a wide row costs little more than
/// reading its tags.
#[inline]
fn integer_tags_only(bytes: &[u8]) -> bool {
    debug_assert_eq!(bytes.len() % INTEGER_VALUE_BYTES, 0);
    const GROUP_BYTES: usize = INTEGER_VALUES_PER_STEP * INTEGER_VALUE_BYTES;
    let mut others = 0u8;
    let (groups, rest) = bytes.as_chunks::<GROUP_BYTES>();
    for group in groups {
        for k in 0..INTEGER_VALUES_PER_STEP {
            others |= group[k * INTEGER_VALUE_BYTES].wrapping_sub(TAG_INT);
        }
    }
    for value in rest.chunks_exact(INTEGER_VALUE_BYTES) {
        others |= value[0].wrapping_sub(TAG_INT);
    }
    others & !1 == 0
}

/// Checks `count` values in `bytes`, which must hold exactly them.
fn check_all(bytes: &[u8], count: usize, what: &'static str) -> Result<(), ProtoError> {
    // Integers only (a row of a key-value table), known from the length
    // and every value's tag, tested at a fixed stride: no value's position
    // waits for the one before it, and no branch is taken per value (the
    // tags' distances from `TAG_INT` are 0 or 1 exactly when every bit
    // but the lowest is clear in all of them).
    if bytes.len() == count * INTEGER_VALUE_BYTES && integer_tags_only(bytes) {
        return Ok(());
    }
    let mut r = Reader::new(bytes, what);
    let fixed = r.skip_fixed_values(count);
    for _ in fixed..count {
        skip_value(&mut r)?;
    }
    r.finish()
}

fn each_value<'a>(
    bytes: &'a [u8],
    count: usize,
    what: &'static str,
    mut each: impl FnMut(ValueRef<'a>),
) -> Result<(), ProtoError> {
    let mut r = Reader::new(bytes, what);
    for _ in 0..count {
        each(get_value(&mut r)?);
    }
    r.finish()
}

/// Reads a row's frame and parts at `r`, checking as asked.
pub(crate) fn get_row<'a>(r: &mut Reader<'a>, check: Check) -> Result<RowParts<'a>, ProtoError> {
    // The frame in one read: each field is then a plain load.
    let frame = r.array::<ROW_FRAME_BYTES>()?;
    let value_count = u16::from_le_bytes([frame[0], frame[1]]);
    let key_count = u16::from_le_bytes([frame[2], frame[3]]);
    let value_bytes = u32::from_le_bytes([frame[4], frame[5], frame[6], frame[7]]) as usize;
    let key_bytes = u32::from_le_bytes([frame[8], frame[9], frame[10], frame[11]]) as usize;
    let values_at = r.position();
    let values = r.bytes(value_bytes)?;
    let keys = r.bytes(key_bytes)?;
    if check == Check::Values {
        let mut inner = Reader::new(r.whole(), r.what());
        inner.pos = values_at;
        for (count, bytes, field) in [
            (value_count, value_bytes, "row value bytes"),
            (key_count, key_bytes, "row key bytes"),
        ] {
            let at = inner.position();
            for _ in 0..count {
                skip_value(&mut inner)?;
            }
            if inner.position() - at != bytes {
                return Err(ProtoError::BadLength {
                    what: r.what(),
                    offset: at,
                    field,
                    declared: bytes,
                    actual: inner.position() - at,
                });
            }
        }
    }
    Ok(RowParts {
        value_count,
        key_count,
        values,
        keys,
    })
}
