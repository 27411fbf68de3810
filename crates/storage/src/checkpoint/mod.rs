//! Local checkpoints (LCP) of one fragment's rows (NDB: DBLQH/BACKUP's LCP,
//! partial since NDB 7.6). DESIGN.md §5.
//!
//! Why: the redo log part is a ring of fixed size. An LCP writes a
//! fragment's rows to disk in the background, so that recovery can start
//! from it and replay only the redo written since the LCP began; the redo
//! before that point can then be reused.
//!
//! # Fuzzy, incremental, never blocking
//!
//! A [`CheckpointWriter`] is started for one fragment and one LCP id. At the
//! start it closes a row store generation ([`RowStore::mark_checkpoint`])
//! and takes a snapshot of the *page numbers* to write; the LDM then calls
//! [`CheckpointWriter::step`] between transactions, each call writing a few
//! pages as they are at that moment. Rows change between steps, so a page
//! is written as it was at some time after the LCP started: recovery makes
//! that exact by replaying the redo log from the LCP's start LSN, whose
//! records are idempotent upserts and deletes by key. At the end the writer
//! records every page in use, so that restore knows which pages exist.
//!
//! # Partial LCPs are row-level, and chains
//!
//! Every page record holds the bitmap of the page's live committed slots
//! and rows. A *full* LCP writes a record of every page that holds rows,
//! with all of them. A *partial* LCP (NDB 7.6's partial LCP) visits only
//! the fixed-size pages changed since the previous LCP began (generations,
//! the cheap filter) and writes, of each, the bitmap and only the rows
//! marked changed (see [`crate::memory::row_store`]); it clears the marks
//! of the rows it writes. So 1% of the rows updated at random make a
//! partial LCP of about 1% of a full one, although they touch nearly every
//! page.
//!
//! A chain is one full LCP and the partial LCPs after it. Restore gives
//! the chain applied oldest first: per page record, slots not live in its
//! bitmap are emptied (rows deleted since) and the rows it holds are
//! upserted; a live row absent from a record keeps its image from earlier
//! in the chain. An LCP is full when there is no previous one, every
//! [`FULL_CHECKPOINT_EVERY`] LCPs (bounding the chain restore reads), when
//! more than half of the rows are marked changed (then the full one is
//! hardly larger), when the table version or row layout changed, and
//! after an LCP that did not complete (see [`CheckpointWriter`]: its steps
//! unmarked rows that then are in no complete LCP).
//!
//! Why the marks are enough: a row unmarked is one whose current image an
//! LCP of the chain wrote (and cleared the mark) or restore put back from
//! the chain; any change since marks it again and stamps its page, so the
//! next LCP visits the page and writes it. Changes to a row's
//! variable-size part always mark the row and stamp its fixed-size page
//! (insert, update and delete all do), and a variable-size page that
//! changes without such a row change only moved bytes inside itself
//! (compaction keeps every row's reference).
//!
//! # Files and completeness
//!
//! In the LCP directory, per LCP: `t{T}-f{F}-lcp{ID}.data` (header, page
//! records, page list, trailer; every record with a CRC32C) and
//! `t{T}-f{F}-lcp{ID}.ctl`, the control file, written atomically (temporary
//! file, fsync, rename, directory fsync) after the data file is durable.
//! An LCP is complete exactly when its control file exists and checks out;
//! a missing or torn control file means the LCP did not finish and is
//! ignored. Damage to any file of the chain that a complete control file
//! vouches for is [`CheckpointError::Corrupt`]: restore refuses rather than
//! serve wrong rows. The byte layout is drawn in `docs/checkpoint-format.md`.
//!
//! All I/O is synchronous through [`crate::disk`]. The writer reuses its
//! buffers, so a step allocates nothing once warm.

mod format;
mod restore;
mod writer;

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use crate::disk::{Disk, OpenMode};
use crate::memory::MemoryError;
use crate::redo::Lsn;
use crate::Gci;

use format::{Control, CONTROL_BYTES, NO_PREVIOUS};

pub use restore::{restore, RestoredCheckpoint};
pub use writer::CheckpointWriter;

/// A full LCP at least every this many LCPs of a fragment: a chain has at
/// most this many members (one full, the rest partial).
pub const FULL_CHECKPOINT_EVERY: u32 = 8;

/// The writer hands its buffer to the disk once it holds this much.
pub const WRITE_CHUNK_BYTES: usize = 256 << 10;

/// Restore reads data files in chunks of this size (a larger record is
/// read whole).
pub const READ_CHUNK_BYTES: usize = 1 << 20;

/// Full or partial (see the module documentation).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum CheckpointKind {
    /// Every page with rows; the start of a chain.
    Full,
    /// Of the pages changed since the previous LCP of the chain began, the
    /// bitmap of live slots and the rows marked changed.
    Partial,
}

/// What one LCP of one fragment is: given by the LDM when it starts one.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct LcpStart {
    pub table_id: u32,
    /// The table's schema version; a change of it forces a full LCP.
    pub table_version: u32,
    pub fragment_id: u32,
    /// The LCP id (DIH's LCP round); increases with every LCP.
    pub lcp_id: u64,
    /// The redo log position recovery replays from: taken before the
    /// writer starts, so every change the LCP may miss comes after it.
    pub redo_start: Lsn,
    /// The newest GCI whose changes the fragment may hold when the LCP
    /// starts.
    pub max_gci: Gci,
}

/// A complete LCP, as the LDM keeps it to start the next one of the same
/// fragment (the next partial LCP writes what changed since this one
/// began).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct CompletedLcp {
    pub lcp_id: u64,
    pub kind: CheckpointKind,
    /// The full LCP that starts this LCP's chain.
    pub full_lcp_id: u64,
    /// Members of the chain up to and including this LCP (1 for a full).
    pub lcps_in_chain: u32,
    pub table_version: u32,
    pub redo_start: Lsn,
    pub max_gci: Gci,
    /// The row store generation closed when this LCP began. Meaningful
    /// only for the row store it was taken from, in this process: restore
    /// gives a fresh one for the row store it fills.
    pub generation: u32,
    pub fixed_bytes: u32,
    pub with_var: bool,
    /// Bytes of the data file.
    pub data_bytes: u64,
    /// Page records written (including ones with no rows).
    pub pages_written: u32,
    /// Rows written.
    pub rows_written: u64,
}

/// What a [`CheckpointWriter::step`] left to do.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Progress {
    /// Pages remain: call `step` again.
    More,
    /// Every page and the page list are written: call
    /// [`CheckpointWriter::finish`].
    Done,
}

/// Why a local checkpoint could not be written, restored or pruned.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("local checkpoint: {op} {} at offset {offset}: {source}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        offset: u64,
        #[source]
        source: io::Error,
    },
    #[error(
        "local checkpoint file {} is corrupt at offset {offset}: {reason}; refusing to restore \
         from it (restore this fragment from a replica: initial node restart)",
        file.display()
    )]
    Corrupt {
        file: PathBuf,
        offset: u64,
        reason: String,
    },
    #[error(
        "local checkpoint {} holds rows of {found}, but the row store to restore into takes rows \
         of {expected}",
        file.display()
    )]
    LayoutMismatch {
        file: PathBuf,
        found: String,
        expected: String,
    },
    #[error("restoring table {table_id} fragment {fragment_id} from {}: {source}", file.display())]
    Memory {
        table_id: u32,
        fragment_id: u32,
        file: PathBuf,
        #[source]
        source: MemoryError,
    },
}

fn io_error(op: &'static str, path: &Path, offset: u64, source: io::Error) -> CheckpointError {
    CheckpointError::Io {
        op,
        path: path.to_path_buf(),
        offset,
        source,
    }
}

fn corrupt(file: &Path, offset: u64, reason: impl Into<String>) -> CheckpointError {
    CheckpointError::Corrupt {
        file: file.to_path_buf(),
        offset,
        reason: reason.into(),
    }
}

// ----- file names -----

const DATA_SUFFIX: &str = ".data";
const CONTROL_SUFFIX: &str = ".ctl";
const TEMP_SUFFIX: &str = ".ctl.tmp";

fn file_prefix(table_id: u32, fragment_id: u32) -> String {
    format!("t{table_id}-f{fragment_id}-lcp")
}

fn data_path(dir: &Path, table_id: u32, fragment_id: u32, lcp_id: u64) -> PathBuf {
    let prefix = file_prefix(table_id, fragment_id);
    dir.join(format!("{prefix}{lcp_id}{DATA_SUFFIX}"))
}

fn control_path(dir: &Path, table_id: u32, fragment_id: u32, lcp_id: u64) -> PathBuf {
    let prefix = file_prefix(table_id, fragment_id);
    dir.join(format!("{prefix}{lcp_id}{CONTROL_SUFFIX}"))
}

fn temp_path(dir: &Path, table_id: u32, fragment_id: u32, lcp_id: u64) -> PathBuf {
    let prefix = file_prefix(table_id, fragment_id);
    dir.join(format!("{prefix}{lcp_id}{TEMP_SUFFIX}"))
}

/// The files of one fragment's LCPs in a directory, by LCP id.
fn list_files(
    disk: &dyn Disk,
    dir: &Path,
    table_id: u32,
    fragment_id: u32,
) -> Result<BTreeMap<u64, Vec<PathBuf>>, CheckpointError> {
    let entries = match disk.list_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => return Err(io_error("list directory", dir, 0, e)),
    };
    let prefix = file_prefix(table_id, fragment_id);
    let mut files: BTreeMap<u64, Vec<PathBuf>> = BTreeMap::new();
    for path in entries {
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let Some(rest) = name.strip_prefix(prefix.as_str()) else {
            continue;
        };
        let digits = rest.split('.').next().unwrap_or("");
        let suffix = &rest[digits.len()..];
        let Ok(id) = digits.parse::<u64>() else {
            continue;
        };
        // Only the names this module writes: "07" or "+7" are someone
        // else's files.
        let ours = [DATA_SUFFIX, CONTROL_SUFFIX, TEMP_SUFFIX].contains(&suffix);
        if ours && id.to_string() == digits {
            files.entry(id).or_default().push(path);
        }
    }
    Ok(files)
}

/// The control file of an LCP: `Ok(Ok(control))` when it is whole and
/// belongs to this fragment and LCP, `Ok(Err(why))` when it is missing or
/// not whole (the LCP did not complete), `Err` on an I/O failure or when
/// it is whole but of a format version this build does not read (an LCP
/// that completed: ignoring it would restore older rows, or none).
fn read_control(
    disk: &dyn Disk,
    dir: &Path,
    table_id: u32,
    fragment_id: u32,
    lcp_id: u64,
) -> Result<Result<Control, String>, CheckpointError> {
    let path = control_path(dir, table_id, fragment_id, lcp_id);
    let file = match disk.open(&path, OpenMode::ReadOnly) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Err("missing".to_string())),
        Err(e) => return Err(io_error("open", &path, 0, e)),
    };
    // One byte more than a control file has, to see a longer file.
    let mut bytes = [0u8; CONTROL_BYTES + 1];
    let read = file
        .read_full_at(0, &mut bytes)
        .map_err(|e| io_error("read", &path, 0, e))?;
    if let Some(version) = format::whole_control_version(&bytes[..read]) {
        if version != format::FORMAT_VERSION {
            let reason = format!(
                "format version {version}, this build reads {}",
                format::FORMAT_VERSION
            );
            return Err(corrupt(&path, 8, reason));
        }
    }
    let control = match Control::decode(&bytes[..read]) {
        Ok(control) => control,
        Err(why) => return Ok(Err(why)),
    };
    let ours = control.table_id == table_id
        && control.fragment_id == fragment_id
        && control.lcp_id == lcp_id;
    if !ours {
        return Ok(Err(format!(
            "names table {} fragment {} LCP {}",
            control.table_id, control.fragment_id, control.lcp_id
        )));
    }
    Ok(Ok(control))
}

/// The newest complete LCP of a fragment: the highest id whose control
/// file checks out. Newer ones without a good control file did not finish.
fn newest_complete(
    disk: &dyn Disk,
    dir: &Path,
    table_id: u32,
    fragment_id: u32,
    files: &BTreeMap<u64, Vec<PathBuf>>,
) -> Result<Option<Control>, CheckpointError> {
    for &lcp_id in files.keys().rev() {
        if let Ok(control) = read_control(disk, dir, table_id, fragment_id, lcp_id)? {
            return Ok(Some(control));
        }
    }
    Ok(None)
}

/// Which table version (and how many of its columns) the rows of a
/// fragment's newest complete LCP have: what a restore must read them
/// with. See [`newest_complete_version`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct CheckpointVersion {
    pub lcp_id: u64,
    pub table_version: u32,
    /// Columns of the table at that version; `None` when the LCP was
    /// written without saying ([`CheckpointWriter::start`]).
    pub columns: Option<u16>,
}

/// The version of a fragment's newest complete LCP (the one [`restore`]
/// would restore), read from its control file and its data file's header;
/// `Ok(None)` when it has none. Restore checks the whole chain later; this
/// only reads the header, checked by its own CRC and against the control
/// file.
pub fn newest_complete_version(
    disk: &dyn Disk,
    dir: &Path,
    table_id: u32,
    fragment_id: u32,
) -> Result<Option<CheckpointVersion>, CheckpointError> {
    let files = list_files(disk, dir, table_id, fragment_id)?;
    let Some(control) = newest_complete(disk, dir, table_id, fragment_id, &files)? else {
        return Ok(None);
    };
    let path = data_path(dir, table_id, fragment_id, control.lcp_id);
    let file = disk
        .open(&path, OpenMode::ReadOnly)
        .map_err(|e| io_error("open", &path, 0, e))?;
    let mut bytes = [0u8; format::DATA_HEADER_BYTES];
    let read = file
        .read_full_at(0, &mut bytes)
        .map_err(|e| io_error("read", &path, 0, e))?;
    if read < bytes.len() {
        return Err(corrupt(&path, 0, "the file is shorter than its header"));
    }
    let header = format::DataHeader::decode(&bytes).map_err(|why| corrupt(&path, 0, why))?;
    if header.table_version != control.table_version || header.lcp_id != control.lcp_id {
        let reason = format!("header {header:?} does not match its control file {control:?}");
        return Err(corrupt(&path, 0, reason));
    }
    Ok(Some(CheckpointVersion {
        lcp_id: control.lcp_id,
        table_version: header.table_version,
        columns: (header.columns != 0).then_some(header.columns),
    }))
}

/// The chain of a complete LCP, newest first, ending with its full LCP.
/// Every member must be complete: the newest one vouches for them, so a
/// missing or damaged one is corruption, not an unfinished LCP.
fn chain(disk: &dyn Disk, dir: &Path, newest: Control) -> Result<Vec<Control>, CheckpointError> {
    let (table_id, fragment_id) = (newest.table_id, newest.fragment_id);
    let mut members = vec![newest];
    let mut current = newest;
    while current.kind == CheckpointKind::Partial {
        let previous = current.previous_lcp_id;
        let path = control_path(dir, table_id, fragment_id, previous);
        let bad = |reason: String| {
            let reason = format!(
                "LCP {} builds on LCP {previous}, whose control file is {reason}",
                current.lcp_id
            );
            corrupt(&path, 0, reason)
        };
        let valid = previous < current.lcp_id
            && previous >= current.full_lcp_id
            && members.len() < FULL_CHECKPOINT_EVERY as usize;
        if !valid {
            return Err(bad("not a possible member of its chain".to_string()));
        }
        let control = read_control(disk, dir, table_id, fragment_id, previous)?.map_err(bad)?;
        let expected_count = u32::from(current.lcps_in_chain) - 1;
        if control.full_lcp_id != current.full_lcp_id
            || u32::from(control.lcps_in_chain) != expected_count
            || control.layout != current.layout
        {
            return Err(bad("of another chain or row layout".to_string()));
        }
        members.push(control);
        current = control;
    }
    if current.lcp_id != newest.full_lcp_id || current.previous_lcp_id != NO_PREVIOUS {
        let path = control_path(dir, table_id, fragment_id, current.lcp_id);
        return Err(corrupt(
            &path,
            0,
            "the chain does not start with its full LCP",
        ));
    }
    assert!(members.len() <= FULL_CHECKPOINT_EVERY as usize);
    Ok(members)
}

/// Writes `bytes` as the file `path` atomically: a temporary file, fsync,
/// rename over `path`, fsync of the directory. After a crash `path` is
/// either absent (or its old contents) or exactly `bytes`.
fn write_atomically(
    disk: &dyn Disk,
    dir: &Path,
    temp: &Path,
    path: &Path,
    bytes: &[u8],
) -> Result<(), CheckpointError> {
    debug_assert_eq!(path.parent(), Some(dir));
    crate::disk::write_file_atomically(disk, temp, path, bytes)
        .map_err(|e| io_error(e.step, &e.path, 0, e.source))
}

/// Deletes the files of a fragment's LCPs that restore no longer needs:
/// every LCP older than the newest complete one that is not a member of
/// its chain (older chains, failed attempts). LCPs newer than the newest
/// complete one are left alone: one may be in progress. Call it after an
/// LCP completes, not while one of this fragment is being restored.
/// Returns the number of files removed.
pub fn prune(
    disk: &dyn Disk,
    dir: &Path,
    table_id: u32,
    fragment_id: u32,
) -> Result<u32, CheckpointError> {
    let files = list_files(disk, dir, table_id, fragment_id)?;
    let Some(newest) = newest_complete(disk, dir, table_id, fragment_id, &files)? else {
        return Ok(0);
    };
    let keep: Vec<u64> = chain(disk, dir, newest)?.iter().map(|c| c.lcp_id).collect();
    let doomed = files
        .iter()
        .filter(|(id, _)| **id < newest.lcp_id && !keep.contains(id));
    // Control files go first and durably, so that a crash half-way never
    // leaves a control file vouching for a data file that is gone.
    let (controls, others): (Vec<&PathBuf>, Vec<&PathBuf>) = doomed
        .flat_map(|(_, paths)| paths.iter())
        .partition(|p| p.to_str().is_some_and(|s| s.ends_with(CONTROL_SUFFIX)));
    let mut removed = 0u32;
    for batch in [controls, others] {
        if batch.is_empty() {
            continue;
        }
        for path in batch {
            disk.remove_file(path)
                .map_err(|e| io_error("remove", path, 0, e))?;
            removed += 1;
        }
        disk.sync_dir(dir)
            .map_err(|e| io_error("fsync directory", dir, 0, e))?;
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disk::SimDisk;

    #[test]
    fn only_this_fragments_files_in_canonical_names_are_listed() {
        let disk = SimDisk::new(1);
        let dir = Path::new("/lcp");
        disk.create_dir_all(dir).unwrap();
        let names = [
            "t1-f2-lcp7.data",
            "t1-f2-lcp7.ctl",
            "t1-f2-lcp12.ctl.tmp",
            "t1-f2-lcp07.data",
            "t1-f2-lcp+8.data",
            "t1-f2-lcp9.bak",
            "t1-f22-lcp9.data",
            "t11-f2-lcp9.data",
            "redo-part0.control",
        ];
        for name in names {
            disk.open(&dir.join(name), OpenMode::CreateTruncate)
                .unwrap();
        }
        let files = list_files(&disk, dir, 1, 2).unwrap();
        assert_eq!(files.keys().copied().collect::<Vec<_>>(), [7, 12]);
        assert_eq!(files[&7].len(), 2);
        assert_eq!(data_path(dir, 1, 2, 7), dir.join("t1-f2-lcp7.data"));
        assert!(list_files(&disk, Path::new("/none"), 1, 2)
            .unwrap()
            .is_empty());
    }
}
