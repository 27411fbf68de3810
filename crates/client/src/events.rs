//! The change stream on the API side (NDB API: event operations and the
//! event buffer; docs/events.md).
//!
//! [`Session::subscribe`] subscribes at the subscription block of every
//! data node (`SubStartReq`); each answers with the epoch after which it
//! has every epoch whole, and the subscription starts after the highest
//! of them. The changes come per epoch and bucket (the partitions whose
//! placement primary is one data node, NDB's buckets), each bucket from
//! the node that owns it for this subscription, the last part of each
//! marked complete. An epoch is complete here once every bucket's last
//! part came, and only then is it handed out, so epochs come out in
//! ascending order, each once, with the changes of one row in commit
//! order. Each (epoch, bucket) is taken once, from the first node whose
//! last part of it came: what a survivor resends after a node failure, or
//! a node sent before it failed, is dropped when already here, and parts
//! from a node that failed before its last part are dropped when the
//! node's connection closes. An epoch handed out is acknowledged to every
//! node (`SubGcpCompleteAck`), which lets every replica drop it.
//!
//! When a data node fails, the survivors of its node group take its
//! buckets over and resend what this subscription did not acknowledge;
//! nothing is lost or doubled. When the node is back (its connection live
//! again) it is subscribed again (`sub_flags::RESUBSCRIBE`), so that it
//! can take buckets over when another node fails. While a whole node
//! group is out of reach (the cluster is down) the subscription waits.
//! When the cluster comes back from a system restart (its nodes answer
//! `SubLostRef`, naming the restart GCI and the incarnation before it),
//! the subscription is made anew at every node and goes on behind an
//! [`Event::Restart`] saying which epochs the restart kept and where the
//! stream resumes. It ends, with a gap to the last epoch, only when a
//! bucket's only node left restarted since the epochs it lacks, or when
//! the cluster restarted more than once before it could go on.
//!
//! The buffer holds at most `max_alloc` bytes of changes (as they came:
//! both images); when an epoch would take more, everything buffered and
//! not yet taken is dropped and the stream goes on after a [`Event::Gap`]
//! naming the epochs lost. A data node that cut this subscriber off (it
//! did not acknowledge for longer than `MaxBufferedEpochs`) sends a gap
//! too, and that ends the subscription.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ::schema::row::RowLayout;
use ::schema::{TableDef, Value};
use signal::{
    sub_change, sub_flags, BlockNumber, BlockRef, NodeBitmask, NodeId, Signal, SignalBody,
};

use crate::cluster::{encode_frames, Cluster, Shared};
use crate::receiver::{self, Event as MailEvent, Mailbox};
use crate::{Epoch, Error, Result, Session, Table};

/// `max_alloc` when none is given: 64 MiB of changes.
pub const MAX_ALLOC_DEFAULT_BYTES: usize = 64 << 20;

/// How long a data node that came back and refused the subscription (it
/// is still starting) waits before it is asked again.
const RESUBSCRIBE_RETRY_MS: u64 = 200;
/// Reconnect intervals (`ClusterOptions::reconnect_interval`) a node whose
/// connection closed may still send its group's buckets: it may be up,
/// with the epochs kept, and its connection about to come back (a broken
/// connection, not a failed node). After that, a bucket no other node of
/// its group can send is lost (a gap).
const ORPHAN_WAIT_RECONNECTS: u32 = 5;

/// Which images a subscriber gets (MySQL's `binlog_row_image`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Images {
    /// Every column before and after (`FULL`).
    #[default]
    Full,
    /// Before: the primary key; after: the key and the columns that
    /// changed (an insert's after image is whole) (`MINIMAL`).
    Minimal,
}

/// How to subscribe.
#[derive(Clone, Debug)]
pub struct SubscribeOptions {
    /// Full or minimal images.
    pub images: Images,
    /// Only these columns (by name) in the images; `None`: all of them.
    pub columns: Option<Vec<String>>,
    /// With `columns: None`, the hidden `$` columns too (a SQL table's
    /// hidden primary key `$PK`): what a backup needs to restore such a
    /// table's rows. Off by default: an application sees the columns it
    /// declared.
    pub hidden_columns: bool,
    /// Bytes of changes the subscription buffers at most (NDB's event
    /// buffer `max_alloc`); beyond, a gap.
    pub max_alloc: usize,
}

impl Default for SubscribeOptions {
    fn default() -> Self {
        SubscribeOptions {
            images: Images::Full,
            columns: None,
            hidden_columns: false,
            max_alloc: MAX_ALLOC_DEFAULT_BYTES,
        }
    }
}

/// What happened to a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeKind {
    /// Inserted: an after image only.
    Insert,
    /// Updated: both images.
    Update,
    /// Deleted: a before image only.
    Delete,
}

impl ChangeKind {
    /// `insert`, `update` or `delete`.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Insert => "insert",
            ChangeKind::Update => "update",
            ChangeKind::Delete => "delete",
        }
    }
}

/// One committed change of one row.
#[derive(Clone, Debug, PartialEq)]
pub struct RowChange {
    /// The table's name in the dictionary (`db/def/t` for a SQL table).
    /// Names are interned for the life of the process ([`intern`]): a
    /// change costs no string copy nor reference count.
    pub table: &'static str,
    /// Insert, update or delete.
    pub kind: ChangeKind,
    /// The row before (updates and deletes), as (column, value) in table
    /// order.
    pub before: Option<Vec<(&'static str, Value)>>,
    /// The row after (inserts and updates).
    pub after: Option<Vec<(&'static str, Value)>>,
}

/// What a schema change did to a subscribed table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchemaKind {
    /// Altered: its changes from here on are of the new definition.
    Altered,
    /// Dropped: no change of it follows.
    Dropped,
    /// A new table (a copying ALTER TABLE's copy) took the name of a
    /// subscribed table and replaces it; the subscription has it from
    /// here on, and its changes follow (docs/events.md, "A copying
    /// ALTER"). `SchemaChange::table` names the new table; the one it
    /// replaced, renamed before, is dropped next.
    Replaced,
}

impl SchemaKind {
    /// `alter`, `drop` or `replace`.
    pub fn as_str(self) -> &'static str {
        match self {
            SchemaKind::Altered => "alter",
            SchemaKind::Dropped => "drop",
            SchemaKind::Replaced => "replace",
        }
    }

    /// The entry kind (`signal::sub_change`) of this event.
    fn code(self) -> u8 {
        match self {
            SchemaKind::Altered => sub_change::ALTER,
            SchemaKind::Dropped => sub_change::DROP,
            SchemaKind::Replaced => sub_change::REPLACE,
        }
    }
}

/// A subscribed table altered, dropped or replaced, in the stream's order
/// (docs/events.md, "Schema changes").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchemaChange {
    /// The table's name in the dictionary, at the version it names (an
    /// alter that renames it: the new name).
    pub table: String,
    /// Altered, dropped or replaced.
    pub kind: SchemaKind,
    /// The table's version after the alter; a drop's: its last; a
    /// replacing table's: its own (a new table's versions start anew).
    pub version: u32,
    /// Where in the epoch's `changes` it goes (before the change at this
    /// index): an alter's or a replacement's, every change of the table
    /// before it is of the old definition (or table), from it on of the
    /// new; a drop's, the end.
    pub at: usize,
}

/// The changes of one epoch, complete.
#[derive(Clone, Debug, PartialEq)]
pub struct EpochChanges {
    /// The epoch.
    pub epoch: Epoch,
    /// Its changes of the subscribed tables: one row's in commit order.
    pub changes: Vec<RowChange>,
    /// The subscribed tables altered or dropped in this epoch, each placed
    /// among `changes` (`SchemaChange::at`); mostly empty.
    pub schema: Vec<SchemaChange>,
}

/// What a subscription hands out.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// One epoch, complete (possibly with no change).
    Epoch(EpochChanges),
    /// The epochs `from` to `to` (both included) are lost to this
    /// subscription: its buffer or a data node's overflowed. After a data
    /// node's gap, or the failure of every node that could send a bucket
    /// (whose `to` is then `Epoch::from_u64(u64::MAX)`), the subscription
    /// has ended.
    Gap {
        /// The first epoch lost.
        from: Epoch,
        /// The last epoch lost.
        to: Epoch,
    },
    /// The cluster restarted from disk (a system restart: every data node
    /// was down) and the subscription goes on (docs/events.md, "A
    /// whole-cluster restart"). Of the epochs handed out before, those up
    /// to `restored` (every epoch of the GCI the restart restored, and
    /// before) stand; a later one was undone by the restart, its changes
    /// are not in the database. Lost to this subscription (their changes
    /// are in the rows, not in the stream): the epochs after the last one
    /// handed out up to `restored`, and the restarted cluster's epochs up
    /// to `resumed`. Epochs after `resumed` follow, in ascending order;
    /// they are numbered anew, so they may be lower than epochs handed out
    /// before this event.
    Restart {
        /// The last epoch the restart kept.
        restored: Epoch,
        /// The last epoch of the restarted cluster not in the stream.
        resumed: Epoch,
    },
}

/// A subscription's buffer, as [`Subscription::state`] shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SubscriptionState {
    /// Bytes of changes buffered (complete epochs not taken, and epochs
    /// still coming).
    pub bytes_used: usize,
    /// `max_alloc`.
    pub max_alloc: usize,
    /// Complete epochs buffered, not yet taken.
    pub epochs_buffered: usize,
    /// Epochs received (complete or not) and not yet taken: how far the
    /// taker is behind the cluster.
    pub lag_epochs: usize,
    /// The last epoch taken (0: none).
    pub last_epoch: u64,
    /// Gaps so far.
    pub gaps: u64,
    /// Whether the subscription has ended (a data node's gap, or no node
    /// left to send a bucket).
    pub ended: bool,
    /// Data nodes it is subscribed at now (a node that failed counts
    /// again once it is back and subscribed again).
    pub nodes_live: usize,
    /// Data nodes it was subscribed at when it began.
    pub nodes: usize,
    /// Waiting for the cluster: a node group has no data node this
    /// subscription is subscribed at (the cluster is down, or restarting
    /// from disk), or the cluster restarted and the subscription is being
    /// made anew. The stream goes on once it is back
    /// ([`Event::Restart`]).
    pub waiting_for_cluster: bool,
}

/// One decoded entry of a part.
#[derive(Debug)]
enum Item {
    /// A row change of table `table` under its version `version`.
    Row {
        table: u32,
        version: u32,
        change: RowChange,
    },
    /// A schema entry of bucket `bucket`.
    Schema {
        table: u32,
        version: u32,
        kind: SchemaKind,
        bucket: NodeId,
    },
}

/// An epoch not yet complete in every bucket.
#[derive(Debug, Default)]
struct Partial {
    /// The changes of the buckets whose last part came.
    changes: Vec<Item>,
    /// Bytes of `changes` and `coming`.
    bytes: usize,
    /// Buckets whose last part came.
    done: NodeBitmask,
    /// Parts of buckets not yet whole: (bucket, sending node, changes,
    /// bytes). Two senders of one bucket: a survivor resending what a
    /// failed node had begun to send.
    coming: Vec<(NodeId, NodeId, Vec<Item>, usize)>,
}

/// A data node this subscription is subscribed at, or was.
#[derive(Debug)]
struct NodeSub {
    link: usize,
    node: NodeId,
    /// The connection generation of the subscription there: a close of it
    /// or of a later one ends it.
    generation: u64,
    state: NodeState,
    /// When its connection closed, until it is subscribed again.
    down_since: Option<Instant>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NodeState {
    /// Subscribed: the node has every epoch above `start` whole.
    Live { start: u64 },
    /// Its connection closed: its subscription is gone.
    Down,
    /// Back, subscribed again, no answer yet.
    Resubscribing,
    /// Back and refused (still starting): ask again at this time.
    Retry(Instant),
}

/// A subscription being made anew after a system restart.
#[derive(Clone, Copy, Debug)]
struct Restarting {
    /// The highest epoch the restart kept: every epoch of its restart GCI.
    restored: u64,
    /// The restarted cluster's incarnation.
    incarnation: u32,
    /// When the restart was learned.
    since: Instant,
    /// The nodes subscribed anew in the attempt under way (a fresh
    /// `SubStartReq` each, as `Session::subscribe` does: all of them, or
    /// none, so that every node's buckets have an owner that sends them).
    attempt: Option<NodeBitmask>,
    /// After a failed attempt, not before this.
    retry_at: Option<Instant>,
}

/// After a system restart, how long the subscription waits for every data
/// node to be reachable before it is made anew at those that are (each
/// node group needs one): a node that does not come back must not stop
/// the stream for ever.
const RESTART_PARTIAL_WAIT_MS: u64 = 10_000;

/// Unknown tables remembered as not found ([`Subscription`]'s
/// `resolve_copy`), the oldest forgotten past it: a table is looked for
/// once, not at every change.
const UNRESOLVED_MAX: usize = 64;

/// A subscribed table and how its rows decode.
struct Subscribed {
    table: Arc<Table>,
    layout: RowLayout,
    /// Column positions shown (the projection, hidden `$` columns left out).
    shown: Vec<usize>,
    /// The table's name and each column's, interned.
    name: &'static str,
    column_names: Vec<&'static str>,
}

/// `name` as a string that lives as long as the process, one copy per
/// distinct name: table and column names of subscribed tables, handed out
/// with every change. The set grows only with the distinct names ever
/// subscribed to (bounded by the schema's, not by traffic).
fn intern(name: &str) -> &'static str {
    static NAMES: std::sync::OnceLock<std::sync::Mutex<std::collections::HashSet<&'static str>>> =
        std::sync::OnceLock::new();
    let mut names = NAMES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if let Some(known) = names.get(name) {
        return known;
    }
    let leaked: &'static str = Box::leak(name.to_owned().into_boxed_str());
    names.insert(leaked);
    leaked
}

impl Subscribed {
    fn new(table: Arc<Table>, shown: Vec<usize>) -> Subscribed {
        let def = table.def();
        Subscribed {
            layout: RowLayout::new(def),
            name: intern(&def.name),
            column_names: def.columns.iter().map(|c| intern(&c.name)).collect(),
            table,
            shown,
        }
    }
}

/// A subscription (see the module documentation). Dropping it ends it at
/// every data node.
pub struct Subscription {
    cluster: Cluster,
    mailbox: Arc<Mailbox>,
    sub_id: u32,
    options: SubscribeOptions,
    tables: HashMap<u32, Subscribed>,
    /// Earlier definitions of altered tables, for their changes still
    /// coming: (table id, version) → how they decode.
    older: HashMap<(u32, u32), Subscribed>,
    /// Where the schema events go.
    schema_order: SchemaOrder,
    /// Tables whose changes came though they are not subscribed, and were
    /// not found to replace one that is (the last [`UNRESOLVED_MAX`]).
    unresolved: Vec<u32>,
    /// The data nodes subscribed at.
    nodes: Vec<NodeSub>,
    /// Every bucket (each data node of the placement).
    buckets: NodeBitmask,
    /// Epochs at or below it are not this subscription's.
    start: u64,
    /// The last epoch complete here (handed out or ready; `start` before).
    completed: u64,
    partial: BTreeMap<u64, Partial>,
    /// Events ready to take, each with the bytes it holds.
    ready: VecDeque<(Event, usize)>,
    bytes_used: usize,
    last_epoch: u64,
    gaps: u64,
    ended: bool,
    /// Overflow: parts are dropped from `from` on; `dropped_max` the
    /// highest epoch of a part dropped.
    discarding: Option<(u64, u64)>,
    /// The cluster incarnation the epochs handed out are of (every
    /// `SubStartConf` names it): what tells, when the subscription is lost
    /// to a system restart (`SubLostRef`), which of them the restart kept.
    incarnation: u32,
    /// The cluster restarted from disk: the subscription is being made
    /// anew at every node; nothing is handed out until it is.
    restarting: Option<Restarting>,
    /// A node group has no node this subscription is subscribed at, and no
    /// node of it is subscribed with a later start either: the cluster is
    /// down (a running cluster never lacks a whole group); the stream
    /// waits for it to come back.
    waiting: bool,
    scratch: Vec<MailEvent>,
    send_buffer: Vec<u8>,
}

impl Session {
    /// Subscribes to the committed changes of `tables` (dictionary names:
    /// `db/def/t` for SQL's `db.t`), from the next epoch that is whole on
    /// every data node on (docs/events.md). Every data node must be
    /// started now; afterwards the subscription goes on through data node
    /// failures (the survivors take the failed node's buckets over) and
    /// through a whole-cluster restart ([`Event::Restart`]).
    ///
    /// # Errors
    /// An unknown table or column (before anything is sent); a data node
    /// not started (711) or that refuses (its code); no answer within the
    /// request timeout (4012).
    pub fn subscribe(&self, tables: &[&str], options: SubscribeOptions) -> Result<Subscription> {
        let tables = tables
            .iter()
            .map(|name| self.table(name))
            .collect::<Result<Vec<_>>>()?;
        self.subscribe_tables(&tables, options)
    }

    /// [`Session::subscribe`] to tables already looked up, among them the
    /// hidden parts tables of BLOB/TEXT columns
    /// ([`Table::blob_parts_table`]), which have no name to look up by:
    /// the change of a base row carries its BLOB/TEXT columns as heads,
    /// and its parts come as changes of the parts tables, in the same
    /// epoch (the client writes both in one transaction).
    ///
    /// # Errors
    /// As [`Session::subscribe`].
    pub fn subscribe_tables(
        &self,
        tables: &[Arc<Table>],
        options: SubscribeOptions,
    ) -> Result<Subscription> {
        if tables.is_empty() {
            return Err(Error::usage("subscribe: name at least one table"));
        }
        let mut subscribed = HashMap::new();
        for table in tables {
            let table = Arc::clone(table);
            let name = table.name();
            let def = table.def();
            let shown: Vec<usize> = match &options.columns {
                None => (0..def.columns.len())
                    .filter(|&c| options.hidden_columns || !def.columns[c].name.starts_with('$'))
                    .collect(),
                Some(names) => names
                    .iter()
                    .map(|n| {
                        def.columns
                            .iter()
                            .position(|c| &c.name == n)
                            .ok_or_else(|| {
                                Error::with_context(
                                    proto::error::NO_SUCH_COLUMN,
                                    format!("subscribe: table `{name}` has no column `{n}`"),
                                )
                            })
                    })
                    .collect::<Result<_>>()?,
            };
            subscribed.insert(table.id(), Subscribed::new(table, shown));
        }
        let shared = self.shared();
        if let Some(down) = shared.links.iter().find(|l| !l.is_live()) {
            return Err(Error::with_context(
                proto::error::NOT_STARTED,
                format!(
                    "subscribe: data node {} is not started; a subscription starts at every \
                     data node (it goes on through their failures afterwards)",
                    down.node
                ),
            ));
        }
        let nodes: Vec<NodeSub> = shared
            .links
            .iter()
            .enumerate()
            .map(|(link, l)| NodeSub {
                link,
                node: l.node,
                generation: l.generation.load(Ordering::Acquire),
                state: NodeState::Resubscribing,
                down_since: None,
            })
            .collect();
        let buckets: NodeBitmask = shared.placement.nodes().collect();
        let mailbox = shared.register_session()?;
        let announced = subscribed
            .iter()
            .map(|(&id, s)| (id, s.table.def().version))
            .collect();
        let mut sub = Subscription {
            cluster: self.cluster.clone(),
            sub_id: u32::from(mailbox.instance),
            mailbox,
            options,
            tables: subscribed,
            older: HashMap::new(),
            schema_order: SchemaOrder {
                buckets,
                announced,
                seen: BTreeMap::new(),
                replacing: Vec::new(),
            },
            unresolved: Vec::new(),
            nodes,
            buckets,
            start: 0,
            completed: 0,
            partial: BTreeMap::new(),
            ready: VecDeque::new(),
            bytes_used: 0,
            last_epoch: 0,
            gaps: 0,
            ended: false,
            discarding: None,
            incarnation: 0,
            restarting: None,
            waiting: false,
            scratch: Vec::new(),
            send_buffer: Vec::new(),
        };
        sub.start()?;
        Ok(sub)
    }
}

impl Subscription {
    fn shared(&self) -> &Shared {
        &self.cluster.inner.shared
    }

    fn own_ref(&self) -> BlockRef {
        BlockRef::new(
            self.shared().me,
            BlockNumber::API_CLUSTER,
            self.mailbox.instance,
        )
    }

    fn send(&mut self, link: usize, node: NodeId, body: SignalBody) -> Result<()> {
        let signal = Signal {
            receiver: BlockRef::new(node, BlockNumber::SUBSCRIPTION, 0),
            sender: self.own_ref(),
            body,
        };
        self.send_buffer.clear();
        encode_frames(std::slice::from_ref(&signal), &mut self.send_buffer)?;
        let buffer = std::mem::take(&mut self.send_buffer);
        let sent = self.shared().send_bytes(link, &buffer, 1);
        self.send_buffer = buffer;
        sent
    }

    fn start_req(&self, flags: u32) -> SignalBody {
        let mut tables: Vec<u32> = self.tables.keys().copied().collect();
        tables.sort_unstable();
        let images = match self.options.images {
            Images::Full => sub_flags::FULL_IMAGES,
            Images::Minimal => 0,
        };
        SignalBody::SubStartReq {
            sub_id: self.sub_id,
            flags: images | flags,
            tables,
        }
    }

    /// Subscribes at every node and waits for every answer.
    fn start(&mut self) -> Result<()> {
        for at in 0..self.nodes.len() {
            let (link, node) = (self.nodes[at].link, self.nodes[at].node);
            self.send(link, node, self.start_req(0))?;
        }
        let deadline = Instant::now() + self.shared().options.request_timeout;
        // Epochs sent before every node answered wait for the start.
        let mut early: Vec<(NodeId, SignalBody)> = Vec::new();
        let waiting = |nodes: &[NodeSub]| {
            nodes
                .iter()
                .filter(|n| n.state == NodeState::Resubscribing)
                .count()
        };
        while waiting(&self.nodes) > 0 {
            self.mailbox.drain(&mut self.scratch);
            for event in std::mem::take(&mut self.scratch) {
                let MailEvent::Signal(signal) = event else {
                    continue;
                };
                let node = signal.sender.node;
                match signal.body {
                    SignalBody::SubStartConf {
                        start_epoch,
                        incarnation,
                        ..
                    } => {
                        self.start = self.start.max(start_epoch);
                        self.incarnation = incarnation;
                        if let Some(n) = self.nodes.iter_mut().find(|n| n.node == node) {
                            n.state = NodeState::Live { start: start_epoch };
                        }
                    }
                    SignalBody::SubStartRef { code, message, .. } => {
                        return Err(Error::with_context(
                            code,
                            format!("subscribe at data node {node}: {message}"),
                        ));
                    }
                    body => early.push((node, body)),
                }
            }
            let now = Instant::now();
            if waiting(&self.nodes) == 0 {
                break;
            }
            if now >= deadline {
                return Err(Error::with_context(
                    proto::error::REQUEST_TIMEOUT,
                    format!(
                        "subscribe: {} of {} data nodes answered in time",
                        self.nodes.len() - waiting(&self.nodes),
                        self.nodes.len()
                    ),
                ));
            }
            receiver::wait(self.shared(), &self.mailbox, deadline - now);
        }
        self.completed = self.start;
        // What every node has up to the start is not this subscription's.
        self.ack(self.start);
        for (node, body) in early {
            self.on_signal(node, body);
        }
        Ok(())
    }

    /// The next event without waiting: `Ok(None)` when none is ready.
    ///
    /// # Errors
    /// None yet: a malformed change from a data node is logged and left
    /// out.
    pub fn poll(&mut self) -> Result<Option<Event>> {
        receiver::poll_now(self.shared());
        self.pump();
        Ok(self.take())
    }

    /// The next event, waiting at most `timeout`: `Ok(None)` when none
    /// came, or the subscription has ended and everything was taken.
    pub fn next_timeout(&mut self, timeout: Duration) -> Result<Option<Event>> {
        let deadline = Instant::now() + timeout;
        loop {
            self.pump();
            if let Some(event) = self.take() {
                return Ok(Some(event));
            }
            let now = Instant::now();
            if self.ended || now >= deadline {
                return Ok(None);
            }
            // Woken in time to give up on a node that is not coming back.
            let wait = self.shared().options.reconnect_interval * ORPHAN_WAIT_RECONNECTS;
            let wake = self
                .nodes
                .iter()
                .filter_map(|n| n.down_since)
                .map(|at| at + wait)
                .filter(|&at| at > now)
                .min()
                .map_or(deadline, |at| at.min(deadline));
            receiver::wait(self.shared(), &self.mailbox, wake - now);
        }
    }

    /// The buffer's state.
    pub fn state(&self) -> SubscriptionState {
        let epochs_buffered = self
            .ready
            .iter()
            .filter(|(e, _)| matches!(e, Event::Epoch(_)))
            .count();
        SubscriptionState {
            bytes_used: self.bytes_used,
            max_alloc: self.options.max_alloc,
            epochs_buffered,
            lag_epochs: epochs_buffered + self.partial.len(),
            last_epoch: self.last_epoch,
            gaps: self.gaps,
            ended: self.ended,
            nodes_live: self
                .nodes
                .iter()
                .filter(|n| matches!(n.state, NodeState::Live { .. }))
                .count(),
            nodes: self.nodes.len(),
            waiting_for_cluster: self.waiting || self.restarting.is_some(),
        }
    }

    /// The epoch after which this subscription gets every epoch.
    pub fn start_epoch(&self) -> Epoch {
        Epoch::from_u64(self.start)
    }

    fn take(&mut self) -> Option<Event> {
        let (event, bytes) = self.ready.pop_front()?;
        self.bytes_used -= bytes.min(self.bytes_used);
        match &event {
            Event::Epoch(e) => self.last_epoch = e.epoch.get(),
            Event::Gap { to, .. } => self.last_epoch = self.last_epoch.max(to.get()),
            // The epochs are numbered anew after it.
            Event::Restart { resumed, .. } => self.last_epoch = resumed.get(),
        }
        Some(event)
    }

    /// Takes what the mailbox holds, and subscribes again at the nodes
    /// that came back.
    fn pump(&mut self) {
        self.mailbox.drain(&mut self.scratch);
        let events = std::mem::take(&mut self.scratch);
        for event in events {
            match event {
                MailEvent::Signal(signal) => self.on_signal(signal.sender.node, signal.body),
                MailEvent::NodeDown(node, generation) => self.on_node_down(node, generation),
            }
        }
        if !self.ended && self.nodes.iter().any(|n| n.down_since.is_some()) {
            self.check_orphans();
        }
        if !self.ended {
            self.resubscribe();
            self.restart_step();
        }
    }

    /// Subscribes again at each node whose connection is live again (a
    /// new generation), so that it can take buckets over later; it owns
    /// none meanwhile (`sub_flags::RESUBSCRIBE`).
    fn resubscribe(&mut self) {
        if self.restarting.is_some() {
            // `restart_step` subscribes anew at every node at once.
            return;
        }
        let now = Instant::now();
        for at in 0..self.nodes.len() {
            let n = &self.nodes[at];
            let due = match n.state {
                NodeState::Down => true,
                NodeState::Retry(when) => now >= when,
                NodeState::Live { .. } | NodeState::Resubscribing => false,
            };
            let link = &self.shared().links[n.link];
            let generation = link.generation.load(Ordering::Acquire);
            if !due || !link.is_live() || generation <= n.generation && n.state == NodeState::Down {
                continue;
            }
            let (link, node) = (n.link, n.node);
            self.nodes[at].generation = generation;
            self.nodes[at].state = NodeState::Resubscribing;
            if let Err(error) = self.send(link, node, self.start_req(sub_flags::RESUBSCRIBE)) {
                tracing::debug!("subscription {}: again at {node}: {error}", self.sub_id);
                self.nodes[at].state = NodeState::Down;
            }
        }
    }

    fn on_node_down(&mut self, node: NodeId, generation: u64) {
        let Some(at) = self.nodes.iter().position(|n| n.node == node) else {
            return;
        };
        // A close of a connection older than the subscription there is not
        // ours; any later one lost what the node sent meanwhile.
        if self.ended || generation < self.nodes[at].generation {
            return;
        }
        self.nodes[at].state = NodeState::Down;
        self.nodes[at].down_since = Some(Instant::now());
        // Its parts of buckets it did not finish: the survivors resend them.
        for p in self.partial.values_mut() {
            p.coming.retain(|(_, from, _, bytes)| {
                if *from == node {
                    p.bytes -= bytes;
                    self.bytes_used -= (*bytes).min(self.bytes_used);
                }
                *from != node
            });
        }
        self.check_orphans();
    }

    /// Ends the subscription with a gap when a bucket has no node of its
    /// group that can resend it: a node subscribed here since before the
    /// last epoch complete here can, and so may one being subscribed again
    /// (its answer is awaited: a node that stayed up answers with its old
    /// start and kept the epochs; a restarted one answers with a recent
    /// start, and this is checked again then), or one whose connection
    /// closed less than `ORPHAN_WAIT_RECONNECTS` reconnect intervals ago
    /// (checked again at each `pump`).
    fn check_orphans(&mut self) {
        if self.ended || self.restarting.is_some() {
            // Restarting: `resume` waits for every group.
            return;
        }
        let now = Instant::now();
        let wait = self.shared().options.reconnect_interval * ORPHAN_WAIT_RECONNECTS;
        let placement = &self.shared().placement;
        let orphan = self.buckets.iter().find(|&bucket| {
            let group = placement.group_of(bucket);
            !self.nodes.iter().any(|n| {
                placement.group_of(n.node) == group
                    && match n.state {
                        NodeState::Live { start } => start <= self.completed,
                        NodeState::Resubscribing => true,
                        NodeState::Down | NodeState::Retry(_) => {
                            n.down_since.is_some_and(|at| now < at + wait)
                        }
                    }
            })
        });
        let Some(bucket) = orphan else {
            self.waiting = false;
            return;
        };
        let group = placement.group_of(bucket);
        let subscribed = self.nodes.iter().any(|n| {
            placement.group_of(n.node) == group && matches!(n.state, NodeState::Live { .. })
        });
        if !subscribed {
            // The whole group is out of reach: the cluster is down, as a
            // running cluster never lacks a whole node group, or only
            // this API's connections to it are. Either way nothing is
            // lost yet: the nodes that come back with the epochs resend
            // them, and a system restart is answered with `SubLostRef`
            // (`on_lost`).
            if !self.waiting {
                tracing::warn!(
                    "subscription {}: no data node of bucket {bucket}'s node group is \
                     reachable (the cluster is down?): waiting for it",
                    self.sub_id
                );
            }
            self.waiting = true;
            return;
        }
        tracing::warn!(
            "subscription {}: no data node left that can send bucket {bucket} (the node of its \
             group subscribed here restarted since epoch {}): the subscription ends",
            self.sub_id,
            Epoch::from_u64(self.completed),
        );
        let from = self.completed + 1;
        self.end_with_gap(from, u64::MAX);
    }

    /// `node`, subscribed again after its connection closed, kept nothing
    /// of the subscription, nor did any node of its group: the cluster
    /// restarted from disk (a system restart) into `incarnation`,
    /// restoring GCI `restart_gci` of `previous`. If that is the
    /// incarnation this subscription is in, the restart kept every epoch
    /// of that GCI and before, and the subscription is made anew
    /// (`restart_step`); if not, the cluster restarted more than once
    /// since (what was kept of this subscription's epochs is unknown), and
    /// the subscription ends with a gap.
    fn on_lost(
        &mut self,
        node: NodeId,
        incarnation: u32,
        previous: u32,
        restart_gci: u32,
        message: &str,
    ) {
        let ours = self.restarting.map_or(self.incarnation, |r| r.incarnation);
        if let Some(n) = self.nodes.iter_mut().find(|n| n.node == node) {
            // It holds nothing of the subscription now: asked anew with
            // the others (`restart_step`).
            if n.state == NodeState::Resubscribing {
                n.state = NodeState::Down;
            }
        }
        if self.restarting.is_some() && incarnation == ours {
            // Another node of the same restart.
        } else if ours != 0 && previous == ours && incarnation != ours {
            // Restarted again before the stream went on: what the first
            // restart kept of this subscription's epochs the second kept
            // too (its GCIs are all above the first's restart GCI).
            let restored = self
                .restarting
                .map_or((u64::from(restart_gci) << 32) | u64::from(u32::MAX), |r| {
                    r.restored
                });
            tracing::warn!(
                "subscription {}: the cluster restarted from disk (GCI {restart_gci} of \
                 incarnation {previous:#x}, now {incarnation:#x}): subscribing anew",
                self.sub_id,
            );
            self.begin_restart(restored, incarnation);
        } else if incarnation == ours {
            // No restart: the group's nodes stayed up and dropped the
            // subscription (this API was gone longer than their grace).
            tracing::warn!(
                "subscription {}: data node {node}: {message}; the cluster did not restart (this \
                 API was away too long): it ends",
                self.sub_id
            );
            let from = self.completed + 1;
            self.end_with_gap(from, u64::MAX);
            return;
        } else {
            tracing::warn!(
                "subscription {}: data node {node}: {message}; this subscription's epochs are of \
                 incarnation {ours:#x}: what the restarts kept of them is unknown, it ends",
                self.sub_id
            );
            let from = self.completed + 1;
            self.end_with_gap(from, u64::MAX);
            return;
        }
        self.restart_step();
    }

    /// The cluster restarted from disk: what was coming is of the old
    /// incarnation and dropped, and the nodes subscribed at count as gone
    /// (they restarted: their connections closed, whether or not that
    /// was noticed yet).
    fn begin_restart(&mut self, restored: u64, incarnation: u32) {
        for (_, p) in std::mem::take(&mut self.partial) {
            self.bytes_used -= p.bytes.min(self.bytes_used);
        }
        if let Some((from, _)) = self.discarding.take() {
            // An overflow's gap, to the last epoch complete here; the
            // restart event says what followed.
            self.gaps += 1;
            let to = self.completed.max(from);
            let gap = Event::Gap {
                from: Epoch::from_u64(from),
                to: Epoch::from_u64(to),
            };
            self.ready.push_back((gap, 0));
        }
        let now = Instant::now();
        for n in &mut self.nodes {
            if matches!(n.state, NodeState::Live { .. }) {
                n.state = NodeState::Down;
                n.down_since = Some(now);
            }
        }
        self.restarting = Some(Restarting {
            restored,
            incarnation,
            since: now,
            attempt: None,
            retry_at: None,
        });
    }

    /// After a system restart: subscribes anew (fresh `SubStartReq`s) at
    /// every data node at once, once no node's answer is awaited and every
    /// node is reachable (or, after `RESTART_PARTIAL_WAIT_MS`, at those
    /// that are, if each node group has one); once every one of them
    /// answered, the stream goes on after the highest of their starts,
    /// behind an [`Event::Restart`]. A refusal (a node still starting)
    /// ends the attempt there (the others stop it) and another follows
    /// `RESUBSCRIBE_RETRY_MS` later.
    fn restart_step(&mut self) {
        let Some(mut restart) = self.restarting else {
            return;
        };
        if self.ended
            || self
                .nodes
                .iter()
                .any(|n| n.state == NodeState::Resubscribing)
        {
            return;
        }
        let now = Instant::now();
        let Some(asked) = restart.attempt else {
            if restart.retry_at.is_some_and(|at| now < at) {
                return;
            }
            let shared = self.shared();
            let reachable: NodeBitmask = self
                .nodes
                .iter()
                .filter(|n| shared.links[n.link].is_live())
                .map(|n| n.node)
                .collect();
            let placement = &shared.placement;
            let every_group = self.buckets.iter().all(|bucket| {
                let group = placement.group_of(bucket);
                reachable.iter().any(|n| placement.group_of(n) == group)
            });
            let waited = now >= restart.since + Duration::from_millis(RESTART_PARTIAL_WAIT_MS);
            let all = reachable.iter().count() == self.nodes.len();
            if !(all || waited && every_group) {
                return;
            }
            for at in 0..self.nodes.len() {
                let (link, node) = (self.nodes[at].link, self.nodes[at].node);
                if !reachable.contains(node) {
                    continue;
                }
                let generation = self.shared().links[link].generation.load(Ordering::Acquire);
                self.nodes[at].generation = generation;
                self.nodes[at].state = NodeState::Resubscribing;
                if let Err(error) = self.send(link, node, self.start_req(0)) {
                    tracing::debug!("subscription {}: anew at {node}: {error}", self.sub_id);
                    self.nodes[at].state = NodeState::Down;
                }
            }
            restart.attempt = Some(reachable);
            self.restarting = Some(restart);
            return;
        };
        let starts: Vec<Option<u64>> = self
            .nodes
            .iter()
            .filter(|n| asked.contains(n.node))
            .map(|n| match n.state {
                NodeState::Live { start } => Some(start),
                _ => None,
            })
            .collect();
        if starts.iter().any(Option::is_none) {
            // Refused somewhere (still starting), or a connection closed:
            // stopped where it began, tried again later.
            for at in 0..self.nodes.len() {
                let (link, node) = (self.nodes[at].link, self.nodes[at].node);
                if asked.contains(node) && matches!(self.nodes[at].state, NodeState::Live { .. }) {
                    let stop = SignalBody::SubStopReq {
                        sub_id: self.sub_id,
                    };
                    let _ = self.send(link, node, stop);
                }
                self.nodes[at].state = NodeState::Down;
            }
            for (_, p) in std::mem::take(&mut self.partial) {
                self.bytes_used -= p.bytes.min(self.bytes_used);
            }
            restart.attempt = None;
            restart.retry_at = Some(now + Duration::from_millis(RESUBSCRIBE_RETRY_MS));
            self.restarting = Some(restart);
            return;
        }
        let resumed = starts.into_iter().flatten().max().unwrap_or(0);
        let later = self.partial.split_off(&(resumed + 1));
        for (_, p) in std::mem::replace(&mut self.partial, later) {
            self.bytes_used -= p.bytes.min(self.bytes_used);
        }
        tracing::warn!(
            "subscription {}: goes on after the cluster's restart: epochs up to {} kept, the \
             stream resumes after {}",
            self.sub_id,
            Epoch::from_u64(restart.restored),
            Epoch::from_u64(resumed),
        );
        let event = Event::Restart {
            restored: Epoch::from_u64(restart.restored),
            resumed: Epoch::from_u64(resumed),
        };
        self.ready.push_back((event, 0));
        self.restarting = None;
        self.waiting = false;
        self.incarnation = restart.incarnation;
        self.start = resumed;
        self.completed = resumed;
        self.ack(resumed);
        self.complete();
    }

    /// The highest epoch handed out or ready.
    fn last_seen(&self) -> u64 {
        self.ready
            .back()
            .map(|(e, _)| match e {
                Event::Epoch(e) => e.epoch.get(),
                Event::Gap { to, .. } => to.get(),
                Event::Restart { resumed, .. } => resumed.get(),
            })
            .unwrap_or(self.last_epoch.max(self.start))
    }

    fn end_with_gap(&mut self, from: u64, to: u64) {
        for (_, p) in std::mem::take(&mut self.partial) {
            self.bytes_used -= p.bytes.min(self.bytes_used);
        }
        self.gaps += 1;
        let gap = Event::Gap {
            from: Epoch::from_u64(from),
            to: Epoch::from_u64(to),
        };
        self.ready.push_back((gap, 0));
        self.ended = true;
    }

    fn on_signal(&mut self, node: NodeId, body: SignalBody) {
        if self.ended {
            return;
        }
        match body {
            SignalBody::SubEpochData {
                sub_id,
                epoch,
                bucket,
                changes,
                complete,
                ..
            } if sub_id == self.sub_id => {
                let live = self
                    .nodes
                    .iter()
                    .any(|n| n.node == node && matches!(n.state, NodeState::Live { .. }));
                // A node not subscribed on the current connection may send
                // the tail of a bucket whose head was lost with the old
                // one; once subscribed again it resends what it owns.
                if live {
                    self.on_epoch_data(node, epoch, bucket, &changes, complete)
                }
            }
            SignalBody::SubGapRep { sub_id, from, to } if sub_id == self.sub_id => {
                // The node sent every epoch up to `to` before this: what
                // came whole is not lost. What is: every epoch after the
                // last whole one (this node sends no more).
                let from = from.max(self.last_seen() + 1);
                tracing::warn!(
                    "subscription {}: data node {node} cut it off (epochs from {} lost)",
                    self.sub_id,
                    Epoch::from_u64(from),
                );
                self.end_with_gap(from, to.max(from));
            }
            SignalBody::SubStartConf {
                sub_id,
                start_epoch,
                incarnation,
            } if sub_id == self.sub_id => {
                let current = self.restarting.map_or(self.incarnation, |r| r.incarnation);
                if incarnation != current {
                    // Of an incarnation this subscription is not in (the
                    // cluster restarted again meanwhile): that node's
                    // answer to it is a `SubLostRef`, which follows.
                    tracing::warn!(
                        "subscription {}: data node {node} serves it in cluster incarnation \
                         {incarnation:#x}, not {current:#x}",
                        self.sub_id
                    );
                    return;
                }
                if let Some(n) = self.nodes.iter_mut().find(|n| n.node == node) {
                    if n.state == NodeState::Resubscribing {
                        n.state = NodeState::Live { start: start_epoch };
                        n.down_since = None;
                    }
                }
                self.check_orphans();
                self.restart_step();
            }
            SignalBody::SubLostRef {
                sub_id,
                incarnation,
                previous_incarnation,
                restart_gci,
                message,
            } if sub_id == self.sub_id => self.on_lost(
                node,
                incarnation,
                previous_incarnation,
                restart_gci,
                &message,
            ),
            SignalBody::SubStartRef {
                sub_id,
                code,
                message,
            } if sub_id == self.sub_id => {
                tracing::debug!(
                    "subscription {}: data node {node} refused it again ({code}: {message})",
                    self.sub_id
                );
                if let Some(n) = self.nodes.iter_mut().find(|n| n.node == node) {
                    if n.state == NodeState::Resubscribing {
                        let retry = Duration::from_millis(RESUBSCRIBE_RETRY_MS);
                        n.state = NodeState::Retry(Instant::now() + retry);
                    }
                }
                self.check_orphans();
            }
            other => tracing::debug!(
                "subscription {}: {} from node {node} ignored",
                self.sub_id,
                other.name()
            ),
        }
    }

    /// Tells every node subscribed at that this subscription holds every
    /// epoch up to `epoch`.
    fn ack(&mut self, epoch: u64) {
        for at in 0..self.nodes.len() {
            let (link, node) = (self.nodes[at].link, self.nodes[at].node);
            if matches!(self.nodes[at].state, NodeState::Down | NodeState::Retry(_)) {
                continue;
            }
            let ack = SignalBody::SubGcpCompleteAck {
                sub_id: self.sub_id,
                epoch,
            };
            if let Err(error) = self.send(link, node, ack) {
                tracing::debug!("subscription {}: ack to {node}: {error}", self.sub_id);
            }
        }
    }

    fn on_epoch_data(
        &mut self,
        node: NodeId,
        epoch: u64,
        bucket: NodeId,
        changes: &[u8],
        complete: bool,
    ) {
        if epoch <= self.completed && self.restarting.is_none() {
            // Before the start, or already here (a resend). (While the
            // subscription is made anew after a restart, the epochs are
            // numbered anew: `resume` drops those before its start.)
            return;
        }
        if !self.buckets.contains(bucket) {
            tracing::warn!(
                "subscription {}: data node {node} sent bucket {bucket}, not a data node \
                 of the placement: left out",
                self.sub_id
            );
            return;
        }
        let discarding = self.discarding.is_some();
        let bytes = changes.len();
        let decoded = if discarding
            || self
                .partial
                .get(&epoch)
                .is_some_and(|p| p.done.contains(bucket))
        {
            // Not taken, but a copy it names is followed all the same: a
            // node that sends the rest of this bucket may have filed the
            // entry in this epoch and sends the copy's changes later.
            self.follow_in(changes);
            None
        } else {
            Some(self.decode(changes, bucket))
        };
        if let Some((_, dropped_max)) = self.discarding.as_mut() {
            *dropped_max = (*dropped_max).max(epoch);
        }
        let mut decoded = decoded;
        if decoded.is_some() && self.bytes_used + bytes > self.options.max_alloc {
            self.overflow(epoch);
            decoded = None;
        }
        let partial = self.partial.entry(epoch).or_default();
        if partial.done.contains(bucket) {
            // Already whole from another node (a resend, or the failed
            // node's part that came before its failure was noticed).
            return;
        }
        let at = match partial
            .coming
            .iter()
            .position(|(b, from, ..)| *b == bucket && *from == node)
        {
            Some(at) => at,
            None => {
                partial.coming.push((bucket, node, Vec::new(), 0));
                partial.coming.len() - 1
            }
        };
        if let Some(decoded) = decoded {
            let coming = &mut partial.coming[at];
            coming.2.extend(decoded);
            coming.3 += bytes;
            partial.bytes += bytes;
            self.bytes_used += bytes;
        }
        if !complete {
            return;
        }
        // The bucket is whole from `node`: its parts are taken, any other
        // node's (begun before) dropped.
        let (_, _, changes, _) = partial.coming.swap_remove(at);
        partial.changes.extend(changes);
        partial.coming.retain(|(b, _, _, bytes)| {
            if *b == bucket {
                partial.bytes -= bytes;
                self.bytes_used -= (*bytes).min(self.bytes_used);
            }
            *b != bucket
        });
        partial.done.insert(bucket);
        if partial.done == self.buckets {
            self.complete();
        }
    }

    /// Hands out, in order, the epochs complete in every bucket from the
    /// first not yet complete on, and acknowledges them to every node.
    fn complete(&mut self) {
        if self.restarting.is_some() {
            // The new start is not known yet.
            return;
        }
        let before = self.completed;
        while let Some(entry) = self.partial.first_entry() {
            if entry.get().done != self.buckets {
                break;
            }
            let (e, p) = entry.remove_entry();
            debug_assert!(e > self.completed, "epochs complete in ascending order");
            self.completed = e;
            if let Some((from, dropped_max)) = self.discarding {
                self.bytes_used -= p.bytes.min(self.bytes_used);
                if e >= dropped_max {
                    self.discarding = None;
                    self.gaps += 1;
                    let gap = Event::Gap {
                        from: Epoch::from_u64(from),
                        to: Epoch::from_u64(e),
                    };
                    self.ready.push_back((gap, 0));
                }
                continue;
            }
            let changes = self.order_schema(Epoch::from_u64(e), p.changes);
            self.ready.push_back((Event::Epoch(changes), p.bytes));
        }
        if self.completed > before {
            self.ack(self.completed);
        }
    }

    /// `epoch`'s changes do not fit: drop everything not taken, and every
    /// part until the epochs they belong to are complete.
    fn overflow(&mut self, epoch: u64) {
        let from = self
            .ready
            .iter()
            .find_map(|(e, _)| match e {
                Event::Epoch(e) => Some(e.epoch.get()),
                Event::Gap { .. } | Event::Restart { .. } => None,
            })
            .or_else(|| self.partial.keys().next().copied())
            .unwrap_or(epoch)
            .min(epoch);
        tracing::warn!(
            "subscription {}: {} bytes buffered, max_alloc {}: dropping epochs from {} on",
            self.sub_id,
            self.bytes_used,
            self.options.max_alloc,
            Epoch::from_u64(from)
        );
        self.ready
            .retain(|(e, _)| matches!(e, Event::Gap { .. } | Event::Restart { .. }));
        for p in self.partial.values_mut() {
            p.changes.clear();
            p.coming.clear();
            p.bytes = 0;
        }
        self.bytes_used = 0;
        let dropped_max = self
            .partial
            .keys()
            .last()
            .copied()
            .unwrap_or(epoch)
            .max(epoch);
        self.discarding = Some((from, dropped_max));
    }

    /// The entries of `bytes` (a part of bucket `bucket`), decoded; what
    /// cannot be is logged and left out. A change of a table version newer
    /// than this subscription knows fetches the table's definition again
    /// (the table was altered: its schema entry may come later, in another
    /// bucket or epoch).
    fn decode(&mut self, bytes: &[u8], bucket: NodeId) -> Vec<Item> {
        let mut out = Vec::new();
        for entry in sub_change::entries(bytes) {
            let entry = match entry {
                Ok(entry) => entry,
                Err(error) => {
                    tracing::warn!("subscription {}: {error}", self.sub_id);
                    break;
                }
            };
            if sub_change::is_schema(entry.kind) {
                let kind = match entry.kind {
                    sub_change::DROP => SchemaKind::Dropped,
                    sub_change::REPLACE => SchemaKind::Replaced,
                    _ => SchemaKind::Altered,
                };
                match kind {
                    SchemaKind::Altered => {
                        self.install_definition(entry.table, entry.version, entry.after);
                    }
                    SchemaKind::Replaced => self.follow(&entry),
                    SchemaKind::Dropped => {}
                }
                if self.tables.contains_key(&entry.table) {
                    out.push(Item::Schema {
                        table: entry.table,
                        version: entry.version,
                        kind,
                        bucket,
                    });
                }
                continue;
            }
            // One lookup per change; a table not subscribed is rare.
            let known = match self.tables.get(&entry.table).map(|t| t.table.def().version) {
                Some(version) => version,
                None if self.resolve_copy(entry.table) => {
                    self.tables[&entry.table].table.def().version
                }
                None => continue,
            };
            if entry.version > known {
                self.refresh(entry.table);
            }
            let sub = match self.tables.get(&entry.table) {
                Some(s) if s.table.def().version == entry.version => s,
                _ => match self.older.get(&(entry.table, entry.version)) {
                    Some(s) => s,
                    None => self.tables.get(&entry.table).expect("checked"),
                },
            };
            match decode_change(sub, &entry, self.options.images) {
                Ok(change) => out.push(Item::Row {
                    table: entry.table,
                    version: entry.version,
                    change,
                }),
                Err(error) => tracing::warn!(
                    "subscription {}: a change of `{}` left out: {error}",
                    self.sub_id,
                    sub.table.name()
                ),
            }
        }
        out
    }

    /// An alter's schema entry: table `id`'s definition of `version`
    /// (`def`, encoded), unless known already. Changes are decoded by the
    /// definition alone: a BLOB/TEXT column's parts tables are not needed
    /// (its value here is its head), so the definition holds even once
    /// the table was renamed or dropped since.
    fn install_definition(&mut self, id: u32, version: u32, def: &[u8]) {
        let Some(current) = self.tables.get(&id) else {
            return;
        };
        if current.table.def().version >= version {
            return;
        }
        match TableDef::decode(def) {
            Ok(def) if def.id == id && def.version == version => {
                self.replace_definition(id, Arc::new(Table::new(def)));
            }
            Ok(def) => tracing::warn!(
                "subscription {}: an alter's entry of table {id} version {version} holds \
                 table {} version {}: left out",
                self.sub_id,
                def.id,
                def.version
            ),
            Err(error) => tracing::warn!(
                "subscription {}: an alter's entry of table {id}: {error}",
                self.sub_id
            ),
        }
    }

    /// The `REPLACE` entries of `bytes` (a part not taken), followed.
    fn follow_in(&mut self, bytes: &[u8]) {
        for entry in sub_change::entries(bytes).map_while(Result::ok) {
            if entry.kind == sub_change::REPLACE {
                self.follow(&entry);
            }
        }
    }

    /// A `REPLACE` entry: a copying ALTER's copy took the name of a
    /// subscribed table (or a copy's parts table that of a subscribed
    /// parts table); it is subscribed from now on, decoded by the
    /// definition the entry carries, with the subscription's projection.
    /// Every data node sends the entry before any change of
    /// the copy, so none comes before the copy is known here.
    fn follow(&mut self, entry: &sub_change::Entry<'_>) {
        let copy = entry.table;
        let Some(replaced) = sub_change::replaced_table(entry) else {
            tracing::warn!(
                "subscription {}: a REPLACE entry without the replaced table",
                self.sub_id
            );
            return;
        };
        if !self.tables.contains_key(&replaced) || self.tables.contains_key(&copy) {
            return;
        }
        let def = match TableDef::decode(entry.after) {
            Ok(def) if def.id == copy && def.version == entry.version => def,
            Ok(def) => {
                return tracing::warn!(
                    "subscription {}: the REPLACE entry of table {copy} version {} holds table {} \
                     version {}: left out",
                    self.sub_id,
                    entry.version,
                    def.id,
                    def.version
                );
            }
            Err(error) => {
                return tracing::warn!(
                    "subscription {}: the REPLACE entry of table {copy}: {error}",
                    self.sub_id
                );
            }
        };
        self.add_copy(copy, Arc::new(Table::new(def)), replaced);
    }

    /// Subscribes `table` (id `copy`), which replaces subscribed table
    /// `replaced`.
    fn add_copy(&mut self, copy: u32, table: Arc<Table>, replaced: u32) {
        tracing::info!(
            "subscription {}: `{}` (table {copy}) replaces table {replaced}",
            self.sub_id,
            table.name()
        );
        let shown = self.shown_columns(table.def());
        self.tables.insert(copy, Subscribed::new(table, shown));
        self.schema_order.follow(copy);
    }

    /// A change of table `id`, which this subscription does not have. A
    /// data node sends a table only to the subscriptions that have it
    /// there, so it is a copy that replaced one of them whose `REPLACE`
    /// entry has not come here (a node restarted after the copy's swap
    /// captures it in place of the replaced table without one). Found in
    /// the dictionary under the names the subscribed tables had; true if
    /// it was. An id not found is not looked for again.
    fn resolve_copy(&mut self, id: u32) -> bool {
        if self.unresolved.contains(&id) {
            return false;
        }
        let names: std::collections::BTreeSet<String> = self
            .tables
            .values()
            .chain(self.older.values())
            .map(|s| s.table.name().to_owned())
            .collect();
        if let Ok(session) = self.cluster.session() {
            for name in names {
                session.forget_table(&name);
                let Ok(table) = session.table(&name) else {
                    continue;
                };
                let replaced = table.def().replaces;
                if table.id() == id && self.tables.contains_key(&replaced) {
                    self.add_copy(id, table, replaced);
                    return true;
                }
            }
        }
        tracing::warn!(
            "subscription {}: changes of table {id}, which it does not have, left out",
            self.sub_id
        );
        if self.unresolved.len() >= UNRESOLVED_MAX {
            self.unresolved.remove(0);
        }
        self.unresolved.push(id);
        false
    }

    /// The columns of `def` this subscription shows: those it named that
    /// are there, else every column (the hidden `$` ones if asked for).
    fn shown_columns(&self, def: &TableDef) -> Vec<usize> {
        match &self.options.columns {
            None => (0..def.columns.len())
                .filter(|&c| self.options.hidden_columns || !def.columns[c].name.starts_with('$'))
                .collect(),
            Some(names) => names
                .iter()
                .filter_map(|n| def.columns.iter().position(|c| &c.name == n))
                .collect(),
        }
    }

    /// Fetches table `id`'s definition again, by id (it may have been
    /// renamed since): a change of a newer version came before its alter's
    /// entry. A parts table comes with its base table's group.
    fn refresh(&mut self, id: u32) {
        let Some(current) = self.tables.get(&id) else {
            return;
        };
        let name = current.table.name().to_owned();
        let fetched = self
            .cluster
            .session()
            .and_then(|session| session.table_by_id(id))
            .map(|table| match table.parts_table_by_id(id) {
                Some(parts) => Arc::clone(parts),
                None => table,
            });
        match fetched {
            Ok(table) if table.id() == id && table.def().version > current.table.def().version => {
                self.replace_definition(id, table);
            }
            Ok(_) => {
                tracing::warn!(
                    "subscription {}: `{name}` has no newer definition of id {id}",
                    self.sub_id
                );
            }
            Err(error) => {
                tracing::warn!(
                    "subscription {}: the new definition of `{name}`: {error}",
                    self.sub_id
                );
            }
        }
    }

    /// Table `id` decodes by `table` from now on; the definition known so
    /// far goes to `older`, for its changes still coming. The projection
    /// keeps the columns it named that are still there.
    fn replace_definition(&mut self, id: u32, table: Arc<Table>) {
        let Some(current) = self.tables.get(&id) else {
            return;
        };
        let old_version = current.table.def().version;
        let shown = self.shown_columns(table.def());
        let old = self.tables.insert(id, Subscribed::new(table, shown));
        if let Some(old) = old {
            self.older.insert((id, old_version), old);
        }
    }

    /// The epoch's entries as handed out (see [`SchemaOrder::order`]).
    fn order_schema(&mut self, epoch: Epoch, items: Vec<Item>) -> EpochChanges {
        let (tables, older) = (&self.tables, &self.older);
        // The name of that version (a copy's swap renames the old table
        // after its lock's alter), else the latest known.
        let name = |t: u32, version: u32| {
            older
                .get(&(t, version))
                .or_else(|| tables.get(&t))
                .map(|s| s.table.name().to_owned())
                .unwrap_or_default()
        };
        self.schema_order.order(epoch, items, &name)
    }
}

/// Where a subscription's schema events go (see [`SchemaOrder::order`]).
#[derive(Debug, Default)]
struct SchemaOrder {
    /// Every bucket (each data node of the placement).
    buckets: NodeBitmask,
    /// Per table, the version its last schema event announced (its
    /// version at the start before any); a dropped table is removed.
    announced: HashMap<u32, u32>,
    /// Schema entries received and not yet announced: (kind, table,
    /// version) → the buckets whose part of some epoch had it.
    seen: BTreeMap<(u8, u32, u32), NodeBitmask>,
    /// Tables that replace subscribed ones, their replacement not yet
    /// announced.
    replacing: Vec<u32>,
}

impl SchemaOrder {
    /// Table `table` replaces a subscribed one (a `REPLACE` entry): its
    /// replacement is announced like an alter from no version.
    fn follow(&mut self, table: u32) {
        if let std::collections::hash_map::Entry::Vacant(e) = self.announced.entry(table) {
            e.insert(0);
            self.replacing.push(table);
        }
    }

    /// The epoch's entries as handed out: row changes, and a schema event
    /// per table altered or dropped here. A table's schema event comes
    /// once every bucket's part had its entry (each node files it after
    /// the old definition's changes of the buckets it sends), or earlier,
    /// in the first epoch with a change under the new definition. In the
    /// epoch, the changes of the old definitions go first, then the
    /// alters' events, then the changes of the new, then the drops'
    /// events.
    fn order(
        &mut self,
        epoch: Epoch,
        items: Vec<Item>,
        name: &dyn Fn(u32, u32) -> String,
    ) -> EpochChanges {
        let mut rows = Vec::with_capacity(items.len());
        for item in items {
            match item {
                Item::Row {
                    table,
                    version,
                    change,
                } => rows.push((table, version, change)),
                Item::Schema {
                    table,
                    version,
                    kind,
                    bucket,
                } => {
                    self.seen
                        .entry((kind.code(), table, version))
                        .or_default()
                        .insert(bucket);
                }
            }
        }
        // (table, kind, version) announced in this epoch.
        let mut events: Vec<(u32, SchemaKind, u32)> = Vec::new();
        for (&(code, table, version), buckets) in &self.seen {
            let Some(&known) = self.announced.get(&table) else {
                continue;
            };
            let all = *buckets == self.buckets;
            if code == sub_change::DROP {
                if all {
                    events.push((table, SchemaKind::Dropped, version));
                }
            } else if version > known
                && (all || rows.iter().any(|(t, v, _)| *t == table && *v >= version))
            {
                let kind = if code == sub_change::REPLACE {
                    SchemaKind::Replaced
                } else {
                    SchemaKind::Altered
                };
                events.push((table, kind, version));
            }
        }
        // A change under a definition no entry announced yet.
        for (table, version, _) in &rows {
            let newer = self.announced.get(table).is_some_and(|&k| *version > k);
            let listed = events
                .iter()
                .any(|(t, k, v)| t == table && *k != SchemaKind::Dropped && v >= version);
            if newer && !listed {
                let kind = if self.replacing.contains(table) {
                    SchemaKind::Replaced
                } else {
                    SchemaKind::Altered
                };
                events.push((*table, kind, *version));
            }
        }
        let is_new = |table: u32, version: u32| {
            events
                .iter()
                .any(|&(t, k, v)| t == table && k != SchemaKind::Dropped && version >= v)
        };
        let (old, new): (Vec<_>, Vec<_>) = rows.into_iter().partition(|(t, v, _)| !is_new(*t, *v));
        // An alter goes between the old and the new changes; a drop after
        // every change of the epoch (none of the table follows it).
        let (at_alter, at_drop) = (old.len(), old.len() + new.len());
        let mut schema = Vec::new();
        events.sort_unstable_by_key(|&(t, k, v)| (t, v, k == SchemaKind::Dropped));
        for (table, kind, version) in events {
            let at = match kind {
                SchemaKind::Altered | SchemaKind::Replaced => {
                    self.replacing.retain(|&t| t != table);
                    let known = self.announced.entry(table).or_insert(version);
                    *known = (*known).max(version);
                    at_alter
                }
                SchemaKind::Dropped => {
                    self.announced.remove(&table);
                    at_drop
                }
            };
            schema.push(SchemaChange {
                table: name(table, version),
                kind,
                version,
                at,
            });
        }
        // At one place, a drop after an alter or a replacement (a copy's
        // replacement and the old table's drop can share an epoch's end).
        schema.sort_by_key(|s| (s.at, s.kind == SchemaKind::Dropped));
        let announced = &self.announced;
        self.seen.retain(|&(code, table, version), _| {
            announced
                .get(&table)
                .is_some_and(|&k| code == sub_change::DROP || version > k)
        });
        EpochChanges {
            epoch,
            changes: old.into_iter().chain(new).map(|(_, _, c)| c).collect(),
            schema,
        }
    }
}

impl Iterator for Subscription {
    type Item = Result<Event>;

    /// The next event, waiting for it; `None` once the subscription has
    /// ended and everything was taken.
    fn next(&mut self) -> Option<Result<Event>> {
        loop {
            match self.next_timeout(Duration::from_secs(1)) {
                Ok(Some(event)) => return Some(Ok(event)),
                Ok(None) if self.ended => return None,
                Ok(None) => {}
                Err(error) => return Some(Err(error)),
            }
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let nodes: Vec<(usize, NodeId)> = self.nodes.iter().map(|n| (n.link, n.node)).collect();
        for (link, node) in nodes {
            let stop = SignalBody::SubStopReq {
                sub_id: self.sub_id,
            };
            // A node that is gone forgets the subscription by itself.
            let _ = self.send(link, node, stop);
        }
        self.shared().unregister_session(self.mailbox.instance);
    }
}

/// One entry as a [`RowChange`] of `sub`'s table.
fn decode_change<'a>(
    sub: &Subscribed,
    entry: &sub_change::Entry<'a>,
    images: Images,
) -> std::result::Result<RowChange, String> {
    let def = sub.table.def();
    if entry.version != def.version {
        return Err(format!(
            "table version {} (this subscription knows {})",
            entry.version, def.version
        ));
    }
    let kind = match entry.kind {
        sub_change::INSERT => ChangeKind::Insert,
        sub_change::UPDATE => ChangeKind::Update,
        _ => ChangeKind::Delete,
    };
    // Each image checked whole, then only the columns shown decoded, and
    // owned only when kept (a minimal update compares borrowed values).
    let split = |image: &'a [u8]| -> std::result::Result<(&'a [u8], &'a [u8]), String> {
        let fixed_bytes = sub.layout.fixed_bytes();
        if image.len() < fixed_bytes {
            return Err(format!("a row image of {} bytes", image.len()));
        }
        let (fixed, var) = image.split_at(fixed_bytes);
        sub.layout
            .validate_row(fixed, var)
            .map_err(|e| e.to_string())?;
        Ok((fixed, var))
    };
    let before = match kind {
        ChangeKind::Insert => None,
        _ => Some(split(entry.before)?),
    };
    let after = match kind {
        ChangeKind::Delete => None,
        _ => Some(split(entry.after)?),
    };
    let column =
        |(fixed, var): (&'a [u8], &'a [u8]), c: usize| sub.layout.decode_column(fixed, var, c);
    let named = |image: Option<(&'a [u8], &'a [u8])>, keep: &dyn Fn(usize) -> bool| {
        image.map(|image| {
            let mut out = Vec::with_capacity(sub.shown.len());
            for &c in sub.shown.iter().filter(|&&c| keep(c)) {
                out.push((sub.column_names[c], column(image, c).to_value()));
            }
            out
        })
    };
    let key = |c: usize| def.primary_key.contains(&c);
    let (before, after) = match (images, kind, before, after) {
        (Images::Full, ..) | (Images::Minimal, ChangeKind::Insert, ..) => {
            (named(before, &|_| true), named(after, &|_| true))
        }
        (Images::Minimal, ChangeKind::Update, Some(b), Some(a)) => {
            // One pass: each column of the after image decoded once.
            let mut changed = Vec::with_capacity(sub.shown.len());
            for &c in &sub.shown {
                let value = column(a, c);
                if key(c) || column(b, c) != value {
                    changed.push((sub.column_names[c], value.to_value()));
                }
            }
            (named(Some(b), &key), Some(changed))
        }
        (Images::Minimal, _, b, _) => (named(b, &key), None),
    };
    Ok(RowChange {
        table: sub.name,
        kind,
        before,
        after,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ::schema::{Collation, Column, ColumnType, TableDef};

    fn bucket(n: u8) -> NodeId {
        NodeId::new(n).expect("a node id")
    }

    /// Table 7 at version 1, buckets 2 and 3.
    fn order() -> SchemaOrder {
        SchemaOrder {
            buckets: [bucket(2), bucket(3)].into_iter().collect(),
            announced: [(7, 1)].into_iter().collect(),
            seen: BTreeMap::new(),
            replacing: Vec::new(),
        }
    }

    fn row(version: u32, id: i64) -> Item {
        Item::Row {
            table: 7,
            version,
            change: RowChange {
                table: "t",
                kind: ChangeKind::Insert,
                before: None,
                after: Some(vec![("id", Value::Int(id))]),
            },
        }
    }

    fn entry(kind: SchemaKind, version: u32, b: u8) -> Item {
        Item::Schema {
            table: 7,
            version,
            kind,
            bucket: bucket(b),
        }
    }

    fn ids(e: &EpochChanges) -> Vec<i64> {
        e.changes
            .iter()
            .map(|c| match c.after.as_deref() {
                Some([(_, Value::Int(id))]) => *id,
                other => panic!("{other:?}"),
            })
            .collect()
    }

    fn events(e: &EpochChanges) -> Vec<(SchemaKind, u32, usize)> {
        e.schema.iter().map(|s| (s.kind, s.version, s.at)).collect()
    }

    #[test]
    fn an_alter_comes_once_every_bucket_had_its_entry() {
        let mut o = order();
        let name = |_, _| "t".to_owned();
        let e = o.order(
            Epoch::from_u64(1),
            vec![row(1, 1), entry(SchemaKind::Altered, 2, 2)],
            &name,
        );
        assert!(e.schema.is_empty(), "bucket 3 may still hold old changes");
        let e = o.order(
            Epoch::from_u64(2),
            vec![row(1, 2), entry(SchemaKind::Altered, 2, 3)],
            &name,
        );
        assert_eq!(ids(&e), [2]);
        assert_eq!(
            events(&e),
            [(SchemaKind::Altered, 2, 1)],
            "after the old change"
        );
        let e = o.order(Epoch::from_u64(3), vec![row(2, 3)], &name);
        assert!(e.schema.is_empty(), "once");
    }

    #[test]
    fn a_change_of_the_new_definition_announces_the_alter_before_it() {
        let mut o = order();
        let name = |_, _| "t".to_owned();
        let items = vec![row(2, 1), entry(SchemaKind::Altered, 2, 2), row(1, 2)];
        let e = o.order(Epoch::from_u64(1), items, &name);
        assert_eq!(ids(&e), [2, 1], "the old definition's change first");
        assert_eq!(events(&e), [(SchemaKind::Altered, 2, 1)]);
        // The other bucket's entry, later: already announced.
        let e = o.order(
            Epoch::from_u64(2),
            vec![entry(SchemaKind::Altered, 2, 3)],
            &name,
        );
        assert!(e.schema.is_empty());
    }

    #[test]
    fn a_replacing_table_is_announced_before_its_first_change() {
        let mut o = order();
        let name = |t: u32, _| format!("t{t}");
        let copy_row = |id| Item::Row {
            table: 9,
            version: 2,
            change: RowChange {
                table: "t",
                kind: ChangeKind::Insert,
                before: None,
                after: Some(vec![("id", Value::Int(id))]),
            },
        };
        let replaced = |b| Item::Schema {
            table: 9,
            version: 2,
            kind: SchemaKind::Replaced,
            bucket: bucket(b),
        };
        o.follow(9);
        // One bucket's entry, then a change of the copy in the same epoch
        // (the old table's change before it goes first).
        let items = vec![copy_row(2), replaced(2), row(1, 1)];
        let e = o.order(Epoch::from_u64(1), items, &name);
        assert_eq!(ids(&e), [1, 2]);
        assert_eq!(e.schema.len(), 1);
        assert_eq!(
            (e.schema[0].kind, e.schema[0].version, e.schema[0].at),
            (SchemaKind::Replaced, 2, 1)
        );
        assert_eq!(e.schema[0].table, "t9");
        // The other bucket's entry later: announced once only.
        let e = o.order(Epoch::from_u64(2), vec![replaced(3), copy_row(3)], &name);
        assert!(e.schema.is_empty(), "{e:?}");
        assert!(o.seen.is_empty() && o.replacing.is_empty());
        // A change of the copy whose entry came in a part not taken: a
        // replacement still, not an alter.
        let mut o = order();
        o.follow(9);
        let e = o.order(Epoch::from_u64(1), vec![copy_row(4)], &name);
        assert_eq!(e.schema.len(), 1);
        assert_eq!(e.schema[0].kind, SchemaKind::Replaced);
        // Every bucket's entry and no change: announced at the end.
        let mut o = order();
        o.follow(9);
        let e = o.order(Epoch::from_u64(1), vec![replaced(2), replaced(3)], &name);
        assert_eq!(e.schema.len(), 1);
        assert_eq!(
            (e.schema[0].kind, e.schema[0].at),
            (SchemaKind::Replaced, 0)
        );
    }

    #[test]
    fn a_drop_ends_the_epoch_and_the_table() {
        let mut o = order();
        let name = |_, _| "t".to_owned();
        let items = vec![
            entry(SchemaKind::Dropped, 1, 2),
            row(1, 1),
            entry(SchemaKind::Dropped, 1, 3),
        ];
        let e = o.order(Epoch::from_u64(1), items, &name);
        assert_eq!(ids(&e), [1]);
        assert_eq!(
            events(&e),
            [(SchemaKind::Dropped, 1, 1)],
            "after every change"
        );
        assert!(o.seen.is_empty() && o.announced.is_empty());
        // Altered and dropped in one epoch (its first new change there).
        let mut o = order();
        let items = vec![
            entry(SchemaKind::Dropped, 2, 2),
            row(2, 5),
            entry(SchemaKind::Dropped, 2, 3),
        ];
        let e = o.order(Epoch::from_u64(1), items, &name);
        assert_eq!(
            events(&e),
            [(SchemaKind::Altered, 2, 0), (SchemaKind::Dropped, 2, 1)],
            "the drop after the new change"
        );
    }

    fn subscribed(columns: Option<&[usize]>) -> Subscribed {
        let def = TableDef::new(
            "d/def/t",
            7,
            vec![
                Column::new("k", ColumnType::BigInt { unsigned: false }),
                Column::new(
                    "a",
                    ColumnType::VarChar {
                        max: 10,
                        collation: Collation::Utf8mb4Bin,
                    },
                ),
                Column::new("b", ColumnType::Int { unsigned: false }),
            ],
        )
        .primary_key(vec![0])
        .build()
        .expect("a valid table");
        let table = Arc::new(Table::new(def));
        let def = table.def();
        let shown = match columns {
            Some(c) => c.to_vec(),
            None => (0..def.columns.len())
                .filter(|&c| !def.columns[c].name.starts_with('$'))
                .collect(),
        };
        Subscribed::new(table, shown)
    }

    fn image(sub: &Subscribed, values: &[Value]) -> Vec<u8> {
        let (mut fixed, mut var) = (Vec::new(), Vec::new());
        sub.layout
            .encode(values, &mut fixed, &mut var)
            .expect("encodes");
        fixed.extend_from_slice(&var);
        fixed
    }

    fn update(sub: &Subscribed, before: &[u8], after: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        sub_change::push(
            &mut out,
            &sub_change::Entry {
                kind: sub_change::UPDATE,
                flags: 0,
                table: 7,
                version: sub.table.def().version,
                partition: 0,
                before,
                after,
            },
        );
        out
    }

    fn named(pairs: &[(&'static str, Value)]) -> Option<Vec<(&'static str, Value)>> {
        Some(pairs.iter().map(|(n, v)| (*n, v.clone())).collect())
    }

    #[test]
    fn images_are_full_minimal_or_projected() {
        let sub = subscribed(None);
        let s = |t: &str| Value::String(t.to_owned());
        let before = image(&sub, &[Value::Int(1), s("x"), Value::Int(5)]);
        let after = image(&sub, &[Value::Int(1), s("y"), Value::Int(5)]);
        let bytes = update(&sub, &before, &after);
        let entry = sub_change::entries(&bytes)
            .next()
            .expect("one")
            .expect("whole");
        let full = decode_change(&sub, &entry, Images::Full).expect("decodes");
        assert_eq!(full.kind, ChangeKind::Update);
        assert_eq!(full.table, "d/def/t");
        assert_eq!(
            full.before,
            named(&[("k", Value::Int(1)), ("a", s("x")), ("b", Value::Int(5))])
        );
        let minimal = decode_change(&sub, &entry, Images::Minimal).expect("decodes");
        assert_eq!(minimal.before, named(&[("k", Value::Int(1))]), "the key");
        assert_eq!(
            minimal.after,
            named(&[("k", Value::Int(1)), ("a", s("y"))]),
            "the key and what changed"
        );
        let projected = subscribed(Some(&[2]));
        let p = decode_change(&projected, &entry, Images::Full).expect("decodes");
        assert_eq!(p.after, named(&[("b", Value::Int(5))]));
    }

    #[test]
    fn bad_images_are_errors_not_panics() {
        let sub = subscribed(None);
        let good = image(
            &sub,
            &[Value::Int(1), Value::String("abc".into()), Value::Int(5)],
        );
        for cut in 0..good.len() {
            let bytes = update(&sub, &good[..cut], &good);
            let entry = sub_change::entries(&bytes)
                .next()
                .expect("one")
                .expect("whole");
            assert!(
                decode_change(&sub, &entry, Images::Full).is_err(),
                "cut at {cut}"
            );
        }
        let mut other_version = update(&sub, &good, &good);
        other_version[6] ^= 1;
        let entry = sub_change::entries(&other_version)
            .next()
            .expect("one")
            .expect("whole");
        assert!(decode_change(&sub, &entry, Images::Full).is_err());
    }
}
