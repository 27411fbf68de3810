//! Op batches: the key operations of a transaction, many to one buffer.
//!
//! The client writes one batch per `TcKeyReq` (any number of operations on
//! any tables); the transaction coordinator reads it, and for each LDM
//! writes a batch of that LDM's operations with [`OpBatchWriter::copy`],
//! which copies an operation's key, value and projection bytes unchanged
//! under a new header (a resolved partition, say). The LDM reads that.
//! Reading allocates nothing: values borrow the buffer.
//!
//! # Validation
//!
//! [`OpBatchReader::new`] validates the whole batch in one pass — every
//! length, count, tag, UTF-8 string and decimal — before it hands out a
//! single operation, so a bad batch is refused as a whole and iteration
//! afterwards cannot fail halfway: the iterators yield plain values. Whether
//! an operation fits its table is a second question, [`OpView::check`].
//! A reader that has the tables' [`CheckPlan`]s at hand
//! ([`OpBatchReader::new_each_planned`], the TC) answers the common part of
//! that question in the same pass: integer values that fit their columns.
//!
//! The TC does both for a client's batch. The LDM reads batches its TC
//! built from checked operations, so it checks their frames only
//! ([`OpBatchReader::framed`]: header, lengths, counts and keys, not the
//! written values, which storage checks again as it writes them): the
//! values of an update are read once on the LDM, not three times.
//!
//! # Layout
//!
//! ```text
//! "OB"          magic, 2 bytes
//! u8            format version (OP_BATCH_FORMAT_VERSION = 1)
//! u32           op count, at most OPS_PER_BATCH_MAX
//! then per op:
//!   u32         body bytes: the bytes of the op after this field
//!   u32 op_index, u32 table_id, u32 table_version,
//!   u32 index_id (NO_INDEX = by primary key), u32 partition (NO_PARTITION = not yet known)
//!   u8 kind     1 read, 2 insert, 3 update, 4 write, 5 delete
//!   u8 lock     0 committed read, 1 shared, 2 exclusive
//!   u8 flags    bit 0 IGNORE_ERROR, bit 1 KEY_INFO, bit 2 NO_WAIT,
//!               bit 3 SKIP_LOCKED (at most one of these two), bit 4 UNLOCK;
//!               other bits 0
//!   u16 key count, u16 value count, u16 projection count
//!   keys        key count × value (crate::value), in key order
//!   values      value count × (u16 column position, value)
//!   projection  projection count × u16 column position
//! ```
//!
//! The whole batch is at most [`BATCH_BYTES_MAX`] bytes.

use schema::{
    Column, IndexDef, IndexKind, TableDef, ValueRef, BLOB_INLINE_BYTES, COLUMNS_MAX,
    INTEGER_CODE_UNSIGNED,
};

use crate::value::{
    get_integer, get_value_general, put_value, skip_value, Check, Reader, TAG_INT, TAG_UINT,
};
use crate::ProtoError;
use std::sync::atomic::{AtomicU64, Ordering};

/// The two bytes an op batch starts with.
pub const OP_BATCH_MAGIC: [u8; 2] = *b"OB";
/// The format version this build writes and reads.
pub const OP_BATCH_FORMAT_VERSION: u8 = 1;
/// Most operations in one batch: a bound on what one request makes the TC
/// hold, and plenty for batching (NDB's clients rarely go past a few
/// hundred per round trip).
pub const OPS_PER_BATCH_MAX: usize = 8_192;
/// Largest batch (op batches, result batches and row batches alike): it
/// must travel in one signal, whose frame holds at most
/// `signal::frame::FRAME_PAYLOAD_MAX_BYTES` (1 MiB); 64 KiB are left for
/// the signal's header and other fields.
pub const BATCH_BYTES_MAX: usize = 960 * 1024;
const _: () = assert!(BATCH_BYTES_MAX + 64 * 1024 <= signal::frame::FRAME_PAYLOAD_MAX_BYTES);
/// An op by primary key, not by a unique index.
pub const NO_INDEX: u32 = u32::MAX;
/// The partition is not (yet) known: the TC computes it from the key.
pub const NO_PARTITION: u32 = u32::MAX;
/// Op flag: a failure of this op does not abort the transaction (NDB's
/// `AO_IgnoreError`); its result carries the error code.
pub const IGNORE_ERROR: u8 = 1;
/// Op flag: a read also returns the row's primary key values.
pub const KEY_INFO: u8 = 2;
/// Op flag: a locking read that would wait for another transaction's lock
/// fails at once with `error::LOCK_BUSY` instead (`FOR UPDATE NOWAIT`).
pub const NO_WAIT: u8 = 4;
/// Op flag: a locking read that would wait for another transaction's lock
/// finds no row instead (`error::NO_SUCH_ROW`: `SKIP LOCKED`).
pub const SKIP_LOCKED: u8 = 8;
/// Op flag: not a read but its undoing (NDB's unlock request): the
/// transaction lets go of its lock on the row, unless it changed the row
/// (then the lock stays to its end). A locking read by primary key with
/// no projection carries it; its result has no row.
pub const UNLOCK: u8 = 16;
const OP_FLAGS_KNOWN: u8 = IGNORE_ERROR | KEY_INFO | NO_WAIT | SKIP_LOCKED | UNLOCK;

const BATCH_HEADER_BYTES: usize = 2 + 1 + 4;
const OP_COUNT_OFFSET: usize = 3;
/// Bytes of an op after its length field and before its keys.
const OP_FIXED_BYTES: usize = 5 * 4 + 3 + 3 * 2;
/// Offset of the key count from the op's start (its length field).
const OP_COUNTS_OFFSET: usize = 4 + 5 * 4 + 3;

/// What an operation does to its row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpKind {
    Read = 1,
    Insert = 2,
    Update = 3,
    /// Insert or overwrite (upsert).
    Write = 4,
    Delete = 5,
}

impl OpKind {
    pub const ALL: [OpKind; 5] = [
        OpKind::Read,
        OpKind::Insert,
        OpKind::Update,
        OpKind::Write,
        OpKind::Delete,
    ];

    fn from_u8(v: u8) -> Option<OpKind> {
        OpKind::ALL.into_iter().find(|k| *k as u8 == v)
    }

    /// The SQL-ish name, for messages.
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Read => "read",
            OpKind::Insert => "insert",
            OpKind::Update => "update",
            OpKind::Write => "write",
            OpKind::Delete => "delete",
        }
    }
}

/// The lock a read takes (writes always lock exclusively).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LockMode {
    /// No lock: the last committed image.
    Committed = 0,
    Shared = 1,
    Exclusive = 2,
}

impl LockMode {
    pub const ALL: [LockMode; 3] = [LockMode::Committed, LockMode::Shared, LockMode::Exclusive];

    pub(crate) fn from_u8(v: u8) -> Option<LockMode> {
        LockMode::ALL.into_iter().find(|k| *k as u8 == v)
    }
}

/// What a locking read does about a row another transaction holds in a
/// conflicting mode (`Shared` and `Exclusive` reads; a committed read never
/// waits).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum LockWait {
    /// Waits for the lock, up to the deadlock timeout (the default).
    #[default]
    Wait = 0,
    /// Fails at once with `error::LOCK_BUSY` (`NOWAIT`): nothing is queued.
    NoWait = 1,
    /// Passes the row by (`SKIP LOCKED`): a key read finds no row, a scan
    /// goes on to the next one.
    SkipLocked = 2,
}

impl LockWait {
    pub const ALL: [LockWait; 3] = [LockWait::Wait, LockWait::NoWait, LockWait::SkipLocked];

    pub(crate) fn from_u8(v: u8) -> Option<LockWait> {
        LockWait::ALL.into_iter().find(|k| *k as u8 == v)
    }

    /// The op flag saying it ([`NO_WAIT`], [`SKIP_LOCKED`]; 0 to wait).
    pub fn op_flag(self) -> u8 {
        match self {
            LockWait::Wait => 0,
            LockWait::NoWait => NO_WAIT,
            LockWait::SkipLocked => SKIP_LOCKED,
        }
    }

    /// The policy an op's flags say.
    pub fn of_op_flags(flags: u8) -> LockWait {
        if flags & NO_WAIT != 0 {
            LockWait::NoWait
        } else if flags & SKIP_LOCKED != 0 {
            LockWait::SkipLocked
        } else {
            LockWait::Wait
        }
    }
}

/// The fixed part of an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OpHeader {
    /// Position of the op in the client's request; results name it.
    pub op_index: u32,
    pub table_id: u32,
    pub table_version: u32,
    /// A unique index's id for an op by unique key, else [`NO_INDEX`].
    pub index_id: u32,
    /// The partition, or [`NO_PARTITION`] before the TC computed it.
    pub partition: u32,
    pub kind: OpKind,
    pub lock: LockMode,
    /// [`IGNORE_ERROR`] and [`KEY_INFO`].
    pub flags: u8,
}

impl OpHeader {
    /// Writes the header into `out`, its place in an op's fixed part.
    fn write(&self, out: &mut [u8; OP_COUNTS_OFFSET - 4]) {
        let fields = [
            self.op_index,
            self.table_id,
            self.table_version,
            self.index_id,
            self.partition,
        ];
        for (place, field) in out.chunks_exact_mut(4).zip(fields) {
            place.copy_from_slice(&field.to_le_bytes());
        }
        out[5 * 4..].copy_from_slice(&[self.kind as u8, self.lock as u8, self.flags]);
    }

    /// Reads the header from the op's fixed part, `fixed` (which `parse_op`
    /// takes in one bounds check), the part read at `at` of `r`.
    #[inline(always)]
    fn from_fixed(
        fixed: &[u8; OP_FIXED_BYTES],
        at: usize,
        r: &Reader<'_>,
    ) -> Result<OpHeader, ProtoError> {
        let word =
            |i: usize| u32::from_le_bytes([fixed[i], fixed[i + 1], fixed[i + 2], fixed[i + 3]]);
        let (op_index, table_id, table_version) = (word(0), word(4), word(8));
        let (index_id, partition) = (word(12), word(16));
        let [kind, lock, flags] = [fixed[20], fixed[21], fixed[22]];
        let kind = OpKind::from_u8(kind)
            .ok_or_else(|| r.bad_field(at + 20, "op kind", u64::from(kind)))?;
        let lock = LockMode::from_u8(lock)
            .ok_or_else(|| r.bad_field(at + 21, "lock mode", u64::from(lock)))?;
        if flags & !OP_FLAGS_KNOWN != 0 {
            return Err(r.bad_field(at + 22, "op flags", u64::from(flags)));
        }
        Ok(OpHeader {
            op_index,
            table_id,
            table_version,
            index_id,
            partition,
            kind,
            lock,
            flags,
        })
    }
}

/// Which part of an op the writer is in; parts come in this order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Part {
    Keys,
    Values,
    Projection,
}

/// The op being written.
#[derive(Clone, Copy, Debug)]
struct OpenOp {
    start: usize,
    part: Part,
    counts: [usize; 3],
}

/// Appends an op batch to a buffer. The buffer holds a valid batch after
/// every [`OpBatchWriter::end`]; an op begun and not ended is removed when
/// the writer is dropped.
///
/// Within an op, keys come first, then values, then the projection; calling
/// them out of order, or outside `begin`/`end`, is a bug and panics.
pub struct OpBatchWriter<'a> {
    out: &'a mut Vec<u8>,
    start: usize,
    ops: usize,
    open: Option<OpenOp>,
}

impl<'a> OpBatchWriter<'a> {
    /// Starts a batch at the end of `out`.
    pub fn new(out: &'a mut Vec<u8>) -> OpBatchWriter<'a> {
        let start = out.len();
        out.extend_from_slice(&OP_BATCH_MAGIC);
        out.push(OP_BATCH_FORMAT_VERSION);
        out.extend_from_slice(&0u32.to_le_bytes());
        OpBatchWriter {
            out,
            start,
            ops: 0,
            open: None,
        }
    }

    /// Operations ended so far.
    pub fn op_count(&self) -> usize {
        self.ops
    }

    /// Bytes of the batch so far (an open op included).
    pub fn batch_bytes(&self) -> usize {
        self.out.len() - self.start
    }

    /// Starts an operation.
    pub fn begin(&mut self, header: &OpHeader) {
        assert!(
            self.open.is_none(),
            "OpBatchWriter::begin inside an op: end() the previous one"
        );
        let start = self.out.len();
        // The op's length, header and counts in one write; `end` fills in
        // the length and the counts.
        let mut fixed = [0u8; 4 + OP_FIXED_BYTES];
        let (_, rest) = fixed.split_at_mut(4);
        let (header_bytes, _) = rest.split_first_chunk_mut().expect("the header fits");
        header.write(header_bytes);
        self.out.extend_from_slice(&fixed);
        self.open = Some(OpenOp {
            start,
            part: Part::Keys,
            counts: [0; 3],
        });
    }

    #[inline]
    fn enter(&mut self, part: Part) -> &mut OpenOp {
        let op = self
            .open
            .as_mut()
            .expect("OpBatchWriter: begin() an op first");
        assert!(
            op.part <= part,
            "OpBatchWriter: keys, then values, then the projection"
        );
        op.part = part;
        op.counts[part as usize] += 1;
        op
    }

    /// Adds the value of the next key column (primary key columns in key
    /// order, or the unique index's columns).
    pub fn key(&mut self, v: ValueRef<'_>) {
        self.enter(Part::Keys);
        put_value(self.out, v);
    }

    /// Adds a written column (insert and write: every non-key column;
    /// update: the changed ones). Inline: a client writes every value of
    /// an update through here.
    #[inline]
    pub fn value(&mut self, column: u16, v: ValueRef<'_>) {
        self.enter(Part::Values);
        put_pair(self.out, column, v);
    }

    /// Adds written columns in one call, the same bytes as [`OpBatchWriter::value`]
    /// for each `(column, value)` in order: the op's state is looked at once
    /// and the room for integers reserved once, so a wide update of integer
    /// columns costs a copy of each pair's 11 bytes.
    pub fn values<'v>(&mut self, values: impl ExactSizeIterator<Item = (u16, ValueRef<'v>)>) {
        let count = values.len();
        if count == 0 {
            return;
        }
        let op = self.enter(Part::Values);
        // `enter` counted one.
        op.counts[Part::Values as usize] += count - 1;
        self.out.reserve(count * INTEGER_PAIR_BYTES);
        for (column, v) in values {
            put_pair(self.out, column, v);
        }
    }

    /// Adds written integer columns in one call: each `(column, signed,
    /// x)` as [`OpBatchWriter::value`] writes `ValueRef::Int(x as i64)`
    /// (signed) or `ValueRef::UInt(x)`. Their room is made at once and each
    /// pair's 11 bytes written into it: an update of many integer columns
    /// costs about a copy per value.
    pub fn integer_values(&mut self, values: impl ExactSizeIterator<Item = (u16, bool, u64)>) {
        let count = values.len();
        if count == 0 {
            return;
        }
        let op = self.enter(Part::Values);
        // `enter` counted one.
        op.counts[Part::Values as usize] += count - 1;
        let start = self.out.len();
        self.out.resize(start + count * INTEGER_PAIR_BYTES, 0);
        let mut written = 0;
        let room = self.out[start..].chunks_exact_mut(INTEGER_PAIR_BYTES);
        for (pair, (column, signed, x)) in room.zip(values) {
            let [c0, c1] = column.to_le_bytes();
            let tag = if signed { TAG_INT } else { TAG_UINT };
            let [a, b, c, d, e, f, g, h] = x.to_le_bytes();
            pair.copy_from_slice(&[c0, c1, tag, a, b, c, d, e, f, g, h]);
            written += 1;
        }
        assert_eq!(written, count, "an ExactSizeIterator yields its len");
    }

    /// Adds a column to read; a read without any reads every column.
    pub fn project(&mut self, column: u16) {
        self.enter(Part::Projection);
        self.out.extend_from_slice(&column.to_le_bytes());
    }

    /// Ends the op. If it would break a limit (ops per batch, batch bytes,
    /// 65,535 keys/values/columns per op) it is removed from the batch and
    /// the error says which: send the batch and put the op in the next one.
    pub fn end(&mut self) -> Result<(), ProtoError> {
        let op = self.open.take().expect("OpBatchWriter::end without begin");
        let (ops, bytes) = (self.ops + 1, self.out.len() - self.start);
        let counts_max = usize::from(u16::MAX);
        if ops > OPS_PER_BATCH_MAX
            || bytes > BATCH_BYTES_MAX
            || op.counts.iter().any(|&count| count > counts_max)
        {
            return Err(self.over_limit(op));
        }
        let body =
            u32::try_from(self.out.len() - op.start - 4).expect("an op within BATCH_BYTES_MAX");
        // The length and the counts in place, in the op's fixed part.
        let fixed: &mut [u8; 4 + OP_FIXED_BYTES] = (&mut self.out
            [op.start..op.start + 4 + OP_FIXED_BYTES])
            .try_into()
            .expect("an op's fixed part");
        fixed[..4].copy_from_slice(&body.to_le_bytes());
        for (place, count) in fixed[OP_COUNTS_OFFSET..].chunks_exact_mut(2).zip(op.counts) {
            place.copy_from_slice(&(count as u16).to_le_bytes());
        }
        self.ops = ops;
        let count_at = self.start + OP_COUNT_OFFSET;
        self.out[count_at..count_at + 4].copy_from_slice(&(self.ops as u32).to_le_bytes());
        Ok(())
    }

    /// The error of an op that breaks a limit (see `end`), removed from the batch.
    #[cold]
    fn over_limit(&mut self, op: OpenOp) -> ProtoError {
        let limits = [
            ("ops per batch", self.ops + 1, OPS_PER_BATCH_MAX),
            ("batch bytes", self.out.len() - self.start, BATCH_BYTES_MAX),
            ("keys of one op", op.counts[0], usize::from(u16::MAX)),
            ("values of one op", op.counts[1], usize::from(u16::MAX)),
            (
                "projected columns of one op",
                op.counts[2],
                usize::from(u16::MAX),
            ),
        ];
        let (field, value, max) = limits
            .into_iter()
            .find(|&(_, value, max)| value > max)
            .expect("an op over a limit");
        self.out.truncate(op.start);
        ProtoError::OverLimit {
            what: "op batch",
            field,
            value: value as u64,
            max: max as u64,
        }
    }

    /// Appends an op read from another batch under a new header, copying
    /// its keys, values and projection as bytes (no re-encoding).
    pub fn copy(&mut self, header: &OpHeader, op: &OpView<'_>) -> Result<(), ProtoError> {
        self.begin(header);
        self.out.extend_from_slice(op.keys);
        self.out.extend_from_slice(op.values);
        self.out.extend_from_slice(op.projection);
        let open = self.open.as_mut().expect("begun above");
        open.part = Part::Projection;
        open.counts = [
            usize::from(op.key_count),
            usize::from(op.value_count),
            usize::from(op.projection_count),
        ];
        self.end()
    }
}

impl Drop for OpBatchWriter<'_> {
    fn drop(&mut self) {
        // An op never ended is not part of the batch.
        if let Some(op) = self.open.take() {
            self.out.truncate(op.start);
        }
    }
}

/// A validated op batch (see the module doc).
#[derive(Clone, Copy, Debug)]
pub struct OpBatchReader<'a> {
    /// The ops, after the batch header.
    ops: &'a [u8],
    count: usize,
}

impl<'a> OpBatchReader<'a> {
    /// Validates the whole batch; afterwards nothing read from it can fail.
    /// Allocates nothing unless it fails.
    pub fn new(bytes: &'a [u8]) -> Result<OpBatchReader<'a>, ProtoError> {
        OpBatchReader::read(bytes, Check::Values, |_| None, |_| {})
    }

    /// [`OpBatchReader::new`] that hands `each` the view of every op as it
    /// checks it: a reader that keeps the views parses each op once, not
    /// once to check and again to iterate. On an error, `each` has seen
    /// the ops before the bad one.
    pub fn new_each(
        bytes: &'a [u8],
        each: impl FnMut(OpView<'a>),
    ) -> Result<OpBatchReader<'a>, ProtoError> {
        OpBatchReader::read(bytes, Check::Values, |_| None, each)
    }

    /// [`OpBatchReader::new_each`] that also tries, in the same pass over
    /// each op's values, the integer check of [`OpView::check_with`] with
    /// the plan `plan_of` gives for the op's table id: an op whose values
    /// are all integers fitting that plan is marked, and `check_with` with
    /// the same plan does not walk its values again. The batch is checked
    /// and refused exactly as by `new_each`; the mark only saves work.
    pub fn new_each_planned<'p>(
        bytes: &'a [u8],
        plan_of: impl Fn(u32) -> Option<&'p CheckPlan>,
        each: impl FnMut(OpView<'a>),
    ) -> Result<OpBatchReader<'a>, ProtoError> {
        OpBatchReader::read(bytes, Check::Values, plan_of, each)
    }

    /// Checks the batch's frames (header, each op's length, header fields,
    /// counts and key values) but not its written values: for a batch a TC
    /// of this cluster built from operations it checked. The values of such
    /// a batch are trusted by [`OpView::values`] (a bad one ends the
    /// iteration; a debug build asserts).
    pub fn framed(bytes: &'a [u8]) -> Result<OpBatchReader<'a>, ProtoError> {
        OpBatchReader::read(bytes, Check::Frame, |_| None, |_| {})
    }

    /// [`OpBatchReader::framed`] of a batch of exactly one op, parsed once:
    /// that op's view.
    pub fn framed_one(bytes: &'a [u8]) -> Result<OpView<'a>, ProtoError> {
        let mut view = None;
        crate::value::read_batch(
            bytes,
            "op batch",
            (OP_BATCH_MAGIC, OP_BATCH_FORMAT_VERSION),
            ("op count (one op expected)", 1),
            |r| parse_op(r, Check::Frame, |_| None),
            |v| view = Some(v),
        )?;
        view.ok_or(ProtoError::BadField {
            what: "op batch",
            offset: OP_COUNT_OFFSET,
            field: "op count (one op expected)",
            value: 0,
        })
    }

    /// A reader of a batch this process read already (by any constructor
    /// above, which gave `count`), that reads nothing now: a batch kept
    /// and read again later, such as an LDM's parked request, is not
    /// checked twice. Iterating bytes that were not checked reads only
    /// what is there (a bad op ends the iteration; a debug build asserts).
    pub fn checked_before(bytes: &'a [u8], count: usize) -> OpBatchReader<'a> {
        debug_assert!(
            OpBatchReader::framed(bytes).is_ok_and(|r| r.len() == count),
            "a batch read before, of {count} ops"
        );
        OpBatchReader {
            ops: bytes.get(BATCH_HEADER_BYTES..).unwrap_or_default(),
            count,
        }
    }

    /// [`OpBatchReader::framed`] that hands `each` the view of every op as
    /// it reads it (see [`OpBatchReader::new_each`]).
    pub fn framed_each(
        bytes: &'a [u8],
        each: impl FnMut(OpView<'a>),
    ) -> Result<OpBatchReader<'a>, ProtoError> {
        OpBatchReader::read(bytes, Check::Frame, |_| None, each)
    }

    fn read<'p>(
        bytes: &'a [u8],
        check: Check,
        plan_of: impl Fn(u32) -> Option<&'p CheckPlan>,
        each: impl FnMut(OpView<'a>),
    ) -> Result<OpBatchReader<'a>, ProtoError> {
        let count = crate::value::read_batch(
            bytes,
            "op batch",
            (OP_BATCH_MAGIC, OP_BATCH_FORMAT_VERSION),
            ("op count", OPS_PER_BATCH_MAX),
            |r| parse_op(r, check, &plan_of),
            each,
        )?;
        Ok(OpBatchReader {
            ops: &bytes[BATCH_HEADER_BYTES..],
            count,
        })
    }

    /// Number of operations.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The operations, in batch order.
    pub fn iter(&self) -> OpIter<'a> {
        OpIter {
            r: Reader::new(self.ops, "op batch"),
            left: self.count,
        }
    }
}

impl<'a> IntoIterator for &OpBatchReader<'a> {
    type Item = OpView<'a>;
    type IntoIter = OpIter<'a>;
    fn into_iter(self) -> OpIter<'a> {
        self.iter()
    }
}

/// Reads one op, returning its view; checks its values too with
/// [`Check::Values`], and then, if `plan_of` gives a plan for the op's
/// table, whether they are integers that fit it (`OpView::fitted_plan`).
fn parse_op<'a, 'p>(
    r: &mut Reader<'a>,
    check: Check,
    plan_of: impl Fn(u32) -> Option<&'p CheckPlan>,
) -> Result<OpView<'a>, ProtoError> {
    let start = r.position();
    let body = r.u32()? as usize;
    if body > r.remaining() || body < OP_FIXED_BYTES {
        return Err(ProtoError::BadLength {
            what: r.what(),
            offset: start,
            field: "op length",
            declared: body,
            actual: r.remaining().min(body),
        });
    }
    let end = r.position() + body;
    // The fixed part (header and counts) in one read: the length check
    // above says it is there, so each field is a plain load.
    let fixed_at = r.position();
    let fixed = r.array::<OP_FIXED_BYTES>()?;
    let header = OpHeader::from_fixed(&fixed, fixed_at, r)?;
    let half = |i: usize| u16::from_le_bytes([fixed[i], fixed[i + 1]]);
    let (key_count, value_count, projection_count) = (half(23), half(25), half(27));
    let keys_at = r.position();
    for _ in 0..key_count {
        skip_value(r)?;
    }
    let values_at = r.position();
    let what = r.what();
    let bad_length = |actual: usize| ProtoError::BadLength {
        what,
        offset: start,
        field: "op length",
        declared: body,
        actual,
    };
    let projection_bytes = 2 * usize::from(projection_count);
    let mut fitted_plan = 0;
    let projection_at = match check {
        Check::Values => {
            let count = usize::from(value_count);
            // An op with no values (every read) looks up no plan.
            let plan = if count > 0 {
                plan_of(header.table_id)
            } else {
                None
            };
            let fixed = match plan {
                Some(plan) => {
                    let (stepped, fit) = step_fitting_pairs(r, count, plan);
                    if fit && stepped == count {
                        fitted_plan = plan.id;
                    }
                    stepped
                }
                _ => r.skip_fixed_pairs(count),
            };
            for _ in fixed..count {
                r.u16()?;
                skip_value(r)?;
            }
            let at = r.position();
            if at + projection_bytes != end {
                // Refused below, by the reads that say how.
                r.bytes(projection_bytes)?;
                return Err(bad_length(r.position() - start - 4));
            }
            at
        }
        Check::Frame => {
            // The projection ends the op: the values are what lies between.
            end.checked_sub(projection_bytes)
                .filter(|&at| at >= values_at)
                .ok_or_else(|| bad_length(values_at + projection_bytes - start - 4))?
        }
    };
    // Inside the buffer: `end` is, by the op length's check.
    r.skip_to(end);
    let whole = r.whole();
    Ok(OpView {
        header,
        key_count,
        value_count,
        projection_count,
        keys: &whole[keys_at..values_at],
        values: &whole[values_at..projection_at],
        projection: &whole[projection_at..end],
        fitted_plan,
    })
}

/// Steps `r` over the leading integer pairs of an op's `count` values, as
/// `Reader::skip_fixed_pairs` does (the caller's general loop reads what
/// follows), and decides on the way what `OpView::integer_values_fit`
/// decides of them with `plan`: (pairs stepped, whether each fit). The
/// values fit as a whole when every one was such a pair. Not inlined: in
/// its own function the loop keeps everything in registers (inlined into
/// a TC's request handling it spilled three moves a pair, more than the
/// call costs an op of a few values).
#[inline(never)]
fn step_fitting_pairs(r: &mut Reader<'_>, count: usize, plan: &CheckPlan) -> (usize, bool) {
    // A table of at most 64 columns (most) keeps the columns written so
    // far in one word, which stays in a register.
    if plan.ranges.len() <= 64 {
        step_fitting_pairs_in(r, count, plan, plan.refused.0[0])
    } else {
        step_fitting_pairs_in(r, count, plan, plan.refused.clone())
    }
}

/// [`step_fitting_pairs`] with `given` (the refused columns) as its set of
/// the columns taken.
#[inline(always)]
fn step_fitting_pairs_in(
    r: &mut Reader<'_>,
    count: usize,
    plan: &CheckPlan,
    mut given: impl TakenColumns,
) -> (usize, bool) {
    let at = r.position();
    let (pairs, _) = r.whole()[at..].as_chunks::<INTEGER_PAIR_BYTES>();
    let pairs = &pairs[..count.min(pairs.len())];
    let mut stepped = 0;
    for pair in pairs {
        if !is_integer_tag(pair[2]) {
            break;
        }
        if !pair_fits(plan, pair, &mut given) {
            // Not the fast case: the rest only has its structure stepped.
            let i = stepped + 1;
            r.skip_to(at + i * INTEGER_PAIR_BYTES);
            return (i + r.skip_fixed_pairs(count - i), false);
        }
        stepped += 1;
    }
    r.skip_to(at + stepped * INTEGER_PAIR_BYTES);
    (stepped, true)
}

/// Whether a tag is `TAG_INT` or `TAG_UINT`.
#[inline(always)]
fn is_integer_tag(tag: u8) -> bool {
    tag.wrapping_sub(TAG_INT) <= TAG_UINT - TAG_INT
}

/// Whether an integer pair (its tag tested already) fits `plan`: a column
/// of the table that takes an integer, the value in its range, the column
/// not in `given` (which it joins).
#[inline(always)]
fn pair_fits(
    plan: &CheckPlan,
    pair: &[u8; INTEGER_PAIR_BYTES],
    given: &mut impl TakenColumns,
) -> bool {
    let &[_, _, tag, a, b, c, d, e, f, g, h] = pair;
    let column = usize::from(u16::from_le_bytes(
        *pair.first_chunk().expect("a column first"),
    ));
    let Some(ranges) = plan.ranges.get(column) else {
        return false;
    };
    let range = ranges[usize::from(tag.wrapping_sub(TAG_INT))];
    let raw = u64::from_le_bytes([a, b, c, d, e, f, g, h]);
    if raw.wrapping_sub(range.low) > range.span || given.has(column) {
        return false;
    }
    given.add(column);
    true
}

/// Offset of the partition in an op's header.
const PARTITION_OFFSET: usize = 4 * 4;

/// Writes `partition` into the header of the op at `header_at` of `batch`
/// ([`OpView::header_offset`]): a TC forwarding a client's batch as it came
/// writes in only the partition it computed.
pub fn set_partition(batch: &mut [u8], header_at: usize, partition: u32) {
    let at = header_at + PARTITION_OFFSET;
    batch[at..at + 4].copy_from_slice(&partition.to_le_bytes());
}

/// The operations of a validated batch. A clone reads on from where this
/// one stands (a look-ahead over the ops still to run).
#[derive(Clone)]
pub struct OpIter<'a> {
    r: Reader<'a>,
    left: usize,
}

impl<'a> Iterator for OpIter<'a> {
    type Item = OpView<'a>;

    fn next(&mut self) -> Option<OpView<'a>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        // Checked as the reader was made: the frames are enough now.
        validated(parse_op(&mut self.r, Check::Frame, |_| None))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.left))
    }
}

/// Unwraps a read from bytes a reader's constructor has validated. An
/// error here is a bug in the validation; in a release build the iteration
/// then ends early rather than crash the node.
#[inline]
pub(crate) fn validated<T>(read: Result<T, ProtoError>) -> Option<T> {
    match read {
        Ok(item) => Some(item),
        Err(error) => {
            debug_assert!(false, "validated bytes failed to read: {error}");
            None
        }
    }
}

/// One operation of a batch, borrowing the batch.
#[derive(Clone, Copy, Debug)]
pub struct OpView<'a> {
    pub header: OpHeader,
    key_count: u16,
    value_count: u16,
    projection_count: u16,
    keys: &'a [u8],
    values: &'a [u8],
    projection: &'a [u8],
    /// The id of the [`CheckPlan`] whose integer check these values passed
    /// as they were read (`OpBatchReader::new_each_planned`); 0: none.
    fitted_plan: u64,
}

impl<'a> OpView<'a> {
    pub fn key_count(&self) -> usize {
        usize::from(self.key_count)
    }

    pub fn value_count(&self) -> usize {
        usize::from(self.value_count)
    }

    pub fn projection_count(&self) -> usize {
        usize::from(self.projection_count)
    }

    /// Whether a flag ([`IGNORE_ERROR`], [`KEY_INFO`]) is set.
    pub fn has_flag(&self, flag: u8) -> bool {
        self.header.flags & flag != 0
    }

    /// The key values, in key order.
    pub fn keys(&self) -> Values<'a> {
        Values {
            r: Reader::new(self.keys, "op keys"),
            left: self.key_count(),
        }
    }

    /// Where this op's header begins in `batch`, the batch it was read
    /// from (for [`set_partition`]).
    pub fn header_offset(&self, batch: &[u8]) -> usize {
        let at = (self.keys.as_ptr() as usize)
            .checked_sub(batch.as_ptr() as usize + OP_FIXED_BYTES)
            .expect("an op of this batch");
        assert!(at + OP_FIXED_BYTES <= batch.len(), "an op of this batch");
        at
    }

    /// The written columns and their values.
    pub fn values(&self) -> ColumnValues<'a> {
        ColumnValues {
            r: Reader::new(self.values, "op values"),
            left: self.value_count(),
        }
    }

    /// The columns to read; none means all.
    pub fn projection(&self) -> Columns<'a> {
        Columns {
            bytes: self.projection,
        }
    }

    /// Checks the op against its table: the table id and version, the key
    /// (every column of the primary key or unique index, each value
    /// fitting), the written columns (existing, each once, fitting; not in
    /// the primary key; insert and write give every non-key column) and
    /// the projection. Errors name the table and the column.
    /// Makes the table's [`CheckPlan`] on every call: a caller that checks
    /// many operations keeps the plan and calls [`OpView::check_with`].
    pub fn check(&self, table: &TableDef) -> Result<(), ProtoError> {
        self.check_planned(table, &CheckPlan::new(table), true)
    }

    /// [`OpView::check`] with `plan`, made once from the same table: the
    /// written values' common case then reads one byte per column.
    pub fn check_with(&self, table: &TableDef, plan: &CheckPlan) -> Result<(), ProtoError> {
        debug_assert_eq!(
            plan.columns.len(),
            table.columns.len(),
            "a plan of this table"
        );
        self.check_planned(table, plan, true)
    }

    /// `integer_fast`: whether the written values may take
    /// `integer_values_fit` (tests turn it off to compare).
    fn check_planned(
        &self,
        table: &TableDef,
        plan: &CheckPlan,
        integer_fast: bool,
    ) -> Result<(), ProtoError> {
        let h = &self.header;
        let bad = |problem: String| ProtoError::BadOperation {
            table: table.name.clone(),
            problem,
        };
        check_table(table, h.table_id, h.table_version)?;
        check_partition(table, h.partition)?;
        // The key's name is only for a message: built on error only (this
        // runs for every operation).
        let (index, key_columns): (Option<&IndexDef>, &[usize]) = if h.index_id == NO_INDEX {
            (None, &table.primary_key)
        } else {
            let index = find_index(table, h.index_id, IndexKind::Unique)?;
            if matches!(h.kind, OpKind::Insert | OpKind::Write) {
                return Err(bad(format!(
                    "an {} goes by primary key, not by unique index `{}`",
                    h.kind.name(),
                    index.name
                )));
            }
            (Some(index), &index.columns)
        };
        if self.key_count() != key_columns.len() {
            return Err(ProtoError::KeyCount {
                table: table.name.clone(),
                key: index.map_or_else(
                    || "the primary key".to_owned(),
                    |index| format!("unique index `{}`", index.name),
                ),
                expected: key_columns.len(),
                given: self.key_count(),
            });
        }
        for (&c, v) in key_columns.iter().zip(self.keys()) {
            crate::value::check_value(&table.name, &table.columns[c], v)?;
        }
        let writes = matches!(h.kind, OpKind::Insert | OpKind::Update | OpKind::Write);
        if !writes && self.value_count() > 0 {
            return Err(bad(format!(
                "a {} writes no columns: {} given",
                h.kind.name(),
                self.value_count()
            )));
        }
        if h.flags & KEY_INFO != 0 && h.kind != OpKind::Read {
            return Err(bad(format!(
                "only a read returns key info, not a {}",
                h.kind.name()
            )));
        }
        if h.flags & UNLOCK != 0
            && (h.kind != OpKind::Read
                || h.lock == LockMode::Committed
                || h.index_id != NO_INDEX
                || h.flags & (KEY_INFO | NO_WAIT | SKIP_LOCKED) != 0
                || self.projection_count() > 0)
        {
            return Err(bad(
                "an unlock is a locking read by primary key, with no projection, key info or wait policy"
                    .to_owned(),
            ));
        }
        if h.flags & (NO_WAIT | SKIP_LOCKED) != 0 {
            if h.flags & NO_WAIT != 0 && h.flags & SKIP_LOCKED != 0 {
                return Err(bad("NO_WAIT and SKIP_LOCKED together".to_owned()));
            }
            if h.kind != OpKind::Read || h.lock == LockMode::Committed {
                return Err(bad(format!(
                    "only a locking read may refuse to wait, not a {} ({:?})",
                    h.kind.name(),
                    h.lock
                )));
            }
        }
        let mut given = ColumnSet::default();
        // Inserts and writes need `given` below, which the mark does not keep.
        let marked = self.fitted_plan != 0
            && self.fitted_plan == plan.id
            && !matches!(h.kind, OpKind::Insert | OpKind::Write);
        debug_assert!(
            !marked || self.integer_values_fit(plan, &mut ColumnSet::default()),
            "an op marked as fitting its plan fits it"
        );
        let fit = integer_fast && (marked || self.integer_values_fit(plan, &mut given));
        let values = if fit {
            // Every written value checked already: nothing for the loop below.
            ColumnValues {
                r: Reader::new(&[], "op values"),
                left: 0,
            }
        } else {
            given = ColumnSet::default();
            self.values()
        };
        for (c, v) in values {
            let column = column_at(table, "a written value", c)?;
            if !given.insert(usize::from(c)) {
                return Err(ProtoError::DuplicateColumn {
                    table: table.name.clone(),
                    column: column.name.clone(),
                });
            }
            if table.primary_key.contains(&usize::from(c)) {
                if h.kind == OpKind::Update {
                    return Err(ProtoError::PrimaryKeyUpdate {
                        table: table.name.clone(),
                        column: column.name.clone(),
                    });
                }
                return Err(bad(format!(
                    "primary-key column `{}` goes in the key, not among the values",
                    column.name
                )));
            }
            crate::value::check_value(&table.name, column, v)?;
            check_blob_write(&table.name, column, v)?;
        }
        if matches!(h.kind, OpKind::Insert | OpKind::Write) {
            let missing = (0..table.columns.len())
                .find(|c| !table.primary_key.contains(c) && !given.contains(*c));
            if let Some(c) = missing {
                return Err(ProtoError::MissingColumn {
                    table: table.name.clone(),
                    kind: h.kind.name(),
                    column: table.columns[c].name.clone(),
                });
            }
        }
        if self.projection_count() > 0 && !matches!(h.kind, OpKind::Read | OpKind::Delete) {
            return Err(bad(format!("a {} reads no columns", h.kind.name())));
        }
        for c in self.projection() {
            column_at(table, "the projection", c)?;
        }
        Ok(())
    }
}

/// Where a parsed op lies in its batch: an [`OpView`] without the borrow,
/// for a reader that keeps the batch (moved into a record) and takes the
/// op up again later without parsing it a second time
/// ([`OpSpan::view`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpSpan {
    header: OpHeader,
    key_count: u16,
    value_count: u16,
    projection_count: u16,
    /// Offsets in the batch: keys, values and projection follow each
    /// other, the projection ending at `end`.
    keys_at: u32,
    values_at: u32,
    projection_at: u32,
    end: u32,
}

impl OpSpan {
    /// The op again, from `batch`: the batch its view was read from
    /// ([`OpView::span`]), moved or not. Another batch is a bug: it
    /// panics if the span falls outside it.
    #[inline]
    pub fn view<'a>(&self, batch: &'a [u8]) -> OpView<'a> {
        let at = |offset: u32| offset as usize;
        let view = OpView {
            header: self.header,
            key_count: self.key_count,
            value_count: self.value_count,
            projection_count: self.projection_count,
            keys: &batch[at(self.keys_at)..at(self.values_at)],
            values: &batch[at(self.values_at)..at(self.projection_at)],
            projection: &batch[at(self.projection_at)..at(self.end)],
            fitted_plan: 0,
        };
        debug_assert_eq!(view.span(batch), *self, "a span of this batch");
        view
    }
}

impl<'a> OpView<'a> {
    /// Where this op lies in `batch`, the batch it was read from.
    pub fn span(&self, batch: &[u8]) -> OpSpan {
        let offset = |part: &[u8]| {
            let at = (part.as_ptr() as usize)
                .checked_sub(batch.as_ptr() as usize)
                .filter(|at| at + part.len() <= batch.len())
                .expect("an op of this batch");
            // A batch is at most BATCH_BYTES_MAX, far below u32::MAX.
            at as u32
        };
        let projection_at = offset(self.projection);
        OpSpan {
            header: self.header,
            key_count: self.key_count,
            value_count: self.value_count,
            projection_count: self.projection_count,
            keys_at: offset(self.keys),
            values_at: offset(self.values),
            projection_at,
            end: projection_at + self.projection.len() as u32,
        }
    }
}

impl OpView<'_> {
    /// Whether every written value is an integer in its integer column's
    /// range, each column written once and none in the primary key: the
    /// common case of key-value tables, decided in one tight loop of a
    /// bounds check, a range test ([`CheckPlan`]) and a bit per value.
    /// False sends the check through the general loop, which says what is
    /// wrong; `given` holds the written columns when true.
    #[inline]
    fn integer_values_fit(&self, plan: &CheckPlan, given: &mut ColumnSet) -> bool {
        // Integer pairs only: each is a fixed `INTEGER_PAIR_BYTES` (u16
        // column, tag, 8 bytes), so the values are exactly that many bytes
        // per value and are read in fixed-size chunks, without a reader.
        let (pairs, rest) = self.values.as_chunks::<INTEGER_PAIR_BYTES>();
        if pairs.len() != usize::from(self.value_count) || !rest.is_empty() {
            return false;
        }
        // The columns no integer may be written to start as taken: one bit
        // test then refuses them and a column written twice alike.
        given.0 = plan.refused.0;
        for pair in pairs {
            if !is_integer_tag(pair[2]) || !pair_fits(plan, pair, given) {
                return false;
            }
        }
        for (word, refused) in given.0.iter_mut().zip(plan.refused.0) {
            *word &= !refused;
        }
        true
    }
}

/// A written integer value with its column: u16 column, tag, 8 bytes.
const INTEGER_PAIR_BYTES: usize = 2 + 1 + 8;

/// Appends a written value with its column. An integer (most values of
/// key-value tables) in one copy of the pair's 11 bytes; other values
/// through the general encoder.
#[inline]
fn put_pair(out: &mut Vec<u8>, column: u16, v: ValueRef<'_>) {
    let [c0, c1] = column.to_le_bytes();
    let (tag, x) = match v {
        ValueRef::UInt(x) => (crate::value::TAG_UINT, x),
        ValueRef::Int(x) => (crate::value::TAG_INT, x as u64),
        _ => {
            out.extend_from_slice(&[c0, c1]);
            return put_value(out, v);
        }
    };
    let [a, b, c, d, e, f, g, h] = x.to_le_bytes();
    out.extend_from_slice(&[c0, c1, tag, a, b, c, d, e, f, g, h]);
}

/// What [`OpView::check_with`] needs of a table, made once per table
/// definition (a TC or a client keeps it beside the definition).
#[derive(Clone, Debug, Default)]
pub struct CheckPlan {
    /// Names this plan (and its clones) for the mark of
    /// `OpBatchReader::new_each_planned`; 0 for the default plan, which
    /// marks nothing.
    id: u64,
    /// A byte per column, its `ColumnType::integer_code`, 0 for a key column.
    columns: Vec<u8>,
    /// Per column, the integers of each tag (`TAG_INT`, `TAG_UINT`) that
    /// fit it; meaningless for a column in `refused`.
    ranges: Vec<[IntegerRange; 2]>,
    /// The columns no integer is written to: the key's and those not of
    /// an integer type.
    refused: ColumnSet,
}

impl CheckPlan {
    pub fn new(table: &TableDef) -> CheckPlan {
        let columns: Vec<u8> = table
            .columns
            .iter()
            .enumerate()
            .map(|(c, column)| {
                if table.primary_key.contains(&c) {
                    0
                } else {
                    column.ty.integer_code()
                }
            })
            .collect();
        let mut refused = ColumnSet::default();
        for (c, &code) in columns.iter().enumerate() {
            if code == 0 {
                refused.insert(c);
            }
        }
        let ranges = columns.iter().map(|&code| IntegerRange::of(code)).collect();
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        CheckPlan {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            columns,
            ranges,
            refused,
        }
    }

    /// Each column's `ColumnType::integer_code`, 0 for a key column.
    pub fn codes(&self) -> &[u8] {
        &self.columns
    }
}

/// Plans are equal when they check alike, whatever their ids.
impl PartialEq for CheckPlan {
    fn eq(&self, other: &CheckPlan) -> bool {
        (&self.columns, &self.ranges, &self.refused)
            == (&other.columns, &other.ranges, &other.refused)
    }
}

impl Eq for CheckPlan {}

/// The integers of one tag that fit a column, as a test of the value's 8
/// bytes read as a u64: `raw - low <= span`, wrapping. One subtraction and
/// one comparison cover both ends of a signed range, and an unsigned
/// column refuses a negative `Int` (its u64 is above any span such a
/// column has).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct IntegerRange {
    low: u64,
    span: u64,
}

impl IntegerRange {
    /// The ranges of an integer code (`ColumnType::integer_code`), by tag:
    /// `TAG_INT`'s, then `TAG_UINT`'s; what `integer_code_fits` accepts.
    fn of(code: u8) -> [IntegerRange; 2] {
        if code == 0 {
            return [IntegerRange::default(); 2];
        }
        let bits = u32::from(code & !INTEGER_CODE_UNSIGNED);
        assert!((8..=64).contains(&bits), "integer code {code:#x}");
        // The largest value of `bits` bits: all ones.
        let ones = |bits: u32| u64::MAX >> (64 - bits);
        if code & INTEGER_CODE_UNSIGNED != 0 {
            let max = ones(bits);
            [
                IntegerRange {
                    low: 0,
                    span: max.min(i64::MAX as u64),
                },
                IntegerRange { low: 0, span: max },
            ]
        } else {
            let max = ones(bits - 1);
            [
                IntegerRange {
                    // The smallest value, -2^(bits-1), as a u64.
                    low: !max,
                    span: ones(bits),
                },
                IntegerRange { low: 0, span: max },
            ]
        }
    }
}

/// Words of a [`ColumnSet`]: a power of two, so a column's word index is
/// kept inside the array by a mask, not a bounds check.
const COLUMN_SET_WORDS: usize = COLUMNS_MAX.div_ceil(64);
const _: () = assert!(COLUMN_SET_WORDS.is_power_of_two());

/// A set of column positions, on the stack: checks allocate only to fail.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct ColumnSet([u64; COLUMN_SET_WORDS]);

/// A set of the columns an op writes, as [`pair_fits`] fills it: a
/// [`ColumnSet`], or for a table of at most 64 columns one word.
trait TakenColumns {
    /// Whether it holds column `c` of the table.
    fn has(&self, c: usize) -> bool;
    /// Adds column `c` of the table.
    fn add(&mut self, c: usize);
}

impl TakenColumns for ColumnSet {
    #[inline(always)]
    fn has(&self, c: usize) -> bool {
        self.0[c / 64 % COLUMN_SET_WORDS] & (1u64 << (c % 64)) != 0
    }

    #[inline(always)]
    fn add(&mut self, c: usize) {
        self.0[c / 64 % COLUMN_SET_WORDS] |= 1u64 << (c % 64);
    }
}

/// Columns below 64: bit `c`.
impl TakenColumns for u64 {
    #[inline(always)]
    fn has(&self, c: usize) -> bool {
        debug_assert!(c < 64, "column {c} of a table of at most 64 columns");
        *self & (1u64 << (c % 64)) != 0
    }

    #[inline(always)]
    fn add(&mut self, c: usize) {
        *self |= 1u64 << (c % 64);
    }
}

impl ColumnSet {
    /// Adds a column; false if it was there. `c` is below `COLUMNS_MAX`.
    #[inline(always)]
    fn insert(&mut self, c: usize) -> bool {
        debug_assert!(c < COLUMNS_MAX, "column {c} of a table");
        // The mask changes no index below COLUMNS_MAX.
        let (word, bit) = (c / 64 % COLUMN_SET_WORDS, 1u64 << (c % 64));
        let fresh = self.0[word] & bit == 0;
        self.0[word] |= bit;
        fresh
    }

    fn contains(&self, c: usize) -> bool {
        self.0[c / 64] & (1u64 << (c % 64)) != 0
    }
}

/// The table must be the one the request was built for.
pub(crate) fn check_table(
    table: &TableDef,
    table_id: u32,
    table_version: u32,
) -> Result<(), ProtoError> {
    if table_id != table.id {
        return Err(ProtoError::WrongTable {
            table: table.name.clone(),
            table_id: table.id,
            given: table_id,
        });
    }
    if table_version != table.version {
        return Err(ProtoError::WrongVersion {
            table: table.name.clone(),
            version: table.version,
            given: table_version,
        });
    }
    Ok(())
}

pub(crate) fn check_partition(table: &TableDef, partition: u32) -> Result<(), ProtoError> {
    if partition != NO_PARTITION && partition >= table.partitions {
        return Err(ProtoError::NoSuchPartition {
            table: table.name.clone(),
            partition,
            partitions: table.partitions,
        });
    }
    Ok(())
}

pub(crate) fn find_index(
    table: &TableDef,
    index_id: u32,
    kind: IndexKind,
) -> Result<&schema::IndexDef, ProtoError> {
    table
        .indexes
        .iter()
        .find(|i| i.id == index_id && i.kind == kind)
        .ok_or_else(|| ProtoError::NoSuchIndex {
            table: table.name.clone(),
            kind: match kind {
                IndexKind::Unique => "unique",
                IndexKind::Ordered => "ordered",
            },
            index_id,
        })
}

/// The column at a wire position, or an error naming the table.
pub(crate) fn column_at<'t>(
    table: &'t TableDef,
    role: &'static str,
    c: u16,
) -> Result<&'t schema::Column, ProtoError> {
    table
        .columns
        .get(usize::from(c))
        .ok_or_else(|| ProtoError::NoSuchColumn {
            table: table.name.clone(),
            role,
            column: c,
            columns: table.columns.len(),
        })
}

/// Values of a validated buffer (keys of an op, a result's row).
#[derive(Clone, Debug)]
pub struct Values<'a> {
    pub(crate) r: Reader<'a>,
    pub(crate) left: usize,
}

impl<'a> Iterator for Values<'a> {
    type Item = ValueRef<'a>;

    #[inline]
    fn next(&mut self) -> Option<ValueRef<'a>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        validated_value(&mut self.r)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.left))
    }
}

/// The next value of a validated buffer: an integer on the inlined path
/// (no `Result` in memory, see `get_integer`), any other value in full.
#[inline(always)]
fn validated_value<'a>(r: &mut Reader<'a>) -> Option<ValueRef<'a>> {
    match get_integer(r) {
        Some(v) => Some(v),
        None => validated(get_value_general(r)),
    }
}

/// (column, value) pairs of a validated op.
#[derive(Clone, Debug)]
pub struct ColumnValues<'a> {
    r: Reader<'a>,
    left: usize,
}

impl<'a> Iterator for ColumnValues<'a> {
    type Item = (u16, ValueRef<'a>);

    // Always inlined: returned through memory, the (column, value) pair
    // costs a store-forwarding stall per value (half of an update's decode
    // time in a profile).
    #[inline(always)]
    fn next(&mut self) -> Option<(u16, ValueRef<'a>)> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let Some(column) = self.r.try_u16() else {
            debug_assert!(false, "validated bytes end inside a column number");
            return None;
        };
        Some((column, validated_value(&mut self.r)?))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.left))
    }
}

impl ColumnValues<'_> {
    /// Hands the leading (column, integer) pairs to `apply`, in order, as
    /// `(column, Ok(signed) | Err(unsigned))`, while it returns true; the
    /// pair it refuses, or the first that is not an integer, is then the
    /// iterator's next. The tight loop of an update of a key-value table
    /// (the iterator returns each pair through a `ValueRef`).
    #[inline(always)]
    pub fn integer_prefix(&mut self, apply: impl FnMut(u16, Result<i64, u64>) -> bool) {
        let taken = self.r.integer_pairs(self.left, apply);
        self.left -= taken;
    }
}

/// Column positions of a validated op's projection.
#[derive(Clone, Debug)]
pub struct Columns<'a> {
    bytes: &'a [u8],
}

impl Iterator for Columns<'_> {
    type Item = u16;

    fn next(&mut self) -> Option<u16> {
        let (first, rest) = self.bytes.split_first_chunk::<2>()?;
        self.bytes = rest;
        Some(u16::from_le_bytes(*first))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.bytes.len() / 2;
        (n, Some(n))
    }
}

/// A BLOB/TEXT column stores only the head of its value in the row; the
/// rest lives in the column's parts table, written by the client in the
/// same transaction. A whole value longer than the head would lose its
/// tail silently: refused. (A head that does not match its length is
/// refused by the value check itself.)
fn check_blob_write(table: &str, column: &Column, v: ValueRef<'_>) -> Result<(), ProtoError> {
    if !column.ty.is_blob() {
        return Ok(());
    }
    let problem = match v {
        ValueRef::Bytes(b) if b.len() > BLOB_INLINE_BYTES => Some(b.len()),
        ValueRef::Str(s) if s.len() > BLOB_INLINE_BYTES => Some(s.len()),
        _ => None,
    };
    match problem {
        None => Ok(()),
        Some(bytes) => Err(ProtoError::BadOperation {
            table: table.to_owned(),
            problem: format!(
                "column `{}`: a whole BLOB/TEXT value of {bytes} bytes; the row holds only its first \
                 {BLOB_INLINE_BYTES} bytes, the rest goes to the column's parts table in the same \
                 transaction (skarv-client does this)",
                column.name
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use schema::{integer_code_fits, Collation, ColumnType, Value};

    /// Integer columns of every width and sign, one nullable, one not an
    /// integer; the key is column 0.
    fn ints() -> TableDef {
        TableDef::new(
            "ints",
            7,
            vec![
                Column::new("k", ColumnType::Int { unsigned: true }),
                Column::new("t", ColumnType::TinyInt { unsigned: false }),
                Column::new("u", ColumnType::Int { unsigned: true }).nullable(),
                Column::new("m", ColumnType::MediumInt { unsigned: false }),
                Column::new("b", ColumnType::BigInt { unsigned: true }),
                Column::new("g", ColumnType::BigInt { unsigned: false }),
                Column::new(
                    "s",
                    ColumnType::VarChar {
                        max: 4,
                        collation: Collation::Utf8mb4Bin,
                    },
                ),
            ],
        )
        .primary_key(vec![0])
        .build()
        .expect("a valid table")
    }

    /// `ints()` with 63 more columns, 70 in all, of `BIGINT` from column 64
    /// on (`INT UNSIGNED` before): more than one word of columns.
    fn ints_wide() -> TableDef {
        let mut columns = ints().columns;
        for c in columns.len()..70 {
            let ty = if c < 64 {
                ColumnType::Int { unsigned: true }
            } else {
                ColumnType::BigInt { unsigned: false }
            };
            columns.push(Column::new(format!("w{c}"), ty));
        }
        TableDef::new("ints", 7, columns)
            .primary_key(vec![0])
            .build()
            .expect("a valid table")
    }

    fn value() -> impl Strategy<Value = Value> {
        prop_oneof![
            4 => (-300i64..300).prop_map(Value::Int),
            4 => (0u64..70_000).prop_map(Value::UInt),
            2 => any::<i64>().prop_map(Value::Int),
            2 => any::<u64>().prop_map(Value::UInt),
            1 => Just(Value::Null),
            1 => Just(Value::String("ab".into())),
            1 => Just(Value::Float(1.5)),
            1 => Just(Value::Double(2.5)),
        ]
    }

    /// A batch of one op on `ints()` writing `values`.
    fn op_batch(kind: OpKind, values: &[(u16, Value)]) -> Vec<u8> {
        let mut bytes = Vec::new();
        let mut writer = OpBatchWriter::new(&mut bytes);
        writer.begin(&OpHeader {
            op_index: 0,
            table_id: 7,
            table_version: 0,
            index_id: NO_INDEX,
            partition: NO_PARTITION,
            kind,
            lock: LockMode::Committed,
            flags: 0,
        });
        writer.key(Value::UInt(1).as_ref());
        for (column, v) in values {
            writer.value(*column, v.as_ref());
        }
        writer.end().expect("a small op fits");
        drop(writer);
        bytes
    }

    /// A span taken from each op of a batch gives back the same op from
    /// the batch moved elsewhere: header, keys, values and projection.
    #[test]
    fn spans_give_back_each_op_of_a_moved_batch() {
        let mut bytes = Vec::new();
        let mut writer = OpBatchWriter::new(&mut bytes);
        for (i, kind) in [OpKind::Update, OpKind::Read, OpKind::Delete]
            .into_iter()
            .enumerate()
        {
            writer.begin(&OpHeader {
                op_index: i as u32,
                table_id: 7,
                table_version: 3,
                index_id: NO_INDEX,
                partition: 5 + i as u32,
                kind,
                lock: LockMode::Exclusive,
                flags: 0,
            });
            writer.key(Value::UInt(10 + i as u64).as_ref());
            if kind == OpKind::Update {
                writer.value(1, Value::Int(-4).as_ref());
                writer.value(6, Value::String("ab".into()).as_ref());
            } else {
                writer.project(2);
                writer.project(4);
            }
            writer.end().expect("a small op fits");
        }
        drop(writer);
        let reader = OpBatchReader::framed(&bytes).expect("a valid batch");
        let spans: Vec<OpSpan> = reader.iter().map(|view| view.span(&bytes)).collect();
        // Somewhere else in memory, with bytes in front, as a record holds it.
        let mut moved = vec![0xAA; 3];
        moved.extend_from_slice(&bytes);
        let moved = &moved[3..];
        for (span, view) in spans.iter().zip(reader.iter()) {
            let again = span.view(moved);
            assert_eq!(again.header, view.header);
            assert!(again.keys().eq(view.keys()));
            assert!(again.values().eq(view.values()));
            assert!(again.projection().eq(view.projection()));
            assert_eq!(again.value_count(), view.value_count());
            assert_eq!(again.projection_count(), view.projection_count());
        }
        assert_eq!(spans[0].view(moved).values().count(), 2);
        assert_eq!(
            spans[2].view(moved).projection().collect::<Vec<_>>(),
            [2, 4]
        );
        assert_eq!(spans[1].view(moved).header.partition, 6);
    }

    /// An insert whose integers all fit still misses the column it does not
    /// write, though no integer may go to that column.
    #[test]
    fn an_insert_of_fitting_integers_misses_its_other_columns() {
        let table = ints();
        let integers: Vec<(u16, Value)> = (1..6).map(|c| (c, Value::Int(1))).collect();
        let bytes = op_batch(OpKind::Insert, &integers);
        let reader = OpBatchReader::new(&bytes).expect("a valid batch");
        let view = reader.iter().next().expect("one op");
        let plan = CheckPlan::new(&table);
        let missing = ProtoError::MissingColumn {
            table: "ints".into(),
            kind: "insert",
            column: "s".into(),
        };
        assert_eq!(
            view.check_planned(&table, &plan, true),
            Err(missing.clone())
        );
        assert_eq!(view.check_planned(&table, &plan, false), Err(missing));
    }

    proptest! {
        /// Values written in one call are the bytes of values written one
        /// by one (integers and others, before a projection; integers only
        /// by `integer_values` too), and the op counts every one of them.
        #[test]
        fn values_in_one_call_are_values_one_by_one(
            values in proptest::collection::vec((0u16..9, value()), 0..8),
            project in any::<bool>(),
        ) {
            let header = OpHeader {
                op_index: 0,
                table_id: 7,
                table_version: 0,
                index_id: NO_INDEX,
                partition: NO_PARTITION,
                kind: OpKind::Read,
                lock: LockMode::Committed,
                flags: 0,
            };
            let integers: Option<Vec<(u16, bool, u64)>> = values
                .iter()
                .map(|(c, v)| match *v {
                    Value::Int(x) => Some((*c, true, x as u64)),
                    Value::UInt(x) => Some((*c, false, x)),
                    _ => None,
                })
                .collect();
            let write = |how: usize| {
                let mut bytes = Vec::new();
                let mut writer = OpBatchWriter::new(&mut bytes);
                writer.begin(&header);
                writer.key(Value::UInt(1).as_ref());
                match how {
                    0 => {
                        for (c, v) in &values {
                            writer.value(*c, v.as_ref());
                        }
                    }
                    1 => writer.values(values.iter().map(|(c, v)| (*c, v.as_ref()))),
                    _ => writer.integer_values(
                        integers.as_ref().expect("integers only").iter().copied(),
                    ),
                }
                if project {
                    writer.project(3);
                }
                writer.end().expect("a small op fits");
                drop(writer);
                bytes
            };
            let bulk = write(1);
            prop_assert_eq!(&bulk, &write(0));
            if integers.is_some() {
                prop_assert_eq!(&bulk, &write(2));
            }
            let reader = OpBatchReader::new(&bulk).expect("a valid batch");
            let view = reader.iter().next().expect("one op");
            prop_assert_eq!(view.value_count(), values.len());
        }

        /// The integer loop of a check decides as the general value loop
        /// does, with a plan and without: the same result, the same error.
        #[test]
        fn integer_values_are_checked_as_the_general_loop_checks_them(
            kind in prop_oneof![Just(OpKind::Update), Just(OpKind::Insert), Just(OpKind::Write)],
            values in proptest::collection::vec((0u16..9, value()), 0..8),
        ) {
            let table = ints();
            let bytes = op_batch(kind, &values);
            let reader = OpBatchReader::new(&bytes).expect("a valid batch");
            let view = reader.iter().next().expect("one op");
            let plan = CheckPlan::new(&table);
            prop_assert_eq!(
                view.check_planned(&table, &plan, true),
                view.check_planned(&table, &plan, false)
            );
        }
    }

    /// The op of a one-op batch read by `new_each_planned` with `plan` for
    /// table 7, or the reader's error.
    fn planned_op<'a>(bytes: &'a [u8], plan: &CheckPlan) -> Result<OpView<'a>, ProtoError> {
        let mut view = None;
        OpBatchReader::new_each_planned(bytes, |id| (id == 7).then_some(plan), |v| view = Some(v))?;
        Ok(view.expect("one op"))
    }

    /// A planned read of an op of `kind` writing `values` to `table` marks
    /// it fitted exactly when the general loop finds every value fits, and
    /// checks it alike.
    fn planned_read_checks_alike(
        table: &TableDef,
        kind: OpKind,
        values: &[(u16, Value)],
    ) -> Result<(), proptest::test_runner::TestCaseError> {
        let plan = CheckPlan::new(table);
        let bytes = op_batch(kind, values);
        let plain = OpBatchReader::new(&bytes)
            .expect("a valid batch")
            .iter()
            .next()
            .expect("one op");
        let planned = planned_op(&bytes, &plan).expect("a valid batch");
        let fits = !values.is_empty() && plain.integer_values_fit(&plan, &mut ColumnSet::default());
        prop_assert_eq!(planned.fitted_plan == plan.id, fits);
        prop_assert_eq!(
            planned.check_with(table, &plan),
            plain.check_planned(table, &plan, false)
        );
        Ok(())
    }

    proptest! {
        /// Reading with a plan marks exactly the ops whose values all fit
        /// it, and checks them as the general loop does.
        #[test]
        fn a_planned_read_marks_what_fits_and_checks_alike(
            kind in prop_oneof![Just(OpKind::Update), Just(OpKind::Insert), Just(OpKind::Write)],
            values in proptest::collection::vec((0u16..9, value()), 0..8),
        ) {
            planned_read_checks_alike(&ints(), kind, &values)?;
        }

        /// The same of a table of more than 64 columns, whose columns
        /// written so far the planned read keeps in a `ColumnSet`, not one
        /// word: columns on both sides of 64, some written twice.
        #[test]
        fn a_planned_read_of_a_wide_table_marks_what_fits_and_checks_alike(
            kind in prop_oneof![Just(OpKind::Update), Just(OpKind::Insert), Just(OpKind::Write)],
            values in proptest::collection::vec(
                (prop_oneof![0u16..4, 60u16..72], value()),
                0..8,
            ),
        ) {
            planned_read_checks_alike(&ints_wide(), kind, &values)?;
        }

        /// A damaged batch is refused by the planned read as by the plain
        /// one, with the same error.
        #[test]
        fn a_planned_read_refuses_what_the_plain_read_refuses(
            values in proptest::collection::vec((0u16..9, value()), 1..8),
            at in any::<prop::sample::Index>(),
            byte in any::<u8>(),
            cut in any::<bool>(),
        ) {
            let plan = CheckPlan::new(&ints());
            let mut bytes = op_batch(OpKind::Update, &values);
            let at = at.index(bytes.len());
            if cut {
                bytes.truncate(at);
            } else {
                bytes[at] = byte;
            }
            let plain = OpBatchReader::new(&bytes).map(|r| r.len());
            let planned = planned_op(&bytes, &plan).map(|_| 1);
            prop_assert_eq!(planned, plain);
        }
    }

    /// Integers that each fit their column are not marked when one names a
    /// column twice, or names the key (refused to integers: its range is
    /// the default one, which 0 fits), in a table of one word of columns
    /// and in one of more; the check then says what is wrong.
    #[test]
    fn fitting_integers_twice_on_a_column_or_on_the_key_are_not_marked() {
        for (table, c) in [(ints(), 2u16), (ints_wide(), 65)] {
            let plan = CheckPlan::new(&table);
            let once = op_batch(OpKind::Update, &[(c, Value::UInt(5)), (4, Value::UInt(6))]);
            assert_eq!(planned_op(&once, &plan).unwrap().fitted_plan, plan.id);
            let twice = op_batch(OpKind::Update, &[(c, Value::UInt(5)), (c, Value::UInt(6))]);
            let view = planned_op(&twice, &plan).expect("a valid batch");
            assert_eq!(view.fitted_plan, 0, "{} columns", table.columns.len());
            assert!(matches!(
                view.check_with(&table, &plan),
                Err(ProtoError::DuplicateColumn { .. })
            ));
            let key = op_batch(OpKind::Update, &[(c, Value::UInt(5)), (0, Value::UInt(0))]);
            let view = planned_op(&key, &plan).expect("a valid batch");
            assert_eq!(view.fitted_plan, 0, "{} columns", table.columns.len());
            assert!(matches!(
                view.check_with(&table, &plan),
                Err(ProtoError::PrimaryKeyUpdate { .. })
            ));
        }
    }

    /// A mark made with one plan is not taken by a check with another: the
    /// value that fits the wide table's plan is refused for `ints()`.
    #[test]
    fn a_mark_holds_for_its_own_plan_only() {
        let mut wide = ints();
        wide.columns[1].ty = ColumnType::BigInt { unsigned: false };
        let wide_plan = CheckPlan::new(&wide);
        let bytes = op_batch(
            OpKind::Update,
            &[(1, Value::Int(1000)), (2, Value::UInt(5))],
        );
        let view = planned_op(&bytes, &wide_plan).expect("a valid batch");
        assert_eq!(view.fitted_plan, wide_plan.id);
        assert_eq!(view.check_with(&wide, &wide_plan), Ok(()));
        let table = ints();
        let plan = CheckPlan::new(&table);
        let refused = view.check_with(&table, &plan);
        assert!(refused.is_err());
        assert_eq!(refused, view.check_planned(&table, &plan, false));
        // A clone names the same plan; a default plan marks nothing.
        assert_eq!(
            planned_op(&bytes, &wide_plan.clone()).unwrap().fitted_plan,
            wide_plan.id
        );
        assert_eq!(
            planned_op(&bytes, &CheckPlan::default())
                .unwrap()
                .fitted_plan,
            0
        );
    }

    /// A plan's ranges accept exactly the integers `integer_code_fits`
    /// accepts, for every integer type, at and around each bound.
    #[test]
    fn integer_ranges_accept_what_integer_code_fits_accepts() {
        let mut probes = vec![0u64, 1, 2, u64::MAX, u64::MAX - 1];
        for bits in [7, 8, 15, 16, 23, 24, 31, 32, 63] {
            let edge = 1u64 << bits;
            probes.extend([edge - 1, edge, edge + 1]);
            let negative = (edge as i64).wrapping_neg() as u64;
            probes.extend([negative.wrapping_sub(1), negative, negative + 1]);
        }
        let mut codes = 0;
        for unsigned in [false, true] {
            for ty in [
                ColumnType::TinyInt { unsigned },
                ColumnType::SmallInt { unsigned },
                ColumnType::MediumInt { unsigned },
                ColumnType::Int { unsigned },
                ColumnType::BigInt { unsigned },
            ] {
                let code = ty.integer_code();
                let [int, uint] = IntegerRange::of(code);
                for &raw in &probes {
                    let fits = |range: IntegerRange| raw.wrapping_sub(range.low) <= range.span;
                    let signed = ValueRef::Int(raw as i64);
                    assert_eq!(
                        fits(int),
                        integer_code_fits(code, signed),
                        "{ty:?} {signed:?}"
                    );
                    let unsigned = ValueRef::UInt(raw);
                    assert_eq!(
                        fits(uint),
                        integer_code_fits(code, unsigned),
                        "{ty:?} {unsigned:?}"
                    );
                }
                codes += 1;
            }
        }
        assert_eq!(codes, 10);
    }
}
