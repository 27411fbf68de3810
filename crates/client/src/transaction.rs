//! [`Transaction`]: operations defined on the client, sent as one batch
//! per [`Transaction::execute`] (one `TcKeyReq`, one round trip), and the
//! results.
//!
//! Each operation is encoded when it is defined, into a one-op
//! `proto::ops` batch, and checked at once with proto's own check
//! (`OpView::check`: key, types, lengths, columns), so bad input is a
//! permanent error naming the table and column before anything is sent,
//! and the transaction stays usable. The common op of a key-value table
//! (integers only, by primary key) is checked as it is encoded instead
//! (`IntegerFit`), with what proto's check would find; anything else goes
//! through proto's check. `execute` copies the ops' bodies into the
//! request's batch unchanged; a lone op's batch is the request's batch.
//!
//! A transaction's methods take `&self`, so a scan can run while the same
//! transaction updates or deletes the rows it returns (takeover).
//!
//! An execute with operations on BLOB/TEXT columns may take several
//! requests (`crate::blob`); without them it is always one.

use std::borrow::Cow;
use std::cell::OnceCell;
use std::cell::RefCell;
use std::future::Future;
use std::ops::Range;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use proto::value::EncodedValues;
use proto::{
    OpBatchReader, OpBatchWriter, OpHeader, OpKind, ResultReader, IGNORE_ERROR, NO_INDEX,
    NO_PARTITION, UNLOCK,
};
use schema::{integer_code_fits, IndexKind, Value, ValueRef};
use signal::{tc_flags, Signal, SignalBody};
use smallvec::SmallVec;

pub use proto::{LockMode, LockWait};

use crate::blob::{self, BlobExec, BlobWork, ExecInput, ReadJob, Step};
use crate::epoch::Epoch;
use crate::error::{Error, Result};
use crate::journal::Journal;
use crate::schema::Table;
use crate::session::{request_flags, tc_ref, ReqKey, Session, Spares};
use crate::stats;

/// Bytes of `proto::ops`' batch header (magic, format version, op count),
/// before each defined op and once before a request's ops; `build`
/// asserts that proto writes this many.
const BATCH_HEADER_BYTES: usize = 2 + 1 + 4;

/// What `execute` does after sending the defined operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExecMode {
    /// Run the operations; the transaction stays open (locks held).
    NoCommit,
    /// Run the operations and commit.
    Commit,
    /// Drop the defined operations and roll the transaction back.
    Rollback,
}

/// Names an operation's result in the [`Outcome`] of the execute that sent it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpHandle {
    batch: u32,
    index: u32,
}

/// What one operation did.
#[derive(Clone, Debug, PartialEq)]
pub enum OpResult {
    /// A write succeeded.
    Done,
    /// A read's row.
    Row(Row),
    /// The operation failed and asked to ignore its error.
    Failed(Error),
}

/// The result of an execute: its end state and each operation's result.
#[derive(Debug)]
pub struct Outcome {
    /// The commit's epoch (its [`Epoch::hi`] is the global checkpoint
    /// [`crate::Session::wait_durable`] waits for); `None` when not committed.
    pub epoch: Option<Epoch>,
    /// The transaction committed.
    pub committed: bool,
    /// The transaction was rolled back as asked.
    pub rolled_back: bool,
    batch: u32,
    results: OpResults,
}

/// The results of an execute: inline for one operation (the common
/// transaction of a key-value workload), so its outcome allocates no list.
type OpResults = SmallVec<[OpResult; 1]>;

impl Outcome {
    pub(crate) fn new(
        epoch: Option<Epoch>,
        committed: bool,
        rolled_back: bool,
        batch: u32,
        results: Vec<OpResult>,
    ) -> Outcome {
        Outcome {
            epoch,
            committed,
            rolled_back,
            batch,
            results: SmallVec::from_vec(results),
        }
    }

    /// The global checkpoint of the commit: its epoch's hi.
    pub fn gci(&self) -> Option<u32> {
        self.epoch.map(Epoch::hi)
    }

    /// The result of an operation of this execute.
    pub fn result(&self, handle: OpHandle) -> Option<&OpResult> {
        if handle.batch != self.batch {
            return None;
        }
        self.results.get(handle.index as usize)
    }

    /// The row a read returned (None for a failed or ignored read).
    pub fn row(&self, handle: OpHandle) -> Option<&Row> {
        match self.result(handle) {
            Some(OpResult::Row(row)) => Some(row),
            _ => None,
        }
    }

    /// Moves a read's row out.
    pub fn take_row(&mut self, handle: OpHandle) -> Option<Row> {
        if handle.batch != self.batch {
            return None;
        }
        let slot = self.results.get_mut(handle.index as usize)?;
        match std::mem::replace(slot, OpResult::Done) {
            OpResult::Row(row) => Some(row),
            other => {
                *slot = other;
                None
            }
        }
    }

    /// The error of an operation that ignored it.
    pub fn error(&self, handle: OpHandle) -> Option<&Error> {
        match self.result(handle) {
            Some(OpResult::Failed(error)) => Some(error),
            _ => None,
        }
    }

    /// Results of every operation of the execute, in definition order.
    pub fn results(&self) -> &[OpResult] {
        &self.results
    }
}

/// A row read by key or by a scan.
///
/// A row read by key keeps its values as they came (checked, in the reply's
/// buffer, shared by the reply's rows) and decodes them the first time they
/// are asked for: a caller that only needs to know the read succeeded, or
/// reads one column, does not pay for decoding every column.
#[derive(Clone, Debug)]
pub struct Row {
    table: Arc<Table>,
    /// Table positions of `values`.
    columns: Arc<[usize]>,
    /// The values and key values as encoded, when not decoded yet.
    raw: Option<RawRow>,
    values: OnceCell<Vec<Value>>,
    /// The primary key (key info of a locking scan), else empty.
    key: OnceCell<Vec<Value>>,
}

/// The reply buffer a row's values are ranges of: the row's own when the
/// reply holds one result (no shared count to allocate and drop, the
/// common read), else shared by the reply's rows.
#[derive(Clone, Debug)]
pub(crate) enum ReplyBytes {
    Own(PooledBytes),
    Shared(Arc<Vec<u8>>),
}

impl std::ops::Deref for ReplyBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            ReplyBytes::Own(bytes) => &bytes.0,
            ReplyBytes::Shared(bytes) => bytes,
        }
    }
}

/// A reply's payload, which goes back to the payload buffers of the thread
/// that drops it (`signal::buffers::keep`, bounded) rather than to the
/// allocator: the decoder of the next reply on the receiving thread fills
/// it again (`signal::buffers::filled`), so a read costs no malloc and no
/// free for its reply once warm. A row dropped on another thread leaves
/// the buffer in that thread's pool, within the same bounds.
#[derive(Clone, Debug, Default)]
pub(crate) struct PooledBytes(Vec<u8>);

impl PooledBytes {
    /// The bytes, no longer given back on drop (for a shared owner).
    fn into_vec(mut self) -> Vec<u8> {
        std::mem::take(&mut self.0)
    }
}

impl std::ops::Deref for PooledBytes {
    type Target = Vec<u8>;

    fn deref(&self) -> &Vec<u8> {
        &self.0
    }
}

impl Drop for PooledBytes {
    fn drop(&mut self) {
        signal::buffers::keep(std::mem::take(&mut self.0));
    }
}

/// A row's checked, still encoded values: ranges of a reply's buffer.
///
/// Invariant (relied on by `RawRow::values`, for soundness): the ranges
/// hold values that passed their check (`RowParts::check`,
/// `OpResult::check_row`) on these very bytes, which nothing writes
/// afterwards (`ReplyBytes` only derefs).
#[derive(Clone, Debug)]
pub(crate) struct RawRow {
    bytes: ReplyBytes,
    values: (usize, Range<usize>),
    keys: (usize, Range<usize>),
}

impl RawRow {
    /// `values` and `keys` are parts of `bytes` whose every value was
    /// checked (`OpResult::try_values`); `owner` holds `bytes` (or will:
    /// see `Row::own_reply`).
    pub(crate) fn new(
        bytes: &[u8],
        owner: ReplyBytes,
        (value_count, values): EncodedValues<'_>,
        (key_count, keys): EncodedValues<'_>,
    ) -> RawRow {
        let range_of = |part: &[u8]| {
            let start = part.as_ptr() as usize - bytes.as_ptr() as usize;
            assert!(
                start + part.len() <= bytes.len(),
                "a part of the reply's buffer"
            );
            start..start + part.len()
        };
        RawRow {
            values: (value_count, range_of(values)),
            keys: (key_count, range_of(keys)),
            bytes: owner,
        }
    }

    /// The values of one part (`values` or `keys`), borrowed.
    fn values<'r>(
        (count, range): &(usize, Range<usize>),
        bytes: &'r [u8],
    ) -> proto::value::TrustedValues<'r> {
        // SAFETY: the type's invariant: these bytes' values were checked
        // when the row was made, and have not changed.
        unsafe { proto::value::trusted_values(&bytes[range.clone()], *count) }
    }

    fn decode(part: &(usize, Range<usize>), bytes: &[u8]) -> Vec<Value> {
        let mut out = Vec::with_capacity(part.0);
        out.extend(RawRow::values(part, bytes).map(|v| v.to_value()));
        debug_assert_eq!(out.len(), part.0, "checked values decode");
        out
    }
}

impl PartialEq for Table {
    fn eq(&self, other: &Table) -> bool {
        self.def() == other.def()
    }
}

impl PartialEq for Row {
    fn eq(&self, other: &Row) -> bool {
        self.table == other.table
            && self.columns == other.columns
            && self.values() == other.values()
            && self.key() == other.key()
    }
}

impl Row {
    /// Hands the row the reply buffer its ranges were taken from, once the
    /// reply's parse no longer borrows it (`TxRequest::complete`).
    fn own_reply(&mut self, bytes: PooledBytes) {
        let raw = self.raw.as_mut().expect("an encoded row");
        debug_assert!(raw.values.1.end <= bytes.len() && raw.keys.1.end <= bytes.len());
        raw.bytes = ReplyBytes::Own(bytes);
    }

    /// A row decoded when first read (see the type's doc).
    pub(crate) fn encoded(table: Arc<Table>, columns: Arc<[usize]>, raw: RawRow) -> Row {
        debug_assert_eq!(columns.len(), raw.values.0);
        Row {
            table,
            columns,
            raw: Some(raw),
            values: OnceCell::new(),
            key: OnceCell::new(),
        }
    }

    /// A column's value by name (None: not read, or no such column).
    pub fn get(&self, column: &str) -> Option<&Value> {
        let position = self.table.column(column)?;
        let at = self.columns.iter().position(|c| *c == position)?;
        self.values().get(at)
    }

    /// The values read, in the order of [`Row::columns`].
    pub fn values(&self) -> &[Value] {
        self.values.get_or_init(|| {
            let raw = self
                .raw
                .as_ref()
                .expect("a row is decoded or keeps its bytes");
            RawRow::decode(&raw.values, &raw.bytes)
        })
    }

    /// Hands `each` the values read, borrowed, in the order of
    /// [`Row::columns`]: straight from the reply's bytes while the row is
    /// not decoded (no allocation for the row, none for a string), else
    /// from the decoded values. For a caller that converts the values
    /// into its own (the SQL node's), which [`Row::values`] would make it
    /// copy twice.
    pub fn each_value<'r>(&'r self, each: impl FnMut(ValueRef<'r>)) {
        if let Some(values) = self.values.get() {
            values.iter().map(Value::as_ref).for_each(each);
            return;
        }
        let raw = self
            .raw
            .as_ref()
            .expect("a row is decoded or keeps its bytes");
        RawRow::values(&raw.values, &raw.bytes).for_each(each);
    }

    /// The values read, taken out of the row (decoded if not yet; the
    /// row's are empty afterwards): a caller that converts them moves the
    /// strings rather than copying them.
    pub fn take_values(&mut self) -> Vec<Value> {
        self.values();
        std::mem::take(self.values.get_mut().expect("decoded above"))
    }

    /// Table positions of the values.
    pub fn columns(&self) -> &[usize] {
        &self.columns
    }

    /// The row's primary key, for a row of a locking scan (empty otherwise).
    pub fn key(&self) -> &[Value] {
        self.key.get_or_init(|| {
            let raw = self
                .raw
                .as_ref()
                .expect("a row is decoded or keeps its bytes");
            RawRow::decode(&raw.keys, &raw.bytes)
        })
    }

    /// The table the row belongs to.
    pub fn table(&self) -> &Arc<Table> {
        &self.table
    }

    pub(crate) fn values_mut(&mut self) -> &mut [Value] {
        self.values();
        self.values.get_mut().expect("decoded above")
    }

    pub(crate) fn take_key(&mut self) -> Vec<Value> {
        self.key();
        std::mem::take(self.key.get_mut().expect("decoded above"))
    }
}

/// The columns an operation writes: by name, or by table position.
#[derive(Clone, Copy, Debug)]
enum Written<'a> {
    Named(&'a [(&'a str, Value)]),
    At(&'a [(usize, Value)]),
}

impl<'a> Written<'a> {
    /// Each written column's table position and value, in the order
    /// given; a name the table lacks or a position past its columns is
    /// error 4004 (`NO_SUCH_COLUMN`).
    fn resolve(&self, table: &Table, mut each: impl FnMut(usize, &'a Value)) -> Result<()> {
        match *self {
            Written::Named(row) => {
                let mut next = 0;
                for (name, value) in row {
                    let c = table.require_column_near(name, next)?;
                    each(c, value);
                    next = c + 1;
                }
            }
            Written::At(row) => {
                for (c, value) in row {
                    if *c >= table.columns().len() {
                        return Err(Error::new(
                            proto::error::NO_SUCH_COLUMN,
                            format!(
                                "table `{}` has no column at position {c} (it has {})",
                                table.name(),
                                table.columns().len()
                            ),
                        ));
                    }
                    each(*c, value);
                }
            }
        }
        Ok(())
    }
}

/// One operation to define: built with [`Op::read`], [`Op::insert`], ...
/// and refined with the builder methods.
#[derive(Clone, Debug)]
pub struct Op<'a> {
    table: &'a Arc<Table>,
    kind: OpKind,
    key: &'a [Value],
    row: Written<'a>,
    lock: LockMode,
    lock_wait: LockWait,
    index: Option<&'a str>,
    columns: Option<&'a [&'a str]>,
    ignore_error: bool,
    blob_heads: bool,
    unlock: bool,
}

impl<'a> Op<'a> {
    fn new(table: &'a Arc<Table>, kind: OpKind, key: &'a [Value], row: Written<'a>) -> Op<'a> {
        Op {
            table,
            kind,
            key,
            row,
            lock: LockMode::Committed,
            lock_wait: LockWait::Wait,
            index: None,
            columns: None,
            ignore_error: false,
            blob_heads: false,
            unlock: false,
        }
    }

    /// Read the row with `key` (primary-key values in key order).
    pub fn read(table: &'a Arc<Table>, key: &'a [Value]) -> Op<'a> {
        Op::new(table, OpKind::Read, key, Written::Named(&[]))
    }

    /// Insert a row: column name and value pairs, the key columns
    /// included; left-out columns get their default, or NULL.
    pub fn insert(table: &'a Arc<Table>, row: &'a [(&'a str, Value)]) -> Op<'a> {
        Op::new(table, OpKind::Insert, &[], Written::Named(row))
    }

    /// Insert or overwrite a row (upsert), given as for [`Op::insert`].
    pub fn write(table: &'a Arc<Table>, row: &'a [(&'a str, Value)]) -> Op<'a> {
        Op::new(table, OpKind::Write, &[], Written::Named(row))
    }

    /// Change the given columns of the row with `key`.
    pub fn update(
        table: &'a Arc<Table>,
        key: &'a [Value],
        changes: &'a [(&'a str, Value)],
    ) -> Op<'a> {
        Op::new(table, OpKind::Update, key, Written::Named(changes))
    }

    /// [`Op::insert`] with columns given by table position
    /// ([`Table::column`] finds one by name): no name is compared per
    /// value, as with NDB's attribute ids.
    pub fn insert_at(table: &'a Arc<Table>, row: &'a [(usize, Value)]) -> Op<'a> {
        Op::new(table, OpKind::Insert, &[], Written::At(row))
    }

    /// [`Op::update`] with columns given by table position (see
    /// [`Op::insert_at`]).
    pub fn update_at(
        table: &'a Arc<Table>,
        key: &'a [Value],
        changes: &'a [(usize, Value)],
    ) -> Op<'a> {
        Op::new(table, OpKind::Update, key, Written::At(changes))
    }

    /// Delete the row with `key`.
    pub fn delete(table: &'a Arc<Table>, key: &'a [Value]) -> Op<'a> {
        Op::new(table, OpKind::Delete, key, Written::Named(&[]))
    }

    /// Let go of the transaction's lock on the row with primary key `key`
    /// before the transaction ends (NDB's unlock request): for a row a
    /// locking read or scan took that the caller does not keep (a `LIMIT`
    /// left it out). A row the transaction changed keeps its lock; a row
    /// not locked is left alone. Succeeds with no row.
    pub fn unlock(table: &'a Arc<Table>, key: &'a [Value]) -> Op<'a> {
        let mut op = Op::new(table, OpKind::Read, key, Written::Named(&[]))
            .lock(LockMode::Exclusive)
            .blob_heads();
        op.unlock = true;
        op
    }

    /// The lock a read takes (default: committed read, no lock; a read
    /// returning BLOB/TEXT columns takes Shared instead, see `crate::blob`).
    pub fn lock(mut self, lock: LockMode) -> Op<'a> {
        self.lock = lock;
        self
    }

    /// What a locking read does when another transaction holds the row
    /// (default: waits, up to the deadlock timeout). `NoWait`: the op
    /// fails at once with `codes::LOCK_BUSY` (`FOR UPDATE NOWAIT`; with
    /// [`Op::ignore_error`] the transaction goes on); `SkipLocked`: it
    /// finds no row (`codes::NO_SUCH_ROW`: `SKIP LOCKED`). No effect on a
    /// committed read, which never waits.
    pub fn lock_wait(mut self, wait: LockWait) -> Op<'a> {
        self.lock_wait = wait;
        self
    }

    /// Address the row by a unique index: `key` holds the index's values.
    pub fn index(mut self, name: &'a str) -> Op<'a> {
        self.index = Some(name);
        self
    }

    /// Read only these columns (default: all).
    pub fn columns(mut self, columns: &'a [&'a str]) -> Op<'a> {
        self.columns = Some(columns);
        self
    }

    /// A failure of this operation does not abort the transaction; its
    /// result carries the error.
    pub fn ignore_error(mut self) -> Op<'a> {
        self.ignore_error = true;
        self
    }

    /// BLOB/TEXT values are written as the heads they are
    /// (`Value::BlobHead`, as a scan with `ScanOptions::blob_heads` or the
    /// change stream gives them) and no parts are written, read or
    /// deleted: the caller writes the parts tables itself, as restore
    /// does. A head whose parts are never written reads as an error.
    pub fn blob_heads(mut self) -> Op<'a> {
        self.blob_heads = true;
        self
    }
}

/// Where an operation's result goes.
#[derive(Clone, Debug)]
pub(crate) struct OpMeta {
    pub table: Arc<Table>,
    pub kind: OpKind,
    pub columns: Option<Arc<[usize]>>,
}

/// Where the transaction stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TxState {
    Open,
    Committed,
    Aborted,
}

pub(crate) struct TxInner {
    tx_id: u64,
    link: usize,
    /// A request with START reached the TC.
    started: bool,
    state: TxState,
    /// Defined, not yet sent: one-op batches back to back.
    ops: Vec<u8>,
    ranges: Vec<Range<usize>>,
    metas: Vec<OpMeta>,
    /// What defined operations on BLOB/TEXT columns need beyond their
    /// request (`crate::blob`); empty for other tables.
    works: Vec<BlobWork>,
    /// Executes so far; names the batch of an `OpHandle`.
    batch: u32,
    next_scan_id: u32,
    /// Why the transaction ended, for later calls.
    failure: Option<Error>,
    /// An open scan that may end the transaction at the TC
    /// (`ScanOptions::ends_transaction`): nothing else is sent until it
    /// ends, so nothing can reach the TC after the transaction's end.
    release_scan: Option<u32>,
    /// Before-images of its writes, once asked for (`crate::journal`).
    pub(crate) journal: Option<Box<Journal>>,
    /// An operation or scan that locks rows (anything but a committed
    /// read) was defined: the transaction may hold row locks.
    locked: bool,
}

/// What [`TxInner::set_aside`] took.
pub(crate) struct SetAside {
    ops: Vec<u8>,
    ranges: Vec<Range<usize>>,
    metas: Vec<OpMeta>,
    works: Vec<BlobWork>,
    batch: u32,
}

/// A transaction (see the module doc). Started with `Session::begin`.
pub struct Transaction<'s> {
    pub(crate) session: &'s Session,
    /// Its state, in a box the session reuses (`Spares::transaction`): a
    /// transaction moves (from `begin` to `prepare`) as two words, and a
    /// dropped one's box, with its buffers, serves the next. None only
    /// while it drops.
    state: Option<Box<RefCell<TxInner>>>,
}

/// A built `TcKeyReq` and what is needed to read its answer.
/// An execute started by [`Transaction::execute_later`].
#[must_use = "finish it with Transaction::finish_later"]
pub struct Later(LaterStep);

enum LaterStep {
    /// Waiting to be sent, or sent.
    Queued(TxRequest),
    /// Over already.
    Done(Result<Outcome>),
}

impl std::fmt::Debug for Later {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            LaterStep::Queued(request) => write!(f, "Later(transaction {:#x})", request.tx_id),
            LaterStep::Done(_) => write!(f, "Later(done)"),
        }
    }
}

pub(crate) struct TxRequest {
    pub tx_id: u64,
    pub link: usize,
    pub signal: Signal,
    pub commit: bool,
    pub mode: ExecMode,
    pub batch: u32,
    pub metas: Vec<OpMeta>,
    pub sent_at: Instant,
}

impl<'s> Transaction<'s> {
    /// The session the transaction runs in.
    pub fn session(&self) -> &'s Session {
        self.session
    }
}

impl Drop for Transaction<'_> {
    /// A transaction dropped while open at its TC (it sent operations and
    /// neither committed nor rolled back) is rolled back first: otherwise
    /// the TC would keep it, and the locks it holds, until something else
    /// ends it (as NDB's `closeTransaction` aborts an open one). One round
    /// trip, only for a transaction its user forgot to end. Then the state
    /// and its buffers go back to the session for the next transaction.
    fn drop(&mut self) {
        let open = self.state.as_deref().is_some_and(|state| {
            state
                .try_borrow()
                .is_ok_and(|inner| inner.started && inner.state == TxState::Open)
        });
        if open && !std::thread::panicking() {
            let _ = self.execute(ExecMode::Rollback);
        }
        stats::bump(&self.session.counts.trans_close);
        let Some(boxed) = self.state.take() else {
            return;
        };
        if let Ok(mut state) = self.session.state.try_borrow_mut() {
            state.spares.put_transaction(boxed);
        }
    }
}

impl TxInner {
    /// Whether an execute in `mode` has blob parts to read or write (and
    /// so more than one request: `BlobExec`).
    fn has_blob_work(&self, mode: ExecMode) -> bool {
        !self.works.is_empty() && mode != ExecMode::Rollback
    }

    /// The state of new transaction `tx_id` on `link` in `boxed` (a
    /// dropped transaction's, emptied by `recycle`), with the buffers of
    /// finished transactions, so that defining allocates nothing once warm.
    pub(crate) fn renew(
        mut boxed: Box<RefCell<TxInner>>,
        tx_id: u64,
        link: usize,
        spares: &mut Spares,
    ) -> Box<RefCell<TxInner>> {
        let old = boxed.get_mut();
        debug_assert!(old.ops.is_empty() && old.ranges.is_empty() && old.metas.is_empty());
        debug_assert!(old.works.is_empty() && old.failure.is_none());
        // An execute's request took the buffers it needs: spares replace them.
        if old.ops.capacity() == 0 {
            old.ops = spares.bytes();
        }
        if old.metas.capacity() == 0 {
            old.metas = spares.metas();
        }
        // Field by field (the pattern names them all), not a new value
        // over the old: that would run the old one's drop glue.
        let TxInner {
            tx_id: old_tx_id,
            link: old_link,
            started,
            state,
            ops: _,
            ranges: _,
            metas: _,
            works: _,
            batch,
            next_scan_id,
            failure: _,
            release_scan,
            journal,
            locked,
        } = old;
        *journal = None;
        *locked = false;
        (*old_tx_id, *old_link, *started, *state) = (tx_id, link, false, TxState::Open);
        (*batch, *next_scan_id, *release_scan) = (0, 0, None);
        boxed
    }

    /// Takes the defined, unsent operations and the batch number, so
    /// that the journal's reads (`crate::journal`) go in a request of
    /// their own before them; [`TxInner::put_back`] returns them, and
    /// the handles `define` gave for them stay valid.
    pub(crate) fn set_aside(&mut self) -> SetAside {
        SetAside {
            ops: std::mem::take(&mut self.ops),
            ranges: std::mem::take(&mut self.ranges),
            metas: std::mem::take(&mut self.metas),
            works: std::mem::take(&mut self.works),
            batch: self.batch,
        }
    }

    /// Ends a [`TxInner::set_aside`]: whatever was defined meanwhile was
    /// sent (or the transaction ended).
    pub(crate) fn put_back(&mut self, aside: SetAside) {
        (self.ops, self.ranges, self.metas, self.works) =
            (aside.ops, aside.ranges, aside.metas, aside.works);
        self.batch = aside.batch;
    }

    /// A new state, for a session without a spare one.
    pub(crate) fn new_boxed() -> Box<RefCell<TxInner>> {
        Box::new(RefCell::new(TxInner {
            tx_id: 0,
            link: 0,
            started: false,
            state: TxState::Open,
            ops: Vec::new(),
            ranges: Vec::new(),
            metas: Vec::new(),
            works: Vec::new(),
            batch: 0,
            next_scan_id: 0,
            failure: None,
            release_scan: None,
            journal: None,
            locked: false,
        }))
    }

    /// Empties a dropped transaction's state for the next: its operations'
    /// descriptions release their tables now; a buffer over the spares'
    /// bounds (`Spares::fits`) is freed rather than kept.
    pub(crate) fn recycle(&mut self) {
        fn keep<T>(list: &mut Vec<T>, fits: fn(&Vec<T>) -> bool) {
            if fits(list) {
                list.clear();
            } else {
                *list = Vec::new();
            }
        }
        keep(&mut self.ops, Spares::bytes_fit);
        keep(&mut self.ranges, Spares::list_fits);
        keep(&mut self.metas, Spares::list_fits);
        keep(&mut self.works, Spares::list_fits);
        self.failure = None;
        self.journal = None;
    }
}

impl<'s> Transaction<'s> {
    pub(crate) fn new(session: &'s Session, link: usize) -> Transaction<'s> {
        let tx_id = session.shared().next_tx_id();
        let boxed = session.state.borrow_mut().spares.transaction(tx_id, link);
        stats::bump(&session.counts.trans_start);
        Transaction {
            session,
            state: Some(boxed),
        }
    }

    #[inline]
    pub(crate) fn inner(&self) -> &RefCell<TxInner> {
        self.state
            .as_deref()
            .expect("a transaction has its state until it drops")
    }

    /// The transaction id (API node id in the top 16 bits).
    pub fn id(&self) -> u64 {
        self.inner().borrow().tx_id
    }

    /// The data node whose TC coordinates the transaction.
    pub fn node(&self) -> signal::NodeId {
        self.session.shared().links[self.inner().borrow().link].node
    }

    /// Operations defined and not yet executed.
    pub fn pending_ops(&self) -> usize {
        self.inner().borrow().ranges.len()
    }

    /// Reads a row by primary key.
    pub fn read(&self, table: &Arc<Table>, key: &[Value], lock: LockMode) -> Result<OpHandle> {
        self.define(Op::read(table, key).lock(lock))
    }

    /// Inserts a row (column name, value pairs; key columns included).
    pub fn insert(&self, table: &Arc<Table>, row: &[(&str, Value)]) -> Result<OpHandle> {
        self.define(Op::insert(table, row))
    }

    /// Changes some columns of the row with `key`.
    pub fn update(
        &self,
        table: &Arc<Table>,
        key: &[Value],
        changes: &[(&str, Value)],
    ) -> Result<OpHandle> {
        self.define(Op::update(table, key, changes))
    }

    /// Inserts or overwrites a row.
    pub fn write(&self, table: &Arc<Table>, row: &[(&str, Value)]) -> Result<OpHandle> {
        self.define(Op::write(table, row))
    }

    /// Deletes the row with `key`.
    pub fn delete(&self, table: &Arc<Table>, key: &[Value]) -> Result<OpHandle> {
        self.define(Op::delete(table, key))
    }

    /// Every define and execute asks: the open case inline, the errors apart.
    #[inline]
    pub(crate) fn check_open(&self) -> Result<()> {
        if self.inner().borrow().state == TxState::Open {
            return Ok(());
        }
        self.not_open()
    }

    #[cold]
    fn not_open(&self) -> Result<()> {
        let inner = self.inner().borrow();
        match inner.state {
            TxState::Open => Ok(()),
            TxState::Committed => Err(Error::usage(format!(
                "transaction {:#x} is committed",
                inner.tx_id
            ))),
            TxState::Aborted => Err(inner.failure.clone().unwrap_or_else(|| {
                Error::usage(format!("transaction {:#x} is rolled back", inner.tx_id))
            })),
        }
    }

    /// Defines an operation; it is checked against its table at once (a
    /// bad one is a permanent error and leaves the transaction as it was).
    pub fn define(&self, op: Op<'_>) -> Result<OpHandle> {
        self.check_open()?;
        let table = op.table;
        let mut inner = self.inner().borrow_mut();
        let inner = &mut *inner;
        let mut header = OpHeader {
            op_index: inner.ranges.len() as u32,
            table_id: table.id(),
            table_version: table.version(),
            index_id: NO_INDEX,
            partition: NO_PARTITION,
            kind: op.kind,
            lock: if op.kind == OpKind::Read {
                op.lock
            } else {
                LockMode::Exclusive
            },
            flags: if op.ignore_error { IGNORE_ERROR } else { 0 },
        };
        if op.unlock {
            header.flags |= UNLOCK;
        } else if op.kind == OpKind::Read && op.lock != LockMode::Committed {
            header.flags |= op.lock_wait.op_flag();
        }
        if let Some(name) = op.index {
            header.index_id = table.require_index(name, IndexKind::Unique)?.id;
            stats::bump(&self.session.counts.uk_op);
        } else {
            stats::bump(&self.session.counts.pk_op);
        }
        if inner.ops.capacity() == 0 {
            // An execute of one op took the buffer with its request.
            inner.ops = self.session.state.borrow_mut().spares.bytes();
        }
        // Only an insert or a write, or an op on a table with BLOB/TEXT
        // columns, lists its written values before encoding them (see
        // `define_op`); the others need no list.
        if !(table.has_blobs() || matches!(op.kind, OpKind::Insert | OpKind::Write)) {
            return Self::define_op(op, header, inner, &mut Vec::new());
        }
        // The written values' list comes from the session and goes back
        // (emptied) whatever happens, so that defining allocates nothing.
        let mut values = std::mem::take(&mut self.session.state.borrow_mut().values_scratch);
        let defined = Self::define_op(op, header, inner, &mut values);
        values.clear();
        self.session.state.borrow_mut().values_scratch = values;
        defined
    }

    /// `define` once the header is known: resolves, encodes and checks.
    fn define_op(
        op: Op<'_>,
        mut header: OpHeader,
        inner: &mut TxInner,
        values: &mut WrittenValues,
    ) -> Result<OpHandle> {
        let table = op.table;
        // An update of a table without BLOB/TEXT columns writes its values
        // straight from the caller's list into the batch (nothing copied
        // into `values` first: a clone per value was a tenth of the work).
        let direct = op.kind == OpKind::Update && !table.has_blobs();
        let key = if direct {
            Cow::Borrowed(op.key)
        } else {
            resolve_values(&op, values)?
        };
        let columns = match op.columns {
            Some(names) => Some(
                names
                    .iter()
                    .map(|n| table.require_column(n))
                    .collect::<Result<Vec<usize>>>()?,
            ),
            None => None,
        };
        let work = if table.has_blobs() && !op.blob_heads {
            blob::prepare_op(table, &mut header, &key, values, columns.as_deref())?
        } else {
            None
        };
        inner.locked |= header.lock != LockMode::Committed;
        let start = inner.ops.len();
        let mut fit = IntegerFit::new(table, &header, &key, columns.is_some());
        let encoded = {
            let mut writer = OpBatchWriter::new(&mut inner.ops);
            writer.begin(&header);
            for v in key.iter() {
                writer.key(v.as_ref());
            }
            let written = if direct {
                match op.row {
                    // By position: the positions are checked and the values
                    // fitted first, then written in one call; integers that
                    // all fit (the common update) into room made once.
                    Written::At(row) => {
                        op.row
                            .resolve(table, |c, v| fit.value(c, v.as_ref()))
                            .map(|()| {
                                if fit.passed() {
                                    writer.integer_values(row.iter().map(|(c, v)| {
                                        let (signed, x) = match *v {
                                            Value::Int(x) => (true, x as u64),
                                            Value::UInt(x) => (false, x),
                                            _ => unreachable!("IntegerFit passes integers only"),
                                        };
                                        (*c as u16, signed, x)
                                    }));
                                } else {
                                    writer.values(row.iter().map(|(c, v)| (*c as u16, v.as_ref())));
                                }
                            })
                    }
                    Written::Named(_) => op.row.resolve(table, |c, v| {
                        let v = v.as_ref();
                        fit.value(c, v);
                        writer.value(c as u16, v)
                    }),
                }
            } else {
                writer.values(values.iter().map(|(c, v)| (*c as u16, v.as_ref())));
                Ok(())
            };
            written.and_then(|()| {
                for c in columns.iter().flatten() {
                    writer.project(*c as u16);
                }
                writer.end().map_err(Error::from)
            })
        };
        let checked = encoded.and_then(|()| {
            let general = || {
                // Just encoded here: its frames are all there is to check before
                // the op is checked against its table (which reads every value).
                let view = OpBatchReader::framed_one(&inner.ops[start..])?;
                view.check_with(table.def(), table.check_plan())
                    .map_err(Error::from)
            };
            if fit.passed() {
                debug_assert!(
                    general().is_ok(),
                    "an op IntegerFit passes passes proto's check"
                );
                return Ok(());
            }
            general()
        });
        if let Err(error) = checked {
            inner.ops.truncate(start);
            return Err(error);
        }
        inner.ranges.push(start..inner.ops.len());
        if let Some(mut work) = work {
            work.op = header.op_index as usize;
            inner.works.push(work);
        }
        inner.metas.push(OpMeta {
            table: Arc::clone(table),
            kind: op.kind,
            columns: columns.map(Arc::from),
        });
        if let Some(journal) = inner.journal.as_deref_mut() {
            if op.kind != OpKind::Read {
                journal.note(table, op.index.is_none().then_some(&*key));
            }
        }
        Ok(OpHandle {
            batch: inner.batch,
            index: header.op_index,
        })
    }

    /// Sends the defined operations in one request and waits for the
    /// answer. A failed operation (without `ignore_error`) aborts the
    /// transaction: the error names its code and the operation.
    pub fn execute(&self, mode: ExecMode) -> Result<Outcome> {
        self.check_open()?;
        self.journal_reads(mode)?;
        if let Some(mut exec) = self.blob_exec(mode) {
            let mut step = exec.start();
            loop {
                match step {
                    Step::Send(request) => {
                        self.send(&request)?;
                        let reply = self.session.wait_reply(ReqKey::Tx(request.tx_id));
                        step = exec.on_reply(self.session, reply);
                    }
                    Step::Done(outcome) => return self.settle(mode, exec.started(), outcome),
                }
            }
        }
        let Some(request) = self.build(mode)? else {
            return Ok(self.local_end(mode));
        };
        let key = ReqKey::Tx(request.tx_id);
        self.send(&request)?;
        let reply = self.session.wait_reply(key);
        self.finish(request, reply)
    }

    /// Starts [`Transaction::execute`] without sending: the request waits
    /// in the session for [`crate::send_all`] (which sends the requests of
    /// several sessions in one write), and [`Transaction::finish_later`]
    /// waits for its answer. What needs no request, or more than one
    /// (blob parts), runs to its end here; its outcome waits in the handle.
    pub fn execute_later(&self, mode: ExecMode) -> Result<Later> {
        self.check_open()?;
        self.journal_reads(mode)?;
        if self.inner().borrow().has_blob_work(mode) {
            return Ok(Later(LaterStep::Done(self.execute(mode))));
        }
        let Some(request) = self.build(mode)? else {
            return Ok(Later(LaterStep::Done(Ok(self.local_end(mode)))));
        };
        let key = ReqKey::Tx(request.tx_id);
        if let Err(error) =
            self.session
                .send_later(request.link, key, request.commit, &request.signal)
        {
            self.abort_with(error.clone());
            return Err(error);
        }
        Ok(Later(LaterStep::Queued(request)))
    }

    /// Waits for the answer of [`Transaction::execute_later`]'s request
    /// (sending it first if nobody did) and reads it as
    /// [`Transaction::execute`] would have.
    pub fn finish_later(&self, later: Later) -> Result<Outcome> {
        let request = match later.0 {
            LaterStep::Done(outcome) => return outcome,
            LaterStep::Queued(request) => request,
        };
        let key = ReqKey::Tx(request.tx_id);
        if self.session.is_later(key) {
            crate::send_all(&[self.session])?;
        }
        let reply = self.session.wait_reply(key);
        self.finish(request, reply)
    }

    /// Like [`Transaction::execute`], as a future: the request goes out on
    /// the first poll; replies are received by whoever polls the
    /// connection (the receive thread is active while futures wait).
    pub fn execute_async(&self, mode: ExecMode) -> ExecuteFuture<'_, 's> {
        ExecuteFuture {
            tx: self,
            mode,
            request: None,
            blob: None,
            registered: false,
            done: false,
        }
    }

    fn send(&self, request: &TxRequest) -> Result<()> {
        let key = ReqKey::Tx(request.tx_id);
        let sent = self
            .session
            .send_request(request.link, key, request.commit, &request.signal);
        if let Err(error) = sent {
            self.abort_with(error.clone());
            return Err(error);
        }
        stats::bump(&self.session.counts.exec);
        self.session
            .shared()
            .counters
            .tc_key_reqs_sent
            .fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn finish(&self, mut request: TxRequest, reply: Result<signal::SignalBody>) -> Result<Outcome> {
        let mode = request.mode;
        let outcome = request.complete(self.session, reply);
        self.session
            .state
            .borrow_mut()
            .spares
            .put_request(&mut request);
        self.settle(mode, true, outcome)
    }

    /// Records how an execute ended; `started`: the TC knows the transaction.
    fn settle(&self, mode: ExecMode, started: bool, outcome: Result<Outcome>) -> Result<Outcome> {
        let mut inner = self.inner().borrow_mut();
        inner.batch += 1;
        let counts = &self.session.counts;
        match &outcome {
            Ok(outcome) => {
                inner.started |= started;
                if outcome.committed {
                    inner.state = TxState::Committed;
                    stats::bump(&counts.trans_commit);
                } else if outcome.rolled_back || mode == ExecMode::Rollback {
                    inner.state = TxState::Aborted;
                    stats::bump(&counts.trans_abort);
                }
            }
            Err(error) => {
                stats::bump(&counts.trans_abort);
                inner.state = TxState::Aborted;
                inner.failure = Some(error.clone());
            }
        }
        outcome
    }

    fn abort_with(&self, error: Error) {
        let mut inner = self.inner().borrow_mut();
        inner.state = TxState::Aborted;
        inner.failure = Some(error);
    }

    /// An end that needs no request: nothing was sent to a TC yet.
    fn local_end(&self, mode: ExecMode) -> Outcome {
        let mut inner = self.inner().borrow_mut();
        let batch = inner.batch;
        inner.batch += 1;
        let counts = &self.session.counts;
        match mode {
            ExecMode::NoCommit => {}
            ExecMode::Commit => {
                inner.state = TxState::Committed;
                stats::bump(&counts.trans_commit);
            }
            ExecMode::Rollback => {
                inner.state = TxState::Aborted;
                stats::bump(&counts.trans_abort);
            }
        }
        Outcome {
            epoch: None,
            committed: mode == ExecMode::Commit,
            rolled_back: mode == ExecMode::Rollback,
            batch,
            results: SmallVec::new(),
        }
    }

    /// Builds the request of an execute; None when nothing must be sent.
    fn build(&self, mode: ExecMode) -> Result<Option<TxRequest>> {
        let shared = self.session.shared();
        let mut inner = self.inner().borrow_mut();
        let inner = &mut *inner;
        if mode == ExecMode::Rollback {
            inner.ops.clear();
            inner.ranges.clear();
            inner.metas.clear();
            inner.works.clear();
        }
        if inner.ranges.is_empty() && (!inner.started || mode == ExecMode::NoCommit) {
            return Ok(None);
        }
        if let Some(scan_id) = inner.release_scan {
            return Err(Error::usage(format!(
                "transaction {:#x}: scan {scan_id} may end it at the TC \
                 (ScanOptions::ends_transaction): nothing else may be sent until it ends",
                inner.tx_id
            )));
        }
        // The defined ops are one-op batches whose op indexes already are
        // their positions (`define` numbers them so, and only a rollback
        // or an execute empties the list): the request's batch is a
        // batch header and their bodies, copied without parsing again.
        let body_bytes = inner.ops.len() - inner.ranges.len() * BATCH_HEADER_BYTES;
        let limits = [
            (
                "ops per batch",
                inner.ranges.len(),
                proto::OPS_PER_BATCH_MAX,
            ),
            (
                "batch bytes",
                BATCH_HEADER_BYTES + body_bytes,
                proto::BATCH_BYTES_MAX,
            ),
        ];
        for (field, value, max) in limits {
            if value > max {
                return Err(Error::from(proto::ProtoError::OverLimit {
                    what: "op batch",
                    field,
                    value: value as u64,
                    max: max as u64,
                }));
            }
        }
        let batch = if inner.ranges.len() == 1 {
            // One op (the common transaction of a key-value workload): its
            // one-op batch is the request's batch as it is; the buffer goes
            // with the request, and back to the session's spares after it.
            debug_assert_eq!(inner.ranges[0], 0..inner.ops.len(), "one op, defined alone");
            std::mem::take(&mut inner.ops)
        } else {
            let mut batch = self.session.state.borrow_mut().spares.bytes();
            drop(OpBatchWriter::new(&mut batch));
            assert_eq!(batch.len(), BATCH_HEADER_BYTES, "proto's op batch header");
            batch.reserve(body_bytes);
            for range in &inner.ranges {
                batch.extend_from_slice(&inner.ops[range.start + BATCH_HEADER_BYTES..range.end]);
            }
            let count = u32::try_from(inner.ranges.len()).expect("ops per batch are bounded above");
            // The batch header ends with the op count (`OpBatchWriter::new`
            // writes it as 0 and `end` counts).
            batch[BATCH_HEADER_BYTES - 4..BATCH_HEADER_BYTES].copy_from_slice(&count.to_le_bytes());
            batch
        };
        debug_assert!(
            OpBatchReader::new(&batch).is_ok_and(|reader| reader
                .iter()
                .enumerate()
                .all(|(i, op)| op.header.op_index as usize == i)
                && reader.iter().count() == inner.ranges.len()),
            "the copied batch is valid and numbered in order"
        );
        let flags = if inner.started { 0 } else { tc_flags::START }
            | match mode {
                ExecMode::NoCommit => 0,
                ExecMode::Commit => tc_flags::COMMIT,
                ExecMode::Rollback => tc_flags::ROLLBACK,
            };
        debug_assert_eq!(flags, request_flags(inner.started, mode));
        let signal = Signal {
            receiver: tc_ref(shared, inner.link, inner.tx_id),
            sender: self.session.own_ref(),
            body: SignalBody::TcKeyReq {
                tx_id: inner.tx_id,
                flags,
                ops: batch,
            },
        };
        inner.ops.clear();
        inner.ranges.clear();
        Ok(Some(TxRequest {
            tx_id: inner.tx_id,
            link: inner.link,
            signal,
            commit: mode == ExecMode::Commit,
            mode,
            batch: inner.batch,
            metas: std::mem::take(&mut inner.metas),
            sent_at: Instant::now(),
        }))
    }

    /// The machine of an execute whose operations have blob work (None:
    /// none has, or `mode` is Rollback, which drops them). It takes the
    /// defined operations.
    fn blob_exec(&self, mode: ExecMode) -> Option<BlobExec> {
        let mut inner = self.inner().borrow_mut();
        let inner = &mut *inner;
        if !inner.has_blob_work(mode) {
            return None;
        }
        let shared = self.session.shared();
        Some(BlobExec::new(ExecInput {
            tx_id: inner.tx_id,
            link: inner.link,
            tc: tc_ref(shared, inner.link, inner.tx_id),
            me: self.session.own_ref(),
            started: inner.started,
            mode,
            batch: inner.batch,
            ops: std::mem::take(&mut inner.ops),
            ranges: std::mem::take(&mut inner.ranges),
            metas: std::mem::take(&mut inner.metas),
            works: std::mem::take(&mut inner.works),
        }))
    }

    /// Reads the parts of long BLOB/TEXT values of a scan's rows, in
    /// this transaction (which the scan started); returns each value with
    /// its job's row and position. A failure ends the transaction.
    pub(crate) fn read_parts(&self, jobs: Vec<ReadJob>) -> Result<Vec<(usize, usize, Value)>> {
        self.check_open()?;
        let (tx_id, link) = {
            let inner = self.inner().borrow();
            assert!(inner.started, "a scan started the transaction");
            (inner.tx_id, inner.link)
        };
        let shared = self.session.shared();
        let tc = tc_ref(shared, link, tx_id);
        let mut exec = BlobExec::part_reads(tx_id, link, tc, self.session.own_ref(), jobs);
        let mut step = exec.start();
        loop {
            match step {
                Step::Send(request) => {
                    self.send(&request)?;
                    let reply = self.session.wait_reply(ReqKey::Tx(request.tx_id));
                    step = exec.on_reply(self.session, reply);
                }
                Step::Done(Ok(_)) => {
                    let values = exec
                        .take_jobs()
                        .into_iter()
                        .map(|job| Ok((job.row, job.at, job.finish()?)))
                        .collect::<Result<Vec<_>>>();
                    if let Err(error) = &values {
                        // A bad value: the transaction ends (its locks go).
                        let _ = self.execute(ExecMode::Rollback);
                        self.abort_with(error.clone());
                    }
                    return values;
                }
                Step::Done(Err(error)) => {
                    self.abort_with(error.clone());
                    return Err(error);
                }
            }
        }
    }

    /// What an asynchronous execute sends first (see `Session::prepare`):
    /// a request, and the machine that goes on from its reply when the
    /// operations have blob work.
    pub(crate) fn into_first_request(
        self,
        mode: ExecMode,
    ) -> Result<(TxRequest, Option<Box<BlobExec>>)> {
        self.check_open()?;
        self.journal_reads(mode)?;
        if let Some(mut exec) = self.blob_exec(mode) {
            return match exec.start() {
                Step::Send(request) => Ok((request, Some(Box::new(exec)))),
                Step::Done(outcome) => Err(outcome.err().unwrap_or_else(|| {
                    Error::usage("an asynchronous transaction needs at least one operation")
                })),
            };
        }
        match self.build(mode)? {
            Some(request) => Ok((request, None)),
            None => Err(Error::usage(
                "an asynchronous transaction needs at least one operation",
            )),
        }
    }

    /// A new scan id of this transaction, and whether the scan starts it.
    /// `release`: the scan may end the transaction (`tc_flags::RELEASE`),
    /// which it does only when it starts it; what it was granted is in
    /// the last of the tuple.
    pub(crate) fn scan_start(&self, release: bool) -> Result<(u64, usize, u32, bool, bool)> {
        self.check_open()?;
        let mut inner = self.inner().borrow_mut();
        if let Some(open) = inner.release_scan {
            return Err(Error::usage(format!(
                "transaction {:#x}: scan {open} may end it at the TC \
                 (ScanOptions::ends_transaction): no other scan until it ends",
                inner.tx_id
            )));
        }
        let scan_id = inner.next_scan_id;
        inner.next_scan_id += 1;
        let starts = !inner.started;
        inner.started = true;
        let release = release && starts;
        if release {
            inner.release_scan = Some(scan_id);
        }
        Ok((inner.tx_id, inner.link, scan_id, starts, release))
    }

    /// A scan that locks rows was started.
    pub(crate) fn note_locking_scan(&self) {
        self.inner().borrow_mut().locked = true;
    }

    /// Whether the transaction may hold row locks: an operation or scan
    /// that locks (a locking read, a write, a read of BLOB/TEXT columns)
    /// was defined in it. False: it holds none, so nothing it reads from
    /// now on was locked before (what the SQL node's unlock of a LIMIT's
    /// left-out rows relies on).
    pub fn may_hold_locks(&self) -> bool {
        self.inner().borrow().locked
    }

    /// The scan that could end the transaction is over: `released` when
    /// the TC ended it (a later request starts it again there, and a
    /// commit of nothing is local).
    pub(crate) fn scan_end(&self, scan_id: u32, released: bool) {
        let mut inner = self.inner().borrow_mut();
        debug_assert_eq!(inner.release_scan, Some(scan_id), "the open releasing scan");
        inner.release_scan = None;
        if released {
            inner.started = false;
        }
    }
}

/// What reading the answer to a request needs, taken out of it
/// (`TxRequest::answer`): a session reads it without its request borrowed.
pub(crate) struct Answer {
    /// (transaction id, link, batch) of the request.
    ids: (u64, usize, u32),
    pub metas: Vec<OpMeta>,
}

impl Answer {
    /// Reads the TC's answer into an outcome (see `TxRequest::complete`).
    pub(crate) fn complete(&self, session: &Session, reply: Result<SignalBody>) -> Result<Outcome> {
        read_answer(session, self.ids, &self.metas, reply)
    }
}

impl TxRequest {
    fn ids(&self) -> (u64, usize, u32) {
        (self.tx_id, self.link, self.batch)
    }

    /// Reads the TC's answer into an outcome.
    pub(crate) fn complete(&self, session: &Session, reply: Result<SignalBody>) -> Result<Outcome> {
        read_answer(session, self.ids(), &self.metas, reply)
    }

    /// Takes out what reading the answer needs (its `metas` go back with
    /// the request to the session's spares).
    pub(crate) fn answer(&mut self) -> Answer {
        Answer {
            ids: self.ids(),
            metas: std::mem::take(&mut self.metas),
        }
    }
}

/// Reads the TC's answer to request (tx id, link, batch) whose operations
/// `metas` describes into an outcome.
fn read_answer(
    session: &Session,
    (tx_id, link, batch): (u64, usize, u32),
    metas: &[OpMeta],
    reply: Result<SignalBody>,
) -> Result<Outcome> {
    match reply? {
        SignalBody::TcKeyConf {
            flags,
            epoch,
            incarnation,
            results,
            ..
        } => {
            // Whatever happens to the reply, its buffer goes back to this
            // thread's pool, unless a row keeps it.
            let results = PooledBytes(results);
            let committed = flags & tc_flags::COMMITTED != 0;
            let rolled_back = flags & tc_flags::ROLLED_BACK != 0;
            let outcome = |results: OpResults| Outcome {
                epoch: committed.then_some(Epoch::from_u64(epoch).in_incarnation(incarnation)),
                committed,
                rolled_back,
                batch,
                results,
            };
            let all_done = || smallvec::smallvec![OpResult::Done; metas.len()];
            if !results.is_empty() {
                // Values are checked as `decode_result` reads them; the
                // rows keep the buffer. The common reply holds one
                // result: read once, and its row owns the buffer.
                let mut first = None;
                let reader = ResultReader::framed_each(&results, |result| {
                    first.get_or_insert(result);
                })?;
                if let Some(result) = first.filter(|_| reader.len() == 1) {
                    let pos = result.op_index as usize;
                    let meta = metas.get(pos).ok_or_else(|| {
                        Error::new(
                            proto::error::MALFORMED_REQUEST,
                            format!("a result for operation {pos} of {}", metas.len()),
                        )
                    })?;
                    let placeholder = ReplyBytes::Own(PooledBytes::default());
                    let mut decoded = decode_result(meta, &result, &results, placeholder)?;
                    forget_if_stale(session, meta, &decoded);
                    count_row(session, &decoded);
                    if let OpResult::Row(row) = &mut decoded {
                        row.own_reply(results);
                    }
                    if metas.len() == 1 {
                        // The one-op transaction's outcome is made
                        // around its result (not made, then changed).
                        return Ok(outcome(SmallVec::from_buf([decoded])));
                    }
                    let mut outcome = outcome(all_done());
                    outcome.results[pos] = decoded;
                    return Ok(outcome);
                }
                let mut outcome = outcome(all_done());
                let results = Arc::new(results.into_vec());
                let reader = ResultReader::framed(&results)?;
                let mut place = |result: proto::OpResult<'_>| -> Result<()> {
                    let Some(meta) = metas.get(result.op_index as usize) else {
                        return Err(Error::new(
                            proto::error::MALFORMED_REQUEST,
                            format!(
                                "a result for operation {} of {}",
                                result.op_index,
                                metas.len()
                            ),
                        ));
                    };
                    let owner = ReplyBytes::Shared(Arc::clone(&results));
                    let decoded = decode_result(meta, &result, &results, owner)?;
                    forget_if_stale(session, meta, &decoded);
                    count_row(session, &decoded);
                    outcome.results[result.op_index as usize] = decoded;
                    Ok(())
                };
                for result in reader.iter() {
                    place(result)?;
                }
                return Ok(outcome);
            }
            Ok(outcome(all_done()))
        }
        SignalBody::TcKeyRef {
            code,
            op_index,
            message,
            ..
        } => {
            if code == proto::error::NODE_SHUTDOWN {
                // The node stops on purpose: no new transaction goes
                // there until it registers as started again.
                session.node_stopping(link);
            }
            let meta = metas.get(op_index as usize);
            if let Some(meta) = meta {
                if matches!(
                    code,
                    proto::error::WRONG_SCHEMA_VERSION | proto::error::NO_SUCH_TABLE
                ) {
                    session.forget_table(meta.table.name());
                }
            }
            Err(match meta {
                Some(meta) => op_error(meta, code, &message).at_op(op_index),
                None if message.is_empty() => {
                    Error::with_context(code, format!("transaction {:#x}", tx_id))
                }
                None => Error::new(code, message),
            })
        }
        other => Err(Error::new(
            proto::error::MALFORMED_REQUEST,
            format!("unexpected answer {}", other.name()),
        )),
    }
}

/// An operation that failed because its table changed (241) or went (723)
/// drops the cached definition, as a failed transaction does: the caller
/// sees the error once, and its next `Session::table` fetches the table
/// again rather than failing the same way forever.
fn forget_if_stale(session: &Session, meta: &OpMeta, result: &OpResult) {
    if let OpResult::Failed(e) = result {
        if matches!(
            e.code,
            proto::error::WRONG_SCHEMA_VERSION | proto::error::NO_SUCH_TABLE
        ) {
            session.forget_table(meta.table.name());
        }
    }
}

/// Counts a read's row in the session's `read_row`.
#[inline]
fn count_row(session: &Session, result: &OpResult) {
    if matches!(result, OpResult::Row(_)) {
        stats::bump(&session.counts.read_row);
    }
}

/// One operation's result as the user sees it.
pub(crate) fn decode_result(
    meta: &OpMeta,
    result: &proto::OpResult<'_>,
    bytes: &[u8],
    owner: ReplyBytes,
) -> Result<OpResult> {
    if !result.is_ok() {
        return Ok(OpResult::Failed(op_error(meta, result.code, "")));
    }
    if !result.has_row {
        return Ok(OpResult::Done);
    }
    let columns: Arc<[usize]> = match &meta.columns {
        Some(columns) => Arc::clone(columns),
        None => Arc::clone(meta.table.all_columns()),
    };
    // Every value is checked here, once (the batch was checked by frame
    // only); the row decodes them when first asked.
    result.check_row()?;
    let values = result.value_count();
    if values != columns.len() {
        return Err(Error::new(
            proto::error::MALFORMED_REQUEST,
            format!(
                "read of `{}`: a row of {} values, {} columns asked",
                meta.table.name(),
                values,
                columns.len()
            ),
        ));
    }
    let raw = RawRow::new(bytes, owner, result.encoded_values(), result.encoded_keys());
    Ok(OpResult::Row(Row::encoded(
        Arc::clone(&meta.table),
        columns,
        raw,
    )))
}

pub(crate) fn op_error(meta: &OpMeta, code: u32, message: &str) -> Error {
    let what = if message.is_empty() {
        proto::error::message(code)
    } else {
        message
    };
    if what.contains(meta.table.name()) {
        Error::new(code, what.to_owned())
    } else {
        Error::new(
            code,
            format!(
                "{} on table `{}`: {what}",
                meta.kind.name(),
                meta.table.name()
            ),
        )
    }
}

/// Words of a set of column positions (`COLUMNS_MAX` bits).
const COLUMN_SET_WORDS: usize = schema::COLUMNS_MAX.div_ceil(64);

/// Whether a defined operation passes proto's check (`OpView::check_with`)
/// without encoding it and reading it back: decided for the common op of
/// a key-value table — a read, delete or update by primary key of a table
/// without BLOB/TEXT columns whose key and written values are integers in
/// their integer columns' ranges, each column written once and no key
/// column among them — as its values are encoded. Anything else (or any
/// doubt) is not passed, and `define` runs proto's check, which says what
/// is wrong: so the errors are proto's, unchanged.
struct IntegerFit<'t> {
    /// `Table::value_codes`.
    codes: &'t [u8],
    /// The op writes values (proto refuses them in a read or a delete).
    writes: bool,
    fits: bool,
    given: [u64; COLUMN_SET_WORDS],
}

impl<'t> IntegerFit<'t> {
    /// Starts with the op's header and key; `projection`: it reads some columns only.
    fn new(table: &'t Table, header: &OpHeader, key: &[Value], projection: bool) -> IntegerFit<'t> {
        let shape = match header.kind {
            OpKind::Read | OpKind::Delete => true,
            // Proto refuses a projection of an update: its check says so.
            OpKind::Update => !projection,
            // An insert or write must give every column: left to proto.
            OpKind::Insert | OpKind::Write => false,
        };
        let key_codes = table.key_codes();
        let fits = shape
            && !table.has_blobs()
            && header.index_id == NO_INDEX
            && header.partition == NO_PARTITION
            && header.flags & !IGNORE_ERROR == 0
            && header.table_id == table.id()
            && header.table_version == table.version()
            && key.len() == key_codes.len()
            && key
                .iter()
                .zip(key_codes)
                .all(|(v, &code)| integer_code_fits(code, v.as_ref()));
        IntegerFit {
            codes: table.value_codes(),
            writes: header.kind == OpKind::Update,
            fits,
            given: [0; COLUMN_SET_WORDS],
        }
    }

    /// A written value of column `c` (a position within the table).
    #[inline]
    fn value(&mut self, c: usize, v: ValueRef<'_>) {
        let code = self.codes.get(c).copied().unwrap_or(0);
        let (word, bit) = (c / 64 % COLUMN_SET_WORDS, 1u64 << (c % 64));
        let fresh = self.given[word] & bit == 0;
        self.given[word] |= bit;
        self.fits &= self.writes && fresh && integer_code_fits(code, v);
    }

    fn passed(&self) -> bool {
        self.fits
    }
}

/// Written columns: (table position, value).
type WrittenValues = Vec<(usize, Value)>;

/// The key values of an op (borrowed unless an insert's row gives
/// them), and its written columns, appended to `values`.
fn resolve_values<'o>(op: &Op<'o>, values: &mut WrittenValues) -> Result<Cow<'o, [Value]>> {
    let table = op.table;
    match op.kind {
        OpKind::Read | OpKind::Delete => Ok(Cow::Borrowed(op.key)),
        OpKind::Update => {
            op.row
                .resolve(table, |c, value| values.push((c, value.clone())))?;
            Ok(Cow::Borrowed(op.key))
        }
        OpKind::Insert | OpKind::Write => {
            // By position, so that each column is found at once (a search
            // of the given list per column was quadratic in the row's width).
            let mut given: SmallVec<[Option<&Value>; 32]> =
                smallvec::smallvec![None; table.columns().len()];
            op.row.resolve(table, |c, value| {
                given[c].get_or_insert(value);
            })?;
            let mut key = Vec::with_capacity(table.primary_key().len());
            for &c in table.primary_key() {
                match given[c] {
                    Some(v) => key.push(v.clone()),
                    None => {
                        return Err(Error::new(
                            proto::error::KEY_MISSING,
                            format!(
                                "table `{}`: an {} must give key column `{}`",
                                table.name(),
                                op.kind.name(),
                                table.columns()[c].name
                            ),
                        ))
                    }
                }
            }
            for (c, column) in table.columns().iter().enumerate() {
                if table.primary_key().contains(&c) {
                    continue;
                }
                match given[c] {
                    Some(v) => values.push((c, v.clone())),
                    None => match (&column.default, column.nullable) {
                        (Some(default), _) => values.push((c, default.clone())),
                        (None, true) => values.push((c, Value::Null)),
                        // Left out: proto's check names the missing column.
                        (None, false) => {}
                    },
                }
            }
            Ok(Cow::Owned(key))
        }
    }
}

/// The future of [`Transaction::execute_async`].
pub struct ExecuteFuture<'t, 's> {
    tx: &'t Transaction<'s>,
    mode: ExecMode,
    request: Option<TxRequest>,
    /// The machine of an execute with blob work (several requests).
    blob: Option<BlobExec>,
    registered: bool,
    done: bool,
}

impl ExecuteFuture<'_, '_> {
    fn unregister(&mut self) {
        if self.registered {
            self.registered = false;
            self.tx
                .session
                .shared()
                .async_waiters
                .fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl ExecuteFuture<'_, '_> {
    /// Carries out a step of the blob machine: sends its request (None)
    /// or gives the end (Some).
    fn step(&mut self, step: Step) -> Option<Result<Outcome>> {
        match step {
            Step::Send(request) => {
                if let Err(error) = self.tx.send(&request) {
                    self.done = true;
                    return Some(Err(error));
                }
                self.request = Some(request);
                None
            }
            Step::Done(outcome) => {
                self.done = true;
                let started = self.blob.as_ref().is_some_and(|e| e.started());
                Some(self.tx.settle(self.mode, started, outcome))
            }
        }
    }
}

impl Drop for ExecuteFuture<'_, '_> {
    fn drop(&mut self) {
        self.unregister();
    }
}

impl Future for ExecuteFuture<'_, '_> {
    type Output = Result<Outcome>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<Outcome>> {
        let this = self.get_mut();
        assert!(!this.done, "ExecuteFuture polled after it completed");
        let session = this.tx.session;
        if this.request.is_none() {
            // A journal's reads (`crate::journal`) wait here, before the
            // request: only a transaction that asked for one has them.
            if let Err(error) = this
                .tx
                .check_open()
                .and_then(|()| this.tx.journal_reads(this.mode))
            {
                this.done = true;
                return Poll::Ready(Err(error));
            }
            if let Some(mut exec) = this.tx.blob_exec(this.mode) {
                let step = exec.start();
                this.blob = Some(exec);
                if let Some(ready) = this.step(step) {
                    return Poll::Ready(ready);
                }
            } else {
                match this.tx.build(this.mode) {
                    Ok(Some(request)) => {
                        if let Err(error) = this.tx.send(&request) {
                            this.done = true;
                            return Poll::Ready(Err(error));
                        }
                        this.request = Some(request);
                    }
                    Ok(None) => {
                        this.done = true;
                        return Poll::Ready(Ok(this.tx.local_end(this.mode)));
                    }
                    Err(error) => {
                        this.done = true;
                        return Poll::Ready(Err(error));
                    }
                }
            }
        }
        let mut attempt = 0;
        while attempt < 2 {
            let tx_id = this.request.as_ref().expect("sent above").tx_id;
            session.pump();
            if let Some(reply) = session.take_reply(ReqKey::Tx(tx_id)) {
                let request = this.request.take().expect("sent above");
                if let Some(exec) = this.blob.as_mut() {
                    let step = exec.on_reply(session, reply);
                    match this.step(step) {
                        Some(ready) => {
                            this.unregister();
                            return Poll::Ready(ready);
                        }
                        None => {
                            // The next request of the blob work went out.
                            attempt = 0;
                            continue;
                        }
                    }
                }
                this.unregister();
                this.done = true;
                return Poll::Ready(this.tx.finish(request, reply));
            }
            if attempt == 0 {
                crate::receiver::poll_now(session.shared());
            }
            attempt += 1;
        }
        if !this.registered {
            this.registered = true;
            let shared = session.shared();
            shared.async_waiters.fetch_add(1, Ordering::AcqRel);
            shared.activate_receive_thread();
        }
        if !session.set_waker(cx.waker()) {
            cx.waker().wake_by_ref();
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use schema::{Column, ColumnType, TableDef};

    use super::*;

    /// A two-column integer key, integer columns of every width, and one
    /// column of another type.
    fn table() -> Table {
        let columns = vec![
            Column::new("k0", ColumnType::BigInt { unsigned: true }),
            Column::new("k1", ColumnType::Int { unsigned: false }),
            Column::new("tiny", ColumnType::TinyInt { unsigned: true }),
            Column::new("small", ColumnType::SmallInt { unsigned: false }),
            Column::new("medium", ColumnType::MediumInt { unsigned: true }),
            Column::new("int", ColumnType::Int { unsigned: true }),
            Column::new("big", ColumnType::BigInt { unsigned: false }),
            Column::new("real", ColumnType::Double).nullable(),
        ];
        let def = TableDef::new("fit", 7, columns)
            .primary_key(vec![0, 1])
            .build()
            .expect("valid");
        Table::new(def)
    }

    /// Integers around every width's limits, and values of other kinds.
    fn value() -> impl Strategy<Value = Value> {
        let edge = (
            prop::sample::select(vec![0u32, 7, 8, 15, 16, 23, 24, 31, 32, 63]),
            -2i64..=2,
        );
        prop_oneof![
            // Mostly values that fit every column, so that an op's other
            // faults (a column twice, a key column written) are what decides.
            12 => (0u64..100).prop_map(Value::UInt),
            2 => (-100i64..100).prop_map(Value::Int),
            1 => edge.clone().prop_map(|(bits, d)| Value::UInt((1u64 << bits).wrapping_add_signed(d))),
            1 => edge.prop_map(|(bits, d)| Value::Int((1i64 << bits).wrapping_neg().wrapping_add(d))),
            1 => any::<u64>().prop_map(Value::UInt),
            1 => any::<i64>().prop_map(Value::Int),
            1 => Just(Value::Null),
            1 => any::<f64>().prop_map(Value::Double),
            1 => "[a-z]{0,3}".prop_map(Value::String),
        ]
    }

    fn kind() -> impl Strategy<Value = OpKind> {
        prop::sample::select(vec![
            OpKind::Read,
            OpKind::Update,
            OpKind::Delete,
            OpKind::Insert,
            OpKind::Write,
        ])
    }

    /// A row that owns its reply's buffer gives it to this thread's pool
    /// of payload buffers when dropped, where the decoder of the next
    /// reply finds it; a shared buffer's last row frees it as before.
    #[test]
    fn a_dropped_rows_reply_buffer_goes_back_to_the_threads_pool() {
        // Each test runs on its own thread: its pool starts empty.
        assert_eq!(signal::buffers::kept(), 0);
        let table = Arc::new(table());
        let row = |bytes: ReplyBytes| {
            Row::encoded(
                Arc::clone(&table),
                Arc::from(Vec::new()),
                RawRow {
                    bytes,
                    values: (0, 0..0),
                    keys: (0, 0..0),
                },
            )
        };
        let mut buffer = Vec::with_capacity(512);
        buffer.extend_from_slice(b"a reply");
        let at = buffer.as_ptr();
        let own = row(ReplyBytes::Own(PooledBytes(buffer)));
        let copy = own.clone();
        drop(own);
        assert_eq!(signal::buffers::kept(), 1, "the row's buffer is kept");
        let again = signal::buffers::filled(b"the next reply");
        assert_eq!(again.as_ptr(), at, "and filled again by the decoder");
        drop(copy);
        drop(row(ReplyBytes::Shared(Arc::new(Vec::with_capacity(512)))));
        assert_eq!(
            signal::buffers::kept(),
            0,
            "a clone's exact-size copy is too small to keep; a shared one is freed"
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1_024))]

        /// What `IntegerFit` passes, proto's check passes; and for ops of
        /// integers in integer columns they agree.
        #[test]
        fn integer_fit_agrees_with_protos_check(
            kind in kind(),
            key in prop_oneof![
                4 => prop::collection::vec(value(), 2),
                1 => prop::collection::vec(value(), 0..4),
            ],
            values in prop::collection::vec((prop_oneof![3 => 2usize..7, 1 => 0usize..8], value()), 0..5),
            projection in any::<bool>(),
            ignore_error in any::<bool>(),
        ) {
            let table = table();
            let header = OpHeader {
                op_index: 0,
                table_id: table.id(),
                table_version: table.version(),
                index_id: NO_INDEX,
                partition: NO_PARTITION,
                kind,
                lock: LockMode::Exclusive,
                flags: if ignore_error { IGNORE_ERROR } else { 0 },
            };
            let mut fit = IntegerFit::new(&table, &header, &key, projection);
            let mut batch = Vec::new();
            let mut writer = OpBatchWriter::new(&mut batch);
            writer.begin(&header);
            for v in &key {
                writer.key(v.as_ref());
            }
            for (c, v) in &values {
                fit.value(*c, v.as_ref());
                writer.value(*c as u16, v.as_ref());
            }
            if projection {
                writer.project(2);
            }
            writer.end().expect("within every limit");
            drop(writer);
            let general = OpBatchReader::framed_one(&batch)
                .and_then(|view| view.check_with(table.def(), table.check_plan()));
            prop_assert!(!fit.passed() || general.is_ok(), "passed, proto says {general:?}");
            let integer = |v: &Value| matches!(v, Value::Int(_) | Value::UInt(_));
            let in_domain = matches!(kind, OpKind::Read | OpKind::Delete | OpKind::Update)
                && !(kind == OpKind::Update && projection)
                && key.iter().all(integer)
                && values.iter().all(|(c, v)| *c != 7 && integer(v));
            if in_domain {
                prop_assert_eq!(fit.passed(), general.is_ok(), "proto says {:?}", general);
            }
        }
    }
}
