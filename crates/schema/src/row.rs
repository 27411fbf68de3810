//! The row format: how one row's values become the bytes the row store
//! keeps, and how single columns are read back without decoding the rest.
//!
//! A row is two byte strings, kept by the row store side by side or apart
//! as it likes: a **fixed part** of the same size for every row of the
//! table, and a **var part** whose size depends on the row. Both are part of
//! the checkpoint format; any change here is a format change.
//!
//! # Fixed part (`RowLayout::fixed_bytes()` bytes)
//!
//! ```text
//! offset 0                      NULL bitmap: ceil(nullable columns / 8) bytes. The k-th
//!                               nullable column (in column order) owns bit k % 8 (LSB
//!                               first) of byte k / 8; 1 = NULL. Unused bits are 0.
//! offset null_bitmap_bytes      every fixed-size column, in column order, back to back
//!                               (no alignment), each in its stored form below. A NULL
//!                               column's bytes are all 0.
//! ```
//!
//! Fixed-size columns are stored in the form their keys use, so that an
//! index key is a copy of them:
//!
//! | type | bytes | stored form |
//! | --- | --- | --- |
//! | TINYINT/SMALLINT/MEDIUMINT/INT/BIGINT | 1/2/3/4/8 | big-endian; signed types two's complement with the sign bit flipped |
//! | FLOAT / DOUBLE | 4 / 8 | IEEE bits, big-endian, as given (keys re-encode them) |
//! | DECIMAL(p,s) | MySQL's | MySQL's binary DECIMAL, see [`super::decimal`] |
//! | BINARY(n) | n | the bytes, padded with 0x00 |
//! | DATE | 3 | big-endian `year × 512 + month × 32 + day` |
//! | DATETIME(fsp) | 5 + ⌈fsp/2⌉ | big-endian `(year × 13 + month) << 22 | day << 17 | hour << 12 | minute << 6 | second`, then the fraction |
//! | TIMESTAMP(fsp) | 4 + ⌈fsp/2⌉ | big-endian seconds since 1970-01-01 UTC, then the fraction |
//! | BIT(n) | ⌈n/8⌉ | big-endian |
//!
//! The fraction of DATETIME/TIMESTAMP is big-endian in ⌈fsp/2⌉ bytes:
//! hundredths of a second for fsp 1–2, units of 100 µs for 3–4, µs for 5–6
//! (MySQL's DATETIME2/TIMESTAMP2 fraction).
//!
//! # Var part
//!
//! Empty when the table has no var-size column. Otherwise, with V var-size
//! columns (CHAR, VARCHAR, VARBINARY, BLOB, TEXT):
//!
//! ```text
//! offset 0        V × u16 little-endian: the end of each var column's data, counted from
//!                 offset 2V; column i's data is [end(i-1), end(i)) with end(-1) = 0.
//! offset 2V       the data of the var columns, in column order. A NULL column has none.
//! ```
//!
//! CHAR and VARCHAR data are UTF-8 bytes (CHAR without trailing spaces, as
//! MySQL gives CHAR values back); VARBINARY data are the bytes. BLOB and TEXT
//! data are the head: the total length as u64 little-endian, then its first
//! `min(total, BLOB_INLINE_BYTES)` bytes; the rest is in the parts table
//! ([`super::table::TableDef::blob_parts_table`]).
//!
//! A row of 25 INT UNSIGNED NOT NULL columns is 100 bytes of fixed part and
//! an empty var part: no per-row overhead here at all.

use super::decimal::Decimal;
use super::table::{TableDef, ROW_BYTES_MAX};
use super::types::{
    fsp_bytes, ColumnType, Storage, BLOB_INLINE_BYTES, BLOB_LENGTH_BYTES, INTEGER_CODE_UNSIGNED,
    TIMESTAMP_SECONDS_MAX,
};
use super::value::Value;
use super::value::{
    check_value, micros_fit_fsp, Date, DateTime, ValueError, ValueRef, MICROS_PER_SECOND,
};

/// Bytes of one var-part offset entry.
const VAR_OFFSET_BYTES: usize = 2;
// Var-part offsets are u16: every var part must fit below 64 KiB.
const _: () = assert!(ROW_BYTES_MAX < u16::MAX as usize);

/// Where one column of the layout lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    Fixed { offset: usize, bytes: usize },
    Var { index: usize },
}

#[derive(Clone, Debug)]
struct Slot {
    name: String,
    ty: ColumnType,
    nullable: bool,
    /// Bit number in the NULL bitmap; meaningful only for nullable columns.
    null_bit: usize,
    place: Place,
    /// The range of an integer column, kept here for the encoder's fast path.
    integer_range: Option<(i128, i128)>,
    /// In the primary key: an update may not change it.
    key: bool,
}

/// Where one column of an all-integer table lies: a compact copy of its
/// slot for [`RowLayout::integer_cells`] (8 bytes where a `Slot` is over a
/// hundred, so a row's columns are read from one or two cache lines).
#[derive(Clone, Copy, Debug)]
struct IntegerSlot {
    offset: u16,
    bytes: u8,
    /// `ColumnType::integer_code`: width and sign.
    code: u8,
    /// The NULL bit of a nullable column.
    null_bit: Option<u16>,
}

impl IntegerSlot {
    fn signed(&self) -> bool {
        self.code & INTEGER_CODE_UNSIGNED == 0
    }
}

/// How an update writes an integer value into one column, made once per
/// layout for every column: a compare, an add and a store per value.
///
/// A column's stored form is its value minus the column's minimum (the
/// sign bit flipped is the same as adding 2^(width-1)), so `bias` is
/// minus that minimum. An `Int` value that is below the minimum wraps,
/// added to `bias`, far above `int_stored_max` (whose bound stays below
/// 2^63 for every column that has values below its minimum).
#[derive(Clone, Copy, Debug, Default)]
struct IntegerWrite {
    /// Added (mod 2^64) to a value to give its stored form.
    bias: u64,
    /// The largest `UInt` value that fits.
    uint_max: u64,
    /// The largest stored form of an `Int` value that fits.
    int_stored_max: u64,
    offset: u16,
    /// The NULL bit plus one of a nullable column; 0 for NOT NULL.
    null_bit_plus_one: u16,
    /// Width in bytes; 0 for a column this path does not write (not an
    /// integer, or in the primary key): the general path says why.
    bytes: u8,
}

impl IntegerWrite {
    fn new(slot: &Slot) -> IntegerWrite {
        let (Some((min, max)), Place::Fixed { offset, bytes }, false) =
            (slot.integer_range, slot.place, slot.key)
        else {
            return IntegerWrite::default();
        };
        let (Ok(offset), Ok(null_bit_plus_one), Ok(bytes)) = (
            u16::try_from(offset),
            u16::try_from(if slot.nullable { slot.null_bit + 1 } else { 0 }),
            u8::try_from(bytes),
        ) else {
            return IntegerWrite::default();
        };
        let write = IntegerWrite {
            bias: (-min) as u64,
            uint_max: max as u64,
            int_stored_max: (max.min(i128::from(i64::MAX)) - min) as u64,
            offset,
            null_bit_plus_one,
            bytes,
        };
        debug_assert!(min >= i128::from(i64::MIN) && max <= i128::from(u64::MAX) && max > 0);
        debug_assert!(min == i128::from(i64::MIN) || write.int_stored_max < 1 << 63);
        write
    }
}

/// Rows of at most this many fixed bytes have [`RowLayout::integer_reads`]
/// (a power of two: a column's offset is masked to it, which proves the
/// 8-byte load in bounds without a check).
pub const INTEGER_READ_ROW_BYTES_MAX: usize = 256;
const PADDED_ROW_BYTES: usize = INTEGER_READ_ROW_BYTES_MAX + 8;
const _: () = assert!(INTEGER_READ_ROW_BYTES_MAX.is_power_of_two());

/// A row's fixed bytes followed by zeros, so that every column of it can be
/// loaded as 8 bytes ([`RowLayout::padded`]).
pub struct PaddedRow([u8; PADDED_ROW_BYTES]);

/// How a read copies one column of an all-integer table without NULLs
/// out of a row ([`RowLayout::integer_reads`]): an 8-byte load of its
/// stored (big-endian, sign-flipped) bytes, a shift and an add.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IntegerRead {
    offset: u16,
    /// 64 minus the column's width in bits.
    shift: u8,
    signed: bool,
    /// Added (mod 2^64) to the stored form to give the value: minus
    /// 2^(width-1) for a signed column, 0 for an unsigned one.
    bias: u64,
}

impl IntegerRead {
    fn new(slot: &IntegerSlot) -> IntegerRead {
        let signed = slot.signed();
        let width_bits = u32::from(slot.bytes) * 8;
        debug_assert!((8..=64).contains(&width_bits));
        IntegerRead {
            offset: slot.offset,
            shift: (64 - width_bits) as u8,
            signed,
            bias: if signed {
                (1u64 << (width_bits - 1)).wrapping_neg()
            } else {
                0
            },
        }
    }

    /// Whether the column is signed: its value is an `i64`, else a `u64`.
    #[inline]
    pub fn signed(&self) -> bool {
        self.signed
    }

    /// The column's value in `row` (the row's [`RowLayout::padded`] form):
    /// a `u64`, or an `i64`'s two's complement when [`IntegerRead::signed`].
    #[inline]
    pub fn load(&self, row: &PaddedRow) -> u64 {
        // Below INTEGER_READ_ROW_BYTES_MAX by construction; the mask lets
        // the compiler see it.
        let at = usize::from(self.offset) & (INTEGER_READ_ROW_BYTES_MAX - 1);
        let word: [u8; 8] = row.0[at..at + 8].try_into().expect("8 bytes");
        (u64::from_be_bytes(word) >> self.shift).wrapping_add(self.bias)
    }
}

/// One column of a row of an all-integer table ([`RowLayout::integer_cells`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntegerCell {
    Null,
    Int(i64),
    UInt(u64),
}

/// The changes of an update, `(column, value)` pairs in order, as
/// [`RowLayout::update_refs`] and `Fragment::update_refs` take them.
pub trait ColumnChanges<'v>: Iterator<Item = (usize, ValueRef<'v>)> + Clone {
    /// Hands the leading changes whose values are integers to `apply`, in
    /// order, as `(column, Ok(signed) | Err(unsigned))`, while it returns
    /// true: the change it refuses, or the first that is not an integer,
    /// is then the iterator's next, and so is every change after it. A
    /// source may hand none (the default): the iterator gives them all.
    /// What an update of a key-value table spends its time on, so a source
    /// that reads its pairs from bytes reads them here in one tight loop.
    #[inline(always)]
    fn integer_prefix(&mut self, apply: impl FnMut(usize, Result<i64, u64>) -> bool) {
        let _ = apply;
    }
}

/// [`ColumnChanges`] of owned values (`RowLayout::update`): all through
/// the iterator.
#[derive(Clone)]
pub struct Listed<'v>(pub std::slice::Iter<'v, (usize, Value)>);

impl<'v> Iterator for Listed<'v> {
    type Item = (usize, ValueRef<'v>);

    fn next(&mut self) -> Option<(usize, ValueRef<'v>)> {
        self.0.next().map(|(c, v)| (*c, v.as_ref()))
    }
}

impl<'v> ColumnChanges<'v> for Listed<'v> {}

/// The byte layout of one table's rows (see the module doc), computed once
/// per table version and shared by every row of it.
#[derive(Clone, Debug)]
pub struct RowLayout {
    table: String,
    slots: Vec<Slot>,
    /// Every column, when every column is an integer (as in key-value
    /// tables such as flexAsynch's): the fast path of reading a whole row.
    integers: Option<Vec<IntegerSlot>>,
    /// Every column, when every column is an integer and none is nullable:
    /// a read's values then have one size each.
    integer_reads: Option<Vec<IntegerRead>>,
    /// How an update writes an integer into each column.
    integer_writes: Vec<IntegerWrite>,
    null_bitmap_bytes: usize,
    fixed_bytes: usize,
    var_columns: usize,
    max_var_bytes: usize,
}

/// Why stored row bytes are not a row of this layout: what a checkpoint or
/// redo loader reports before it trusts bytes from disk.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RowFormatError {
    #[error("table `{table}`: fixed part is {given} bytes, the layout has {expected}")]
    FixedLength {
        table: String,
        given: usize,
        expected: usize,
    },
    #[error("table `{table}`: var part of {bytes} bytes is malformed: {problem}")]
    VarPart {
        table: String,
        bytes: usize,
        problem: &'static str,
    },
    #[error("table `{table}`: NULL bitmap has bits set beyond its {nullable} nullable columns")]
    NullBitmap { table: String, nullable: usize },
    #[error("table `{table}`, column `{column}`: stored bytes are not a {ty}: {problem}")]
    Column {
        table: String,
        column: String,
        ty: String,
        problem: &'static str,
    },
}

impl RowLayout {
    /// The layout of a table's rows. The table must be valid
    /// ([`TableDef::validate`]).
    pub fn new(table: &TableDef) -> RowLayout {
        assert!(
            !table.columns.is_empty(),
            "table `{}` has no columns",
            table.name
        );
        let nullable = table.columns.iter().filter(|c| c.nullable).count();
        let null_bitmap_bytes = nullable.div_ceil(8);
        let mut slots = Vec::with_capacity(table.columns.len());
        let mut offset = null_bitmap_bytes;
        let mut var_columns = 0;
        let mut null_bits = 0;
        let mut max_var_data = 0;
        for (c, column) in table.columns.iter().enumerate() {
            let place = match column.ty.storage() {
                Storage::Fixed { bytes } => {
                    let place = Place::Fixed { offset, bytes };
                    offset += bytes;
                    place
                }
                Storage::Var { max_bytes } => {
                    var_columns += 1;
                    max_var_data += max_bytes;
                    Place::Var {
                        index: var_columns - 1,
                    }
                }
            };
            slots.push(Slot {
                name: column.name.clone(),
                ty: column.ty,
                nullable: column.nullable,
                null_bit: null_bits,
                place,
                integer_range: column.ty.integer_range(),
                key: table.primary_key.contains(&c),
            });
            null_bits += usize::from(column.nullable);
        }
        let max_var_bytes = if var_columns == 0 {
            0
        } else {
            var_columns * VAR_OFFSET_BYTES + max_var_data
        };
        assert!(
            offset + max_var_bytes <= ROW_BYTES_MAX,
            "table `{}`: rows of up to {} bytes; validate the table first",
            table.name,
            offset + max_var_bytes
        );
        let integers: Option<Vec<IntegerSlot>> = slots
            .iter()
            .map(|slot| match (slot.place, slot.integer_range) {
                (Place::Fixed { offset, bytes }, Some(_)) => Some(IntegerSlot {
                    offset: u16::try_from(offset).ok()?,
                    bytes: u8::try_from(bytes).ok()?,
                    code: slot.ty.integer_code(),
                    null_bit: if slot.nullable {
                        Some(u16::try_from(slot.null_bit).ok()?)
                    } else {
                        None
                    },
                }),
                _ => None,
            })
            .collect();
        let integer_writes = slots.iter().map(IntegerWrite::new).collect();
        let integer_reads = integers
            .as_ref()
            .filter(|_| offset <= INTEGER_READ_ROW_BYTES_MAX)
            .and_then(|integers| {
                integers
                    .iter()
                    .map(|slot| slot.null_bit.is_none().then(|| IntegerRead::new(slot)))
                    .collect()
            });
        RowLayout {
            table: table.name.clone(),
            slots,
            integers,
            integer_reads,
            integer_writes,
            null_bitmap_bytes,
            fixed_bytes: offset,
            var_columns,
            max_var_bytes,
        }
    }

    /// Bytes of every row's fixed part.
    pub fn fixed_bytes(&self) -> usize {
        self.fixed_bytes
    }

    /// Most bytes a row's var part can take (0 without var columns).
    pub fn max_var_bytes(&self) -> usize {
        self.max_var_bytes
    }

    /// Number of var-size columns.
    pub fn var_columns(&self) -> usize {
        self.var_columns
    }

    /// Bytes of the NULL bitmap at the start of the fixed part.
    pub fn null_bitmap_bytes(&self) -> usize {
        self.null_bitmap_bytes
    }

    pub fn column_count(&self) -> usize {
        self.slots.len()
    }

    /// The type of a column.
    pub fn column_type(&self, col: usize) -> ColumnType {
        self.slots[col].ty
    }

    /// Encodes a whole row into caller-owned buffers, replacing what they
    /// held. A value that does not fit its column is an error that leaves
    /// the buffers empty. Allocation-free once the buffers have grown to the
    /// table's row size.
    pub fn encode(
        &self,
        values: &[Value],
        fixed: &mut Vec<u8>,
        var: &mut Vec<u8>,
    ) -> Result<(), ValueError> {
        fixed.clear();
        var.clear();
        if values.len() != self.slots.len() {
            return Err(ValueError::WrongColumnCount {
                table: self.table.clone(),
                expected: self.slots.len(),
                given: values.len(),
            });
        }
        fixed.resize(self.fixed_bytes, 0);
        var.resize(self.var_columns * VAR_OFFSET_BYTES, 0);
        for (slot, value) in self.slots.iter().zip(values) {
            if let Err(error) = self.write_column(slot, value.as_ref(), fixed, var) {
                fixed.clear();
                var.clear();
                return Err(error);
            }
        }
        debug_assert_eq!(fixed.len(), self.fixed_bytes);
        debug_assert!(var.len() <= self.max_var_bytes);
        Ok(())
    }

    /// Checks and writes one column of a row being encoded in column order
    /// (var columns must come in order, each appending its data).
    fn write_column(
        &self,
        slot: &Slot,
        value: ValueRef<'_>,
        fixed: &mut [u8],
        var: &mut Vec<u8>,
    ) -> Result<(), ValueError> {
        if let Some((v, offset, bytes, signed)) = integer_in_range(slot, value) {
            put_integer(&mut fixed[offset..offset + bytes], v, signed);
            return Ok(());
        }
        check_value(value, &slot.name, &slot.ty, slot.nullable)?;
        if value.is_null() {
            set_bit(fixed, slot.null_bit, true);
        }
        match slot.place {
            Place::Fixed { offset, bytes } => {
                if !value.is_null() {
                    write_fixed(&slot.ty, value, &mut fixed[offset..offset + bytes]);
                }
            }
            Place::Var { index } => self.push_var(slot, value, index, var),
        }
        Ok(())
    }

    /// Produces a new image of a row from an old one and new values for some
    /// columns (`(column, value)`; a column named twice gets its last value;
    /// a primary-key column is refused). Columns left out keep their old
    /// bytes; when no var column changes,
    /// the var part is copied as it is. On an error the new buffers are left
    /// empty.
    pub fn update(
        &self,
        old_fixed: &[u8],
        old_var: &[u8],
        changes: &[(usize, Value)],
        new_fixed: &mut Vec<u8>,
        new_var: &mut Vec<u8>,
    ) -> Result<(), ValueError> {
        let changes = Listed(changes.iter());
        self.update_refs(old_fixed, old_var, changes, new_fixed, new_var)
    }

    /// [`RowLayout::update`] from borrowed values, as an op carries them:
    /// nothing is decoded into owned values. The leading integer changes
    /// go through [`ColumnChanges::integer_prefix`]; fixed-size columns are
    /// checked and written in one pass over the rest; the pairs are walked
    /// again only when a var column changes.
    pub fn update_refs<'v, C: ColumnChanges<'v>>(
        &self,
        old_fixed: &[u8],
        old_var: &[u8],
        mut changes: C,
        new_fixed: &mut Vec<u8>,
        new_var: &mut Vec<u8>,
    ) -> Result<(), ValueError> {
        debug_assert_eq!(old_fixed.len(), self.fixed_bytes);
        new_fixed.clear();
        new_var.clear();
        new_fixed.extend_from_slice(old_fixed);
        // Integer columns only: what a var column's pass below walks again
        // starts after them.
        let fixed = new_fixed.as_mut_slice();
        changes.integer_prefix(|col, value| self.write_integer(col, value, fixed));
        let mut var_changed = false;
        for (col, value) in changes.clone() {
            let written = match value {
                ValueRef::Int(x) => self.write_integer(col, Ok(x), new_fixed),
                ValueRef::UInt(x) => self.write_integer(col, Err(x), new_fixed),
                _ => false,
            };
            if written {
                continue;
            }
            if let Err(error) = self.update_fixed(col, value, new_fixed, &mut var_changed) {
                new_fixed.clear();
                return Err(error);
            }
        }
        if !var_changed {
            new_var.extend_from_slice(old_var);
            return Ok(());
        }
        new_var.resize(self.var_columns * VAR_OFFSET_BYTES, 0);
        for (col_index, slot) in self.slots.iter().enumerate() {
            let Place::Var { index } = slot.place else {
                continue;
            };
            match changes.clone().filter(|&(col, _)| col == col_index).last() {
                Some((_, value)) => self.push_var(slot, value, index, new_var),
                None => {
                    let old = self.var_data(old_var, index);
                    new_var.extend_from_slice(old);
                    self.set_var_end(new_var, index);
                }
            }
        }
        Ok(())
    }

    /// Writes an integer (`Ok(signed)` or `Err(unsigned)`) into column
    /// `col` of a fixed part being updated, when the column is an integer
    /// outside the primary key and the value fits; false (nothing written)
    /// leaves it to `update_fixed`, which says what is wrong.
    #[inline(always)]
    fn write_integer(&self, col: usize, value: Result<i64, u64>, new_fixed: &mut [u8]) -> bool {
        let Some(write) = self.integer_writes.get(col) else {
            return false;
        };
        let stored = match value {
            Err(x) if x <= write.uint_max => x.wrapping_add(write.bias),
            Ok(x) => match (x as u64).wrapping_add(write.bias) {
                stored if stored <= write.int_stored_max => stored,
                _ => return false,
            },
            Err(_) => return false,
        };
        let offset = usize::from(write.offset);
        match write.bytes {
            0 => return false,
            // INT first, as a branch: the common width without the jump
            // table of the others.
            4 => new_fixed[offset..offset + 4].copy_from_slice(&(stored as u32).to_be_bytes()),
            bytes => put_be(&mut new_fixed[offset..offset + usize::from(bytes)], stored),
        }
        if write.null_bit_plus_one != 0 {
            set_bit(new_fixed, usize::from(write.null_bit_plus_one - 1), false);
        }
        true
    }

    /// Checks one changed column and writes it into a fixed part being
    /// updated (its NULL bit too); a var column is only noted.
    fn update_fixed(
        &self,
        col: usize,
        value: ValueRef<'_>,
        new_fixed: &mut [u8],
        var_changed: &mut bool,
    ) -> Result<(), ValueError> {
        let slot = self
            .slots
            .get(col)
            .ok_or_else(|| ValueError::NoSuchColumn {
                table: self.table.clone(),
                column: col,
                columns: self.slots.len(),
            })?;
        if slot.key {
            return Err(ValueError::KeyColumn {
                table: self.table.clone(),
                column: slot.name.clone(),
            });
        }
        if let Some((v, offset, bytes, signed)) = integer_in_range(slot, value) {
            if slot.nullable {
                set_bit(new_fixed, slot.null_bit, false);
            }
            put_integer(&mut new_fixed[offset..offset + bytes], v, signed);
            return Ok(());
        }
        check_value(value, &slot.name, &slot.ty, slot.nullable)?;
        if slot.nullable {
            set_bit(new_fixed, slot.null_bit, value.is_null());
        }
        match slot.place {
            Place::Fixed { offset, bytes } => {
                let out = &mut new_fixed[offset..offset + bytes];
                if value.is_null() {
                    out.fill(0);
                } else {
                    write_fixed(&slot.ty, value, out);
                }
            }
            Place::Var { .. } => *var_changed = true,
        }
        Ok(())
    }

    /// Whether a column is NULL in a row.
    pub fn is_null(&self, fixed: &[u8], col: usize) -> bool {
        let slot = &self.slots[col];
        slot.nullable && bit(fixed, slot.null_bit)
    }

    /// Reads one column of a row without allocating. The row must be one
    /// this layout wrote, or one that passed [`RowLayout::validate_row`];
    /// anything else is a broken invariant of the row store and panics.
    pub fn decode_column<'a>(&self, fixed: &'a [u8], var: &'a [u8], col: usize) -> ValueRef<'a> {
        debug_assert_eq!(fixed.len(), self.fixed_bytes);
        let slot = &self.slots[col];
        if slot.nullable && bit(fixed, slot.null_bit) {
            return ValueRef::Null;
        }
        match slot.place {
            Place::Fixed { offset, bytes } => read_fixed(&slot.ty, &fixed[offset..offset + bytes]),
            Place::Var { index } => {
                let data = self.var_data(var, index);
                match slot.ty {
                    ColumnType::Char { .. } | ColumnType::VarChar { .. } => ValueRef::Str(
                        std::str::from_utf8(data).expect("row store holds only valid rows"),
                    ),
                    ColumnType::VarBinary { .. } => ValueRef::Bytes(data),
                    ColumnType::Blob | ColumnType::Text { .. } => {
                        let (length, inline) = data.split_at(BLOB_LENGTH_BYTES);
                        ValueRef::BlobHead {
                            total_bytes: u64::from_le_bytes(
                                length.try_into().expect("split at the length's size"),
                            ),
                            inline,
                        }
                    }
                    _ => unreachable!("{} is not a var-size type", slot.ty),
                }
            }
        }
    }

    /// A CHAR or VARCHAR column's bytes, for encoders that copy rows out
    /// without building a [`ValueRef`]: the UTF-8 the row was stored with
    /// (only valid rows are stored), not checked again; none when the
    /// column is of another type or NULL in this row.
    #[inline]
    pub fn text_column<'a>(&self, fixed: &[u8], var: &'a [u8], col: usize) -> Option<&'a [u8]> {
        debug_assert_eq!(fixed.len(), self.fixed_bytes);
        let slot = &self.slots[col];
        let (ColumnType::Char { .. } | ColumnType::VarChar { .. }, Place::Var { index }) =
            (slot.ty, slot.place)
        else {
            return None;
        };
        if slot.nullable && bit(fixed, slot.null_bit) {
            return None;
        }
        Some(self.var_data(var, index))
    }

    /// An integer column's value, for encoders that copy rows out without
    /// building a [`ValueRef`] per column: `Some(Ok(signed))` or
    /// `Some(Err(unsigned))`; none when the column is not an integer or is
    /// NULL in this row (then [`RowLayout::decode_column`] gives it).
    #[inline]
    pub fn integer_column(&self, fixed: &[u8], col: usize) -> Option<Result<i64, u64>> {
        debug_assert_eq!(fixed.len(), self.fixed_bytes);
        let slot = &self.slots[col];
        let ((min, _), Place::Fixed { offset, bytes }) = (slot.integer_range?, slot.place) else {
            return None;
        };
        if slot.nullable && bit(fixed, slot.null_bit) {
            return None;
        }
        Some(read_integer(&fixed[offset..offset + bytes], min < 0))
    }

    /// Every column of a row, in table order, when every column of the
    /// table is an integer; `None` for other tables (read their columns
    /// with [`RowLayout::integer_column`] and [`RowLayout::decode_column`]).
    /// What a read of a whole row of a key-value table costs per column:
    /// a load, a byte swap and for a signed column a sign fix.
    #[inline]
    pub fn integer_cells<'a>(
        &'a self,
        fixed: &'a [u8],
    ) -> Option<impl Iterator<Item = IntegerCell> + 'a> {
        debug_assert_eq!(fixed.len(), self.fixed_bytes);
        let integers = self.integers.as_ref()?;
        Some(integers.iter().map(move |slot| {
            if slot.null_bit.is_some_and(|n| bit(fixed, usize::from(n))) {
                return IntegerCell::Null;
            }
            let offset = usize::from(slot.offset);
            match read_integer(
                &fixed[offset..offset + usize::from(slot.bytes)],
                slot.signed(),
            ) {
                Ok(v) => IntegerCell::Int(v),
                Err(v) => IntegerCell::UInt(v),
            }
        }))
    }

    /// Every column's [`IntegerRead`], in table order, when every column
    /// is a NOT NULL integer and rows have at most
    /// [`INTEGER_READ_ROW_BYTES_MAX`] fixed bytes; `None` for other tables.
    #[inline]
    pub fn integer_reads(&self) -> Option<&[IntegerRead]> {
        self.integer_reads.as_deref()
    }

    /// `fixed` (a row of this layout, which has [`RowLayout::integer_reads`])
    /// padded for [`IntegerRead::load`].
    #[inline]
    pub fn padded(&self, fixed: &[u8]) -> PaddedRow {
        assert!(
            self.integer_reads.is_some() && fixed.len() == self.fixed_bytes,
            "table `{}`: a padded row needs integer reads and {} fixed bytes, not {}",
            self.table,
            self.fixed_bytes,
            fixed.len()
        );
        let mut row = PaddedRow([0; PADDED_ROW_BYTES]);
        row.0[..fixed.len()].copy_from_slice(fixed);
        row
    }

    /// The stored bytes of a fixed-size column (its key form for all but
    /// FLOAT and DOUBLE).
    pub fn fixed_column<'a>(&self, fixed: &'a [u8], col: usize) -> &'a [u8] {
        match self.slots[col].place {
            Place::Fixed { offset, bytes } => &fixed[offset..offset + bytes],
            Place::Var { .. } => panic!("column {col} of `{}` is not fixed-size", self.table),
        }
    }

    /// The stored bytes of a var-size column.
    pub(crate) fn var_column<'a>(&self, var: &'a [u8], col: usize) -> &'a [u8] {
        match self.slots[col].place {
            Place::Var { index } => self.var_data(var, index),
            Place::Fixed { .. } => panic!("column {col} of `{}` is not var-size", self.table),
        }
    }

    /// Checks that stored bytes are a row of this layout: lengths, offsets,
    /// the NULL bitmap and every column's value. For bytes from disk, before
    /// they enter the row store.
    pub fn validate_row(&self, fixed: &[u8], var: &[u8]) -> Result<(), RowFormatError> {
        if fixed.len() != self.fixed_bytes {
            return Err(RowFormatError::FixedLength {
                table: self.table.clone(),
                given: fixed.len(),
                expected: self.fixed_bytes,
            });
        }
        self.validate_var_offsets(var)?;
        let nullable = self.slots.iter().filter(|s| s.nullable).count();
        if (nullable..self.null_bitmap_bytes * 8).any(|b| bit(fixed, b)) {
            return Err(RowFormatError::NullBitmap {
                table: self.table.clone(),
                nullable,
            });
        }
        for slot in &self.slots {
            let null = slot.nullable && bit(fixed, slot.null_bit);
            let problem = match slot.place {
                Place::Fixed { offset, bytes } => {
                    let stored = &fixed[offset..offset + bytes];
                    if null {
                        stored
                            .iter()
                            .any(|&b| b != 0)
                            .then_some("a NULL with non-zero bytes")
                    } else {
                        validate_fixed(&slot.ty, stored).err()
                    }
                }
                Place::Var { index } => {
                    let data = self.var_data(var, index);
                    if null {
                        (!data.is_empty()).then_some("a NULL with data")
                    } else {
                        validate_var(&slot.ty, data).err()
                    }
                }
            };
            if let Some(problem) = problem {
                return Err(RowFormatError::Column {
                    table: self.table.clone(),
                    column: slot.name.clone(),
                    ty: slot.ty.to_string(),
                    problem,
                });
            }
        }
        Ok(())
    }

    fn validate_var_offsets(&self, var: &[u8]) -> Result<(), RowFormatError> {
        let bad = |problem| RowFormatError::VarPart {
            table: self.table.clone(),
            bytes: var.len(),
            problem,
        };
        if self.var_columns == 0 {
            return if var.is_empty() {
                Ok(())
            } else {
                Err(bad("the table has no var-size columns"))
            };
        }
        let header = self.var_columns * VAR_OFFSET_BYTES;
        if var.len() < header || var.len() > self.max_var_bytes {
            return Err(bad(
                "shorter than its offsets or longer than the layout allows",
            ));
        }
        let mut previous = 0;
        for index in 0..self.var_columns {
            let end = var_end(var, index);
            if end < previous {
                return Err(bad("offsets go backwards"));
            }
            previous = end;
        }
        if header + previous != var.len() {
            return Err(bad("the last offset is not the end of the data"));
        }
        Ok(())
    }

    /// Appends a var column's data (none for NULL) and records its end.
    fn push_var(&self, slot: &Slot, value: ValueRef<'_>, index: usize, var: &mut Vec<u8>) {
        match value {
            ValueRef::Null => {}
            ValueRef::Str(s) => match slot.ty {
                ColumnType::Char { .. } => {
                    var.extend_from_slice(s.trim_end_matches(' ').as_bytes())
                }
                ColumnType::VarChar { .. } => var.extend_from_slice(s.as_bytes()),
                ColumnType::Text { .. } => push_blob_head(var, s.len() as u64, s.as_bytes()),
                _ => unreachable!("checked: a string for {}", slot.ty),
            },
            ValueRef::Bytes(b) => match slot.ty {
                ColumnType::VarBinary { .. } => var.extend_from_slice(b),
                ColumnType::Blob => push_blob_head(var, b.len() as u64, b),
                _ => unreachable!("checked: bytes for {}", slot.ty),
            },
            ValueRef::BlobHead {
                total_bytes,
                inline,
            } => push_blob_head(var, total_bytes, inline),
            _ => unreachable!("checked: a {} for {}", value.kind(), slot.ty),
        }
        self.set_var_end(var, index);
    }

    fn set_var_end(&self, var: &mut [u8], index: usize) {
        let header = self.var_columns * VAR_OFFSET_BYTES;
        let end = u16::try_from(var.len() - header).expect("a row is below 64 KiB");
        var[index * VAR_OFFSET_BYTES..(index + 1) * VAR_OFFSET_BYTES]
            .copy_from_slice(&end.to_le_bytes());
    }

    fn var_data<'a>(&self, var: &'a [u8], index: usize) -> &'a [u8] {
        let header = self.var_columns * VAR_OFFSET_BYTES;
        let start = if index == 0 {
            0
        } else {
            var_end(var, index - 1)
        };
        &var[header + start..header + var_end(var, index)]
    }
}

/// The recorded end of var column `index`'s data.
fn var_end(var: &[u8], index: usize) -> usize {
    let at = index * VAR_OFFSET_BYTES;
    usize::from(u16::from_le_bytes([var[at], var[at + 1]]))
}

/// A blob head: the total length, then the first bytes of the value (all
/// of `data` when it is already a head, the first BLOB_INLINE_BYTES of a
/// whole value otherwise).
fn push_blob_head(var: &mut Vec<u8>, total_bytes: u64, data: &[u8]) {
    var.extend_from_slice(&total_bytes.to_le_bytes());
    var.extend_from_slice(&data[..data.len().min(BLOB_INLINE_BYTES)]);
}

fn bit(bytes: &[u8], n: usize) -> bool {
    bytes[n / 8] & (1 << (n % 8)) != 0
}

fn set_bit(bytes: &mut [u8], n: usize, on: bool) {
    if on {
        bytes[n / 8] |= 1 << (n % 8);
    } else {
        bytes[n / 8] &= !(1 << (n % 8));
    }
}

/// Number of parts a blob of `total_bytes` has in its parts table.
pub fn blob_part_count(total_bytes: u64) -> u64 {
    total_bytes
        .saturating_sub(BLOB_INLINE_BYTES as u64)
        .div_ceil(super::types::BLOB_PART_BYTES as u64)
}

/// The parts of a whole blob value as its parts table stores them: part
/// number and bytes, after the inline head.
pub fn blob_parts(data: &[u8]) -> impl Iterator<Item = (u32, &[u8])> {
    let rest = &data[data.len().min(BLOB_INLINE_BYTES)..];
    rest.chunks(super::types::BLOB_PART_BYTES)
        .enumerate()
        .map(|(n, part)| (u32::try_from(n).expect("at most 2^32 parts"), part))
}

// Packing of DATETIME's whole seconds (see the module doc).
const DATETIME_YEAR_MONTH_SHIFT: u32 = 22;
const DATETIME_DAY_SHIFT: u32 = 17;
const DATETIME_HOUR_SHIFT: u32 = 12;
const DATETIME_MINUTE_SHIFT: u32 = 6;
/// Months per year in DATETIME's packing: 13, so that month 0 never collides.
const DATETIME_MONTHS: u64 = 13;

/// Writes a checked, non-NULL value of a fixed-size column in its stored
/// form (the module doc's table). `out` is exactly the column's width.
pub(crate) fn write_fixed(ty: &ColumnType, value: ValueRef<'_>, out: &mut [u8]) {
    use ColumnType as T;
    match (*ty, value) {
        (
            T::TinyInt { .. }
            | T::SmallInt { .. }
            | T::MediumInt { .. }
            | T::Int { .. }
            | T::BigInt { .. },
            _,
        ) => {
            let v = match value {
                ValueRef::Int(v) => i128::from(v),
                ValueRef::UInt(v) => i128::from(v),
                _ => unreachable!("checked: an integer"),
            };
            put_integer(out, v, ty.is_signed_integer());
        }
        (T::Float, ValueRef::Float(v)) => out.copy_from_slice(&v.to_bits().to_be_bytes()),
        (T::Double, ValueRef::Double(v)) => out.copy_from_slice(&v.to_bits().to_be_bytes()),
        (T::Decimal { precision, scale }, ValueRef::Decimal(v)) => {
            v.write_binary(precision, scale, out)
        }
        (T::Binary { .. }, ValueRef::Bytes(b)) => {
            out[..b.len()].copy_from_slice(b);
            out[b.len()..].fill(0);
        }
        (T::Date, ValueRef::Date(d)) => put_be(out, pack_date(d)),
        (T::DateTime { fsp }, ValueRef::DateTime(t)) => {
            let (whole, fraction) = out.split_at_mut(5);
            let year_month = u64::from(t.date.year) * DATETIME_MONTHS + u64::from(t.date.month);
            put_be(
                whole,
                year_month << DATETIME_YEAR_MONTH_SHIFT
                    | u64::from(t.date.day) << DATETIME_DAY_SHIFT
                    | u64::from(t.hour) << DATETIME_HOUR_SHIFT
                    | u64::from(t.minute) << DATETIME_MINUTE_SHIFT
                    | u64::from(t.second),
            );
            put_fraction(fraction, fsp, i64::from(t.micros));
        }
        (T::Timestamp { fsp }, ValueRef::Timestamp(micros)) => {
            let (whole, fraction) = out.split_at_mut(4);
            put_be(whole, (micros / MICROS_PER_SECOND) as u64);
            put_fraction(fraction, fsp, micros % MICROS_PER_SECOND);
        }
        (T::Bit { .. }, ValueRef::Bit(v)) => put_be(out, v),
        _ => unreachable!("checked: a {} for {}", value.kind(), ty),
    }
}

/// Reads a fixed-size column from its stored form. The bytes must be valid
/// ([`validate_fixed`]); anything else is a broken invariant.
pub(crate) fn read_fixed<'a>(ty: &ColumnType, bytes: &'a [u8]) -> ValueRef<'a> {
    use ColumnType as T;
    match *ty {
        T::TinyInt { unsigned }
        | T::SmallInt { unsigned }
        | T::MediumInt { unsigned }
        | T::Int { unsigned }
        | T::BigInt { unsigned } => {
            let raw = get_be(bytes);
            if unsigned {
                ValueRef::UInt(raw)
            } else {
                let width = bytes.len() as u32 * 8;
                let unflipped = raw ^ (1u64 << (width - 1));
                let shift = 64 - width;
                ValueRef::Int(((unflipped << shift) as i64) >> shift)
            }
        }
        T::Float => ValueRef::Float(f32::from_bits(get_be(bytes) as u32)),
        T::Double => ValueRef::Double(f64::from_bits(get_be(bytes))),
        T::Decimal { precision, scale } => ValueRef::Decimal(
            Decimal::read_binary(precision, scale, bytes).expect("row store holds only valid rows"),
        ),
        T::Binary { .. } => ValueRef::Bytes(bytes),
        T::Date => ValueRef::Date(unpack_date(get_be(bytes))),
        T::DateTime { fsp } => ValueRef::DateTime(unpack_datetime(bytes, fsp)),
        T::Timestamp { fsp } => {
            let seconds = get_be(&bytes[..4]) as i64;
            ValueRef::Timestamp(seconds * MICROS_PER_SECOND + get_fraction(&bytes[4..], fsp))
        }
        T::Bit { .. } => ValueRef::Bit(get_be(bytes)),
        _ => unreachable!("{ty} is not fixed-size"),
    }
}

/// Checks stored bytes of a fixed-size column (its width is already right).
fn validate_fixed(ty: &ColumnType, bytes: &[u8]) -> Result<(), &'static str> {
    use ColumnType as T;
    let ok = match *ty {
        T::TinyInt { .. }
        | T::SmallInt { .. }
        | T::MediumInt { .. }
        | T::Int { .. }
        | T::BigInt { .. }
        | T::Binary { .. } => true,
        T::Float => f32::from_bits(get_be(bytes) as u32).is_finite(),
        T::Double => f64::from_bits(get_be(bytes)).is_finite(),
        T::Decimal { precision, scale } => Decimal::read_binary(precision, scale, bytes).is_some(),
        T::Date => {
            let packed = get_be(bytes);
            unpack_date(packed).is_storable() && pack_date(unpack_date(packed)) == packed
        }
        T::DateTime { fsp } => {
            let t = unpack_datetime(bytes, fsp);
            let mut again = [0u8; 8];
            let again = &mut again[..bytes.len()];
            t.is_valid() && micros_fit_fsp(i64::from(t.micros), fsp) && {
                write_fixed(ty, ValueRef::DateTime(t), again);
                again == bytes
            }
        }
        T::Timestamp { fsp } => {
            let seconds = get_be(&bytes[..4]) as i64;
            let fraction = &bytes[4..];
            seconds <= TIMESTAMP_SECONDS_MAX && fraction_is_valid(fraction, fsp)
        }
        T::Bit { bits } => bits == 64 || get_be(bytes) >> bits == 0,
        _ => unreachable!("{ty} is not fixed-size"),
    };
    if ok {
        Ok(())
    } else {
        Err("bytes out of the type's range")
    }
}

/// Checks stored data of a var-size column.
fn validate_var(ty: &ColumnType, data: &[u8]) -> Result<(), &'static str> {
    match *ty {
        ColumnType::Char { len, .. } | ColumnType::VarChar { max: len, .. } => {
            let text = std::str::from_utf8(data).map_err(|_| "not UTF-8")?;
            if text.chars().count() > usize::from(len) {
                return Err("longer than the column");
            }
            if matches!(ty, ColumnType::Char { .. }) && text.ends_with(' ') {
                return Err("CHAR with trailing spaces");
            }
            Ok(())
        }
        ColumnType::VarBinary { max } => {
            if data.len() > usize::from(max) {
                return Err("longer than the column");
            }
            Ok(())
        }
        ColumnType::Blob | ColumnType::Text { .. } => {
            if data.len() < BLOB_LENGTH_BYTES {
                return Err("blob head without its length");
            }
            let (length, inline) = data.split_at(BLOB_LENGTH_BYTES);
            let total = u64::from_le_bytes(length.try_into().map_err(|_| "blob length")?);
            if inline.len() as u64 != total.min(BLOB_INLINE_BYTES as u64) {
                return Err("blob head of the wrong length");
            }
            let complete = inline.len() as u64 == total;
            if matches!(ty, ColumnType::Text { .. })
                && complete
                && std::str::from_utf8(inline).is_err()
            {
                return Err("not UTF-8");
            }
            Ok(())
        }
        _ => unreachable!("{ty} is not var-size"),
    }
}

fn pack_date(d: Date) -> u64 {
    (u64::from(d.year) * 16 + u64::from(d.month)) * 32 + u64::from(d.day)
}

fn unpack_date(packed: u64) -> Date {
    Date {
        year: (packed >> 9).min(u64::from(u16::MAX)) as u16,
        month: ((packed >> 5) & 0xF) as u8,
        day: (packed & 0x1F) as u8,
    }
}

fn unpack_datetime(bytes: &[u8], fsp: u8) -> DateTime {
    let whole = get_be(&bytes[..5]);
    let year_month = whole >> DATETIME_YEAR_MONTH_SHIFT;
    DateTime {
        date: Date {
            year: (year_month / DATETIME_MONTHS).min(u64::from(u16::MAX)) as u16,
            month: (year_month % DATETIME_MONTHS) as u8,
            day: ((whole >> DATETIME_DAY_SHIFT) & 0x1F) as u8,
        },
        hour: ((whole >> DATETIME_HOUR_SHIFT) & 0x1F) as u8,
        minute: ((whole >> DATETIME_MINUTE_SHIFT) & 0x3F) as u8,
        second: (whole & 0x3F) as u8,
        micros: get_fraction(&bytes[5..], fsp) as u32,
    }
}

/// Microseconds per unit of the stored fraction, by its width in bytes.
const FRACTION_UNIT_MICROS: [i64; 4] = [0, 10_000, 100, 1];

fn put_fraction(out: &mut [u8], fsp: u8, micros: i64) {
    debug_assert_eq!(out.len(), fsp_bytes(fsp));
    if !out.is_empty() {
        put_be(out, (micros / FRACTION_UNIT_MICROS[out.len()]) as u64);
    }
}

fn get_fraction(bytes: &[u8], fsp: u8) -> i64 {
    debug_assert_eq!(bytes.len(), fsp_bytes(fsp));
    if bytes.is_empty() {
        0
    } else {
        get_be(bytes) as i64 * FRACTION_UNIT_MICROS[bytes.len()]
    }
}

fn fraction_is_valid(bytes: &[u8], fsp: u8) -> bool {
    if bytes.is_empty() {
        return true;
    }
    let micros = get_be(bytes) as i64 * FRACTION_UNIT_MICROS[bytes.len()];
    micros < MICROS_PER_SECOND && micros_fit_fsp(micros, fsp)
}

/// Writes an integer (checked to fit `out`) in its stored form: big-endian
/// at the column's width, the sign bit flipped for signed columns.
/// The fast path for the most common columns: an integer value in range
/// of a fixed-size integer column, as (value, offset, bytes, signed); else
/// none, and the general check and encoder take the value.
fn integer_in_range(slot: &Slot, value: ValueRef<'_>) -> Option<(i128, usize, usize, bool)> {
    let (Some((min, max)), Place::Fixed { offset, bytes }) = (slot.integer_range, slot.place)
    else {
        return None;
    };
    let v = match value {
        ValueRef::Int(v) => i128::from(v),
        ValueRef::UInt(v) => i128::from(v),
        _ => return None,
    };
    (min..=max)
        .contains(&v)
        .then_some((v, offset, bytes, min < 0))
}

/// An integer column's stored bytes read back: `Ok(signed)` or
/// `Err(unsigned)` (the sign bit was flipped when stored).
#[inline]
fn read_integer(stored: &[u8], signed: bool) -> Result<i64, u64> {
    let raw = get_be(stored);
    if !signed {
        return Err(raw);
    }
    let width = stored.len() as u32 * 8;
    let shift = 64 - width;
    Ok((((raw ^ (1u64 << (width - 1))) << shift) as i64) >> shift)
}

fn put_integer(out: &mut [u8], value: i128, signed: bool) {
    let width_bits = out.len() * 8;
    let flip = if signed { 1u64 << (width_bits - 1) } else { 0 };
    // Two's complement cut to the width: dropping the high bytes (all sign
    // copies for a value that fits) loses nothing.
    let mask = u64::MAX >> (64 - width_bits);
    put_be(out, (value as u64 ^ flip) & mask);
}

/// Writes the low `out.len()` bytes of `value`, big-endian. The common
/// widths get fixed-size copies, which compile to single stores.
#[inline]
pub(crate) fn put_be(out: &mut [u8], value: u64) {
    debug_assert!(out.len() <= 8);
    debug_assert!(out.len() == 8 || value >> (out.len() * 8) == 0);
    match out.len() {
        1 => out[0] = value as u8,
        2 => out.copy_from_slice(&(value as u16).to_be_bytes()),
        4 => out.copy_from_slice(&(value as u32).to_be_bytes()),
        8 => out.copy_from_slice(&value.to_be_bytes()),
        n => out.copy_from_slice(&value.to_be_bytes()[8 - n..]),
    }
}

/// Reads up to eight bytes, big-endian.
#[inline]
pub(crate) fn get_be(bytes: &[u8]) -> u64 {
    debug_assert!(bytes.len() <= 8);
    match *bytes {
        [a] => u64::from(a),
        [a, b] => u64::from(u16::from_be_bytes([a, b])),
        [a, b, c, d] => u64::from(u32::from_be_bytes([a, b, c, d])),
        [a, b, c, d, e, f, g, h] => u64::from_be_bytes([a, b, c, d, e, f, g, h]),
        _ => bytes.iter().fold(0u64, |acc, &b| acc << 8 | u64::from(b)),
    }
}
