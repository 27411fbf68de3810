//! Taking a backup (see the module doc of [`super`] for why it is
//! consistent at its stop epoch).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use schema::RowLayout;
use serde_json::{json, Value as Json};
use signal::{backup_frag, NodeId};
use skarv_client::schema_types::{Column, ColumnType, TableDef};
use skarv_client::{
    BackupFragProgress, BackupFragRequest, ChangeKind, Cluster, Epoch, Event, ExecMode, Images,
    Session, SubscribeOptions, Subscription, Table, Value,
};

use super::format::{self, BlockWriter};
use super::{backup_dir, write_status, ABORT_FILE, MARKER_TABLE};

/// Rows per second the scans read at most unless `--rate-rows` says
/// otherwise: about a tenth of what one 2-CPU sandbox commits under flex
/// updates, so foreground traffic keeps most of the machine (NDB bounds
/// its backup by `MaxDiskWriteSpeed` the same way).
pub const BACKUP_ROWS_PER_SEC_DEFAULT: u64 = 50_000;
/// The change stream's client buffer for the backup (its `max_alloc`): a
/// backup that falls this far behind the stream fails with a gap rather
/// than growing without bound.
pub const BACKUP_EVENT_BUFFER_BYTES: usize = 256 * 1024 * 1024;
/// How long the backup waits for the stream's first epoch, and for its
/// stop epoch after the marker commit, before it fails.
pub const BACKUP_EPOCH_WAIT_MS: u64 = 60_000;
/// The fewest rows a fragment's scan writes per round, however low the
/// rate: a request per row would cost more than the rows.
const FRAG_STEP_ROWS_MIN: u64 = 16;
/// The status file is rewritten at most this often.
const STATUS_INTERVAL_MS: u64 = 500;

/// The log thread's error when the scans stopped it (not a cause).
const LOG_STOPPED: &str = "stopped by the scans' failure";

/// The scans' error when the log thread's failure stopped them.
const SCANS_STOPPED: &str = "stopped: the change stream failed";

/// Record kinds of the log file.
pub const LOG_WRITE: u32 = 0;
pub const LOG_DELETE: u32 = 1;

/// What a backup was asked to do.
pub struct TakeOptions<'a> {
    pub connect: &'a str,
    /// `BACKUP-<id>/` already created (by this process or its parent).
    pub dir: PathBuf,
    pub id: u64,
    pub rows_per_sec: u64,
}

/// A table being backed up: a user's table, or the hidden parts table of
/// one's BLOB/TEXT column. The base table's rows hold their BLOB/TEXT
/// values as heads (scanned with `ScanOptions::blob_heads`, and so the
/// change stream sends them), the parts table holds the rest: each is
/// backed up as the table it is, and a row's head and parts meet again
/// at the stop epoch because the client writes both in one transaction
/// (one epoch).
struct Backed {
    name: String,
    table: Arc<Table>,
    layout: RowLayout,
    /// For a parts table: its base table's index in the list, and the
    /// BLOB/TEXT column's name.
    parts_of: Option<(usize, String)>,
}

/// Encodes `values` (every column, in table order) as a row image.
pub fn encode_row(
    layout: &RowLayout,
    values: &[Value],
    fixed: &mut Vec<u8>,
    var: &mut Vec<u8>,
    out: &mut Vec<u8>,
) -> Result<(), String> {
    layout
        .encode(values, fixed, var)
        .map_err(|e| format!("encode a row: {e}"))?;
    format::put_image(out, fixed, var);
    Ok(())
}

fn backed(name: String, table: Arc<Table>, parts_of: Option<(usize, String)>) -> Backed {
    let layout = RowLayout::new(table.def());
    Backed {
        name,
        table,
        layout,
        parts_of,
    }
}

/// Runs a backup to its end; returns the manifest.
pub fn take(options: &TakeOptions<'_>) -> Result<Json, String> {
    let started = Instant::now();
    let mut status = json!({
        "id": options.id,
        "state": "running",
        "phase": "starting",
        "pid": std::process::id(),
        "rows": 0,
        "log_records": 0,
    });
    write_status(&options.dir, &status)?;
    let result = run(options, &mut status);
    match &result {
        Ok(manifest) => {
            status["state"] = json!("complete");
            status["phase"] = json!("done");
            status["stop_epoch"] = manifest["stop_epoch_text"].clone();
            status["rows"] = manifest["rows"].clone();
        }
        Err(e) => {
            let aborted = options.dir.join(ABORT_FILE).exists();
            status["state"] = json!(if aborted { "aborted" } else { "failed" });
            status["error"] = json!(e);
        }
    }
    status["seconds"] = json!(started.elapsed().as_secs_f64());
    write_status(&options.dir, &status)?;
    result
}

fn connect(connect: &str) -> Result<(Cluster, Session), String> {
    let cluster = Cluster::connect(connect).map_err(|e| format!("connect to {connect}: {e}"))?;
    let session = cluster.session().map_err(|e| e.to_string())?;
    Ok((cluster, session))
}

/// The marker table, created when missing.
fn marker_table(session: &Session) -> Result<Arc<Table>, String> {
    if let Ok(table) = session.table(MARKER_TABLE) {
        return Ok(table);
    }
    let def = TableDef::new(
        MARKER_TABLE,
        0,
        vec![
            Column::new("id", ColumnType::BigInt { unsigned: true }),
            Column::new("stop_epoch", ColumnType::BigInt { unsigned: true }),
        ],
    )
    .primary_key(vec![0]);
    // Another backup may create it at the same time: its table is as good.
    let created = session.create_table(&def);
    session.table(MARKER_TABLE).map_err(|e| {
        format!(
            "create the marker table {MARKER_TABLE}: {}",
            created.err().map_or(e.to_string(), |c| c.to_string())
        )
    })
}

fn run(options: &TakeOptions<'_>, status: &mut Json) -> Result<Json, String> {
    let (_cluster, session) = connect(options.connect)?;
    let marker = marker_table(&session)?;
    let mut tables = Vec::new();
    let names = session
        .list_tables()
        .map_err(|e| format!("list tables: {e}"))?;
    for name in names.into_iter().filter(|n| n != MARKER_TABLE) {
        let table = session
            .table(&name)
            .map_err(|e| format!("table {name}: {e}"))?;
        tables.push(backed(name, table, None));
    }
    // The parts tables after every user table: a log record's table
    // index is its place in this list (docs/operations.md, Files).
    for base in 0..tables.len() {
        let table = Arc::clone(&tables[base].table);
        for column in table.columns().iter().filter(|c| c.ty.is_blob()) {
            let parts = table.blob_parts_table(&column.name).ok_or_else(|| {
                format!("table {}: no parts table of {}", table.name(), column.name)
            })?;
            let name = parts.name().to_owned();
            tables.push(backed(
                name,
                Arc::clone(parts),
                Some((base, column.name.clone())),
            ));
        }
    }
    let abort = AtomicBool::new(false);
    let log_records = AtomicU64::new(0);
    let (first_tx, first_rx) = mpsc::channel::<u64>();
    let (stop_tx, stop_rx) = mpsc::channel::<u64>();
    let subscription = if tables.is_empty() {
        None
    } else {
        let handles: Vec<Arc<Table>> = tables.iter().map(|t| Arc::clone(&t.table)).collect();
        let sub_options = SubscribeOptions {
            images: Images::Full,
            columns: None,
            // A table without a primary key of its own is keyed by its
            // hidden `$PK`: its rows are whole only with it.
            hidden_columns: true,
            max_alloc: BACKUP_EVENT_BUFFER_BYTES,
        };
        Some(
            session
                .subscribe_tables(&handles, sub_options)
                .map_err(|e| format!("subscribe to the change stream: {e}"))?,
        )
    };
    let log_path = options.dir.join("log");
    let log = BlockWriter::create(&log_path)?;
    // No table: the log is empty and there is no stream to follow.
    let (logger_input, mut empty_log) = match subscription {
        Some(sub) => (Some((sub, log)), None),
        None => {
            let (bytes, records) = log.finish()?;
            let summary = LogSummary {
                bytes,
                records,
                ..LogSummary::default()
            };
            (None, Some(summary))
        }
    };
    std::thread::scope(|scope| {
        let logger = logger_input.map(|(sub, log)| {
            let tables = &tables;
            let abort = &abort;
            let log_records = &log_records;
            scope.spawn(move || {
                let result = log_changes(sub, tables, log, first_tx, stop_rx, abort, log_records);
                if result.is_err() {
                    abort.store(true, Ordering::Relaxed);
                }
                result
            })
        });
        let scanned = scan_all(
            options,
            &session,
            &tables,
            &marker,
            first_rx,
            &abort,
            &log_records,
            status,
            logger.is_some(),
        );
        if let Ok((_, stop)) = &scanned {
            let _ = stop_tx.send(*stop);
        } else {
            abort.store(true, Ordering::Relaxed);
        }
        drop(stop_tx);
        let logged = match logger {
            Some(handle) => handle
                .join()
                .unwrap_or_else(|_| Err("the log thread panicked".to_owned())),
            None => Ok(empty_log.take().unwrap_or_default()),
        };
        // Whichever side failed first stopped the other (its error is
        // then `LOG_STOPPED` or the scans' abort): name both when both
        // have a cause of their own.
        match (scanned, logged) {
            (Ok((files, stop)), Ok(logged)) => finish(options, &tables, files, stop, logged),
            (Err(scan), Ok(_)) => Err(scan),
            (Err(scan), Err(log)) if log == LOG_STOPPED => Err(scan),
            (Err(scan), Err(log)) if scan == SCANS_STOPPED => Err(log),
            (Ok(_), Err(log)) => Err(log),
            (Err(scan), Err(log)) => Err(format!("{log} (scans: {scan})")),
        }
    })
}

/// What the log thread wrote.
#[derive(Default)]
struct LogSummary {
    start_epoch: u64,
    epochs: u64,
    records: u64,
    bytes: u64,
}

/// Writes the change stream's epochs to the log until the stop epoch.
fn log_changes(
    mut sub: Subscription,
    tables: &[Backed],
    mut log: BlockWriter,
    first_tx: mpsc::Sender<u64>,
    stop_rx: mpsc::Receiver<u64>,
    abort: &AtomicBool,
    log_records: &AtomicU64,
) -> Result<LogSummary, String> {
    let mut summary = LogSummary::default();
    let mut first: Option<mpsc::Sender<u64>> = Some(first_tx);
    let mut stop: Option<u64> = None;
    let mut waited_since = Instant::now();
    let mut last_epoch = 0u64;
    let by_name: std::collections::HashMap<&str, usize> = tables
        .iter()
        .enumerate()
        .map(|(i, t)| (t.name.as_str(), i))
        .collect();
    let (mut fixed, mut var, mut values) = (Vec::new(), Vec::new(), Vec::new());
    loop {
        if abort.load(Ordering::Relaxed) {
            return Err(LOG_STOPPED.to_owned());
        }
        if stop.is_none() {
            match stop_rx.try_recv() {
                Ok(epoch) => {
                    stop = Some(epoch);
                    waited_since = Instant::now();
                    // The stream may have delivered the stop epoch (and
                    // later ones) before the marker's commit reached the
                    // scanning thread: those are in the log already, and
                    // restore leaves out what is above the stop.
                    if last_epoch >= epoch {
                        break;
                    }
                }
                Err(mpsc::TryRecvError::Disconnected) => return Err(LOG_STOPPED.to_owned()),
                Err(mpsc::TryRecvError::Empty) => {}
            }
        }
        let event = sub
            .next_timeout(Duration::from_millis(100))
            .map_err(|e| format!("change stream: {e}"))?;
        let Some(event) = event else {
            if sub.state().ended {
                return Err(
                    "the change stream ended (a data node failed or cut the backup off)".to_owned(),
                );
            }
            if (first.is_some() || stop.is_some())
                && waited_since.elapsed() > Duration::from_millis(BACKUP_EPOCH_WAIT_MS)
            {
                return Err(format!(
                    "no complete epoch from the change stream for {BACKUP_EPOCH_WAIT_MS} ms"
                ));
            }
            continue;
        };
        let epochs = match event {
            // The stream survives a data node's failure (the others
            // resend); it ends, with a gap to the end of time, only when a
            // whole node group is down (docs/events.md).
            Event::Gap { from, to } if to.get() == u64::MAX => {
                return Err(format!(
                    "a node group is down: the change stream ended after epoch {from}, so the \
                     backup cannot be consistent"
                ))
            }
            Event::Gap { from, to } => {
                return Err(format!(
                    "the change stream lost epochs {from} to {to} (the backup fell too far \
                     behind the data nodes' buffers): the backup cannot be consistent"
                ))
            }
            Event::Epoch(epochs) => epochs,
        };
        let epoch = epochs.epoch.get();
        waited_since = Instant::now();
        if let Some(first) = first.take() {
            summary.start_epoch = epoch;
            let _ = first.send(epoch);
        }
        if stop.is_some_and(|s| epoch > s) {
            break;
        }
        last_epoch = epoch;
        summary.epochs += 1;
        // The scans read each table in the definition it had when the
        // backup began, and restore re-creates that one: a table altered
        // or dropped inside the window has rows of two definitions (or
        // none to restore to). NDB refuses such DDL while a backup runs;
        // here the backup fails and says which table and what to do.
        if let Some(ddl) = epochs.schema.first() {
            return Err(format!(
                "table {} was changed during the backup ({}, version {}, in epoch {}): the \
                 backup cannot be consistent; take it again",
                ddl.table,
                ddl.kind.as_str(),
                ddl.version,
                epochs.epoch
            ));
        }
        for change in epochs.changes {
            let backed = *by_name
                .get(change.table)
                .ok_or_else(|| format!("a change of table {} not backed up", change.table))?;
            let (kind, image) = match change.kind {
                ChangeKind::Insert | ChangeKind::Update => (LOG_WRITE, change.after),
                ChangeKind::Delete => (LOG_DELETE, change.before),
            };
            let image =
                image.ok_or_else(|| format!("a change of {} without its image", change.table))?;
            let layout = &tables[backed].layout;
            if image.len() != layout.column_count() {
                return Err(format!(
                    "a change of {} has {} columns, the table {}",
                    change.table,
                    image.len(),
                    layout.column_count()
                ));
            }
            debug_assert!(
                image
                    .iter()
                    .zip(&tables[backed].table.def().columns)
                    .all(|((name, _), column)| *name == column.name),
                "a change image of {} in table order",
                change.table
            );
            values.clear();
            values.extend(image.into_iter().map(|(_, v)| v));
            let out = log.record_buffer();
            out.extend_from_slice(&epoch.to_le_bytes());
            out.extend_from_slice(&(backed as u32).to_le_bytes());
            out.extend_from_slice(&kind.to_le_bytes());
            encode_row(layout, &values, &mut fixed, &mut var, out)?;
            log.record_done()?;
            log_records.fetch_add(1, Ordering::Relaxed);
        }
        if stop == Some(epoch) {
            break;
        }
    }
    let (bytes, records) = log.finish()?;
    summary.bytes = bytes;
    summary.records = records;
    Ok(summary)
}

/// Keeps the scans under a rows-per-second budget.
struct Pace {
    per_sec: u64,
    start: Instant,
    rows: u64,
}

impl Pace {
    /// `rows` more were written: sleeps until the budget allows them.
    fn rows(&mut self, rows: u64) {
        self.rows += rows;
        if self.per_sec == 0 {
            return;
        }
        let due = Duration::from_secs_f64(self.rows as f64 / self.per_sec as f64);
        let elapsed = self.start.elapsed();
        if due > elapsed {
            // Pacing, not synchronisation: the budget is time itself.
            std::thread::sleep(due - elapsed);
        }
    }

    /// Rows each of `fragments` scans writes per round: about a tenth of a
    /// second's budget over them all, so a round's burst stays small.
    fn rows_per_step(&self, fragments: usize) -> u32 {
        if self.per_sec == 0 {
            return backup_frag::ROWS_MAX;
        }
        let step = self.per_sec / 10 / fragments.max(1) as u64;
        step.clamp(FRAG_STEP_ROWS_MIN, u64::from(backup_frag::ROWS_MAX)) as u32
    }
}

/// One data file written: a fragment's rows, by the node that was its
/// primary.
struct DataFile {
    partition: u32,
    node: NodeId,
    file: String,
    rows: u64,
    bytes: u64,
}

/// One fragment's scan while it runs.
struct FragScan {
    partition: u32,
    node: NodeId,
    file: String,
    path: String,
    progress: BackupFragProgress,
    started: bool,
}

/// Scans every table once the stream has its first epoch, then commits
/// the marker; returns each table's files and the stop epoch.
///
/// Each fragment is scanned by the data node that is its primary, which
/// writes the rows to its own data file (`ldm::backup` in the data node):
/// every fragment of a table at once, in rounds of one `BackupFragReq`
/// per fragment, paced by the rows the rounds wrote.
#[allow(clippy::too_many_arguments)]
fn scan_all(
    options: &TakeOptions<'_>,
    session: &Session,
    tables: &[Backed],
    marker: &Arc<Table>,
    first_rx: mpsc::Receiver<u64>,
    abort: &AtomicBool,
    log_records: &AtomicU64,
    status: &mut Json,
    logging: bool,
) -> Result<(Vec<Vec<DataFile>>, u64), String> {
    if logging {
        status["phase"] = json!("waiting for the change stream");
        write_status(&options.dir, status)?;
        // Every commit of this epoch or below has ended: the scans see it.
        match first_rx.recv_timeout(Duration::from_millis(BACKUP_EPOCH_WAIT_MS)) {
            Ok(_) => {}
            // The log thread failed: its error says why.
            Err(mpsc::RecvTimeoutError::Disconnected) => return Err(SCANS_STOPPED.to_owned()),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                return Err(format!(
                    "no complete epoch from the change stream in {BACKUP_EPOCH_WAIT_MS} ms"
                ))
            }
        }
    }
    status["phase"] = json!("scanning");
    // The data nodes write where this process does: the same path, on
    // their own hosts.
    let dir = std::fs::canonicalize(&options.dir)
        .map_err(|e| format!("the backup directory {}: {e}", options.dir.display()))?;
    let backup_id = u32::try_from(options.id)
        .map_err(|_| format!("backup id {} is above {}", options.id, u32::MAX))?;
    let mut pace = Pace {
        per_sec: options.rows_per_sec,
        start: Instant::now(),
        rows: 0,
    };
    let mut last_status = Instant::now();
    let abort_file = options.dir.join(ABORT_FILE);
    let mut files = Vec::with_capacity(tables.len());
    let mut total_rows = 0u64;
    for backed in tables {
        status["table"] = json!(backed.name);
        write_status(&options.dir, status)?;
        let table = &backed.table;
        let mut scans = Vec::new();
        for partition in 0..table.def().partitions {
            let node = session.primary_node(table, partition).ok_or_else(|| {
                format!(
                    "table {} partition {partition}: no replica's data node is connected",
                    backed.name
                )
            })?;
            let file = format!("T{}.P{partition}.data", table.id());
            let path = dir.join(&file).display().to_string();
            scans.push(FragScan {
                partition,
                node,
                file,
                path,
                progress: BackupFragProgress {
                    rows: 0,
                    bytes: 0,
                    done: false,
                },
                started: false,
            });
        }
        let result = loop {
            let rows_max = pace.rows_per_step(scans.len());
            let requests: Vec<BackupFragRequest<'_>> = scans
                .iter()
                .filter(|f| !f.progress.done)
                .map(|f| BackupFragRequest {
                    backup_id,
                    table,
                    partition: f.partition,
                    node: f.node,
                    rows_max,
                    flags: if f.started { 0 } else { backup_frag::START },
                    path: &f.path,
                })
                .collect();
            if requests.is_empty() {
                break Ok(());
            }
            let answers = session.backup_fragments(&requests);
            let mut written = 0;
            let mut failed = None;
            let waiting = scans.iter_mut().filter(|f| !f.progress.done);
            for (f, answer) in waiting.zip(answers) {
                f.started = true;
                match answer {
                    Ok(progress) => {
                        written += progress.rows - f.progress.rows;
                        f.progress = progress;
                    }
                    Err(e) => {
                        // Not to be closed: the node closed it.
                        f.progress.done = true;
                        failed.get_or_insert_with(|| {
                            format!(
                                "back up {} partition {} on data node {}: {e}",
                                backed.name, f.partition, f.node
                            )
                        });
                    }
                }
            }
            if let Some(e) = failed {
                break Err(e);
            }
            total_rows += written;
            pace.rows(written);
            if abort.load(Ordering::Relaxed) || abort_file.exists() {
                break Err(abort_reason(&abort_file));
            }
            if last_status.elapsed() > Duration::from_millis(STATUS_INTERVAL_MS) {
                status["rows"] = json!(total_rows);
                status["log_records"] = json!(log_records.load(Ordering::Relaxed));
                write_status(&options.dir, status)?;
                last_status = Instant::now();
            }
        };
        if let Err(e) = result {
            close_scans(session, backup_id, table, &scans);
            return Err(e);
        }
        let done = scans.into_iter().map(|f| DataFile {
            partition: f.partition,
            node: f.node,
            file: f.file,
            rows: f.progress.rows,
            bytes: f.progress.bytes,
        });
        files.push(done.collect());
    }
    if abort.load(Ordering::Relaxed) || abort_file.exists() {
        return Err(abort_reason(&abort_file));
    }
    status["rows"] = json!(total_rows);
    status["phase"] = json!("logging to the stop epoch");
    write_status(&options.dir, status)?;
    let stop = commit_marker(session, marker, options.id)?;
    status["stop_epoch"] = json!(stop.to_string());
    write_status(&options.dir, status)?;
    Ok((files, stop.get()))
}

/// Ends the scans still open on the data nodes (the backup failed): best
/// effort, as a node that does not hear it closes them once idle.
fn close_scans(session: &Session, backup_id: u32, table: &Table, scans: &[FragScan]) {
    let requests: Vec<BackupFragRequest<'_>> = scans
        .iter()
        .filter(|f| f.started && !f.progress.done)
        .map(|f| BackupFragRequest {
            backup_id,
            table,
            partition: f.partition,
            node: f.node,
            rows_max: 0,
            flags: backup_frag::CLOSE,
            path: &f.path,
        })
        .collect();
    for answer in session.backup_fragments(&requests) {
        if let Err(e) = answer {
            tracing::info!(%e, "closing a backup scan");
        }
    }
}

fn abort_reason(abort_file: &Path) -> String {
    if abort_file.exists() {
        "aborted (abort-backup)".to_owned()
    } else {
        SCANS_STOPPED.to_owned()
    }
}

/// Commits the backup's marker row: its epoch is the stop epoch.
fn commit_marker(session: &Session, marker: &Arc<Table>, id: u64) -> Result<Epoch, String> {
    let tx = session.begin().map_err(|e| e.to_string())?;
    tx.write(
        marker,
        &[("id", Value::UInt(id)), ("stop_epoch", Value::UInt(0))],
    )
    .map_err(|e| format!("the stop marker: {e}"))?;
    let outcome = tx
        .execute(ExecMode::Commit)
        .map_err(|e| format!("commit the stop marker: {e}"))?;
    outcome
        .epoch
        .ok_or_else(|| "the stop marker committed without an epoch".to_owned())
}

/// Writes the manifest: the backup is complete.
fn finish(
    options: &TakeOptions<'_>,
    tables: &[Backed],
    files: Vec<Vec<DataFile>>,
    stop: u64,
    log: LogSummary,
) -> Result<Json, String> {
    let mut rows = 0;
    let mut bytes = log.bytes;
    let mut listed: Vec<Json> = Vec::new();
    for (t, table_files) in tables.iter().zip(&files) {
        let table_rows: u64 = table_files.iter().map(|f| f.rows).sum();
        let table_bytes: u64 = table_files.iter().map(|f| f.bytes).sum();
        rows += table_rows;
        bytes += table_bytes;
        let listed_files: Vec<Json> = table_files
            .iter()
            .map(|f| {
                json!({
                    "file": f.file,
                    "partition": f.partition,
                    "node": f.node.get(),
                    "rows": f.rows,
                    "bytes": f.bytes,
                })
            })
            .collect();
        let mut entry = json!({
            "name": t.name,
            "id": t.table.id(),
            "version": t.table.version(),
            "schema": format::hex(&t.table.def().to_bytes()),
            "files": listed_files,
            "rows": table_rows,
            "bytes": table_bytes,
        });
        match &t.parts_of {
            None => {
                entry["blob_parts"] = json!([]);
                listed.push(entry);
            }
            // After its base table (the list's order), under it.
            Some((base, column)) => {
                assert!(
                    *base < listed.len(),
                    "parts table {} listed before its base table",
                    t.name
                );
                entry["column"] = json!(column);
                let parts = listed[*base]["blob_parts"]
                    .as_array_mut()
                    .expect("a base table's entry lists its parts");
                parts.push(entry);
            }
        }
    }
    let tables = listed;
    format::sync_dir(&options.dir)?;
    let manifest = json!({
        "format": format::MANIFEST_FORMAT,
        "id": options.id,
        "start_epoch": log.start_epoch,
        "stop_epoch": stop,
        "stop_epoch_text": Epoch::from_u64(stop).to_string(),
        "tables": tables,
        "log": {
            "file": "log",
            "records": log.records,
            "bytes": log.bytes,
            "epochs": log.epochs,
        },
        "rows": rows,
        "bytes": bytes,
    });
    format::write_manifest(&options.dir, &manifest)?;
    Ok(manifest)
}

/// Creates `BACKUP-<id>/` under `dir` with the next free id.
pub fn create_backup_dir(dir: &Path) -> Result<(u64, PathBuf), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    let mut id = super::backup_ids(dir)?.last().copied().unwrap_or(0) + 1;
    loop {
        let path = backup_dir(dir, id);
        match std::fs::create_dir(&path) {
            Ok(()) => {
                format::sync_dir(dir)?;
                return Ok((id, path));
            }
            // Another backup took it: the next one.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => id += 1,
            Err(e) => return Err(format!("create {}: {e}", path.display())),
        }
    }
}
