//! Results and scanned rows gathered across lock waits.
//!
//! Why: an LDM request or a scan batch may stop half-way for a row lock and
//! go on later, but `proto`'s writers borrow their output buffer for their
//! whole life, so they cannot be kept in a record between signals. The
//! values of each answer are encoded here as they are read (a read must
//! return the row as it was when it ran, not as a later operation of the
//! same request left it) and copied into one `proto` batch when the answer
//! goes out (the encoding is the same, so the values are not read again). The buffers are kept and reused: once warm, gathering
//! allocates nothing.

use proto::results::ResultWriter;
use proto::scan::RowBatchWriter;
use proto::value::{
    integer_value, put_int, put_text_bytes, put_uint, put_value, EncodedValues, INTEGER_VALUE_BYTES,
};
use schema::{IntegerCell, RowLayout, ValueRef};

/// One gathered answer: an outcome, or a row whose values end at `end`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Entry {
    op_index: u32,
    /// 0 for success, else a `proto::error` code.
    code: u32,
    row: bool,
    values: u16,
    keys: u16,
    /// Where the row's key values begin in `Gathered::bytes`.
    keys_at: u32,
    /// End of the row's values and key values in `Gathered::bytes`.
    end: u32,
}

/// Answers (per-op results, or scanned rows) gathered for one signal.
#[derive(Debug, Default)]
pub(super) struct Gathered {
    entries: Vec<Entry>,
    /// Values of the rows, back to back, as `proto::value` encodes them.
    bytes: Vec<u8>,
    /// The row being added: its start in `bytes` and its counts.
    /// The row being added: its value and key counts, and where its keys
    /// begin once the first is added.
    open: Option<(u16, u16, Option<usize>)>,
}

impl Gathered {
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bytes of row values gathered (to bound a batch before it is written).
    pub(super) fn value_bytes(&self) -> usize {
        self.bytes.len()
    }

    pub(super) fn clear(&mut self) {
        self.entries.clear();
        self.bytes.clear();
        self.open = None;
    }

    pub(super) fn ok(&mut self, op_index: u32) {
        self.push_outcome(op_index, 0);
    }

    pub(super) fn error(&mut self, op_index: u32, code: u32) {
        assert_ne!(code, 0, "op {op_index}: an error needs a code");
        self.push_outcome(op_index, code);
    }

    fn push_outcome(&mut self, op_index: u32, code: u32) {
        assert!(self.open.is_none(), "a row is being added");
        self.entries.push(Entry {
            op_index,
            code,
            row: false,
            values: 0,
            keys: 0,
            keys_at: self.bytes.len() as u32,
            end: self.bytes.len() as u32,
        });
    }

    /// Starts a row: its values, then its key values, then `end_row`.
    pub(super) fn begin_row(&mut self) {
        assert!(self.open.is_none(), "a row is being added");
        self.open = Some((0, 0, None));
    }

    pub(super) fn key(&mut self, v: ValueRef<'_>) {
        let open = self.open.as_mut().expect("begin_row first");
        open.2.get_or_insert(self.bytes.len());
        open.1 += 1;
        put_value(&mut self.bytes, v);
    }

    pub(super) fn end_row(&mut self, op_index: u32) {
        let (values, keys, keys_at) = self.open.take().expect("begin_row first");
        self.entries.push(Entry {
            op_index,
            code: 0,
            row: true,
            values,
            keys,
            keys_at: keys_at.unwrap_or(self.bytes.len()) as u32,
            end: self.bytes.len() as u32,
        });
    }

    /// The values of entry `i`, in order (values, then key values).
    /// The encoded (values, key values) of row entry `i`, with their counts.
    fn parts_of(&self, i: usize) -> (EncodedValues<'_>, EncodedValues<'_>) {
        let entry = self.entries[i];
        let start = if i == 0 {
            0
        } else {
            self.entries[i - 1].end as usize
        };
        let (keys_at, end) = (entry.keys_at as usize, entry.end as usize);
        (
            (usize::from(entry.values), &self.bytes[start..keys_at]),
            (usize::from(entry.keys), &self.bytes[keys_at..end]),
        )
    }

    /// Keeps only the first failed result (there is one): what a batch
    /// that failed must say.
    pub(super) fn keep_first_failure(&mut self) {
        let first = self.entries.iter().find(|e| e.code != 0).copied();
        let first = first.expect("a failed result is kept");
        self.clear();
        self.push_outcome(first.op_index, first.code);
    }

    /// Whether every gathered result is a success (a row or ok).
    pub(super) fn all_succeeded(&self) -> bool {
        self.entries.iter().all(|e| e.code == 0)
    }

    /// What a result batch of `range`'s entries claims as
    /// `LdmKeyConf::ok_in_order`: their count when every one succeeded and
    /// they answer ops 0, 1, … in order (the TC then reads nothing of it), else 0.
    pub(super) fn ok_in_order(&self, range: std::ops::Range<usize>) -> u32 {
        let entries = &self.entries[range];
        let in_order = entries
            .iter()
            .enumerate()
            .all(|(i, e)| e.code == 0 && e.op_index as usize == i);
        if in_order {
            u32::try_from(entries.len()).expect("results per batch fit a u32")
        } else {
            0
        }
    }

    /// Writes entries from `*next` on as one result batch into `out`
    /// (cleared first), as many as fit; moves `*next` past them.
    pub(super) fn write_results(&self, next: &mut usize, out: &mut Vec<u8>) {
        out.clear();
        let mut writer = ResultWriter::new(out);
        let first = *next;
        while *next < self.entries.len() {
            let entry = self.entries[*next];
            let fits = if !entry.row {
                if entry.code == 0 {
                    writer.ok(entry.op_index)
                } else {
                    writer.error(entry.op_index, entry.code)
                }
            } else {
                let (values, keys) = self.parts_of(*next);
                writer.encoded_row(entry.op_index, values, keys)
            };
            if fits.is_err() {
                assert!(*next > first, "one result always fits a batch");
                return;
            }
            *next += 1;
        }
    }

    /// Writes entries from `*next` on as one batch of scanned rows into
    /// `out` (cleared first), as many as fit; moves `*next` past them.
    pub(super) fn write_rows(&self, next: &mut usize, out: &mut Vec<u8>) {
        out.clear();
        let mut writer = RowBatchWriter::new(out);
        let first = *next;
        while *next < self.entries.len() {
            debug_assert!(self.entries[*next].row);
            let (values, keys) = self.parts_of(*next);
            if writer.encoded_row(values, keys).is_err() {
                assert!(*next > first, "one row always fits a batch");
                return;
            }
            *next += 1;
        }
    }
}

/// Where a read's row values go: gathered across lock waits ([`Gathered`])
/// or straight into a reply's result batch ([`ResultWriter`]).
pub(super) trait RowSink {
    /// All of the open row's `count` values, written by `encode` at the end
    /// of `bytes` in the wire encoding ([`put_value`]'s).
    fn values(&mut self, count: usize, encode: impl FnOnce(&mut Vec<u8>));
    /// The next primary-key value (key info), after the values.
    fn key(&mut self, v: ValueRef<'_>);
}

impl RowSink for Gathered {
    fn values(&mut self, count: usize, encode: impl FnOnce(&mut Vec<u8>)) {
        let open = self.open.as_mut().expect("begin_row first");
        debug_assert!(
            open.0 == 0 && open.2.is_none(),
            "all values, once, before key values"
        );
        open.0 = u16::try_from(count).expect("a row has at most COLUMNS_MAX values");
        encode(&mut self.bytes);
    }

    fn key(&mut self, v: ValueRef<'_>) {
        Gathered::key(self, v);
    }
}

impl RowSink for ResultWriter<'_> {
    fn values(&mut self, count: usize, encode: impl FnOnce(&mut Vec<u8>)) {
        self.values_encoded(count, encode);
    }

    fn key(&mut self, v: ValueRef<'_>) {
        ResultWriter::key(self, v);
    }
}

/// A value of `layout`'s column `col` in a row's bytes, encoded at the end
/// of `out`: integers and strings are copied out without building a value
/// (most columns of key-value tables are integers; a string's UTF-8 is
/// checked by whoever decodes the batch, not again here).
#[inline]
pub(super) fn put_column(
    out: &mut Vec<u8>,
    layout: &RowLayout,
    fixed: &[u8],
    var: &[u8],
    col: usize,
) {
    match layout.integer_column(fixed, col) {
        Some(Ok(v)) => put_int(out, v),
        Some(Err(v)) => put_uint(out, v),
        None => match layout.text_column(fixed, var, col) {
            Some(utf8) => put_text_bytes(out, utf8),
            None => put_value(out, layout.decode_column(fixed, var, col)),
        },
    }
}

/// Every column of a row in table order (`columns` of them), encoded at
/// the end of `out`: for a table of integers only in one pass over the
/// layout's compact description (`RowLayout::integer_cells`), else column
/// by column.
pub(super) fn put_all_columns(
    out: &mut Vec<u8>,
    layout: &RowLayout,
    fixed: &[u8],
    var: &[u8],
    columns: usize,
) {
    if let Some(reads) = layout.integer_reads() {
        // NOT NULL integers only: every value takes the same bytes, so the
        // row is sized once and each value is a load, an add and a store.
        debug_assert_eq!(reads.len(), columns);
        let start = out.len();
        out.resize(start + columns * INTEGER_VALUE_BYTES, 0);
        let (values, rest) = out[start..].as_chunks_mut::<INTEGER_VALUE_BYTES>();
        debug_assert!(rest.is_empty());
        let row = layout.padded(fixed);
        for (value, read) in values.iter_mut().zip(reads) {
            *value = integer_value(read.signed(), read.load(&row));
        }
        return;
    }
    let Some(cells) = layout.integer_cells(fixed) else {
        for c in 0..columns {
            put_column(out, layout, fixed, var, c);
        }
        return;
    };
    out.reserve(columns * INTEGER_VALUE_BYTES);
    for cell in cells {
        match cell {
            IntegerCell::Null => put_value(out, ValueRef::Null),
            IntegerCell::Int(v) => put_int(out, v),
            IntegerCell::UInt(v) => put_uint(out, v),
        }
    }
}

#[cfg(test)]
mod tests {
    use schema::{Column, ColumnType, TableDef, Value};

    use super::*;

    /// A row of NOT NULL integers is read in one pass (`integer_reads`):
    /// the same bytes as column by column, at every width and sign and at
    /// each column's extremes.
    #[test]
    fn a_row_of_not_null_integers_reads_as_column_by_column() {
        let types = [
            ColumnType::TinyInt { unsigned: false },
            ColumnType::TinyInt { unsigned: true },
            ColumnType::SmallInt { unsigned: false },
            ColumnType::SmallInt { unsigned: true },
            ColumnType::MediumInt { unsigned: false },
            ColumnType::MediumInt { unsigned: true },
            ColumnType::Int { unsigned: false },
            ColumnType::Int { unsigned: true },
            ColumnType::BigInt { unsigned: false },
            ColumnType::BigInt { unsigned: true },
        ];
        let columns: Vec<Column> = types
            .iter()
            .enumerate()
            .map(|(i, ty)| Column::new(format!("c{i}"), *ty))
            .collect();
        let table = TableDef::new("t", 1, columns).primary_key(vec![0]);
        let layout = RowLayout::new(&table);
        assert!(layout.integer_reads().is_some());
        let value = |ty: &ColumnType, pick: usize| {
            let (min, max) = ty.integer_range().expect("an integer column");
            let v = [min, max, 0, -1, 1][pick];
            let v = v.clamp(min, max);
            match i64::try_from(v) {
                Ok(v) if ty.is_signed_integer() => Value::Int(v),
                _ => Value::UInt(u64::try_from(v).expect("an unsigned column's value")),
            }
        };
        for pick in 0..5 {
            let row: Vec<Value> = types.iter().map(|ty| value(ty, pick)).collect();
            let (mut fixed, mut var) = (Vec::new(), Vec::new());
            layout.encode(&row, &mut fixed, &mut var).unwrap();
            let mut whole = Gathered::default();
            whole.begin_row();
            whole.values(types.len(), |out| {
                put_all_columns(out, &layout, &fixed, &var, types.len())
            });
            whole.end_row(0);
            let mut each = Gathered::default();
            each.begin_row();
            each.values(types.len(), |out| {
                for c in 0..types.len() {
                    put_column(out, &layout, &fixed, &var, c);
                }
            });
            each.end_row(0);
            assert_eq!(whole.bytes, each.bytes, "row {pick}: {row:?}");
            assert_eq!(whole.entries, each.entries, "row {pick}");
        }
    }
}
