//! Files, real and simulated: the determinism seam for storage.
//!
//! The redo log and the local checkpoints reach files only through [`Disk`]
//! and [`DiskFile`]. [`RealDisk`] is `std::fs` with real fsyncs.
//! [`SimDisk`] keeps files in memory and models what a power failure does
//! to them: a write lands in *volatile* state (the page cache) and becomes
//! *durable* only through [`DiskFile::sync`]; a new name, a rename or a
//! removal becomes durable only through [`Disk::sync_dir`] on its
//! directory. [`SimDisk::crash`] throws away what was not made durable —
//! keeping, tearing or dropping each unsynced write by a seeded random
//! choice — so that a recovery path meets the states a real crash leaves.
//! Faults (disk full, a failing fsync, a flipped byte, a truncated file)
//! are injected only through `SimDisk`; `RealDisk` has no fault hooks.
//!
//! File I/O is not per row (the redo log writes batches), so the seam is a
//! pair of trait objects. Both traits are `Send` because the blocks that
//! own files move to their thread at start (`kernel::Block: Send`).
//!
//! Who may wait for a disk: an fsync takes milliseconds (tens on a slow
//! disk), and a thread that waits for one stalls every transaction it
//! runs. So a thread that runs transactions marks itself with
//! [`forbid_sync`] (the LDM block does, for every signal it executes), and
//! every sync here — [`DiskFile::sync`], [`Disk::sync_dir`], a
//! [`FileSync`] — panics on a thread so marked, in every build (a check of
//! one thread-local beside a system call that takes milliseconds). Such a
//! thread hands its syncs to the node's `io` threads instead (a
//! [`DiskFile::sync_handle`] moves there). Work that may wait, because
//! nothing runs behind it yet (restoring at start-up), says so with
//! [`allow_sync`] and its reason.

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

thread_local! {
    /// Open [`forbid_sync`] guards of this thread.
    static SYNC_FORBIDDEN: Cell<u32> = const { Cell::new(0) };
    /// The reason of the innermost open [`allow_sync`] guard, if any.
    static SYNC_ALLOWED: Cell<Option<&'static str>> = const { Cell::new(None) };
}

/// While the returned guard lives, a sync on this thread panics (unless an
/// [`allow_sync`] guard opened later lifts it). See the module
/// documentation. Guards nest.
#[must_use = "the thread may sync again once the guard is dropped"]
pub fn forbid_sync() -> SyncForbidden {
    SYNC_FORBIDDEN.with(|depth| depth.set(depth.get() + 1));
    SyncForbidden {
        _not_send: std::marker::PhantomData,
    }
}

/// Guard of [`forbid_sync`].
pub struct SyncForbidden {
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Drop for SyncForbidden {
    fn drop(&mut self) {
        SYNC_FORBIDDEN.with(|depth| {
            assert!(depth.get() > 0, "forbid_sync guards nest");
            depth.set(depth.get() - 1);
        });
    }
}

/// While the returned guard lives, this thread may sync even where
/// [`forbid_sync`] forbids it, for `reason` (work that nothing waits
/// behind, such as a restore before the node serves).
#[must_use = "the sync is allowed only while the guard lives"]
pub fn allow_sync(reason: &'static str) -> SyncAllowed {
    assert!(!reason.is_empty(), "an exception says why");
    let outer = SYNC_ALLOWED.with(|allowed| allowed.replace(Some(reason)));
    SyncAllowed {
        outer,
        _not_send: std::marker::PhantomData,
    }
}

/// Guard of [`allow_sync`].
pub struct SyncAllowed {
    outer: Option<&'static str>,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Drop for SyncAllowed {
    fn drop(&mut self) {
        SYNC_ALLOWED.with(|allowed| allowed.set(self.outer));
    }
}

/// Whether this thread may wait for a disk now (see [`forbid_sync`]).
pub fn sync_allowed_here() -> bool {
    SYNC_FORBIDDEN.with(Cell::get) == 0 || SYNC_ALLOWED.with(Cell::get).is_some()
}

/// Panics when this thread must not wait for a disk; called by every sync.
fn assert_sync_allowed(what: &str, path: &Path) {
    assert!(
        sync_allowed_here(),
        "{what} of {} on thread {:?}, which runs transactions and must not wait for a disk: \
         hand it to an io thread (kernel::Context::io)",
        path.display(),
        std::thread::current().name().unwrap_or("unnamed")
    );
}

/// How [`Disk::open`] opens a file. Every mode but `ReadOnly` reads and
/// writes.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum OpenMode {
    /// The file must exist; reads only.
    ReadOnly,
    /// The file must exist.
    Existing,
    /// Create the file if it is missing; keep its contents if it exists.
    CreateOrOpen,
    /// Create the file, or cut an existing one to zero length.
    CreateTruncate,
}

/// A file system: the operations storage needs on names and directories.
pub trait Disk: Send {
    /// Opens (or creates, per `mode`) the file at `path`. Creating a file
    /// adds a name that is durable only after [`Disk::sync_dir`] on its
    /// directory.
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn DiskFile>>;
    /// Removes a name; durable after `sync_dir`.
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Renames `from` to `to`, atomically replacing `to` if it exists;
    /// durable after `sync_dir` on the directories involved.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Creates a directory and its missing parents.
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    /// The entries (files and directories) of a directory, as full paths,
    /// sorted.
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<PathBuf>>;
    /// Whether a file or directory exists at `path`.
    fn exists(&self, path: &Path) -> io::Result<bool>;
    /// Makes the directory's entries durable (fsync of the directory).
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Buggify (simulation only): the next write to a file whose name
    /// contains `name_part` fails with an I/O error. A real disk has no
    /// fault hooks: nothing happens.
    fn fail_next_write_to(&self, _name_part: &str) {}
}

/// What syncs one open file from another thread than its owner's (an `io`
/// thread): see [`DiskFile::sync_handle`].
pub trait FileSync: Send {
    /// [`DiskFile::sync`] of the file: every write to it that returned
    /// before this call is durable when it returns `Ok`.
    fn sync(&self) -> io::Result<()>;
}

/// An open file. Offsets are absolute; there is no cursor.
pub trait DiskFile: Send {
    /// Reads at most `buf.len()` bytes at `offset`; returns how many were
    /// read, which is fewer only at the end of the file (0 past it).
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize>;
    /// Writes all of `data` at `offset`, extending the file if needed. Not
    /// durable until [`DiskFile::sync`].
    fn write_at(&mut self, offset: u64, data: &[u8]) -> io::Result<()>;
    /// Makes every write to this file durable (fdatasync).
    fn sync(&mut self) -> io::Result<()>;
    /// A handle that syncs this file from another thread while the owner
    /// goes on writing (writes made after the sync began may or may not be
    /// covered). Valid as long as the file exists.
    fn sync_handle(&self) -> Box<dyn FileSync>;
    /// The current length in bytes.
    fn len(&self) -> io::Result<u64>;
    /// Whether the file is empty.
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }
    /// Cuts or extends (with zeros) the file to `len` bytes.
    fn set_len(&mut self, len: u64) -> io::Result<()>;
    /// Extends the file to at least `len` bytes with its blocks really
    /// allocated (zero-filled), so that later writes inside it cannot fail
    /// for lack of space. Never shrinks.
    fn allocate(&mut self, len: u64) -> io::Result<()>;

    /// Reads until `buf` is full or the file ends; returns the bytes read.
    fn read_full_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        let mut done = 0;
        while done < buf.len() {
            let n = self.read_at(offset + done as u64, &mut buf[done..])?;
            if n == 0 {
                break;
            }
            done += n;
        }
        debug_assert!(done <= buf.len());
        Ok(done)
    }
}

// ---------------------------------------------------------------------------
// RealDisk

/// Zeros written per call when [`RealDisk`] pre-allocates a file.
const ALLOCATE_CHUNK_BYTES: usize = 64 * 1024;
static ZEROS: [u8; ALLOCATE_CHUNK_BYTES] = [0; ALLOCATE_CHUNK_BYTES];

/// A step of [`write_file_atomically`] that failed, and on which path.
#[derive(Debug)]
pub struct AtomicWriteError {
    /// `create`, `write`, `fsync`, `rename to` or `fsync directory`.
    pub step: &'static str,
    pub path: PathBuf,
    pub source: io::Error,
}

/// Writes `bytes` as the file `path`, atomically: a temporary file `temp`
/// in the same directory, fsync, rename over `path`, fsync of the
/// directory. After a crash `path` holds its old contents (or is absent)
/// or exactly `bytes`, never a mix. Used for every small control file
/// (redo control, checkpoint control, dictionary schema files).
pub fn write_file_atomically(
    disk: &dyn Disk,
    temp: &Path,
    path: &Path,
    bytes: &[u8],
) -> Result<(), AtomicWriteError> {
    let failed = |step: &'static str, at: &Path| {
        let path = at.to_path_buf();
        move |source| AtomicWriteError { step, path, source }
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    debug_assert_eq!(
        temp.parent(),
        path.parent(),
        "rename stays in one directory"
    );
    let mut file = disk
        .open(temp, OpenMode::CreateTruncate)
        .map_err(failed("create", temp))?;
    file.write_at(0, bytes).map_err(failed("write", temp))?;
    file.sync().map_err(failed("fsync", temp))?;
    drop(file);
    disk.rename(temp, path).map_err(failed("rename to", path))?;
    disk.sync_dir(dir).map_err(failed("fsync directory", dir))
}

/// The real file system (`std::fs`), with real fsyncs.
#[derive(Copy, Clone, Debug, Default)]
pub struct RealDisk;

struct RealFile {
    /// Shared with the [`FileSync`] handles (`pwrite`, `pread` and
    /// `fdatasync` take no cursor, so threads do not disturb each other).
    file: Arc<std::fs::File>,
    path: Arc<Path>,
}

struct RealSync {
    file: Arc<std::fs::File>,
    path: Arc<Path>,
}

impl FileSync for RealSync {
    fn sync(&self) -> io::Result<()> {
        assert_sync_allowed("fsync", &self.path);
        self.file.sync_data()
    }
}

impl Disk for RealDisk {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn DiskFile>> {
        let mut options = std::fs::OpenOptions::new();
        options.read(true);
        match mode {
            OpenMode::ReadOnly => {}
            OpenMode::Existing => {
                options.write(true);
            }
            OpenMode::CreateOrOpen => {
                options.write(true).create(true);
            }
            OpenMode::CreateTruncate => {
                options.write(true).create(true).truncate(true);
            }
        }
        let file = options.open(path)?;
        Ok(Box::new(RealFile {
            file: Arc::new(file),
            path: Arc::from(path),
        }))
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir_all(path)
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        let mut entries = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            entries.push(entry?.path());
        }
        entries.sort();
        Ok(entries)
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        path.try_exists()
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        assert_sync_allowed("fsync", dir);
        std::fs::File::open(dir)?.sync_all()
    }
}

impl DiskFile for RealFile {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        std::os::unix::fs::FileExt::read_at(&*self.file, buf, offset)
    }

    fn write_at(&mut self, offset: u64, data: &[u8]) -> io::Result<()> {
        std::os::unix::fs::FileExt::write_all_at(&*self.file, data, offset)
    }

    fn sync(&mut self) -> io::Result<()> {
        assert_sync_allowed("fsync", &self.path);
        // fdatasync: also flushes the size when it changed, which is all the
        // metadata a reader of the data needs.
        self.file.sync_data()
    }

    fn sync_handle(&self) -> Box<dyn FileSync> {
        Box::new(RealSync {
            file: Arc::clone(&self.file),
            path: Arc::clone(&self.path),
        })
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    fn set_len(&mut self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }

    fn allocate(&mut self, len: u64) -> io::Result<()> {
        // Writing zeros (NDB's InitFragmentLogFiles=full) rather than
        // set_len, which leaves a sparse file whose blocks a later write
        // may fail to get.
        let mut at = self.len()?;
        while at < len {
            let n = (len - at).min(ALLOCATE_CHUNK_BYTES as u64) as usize;
            self.write_at(at, &ZEROS[..n])?;
            at += n as u64;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// SlowDisk

/// Environment variable that makes a data node's disk slow: every file and
/// directory sync takes this many milliseconds more (for measurements of a
/// slow disk, like a `dm-delay` device; see [`SlowDisk`]).
pub const SLOW_SYNC_ENV: &str = "SKARV_SLOW_SYNC_MS";

/// Longest extra time per sync [`SlowDisk`] takes.
pub const SLOW_SYNC_MAX: Duration = Duration::from_secs(10);

/// A disk whose syncs take `sync_delay` longer than its inner disk's: a
/// test back end for a slow disk (a sleep per sync). With a zero delay it
/// is its inner disk.
#[derive(Copy, Clone, Debug, Default)]
pub struct SlowDisk<D> {
    inner: D,
    sync_delay: Duration,
}

impl<D: Disk> SlowDisk<D> {
    pub fn new(inner: D, sync_delay: Duration) -> SlowDisk<D> {
        assert!(
            sync_delay <= SLOW_SYNC_MAX,
            "a sync delay of {sync_delay:?}"
        );
        SlowDisk { inner, sync_delay }
    }

    /// `inner` with the delay [`SLOW_SYNC_ENV`] names (none when unset);
    /// an unreadable value is an error in words.
    pub fn from_env(inner: D) -> Result<SlowDisk<D>, String> {
        let delay = match std::env::var(SLOW_SYNC_ENV) {
            Err(_) => Duration::ZERO,
            Ok(text) => match text.trim().parse::<u64>() {
                Ok(ms) if Duration::from_millis(ms) <= SLOW_SYNC_MAX => Duration::from_millis(ms),
                _ => {
                    return Err(format!(
                        "{SLOW_SYNC_ENV}={text:?}: expected milliseconds, at most {}",
                        SLOW_SYNC_MAX.as_millis()
                    ))
                }
            },
        };
        Ok(SlowDisk::new(inner, delay))
    }

    pub fn sync_delay(&self) -> Duration {
        self.sync_delay
    }

    fn delay(&self) {
        if !self.sync_delay.is_zero() {
            std::thread::sleep(self.sync_delay);
        }
    }
}

struct SlowFile {
    inner: Box<dyn DiskFile>,
    sync_delay: Duration,
}

struct SlowSync {
    inner: Box<dyn FileSync>,
    sync_delay: Duration,
}

impl<D: Disk> Disk for SlowDisk<D> {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn DiskFile>> {
        let inner = self.inner.open(path, mode)?;
        Ok(Box::new(SlowFile {
            inner,
            sync_delay: self.sync_delay,
        }))
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.inner.remove_file(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.rename(from, to)
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.inner.create_dir_all(path)
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        self.inner.list_dir(dir)
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        self.inner.exists(path)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.inner.sync_dir(dir)?;
        self.delay();
        Ok(())
    }
}

impl DiskFile for SlowFile {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read_at(offset, buf)
    }

    fn write_at(&mut self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.inner.write_at(offset, data)
    }

    fn sync(&mut self) -> io::Result<()> {
        self.inner.sync()?;
        if !self.sync_delay.is_zero() {
            std::thread::sleep(self.sync_delay);
        }
        Ok(())
    }

    fn sync_handle(&self) -> Box<dyn FileSync> {
        Box::new(SlowSync {
            inner: self.inner.sync_handle(),
            sync_delay: self.sync_delay,
        })
    }

    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }

    fn set_len(&mut self, len: u64) -> io::Result<()> {
        self.inner.set_len(len)
    }

    fn allocate(&mut self, len: u64) -> io::Result<()> {
        self.inner.allocate(len)
    }
}

impl FileSync for SlowSync {
    fn sync(&self) -> io::Result<()> {
        self.inner.sync()?;
        if !self.sync_delay.is_zero() {
            std::thread::sleep(self.sync_delay);
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// SimDisk

/// What [`SimDisk::crash`] does with each write (or length change) that was
/// not made durable: keep it whole with `keep_percent`, keep a random
/// prefix of it (a torn write) with `tear_percent`, otherwise lose it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct CrashPolicy {
    pub keep_percent: u8,
    pub tear_percent: u8,
}

impl Default for CrashPolicy {
    fn default() -> Self {
        CrashPolicy {
            keep_percent: 50,
            tear_percent: 25,
        }
    }
}

/// What one [`SimDisk::crash`] did to the unsynced writes.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct CrashReport {
    pub kept: u64,
    pub torn: u64,
    pub lost: u64,
    /// Unsynced name changes (create, rename, remove) that survived.
    pub names_kept: u64,
    pub names_lost: u64,
}

/// Counters of a [`SimDisk`], for tests.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct SimDiskStats {
    pub writes: u64,
    pub bytes_written: u64,
    pub file_syncs: u64,
    pub dir_syncs: u64,
    pub crashes: u64,
}

/// An in-memory file system that loses unsynced state on [`SimDisk::crash`]
/// and fails on command. Clones share one state, so a test keeps a clone
/// to crash or corrupt the disk that a log owns.
///
/// Directories themselves are always durable (made at creation); the
/// entries in them follow the durability rules above. After a crash, files
/// opened before it fail every call: the process that held them is gone.
///
/// The state sits behind a mutex only so that a `SimDisk` is `Send` like
/// the blocks that hold it; the simulator runs one thread, so it is never
/// contended.
#[derive(Clone)]
pub struct SimDisk {
    state: Arc<Mutex<SimState>>,
}

type InodeId = u64;

struct SimState {
    rng: SplitMix64,
    policy: CrashPolicy,
    dirs: BTreeSet<PathBuf>,
    /// Names as programs see them now.
    names: BTreeMap<PathBuf, InodeId>,
    /// Names as they would be after a crash with no pending change kept.
    durable_names: BTreeMap<PathBuf, InodeId>,
    /// Name changes not yet made durable, in the order they were made.
    pending_names: Vec<NameChange>,
    inodes: BTreeMap<InodeId, Inode>,
    next_inode: InodeId,
    /// Bumped by each crash; handles from an older generation are dead.
    generation: u64,
    /// Bytes that may still be written before writes fail as "disk full".
    write_budget_bytes: Option<u64>,
    /// No free space ([`SimDisk::fill`]): what would grow a file fails.
    full: bool,
    fail_next_sync: bool,
    /// The next write to a file whose name contains this fails.
    fail_write_to: Option<String>,
    stats: SimDiskStats,
}

#[derive(Default)]
struct Inode {
    durable: Vec<u8>,
    volatile: Vec<u8>,
    pending: Vec<PendingWrite>,
    open_handles: u32,
}

enum PendingWrite {
    Write { offset: u64, data: Vec<u8> },
    SetLen(u64),
}

enum NameChange {
    Link(PathBuf, InodeId),
    Unlink(PathBuf),
    Rename(PathBuf, PathBuf, InodeId),
}

impl NameChange {
    fn touches(&self, dir: &Path) -> bool {
        let in_dir = |p: &PathBuf| parent_of(p) == dir;
        match self {
            NameChange::Link(p, _) | NameChange::Unlink(p) => in_dir(p),
            NameChange::Rename(from, to, _) => in_dir(from) || in_dir(to),
        }
    }

    fn apply(&self, names: &mut BTreeMap<PathBuf, InodeId>) {
        match self {
            NameChange::Link(p, inode) => {
                names.insert(p.clone(), *inode);
            }
            NameChange::Unlink(p) => {
                names.remove(p);
            }
            NameChange::Rename(from, to, inode) => {
                names.remove(from);
                names.insert(to.clone(), *inode);
            }
        }
    }
}

fn parent_of(path: &Path) -> &Path {
    path.parent().unwrap_or(Path::new(""))
}

/// SplitMix64: a small, seeded generator, so that storage needs no
/// dependency for its simulated faults.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..bound` (`bound > 0`).
    fn below(&mut self, bound: u64) -> u64 {
        assert!(bound > 0);
        self.next() % bound
    }
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{}: no such file or directory", path.display()),
    )
}

fn stale_handle() -> io::Error {
    io::Error::other("file handle from before a simulated crash")
}

impl SimDisk {
    /// An empty disk whose crash choices follow `seed`.
    pub fn new(seed: u64) -> SimDisk {
        let mut dirs = BTreeSet::new();
        dirs.insert(PathBuf::from("/"));
        dirs.insert(PathBuf::new());
        SimDisk {
            state: Arc::new(Mutex::new(SimState {
                rng: SplitMix64(seed),
                policy: CrashPolicy::default(),
                dirs,
                names: BTreeMap::new(),
                durable_names: BTreeMap::new(),
                pending_names: Vec::new(),
                inodes: BTreeMap::new(),
                next_inode: 1,
                generation: 0,
                write_budget_bytes: None,
                full: false,
                fail_next_sync: false,
                fail_write_to: None,
                stats: SimDiskStats::default(),
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, SimState> {
        // A panic while holding the lock leaves the state as consistent as
        // the panicking test left it; later calls may still inspect it.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn set_crash_policy(&self, policy: CrashPolicy) {
        assert!(
            u16::from(policy.keep_percent) + u16::from(policy.tear_percent) <= 100,
            "crash policy percentages add up to more than 100: {policy:?}"
        );
        self.lock().policy = policy;
    }

    /// Simulates a power failure: everything not made durable is kept, torn
    /// or lost as the crash policy and the seed decide; files open before
    /// the crash stop working.
    pub fn crash(&self) -> CrashReport {
        let mut guard = self.lock();
        let state = &mut *guard;
        let mut report = CrashReport::default();
        let policy = state.policy;
        for inode in state.inodes.values_mut() {
            for write in inode.pending.drain(..) {
                let roll = state.rng.below(100);
                let keep = roll < u64::from(policy.keep_percent);
                let tear = !keep && roll < u64::from(policy.keep_percent + policy.tear_percent);
                match write {
                    PendingWrite::Write { offset, data } if keep || tear => {
                        let len = if keep {
                            report.kept += 1;
                            data.len()
                        } else {
                            report.torn += 1;
                            state.rng.below(data.len() as u64 + 1) as usize
                        };
                        apply_write(&mut inode.durable, offset, &data[..len]);
                    }
                    PendingWrite::SetLen(len) if keep => {
                        report.kept += 1;
                        inode.durable.resize(len as usize, 0);
                    }
                    _ => report.lost += 1,
                }
            }
            inode.volatile.clone_from(&inode.durable);
            inode.open_handles = 0;
        }
        // The file system journals name changes in order: a crash keeps a
        // prefix of the ones not yet synced.
        let pending = std::mem::take(&mut state.pending_names);
        let kept = state.rng.below(pending.len() as u64 + 1) as usize;
        for change in &pending[..kept] {
            change.apply(&mut state.durable_names);
        }
        report.names_kept = kept as u64;
        report.names_lost = (pending.len() - kept) as u64;
        state.names.clone_from(&state.durable_names);
        let live: BTreeSet<InodeId> = state.names.values().copied().collect();
        state.inodes.retain(|id, _| live.contains(id));
        state.generation += 1;
        state.stats.crashes += 1;
        report
    }

    /// Empties the disk, as an operator who clears a stopped node's data
    /// directory for an initial node restart: every file and directory
    /// goes, durably; files open before stop working.
    pub fn wipe(&self) {
        let mut state = self.lock();
        state.names.clear();
        state.durable_names.clear();
        state.pending_names.clear();
        state.inodes.clear();
        state
            .dirs
            .retain(|d| d.as_os_str().is_empty() || d == Path::new("/"));
        state.generation += 1;
    }

    /// Writes fail with "disk full" once `bytes` more bytes have been
    /// written; the write that crosses the limit lands in part.
    pub fn fail_writes_after(&self, bytes: u64) {
        self.lock().write_budget_bytes = Some(bytes);
    }

    /// The disk has no free space left, as a real full disk: a write or
    /// an allocation that would grow a file fails with "disk full", while
    /// writes inside a file's length (space allocated before, as the redo
    /// log's) still land. Until [`SimDisk::allow_writes`].
    pub fn fill(&self) {
        self.lock().full = true;
    }

    /// Space is back: writes no longer fail.
    pub fn allow_writes(&self) {
        let mut state = self.lock();
        state.write_budget_bytes = None;
        state.full = false;
    }

    /// The next sync (of a file or a directory) fails with an I/O error and
    /// makes nothing durable.
    pub fn fail_next_sync(&self) {
        self.lock().fail_next_sync = true;
    }

    /// Disarms every injected fault that has not fired yet.
    pub fn clear_faults(&self) {
        let mut state = self.lock();
        state.write_budget_bytes = None;
        state.full = false;
        state.fail_next_sync = false;
        state.fail_write_to = None;
    }

    /// Flips every bit of the byte at `offset`, durably (media corruption).
    pub fn flip_byte(&self, path: &Path, offset: u64) -> io::Result<()> {
        let mut state = self.lock();
        let inode = state.inode_mut(path)?;
        let at = offset as usize;
        if at >= inode.volatile.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{}: offset {offset} is past the end", path.display()),
            ));
        }
        inode.volatile[at] ^= 0xFF;
        if at < inode.durable.len() {
            inode.durable[at] ^= 0xFF;
        }
        Ok(())
    }

    /// Cuts the file to `len` bytes, durably (a damaged or half-copied file).
    pub fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        let mut state = self.lock();
        let inode = state.inode_mut(path)?;
        inode.volatile.truncate(len as usize);
        inode.durable.truncate(len as usize);
        Ok(())
    }

    /// The contents a crash with nothing kept would leave, if the name is
    /// durable.
    pub fn durable_contents(&self, path: &Path) -> Option<Vec<u8>> {
        let state = self.lock();
        let id = state.durable_names.get(path)?;
        state.inodes.get(id).map(|inode| inode.durable.clone())
    }

    pub fn stats(&self) -> SimDiskStats {
        self.lock().stats
    }

    fn take_sync_failure(state: &mut SimState) -> io::Result<()> {
        if std::mem::take(&mut state.fail_next_sync) {
            return Err(io::Error::other("simulated fsync failure (EIO)"));
        }
        Ok(())
    }
}

impl SimState {
    fn inode_mut(&mut self, path: &Path) -> io::Result<&mut Inode> {
        let id = *self.names.get(path).ok_or_else(|| not_found(path))?;
        self.inodes.get_mut(&id).ok_or_else(|| not_found(path))
    }

    fn parent_exists(&self, path: &Path) -> bool {
        self.dirs.contains(parent_of(path))
    }

    /// Charges `bytes` against the disk-full budget; returns how many may
    /// be written (fewer than asked means the disk is full).
    fn charge(&mut self, bytes: u64) -> u64 {
        match &mut self.write_budget_bytes {
            None => bytes,
            Some(left) => {
                let granted = bytes.min(*left);
                *left -= granted;
                granted
            }
        }
    }

    /// Drops an inode no name and no handle refers to.
    fn collect(&mut self, id: InodeId) {
        let named = self.names.values().any(|&i| i == id)
            || self.durable_names.values().any(|&i| i == id)
            || self.pending_names.iter().any(|c| match c {
                NameChange::Link(_, i) | NameChange::Rename(_, _, i) => *i == id,
                NameChange::Unlink(_) => false,
            });
        let open = self.inodes.get(&id).is_some_and(|i| i.open_handles > 0);
        if !named && !open {
            self.inodes.remove(&id);
        }
    }
}

fn apply_write(contents: &mut Vec<u8>, offset: u64, data: &[u8]) {
    let start = offset as usize;
    let end = start + data.len();
    if contents.len() < end {
        contents.resize(end, 0);
    }
    contents[start..end].copy_from_slice(data);
}

fn disk_full(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::StorageFull,
        format!("{}: no space left on device (simulated)", path.display()),
    )
}

impl Disk for SimDisk {
    fn fail_next_write_to(&self, name_part: &str) {
        self.lock().fail_write_to = Some(name_part.to_owned());
    }

    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn DiskFile>> {
        let mut state = self.lock();
        if !state.parent_exists(path) {
            return Err(not_found(parent_of(path)));
        }
        if state.dirs.contains(path) {
            return Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                format!("{}: is a directory", path.display()),
            ));
        }
        let existing = state.names.get(path).copied();
        let id = match (existing, mode) {
            (Some(id), _) => id,
            (None, OpenMode::ReadOnly | OpenMode::Existing) => return Err(not_found(path)),
            (None, OpenMode::CreateOrOpen | OpenMode::CreateTruncate) => {
                let id = state.next_inode;
                state.next_inode += 1;
                state.inodes.insert(id, Inode::default());
                state.names.insert(path.to_path_buf(), id);
                state
                    .pending_names
                    .push(NameChange::Link(path.to_path_buf(), id));
                id
            }
        };
        let inode = state.inodes.get_mut(&id).ok_or_else(|| not_found(path))?;
        if mode == OpenMode::CreateTruncate && !inode.volatile.is_empty() {
            inode.volatile.clear();
            inode.pending.push(PendingWrite::SetLen(0));
        }
        inode.open_handles += 1;
        let generation = state.generation;
        Ok(Box::new(SimFile {
            disk: self.clone(),
            path: path.to_path_buf(),
            inode: id,
            generation,
            writable: mode != OpenMode::ReadOnly,
        }))
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let mut state = self.lock();
        let id = state.names.remove(path).ok_or_else(|| not_found(path))?;
        state
            .pending_names
            .push(NameChange::Unlink(path.to_path_buf()));
        state.collect(id);
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut state = self.lock();
        if !state.parent_exists(to) {
            return Err(not_found(parent_of(to)));
        }
        let id = state.names.remove(from).ok_or_else(|| not_found(from))?;
        let replaced = state.names.insert(to.to_path_buf(), id);
        state
            .pending_names
            .push(NameChange::Rename(from.to_path_buf(), to.to_path_buf(), id));
        if let Some(old) = replaced {
            state.collect(old);
        }
        Ok(())
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        let mut state = self.lock();
        if state.names.contains_key(path) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{}: a file is in the way", path.display()),
            ));
        }
        for dir in path.ancestors() {
            state.dirs.insert(dir.to_path_buf());
        }
        Ok(())
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        let state = self.lock();
        if !state.dirs.contains(dir) {
            return Err(not_found(dir));
        }
        let files = state.names.keys().filter(|p| parent_of(p) == dir);
        let dirs = state
            .dirs
            .iter()
            .filter(|p| p.as_path() != dir && parent_of(p) == dir);
        let mut entries: Vec<PathBuf> = files.chain(dirs).cloned().collect();
        entries.sort();
        Ok(entries)
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        let state = self.lock();
        Ok(state.names.contains_key(path) || state.dirs.contains(path))
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        assert_sync_allowed("fsync", dir);
        let mut guard = self.lock();
        let state = &mut *guard;
        if !state.dirs.contains(dir) {
            return Err(not_found(dir));
        }
        SimDisk::take_sync_failure(state)?;
        state.stats.dir_syncs += 1;
        let durable = &mut state.durable_names;
        state.pending_names.retain(|change| {
            if change.touches(dir) {
                change.apply(durable);
                false
            } else {
                true
            }
        });
        Ok(())
    }
}

/// A file of a [`SimDisk`].
struct SimFile {
    disk: SimDisk,
    path: PathBuf,
    inode: InodeId,
    generation: u64,
    writable: bool,
}

impl SimFile {
    /// The file's state, if this handle is still alive.
    fn with<R>(&self, f: impl FnOnce(&mut SimState, InodeId) -> io::Result<R>) -> io::Result<R> {
        let mut state = self.disk.lock();
        if state.generation != self.generation || !state.inodes.contains_key(&self.inode) {
            return Err(stale_handle());
        }
        f(&mut state, self.inode)
    }

    fn check_writable(&self) -> io::Result<()> {
        if self.writable {
            Ok(())
        } else {
            Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("{}: opened read-only", self.path.display()),
            ))
        }
    }
}

/// Syncs a [`SimFile`]'s inode from anywhere (see [`DiskFile::sync_handle`]).
struct SimSync {
    disk: SimDisk,
    path: PathBuf,
    inode: InodeId,
    generation: u64,
}

impl FileSync for SimSync {
    fn sync(&self) -> io::Result<()> {
        assert_sync_allowed("fsync", &self.path);
        let mut guard = self.disk.lock();
        let state = &mut *guard;
        if state.generation != self.generation || !state.inodes.contains_key(&self.inode) {
            return Err(stale_handle());
        }
        SimDisk::take_sync_failure(state)?;
        state.stats.file_syncs += 1;
        let file = inode(state, self.inode);
        for write in file.pending.drain(..) {
            match write {
                PendingWrite::Write { offset, data } => {
                    apply_write(&mut file.durable, offset, &data)
                }
                PendingWrite::SetLen(len) => file.durable.resize(len as usize, 0),
            }
        }
        debug_assert!(file.durable == file.volatile);
        Ok(())
    }
}

fn inode(state: &mut SimState, id: InodeId) -> &mut Inode {
    // `SimFile::with` checked that the inode exists.
    state
        .inodes
        .get_mut(&id)
        .expect("SimFile::with checks the inode")
}

impl DiskFile for SimFile {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        self.with(|state, id| {
            let contents = &inode(state, id).volatile;
            let start = (offset as usize).min(contents.len());
            let n = buf.len().min(contents.len() - start);
            buf[..n].copy_from_slice(&contents[start..start + n]);
            Ok(n)
        })
    }

    fn write_at(&mut self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.check_writable()?;
        self.with(|state, id| {
            let named = |part: &String| {
                self.path
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().contains(part.as_str()))
            };
            if state.fail_write_to.as_ref().is_some_and(named) {
                state.fail_write_to = None;
                return Err(io::Error::other(format!(
                    "{}: simulated write failure (EIO)",
                    self.path.display()
                )));
            }
            let grows = offset + data.len() as u64 > inode(state, id).volatile.len() as u64;
            if state.full && grows {
                return Err(disk_full(&self.path));
            }
            let granted = state.charge(data.len() as u64) as usize;
            state.stats.writes += 1;
            state.stats.bytes_written += granted as u64;
            let file = inode(state, id);
            if granted > 0 {
                apply_write(&mut file.volatile, offset, &data[..granted]);
                file.pending.push(PendingWrite::Write {
                    offset,
                    data: data[..granted].to_vec(),
                });
            }
            if granted < data.len() {
                return Err(disk_full(&self.path));
            }
            Ok(())
        })
    }

    fn sync(&mut self) -> io::Result<()> {
        self.sync_handle().sync()
    }

    fn sync_handle(&self) -> Box<dyn FileSync> {
        Box::new(SimSync {
            disk: self.disk.clone(),
            path: self.path.clone(),
            inode: self.inode,
            generation: self.generation,
        })
    }

    fn len(&self) -> io::Result<u64> {
        self.with(|state, id| Ok(inode(state, id).volatile.len() as u64))
    }

    fn set_len(&mut self, len: u64) -> io::Result<()> {
        self.check_writable()?;
        self.with(|state, id| {
            let file = inode(state, id);
            file.volatile.resize(len as usize, 0);
            file.pending.push(PendingWrite::SetLen(len));
            Ok(())
        })
    }

    fn allocate(&mut self, len: u64) -> io::Result<()> {
        self.check_writable()?;
        self.with(|state, id| {
            let current = inode(state, id).volatile.len() as u64;
            if len <= current {
                return Ok(());
            }
            if state.full || state.charge(len - current) < len - current {
                return Err(disk_full(&self.path));
            }
            let file = inode(state, id);
            file.volatile.resize(len as usize, 0);
            file.pending.push(PendingWrite::SetLen(len));
            Ok(())
        })
    }
}

impl Drop for SimFile {
    fn drop(&mut self) {
        let mut state = self.disk.lock();
        if state.generation != self.generation {
            return;
        }
        if let Some(inode) = state.inodes.get_mut(&self.inode) {
            debug_assert!(inode.open_handles > 0);
            inode.open_handles = inode.open_handles.saturating_sub(1);
        }
        state.collect(self.inode);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> PathBuf {
        PathBuf::from("/data")
    }

    fn sim(seed: u64) -> SimDisk {
        let disk = SimDisk::new(seed);
        disk.create_dir_all(&dir()).unwrap();
        disk
    }

    fn read_all(file: &dyn DiskFile) -> Vec<u8> {
        let mut buf = vec![0; file.len().unwrap() as usize];
        assert_eq!(file.read_full_at(0, &mut buf).unwrap(), buf.len());
        buf
    }

    #[test]
    #[should_panic(expected = "must not wait for a disk")]
    fn a_file_sync_where_syncs_are_forbidden_panics() {
        let disk = sim(40);
        disk.create_dir_all(&dir()).unwrap();
        let mut file = disk
            .open(&dir().join("f"), OpenMode::CreateTruncate)
            .unwrap();
        file.write_at(0, b"x").unwrap();
        let _no_sync = forbid_sync();
        let _ = file.sync();
    }

    #[test]
    #[should_panic(expected = "must not wait for a disk")]
    fn a_directory_sync_where_syncs_are_forbidden_panics() {
        let disk = RealDisk;
        let _no_sync = forbid_sync();
        let _ = disk.sync_dir(Path::new("/"));
    }

    #[test]
    fn syncs_are_allowed_again_by_an_exception_and_after_the_guard() {
        let disk = sim(41);
        disk.create_dir_all(&dir()).unwrap();
        let mut file = disk
            .open(&dir().join("f"), OpenMode::CreateTruncate)
            .unwrap();
        let handle = file.sync_handle();
        {
            let _no_sync = forbid_sync();
            assert!(!sync_allowed_here());
            {
                let _restore = allow_sync("a test's restore");
                assert!(sync_allowed_here());
                file.sync().unwrap();
            }
            assert!(!sync_allowed_here());
            // Another thread (an io thread) may sync the same file.
            std::thread::spawn(move || handle.sync().unwrap())
                .join()
                .unwrap();
        }
        assert!(sync_allowed_here());
        file.sync().unwrap();
        assert_eq!(disk.stats().file_syncs, 3);
    }

    #[test]
    fn synced_writes_survive_a_crash_and_unsynced_ones_may_not() {
        let disk = sim(1);
        disk.set_crash_policy(CrashPolicy {
            keep_percent: 0,
            tear_percent: 0,
        });
        let path = dir().join("f");
        let mut file = disk.open(&path, OpenMode::CreateTruncate).unwrap();
        file.write_at(0, b"durable").unwrap();
        file.sync().unwrap();
        disk.sync_dir(&dir()).unwrap();
        file.write_at(7, b"-volatile").unwrap();
        assert_eq!(read_all(&*file), b"durable-volatile");
        let report = disk.crash();
        assert_eq!(report.lost, 1);
        assert!(
            file.len().is_err(),
            "a handle from before the crash is dead"
        );
        let file = disk.open(&path, OpenMode::Existing).unwrap();
        assert_eq!(read_all(&*file), b"durable");
    }

    #[test]
    fn a_crash_tears_unsynced_writes_to_a_prefix() {
        let disk = sim(7);
        disk.set_crash_policy(CrashPolicy {
            keep_percent: 0,
            tear_percent: 100,
        });
        let path = dir().join("f");
        let mut file = disk.open(&path, OpenMode::CreateTruncate).unwrap();
        file.allocate(64).unwrap();
        file.sync().unwrap();
        disk.sync_dir(&dir()).unwrap();
        file.write_at(8, &[0xAB; 32]).unwrap();
        assert_eq!(disk.crash().torn, 1);
        let file = disk.open(&path, OpenMode::Existing).unwrap();
        let contents = read_all(&*file);
        assert_eq!(contents.len(), 64);
        let kept = contents[8..40].iter().take_while(|&&b| b == 0xAB).count();
        assert!(
            contents[8 + kept..].iter().all(|&b| b == 0),
            "only a prefix lands"
        );
    }

    #[test]
    fn crash_choices_follow_the_seed() {
        let run = |seed| {
            let disk = sim(seed);
            let mut file = disk
                .open(&dir().join("f"), OpenMode::CreateTruncate)
                .unwrap();
            disk.sync_dir(&dir()).unwrap();
            for i in 0..64u64 {
                file.write_at(i * 16, &[i as u8 + 1; 16]).unwrap();
            }
            disk.crash();
            disk.durable_contents(&dir().join("f")).unwrap()
        };
        assert_eq!(run(3), run(3));
        assert_ne!(run(3), run(4));
    }

    #[test]
    fn a_new_name_needs_a_directory_sync() {
        let path = dir().join("f");
        // Unsynced, the name survives a crash or not, as the seed decides.
        let survived: Vec<bool> = (0..16)
            .map(|seed| {
                let disk = sim(seed);
                disk.open(&path, OpenMode::CreateTruncate)
                    .unwrap()
                    .sync()
                    .unwrap();
                let report = disk.crash();
                assert_eq!(report.names_kept + report.names_lost, 1);
                disk.exists(&path).unwrap()
            })
            .collect();
        assert!(survived.contains(&true) && survived.contains(&false));
        // Synced, it always survives.
        for seed in 0..16 {
            let disk = sim(seed);
            disk.open(&path, OpenMode::CreateTruncate)
                .unwrap()
                .sync()
                .unwrap();
            disk.sync_dir(&dir()).unwrap();
            disk.crash();
            assert!(disk.exists(&path).unwrap());
        }
    }

    #[test]
    fn rename_replaces_atomically_and_survives_once_synced() {
        let disk = sim(5);
        let (tmp, target) = (dir().join("c.tmp"), dir().join("c"));
        for (path, text) in [(&target, b"old"), (&tmp, b"new")] {
            let mut f = disk.open(path, OpenMode::CreateTruncate).unwrap();
            f.write_at(0, text).unwrap();
            f.sync().unwrap();
        }
        disk.sync_dir(&dir()).unwrap();
        disk.rename(&tmp, &target).unwrap();
        assert!(!disk.exists(&tmp).unwrap());
        disk.sync_dir(&dir()).unwrap();
        disk.crash();
        let f = disk.open(&target, OpenMode::ReadOnly).unwrap();
        assert_eq!(read_all(&*f), b"new");
        assert_eq!(disk.list_dir(&dir()).unwrap(), vec![target.clone()]);
    }

    #[test]
    fn disk_full_fails_writes_until_space_returns() {
        let disk = sim(3);
        let path = dir().join("f");
        let mut file = disk.open(&path, OpenMode::CreateTruncate).unwrap();
        disk.fail_writes_after(10);
        file.write_at(0, &[1; 8]).unwrap();
        let err = file.write_at(8, &[2; 8]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::StorageFull);
        assert_eq!(file.len().unwrap(), 10, "the crossing write lands in part");
        assert!(file.allocate(100).is_err());
        disk.allow_writes();
        file.write_at(8, &[2; 8]).unwrap();
        assert_eq!(read_all(&*file), [[1; 8], [2; 8]].concat());
    }

    #[test]
    fn a_filled_disk_refuses_growth_but_not_writes_in_allocated_space() {
        let disk = sim(3);
        let path = dir().join("f");
        let mut file = disk.open(&path, OpenMode::CreateTruncate).unwrap();
        file.allocate(16).unwrap();
        disk.fill();
        file.write_at(0, &[1; 16]).unwrap();
        let err = file.write_at(12, &[2; 8]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::StorageFull);
        assert_eq!(file.len().unwrap(), 16, "nothing of a growing write lands");
        assert!(file.allocate(32).is_err());
        disk.allow_writes();
        file.write_at(16, &[2; 4]).unwrap();
        assert_eq!(file.len().unwrap(), 20);
    }

    #[test]
    fn a_failed_sync_makes_nothing_durable() {
        let disk = sim(4);
        disk.set_crash_policy(CrashPolicy {
            keep_percent: 0,
            tear_percent: 0,
        });
        let path = dir().join("f");
        let mut file = disk.open(&path, OpenMode::CreateTruncate).unwrap();
        disk.sync_dir(&dir()).unwrap();
        file.write_at(0, b"abc").unwrap();
        disk.fail_next_sync();
        assert!(file.sync().is_err());
        disk.crash();
        assert_eq!(disk.durable_contents(&path).unwrap(), b"");
    }

    #[test]
    fn flip_and_truncate_damage_durable_contents() {
        let disk = sim(6);
        let path = dir().join("f");
        let mut file = disk.open(&path, OpenMode::CreateTruncate).unwrap();
        file.write_at(0, &[0x0F; 16]).unwrap();
        file.sync().unwrap();
        disk.sync_dir(&dir()).unwrap();
        disk.flip_byte(&path, 3).unwrap();
        disk.truncate(&path, 8).unwrap();
        disk.crash();
        let mut want = vec![0x0F; 8];
        want[3] = 0xF0;
        assert_eq!(disk.durable_contents(&path).unwrap(), want);
        assert!(disk.flip_byte(&path, 8).is_err());
    }

    #[test]
    fn opening_needs_the_directory_and_read_only_refuses_writes() {
        let disk = SimDisk::new(0);
        let path = PathBuf::from("/nowhere/f");
        assert_eq!(
            disk.open(&path, OpenMode::CreateOrOpen)
                .err()
                .map(|e| e.kind()),
            Some(io::ErrorKind::NotFound)
        );
        disk.create_dir_all(Path::new("/nowhere")).unwrap();
        drop(disk.open(&path, OpenMode::CreateOrOpen).unwrap());
        let mut f = disk.open(&path, OpenMode::ReadOnly).unwrap();
        assert!(f.write_at(0, b"x").is_err());
        disk.remove_file(&path).unwrap();
        assert!(disk.open(&path, OpenMode::Existing).is_err());
    }

    /// A directory under the system temp dir, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(name: &str) -> TempDir {
            let path =
                std::env::temp_dir().join(format!("skarv-disk-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&path);
            std::fs::create_dir_all(&path).unwrap();
            TempDir(path)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn real_disk_reads_writes_allocates_renames_and_syncs() {
        let tmp = TempDir::new("real");
        let disk = RealDisk;
        let path = tmp.0.join("f");
        let mut file = disk.open(&path, OpenMode::CreateTruncate).unwrap();
        file.allocate(100_000).unwrap();
        assert_eq!(file.len().unwrap(), 100_000);
        file.write_at(99_990, b"0123456789").unwrap();
        file.sync().unwrap();
        disk.sync_dir(&tmp.0).unwrap();
        let mut buf = [0; 20];
        assert_eq!(file.read_full_at(99_990, &mut buf).unwrap(), 10);
        assert_eq!(&buf[..10], b"0123456789");
        drop(file);
        let moved = tmp.0.join("g");
        disk.rename(&path, &moved).unwrap();
        disk.sync_dir(&tmp.0).unwrap();
        assert_eq!(disk.list_dir(&tmp.0).unwrap(), vec![moved.clone()]);
        assert!(!disk.exists(&path).unwrap());
        let mut file = disk.open(&moved, OpenMode::Existing).unwrap();
        file.set_len(10).unwrap();
        assert_eq!(file.len().unwrap(), 10);
        disk.remove_file(&moved).unwrap();
        assert!(disk.open(&moved, OpenMode::Existing).is_err());
    }
}
