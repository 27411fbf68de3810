//! The change stream through data node failures, in real processes
//! (docs/events.md, issue 22 part 2): a 2 × 2 sandbox, two writers
//! updating rows while a subscriber records; data node 2 SIGKILLed (its
//! angel restarts it), then, once it is back and the subscriber is
//! subscribed there again, data node 3. The subscriber takes its events
//! every 100 ms, so the survivor's resend holds epochs it already has.
//! Afterwards:
//!
//! - every update whose commit the writer saw is in the record exactly
//!   once, in the epoch its outcome named;
//! - an update whose outcome the kill left unknown is in it at most once;
//!   none that failed is;
//! - each row's changes chain: every update's before image is the after
//!   image of the row's change before it in the record (nothing lost in
//!   between), and a row's values come in the order its writer wrote them;
//! - epochs ascending, each once, and no gap.
//!
//! And through a whole-cluster restart: both data nodes SIGKILLed at
//! once under the writers, the angels start them again and the cluster
//! restores its last complete GCI; the subscription goes on behind one
//! `Event::Restart` (see that test).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use skarv_client::{
    codes, ChangeKind, Cluster, Epoch, EpochChanges, Event, ExecMode, ScanOptions, Session,
    SubscribeOptions, Value,
};

/// `TimeBetweenEpochs` of the sandbox, in ms.
const EPOCH_INTERVAL_MS: u32 = 20;
/// Data nodes of the sandbox (one node group of two: nodes 2 and 3).
const DATA_NODES: usize = 2;
/// Rows, split between the writers by parity.
const KEYS: u64 = 32;
/// Writers, each on its own session and rows.
const WRITERS: u64 = 2;
/// Commits before the first kill, between the kills, and after the last.
const COMMITS_BETWEEN: usize = 150;
/// How long a killed node may take to be back and serving, and any other
/// wait of this test.
const WAIT_MAX: Duration = Duration::from_secs(120);
/// How often the subscriber takes its events (about 5 epochs).
const SUBSCRIBER_PAUSE_MS: u64 = 100;
/// Pause after a failed attempt of a writer.
const RETRY_PAUSE_MS: u64 = 20;

/// What the writers did: value → (key, the epoch its commit named, the
/// cluster incarnation of that epoch), and the values whose outcome is
/// unknown or that failed.
#[derive(Default)]
struct Writes {
    committed: BTreeMap<u64, (u64, u64, u32)>,
    unknown: BTreeSet<u64>,
    failed: BTreeSet<u64>,
    last_epoch: u64,
}

/// Updates the rows of writer `w` (keys ≡ w mod `WRITERS`) of table
/// `name` with values `w + WRITERS * n` (unique and ascending per writer)
/// until `stop`, idle while `pause`.
fn writer(
    session: &Session,
    name: &str,
    w: u64,
    (stop, pause): (&AtomicBool, &AtomicBool),
    writes: &Mutex<Writes>,
) {
    let table = session.table(name).expect("the table");
    let mut n = 1u64;
    let mut k = 0u64;
    while !stop.load(Ordering::Acquire) {
        if pause.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(RETRY_PAUSE_MS));
            continue;
        }
        let key = (k * WRITERS + w) % KEYS;
        let value = w + WRITERS * n;
        n += 1;
        let result = session.begin().and_then(|tx| {
            tx.update(&table, &[Value::UInt(key)], &[("v", Value::UInt(value))])?;
            tx.execute(ExecMode::Commit)
        });
        let mut writes = writes.lock().unwrap_or_else(|p| p.into_inner());
        match result {
            Ok(outcome) => {
                assert!(outcome.committed, "update {value} committed");
                let epoch = outcome.epoch.expect("a commit's epoch");
                writes.last_epoch = writes.last_epoch.max(epoch.get());
                writes
                    .committed
                    .insert(value, (key, epoch.get(), epoch.incarnation()));
                k += 1;
            }
            Err(error) => {
                if error.is_unknown_result() || error.code == codes::NODE_FAILURE {
                    writes.unknown.insert(value);
                } else {
                    writes.failed.insert(value);
                }
                drop(writes);
                std::thread::sleep(Duration::from_millis(RETRY_PAUSE_MS));
            }
        }
    }
}

impl Writes {
    /// Every update in the record was committed, or its outcome unknown
    /// (never one that failed).
    fn check_recorded(&self, recorded: &BTreeMap<u64, (u64, u64)>) {
        for value in recorded.keys() {
            assert!(
                self.committed.contains_key(value) || self.unknown.contains(value),
                "update {value} in the record was not committed (failed: {})",
                self.failed.contains(value)
            );
        }
    }
}

fn committed_count(writes: &Mutex<Writes>) -> usize {
    writes
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .committed
        .len()
}

/// The value of column `name` in `image`.
fn image_value(image: &Option<Vec<(&str, Value)>>, name: &str) -> u64 {
    let image = image.as_ref().expect("an image");
    match image.iter().find(|(n, _)| *n == name).map(|(_, v)| v) {
        Some(Value::UInt(v)) => *v,
        other => panic!("column {name}: {other:?}"),
    }
}

/// Every row of table `name`: key → `v`. Tried again for a while: right
/// after a system restart a scan may find a node still starting.
fn read_rows(session: &Session, name: &str) -> BTreeMap<u64, u64> {
    let attempt = || -> skarv_client::Result<BTreeMap<u64, u64>> {
        let table = session.table(name)?;
        let tx = session.begin()?;
        let mut rows = BTreeMap::new();
        for row in tx.scan(&table, ScanOptions::default())? {
            let row = row?;
            let column = |c: &str| match row.get(c) {
                Some(Value::UInt(v)) => *v,
                other => panic!("column {c}: {other:?}"),
            };
            rows.insert(column("id"), column("v"));
        }
        Ok(rows)
    };
    let deadline = Instant::now() + WAIT_MAX;
    loop {
        match attempt() {
            Ok(rows) => return rows,
            Err(error) => {
                assert!(Instant::now() < deadline, "reading {name}: {error}");
                std::thread::sleep(Duration::from_millis(RETRY_PAUSE_MS * 10));
            }
        }
    }
}

/// Checks that the changes of `events` chain per row from `rows` (each
/// update's before image the row's last value: nothing lost in between;
/// values ascending, each its row's writer's: in the writer's order) and
/// that epochs ascend above `above`, and records each value once in
/// `recorded` (value → (key, epoch)); `rows` ends as the record's last
/// value of each row.
fn chain(
    events: &[&EpochChanges],
    above: u64,
    rows: &mut BTreeMap<u64, u64>,
    recorded: &mut BTreeMap<u64, (u64, u64)>,
    what: &str,
) {
    let mut previous = above;
    for e in events {
        let epoch = e.epoch.get();
        assert!(
            epoch > previous,
            "{what}: epoch {} after {previous:#x}",
            e.epoch
        );
        previous = epoch;
        for change in &e.changes {
            assert_eq!(change.kind, ChangeKind::Update, "{what}: {change:?}");
            let key = image_value(&change.after, "id");
            let (before, after) = (
                image_value(&change.before, "v"),
                image_value(&change.after, "v"),
            );
            let last = rows.insert(key, after).expect("a row of the table");
            assert_eq!(
                before, last,
                "{what}: row {key}: the update to {after} in epoch {} follows {last} \
                 (a change lost in between, or doubled)",
                e.epoch
            );
            assert!(
                after > last,
                "{what}: row {key}: {after} after {last}: not in its writer's order"
            );
            assert_eq!(
                after % WRITERS,
                key % WRITERS,
                "{what}: row {key}: its writer's"
            );
            assert!(
                recorded.insert(after, (key, epoch)).is_none(),
                "{what}: update {after} twice in the record"
            );
        }
    }
}

/// Starts `WRITERS` writers of table `name` (`writer`), each on its own
/// connection.
fn start_writers(
    connect: &str,
    name: &'static str,
    (stop, pause): (&Arc<AtomicBool>, &Arc<AtomicBool>),
    writes: &Arc<Mutex<Writes>>,
) -> Vec<std::thread::JoinHandle<()>> {
    (0..WRITERS)
        .map(|w| {
            let (connect, stop, pause, writes) = (
                connect.to_owned(),
                Arc::clone(stop),
                Arc::clone(pause),
                Arc::clone(writes),
            );
            std::thread::spawn(move || {
                let cluster = Cluster::connect(&connect).expect("a writer connects");
                let session = cluster.session().expect("session");
                writer(&session, name, w, (&stop, &pause), &writes);
            })
        })
        .collect()
}

/// Stops the writers and gives what they did.
fn stop_writers(
    stop: &AtomicBool,
    writers: Vec<std::thread::JoinHandle<()>>,
    writes: Arc<Mutex<Writes>>,
) -> Writes {
    stop.store(true, Ordering::Release);
    for w in writers {
        w.join().expect("a writer");
    }
    Arc::try_unwrap(writes)
        .ok()
        .expect("the writers are done")
        .into_inner()
        .expect("the writes")
}

#[test]
fn the_stream_loses_and_doubles_nothing_when_data_nodes_are_killed() {
    let epochs = format!("TimeBetweenEpochs={EPOCH_INTERVAL_MS}");
    let sandbox = Sandbox::start_configured("events-failure", 24_000, 2, &["--set", &epochs]);
    let cluster = Cluster::connect(&sandbox.connect).expect("connect");
    let session = cluster.session().expect("session");
    session
        .create_table(&id_value_table("evf"))
        .expect("create the table");
    let table = session.table("evf").expect("evf");
    {
        let tx = session.begin().expect("begin");
        for key in 0..KEYS {
            tx.insert(&table, &[("id", Value::UInt(key)), ("v", Value::UInt(0))])
                .expect("insert");
        }
        tx.execute(ExecMode::Commit).expect("the rows");
    }

    // The subscriber, on a connection of its own, records until told the
    // last epoch it must reach.
    let first_epoch = Arc::new(AtomicU64::new(0));
    let want_epoch = Arc::new(AtomicU64::new(u64::MAX));
    let nodes_live = Arc::new(AtomicUsize::new(0));
    let ended = Arc::new(AtomicBool::new(false));
    let subscriber = {
        let connect = sandbox.connect.clone();
        let (first_epoch, want_epoch, nodes_live, ended) = (
            Arc::clone(&first_epoch),
            Arc::clone(&want_epoch),
            Arc::clone(&nodes_live),
            Arc::clone(&ended),
        );
        std::thread::spawn(move || {
            let cluster = Cluster::connect(&connect).expect("the subscriber connects");
            let session = cluster.session().expect("session");
            let mut sub = session
                .subscribe(&["evf"], SubscribeOptions::default())
                .expect("subscribe");
            let start = sub.start_epoch().get();
            let mut events = Vec::new();
            // Once told the last epoch, it waits at most `WAIT_MAX` for it.
            let mut deadline: Option<Instant> = None;
            loop {
                // A slow consumer: it takes what came every
                // `SUBSCRIBER_PAUSE_MS`, so its acknowledgements lag and a
                // survivor's resend holds epochs it has, which it drops.
                std::thread::sleep(Duration::from_millis(SUBSCRIBER_PAUSE_MS));
                while let Some(event) = sub.poll().expect("poll") {
                    if let Event::Epoch(e) = &event {
                        first_epoch
                            .compare_exchange(0, e.epoch.get(), Ordering::AcqRel, Ordering::Acquire)
                            .ok();
                    }
                    events.push(event);
                }
                let state = sub.state();
                nodes_live.store(state.nodes_live, Ordering::Release);
                ended.store(state.ended, Ordering::Release);
                let want = want_epoch.load(Ordering::Acquire);
                if want != u64::MAX && deadline.is_none() {
                    deadline = Some(Instant::now() + WAIT_MAX);
                }
                if state.ended
                    || state.last_epoch >= want
                    || deadline.is_some_and(|d| Instant::now() >= d)
                {
                    return (start, events, state);
                }
            }
        })
    };
    wait_for("the subscriber's first epoch", WAIT_MAX, || {
        first_epoch.load(Ordering::Acquire) != 0
    });
    let first = first_epoch.load(Ordering::Acquire);

    let (stop, pause) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let writes = Arc::new(Mutex::new(Writes::default()));
    let writers = start_writers(&sandbox.connect, "evf", (&stop, &pause), &writes);

    let mut killed = Vec::new();
    for victim in [2u64, 3] {
        let before = committed_count(&writes);
        wait_for("commits before the kill", WAIT_MAX, || {
            committed_count(&writes) >= before + COMMITS_BETWEEN
        });
        let pid = sandbox.pid(victim);
        sigkill(pid);
        killed.push((victim, Instant::now()));
        // The angel starts it again; it copies what it missed and serves.
        wait_for("the killed node back and started", WAIT_MAX, || {
            sandbox.started_pid(victim).is_some_and(|p| p != pid)
        });
        // The subscriber subscribed there again: the node can take buckets
        // over when the other one is killed.
        wait_for(
            "the subscriber subscribed at every node again",
            WAIT_MAX,
            || {
                assert!(
                    !ended.load(Ordering::Acquire),
                    "the subscription ended after the kill of node {victim}"
                );
                nodes_live.load(Ordering::Acquire) == DATA_NODES
            },
        );
    }
    let before = committed_count(&writes);
    wait_for("commits after the kills", WAIT_MAX, || {
        committed_count(&writes) >= before + COMMITS_BETWEEN
    });
    let writes = stop_writers(&stop, writers, writes);
    want_epoch.store(writes.last_epoch, Ordering::Release);
    let (start, events, state) = subscriber.join().expect("the subscriber");
    assert!(
        state.last_epoch >= writes.last_epoch,
        "the subscriber reached epoch {:#x}: {state:?}",
        writes.last_epoch
    );

    // ---- the record ----
    let epochs: Vec<&EpochChanges> = events
        .iter()
        .map(|event| match event {
            Event::Epoch(e) => e,
            other => panic!("a gap, none expected: {other:?}"),
        })
        .collect();
    let mut rows: BTreeMap<u64, u64> = (0..KEYS).map(|k| (k, 0)).collect();
    let mut recorded = BTreeMap::new();
    chain(&epochs, start, &mut rows, &mut recorded, "the record");
    for (value, &(key, epoch, _)) in &writes.committed {
        assert!(epoch > first, "committed after the first epoch came");
        assert_eq!(
            recorded.get(value),
            Some(&(key, epoch)),
            "update {value} of row {key}, committed in epoch {epoch:#x}: in the record once, \
             in that epoch"
        );
    }
    let unknown_in = writes
        .unknown
        .iter()
        .filter(|v| recorded.contains_key(v))
        .count();
    writes.check_recorded(&recorded);
    // The survivors took the killed nodes' buckets over, each time.
    let took_over: usize = std::fs::read_dir(&sandbox.dir)
        .expect("the sandbox's directory")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .map(|log| log.matches("took over buckets").count())
        .sum();
    assert!(
        took_over >= killed.len(),
        "{took_over} bucket take-overs logged for {} kills",
        killed.len()
    );
    eprintln!(
        "events through kills of {:?} ({took_over} take-overs): {} commits, {} outcomes unknown ({} in the record), \
         {} failed attempts; {} epochs recorded, {} changes",
        killed.iter().map(|k| k.0).collect::<Vec<_>>(),
        writes.committed.len(),
        writes.unknown.len(),
        unknown_in,
        writes.failed.len(),
        events.len(),
        recorded.len()
    );
}

/// Every data node SIGKILLed at once under two writers; the angels start
/// them again and the cluster restores its last complete GCI R (a system
/// restart, a new cluster incarnation). The subscription, on a connection
/// of its own, waits through the outage (no gap: nothing is known lost
/// while the cluster is down), is told `SubLostRef` by the restarted
/// nodes, subscribes anew, and goes on behind one `Event::Restart {
/// restored, resumed }`. The writers pause from the kill until the
/// subscriber has that event, then write as many updates again. Checked:
///
/// - `restored` is R's last epoch: every update committed before the kill
///   in an epoch at or below it is in the rows as read after the restart
///   (the row's value is at least it), none above it is;
/// - before the event, the record chains per row from the rows' first
///   values, and holds each update committed at or below both `restored`
///   and the last epoch handed out before, once, in its epoch;
/// - after it, the record chains from the rows as the restart left them
///   (nothing was written between), holds every update committed after
///   the restart once, in its epoch (each above `resumed`), and ends at
///   the rows' final values;
/// - no gap, one restart event.
#[test]
fn the_stream_goes_on_through_a_whole_cluster_restart() {
    const TABLE: &str = "evr";
    let epochs = format!("TimeBetweenEpochs={EPOCH_INTERVAL_MS}");
    let sandbox = Sandbox::start_configured("events-restart", 24_500, 2, &["--set", &epochs]);
    let cluster = Cluster::connect(&sandbox.connect).expect("connect");
    let session = cluster.session().expect("session");
    session
        .create_table(&id_value_table(TABLE))
        .expect("create the table");
    let table = session.table(TABLE).expect("the table");
    {
        let tx = session.begin().expect("begin");
        for key in 0..KEYS {
            tx.insert(&table, &[("id", Value::UInt(key)), ("v", Value::UInt(0))])
                .expect("insert");
        }
        let rows = tx.execute(ExecMode::Commit).expect("the rows");
        session
            .wait_durable(rows.epoch.expect("an epoch"))
            .expect("the rows are durable");
    }

    // The subscriber records until it has the restart event and then
    // epoch `want_epoch` (of the restarted cluster).
    let first_epoch = Arc::new(AtomicU64::new(0));
    let restarted = Arc::new(AtomicBool::new(false));
    let want_epoch = Arc::new(AtomicU64::new(u64::MAX));
    let subscriber = {
        let connect = sandbox.connect.clone();
        let (first_epoch, restarted, want_epoch) = (
            Arc::clone(&first_epoch),
            Arc::clone(&restarted),
            Arc::clone(&want_epoch),
        );
        std::thread::spawn(move || {
            let cluster = Cluster::connect(&connect).expect("the subscriber connects");
            let session = cluster.session().expect("session");
            let mut sub = session
                .subscribe(&[TABLE], SubscribeOptions::default())
                .expect("subscribe");
            let mut events = Vec::new();
            let mut deadline: Option<Instant> = None;
            loop {
                std::thread::sleep(Duration::from_millis(SUBSCRIBER_PAUSE_MS));
                while let Some(event) = sub.poll().expect("poll") {
                    match &event {
                        Event::Epoch(e) => {
                            first_epoch
                                .compare_exchange(
                                    0,
                                    e.epoch.get(),
                                    Ordering::AcqRel,
                                    Ordering::Acquire,
                                )
                                .ok();
                        }
                        Event::Restart { .. } => restarted.store(true, Ordering::Release),
                        Event::Gap { .. } => {}
                    }
                    events.push(event);
                }
                let state = sub.state();
                let want = want_epoch.load(Ordering::Acquire);
                if want != u64::MAX && deadline.is_none() {
                    deadline = Some(Instant::now() + WAIT_MAX);
                }
                if state.ended
                    || (restarted.load(Ordering::Acquire) && state.last_epoch >= want)
                    || deadline.is_some_and(|d| Instant::now() >= d)
                {
                    return (events, state);
                }
            }
        })
    };
    wait_for("the subscriber's first epoch", WAIT_MAX, || {
        first_epoch.load(Ordering::Acquire) != 0
    });

    let (stop, pause) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let writes = Arc::new(Mutex::new(Writes::default()));
    let writers = start_writers(&sandbox.connect, TABLE, (&stop, &pause), &writes);
    wait_for("commits before the kill", WAIT_MAX, || {
        committed_count(&writes) >= COMMITS_BETWEEN
    });
    // Some of them durable, then more that may not be, when the kill comes.
    let (last, incarnation) = {
        let writes = writes.lock().unwrap();
        let last = writes
            .committed
            .values()
            .max_by_key(|c| c.1)
            .expect("commits");
        (last.1, last.2)
    };
    session
        .wait_durable(Epoch::from_u64(last).in_incarnation(incarnation))
        .expect("updates durable");
    let durable = committed_count(&writes);
    wait_for("more commits before the kill", WAIT_MAX, || {
        committed_count(&writes) >= durable + COMMITS_BETWEEN
    });
    let old: Vec<(u64, u64)> = [2u64, 3].iter().map(|&n| (n, sandbox.pid(n))).collect();
    for &(_, pid) in &old {
        sigkill(pid);
    }
    pause.store(true, Ordering::Release);
    let incarnation_before = {
        let writes = writes.lock().unwrap();
        let incarnations: BTreeSet<u32> = writes.committed.values().map(|c| c.2).collect();
        assert_eq!(incarnations.len(), 1, "one incarnation before the kill");
        *incarnations.first().expect("commits")
    };
    wait_for("every data node started again", WAIT_MAX, || {
        old.iter()
            .all(|&(n, pid)| sandbox.started_pid(n).is_some_and(|p| p != pid))
    });
    wait_for("the subscriber's restart event", WAIT_MAX, || {
        restarted.load(Ordering::Acquire)
    });
    // The rows as the restart left them (nothing written since).
    let restored_rows = read_rows(&session, TABLE);
    let before_restart = committed_count(&writes);
    pause.store(false, Ordering::Release);
    wait_for("commits after the restart", WAIT_MAX, || {
        committed_count(&writes) >= before_restart + COMMITS_BETWEEN
    });
    let writes = stop_writers(&stop, writers, writes);
    want_epoch.store(writes.last_epoch, Ordering::Release);
    let (events, state) = subscriber.join().expect("the subscriber");
    assert!(!state.ended, "the subscription goes on: {state:?}");
    let final_rows = read_rows(&session, TABLE);

    // ---- the record ----
    let at = events
        .iter()
        .position(|e| matches!(e, Event::Restart { .. }))
        .expect("a restart event");
    let Event::Restart { restored, resumed } = events[at] else {
        unreachable!("matched")
    };
    let (restored, resumed) = (restored.get(), resumed.get());
    let epochs = |events: &[Event]| -> Vec<EpochChanges> {
        events
            .iter()
            .map(|e| match e {
                Event::Epoch(e) => e.clone(),
                other => panic!("one restart event and no gap: {other:?}"),
            })
            .collect()
    };
    let (before, after) = (epochs(&events[..at]), epochs(&events[at + 1..]));
    let last_before = before.last().map_or(0, |e| e.epoch.get());
    let (old_writes, new_writes): (Vec<_>, Vec<_>) = writes
        .committed
        .iter()
        .map(|(&value, &(key, epoch, incarnation))| (value, key, epoch, incarnation))
        .partition(|c| c.3 == incarnation_before);
    assert!(
        new_writes
            .iter()
            .all(|c| c.3 != 0 && c.3 == new_writes[0].3),
        "one incarnation after the restart"
    );

    // What the restart kept: every update at or below `restored`, none
    // above it.
    let kept = old_writes.iter().filter(|c| c.2 <= restored).count();
    assert!(
        kept > 0,
        "the restart kept some of the {} updates",
        old_writes.len()
    );
    for &(value, key, epoch, _) in &old_writes {
        let row = restored_rows[&key];
        if epoch <= restored {
            assert!(
                row >= value,
                "row {key} = {row}: update {value} (epoch {epoch:#x}) was kept"
            );
        } else {
            assert_ne!(
                row, value,
                "row {key}: update {value} (epoch {epoch:#x}) was undone"
            );
        }
    }

    // Before the restart: a chain from the first values.
    let mut rows: BTreeMap<u64, u64> = (0..KEYS).map(|k| (k, 0)).collect();
    let mut recorded = BTreeMap::new();
    chain(
        &before.iter().collect::<Vec<_>>(),
        0,
        &mut rows,
        &mut recorded,
        "before the restart",
    );
    for &(value, key, epoch, _) in &old_writes {
        if epoch <= restored.min(last_before) {
            assert_eq!(
                recorded.get(&value),
                Some(&(key, epoch)),
                "update {value} of row {key} (epoch {epoch:#x}, kept, handed out before the restart)"
            );
        }
    }
    writes.check_recorded(&recorded);

    // After it: a chain from the rows as the restart left them.
    let mut rows = restored_rows.clone();
    let mut recorded = BTreeMap::new();
    chain(
        &after.iter().collect::<Vec<_>>(),
        resumed,
        &mut rows,
        &mut recorded,
        "after the restart",
    );
    for &(value, key, epoch, _) in &new_writes {
        assert!(
            epoch > resumed,
            "update {value} committed after the stream resumed"
        );
        assert_eq!(
            recorded.get(&value),
            Some(&(key, epoch)),
            "update {value} of row {key}, committed in epoch {epoch:#x} after the restart: in \
             the record once, in that epoch"
        );
    }
    assert_eq!(rows, final_rows, "the record ends at the rows' values");
    eprintln!(
        "events through a whole-cluster restart: {} updates before the kill ({} kept: restored \
         to {restored:#x}; {} epochs handed out before, the last {last_before:#x}), resumed after \
         {resumed:#x}, {} updates after in {} epochs",
        old_writes.len(),
        kept,
        before.len(),
        new_writes.len(),
        after.len(),
    );
}
