//! The distribution block (NDB: DBDIH), for now only its global checkpoint
//! protocol: every commit belongs to a global checkpoint (GCI), and the
//! master makes each GCI durable on every live node in three steps (see
//! `docs/transactions.md`, "Global checkpoints"):
//!
//! 1. `GcpPrepareReq { g + 1 }` to every TC of every member: hold
//!    commits (answered at once); then, once every TC holds,
//!    `GcpCommitReq { g + 1 }`: new commits use `g + 1`, and each TC
//!    answers once no commit of a lower GCI is in progress on it. The two
//!    phases keep dependency order across TCs (`crate::tc` `gcp` module).
//! 2. `GcpSaveReq { g }` to every LDM instance of every member: flush the
//!    redo log part up to `g`.
//! 3. `GcpKeepReq { g }` to every member's distribution block: record in
//!    the node's sysfile that `g` is complete and who was serving
//!    ([`sysfile`]), tell the local LDMs (LCPs may complete up to `g`).
//! 4. `GcpCompleteRep { g }` to every TC: `g` is durable cluster-wide, and
//!    every member keeps it for a system restart.
//!
//! The master is the membership president; every distribution block
//! follows the views that membership reports (`MembershipViewRep`), and
//! the one on the president's node runs one GCP at a time, every
//! `gcp_interval`, or sooner when an LDM's local checkpoint waits for a
//! GCI while its redo log part fills (`GcpHurryReq`). A member that leaves
//! the view is no longer waited for.
//!
//! **The first GCI.** A GCI must never be handed out twice, nor at or
//! below one an LDM has already flushed (its redo log would hold two
//! histories of one GCI; `LdmInstance::commit` asserts it). So before a
//! member takes part in GCPs the master asks each of its TC and LDM
//! instances for the highest GCI it knows (`GcpStartReq` →
//! `GcpStartConf`): an LDM answers from its redo log part (flushed or
//! found at restart), a TC the last GCI it was told to use. The master's
//! counter is the highest answer seen; the next GCP is counter + 1. This
//! covers a fresh cluster (everything answers 0: GCIs start at 1), a
//! system restart (the highest GCI on any disk), a master takeover (the
//! surviving TCs know the GCI in use) and a node joining a running
//! cluster with a higher GCI on its disk (the counter jumps above it
//! before the node takes part). The limit: between a node joining the
//! view and its answer, other nodes' TCs may still commit in a lower GCI
//! on that node's LDMs; node restart (issue 6) copies data to a joining
//! node before it serves, which closes that window.
//!
//! **Node failure.** Every view this block installs goes on to the local
//! TC and LDM instances (`MembershipViewRep`): they route by the live
//! replicas ([`crate::live_map`]) and end what the failed nodes leave
//! behind. The transactions whose TC was on a failed node are taken over
//! by the master's TC instance 0 (`TcTakeOverReq` → `TcTakeOverConf`), for
//! the union of the nodes not yet taken over; a failure during a takeover
//! orders a new one for the union. Until it is done the master holds the
//! GCP between its prepare and save steps: a taken-over transaction
//! commits in the GCI its TC gave it, which must not be saved before
//! (`GcpSaveReq { g }` promises an LDM no more commits of GCI ≤ `g`).
//! `TakeOverDoneRep` tells every member, so that a new master orders only
//! what is left.
//!
//! **System restart** ([`system_restart`]): a master that starts a cluster
//! from all nodes down first agrees on the restart GCI and has the nodes
//! that hold it restore exactly to it, before its first GCP.

pub mod incarnation;
mod node_states;
pub mod sysfile;
mod system_restart;

use std::path::PathBuf;

use storage::disk::Disk;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use kernel::{Block, Context};
use signal::{
    epoch, BlockNumber, BlockRef, MembershipView, NodeBitmask, NodeId, Signal, SignalBody,
};

/// Timer: time for the next GCP.
const TIMER_GCP: u32 = 1;
/// Timer: a system restart's wait for the configured nodes ran out.
const TIMER_RESTART: u32 = 2;
/// Timer: time for the next micro-GCP (epoch switch).
const TIMER_EPOCH: u32 = 3;
/// Timer: try a failed sysfile write again.
const TIMER_KEEP_RETRY: u32 = 4;

/// How the distribution block is set up.
#[derive(Clone, Debug)]
pub struct DistributionConfig {
    pub node: NodeId,
    /// `TimeBetweenGlobalCheckpoints`.
    pub gcp_interval: Duration,
    /// `TimeBetweenGlobalCheckpointsTimeout`: how long a GCP's flush or
    /// keep step may wait for one node before the master excludes it
    /// (see [`Distribution::check_gcp_stop`]); zero never excludes.
    pub gcp_stop_timeout: Duration,
    /// `TimeBetweenEpochs`: zero runs no micro-GCPs (every epoch's lo is 0).
    pub epoch_interval: Duration,
    /// TC instances per data node (the same on every node).
    pub tc_instances: u32,
    /// LDM instances per data node (the same on every node).
    pub ldm_instances: u32,
}

/// The step of the GCP in progress, with the blocks still to answer it.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Round {
    /// Step 1a: TCs hold their commits; `prev` is the epoch in use before.
    Prepare {
        epoch: u64,
        prev: u64,
        waiting: BTreeSet<BlockRef>,
    },
    /// Step 1b: TCs switch to `epoch` and finish the commits of lower ones.
    /// A micro-GCP (same hi as `prev`) ends here.
    Commit {
        epoch: u64,
        prev: u64,
        waiting: BTreeSet<BlockRef>,
    },
    /// Step 2: LDMs flush up to `gci`; `nodes` took part.
    Save {
        gci: u32,
        waiting: BTreeSet<BlockRef>,
        nodes: NodeBitmask,
    },
    /// Step 3: distribution blocks keep `gci` in their sysfiles.
    Keep {
        gci: u32,
        waiting: BTreeSet<BlockRef>,
    },
}

/// Which step a confirmation answers.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Step {
    Prepare,
    Commit,
    Save,
    Keep,
}

/// Where a node keeps its sysfile, and the node groups a system restart
/// must find (see [`Distribution::with_sysfile`]).
struct SysfileConfig {
    /// Shared with the sysfile writes that run on an `io` thread.
    disk: std::sync::Arc<std::sync::Mutex<Box<dyn Disk>>>,
    fs_dir: PathBuf,
    node_groups: Vec<Vec<NodeId>>,
}

/// What the master knows of one member.
#[derive(Clone, Debug, Default)]
struct Member {
    /// Its TC and LDM instances that have not yet answered `GcpStartReq`;
    /// it takes part in GCPs once this is empty.
    start_waiting: BTreeSet<BlockRef>,
    /// The highest GCI its instances answered (`GcpStartConf`): the
    /// master's counter is never below it (no GCI handed out twice).
    reported_gci: u32,
}

/// State of the master (only on the president's node).
#[derive(Debug, Default)]
struct Master {
    /// Highest GCI handed out or reported by any member: the next GCP
    /// prepares `gci + 1`.
    gci: u32,
    /// Highest GCI completed (durable on every member that took part).
    durable_gci: u32,
    /// The epoch handed out last (its hi is `gci`; 0 before the first).
    epoch: u64,
    /// The last epoch reported complete (`SubGcpCompleteRep`).
    complete_epoch: u64,
    /// Epochs the members' TCs were in, or had just left, when this
    /// master took over (`GcpStartConf`): the old master may have
    /// reported them complete on some nodes and not on others (it died
    /// between the signals). They are reported again, ascending, with
    /// the first epoch this master reports: a node that never had a mark
    /// of an epoch in which it captured no change would never send its
    /// part of it to a subscriber (the epoch would never be whole at the
    /// API). A repeated report changes nothing where it came before.
    unreported: BTreeSet<u64>,
    /// The epoch timer fired: run a micro-GCP when no round runs.
    epoch_due: bool,
    members: BTreeMap<NodeId, Member>,
    round: Option<Round>,
    /// The GCP timer fired while a round ran or before the first members
    /// were ready: start a round as soon as possible.
    due: bool,
    /// Whether the first GCP of this master started.
    first_done: bool,
    /// A GCP waits before its keep step for a node group to serve again
    /// (logged once per hold).
    keep_held: bool,
    /// The cluster incarnation this master's GCPs hand out epochs in
    /// (`incarnation`): chosen by the system restart this master led, or
    /// learned from the TCs (a takeover), or new at the first GCP of a
    /// first start.
    incarnation: Option<incarnation::Incarnation>,
    /// A flush or keep step waiting for some node since a GCP timer tick
    /// (`check_gcp_stop`).
    stall: Option<Stall>,
}

/// A GCP step the master has waited on: which GCI, since when, and the
/// nodes it already excluded or reported for it (each once).
#[derive(Debug)]
struct Stall {
    gci: u32,
    since: kernel::Instant,
    handled: NodeBitmask,
}

/// The distribution block; see the module doc.
pub struct Distribution {
    config: DistributionConfig,
    view: Option<MembershipView>,
    /// `Some` while this node is the president.
    master: Option<Master>,
    timer_armed: bool,
    /// Data nodes that left a view and whose TCs' transactions are not
    /// yet taken over.
    takeover_pending: NodeBitmask,
    /// The takeover ordered by this master and not yet confirmed: (id,
    /// failed nodes).
    takeover_asked: Option<(u32, NodeBitmask)>,
    next_takeover_id: u32,
    /// The node states last heard from a master (node restart).
    known_states: Option<crate::live_map::NodeStates>,
    /// What this block last told its membership block of whether this
    /// node serves (`NodeServingRep`).
    told_serving: Option<bool>,
    /// `Some` while master: the node states it decides.
    states: Option<node_states::StateMaster>,
    /// What this node keeps for a system restart (in memory only without
    /// a sysfile).
    kept: sysfile::Kept,
    sysfile: Option<SysfileConfig>,
    /// `Some` while master: where the system restart stands.
    restart: Option<system_restart::Phase>,
    restarted_to: Option<u32>,
    /// `GcpHurryReq`s passed on to the master, and GCPs this block started
    /// early because of one (while master).
    hurries: HurryStats,
    /// The sysfile write in flight on an `io` thread, if any.
    keep_write: Option<system_restart::KeepWrite>,
    /// `GcpKeepReq`s that came while a sysfile write was in flight.
    keeps_waiting: Vec<(BlockRef, sysfile::Kept)>,
    next_io_request: u64,
    /// The management server, whose cluster log hears this block's alarms.
    mgmd: Option<NodeId>,
    /// Where `restart_info` is published (the node's ndbinfo figures).
    figures: Option<std::sync::Arc<crate::dbinfo::NodeFigures>>,
    /// While master: the restarts it saw (see `node_states`), and whether
    /// the published copy is behind them.
    restarts: BTreeMap<NodeId, crate::dbinfo::RestartFigure>,
    restarts_unpublished: bool,
}

/// What [`Distribution::hurries`] counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HurryStats {
    pub forwarded: u64,
    pub gcps_started: u64,
}

impl Distribution {
    pub fn new(config: DistributionConfig) -> Distribution {
        assert!(
            config.tc_instances > 0,
            "a data node has at least one TC instance"
        );
        assert!(
            config.ldm_instances > 0,
            "a data node has at least one LDM instance"
        );
        assert!(
            !config.gcp_interval.is_zero(),
            "TimeBetweenGlobalCheckpoints is above 0"
        );
        Distribution {
            config,
            view: None,
            master: None,
            timer_armed: false,
            takeover_pending: NodeBitmask::new(),
            takeover_asked: None,
            next_takeover_id: 1,
            known_states: None,
            told_serving: None,
            states: None,
            kept: sysfile::Kept::default(),
            sysfile: None,
            restart: None,
            restarted_to: None,
            hurries: HurryStats::default(),
            keep_write: None,
            keeps_waiting: Vec::new(),
            next_io_request: 1,
            mgmd: None,
            figures: None,
            restarts: BTreeMap::new(),
            restarts_unpublished: false,
        }
    }

    /// Publishes the restarts it sees as master into `figures`
    /// (`ndbinfo.restart_info`).
    pub fn with_figures(
        mut self,
        figures: std::sync::Arc<crate::dbinfo::NodeFigures>,
    ) -> Distribution {
        self.figures = Some(figures);
        self
    }

    /// Reports alarms (a sysfile that cannot be written) to the cluster
    /// log of the management server `mgmd`, besides this node's log.
    pub fn with_cluster_log(mut self, mgmd: Option<NodeId>) -> Distribution {
        self.mgmd = mgmd;
        self
    }

    /// Logs `text` here and, with a management server, in its cluster log.
    fn cluster_log(
        &self,
        kind: signal::EventKind,
        severity: signal::Severity,
        text: String,
        ctx: &mut Context<'_>,
    ) {
        crate::cluster_log::report(ctx, self.config.node, self.mgmd, kind, severity, text);
    }

    /// Keeps a sysfile in `fs_dir` (reading what it holds now) and takes
    /// part in system restarts: as master of a cluster starting from all
    /// nodes down, waits for the nodes of `node_groups` and restores the
    /// cluster to the last GCI any of them kept complete. Without it a
    /// node keeps the complete GCI in memory only and a system restart
    /// restores each node to its own durable GCI.
    pub fn with_sysfile(
        mut self,
        disk: Box<dyn Disk>,
        fs_dir: PathBuf,
        node_groups: Vec<Vec<NodeId>>,
    ) -> Result<Distribution, String> {
        self.kept = sysfile::read(&*disk, &fs_dir)?;
        tracing::info!(
            node = %self.config.node,
            "sysfile: GCI {} kept complete, serving {:?}",
            self.kept.gci,
            self.kept.serving
        );
        self.sysfile = Some(SysfileConfig {
            disk: std::sync::Arc::new(std::sync::Mutex::new(disk)),
            fs_dir,
            node_groups,
        });
        Ok(self)
    }

    /// What this node keeps for a system restart.
    pub fn kept(&self) -> sysfile::Kept {
        self.kept
    }

    /// Data nodes whose transactions are not yet taken over.
    pub fn takeover_pending(&self) -> NodeBitmask {
        self.takeover_pending
    }

    pub fn address(node: NodeId) -> BlockRef {
        BlockRef::new(node, BlockNumber::DISTRIBUTION, 0)
    }

    /// Whether this block is the GCP master now.
    pub fn is_master(&self) -> bool {
        self.master.is_some()
    }

    /// `GcpHurryReq`s this block passed on and GCPs it started early.
    pub fn hurries(&self) -> HurryStats {
        self.hurries
    }

    /// The highest GCI the master completed (0 when not master or none).
    pub fn durable_gci(&self) -> u32 {
        self.master.as_ref().map_or(0, |m| m.durable_gci)
    }

    /// The highest GCI the master handed out (0 when not master or none).
    pub fn current_gci(&self) -> u32 {
        self.master.as_ref().map_or(0, |m| m.gci)
    }

    /// The last epoch the master reported complete (0 when not master or none).
    pub fn complete_epoch(&self) -> u64 {
        self.master.as_ref().map_or(0, |m| m.complete_epoch)
    }

    fn tcs_of(&self, node: NodeId) -> impl Iterator<Item = BlockRef> {
        (0..self.config.tc_instances)
            .map(move |i| BlockRef::new(node, BlockNumber::TRANSACTION_COORDINATOR, i as u16))
    }

    fn ldms_of(&self, node: NodeId) -> impl Iterator<Item = BlockRef> {
        (0..self.config.ldm_instances)
            .map(move |i| BlockRef::new(node, BlockNumber::LOCAL_DATA_MANAGER, i as u16))
    }

    fn on_view(&mut self, view: MembershipView, ctx: &mut Context<'_>) {
        if self
            .view
            .as_ref()
            .is_some_and(|v| v.view_id >= view.view_id)
        {
            return;
        }
        let old_members = self.members();
        if let Some(old) = &self.view {
            let members: NodeBitmask = view.members.iter().copied().collect();
            let left = old.bitmask().difference(&members);
            // A node back in the view had its takeover done before it
            // could rejoin (membership refuses it while it is being removed).
            self.takeover_pending = self.takeover_pending.union(&left).difference(&members);
        }
        for block in self
            .tcs_of(self.config.node)
            .chain(self.ldms_of(self.config.node))
        {
            ctx.send(block, SignalBody::MembershipViewRep { view: view.clone() });
        }
        let president = view.president == self.config.node;
        if president && self.master.is_none() {
            tracing::info!(node = %self.config.node, "global checkpoint master from view {}", view.view_id);
            self.master = Some(Master::default());
            self.restart = Some(self.first_restart_phase(ctx));
        } else if !president && self.master.is_some() {
            tracing::info!(node = %self.config.node, "no longer global checkpoint master");
            self.master = None;
            self.states = None;
            self.restart = None;
        }
        self.view = Some(view);
        self.restarts_on_view(old_members, ctx);
        if self.master.is_some() {
            if self.restart_done() {
                self.states_on_view(ctx);
            }
            self.order_takeover(ctx);
            self.follow_members(ctx);
            self.restart_on_view(ctx);
            if !self.timer_armed {
                self.timer_armed = true;
                ctx.set_timer(self.config.gcp_interval, TIMER_GCP);
                if !self.config.epoch_interval.is_zero() {
                    ctx.set_timer(self.config.epoch_interval, TIMER_EPOCH);
                }
            }
        }
    }

    /// Adds the view's new members (asking their TCs and LDMs for the
    /// highest GCI they know) and forgets those that left, answering for
    /// them in the round in progress.
    fn follow_members(&mut self, ctx: &mut Context<'_>) {
        let view = self.view.clone().expect("a view before members");
        let left: Vec<NodeId> = {
            let master = self.master.as_ref().expect("master");
            master
                .members
                .keys()
                .copied()
                .filter(|n| !view.contains(*n))
                .collect()
        };
        let joined: Vec<NodeId> = {
            let master = self.master.as_ref().expect("master");
            view.members
                .iter()
                .copied()
                .filter(|n| !master.members.contains_key(n))
                .collect()
        };
        let asked: Vec<(NodeId, Vec<BlockRef>)> = joined
            .iter()
            .map(|&n| (n, self.tcs_of(n).chain(self.ldms_of(n)).collect()))
            .collect();
        let gathering = self.restart_gathering();
        let master = self.master.as_mut().expect("master");
        for node in left {
            master.members.remove(&node);
            if let Some(
                Round::Prepare { waiting, .. }
                | Round::Commit { waiting, .. }
                | Round::Save { waiting, .. }
                | Round::Keep { waiting, .. },
            ) = &mut master.round
            {
                waiting.retain(|b| b.node != node);
            }
        }
        for (node, blocks) in asked {
            for &block in &blocks {
                ctx.send(block, SignalBody::GcpStartReq {});
            }
            if gathering {
                ctx.send(Self::address(node), SignalBody::RestartInfoReq {});
            }
            master.members.insert(
                node,
                Member {
                    start_waiting: blocks.into_iter().collect(),
                    reported_gci: 0,
                },
            );
        }
        self.advance(ctx);
    }

    fn on_start_conf(
        &mut self,
        from: BlockRef,
        gci: u32,
        told: incarnation::Incarnation,
        epochs: [u64; 2],
        ctx: &mut Context<'_>,
    ) {
        let Some(master) = self.master.as_mut() else {
            return;
        };
        let Some(member) = master.members.get_mut(&from.node) else {
            return;
        };
        if member.start_waiting.remove(&from) {
            // A TC that committed under an old master: its epochs go on
            // from there, and the last two may lack their report.
            for epoch in epochs.into_iter().filter(|&e| e != 0) {
                master.epoch = master.epoch.max(epoch);
                if epoch > master.complete_epoch {
                    master.unreported.insert(epoch);
                }
            }
            if told.id != 0 && master.incarnation.is_none() {
                // A takeover: the cluster goes on in the incarnation its
                // TCs commit in (every TC that has one has the same).
                master.incarnation = Some(told);
            }
            member.reported_gci = member.reported_gci.max(gci);
            master.gci = master.gci.max(gci);
            if from.block == BlockNumber::TRANSACTION_COORDINATOR && gci > 0 {
                // A TC was given a GCI: the cluster is running, this is a
                // master takeover, not a start from all nodes down.
                self.restart_not_needed(ctx);
            }
            let master = self.master.as_mut().expect("master");
            let member = master.members.get_mut(&from.node).expect("checked");
            let joined = member.start_waiting.is_empty();
            if joined {
                tracing::debug!(node = %self.config.node, "node {} takes part in global checkpoints", from.node);
            }
            // The first GCP runs as soon as every member is ready; and one
            // runs as soon as a node joins, whose TC has no GCI to commit
            // in until its first `GcpPrepareReq` (its commits would wait up
            // to TimeBetweenGlobalCheckpoints: a gap in service seen after
            // a node restart).
            if !master.first_done || joined {
                master.due = true;
            }
            self.advance(ctx);
        }
    }

    fn on_timer(&mut self, ctx: &mut Context<'_>) {
        self.timer_armed = false;
        if self.restarts_unpublished {
            self.publish_restarts();
        }
        let Some(master) = self.master.as_mut() else {
            return;
        };
        master.due = true;
        self.timer_armed = true;
        ctx.set_timer(self.config.gcp_interval, TIMER_GCP);
        self.check_gcp_stop(ctx);
        self.advance(ctx);
    }

    /// NDB's GCP stop, as master: a flush (`GcpSaveReq`) or sysfile write
    /// (`GcpKeepReq`) that one node has not answered for
    /// `gcp_stop_timeout` (a full or failing disk) holds every later GCI,
    /// so commits stop becoming durable cluster-wide and the redo logs
    /// fill until writes are refused. When another node of the slow node's
    /// group serves (and is not slow itself), the slow node is excluded
    /// (`FailRep` with `GcpStop` to this node's membership, or, when the
    /// slow node is this one, a restart): the step stops waiting for it and
    /// durability goes on with its partner. A node that is the last
    /// serving one of its group is never excluded (its rows would be
    /// unavailable); the master raises an alarm and waits.
    fn check_gcp_stop(&mut self, ctx: &mut Context<'_>) {
        let timeout = self.config.gcp_stop_timeout;
        let now = ctx.now();
        let me = self.config.node;
        let Some(master) = self.master.as_mut() else {
            return;
        };
        let (gci, waiting) = match &master.round {
            Some(Round::Save { gci, waiting, .. }) | Some(Round::Keep { gci, waiting })
                if !waiting.is_empty() && !timeout.is_zero() =>
            {
                (*gci, waiting)
            }
            _ => {
                master.stall = None;
                return;
            }
        };
        let step = if matches!(master.round, Some(Round::Save { .. })) {
            "redo flush"
        } else {
            "sysfile write"
        };
        let stall = match &mut master.stall {
            Some(stall) if stall.gci == gci => stall,
            other => other.insert(Stall {
                gci,
                since: now,
                handled: NodeBitmask::new(),
            }),
        };
        let waited = now.saturating_since(stall.since);
        if waited < timeout {
            return;
        }
        let slow: NodeBitmask = waiting.iter().map(|b| b.node).collect();
        let new: Vec<NodeId> = slow
            .iter()
            .filter(|n| !stall.handled.contains(*n))
            .collect();
        for &node in &new {
            stall.handled.insert(node);
        }
        // Past the timeout, rarely: only now the groups and who serves.
        let serving = self.serving_now();
        let groups: &[Vec<NodeId>] = self.sysfile.as_ref().map_or(&[], |s| &s.node_groups);
        let reports: Vec<(NodeId, Option<NodeId>, Option<Vec<NodeId>>)> = new
            .into_iter()
            .map(|node| {
                let group = groups.iter().find(|g| g.contains(&node));
                let partner = group.and_then(|g| {
                    g.iter()
                        .copied()
                        .find(|p| *p != node && !slow.contains(*p) && serving.contains(*p))
                });
                (node, partner, group.cloned())
            })
            .collect();
        let view_id = self.view.as_ref().map_or(0, |v| v.view_id);
        for (node, partner, group) in reports {
            let waited_ms = waited.as_millis();
            match partner {
                Some(partner) => {
                    let text = format!(
                        "GCP stop: GCI {gci} waited {waited_ms} ms for the {step} of node {node}; \
                         excluding node {node} (node {partner} serves its node group)"
                    );
                    self.cluster_log(
                        signal::EventKind::CheckpointStopped,
                        signal::Severity::Alert,
                        text.clone(),
                        ctx,
                    );
                    if node == me {
                        ctx.shutdown(true, text);
                    } else {
                        ctx.send(
                            BlockRef::new(me, BlockNumber::MEMBERSHIP, 0),
                            SignalBody::FailRep {
                                failed: node,
                                reason: signal::FailReason::GcpStop,
                                view_id,
                            },
                        );
                    }
                }
                None => {
                    let text = format!(
                        "GCP stop: GCI {gci} waited {waited_ms} ms for the {step} of node {node}, \
                         the only serving node of node group {group:?}: not excluded, so \
                         durability waits for it (free its disk)"
                    );
                    self.cluster_log(
                        signal::EventKind::CheckpointStopped,
                        signal::Severity::Alert,
                        text,
                        ctx,
                    );
                }
            }
        }
    }

    /// An LDM's local checkpoint waits for `gci` while its redo log part
    /// fills, or a stopping TC for the GCI of its commits (`GcpHurryReq`).
    /// The master runs the GCP that saves `gci` now unless one already
    /// moved past it; any other member passes a local block's request to
    /// the master once (a request from another node is
    /// not passed on again: a changing view cannot make it circle).
    fn on_hurry(&mut self, from: BlockRef, gci: u32, ctx: &mut Context<'_>) {
        if let Some(master) = self.master.as_mut() {
            // A round that prepared a GCI above `gci` saves `gci`.
            if gci >= master.gci && !master.due {
                tracing::debug!(node = %self.config.node, "GCP hurried for GCI {gci} by {from}");
                master.due = true;
                self.hurries.gcps_started += 1;
                self.advance(ctx);
            }
            return;
        }
        if from.node != self.config.node {
            return;
        }
        if let Some(view) = &self.view {
            if view.president != self.config.node {
                ctx.send(
                    Self::address(view.president),
                    SignalBody::GcpHurryReq { gci },
                );
                self.hurries.forwarded += 1;
            }
        }
    }

    fn on_epoch_timer(&mut self, ctx: &mut Context<'_>) {
        let Some(master) = self.master.as_mut() else {
            return;
        };
        master.epoch_due = true;
        ctx.set_timer(self.config.epoch_interval, TIMER_EPOCH);
        self.advance(ctx);
    }

    /// Moves the GCP on: finishes a step whose blocks all answered, starts
    /// the next one, or starts a new GCP when one is due.
    fn advance(&mut self, ctx: &mut Context<'_>) {
        self.advance_gcp(ctx);
        if self.restart_done() {
            self.note_running(ctx);
        }
    }

    fn advance_gcp(&mut self, ctx: &mut Context<'_>) {
        if !self.restart_done() {
            // No GCI before the system restart chose what every node holds.
            return;
        }
        loop {
            let Some(master) = self.master.as_mut() else {
                return;
            };
            let ready: Vec<NodeId> = master
                .members
                .iter()
                .filter(|(_, m)| m.start_waiting.is_empty())
                .map(|(n, _)| *n)
                .collect();
            match master.round.take() {
                None => {
                    // The first GCI waits for every member's answer; later
                    // GCPs go on without the members still answering.
                    let all_ready = master.members.values().all(|m| m.start_waiting.is_empty());
                    let can_start = !ready.is_empty() && (master.first_done || all_ready);
                    // A micro-GCP only switches (hi, lo) to (hi, lo + 1);
                    // the first epoch is always a GCP's.
                    let micro = master.epoch_due && master.epoch != 0;
                    if !(master.due || micro) || !can_start {
                        return;
                    }
                    let prev = master.epoch;
                    let epoch = if master.due {
                        master.due = false;
                        master.first_done = true;
                        if master.incarnation.is_none() {
                            // A first start (no system restart chose one,
                            // no TC knew one).
                            let id = incarnation::Incarnation::fresh_id(0, || ctx.random());
                            tracing::info!(node = %self.config.node, "cluster incarnation {id:#x} (first start)");
                            master.incarnation = Some(incarnation::Incarnation {
                                id,
                                previous: 0,
                                restart_gci: 0,
                            });
                        }
                        let gci = master
                            .gci
                            .checked_add(1)
                            .expect("GCI counter below u32::MAX");
                        master.gci = gci;
                        epoch::make(gci, 0)
                    } else {
                        assert!(
                            epoch::lo(prev) < u32::MAX,
                            "epoch {prev:#x}: lo below u32::MAX"
                        );
                        prev + 1
                    };
                    master.epoch_due = false;
                    master.epoch = epoch;
                    let waiting: BTreeSet<BlockRef> =
                        ready.iter().flat_map(|&n| self.tcs_of(n)).collect();
                    for &tc in &waiting {
                        ctx.send(tc, SignalBody::GcpPrepareReq { epoch });
                    }
                    self.master.as_mut().expect("master").round = Some(Round::Prepare {
                        epoch,
                        prev,
                        waiting,
                    });
                }
                Some(Round::Prepare {
                    epoch,
                    prev,
                    waiting,
                }) if waiting.is_empty() => {
                    // Every TC holds its commits: switch them all.
                    let told = master
                        .incarnation
                        .expect("the first GCP chose the incarnation");
                    let waiting: BTreeSet<BlockRef> =
                        ready.iter().flat_map(|&n| self.tcs_of(n)).collect();
                    for &tc in &waiting {
                        ctx.send(
                            tc,
                            SignalBody::GcpCommitReq {
                                epoch,
                                incarnation: told.id,
                                previous_incarnation: told.previous,
                                restart_gci: told.restart_gci,
                            },
                        );
                    }
                    self.master.as_mut().expect("master").round = Some(Round::Commit {
                        epoch,
                        prev,
                        waiting,
                    });
                }
                Some(Round::Commit {
                    epoch,
                    prev,
                    waiting,
                }) if waiting.is_empty() && !self.takeover_pending.is_empty() => {
                    // A taken-over transaction may still commit in an epoch
                    // the save or the report would close: wait for it.
                    master.round = Some(Round::Commit {
                        epoch,
                        prev,
                        waiting,
                    });
                    return;
                }
                Some(Round::Commit {
                    epoch,
                    prev,
                    waiting,
                }) if waiting.is_empty() => {
                    if prev != 0 && prev > master.complete_epoch {
                        // No TC has a commit of `prev` or below in progress.
                        // Epochs a taken-over master left unreported go
                        // first (ascending: receivers take marks in order).
                        let mut epochs = std::mem::take(&mut master.unreported);
                        assert!(
                            epochs.last().is_none_or(|&e| e <= prev),
                            "epochs {epochs:x?} left by an old master above {prev:#x}, \
                             which is the highest any TC reported"
                        );
                        epochs.retain(|&e| e > master.complete_epoch);
                        epochs.insert(prev);
                        master.complete_epoch = prev;
                        for &n in &ready {
                            for &epoch in &epochs {
                                for i in 0..self.config.tc_instances {
                                    ctx.send(
                                        BlockRef::new(
                                            n,
                                            BlockNumber::TRANSACTION_COORDINATOR,
                                            i as u16,
                                        ),
                                        SignalBody::SubGcpCompleteRep { epoch },
                                    );
                                }
                            }
                            // The change stream: each LDM instance passes the
                            // mark on behind the changes it captured
                            // (docs/events.md).
                            for &epoch in &epochs {
                                for i in 0..self.config.ldm_instances {
                                    ctx.send(
                                        BlockRef::new(n, BlockNumber::LOCAL_DATA_MANAGER, i as u16),
                                        SignalBody::SubGcpCompleteRep { epoch },
                                    );
                                }
                            }
                        }
                    }
                    if prev != 0 && epoch::hi(prev) == epoch::hi(epoch) {
                        // A micro-GCP: nothing to save.
                        continue;
                    }
                    let save = epoch::hi(epoch) - 1;
                    if save == 0 || save <= master.durable_gci {
                        // Nothing committed below the first GCI.
                        master.durable_gci = master.durable_gci.max(save);
                        continue;
                    }
                    let waiting: BTreeSet<BlockRef> =
                        ready.iter().flat_map(|&n| self.ldms_of(n)).collect();
                    for &ldm in &waiting {
                        ctx.send(ldm, SignalBody::GcpSaveReq { gci: save });
                    }
                    self.master.as_mut().expect("master").round = Some(Round::Save {
                        gci: save,
                        waiting,
                        nodes: ready.iter().copied().collect(),
                    });
                }
                Some(Round::Save {
                    gci,
                    waiting,
                    nodes,
                }) if waiting.is_empty() => {
                    // The nodes that hold every row and saved `gci`: those a
                    // system restart to `gci` may restore (the others copy).
                    let serving = match &self.states {
                        Some(_) => self.serving_now().intersection(&nodes),
                        None => nodes,
                    };
                    if let Some(group) = self.group_without(&serving) {
                        // Kept, `gci` would be the restart GCI of a cluster
                        // that cannot restore it: no node of `group` holds
                        // its rows (its serving node failed while the other
                        // was starting; membership counts a starting node
                        // as present, so the cluster may not have stopped
                        // yet). Hold the GCP: it stays saved but not kept,
                        // and a system restart goes back to the last GCI
                        // every group could restore.
                        let master = self.master.as_mut().expect("master");
                        if !master.keep_held {
                            master.keep_held = true;
                            tracing::warn!(
                                node = %self.config.node,
                                "GCI {gci} not kept: node group {group:?} has no serving node that saved it"
                            );
                        }
                        master.round = Some(Round::Save {
                            gci,
                            waiting,
                            nodes,
                        });
                        return;
                    }
                    let master = self.master.as_mut().expect("master");
                    master.keep_held = false;
                    let incarnation = master.incarnation.expect("a GCP ran").id;
                    let waiting: BTreeSet<BlockRef> =
                        ready.iter().map(|&n| Self::address(n)).collect();
                    for &block in &waiting {
                        ctx.send(
                            block,
                            SignalBody::GcpKeepReq {
                                gci,
                                serving,
                                incarnation,
                            },
                        );
                    }
                    self.master.as_mut().expect("master").round =
                        Some(Round::Keep { gci, waiting });
                }
                Some(Round::Keep { gci, waiting }) if waiting.is_empty() => {
                    assert!(
                        gci > master.durable_gci,
                        "GCI {gci} completes once, after {}",
                        master.durable_gci
                    );
                    master.durable_gci = gci;
                    for tc in ready.iter().flat_map(|&n| self.tcs_of(n)) {
                        ctx.send(tc, SignalBody::GcpCompleteRep { gci });
                    }
                    tracing::debug!(node = %self.config.node, "GCI {gci} complete");
                }
                Some(round) => {
                    master.round = Some(round);
                    return;
                }
            }
        }
    }

    /// A node group none of whose nodes is in `serving` (only a node that
    /// keeps a sysfile knows the groups; without one, none).
    fn group_without(&self, serving: &NodeBitmask) -> Option<Vec<NodeId>> {
        let groups = &self.sysfile.as_ref()?.node_groups;
        groups
            .iter()
            .find(|g| !g.iter().any(|n| serving.contains(*n)))
            .cloned()
    }

    /// A step's answer: `at` is the epoch (switch steps) or the GCI.
    fn on_step_conf(&mut self, from: BlockRef, step: Step, at: u64, ctx: &mut Context<'_>) {
        let Some(master) = self.master.as_mut() else {
            return;
        };
        match &mut master.round {
            Some(Round::Prepare {
                epoch: e, waiting, ..
            }) if step == Step::Prepare && *e == at => {
                waiting.remove(&from);
            }
            Some(Round::Commit {
                epoch: e, waiting, ..
            }) if step == Step::Commit && *e == at => {
                waiting.remove(&from);
            }
            Some(Round::Save {
                gci: g, waiting, ..
            }) if step == Step::Save && u64::from(*g) == at => {
                waiting.remove(&from);
            }
            Some(Round::Keep { gci: g, waiting }) if step == Step::Keep && u64::from(*g) == at => {
                waiting.remove(&from);
            }
            // An answer to an earlier master's round, or a duplicate.
            _ => return,
        }
        self.advance(ctx);
    }
}

impl Distribution {
    /// As master: orders the takeover of every node still pending, unless
    /// that exact set is being taken over already.
    fn order_takeover(&mut self, ctx: &mut Context<'_>) {
        if self.master.is_none() || self.takeover_pending.is_empty() {
            return;
        }
        if self
            .takeover_asked
            .is_some_and(|(_, failed)| failed == self.takeover_pending)
        {
            return;
        }
        let takeover_id = self.next_takeover_id;
        self.next_takeover_id += 1;
        let failed = self.takeover_pending;
        self.takeover_asked = Some((takeover_id, failed));
        tracing::info!(node = %self.config.node, "takeover {takeover_id} of the transactions of failed nodes {failed:?}");
        ctx.send(
            BlockRef::new(self.config.node, BlockNumber::TRANSACTION_COORDINATOR, 0),
            SignalBody::TcTakeOverReq {
                takeover_id,
                failed,
            },
        );
    }

    fn on_takeover_conf(&mut self, takeover_id: u32, failed: NodeBitmask, ctx: &mut Context<'_>) {
        if self.master.is_none() || self.takeover_asked != Some((takeover_id, failed)) {
            // An answer to a takeover that a later one replaced.
            return;
        }
        self.takeover_asked = None;
        self.takeover_pending = self.takeover_pending.difference(&failed);
        assert!(
            self.takeover_pending.is_empty(),
            "takeover {takeover_id} was for every pending node, {failed:?}, yet {:?} are pending",
            self.takeover_pending
        );
        tracing::info!(node = %self.config.node, "takeover {takeover_id} of failed nodes {failed:?} done");
        let view = self.view.as_ref().expect("a master has a view");
        for &member in view.members.iter().filter(|m| **m != self.config.node) {
            ctx.send(
                Self::address(member),
                SignalBody::TakeOverDoneRep { failed },
            );
        }
        self.advance(ctx);
    }
}

impl Distribution {
    /// Panics, naming what broke, when the GCP state contradicts itself:
    /// the master's counters against each other, the round in progress
    /// against the epoch and GCI it runs and the members that answer it,
    /// the takeover state against the view. Run by the simulator after
    /// every signal (debug builds). O(members × instances).
    fn check_distribution_invariants(&self) {
        let node = self.config.node;
        let view = self.view.as_ref();
        if let Some(view) = view {
            assert_eq!(
                self.master.is_some(),
                view.president == node,
                "distribution on node {node}: master while president only (president {})",
                view.president
            );
            for failed in self.takeover_pending.iter() {
                assert!(
                    !view.contains(failed),
                    "distribution on node {node}: node {failed} awaits takeover yet is in view {}",
                    view.view_id
                );
            }
        } else {
            assert!(
                self.master.is_none(),
                "distribution on node {node}: master without a view"
            );
        }
        let Some(master) = &self.master else {
            return;
        };
        let view = view.expect("checked above: a master has a view");
        assert!(
            epoch::hi(master.epoch) <= master.gci && master.durable_gci <= master.gci,
            "distribution master on node {node}: epoch {:#x} and durable GCI {} above the GCI counter {}",
            master.epoch,
            master.durable_gci,
            master.gci
        );
        assert!(
            master.complete_epoch <= master.epoch,
            "distribution master on node {node}: epoch {:#x} complete, above the epoch handed out {:#x}",
            master.complete_epoch,
            master.epoch
        );
        for (&member, state) in &master.members {
            assert!(
                view.contains(member),
                "distribution master on node {node}: member {member} is not in view {}",
                view.view_id
            );
            assert!(
                state.reported_gci <= master.gci,
                "distribution master on node {node}: member {member} reported GCI {}, above the counter {}",
                state.reported_gci,
                master.gci
            );
            for block in &state.start_waiting {
                assert!(
                    block.node == member
                        && matches!(
                            block.block,
                            BlockNumber::TRANSACTION_COORDINATOR | BlockNumber::LOCAL_DATA_MANAGER
                        ),
                    "distribution master on node {node}: member {member} waits for GcpStartConf from {block}"
                );
            }
        }
        let Some(round) = &master.round else {
            return;
        };
        // Which blocks answer the step, and that the step is the one the
        // master's counters say is in progress.
        let (answers, waiting) = match round {
            Round::Prepare {
                epoch,
                prev,
                waiting,
            }
            | Round::Commit {
                epoch,
                prev,
                waiting,
            } => {
                assert!(
                    *epoch == master.epoch && prev < epoch && *prev >= master.complete_epoch,
                    "distribution master on node {node}: switch {prev:#x} -> {epoch:#x} runs with epoch {:#x}, {:#x} complete",
                    master.epoch,
                    master.complete_epoch
                );
                (BlockNumber::TRANSACTION_COORDINATOR, waiting)
            }
            Round::Save { gci, waiting, .. } => {
                assert!(
                    *gci > master.durable_gci && *gci < epoch::hi(master.epoch),
                    "distribution master on node {node}: saves GCI {gci}, durable {}, epoch {:#x}",
                    master.durable_gci,
                    master.epoch
                );
                (BlockNumber::LOCAL_DATA_MANAGER, waiting)
            }
            Round::Keep { gci, waiting } => {
                assert!(
                    *gci > master.durable_gci && *gci < epoch::hi(master.epoch),
                    "distribution master on node {node}: keeps GCI {gci}, durable {}, epoch {:#x}",
                    master.durable_gci,
                    master.epoch
                );
                (BlockNumber::DISTRIBUTION, waiting)
            }
        };
        for block in waiting {
            // Only members that answered GcpStartConf take part in rounds.
            assert!(
                block.block == answers
                    && master
                        .members
                        .get(&block.node)
                        .is_some_and(|m| m.start_waiting.is_empty()),
                "distribution master on node {node}: round {round:?} waits for {block}, not a ready member's {answers:?}"
            );
            if let Round::Save { nodes, .. } = round {
                assert!(
                    nodes.contains(block.node),
                    "distribution master on node {node}: GCI save waits for {block}, of a node not in it"
                );
            }
        }
    }
}

impl Block for Distribution {
    fn check_invariants(&self) {
        self.check_distribution_invariants();
    }

    fn execute(&mut self, signal: Signal, ctx: &mut Context<'_>) {
        let from = signal.sender;
        match signal.body {
            SignalBody::MembershipViewRep { view } => {
                if from.node == self.config.node {
                    self.on_view(view, ctx);
                }
            }
            SignalBody::Timeout {
                timer_id: TIMER_GCP,
            } => self.on_timer(ctx),
            SignalBody::GcpStartConf {
                gci,
                incarnation,
                previous_incarnation,
                restart_gci,
                epoch,
                previous_epoch,
            } => {
                let told = incarnation::Incarnation {
                    id: incarnation,
                    previous: previous_incarnation,
                    restart_gci,
                };
                self.on_start_conf(from, gci, told, [previous_epoch, epoch], ctx)
            }
            SignalBody::GcpPrepareConf { epoch } => {
                self.on_step_conf(from, Step::Prepare, epoch, ctx)
            }
            SignalBody::GcpCommitConf { epoch } => {
                self.on_step_conf(from, Step::Commit, epoch, ctx)
            }
            SignalBody::GcpSaveConf { gci } => {
                self.on_step_conf(from, Step::Save, u64::from(gci), ctx)
            }
            SignalBody::GcpHurryReq { gci } => self.on_hurry(from, gci, ctx),
            SignalBody::GcpKeepReq {
                gci,
                serving,
                incarnation,
            } => {
                let kept = sysfile::Kept {
                    gci,
                    serving,
                    incarnation,
                };
                self.on_keep_req(from, kept, ctx)
            }
            SignalBody::FsConf { request, error }
                if from.node == self.config.node && from.block == BlockNumber::FILE_SYSTEM =>
            {
                self.on_keep_written(request, error, ctx)
            }
            SignalBody::GcpKeepConf { gci } => {
                self.on_step_conf(from, Step::Keep, u64::from(gci), ctx)
            }
            SignalBody::RestartInfoReq {} => {
                let kept = self.kept;
                ctx.send(
                    from,
                    SignalBody::RestartInfoConf {
                        kept_gci: kept.gci,
                        serving: kept.serving,
                        incarnation: kept.incarnation,
                    },
                );
            }
            SignalBody::RestartInfoConf {
                kept_gci,
                serving,
                incarnation,
            } => {
                let kept = sysfile::Kept {
                    gci: kept_gci,
                    serving,
                    incarnation,
                };
                self.on_restart_info(from.node, kept, ctx)
            }
            SignalBody::RestartGciConf { gci, restored } => {
                self.on_restart_gci_conf(from, gci, restored, ctx)
            }
            SignalBody::Timeout {
                timer_id: TIMER_RESTART,
            } => self.on_restart_timer(ctx),
            SignalBody::Timeout {
                timer_id: TIMER_EPOCH,
            } => self.on_epoch_timer(ctx),
            SignalBody::Timeout {
                timer_id: TIMER_KEEP_RETRY,
            } => self.on_keep_retry_timer(ctx),
            SignalBody::TcTakeOverConf {
                takeover_id,
                failed,
            } if from.node == self.config.node => self.on_takeover_conf(takeover_id, failed, ctx),
            SignalBody::TakeOverDoneRep { failed } => {
                self.takeover_pending = self.takeover_pending.difference(&failed);
            }
            body @ SignalBody::NodeStateReq { .. } => self.on_states(
                crate::live_map::NodeStates::of(&body).expect("matched"),
                ctx,
            ),
            SignalBody::NodeStateConf { state_id } => self.on_state_conf(from, state_id, ctx),
            SignalBody::NodeCopyConf {} => self.on_copy_conf(from, ctx),
            other => {
                tracing::debug!(node = %self.config.node, "distribution ignores {} from {from}", other.name());
            }
        }
    }
}
