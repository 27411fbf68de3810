//! Transactions of committed reads that a TC of this node handed over
//! whole (`LdmReadReq`; docs/transactions.md, "Reads answered by the
//! LDM"): run here and answered to the client directly, as the TC would
//! have answered them.
//!
//! Why: a committed read locks nothing and leaves nothing behind, so once
//! the TC has checked and routed the transaction nothing is left for it to
//! do but pass the results on. Answering here saves the `LdmKeyConf` hop,
//! the TC's record and its reply, and, where the LDM runs on a thread of
//! its own, a thread hop.
//!
//! The invariant: the client gets exactly the reply the TC would have sent
//! for the same results: `TcKeyConf` committed in the TC's epoch with the
//! results in op order, or `TcKeyRef` naming the first failed op that did
//! not ask to ignore its error (and the TC's message for it), or the TC's
//! refusal of a reply too large for one batch.

use kernel::Context;
use proto::error;
use proto::ops::{OpBatchReader, OpView, IGNORE_ERROR};
use proto::results::ResultWriter;
use signal::{tc_flags, BlockNumber, BlockRef, SignalBody};
use storage::disk::Disk;
use storage::fragment::{Fragment, ReadBatch, READ_BATCH_KEYS_MAX};

use super::requests::{fragment_code, is_committed_read, write_row_values};
use super::LdmBlock;

/// `Continue::what` of an LDM instance: run the gathered `LdmReadReq`s.
pub(super) const CONTINUE_CLIENT_READS: u32 = 2;
/// Most `LdmReadReq`s gathered: the round's reads run at once when one
/// more would pass it (bounds the wait of the first, and the scratch).
const GATHERED_READS_MAX: usize = 256;
/// Most bytes of op batches gathered (the same bound, in bytes: a read
/// op takes at least 30, so a round runs at most ~8,700 reads).
const GATHERED_READ_BYTES_MAX: usize = 256 << 10;

/// Handed-over read transactions gathered over a round of the instance's
/// thread, run together when its `Continue` comes back: their keys go
/// through `Fragment::read_batch` by fragment, so the cache misses of
/// different transactions' lookups overlap as those of one batch do.
#[derive(Debug, Default)]
pub(super) struct ClientReads {
    requests: Vec<HandedRead>,
    /// Bytes of the gathered op batches.
    bytes: usize,
    /// A `Continue { CONTINUE_CLIENT_READS }` is on its way.
    run_due: bool,
    /// Scratch of a round, kept for its room: each op's outcome, the
    /// fragments read (table, partition, keys so far), a read batch per
    /// fragment (or per `READ_BATCH_KEYS_MAX` keys of one).
    outcomes: Vec<ReadOutcome>,
    fragments: Vec<(u32, u32, usize)>,
    batches: Vec<ReadBatch>,
}

#[derive(Debug)]
struct HandedRead {
    tx_id: u64,
    api: BlockRef,
    epoch: u64,
    ops: Vec<u8>,
}

/// A read op answered with a row: the op, its fragment (for the row's
/// layout) and the row image (fixed and variable-size parts).
type Answered<'r> = (&'r OpView<'r>, &'r Fragment, (&'r [u8], &'r [u8]));

/// What became of one op of a round.
#[derive(Copy, Clone, Debug)]
enum ReadOutcome {
    Failed(u32),
    /// Read as key `index` of read batch `batch`.
    Read {
        batch: u16,
        index: u16,
    },
}

impl<D: Disk + Clone + Send + 'static> LdmBlock<D> {
    pub(super) fn on_read_req(
        &mut self,
        sender: BlockRef,
        tx_id: u64,
        api: BlockRef,
        epoch: u64,
        ops: Vec<u8>,
        ctx: &mut Context<'_>,
    ) {
        if self.failed {
            // This node is failing: the client learns so from the lost
            // connection, as for any request of this node's TC.
            return ctx.recycle(ops);
        }
        if sender.node != self.me.node || sender.block != BlockNumber::TRANSACTION_COORDINATOR {
            // A TC hands over only to an instance of its own node, whose
            // failure the client learns from the TC's connection.
            tracing::warn!(
                node = %self.config.node,
                "LDM instance {}: LdmReadReq of transaction {tx_id:#x} from {sender}, not a TC of this node: refused",
                self.config.instance
            );
            ctx.recycle(ops);
            let message = format!(
                "{sender} sent LdmReadReq to {}: only a TC of that node may",
                self.me
            );
            let reply = SignalBody::TcKeyRef {
                tx_id,
                code: error::BAD_OPERATION,
                op_index: u32::MAX,
                message,
            };
            return ctx.send(api, reply);
        }
        self.stats.key_requests += 1;
        self.stats.reads_answered += 1;
        let reads = &mut self.client_reads;
        if reads.requests.len() == GATHERED_READS_MAX
            || reads.bytes + ops.len() > GATHERED_READ_BYTES_MAX
        {
            self.run_client_reads(ctx);
        }
        let reads = &mut self.client_reads;
        reads.bytes += ops.len();
        reads.requests.push(HandedRead {
            tx_id,
            api,
            epoch,
            ops,
        });
        if !reads.run_due {
            reads.run_due = true;
            let me = self.me;
            ctx.send(
                me,
                SignalBody::Continue {
                    what: CONTINUE_CLIENT_READS,
                },
            );
        }
    }

    /// The `Continue` of the gathered reads came back: run them.
    pub(super) fn on_client_reads_due(&mut self, ctx: &mut Context<'_>) {
        self.client_reads.run_due = false;
        self.run_client_reads(ctx);
    }

    /// Runs the gathered reads and answers each client.
    fn run_client_reads(&mut self, ctx: &mut Context<'_>) {
        if self.client_reads.requests.is_empty() {
            return;
        }
        let mut requests = std::mem::take(&mut self.client_reads.requests);
        self.client_reads.bytes = 0;
        if self.failed {
            // Failed since they came: as `on_read_req` does then.
            for request in requests.drain(..) {
                ctx.recycle(request.ops);
            }
            self.client_reads.requests = requests;
            return;
        }
        self.stats.client_read_rounds += 1;
        // Every request's ops, parsed once; a malformed batch (only a bug
        // sends one: the TC checked the client's) is answered now.
        let mut views: Vec<OpView<'_>> = Vec::new();
        // Where each request's views end, and whether its batch was malformed.
        let mut ends: Vec<(usize, bool)> = Vec::with_capacity(requests.len());
        for request in &requests {
            let before = views.len();
            let framed = OpBatchReader::framed_each(&request.ops, |view| views.push(view));
            if let Err(e) = &framed {
                views.truncate(before);
                tracing::error!(
                    node = %self.config.node,
                    "LDM instance {}: malformed op batch of read transaction {:#x}: {e}",
                    self.config.instance,
                    request.tx_id
                );
                let reply = SignalBody::TcKeyRef {
                    tx_id: request.tx_id,
                    code: error::MALFORMED_REQUEST,
                    op_index: u32::MAX,
                    message: format!("a data node got a malformed op batch: {e}"),
                };
                ctx.send(request.api, reply);
            }
            assert!(
                views[before..].iter().enumerate().all(|(pos, op)| {
                    is_committed_read(op) && op.header.op_index as usize == pos
                }),
                "LDM instance {}: transaction {:#x} handed over with an op that is not a committed read in position",
                self.config.instance,
                request.tx_id
            );
            ends.push((views.len(), framed.is_err()));
        }
        self.stats.ops += views.len() as u64;
        self.read_gathered(&views);
        let instance = self.instance.as_ref();
        // Each batch's fragment, for its row layout.
        let fragments: Vec<Option<&Fragment>> = self
            .client_reads
            .fragments
            .iter()
            .map(|&(table_id, partition, _)| {
                instance.and_then(|i| i.fragment_ref(table_id, partition))
            })
            .collect();
        let mut start = 0;
        for (request, &(end, malformed)) in requests.iter().zip(&ends) {
            let ops = &views[start..end];
            let outcomes = &self.client_reads.outcomes[start..end];
            start = end;
            if malformed {
                continue; // answered above
            }
            // What became of each op: its row, or its error code.
            let answers = ops
                .iter()
                .zip(outcomes)
                .map(|(op, outcome)| match *outcome {
                    ReadOutcome::Failed(code) => Err(code),
                    ReadOutcome::Read { batch, index } => {
                        let (batch, index) = (usize::from(batch), usize::from(index));
                        match (
                            self.client_reads.batches[batch].row(index),
                            fragments[batch],
                        ) {
                            (Some(row), Some(fragment)) => Ok((op, fragment, row)),
                            _ => Err(error::NO_SUCH_ROW),
                        }
                    }
                });
            let reply = self.client_reply(request.tx_id, request.epoch, ops, answers, ctx);
            ctx.send(request.api, reply);
        }
        drop(fragments);
        drop(views);
        for request in requests.drain(..) {
            ctx.recycle(request.ops);
        }
        // Kept for its room (nothing was gathered while these ran).
        debug_assert!(self.client_reads.requests.is_empty());
        self.client_reads.requests = requests;
    }

    /// Reads every op of `views` (committed reads), by fragment through
    /// `read_batch`: each op's outcome into `client_reads.outcomes`.
    fn read_gathered(&mut self, views: &[OpView<'_>]) {
        let refusal = if self.instance.is_none() {
            Some(error::NOT_STARTED)
        } else if self.refuses_partial_copy() {
            Some(error::NODE_FAILURE_ABORTED)
        } else {
            None
        };
        let mut outcomes = std::mem::take(&mut self.client_reads.outcomes);
        let mut fragments = std::mem::take(&mut self.client_reads.fragments);
        outcomes.clear();
        fragments.clear();
        // Each op's batch: one per fragment, or per READ_BATCH_KEYS_MAX keys of one.
        for op in views {
            let outcome = match refusal.map_or_else(|| self.check_op(op), Err) {
                Err(code) => ReadOutcome::Failed(code),
                Ok((table_id, partition)) => {
                    let batch = fragments.iter().rposition(|&(t, p, keys)| {
                        (t, p) == (table_id, partition) && keys < READ_BATCH_KEYS_MAX
                    });
                    let batch = batch.unwrap_or_else(|| {
                        fragments.push((table_id, partition, 0));
                        fragments.len() - 1
                    });
                    let index = fragments[batch].2;
                    fragments[batch].2 += 1;
                    ReadOutcome::Read {
                        batch: u16::try_from(batch).expect("batches ≤ reads of a round"),
                        index: u16::try_from(index).expect("READ_BATCH_KEYS_MAX fits a u16"),
                    }
                }
            };
            outcomes.push(outcome);
        }
        let LdmBlock {
            schema,
            instance,
            scratch,
            client_reads,
            ..
        } = self;
        if client_reads.batches.len() < fragments.len() {
            client_reads
                .batches
                .resize_with(fragments.len(), ReadBatch::default);
        }
        for (b, &(table_id, partition, _)) in fragments.iter().enumerate() {
            let batch = u16::try_from(b).expect("batches ≤ reads of a round");
            let mine =
                |o: &ReadOutcome| matches!(o, ReadOutcome::Read { batch: of, .. } if *of == batch);
            let table = &schema.tables[&table_id];
            let fragment = instance
                .as_mut()
                .and_then(|i| i.fragment(table_id, partition));
            let code = match fragment {
                None => Some(error::TABLE_NOT_YET_KNOWN),
                Some((fragment, pool)) => {
                    scratch.keys.clear();
                    for (op, _) in views.iter().zip(&outcomes).filter(|(_, o)| mine(o)) {
                        scratch.keys.extend(op.keys().map(|v| v.to_value()));
                    }
                    let out = &mut client_reads.batches[b];
                    fragment
                        .read_batch(pool, &scratch.keys, out)
                        .err()
                        .map(|e| fragment_code(table, &e))
                }
            };
            if let Some(code) = code {
                for outcome in outcomes.iter_mut().filter(|o| mine(o)) {
                    *outcome = ReadOutcome::Failed(code);
                }
            }
        }
        client_reads.outcomes = outcomes;
        client_reads.fragments = fragments;
    }

    /// What the TC would answer the client for these `answers` (each op's
    /// row, or its error code) of the whole transaction `ops`: the rows go
    /// straight from the read batches into the reply's result batch.
    fn client_reply<'r>(
        &self,
        tx_id: u64,
        epoch: u64,
        ops: &[OpView<'_>],
        answers: impl Iterator<Item = Result<Answered<'r>, u32>> + Clone,
        ctx: &mut Context<'_>,
    ) -> SignalBody {
        let failed = answers
            .clone()
            .zip(ops)
            .find_map(|(answer, op)| match answer {
                Err(code) if !op.has_flag(IGNORE_ERROR) => Some((op.header, code)),
                _ => None,
            });
        if let Some((h, code)) = failed {
            let table = self.schema.tables.get(&h.table_id).map(|t| t.name.as_str());
            return SignalBody::TcKeyRef {
                tx_id,
                code,
                op_index: h.op_index,
                message: error::failed_op_message(table, h.table_id, h.op_index, code),
            };
        }
        let mut bytes = ctx.buffer();
        let mut writer = ResultWriter::new(&mut bytes);
        let mut written = Ok(());
        for (answer, op) in answers.zip(ops) {
            let op_index = op.header.op_index;
            written = match answer {
                Err(code) => writer.error(op_index, code),
                Ok((op, fragment, row)) => {
                    let table = &self.schema.tables[&op.header.table_id];
                    writer.row(op_index);
                    write_row_values(&mut writer, fragment.layout(), table, op, row);
                    writer.end_row()
                }
            };
            if written.is_err() {
                break;
            }
        }
        drop(writer);
        if let Err(e) = written {
            // As the TC refuses a reply that does not fit one batch.
            ctx.recycle(bytes);
            return SignalBody::TcKeyRef {
                tx_id,
                code: e.code(),
                op_index: u32::MAX,
                message: error::reply_too_large_message(&e),
            };
        }
        SignalBody::TcKeyConf {
            tx_id,
            flags: tc_flags::COMMITTED,
            epoch,
            // Reads alone: nothing of them to wait durable for.
            incarnation: 0,
            results: bytes,
        }
    }
}
