//! The redo log part of one LDM instance (NDB: a fragment log part).
//!
//! The LDM appends a logical record for every committed change, tagged
//! with its global checkpoint (GCI). Records collect in a memory buffer,
//! go to disk in batches ([`RedoLog::write_buffered`]) and are made durable
//! when the global checkpoint protocol asks ([`RedoLog::flush`]): the
//! flush writes a *GCI-complete marker* and fsyncs, after which every
//! record of that GCI or an older one survives a crash. Local checkpoints
//! make old records unnecessary; [`RedoLog::trim`] frees their space.
//!
//! The part is a ring of `files` pre-allocated files. An [`Lsn`] is a byte
//! position in the endless log: the ring position is `lsn mod capacity`,
//! so a record's place follows from its lsn and a record left from an
//! earlier lap carries the wrong one. Every record has a CRC32C and the
//! CRC of the record before it (a chain), so a torn write, a stale record
//! and a record left from before a restart are all told apart from the
//! live log. On open the log is scanned from its tail (kept in a small
//! control file) to the first record that does not fit; the log is cut
//! after the last GCI-complete marker before it. Whether that first bad
//! record is a torn tail or damage to durable data is decided by proof:
//! each marker records how far the log was already durable when it was
//! written, so a valid marker beyond the bad spot that says the spot was
//! durable turns the cut into a refusal to open. The byte layout is drawn
//! in `docs/redo-format.md`.
//!
//! Failures: a full log, an I/O error, a failed fsync and damage on disk
//! are errors ([`RedoError`]) that name the part, file and offset; a failed
//! write can be retried, a failed fsync leaves the part refusing work until
//! the node restarts. A caller breaking the protocol (a GCI that goes back,
//! a trim outside the durable log or not at a record start) is a bug in
//! the node's own state and panics.
//!
//! I/O goes through [`crate::disk`]; nothing in the append path allocates.
//! Writes are synchronous; the fsync of a flush need not be: a flush is
//! begun ([`RedoLog::begin_flush`]: the marker and the buffered records
//! written), synced elsewhere ([`RedoSync::run`], on an `io` thread) while
//! appends and writes go on, and completed ([`RedoLog::complete_flush`])
//! with the sync's outcome. The flush's GCI and lsn become durable only at
//! completion, and only then does anything rely on them (answers to the
//! global checkpoint, checkpoints that wait for a GCI, trims): a GCI is
//! reported durable only after its redo is synced. [`RedoLog::flush`] is
//! the three steps in one call, on the calling thread.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use crate::disk::{Disk, DiskFile, FileSync, OpenMode};
use crate::Gci;

/// `FragmentLogFileSize` default (NDB: 16M).
pub const REDO_FILE_SIZE_DEFAULT_BYTES: u64 = 16 << 20;
/// `NoOfFragmentLogFiles` default (NDB: 16).
pub const REDO_FILES_DEFAULT: u32 = 16;
/// Smallest file accepted: room for the file header and the largest record.
pub const REDO_FILE_SIZE_MIN_BYTES: u64 = 64 << 10;
/// Largest file accepted.
pub const REDO_FILE_SIZE_MAX_BYTES: u64 = 4 << 30;
/// Most files in one part (each stays open).
pub const REDO_FILES_MAX: u32 = 1024;
/// Largest record payload: a full row of 30,000 bytes, its key and the
/// LDM's own fields fit.
pub const REDO_RECORD_PAYLOAD_MAX_BYTES: usize = 48 << 10;
/// Records buffered in memory before `append` itself writes a batch.
pub const REDO_BUFFER_BYTES: usize = 4 << 20;
/// Each file starts with a header block; records follow it.
pub const REDO_FILE_HEADER_BYTES: u64 = 4096;
/// Every record starts with a header of this size.
pub const REDO_RECORD_HEADER_BYTES: usize = 32;

/// Records start at multiples of this, so that a search for a record
/// header after damage need only look at aligned positions.
const RECORD_ALIGN_BYTES: u64 = 8;
/// Bytes read from a file at once while scanning.
const READ_CHUNK_BYTES: usize = 1 << 20;
const MARKER_PAYLOAD_BYTES: usize = 8;
const MARKER_RECORD_BYTES: u64 = record_size(MARKER_PAYLOAD_BYTES);
/// Worst case for one marker: the marker and the skip to the next file
/// when it does not fit in the current one.
const MARKER_SLOT_BYTES: u64 = 2 * MARKER_RECORD_BYTES;
/// Data appends leave room for a flush marker and a restart marker, so a
/// flush never fails for lack of space that appends took.
const DATA_RESERVE_BYTES: u64 = 2 * MARKER_SLOT_BYTES;
/// Flush markers leave room for the restart marker an open may write.
const FLUSH_RESERVE_BYTES: u64 = MARKER_SLOT_BYTES;
const FILE_HEADER_USED_BYTES: usize = 36;
const CONTROL_BYTES: usize = 44;
/// The format version this build writes into the control file and into
/// the ring files it creates. Version 2 changed only the record checksum
/// (see [`RecordFormat`]); a part of version 1 is read and continued (its
/// control file is rewritten as version 2 before anything is appended, so
/// that an older build refuses the mixed log instead of cutting it).
const FORMAT_VERSION: u32 = 2;
/// The oldest format version this build opens.
const FORMAT_VERSION_MIN: u32 = 1;
/// Where a record header keeps its CRC.
const RECORD_CRC_AT: usize = 28;

/// Magic of a record of [`RecordFormat::V2`], the one this build writes.
const RECORD_MAGIC: [u8; 4] = *b"SKR2";
/// Magic of a record of [`RecordFormat::V1`], read only, in ring files
/// created by a build of format version 1.
const RECORD_MAGIC_V1: [u8; 4] = *b"SKRL";
const FILE_MAGIC: [u8; 8] = *b"SKARVRDO";
const CONTROL_MAGIC: [u8; 8] = *b"SKARVRCF";

const _: () = assert!((REDO_RECORD_HEADER_BYTES as u64).is_multiple_of(RECORD_ALIGN_BYTES));
const _: () = assert!(REDO_FILE_HEADER_BYTES.is_multiple_of(RECORD_ALIGN_BYTES));
const _: () = assert!(
    record_size(REDO_RECORD_PAYLOAD_MAX_BYTES) + DATA_RESERVE_BYTES
        <= REDO_FILE_SIZE_MIN_BYTES - REDO_FILE_HEADER_BYTES
);
const _: () = assert!(REDO_BUFFER_BYTES as u64 >= 2 * record_size(REDO_RECORD_PAYLOAD_MAX_BYTES));
const _: () = assert!(READ_CHUNK_BYTES >= REDO_RECORD_HEADER_BYTES + REDO_RECORD_PAYLOAD_MAX_BYTES);
const _: () = assert!(FILE_HEADER_USED_BYTES as u64 <= REDO_FILE_HEADER_BYTES);
// The LDM block that owns the part moves to its thread at start.
const _: fn() = || {
    fn send<T: Send>() {}
    send::<RedoLog>();
};

/// Bytes a record with `payload` bytes takes in the log.
const fn record_size(payload: usize) -> u64 {
    let raw = (REDO_RECORD_HEADER_BYTES + payload) as u64;
    raw.div_ceil(RECORD_ALIGN_BYTES) * RECORD_ALIGN_BYTES
}

/// A log sequence number: the byte position of a record in the endless
/// log of one part. Increases with every append; never reused.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Lsn(pub u64);

impl fmt::Display for Lsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Where and how large the redo log part of one LDM instance is. The
/// config crate maps `FragmentLogFileSize` and `NoOfFragmentLogFiles` here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedoConfig {
    pub dir: PathBuf,
    /// The LDM instance this part belongs to.
    pub part: u32,
    pub file_size_bytes: u64,
    pub files: u32,
    /// The file count an earlier build made this part with for the same
    /// configuration (before an instance's part counted its share of
    /// `NoOfFragmentLogParts`): a part found with that many files of
    /// `file_size_bytes` is opened as it is, not refused as a changed
    /// geometry, so that upgrading needs no initial restart. The new size
    /// applies once the part is made again (an initial start).
    pub earlier_files: Option<u32>,
}

impl RedoConfig {
    /// A part with NDB's default size (16 files of 16 MiB).
    pub fn new(dir: impl Into<PathBuf>, part: u32) -> RedoConfig {
        RedoConfig {
            dir: dir.into(),
            part,
            file_size_bytes: REDO_FILE_SIZE_DEFAULT_BYTES,
            files: REDO_FILES_DEFAULT,
            earlier_files: None,
        }
    }

    pub fn file_path(&self, index: u32) -> PathBuf {
        self.dir
            .join(format!("redo-part{}-{index:04}.log", self.part))
    }

    /// The control file: the tail of the ring and the geometry.
    pub fn control_path(&self) -> PathBuf {
        self.dir.join(format!("redo-part{}.control", self.part))
    }

    fn control_temp_path(&self) -> PathBuf {
        self.dir.join(format!("redo-part{}.control.tmp", self.part))
    }

    /// Bytes of records the ring holds.
    pub fn capacity_bytes(&self) -> u64 {
        self.ring().capacity
    }

    /// The file (index) and byte offset in it where `lsn` lives.
    pub fn locate(&self, lsn: Lsn) -> (u32, u64) {
        let (file, offset) = self.ring().locate(lsn.0);
        (file as u32, offset)
    }

    fn ring(&self) -> Ring {
        let data_per_file = self.file_size_bytes.saturating_sub(REDO_FILE_HEADER_BYTES);
        Ring {
            data_per_file,
            capacity: data_per_file * u64::from(self.files),
        }
    }

    fn validate(&self) -> Result<(), RedoError> {
        let bad = |detail: String| {
            Err(RedoError::Config {
                part: self.part,
                detail,
            })
        };
        let size = self.file_size_bytes;
        if !(REDO_FILE_SIZE_MIN_BYTES..=REDO_FILE_SIZE_MAX_BYTES).contains(&size) {
            return bad(format!(
                "FragmentLogFileSize={size} bytes is outside \
                 {REDO_FILE_SIZE_MIN_BYTES}..={REDO_FILE_SIZE_MAX_BYTES}"
            ));
        }
        if !size.is_multiple_of(REDO_FILE_HEADER_BYTES) {
            return bad(format!(
                "FragmentLogFileSize={size} bytes is not a multiple of {REDO_FILE_HEADER_BYTES}"
            ));
        }
        if !(1..=REDO_FILES_MAX).contains(&self.files) {
            return bad(format!(
                "{} files (NoOfFragmentLogFiles times the instance's share of \
                 NoOfFragmentLogParts) is outside 1..={REDO_FILES_MAX}",
                self.files
            ));
        }
        Ok(())
    }
}

/// The geometry of the ring: lsn → (file, offset).
#[derive(Copy, Clone, Debug)]
struct Ring {
    data_per_file: u64,
    capacity: u64,
}

impl Ring {
    fn locate(&self, lsn: u64) -> (usize, u64) {
        let position = lsn % self.capacity;
        let file = position / self.data_per_file;
        let offset = REDO_FILE_HEADER_BYTES + position % self.data_per_file;
        (file as usize, offset)
    }

    /// Bytes from `lsn` to the end of its file.
    fn file_remaining(&self, lsn: u64) -> u64 {
        self.data_per_file - (lsn % self.capacity) % self.data_per_file
    }
}

/// Why the redo log part refused an operation.
#[derive(Debug, thiserror::Error)]
pub enum RedoError {
    #[error(
        "redo log part {part} is full: {used_bytes} of {capacity_bytes} bytes hold records that no \
         local checkpoint covers yet; wait for a local checkpoint to complete (it frees the log), \
         or raise FragmentLogFileSize or NoOfFragmentLogFiles (an initial restart of the node \
         recreates the files)"
    )]
    Full {
        part: u32,
        used_bytes: u64,
        capacity_bytes: u64,
    },
    #[error("redo log part {part}: a record of {len} bytes exceeds the limit of {max} bytes")]
    RecordTooLarge { part: u32, len: usize, max: usize },
    #[error("redo log part {part}: bad configuration: {detail}")]
    Config { part: u32, detail: String },
    #[error("redo log part {part}: {op} {} at offset {offset}: {source}", path.display())]
    Io {
        part: u32,
        op: &'static str,
        path: PathBuf,
        offset: u64,
        #[source]
        source: io::Error,
    },
    #[error(
        "redo log part {part}: fsync of {} failed: {source}; what reached the disk is unknown, \
         so this part takes no more work: restart the node (recovery cuts the log after the \
         last durable GCI)",
        path.display()
    )]
    SyncFailed {
        part: u32,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("redo log part {part} is out of service after an earlier failure ({reason}); restart the node")]
    Poisoned { part: u32, reason: String },
    #[error(
        "redo log part {part} is corrupt in the middle: {} offset {offset} (lsn {lsn}): {detail}; \
         the log was durable past this point, so it refuses to open rather than lose committed \
         changes: restart this node from a replica (initial node restart)",
        path.display()
    )]
    Corrupt {
        part: u32,
        path: PathBuf,
        offset: u64,
        lsn: Lsn,
        detail: String,
    },
    #[error("redo log part {part}: {}: {detail}", path.display())]
    BadFile {
        part: u32,
        path: PathBuf,
        detail: String,
    },
    #[error(
        "redo log part {part} in {} was created with {found_files} files of {found_file_size_bytes} \
         bytes, but the configuration asks for {files} files of {file_size_bytes} bytes; changing \
         FragmentLogFileSize or NoOfFragmentLogFiles needs an initial restart of this node",
        dir.display()
    )]
    GeometryChanged {
        part: u32,
        dir: PathBuf,
        found_files: u32,
        found_file_size_bytes: u64,
        files: u32,
        file_size_bytes: u64,
    },
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Kind {
    /// A record from the LDM.
    Data = 1,
    /// Every record of GCI ≤ `gci` lies before this marker.
    GciComplete = 2,
    /// Written after a restart: records before it with a GCI above its
    /// `gci` are void: they never completed, or a restore to the older
    /// GCI `gci` voided them (their GCIs may be reused).
    Restart = 3,
    /// The rest of this file is unused; the log goes on in the next file.
    Pad = 4,
}

impl Kind {
    fn from_byte(byte: u8) -> Option<Kind> {
        match byte {
            1 => Some(Kind::Data),
            2 => Some(Kind::GciComplete),
            3 => Some(Kind::Restart),
            4 => Some(Kind::Pad),
            _ => None,
        }
    }

    fn is_marker(self) -> bool {
        matches!(self, Kind::GciComplete | Kind::Restart)
    }
}

fn le_u32(bytes: &[u8], at: usize) -> u32 {
    let mut word = [0; 4];
    word.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(word)
}

fn le_u64(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

/// A record header as found on disk, not yet validated.
#[derive(Copy, Clone, Debug)]
struct Header {
    kind_byte: u8,
    reserved: [u8; 3],
    payload_len: u32,
    gci: Gci,
    lsn: u64,
    prev_crc: u32,
    crc: u32,
}

impl Header {
    fn decode(bytes: &[u8]) -> Header {
        debug_assert!(bytes.len() >= REDO_RECORD_HEADER_BYTES);
        Header {
            kind_byte: bytes[4],
            reserved: [bytes[5], bytes[6], bytes[7]],
            payload_len: le_u32(bytes, 8),
            gci: le_u32(bytes, 12),
            lsn: le_u64(bytes, 16),
            prev_crc: le_u32(bytes, 24),
            crc: le_u32(bytes, 28),
        }
    }

    /// A header of the format this build writes, its CRC field zero (the
    /// CRC is computed over the record with the field so, see
    /// [`RedoLog::seal_record`]).
    fn encode(kind: Kind, payload_len: usize, gci: Gci, lsn: u64, prev_crc: u32) -> [u8; 32] {
        let mut h = [0u8; REDO_RECORD_HEADER_BYTES];
        h[0..4].copy_from_slice(&RECORD_MAGIC);
        h[4] = kind as u8;
        h[8..12].copy_from_slice(&(payload_len as u32).to_le_bytes());
        h[12..16].copy_from_slice(&gci.to_le_bytes());
        h[16..24].copy_from_slice(&lsn.to_le_bytes());
        h[24..28].copy_from_slice(&prev_crc.to_le_bytes());
        h
    }
}

/// How a record's CRC is computed; its magic says which. A log part may
/// hold both: records of a version-1 build before those appended after an
/// upgrade.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum RecordFormat {
    /// CRC32C of the header's bytes before the CRC field, then of the
    /// payload (format version 1).
    V1,
    /// CRC32C of the whole record, header and payload, with the CRC field
    /// taken as zero: a record being appended is one run of bytes in the
    /// buffer, checksummed in one call (format version 2).
    V2,
}

impl RecordFormat {
    /// The format a record's magic names, if it is a record's.
    fn of_magic(magic: &[u8]) -> Option<RecordFormat> {
        if magic == RECORD_MAGIC {
            Some(RecordFormat::V2)
        } else if magic == RECORD_MAGIC_V1 {
            Some(RecordFormat::V1)
        } else {
            None
        }
    }

    /// The CRC of `record` (header and payload, no padding) as it lies on
    /// disk, its CRC field holding the CRC.
    fn crc_of_written(self, record: &[u8]) -> u32 {
        let field = RECORD_CRC_AT..RECORD_CRC_AT + 4;
        let head = crc32c::crc32c(&record[..field.start]);
        let head = match self {
            RecordFormat::V1 => head,
            RecordFormat::V2 => crc32c::crc32c_append(head, &[0; 4]),
        };
        crc32c::crc32c_append(head, &record[field.end..])
    }
}

/// A recovered part: what the scan at open found.
#[derive(Clone, Debug)]
pub struct Recovered {
    /// First record still needed (the tail in the control file).
    pub tail_lsn: Lsn,
    /// Where the log continues: just after the last GCI-complete marker.
    pub head_lsn: Lsn,
    /// The highest GCI whose records are all in this part, if any marker
    /// is left after trims.
    pub complete_gci: Option<Gci>,
    /// Data records kept (in `[tail, head)`), void ones included.
    pub records: u64,
    /// Set when the files were created by this open (initial start).
    pub created: bool,
    /// Set when something after the head was cut: a torn tail, records
    /// of an incomplete GCI, a truncated file.
    pub cut: Option<TailCut>,
    markers: Vec<Marker>,
    restarts: Vec<Marker>,
}

/// What a recovery cut from the end of the log, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TailCut {
    /// The log ends here now; later appends overwrite what follows.
    pub cut_at_lsn: Lsn,
    /// Where the scan found the first record it could not use.
    pub stopped_at_lsn: Lsn,
    pub file: PathBuf,
    pub offset: u64,
    /// Valid data records after the cut (of GCIs that never completed).
    pub dropped_records: u64,
    pub reason: String,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Marker {
    lsn: u64,
    gci: Gci,
}

impl Recovered {
    /// The oldest GCI this part can be replayed to.
    pub fn oldest_complete_gci(&self) -> Option<Gci> {
        self.markers.first().map(|m| m.gci)
    }

    /// The GCI a replay up to `upto_gci` reaches: the highest complete GCI
    /// not above it.
    pub fn replay_target(&self, upto_gci: Gci) -> Option<Gci> {
        self.end_marker(upto_gci).map(|m| m.gci)
    }

    fn end_marker(&self, upto_gci: Gci) -> Option<Marker> {
        let after = self.markers.partition_point(|m| m.gci <= upto_gci);
        after.checked_sub(1).map(|i| self.markers[i])
    }
}

/// The redo log part of one LDM instance. See the module documentation.
pub struct RedoLog {
    disk: Box<dyn Disk>,
    config: RedoConfig,
    ring: Ring,
    files: Vec<Box<dyn DiskFile>>,
    /// Files written since their last fsync.
    dirty: Vec<bool>,
    /// The format version each file was created in: records of format 1
    /// are taken only in files of version 1.
    file_versions: Vec<u32>,
    /// `tail ≤ durable ≤ written ≤ next ≤ tail + capacity`.
    tail: u64,
    /// End of the last flush: everything before is on disk and synced.
    durable: u64,
    /// End of what was handed to the files.
    written: u64,
    /// End of what was appended; `buffer` holds `[written, next)`.
    next: u64,
    /// Bytes from `next` to the end of its file (kept, not divided out,
    /// on the append path).
    next_file_remaining: u64,
    buffer: Vec<u8>,
    /// CRC of the record that ends at `next` (the chain link of the next).
    last_crc: u32,
    /// GCI of the last marker appended.
    marked_gci: Option<Gci>,
    /// GCI of the last marker made durable.
    durable_gci: Option<Gci>,
    /// Set after an fsync failed: the part refuses all work.
    poisoned: Option<String>,
    /// The flush begun and not yet completed: what it makes durable.
    in_flight: Option<FlushTarget>,
    /// The most the memory buffer held when handed to the files
    /// (`ndbinfo.logbuffers`).
    buffer_high_water: u64,
}

/// What a flush makes durable once its sync succeeds.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct FlushTarget {
    /// `written` when it began: everything before is in its files.
    lsn: u64,
    /// The marker it wrote (or the one before, unchanged).
    gci: Option<Gci>,
}

/// The sync of a begun flush ([`RedoLog::begin_flush`]): the files it
/// wrote, to fsync on any thread. Holds no reference to the log.
pub struct RedoSync {
    part: u32,
    files: Vec<(PathBuf, Box<dyn FileSync>)>,
}

impl fmt::Debug for RedoSync {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let paths: Vec<&PathBuf> = self.files.iter().map(|(path, _)| path).collect();
        f.debug_struct("RedoSync")
            .field("part", &self.part)
            .field("files", &paths)
            .finish()
    }
}

impl RedoSync {
    /// Fsyncs every file the flush wrote; `Err` names the file that failed
    /// (what reached the disk is then unknown).
    pub fn run(&self) -> Result<(), String> {
        for (path, file) in &self.files {
            if let Err(source) = file.sync() {
                return Err(format!(
                    "redo log part {}: fsync of {} failed: {source}",
                    self.part,
                    path.display()
                ));
            }
        }
        Ok(())
    }

    /// Files to sync (0 when the flush wrote nothing new).
    pub fn files(&self) -> usize {
        self.files.len()
    }
}

/// The control file write of a begun trim ([`RedoLog::begin_trim`]), to
/// run on any thread.
#[derive(Debug)]
pub struct RedoTrim {
    part: u32,
    temp: PathBuf,
    path: PathBuf,
    bytes: [u8; CONTROL_BYTES],
    /// The new tail.
    upto: u64,
}

impl RedoTrim {
    /// Writes the control file naming the new tail atomically (temporary
    /// file, fsync, rename, directory fsync) on `disk`, the log's.
    pub fn run(&self, disk: &dyn Disk) -> Result<(), String> {
        crate::disk::write_file_atomically(disk, &self.temp, &self.path, &self.bytes).map_err(|e| {
            format!(
                "redo log part {}: {} {}: {}",
                self.part,
                e.step,
                e.path.display(),
                e.source
            )
        })
    }

    /// The tail it moves to.
    pub fn upto(&self) -> Lsn {
        Lsn(self.upto)
    }
}

impl fmt::Debug for RedoLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedoLog")
            .field("config", &self.config)
            .field("tail", &self.tail)
            .field("durable", &self.durable)
            .field("written", &self.written)
            .field("next", &self.next)
            .field("durable_gci", &self.durable_gci)
            .field("poisoned", &self.poisoned)
            .field("in_flight", &self.in_flight)
            .finish_non_exhaustive()
    }
}

impl RedoLog {
    /// Opens the part: creates and pre-allocates its files on first start,
    /// or scans them, cuts a torn or incomplete tail (reported in
    /// [`Recovered::cut`]) and refuses to open if durable records are
    /// damaged. Replay what it found with [`RedoLog::replay`].
    pub fn open(
        disk: Box<dyn Disk>,
        config: RedoConfig,
    ) -> Result<(RedoLog, Recovered), RedoError> {
        config.validate()?;
        let part = config.part;
        disk.create_dir_all(&config.dir)
            .map_err(|source| RedoError::Io {
                part,
                op: "create directory",
                path: config.dir.clone(),
                offset: 0,
                source,
            })?;
        let ring = config.ring();
        let mut log = RedoLog {
            disk,
            config,
            ring,
            files: Vec::new(),
            dirty: Vec::new(),
            file_versions: Vec::new(),
            tail: 0,
            durable: 0,
            written: 0,
            next: 0,
            next_file_remaining: ring.data_per_file,
            buffer: Vec::with_capacity(REDO_BUFFER_BYTES),
            last_crc: 0,
            marked_gci: None,
            durable_gci: None,
            poisoned: None,
            in_flight: None,
            buffer_high_water: 0,
        };
        let recovered = match log.read_control()? {
            None => log.create()?,
            Some((tail, version)) => log.recover(tail, version)?,
        };
        log.check_invariants();
        Ok((log, recovered))
    }

    /// Appends a record of `gci`; returns its lsn. The record is durable
    /// after a [`RedoLog::flush`] of a GCI ≥ `gci`. `gci` must be above
    /// every GCI already flushed.
    pub fn append(&mut self, gci: Gci, payload: &[u8]) -> Result<Lsn, RedoError> {
        self.check_usable()?;
        if payload.len() > REDO_RECORD_PAYLOAD_MAX_BYTES {
            return Err(RedoError::RecordTooLarge {
                part: self.config.part,
                len: payload.len(),
                max: REDO_RECORD_PAYLOAD_MAX_BYTES,
            });
        }
        assert!(
            self.marked_gci.is_none_or(|marked| gci > marked),
            "redo part {}: append of GCI {gci} after GCI {:?} was flushed",
            self.config.part,
            self.marked_gci
        );
        let need = self.consumption(record_size(payload.len()));
        self.make_room(need, DATA_RESERVE_BYTES)?;
        Ok(Lsn(self.emit(Kind::Data, gci, payload)))
    }

    /// Hands every buffered record to the files (one write per file the
    /// batch touches), without fsync.
    pub fn write_buffered(&mut self) -> Result<(), RedoError> {
        self.check_usable()?;
        self.buffer_high_water = self.buffer_high_water.max(self.next - self.written);
        let mut lsn = self.written;
        while lsn < self.next {
            let (file, offset) = self.ring.locate(lsn);
            let len = (self.next - lsn).min(self.ring.file_remaining(lsn));
            let at = (lsn - self.written) as usize;
            let bytes = &self.buffer[at..at + len as usize];
            if let Err(source) = self.files[file].write_at(offset, bytes) {
                // Nothing advances: a retry writes the same bytes again.
                return Err(self.io_error("write", file, offset, source));
            }
            self.dirty[file] = true;
            lsn += len;
        }
        self.written = self.next;
        self.buffer.clear();
        Ok(())
    }

    /// Makes every record of GCI ≤ `upto_gci` durable: writes a
    /// GCI-complete marker and what is buffered, then fsyncs. `upto_gci`
    /// never goes down. After a failed fsync the part refuses all work.
    pub fn flush(&mut self, upto_gci: Gci) -> Result<(), RedoError> {
        let sync = self.begin_flush(upto_gci)?;
        let outcome = sync.run();
        self.complete_flush(outcome)
    }

    /// Begins [`RedoLog::flush`]: appends the GCI-complete marker of
    /// `upto_gci` (once: a retry after a failure does not append it again)
    /// and writes what is buffered. Returns the sync to run (on any
    /// thread); hand its outcome to [`RedoLog::complete_flush`]. Nothing
    /// counts as durable before that. One flush at a time; appends and
    /// writes may go on meanwhile.
    pub fn begin_flush(&mut self, upto_gci: Gci) -> Result<RedoSync, RedoError> {
        self.check_usable()?;
        self.assert_no_flush_in_flight();
        assert!(
            self.marked_gci.is_none_or(|marked| upto_gci >= marked),
            "redo part {}: flush of GCI {upto_gci} after GCI {:?}",
            self.config.part,
            self.marked_gci
        );
        if self.marked_gci != Some(upto_gci) {
            self.make_room(self.consumption(MARKER_RECORD_BYTES), FLUSH_RESERVE_BYTES)?;
            let durable = self.durable.to_le_bytes();
            self.emit(Kind::GciComplete, upto_gci, &durable);
            self.marked_gci = Some(upto_gci);
        }
        self.begin_sync()
    }

    fn assert_no_flush_in_flight(&self) {
        assert!(
            self.in_flight.is_none(),
            "redo part {}: a flush begun while another is in flight",
            self.config.part
        );
    }

    /// Whether a flush was begun and not completed.
    pub fn flush_in_flight(&self) -> bool {
        self.in_flight.is_some()
    }

    /// Completes the flush begun last with the outcome of its
    /// [`RedoSync::run`]: on `Ok` its marker's GCI and everything written
    /// before it are durable; on `Err` the part refuses all work (what
    /// reached the disk is unknown) and the error says so.
    pub fn complete_flush(&mut self, outcome: Result<(), String>) -> Result<(), RedoError> {
        let target = self.in_flight.take().unwrap_or_else(|| {
            panic!(
                "redo part {}: a flush completed that was not begun",
                self.config.part
            )
        });
        if let Err(reason) = outcome {
            self.poisoned = Some(reason.clone());
            return Err(RedoError::SyncFailed {
                part: self.config.part,
                path: self.config.dir.clone(),
                source: io::Error::other(reason),
            });
        }
        // The durable log only grows, and only to what was written when the
        // flush began (later writes may or may not be on disk). Its GCI is
        // the marker's, which a restart marker (`void_above`) lowers.
        assert!(target.lsn >= self.durable && target.lsn <= self.written);
        assert!(target.gci <= self.marked_gci);
        self.durable = target.lsn;
        self.durable_gci = target.gci;
        self.check_invariants();
        Ok(())
    }

    /// Voids, durably, every record of a GCI above `gci` (a GCI this part
    /// holds complete): writes a restart marker of `gci` and fsyncs. For a
    /// restore to a GCI below the local durable one (a system restart to
    /// the GCI the cluster completed): the records of the GCIs above it are
    /// durable here but must never be replayed, by this restart or a later
    /// one, and their GCI-complete markers stop counting. Durable before it
    /// returns, so no new record can precede it on disk. Returns the
    /// marker's lsn.
    pub fn void_above(&mut self, gci: Gci) -> Result<Lsn, RedoError> {
        self.check_usable()?;
        assert!(
            self.marked_gci.is_some_and(|marked| gci < marked),
            "redo part {}: void above GCI {gci}, but the newest GCI marked is {:?}",
            self.config.part,
            self.marked_gci
        );
        self.make_room(self.consumption(MARKER_RECORD_BYTES), 0)?;
        let durable = self.durable.to_le_bytes();
        let lsn = self.emit(Kind::Restart, gci, &durable);
        self.marked_gci = Some(gci);
        self.sync_all()?;
        Ok(Lsn(lsn))
    }

    /// Writes what is buffered and fsyncs every file written since its
    /// last fsync, on this thread; the last marker appended becomes the
    /// durable one.
    fn sync_all(&mut self) -> Result<(), RedoError> {
        let sync = self.begin_sync()?;
        let outcome = sync.run();
        self.complete_flush(outcome)
    }

    /// Writes what is buffered and takes the sync handles of every file
    /// written since its last sync; the flush is in flight from here.
    fn begin_sync(&mut self) -> Result<RedoSync, RedoError> {
        self.assert_no_flush_in_flight();
        self.write_buffered()?;
        let mut files = Vec::new();
        for file in 0..self.files.len() {
            if self.dirty[file] {
                // Clean from here: a write after this point makes it dirty
                // again, for the next flush. After a failed sync the part
                // refuses all work, so nothing is lost by clearing early.
                self.dirty[file] = false;
                let path = self.config.file_path(file as u32);
                files.push((path, self.files[file].sync_handle()));
            }
        }
        self.in_flight = Some(FlushTarget {
            lsn: self.written,
            gci: self.marked_gci,
        });
        Ok(RedoSync {
            part: self.config.part,
            files,
        })
    }

    /// Frees the records before `upto_lsn` (a local checkpoint covers
    /// them). `upto_lsn` is the lsn of a durable record or
    /// [`RedoLog::durable_lsn`]. The new tail is durable (control file)
    /// before the space is reused.
    pub fn trim(&mut self, upto_lsn: Lsn) -> Result<(), RedoError> {
        let Some(trim) = self.begin_trim(upto_lsn)? else {
            return Ok(());
        };
        let outcome = trim.run(self.disk.as_ref());
        self.complete_trim(&trim, outcome)
    }

    /// Begins [`RedoLog::trim`] without writing: returns the control file
    /// write to run on any thread ([`RedoTrim::run`]), whose outcome goes
    /// to [`RedoLog::complete_trim`]; the tail moves (and the space is
    /// free for appends) only then, once the new tail is durable. `None`:
    /// nothing to trim.
    pub fn begin_trim(&mut self, upto_lsn: Lsn) -> Result<Option<RedoTrim>, RedoError> {
        self.check_usable()?;
        let upto = upto_lsn.0;
        assert!(
            (self.tail..=self.durable).contains(&upto),
            "redo part {}: trim to lsn {upto} outside the durable log [{}, {}]",
            self.config.part,
            self.tail,
            self.durable
        );
        if upto == self.tail {
            return Ok(None);
        }
        if upto < self.durable {
            self.assert_record_boundary(upto)?;
        }
        Ok(Some(RedoTrim {
            part: self.config.part,
            temp: self.config.control_temp_path(),
            path: self.config.control_path(),
            bytes: self.control_bytes(upto),
            upto,
        }))
    }

    /// Completes a trim begun by [`RedoLog::begin_trim`] with the outcome
    /// of its [`RedoTrim::run`]: on `Ok` the tail moves to the new one
    /// (durable in the control file by then). A failed write changes
    /// nothing here (the old control file or the new one is on disk, both
    /// valid: the records between the two tails are still in the log).
    pub fn complete_trim(
        &mut self,
        trim: &RedoTrim,
        outcome: Result<(), String>,
    ) -> Result<(), RedoError> {
        assert_eq!(trim.part, self.config.part, "a trim of another part");
        if let Err(reason) = outcome {
            return Err(RedoError::Io {
                part: self.config.part,
                op: "write control file",
                path: trim.path.clone(),
                offset: 0,
                source: io::Error::other(reason),
            });
        }
        // Tails only grow: a later trim began from this one's state.
        assert!(
            trim.upto >= self.tail && trim.upto <= self.durable,
            "redo part {}: trim to lsn {} completed outside [{}, {}]",
            self.config.part,
            trim.upto,
            self.tail,
            self.durable
        );
        self.tail = trim.upto;
        self.check_invariants();
        Ok(())
    }

    /// Reads the records recovered by [`RedoLog::open`] for replay: those
    /// of GCI ≤ the highest complete GCI not above `upto_gci`, in lsn order.
    pub fn replay(&self, recovered: &Recovered, upto_gci: Gci) -> Replay<'_> {
        let end = recovered.end_marker(upto_gci);
        let start = self.tail.max(recovered.tail_lsn.0);
        let (end_lsn, target) = match end {
            Some(marker) if marker.lsn >= start => (marker.lsn, Some(marker.gci)),
            _ => (start, None),
        };
        // Restart markers before the end void the records before them of a
        // higher GCI; suffix minima answer "does any later restart void
        // this record" in O(1) per record.
        let restarts: Vec<Marker> = recovered
            .restarts
            .iter()
            .copied()
            .filter(|r| r.lsn < end_lsn)
            .collect();
        let mut void_above = vec![Gci::MAX; restarts.len()];
        for i in (0..restarts.len()).rev() {
            let later = void_above.get(i + 1).copied().unwrap_or(Gci::MAX);
            void_above[i] = restarts[i].gci.min(later);
        }
        Replay {
            log: self,
            reader: LogReader::new(vec![self.config.file_size_bytes; self.files.len()]),
            lsn: start,
            end: end_lsn,
            target,
            prev_crc: None,
            restarts,
            void_above,
            restart_index: 0,
        }
    }

    /// The part's geometry as opened: the configured one, or the one it
    /// was made with when that was its `earlier_files`.
    pub fn config(&self) -> &RedoConfig {
        &self.config
    }

    /// First record still kept.
    pub fn tail_lsn(&self) -> Lsn {
        Lsn(self.tail)
    }

    /// End of the appended records (the lsn of the next append, unless it
    /// has to skip to the next file).
    pub fn head_lsn(&self) -> Lsn {
        Lsn(self.next)
    }

    /// End of what the last flush made durable.
    pub fn durable_lsn(&self) -> Lsn {
        Lsn(self.durable)
    }

    /// The highest GCI made durable by a flush (or found complete at open).
    pub fn durable_gci(&self) -> Option<Gci> {
        self.durable_gci
    }

    /// The GCI of the last marker appended: durable, or being flushed.
    /// Appends must be of a higher GCI.
    pub fn marked_gci(&self) -> Option<Gci> {
        self.marked_gci
    }

    /// Bytes between tail and head.
    pub fn used_bytes(&self) -> u64 {
        self.next - self.tail
    }

    pub fn capacity_bytes(&self) -> u64 {
        self.ring.capacity
    }

    /// Bytes of records in the memory buffer, not yet handed to the files.
    pub fn buffered_bytes(&self) -> u64 {
        self.next - self.written
    }

    /// The most the memory buffer held when it was handed to the files.
    pub fn buffer_high_water_bytes(&self) -> u64 {
        self.buffer_high_water
    }

    /// Bytes handed to the files and not yet fsynced: committed work that
    /// the next GCP's flush makes durable.
    pub fn unsynced_bytes(&self) -> u64 {
        self.written - self.durable
    }

    // -- appending ---------------------------------------------------------

    fn check_usable(&self) -> Result<(), RedoError> {
        match &self.poisoned {
            None => Ok(()),
            Some(reason) => Err(RedoError::Poisoned {
                part: self.config.part,
                reason: reason.clone(),
            }),
        }
    }

    /// Bytes a record of `size` takes at the head, with the skip to the
    /// next file when it does not fit in this one.
    fn consumption(&self, size: u64) -> u64 {
        let remaining = self.next_file_remaining;
        if size <= remaining {
            size
        } else {
            remaining + size
        }
    }

    /// Checks that `need` bytes fit, leaving `reserve`, and that the buffer
    /// has room for them (writing it out if not).
    fn make_room(&mut self, need: u64, reserve: u64) -> Result<(), RedoError> {
        if self.next + need + reserve > self.tail + self.ring.capacity {
            return Err(RedoError::Full {
                part: self.config.part,
                used_bytes: self.used_bytes(),
                capacity_bytes: self.ring.capacity,
            });
        }
        if self.buffer.len() as u64 + need > REDO_BUFFER_BYTES as u64 {
            self.write_buffered()?;
        }
        debug_assert!(self.buffer.len() as u64 + need <= self.buffer.capacity() as u64);
        Ok(())
    }

    /// Puts a record into the buffer (after a skip to the next file if it
    /// does not fit in this one); returns its lsn. Space was checked.
    fn emit(&mut self, kind: Kind, gci: Gci, payload: &[u8]) -> u64 {
        let size = record_size(payload.len());
        if size > self.next_file_remaining {
            self.emit_skip(self.next_file_remaining);
        }
        let lsn = self.next;
        debug_assert!(lsn + size <= self.tail + self.ring.capacity);
        debug_assert_eq!(lsn % RECORD_ALIGN_BYTES, 0);
        let start = self.buffer.len();
        let header = Header::encode(kind, payload.len(), gci, lsn, self.last_crc);
        self.buffer.extend_from_slice(&header);
        self.buffer.extend_from_slice(payload);
        self.last_crc = self.seal_record(start);
        self.buffer.resize(start + size as usize, 0);
        self.next += size;
        self.next_file_remaining -= size;
        lsn
    }

    /// Checksums the record that starts at `start` of the buffer and runs
    /// to its end (its CRC field still zero, as [`Header::encode`] left
    /// it), in one call over the bytes in place, and writes the CRC into
    /// its field; returns it.
    fn seal_record(&mut self, start: usize) -> u32 {
        let record = &mut self.buffer[start..];
        debug_assert_eq!(record[RECORD_CRC_AT..RECORD_CRC_AT + 4], [0; 4]);
        let crc = crc32c::crc32c(record);
        record[RECORD_CRC_AT..RECORD_CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
        crc
    }

    /// Skips the last `remaining` bytes of the current file: a pad record
    /// if a header fits, zeros otherwise (the reader skips those by
    /// position alone).
    fn emit_skip(&mut self, remaining: u64) {
        let start = self.buffer.len();
        if remaining >= REDO_RECORD_HEADER_BYTES as u64 {
            let header = Header::encode(Kind::Pad, 0, 0, self.next, self.last_crc);
            self.buffer.extend_from_slice(&header);
            self.last_crc = self.seal_record(start);
        }
        self.buffer.resize(start + remaining as usize, 0);
        self.next += remaining;
        self.next_file_remaining = self.ring.data_per_file;
        debug_assert_eq!(self.ring.file_remaining(self.next), self.ring.data_per_file);
    }

    fn check_invariants(&self) {
        assert!(self.tail <= self.durable && self.durable <= self.written);
        assert!(self.written <= self.next && self.next <= self.tail + self.ring.capacity);
        assert_eq!(self.buffer.len() as u64, self.next - self.written);
        assert!(self.durable_gci <= self.marked_gci);
        // 0 left means the head sits at the next file's start.
        let remaining = self.ring.file_remaining(self.next);
        assert!(
            self.next_file_remaining == remaining
                || (self.next_file_remaining == 0 && remaining == self.ring.data_per_file)
        );
    }

    fn assert_record_boundary(&self, lsn: u64) -> Result<(), RedoError> {
        let (file, offset) = self.ring.locate(lsn);
        let mut bytes = [0u8; REDO_RECORD_HEADER_BYTES];
        let read = self.files[file]
            .read_full_at(offset, &mut bytes)
            .map_err(|source| self.io_error("read", file, offset, source))?;
        let header = Header::decode(&bytes);
        assert!(
            read == bytes.len()
                && RecordFormat::of_magic(&bytes[0..4]).is_some()
                && header.lsn == lsn,
            "redo part {}: trim to lsn {lsn}, which is not the start of a record",
            self.config.part
        );
        Ok(())
    }

    fn io_error(&self, op: &'static str, file: usize, offset: u64, source: io::Error) -> RedoError {
        RedoError::Io {
            part: self.config.part,
            op,
            path: self.config.file_path(file as u32),
            offset,
            source,
        }
    }

    // -- files and the control file ----------------------------------------

    fn path_error(&self, op: &'static str, path: &Path, source: io::Error) -> RedoError {
        RedoError::Io {
            part: self.config.part,
            op,
            path: path.to_path_buf(),
            offset: 0,
            source,
        }
    }

    fn bad_file(&self, path: &Path, detail: String) -> RedoError {
        RedoError::BadFile {
            part: self.config.part,
            path: path.to_path_buf(),
            detail,
        }
    }

    /// The tail and the format version from the control file, or `None`
    /// on a first start. A part made with its `earlier_files` takes that
    /// geometry (`RedoConfig::earlier_files`).
    fn read_control(&mut self) -> Result<Option<(u64, u32)>, RedoError> {
        let path = self.config.control_path();
        let file = match self.disk.open(&path, OpenMode::ReadOnly) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(self.path_error("open", &path, e)),
        };
        let mut bytes = [0u8; CONTROL_BYTES];
        let read = file
            .read_full_at(0, &mut bytes)
            .map_err(|e| self.path_error("read", &path, e))?;
        if read < CONTROL_BYTES {
            let detail = format!("control file is {read} bytes, expected {CONTROL_BYTES}");
            return Err(self.bad_file(&path, detail));
        }
        let crc = crc32c::crc32c(&bytes[..40]);
        if bytes[0..8] != CONTROL_MAGIC || le_u32(&bytes, 40) != crc {
            let detail = "control file is damaged (bad magic or checksum)".to_string();
            return Err(self.bad_file(&path, detail));
        }
        let version = le_u32(&bytes, 8);
        if !(FORMAT_VERSION_MIN..=FORMAT_VERSION).contains(&version) {
            let detail = format!(
                "format version {version}, this build reads versions \
                 {FORMAT_VERSION_MIN} to {FORMAT_VERSION}"
            );
            return Err(self.bad_file(&path, detail));
        }
        let part = le_u32(&bytes, 12);
        if part != self.config.part {
            let detail = format!("control file belongs to redo part {part}");
            return Err(self.bad_file(&path, detail));
        }
        let (files, file_size) = (le_u32(&bytes, 16), le_u64(&bytes, 24));
        let earlier = file_size == self.config.file_size_bytes
            && files != self.config.files
            && self.config.earlier_files == Some(files);
        if earlier {
            self.config.files = files;
            self.ring = self.config.ring();
            self.next_file_remaining = self.ring.data_per_file;
        } else if files != self.config.files || file_size != self.config.file_size_bytes {
            return Err(RedoError::GeometryChanged {
                part,
                dir: self.config.dir.clone(),
                found_files: files,
                found_file_size_bytes: file_size,
                files: self.config.files,
                file_size_bytes: self.config.file_size_bytes,
            });
        }
        Ok(Some((le_u64(&bytes, 32), version)))
    }

    /// Writes the control file atomically: temp file, fsync, rename,
    /// directory fsync.
    fn write_control(&self, tail: u64) -> Result<(), RedoError> {
        let bytes = self.control_bytes(tail);
        let temp = self.config.control_temp_path();
        let path = self.config.control_path();
        crate::disk::write_file_atomically(self.disk.as_ref(), &temp, &path, &bytes)
            .map_err(|e| self.path_error(e.step, &e.path, e.source))
    }

    /// The control file naming `tail`.
    fn control_bytes(&self, tail: u64) -> [u8; CONTROL_BYTES] {
        let mut bytes = [0u8; CONTROL_BYTES];
        bytes[0..8].copy_from_slice(&CONTROL_MAGIC);
        bytes[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        bytes[12..16].copy_from_slice(&self.config.part.to_le_bytes());
        bytes[16..20].copy_from_slice(&self.config.files.to_le_bytes());
        bytes[24..32].copy_from_slice(&self.config.file_size_bytes.to_le_bytes());
        bytes[32..40].copy_from_slice(&tail.to_le_bytes());
        let crc = crc32c::crc32c(&bytes[..40]);
        bytes[40..44].copy_from_slice(&crc.to_le_bytes());
        bytes
    }

    /// The header of ring file `index` as a build of format `version`
    /// created it.
    fn file_header(&self, index: u32, version: u32) -> [u8; FILE_HEADER_USED_BYTES] {
        let mut bytes = [0u8; FILE_HEADER_USED_BYTES];
        bytes[0..8].copy_from_slice(&FILE_MAGIC);
        bytes[8..12].copy_from_slice(&version.to_le_bytes());
        bytes[12..16].copy_from_slice(&self.config.part.to_le_bytes());
        bytes[16..20].copy_from_slice(&index.to_le_bytes());
        bytes[20..24].copy_from_slice(&self.config.files.to_le_bytes());
        bytes[24..32].copy_from_slice(&self.config.file_size_bytes.to_le_bytes());
        let crc = crc32c::crc32c(&bytes[..32]);
        bytes[32..36].copy_from_slice(&crc.to_le_bytes());
        bytes
    }

    /// First start: pre-allocates the files, then writes the control file
    /// (its presence says the files are complete).
    fn create(&mut self) -> Result<Recovered, RedoError> {
        self.refuse_orphaned_files()?;
        for index in 0..self.config.files {
            let path = self.config.file_path(index);
            let mut file = self
                .disk
                .open(&path, OpenMode::CreateTruncate)
                .map_err(|e| self.path_error("create", &path, e))?;
            file.allocate(self.config.file_size_bytes)
                .map_err(|e| self.path_error("allocate", &path, e))?;
            file.write_at(0, &self.file_header(index, FORMAT_VERSION))
                .map_err(|e| self.path_error("write header of", &path, e))?;
            file.sync()
                .map_err(|e| self.path_error("fsync", &path, e))?;
            self.files.push(file);
            self.dirty.push(false);
            self.file_versions.push(FORMAT_VERSION);
        }
        self.disk
            .sync_dir(&self.config.dir)
            .map_err(|e| self.path_error("fsync directory", &self.config.dir, e))?;
        self.write_control(0)?;
        Ok(Recovered {
            tail_lsn: Lsn(0),
            head_lsn: Lsn(0),
            complete_gci: None,
            records: 0,
            created: true,
            cut: None,
            markers: Vec::new(),
            restarts: Vec::new(),
        })
    }

    /// Without a control file the files are recreated, which is right only
    /// if a first start died before finishing: refuse if the first file
    /// already holds a record.
    fn refuse_orphaned_files(&self) -> Result<(), RedoError> {
        let path = self.config.file_path(0);
        let Ok(file) = self.disk.open(&path, OpenMode::ReadOnly) else {
            return Ok(());
        };
        let mut magic = [0u8; 4];
        let read = file
            .read_full_at(REDO_FILE_HEADER_BYTES, &mut magic)
            .map_err(|e| self.path_error("read", &path, e))?;
        if read == magic.len() && RecordFormat::of_magic(&magic).is_some() {
            let detail = format!(
                "holds redo records but the control file {} is missing; restore it, or empty \
                 the directory for an initial restart of the node",
                self.config.control_path().display()
            );
            return Err(self.bad_file(&path, detail));
        }
        Ok(())
    }

    /// Opens the existing files and checks their headers (of a format
    /// version up to `control_version`, that of the control file: a file is
    /// never newer than its part); returns their lengths. Syncs them, so
    /// that what the scan reads (perhaps still in the page cache after a
    /// process crash) is durable before it is used.
    fn open_files(&mut self, control_version: u32) -> Result<Vec<u64>, RedoError> {
        let mut lengths = Vec::with_capacity(self.config.files as usize);
        for index in 0..self.config.files {
            let path = self.config.file_path(index);
            let mut file = self
                .disk
                .open(&path, OpenMode::Existing)
                .map_err(|e| self.path_error("open", &path, e))?;
            let mut header = [0u8; FILE_HEADER_USED_BYTES];
            let read = file
                .read_full_at(0, &mut header)
                .map_err(|e| self.path_error("read", &path, e))?;
            let version = (FORMAT_VERSION_MIN..=control_version).find(|&version| {
                read == header.len() && header == self.file_header(index, version)
            });
            let Some(version) = version else {
                let detail = format!(
                    "file header is missing, damaged, from another part or of a format version \
                     above the control file's ({control_version})"
                );
                return Err(self.bad_file(&path, detail));
            };
            file.sync()
                .map_err(|e| self.path_error("fsync", &path, e))?;
            lengths.push(file.len().map_err(|e| self.path_error("stat", &path, e))?);
            self.files.push(file);
            self.dirty.push(false);
            self.file_versions.push(version);
        }
        Ok(lengths)
    }

    fn recover(&mut self, tail: u64, control_version: u32) -> Result<Recovered, RedoError> {
        let lengths = self.open_files(control_version)?;
        let scan = Scanner {
            log: self,
            reader: LogReader::new(lengths.clone()),
        }
        .scan(tail)?;
        let short: Vec<String> = (0..self.config.files)
            .filter(|&i| lengths[i as usize] < self.config.file_size_bytes)
            .map(|i| {
                let path = self.config.file_path(i);
                format!(
                    "{} was truncated to {} bytes",
                    path.display(),
                    lengths[i as usize]
                )
            })
            .collect();
        for (index, &len) in lengths.iter().enumerate() {
            if len < self.config.file_size_bytes {
                let path = self.config.file_path(index as u32);
                let file = &mut self.files[index];
                file.allocate(self.config.file_size_bytes)
                    .and_then(|()| file.sync())
                    .map_err(|e| self.path_error("extend", &path, e))?;
            }
        }
        if control_version < FORMAT_VERSION {
            // Records of this build's format follow: from now on the part
            // is of this version, and an older build refuses it rather
            // than reading the newer records as the end of the log.
            self.write_control(tail)?;
        }
        let cut = self.tail_cut(&scan, &short);
        self.tail = tail;
        self.durable = scan.head;
        self.written = scan.head;
        self.next = scan.head;
        self.next_file_remaining = self.ring.file_remaining(scan.head);
        self.last_crc = scan.head_crc;
        self.marked_gci = scan.complete;
        self.durable_gci = scan.complete;
        if let (true, Some(gci)) = (scan.orphans, scan.complete) {
            // Records of GCIs that never completed lie before the head;
            // their GCIs may come again, so void them before appending.
            self.make_room(self.consumption(MARKER_RECORD_BYTES), 0)?;
            let durable = self.durable.to_le_bytes();
            self.emit(Kind::Restart, gci, &durable);
        }
        Ok(Recovered {
            tail_lsn: Lsn(tail),
            head_lsn: Lsn(scan.head),
            complete_gci: scan.complete,
            records: scan.records_kept,
            created: false,
            cut,
            markers: scan.markers,
            restarts: scan.restarts,
        })
    }

    fn tail_cut(&self, scan: &Scan, short_files: &[String]) -> Option<TailCut> {
        let damaged = !matches!(scan.stop, Stop::End(_) | Stop::RingEnd);
        if scan.records_dropped == 0 && !damaged && short_files.is_empty() {
            return None;
        }
        let (file, offset) = self.ring.locate(scan.stop_lsn);
        let mut reason = match &scan.stop {
            Stop::RingEnd => "the scan went once round the ring".to_string(),
            Stop::End(why) => format!("the log ends at lsn {} ({why})", scan.stop_lsn),
            Stop::Torn(why) => format!("torn or damaged record at lsn {}: {why}", scan.stop_lsn),
            Stop::Truncated(why) => format!("lsn {}: {why}", scan.stop_lsn),
        };
        if scan.records_dropped > 0 {
            let after = match scan.complete {
                Some(gci) => format!("the last complete GCI {gci}"),
                None => "the tail (no GCI completed)".to_string(),
            };
            reason += &format!(
                "; {} records after {after} were never made durable by a flush and are cut",
                scan.records_dropped
            );
        }
        for note in short_files {
            reason += &format!("; {note} (extended again)");
        }
        Some(TailCut {
            cut_at_lsn: Lsn(scan.head),
            stopped_at_lsn: Lsn(scan.stop_lsn),
            file: self.config.file_path(file as u32),
            offset,
            dropped_records: scan.records_dropped,
            reason,
        })
    }
}

// ---------------------------------------------------------------------------
// Reading

/// A window over one file, refilled in chunks: the scan and the replay
/// read records through it without a system call per record.
struct LogReader {
    window: Vec<u8>,
    file: usize,
    start: u64,
    len: usize,
    /// Bytes in each file; reads past them find nothing.
    lengths: Vec<u64>,
}

impl LogReader {
    fn new(lengths: Vec<u64>) -> LogReader {
        LogReader {
            window: vec![0; READ_CHUNK_BYTES],
            file: usize::MAX,
            start: 0,
            len: 0,
            lengths,
        }
    }

    /// `len` bytes of `file` at `offset`, or `None` past the file's end.
    fn get(
        &mut self,
        files: &[Box<dyn DiskFile>],
        file: usize,
        offset: u64,
        len: usize,
    ) -> io::Result<Option<&[u8]>> {
        debug_assert!(len <= self.window.len());
        let end = offset + len as u64;
        if end > self.lengths[file] {
            return Ok(None);
        }
        let cached =
            self.file == file && offset >= self.start && end <= self.start + self.len as u64;
        if !cached {
            let want = (self.lengths[file] - offset).min(self.window.len() as u64) as usize;
            let read = files[file].read_full_at(offset, &mut self.window[..want])?;
            (self.file, self.start, self.len) = (file, offset, read);
            if end > offset + read as u64 {
                return Ok(None);
            }
        }
        let at = (offset - self.start) as usize;
        Ok(Some(&self.window[at..at + len]))
    }
}

/// Why a scan stopped.
#[derive(Debug)]
enum Stop {
    /// No record of ours here: zeros, a record of an earlier lap, or one
    /// whose chain link shows it is left from before a restart.
    End(String),
    /// A record header of this lsn whose fields or checksum are wrong.
    Torn(String),
    /// The file ends before the record does.
    Truncated(String),
    /// A whole ring of valid records (cannot happen with the reserve, but
    /// the scan is bounded anyway).
    RingEnd,
}

/// What checking the record at one lsn found.
enum Found {
    Record(Header, Kind),
    Not(Stop),
}

struct Scan {
    head: u64,
    head_crc: u32,
    complete: Option<Gci>,
    markers: Vec<Marker>,
    restarts: Vec<Marker>,
    records_kept: u64,
    records_dropped: u64,
    /// Records before the head of a GCI that no marker completed.
    orphans: bool,
    stop: Stop,
    stop_lsn: u64,
}

struct Scanner<'a> {
    log: &'a RedoLog,
    reader: LogReader,
}

impl Scanner<'_> {
    fn corrupt(&self, lsn: u64, detail: String) -> RedoError {
        let (file, offset) = self.log.ring.locate(lsn);
        RedoError::Corrupt {
            part: self.log.config.part,
            path: self.log.config.file_path(file as u32),
            offset,
            lsn: Lsn(lsn),
            detail,
        }
    }

    /// The marker payload (the lsn durable when it was written) of a
    /// record `check` just accepted.
    fn marker_synced_lsn(&mut self, lsn: u64) -> Result<u64, RedoError> {
        let (file, offset) = self.log.ring.locate(lsn);
        let at = offset + REDO_RECORD_HEADER_BYTES as u64;
        match self
            .reader
            .get(&self.log.files, file, at, MARKER_PAYLOAD_BYTES)
        {
            Ok(Some(bytes)) => Ok(le_u64(bytes, 0)),
            Ok(None) => Err(self.corrupt(lsn, "the marker changed while it was read".into())),
            Err(e) => Err(self.log.io_error("read", file, at, e)),
        }
    }

    /// Walks the log from `tail` to the first record that does not belong.
    fn scan(mut self, tail: u64) -> Result<Scan, RedoError> {
        let ring = self.log.ring;
        let end = tail + ring.capacity;
        let mut scan = Scan {
            head: tail,
            head_crc: 0,
            complete: None,
            markers: Vec::new(),
            restarts: Vec::new(),
            records_kept: 0,
            records_dropped: 0,
            orphans: false,
            stop: Stop::RingEnd,
            stop_lsn: end,
        };
        let mut lsn = tail;
        let mut prev_crc: Option<u32> = None;
        let mut records = 0u64;
        let mut max_gci_since_restart: Option<Gci> = None;
        while lsn < end {
            let remaining = ring.file_remaining(lsn);
            if remaining < REDO_RECORD_HEADER_BYTES as u64 {
                lsn += remaining;
                continue;
            }
            let (header, kind) = match check_record(self.log, &mut self.reader, lsn)? {
                Found::Record(header, kind) => (header, kind),
                Found::Not(stop) => {
                    scan.stop = stop;
                    scan.stop_lsn = lsn;
                    break;
                }
            };
            if prev_crc.is_some_and(|crc| crc != header.prev_crc) {
                let why = "a record left from before a restart (its chain link does not match)";
                scan.stop = Stop::End(why.into());
                scan.stop_lsn = lsn;
                break;
            }
            prev_crc = Some(header.crc);
            let size = record_size(header.payload_len as usize);
            match kind {
                Kind::Pad => lsn += remaining,
                Kind::Data => {
                    if scan.complete.is_some_and(|gci| header.gci <= gci) {
                        let detail = format!(
                            "a record of GCI {} after the marker that completed GCI {:?}",
                            header.gci, scan.complete
                        );
                        return Err(self.corrupt(lsn, detail));
                    }
                    records += 1;
                    max_gci_since_restart = max_gci_since_restart.max(Some(header.gci));
                    lsn += size;
                }
                Kind::Restart if scan.complete.is_some_and(|gci| header.gci < gci) => {
                    // A restore below the part's complete GCI voided the
                    // GCIs above the marker's: their markers stop counting.
                    let marker = Marker {
                        lsn,
                        gci: header.gci,
                    };
                    scan.markers.retain(|m| m.gci <= header.gci);
                    scan.restarts.push(marker);
                    scan.markers.push(marker);
                    max_gci_since_restart = None;
                    scan.complete = Some(header.gci);
                    lsn += size;
                    scan.head = lsn;
                    scan.head_crc = header.crc;
                    scan.records_kept = records;
                    scan.orphans = false;
                }
                Kind::GciComplete | Kind::Restart => {
                    if scan.complete.is_some_and(|gci| header.gci < gci) {
                        let detail = format!(
                            "a marker of GCI {} after one of GCI {:?}",
                            header.gci, scan.complete
                        );
                        return Err(self.corrupt(lsn, detail));
                    }
                    let marker = Marker {
                        lsn,
                        gci: header.gci,
                    };
                    if kind == Kind::Restart {
                        scan.restarts.push(marker);
                        max_gci_since_restart = None;
                    }
                    scan.markers.push(marker);
                    scan.complete = Some(header.gci);
                    lsn += size;
                    scan.head = lsn;
                    scan.head_crc = header.crc;
                    scan.records_kept = records;
                    scan.orphans = max_gci_since_restart > scan.complete;
                }
            }
        }
        scan.records_dropped = records - scan.records_kept;
        if let Some((marker_lsn, synced)) = self.durable_proof_after(scan.stop_lsn, end)? {
            let (file, offset) = ring.locate(marker_lsn);
            let why = match &scan.stop {
                Stop::End(why) | Stop::Torn(why) | Stop::Truncated(why) => why.as_str(),
                Stop::RingEnd => "end of ring",
            };
            let detail = format!(
                "{why}; the GCI-complete marker at lsn {marker_lsn} ({} offset {offset}) shows \
                 the log was durable up to lsn {synced}",
                self.log.config.file_path(file as u32).display()
            );
            return Err(self.corrupt(scan.stop_lsn, detail));
        }
        Ok(scan)
    }

    /// Looks past a bad spot for a valid marker that was written when the
    /// spot was already durable. Unsynced writes may land in any order, so
    /// valid records after a hole are normal in a torn tail; only such a
    /// marker proves that the hole is damage to durable data.
    fn durable_proof_after(&mut self, bad: u64, end: u64) -> Result<Option<(u64, u64)>, RedoError> {
        let ring = self.log.ring;
        let mut lsn = bad + RECORD_ALIGN_BYTES;
        while lsn < end {
            let remaining = ring.file_remaining(lsn);
            if remaining < REDO_RECORD_HEADER_BYTES as u64 {
                lsn += remaining;
                continue;
            }
            let (file, offset) = ring.locate(lsn);
            let candidate = self
                .reader
                .get(&self.log.files, file, offset, REDO_RECORD_HEADER_BYTES)
                .map_err(|e| self.log.io_error("read", file, offset, e))?;
            let Some(bytes) = candidate else {
                // This file ends here: go on with the next one.
                lsn += remaining;
                continue;
            };
            let plausible = RecordFormat::of_magic(&bytes[0..4]).is_some()
                && Kind::from_byte(bytes[4]).is_some_and(Kind::is_marker)
                && le_u64(bytes, 16) == lsn;
            if plausible {
                if let Found::Record(_, kind) = check_record(self.log, &mut self.reader, lsn)? {
                    debug_assert!(kind.is_marker());
                    let synced = self.marker_synced_lsn(lsn)?;
                    if synced > bad && synced <= lsn {
                        return Ok(Some((lsn, synced)));
                    }
                }
            }
            lsn += RECORD_ALIGN_BYTES;
        }
        Ok(None)
    }
}

/// Validates the record at `lsn` (all but its chain link).
fn check_record(log: &RedoLog, reader: &mut LogReader, lsn: u64) -> Result<Found, RedoError> {
    let (file, offset) = log.ring.locate(lsn);
    let remaining = log.ring.file_remaining(lsn);
    debug_assert!(remaining >= REDO_RECORD_HEADER_BYTES as u64);
    let io = |e| log.io_error("read", file, offset, e);
    let Some(bytes) = reader
        .get(&log.files, file, offset, REDO_RECORD_HEADER_BYTES)
        .map_err(io)?
    else {
        let why = format!(
            "{} ends before offset {offset}",
            log.config.file_path(file as u32).display()
        );
        return Ok(Found::Not(Stop::Truncated(why)));
    };
    let header = Header::decode(bytes);
    let Some(format) = RecordFormat::of_magic(&bytes[0..4]) else {
        return Ok(Found::Not(Stop::End("no record header".into())));
    };
    if header.lsn != lsn {
        let why = format!("a record of lsn {} from another lap", header.lsn);
        return Ok(Found::Not(Stop::End(why)));
    }
    let Some(kind) = Kind::from_byte(header.kind_byte) else {
        let why = format!("unknown record kind {}", header.kind_byte);
        return Ok(Found::Not(Stop::Torn(why)));
    };
    let payload_len = header.payload_len as usize;
    let shape_ok = header.reserved == [0; 3]
        && payload_len <= REDO_RECORD_PAYLOAD_MAX_BYTES
        && match kind {
            Kind::Pad => payload_len == 0,
            Kind::GciComplete | Kind::Restart => payload_len == MARKER_PAYLOAD_BYTES,
            Kind::Data => true,
        }
        && (kind == Kind::Pad || record_size(payload_len) <= remaining);
    if !shape_ok {
        let why = format!("bad header fields (kind {kind:?}, payload {payload_len} bytes)");
        return Ok(Found::Not(Stop::Torn(why)));
    }
    let total = REDO_RECORD_HEADER_BYTES + payload_len;
    let Some(bytes) = reader.get(&log.files, file, offset, total).map_err(io)? else {
        let why = format!(
            "{} ends inside the record at offset {offset}",
            log.config.file_path(file as u32).display()
        );
        return Ok(Found::Not(Stop::Truncated(why)));
    };
    if format == RecordFormat::V1 && log.file_versions[file] > 1 {
        let why = "a record of format 1 in a file created by format version 2".to_string();
        return Ok(Found::Not(Stop::Torn(why)));
    }
    if format.crc_of_written(bytes) != header.crc {
        return Ok(Found::Not(Stop::Torn("checksum mismatch".into())));
    }
    Ok(Found::Record(header, kind))
}

/// Recovered records in lsn order; see [`RedoLog::replay`].
pub struct Replay<'a> {
    log: &'a RedoLog,
    reader: LogReader,
    lsn: u64,
    /// The end marker's lsn.
    end: u64,
    target: Option<Gci>,
    prev_crc: Option<u32>,
    restarts: Vec<Marker>,
    /// `void_above[i]`: the lowest GCI of restarts `i..`.
    void_above: Vec<Gci>,
    restart_index: usize,
}

/// One record handed back by [`Replay::next_record`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ReplayRecord<'a> {
    pub lsn: Lsn,
    pub gci: Gci,
    pub payload: &'a [u8],
}

impl Replay<'_> {
    /// The GCI this replay reaches, `None` if no complete GCI ≤ the one
    /// asked for is left in the log (then it yields nothing).
    pub fn target_gci(&self) -> Option<Gci> {
        self.target
    }

    /// The next record to apply, or `None` at the end. Every record is
    /// checked again; one that changed since open is an error.
    pub fn next_record(&mut self) -> Result<Option<ReplayRecord<'_>>, RedoError> {
        let Some(target) = self.target else {
            return Ok(None);
        };
        let ring = self.log.ring;
        while self.lsn < self.end {
            let lsn = self.lsn;
            let remaining = ring.file_remaining(lsn);
            if remaining < REDO_RECORD_HEADER_BYTES as u64 {
                self.lsn += remaining;
                continue;
            }
            let (header, kind) = match check_record(self.log, &mut self.reader, lsn)? {
                Found::Record(header, kind)
                    if self.prev_crc.is_none_or(|crc| crc == header.prev_crc) =>
                {
                    (header, kind)
                }
                _ => return Err(changed(self.log, lsn)),
            };
            self.prev_crc = Some(header.crc);
            self.lsn += match kind {
                Kind::Pad => remaining,
                _ => record_size(header.payload_len as usize),
            };
            while self.restart_index < self.restarts.len()
                && self.restarts[self.restart_index].lsn <= lsn
            {
                self.restart_index += 1;
            }
            let void = self
                .void_above
                .get(self.restart_index)
                .is_some_and(|&gci| header.gci > gci);
            if kind != Kind::Data || header.gci > target || void {
                continue;
            }
            let (file, offset) = ring.locate(lsn);
            let at = offset + REDO_RECORD_HEADER_BYTES as u64;
            let len = header.payload_len as usize;
            let payload = match self.reader.get(&self.log.files, file, at, len) {
                Ok(Some(payload)) => payload,
                Ok(None) => return Err(changed(self.log, lsn)),
                Err(e) => return Err(self.log.io_error("read", file, at, e)),
            };
            return Ok(Some(ReplayRecord {
                lsn: Lsn(lsn),
                gci: header.gci,
                payload,
            }));
        }
        Ok(None)
    }
}

/// A record that was valid at open is not any more.
fn changed(log: &RedoLog, lsn: u64) -> RedoError {
    let (file, offset) = log.ring.locate(lsn);
    RedoError::Corrupt {
        part: log.config.part,
        path: log.config.file_path(file as u32),
        offset,
        lsn: Lsn(lsn),
        detail: "a record checked at open changed on disk before replay".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(kind: Kind, payload: &[u8]) -> Vec<u8> {
        let mut record = Header::encode(kind, payload.len(), 7, 64, 0xDEAD_BEEF).to_vec();
        record.extend_from_slice(payload);
        record
    }

    /// What the append path writes (one call over the record with its CRC
    /// field zero) is what a read of format 2 checks (the field taken as
    /// zero), and every byte but the field counts.
    #[test]
    fn a_format_2_crc_covers_the_whole_record_with_its_crc_field_as_zero() {
        let mut record = record(Kind::Data, b"hello");
        let crc = crc32c::crc32c(&record);
        record[RECORD_CRC_AT..RECORD_CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(RecordFormat::V2.crc_of_written(&record), crc);
        assert_ne!(RecordFormat::V1.crc_of_written(&record), crc);
        let field = RECORD_CRC_AT..RECORD_CRC_AT + 4;
        for at in (0..record.len()).filter(|at| !field.contains(at)) {
            let mut damaged = record.clone();
            damaged[at] ^= 1;
            assert_ne!(
                RecordFormat::V2.crc_of_written(&damaged),
                crc,
                "byte {at} is covered"
            );
        }
    }

    /// Format 1: the header before the CRC field, then the payload.
    #[test]
    fn a_format_1_crc_is_that_of_the_header_before_its_field_and_the_payload() {
        let record = record(Kind::Data, b"hello");
        let v1 = crc32c::crc32c_append(crc32c::crc32c(&record[..RECORD_CRC_AT]), b"hello");
        assert_eq!(RecordFormat::V1.crc_of_written(&record), v1);
    }

    #[test]
    fn a_record_magic_names_its_format() {
        assert_eq!(RecordFormat::of_magic(b"SKR2"), Some(RecordFormat::V2));
        assert_eq!(RecordFormat::of_magic(b"SKRL"), Some(RecordFormat::V1));
        assert_eq!(RecordFormat::of_magic(&[0; 4]), None);
        assert_eq!(RecordFormat::of_magic(b"SKR1"), None);
    }
}
