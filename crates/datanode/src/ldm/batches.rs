//! Key requests and answers sent together between nodes (docs/transactions.md,
//! "Key batches").
//!
//! With two replicas a write crosses between the nodes twice: the primary
//! passes it on to the backup (`LdmKeyReq`), and the backup answers the TC
//! (`LdmKeyConf`), whichever node that is on. Each signal costs both sides
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
//! to a TC keep their order the same way.

use kernel::Context;
use signal::{BlockNumber, BlockRef, NodeId, SignalBody};

use super::encoded::Gathered;
use super::{LdmBlock, LdmStats};

/// `Continue::what` of an LDM instance: send the gathered key batches.
pub(super) const CONTINUE_KEY_BATCHES: u32 = 1;
/// Most entries in one key batch: a full batch leaves at once.
pub(crate) const KEY_BATCH_ENTRIES_MAX: usize = 256;
/// Most bytes of op or result batches in one key batch: a batch that
/// reaches it leaves at once. Far below a frame (1 MiB), and within the
/// payload buffers a thread keeps for reuse (64 KiB).
pub(crate) const KEY_BATCH_BYTES_MAX: usize = 32 << 10;

/// Requests passed on to one node, gathered so far.
#[derive(Debug, Default)]
struct Forwards {
    to: Option<NodeId>,
    tx_ids: Vec<u64>,
    tcs: Vec<BlockRef>,
    chains: Vec<Vec<NodeId>>,
    ends: Vec<u32>,
    ops: Vec<u8>,
}

/// Answers to one TC, gathered so far.
#[derive(Debug, Default)]
struct Answers {
    tc: Option<BlockRef>,
    tx_ids: Vec<u64>,
    ok_in_order: Vec<u32>,
    ends: Vec<u32>,
    results: Vec<u8>,
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
    /// One result batch, before it joins a batch that has entries.
    part: Vec<u8>,
    /// A `Continue { CONTINUE_KEY_BATCHES }` is on its way to the instance.
    flush_due: bool,
}

/// Whether answers to `tc` from `me` are gathered: to a TC on another node.
pub(super) fn gathers_answers(me: BlockRef, tc: BlockRef) -> bool {
    tc.node != me.node && tc.block == BlockNumber::TRANSACTION_COORDINATOR
}

impl KeyBatches {
    /// Adds the request of `tx_id` passed on to the instance `me.instance`
    /// of node `to` (not this one) to that node's batch.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn queue_forward(
        &mut self,
        me: BlockRef,
        to: NodeId,
        tx_id: u64,
        tc: BlockRef,
        chain: Vec<NodeId>,
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
                debug_assert!(batch.tx_ids.is_empty(), "a batch not in use is empty");
                batch.to = Some(to);
                self.forwards_used += 1;
                self.forwards_used - 1
            }
        };
        if !self.forwards[b].tx_ids.is_empty()
            && self.forwards[b].ops.len() + ops.len() > KEY_BATCH_BYTES_MAX
        {
            send_forwards(&mut self.forwards[b], me, stats, ctx);
        }
        let batch = &mut self.forwards[b];
        if batch.tx_ids.is_empty() {
            // The first entry's buffer becomes the batch's: a lone one goes
            // on as it came, neither copied nor allocated again.
            batch.ops = ops;
        } else {
            batch.ops.extend_from_slice(&ops);
        }
        batch.tx_ids.push(tx_id);
        batch.tcs.push(tc);
        batch.chains.push(chain);
        batch.ends.push(u32::try_from(batch.ops.len()).expect("a key batch is far below 4 GiB"));
        if batch.tx_ids.len() >= KEY_BATCH_ENTRIES_MAX || batch.ops.len() >= KEY_BATCH_BYTES_MAX {
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
                debug_assert!(batch.tx_ids.is_empty(), "a batch not in use is empty");
                batch.tc = Some(tc);
                self.answers_used += 1;
                self.answers_used - 1
            }
        };
        let mut next = 0;
        while next < results.len() {
            let first = next;
            let batch = &mut self.answers[b];
            if batch.tx_ids.is_empty() {
                // Written in place: a lone answer is the single signal's buffer.
                if batch.results.capacity() == 0 {
                    batch.results = ctx.buffer();
                }
                results.write_results(&mut next, &mut batch.results);
            } else {
                results.write_results(&mut next, &mut self.part);
                if batch.results.len() + self.part.len() > KEY_BATCH_BYTES_MAX {
                    send_answers(batch, me, stats, ctx);
                    batch.results = ctx.buffer();
                }
                batch.results.extend_from_slice(&self.part);
            }
            batch.tx_ids.push(tx_id);
            batch.ok_in_order.push(results.ok_in_order(first..next));
            batch.ends.push(u32::try_from(batch.results.len()).expect("a key batch is far below 4 GiB"));
            if batch.tx_ids.len() >= KEY_BATCH_ENTRIES_MAX || batch.results.len() >= KEY_BATCH_BYTES_MAX {
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
        for batch in &mut self.forwards[..self.forwards_used] {
            send_forwards(batch, me, stats, ctx);
        }
        self.forwards_used = 0;
        for batch in &mut self.answers[..self.answers_used] {
            send_answers(batch, me, stats, ctx);
        }
        self.answers_used = 0;
    }
}

/// Sends a forward batch (it stays in use, empty, until the flush).
fn send_forwards(batch: &mut Forwards, me: BlockRef, stats: &mut LdmStats, ctx: &mut Context<'_>) {
    let Some(to) = batch.to else {
        return;
    };
    let receiver = BlockRef::new(to, BlockNumber::LOCAL_DATA_MANAGER, me.instance);
    match batch.tx_ids.len() {
        0 => return,
        1 => ctx.send(
            receiver,
            SignalBody::LdmKeyReq {
                tx_id: batch.tx_ids[0],
                tc: batch.tcs[0],
                chain: std::mem::take(&mut batch.chains[0]),
                ops: std::mem::take(&mut batch.ops),
            },
        ),
        _ => {
            stats.key_batches += 1;
            ctx.send(
                receiver,
                SignalBody::LdmKeyBatchReq {
                    tx_ids: std::mem::take(&mut batch.tx_ids),
                    tcs: std::mem::take(&mut batch.tcs),
                    chains: std::mem::take(&mut batch.chains),
                    ends: std::mem::take(&mut batch.ends),
                    ops: std::mem::take(&mut batch.ops),
                },
            );
        }
    }
    batch.tx_ids.clear();
    batch.tcs.clear();
    batch.chains.clear();
    batch.ends.clear();
    batch.ops.clear();
}

/// Sends an answer batch (it stays in use, empty, until the flush).
fn send_answers(batch: &mut Answers, me: BlockRef, stats: &mut LdmStats, ctx: &mut Context<'_>) {
    let Some(tc) = batch.tc else {
        return;
    };
    debug_assert!(gathers_answers(me, tc));
    match batch.tx_ids.len() {
        0 => return,
        1 => ctx.send(
            tc,
            SignalBody::LdmKeyConf {
                tx_id: batch.tx_ids[0],
                results: std::mem::take(&mut batch.results),
                ok_in_order: batch.ok_in_order[0],
            },
        ),
        _ => {
            stats.key_conf_batches += 1;
            ctx.send(
                tc,
                SignalBody::LdmKeyConfBatch {
                    tx_ids: std::mem::take(&mut batch.tx_ids),
                    ok_in_order: std::mem::take(&mut batch.ok_in_order),
                    ends: std::mem::take(&mut batch.ends),
                    results: std::mem::take(&mut batch.results),
                },
            );
        }
    }
    batch.tx_ids.clear();
    batch.ok_in_order.clear();
    batch.ends.clear();
    batch.results.clear();
}

/// Checks that `ends` describe `count` entries of a batch's `bytes_len`
/// bytes (each end at or after the one before, the last at the end), and
/// that every other list of entries (`lens`) has `count` too.
pub(crate) fn check_entries(
    count: usize,
    lens: &[usize],
    ends: &[u32],
    bytes_len: usize,
) -> Result<(), String> {
    if let Some(len) = lens.iter().chain([&ends.len()]).find(|&&len| len != count) {
        return Err(format!("{count} transactions but a list of {len} entries"));
    }
    if let Some(pair) = ends.windows(2).find(|pair| pair[1] < pair[0]) {
        return Err(format!("entry ends {} then {}", pair[0], pair[1]));
    }
    let last = ends.last().map_or(0, |&end| end as usize);
    if last != bytes_len {
        return Err(format!("entries end at byte {last} of {bytes_len}"));
    }
    Ok(())
}

/// The byte range of each entry of a batch checked by [`check_entries`].
pub(crate) fn entry_ranges(ends: &[u32]) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
    let starts = std::iter::once(0).chain(ends.iter().map(|&end| end as usize));
    starts.zip(ends).map(|(start, &end)| start..end as usize)
}

impl<D: storage::disk::Disk + Clone + Send + 'static> LdmBlock<D> {
    /// Runs each request of an `LdmKeyBatchReq` as its `LdmKeyReq`, in order.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_key_batch_req(
        &mut self,
        sender: BlockRef,
        tx_ids: Vec<u64>,
        tcs: Vec<BlockRef>,
        mut chains: Vec<Vec<NodeId>>,
        ends: Vec<u32>,
        ops: Vec<u8>,
        ctx: &mut Context<'_>,
    ) {
        if let Err(e) = check_entries(tx_ids.len(), &[tcs.len(), chains.len()], &ends, ops.len()) {
            // Only a bug sends this: there is no request to answer.
            tracing::error!(
                node = %self.config.node,
                "LDM instance {}: malformed LdmKeyBatchReq from {sender}: {e}",
                self.config.instance
            );
            return;
        }
        for (i, range) in entry_ranges(&ends).enumerate() {
            let mut bytes = ctx.buffer();
            bytes.extend_from_slice(&ops[range]);
            let chain = std::mem::take(&mut chains[i]);
            self.on_key_req(sender, tx_ids[i], tcs[i], chain, bytes, 0, ctx);
        }
    }

    /// The `Continue` note came back: the gathered batches leave.
    pub(super) fn flush_key_batches(&mut self, ctx: &mut Context<'_>) {
        self.key_batches.flush(self.me, &mut self.stats, ctx);
    }
}
