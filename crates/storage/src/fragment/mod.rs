//! One partition of one table on one LDM instance (NDB: a fragment, where
//! DBLQH, DBACC, DBTUP and DBTUX meet): its rows, its primary-key hash
//! index, the table's ordered indexes over it, its row locks and the
//! uncommitted versions of its rows.
//!
//! Why one type: every operation of a transaction touches all of these
//! together, and their consistency (a key in the hash index exactly when
//! its row is in the row store; ordered indexes exactly over the committed
//! rows; a pending version only under an exclusive lock) is easiest to keep
//! and to check in one place. This is what the transaction coordinator
//! calls (issue 4) and what recovery fills. Single-threaded, like the rest
//! of the crate; the [`PagePool`] (`DataMemory`) is shared by all fragments
//! of an LDM instance and passed in.
//!
//! # Transactions (DESIGN.md §4)
//!
//! - Writes (insert, update, write, delete) take an exclusive row lock held
//!   until commit or abort; locking reads take a shared or exclusive one.
//!   A request that must wait returns [`Outcome::Waiting`] having changed
//!   nothing but the lock queue; when the lock table grants it (a
//!   [`Grant`] from a later commit or abort), the caller calls the same
//!   operation again, which finds the lock held and goes on.
//! - Committed reads take no lock and never wait: they read the last
//!   committed image, whatever is pending. A batch of them
//!   ([`Fragment::read_batch`], the `read_batch` module) overlaps the cache
//!   misses of its keys.
//! - Copy-on-write: a pending update or delete leaves the committed image
//!   in the row store untouched and keeps the new image aside, in buffers
//!   recycled through a free list. A transaction's later operations on the
//!   row see and build on its own pending image.
//! - An insert of a new key reserves a row at once (marked uncommitted in
//!   the row store, its image the new row) and enters it in the hash
//!   index, so that a second insert of the key by another transaction
//!   finds it and waits for its lock. Committed reads and scans skip such
//!   rows. Commit clears the mark; abort removes row and entry.
//! - Ordered indexes hold committed rows only: commit maintains them.
//! - A row removed by a commit or abort may still have waiters; they are
//!   granted and at once released again (the row is gone), and their
//!   grants are returned as usual: the retried operation then finds the key
//!   absent. So no lock outlives its row and a reused row id starts free.
//!
//! # Commit never stops half-way
//!
//! A commit first builds all its redo records, asks the sink whether they
//! fit ([`RedoSink::check_room`], `RedoFull` otherwise) and appends them;
//! only then does it install anything, and installing cannot fail:
//!
//! - an insert's row and hash entry exist since the operation;
//! - an update whose var part grows may need one new page of the row store
//!   at commit; the operation reserved that page from the pool (and failed
//!   with `TableFull` if it could not), and commit gives the reserved pages
//!   back to the pool just before it installs the updates, which take them
//!   (a whole page per such update while its transaction runs: a cost in
//!   `DataMemory` that a reservation of var space inside the row store
//!   would cut to the bytes needed);
//! - deletes only free memory (a hash-index merge that finds no memory is
//!   skipped by the index itself).
//!
//! If an append fails after others succeeded (an I/O error; a full log is
//! ruled out by the check), the commit returns the error with nothing
//! installed and some of its records in the log. That is safe because
//! replay is idempotent and the commit decision stands: the caller retries
//! the commit (same GCI), or the node restarts, and the GCI is not complete
//! before this commit's records are all in the log.
//!
//! # Memory
//!
//! Every row byte and hash-index byte is in pool pages; a pending image is
//! in recycled heap buffers (bounded by the transactions in flight);
//! ordered indexes are on the heap (see [`crate::ordered_index`]). No
//! operation allocates once the buffers, maps and lists are warm; an
//! ordered index may allocate a tree node when a commit changes its keys.

mod read_batch;
mod redo_record;
mod scan;

pub use read_batch::{ReadBatch, READ_BATCH_KEYS_MAX};
pub use redo_record::{
    RedoKind, RedoNeed, RedoRecord, RedoRecordError, RedoSink, REDO_RECORD_BYTES_MAX,
    REDO_RECORD_FIXED_HEADER_BYTES, REDO_RECORD_VERSION,
};
pub use scan::{ScanBatch, ScanCursor, ScanProgress, ScanRange, ScanSpec, SCAN_BATCH_ROWS_MAX};

use std::collections::hash_map::Entry;
use stdx::IdMap;

use crate::hash_index::HashIndex;
use crate::locks::{Acquire, Grant, LockError, LockMode, LockTable, OpId, TxId};
use crate::memory::{
    row_page, row_slot, MemoryError, PageId, PagePool, RowStore, FIXED_PAGES_MAX, PAGE_BYTES,
};
use crate::ordered_index::{BTreeOrderedIndex, OrderedIndex};
use crate::redo::RedoError;
use crate::{Gci, RowId};
use schema::row::Listed;
use schema::{
    distribution_hash, ColumnChanges, ColumnType, IndexKind, KeyEncoder, RowFormatError, RowLayout,
    TableDef, Value, ValueError, ValueRef,
};

/// How a read locks.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ReadMode {
    /// No lock, never waits: the last committed image (also for a
    /// transaction that has changed the row: this mode has no transaction).
    Committed,
    /// `LOCK IN SHARE MODE`: a shared lock held to the end of `tx`.
    Shared { tx: TxId, op: OpId },
    /// `FOR UPDATE`: an exclusive lock held to the end of `tx`.
    Exclusive { tx: TxId, op: OpId },
}

/// How an operation ended, when it did not fail.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Done,
    /// No row with the key, as the operation sees the fragment.
    NotFound,
    /// The row lock is queued: the caller parks the operation and calls the
    /// same operation again once a [`Grant`] for its (tx, op) arrives.
    Waiting,
}

/// Why a fragment operation failed. Nothing of the operation is left
/// behind, except a row lock it was granted (held to the end of its
/// transaction, as every lock is).
#[derive(Debug, thiserror::Error)]
pub enum FragmentError {
    /// `DataMemory` is used up (NDB error 827, MySQL's "table is full").
    /// Deleting rows makes room again.
    #[error("table {table} is full: DataMemory exhausted ({budget_bytes} bytes)")]
    TableFull { table: String, budget_bytes: u64 },
    /// The fragment reached what its row ids can address.
    #[error("table {table}, fragment {fragment} is full: {source}")]
    PartitionFull {
        table: String,
        fragment: u32,
        #[source]
        source: MemoryError,
    },
    /// An insert of a key that exists (NDB error 630).
    #[error("table {table}: a row with this primary key already exists")]
    DuplicateKey { table: String },
    /// A value that does not fit its column (the error names the column).
    #[error(transparent)]
    WrongValue(#[from] ValueError),
    #[error("table {table}: column `{column}` is part of the primary key and cannot be updated")]
    PrimaryKeyUpdate { table: String, column: String },
    /// Too many lock requests wait in this fragment (temporary).
    #[error("table {table}: {source}")]
    LockWaitersFull {
        table: String,
        #[source]
        source: LockError,
    },
    /// A second operation of a transaction on a row for which one of its
    /// operations already waits: the caller must chain them.
    #[error("table {table}: {source}")]
    AlreadyWaiting {
        table: String,
        #[source]
        source: LockError,
    },
    /// A read that must not wait ([`Fragment::read_no_wait`]) found the
    /// row locked by another transaction. Nothing changed.
    #[error("table {table}: the row is locked by another transaction, and the read does not wait")]
    LockBusy { table: String },
    /// The redo log part has no room for this commit (temporary: a local
    /// checkpoint frees it). Nothing was installed.
    #[error("table {table}: commit refused: {source}")]
    RedoFull {
        table: String,
        #[source]
        source: RedoError,
    },
    /// The redo log failed (I/O). Nothing was installed.
    #[error("table {table}: commit could not be logged: {source}")]
    Redo {
        table: String,
        #[source]
        source: RedoError,
    },
    #[error("table {table}, fragment {fragment}: bad redo record: {detail}")]
    BadRedoRecord {
        table: String,
        fragment: u32,
        detail: String,
    },
    /// Row bytes from a checkpoint or redo record that are not a row of
    /// this table.
    #[error("fragment {fragment}: {source}")]
    BadRow {
        fragment: u32,
        #[source]
        source: RowFormatError,
    },
    #[error("table {table}, fragment {fragment}: checkpoint row {row:?}: {detail}")]
    BadRestore {
        table: String,
        fragment: u32,
        row: RowId,
        detail: String,
    },
    #[error("table {table} has no ordered index with id {index_id}")]
    NoSuchIndex { table: String, index_id: u32 },
    #[error("table {table} has {columns} columns: there is no column {column}")]
    NoSuchColumn {
        table: String,
        column: usize,
        columns: usize,
    },
    /// An ALTER TABLE this fragment cannot take: another table, an older
    /// version, or a change other than columns appended and ordered
    /// indexes added or dropped.
    #[error("table {table}, fragment {fragment}: cannot alter to version {version}: {detail}")]
    BadAlter {
        table: String,
        fragment: u32,
        version: u32,
        detail: String,
    },
    /// An ALTER TABLE while transactions hold locks or changes here
    /// (temporary: the LDM waits until they end, see
    /// [`Fragment::alter`]).
    #[error(
        "table {table}, fragment {fragment}: cannot alter while {transactions} transactions are \
         active on it"
    )]
    AlterBusy {
        table: String,
        fragment: u32,
        transactions: usize,
    },
}

impl FragmentError {
    /// Whether retrying later may succeed without any change by the user
    /// (NDB's "temporary error" class).
    pub fn is_temporary(&self) -> bool {
        matches!(
            self,
            FragmentError::LockWaitersFull { .. }
                | FragmentError::RedoFull { .. }
                | FragmentError::AlterBusy { .. }
        )
    }
}

/// What [`Fragment::alter`] did.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct AlterOutcome {
    /// The rows were rewritten into a row store of the new layout (columns
    /// were added): their row ids changed, and the fragment's next local
    /// checkpoint must be a full one of the new row store.
    pub rows_rewritten: bool,
    /// Committed rows (all of them, since nothing may be pending).
    pub rows: u64,
    /// Ordered indexes built from the rows.
    pub indexes_built: u32,
    /// Ordered indexes dropped (their memory freed).
    pub indexes_dropped: u32,
}

/// Converts a row of layout `from` (a prefix of the columns of `to`) into
/// `out`, of layout `to`, the columns past the prefix taking their default
/// in `def` (the definition of `to`) or NULL. Allocates (the row's values
/// are decoded into owned values): it runs for ALTER TABLE and for the
/// replay of records written before one, not per operation.
fn convert_row(
    from: &RowLayout,
    to: &RowLayout,
    def: &TableDef,
    (fixed, var): (&[u8], &[u8]),
    out: &mut Image,
) -> Result<(), ValueError> {
    let kept = from.column_count();
    debug_assert!(kept <= to.column_count() && to.column_count() == def.columns.len());
    let mut values = Vec::with_capacity(def.columns.len());
    values.extend((0..kept).map(|c| from.decode_column(fixed, var, c).to_value()));
    values.extend(
        def.columns[kept..]
            .iter()
            .map(|c| c.default.clone().unwrap_or(Value::Null)),
    );
    to.encode(&values, &mut out.fixed, &mut out.var)
}

/// A row image read out of a fragment: its fixed and var part, in buffers
/// the caller keeps and reuses (no allocation once warm).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RowBuf {
    fixed: Vec<u8>,
    var: Vec<u8>,
}

impl RowBuf {
    pub fn new() -> RowBuf {
        RowBuf::default()
    }

    pub fn fixed(&self) -> &[u8] {
        &self.fixed
    }

    pub fn var(&self) -> &[u8] {
        &self.var
    }

    /// Column `col` of the row; `layout` is the fragment's.
    pub fn value<'a>(&'a self, layout: &RowLayout, col: usize) -> ValueRef<'a> {
        layout.decode_column(&self.fixed, &self.var, col)
    }

    fn set(&mut self, fixed: &[u8], var: &[u8]) {
        self.fixed.clear();
        self.fixed.extend_from_slice(fixed);
        self.var.clear();
        self.var.extend_from_slice(var);
    }
}

/// A row image in heap buffers (pending versions and scratch).
#[derive(Debug, Default)]
struct Image {
    fixed: Vec<u8>,
    var: Vec<u8>,
    /// Of a pending update: the row's primary key, memcomparable, for its
    /// redo record (kept from the op, which had it encoded, rather than
    /// encoded from the row again at commit). Empty otherwise.
    key: Vec<u8>,
}

/// A fragment's rows and memory ([`Fragment::memory`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FragmentMemory {
    /// Committed rows.
    pub rows: u64,
    /// Bytes of one row's fixed part in its page (its slot).
    pub fixed_row_bytes: u64,
    /// DataMemory of the pages of the rows' fixed parts, of their variable
    /// parts, and of the hash index.
    pub fixed_bytes: u64,
    pub var_bytes: u64,
    pub hash_index_bytes: u64,
    /// All the DataMemory it holds: the above and the pages reserved for
    /// pending updates.
    pub data_memory_bytes: u64,
}

/// What a transaction holds on one row ([`Fragment::held_operations`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum HeldOperation {
    /// A row it inserted (and perhaps deleted again), not committed.
    Insert,
    /// A new image of a committed row, not committed.
    Update,
    /// A committed row it deletes.
    Delete,
    /// A row it read under a shared lock, unchanged.
    ReadShared,
    /// A row it read under an exclusive lock, unchanged.
    ReadExclusive,
    /// A row whose lock, of this mode, it waits for (what it will do with
    /// the row is known once it has the lock).
    WaitLock(LockMode),
}

/// What a transaction has pending on a row, relative to the committed
/// state.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum PendingKind {
    /// The row is a reserved, uncommitted insert; its image is in the row
    /// store.
    Insert,
    /// A reserved insert that its transaction deleted again: the row stays
    /// reserved (and locked) until commit or abort removes it.
    InsertDeleted,
    /// A new image of a committed row, in `Pending::image`.
    Update,
    /// The committed row goes at commit.
    Delete,
}

#[derive(Debug)]
struct Pending {
    tx: TxId,
    kind: PendingKind,
    /// The new image of an `Update`; empty buffers otherwise.
    image: Image,
    /// A pool page held back for an `Update` whose var part is longer than
    /// the committed one: what installing it at commit may need.
    reserve: Option<PageId>,
    /// The commit attempt that last logged this row (a transaction's row
    /// list may name a row twice).
    redo_seq: u32,
}

/// An ordered index of the table, over this fragment's committed rows.
struct OrderedIndexState {
    id: u32,
    encoder: KeyEncoder,
    index: BTreeOrderedIndex,
}

/// Reused buffers of the operation paths.
#[derive(Default)]
struct Scratch {
    /// The key being looked up.
    key: Vec<u8>,
    /// Its hash, set by `find`.
    key_hash: u64,
    /// A candidate row's key, compared with `key`.
    candidate: Vec<u8>,
    /// A new image being built.
    image: Image,
    /// Ordered-index keys of the old and the new image.
    old_key: Vec<u8>,
    new_key: Vec<u8>,
    /// A commit's redo records, back to back, and where each ends.
    redo: Vec<u8>,
    redo_ends: Vec<usize>,
}

/// One partition of one table. See the module documentation.
pub struct Fragment {
    table: String,
    table_id: u32,
    table_version: u32,
    fragment_id: u32,
    layout: RowLayout,
    pk: KeyEncoder,
    key_compare: KeyCompare,
    ordered: Vec<OrderedIndexState>,
    rows: RowStore,
    hash: HashIndex,
    locks: LockTable,
    pending: IdMap<RowId, Pending>,
    /// Rows each transaction locked, waits for, or changed here (a row may
    /// be named twice).
    txs: IdMap<TxId, Vec<RowId>>,
    free_row_lists: Vec<Vec<RowId>>,
    free_images: Vec<Image>,
    /// Reserved inserts (uncommitted rows) in the row store.
    uncommitted_rows: u64,
    /// Pool pages held as reserves by pending updates.
    reserve_pages: u32,
    commit_seq: u32,
    scratch: Scratch,
    /// The table definition of `table_version`: its column defaults fill
    /// the columns an ALTER TABLE added, and its prefixes are the layouts
    /// of older versions ([`TableDef::with_first_columns`]).
    definition: TableDef,
    /// Layouts of older versions (fewer columns), built when a redo record
    /// of one is replayed: at most one per column count.
    older_layouts: Vec<RowLayout>,
    /// The change stream: `Some(flags)` while a subscriber wants this
    /// table's committed changes; each commit appends one
    /// `signal::sub_change` entry per changed row to `captured`, with these
    /// flags. `None` (nobody subscribed) costs a commit one test per row.
    capture: Option<u8>,
    /// Captured entries not yet taken ([`Fragment::take_captured`]).
    captured: Vec<u8>,
    captured_count: u32,
}

impl std::fmt::Debug for Fragment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fragment")
            .field("table", &self.table)
            .field("fragment_id", &self.fragment_id)
            .field("rows", &self.rows.row_count())
            .field("pending", &self.pending.len())
            .field("transactions", &self.txs.len())
            .finish_non_exhaustive()
    }
}

/// The visible state of a row for a transaction that holds a lock on it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum View {
    /// No pending change: the committed image in the row store.
    Committed,
    /// Its own reserved insert: the image in the row store.
    OwnInsert,
    /// Its own pending update: the image in `Pending::image`.
    OwnUpdate,
    /// Deleted by itself.
    Gone,
}

impl Fragment {
    /// An empty fragment of `table` (a valid, built definition), taking what
    /// it needs from it: the row layout, the key encoders, the ordered
    /// indexes. Unique indexes are hidden tables with fragments of their
    /// own.
    pub fn new(table: &TableDef, fragment_id: u32) -> Fragment {
        assert!(
            fragment_id < table.partitions,
            "fragment {fragment_id} of table `{}`, which has {} partitions",
            table.name,
            table.partitions
        );
        let layout = RowLayout::new(table);
        let key_compare = KeyCompare::new(table, &layout);
        let rows = if layout.var_columns() > 0 {
            RowStore::with_var_parts(layout.fixed_bytes())
        } else {
            RowStore::new(layout.fixed_bytes())
        };
        let ordered = table
            .indexes
            .iter()
            .filter(|i| i.kind == IndexKind::Ordered)
            .map(|i| OrderedIndexState {
                id: i.id,
                encoder: KeyEncoder::ordered_index(table, i),
                index: BTreeOrderedIndex::new(),
            })
            .collect();
        Fragment {
            table: table.name.clone(),
            table_id: table.id,
            table_version: table.version,
            fragment_id,
            pk: KeyEncoder::primary_key(table),
            key_compare,
            layout,
            ordered,
            rows,
            hash: HashIndex::new(),
            locks: LockTable::new(),
            pending: IdMap::default(),
            txs: IdMap::default(),
            free_row_lists: Vec::new(),
            free_images: Vec::new(),
            uncommitted_rows: 0,
            reserve_pages: 0,
            commit_seq: 0,
            scratch: Scratch::default(),
            definition: table.clone(),
            older_layouts: Vec::new(),
            capture: None,
            captured: Vec::new(),
            captured_count: 0,
        }
    }

    // ----- the change stream -----

    /// Captures every later commit's row changes here with `flags`
    /// (`signal::sub_change`), or stops (`None`; what was captured stays
    /// until taken).
    pub fn set_capture(&mut self, flags: Option<u8>) {
        self.capture = flags;
    }

    /// Whether commits here are captured.
    pub fn capturing(&self) -> bool {
        self.capture.is_some()
    }

    /// Moves the captured entries to the end of `out`; how many.
    pub fn take_captured(&mut self, out: &mut Vec<u8>) -> u32 {
        out.extend_from_slice(&self.captured);
        self.captured.clear();
        std::mem::take(&mut self.captured_count)
    }

    // ----- what it is -----

    pub fn table_name(&self) -> &str {
        &self.table
    }

    pub fn table_id(&self) -> u32 {
        self.table_id
    }

    pub fn table_version(&self) -> u32 {
        self.table_version
    }

    /// The definition of the fragment's table at its version.
    pub fn definition(&self) -> &TableDef {
        &self.definition
    }

    pub fn fragment_id(&self) -> u32 {
        self.fragment_id
    }

    /// The row layout, to decode what reads and scans return.
    pub fn layout(&self) -> &RowLayout {
        &self.layout
    }

    /// The row store, for checkpoints (which skip uncommitted rows).
    pub fn row_store(&self) -> &RowStore {
        &self.rows
    }

    /// The row store, for the checkpoint work that changes it: starting a
    /// checkpoint (which closes a generation), each checkpoint step (which
    /// clears the changed marks of the rows it writes), and restoring one
    /// into an empty fragment, after which [`Fragment::rebuild_indexes`]
    /// must run before anything else.
    pub fn row_store_mut(&mut self) -> &mut RowStore {
        &mut self.rows
    }

    /// The row locks (for observability and tests).
    pub fn locks(&self) -> &LockTable {
        &self.locks
    }

    /// Committed rows.
    pub fn row_count(&self) -> u64 {
        self.rows.row_count() - self.uncommitted_rows
    }

    /// Rows with a change pending.
    pub fn pending_rows(&self) -> usize {
        self.pending.len()
    }

    /// Transactions with anything in this fragment.
    pub fn transactions(&self) -> usize {
        self.txs.len()
    }

    /// The transactions with anything in this fragment (any order), for
    /// the LDM block's checker: each must have its record there.
    pub fn transaction_ids(&self) -> impl Iterator<Item = TxId> + '_ {
        self.txs.keys().copied()
    }

    /// `DataMemory` held: row pages, hash-index pages and pages reserved for
    /// pending updates.
    pub fn data_memory_bytes(&self) -> u64 {
        self.rows.memory_bytes()
            + self.hash.memory_bytes()
            + u64::from(self.reserve_pages) * PAGE_BYTES as u64
    }

    /// Its rows and the memory they take, for ndbinfo's `table_fragments`.
    pub fn memory(&self) -> FragmentMemory {
        let figures = FragmentMemory {
            rows: self.row_count(),
            fixed_row_bytes: self.rows.slot_bytes() as u64,
            fixed_bytes: self.rows.fixed_memory_bytes(),
            var_bytes: self.rows.var_memory_bytes(),
            hash_index_bytes: self.hash.memory_bytes(),
            data_memory_bytes: self.data_memory_bytes(),
        };
        debug_assert!(
            figures.fixed_bytes + figures.var_bytes + figures.hash_index_bytes
                <= figures.data_memory_bytes
        );
        figures
    }

    /// All memory: [`Fragment::data_memory_bytes`] and the ordered indexes'
    /// heap estimate (pending images not counted: they belong to
    /// transactions in flight).
    pub fn memory_bytes(&self) -> u64 {
        self.data_memory_bytes()
            + self
                .ordered
                .iter()
                .map(|i| i.index.memory_bytes() as u64)
                .sum::<u64>()
    }

    // ----- reads -----

    /// Reads the row with primary key `key` (values of the key columns, in
    /// key order) into `out`. See [`ReadMode`]. A locking read of a row the
    /// transaction changed sees its own pending image.
    pub fn read(
        &mut self,
        pool: &PagePool,
        key: &[Value],
        mode: ReadMode,
        out: &mut RowBuf,
    ) -> Result<Outcome, FragmentError> {
        self.read_or_not(pool, key, mode, true, out)
    }

    /// [`Fragment::read`] for a locking read that must not wait (`FOR
    /// UPDATE NOWAIT`, `SKIP LOCKED`): where `read` would wait for another
    /// transaction's lock, [`FragmentError::LockBusy`], with nothing
    /// queued or held. Never `Outcome::Waiting`.
    pub fn read_no_wait(
        &mut self,
        pool: &PagePool,
        key: &[Value],
        mode: ReadMode,
        out: &mut RowBuf,
    ) -> Result<Outcome, FragmentError> {
        self.read_or_not(pool, key, mode, false, out)
    }

    fn read_or_not(
        &mut self,
        pool: &PagePool,
        key: &[Value],
        mode: ReadMode,
        wait: bool,
        out: &mut RowBuf,
    ) -> Result<Outcome, FragmentError> {
        self.encode_key(key)?;
        let Some(row) = self.find(pool) else {
            return Ok(Outcome::NotFound);
        };
        let (tx, op, lock) = match mode {
            ReadMode::Committed => {
                if self.rows.is_uncommitted(pool, row) {
                    return Ok(Outcome::NotFound);
                }
                out.set(self.rows.fixed(pool, row), self.rows.var(pool, row));
                return Ok(Outcome::Done);
            }
            ReadMode::Shared { tx, op } => (tx, op, LockMode::Shared),
            ReadMode::Exclusive { tx, op } => (tx, op, LockMode::Exclusive),
        };
        if !self.lock_or_not(row, tx, op, lock, wait)? {
            return Ok(Outcome::Waiting);
        }
        match self.view(pool, row, tx) {
            View::Gone => return Ok(Outcome::NotFound),
            View::OwnUpdate => {
                let image = &self.pending[&row].image;
                out.set(&image.fixed, &image.var);
            }
            View::Committed | View::OwnInsert => {
                out.set(self.rows.fixed(pool, row), self.rows.var(pool, row))
            }
        }
        Ok(Outcome::Done)
    }

    /// Lets go of `tx`'s lock on the row with primary key `key` before the
    /// transaction ends (NDB's unlock request): for a row a locking read
    /// took and the statement did not keep (a `LIMIT` or a condition left
    /// it out, as InnoDB releases such rows under READ COMMITTED). A row
    /// the transaction changed, or one it waits for, stays as it is: its
    /// change needs the lock to its end. Appends the waiting operations
    /// that may now run to `grants`. Whether a lock was released.
    pub fn unlock(
        &mut self,
        pool: &PagePool,
        tx: TxId,
        key: &[Value],
        grants: &mut Vec<Grant>,
    ) -> Result<bool, FragmentError> {
        self.encode_key(key)?;
        let Some(row) = self.find(pool) else {
            return Ok(false);
        };
        if self.pending_of(row, tx).is_some()
            || self.locks.held_mode(row, tx).is_none()
            || self.locks.waiters(row).any(|w| w.tx == tx)
        {
            return Ok(false);
        }
        let first = grants.len();
        let released = self.locks.release_tx(tx, row, grants);
        debug_assert!(released, "a held lock is released");
        // The row stays in the transaction's list: its end releases it
        // again, which changes nothing.
        self.drop_grants_of_gone_rows(first, grants);
        Ok(released)
    }

    /// Starts loading the hash bucket of primary key `key` into the cache
    /// and returns the key's hash for [`Fragment::prefetch_row`], an op
    /// later. A caller running a batch of keyed writes one at a time (the
    /// LDM's requests) calls it a few ops ahead, so that each op finds its
    /// bucket and row in cache instead of waiting for two dependent misses
    /// (at millions of rows, each with a TLB miss). A hint only: `None`
    /// when the key does not encode, which the op itself will report.
    pub fn prefetch_key(&mut self, pool: &PagePool, key: &[Value]) -> Option<u64> {
        self.encode_key(key).ok()?;
        let hash = distribution_hash(&self.scratch.key);
        self.hash.prefetch(pool, hash);
        Some(hash)
    }

    /// Starts loading the row that key hash `hash` most likely names (its
    /// bucket should be in cache by now: [`Fragment::prefetch_key`]), or
    /// its overflow bucket.
    pub fn prefetch_row(&self, pool: &PagePool, hash: u64) {
        self.probe_primary(pool, hash);
    }

    // ----- writes -----

    /// Inserts a row (`values` in column order). `DuplicateKey` if the row
    /// exists for `tx`; an insert after the transaction's own delete of the
    /// key is allowed (it becomes an update).
    pub fn insert(
        &mut self,
        pool: &mut PagePool,
        tx: TxId,
        op: OpId,
        values: &[Value],
    ) -> Result<Outcome, FragmentError> {
        self.encode_row(values)?;
        let Some(row) = self.find(pool) else {
            self.reserve_insert(pool, tx, op)?;
            return Ok(Outcome::Done);
        };
        if !self.lock(row, tx, op, LockMode::Exclusive)? {
            return Ok(Outcome::Waiting);
        }
        match self.view(pool, row, tx) {
            View::Committed | View::OwnInsert | View::OwnUpdate => {
                Err(FragmentError::DuplicateKey {
                    table: self.table.clone(),
                })
            }
            View::Gone => {
                self.write_over(pool, row, tx)?;
                Ok(Outcome::Done)
            }
        }
    }

    /// Changes some columns of the row with primary key `key`:
    /// `(column, value)` pairs, a column named twice taking its last value.
    /// Primary-key columns cannot change (refused once the row is found
    /// and locked; the caller's abort releases the lock).
    pub fn update(
        &mut self,
        pool: &mut PagePool,
        tx: TxId,
        op: OpId,
        key: &[Value],
        changes: &[(usize, Value)],
    ) -> Result<Outcome, FragmentError> {
        self.update_refs(pool, tx, op, key, Listed(changes.iter()))
    }

    /// [`Fragment::update`] from borrowed values (an op's, read from its
    /// frame), so that an update decodes nothing into owned values.
    pub fn update_refs<'v>(
        &mut self,
        pool: &mut PagePool,
        tx: TxId,
        op: OpId,
        key: &[Value],
        changes: impl ColumnChanges<'v>,
    ) -> Result<Outcome, FragmentError> {
        self.encode_key(key)?;
        let Some(row) = self.find(pool) else {
            return Ok(Outcome::NotFound);
        };
        if !self.lock(row, tx, op, LockMode::Exclusive)? {
            return Ok(Outcome::Waiting);
        }
        let view = self.view(pool, row, tx);
        let (old_fixed, old_var) = match view {
            View::Gone => return Ok(Outcome::NotFound),
            View::OwnUpdate => {
                let image = &self.pending[&row].image;
                (image.fixed.as_slice(), image.var.as_slice())
            }
            View::Committed | View::OwnInsert => {
                (self.rows.fixed(pool, row), self.rows.var(pool, row))
            }
        };
        let new = &mut self.scratch.image;
        // The layout refuses a primary-key column in the same pass that
        // writes the others (an update's values are walked once).
        match self
            .layout
            .update_refs(old_fixed, old_var, changes, &mut new.fixed, &mut new.var)
        {
            Err(ValueError::KeyColumn { column, .. }) => {
                return Err(FragmentError::PrimaryKeyUpdate {
                    table: self.table.clone(),
                    column,
                })
            }
            result => result?,
        }
        // The view says what `write_over` would look up again.
        if view == View::OwnInsert {
            self.overwrite_own_insert(pool, row)?;
        } else {
            self.stage_update(pool, row, tx)?;
        }
        Ok(Outcome::Done)
    }

    /// Inserts the row, or replaces the whole row if its key exists for
    /// `tx` (NDB's write, SQL's `REPLACE`).
    pub fn write(
        &mut self,
        pool: &mut PagePool,
        tx: TxId,
        op: OpId,
        values: &[Value],
    ) -> Result<Outcome, FragmentError> {
        self.encode_row(values)?;
        let Some(row) = self.find(pool) else {
            self.reserve_insert(pool, tx, op)?;
            return Ok(Outcome::Done);
        };
        if !self.lock(row, tx, op, LockMode::Exclusive)? {
            return Ok(Outcome::Waiting);
        }
        self.write_over(pool, row, tx)?;
        Ok(Outcome::Done)
    }

    /// Deletes the row with primary key `key`.
    pub fn delete(
        &mut self,
        pool: &mut PagePool,
        tx: TxId,
        op: OpId,
        key: &[Value],
    ) -> Result<Outcome, FragmentError> {
        self.encode_key(key)?;
        let Some(row) = self.find(pool) else {
            return Ok(Outcome::NotFound);
        };
        if !self.lock(row, tx, op, LockMode::Exclusive)? {
            return Ok(Outcome::Waiting);
        }
        match self.view(pool, row, tx) {
            View::Gone => return Ok(Outcome::NotFound),
            View::OwnInsert => {
                let pending = self
                    .pending
                    .get_mut(&row)
                    .expect("an own insert is pending");
                pending.kind = PendingKind::InsertDeleted;
            }
            View::OwnUpdate => {
                let pending = self
                    .pending
                    .get_mut(&row)
                    .expect("an own update is pending");
                pending.kind = PendingKind::Delete;
                let image = std::mem::take(&mut pending.image);
                let reserve = pending.reserve.take();
                self.recycle_image(image);
                self.free_reserve(pool, reserve);
            }
            View::Committed => {
                let image = Image::default();
                self.pending.insert(
                    row,
                    Pending {
                        tx,
                        kind: PendingKind::Delete,
                        image,
                        reserve: None,
                        redo_seq: 0,
                    },
                );
            }
        }
        Ok(Outcome::Done)
    }

    // ----- end of a transaction -----

    /// Makes `tx`'s changes in this fragment the committed state, as of
    /// global checkpoint `gci`: logs one redo record per changed row into
    /// `redo`, installs the new images, maintains the ordered indexes and
    /// releases `tx`'s locks, appending the waiting operations that may now
    /// run to `grants`. On an error nothing is installed and `tx` stays as
    /// it was (see the module documentation). A transaction with nothing
    /// here commits trivially.
    pub fn commit(
        &mut self,
        pool: &mut PagePool,
        tx: TxId,
        gci: Gci,
        redo: &mut dyn RedoSink,
        grants: &mut Vec<Grant>,
    ) -> Result<(), FragmentError> {
        // Out of the map until the end (one lookup): back in on an error.
        let Some(list) = self.txs.remove(&tx) else {
            return Ok(());
        };
        let (updates, others) = match self.log_commit(pool, tx, gci, &list, redo) {
            Ok(counts) => counts,
            Err(error) => {
                self.txs.insert(tx, list);
                return Err(error);
            }
        };
        // The reserved pages go back to the pool first: the updates below
        // are what may need them, and nothing else allocates in between.
        if self.reserve_pages > 0 {
            for &row in &list {
                if let Some(pending) = self.pending.get_mut(&row).filter(|p| p.tx == tx) {
                    let reserve = pending.reserve.take();
                    self.free_reserve(pool, reserve);
                }
            }
        }
        // Each pass stops once it has seen the changes `log_commit`
        // counted: a one-row commit looks its row up once here.
        let mut left = updates;
        for &row in &list {
            if left == 0 {
                break;
            }
            let Entry::Occupied(entry) = self.pending.entry(row) else {
                continue;
            };
            if entry.get().tx != tx || entry.get().kind != PendingKind::Update {
                continue;
            }
            let pending = entry.remove();
            self.install_update(pool, row, &pending.image);
            self.recycle_image(pending.image);
            left -= 1;
        }
        debug_assert_eq!(left, 0, "every pending update was installed");
        let mut left = others;
        for &row in &list {
            if left == 0 {
                break;
            }
            let Entry::Occupied(entry) = self.pending.entry(row) else {
                continue;
            };
            if entry.get().tx != tx {
                continue;
            }
            let pending = entry.remove();
            match pending.kind {
                PendingKind::Insert => self.install_insert(pool, row),
                PendingKind::InsertDeleted => self.remove_reserved(pool, row),
                PendingKind::Delete => self.remove_committed(pool, row),
                PendingKind::Update => unreachable!("updates were installed first"),
            }
            self.recycle_image(pending.image);
            left -= 1;
        }
        debug_assert_eq!(left, 0, "every pending change was installed");
        debug_assert!(
            !list.iter().any(|row| self.pending_of(*row, tx).is_some()),
            "a change of the committed transaction is left"
        );
        self.end_transaction(tx, list, grants);
        Ok(())
    }

    /// Drops `tx`'s changes in this fragment and releases its locks and
    /// waiting requests, appending the waiting operations that may now run
    /// to `grants`. Cannot fail; aborting a transaction with nothing here
    /// does nothing.
    pub fn abort(&mut self, pool: &mut PagePool, tx: TxId, grants: &mut Vec<Grant>) {
        let Some(list) = self.txs.remove(&tx) else {
            return;
        };
        for &row in &list {
            let Some(kind) = self.pending_of(row, tx) else {
                continue;
            };
            let mut pending = self.pending.remove(&row).expect("pending change");
            match kind {
                PendingKind::Insert | PendingKind::InsertDeleted => self.remove_reserved(pool, row),
                PendingKind::Update => self.free_reserve(pool, pending.reserve.take()),
                PendingKind::Delete => {}
            }
            debug_assert!(pending.reserve.is_none());
            self.recycle_image(pending.image);
        }
        self.end_transaction(tx, list, grants);
    }

    /// What transaction `tx` holds here, one [`HeldOperation`] per row it
    /// changed, locked or waits to lock, for ndbinfo's
    /// `cluster_operations`: appended to `out`, from the first `rows_max`
    /// entries of its row list only (each row once), so the cost is bounded
    /// whatever the transaction's size.
    pub fn held_operations(&self, tx: TxId, rows_max: usize, out: &mut Vec<HeldOperation>) {
        let Some(list) = self.txs.get(&tx) else {
            return;
        };
        let mut rows: Vec<RowId> = list.iter().copied().take(rows_max).collect();
        rows.sort_unstable();
        rows.dedup();
        let first = out.len();
        for row in rows {
            let held = match self.pending_of(row, tx) {
                Some(PendingKind::Insert | PendingKind::InsertDeleted) => HeldOperation::Insert,
                Some(PendingKind::Update) => HeldOperation::Update,
                Some(PendingKind::Delete) => HeldOperation::Delete,
                None => match self.locks.held_mode(row, tx) {
                    Some(LockMode::Shared) => HeldOperation::ReadShared,
                    Some(LockMode::Exclusive) => HeldOperation::ReadExclusive,
                    None => match self.locks.waiters(row).find(|w| w.tx == tx) {
                        Some(waiter) => HeldOperation::WaitLock(waiter.mode),
                        // Named, but let go (a lock released early).
                        None => continue,
                    },
                },
            };
            out.push(held);
        }
        debug_assert!(out.len() - first <= rows_max, "at most rows_max rows");
    }

    /// Whether transaction `tx` has a pending change of `row` (its image
    /// for `tx` may differ from the committed one).
    pub fn changed_by(&self, row: RowId, tx: TxId) -> bool {
        self.pending.get(&row).is_some_and(|p| p.tx == tx)
    }

    // ----- schema change -----

    /// Moves the fragment to `table`, a later version of its table made by
    /// ALTER TABLE (NDB's online alter, done here by rewriting): columns
    /// appended at the end (NULL-able or with a default) and ordered
    /// indexes added or dropped; a new version with neither (the hidden
    /// tables of an altered table) only changes the version. Nothing may
    /// be pending: `AlterBusy` (temporary) while any transaction holds a
    /// lock or a change here, and the caller waits for them to end.
    ///
    /// - Columns added: every row is rewritten into a new row store of the
    ///   new layout, the added columns taking their default or NULL, and
    ///   the hash and ordered indexes are rebuilt; row ids change. The
    ///   caller pauses for it (in proportion to the rows) and needs
    ///   `DataMemory` for the old and the new rows together until the old
    ///   store is released at the end.
    /// - Otherwise the rows stay where they are; kept ordered indexes stay,
    ///   added ones are built from the committed rows, dropped ones are
    ///   freed.
    ///
    /// Fails with nothing changed (`BadAlter` for a change it cannot make,
    /// `TableFull` when the new rows do not fit): the fragment keeps its
    /// version. The same `table` again is a no-op.
    pub fn alter(
        &mut self,
        pool: &mut PagePool,
        table: &TableDef,
    ) -> Result<AlterOutcome, FragmentError> {
        self.check_alter(table)?;
        if table.version == self.table_version {
            return Ok(AlterOutcome {
                rows: self.row_count(),
                ..AlterOutcome::default()
            });
        }
        let mut next = Fragment::new(table, self.fragment_id);
        let has = |ordered: &[OrderedIndexState], id: u32| ordered.iter().any(|i| i.id == id);
        let mut outcome = AlterOutcome {
            rows_rewritten: table.columns.len() != self.layout.column_count(),
            rows: 0,
            indexes_built: next
                .ordered
                .iter()
                .filter(|i| !has(&self.ordered, i.id))
                .count() as u32,
            indexes_dropped: self
                .ordered
                .iter()
                .filter(|i| !has(&next.ordered, i.id))
                .count() as u32,
        };
        if outcome.rows_rewritten {
            if let Err(e) = self.rewrite_rows(pool, &mut next) {
                next.release(pool);
                return Err(e);
            }
            self.release(pool);
        } else {
            std::mem::swap(&mut self.rows, &mut next.rows);
            std::mem::swap(&mut self.hash, &mut next.hash);
            for at in 0..next.ordered.len() {
                let id = next.ordered[at].id;
                match self.ordered.iter_mut().find(|i| i.id == id) {
                    Some(kept) => {
                        next.ordered[at].index =
                            std::mem::replace(&mut kept.index, BTreeOrderedIndex::new());
                    }
                    None => next.build_ordered_index(pool, at),
                }
            }
            // Dropped indexes go with `self`.
        }
        outcome.rows = next.row_count();
        next.commit_seq = self.commit_seq;
        next.free_images = std::mem::take(&mut self.free_images);
        next.free_row_lists = std::mem::take(&mut self.free_row_lists);
        *self = next;
        Ok(outcome)
    }

    /// Why `table` cannot be this fragment's next definition, if it cannot.
    fn check_alter(&self, table: &TableDef) -> Result<(), FragmentError> {
        let bad = |detail: String| FragmentError::BadAlter {
            table: self.table.clone(),
            fragment: self.fragment_id,
            version: table.version,
            detail,
        };
        let old = &self.definition;
        if table.id != self.table_id {
            return Err(bad(format!(
                "the definition is of table {} (`{}`)",
                table.id, table.name
            )));
        }
        if table.version < self.table_version {
            return Err(bad(format!(
                "the fragment is at version {}",
                self.table_version
            )));
        }
        if table.version == self.table_version {
            if table != old {
                return Err(bad("the definition changed without a new version".into()));
            }
            return Ok(());
        }
        if table.partitions != old.partitions {
            return Err(bad(format!(
                "the partition count changes from {} to {}",
                old.partitions, table.partitions
            )));
        }
        let kept = old.columns.len();
        // Rows hold columns by position: a column may be renamed, not
        // changed or moved.
        if table.columns.len() < kept
            || !table.columns[..kept]
                .iter()
                .zip(&old.columns)
                .all(|(new, old)| new.same_but_name(old))
        {
            return Err(bad(format!(
                "only renames and columns appended at the end are supported: the first {kept} \
                 columns must stay as they are"
            )));
        }
        if table.primary_key != old.primary_key || table.distribution_key != old.distribution_key {
            return Err(bad("the primary or distribution key changes".into()));
        }
        if let Some(added) = table.columns[kept..]
            .iter()
            .find(|c| !c.nullable && c.default.is_none())
        {
            return Err(bad(format!(
                "added column `{}` is NOT NULL without a default: existing rows need a value",
                added.name
            )));
        }
        if !self.pending.is_empty() || !self.txs.is_empty() {
            return Err(FragmentError::AlterBusy {
                table: self.table.clone(),
                fragment: self.fragment_id,
                transactions: self.txs.len(),
            });
        }
        Ok(())
    }

    /// Copies every row, converted to `next`'s layout, into `next` (an
    /// empty fragment of the new definition) and builds its indexes. On an
    /// error `next` holds part of the rows: the caller releases it.
    fn rewrite_rows(&self, pool: &mut PagePool, next: &mut Fragment) -> Result<(), FragmentError> {
        debug_assert_eq!(self.uncommitted_rows, 0, "nothing is pending");
        let mut image = Image::default();
        for row in self.rows.rows() {
            convert_row(
                &self.layout,
                &next.layout,
                &next.definition,
                (self.rows.fixed(pool, row), self.rows.var(pool, row)),
                &mut image,
            )?;
            next.rows
                .insert(pool, &image.fixed, &image.var)
                .map_err(|e| next.memory_error(e))?;
        }
        next.rebuild_indexes(pool)
    }

    /// Fills the (empty) ordered index at position `at` from the rows, all
    /// committed.
    fn build_ordered_index(&mut self, pool: &PagePool, at: usize) {
        debug_assert_eq!(self.uncommitted_rows, 0, "nothing is pending");
        let Fragment {
            ordered,
            rows,
            layout,
            scratch,
            ..
        } = self;
        let index = &mut ordered[at];
        for row in rows.rows() {
            scratch.new_key.clear();
            index.encoder.encode_from_row(
                layout,
                rows.fixed(pool, row),
                rows.var(pool, row),
                &mut scratch.new_key,
            );
            insert_entry(index, &scratch.new_key, row);
        }
    }

    // ----- recovery -----

    /// Replays one LDM redo record of this fragment: an insert or update
    /// becomes an upsert by primary key, a delete removes the row if it is
    /// there. Idempotent, so replaying from a fuzzy checkpoint's start is
    /// exact. Runs before any transaction (nothing may be pending). A
    /// record of an older table version is read with that version's layout
    /// (its column count says which prefix of the columns it has) and
    /// converted to the current one, the added columns taking their default
    /// or NULL, as [`Fragment::alter`] converted the rows it found. A record
    /// of another table or fragment, of a newer version, or with bytes that
    /// are not a row of its layout, is refused with nothing changed.
    pub fn apply_redo(&mut self, pool: &mut PagePool, record: &[u8]) -> Result<(), FragmentError> {
        assert!(
            self.pending.is_empty() && self.txs.is_empty(),
            "table `{}` fragment {}: redo replayed while transactions run",
            self.table,
            self.fragment_id
        );
        let record = RedoRecord::decode(record).map_err(|e| self.bad_redo(e.to_string()))?;
        if (record.table_id, record.fragment_id) != (self.table_id, self.fragment_id)
            || record.table_version > self.table_version
        {
            return Err(self.bad_redo(format!(
                "it is for table {} version {} fragment {}, this is table {} version {} fragment {}",
                record.table_id,
                record.table_version,
                record.fragment_id,
                self.table_id,
                self.table_version,
                self.fragment_id
            )));
        }
        self.scratch.key.clear();
        self.scratch.key.extend_from_slice(record.key);
        let found = self.find(pool);
        if record.kind == RedoKind::Delete {
            if let Some(row) = found {
                self.remove_committed(pool, row);
            }
            return Ok(());
        }
        let columns = usize::from(record.columns);
        if columns == self.layout.column_count() {
            return self.upsert_replayed(pool, found, record.key, record.fixed, record.var);
        }
        // Written before an ALTER TABLE added columns.
        let mut image = self.free_images.pop().unwrap_or_default();
        let result = self
            .convert_old_image(columns, record.fixed, record.var, &mut image)
            .and_then(|()| self.upsert_replayed(pool, found, record.key, &image.fixed, &image.var));
        self.recycle_image(image);
        result
    }

    /// The upsert of a replayed insert or update whose image (`fixed`,
    /// `var`, of the current layout) has primary key `key`, which `find`
    /// looked up (`found`, and `scratch.key_hash`).
    fn upsert_replayed(
        &mut self,
        pool: &mut PagePool,
        found: Option<RowId>,
        key: &[u8],
        fixed: &[u8],
        var: &[u8],
    ) -> Result<(), FragmentError> {
        self.layout
            .validate_row(fixed, var)
            .map_err(|source| FragmentError::BadRow {
                fragment: self.fragment_id,
                source,
            })?;
        self.scratch.candidate.clear();
        self.pk
            .encode_from_row(&self.layout, fixed, var, &mut self.scratch.candidate);
        if self.scratch.candidate != key {
            return Err(self.bad_redo("its key is not the key of its row image".to_string()));
        }
        match found {
            Some(row) => {
                // The old image moves the index entries after the row store
                // took the new one (its update is the step that can fail).
                let old = &mut self.scratch.image;
                old.fixed.clear();
                old.fixed.extend_from_slice(self.rows.fixed(pool, row));
                old.var.clear();
                old.var.extend_from_slice(self.rows.var(pool, row));
                self.rows
                    .update(pool, row, fixed, var)
                    .map_err(|e| self.memory_error(e))?;
                let Fragment {
                    ordered,
                    layout,
                    scratch,
                    ..
                } = self;
                let Scratch {
                    image,
                    old_key,
                    new_key,
                    ..
                } = scratch;
                move_entries(
                    ordered,
                    layout,
                    (old_key, new_key),
                    row,
                    (&image.fixed, &image.var),
                    (fixed, var),
                );
            }
            None => {
                let row = self
                    .rows
                    .insert(pool, fixed, var)
                    .map_err(|e| self.memory_error(e))?;
                let hash = self.scratch.key_hash;
                if let Err(e) = self.hash.insert(pool, hash, row) {
                    self.rows.delete(pool, row);
                    return Err(self.memory_error(e));
                }
                self.index_row(pool, row);
            }
        }
        Ok(())
    }

    /// Converts the image of a redo record written when the table had its
    /// first `columns` columns into `out`, in the current layout.
    fn convert_old_image(
        &mut self,
        columns: usize,
        fixed: &[u8],
        var: &[u8],
        out: &mut Image,
    ) -> Result<(), FragmentError> {
        let current = self.layout.column_count();
        let covers_key = self.definition.primary_key.iter().all(|&c| c < columns);
        if columns == 0 || columns > current || !covers_key {
            return Err(self.bad_redo(format!(
                "its image has {columns} columns; the table has {current}, its primary key is \
                 columns {:?}",
                self.definition.primary_key
            )));
        }
        let at = match self
            .older_layouts
            .iter()
            .position(|l| l.column_count() == columns)
        {
            Some(at) => at,
            None => {
                let older = self.definition.with_first_columns(columns, 0);
                self.older_layouts.push(RowLayout::new(&older));
                self.older_layouts.len() - 1
            }
        };
        let older = &self.older_layouts[at];
        older
            .validate_row(fixed, var)
            .map_err(|source| FragmentError::BadRow {
                fragment: self.fragment_id,
                source,
            })?;
        convert_row(older, &self.layout, &self.definition, (fixed, var), out)?;
        Ok(())
    }

    /// Puts a row from a local checkpoint back at its row id (replacing the
    /// row there, as a newer checkpoint's page replaces an older one's).
    /// The bytes come from disk and are checked first. Indexes are not
    /// touched: call [`Fragment::rebuild_indexes`] when all rows are back.
    pub fn restore_row(
        &mut self,
        pool: &mut PagePool,
        row: RowId,
        fixed: &[u8],
        var: &[u8],
    ) -> Result<(), FragmentError> {
        assert!(
            self.pending.is_empty() && self.txs.is_empty(),
            "restore while transactions run"
        );
        if row_page(row) >= FIXED_PAGES_MAX || row_slot(row) >= self.rows.slots_per_page() {
            return Err(FragmentError::BadRestore {
                table: self.table.clone(),
                fragment: self.fragment_id,
                row,
                detail: format!(
                    "no such row id: {} rows per page, at most {FIXED_PAGES_MAX} pages",
                    self.rows.slots_per_page()
                ),
            });
        }
        self.layout
            .validate_row(fixed, var)
            .map_err(|source| FragmentError::BadRow {
                fragment: self.fragment_id,
                source,
            })?;
        let result = if self.rows.is_live(row) {
            self.rows.update(pool, row, fixed, var)
        } else {
            self.rows.insert_at(pool, row, fixed, var)
        };
        result.map_err(|e| self.memory_error(e))
    }

    /// Removes a row restored from an older checkpoint that a newer one
    /// says is gone. Indexes are not touched (see `restore_row`).
    pub fn restore_remove_row(&mut self, pool: &mut PagePool, row: RowId) {
        assert!(self.pending.is_empty(), "restore while transactions run");
        if self.rows.is_live(row) {
            self.rows.delete(pool, row);
        }
    }

    /// Builds the hash index and the ordered indexes afresh from the rows
    /// (after a restore). Two rows with one primary key mean a damaged
    /// checkpoint: refused. On an error the indexes are incomplete and the
    /// fragment must be dropped ([`Fragment::release`]).
    pub fn rebuild_indexes(&mut self, pool: &mut PagePool) -> Result<(), FragmentError> {
        assert!(
            self.pending.is_empty() && self.txs.is_empty(),
            "index rebuild while transactions run"
        );
        self.hash.release(pool);
        for index in &mut self.ordered {
            index.index = BTreeOrderedIndex::new();
        }
        self.uncommitted_rows = 0;
        let mut rows = self.free_row_lists.pop().unwrap_or_default();
        rows.clear();
        rows.extend(self.rows.rows());
        let result = rows.iter().try_for_each(|&row| self.rebuild_row(pool, row));
        self.free_row_lists.push(rows);
        result
    }

    fn rebuild_row(&mut self, pool: &mut PagePool, row: RowId) -> Result<(), FragmentError> {
        if self.rows.is_uncommitted(pool, row) {
            // A checkpoint holds committed rows only; an uncommitted flag
            // from a restore is not trusted as a reserved insert.
            self.rows.set_uncommitted(pool, row, false);
        }
        self.scratch.key.clear();
        self.pk.encode_from_row(
            &self.layout,
            self.rows.fixed(pool, row),
            self.rows.var(pool, row),
            &mut self.scratch.key,
        );
        if let Some(other) = self.find(pool) {
            return Err(FragmentError::BadRestore {
                table: self.table.clone(),
                fragment: self.fragment_id,
                row,
                detail: format!("it has the primary key of row {other:?}"),
            });
        }
        let hash = self.scratch.key_hash;
        self.hash
            .insert(pool, hash, row)
            .map_err(|e| self.memory_error(e))?;
        self.index_row(pool, row);
        Ok(())
    }

    /// Gives every page back to the pool (the table or fragment is dropped,
    /// or a failed restore is thrown away). Transactions in flight are
    /// forgotten; the fragment is empty afterwards.
    pub fn release(&mut self, pool: &mut PagePool) {
        for (_, mut pending) in self.pending.drain() {
            if let Some(page) = pending.reserve.take() {
                pool.free_page(page);
            }
        }
        self.reserve_pages = 0;
        self.txs.clear();
        self.locks = LockTable::new();
        self.hash.release(pool);
        self.rows.release(pool);
        for index in &mut self.ordered {
            index.index = BTreeOrderedIndex::new();
        }
        self.uncommitted_rows = 0;
    }

    /// Checks every invariant between the parts (tests; walks everything).
    pub fn check_invariants(&self, pool: &PagePool) {
        self.rows.check_invariants(pool);
        self.hash.check_invariants(pool);
        self.locks.check_invariants();
        assert_eq!(
            self.hash.len(),
            self.rows.row_count(),
            "a hash entry per row"
        );
        let mut key = Vec::new();
        let mut uncommitted = 0u64;
        for row in self.rows.rows() {
            key.clear();
            let (fixed, var) = (self.rows.fixed(pool, row), self.rows.var(pool, row));
            self.pk.encode_from_row(&self.layout, fixed, var, &mut key);
            let found = self.hash.find(pool, distribution_hash(&key), |r| r == row);
            assert_eq!(
                found,
                Some(row),
                "{row:?} is in the hash index under its key"
            );
            let pending = self.pending.get(&row);
            if self.rows.is_uncommitted(pool, row) {
                uncommitted += 1;
                assert!(
                    pending.is_some_and(|p| matches!(
                        p.kind,
                        PendingKind::Insert | PendingKind::InsertDeleted
                    )),
                    "an uncommitted {row:?} is a pending insert"
                );
            } else {
                assert!(pending
                    .is_none_or(|p| matches!(p.kind, PendingKind::Update | PendingKind::Delete)));
                for index in &self.ordered {
                    key.clear();
                    index
                        .encoder
                        .encode_from_row(&self.layout, fixed, var, &mut key);
                    assert!(
                        index.index.contains(&key, row),
                        "{row:?} in index {}",
                        index.id
                    );
                }
            }
        }
        assert_eq!(uncommitted, self.uncommitted_rows);
        for index in &self.ordered {
            assert_eq!(
                index.index.len() as u64,
                self.row_count(),
                "index {} size",
                index.id
            );
        }
        let mut reserves = 0;
        for (row, pending) in &self.pending {
            assert!(self.rows.is_live(*row));
            assert_eq!(
                self.locks.held_mode(*row, pending.tx),
                Some(LockMode::Exclusive),
                "a pending change of {row:?} is under its exclusive lock"
            );
            assert!(
                self.txs.get(&pending.tx).is_some_and(|l| l.contains(row)),
                "{row:?} is in its transaction's list"
            );
            reserves += u32::from(pending.reserve.is_some());
            if pending.reserve.is_some() {
                assert_eq!(pending.kind, PendingKind::Update);
            }
        }
        assert_eq!(reserves, self.reserve_pages);
    }

    // ----- inner steps -----

    /// The parts a primary-key lookup reads.
    fn lookup(&self) -> Lookup<'_> {
        Lookup {
            hash: &self.hash,
            rows: &self.rows,
            layout: &self.layout,
            pk: &self.pk,
            compare: &self.key_compare,
        }
    }

    /// Encodes `key` (primary-key values) into `scratch.key`.
    fn encode_key(&mut self, key: &[Value]) -> Result<(), FragmentError> {
        self.scratch.key.clear();
        self.pk.encode(key, &mut self.scratch.key)?;
        Ok(())
    }

    /// Encodes a whole row into `scratch.image` and its key into
    /// `scratch.key`.
    fn encode_row(&mut self, values: &[Value]) -> Result<(), FragmentError> {
        let image = &mut self.scratch.image;
        self.layout
            .encode(values, &mut image.fixed, &mut image.var)?;
        self.scratch.key.clear();
        self.pk.encode_from_row(
            &self.layout,
            &image.fixed,
            &image.var,
            &mut self.scratch.key,
        );
        Ok(())
    }

    /// The row whose primary key is `scratch.key`, committed or reserved.
    /// Leaves the key's hash in `scratch.key_hash` (an insert that finds
    /// no row enters it in the hash index under that hash).
    fn find(&mut self, pool: &PagePool) -> Option<RowId> {
        let key_hash = distribution_hash(&self.scratch.key);
        self.scratch.key_hash = key_hash;
        let Fragment {
            hash,
            rows,
            layout,
            pk,
            key_compare,
            scratch,
            ..
        } = self;
        let lookup = Lookup {
            hash,
            rows,
            layout,
            pk,
            compare: key_compare,
        };
        lookup.find(pool, (&scratch.key, key_hash), &mut scratch.candidate)
    }

    /// Acquires a row lock: `Ok(true)` when held, `Ok(false)` when queued.
    fn lock(
        &mut self,
        row: RowId,
        tx: TxId,
        op: OpId,
        mode: LockMode,
    ) -> Result<bool, FragmentError> {
        self.lock_or_not(row, tx, op, mode, true)
    }

    /// [`Fragment::lock`], or with `wait` false: `LockBusy` where it would
    /// queue.
    fn lock_or_not(
        &mut self,
        row: RowId,
        tx: TxId,
        op: OpId,
        mode: LockMode,
        wait: bool,
    ) -> Result<bool, FragmentError> {
        let acquired = if wait {
            self.locks.acquire(row, tx, op, mode)
        } else {
            self.locks.try_acquire(row, tx, op, mode)
        };
        let held = match acquired {
            Ok(Acquire::AlreadyHeld) => return Ok(true),
            Ok(Acquire::Granted) => true,
            Ok(Acquire::Queued) => false,
            Ok(Acquire::Busy) => {
                return Err(FragmentError::LockBusy {
                    table: self.table.clone(),
                })
            }
            Err(source @ LockError::TooManyWaiters { .. }) => {
                return Err(FragmentError::LockWaitersFull {
                    table: self.table.clone(),
                    source,
                })
            }
            Err(source @ LockError::AlreadyWaiting { .. }) => {
                return Err(FragmentError::AlreadyWaiting {
                    table: self.table.clone(),
                    source,
                })
            }
        };
        // Granted or queued: the transaction's end must release it.
        let free = &mut self.free_row_lists;
        self.txs
            .entry(tx)
            .or_insert_with(|| free.pop().unwrap_or_default())
            .push(row);
        Ok(held)
    }

    /// What a transaction holding a lock on `row` sees of it.
    fn view(&self, pool: &PagePool, row: RowId, tx: TxId) -> View {
        match self.pending.get(&row) {
            Some(pending) => {
                assert_eq!(
                    pending.tx, tx,
                    "{row:?}: a change of another transaction is pending under this one's lock"
                );
                match pending.kind {
                    PendingKind::Insert => View::OwnInsert,
                    PendingKind::Update => View::OwnUpdate,
                    PendingKind::InsertDeleted | PendingKind::Delete => View::Gone,
                }
            }
            None => {
                debug_assert!(
                    !self.rows.is_uncommitted(pool, row),
                    "{row:?}: an uncommitted row without its pending insert"
                );
                View::Committed
            }
        }
    }

    /// The kind of `tx`'s pending change of `row`, if it has one.
    fn pending_of(&self, row: RowId, tx: TxId) -> Option<PendingKind> {
        self.pending
            .get(&row)
            .filter(|p| p.tx == tx)
            .map(|p| p.kind)
    }

    /// Reserves a row for an insert of a new key: the image in
    /// `scratch.image`, the key in `scratch.key`. Row and hash entry both,
    /// or neither.
    fn reserve_insert(
        &mut self,
        pool: &mut PagePool,
        tx: TxId,
        op: OpId,
    ) -> Result<(), FragmentError> {
        let image = &self.scratch.image;
        let row = self
            .rows
            .insert(pool, &image.fixed, &image.var)
            .map_err(|e| self.memory_error(e))?;
        self.rows.set_uncommitted(pool, row, true);
        // `find` hashed the key when it found no row.
        let key_hash = self.scratch.key_hash;
        debug_assert_eq!(key_hash, distribution_hash(&self.scratch.key));
        if let Err(e) = self.hash.insert(pool, key_hash, row) {
            self.rows.delete(pool, row);
            return Err(self.memory_error(e));
        }
        let held = self.lock(row, tx, op, LockMode::Exclusive);
        assert!(
            matches!(held, Ok(true)),
            "a new row id {row:?} is locked already: {held:?}"
        );
        self.uncommitted_rows += 1;
        let previous = self.pending.insert(
            row,
            Pending {
                tx,
                kind: PendingKind::Insert,
                image: Image::default(),
                reserve: None,
                redo_seq: 0,
            },
        );
        assert!(
            previous.is_none(),
            "a new row id {row:?} has a pending change"
        );
        Ok(())
    }

    /// Makes the image in `scratch.image` `tx`'s version of `row`, which it
    /// holds exclusively and which exists for it or was deleted by it.
    fn write_over(
        &mut self,
        pool: &mut PagePool,
        row: RowId,
        tx: TxId,
    ) -> Result<(), FragmentError> {
        match self.pending_of(row, tx) {
            Some(PendingKind::Insert | PendingKind::InsertDeleted) => {
                self.overwrite_own_insert(pool, row)
            }
            Some(PendingKind::Update | PendingKind::Delete) | None => {
                self.stage_update(pool, row, tx)
            }
        }
    }

    /// Makes the image in `scratch.image` that of `row`, a reserved insert
    /// of the transaction (deleted again by it or not): the row store holds
    /// its image.
    fn overwrite_own_insert(
        &mut self,
        pool: &mut PagePool,
        row: RowId,
    ) -> Result<(), FragmentError> {
        let image = &self.scratch.image;
        self.rows
            .update(pool, row, &image.fixed, &image.var)
            .map_err(|e| self.memory_error(e))?;
        self.pending.get_mut(&row).expect("pending insert").kind = PendingKind::Insert;
        Ok(())
    }

    /// Stages `scratch.image` as the pending update of committed `row`,
    /// reserving a pool page when its var part is longer than the
    /// committed one's. On an error nothing changed.
    fn stage_update(
        &mut self,
        pool: &mut PagePool,
        row: RowId,
        tx: TxId,
    ) -> Result<(), FragmentError> {
        let grows = self.scratch.image.var.len() > self.rows.var(pool, row).len();
        // One lookup of the row's pending change, for the reserve and the
        // image both.
        let Fragment {
            pending,
            free_images,
            scratch,
            reserve_pages,
            ..
        } = self;
        let entry = pending.entry(row);
        let has_reserve = matches!(&entry, Entry::Occupied(o) if o.get().reserve.is_some());
        let mut new_reserve = None;
        if grows && !has_reserve {
            match pool.alloc_page() {
                Ok(page) => new_reserve = Some(page),
                // Nothing changed: a vacant entry inserts nothing.
                Err(e) => return Err(self.memory_error(e)),
            }
            *reserve_pages += 1;
        }
        let pending = match entry {
            Entry::Occupied(occupied) => occupied.into_mut(),
            Entry::Vacant(vacant) => vacant.insert(Pending {
                tx,
                kind: PendingKind::Update,
                image: free_images.pop().unwrap_or_default(),
                reserve: None,
                redo_seq: 0,
            }),
        };
        debug_assert_eq!(pending.tx, tx);
        if pending.image.fixed.capacity() == 0 {
            // A pending delete gave its buffers back.
            if let Some(image) = free_images.pop() {
                pending.image = image;
            }
        }
        pending.kind = PendingKind::Update;
        // The old buffers become the scratch for the next image.
        std::mem::swap(&mut pending.image, &mut scratch.image);
        // Every caller looked the row up by `scratch.key`: the row's key
        // (primary keys never change), the same bytes its row encodes to.
        pending.image.key.clear();
        pending.image.key.extend_from_slice(&scratch.key);
        if new_reserve.is_some() {
            pending.reserve = new_reserve;
        }
        if !grows {
            if let Some(page) = pending.reserve.take() {
                self.free_reserve(pool, Some(page));
            }
        }
        Ok(())
    }

    fn free_reserve(&mut self, pool: &mut PagePool, reserve: Option<PageId>) {
        if let Some(page) = reserve {
            pool.free_page(page);
            assert!(self.reserve_pages > 0);
            self.reserve_pages -= 1;
        }
    }

    fn recycle_image(&mut self, image: Image) {
        if image.fixed.capacity() > 0 || image.var.capacity() > 0 {
            self.free_images.push(image);
        }
    }

    /// Builds, checks room for and appends the redo records of `tx`'s
    /// commit. Changes nothing but the pending entries' `redo_seq`.
    /// Returns how many rows `tx` changed: (updates, other changes).
    fn log_commit(
        &mut self,
        pool: &PagePool,
        tx: TxId,
        gci: Gci,
        list: &[RowId],
        sink: &mut dyn RedoSink,
    ) -> Result<(usize, usize), FragmentError> {
        self.commit_seq = self.commit_seq.wrapping_add(1).max(1);
        let seq = self.commit_seq;
        let Fragment {
            pending,
            rows,
            layout,
            pk,
            scratch,
            table_id,
            table_version,
            fragment_id,
            capture,
            captured,
            captured_count,
            ..
        } = self;
        scratch.redo.clear();
        scratch.redo_ends.clear();
        // What this attempt captures, dropped again when it fails.
        let (captured_start, captured_count_start) = (captured.len(), *captured_count);
        let mut need = RedoNeed::default();
        let (mut updates, mut others) = (0, 0);
        for &row in list {
            let Some(p) = pending
                .get_mut(&row)
                .filter(|p| p.tx == tx && p.redo_seq != seq)
            else {
                continue;
            };
            p.redo_seq = seq;
            if p.kind == PendingKind::Update {
                updates += 1;
            } else {
                others += 1;
            }
            let (kind, fixed, var) = match p.kind {
                PendingKind::InsertDeleted => continue,
                PendingKind::Insert => {
                    (RedoKind::Insert, rows.fixed(pool, row), rows.var(pool, row))
                }
                PendingKind::Update => (RedoKind::Update, &p.image.fixed[..], &p.image.var[..]),
                PendingKind::Delete => (RedoKind::Delete, &[][..], &[][..]),
            };
            if let Some(flags) = *capture {
                let ids = (*table_id, *table_version, *fragment_id);
                capture_change(captured, flags, p, pool, rows, row, ids);
                *captured_count += 1;
            }
            let start = scratch.redo.len();
            redo_record::push_header(
                &mut scratch.redo,
                kind,
                *table_id,
                *table_version,
                *fragment_id,
                // At most COLUMNS_MAX (512).
                layout.column_count() as u16,
            );
            // The key of the committed (or reserved) row: the same as the
            // new image's, primary keys never change.
            let key_start = scratch.redo.len();
            if p.kind == PendingKind::Update {
                scratch.redo.extend_from_slice(&p.image.key);
                debug_assert!(
                    {
                        // A scratch buffer: a warm commit allocates nothing.
                        let key = &mut scratch.candidate;
                        key.clear();
                        pk.encode_from_row(layout, rows.fixed(pool, row), rows.var(pool, row), key);
                        *key == p.image.key
                    },
                    "{row:?}: a pending update keeps its row's key"
                );
            } else {
                pk.encode_from_row(
                    layout,
                    rows.fixed(pool, row),
                    rows.var(pool, row),
                    &mut scratch.redo,
                );
            }
            let key = scratch.redo.len() - key_start;
            scratch.redo.extend_from_slice(fixed);
            scratch.redo.extend_from_slice(var);
            redo_record::finish(&mut scratch.redo, start, key, fixed.len(), var.len());
            scratch.redo_ends.push(scratch.redo.len());
            need.add(scratch.redo.len() - start);
        }
        let mut failed = sink.check_room(need).err();
        if failed.is_none() {
            let mut start = 0;
            for &end in &self.scratch.redo_ends {
                if let Err(error) = sink.append(gci, &self.scratch.redo[start..end]) {
                    failed = Some(error);
                    break;
                }
                start = end;
            }
        }
        if let Some(source) = failed {
            // Nothing of this attempt is committed: neither is it captured.
            self.captured.truncate(captured_start);
            self.captured_count = captured_count_start;
            let table = self.table.clone();
            return Err(match source {
                RedoError::Full { .. } => FragmentError::RedoFull { table, source },
                source => FragmentError::Redo { table, source },
            });
        }
        Ok((updates, others))
    }

    /// Installs a pending update of committed `row`: ordered-index keys that
    /// change, then the image. Its reserve page is back in the pool.
    fn install_update(&mut self, pool: &mut PagePool, row: RowId, image: &Image) {
        let Fragment {
            ordered,
            rows,
            layout,
            scratch,
            ..
        } = self;
        if !ordered.is_empty() {
            // The committed image is read only for an index to compare.
            move_entries(
                ordered,
                layout,
                (&mut scratch.old_key, &mut scratch.new_key),
                row,
                (rows.fixed(pool, row), rows.var(pool, row)),
                (&image.fixed, &image.var),
            );
        }
        if let Err(e) = self.rows.update(pool, row, &image.fixed, &image.var) {
            panic!(
                "table `{}` fragment {}: commit of {row:?} failed after its memory was \
                 reserved: {e}",
                self.table, self.fragment_id
            );
        }
    }

    /// Enters committed `row` into every ordered index.
    fn index_row(&mut self, pool: &PagePool, row: RowId) {
        let Fragment {
            ordered,
            rows,
            layout,
            scratch,
            ..
        } = self;
        for index in ordered {
            scratch.new_key.clear();
            index.encoder.encode_from_row(
                layout,
                rows.fixed(pool, row),
                rows.var(pool, row),
                &mut scratch.new_key,
            );
            insert_entry(index, &scratch.new_key, row);
        }
    }

    /// Commits a reserved insert.
    fn install_insert(&mut self, pool: &mut PagePool, row: RowId) {
        debug_assert!(self.rows.is_uncommitted(pool, row));
        self.rows.set_uncommitted(pool, row, false);
        self.uncommitted_rows -= 1;
        self.index_row(pool, row);
    }

    /// Removes a reserved (uncommitted) row and its hash entry.
    fn remove_reserved(&mut self, pool: &mut PagePool, row: RowId) {
        debug_assert!(self.rows.is_uncommitted(pool, row));
        self.remove_hash_entry(pool, row);
        self.rows.delete(pool, row);
        self.uncommitted_rows -= 1;
    }

    /// Removes a committed row from the ordered indexes, the hash index and
    /// the row store.
    fn remove_committed(&mut self, pool: &mut PagePool, row: RowId) {
        debug_assert!(!self.rows.is_uncommitted(pool, row));
        let Fragment {
            ordered,
            rows,
            layout,
            scratch,
            ..
        } = self;
        for index in ordered {
            scratch.old_key.clear();
            index.encoder.encode_from_row(
                layout,
                rows.fixed(pool, row),
                rows.var(pool, row),
                &mut scratch.old_key,
            );
            let removed = index.index.remove(&scratch.old_key, row);
            assert!(removed, "{row:?} was in ordered index {}", index.id);
        }
        self.remove_hash_entry(pool, row);
        self.rows.delete(pool, row);
    }

    fn remove_hash_entry(&mut self, pool: &mut PagePool, row: RowId) {
        self.scratch.candidate.clear();
        self.pk.encode_from_row(
            &self.layout,
            self.rows.fixed(pool, row),
            self.rows.var(pool, row),
            &mut self.scratch.candidate,
        );
        let removed = self
            .hash
            .remove(pool, distribution_hash(&self.scratch.candidate), row);
        assert!(removed, "{row:?} was in the hash index");
    }

    /// Releases every lock and waiting request of `tx`, whose row list
    /// `list` the caller took out of `txs`.
    /// Waiters granted a row that no longer exists are released at once
    /// (their grants still go to the caller, whose retry finds no row).
    fn end_transaction(&mut self, tx: TxId, mut list: Vec<RowId>, grants: &mut Vec<Grant>) {
        let first_grant = grants.len();
        self.locks.release_all(tx, list.iter().copied(), grants);
        self.drop_grants_of_gone_rows(first_grant, grants);
        debug_assert!(!self.txs.contains_key(&tx), "the caller took its row list");
        list.clear();
        self.free_row_lists.push(list);
    }

    /// Of the grants from `first` on, those of rows that are gone (a
    /// committed delete) are released at once, handing the row on to
    /// whoever waits behind (appended in turn).
    fn drop_grants_of_gone_rows(&mut self, first: usize, grants: &mut Vec<Grant>) {
        let mut i = first;
        while i < grants.len() {
            let grant = grants[i];
            if !self.rows.is_live(grant.row) {
                self.locks.release_tx(grant.tx, grant.row, grants);
            }
            i += 1;
        }
    }

    fn memory_error(&self, error: MemoryError) -> FragmentError {
        match error {
            MemoryError::DataMemoryExhausted { budget_bytes } => FragmentError::TableFull {
                table: self.table.clone(),
                budget_bytes,
            },
            source => FragmentError::PartitionFull {
                table: self.table.clone(),
                fragment: self.fragment_id,
                source,
            },
        }
    }

    fn bad_redo(&self, detail: String) -> FragmentError {
        FragmentError::BadRedoRecord {
            table: self.table.clone(),
            fragment: self.fragment_id,
            detail,
        }
    }
}

/// How a stored row's primary key is compared with an encoded key.
#[derive(Clone, Debug)]
enum KeyCompare {
    /// As `InPlace`, and the key columns lie back to back in the fixed
    /// part, in key order (a one-column key, or columns declared in key
    /// order): the key is the `len` bytes at `offset`, compared in one go.
    Span { offset: usize, len: usize },
    /// Every key column is NOT NULL, fixed-size and neither FLOAT nor
    /// DOUBLE, so its key form is its stored bytes
    /// (`RowLayout::fixed_column`): the key is compared with the row in
    /// place, column by column (these table positions, in key order).
    InPlace(Vec<usize>),
    /// Other keys: the row's key is encoded into a scratch buffer first.
    Encoded,
}

impl KeyCompare {
    fn new(table: &TableDef, layout: &RowLayout) -> KeyCompare {
        let in_place = table.primary_key.iter().all(|&c| {
            let column = &table.columns[c];
            !column.nullable
                && !column.ty.is_var()
                && !matches!(column.ty, ColumnType::Float | ColumnType::Double)
        });
        if !in_place {
            return KeyCompare::Encoded;
        }
        // Where each key column lies in a fixed part: read off the layout
        // itself (a column's bytes in a probe image), so that this cannot
        // drift from it.
        let probe = vec![0u8; layout.fixed_bytes()];
        let span = |c: usize| {
            let bytes = layout.fixed_column(&probe, c);
            let offset = bytes.as_ptr() as usize - probe.as_ptr() as usize;
            (offset, bytes.len())
        };
        let (offset, mut len) = span(table.primary_key[0]);
        for &c in &table.primary_key[1..] {
            let (at, bytes) = span(c);
            if at != offset + len {
                return KeyCompare::InPlace(table.primary_key.clone());
            }
            len += bytes;
        }
        assert!(offset + len <= layout.fixed_bytes());
        KeyCompare::Span { offset, len }
    }
}

/// `a == b` for the short keys of [`KeyCompare::Span`]: the common
/// widths as one integer compare instead of a call to `memcmp`.
#[inline(always)]
fn key_bytes_equal(a: &[u8], b: &[u8]) -> bool {
    if let (Ok(x), Ok(y)) = (<[u8; 4]>::try_from(a), <[u8; 4]>::try_from(b)) {
        return u32::from_ne_bytes(x) == u32::from_ne_bytes(y);
    }
    if let (Ok(x), Ok(y)) = (<[u8; 8]>::try_from(a), <[u8; 8]>::try_from(b)) {
        return u64::from_ne_bytes(x) == u64::from_ne_bytes(y);
    }
    a == b
}

/// The parts of a fragment that a primary-key lookup reads: the one lookup
/// of single and batched operations.
struct Lookup<'f> {
    hash: &'f HashIndex,
    rows: &'f RowStore,
    layout: &'f RowLayout,
    pk: &'f KeyEncoder,
    compare: &'f KeyCompare,
}

impl Lookup<'_> {
    /// The row whose encoded primary key is `key` (hashing to `key_hash`),
    /// committed or reserved; `scratch` is for candidates' keys.
    #[inline]
    fn find(
        &self,
        pool: &PagePool,
        (key, key_hash): (&[u8], u64),
        scratch: &mut Vec<u8>,
    ) -> Option<RowId> {
        debug_assert_eq!(key_hash, distribution_hash(key));
        self.hash.find(pool, key_hash, |row| {
            self.row_has_key(pool, row, key, scratch)
        })
    }

    /// Whether the primary key of stored `row` is `key`.
    #[inline]
    fn row_has_key(&self, pool: &PagePool, row: RowId, key: &[u8], scratch: &mut Vec<u8>) -> bool {
        self.fixed_has_key(pool, row, self.rows.fixed(pool, row), key, scratch)
    }

    /// Whether the primary key of stored `row`, whose fixed-size part is
    /// `fixed` (read already), is `key`.
    #[inline(always)]
    fn fixed_has_key(
        &self,
        pool: &PagePool,
        row: RowId,
        fixed: &[u8],
        key: &[u8],
        scratch: &mut Vec<u8>,
    ) -> bool {
        debug_assert_eq!(fixed.len(), self.layout.fixed_bytes());
        match self.compare {
            KeyCompare::Span { offset, len } => {
                key.len() == *len && key_bytes_equal(&fixed[*offset..*offset + *len], key)
            }
            KeyCompare::InPlace(columns) => {
                let mut at = 0;
                let mut equal = true;
                for &column in columns {
                    let stored = self.layout.fixed_column(fixed, column);
                    let end = at + stored.len();
                    equal &= key.get(at..end) == Some(stored);
                    at = end;
                }
                equal && at == key.len()
            }
            KeyCompare::Encoded => {
                scratch.clear();
                self.pk
                    .encode_from_row(self.layout, fixed, self.rows.var(pool, row), scratch);
                scratch[..] == key[..]
            }
        }
    }
}

/// Moves `row`'s ordered-index entries from the keys of image `old` to
/// those of image `new`, where they differ; `keys` are scratch buffers.
fn move_entries(
    ordered: &mut [OrderedIndexState],
    layout: &RowLayout,
    (old_key, new_key): (&mut Vec<u8>, &mut Vec<u8>),
    row: RowId,
    old: (&[u8], &[u8]),
    new: (&[u8], &[u8]),
) {
    for index in ordered {
        old_key.clear();
        new_key.clear();
        index.encoder.encode_from_row(layout, old.0, old.1, old_key);
        index.encoder.encode_from_row(layout, new.0, new.1, new_key);
        if old_key != new_key {
            let removed = index.index.remove(old_key, row);
            assert!(removed, "{row:?} was in ordered index {}", index.id);
            insert_entry(index, new_key, row);
        }
    }
}

fn insert_entry(index: &mut OrderedIndexState, key: &[u8], row: RowId) {
    // Keys are at most KEY_BYTES_MAX (4 KiB) and a row is entered once.
    if let Err(e) = index.index.insert(key, row) {
        panic!("ordered index {}: {e}", index.id);
    }
}

/// Appends the `signal::sub_change` entry of `pending`'s change of `row`
/// (before the commit installs it: the row store still holds the committed
/// image, or an insert's reserved one) to `out`. `ids`: table id, table
/// version, fragment (the partition).
fn capture_change(
    out: &mut Vec<u8>,
    flags: u8,
    pending: &Pending,
    pool: &PagePool,
    rows: &RowStore,
    row: RowId,
    ids: (u32, u32, u32),
) {
    use signal::sub_change;
    let (kind, before, after): (u8, [&[u8]; 2], [&[u8]; 2]) = match pending.kind {
        PendingKind::Insert => (
            sub_change::INSERT,
            [&[], &[]],
            [rows.fixed(pool, row), rows.var(pool, row)],
        ),
        PendingKind::Update => (
            sub_change::UPDATE,
            [rows.fixed(pool, row), rows.var(pool, row)],
            [&pending.image.fixed[..], &pending.image.var[..]],
        ),
        PendingKind::Delete => (
            sub_change::DELETE,
            [rows.fixed(pool, row), rows.var(pool, row)],
            [&[], &[]],
        ),
        PendingKind::InsertDeleted => return,
    };
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&ids.0.to_le_bytes());
    out.extend_from_slice(&ids.1.to_le_bytes());
    out.extend_from_slice(&ids.2.to_le_bytes());
    for [fixed, var] in [before, after] {
        out.extend_from_slice(&((fixed.len() + var.len()) as u32).to_le_bytes());
        out.extend_from_slice(fixed);
        out.extend_from_slice(var);
    }
}
