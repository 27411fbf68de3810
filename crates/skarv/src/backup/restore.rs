//! `skarv restore` (NDB's `ndb_restore`): checks every file of a backup,
//! then writes its rows through the native client, batched, from several
//! sessions at once; the target hashes each row to its own partitions, so
//! any cluster size will do.
//!
//! A row the log changed is written once, with its last image up to the
//! stop epoch (or deleted); the others come from the data files. So the
//! target ends at the backup's stop epoch whatever order the batches
//! commit in.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use schema::{KeyEncoder, RowLayout};
use serde_json::Value as Json;
use skarv_client::schema_types::TableDef;
use skarv_client::{Cluster, Epoch, ExecMode, Op, Session, Table, Value};

use super::format::{self, BlockReader, Records};
use sql::engine::catalog::{
    DATABASES_TABLE, DEFAULT_CHARSET, DEFAULT_COLLATION, SEQUENCES_TABLE, SYSTEM_DB,
};
use storage::backup_file::{LOG_DELETE, LOG_WRITE};

/// Rows per restore transaction unless `--batch` says otherwise.
pub const RESTORE_BATCH_ROWS_DEFAULT: usize = 256;
/// Transactions in flight (one session each) unless `--parallel` says
/// otherwise.
pub const RESTORE_PARALLEL_DEFAULT: usize = 4;
/// Most sessions a restore opens.
pub const RESTORE_PARALLEL_MAX: usize = 64;
/// Most rows in one restore transaction (the TC's operation limits).
pub const RESTORE_BATCH_ROWS_MAX: usize = 4096;
/// Tries of a batch that fails with a temporary error (overload, a node
/// restarting) before the restore gives up.
const RESTORE_TRIES_MAX: u32 = 10;
/// Progress lines at most this often.
const PROGRESS_INTERVAL_MS: u64 = 1_000;

/// What `skarv restore` was asked to do.
pub struct RestoreOptions {
    pub connect: String,
    pub backup: PathBuf,
    /// Tables to restore, as the backup names them (empty: all).
    pub tables: Vec<String>,
    /// Database renames, `from` → `to`.
    pub rename_db: Vec<(String, String)>,
    pub restore_meta: bool,
    pub parallel: usize,
    pub batch_rows: usize,
}

/// A table of the backup.
struct Backed {
    name: String,
    def: TableDef,
    layout: RowLayout,
    key: KeyEncoder,
    /// Its data files (one per fragment from format 3 on, written by the
    /// data node that was the fragment's primary; one per table before):
    /// name, rows, bytes.
    files: Vec<(String, u64, u64)>,
    /// Its id in the backed-up cluster: a data node's log names it so.
    id: u64,
    /// For the parts table of a BLOB/TEXT column: its base table's index
    /// in the list, and the column's name. Restored into the target base
    /// table's own parts table (`Table::blob_parts_table`), whatever its id.
    parts_of: Option<(usize, String)>,
}

/// What a restore did.
pub struct Restored {
    pub tables: usize,
    pub rows_written: u64,
    pub rows_deleted: u64,
    pub stop_epoch: Epoch,
}

/// A row's state at the stop epoch, as the log left it.
enum Final {
    /// Its whole last image.
    Write(Vec<Value>),
    /// Deleted: its primary key.
    Delete(Vec<Value>),
}

/// The rows the log changed, per table, by encoded primary key.
type LogState = Vec<HashMap<Vec<u8>, Final>>;

fn json_u64(manifest: &Json, what: &str, value: &Json) -> Result<u64, String> {
    value.as_u64().ok_or_else(|| {
        format!(
            "the manifest has no {what} ({manifest_id})",
            manifest_id = manifest["id"]
        )
    })
}

fn renamed(name: &str, renames: &[(String, String)]) -> String {
    match name.split_once("/def/") {
        Some((db, rest)) => format!("{}/def/{rest}", renamed_db(db, renames)),
        None => name.to_owned(),
    }
}

/// Database `db` as `--rename-db` names it in the target.
fn renamed_db<'a>(db: &'a str, renames: &'a [(String, String)]) -> &'a str {
    renames
        .iter()
        .find(|(from, _)| from == db)
        .map_or(db, |(_, to)| to.as_str())
}

fn decode_values(layout: &RowLayout, fixed: &[u8], var: &[u8]) -> Vec<Value> {
    (0..layout.column_count())
        .map(|c| layout.decode_column(fixed, var, c).to_value())
        .collect()
}

/// The column whose values a table's auto-increment sequence hands out:
/// its hidden primary key `$PK`, or its AUTO_INCREMENT column (in its SQL
/// metadata); `None` for a table without one, or made outside SQL.
fn auto_increment_column(def: &TableDef) -> Option<(usize, u64)> {
    // A table made through the native API has no sequence: its writers
    // fill every column, its hidden key too.
    if def.sql_meta.is_empty() {
        return None;
    }
    if def.has_hidden_primary_key() {
        return def
            .columns
            .iter()
            .position(|c| c.name == schema::HIDDEN_PRIMARY_KEY_COLUMN)
            .map(|c| (c, 1));
    }
    let meta = sql::engine::catalog::meta::TableMeta::decode(&def.sql_meta).ok()?;
    meta.columns
        .iter()
        .find(|c| c.auto_increment)
        .map(|c| (usize::from(c.native), meta.auto_increment_start))
}

/// An auto-increment value as the sequence counts it (negative and
/// non-integer values take none of its values).
fn sequence_value(value: &Value) -> Option<u64> {
    match value {
        Value::UInt(v) => Some(*v),
        Value::Int(v) => u64::try_from(*v).ok(),
        _ => None,
    }
}

/// The source's auto-increment sequences (`mysql.skarv_sequences`, keyed
/// by the source's table ids) as the backup holds them at its stop epoch.
fn source_sequences(
    dir: &std::path::Path,
    all: &[Backed],
    log: &[HashMap<Vec<u8>, Final>],
) -> Result<HashMap<u64, u64>, String> {
    let mut next = HashMap::new();
    source_rows(dir, all, log, SEQUENCES_TABLE, |values| {
        if let (Some(Value::UInt(id)), Some(Value::UInt(n))) = (values.first(), values.get(1)) {
            next.insert(*id, *n);
        }
    })?;
    Ok(next)
}

/// The SQL node's databases as the backup holds them at its stop epoch:
/// name → (character set, collation).
fn source_databases(
    dir: &std::path::Path,
    all: &[Backed],
    log: &[HashMap<Vec<u8>, Final>],
) -> Result<HashMap<String, (String, String)>, String> {
    let mut databases = HashMap::new();
    source_rows(dir, all, log, DATABASES_TABLE, |values| {
        if let [Value::String(name), Value::String(charset), Value::String(collation), ..] = values
        {
            databases.insert(name.clone(), (charset.clone(), collation.clone()));
        }
    })?;
    Ok(databases)
}

/// Every row of the backup's table `name` (if it has one) as it stood at
/// the stop epoch: the data file's rows the log did not change, then the
/// log's last images.
fn source_rows(
    dir: &std::path::Path,
    all: &[Backed],
    log: &[HashMap<Vec<u8>, Final>],
    name: &str,
    mut put: impl FnMut(&[Value]),
) -> Result<(), String> {
    let Some(index) = all.iter().position(|t| t.name == name) else {
        return Ok(());
    };
    let t = &all[index];
    let mut key = Vec::new();
    read_data(dir, t, |fixed, var| {
        key.clear();
        t.key.encode_from_row(&t.layout, fixed, var, &mut key);
        if !log[index].contains_key(&key) {
            put(&decode_values(&t.layout, fixed, var));
        }
        Ok(())
    })?;
    for image in log[index].values() {
        if let Final::Write(values) = image {
            put(values);
        }
    }
    Ok(())
}

/// Registers the restored tables' databases with the target's SQL nodes
/// (rows of `DATABASES_TABLE`, renamed as the tables are): every database
/// of the backup on a whole restore, those of the restored tables with
/// `--tables`. Copying the backup's rows as they are would register the
/// source's names under `--rename-db` and none of them under `--tables`,
/// and `SHOW DATABASES` would not list what was restored. A database the
/// target has keeps its own character set. The backup's own is used for
/// the others (utf8mb4 when the backup has no row for it). Without the
/// table in the target (no SQL node ever ran there) it is made from the
/// backup's definition under `--restore-meta`; else there is nothing to
/// register: the first SQL node makes the table, empty, and the databases
/// must be created there.
fn register_databases(
    session: &Session,
    options: &RestoreOptions,
    all: &[Backed],
    selected: &[bool],
    source: &HashMap<String, (String, String)>,
) -> Result<Vec<String>, String> {
    let mut names: Vec<&str> = all
        .iter()
        .zip(selected)
        .filter(|(t, s)| **s && t.parts_of.is_none())
        .filter_map(|(t, _)| t.name.split_once("/def/").map(|(db, _)| db))
        .collect();
    if options.tables.is_empty() {
        names.extend(source.keys().map(String::as_str));
    }
    names.retain(|db| *db != SYSTEM_DB);
    names.sort_unstable();
    names.dedup();
    if names.is_empty() {
        return Ok(Vec::new());
    }
    let table = match session.table(DATABASES_TABLE) {
        Ok(table) => table,
        Err(_) if options.restore_meta => {
            let Some(backed) = all.iter().find(|t| t.name == DATABASES_TABLE) else {
                return Ok(Vec::new());
            };
            let mut def = backed.def.clone();
            def.id = 0;
            def.partitions = 0;
            session
                .create_table(&def)
                .map_err(|e| format!("create table {DATABASES_TABLE} (--restore-meta): {e}"))?;
            session
                .table(DATABASES_TABLE)
                .map_err(|e| format!("{DATABASES_TABLE}: {e}"))?
        }
        Err(_) => return Ok(Vec::new()),
    };
    let mut registered = Vec::new();
    for db in names {
        let to = renamed_db(db, &options.rename_db);
        let (charset, collation) = source
            .get(db)
            .cloned()
            .unwrap_or_else(|| (DEFAULT_CHARSET.to_owned(), DEFAULT_COLLATION.to_owned()));
        let tx = session.begin().map_err(|e| e.to_string())?;
        tx.insert(
            &table,
            &[
                ("name", Value::String(to.to_owned())),
                ("charset", Value::String(charset)),
                ("collation", Value::String(collation)),
            ],
        )
        .map_err(|e| format!("database {to}: {e}"))?;
        match tx.execute(ExecMode::Commit) {
            Ok(_) => registered.push(to.to_owned()),
            Err(e) if e.code == skarv_client::codes::DUPLICATE_KEY => {}
            Err(e) => return Err(format!("register database {to} in {DATABASES_TABLE}: {e}")),
        }
    }
    Ok(registered)
}

/// One table's entry of the manifest.
fn backed_table(
    manifest: &Json,
    t: &Json,
    parts_of: Option<(usize, String)>,
) -> Result<Backed, String> {
    let name = t["name"]
        .as_str()
        .ok_or("a table without a name")?
        .to_owned();
    let schema = t["schema"]
        .as_str()
        .and_then(format::unhex)
        .ok_or_else(|| format!("table {name}: no schema in the manifest"))?;
    let def = TableDef::decode(&schema)
        .map_err(|e| format!("table {name}: its schema in the manifest: {e}"))?;
    let layout = RowLayout::new(&def);
    let key = KeyEncoder::primary_key(&def);
    let file_of = |f: &Json| -> Result<(String, u64, u64), String> {
        let file = f["file"]
            .as_str()
            .ok_or_else(|| format!("table {name}: a data file without a name"))?;
        Ok((
            file.to_owned(),
            json_u64(manifest, "row count", &f["rows"])?,
            json_u64(manifest, "byte count", &f["bytes"])?,
        ))
    };
    let files = match t["files"].as_array() {
        Some(files) => files.iter().map(file_of).collect::<Result<Vec<_>, _>>()?,
        // Format 2 and before: the table's one file.
        None => vec![file_of(t)?],
    };
    Ok(Backed {
        files,
        id: json_u64(manifest, "table id", &t["id"])?,
        name,
        def,
        layout,
        key,
        parts_of,
    })
}

/// Reads the manifest's tables, then the parts tables of their BLOB/TEXT
/// columns (the order of the log's table indexes), checking that those
/// asked for are there.
fn backed_tables(manifest: &Json, wanted: &[String]) -> Result<Vec<Backed>, String> {
    let list = manifest["tables"]
        .as_array()
        .ok_or("the manifest lists no tables")?;
    let mut tables = Vec::new();
    for t in list {
        tables.push(backed_table(manifest, t, None)?);
    }
    for (base, t) in list.iter().enumerate() {
        // Format 1 has none.
        for parts in t["blob_parts"].as_array().into_iter().flatten() {
            let column = parts["column"]
                .as_str()
                .ok_or_else(|| {
                    format!(
                        "table {}: a parts table without its column",
                        tables[base].name
                    )
                })?
                .to_owned();
            let is_blob = tables[base]
                .def
                .columns
                .iter()
                .any(|c| c.name == column && c.ty.is_blob());
            if !is_blob {
                return Err(format!(
                    "table {}: the manifest has a parts table of {column}, which is not a \
                     BLOB/TEXT column of it",
                    tables[base].name
                ));
            }
            tables.push(backed_table(manifest, parts, Some((base, column)))?);
        }
    }
    for w in wanted {
        let name = super::cluster_name(w);
        if !tables
            .iter()
            .any(|t| t.name == name && t.parts_of.is_none())
        {
            let all: Vec<&str> = tables
                .iter()
                .filter(|t| t.parts_of.is_none())
                .map(|t| t.name.as_str())
                .collect();
            return Err(format!(
                "the backup holds no table {w} (it holds: {})",
                all.join(", ")
            ));
        }
    }
    Ok(tables)
}

/// Reads a table's data files whole, handing each row's image to `row`;
/// checks the manifest's byte and row counts of each.
fn read_data(
    dir: &std::path::Path,
    t: &Backed,
    mut row: impl FnMut(&[u8], &[u8]) -> Result<(), String>,
) -> Result<(), String> {
    for (file, want_rows, want_bytes) in &t.files {
        let path = dir.join(file);
        let mut reader = BlockReader::open(&path, *want_bytes)?;
        let file = reader.describe();
        let mut rows = 0u64;
        while let Some(block) = reader.next_block()? {
            let mut records = Records::new(block);
            while !records.is_empty() {
                let (fixed, var) = records
                    .image()
                    .ok_or_else(|| format!("{}: a record cut short", file))?;
                t.layout
                    .validate_row(fixed, var)
                    .map_err(|e| format!("{}: a row that does not fit {}: {e}", file, t.name))?;
                row(fixed, var)?;
                rows += 1;
            }
        }
        if rows != *want_rows {
            return Err(format!(
                "{}: {rows} rows, the manifest says {want_rows}",
                path.display()
            ));
        }
    }
    Ok(())
}

/// Reads the log whole: the last image of every row it changed. From
/// format 3 on the log is one file per LDM instance of each data node
/// (`logs`), each with its primaries' changes in commit order, tables
/// named by id; a row is in one fragment, so in one file. Before, one
/// file in epoch order, tables named by their index in the manifest.
fn read_log(
    dir: &std::path::Path,
    manifest: &Json,
    tables: &[Backed],
    stop: u64,
) -> Result<LogState, String> {
    let mut state: LogState = tables.iter().map(|_| HashMap::new()).collect();
    let by_id: HashMap<u64, usize> = tables.iter().enumerate().map(|(i, t)| (t.id, i)).collect();
    match manifest["logs"].as_array() {
        Some(logs) => {
            for log in logs {
                let node_table = |id: u32| by_id.get(&u64::from(id)).copied();
                read_log_file(
                    dir, manifest, log, tables, stop, node_table, false, &mut state,
                )?;
            }
        }
        None => {
            let index = |i: u32| Some(i as usize).filter(|i| *i < tables.len());
            read_log_file(
                dir,
                manifest,
                &manifest["log"],
                tables,
                stop,
                index,
                true,
                &mut state,
            )?;
        }
    }
    Ok(state)
}

/// Reads one log file into `state`; `table_of` maps a record's table to
/// its index in `tables`; `ordered`: the file is in epoch order (checked).
#[allow(clippy::too_many_arguments)]
fn read_log_file(
    dir: &std::path::Path,
    manifest: &Json,
    log: &Json,
    tables: &[Backed],
    stop: u64,
    table_of: impl Fn(u32) -> Option<usize>,
    ordered: bool,
    state: &mut LogState,
) -> Result<(), String> {
    let path = dir.join(
        log["file"]
            .as_str()
            .ok_or("the manifest names no log file")?,
    );
    let bytes = json_u64(manifest, "log byte count", &log["bytes"])?;
    let expected = json_u64(manifest, "log record count", &log["records"])?;
    let mut reader = BlockReader::open(&path, bytes)?;
    let file = reader.describe();
    let mut records_read = 0u64;
    let mut last_epoch = 0u64;
    let mut key = Vec::new();
    while let Some(block) = reader.next_block()? {
        let mut records = Records::new(block);
        while !records.is_empty() {
            let cut = || format!("{}: a record cut short", file);
            let epoch = records.u64().ok_or_else(cut)?;
            let table = records.u32().ok_or_else(cut)?;
            let kind = records.u32().ok_or_else(cut)?;
            let (fixed, var) = records.image().ok_or_else(cut)?;
            records_read += 1;
            // Each row's changes are in commit order: the last one read
            // at or below the stop is the row's state there.
            if ordered && epoch < last_epoch {
                return Err(format!(
                    "{}: a change of epoch {} after {}",
                    file,
                    Epoch::from_u64(epoch),
                    Epoch::from_u64(last_epoch),
                ));
            }
            last_epoch = last_epoch.max(epoch);
            // Logged before the backup learnt its stop: after its point,
            // so not restored.
            if epoch > stop {
                continue;
            }
            let index =
                table_of(table).ok_or_else(|| format!("{}: a change of table {table}", file))?;
            let t = &tables[index];
            t.layout
                .validate_row(fixed, var)
                .map_err(|e| format!("{}: a row that does not fit {}: {e}", file, t.name))?;
            key.clear();
            t.key.encode_from_row(&t.layout, fixed, var, &mut key);
            let values = decode_values(&t.layout, fixed, var);
            let image = match kind {
                LOG_WRITE => Final::Write(values),
                LOG_DELETE => Final::Delete(
                    t.def
                        .primary_key
                        .iter()
                        .map(|c| values[*c].clone())
                        .collect(),
                ),
                other => {
                    return Err(format!("{}: a record of kind {other}", file));
                }
            };
            state[index].insert(key.clone(), image);
        }
    }
    if records_read != expected {
        return Err(format!(
            "{}: {records_read} records, the manifest says {expected}",
            path.display()
        ));
    }
    Ok(())
}

/// One transaction's worth of work.
struct Batch {
    table: Arc<Table>,
    columns: Arc<Vec<String>>,
    writes: Vec<Vec<Value>>,
    /// Primary keys of rows to delete (absent rows are fine).
    deletes: Vec<Vec<Value>>,
}

/// Commits one batch, retrying temporary errors.
fn apply(session: &Session, batch: &Batch) -> Result<(), String> {
    let mut tries = 0;
    loop {
        tries += 1;
        let result = (|| {
            let tx = session.begin()?;
            // One list for every row of the batch.
            let mut pairs: Vec<(&str, Value)> = Vec::with_capacity(batch.columns.len());
            for row in &batch.writes {
                pairs.clear();
                pairs.extend(
                    batch
                        .columns
                        .iter()
                        .map(String::as_str)
                        .zip(row.iter().cloned()),
                );
                // A BLOB/TEXT value is its head here: its parts are rows
                // of the parts table, restored as such.
                tx.define(Op::write(&batch.table, &pairs).blob_heads())?;
            }
            for key in &batch.deletes {
                tx.define(Op::delete(&batch.table, key).ignore_error().blob_heads())?;
            }
            tx.execute(ExecMode::Commit)
        })();
        match result {
            Ok(_) => return Ok(()),
            Err(e) if e.is_temporary() && tries < RESTORE_TRIES_MAX => {
                // Back off: the target is overloaded or a node restarts.
                std::thread::sleep(Duration::from_millis(50 << tries.min(6)));
            }
            Err(e) => {
                return Err(format!(
                    "write {} rows of {}: {e}",
                    batch.writes.len() + batch.deletes.len(),
                    batch.table.name()
                ))
            }
        }
    }
}

/// Runs a restore (see the module doc).
pub fn restore(options: &RestoreOptions) -> Result<Restored, String> {
    let parallel = options.parallel.clamp(1, RESTORE_PARALLEL_MAX);
    let batch_rows = options.batch_rows.clamp(1, RESTORE_BATCH_ROWS_MAX);
    let dir = &options.backup;
    let manifest = format::read_manifest(dir)?;
    let stop = json_u64(&manifest, "stop epoch", &manifest["stop_epoch"])?;
    let all = backed_tables(&manifest, &options.tables)?;
    // The source's sequence rows are keyed by the source's table ids, which
    // name other tables (or none) in the target: they are never copied,
    // but carried over to the restored tables' own ids (below).
    let mut selected: Vec<bool> = all
        .iter()
        .map(|t| {
            t.parts_of.is_none()
                && t.name != SEQUENCES_TABLE
                && t.name != DATABASES_TABLE
                && (options.tables.is_empty()
                    || options
                        .tables
                        .iter()
                        .any(|w| super::cluster_name(w) == t.name))
        })
        .collect();
    // A parts table goes with its base table (which comes first).
    for (i, t) in all.iter().enumerate() {
        if let Some((base, _)) = &t.parts_of {
            selected[i] = selected[*base];
        }
    }
    // Every file is checked before anything is written.
    for (t, _) in all.iter().zip(&selected).filter(|(_, s)| **s) {
        read_data(dir, t, |_, _| Ok(()))?;
    }
    let mut log = read_log(dir, &manifest, &all, stop)?;
    let sequences = source_sequences(dir, &all, &log)?;
    let databases = source_databases(dir, &all, &log)?;
    eprintln!(
        "restore: backup {} checked: {} tables, stop epoch {}",
        manifest["id"],
        all.len(),
        Epoch::from_u64(stop)
    );

    let cluster = Cluster::connect(&options.connect)
        .map_err(|e| format!("connect to {}: {e}", options.connect))?;
    let session = cluster.session().map_err(|e| e.to_string())?;
    // The target of each selected table, by its index in `all`.
    let mut target_of: HashMap<usize, Arc<Table>> = HashMap::new();
    let mut targets = Vec::new();
    for (i, (t, _)) in all
        .iter()
        .zip(&selected)
        .enumerate()
        .filter(|(_, (_, s))| **s)
    {
        if let Some((base, column)) = &t.parts_of {
            let base_table = &target_of[base];
            let parts = Arc::clone(base_table.blob_parts_table(column).ok_or_else(|| {
                format!(
                    "target table {} has no BLOB/TEXT column {column}, which the backup's has",
                    base_table.name()
                )
            })?);
            target_of.insert(i, Arc::clone(&parts));
            targets.push(parts);
            continue;
        }
        let name = renamed(&t.name, &options.rename_db);
        if options.restore_meta {
            let mut def = t.def.clone();
            def.name = name.clone();
            def.id = 0;
            // The target's own default: rows are hashed to its partitions.
            def.partitions = 0;
            session
                .create_table(&def)
                .map_err(|e| format!("create table {name} (--restore-meta): {e}"))?;
        }
        let table = session.table(&name).map_err(|e| {
            format!("target table {name}: {e} (create it first, or pass --restore-meta)")
        })?;
        for column in &t.def.columns {
            if table.column(&column.name).is_none() {
                return Err(format!(
                    "target table {name} has no column {} that the backup holds",
                    column.name
                ));
            }
        }
        target_of.insert(i, Arc::clone(&table));
        targets.push(table);
    }

    // Each restored table with an auto-increment sequence: its source id,
    // its target, the sequence's first value and the largest value restored.
    let mut sequenced: Vec<(u32, Arc<Table>, u64, Option<u64>)> = Vec::new();
    let written = AtomicU64::new(0);
    let deleted = AtomicU64::new(0);
    let failed = AtomicBool::new(false);
    let first_error: Mutex<Option<String>> = Mutex::new(None);
    let (batch_tx, batch_rx) = mpsc::sync_channel::<Batch>(parallel * 2);
    let batch_rx = Mutex::new(batch_rx);
    let started = Instant::now();
    let produced: Result<(), String> = std::thread::scope(|scope| {
        // Owned here: dropped when the producer ends, which ends the writers.
        let batch_tx = batch_tx;
        for _ in 0..parallel {
            let (cluster, batch_rx) = (&cluster, &batch_rx);
            let (written, deleted, failed, first_error) =
                (&written, &deleted, &failed, &first_error);
            scope.spawn(move || {
                let session = match cluster.session() {
                    Ok(s) => s,
                    Err(e) => {
                        failed.store(true, Ordering::Relaxed);
                        first_error.lock().unwrap().get_or_insert(e.to_string());
                        return;
                    }
                };
                loop {
                    let next = batch_rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
                    let Ok(batch) = next else { return };
                    if failed.load(Ordering::Relaxed) {
                        continue;
                    }
                    match apply(&session, &batch) {
                        Ok(()) => {
                            written.fetch_add(batch.writes.len() as u64, Ordering::Relaxed);
                            deleted.fetch_add(batch.deletes.len() as u64, Ordering::Relaxed);
                        }
                        Err(e) => {
                            failed.store(true, Ordering::Relaxed);
                            first_error
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .get_or_insert(e);
                        }
                    }
                }
            });
        }
        let mut last_progress = Instant::now();
        let mut target = targets.iter();
        let mut key = Vec::new();
        for (index, t) in all.iter().enumerate() {
            if !selected[index] {
                continue;
            }
            let table = target.next().expect("a target per selected table").clone();
            let columns = Arc::new(t.def.columns.iter().map(|c| c.name.clone()).collect());
            let new_batch = || Batch {
                table: table.clone(),
                columns: Arc::clone(&columns),
                writes: Vec::with_capacity(batch_rows),
                deletes: Vec::new(),
            };
            let mut batch = new_batch();
            let auto = auto_increment_column(&t.def);
            let mut largest: Option<u64> = None;
            let mut note = |values: &[Value]| {
                if let Some(v) = auto.and_then(|(c, _)| sequence_value(&values[c])) {
                    largest = Some(largest.map_or(v, |l| l.max(v)));
                }
            };
            let changed = &mut log[index];
            let mut send = |batch: &mut Batch, force: bool| -> Result<(), String> {
                if failed.load(Ordering::Relaxed) {
                    return Err("a batch failed".to_owned());
                }
                if force || batch.writes.len() + batch.deletes.len() >= batch_rows {
                    let full = std::mem::replace(batch, new_batch());
                    if !full.writes.is_empty() || !full.deletes.is_empty() {
                        batch_tx
                            .send(full)
                            .map_err(|_| "the writers ended".to_owned())?;
                    }
                }
                if last_progress.elapsed() > Duration::from_millis(PROGRESS_INTERVAL_MS) {
                    eprintln!(
                        "restore: {} rows written, {} deleted ({})",
                        written.load(Ordering::Relaxed),
                        deleted.load(Ordering::Relaxed),
                        t.name
                    );
                    last_progress = Instant::now();
                }
                Ok(())
            };
            read_data(dir, t, |fixed, var| {
                key.clear();
                t.key.encode_from_row(&t.layout, fixed, var, &mut key);
                if changed.contains_key(&key) {
                    return Ok(());
                }
                let values = decode_values(&t.layout, fixed, var);
                note(&values);
                batch.writes.push(values);
                send(&mut batch, false)
            })?;
            for (_, image) in changed.drain() {
                match image {
                    Final::Write(values) => {
                        note(&values);
                        batch.writes.push(values);
                    }
                    Final::Delete(key) => batch.deletes.push(key),
                }
                send(&mut batch, false)?;
            }
            send(&mut batch, true)?;
            if let Some((_, start)) = auto {
                sequenced.push((t.def.id, table.clone(), start, largest));
            }
        }
        Ok(())
    });
    let error = first_error.into_inner().unwrap_or_else(|p| p.into_inner());
    let written = written.load(Ordering::Relaxed);
    if let Some(e) = error.or(produced.err()) {
        return Err(format!(
            "restore failed after writing {written} rows: {e}; the target holds a partial \
             restore of this backup"
        ));
    }
    eprintln!(
        "restore: {written} rows written in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    // Each restored AUTO_INCREMENT column's sequence: at least the
    // source's, past the largest value restored.
    for (source_id, table, start, largest) in &sequenced {
        let source = sequences.get(&u64::from(*source_id)).copied().unwrap_or(0);
        let next = source
            .max(largest.map_or(0, |l| l.saturating_add(1)))
            .max(*start);
        sql::engine::catalog::raise_sequence(&session, table.id(), next).map_err(|e| {
            format!(
                "restore wrote every row but could not set the auto-increment of {}: {e}",
                table.name()
            )
        })?;
    }
    let registered = register_databases(&session, options, &all, &selected, &databases)
        .map_err(|e| format!("restore wrote every row but {e}"))?;
    if !registered.is_empty() {
        eprintln!(
            "restore: databases registered for SQL: {}",
            registered.join(", ")
        );
    }
    Ok(Restored {
        tables: targets
            .iter()
            .filter(|t| !t.name().starts_with('$'))
            .count(),
        rows_written: written,
        rows_deleted: deleted.load(Ordering::Relaxed),
        stop_epoch: Epoch::from_u64(stop),
    })
}
