//! FULLY_REPLICATED tables in the simulator (docs/transactions.md,
//! "Placement and routing"): 4 data nodes = 2 node groups × 2 replicas.
//! Every committed write is in the storage of every data node (read from
//! each LDM instance's fragments, not through a transaction); a committed
//! read and a committed scan through any node's TC are served by that node
//! alone; a write while a node is down reaches every surviving copy, and a
//! node that restarts copies its fragments (those of both groups' partitions)
//! and ends equal to the others; a TC that fails with writes in flight is
//! taken over and every surviving copy ends equal, no transaction half
//! done. The harness is `tests/common`.

#[path = "common/accounts.rs"]
mod accounts;
mod common;

use common::*;
use proto::RowBatchReader;
use storage::fragment::{ScanBatch, ScanCursor, ScanProgress, ScanRange, ScanSpec};

const ROWS: i64 = 64;
/// Most simulated time the restarted node may take to catch up.
const CATCH_UP_MAX: Duration = Duration::from_secs(20);

/// Rows by key: `Some(v)` present (v NULL is not written here), `None`
/// deleted.
type Model = BTreeMap<i64, Option<i64>>;

fn start(seed: u64) -> Cluster {
    let mut cluster = Cluster::start(seed, 4, 2);
    let table = TableDef::new(
        "everywhere",
        0,
        vec![
            Column::new("id", ColumnType::BigInt { unsigned: false }),
            Column::new("v", ColumnType::BigInt { unsigned: false }).nullable(),
        ],
    )
    .primary_key(vec![0])
    .partitions(PARTITIONS)
    .fully_replicated(true);
    cluster.create_table_def(table);
    let table = cluster.table.as_ref().expect("created");
    assert!(table.fully_replicated && table.read_backup, "{table:?}");
    cluster
}

/// Commits `kind` of `keys` with value `v` through the TC of `tc`,
/// retrying temporary errors; records the outcome in `model`.
fn commit(
    cluster: &mut Cluster,
    model: &mut Model,
    tc: NodeId,
    kind: OpKind,
    keys: &[i64],
    v: i64,
) {
    for _ in 0..50 {
        let ops = cluster.batch(kind, keys, v);
        match cluster
            .run_one_on(tc, tc_flags::START | tc_flags::COMMIT, ops)
            .0
        {
            Ok(flags) => {
                assert_eq!(flags, tc_flags::COMMITTED);
                for &k in keys {
                    model.insert(k, (kind != OpKind::Delete).then_some(v));
                }
                return;
            }
            Err(code) => {
                assert_eq!(
                    error::class(code),
                    ErrorClass::Temporary,
                    "{kind:?} of {keys:?} on {tc}: error {code}"
                );
                cluster.sim.run_for(Duration::from_millis(20));
            }
        }
    }
    panic!("{kind:?} of {keys:?} on {tc}: refused 50 times");
}

/// Committed reads of `keys` through the TC of `tc`.
fn read_on(cluster: &mut Cluster, tc: NodeId, keys: &[i64]) -> Vec<Option<i64>> {
    let ops = cluster.batch(OpKind::Read, keys, 0);
    let (outcome, results) = cluster.run_one_on(tc, tc_flags::START | tc_flags::COMMIT, ops);
    assert_eq!(outcome, Ok(tc_flags::COMMITTED), "reads on {tc}");
    ResultReader::new(&results)
        .expect("a valid result batch")
        .iter()
        .map(|r| match r.code {
            0 => match r.values().nth(1).map(|v| v.to_value()) {
                Some(Value::Int(v)) => Some(v),
                other => panic!("key {}: value {other:?}", keys[r.op_index as usize]),
            },
            error::NO_SUCH_ROW => None,
            other => panic!("read of key {} answered {other}", keys[r.op_index as usize]),
        })
        .collect()
}

/// A committed full scan through the TC of `tc`: every (id, v).
fn scan_on(cluster: &mut Cluster, tc: NodeId) -> BTreeMap<i64, i64> {
    let table = cluster.table.clone().expect("created");
    let spec = full_scan_spec(&table);
    let (tx_id, scan_id) = (cluster.tx_id(), 1);
    cluster.send(
        tc_of(tc),
        SignalBody::TcScanReq {
            tx_id,
            scan_id,
            flags: tc_flags::START,
            spec: spec.to_bytes(),
        },
    );
    let mut rows = BTreeMap::new();
    let until = cluster.sim.now() + Duration::from_secs(3);
    loop {
        assert!(cluster.sim.now() < until, "scan on {tc} does not end");
        cluster.sim.run_for(Duration::from_millis(1));
        let mut done = false;
        let mut refused = None;
        let mut next = 0;
        let got = std::mem::take(&mut *cluster.got.lock().unwrap());
        for s in got {
            match s.body {
                SignalBody::TcScanConf {
                    tx_id: t,
                    rows: bytes,
                    done: last,
                    ..
                } if t == tx_id => {
                    for row in RowBatchReader::new(&bytes)
                        .expect("a valid row batch")
                        .iter()
                    {
                        let values: Vec<Value> = row.values().map(|v| v.to_value()).collect();
                        let (Value::Int(k), Value::Int(v)) = (&values[0], &values[1]) else {
                            panic!("scan on {tc}: row {values:?}");
                        };
                        assert!(rows.insert(*k, *v).is_none(), "scan on {tc}: key {k} twice");
                    }
                    done |= last;
                    next += usize::from(!last);
                }
                SignalBody::TcScanRef {
                    tx_id: t,
                    code,
                    message,
                    ..
                } if t == tx_id => {
                    refused = Some(format!("scan on {tc}: {code} {message}"));
                }
                _ => {}
            }
        }
        // A next answering a batch that came before the last can reach the
        // TC after the scan ended: refused then, and harmless.
        if done {
            break;
        }
        if let Some(refused) = refused {
            panic!("{refused}");
        }
        for _ in 0..next {
            cluster.send(
                tc_of(tc),
                SignalBody::TcScanNextReq {
                    tx_id,
                    scan_id,
                    close: false,
                },
            );
        }
    }
    let (outcome, _) = run_on_existing(cluster, tc, tx_id);
    assert_eq!(
        outcome,
        Ok(tc_flags::COMMITTED),
        "the scan's transaction on {tc} commits"
    );
    rows
}

/// Commits an open transaction (no more ops).
fn run_on_existing(cluster: &mut Cluster, tc: NodeId, tx_id: u64) -> (Result<u32, u32>, ()) {
    cluster.send(
        tc_of(tc),
        SignalBody::TcKeyReq {
            tx_id,
            flags: tc_flags::COMMIT,
            ops: Vec::new(),
        },
    );
    let until = cluster.sim.now() + Duration::from_secs(3);
    while cluster.sim.now() < until {
        cluster.sim.run_for(Duration::from_millis(1));
        if let Some((_, outcome)) = cluster.answers().into_iter().find(|(t, _)| *t == tx_id) {
            return (outcome, ());
        }
    }
    panic!("commit of transaction {tx_id:#x} on {tc}: no answer");
}

/// The table's rows in node `n`'s storage, read from every LDM instance's
/// fragments, and the partitions it holds.
fn stored_on(cluster: &Cluster, n: NodeId) -> (BTreeMap<i64, i64>, Vec<u32>) {
    let table_id = cluster.table.as_ref().expect("created").id;
    let mut rows = BTreeMap::new();
    let mut partitions = Vec::new();
    for i in 0..LDM_INSTANCES {
        let ldm = cluster
            .sim
            .block::<LdmBlock<SimDisk>>(ldm_of(n, i))
            .unwrap_or_else(|| panic!("node {n} is up"));
        let storage = ldm.storage().expect("open");
        let ids: Vec<(u32, u32)> = storage
            .fragment_ids()
            .filter(|&(t, _)| t == table_id)
            .collect();
        for (t, p) in ids {
            partitions.push(p);
            let (fragment, pool) = storage.fragment_with_pool(t, p).expect("listed");
            let spec = ScanSpec {
                range: ScanRange::Full,
                columns: vec![0, 1],
            };
            let mut cursor = ScanCursor::new();
            let mut batch = ScanBatch::new();
            loop {
                let progress = fragment
                    .scan(pool, &spec, &mut cursor, 64, &mut batch)
                    .expect("a full scan");
                for r in 0..batch.len() {
                    let key = batch.value(fragment.layout(), r, 0).to_value();
                    let value = batch.value(fragment.layout(), r, 1).to_value();
                    let (Value::Int(k), Value::Int(v)) = (&key, &value) else {
                        panic!("node {n} partition {p}: row {key:?} {value:?}");
                    };
                    assert!(rows.insert(*k, *v).is_none(), "node {n}: key {k} twice");
                }
                if progress == ScanProgress::Done {
                    break;
                }
            }
        }
    }
    partitions.sort_unstable();
    (rows, partitions)
}

/// Every up node stores exactly the model's rows, in every partition.
fn check_copies(cluster: &Cluster, model: &Model, what: &str) {
    let want: BTreeMap<i64, i64> = model
        .iter()
        .filter_map(|(&k, v)| v.map(|v| (k, v)))
        .collect();
    let live = cluster.live_nodes();
    for &n in &live {
        let (rows, partitions) = stored_on(cluster, n);
        assert_eq!(
            partitions,
            (0..PARTITIONS).collect::<Vec<_>>(),
            "{what}: node {n} holds every partition"
        );
        assert_eq!(rows, want, "{what}: node {n}'s copy");
    }
}

/// A shared-lock read of `key` (a locking read: the primary's work).
fn locking_read(cluster: &Cluster, key: i64) -> Vec<u8> {
    let table = cluster.table.as_ref().expect("created");
    let mut out = Vec::new();
    let mut w = OpBatchWriter::new(&mut out);
    w.begin(&OpHeader {
        op_index: 0,
        table_id: table.id,
        table_version: table.version,
        index_id: NO_INDEX,
        partition: NO_PARTITION,
        kind: OpKind::Read,
        lock: LockMode::Shared,
        flags: 0,
    });
    w.key(Value::Int(key).as_ref());
    w.end().expect("one op fits");
    drop(w);
    out
}

fn key_requests(cluster: &Cluster, n: NodeId) -> u64 {
    (0..LDM_INSTANCES)
        .map(|i| {
            cluster
                .sim
                .block::<LdmBlock<SimDisk>>(ldm_of(n, i))
                .map_or(0, |l| l.stats().key_requests)
        })
        .sum()
}

fn scans(cluster: &Cluster, n: NodeId) -> u64 {
    (0..LDM_INSTANCES)
        .map(|i| {
            cluster
                .sim
                .block::<LdmBlock<SimDisk>>(ldm_of(n, i))
                .map_or(0, |l| l.stats().scans)
        })
        .sum()
}

#[test]
fn every_node_holds_every_row_and_serves_committed_reads_alone() {
    let mut cluster = start(11);
    let mut model = Model::new();
    let keys: Vec<i64> = (0..ROWS).collect();
    // Writes through a TC of each group.
    for (c, chunk) in keys.chunks(16).enumerate() {
        let tc = if c % 2 == 0 { node(2) } else { node(5) };
        commit(
            &mut cluster,
            &mut model,
            tc,
            OpKind::Insert,
            chunk,
            c as i64,
        );
    }
    commit(
        &mut cluster,
        &mut model,
        node(4),
        OpKind::Update,
        &keys[..8],
        99,
    );
    commit(
        &mut cluster,
        &mut model,
        node(3),
        OpKind::Delete,
        &keys[8..12],
        0,
    );
    check_copies(&cluster, &model, "after the commits");

    let want: Vec<Option<i64>> = keys.iter().map(|k| model[k]).collect();
    let want_rows: BTreeMap<i64, i64> = model
        .iter()
        .filter_map(|(&k, v)| v.map(|v| (k, v)))
        .collect();
    for &n in &cluster.data_nodes.clone() {
        let before: Vec<u64> = cluster
            .data_nodes
            .iter()
            .map(|&m| key_requests(&cluster, m))
            .collect();
        let tc_before = cluster.sim.block::<TcBlock>(tc_of(n)).unwrap().counters();
        assert_eq!(
            read_on(&mut cluster, n, &keys),
            want,
            "reads through node {n}"
        );
        let after: Vec<u64> = cluster
            .data_nodes
            .iter()
            .map(|&m| key_requests(&cluster, m))
            .collect();
        for (m, (b, a)) in cluster.data_nodes.iter().zip(before.iter().zip(&after)) {
            if *m == n {
                assert!(a > b, "reads through node {n} are served there");
            } else {
                assert_eq!(a, b, "reads through node {n} reached node {m}");
            }
        }
        let tc_after = cluster.sim.block::<TcBlock>(tc_of(n)).unwrap().counters();
        assert_eq!(
            tc_after.local_reads - tc_before.local_reads,
            ROWS as u64,
            "node {n}"
        );

        // A locking read runs on the partition's primary, wherever the TC is.
        let primary = |cluster: &Cluster, key: i64| {
            let table = cluster.table.as_ref().expect("created");
            let mut bytes = Vec::new();
            schema::KeyEncoder::distribution_key(table)
                .encode(&[Value::Int(key)], &mut bytes)
                .expect("fits");
            let p = schema::partition_of(schema::distribution_hash(&bytes), PARTITIONS);
            let groups = cluster.groups.clone();
            Placement::new(groups, LDM_INSTANCES).home(p).primary()
        };
        let key = (0..ROWS)
            .find(|&k| primary(&cluster, k) != n)
            .expect("a key with another primary");
        let owner = primary(&cluster, key);
        let before = key_requests(&cluster, owner);
        let ops = locking_read(&cluster, key);
        assert_eq!(
            cluster
                .run_one_on(n, tc_flags::START | tc_flags::COMMIT, ops)
                .0,
            Ok(tc_flags::COMMITTED),
            "locking read on {n}"
        );
        assert!(
            key_requests(&cluster, owner) > before,
            "a locking read through {n} runs on primary {owner}"
        );

        let scans_before: Vec<u64> = cluster
            .data_nodes
            .iter()
            .map(|&m| scans(&cluster, m))
            .collect();
        assert_eq!(
            scan_on(&mut cluster, n),
            want_rows,
            "a scan through node {n}"
        );
        for (k, &m) in cluster.data_nodes.iter().enumerate() {
            let grew = scans(&cluster, m) - scans_before[k];
            if m == n {
                assert_eq!(
                    grew,
                    u64::from(PARTITIONS),
                    "a scan through node {n}: one copy per partition"
                );
            } else {
                assert_eq!(grew, 0, "a scan through node {n} reached node {m}");
            }
        }
    }
}

#[test]
fn writes_during_a_failure_and_a_restart_keep_every_copy_equal() {
    let mut cluster = start(12);
    let mut rng = Rng::seeded(12);
    let mut model = Model::new();
    let keys: Vec<i64> = (0..ROWS).collect();
    for chunk in keys.chunks(16) {
        commit(&mut cluster, &mut model, node(2), OpKind::Insert, chunk, 0);
    }
    cluster.sim.run_for(Duration::from_millis(300));
    let victim = node(3);
    cluster.sim.crash(victim);
    cluster.sim.run_for(Duration::from_millis(500));
    // While it is down, through a TC of each group: its chain drops it.
    commit(
        &mut cluster,
        &mut model,
        node(2),
        OpKind::Update,
        &keys[..16],
        1,
    );
    commit(
        &mut cluster,
        &mut model,
        node(4),
        OpKind::Update,
        &keys[16..32],
        2,
    );
    commit(
        &mut cluster,
        &mut model,
        node(5),
        OpKind::Delete,
        &keys[32..40],
        0,
    );
    let inserted: Vec<i64> = (ROWS..ROWS + 16).collect();
    commit(
        &mut cluster,
        &mut model,
        node(4),
        OpKind::Insert,
        &inserted,
        3,
    );
    check_copies(&cluster, &model, "during the failure");

    cluster.sim.restart(victim);
    let reconnected = cluster.sim.now() + Duration::from_millis(500);
    let until = cluster.sim.now() + CATCH_UP_MAX;
    let mut writes = 0;
    let mut after = 0;
    while after < 10 {
        assert!(cluster.sim.now() < until, "node {victim} does not catch up");
        let tcs = [node(2), node(4), node(5), victim];
        let choices = if cluster.sim.now() > reconnected {
            4
        } else {
            3
        };
        let tc = tcs[(rng.next_u64() % choices) as usize];
        let k = (rng.next_u64() % (ROWS as u64 + 16)) as i64;
        let exists = model.get(&k).copied().flatten().is_some();
        match rng.next_u64() % 4 {
            0 if exists => commit(&mut cluster, &mut model, tc, OpKind::Delete, &[k], 0),
            _ => commit(
                &mut cluster,
                &mut model,
                tc,
                OpKind::Write,
                &[k],
                100 + writes,
            ),
        }
        writes += 1;
        if cluster.serving(victim) {
            after += 1;
        }
    }
    assert!(
        writes > 10,
        "writes ran while node {victim} caught up: {writes}"
    );
    cluster.sim.run_for(Duration::from_millis(300));
    assert_eq!(cluster.live_nodes().len(), 4);
    check_copies(&cluster, &model, "after the restart");
    // The restarted node serves committed reads of its own copy.
    let all: Vec<i64> = (0..ROWS + 16).collect();
    let want: Vec<Option<i64>> = all
        .iter()
        .map(|k| model.get(k).copied().flatten())
        .collect();
    let before = key_requests(&cluster, node(2))
        + key_requests(&cluster, node(4))
        + key_requests(&cluster, node(5));
    assert_eq!(
        read_on(&mut cluster, victim, &all),
        want,
        "reads through the restarted node"
    );
    let after_reads = key_requests(&cluster, node(2))
        + key_requests(&cluster, node(4))
        + key_requests(&cluster, node(5));
    assert_eq!(before, after_reads, "reads through {victim} stay there");
    for &n in &cluster.live_nodes() {
        for i in 0..LDM_INSTANCES {
            let ldm = cluster
                .sim
                .block::<LdmBlock<SimDisk>>(ldm_of(n, i))
                .unwrap();
            assert_eq!(ldm.copies_out(), 0, "node {n}: copies left");
        }
    }
}

/// A TC fails with writes of a fully replicated table in flight: the
/// surviving TCs take its transactions over, and every surviving copy ends
/// equal, each row either as before or as a transaction wrote it, and as
/// written where the commit was answered.
fn tc_takeover_keeps_every_copy_equal(seed: u64, crash_after: Duration) -> u64 {
    let mut cluster = start(seed);
    let mut model = Model::new();
    let keys: Vec<i64> = (0..ROWS).collect();
    for chunk in keys.chunks(16) {
        commit(&mut cluster, &mut model, node(2), OpKind::Insert, chunk, 0);
    }
    cluster.sim.run_for(Duration::from_millis(100));
    let victim = node(4);
    // One transaction per pair of keys, all at once on the victim's TC.
    let mut sent = Vec::new();
    for (i, pair) in keys.chunks(2).enumerate() {
        let v = 1_000 + i as i64;
        let ops = cluster.batch(OpKind::Update, pair, v);
        let tx_id = cluster.tx_id();
        let flags = tc_flags::START | tc_flags::COMMIT;
        cluster.send(tc_of(victim), SignalBody::TcKeyReq { tx_id, flags, ops });
        sent.push((tx_id, pair.to_vec(), v));
    }
    cluster.sim.run_for(crash_after);
    let answered = cluster.answers();
    cluster.sim.crash(victim);
    cluster.sim.run_for(Duration::from_secs(2));
    let copies: Vec<(NodeId, BTreeMap<i64, i64>)> = cluster
        .live_nodes()
        .into_iter()
        .map(|n| (n, stored_on(&cluster, n).0))
        .collect();
    assert_eq!(copies.len(), 3);
    for (n, rows) in &copies[1..] {
        assert_eq!(
            rows, &copies[0].1,
            "seed {seed}: node {n} and node {} differ",
            copies[0].0
        );
    }
    let rows = &copies[0].1;
    for (tx_id, pair, v) in &sent {
        let outcome = answered.iter().find(|(t, _)| t == tx_id).map(|(_, o)| *o);
        for k in pair {
            let got = rows[k];
            match outcome {
                Some(Ok(flags)) => {
                    assert_eq!(flags, tc_flags::COMMITTED);
                    assert_eq!(got, *v, "seed {seed}: key {k} committed as {v}");
                }
                // Not answered (or refused): all of it or nothing of it.
                _ => {
                    let other = rows[&pair[0]];
                    assert!(got == 0 || got == *v, "seed {seed}: key {k} is {got}");
                    assert_eq!(got, other, "seed {seed}: transaction {tx_id:#x} half done");
                }
            }
        }
    }
    for n in cluster.live_nodes() {
        for i in 0..LDM_INSTANCES {
            let ldm = cluster
                .sim
                .block::<LdmBlock<SimDisk>>(ldm_of(n, i))
                .unwrap();
            assert_eq!(
                ldm.transactions(),
                0,
                "seed {seed}: node {n} LDM {i}: transactions left"
            );
        }
    }
    cluster
        .live_nodes()
        .iter()
        .map(|&n| {
            cluster
                .sim
                .block::<TcBlock>(tc_of(n))
                .unwrap()
                .counters()
                .taken_over
        })
        .sum()
}

#[test]
fn a_tc_failure_is_taken_over_on_every_copy() {
    let mut taken_over = 0;
    for (seed, ms) in [(21, 1), (22, 2), (23, 3), (24, 4), (25, 6)] {
        taken_over += tc_takeover_keeps_every_copy_equal(seed, Duration::from_millis(ms));
    }
    assert!(taken_over > 0, "some transactions were taken over");
}
