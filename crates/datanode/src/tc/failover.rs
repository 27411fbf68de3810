//! Data node failure, the TC's side (docs/transactions.md, "Node failure";
//! NDB: DBTC's node failure handling and TC takeover).
//!
//! Why here: a TC is the only block that knows a transaction's
//! participants and whether its commit is decided, so it is the one that
//! can give every transaction exactly one outcome when a node fails.
//!
//! - **Surviving TC.** When a view drops nodes (the local distribution
//!   block passes every view on), each transaction of this TC that is not
//!   committing and touches a failed node — a participant there, a request
//!   of the request in progress routed to or through it, a scan reading
//!   from it — is aborted on its live participants, and its client gets
//!   the temporary error 286 (now, or at its next request). A transaction
//!   whose commit or abort is in progress counts the failed participants'
//!   confirmations as done: their live replicas have the outcome. Routing
//!   follows the live map from then on, so a retry goes to the new
//!   primaries.
//! - **Takeover.** The transactions whose TC was on a failed node hold
//!   locks and prepared rows on the survivors. The distribution master
//!   orders its node's TC instance 0 to take them over
//!   (`TcTakeOverReq`): it asks every LDM instance of every live member
//!   for the transactions of the failed nodes' TCs (`LdmTakeOverReq`), and
//!   when all have answered gives each transaction one outcome: commit in
//!   its GCI if any replica committed it (the commit was decided), else
//!   abort; it sends that to every instance that holds the transaction
//!   prepared and, once all confirmed, answers the master. A later request
//!   (a failure during the takeover: the union of the failed nodes)
//!   replaces the one in progress, which is harmless: an LDM forgets a
//!   transaction only once it has its outcome, and keeps committed ones
//!   until their GCI is saved.

use std::collections::{BTreeMap, BTreeSet};

use kernel::Context;
use proto::error;
use signal::{BlockNumber, BlockRef, MembershipView, NodeBitmask, SignalBody};

use super::transaction::{AbortReply, TxState};
use super::TcBlock;

/// Transactions of failed TCs one takeover handles at most; beyond it the
/// takeover is a bug (every TC holds at most `MaxNoOfConcurrentTransactions`).
pub const TAKEOVER_TRANSACTIONS_MAX: usize = 1 << 22;

/// One transaction of a failed TC, as the LDMs reported it.
#[derive(Debug, Default)]
struct TakenTransaction {
    /// The epoch a replica committed it in; 0 when none did.
    committed_epoch: u64,
    /// LDM instances holding it prepared.
    prepared: Vec<BlockRef>,
}

/// A takeover in progress.
#[derive(Debug)]
pub(crate) struct Takeover {
    id: u32,
    failed: NodeBitmask,
    master: BlockRef,
    /// LDM instances that have not sent their last `LdmTakeOverConf`.
    asking: BTreeSet<BlockRef>,
    transactions: BTreeMap<u64, TakenTransaction>,
    /// (transaction, LDM instance) whose commit or abort confirmation is
    /// still to come; filled once every LDM has answered.
    finishing: BTreeSet<(u64, BlockRef)>,
}

impl TcBlock {
    /// A view from the local distribution block: route by it, and end
    /// what the failed nodes leave behind.
    pub(crate) fn on_view(&mut self, view: &MembershipView, ctx: &mut Context<'_>) {
        let left = self.map.on_view(view);
        if left.is_empty() {
            return;
        }
        let down = self.map.down();
        tracing::info!(tc = %self.me, "data nodes {left:?} failed: ending the transactions that touched them");
        let scanning: BTreeSet<u64> = self
            .scans
            .used_slots()
            .map(|s| self.scans.get(s))
            .filter(|scan| scan.reaches(&down))
            .map(|scan| scan.tx_id)
            .collect();
        let mut slots: Vec<u32> = self.transactions.used_slots().collect();
        slots.sort_unstable();
        for slot in slots {
            let tx = self.transactions.get(slot);
            let on_down = tx
                .participants
                .iter()
                .filter(|p| !p.done && down.contains(p.node))
                .count();
            let primary_down = tx
                .participants
                .first()
                .is_some_and(|p| down.contains(p.node));
            let decided_by_backup = tx.state.one_phase_out() && tx.participants.len() == 2;
            let backup_down = tx
                .participants
                .get(1)
                .is_some_and(|p| down.contains(p.node));
            match tx.state {
                // A one-phase commit over two replicas whose primary lives:
                // the primary decides for a failed backup (it commits), and
                // answers as it would have.
                TxState::Executing { .. } if decided_by_backup && !primary_down => {}
                TxState::Idle | TxState::Executing { .. } => {
                    let touches = on_down > 0
                        || (tx.state.is_executing() && tx.routed.intersects(&down))
                        || scanning.contains(&tx.tx_id);
                    if touches {
                        self.node_failure_abort(slot, ctx);
                    }
                }
                TxState::Aborting { one_phase: true }
                    if decided_by_backup && primary_down && !backup_down =>
                {
                    self.abort_at_backup(slot, ctx);
                }
                // Its chains through the failed nodes run again without them.
                TxState::Committing => self.commit_after_failure(slot, ctx),
                TxState::Aborting { .. } => {
                    let tx = self.transactions.get_mut(slot);
                    for p in &mut tx.participants {
                        if down.contains(p.node) {
                            p.done = true;
                        }
                    }
                    // The last of these ends the transaction.
                    for _ in 0..on_down {
                        self.abort_confirmed(slot, ctx);
                    }
                }
                // Decided; `start_commit` leaves the failed participants out.
                TxState::WaitingForGci => {}
            }
        }
    }

    /// A one-phase commit over two replicas whose abort went to its primary
    /// (`abort`) lost the primary: its backup may have committed it, so it
    /// is asked now (`LdmOutcomeReq`); its answer decides what the client
    /// learns.
    fn abort_at_backup(&mut self, slot: u32, ctx: &mut Context<'_>) {
        let down = self.map.down();
        let tx = self.transactions.get_mut(slot);
        if tx.participants[0].done {
            // The primary confirmed the abort: the backup had aborted first.
            return;
        }
        assert_eq!(tx.confs_waiting, 1, "the abort went to the primary alone");
        tx.confs_waiting = super::transaction::abort_decided_by_backup(tx, &down, ctx);
        if tx.confs_waiting == 0 {
            self.end_transaction(slot, false, ctx);
        }
    }

    /// Aborts a transaction that a node failure broke: temporary error 286
    /// to its client now (a request in progress) or at its next request.
    pub(super) fn node_failure_abort(&mut self, slot: u32, ctx: &mut Context<'_>) {
        let why = format!(
            "a data node it used failed (nodes down: {:?})",
            self.map.down()
        );
        self.cluster_change_abort(slot, &why, ctx);
    }

    /// Aborts a transaction that a change of the cluster's data nodes (a
    /// failure, a node restart that cannot wait for it) ends: temporary
    /// error 286 to its client now (a request in progress) or at its next
    /// request.
    pub(super) fn cluster_change_abort(&mut self, slot: u32, why: &str, ctx: &mut Context<'_>) {
        let tx = self.transactions.get(slot);
        let (tx_id, executing) = (tx.tx_id, tx.state.is_executing());
        let message = format!(
            "transaction {tx_id:#x} on {}: {why}; it is rolled back, retry it",
            self.me
        );
        self.counters.node_failure_aborts += 1;
        self.close_scans_of(slot, error::NODE_FAILURE_ABORTED, &message, ctx);
        let tx = self.transactions.get(slot);
        let reply = if executing && tx.is_one_phase() && tx.participants.len() == 1 {
            // Its one LDM may have committed it before it failed (one-phase
            // commit); a live one that did says so before the abort's answer,
            // and the commit stands.
            AbortReply::Failed {
                code: error::NODE_FAILURE,
                op_index: u32::MAX,
                message: format!(
                    "transaction {tx_id:#x} on {}: {why} while committing it; it may have committed",
                    self.me
                ),
            }
        } else if executing {
            AbortReply::Failed {
                code: error::NODE_FAILURE_ABORTED,
                op_index: u32::MAX,
                message,
            }
        } else {
            self.node_failure_aborted.remember(tx_id);
            AbortReply::None
        };
        self.abort(slot, reply, ctx);
    }

    /// The distribution master orders a takeover of the transactions of
    /// the TCs of `failed`; it replaces one in progress.
    pub(crate) fn on_takeover_req(
        &mut self,
        master: BlockRef,
        id: u32,
        failed: NodeBitmask,
        ctx: &mut Context<'_>,
    ) {
        assert!(
            !failed.contains(self.config.node),
            "{} asked to take over its own node",
            self.me
        );
        if let Some(old) = &self.takeover {
            tracing::info!(tc = %self.me, "takeover {} replaced by takeover {id} of {failed:?}", old.id);
        }
        let live = self.map.members().difference(&failed);
        let mut asking = BTreeSet::new();
        for node in live.iter() {
            for i in 0..self.config.placement.ldm_instances() {
                let ldm = BlockRef::new(node, BlockNumber::LOCAL_DATA_MANAGER, i as u16);
                ctx.send(
                    ldm,
                    SignalBody::LdmTakeOverReq {
                        takeover_id: id,
                        failed,
                    },
                );
                asking.insert(ldm);
            }
        }
        assert!(!asking.is_empty(), "this node's LDMs are asked");
        self.takeover = Some(Takeover {
            id,
            failed,
            master,
            asking,
            transactions: BTreeMap::new(),
            finishing: BTreeSet::new(),
        });
    }

    /// A part of an LDM's report.
    pub(crate) fn on_ldm_takeover_conf(
        &mut self,
        from: BlockRef,
        id: u32,
        tx_ids: &[u64],
        epochs: &[u64],
        last: bool,
        ctx: &mut Context<'_>,
    ) {
        let Some(takeover) = self.takeover.as_mut().filter(|t| t.id == id) else {
            return;
        };
        if !takeover.asking.contains(&from) {
            tracing::warn!(tc = %self.me, "LdmTakeOverConf of takeover {id} from {from}, not asked: ignored");
            return;
        }
        if tx_ids.len() != epochs.len() {
            tracing::error!(
                tc = %self.me,
                "LdmTakeOverConf from {from}: {} transactions, {} epochs: ignored",
                tx_ids.len(),
                epochs.len()
            );
            return;
        }
        for (&tx_id, &epoch) in tx_ids.iter().zip(epochs) {
            let taken = takeover.transactions.entry(tx_id).or_default();
            if epoch == 0 {
                taken.prepared.push(from);
            } else {
                assert!(
                    taken.committed_epoch == 0 || taken.committed_epoch == epoch,
                    "transaction {tx_id:#x} committed in epoch {:#x} and in epoch {epoch:#x}: \
                     one outcome, one epoch",
                    taken.committed_epoch
                );
                taken.committed_epoch = epoch;
            }
        }
        assert!(
            takeover.transactions.len() <= TAKEOVER_TRANSACTIONS_MAX,
            "takeover {id}: more than {TAKEOVER_TRANSACTIONS_MAX} transactions"
        );
        if last {
            takeover.asking.remove(&from);
            if takeover.asking.is_empty() {
                self.decide_takeover(ctx);
            }
        }
    }

    /// Every LDM answered: one outcome per transaction, sent to every
    /// instance holding it prepared.
    fn decide_takeover(&mut self, ctx: &mut Context<'_>) {
        let takeover = self.takeover.as_mut().expect("a takeover in progress");
        let (mut commits, mut aborts) = (0u64, 0u64);
        for (&tx_id, taken) in &takeover.transactions {
            let body = if taken.committed_epoch != 0 {
                commits += 1;
                SignalBody::LdmCommitReq {
                    tx_id,
                    // The epoch the other replicas committed in: the
                    // change stream files these replicas' changes there.
                    epoch: taken.committed_epoch,
                }
            } else {
                aborts += 1;
                SignalBody::LdmAbortReq { tx_id }
            };
            for &ldm in &taken.prepared {
                ctx.send(ldm, body.clone());
                takeover.finishing.insert((tx_id, ldm));
            }
        }
        tracing::info!(
            tc = %self.me,
            "takeover {} of {:?}: {commits} transactions commit, {aborts} abort",
            takeover.id,
            takeover.failed
        );
        self.counters.taken_over += commits + aborts;
        takeover.transactions.clear();
        self.finish_takeover_if_done(ctx);
    }

    /// A commit or abort confirmation for a transaction this TC does not
    /// run: one of a takeover, or late.
    pub(crate) fn takeover_conf(&mut self, from: BlockRef, tx_id: u64, ctx: &mut Context<'_>) {
        let Some(takeover) = self.takeover.as_mut() else {
            return;
        };
        if takeover.asking.is_empty() && takeover.finishing.remove(&(tx_id, from)) {
            self.finish_takeover_if_done(ctx);
        }
    }

    fn finish_takeover_if_done(&mut self, ctx: &mut Context<'_>) {
        let takeover = self.takeover.as_ref().expect("a takeover in progress");
        if !takeover.asking.is_empty() || !takeover.finishing.is_empty() {
            return;
        }
        let takeover = self.takeover.take().expect("checked");
        tracing::info!(tc = %self.me, "takeover {} of {:?} done", takeover.id, takeover.failed);
        ctx.send(
            takeover.master,
            SignalBody::TcTakeOverConf {
                takeover_id: takeover.id,
                failed: takeover.failed,
            },
        );
    }
}
