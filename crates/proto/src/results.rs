//! Per-op results: what the LDM answers for each operation of an op batch
//! and the TC passes back to the client.
//!
//! A result is "ok", an error code (see [`crate::error`]), or a row: the
//! projected columns' values in projection order (all columns in table
//! order when the read projected none), followed by the primary key's
//! values when the op asked for [`crate::ops::KEY_INFO`]. As with op
//! batches, [`ResultReader::new`] validates the whole batch once and the
//! iterators cannot fail afterwards; reading allocates nothing.
//!
//! A reader that passes a batch on without reading its values (the TC,
//! with batches from its own cluster's LDMs) checks the frames only, with
//! [`ResultReader::framed`]: each row's byte lengths let it step over the
//! values. A reader that reads every value once (the client) also checks
//! by frame and reads the values with [`OpResult::try_values`], which
//! checks each as it reads it: one pass, not two.
//!
//! # Layout
//!
//! ```text
//! "RB"          magic, 2 bytes
//! u8            format version (RESULT_BATCH_FORMAT_VERSION = 2)
//! u32           result count, at most OPS_PER_BATCH_MAX
//! then per result:
//!   u8          kind: 0 ok, 1 error, 2 row
//!   u32         op_index
//!   kind 1:     u32 error code, never 0
//!   kind 2:     u16 value count, u16 key count, u32 value bytes, u32 key bytes,
//!               the values, then the key values
//! ```
//!
//! The whole batch is at most [`BATCH_BYTES_MAX`] bytes.

use schema::ValueRef;

use crate::ops::{validated, Values, BATCH_BYTES_MAX, OPS_PER_BATCH_MAX};
use crate::value::{get_row, Check, EncodedValues, OpenRow, Reader, RowParts};
use crate::ProtoError as Error;
use crate::ProtoError;

/// The two bytes a result batch starts with.
pub const RESULT_BATCH_MAGIC: [u8; 2] = *b"RB";
/// The format version this build writes and reads.
pub const RESULT_BATCH_FORMAT_VERSION: u8 = 2;

const KIND_OK: u8 = 0;
const KIND_ERROR: u8 = 1;
const KIND_ROW: u8 = 2;
const BATCH_HEADER_BYTES: usize = 2 + 1 + 4;
const COUNT_OFFSET: usize = 3;

/// Appends a result batch to a buffer. The buffer holds a valid batch after
/// every completed result; a row begun and not ended is removed when the
/// writer is dropped. Values of a row come before its key values; calling
/// `value`/`key` outside `row`/`end_row`, or a value after a key, panics.
pub struct ResultWriter<'a> {
    out: &'a mut Vec<u8>,
    start: usize,
    results: usize,
    open: Option<OpenRow>,
}

impl<'a> ResultWriter<'a> {
    /// Starts a batch at the end of `out`.
    pub fn new(out: &'a mut Vec<u8>) -> ResultWriter<'a> {
        let start = out.len();
        out.extend_from_slice(&RESULT_BATCH_MAGIC);
        out.push(RESULT_BATCH_FORMAT_VERSION);
        out.extend_from_slice(&0u32.to_le_bytes());
        ResultWriter {
            out,
            start,
            results: 0,
            open: None,
        }
    }

    /// Results completed so far.
    pub fn result_count(&self) -> usize {
        self.results
    }

    /// Bytes of the batch so far.
    pub fn batch_bytes(&self) -> usize {
        self.out.len() - self.start
    }

    /// The op succeeded and returns no row.
    pub fn ok(&mut self, op_index: u32) -> Result<(), ProtoError> {
        let start = self.begin(KIND_OK, op_index);
        self.complete(start)
    }

    /// The op failed with `code` (not 0).
    pub fn error(&mut self, op_index: u32, code: u32) -> Result<(), ProtoError> {
        assert_ne!(code, 0, "error code 0 means success: use ok()");
        let start = self.begin(KIND_ERROR, op_index);
        self.out.extend_from_slice(&code.to_le_bytes());
        self.complete(start)
    }

    /// Starts a row for the op; add its values, then its key values (key
    /// info), then [`ResultWriter::end_row`].
    pub fn row(&mut self, op_index: u32) {
        let start = self.begin(KIND_ROW, op_index);
        self.open = Some(OpenRow::begin(self.out, start));
    }

    /// A whole row whose values and key values are already encoded (by
    /// [`crate::put_value`], as a row gathered by an LDM): copied, not
    /// re-encoded. `values` and `keys` are (count, bytes).
    pub fn encoded_row(
        &mut self,
        op_index: u32,
        values: EncodedValues<'_>,
        keys: EncodedValues<'_>,
    ) -> Result<(), ProtoError> {
        self.row(op_index);
        self.open
            .as_mut()
            .expect("row() opened it")
            .encoded(self.out, values, keys);
        self.end_row()
    }

    /// All of the open row's `count` values, written by `encode` at the
    /// end of the batch's buffer, each as [`crate::put_value`] encodes it:
    /// a row copied out of storage in the wire encoding goes in with no
    /// copy in between. Key values may follow; then [`ResultWriter::end_row`].
    pub fn values_encoded(&mut self, count: usize, encode: impl FnOnce(&mut Vec<u8>)) {
        self.open
            .as_mut()
            .expect("ResultWriter::values_encoded outside row()/end_row()")
            .encoded_values(self.out, count, encode);
    }

    /// The next projected column's value.
    pub fn value(&mut self, v: ValueRef<'_>) {
        self.open
            .as_mut()
            .expect("ResultWriter::value outside row()/end_row()")
            .value(self.out, v);
    }

    /// The next primary-key value (key info).
    pub fn key(&mut self, v: ValueRef<'_>) {
        self.open
            .as_mut()
            .expect("ResultWriter::key outside row()/end_row()")
            .key(self.out, v);
    }

    /// Ends the row. If it breaks a limit the row is removed and the error
    /// says which: send the batch and answer the op in the next one.
    pub fn end_row(&mut self) -> Result<(), ProtoError> {
        let row = self
            .open
            .take()
            .expect("ResultWriter::end_row without row()");
        if let Some((field, count)) = row.over_limit(self.out) {
            self.out.truncate(row.start);
            return Err(over_limit(field, count, usize::from(u16::MAX)));
        }
        row.finish(self.out);
        self.complete(row.start)
    }

    fn begin(&mut self, kind: u8, op_index: u32) -> usize {
        assert!(
            self.open.is_none(),
            "ResultWriter: end_row() the open row first"
        );
        let start = self.out.len();
        self.out.push(kind);
        self.out.extend_from_slice(&op_index.to_le_bytes());
        start
    }

    /// Counts the result that starts at `start`, or removes it if the batch
    /// would break a limit.
    fn complete(&mut self, start: usize) -> Result<(), ProtoError> {
        let limits = [
            ("results per batch", self.results + 1, OPS_PER_BATCH_MAX),
            ("batch bytes", self.batch_bytes(), BATCH_BYTES_MAX),
        ];
        for (field, value, max) in limits {
            if value > max {
                self.out.truncate(start);
                return Err(over_limit(field, value, max));
            }
        }
        self.results += 1;
        let at = self.start + COUNT_OFFSET;
        self.out[at..at + 4].copy_from_slice(&(self.results as u32).to_le_bytes());
        Ok(())
    }
}

impl Drop for ResultWriter<'_> {
    fn drop(&mut self) {
        if let Some(row) = self.open.take() {
            self.out.truncate(row.start);
        }
    }
}

fn over_limit(field: &'static str, value: usize, max: usize) -> ProtoError {
    ProtoError::OverLimit {
        what: "result batch",
        field,
        value: value as u64,
        max: max as u64,
    }
}

/// A validated result batch.
#[derive(Clone, Copy, Debug)]
pub struct ResultReader<'a> {
    results: &'a [u8],
    count: usize,
}

impl<'a> ResultReader<'a> {
    /// Validates the whole batch; afterwards nothing read from it can fail.
    pub fn new(bytes: &'a [u8]) -> Result<ResultReader<'a>, ProtoError> {
        ResultReader::read(bytes, Check::Values, |_| {})
    }

    /// Checks the batch's structure (header, kinds, counts, each row's byte
    /// lengths) but not its values: for a batch passed on unread, or whose
    /// values are read with [`OpResult::try_values`]. [`OpResult::values`]
    /// of such a batch trusts the values (a bad one ends the iteration).
    pub fn framed(bytes: &'a [u8]) -> Result<ResultReader<'a>, ProtoError> {
        ResultReader::read(bytes, Check::Frame, |_| {})
    }

    /// [`ResultReader::framed`] that hands `each` every result as it reads
    /// it: a reader that needs each result once parses it once.
    pub fn framed_each(
        bytes: &'a [u8],
        each: impl FnMut(OpResult<'a>),
    ) -> Result<ResultReader<'a>, ProtoError> {
        ResultReader::read(bytes, Check::Frame, each)
    }

    fn read(
        bytes: &'a [u8],
        check: Check,
        each: impl FnMut(OpResult<'a>),
    ) -> Result<ResultReader<'a>, ProtoError> {
        let count = crate::value::read_batch(
            bytes,
            "result batch",
            (RESULT_BATCH_MAGIC, RESULT_BATCH_FORMAT_VERSION),
            ("result count", OPS_PER_BATCH_MAX),
            |r| parse_result(r, check),
            each,
        )?;
        Ok(ResultReader {
            results: &bytes[BATCH_HEADER_BYTES..],
            count,
        })
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn iter(&self) -> ResultIter<'a> {
        ResultIter {
            r: Reader::new(self.results, "result batch"),
            left: self.count,
        }
    }
}

impl<'a> IntoIterator for &ResultReader<'a> {
    type Item = OpResult<'a>;
    type IntoIter = ResultIter<'a>;
    fn into_iter(self) -> ResultIter<'a> {
        self.iter()
    }
}

fn parse_result<'a>(r: &mut Reader<'a>, check: Check) -> Result<OpResult<'a>, ProtoError> {
    let at = r.position();
    let [kind, a, b, c, d] = r.array::<5>()?;
    let op_index = u32::from_le_bytes([a, b, c, d]);
    let mut result = OpResult {
        op_index,
        code: 0,
        has_row: false,
        row: RowParts::default(),
    };
    match kind {
        KIND_OK => {}
        KIND_ERROR => {
            let code_at = r.position();
            result.code = r.u32()?;
            if result.code == 0 {
                return Err(r.bad_field(code_at, "error code", 0));
            }
        }
        KIND_ROW => {
            result.has_row = true;
            result.row = get_row(r, check)?;
        }
        other => return Err(r.bad_field(at, "result kind", u64::from(other))),
    }
    Ok(result)
}

/// The results of a validated batch.
pub struct ResultIter<'a> {
    r: Reader<'a>,
    left: usize,
}

impl<'a> Iterator for ResultIter<'a> {
    type Item = OpResult<'a>;

    fn next(&mut self) -> Option<OpResult<'a>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        // The frames were checked when the reader was made.
        validated(parse_result(&mut self.r, Check::Frame))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.left))
    }
}

/// The result of one op, borrowing the batch.
#[derive(Clone, Copy, Debug)]
pub struct OpResult<'a> {
    pub op_index: u32,
    /// 0 for success, else an error code.
    pub code: u32,
    /// Whether the op returned a row (a read).
    pub has_row: bool,
    row: RowParts<'a>,
}

impl<'a> OpResult<'a> {
    pub fn is_ok(&self) -> bool {
        self.code == 0
    }

    pub fn value_count(&self) -> usize {
        self.row.value_count()
    }

    pub fn key_count(&self) -> usize {
        self.row.key_count()
    }

    /// The row's values (none without a row).
    pub fn values(&self) -> Values<'a> {
        self.row.values()
    }

    /// The row's primary-key values, when the op asked for key info.
    pub fn keys(&self) -> Values<'a> {
        self.row.keys()
    }

    /// The row's values as encoded (count, bytes), to keep undecoded.
    pub fn encoded_values(&self) -> EncodedValues<'a> {
        self.row.encoded_values()
    }

    /// The row's key values as encoded.
    pub fn encoded_keys(&self) -> EncodedValues<'a> {
        self.row.encoded_keys()
    }

    /// Reads and checks the row's values in one pass (see
    /// [`ResultReader::framed`]).
    pub fn try_values(&self, each: impl FnMut(ValueRef<'a>)) -> Result<(), Error> {
        self.row.try_values(each)
    }

    /// [`OpResult::try_values`] for the key values.
    pub fn try_keys(&self, each: impl FnMut(ValueRef<'a>)) -> Result<(), Error> {
        self.row.try_keys(each)
    }

    /// Checks the row's values and key values without decoding them (one
    /// pass, as `try_values` and `try_keys`).
    pub fn check_row(&self) -> Result<(), Error> {
        self.row.check()
    }
}
