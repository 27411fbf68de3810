//! Schema changes in the change stream (docs/events.md, "Schema
//! changes"), in real processes: a 2 × 2 sandbox with a SQL node; two
//! writers insert rows through SQL while a native subscriber records the
//! table.
//!
//! `an_alter_and_a_drop_come_in_the_stream_between_the_right_changes`:
//! the table is altered (an online `ADD COLUMN`) under the writers, then
//! dropped. A native transaction holds an insert open when the alter
//! begins, so the alter waits for it and it commits epochs later, while
//! the writers are refused (the data nodes' alter waits for the table's
//! transactions to end). The stream, read in order (each epoch's changes
//! with its schema events at their places): every change before the
//! alter's event is of the old definition (no column `w`), every change
//! after it of the new (with `w`; the held insert is before it); the
//! drop's event comes last and nothing of the table follows; every insert
//! a writer saw committed is there exactly once.
//!
//! `a_copying_alter_is_followed_to_its_copy`: the table is altered by a
//! copy (`DROP COLUMN`: a new table, the rows copied, the names swapped,
//! the old table dropped) under the writers, then dropped. The stream has
//! one replace event naming the table: every change before it has the
//! dropped column, every change after it (the copy's) lacks it; the
//! copy's own inserts are not in the stream (each insert a writer saw
//! committed is there exactly once); the old table's drop comes under its
//! parked `#sql-old-` name, the table's own drop last.
//!
//! `a_table_renamed_into_the_name_of_one_parked_is_followed`: the swap of
//! an online schema change tool by hand (`RENAME TABLE t TO t_old, t_new
//! TO t`, `t_new` made and filled beforehand) under the writers; the
//! stream is checked as the copy's, `t_new`'s own row not in it.
//!
//! `a_copys_blob_parts_are_followed_with_it`: a subscription of a table
//! and its TEXT column's parts table (as the backup makes) gets each
//! row's parts before a copying ALTER and the copy's parts after it.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::{connect, wait_for, Sandbox};
use mysql::prelude::Queryable;
use skarv_client::{
    ChangeKind, Cluster, Event, ExecMode, SchemaKind, SubscribeOptions, Subscription, Value,
};

/// `TimeBetweenEpochs` of the sandbox, in ms.
const EPOCH_INTERVAL_MS: u32 = 20;
/// Writers inserting through the SQL node.
const WRITERS: u64 = 2;
/// Inserts acknowledged before the alter, and again after it.
const INSERTS_PER_PHASE: u64 = 60;
/// How long any wait may take before the test fails.
const WAIT: Duration = Duration::from_secs(60);
/// Errors a writer retries while the table changes under it: definition
/// changed (1412), lock wait (1205), a temporary cluster error (1297), the
/// name briefly unknown between a copy's two renames (1146).
const RETRIED: [u16; 4] = [1412, 1205, 1297, 1146];
/// The id of the insert held open when the alter begins (the writers'
/// ids stay far below it).
const HELD_ID: u64 = 1_000_000;
/// Writer errors to wait for once the alter has begun: the held insert
/// commits when the alter is seen waiting for it.
const REFUSALS_BEFORE_COMMIT: u64 = 3;
/// Bytes of each BLOB/TEXT value of the parts test: past the inline head,
/// in [`BODY_PARTS`] rows of the column's parts table.
const BODY_BYTES: usize = schema::BLOB_INLINE_BYTES + schema::BLOB_PART_BYTES + 1;
const BODY_PARTS: usize = 2;

/// One entry of the stream, flattened: a row change (its `id`, and the
/// columns of its image), or a schema event (its kind and table).
#[derive(Debug)]
enum Seen {
    Row { id: u64, columns: Vec<&'static str> },
    Schema(SchemaKind, String),
}

impl Seen {
    fn has(&self, column: &str) -> bool {
        matches!(self, Seen::Row { columns, .. } if columns.contains(&column))
    }
}

fn code(e: &mysql::Error) -> u16 {
    match e {
        mysql::Error::MySqlError(e) => e.code,
        _ => 0,
    }
}

/// Writers inserting `(id, v)` into `table` through the SQL node, each
/// its own ids, retrying [`RETRIED`] errors.
struct Writers {
    stop: Arc<AtomicBool>,
    done: Arc<AtomicU64>,
    refused: Arc<AtomicU64>,
    acked: Arc<Mutex<Vec<u64>>>,
    failures: Arc<Mutex<Vec<String>>>,
    threads: Vec<JoinHandle<()>>,
}

impl Writers {
    fn start(port: u16, table: &'static str) -> Writers {
        let mut writers = Writers {
            stop: Arc::default(),
            done: Arc::default(),
            refused: Arc::default(),
            acked: Arc::default(),
            failures: Arc::default(),
            threads: Vec::new(),
        };
        for w in 0..WRITERS {
            let (stop, done, refused, acked, failures) = (
                writers.stop.clone(),
                writers.done.clone(),
                writers.refused.clone(),
                writers.acked.clone(),
                writers.failures.clone(),
            );
            writers.threads.push(std::thread::spawn(move || {
                let mut conn = connect(port);
                let mut id = w;
                while !stop.load(Ordering::Relaxed) {
                    match conn
                        .query_drop(format!("INSERT INTO {table} (id, v) VALUES ({id}, {id})"))
                    {
                        Ok(()) => {
                            acked.lock().unwrap().push(id);
                            done.fetch_add(1, Ordering::Relaxed);
                            id += WRITERS;
                        }
                        Err(e) if RETRIED.contains(&code(&e)) => {
                            refused.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => {
                            failures.lock().unwrap().push(format!("insert {id}: {e}"));
                            return;
                        }
                    }
                }
            }));
        }
        writers
    }

    /// Waits for [`INSERTS_PER_PHASE`] more acknowledged inserts.
    fn progress(&self, what: &str) {
        let from = self.done.load(Ordering::Relaxed);
        wait_for(what, WAIT, || {
            self.done.load(Ordering::Relaxed) >= from + INSERTS_PER_PHASE
                || !self.failures.lock().unwrap().is_empty()
        });
    }

    /// Stops them; the ids acknowledged.
    fn stop(self) -> Vec<u64> {
        self.stop.store(true, Ordering::Relaxed);
        for w in self.threads {
            w.join().expect("writer");
        }
        let failures = self.failures.lock().unwrap();
        assert!(failures.is_empty(), "writers failed: {failures:?}");
        let acked = self.acked.lock().unwrap().clone();
        acked
    }
}

/// Reads `sub` until the drop of `table`, then a little longer (nothing
/// may follow): the stream flattened, each epoch's schema events at their
/// places among its changes.
fn record(sub: &mut Subscription, table: &str) -> Vec<Seen> {
    let mut seen: Vec<Seen> = Vec::new();
    let mut last_epoch = 0u64;
    let deadline = Instant::now() + WAIT;
    while !seen
        .iter()
        .any(|s| matches!(s, Seen::Schema(SchemaKind::Dropped, t) if t == table))
    {
        assert!(
            Instant::now() < deadline,
            "no drop event in {WAIT:?}: {:?}",
            schema_events(&seen)
        );
        let Some(event) = sub.next_timeout(Duration::from_secs(1)).expect("next") else {
            continue;
        };
        let Event::Epoch(e) = event else {
            panic!("a gap: {event:?}");
        };
        assert!(e.epoch.get() > last_epoch, "epochs ascending");
        last_epoch = e.epoch.get();
        for (at, change) in e.changes.iter().enumerate() {
            for s in e.schema.iter().filter(|s| s.at == at) {
                seen.push(Seen::Schema(s.kind, s.table.clone()));
            }
            assert_eq!(change.kind, ChangeKind::Insert, "{change:?}");
            let after = change.after.as_ref().expect("an insert's after image");
            let id = match after.iter().find(|(n, _)| *n == "id") {
                Some((_, Value::Int(v))) => *v as u64,
                other => panic!("id is {other:?}"),
            };
            let columns = after.iter().map(|(n, _)| *n).collect();
            seen.push(Seen::Row { id, columns });
        }
        for s in e.schema.iter().filter(|s| s.at >= e.changes.len()) {
            seen.push(Seen::Schema(s.kind, s.table.clone()));
        }
    }
    // A little longer: nothing of the dropped table may follow.
    let until = Instant::now() + Duration::from_millis(20 * u64::from(EPOCH_INTERVAL_MS));
    while Instant::now() < until {
        if let Some(Event::Epoch(e)) = sub.next_timeout(Duration::from_millis(50)).expect("next") {
            assert!(
                e.changes.is_empty() && e.schema.is_empty(),
                "after the drop: {e:?}"
            );
        }
    }
    seen
}

/// Checks that every id of `acked` is a row of `seen` exactly once, and
/// that `seen` has no other row.
fn each_once(seen: &[Seen], acked: &[u64]) {
    let mut ids: BTreeMap<u64, usize> = BTreeMap::new();
    for s in seen {
        if let Seen::Row { id, .. } = s {
            *ids.entry(*id).or_default() += 1;
        }
    }
    let missing: Vec<u64> = acked
        .iter()
        .copied()
        .filter(|id| !ids.contains_key(id))
        .collect();
    assert!(
        missing.is_empty(),
        "committed inserts missing from the stream: {missing:?} ({} acknowledged, {} seen)",
        acked.len(),
        ids.len(),
    );
    for id in acked {
        assert_eq!(ids.get(id), Some(&1), "insert {id} in the stream once");
    }
    assert_eq!(ids.len(), acked.len(), "nothing that was not committed");
}

/// The positions and kinds of the schema events of `seen`.
fn schema_events(seen: &[Seen]) -> Vec<(usize, SchemaKind, &str)> {
    seen.iter()
        .enumerate()
        .filter_map(|(i, s)| match s {
            Seen::Schema(k, t) => Some((i, *k, t.as_str())),
            Seen::Row { .. } => None,
        })
        .collect()
}

/// A 2 x 2 sandbox with a SQL node (`name` its directory's), the table
/// `db.t` of `columns` made through SQL, the SQL connection that made it,
/// and the native API connected.
fn start(name: &str, db: &str, columns: &str) -> (Sandbox, mysql::Conn, Cluster) {
    let epochs = format!("TimeBetweenEpochs={EPOCH_INTERVAL_MS}");
    let sandbox =
        Sandbox::start_configured(name, 17_000, 2, &["--set", &epochs, "--sql-nodes", "1"]);
    let mut admin = connect(sandbox.sql_port());
    admin.query_drop(format!("CREATE DATABASE {db}")).unwrap();
    admin
        .query_drop(format!("CREATE TABLE {db}.t ({columns})"))
        .unwrap();
    let cluster = Cluster::connect(&sandbox.connect).expect("connect");
    (sandbox, admin, cluster)
}

#[test]
fn an_alter_and_a_drop_come_in_the_stream_between_the_right_changes() {
    let (sandbox, mut admin, cluster) =
        start("events-schema", "es", "id INT PRIMARY KEY, v INT NOT NULL");
    let port = sandbox.sql_port();
    let session = cluster.session().expect("session");
    let mut sub = session
        .subscribe(&["es/def/t"], SubscribeOptions::default())
        .expect("subscribe");

    let writers = Writers::start(port, "es.t");
    writers.progress("inserts before the alter");
    let table = session.table("es/def/t").expect("the table");
    let held = session.begin().expect("begin");
    held.insert(
        &table,
        &[("id", Value::Int(HELD_ID as i64)), ("v", Value::Int(0))],
    )
    .expect("insert");
    held.execute(ExecMode::NoCommit).expect("the held insert");
    let refused_before = writers.refused.load(Ordering::Relaxed);
    let alter = std::thread::spawn(move || {
        connect(port)
            .query_drop("ALTER TABLE es.t ADD COLUMN w INT NULL")
            .expect("alter");
    });
    wait_for("the writers refused by the waiting alter", WAIT, || {
        writers.refused.load(Ordering::Relaxed) >= refused_before + REFUSALS_BEFORE_COMMIT
    });
    let outcome = held
        .execute(ExecMode::Commit)
        .expect("commit the held insert");
    assert!(outcome.committed);
    alter.join().expect("alter");
    writers.progress("inserts after the alter");
    let mut acked = writers.stop();
    acked.push(HELD_ID);
    admin.query_drop("DROP TABLE es.t").expect("drop");

    let seen = record(&mut sub, "es/def/t");
    let schema = schema_events(&seen);
    assert_eq!(
        schema.iter().map(|&(_, k, _)| k).collect::<Vec<_>>(),
        [SchemaKind::Altered, SchemaKind::Dropped],
        "one alter, then one drop"
    );
    let (alter_at, drop_at) = (schema[0].0, schema[1].0);
    assert_eq!(drop_at, seen.len() - 1, "the drop ends the table's changes");
    let (mut old, mut new) = (0, 0);
    for (i, s) in seen.iter().enumerate() {
        let Seen::Row { id, .. } = s else {
            continue;
        };
        if *id == HELD_ID {
            assert!(i < alter_at, "the held insert after the alter's event");
        }
        if i < alter_at {
            assert!(
                !s.has("w"),
                "row {id} of the new definition before the alter's event"
            );
            old += 1;
        } else {
            assert!(
                s.has("w"),
                "row {id} of the old definition after the alter's event"
            );
            new += 1;
        }
    }
    each_once(&seen, &acked);
    eprintln!(
        "events_schema: {old} inserts before the alter's event, {new} after; {} acknowledged",
        acked.len()
    );
    assert!(old >= INSERTS_PER_PHASE as usize && new >= INSERTS_PER_PHASE as usize);
}

#[test]
fn a_copying_alter_is_followed_to_its_copy() {
    let (sandbox, mut admin, cluster) = start(
        "events-copy",
        "ec",
        "id INT PRIMARY KEY, v INT NOT NULL, x INT NULL",
    );
    let port = sandbox.sql_port();
    let session = cluster.session().expect("session");
    let mut sub = session
        .subscribe(&["ec/def/t"], SubscribeOptions::default())
        .expect("subscribe");
    let old_id = session.table("ec/def/t").expect("the table").id();

    let writers = Writers::start(port, "ec.t");
    writers.progress("inserts before the alter");
    admin
        .query_drop("ALTER TABLE ec.t DROP COLUMN x")
        .expect("the copying alter");
    session.forget_table("ec/def/t");
    let copy_id = session.table("ec/def/t").expect("the copy").id();
    assert_ne!(
        copy_id, old_id,
        "DROP COLUMN made a new table (a copying ALTER)"
    );
    writers.progress("inserts after the alter");
    let acked = writers.stop();
    admin.query_drop("DROP TABLE ec.t").expect("drop");

    let seen = record(&mut sub, "ec/def/t");
    followed(&seen, &acked, "ec/def/t", "ec/def/#sql-old-", |row| {
        row.has("x")
    });
}

/// Checks the stream `seen` of `table`, which another table replaced
/// while writers inserted `acked` (each once, by name), the old table then
/// dropped under a name starting `parked`, then the table: one replace
/// event naming the table; the old table's drop after it, the table's
/// last, the old table's alters before its drop; before the replace event
/// only rows `old_row` knows by their columns, after it none.
fn followed(seen: &[Seen], acked: &[u64], table: &str, parked: &str, old_row: fn(&Seen) -> bool) {
    let schema = schema_events(seen);
    let replaced: Vec<usize> = schema
        .iter()
        .filter(|&&(_, k, _)| k == SchemaKind::Replaced)
        .map(|&(i, _, t)| {
            assert_eq!(t, table, "the replace event names the table");
            i
        })
        .collect();
    assert_eq!(replaced.len(), 1, "one replace event: {schema:?}");
    let replace_at = replaced[0];
    let drops: Vec<(usize, &str)> = schema
        .iter()
        .filter(|&&(_, k, _)| k == SchemaKind::Dropped)
        .map(|&(i, _, t)| (i, t))
        .collect();
    assert_eq!(
        drops.len(),
        2,
        "the old table's drop and the table's: {schema:?}"
    );
    assert!(
        drops[0].1.starts_with(parked) && drops[0].0 > replace_at,
        "the old table is dropped, under its parked name, after the replacement: {schema:?}"
    );
    assert_eq!(
        drops[1],
        (seen.len() - 1, table),
        "the table's drop ends it"
    );
    assert!(
        schema
            .iter()
            .filter(|&&(_, k, _)| k == SchemaKind::Altered)
            .all(|&(i, _, _)| i < drops[0].0),
        "the old table's alters (its parking among them) before its drop: {schema:?}"
    );
    let (mut old, mut new) = (0, 0);
    for (i, s) in seen.iter().enumerate() {
        let Seen::Row { id, .. } = s else {
            continue;
        };
        if i < replace_at {
            assert!(
                old_row(s),
                "row {id} of the new table before the replace event"
            );
            old += 1;
        } else {
            assert!(
                !old_row(s),
                "row {id} of the old table after the replace event"
            );
            new += 1;
        }
    }
    each_once(seen, acked);
    eprintln!(
        "events_schema: {old} inserts before the replace event, {new} after; {} acknowledged; \
         schema events {:?}",
        acked.len(),
        schema.iter().map(|&(_, k, t)| (k, t)).collect::<Vec<_>>()
    );
    assert!(old >= INSERTS_PER_PHASE as usize && new >= INSERTS_PER_PHASE as usize);
}

#[test]
fn a_table_renamed_into_the_name_of_one_parked_is_followed() {
    let (sandbox, mut admin, cluster) =
        start("events-swap", "sw", "id INT PRIMARY KEY, v INT NOT NULL");
    // The new table, as an online schema change tool fills it before its
    // swap: its own rows are not in the stream.
    admin
        .query_drop("CREATE TABLE sw.t_new (id INT PRIMARY KEY, v INT NOT NULL, w INT DEFAULT 7)")
        .unwrap();
    admin
        .query_drop(format!(
            "INSERT INTO sw.t_new (id, v) VALUES ({HELD_ID}, 0)"
        ))
        .unwrap();
    let port = sandbox.sql_port();
    let session = cluster.session().expect("session");
    let mut sub = session
        .subscribe(&["sw/def/t"], SubscribeOptions::default())
        .expect("subscribe");
    let new_id = session.table("sw/def/t_new").expect("the new table").id();

    let writers = Writers::start(port, "sw.t");
    writers.progress("inserts before the swap");
    admin
        .query_drop("RENAME TABLE sw.t TO sw.t_old, sw.t_new TO sw.t")
        .expect("the swap");
    session.forget_table("sw/def/t");
    assert_eq!(session.table("sw/def/t").expect("the table").id(), new_id);
    writers.progress("inserts after the swap");
    let acked = writers.stop();
    admin
        .query_drop("DROP TABLE sw.t_old")
        .expect("drop the old table");
    admin.query_drop("DROP TABLE sw.t").expect("drop");

    let seen = record(&mut sub, "sw/def/t");
    followed(&seen, &acked, "sw/def/t", "sw/def/t_old", |row| {
        !row.has("w")
    });
}

/// A subscription made after a swap that names the parked table has that
/// table alone: the data nodes keep the pair (the old table, the one that
/// replaced it) for the subscriptions made before, and capture the new
/// table for this one too, but the client leaves its changes out (the
/// table is not in the subscription and replaces none that was, by name,
/// when it came: `resolve_copy`).
#[test]
fn a_later_subscription_to_the_parked_table_has_it_alone() {
    let (_sandbox, mut admin, cluster) =
        start("events-parked", "pk", "id INT PRIMARY KEY, v INT NOT NULL");
    admin
        .query_drop("CREATE TABLE pk.t_new (id INT PRIMARY KEY, v INT NOT NULL)")
        .unwrap();
    admin
        .query_drop("RENAME TABLE pk.t TO pk.t_old, pk.t_new TO pk.t")
        .expect("the swap");
    let session = cluster.session().expect("session");
    let mut sub = session
        .subscribe(&["pk/def/t_old"], SubscribeOptions::default())
        .expect("subscribe to the parked table");
    for (table, id) in [("t", 2), ("t_old", 1), ("t", 3)] {
        admin
            .query_drop(format!("INSERT INTO pk.{table} (id, v) VALUES ({id}, 0)"))
            .expect("insert");
    }
    admin
        .query_drop("DROP TABLE pk.t_old")
        .expect("drop the parked table");
    let seen = record(&mut sub, "pk/def/t_old");
    let rows: Vec<u64> = seen
        .iter()
        .filter_map(|s| match s {
            Seen::Row { id, .. } => Some(*id),
            Seen::Schema(..) => None,
        })
        .collect();
    assert_eq!(rows, [1], "the parked table's row, and only it: {seen:?}");
}

/// A swap undone: the RENAME's later pair fails, so the SQL node renames
/// the pairs done back, and the table that had taken the parked one's
/// name replaces nothing any more: its `replaces` is cleared (with the
/// pair left, it still named `t`; seen), so the data nodes forget the
/// pair and no longer capture `t_new` for a subscription to `t`. The
/// client left those changes out anyway (`resolve_copy` finds `t` under
/// its name, not `t_new`): the subscription's rows are `t`'s with or
/// without the fix, checked here so that it stays so.
#[test]
fn a_swap_undone_by_a_failed_later_pair_replaces_nothing() {
    let (_sandbox, mut admin, cluster) =
        start("events-undone", "ud", "id INT PRIMARY KEY, v INT NOT NULL");
    admin
        .query_drop("CREATE TABLE ud.t_new (id INT PRIMARY KEY, v INT NOT NULL)")
        .unwrap();
    let failed = admin
        .query_drop("RENAME TABLE ud.t TO ud.t_old, ud.t_new TO ud.t, ud.nosuch TO ud.other")
        .expect_err("a pair of a table that does not exist");
    assert!(failed.to_string().contains("nosuch"), "{failed}");
    let tables: Vec<String> = admin.query("SHOW TABLES FROM ud").unwrap();
    assert_eq!(tables, ["t", "t_new"], "every pair renamed back");
    let session = cluster.session().expect("session");
    let back = session.table("ud/def/t_new").expect("t_new");
    assert_eq!(
        back.def().replaces,
        0,
        "t_new back under its name replaces nothing"
    );
    let mut sub = session
        .subscribe(&["ud/def/t"], SubscribeOptions::default())
        .expect("subscribe to the table taken back");
    for (table, id) in [("t", 1), ("t_new", 2), ("t", 3)] {
        admin
            .query_drop(format!("INSERT INTO ud.{table} (id, v) VALUES ({id}, 0)"))
            .expect("insert");
    }
    admin.query_drop("DROP TABLE ud.t").expect("drop");
    let seen = record(&mut sub, "ud/def/t");
    // Rows of one epoch come in bucket order, not commit order.
    let rows: BTreeSet<u64> = seen
        .iter()
        .filter_map(|s| match s {
            Seen::Row { id, .. } => Some(*id),
            Seen::Schema(..) => None,
        })
        .collect();
    assert_eq!(
        rows,
        BTreeSet::from([1, 3]),
        "the table's own rows, and only them: {seen:?}"
    );
}

#[test]
fn a_copys_blob_parts_are_followed_with_it() {
    let (_sandbox, mut admin, cluster) = start(
        "events-blob",
        "eb",
        "id INT PRIMARY KEY, v INT NOT NULL, x INT NULL, body TEXT",
    );
    let session = cluster.session().expect("session");
    let table = session.table("eb/def/t").expect("the table");
    let parts = Arc::clone(table.blob_parts_table("body").expect("body's parts table"));
    let options = SubscribeOptions {
        hidden_columns: true,
        ..SubscribeOptions::default()
    };
    let mut sub = session
        .subscribe_tables(&[Arc::clone(&table), parts], options)
        .expect("subscribe");
    let insert = |admin: &mut mysql::Conn, ids: std::ops::RangeInclusive<u64>| {
        for id in ids {
            admin
                .query_drop(format!(
                    "INSERT INTO eb.t (id, v, body) VALUES ({id}, {id}, REPEAT('b', {BODY_BYTES}))"
                ))
                .expect("insert");
        }
    };
    insert(&mut admin, 1..=3);
    admin
        .query_drop("ALTER TABLE eb.t DROP COLUMN x")
        .expect("the copying alter");
    insert(&mut admin, 4..=6);
    admin.query_drop("DROP TABLE eb.t").expect("drop");

    let seen = record(&mut sub, "eb/def/t");
    let replace_at = seen
        .iter()
        .position(|s| matches!(s, Seen::Schema(SchemaKind::Replaced, t) if t == "eb/def/t"))
        .unwrap_or_else(|| panic!("no replace event of the table: {:?}", schema_events(&seen)));
    let mut rows: BTreeMap<u64, (usize, usize)> = BTreeMap::new();
    for (i, s) in seen.iter().enumerate() {
        if let Seen::Row { id, .. } = s {
            assert_eq!(
                *id <= 3,
                i < replace_at,
                "row {id} on the wrong side of the replacement"
            );
            let (base, parts) = rows.entry(*id).or_default();
            if s.has("body") {
                *base += 1;
            } else {
                assert!(
                    s.has("$PART"),
                    "a change of the table or of body's parts: {s:?}"
                );
                *parts += 1;
            }
        }
    }
    let expected: BTreeMap<u64, (usize, usize)> = (1..=6).map(|id| (id, (1, BODY_PARTS))).collect();
    assert_eq!(
        rows,
        expected,
        "each row once, and its body's parts, before the copy and after it: {:?}",
        schema_events(&seen)
    );
}
