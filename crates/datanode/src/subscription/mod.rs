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
//! complete here ([`buffer::EpochBuffer`]) and goes to each subscriber
//! whose start it is past: its changes of the subscriber's tables of the
//! partitions this node sends (this node is their primary replica), in
//! parts, the last one `complete` (an epoch without changes is that part
//! alone).
//!
//! Every replica captures (the flags of an entry say whether this node
//! sends it), and complete epochs stay here until every subscriber
//! acknowledged them (`SubGcpCompleteAck`): what part 2's resend after a
//! node failure needs. A subscriber more than `MaxBufferedEpochs` epochs
//! behind, or the one furthest behind while the block holds more than
//! `MaxBufferedEpochBytes`, is cut off: it gets `SubGapRep` naming the
//! epochs it loses, and its subscription ends. Writes never wait for a
//! subscriber.

pub mod buffer;

use std::collections::BTreeMap;

use kernel::{Block, Context};
use signal::{sub_change, BlockNumber, BlockRef, NodeId, Signal, SignalBody};

use buffer::{EpochBuffer, EpochData};

/// Subscriptions one data node serves at once (all API nodes together).
pub const SUBSCRIBERS_MAX: usize = 256;
/// Tables one subscription names at most.
pub const SUB_TABLES_MAX: usize = 1_024;
/// Bytes of row changes in one `SubEpochData` part at most (a row larger
/// than this goes alone in its part).
pub const SUB_PART_BYTES_MAX: usize = 64 << 10;

/// What the subscription block of one node needs to know.
#[derive(Clone, Debug)]
pub struct SubscriptionConfig {
    pub node: NodeId,
    /// The node's LDM instances, which capture and pass the marks on.
    pub ldms: Vec<BlockRef>,
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
    /// The tables captured differ from what the subscribers want: another
    /// round is due once the current one ends.
    capture_stale: bool,
    stats: SubscriptionStats,
}

impl SubscriptionBlock {
    pub fn new(config: SubscriptionConfig) -> SubscriptionBlock {
        SubscriptionBlock {
            buffer: EpochBuffer::new(config.ldms.len()),
            config,
            subscribers: BTreeMap::new(),
            round: None,
            queued: Vec::new(),
            capture_stale: false,
            stats: SubscriptionStats::default(),
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

    /// The last epoch complete on this node.
    pub fn complete_epoch(&self) -> u64 {
        self.buffer.complete()
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
        if self.subscribers.contains_key(&(api, sub_id)) {
            let message = format!("subscription {sub_id} of {api} exists");
            return refuse(proto::error::ALREADY_EXISTS, message, ctx);
        }
        if self.subscribers.len() >= SUBSCRIBERS_MAX {
            let message = format!(
                "node {} serves {SUBSCRIBERS_MAX} subscriptions already (SUBSCRIBERS_MAX)",
                self.config.node
            );
            return refuse(proto::error::BUSY, message, ctx);
        }
        tables.sort_unstable();
        tables.dedup();
        self.subscribers.insert(
            (api, sub_id),
            Subscriber {
                tables,
                flags,
                start: None,
                acked: 0,
            },
        );
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
        for key in round.starting {
            // Stopped meanwhile: nothing to answer.
            let Some(sub) = self.subscribers.get_mut(&key) else {
                continue;
            };
            sub.start = Some(start);
            sub.acked = start;
            ctx.send(
                key.0,
                SignalBody::SubStartConf {
                    sub_id: key.1,
                    start_epoch: start,
                },
            );
        }
        self.start_round(ctx);
    }

    fn on_stop_req(&mut self, api: BlockRef, sub_id: u32, ctx: &mut Context<'_>) {
        if self.subscribers.remove(&(api, sub_id)).is_some() {
            self.capture_stale = true;
            self.start_round(ctx);
            self.trim_kept();
        }
    }

    fn on_table_data(&mut self, epoch: u64, count: u32, changes: &[u8]) {
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
        for data in &done {
            self.stats.epochs_completed += 1;
            self.send_epoch(data, ctx);
        }
        if !done.is_empty() {
            self.cut_off_laggards(ctx);
            self.trim_kept();
        }
    }

    /// Sends `data` to every started subscriber it is past the start of.
    fn send_epoch(&mut self, data: &EpochData, ctx: &mut Context<'_>) {
        for (&(api, sub_id), sub) in &self.subscribers {
            if sub.start.is_none_or(|s| data.epoch <= s) {
                continue;
            }
            let mut part = Vec::new();
            let mut count = 0u32;
            for entry in sub_change::entries(&data.changes) {
                let Ok(entry) = entry else {
                    // Made by this node's LDMs: never malformed.
                    debug_assert!(false, "a malformed captured entry");
                    break;
                };
                if entry.flags & sub_change::SENDER == 0
                    || sub.tables.binary_search(&entry.table).is_err()
                {
                    continue;
                }
                let size = sub_change::size(&entry);
                if count > 0 && part.len() + size > SUB_PART_BYTES_MAX {
                    ctx.send(
                        api,
                        SignalBody::SubEpochData {
                            sub_id,
                            epoch: data.epoch,
                            count,
                            changes: std::mem::take(&mut part),
                            complete: false,
                        },
                    );
                    count = 0;
                }
                sub_change::push(&mut part, &entry);
                count += 1;
                self.stats.changes_sent += 1;
            }
            ctx.send(
                api,
                SignalBody::SubEpochData {
                    sub_id,
                    epoch: data.epoch,
                    count,
                    changes: part,
                    complete: true,
                },
            );
        }
    }

    fn on_ack(&mut self, api: BlockRef, sub_id: u32, epoch: u64) {
        if let Some(sub) = self.subscribers.get_mut(&(api, sub_id)) {
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
        tracing::warn!(
            node = %self.config.node,
            "subscription {} of {} is {} epochs behind ({limit} exceeded): cut off with a gap",
            key.1,
            key.0,
            self.buffer.kept_above(sub.acked)
        );
        self.stats.gaps += 1;
        ctx.send(
            key.0,
            SignalBody::SubGapRep {
                sub_id: key.1,
                from,
                to: complete,
            },
        );
        self.capture_stale = true;
        self.start_round(ctx);
    }
}

impl Block for SubscriptionBlock {
    fn check_invariants(&self) {
        assert!(
            self.subscribers.len() <= SUBSCRIBERS_MAX,
            "more subscribers than SUBSCRIBERS_MAX"
        );
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
            SignalBody::SubCaptureConf { max_epoch } => self.on_capture_conf(max_epoch, ctx),
            SignalBody::SubTableData {
                epoch,
                count,
                changes,
            } => {
                self.on_table_data(epoch, count, &changes);
                ctx.recycle(changes);
            }
            SignalBody::SubGcpCompleteRep { epoch } => self.on_mark(sender, epoch, ctx),
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
