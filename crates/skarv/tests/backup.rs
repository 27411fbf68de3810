//! Online backup and restore in real processes (docs/operations.md, issue
//! 23 items 1 and 2).
//!
//! - A 2 × 2 sandbox written by deterministic writers (inserts, updates,
//!   deletes, each commit's epoch taken from its outcome) while a backup
//!   is taken; the backup restored into a fresh 1 × 1 sandbox holds
//!   exactly the rows of the commits at or below the backup's stop epoch;
//!   so does the source cluster, its table dropped and restored.
//! - A table without a key of its own (keyed by the hidden `$PK`) is
//!   backed up and restored with its hidden keys.
//! - A BLOB table whose values change size (NULL, inline only, one part,
//!   several) during the backup: its heads and its parts table are backed
//!   up, and each restored value is the whole value at the stop epoch.
//! - An AUTO_INCREMENT table restored through SQL nodes goes on past its
//!   restored rows (the source's sequence carried over to its new id).
//! - A flipped byte and a truncated file: restore refuses, naming the
//!   file and the offset, and writes nothing.
//! - A data node killed during a backup: the backup fails with a clear
//!   error and leaves no manifest; `backup-status` says failed.
//! - `abort-backup` stops a running background backup; `backup-status`
//!   says aborted.
//! - A backed-up table altered during a backup: the backup fails, naming
//!   the table and the change.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use common::*;
use serde_json::Value as Json;
use skarv_client::schema_types::{Column, ColumnType};
use skarv_client::{Cluster, ExecMode, ScanOptions, Session, Value};

/// `TimeBetweenEpochs` of the source sandbox, in ms: many epochs per
/// backup, so its log holds several.
const EPOCH_INTERVAL_MS: u32 = 20;
/// Rows loaded before the backup.
const KEYS: u64 = 3_000;
/// Writer threads; writer `w` owns the keys `k % WRITERS == w`, so each
/// key's commits are in one thread's order.
const WRITERS: u64 = 2;
/// The backup's scan rate: slow enough that the scans take over a second
/// while the writers commit.
const SCAN_ROWS_PER_SEC: &str = "2000";
/// How long any wait in these tests may take.
const WAIT: Duration = Duration::from_secs(120);

/// Rows of the BLOB table `docs`.
const DOCS: u64 = 40;
/// The lengths a doc's body takes in turn (None: NULL): inline only,
/// exactly the inline head, one byte in a part, several parts.
const DOC_SIZES: [Option<usize>; 6] = [
    None,
    Some(10),
    Some(256),
    Some(257),
    Some(8_256),
    Some(20_000),
];

/// The body of doc `key` at `version`: its length and bytes both change
/// with the version.
fn doc_body(key: u64, version: u64) -> Option<Vec<u8>> {
    let size = DOC_SIZES[((key + version) % DOC_SIZES.len() as u64) as usize];
    size.map(|len| {
        (0..len)
            .map(|i| (key as usize * 31 + version as usize * 7 + i) as u8)
            .collect()
    })
}

fn doc_value(key: u64, version: u64) -> Value {
    doc_body(key, version).map_or(Value::Null, Value::Bytes)
}

/// A doc writer's commits in order: epoch, key, version (None: deleted).
type DocHistory = Vec<(u64, u64, Option<u64>)>;

/// Creates `docs` (a BLOB column) with every doc at version 0.
fn load_docs(session: &Session) {
    session
        .create_table(
            &skarv_client::schema_types::TableDef::new(
                "docs",
                0,
                vec![
                    Column::new("id", ColumnType::BigInt { unsigned: true }),
                    Column::new("body", ColumnType::Blob).nullable(),
                ],
            )
            .primary_key(vec![0]),
        )
        .expect("create docs");
    let docs = session.table("docs").expect("docs");
    let tx = session.begin().expect("begin");
    for key in 0..DOCS {
        tx.insert(
            &docs,
            &[("id", Value::UInt(key)), ("body", doc_value(key, 0))],
        )
        .expect("insert a doc");
    }
    tx.execute(ExecMode::Commit).expect("load docs");
}

/// Rewrites, deletes and re-inserts docs until `stop`.
fn docs_writer(cluster: &Cluster, stop: &AtomicBool) -> DocHistory {
    let session = cluster.session().expect("session");
    let docs = session.table("docs").expect("docs");
    let mut present = vec![true; DOCS as usize];
    let mut random = xorshift(0x2545_f491_4f6c_dd1du64);
    let mut history = Vec::new();
    let mut version = 0u64;
    while !stop.load(Ordering::Relaxed) {
        version += 1;
        let key = random(DOCS);
        let tx = session.begin().expect("begin");
        let after = if !present[key as usize] {
            let row = [("id", Value::UInt(key)), ("body", doc_value(key, version))];
            tx.insert(&docs, &row).expect("insert a doc");
            Some(version)
        } else if random(6) == 0 {
            tx.delete(&docs, &[Value::UInt(key)]).expect("delete a doc");
            None
        } else {
            let change = [("body", doc_value(key, version))];
            tx.update(&docs, &[Value::UInt(key)], &change)
                .expect("update a doc");
            Some(version)
        };
        let outcome = tx.execute(ExecMode::Commit).expect("commit a doc");
        present[key as usize] = after.is_some();
        history.push((outcome.epoch.expect("an epoch").get(), key, after));
    }
    history
}

/// The docs through `connect`, whole values.
fn docs(connect: &str) -> BTreeMap<u64, Option<Vec<u8>>> {
    let cluster = Cluster::connect(connect).expect("connect");
    let session = cluster.session().expect("session");
    let table = session.table("docs").expect("docs");
    let tx = session.begin().expect("begin");
    let mut rows = BTreeMap::new();
    for row in tx.scan(&table, ScanOptions::default()).expect("scan") {
        let row = row.expect("row");
        let body = match row.get("body") {
            Some(Value::Bytes(b)) => Some(b.clone()),
            Some(Value::Null) => None,
            other => panic!("a doc's body: {other:?}"),
        };
        let Some(Value::UInt(id)) = row.get("id") else {
            panic!("a doc: {:?}", row.values());
        };
        assert!(rows.insert(*id, body).is_none(), "doc {id} twice");
    }
    rows
}

/// One committed change: the key and its value after (None: deleted).
type Change = (u64, Option<u64>);
/// A writer's commits in order: each one's epoch and changes.
type History = Vec<(u64, Vec<Change>)>;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("skarv-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn source(name: &str, port_range: u16) -> Sandbox {
    let epochs = format!("TimeBetweenEpochs={EPOCH_INTERVAL_MS}");
    Sandbox::start_configured(name, port_range, 2, &["--set", &epochs])
}

fn load(session: &Session) {
    session
        .create_table(&id_value_table("bk"))
        .expect("create bk");
    let table = session.table("bk").expect("bk");
    for chunk in (0..KEYS).collect::<Vec<_>>().chunks(200) {
        let tx = session.begin().expect("begin");
        for key in chunk {
            tx.insert(&table, &[("id", Value::UInt(*key)), ("v", Value::UInt(0))])
                .expect("insert");
        }
        tx.execute(ExecMode::Commit).expect("load");
    }
}

/// Writer `w`: random inserts, updates and deletes of its keys until
/// `stop`; returns each commit's epoch and changes, in commit order.
fn writer(cluster: &Cluster, w: u64, stop: &AtomicBool) -> History {
    let session = cluster.session().expect("session");
    let table = session.table("bk").expect("bk");
    let mut present: Vec<bool> = vec![true; KEYS as usize];
    let mut random = xorshift(0x9e37_79b9_7f4a_7c15u64 ^ (w + 1));
    let mut history = Vec::new();
    let mut t = 0u64;
    while !stop.load(Ordering::Relaxed) {
        t += 1;
        let tx = session.begin().expect("begin");
        let mut changes: Vec<Change> = Vec::new();
        for _ in 0..=random(3) {
            let key = random(KEYS / WRITERS) * WRITERS + w;
            if changes.iter().any(|(k, _)| *k == key) {
                continue;
            }
            let v = (t << 8) | (w << 4) | changes.len() as u64;
            if !present[key as usize] {
                tx.insert(&table, &[("id", Value::UInt(key)), ("v", Value::UInt(v))])
                    .expect("insert");
                changes.push((key, Some(v)));
            } else if random(5) == 0 {
                tx.delete(&table, &[Value::UInt(key)]).expect("delete");
                changes.push((key, None));
            } else {
                tx.update(&table, &[Value::UInt(key)], &[("v", Value::UInt(v))])
                    .expect("update");
                changes.push((key, Some(v)));
            }
        }
        let outcome = tx.execute(ExecMode::Commit).expect("commit");
        assert!(outcome.committed);
        for (key, v) in &changes {
            present[*key as usize] = v.is_some();
        }
        history.push((outcome.epoch.expect("an epoch").get(), changes));
    }
    history
}

/// The rows of `bk` through `connect`.
fn rows(connect: &str, table: &str) -> BTreeMap<u64, u64> {
    rows_by(connect, table, "id", "v")
}

/// `table`'s rows as `key` → `value` (two BIGINT UNSIGNED columns).
fn rows_by(connect: &str, name: &str, key: &str, value: &str) -> BTreeMap<u64, u64> {
    let cluster = Cluster::connect(connect).expect("connect");
    let session = cluster.session().expect("session");
    let table = session.table(name).expect("the table");
    let tx = session.begin().expect("begin");
    let mut rows = BTreeMap::new();
    for row in tx.scan(&table, ScanOptions::default()).expect("scan") {
        let row = row.expect("row");
        let (Some(Value::UInt(id)), Some(Value::UInt(v))) = (row.get(key), row.get(value)) else {
            panic!("a row of {name}: {:?}", row.values());
        };
        assert!(rows.insert(*id, *v).is_none(), "key {id} twice");
    }
    rows
}

fn manifest(dir: &Path) -> Json {
    let text = std::fs::read_to_string(dir.join("manifest.json")).expect("manifest");
    let body = &text[..text.rfind("crc32c ").expect("its checksum line")];
    serde_json::from_str(body).expect("manifest JSON")
}

fn restore(connect: &str, backup: &Path, more: &[&str]) -> std::process::Output {
    let backup = backup.to_str().expect("UTF-8");
    let mut args = vec!["restore", "--connect", connect, "--backup", backup];
    args.extend_from_slice(more);
    skarv(&args)
}

/// Copies a backup directory, to damage the copy.
fn copy_backup(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("copy dir");
    for entry in std::fs::read_dir(from).expect("backup dir") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copy");
    }
}

#[test]
fn a_backup_under_load_restores_to_exactly_its_stop_epoch() {
    let sandbox = source("backup-src", 12_500);
    let cluster = Cluster::connect(&sandbox.connect).expect("connect");
    let session = cluster.session().expect("session");
    load(&session);
    // A table without a key of its own: keyed by the hidden `$PK`, which
    // a native writer fills itself; the backup holds it whole.
    let mut nokey_def = skarv_client::schema_types::TableDef::new(
        "nokey",
        0,
        vec![skarv_client::schema_types::Column::new(
            "a",
            skarv_client::schema_types::ColumnType::BigInt { unsigned: true },
        )],
    );
    // Fragments on both data nodes' primaries: each writes its share.
    nokey_def.partitions = 4;
    session.create_table(&nokey_def).expect("create nokey");
    let nokey = session.table("nokey").expect("nokey");
    let tx = session.begin().expect("begin");
    for pk in 1..=3u64 {
        tx.insert(
            &nokey,
            &[("a", Value::UInt(pk * 10)), ("$PK", Value::UInt(pk))],
        )
        .expect("insert into nokey");
    }
    tx.execute(ExecMode::Commit).expect("commit nokey");
    let nokey_rows = rows_by(&sandbox.connect, "nokey", "$PK", "a");
    assert_eq!(nokey_rows.len(), 3, "{nokey_rows:?}");
    load_docs(&session);
    let scratch = scratch("backup-files");
    let backups = scratch.join("backups");

    // ---- the backup, while the writers commit ----
    let stop = AtomicBool::new(false);
    let histories: Mutex<Vec<History>> = Mutex::new(Vec::new());
    let nokey_updates = std::sync::atomic::AtomicU64::new(0);
    let doc_history: Mutex<DocHistory> = Mutex::new(Vec::new());
    let output = std::thread::scope(|scope| {
        let (doc_cluster, doc_stop, doc_out) = (&cluster, &stop, &doc_history);
        scope.spawn(move || {
            let history = docs_writer(doc_cluster, doc_stop);
            *doc_out.lock().unwrap() = history;
        });
        // Changes of the table without a key of its own during the backup:
        // the change stream must carry its hidden key for the log to hold
        // them (and the backup to succeed).
        let (nk_cluster, nk_stop, nk_updates) = (&cluster, &stop, &nokey_updates);
        scope.spawn(move || {
            let session = nk_cluster.session().expect("session");
            let nokey = session.table("nokey").expect("nokey");
            let mut pk = 0u64;
            while !nk_stop.load(Ordering::Relaxed) {
                pk = pk % 3 + 1;
                let tx = session.begin().expect("begin");
                let key = [Value::UInt(pk)];
                let read = tx
                    .define(skarv_client::Op::read(&nokey, &key))
                    .expect("read");
                let outcome = tx.execute(ExecMode::NoCommit).expect("read nokey");
                let Some(Value::UInt(a)) = outcome.row(read).and_then(|r| r.get("a")).cloned()
                else {
                    panic!("nokey row {pk}");
                };
                tx.update(&nokey, &key, &[("a", Value::UInt(a + 1))])
                    .expect("update nokey");
                tx.execute(ExecMode::Commit).expect("commit nokey");
                nk_updates.fetch_add(1, Ordering::Relaxed);
            }
        });
        for w in 0..WRITERS {
            let (cluster, stop, histories) = (&cluster, &stop, &histories);
            scope.spawn(move || {
                let history = writer(cluster, w, stop);
                histories.lock().unwrap().push(history);
            });
        }
        let output = skarv(&[
            "admin",
            "--connect",
            &sandbox.connect,
            "backup",
            "--wait",
            "--dir",
            backups.to_str().expect("UTF-8"),
            "--rate-rows",
            SCAN_ROWS_PER_SEC,
        ]);
        stop.store(true, Ordering::Relaxed);
        output
    });
    assert!(output.status.success(), "{}", text(&output));
    let dir = backups.join("BACKUP-1");
    let manifest = manifest(&dir);
    let stop_epoch = manifest["stop_epoch"].as_u64().expect("stop epoch");
    let start_epoch = manifest["start_epoch"].as_u64().expect("start epoch");

    // ---- the state at the stop epoch ----
    let mut expected: BTreeMap<u64, u64> = (0..KEYS).map(|k| (k, 0)).collect();
    let (mut before, mut during, mut after) = (0, 0, 0);
    for history in histories.lock().unwrap().iter() {
        for (epoch, changes) in history {
            if *epoch <= start_epoch {
                before += 1;
            } else if *epoch <= stop_epoch {
                during += 1;
            } else {
                after += 1;
                continue;
            }
            for (key, v) in changes {
                match v {
                    Some(v) => expected.insert(*key, *v),
                    None => expected.remove(key),
                };
            }
        }
    }
    // The writers overlapped the backup: its log replays real changes, and
    // commits after its stop epoch are not in it.
    assert!(
        during > 20 && after > 0,
        "commits before {before}, during {during}, after {after} the backup"
    );
    assert!(
        manifest["log"]["records"].as_u64().unwrap() > 0,
        "{manifest}"
    );
    let mut names: Vec<&str> = manifest["tables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["bk", "docs", "nokey"],
        "the user's tables (not the marker): {manifest}"
    );
    // Each data node wrote its share: a file per fragment, by the node
    // that is its primary, and both nodes were primaries of some.
    let mut writers = BTreeSet::new();
    for t in manifest["tables"].as_array().unwrap() {
        let files = t["files"].as_array().expect("a table's files");
        let table = session
            .table(t["name"].as_str().unwrap())
            .expect("a backed-up table");
        assert_eq!(
            files.len(),
            table.def().partitions as usize,
            "a file per fragment: {t}"
        );
        for f in files {
            let partition = f["partition"].as_u64().unwrap() as u32;
            let primary = session.primary_node(&table, partition).expect("a primary");
            assert_eq!(f["node"].as_u64(), Some(u64::from(primary.get())), "{t}");
            writers.insert(primary);
        }
        let rows: u64 = files.iter().map(|f| f["rows"].as_u64().unwrap()).sum();
        assert_eq!(Some(rows), t["rows"].as_u64(), "{t}");
    }
    assert_eq!(writers.len(), 2, "both data nodes wrote files: {manifest}");
    let docs_entry = manifest["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "docs")
        .expect("docs in the manifest");
    let parts = docs_entry["blob_parts"].as_array().expect("docs' parts");
    assert!(
        parts.len() == 1 && parts[0]["column"] == "body" && parts[0]["rows"].as_u64() > Some(0),
        "the parts table of docs.body: {manifest}"
    );

    // The docs at the stop epoch; the writer's commits overlapped the backup.
    let mut expected_docs: BTreeMap<u64, Option<Vec<u8>>> =
        (0..DOCS).map(|k| (k, doc_body(k, 0))).collect();
    let mut docs_during = 0;
    for (epoch, key, after) in doc_history.lock().unwrap().iter() {
        if *epoch > stop_epoch {
            continue;
        }
        docs_during += usize::from(*epoch > start_epoch);
        match after {
            Some(version) => expected_docs.insert(*key, doc_body(*key, *version)),
            None => expected_docs.remove(key),
        };
    }
    assert!(
        docs_during > 5,
        "doc commits during the backup: {docs_during}"
    );
    let check_docs = |connect: &str, what: &str| {
        let got = docs(connect);
        let wrong: Vec<_> = expected_docs
            .iter()
            .filter(|(k, v)| got.get(k) != Some(v))
            .map(|(k, v)| {
                (
                    k,
                    v.as_ref().map(Vec::len),
                    got.get(k).map(|g| g.as_ref().map(Vec::len)),
                )
            })
            .collect();
        assert!(
            wrong.is_empty() && got.len() == expected_docs.len(),
            "{what}: docs not at the stop epoch (key, expected length, got length): {wrong:?}; \
             {} docs, {} expected",
            got.len(),
            expected_docs.len()
        );
    };

    // ---- restored into a fresh 1 x 1 cluster ----
    let target = Sandbox::start_configured("backup-dst", 13_000, 1, &["--replicas", "1"]);
    let restored = restore(&target.connect, &dir, &["--restore-meta", "--batch", "100"]);
    assert!(restored.status.success(), "{}", text(&restored));
    let got = rows(&target.connect, "bk");
    assert_eq!(got.len(), expected.len(), "row count at the stop epoch");
    let wrong: Vec<_> = expected
        .iter()
        .filter(|(k, v)| got.get(k) != Some(v))
        .take(5)
        .map(|(k, v)| (k, v, got.get(k)))
        .collect();
    assert!(
        wrong.is_empty(),
        "rows not at the stop epoch (key, expected, got): {wrong:?}"
    );
    check_docs(&target.connect, "restored into 1 x 1");
    assert!(nokey_updates.load(Ordering::Relaxed) > 0, "nokey changed");
    let restored_nokey = rows_by(&target.connect, "nokey", "$PK", "a");
    assert!(
        restored_nokey.keys().eq(nokey_rows.keys())
            && restored_nokey.iter().all(|(pk, a)| *a >= nokey_rows[pk]),
        "the table without a key of its own, with its hidden keys: \
         {nokey_rows:?} -> {restored_nokey:?}"
    );

    // ---- and into the source cluster, its table dropped ----
    session.drop_table("bk").expect("drop bk");
    session.drop_table("nokey").expect("drop nokey");
    session.drop_table("docs").expect("drop docs");
    let restored = restore(
        &sandbox.connect,
        &dir,
        &["--restore-meta", "--parallel", "8", "--batch", "50"],
    );
    assert!(restored.status.success(), "{}", text(&restored));
    assert_eq!(rows(&sandbox.connect, "bk"), got, "the source restored");
    check_docs(&sandbox.connect, "restored into the source");

    // ---- damaged copies are refused, naming the file, before any write ----
    let bk_entry = manifest["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "bk")
        .expect("bk in the manifest");
    let data_file = bk_entry["files"]
        .as_array()
        .expect("bk's files")
        .iter()
        .max_by_key(|f| f["bytes"].as_u64())
        .expect("a file of bk")["file"]
        .as_str()
        .unwrap()
        .to_owned();
    let flipped = scratch.join("flipped");
    copy_backup(&dir, &flipped);
    let path = flipped.join(&data_file);
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();
    let refused = restore(
        &target.connect,
        &flipped,
        &["--rename-db", "x=y", "--tables", "bk"],
    );
    let said = text(&refused);
    assert!(!refused.status.success(), "{said}");
    assert!(
        said.contains(&data_file) && said.contains("offset") && said.contains("checksum"),
        "{said}"
    );

    let truncated = scratch.join("truncated");
    copy_backup(&dir, &truncated);
    let log_file = manifest["logs"]
        .as_array()
        .expect("the logs of the data nodes")
        .iter()
        .max_by_key(|l| l["bytes"].as_u64())
        .expect("a log")["file"]
        .as_str()
        .unwrap()
        .to_owned();
    let log = truncated.join(&log_file);
    let bytes = std::fs::read(&log).unwrap();
    std::fs::write(&log, &bytes[..bytes.len() - 3]).unwrap();
    let refused = restore(&target.connect, &truncated, &[]);
    let said = text(&refused);
    assert!(!refused.status.success(), "{said}");
    assert!(
        said.contains(&format!("{}", log.display())) && said.contains("truncated"),
        "{said}"
    );
    // Nothing was written by the refused restores.
    assert_eq!(rows(&target.connect, "bk"), got);
    let _ = std::fs::remove_dir_all(&scratch);
}

#[test]
fn a_backup_fails_cleanly_when_a_node_dies_and_can_be_aborted() {
    let sandbox = source("backup-kill", 13_500);
    let cluster = Cluster::connect(&sandbox.connect).expect("connect");
    let session = cluster.session().expect("session");
    load(&session);
    let scratch = scratch("backup-kill-files");
    let backups = scratch.join("backups");
    let backups_text = backups.to_str().expect("UTF-8").to_owned();
    let status = |id: u64| -> Json {
        let output = skarv(&["admin", "backup-status", "--json", "--dir", &backups_text]);
        assert!(output.status.success(), "{}", text(&output));
        let all: Json = serde_json::from_slice(&output.stdout).expect("status JSON");
        all["backups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["id"] == id)
            .cloned()
            .unwrap_or(Json::Null)
    };
    let start = |rate: &str| {
        let output = skarv(&[
            "admin",
            "--connect",
            &sandbox.connect,
            "backup",
            "--dir",
            &backups_text,
            "--rate-rows",
            rate,
        ]);
        assert!(output.status.success(), "{}", text(&output));
    };

    // ---- abort: a slow background backup, stopped ----
    start("200");
    wait_for("backup 1 scanning", WAIT, || {
        status(1)["phase"] == "scanning"
    });
    let output = skarv(&["admin", "abort-backup", "--dir", &backups_text]);
    assert!(output.status.success(), "{}", text(&output));
    wait_for("backup 1 aborted", WAIT, || status(1)["state"] == "aborted");
    assert!(!backups.join("BACKUP-1/manifest.json").exists());
    let output = skarv(&["admin", "abort-backup", "--dir", &backups_text, "--id", "1"]);
    assert!(!output.status.success(), "{}", text(&output));

    // ---- a backed-up table altered mid-backup ----
    session
        .create_table(&id_value_table("bk_ddl"))
        .expect("create bk_ddl");
    start("200");
    wait_for("backup 2 scanning", WAIT, || {
        status(2)["phase"] == "scanning"
    });
    let mut def = session.table("bk_ddl").expect("bk_ddl").def().clone();
    def.columns
        .push(Column::new("w", ColumnType::BigInt { unsigned: true }).nullable());
    session.alter_table(def).expect("alter bk_ddl");
    wait_for("backup 2 failed", WAIT, || status(2)["state"] == "failed");
    let failed = status(2);
    assert!(!backups.join("BACKUP-2/manifest.json").exists(), "{failed}");
    assert!(
        failed["error"]
            .as_str()
            .is_some_and(|e| e.contains("table bk_ddl was changed during the backup (alter")),
        "a backup that saw a table altered says which: {failed}"
    );

    // ---- the data node writing a fragment killed mid-backup ----
    // (A node that writes nothing may die: the backup completes from the
    // survivors, consistent, as the change stream survives the failure.)
    let bk = session.table("bk").expect("bk");
    let writer = session.primary_node(&bk, 0).expect("bk's primary");
    start("500");
    wait_for("backup 3 scanning bk", WAIT, || {
        let s = status(3);
        s["phase"] == "scanning" && s["table"] == "bk"
    });
    sigkill(sandbox.pid(u64::from(writer.get())));
    wait_for("backup 3 failed", WAIT, || status(3)["state"] == "failed");
    let failed = status(3);
    assert!(!backups.join("BACKUP-3/manifest.json").exists(), "{failed}");
    assert!(
        failed["error"]
            .as_str()
            // The stream's end or the scan's error, whichever came first.
            .is_some_and(|e| e.to_lowercase().contains("node")),
        "a failed backup says why: {failed}"
    );
    // A restore of it is refused: it has no manifest.
    let refused = restore(&sandbox.connect, &backups.join("BACKUP-3"), &[]);
    assert!(!refused.status.success(), "{}", text(&refused));
    assert!(text(&refused).contains("manifest"), "{}", text(&refused));
    let _ = std::fs::remove_dir_all(&scratch);
}

/// An AUTO_INCREMENT table restored into another cluster goes on where
/// the source's sequence was: the first INSERT without an id after the
/// restore takes a value past every restored row, not 1 (a duplicate of
/// a restored row before restore carried the sequence over); so does a
/// table without a key of its own, whose hidden `$PK` the sequence
/// fills. A table the target had already keeps its own sequence.
#[test]
fn a_restored_auto_increment_table_takes_new_ids_past_its_rows() {
    use mysql::prelude::Queryable;

    let source = Sandbox::start_configured(
        "backup-auto-src",
        12_000,
        1,
        &["--replicas", "1", "--sql-nodes", "1"],
    );
    let mut conn = connect(source.sql_port());
    conn.query_drop("CREATE DATABASE shop COLLATE utf8mb4_bin")
        .expect("create database");
    conn.query_drop("CREATE TABLE shop.t (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
        .expect("create table");
    conn.query_drop("INSERT INTO shop.t (v) VALUES (1), (2), (3)")
        .expect("insert");
    // An explicit id far past the sequence moves it on, as in MySQL.
    conn.query_drop("INSERT INTO shop.t VALUES (900, 4)")
        .expect("insert 900");
    // No key of its own: the hidden `$PK` takes the sequence's values.
    conn.query_drop("CREATE TABLE shop.nk (a INT)")
        .expect("create table");
    conn.query_drop("INSERT INTO shop.nk VALUES (1), (2)")
        .expect("insert");
    let scratch = scratch("backup-auto");
    let backups = scratch.join("backups");
    let dir = backups.to_str().expect("UTF-8");
    let output = skarv(&[
        "admin",
        "--connect",
        &source.connect,
        "backup",
        "--wait",
        "--dir",
        dir,
    ]);
    assert!(output.status.success(), "{}", text(&output));

    let target = Sandbox::start_configured(
        "backup-auto-dst",
        11_500,
        1,
        &["--replicas", "1", "--sql-nodes", "1"],
    );
    let mut target_conn = connect(target.sql_port());
    // The target's own table, its sequence in use before the restore.
    target_conn
        .query_drop("CREATE DATABASE other")
        .expect("create database");
    target_conn
        .query_drop("CREATE TABLE other.x (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
        .expect("create table");
    target_conn
        .query_drop("INSERT INTO other.x (v) VALUES (1), (2)")
        .expect("insert");
    let output = restore(
        &target.connect,
        &backups.join("BACKUP-1"),
        &["--restore-meta", "--tables", "shop.t,shop.nk"],
    );
    assert!(output.status.success(), "{}", text(&output));
    // The restored tables' database is the target's SQL nodes' too, with
    // the source's collation.
    let databases: Vec<String> = target_conn.query("SHOW DATABASES").expect("show databases");
    assert!(databases.iter().any(|d| d == "shop"), "{databases:?}");
    let create: Vec<(String, String)> = target_conn
        .query("SHOW CREATE DATABASE shop")
        .expect("show create database");
    assert!(create[0].1.contains("utf8mb4_bin"), "{create:?}");
    target_conn
        .query_drop("INSERT INTO shop.nk VALUES (3)")
        .expect("a new hidden key past the restored ones");
    let nk: Vec<u64> = target_conn
        .query("SELECT a FROM shop.nk ORDER BY a")
        .expect("select");
    assert_eq!(nk, [1, 2, 3]);

    target_conn
        .query_drop("INSERT INTO shop.t (v) VALUES (5)")
        .expect("the first insert after the restore takes a new id");
    let ids: Vec<(u64, u64)> = target_conn
        .query("SELECT id, v FROM shop.t ORDER BY id")
        .expect("select");
    assert_eq!(&ids[..4], &[(1, 1), (2, 2), (3, 3), (900, 4)], "{ids:?}");
    assert!(ids.len() == 5 && ids[4].0 > 900 && ids[4].1 == 5, "{ids:?}");
    target_conn
        .query_drop("INSERT INTO other.x (v) VALUES (3)")
        .expect("the target's own table goes on");
    let own: Vec<u64> = target_conn
        .query("SELECT id FROM other.x ORDER BY id")
        .expect("select");
    assert_eq!(own.len(), 3, "{own:?}");
    // Renamed, the database is registered under its new name alone.
    let output = restore(
        &target.connect,
        &backups.join("BACKUP-1"),
        &[
            "--restore-meta",
            "--rename-db",
            "shop=shop2",
            "--tables",
            "shop.t",
        ],
    );
    assert!(output.status.success(), "{}", text(&output));
    let databases: Vec<String> = target_conn.query("SHOW DATABASES").expect("show databases");
    assert!(databases.iter().any(|d| d == "shop2"), "{databases:?}");
    let rows: Vec<u64> = target_conn
        .query("SELECT id FROM shop2.t ORDER BY id")
        .expect("the renamed database's table reads through SQL");
    assert_eq!(rows, [1, 2, 3, 900]);
    let _ = std::fs::remove_dir_all(&scratch);
}
