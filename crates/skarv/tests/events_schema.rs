//! Schema changes in the change stream (docs/events.md, "Schema
//! changes"), in real processes: a 2 × 2 sandbox with a SQL node; two
//! writers insert rows through SQL while a native subscriber records the
//! table; the table is altered (an online `ADD COLUMN`) under the writers,
//! then dropped. A native transaction holds an insert open when the alter
//! begins, so the alter waits for it and it commits epochs later, while
//! the writers are refused (the data nodes' alter waits for the table's
//! transactions to end).
//!
//! The stream, read in order (each epoch's changes with its schema events
//! at their places): every change before the alter's event is of the old
//! definition (no column `w`), every change after it of the new (with
//! `w`; the held insert is before it); the drop's event comes last and nothing of the table follows;
//! every insert a writer saw committed is there exactly once.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{connect, wait_for, Sandbox};
use mysql::prelude::Queryable;
use skarv_client::{ChangeKind, Cluster, Event, ExecMode, SchemaKind, SubscribeOptions, Value};

/// `TimeBetweenEpochs` of the sandbox, in ms.
const EPOCH_INTERVAL_MS: u32 = 20;
/// Writers inserting through the SQL node.
const WRITERS: u64 = 2;
/// Inserts acknowledged before the alter, and again after it.
const INSERTS_PER_PHASE: u64 = 60;
/// How long any wait may take before the test fails.
const WAIT: Duration = Duration::from_secs(60);
/// Errors a writer retries while the table changes under it: definition
/// changed (1412), lock wait (1205), a temporary cluster error (1297).
const RETRIED: [u16; 3] = [1412, 1205, 1297];
/// The id of the insert held open when the alter begins (the writers'
/// ids stay far below it).
const HELD_ID: u64 = 1_000_000;
/// Writer errors to wait for once the alter has begun: the held insert
/// commits when the alter is seen waiting for it.
const REFUSALS_BEFORE_COMMIT: u64 = 3;

/// One entry of the stream, flattened: a row change (its `id`, and
/// whether its image has column `w`), or a schema event.
#[derive(Debug)]
enum Seen {
    Row { id: u64, has_w: bool },
    Schema(SchemaKind),
}

fn code(e: &mysql::Error) -> u16 {
    match e {
        mysql::Error::MySqlError(e) => e.code,
        _ => 0,
    }
}

#[test]
fn an_alter_and_a_drop_come_in_the_stream_between_the_right_changes() {
    let epochs = format!("TimeBetweenEpochs={EPOCH_INTERVAL_MS}");
    let sandbox = Sandbox::start_configured(
        "events-schema",
        17_000,
        2,
        &["--set", &epochs, "--sql-nodes", "1"],
    );
    let port = sandbox.sql_port();
    let mut admin = connect(port);
    admin.query_drop("CREATE DATABASE es").unwrap();
    admin
        .query_drop("CREATE TABLE es.t (id INT PRIMARY KEY, v INT NOT NULL)")
        .unwrap();

    let cluster = Cluster::connect(&sandbox.connect).expect("connect");
    let session = cluster.session().expect("session");
    let mut sub = session
        .subscribe(&["es/def/t"], SubscribeOptions::default())
        .expect("subscribe");

    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let refused = Arc::new(AtomicU64::new(0));
    let acked: Arc<Mutex<Vec<u64>>> = Arc::default();
    let failures: Arc<Mutex<Vec<String>>> = Arc::default();
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let (stop, done, refused, acked, failures) = (
            stop.clone(),
            done.clone(),
            refused.clone(),
            acked.clone(),
            failures.clone(),
        );
        writers.push(std::thread::spawn(move || {
            let mut conn = connect(port);
            let mut id = w;
            while !stop.load(Ordering::Relaxed) {
                match conn.query_drop(format!("INSERT INTO es.t (id, v) VALUES ({id}, {id})")) {
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
    let progress = |what: &str| {
        let from = done.load(Ordering::Relaxed);
        wait_for(what, WAIT, || {
            done.load(Ordering::Relaxed) >= from + INSERTS_PER_PHASE
                || !failures.lock().unwrap().is_empty()
        });
    };
    progress("inserts before the alter");
    let table = session.table("es/def/t").expect("the table");
    let held = session.begin().expect("begin");
    held.insert(
        &table,
        &[("id", Value::Int(HELD_ID as i64)), ("v", Value::Int(0))],
    )
    .expect("insert");
    held.execute(ExecMode::NoCommit).expect("the held insert");
    let refused_before = refused.load(Ordering::Relaxed);
    let alter = std::thread::spawn(move || {
        connect(port)
            .query_drop("ALTER TABLE es.t ADD COLUMN w INT NULL")
            .expect("alter");
    });
    wait_for("the writers refused by the waiting alter", WAIT, || {
        refused.load(Ordering::Relaxed) >= refused_before + REFUSALS_BEFORE_COMMIT
    });
    let outcome = held
        .execute(ExecMode::Commit)
        .expect("commit the held insert");
    assert!(outcome.committed);
    alter.join().expect("alter");
    acked.lock().unwrap().push(HELD_ID);
    progress("inserts after the alter");
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().expect("writer");
    }
    assert!(
        failures.lock().unwrap().is_empty(),
        "writers failed: {:?}",
        failures.lock().unwrap()
    );
    admin.query_drop("DROP TABLE es.t").expect("drop");

    // ---- the stream, until the drop's event ----
    let mut seen: Vec<Seen> = Vec::new();
    let mut last_epoch = 0u64;
    let deadline = Instant::now() + WAIT;
    while !seen
        .iter()
        .any(|s| matches!(s, Seen::Schema(SchemaKind::Dropped)))
    {
        assert!(Instant::now() < deadline, "no drop event in {WAIT:?}");
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
                seen.push(Seen::Schema(s.kind));
            }
            assert_eq!(change.kind, ChangeKind::Insert, "{change:?}");
            let after = change.after.as_ref().expect("an insert's after image");
            let id = match after.iter().find(|(n, _)| *n == "id") {
                Some((_, Value::Int(v))) => *v as u64,
                other => panic!("id is {other:?}"),
            };
            let has_w = after.iter().any(|(n, _)| *n == "w");
            seen.push(Seen::Row { id, has_w });
        }
        for s in e.schema.iter().filter(|s| s.at >= e.changes.len()) {
            assert_eq!(s.table, "es/def/t");
            seen.push(Seen::Schema(s.kind));
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

    let schema: Vec<(usize, &SchemaKind)> = seen
        .iter()
        .enumerate()
        .filter_map(|(i, s)| match s {
            Seen::Schema(k) => Some((i, k)),
            Seen::Row { .. } => None,
        })
        .collect();
    assert_eq!(
        schema.iter().map(|(_, k)| **k).collect::<Vec<_>>(),
        [SchemaKind::Altered, SchemaKind::Dropped],
        "one alter, then one drop"
    );
    let (alter_at, drop_at) = (schema[0].0, schema[1].0);
    assert_eq!(drop_at, seen.len() - 1, "the drop ends the table's changes");
    let mut ids: BTreeMap<u64, usize> = BTreeMap::new();
    let (mut old, mut new) = (0, 0);
    for (i, s) in seen.iter().enumerate() {
        let Seen::Row { id, has_w } = s else {
            continue;
        };
        *ids.entry(*id).or_default() += 1;
        if *id == HELD_ID {
            assert!(i < alter_at, "the held insert after the alter's event");
        }
        if i < alter_at {
            assert!(
                !has_w,
                "row {id} of the new definition before the alter's event"
            );
            old += 1;
        } else {
            assert!(
                has_w,
                "row {id} of the old definition after the alter's event"
            );
            new += 1;
        }
    }
    let acked = acked.lock().unwrap();
    let missing: Vec<u64> = acked
        .iter()
        .copied()
        .filter(|id| !ids.contains_key(id))
        .collect();
    assert!(
        missing.is_empty(),
        "committed inserts missing from the stream: {missing:?} ({} acknowledged, {} seen, \
         the alter's event at {alter_at} of {})",
        acked.len(),
        ids.len(),
        seen.len()
    );
    for id in acked.iter() {
        assert_eq!(ids.get(id), Some(&1), "insert {id} in the stream once");
    }
    assert_eq!(ids.len(), acked.len(), "nothing that was not committed");
    eprintln!(
        "events_schema: {old} inserts before the alter's event, {new} after; \
         {} acknowledged",
        acked.len()
    );
    assert!(old >= INSERTS_PER_PHASE as usize && new >= INSERTS_PER_PHASE as usize);
}
