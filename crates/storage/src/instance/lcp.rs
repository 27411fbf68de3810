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
//! that fails is abandoned as a whole: the data files its writers began are
//! removed (a full disk would otherwise gain a file per failed round; what
//! a crash leaves is debris that the next complete LCP prunes) and the next
//! LCP of each of those fragments is a full one (the checkpoint module
//! enforces it).
//!
//! File syncs off the caller's thread: pages are written by the step
//! itself ([`LdmInstance::lcp_step_begin`]), but finishing an LCP (the
//! data file's fsync, the control file written atomically, older files
//! pruned) and the trim's control file are handed out as an [`LcpSync`]
//! to run on an `io` thread; [`LdmInstance::lcp_step_complete`] takes its
//! outcome. An LCP counts as complete (the fragment's restore point, what
//! the trim may rely on) only there, after its files are synced; the
//! redo tail moves only once the new tail is durable. One sync in flight
//! per round; [`LdmInstance::lcp_step_pages`] does all of it on the
//! calling thread.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use crate::checkpoint::{
    self, CheckpointError, CheckpointWriter, CompletedLcp, LcpStart, Progress,
};
use crate::disk::Disk;
use crate::redo::RedoTrim;
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
    /// Checkpoint files are being synced ([`LcpSync`], on an `io` thread):
    /// step again once [`LdmInstance::lcp_step_complete`] took its outcome.
    Syncing { lcp_id: u64 },
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
    /// Fragments whose LCP an [`LcpSync`] in flight finishes, each with
    /// the flag a drop sets to cancel it ([`Finishing::cancel`]).
    in_flight: Vec<(FragmentKey, Arc<Mutex<bool>>)>,
    /// An [`LcpSync`] of this round is in flight.
    syncing: bool,
}

/// Checkpoint file work to run on an `io` thread ([`LcpSync::run`]):
/// finishing the LCPs whose GCI became durable, or the redo trim that ends
/// the round. See the module documentation.
pub struct LcpSync {
    disk: Arc<Mutex<Box<dyn Disk>>>,
    dir: PathBuf,
    finishing: Vec<Finishing>,
    trim: Option<RedoTrim>,
    trim_outcome: Option<Result<(), String>>,
    ran: bool,
}

struct Finishing {
    key: FragmentKey,
    /// Taken by the run (dropped unused when cancelled).
    writer: Option<CheckpointWriter>,
    /// Set, under its lock, by a drop of the fragment: the run then
    /// leaves this LCP unfinished. The run holds the lock while it
    /// finishes the LCP, so a drop waits for a finish begun and then
    /// removes its files.
    cancel: Arc<Mutex<bool>>,
    result: Option<Result<CompletedLcp, CheckpointError>>,
}

impl std::fmt::Debug for LcpSync {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let keys: Vec<FragmentKey> = self.finishing.iter().map(|i| i.key).collect();
        f.debug_struct("LcpSync")
            .field("finishing", &keys)
            .field("trim", &self.trim)
            .field("ran", &self.ran)
            .finish()
    }
}

impl LcpSync {
    /// Finishes the LCPs (data file fsync, control file, pruning) and
    /// writes the trim's control file, on the calling thread (an `io`
    /// thread). Each outcome is kept for [`LdmInstance::lcp_step_complete`];
    /// `Err` is the first failure in words.
    pub fn run(&mut self) -> Result<(), String> {
        assert!(!self.ran, "an LCP sync runs once");
        self.ran = true;
        let disk = self.disk.lock().unwrap_or_else(PoisonError::into_inner);
        let mut first_error = None;
        for item in &mut self.finishing {
            let cancelled = item.cancel.lock().unwrap_or_else(PoisonError::into_inner);
            if *cancelled {
                continue;
            }
            let writer = item.writer.take().expect("each LCP is finished once");
            let (table_id, fragment_id) = item.key;
            let result = writer.finish(&**disk).and_then(|completed| {
                checkpoint::prune(&**disk, &self.dir, table_id, fragment_id).map(|_| completed)
            });
            if let Err(error) = &result {
                first_error.get_or_insert_with(|| error.to_string());
            }
            item.result = Some(result);
            drop(cancelled);
        }
        if let Some(trim) = &self.trim {
            let outcome = trim.run(&**disk);
            if let Err(error) = &outcome {
                first_error.get_or_insert_with(|| error.clone());
            }
            self.trim_outcome = Some(outcome);
        }
        first_error.map_or(Ok(()), Err)
    }

    /// LCPs it finishes.
    pub fn fragments(&self) -> usize {
        self.finishing.len()
    }
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
        if let Some(at) = self.in_flight.iter().position(|(k, _)| *k == key) {
            let (_, cancel) = self.in_flight.remove(at);
            // Waits for a finish of this LCP that already began.
            *cancel.lock().unwrap_or_else(PoisonError::into_inner) = true;
        }
        let forgotten = before - self.pending();
        assert!(forgotten <= 1, "fragment {key:?} is in the round once");
        self.fragments -= forgotten;
    }

    /// Fragments of the round whose LCP is not complete yet.
    fn pending(&self) -> u32 {
        (self.to_start.len()
            + usize::from(self.writing.is_some())
            + self.awaiting.len()
            + self.in_flight.len()) as u32
    }

    fn is_complete(&self) -> bool {
        self.pending() == 0
    }

    fn progress(&self) -> LcpProgress {
        if self.syncing {
            return LcpProgress::Syncing {
                lcp_id: self.lcp_id,
            };
        }
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
            in_flight: Vec::new(),
            syncing: false,
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
    /// caller speeds a checkpoint up while the redo log fills. Runs the
    /// step's file syncs on the calling thread ([`LcpSync::run`]).
    pub fn lcp_step_pages(&mut self, pages: usize) -> Result<LcpProgress, LdmError> {
        let (mut progress, mut sync) = self.lcp_step_begin(pages)?;
        while let Some(mut files) = sync.take() {
            // Failures are in the sync's outcomes.
            let _ = files.run();
            progress = self.lcp_step_complete(files)?;
            if self.lcp.as_ref().is_some_and(LcpRound::is_complete) {
                (progress, sync) = self.lcp_step_begin(pages)?;
            }
        }
        Ok(progress)
    }

    /// One step of the LCP round that writes pages (up to `pages`) but
    /// syncs nothing: the files to sync — the LCPs whose GCI is durable
    /// now, or the redo trim once every fragment's LCP is complete — come
    /// back as an [`LcpSync`] to run on an `io` thread, whose outcome goes
    /// to [`LdmInstance::lcp_step_complete`] (meanwhile steps return
    /// `Syncing`). On an error the round is abandoned.
    pub fn lcp_step_begin(
        &mut self,
        pages: usize,
    ) -> Result<(LcpProgress, Option<LcpSync>), LdmError> {
        assert!(
            (1..=LCP_PAGES_PER_STEP_MAX).contains(&pages),
            "LDM instance {}: an LCP step of {pages} pages is outside 1..={LCP_PAGES_PER_STEP_MAX}",
            self.config.instance
        );
        let Some(mut round) = self.lcp.take() else {
            return Ok((LcpProgress::Idle, None));
        };
        if round.syncing {
            let progress = round.progress();
            self.lcp = Some(round);
            return Ok((progress, None));
        }
        if round.is_complete() {
            let Some(trim) = self.begin_trim_redo()? else {
                let completed = LcpProgress::Completed {
                    lcp_id: round.lcp_id,
                    fragments: round.done,
                    redo_freed_bytes: 0,
                };
                return Ok((completed, None));
            };
            let sync = self.lcp_sync(Vec::new(), Some(trim));
            round.syncing = true;
            let progress = round.progress();
            self.lcp = Some(round);
            return Ok((progress, Some(sync)));
        }
        if let Err(error) = self.write_pages(&mut round, pages) {
            self.abandon(round);
            return Err(error);
        }
        let finishing = self.take_durable(&mut round);
        let sync = (!finishing.is_empty()).then(|| {
            round.syncing = true;
            self.lcp_sync(finishing, None)
        });
        let progress = round.progress();
        self.lcp = Some(round);
        Ok((progress, sync))
    }

    /// Takes the outcome of the round's [`LcpSync`] (after its run): the
    /// LCPs it finished are complete from here (each fragment's restore
    /// point and trim limit move), and a trim's new tail takes effect,
    /// which ends the round. A failure abandons the round.
    pub fn lcp_step_complete(&mut self, sync: LcpSync) -> Result<LcpProgress, LdmError> {
        assert!(sync.ran, "an LCP sync completes after its run");
        let mut round = self
            .lcp
            .take()
            .expect("an LCP sync belongs to the round in flight");
        assert!(round.syncing, "the round has an LCP sync in flight");
        round.syncing = false;
        let instance = self.config.instance;
        for item in sync.finishing {
            let Some(at) = round.in_flight.iter().position(|(k, _)| *k == item.key) else {
                continue; // Dropped meanwhile: its files went with it.
            };
            round.in_flight.remove(at);
            let (table_id, fragment_id) = item.key;
            let completed = match item.result.expect("a finish not cancelled ran") {
                Ok(completed) => completed,
                Err(source) => {
                    self.abandon(round);
                    return Err(LdmError::Checkpoint {
                        instance,
                        table_id,
                        fragment_id,
                        source: Box::new(source),
                    });
                }
            };
            let state = self
                .fragments
                .get_mut(&item.key)
                .expect("a fragment of the round is in the instance (a drop forgets it)");
            assert!(completed.redo_start >= state.redo_needed_from);
            state.redo_needed_from = completed.redo_start;
            state.last_lcp = Some(completed);
            round.done += 1;
        }
        if let Some(trim) = sync.trim {
            let tail = self.redo.tail_lsn();
            let outcome = sync.trim_outcome.expect("a trim's sync ran it");
            self.redo
                .complete_trim(&trim, outcome)
                .map_err(|e| self.redo_error(e))?;
            return Ok(LcpProgress::Completed {
                lcp_id: round.lcp_id,
                fragments: round.done,
                redo_freed_bytes: trim.upto().0 - tail.0,
            });
        }
        let progress = round.progress();
        self.lcp = Some(round);
        Ok(progress)
    }

    /// Ends a failed round: the data files its unfinished writers began
    /// are removed. A removal that fails is let be: the caller hears the
    /// error that ended the round, and the file is debris that the next
    /// complete LCP of its fragment prunes.
    fn abandon(&self, round: LcpRound) {
        let writers = round
            .writing
            .map(|(_, writer)| writer)
            .into_iter()
            .chain(round.awaiting.into_iter().map(|a| a.writer));
        for writer in writers {
            let _ = writer.discard(&*self.disk);
        }
    }

    fn lcp_sync(&self, finishing: Vec<Finishing>, trim: Option<RedoTrim>) -> LcpSync {
        LcpSync {
            disk: Arc::clone(&self.lcp_disk),
            dir: self.lcp_dir.clone(),
            finishing,
            trim,
            trim_outcome: None,
            ran: false,
        }
    }

    fn write_pages(&mut self, round: &mut LcpRound, pages: usize) -> Result<(), LdmError> {
        let mut budget = pages;
        while budget > 0 {
            let Some((key, writer)) = &mut round.writing else {
                if round.awaiting.len() + round.in_flight.len() >= LCP_FRAGMENTS_AWAITING_MAX {
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
        Ok(())
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

    /// Takes every waiting LCP whose GCI is durable (and kept, see
    /// [`LdmInstance::set_kept_gci`]) out of the round, to be finished by
    /// an [`LcpSync`]: a complete LCP never holds a change that recovery
    /// would not replay.
    fn take_durable(&mut self, round: &mut LcpRound) -> Vec<Finishing> {
        let durable = self.redo.durable_gci();
        let kept = self.kept_gci();
        let waits = |gci: Gci| durable.is_none_or(|d| gci > d) || kept.is_some_and(|k| gci > k);
        let mut finishing = Vec::new();
        let mut i = 0;
        while i < round.awaiting.len() {
            if round.awaiting[i].gci.is_some_and(waits) {
                i += 1;
                continue;
            }
            let Awaiting { key, writer, gci } = round.awaiting.remove(i);
            assert!(
                gci.is_none_or(|g| !waits(g)),
                "an LCP finishes once its GCI is durable"
            );
            let cancel = Arc::new(Mutex::new(false));
            round.in_flight.push((key, Arc::clone(&cancel)));
            finishing.push(Finishing {
                key,
                writer: Some(writer),
                cancel,
                result: None,
            });
        }
        finishing
    }
}
