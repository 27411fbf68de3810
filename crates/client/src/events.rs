//! The change stream on the API side (NDB API: event operations and the
//! event buffer; docs/events.md).
//!
//! [`Session::subscribe`] subscribes at the subscription block of every
//! data node (`SubStartReq`); each answers with the epoch after which it
//! sends every epoch whole, and the subscription starts after the highest
//! of them. Each node sends, per complete epoch, the changes of the
//! partitions it is the primary of, the last part marked complete; an
//! epoch is complete here once every node's last part came, and only then
//! is it handed out, so epochs come out in ascending order, each once,
//! with the changes of one row in commit order. Every complete part is
//! acknowledged to its node (`SubGcpCompleteAck`) when it enters this
//! subscription's buffer, which is what lets the node drop it.
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
use ::schema::Value;
use signal::{sub_change, sub_flags, BlockNumber, BlockRef, NodeId, Signal, SignalBody};

use crate::cluster::{encode_frames, Cluster, Shared};
use crate::receiver::{self, Event as MailEvent, Mailbox};
use crate::{Epoch, Error, Result, Session, Table};

/// `max_alloc` when none is given: 64 MiB of changes.
pub const MAX_ALLOC_DEFAULT_BYTES: usize = 64 << 20;

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
    /// Bytes of changes the subscription buffers at most (NDB's event
    /// buffer `max_alloc`); beyond, a gap.
    pub max_alloc: usize,
}

impl Default for SubscribeOptions {
    fn default() -> Self {
        SubscribeOptions {
            images: Images::Full,
            columns: None,
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
    pub table: String,
    /// Insert, update or delete.
    pub kind: ChangeKind,
    /// The row before (updates and deletes), as (column, value) in table
    /// order.
    pub before: Option<Vec<(String, Value)>>,
    /// The row after (inserts and updates).
    pub after: Option<Vec<(String, Value)>>,
}

/// The changes of one epoch, complete.
#[derive(Clone, Debug, PartialEq)]
pub struct EpochChanges {
    /// The epoch.
    pub epoch: Epoch,
    /// Its changes of the subscribed tables: one row's in commit order.
    pub changes: Vec<RowChange>,
}

/// What a subscription hands out.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// One epoch, complete (possibly with no change).
    Epoch(EpochChanges),
    /// The epochs `from` to `to` (both included) are lost to this
    /// subscription: its buffer or a data node's overflowed. After a data
    /// node's gap, or a data node's failure (whose `to` is then
    /// `Epoch::from_u64(u64::MAX)`), the subscription has ended.
    Gap {
        /// The first epoch lost.
        from: Epoch,
        /// The last epoch lost.
        to: Epoch,
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
    /// Whether the subscription has ended (a data node's gap or failure).
    pub ended: bool,
}

/// An epoch not yet complete from every node.
#[derive(Debug, Default)]
struct Partial {
    changes: Vec<RowChange>,
    bytes: usize,
    /// Nodes whose last part came.
    complete_from: Vec<NodeId>,
}

/// A subscribed table and how its rows decode.
struct Subscribed {
    table: Arc<Table>,
    layout: RowLayout,
    /// Column positions shown (the projection, hidden `$` columns left out).
    shown: Vec<usize>,
}

/// A subscription (see the module documentation). Dropping it ends it at
/// every data node.
pub struct Subscription {
    cluster: Cluster,
    mailbox: Arc<Mailbox>,
    sub_id: u32,
    options: SubscribeOptions,
    tables: HashMap<u32, Subscribed>,
    /// The data nodes subscribed at: (link, node).
    nodes: Vec<(usize, NodeId)>,
    /// Each link's connection generation when the subscription began: a
    /// close of that connection or a later one ends it.
    generations: Vec<u64>,
    /// Epochs at or below it are not this subscription's.
    start: u64,
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
    scratch: Vec<MailEvent>,
    send_buffer: Vec<u8>,
}

impl Session {
    /// Subscribes to the committed changes of `tables` (dictionary names:
    /// `db/def/t` for SQL's `db.t`), from the next epoch that is whole on
    /// every data node on (docs/events.md). Every data node must be
    /// started (a subscription does not yet survive a data node failure:
    /// the failure ends it with a gap).
    ///
    /// # Errors
    /// An unknown table or column (before anything is sent); a data node
    /// not started (711) or that refuses (its code); no answer within the
    /// request timeout (4012).
    pub fn subscribe(&self, tables: &[&str], options: SubscribeOptions) -> Result<Subscription> {
        if tables.is_empty() {
            return Err(Error::usage("subscribe: name at least one table"));
        }
        let mut subscribed = HashMap::new();
        for &name in tables {
            let table = self.table(name)?;
            let def = table.def();
            let shown: Vec<usize> = match &options.columns {
                None => (0..def.columns.len())
                    .filter(|&c| !def.columns[c].name.starts_with('$'))
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
            let layout = RowLayout::new(def);
            subscribed.insert(
                table.id(),
                Subscribed {
                    table,
                    layout,
                    shown,
                },
            );
        }
        let shared = self.shared();
        let nodes: Vec<(usize, NodeId)> = shared
            .links
            .iter()
            .enumerate()
            .map(|(i, l)| (i, l.node))
            .collect();
        if let Some(&(_, down)) = nodes.iter().find(|&&(i, _)| !shared.links[i].is_live()) {
            return Err(Error::with_context(
                proto::error::NOT_STARTED,
                format!(
                    "subscribe: data node {down} is not started; a subscription needs every \
                     data node (it does not yet survive a data node failure)"
                ),
            ));
        }
        let generations = nodes
            .iter()
            .map(|&(i, _)| shared.links[i].generation.load(Ordering::Acquire))
            .collect();
        let mailbox = shared.register_session()?;
        let mut sub = Subscription {
            cluster: self.cluster.clone(),
            sub_id: u32::from(mailbox.instance),
            mailbox,
            options,
            tables: subscribed,
            nodes,
            generations,
            start: 0,
            partial: BTreeMap::new(),
            ready: VecDeque::new(),
            bytes_used: 0,
            last_epoch: 0,
            gaps: 0,
            ended: false,
            discarding: None,
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

    /// Subscribes at every node and waits for every answer.
    fn start(&mut self) -> Result<()> {
        let mut tables: Vec<u32> = self.tables.keys().copied().collect();
        tables.sort_unstable();
        let flags = match self.options.images {
            Images::Full => sub_flags::FULL_IMAGES,
            Images::Minimal => 0,
        };
        for (link, node) in self.nodes.clone() {
            let body = SignalBody::SubStartReq {
                sub_id: self.sub_id,
                flags,
                tables: tables.clone(),
            };
            self.send(link, node, body)?;
        }
        let deadline = Instant::now() + self.shared().options.request_timeout;
        let mut answered: Vec<NodeId> = Vec::new();
        // Epochs sent before every node answered wait for the start.
        let mut early: Vec<(NodeId, SignalBody)> = Vec::new();
        while answered.len() < self.nodes.len() {
            self.mailbox.drain(&mut self.scratch);
            for event in std::mem::take(&mut self.scratch) {
                let MailEvent::Signal(signal) = event else {
                    continue;
                };
                let node = signal.sender.node;
                match signal.body {
                    SignalBody::SubStartConf { start_epoch, .. } => {
                        self.start = self.start.max(start_epoch);
                        answered.push(node);
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
            if answered.len() == self.nodes.len() {
                break;
            }
            if now >= deadline {
                return Err(Error::with_context(
                    proto::error::REQUEST_TIMEOUT,
                    format!(
                        "subscribe: {} of {} data nodes answered in time",
                        answered.len(),
                        self.nodes.len()
                    ),
                ));
            }
            receiver::wait(self.shared(), &self.mailbox, deadline - now);
        }
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
            receiver::wait(self.shared(), &self.mailbox, deadline - now);
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
        }
        Some(event)
    }

    /// Takes what the mailbox holds.
    fn pump(&mut self) {
        self.mailbox.drain(&mut self.scratch);
        let events = std::mem::take(&mut self.scratch);
        for event in events {
            match event {
                MailEvent::Signal(signal) => self.on_signal(signal.sender.node, signal.body),
                MailEvent::NodeDown(node, generation) => self.on_node_down(node, generation),
            }
        }
    }

    fn on_node_down(&mut self, node: NodeId, generation: u64) {
        let Some(at) = self.nodes.iter().position(|&(_, n)| n == node) else {
            return;
        };
        // A close of a connection older than the subscription is not ours;
        // any later one lost what the node sent meanwhile.
        if self.ended || generation < self.generations[at] {
            return;
        }
        // Part 1: no resend after a failure (docs/events.md).
        let from = self
            .partial
            .keys()
            .next()
            .copied()
            .unwrap_or(self.last_seen() + 1);
        self.end_with_gap(from, u64::MAX);
    }

    /// The highest epoch handed out or ready.
    fn last_seen(&self) -> u64 {
        self.ready
            .back()
            .map(|(e, _)| match e {
                Event::Epoch(e) => e.epoch.get(),
                Event::Gap { to, .. } => to.get(),
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
                changes,
                complete,
                ..
            } if sub_id == self.sub_id => self.on_epoch_data(node, epoch, &changes, complete),
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
            other => tracing::debug!(
                "subscription {}: {} from node {node} ignored",
                self.sub_id,
                other.name()
            ),
        }
    }

    fn on_epoch_data(&mut self, node: NodeId, epoch: u64, changes: &[u8], complete: bool) {
        if complete {
            if let Some(&(link, _)) = self.nodes.iter().find(|&&(_, n)| n == node) {
                let ack = SignalBody::SubGcpCompleteAck {
                    sub_id: self.sub_id,
                    epoch,
                };
                if let Err(error) = self.send(link, node, ack) {
                    tracing::debug!("subscription {}: ack to {node}: {error}", self.sub_id);
                }
            }
        }
        if epoch <= self.start {
            return;
        }
        if let Some((_, dropped_max)) = self.discarding.as_mut() {
            *dropped_max = (*dropped_max).max(epoch);
        } else {
            let decoded = self.decode(changes);
            let bytes = changes.len();
            if self.bytes_used + bytes > self.options.max_alloc {
                self.overflow(epoch);
            } else {
                self.bytes_used += bytes;
                let partial = self.partial.entry(epoch).or_default();
                partial.changes.extend(decoded);
                partial.bytes += bytes;
            }
        }
        if complete {
            let nodes = self.nodes.len();
            let partial = self.partial.entry(epoch).or_default();
            if !partial.complete_from.contains(&node) {
                partial.complete_from.push(node);
            }
            if partial.complete_from.len() == nodes {
                self.complete(epoch);
            }
        }
    }

    /// Every node's last part of `epoch` came: it and every epoch below it
    /// are complete (nodes send epochs in order).
    fn complete(&mut self, epoch: u64) {
        while let Some(entry) = self.partial.first_entry() {
            if *entry.key() > epoch {
                break;
            }
            let (e, p) = entry.remove_entry();
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
            let changes = EpochChanges {
                epoch: Epoch::from_u64(e),
                changes: p.changes,
            };
            self.ready.push_back((Event::Epoch(changes), p.bytes));
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
                Event::Gap { .. } => None,
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
        self.ready.retain(|(e, _)| matches!(e, Event::Gap { .. }));
        for p in self.partial.values_mut() {
            p.changes.clear();
        }
        self.bytes_used = self.partial.values().map(|p| p.bytes).sum();
        let dropped_max = self
            .partial
            .keys()
            .last()
            .copied()
            .unwrap_or(epoch)
            .max(epoch);
        self.discarding = Some((from, dropped_max));
    }

    /// The changes of `bytes`, decoded; what cannot be is logged and left
    /// out (a table altered since the subscription: part of a later step).
    fn decode(&self, bytes: &[u8]) -> Vec<RowChange> {
        let mut out = Vec::new();
        for entry in sub_change::entries(bytes) {
            let entry = match entry {
                Ok(entry) => entry,
                Err(error) => {
                    tracing::warn!("subscription {}: {error}", self.sub_id);
                    break;
                }
            };
            let Some(sub) = self.tables.get(&entry.table) else {
                continue;
            };
            match decode_change(sub, &entry, self.options.images) {
                Ok(change) => out.push(change),
                Err(error) => tracing::warn!(
                    "subscription {}: a change of `{}` left out: {error}",
                    self.sub_id,
                    sub.table.name()
                ),
            }
        }
        out
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
        for (link, node) in self.nodes.clone() {
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
fn decode_change(
    sub: &Subscribed,
    entry: &sub_change::Entry<'_>,
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
    let row = |image: &[u8]| -> std::result::Result<Vec<Value>, String> {
        let fixed_bytes = sub.layout.fixed_bytes();
        if image.len() < fixed_bytes {
            return Err(format!("a row image of {} bytes", image.len()));
        }
        let (fixed, var) = image.split_at(fixed_bytes);
        sub.layout
            .validate_row(fixed, var)
            .map_err(|e| e.to_string())?;
        Ok((0..def.columns.len())
            .map(|c| sub.layout.decode_column(fixed, var, c).to_value())
            .collect())
    };
    let before = match kind {
        ChangeKind::Insert => None,
        _ => Some(row(entry.before)?),
    };
    let after = match kind {
        ChangeKind::Delete => None,
        _ => Some(row(entry.after)?),
    };
    let named = |values: &[Value], keep: &dyn Fn(usize) -> bool| -> Vec<(String, Value)> {
        sub.shown
            .iter()
            .copied()
            .filter(|&c| keep(c))
            .map(|c| (def.columns[c].name.clone(), values[c].clone()))
            .collect()
    };
    let key = |c: usize| def.primary_key.contains(&c);
    let (before, after) = match (images, kind, &before, &after) {
        (Images::Full, ..) | (Images::Minimal, ChangeKind::Insert, ..) => (
            before.as_deref().map(|v| named(v, &|_| true)),
            after.as_deref().map(|v| named(v, &|_| true)),
        ),
        (Images::Minimal, ChangeKind::Update, Some(b), Some(a)) => {
            let changed = |c: usize| key(c) || b[c] != a[c];
            (Some(named(b, &key)), Some(named(a, &changed)))
        }
        (Images::Minimal, _, b, _) => (b.as_deref().map(|v| named(v, &key)), None),
    };
    Ok(RowChange {
        table: def.name.clone(),
        kind,
        before,
        after,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ::schema::{Collation, Column, ColumnType, TableDef};

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
        Subscribed {
            layout: RowLayout::new(def),
            table,
            shown,
        }
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
                flags: sub_change::SENDER,
                table: 7,
                version: sub.table.def().version,
                partition: 0,
                before,
                after,
            },
        );
        out
    }

    fn named(pairs: &[(&str, Value)]) -> Option<Vec<(String, Value)>> {
        Some(
            pairs
                .iter()
                .map(|(n, v)| (n.to_string(), v.clone()))
                .collect(),
        )
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
