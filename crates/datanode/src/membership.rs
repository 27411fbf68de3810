//! Membership (NDB: QMGR with the membership part of NDBCNTR): which data
//! nodes form the cluster, who decides (the president), heartbeats, failure
//! detection, and the API nodes' registrations.
//!
//! The protocol, and what it guarantees:
//!
//! * **Views.** The membership is a [`MembershipView`]: an id, a president and
//!   the members oldest first. Only the president makes a new view, and each
//!   new view has a larger id. Every member installs only views newer than its
//!   own, so all members that hear the latest view agree on it.
//! * **Joining.** A starting node asks every data node it is connected to
//!   (`CmRegReq`). Members answer with the president's id; the president admits
//!   the node by appending it to the view. If no connected node is a member, the
//!   starting nodes elect the lowest node id among them, once every configured
//!   data node is connected or `start_partial_timeout` has passed (NDB's
//!   StartPartialTimeout).
//! * **Failure.** A member suspects another when its connection closes or when
//!   nothing was heard from it for `heartbeat_misses_max` heartbeat intervals.
//!   It reports the failure to the president (`FailRep`), which removes the node
//!   in a new view. If the president itself is suspected, the oldest member not
//!   suspected takes over as president and makes the new view — once every
//!   member it can reach reported the older members failed: a member that
//!   lost only its link to the president is removed by the president, not
//!   followed by a second president (see `takeover_agreed`).
//! * **Exclusion.** A node that sees a view without itself, or that hears from
//!   a member of a newer view that excludes it, shuts down (its angel restarts
//!   it and it joins again as a new incarnation).
//! * **Viability and arbitration** (NDB's arbitration check). Before the
//!   acting president removes failed members it judges the side it can still
//!   reach against the view ([`viability`]): a side that lacks a whole node
//!   group, or holds fewer than half of the members, shuts down; a side that
//!   holds a whole node group, or more than half of the members, goes on; a
//!   tie asks the arbitrator (the mgmd, `ArbitReq`) and goes on only with its
//!   vote, shutting down when refused or without an answer within
//!   ArbitrationTimeout. A partial start is judged the same way against the
//!   configured data nodes. So the two sides of a split never both go on.
//!
//! Invariants asserted here: the president of an installed view is one of its
//! members; a member's own view contains itself; view ids only grow.

use std::collections::BTreeMap;
use std::time::Duration;

use kernel::{Block, Context, Instant};
use signal::{
    BlockNumber, BlockRef, EventKind, FailReason, MembershipView, NodeBitmask, NodeId, NodeState,
    RegRefReason, Severity, Signal, SignalBody, VERSION,
};

/// Heartbeats a member may miss before it is declared failed (NDB declares a
/// node dead after missing heartbeats for four intervals).
pub const HEARTBEAT_MISSES_MAX: u32 = 4;
/// How often a starting node asks to join.
pub const JOIN_RETRY_INTERVAL: Duration = Duration::from_millis(100);
/// A starting peer counts as a candidate for president this long after its last word.
const STARTING_PEER_FRESH: Duration = Duration::from_millis(500);
/// NDB's default ArbitrationTimeout, for a block built without the configuration's.
pub const ARBITRATION_TIMEOUT_DEFAULT: Duration = Duration::from_millis(7500);
/// A starting node refused the vote for a partial start asks again after this long.
const START_ARBITRATION_RETRY_INTERVAL: Duration = Duration::from_millis(2000);

const TIMER_HEARTBEAT: u32 = 1;
const TIMER_JOIN: u32 = 2;
const TIMER_API_CHECK: u32 = 3;
const TIMER_STATUS: u32 = 4;
const TIMER_ARBITRATION: u32 = 5;
const TIMER_STOP_DRAIN: u32 = 6;
const TIMER_STOP_EXIT: u32 = 7;
/// Timer: a node that cannot start has told the peers it could reach.
const TIMER_START_FAILED: u32 = 8;
/// How long a node that cannot start waits for connections to the other
/// data nodes to tell them not to wait for it: the transport connects to a
/// peer that is up within a few of its retries (100 ms each); peers not up
/// by then will wait `StartPartialTimeout` as before.
const START_FAILED_NOTICE_MAX: Duration = Duration::from_secs(2);
/// How long a stopping node lingers after telling the members it leaves,
/// so that the notice reaches them before its connections close.
const STOP_NOTICE: Duration = Duration::from_millis(20);
/// Longest a stopping node waits for its TCs to end their transactions
/// (see `tc::shutdown`) before it leaves anyway.
const STOP_DRAIN_MAX: Duration = Duration::from_secs(5);
/// Least time a stopping node keeps answering after it told its API nodes
/// it takes no new transactions: requests they sent before the news reach
/// it get a retryable refusal (280) rather than a closed connection, which
/// a client must report as an unknown result (4010).
const STOP_GRACE: Duration = Duration::from_millis(200);

/// A stop ordered by the management server, waiting for the local TCs.
#[derive(Clone, Copy, Debug)]
struct PendingStop {
    restart: bool,
    tcs_left: usize,
    since: Instant,
}

/// What the block needs to know; filled from the cluster configuration.
#[derive(Clone, Debug)]
pub struct MembershipConfig {
    pub node: NodeId,
    /// Every configured data node, this one included.
    pub data_nodes: Vec<NodeId>,
    /// The management server that gets status reports and cluster-log
    /// events, and arbitrates ties after a split (`None`: ties go on).
    pub mgmd: Option<NodeId>,
    /// HeartbeatIntervalDbDb.
    pub heartbeat_interval: Duration,
    /// HeartbeatIntervalDbApi.
    pub api_heartbeat_interval: Duration,
    /// Wait this long for every configured data node before forming a cluster without them.
    pub start_partial_timeout: Duration,
    /// Tells this incarnation from earlier ones of the same node id.
    pub start_id: u64,
    /// Of this process, for the mgmd's `show`.
    pub pid: u32,
}

/// What a side of a split may do, judged by its president (NDB: the
/// arbitration check, `ArbitCode`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Viability {
    /// Some node group has no node on this side: it cannot have all data.
    LoseGroups,
    /// Fewer than half of the nodes: the other side may have more.
    LoseNodes,
    /// Every node of some node group is on this side: the other side lacks
    /// that group and cannot go on.
    WinGroups,
    /// More than half of the nodes.
    WinNodes,
    /// A tie: only the arbitrator can tell which side goes on.
    Arbitrate,
}

impl Viability {
    pub fn goes_on(self) -> bool {
        matches!(self, Viability::WinGroups | Viability::WinNodes)
    }

    fn describe(self) -> &'static str {
        match self {
            Viability::LoseGroups => "a node group has no node left on this side",
            Viability::LoseNodes => "fewer than half of the nodes are left on this side",
            Viability::WinGroups => "this side holds every node of a node group",
            Viability::WinNodes => "more than half of the nodes are left on this side",
            Viability::Arbitrate => "exactly half of the nodes, and no node group decides",
        }
    }
}

/// Judges `side`, the part of `before` (a view's members, or the configured
/// data nodes at a partial start) that one node can still reach. Node groups
/// count with their nodes in `before` only (a group's node that left earlier
/// is not missed again). The order matters: a side that lacks a group loses
/// even with more than half of the nodes, and a side that holds a whole
/// group wins even with fewer; that keeps two sides from both going on,
/// since the other side of a group-winner always lacks that group.
pub fn viability(groups: &[Vec<NodeId>], before: &[NodeId], side: &[NodeId]) -> Viability {
    debug_assert!(side.iter().all(|n| before.contains(n)));
    let mut holds_a_group = false;
    for group in groups {
        let present: Vec<NodeId> = group
            .iter()
            .copied()
            .filter(|n| before.contains(n))
            .collect();
        if present.is_empty() {
            continue;
        }
        let on_side = present.iter().filter(|n| side.contains(n)).count();
        if on_side == 0 {
            return Viability::LoseGroups;
        }
        if on_side == present.len() && side.len() < before.len() {
            holds_a_group = true;
        }
    }
    if holds_a_group {
        return Viability::WinGroups;
    }
    match (side.len() * 2).cmp(&before.len()) {
        std::cmp::Ordering::Greater => Viability::WinNodes,
        std::cmp::Ordering::Less => Viability::LoseNodes,
        std::cmp::Ordering::Equal => Viability::Arbitrate,
    }
}

/// A question to the arbitrator that has not been answered.
#[derive(Clone, Debug)]
struct PendingArbitration {
    /// The view the side splits from; 0 at a partial start.
    view_id: u32,
    /// The side asked for.
    members: NodeBitmask,
    /// Without an answer by then, the side shuts down (a start asks again).
    deadline: Instant,
    /// Why the members were lost, for the cluster log when the view is made.
    reason: FailReason,
}

/// Where this node is in its life.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Phase {
    Starting,
    Started,
    Stopping,
}

/// A node that cannot start, telling the others before it stops.
#[derive(Debug)]
struct StartFailed {
    reason: String,
    since: Instant,
    /// When the last `CmNotJoiningRep` went out.
    last_notice: Instant,
}

/// The membership block of one data node.
pub struct Membership {
    config: MembershipConfig,
    phase: Phase,
    started_at: Instant,
    view: Option<MembershipView>,
    /// Data nodes with an open connection.
    connected: NodeBitmask,
    /// Last time anything arrived from a data node.
    last_heard: BTreeMap<NodeId, Instant>,
    /// Members this node believes failed, awaiting the view that removes them.
    suspected: NodeBitmask,
    /// Members that announced they leave on purpose (a graceful stop), with
    /// the view they left: not counted as a side that could go on without
    /// us, so the rest needs no arbitrator to continue.
    left_on_purpose: Vec<(NodeId, u32)>,
    /// Starting peers and when they last said so (join phase only).
    starting_peers: BTreeMap<NodeId, Instant>,
    /// The president a member told us about (join phase only).
    president_hint: Option<NodeId>,
    /// start_id of each member's incarnation, as the president admitted it.
    member_start_ids: BTreeMap<NodeId, u64>,
    /// Registered API nodes and when each was last heard.
    api_nodes: BTreeMap<NodeId, Instant>,
    /// The TC instances of this node, told when an API node fails.
    local_tcs: Vec<BlockRef>,
    /// The node's subscription block, when it has one.
    subscription: Option<BlockRef>,
    /// Data nodes that said they will not take part in this start
    /// (`CmNotJoiningRep`: damaged files) and were not heard from since:
    /// the join phase does not wait for them (join phase only).
    not_joining: NodeBitmask,
    /// This node cannot start and is telling the other data nodes so
    /// before it stops (see `on_start_failed`).
    start_failed: Option<StartFailed>,
    /// Whether this node serves (its distribution block's `NodeServingRep`):
    /// until then a started member is reported *starting* to the mgmd.
    serving: bool,
    /// A graceful stop waiting for the local TCs to drain.
    stop: Option<PendingStop>,
    /// The exit of a stopping node, once its notice is out: (restart, why).
    exit: Option<(bool, String)>,
    /// Node groups, each with its data nodes in configuration order.
    node_groups: Vec<Vec<NodeId>>,
    /// NDB's ArbitrationTimeout.
    arbitration_timeout: Duration,
    /// A question to the arbitrator awaiting its answer.
    arbitration: Option<PendingArbitration>,
    /// The vote for a partial start of these nodes (join phase only).
    start_grant: Option<NodeBitmask>,
    /// A refused partial start asks the arbitrator again from this time.
    start_arbitration_retry_at: Instant,
    /// The last views installed here, oldest first (at most
    /// `VIEW_HISTORY_MAX`): a failure is judged against every member of
    /// the views since the last one all current members confirmed.
    view_history: Vec<(u32, Vec<NodeId>)>,
    /// Per member, the highest view id it heartbeat with while it was ours.
    confirmed_view: BTreeMap<NodeId, u32>,
    /// The highest view id a member of this node's view said it holds
    /// (`Heartbeat`, `FailRep`): a view this node makes is numbered above
    /// it (see [`Membership::next_view_id`]).
    newest_heard_view: u32,
    /// When the data node heartbeat check and the API node check last ran:
    /// a check that runs late finds this node was stalled (see
    /// [`Membership::discount_stall`]).
    last_heartbeat_check: Option<Instant>,
    last_api_check: Option<Instant>,
    /// A member reported a view of this view's id that is not this one
    /// (until this node installs its next view).
    other_view_heard: bool,
    /// Per member reported failed in the current view, who reported it
    /// (`FailRep`): a takeover waits until every member this node can
    /// reach reported every older member (see `takeover_agreed`).
    reports: BTreeMap<NodeId, NodeBitmask>,
    /// Why the members suspected here failed, while a takeover waits for
    /// the others' reports (for the cluster log once it happens).
    takeover_waiting: Option<FailReason>,
    /// The figures the TCs and LDMs publish, for ndbinfo scans.
    figures: Option<std::sync::Arc<crate::dbinfo::NodeFigures>>,
}

/// Views kept to judge failures against (see `judge_base`).
const VIEW_HISTORY_MAX: usize = 8;

impl Membership {
    pub fn new(config: MembershipConfig) -> Membership {
        assert!(
            config.data_nodes.contains(&config.node),
            "node {} is not a configured data node",
            config.node
        );
        assert!(!config.heartbeat_interval.is_zero());
        Membership {
            phase: Phase::Starting,
            started_at: Instant::ZERO,
            view: None,
            connected: NodeBitmask::new(),
            last_heard: BTreeMap::new(),
            suspected: NodeBitmask::new(),
            left_on_purpose: Vec::new(),
            starting_peers: BTreeMap::new(),
            president_hint: None,
            member_start_ids: BTreeMap::new(),
            api_nodes: BTreeMap::new(),
            local_tcs: Vec::new(),
            subscription: None,
            not_joining: NodeBitmask::new(),
            start_failed: None,
            serving: false,
            stop: None,
            exit: None,
            node_groups: vec![config.data_nodes.clone()],
            arbitration_timeout: ARBITRATION_TIMEOUT_DEFAULT,
            arbitration: None,
            start_grant: None,
            start_arbitration_retry_at: Instant::ZERO,
            view_history: Vec::new(),
            confirmed_view: BTreeMap::new(),
            newest_heard_view: 0,
            last_heartbeat_check: None,
            last_api_check: None,
            figures: None,
            other_view_heard: false,
            reports: BTreeMap::new(),
            takeover_waiting: None,
            config,
        }
    }

    /// The TC instances to tell when an API node fails, so that they end
    /// its transactions (and release their locks).
    pub fn with_local_tcs(mut self, local_tcs: Vec<BlockRef>) -> Membership {
        self.local_tcs = local_tcs;
        self
    }

    /// The subscription block to tell when an API node fails, so that its
    /// subscriptions end if it does not come back.
    pub fn with_subscription(mut self, subscription: BlockRef) -> Membership {
        self.subscription = Some(subscription);
        self
    }

    /// The node groups (NDB's rule: data nodes in configuration order,
    /// NoOfReplicas per group; `config::Placement::node_groups`). Without
    /// this, all data nodes form one group: only the count of nodes decides.
    ///
    /// # Panics
    /// When a configured data node is in no group or in two, or a group
    /// names a node that is not a configured data node.
    pub fn with_node_groups(mut self, node_groups: Vec<Vec<NodeId>>) -> Membership {
        let mut seen: Vec<NodeId> = node_groups.iter().flatten().copied().collect();
        seen.sort_unstable();
        let mut configured = self.config.data_nodes.clone();
        configured.sort_unstable();
        assert_eq!(
            seen, configured,
            "node groups {node_groups:?} must hold every data node exactly once"
        );
        self.node_groups = node_groups;
        self
    }

    /// How long a side waits for the arbitrator's vote (NDB's ArbitrationTimeout).
    pub fn with_arbitration_timeout(mut self, timeout: Duration) -> Membership {
        assert!(!timeout.is_zero());
        self.arbitration_timeout = timeout;
        self
    }

    /// Answers ndbinfo scans (`DbinfoScanReq`) from `figures`.
    pub fn with_figures(
        mut self,
        figures: std::sync::Arc<crate::dbinfo::NodeFigures>,
    ) -> Membership {
        self.figures = Some(figures);
        self
    }

    /// An API's ndbinfo scan: this node's rows of `table`, answered at once
    /// from the published figures (NDB: DBINFO_SCANREQ to DBINFO).
    fn on_dbinfo_scan_req(
        &self,
        sender: BlockRef,
        request_id: u32,
        table: &str,
        ctx: &mut Context<'_>,
    ) {
        let Some(figures) = &self.figures else {
            tracing::debug!("membership: an ndbinfo scan without figures wired");
            return;
        };
        let status = crate::dbinfo::NodeStatus {
            node: self.me(),
            uptime_s: ctx.now().saturating_since(self.started_at).as_secs(),
            status: match self.node_state() {
                NodeState::Started => "STARTED",
                NodeState::Stopping => "STOPPING",
                _ => "STARTING",
            },
            now: ctx.now(),
            start_phase: match (self.phase, self.serving) {
                (Phase::Started, true) | (Phase::Stopping, _) => 0,
                (Phase::Starting, _) => 1,
                (Phase::Started, false) => 2,
            },
        };
        let body = match crate::dbinfo::rows(table, figures, &status) {
            Ok(rows) => SignalBody::DbinfoScanConf { request_id, rows },
            Err(message) => SignalBody::DbinfoScanRef {
                request_id,
                code: proto::error::NO_SUCH_TABLE,
                message,
            },
        };
        ctx.send(sender, body);
    }

    /// True while this node waits for the arbitrator's vote.
    /// A node without a distribution block (the membership-only
    /// simulation) has no node states to wait for: started is serving.
    pub fn serving_from_start(mut self) -> Membership {
        self.serving = true;
        self
    }

    /// The state this block reports to the mgmd (`skarv admin show`).
    pub fn reported_state(&self) -> NodeState {
        self.node_state()
    }

    pub fn arbitrating(&self) -> bool {
        self.arbitration.is_some()
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }

    pub fn view(&self) -> Option<&MembershipView> {
        self.view.as_ref()
    }

    pub fn is_president(&self) -> bool {
        self.view
            .as_ref()
            .is_some_and(|v| v.president == self.config.node)
    }

    pub fn api_nodes(&self) -> Vec<NodeId> {
        self.api_nodes.keys().copied().collect()
    }

    /// Members this node believes failed, awaiting the view that removes them.
    pub fn suspected(&self) -> Vec<NodeId> {
        self.suspected.iter().collect()
    }

    /// One line for a simulator's failure message: the phase, the view,
    /// the suspicions and what a node asking to join hears from this one
    /// (a cluster that never settles is usually one node refusing the
    /// rejoins of the others).
    pub fn describe(&self) -> String {
        let view = match &self.view {
            Some(v) => format!(
                "view {} president {} members {:?}",
                v.view_id,
                v.president,
                v.members.iter().map(|n| n.get()).collect::<Vec<_>>()
            ),
            None => "no view".to_owned(),
        };
        let joins = match self.phase {
            Phase::Starting => match self.president_hint {
                Some(p) => format!("asks president {p} to join"),
                None => "refuses joins (Starting)".to_owned(),
            },
            Phase::Stopping => "refuses joins (Stopping)".to_owned(),
            Phase::Started if !self.is_president() => {
                let president = self.view.as_ref().map(|v| v.president);
                format!("refuses joins (NotPresident: ask {president:?})")
            }
            Phase::Started if !self.suspected.is_empty() || self.arbitration.is_some() => {
                "refuses joins (FailureHandling)".to_owned()
            }
            Phase::Started => "admits joins".to_owned(),
        };
        format!(
            "{:?}, {view}, suspects {:?}, connected {:?}{}{}, {joins}",
            self.phase,
            self.suspected(),
            self.connected.iter().collect::<Vec<_>>(),
            if self.arbitration.is_some() {
                ", awaiting the arbitrator"
            } else {
                ""
            },
            if self.takeover_waiting.is_some() {
                ", awaiting reports to take over"
            } else {
                ""
            },
        )
    }

    fn me(&self) -> NodeId {
        self.config.node
    }

    fn membership_ref(node: NodeId) -> BlockRef {
        BlockRef::new(node, BlockNumber::MEMBERSHIP, 0)
    }

    fn is_data_node(&self, node: NodeId) -> bool {
        self.config.data_nodes.contains(&node)
    }

    /// Whether this node has a connection to every other data node.
    fn connected_to_every_data_node(&self) -> bool {
        self.config
            .data_nodes
            .iter()
            .all(|n| *n == self.me() || self.connected.contains(*n))
    }

    fn is_member(&self, node: NodeId) -> bool {
        self.view.as_ref().is_some_and(|v| v.contains(node))
    }

    /// What the mgmd shows: a member that does not serve yet (a node
    /// restart still copying) is starting, so that an operator who waits
    /// for "started" before stopping its partner never stops the only
    /// node that holds the rows.
    fn node_state(&self) -> NodeState {
        match self.phase {
            Phase::Starting => NodeState::Starting,
            Phase::Started if !self.serving => NodeState::Starting,
            Phase::Started => NodeState::Started,
            Phase::Stopping => NodeState::Stopping,
        }
    }

    fn report_status(&self, ctx: &mut Context<'_>) {
        let Some(mgmd) = self.config.mgmd else {
            return;
        };
        let (view_id, president, members) = match &self.view {
            Some(v) => (v.view_id, Some(v.president), v.bitmask()),
            None => (0, None, NodeBitmask::new()),
        };
        ctx.send(
            BlockRef::new(mgmd, BlockNumber::MANAGEMENT, 0),
            SignalBody::MgmNodeStatusRep {
                state: self.node_state(),
                pid: self.config.pid,
                version: VERSION,
                view_id,
                president,
                members,
            },
        );
    }

    fn event(&self, ctx: &mut Context<'_>, kind: EventKind, severity: Severity, text: String) {
        crate::cluster_log::report(ctx, self.me(), self.config.mgmd, kind, severity, text);
    }

    // ---- joining ----

    fn on_join_timer(&mut self, ctx: &mut Context<'_>) {
        if self.phase != Phase::Starting {
            return;
        }
        let candidates: Vec<NodeId> = self
            .connected
            .iter()
            .filter(|n| self.is_data_node(*n))
            .collect();
        for node in candidates {
            ctx.send(
                Self::membership_ref(node),
                SignalBody::CmRegReq {
                    node: self.me(),
                    version: VERSION,
                    start_id: self.config.start_id,
                },
            );
        }
        self.maybe_form_cluster(ctx);
        ctx.set_timer(JOIN_RETRY_INTERVAL, TIMER_JOIN);
    }

    /// Forms a new cluster with this node as president when no member is
    /// reachable and this node has the lowest id among the starting ones.
    fn maybe_form_cluster(&mut self, ctx: &mut Context<'_>) {
        if self.president_hint.is_some() {
            return;
        }
        let now = ctx.now();
        let fresh_starting: Vec<NodeId> = self
            .starting_peers
            .iter()
            .filter(|(node, seen)| {
                self.connected.contains(**node) && now - **seen <= STARTING_PEER_FRESH
            })
            .map(|(node, _)| *node)
            .collect();
        if fresh_starting.iter().any(|n| *n < self.me()) {
            return;
        }
        let all_connected = self.connected_to_every_data_node();
        let all_heard = self
            .config
            .data_nodes
            .iter()
            .all(|n| *n == self.me() || fresh_starting.contains(n));
        // Every absent node said it will not come: no reason to wait.
        let rest_not_joining = self.config.data_nodes.iter().all(|n| {
            *n == self.me() || fresh_starting.contains(n) || self.not_joining.contains(*n)
        });
        let waited = now - self.started_at >= self.config.start_partial_timeout || rest_not_joining;
        let everyone = all_connected && all_heard;
        if !everyone {
            if !waited {
                return;
            }
            // A partial start is judged like the side of a split: the
            // absent nodes may be running a cluster of their own, so a
            // node cut off from the others never forms one beside theirs.
            let mut present = fresh_starting.clone();
            present.push(self.me());
            match viability(&self.node_groups, &self.config.data_nodes, &present) {
                Viability::LoseGroups | Viability::LoseNodes => return,
                Viability::WinGroups | Viability::WinNodes => {}
                Viability::Arbitrate => {
                    let side: NodeBitmask = present.iter().copied().collect();
                    // Without an arbitrator (see `ask_for_vote`) a tie starts.
                    let granted = self.config.mgmd.is_none()
                        || self
                            .start_grant
                            .is_some_and(|grant| side.iter().all(|n| grant.contains(n)));
                    if !granted {
                        self.ask_for_start_vote(side, ctx);
                        return;
                    }
                }
            }
        }
        let view = MembershipView {
            view_id: 1,
            president: self.me(),
            members: vec![self.me()],
        };
        self.member_start_ids
            .insert(self.me(), self.config.start_id);
        let text = if all_connected && all_heard {
            format!(
                "formed the cluster as president (all {} data nodes present)",
                self.config.data_nodes.len()
            )
        } else {
            format!(
                "formed the cluster as president after waiting {} ms (partial start: some data nodes absent)",
                self.config.start_partial_timeout.as_millis()
            )
        };
        self.install_view(view, ctx);
        self.event(ctx, EventKind::ClusterFormed, Severity::Info, text);
    }

    /// Asks the arbitrator whether the starting nodes `side`, exactly half
    /// of the configured ones, may form the cluster.
    fn ask_for_start_vote(&mut self, side: NodeBitmask, ctx: &mut Context<'_>) {
        let now = ctx.now();
        if self.arbitration.as_ref().is_some_and(|p| now < p.deadline)
            || now < self.start_arbitration_retry_at
        {
            return;
        }
        let Some(mgmd) = self.config.mgmd else {
            return;
        };
        self.arbitration = Some(PendingArbitration {
            view_id: 0,
            members: side,
            deadline: now + self.arbitration_timeout,
            reason: FailReason::Disconnected,
        });
        ctx.send(
            BlockRef::new(mgmd, BlockNumber::MANAGEMENT, 0),
            SignalBody::ArbitReq {
                view_id: 0,
                members: side,
            },
        );
        tracing::info!(node = %self.me(), "partial start of {side:?}, half of the data nodes: asking the arbitrator");
    }

    fn on_reg_req(
        &mut self,
        sender: NodeId,
        node: NodeId,
        version: u32,
        start_id: u64,
        ctx: &mut Context<'_>,
    ) {
        let reply_to = Self::membership_ref(sender);
        // It starts again (after an operator's fix): wait for it as for any.
        self.not_joining.remove(sender);
        if node != sender || !self.is_data_node(node) {
            refuse(ctx, reply_to, RegRefReason::NotConfigured, None);
            return;
        }
        if version / 10000 != VERSION / 10000 {
            refuse(ctx, reply_to, RegRefReason::Incompatible, None);
            return;
        }
        match self.phase {
            Phase::Starting => {
                refuse(ctx, reply_to, RegRefReason::Starting, None);
                return;
            }
            Phase::Stopping => {
                refuse(ctx, reply_to, RegRefReason::Stopping, None);
                return;
            }
            Phase::Started => {}
        }
        let view = self.view.clone().expect("a started node has a view");
        if view.president == node {
            // The president asks to join: it restarted before its failure
            // was noticed here (a president never asks; another member may
            // repeat a request the president already granted). Referring
            // the new incarnation to the old one's name left it asking
            // itself and this node referring everyone to it for ever (the
            // whole-cluster soak's seed 1796242536712478 with late
            // signals): the old incarnation is reported failed instead.
            self.suspect(&[node], FailReason::Disconnected, ctx);
            refuse(ctx, reply_to, RegRefReason::FailureHandling, None);
            return;
        }
        if view.president != self.me() {
            refuse(
                ctx,
                reply_to,
                RegRefReason::NotPresident,
                Some(view.president),
            );
            return;
        }
        if self.suspected.contains(node) || self.arbitration.is_some() {
            // No joins while failures are handled or the arbitrator decides.
            refuse(ctx, reply_to, RegRefReason::FailureHandling, None);
            return;
        }
        if view.contains(node) {
            if self.member_start_ids.get(&node) == Some(&start_id) {
                // A repeated request from the incarnation already admitted.
                ctx.send(reply_to, SignalBody::CmRegConf { view });
            } else {
                // The node restarted before its failure was noticed: the old
                // incarnation must leave the view before the new one joins.
                self.handle_failures(&[node], FailReason::Disconnected, ctx);
                refuse(ctx, reply_to, RegRefReason::FailureHandling, None);
            }
            return;
        }
        let mut next = view.clone();
        next.view_id = self.next_view_id(&view);
        next.members.push(node);
        self.member_start_ids.insert(node, start_id);
        self.last_heard.insert(node, ctx.now());
        self.broadcast_view(&next, ctx);
        ctx.send(reply_to, SignalBody::CmRegConf { view: next.clone() });
        self.install_view(next, ctx);
        self.event(
            ctx,
            EventKind::NodeAdmitted,
            Severity::Info,
            format!("admitted node {node} to the cluster"),
        );
    }

    fn on_reg_conf(&mut self, view: MembershipView, ctx: &mut Context<'_>) {
        if self.phase != Phase::Starting || !view.contains(self.me()) {
            return;
        }
        let president = view.president;
        self.install_view(view, ctx);
        self.event(
            ctx,
            EventKind::Joined,
            Severity::Info,
            format!("joined the cluster; president is node {president}"),
        );
    }

    fn on_reg_ref(
        &mut self,
        sender: NodeId,
        reason: RegRefReason,
        president: Option<NodeId>,
        ctx: &mut Context<'_>,
    ) {
        if self.phase != Phase::Starting {
            return;
        }
        if reason != RegRefReason::Stopping {
            self.not_joining.remove(sender);
        }
        match reason {
            RegRefReason::Starting => {
                self.starting_peers.insert(sender, ctx.now());
            }
            RegRefReason::NotPresident => {
                self.starting_peers.remove(&sender);
                self.president_hint = president;
            }
            RegRefReason::FailureHandling => {
                self.starting_peers.remove(&sender);
                self.president_hint = Some(sender);
            }
            RegRefReason::Incompatible | RegRefReason::NotConfigured => {
                self.phase = Phase::Stopping;
                ctx.shutdown(
                    false,
                    format!("node {sender} refused this node: {reason:?}"),
                );
            }
            RegRefReason::Stopping => {
                self.starting_peers.remove(&sender);
            }
        }
    }

    // ---- views ----

    fn broadcast_view(&self, view: &MembershipView, ctx: &mut Context<'_>) {
        for member in view.members.iter().filter(|m| **m != self.me()) {
            ctx.send(
                Self::membership_ref(*member),
                SignalBody::CmViewChange { view: view.clone() },
            );
        }
    }

    /// Makes `view` this node's membership. Nodes that left are disconnected so
    /// that a live one notices and restarts.
    fn install_view(&mut self, view: MembershipView, ctx: &mut Context<'_>) {
        assert!(
            view.contains(view.president),
            "president {} outside its view",
            view.president
        );
        assert!(
            view.contains(self.me()),
            "installing a view without this node"
        );
        if let Some(old) = &self.view {
            assert!(
                view.supersedes(old),
                "view {view:?} does not supersede {old:?}"
            );
            for gone in old.members.iter().filter(|m| !view.contains(**m)) {
                ctx.disconnect(*gone);
                self.last_heard.remove(gone);
                self.member_start_ids.remove(gone);
            }
        }
        let now = ctx.now();
        for member in &view.members {
            self.suspected.remove(*member);
            // A member that has not been heard from yet gets a full grace period.
            self.last_heard.entry(*member).or_insert(now);
        }
        self.suspected = NodeBitmask::new();
        self.other_view_heard = false;
        self.reports.clear();
        self.takeover_waiting = None;
        // A question to the arbitrator was about the view this one replaces.
        self.arbitration = None;
        self.start_grant = None;
        let was_starting = self.phase == Phase::Starting;
        self.phase = Phase::Started;
        self.president_hint = None;
        self.starting_peers.clear();
        // The dictionary's master and the global checkpoint master are the
        // president: both follow every view.
        for block in [BlockNumber::DICTIONARY, BlockNumber::DISTRIBUTION] {
            ctx.send(
                BlockRef::new(self.me(), block, 0),
                SignalBody::MembershipViewRep { view: view.clone() },
            );
        }
        if self.view_history.last().map(|(id, _)| *id) != Some(view.view_id) {
            self.view_history.push((view.view_id, view.members.clone()));
            if self.view_history.len() > VIEW_HISTORY_MAX {
                self.view_history.remove(0);
            }
        }
        self.view = Some(view);
        if was_starting {
            ctx.set_timer(self.config.heartbeat_interval, TIMER_HEARTBEAT);
        }
        // The API nodes hear at once that this node is started, as they
        // hear at once when it stops: waiting for their next heartbeat
        // (up to HeartbeatIntervalDbApi) left a rolling restart that stops
        // the other node right after this one caught up with no started
        // node in the clients' eyes for that long (error 711). And they
        // hear every new view: a member that hung says nothing, and an API
        // node that learns only from its own heartbeats sends transactions
        // to it for 4 of them (6 s by default) after the cluster gave up.
        self.tell_api_nodes(ctx);
        self.report_status(ctx);
    }

    /// Sends every registered API node this node's `ApiRegConf` now.
    fn tell_api_nodes(&self, ctx: &mut Context<'_>) {
        let conf = self.api_reg_conf();
        for &api in self.api_nodes.keys() {
            ctx.send(
                BlockRef::new(api, BlockNumber::API_CLUSTER, 0),
                conf.clone(),
            );
        }
    }

    fn on_view_change(&mut self, sender: NodeId, view: MembershipView, ctx: &mut Context<'_>) {
        if self.phase == Phase::Stopping || !view.contains(sender) {
            return;
        }
        if self.phase == Phase::Starting {
            // Only a view that admits this node (CmRegConf) ends the start.
            // Either way a cluster runs: join it, never form one beside it
            // (an answer to a partial-start question may still come; a node
            // admitted by the president meanwhile would otherwise start alone
            // while the president counts it as a member).
            self.president_hint = Some(view.president);
            return;
        }
        let current = self.view.as_ref().expect("started");
        if !view.supersedes(current) {
            return;
        }
        let removed_here = !current.contains(sender)
            && self
                .view_history
                .iter()
                .any(|(_, members)| members.contains(&sender));
        if removed_here && view.contains(self.me()) {
            // A view that keeps this node, made by a node a view installed
            // here removed (declared failed): that node comes back only
            // restarted, through the president's admission. A paused
            // president that resumes may still send a view it made from
            // its old one before it learns it was removed; following it
            // would leave this node behind a president that is gone while
            // the rest goes on without it (the whole-cluster simulator's
            // seed 529 with late signals: two views at once). A view that
            // excludes this node is still taken (below): after a split of
            // two equal sides it is how the side that loses the tie stops.
            return;
        }
        if !view.contains(self.me()) {
            self.excluded(view.president, ctx);
            return;
        }
        let old_president = current.president;
        let removed: Vec<NodeId> = current
            .members
            .iter()
            .copied()
            .filter(|m| !view.contains(*m))
            .collect();
        // Members this node suspects and still has no connection to, that
        // the new view keeps: its president made it before it heard of the
        // broken link. Installing a view forgets every suspicion, but the
        // signals sent on that link are lost, and blocks rely on a member
        // never losing a signal to another (a TC's `LdmAbortReq` to a
        // participant was lost and its transaction never ended: the
        // whole-cluster soak's seed 1795877217615743). They are suspected
        // again below, so that the president removes one end of the link.
        let unreachable: Vec<NodeId> = view
            .members
            .iter()
            .copied()
            .filter(|m| {
                *m != self.me() && self.suspected.contains(*m) && !self.connected.contains(*m)
            })
            .collect();
        let president = view.president;
        self.install_view(view, ctx);
        self.suspect(&unreachable, FailReason::Disconnected, ctx);
        if president != old_president {
            tracing::info!(node = %self.me(), "node {president} is now president");
        }
        for node in removed {
            tracing::info!(node = %self.me(), "node {node} left the cluster");
        }
    }

    /// The id of the next view this node makes: above its own and above
    /// every view a member said it holds. A successor that takes over
    /// numbers its view from its own last one; when the president it
    /// replaces made a view it never received (the link between them was
    /// down) and some members installed that one, both views have one id.
    /// Those members then refuse the successor's view as not newer, and
    /// never see the nodes it removed leave: a removed node that restarts
    /// and is admitted again is, to them, the same member all along, and
    /// their TCs wait for ever on its old incarnation's answers (the
    /// whole-cluster soak's seed 1795900126686330: a TC's commit to the
    /// old node 2 never ended, global checkpoints stopped, and node 2's
    /// node restart never copied).
    fn next_view_id(&self, view: &MembershipView) -> u32 {
        view.view_id.max(self.newest_heard_view) + 1
    }

    /// A member of this node's view holds view `view_id`; `other`: it is
    /// known not to be this node's view. A president that hears of a
    /// view it did not make (an id above its own, or `other`) sends its
    /// own view again, numbered above it, so that every member installs
    /// it and sees who left.
    fn heard_view(&mut self, view_id: u32, other: bool, ctx: &mut Context<'_>) {
        self.newest_heard_view = self.newest_heard_view.max(view_id);
        self.other_view_heard |= other;
        let Some(view) = self.view.clone() else {
            return;
        };
        if self.phase != Phase::Started
            || view.president != self.me()
            || !(view_id > view.view_id || self.other_view_heard)
            || self.arbitration.is_some()
            || view.members.iter().any(|m| self.suspected.contains(*m))
        {
            // Failures being handled: the view that settles them is
            // numbered above `view_id` too.
            return;
        }
        let next = MembershipView {
            view_id: self.next_view_id(&view),
            ..view
        };
        tracing::info!(
            node = %self.me(),
            "a member holds view {view_id} that this president did not make: sending view {}",
            next.view_id
        );
        self.broadcast_view(&next, ctx);
        self.install_view(next, ctx);
    }

    fn excluded(&mut self, by: NodeId, ctx: &mut Context<'_>) {
        self.phase = Phase::Stopping;
        self.event(
            ctx,
            EventKind::Excluded,
            Severity::Alert,
            format!("excluded from the cluster by president {by}; restarting to rejoin"),
        );
        ctx.shutdown(true, format!("excluded from the cluster by president {by}"));
    }

    // ---- heartbeats and failure detection ----

    fn on_heartbeat_timer(&mut self, ctx: &mut Context<'_>) {
        if self.phase != Phase::Started {
            return;
        }
        let view = self.view.clone().expect("started");
        let now = ctx.now();
        let interval = self.config.heartbeat_interval;
        let last_check = self.last_heartbeat_check.replace(now);
        if let Some(stall) = Self::stall(last_check, interval, now) {
            Self::discount_stall(self.last_heard.values_mut(), stall, now);
            self.stall_event(ctx, "data node heartbeat check", stall);
        }
        let limit = interval * HEARTBEAT_MISSES_MAX;
        let mut missed = Vec::new();
        for member in view.members.iter().copied().filter(|m| *m != self.me()) {
            ctx.send(
                Self::membership_ref(member),
                SignalBody::Heartbeat {
                    view_id: view.view_id,
                },
            );
            let heard = self.last_heard.get(&member).copied().unwrap_or(now);
            if now - heard > limit && !self.suspected.contains(member) {
                missed.push(member);
            }
        }
        // All at once: a node cut off from everyone must see that it lost
        // them all, not shrink the view one member at a time.
        let reported = !missed.is_empty();
        self.suspect(&missed, FailReason::HeartbeatMissed, ctx);
        if !reported && self.phase == Phase::Started {
            // Again each round until a view settles them: a report sent while
            // the link to the acting president was down was dropped, and a
            // successor waiting for it (`takeover_agreed`) would wait forever
            // (the whole-cluster soak's seed 1795877217615743: the president
            // and two links failed at once).
            self.report_suspicions(&view, FailReason::Disconnected, ctx);
        }
        if let Some(reason) = self.takeover_waiting {
            // Members that fell silent no longer need to agree.
            if self.phase == Phase::Started && self.acting_president(&view) == self.me() {
                self.handle_failures(&[], reason, ctx);
            }
        }
        ctx.set_timer(self.config.heartbeat_interval, TIMER_HEARTBEAT);
    }

    /// How long this node itself was stalled before a periodic check that
    /// was due `interval` after the `last` one: none unless it ran more than
    /// one whole interval late.
    fn stall(last: Option<Instant>, interval: Duration, now: Instant) -> Option<Duration> {
        let late = (now - last?).saturating_sub(interval);
        (late > interval).then_some(late)
    }

    /// A check that runs late means this node's thread did not run (a long
    /// synchronous fsync, the machine overloaded, the process stopped): its
    /// timers fire before the signals that queued up meanwhile, heartbeats
    /// among them, are executed. Silence it could not have heard through
    /// says nothing about the peers, so the stall is not counted against
    /// them. Otherwise a node that stalls for a few intervals, on coming
    /// back, declares every peer failed at once while they declare it
    /// failed: both sides of a "network partition" where none happened
    /// (seen in CI: two data nodes after a burst of dropped tables). A peer
    /// that really went silent is still declared failed, one full limit
    /// of silence later, counted over the time this node was listening.
    fn discount_stall<'a>(
        heard: impl Iterator<Item = &'a mut Instant>,
        stall: Duration,
        now: Instant,
    ) {
        for heard in heard {
            *heard = (*heard + stall).min(now);
        }
    }

    fn stall_event(&self, ctx: &mut Context<'_>, check: &str, stall: Duration) {
        self.event(
            ctx,
            EventKind::Stall,
            Severity::Warning,
            format!(
                "the {check} ran {} ms late: this node's thread was stalled; \
                 silence from peers during the stall is not counted",
                stall.as_millis()
            ),
        );
    }

    fn on_heartbeat(&mut self, sender: NodeId, view_id: u32, ctx: &mut Context<'_>) {
        let Some(view) = self.view.clone() else {
            return;
        };
        if self.phase != Phase::Started {
            return;
        }
        if !view.contains(sender) {
            if view_id <= view.view_id || view.president == self.me() {
                // A node left behind by a newer view (it hung, or missed the
                // change): tell it, so that it restarts and rejoins.
                ctx.send(
                    Self::membership_ref(sender),
                    SignalBody::CmViewChange { view },
                );
            }
            return;
        }
        if view_id == view.view_id {
            self.confirmed_view.insert(sender, view_id);
        }
        self.heard_view(view_id, false, ctx);
        if view_id < view.view_id && view.president == self.me() {
            // The member missed a view change: send it again.
            ctx.send(
                Self::membership_ref(sender),
                SignalBody::CmViewChange { view },
            );
        }
    }

    /// This node believes `nodes` failed: tell whoever decides.
    fn suspect(&mut self, nodes: &[NodeId], reason: FailReason, ctx: &mut Context<'_>) {
        let Some(view) = self.view.clone() else {
            return;
        };
        let new: Vec<NodeId> = nodes
            .iter()
            .copied()
            .filter(|n| view.contains(*n) && *n != self.me() && !self.suspected.contains(*n))
            .collect();
        if new.is_empty() {
            return;
        }
        for node in &new {
            self.suspected.insert(*node);
            tracing::warn!(node = %self.me(), "suspect node {node} failed: {reason:?}");
        }
        let decider = self.acting_president(&view);
        if decider == self.me() {
            self.handle_failures(&new, reason, ctx);
        } else {
            self.report_suspicions(&view, reason, ctx);
        }
    }

    /// Reports every member this node suspects to the acting president, if
    /// that is another node. Every suspicion, not only the new ones: a
    /// decider that became one because its elders are suspected too takes
    /// over only once every member it reaches reported them
    /// (`takeover_agreed`).
    fn report_suspicions(&self, view: &MembershipView, reason: FailReason, ctx: &mut Context<'_>) {
        let decider = self.acting_president(view);
        if decider == self.me() {
            return;
        }
        let suspected = view
            .members
            .iter()
            .copied()
            .filter(|m| self.suspected.contains(*m));
        for node in suspected {
            ctx.send(
                Self::membership_ref(decider),
                SignalBody::FailRep {
                    failed: node,
                    reason,
                    view_id: view.view_id,
                },
            );
        }
    }

    /// Whether this node, not the president but the oldest member it does
    /// not suspect, may take over: every member it can reach reported each
    /// member older than this node failed (or that member announced it
    /// leaves). Without that rule one broken link between the president
    /// and another member made two presidents: the president removed the
    /// far end while the far end (or its successor, on its report) removed
    /// the president, and the members in between took views and global
    /// checkpoint orders from both (seeds 1408 and 1795314160926724 of the
    /// whole-cluster simulator). With it the president, which still reaches
    /// the others, decides alone: a broken link costs one node. NDB's
    /// president likewise settles a failure the others do not see.
    fn takeover_agreed(&self, view: &MembershipView, now: Instant) -> bool {
        let side = self.reachable(view, now);
        view.members
            .iter()
            .take_while(|m| **m != self.me())
            .filter(|elder| !self.left_on_purpose.contains(&(**elder, view.view_id)))
            .all(|elder| {
                let reporters = self.reports.get(elder).copied().unwrap_or_default();
                side.iter()
                    .all(|n| *n == self.me() || reporters.contains(*n))
            })
    }

    /// The oldest member not suspected: the president if it lives.
    fn acting_president(&self, view: &MembershipView) -> NodeId {
        view.members
            .iter()
            .copied()
            .find(|m| !self.suspected.contains(*m))
            .unwrap_or(self.me())
    }

    fn on_fail_rep(
        &mut self,
        sender: NodeId,
        failed: NodeId,
        reason: FailReason,
        view_id: u32,
        ctx: &mut Context<'_>,
    ) {
        let Some(view) = self.view.clone() else {
            return;
        };
        if self.phase != Phase::Started || !view.contains(sender) {
            return;
        }
        // A reporter's view of this view's id with `failed` in it, where
        // this view lacks it, is another president's view of the same id.
        let other = view_id == view.view_id && !view.contains(failed);
        self.heard_view(view_id, other, ctx);
        // The view this node sent again, if it did.
        let view = self.view.clone().expect("a started node has a view");
        if !view.contains(failed) || failed == self.me() {
            return;
        }
        if reason == FailReason::GcpStop {
            // The GCP master — the distribution block of the president's
            // own node — excludes a node that stalls global checkpoints.
            // It is no broken link between two members: no end to pick.
            if sender == self.me() && self.acting_president(&view) == self.me() {
                self.suspected.insert(failed);
                self.handle_failures(&[failed], reason, ctx);
            }
            return;
        }
        self.reports.entry(failed).or_default().insert(sender);
        let elder = view.members.iter().position(|m| *m == failed)
            < view.members.iter().position(|m| *m == self.me());
        if elder && failed != sender && !self.suspected.contains(failed) {
            // A member older than this node (the president, or whoever acts
            // for it) lives as far as this node can tell: the reporter lost
            // only its link to it, and the elder removes the reporter. The
            // report counts should this node lose the elder too.
            return;
        }
        let notice = failed == sender;
        let mut failed = failed;
        if !notice && !self.suspected.contains(failed) {
            if self.suspected.contains(sender) {
                // The reporter is being removed itself (it repeats its
                // reports until a view removes it): its broken link ends
                // with it, and taking its word too would remove both ends.
                return;
            }
            if self.acting_president(&view) == self.me() {
                // A link between two younger members broke: pick the end.
                failed = self.end_to_remove(&view, sender, failed, ctx.now());
            }
        }
        // A report on a younger member, or a node's own notice that it
        // leaves, counts as our own suspicion: a notice may make this node
        // the acting president (when `failed` is the president).
        self.suspected.insert(failed);
        if notice {
            self.left_on_purpose.retain(|&(_, v)| v == view.view_id);
            self.left_on_purpose.push((failed, view.view_id));
        }
        if self.acting_president(&view) == self.me() {
            let reason = if notice { FailReason::Stopped } else { reason };
            self.handle_failures(&[failed], reason, ctx);
        }
    }

    /// Which end of the broken link between `reporter` and `reported`
    /// (both younger members) this node, deciding, removes: `reported`,
    /// unless the side without it may not go on and the side without
    /// `reporter` may. Either end settles the link, but removing the wrong
    /// one can cost the whole cluster: in the whole-cluster seed
    /// 1795870277594936 (4×2, view [2, 3, 5, 4], links 3-5 and 4-2 broken
    /// at once) president 2 removed node 4, then took node 3's report on
    /// node 5 and shut down for lack of group [4, 5], where removing node 3
    /// left [2, 5], a tie the arbitrator could grant.
    fn end_to_remove(
        &self,
        view: &MembershipView,
        reporter: NodeId,
        reported: NodeId,
        now: Instant,
    ) -> NodeId {
        let position = |n: NodeId| view.members.iter().position(|m| *m == n);
        debug_assert!(
            position(reporter) > position(self.me()) && position(reported) > position(self.me()),
            "both ends of the link are younger than the deciding node"
        );
        let verdict_without = |gone: NodeId| {
            let side: Vec<NodeId> = self
                .reachable(view, now)
                .into_iter()
                .filter(|n| *n != gone)
                .collect();
            let before: Vec<NodeId> = self
                .judge_base(view)
                .into_iter()
                .filter(|m| !self.left_on_purpose.contains(&(*m, view.view_id)))
                .collect();
            viability(&self.node_groups, &before, &side)
        };
        let loses = |v: Viability| matches!(v, Viability::LoseGroups | Viability::LoseNodes);
        if loses(verdict_without(reported)) && !loses(verdict_without(reporter)) {
            tracing::info!(
                node = %self.me(),
                "node {reporter} lost its link to node {reported}: removing node {reporter}, \
                 as this side could not go on without node {reported}"
            );
            return reporter;
        }
        reported
    }

    /// As (acting) president: remove `failed` and every suspected member in
    /// one new view, if the side this node can reach may go on.
    fn handle_failures(&mut self, failed: &[NodeId], reason: FailReason, ctx: &mut Context<'_>) {
        let view = self.view.clone().expect("started");
        for node in failed {
            self.suspected.insert(*node);
        }
        if !view.members.iter().any(|m| self.suspected.contains(*m)) {
            return;
        }
        if view.president != self.me() && !self.takeover_agreed(&view, ctx.now()) {
            // Each heartbeat round and each report asks again.
            if self.takeover_waiting.is_none() {
                let president = view.president;
                tracing::info!(node = %self.me(), "president {president} suspected: waiting for the others' reports");
            }
            self.takeover_waiting.get_or_insert(reason);
            return;
        }
        let reason = self.takeover_waiting.take().unwrap_or(reason);
        let side = self.reachable(&view, ctx.now());
        // A member that left on purpose exits: it is no other side.
        let before: Vec<NodeId> = self
            .judge_base(&view)
            .into_iter()
            .filter(|m| !self.left_on_purpose.contains(&(*m, view.view_id)))
            .collect();
        let verdict = viability(&self.node_groups, &before, &side);
        match verdict {
            Viability::LoseGroups | Viability::LoseNodes => self.lose(verdict, &side, &view, ctx),
            Viability::WinGroups | Viability::WinNodes => {
                self.arbitration = None;
                self.remove_failed(&view, reason, ctx);
            }
            Viability::Arbitrate => self.ask_for_vote(&view, &side, reason, ctx),
        }
    }

    /// The nodes a failure is judged against: the members of the current
    /// view and of every view since the newest one that every current
    /// member confirmed (heartbeat with its id). A view this node made is
    /// not agreed until its members have it: when a link breaks, the other
    /// end's side may have removed *this* node at the same moment, judged
    /// against the older view; judging our next loss against our newer,
    /// smaller view could then let both sides go on (NDB judges against the
    /// nodes of the last completed failure round for the same reason). A
    /// larger base only makes going on harder, never easier.
    fn judge_base(&self, view: &MembershipView) -> Vec<NodeId> {
        let confirmed = view
            .members
            .iter()
            .filter(|m| **m != self.me())
            .map(|m| self.confirmed_view.get(m).copied().unwrap_or(0))
            .min()
            .unwrap_or(view.view_id);
        let from = self
            .view_history
            .iter()
            .rposition(|(id, _)| *id <= confirmed)
            .unwrap_or(0);
        let mut base = view.members.clone();
        for (_, members) in &self.view_history[from..] {
            for m in members {
                if !base.contains(m) {
                    base.push(*m);
                }
            }
        }
        base
    }

    /// The members this node can reach: itself, and those not suspected and
    /// heard from within two heartbeat intervals. Silent members are not
    /// counted, though not excluded for it: a node cut off from the rest
    /// finds itself alone here, whatever order the failures were noticed in.
    fn reachable(&self, view: &MembershipView, now: Instant) -> Vec<NodeId> {
        let recent = self.config.heartbeat_interval * 2;
        view.members
            .iter()
            .copied()
            .filter(|m| {
                *m == self.me()
                    || (!self.suspected.contains(*m)
                        && self
                            .last_heard
                            .get(m)
                            .is_some_and(|heard| now - *heard <= recent))
            })
            .collect()
    }

    /// This side may not go on: shut down (the angel restarts the node, and it
    /// rejoins when the network lets it).
    fn lose(
        &mut self,
        verdict: Viability,
        side: &[NodeId],
        view: &MembershipView,
        ctx: &mut Context<'_>,
    ) {
        self.phase = Phase::Stopping;
        let side: Vec<u8> = side.iter().map(|n| n.get()).collect();
        let text = match verdict {
            Viability::LoseNodes => format!(
                "lost contact with the majority of the cluster ({} of {} members reachable: {side:?}); \
                 shutting down rather than risk a split cluster",
                side.len(),
                view.members.len()
            ),
            _ => format!(
                "cannot go on: {} (reachable members {side:?} of view {}); shutting down",
                verdict.describe(),
                view.view_id
            ),
        };
        self.event(
            ctx,
            EventKind::ArbitrationResult,
            Severity::Alert,
            text.clone(),
        );
        ctx.shutdown(true, text);
    }

    /// A tie: ask the arbitrator whether `side` goes on. The view waits for
    /// the answer; more failures meanwhile ask again for the smaller side.
    /// Without a management server configured, the side goes on.
    fn ask_for_vote(
        &mut self,
        view: &MembershipView,
        side: &[NodeId],
        reason: FailReason,
        ctx: &mut Context<'_>,
    ) {
        let members: NodeBitmask = side.iter().copied().collect();
        let Some(mgmd) = self.config.mgmd else {
            // No arbitrator (NDB's Arbitration=Disabled; blocks tested
            // without a management server): a tie goes on.
            self.remove_failed(view, reason, ctx);
            return;
        };
        match &mut self.arbitration {
            Some(pending) if pending.view_id == view.view_id => {
                if pending.members == members {
                    return;
                }
                // The deadline stays: the whole wait is bounded by one timeout.
                pending.members = members;
            }
            _ => {
                self.arbitration = Some(PendingArbitration {
                    view_id: view.view_id,
                    members,
                    deadline: ctx.now() + self.arbitration_timeout,
                    reason,
                });
                ctx.set_timer(self.arbitration_timeout, TIMER_ARBITRATION);
                let side: Vec<u8> = side.iter().map(|n| n.get()).collect();
                let text = format!(
                    "network partitioning: {} of {} members reachable ({side:?}) and no node group decides; \
                     asking the arbitrator (node {mgmd}) whether this side goes on",
                    side.len(),
                    view.members.len()
                );
                self.event(ctx, EventKind::ArbitrationRequired, Severity::Warning, text);
            }
        }
        ctx.send(
            BlockRef::new(mgmd, BlockNumber::MANAGEMENT, 0),
            SignalBody::ArbitReq {
                view_id: view.view_id,
                members,
            },
        );
    }

    fn on_arbit_conf(&mut self, sender: NodeId, view_id: u32, ctx: &mut Context<'_>) {
        let Some(pending) = self.take_answered(sender, view_id) else {
            return;
        };
        match self.phase {
            Phase::Starting => {
                self.start_grant = Some(pending.members);
                self.maybe_form_cluster(ctx);
            }
            Phase::Started => {
                let view = self.view.clone().expect("started");
                // Only the side the vote was given to goes on: members
                // outside it are removed with the failed ones.
                for member in &view.members {
                    if !pending.members.contains(*member) {
                        self.suspected.insert(*member);
                    }
                }
                let side = self.reachable(&view, ctx.now());
                // More members may have failed while we waited: the vote
                // settles the tie, not whether the data is still all here.
                let verdict = viability(&self.node_groups, &view.members, &side);
                if verdict == Viability::LoseGroups {
                    self.lose(verdict, &side, &view, ctx);
                    return;
                }
                let members: Vec<u8> = pending.members.iter().map(|n| n.get()).collect();
                self.event(
                    ctx,
                    EventKind::ArbitrationResult,
                    Severity::Alert,
                    format!("won arbitration: this side {members:?} goes on"),
                );
                self.remove_failed(&view, pending.reason, ctx);
            }
            Phase::Stopping => {}
        }
    }

    fn on_arbit_ref(
        &mut self,
        sender: NodeId,
        view_id: u32,
        message: String,
        ctx: &mut Context<'_>,
    ) {
        let Some(pending) = self.take_answered(sender, view_id) else {
            return;
        };
        match self.phase {
            Phase::Starting => {
                self.start_arbitration_retry_at = ctx.now() + START_ARBITRATION_RETRY_INTERVAL;
                tracing::warn!(node = %self.me(), "partial start of {:?} refused by the arbitrator: {message}", pending.members);
            }
            Phase::Started => {
                self.phase = Phase::Stopping;
                let text =
                    format!("lost arbitration: {message}; shutting down, the other side goes on");
                self.event(
                    ctx,
                    EventKind::ArbitrationResult,
                    Severity::Alert,
                    text.clone(),
                );
                ctx.shutdown(true, text);
            }
            Phase::Stopping => {}
        }
    }

    /// The pending question an answer from `sender` about `view_id` settles.
    fn take_answered(&mut self, sender: NodeId, view_id: u32) -> Option<PendingArbitration> {
        if self.config.mgmd != Some(sender) {
            tracing::warn!(node = %self.me(), "arbitration answer from node {sender}, which is not the arbitrator");
            return None;
        }
        let pending = self.arbitration.as_ref()?;
        let current = self.view.as_ref().map_or(0, |v| v.view_id);
        if pending.view_id != view_id || current != view_id {
            return None;
        }
        self.arbitration.take()
    }

    fn on_arbitration_timer(&mut self, ctx: &mut Context<'_>) {
        let Some(pending) = &self.arbitration else {
            return;
        };
        // Timers cannot be cancelled: one of an earlier question fires early.
        if ctx.now() < pending.deadline {
            return;
        }
        match self.phase {
            Phase::Starting => {
                // The next join round asks again.
                self.arbitration = None;
            }
            Phase::Started => {
                self.phase = Phase::Stopping;
                let arbitrator = self
                    .config
                    .mgmd
                    .map_or("none".to_owned(), |n| n.to_string());
                let text = format!(
                    "no answer from the arbitrator (node {arbitrator}) within ArbitrationTimeout ({} ms); \
                     shutting down rather than risk a split cluster",
                    self.arbitration_timeout.as_millis()
                );
                self.event(
                    ctx,
                    EventKind::ArbitrationResult,
                    Severity::Alert,
                    text.clone(),
                );
                ctx.shutdown(true, text);
            }
            Phase::Stopping => {}
        }
    }

    /// Makes and sends the view without the suspected members.
    fn remove_failed(&mut self, view: &MembershipView, reason: FailReason, ctx: &mut Context<'_>) {
        let gone: Vec<NodeId> = view
            .members
            .iter()
            .copied()
            .filter(|m| self.suspected.contains(*m))
            .collect();
        let next = MembershipView {
            view_id: self.next_view_id(view),
            president: self.me(),
            members: view
                .members
                .iter()
                .copied()
                .filter(|m| !self.suspected.contains(*m))
                .collect(),
        };
        self.broadcast_view(&next, ctx);
        // A live but excluded node learns it from this view and restarts.
        for node in &gone {
            ctx.send(
                Self::membership_ref(*node),
                SignalBody::CmViewChange { view: next.clone() },
            );
        }
        let took_over = view.president != self.me();
        let members: Vec<u8> = next.members.iter().map(|n| n.get()).collect();
        self.install_view(next, ctx);
        for node in gone {
            if reason == FailReason::Stopped {
                let text =
                    format!("node {node} left the cluster (stopped); members now {members:?}");
                self.event(ctx, EventKind::NodeFailed, Severity::Info, text);
            } else {
                let text =
                    format!("node {node} declared failed ({reason:?}); members now {members:?}");
                self.event(ctx, EventKind::NodeFailed, Severity::Alert, text);
            }
        }
        if took_over {
            let severity = if reason == FailReason::Stopped {
                Severity::Info
            } else {
                Severity::Warning
            };
            self.event(
                ctx,
                EventKind::PresidentTakeover,
                severity,
                format!("took over as president from node {}", view.president),
            );
        }
    }

    fn on_connected(&mut self, node: NodeId, ctx: &mut Context<'_>) {
        if !self.is_data_node(node) {
            return;
        }
        self.connected.insert(node);
        self.last_heard.insert(node, ctx.now());
        if let Some(failed) = &mut self.start_failed {
            // The notice goes out before the connection closes: the stop
            // waits `STOP_NOTICE` from the last one sent.
            failed.last_notice = ctx.now();
            let reason = failed.reason.clone();
            ctx.send(
                Self::membership_ref(node),
                SignalBody::CmNotJoiningRep { reason },
            );
        }
        if let (Phase::Started, Some(view)) = (self.phase, &self.view) {
            // If the peer is a started node of another view, the heartbeat
            // makes one side learn of the other's view (see `on_heartbeat`).
            ctx.send(
                Self::membership_ref(node),
                SignalBody::Heartbeat {
                    view_id: view.view_id,
                },
            );
        }
    }

    fn on_disconnected(&mut self, node: NodeId, ctx: &mut Context<'_>) {
        if self.api_nodes.remove(&node).is_some() {
            self.event(
                ctx,
                EventKind::ApiDisconnected,
                Severity::Info,
                format!("API node {node} disconnected"),
            );
            self.api_failed(node, ctx);
            return;
        }
        if !self.is_data_node(node) {
            if self.config.mgmd != Some(node) {
                // It may have started transactions without registering.
                self.api_failed(node, ctx);
            }
            return;
        }
        self.connected.remove(node);
        self.starting_peers.remove(&node);
        if self.president_hint == Some(node) {
            self.president_hint = None;
        }
        if self.phase == Phase::Started && self.is_member(node) {
            self.suspect(&[node], FailReason::Disconnected, ctx);
        }
    }

    // ---- API nodes ----

    fn on_api_reg_req(&mut self, sender: NodeId, version: u32, ctx: &mut Context<'_>) {
        let reply_to = BlockRef::new(sender, BlockNumber::API_CLUSTER, 0);
        if self.is_data_node(sender) {
            ctx.send(
                reply_to,
                SignalBody::ApiRegRef {
                    reason: RegRefReason::NotConfigured,
                },
            );
            return;
        }
        if version / 10000 != VERSION / 10000 {
            ctx.send(
                reply_to,
                SignalBody::ApiRegRef {
                    reason: RegRefReason::Incompatible,
                },
            );
            return;
        }
        if self.api_nodes.insert(sender, ctx.now()).is_none() {
            self.event(
                ctx,
                EventKind::ApiConnected,
                Severity::Info,
                format!("API node {sender} registered"),
            );
        }
        let conf = self.api_reg_conf();
        ctx.send(reply_to, conf);
    }

    /// What an API node is told of this node (`ApiRegConf`).
    fn api_reg_conf(&self) -> SignalBody {
        let (view_id, members) = match &self.view {
            Some(v) => (v.view_id, v.bitmask()),
            None => (0, NodeBitmask::new()),
        };
        SignalBody::ApiRegConf {
            version: VERSION,
            // A stopping node takes no new transactions (`tc::shutdown`):
            // clients send them elsewhere. Nor does a node that joined and
            // does not serve yet (NDB's API uses started nodes only): its
            // dictionary may not have the cluster's tables until its
            // restart has synced them (a TC answered "no table with id …"
            // in that window).
            started: self.phase == Phase::Started && self.serving && self.stop.is_none(),
            view_id,
            members,
            heartbeat_interval_ms: self.config.api_heartbeat_interval.as_millis() as u32,
        }
    }

    fn api_failed(&self, node: NodeId, ctx: &mut Context<'_>) {
        for &tc in &self.local_tcs {
            ctx.send(tc, SignalBody::ApiFailRep { node });
        }
        if let Some(subscription) = self.subscription {
            ctx.send(subscription, SignalBody::ApiFailRep { node });
        }
    }

    fn on_api_check_timer(&mut self, ctx: &mut Context<'_>) {
        let now = ctx.now();
        let interval = self.config.api_heartbeat_interval;
        let last_check = self.last_api_check.replace(now);
        if let Some(stall) = Self::stall(last_check, interval, now) {
            Self::discount_stall(self.api_nodes.values_mut(), stall, now);
            self.stall_event(ctx, "API node heartbeat check", stall);
        }
        let limit = interval * HEARTBEAT_MISSES_MAX;
        let silent: Vec<NodeId> = self
            .api_nodes
            .iter()
            .filter(|(_, heard)| now - **heard > limit)
            .map(|(node, _)| *node)
            .collect();
        for node in silent {
            self.api_nodes.remove(&node);
            ctx.disconnect(node);
            self.api_failed(node, ctx);
            self.event(
                ctx,
                EventKind::HeartbeatsMissed,
                Severity::Warning,
                format!(
                    "API node {node} missed its heartbeats for {} ms: disconnected",
                    limit.as_millis()
                ),
            );
        }
        ctx.set_timer(self.config.api_heartbeat_interval, TIMER_API_CHECK);
    }

    /// This node cannot start (an LDM found its files damaged). Stopping at
    /// once would leave the other starting nodes waiting
    /// `StartPartialTimeout` for a node that will not come, so in the join
    /// phase it first tells every data node it reaches (`CmNotJoiningRep`),
    /// and those it connects to within `START_FAILED_NOTICE_MAX`.
    /// Data node `node` will not take part in this start (its own
    /// `CmNotJoiningRep`, or the mgmd's relay of it): the join phase stops
    /// waiting for it.
    fn on_not_joining(&mut self, node: NodeId, reason: &str, ctx: &mut Context<'_>) {
        if self.phase != Phase::Starting
            || !self.is_data_node(node)
            || node == self.me()
            || self.not_joining.contains(node)
        {
            return;
        }
        tracing::warn!(
            node = %self.me(),
            "node {node} will not take part in this start: {reason}"
        );
        self.not_joining.insert(node);
        self.starting_peers.remove(&node);
        self.maybe_form_cluster(ctx);
    }

    fn on_start_failed(&mut self, reason: String, ctx: &mut Context<'_>) {
        if self.start_failed.is_some() {
            return;
        }
        self.event(ctx, EventKind::StartFailed, Severity::Alert, reason.clone());
        if self.phase != Phase::Starting {
            self.phase = Phase::Stopping;
            ctx.shutdown_failed(reason);
            return;
        }
        for peer in self.connected.iter().filter(|n| self.is_data_node(*n)) {
            ctx.send(
                Self::membership_ref(peer),
                SignalBody::CmNotJoiningRep {
                    reason: reason.clone(),
                },
            );
        }
        if let Some(mgmd) = self.config.mgmd {
            // The mgmd tells the data nodes that start later (MgmNotJoiningRep).
            ctx.send(
                BlockRef::new(mgmd, BlockNumber::MANAGEMENT, 0),
                SignalBody::CmNotJoiningRep {
                    reason: reason.clone(),
                },
            );
        }
        // No more joining: it answers the others' requests `Stopping`.
        self.phase = Phase::Stopping;
        self.start_failed = Some(StartFailed {
            reason,
            since: ctx.now(),
            last_notice: ctx.now(),
        });
        ctx.set_timer(STOP_NOTICE, TIMER_START_FAILED);
    }

    /// Stops a node that cannot start once every other data node heard
    /// it will not come, or `START_FAILED_NOTICE_MAX` has passed.
    fn maybe_stop_failed(&mut self, ctx: &mut Context<'_>) {
        let Some(failed) = &self.start_failed else {
            return;
        };
        // A node that cannot start no longer joins: it answers `Stopping`,
        // so no peer counts it as starting again while it tells them.
        assert_eq!(
            self.phase,
            Phase::Stopping,
            "membership on node {}: a node that cannot start is stopping",
            self.config.node
        );
        let all_told = self.connected_to_every_data_node();
        let now = ctx.now();
        let told = now.saturating_since(failed.last_notice) >= STOP_NOTICE;
        if (all_told && told) || now.saturating_since(failed.since) >= START_FAILED_NOTICE_MAX {
            let reason = failed.reason.clone();
            self.start_failed = None;
            ctx.shutdown_failed(reason);
        } else {
            ctx.set_timer(STOP_NOTICE, TIMER_START_FAILED);
        }
    }

    fn on_stop_order(&mut self, restart: bool, ctx: &mut Context<'_>) {
        if self.phase == Phase::Stopping || self.stop.is_some() {
            return;
        }
        if self.phase == Phase::Started && !self.local_tcs.is_empty() {
            // A graceful stop: the TCs end what they run first, so that
            // no client is left with an unknown result (`tc::shutdown`).
            // The node stays a full member meanwhile.
            self.stop = Some(PendingStop {
                restart,
                tcs_left: self.local_tcs.len(),
                since: ctx.now(),
            });
            for &tc in &self.local_tcs {
                ctx.send(tc, SignalBody::TcShutdownReq {});
            }
            // The API nodes hear at once that this node is no longer
            // started, so they send new transactions elsewhere.
            self.tell_api_nodes(ctx);
            ctx.set_timer(STOP_GRACE, TIMER_STOP_DRAIN);
            ctx.set_timer(STOP_DRAIN_MAX, TIMER_STOP_DRAIN);
            let what = if restart { "restart" } else { "stop" };
            self.event(
                ctx, EventKind::StopOrdered,
                Severity::Info,
                format!("{what} ordered by the management server: ending the transactions of its TCs first"),
            );
            return;
        }
        self.stop_now(restart, ctx);
    }

    fn on_tc_shutdown_conf(&mut self, ctx: &mut Context<'_>) {
        let Some(stop) = self.stop.as_mut() else {
            return;
        };
        stop.tcs_left = stop.tcs_left.saturating_sub(1);
        self.try_stop(ctx);
    }

    fn on_stop_drain_timer(&mut self, ctx: &mut Context<'_>) {
        let Some(stop) = self.stop else {
            return;
        };
        if stop.tcs_left > 0 && ctx.now().saturating_since(stop.since) >= STOP_DRAIN_MAX {
            self.event(
                ctx,
                EventKind::StopForced,
                Severity::Warning,
                format!(
                    "{} TC(s) still had transactions after {STOP_DRAIN_MAX:?}: stopping anyway",
                    stop.tcs_left
                ),
            );
            return self.stop_now(stop.restart, ctx);
        }
        self.try_stop(ctx);
    }

    /// Stops once the TCs are drained and the grace time has passed.
    fn try_stop(&mut self, ctx: &mut Context<'_>) {
        let Some(stop) = self.stop else {
            return;
        };
        if stop.tcs_left == 0 && ctx.now().saturating_since(stop.since) >= STOP_GRACE {
            self.stop_now(stop.restart, ctx);
        }
    }

    fn stop_now(&mut self, restart: bool, ctx: &mut Context<'_>) {
        if self.phase == Phase::Stopping {
            return;
        }
        let was_started = self.phase == Phase::Started;
        self.phase = Phase::Stopping;
        self.report_status(ctx);
        if was_started {
            let view = self.view.clone().expect("started");
            // Leaving on purpose: tell every member now rather than let them
            // wait for missed heartbeats, or take the closed connections
            // for a failure that a tie would send to the arbitrator.
            for member in view.members.iter().copied().filter(|m| *m != self.me()) {
                ctx.send(
                    Self::membership_ref(member),
                    SignalBody::FailRep {
                        failed: self.me(),
                        reason: FailReason::Stopped,
                        view_id: view.view_id,
                    },
                );
            }
        }
        let what = if restart { "restart" } else { "stop" };
        let reason = format!("{what} ordered by the management server");
        self.event(ctx, EventKind::StopOrdered, Severity::Info, reason.clone());
        if was_started {
            // The notices go out before the connections close.
            self.exit = Some((restart, reason));
            ctx.set_timer(STOP_NOTICE, TIMER_STOP_EXIT);
        } else {
            ctx.shutdown(restart, reason);
        }
    }

    fn on_stop_exit_timer(&mut self, ctx: &mut Context<'_>) {
        if let Some((restart, reason)) = self.exit.take() {
            ctx.shutdown(restart, reason);
        }
    }
}

/// Answers a `CmRegReq` with a refusal.
fn refuse(ctx: &mut Context<'_>, to: BlockRef, reason: RegRefReason, president: Option<NodeId>) {
    ctx.send(to, SignalBody::CmRegRef { reason, president });
}

impl Membership {
    /// Panics, naming what broke, when the view and what is kept of it
    /// disagree: a started node is a member of its view, whose president
    /// is a member; the view history ends with the view, ascending and
    /// bounded; only configured peers are suspected or connected. Run by
    /// the simulator after every signal (debug builds). O(members).
    fn check_membership_invariants(&self) {
        let node = self.config.node;
        if let Some(view) = &self.view {
            assert!(
                view.contains(view.president),
                "membership on node {node}: president {} is not in view {} {:?}",
                view.president,
                view.view_id,
                view.members
            );
            let mut members = view.members.clone();
            members.sort_unstable();
            members.dedup();
            assert_eq!(
                members.len(),
                view.members.len(),
                "membership on node {node}: view {} names a member twice: {:?}",
                view.view_id,
                view.members
            );
            if let Some(&(last, _)) = self.view_history.last() {
                assert_eq!(
                    last, view.view_id,
                    "membership on node {node}: the view history ends with another view"
                );
            }
        }
        if let Some(view) = self.view.as_ref().filter(|v| v.president == node) {
            // A president holds the newest view: one a member reported
            // above it is replaced at once (`heard_view`), or by the view
            // that settles the failures being handled.
            assert!(
                self.phase != Phase::Started
                    || (self.newest_heard_view <= view.view_id && !self.other_view_heard)
                    || self.arbitration.is_some()
                    || view.members.iter().any(|m| self.suspected.contains(*m)),
                "membership on node {node}: president of view {} while a member holds view {} \
                 (or another of this id: {})",
                view.view_id,
                self.newest_heard_view,
                self.other_view_heard
            );
        }
        if self.phase == Phase::Started {
            assert!(
                self.view.as_ref().is_some_and(|v| v.contains(node)),
                "membership on node {node}: started outside its view {:?}",
                self.view
            );
        }
        assert!(
            self.view_history.len() <= VIEW_HISTORY_MAX
                && self.view_history.windows(2).all(|w| w[0].0 < w[1].0),
            "membership on node {node}: view history {:?} not ascending within {VIEW_HISTORY_MAX}",
            self.view_history
                .iter()
                .map(|(id, _)| id)
                .collect::<Vec<_>>()
        );
        for peer in self.suspected.iter().chain(self.connected.iter()) {
            assert!(
                peer != node && self.config.data_nodes.contains(&peer),
                "membership on node {node}: suspects or connects to {peer}, not a configured peer"
            );
        }
    }
}

impl Block for Membership {
    fn check_invariants(&self) {
        self.check_membership_invariants();
    }

    fn start(&mut self, ctx: &mut Context<'_>) {
        self.started_at = ctx.now();
        self.report_status(ctx);
        ctx.set_timer(JOIN_RETRY_INTERVAL, TIMER_JOIN);
        ctx.set_timer(self.config.api_heartbeat_interval, TIMER_API_CHECK);
        ctx.set_timer(self.config.api_heartbeat_interval, TIMER_STATUS);
    }

    fn execute(&mut self, signal: Signal, ctx: &mut Context<'_>) {
        let sender = signal.sender.node;
        if sender != self.me() {
            if self.is_data_node(sender) {
                self.last_heard.insert(sender, ctx.now());
            } else if let Some(heard) = self.api_nodes.get_mut(&sender) {
                *heard = ctx.now();
            }
        }
        match signal.body {
            SignalBody::Timeout { timer_id } => match timer_id {
                TIMER_JOIN => self.on_join_timer(ctx),
                TIMER_HEARTBEAT => self.on_heartbeat_timer(ctx),
                TIMER_API_CHECK => self.on_api_check_timer(ctx),
                TIMER_ARBITRATION => self.on_arbitration_timer(ctx),
                TIMER_STOP_DRAIN => self.on_stop_drain_timer(ctx),
                TIMER_STOP_EXIT => self.on_stop_exit_timer(ctx),
                TIMER_START_FAILED => self.maybe_stop_failed(ctx),
                TIMER_STATUS => {
                    if self.phase != Phase::Stopping {
                        self.report_status(ctx);
                        ctx.set_timer(self.config.api_heartbeat_interval, TIMER_STATUS);
                    }
                }
                other => panic!("membership: unknown timer {other}"),
            },
            SignalBody::TcShutdownConf {} if sender == self.me() => self.on_tc_shutdown_conf(ctx),
            SignalBody::StartFailedRep { reason } if sender == self.me() => {
                self.on_start_failed(reason, ctx)
            }
            SignalBody::CmNotJoiningRep { reason } => self.on_not_joining(sender, &reason, ctx),
            SignalBody::MgmNotJoiningRep { node, reason } if Some(sender) == self.config.mgmd => {
                self.on_not_joining(node, &reason, ctx)
            }
            SignalBody::NodeServingRep { serving } if sender == self.me() => {
                if self.serving != serving {
                    self.serving = serving;
                    self.report_status(ctx);
                    // Clients may send transactions here from now on
                    // (`api_reg_conf`), not from their next registration.
                    self.tell_api_nodes(ctx);
                }
            }
            SignalBody::NodeConnected { node } => self.on_connected(node, ctx),
            SignalBody::NodeDisconnected { node } => self.on_disconnected(node, ctx),
            SignalBody::CmRegReq {
                node,
                version,
                start_id,
            } => self.on_reg_req(sender, node, version, start_id, ctx),
            SignalBody::CmRegConf { view } => self.on_reg_conf(view, ctx),
            SignalBody::CmRegRef { reason, president } => {
                self.on_reg_ref(sender, reason, president, ctx)
            }
            SignalBody::CmViewChange { view } => self.on_view_change(sender, view, ctx),
            SignalBody::Heartbeat { view_id } => self.on_heartbeat(sender, view_id, ctx),
            SignalBody::FailRep {
                failed,
                reason,
                view_id,
            } => self.on_fail_rep(sender, failed, reason, view_id, ctx),
            SignalBody::ArbitConf { view_id } => self.on_arbit_conf(sender, view_id, ctx),
            SignalBody::ArbitRef { view_id, message } => {
                self.on_arbit_ref(sender, view_id, message, ctx)
            }
            SignalBody::ApiRegReq { version } => self.on_api_reg_req(sender, version, ctx),
            SignalBody::MgmStopOrd { restart } => self.on_stop_order(restart, ctx),
            SignalBody::DbinfoScanReq { request_id, table } => {
                self.on_dbinfo_scan_req(signal.sender, request_id, &table, ctx)
            }
            other => {
                tracing::warn!(node = %self.me(), "membership: unexpected signal {} from {}", other.name(), signal.sender);
            }
        }
    }
}
