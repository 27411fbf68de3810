//! The change stream in real processes (docs/events.md): a 2 × 2
//! sandbox (so each data node sends the partitions it is primary of, and
//! the subscriber merges them) with `TimeBetweenEpochs=20`.
//!
//! - The stream equals the committed history, epoch by epoch: native
//!   transactions insert, update and delete rows of a subscribed table
//!   (and write an unsubscribed one), each commit's epoch taken from its
//!   outcome; every epoch comes once, in ascending order, empty ones too,
//!   and each epoch's changes of each row are the committed ones in commit
//!   order.
//! - A subscriber that stops taking events is cut off by the data nodes
//!   once `MaxBufferedEpochs` behind, with a gap, while another keeps
//!   going and writes go on; a subscription whose `max_alloc` overflows
//!   gets a gap and goes on.
//! - `skarv events --json` prints the lines issue 22 specifies, with the
//!   table named as SQL shows it.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use skarv_client::schema_types::{Column, ColumnType, TableDef};
use skarv_client::{
    ChangeKind, Cluster, Event, ExecMode, Images, Session, SubscribeOptions, Subscription, Value,
};

/// `TimeBetweenEpochs` of the sandbox, in ms.
const EPOCH_INTERVAL_MS: u32 = 20;
/// `MaxBufferedEpochs` of the sandbox: the cut-off test waits for this
/// many epochs (at 20 ms, 0.6 s).
const MAX_BUFFERED_EPOCHS: u32 = 30;
/// Transactions of the history test.
const TRANSACTIONS: usize = 150;
/// Rows the history test's transactions pick from.
const KEYS: u64 = 24;
/// How long any wait for the stream may take before the test fails.
const STREAM_WAIT: Duration = Duration::from_secs(60);

/// A 2 × 2 sandbox with this file's epoch settings, its ports in
/// `port_range..+500` (each test its own range, below the ephemeral
/// ports, where another test's closed connections cannot hold them).
fn sandbox(name: &str, port_range: u16) -> Sandbox {
    let epochs = format!("TimeBetweenEpochs={EPOCH_INTERVAL_MS}");
    let buffered = format!("MaxBufferedEpochs={MAX_BUFFERED_EPOCHS}");
    Sandbox::start_configured(name, port_range, 2, &["--set", &epochs, "--set", &buffered])
}

/// One row's committed change, as the history test expects it: kind, the
/// value before and after.
type Expected = (ChangeKind, Option<u64>, Option<u64>);

fn column(image: &Option<Vec<(&str, Value)>>, name: &str) -> Option<u64> {
    let image = image.as_ref()?;
    let (_, value) = image.iter().find(|(n, _)| *n == name)?;
    match value {
        Value::UInt(v) => Some(*v),
        Value::Int(v) => u64::try_from(*v).ok(),
        other => panic!("column {name} holds {other:?}"),
    }
}

/// Takes every event ready, without waiting.
fn drain(sub: &mut Subscription, into: &mut Vec<Event>) {
    while let Some(event) = sub.poll().expect("poll") {
        into.push(event);
    }
}

/// Waits for the subscription's next epoch (past its start): what is
/// committed after it comes is in the stream.
fn first_epoch(sub: &mut Subscription) -> u64 {
    match sub.next_timeout(STREAM_WAIT).expect("an event") {
        Some(Event::Epoch(e)) => e.epoch.get(),
        other => panic!("expected an epoch, got {other:?}"),
    }
}

fn create(session: &Session, def: &TableDef) {
    session.create_table(def).expect("create the table");
}

#[test]
fn the_stream_is_the_committed_history_and_slow_subscribers_get_gaps() {
    let sandbox = sandbox("events", 19_000);
    let cluster = Cluster::connect(&sandbox.connect).expect("connect");
    let session = cluster.session().expect("session");
    create(&session, &id_value_table("evt"));
    create(&session, &id_value_table("other"));
    let evt = session.table("evt").expect("evt");
    let other = session.table("other").expect("other");

    let mut sub = session
        .subscribe(&["evt"], SubscribeOptions::default())
        .expect("subscribe");
    // This one takes nothing until the data nodes cut it off.
    let mut slow = session
        .subscribe(&["evt"], SubscribeOptions::default())
        .expect("subscribe the slow one");
    let mut events = Vec::new();
    let first = first_epoch(&mut sub);

    // ---- the history ----
    let mut rows: BTreeMap<u64, u64> = BTreeMap::new();
    let mut expected: BTreeMap<u64, BTreeMap<u64, Vec<Expected>>> = BTreeMap::new();
    let mut random = xorshift(0x2545_f491_4f6c_dd1du64);
    let mut last_epoch = 0u64;
    for t in 0..TRANSACTIONS {
        let tx = session.begin().expect("begin");
        let mut keys: Vec<u64> = Vec::new();
        let mut changes: Vec<(u64, Expected)> = Vec::new();
        for _ in 0..=random(3) {
            let key = random(KEYS);
            if keys.contains(&key) {
                continue;
            }
            keys.push(key);
            let v = t as u64 * 10 + keys.len() as u64;
            match rows.get(&key).copied() {
                None => {
                    tx.insert(&evt, &[("id", Value::UInt(key)), ("v", Value::UInt(v))])
                        .expect("insert");
                    changes.push((key, (ChangeKind::Insert, None, Some(v))));
                }
                Some(old) if random(4) == 0 => {
                    tx.delete(&evt, &[Value::UInt(key)]).expect("delete");
                    changes.push((key, (ChangeKind::Delete, Some(old), None)));
                }
                Some(old) => {
                    tx.update(&evt, &[Value::UInt(key)], &[("v", Value::UInt(v))])
                        .expect("update");
                    changes.push((key, (ChangeKind::Update, Some(old), Some(v))));
                }
            }
        }
        if random(3) == 0 {
            tx.write(
                &other,
                &[("id", Value::UInt(t as u64)), ("v", Value::UInt(1))],
            )
            .expect("write the unsubscribed table");
        }
        let outcome = tx.execute(ExecMode::Commit).expect("commit");
        assert!(outcome.committed);
        let epoch = outcome.epoch.expect("a commit's epoch").get();
        assert!(epoch > first, "committed after the first epoch came");
        last_epoch = last_epoch.max(epoch);
        for (key, change) in changes {
            match change.2 {
                Some(v) => rows.insert(key, v),
                None => rows.remove(&key),
            };
            expected
                .entry(epoch)
                .or_default()
                .entry(key)
                .or_default()
                .push(change);
        }
        // Keeping up: take what came (this acknowledges it).
        drain(&mut sub, &mut events);
    }
    let deadline = Instant::now() + STREAM_WAIT;
    while !events
        .iter()
        .any(|e| matches!(e, Event::Epoch(e) if e.epoch.get() >= last_epoch))
    {
        assert!(Instant::now() < deadline, "epoch {last_epoch} never came");
        if let Some(event) = sub.next_timeout(Duration::from_secs(1)).expect("next") {
            events.push(event);
        }
    }

    // ---- the stream equals it, epoch by epoch ----
    let mut got: BTreeMap<u64, BTreeMap<u64, Vec<Expected>>> = BTreeMap::new();
    let mut previous = first;
    let mut empty = 0;
    for event in &events {
        let Event::Epoch(e) = event else {
            panic!("a gap in a subscriber that kept up: {event:?}");
        };
        let epoch = e.epoch.get();
        assert!(epoch > previous, "epoch {} after {}", e.epoch, previous);
        previous = epoch;
        if e.changes.is_empty() {
            empty += 1;
        }
        for change in &e.changes {
            assert_eq!(change.table, "evt", "only the subscribed table");
            let key = column(&change.before, "id")
                .or(column(&change.after, "id"))
                .expect("a key");
            let v = (
                change.kind,
                column(&change.before, "v"),
                column(&change.after, "v"),
            );
            got.entry(epoch)
                .or_default()
                .entry(key)
                .or_default()
                .push(v);
        }
    }
    got.retain(|&e, _| e <= last_epoch);
    assert_eq!(got, expected, "the stream is the committed history");
    let state = sub.state();
    assert_eq!(state.gaps, 0);
    assert!(!state.ended);

    // ---- the slow one was cut off, and the cluster went on ----
    // Wait (on the subscriber that keeps up) until the slow one is more
    // than MaxBufferedEpochs behind its start.
    let behind = u64::from(MAX_BUFFERED_EPOCHS) + 5;
    let mut epochs_seen = events.len() as u64;
    while epochs_seen <= behind {
        if let Some(Event::Epoch(e)) = sub.next_timeout(STREAM_WAIT).expect("next") {
            epochs_seen += 1;
            empty += usize::from(e.changes.is_empty());
        }
    }
    assert!(empty > 0, "epochs without changes come too");
    let mut slow_events = Vec::new();
    // Everything it holds, then the gap that ended it.
    while let Some(event) = slow.next_timeout(STREAM_WAIT).expect("next") {
        slow_events.push(event);
    }
    assert!(slow.state().ended, "not cut off: {:?}", slow.state());
    let gap = slow_events.last().expect("a gap");
    assert!(
        matches!(gap, Event::Gap { from, to } if from.get() <= to.get()),
        "ends with a gap: {gap:?}"
    );
    // Writes go on.
    let tx = session.begin().expect("begin");
    tx.write(&evt, &[("id", Value::UInt(1_000)), ("v", Value::UInt(7))])
        .expect("write");
    let outcome = tx
        .execute(ExecMode::Commit)
        .expect("a write after the cut-off");
    let epoch = outcome.epoch.expect("epoch").get();
    let deadline = Instant::now() + STREAM_WAIT;
    loop {
        assert!(
            Instant::now() < deadline,
            "the write after the cut-off never came"
        );
        if let Some(Event::Epoch(e)) = sub.next_timeout(Duration::from_secs(1)).expect("next") {
            if e.epoch.get() >= epoch {
                assert!(e.epoch.get() > epoch || e.changes.len() == 1);
                break;
            }
        }
    }

    // ---- max_alloc: the subscriber's own buffer overflows into a gap ----
    let small = SubscribeOptions {
        max_alloc: 600,
        images: Images::Minimal,
        ..SubscribeOptions::default()
    };
    let mut tiny = session.subscribe(&["evt"], small).expect("subscribe");
    first_epoch(&mut tiny);
    // 40 rows of about 40 bytes each (both images) in one epoch or a few:
    // more than 600 bytes arrive before they are taken.
    let tx = session.begin().expect("begin");
    for k in 0..40u64 {
        tx.write(
            &evt,
            &[("id", Value::UInt(2_000 + k)), ("v", Value::UInt(k))],
        )
        .expect("write");
    }
    let epoch = tx
        .execute(ExecMode::Commit)
        .expect("commit")
        .epoch
        .expect("epoch")
        .get();
    let mut gap = None;
    let deadline = Instant::now() + STREAM_WAIT;
    while gap.is_none() {
        assert!(Instant::now() < deadline, "no gap for the overflow");
        match tiny.next_timeout(Duration::from_secs(1)).expect("next") {
            Some(Event::Gap { from, to }) => gap = Some((from.get(), to.get())),
            Some(Event::Epoch(e)) => assert!(e.epoch.get() < epoch, "the big epoch fits?"),
            Some(restart @ Event::Restart { .. }) => panic!("no restart here: {restart:?}"),
            None => {}
        }
    }
    let (from, to) = gap.expect("a gap");
    assert!(
        from <= epoch && epoch <= to,
        "the gap {from}..{to} holds epoch {epoch}"
    );
    // It goes on after the gap.
    match tiny.next_timeout(STREAM_WAIT).expect("next") {
        Some(Event::Epoch(e)) => assert!(e.epoch.get() > to),
        other => panic!("an epoch after the gap, got {other:?}"),
    }
    assert!(!tiny.state().ended);
    assert!(tiny.state().bytes_used <= 600);
}

#[test]
fn skarv_events_prints_json_lines() {
    let sandbox = sandbox("events-json", 19_500);
    let cluster = Cluster::connect(&sandbox.connect).expect("connect");
    let session = cluster.session().expect("session");
    // A table as the SQL node names `shop.items`.
    create(&session, &id_value_table("shop/def/items"));
    let items = session.table("shop/def/items").expect("the table");
    let mut child = Command::new(SKARV)
        .args([
            "events",
            "--connect",
            &sandbox.connect,
            "--table",
            "shop.items",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start skarv events");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut next = || -> serde_json::Value {
        let line = lines.next().expect("a line").expect("read");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    };
    // Past the subscription's start once an epoch completed.
    let first = next();
    assert_eq!(first["complete"], true, "{first}");
    let commit = |ops: &dyn Fn(&skarv_client::Transaction<'_>)| {
        let tx = session.begin().expect("begin");
        ops(&tx);
        tx.execute(ExecMode::Commit)
            .expect("commit")
            .epoch
            .expect("epoch")
    };
    let e1 = commit(&|tx| {
        tx.insert(&items, &[("id", Value::UInt(1)), ("v", Value::UInt(10))])
            .expect("insert");
    });
    let e2 = commit(&|tx| {
        tx.update(&items, &[Value::UInt(1)], &[("v", Value::UInt(11))])
            .expect("update");
    });
    let e3 = commit(&|tx| {
        tx.delete(&items, &[Value::UInt(1)]).expect("delete");
    });
    // Altered (a column added), a row of the new definition, dropped.
    let mut def = items.def().clone();
    def.columns
        .push(Column::new("w", ColumnType::BigInt { unsigned: true }).nullable());
    session.alter_table(def).expect("alter");
    let altered = session.table("shop/def/items").expect("the altered table");
    let e4 = commit(&|tx| {
        tx.insert(
            &altered,
            &[
                ("id", Value::UInt(2)),
                ("v", Value::UInt(20)),
                ("w", Value::UInt(7)),
            ],
        )
        .expect("insert");
    });
    session.drop_table("shop/def/items").expect("drop");
    let mut changes = Vec::new();
    let deadline = Instant::now() + STREAM_WAIT;
    while changes.len() < 6 {
        assert!(Instant::now() < deadline, "6 changes never came");
        let line = next();
        if line.get("kind").is_some() || line.get("schema").is_some() {
            changes.push(line);
        } else if let Some(gap) = line.get("gap") {
            panic!("a gap: {gap}");
        } else {
            assert_eq!(line["complete"], true, "{line}");
            assert!(line["epoch"].as_str().is_some_and(|e| e.contains('/')));
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let want = [
        serde_json::json!({"epoch": e1.to_string(), "table": "shop.items", "kind": "insert",
                           "before": null, "after": {"id": 1, "v": 10}}),
        serde_json::json!({"epoch": e2.to_string(), "table": "shop.items", "kind": "update",
                           "before": {"id": 1, "v": 10}, "after": {"id": 1, "v": 11}}),
        serde_json::json!({"epoch": e3.to_string(), "table": "shop.items", "kind": "delete",
                           "before": {"id": 1, "v": 11}, "after": null}),
    ];
    assert_eq!(changes[..3], want);
    // The schema events where they fall: the alter's epoch is between the
    // delete's and the new row's; the drop's after the new row.
    let (alter, insert, drop) = (&changes[3], &changes[4], &changes[5]);
    assert_eq!(alter["schema"], "alter", "{alter}");
    assert_eq!(alter["table"], "shop.items");
    assert_eq!(alter["version"], altered.def().version);
    let epoch = |line: &serde_json::Value| -> u64 {
        let text = line["epoch"].as_str().expect("an epoch");
        let (hi, lo) = text.split_once('/').expect("hi/lo");
        (hi.parse::<u64>().unwrap() << 32) | lo.parse::<u64>().unwrap()
    };
    assert!(
        epoch(alter) >= e3.get() && epoch(alter) <= e4.get(),
        "{alter}"
    );
    assert_eq!(
        *insert,
        serde_json::json!({"epoch": e4.to_string(), "table": "shop.items", "kind": "insert",
                           "before": null, "after": {"id": 2, "v": 20, "w": 7}})
    );
    assert_eq!(drop["schema"], "drop", "{drop}");
    assert!(epoch(drop) >= e4.get(), "{drop}");
}
