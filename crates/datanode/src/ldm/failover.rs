//! Data node failure, the LDM's side (docs/transactions.md, "Node failure";
//! NDB: DBLQH's node failure handling and LQH_TRANSREQ).
//!
//! Why: the LDM holds the locks and prepared rows of transactions whose TC
//! may be on a node that failed, and passes writes to replicas that may be
//! gone. It must stop doing work for the dead, and tell the takeover TC
//! what state each orphaned transaction is in here.
//!
//! - The view (from the local distribution block) and every takeover
//!   request mark nodes down. A request from a TC on a down node is dropped
//!   (nobody would read its answer, and its locks would have no owner); the
//!   chain of a write loses its down nodes. Scans of a down node's TC close.
//! - `LdmTakeOverReq { failed }`: every transaction here whose TC is on a
//!   failed node is reported *prepared* (GCI 0), every one committed here
//!   whose GCI is not saved yet is reported with its GCI. A commit is
//!   remembered until `GcpSaveReq` covers its GCI: the master saves a GCI
//!   only after every commit in it is confirmed by every live participant
//!   and every takeover is done, so no takeover can need it afterwards.

use std::collections::VecDeque;

use kernel::Context;
use signal::{BlockRef, MembershipView, NodeBitmask, NodeId, SignalBody};
use storage::disk::Disk;

use super::LdmBlock;

/// Commits remembered at most; beyond it the oldest is forgotten and
/// counted (a takeover could then abort on another replica what this one
/// committed: sized for far more commits than one GCP interval sees).
pub const COMMITS_REMEMBERED_MAX: usize = 1 << 20;
/// Transactions in one `LdmTakeOverConf`.
pub const TAKEOVER_CONF_TRANSACTIONS_MAX: usize = 1_024;

/// Commits of this instance whose GCI is not saved yet: (transaction, its
/// TC's node, epoch), in commit order. The whole epoch, not only its GCI:
/// a takeover commits the transaction's other replicas in it, which files
/// their changes in the change stream's right epoch.
#[derive(Debug, Default)]
pub(super) struct RecentCommits {
    commits: VecDeque<(u64, NodeId, u64)>,
    /// Forgotten before their GCI was saved (over the limit).
    pub(super) forgotten: u64,
}

impl RecentCommits {
    pub(super) fn remember(&mut self, tx_id: u64, tc_node: NodeId, epoch: u64) {
        if self.commits.len() >= COMMITS_REMEMBERED_MAX {
            self.commits.pop_front();
            self.forgotten += 1;
        }
        self.commits.push_back((tx_id, tc_node, epoch));
    }

    /// GCI `gci` is saved: no takeover asks for commits at or below it.
    pub(super) fn saved(&mut self, gci: u32) {
        // Commits come in GCI order but for the few of two GCIs that
        // interleave around a GCP: those are dropped at the next save.
        while self
            .commits
            .front()
            .is_some_and(|c| signal::epoch::hi(c.2) <= gci)
        {
            self.commits.pop_front();
        }
    }

    /// The epoch `tx_id` committed in here, if it did and is remembered.
    /// O(commits remembered): asked only after a node failure.
    pub(super) fn epoch_of(&self, tx_id: u64) -> Option<u64> {
        self.commits
            .iter()
            .rev()
            .find(|c| c.0 == tx_id)
            .map(|c| c.2)
    }

    fn of(&self, failed: NodeBitmask) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.commits
            .iter()
            .filter(move |c| failed.contains(c.1))
            .map(|c| (c.0, c.2))
    }
}

impl<D: Disk + Clone + Send + 'static> LdmBlock<D> {
    /// Whether a request comes from a TC on a down node (then it is
    /// dropped); otherwise takes the down nodes out of its chain.
    pub(super) fn is_from_failed_tc(&self, tc: BlockRef, chain: &mut signal::Chain) -> bool {
        let down = self.live.down();
        if down.is_empty() {
            return false;
        }
        if down.contains(tc.node) {
            tracing::debug!(
                node = %self.config.node,
                "LDM instance {}: dropped a request from {tc}, whose node failed",
                self.config.instance
            );
            return true;
        }
        chain.retain(|n| !down.contains(n));
        false
    }

    pub(super) fn on_view(&mut self, view: &MembershipView, ctx: &mut Context<'_>) {
        let left = self.live.on_view(view);
        if !left.is_empty() {
            self.deciders_failed(&left, ctx);
            self.nodes_failed(&left);
            self.copies_on_failure(&left, ctx);
        }
    }

    fn nodes_failed(&mut self, failed: &NodeBitmask) {
        let closed = self.scans.close_tcs_on(failed);
        let orphans: Vec<u64> = self
            .txs
            .iter()
            .filter(|(_, r)| r.tc.is_some_and(|tc| failed.contains(tc.node)))
            .map(|(&tx_id, _)| tx_id)
            .collect();
        for &tx_id in &orphans {
            self.release_tx_if_idle(tx_id);
        }
        tracing::info!(
            node = %self.config.node,
            "LDM instance {}: nodes {failed:?} failed: {closed} scans of their TCs closed",
            self.config.instance
        );
    }

    /// Reports the transactions of the TCs of `failed` to the takeover TC.
    pub(super) fn on_takeover_req(
        &mut self,
        tc: BlockRef,
        takeover_id: u32,
        failed: NodeBitmask,
        ctx: &mut Context<'_>,
    ) {
        if self.failed {
            return;
        }
        assert!(
            !failed.contains(self.config.node),
            "LDM instance {} of node {} asked about its own node's failure",
            self.config.instance,
            self.config.node
        );
        self.live.mark_down(&failed);
        // Before the report: a commit decided here now is reported so.
        self.deciders_failed(&failed, ctx);
        self.nodes_failed(&failed);
        let mut report: Vec<(u64, u64)> = self
            .txs
            .iter()
            .filter(|(_, r)| r.tc.is_some_and(|tc| failed.contains(tc.node)))
            .map(|(&tx_id, _)| (tx_id, 0))
            .collect();
        // A commit waiting for redo space is a commit.
        for pending in &mut report {
            if let Some(p) = self.pending_commits.iter().find(|p| p.tx_id == pending.0) {
                pending.1 = p.epoch;
            }
        }
        report.extend(self.recent_commits.of(failed));
        // Deterministic order (the map's is not).
        report.sort_unstable();
        tracing::info!(
            node = %self.config.node,
            "LDM instance {}: takeover {takeover_id} of {failed:?}: {} transactions reported to {tc}",
            self.config.instance,
            report.len()
        );
        let mut parts = report.chunks(TAKEOVER_CONF_TRANSACTIONS_MAX).peekable();
        if parts.peek().is_none() {
            ctx.send(
                tc,
                SignalBody::LdmTakeOverConf {
                    takeover_id,
                    tx_ids: Vec::new(),
                    epochs: Vec::new(),
                    last: true,
                },
            );
        }
        while let Some(part) = parts.next() {
            ctx.send(
                tc,
                SignalBody::LdmTakeOverConf {
                    takeover_id,
                    tx_ids: part.iter().map(|r| r.0).collect(),
                    epochs: part.iter().map(|r| r.1).collect(),
                    last: parts.peek().is_none(),
                },
            );
        }
    }

    /// `LdmOutcomeReq`: a TC lost the primary of a one-phase commit over
    /// two replicas that this instance, its backup, decides. Committed here
    /// (or committing): `LdmCommitConf`, now or once the redo log took it;
    /// else it is aborted here for good (a request of it still on its way
    /// from the failed primary is dropped) and `LdmAbortConf` answers.
    pub(super) fn on_outcome_req(&mut self, sender: BlockRef, tx_id: u64, ctx: &mut Context<'_>) {
        if self.failed {
            return;
        }
        if let Some(pending) = self.pending_commits.iter_mut().find(|p| p.tx_id == tx_id) {
            // It answers the TC once done, instead of the failed primary.
            pending.reply_to = sender;
            pending.next = signal::RefChain::new();
            return;
        }
        if let Some(epoch) = self.recent_commits.epoch_of(tx_id) {
            let gci = signal::epoch::hi(epoch);
            return ctx.send(sender, SignalBody::LdmCommitConf { tx_id, gci });
        }
        self.abort_here(tx_id);
        ctx.send(sender, SignalBody::LdmAbortConf { tx_id });
        self.run_grants(ctx);
        self.check_alter(ctx);
    }

    /// Commits forgotten before their GCI was saved (should stay 0).
    pub fn commits_forgotten(&self) -> u64 {
        self.recent_commits.forgotten
    }
}
