//! One local data manager instance (NDB: one DBLQH instance with its
//! fragments and its fragment log part): everything one LDM thread owns,
//! tied together so that it survives a crash.
//!
//! Why this module: the fragment, the redo log part and the local
//! checkpoints each keep their own promises; durability is a promise they
//! keep only together. Every committed change goes to this instance's redo
//! log with its GCI ([`LdmInstance::commit`]); the global checkpoint makes
//! a GCI durable ([`LdmInstance::flush_gci`]); local checkpoints write the
//! fragments in the background ([`LdmInstance::lcp_step`]) so that the redo
//! they cover can be reused; and [`LdmInstance::open`] puts it all back:
//! newest complete LCP chain, redo replay up to the GCI asked for, indexes
//! rebuilt. The rules that make this exact are in `docs/recovery.md`
//! ("Restart from disk"); the short form:
//!
//! - An LCP of a fragment records `redo_start`: the end of the last
//!   GCI-complete marker that was durable when it began. Restore replays
//!   the fragment's redo records from there (idempotent upserts and deletes
//!   by key make the fuzzy LCP exact).
//! - An LCP is *finished* (its control file written: complete) only once
//!   every GCI whose changes it may hold is durable in the redo log, so a
//!   complete LCP never holds a change that recovery would not replay.
//! - The redo log is trimmed only to the oldest `redo_start` any fragment
//!   still needs (a fragment without an LCP needs everything since it was
//!   created), and never past the last durable marker, so the log always
//!   names the GCI the state on disk is complete to.
//!
//! Failures: commits refused for lack of redo space are temporary
//! ([`LdmError::is_temporary`]); I/O errors are returned with nothing
//! committed lost; a failed LCP is abandoned (the next one is full);
//! damage that cannot be a torn tail refuses to open. This module logs
//! nothing: the caller logs the [`RecoveryReport`] and the errors.
//!
//! Single-threaded like the rest of the crate: the instance owns its page
//! pool, fragments, redo log part and checkpoint writers.

mod lcp;
mod recovery;

pub use lcp::{LcpProgress, LcpSync};
pub use recovery::{FragmentRecovery, RecoveryReport};

use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::checkpoint::{CheckpointError, CompletedLcp};
use crate::disk::Disk;
use crate::fragment::{AlterOutcome, Fragment, FragmentError, RedoRecordError};
use crate::locks::{Grant, TxId};
use crate::memory::PagePool;
pub use crate::redo::RedoSync;
use crate::redo::{
    Lsn, RedoConfig, RedoError, RedoLog, REDO_FILES_DEFAULT, REDO_FILE_HEADER_BYTES,
    REDO_FILE_SIZE_DEFAULT_BYTES, REDO_RECORD_HEADER_BYTES,
};
use crate::Gci;
use schema::TableDef;

/// The local checkpoints of an instance live in this folder of its
/// directory; the redo log part's files lie in the directory itself.
pub const LCP_DIR_NAME: &str = "lcp";
/// `DataMemory` when none is configured (NDB 7.6: 98M).
pub const DATA_MEMORY_DEFAULT_BYTES: u64 = 98 << 20;
/// Pages of fragment rows an [`LdmInstance::lcp_step`] writes when none is
/// configured: about 0.5 MiB of 32 KiB pages, a few milliseconds of work
/// between batches of signals.
pub const LCP_PAGES_PER_STEP_DEFAULT: usize = 16;
/// Most pages one LCP step may be asked to write (a step must stay short:
/// transactions wait while it runs).
pub const LCP_PAGES_PER_STEP_MAX: usize = 4096;
/// Fragments whose LCP has written every page but waits for its GCI to
/// become durable before it may complete; each holds an open file and a
/// write buffer (`checkpoint::WRITE_CHUNK_BYTES`), so the round waits for
/// a global checkpoint rather than start more.
pub const LCP_FRAGMENTS_AWAITING_MAX: usize = 8;

/// Bytes of a GCI-complete or restart marker record in the redo log: a
/// record header and an 8-byte payload (`docs/redo-format.md`). The
/// instance keeps the lsn of the last durable marker (a marker is the last
/// record a flush appends, so it ends at the head) to trim the log up to
/// it but never past it.
const REDO_MARKER_RECORD_BYTES: u64 = REDO_RECORD_HEADER_BYTES as u64 + 8;

// The instance moves to its LDM thread at start.
const _: fn() = || {
    fn send<T: Send>() {}
    send::<LdmInstance>();
};

/// Where and how large one LDM instance is. The data node fills it from
/// `config.ini` (`DataMemory` divided among the instances,
/// `FragmentLogFileSize`, `NoOfFragmentLogFiles`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LdmConfig {
    /// The LDM instance number; also the redo log part number.
    pub instance: u32,
    /// The instance's own directory, e.g. `<datadir>/ndb_<node>_fs/ldm<instance>`:
    /// redo log files in it, local checkpoints in its [`LCP_DIR_NAME`] folder.
    pub dir: PathBuf,
    pub data_memory_bytes: u64,
    pub redo_file_size_bytes: u64,
    pub redo_files: u32,
    /// `RedoConfig::earlier_files`.
    pub redo_earlier_files: Option<u32>,
    /// Pages an [`LdmInstance::lcp_step`] writes at most.
    pub lcp_pages_per_step: usize,
}

impl LdmConfig {
    /// An instance with NDB's default sizes.
    pub fn new(instance: u32, dir: impl Into<PathBuf>) -> LdmConfig {
        LdmConfig {
            instance,
            dir: dir.into(),
            data_memory_bytes: DATA_MEMORY_DEFAULT_BYTES,
            redo_file_size_bytes: REDO_FILE_SIZE_DEFAULT_BYTES,
            redo_files: REDO_FILES_DEFAULT,
            redo_earlier_files: None,
            lcp_pages_per_step: LCP_PAGES_PER_STEP_DEFAULT,
        }
    }

    pub fn lcp_dir(&self) -> PathBuf {
        self.dir.join(LCP_DIR_NAME)
    }

    pub fn redo_config(&self) -> RedoConfig {
        RedoConfig {
            dir: self.dir.clone(),
            part: self.instance,
            file_size_bytes: self.redo_file_size_bytes,
            files: self.redo_files,
            earlier_files: self.redo_earlier_files,
        }
    }

    fn validate(&self) -> Result<(), LdmError> {
        let bad = |detail: String| {
            Err(LdmError::Config {
                instance: self.instance,
                detail,
            })
        };
        if !(1..=LCP_PAGES_PER_STEP_MAX).contains(&self.lcp_pages_per_step) {
            return bad(format!(
                "{} LCP pages per step: 1..={LCP_PAGES_PER_STEP_MAX} allowed",
                self.lcp_pages_per_step
            ));
        }
        if self.data_memory_bytes < crate::memory::PAGE_BYTES as u64 {
            return bad(format!(
                "DataMemory of {} bytes is less than one page ({} bytes)",
                self.data_memory_bytes,
                crate::memory::PAGE_BYTES
            ));
        }
        Ok(())
    }
}

/// Why an LDM instance refused an operation or could not open. Every
/// variant names the instance and, where one is involved, the table,
/// fragment, file or redo position.
#[derive(Debug, thiserror::Error)]
pub enum LdmError {
    #[error("LDM instance {instance}: bad configuration: {detail}")]
    Config { instance: u32, detail: String },
    #[error("LDM instance {instance}: {source}")]
    Redo {
        instance: u32,
        #[source]
        source: Box<RedoError>,
    },
    #[error("LDM instance {instance}, table {table_id} fragment {fragment_id}: {source}")]
    Checkpoint {
        instance: u32,
        table_id: u32,
        fragment_id: u32,
        #[source]
        source: Box<CheckpointError>,
    },
    /// An operation of the fragment failed; [`LdmError::is_temporary`]
    /// says whether a retry may succeed (a full redo log: yes).
    #[error("LDM instance {instance}, fragment {fragment_id}: {source}")]
    Fragment {
        instance: u32,
        fragment_id: u32,
        #[source]
        source: Box<FragmentError>,
    },
    #[error(
        "LDM instance {instance}: replaying the redo record at lsn {lsn} (GCI {gci}) into table \
         `{table}` fragment {fragment_id} failed: {source}"
    )]
    Replay {
        instance: u32,
        table: String,
        fragment_id: u32,
        lsn: Lsn,
        gci: Gci,
        #[source]
        source: Box<FragmentError>,
    },
    #[error("LDM instance {instance}: the redo record at lsn {lsn} (GCI {gci}) is not an LDM record: {source}")]
    BadRedoRecord {
        instance: u32,
        lsn: Lsn,
        gci: Gci,
        #[source]
        source: RedoRecordError,
    },
    #[error(
        "LDM instance {instance}: table `{table}` (id {table_id}) fragment {fragment_id} is at \
         table version {expected}, but {what} is of version {found}: newer than the table's \
         definition, or older and without the column count a conversion needs"
    )]
    TableVersion {
        instance: u32,
        table: String,
        table_id: u32,
        fragment_id: u32,
        expected: u32,
        found: u32,
        what: String,
    },
    #[error(
        "LDM instance {instance}: the redo log part in {} was created afresh, but table `{table}` \
         fragment {fragment_id} has local checkpoint {lcp_id}, which needs the redo log written \
         with it; the redo files are missing: restore this node from a replica (initial node \
         restart)",
        dir.display()
    )]
    RedoMissing {
        instance: u32,
        dir: PathBuf,
        table: String,
        fragment_id: u32,
        lcp_id: u64,
    },
    #[error(
        "LDM instance {instance}: local checkpoint {lcp_id} of table `{table}` fragment \
         {fragment_id} needs the redo log from lsn {redo_start}, but the recovered log holds lsn \
         {tail} to {head}: durable redo records are missing; restore this node from a replica \
         (initial node restart)"
    )]
    RedoGap {
        instance: u32,
        table: String,
        fragment_id: u32,
        lcp_id: u64,
        redo_start: Lsn,
        tail: Lsn,
        head: Lsn,
    },
    #[error(
        "LDM instance {instance}: local checkpoint {lcp_id} of table `{table}` fragment \
         {fragment_id} may hold changes of GCI {lcp_gci} or later, but the redo log recovers only \
         to {}; the checkpoint is newer than the state asked for: restore this node from a \
         replica (initial node restart)",
        recovered_gci.map_or("no complete GCI".to_string(), |g| format!("GCI {g}"))
    )]
    CheckpointAhead {
        instance: u32,
        table: String,
        fragment_id: u32,
        lcp_id: u64,
        lcp_gci: Gci,
        recovered_gci: Option<Gci>,
    },
    #[error(
        "LDM instance {instance}: local checkpoint control file {} exists but does not check out, \
         while an older checkpoint or none would be restored instead; control files appear only \
         whole (written to a temporary file and renamed), so this is damage: refusing to restore \
         table `{table}` fragment {fragment_id} from older data (restore it from a replica)",
        file.display()
    )]
    CheckpointControlDamaged {
        instance: u32,
        table: String,
        fragment_id: u32,
        file: PathBuf,
    },
    #[error(
        "LDM instance {instance}: restore to GCI {restore_gci} asked, but the oldest complete GCI \
         left in the redo log part is {oldest_gci}: the local checkpoints already hold later \
         changes; restore this node from a replica (initial node restart)"
    )]
    RestoreGciTooOld {
        instance: u32,
        restore_gci: Gci,
        oldest_gci: Gci,
    },
    #[error("LDM instance {instance}: table `{table}` has {partitions} partitions: there is no fragment {fragment_id}")]
    NoSuchPartition {
        instance: u32,
        table: String,
        partitions: u32,
        fragment_id: u32,
    },
    #[error(
        "LDM instance {instance}: table {table_id} fragment {fragment_id} is not in this instance"
    )]
    NoSuchFragment {
        instance: u32,
        table_id: u32,
        fragment_id: u32,
    },
    #[error("LDM instance {instance}: table {table_id} fragment {fragment_id} is already in this instance")]
    FragmentExists {
        instance: u32,
        table_id: u32,
        fragment_id: u32,
    },
    #[error("LDM instance {instance}: {op} {}: {source}", path.display())]
    Io {
        instance: u32,
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl LdmError {
    /// Whether retrying later may succeed without any change by the user
    /// (NDB's "temporary error" class): a full redo log (a local checkpoint
    /// frees it) or too many lock waiters.
    pub fn is_temporary(&self) -> bool {
        match self {
            LdmError::Fragment { source, .. } => source.is_temporary(),
            _ => false,
        }
    }

    /// Whether the error says the instance's files cannot be restored as
    /// they are (damaged, or missing or out of step with one another), as
    /// opposed to a fault of the disk or the configuration: a node with
    /// such files can only get its data back from a replica.
    pub fn is_damage(&self) -> bool {
        match self {
            LdmError::Redo { source, .. } => {
                matches!(
                    **source,
                    RedoError::Corrupt { .. } | RedoError::BadFile { .. }
                )
            }
            LdmError::Checkpoint { source, .. } => {
                matches!(**source, CheckpointError::Corrupt { .. })
            }
            LdmError::BadRedoRecord { .. }
            | LdmError::RedoMissing { .. }
            | LdmError::RedoGap { .. }
            | LdmError::CheckpointAhead { .. }
            | LdmError::CheckpointControlDamaged { .. }
            | LdmError::RestoreGciTooOld { .. } => true,
            _ => false,
        }
    }
}

type FragmentKey = (u32, u32);

/// A fragment and what its recovery needs.
struct FragmentState {
    fragment: Fragment,
    /// The newest complete LCP taken of (or restored into) this fragment's
    /// row store: what the next LCP builds on.
    last_lcp: Option<CompletedLcp>,
    /// The oldest redo position a restore of this fragment replays from:
    /// its newest complete LCP's `redo_start`, or, without one, where the
    /// fragment began (its creation, or the tail it was restored from).
    redo_needed_from: Lsn,
}

/// Most markers of flushes not yet covered by the kept GCI remembered (to
/// find the kept GCI's marker); beyond, the trim limit just lags.
const KEPT_MARKERS_MAX: usize = 64;

/// The GCI recorded complete cluster-wide on this node's disk, and what
/// follows from it for LCPs and trims (see [`LdmInstance::set_kept_gci`]).
#[derive(Debug)]
struct KeptGci {
    gci: Gci,
    /// The marker of the newest flushed GCI ≤ `gci` known: trims stop
    /// there (`None`: no trim).
    marker: Option<Lsn>,
    /// Flushes above `gci`: (GCI, marker), oldest first.
    flushed: VecDeque<(Gci, Lsn)>,
}

/// One LDM instance. See the module documentation.
pub struct LdmInstance {
    config: LdmConfig,
    disk: Box<dyn Disk>,
    /// The disk again, for [`LcpSync`]s to use on an `io` thread.
    lcp_disk: Arc<Mutex<Box<dyn Disk>>>,
    lcp_dir: PathBuf,
    redo: RedoLog,
    pool: PagePool,
    fragments: BTreeMap<FragmentKey, FragmentState>,
    /// The highest GCI of a change installed in a fragment (by a commit, or
    /// by recovery): the newest GCI the fragments may hold.
    committed_gci: Option<Gci>,
    /// The highest GCI the redo log part completed (found at open, voided
    /// ones included, or flushed since).
    highest_gci_seen: Option<Gci>,
    /// `Some` once the owner bounds LCPs by a kept GCI
    /// ([`LdmInstance::set_kept_gci`]).
    kept: Option<KeptGci>,
    /// The lsn of the last GCI-complete (or restart) marker made durable.
    last_marker: Option<Lsn>,
    /// A marker a flush appended before it failed: `(gci, lsn)`; the retry
    /// does not append it again.
    unflushed_marker: Option<(Gci, Lsn)>,
    lcp: Option<lcp::LcpRound>,
    next_lcp_id: u64,
    /// Change-stream entries of capturing fragments' commits, not yet
    /// taken ([`LdmInstance::take_captured`]).
    captured: Vec<u8>,
    captured_count: u32,
}

impl std::fmt::Debug for LdmInstance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LdmInstance")
            .field("instance", &self.config.instance)
            .field("fragments", &self.fragments.len())
            .field("redo", &self.redo)
            .field("committed_gci", &self.committed_gci)
            .field("lcp_running", &self.lcp.is_some())
            .finish_non_exhaustive()
    }
}

impl LdmInstance {
    /// Opens the instance: the redo log part (created on a first start) and
    /// every fragment of `fragments`, restored from its newest complete LCP
    /// chain and the redo replayed from that LCP's start up to
    /// `restore_gci` (`None`: the highest complete GCI in the redo log),
    /// indexes rebuilt. See `docs/recovery.md`. The disk is cloned: the
    /// redo log part keeps one handle, the checkpoints use the other.
    pub fn open<D: Disk + Clone + 'static>(
        disk: D,
        config: LdmConfig,
        fragments: &[(TableDef, u32)],
        restore_gci: Option<Gci>,
    ) -> Result<(LdmInstance, RecoveryReport), LdmError> {
        recovery::open(disk, config, fragments, restore_gci)
    }

    pub fn config(&self) -> &LdmConfig {
        &self.config
    }

    /// Adds an empty fragment (a table created, or a fragment moved here).
    /// Leftover checkpoint files under its name are removed first, so that
    /// a restart never restores them into it.
    pub fn add_fragment(&mut self, table: &TableDef, fragment_id: u32) -> Result<(), LdmError> {
        let key = (table.id, fragment_id);
        self.check_partition(table, fragment_id)?;
        if self.fragments.contains_key(&key) {
            return Err(LdmError::FragmentExists {
                instance: self.config.instance,
                table_id: table.id,
                fragment_id,
            });
        }
        self.remove_lcp_files(table.id, fragment_id)?;
        let state = FragmentState {
            fragment: Fragment::new(table, fragment_id),
            last_lcp: None,
            // Its records all come after this point.
            redo_needed_from: self.redo_start_now(),
        };
        self.fragments.insert(key, state);
        Ok(())
    }

    /// Moves a fragment to `table`, a later version of its table (ALTER
    /// TABLE: columns appended, ordered indexes added or dropped, or only
    /// the version, for the hidden tables of an altered table); see
    /// [`Fragment::alter`]. Nothing may be pending in the fragment
    /// (`AlterBusy`, temporary, otherwise). On an error nothing changed.
    ///
    /// Durability needs nothing more here: redo records and LCPs carry the
    /// table version and column count they were written with, and a
    /// restart under the new definition converts older ones
    /// (`docs/recovery.md`, "Across ALTER TABLE"). An LCP of the fragment
    /// in progress is dropped from its round (it was of the old version;
    /// the next round takes a full one of the new), and when the rows were
    /// rewritten into a new row store the next LCP builds on nothing.
    pub fn alter_fragment(
        &mut self,
        table: &TableDef,
        fragment_id: u32,
    ) -> Result<AlterOutcome, LdmError> {
        let instance = self.config.instance;
        let key = (table.id, fragment_id);
        let Some(state) = self.fragments.get_mut(&key) else {
            return Err(LdmError::NoSuchFragment {
                instance,
                table_id: table.id,
                fragment_id,
            });
        };
        let before = state.fragment.table_version();
        let outcome = state
            .fragment
            .alter(&mut self.pool, table)
            .map_err(|source| LdmError::Fragment {
                instance,
                fragment_id,
                source: Box::new(source),
            })?;
        if state.fragment.table_version() != before {
            if outcome.rows_rewritten {
                state.last_lcp = None;
            }
            if let Some(round) = &mut self.lcp {
                round.forget(key);
            }
        }
        Ok(outcome)
    }

    /// Removes a fragment (its table was dropped): its memory goes back to
    /// the pool, its transactions are forgotten, an LCP of it stops, and
    /// its checkpoint files are deleted. Its redo records stay until a
    /// trim reuses their space; a restart skips them (table ids are never
    /// reused). The memory is freed even when deleting files fails.
    pub fn drop_fragment(&mut self, table_id: u32, fragment_id: u32) -> Result<(), LdmError> {
        let key = (table_id, fragment_id);
        let Some(mut state) = self.fragments.remove(&key) else {
            return Ok(());
        };
        if let Some(round) = &mut self.lcp {
            round.forget(key);
        }
        state.fragment.release(&mut self.pool);
        self.remove_lcp_files(table_id, fragment_id)
    }

    /// A fragment and the page pool, for operations (reads, writes, scans,
    /// abort). Commit through [`LdmInstance::commit`], which logs to this
    /// instance's redo log part.
    pub fn fragment(
        &mut self,
        table_id: u32,
        fragment_id: u32,
    ) -> Option<(&mut Fragment, &mut PagePool)> {
        let state = self.fragments.get_mut(&(table_id, fragment_id))?;
        Some((&mut state.fragment, &mut self.pool))
    }

    /// A fragment, to look at (its version, its transactions).
    pub fn fragment_ref(&self, table_id: u32, fragment_id: u32) -> Option<&Fragment> {
        self.fragments
            .get(&(table_id, fragment_id))
            .map(|s| &s.fragment)
    }

    /// A fragment and the page pool, to look at: a committed scan
    /// ([`Fragment::scan`] takes both shared), as tests compare replicas.
    pub fn fragment_with_pool(
        &self,
        table_id: u32,
        fragment_id: u32,
    ) -> Option<(&Fragment, &PagePool)> {
        self.fragments
            .get(&(table_id, fragment_id))
            .map(|s| (&s.fragment, &self.pool))
    }

    /// The committed rows of a fragment as byte images (fixed part, then
    /// variable part), sorted: equal for two replicas that hold the same
    /// rows, wherever each placed them. Inserts not yet committed are left
    /// out. For invariant checks (the simulator compares replicas); it
    /// copies every row, so it is no part of any request path.
    pub fn committed_row_images(&self, table_id: u32, fragment_id: u32) -> Option<Vec<Vec<u8>>> {
        let fragment = &self.fragments.get(&(table_id, fragment_id))?.fragment;
        let store = fragment.row_store();
        let mut images: Vec<Vec<u8>> = store
            .rows()
            .filter_map(|row| {
                let fixed = store.fixed_if_committed(&self.pool, row)?;
                let mut image = fixed.to_vec();
                image.extend_from_slice(store.var(&self.pool, row));
                Some(image)
            })
            .collect();
        images.sort_unstable();
        Some(images)
    }

    /// The fragments of this instance, as (table id, fragment id).
    pub fn fragment_ids(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.fragments.keys().copied()
    }

    /// Commits `tx`'s changes in one fragment as of global checkpoint
    /// `gci`: logs them to the redo log part (buffered; see
    /// [`LdmInstance::write_redo`] and [`LdmInstance::flush_gci`]) and
    /// installs them; appends the operations its locks now let run to
    /// `grants`. A full redo log is a temporary error with nothing
    /// installed ([`LdmError::is_temporary`]); run a local checkpoint and
    /// retry. `gci` must be above every GCI already flushed.
    pub fn commit(
        &mut self,
        table_id: u32,
        fragment_id: u32,
        tx: TxId,
        gci: Gci,
        grants: &mut Vec<Grant>,
    ) -> Result<(), LdmError> {
        // The redo log part asserts the same for a GCI whose flush began
        // and failed (after refusing all work if it is out of service).
        assert!(
            self.redo.durable_gci().is_none_or(|durable| gci > durable),
            "LDM instance {}: commit in GCI {gci}, but GCI {:?} is already flushed",
            self.config.instance,
            self.redo.durable_gci()
        );
        let instance = self.config.instance;
        let Some(state) = self.fragments.get_mut(&(table_id, fragment_id)) else {
            return Err(LdmError::NoSuchFragment {
                instance,
                table_id,
                fragment_id,
            });
        };
        state
            .fragment
            .commit(&mut self.pool, tx, gci, &mut self.redo, grants)
            .map_err(|source| LdmError::Fragment {
                instance,
                fragment_id,
                source: Box::new(source),
            })?;
        if state.fragment.capturing() {
            self.captured_count += state.fragment.take_captured(&mut self.captured);
        }
        self.committed_gci = self.committed_gci.max(Some(gci));
        Ok(())
    }

    /// The change stream: captures the committed changes of fragment
    /// `fragment_id` of `table_id` with `flags` (`signal::sub_change`), or
    /// stops (`None`); false when there is no such fragment here.
    pub fn set_capture(&mut self, table_id: u32, fragment_id: u32, flags: Option<u8>) -> bool {
        match self.fragments.get_mut(&(table_id, fragment_id)) {
            Some(state) => {
                state.fragment.set_capture(flags);
                true
            }
            None => false,
        }
    }

    /// Moves the entries captured by commits since the last call (in commit
    /// order) to the end of `out`; how many.
    pub fn take_captured(&mut self, out: &mut Vec<u8>) -> u32 {
        out.append(&mut self.captured);
        std::mem::take(&mut self.captured_count)
    }

    /// Drops `tx`'s changes in one fragment (see [`Fragment::abort`]).
    pub fn abort(
        &mut self,
        table_id: u32,
        fragment_id: u32,
        tx: TxId,
        grants: &mut Vec<Grant>,
    ) -> Result<(), LdmError> {
        let instance = self.config.instance;
        let Some(state) = self.fragments.get_mut(&(table_id, fragment_id)) else {
            return Err(LdmError::NoSuchFragment {
                instance,
                table_id,
                fragment_id,
            });
        };
        state.fragment.abort(&mut self.pool, tx, grants);
        Ok(())
    }

    /// Writes the buffered redo records to the files, without fsync: call
    /// it at the end of a batch of signals. A failed write changes nothing
    /// and can be retried.
    pub fn write_redo(&mut self) -> Result<(), LdmError> {
        self.redo.write_buffered().map_err(|e| self.redo_error(e))
    }

    /// Makes every change of GCI ≤ `gci` durable (the global checkpoint
    /// protocol's flush): a GCI-complete marker, write, fsync. A GCI at or
    /// below the last one flushed is already durable: nothing to do. After
    /// a failed fsync the redo log part refuses all work until a restart.
    pub fn flush_gci(&mut self, gci: Gci) -> Result<(), LdmError> {
        let Some(sync) = self.begin_flush_gci(gci)? else {
            return Ok(());
        };
        let outcome = sync.run();
        self.complete_flush_gci(outcome).map(|_| ())
    }

    /// Begins [`LdmInstance::flush_gci`] without waiting for the disk: the
    /// marker and the buffered records are written, and the returned sync
    /// is to run on an `io` thread; its outcome goes to
    /// [`LdmInstance::complete_flush_gci`], and until then the GCI is not
    /// durable (checkpoints do not count on it, the redo log is not
    /// trimmed to it). `None`: the GCI is durable already. One flush at a
    /// time ([`LdmInstance::flush_in_flight`]); commits of later GCIs go on
    /// meanwhile.
    pub fn begin_flush_gci(&mut self, gci: Gci) -> Result<Option<RedoSync>, LdmError> {
        if self
            .redo
            .durable_gci()
            .is_some_and(|durable| gci <= durable)
        {
            return Ok(None);
        }
        let head = self.redo.head_lsn();
        let result = self.redo.begin_flush(gci);
        let after = self.redo.head_lsn();
        if after != head {
            // The marker is the last record a flush appends: it ends at the
            // head. A flush that fails after appending it appends no other
            // on retry.
            self.unflushed_marker = Some((gci, Lsn(after.0 - REDO_MARKER_RECORD_BYTES)));
        }
        let sync = result.map_err(|e| self.redo_error(e))?;
        assert!(
            self.unflushed_marker
                .is_some_and(|(marked, _)| marked == gci),
            "LDM instance {}: a flush of GCI {gci} in flight without its marker",
            self.config.instance
        );
        Ok(Some(sync))
    }

    /// Whether a flush begun by [`LdmInstance::begin_flush_gci`] waits for
    /// its completion.
    pub fn flush_in_flight(&self) -> bool {
        self.redo.flush_in_flight()
    }

    /// Completes the flush in flight with the outcome of its
    /// [`RedoSync::run`]: on `Ok` its GCI is durable (returned); on `Err`
    /// the redo log part refuses all work until a restart.
    pub fn complete_flush_gci(&mut self, outcome: Result<(), String>) -> Result<Gci, LdmError> {
        self.redo
            .complete_flush(outcome)
            .map_err(|e| self.redo_error(e))?;
        let (gci, marker) = self
            .unflushed_marker
            .take()
            .expect("a flush that completed a GCI appended its marker");
        assert_eq!(
            self.redo.durable_gci(),
            Some(gci),
            "the marker flushed is the one appended"
        );
        assert!(marker >= self.last_marker.unwrap_or(Lsn(0)));
        self.last_marker = Some(marker);
        self.highest_gci_seen = self.highest_gci_seen.max(Some(gci));
        if let Some(kept) = self.kept.as_mut() {
            if kept.flushed.len() == KEPT_MARKERS_MAX {
                kept.flushed.pop_front();
            }
            kept.flushed.push_back((gci, marker));
        }
        Ok(gci)
    }

    /// Bounds local checkpoints by `gci`, the newest GCI this node's disk
    /// records complete cluster-wide (the datanode's sysfile); from the
    /// first call on: an LCP completes only once every GCI it may hold is
    /// at or below the kept GCI (and durable here), and the redo log is
    /// never trimmed past the marker of the kept GCI. A system restart
    /// restores to a GCI at or above any node's kept GCI, possibly below
    /// this instance's durable one: it then needs the newest LCP to hold
    /// nothing above it and its marker still in the log. Never goes down
    /// (a lower `gci` is ignored).
    pub fn set_kept_gci(&mut self, gci: Gci) {
        let durable = self.redo.durable_gci();
        let last_marker = self.last_marker;
        let kept = self.kept.get_or_insert_with(|| KeptGci {
            gci,
            marker: None,
            flushed: VecDeque::new(),
        });
        if gci < kept.gci {
            return;
        }
        kept.gci = gci;
        if durable.is_some_and(|d| d <= gci) {
            kept.marker = last_marker;
            kept.flushed.clear();
        }
        while let Some(&(flushed, marker)) = kept.flushed.front() {
            if flushed > gci {
                break;
            }
            kept.marker = Some(marker);
            kept.flushed.pop_front();
        }
    }

    /// The kept GCI set by [`LdmInstance::set_kept_gci`], if any.
    pub fn kept_gci(&self) -> Option<Gci> {
        self.kept.as_ref().map(|k| k.gci)
    }

    /// The highest GCI this instance's redo log part completed: found at
    /// open (voided ones included) or flushed since. A GCI handed out later
    /// must be above it.
    pub fn highest_gci_seen(&self) -> Option<Gci> {
        self.highest_gci_seen.max(self.redo.durable_gci())
    }

    /// The highest GCI committed here since the open.
    pub fn committed_gci(&self) -> Option<Gci> {
        self.committed_gci
    }

    /// The highest GCI made durable (by a flush, or found complete at open).
    pub fn durable_gci(&self) -> Option<Gci> {
        self.redo.durable_gci()
    }

    /// The highest GCI flushed or being flushed
    /// ([`LdmInstance::begin_flush_gci`]): commits must be of a higher one.
    pub fn flushed_gci(&self) -> Option<Gci> {
        self.redo.marked_gci().max(self.redo.durable_gci())
    }

    /// Bytes of the redo log part holding records a restore may still need
    /// (or that are not yet trimmed).
    pub fn redo_used_bytes(&self) -> u64 {
        self.redo.used_bytes()
    }

    pub fn redo_capacity_bytes(&self) -> u64 {
        self.redo.capacity_bytes()
    }

    /// The redo memory buffer: bytes in it now, the most it held, and the
    /// bytes written but not yet synced (`ndbinfo.logbuffers`).
    pub fn redo_buffer_figures(&self) -> (u64, u64, u64) {
        (
            self.redo.buffered_bytes(),
            self.redo.buffer_high_water_bytes(),
            self.redo.unsynced_bytes(),
        )
    }

    /// The first redo record still kept.
    pub fn redo_tail_lsn(&self) -> Lsn {
        self.redo.tail_lsn()
    }

    /// Where the next redo record goes (after the records buffered).
    pub fn redo_head_lsn(&self) -> Lsn {
        self.redo.head_lsn()
    }

    /// `DataMemory` in use: row pages, hash-index pages, update reserves of
    /// every fragment.
    pub fn data_memory_used_bytes(&self) -> u64 {
        self.pool.used_bytes()
    }

    pub fn data_memory_budget_bytes(&self) -> u64 {
        self.pool.budget_bytes()
    }

    /// All memory of the fragments, ordered indexes (heap) included.
    pub fn memory_bytes(&self) -> u64 {
        let ordered: u64 = self
            .fragments
            .values()
            .map(|s| s.fragment.memory_bytes() - s.fragment.data_memory_bytes())
            .sum();
        self.pool.used_bytes() + ordered
    }

    // ----- helpers shared by the submodules -----

    fn redo_error(&self, source: RedoError) -> LdmError {
        LdmError::Redo {
            instance: self.config.instance,
            source: Box::new(source),
        }
    }

    fn check_partition(&self, table: &TableDef, fragment_id: u32) -> Result<(), LdmError> {
        check_partition(self.config.instance, table, fragment_id)
    }

    /// Where an LCP starting now (or a fragment created now) may have its
    /// restore start replaying: the end of the last durable marker. Every
    /// record after it is still to come or not yet known durable, and it is
    /// never past the durable log, so the redo log can be trimmed to it.
    fn redo_start_now(&self) -> Lsn {
        match self.last_marker {
            Some(marker) => Lsn(marker.0 + REDO_MARKER_RECORD_BYTES),
            None => self.redo.tail_lsn(),
        }
    }

    /// Deletes every checkpoint file of a fragment: control files first and
    /// durably, so that no control file ever vouches for a missing data file.
    fn remove_lcp_files(&self, table_id: u32, fragment_id: u32) -> Result<(), LdmError> {
        let files = list_lcp_files(self.config.instance, &*self.disk, &self.lcp_dir)?;
        let mine: Vec<&LcpFile> = files
            .iter()
            .filter(|f| (f.table_id, f.fragment_id) == (table_id, fragment_id))
            .collect();
        for controls in [true, false] {
            let batch: Vec<&&LcpFile> = mine.iter().filter(|f| f.is_control == controls).collect();
            if batch.is_empty() {
                continue;
            }
            for file in batch {
                self.disk
                    .remove_file(&file.path)
                    .map_err(|source| self.io_error("remove", &file.path, source))?;
            }
            self.disk
                .sync_dir(&self.lcp_dir)
                .map_err(|source| self.io_error("fsync directory", &self.lcp_dir, source))?;
        }
        Ok(())
    }

    fn io_error(&self, op: &'static str, path: &Path, source: io::Error) -> LdmError {
        LdmError::Io {
            instance: self.config.instance,
            op,
            path: path.to_path_buf(),
            source,
        }
    }

    /// Begins the trim of the redo log to the oldest position any fragment
    /// still needs, never past the last durable marker (so that a restart
    /// always finds the GCI the state is complete to): `None` when there
    /// is nothing to trim, else the control file write to run
    /// ([`LcpSync`]).
    fn begin_trim_redo(&mut self) -> Result<Option<crate::redo::RedoTrim>, LdmError> {
        let Some(mut marker) = self.last_marker else {
            return Ok(None);
        };
        if let Some(kept) = &self.kept {
            let Some(kept_marker) = kept.marker else {
                return Ok(None);
            };
            marker = marker.min(kept_marker);
        }
        let tail = self.redo.tail_lsn();
        let needed = self
            .fragments
            .values()
            .map(|s| s.redo_needed_from)
            .min()
            .unwrap_or(marker);
        assert!(
            needed >= tail,
            "LDM instance {}: a fragment needs redo from lsn {needed}, before the tail {tail}",
            self.config.instance
        );
        let target = self.record_start_at_or_after(needed).min(marker);
        if target <= tail {
            return Ok(None);
        }
        self.redo.begin_trim(target).map_err(|e| self.redo_error(e))
    }

    /// The first record position at or after `lsn`, which is the end of a
    /// record: the log skips the rest of a file too short for a record
    /// header without writing a record there (`docs/redo-format.md`).
    fn record_start_at_or_after(&self, lsn: Lsn) -> Lsn {
        // The part's geometry as opened (`RedoConfig::earlier_files`).
        let redo = self.redo.config();
        let data_per_file = redo.file_size_bytes - REDO_FILE_HEADER_BYTES;
        let capacity = data_per_file * u64::from(redo.files);
        let remaining = data_per_file - (lsn.0 % capacity) % data_per_file;
        if remaining < REDO_RECORD_HEADER_BYTES as u64 {
            Lsn(lsn.0 + remaining)
        } else {
            lsn
        }
    }
}

fn check_partition(instance: u32, table: &TableDef, fragment_id: u32) -> Result<(), LdmError> {
    if fragment_id >= table.partitions {
        return Err(LdmError::NoSuchPartition {
            instance,
            table: table.name.clone(),
            partitions: table.partitions,
            fragment_id,
        });
    }
    Ok(())
}

/// A checkpoint file found in the LCP folder, by its name
/// (`t{T}-f{F}-lcp{ID}.data`, `.ctl` or `.ctl.tmp`;
/// `docs/checkpoint-format.md`).
#[derive(Clone, Debug)]
struct LcpFile {
    path: PathBuf,
    table_id: u32,
    fragment_id: u32,
    lcp_id: u64,
    is_control: bool,
}

fn parse_lcp_name(path: &Path) -> Option<LcpFile> {
    let name = path.file_name()?.to_str()?;
    let rest = name.strip_prefix('t')?;
    let (table, rest) = rest.split_once("-f")?;
    let (fragment, rest) = rest.split_once("-lcp")?;
    let (id, suffix) = rest.split_once('.')?;
    let is_control = match suffix {
        "ctl" => true,
        "data" | "ctl.tmp" => false,
        _ => return None,
    };
    // Decimal without leading zeros: "07" or "+7" are someone else's files.
    let canonical = |digits: &str| {
        let all_digits = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
        all_digits && (digits == "0" || !digits.starts_with('0'))
    };
    if !(canonical(table) && canonical(fragment) && canonical(id)) {
        return None;
    }
    Some(LcpFile {
        path: path.to_path_buf(),
        table_id: table.parse().ok()?,
        fragment_id: fragment.parse().ok()?,
        lcp_id: id.parse().ok()?,
        is_control,
    })
}

/// Refuses a fragment whose checkpoint folder holds a control file newer
/// than the LCP restored (or any, when none was): restore skipped it as
/// unfinished, but control files appear only whole (a temporary file
/// renamed after its fsync), so it is damage, and the older state restore
/// fell back to may lack rows whose redo was trimmed.
fn control_file_damage_check(
    instance: u32,
    table: &TableDef,
    fragment_id: u32,
    restored_lcp_id: Option<u64>,
    files: &[LcpFile],
) -> Result<(), LdmError> {
    let damaged = files.iter().find(|f| {
        f.is_control
            && (f.table_id, f.fragment_id) == (table.id, fragment_id)
            && restored_lcp_id.is_none_or(|id| f.lcp_id > id)
    });
    match damaged {
        None => Ok(()),
        Some(file) => Err(LdmError::CheckpointControlDamaged {
            instance,
            table: table.name.clone(),
            fragment_id,
            file: file.path.clone(),
        }),
    }
}

/// The checkpoint files in the LCP folder (none when it does not exist).
fn list_lcp_files(instance: u32, disk: &dyn Disk, dir: &Path) -> Result<Vec<LcpFile>, LdmError> {
    let entries = match disk.list_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(LdmError::Io {
                instance,
                op: "list directory",
                path: dir.to_path_buf(),
                source,
            })
        }
    };
    Ok(entries.iter().filter_map(|p| parse_lcp_name(p)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoint_file_names_are_parsed_only_in_canonical_form() {
        let file = parse_lcp_name(Path::new("/d/lcp/t12-f3-lcp40.ctl")).unwrap();
        assert_eq!(
            (
                file.table_id,
                file.fragment_id,
                file.lcp_id,
                file.is_control
            ),
            (12, 3, 40, true)
        );
        let data = parse_lcp_name(Path::new("t0-f0-lcp7.data")).unwrap();
        assert!(!data.is_control && data.lcp_id == 7);
        assert!(
            !parse_lcp_name(Path::new("t1-f2-lcp9.ctl.tmp"))
                .unwrap()
                .is_control
        );
        for bad in [
            "t1-f2-lcp07.data",
            "t1-f2-lcp+8.data",
            "t1-f2-lcp9.bak",
            "t1-f2-lcp.data",
            "redo-part0.control",
            "tx-f2-lcp9.ctl",
        ] {
            assert!(parse_lcp_name(Path::new(bad)).is_none(), "{bad}");
        }
    }
}
