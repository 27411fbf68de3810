//! Results and scanned rows gathered across lock waits.
//!
//! Why: an LDM request or a scan batch may stop half-way for a row lock and
//! go on later, but `proto`'s writers borrow their output buffer for their
//! whole life, so they cannot be kept in a record between signals. The
//! values of each answer are encoded here as they are read (a read must
//! return the row as it was when it ran, not as a later operation of the
//! same request left it) and turned into one `proto` batch when the answer
//! goes out. The buffers are kept and reused: once warm, gathering
//! allocates nothing.

use proto::results::ResultWriter;
use proto::scan::RowBatchWriter;
use proto::value::{get_value, put_value, Reader};
use storage::schema::ValueRef;

/// One gathered answer: an outcome, or a row whose values end at `end`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Entry {
    op_index: u32,
    /// 0 for success, else a `proto::error` code.
    code: u32,
    row: bool,
    values: u16,
    keys: u16,
    /// End of the row's values in `Gathered::bytes`.
    end: u32,
}

/// Answers (per-op results, or scanned rows) gathered for one signal.
#[derive(Debug, Default)]
pub(super) struct Gathered {
    entries: Vec<Entry>,
    /// Values of the rows, back to back, as `proto::value` encodes them.
    bytes: Vec<u8>,
    /// The row being added: its start in `bytes` and its counts.
    open: Option<(usize, u16, u16)>,
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
            end: self.bytes.len() as u32,
        });
    }

    /// Starts a row: its values, then its key values, then `end_row`.
    pub(super) fn begin_row(&mut self) {
        assert!(self.open.is_none(), "a row is being added");
        self.open = Some((self.bytes.len(), 0, 0));
    }

    pub(super) fn value(&mut self, v: ValueRef<'_>) {
        let open = self.open.as_mut().expect("begin_row first");
        debug_assert_eq!(open.2, 0, "values before key values");
        open.1 += 1;
        put_value(&mut self.bytes, v);
    }

    pub(super) fn key(&mut self, v: ValueRef<'_>) {
        let open = self.open.as_mut().expect("begin_row first");
        open.2 += 1;
        put_value(&mut self.bytes, v);
    }

    pub(super) fn end_row(&mut self, op_index: u32) {
        let (_, values, keys) = self.open.take().expect("begin_row first");
        self.entries.push(Entry {
            op_index,
            code: 0,
            row: true,
            values,
            keys,
            end: self.bytes.len() as u32,
        });
    }

    /// The values of entry `i`, in order (values, then key values).
    fn values_of(&self, i: usize) -> (Reader<'_>, u16, u16) {
        let entry = self.entries[i];
        let start = if i == 0 {
            0
        } else {
            self.entries[i - 1].end as usize
        };
        let reader = Reader::new(&self.bytes[start..entry.end as usize], "gathered row");
        (reader, entry.values, entry.keys)
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
                writer.row(entry.op_index);
                let (mut reader, values, keys) = self.values_of(*next);
                for _ in 0..values {
                    writer.value(read(&mut reader));
                }
                for _ in 0..keys {
                    writer.key(read(&mut reader));
                }
                writer.end_row()
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
            writer.row();
            let (mut reader, values, keys) = self.values_of(*next);
            for _ in 0..values {
                writer.value(read(&mut reader));
            }
            for _ in 0..keys {
                writer.key(read(&mut reader));
            }
            if writer.end_row().is_err() {
                assert!(*next > first, "one row always fits a batch");
                return;
            }
            *next += 1;
        }
    }
}

/// A value this module encoded itself: reading it back cannot fail.
fn read<'a>(reader: &mut Reader<'a>) -> ValueRef<'a> {
    match get_value(reader) {
        Ok(v) => v,
        Err(e) => panic!("a value encoded by the LDM does not decode: {e}"),
    }
}
