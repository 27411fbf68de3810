//! Reads through the TC: scans (ranges, pruning, filters, projections),
//! `READ_BACKUP` tables, and whole read transactions handed over to the
//! LDM that holds their rows.
//!
//! The cluster is the shared test harness (`common`: data nodes wired as
//! a real node, an API node that records every answer) with the TC
//! tests' calls (`common/transactions.rs`).

mod common;
#[path = "common/transactions.rs"]
mod transactions;

use common::*;
use transactions::*;

#[test]
fn scans_full_range_pruned_with_filter_and_projection() {
    let mut cluster = started(18, Limits::default());
    let ops: Vec<Op> = (0..200)
        .map(|k| Op::write(OpKind::Insert, k, k % 50))
        .collect();
    committed(&cluster.commit(&ops));
    let model: BTreeMap<i64, i64> = (0..200).map(|k| (k, k % 50)).collect();
    // Full scan over every partition, small batches.
    let mut spec = cluster.full_scan_spec();
    spec.batch_rows = 7;
    let (rows, batches) = cluster.scan(&spec).expect("full scan");
    assert_eq!(rows.len(), 200);
    assert!(batches >= 200 / 7, "small batches: {batches}");
    let got: BTreeMap<i64, i64> = rows.iter().map(|r| (int(&r[0]), int(&r[1]))).collect();
    assert_eq!(got, model);
    // Filter and projection: v > 40, returning (s, id).
    spec.filter = Some(Filter::Cmp {
        column: 1,
        op: CmpOp::Gt,
        value: Value::Int(40),
    });
    spec.projection = vec![2, 0];
    let (rows, _) = cluster.scan(&spec).expect("filtered scan");
    let mut ids: Vec<i64> = rows
        .iter()
        .map(|r| {
            assert_eq!(r.len(), 2, "projected columns only");
            let id = int(&r[1]);
            assert_eq!(r[0], Value::String(format!("s{}", id % 50)));
            id
        })
        .collect();
    ids.sort_unstable();
    let expected: Vec<i64> = model
        .iter()
        .filter(|(_, v)| **v > 40)
        .map(|(k, _)| *k)
        .collect();
    assert_eq!(ids, expected);
    // Range on the ordered index: 10 <= v < 13.
    let index = cluster.table().indexes[0].id;
    let mut range = cluster.full_scan_spec();
    range.index_id = index;
    range.lower = Some(Bound {
        values: vec![Value::Int(10)],
        inclusive: true,
    });
    range.upper = Some(Bound {
        values: vec![Value::Int(13)],
        inclusive: false,
    });
    let (rows, _) = cluster.scan(&range).expect("range scan");
    let mut ids: Vec<i64> = rows.iter().map(|r| int(&r[0])).collect();
    ids.sort_unstable();
    let expected: Vec<i64> = model
        .iter()
        .filter(|(_, v)| (10..13).contains(*v))
        .map(|(k, _)| *k)
        .collect();
    assert_eq!(ids, expected);
    // Pruned to one partition.
    let p = cluster.partition_of(7);
    let mut pruned = cluster.full_scan_spec();
    pruned.partition = p;
    let (rows, _) = cluster.scan(&pruned).expect("pruned scan");
    let ids: Vec<i64> = rows.iter().map(|r| int(&r[0])).collect();
    assert!(ids.contains(&7));
    assert!(
        ids.iter().all(|&k| cluster.partition_of(k) == p),
        "only partition {p}"
    );
    assert_eq!(
        ids.len(),
        (0..200).filter(|&k| cluster.partition_of(k) == p).count()
    );
    assert!(cluster.tc().counters().scans_completed >= 4);
    cluster.check_idle();
}

#[test]
fn a_releasing_scan_ends_its_idle_transaction_and_only_that() {
    let mut cluster = started(23, Limits::default());
    let ops: Vec<Op> = (0..60).map(|k| Op::write(OpKind::Insert, k, k)).collect();
    committed(&cluster.commit(&ops));
    let spec = cluster.full_scan_spec().to_bytes();
    let base = cluster.tc().counters().released;

    // The scan starts the transaction and is all of it: released with its
    // last batch, and no record is left for a commit to end.
    let tx = cluster.tx_id();
    let (rows, _, released) = cluster
        .scan_in(tx, tc_flags::START | tc_flags::RELEASE, spec.clone())
        .expect("a releasing scan");
    assert_eq!(rows.len(), 60);
    assert!(released, "an idle transaction is ended with its scan");
    assert_eq!(cluster.tc().counters().released, base + 1);
    cluster.check_idle();
    // It is gone at the TC: a request that does not start it is refused,
    // and one that does starts it afresh.
    match cluster.execute(tx, tc_flags::COMMIT, &[Op::read(1, LockMode::Committed)]) {
        Reply::Ref { code, .. } => assert_eq!(code, error::BAD_OPERATION),
        other => panic!("a released transaction answered {other:?}"),
    }
    let again = cluster.execute(
        tx,
        tc_flags::START | tc_flags::COMMIT,
        &[Op::read(1, LockMode::Committed)],
    );
    assert_eq!(committed(&again).1.len(), 1);

    // A transaction that holds a write is not released by its scan: its
    // commit still has something to do, and does it.
    let tx = cluster.tx_id();
    let wrote = cluster.execute(tx, tc_flags::START, &[Op::write(OpKind::Insert, 100, 1)]);
    assert!(matches!(wrote, Reply::Conf { .. }), "{wrote:?}");
    let (_, _, released) = cluster
        .scan_in(tx, tc_flags::RELEASE, spec.clone())
        .expect("a scan of a writing transaction");
    assert!(!released, "a transaction with a write stays");
    committed(&cluster.execute(tx, tc_flags::COMMIT, &[]));
    assert_eq!(cluster.read_values(&[100]), vec![Some(1)]);

    // Closed after its first batch (a LIMIT met), it releases all the
    // same; without the flag, closed early, it does not.
    let mut small = cluster.full_scan_spec();
    small.batch_rows = 2;
    let small = small.to_bytes();
    let tx = cluster.tx_id();
    assert!(cluster.scan_closed_early(tx, tc_flags::START | tc_flags::RELEASE, small.clone()));
    assert_eq!(cluster.tc().counters().released, base + 2);
    assert_eq!(cluster.tc().transactions_in_use(), 0);
    let tx = cluster.tx_id();
    assert!(!cluster.scan_closed_early(tx, tc_flags::START, small));
    committed(&cluster.execute(tx, tc_flags::COMMIT, &[]));

    // Without the flag nothing is released.
    let tx = cluster.tx_id();
    let (_, _, released) = cluster
        .scan_in(tx, tc_flags::START, spec)
        .expect("a plain scan");
    assert!(!released);
    assert_eq!(
        cluster.tc().transactions_in_use(),
        1,
        "the scan's transaction stays"
    );
    committed(&cluster.execute(tx, tc_flags::COMMIT, &[]));
    assert_eq!(cluster.tc().counters().released, base + 2);
    cluster.check_idle();
}

#[test]
fn read_backup_tables_serve_committed_reads_from_the_tcs_own_replica() {
    let mut cluster = Cluster::start(21, 2, Limits::default());
    let table = cluster.create_table_with(true);
    assert!(table.read_backup, "the dictionary keeps READ_BACKUP");
    let ops_on = |cluster: &Cluster, n: NodeId| -> u64 {
        (0..LDM_INSTANCES)
            .map(|i| {
                let ldm = cluster
                    .sim
                    .block::<LdmBlock<SimDisk>>(ldm_of(n, i))
                    .unwrap();
                ldm.stats().ops
            })
            .sum()
    };
    let keys: Vec<i64> = (0..50).collect();
    let inserts: Vec<Op> = keys
        .iter()
        .map(|&k| Op::write(OpKind::Insert, k, k))
        .collect();
    committed(&cluster.commit(&inserts));
    let (a, b) = (cluster.data_nodes[0], cluster.data_nodes[1]);
    // One node group of both nodes: each holds a serving replica of every
    // partition, so every read stays on the node of the TC it went to,
    // primary or not.
    for n in [a, b] {
        let other = if n == a { b } else { a };
        let before = (ops_on(&cluster, n), ops_on(&cluster, other));
        let backup_reads = cluster.tc_on(n).counters().backup_reads;
        let values = cluster.read_values_on(n, &keys);
        assert!(
            values.iter().zip(&keys).all(|(v, &k)| *v == Some(k)),
            "{values:?}"
        );
        assert_eq!(
            ops_on(&cluster, n) - before.0,
            50,
            "reads through {n} ran on {n}"
        );
        assert_eq!(ops_on(&cluster, other), before.1, "no read went to {other}");
        assert!(
            cluster.tc_on(n).counters().backup_reads > backup_reads,
            "some of the reads through {n} were of partitions whose primary is {other}"
        );
    }
    // A commit is answered once every replica has it: a read right after it
    // on the backup sees it.
    let updates: Vec<Op> = keys
        .iter()
        .map(|&k| Op::write(OpKind::Update, k, k + 1000))
        .collect();
    committed(&cluster.commit(&updates));
    let values = cluster.read_values_on(b, &keys);
    assert!(
        values.iter().zip(&keys).all(|(v, &k)| *v == Some(k + 1000)),
        "{values:?}"
    );
    // Locking reads still go to the primary.
    let locking: Vec<Op> = keys
        .iter()
        .map(|&k| Op::read(k, LockMode::Shared))
        .collect();
    let before = cluster.tc_on(a).counters().backup_reads;
    committed(&cluster.commit(&locking));
    assert_eq!(cluster.tc_on(a).counters().backup_reads, before);
    cluster.check_idle();
}

#[test]
fn whole_transactions_of_committed_reads_are_answered_by_their_ldm_as_the_tc_would() {
    let mut cluster = started(31, Limits::default());
    cluster.sim.run_for(GCP_INTERVAL * 3);
    let me = cluster.data_nodes[0];
    // Keys of one LDM instance (a transaction on one instance goes whole),
    // and one of the other instance.
    let same = cluster.keys_beside_1(2);
    let (k2, missing) = (same[0], same[1]);
    let other = (2..).find(|&k| cluster.instance_of(k) != cluster.instance_of(1));
    let other = other.expect("a key on the other instance");
    committed(&cluster.commit(&[Op::write(OpKind::Insert, 1, 10)]));
    committed(&cluster.commit(&[Op::write(OpKind::Insert, k2, 20)]));
    committed(&cluster.commit(&[Op::write(OpKind::Insert, other, 30)]));
    let read = |k: i64| Op::read(k, LockMode::Committed);
    let cases = [
        vec![read(1)],
        vec![read(1), read(k2)],
        vec![read(1).ignoring(), read(missing).ignoring(), read(k2)],
        vec![read(1), read(missing), read(k2)],
    ];
    for ops in &cases {
        let before = cluster.hand_offs(me);
        let epoch_before = cluster.tc().current_epoch();
        let direct = cluster.commit(ops);
        let after = cluster.hand_offs(me);
        assert_eq!(
            (after.0 - before.0, after.1 - before.1, after.2 - before.2),
            (1, 1, 0),
            "{ops:?}: handed to the LDM, answered there, not counted as the TC's commit"
        );
        // The same reads taking shared locks go through the TC (which
        // commits them): its reply is the one the LDM must have given.
        let shared: Vec<Op> = ops
            .iter()
            .map(|op| Op {
                lock: LockMode::Shared,
                ..op.clone()
            })
            .collect();
        let through_tc = cluster.commit(&shared);
        assert_eq!(
            cluster.hand_offs(me).0,
            after.0,
            "a locking read is the TC's"
        );
        match (&direct, &through_tc) {
            (
                Reply::Conf {
                    flags,
                    epoch,
                    answers,
                },
                Reply::Conf {
                    flags: tc_flags,
                    answers: tc_answers,
                    ..
                },
            ) => {
                assert_eq!((flags, answers), (tc_flags, tc_answers), "{ops:?}");
                assert!(
                    (epoch_before..=cluster.tc().current_epoch()).contains(epoch),
                    "{ops:?}: committed in the TC's epoch {epoch:#x}"
                );
            }
            (Reply::Ref { .. }, Reply::Ref { .. }) => assert_eq!(direct, through_tc),
            _ => panic!("{ops:?}: the LDM answered {direct:?}, the TC {through_tc:?}"),
        }
    }
    let reply = cluster.commit(&cases[2]);
    let (_, answers) = committed(&reply);
    assert_eq!(
        answers[1].code,
        error::NO_SUCH_ROW,
        "an ignored error is answered"
    );
    assert_eq!(answers[2].row.as_ref().map(|r| int(&r[1])), Some(20));
    let Reply::Ref { code, op_index, .. } = cluster.commit(&cases[3]) else {
        panic!("a missing row fails the transaction")
    };
    assert_eq!((code, op_index), (error::NO_SUCH_ROW, 1));

    // Not handed over: reads on two instances, a transaction of two
    // requests.
    let before = cluster.hand_offs(me).0;
    let reply = cluster.commit(&[read(1), read(other)]);
    let (_, answers) = committed(&reply);
    assert_eq!(answers[1].row.as_ref().map(|r| int(&r[1])), Some(30));
    let tx = cluster.tx_id();
    assert!(matches!(
        cluster.execute(tx, tc_flags::START, &[read(1)]),
        Reply::Conf { flags: 0, .. }
    ));
    committed(&cluster.execute(tx, tc_flags::COMMIT, &[]));
    assert_eq!(cluster.hand_offs(me).0, before);
    cluster.check_idle();

    // Two nodes, one replica each: a read of the other node's partition
    // goes through the TC; one of its own node's is handed over.
    let mut spread = Cluster::start_spread(32, 2, Limits::default());
    spread.create_table();
    let (a, b) = (spread.data_nodes[0], spread.data_nodes[1]);
    let placement = Placement::new(vec![vec![a], vec![b]], LDM_INSTANCES);
    let on = |c: &Cluster, n: NodeId| {
        (1..)
            .find(|&k| placement.home(c.partition_of(k)).primary() == n)
            .expect("a key")
    };
    let (on_a, on_b) = (on(&spread, a), on(&spread, b));
    committed(&spread.commit(&[Op::write(OpKind::Insert, on_a, 1)]));
    committed(&spread.commit(&[Op::write(OpKind::Insert, on_b, 2)]));
    let before = (spread.hand_offs(a).0, spread.hand_offs(b).1);
    assert_eq!(spread.read_values_on(a, &[on_b]), vec![Some(2)]);
    assert_eq!((spread.hand_offs(a).0, spread.hand_offs(b).1), before);
    assert_eq!(spread.read_values_on(a, &[on_a]), vec![Some(1)]);
    assert_eq!(spread.hand_offs(a).0, before.0 + 1);
    spread.check_idle();
}

#[test]
fn read_transactions_arriving_together_are_read_together_and_each_answered() {
    let mut cluster = started(33, Limits::default());
    let me = cluster.data_nodes[0];
    let keys: Vec<i64> = (0..40).collect();
    let inserts: Vec<Op> = keys
        .iter()
        .map(|&k| Op::write(OpKind::Insert, k, k * 7))
        .collect();
    committed(&cluster.commit(&inserts));
    let rounds = |c: &Cluster| c.ldm_total(|s| s.client_read_rounds);
    let (before, rounds_before) = (cluster.hand_offs(me), rounds(&cluster));
    // One transaction per key (one of them a key no row has, one reading
    // two keys of one instance when there are two), all in flight at once.
    let pair = (1..40)
        .find(|&k| cluster.instance_of(k) == cluster.instance_of(0))
        .expect("two keys on one instance");
    let mut txs: Vec<(u64, Vec<i64>)> = keys.iter().map(|&k| (cluster.tx_id(), vec![k])).collect();
    txs.push((cluster.tx_id(), vec![1_000]));
    txs.push((cluster.tx_id(), vec![0, pair]));
    for (tx, ks) in &txs {
        let ops: Vec<Op> = ks
            .iter()
            .map(|&k| Op::read(k, LockMode::Committed).ignoring())
            .collect();
        cluster.submit(*tx, tc_flags::START | tc_flags::COMMIT, &ops);
    }
    for (tx, ks) in &txs {
        let reply = cluster
            .reply_within(*tx, ANSWER_WAIT)
            .unwrap_or_else(|| panic!("transaction {tx:#x}: no reply"));
        let (_, answers) = committed(&reply);
        let values: Vec<Option<i64>> = answers
            .iter()
            .map(|a| a.row.as_ref().map(|r| int(&r[1])))
            .collect();
        let expected: Vec<Option<i64>> = ks.iter().map(|&k| (k < 40).then_some(k * 7)).collect();
        assert_eq!(values, expected, "transaction {tx:#x} of keys {ks:?}");
    }
    let after = cluster.hand_offs(me);
    assert_eq!(
        after.0 - before.0,
        txs.len() as u64,
        "every one handed over"
    );
    assert_eq!(
        after.1 - before.1,
        txs.len() as u64,
        "and answered by its LDM"
    );
    let rounds = rounds(&cluster) - rounds_before;
    assert!(
        rounds > 0 && rounds * 4 <= txs.len() as u64,
        "{} transactions read in {rounds} rounds: gathered",
        txs.len()
    );
    cluster.check_idle();
}

#[test]
fn a_read_transaction_handed_over_wrongly_is_refused_with_a_clear_error() {
    let mut cluster = started(34, Limits::default());
    let me = cluster.data_nodes[0];
    committed(&cluster.commit(&[Op::write(OpKind::Insert, 1, 10)]));
    let partition = cluster.partition_of(1);
    let ldm = ldm_of(me, cluster.instance_of(1));
    let mut ops = cluster.batch(&[Op::read(1, LockMode::Committed)]);
    let header_at = proto::ops::OpBatchReader::framed(&ops)
        .expect("a batch")
        .iter()
        .next()
        .expect("an op")
        .header_offset(&ops);
    proto::set_partition(&mut ops, header_at, partition);
    let read_req = |tx_id: u64, ops: Vec<u8>| SignalBody::LdmReadReq {
        tx_id,
        api: api(),
        epoch: 0,
        ops,
    };
    // From the client itself, not a TC of the node: refused, naming why.
    let tx = cluster.tx_id();
    cluster.sim.inject(Signal {
        receiver: ldm,
        sender: api(),
        body: read_req(tx, ops.clone()),
    });
    match cluster.reply_within(tx, ANSWER_WAIT) {
        Some(Reply::Ref { code, message, .. }) => {
            assert_eq!(code, error::BAD_OPERATION);
            assert!(message.contains("only a TC of that node"), "{message}");
        }
        other => panic!("refused: {other:?}"),
    }
    // From the node's TC, well formed: answered as a commit.
    let tx = cluster.tx_id();
    cluster.sim.inject(Signal {
        receiver: ldm,
        sender: tc_of(me),
        body: read_req(tx, ops.clone()),
    });
    let reply = cluster.reply_within(tx, ANSWER_WAIT).expect("a reply");
    let (_, answers) = committed_epoch(&reply);
    assert_eq!(answers[0].row.as_ref().map(|r| int(&r[1])), Some(10));
    // Malformed (only a bug sends it): refused, not left unanswered.
    let tx = cluster.tx_id();
    ops.truncate(ops.len() - 3);
    cluster.sim.inject(Signal {
        receiver: ldm,
        sender: tc_of(me),
        body: read_req(tx, ops),
    });
    match cluster.reply_within(tx, ANSWER_WAIT) {
        Some(Reply::Ref { code, message, .. }) => {
            assert_eq!(code, error::MALFORMED_REQUEST);
            assert!(message.contains("malformed op batch"), "{message}");
        }
        other => panic!("refused: {other:?}"),
    }
    cluster.check_idle();
}

#[test]
fn handed_over_reads_with_projection_and_key_info_answer_the_tcs_bytes() {
    let mut cluster = started(35, Limits::default());
    let me = cluster.data_nodes[0];
    let same = cluster.keys_beside_1(2);
    let (k2, missing) = (same[0], same[1]);
    committed(&cluster.commit(&[Op::write(OpKind::Insert, 1, 10)]));
    committed(&cluster.commit(&[Op::write(OpKind::Insert, k2, 20)]));
    let (table_id, table_version) = (cluster.table().id, cluster.table().version);
    // (key, projection, flags) of each read.
    let reads: [(i64, &[u16], u8); 3] = [
        (1, &[2, 0], KEY_INFO),
        (k2, &[], KEY_INFO),
        (missing, &[1], IGNORE_ERROR),
    ];
    let batch = |lock: LockMode| {
        let mut out = Vec::new();
        let mut w = OpBatchWriter::new(&mut out);
        for (i, &(key, projection, flags)) in reads.iter().enumerate() {
            w.begin(&OpHeader {
                op_index: i as u32,
                table_id,
                table_version,
                index_id: NO_INDEX,
                partition: NO_PARTITION,
                kind: OpKind::Read,
                lock,
                flags,
            });
            w.key(Value::Int(key).as_ref());
            for &c in projection {
                w.project(c);
            }
            w.end().unwrap();
        }
        drop(w);
        out
    };
    let reply_bytes = |cluster: &mut Cluster, lock: LockMode| {
        let tx = cluster.tx_id();
        let ops = batch(lock);
        cluster.send(
            tc_of(me),
            SignalBody::TcKeyReq {
                tx_id: tx,
                flags: tc_flags::START | tc_flags::COMMIT,
                ops,
            },
        );
        cluster.sim.run_for(Duration::from_millis(50));
        let replies: Vec<Signal> = cluster.take();
        let mine: Vec<SignalBody> = replies
            .into_iter()
            .map(|s| s.body)
            .filter(|b| matches!(b, SignalBody::TcKeyConf { tx_id, .. } if *tx_id == tx))
            .collect();
        match mine.as_slice() {
            [SignalBody::TcKeyConf { flags, results, .. }] => (*flags, results.clone()),
            other => panic!("one commit: {other:?}"),
        }
    };
    let handed_before = cluster.hand_offs(me).0;
    let direct = reply_bytes(&mut cluster, LockMode::Committed);
    assert_eq!(
        cluster.hand_offs(me).0,
        handed_before + 1,
        "handed to the LDM"
    );
    let through_tc = reply_bytes(&mut cluster, LockMode::Shared);
    assert_eq!(direct, through_tc, "the same result batch, byte for byte");
    let reader = ResultReader::new(&direct.1).expect("a result batch");
    let first = reader.iter().next().expect("a result");
    let values: Vec<Value> = first.values().map(|v| v.to_value()).collect();
    let keys: Vec<Value> = first.keys().map(|v| v.to_value()).collect();
    assert_eq!(values, vec![Value::String("s10".into()), Value::Int(1)]);
    assert_eq!(keys, vec![Value::Int(1)]);
    cluster.check_idle();
}

/// `others`: `accounts`' shape, another table.
fn others_table() -> TableDef {
    TableDef::new(
        "others",
        0,
        vec![
            Column::new("id", ColumnType::BigInt { unsigned: false }),
            Column::new("v", ColumnType::Int { unsigned: false }).nullable(),
            Column::new(
                "s",
                ColumnType::VarChar {
                    max: 20,
                    collation: schema::Collation::Utf8mb4Bin,
                },
            )
            .nullable(),
        ],
    )
    .primary_key(vec![0])
    .partitions(PARTITIONS)
}

#[test]
fn pushed_joins_read_children_by_key_where_they_live() {
    use proto::query::{KeySource, QueryChild, QueryTree};
    let mut cluster = Cluster::start(31, 2, Limits::default());
    let accounts = cluster.create_table();
    let ops: Vec<Op> = (0..200)
        .map(|k| Op::write(OpKind::Insert, k, k % 50))
        .collect();
    committed(&cluster.commit(&ops));
    // Every third id has a row in `others`, v = id + 1000.
    let others = cluster.create_table_def(others_table());
    let ops: Vec<Op> = (0..200)
        .filter(|k| k % 3 == 0)
        .map(|k| Op::write(OpKind::Insert, k, k + 1000))
        .collect();
    committed(&cluster.commit(&ops));
    cluster.table = Some(accounts.clone());
    let mut root = cluster.full_scan_spec();
    root.batch_rows = 16;
    let child = |parent: u8, table: &TableDef, outer: bool| QueryChild {
        parent,
        outer,
        table_id: table.id,
        table_version: table.version,
        key: vec![KeySource::Column(0)],
        projection: vec![],
    };
    // accounts → others (inner) → accounts again from others' id (outer).
    let tree = QueryTree {
        root: root.clone(),
        children: vec![child(0, &others, false), child(1, &accounts, true)],
    };
    let (rows, batches) = cluster.pushed_scan(&tree.to_bytes()).expect("pushed join");
    assert!(batches >= 200 / 3 / 16, "batches: {batches}");
    let mut got: Vec<(i64, i64, i64, i64)> = rows
        .iter()
        .map(|r| {
            assert_eq!(r.len(), 1 + 3 * 3, "found mask and three rows");
            assert_eq!(r[0], Value::UInt(0b111), "every node found: {r:?}");
            (int(&r[1]), int(&r[2]), int(&r[5]), int(&r[8]))
        })
        .collect();
    got.sort_unstable();
    let expected: Vec<(i64, i64, i64, i64)> = (0..200)
        .filter(|k| k % 3 == 0)
        .map(|k| (k, k % 50, k + 1000, k % 50))
        .collect();
    assert_eq!(got, expected, "inner: rows with an `others` row only");
    // Outer: every root row; a missing child's descendants are missing too.
    let tree = QueryTree {
        root: root.clone(),
        children: vec![child(0, &others, true), child(1, &accounts, true)],
    };
    let (rows, _) = cluster
        .pushed_scan(&tree.to_bytes())
        .expect("outer pushed join");
    assert_eq!(rows.len(), 200);
    for r in &rows {
        let k = int(&r[1]);
        if k % 3 == 0 {
            assert_eq!(r[0], Value::UInt(0b111), "{r:?}");
        } else {
            assert_eq!(r[0], Value::UInt(0b001), "{r:?}");
            assert!(r[4..].iter().all(|v| *v == Value::Null), "NULLs: {r:?}");
        }
    }
    // A bad tree is refused with a clear error; so are bytes that are not one.
    let bad = QueryTree {
        root: root.clone(),
        children: vec![QueryChild {
            key: vec![KeySource::Column(7)],
            ..child(0, &others, false)
        }],
    };
    let (code, message) = cluster.pushed_scan(&bad.to_bytes()).unwrap_err();
    assert_eq!(code, error::BAD_OPERATION, "{message}");
    assert!(message.contains("comes from value 7"), "{message}");
    let bytes = tree.to_bytes();
    let (code, message) = cluster.pushed_scan(&bytes[..bytes.len() - 3]).unwrap_err();
    assert_eq!(code, error::MALFORMED_REQUEST, "{message}");
    // Nothing is left behind: the same joins again give the same rows.
    let (again, _) = cluster.pushed_scan(&tree.to_bytes()).expect("again");
    assert_eq!(again.len(), 200);
}
