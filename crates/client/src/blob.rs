//! BLOB and TEXT values of any size, NDB's `NdbBlob` way: the data nodes
//! store a BLOB/TEXT column as a *head* in the row (the total length and
//! the first `BLOB_INLINE_BYTES`, `Value::BlobHead`) and the rest as
//! *parts* of `BLOB_PART_BYTES` in a hidden table per column (the base
//! primary key, `$PART`, `$DATA`; `TableDef::blob_parts_table`), which is
//! distributed by the base table's distribution key so that a row's parts
//! live in the row's partition. The data nodes know nothing of the link
//! between the two: the client keeps them consistent, inside the user's
//! transaction.
//!
//! - A write (insert, write, update) of a whole value sends the head in
//!   the base operation and one operation per part on the parts table:
//!   inserts for an insert, writes (upserts) for a write or update, then
//!   deletes of the old parts beyond the new count. Knowing the old count
//!   takes an exclusive read of the old heads first (a *pre-read*: one
//!   more round trip, as in NDB). A delete pre-reads the heads too and
//!   deletes every part.
//! - A read whose head says the value is longer than its inline bytes
//!   reads the parts (same transaction, later requests) and hands the
//!   user the whole value; a committed read is taken with a shared lock
//!   so that head and parts are of one version (NDB upgrades it the same
//!   way). TEXT is checked to be UTF-8 once whole.
//! - Operations on a table with BLOB/TEXT columns run in *segments* of
//!   consecutive operations in which no two of them touch one row (by
//!   primary key; an operation by unique key touches "some row" of its
//!   table), each segment in up to four phases — pre-reads, the user's
//!   operations each followed by its parts, parts of operations with
//!   `ignore_error` once they are known to have succeeded, part reads —
//!   so every operation sees the effects of the earlier ones in request
//!   order, whatever the number of requests it takes.
//! - Any phase may take several requests: a request holds at most
//!   `proto::BATCH_BYTES_MAX` bytes of operations and expects at most
//!   [`RESULT_BYTES_BUDGET`] bytes of results. All requests but the last
//!   go without commit; the last carries the user's `Commit`, or an empty
//!   commit request follows when the last one could not know it was last.
//!
//! [`BlobExec`] is that sequence as a state machine (request out, reply
//! in), so the synchronous execute, the future and the asynchronous
//! `prepare`/`send`/`poll` all drive the same code. Tables without
//! BLOB/TEXT columns never come here.

use std::collections::HashSet;
use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use proto::{
    LockMode, OpBatchReader, OpBatchWriter, OpHeader, OpKind, ResultReader, BATCH_BYTES_MAX,
    IGNORE_ERROR, KEY_INFO, NO_INDEX, NO_PARTITION,
};
use schema::{
    blob_part_count, ColumnType, KeyEncoder, Value, ValueRef, BLOB_INLINE_BYTES, BLOB_PART_BYTES,
};
use signal::{tc_flags, BlockRef, Signal, SignalBody};

use crate::epoch::Epoch;
use crate::error::{Error, Result};
use crate::schema::{BlobColumn, Table};
use crate::session::Session;
use crate::transaction::{op_error, ExecMode, OpMeta, OpResult, Outcome, Row, TxRequest};

/// Largest BLOB/TEXT value the client writes or reads, in bytes. The
/// client holds a whole value in memory (twice while it is encoded), and
/// a transaction holds one operation record per part at the TC until it
/// ends: 64 MiB is 8,389 parts, a quarter of the default
/// `MaxNoOfConcurrentOperations` (32,768), and about 70 requests of
/// `BATCH_BYTES_MAX`. (MySQL's LONGBLOB allows 4 GiB; NDB's practical
/// limit is the same operation budget.)
pub const BLOB_BYTES_MAX: usize = 64 * 1024 * 1024;

/// Result bytes one request may expect back: its reply, like the request,
/// must fit a `BATCH_BYTES_MAX` batch; 64 KiB are left for the results
/// that are not counted (the user's own reads).
pub const RESULT_BYTES_BUDGET: usize = BATCH_BYTES_MAX - 64 * 1024;

/// Result bytes of one part read: the part, its tag and length, the
/// result's header (generous).
const PART_RESULT_BYTES: usize = BLOB_PART_BYTES + 64;

/// Result bytes of one head in a pre-read (length, inline bytes, framing).
const HEAD_RESULT_BYTES: usize = 8 + BLOB_INLINE_BYTES + 16;

/// Result bytes of the primary key returned with a pre-read by unique
/// key (key info): the largest key a table may have, with framing.
const KEY_INFO_RESULT_BYTES: usize = schema::KEY_BYTES_MAX + 256;

const _: () = assert!(RESULT_BYTES_BUDGET / PART_RESULT_BYTES >= 64);
const _: () = assert!((BLOB_BYTES_MAX as u64).div_ceil(BLOB_PART_BYTES as u64) < u32::MAX as u64);

/// What the client does for one operation on a table with BLOB/TEXT
/// columns beyond sending it (see the module doc).
#[derive(Debug)]
pub(crate) struct BlobWork {
    /// The operation's position in its execute.
    pub op: usize,
    pub table: Arc<Table>,
    pub kind: OpKind,
    /// The lock of a read (committed reads upgraded to shared).
    pub lock: LockMode,
    pub ignore_error: bool,
    /// A unique index's id when the operation goes by unique key: its
    /// primary key comes back with the pre-read or the read (key info).
    pub by_index: Option<u32>,
    /// The primary-key values, or the unique index's.
    pub key: Vec<Value>,
    /// BLOB/TEXT columns written: position and whole value (None: NULL).
    pub writes: Vec<(usize, Option<Vec<u8>>)>,
    /// BLOB/TEXT columns whose old length must be read first.
    pub pre_read: Vec<usize>,
    /// BLOB/TEXT columns a read returns: position in the table, in the row.
    pub reads: Vec<(usize, usize)>,
}

/// Turns the operation's BLOB/TEXT values into heads and says what else
/// it needs (None: nothing, the operation goes as it is). `header` gets a
/// committed read upgraded to shared and key info for reads by unique
/// key; `projection` is the read's column list (None: all).
pub(crate) fn prepare_op(
    table: &Arc<Table>,
    header: &mut OpHeader,
    key: &[Value],
    values: &mut [(usize, Value)],
    projection: Option<&[usize]>,
) -> Result<Option<BlobWork>> {
    debug_assert!(table.has_blobs());
    let mut work = BlobWork {
        op: 0,
        table: Arc::clone(table),
        kind: header.kind,
        lock: header.lock,
        ignore_error: header.flags & IGNORE_ERROR != 0,
        by_index: (header.index_id != NO_INDEX).then_some(header.index_id),
        key: key.to_vec(),
        writes: Vec::new(),
        pre_read: Vec::new(),
        reads: Vec::new(),
    };
    for (c, value) in values.iter_mut() {
        if table.blob(*c).is_some() {
            let whole = take_whole(table, *c, value)?;
            work.writes.push((*c, whole));
        }
    }
    match header.kind {
        // Even without parts, an insert is a work: a later operation's
        // pre-read of the row must come after it (another segment).
        OpKind::Insert => Ok(Some(work)),
        OpKind::Update | OpKind::Write => {
            work.pre_read = work.writes.iter().map(|(c, _)| *c).collect();
            Ok((!work.pre_read.is_empty()).then_some(work))
        }
        OpKind::Delete => {
            if let Some(c) = projection
                .into_iter()
                .flatten()
                .find(|c| table.blob(**c).is_some())
            {
                return Err(Error::usage(format!(
                    "table `{}`: a delete cannot return {} column `{}` (read it first)",
                    table.name(),
                    table.columns()[*c].ty,
                    table.columns()[*c].name
                )));
            }
            work.pre_read = (0..table.columns().len())
                .filter(|c| table.blob(*c).is_some())
                .collect();
            Ok(Some(work))
        }
        OpKind::Read => {
            work.reads = match projection {
                Some(columns) => columns
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| table.blob(**c).is_some())
                    .map(|(at, c)| (*c, at))
                    .collect(),
                None => (0..table.columns().len())
                    .filter(|c| table.blob(*c).is_some())
                    .map(|c| (c, c))
                    .collect(),
            };
            if work.reads.is_empty() {
                return Ok(None);
            }
            if header.lock == LockMode::Committed {
                header.lock = LockMode::Shared;
                work.lock = LockMode::Shared;
            }
            if work.by_index.is_some() {
                header.flags |= KEY_INFO;
            }
            Ok(Some(work))
        }
    }
}

/// Replaces a whole BLOB/TEXT value with its head and returns the whole
/// bytes (None for NULL). A value of another type is left for proto's
/// check to refuse; a head must be complete (it cannot carry the rest).
fn take_whole(table: &Table, c: usize, value: &mut Value) -> Result<Option<Vec<u8>>> {
    let column = &table.columns()[c];
    let bytes = match (&column.ty, std::mem::replace(value, Value::Null)) {
        (_, Value::Null) => return Ok(None),
        (ColumnType::Blob, Value::Bytes(b)) => b,
        (ColumnType::Text { .. }, Value::String(s)) => s.into_bytes(),
        (_, Value::BlobHead { total_bytes, inline }) if total_bytes == inline.len() as u64 => {
            if matches!(column.ty, ColumnType::Text { .. }) && std::str::from_utf8(&inline).is_err() {
                return Err(Error::new(
                    proto::error::BAD_VALUE,
                    format!("table `{}`: TEXT column `{}`: the value is not UTF-8", table.name(), column.name),
                ));
            }
            inline
        }
        (_, Value::BlobHead { total_bytes, .. }) => {
            return Err(Error::new(
                proto::error::BAD_VALUE,
                format!(
                    "table `{}`: {} column `{}`: a head of {total_bytes} bytes is not a value: give the whole value",
                    table.name(),
                    column.ty,
                    column.name
                ),
            ))
        }
        (_, other) => {
            *value = other;
            return Ok(None);
        }
    };
    if bytes.len() > BLOB_BYTES_MAX {
        return Err(too_large(table, c, bytes.len() as u64));
    }
    *value = Value::BlobHead {
        total_bytes: bytes.len() as u64,
        inline: bytes[..bytes.len().min(BLOB_INLINE_BYTES)].to_vec(),
    };
    Ok(Some(bytes))
}

fn too_large(table: &Table, c: usize, bytes: u64) -> Error {
    let column = &table.columns()[c];
    Error::new(
        proto::error::VALUE_TOO_LONG,
        format!(
            "table `{}`: {} column `{}`: a value of {bytes} bytes is over the client's limit of \
             {BLOB_BYTES_MAX} bytes (BLOB_BYTES_MAX)",
            table.name(),
            column.ty,
            column.name
        ),
    )
}

/// A value read from a row: whole, or a head whose parts must be read.
enum Head {
    Whole(Value),
    Long { total: u64, inline: Vec<u8> },
}

/// Looks at a BLOB/TEXT column's value as the data node sent it.
fn head_of(table: &Table, c: usize, value: Value) -> Result<Head> {
    let Value::BlobHead {
        total_bytes,
        inline,
    } = value
    else {
        return Ok(Head::Whole(value));
    };
    let column = &table.columns()[c];
    if total_bytes > BLOB_BYTES_MAX as u64 {
        return Err(too_large(table, c, total_bytes));
    }
    if inline.len() as u64 != total_bytes.min(BLOB_INLINE_BYTES as u64) {
        return Err(Error::new(
            proto::error::MALFORMED_REQUEST,
            format!(
                "table `{}`: column `{}`: a head of {total_bytes} bytes with {} inline",
                table.name(),
                column.name,
                inline.len()
            ),
        ));
    }
    if inline.len() as u64 == total_bytes {
        return whole_value(table, c, inline).map(Head::Whole);
    }
    Ok(Head::Long {
        total: total_bytes,
        inline,
    })
}

/// The user's value of a whole BLOB (bytes) or TEXT (checked UTF-8).
fn whole_value(table: &Table, c: usize, bytes: Vec<u8>) -> Result<Value> {
    let column = &table.columns()[c];
    match column.ty {
        ColumnType::Text { .. } => String::from_utf8(bytes).map(Value::String).map_err(|e| {
            Error::new(
                proto::error::BAD_VALUE,
                format!(
                    "table `{}`: TEXT column `{}`: the stored value is not UTF-8 (at byte {})",
                    table.name(),
                    column.name,
                    e.utf8_error().valid_up_to()
                ),
            )
        }),
        _ => Ok(Value::Bytes(bytes)),
    }
}

/// A long value being read: its head, and its parts as they come.
#[derive(Debug)]
pub(crate) struct ReadJob {
    table: Arc<Table>,
    column: usize,
    /// The base row's primary key.
    pk: Vec<Value>,
    lock: LockMode,
    total: u64,
    /// `total` bytes: the inline head, then the parts where they go.
    data: Vec<u8>,
    /// Parts received, by number.
    got: Vec<bool>,
    /// Where the value goes: an operation (or a scan's row) and a position in its row.
    pub row: usize,
    pub at: usize,
}

impl ReadJob {
    fn new(
        table: &Arc<Table>,
        column: usize,
        pk: Vec<Value>,
        lock: LockMode,
        (total, inline): (u64, Vec<u8>),
        (row, at): (usize, usize),
    ) -> ReadJob {
        debug_assert!(total as usize <= BLOB_BYTES_MAX && inline.len() < total as usize);
        let parts = blob_part_count(total) as usize;
        let mut data = inline;
        data.resize(total as usize, 0);
        ReadJob {
            table: Arc::clone(table),
            column,
            pk,
            lock,
            total,
            data,
            got: vec![false; parts],
            row,
            at,
        }
    }

    fn blob(&self) -> &BlobColumn {
        self.table
            .blob(self.column)
            .expect("a job is made for a blob column")
    }

    /// The bytes of part `part` of the value.
    fn part_range(&self, part: u32) -> Range<usize> {
        let start = BLOB_INLINE_BYTES + part as usize * BLOB_PART_BYTES;
        start..(start + BLOB_PART_BYTES).min(self.total as usize)
    }

    fn accept(&mut self, part: u32, bytes: &[u8]) -> Result<()> {
        let range = self.part_range(part);
        if bytes.len() != range.len() || self.got[part as usize] {
            return Err(self.inconsistent(format!(
                "part {part} has {} bytes, {} expected{}",
                bytes.len(),
                range.len(),
                if self.got[part as usize] {
                    " (twice)"
                } else {
                    ""
                }
            )));
        }
        self.data[range].copy_from_slice(bytes);
        self.got[part as usize] = true;
        Ok(())
    }

    /// The whole value, once every part came.
    pub fn finish(self) -> Result<Value> {
        if let Some(missing) = self.got.iter().position(|g| !g) {
            return Err(self.inconsistent(format!("part {missing} is missing")));
        }
        whole_value(&self.table, self.column, self.data)
    }

    fn inconsistent(&self, what: String) -> Error {
        let column = &self.table.columns()[self.column];
        Error::new(
            proto::error::MALFORMED_REQUEST,
            format!(
                "table `{}`: {} column `{}` of the row with key {:?} ({} bytes): {what}",
                self.table.name(),
                column.ty,
                column.name,
                self.pk,
                self.total
            ),
        )
    }
}

/// Part reads for the BLOB/TEXT values of a row: whole values are put in
/// place, long ones become jobs. `reads` as in [`BlobWork::reads`];
/// `row_index` names the row in the jobs.
pub(crate) fn plan_row_reads(
    table: &Arc<Table>,
    reads: &[(usize, usize)],
    values: &mut [Value],
    pk: &[Value],
    lock: LockMode,
    row_index: usize,
    jobs: &mut Vec<ReadJob>,
) -> Result<()> {
    for &(c, at) in reads {
        let Some(value) = values.get_mut(at) else {
            continue;
        };
        match head_of(table, c, std::mem::replace(value, Value::Null))? {
            Head::Whole(v) => *value = v,
            Head::Long { total, inline } => jobs.push(ReadJob::new(
                table,
                c,
                pk.to_vec(),
                lock,
                (total, inline),
                (row_index, at),
            )),
        }
    }
    Ok(())
}

/// One operation of a request the machine builds.
#[derive(Clone, Copy, Debug)]
enum Planned {
    /// The user's operation of this position.
    User(u32),
    /// The old heads of a work's row (exclusive).
    PreRead(u32),
    /// A part write or delete of a work: column, part number, kind.
    Part {
        work: u32,
        column: u16,
        part: u32,
        kind: OpKind,
    },
    /// A part read of a job.
    Read { job: u32, part: u32 },
    /// An empty end: the request carries no operation.
    End,
}

/// The phases of a segment (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Phase {
    PreRead,
    Main,
    Deferred,
    Reads,
}

/// What the machine learned of a work.
#[derive(Clone, Debug, Default)]
struct WorkState {
    /// The base row's primary key, when known.
    pk: Option<Vec<Value>>,
    /// The pre-read found the row: the old total of each `pre_read` column.
    old: Option<Vec<u64>>,
    /// The user's operation succeeded.
    base_ok: bool,
}

/// What to do next.
pub(crate) enum Step {
    /// Send this request and feed its reply to [`BlobExec::on_reply`].
    Send(TxRequest),
    /// The execute ended.
    Done(Result<Outcome>),
}

/// The user's operations of one execute, with their blob work, as a
/// sequence of requests (see the module doc).
pub(crate) struct BlobExec {
    tx_id: u64,
    link: usize,
    tc: BlockRef,
    me: BlockRef,
    /// The TC knows the transaction (a request with START went).
    started: bool,
    mode: ExecMode,
    batch: u32,
    /// The user's one-op batches, back to back.
    ops: Vec<u8>,
    ranges: Vec<Range<usize>>,
    metas: Vec<OpMeta>,
    works: Vec<BlobWork>,
    states: Vec<WorkState>,
    /// The work of each user operation (`u32::MAX`: none).
    work_of: Vec<u32>,
    /// User operations of each segment.
    segments: Vec<Range<usize>>,
    segment: usize,
    phase: Phase,
    planned: Vec<Planned>,
    cursor: usize,
    /// What each operation of the request in flight is.
    in_flight: Vec<Planned>,
    in_flight_final: bool,
    jobs: Vec<ReadJob>,
    results: Vec<OpResult>,
    epoch: Option<Epoch>,
    committed: bool,
    rolled_back: bool,
    /// Set when the machine rolls the transaction back because of this error.
    failure: Option<Error>,
    /// A NoCommit execute did all its requests.
    finished: bool,
}

/// The parts of a transaction a [`BlobExec`] takes over.
pub(crate) struct ExecInput {
    pub tx_id: u64,
    pub link: usize,
    pub tc: BlockRef,
    pub me: BlockRef,
    pub started: bool,
    pub mode: ExecMode,
    pub batch: u32,
    pub ops: Vec<u8>,
    pub ranges: Vec<Range<usize>>,
    pub metas: Vec<OpMeta>,
    pub works: Vec<BlobWork>,
}

impl BlobExec {
    /// The machine of an execute with blob work (`mode` NoCommit or Commit).
    pub fn new(input: ExecInput) -> BlobExec {
        assert!(
            input.mode != ExecMode::Rollback,
            "a rollback drops the defined operations"
        );
        assert!(
            !input.ranges.is_empty() && !input.works.is_empty(),
            "an execute with blob work"
        );
        assert_eq!(input.ranges.len(), input.metas.len());
        let mut work_of = vec![u32::MAX; input.ranges.len()];
        for (w, work) in input.works.iter().enumerate() {
            work_of[work.op] = w as u32;
        }
        let segments = segments(&input.works, input.ranges.len());
        let states = vec![WorkState::default(); input.works.len()];
        let results = vec![OpResult::Done; input.ranges.len()];
        let mut exec = BlobExec {
            tx_id: input.tx_id,
            link: input.link,
            tc: input.tc,
            me: input.me,
            started: input.started,
            mode: input.mode,
            batch: input.batch,
            ops: input.ops,
            ranges: input.ranges,
            metas: input.metas,
            works: input.works,
            states,
            work_of,
            segments,
            segment: 0,
            phase: Phase::PreRead,
            planned: Vec::new(),
            cursor: 0,
            in_flight: Vec::new(),
            in_flight_final: false,
            jobs: Vec::new(),
            results,
            epoch: None,
            committed: false,
            rolled_back: false,
            failure: None,
            finished: false,
        };
        exec.plan_phase();
        exec
    }

    /// A machine that only reads the parts of `jobs` (a scan's rows), in
    /// a transaction the TC knows.
    pub fn part_reads(
        tx_id: u64,
        link: usize,
        tc: BlockRef,
        me: BlockRef,
        jobs: Vec<ReadJob>,
    ) -> BlobExec {
        let mut exec = BlobExec {
            tx_id,
            link,
            tc,
            me,
            started: true,
            mode: ExecMode::NoCommit,
            batch: 0,
            ops: Vec::new(),
            ranges: Vec::new(),
            metas: Vec::new(),
            works: Vec::new(),
            states: Vec::new(),
            work_of: Vec::new(),
            segments: std::iter::once(0..0).collect(),
            segment: 0,
            phase: Phase::Reads,
            planned: Vec::new(),
            cursor: 0,
            in_flight: Vec::new(),
            in_flight_final: false,
            jobs,
            results: Vec::new(),
            epoch: None,
            committed: false,
            rolled_back: false,
            failure: None,
            finished: false,
        };
        exec.plan_phase();
        exec
    }

    /// Whether the TC knows the transaction.
    pub fn started(&self) -> bool {
        self.started
    }

    /// The jobs of a [`BlobExec::part_reads`] machine, once it is done.
    pub fn take_jobs(&mut self) -> Vec<ReadJob> {
        std::mem::take(&mut self.jobs)
    }

    /// The first request.
    pub fn start(&mut self) -> Step {
        self.advance()
    }

    /// Takes the reply of the request in flight.
    pub fn on_reply(&mut self, session: &Session, reply: Result<SignalBody>) -> Step {
        if let Some(failure) = self.failure.take() {
            // The rollback's answer: the execute ends with the reason.
            self.rolled_back = true;
            return Step::Done(Err(failure));
        }
        let body = match reply {
            Ok(body) => body,
            Err(error) => return Step::Done(Err(error)),
        };
        if let SignalBody::TcKeyRef {
            code,
            op_index,
            message,
            ..
        } = &body
        {
            // The TC aborted the transaction.
            let origin = self.in_flight.get(*op_index as usize).copied();
            return Step::Done(Err(self.ref_error(session, origin, *code, message)));
        }
        match self.accept(body) {
            Ok(()) => self.advance(),
            Err(error) if self.committed || self.rolled_back => Step::Done(Err(error)),
            Err(error) => self.fail(error),
        }
    }

    /// The next request, or the end.
    fn advance(&mut self) -> Step {
        loop {
            if self.committed || self.rolled_back || self.finished {
                // The last request may have been the last part reads.
                if let Err(error) = self.finish_jobs() {
                    if self.rolled_back {
                        return Step::Done(Err(error));
                    }
                    self.finished = false;
                    return self.fail(error);
                }
                return Step::Done(Ok(self.outcome()));
            }
            if self.cursor < self.planned.len() {
                return match self.request() {
                    Ok(request) => Step::Send(request),
                    Err(error) => self.fail(error),
                };
            }
            if let Err(error) = self.next_phase() {
                return self.fail(error);
            }
        }
    }

    /// An error found on the client: roll the transaction back, then end with it.
    fn fail(&mut self, error: Error) -> Step {
        if !self.started {
            return Step::Done(Err(error));
        }
        self.failure = Some(error);
        self.in_flight.clear();
        Step::Send(self.signal(tc_flags::ROLLBACK, Vec::new(), false))
    }

    fn outcome(&mut self) -> Outcome {
        Outcome::new(
            self.epoch,
            self.committed,
            self.rolled_back,
            self.batch,
            std::mem::take(&mut self.results),
        )
    }

    /// Moves to the next phase (or segment) and plans it; at the very end
    /// plans the commit when one is owed.
    fn next_phase(&mut self) -> Result<()> {
        match self.phase {
            Phase::PreRead => self.phase = Phase::Main,
            Phase::Main => self.phase = Phase::Deferred,
            Phase::Deferred => self.phase = Phase::Reads,
            Phase::Reads => {
                self.finish_jobs()?;
                if self.segment + 1 < self.segments.len() {
                    self.segment += 1;
                    self.phase = Phase::PreRead;
                } else {
                    // The end. A commit is owed when the last request
                    // could not know it was the last (committed ends earlier).
                    assert!(!self.committed, "a committed execute has ended");
                    self.planned.clear();
                    self.cursor = 0;
                    match self.mode {
                        ExecMode::Commit => self.planned.push(Planned::End),
                        _ => self.finished = true,
                    }
                    return Ok(());
                }
            }
        }
        self.plan_phase();
        Ok(())
    }

    /// Plans the operations of the current phase of the current segment.
    fn plan_phase(&mut self) {
        self.planned.clear();
        self.cursor = 0;
        let users = self.segments[self.segment].clone();
        match self.phase {
            Phase::PreRead => {
                for op in users {
                    let w = self.work_of[op];
                    if w != u32::MAX && !self.works[w as usize].pre_read.is_empty() {
                        self.planned.push(Planned::PreRead(w));
                    }
                }
            }
            Phase::Main => {
                let mut planned = std::mem::take(&mut self.planned);
                for op in users {
                    planned.push(Planned::User(op as u32));
                    let w = self.work_of[op];
                    if w != u32::MAX && !self.deferred(w as usize) {
                        self.plan_parts(w as usize, &mut planned);
                    }
                }
                self.planned = planned;
            }
            Phase::Deferred => {
                let mut planned = std::mem::take(&mut self.planned);
                for op in users {
                    let w = self.work_of[op];
                    if w != u32::MAX && self.deferred(w as usize) && self.states[w as usize].base_ok
                    {
                        self.plan_parts(w as usize, &mut planned);
                    }
                }
                self.planned = planned;
            }
            Phase::Reads => {
                for (j, job) in self.jobs.iter().enumerate() {
                    for part in 0..job.got.len() as u32 {
                        self.planned.push(Planned::Read {
                            job: j as u32,
                            part,
                        });
                    }
                }
            }
        }
    }

    /// Parts of a write whose base operation may fail without aborting
    /// (`ignore_error`) wait until it is known to have succeeded.
    fn deferred(&self, w: usize) -> bool {
        let work = &self.works[w];
        let parts = match work.kind {
            OpKind::Read => false,
            OpKind::Insert => work
                .writes
                .iter()
                .flat_map(|(_, whole)| whole)
                .any(|whole| whole.len() > BLOB_INLINE_BYTES),
            OpKind::Update | OpKind::Write | OpKind::Delete => true,
        };
        work.ignore_error && parts
    }

    /// The part writes and deletes of work `w` (nothing while its row's
    /// key is unknown: the base operation then fails by itself).
    fn plan_parts(&self, w: usize, out: &mut Vec<Planned>) {
        let work = &self.works[w];
        let state = &self.states[w];
        if state.pk.is_none() && work.kind != OpKind::Insert && work.by_index.is_some() {
            return;
        }
        let old_total = |c: usize| -> Option<u64> {
            let at = work.pre_read.iter().position(|p| *p == c)?;
            state.old.as_ref().map(|old| old[at])
        };
        let push = |out: &mut Vec<Planned>, c: usize, parts: Range<u64>, kind: OpKind| {
            out.extend(parts.map(|part| Planned::Part {
                work: w as u32,
                column: c as u16,
                part: part as u32,
                kind,
            }));
        };
        match work.kind {
            OpKind::Insert => {
                for (c, whole) in &work.writes {
                    let new = whole
                        .as_ref()
                        .map_or(0, |v| blob_part_count(v.len() as u64));
                    push(out, *c, 0..new, OpKind::Insert);
                }
            }
            OpKind::Update | OpKind::Write => {
                if state.old.is_none() && work.kind == OpKind::Update {
                    return; // no row: the update fails (626)
                }
                for (c, whole) in &work.writes {
                    let new = whole
                        .as_ref()
                        .map_or(0, |v| blob_part_count(v.len() as u64));
                    let old = old_total(*c).map_or(0, blob_part_count);
                    push(out, *c, 0..new, OpKind::Write);
                    push(out, *c, new..old.max(new), OpKind::Delete);
                }
            }
            OpKind::Delete => {
                for &c in &work.pre_read {
                    let old = old_total(c).map_or(0, blob_part_count);
                    push(out, c, 0..old, OpKind::Delete);
                }
            }
            OpKind::Read => {}
        }
    }

    /// Whether a request after the current phase's may still be needed.
    fn more_may_follow(&self) -> bool {
        if self.segment + 1 < self.segments.len() {
            return true;
        }
        let users = self.segments[self.segment].clone();
        let works = users.filter_map(|op| {
            let w = self.work_of[op];
            (w != u32::MAX).then_some(w as usize)
        });
        let mut more = false;
        for w in works {
            let work = &self.works[w];
            more |= match self.phase {
                Phase::PreRead => true,
                Phase::Main => self.deferred(w) || work.kind == OpKind::Read,
                Phase::Deferred => work.kind == OpKind::Read,
                Phase::Reads => false,
            };
        }
        more
    }

    /// Builds the next request from the plan, as many operations as fit.
    fn request(&mut self) -> Result<TxRequest> {
        if matches!(self.planned[self.cursor], Planned::End) {
            self.cursor += 1;
            self.in_flight.clear();
            self.in_flight_final = true;
            return Ok(self.signal(tc_flags::COMMIT, Vec::new(), true));
        }
        let mut batch = Vec::new();
        let mut origins = std::mem::take(&mut self.in_flight);
        origins.clear();
        let mut result_bytes = 0;
        {
            let mut writer = OpBatchWriter::new(&mut batch);
            while self.cursor < self.planned.len() {
                let planned = self.planned[self.cursor];
                let expected = self.result_bytes(planned);
                if !origins.is_empty() && result_bytes + expected > RESULT_BYTES_BUDGET {
                    break;
                }
                let index = origins.len() as u32;
                match self.encode(planned, index, &mut writer) {
                    Ok(()) => {}
                    Err(_) if !origins.is_empty() => break, // full: the next request
                    Err(error) => return Err(error),
                }
                origins.push(planned);
                result_bytes += expected;
                self.cursor += 1;
            }
        }
        let last = self.cursor == self.planned.len() && !self.more_may_follow();
        let commit = last && self.mode == ExecMode::Commit;
        self.in_flight = origins;
        self.in_flight_final = commit;
        Ok(self.signal(if commit { tc_flags::COMMIT } else { 0 }, batch, commit))
    }

    /// A request of this transaction with `flags` (START added when due).
    fn signal(&mut self, flags: u32, mut ops: Vec<u8>, commit: bool) -> TxRequest {
        if ops.is_empty() {
            OpBatchWriter::new(&mut ops);
        }
        let flags = flags | if self.started { 0 } else { tc_flags::START };
        self.started = true;
        TxRequest {
            tx_id: self.tx_id,
            link: self.link,
            signal: Signal {
                receiver: self.tc,
                sender: self.me,
                body: SignalBody::TcKeyReq {
                    tx_id: self.tx_id,
                    flags,
                    ops,
                },
            },
            commit,
            mode: if commit {
                ExecMode::Commit
            } else {
                ExecMode::NoCommit
            },
            batch: self.batch,
            metas: Vec::new(),
            sent_at: Instant::now(),
        }
    }

    fn result_bytes(&self, planned: Planned) -> usize {
        match planned {
            Planned::PreRead(w) => {
                let work = &self.works[w as usize];
                let key = if work.by_index.is_some() {
                    KEY_INFO_RESULT_BYTES
                } else {
                    0
                };
                64 + work.pre_read.len() * HEAD_RESULT_BYTES + key
            }
            Planned::Read { .. } => PART_RESULT_BYTES,
            Planned::User(_) | Planned::Part { .. } | Planned::End => 0,
        }
    }

    /// Appends one planned operation as operation `index` of the request.
    fn encode(&self, planned: Planned, index: u32, writer: &mut OpBatchWriter<'_>) -> Result<()> {
        match planned {
            Planned::User(op) => {
                let bytes = &self.ops[self.ranges[op as usize].clone()];
                let reader = OpBatchReader::new(bytes)?;
                let view = reader.iter().next().expect("a defined op");
                let header = OpHeader {
                    op_index: index,
                    ..view.header
                };
                writer.copy(&header, &view)?;
            }
            Planned::PreRead(w) => {
                let work = &self.works[w as usize];
                let table = &work.table;
                let flags = IGNORE_ERROR | if work.by_index.is_some() { KEY_INFO } else { 0 };
                writer.begin(&OpHeader {
                    op_index: index,
                    table_id: table.id(),
                    table_version: table.version(),
                    index_id: work.by_index.unwrap_or(NO_INDEX),
                    partition: NO_PARTITION,
                    kind: OpKind::Read,
                    lock: LockMode::Exclusive,
                    flags,
                });
                for v in &work.key {
                    writer.key(v.as_ref());
                }
                for &c in &work.pre_read {
                    writer.project(c as u16);
                }
                writer.end()?;
            }
            Planned::Part {
                work,
                column,
                part,
                kind,
            } => {
                let w = &self.works[work as usize];
                let blob = w
                    .table
                    .blob(usize::from(column))
                    .expect("planned for a blob column");
                let pk = match (&self.states[work as usize].pk, w.by_index) {
                    (Some(pk), _) => pk.as_slice(),
                    (None, None) => w.key.as_slice(),
                    (None, Some(_)) => unreachable!("parts are planned once the key is known"),
                };
                let data = match kind {
                    OpKind::Insert | OpKind::Write => {
                        let (_, whole) = w
                            .writes
                            .iter()
                            .find(|(c, _)| *c == usize::from(column))
                            .expect("a written column");
                        let whole = whole.as_deref().expect("parts of a value, not of NULL");
                        Some(part_bytes(whole, part))
                    }
                    _ => None,
                };
                encode_part(
                    writer,
                    blob,
                    index,
                    pk,
                    part,
                    kind,
                    LockMode::Exclusive,
                    data,
                )?;
            }
            Planned::Read { job, part } => {
                let job = &self.jobs[job as usize];
                encode_part(
                    writer,
                    job.blob(),
                    index,
                    &job.pk,
                    part,
                    OpKind::Read,
                    job.lock,
                    None,
                )?;
            }
            Planned::End => unreachable!("an end travels alone"),
        }
        Ok(())
    }

    /// Reads a reply into the machine.
    fn accept(&mut self, body: SignalBody) -> Result<()> {
        let final_request = std::mem::replace(&mut self.in_flight_final, false);
        match body {
            SignalBody::TcKeyConf {
                flags,
                epoch,
                incarnation,
                results,
                ..
            } => {
                self.committed = flags & tc_flags::COMMITTED != 0;
                self.rolled_back = flags & tc_flags::ROLLED_BACK != 0;
                if self.committed {
                    self.epoch = Some(Epoch::from_u64(epoch).in_incarnation(incarnation));
                } else if final_request && !self.rolled_back {
                    return Err(Error::new(
                        proto::error::MALFORMED_REQUEST,
                        format!(
                            "transaction {:#x}: the commit was answered without committing",
                            self.tx_id
                        ),
                    ));
                }
                if results.is_empty() {
                    return Ok(());
                }
                let results = std::sync::Arc::new(results);
                let reader = ResultReader::new(&results)?;
                for result in reader.iter() {
                    let Some(&origin) = self.in_flight.get(result.op_index as usize) else {
                        return Err(Error::new(
                            proto::error::MALFORMED_REQUEST,
                            format!(
                                "a result for operation {} of {}",
                                result.op_index,
                                self.in_flight.len()
                            ),
                        ));
                    };
                    self.accept_result(origin, &result, &results)?;
                }
                Ok(())
            }
            other => Err(Error::new(
                proto::error::MALFORMED_REQUEST,
                format!("unexpected answer {}", other.name()),
            )),
        }
    }

    fn accept_result(
        &mut self,
        origin: Planned,
        result: &proto::OpResult<'_>,
        bytes: &std::sync::Arc<Vec<u8>>,
    ) -> Result<()> {
        match origin {
            Planned::User(op) => {
                let op = op as usize;
                let owner = crate::transaction::ReplyBytes::Shared(std::sync::Arc::clone(bytes));
                let mut decoded =
                    crate::transaction::decode_result(&self.metas[op], result, bytes, owner)?;
                let w = self.work_of[op];
                if w != u32::MAX {
                    let w = w as usize;
                    self.states[w].base_ok = result.is_ok();
                    if let OpResult::Row(row) = &mut decoded {
                        self.plan_reads_of(w, op, row)?;
                    }
                }
                self.results[op] = decoded;
            }
            Planned::PreRead(w) => {
                let w = w as usize;
                if !result.is_ok() {
                    if result.code != proto::error::NO_SUCH_ROW {
                        let work = &self.works[w];
                        return Err(op_error(
                            &self.metas[work.op],
                            result.code,
                            "(reading the old BLOB/TEXT heads)",
                        ));
                    }
                    return Ok(());
                }
                let work = &self.works[w];
                let mut old = Vec::with_capacity(work.pre_read.len());
                for (value, &c) in result.values().zip(&work.pre_read) {
                    old.push(match value {
                        ValueRef::BlobHead { total_bytes, .. } => total_bytes,
                        ValueRef::Null => 0,
                        other => {
                            return Err(Error::new(
                                proto::error::MALFORMED_REQUEST,
                                format!(
                                    "table `{}`: column `{}` read back as {}, not a BLOB/TEXT head",
                                    work.table.name(),
                                    work.table.columns()[c].name,
                                    other.kind()
                                ),
                            ))
                        }
                    });
                }
                if old.len() != work.pre_read.len() {
                    return Err(Error::new(
                        proto::error::MALFORMED_REQUEST,
                        format!(
                            "table `{}`: a pre-read returned {} heads of {}",
                            work.table.name(),
                            old.len(),
                            work.pre_read.len()
                        ),
                    ));
                }
                if work.by_index.is_some() {
                    let pk: Vec<Value> = result.keys().map(|v| v.to_value()).collect();
                    if pk.len() != work.table.primary_key().len() {
                        return Err(Error::new(
                            proto::error::MALFORMED_REQUEST,
                            format!(
                                "table `{}`: a read by unique key returned no primary key",
                                work.table.name()
                            ),
                        ));
                    }
                    self.states[w].pk = Some(pk);
                }
                self.states[w].old = Some(old);
            }
            Planned::Part { .. } => {
                if !result.is_ok() {
                    return Err(Error::with_context(
                        result.code,
                        "a BLOB/TEXT part operation ignored its error",
                    ));
                }
            }
            Planned::Read { job, part } => {
                let job = &mut self.jobs[job as usize];
                let data = match result.values().next() {
                    Some(ValueRef::Bytes(b)) if result.has_row => b,
                    _ => return Err(job.inconsistent(format!("part {part} was not read back"))),
                };
                job.accept(part, data)?;
            }
            Planned::End => {}
        }
        Ok(())
    }

    /// A user read's row: whole values in place, jobs for the long ones.
    fn plan_reads_of(&mut self, w: usize, op: usize, row: &mut Row) -> Result<()> {
        let work = &self.works[w];
        if work.kind != OpKind::Read {
            return Ok(());
        }
        let pk: Vec<Value> = match work.by_index {
            Some(_) => row.take_key(),
            None => work.key.clone(),
        };
        if pk.len() != work.table.primary_key().len() {
            return Err(Error::new(
                proto::error::MALFORMED_REQUEST,
                format!(
                    "table `{}`: a read by unique key returned no primary key",
                    work.table.name()
                ),
            ));
        }
        plan_row_reads(
            &work.table,
            &work.reads,
            row.values_mut(),
            &pk,
            work.lock,
            op,
            &mut self.jobs,
        )
    }

    /// Puts the values of finished jobs in their rows (scans take theirs).
    /// A bad value (TEXT not UTF-8, a part missing) is an error; found
    /// after the commit (the last part reads travel with it), it is the
    /// read's result instead, in a committed outcome.
    fn finish_jobs(&mut self) -> Result<()> {
        if self.ranges.is_empty() {
            return Ok(()); // part reads of a scan: the scan takes the jobs
        }
        for job in std::mem::take(&mut self.jobs) {
            let (op, at) = (job.row, job.at);
            match job.finish() {
                Ok(value) => {
                    if let OpResult::Row(row) = &mut self.results[op] {
                        row.values_mut()[at] = value;
                    }
                }
                Err(error) if self.committed => self.results[op] = OpResult::Failed(error),
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }

    /// The error of a refused request, naming the user's operation, or
    /// the base table and column of a part operation.
    fn ref_error(
        &self,
        session: &Session,
        origin: Option<Planned>,
        code: u32,
        message: &str,
    ) -> Error {
        let blob_error = |table: &Table, c: usize, what: String| {
            let column = &table.columns()[c];
            let detail = if message.is_empty() {
                proto::error::message(code)
            } else {
                message
            };
            Error::new(
                code,
                format!(
                    "{what} of {} column `{}` of table `{}`: {detail}",
                    column.ty,
                    column.name,
                    table.name()
                ),
            )
        };
        let table_changed = matches!(
            code,
            proto::error::WRONG_SCHEMA_VERSION | proto::error::NO_SUCH_TABLE
        );
        match origin {
            Some(Planned::User(op)) => {
                let meta = &self.metas[op as usize];
                if table_changed {
                    session.forget_table(meta.table.name());
                }
                op_error(meta, code, message)
            }
            Some(Planned::PreRead(w)) => {
                let work = &self.works[w as usize];
                if table_changed {
                    session.forget_table(work.table.name());
                }
                op_error(&self.metas[work.op], code, message)
            }
            Some(Planned::Part {
                work,
                column,
                part,
                kind,
            }) => {
                let w = &self.works[work as usize];
                if table_changed {
                    session.forget_table(w.table.name());
                }
                blob_error(
                    &w.table,
                    usize::from(column),
                    format!("{} of part {part}", kind.name()),
                )
            }
            Some(Planned::Read { job, part }) => {
                let job = &self.jobs[job as usize];
                if table_changed {
                    session.forget_table(job.table.name());
                }
                blob_error(&job.table, job.column, format!("read of part {part}"))
            }
            Some(Planned::End) | None if message.is_empty() => {
                Error::with_context(code, format!("transaction {:#x}", self.tx_id))
            }
            Some(Planned::End) | None => Error::new(code, message.to_owned()),
        }
    }
}

/// Bytes of part `part` of a whole value.
fn part_bytes(whole: &[u8], part: u32) -> &[u8] {
    let start = BLOB_INLINE_BYTES + part as usize * BLOB_PART_BYTES;
    debug_assert!(
        start < whole.len(),
        "part {part} of a value of {} bytes",
        whole.len()
    );
    &whole[start..(start + BLOB_PART_BYTES).min(whole.len())]
}

/// One operation on a parts table: key = base key and part number.
#[allow(clippy::too_many_arguments)]
fn encode_part(
    writer: &mut OpBatchWriter<'_>,
    blob: &BlobColumn,
    index: u32,
    pk: &[Value],
    part: u32,
    kind: OpKind,
    lock: LockMode,
    data: Option<&[u8]>,
) -> Result<()> {
    let parts = &blob.parts;
    debug_assert_eq!(
        parts.primary_key().len(),
        pk.len() + 1,
        "parts key: base key, `$PART`"
    );
    writer.begin(&OpHeader {
        op_index: index,
        table_id: parts.id(),
        table_version: parts.version(),
        index_id: NO_INDEX,
        partition: NO_PARTITION,
        kind,
        lock,
        flags: 0,
    });
    for v in pk {
        writer.key(v.as_ref());
    }
    writer.key(ValueRef::UInt(u64::from(part)));
    if let Some(data) = data {
        writer.value(blob.data_column() as u16, ValueRef::Bytes(data));
    }
    if kind == OpKind::Read {
        writer.project(blob.data_column() as u16);
    }
    writer.end()?;
    Ok(())
}

/// Cuts the user's operations into segments in which no two operations
/// with blob work touch one row (see the module doc).
fn segments(works: &[BlobWork], ops: usize) -> Vec<Range<usize>> {
    let mut segments = Vec::new();
    let mut start = 0;
    // Rows touched in the current segment, by table id and encoded key;
    // tables touched at all; tables with an op by unique key (some row).
    let mut rows: HashSet<(u32, Vec<u8>)> = HashSet::new();
    let mut tables: HashSet<u32> = HashSet::new();
    let mut unknown: HashSet<u32> = HashSet::new();
    for work in works {
        let id = work.table.id();
        let key = match work.by_index {
            Some(_) => None,
            None => {
                let mut bytes = Vec::new();
                KeyEncoder::primary_key(work.table.def())
                    .encode(&work.key, &mut bytes)
                    .ok()
                    .map(|()| bytes)
            }
        };
        let clash = unknown.contains(&id)
            || match &key {
                Some(key) => rows.contains(&(id, key.clone())),
                None => tables.contains(&id),
            };
        if clash {
            segments.push(start..work.op);
            start = work.op;
            rows.clear();
            tables.clear();
            unknown.clear();
        }
        tables.insert(id);
        match key {
            Some(key) => {
                rows.insert((id, key));
            }
            None => {
                unknown.insert(id);
            }
        }
    }
    segments.push(start..ops);
    debug_assert!(segments.iter().all(|s| !s.is_empty()));
    segments
}

#[cfg(test)]
mod tests {
    use schema::{Column, TableDef};

    use super::*;

    fn work(table: &Arc<Table>, op: usize, key: Option<i64>) -> BlobWork {
        BlobWork {
            op,
            table: Arc::clone(table),
            kind: OpKind::Update,
            lock: LockMode::Exclusive,
            ignore_error: false,
            by_index: key.is_none().then_some(7),
            key: vec![Value::Int(key.unwrap_or(0))],
            writes: Vec::new(),
            pre_read: Vec::new(),
            reads: Vec::new(),
        }
    }

    fn table(name: &str, id: u32) -> Arc<Table> {
        let def = TableDef::new(
            name,
            id,
            vec![
                Column::new("k", ColumnType::BigInt { unsigned: false }),
                Column::new("b", ColumnType::Blob),
            ],
        )
        .primary_key(vec![0])
        .partitions(4)
        .build()
        .expect("valid");
        Arc::new(Table::new(def))
    }

    #[test]
    fn segments_cut_before_a_second_op_on_one_row() {
        let a = table("a", 1);
        let b = table("b", 2);
        // Distinct rows, other ops between: one segment.
        let works = [
            work(&a, 0, Some(1)),
            work(&a, 2, Some(2)),
            work(&b, 3, Some(1)),
        ];
        assert_eq!(segments(&works, 5), vec![0..5]);
        // The same row again: a cut before it.
        let works = [
            work(&a, 0, Some(1)),
            work(&a, 1, Some(2)),
            work(&a, 3, Some(1)),
        ];
        assert_eq!(segments(&works, 4), vec![0..3, 3..4]);
        // By unique key: any row of the table clashes, other tables do not.
        let works = [
            work(&a, 0, Some(1)),
            work(&b, 1, None),
            work(&a, 2, None),
            work(&a, 3, Some(5)),
            work(&b, 4, Some(9)),
        ];
        assert_eq!(segments(&works, 6), vec![0..2, 2..3, 3..6]);
    }

    #[test]
    fn parts_cover_the_value_and_heads_are_checked() {
        let whole = bytes(BLOB_INLINE_BYTES + 2 * BLOB_PART_BYTES + 3);
        assert_eq!(blob_part_count(whole.len() as u64), 3);
        let mut joined = whole[..BLOB_INLINE_BYTES].to_vec();
        for part in 0..3 {
            joined.extend_from_slice(part_bytes(&whole, part));
        }
        assert_eq!(joined, whole);
        assert_eq!(part_bytes(&whole, 2).len(), 3);
        let t = table("a", 1);
        let head = |total: u64, inline: usize| Value::BlobHead {
            total_bytes: total,
            inline: vec![1; inline],
        };
        assert!(
            matches!(head_of(&t, 1, head(10, 10)), Ok(Head::Whole(Value::Bytes(b))) if b.len() == 10)
        );
        assert!(matches!(
            head_of(&t, 1, head(300, 256)),
            Ok(Head::Long { total: 300, .. })
        ));
        assert!(head_of(&t, 1, head(300, 200)).is_err(), "a short head");
        let over = head_of(&t, 1, head(BLOB_BYTES_MAX as u64 + 1, 256));
        assert_eq!(
            over.err().map(|e| e.code),
            Some(proto::error::VALUE_TOO_LONG)
        );
    }

    fn bytes(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i % 251) as u8).collect()
    }
}
