//! Transactions through the TC: operations checked against a model, aborts,
//! locks and deadlocks, full pools, bad requests, two replicas.
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
fn random_batches_match_a_model() {
    let mut cluster = started(11, Limits::default());
    let mut rng = Rng::seeded(11);
    let mut model: BTreeMap<i64, i64> = BTreeMap::new();
    for round in 0..40 {
        // Distinct keys per batch: each op sees the state before the batch.
        let mut keys: Vec<i64> = (0..30).collect();
        let n = 1 + rng.below(12) as usize;
        let mut ops = Vec::new();
        for _ in 0..n {
            let key = keys.swap_remove(rng.below(keys.len() as u64) as usize);
            let v = round * 100 + key;
            let op = match rng.below(6) {
                0 => Op::read(key, LockMode::Committed),
                1 => Op::read(key, LockMode::Shared),
                2 => Op::write(OpKind::Insert, key, v),
                3 => Op::write(OpKind::Update, key, v),
                4 => Op::write(OpKind::Write, key, v),
                _ => Op::delete(key),
            };
            ops.push(op.ignoring());
        }
        let reply = cluster.commit(&ops);
        let (gci, answers) = committed(&reply);
        assert!(gci > 0, "a commit has a GCI");
        assert_eq!(answers.len(), ops.len(), "one answer per op");
        for (i, (op, answer)) in ops.iter().zip(answers).enumerate() {
            assert_eq!(answer.op_index, i as u32, "answers in request order");
            let before = model.get(&op.key).copied();
            let expected = match (op.kind, before) {
                (OpKind::Read, Some(_)) | (OpKind::Update, Some(_)) | (OpKind::Delete, Some(_)) => {
                    0
                }
                (OpKind::Read, None) | (OpKind::Update, None) | (OpKind::Delete, None) => {
                    error::NO_SUCH_ROW
                }
                (OpKind::Insert, Some(_)) => error::DUPLICATE_KEY,
                (OpKind::Insert, None) | (OpKind::Write, _) => 0,
            };
            assert_eq!(answer.code, expected, "round {round} op {i} {op:?}");
            if op.kind == OpKind::Read && expected == 0 {
                let row = answer.row.as_ref().expect("a read returns its row");
                assert_eq!(int(&row[0]), op.key);
                assert_eq!(Some(int(&row[1])), before);
                assert_eq!(row[2], Value::String(format!("s{}", before.unwrap())));
            }
            if expected == 0 {
                match op.kind {
                    OpKind::Insert | OpKind::Update | OpKind::Write => {
                        model.insert(op.key, op.v.unwrap());
                    }
                    OpKind::Delete => {
                        model.remove(&op.key);
                    }
                    OpKind::Read => {}
                }
            }
        }
    }
    assert_eq!(cluster.scan_all(), model, "the table holds the model");
    let counters = cluster.tc().counters();
    assert!(counters.committed >= 40, "{counters:?}");
    cluster.check_idle();
}

/// The TC's shortcut for result batches whose LDM says they answer every op
/// in order, none failed, gives the client what reading every batch gives:
/// the same replies to the same random requests (one-op and batched, reads
/// and writes, failing and not), byte for byte.
#[test]
fn results_claimed_in_order_are_answered_as_read_ones_are() {
    let replies = |no_claims: bool| {
        let mut cluster = Cluster::start_with(23, 1, Limits::default(), no_claims);
        cluster.create_table();
        let mut rng = Rng::seeded(23);
        let mut got = Vec::new();
        for round in 0..60 {
            let mut keys: Vec<i64> = (0..20).collect();
            let n = if round % 2 == 0 {
                1
            } else {
                1 + rng.below(6) as usize
            };
            let ops: Vec<Op> = (0..n)
                .map(|_| {
                    let key = keys.swap_remove(rng.below(keys.len() as u64) as usize);
                    let op = match rng.below(4) {
                        0 => Op::read(key, LockMode::Committed),
                        1 => Op::read(key, LockMode::Shared),
                        2 => Op::write(OpKind::Write, key, round),
                        _ => Op::write(OpKind::Update, key, round),
                    };
                    if rng.below(2) == 0 {
                        op.ignoring()
                    } else {
                        op
                    }
                })
                .collect();
            let tx = cluster.tx_id();
            let flags = tc_flags::START | tc_flags::COMMIT;
            got.push(cluster.execute(tx, flags, &ops));
        }
        got
    };
    let with_claims = replies(false);
    assert!(
        with_claims
            .iter()
            .any(|r| matches!(r, Reply::Conf { answers, .. } if !answers.is_empty())),
        "some requests succeed"
    );
    assert_eq!(with_claims, replies(true));
}

#[test]
fn a_thousand_operations_travel_in_one_request_and_one_reply() {
    let mut cluster = started(12, Limits::default());
    let ops: Vec<Op> = (0..1_000)
        .map(|k| Op::write(OpKind::Insert, k, k * 3))
        .collect();
    let tx = cluster.tx_id();
    cluster.submit(tx, tc_flags::START | tc_flags::COMMIT, &ops);
    cluster.sim.run_for(Duration::from_millis(500));
    let replies: Vec<Signal> = cluster.take();
    let mine: Vec<&Signal> = replies
        .iter()
        .filter(|s| matches!(s.body, SignalBody::TcKeyConf { tx_id, .. } | SignalBody::TcKeyRef { tx_id, .. } if tx_id == tx))
        .collect();
    assert_eq!(mine.len(), 1, "exactly one reply: {mine:?}");
    let SignalBody::TcKeyConf { flags, results, .. } = &mine[0].body else {
        panic!("a commit: {:?}", mine[0].body)
    };
    assert_eq!(*flags, tc_flags::COMMITTED);
    let answers = decode_results(results);
    assert_eq!(answers.len(), 1_000);
    assert!(answers.iter().all(|a| a.code == 0));
    let keys: Vec<i64> = (0..1_000).collect();
    let values = cluster.read_values(&keys);
    assert!(
        values
            .iter()
            .enumerate()
            .all(|(k, v)| *v == Some(k as i64 * 3)),
        "every row reads back"
    );
    cluster.check_idle();
}

#[test]
fn an_abort_half_way_leaves_nothing() {
    let mut cluster = started(13, Limits::default());
    committed(&cluster.commit(&[Op::write(OpKind::Insert, 100, 1)]));
    // A failing op aborts what the transaction did before.
    let tx = cluster.tx_id();
    let first: Vec<Op> = (0..10).map(|k| Op::write(OpKind::Insert, k, k)).collect();
    match cluster.execute(tx, tc_flags::START, &first) {
        Reply::Conf { flags, answers, .. } => {
            assert_eq!(flags, 0, "not committed yet");
            assert_eq!(answers.len(), 10);
        }
        other => panic!("{other:?}"),
    }
    let second = [
        Op::write(OpKind::Update, 3, 33),
        Op::write(OpKind::Insert, 100, 2),
    ];
    match cluster.execute(tx, tc_flags::COMMIT, &second) {
        Reply::Ref {
            code,
            op_index,
            message,
        } => {
            assert_eq!(code, error::DUPLICATE_KEY);
            assert_eq!(op_index, 1);
            assert!(message.contains("accounts"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    // The transaction is gone.
    match cluster.execute(tx, tc_flags::COMMIT, &[]) {
        Reply::Ref { code, .. } => assert_eq!(error::class(code), proto::ErrorClass::Permanent),
        other => panic!("{other:?}"),
    }
    // A rollback asked for.
    let tx = cluster.tx_id();
    let ops: Vec<Op> = (20..30).map(|k| Op::write(OpKind::Write, k, k)).collect();
    assert!(matches!(
        cluster.execute(tx, tc_flags::START, &ops),
        Reply::Conf { .. }
    ));
    match cluster.execute(tx, tc_flags::ROLLBACK, &[]) {
        Reply::Conf { flags, .. } => assert_eq!(flags, tc_flags::ROLLED_BACK),
        other => panic!("{other:?}"),
    }
    let keys: Vec<i64> = (0..30).chain([100]).collect();
    let values = cluster.read_values(&keys);
    assert!(
        values[..30].iter().all(Option::is_none),
        "nothing of the aborted transactions: {values:?}"
    );
    assert_eq!(values[30], Some(1));
    assert_eq!(cluster.scan_all().len(), 1);
    assert!(cluster.tc().counters().aborted >= 2);
    cluster.check_idle();
}

#[test]
fn a_shared_lock_blocks_a_writer_and_committed_reads_never_wait() {
    let mut cluster = started(14, Limits::default());
    committed(&cluster.commit(&[Op::write(OpKind::Insert, 5, 50)]));
    let reader = cluster.tx_id();
    match cluster.execute(reader, tc_flags::START, &[Op::read(5, LockMode::Shared)]) {
        Reply::Conf { answers, .. } => assert_eq!(answers[0].code, 0),
        other => panic!("{other:?}"),
    }
    let writer = cluster.tx_id();
    cluster.submit(
        writer,
        tc_flags::START | tc_flags::COMMIT,
        &[Op::write(OpKind::Update, 5, 51)],
    );
    assert_eq!(
        cluster.reply_within(writer, DEADLOCK_TIMEOUT / 2),
        None,
        "the writer waits for the shared lock"
    );
    // A committed read does not wait, and sees the committed value.
    assert_eq!(cluster.read_values(&[5]), vec![Some(50)]);
    // The reader commits: the writer goes on.
    committed(&cluster.execute(reader, tc_flags::COMMIT, &[]));
    committed(
        &cluster
            .reply_within(writer, ANSWER_WAIT)
            .expect("the writer is answered"),
    );
    assert_eq!(cluster.read_values(&[5]), vec![Some(51)]);
    cluster.check_idle();
}

#[test]
fn a_failed_api_node_leaves_no_transaction_and_no_lock_behind() {
    let mut cluster = started(15, Limits::default());
    committed(&cluster.commit(&[Op::write(OpKind::Insert, 7, 70)]));
    let holder = cluster.tx_id();
    match cluster.execute(
        holder,
        tc_flags::START,
        &[
            Op::read(7, LockMode::Exclusive),
            Op::write(OpKind::Insert, 8, 80),
        ],
    ) {
        Reply::Conf { answers, .. } => assert!(answers.iter().all(|a| a.code == 0)),
        other => panic!("{other:?}"),
    }
    assert_eq!(cluster.tc().transactions_in_use(), 1);
    // The API node dies holding the lock and an uncommitted insert.
    cluster.sim.crash(API);
    cluster.sim.run_for(Duration::from_millis(100));
    assert_eq!(
        cluster.tc().transactions_in_use(),
        0,
        "the TC ended the dead API node's transaction"
    );
    cluster.sim.restart(API);
    cluster.sim.run_for(Duration::from_millis(100));
    // Well before the lock-wait timeout, the row is free again, and the
    // uncommitted insert is gone.
    let writer = cluster.tx_id();
    cluster.submit(
        writer,
        tc_flags::START | tc_flags::COMMIT,
        &[Op::write(OpKind::Update, 7, 71)],
    );
    committed(
        &cluster
            .reply_within(writer, DEADLOCK_TIMEOUT / 2)
            .expect("the writer does not wait for the dead node's lock"),
    );
    assert_eq!(cluster.read_values(&[7, 8]), vec![Some(71), None]);
    cluster.check_idle();
}

#[test]
fn a_deadlock_ends_in_the_timeout_error_for_one_and_the_other_commits() {
    let mut cluster = started(15, Limits::default());
    committed(&cluster.commit(&[
        Op::write(OpKind::Insert, 1, 10),
        Op::write(OpKind::Insert, 2, 20),
    ]));
    let (a, b) = (cluster.tx_id(), cluster.tx_id());
    assert!(matches!(
        cluster.execute(a, tc_flags::START, &[Op::write(OpKind::Update, 1, 11)]),
        Reply::Conf { .. }
    ));
    assert!(matches!(
        cluster.execute(b, tc_flags::START, &[Op::write(OpKind::Update, 2, 21)]),
        Reply::Conf { .. }
    ));
    cluster.submit(a, 0, &[Op::write(OpKind::Update, 2, 12)]);
    cluster.submit(b, 0, &[Op::write(OpKind::Update, 1, 22)]);
    let start = cluster.sim.now();
    let mut replies = BTreeMap::new();
    while replies.len() < 2 {
        for tx in [a, b] {
            if let std::collections::btree_map::Entry::Vacant(entry) = replies.entry(tx) {
                if let Some(reply) = cluster.take_reply(tx) {
                    entry.insert((reply, cluster.sim.now() - start));
                }
            }
        }
        assert!(
            cluster.sim.now() - start < ANSWER_WAIT,
            "both are answered: {replies:?}"
        );
        cluster.sim.run_for(Duration::from_millis(1));
    }
    let timed_out: Vec<u64> = replies
        .iter()
        .filter(|(_, (r, _))| matches!(r, Reply::Ref { code, .. } if *code == error::LOCK_TIMEOUT))
        .map(|(tx, _)| *tx)
        .collect();
    assert!(!timed_out.is_empty(), "at least one times out: {replies:?}");
    for (tx, (reply, after)) in &replies {
        if timed_out.contains(tx) {
            assert!(
                *after >= DEADLOCK_TIMEOUT,
                "not before the timeout: {after:?}"
            );
            let Reply::Ref { message, .. } = reply else {
                unreachable!()
            };
            assert!(message.contains("deadlock"), "{message}");
        }
    }
    assert_eq!(
        error::class(error::LOCK_TIMEOUT),
        proto::ErrorClass::Temporary
    );
    let survivor = [a, b].into_iter().find(|tx| !timed_out.contains(tx));
    if let Some(tx) = survivor {
        committed(&cluster.execute(tx, tc_flags::COMMIT, &[]));
        let values = cluster.read_values(&[1, 2]);
        if tx == a {
            assert_eq!(values, vec![Some(11), Some(12)]);
        } else {
            assert_eq!(values, vec![Some(22), Some(21)]);
        }
    }
    assert!(cluster.tc().counters().lock_timeouts >= 1);
    cluster.check_idle();
}

#[test]
fn full_pools_refuse_at_once_with_a_temporary_error() {
    let limits = Limits {
        transactions: 3,
        operations: 100,
        scans: 1,
        ..Limits::default()
    };
    let mut cluster = started(16, limits);
    let open: Vec<u64> = (0..3).map(|_| cluster.tx_id()).collect();
    for (i, &tx) in open.iter().enumerate() {
        let reply = cluster.execute(
            tx,
            tc_flags::START,
            &[Op::write(OpKind::Insert, i as i64, 1)],
        );
        assert!(matches!(reply, Reply::Conf { .. }), "{reply:?}");
    }
    let requests_before: u64 = (0..LDM_INSTANCES)
        .map(|i| {
            cluster
                .sim
                .block::<LdmBlock<SimDisk>>(ldm_of(cluster.data_nodes[0], i))
                .unwrap()
                .stats()
                .key_requests
        })
        .sum();
    let extra = cluster.tx_id();
    match cluster.execute(extra, tc_flags::START, &[Op::write(OpKind::Insert, 9, 9)]) {
        Reply::Ref { code, .. } => {
            assert_eq!(code, error::OUT_OF_TRANSACTIONS);
            assert_eq!(error::class(code), proto::ErrorClass::Temporary);
        }
        other => panic!("{other:?}"),
    }
    let requests_after: u64 = (0..LDM_INSTANCES)
        .map(|i| {
            cluster
                .sim
                .block::<LdmBlock<SimDisk>>(ldm_of(cluster.data_nodes[0], i))
                .unwrap()
                .stats()
                .key_requests
        })
        .sum();
    assert_eq!(
        requests_before, requests_after,
        "refused without reaching an LDM"
    );
    assert_eq!(cluster.tc().transactions_in_use(), 3);
    // Operation records: 3 held, 98 more asked.
    let many: Vec<Op> = (10..108).map(|k| Op::write(OpKind::Insert, k, k)).collect();
    match cluster.execute(open[0], 0, &many) {
        Reply::Ref { code, .. } => assert_eq!(code, error::OUT_OF_TC_OPERATIONS),
        other => panic!("{other:?}"),
    }
    // That aborted open[0]; the others commit.
    for &tx in &open[1..] {
        committed(&cluster.execute(tx, tc_flags::COMMIT, &[]));
    }
    assert_eq!(
        cluster.read_values(&[0, 1, 2]),
        vec![None, Some(1), Some(1)]
    );
    // Scan records: one scan at a time.
    let tx = cluster.tx_id();
    let mut spec = cluster.full_scan_spec();
    spec.batch_rows = 1;
    let tc = tc_of(cluster.data_nodes[0]);
    cluster.send(
        tc,
        SignalBody::TcScanReq {
            tx_id: tx,
            scan_id: 1,
            flags: tc_flags::START,
            spec: spec.to_bytes(),
        },
    );
    cluster.send(
        tc,
        SignalBody::TcScanReq {
            tx_id: tx,
            scan_id: 2,
            flags: 0,
            spec: spec.to_bytes(),
        },
    );
    cluster.sim.run_for(Duration::from_millis(20));
    let refused = cluster
        .take()
        .into_iter()
        .any(|s| matches!(s.body, SignalBody::TcScanRef { scan_id: 2, code, .. } if code == error::TOO_MANY_SCANS));
    assert!(refused, "the second scan is refused");
    cluster.send(
        tc,
        SignalBody::TcScanNextReq {
            tx_id: tx,
            scan_id: 1,
            close: true,
        },
    );
    let _ = cluster.execute(tx, tc_flags::ROLLBACK, &[]);
    assert!(cluster.tc().counters().refused_overload >= 3);
    cluster.check_idle();
}

#[test]
fn bad_requests_are_permanent_errors_and_the_tc_stays_usable() {
    let mut cluster = started(19, Limits::default());
    let tc = tc_of(cluster.data_nodes[0]);
    let table = cluster.table().clone();
    let request = |cluster: &mut Cluster, table_id: u32, version: u32, value: Value| {
        let mut out = Vec::new();
        let mut w = OpBatchWriter::new(&mut out);
        w.begin(&OpHeader {
            op_index: 0,
            table_id,
            table_version: version,
            index_id: NO_INDEX,
            partition: NO_PARTITION,
            kind: OpKind::Insert,
            lock: LockMode::Exclusive,
            flags: 0,
        });
        w.key(Value::Int(1).as_ref());
        w.value(1, value.as_ref());
        w.value(2, Value::Null.as_ref());
        w.end().unwrap();
        drop(w);
        let tx = cluster.tx_id();
        cluster.send(
            tc,
            SignalBody::TcKeyReq {
                tx_id: tx,
                flags: tc_flags::START | tc_flags::COMMIT,
                ops: out,
            },
        );
        cluster.reply_within(tx, ANSWER_WAIT).expect("answered")
    };
    let cases = [
        (
            table.id + 1000,
            table.version,
            Value::Int(1),
            error::NO_SUCH_TABLE,
            "1",
        ),
        (
            table.id,
            table.version + 1,
            Value::Int(1),
            error::WRONG_SCHEMA_VERSION,
            "accounts",
        ),
        (
            table.id,
            table.version,
            Value::String("x".into()),
            error::BAD_VALUE,
            "v",
        ),
    ];
    for (table_id, version, value, code, names) in cases {
        match request(&mut cluster, table_id, version, value) {
            Reply::Ref {
                code: got, message, ..
            } => {
                assert_eq!(got, code, "{message}");
                assert_eq!(error::class(got), proto::ErrorClass::Permanent);
                assert!(message.contains(names), "{message} names {names}");
            }
            other => panic!("{other:?}"),
        }
    }
    // Malformed bytes.
    let tx = cluster.tx_id();
    cluster.send(
        tc,
        SignalBody::TcKeyReq {
            tx_id: tx,
            flags: tc_flags::START,
            ops: vec![1, 2, 3],
        },
    );
    match cluster.reply_within(tx, ANSWER_WAIT).expect("answered") {
        Reply::Ref { code, .. } => assert_eq!(code, error::MALFORMED_REQUEST),
        other => panic!("{other:?}"),
    }
    // Unknown transaction, and a second request while one is in progress.
    let unknown = cluster.tx_id();
    match cluster.execute(
        unknown,
        tc_flags::COMMIT,
        &[Op::read(1, LockMode::Committed)],
    ) {
        Reply::Ref { code, .. } => assert_eq!(error::class(code), proto::ErrorClass::Permanent),
        other => panic!("{other:?}"),
    }
    committed(&cluster.commit(&[Op::write(OpKind::Insert, 1, 1)]));
    let (holder, waiter) = (cluster.tx_id(), cluster.tx_id());
    assert!(matches!(
        cluster.execute(holder, tc_flags::START, &[Op::read(1, LockMode::Exclusive)]),
        Reply::Conf { .. }
    ));
    cluster.submit(waiter, tc_flags::START, &[Op::write(OpKind::Update, 1, 2)]);
    cluster.sim.run_for(Duration::from_millis(20));
    match cluster.execute(waiter, 0, &[Op::read(1, LockMode::Committed)]) {
        Reply::Ref { code, message, .. } => {
            assert_eq!(code, error::BAD_OPERATION);
            assert!(message.contains("in progress"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    committed(&cluster.execute(holder, tc_flags::COMMIT, &[]));
    match cluster
        .reply_within(waiter, ANSWER_WAIT)
        .expect("the waiter goes on")
    {
        Reply::Conf { flags, .. } => assert_eq!(flags, 0),
        other => panic!("{other:?}"),
    }
    committed(&cluster.execute(waiter, tc_flags::COMMIT, &[]));
    // Still usable.
    committed(&cluster.commit(&[Op::write(OpKind::Insert, 2, 2)]));
    assert_eq!(cluster.read_values(&[1, 2]), vec![Some(2), Some(2)]);
    cluster.check_idle();
}

#[test]
fn two_replicas_commit_on_both_nodes_and_gcps_cover_both() {
    let mut cluster = Cluster::start(20, 2, Limits::default());
    cluster.create_table();
    let ldm_totals = |cluster: &Cluster| -> (u64, u64) {
        let mut totals = (0, 0);
        for &n in &cluster.data_nodes {
            for i in 0..LDM_INSTANCES {
                let stats = cluster
                    .sim
                    .block::<LdmBlock<SimDisk>>(ldm_of(n, i))
                    .unwrap()
                    .stats()
                    .clone();
                totals.0 += stats.ops;
                totals.1 += stats.commits;
            }
        }
        totals
    };
    let before = ldm_totals(&cluster);
    let ops: Vec<Op> = (0..50).map(|k| Op::write(OpKind::Insert, k, k)).collect();
    let (gci, _) = committed(&cluster.commit(&ops)).to_owned();
    assert!(gci > 0);
    let after = ldm_totals(&cluster);
    assert_eq!(
        after.0 - before.0,
        100,
        "every insert ran on the primary and on the backup"
    );
    assert_eq!(
        after.1 - before.1,
        4,
        "the commit reached every (node, LDM instance) holding a row"
    );
    let values = cluster.read_values(&(0..50).collect::<Vec<_>>());
    assert!(values.iter().enumerate().all(|(k, v)| *v == Some(k as i64)));
    assert_eq!(
        ldm_totals(&cluster).0 - after.0,
        50,
        "committed reads go to the primary only"
    );
    cluster.sim.run_for(GCP_INTERVAL * 4);
    assert!(cluster.master().durable_gci() >= gci);
    for &n in &cluster.data_nodes {
        assert!(
            cluster.tc_on(n).durable_gci() >= gci,
            "node {n} learned GCI {gci} is durable"
        );
    }
    cluster.check_idle();
}
