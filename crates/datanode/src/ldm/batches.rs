//! Key requests and answers sent together between nodes (docs/transactions.md,
//! "Key batches").
//!
//! With two replicas a write crosses between the nodes twice: the primary
//! passes it on to the backup (`LdmKeyReq`, or the ops of a one-phase
//! commit the backup decides, an entry with its epoch), and the backup
//! answers the TC (`LdmKeyConf`), whichever node that is on. Each signal costs both sides
//! a header, a payload buffer, routing and dispatch. Under load an
//! instance runs many requests in one round of its thread, so it gathers
//! what it would send one by one: the requests it passes on to one node
//! (always the same instance there) into one `LdmKeyBatchReq`, its answers
//! to one TC on another node into one `LdmKeyConfBatch`. They leave when
//! the instance's `Continue` note comes back, after the signals queued
//! before it, or at once when a batch is full. A batch of one entry goes
//! as the single signal. What goes to this node's own blocks, and answers
//! to blocks other than TCs (a node restart's copy), go at once: what a
//! batch saves is signals between nodes.
//!
//! A gathered entry counts as sent. A batch to a node that fails before
//! it leaves is lost on the way as its signals would have been; the TC's
//! node failure handling covers both alike.
//!
//! Order: every request this instance passes on to a node goes through
//! that node's batch, appended as it ran here, and a batch leaves whole,
//! before any later entry (a full one at once, the rest at the flush), on
//! a path between two blocks that keeps its order. So the next replica
//! receives the requests of a transaction in the order they ran here, as
//! the operations of a transaction must run on an instance. The answers
//! to a TC keep their order the same way; those sent at once (refusals at
//! arrival, committed reads of the fast path) answer other requests, and
//! a TC takes the answers of its requests in any order (each names its
//! ops), as it must for answers from different instances.

use kernel::Context;
use signal::key_batch::{key_reqs, put_key_conf, put_key_req};
use signal::{BlockNumber, BlockRef, NodeId, SignalBody};

use super::encoded::Gathered;
use super::{LdmBlock, LdmStats};

/// `Continue::what` of an LDM instance: send the gathered key batches.
pub(super) const CONTINUE_KEY_BATCHES: u32 = 1;
/// Most entries in one key batch: a full batch leaves at once.
pub(crate) const KEY_BATCH_ENTRIES_MAX: u32 = 256;
/// Most bytes of one key batch's entries: a batch that reaches it leaves
/// at once. Far below a frame (1 MiB), and within the payload buffers a
/// thread keeps for reuse (64 KiB).
pub(crate) const KEY_BATCH_BYTES_MAX: usize = 32 << 10;

/// A request gathered alone so far: it goes on as it came if it stays so.
#[derive(Debug)]
struct LoneRequest {
    tx_id: u64,
    tc: BlockRef,
    chain: signal::Chain,
    /// Not 0: a one-phase commit's ops, for the backup to decide.
    epoch: u64,
    ops: Vec<u8>,
}

/// Requests passed on to one node, gathered so far.
#[derive(Debug, Default)]
struct Forwards {
    to: Option<NodeId>,
    count: u32,
    /// The first entry while it is the only one.
    lone: Option<LoneRequest>,
    /// The entries once there are two (`signal::key_batch`).
    entries: Vec<u8>,
    /// The bytes of the last batch sent: room the next one reserves at once.
    last_bytes: usize,
}

/// Answers to one TC, gathered so far (as `Forwards` are).
#[derive(Debug, Default)]
struct Answers {
    tc: Option<BlockRef>,
    count: u32,
    /// The first entry's `tx_id` and `ok_in_order` while it is the only
    /// one; its result batch is in `lone_results`.
    lone: Option<(u64, u32)>,
    lone_results: Vec<u8>,
    entries: Vec<u8>,
    last_bytes: usize,
}

/// The key batches of an instance, reused from round to round.
#[derive(Debug, Default)]
pub(super) struct KeyBatches {
    forwards: Vec<Forwards>,
    /// Forward batches in use: `forwards[..forwards_used]`.
    forwards_used: usize,
    answers: Vec<Answers>,
    /// Answer batches in use: `answers[..answers_used]`.
    answers_used: usize,
    /// One result batch, before it joins a batch.
    part: Vec<u8>,
    /// Empty op batch buffers of requests gathered into a batch, for the
    /// requests of batches received (`on_key_batch_req`): an instance that
    /// passes requests on receives about as many from the other replica.
    spare: Vec<Vec<u8>>,
    /// A `Continue { CONTINUE_KEY_BATCHES }` is on its way to the instance.
    flush_due: bool,
}

/// Whether answers to `tc` from `me` are gathered: to a TC on another node.
pub(super) fn gathers_answers(me: BlockRef, tc: BlockRef) -> bool {
    tc.node != me.node && tc.block == BlockNumber::TRANSACTION_COORDINATOR
}

/// Bytes of an entry beyond its op or result batch (at most: a chain of
/// up to 4 replicas).
const ENTRY_OVERHEAD_BYTES_MAX: usize = 32;

impl KeyBatches {
    /// Adds the request of `tx_id` passed on to the instance `me.instance`
    /// of node `to` (not this one) to that node's batch; `epoch` not 0: the
    /// ops of a one-phase commit, which the backup there decides.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn queue_forward(
        &mut self,
        me: BlockRef,
        to: NodeId,
        (tx_id, tc, epoch): (u64, BlockRef, u64),
        chain: signal::Chain,
        ops: Vec<u8>,
        stats: &mut LdmStats,
        ctx: &mut Context<'_>,
    ) {
        debug_assert!(to != me.node, "a request to this node is not gathered");
        let b = match self.forwards[..self.forwards_used]
            .iter()
            .position(|f| f.to == Some(to))
        {
            Some(b) => b,
            None => {
                if self.forwards_used == self.forwards.len() {
                    self.forwards.push(Forwards::default());
                }
                let batch = &mut self.forwards[self.forwards_used];
                debug_assert!(batch.count == 0, "a batch not in use is empty");
                batch.to = Some(to);
                self.forwards_used += 1;
                self.forwards_used - 1
            }
        };
        let batch = &mut self.forwards[b];
        if batch.count > 0
            && batch.bytes() + ops.len() + ENTRY_OVERHEAD_BYTES_MAX > KEY_BATCH_BYTES_MAX
        {
            send_forwards(batch, me, stats, ctx);
        }
        if batch.count == 1 {
            let lone = batch.lone.take().expect("a batch of one holds its request");
            debug_assert!(batch.entries.is_empty());
            if batch.entries.capacity() == 0 {
                batch.entries = ctx.buffer();
            }
            batch.entries.reserve(batch.last_bytes);
            put_key_req(
                &mut batch.entries,
                lone.tx_id,
                lone.tc,
                &lone.chain,
                lone.epoch,
                &lone.ops,
            );
            keep_spare(&mut self.spare, lone.ops);
        }
        if batch.count == 0 {
            batch.lone = Some(LoneRequest {
                tx_id,
                tc,
                chain,
                epoch,
                ops,
            });
        } else {
            put_key_req(&mut batch.entries, tx_id, tc, &chain, epoch, &ops);
            keep_spare(&mut self.spare, ops);
        }
        batch.count += 1;
        // Buggify: a batch leaves early, as if full.
        if batch.count >= KEY_BATCH_ENTRIES_MAX
            || batch.bytes() >= KEY_BATCH_BYTES_MAX
            || ctx.buggify()
        {
            send_forwards(batch, me, stats, ctx);
        } else {
            self.flush_later(me, ctx);
        }
    }

    /// Adds the answer `results` of `tx_id` to the batch of `tc` (a TC on
    /// another node), in as many entries as it takes result batches.
    pub(super) fn queue_answer(
        &mut self,
        me: BlockRef,
        tx_id: u64,
        tc: BlockRef,
        results: &Gathered,
        stats: &mut LdmStats,
        ctx: &mut Context<'_>,
    ) {
        debug_assert!(gathers_answers(me, tc), "answers to {tc} are not gathered");
        let b = match self.answers[..self.answers_used]
            .iter()
            .position(|a| a.tc == Some(tc))
        {
            Some(b) => b,
            None => {
                if self.answers_used == self.answers.len() {
                    self.answers.push(Answers::default());
                }
                let batch = &mut self.answers[self.answers_used];
                debug_assert!(batch.count == 0, "a batch not in use is empty");
                batch.tc = Some(tc);
                self.answers_used += 1;
                self.answers_used - 1
            }
        };
        let mut next = 0;
        while next < results.len() {
            let first = next;
            let batch = &mut self.answers[b];
            if self.part.capacity() == 0 {
                self.part = ctx.buffer();
            }
            results.write_results(&mut next, &mut self.part);
            let ok_in_order = results.ok_in_order(first..next);
            if batch.count > 0
                && batch.bytes() + self.part.len() + ENTRY_OVERHEAD_BYTES_MAX > KEY_BATCH_BYTES_MAX
            {
                send_answers(batch, me, stats, ctx);
            }
            if batch.count == 1 {
                let (lone_tx, lone_ok) =
                    batch.lone.take().expect("a batch of one holds its answer");
                debug_assert!(batch.entries.is_empty());
                if batch.entries.capacity() == 0 {
                    batch.entries = ctx.buffer();
                }
                batch.entries.reserve(batch.last_bytes);
                put_key_conf(&mut batch.entries, lone_tx, lone_ok, &batch.lone_results);
                batch.lone_results.clear();
            }
            if batch.count == 0 {
                // A lone answer is sent in the buffer it was written to.
                batch.lone = Some((tx_id, ok_in_order));
                std::mem::swap(&mut batch.lone_results, &mut self.part);
            } else {
                put_key_conf(&mut batch.entries, tx_id, ok_in_order, &self.part);
            }
            batch.count += 1;
            // Buggify: a batch leaves early, as if full.
            if batch.count >= KEY_BATCH_ENTRIES_MAX
                || batch.bytes() >= KEY_BATCH_BYTES_MAX
                || ctx.buggify()
            {
                send_answers(batch, me, stats, ctx);
            } else {
                self.flush_later(me, ctx);
            }
        }
    }

    /// Asks for the `Continue` note that sends the batches, unless one is
    /// on its way.
    fn flush_later(&mut self, me: BlockRef, ctx: &mut Context<'_>) {
        if !self.flush_due {
            self.flush_due = true;
            ctx.send(
                me,
                SignalBody::Continue {
                    what: CONTINUE_KEY_BATCHES,
                },
            );
        }
    }

    /// Sends every batch gathered (the `Continue` note came back).
    pub(super) fn flush(&mut self, me: BlockRef, stats: &mut LdmStats, ctx: &mut Context<'_>) {
        self.flush_due = false;
        if ctx.buggify() {
            // Buggify: the flush comes later, after more of the thread's
            // signals (and more entries) than usual.
            return self.flush_later(me, ctx);
        }
        for batch in &mut self.forwards[..self.forwards_used] {
            send_forwards(batch, me, stats, ctx);
        }
        self.forwards_used = 0;
        for batch in &mut self.answers[..self.answers_used] {
            send_answers(batch, me, stats, ctx);
        }
        self.answers_used = 0;
    }

    /// Sends the batch gathered for node `to` now, if there is one: what
    /// this instance sends that node next comes behind its entries.
    pub(super) fn send_now(
        &mut self,
        me: BlockRef,
        to: NodeId,
        stats: &mut LdmStats,
        ctx: &mut Context<'_>,
    ) {
        if let Some(batch) = self.forwards[..self.forwards_used]
            .iter_mut()
            .find(|f| f.to == Some(to))
        {
            send_forwards(batch, me, stats, ctx);
        }
    }

    /// An empty buffer for an op batch received in a key batch.
    fn op_buffer(&mut self, ctx: &mut Context<'_>) -> Vec<u8> {
        self.spare.pop().unwrap_or_else(|| ctx.buffer())
    }
}

impl Forwards {
    /// The bytes gathered (those of the lone request's ops alone).
    fn bytes(&self) -> usize {
        match &self.lone {
            Some(lone) => lone.ops.len(),
            None => self.entries.len(),
        }
    }
}

impl Answers {
    /// The bytes gathered (those of the lone answer's results alone).
    fn bytes(&self) -> usize {
        match self.lone {
            Some(_) => self.lone_results.len(),
            None => self.entries.len(),
        }
    }
}

/// Keeps an op batch buffer for a request received in a batch.
fn keep_spare(spare: &mut Vec<Vec<u8>>, mut buffer: Vec<u8>) {
    if spare.len() < KEY_BATCH_ENTRIES_MAX as usize && buffer.capacity() > 0 {
        buffer.clear();
        spare.push(buffer);
    }
}

/// Sends a forward batch (it stays in use, empty, until the flush).
fn send_forwards(batch: &mut Forwards, me: BlockRef, stats: &mut LdmStats, ctx: &mut Context<'_>) {
    let Some(to) = batch.to else {
        return;
    };
    let receiver = BlockRef::new(to, BlockNumber::LOCAL_DATA_MANAGER, me.instance);
    match batch.count {
        0 => return,
        1 => {
            let lone = batch.lone.take().expect("a batch of one holds its request");
            let (tx_id, tc, chain, ops) = (lone.tx_id, lone.tc, lone.chain, lone.ops);
            let body = match lone.epoch {
                0 => SignalBody::LdmKeyReq {
                    tx_id,
                    tc,
                    chain,
                    ops,
                },
                epoch => SignalBody::LdmKeyCommitReq {
                    tx_id,
                    tc,
                    epoch,
                    chain,
                    answer: me,
                    ops,
                },
            };
            ctx.send(receiver, body);
        }
        count => {
            stats.key_batches += 1;
            batch.last_bytes = batch.entries.len();
            let entries = std::mem::take(&mut batch.entries);
            ctx.send(receiver, SignalBody::LdmKeyBatchReq { count, entries });
        }
    }
    batch.count = 0;
}

/// Sends an answer batch (it stays in use, empty, until the flush).
fn send_answers(batch: &mut Answers, me: BlockRef, stats: &mut LdmStats, ctx: &mut Context<'_>) {
    let Some(tc) = batch.tc else {
        return;
    };
    debug_assert!(gathers_answers(me, tc));
    match batch.count {
        0 => return,
        1 => {
            let (tx_id, ok_in_order) = batch.lone.take().expect("a batch of one holds its answer");
            let results = std::mem::take(&mut batch.lone_results);
            ctx.send(
                tc,
                SignalBody::LdmKeyConf {
                    tx_id,
                    results,
                    ok_in_order,
                },
            );
        }
        count => {
            stats.key_conf_batches += 1;
            batch.last_bytes = batch.entries.len();
            let entries = std::mem::take(&mut batch.entries);
            ctx.send(tc, SignalBody::LdmKeyConfBatch { count, entries });
        }
    }
    batch.count = 0;
}

impl<D: storage::disk::Disk + Clone + Send + 'static> LdmBlock<D> {
    /// Runs each request of an `LdmKeyBatchReq` as its `LdmKeyReq` (or, with
    /// an epoch, as the backup's `LdmKeyCommitReq` answering the sender), in
    /// order.
    pub(super) fn on_key_batch_req(
        &mut self,
        sender: BlockRef,
        count: u32,
        entries: Vec<u8>,
        ctx: &mut Context<'_>,
    ) {
        let requests = match key_reqs(&entries, count) {
            Ok(requests) => requests,
            Err(e) => {
                // Only a bug sends this: there is no request to answer.
                tracing::error!(
                    node = %self.config.node,
                    "LDM instance {}: malformed LdmKeyBatchReq from {sender}: {e}",
                    self.config.instance
                );
                return;
            }
        };
        for request in requests {
            let mut ops = self.key_batches.op_buffer(ctx);
            ops.extend_from_slice(request.ops);
            let answer = (request.epoch != 0).then_some(sender);
            self.on_key_req(
                sender,
                request.tx_id,
                request.tc,
                (request.chain, answer),
                ops,
                request.epoch,
                ctx,
            );
        }
        // Each entry's ops were copied out: the batch's buffer is free again.
        ctx.recycle(entries);
    }

    /// The `Continue` note came back: the gathered batches leave.
    pub(super) fn flush_key_batches(&mut self, ctx: &mut Context<'_>) {
        self.key_batches.flush(self.me, &mut self.stats, ctx);
    }
}
