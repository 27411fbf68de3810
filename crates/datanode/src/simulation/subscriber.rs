//! The change-stream subscriber of the whole-cluster simulator
//! ([`super::cluster`]; docs/events.md): the API node subscribes to the
//! workload's tables at every data node's subscription block, assembles
//! the parts as `skarv_client::events` does, acknowledges what it hands
//! out (some epochs behind, chosen by the seed), subscribes again where
//! docs/events.md says it must (a closed connection to a node that is
//! back: `RESUBSCRIBE`; a system restart, answered `SubLostRef`: anew at
//! every node at once, going on after a restart mark, as the client
//! does; a gap ends the subscription, and a new one starts once every
//! data node is connected), and records every epoch it hands out.
//! [`check_stream`] compares that record with the committed history.
//!
//! The assembly rules (docs/events.md, "API"): a bucket of an epoch is
//! whole when a node's last part of it came, and is taken from that node
//! only (a later or resent copy is dropped); the parts of a node whose
//! connection closed before its last part are dropped (the bucket's new
//! owner resends them); parts from a node are taken only while it is
//! subscribed on the current connection (its `SubStartConf` came after the
//! connection did), so that the tail of an epoch whose head was lost with
//! an old connection never counts as whole; an epoch is handed out once
//! every bucket is whole, ascending. A bucket with no node of its group
//! subscribed since before the last epoch handed out, nor one being
//! subscribed again (its answer awaited), ends the subscription with a
//! gap if a node of its group is subscribed here (one restarted too
//! recently); with none subscribed here the cluster is down, or only this
//! API's links to the group are, and the subscription waits.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use kernel::{Context, Instant};
use schema::row::RowLayout;
use schema::Value;
use signal::{sub_change, sub_flags, NodeId, Signal, SignalBody};

use super::cluster::TableKind;
use crate::subscription::SubscriptionBlock;

/// How long the subscriber waits before asking a node that refused as
/// still starting again (the client's `RESUBSCRIBE_RETRY_MS`).
pub const RESUBSCRIBE_RETRY: Duration = Duration::from_millis(200);
/// How long a node whose connection closed may still send its group's
/// buckets: it may be up, its connection coming back (the simulator
/// reconnects after 100 ms), with the epochs kept (the client's
/// `ORPHAN_WAIT_RECONNECTS` reconnect intervals).
pub const ORPHAN_WAIT: Duration = Duration::from_millis(500);
/// After a system restart, how long the subscriber waits for every data
/// node to be connected before it subscribes anew at those that are (each
/// node group needs one; the client's `RESTART_PARTIAL_WAIT_MS`).
pub const RESTART_PARTIAL_WAIT: Duration = Duration::from_secs(10);

/// One row change as received: `v` before and after (`None`: no image).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamChange {
    pub table: TableKind,
    pub key: i64,
    pub kind: u8,
    pub before: Option<i64>,
    pub after: Option<i64>,
}

/// Why a subscription ended with a gap.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GapCause {
    /// No node of bucket `bucket`'s group is subscribed since before the
    /// last epoch handed out, nor being subscribed again, once the API's
    /// connection to `node` closed (or `node` answered its new
    /// subscription with a recent start, or refused it): nobody can resend
    /// the bucket.
    GroupGone { node: NodeId, bucket: NodeId },
    /// Data node `node` cut the subscription off (`SubGapRep`).
    Node { node: NodeId },
    /// Restarted data node `node`, subscribed again, found no node of its
    /// group that kept the subscription (`SubLostRef`), and the
    /// subscription cannot go on: the cluster restarted more than once
    /// before it could (`previous_incarnation` is not the subscription's),
    /// or did not restart (`incarnation` is the subscription's: the nodes
    /// dropped a subscription whose API was away too long).
    Lost { node: NodeId },
}

/// How a segment ended in a system restart the subscription went on
/// through (the client's `Event::Restart`): the next segment is the same
/// subscription, from `resumed` of the new incarnation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RestartMark {
    /// The last epoch the restart kept (every epoch of its restart GCI).
    pub restored: u64,
    /// The new incarnation's last epoch not in the stream.
    pub resumed: u64,
    /// The incarnations before and after.
    pub from_incarnation: u32,
    pub to_incarnation: u32,
    /// Attempts made (each a fresh `SubStartReq` at every node; one
    /// refused is stopped and made again).
    pub attempts: u32,
}

/// One subscription's record: what it handed out, and how it ended.
#[derive(Clone, Debug)]
pub struct Segment {
    pub sub_id: u32,
    /// The outages the harness had seen when it subscribed: the commits
    /// it must hold are those acknowledged in the same era.
    pub era: usize,
    /// The highest start epoch of the nodes' answers (`None`: not every
    /// node answered yet).
    pub start: Option<u64>,
    pub epochs: Vec<(u64, Vec<StreamChange>)>,
    /// Gap `(from, to, cause)`: the subscription ended.
    pub gap: Option<(u64, u64, GapCause)>,
    /// The cluster restarted from disk and the subscription went on in the
    /// next segment.
    pub restart: Option<RestartMark>,
    /// Parts dropped as already whole (resends the API had).
    pub dropped: u64,
    /// The subscriber's state when it ended ([`Subscriber::describe`]).
    pub ended_as: String,
}

impl Segment {
    /// The last epoch handed out, or the start.
    pub fn last(&self) -> u64 {
        self.epochs
            .last()
            .map_or(self.start.unwrap_or(0), |&(e, _)| e)
    }
}

/// A data node as the subscription knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NodeSub {
    /// The connection is closed (or the node was never asked).
    Down,
    /// Asked (`SubStartReq`), no answer yet.
    Asking,
    /// Refused as starting: ask again at this time.
    Retry(Instant),
    /// Subscribed on the current connection, keeping epochs above `start`.
    Live { start: u64 },
}

/// An epoch not handed out yet.
#[derive(Debug, Default)]
struct OpenEpoch {
    /// Buckets whole.
    done: BTreeSet<NodeId>,
    changes: Vec<StreamChange>,
    /// Parts coming: (bucket, sending node, changes so far).
    coming: Vec<(NodeId, NodeId, Vec<StreamChange>)>,
}

/// A subscription being made anew after a system restart (the client's
/// `Restarting`).
#[derive(Clone, Debug)]
struct Restarting {
    restored: u64,
    /// The incarnation the cluster restarted into.
    incarnation: u32,
    since: Instant,
    /// The nodes asked in the attempt under way: all of them answer, or
    /// the attempt is stopped.
    attempt: Option<BTreeSet<NodeId>>,
    retry_at: Option<Instant>,
    attempts: u32,
    /// The outages the harness had seen when the attempt was made: the
    /// era of the segment that goes on.
    era: usize,
}

/// The subscriber: state of the current subscription and the record of
/// every one so far.
pub struct Subscriber {
    tables: BTreeMap<u32, (TableKind, RowLayout)>,
    /// Node groups, in the placement's order; every data node names a
    /// bucket.
    groups: Vec<Vec<NodeId>>,
    /// Acknowledge this many epochs behind the last handed out.
    lag: usize,
    next_sub_id: u32,
    /// Whether a subscription is on (started or starting).
    active: bool,
    nodes: BTreeMap<NodeId, NodeSub>,
    open: BTreeMap<u64, OpenEpoch>,
    /// The last epoch acknowledged.
    acked: u64,
    /// No new subscription before this time (one was refused).
    new_after: Option<Instant>,
    /// When each node's connection last closed, until it is subscribed
    /// again, and the last node lost: a bucket waits for these up to
    /// `ORPHAN_WAIT` (see [`Subscriber::check_orphans`]).
    down_since: BTreeMap<NodeId, Instant>,
    last_lost: Option<NodeId>,
    /// The cluster incarnation the current subscription's epochs are of
    /// (its `SubStartConf`s name it).
    incarnation: u32,
    restarting: Option<Restarting>,
    pub segments: Vec<Segment>,
    /// Signals of subscriptions that ended (late parts, answers): ignored.
    pub stale: u64,
}

impl Subscriber {
    pub fn new(
        tables: &BTreeMap<TableKind, schema::TableDef>,
        groups: Vec<Vec<NodeId>>,
        lag: usize,
    ) -> Self {
        Subscriber {
            tables: tables
                .iter()
                .map(|(&kind, def)| (def.id, (kind, RowLayout::new(def))))
                .collect(),
            groups,
            lag,
            next_sub_id: 1,
            active: false,
            nodes: BTreeMap::new(),
            open: BTreeMap::new(),
            acked: 0,
            new_after: None,
            down_since: BTreeMap::new(),
            last_lost: None,
            incarnation: 0,
            restarting: None,
            segments: Vec::new(),
            stale: 0,
        }
    }

    fn buckets(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.groups.iter().flatten().copied()
    }

    fn current(&self) -> Option<&Segment> {
        self.segments.last().filter(|_| self.active)
    }

    fn sub_id(&self) -> Option<u32> {
        self.current().map(|s| s.sub_id)
    }

    fn request(&self, flags: u32) -> SignalBody {
        SignalBody::SubStartReq {
            sub_id: self.sub_id().expect("a subscription"),
            flags: sub_flags::FULL_IMAGES | flags,
            tables: self.tables.keys().copied().collect(),
        }
    }

    /// The client's tick: a new subscription once every data node is
    /// connected (when none is on), and requests due again.
    pub fn tick(&mut self, connected: &BTreeSet<NodeId>, era: usize, ctx: &mut Context<'_>) {
        let all: Vec<NodeId> = self.buckets().collect();
        if !self.active {
            if !all.iter().all(|n| connected.contains(n))
                || self.new_after.is_some_and(|at| ctx.now() < at)
            {
                return;
            }
            // A new subscription: every node must be started (each then
            // owns its own bucket).
            let sub_id = self.next_sub_id;
            self.next_sub_id += 1;
            self.active = true;
            self.open.clear();
            self.acked = 0;
            self.incarnation = 0;
            self.segments.push(Segment {
                sub_id,
                era,
                start: None,
                epochs: Vec::new(),
                gap: None,
                restart: None,
                dropped: 0,
                ended_as: String::new(),
            });
            for &n in &all {
                self.nodes.insert(n, NodeSub::Asking);
                ctx.send(SubscriptionBlock::address(n), self.request(0));
            }
            return;
        }
        if self.restarting.is_some() {
            self.restart_step(connected, era, ctx);
            return;
        }
        let started = self.current().is_some_and(|s| s.start.is_some());
        let now = ctx.now();
        if started && !self.down_since.is_empty() {
            if let Some(lost) = self.last_lost {
                self.check_orphans(lost, ctx);
                if !self.active {
                    return;
                }
            }
        }
        for n in all {
            let due = match self.nodes.get(&n) {
                Some(NodeSub::Down) => started,
                Some(NodeSub::Retry(at)) => now >= *at,
                _ => false,
            };
            if due && connected.contains(&n) {
                self.nodes.insert(n, NodeSub::Asking);
                // Before the subscription started every node is asked as
                // new; after, a node that was away is asked to subscribe
                // again (it resends, or starts fresh if it restarted).
                let flags = if started { sub_flags::RESUBSCRIBE } else { 0 };
                ctx.send(SubscriptionBlock::address(n), self.request(flags));
            }
        }
    }

    /// The API's connection to `node` closed.
    pub fn disconnected(&mut self, node: NodeId, ctx: &mut Context<'_>) {
        if !self.active {
            return;
        }
        self.nodes.insert(node, NodeSub::Down);
        self.down_since.insert(node, ctx.now());
        self.last_lost = Some(node);
        // Its unfinished parts: the bucket's new owner resends them.
        for open in self.open.values_mut() {
            open.coming.retain(|(_, from, _)| *from != node);
        }
        let Some(segment) = self.current() else {
            return;
        };
        if self.restarting.is_some() {
            // An attempt under way that asked it fails.
            self.restart_answered(ctx);
            return;
        }
        if segment.start.is_none() {
            // Not started yet: give this one up, a new one follows once
            // every node is connected again.
            self.end(None, ctx);
            return;
        }
        self.check_orphans(node, ctx);
    }

    /// Ends the subscription with a gap if a bucket has no node of its
    /// group that can resend it: none subscribed since before the last
    /// epoch handed out, none whose new subscription is still being
    /// answered (a node that stayed up answers with its old start, and has
    /// kept the epochs), and none whose connection closed less than
    /// `ORPHAN_WAIT` ago (it may come back; the tick checks again), while a
    /// node of its group is subscribed here: with none, the whole group is
    /// down (a cluster outage) or out of this API's reach, nothing is known
    /// lost, and the subscription waits (a node that stayed up resends, a
    /// restarted one answers `SubLostRef`). `node` is the one whose loss
    /// is checked.
    fn check_orphans(&mut self, node: NodeId, ctx: &mut Context<'_>) {
        let Some(segment) = self.current() else {
            return;
        };
        if self.restarting.is_some() {
            return;
        }
        let Some(start) = segment.start else {
            return;
        };
        let completed = segment.last().max(start);
        let now = ctx.now();
        let down_since = &self.down_since;
        let may_return = |n: &NodeId| down_since.get(n).is_some_and(|&at| now < at + ORPHAN_WAIT);
        let orphan = self.buckets().find(|&bucket| {
            let group = self
                .groups
                .iter()
                .find(|g| g.contains(&bucket))
                .expect("a bucket's group");
            let subscribed_here = group
                .iter()
                .any(|n| matches!(self.nodes.get(n), Some(NodeSub::Live { .. })));
            subscribed_here
                && !group.iter().any(|n| match self.nodes.get(n) {
                    Some(NodeSub::Live { start }) => *start <= completed,
                    Some(NodeSub::Asking) => true,
                    Some(NodeSub::Down | NodeSub::Retry(_)) => may_return(n),
                    None => false,
                })
        });
        if let Some(bucket) = orphan {
            self.end(
                Some((
                    completed + 1,
                    u64::MAX,
                    GapCause::GroupGone { node, bucket },
                )),
                ctx,
            );
        }
    }

    /// Ends the current subscription (with its gap, if any), and stops it
    /// at every node (a node that still serves it would keep its epochs).
    fn end(&mut self, gap: Option<(u64, u64, GapCause)>, ctx: &mut Context<'_>) {
        let Some(sub_id) = self.sub_id() else {
            return;
        };
        let state = self.describe();
        if let Some(segment) = self.segments.last_mut() {
            segment.gap = gap;
            segment.ended_as = state;
        }
        self.active = false;
        self.open.clear();
        self.down_since.clear();
        self.last_lost = None;
        self.restarting = None;
        for (&n, state) in &mut self.nodes {
            if *state != NodeSub::Down {
                ctx.send(
                    SubscriptionBlock::address(n),
                    SignalBody::SubStopReq { sub_id },
                );
            }
            *state = NodeSub::Down;
        }
    }

    /// A signal of the change stream to the API node; `false` if it is not
    /// one.
    pub fn execute(&mut self, signal: &Signal, ctx: &mut Context<'_>) -> Result<bool, String> {
        let node = signal.sender.node;
        let sub_id_of = match &signal.body {
            SignalBody::SubStartConf { sub_id, .. }
            | SignalBody::SubStartRef { sub_id, .. }
            | SignalBody::SubLostRef { sub_id, .. }
            | SignalBody::SubEpochData { sub_id, .. }
            | SignalBody::SubGapRep { sub_id, .. } => *sub_id,
            _ => return Ok(false),
        };
        if self.sub_id() != Some(sub_id_of) {
            self.stale += 1;
            return Ok(true);
        }
        match &signal.body {
            SignalBody::SubStartConf {
                start_epoch,
                incarnation,
                ..
            } => {
                match self.nodes.get(&node) {
                    Some(NodeSub::Asking) => {}
                    // Asked on a connection that closed since: a late
                    // answer (late signals), the node is asked again.
                    Some(NodeSub::Down) => {
                        self.stale += 1;
                        return Ok(true);
                    }
                    _ => return Err(format!("node {node}: SubStartConf not asked for")),
                }
                self.nodes.insert(
                    node,
                    NodeSub::Live {
                        start: *start_epoch,
                    },
                );
                self.down_since.remove(&node);
                if let Some(restart) = &self.restarting {
                    if *incarnation != restart.incarnation {
                        return Err(format!(
                            "node {node}: subscribed anew after the restart into incarnation {:#x}, \
                             it names {incarnation:#x}",
                            restart.incarnation
                        ));
                    }
                    self.restart_answered(ctx);
                    return Ok(true);
                }
                if self.incarnation == 0 {
                    self.incarnation = *incarnation;
                } else if *incarnation != self.incarnation {
                    return Err(format!(
                        "node {node}: SubStartConf names incarnation {incarnation:#x}, the \
                         subscription's is {:#x} (a restarted node that kept nothing answers \
                         SubLostRef)",
                        self.incarnation
                    ));
                }
                // A bucket that waited for this answer may have no node
                // left that can resend it (the node restarted: its start
                // is recent).
                self.check_orphans(node, ctx);
                if !self.active {
                    return Ok(true);
                }
                let segment = self.segments.last_mut().expect("current");
                if segment.start.is_none() {
                    let starts: Option<Vec<u64>> = self
                        .nodes
                        .values()
                        .map(|s| match s {
                            NodeSub::Live { start } => Some(*start),
                            _ => None,
                        })
                        .collect();
                    if let Some(starts) = starts {
                        let start = starts.into_iter().max().unwrap_or(0);
                        segment.start = Some(start);
                        self.open = self.open.split_off(&(start + 1));
                        self.hand_out(ctx);
                    }
                }
            }
            SignalBody::SubLostRef {
                incarnation,
                previous_incarnation,
                restart_gci,
                ..
            } if self.started() => {
                self.on_lost(node, *incarnation, *previous_incarnation, *restart_gci, ctx);
            }
            SignalBody::SubLostRef { message, .. } => {
                return Err(format!(
                    "node {node} answered a subscription not started with SubLostRef: {message}"
                ));
            }
            SignalBody::SubStartRef { code, message, .. } => {
                if *code != proto::error::NOT_STARTED {
                    return Err(format!(
                        "node {node} refused the subscription: {code} {message}"
                    ));
                }
                let retry = ctx.now() + RESUBSCRIBE_RETRY;
                if self.restarting.is_some() {
                    // Still starting: the attempt is stopped and made
                    // again (`restart_answered`).
                    self.nodes.insert(node, NodeSub::Down);
                    self.restart_answered(ctx);
                } else if self.started() {
                    self.nodes.insert(node, NodeSub::Retry(retry));
                    self.check_orphans(node, ctx);
                } else {
                    // A new subscription needs every node started (the
                    // client's `subscribe` fails with 711): this one is
                    // given up (it never started: nothing to check; its
                    // other answers are stale) and a new one asked for
                    // later, as an application would. Waiting for the
                    // node instead leaves the others sending epochs
                    // nobody acknowledges until they cut the subscription
                    // off (mixed seed 203 with the adversary).
                    self.end(None, ctx);
                    self.new_after = Some(retry);
                }
            }
            SignalBody::SubGapRep { from, to, .. } => {
                self.end(Some((*from, *to, GapCause::Node { node })), ctx);
            }
            SignalBody::SubEpochData {
                epoch,
                bucket,
                count,
                changes,
                complete,
                ..
            } => {
                if !matches!(self.nodes.get(&node), Some(NodeSub::Live { .. })) {
                    // Sent before the node heard the subscription again on
                    // this connection: it resends what it owns then.
                    return Ok(true);
                }
                self.take(node, *epoch, *bucket, *count, changes, *complete)?;
                self.hand_out(ctx);
            }
            _ => unreachable!(),
        }
        Ok(true)
    }

    fn take(
        &mut self,
        node: NodeId,
        epoch: u64,
        bucket: NodeId,
        count: u32,
        bytes: &[u8],
        complete: bool,
    ) -> Result<(), String> {
        let segment = self.segments.last_mut().expect("current");
        // While the subscription is made anew after a restart the epochs
        // are numbered anew: those up to the new start are dropped then.
        if segment.start.is_some() && epoch <= segment.last() && self.restarting.is_none() {
            segment.dropped += 1;
            return Ok(());
        }
        let entries: Vec<_> = sub_change::entries(bytes)
            .collect::<Result<_, _>>()
            .map_err(|e| format!("node {node}: epoch {epoch:#x}: bad entries: {e:?}"))?;
        if entries.len() != count as usize {
            return Err(format!(
                "node {node}: epoch {epoch:#x}: {} entries, count says {count}",
                entries.len()
            ));
        }
        let mut decoded = Vec::with_capacity(entries.len());
        for e in &entries {
            let Some((kind, layout)) = self.tables.get(&e.table) else {
                return Err(format!(
                    "node {node}: a change of table {} not subscribed",
                    e.table
                ));
            };
            decoded.push(decode(*kind, layout, e)?);
        }
        let open = self.open.entry(epoch).or_default();
        if open.done.contains(&bucket) {
            segment.dropped += 1;
            return Ok(());
        }
        let at = open
            .coming
            .iter()
            .position(|(b, n, _)| *b == bucket && *n == node)
            .unwrap_or_else(|| {
                open.coming.push((bucket, node, Vec::new()));
                open.coming.len() - 1
            });
        open.coming[at].2.extend(decoded);
        if complete {
            let (_, _, changes) = open.coming.swap_remove(at);
            open.changes.extend(changes);
            open.coming.retain(|(b, ..)| *b != bucket);
            open.done.insert(bucket);
        }
        Ok(())
    }

    /// Hands out every epoch whole, in order, and acknowledges.
    fn hand_out(&mut self, ctx: &mut Context<'_>) {
        let buckets = self.buckets().count();
        let segment = self.segments.last_mut().expect("current");
        if segment.start.is_none() || self.restarting.is_some() {
            return;
        }
        while let Some(entry) = self.open.first_entry() {
            if entry.get().done.len() < buckets {
                break;
            }
            let (epoch, open) = entry.remove_entry();
            segment.epochs.push((epoch, open.changes));
        }
        let out = segment.epochs.len();
        if out <= self.lag {
            return;
        }
        let ack = segment.epochs[out - 1 - self.lag].0;
        if ack > self.acked {
            self.acked = ack;
            let sub_id = segment.sub_id;
            for (&n, state) in &self.nodes {
                if matches!(state, NodeSub::Live { .. }) {
                    ctx.send(
                        SubscriptionBlock::address(n),
                        SignalBody::SubGcpCompleteAck { sub_id, epoch: ack },
                    );
                }
            }
        }
    }

    /// `node`, subscribed again, answered that its group kept nothing of the
    /// subscription: the cluster restarted from disk into `incarnation`,
    /// restoring GCI `restart_gci` of `previous`. As the client: if
    /// `previous` is the incarnation the subscription's epochs are of (or
    /// the one a restart under way went to), the subscription is made
    /// anew and goes on; otherwise it ends with a gap.
    fn on_lost(
        &mut self,
        node: NodeId,
        incarnation: u32,
        previous: u32,
        restart_gci: u32,
        ctx: &mut Context<'_>,
    ) {
        let ours = self
            .restarting
            .as_ref()
            .map_or(self.incarnation, |r| r.incarnation);
        if self.nodes.get(&node) == Some(&NodeSub::Asking) {
            self.nodes.insert(node, NodeSub::Down);
        }
        if self.restarting.is_some() && incarnation == ours {
            // Another node of the same restart.
        } else if ours != 0 && previous == ours && incarnation != ours {
            // A restart again before the stream went on keeps what the
            // first kept (its GCIs are all above the first's).
            let (restored, attempts) = self.restarting.as_ref().map_or(
                ((u64::from(restart_gci) << 32) | u64::from(u32::MAX), 0),
                |r| (r.restored, r.attempts),
            );
            // What was coming is of the old incarnation; the nodes
            // subscribed at restarted.
            self.open.clear();
            for state in self.nodes.values_mut() {
                if matches!(state, NodeSub::Live { .. }) {
                    *state = NodeSub::Down;
                }
            }
            self.down_since.clear();
            self.last_lost = None;
            self.restarting = Some(Restarting {
                restored,
                incarnation,
                since: ctx.now(),
                attempt: None,
                retry_at: None,
                attempts,
                era: 0,
            });
        } else {
            let completed = self
                .current()
                .map_or(0, |s| s.last().max(s.start.unwrap_or(0)));
            self.end(
                Some((completed + 1, u64::MAX, GapCause::Lost { node })),
                ctx,
            );
            return;
        }
        self.restart_answered(ctx);
    }

    /// After a system restart: subscribes anew (fresh `SubStartReq`s) at
    /// every data node at once, once no answer is awaited and every node
    /// is connected, or after [`RESTART_PARTIAL_WAIT`] at those that are
    /// if each node group has one.
    fn restart_step(&mut self, connected: &BTreeSet<NodeId>, era: usize, ctx: &mut Context<'_>) {
        let Some(restart) = &self.restarting else {
            return;
        };
        if restart.attempt.is_some()
            || restart.retry_at.is_some_and(|at| ctx.now() < at)
            || self.nodes.values().any(|s| *s == NodeSub::Asking)
        {
            return;
        }
        let all: Vec<NodeId> = self.buckets().collect();
        let reachable: BTreeSet<NodeId> = all
            .iter()
            .copied()
            .filter(|n| connected.contains(n))
            .collect();
        let every_group = self
            .groups
            .iter()
            .all(|g| g.iter().any(|n| reachable.contains(n)));
        let waited = ctx.now() >= restart.since + RESTART_PARTIAL_WAIT;
        if !(reachable.len() == all.len() || waited && every_group) {
            return;
        }
        let request = self.request(0);
        for &n in &reachable {
            self.nodes.insert(n, NodeSub::Asking);
            ctx.send(SubscriptionBlock::address(n), request.clone());
        }
        if let Some(restart) = &mut self.restarting {
            restart.attempt = Some(reachable);
            restart.attempts += 1;
            restart.era = era;
        }
    }

    /// An answer of the attempt under way came (or a node of it was lost):
    /// once none is awaited, either every node asked is subscribed and
    /// the stream goes on after the highest of their starts, in a new
    /// segment behind a [`RestartMark`], or the attempt is stopped and
    /// made again [`RESUBSCRIBE_RETRY`] later.
    fn restart_answered(&mut self, ctx: &mut Context<'_>) {
        let Some(restart) = self.restarting.clone() else {
            return;
        };
        let Some(asked) = &restart.attempt else {
            return;
        };
        if asked
            .iter()
            .any(|n| self.nodes.get(n) == Some(&NodeSub::Asking))
        {
            return;
        }
        let starts: Option<Vec<u64>> = asked
            .iter()
            .map(|n| match self.nodes.get(n) {
                Some(NodeSub::Live { start }) => Some(*start),
                _ => None,
            })
            .collect();
        let sub_id = self.sub_id().expect("a subscription");
        let Some(starts) = starts else {
            for (&n, state) in &mut self.nodes {
                if matches!(state, NodeSub::Live { .. }) {
                    ctx.send(
                        SubscriptionBlock::address(n),
                        SignalBody::SubStopReq { sub_id },
                    );
                }
                *state = NodeSub::Down;
            }
            self.open.clear();
            self.restarting = Some(Restarting {
                attempt: None,
                retry_at: Some(ctx.now() + RESUBSCRIBE_RETRY),
                ..restart
            });
            return;
        };
        let resumed = starts.into_iter().max().unwrap_or(0);
        self.open = self.open.split_off(&(resumed + 1));
        let state = self.describe();
        let segment = self.segments.last_mut().expect("current");
        segment.restart = Some(RestartMark {
            restored: restart.restored,
            resumed,
            from_incarnation: self.incarnation,
            to_incarnation: restart.incarnation,
            attempts: restart.attempts,
        });
        segment.ended_as = state;
        self.segments.push(Segment {
            sub_id,
            era: restart.era,
            start: Some(resumed),
            epochs: Vec::new(),
            gap: None,
            restart: None,
            dropped: 0,
            ended_as: String::new(),
        });
        self.restarting = None;
        self.incarnation = restart.incarnation;
        self.acked = resumed;
        for (&n, state) in &self.nodes {
            if matches!(state, NodeSub::Live { .. }) {
                ctx.send(
                    SubscriptionBlock::address(n),
                    SignalBody::SubGcpCompleteAck {
                        sub_id,
                        epoch: resumed,
                    },
                );
            }
        }
        self.hand_out(ctx);
    }

    /// The current subscription's state, for a failure's report: each
    /// node's state, the last epochs acknowledged and handed out, the
    /// first open epochs with their whole buckets and parts coming.
    pub fn describe(&self) -> String {
        let open: Vec<String> = self
            .open
            .iter()
            .take(3)
            .map(|(e, o)| {
                let coming: Vec<(NodeId, NodeId)> =
                    o.coming.iter().map(|(b, n, _)| (*b, *n)).collect();
                format!("{e:#x}: whole {:?} coming {coming:?}", o.done)
            })
            .collect();
        format!(
            "active {} nodes {:?} acked {:#x} last {:#x} open {} {open:?}",
            self.active,
            self.nodes,
            self.acked,
            self.segments.last().map_or(0, Segment::last),
            self.open.len()
        )
    }

    /// Whether a subscription is started and not ended.
    pub fn started(&self) -> bool {
        self.current().is_some_and(|s| s.start.is_some())
    }

    /// Whether the subscription handed out every epoch up to `target` of
    /// era `era`: started, not being made anew after a restart (its last
    /// segment is of the era before; the new incarnation's epoch numbers
    /// may be below those it handed out), in that era.
    pub fn caught_up(&self, era: usize, target: u64) -> bool {
        self.restarting.is_none()
            && self
                .current()
                .is_some_and(|s| s.start.is_some() && s.era == era && s.last() >= target)
    }
}

/// The workload's row `(id, v)` of one entry: key, kind and `v` before and
/// after.
fn decode(
    kind: TableKind,
    layout: &RowLayout,
    e: &sub_change::Entry<'_>,
) -> Result<StreamChange, String> {
    let image = |image: &[u8]| -> Result<Option<(i64, Option<i64>)>, String> {
        if image.is_empty() {
            return Ok(None);
        }
        if image.len() < layout.fixed_bytes() {
            return Err(format!("an image of {} bytes", image.len()));
        }
        let (fixed, var) = image.split_at(layout.fixed_bytes());
        let value = |c| match layout.decode_column(fixed, var, c).to_value() {
            Value::Int(v) => Ok(Some(v)),
            Value::Null => Ok(None),
            other => Err(format!("column {c}: {other:?}")),
        };
        Ok(Some((value(0)?.ok_or("a NULL key")?, value(1)?)))
    };
    let (before, after) = (image(e.before)?, image(e.after)?);
    let key = before.or(after).ok_or("a change without images")?.0;
    Ok(StreamChange {
        table: kind,
        key,
        kind: e.kind,
        before: before.and_then(|b| b.1),
        after: after.and_then(|a| a.1),
    })
}

/// A row write of the committed history: table, key, `v` after.
pub type RowWrite = (TableKind, i64, i64);

/// One committed transaction of the workload.
#[derive(Clone, Debug)]
pub struct CommittedTx {
    /// The outages seen before its commit was acknowledged.
    pub era: usize,
    pub epoch: u64,
    pub writes: Vec<RowWrite>,
}

/// What [`check_stream`] compared.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamChecked {
    pub subscriptions: u64,
    pub epochs: u64,
    pub changes: u64,
    /// Changes of transactions whose outcome stayed unknown, found.
    pub unknown_found: u64,
    pub gaps: u64,
    /// System restarts a subscription went on through, and the attempts
    /// it took to go on.
    pub restarts: u64,
    pub restart_attempts: u64,
    pub dropped: u64,
}

/// Checks the subscriber's record against the committed history:
/// - each subscription's epochs ascend, each once, above its start;
/// - per row, each change's before image is the previous change's after
///   image within one subscription (nothing lost in between, whatever
///   its transaction's outcome was), and the kind matches the images;
/// - for every epoch a subscription handed out (so not in its gap), the
///   changes of each row, in order, are the writes of the transactions
///   committed in that epoch (in their era), in the order they were
///   acknowledged, plus those of transactions whose outcome is unknown
///   (each whole, in one epoch, at most once); and every committed
///   transaction of the era in an epoch between its start and its last
///   epoch is there.
pub fn check_stream(
    segments: &[Segment],
    committed: &[CommittedTx],
    unknown: &[Vec<RowWrite>],
) -> Result<StreamChecked, String> {
    let mut checked = StreamChecked::default();
    let mut unknown_used = vec![false; unknown.len()];
    let mut went_on: Option<u32> = None;
    for seg in segments {
        let Some(start) = seg.start else {
            continue;
        };
        // A segment after a restart is the same subscription going on.
        if went_on != Some(seg.sub_id) {
            checked.subscriptions += 1;
        }
        went_on = seg.restart.map(|_| seg.sub_id);
        checked.dropped += seg.dropped;
        if seg.gap.is_some() {
            checked.gaps += 1;
        }
        if let Some(mark) = &seg.restart {
            checked.restarts += 1;
            checked.restart_attempts += u64::from(mark.attempts);
            if mark.to_incarnation == mark.from_incarnation || mark.to_incarnation == 0 {
                return Err(format!(
                    "subscription {}: a restart from incarnation {:#x} to {:#x}",
                    seg.sub_id, mark.from_incarnation, mark.to_incarnation
                ));
            }
        }
        let what = format!("subscription {} (start {start:#x})", seg.sub_id);
        let mut last = start;
        let mut rows: BTreeMap<(TableKind, i64), Option<i64>> = BTreeMap::new();
        let mut got: BTreeMap<u64, BTreeMap<(TableKind, i64), Vec<i64>>> = BTreeMap::new();
        for (epoch, changes) in &seg.epochs {
            if *epoch <= last {
                return Err(format!(
                    "{what}: epoch {epoch:#x} handed out after {last:#x} (not ascending, or twice)"
                ));
            }
            last = *epoch;
            checked.epochs += 1;
            for c in changes {
                checked.changes += 1;
                let images_fit = match c.kind {
                    sub_change::INSERT => c.before.is_none() && c.after.is_some(),
                    sub_change::UPDATE => c.before.is_some() && c.after.is_some(),
                    _ => false,
                };
                if !images_fit {
                    return Err(format!(
                        "{what}: epoch {epoch:#x}: {c:?}: the kind does not fit the images"
                    ));
                }
                if let Some(previous) = rows.insert((c.table, c.key), c.after) {
                    if previous != c.before {
                        return Err(format!(
                            "{what}: epoch {epoch:#x}: {c:?} follows a change to {previous:?} of the row: \
                             a change between them is missing"
                        ));
                    }
                }
                got.entry(*epoch)
                    .or_default()
                    .entry((c.table, c.key))
                    .or_default()
                    .push(c.after.expect("checked"));
            }
        }
        let end = seg.last();
        // The transactions of unknown outcome: whole in one epoch or not
        // at all; taken out before the comparison.
        for (i, writes) in unknown.iter().enumerate() {
            if unknown_used[i] || writes.is_empty() {
                continue;
            }
            let found = got.iter().find_map(|(&e, rows)| {
                writes
                    .iter()
                    .all(|(t, k, v)| rows.get(&(*t, *k)).is_some_and(|l| l.contains(v)))
                    .then_some(e)
            });
            if let Some(e) = found {
                unknown_used[i] = true;
                checked.unknown_found += 1;
                let rows = got.get_mut(&e).expect("found");
                for (t, k, v) in writes {
                    let list = rows.get_mut(&(*t, *k)).expect("found");
                    let at = list.iter().position(|x| x == v).expect("found");
                    list.remove(at);
                }
            }
        }
        let mut want: BTreeMap<u64, BTreeMap<(TableKind, i64), Vec<i64>>> = BTreeMap::new();
        for tx in committed {
            if tx.era == seg.era && tx.epoch > start && tx.epoch <= end {
                for &(t, k, v) in &tx.writes {
                    want.entry(tx.epoch)
                        .or_default()
                        .entry((t, k))
                        .or_default()
                        .push(v);
                }
            }
        }
        for rows in got.values_mut() {
            rows.retain(|_, l| !l.is_empty());
        }
        got.retain(|_, rows| !rows.is_empty());
        if got != want {
            let epochs: BTreeSet<u64> = got.keys().chain(want.keys()).copied().collect();
            let first = epochs
                .into_iter()
                .find(|e| got.get(e) != want.get(e))
                .expect("a difference");
            return Err(format!(
                "{what}: epoch {first:#x}: the stream has {:?}, the committed history {:?} \
                 (epochs handed out up to {end:#x}, gap {:?})",
                got.get(&first),
                want.get(&first),
                seg.gap
            ));
        }
    }
    Ok(checked)
}
