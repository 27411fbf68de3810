//! The dictionary (NDB: DBDICT): the cluster's schema — tables, their
//! columns, keys, indexes and hidden tables — identical on every data node,
//! changed only through schema transactions, and persisted on each node.
//!
//! One instance per data node, on the `main` thread. The protocol
//! (`docs/dictionary.md`):
//!
//! * **Master.** The dictionary master is the membership president; the
//!   block learns the view from `MembershipViewRep`, which membership sends
//!   to it on every installed view.
//! * **Requests.** Create, alter and drop requests may go to any node; a
//!   node that is not the master forwards them and relays the answer. The
//!   master queues them (at most [`SCHEMA_QUEUE_MAX`]; beyond that it
//!   refuses with a temporary error) and runs one schema transaction at a
//!   time. It checks a request when its transaction starts ([`plan`]):
//!   `TableDef::validate`, a unique name, ids, versions, the allowed kinds
//!   of alter.
//! * **Two phases.** The master sends `DictSchemaPrepare` to every member;
//!   each writes the change as *prepared* and answers. Then
//!   `DictSchemaCommit`; each installs the change durably and answers.
//!   Then the requester gets its Conf. A participant that cannot prepare
//!   makes the master abort. A member that fails leaves the view and is no
//!   longer waited for.
//! * **Master failure.** The new master asks every member where it stands
//!   (`DictTakeoverReq`). If any member committed the transaction in
//!   flight, the new master commits it on every member that prepared it;
//!   otherwise they abort it. Requests forwarded to the failed master are
//!   answered [`error::NODE_FAILURE`] (temporary; the outcome is whatever
//!   the takeover decided, which the requester can read back).
//! * **Joining.** A node that joins asks the master for its schema
//!   (`DictGetSchemaReq`); the master answers when no transaction is in
//!   flight and the node is in its view, and the node adopts the master's
//!   schema, logging each table added, changed or removed.
//! * **Disk.** Each node keeps one file per table group under
//!   `<data dir>/ndb_<node>_fs/schema/` ([`files`]), written atomically
//!   with a checksum, and loads them at start. A node that cannot make a
//!   commit durable shuts down and restarts: it takes the master's schema
//!   when it rejoins.
//! * **No fsync on `main`.** The files are written by the node's `io`
//!   threads ([`DiskQueue`]: one job at a time, in the order issued), and
//!   what depends on them waits for their `FsConf`: `DictSchemaPrepared`
//!   for the prepared file, installing a commit (memory, local blocks,
//!   `DictSchemaCommitted`) for the commit's files, the local blocks'
//!   schema for an adopted one. `main` also runs membership: a burst of
//!   schema changes whose fsyncs stalled it (several per change) kept
//!   heartbeats from going out, and a slow disk got a node declared
//!   failed in the middle of a `DROP DATABASE`.

pub mod files;
pub mod plan;
pub mod schema;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use ::schema::TableDef;
use kernel::{Block, Context, IoJob};
use proto::error;
use signal::{
    BlockNumber, BlockRef, DictTableGroup, DictTableName, MembershipView, NodeBitmask, NodeId,
    SchemaOp, SchemaTransState, Signal, SignalBody,
};
use storage::disk::Disk;

pub use files::{DictionaryError, LoadReport, SchemaStore, TransRecord};
pub use plan::{Plan, Refusal};
pub use schema::{Schema, TableGroup, FIRST_OBJECT_ID, TABLES_MAX};

/// Most requests the master queues behind the transaction in flight.
pub const SCHEMA_QUEUE_MAX: usize = 32;
/// Most requests a node has forwarded to the master and not yet answered.
pub const FORWARDED_REQUESTS_MAX: usize = 256;
/// Most bytes of table definitions in one `DictSchemaRep` part (a table
/// bigger than this goes alone), well inside a frame.
pub const SCHEMA_REP_PART_BYTES_MAX: usize = 256 << 10;
/// Most nodes waiting for the master's schema: one per possible node id.
const SCHEMA_WAITERS_MAX: usize = 255;

// The codes of its Ref signals are `proto::error`'s schema codes (BUSY,
// BAD_DEFINITION, ..., NODE_FAILURE for a master that failed holding the
// request), one definition shared with the API nodes that read them.

/// Whether a Ref with this code may succeed if sent again.
pub fn error_is_temporary(code: u32) -> bool {
    matches!(
        code,
        error::BUSY | error::NOT_STARTED | error::NODE_FAILURE | error::PREPARE_FAILED
    )
}

/// The dictionary's directory for a node: `<data dir>/ndb_<node>_fs/schema`.
pub fn schema_dir(data_dir: &Path, node: NodeId) -> PathBuf {
    data_dir.join(format!("ndb_{node}_fs")).join("schema")
}

/// What the block needs to know.
#[derive(Clone, Debug)]
pub struct DictionaryConfig {
    pub node: NodeId,
    /// Where the schema files live ([`schema_dir`]).
    pub schema_dir: PathBuf,
}

/// Partitions of a table created without a count when the node did not
/// say ([`Dictionary::with_local_blocks`] gives the cluster's).
pub const DEFAULT_PARTITIONS_UNCONFIGURED: u32 = 1;

/// A committed schema change that the local TC and LDM instances are
/// installing; the master hears `DictSchemaCommitted` once all have.
#[derive(Clone, Debug)]
struct ChangeInProgress {
    trans_id: u64,
    reply_to: BlockRef,
    /// Local blocks that have not answered yet.
    waiting: BTreeSet<BlockRef>,
}

/// The three kinds of request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RequestKind {
    Create,
    Drop,
    Alter,
}

/// A create, alter or drop request and where its answer goes.
#[derive(Clone, Debug)]
struct Request {
    from: BlockRef,
    request_id: u32,
    body: RequestBody,
}

#[derive(Clone, Debug)]
enum RequestBody {
    Create { table: Vec<u8> },
    Drop { table_id: u32 },
    Alter { table_id: u32, table: Vec<u8> },
}

impl RequestBody {
    fn kind(&self) -> RequestKind {
        match self {
            RequestBody::Create { .. } => RequestKind::Create,
            RequestBody::Drop { .. } => RequestKind::Drop,
            RequestBody::Alter { .. } => RequestKind::Alter,
        }
    }

    /// The request as a signal with `request_id`.
    fn to_signal(&self, request_id: u32) -> SignalBody {
        match self {
            RequestBody::Create { table } => SignalBody::DictCreateTableReq {
                request_id,
                table: table.clone(),
            },
            RequestBody::Drop { table_id } => SignalBody::DictDropTableReq {
                request_id,
                table_id: *table_id,
            },
            RequestBody::Alter { table_id, table } => SignalBody::DictAlterTableReq {
                request_id,
                table_id: *table_id,
                table: table.clone(),
            },
        }
    }
}

/// The answer to a request.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Answer {
    Done { table_id: u32, version: u32 },
    Refused { code: u32, message: String },
}

fn answer(ctx: &mut Context<'_>, to: BlockRef, kind: RequestKind, request_id: u32, answer: Answer) {
    let body = match (kind, answer) {
        (RequestKind::Create, Answer::Done { table_id, version }) => {
            SignalBody::DictCreateTableConf {
                request_id,
                table_id,
                version,
            }
        }
        (RequestKind::Alter, Answer::Done { table_id, version }) => {
            SignalBody::DictAlterTableConf {
                request_id,
                table_id,
                version,
            }
        }
        (RequestKind::Drop, Answer::Done { table_id, .. }) => SignalBody::DictDropTableConf {
            request_id,
            table_id,
        },
        (RequestKind::Create, Answer::Refused { code, message }) => {
            SignalBody::DictCreateTableRef {
                request_id,
                code,
                message,
            }
        }
        (RequestKind::Alter, Answer::Refused { code, message }) => SignalBody::DictAlterTableRef {
            request_id,
            code,
            message,
        },
        (RequestKind::Drop, Answer::Refused { code, message }) => SignalBody::DictDropTableRef {
            request_id,
            code,
            message,
        },
    };
    ctx.send(to, body);
}

/// A request this node forwarded to the master.
#[derive(Clone, Copy, Debug)]
struct Forwarded {
    client: BlockRef,
    request_id: u32,
    kind: RequestKind,
    master: NodeId,
}

/// The schema transaction the master runs.
#[derive(Debug)]
struct ActiveTrans {
    trans_id: u64,
    /// Who gets the answer; `None` for a transaction finished by takeover.
    requester: Option<(BlockRef, u32, RequestKind)>,
    /// The answer once committed.
    done: Answer,
    committing: bool,
    /// Members taking part (those that leave the view are dropped).
    participants: NodeBitmask,
    /// Participants not yet answered in the current phase.
    waiting: NodeBitmask,
}

/// A new master collecting where every member stands.
#[derive(Debug)]
struct Takeover {
    view_id: u32,
    waiting: NodeBitmask,
    reports: BTreeMap<NodeId, (u64, SchemaTransState)>,
}

/// What only the master keeps.
#[derive(Debug, Default)]
struct MasterState {
    queue: VecDeque<Request>,
    active: Option<ActiveTrans>,
    takeover: Option<Takeover>,
}

/// A transaction this node has prepared.
#[derive(Clone, Debug)]
struct Prepared {
    record: TransRecord,
    /// False on a node that has not yet taken the master's schema: it
    /// answers the transaction without storing it, because the master's
    /// schema, which it takes right after, has the transaction in it.
    durable: bool,
}

/// How far this node is with taking the master's schema.
#[derive(Clone, Debug, PartialEq)]
enum Sync {
    /// Not a member yet.
    NotMember,
    /// Asked `from`; the parts received so far.
    Requested {
        from: NodeId,
        parts: Vec<DictTableGroup>,
    },
    /// Holds the master's schema in memory; its files are being written
    /// (`DiskStep::Adopted` pending). Transactions prepared meanwhile are
    /// stored after it.
    Storing,
    /// Holds the master's schema (or is the master).
    Synced,
}

/// What waits for a dictionary file job, done at its `FsConf`.
#[derive(Debug)]
enum DiskStep {
    /// The prepared file of `trans_id`: answer the master.
    Prepared { trans_id: u64, reply_to: BlockRef },
    /// A commit's files: install it in memory and in the local blocks,
    /// then answer `reply_to` (the latest master that asked).
    Committed {
        record: TransRecord,
        reply_to: BlockRef,
    },
    /// An aborted transaction's prepared file removed.
    Cleared { trans_id: u64 },
    /// The master's schema stored: now synced.
    Adopted { report: SyncReport },
}

/// The dictionary's file jobs: run by an `io` thread one at a time, each
/// issued after the previous one's `FsConf` (jobs of one block may
/// otherwise finish in any order, and these rewrite the same files).
#[derive(Default)]
struct DiskQueue {
    in_flight: Option<(u64, DiskStep)>,
    waiting: VecDeque<(DiskStep, IoJob)>,
    next_request: u64,
}

impl DiskQueue {
    fn steps(&self) -> impl Iterator<Item = &DiskStep> {
        self.in_flight
            .iter()
            .map(|(_, step)| step)
            .chain(self.waiting.iter().map(|(step, _)| step))
    }

    fn steps_mut(&mut self) -> impl Iterator<Item = &mut DiskStep> {
        self.in_flight
            .iter_mut()
            .map(|(_, step)| step)
            .chain(self.waiting.iter_mut().map(|(step, _)| step))
    }
}

/// What a node changed when it took the master's schema.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SyncReport {
    pub from: Option<NodeId>,
    pub added: Vec<String>,
    pub changed: Vec<String>,
    pub removed: Vec<String>,
}

/// The dictionary block of one data node.
pub struct Dictionary {
    config: DictionaryConfig,
    /// Shared with the `io` thread running the job in flight.
    store: Arc<Mutex<SchemaStore>>,
    disk_queue: DiskQueue,
    schema: Schema,
    view: Option<MembershipView>,
    /// The transaction prepared here and not yet committed or aborted.
    prepared: Option<Prepared>,
    /// The last transaction seen here and where it stands, for a takeover.
    last_trans: Option<(u64, SchemaTransState)>,
    sync: Sync,
    last_sync: Option<SyncReport>,
    forwarded: BTreeMap<u32, Forwarded>,
    next_forward_id: u32,
    /// Nodes that asked for the schema and wait for the master's answer.
    schema_waiters: BTreeSet<NodeId>,
    master: Option<MasterState>,
    /// The node's TC and LDM instances: they get the schema
    /// (`SchemaLoadReq`) and every committed change (`SchemaChangeReq`).
    local_blocks: Vec<BlockRef>,
    /// Partitions of a table created with a count of 0.
    default_partitions: u32,
    /// Data nodes of the cluster (0: not known): bounds fully replicated
    /// tables.
    data_nodes: usize,
    change_in_progress: Option<ChangeInProgress>,
}

fn dictionary_ref(node: NodeId) -> BlockRef {
    BlockRef::new(node, BlockNumber::DICTIONARY, 0)
}

impl Dictionary {
    /// Opens the schema directory on `disk` and loads the schema stored
    /// there (finishing a commit a crash interrupted, dropping a prepared
    /// transaction whose outcome the master will tell).
    pub fn new(
        config: DictionaryConfig,
        disk: Box<dyn Disk>,
    ) -> Result<Dictionary, DictionaryError> {
        let (store, schema, report) = SchemaStore::open(disk, config.schema_dir.clone())?;
        let node = config.node;
        if let Some(trans) = report.finished_commit {
            tracing::info!(%node, "dictionary: finished committing schema transaction {trans:#x} at load");
        }
        if let Some(trans) = report.dropped_prepared {
            tracing::info!(
                %node,
                "dictionary: dropped prepared schema transaction {trans:#x}; \
                 the master's schema decides when this node joins"
            );
        }
        tracing::info!(
            %node,
            "dictionary: loaded {} tables, schema version {}",
            schema.table_count(),
            schema.version()
        );
        Ok(Dictionary {
            config,
            store: Arc::new(Mutex::new(store)),
            disk_queue: DiskQueue::default(),
            schema,
            view: None,
            prepared: None,
            last_trans: None,
            sync: Sync::NotMember,
            last_sync: None,
            forwarded: BTreeMap::new(),
            next_forward_id: 1,
            schema_waiters: BTreeSet::new(),
            master: None,
            local_blocks: Vec::new(),
            default_partitions: DEFAULT_PARTITIONS_UNCONFIGURED,
            data_nodes: 0,
            change_in_progress: None,
        })
    }

    /// The local blocks that hold the schema too (the node's TC and LDM
    /// instances) and the partition count of a table created without one
    /// (`Placement::default_partitions`). Without this the dictionary
    /// serves no local block (as in tests of the dictionary alone). ALTER
    /// TABLE is planned the same either way; the LDM blocks apply it to
    /// their fragments (`ldm::alter`).
    pub fn with_local_blocks(
        mut self,
        local_blocks: Vec<BlockRef>,
        default_partitions: u32,
    ) -> Dictionary {
        assert!(default_partitions > 0, "a table has at least one partition");
        self.local_blocks = local_blocks;
        self.default_partitions = default_partitions;
        self
    }

    /// The cluster's data nodes: a fully replicated table has a copy on
    /// each, and is refused when they are more than a partition's chain
    /// holds (`config::placement::COPIES_MAX`).
    pub fn with_data_nodes(mut self, data_nodes: usize) -> Dictionary {
        self.data_nodes = data_nodes;
        self
    }

    // ---- inspection ----

    /// Every table, hidden tables included.
    pub fn tables(&self) -> impl Iterator<Item = &TableDef> {
        self.schema.tables()
    }

    pub fn table(&self, id: u32) -> Option<&TableDef> {
        self.schema.table(id)
    }

    pub fn table_by_name(&self, name: &str) -> Option<&TableDef> {
        self.schema.table_by_name(name)
    }

    /// The stored encoding of table `id`.
    pub fn encoded(&self, id: u32) -> Option<&[u8]> {
        self.schema.encoded(id)
    }

    /// Grows by one with every committed schema transaction.
    pub fn schema_version(&self) -> u32 {
        self.schema.version()
    }

    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    pub fn is_master(&self) -> bool {
        self.master.is_some()
    }

    /// Whether this node holds the master's schema.
    pub fn is_synced(&self) -> bool {
        self.sync == Sync::Synced
    }

    /// What the last adoption of the master's schema changed.
    pub fn last_sync(&self) -> Option<&SyncReport> {
        self.last_sync.as_ref()
    }

    /// Whether a schema transaction is prepared here and not finished.
    pub fn has_prepared(&self) -> bool {
        self.prepared.is_some()
    }

    /// Whether a file job of this block is in flight or waiting.
    pub fn disk_busy(&self) -> bool {
        self.disk_queue.in_flight.is_some()
    }

    /// Whether this node's schema is the master's, in memory at least:
    /// transactions it prepares are stored (after the adopted schema).
    fn schema_taken(&self) -> bool {
        matches!(self.sync, Sync::Synced | Sync::Storing)
    }

    /// The local blocks the schema goes to.
    pub fn local_blocks(&self) -> &[BlockRef] {
        &self.local_blocks
    }

    /// Whether a committed change waits for the local blocks to install it.
    pub fn change_in_progress(&self) -> bool {
        self.change_in_progress.is_some()
    }

    fn me(&self) -> NodeId {
        self.config.node
    }

    fn master_node(&self) -> Option<NodeId> {
        self.view.as_ref().map(|v| v.president)
    }

    fn members(&self) -> NodeBitmask {
        self.view
            .as_ref()
            .map_or_else(NodeBitmask::new, MembershipView::bitmask)
    }

    // ---- views ----

    fn on_view(&mut self, view: MembershipView, ctx: &mut Context<'_>) {
        if !view.contains(self.me()) {
            // Membership shuts this node down; nothing to do here.
            return;
        }
        if let Some(old) = &self.view {
            if !view.supersedes(old) {
                return;
            }
        }
        let old_master = self.master_node();
        let first_view = self.view.is_none();
        self.view = Some(view.clone());
        let master = view.president;
        if old_master != Some(master) {
            self.fail_forwarded(ctx);
        }
        if master == self.me() {
            if self.master.is_none() {
                self.become_master(first_view, ctx);
            } else {
                self.master_view_changed(&view, ctx);
            }
        } else {
            if self.master.is_some() {
                self.lose_mastership(ctx);
            }
            self.request_schema_if_needed(ctx);
        }
    }

    /// Answers every forwarded request: the master that had them is gone.
    fn fail_forwarded(&mut self, ctx: &mut Context<'_>) {
        let current = self.master_node();
        let gone: Vec<u32> = self
            .forwarded
            .iter()
            .filter(|(_, f)| Some(f.master) != current)
            .map(|(id, _)| *id)
            .collect();
        for id in gone {
            let f = self.forwarded.remove(&id).expect("listed above");
            answer(
                ctx,
                f.client,
                f.kind,
                f.request_id,
                Answer::Refused {
                    code: error::NODE_FAILURE,
                    message: format!(
                        "dictionary master node {} failed with the request in hand; \
                         the change may or may not have been made",
                        f.master
                    ),
                },
            );
        }
    }

    fn become_master(&mut self, first_view: bool, ctx: &mut Context<'_>) {
        let view = self.view.clone().expect("a view makes the master");
        tracing::info!(node = %self.me(), "dictionary: master from view {}", view.view_id);
        // The master's schema is the cluster's: the local blocks hear so
        // once (they got it from disk, not yet as the cluster's).
        // A node still storing an adopted schema becomes synced (and
        // loads its local blocks) at that job's `FsConf`.
        if !self.schema_taken() {
            self.sync = Sync::Synced;
            self.load_local_blocks(ctx);
        }
        let mut state = MasterState::default();
        if !(first_view && view.members.len() == 1) {
            // Members may hold a transaction of the failed master.
            let waiting = view.bitmask();
            for member in &view.members {
                ctx.send(
                    dictionary_ref(*member),
                    SignalBody::DictTakeoverReq {
                        view_id: view.view_id,
                    },
                );
            }
            state.takeover = Some(Takeover {
                view_id: view.view_id,
                waiting,
                reports: BTreeMap::new(),
            });
        }
        self.master = Some(state);
        self.advance(ctx);
    }

    fn master_view_changed(&mut self, view: &MembershipView, ctx: &mut Context<'_>) {
        let members = view.bitmask();
        let state = self.master.as_mut().expect("master");
        if let Some(active) = &mut state.active {
            active.participants = intersect(active.participants, members);
            active.waiting = intersect(active.waiting, members);
        }
        if let Some(takeover) = &mut state.takeover {
            takeover.waiting = intersect(takeover.waiting, members);
        }
        self.advance(ctx);
    }

    fn lose_mastership(&mut self, ctx: &mut Context<'_>) {
        let state = self.master.take().expect("master");
        tracing::warn!(node = %self.me(), "dictionary: no longer master");
        let refusal = |node: NodeId| Answer::Refused {
            code: error::NODE_FAILURE,
            message: format!("dictionary master node {node} lost its mastership"),
        };
        if let Some(ActiveTrans {
            requester: Some((to, request_id, kind)),
            ..
        }) = state.active
        {
            answer(ctx, to, kind, request_id, refusal(self.me()));
        }
        for request in state.queue {
            answer(
                ctx,
                request.from,
                request.body.kind(),
                request.request_id,
                refusal(self.me()),
            );
        }
    }

    fn request_schema_if_needed(&mut self, ctx: &mut Context<'_>) {
        let Some(master) = self.master_node() else {
            return;
        };
        let ask = match &self.sync {
            Sync::Synced | Sync::Storing => false,
            Sync::NotMember => true,
            Sync::Requested { from, .. } => *from != master,
        };
        if ask {
            self.sync = Sync::Requested {
                from: master,
                parts: Vec::new(),
            };
            ctx.send(dictionary_ref(master), SignalBody::DictGetSchemaReq {});
        }
    }

    // ---- requests ----

    fn on_request(&mut self, request: Request, ctx: &mut Context<'_>) {
        let kind = request.body.kind();
        let Some(master) = self.master_node() else {
            answer(
                ctx,
                request.from,
                kind,
                request.request_id,
                Answer::Refused {
                    code: error::NOT_STARTED,
                    message: format!("node {} is not a cluster member yet", self.me()),
                },
            );
            return;
        };
        let busy = |what: &str, max: usize| Answer::Refused {
            code: error::BUSY,
            message: format!("{what}: {max} schema requests are waiting already; retry"),
        };
        if let Some(state) = &mut self.master {
            if state.queue.len() >= SCHEMA_QUEUE_MAX {
                let reply = busy("the dictionary master's queue is full", SCHEMA_QUEUE_MAX);
                answer(ctx, request.from, kind, request.request_id, reply);
                return;
            }
            state.queue.push_back(request);
            self.advance(ctx);
            return;
        }
        if self.forwarded.len() >= FORWARDED_REQUESTS_MAX {
            let reply = busy("too many requests forwarded", FORWARDED_REQUESTS_MAX);
            answer(ctx, request.from, kind, request.request_id, reply);
            return;
        }
        let id = self.next_forward_id;
        self.next_forward_id = self.next_forward_id.wrapping_add(1).max(1);
        debug_assert!(!self.forwarded.contains_key(&id));
        self.forwarded.insert(
            id,
            Forwarded {
                client: request.from,
                request_id: request.request_id,
                kind,
                master,
            },
        );
        ctx.send(dictionary_ref(master), request.body.to_signal(id));
    }

    /// A Conf or Ref from the master for a request this node forwarded.
    fn on_forwarded_answer(
        &mut self,
        sender: NodeId,
        id: u32,
        reply: Answer,
        ctx: &mut Context<'_>,
    ) {
        let Some(f) = self.forwarded.get(&id).copied() else {
            // Answered already when its master failed.
            return;
        };
        if f.master != sender {
            return;
        }
        self.forwarded.remove(&id);
        answer(ctx, f.client, f.kind, f.request_id, reply);
    }

    // ---- master: running transactions ----

    /// Moves the master on: finishes phases whose answers are all in,
    /// starts the next request, answers schema requests when idle.
    fn advance(&mut self, ctx: &mut Context<'_>) {
        loop {
            let Some(state) = self.master.as_mut() else {
                return;
            };
            if let Some(takeover) = &state.takeover {
                if !takeover.waiting.is_empty() {
                    return;
                }
                let takeover = state.takeover.take().expect("checked");
                self.finish_takeover(takeover, ctx);
                continue;
            }
            if let Some(active) = &mut state.active {
                if !active.waiting.is_empty() {
                    return;
                }
                if !active.committing {
                    active.committing = true;
                    active.waiting = active.participants;
                    let trans_id = active.trans_id;
                    for node in active.participants.iter() {
                        ctx.send(
                            dictionary_ref(node),
                            SignalBody::DictSchemaCommit { trans_id },
                        );
                    }
                    continue;
                }
                let done = state.active.take().expect("checked");
                if let Some((to, request_id, kind)) = done.requester {
                    answer(ctx, to, kind, request_id, done.done);
                }
                continue;
            }
            let Some(request) = state.queue.pop_front() else {
                self.answer_schema_waiters(ctx);
                return;
            };
            self.start(request, ctx);
        }
    }

    /// Plans a request and, if it passes, sends Prepare to every member.
    fn start(&mut self, request: Request, ctx: &mut Context<'_>) {
        let kind = request.body.kind();
        let planned = match &request.body {
            RequestBody::Create { table } => plan::plan_create(
                &self.schema,
                table,
                self.default_partitions,
                self.data_nodes,
            ),
            RequestBody::Alter { table_id, table } => {
                plan::plan_alter(&self.schema, *table_id, table)
            }
            RequestBody::Drop { table_id } => plan::plan_drop(&self.schema, *table_id),
        };
        let next_version = self.schema.version().checked_add(1).ok_or(Refusal {
            code: error::TOO_MANY_TABLES,
            message: "the schema has reached its last version".into(),
        });
        let (plan, schema_version) = match planned.and_then(|p| Ok((p, next_version?))) {
            Ok(planned) => planned,
            Err(Refusal { code, message }) => {
                tracing::info!(node = %self.me(), "dictionary: refused: {message}");
                answer(
                    ctx,
                    request.from,
                    kind,
                    request.request_id,
                    Answer::Refused { code, message },
                );
                return;
            }
        };
        let trans_id = self.fresh_trans_id(ctx);
        let participants = self.members();
        assert!(participants.contains(self.me()), "the master is a member");
        let group = plan.group.as_ref().map_or_else(
            || DictTableGroup { tables: Vec::new() },
            TableGroup::to_wire,
        );
        for node in participants.iter() {
            ctx.send(
                dictionary_ref(node),
                SignalBody::DictSchemaPrepare {
                    trans_id,
                    op: plan.op,
                    table_id: plan.table_id,
                    schema_version,
                    next_object_id: plan.next_object_id,
                    group: group.clone(),
                },
            );
        }
        let state = self.master.as_mut().expect("master");
        assert!(state.active.is_none(), "one schema transaction at a time");
        state.active = Some(ActiveTrans {
            trans_id,
            requester: Some((request.from, request.request_id, kind)),
            done: Answer::Done {
                table_id: plan.table_id,
                version: plan.table_version,
            },
            committing: false,
            participants,
            waiting: participants,
        });
    }

    /// A transaction id no other master hands out: the node id in the top
    /// byte, random below.
    fn fresh_trans_id(&self, ctx: &mut Context<'_>) -> u64 {
        let random = ctx.random() >> 8;
        let id = (u64::from(self.me().get()) << 56) | random.max(1);
        debug_assert_ne!(id, 0);
        id
    }

    fn on_prepared(&mut self, sender: NodeId, trans_id: u64, ctx: &mut Context<'_>) {
        if let Some(active) = self.active_mut(trans_id) {
            if !active.committing {
                active.waiting.remove(sender);
            }
        }
        self.advance(ctx);
    }

    fn on_prepare_ref(
        &mut self,
        sender: NodeId,
        trans_id: u64,
        message: String,
        ctx: &mut Context<'_>,
    ) {
        let Some(active) = self.active_mut(trans_id) else {
            return;
        };
        if active.committing {
            return;
        }
        let participants = active.participants;
        let requester = active.requester;
        self.master.as_mut().expect("master").active = None;
        tracing::warn!(node = %self.me(), "dictionary: node {sender} could not prepare: {message}; aborting");
        for node in participants.iter() {
            ctx.send(
                dictionary_ref(node),
                SignalBody::DictSchemaAbort { trans_id },
            );
        }
        if let Some((to, request_id, kind)) = requester {
            answer(
                ctx,
                to,
                kind,
                request_id,
                Answer::Refused {
                    code: error::PREPARE_FAILED,
                    message: format!("node {sender} could not prepare the change: {message}"),
                },
            );
        }
        self.advance(ctx);
    }

    fn on_committed(&mut self, sender: NodeId, trans_id: u64, ctx: &mut Context<'_>) {
        if let Some(active) = self.active_mut(trans_id) {
            if active.committing {
                active.waiting.remove(sender);
            }
        }
        self.advance(ctx);
    }

    fn active_mut(&mut self, trans_id: u64) -> Option<&mut ActiveTrans> {
        self.master
            .as_mut()?
            .active
            .as_mut()
            .filter(|a| a.trans_id == trans_id)
    }

    // ---- master: takeover ----

    fn on_takeover_conf(
        &mut self,
        sender: NodeId,
        view_id: u32,
        trans_id: u64,
        state: SchemaTransState,
        ctx: &mut Context<'_>,
    ) {
        let Some(takeover) = self.master.as_mut().and_then(|m| m.takeover.as_mut()) else {
            return;
        };
        if takeover.view_id != view_id || !takeover.waiting.contains(sender) {
            return;
        }
        takeover.waiting.remove(sender);
        takeover.reports.insert(sender, (trans_id, state));
        self.advance(ctx);
    }

    /// The rule: a transaction some member committed is committed on every
    /// member that prepared it; one no member committed is aborted.
    fn finish_takeover(&mut self, takeover: Takeover, ctx: &mut Context<'_>) {
        let committed: BTreeSet<u64> = takeover
            .reports
            .values()
            .filter(|(_, s)| *s == SchemaTransState::Committed)
            .map(|(t, _)| *t)
            .collect();
        let mut prepared: BTreeMap<u64, NodeBitmask> = BTreeMap::new();
        for (node, (trans_id, state)) in &takeover.reports {
            if *state == SchemaTransState::Prepared {
                prepared.entry(*trans_id).or_default().insert(*node);
            }
        }
        let members = self.members();
        for (trans_id, nodes) in prepared {
            let nodes = intersect(nodes, members);
            if committed.contains(&trans_id) {
                tracing::info!(node = %self.me(), "dictionary: takeover commits schema transaction {trans_id:#x} on {nodes:?}");
                for node in nodes.iter() {
                    ctx.send(
                        dictionary_ref(node),
                        SignalBody::DictSchemaCommit { trans_id },
                    );
                }
                let state = self.master.as_mut().expect("master");
                if state.active.is_none() {
                    // Waited for like any commit, so that no joiner reads
                    // the schema before it.
                    state.active = Some(ActiveTrans {
                        trans_id,
                        requester: None,
                        done: Answer::Done {
                            table_id: 0,
                            version: 0,
                        },
                        committing: true,
                        participants: nodes,
                        waiting: nodes,
                    });
                }
            } else {
                tracing::info!(node = %self.me(), "dictionary: takeover aborts schema transaction {trans_id:#x} on {nodes:?}");
                for node in nodes.iter() {
                    ctx.send(
                        dictionary_ref(node),
                        SignalBody::DictSchemaAbort { trans_id },
                    );
                }
            }
        }
    }

    // ---- participant ----

    fn on_prepare(
        &mut self,
        sender: BlockRef,
        record: Result<TransRecord, String>,
        trans_id: u64,
        ctx: &mut Context<'_>,
    ) {
        let durable = self.schema_taken();
        let result = record.and_then(|record| {
            if let Some(group) = &record.group {
                for table in group.tables() {
                    table
                        .validate()
                        .map_err(|e| format!("the master's definition is invalid here: {e}"))?;
                }
                if durable {
                    self.schema.check_install(group)?;
                }
            }
            Ok(record)
        });
        match result {
            Ok(record) => {
                // Prepared from here on for a takeover's question: the
                // master cannot have decided to commit before this node's
                // `DictSchemaPrepared`, which waits for the file.
                self.last_trans = Some((trans_id, SchemaTransState::Prepared));
                if durable {
                    let store = Arc::clone(&self.store);
                    let stored = record.clone();
                    self.disk_job(
                        DiskStep::Prepared {
                            trans_id,
                            reply_to: sender,
                        },
                        Box::new(move || {
                            lock(&store)
                                .write_prepared(&stored)
                                .map_err(|e| e.to_string())
                        }),
                        ctx,
                    );
                } else {
                    ctx.send(sender, SignalBody::DictSchemaPrepared { trans_id });
                }
                self.prepared = Some(Prepared { record, durable });
            }
            Err(message) => {
                tracing::warn!(node = %self.me(), "dictionary: cannot prepare schema transaction {trans_id:#x}: {message}");
                ctx.send(
                    sender,
                    SignalBody::DictSchemaPrepareRef { trans_id, message },
                );
            }
        }
    }

    fn on_commit(&mut self, sender: BlockRef, trans_id: u64, ctx: &mut Context<'_>) {
        for step in self.disk_queue.steps_mut() {
            if let DiskStep::Committed { record, reply_to } = step {
                if record.trans_id == trans_id {
                    // Answered once the files are written (a new master
                    // may ask again).
                    *reply_to = sender;
                    return;
                }
            }
        }
        if let Some(change) = &mut self.change_in_progress {
            if change.trans_id == trans_id {
                // Answered once the local blocks have it (a new master may ask again).
                change.reply_to = sender;
                return;
            }
        }
        if self.last_trans == Some((trans_id, SchemaTransState::Committed)) {
            ctx.send(sender, SignalBody::DictSchemaCommitted { trans_id });
            return;
        }
        let Some(prepared) = self.prepared.take_if(|p| p.record.trans_id == trans_id) else {
            tracing::warn!(node = %self.me(), "dictionary: commit of unknown schema transaction {trans_id:#x} from {sender}");
            return;
        };
        // The master decided: a takeover hears "committed" from here on.
        self.last_trans = Some((trans_id, SchemaTransState::Committed));
        if !prepared.durable {
            ctx.send(sender, SignalBody::DictSchemaCommitted { trans_id });
            return;
        }
        if let Some(group) = &prepared.record.group {
            // Checked at prepare; nothing else changes the schema between.
            if let Err(reason) = self.schema.check_install(group) {
                self.cannot_commit(trans_id, &reason, ctx);
                return;
            }
        }
        let store = Arc::clone(&self.store);
        let record = prepared.record.clone();
        self.disk_job(
            DiskStep::Committed {
                record: prepared.record,
                reply_to: sender,
            },
            Box::new(move || lock(&store).commit(&record).map_err(|e| e.to_string())),
            ctx,
        );
    }

    /// The files of a commit may be half way: restart and take the
    /// master's schema when rejoining.
    fn cannot_commit(&self, trans_id: u64, reason: &str, ctx: &mut Context<'_>) {
        let reason =
            format!("dictionary: cannot commit schema transaction {trans_id:#x}: {reason}");
        tracing::error!(node = %self.me(), "{reason}");
        ctx.shutdown(true, reason);
    }

    /// A commit's files are written: installs it in memory, then in the
    /// local blocks, which answer the master.
    fn install(&mut self, record: &TransRecord, reply_to: BlockRef, ctx: &mut Context<'_>) {
        files::apply(&mut self.schema, record);
        let name = record.group.as_ref().map(|g| g.base().name.as_str());
        tracing::debug!(
            node = %self.me(),
            "dictionary: committed {:?} of table {} ({name:?}), schema version {}",
            record.op,
            record.table_id,
            self.schema.version()
        );
        if self.local_blocks.is_empty() {
            ctx.send(
                reply_to,
                SignalBody::DictSchemaCommitted {
                    trans_id: record.trans_id,
                },
            );
        } else {
            self.change_local_blocks(record, reply_to, ctx);
        }
    }

    // ---- file jobs ----

    /// Queues a file job; it goes to an `io` thread once those before it
    /// are done.
    fn disk_job(&mut self, step: DiskStep, job: IoJob, ctx: &mut Context<'_>) {
        self.disk_queue.waiting.push_back((step, job));
        self.next_disk_job(ctx);
    }

    fn next_disk_job(&mut self, ctx: &mut Context<'_>) {
        if self.disk_queue.in_flight.is_some() {
            return;
        }
        let Some((step, job)) = self.disk_queue.waiting.pop_front() else {
            return;
        };
        let request = self.disk_queue.next_request;
        self.disk_queue.next_request += 1;
        self.disk_queue.in_flight = Some((request, step));
        ctx.io(request, job);
    }

    /// `FsConf` of the file job in flight.
    fn on_fs_conf(&mut self, request: u64, error: String, ctx: &mut Context<'_>) {
        let Some((_, step)) = self.disk_queue.in_flight.take_if(|(r, _)| *r == request) else {
            tracing::warn!(node = %self.me(), "dictionary: FsConf of unknown file request {request}");
            return;
        };
        match step {
            DiskStep::Prepared { trans_id, reply_to } => {
                let current = self
                    .prepared
                    .as_ref()
                    .is_some_and(|p| p.record.trans_id == trans_id);
                if !current {
                    // Aborted meanwhile; its `Cleared` job follows.
                } else if error.is_empty() {
                    ctx.send(reply_to, SignalBody::DictSchemaPrepared { trans_id });
                } else {
                    self.prepared = None;
                    self.last_trans = Some((trans_id, SchemaTransState::Idle));
                    tracing::warn!(node = %self.me(), "dictionary: cannot prepare schema transaction {trans_id:#x}: {error}");
                    ctx.send(
                        reply_to,
                        SignalBody::DictSchemaPrepareRef {
                            trans_id,
                            message: error,
                        },
                    );
                }
            }
            DiskStep::Committed { record, reply_to } => {
                if !error.is_empty() {
                    self.cannot_commit(record.trans_id, &error, ctx);
                    return;
                }
                self.install(&record, reply_to, ctx);
            }
            DiskStep::Cleared { trans_id } => {
                if !error.is_empty() {
                    // A prepared file left behind is dropped at the next load.
                    tracing::warn!(node = %self.me(), "dictionary: aborted {trans_id:#x}: {error}");
                }
            }
            DiskStep::Adopted { report } => {
                let from = report
                    .from
                    .map_or_else(|| "the master".to_string(), |n| format!("node {n}"));
                if !error.is_empty() {
                    // Restarting: it asks for the master's schema again.
                    self.sync = Sync::NotMember;
                    let reason = format!("dictionary: cannot store {from}'s schema: {error}");
                    tracing::error!(node = %self.me(), "{reason}");
                    ctx.shutdown(true, reason);
                    return;
                }
                for name in &report.added {
                    tracing::info!(node = %self.me(), "dictionary: table `{name}` added from {from}'s schema");
                }
                for name in &report.changed {
                    tracing::info!(node = %self.me(), "dictionary: table `{name}` changed to {from}'s definition");
                }
                for name in &report.removed {
                    tracing::info!(node = %self.me(), "dictionary: table `{name}` removed: {from} has no such table");
                }
                self.last_sync = Some(report);
                self.sync = Sync::Synced;
                self.load_local_blocks(ctx);
            }
        }
        self.next_disk_job(ctx);
    }

    // ---- local blocks (TC and LDM instances) ----

    /// Sends the whole schema to every local block, saying whether it is
    /// the cluster's (synced) or only what this node's disk held.
    fn load_local_blocks(&self, ctx: &mut Context<'_>) {
        if self.local_blocks.is_empty() {
            return;
        }
        let tables: Vec<DictTableGroup> = self.schema.groups().map(TableGroup::to_wire).collect();
        for &block in &self.local_blocks {
            ctx.send(
                block,
                SignalBody::SchemaLoadReq {
                    tables: tables.clone(),
                    schema_version: self.schema.version(),
                    cluster_schema: self.is_synced(),
                },
            );
        }
    }

    /// Sends a committed change to every local block; the master hears
    /// `DictSchemaCommitted` when all have installed it.
    fn change_local_blocks(
        &mut self,
        record: &TransRecord,
        reply_to: BlockRef,
        ctx: &mut Context<'_>,
    ) {
        assert!(
            self.change_in_progress.is_none(),
            "one schema transaction commits at a time"
        );
        let group = record.group.as_ref().map_or_else(
            || DictTableGroup { tables: Vec::new() },
            TableGroup::to_wire,
        );
        for &block in &self.local_blocks {
            ctx.send(
                block,
                SignalBody::SchemaChangeReq {
                    op: record.op,
                    table_id: record.table_id,
                    schema_version: record.schema_version,
                    group: group.clone(),
                },
            );
        }
        self.change_in_progress = Some(ChangeInProgress {
            trans_id: record.trans_id,
            reply_to,
            waiting: self.local_blocks.iter().copied().collect(),
        });
    }

    fn on_schema_change_conf(
        &mut self,
        sender: BlockRef,
        table_id: u32,
        code: u32,
        message: String,
        ctx: &mut Context<'_>,
    ) {
        if code != 0 {
            let reason = format!(
                "dictionary: {sender} could not install the change of table {table_id} \
                 (error {code}): {message}; restarting the node"
            );
            tracing::error!(node = %self.me(), "{reason}");
            ctx.shutdown(true, reason);
            return;
        }
        let Some(change) = &mut self.change_in_progress else {
            return;
        };
        change.waiting.remove(&sender);
        if change.waiting.is_empty() {
            let change = self.change_in_progress.take().expect("checked");
            ctx.send(
                change.reply_to,
                SignalBody::DictSchemaCommitted {
                    trans_id: change.trans_id,
                },
            );
        }
    }

    fn on_schema_load_conf(
        &mut self,
        sender: BlockRef,
        schema_version: u32,
        code: u32,
        message: String,
    ) {
        if code == 0 {
            tracing::debug!(node = %self.me(), "dictionary: {sender} loaded schema version {schema_version}");
        } else {
            // The block that failed stops the node itself if it must.
            tracing::error!(
                node = %self.me(),
                "dictionary: {sender} could not load schema version {schema_version} (error {code}): {message}"
            );
        }
    }

    /// A table's definition for anyone who asks (API nodes): by id, or by
    /// name when the id is 0; the whole group of its base table.
    fn on_get_table(
        &self,
        sender: BlockRef,
        request_id: u32,
        table_id: u32,
        name: String,
        ctx: &mut Context<'_>,
    ) {
        let table = if table_id == 0 {
            self.schema.table_by_name(&name)
        } else {
            self.schema.table(table_id)
        };
        let group = table.and_then(|t| {
            let base = self
                .schema
                .hidden_owner(t.id)
                .map_or(t.id, |owner| owner.id);
            self.schema.group(base)
        });
        let body = match group {
            Some(group) => SignalBody::DictGetTableConf {
                request_id,
                group: group.to_wire(),
            },
            None => SignalBody::DictGetTableRef {
                request_id,
                code: error::NO_SUCH_TABLE,
                message: if table_id == 0 {
                    format!("no table `{name}`")
                } else {
                    format!("no table with id {table_id}")
                },
            },
        };
        ctx.send(sender, body);
    }

    /// The base tables with an id above `after_id`, for anyone who asks
    /// (API nodes' `SHOW TABLES`): one part of at most
    /// `SCHEMA_REP_PART_BYTES_MAX` bytes of names; the asker asks again
    /// after the part's last id until `last`.
    fn on_list_tables(
        &self,
        sender: BlockRef,
        request_id: u32,
        after_id: u32,
        ctx: &mut Context<'_>,
    ) {
        let mut tables = Vec::new();
        let mut bytes = 0;
        let mut last = true;
        for group in self.schema.groups() {
            let base = group.base();
            if base.id <= after_id {
                continue;
            }
            // An id and a length per name, as the wire counts them.
            let entry_bytes = base.name.len() + 8;
            if !tables.is_empty() && bytes + entry_bytes > SCHEMA_REP_PART_BYTES_MAX {
                last = false;
                break;
            }
            bytes += entry_bytes;
            tables.push(DictTableName {
                id: base.id,
                name: base.name.clone(),
            });
        }
        ctx.send(
            sender,
            SignalBody::DictListTablesConf {
                request_id,
                tables,
                last,
            },
        );
    }

    fn on_abort(&mut self, trans_id: u64, ctx: &mut Context<'_>) {
        let Some(prepared) = self.prepared.take_if(|p| p.record.trans_id == trans_id) else {
            return;
        };
        self.last_trans = Some((trans_id, SchemaTransState::Idle));
        if !prepared.durable {
            return;
        }
        let store = Arc::clone(&self.store);
        self.disk_job(
            DiskStep::Cleared { trans_id },
            Box::new(move || lock(&store).clear_prepared().map_err(|e| e.to_string())),
            ctx,
        );
    }

    fn on_takeover_req(&mut self, sender: BlockRef, view_id: u32, ctx: &mut Context<'_>) {
        let (trans_id, state) = self.last_trans.unwrap_or((0, SchemaTransState::Idle));
        ctx.send(
            sender,
            SignalBody::DictTakeoverConf {
                view_id,
                trans_id,
                state,
            },
        );
    }

    // ---- joining ----

    fn on_get_schema_req(&mut self, sender: NodeId, ctx: &mut Context<'_>) {
        if self.schema_waiters.len() < SCHEMA_WAITERS_MAX || self.schema_waiters.contains(&sender) {
            self.schema_waiters.insert(sender);
        }
        if self.master.is_some() {
            self.advance(ctx);
        }
    }

    /// Sends the schema to waiting members; only when no transaction or
    /// takeover is in flight, and only to nodes in this master's view (so
    /// that a node gets every transaction after its copy).
    fn answer_schema_waiters(&mut self, ctx: &mut Context<'_>) {
        let members = self.members();
        let ready: Vec<NodeId> = self
            .schema_waiters
            .iter()
            .copied()
            .filter(|n| members.contains(*n))
            .collect();
        for node in ready {
            self.schema_waiters.remove(&node);
            self.send_schema(node, ctx);
        }
    }

    fn send_schema(&self, to: NodeId, ctx: &mut Context<'_>) {
        let mut part: Vec<DictTableGroup> = Vec::new();
        let mut part_bytes = 0;
        let send = |ctx: &mut Context<'_>, tables: Vec<DictTableGroup>, last: bool| {
            ctx.send(
                dictionary_ref(to),
                SignalBody::DictSchemaRep {
                    tables,
                    version: self.schema.version(),
                    next_object_id: self.schema.next_object_id(),
                    last,
                },
            );
        };
        for group in self.schema.groups() {
            let bytes = group.encoded_bytes();
            if !part.is_empty() && part_bytes + bytes > SCHEMA_REP_PART_BYTES_MAX {
                send(ctx, std::mem::take(&mut part), false);
                part_bytes = 0;
            }
            part.push(group.to_wire());
            part_bytes += bytes;
        }
        send(ctx, part, true);
    }

    fn on_schema_rep(
        &mut self,
        sender: NodeId,
        tables: Vec<DictTableGroup>,
        version: u32,
        next_object_id: u32,
        last: bool,
        ctx: &mut Context<'_>,
    ) {
        let Sync::Requested { from, parts } = &mut self.sync else {
            return;
        };
        if *from != sender {
            return;
        }
        if parts.len() + tables.len() > TABLES_MAX {
            tracing::warn!(node = %self.config.node, "dictionary: node {sender} sent more than {TABLES_MAX} tables; dropped");
            parts.clear();
            return;
        }
        parts.extend(tables);
        if !last {
            return;
        }
        let parts = std::mem::take(parts);
        if let Err(reason) = self.adopt(sender, parts, version, next_object_id, ctx) {
            // The master's schema cannot be read here: this build
            // cannot serve this cluster.
            let reason = format!("dictionary: cannot take node {sender}'s schema: {reason}");
            tracing::error!(node = %self.me(), "{reason}");
            ctx.shutdown(false, reason);
        }
    }

    /// Replaces this node's schema by the master's: in memory at once (a
    /// transaction prepared next is checked against it), on disk by a file
    /// job, synced at its `FsConf`.
    fn adopt(
        &mut self,
        from: NodeId,
        parts: Vec<DictTableGroup>,
        version: u32,
        next_object_id: u32,
        ctx: &mut Context<'_>,
    ) -> Result<(), String> {
        let mut theirs = Schema::new();
        for wire in parts {
            let group = TableGroup::decode(wire.tables).map_err(|e| e.to_string())?;
            theirs.check_install(&group)?;
            theirs.install(group);
        }
        theirs.set_counters(version, next_object_id);
        let mut report = SyncReport {
            from: Some(from),
            ..SyncReport::default()
        };
        let mut writes = Vec::new();
        for group in theirs.groups() {
            let base = group.base();
            match self.schema.group(base.id) {
                Some(mine) if mine.encoded() == group.encoded() => continue,
                Some(_) => report.changed.push(base.name.clone()),
                None => report.added.push(base.name.clone()),
            }
            writes.push(group.clone());
        }
        let mut removes = Vec::new();
        for group in self.schema.groups() {
            let base = group.base();
            if theirs.group(base.id).is_none() {
                report.removed.push(base.name.clone());
                removes.push(base.id);
            }
        }
        self.schema = theirs;
        self.sync = Sync::Storing;
        let store = Arc::clone(&self.store);
        self.disk_job(
            DiskStep::Adopted { report },
            Box::new(move || {
                let store = lock(&store);
                for group in &writes {
                    store.write_group(group).map_err(|e| e.to_string())?;
                }
                for base in removes {
                    store.remove_group(base).map_err(|e| e.to_string())?;
                }
                store
                    .write_meta(version, next_object_id)
                    .map_err(|e| e.to_string())
            }),
            ctx,
        );
        Ok(())
    }
}

/// The schema store, whoever held it last (an `io` thread that panicked
/// in a job left it as it was: every file is replaced whole).
fn lock(store: &Mutex<SchemaStore>) -> std::sync::MutexGuard<'_, SchemaStore> {
    store.lock().unwrap_or_else(PoisonError::into_inner)
}

fn intersect(a: NodeBitmask, b: NodeBitmask) -> NodeBitmask {
    a.iter().filter(|n| b.contains(*n)).collect()
}

/// A Prepare's contents as a record, or why they are not one.
fn prepare_record(
    trans_id: u64,
    op: SchemaOp,
    table_id: u32,
    schema_version: u32,
    next_object_id: u32,
    group: DictTableGroup,
) -> Result<TransRecord, String> {
    let group = match op {
        SchemaOp::DropTable => {
            if !group.tables.is_empty() {
                return Err("a drop carries no tables".into());
            }
            None
        }
        SchemaOp::CreateTable | SchemaOp::AlterTable => {
            let group = TableGroup::decode(group.tables).map_err(|e| e.to_string())?;
            if group.base().id != table_id {
                return Err(format!(
                    "the transaction is on table {table_id}, its group on table {}",
                    group.base().id
                ));
            }
            Some(group)
        }
    };
    Ok(TransRecord {
        trans_id,
        op,
        table_id,
        schema_version,
        next_object_id,
        group,
    })
}

impl Dictionary {
    /// Panics, naming what broke, when the schema transaction state
    /// disagrees with itself: a prepared transaction is the last one seen,
    /// in state prepared; a change being installed waits for local blocks
    /// only; at most one commit is being written, and none while a change
    /// is installed; an adopted schema is being written exactly while the
    /// node is `Storing` it. Run by the simulator after every signal
    /// (debug builds).
    fn check_dictionary_invariants(&self) {
        let node = self.config.node;
        if let Some(prepared) = &self.prepared {
            let trans_id = prepared.record.trans_id;
            assert_eq!(
                self.last_trans,
                Some((trans_id, SchemaTransState::Prepared)),
                "dictionary on node {node}: transaction {trans_id:#x} prepared, yet not the last one seen as prepared"
            );
        }
        let commits = self
            .disk_queue
            .steps()
            .filter(|s| matches!(s, DiskStep::Committed { .. }))
            .count();
        assert!(
            commits <= usize::from(self.change_in_progress.is_none()),
            "dictionary on node {node}: {commits} commits being written, change in progress: {:?}",
            self.change_in_progress.as_ref().map(|c| c.trans_id)
        );
        let adopting = self
            .disk_queue
            .steps()
            .any(|s| matches!(s, DiskStep::Adopted { .. }));
        assert_eq!(
            adopting,
            self.sync == Sync::Storing,
            "dictionary on node {node}: an adopted schema being written, yet sync is {:?}",
            self.sync
        );
        if let Some(change) = &self.change_in_progress {
            for block in &change.waiting {
                assert!(
                    self.local_blocks.contains(block),
                    "dictionary on node {node}: change {:#x} waits for {block}, not a local block",
                    change.trans_id
                );
            }
        }
    }
}

impl Block for Dictionary {
    fn check_invariants(&self) {
        self.check_dictionary_invariants();
    }

    fn start(&mut self, ctx: &mut Context<'_>) {
        // The schema loaded from disk; a joining node sends the master's
        // again once it has taken it.
        self.load_local_blocks(ctx);
    }

    fn execute(&mut self, signal: Signal, ctx: &mut Context<'_>) {
        // `main` runs membership and global checkpoints: it never waits
        // for a disk (the files are written by file jobs, above).
        let _no_sync = storage::disk::forbid_sync();
        let sender = signal.sender;
        let from = sender.node;
        match signal.body {
            SignalBody::MembershipViewRep { view } => {
                if from == self.me() {
                    self.on_view(view, ctx);
                }
            }
            SignalBody::DictCreateTableReq { request_id, table } => self.on_request(
                Request {
                    from: sender,
                    request_id,
                    body: RequestBody::Create { table },
                },
                ctx,
            ),
            SignalBody::DictDropTableReq {
                request_id,
                table_id,
            } => self.on_request(
                Request {
                    from: sender,
                    request_id,
                    body: RequestBody::Drop { table_id },
                },
                ctx,
            ),
            SignalBody::DictAlterTableReq {
                request_id,
                table_id,
                table,
            } => self.on_request(
                Request {
                    from: sender,
                    request_id,
                    body: RequestBody::Alter { table_id, table },
                },
                ctx,
            ),
            SignalBody::DictCreateTableConf {
                request_id,
                table_id,
                version,
            }
            | SignalBody::DictAlterTableConf {
                request_id,
                table_id,
                version,
            } => {
                self.on_forwarded_answer(from, request_id, Answer::Done { table_id, version }, ctx)
            }
            SignalBody::DictDropTableConf {
                request_id,
                table_id,
            } => self.on_forwarded_answer(
                from,
                request_id,
                Answer::Done {
                    table_id,
                    version: 0,
                },
                ctx,
            ),
            SignalBody::DictCreateTableRef {
                request_id,
                code,
                message,
            }
            | SignalBody::DictAlterTableRef {
                request_id,
                code,
                message,
            }
            | SignalBody::DictDropTableRef {
                request_id,
                code,
                message,
            } => self.on_forwarded_answer(from, request_id, Answer::Refused { code, message }, ctx),
            SignalBody::DictSchemaPrepare {
                trans_id,
                op,
                table_id,
                schema_version,
                next_object_id,
                group,
            } => {
                let record = prepare_record(
                    trans_id,
                    op,
                    table_id,
                    schema_version,
                    next_object_id,
                    group,
                );
                self.on_prepare(sender, record, trans_id, ctx);
            }
            SignalBody::DictSchemaPrepared { trans_id } => self.on_prepared(from, trans_id, ctx),
            SignalBody::DictSchemaPrepareRef { trans_id, message } => {
                self.on_prepare_ref(from, trans_id, message, ctx)
            }
            SignalBody::DictSchemaCommit { trans_id } => self.on_commit(sender, trans_id, ctx),
            SignalBody::DictSchemaCommitted { trans_id } => self.on_committed(from, trans_id, ctx),
            SignalBody::DictSchemaAbort { trans_id } => self.on_abort(trans_id, ctx),
            SignalBody::DictGetSchemaReq {} => self.on_get_schema_req(from, ctx),
            SignalBody::DictSchemaRep {
                tables,
                version,
                next_object_id,
                last,
            } => self.on_schema_rep(from, tables, version, next_object_id, last, ctx),
            SignalBody::DictTakeoverReq { view_id } => self.on_takeover_req(sender, view_id, ctx),
            SignalBody::SchemaLoadConf {
                schema_version,
                code,
                message,
            } => self.on_schema_load_conf(sender, schema_version, code, message),
            SignalBody::SchemaChangeConf {
                table_id,
                code,
                message,
                ..
            } => self.on_schema_change_conf(sender, table_id, code, message, ctx),
            SignalBody::DictGetTableReq {
                request_id,
                table_id,
                name,
            } => self.on_get_table(sender, request_id, table_id, name, ctx),
            SignalBody::DictListTablesReq {
                request_id,
                after_id,
            } => self.on_list_tables(sender, request_id, after_id, ctx),
            SignalBody::DictTakeoverConf {
                view_id,
                trans_id,
                state,
            } => self.on_takeover_conf(from, view_id, trans_id, state, ctx),
            SignalBody::FsConf { request, error } => self.on_fs_conf(request, error, ctx),
            other => {
                tracing::warn!(node = %self.me(), "dictionary: unexpected signal {} from {sender}", other.name());
            }
        }
    }
}
