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
//! Bounds: at most [`BACKUP_SCANS_MAX`] scans open per instance; a scan
//! nobody asked anything of for [`BACKUP_SCAN_IDLE_MAX`] (its backup
//! process died) is closed when a new one needs its slot.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kernel::{Context, Instant};
use proto::error;
use signal::{backup_frag, BlockRef, SignalBody};
use storage::backup_file::{self, BLOCK_HEADER_BYTES, BLOCK_TARGET_BYTES};
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

/// Who asked, and for which fragment: one scan per key.
type BackupKey = (BlockRef, u32, u32, u32);

/// One open backup scan.
struct BackupScan {
    /// The backup process, the backup id, the table and the partition.
    key: BackupKey,
    table_version: u32,
    path: PathBuf,
    file: Box<dyn DiskFile>,
    cursor: ScanCursor,
    /// The block being filled: [`BLOCK_HEADER_BYTES`] of room for its
    /// header, then whole records.
    block: Vec<u8>,
    /// Bytes written to the file (magic and blocks).
    bytes: u64,
    rows: u64,
    last_request: Instant,
    /// The final sync in flight: its `Context::io` request number and the
    /// `BackupFragReq` it answers.
    syncing: Option<(u64, u32)>,
}

/// The backup scans of one LDM instance.
#[derive(Default)]
pub(super) struct BackupScans {
    open: Vec<BackupScan>,
    /// The rows of one request, reused.
    batch: ScanBatch,
}

impl std::fmt::Debug for BackupScans {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackupScans")
            .field("open", &self.open.len())
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

    /// Closes every scan of `tables` (dropped or altered here).
    pub(super) fn close_tables(&mut self, tables: &[u32]) {
        self.open
            .retain(|s| s.syncing.is_some() || !tables.contains(&s.key.2));
    }
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
            if let Some(at) = self.backups.find(&key) {
                if self.backups.open[at].syncing.is_none() {
                    let scan = self.backups.open.swap_remove(at);
                    tracing::info!(%node, path = %scan.path.display(), "backup scan closed");
                }
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
            if let Some(at) = self.backups.find(&key) {
                if self.backups.open[at].syncing.is_none() {
                    self.backups.open.swap_remove(at);
                }
            }
            return refuse(ctx, code, message);
        }
        let at = if req.flags & backup_frag::START != 0 {
            match self.backup_frag_open(key, req.table_version, Path::new(&path), ctx.now()) {
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
                    bytes: scan.bytes,
                    done: false,
                };
                ctx.send(api, body);
            }
            Ok(ScanProgress::Done) => {
                let request = self.next_io_request;
                self.next_io_request += 1;
                let scan = &mut self.backups.open[at];
                scan.syncing = Some((request, req.request_id));
                let sync = scan.file.sync_handle();
                let (disk, path) = (self.disk.clone(), scan.path.clone());
                let job = move || {
                    sync.sync()
                        .map_err(|e| format!("fsync {}: {e}", path.display()))?;
                    // The file's name, on a host where no one else
                    // syncs the directory.
                    let dir = path.parent().unwrap_or(Path::new("."));
                    disk.sync_dir(dir)
                        .map_err(|e| format!("fsync directory {}: {e}", dir.display()))
                };
                ctx.io(request, Box::new(job));
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
        table_version: u32,
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
        // Never over another backup's file.
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
        let mut block = Vec::with_capacity(BLOCK_TARGET_BYTES * 2);
        block.resize(BLOCK_HEADER_BYTES, 0);
        tracing::info!(%node, path = %path.display(), "backup scan started");
        scans.push(BackupScan {
            key,
            table_version,
            path: path.to_owned(),
            file,
            cursor: ScanCursor::new(),
            block,
            bytes: backup_file::BLOCK_FILE_MAGIC.len() as u64,
            rows: 0,
            last_request: now,
            syncing: None,
        });
        Ok(scans.len() - 1)
    }

    /// Writes the next at most `rows_max` rows of scan `at`, and the last
    /// block once the fragment has no more.
    fn backup_frag_step(&mut self, at: usize, rows_max: usize) -> Result<ScanProgress, String> {
        let node = self.config.node;
        let LdmBlock {
            instance, backups, ..
        } = self;
        let BackupScans { open, batch } = backups;
        let scan = &mut open[at];
        let (_, _, table_id, partition) = scan.key;
        let instance = instance.as_mut().expect("checked open");
        let Some((fragment, pool)) = instance.fragment(table_id, partition) else {
            return Err(format!(
                "node {node}: table {table_id} partition {partition} is gone (dropped?)"
            ));
        };
        debug_assert!(scan.table_version > 0);
        let progress = fragment
            .scan(pool, &full_scan(), &mut scan.cursor, rows_max, batch)
            .map_err(|e| {
                format!("node {node}: scan of table {table_id} partition {partition}: {e}")
            })?;
        for i in 0..batch.len() {
            let (fixed, var) = batch.image(i);
            backup_file::put_image(&mut scan.block, fixed, var);
            scan.rows += 1;
            if scan.block.len() - BLOCK_HEADER_BYTES >= BLOCK_TARGET_BYTES {
                write_block(scan, node)?;
            }
        }
        if progress == ScanProgress::Done && scan.block.len() > BLOCK_HEADER_BYTES {
            write_block(scan, node)?;
        }
        Ok(progress)
    }

    /// `FsConf` of a backup file's sync; `false` when the request is not
    /// a backup scan's.
    pub(super) fn on_backup_sync_done(
        &mut self,
        request: u64,
        error: &str,
        ctx: &mut Context<'_>,
    ) -> bool {
        let Some(at) = self
            .backups
            .open
            .iter()
            .position(|s| s.syncing.is_some_and(|(r, _)| r == request))
        else {
            return false;
        };
        let scan = self.backups.open.swap_remove(at);
        let (_, request_id) = scan.syncing.expect("found by it");
        let body = if error.is_empty() {
            tracing::info!(
                node = %self.config.node,
                path = %scan.path.display(),
                rows = scan.rows,
                bytes = scan.bytes,
                "backup scan done"
            );
            SignalBody::BackupFragConf {
                request_id,
                rows: scan.rows,
                bytes: scan.bytes,
                done: true,
            }
        } else {
            SignalBody::BackupFragRef {
                request_id,
                code: error::BACKUP_FILE_FAILED,
                message: format!("node {}: {error}", self.config.node),
            }
        };
        ctx.send(scan.key.0, body);
        true
    }
}

/// Seals the scan's block with its header and writes it at the file's end.
fn write_block(scan: &mut BackupScan, node: signal::NodeId) -> Result<(), String> {
    let header = backup_file::block_header(&scan.block[BLOCK_HEADER_BYTES..]);
    scan.block[..BLOCK_HEADER_BYTES].copy_from_slice(&header);
    scan.file
        .write_at(scan.bytes, &scan.block)
        .map_err(|e| format!("node {node}: write {}: {e}", scan.path.display()))?;
    scan.bytes += scan.block.len() as u64;
    scan.block.truncate(BLOCK_HEADER_BYTES);
    Ok(())
}
