//! Opening an LDM instance: restart from disk (NDB: the restore and redo
//! execution phases of a node or system restart).
//!
//! 1. Open the redo log part: on a first start it is created; otherwise it
//!    is scanned, a torn or incomplete tail is cut (and reported), damage
//!    before a durable marker refuses.
//! 2. Decide the GCI to reach: the highest complete GCI in the log not
//!    above the GCI asked for.
//! 3. Per fragment: restore the newest complete LCP chain into an empty
//!    fragment and check that it fits (table version, the redo still
//!    reaches back to its start, it holds nothing newer than the GCI to
//!    reach, no newer control file was damaged); rebuild the indexes. An
//!    LCP of an older table version (taken before an ALTER TABLE) is
//!    restored into a fragment of that version's layout (the first
//!    columns of the table, as many as the LCP says) and the fragment is
//!    then altered to the current definition, as the live alter did.
//! 4. Replay the redo log once, in lsn order: each record of a fragment
//!    here, at or after that fragment's start point, with a GCI up to the
//!    one reached, is applied (an upsert or delete by key); a record of an
//!    older table version is converted to the current layout first.
//!
//! 5. When the GCI reached is below the highest complete GCI of the log (a
//!    system restart to the GCI the cluster completed, below one this
//!    instance flushed), void the records above it durably (a restart
//!    marker of the GCI reached, fsynced) before anything else is written:
//!    a later restart must not replay them.
//!
//! Every check that fails refuses to open with the reason; nothing is
//! logged here.

use std::collections::BTreeMap;
use std::fmt;

use crate::checkpoint::{self, RestoredCheckpoint};
use crate::disk::Disk;
use crate::fragment::{Fragment, RedoRecord};
use crate::memory::PagePool;
use crate::redo::{Lsn, Recovered, RedoLog, TailCut};
use crate::Gci;
use schema::TableDef;

use super::{
    check_partition, control_file_damage_check, list_lcp_files, FragmentKey, FragmentState,
    LdmConfig, LdmError, LdmInstance, REDO_MARKER_RECORD_BYTES,
};

/// What [`LdmInstance::open`] did, for the caller to log and check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecoveryReport {
    pub instance: u32,
    /// The redo log part was created by this open (a first start).
    pub redo_created: bool,
    /// `Some(n)`: the redo log part was made by an earlier build with `n`
    /// files, not the configured count, and keeps them
    /// (`RedoConfig::earlier_files`) until an initial start.
    pub redo_files_kept: Option<u32>,
    /// The GCI asked for (`None`: the highest complete one).
    pub restore_gci: Option<Gci>,
    /// The GCI the restored state is exact to: every change of a GCI up to
    /// it, none above. Below `restore_gci` when the log holds no complete
    /// GCI that high (see `docs/recovery.md`); `None` when no GCI was ever
    /// made durable here.
    pub recovered_gci: Option<Gci>,
    /// The highest complete GCI in the redo log part: new commits must use
    /// GCIs above it.
    pub redo_complete_gci: Option<Gci>,
    pub redo_tail: Lsn,
    pub redo_head: Lsn,
    /// What the redo log cut from its end (a torn write, records of GCIs
    /// that never completed, a truncated file), if anything.
    pub redo_cut: Option<TailCut>,
    /// Redo records applied to fragments.
    pub records_replayed: u64,
    /// Records skipped because the fragment's LCP already holds them (they
    /// lie before its start point).
    pub records_in_checkpoints: u64,
    /// Records of fragments not in this instance (dropped tables).
    pub records_of_other_fragments: u64,
    /// `Some(g)`: the redo log held complete GCIs above the GCI reached
    /// `g`; their records are voided, durably (`records_voided` of them
    /// were of fragments here).
    pub voided_above: Option<Gci>,
    pub records_voided: u64,
    pub fragments: Vec<FragmentRecovery>,
}

/// How one fragment was restored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FragmentRecovery {
    pub table_id: u32,
    pub fragment_id: u32,
    /// The LCP restored and its chain (newest first), if it had one.
    pub lcp_id: Option<u64>,
    pub lcp_chain: Vec<u64>,
    pub rows_from_lcp: u64,
    /// Redo replayed from here.
    pub replay_from: Lsn,
    pub records_replayed: u64,
    /// Committed rows after recovery.
    pub rows: u64,
}

impl fmt::Display for RecoveryReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let gci = |g: Option<Gci>| g.map_or("none".to_string(), |g| g.to_string());
        write!(
            f,
            "LDM instance {}: {} fragments restored to GCI {} (asked {}, redo complete to {}); \
             {} redo records replayed, {} already in checkpoints, {} of other fragments; redo \
             lsn {}..{}",
            self.instance,
            self.fragments.len(),
            gci(self.recovered_gci),
            self.restore_gci
                .map_or("the newest".to_string(), |g| g.to_string()),
            gci(self.redo_complete_gci),
            self.records_replayed,
            self.records_in_checkpoints,
            self.records_of_other_fragments,
            self.redo_tail,
            self.redo_head,
        )?;
        if self.redo_created {
            write!(f, "; redo log created")?;
        }
        if let Some(files) = self.redo_files_kept {
            write!(
                f,
                "; redo log part kept at the {files} files it was made with (an initial start \
                 makes it at the configured size)"
            )?;
        }
        if let Some(gci) = self.voided_above {
            write!(
                f,
                "; {} redo records of GCIs above {gci} voided",
                self.records_voided
            )?;
        }
        if let Some(cut) = &self.redo_cut {
            write!(
                f,
                "; redo tail cut at lsn {} ({}, offset {}): {}",
                cut.cut_at_lsn,
                cut.file.display(),
                cut.offset,
                cut.reason
            )?;
        }
        Ok(())
    }
}

/// A fragment being restored.
struct Restoring {
    state: FragmentState,
    report: FragmentRecovery,
}

pub(super) fn open<D: Disk + Clone + 'static>(
    disk: D,
    mut config: LdmConfig,
    fragments: &[(TableDef, u32)],
    restore_gci: Option<Gci>,
) -> Result<(LdmInstance, RecoveryReport), LdmError> {
    config.validate()?;
    let instance = config.instance;
    let redo_error = |source| LdmError::Redo {
        instance,
        source: Box::new(source),
    };
    let (mut redo, recovered) =
        RedoLog::open(Box::new(disk.clone()), config.redo_config()).map_err(redo_error)?;
    let redo_files_kept = (redo.config().files != config.redo_files).then_some(redo.config().files);
    if let Some(files) = redo_files_kept {
        config.redo_files = files;
    }
    let lcp_disk: Box<dyn Disk> = Box::new(disk.clone());
    let disk: Box<dyn Disk> = Box::new(disk);
    let target = replay_target(instance, &recovered, restore_gci)?;
    let lcp_dir = config.lcp_dir();
    let lcp_files = list_lcp_files(instance, &*disk, &lcp_dir)?;
    let mut pool = PagePool::with_budget_bytes(config.data_memory_bytes);
    let mut restoring: BTreeMap<FragmentKey, Restoring> = BTreeMap::new();
    for (table, fragment_id) in fragments {
        let key = (table.id, *fragment_id);
        check_partition(instance, table, *fragment_id)?;
        if restoring.contains_key(&key) {
            return Err(LdmError::FragmentExists {
                instance,
                table_id: table.id,
                fragment_id: *fragment_id,
            });
        }
        let checkpoint_error = |source| LdmError::Checkpoint {
            instance,
            table_id: table.id,
            fragment_id: *fragment_id,
            source: Box::new(source),
        };
        let newest = checkpoint::newest_complete_version(&*disk, &lcp_dir, table.id, *fragment_id)
            .map_err(checkpoint_error)?;
        let restore_def = restore_definition(instance, table, *fragment_id, newest)?;
        let mut fragment = Fragment::new(restore_def.as_ref().unwrap_or(table), *fragment_id);
        let restored = checkpoint::restore(
            &*disk,
            &lcp_dir,
            table.id,
            *fragment_id,
            &mut pool,
            fragment.row_store_mut(),
        )
        .map_err(|source| LdmError::Checkpoint {
            instance,
            table_id: table.id,
            fragment_id: *fragment_id,
            source: Box::new(source),
        })?;
        let restored_id = restored.as_ref().map(|r| r.lcp_id);
        control_file_damage_check(instance, table, *fragment_id, restored_id, &lcp_files)?;
        let check = LcpCheck {
            instance,
            table,
            fragment_id: *fragment_id,
            recovered: &recovered,
            target,
            dir: &config.dir,
        };
        let replay_from = match &restored {
            Some(lcp) => {
                check.check(lcp)?;
                lcp.redo_start
            }
            None => recovered.tail_lsn,
        };
        let fragment_error = |source| LdmError::Fragment {
            instance,
            fragment_id: *fragment_id,
            source: Box::new(source),
        };
        fragment
            .rebuild_indexes(&mut pool)
            .map_err(fragment_error)?;
        let mut last_lcp = restored.as_ref().map(|r| r.completed);
        if fragment.table_version() != table.version {
            let outcome = fragment.alter(&mut pool, table).map_err(fragment_error)?;
            if outcome.rows_rewritten {
                // A new row store: the next LCP is a full one of it.
                last_lcp = None;
            }
        }
        let report = FragmentRecovery {
            table_id: table.id,
            fragment_id: *fragment_id,
            lcp_id: restored_id,
            lcp_chain: restored.as_ref().map_or(Vec::new(), |r| r.chain.clone()),
            rows_from_lcp: restored.as_ref().map_or(0, |r| r.rows),
            replay_from,
            records_replayed: 0,
            rows: 0,
        };
        let state = FragmentState {
            fragment,
            last_lcp,
            redo_needed_from: replay_from,
        };
        restoring.insert(key, Restoring { state, report });
    }
    let mut report = RecoveryReport {
        instance,
        redo_created: recovered.created,
        redo_files_kept,
        restore_gci,
        recovered_gci: target,
        redo_complete_gci: recovered.complete_gci,
        redo_tail: recovered.tail_lsn,
        redo_head: recovered.head_lsn,
        redo_cut: recovered.cut.clone(),
        records_replayed: 0,
        records_in_checkpoints: 0,
        records_of_other_fragments: 0,
        voided_above: target.filter(|&t| recovered.complete_gci.is_some_and(|c| t < c)),
        records_voided: 0,
        fragments: Vec::new(),
    };
    replay(
        instance,
        &redo,
        &recovered,
        target,
        &mut pool,
        &mut restoring,
        &mut report,
    )?;
    let mut states = BTreeMap::new();
    for (key, mut r) in restoring {
        r.report.rows = r.state.fragment.row_count();
        report.fragments.push(r.report);
        states.insert(key, r.state);
    }
    let next_lcp_id = lcp_files
        .iter()
        .map(|f| f.lcp_id)
        .max()
        .map_or(1, |id| id + 1);
    // The recovered head is the end of the last complete marker (GCI
    // complete or restart), when there is one.
    let mut last_marker = recovered
        .complete_gci
        .map(|_| Lsn(recovered.head_lsn.0 - REDO_MARKER_RECORD_BYTES));
    assert!(last_marker.is_none_or(|m| m >= recovered.tail_lsn));
    if let Some(gci) = report.voided_above {
        // Last, once everything checked out: a refused open changes nothing.
        let marker = redo.void_above(gci).map_err(redo_error)?;
        last_marker = Some(marker);
    }
    let ldm = LdmInstance {
        lcp_dir,
        disk,
        lcp_disk: std::sync::Arc::new(std::sync::Mutex::new(lcp_disk)),
        redo,
        pool,
        fragments: states,
        committed_gci: target,
        highest_gci_seen: recovered.complete_gci,
        kept: None,
        last_marker,
        unflushed_marker: None,
        lcp: None,
        next_lcp_id,
        config,
        captured: Vec::new(),
        captured_count: 0,
    };
    Ok((ldm, report))
}

/// The GCI recovery reaches: the highest complete GCI in the log not above
/// the one asked for. Asking for a GCI older than every complete one left
/// is refused: trims have dropped its records, and the checkpoints hold
/// later changes.
fn replay_target(
    instance: u32,
    recovered: &Recovered,
    restore_gci: Option<Gci>,
) -> Result<Option<Gci>, LdmError> {
    let Some(asked) = restore_gci else {
        return Ok(recovered.complete_gci);
    };
    if let Some(oldest) = recovered.oldest_complete_gci() {
        if asked == 0 && recovered.tail_lsn == Lsn(0) {
            // Never trimmed: every record is still here, so the empty state
            // before the first GCI is exact (a system restart before the
            // cluster completed any GCI); everything is voided.
            return Ok(Some(0));
        }
        if asked < oldest {
            return Err(LdmError::RestoreGciTooOld {
                instance,
                restore_gci: asked,
                oldest_gci: oldest,
            });
        }
    }
    Ok(recovered.replay_target(asked))
}

/// The definition a fragment's newest complete LCP must be restored with,
/// when it is not `table`'s: an LCP taken before an ALTER TABLE has the
/// rows of an older version, whose columns are the first ones of `table`
/// (alters only append columns), as many as the LCP recorded. `None`: the
/// LCP (if any) is of `table`'s version. An LCP of a newer version, or of
/// an older one that did not record its column count, is refused.
fn restore_definition(
    instance: u32,
    table: &TableDef,
    fragment_id: u32,
    newest: Option<checkpoint::CheckpointVersion>,
) -> Result<Option<TableDef>, LdmError> {
    let Some(lcp) = newest.filter(|v| v.table_version != table.version) else {
        return Ok(None);
    };
    let columns = lcp.columns.map(usize::from).filter(|&c| {
        lcp.table_version < table.version
            && (1..=table.columns.len()).contains(&c)
            && table.primary_key.iter().all(|&k| k < c)
    });
    match columns {
        Some(columns) => Ok(Some(table.with_first_columns(columns, lcp.table_version))),
        None => Err(LdmError::TableVersion {
            instance,
            table: table.name.clone(),
            table_id: table.id,
            fragment_id,
            expected: table.version,
            found: lcp.table_version,
            what: format!(
                "local checkpoint {} (of {} columns)",
                lcp.lcp_id,
                lcp.columns
                    .map_or("unrecorded".to_string(), |c| c.to_string())
            ),
        }),
    }
}

/// The checks a restored LCP must pass before its rows are used.
struct LcpCheck<'a> {
    instance: u32,
    table: &'a TableDef,
    fragment_id: u32,
    recovered: &'a Recovered,
    target: Option<Gci>,
    dir: &'a std::path::Path,
}

impl LcpCheck<'_> {
    fn check(&self, lcp: &RestoredCheckpoint) -> Result<(), LdmError> {
        let (instance, table, fragment_id) = (self.instance, self.table, self.fragment_id);
        if lcp.table_version > table.version {
            return Err(LdmError::TableVersion {
                instance,
                table: table.name.clone(),
                table_id: table.id,
                fragment_id,
                expected: table.version,
                found: lcp.table_version,
                what: format!("local checkpoint {}", lcp.lcp_id),
            });
        }
        if self.recovered.created {
            return Err(LdmError::RedoMissing {
                instance,
                dir: self.dir.to_path_buf(),
                table: table.name.clone(),
                fragment_id,
                lcp_id: lcp.lcp_id,
            });
        }
        let (tail, head) = (self.recovered.tail_lsn, self.recovered.head_lsn);
        if lcp.redo_start < tail || lcp.redo_start > head {
            return Err(LdmError::RedoGap {
                instance,
                table: table.name.clone(),
                fragment_id,
                lcp_id: lcp.lcp_id,
                redo_start: lcp.redo_start,
                tail,
                head,
            });
        }
        // An LCP completes only once the GCIs it may hold are durable, so
        // one that holds rows with no complete GCI in the log, or that
        // started after a GCI above the target had committed, lost its
        // redo (damage in the last flushed batch) or is newer than the
        // state asked for.
        let ahead = match self.target {
            None | Some(0) => lcp.rows > 0,
            Some(target) => lcp.max_gci > target,
        };
        if ahead {
            return Err(LdmError::CheckpointAhead {
                instance,
                table: table.name.clone(),
                fragment_id,
                lcp_id: lcp.lcp_id,
                lcp_gci: lcp.max_gci,
                recovered_gci: self.target,
            });
        }
        Ok(())
    }
}

/// Replays the redo log into the fragments, in lsn order.
fn replay(
    instance: u32,
    redo: &RedoLog,
    recovered: &Recovered,
    target: Option<Gci>,
    pool: &mut PagePool,
    restoring: &mut BTreeMap<FragmentKey, Restoring>,
    report: &mut RecoveryReport,
) -> Result<(), LdmError> {
    // Every complete record: those above the target are counted as voided.
    let mut records = redo.replay(recovered, Gci::MAX);
    let read_error = |source| LdmError::Redo {
        instance,
        source: Box::new(source),
    };
    while let Some(record) = records.next_record().map_err(read_error)? {
        let (lsn, gci) = (record.lsn, record.gci);
        let header =
            RedoRecord::decode(record.payload).map_err(|source| LdmError::BadRedoRecord {
                instance,
                lsn,
                gci,
                source,
            })?;
        let key = (header.table_id, header.fragment_id);
        let Some(r) = restoring.get_mut(&key) else {
            report.records_of_other_fragments += 1;
            continue;
        };
        if report.voided_above.is_some_and(|target| gci > target) {
            report.records_voided += 1;
            continue;
        }
        assert!(
            target.is_some_and(|target| gci <= target),
            "LDM instance {instance}: replay yielded a record of GCI {gci} (lsn {lsn}) above the GCI \
             {target:?} reached, not voided"
        );
        if lsn < r.report.replay_from {
            report.records_in_checkpoints += 1;
            continue;
        }
        let fragment = &mut r.state.fragment;
        if header.table_version > fragment.table_version() {
            return Err(LdmError::TableVersion {
                instance,
                table: fragment.table_name().to_string(),
                table_id: key.0,
                fragment_id: key.1,
                expected: fragment.table_version(),
                found: header.table_version,
                what: format!("the redo record at lsn {lsn}"),
            });
        }
        fragment
            .apply_redo(pool, record.payload)
            .map_err(|source| LdmError::Replay {
                instance,
                table: fragment.table_name().to_string(),
                fragment_id: key.1,
                lsn,
                gci,
                source: Box::new(source),
            })?;
        r.report.records_replayed += 1;
        report.records_replayed += 1;
    }
    Ok(())
}
