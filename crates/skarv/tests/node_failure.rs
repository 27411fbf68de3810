//! Real processes: a sandbox of 2 data nodes × 2 replicas (one node group)
//! under a writer, and one data node SIGKILLed (issue 6, item 4): the
//! president (the survivor must become president, win arbitration and take
//! over the transactions), or the other one (the president does). The
//! writer inserts one row at a time and retries what may succeed on a
//! retry; the test asserts that
//! - it commits again within [`PROGRESS_AFTER_KILL_MAX_MS`] of the kill
//!   (generous for CI's two slow cores; the goal, 1 s, is measured by
//!   `bench/failover.sh` on a release build);
//! - every error it saw was temporary, or 4010 (unknown result: the TC's
//!   node died during the commit), whose row is settled by the retry — it
//!   finds its row (630) or inserts it;
//! - every row it saw committed reads back with its value from the
//!   survivor, and nothing else is there.
//!
//! The killed node's angel is killed with it, so the node stays down: the
//! rows are read from the survivor alone (a node that rejoins serves before
//! it has caught up until node restart lands, issue 6 item 5).

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value as Json;
use skarv_client::{codes, Cluster, ErrorClass, ExecMode, Op, Session, Value};

use common::{id_value_table, sigkill, Sandbox};

/// The writer must commit again this soon after the kill.
const PROGRESS_AFTER_KILL_MAX_MS: u64 = 10_000;
/// Commits before the kill, so the kill lands in a steady load.
const COMMITS_BEFORE_KILL: usize = 200;
/// How long the writer goes on once it commits again after the kill.
const WRITE_AFTER_RECOVERY_MS: u64 = 1_000;
/// Commits after the kill that show the writer goes on (not one answer
/// that was on its way when the node died); thousands on a laptop.
const COMMITS_AFTER_KILL_MIN: usize = 20;
/// Bound on waiting for the writer's first commits.
const WARM_UP_MAX_MS: u64 = 30_000;
/// Pause before retrying after an error, so a node that answers at once
/// does not make the writer spin.
const RETRY_PAUSE_MS: u64 = 5;
/// Attempts of one row before the writer gives up (then the test fails).
const ATTEMPTS_MAX: u32 = 2_000;
const TABLE: &str = "failover_rows";

/// Which data node the test kills.
#[derive(Clone, Copy, Debug)]
enum Victim {
    /// The oldest member of the view, which makes views.
    President,
    /// The other one.
    Other,
}

impl Victim {
    fn name(self) -> &'static str {
        match self {
            Victim::President => "president",
            Victim::Other => "other",
        }
    }

    /// Ports of each test's sandbox.
    fn port_range(self) -> u16 {
        match self {
            Victim::President => 27_000,
            Victim::Other => 27_500,
        }
    }
}

/// The value the writer stores under `key`.
fn value_of(key: u64) -> u64 {
    key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 8
}

/// A failed attempt of the writer.
struct Failure {
    code: u32,
    class: ErrorClass,
    /// An earlier attempt of the same row ended with 4010.
    after_unknown_result: bool,
    what: String,
}

/// What the writer saw.
#[derive(Default)]
struct Log {
    /// Rows it saw committed, with when.
    committed: Vec<(u64, Instant)>,
    /// Failed attempts.
    errors: Vec<Failure>,
    /// A row it gave up on, or the last one it was writing when stopped
    /// after a 4010: it may or may not be there.
    unsettled: Option<u64>,
}

/// Inserts rows 0, 1, 2, … one at a time until `stop`; retries a row after
/// a temporary error or a 4010, and counts a 630 after a 4010 as committed.
fn writer(session: &Session, stop: &AtomicBool, log: &Mutex<Log>) {
    let table = session.table(TABLE).expect("the table");
    let mut key = 0u64;
    while !stop.load(Ordering::Acquire) {
        let mut maybe_committed = false;
        let mut attempts = 0u32;
        let committed = loop {
            if stop.load(Ordering::Acquire) || attempts >= ATTEMPTS_MAX {
                break false;
            }
            attempts += 1;
            let row = [("id", Value::UInt(key)), ("v", Value::UInt(value_of(key)))];
            let result = session
                .begin_with_hint(&table, &[Value::UInt(key)])
                .and_then(|tx| {
                    tx.insert(&table, &row)?;
                    tx.execute(ExecMode::Commit)
                });
            let error = match result {
                Ok(_) => break true,
                Err(error) => error,
            };
            let mut log = log.lock().unwrap_or_else(|p| p.into_inner());
            log.errors.push(Failure {
                code: error.code,
                class: error.class,
                after_unknown_result: maybe_committed,
                what: format!("row {key}, attempt {attempts}: {error}"),
            });
            if maybe_committed && error.code == codes::DUPLICATE_KEY {
                break true;
            }
            maybe_committed |= error.is_unknown_result();
            drop(log);
            std::thread::sleep(Duration::from_millis(RETRY_PAUSE_MS));
        };
        let mut log = log.lock().unwrap_or_else(|p| p.into_inner());
        if committed {
            log.committed.push((key, Instant::now()));
        } else {
            if maybe_committed || attempts >= ATTEMPTS_MAX {
                log.unsettled = Some(key);
            }
            return;
        }
        drop(log);
        key += 1;
    }
}

fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "no {what} within {limit:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_writer_goes_on_after_a_sigkill_of_the_president_and_loses_nothing() {
    writer_goes_on_after_a_sigkill(Victim::President);
}

#[test]
fn a_writer_goes_on_after_a_sigkill_of_the_other_node_and_loses_nothing() {
    writer_goes_on_after_a_sigkill(Victim::Other);
}

fn writer_goes_on_after_a_sigkill(victim_kind: Victim) {
    let sandbox = Sandbox::start(
        &format!("node-failure-{}", victim_kind.name()),
        victim_kind.port_range(),
    );
    let cluster = Cluster::connect(&sandbox.connect).expect("connect");
    let session = cluster.session().expect("session");
    let def = id_value_table(TABLE);
    session.create_table(&def).expect("create the table");

    let stop = Arc::new(AtomicBool::new(false));
    let log = Arc::new(Mutex::new(Log::default()));
    let writer_thread = {
        let (cluster, stop, log) = (cluster.clone(), Arc::clone(&stop), Arc::clone(&log));
        std::thread::spawn(move || {
            let session = cluster.session().expect("the writer's session");
            writer(&session, &stop, &log);
        })
    };
    let commits = || {
        log.lock()
            .unwrap_or_else(|p| p.into_inner())
            .committed
            .len()
    };
    wait_until(
        "commits before the kill",
        Duration::from_millis(WARM_UP_MAX_MS),
        || commits() >= COMMITS_BEFORE_KILL,
    );

    // The president: the oldest member of the view.
    let show = sandbox.show();
    let data: Vec<&Json> = show["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .filter(|n| n["type"] == "data")
        .collect();
    assert_eq!(data.len(), 2, "two data nodes: {show}");
    assert!(
        data.iter().all(|n| n["state"] == "started"),
        "both data nodes started: {show}"
    );
    let president = data[0]["members"][0].as_u64().expect("a view with members");
    let (victim, survivor) = {
        let (a, b): (Vec<&Json>, Vec<&Json>) = data.iter().partition(|n| n["id"] == president);
        match victim_kind {
            Victim::President => (a[0], b[0]),
            Victim::Other => (b[0], a[0]),
        }
    };
    let killed = victim["id"].as_u64().expect("a node id");
    let survivor = survivor["id"].as_u64().expect("a node id");
    let pid = victim["pid"].as_u64().expect("the victim's pid");
    let before = commits();
    sigkill(sandbox.angel_pid(killed));
    sigkill(pid);
    let killed_at = Instant::now();

    wait_until(
        "commit after the kill",
        Duration::from_millis(PROGRESS_AFTER_KILL_MAX_MS),
        || {
            let log = log.lock().unwrap_or_else(|p| p.into_inner());
            log.committed.last().is_some_and(|(_, at)| *at > killed_at)
        },
    );
    std::thread::sleep(Duration::from_millis(WRITE_AFTER_RECOVERY_MS));
    stop.store(true, Ordering::Release);
    writer_thread.join().expect("the writer thread");
    let log = Arc::try_unwrap(log)
        .ok()
        .expect("the writer is done")
        .into_inner()
        .unwrap_or_else(|p| p.into_inner());
    let recovered = log
        .committed
        .iter()
        .find(|(_, at)| *at > killed_at)
        .map(|(_, at)| at.duration_since(killed_at))
        .expect("a commit after the kill");
    let gap = log
        .committed
        .windows(2)
        .map(|w| w[1].1.duration_since(w[0].1))
        .max()
        .unwrap_or_default();
    let mut codes_seen: BTreeMap<u32, usize> = BTreeMap::new();
    for failure in &log.errors {
        *codes_seen.entry(failure.code).or_default() += 1;
    }
    eprintln!(
        "killed data node {killed} (the {}; president {president}) after {before} commits; first commit \
         {recovered:?} after the kill; longest gap between commits {gap:?}; {} commits; \
         errors by code {codes_seen:?}",
        victim_kind.name(),
        log.committed.len(),
    );
    let after_kill = log
        .committed
        .iter()
        .filter(|(_, at)| *at > killed_at)
        .count();
    assert!(
        after_kill >= COMMITS_AFTER_KILL_MIN,
        "the writer goes on after the kill: {after_kill} commits"
    );
    for failure in &log.errors {
        let allowed = failure.class == ErrorClass::Temporary
            || failure.code == codes::NODE_FAILURE
            || (failure.code == codes::DUPLICATE_KEY && failure.after_unknown_result);
        assert!(allowed, "an error that is not temporary: {}", failure.what);
    }

    // Read every row back; only the survivor is up, so it answers.
    assert_eq!(
        cluster
            .live_nodes()
            .iter()
            .map(|n| u64::from(n.get()))
            .collect::<Vec<_>>(),
        vec![survivor],
        "only the survivor is live"
    );
    let table = session.table(TABLE).expect("the table");
    let mut expected: BTreeMap<u64, Option<u64>> = log
        .committed
        .iter()
        .map(|&(key, _)| (key, Some(value_of(key))))
        .collect();
    assert_eq!(
        expected.len(),
        log.committed.len(),
        "each row committed once"
    );
    let next = log.committed.len() as u64;
    assert!(
        expected.keys().copied().eq(0..next),
        "rows 0..{next} committed in order"
    );
    // The row being written when the writer stopped is there only if an
    // attempt ended with 4010 (then it may be); else its attempts failed
    // or there were none.
    let unsettled = log.unsettled;
    if unsettled.is_none() {
        expected.insert(next, None);
    }
    expected.insert(next + 1, None);
    for (&key, want) in &expected {
        let found = read_value(&session, &table, key);
        assert_eq!(found, *want, "row {key}");
    }
    if let Some(key) = unsettled {
        let found = read_value(&session, &table, key);
        assert!(
            found.is_none() || found == Some(value_of(key)),
            "row {key} (outcome unknown to the writer): {found:?}"
        );
    }
    // The survivor's rows are the writer's rows: a count by scan agrees.
    let rows = {
        let tx = session.begin().expect("begin");
        let scan = tx.scan(&table, Default::default()).expect("scan the table");
        let mut count = 0u64;
        for row in scan {
            row.expect("a scanned row");
            count += 1;
        }
        count
    };
    let maybe = u64::from(unsettled.is_some_and(|k| read_value(&session, &table, k).is_some()));
    assert_eq!(rows, next + maybe, "rows on the survivor");
}

/// The value of row `key`, None when it is missing; retries temporary errors.
fn read_value(session: &Session, table: &Arc<skarv_client::Table>, key: u64) -> Option<u64> {
    for _ in 0..100 {
        let result = session
            .begin_with_hint(table, &[Value::UInt(key)])
            .and_then(|tx| {
                let read = tx.define(Op::read(table, &[Value::UInt(key)]).ignore_error())?;
                let mut outcome = tx.execute(ExecMode::Commit)?;
                Ok(outcome.take_row(read))
            });
        match result {
            Ok(row) => {
                return row.map(|row| match row.get("v") {
                    Some(Value::UInt(v)) => *v,
                    other => panic!("row {key}: v is {other:?}"),
                })
            }
            Err(error) if error.is_temporary() => {
                std::thread::sleep(Duration::from_millis(RETRY_PAUSE_MS));
            }
            Err(error) => panic!("reading row {key}: {error}"),
        }
    }
    panic!("reading row {key}: temporary errors 100 times");
}
