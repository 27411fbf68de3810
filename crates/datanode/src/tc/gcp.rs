//! The TC side of global checkpoints (docs/transactions.md, "Global
//! checkpoints").
//!
//! **Why the switch has two phases.** A commit's GCI is the TC's current
//! one when the commit reaches its commit point. If TCs switched to `g + 1`
//! on one signal, a TC that heard it first could commit T1 in `g + 1`
//! while a TC that had not yet heard it commits T2, which read T1's row,
//! in `g`: a restore to `g` would hold T2 without T1. So the master first
//! sends `GcpPrepareReq { g + 1 }`: each TC stops handing out GCIs (a
//! commit that reaches its commit point waits in `waiting_for_gci`) and
//! answers at once. Only when every TC answered does the master send
//! `GcpCommitReq { g + 1 }`: the TC switches and the held commits go on.
//! Every commit of `g` then began before any commit of `g + 1`, on every
//! TC. The hold lasts one round trip to the master and back; nothing slow
//! (no disk) runs inside it.
//!
//! A TC answers `GcpCommitConf` once no commit of an epoch below the new
//! one is in progress here: the master saves `g` only after that, and
//! reports the epoch before the switch complete (`SubGcpCompleteRep`).
//!
//! **Epochs.** What is switched is the 64-bit epoch (`signal::epoch`):
//! every `TimeBetweenEpochs` to `(hi, lo + 1)` (a micro-GCP: the switch
//! alone), every `TimeBetweenGlobalCheckpoints` to `(hi + 1, 0)`. The
//! commit reply (`TcKeyConf`) carries the whole epoch; only hi (`gci`)
//! reaches the LDMs, the redo log and `TcWaitGciReq`.

use kernel::Context;
use signal::{BlockRef, SignalBody};

use super::{TcBlock, GCI_WAITERS_MAX};
use crate::distribution::incarnation::{Incarnation, Judgement};

/// Commits in progress per epoch: (epoch, count) ascending by epoch, each
/// count above 0 (an epoch leaves when its last commit is done).
///
/// Every commit is counted in the TC's current epoch, which never goes
/// down (`on_gcp_commit`), so a new count is always at the end: the usual
/// list is one or two epochs, the current one last, and counting a commit
/// in or out is a look at the last entry (this was a `BTreeMap`, whose
/// entry and removal cost more on every commit).
#[derive(Debug, Default)]
pub(crate) struct EpochCommits {
    counts: Vec<(u64, u32)>,
}

impl EpochCommits {
    /// One commit more in progress in `epoch`.
    ///
    /// # Panics
    /// When `epoch` is below an epoch counted already: commits are counted
    /// in the current epoch, which never goes down.
    #[inline]
    pub(crate) fn add(&mut self, epoch: u64) {
        match self.counts.last_mut() {
            Some((last, count)) if *last == epoch => *count += 1,
            _ => self.add_epoch(epoch),
        }
    }

    #[cold]
    fn add_epoch(&mut self, epoch: u64) {
        if let Some(&(last, _)) = self.counts.last() {
            assert!(
                last < epoch,
                "a commit counted in epoch {epoch:#x}, below epoch {last:#x} counted before"
            );
        }
        self.counts.push((epoch, 1));
    }

    /// One commit of `epoch` is no longer in progress.
    ///
    /// # Panics
    /// When no commit is counted in `epoch`.
    #[inline]
    pub(crate) fn remove(&mut self, epoch: u64) {
        match self.counts.last_mut() {
            Some((last, count)) if *last == epoch && *count > 1 => *count -= 1,
            _ => self.remove_at(epoch),
        }
    }

    /// [`EpochCommits::remove`] of an epoch's last commit, or of a commit
    /// in an older epoch.
    #[cold]
    fn remove_at(&mut self, epoch: u64) {
        let at = self
            .counts
            .iter()
            .rposition(|&(e, _)| e == epoch)
            .unwrap_or_else(|| panic!("no commit is counted in epoch {epoch:#x}"));
        let count = &mut self.counts[at].1;
        *count -= 1;
        if *count == 0 {
            self.counts.remove(at);
        }
    }

    /// (epoch, commits in progress) ascending by epoch (for the checker).
    pub(crate) fn counts(&self) -> Vec<(u64, u32)> {
        self.counts.clone()
    }

    /// Whether a commit of an epoch below `epoch` is in progress.
    pub(crate) fn any_below(&self, epoch: u64) -> bool {
        self.counts.first().is_some_and(|&(e, _)| e < epoch)
    }

    /// Whether a commit of `epoch` or below is in progress.
    pub(crate) fn any_up_to(&self, epoch: u64) -> bool {
        self.counts.first().is_some_and(|&(e, _)| e <= epoch)
    }
}

impl TcBlock {
    /// The epoch new commits use (0 before the first global checkpoint).
    pub fn current_epoch(&self) -> u64 {
        self.epoch
    }

    /// The last epoch the master reported complete: no commit of it or
    /// below is in progress on any TC.
    pub fn complete_epoch(&self) -> u64 {
        self.complete_epoch
    }

    /// First phase of a switch: hold commits and answer.
    pub(super) fn on_gcp_prepare(&mut self, from: BlockRef, epoch: u64, ctx: &mut Context<'_>) {
        if epoch > self.epoch {
            self.gci_held = Some(self.gci_held.map_or(epoch, |held| held.max(epoch)));
        }
        ctx.send(from, SignalBody::GcpPrepareConf { epoch });
    }

    /// Second phase: switch to `epoch`, let the held commits go on, and
    /// answer once the older commits here are done.
    pub(super) fn on_gcp_commit(&mut self, from: BlockRef, epoch: u64, ctx: &mut Context<'_>) {
        if self.gci_held.is_some_and(|held| held <= epoch) {
            self.gci_held = None;
        }
        if epoch > self.epoch {
            self.previous_epoch = self.epoch;
            self.epoch = epoch;
            self.gci = signal::epoch::hi(epoch);
        }
        if self.gci_held.is_none() && self.gci > 0 {
            let waiting = std::mem::take(&mut self.waiting_for_gci);
            for slot in &waiting {
                self.start_commit(*slot, ctx);
            }
            self.waiting_for_gci = waiting;
            self.waiting_for_gci.clear();
        }
        self.commit_pending = Some((epoch, from));
        self.check_commit(ctx);
    }

    /// Answers the pending `GcpCommitReq` once no commit of a lower epoch
    /// is in progress. Runs after every commit: inlined, so that the usual
    /// case (no switch pending) is one test.
    #[inline]
    pub(crate) fn check_commit(&mut self, ctx: &mut Context<'_>) {
        if self.commit_pending.is_some() {
            self.check_pending_commit(ctx);
        }
    }

    fn check_pending_commit(&mut self, ctx: &mut Context<'_>) {
        let Some((epoch, master)) = self.commit_pending else {
            return;
        };
        if self.commits_in_progress.any_below(epoch) {
            return;
        }
        self.commit_pending = None;
        ctx.send(master, SignalBody::GcpCommitConf { epoch });
    }

    pub(super) fn on_epoch_complete(&mut self, epoch: u64) {
        // A new master may report again an epoch an old one reported. The
        // epoch may be above this TC's own: a TC that joined during the
        // round never committed in it.
        assert!(
            !self.commits_in_progress.any_up_to(epoch),
            "{}: epoch {epoch:#x} reported complete with commits of it in progress here",
            self.me
        );
        if epoch > self.complete_epoch {
            self.complete_epoch = epoch;
            self.counters.epochs_completed += 1;
        }
    }

    pub(super) fn on_gcp_complete(&mut self, gci: u32, ctx: &mut Context<'_>) {
        if gci <= self.durable_gci {
            return;
        }
        self.durable_gci = gci;
        let durable = self.durable_gci;
        self.gci_waiters.retain(|&(api, asked, incarnation)| {
            if asked <= durable {
                ctx.send(
                    api,
                    SignalBody::TcWaitGciConf {
                        gci: asked,
                        incarnation,
                        durable_gci: durable,
                    },
                );
                false
            } else {
                true
            }
        });
    }

    /// The incarnation a `GcpCommitReq` names. It never changes in a TC's
    /// life: a new incarnation begins only with a system restart, which
    /// starts every node's blocks anew, and a master that takes over keeps
    /// the one its TCs report (`GcpStartConf`).
    pub(super) fn on_incarnation(&mut self, told: Incarnation) {
        assert_ne!(told.id, 0, "{}: GcpCommitReq names no incarnation", self.me);
        if self.incarnation.id == 0 {
            self.incarnation = told;
        }
        assert_eq!(
            self.incarnation, told,
            "{}: the cluster incarnation changed while this TC ran",
            self.me
        );
    }

    /// `TcWaitGciReq { gci, incarnation }`: a GCI of another incarnation
    /// than this TC's is judged at once against the system restart that
    /// began this one (`Incarnation::judge`); one of this incarnation (or
    /// of none named) waits until it is durable.
    pub(super) fn on_wait_gci(
        &mut self,
        from: BlockRef,
        gci: u32,
        incarnation: u32,
        ctx: &mut Context<'_>,
    ) {
        let now = self.incarnation;
        let refuse = |code: u32, message: String| SignalBody::TcWaitGciRef {
            gci,
            incarnation,
            code,
            message,
        };
        let answer = match now.judge(incarnation, gci) {
            Judgement::Current => None,
            Judgement::Restored => Some(SignalBody::TcWaitGciConf {
                gci,
                incarnation,
                durable_gci: now.restart_gci,
            }),
            Judgement::Lost => Some(refuse(
                proto::error::COMMIT_LOST_BY_RESTART,
                format!(
                    "GCI {gci} of cluster incarnation {incarnation:#x} was lost: \
                     a system restart went back to GCI {} (now incarnation {:#x})",
                    now.restart_gci, now.id
                ),
            )),
            Judgement::Unknown => Some(refuse(
                proto::error::DURABILITY_UNKNOWN,
                format!(
                    "GCI {gci} of cluster incarnation {incarnation:#x}: the cluster restarted more \
                     than once since (incarnation {:#x}, restored to GCI {} of {:#x}); read the row to find out",
                    now.id, now.restart_gci, now.previous
                ),
            )),
            Judgement::NotStarted => Some(refuse(
                proto::error::NOT_STARTED,
                format!(
                    "GCI {gci} of cluster incarnation {incarnation:#x}: this TC has not learned \
                     the cluster's incarnation yet; ask again"
                ),
            )),
        };
        if let Some(answer) = answer {
            ctx.send(from, answer);
            return;
        }
        if gci <= self.durable_gci || self.gci_waiters.len() >= GCI_WAITERS_MAX {
            ctx.send(
                from,
                SignalBody::TcWaitGciConf {
                    gci,
                    incarnation,
                    durable_gci: self.durable_gci,
                },
            );
            return;
        }
        self.gci_waiters.push((from, gci, incarnation));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch_commits_count_each_epoch_until_its_last_commit_ends() {
        let mut commits = EpochCommits::default();
        assert!(!commits.any_up_to(u64::MAX));
        commits.add(5);
        commits.add(5);
        commits.add(7);
        assert_eq!(commits.counts, vec![(5, 2), (7, 1)]);
        assert!(!commits.any_below(5));
        assert!(commits.any_below(6));
        assert!(commits.any_up_to(5));
        assert!(!commits.any_up_to(4));
        // The newest epoch's last commit, then an older one's.
        commits.remove(7);
        assert_eq!(commits.counts, vec![(5, 2)]);
        commits.add(7);
        commits.remove(5);
        assert_eq!(commits.counts, vec![(5, 1), (7, 1)]);
        commits.remove(5);
        assert_eq!(commits.counts, vec![(7, 1)]);
        assert!(!commits.any_below(7));
        assert!(commits.any_up_to(7));
        commits.add(7);
        commits.remove(7);
        commits.remove(7);
        assert!(commits.counts.is_empty());
        assert!(!commits.any_up_to(u64::MAX));
    }

    #[test]
    #[should_panic(expected = "below epoch")]
    fn a_commit_in_an_epoch_below_a_counted_one_is_refused() {
        let mut commits = EpochCommits::default();
        commits.add(7);
        commits.add(5);
    }

    #[test]
    #[should_panic(expected = "no commit is counted in epoch")]
    fn a_commit_never_counted_cannot_end() {
        let mut commits = EpochCommits::default();
        commits.add(7);
        commits.remove(5);
    }
}
