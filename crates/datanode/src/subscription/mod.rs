//! The subscription block (NDB: SUMA): the change stream's data-node side,
//! one per data node, on the `rep` thread (docs/events.md).
//!
//! An API node subscribes to tables (`SubStartReq`) at every data node.
//! The block tells its node's LDM instances which tables to capture
//! (`SubCaptureReq`, the union of every subscriber's) and learns from
//! their answers the highest epoch each committed in before: the epochs
//! above the highest of them are captured whole on this node, and the
//! subscriber gets them, which `SubStartConf { start_epoch }` says. The
//! LDM instances hand in each commit's row changes (`SubTableData`, tagged
//! with the commit's epoch) and pass on the master's epoch-complete marks
//! behind them; once every instance passed on an epoch's mark the epoch is
//! complete here ([`buffer::EpochBuffer`]).
//!
//! **Buckets** (NDB's bucket owners). Every replica captures. A bucket is
//! the set of partitions whose placement primary is one data node, named
//! by that node; for each subscriber every bucket has one owner, which
//! sends the bucket's changes of each complete epoch (in parts, the last
//! one `complete`; an empty epoch is that part alone). A subscription
//! starts with each bucket owned by its first live node in the node
//! group's order from the bucket's node (its own node when every node is
//! up). When a node fails, every survivor moves the failed node's
//! buckets, for every subscriber, to the first live node in that order
//! that it knows holds the subscription;
//! the one that takes a bucket resends its kept epochs above the
//! subscriber's last acknowledgement, then sends the bucket with each
//! epoch. The decision is made when an epoch is sent, from the live map
//! this block follows (the views and node states its LDM instance 0 passes
//! on). The API takes each (epoch, bucket) once, the first whole one, so a
//! resent or doubly sent bucket is dropped there. A node that restarted
//! and is subscribed again (`sub_flags::RESUBSCRIBE`) tells its group
//! (`SubHolderReq`): the others count it as a holder in take-overs
//! ([`SubscriptionBlock::owner_of`]), and the one sending its bucket hands
//! it back (`SubHandbackConf`) once its epochs reach the restarted node's
//! start; other buckets it took over it keeps. A
//! `RESUBSCRIBE` of a subscription this node still serves (the API's
//! connection closed and came back) resends its buckets from the API's
//! last acknowledgement.
//!
//! **Keeping.** Complete epochs stay on every replica until the subscriber
//! acknowledged them (`SubGcpCompleteAck`, which the API sends to every
//! node it is subscribed at once it holds the whole epoch): what a resend
//! reads. A subscriber more than `MaxBufferedEpochs` epochs behind, or the
//! one furthest behind while the block holds more than
//! `MaxBufferedEpochBytes`, is cut off: it gets `SubGapRep` naming the
//! epochs it loses, and its subscription ends. Writes never wait for a
//! subscriber.

pub mod buffer;

use std::collections::BTreeMap;

use config::Placement;
use kernel::{Block, Context};
use signal::{
    sub_change, sub_flags, BlockNumber, BlockRef, MembershipView, NodeBitmask, NodeId, Signal,
    SignalBody,
};

use crate::distribution::incarnation::Incarnation;
use crate::live_map::{LiveMap, NodeStates};

use buffer::{EpochBuffer, EpochData};

/// Subscriptions one data node serves at once (all API nodes together).
pub const SUBSCRIBERS_MAX: usize = 256;
/// Tables one subscription names at most.
pub const SUB_TABLES_MAX: usize = 1_024;
/// Bytes of row changes in one `SubEpochData` part at most (a row larger
/// than this goes alone in its part).
pub const SUB_PART_BYTES_MAX: usize = 64 << 10;
/// How long the subscriptions of an API node that is gone (its connection
/// closed or its heartbeats stopped: `ApiFailRep`) are kept for it to
/// subscribe again (`sub_flags::RESUBSCRIBE`, which loses nothing). After
/// that they end, and the epochs kept for them are freed. NDB drops them
/// at once; a connection that breaks and comes back within this time
/// loses nothing here.
pub const API_GONE_GRACE: std::time::Duration = std::time::Duration::from_secs(30);
/// Timer: the subscriptions of gone API nodes are looked at.
const TIMER_GONE: u32 = 1;
/// Subscriptions cut off (a gap) remembered, so that one subscribed again
/// (`sub_flags::RESUBSCRIBE`) by an API that never heard its `SubGapRep`
/// hears it then rather than wait for epochs nobody sends.
pub const ENDED_REMEMBERED_MAX: usize = SUBSCRIBERS_MAX;

/// What the subscription block of one node needs to know.
#[derive(Clone, Debug)]
pub struct SubscriptionConfig {
    pub node: NodeId,
    /// The node's LDM instances, which capture and pass the marks on.
    pub ldms: Vec<BlockRef>,
    /// The cluster's placement: a partition's bucket is its primary by
    /// placement; a bucket's owners are its node group.
    pub placement: Placement,
    /// `MaxBufferedEpochs`.
    pub max_buffered_epochs: u32,
    /// `MaxBufferedEpochBytes`.
    pub max_buffered_epoch_bytes: u64,
}

/// Counters, for tests and observability.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SubscriptionStats {
    /// Epochs complete on this node.
    pub epochs_completed: u64,
    /// Row changes handed in by the LDM instances.
    pub changes_captured: u64,
    /// Row changes sent to subscribers (each subscriber counted).
    pub changes_sent: u64,
    /// Subscribers cut off with a gap.
    pub gaps: u64,
    /// Buckets taken over from a failed node (each subscriber counted).
    pub buckets_taken_over: u64,
    /// Epochs of a taken-over bucket resent (each subscriber counted).
    pub epochs_resent: u64,
    /// Subscriptions ended because their API node stayed gone for
    /// `API_GONE_GRACE`.
    pub gone_dropped: u64,
    /// Buckets handed back to the restarted node they are named by (each
    /// subscriber counted).
    pub buckets_handed_back: u64,
    /// This node's own bucket taken back after its restart (each
    /// subscriber counted).
    pub buckets_taken_back: u64,
}

/// The block's name for a subscription: the API's address and its id.
type SubKey = (BlockRef, u32);

#[derive(Debug)]
struct Subscriber {
    /// Table ids, ascending.
    tables: Vec<u32>,
    /// `signal::sub_flags`: this version sends both images whatever they
    /// say (the subscriber cuts them down); kept for when the data node
    /// does.
    #[allow(dead_code)]
    flags: u32,
    /// `None` while its capture round runs; then the epoch after which it
    /// gets every epoch.
    start: Option<u64>,
    /// The last epoch it acknowledged (its start before any).
    acked: u64,
    /// Each bucket's owner for this subscriber, as this node knows it,
    /// by bucket (`SubscriptionBlock::buckets`); `None`: unknown (this
    /// node restarted and the subscriber came back: a survivor owns it).
    owners: Vec<Option<NodeId>>,
    /// The buckets this node owns for it.
    owned: NodeBitmask,
    /// The nodes this node knows to serve it, each with the epoch above
    /// which it holds every epoch (0: since the subscription began). What
    /// is here is true: a node is added on its own word (a fresh start at
    /// every node, `SubHolderReq`, or a `SubHolderConf` listing what its
    /// sender knows) and removed when it fails. Knowing less only makes a
    /// take-over send a bucket twice (see [`SubscriptionBlock::owner_of`]).
    holders: Vec<(NodeId, u64)>,
    /// Restarted nodes whose own bucket this node sends for them and
    /// hands back once its last complete epoch reaches their start (the
    /// epoch above which they hold every epoch).
    handbacks: Vec<(NodeId, u64)>,
    /// Subscribed again at this restarted node, not answered yet: the
    /// group's other live nodes asked whether they hold it
    /// (`SubHolderReq`) that have not answered, and whether one does. The
    /// API hears `SubStartConf` once every one answered and one holds it,
    /// else `SubLostRef`: no node of the group kept
    /// it, so the group (or the cluster: a system restart hands epochs out
    /// again) restarted since it began, and the epochs between are gone.
    confirming: Option<(NodeBitmask, bool)>,
    /// Since when its API node is gone (`ApiFailRep`), until it subscribes
    /// again or acknowledges an epoch: it ends `API_GONE_GRACE` later.
    gone_since: Option<kernel::Instant>,
}

/// A capture round: every LDM instance is asked and answers once.
#[derive(Debug)]
struct Round {
    waiting: usize,
    max_epoch: u64,
    /// Subscribers that start once it ends.
    starting: Vec<SubKey>,
}

/// The subscription block of one data node. See the module documentation.
pub struct SubscriptionBlock {
    config: SubscriptionConfig,
    subscribers: BTreeMap<SubKey, Subscriber>,
    buffer: EpochBuffer,
    round: Option<Round>,
    /// Subscribers waiting for the next round.
    queued: Vec<SubKey>,
    /// Fresh subscribers whose start epoch is not complete here yet: their
    /// `SubStartConf` waits for it ([`SubscriptionBlock::announce`]).
    unannounced: Vec<SubKey>,
    /// The tables captured differ from what the subscribers want: another
    /// round is due once the current one ends.
    capture_stale: bool,
    /// Views and node states, as this node's LDM instance 0 passes them on.
    live: LiveMap,
    /// The buckets: every data node of the placement, ascending.
    buckets: Vec<NodeId>,
    /// The highest epoch of any row change handed in: a schema entry is
    /// filed there (or, once that is complete, in the next epoch).
    max_data_epoch: u64,
    /// Schema entries some LDM instances sent, by (kind, table, version):
    /// how many did. Filed once every instance did.
    schema_reports: BTreeMap<(u8, u32, u32), usize>,
    stats: SubscriptionStats,
    gone_timer_armed: bool,
    /// The cluster incarnation this node's epochs are of, as its TCs tell
    /// it (`SubIncarnationRep`; id 0: not yet). Every `SubStartConf` names
    /// it, so that an API whose subscription is lost to a system restart
    /// can tell which of its epochs the restart kept (`SubLostRef`).
    incarnation: Incarnation,
    /// `SubStartReq`s that came before the incarnation was known (a node
    /// just started): (api, sub_id, flags, tables), answered once it is
    /// (at most `SUBSCRIBERS_MAX`).
    awaiting_incarnation: Vec<(BlockRef, u32, u32, Vec<u32>)>,
    /// Subscriptions cut off, with the epochs of their gap (at most
    /// `ENDED_REMEMBERED_MAX`).
    ended: BTreeMap<SubKey, (u64, u64)>,
}

impl SubscriptionBlock {
    pub fn new(config: SubscriptionConfig) -> SubscriptionBlock {
        let mut buckets: Vec<NodeId> = config.placement.nodes().collect();
        buckets.sort_unstable();
        SubscriptionBlock {
            buffer: EpochBuffer::new(config.ldms.len()),
            live: LiveMap::new(config.placement.clone()),
            buckets,
            config,
            subscribers: BTreeMap::new(),
            round: None,
            queued: Vec::new(),
            unannounced: Vec::new(),
            capture_stale: false,
            max_data_epoch: 0,
            schema_reports: BTreeMap::new(),
            stats: SubscriptionStats::default(),
            gone_timer_armed: false,
            incarnation: Incarnation::default(),
            awaiting_incarnation: Vec::new(),
            ended: BTreeMap::new(),
        }
    }

    /// The block's address on `node`.
    pub fn address(node: NodeId) -> BlockRef {
        BlockRef::new(node, BlockNumber::SUBSCRIPTION, 0)
    }

    /// Its counters.
    pub fn stats(&self) -> &SubscriptionStats {
        &self.stats
    }

    /// Subscriptions served (started or starting).
    pub fn subscribers(&self) -> usize {
        self.subscribers.len()
    }

    /// Bytes of row changes held (open and kept epochs).
    pub fn buffered_bytes(&self) -> u64 {
        self.buffer.bytes()
    }

    /// Row changes dropped for coming after their epoch was complete here
    /// (should stay 0: a taken-over commit is filed in its own epoch).
    pub fn late_changes(&self) -> u64 {
        self.buffer.late()
    }

    /// The last epoch complete on this node.
    pub fn complete_epoch(&self) -> u64 {
        self.buffer.complete()
    }

    /// Who sends bucket `bucket` to `sub` from now on, as this node sees
    /// it: in its node group's order from the bucket's node, skipping nodes
    /// down or in `failing`, the first that is this node or that this node
    /// knows holds every epoch the subscriber still needs (a holder whose
    /// start is at most the subscriber's acknowledgement here). `None` when
    /// there is none (this node is of another group and knows no holder of
    /// it; or the whole group is down).
    ///
    /// Why no bucket goes unsent: a holder's entry is true, so a node
    /// that passes over itself for an earlier node passes it to a real
    /// holder of the epochs; the first such holder in the order knows no
    /// earlier one, so it takes the bucket. A node that does not know an
    /// earlier holder takes the bucket too, and the API takes each (epoch,
    /// bucket) once. Choosing simply the first live node (the rule before
    /// three replicas) could pick a restarted node the API has not
    /// subscribed again, which sends nothing.
    fn owner_of(&self, bucket: NodeId, sub: &Subscriber, failing: &NodeBitmask) -> Option<NodeId> {
        let me = self.config.node;
        let group = self.config.placement.group_of(bucket)?;
        let nodes = &self.config.placement.node_groups()[group as usize];
        let at = nodes.iter().position(|&n| n == bucket)?;
        (0..nodes.len())
            .map(|k| nodes[(at + k) % nodes.len()])
            .filter(|&n| !self.live.is_down(n) && !failing.contains(n))
            .find(|&n| {
                n == me
                    || sub
                        .holders
                        .iter()
                        .any(|&(h, start)| h == n && start <= sub.acked)
            })
    }

    /// Recomputes the buckets `sub` has this node send.
    fn own(&self, sub: &mut Subscriber) {
        sub.owned = NodeBitmask::new();
        for (&bucket, owner) in self.buckets.iter().zip(&sub.owners) {
            if *owner == Some(self.config.node) {
                sub.owned.insert(bucket);
            }
        }
    }

    /// A view: the nodes that left it fail. Every survivor moves their
    /// buckets, per subscriber, to the first live node of the bucket's
    /// group; this node resends, for each bucket it takes, the kept
    /// epochs above the subscriber's last acknowledgement.
    fn on_view(&mut self, view: &MembershipView, ctx: &mut Context<'_>) {
        let failed = self.live.on_view(view);
        if failed.is_empty() {
            return;
        }
        let me = self.config.node;
        let groups: Vec<u32> = failed
            .iter()
            .filter_map(|n| self.config.placement.group_of(n))
            .collect();
        let keys: Vec<SubKey> = self.subscribers.keys().copied().collect();
        for key in keys {
            let mut sub = self.subscribers.remove(&key).expect("listed");
            sub.holders.retain(|&(n, _)| !failed.contains(n));
            sub.handbacks.retain(|&(n, _)| !failed.contains(n));
            if let Some((waiting, _)) = sub.confirming.as_mut() {
                *waiting = waiting.difference(&failed);
            }
            let mut taken = NodeBitmask::new();
            for (i, &bucket) in self.buckets.iter().enumerate() {
                let in_failed_group = self
                    .config
                    .placement
                    .group_of(bucket)
                    .is_some_and(|g| groups.contains(&g));
                let orphaned = match sub.owners[i] {
                    Some(owner) => failed.contains(owner),
                    // Unknown here (restarted): it was the failed node's
                    // group's, if this failure is in its group.
                    None => in_failed_group,
                };
                if !orphaned {
                    continue;
                }
                let owner = self.owner_of(bucket, &sub, &failed);
                sub.owners[i] = owner;
                if owner == Some(me) && !sub.owned.contains(bucket) {
                    taken.insert(bucket);
                }
            }
            self.own(&mut sub);
            let from = sub.start.map(|start| sub.acked.max(start));
            let confirming = sub.confirming.is_some();
            self.subscribers.insert(key, sub);
            if confirming {
                // A node asked failed: it answers no more.
                self.confirm(key, ctx);
                if !self.subscribers.contains_key(&key) {
                    continue;
                }
            }
            if let (Some(from), false) = (from, taken.is_empty()) {
                self.stats.buckets_taken_over += taken.iter().count() as u64;
                tracing::info!(
                    node = %me,
                    "subscription {} of {}: took over buckets {:?} of failed nodes {:?}; \
                     resending the kept epochs above {}/{}",
                    key.1,
                    key.0,
                    taken.iter().collect::<Vec<_>>(),
                    failed.iter().collect::<Vec<_>>(),
                    signal::epoch::hi(from),
                    signal::epoch::lo(from),
                );
                self.resend(key, taken, ctx);
            }
        }
    }

    /// Sends subscriber `key` again, for `buckets`, every kept epoch above
    /// its last acknowledgement (and its start).
    fn resend(&mut self, key: SubKey, buckets: NodeBitmask, ctx: &mut Context<'_>) {
        self.resend_above(key, buckets, 0, ctx);
    }

    /// [`SubscriptionBlock::resend`], of the kept epochs above `above` too.
    fn resend_above(
        &mut self,
        key: SubKey,
        buckets: NodeBitmask,
        above: u64,
        ctx: &mut Context<'_>,
    ) {
        let Some(sub) = self.subscribers.get(&key) else {
            return;
        };
        let Some(start) = sub.start else {
            return;
        };
        if buckets.is_empty() {
            return;
        }
        let from = sub.acked.max(start).max(above);
        let kept = self.buffer.kept();
        for data in kept.range(kept.partition_point(|k| k.epoch <= from)..) {
            self.stats.epochs_resent += 1;
            send_buckets(
                key,
                sub,
                buckets,
                data,
                &self.config.placement,
                &mut self.stats,
                ctx,
            );
        }
    }

    /// The tables some subscriber wants, ascending.
    fn wanted_tables(&self) -> Vec<u32> {
        let mut tables: Vec<u32> = self
            .subscribers
            .values()
            .flat_map(|s| s.tables.iter().copied())
            .collect();
        tables.sort_unstable();
        tables.dedup();
        tables
    }

    fn on_start_req(
        &mut self,
        api: BlockRef,
        sub_id: u32,
        flags: u32,
        mut tables: Vec<u32>,
        ctx: &mut Context<'_>,
    ) {
        let refuse = |code: u32, message: String, ctx: &mut Context<'_>| {
            ctx.send(
                api,
                SignalBody::SubStartRef {
                    sub_id,
                    code,
                    message,
                },
            );
        };
        if tables.is_empty() || tables.len() > SUB_TABLES_MAX {
            let message = format!(
                "a subscription names 1 to {SUB_TABLES_MAX} tables, not {}",
                tables.len()
            );
            return refuse(proto::error::MALFORMED_REQUEST, message, ctx);
        }
        if let Some(sub) = self.subscribers.get_mut(&(api, sub_id)) {
            if let (Some(start), true) = (sub.start, flags & sub_flags::RESUBSCRIBE != 0) {
                sub.gone_since = None;
                // The API's connection to this node closed and came back
                // while this node stayed up: what this node sent meanwhile
                // is lost to the API, which dropped its unfinished parts.
                // The subscription goes on; the buckets this node owns are
                // resent from the API's last acknowledgement.
                ctx.send(
                    api,
                    SignalBody::SubStartConf {
                        sub_id,
                        start_epoch: start,
                        incarnation: self.incarnation.id,
                    },
                );
                let owned = sub.owned;
                self.resend((api, sub_id), owned, ctx);
                return;
            }
            let message = format!("subscription {sub_id} of {api} exists");
            return refuse(proto::error::ALREADY_EXISTS, message, ctx);
        }
        if let Some((from, to)) = self.ended.remove(&(api, sub_id)) {
            if flags & sub_flags::RESUBSCRIBE != 0 {
                // Cut off while the API was away: it ends with the gap.
                ctx.send(api, SignalBody::SubGapRep { sub_id, from, to });
                return;
            }
        }
        if self.subscribers.len() >= SUBSCRIBERS_MAX {
            let message = format!(
                "node {} serves {SUBSCRIBERS_MAX} subscriptions already (SUBSCRIBERS_MAX)",
                self.config.node
            );
            return refuse(proto::error::BUSY, message, ctx);
        }
        // Serving as the master's last node state says (a restarted node
        // knows none before the master tells it: it may be copying).
        let me = self.config.node;
        let serving = self
            .live
            .states()
            .is_some_and(|s| s.serving.contains(me) && !self.live.is_down(me));
        if !serving {
            // Its fragments are not whole yet: what it captured could not
            // be resent. The API tries again.
            let message = format!(
                "node {} is starting (its fragments are not whole yet)",
                self.config.node
            );
            return refuse(proto::error::NOT_STARTED, message, ctx);
        }
        if self.incarnation.id == 0 {
            // Started, but no GCP has named the cluster's incarnation here
            // yet (the first one after a start is moments away): answered
            // once one has, as every answer names it.
            if self.awaiting_incarnation.len() >= SUBSCRIBERS_MAX {
                let message = format!(
                    "node {} has {SUBSCRIBERS_MAX} subscriptions waiting for its first global \
                     checkpoint (SUBSCRIBERS_MAX)",
                    self.config.node
                );
                return refuse(proto::error::BUSY, message, ctx);
            }
            self.awaiting_incarnation.push((api, sub_id, flags, tables));
            return;
        }
        tables.sort_unstable();
        tables.dedup();
        // A fresh subscription starts at every data node or fails at the
        // API (`Subscription::start`): each node up now serves it from
        // its beginning. A node subscribed again knows only itself, once
        // its start is known, and asks its group (`SubHolderReq`).
        let fresh = flags & sub_flags::RESUBSCRIBE == 0;
        let holders = if fresh {
            self.buckets
                .iter()
                .filter(|&&n| !self.live.is_down(n))
                .map(|&n| (n, 0))
                .collect()
        } else {
            Vec::new()
        };
        let mut sub = Subscriber {
            tables,
            flags,
            start: None,
            acked: 0,
            owners: vec![None; self.buckets.len()],
            owned: NodeBitmask::new(),
            holders,
            handbacks: Vec::new(),
            confirming: None,
            gone_since: None,
        };
        if fresh {
            sub.owners = self
                .buckets
                .iter()
                .map(|&b| self.owner_of(b, &sub, &NodeBitmask::new()))
                .collect();
        }
        self.own(&mut sub);
        self.subscribers.insert((api, sub_id), sub);
        self.queued.push((api, sub_id));
        self.capture_stale = true;
        self.start_round(ctx);
    }

    /// Asks every LDM instance to capture what the subscribers want, unless
    /// a round runs (the next starts when it ends).
    fn start_round(&mut self, ctx: &mut Context<'_>) {
        if self.round.is_some() || !self.capture_stale {
            return;
        }
        self.capture_stale = false;
        let tables = self.wanted_tables();
        if tables.is_empty() {
            // Nobody left: what is open is wanted by no one.
            self.buffer.drop_open();
        }
        for &ldm in &self.config.ldms {
            ctx.send(
                ldm,
                SignalBody::SubCaptureReq {
                    tables: tables.clone(),
                },
            );
        }
        self.round = Some(Round {
            waiting: self.config.ldms.len(),
            max_epoch: 0,
            starting: std::mem::take(&mut self.queued),
        });
        if self.config.ldms.is_empty() {
            self.end_round(ctx);
        }
    }

    /// An LDM instance captures copies besides the tables asked for
    /// (`followed`: (replaced table, copy) pairs, flattened): each copy
    /// joins the subscriptions of its replaced table. This is how a
    /// restarted node, which never saw the copy's `REPLACE` entry, learns
    /// it (docs/events.md, "A copying ALTER").
    fn add_copies(&mut self, followed: &[u32]) {
        debug_assert!(followed.len().is_multiple_of(2), "followed holds pairs");
        for pair in followed.chunks_exact(2) {
            let (replaced, copy) = (pair[0], pair[1]);
            let mut followers = 0;
            for sub in self.subscribers.values_mut() {
                followers += usize::from(follow_copy(&mut sub.tables, replaced, copy));
            }
            if followers > 0 {
                tracing::info!(
                    node = %self.config.node,
                    "change stream: table {copy} replaces table {replaced} for {followers} \
                     subscriptions (captured in its place)"
                );
            }
        }
    }

    fn on_capture_conf(&mut self, max_epoch: u64, ctx: &mut Context<'_>) {
        let Some(round) = self.round.as_mut() else {
            tracing::warn!(node = %self.config.node, "SubCaptureConf without a capture round");
            return;
        };
        round.waiting = round.waiting.saturating_sub(1);
        round.max_epoch = round.max_epoch.max(max_epoch);
        if round.waiting == 0 {
            self.end_round(ctx);
        }
    }

    /// Every LDM instance captures as asked: the round's subscribers start
    /// after the highest epoch any instance committed in before, and after
    /// the last epoch complete here.
    fn end_round(&mut self, ctx: &mut Context<'_>) {
        let round = self.round.take().expect("a round ends once");
        let start = round.max_epoch.max(self.buffer.complete());
        let mut confirm = Vec::new();
        for key in round.starting {
            // Stopped meanwhile: nothing to answer.
            let Some(sub) = self.subscribers.get_mut(&key) else {
                continue;
            };
            sub.start = Some(start);
            sub.acked = start;
            if sub.flags & sub_flags::RESUBSCRIBE == 0 {
                self.unannounced.push(key);
                continue;
            }
            let me = self.config.node;
            sub.holders.push((me, start));
            let placement = &self.config.placement;
            let group = placement
                .group_of(me)
                .map(|g| &placement.node_groups()[g as usize]);
            let mut asked = NodeBitmask::new();
            for &peer in group.into_iter().flatten() {
                if peer != me && !self.live.is_down(peer) {
                    asked.insert(peer);
                    ctx.send(
                        SubscriptionBlock::address(peer),
                        SignalBody::SubHolderReq {
                            api: key.0,
                            sub_id: key.1,
                            start_epoch: start,
                        },
                    );
                }
            }
            sub.confirming = Some((asked, false));
            confirm.push(key);
        }
        for key in confirm {
            self.confirm(key, ctx);
        }
        self.announce(ctx);
        self.start_round(ctx);
    }

    /// Answers each fresh subscriber whose start epoch is complete here:
    /// the start is the highest epoch an LDM instance committed in before
    /// it captured the tables, and that epoch may still be open when the
    /// round ends. A transaction that commits in it after the capture
    /// began is captured but never sent (the stream starts after it), so
    /// the answer waits until no transaction can commit in it any more
    /// (it is complete cluster-wide): whatever commits after the API
    /// hears `SubStartConf` from every node is in the stream.
    fn announce(&mut self, ctx: &mut Context<'_>) {
        let complete = self.buffer.complete();
        let subscribers = &self.subscribers;
        let incarnation = self.incarnation.id;
        self.unannounced.retain(|key| {
            let Some(start) = subscribers.get(key).and_then(|s| s.start) else {
                // Stopped meanwhile: nothing to answer.
                return false;
            };
            if start > complete {
                return true;
            }
            ctx.send(
                key.0,
                SignalBody::SubStartConf {
                    sub_id: key.1,
                    start_epoch: start,
                    incarnation,
                },
            );
            false
        });
    }

    /// Answers the API for `key`, subscribed again at this restarted
    /// node, once every node asked answered or failed: `SubStartConf`
    /// (then the buckets this node took over meanwhile, sent from the
    /// API's acknowledgement: the API took nothing from it before) if one
    /// of them holds it, else `SubLostRef` (naming the restart), and the
    /// subscription ends here.
    fn confirm(&mut self, key: SubKey, ctx: &mut Context<'_>) {
        let Some(sub) = self.subscribers.get_mut(&key) else {
            return;
        };
        let (Some((waiting, held)), Some(start)) = (sub.confirming, sub.start) else {
            return;
        };
        if !waiting.is_empty() {
            return;
        }
        sub.confirming = None;
        if held {
            ctx.send(
                key.0,
                SignalBody::SubStartConf {
                    sub_id: key.1,
                    start_epoch: start,
                    incarnation: self.incarnation.id,
                },
            );
            let owned = sub.owned;
            self.resend(key, owned, ctx);
            return;
        }
        tracing::warn!(
            node = %self.config.node,
            "subscription {} of {}: subscribed again after this node restarted, but no node of \
             its group kept it: its epochs since are lost",
            key.1,
            key.0,
        );
        let now = self.incarnation;
        let message = format!(
            "no node of data node {}'s node group kept subscription {} (the cluster restarted \
             since it began: incarnation {:#x}, restored to GCI {} of incarnation {:#x})",
            self.config.node, key.1, now.id, now.restart_gci, now.previous
        );
        ctx.send(
            key.0,
            SignalBody::SubLostRef {
                sub_id: key.1,
                incarnation: now.id,
                previous_incarnation: now.previous,
                restart_gci: now.restart_gci,
                message,
            },
        );
        self.subscribers.remove(&key);
        self.capture_stale = true;
        self.start_round(ctx);
        self.trim_kept();
    }

    /// A restarted node of this group serves `key` again, holding every
    /// epoch above `start`: noted, and answered with what this node knows.
    fn on_holder_req(&mut self, from: NodeId, key: SubKey, start: u64, ctx: &mut Context<'_>) {
        let held = self
            .subscribers
            .get(&key)
            .is_some_and(|s| s.start.is_some() && s.confirming.is_none());
        if !held {
            // Not served here, or only since this node restarted too and
            // not confirmed: not a holder (an empty list says so).
            ctx.send(
                SubscriptionBlock::address(from),
                SignalBody::SubHolderConf {
                    api: key.0,
                    sub_id: key.1,
                    nodes: Vec::new(),
                    starts: Vec::new(),
                },
            );
            return;
        }
        let sub = self.subscribers.get_mut(&key).expect("held");
        if self.live.is_down(from) {
            return;
        }
        match sub.holders.iter_mut().find(|(n, _)| *n == from) {
            Some(known) => known.1 = start,
            None => sub.holders.push((from, start)),
        }
        let (nodes, starts) = sub.holders.iter().copied().unzip();
        ctx.send(
            SubscriptionBlock::address(from),
            SignalBody::SubHolderConf {
                api: key.0,
                sub_id: key.1,
                nodes,
                starts,
            },
        );
        // Its own bucket, if this node sends it for it: handed back once
        // the restarted node holds every epoch after the last one sent
        // here (at once, unless this node's epochs lag its start).
        if sub.start.is_some() && sub.owned.contains(from) {
            sub.handbacks.retain(|&(n, _)| n != from);
            sub.handbacks.push((from, start));
            self.hand_back(key, ctx);
        }
    }

    /// Hands `key`'s buckets back to the restarted nodes waiting for them
    /// whose start this node's last complete epoch reached: this node has
    /// sent each such bucket up to that epoch, and the restarted node holds
    /// every epoch after it. (NDB: SUMA_HANDOVER, at a GCI agreed ahead;
    /// here the old owner picks the epoch and the new one resends above
    /// it, so nothing is sent by neither, and what both send the API
    /// takes once.)
    fn hand_back(&mut self, key: SubKey, ctx: &mut Context<'_>) {
        let me = self.config.node;
        let complete = self.buffer.complete();
        let Some(sub) = self.subscribers.get_mut(&key) else {
            return;
        };
        let mut handed = false;
        sub.handbacks.retain(|&(node, start)| {
            if complete < start {
                return true;
            }
            let Some(at) = self.buckets.iter().position(|&b| b == node) else {
                return false;
            };
            if sub.owners[at] != Some(me) {
                // Passed on meanwhile: not this node's to hand back.
                return false;
            }
            sub.owners[at] = Some(node);
            handed = true;
            self.stats.buckets_handed_back += 1;
            tracing::info!(
                node = %me,
                "subscription {} of {}: bucket {node} handed back to it after epoch {}/{}",
                key.1,
                key.0,
                signal::epoch::hi(complete),
                signal::epoch::lo(complete),
            );
            ctx.send(
                SubscriptionBlock::address(node),
                SignalBody::SubHandbackConf {
                    api: key.0,
                    sub_id: key.1,
                    bucket: node,
                    last_epoch: complete,
                },
            );
            false
        });
        if handed {
            let mut sub = self.subscribers.remove(&key).expect("got above");
            self.own(&mut sub);
            self.subscribers.insert(key, sub);
        }
    }

    /// A node handed this node's own bucket back: this node sends it from
    /// the epoch after `last_epoch` on, and resends what it has of those
    /// complete already.
    fn on_handback_conf(
        &mut self,
        key: SubKey,
        bucket: NodeId,
        last_epoch: u64,
        ctx: &mut Context<'_>,
    ) {
        let me = self.config.node;
        let Some(at) = self.buckets.iter().position(|&b| b == bucket) else {
            return;
        };
        let Some(sub) = self.subscribers.get_mut(&key) else {
            return;
        };
        if bucket != me || sub.start.is_none_or(|start| start > last_epoch) {
            tracing::warn!(
                node = %me,
                "subscription {} of {}: bucket {bucket} handed back after epoch {last_epoch:#x}, \
                 which this node cannot send from: ignored",
                key.1,
                key.0,
            );
            return;
        }
        if sub.owned.contains(bucket) {
            // Taken over already (the old owner failed meanwhile).
            return;
        }
        self.stats.buckets_taken_back += 1;
        sub.owners[at] = Some(me);
        let mut sub = self.subscribers.remove(&key).expect("got above");
        self.own(&mut sub);
        self.subscribers.insert(key, sub);
        self.resend_above(key, NodeBitmask::from_iter([bucket]), last_epoch, ctx);
    }

    /// What a node of this group knows of `key`'s holders: added, except
    /// nodes down here (it may have written before it heard of a failure
    /// this node has seen).
    fn on_holder_conf(
        &mut self,
        from: NodeId,
        key: SubKey,
        nodes: &[NodeId],
        starts: &[u64],
        ctx: &mut Context<'_>,
    ) {
        let me = self.config.node;
        let Some(sub) = self.subscribers.get_mut(&key) else {
            return;
        };
        if let Some((waiting, held)) = sub.confirming.as_mut() {
            if waiting.contains(from) {
                waiting.remove(from);
                // A holder lists itself; an empty list: not one.
                *held |= !nodes.is_empty();
                self.confirm(key, ctx);
            }
        }
        let Some(sub) = self.subscribers.get_mut(&key) else {
            return;
        };
        for (&n, &start) in nodes.iter().zip(starts) {
            if n == me || self.live.is_down(n) || sub.holders.iter().any(|&(h, _)| h == n) {
                continue;
            }
            sub.holders.push((n, start));
        }
    }

    /// API node `node` is gone: its subscriptions end unless it comes back
    /// within `API_GONE_GRACE` (a connection that broke and came back
    /// subscribes again and loses nothing).
    fn on_api_gone(&mut self, node: NodeId, ctx: &mut Context<'_>) {
        let now = ctx.now();
        let mut any = false;
        for ((api, _), sub) in self.subscribers.iter_mut() {
            if api.node == node && sub.gone_since.is_none() {
                sub.gone_since = Some(now);
                any = true;
            }
        }
        if any {
            self.arm_gone_timer(ctx);
        }
    }

    fn arm_gone_timer(&mut self, ctx: &mut Context<'_>) {
        if self.gone_timer_armed {
            return;
        }
        let now = ctx.now();
        let next = self
            .subscribers
            .values()
            .filter_map(|s| s.gone_since)
            .min()
            .map(|since| (since + API_GONE_GRACE).saturating_since(now));
        if let Some(after) = next {
            self.gone_timer_armed = true;
            ctx.set_timer(after, TIMER_GONE);
        }
    }

    /// Ends the subscriptions whose API node stayed gone `API_GONE_GRACE`.
    fn on_gone_timer(&mut self, ctx: &mut Context<'_>) {
        self.gone_timer_armed = false;
        let now = ctx.now();
        let ended: Vec<SubKey> = self
            .subscribers
            .iter()
            .filter(|(_, s)| {
                s.gone_since
                    .is_some_and(|since| since + API_GONE_GRACE <= now)
            })
            .map(|(key, _)| *key)
            .collect();
        for key in ended {
            self.cut_off(key, "API_GONE_GRACE", ctx);
        }
        self.arm_gone_timer(ctx);
    }

    /// The cluster incarnation, from one of this node's TCs (each tells
    /// it once; it never changes while the node runs: a new one begins
    /// only with a system restart, which starts every block anew). The
    /// requests that waited for it are answered.
    fn on_incarnation(&mut self, told: Incarnation, ctx: &mut Context<'_>) {
        if self.incarnation.id != 0 {
            assert_eq!(
                self.incarnation, told,
                "{}: the cluster incarnation changed while the node ran",
                self.config.node
            );
            return;
        }
        assert_ne!(
            told.id, 0,
            "{}: SubIncarnationRep names none",
            self.config.node
        );
        self.incarnation = told;
        for (api, sub_id, flags, tables) in std::mem::take(&mut self.awaiting_incarnation) {
            self.on_start_req(api, sub_id, flags, tables, ctx);
        }
    }

    fn on_stop_req(&mut self, api: BlockRef, sub_id: u32, ctx: &mut Context<'_>) {
        self.awaiting_incarnation
            .retain(|&(a, id, ..)| (a, id) != (api, sub_id));
        if self.subscribers.remove(&(api, sub_id)).is_some() {
            self.capture_stale = true;
            self.start_round(ctx);
            self.trim_kept();
        }
    }

    /// A schema entry from one LDM instance (see
    /// `ldm::capture::Capture::schema_entry`). Once every instance of the
    /// node sent it, every change this node captured under the old
    /// definition is here, in epochs up to the highest epoch of any change
    /// handed in; every change handed in from now on is of the new one
    /// (or none: a drop). So the entry goes at the end of what that epoch
    /// holds so far, or, when it is complete already, first in the next
    /// epoch to complete. Each node files it by what it captured itself;
    /// it holds every replica of its buckets, so each bucket's part has
    /// the entry after the bucket's old changes and before its new ones.
    fn on_schema_entry(&mut self, changes: &[u8]) {
        let Some(Ok(entry)) = sub_change::entries(changes).next() else {
            tracing::warn!(node = %self.config.node, "a malformed schema entry from an LDM: dropped");
            return;
        };
        let key = (entry.kind, entry.table, entry.version);
        let reports = self.schema_reports.entry(key).or_insert(0);
        *reports += 1;
        let (reports, all) = (*reports, *reports >= self.config.ldms.len());
        if all {
            self.schema_reports.remove(&key);
        }
        if entry.kind == sub_change::REPLACE {
            // Filed at the first instance's word: each instance sends it
            // before any change of the copy, so this comes before every
            // one of them, whichever instance it is from.
            if reports == 1 {
                self.file_replace(&entry, changes);
            }
            return;
        }
        if !all {
            return;
        }
        tracing::info!(
            node = %self.config.node,
            "change stream: table {} {} (version {}) filed after epoch {}/{}",
            entry.table,
            if entry.kind == sub_change::DROP { "dropped" } else { "altered" },
            entry.version,
            signal::epoch::hi(self.max_data_epoch),
            signal::epoch::lo(self.max_data_epoch),
        );
        self.file(changes);
    }

    /// Files a `REPLACE` entry (`entry`, encoded as `changes`): a copying
    /// ALTER's copy took the name of a table some subscribers have, and
    /// they have the copy from now on, from the epoch the entry is filed
    /// in (where [`SubscriptionBlock::on_schema_entry`] files an alter's).
    fn file_replace(&mut self, entry: &sub_change::Entry<'_>, changes: &[u8]) {
        let Some(replaced) = sub_change::replaced_table(entry) else {
            tracing::warn!(node = %self.config.node, "a REPLACE entry without the replaced table: dropped");
            return;
        };
        let copy = entry.table;
        let mut followers = 0;
        for sub in self.subscribers.values_mut() {
            followers += usize::from(follow_copy(&mut sub.tables, replaced, copy));
        }
        tracing::info!(
            node = %self.config.node,
            "change stream: table {copy} (version {}) replaces table {replaced} for {followers} \
             subscriptions, filed after epoch {}/{}",
            entry.version,
            signal::epoch::hi(self.max_data_epoch),
            signal::epoch::lo(self.max_data_epoch),
        );
        self.file(changes);
    }

    /// Files a schema entry at the end of what the highest epoch of any
    /// change handed in holds so far, or first in the next epoch to
    /// complete if that one is complete.
    fn file(&mut self, changes: &[u8]) {
        if self.max_data_epoch <= self.buffer.complete()
            || !self.buffer.add(self.max_data_epoch, 1, changes)
        {
            self.buffer.add_to_next(1, changes);
        }
    }

    fn on_table_data(&mut self, epoch: u64, count: u32, changes: &[u8]) {
        if epoch == sub_change::SCHEMA_EPOCH {
            return self.on_schema_entry(changes);
        }
        self.max_data_epoch = self.max_data_epoch.max(epoch);
        self.stats.changes_captured += u64::from(count);
        if !self.buffer.add(epoch, count, changes) {
            tracing::warn!(
                node = %self.config.node,
                "{count} row changes of epoch {}/{} came after it was complete here: dropped",
                signal::epoch::hi(epoch),
                signal::epoch::lo(epoch)
            );
        }
    }

    fn on_mark(&mut self, sender: BlockRef, epoch: u64, ctx: &mut Context<'_>) {
        let Some(instance) = self.config.ldms.iter().position(|&l| l == sender) else {
            tracing::warn!(node = %self.config.node, "SubGcpCompleteRep from {sender}, not a local LDM");
            return;
        };
        let done = self.buffer.mark(instance, epoch);
        if !self.unannounced.is_empty() && !done.is_empty() {
            // Before the epochs above their start.
            self.announce(ctx);
        }
        for data in &done {
            self.stats.epochs_completed += 1;
            self.send_epoch(data, ctx);
        }
        if !done.is_empty() {
            let waiting: Vec<SubKey> = self
                .subscribers
                .iter()
                .filter(|(_, s)| !s.handbacks.is_empty())
                .map(|(&k, _)| k)
                .collect();
            for key in waiting {
                self.hand_back(key, ctx);
            }
            self.cut_off_laggards(ctx);
            self.trim_kept();
        }
    }

    /// Sends `data` to every started subscriber it is past the start of:
    /// the buckets this node owns for it.
    fn send_epoch(&mut self, data: &EpochData, ctx: &mut Context<'_>) {
        for (&key, sub) in &self.subscribers {
            if sub.start.is_none_or(|s| data.epoch <= s) {
                continue;
            }
            send_buckets(
                key,
                sub,
                sub.owned,
                data,
                &self.config.placement,
                &mut self.stats,
                ctx,
            );
        }
    }

    fn on_ack(&mut self, api: BlockRef, sub_id: u32, epoch: u64) {
        if let Some(sub) = self.subscribers.get_mut(&(api, sub_id)) {
            // An API that acknowledges is not gone (its connection is back).
            sub.gone_since = None;
            // Not past what was sent: an API cannot acknowledge the future.
            sub.acked = sub.acked.max(epoch.min(self.buffer.complete()));
            self.trim_kept();
        }
    }

    /// Drops the kept epochs every started subscriber acknowledged.
    fn trim_kept(&mut self) {
        let upto = self
            .subscribers
            .values()
            .filter(|s| s.start.is_some())
            .map(|s| s.acked)
            .min()
            .unwrap_or(u64::MAX);
        self.buffer.acknowledged(upto);
    }

    /// Cuts off each subscriber more than `MaxBufferedEpochs` behind, then,
    /// while more than `MaxBufferedEpochBytes` are held, the one furthest
    /// behind.
    fn cut_off_laggards(&mut self, ctx: &mut Context<'_>) {
        let max_epochs = self.config.max_buffered_epochs as usize;
        let behind: Vec<SubKey> = self
            .subscribers
            .iter()
            .filter(|(_, s)| s.start.is_some() && self.buffer.kept_above(s.acked) > max_epochs)
            .map(|(&k, _)| k)
            .collect();
        for key in behind {
            self.cut_off(key, "MaxBufferedEpochs", ctx);
        }
        while self.buffer.bytes() > self.config.max_buffered_epoch_bytes {
            let furthest = self
                .subscribers
                .iter()
                .filter(|(_, s)| s.start.is_some())
                .min_by_key(|(_, s)| s.acked)
                .map(|(&k, _)| k);
            let Some(key) = furthest else {
                break;
            };
            self.cut_off(key, "MaxBufferedEpochBytes", ctx);
            self.trim_kept();
        }
    }

    /// Ends `key`'s subscription with a gap: the epochs from the first it
    /// did not acknowledge to the last complete here.
    fn cut_off(&mut self, key: SubKey, limit: &str, ctx: &mut Context<'_>) {
        let Some(sub) = self.subscribers.remove(&key) else {
            return;
        };
        let complete = self.buffer.complete();
        let from = self
            .buffer
            .kept()
            .iter()
            .map(|k| k.epoch)
            .find(|&e| e > sub.acked)
            .unwrap_or(complete);
        if sub.gone_since.is_some() {
            tracing::info!(
                node = %self.config.node,
                "subscription {} of {}: its API node stayed gone {} s: ended with a gap",
                key.1,
                key.0,
                API_GONE_GRACE.as_secs()
            );
            self.stats.gone_dropped += 1;
        } else {
            tracing::warn!(
                node = %self.config.node,
                "subscription {} of {} is {} epochs behind ({limit} exceeded): cut off with a gap",
                key.1,
                key.0,
                self.buffer.kept_above(sub.acked)
            );
        }
        self.stats.gaps += 1;
        ctx.send(
            key.0,
            SignalBody::SubGapRep {
                sub_id: key.1,
                from,
                to: complete,
            },
        );
        // Told again when it subscribes again (the API may not have heard
        // it: gone, or its connection broke).
        if self.ended.len() >= ENDED_REMEMBERED_MAX {
            self.ended.pop_first();
        }
        self.ended.insert(key, (from, complete));
        self.capture_stale = true;
        self.start_round(ctx);
        self.trim_kept();
    }
}

impl Block for SubscriptionBlock {
    fn check_invariants(&self) {
        assert!(
            self.subscribers.len() <= SUBSCRIBERS_MAX,
            "more subscribers than SUBSCRIBERS_MAX"
        );
        for sub in self.subscribers.values() {
            assert_eq!(sub.owners.len(), self.buckets.len(), "an owner per bucket");
            if sub.start.is_some() {
                assert!(
                    sub.holders.iter().any(|&(n, _)| n == self.config.node),
                    "a started subscriber is served here: this node is one of its holders"
                );
            }
            for &(n, _) in &sub.holders {
                assert!(!self.live.is_down(n), "holder {n} is not down");
            }
            // What it sends is what the owners say: one owner per bucket,
            // so no two nodes that agree on the owners send one bucket.
            for (&bucket, owner) in self.buckets.iter().zip(&sub.owners) {
                assert_eq!(
                    sub.owned.contains(bucket),
                    *owner == Some(self.config.node),
                    "bucket {bucket}: owned here as the owners say"
                );
            }
        }
    }

    fn execute(&mut self, signal: Signal, ctx: &mut Context<'_>) {
        let sender = signal.sender;
        match signal.body {
            SignalBody::SubStartReq {
                sub_id,
                flags,
                tables,
            } => self.on_start_req(sender, sub_id, flags, tables, ctx),
            SignalBody::SubStopReq { sub_id } => self.on_stop_req(sender, sub_id, ctx),
            SignalBody::SubGcpCompleteAck { sub_id, epoch } => self.on_ack(sender, sub_id, epoch),
            SignalBody::SubCaptureConf {
                max_epoch,
                followed,
            } => {
                self.add_copies(&followed);
                self.on_capture_conf(max_epoch, ctx);
            }
            SignalBody::SubTableData {
                epoch,
                count,
                changes,
            } => {
                self.on_table_data(epoch, count, &changes);
                ctx.recycle(changes);
            }
            SignalBody::SubGcpCompleteRep { epoch } => self.on_mark(sender, epoch, ctx),
            SignalBody::SubIncarnationRep {
                incarnation,
                previous_incarnation,
                restart_gci,
            } if sender.node == self.config.node => self.on_incarnation(
                Incarnation {
                    id: incarnation,
                    previous: previous_incarnation,
                    restart_gci,
                },
                ctx,
            ),
            SignalBody::MembershipViewRep { view } => self.on_view(&view, ctx),
            SignalBody::SubHolderReq {
                api,
                sub_id,
                start_epoch,
            } if sender.block == BlockNumber::SUBSCRIPTION => {
                self.on_holder_req(sender.node, (api, sub_id), start_epoch, ctx)
            }
            SignalBody::SubHolderConf {
                api,
                sub_id,
                nodes,
                starts,
            } if sender.block == BlockNumber::SUBSCRIPTION => {
                self.on_holder_conf(sender.node, (api, sub_id), &nodes, &starts, ctx)
            }
            SignalBody::SubHandbackConf {
                api,
                sub_id,
                bucket,
                last_epoch,
            } if sender.block == BlockNumber::SUBSCRIPTION => {
                self.on_handback_conf((api, sub_id), bucket, last_epoch, ctx)
            }
            SignalBody::ApiFailRep { node } if sender.node == self.config.node => {
                self.on_api_gone(node, ctx)
            }
            SignalBody::Timeout {
                timer_id: TIMER_GONE,
            } => self.on_gone_timer(ctx),
            body @ SignalBody::NodeStateReq { .. } => {
                let states = NodeStates::of(&body).expect("matched");
                self.live.on_states(states);
            }
            other => {
                tracing::warn!(
                    node = %self.config.node,
                    "subscription block: unexpected signal {} from {sender}",
                    other.name()
                );
            }
        }
    }
}

/// Adds `copy` to `tables` (sorted) if it has `replaced` and not `copy`;
/// whether it did.
fn follow_copy(tables: &mut Vec<u32>, replaced: u32, copy: u32) -> bool {
    if tables.binary_search(&replaced).is_err() {
        return false;
    }
    match tables.binary_search(&copy) {
        Ok(_) => false,
        Err(at) => {
            tables.insert(at, copy);
            true
        }
    }
}

/// Sends `sub` (named `key`) the changes of `data` of its tables in the
/// buckets `buckets`: per bucket, parts of at most `SUB_PART_BYTES_MAX`,
/// the last one `complete` (alone when the bucket has no change).
fn send_buckets(
    key: SubKey,
    sub: &Subscriber,
    buckets: NodeBitmask,
    data: &EpochData,
    placement: &Placement,
    stats: &mut SubscriptionStats,
    ctx: &mut Context<'_>,
) {
    let (api, sub_id) = key;
    let send = |bucket, changes, count, complete, ctx: &mut Context<'_>| {
        ctx.send(
            api,
            SignalBody::SubEpochData {
                sub_id,
                epoch: data.epoch,
                bucket,
                count,
                changes,
                complete,
            },
        );
    };
    // (bucket, part, count): a few buckets per node, so a short list.
    let mut parts: Vec<(NodeId, Vec<u8>, u32)> =
        buckets.iter().map(|b| (b, Vec::new(), 0)).collect();
    if parts.is_empty() {
        return;
    }
    // Each part sized for its share of the epoch at once: grown step by
    // step, its copies were a sixth of what a subscriber cost the data
    // node per update (bench/instructions.sh with SUBSCRIBE=1).
    let share = (data.changes.len() / parts.len()).min(SUB_PART_BYTES_MAX);
    for (_, part, _) in &mut parts {
        part.reserve(share);
    }
    for entry in sub_change::entries(&data.changes) {
        let Ok(entry) = entry else {
            // Made by this node's LDMs: never malformed.
            debug_assert!(false, "a malformed captured entry");
            break;
        };
        if sub.tables.binary_search(&entry.table).is_err() {
            continue;
        }
        if sub_change::is_schema(entry.kind) {
            // Every bucket's: its changes before it are of the old
            // definition, after it of the new.
            for (_, part, count) in &mut parts {
                sub_change::push(part, &entry);
                *count += 1;
            }
            continue;
        }
        let bucket = placement.home(entry.partition).primary();
        let Some((_, part, count)) = parts.iter_mut().find(|(b, ..)| *b == bucket) else {
            continue;
        };
        let size = sub_change::size(&entry);
        if *count > 0 && part.len() + size > SUB_PART_BYTES_MAX {
            let full = std::mem::replace(part, Vec::with_capacity(SUB_PART_BYTES_MAX));
            send(bucket, full, *count, false, ctx);
            *count = 0;
        }
        sub_change::push(part, &entry);
        *count += 1;
        stats.changes_sent += 1;
    }
    for (bucket, changes, count) in parts {
        send(bucket, changes, count, true, ctx);
    }
}
