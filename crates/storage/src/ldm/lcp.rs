//! Local checkpoint rounds of an LDM instance (NDB: an LCP round that DIH
//! starts and every LDM runs over its fragments).
//!
//! A round writes one LCP of every fragment, one fragment after the other,
//! a few pages per [`LdmInstance::lcp_step`], so that transactions run in
//! between. A fragment whose pages are all written waits until every GCI
//! whose changes it may hold is durable (`flush_gci`), and only then is its
//! LCP finished (made complete): a complete LCP must never hold a change
//! that recovery would not replay. When every fragment's LCP is complete
//! the round trims the redo log to what the fragments still need. A round
//! that fails is abandoned as a whole: its writers are dropped (their files
//! are debris that the next complete LCP prunes) and the next LCP of each
//! of those fragments is a full one (the checkpoint module enforces it).

use crate::checkpoint::{self, CheckpointWriter, LcpStart, Progress};
use crate::Gci;

use super::{
    FragmentKey, LdmError, LdmInstance, LCP_FRAGMENTS_AWAITING_MAX, LCP_PAGES_PER_STEP_MAX,
};

/// What an [`LdmInstance::lcp_step`] left to do.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum LcpProgress {
    /// No LCP runs: [`LdmInstance::start_lcp`] starts one.
    Idle,
    /// Pages remain to be written: step again.
    Writing {
        lcp_id: u64,
        /// Fragments whose LCP of this round is complete.
        fragments_done: u32,
        fragments: u32,
    },
    /// Every page that may be written now is written; the LCPs written
    /// complete once GCI `gci` is durable ([`LdmInstance::flush_gci`]).
    AwaitingGci { lcp_id: u64, gci: Gci },
    /// This step completed the round: every fragment's LCP is complete and
    /// the redo log was trimmed by `redo_freed_bytes`.
    Completed {
        lcp_id: u64,
        fragments: u32,
        redo_freed_bytes: u64,
    },
}

/// The LCP round in progress.
pub(super) struct LcpRound {
    lcp_id: u64,
    /// Fragments whose LCP has not started, the next one last.
    to_start: Vec<FragmentKey>,
    writing: Option<(FragmentKey, CheckpointWriter)>,
    /// Fragments whose pages are all written, in the order they got there.
    awaiting: Vec<Awaiting>,
    /// Fragments in the round (less those dropped before they completed).
    fragments: u32,
    done: u32,
}

struct Awaiting {
    key: FragmentKey,
    writer: CheckpointWriter,
    /// The newest GCI whose changes the LCP may hold (`None`: nothing was
    /// ever committed): the LCP completes once it is durable.
    gci: Option<Gci>,
}

impl LcpRound {
    /// Takes a dropped fragment out of the round (its writer is dropped,
    /// and with it the LCP of that fragment).
    pub(super) fn forget(&mut self, key: FragmentKey) {
        let before = self.pending();
        self.to_start.retain(|k| *k != key);
        if self.writing.as_ref().is_some_and(|(k, _)| *k == key) {
            self.writing = None;
        }
        self.awaiting.retain(|a| a.key != key);
        let forgotten = before - self.pending();
        assert!(forgotten <= 1, "fragment {key:?} is in the round once");
        self.fragments -= forgotten;
    }

    /// Fragments of the round whose LCP is not complete yet.
    fn pending(&self) -> u32 {
        (self.to_start.len() + usize::from(self.writing.is_some()) + self.awaiting.len()) as u32
    }

    fn is_complete(&self) -> bool {
        self.pending() == 0
    }

    fn progress(&self) -> LcpProgress {
        let blocked = self.to_start.is_empty() || self.awaiting.len() >= LCP_FRAGMENTS_AWAITING_MAX;
        if self.writing.is_none() && !self.awaiting.is_empty() && blocked {
            let gci = self
                .awaiting
                .iter()
                .filter_map(|a| a.gci)
                .max()
                .expect("an LCP with nothing committed does not wait");
            return LcpProgress::AwaitingGci {
                lcp_id: self.lcp_id,
                gci,
            };
        }
        LcpProgress::Writing {
            lcp_id: self.lcp_id,
            fragments_done: self.done,
            fragments: self.fragments,
        }
    }
}

impl LdmInstance {
    /// Starts an LCP round over every fragment of the instance; the work
    /// happens in [`LdmInstance::lcp_step`]. Does nothing while a round
    /// runs.
    pub fn start_lcp(&mut self) -> Result<(), LdmError> {
        if self.lcp.is_some() {
            return Ok(());
        }
        let lcp_id = self.next_lcp_id;
        self.next_lcp_id += 1;
        let mut to_start: Vec<FragmentKey> = self.fragments.keys().copied().collect();
        to_start.reverse();
        self.lcp = Some(LcpRound {
            lcp_id,
            fragments: to_start.len() as u32,
            to_start,
            writing: None,
            awaiting: Vec::new(),
            done: 0,
        });
        Ok(())
    }

    /// Whether an LCP round runs.
    pub fn lcp_running(&self) -> bool {
        self.lcp.is_some()
    }

    /// Drives the LCP round: completes the fragments whose GCI became
    /// durable, writes up to `lcp_pages_per_step` pages (starting the next
    /// fragment's LCP when one is written), and, once every fragment's LCP
    /// is complete, trims the redo log and ends the round. On an error the
    /// round is abandoned (start another once the cause is gone); the LCPs
    /// it completed stay complete.
    pub fn lcp_step(&mut self) -> Result<LcpProgress, LdmError> {
        self.lcp_step_pages(self.config.lcp_pages_per_step)
    }

    /// [`LdmInstance::lcp_step`] with a budget of `pages` (1 to
    /// `LCP_PAGES_PER_STEP_MAX`) instead of `lcp_pages_per_step`: the
    /// caller speeds a checkpoint up while the redo log fills.
    pub fn lcp_step_pages(&mut self, pages: usize) -> Result<LcpProgress, LdmError> {
        assert!(
            (1..=LCP_PAGES_PER_STEP_MAX).contains(&pages),
            "LDM instance {}: an LCP step of {pages} pages is outside 1..={LCP_PAGES_PER_STEP_MAX}",
            self.config.instance
        );
        let Some(mut round) = self.lcp.take() else {
            return Ok(LcpProgress::Idle);
        };
        self.drive(&mut round, pages)?;
        if !round.is_complete() {
            let progress = round.progress();
            self.lcp = Some(round);
            return Ok(progress);
        }
        let redo_freed_bytes = self.trim_redo()?;
        Ok(LcpProgress::Completed {
            lcp_id: round.lcp_id,
            fragments: round.done,
            redo_freed_bytes,
        })
    }

    fn drive(&mut self, round: &mut LcpRound, pages: usize) -> Result<(), LdmError> {
        self.finish_durable(round)?;
        let mut budget = pages;
        while budget > 0 {
            let Some((key, writer)) = &mut round.writing else {
                if round.awaiting.len() >= LCP_FRAGMENTS_AWAITING_MAX {
                    break;
                }
                let Some(key) = round.to_start.pop() else {
                    break;
                };
                let writer = self.start_writer(round.lcp_id, key)?;
                round.writing = Some((key, writer));
                // Creating a file is work too: a round of many empty
                // fragments still moves in bounded steps.
                budget -= 1;
                continue;
            };
            let key = *key;
            let state = self
                .fragments
                .get_mut(&key)
                .expect("a fragment being checkpointed is in the instance (a drop forgets it)");
            let before = writer.pages_written();
            let progress = writer
                .step(&self.pool, state.fragment.row_store_mut(), budget)
                .map_err(|source| LdmError::Checkpoint {
                    instance: self.config.instance,
                    table_id: key.0,
                    fragment_id: key.1,
                    source: Box::new(source),
                })?;
            budget -= (writer.pages_written() - before).clamp(1, budget);
            if progress == Progress::Done {
                let (key, writer) = round.writing.take().expect("a writer is running");
                round.awaiting.push(Awaiting {
                    key,
                    writer,
                    gci: self.committed_gci,
                });
            }
        }
        self.finish_durable(round)
    }

    fn start_writer(
        &mut self,
        lcp_id: u64,
        key: FragmentKey,
    ) -> Result<CheckpointWriter, LdmError> {
        let redo_start = self.redo_start_now();
        let state = self
            .fragments
            .get_mut(&key)
            .expect("a fragment of the round is in the instance (a drop forgets it)");
        let start = LcpStart {
            table_id: key.0,
            table_version: state.fragment.table_version(),
            fragment_id: key.1,
            lcp_id,
            redo_start,
            max_gci: self.committed_gci.unwrap_or(0),
        };
        assert!(redo_start >= state.redo_needed_from);
        // At most COLUMNS_MAX (512).
        let columns = state.fragment.layout().column_count() as u16;
        CheckpointWriter::start_with_columns(
            &*self.disk,
            &self.lcp_dir,
            start,
            columns,
            state.last_lcp.as_ref(),
            state.fragment.row_store_mut(),
        )
        .map_err(|source| LdmError::Checkpoint {
            instance: self.config.instance,
            table_id: key.0,
            fragment_id: key.1,
            source: Box::new(source),
        })
    }

    /// Finishes (makes complete) every waiting LCP whose GCI is durable
    /// (and kept, see [`LdmInstance::set_kept_gci`]), then removes the files the fragment's restore no longer needs.
    fn finish_durable(&mut self, round: &mut LcpRound) -> Result<(), LdmError> {
        let durable = self.redo.durable_gci();
        let kept = self.kept_gci();
        let mut i = 0;
        while i < round.awaiting.len() {
            let needs = round.awaiting[i].gci;
            let waits = |gci: Gci| durable.is_none_or(|d| gci > d) || kept.is_some_and(|k| gci > k);
            if needs.is_some_and(waits) {
                i += 1;
                continue;
            }
            let Awaiting { key, writer, .. } = round.awaiting.remove(i);
            let instance = self.config.instance;
            let error = |source| LdmError::Checkpoint {
                instance,
                table_id: key.0,
                fragment_id: key.1,
                source: Box::new(source),
            };
            let completed = writer.finish(&*self.disk).map_err(error)?;
            let state = self
                .fragments
                .get_mut(&key)
                .expect("a fragment of the round is in the instance (a drop forgets it)");
            assert!(completed.redo_start >= state.redo_needed_from);
            state.redo_needed_from = completed.redo_start;
            state.last_lcp = Some(completed);
            round.done += 1;
            checkpoint::prune(&*self.disk, &self.lcp_dir, key.0, key.1).map_err(error)?;
        }
        Ok(())
    }
}
