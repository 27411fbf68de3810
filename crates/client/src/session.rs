//! [`Session`]: NDB's `Ndb` object. One per user thread: it starts
//! transactions, runs schema calls, and receives the replies addressed to
//! its instance (`BlockRef(api node, API_CLUSTER, instance)`).
//!
//! Every request a session sends is remembered under a [`ReqKey`] with the
//! data node it went to, until its reply comes; if that node's connection
//! closes first, the request ends with an error by NDB's rules: a commit
//! in flight is an unknown result (4010), anything else was aborted (286,
//! temporary); a schema request is 4010 as the dictionary defines it.
//!
//! Asynchronous use (NDB's `executeAsynchPrepare` + `sendPollNdb`):
//! [`Session::prepare`] builds a transaction's request, [`Session::send`]
//! sends all prepared ones with one write per data node, and
//! [`Session::poll`] runs the callbacks of the completed ones. At most
//! [`IN_FLIGHT_MAX`] transactions are prepared or in flight per session.
//! [`Session::prepare_tagged`] and [`Session::take_completed`] do the same
//! without a boxed callback: the outcome waits under the caller's tag.
//!
//! Hot path (DESIGN.md: no per-operation heap allocation once warm): a
//! reply files its transaction on a completion queue, so `poll` touches
//! only the completed ones; the buffers of a transaction (its defined
//! operations, their ranges and result descriptions, the request's batch)
//! go back to the session's spares when it completes and serve the next
//! one, and so does the boxed state of a dropped `Transaction` (which
//! therefore moves as two words); the session's maps hash request keys
//! with one multiplication.
//! An asynchronous transaction stays in one slot from its preparation to
//! its completion (its reply is filed there): the session's lists and
//! maps hold slot numbers, so its state is not copied from list to list.
//! Where its request went is kept in the slot too, so one map (transaction
//! id to slot, while it is sent and unanswered) is all its reply looks up.
//! A transaction whose BLOB/TEXT work takes several requests
//! (`crate::blob`) sends the next one from `poll` when a reply comes, and
//! completes after its last.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use schema::{IndexDef, IndexKind, TableDef, Value};
use signal::{tc_flags, BlockNumber, BlockRef, NodeId, Signal, SignalBody};
use stdx::IdMap;

use crate::blob::{BlobExec, Step};
use crate::cluster::{encode_frames, Cluster, Shared};
use crate::epoch::Epoch;
use crate::error::{Error, Result};
use crate::receiver::{self, Event, Mailbox};
use crate::schema::Table;
use crate::stats::{self, Counts, SessionStats};
use crate::transaction::{ExecMode, OpMeta, Outcome, Transaction, TxInner, TxRequest};

/// Most transactions one session has prepared or in flight at once
/// (tagged outcomes not yet taken count too).
pub const IN_FLIGHT_MAX: usize = 1_024;
/// Spare buffers of each kind a session keeps for its next transactions.
const SPARE_BUFFERS_MAX: usize = IN_FLIGHT_MAX;
/// A byte buffer larger than this is freed rather than kept as a spare
/// (a large batch should not pin its memory in every session).
const SPARE_BUFFER_BYTES_MAX: usize = 4_096;
/// A list larger than this (in elements) is freed rather than kept.
const SPARE_LIST_LEN_MAX: usize = 64;
/// States of dropped transactions a session keeps for its next ones (a
/// thread defines one transaction at a time, or a few).
const SPARE_TRANSACTIONS_MAX: usize = 64;

/// What a reply answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum ReqKey {
    Tx(u64),
    Dict(u32),
    Gci(u32),
}

/// A synchronous execute's request waiting to be sent by [`send_all`].
struct Later {
    link: usize,
    key: ReqKey,
    commit: bool,
    /// Its frames in `State::later_bytes`.
    bytes: std::ops::Range<usize>,
}

/// A request waiting for its reply.
struct Pending {
    node: NodeId,
    /// A commit was asked: a lost connection makes the outcome unknown.
    commit: bool,
    /// The link's connection generation when it was sent: a session hears
    /// of a closed connection only when it next pumps its mailbox, after
    /// it may have sent new requests on the next connection, which that
    /// old news must not fail.
    generation: u64,
}

/// A scan's replies, in arrival order.
pub(crate) struct ScanInbox {
    pub node: NodeId,
    /// The connection generation it was opened on (see `Pending`).
    pub generation: u64,
    pub batches: VecDeque<Result<ScanBatch>>,
}

/// One `TcScanConf` as its scan reads it.
pub(crate) struct ScanBatch {
    pub rows: Vec<u8>,
    /// The scan is over and closed at the TC.
    pub done: bool,
    /// With `done`: the TC ended the transaction too (`tc_flags::RELEASE`).
    pub released: bool,
}

/// A callback of an asynchronous transaction.
pub type Callback = Box<dyn FnOnce(Result<Outcome>) + Send + 'static>;

/// Who learns an asynchronous transaction's outcome.
enum Notify {
    Callback(Callback),
    /// Kept with the tag for [`Session::take_completed`].
    Tag(u64),
}

/// An asynchronous transaction prepared or in flight, in its slot.
struct InFlight {
    request: TxRequest,
    notify: Notify,
    /// The machine of its blob work: more requests may follow the reply.
    blob: Option<Box<BlobExec>>,
    /// The end of its request, filed here (not in `State::done`, which
    /// holds the ends of synchronous requests): one map less to go through.
    reply: Option<Result<SignalBody>>,
    /// Where its request went while it is sent and unanswered (kept here,
    /// not in `State::pending`: one map less per transaction).
    sent: Option<Pending>,
}

/// The slots of asynchronous transactions: each stays in its slot from its
/// preparation to its completion, and what moves between the session's
/// lists is the slot's number (a transaction's state is some hundred
/// bytes: every move of it was a copy).
#[derive(Default)]
struct Slots {
    slots: Vec<Option<InFlight>>,
    free: Vec<u32>,
}

impl Slots {
    /// Puts `flight` in a free slot; returns its number.
    #[inline]
    fn put(&mut self, flight: InFlight) -> u32 {
        match self.free.pop() {
            Some(slot) => {
                let place = &mut self.slots[slot as usize];
                debug_assert!(place.is_none(), "a free slot is empty");
                *place = Some(flight);
                slot
            }
            None => {
                self.slots.push(Some(flight));
                u32::try_from(self.slots.len() - 1).expect("slots are bounded by IN_FLIGHT_MAX")
            }
        }
    }

    fn get(&self, slot: u32) -> &InFlight {
        self.slots[slot as usize].as_ref().expect("a slot in use")
    }

    fn get_mut(&mut self, slot: u32) -> &mut InFlight {
        self.slots[slot as usize].as_mut().expect("a slot in use")
    }

    /// Empties slot `slot`: it serves the next transaction.
    fn free(&mut self, slot: u32) {
        let place = &mut self.slots[slot as usize];
        debug_assert!(place.is_some(), "a slot in use is freed");
        *place = None;
        self.free.push(slot);
    }
}

/// Buffers of finished transactions, for the next ones (see the module doc).
#[derive(Default)]
pub(crate) struct Spares {
    bytes: Vec<Vec<u8>>,
    metas: Vec<Vec<OpMeta>>,
    /// Boxed as a `Transaction` holds them: handed over without a move
    /// of the state.
    #[allow(clippy::vec_box)]
    transactions: Vec<Box<RefCell<TxInner>>>,
}

impl Spares {
    /// Whether a byte buffer is worth keeping: it has room, not too much.
    pub fn bytes_fit(buffer: &Vec<u8>) -> bool {
        (1..=SPARE_BUFFER_BYTES_MAX).contains(&buffer.capacity())
    }

    /// Whether a list is worth keeping: it has room, not too much.
    pub fn list_fits<T>(list: &Vec<T>) -> bool {
        (1..=SPARE_LIST_LEN_MAX).contains(&list.capacity())
    }

    /// The state of new transaction `tx_id` on `link`: a dropped
    /// transaction's when one is kept.
    pub fn transaction(&mut self, tx_id: u64, link: usize) -> Box<RefCell<TxInner>> {
        let boxed = self.transactions.pop().unwrap_or_else(TxInner::new_boxed);
        TxInner::renew(boxed, tx_id, link, self)
    }

    /// Keeps a dropped transaction's state (emptied) unless enough are kept.
    pub fn put_transaction(&mut self, mut boxed: Box<RefCell<TxInner>>) {
        if self.transactions.len() < SPARE_TRANSACTIONS_MAX {
            boxed.get_mut().recycle();
            self.transactions.push(boxed);
        }
    }

    /// An empty byte buffer, with room if a spare has some.
    pub fn bytes(&mut self) -> Vec<u8> {
        self.bytes.pop().unwrap_or_default()
    }

    pub fn metas(&mut self) -> Vec<OpMeta> {
        self.metas.pop().unwrap_or_default()
    }

    /// Keeps `buffer` (emptied) unless it is large or enough are kept.
    pub fn put_bytes(&mut self, mut buffer: Vec<u8>) {
        if Spares::bytes_fit(&buffer) && self.bytes.len() < SPARE_BUFFERS_MAX {
            buffer.clear();
            self.bytes.push(buffer);
        }
    }

    /// Keeps `list` emptied: its `Arc<Table>`s are released now.
    pub fn put_metas(&mut self, mut list: Vec<OpMeta>) {
        if Spares::list_fits(&list) && self.metas.len() < SPARE_BUFFERS_MAX {
            list.clear();
            self.metas.push(list);
        }
    }

    /// Takes back what a finished request holds: its batch and its
    /// operations' descriptions.
    pub fn put_request(&mut self, request: &mut TxRequest) {
        if let SignalBody::TcKeyReq { ops, .. } = &mut request.signal.body {
            self.put_bytes(std::mem::take(ops));
        }
        self.put_metas(std::mem::take(&mut request.metas));
    }
}

#[derive(Default)]
pub(crate) struct State {
    next_request_id: u32,
    pending: IdMap<ReqKey, Pending>,
    done: IdMap<ReqKey, Result<SignalBody>>,
    pub scans: HashMap<(u64, u32), ScanInbox>,
    /// Asynchronous transactions prepared or in flight.
    slots: Slots,
    /// The slots of those prepared and not sent, in preparation order.
    prepared: Vec<u32>,
    /// The slots of those sent and not answered, by transaction id: each
    /// has its `InFlight::sent`.
    in_flight: IdMap<u64, u32>,
    /// The slots of asynchronous transactions whose reply (or failure) is
    /// filed, in the order they got it: `poll` takes these instead of
    /// looking at every transaction in flight. None is in `in_flight`.
    ready: VecDeque<u32>,
    /// Outcomes of tagged transactions, for `take_completed`.
    completed: Vec<(u64, Result<Outcome>)>,
    events: Vec<Event>,
    pub send_buffer: Vec<u8>,
    /// Requests of executes started with `Transaction::execute_later`,
    /// encoded and waiting for `send_all`, in order.
    later: Vec<Later>,
    /// Their frames, back to back.
    later_bytes: Vec<u8>,
    /// The encoded key of a hinted `begin`.
    key_scratch: Vec<u8>,
    /// Read-hinted `begin`s so far: which replica the next one picks.
    read_hint_turn: u32,
    /// The written values of the operation being defined.
    pub values_scratch: Vec<(usize, Value)>,
    pub spares: Spares,
}

impl State {
    /// Files the end of request `key`; an asynchronous transaction's goes
    /// on the completion queue.
    fn file_done(&mut self, key: ReqKey, reply: Result<SignalBody>) {
        if let ReqKey::Tx(id) = key {
            if let Some(slot) = self.in_flight.remove(&id) {
                self.file_in_slot(slot, reply);
                return;
            }
        }
        let previous = self.done.insert(key, reply);
        debug_assert!(previous.is_none(), "{key:?} ended twice");
    }

    /// Files the end of the asynchronous transaction in `slot` (no longer
    /// in `in_flight`) and queues it for `poll`.
    fn file_in_slot(&mut self, slot: u32, reply: Result<SignalBody>) {
        let flight = self.slots.get_mut(slot);
        debug_assert!(flight.reply.is_none(), "a transaction ended twice");
        flight.sent = None;
        flight.reply = Some(reply);
        self.ready.push_back(slot);
    }

    /// Asynchronous transactions prepared, in flight, or answered and not polled.
    fn held(&self) -> usize {
        self.prepared.len() + self.in_flight.len() + self.ready.len()
    }
}

/// A session (see the module doc). Not `Sync`: it belongs to one thread at a time.
pub struct Session {
    pub(crate) cluster: Cluster,
    pub(crate) mailbox: Arc<Mailbox>,
    pub(crate) state: RefCell<State>,
    /// Its counters (`crate::stats`): plain cells, this thread's alone.
    pub(crate) counts: Counts,
}

impl Drop for Session {
    fn drop(&mut self) {
        self.shared().unregister_session(self.mailbox.instance);
    }
}

impl Session {
    pub(crate) fn new(cluster: Cluster) -> Result<Session> {
        let mailbox = cluster.inner.shared.register_session()?;
        Ok(Session {
            cluster,
            mailbox,
            state: RefCell::new(State::default()),
            counts: Counts::default(),
        })
    }

    /// This session's counters since it was made (NDB's per-`Ndb`
    /// statistics: round trips, operations, scans, rows, bytes).
    pub fn stats(&self) -> SessionStats {
        self.counts.snapshot()
    }

    pub(crate) fn shared(&self) -> &Shared {
        &self.cluster.inner.shared
    }

    /// The cluster connection this session belongs to.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// This session's address: replies to it come here.
    pub(crate) fn own_ref(&self) -> BlockRef {
        BlockRef::new(
            self.shared().me,
            BlockNumber::API_CLUSTER,
            self.mailbox.instance,
        )
    }

    // ---- requests and replies ----

    /// Sends one signal and remembers the request it makes.
    pub(crate) fn send_request(
        &self,
        link: usize,
        key: ReqKey,
        commit: bool,
        signal: &Signal,
    ) -> Result<()> {
        let pending = self.send_signal(link, commit, signal)?;
        self.state.borrow_mut().pending.insert(key, pending);
        Ok(())
    }

    /// Encodes a request for [`send_all`] to send (one of
    /// `Transaction::execute_later`); its reply is waited for as a sent
    /// request's once sent.
    pub(crate) fn send_later(
        &self,
        link: usize,
        key: ReqKey,
        commit: bool,
        signal: &Signal,
    ) -> Result<()> {
        let mut state = self.state.borrow_mut();
        let state = &mut *state;
        let start = state.later_bytes.len();
        if let Err(error) = encode_frames(std::slice::from_ref(signal), &mut state.later_bytes) {
            state.later_bytes.truncate(start);
            return Err(error);
        }
        let end = state.later_bytes.len();
        state.later.push(Later {
            link,
            key,
            commit,
            bytes: start..end,
        });
        Ok(())
    }

    /// Whether request `key` still waits to be sent.
    pub(crate) fn is_later(&self, key: ReqKey) -> bool {
        self.state
            .borrow()
            .later
            .iter()
            .any(|later| later.key == key)
    }

    /// Sends one signal; returns what a request it makes waits with.
    fn send_signal(&self, link: usize, commit: bool, signal: &Signal) -> Result<Pending> {
        let shared = self.shared();
        let mut state = self.state.borrow_mut();
        let state = &mut *state;
        encode_frames(std::slice::from_ref(signal), &mut state.send_buffer)?;
        let generation = shared.links[link].generation.load(Ordering::Acquire);
        let result = shared.send_bytes(link, &state.send_buffer, 1);
        stats::add(&self.counts.bytes_sent, state.send_buffer.len() as u64);
        state.send_buffer.clear();
        result?;
        Ok(Pending {
            node: shared.links[link].node,
            commit,
            generation,
        })
    }

    /// Sends a scan signal; its replies go to the scan's inbox.
    pub(crate) fn send_scan_signal(
        &self,
        link: usize,
        tx_id: u64,
        scan_id: u32,
        signal: Signal,
    ) -> Result<()> {
        let shared = self.shared();
        let mut state = self.state.borrow_mut();
        let state = &mut *state;
        encode_frames(std::slice::from_ref(&signal), &mut state.send_buffer)?;
        let generation = shared.links[link].generation.load(Ordering::Acquire);
        let result = shared.send_bytes(link, &state.send_buffer, 1);
        stats::add(&self.counts.bytes_sent, state.send_buffer.len() as u64);
        state.send_buffer.clear();
        result?;
        shared
            .counters
            .scan_reqs_sent
            .fetch_add(1, Ordering::Relaxed);
        state
            .scans
            .entry((tx_id, scan_id))
            .or_insert_with(|| ScanInbox {
                node: shared.links[link].node,
                generation,
                batches: VecDeque::new(),
            });
        Ok(())
    }

    /// Moves the mailbox's events into the session's state.
    pub(crate) fn pump(&self) {
        let mut state = self.state.borrow_mut();
        let state = &mut *state;
        self.mailbox.drain(&mut state.events);
        let mut events = std::mem::take(&mut state.events);
        for event in events.drain(..) {
            if let Event::Signal(signal) = &event {
                let bytes = match &signal.body {
                    SignalBody::TcKeyConf { results, .. } => results.len(),
                    SignalBody::TcScanConf { rows, .. } => rows.len(),
                    _ => 0,
                };
                stats::add(&self.counts.bytes_received, bytes as u64);
            }
            handle(state, event);
        }
        state.events = events;
    }

    /// Takes the reply of `key` if it came.
    pub(crate) fn take_reply(&self, key: ReqKey) -> Option<Result<SignalBody>> {
        self.state.borrow_mut().done.remove(&key)
    }

    /// Waits for the reply of `key`; after `request_timeout` the request
    /// is forgotten and fails with 4012 (unknown result).
    pub(crate) fn wait_reply(&self, key: ReqKey) -> Result<SignalBody> {
        let timeout = self.shared().options.request_timeout;
        let started = Instant::now();
        let deadline = started + timeout;
        let counts = &self.counts;
        stats::bump(match key {
            ReqKey::Tx(_) => &counts.wait_exec_complete,
            ReqKey::Dict(_) | ReqKey::Gci(_) => &counts.wait_meta_request,
        });
        loop {
            self.pump();
            if let Some(reply) = self.take_reply(key) {
                stats::add(&counts.wait_nanos, started.elapsed().as_nanos() as u64);
                return reply;
            }
            let now = Instant::now();
            if now >= deadline {
                self.state.borrow_mut().pending.remove(&key);
                return Err(Error::with_context(
                    proto::error::REQUEST_TIMEOUT,
                    format!("{key:?}: no answer within {} ms", timeout.as_millis()),
                ));
            }
            receiver::wait(self.shared(), &self.mailbox, deadline - now);
        }
    }

    /// Waits until the scan has a reply buffered (or the timeout).
    pub(crate) fn wait_scan(&self, tx_id: u64, scan_id: u32) -> Result<ScanBatch> {
        let timeout = self.shared().options.request_timeout;
        let started = Instant::now();
        let deadline = started + timeout;
        stats::bump(&self.counts.wait_scan_result);
        loop {
            self.pump();
            {
                let mut state = self.state.borrow_mut();
                let Some(inbox) = state.scans.get_mut(&(tx_id, scan_id)) else {
                    return Err(Error::usage(format!(
                        "scan {scan_id} of transaction {tx_id:#x} is not open"
                    )));
                };
                if let Some(batch) = inbox.batches.pop_front() {
                    let waited = started.elapsed().as_nanos() as u64;
                    stats::add(&self.counts.wait_nanos, waited);
                    return batch;
                }
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(Error::with_context(
                    proto::error::REQUEST_TIMEOUT,
                    format!("scan {scan_id}: no rows within {} ms", timeout.as_millis()),
                ));
            }
            receiver::wait(self.shared(), &self.mailbox, deadline - now);
        }
    }

    /// Whether a reply of the scan is buffered (after taking the mailbox's events).
    pub(crate) fn scan_has_batch(&self, tx_id: u64, scan_id: u32) -> bool {
        self.pump();
        self.state
            .borrow()
            .scans
            .get(&(tx_id, scan_id))
            .is_some_and(|s| !s.batches.is_empty())
    }

    pub(crate) fn close_scan_inbox(&self, tx_id: u64, scan_id: u32) {
        self.state.borrow_mut().scans.remove(&(tx_id, scan_id));
    }

    pub(crate) fn next_request_id(&self) -> u32 {
        let mut state = self.state.borrow_mut();
        state.next_request_id = state.next_request_id.wrapping_add(1);
        state.next_request_id
    }

    /// A started data node to send to, round-robin. With none, nothing is
    /// sent: a temporary 711 while some are connected (starting, or
    /// stopping on purpose during a rolling restart, for a moment the only
    /// ones), else 4009.
    fn live_link(&self) -> Result<usize> {
        let shared = self.shared();
        shared.any_live_node().ok_or_else(|| {
            let connected = shared
                .links
                .iter()
                .filter(|l| l.connected.load(Ordering::Acquire))
                .count();
            if connected > 0 {
                Error::with_context(
                    proto::error::NOT_STARTED,
                    format!(
                        "no data node is started ({connected} connected are starting or stopping); \
                         nothing was sent"
                    ),
                )
            } else {
                Error::with_context(
                    proto::error::CLUSTER_FAILURE,
                    "no data node is connected and started",
                )
            }
        })
    }

    fn dictionary_request(&self, body: impl FnOnce(u32) -> SignalBody) -> Result<SignalBody> {
        let link = self.live_link()?;
        let request_id = self.next_request_id();
        let node = self.shared().links[link].node;
        let signal = Signal {
            receiver: BlockRef::new(node, BlockNumber::DICTIONARY, 0),
            sender: self.own_ref(),
            body: body(request_id),
        };
        self.send_request(link, ReqKey::Dict(request_id), false, &signal)?;
        self.wait_reply(ReqKey::Dict(request_id))
    }

    // ---- schema ----

    /// Creates a table. `partitions` 0 means the cluster's default (one
    /// partition per LDM instance of every data node); `read_backup` and
    /// `fully_replicated` are its options (see the crate doc). Returns its
    /// id.
    pub fn create_table(&self, def: &TableDef) -> Result<u32> {
        let mut def = def.clone();
        if def.partitions == 0 {
            def.partitions = self.shared().placement.default_partitions();
        }
        let name = def.name.clone();
        let bytes = def.to_bytes();
        match self.dictionary_request(|request_id| SignalBody::DictCreateTableReq {
            request_id,
            table: bytes,
        })? {
            SignalBody::DictCreateTableConf { table_id, .. } => {
                self.forget_table(&name);
                Ok(table_id)
            }
            SignalBody::DictCreateTableRef { code, message, .. } => {
                Err(schema_error(code, &name, message))
            }
            other => Err(unexpected(&other)),
        }
    }

    /// Drops a table with its indexes.
    pub fn drop_table(&self, name: &str) -> Result<()> {
        let table = self.fetch_table(name)?;
        self.forget_table(name);
        let table_id = table.id();
        match self.dictionary_request(|request_id| SignalBody::DictDropTableReq {
            request_id,
            table_id,
        })? {
            SignalBody::DictDropTableConf { .. } => Ok(()),
            SignalBody::DictDropTableRef { code, message, .. } => {
                Err(schema_error(code, name, message))
            }
            other => Err(unexpected(&other)),
        }
    }

    /// Adds an index to a table (an alter of the table; the dictionary
    /// gives the index its id).
    pub fn create_index(
        &self,
        table: &str,
        name: &str,
        columns: &[&str],
        kind: IndexKind,
    ) -> Result<()> {
        let current = self.fetch_table(table)?;
        let positions = columns
            .iter()
            .map(|c| current.require_column(c))
            .collect::<Result<Vec<_>>>()?;
        let mut def = current.def().clone();
        def.indexes.push(IndexDef {
            name: name.to_owned(),
            id: 0,
            columns: positions,
            kind,
        });
        self.alter_table(def)
    }

    /// Drops an index of a table.
    pub fn drop_index(&self, table: &str, name: &str) -> Result<()> {
        let current = self.fetch_table(table)?;
        let mut def = current.def().clone();
        let before = def.indexes.len();
        def.indexes.retain(|i| !i.name.eq_ignore_ascii_case(name));
        if def.indexes.len() == before {
            return Err(Error::new(
                proto::error::NO_SUCH_INDEX,
                format!("table `{table}` has no index `{name}`"),
            ));
        }
        self.alter_table(def)
    }

    /// Alters a table: `def` is its new definition, made from the current
    /// one (same id and version; see the dictionary's alter rules: a new
    /// name, columns renamed or added at the end, indexes added or dropped,
    /// `sql_meta` changed).
    pub fn alter_table(&self, def: TableDef) -> Result<()> {
        let name = def.name.clone();
        let table_id = def.id;
        let bytes = def.to_bytes();
        self.forget_table(&name);
        // A rename leaves the old name cached: forget the table by id too.
        self.shared().tables.remove_id(table_id);
        let reply = self.dictionary_request(|request_id| SignalBody::DictAlterTableReq {
            request_id,
            table_id,
            table: bytes,
        })?;
        match reply {
            SignalBody::DictAlterTableConf { .. } => Ok(()),
            SignalBody::DictAlterTableRef { code, message, .. } => {
                Err(schema_error(code, &name, message))
            }
            other => Err(unexpected(&other)),
        }
    }

    /// The names of the cluster's base tables (hidden unique-index and
    /// BLOB parts tables left out), by ascending id, as the data node
    /// asked knows them: asked for in parts (`DictListTablesReq`).
    pub fn list_tables(&self) -> Result<Vec<String>> {
        let mut names = Vec::new();
        let mut after_id = 0;
        loop {
            let reply = self.dictionary_request(|request_id| SignalBody::DictListTablesReq {
                request_id,
                after_id,
            })?;
            let SignalBody::DictListTablesConf { tables, last, .. } = reply else {
                return Err(unexpected(&reply));
            };
            if tables.is_empty() && !last {
                return Err(Error::new(
                    proto::error::MALFORMED_REQUEST,
                    format!("table list: an empty part after id {after_id} that is not the last"),
                ));
            }
            for table in tables {
                // Ids grow, so a part never repeats one; a node that sent
                // otherwise would make the loop go on forever.
                if table.id <= after_id {
                    return Err(Error::new(
                        proto::error::MALFORMED_REQUEST,
                        format!("table list: id {} after {after_id}", table.id),
                    ));
                }
                after_id = table.id;
                if !table.name.starts_with('$') {
                    names.push(table.name);
                }
            }
            if last {
                return Ok(names);
            }
        }
    }

    /// A table's definition: from the cache, or fetched from the dictionary.
    pub fn table(&self, name: &str) -> Result<Arc<Table>> {
        if let Some(table) = self.cached(name) {
            return Ok(table);
        }
        self.fetch_table(name)
    }

    fn cached(&self, name: &str) -> Option<Arc<Table>> {
        self.shared().tables.get(name)
    }

    /// A number that changes whenever a cached table definition is dropped
    /// or replaced. Read it before [`Session::table`]: while it stays the
    /// same, that call's answer for the name still stands, so a caller may
    /// keep it without asking again (a prepared statement's plan does).
    pub fn tables_generation(&self) -> u64 {
        self.shared().tables.generation()
    }

    /// The data node behind `link` answered that it is stopping (280):
    /// it counts as not started, so hints and round-robin skip it, until
    /// its registration says started again (after its restart).
    pub(crate) fn node_stopping(&self, link: usize) {
        let link = &self.shared().links[link];
        if link
            .started
            .swap(false, std::sync::atomic::Ordering::AcqRel)
        {
            tracing::info!(node = %link.node, "data node is stopping: new transactions go elsewhere");
        }
    }

    /// Drops the cached definition (after 241/723), so the next
    /// [`Session::table`] fetches it again.
    pub fn forget_table(&self, name: &str) {
        self.shared().tables.remove(name);
    }

    fn fetch_table(&self, name: &str) -> Result<Arc<Table>> {
        let table = Arc::new(self.fetch(0, name)?);
        self.shared().tables.insert(name, Arc::clone(&table));
        Ok(table)
    }

    /// Table `id`'s definition as the dictionary has it now, whatever its
    /// name (not cached: the cache is by name). The change stream decodes
    /// a table renamed since by it.
    pub(crate) fn table_by_id(&self, id: u32) -> Result<Arc<Table>> {
        Ok(Arc::new(self.fetch(id, &format!("#{id}"))?))
    }

    /// Table `table_id` (0: the table named `name`) from the dictionary;
    /// `name` also names it in errors.
    fn fetch(&self, table_id: u32, name: &str) -> Result<Table> {
        let name_owned = if table_id == 0 {
            name.to_owned()
        } else {
            String::new()
        };
        let reply = self.dictionary_request(|request_id| SignalBody::DictGetTableReq {
            request_id,
            table_id,
            name: name_owned,
        })?;
        let group = match reply {
            SignalBody::DictGetTableConf { group, .. } => group,
            SignalBody::DictGetTableRef { code, message, .. } => {
                return Err(schema_error(code, name, message))
            }
            other => return Err(unexpected(&other)),
        };
        let Some(base) = group.tables.first() else {
            return Err(Error::new(
                proto::error::NO_SUCH_TABLE,
                format!("table `{name}`: empty definition"),
            ));
        };
        let decode = |bytes: &[u8]| {
            TableDef::decode(bytes).map_err(|e| {
                Error::new(
                    proto::error::MALFORMED_REQUEST,
                    format!("table `{name}`: bad definition from the dictionary: {e}"),
                )
            })
        };
        let def = decode(base)?;
        let table = if def.columns.iter().any(|c| c.ty.is_blob()) {
            // The parts tables of its BLOB/TEXT columns follow in the group.
            let hidden = group.tables[1..]
                .iter()
                .map(|bytes| decode(bytes))
                .collect::<Result<Vec<_>>>()?;
            Table::with_hidden(def, hidden)?
        } else {
            Table::new(def)
        };
        Ok(table)
    }

    // ---- transactions ----

    /// Starts a transaction on a live data node, round-robin.
    pub fn begin(&self) -> Result<Transaction<'_>> {
        let link = self.live_link()?;
        Ok(Transaction::new(self, link))
    }

    /// Starts a transaction on the node holding the primary replica of
    /// `key`'s partition (the transaction hint). `key` gives the primary
    /// key's values in key order (the distribution key's are enough).
    /// Skips replicas whose connection is closed (the next live replica is
    /// the primary the data nodes use then), and any live node when none is.
    pub fn begin_with_hint(&self, table: &Table, key: &[Value]) -> Result<Transaction<'_>> {
        let shared = self.shared();
        let partition = {
            let mut state = self.state.borrow_mut();
            table.partition_of_key(key, &mut state.key_scratch)?
        };
        // The primary, or the first live replica while its node is down
        // (the connection closed): where the data nodes route it then.
        let is_live = |node| {
            shared
                .link_index(node)
                .is_some_and(|link| shared.links[link].is_live())
        };
        let link = match crate::routing::live_primary_of(&shared.placement, partition, is_live)
            .and_then(|node| shared.link_index(node))
        {
            Some(link) => link,
            None => self.live_link()?,
        };
        Ok(Transaction::new(self, link))
    }

    /// Starts a transaction whose first work is a committed read of `key`
    /// in `table`. For a `READ_BACKUP` or fully replicated table any
    /// replica serves that read where it runs (its TC reads its own copy),
    /// so the transaction goes to one of the key partition's live replicas
    /// (for a fully replicated table: any live data node), a different one
    /// on each call, starting from one that depends on this session: the
    /// reads of one hot partition use every replica, not only the primary.
    /// Other tables: as [`Session::begin_with_hint`]. Writes and locking
    /// reads in such a transaction still run on the primary: they cost a
    /// hop more than with the plain hint.
    pub fn begin_with_read_hint(&self, table: &Table, key: &[Value]) -> Result<Transaction<'_>> {
        let def = table.def();
        if !def.read_backup && !def.fully_replicated {
            return self.begin_with_hint(table, key);
        }
        let shared = self.shared();
        let (partition, turn) = {
            let mut state = self.state.borrow_mut();
            let partition = table.partition_of_key(key, &mut state.key_scratch)?;
            let turn = state.read_hint_turn;
            state.read_hint_turn = turn.wrapping_add(1);
            (partition, turn)
        };
        // The session's own start, so that sessions spread from their first read.
        let turn = turn
            .wrapping_add(u32::from(self.mailbox.instance))
            .wrapping_add(u32::from(shared.me.get()));
        let is_live = |node| {
            shared
                .link_index(node)
                .is_some_and(|link| shared.links[link].is_live())
        };
        let link = match crate::routing::read_replica_of(
            &shared.placement,
            partition,
            def.fully_replicated,
            turn,
            is_live,
        )
        .and_then(|node| shared.link_index(node))
        {
            Some(link) => link,
            None => self.live_link()?,
        };
        Ok(Transaction::new(self, link))
    }

    /// Waits until a commit in `epoch` (its [`Outcome::epoch`](crate::Outcome))
    /// is durable on every live data node: until its global checkpoint,
    /// [`Epoch::hi`], is. Returns the durable GCI (at least that).
    ///
    /// The epoch names the cluster incarnation of its commit; a system
    /// restart since then (every data node went down) ends the wait at
    /// once: durable when the restart restored the commit's GCI, else the
    /// definite error 9006 (`COMMIT_LOST_BY_RESTART`: the commit is not in
    /// the database), or 9007 (`DURABILITY_UNKNOWN`, an unknown result:
    /// the cluster restarted more than once since; read the row). A
    /// wait on a data node that is still starting answers the temporary
    /// 711 (`NOT_STARTED`): ask again; so does a wait whose data node
    /// failed (286). While no data node is live it answers 4009
    /// (`CLUSTER_FAILURE`); ask again once the cluster is back.
    pub fn wait_durable(&self, epoch: Epoch) -> Result<u32> {
        let gci = epoch.hi();
        let link = self.live_link()?;
        let node = self.shared().links[link].node;
        let signal = Signal {
            receiver: BlockRef::new(node, BlockNumber::TRANSACTION_COORDINATOR, 0),
            sender: self.own_ref(),
            body: SignalBody::TcWaitGciReq {
                gci,
                incarnation: epoch.incarnation(),
            },
        };
        self.send_request(link, ReqKey::Gci(gci), false, &signal)?;
        match self.wait_reply(ReqKey::Gci(gci))? {
            SignalBody::TcWaitGciConf { durable_gci, .. } => Ok(durable_gci),
            SignalBody::TcWaitGciRef { code, message, .. } => Err(Error::with_context(
                code,
                format!("wait_durable(epoch {epoch}): {message}"),
            )),
            other => Err(unexpected(&other)),
        }
    }

    // ---- asynchronous transactions ----

    /// Prepares `tx`'s operations for [`Session::send`], ending with
    /// `mode` (Commit or Rollback: an asynchronous transaction runs to its
    /// end). `callback` runs in [`Session::poll`] with the outcome.
    pub fn prepare(
        &self,
        tx: Transaction<'_>,
        mode: ExecMode,
        callback: impl FnOnce(Result<Outcome>) + Send + 'static,
    ) -> Result<()> {
        self.prepare_notify(tx, mode, || Notify::Callback(Box::new(callback)))
    }

    /// Like [`Session::prepare`] without a callback (nothing boxed): when
    /// [`Session::poll`] completes the transaction, its outcome waits
    /// under `tag` for [`Session::take_completed`]. Outcomes not yet taken
    /// count against [`IN_FLIGHT_MAX`].
    pub fn prepare_tagged(&self, tx: Transaction<'_>, mode: ExecMode, tag: u64) -> Result<()> {
        self.prepare_notify(tx, mode, || Notify::Tag(tag))
    }

    fn prepare_notify(
        &self,
        tx: Transaction<'_>,
        mode: ExecMode,
        notify: impl FnOnce() -> Notify,
    ) -> Result<()> {
        if mode == ExecMode::NoCommit {
            return Err(Error::usage(
                "an asynchronous transaction ends with Commit or Rollback, not NoCommit",
            ));
        }
        let held = {
            let state = self.state.borrow();
            state.held() + state.completed.len()
        };
        if held >= IN_FLIGHT_MAX {
            return Err(Error::new(
                proto::error::OUT_OF_TRANSACTIONS,
                format!(
                    "the session has {IN_FLIGHT_MAX} transactions prepared, in flight or completed \
                     and not taken: poll (and take_completed) first"
                ),
            ));
        }
        let (request, blob) = tx.into_first_request(mode)?;
        let mut state = self.state.borrow_mut();
        let slot = state.slots.put(InFlight {
            request,
            notify: notify(),
            blob,
            reply: None,
            sent: None,
        });
        state.prepared.push(slot);
        Ok(())
    }

    /// Sends every prepared transaction, one write per data node. Returns
    /// how many were sent; those that could not be sent complete with
    /// their error in the next [`Session::poll`].
    pub fn send(&self) -> Result<usize> {
        send_all(std::slice::from_ref(&self))
    }

    /// Transactions prepared or in flight.
    pub fn in_flight(&self) -> usize {
        self.state.borrow().held()
    }

    /// Receives until at least `min_completed` sent transactions completed
    /// (or `timeout`), runs their callbacks (a tagged transaction's
    /// outcome is kept for [`Session::take_completed`]), and returns how
    /// many completed.
    pub fn poll(&self, min_completed: usize, timeout: Duration) -> usize {
        let started = Instant::now();
        let deadline = started + timeout;
        let mut completed = 0;
        // Whether this poll blocked (one `wait_exec_complete`, as NDB's).
        let mut waited = false;
        loop {
            self.pump();
            // One at a time, straight from the queue, read in its slot.
            while let Some(slot) = self.next_ready() {
                let (reply, notify, blob, answer) = {
                    let mut state = self.state.borrow_mut();
                    let flight = state.slots.get_mut(slot);
                    let reply = flight
                        .reply
                        .take()
                        .expect("a transaction on the completion queue has its end filed");
                    let notify = std::mem::replace(&mut flight.notify, Notify::Tag(0));
                    let blob = flight.blob.take();
                    let request = &mut flight.request;
                    let answer = blob.is_none().then(|| request.answer());
                    (reply, notify, blob, answer)
                };
                let outcome = match (blob, answer) {
                    (Some(mut exec), _) => {
                        self.state.borrow_mut().slots.free(slot);
                        match exec.on_reply(self, reply) {
                            Step::Send(request) => {
                                self.send_next(request, notify, exec);
                                continue;
                            }
                            Step::Done(outcome) => outcome,
                        }
                    }
                    (None, Some(answer)) => {
                        let outcome = answer.complete(self, reply);
                        let mut state = self.state.borrow_mut();
                        let state = &mut *state;
                        let request = &mut state.slots.get_mut(slot).request;
                        request.metas = answer.metas;
                        state.spares.put_request(request);
                        state.slots.free(slot);
                        outcome
                    }
                    (None, None) => unreachable!("a request without blob work has its answer"),
                };
                completed += 1;
                // Counted as a synchronous execute's end is (`settle`).
                match &outcome {
                    Ok(o) if o.committed => stats::bump(&self.counts.trans_commit),
                    Ok(o) if !o.rolled_back => {}
                    _ => stats::bump(&self.counts.trans_abort),
                }
                match notify {
                    Notify::Callback(callback) => callback(outcome),
                    Notify::Tag(tag) => self.state.borrow_mut().completed.push((tag, outcome)),
                }
            }
            let now = Instant::now();
            let in_flight = {
                let state = self.state.borrow();
                state.in_flight.len() + state.ready.len()
            };
            if completed >= min_completed || in_flight == 0 || now >= deadline {
                if now >= deadline && completed < min_completed {
                    self.expire_in_flight();
                }
                if waited {
                    let nanos = now.duration_since(started).as_nanos() as u64;
                    stats::add(&self.counts.wait_nanos, nanos);
                }
                return completed;
            }
            if !waited {
                waited = true;
                stats::bump(&self.counts.wait_exec_complete);
            }
            receiver::wait(self.shared(), &self.mailbox, deadline - now);
        }
    }

    /// The slot of the next transaction on the completion queue.
    fn next_ready(&self) -> Option<u32> {
        self.state.borrow_mut().ready.pop_front()
    }

    /// Moves the outcomes of tagged transactions that [`Session::poll`]
    /// completed into `out` (in completion order); returns how many.
    pub fn take_completed(&self, out: &mut Vec<(u64, Result<Outcome>)>) -> usize {
        let mut state = self.state.borrow_mut();
        let count = state.completed.len();
        if out.is_empty() {
            // Swapped, not moved one by one: outcomes are some hundred bytes.
            std::mem::swap(out, &mut state.completed);
        } else {
            out.append(&mut state.completed);
        }
        count
    }

    /// Sends the next request of an asynchronous transaction with blob
    /// work; a failure to send completes it in the next poll.
    fn send_next(&self, request: TxRequest, notify: Notify, exec: Box<BlobExec>) {
        let sent = self.send_signal(request.link, request.commit, &request.signal);
        let mut state = self.state.borrow_mut();
        let tx_id = request.tx_id;
        let slot = state.slots.put(InFlight {
            request,
            notify,
            blob: Some(exec),
            reply: None,
            sent: None,
        });
        match sent {
            Ok(pending) => {
                state.slots.get_mut(slot).sent = Some(pending);
                state.in_flight.insert(tx_id, slot);
                stats::bump(&self.counts.exec);
                self.shared()
                    .counters
                    .tc_key_reqs_sent
                    .fetch_add(1, Ordering::Relaxed);
            }
            Err(error) => state.file_in_slot(slot, Err(error)),
        }
    }

    /// Requests older than `request_timeout` fail with 4012.
    fn expire_in_flight(&self) {
        let timeout = self.shared().options.request_timeout;
        let mut state = self.state.borrow_mut();
        let state = &mut *state;
        let now = Instant::now();
        // Those in flight are the sent and unanswered ones.
        let expired: Vec<u64> = state
            .in_flight
            .iter()
            .filter(|(_, slot)| {
                now.duration_since(state.slots.get(**slot).request.sent_at) > timeout
            })
            .map(|(id, _)| *id)
            .collect();
        for id in expired {
            let error = Error::with_context(
                proto::error::REQUEST_TIMEOUT,
                format!("transaction {id:#x}"),
            );
            state.file_done(ReqKey::Tx(id), Err(error));
        }
    }

    /// Registers `waker` for the next event; false if events wait already.
    pub(crate) fn set_waker(&self, waker: &std::task::Waker) -> bool {
        self.mailbox.set_waker(waker)
    }
}

/// Files one event into the session's state.
fn handle(state: &mut State, event: Event) {
    match event {
        Event::Signal(signal) => {
            let key = match &signal.body {
                SignalBody::TcKeyConf { tx_id, .. } | SignalBody::TcKeyRef { tx_id, .. } => {
                    ReqKey::Tx(*tx_id)
                }
                SignalBody::TcWaitGciConf { gci, .. } | SignalBody::TcWaitGciRef { gci, .. } => {
                    ReqKey::Gci(*gci)
                }
                SignalBody::DictCreateTableConf { request_id, .. }
                | SignalBody::DictCreateTableRef { request_id, .. }
                | SignalBody::DictDropTableConf { request_id, .. }
                | SignalBody::DictDropTableRef { request_id, .. }
                | SignalBody::DictAlterTableConf { request_id, .. }
                | SignalBody::DictAlterTableRef { request_id, .. }
                | SignalBody::DictGetTableConf { request_id, .. }
                | SignalBody::DictGetTableRef { request_id, .. }
                | SignalBody::DictListTablesConf { request_id, .. }
                | SignalBody::DbinfoScanConf { request_id, .. }
                | SignalBody::DbinfoScanRef { request_id, .. }
                | SignalBody::BackupFragConf { request_id, .. }
                | SignalBody::BackupFragRef { request_id, .. }
                | SignalBody::BackupLogConf { request_id, .. }
                | SignalBody::BackupLogRef { request_id, .. } => ReqKey::Dict(*request_id),
                SignalBody::TcScanConf { tx_id, scan_id, .. }
                | SignalBody::TcScanRef { tx_id, scan_id, .. } => {
                    let id = (*tx_id, *scan_id);
                    if let Some(inbox) = state.scans.get_mut(&id) {
                        inbox.batches.push_back(match signal.body {
                            SignalBody::TcScanConf {
                                rows,
                                done,
                                released,
                                ..
                            } => Ok(ScanBatch {
                                rows,
                                done,
                                released,
                            }),
                            SignalBody::TcScanRef { code, message, .. } => {
                                Err(Error::new(code, message))
                            }
                            _ => unreachable!("matched above"),
                        });
                    }
                    return;
                }
                other => {
                    tracing::debug!(
                        "session: unexpected {} from {}",
                        other.name(),
                        signal.sender
                    );
                    return;
                }
            };
            // An asynchronous transaction's reply goes to its slot; a
            // synchronous request's to `done`.
            if let ReqKey::Tx(id) = key {
                if let Some(slot) = state.in_flight.remove(&id) {
                    state.file_in_slot(slot, Ok(signal.body));
                    return;
                }
            }
            if state.pending.remove(&key).is_some() {
                state.file_done(key, Ok(signal.body));
            }
        }
        Event::NodeDown(node, closed) => {
            let lost_in_flight: Vec<u64> = state
                .in_flight
                .iter()
                .filter(|(_, slot)| {
                    state
                        .slots
                        .get(**slot)
                        .sent
                        .as_ref()
                        .is_some_and(|p| p.node == node && p.generation <= closed)
                })
                .map(|(id, _)| *id)
                .collect();
            for id in lost_in_flight {
                let slot = state.in_flight.remove(&id).expect("listed above");
                let commit = state
                    .slots
                    .get(slot)
                    .sent
                    .as_ref()
                    .is_some_and(|p| p.commit);
                let error = lost_request(node, ReqKey::Tx(id), commit);
                state.file_in_slot(slot, Err(error));
            }
            let lost: Vec<ReqKey> = state
                .pending
                .iter()
                .filter(|(_, p)| p.node == node && p.generation <= closed)
                .map(|(k, _)| *k)
                .collect();
            for key in lost {
                let pending = state.pending.remove(&key).expect("listed above");
                let error = lost_request(node, key, pending.commit);
                state.file_done(key, Err(error));
            }
            for inbox in state
                .scans
                .values_mut()
                .filter(|s| s.node == node && s.generation <= closed)
            {
                inbox.batches.push_back(Err(Error::with_context(
                    proto::error::NODE_FAILURE_ABORTED,
                    format!("data node {node} was lost during the scan"),
                )));
            }
        }
    }
}

/// The error of request `key` (`commit`: it asked to commit) lost with
/// data node `node`'s connection, by NDB's rules (see the module doc).
fn lost_request(node: NodeId, key: ReqKey, commit: bool) -> Error {
    let code = match key {
        ReqKey::Tx(_) if commit => proto::error::NODE_FAILURE,
        ReqKey::Dict(_) => proto::error::NODE_FAILURE,
        _ => proto::error::NODE_FAILURE_ABORTED,
    };
    Error::with_context(
        code,
        format!("data node {node} was lost with the request ({key:?})"),
    )
}

fn schema_error(code: u32, table: &str, message: String) -> Error {
    let message = if message.is_empty() {
        format!("table `{table}`: {}", proto::error::message(code))
    } else if message.contains(table) {
        message
    } else {
        format!("table `{table}`: {message}")
    };
    Error::new(code, message)
}

fn unexpected(body: &SignalBody) -> Error {
    Error::new(
        proto::error::MALFORMED_REQUEST,
        format!("unexpected answer {}", body.name()),
    )
}

pub(crate) fn tc_ref(shared: &Shared, link: usize, tx_id: u64) -> BlockRef {
    let l = &shared.links[link];
    BlockRef::new(
        l.node,
        BlockNumber::TRANSACTION_COORDINATOR,
        crate::routing::tc_instance(tx_id, l.tc_instances),
    )
}

/// Flags of a key request.
pub(crate) fn request_flags(started: bool, mode: ExecMode) -> u32 {
    let mut flags = if started { 0 } else { tc_flags::START };
    match mode {
        ExecMode::NoCommit => {}
        ExecMode::Commit => flags |= tc_flags::COMMIT,
        ExecMode::Rollback => flags |= tc_flags::ROLLBACK,
    }
    flags
}

/// Sends the prepared transactions of several sessions (a SQL node's
/// worker sends the key reads of the connections it serves together):
/// one write per cluster connection and data node, each session's
/// requests in their own frames (so that each counts its own bytes), in
/// preparation order within a session. Returns how many were sent; those
/// that could not be sent complete with their error in their session's
/// next [`Session::poll`]. The sessions must be distinct.
pub fn send_all(sessions: &[&Session]) -> Result<usize> {
    // A session twice would send its requests twice.
    debug_assert!(
        sessions
            .iter()
            .enumerate()
            .all(|(i, s)| sessions[..i].iter().all(|t| !std::ptr::eq(*s, *t))),
        "send_all of a session twice"
    );
    let mut sent = 0;
    for (at, lead) in sessions.iter().enumerate() {
        let shared = lead.shared();
        loop {
            // The next data node the lead has requests for: every later
            // session's requests to it over the same cluster connection
            // go in the same write (earlier sessions have sent theirs).
            let link = {
                let state = lead.state.borrow();
                match (state.prepared.first(), state.later.first()) {
                    (Some(&first), _) => state.slots.get(first).request.link,
                    (None, Some(later)) => later.link,
                    (None, None) => break,
                }
            };
            let mut buffer = std::mem::take(&mut lead.state.borrow_mut().send_buffer);
            buffer.clear();
            let generation = shared.links[link].generation.load(Ordering::Acquire);
            let mut count = 0;
            let group = || {
                sessions[at..]
                    .iter()
                    .filter(|s| std::ptr::eq(s.shared(), shared))
            };
            for session in group() {
                let mut state = session.state.borrow_mut();
                let state = &mut *state;
                let before = buffer.len();
                let slots = &state.slots;
                let requests = state
                    .prepared
                    .iter()
                    .map(|&slot| &slots.get(slot).request)
                    .filter(|request| request.link == link);
                let n = requests.clone().count();
                if n > 0 {
                    match encode_frames(requests.map(|request| &request.signal), &mut buffer) {
                        Ok(()) => count += n,
                        Err(error) => {
                            // This session's requests fail; the others' go.
                            buffer.truncate(before);
                            take_link(state, link, |state, slot| {
                                state.file_in_slot(slot, Err(error.clone()))
                            });
                        }
                    }
                }
                // Requests of synchronous executes, encoded already.
                for later in state.later.iter().filter(|later| later.link == link) {
                    buffer.extend_from_slice(&state.later_bytes[later.bytes.clone()]);
                    count += 1;
                }
                stats::add(&session.counts.bytes_sent, (buffer.len() - before) as u64);
            }
            let result = if count > 0 {
                shared.send_bytes(link, &buffer, count)
            } else {
                Ok(())
            };
            let node = shared.links[link].node;
            for session in group() {
                let mut state = session.state.borrow_mut();
                let mut filed = 0;
                take_link(&mut state, link, |state, slot| match &result {
                    Ok(()) => {
                        let flight = state.slots.get_mut(slot);
                        let (tx_id, commit) = (flight.request.tx_id, flight.request.commit);
                        flight.sent = Some(Pending {
                            node,
                            commit,
                            generation,
                        });
                        let previous = state.in_flight.insert(tx_id, slot);
                        assert!(
                            previous.is_none(),
                            "transaction {tx_id:#x} is in flight twice"
                        );
                        filed += 1;
                    }
                    Err(error) => state.file_in_slot(slot, Err(error.clone())),
                });
                let state = &mut *state;
                let mut later = std::mem::take(&mut state.later);
                later.retain(|later| {
                    if later.link != link {
                        return true;
                    }
                    match &result {
                        Ok(()) => {
                            let pending = Pending {
                                node,
                                commit: later.commit,
                                generation,
                            };
                            state.pending.insert(later.key, pending);
                            filed += 1;
                        }
                        Err(error) => {
                            let previous = state.done.insert(later.key, Err(error.clone()));
                            debug_assert!(previous.is_none(), "{:?} ended twice", later.key);
                        }
                    }
                    false
                });
                if later.is_empty() {
                    state.later_bytes.clear();
                }
                state.later = later;
                stats::add(&session.counts.exec, filed);
                sent += filed as usize;
            }
            if result.is_ok() {
                shared
                    .counters
                    .tc_key_reqs_sent
                    .fetch_add(count as u64, Ordering::Relaxed);
            }
            buffer.clear();
            lead.state.borrow_mut().send_buffer = buffer;
        }
    }
    Ok(sent)
}

/// Takes the prepared slots of requests to `link` off the prepared list
/// (the others keep their order), handing each to `file`.
fn take_link(state: &mut State, link: usize, mut file: impl FnMut(&mut State, u32)) {
    let mut prepared = std::mem::take(&mut state.prepared);
    prepared.retain(|&slot| {
        if state.slots.get(slot).request.link != link {
            return true;
        }
        file(state, slot);
        false
    });
    debug_assert!(state.prepared.is_empty(), "nothing prepares during a send");
    state.prepared = prepared;
}
