//! The typed signals. Each has a global signal number (GSN, as NDB calls it)
//! that is part of the wire format: never renumber or reuse one.

use crate::codec::{Field, Reader};
use crate::ids::{BlockRef, Chain, NodeBitmask, NodeId, RefChain};
use crate::{wire_enum, wire_struct, DecodeError};

wire_enum! {
    /// What kind of node a node id is configured as.
    pub enum NodeType {
        Data = 1,
        Management = 2,
        Api = 3,
    }
}

impl NodeType {
    pub fn as_str(self) -> &'static str {
        match self {
            NodeType::Data => "data",
            NodeType::Management => "mgmd",
            NodeType::Api => "api",
        }
    }
}

wire_enum! {
    /// The life-cycle state of a node as the management server reports it.
    pub enum NodeState {
        NotConnected = 0,
        Starting = 1,
        Started = 2,
        Stopping = 3,
        /// Lost without a clean stop; stays so until the node connects again.
        Failed = 4,
        Restarting = 5,
    }
}

impl NodeState {
    pub fn as_str(self) -> &'static str {
        match self {
            NodeState::NotConnected => "not connected",
            NodeState::Starting => "starting",
            NodeState::Started => "started",
            NodeState::Stopping => "stopping",
            NodeState::Failed => "failed",
            NodeState::Restarting => "restarting",
        }
    }
}

wire_enum! {
    /// Why a registration (of a data node with the president, or of an API
    /// node with a data node) was refused.
    pub enum RegRefReason {
        /// Ask the president instead (its id comes with the refusal if known).
        NotPresident = 1,
        /// The receiver is itself still starting and not a member.
        Starting = 2,
        /// The versions cannot work together.
        Incompatible = 3,
        /// The sender is not configured as a node of this kind.
        NotConfigured = 4,
        /// The receiver is shutting down.
        Stopping = 5,
        /// The sender was declared failed and its failure is still being handled.
        FailureHandling = 6,
    }
}

wire_enum! {
    /// Why a node was reported failed.
    pub enum FailReason {
        HeartbeatMissed = 1,
        Disconnected = 2,
        /// Excluded by the president on another node's report.
        Excluded = 3,
        /// The node stopped on request.
        Stopped = 4,
        /// Excluded by the master for stalling global checkpoints (its
        /// flush or sysfile write did not finish in
        /// `TimeBetweenGlobalCheckpointsTimeout`; NDB's GCP stop).
        GcpStop = 5,
    }
}

wire_enum! {
    /// Severity of a cluster-log event.
    pub enum Severity {
        Info = 1,
        Warning = 2,
        Alert = 3,
    }
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "INFO",
            Severity::Warning => "WARNING",
            Severity::Alert => "ALERT",
        }
    }

    /// The severity named `name` (any case).
    pub fn parse(name: &str) -> Option<Severity> {
        Severity::ALL
            .iter()
            .copied()
            .find(|s| s.as_str().eq_ignore_ascii_case(name))
    }
}

wire_enum! {
    /// What a cluster-log event is about (NDB's event categories, with
    /// their names). With its level (0 most important to 15) it decides
    /// whether the event is written: a level at most the category's
    /// threshold for the reporting node (`CLUSTERLOG category=threshold`).
    pub enum EventCategory {
        Startup = 1,
        Shutdown = 2,
        Statistics = 3,
        Checkpoint = 4,
        NodeRestart = 5,
        Connection = 6,
        Info = 7,
        Error = 8,
        Congestion = 9,
        Debug = 10,
        Backup = 11,
        Schema = 12,
    }
}

impl EventCategory {
    pub fn as_str(self) -> &'static str {
        match self {
            EventCategory::Startup => "STARTUP",
            EventCategory::Shutdown => "SHUTDOWN",
            EventCategory::Statistics => "STATISTICS",
            EventCategory::Checkpoint => "CHECKPOINT",
            EventCategory::NodeRestart => "NODERESTART",
            EventCategory::Connection => "CONNECTION",
            EventCategory::Info => "INFO",
            EventCategory::Error => "ERROR",
            EventCategory::Congestion => "CONGESTION",
            EventCategory::Debug => "DEBUG",
            EventCategory::Backup => "BACKUP",
            EventCategory::Schema => "SCHEMA",
        }
    }

    /// The threshold this category has until `CLUSTERLOG` changes it:
    /// NDB's management server's (7, CONNECTION 8, ERROR and BACKUP 15),
    /// but NODERESTART 8, so that a node's failure (NDB's `NODE_FAILREP`,
    /// level 8, which NDB's default leaves out) is written.
    pub fn default_threshold(self) -> u8 {
        match self {
            EventCategory::Error | EventCategory::Backup => EVENT_LEVEL_MAX,
            EventCategory::Connection | EventCategory::NodeRestart => 8,
            _ => EVENT_THRESHOLD_DEFAULT,
        }
    }

    /// The category named `name` (any case).
    pub fn parse(name: &str) -> Option<EventCategory> {
        EventCategory::ALL
            .iter()
            .copied()
            .find(|c| c.as_str().eq_ignore_ascii_case(name))
    }
}

/// The most detailed event level (NDB's levels run 0 to 15).
pub const EVENT_LEVEL_MAX: u8 = 15;
/// Most categories' threshold until `CLUSTERLOG` changes it (NDB's
/// default for the cluster log): events of level 0 to 7 are written. See
/// [`EventCategory::default_threshold`] for the others.
pub const EVENT_THRESHOLD_DEFAULT: u8 = 7;

/// What a cluster-log event reports: its category and its level (0 most
/// important), NDB's for the event of NDB's that reports the same thing
/// (named on each kind; docs/operations.md has the table), so that a
/// `CLUSTERLOG category=threshold` keeps what it keeps in NDB. Not on the
/// wire: an event carries its category and level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// The president formed the cluster (NDB's `NDBStartCompleted`).
    ClusterFormed,
    /// This node joined the cluster (`CM_REGCONF`).
    Joined,
    /// A data node's start failed and the node stops (`NDBStopForced`).
    StartFailed,
    /// A data node registered with the mgmd (`CM_REGCONF`).
    DataNodeRegistered,
    /// A data node is started (`NDBStartCompleted`).
    NodeStarted,
    /// A management server started (`NDBStartStarted`).
    MgmdStarted,
    /// A stop or restart was ordered or requested (`NDBStopStarted`).
    StopOrdered,
    /// A stop went on with work left or nodes still up (`NDBStopAborted`).
    StopForced,
    /// A data node stopped (`NDBStopCompleted`).
    NodeStopped,
    /// The president admitted a node (`NR_CopyDict`).
    NodeAdmitted,
    /// A node left or was declared failed (`NODE_FAILREP`).
    NodeFailed,
    /// A node was excluded by the president (`NodeFailCompleted`).
    Excluded,
    /// A president took over from a failed one (`GCP_TakeoverStarted`).
    PresidentTakeover,
    /// A network partition needs the arbitrator (`ArbitState`).
    ArbitrationRequired,
    /// Arbitration's outcome, or a side that cannot go on (`ArbitResult`).
    ArbitrationResult,
    /// A thread ran late, or the watchdog saw one stuck (`WarningEvent`).
    Stall,
    /// A data node's process is gone (`DeadDueToHeartbeat`).
    NodeLost,
    /// A node missed its heartbeats (`MissedHeartbeat`).
    HeartbeatsMissed,
    /// An API node connected or registered (`CommunicationOpened`).
    ApiConnected,
    /// An API node disconnected (`CommunicationClosed`).
    ApiDisconnected,
    /// The mgmd refused connections at its limit (`WarningEvent`).
    ConnectionsRefused,
    /// A local or global checkpoint is stuck (`LCPStoppedInCalcKeepGci`).
    CheckpointStopped,
    /// A stuck checkpoint went on again (`LocalCheckpointCompleted`).
    CheckpointResumed,
    /// DataMemory or the redo log crossed an alarm level (`InfoEvent`).
    UsageAlarm,
}

impl EventKind {
    /// Its category and level.
    pub const fn spec(self) -> (EventCategory, u8) {
        use EventCategory as C;
        match self {
            EventKind::ClusterFormed => (C::Startup, 1),
            EventKind::Joined => (C::Startup, 3),
            EventKind::StartFailed => (C::Startup, 1),
            EventKind::DataNodeRegistered => (C::Startup, 3),
            EventKind::NodeStarted => (C::Startup, 1),
            EventKind::MgmdStarted => (C::Startup, 1),
            EventKind::StopOrdered => (C::Shutdown, 1),
            EventKind::StopForced => (C::Shutdown, 1),
            EventKind::NodeStopped => (C::Shutdown, 1),
            EventKind::NodeAdmitted => (C::NodeRestart, 7),
            EventKind::NodeFailed => (C::NodeRestart, 8),
            EventKind::Excluded => (C::NodeRestart, 8),
            EventKind::PresidentTakeover => (C::NodeRestart, 7),
            EventKind::ArbitrationRequired => (C::NodeRestart, 6),
            EventKind::ArbitrationResult => (C::NodeRestart, 2),
            EventKind::Stall => (C::Error, 2),
            EventKind::NodeLost => (C::Error, 8),
            EventKind::HeartbeatsMissed => (C::Error, 8),
            EventKind::ApiConnected => (C::Connection, 8),
            EventKind::ApiDisconnected => (C::Connection, 8),
            EventKind::ConnectionsRefused => (C::Connection, 2),
            EventKind::CheckpointStopped => (C::Checkpoint, 0),
            EventKind::CheckpointResumed => (C::Checkpoint, 7),
            EventKind::UsageAlarm => (C::Info, 2),
        }
    }

    pub const fn category(self) -> EventCategory {
        self.spec().0
    }

    pub const fn level(self) -> u8 {
        self.spec().1
    }
}

wire_enum! {
    /// What a `MgmClusterLogReq` asks (NDB's `CLUSTERLOG` verbs).
    pub enum ClusterLogAction {
        /// Only the answer: what is written now (`CLUSTERLOG INFO`).
        Info = 1,
        /// Write the named severities again, or with none the whole log.
        On = 2,
        /// Stop writing the named severities, or with none the whole log.
        Off = 3,
        /// Each named severity from on to off or back; with none, the log.
        Toggle = 4,
        /// `category`'s threshold for each of `nodes` (none: every
        /// configured node) becomes `threshold`.
        Threshold = 5,
    }
}

wire_struct! {
    /// One node's threshold for one category (`MgmClusterLogConf`).
    pub struct EventThreshold {
        pub node: NodeId,
        pub category: EventCategory,
        pub threshold: u8,
    }
}

wire_struct! {
    /// The cluster membership as the president decided it.
    pub struct MembershipView {
        /// Grows with every change the president makes (by one, or past
        /// a view id a member reported: docs/membership.md, "Failure").
        pub view_id: u32,
        pub president: NodeId,
        /// Members, oldest first: the oldest survivor becomes the next president.
        pub members: Vec<NodeId>,
    }
}

impl MembershipView {
    /// Whether this view replaces `old`: a later view id, or for two views
    /// of one id (two presidents after a split) the larger side, then the
    /// lower president id. Membership and the dictionary both follow views
    /// by this order.
    pub fn supersedes(&self, old: &MembershipView) -> bool {
        use std::cmp::Ordering;
        match self.view_id.cmp(&old.view_id) {
            Ordering::Greater => true,
            Ordering::Less => false,
            Ordering::Equal => match self.members.len().cmp(&old.members.len()) {
                Ordering::Greater => true,
                Ordering::Less => false,
                Ordering::Equal => self.president < old.president,
            },
        }
    }

    pub fn contains(&self, node: NodeId) -> bool {
        self.members.contains(&node)
    }

    pub fn bitmask(&self) -> NodeBitmask {
        self.members.iter().copied().collect()
    }
}

/// `node_group` value of a node that is in no node group.
pub const NO_NODE_GROUP: u32 = u32::MAX;

wire_struct! {
    /// One configured node as `skarv admin show` lists it.
    pub struct NodeStatusEntry {
        pub node: NodeId,
        pub node_type: NodeType,
        pub host: String,
        /// `NO_NODE_GROUP` for nodes that hold no data.
        pub node_group: u32,
        pub state: NodeState,
        /// Of the node process itself, never of its angel; 0 when unknown.
        pub pid: u32,
        /// `major * 10000 + minor * 100 + patch`; 0 when unknown.
        pub version: u32,
        /// How many times the node process has started since the mgmd started.
        pub start_count: u32,
        /// The data node's view of the membership when it last reported.
        pub view_id: u32,
        pub members: NodeBitmask,
        /// A `[mysqld]` slot: for a SQL node (`skarv sql`).
        pub mysqld: bool,
        /// The IP address the node's process connected from; empty when
        /// it is not connected.
        pub address: String,
    }
}

wire_enum! {
    /// What a schema transaction does to one table (and its hidden tables).
    pub enum SchemaOp {
        CreateTable = 1,
        AlterTable = 2,
        DropTable = 3,
    }
}

wire_enum! {
    /// Where a participant stands with the last schema transaction it saw,
    /// as it tells a new dictionary master taking over.
    pub enum SchemaTransState {
        /// No transaction prepared and not committed (or it was aborted).
        Idle = 0,
        /// Prepared, waiting for commit or abort.
        Prepared = 1,
        /// Committed.
        Committed = 2,
    }
}

wire_struct! {
    /// A base table's id and name, as `DictListTablesConf` lists them.
    pub struct DictTableName {
        pub id: u32,
        pub name: String,
    }
}

wire_struct! {
    /// A table with the hidden tables that belong to it (unique-index
    /// tables, BLOB parts tables), each an encoded `TableDef`
    /// (`schema::codec`): the base table first. The dictionary
    /// changes, stores and ships such a group as one unit.
    pub struct DictTableGroup {
        pub tables: Vec<Vec<u8>>,
    }
}

wire_struct! {
    /// One row of an ndbinfo table (`dbinfo`): its integer columns in
    /// column order, then its text columns in column order.
    pub struct DbinfoRow {
        pub ints: Vec<u64>,
        pub texts: Vec<String>,
    }
}

/// Defines `SignalBody` with one struct-like variant per signal.
macro_rules! signals {
    ($($(#[$meta:meta])* $gsn:literal => $name:ident { $($field:ident : $ty:ty),* $(,)? }),* $(,)?) => {
        /// The body of a signal: which signal it is and its fields.
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub enum SignalBody {
            $($(#[$meta])* $name { $($field: $ty),* }),*
        }

        impl SignalBody {
            /// The global signal number.
            pub fn gsn(&self) -> u16 {
                match self { $(SignalBody::$name { .. } => $gsn),* }
            }

            pub fn name(&self) -> &'static str {
                match self { $(SignalBody::$name { .. } => stringify!($name)),* }
            }

            /// Every signal's [`SignalBody::name`].
            pub const NAMES: &'static [&'static str] = &[$(stringify!($name)),*];

            pub(crate) fn encode_fields(&self, out: &mut Vec<u8>) {
                match self {
                    $(SignalBody::$name { $($field),* } => {
                        $( Field::put($field, out); )*
                    })*
                }
            }

            pub(crate) fn decode_fields(gsn: u16, reader: &mut Reader<'_>) -> Result<SignalBody, DecodeError> {
                match gsn {
                    $($gsn => Ok(SignalBody::$name { $($field: Field::take(reader)?),* }),)*
                    unknown => Err(DecodeError::UnknownGsn(unknown)),
                }
            }

            /// Every known GSN, for tests and tools.
            pub const ALL_GSNS: &'static [u16] = &[$($gsn),*];
        }
    };
}

signals! {
    // ---- runtime (1–9): produced inside a node, never accepted from the network ----
    /// A timer set by the receiving block expired.
    1 => Timeout { timer_id: u32 },
    /// The transport finished the handshake with `node`.
    2 => NodeConnected { node: NodeId },
    /// The connection to `node` broke or was closed.
    3 => NodeDisconnected { node: NodeId },
    /// A block's note to itself, sent to its own address so that the work
    /// `what` names runs after the signals already queued for its thread
    /// (NDB: CONTINUEB): a TC gathers the commits those signals start.
    4 => Continue { what: u32 },
    /// A file request the receiving block handed to its node's `io` threads
    /// (`kernel::Context::io`) is done: `error` is empty when it succeeded,
    /// and says what failed otherwise (NDB: FSWRITECONF/FSSYNCCONF and their
    /// REFs, from NDBFS).
    5 => FsConf { request: u64, error: String },

    // ---- membership between data nodes (10–29), NDB: QMGR ----
    /// A starting data node asks to join (NDB: CM_REGREQ). `start_id` tells
    /// incarnations of the same node apart.
    10 => CmRegReq { node: NodeId, version: u32, start_id: u64 },
    /// The president admits the node; the view includes it (NDB: CM_REGCONF).
    11 => CmRegConf { view: MembershipView },
    /// Not admitted (NDB: CM_REGREF).
    12 => CmRegRef { reason: RegRefReason, president: Option<NodeId> },
    /// The president announces a new membership (NDB: CM_ADD / COMMIT_FAILREQ).
    13 => CmViewChange { view: MembershipView },
    /// Liveness between members (NDB: CM_HEARTBEAT).
    14 => Heartbeat { view_id: u32 },
    /// `failed` is suspected dead; sent to the president (NDB: FAIL_REP).
    15 => FailRep { failed: NodeId, reason: FailReason, view_id: u32 },
    /// The (acting) president of a side that cannot tell on its own whether
    /// it may go on (a tie: see `docs/membership.md`) → the arbitrator (the
    /// mgmd): may the side `members`, split from view `view_id`, go on?
    /// `view_id` 0: a partial start of `members` (NDB: ARBIT_CHOOSEREQ).
    16 => ArbitReq { view_id: u32, members: NodeBitmask },
    /// The arbitrator's vote: the side may go on (NDB: ARBIT_CHOOSECONF).
    17 => ArbitConf { view_id: u32 },
    /// Refused: another side holds the vote; the asker shuts down
    /// (NDB: ARBIT_CHOOSEREF).
    18 => ArbitRef { view_id: u32, message: String },

    // ---- membership towards API nodes (30–39) ----
    /// An API node registers, and repeats it as its heartbeat (NDB: API_REGREQ).
    30 => ApiRegReq { version: u32 },
    /// The data node's answer with its state (NDB: API_REGCONF).
    31 => ApiRegConf { version: u32, started: bool, view_id: u32, members: NodeBitmask, heartbeat_interval_ms: u32 },
    /// Registration refused (NDB: API_REGREF).
    32 => ApiRegRef { reason: RegRefReason },
    /// Membership → the local TC instances: API node `node` is gone (its
    /// connection closed or its heartbeats stopped); its transactions
    /// can never be finished by it (NDB: API_FAILREQ).
    33 => ApiFailRep { node: NodeId },

    // ---- management protocol (40–59) ----
    /// A node asks the mgmd for a node id and the configuration.
    40 => MgmAllocNodeIdReq { requested: Option<NodeId>, node_type: NodeType, version: u32, pid: u32, hostname: String },
    /// The node id granted and the cluster's configuration file, verbatim.
    41 => MgmAllocNodeIdConf { node_id: NodeId, config_ini: String, config_name: String },
    42 => MgmAllocNodeIdRef { message: String },
    /// A data node's periodic report of itself; doubles as its heartbeat to the mgmd.
    43 => MgmNodeStatusRep {
        state: NodeState, pid: u32, version: u32, view_id: u32, president: Option<NodeId>, members: NodeBitmask,
    },
    /// An event for the cluster log: written when its severity is on and
    /// its `level` is at most its category's threshold for the sender.
    44 => MgmEventRep { severity: Severity, category: EventCategory, level: u8, text: String },
    45 => MgmShowReq {},
    46 => MgmShowConf { nodes: Vec<NodeStatusEntry> },
    /// Stop (or restart) one data node, or all when `node` is none.
    /// Without `force`, a stop or restart of one node that would leave its
    /// node group with no serving node is refused (`MgmStopRef`).
    47 => MgmStopReq { node: Option<NodeId>, restart: bool, force: bool },
    48 => MgmStopConf { nodes: Vec<NodeId> },
    49 => MgmStopRef { message: String },
    /// The mgmd orders a data node to stop; with `restart` its angel starts it again.
    50 => MgmStopOrd { restart: bool },
    /// Stop every data node, then the mgmd itself (answered with `MgmStopConf` first).
    51 => MgmShutdownReq {},
    /// The mgmd → a starting data node's membership: data node `node` said
    /// it will not take part in a start (`CmNotJoiningRep`, damaged files)
    /// and has not started since; the join phase need not wait for it. The
    /// relay reaches the nodes that start after the damaged one stopped,
    /// which its own notice no longer can.
    52 => MgmNotJoiningRep { node: NodeId, reason: String },
    /// What the cluster log writes (NDB's `CLUSTERLOG`): `action` with
    /// `severities` for On/Off/Toggle, `nodes`, `category` and
    /// `threshold` for Threshold (ignored otherwise).
    53 => MgmClusterLogReq {
        action: ClusterLogAction, severities: Vec<Severity>, nodes: Vec<NodeId>,
        category: EventCategory, threshold: u8,
    },
    /// The filter after the request: whether the log is on, the
    /// severities written, and every configured node's thresholds.
    54 => MgmClusterLogConf { enabled: bool, severities: Vec<Severity>, thresholds: Vec<EventThreshold> },
    55 => MgmClusterLogRef { message: String },

    // ---- transport (60–69): consumed by the transport itself ----
    /// First frame on a new connection, from each side: who I am, whom I
    /// believe I am talking to, and my version.
    60 => TransportHello { from: NodeId, to: NodeId, version: u32 },

    // ---- dictionary (70–89), NDB: DBDICT ----
    /// Create a table (NDB: CREATE_TABLE_REQ). `table` is an encoded
    /// `TableDef` with id 0; the master assigns ids and version 1.
    70 => DictCreateTableReq { request_id: u32, table: Vec<u8> },
    /// The table exists on every member (NDB: CREATE_TABLE_CONF).
    71 => DictCreateTableConf { request_id: u32, table_id: u32, version: u32 },
    /// Refused (NDB: CREATE_TABLE_REF); `code` is an NDB-style error code.
    72 => DictCreateTableRef { request_id: u32, code: u32, message: String },
    /// Drop a table with its hidden tables (NDB: DROP_TABLE_REQ).
    73 => DictDropTableReq { request_id: u32, table_id: u32 },
    74 => DictDropTableConf { request_id: u32, table_id: u32 },
    75 => DictDropTableRef { request_id: u32, code: u32, message: String },
    /// Alter a table (NDB: ALTER_TABLE_REQ): `table` is the new definition,
    /// made from the current one (same version); only added columns, added
    /// indexes and dropped indexes are allowed.
    76 => DictAlterTableReq { request_id: u32, table_id: u32, table: Vec<u8> },
    77 => DictAlterTableConf { request_id: u32, table_id: u32, version: u32 },
    78 => DictAlterTableRef { request_id: u32, code: u32, message: String },
    /// Master → every member: make this change durable as *prepared*
    /// (NDB: SCHEMA_TRANS_IMPL_REQ, prepare phase). `group` is the table's
    /// new group (empty for a drop); `schema_version` and `next_object_id`
    /// are the dictionary's after the commit.
    79 => DictSchemaPrepare {
        trans_id: u64, op: SchemaOp, table_id: u32, schema_version: u32, next_object_id: u32,
        group: DictTableGroup,
    },
    /// Participant → master: prepared durably (NDB: SCHEMA_TRANS_IMPL_CONF).
    80 => DictSchemaPrepared { trans_id: u64 },
    /// Participant → master: could not prepare (NDB: SCHEMA_TRANS_IMPL_REF).
    81 => DictSchemaPrepareRef { trans_id: u64, message: String },
    /// Master → participants: install the prepared change (NDB: commit phase).
    82 => DictSchemaCommit { trans_id: u64 },
    /// Participant → master: installed and synced to disk.
    83 => DictSchemaCommitted { trans_id: u64 },
    /// Master → participants: forget the prepared change.
    84 => DictSchemaAbort { trans_id: u64 },
    /// A joining member asks the master for the whole schema (NDB: GET_SCHEMA_INFOREQ).
    85 => DictGetSchemaReq {},
    /// The master's schema, in parts: `tables` are groups, `last` marks the
    /// final part (NDB: SCHEMA_INFO).
    86 => DictSchemaRep {
        tables: Vec<DictTableGroup>, version: u32, next_object_id: u32, last: bool,
    },
    /// A new master asks every member where it stands (NDB: DICT_TAKEOVER_REQ).
    87 => DictTakeoverReq { view_id: u32 },
    88 => DictTakeoverConf { view_id: u32, trans_id: u64, state: SchemaTransState },
    /// Membership → the dictionary of its own node: this view was installed
    /// (the dictionary master is the view's president).
    89 => MembershipViewRep { view: MembershipView },

    // ---- schema towards local blocks and API nodes (90–99) ----
    /// Dictionary → each local TC and LDM instance: the whole schema, at
    /// start (after loading it from disk) and whenever the node adopts the
    /// master's schema. The receiver replaces what it had; an LDM instance
    /// opens its fragments (restore from disk) on the first one.
    /// `cluster_schema`: this is the cluster's schema (the master's own, or
    /// taken from it), not what a joining node read from its disk; a
    /// starting LDM waits for it before it lets the restart go on.
    90 => SchemaLoadReq { tables: Vec<DictTableGroup>, schema_version: u32, cluster_schema: bool },
    /// Loaded (for an LDM instance: its fragments restored); `code` is 0
    /// or the error that makes the node restart.
    91 => SchemaLoadConf { schema_version: u32, code: u32, message: String },
    /// Dictionary → each local TC and LDM instance, while committing a
    /// schema transaction: install this change before the commit is
    /// answered, so that no operation can reach a block that does not know
    /// a table its client was told exists. `group` is empty for a drop.
    92 => SchemaChangeReq { op: SchemaOp, table_id: u32, schema_version: u32, group: DictTableGroup },
    93 => SchemaChangeConf { table_id: u32, schema_version: u32, code: u32, message: String },
    /// API → any dictionary: a table's definition, by id, or by name when
    /// `table_id` is 0 (NDB: GET_TABINFOREQ).
    94 => DictGetTableReq { request_id: u32, table_id: u32, name: String },
    /// The table's group: the base table first, then its hidden tables.
    95 => DictGetTableConf { request_id: u32, group: DictTableGroup },
    96 => DictGetTableRef { request_id: u32, code: u32, message: String },

    // ---- transaction coordinator (100–119), NDB: DBTC ----
    /// API → TC: operations of one transaction (`proto::ops` batch; NDB:
    /// TCKEYREQ, many in one). `flags`: `tc_flags::START` begins the
    /// transaction, `COMMIT` commits it after these operations, `ROLLBACK`
    /// (no operations) aborts it. Answered by exactly one `TcKeyConf` or
    /// `TcKeyRef`, sent to the sender of the request.
    100 => TcKeyReq { tx_id: u64, flags: u32, ops: Vec<u8> },
    /// TC → API: every operation of the request is done (`proto::results`:
    /// per operation its outcome, and for reads the values). `flags`:
    /// `tc_flags::COMMITTED` (then `epoch` is the commit's epoch,
    /// `crate::epoch`: its hi is the global checkpoint `TcWaitGciReq` waits
    /// for) or `ROLLED_BACK` (`epoch` 0). `incarnation` names the cluster
    /// incarnation the epoch belongs to (docs/transactions.md, "Global
    /// checkpoints": GCI numbers start over above the restored one after
    /// a system restart); 0 when the sender does not know it.
    101 => TcKeyConf { tx_id: u64, flags: u32, epoch: u64, incarnation: u32, results: Vec<u8> },
    /// TC → API: the transaction failed and is rolled back (NDB: TCKEYREF,
    /// TCROLLBACKREP). `op_index` is the failing operation's, or
    /// `u32::MAX`; `code` is a `proto::error` code.
    102 => TcKeyRef { tx_id: u64, code: u32, op_index: u32, message: String },
    /// API → TC: start a scan in the transaction (`proto::scan::ScanSpec`;
    /// NDB: SCAN_TABREQ). `flags` may hold `tc_flags::START`, `PUSHED` and
    /// `RELEASE`.
    103 => TcScanReq { tx_id: u64, scan_id: u32, flags: u32, spec: Vec<u8> },
    /// TC → API: a batch of rows (`proto::scan` row batch); `done` when the
    /// scan has no more rows and is closed (NDB: SCAN_TABCONF). `released`
    /// (with `done` only): the scan asked `tc_flags::RELEASE` and its
    /// transaction, which held nothing else, is ended at the TC.
    104 => TcScanConf { tx_id: u64, scan_id: u32, rows: Vec<u8>, done: bool, released: bool },
    /// API → TC: send the next batch, or close the scan (NDB: SCAN_NEXTREQ).
    105 => TcScanNextReq { tx_id: u64, scan_id: u32, close: bool },
    /// TC → API: the scan failed and is closed; the transaction is rolled
    /// back when the error is not the scan's alone (NDB: SCAN_TABREF).
    106 => TcScanRef { tx_id: u64, scan_id: u32, code: u32, message: String },
    /// API → TC: answer when global checkpoint `gci` of cluster
    /// `incarnation` (as `TcKeyConf` named it; 0: the current one) is
    /// durable.
    107 => TcWaitGciReq { gci: u32, incarnation: u32 },
    /// TC → API: `durable_gci` ≥ the GCI asked for is durable cluster-wide
    /// (for an earlier incarnation: the GCI the system restart restored).
    /// `gci` and `incarnation` are the request's.
    108 => TcWaitGciConf { gci: u32, incarnation: u32, durable_gci: u32 },
    /// Distribution master → its own node's TC instance 0: take over the
    /// transactions whose TC was on a node of `failed` (NDB: TAKE_OVERTCREQ).
    /// A new request (a larger `takeover_id`, for the union of the failed
    /// nodes) replaces one in progress. See docs/transactions.md, "Node failure".
    109 => TcTakeOverReq { takeover_id: u32, failed: NodeBitmask },
    /// TC → the distribution master: every transaction of the TCs of
    /// `failed` has its one outcome on every live replica.
    110 => TcTakeOverConf { takeover_id: u32, failed: NodeBitmask },
    /// Membership → its node's TCs: the node stops on purpose (`skarv admin
    /// stop`/`restart`); start no new transaction (280) and answer
    /// `TcShutdownConf` once none is left (NDB's graceful stop).
    111 => TcShutdownReq {},
    /// TC → its node's membership: no transaction or scan is left.
    112 => TcShutdownConf {},
    /// TC → the backup of a one-phase commit over two replicas whose
    /// primary's node failed before it answered (wire version 16;
    /// docs/transactions.md, "One-phase commit"): answer `LdmCommitConf`
    /// when this instance committed the transaction (the backup decides),
    /// else abort what it holds of it, drop a late request of it, and
    /// answer `LdmAbortConf`.
    113 => LdmOutcomeReq { tx_id: u64 },

    // ---- local data manager (120–139), NDB: DBLQH ----
    /// TC (or the previous replica's LDM) → LDM: operations of one
    /// transaction on partitions of this instance (`proto::ops`, each with
    /// its partition set; NDB: LQHKEYREQ). Operations of a transaction run
    /// in order on an instance. Writes go on to the next replica in
    /// `chain` (the replicas still to execute them, in order); the last
    /// replica, or the primary for reads and failed operations, answers
    /// `tc` with `LdmKeyConf`.
    120 => LdmKeyReq { tx_id: u64, tc: BlockRef, chain: Chain, ops: Vec<u8> },
    /// LDM → TC: outcomes of some operations (`proto::results`); an
    /// operation is answered exactly once, by the replica that finished it.
    /// `ok_in_order` (wire version 3), when not 0: `results` holds that many
    /// results, each a success, answering ops 0, 1, … in that order, so a TC
    /// can account for the common batch without reading it; 0 claims nothing.
    121 => LdmKeyConf { tx_id: u64, results: Vec<u8>, ok_in_order: u32 },
    /// A TC (taking over a failed TC's transactions) or a copy source → one
    /// LDM instance: commit in `epoch` (`crate::epoch`; its hi is the global
    /// checkpoint; wire version 9: was the GCI alone), answer the sender.
    122 => LdmCommitReq { tx_id: u64, epoch: u64 },
    /// The last LDM instance of a commit chain → `tc`: every instance of the
    /// chain committed.
    123 => LdmCommitConf { tx_id: u64, gci: u32 },
    /// TC → every LDM instance the transaction reached: drop its changes
    /// and locks, including operations still waiting for a lock (NDB: ABORT).
    124 => LdmAbortReq { tx_id: u64 },
    125 => LdmAbortConf { tx_id: u64 },
    /// TC → LDM: scan one partition (`proto::scan::ScanSpec`, its
    /// `partition` set); answered with `LdmScanConf` batches (NDB: SCAN_FRAGREQ).
    126 => LdmScanReq { tx_id: u64, scan_id: u32, spec: Vec<u8> },
    127 => LdmScanConf { tx_id: u64, scan_id: u32, partition: u32, rows: Vec<u8>, done: bool },
    /// TC → LDM: the next batch, or close (NDB: SCAN_NEXTREQ to LQH).
    128 => LdmScanNextReq { tx_id: u64, scan_id: u32, partition: u32, close: bool },
    129 => LdmScanRef { tx_id: u64, scan_id: u32, partition: u32, code: u32, message: String },
    /// Taking-over TC → every LDM instance of every live member: the
    /// transactions here whose TC was on a node of `failed`, and their state
    /// (NDB: LQH_TRANSREQ). From now on this instance drops requests from
    /// those TCs.
    130 => LdmTakeOverReq { takeover_id: u32, failed: NodeBitmask },
    /// The answer, in parts (`last` marks the final one): per transaction
    /// its id and `epoch` = 0 when it is prepared here (locks or changes not
    /// committed), else the epoch it committed in here (NDB: LQH_TRANSCONF;
    /// the whole epoch since wire version 11, so that the other replicas'
    /// commits, and their change stream entries, are in the same epoch).
    131 => LdmTakeOverConf { takeover_id: u32, tx_ids: Vec<u64>, epochs: Vec<u64>, last: bool },
    /// The linear commit (docs/transactions.md, "Commit and abort"): TC → the
    /// first LDM instance of a commit chain, then each instance → the next:
    /// commit in `epoch` (its hi the GCI; wire version 9), then pass this on to `next[0]` with the rest, or,
    /// when `next` is empty, answer `tc` with `LdmCommitConf` (NDB: COMMIT
    /// passed along the replicas from the last backup to the primary).
    132 => LdmCommitChainReq { tx_id: u64, epoch: u64, tc: BlockRef, next: RefChain },
    /// `LdmCommitChainReq` for each of `tx_ids` (wire version 4): commit
    /// chains that go through the same instances in the same order and
    /// commit in the same `epoch`, started by one TC at once, in one signal.
    /// Each instance commits every transaction, passes on in one signal
    /// those it committed now, and the last answers `tc` with
    /// `LdmCommitBatchConf`; one that must wait (redo log full) goes on
    /// alone, as `LdmCommitChainReq`, once committed.
    133 => LdmCommitBatchReq { epoch: u64, tc: BlockRef, next: RefChain, tx_ids: Vec<u64> },
    /// The last LDM instance of the chains of an `LdmCommitBatchReq` → `tc`:
    /// `LdmCommitConf` for each of `tx_ids` (wire version 4).
    134 => LdmCommitBatchConf { gci: u32, tx_ids: Vec<u64> },
    /// TC → the primary LDM instance of a transaction sent whole in one
    /// request to one instance (wire version 5; docs/transactions.md,
    /// "One-phase commit"): run `ops` as `LdmKeyReq` does and, when every
    /// one succeeded, commit in `epoch` (wire version 9) and answer `answer`
    /// with `LdmKeyCommitted`; when one failed, commit nothing and answer
    /// with `LdmKeyConf` (the TC aborts, as for any failed op). With a
    /// backup in `chain` (wire version 16; writes only) the primary passes
    /// the ops on to it as `LdmKeyCommitReq { chain: [], answer: primary }`:
    /// the backup decides, commits first and answers the primary, which
    /// then commits and answers the TC. `answer` is `tc` but there.
    135 => LdmKeyCommitReq {
        tx_id: u64,
        tc: BlockRef,
        epoch: u64,
        chain: Chain,
        answer: BlockRef,
        ops: Vec<u8>,
    },
    /// LDM → TC: the results of an `LdmKeyCommitReq` whose ops all succeeded
    /// and which is committed in `gci` (as `LdmKeyConf`, in parts when they
    /// do not fit one; every part says so). `pending` = 1: the commit waits
    /// here for redo log space and `LdmCommitConf` follows once it is done.
    136 => LdmKeyCommitted { tx_id: u64, gci: u32, pending: u32, results: Vec<u8>, ok_in_order: u32 },
    /// `LdmKeyReq` for each of `count` entries (wire version 5): the writes
    /// one LDM instance passes on to the same instance on the next replica's
    /// node, gathered over a round of its thread (docs/transactions.md, "Key
    /// batches"). `entries`: each request's fields back to back
    /// (`key_batch`); the receiver runs each as that `LdmKeyReq`, in order.
    137 => LdmKeyBatchReq { count: u32, entries: Vec<u8> },
    /// `LdmKeyConf` for each of `count` entries (wire version 5): the answers
    /// of one LDM instance to one TC gathered over a round of its thread,
    /// each answer's fields back to back (`key_batch`), taken in order.
    138 => LdmKeyConfBatch { count: u32, entries: Vec<u8> },
    /// TC → an LDM instance on the TC's own node (wire version 6;
    /// docs/transactions.md, "Reads answered by the LDM"): a transaction
    /// sent whole (`START | COMMIT`) whose ops are all committed reads of
    /// this instance's partitions. The TC keeps no record of it: the LDM
    /// runs the reads and answers the client `api` itself, as the TC would
    /// have (`TcKeyConf` committed in `epoch`, or `TcKeyRef` for the first
    /// failed op that did not ask to ignore its error).
    139 => LdmReadReq { tx_id: u64, api: BlockRef, epoch: u64, ops: Vec<u8> },

    // ---- global checkpoints (140–149), NDB: DBDIH's GCP protocol ----
    /// Distribution master → every TC, the first half of the switch to
    /// `epoch` (`crate::epoch`; NDB: GCP_PREPARE): hand out no commit
    /// epoch until `GcpCommitReq`; commits that reach their commit point wait.
    140 => GcpPrepareReq { epoch: u64 },
    /// TC → master: holding (answered at once).
    141 => GcpPrepareConf { epoch: u64 },
    /// Master → every LDM instance: make every change of GCI ≤ `gci`
    /// durable (NDB: GCP_SAVEREQ).
    142 => GcpSaveReq { gci: u32 },
    143 => GcpSaveConf { gci: u32 },
    /// Master → every TC: `gci` is durable on every live node (and kept
    /// in every member's sysfile). Distribution block → its node's LDM
    /// instances: `gci` is kept in this node's sysfile (local checkpoints
    /// may complete up to it).
    144 => GcpCompleteRep { gci: u32 },
    /// A distribution master that just took office (or saw a node join) →
    /// every TC and LDM instance of a member: the highest GCI you know (an
    /// LDM: the highest its redo log part holds, flushed or found at
    /// restart; a TC: the last one it was told to use), so that the
    /// master never hands out a GCI at or below one (NDB: GCP_NODEFINISH /
    /// the restart's GCI from DIH's sysfile).
    145 => GcpStartReq {},
    /// The answer: `gci` is that highest GCI, 0 when none. A TC adds the
    /// cluster incarnation it was told (`GcpCommitReq`; zeros: none), so
    /// that a master that takes over keeps it, and its current epoch and
    /// the one before it (0: none; an LDM answers zeros): the epochs an
    /// old master may not have reported complete everywhere, which a
    /// master that takes over reports (`SubGcpCompleteRep`) in its first
    /// round.
    146 => GcpStartConf {
        gci: u32,
        incarnation: u32,
        previous_incarnation: u32,
        restart_gci: u32,
        epoch: u64,
        previous_epoch: u64,
    },
    /// Distribution master → every member's distribution block: the
    /// transactions of the TCs of `failed` are taken over (each has its one
    /// outcome); GCPs no longer wait for them (NDB: the end of
    /// NODE_FAILREP handling in DIH).
    147 => TakeOverDoneRep { failed: NodeBitmask },
    /// Distribution master → the distribution block, every TC and every LDM
    /// instance of every member: the cluster-wide state of the data nodes
    /// (NDB: DIH's node states and UPDATE_FRAG_STATEREQ). A member of view
    /// `view_id` that is not in `serving` is *starting*: no reads and no
    /// primary work go to it; those in `receiving` are starting nodes that
    /// get every write of their partitions as the last backup. `running`:
    /// the cluster has handed out a GCI (a node joining now must copy).
    /// States are ordered by (`view_id`, `state_id`). TCs and LDMs answer
    /// `NodeStateConf`; see docs/recovery.md, "Node restart".
    148 => NodeStateReq { view_id: u32, state_id: u32, running: bool, serving: NodeBitmask, receiving: NodeBitmask },
    /// TC or LDM → master: routing follows state `state_id`; a TC also has
    /// no transaction left that began before it saw a node in `receiving`;
    /// an LDM of a starting node has emptied its fragments.
    149 => NodeStateConf { state_id: u32 },
    /// Master → every LDM instance of a receiving node: copy every
    /// fragment from its serving primary, make the copy durable (a local
    /// checkpoint), then answer `NodeCopyConf` (NDB: START_COPYREQ).
    150 => NodeCopyReq {},
    151 => NodeCopyConf {},
    /// Starting node's LDM → the serving primary's LDM instance: send me
    /// every row of the fragment (NDB: COPY_FRAGREQ). Rows travel as
    /// `LdmKeyReq` writes of copy transactions, each committed
    /// (`LdmCommitReq` with GCI 0: the receiver's own) before the next.
    152 => CopyFragReq { copy_id: u32, table_id: u32, partition: u32 },
    /// The source → the starting LDM: the fragment is copied (`code` 0) or
    /// the copy failed (a `proto::error` code, temporary: ask again).
    153 => CopyFragConf { copy_id: u32, table_id: u32, partition: u32, rows: u64, code: u32, message: String },

    /// An LDM instance whose local checkpoint waits for GCI `gci` to be
    /// durable while its redo log part fills, or a stopping TC whose
    /// commits are in `gci` (`tc::shutdown`) → its node's distribution
    /// block, which passes it on to the master once: start the next GCP now
    /// rather than when `TimeBetweenGlobalCheckpoints` runs out, so that
    /// the checkpoint completes and frees redo before writes must be
    /// refused (error 410), or the stop loses no commit. Skarv's own (wire
    /// version 4).
    154 => GcpHurryReq { gci: u32 },

    // ---- system restart (160–165), NDB: DIH's sysfile (COPY_GCIREQ) and restart GCI ----
    /// Distribution master → every member's distribution block, after
    /// every LDM saved `gci`: record durably (the sysfile) that `gci` is
    /// complete cluster-wide and that `serving` were the serving nodes that
    /// saved it, then tell the local LDMs (`GcpCompleteRep`) and answer.
    /// `GcpCompleteRep` reaches the TCs only once every member answered, so
    /// a GCI a client is told durable is kept on every node's disk.
    /// `incarnation`: the cluster incarnation that completed `gci`.
    160 => GcpKeepReq { gci: u32, serving: NodeBitmask, incarnation: u32 },
    161 => GcpKeepConf { gci: u32 },
    /// A master starting a cluster from all nodes down → every member's
    /// distribution block: what your sysfile keeps.
    162 => RestartInfoReq {},
    /// The answer: the last GCI kept complete (0: none) and the nodes that
    /// were serving at it, and the cluster incarnation that completed it.
    163 => RestartInfoConf { kept_gci: u32, serving: NodeBitmask, incarnation: u32 },
    /// Master → every LDM instance of a node that was serving at the
    /// restart GCI `gci`: restore exactly to `gci` (voiding what is above).
    164 => RestartGciReq { gci: u32 },
    /// The answer: `restored` when the instance holds exactly `gci` now;
    /// otherwise the node starts empty and copies (node restart).
    165 => RestartGciConf { gci: u32, restored: bool },

    // ---- global checkpoints, continued ----
    /// Distribution master → every TC, once every TC answered
    /// `GcpPrepareReq { epoch }` (NDB: GCP_COMMIT): commits from now on
    /// belong to `epoch`; the held ones go on. `incarnation` is the
    /// cluster's incarnation (a random id chosen at each system restart or
    /// first start), `previous_incarnation` the one whose kept GCI the
    /// last system restart restored, `restart_gci` that GCI (0, 0: none).
    166 => GcpCommitReq { epoch: u64, incarnation: u32, previous_incarnation: u32, restart_gci: u32 },
    /// TC → master: no commit of an epoch below `epoch` is in progress
    /// here (NDB: GCP_NODEFINISH).
    167 => GcpCommitConf { epoch: u64 },
    /// Master → every TC and every LDM instance: no commit of `epoch` or
    /// below can still be in progress on any TC (NDB: SUB_GCP_COMPLETE_REP).
    /// Not durability: see `GcpCompleteRep`. An LDM instance passes it on to
    /// its node's subscription block behind the row changes it captured
    /// (docs/events.md), so that block sees an epoch's mark from an
    /// instance only after every change of the epoch from it.
    168 => SubGcpCompleteRep { epoch: u64 },
    /// TC → API: global checkpoint `gci` of `incarnation` will never be
    /// durable (`proto::error::COMMIT_LOST_BY_RESTART`: a system restart
    /// went back below it) or the TC cannot tell (`DURABILITY_UNKNOWN`,
    /// `NOT_STARTED`).
    169 => TcWaitGciRef { gci: u32, incarnation: u32, code: u32, message: String },
    /// Distribution → its own node's membership block: whether the node
    /// serves now (the master's last `NodeStateReq` lists it serving), sent
    /// when that changes. Membership reports the node started to the mgmd
    /// only while it serves: a node restart copying its fragments is still
    /// starting, as NDB's `ndb_mgm` shows it.
    170 => NodeServingRep { serving: bool },
    /// An LDM instance → its own node's membership block: this node cannot
    /// start (its files are damaged and no flag lets it discard them). In
    /// the join phase membership tells the other data nodes first
    /// (`CmNotJoiningRep`), then stops the node as failed.
    171 => StartFailedRep { reason: String },
    /// Membership of a node that will not take part in this start → the
    /// membership blocks of the other data nodes: do not wait for me
    /// (`StartPartialTimeout`); what is left may start without me.
    172 => CmNotJoiningRep { reason: String },

    // ---- schema towards API nodes, continued ----
    /// API → any dictionary: list the base tables whose id is above
    /// `after_id` (SQL's `SHOW TABLES`; NDB: LIST_TABLES_REQ). A long list
    /// comes in parts, each asked for by a request of its own (the API's
    /// requests take one answer each): the next part's `after_id` is the
    /// last id of the part before.
    173 => DictListTablesReq { request_id: u32, after_id: u32 },
    /// The base tables the answering node knows (hidden ones left out), by
    /// ascending id, at most `SCHEMA_REP_PART_BYTES_MAX` of names; `last`
    /// when no table with a larger id is left (NDB: LIST_TABLES_CONF).
    174 => DictListTablesConf { request_id: u32, tables: Vec<DictTableName>, last: bool },

    // ---- transactions, continued ----
    /// LDM → the TC of a transaction that holds locks or changes on a table
    /// an ALTER TABLE has waited for too long (`ALTER_ABORT_AFTER`): abort
    /// it, unless it is already committing; `message` says why (NDB has no
    /// such signal: its online alter takes a schema lock first).
    175 => TcAbortTxReq { tx_id: u64, message: String },

    // ---- the change stream (docs/events.md; wire version 9) ----
    /// API → the subscription block of every data node: send me the
    /// committed row changes of `tables` (ids), per epoch, from the first
    /// epoch that is whole on this node on (NDB: SUB_START_REQ). `sub_id`
    /// is the API's name for the subscription; `flags`: `sub_flags`.
    176 => SubStartReq { sub_id: u32, flags: u32, tables: Vec<u32> },
    /// The answer: epochs above `start_epoch` come whole, each as its
    /// `SubEpochData` parts (the last one `complete`), in ascending order;
    /// they are epochs of cluster incarnation `incarnation` (wire version
    /// 18; docs/events.md, "A whole-cluster restart").
    177 => SubStartConf { sub_id: u32, start_epoch: u64, incarnation: u32 },
    /// The refusal (`code`, a `proto::error` code, and why).
    178 => SubStartRef { sub_id: u32, code: u32, message: String },
    /// API → subscription block: end the subscription (no answer).
    179 => SubStopReq { sub_id: u32 },
    /// Subscription block → each LDM instance of its node: capture the
    /// committed changes of `tables` (the whole set; empty: none) from now
    /// on, and answer `SubCaptureConf`.
    180 => SubCaptureReq { tables: Vec<u32> },
    /// LDM → subscription block: capturing as asked; `max_epoch` is the
    /// highest epoch of a commit this instance ran before (an epoch above
    /// it is captured whole here). `followed`: (replaced table, copy)
    /// pairs, flattened, of copies captured besides the tables asked for
    /// because they replace one of them (a copying ALTER, wire version
    /// 19): the block adds each copy to the subscriptions of its replaced
    /// table.
    181 => SubCaptureConf { max_epoch: u64, followed: Vec<u32> },
    /// LDM → its node's subscription block: `count` row changes committed
    /// in `epoch` (`sub_change` entries back to back); or, with `epoch`
    /// `sub_change::SCHEMA_EPOCH`, one schema entry: a captured table's
    /// alter or drop applied on this instance (wire version 13).
    182 => SubTableData { epoch: u64, count: u32, changes: Vec<u8> },
    /// Subscription block → API: `count` changes of `epoch` (`sub_change`
    /// entries) of bucket `bucket`: the partitions whose placement primary
    /// is that data node (NDB: a bucket), which the sending node owns for
    /// this subscription (its own, or taken over from a failed node, then
    /// first resent from the subscriber's last acknowledgement on);
    /// `complete` on the last part of the epoch's bucket, which may hold
    /// none (an epoch without changes of the subscribed tables still comes).
    /// The API takes each (epoch, bucket) once: the first whole one.
    183 => SubEpochData { sub_id: u32, epoch: u64, bucket: NodeId, count: u32, changes: Vec<u8>, complete: bool },
    /// Subscription block → API: the epochs `from` to `to` (both included)
    /// are lost to the subscription, which is ended (its buffers overflowed:
    /// `MaxBufferedEpochs` or `MaxBufferedEpochBytes`).
    184 => SubGapRep { sub_id: u32, from: u64, to: u64 },
    /// API → the subscription block of every data node it is subscribed
    /// at: I hold every epoch up to `epoch` of the subscription, every
    /// bucket of it (NDB: SUB_GCP_COMPLETE_ACK, which NDB's API sends to
    /// one SUMA and that one to all); every replica may drop them.
    /// An API that stays `MaxBufferedEpochs` behind is cut off with a gap.
    185 => SubGcpCompleteAck { sub_id: u32, epoch: u64 },

    // ---- ndbinfo (docs/operations.md, "ndbinfo"; wire version 12) ----
    /// API → the membership block of every data node: the rows of ndbinfo
    /// table `table` (a name of `dbinfo::TABLES`) as this node has them
    /// now, read from figures its blocks keep (NDB: DBINFO_SCANREQ).
    186 => DbinfoScanReq { request_id: u32, table: String },
    /// The rows, each laid out by the table's columns (`dbinfo::Row`);
    /// every row of a node fits one signal (NDB: DBINFO_SCANCONF).
    187 => DbinfoScanConf { request_id: u32, rows: Vec<DbinfoRow> },
    /// Refused: no such table (`code`, a `proto::error` code, and why; NDB:
    /// DBINFO_SCANREF).
    188 => DbinfoScanRef { request_id: u32, code: u32, message: String },

    // ---- the change stream: holders (docs/events.md, "Take-over"; wire version 15) ----
    /// Subscription block of a restarted node → those of its node group's
    /// other live nodes: API `api`'s subscription `sub_id`, subscribed here
    /// again (`sub_flags::RESUBSCRIBE`), is served by this node, which holds
    /// every epoch above `start_epoch` (NDB's SUMA learns the subscriptions
    /// while its node starts instead). A node that sends the restarted
    /// node's own bucket for it hands it back (`SubHandbackConf`).
    189 => SubHolderReq { api: BlockRef, sub_id: u32, start_epoch: u64 },
    /// The answer of a node that serves the subscription: the nodes it
    /// knows to serve it, each with the epoch above which it holds every
    /// epoch (`starts[i]` for `nodes[i]`; 0: since the subscription began).
    190 => SubHolderConf { api: BlockRef, sub_id: u32, nodes: Vec<NodeId>, starts: Vec<u64> },
    /// A node that sent bucket `bucket` of the subscription for the
    /// restarted node it is named by → that node: this node sent it up to
    /// epoch `last_epoch` (at least the `SubHolderReq`'s start) and sends
    /// it no more; the bucket is the restarted node's from the next epoch
    /// on (NDB: SUMA_HANDOVER_CONF).
    191 => SubHandbackConf { api: BlockRef, sub_id: u32, bucket: NodeId, last_epoch: u64 },

    // ---- online backup (docs/operations.md, "How it is taken"; wire version 17) ----
    /// API (a backup) → the LDM instance of the node holding the primary
    /// replica of `partition` of table `table_id` at version
    /// `table_version`: write the fragment's next committed rows, at most
    /// `rows_max` (1..=`backup_frag::ROWS_MAX`), to the backup data file
    /// `path` on this node (NDB: the BACKUP block's fragment scan). With
    /// `backup_frag::START` the file is created (it must not exist) and
    /// the scan starts; with `backup_frag::CLOSE` the scan ends and the
    /// file is left as it is, unsynced (an aborted backup).
    192 => BackupFragReq {
        request_id: u32, backup_id: u32, table_id: u32, table_version: u32,
        partition: u32, rows_max: u32, flags: u32, path: String,
    },
    /// The rows written so far and the file's length; `done` once the
    /// fragment's last row is written and the file synced.
    193 => BackupFragConf { request_id: u32, rows: u64, bytes: u64, done: bool },
    /// Refused, or failed (`code`, a `proto::error` code, and why, naming
    /// the node, table, partition and file); the scan is closed.
    194 => BackupFragRef { request_id: u32, code: u32, message: String },
    /// API (a backup) → every LDM instance of every live data node: the
    /// backup's log on this node (NDB: the BACKUP block's log). With
    /// `backup_log::START`: create the log file `path` (it must not exist)
    /// and from now on append every committed change of tables `tables`
    /// in the fragments this node is the primary of, each with its epoch.
    /// With `backup_log::STOP`: once epoch `stop_epoch` is complete here
    /// (every change of it and below is in the file), write the rest,
    /// sync the file and answer. With `backup_log::CLOSE`: stop now and
    /// leave the file (an aborted backup).
    195 => BackupLogReq { request_id: u32, backup_id: u32, flags: u32, stop_epoch: u64, tables: Vec<u32>, path: String },
    /// The records and bytes written so far; `epoch`: at the start the
    /// highest epoch committed here, at the end the stop epoch; `done`
    /// once the file is complete and synced.
    196 => BackupLogConf { request_id: u32, records: u64, bytes: u64, epoch: u64, done: bool },
    /// Refused, or the log failed (a table altered or dropped, the
    /// primaries moved, a write failed): why; the log is closed.
    197 => BackupLogRef { request_id: u32, code: u32, message: String },

    // ---- the change stream: a whole-cluster restart (docs/events.md; wire version 18) ----
    /// TC → its node's subscription block, once, when the TC learns the
    /// cluster incarnation (`GcpCommitReq`): the incarnation its epochs
    /// are of, and the system restart that began it (`restart_gci`
    /// restored of `previous_incarnation`; zeros: a first start).
    198 => SubIncarnationRep { incarnation: u32, previous_incarnation: u32, restart_gci: u32 },
    /// Subscription block → API, the answer to `SubStartReq` with
    /// `sub_flags::RESUBSCRIBE` at a restarted node when no node of its
    /// group kept the subscription: the cluster restarted from disk since
    /// (a system restart), now in incarnation `incarnation`, which began by
    /// restoring GCI `restart_gci` of `previous_incarnation`. The
    /// subscription is gone here; the API subscribes anew (docs/events.md).
    199 => SubLostRef { sub_id: u32, incarnation: u32, previous_incarnation: u32, restart_gci: u32, message: String },
}

/// `BackupFragReq`: flags and limits.
pub mod backup_frag {
    /// Create the file and start the fragment's scan.
    pub const START: u32 = 1;
    /// End the scan without writing more (the backup was aborted).
    pub const CLOSE: u32 = 2;
    /// Most rows one request writes: one fragment scan batch, so one
    /// request costs the LDM thread about what a scan batch does.
    pub const ROWS_MAX: u32 = 4_096;
}

/// `BackupLogReq`: flags.
pub mod backup_log {
    /// Create the log file and start logging.
    pub const START: u32 = 1;
    /// Complete the log at the stop epoch.
    pub const STOP: u32 = 2;
    /// Stop logging now (the backup failed or was aborted).
    pub const CLOSE: u32 = 4;
}

/// Flags of `SubStartReq`.
pub mod sub_flags {
    /// Before images of updates and deletes too (`--images full`, MySQL's
    /// `binlog_row_image=FULL`); without it the before image of an update
    /// is its key and changed columns, cut down by the subscriber (the data
    /// node sends both images either way in this version).
    pub const FULL_IMAGES: u32 = 1;
    /// The API subscribed before and this node restarted since: the node
    /// owns no bucket for it (the survivors that took the node's buckets
    /// over keep them) until a failure hands it some.
    pub const RESUBSCRIBE: u32 = 2;
}

/// The row change entries of `SubTableData` and `SubEpochData`, back to
/// back: kind (u8: 1 insert, 2 update, 3 delete, 4 alter, 5 drop), flags (u8: none yet, 0),
/// table id (u32), table version
/// (u32), partition (u32), then the before image and the after image, each
/// a u32 length followed by the row's bytes (`schema::row`: the fixed part
/// then the var part; length 0: none). Little-endian.
pub mod sub_change {
    /// An inserted row: an after image only.
    pub const INSERT: u8 = 1;
    /// An updated row: both images.
    pub const UPDATE: u8 = 2;
    /// A deleted row: a before image only.
    pub const DELETE: u8 = 3;
    /// A schema entry (wire version 13): the table was altered; `version`
    /// is its new version, the after image its new definition
    /// (`schema::TableDef::encode`), no before image. Every bucket's part of the epoch it
    /// is filed in carries it: the bucket's changes before it are of the
    /// old definition, those after of the new (docs/events.md).
    pub const ALTER: u8 = 4;
    /// A schema entry: the table was dropped (`version`: its last); no
    /// change of it follows.
    pub const DROP: u8 = 5;
    /// A schema entry (wire version 19): the table (a copying ALTER
    /// TABLE's copy, `version` its version) took the name of the table
    /// whose id is the before image (`u32`, little-endian) and replaces
    /// it: a subscriber of that table gets this one's changes from here
    /// on. The after image is its definition, as an alter's. See
    /// docs/events.md, "A copying ALTER".
    pub const REPLACE: u8 = 6;
    /// The partition of a schema entry: it belongs to every bucket.
    pub const ALL_PARTITIONS: u32 = u32::MAX;
    /// `SubTableData`'s epoch when it carries a schema entry from an LDM
    /// instance: no commit's epoch; the subscription block files it.
    pub const SCHEMA_EPOCH: u64 = 0;

    /// Whether `kind` is a schema entry's.
    pub fn is_schema(kind: u8) -> bool {
        kind == ALTER || kind == DROP || kind == REPLACE
    }

    /// The replaced table's id in a [`REPLACE`] entry's before image.
    pub fn replaced_table(entry: &Entry<'_>) -> Option<u32> {
        let bytes: [u8; 4] = entry.before.try_into().ok()?;
        (entry.kind == REPLACE).then(|| u32::from_le_bytes(bytes))
    }
    /// Bytes of an entry before its images: kind, flags, table, version,
    /// partition.
    pub const HEADER_BYTES: usize = 14;

    /// One entry, decoded; the images borrow the signal's bytes.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Entry<'a> {
        pub kind: u8,
        pub flags: u8,
        pub table: u32,
        pub version: u32,
        pub partition: u32,
        pub before: &'a [u8],
        pub after: &'a [u8],
    }

    /// Appends one entry to `out`.
    pub fn push(out: &mut Vec<u8>, entry: &Entry<'_>) {
        out.push(entry.kind);
        out.push(entry.flags);
        out.extend_from_slice(&entry.table.to_le_bytes());
        out.extend_from_slice(&entry.version.to_le_bytes());
        out.extend_from_slice(&entry.partition.to_le_bytes());
        for image in [entry.before, entry.after] {
            out.extend_from_slice(&(image.len() as u32).to_le_bytes());
            out.extend_from_slice(image);
        }
    }

    /// Bytes `entry` takes.
    pub fn size(entry: &Entry<'_>) -> usize {
        HEADER_BYTES + 8 + entry.before.len() + entry.after.len()
    }

    /// The entries of `bytes`, in order; an entry cut short or of an
    /// unknown kind ends it with an error (bytes from the network).
    pub fn entries(bytes: &[u8]) -> Entries<'_> {
        Entries { rest: bytes }
    }

    /// Iterator of [`entries`].
    #[derive(Clone, Debug)]
    pub struct Entries<'a> {
        rest: &'a [u8],
    }

    impl<'a> Iterator for Entries<'a> {
        type Item = Result<Entry<'a>, String>;

        fn next(&mut self) -> Option<Self::Item> {
            if self.rest.is_empty() {
                return None;
            }
            let parsed = parse(self.rest);
            match parsed {
                Ok((entry, used)) => {
                    self.rest = &self.rest[used..];
                    Some(Ok(entry))
                }
                Err(e) => {
                    self.rest = &[];
                    Some(Err(e))
                }
            }
        }
    }

    fn parse(bytes: &[u8]) -> Result<(Entry<'_>, usize), String> {
        let short = || format!("row change entry cut short ({} bytes)", bytes.len());
        if bytes.len() < HEADER_BYTES {
            return Err(short());
        }
        let u32_at = |at: usize| -> Option<u32> {
            let b = bytes.get(at..at + 4)?;
            Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        };
        let kind = bytes[0];
        if !(INSERT..=REPLACE).contains(&kind) {
            return Err(format!("row change entry of unknown kind {kind}"));
        }
        let table = u32_at(2).ok_or_else(short)?;
        let version = u32_at(6).ok_or_else(short)?;
        let partition = u32_at(10).ok_or_else(short)?;
        let mut at = HEADER_BYTES;
        let mut image = || -> Result<&[u8], String> {
            let len = u32_at(at).ok_or_else(short)? as usize;
            let start = at + 4;
            let end = start
                .checked_add(len)
                .filter(|&e| e <= bytes.len())
                .ok_or_else(short)?;
            at = end;
            Ok(&bytes[start..end])
        };
        let before = image()?;
        let after = image()?;
        let entry = Entry {
            kind,
            flags: bytes[1],
            table,
            version,
            partition,
            before,
            after,
        };
        Ok((entry, at))
    }
}

/// Flags of `TcKeyReq`, `TcScanReq` and `TcKeyConf`.
pub mod tc_flags {
    /// The request begins a new transaction.
    pub const START: u32 = 1;
    /// Commit the transaction after the request's operations.
    pub const COMMIT: u32 = 2;
    /// Roll the transaction back (a request without operations).
    pub const ROLLBACK: u32 = 4;
    /// In `TcScanReq`: `spec` is a `proto::QueryTree`, a pushed join whose
    /// joined rows come back as the scan's rows (docs/pushed-joins.md).
    pub const PUSHED: u32 = 8;
    /// In `TcScanReq`: when the scan has returned its last row, or is
    /// closed, and its transaction holds nothing else at the TC (no
    /// operation, lock or other scan), the TC ends the transaction and says
    /// so in the last `TcScanConf` (`released`): the client's commit then
    /// needs no round trip. The client sends nothing else for the transaction while such
    /// a scan is open, so nothing can reach the TC after the end.
    pub const RELEASE: u32 = 16;
    /// In `TcKeyConf`: the transaction is committed.
    pub const COMMITTED: u32 = 1;
    /// In `TcKeyConf`: the transaction is rolled back, as asked.
    pub const ROLLED_BACK: u32 = 2;
}

impl SignalBody {
    /// The byte payload (op batch or result batch) of a key-operation
    /// signal, which a runtime can reuse once the signal is sent; `None`
    /// for every other signal.
    pub fn into_payload(self) -> Option<Vec<u8>> {
        match self {
            SignalBody::TcKeyReq { ops, .. }
            | SignalBody::LdmKeyReq { ops, .. }
            | SignalBody::LdmKeyCommitReq { ops, .. }
            | SignalBody::LdmReadReq { ops, .. }
            | SignalBody::LdmKeyBatchReq { entries: ops, .. } => Some(ops),
            SignalBody::TcKeyConf { results, .. }
            | SignalBody::LdmKeyConf { results, .. }
            | SignalBody::LdmKeyCommitted { results, .. }
            | SignalBody::LdmKeyConfBatch {
                entries: results, ..
            } => Some(results),
            _ => None,
        }
    }

    /// Bytes of operations a request carries (its op batch): how much work
    /// executing it takes, roughly; 0 for every other signal.
    pub fn request_payload_len(&self) -> usize {
        match self {
            SignalBody::TcKeyReq { ops, .. }
            | SignalBody::LdmKeyReq { ops, .. }
            | SignalBody::LdmKeyCommitReq { ops, .. }
            | SignalBody::LdmReadReq { ops, .. }
            | SignalBody::LdmKeyBatchReq { entries: ops, .. } => ops.len(),
            _ => 0,
        }
    }

    /// Signals that only the runtime of a node may create: a frame from the
    /// network carrying one of these is refused.
    pub fn is_local_only(&self) -> bool {
        self.gsn() < 10
    }

    /// Signals an API node may send a data node: its registration, its
    /// requests to a TC or a dictionary, and its subscriptions' requests
    /// to the subscription block, ndbinfo scans (`DbinfoScanReq`, to
    /// the membership block, which only reads), and a backup's fragment
    /// scans (`BackupFragReq`, to an LDM, which only reads and writes its
    /// own backup file). Everything else between blocks
    /// (LDM, commit, checkpoint, membership, schema distribution) comes only
    /// from data nodes, which trust each other's signals; a frame from an
    /// API node carrying one is refused. A new signal is not an API request
    /// until it is listed here.
    pub fn is_api_request(&self) -> bool {
        matches!(
            self,
            SignalBody::ApiRegReq { .. }
                | SignalBody::TcKeyReq { .. }
                | SignalBody::TcScanReq { .. }
                | SignalBody::TcScanNextReq { .. }
                | SignalBody::TcWaitGciReq { .. }
                | SignalBody::DictCreateTableReq { .. }
                | SignalBody::DictDropTableReq { .. }
                | SignalBody::DictAlterTableReq { .. }
                | SignalBody::DictGetTableReq { .. }
                | SignalBody::DictListTablesReq { .. }
                | SignalBody::SubStartReq { .. }
                | SignalBody::SubStopReq { .. }
                | SignalBody::SubGcpCompleteAck { .. }
                | SignalBody::DbinfoScanReq { .. }
                | SignalBody::BackupFragReq { .. }
                | SignalBody::BackupLogReq { .. }
        )
    }
}

/// A signal: a typed message from one block to another.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signal {
    pub receiver: BlockRef,
    pub sender: BlockRef,
    pub body: SignalBody,
}
