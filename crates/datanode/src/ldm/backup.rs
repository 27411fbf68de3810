//! A backup's fragment scans (docs/operations.md, "How it is taken"; NDB:
//! the BACKUP block beside each LQH): each data node writes its share of an
//! online backup, the rows of the fragments it is the primary of, to data
//! files on its own disk, so no row crosses the network to be backed up.
//!
//! The backup process drives each scan with `BackupFragReq`s: the first
//! (`backup_frag::START`) creates the file, each writes the fragment's next
//! committed rows (at most `backup_frag::ROWS_MAX`, one scan batch, so a
//! request costs this thread what a scan batch does) and answers
//! `BackupFragConf` with the rows and bytes so far. The backup paces its
//! requests (`--rate-rows`) and watches for an abort between them, so
//! nothing here needs a timer. The rows are committed reads, taking no
//! lock, exactly what a committed-read scan through a TC sends: the
//! backup's log brings every row changed meanwhile to the stop epoch.
//!
//! Rows go into blocks ([`storage::backup_file`]) written with `pwrite`
//! here, never synced here: the last request's sync of the file (and of
//! its directory) runs on an `io` thread, and its `FsConf` sends the
//! final `BackupFragConf` (`done`).
//!
//! The backup's log is written here too (`BackupLogReq`, NDB's backup
//! log): from its start every committed change of the backed-up tables
//! in the fragments this node is the primary of goes to the instance's
//! log file as the commit captures it (the change stream's capture,
//! `capture`), with its epoch: a record is the epoch, the table id, the
//! kind (a write's after image, a delete's before image) and the image,
//! in commit order, so a row's changes (one fragment, one file) are in
//! the order they committed. The stop asks for the log up to the
//! backup's stop epoch T: it is complete once the master's mark says T is
//! complete (it reaches every instance after every commit of T and below
//! ended here). Anything that could leave a change out fails the log: the
//! table altered or dropped, a data node failing or starting (the
//! primaries may move), a write that fails.
//!
//! Bounds: at most [`BACKUP_SCANS_MAX`] scans open per instance; a scan
//! nobody asked anything of for [`BACKUP_SCAN_IDLE_MAX`] (its backup
//! process died) is closed when a new one needs its slot.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kernel::{Context, Instant};
use proto::error;
use signal::{backup_frag, backup_log, sub_change, BlockRef, NodeBitmask, NodeId, SignalBody};
use storage::backup_file::{self, BLOCK_HEADER_BYTES, BLOCK_TARGET_BYTES, LOG_DELETE, LOG_WRITE};
use storage::disk::{Disk, DiskFile, OpenMode};
use storage::fragment::{ScanBatch, ScanCursor, ScanProgress, ScanRange, ScanSpec};

use super::LdmBlock;

/// Backup scans one LDM instance keeps open at once: a backup asks each
/// instance for one fragment of a table at a time; the room is for a few
/// backups at once and for scans whose backup died.
pub const BACKUP_SCANS_MAX: usize = 8;
/// A backup scan not asked anything for this long is taken to be
/// abandoned (its backup process is gone) and closed when a new scan
/// needs its slot. A running backup asks every few milliseconds, or once
/// a second at the lowest `--rate-rows`.
pub const BACKUP_SCAN_IDLE_MAX: Duration = Duration::from_secs(60);

/// Backup logs one LDM instance writes at once (one per running backup).
pub const BACKUP_LOGS_MAX: usize = 4;
/// A backup log not asked anything for this long is closed: its backup
/// process is gone (a running backup asks for the log's progress every
/// half second while it scans), and logging costs every commit of its
/// tables.
pub const BACKUP_LOG_IDLE_MAX: Duration = Duration::from_secs(60);

/// Who asked, and for which fragment: one scan per key.
type BackupKey = (BlockRef, u32, u32, u32);

/// A backup file being written: a data file or a log.
struct BlockOut {
    path: PathBuf,
    file: Box<dyn DiskFile>,
    /// The block being filled: [`BLOCK_HEADER_BYTES`] of room for its
    /// header, then whole records.
    block: Vec<u8>,
    /// Bytes written to the file (magic and blocks).
    bytes: u64,
}

impl BlockOut {
    /// A file whose magic is written.
    fn new(path: PathBuf, file: Box<dyn DiskFile>) -> BlockOut {
        let mut block = Vec::with_capacity(BLOCK_TARGET_BYTES * 2);
        block.resize(BLOCK_HEADER_BYTES, 0);
        BlockOut {
            path,
            file,
            block,
            bytes: backup_file::BLOCK_FILE_MAGIC.len() as u64,
        }
    }

    /// A record was appended to `block`: writes the block once full.
    fn record_done(&mut self, node: NodeId) -> Result<(), String> {
        if self.block.len() - BLOCK_HEADER_BYTES >= BLOCK_TARGET_BYTES {
            self.write_block(node)?;
        }
        Ok(())
    }

    /// Writes what the block holds, if anything: the file's last block.
    fn finish(&mut self, node: NodeId) -> Result<(), String> {
        if self.block.len() > BLOCK_HEADER_BYTES {
            self.write_block(node)?;
        }
        Ok(())
    }

    /// Seals the block with its header and writes it at the file's end.
    fn write_block(&mut self, node: NodeId) -> Result<(), String> {
        let header = backup_file::block_header(&self.block[BLOCK_HEADER_BYTES..]);
        self.block[..BLOCK_HEADER_BYTES].copy_from_slice(&header);
        self.file
            .write_at(self.bytes, &self.block)
            .map_err(|e| format!("node {node}: write {}: {e}", self.path.display()))?;
        self.bytes += self.block.len() as u64;
        self.block.truncate(BLOCK_HEADER_BYTES);
        Ok(())
    }

    /// The `io` thread's job: sync the file, then its directory (its name,
    /// on a host where no one else syncs it).
    fn sync_job<D: Disk + Clone + Send + 'static>(&self, disk: &D) -> kernel::IoJob {
        let sync = self.file.sync_handle();
        let (disk, path) = (disk.clone(), self.path.clone());
        Box::new(move || {
            sync.sync()
                .map_err(|e| format!("fsync {}: {e}", path.display()))?;
            let dir = path.parent().unwrap_or(Path::new("."));
            disk.sync_dir(dir)
                .map_err(|e| format!("fsync directory {}: {e}", dir.display()))
        })
    }
}

/// One open backup scan.
struct BackupScan {
    /// The backup process, the backup id, the table and the partition.
    key: BackupKey,
    out: BlockOut,
    cursor: ScanCursor,
    rows: u64,
    last_request: Instant,
    /// The final sync in flight: its `Context::io` request number and the
    /// `BackupFragReq` it answers.
    syncing: Option<(u64, u32)>,
}

/// A table a backup log holds the changes of.
#[derive(Debug)]
struct LoggedTable {
    id: u32,
    name: String,
    fully_replicated: bool,
    /// Bytes of the fixed part of its rows: where an image splits.
    fixed_bytes: usize,
}

/// What decides which node is a partition's primary: the nodes down and
/// those serving (`LiveMap`). A log fails when it changes.
type LiveState = (NodeBitmask, Option<NodeBitmask>);

/// One backup's log on this instance.
struct BackupLog {
    api: BlockRef,
    backup_id: u32,
    /// By id.
    tables: Vec<LoggedTable>,
    out: BlockOut,
    records: u64,
    live_at_start: LiveState,
    /// Why the log cannot be complete; answered at the next request.
    failed: Option<String>,
    /// The stop epoch and the request to answer once it is complete here.
    stop: Option<(u64, u32)>,
    syncing: Option<(u64, u32)>,
    last_request: Instant,
}

/// The backup scans and logs of one LDM instance.
#[derive(Default)]
pub(super) struct BackupScans {
    open: Vec<BackupScan>,
    /// The rows of one request, reused.
    batch: ScanBatch,
    logs: Vec<BackupLog>,
    /// The highest epoch the master said is complete.
    complete_epoch: u64,
}

impl std::fmt::Debug for BackupScans {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackupScans")
            .field("open", &self.open.len())
            .field("logs", &self.logs.len())
            .field("complete_epoch", &self.complete_epoch)
            .finish()
    }
}

/// The whole-fragment, committed-read spec every backup scan runs.
fn full_scan() -> ScanSpec {
    ScanSpec {
        range: ScanRange::Full,
        columns: Vec::new(),
    }
}

impl BackupScans {
    fn find(&self, key: &BackupKey) -> Option<usize> {
        self.open.iter().position(|s| &s.key == key)
    }

    /// Takes scan `key` out, unless its sync runs (its `FsConf` answers).
    fn close(&mut self, key: &BackupKey) -> Option<BackupScan> {
        let at = self.find(key)?;
        self.open[at]
            .syncing
            .is_none()
            .then(|| self.open.swap_remove(at))
    }

    /// Closes every scan of `tables` (dropped or altered here).
    pub(super) fn close_tables(&mut self, tables: &[u32]) {
        self.open
            .retain(|s| s.syncing.is_some() || !tables.contains(&s.key.2));
    }

    /// Whether a backup log is open: commits of its tables are captured.
    #[inline]
    pub(super) fn logging(&self) -> bool {
        !self.logs.is_empty()
    }

    /// The tables of the open logs (their fragments capture).
    pub(super) fn logged_tables(&self) -> Vec<u32> {
        let mut ids: Vec<u32> = self
            .logs
            .iter()
            .flat_map(|l| l.tables.iter().map(|t| t.id))
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// Appends the changes one commit captured here (`sub_change`
    /// entries of `epoch`) to every log that holds their table, for the
    /// partitions `node` is the primary of.
    pub(super) fn log_changes(
        &mut self,
        epoch: u64,
        entries: &[u8],
        live: &crate::live_map::LiveMap,
        node: NodeId,
    ) {
        for log in self.logs.iter_mut() {
            if log.failed.is_some() || log.syncing.is_some() {
                continue;
            }
            for entry in sub_change::entries(entries) {
                let entry = entry.expect("this instance's capture encodes whole entries");
                let Ok(at) = log.tables.binary_search_by_key(&entry.table, |t| t.id) else {
                    continue;
                };
                let table = &log.tables[at];
                if live
                    .home_of(entry.partition, table.fully_replicated)
                    .primary()
                    != node
                {
                    continue;
                }
                let (kind, image) = match entry.kind {
                    sub_change::INSERT | sub_change::UPDATE => (LOG_WRITE, entry.after),
                    sub_change::DELETE => (LOG_DELETE, entry.before),
                    // Schema entries are not captured with commits.
                    _ => continue,
                };
                // The table cannot have changed under the log: an alter
                // fails it first (`table_changed`).
                assert!(
                    image.len() >= table.fixed_bytes,
                    "a captured image of {} bytes, table {} rows have {} fixed",
                    image.len(),
                    entry.table,
                    table.fixed_bytes
                );
                let (fixed, var) = image.split_at(table.fixed_bytes);
                let block = &mut log.out.block;
                block.extend_from_slice(&epoch.to_le_bytes());
                block.extend_from_slice(&entry.table.to_le_bytes());
                block.extend_from_slice(&kind.to_le_bytes());
                backup_file::put_image(block, fixed, var);
                log.records += 1;
                if let Err(e) = log.out.record_done(node) {
                    log.failed = Some(e);
                    break;
                }
            }
        }
    }

    /// Table `table` was altered (its new `version`) or dropped here:
    /// a log holding it cannot be complete.
    pub(super) fn table_changed(&mut self, table: u32, what: &str, version: u32) {
        for log in self.logs.iter_mut().filter(|l| l.failed.is_none()) {
            if let Ok(at) = log.tables.binary_search_by_key(&table, |t| t.id) {
                log.failed = Some(format!(
                    "table {} was changed during the backup ({what}, version {version}): the \
                     backup cannot be consistent; take it again",
                    log.tables[at].name
                ));
            }
        }
    }

    /// The live map changed (a view or the master's node states): a log
    /// whose primaries may have moved cannot be complete.
    pub(super) fn check_live(&mut self, live: &crate::live_map::LiveMap) {
        if self.logs.is_empty() {
            return;
        }
        let now = live_state(live);
        for log in self.logs.iter_mut().filter(|l| l.failed.is_none()) {
            if log.live_at_start != now {
                log.failed = Some(
                    "a data node failed or started during the backup, so the primaries its \
                     log follows may have moved: take the backup again"
                        .to_owned(),
                );
            }
        }
    }
}

fn live_state(live: &crate::live_map::LiveMap) -> LiveState {
    (live.down(), live.states().map(|s| s.serving))
}

/// The request being answered.
#[derive(Clone, Copy)]
pub(super) struct FragRequest {
    pub request_id: u32,
    pub backup_id: u32,
    pub table_id: u32,
    pub table_version: u32,
    pub partition: u32,
    pub rows_max: u32,
    pub flags: u32,
}

impl<D: Disk + Clone + Send + 'static> LdmBlock<D> {
    /// `BackupFragReq`: see the module documentation.
    pub(super) fn on_backup_frag_req(
        &mut self,
        api: BlockRef,
        req: FragRequest,
        path: String,
        ctx: &mut Context<'_>,
    ) {
        if self.failed {
            return;
        }
        let key = (api, req.backup_id, req.table_id, req.partition);
        let refuse = |ctx: &mut Context<'_>, code: u32, message: String| {
            ctx.send(
                api,
                SignalBody::BackupFragRef {
                    request_id: req.request_id,
                    code,
                    message,
                },
            );
        };
        let node = self.config.node;
        if req.flags & backup_frag::CLOSE != 0 {
            if let Some(scan) = self.backups.close(&key) {
                tracing::info!(%node, path = %scan.out.path.display(), "backup scan closed");
            }
            let body = SignalBody::BackupFragConf {
                request_id: req.request_id,
                rows: 0,
                bytes: 0,
                done: false,
            };
            return ctx.send(api, body);
        }
        if let Err((code, message)) = self.backup_frag_check(&req) {
            self.backups.close(&key);
            return refuse(ctx, code, message);
        }
        let at = if req.flags & backup_frag::START != 0 {
            match self.backup_frag_open(key, Path::new(&path), ctx.now()) {
                Ok(at) => at,
                Err((code, message)) => return refuse(ctx, code, message),
            }
        } else {
            match self.backups.find(&key) {
                Some(at) if self.backups.open[at].syncing.is_none() => at,
                Some(_) => {
                    let message = format!(
                        "node {node}: the backup scan of table {} partition {} is syncing its \
                         file; wait for its answer",
                        req.table_id, req.partition
                    );
                    return refuse(ctx, error::BAD_OPERATION, message);
                }
                None => {
                    let message = format!(
                        "node {node}: no backup scan of backup {} table {} partition {} is open \
                         (closed after {} s without a request, or never started)",
                        req.backup_id,
                        req.table_id,
                        req.partition,
                        BACKUP_SCAN_IDLE_MAX.as_secs()
                    );
                    return refuse(ctx, error::UNKNOWN_SCAN, message);
                }
            }
        };
        self.backups.open[at].last_request = ctx.now();
        match self.backup_frag_step(at, req.rows_max as usize) {
            Err(message) => {
                self.backups.open.swap_remove(at);
                refuse(ctx, error::BACKUP_FILE_FAILED, message)
            }
            Ok(ScanProgress::More) => {
                let scan = &self.backups.open[at];
                let body = SignalBody::BackupFragConf {
                    request_id: req.request_id,
                    rows: scan.rows,
                    bytes: scan.out.bytes,
                    done: false,
                };
                ctx.send(api, body);
            }
            Ok(ScanProgress::Done) => {
                let request = self.next_io_request;
                self.next_io_request += 1;
                let scan = &mut self.backups.open[at];
                scan.syncing = Some((request, req.request_id));
                ctx.io(request, scan.out.sync_job(&self.disk));
            }
        }
    }

    /// Whether this instance serves a backup scan of the request's
    /// fragment now: open, the table at the version asked, not being
    /// altered, and this node the partition's primary.
    fn backup_frag_check(&self, req: &FragRequest) -> Result<(), (u32, String)> {
        let node = self.config.node;
        if self.instance.is_none() {
            let message = format!(
                "node {node} is starting: LDM instance {} is not open",
                self.config.instance
            );
            return Err((error::NOT_STARTED, message));
        }
        if !(1..=backup_frag::ROWS_MAX).contains(&req.rows_max)
            && req.flags & backup_frag::CLOSE == 0
        {
            let message = format!(
                "a backup request for {} rows: 1..={} allowed",
                req.rows_max,
                backup_frag::ROWS_MAX
            );
            return Err((error::MALFORMED_REQUEST, message));
        }
        let Some(table) = self.schema.tables.get(&req.table_id) else {
            let message = format!("node {node}: no table with id {}", req.table_id);
            return Err((error::NO_SUCH_TABLE, message));
        };
        if table.version != req.table_version {
            let message = format!(
                "node {node}: table `{}` is at version {}, the backup asked for {}: it was \
                 altered",
                table.name, table.version, req.table_version
            );
            return Err((error::WRONG_SCHEMA_VERSION, message));
        }
        if self.altering(req.table_id) {
            let message = format!(
                "table `{}` is being altered on LDM instance {} of node {node}",
                table.name, self.config.instance
            );
            return Err((error::BUSY, message));
        }
        let fully = table.fully_replicated;
        if !self.owns(req.partition, fully) {
            let message = format!(
                "table `{}` partition {} is not held by LDM instance {} of node {node}",
                table.name, req.partition, self.config.instance
            );
            return Err((error::BAD_OPERATION, message));
        }
        let primary = self.live.home_of(req.partition, fully).primary();
        if primary != node || !self.live.is_serving(node) {
            let message = format!(
                "node {node} is not the primary of table `{}` partition {} (node {primary} is)",
                table.name, req.partition
            );
            return Err((error::BAD_OPERATION, message));
        }
        Ok(())
    }

    /// Creates the file of a new backup scan; returns its slot.
    fn backup_frag_open(
        &mut self,
        key: BackupKey,
        path: &Path,
        now: Instant,
    ) -> Result<usize, (u32, String)> {
        let node = self.config.node;
        let scans = &mut self.backups.open;
        if scans.iter().any(|s| s.key == key) {
            let message = format!(
                "node {node}: backup {} of table {} partition {} is being written already",
                key.1, key.2, key.3
            );
            return Err((error::BAD_OPERATION, message));
        }
        if scans.len() >= BACKUP_SCANS_MAX {
            // Abandoned ones make room (never one whose sync is running).
            scans.retain(|s| {
                s.syncing.is_some() || now.saturating_since(s.last_request) < BACKUP_SCAN_IDLE_MAX
            });
        }
        if scans.len() >= BACKUP_SCANS_MAX {
            let message = format!(
                "LDM instance {} of node {node} has {BACKUP_SCANS_MAX} backup scans open",
                self.config.instance
            );
            return Err((error::TOO_MANY_SCANS, message));
        }
        let out = self.create_backup_file(path)?;
        tracing::info!(%node, path = %path.display(), "backup scan started");
        let scans = &mut self.backups.open;
        scans.push(BackupScan {
            key,
            out,
            cursor: ScanCursor::new(),
            rows: 0,
            last_request: now,
            syncing: None,
        });
        Ok(scans.len() - 1)
    }

    /// Creates a backup file at `path` (absolute; its directory created if
    /// missing; never over an existing file) and writes the magic.
    fn create_backup_file(&self, path: &Path) -> Result<BlockOut, (u32, String)> {
        let node = self.config.node;
        let failed = |what: &str, e: std::io::Error| {
            let message = format!("node {node}: {what} {}: {e}", path.display());
            (error::BACKUP_FILE_FAILED, message)
        };
        if !path.is_absolute() {
            let message = format!(
                "node {node}: a backup file path must be absolute, not {}",
                path.display()
            );
            return Err((error::MALFORMED_REQUEST, message));
        }
        let dir = path.parent().unwrap_or(Path::new("/"));
        self.disk
            .create_dir_all(dir)
            .map_err(|e| failed("create the directory of", e))?;
        if self.disk.exists(path).map_err(|e| failed("look for", e))? {
            let message = format!("node {node}: backup file {} exists already", path.display());
            return Err((error::ALREADY_EXISTS, message));
        }
        let mut file = self
            .disk
            .open(path, OpenMode::CreateTruncate)
            .map_err(|e| failed("create", e))?;
        file.write_at(0, backup_file::BLOCK_FILE_MAGIC)
            .map_err(|e| failed("write", e))?;
        Ok(BlockOut::new(path.to_owned(), file))
    }

    /// Writes the next at most `rows_max` rows of scan `at`, and the last
    /// block once the fragment has no more.
    fn backup_frag_step(&mut self, at: usize, rows_max: usize) -> Result<ScanProgress, String> {
        let node = self.config.node;
        let LdmBlock {
            instance, backups, ..
        } = self;
        let BackupScans { open, batch, .. } = backups;
        let scan = &mut open[at];
        let (_, _, table_id, partition) = scan.key;
        let instance = instance.as_mut().expect("checked open");
        let Some((fragment, pool)) = instance.fragment(table_id, partition) else {
            return Err(format!(
                "node {node}: table {table_id} partition {partition} is gone (dropped?)"
            ));
        };
        let progress = fragment
            .scan(pool, &full_scan(), &mut scan.cursor, rows_max, batch)
            .map_err(|e| {
                format!("node {node}: scan of table {table_id} partition {partition}: {e}")
            })?;
        for i in 0..batch.len() {
            let (fixed, var) = batch.image(i);
            backup_file::put_image(&mut scan.out.block, fixed, var);
            scan.rows += 1;
            scan.out.record_done(node)?;
        }
        if progress == ScanProgress::Done {
            scan.out.finish(node)?;
        }
        Ok(progress)
    }

    /// `FsConf` of a backup file's sync; `false` when the request is not
    /// a backup scan's or log's.
    pub(super) fn on_backup_sync_done(
        &mut self,
        request: u64,
        error: &str,
        ctx: &mut Context<'_>,
    ) -> bool {
        let node = self.config.node;
        let syncs = |s: &Option<(u64, u32)>| s.is_some_and(|(r, _)| r == request);
        let (api, request_id, path, rows, bytes, epoch, is_log) =
            if let Some(at) = self.backups.open.iter().position(|s| syncs(&s.syncing)) {
                let scan = self.backups.open.swap_remove(at);
                let (_, id) = scan.syncing.expect("found by it");
                (
                    scan.key.0,
                    id,
                    scan.out.path,
                    scan.rows,
                    scan.out.bytes,
                    0,
                    false,
                )
            } else if let Some(at) = self.backups.logs.iter().position(|l| syncs(&l.syncing)) {
                let log = self.backups.logs.swap_remove(at);
                let (_, id) = log.syncing.expect("found by it");
                let stop = log.stop.map_or(0, |(epoch, _)| epoch);
                // Its tables capture no more unless another log holds them.
                self.apply_capture();
                (
                    log.api,
                    id,
                    log.out.path,
                    log.records,
                    log.out.bytes,
                    stop,
                    true,
                )
            } else {
                return false;
            };
        let body = match (error.is_empty(), is_log) {
            (true, false) => SignalBody::BackupFragConf {
                request_id,
                rows,
                bytes,
                done: true,
            },
            (true, true) => SignalBody::BackupLogConf {
                request_id,
                records: rows,
                bytes,
                epoch,
                done: true,
            },
            (false, false) => SignalBody::BackupFragRef {
                request_id,
                code: error::BACKUP_FILE_FAILED,
                message: format!("node {node}: {error}"),
            },
            (false, true) => SignalBody::BackupLogRef {
                request_id,
                code: error::BACKUP_FILE_FAILED,
                message: format!("node {node}: {error}"),
            },
        };
        tracing::info!(%node, path = %path.display(), rows, bytes, error, "backup file done");
        ctx.send(api, body);
        true
    }

    /// `BackupLogReq`: see the module documentation.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_backup_log_req(
        &mut self,
        api: BlockRef,
        request_id: u32,
        backup_id: u32,
        flags: u32,
        stop_epoch: u64,
        mut tables: Vec<u32>,
        path: String,
        ctx: &mut Context<'_>,
    ) {
        if self.failed {
            return;
        }
        let node = self.config.node;
        let refuse = |ctx: &mut Context<'_>, code: u32, message: String| {
            ctx.send(
                api,
                SignalBody::BackupLogRef {
                    request_id,
                    code,
                    message,
                },
            );
        };
        let now = ctx.now();
        let found = self
            .backups
            .logs
            .iter()
            .position(|l| l.api == api && l.backup_id == backup_id);
        if flags & backup_log::START != 0 {
            if found.is_some() {
                let message = format!("node {node}: backup {backup_id} has its log open already");
                return refuse(ctx, error::BAD_OPERATION, message);
            }
            if self.instance.is_none() {
                let message = format!(
                    "node {node} is starting: LDM instance {} is not open",
                    self.config.instance
                );
                return refuse(ctx, error::NOT_STARTED, message);
            }
            self.close_idle_logs(now);
            if self.backups.logs.len() >= BACKUP_LOGS_MAX {
                let message = format!(
                    "LDM instance {} of node {node} writes {BACKUP_LOGS_MAX} backup logs already",
                    self.config.instance
                );
                return refuse(ctx, error::TOO_MANY_SCANS, message);
            }
            tables.sort_unstable();
            tables.dedup();
            let mut logged = Vec::with_capacity(tables.len());
            for id in tables {
                let Some(def) = self.schema.tables.get(&id) else {
                    let message = format!("node {node}: no table with id {id}");
                    return refuse(ctx, error::NO_SUCH_TABLE, message);
                };
                logged.push(LoggedTable {
                    id,
                    name: def.name.clone(),
                    fully_replicated: def.fully_replicated,
                    fixed_bytes: schema::RowLayout::new(def).fixed_bytes(),
                });
            }
            let out = match self.create_backup_file(Path::new(&path)) {
                Ok(out) => out,
                Err((code, message)) => return refuse(ctx, code, message),
            };
            tracing::info!(%node, path, "backup log started");
            let bytes = out.bytes;
            self.backups.logs.push(BackupLog {
                api,
                backup_id,
                tables: logged,
                out,
                records: 0,
                live_at_start: live_state(&self.live),
                failed: None,
                stop: None,
                syncing: None,
                last_request: now,
            });
            // Every commit of the tables from here on is captured.
            self.apply_capture();
            let body = SignalBody::BackupLogConf {
                request_id,
                records: 0,
                bytes,
                epoch: self.capture.max_epoch,
                done: false,
            };
            return ctx.send(api, body);
        }
        let Some(at) = found else {
            let message = format!(
                "node {node}: backup {backup_id} has no log open on LDM instance {} (the node \
                 restarted, or the log was closed after {} s without a request)",
                self.config.instance,
                BACKUP_LOG_IDLE_MAX.as_secs()
            );
            return refuse(ctx, error::UNKNOWN_SCAN, message);
        };
        let log = &mut self.backups.logs[at];
        log.last_request = now;
        if log.syncing.is_some() || log.stop.is_some() {
            let message = format!("node {node}: backup {backup_id}'s log is being completed");
            return refuse(ctx, error::BAD_OPERATION, message);
        }
        if flags & backup_log::CLOSE != 0 || log.failed.is_some() {
            let log = self.backups.logs.swap_remove(at);
            self.apply_capture();
            return match log.failed {
                Some(message) if flags & backup_log::CLOSE == 0 => refuse(
                    ctx,
                    error::BACKUP_FILE_FAILED,
                    format!("node {node}: {message}"),
                ),
                _ => ctx.send(
                    api,
                    SignalBody::BackupLogConf {
                        request_id,
                        records: log.records,
                        bytes: log.out.bytes,
                        epoch: 0,
                        done: false,
                    },
                ),
            };
        }
        if flags & backup_log::STOP != 0 {
            log.stop = Some((stop_epoch, request_id));
            return self.complete_logs(ctx);
        }
        // A progress query.
        let body = SignalBody::BackupLogConf {
            request_id,
            records: log.records,
            bytes: log.out.bytes,
            epoch: self.backups.complete_epoch,
            done: false,
        };
        ctx.send(api, body);
    }

    /// Closes logs whose backup stopped asking (its process is gone).
    fn close_idle_logs(&mut self, now: Instant) {
        let before = self.backups.logs.len();
        self.backups.logs.retain(|l| {
            l.syncing.is_some() || now.saturating_since(l.last_request) < BACKUP_LOG_IDLE_MAX
        });
        if self.backups.logs.len() < before {
            tracing::warn!(
                node = %self.config.node,
                "LDM instance {}: a backup log nobody asked for in {} s closed",
                self.config.instance,
                BACKUP_LOG_IDLE_MAX.as_secs()
            );
            self.apply_capture();
        }
    }

    /// The master's mark: epoch `epoch` is complete (every commit of it
    /// and below ended here, and was logged).
    pub(super) fn on_backup_epoch_complete(&mut self, epoch: u64, ctx: &mut Context<'_>) {
        self.backups.complete_epoch = self.backups.complete_epoch.max(epoch);
        if self.backups.logging() {
            self.close_idle_logs(ctx.now());
            self.complete_logs(ctx);
        }
    }

    /// Completes the logs whose stop epoch is complete: the last block,
    /// then the sync on an `io` thread (answered at its `FsConf`); a
    /// failed log answers its stop with why.
    fn complete_logs(&mut self, ctx: &mut Context<'_>) {
        let node = self.config.node;
        let complete = self.backups.complete_epoch;
        let mut at = 0;
        while at < self.backups.logs.len() {
            let log = &mut self.backups.logs[at];
            let Some((stop, request_id)) = log.stop else {
                at += 1;
                continue;
            };
            if log.syncing.is_some() || (stop > complete && log.failed.is_none()) {
                at += 1;
                continue;
            }
            if log.failed.is_none() {
                if let Err(e) = log.out.finish(node) {
                    log.failed = Some(e);
                }
            }
            if let Some(message) = log.failed.take() {
                let api = log.api;
                self.backups.logs.swap_remove(at);
                self.apply_capture();
                let message = format!("node {node}: {message}");
                let body = SignalBody::BackupLogRef {
                    request_id,
                    code: error::BACKUP_FILE_FAILED,
                    message,
                };
                ctx.send(api, body);
                continue;
            }
            let request = self.next_io_request;
            self.next_io_request += 1;
            let log = &mut self.backups.logs[at];
            log.syncing = Some((request, request_id));
            ctx.io(request, log.out.sync_job(&self.disk));
            at += 1;
        }
    }
}
