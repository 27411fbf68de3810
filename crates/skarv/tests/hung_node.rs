//! Real processes: a sandbox of 2 data nodes × 2 replicas under writers,
//! and one data node hung with SIGSTOP (issue 25, item 3). A hung node
//! closes no connection: the others find it out by its missed heartbeats
//! (`HeartbeatIntervalDbDb`, whose default bounds that near 1 s), and the
//! API node by the view they tell it. The test asserts that commits stall
//! at most [`STALL_MAX_MS`] (NDB's default heartbeat stalled them for 20 s)
//! and that the client keeps its connection to the survivor.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use skarv_client::{Cluster, ExecMode, Session, Value};

use common::{id_value_table, Sandbox, Stopped};

/// The longest gap between two commits allowed while a node hangs:
/// generous for CI's two slow cores and a debug build (the default
/// heartbeat declares the node failed after 1 s).
const STALL_MAX_MS: u64 = 4_000;
/// How long the node stays hung: well past the stall allowed, so that a
/// failure detection slower than that shows.
const HUNG_MS: u64 = 8_000;
/// Commits before the node hangs, so that it hangs under a steady load.
const COMMITS_BEFORE_MIN: usize = 200;
const WARM_UP_MAX_MS: u64 = 30_000;
const WRITERS: usize = 2;
const ROWS: u64 = 1_000;
const TABLE: &str = "hung_node_rows";

/// Updates rows until `stop`, noting when each commit came back; errors
/// (the hung node's transactions fail over) are retried.
fn writer(session: &Session, first: u64, stop: &AtomicBool, commits: &Mutex<Vec<Instant>>) {
    let table = session.table(TABLE).expect("the table");
    let mut key = first;
    while !stop.load(Ordering::Acquire) {
        key = (key + 7) % ROWS;
        let id = [Value::UInt(key)];
        let result = session.begin_with_hint(&table, &id).and_then(|tx| {
            tx.update(&table, &id, &[("v", Value::UInt(key))])?;
            tx.execute(ExecMode::Commit)
        });
        if result.is_ok() {
            commits
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(Instant::now());
        }
    }
}

#[test]
fn commits_stall_briefly_while_a_data_node_hangs() {
    let sandbox = Sandbox::start("hung-node", 33_000);
    let cluster = Cluster::connect(&sandbox.connect).expect("connect");
    let session = cluster.session().expect("session");
    let def = id_value_table(TABLE);
    session.create_table(&def).expect("create the table");
    let table = session.table(TABLE).expect("the table");
    let tx = session.begin().expect("begin");
    for id in 0..ROWS {
        tx.insert(&table, &[("id", Value::UInt(id)), ("v", Value::UInt(0))])
            .expect("insert");
    }
    tx.execute(ExecMode::Commit).expect("the rows");

    let stop = Arc::new(AtomicBool::new(false));
    let commits = Arc::new(Mutex::new(Vec::new()));
    let writers: Vec<_> = (0..WRITERS as u64)
        .map(|first| {
            let (cluster, stop, commits) =
                (cluster.clone(), Arc::clone(&stop), Arc::clone(&commits));
            std::thread::spawn(move || {
                let session = cluster.session().expect("a writer's session");
                writer(&session, first, &stop, &commits);
            })
        })
        .collect();
    let count = || commits.lock().unwrap_or_else(|p| p.into_inner()).len();
    let warm_up = Instant::now();
    while count() < COMMITS_BEFORE_MIN {
        assert!(
            warm_up.elapsed() < Duration::from_millis(WARM_UP_MAX_MS),
            "{} commits in {WARM_UP_MAX_MS} ms",
            count()
        );
        std::thread::yield_now();
    }

    // Data node 3: the one that is not the president (node 2, the oldest).
    let hung_at = Instant::now();
    let hung = Stopped::stop(sandbox.pid(3));
    while hung_at.elapsed() < Duration::from_millis(HUNG_MS) {
        std::thread::park_timeout(Duration::from_millis(100));
    }
    stop.store(true, Ordering::Release);
    for writer in writers {
        writer.join().expect("a writer");
    }
    let live = cluster.live_nodes();
    drop(hung);

    let commits = commits.lock().unwrap_or_else(|p| p.into_inner());
    let mut previous = hung_at;
    let mut longest = Duration::ZERO;
    for &at in commits.iter().filter(|&&at| at > hung_at) {
        longest = longest.max(at - previous);
        previous = at;
    }
    longest = longest.max(hung_at + Duration::from_millis(HUNG_MS) - previous);
    assert!(
        longest < Duration::from_millis(STALL_MAX_MS),
        "commits stalled {longest:?} while node 3 hung (at most {STALL_MAX_MS} ms allowed)"
    );
    assert!(
        live.iter().any(|n| n.get() == 2),
        "the client lost the survivor: live {live:?}"
    );
}
