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
use signal::{tc_flags, BlockRef, SignalBody};
use smallvec::SmallVec;
use storage::disk::Disk;

use super::encoded::Gathered;
use super::LdmBlock;
use crate::tc::transaction::{failed_op_message, reply_too_large_message};

impl<D: Disk + Clone + Send + 'static> LdmBlock<D> {
    pub(super) fn on_read_req(
        &mut self,
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
        self.stats.key_requests += 1;
        self.stats.reads_answered += 1;
        let mut views: SmallVec<[OpView<'_>; 8]> = SmallVec::new();
        if let Err(e) = OpBatchReader::framed_each(&ops, |view| views.push(view)) {
            // Only a bug sends this: the TC checked the client's batch.
            tracing::error!(
                node = %self.config.node,
                "LDM instance {}: malformed op batch of read transaction {tx_id:#x}: {e}",
                self.config.instance
            );
            let message = format!("a data node got a malformed op batch: {e}");
            let reply = SignalBody::TcKeyRef {
                tx_id,
                code: error::MALFORMED_REQUEST,
                op_index: u32::MAX,
                message,
            };
            drop(views);
            ctx.recycle(ops);
            return ctx.send(api, reply);
        }
        self.stats.ops += views.len() as u64;
        assert!(
            views.iter().enumerate().all(|(pos, op)| {
                super::requests::is_committed_read(op) && op.header.op_index as usize == pos
            }),
            "LDM instance {}: transaction {tx_id:#x} handed over with an op that is not a committed read in position",
            self.config.instance
        );
        let mut results = std::mem::take(&mut self.scratch.results);
        results.clear();
        let refusal = if self.instance.is_none() {
            Some(error::NOT_STARTED)
        } else if self.restart.holds_partial_copy() {
            // As for a TC's `LdmKeyReq` (`on_key_req`): a starting node's
            // fragments are partial copies, and an answer would miss rows.
            self.stats.refused_starting += 1;
            Some(error::NODE_FAILURE_ABORTED)
        } else {
            None
        };
        if let Some(code) = refusal {
            for op in &views {
                results.error(op.header.op_index, code);
            }
        } else {
            self.committed_only(&views, &mut results);
        }
        let reply = self.client_reply(tx_id, epoch, &views, &results, ctx);
        self.scratch.results = results;
        drop(views);
        ctx.recycle(ops);
        ctx.send(api, reply);
    }

    /// What the TC would answer the client for these results of the whole
    /// transaction `views`.
    fn client_reply(
        &self,
        tx_id: u64,
        epoch: u64,
        views: &[OpView<'_>],
        results: &Gathered,
        ctx: &mut Context<'_>,
    ) -> SignalBody {
        let ignored = |op_index: u32| views[op_index as usize].has_flag(IGNORE_ERROR);
        if let Some((op_index, code)) = results.failures().find(|&(i, _)| !ignored(i)) {
            let table_id = views[op_index as usize].header.table_id;
            let table = self.schema.tables.get(&table_id).map(|t| t.name.as_str());
            return SignalBody::TcKeyRef {
                tx_id,
                code,
                op_index,
                message: failed_op_message(table, table_id, op_index, code),
            };
        }
        let mut bytes = ctx.buffer();
        bytes.reserve(64 + results.len() * 9 + results.value_bytes());
        let mut next = 0;
        if let Some(e) = results.write_results(&mut next, &mut bytes) {
            ctx.recycle(bytes);
            return SignalBody::TcKeyRef {
                tx_id,
                code: e.code(),
                op_index: u32::MAX,
                message: reply_too_large_message(&e),
            };
        }
        SignalBody::TcKeyConf {
            tx_id,
            flags: tc_flags::COMMITTED,
            epoch,
            results: bytes,
        }
    }
}
