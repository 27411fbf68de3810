//! Taking a backup (see the module doc of [`super`] for why it is
//! consistent at its stop epoch).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value as Json};
use signal::{backup_frag, backup_log, NodeId};
use skarv_client::schema_types::{Column, ColumnType, TableDef};
use skarv_client::{
    BackupFragProgress, BackupFragRequest, BackupLogRequest, Cluster, Epoch, ExecMode, Session,
    Table, Value,
};

use super::format;
use super::{backup_dir, write_status, ABORT_FILE, MARKER_TABLE};

/// Rows per second the scans read at most unless `--rate-rows` says
/// otherwise: about a tenth of what one 2-CPU sandbox commits under flex
/// updates, so foreground traffic keeps most of the machine (NDB bounds
/// its backup by `MaxDiskWriteSpeed` the same way).
pub const BACKUP_ROWS_PER_SEC_DEFAULT: u64 = 50_000;
/// The fewest rows a fragment's scan writes per round, however low the
/// rate: a request per row would cost more than the rows.
const FRAG_STEP_ROWS_MIN: u64 = 16;
/// The status file is rewritten at most this often.
const STATUS_INTERVAL_MS: u64 = 500;

/// The error of a backup stopped by `abort-backup`.
const ABORTED: &str = "aborted (abort-backup)";

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
/// values as heads (as stored, so the data nodes' files and logs hold
/// them), the parts table holds the rest: each is
/// backed up as the table it is, and a row's head and parts meet again
/// at the stop epoch because the client writes both in one transaction
/// (one epoch).
struct Backed {
    name: String,
    table: Arc<Table>,
    /// For a parts table: its base table's index in the list, and the
    /// BLOB/TEXT column's name.
    parts_of: Option<(usize, String)>,
}

fn backed(name: String, table: Arc<Table>, parts_of: Option<(usize, String)>) -> Backed {
    Backed {
        name,
        table,
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
    // The parts tables after every user table (the manifest lists them
    // under their base tables).
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
    // The data nodes write where this process does: the same path, on
    // their own hosts.
    let dir = std::fs::canonicalize(&options.dir)
        .map_err(|e| format!("the backup directory {}: {e}", options.dir.display()))?;
    let backup_id = u32::try_from(options.id)
        .map_err(|_| format!("backup id {} is above {}", options.id, u32::MAX))?;
    status["phase"] = json!("starting the log");
    write_status(&options.dir, status)?;
    let mut logs = Vec::new();
    let result = start_logs(&session, backup_id, &tables, &dir, &mut logs).and_then(|start| {
        let scope = Scope {
            dir: &dir,
            backup_id,
            logs: &logs,
        };
        let (files, stop) = scan_all(options, &session, &tables, &marker, &scope, status)?;
        status["phase"] = json!("completing the log");
        write_status(&options.dir, status)?;
        let logged = stop_logs(&session, backup_id, &logs, stop)?;
        finish(options, &tables, files, start, stop, &logs, &logged)
    });
    if result.is_err() {
        close_logs(&session, backup_id, &logs);
    }
    result
}

/// Where the data nodes write a backup, and its logs there.
struct Scope<'a> {
    /// The backup's directory, absolute: the same path on every host.
    dir: &'a Path,
    backup_id: u32,
    logs: &'a [NodeLog],
}

/// The backup's log on one LDM instance of one data node.
struct NodeLog {
    node: NodeId,
    instance: u32,
    file: String,
    path: String,
}

/// What one instance's log holds once complete.
struct LoggedFile {
    records: u64,
    bytes: u64,
}

/// Starts the log on every LDM instance of every data node this process
/// is connected to (pushed to `logs` as each is asked, so a failure
/// closes those that started); returns the highest epoch committed on
/// any of them before: every commit after it is logged. A data node
/// that is down writes nothing; if it starts during the backup, the
/// primaries may move and the logs fail.
fn start_logs(
    session: &Session,
    backup_id: u32,
    tables: &[Backed],
    dir: &Path,
    logs: &mut Vec<NodeLog>,
) -> Result<u64, String> {
    let ids: Vec<u32> = tables.iter().map(|t| t.table.id()).collect();
    for node in session.live_data_nodes() {
        for instance in 0..session.ldm_instances() {
            let file = format!("L{}.{instance}.log", node.get());
            let path = dir.join(&file).display().to_string();
            logs.push(NodeLog {
                node,
                instance,
                file,
                path,
            });
        }
    }
    if logs.is_empty() {
        return Err("no data node is connected".to_owned());
    }
    let requests: Vec<BackupLogRequest<'_>> = logs
        .iter()
        .map(|l| BackupLogRequest {
            backup_id,
            node: l.node,
            instance: l.instance,
            flags: backup_log::START,
            stop_epoch: 0,
            tables: &ids,
            path: &l.path,
        })
        .collect();
    let mut start = 0;
    for (l, answer) in logs.iter().zip(session.backup_logs(&requests)) {
        let progress = answer.map_err(|e| {
            format!(
                "start the log on data node {} (LDM instance {}): {e}",
                l.node, l.instance
            )
        })?;
        start = start.max(progress.epoch);
    }
    Ok(start)
}

/// Asks every log how far it is (it fails early with why, e.g. a table
/// altered); returns the records logged in all.
fn poll_logs(session: &Session, backup_id: u32, logs: &[NodeLog]) -> Result<u64, String> {
    let requests = log_requests(backup_id, logs, 0, 0);
    let mut records = 0;
    for (l, answer) in logs.iter().zip(session.backup_logs(&requests)) {
        records += answer.map_err(|e| log_error(l, e))?.records;
    }
    Ok(records)
}

fn log_requests(
    backup_id: u32,
    logs: &[NodeLog],
    flags: u32,
    stop: u64,
) -> Vec<BackupLogRequest<'_>> {
    logs.iter()
        .map(|l| BackupLogRequest {
            backup_id,
            node: l.node,
            instance: l.instance,
            flags,
            stop_epoch: stop,
            tables: &[],
            path: &l.path,
        })
        .collect()
}

fn log_error(l: &NodeLog, e: skarv_client::Error) -> String {
    format!(
        "the log on data node {} (LDM instance {}): {e}",
        l.node, l.instance
    )
}

/// Completes every log at the stop epoch (each answers once the epoch is
/// complete on its node and its file is synced).
fn stop_logs(
    session: &Session,
    backup_id: u32,
    logs: &[NodeLog],
    stop: u64,
) -> Result<Vec<LoggedFile>, String> {
    let requests = log_requests(backup_id, logs, backup_log::STOP, stop);
    logs.iter()
        .zip(session.backup_logs(&requests))
        .map(|(l, answer)| {
            let progress = answer.map_err(|e| log_error(l, e))?;
            if !progress.done {
                return Err(format!(
                    "the log on data node {} (LDM instance {}) answered its stop unfinished",
                    l.node, l.instance
                ));
            }
            Ok(LoggedFile {
                records: progress.records,
                bytes: progress.bytes,
            })
        })
        .collect()
}

/// Ends the logs (the backup failed): best effort, as a node that does
/// not hear it closes a log nobody asks for.
fn close_logs(session: &Session, backup_id: u32, logs: &[NodeLog]) {
    let requests = log_requests(backup_id, logs, backup_log::CLOSE, 0);
    for answer in session.backup_logs(&requests) {
        if let Err(e) = answer {
            tracing::info!(%e, "closing a backup log");
        }
    }
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

/// Scans every table once the logs run, then commits the marker; returns
/// each table's files and the stop epoch.
///
/// Each fragment is scanned by the data node that is its primary, which
/// writes the rows to its own data file (`ldm::backup` in the data node):
/// every fragment of a table at once, in rounds of one `BackupFragReq`
/// per fragment, paced by the rows the rounds wrote. The logs are asked
/// how far they are every status interval: one that failed (a table
/// altered, a data node lost) ends the backup then.
fn scan_all(
    options: &TakeOptions<'_>,
    session: &Session,
    tables: &[Backed],
    marker: &Arc<Table>,
    scope: &Scope<'_>,
    status: &mut Json,
) -> Result<(Vec<Vec<DataFile>>, u64), String> {
    status["phase"] = json!("scanning");
    let Scope {
        dir,
        backup_id,
        logs,
    } = *scope;
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
            if abort_file.exists() {
                break Err(ABORTED.to_owned());
            }
            if last_status.elapsed() > Duration::from_millis(STATUS_INTERVAL_MS) {
                let log_records = match poll_logs(session, backup_id, logs) {
                    Ok(records) => records,
                    Err(e) => break Err(e),
                };
                status["rows"] = json!(total_rows);
                status["log_records"] = json!(log_records);
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
    if abort_file.exists() {
        return Err(ABORTED.to_owned());
    }
    // A log that failed since the last poll fails the backup before its
    // stop marker is committed.
    poll_logs(session, backup_id, logs)?;
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
    start: u64,
    stop: u64,
    logs: &[NodeLog],
    logged: &[LoggedFile],
) -> Result<Json, String> {
    let log_records: u64 = logged.iter().map(|l| l.records).sum();
    let log_bytes: u64 = logged.iter().map(|l| l.bytes).sum();
    let mut rows = 0;
    let mut bytes = log_bytes;
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
        "start_epoch": start,
        "stop_epoch": stop,
        "stop_epoch_text": Epoch::from_u64(stop).to_string(),
        "tables": tables,
        "log": {
            "records": log_records,
            "bytes": log_bytes,
        },
        "logs": logs.iter().zip(logged).map(|(l, f)| json!({
            "file": l.file,
            "node": l.node.get(),
            "instance": l.instance,
            "records": f.records,
            "bytes": f.bytes,
        })).collect::<Vec<_>>(),
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
