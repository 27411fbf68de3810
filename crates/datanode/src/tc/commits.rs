//! Commit chains sent together (docs/transactions.md, "Commit and abort").
//!
//! A TC under load starts many commits at once: the `LdmKeyConf`s of many
//! transactions come in one round of its thread. Their chains go through
//! the same few sequences of LDM instances (with 2 replicas: the backup,
//! then the primary), so a commit started while others are gathering
//! joins the batch of its chain and GCI, and the batches leave when the
//! TC's `Continue` note comes back, after the signals queued before it:
//! one `LdmCommitBatchReq` per chain carries what was one
//! `LdmCommitChainReq` per transaction, and one `LdmCommitBatchConf` comes
//! back. A batch of one transaction is sent as `LdmCommitChainReq`, and so
//! is a chain that starts on the TC's own node (every chain, with one
//! replica): batching saves signals between nodes, and waiting for the
//! `Continue` costs a round of the thread.
//!
//! A batch waiting here counts as sent: its transactions are `Committing`
//! and their participants not done, so a node failure re-runs their
//! chains as for any chain in flight, after the batches are sent
//! (`TcBlock::commit_after_failure`).

use kernel::Context;
use signal::{BlockRef, SignalBody};

use super::TcBlock;

/// `Continue::what` of a TC: send the gathered commit batches.
pub(crate) const CONTINUE_COMMITS: u32 = 1;
/// Most transactions in one commit batch: a full batch leaves at once.
/// 8 bytes each, far below a frame.
pub(crate) const COMMIT_BATCH_TX_MAX: usize = 1_024;

/// The LDM instances of one commit chain after its first.
pub(crate) type ChainRest = signal::RefChain;

/// The commits of one chain and epoch gathered so far.
#[derive(Debug, Default)]
struct Batch {
    first: Option<BlockRef>,
    next: ChainRest,
    epoch: u64,
    tx_ids: Vec<u64>,
}

/// The batches of a TC, reused from round to round (no allocation once
/// warm, beyond the signals' own lists).
#[derive(Debug, Default)]
pub(crate) struct CommitBatches {
    batches: Vec<Batch>,
    /// Batches in use: `batches[..used]`.
    used: usize,
    /// A `Continue { CONTINUE_COMMITS }` is on its way to the TC.
    flush_due: bool,
}

impl TcBlock {
    /// Adds the commit of `tx_id` along `first`, then `next`, in `epoch` to
    /// the batch of that chain, when `first` is on another node; a chain
    /// that starts on this node goes at once.
    pub(crate) fn queue_commit(
        &mut self,
        tx_id: u64,
        epoch: u64,
        first: BlockRef,
        next: &[BlockRef],
        ctx: &mut Context<'_>,
    ) {
        if first.node == self.me.node {
            // What a batch saves is signals between nodes. Waiting for the
            // `Continue` to come back costs every commit a round of this
            // thread: 1-replica updates (every chain local) ran about 20 %
            // slower with it at 128 transactions in flight.
            send_chain_req(first, tx_id, epoch, self.me, next, ctx);
            return;
        }
        let commits = &mut self.commits;
        let found = commits.batches[..commits.used]
            .iter()
            .position(|b| b.first == Some(first) && b.epoch == epoch && b.next[..] == *next);
        let b = match found {
            Some(b) => b,
            None => {
                if commits.used == commits.batches.len() {
                    commits.batches.push(Batch::default());
                }
                let batch = &mut commits.batches[commits.used];
                debug_assert!(batch.tx_ids.is_empty(), "a batch not in use is empty");
                batch.first = Some(first);
                batch.epoch = epoch;
                batch.next.clear();
                batch.next.extend_from_slice(next);
                commits.used += 1;
                commits.used - 1
            }
        };
        let batch = &mut commits.batches[b];
        // A transaction's chains have no participant in common, so none
        // starts at the same instance as another: one entry per batch.
        debug_assert!(
            !batch.tx_ids.contains(&tx_id),
            "transaction {tx_id:#x} twice in one commit batch"
        );
        batch.tx_ids.push(tx_id);
        if batch.tx_ids.len() >= COMMIT_BATCH_TX_MAX {
            self.send_batch(b, ctx);
        } else if !commits.flush_due {
            commits.flush_due = true;
            ctx.send(
                self.me,
                SignalBody::Continue {
                    what: CONTINUE_COMMITS,
                },
            );
        }
    }

    /// Sends every batch gathered (the `Continue` note came back, or a
    /// node failure needs the chains in flight).
    pub(crate) fn flush_commits(&mut self, ctx: &mut Context<'_>) {
        self.commits.flush_due = false;
        for b in 0..self.commits.used {
            self.send_batch(b, ctx);
        }
        self.commits.used = 0;
    }

    /// Sends batch `b` (it stays in use, empty, until the flush).
    fn send_batch(&mut self, b: usize, ctx: &mut Context<'_>) {
        let me = self.me;
        let batch = &mut self.commits.batches[b];
        let Some(first) = batch.first else {
            return;
        };
        match batch.tx_ids[..] {
            [] => {}
            [tx_id] => send_chain_req(first, tx_id, batch.epoch, me, &batch.next, ctx),
            _ => {
                self.counters.commit_batches += 1;
                ctx.send(
                    first,
                    SignalBody::LdmCommitBatchReq {
                        epoch: batch.epoch,
                        tc: me,
                        next: batch.next.clone(),
                        tx_ids: batch.tx_ids.clone(),
                    },
                )
            }
        }
        batch.tx_ids.clear();
    }
}

/// The commit of `tx_id` in `epoch` along `first`, then `next`, answered to `tc`.
pub(crate) fn send_chain_req(
    first: BlockRef,
    tx_id: u64,
    epoch: u64,
    tc: BlockRef,
    next: &[BlockRef],
    ctx: &mut Context<'_>,
) {
    let next = signal::RefChain::from_slice(next);
    ctx.send(
        first,
        SignalBody::LdmCommitChainReq {
            tx_id,
            epoch,
            tc,
            next,
        },
    );
}
