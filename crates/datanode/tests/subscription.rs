//! The change stream in the simulator (docs/events.md): two data
//! nodes of one node group, two LDM instances each, as real nodes are
//! wired; the test's API node subscribes at both subscription blocks and
//! acknowledges what it gets. Transactions of one and two rows (one-phase
//! commits, commit chains, chains batched between the nodes) insert,
//! update and delete; the changes received, each node sending the
//! partitions it is primary of, merged per epoch, equal the committed
//! history epoch by epoch (each row's changes in commit order), and every
//! epoch comes once from each node, in ascending order.

mod common;
#[path = "common/transactions.rs"]
mod transactions;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use datanode::subscription::SubscriptionBlock;
use proto::ops::OpKind;
use schema::row::RowLayout;
use schema::Value;
use signal::{sub_change, sub_flags, Signal, SignalBody};
use transactions::*;

/// One row's change: kind, `v` before and after (`None`: no image, or NULL).
type Change = (u8, Option<i64>, Option<i64>);

/// Removes the change-stream signals the API node got.
fn take_sub(cluster: &Cluster) -> Vec<Signal> {
    let mut got = cluster.got.lock().unwrap();
    let (sub, rest): (Vec<Signal>, Vec<Signal>) = got
        .drain(..)
        .partition(|s| s.body.name().starts_with("Sub"));
    *got = rest;
    sub
}

#[test]
fn the_simulated_stream_is_the_committed_history() {
    let mut cluster = Cluster::start(77, 2, Limits::default());
    let table = cluster.create_table();
    let layout = RowLayout::new(&table);
    let nodes = cluster.data_nodes.clone();
    for &n in &nodes {
        cluster.send(
            SubscriptionBlock::address(n),
            SignalBody::SubStartReq {
                sub_id: 1,
                flags: sub_flags::FULL_IMAGES,
                tables: vec![table.id],
            },
        );
    }
    let mut start = 0u64;
    let mut answered = 0;
    let mut early = Vec::new();
    while answered < nodes.len() {
        cluster.sim.run_for(Duration::from_millis(1));
        for s in take_sub(&cluster) {
            match s.body {
                SignalBody::SubStartConf { start_epoch, .. } => {
                    start = start.max(start_epoch);
                    answered += 1;
                }
                _ => early.push(s),
            }
        }
    }

    // The history: rows 0..16, transactions of one or two rows.
    let mut rows: BTreeMap<i64, i64> = BTreeMap::new();
    let mut expected: BTreeMap<u64, BTreeMap<i64, Vec<Change>>> = BTreeMap::new();
    let mut received = early;
    let mut last_epoch = 0;
    for t in 0..120i64 {
        let keys: Vec<i64> = if t % 3 == 0 {
            vec![t % 16, (t * 7 + 3) % 16]
        } else {
            vec![(t * 5) % 16]
        };
        let keys: Vec<i64> = keys
            .iter()
            .enumerate()
            .filter(|&(i, k)| !keys[..i].contains(k))
            .map(|(_, &k)| k)
            .collect();
        let mut ops = Vec::new();
        let mut changes = Vec::new();
        for &k in &keys {
            let v = t * 100 + k;
            match rows.get(&k).copied() {
                None => {
                    ops.push(Op::write(OpKind::Insert, k, v));
                    changes.push((k, (sub_change::INSERT, None, Some(v))));
                }
                Some(old) if t % 5 == 0 => {
                    ops.push(Op::delete(k));
                    changes.push((k, (sub_change::DELETE, Some(old), None)));
                }
                Some(old) => {
                    ops.push(Op::write(OpKind::Update, k, v));
                    changes.push((k, (sub_change::UPDATE, Some(old), Some(v))));
                }
            }
        }
        let Reply::Conf { epoch, .. } = cluster.commit(&ops) else {
            panic!("transaction {t} failed");
        };
        assert!(epoch > start, "committed after the subscription started");
        last_epoch = last_epoch.max(epoch);
        for (k, change) in changes {
            match change.2 {
                Some(v) => rows.insert(k, v),
                None => rows.remove(&k),
            };
            expected
                .entry(epoch)
                .or_default()
                .entry(k)
                .or_default()
                .push(change);
        }
        received.extend(take_sub(&cluster));
        // Acknowledge what came whole, as the client does.
        let acks: Vec<(signal::BlockRef, u64)> = received
            .iter()
            .filter_map(|s| match s.body {
                SignalBody::SubEpochData {
                    epoch,
                    complete: true,
                    ..
                } => Some((s.sender, epoch)),
                _ => None,
            })
            .collect();
        for (node, epoch) in acks {
            cluster.send(node, SignalBody::SubGcpCompleteAck { sub_id: 1, epoch });
        }
    }
    // Until both nodes completed the last epoch.
    let complete_from = |received: &[Signal]| {
        received
            .iter()
            .filter(|s| {
                matches!(s.body, SignalBody::SubEpochData { epoch, complete: true, .. }
                    if epoch >= last_epoch)
            })
            .count()
    };
    for _ in 0..2_000 {
        if complete_from(&received) >= nodes.len() {
            break;
        }
        cluster.sim.run_for(Duration::from_millis(1));
        received.extend(take_sub(&cluster));
    }
    assert!(
        complete_from(&received) >= nodes.len(),
        "the last epoch came"
    );

    // Merge per epoch; each node's epochs ascending, each once.
    let mut got: BTreeMap<u64, BTreeMap<i64, Vec<Change>>> = BTreeMap::new();
    let mut completed: BTreeMap<signal::NodeId, Vec<u64>> = BTreeMap::new();
    for s in &received {
        let SignalBody::SubEpochData {
            sub_id,
            epoch,
            count,
            changes,
            complete,
        } = &s.body
        else {
            panic!("unexpected {s:?}");
        };
        assert_eq!(*sub_id, 1);
        assert!(*epoch > start, "an epoch at or before the start");
        let entries: Vec<_> = sub_change::entries(changes)
            .collect::<Result<_, _>>()
            .expect("whole entries");
        assert_eq!(entries.len(), *count as usize);
        for e in entries {
            assert_eq!(e.table, table.id);
            assert!(
                e.flags & sub_change::SENDER != 0,
                "only the sender's changes"
            );
            let decode = |image: &[u8]| -> Option<(i64, Option<i64>)> {
                if image.is_empty() {
                    return None;
                }
                let (fixed, var) = image.split_at(layout.fixed_bytes());
                let value = |c| match layout.decode_column(fixed, var, c).to_value() {
                    Value::Int(v) => Some(v),
                    Value::Null => None,
                    other => panic!("{other:?}"),
                };
                Some((value(0).expect("a key"), value(1)))
            };
            let (before, after) = (decode(e.before), decode(e.after));
            let key = before.or(after).expect("an image").0;
            let change = (e.kind, before.and_then(|b| b.1), after.and_then(|a| a.1));
            got.entry(*epoch)
                .or_default()
                .entry(key)
                .or_default()
                .push(change);
        }
        if *complete {
            let list = completed.entry(s.sender.node).or_default();
            assert!(
                list.last().is_none_or(|&l| l < *epoch),
                "node {}: epoch {epoch} after {:?}",
                s.sender.node,
                list.last()
            );
            list.push(*epoch);
        }
    }
    assert_eq!(completed.len(), nodes.len(), "every node sends");
    let mut per_node = completed.values();
    let first = per_node.next().expect("a node");
    for other in per_node {
        let upto =
            |l: &Vec<u64>| -> Vec<u64> { l.iter().copied().filter(|&e| e <= last_epoch).collect() };
        assert_eq!(upto(first), upto(other), "the same epochs from each node");
    }
    got.retain(|&e, _| e <= last_epoch);
    assert_eq!(got, expected, "the stream is the committed history");
    assert!(
        first.len() > expected.len(),
        "epochs without changes come too"
    );
}
