//! The LDM block in the deterministic simulator: data nodes of the shared
//! harness (`common`) without their TC and distribution blocks (membership,
//! dictionary and one LDM instance, on simulated disks), and the API
//! node's recorder, whose test plays the transaction coordinator:
//! it sends `LdmKeyReq` batches, commits, aborts, scans and global
//! checkpoint saves, and records every answer. Results are checked against
//! a model (a `BTreeMap`), and each test ends with checks of what the
//! instances hold.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::*;
use kernel::simulator::IoSettings;
use proto::error;
use proto::ops::{
    LockMode, LockWait, OpBatchWriter, OpHeader, OpKind, KEY_INFO, NO_INDEX, NO_WAIT, SKIP_LOCKED,
    UNLOCK,
};
use proto::results::ResultReader;
use proto::scan::{RowBatchReader, ScanSpec};
use proto::{CmpOp, Filter};
use schema::{
    distribution_hash, partition_of, Collation, Column, ColumnType, KeyEncoder, TableDef, Value,
};
use storage::disk::Disk;

/// The block the LDM instances answer: the API node's recorder, playing
/// the TC.
fn tc() -> BlockRef {
    BlockRef::new(API, BlockNumber::API_CLUSTER, 0)
}

fn ldm(n: NodeId) -> BlockRef {
    BlockRef::new(n, BlockNumber::LOCAL_DATA_MANAGER, 0)
}

/// The answer to one operation.
#[derive(Clone, Debug, PartialEq)]
struct OpAnswer {
    code: u32,
    row: Option<Vec<Value>>,
    keys: Vec<Value>,
}

/// One operation to send: on the test table `(id BIGINT, v INT NULL, s VARCHAR(20) NULL)`.
#[derive(Clone, Debug)]
struct Op {
    kind: OpKind,
    lock: LockMode,
    key: i64,
    v: Option<i64>,
    s: Option<String>,
    flags: u8,
}

impl Op {
    fn read(key: i64, lock: LockMode) -> Op {
        Op {
            kind: OpKind::Read,
            lock,
            key,
            v: None,
            s: None,
            flags: 0,
        }
    }

    fn write(kind: OpKind, key: i64, v: i64) -> Op {
        Op {
            kind,
            lock: LockMode::Exclusive,
            key,
            v: Some(v),
            s: Some(format!("s{v}")),
            flags: 0,
        }
    }

    fn delete(key: i64) -> Op {
        Op {
            kind: OpKind::Delete,
            lock: LockMode::Exclusive,
            key,
            v: None,
            s: None,
            flags: 0,
        }
    }
}

impl Cluster {
    /// `n` data nodes in one node group (`n` replicas), one LDM instance each.
    fn start(seed: u64, n: u8) -> Cluster {
        let data_nodes: Vec<NodeId> = (0..n).map(|i| node(2 + i)).collect();
        let placement = Placement::new(vec![data_nodes], 1);
        let tune = |spec: &mut NodeSpec| {
            spec.lcp_interval = Duration::from_millis(500);
            // The test plays the TC, and saves global checkpoints itself.
            spec.left_out = vec![
                BlockNumber::TRANSACTION_COORDINATOR,
                BlockNumber::DISTRIBUTION,
            ];
        };
        let mut cluster = Cluster::wire(seed, placement, tune, |_| {});
        cluster.sim.run_for(START_TIME);
        for &id in &cluster.data_nodes {
            assert!(
                cluster.ldm_block(id).is_open(),
                "node {id}: the LDM instance opened at start"
            );
        }
        cluster
    }

    fn ldm_block(&self, id: NodeId) -> &LdmBlock<SimDisk> {
        self.sim
            .block::<LdmBlock<SimDisk>>(ldm(id))
            .unwrap_or_else(|| panic!("node {id} is down"))
    }

    fn settle(&mut self) {
        self.sim.run_for(Duration::from_millis(20));
    }

    /// Creates the test table (partition count 0: the default) and reads
    /// its definition back by name.
    fn create_table(&mut self) -> TableDef {
        let varchar = ColumnType::VarChar {
            max: 20,
            collation: Collation::Utf8mb4Bin,
        };
        let table = TableDef::new(
            "accounts",
            0,
            vec![
                Column::new("id", ColumnType::BigInt { unsigned: false }),
                Column::new("v", ColumnType::Int { unsigned: false }).nullable(),
                Column::new("s", varchar).nullable(),
            ],
        )
        .primary_key(vec![0])
        .partitions(0);
        let request_id = self.next_request;
        self.next_request += 1;
        let dict = BlockRef::new(self.data_nodes[0], BlockNumber::DICTIONARY, 0);
        self.send(
            dict,
            SignalBody::DictCreateTableReq {
                request_id,
                table: table.to_bytes(),
            },
        );
        self.sim.run_for(Duration::from_millis(200));
        let answers = self.take();
        assert!(
            answers.iter().any(|s| matches!(s.body, SignalBody::DictCreateTableConf { request_id: r, .. } if r == request_id)),
            "create answered: {answers:?}"
        );
        self.send(
            dict,
            SignalBody::DictGetTableReq {
                request_id,
                table_id: 0,
                name: "accounts".into(),
            },
        );
        self.send(
            dict,
            SignalBody::DictGetTableReq {
                request_id: request_id + 1000,
                table_id: 0,
                name: "nope".into(),
            },
        );
        self.settle();
        let mut table = None;
        let mut refused = false;
        for s in self.take() {
            match s.body {
                SignalBody::DictGetTableConf {
                    request_id: r,
                    group,
                } if r == request_id => {
                    table = Some(TableDef::decode(&group.tables[0]).unwrap());
                }
                SignalBody::DictGetTableRef { code, message, .. } => {
                    assert_eq!(code, error::NO_SUCH_TABLE);
                    assert!(message.contains("nope"), "{message}");
                    refused = true;
                }
                _ => {}
            }
        }
        assert!(refused, "an unknown name is refused");
        let table = table.expect("the table is found by name");
        assert_eq!(
            table.partitions,
            self.placement.default_partitions(),
            "partitions 0 became the default"
        );
        self.table = Some(table.clone());
        table
    }

    fn table(&self) -> &TableDef {
        self.table.as_ref().expect("created")
    }

    fn partition_of(&self, key: i64) -> u32 {
        let table = self.table();
        let mut bytes = Vec::new();
        KeyEncoder::distribution_key(table)
            .encode(&[Value::Int(key)], &mut bytes)
            .unwrap();
        partition_of(distribution_hash(&bytes), table.partitions)
    }

    /// The op batch for `ops`, all on one partition.
    fn batch(&self, ops: &[Op], version: u32) -> Vec<u8> {
        let table = self.table();
        let mut bytes = Vec::new();
        let mut writer = OpBatchWriter::new(&mut bytes);
        for (i, op) in ops.iter().enumerate() {
            writer.begin(&OpHeader {
                op_index: i as u32,
                table_id: table.id,
                table_version: version,
                index_id: NO_INDEX,
                partition: self.partition_of(op.key),
                kind: op.kind,
                lock: op.lock,
                flags: op.flags,
            });
            writer.key(Value::Int(op.key).as_ref());
            if matches!(op.kind, OpKind::Insert | OpKind::Write | OpKind::Update) {
                let v = op.v.map_or(Value::Null, Value::Int);
                let s = op.s.clone().map_or(Value::Null, Value::String);
                writer.value(1, v.as_ref());
                writer.value(2, s.as_ref());
            }
            writer.end().unwrap();
        }
        drop(writer);
        bytes
    }

    /// Sends `ops` (all on one partition) to its primary with the backups as
    /// the chain; does not run the simulation.
    fn send_ops(&mut self, tx: u64, ops: &[Op]) {
        let partition = self.partition_of(ops[0].key);
        assert!(ops.iter().all(|o| self.partition_of(o.key) == partition));
        let home = self.placement.home(partition);
        let any_write = ops.iter().any(|o| o.kind != OpKind::Read);
        let chain: signal::Chain = if any_write {
            home.backups().collect()
        } else {
            signal::Chain::new()
        };
        let version = self.table().version;
        let ops = self.batch(ops, version);
        self.send(
            ldm(home.primary()),
            SignalBody::LdmKeyReq {
                tx_id: tx,
                tc: tc(),
                chain,
                ops,
            },
        );
    }

    /// The answers to `tx`'s operations recorded so far, by op index.
    fn answers(&self, signals: &[Signal], tx: u64) -> BTreeMap<u32, OpAnswer> {
        let mut out = BTreeMap::new();
        for s in signals {
            if let SignalBody::LdmKeyConf { tx_id, results, .. } = &s.body {
                if *tx_id != tx {
                    continue;
                }
                for r in ResultReader::new(results).unwrap().iter() {
                    let answer = OpAnswer {
                        code: r.code,
                        row: r
                            .has_row
                            .then(|| r.values().map(|v| v.to_value()).collect()),
                        keys: r.keys().map(|v| v.to_value()).collect(),
                    };
                    assert!(
                        out.insert(r.op_index, answer).is_none(),
                        "op {} answered twice",
                        r.op_index
                    );
                }
            }
        }
        out
    }

    /// Runs `ops` of `tx` one partition at a time and returns the answers
    /// in op order.
    fn run_ops(&mut self, tx: u64, ops: &[Op]) -> Vec<OpAnswer> {
        let mut all = Vec::new();
        for op in ops {
            self.send_ops(tx, std::slice::from_ref(op));
            self.settle();
            let signals = self.take();
            let answers = self.answers(&signals, tx);
            assert_eq!(answers.len(), 1, "one answer for {op:?}: {signals:?}");
            all.push(answers[&0].clone());
        }
        all
    }

    fn end(&mut self, tx: u64, commit: Option<u32>) {
        for id in self.data_nodes.clone() {
            let body = match commit {
                Some(gci) => SignalBody::LdmCommitReq {
                    tx_id: tx,
                    epoch: signal::epoch::make(gci, 0),
                },
                None => SignalBody::LdmAbortReq { tx_id: tx },
            };
            self.send(ldm(id), body);
        }
        self.settle();
        let confs =
            self.take()
                .into_iter()
                .filter(|s| match s.body {
                    SignalBody::LdmCommitConf { tx_id, .. }
                    | SignalBody::LdmAbortConf { tx_id } => tx_id == tx,
                    _ => false,
                })
                .count();
        assert_eq!(
            confs,
            self.data_nodes.len(),
            "every instance confirms the end of {tx:#x}"
        );
    }

    /// Committed reads of `keys` on `at` (each its own request).
    fn read_committed_at(&mut self, at: NodeId, keys: &[i64]) -> BTreeMap<i64, Option<Row>> {
        let tx = 0xEEEE;
        let mut out = BTreeMap::new();
        for &key in keys {
            let ops = self.batch(&[Op::read(key, LockMode::Committed)], self.table().version);
            self.send(
                ldm(at),
                SignalBody::LdmKeyReq {
                    tx_id: tx,
                    tc: tc(),
                    chain: signal::Chain::new(),
                    ops,
                },
            );
            self.settle();
            let signals = self.take();
            let answer = self
                .answers(&signals, tx)
                .remove(&0)
                .expect("a committed read is answered at once");
            out.insert(key, row_of(&answer));
        }
        out
    }
}

/// `(v, s)` of a read answer, `None` for no row.
fn row_of(answer: &OpAnswer) -> Option<Row> {
    if answer.code == error::NO_SUCH_ROW {
        return None;
    }
    assert_eq!(answer.code, 0, "{answer:?}");
    let row = answer.row.as_ref().expect("a read returns its row");
    let v = match &row[1] {
        Value::Null => None,
        Value::Int(v) => Some(*v),
        other => panic!("v is {other:?}"),
    };
    let s = match &row[2] {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => panic!("s is {other:?}"),
    };
    Some((v, s))
}

/// `(v, s)` of a row.
type Row = (Option<i64>, Option<String>);
type Model = BTreeMap<i64, Row>;

/// What `op` answers on `state` (a transaction's view), applying it.
fn model_apply(state: &mut Model, op: &Op) -> (u32, Option<Row>) {
    let row = (op.v, op.s.clone());
    match op.kind {
        OpKind::Read => match state.get(&op.key) {
            Some(r) => (0, Some(r.clone())),
            None => (error::NO_SUCH_ROW, None),
        },
        OpKind::Insert => match state.entry(op.key) {
            std::collections::btree_map::Entry::Occupied(_) => (error::DUPLICATE_KEY, None),
            std::collections::btree_map::Entry::Vacant(slot) => {
                slot.insert(row);
                (0, None)
            }
        },
        OpKind::Write => {
            state.insert(op.key, row);
            (0, None)
        }
        OpKind::Update => match state.get_mut(&op.key) {
            Some(r) => {
                *r = row;
                (0, None)
            }
            None => (error::NO_SUCH_ROW, None),
        },
        OpKind::Delete => match state.remove(&op.key) {
            Some(_) => (0, None),
            None => (error::NO_SUCH_ROW, None),
        },
    }
}

#[test]
fn key_operations_follow_a_model_through_commits_and_aborts() {
    let mut c = Cluster::start(11, 1);
    c.create_table();
    let mut rng = Rng::seeded(7);
    let mut committed: Model = BTreeMap::new();
    let mut gci = 2;
    for round in 0..12u64 {
        let tx = 0x1000 + round;
        let mut view = committed.clone();
        let mut ops = Vec::new();
        for _ in 0..12 {
            let key = rng.below(24) as i64;
            let v = rng.below(1000) as i64;
            let op = match rng.below(6) {
                0 => Op::write(OpKind::Insert, key, v),
                1 => Op::write(OpKind::Update, key, v),
                2 => Op::write(OpKind::Write, key, v),
                3 => Op::delete(key),
                4 => Op::read(key, LockMode::Exclusive),
                _ => Op::read(key, LockMode::Shared),
            };
            ops.push(op);
        }
        let answers = c.run_ops(tx, &ops);
        for (op, answer) in ops.iter().zip(&answers) {
            let (code, row) = model_apply(&mut view, op);
            assert_eq!(answer.code, code, "round {round}: {op:?} → {answer:?}");
            if op.kind == OpKind::Read && code == 0 {
                assert_eq!(
                    row_of(answer),
                    row,
                    "round {round}: {op:?} sees its transaction's own writes"
                );
            }
        }
        // Committed reads meanwhile see the last committed state.
        let keys: Vec<i64> = (0..24).collect();
        let seen = c.read_committed_at(node(2), &keys);
        for (key, row) in &seen {
            assert_eq!(
                row.as_ref(),
                committed.get(key),
                "committed read of {key} during round {round}"
            );
        }
        if rng.chance(2, 3) {
            c.end(tx, Some(gci));
            gci += 1;
            committed = view;
        } else {
            c.end(tx, None);
        }
    }
    let keys: Vec<i64> = (0..24).collect();
    let seen = c.read_committed_at(node(2), &keys);
    for key in keys {
        assert_eq!(
            seen[&key].as_ref(),
            committed.get(&key),
            "key {key} after all rounds"
        );
    }
    let block = c.ldm_block(node(2));
    assert_eq!(block.transactions(), 0, "every transaction ended");
    assert_eq!(block.requests_held(), 0);
    assert!(block.stats().commits > 0 && block.stats().aborts > 0);
}

#[test]
fn batched_committed_reads_key_info_and_bad_operations() {
    let mut c = Cluster::start(12, 1);
    let table = c.create_table();
    let inserts: Vec<Op> = (0..50)
        .map(|k| Op::write(OpKind::Insert, k, k * 10))
        .collect();
    // One partition (one node, one instance): one request for all of them.
    c.send_ops(0x1, &inserts);
    c.settle();
    let signals = c.take();
    let answers = c.answers(&signals, 0x1);
    assert_eq!(answers.len(), 50);
    assert!(answers.values().all(|a| a.code == 0));
    assert_eq!(
        signals
            .iter()
            .filter(|s| matches!(s.body, SignalBody::LdmKeyConf { .. }))
            .count(),
        1,
        "one conf per request"
    );
    c.end(0x1, Some(2));

    // 100 committed reads in one request (the batched path), with key info.
    let reads: Vec<Op> = (0..100)
        .map(|k| Op {
            flags: KEY_INFO,
            ..Op::read(k, LockMode::Committed)
        })
        .collect();
    c.send_ops(0x2, &reads);
    c.settle();
    let signals = c.take();
    let answers = c.answers(&signals, 0x2);
    for k in 0..100i64 {
        let answer = &answers[&(k as u32)];
        if k < 50 {
            assert_eq!(
                row_of(answer),
                Some((Some(k * 10), Some(format!("s{}", k * 10))))
            );
            assert_eq!(answer.keys, vec![Value::Int(k)], "key info");
        } else {
            assert_eq!(answer.code, error::NO_SUCH_ROW);
        }
    }
    assert_eq!(
        c.ldm_block(node(2)).transactions(),
        0,
        "committed reads leave no transaction behind"
    );

    // Wrong version, too long a value, a duplicate key.
    let stale = c.batch(&[Op::read(1, LockMode::Committed)], table.version + 1);
    c.send(
        ldm(node(2)),
        SignalBody::LdmKeyReq {
            tx_id: 0x3,
            tc: tc(),
            chain: signal::Chain::new(),
            ops: stale,
        },
    );
    c.settle();
    let signals = c.take();
    assert_eq!(
        c.answers(&signals, 0x3)[&0].code,
        error::WRONG_SCHEMA_VERSION
    );
    let long = Op {
        s: Some("x".repeat(21)),
        ..Op::write(OpKind::Insert, 500, 1)
    };
    let answers = c.run_ops(0x4, &[long, Op::write(OpKind::Insert, 3, 1)]);
    assert_eq!(answers[0].code, error::VALUE_TOO_LONG);
    assert_eq!(answers[1].code, error::DUPLICATE_KEY);
    c.end(0x4, None);
    assert_eq!(c.read_committed_at(node(2), &[500])[&500], None);
}

#[test]
fn a_conflicting_write_waits_for_the_lock_and_an_aborted_waiter_leaves_nothing() {
    let mut c = Cluster::start(13, 1);
    c.create_table();
    c.run_ops(
        0x10,
        &[
            Op::write(OpKind::Insert, 5, 1),
            Op::write(OpKind::Insert, 6, 1),
        ],
    );
    c.end(0x10, Some(2));

    // A locks 5; B's update of 5 waits.
    let a = c.run_ops(0xA, &[Op::write(OpKind::Update, 5, 100)]);
    assert_eq!(a[0].code, 0);
    c.send_ops(0xB, &[Op::write(OpKind::Update, 5, 200)]);
    c.settle();
    let signals = c.take();
    assert!(
        c.answers(&signals, 0xB).is_empty(),
        "B waits for A's lock: {signals:?}"
    );
    assert_eq!(c.ldm_block(node(2)).requests_held(), 1);
    // Committed reads never wait.
    assert_eq!(
        c.read_committed_at(node(2), &[5])[&5],
        Some((Some(1), Some("s1".into())))
    );
    // B's next request queues behind its waiting one.
    c.send_ops(0xB, &[Op::read(5, LockMode::Exclusive)]);
    c.settle();
    assert!(c.answers(&c.take(), 0xB).is_empty());
    c.send(
        ldm(node(2)),
        SignalBody::LdmCommitReq {
            tx_id: 0xA,
            epoch: signal::epoch::make(3, 0),
        },
    );
    c.settle();
    // A's commit granted B: its update ran, then its queued read, which sees it.
    let confs: Vec<BTreeMap<u32, OpAnswer>> = c
        .take()
        .into_iter()
        .filter(|s| matches!(s.body, SignalBody::LdmKeyConf { tx_id: 0xB, .. }))
        .map(|s| c.answers(std::slice::from_ref(&s), 0xB))
        .collect();
    assert_eq!(confs.len(), 2, "one conf per request of B: {confs:?}");
    assert_eq!(confs[0][&0].code, 0);
    assert_eq!(
        row_of(&confs[1][&0]),
        Some((Some(200), Some("s200".into())))
    );
    c.end(0xB, Some(4));
    assert_eq!(
        c.read_committed_at(node(2), &[5])[&5],
        Some((Some(200), Some("s200".into())))
    );

    // C locks 6; D inserts 100 and then waits for 6; D aborts while waiting.
    assert_eq!(
        c.run_ops(0xC, &[Op::write(OpKind::Update, 6, 300)])[0].code,
        0
    );
    assert_eq!(
        c.run_ops(0xD, &[Op::write(OpKind::Insert, 100, 1)])[0].code,
        0
    );
    c.send_ops(0xD, &[Op::delete(6)]);
    c.settle();
    assert!(c.answers(&c.take(), 0xD).is_empty(), "D waits");
    c.end(0xD, None);
    c.end(0xC, Some(5));
    c.settle();
    assert!(
        c.answers(&c.take(), 0xD).is_empty(),
        "an aborted waiter is never answered"
    );
    let seen = c.read_committed_at(node(2), &[6, 100]);
    assert_eq!(seen[&6], Some((Some(300), Some("s300".into()))));
    assert_eq!(seen[&100], None, "nothing of the aborted transaction");
    let block = c.ldm_block(node(2));
    assert_eq!((block.transactions(), block.requests_held()), (0, 0));
    assert!(block.stats().ops_waited >= 2);
}

#[test]
fn the_waiting_write_is_answered_when_the_holder_commits() {
    let mut c = Cluster::start(14, 1);
    c.create_table();
    c.run_ops(0x10, &[Op::write(OpKind::Insert, 5, 1)]);
    c.end(0x10, Some(2));
    assert_eq!(
        c.run_ops(0xA, &[Op::read(5, LockMode::Exclusive)])[0].code,
        0
    );
    c.send_ops(
        0xB,
        &[
            Op::write(OpKind::Update, 5, 7),
            Op::read(5, LockMode::Shared),
        ],
    );
    c.settle();
    assert!(c.answers(&c.take(), 0xB).is_empty(), "B waits");
    c.send(
        ldm(node(2)),
        SignalBody::LdmCommitReq {
            tx_id: 0xA,
            epoch: signal::epoch::make(3, 0),
        },
    );
    c.settle();
    let signals = c.take();
    assert!(signals
        .iter()
        .any(|s| matches!(s.body, SignalBody::LdmCommitConf { tx_id: 0xA, gci: 3 })));
    let answers = c.answers(&signals, 0xB);
    assert_eq!(
        answers.len(),
        2,
        "both of B's operations ran after the grant: {signals:?}"
    );
    assert_eq!(answers[&0].code, 0);
    assert_eq!(
        row_of(&answers[&1]),
        Some((Some(7), Some("s7".into()))),
        "B reads its own update"
    );
    c.end(0xB, Some(4));
}

#[test]
fn writes_pass_along_the_replica_chain_and_both_replicas_hold_the_rows() {
    let mut c = Cluster::start(15, 2);
    c.create_table();
    assert_eq!(c.table().partitions, 2, "two nodes × one LDM instance");
    let mut model = Model::new();
    for k in 0..20i64 {
        let op = Op::write(OpKind::Insert, k, k);
        c.send_ops(0x20, std::slice::from_ref(&op));
        c.settle();
        let signals = c.take();
        let home = c.placement.home(c.partition_of(k));
        let confs: Vec<&Signal> = signals
            .iter()
            .filter(|s| matches!(s.body, SignalBody::LdmKeyConf { .. }))
            .collect();
        assert_eq!(confs.len(), 1, "{signals:?}");
        let last = home.backups().last().expect("two replicas");
        assert_eq!(
            confs[0].sender.node, last,
            "the last replica answers a write"
        );
        assert_eq!(c.answers(&signals, 0x20)[&0].code, 0);
        model_apply(&mut model, &op);
    }
    // A read at the primary only.
    let answers = c.run_ops(0x21, &[Op::read(3, LockMode::Committed)]);
    assert_eq!(
        row_of(&answers[0]),
        None,
        "uncommitted rows are not read committed"
    );
    c.end(0x20, Some(2));
    let keys: Vec<i64> = (0..20).collect();
    for n in [node(2), node(3)] {
        let seen = c.read_committed_at(n, &keys);
        for k in &keys {
            assert_eq!(seen[k].as_ref(), model.get(k), "node {n} key {k}");
        }
        let storage = c.ldm_block(n).storage().expect("open");
        assert_eq!(
            storage.fragment_ids().count(),
            2,
            "node {n} holds both partitions (two replicas)"
        );
    }
}

/// `FOR UPDATE NOWAIT` and `SKIP LOCKED` at the LDM: a locking key read
/// or scan that meets another transaction's lock fails at once
/// (`LOCK_BUSY`) or passes the row by, and queues nothing.
#[test]
fn locking_reads_that_must_not_wait() {
    let mut c = Cluster::start(17, 1);
    let table = c.create_table();
    let ops: Vec<Op> = (0..40).map(|k| Op::write(OpKind::Insert, k, k)).collect();
    c.run_ops(0x50, &ops);
    c.end(0x50, Some(2));
    // 0x51 holds one row of partition 0 exclusively (an update).
    let part: Vec<i64> = (0..40).filter(|&k| c.partition_of(k) == 0).collect();
    assert!(part.len() > 3, "partition 0 has rows: {part:?}");
    let (held, free) = (part[1], part[2]);
    assert_eq!(
        c.run_ops(0x51, &[Op::write(OpKind::Update, held, 99)])[0].code,
        0
    );

    let read = |key: i64, flags: u8| Op {
        flags,
        ..Op::read(key, LockMode::Exclusive)
    };
    let answers = c.run_ops(
        0x52,
        &[
            read(held, NO_WAIT),
            read(held, SKIP_LOCKED),
            read(free, NO_WAIT),
        ],
    );
    assert_eq!(answers[0].code, error::LOCK_BUSY, "NOWAIT fails at once");
    assert_eq!(
        answers[1].code,
        error::NO_SUCH_ROW,
        "SKIP LOCKED finds no row"
    );
    assert_eq!(answers[2].code, 0, "a free row is read and locked");
    assert!(answers[2].row.is_some());

    // Scans of partition 0: SKIP LOCKED returns every row but the held one
    // (and the one 0x52 holds now is its own); NOWAIT fails.
    let scan = |c: &mut Cluster, tx: u64, lock_wait: LockWait| -> Result<Vec<i64>, u32> {
        let spec = ScanSpec {
            lock: LockMode::Exclusive,
            lock_wait,
            partition: 0,
            batch_rows: 4,
            projection: vec![0],
            key_info: true,
            ..full_scan_spec(&table)
        };
        c.send(
            ldm(node(2)),
            SignalBody::LdmScanReq {
                tx_id: tx,
                scan_id: 1,
                spec: spec.to_bytes(),
            },
        );
        let mut keys = Vec::new();
        for _ in 0..100 {
            c.settle();
            let mut done = false;
            for s in c.take() {
                match s.body {
                    SignalBody::LdmScanConf { rows, done: d, .. } => {
                        for row in RowBatchReader::new(&rows).unwrap().iter() {
                            let Some(Value::Int(k)) = row.values().next().map(|v| v.to_value())
                            else {
                                panic!("an id");
                            };
                            keys.push(k);
                        }
                        done = d;
                    }
                    SignalBody::LdmScanRef { code, .. } => return Err(code),
                    _ => {}
                }
            }
            if done {
                keys.sort();
                return Ok(keys);
            }
            c.send(
                ldm(node(2)),
                SignalBody::LdmScanNextReq {
                    tx_id: tx,
                    scan_id: 1,
                    partition: 0,
                    close: false,
                },
            );
        }
        panic!("the scan did not end");
    };
    let others: Vec<i64> = part.iter().copied().filter(|&k| k != held).collect();
    assert_eq!(scan(&mut c, 0x52, LockWait::SkipLocked), Ok(others.clone()));
    assert_eq!(scan(&mut c, 0x53, LockWait::NoWait), Err(error::LOCK_BUSY));
    assert_eq!(
        c.ldm_block(node(2)).scans_open(),
        0,
        "the failed scan closed"
    );
    // 0x53 locked the rows before the held one and waits for nothing:
    // rolled back, and 0x52 and 0x51 end; then the held row is free.
    c.end(0x53, None);
    c.end(0x52, Some(3));
    c.end(0x51, Some(3));
    assert_eq!(c.ldm_block(node(2)).transactions(), 0, "nobody waits");
    let answers = c.run_ops(0x54, &[read(held, NO_WAIT)]);
    assert_eq!(answers[0].code, 0, "free once its holder committed");
    assert_eq!(answers[0].row.as_ref().unwrap()[1], Value::Int(99));
    c.end(0x54, Some(4));
    // Wait is the default: without the flags a read of a held row waits.
    assert_eq!(
        c.run_ops(0x55, &[Op::write(OpKind::Update, held, 5)])[0].code,
        0
    );
    c.send_ops(0x56, &[Op::read(held, LockMode::Shared)]);
    c.settle();
    assert!(c.answers(&c.take(), 0x56).is_empty(), "it waits");
    c.send(
        ldm(node(2)),
        SignalBody::LdmCommitReq {
            tx_id: 0x55,
            epoch: signal::epoch::make(5, 0),
        },
    );
    c.settle();
    assert_eq!(
        c.answers(&c.take(), 0x56)[&0].code,
        0,
        "granted at the commit"
    );
    c.end(0x56, Some(5));

    // An unlock lets a read lock go before the transaction ends, and the
    // waiter behind it in; a row the transaction changed keeps its lock.
    let unlock = |key: i64| Op {
        flags: UNLOCK,
        ..Op::read(key, LockMode::Exclusive)
    };
    let ops = [read(held, 0), Op::write(OpKind::Update, free, 7)];
    assert!(c.run_ops(0x57, &ops).iter().all(|a| a.code == 0));
    c.send_ops(0x58, &[Op::read(held, LockMode::Shared)]);
    c.settle();
    assert!(c.answers(&c.take(), 0x58).is_empty(), "it waits");
    c.send_ops(0x57, &[unlock(held), unlock(free)]);
    c.settle();
    let signals = c.take();
    let answers = c.answers(&signals, 0x57);
    assert!(
        answers.len() == 2 && answers.values().all(|a| a.code == 0 && a.row.is_none()),
        "{answers:?}"
    );
    assert_eq!(
        c.answers(&signals, 0x58)[&0].code,
        0,
        "granted at the unlock"
    );
    c.end(0x58, Some(6));
    let answers = c.run_ops(0x59, &[read(free, NO_WAIT)]);
    assert_eq!(
        answers[0].code,
        error::LOCK_BUSY,
        "the updated row stays locked"
    );
    c.end(0x59, None);
    c.end(0x57, Some(6));
    assert_eq!(c.ldm_block(node(2)).transactions(), 0);
}

#[test]
fn scans_filter_project_batch_and_lock() {
    let mut c = Cluster::start(16, 1);
    let table = c.create_table();
    let mut model = Model::new();
    let mut ops = Vec::new();
    for k in 0..60i64 {
        let mut op = Op::write(OpKind::Insert, k, k % 30);
        if k % 7 == 0 {
            op.s = None;
        }
        model_apply(&mut model, &op);
        ops.push(op);
    }
    c.run_ops(0x30, &ops);
    c.end(0x30, Some(2));

    let filter = Filter::And(vec![
        Filter::Cmp {
            column: 1,
            op: CmpOp::Gt,
            value: Value::Int(20),
        },
        Filter::IsNotNull(2),
    ]);
    let spec = |lock: LockMode| ScanSpec {
        table_id: table.id,
        table_version: table.version,
        index_id: NO_INDEX,
        lower: None,
        upper: None,
        more_ranges: Vec::new(),
        descending: false,
        lock,
        lock_wait: LockWait::Wait,
        partition: 0,
        batch_rows: 4,
        projection: vec![2],
        filter: Some(filter.clone()),
        key_info: true,
        stats: false,
        partitions: Vec::new(),
        distinct_prefix: 0,
        count: false,
        aggregates: Vec::new(),
        group_by: Vec::new(),
    };
    let expected: BTreeMap<i64, String> = model
        .iter()
        .filter(|(_, (v, s))| v.is_some_and(|v| v > 20) && s.is_some())
        .map(|(k, (_, s))| (*k, s.clone().unwrap()))
        .collect();
    assert!(expected.len() > 8, "several batches");

    let scan = |c: &mut Cluster, tx: u64, lock: LockMode| -> BTreeMap<i64, String> {
        c.send(
            ldm(node(2)),
            SignalBody::LdmScanReq {
                tx_id: tx,
                scan_id: 1,
                spec: spec(lock).to_bytes(),
            },
        );
        let mut rows = BTreeMap::new();
        for _ in 0..100 {
            c.settle();
            let mut done = false;
            for s in c.take() {
                if let SignalBody::LdmScanConf {
                    rows: bytes,
                    done: d,
                    partition,
                    ..
                } = s.body
                {
                    assert_eq!(partition, 0);
                    let batch = RowBatchReader::new(&bytes).unwrap();
                    assert!(batch.len() <= 4, "batch_rows is respected");
                    for row in batch.iter() {
                        let values: Vec<Value> = row.values().map(|v| v.to_value()).collect();
                        let keys: Vec<Value> = row.keys().map(|v| v.to_value()).collect();
                        let (Value::Int(k), Value::String(s)) = (&keys[0], &values[0]) else {
                            panic!("projection and key info: {values:?} {keys:?}");
                        };
                        assert_eq!(values.len(), 1, "projected to one column");
                        assert!(
                            rows.insert(*k, s.clone()).is_none(),
                            "row {k} returned twice"
                        );
                    }
                    done = d;
                }
            }
            if done {
                return rows;
            }
            c.send(
                ldm(node(2)),
                SignalBody::LdmScanNextReq {
                    tx_id: tx,
                    scan_id: 1,
                    partition: 0,
                    close: false,
                },
            );
        }
        panic!("the scan did not end");
    };
    assert_eq!(scan(&mut c, 0x31, LockMode::Committed), expected);
    assert_eq!(
        c.ldm_block(node(2)).scans_open(),
        0,
        "a finished scan is closed"
    );

    // A locking scan holds its rows: a writer waits until it commits.
    assert_eq!(scan(&mut c, 0x32, LockMode::Exclusive), expected);
    let (&locked, _) = expected.iter().next().unwrap();
    c.send_ops(0x33, &[Op::write(OpKind::Update, locked, 1)]);
    c.settle();
    assert!(
        c.answers(&c.take(), 0x33).is_empty(),
        "the scanned row is locked"
    );
    c.send(
        ldm(node(2)),
        SignalBody::LdmCommitReq {
            tx_id: 0x32,
            epoch: signal::epoch::make(3, 0),
        },
    );
    c.settle();
    assert_eq!(
        c.answers(&c.take(), 0x33)[&0].code,
        0,
        "runs once the scan's transaction commits"
    );
    c.end(0x33, Some(4));
    assert_eq!(c.ldm_block(node(2)).transactions(), 0);

    // Scans left open mid-way end with their transactions, and only theirs:
    // a commit closes its transaction's scan, an abort the other's.
    for tx in [0x34, 0x35] {
        c.send(
            ldm(node(2)),
            SignalBody::LdmScanReq {
                tx_id: tx,
                scan_id: 1,
                spec: spec(LockMode::Shared).to_bytes(),
            },
        );
        c.settle();
        let first = c.take().into_iter().find_map(|s| match s.body {
            SignalBody::LdmScanConf { tx_id, done, .. } if tx_id == tx => Some(done),
            _ => None,
        });
        assert_eq!(
            first,
            Some(false),
            "scan of {tx:#x}: a first batch, more to come"
        );
    }
    assert_eq!(c.ldm_block(node(2)).scans_open(), 2);
    c.send(
        ldm(node(2)),
        SignalBody::LdmCommitReq {
            tx_id: 0x34,
            epoch: signal::epoch::make(5, 0),
        },
    );
    c.settle();
    assert_eq!(
        c.ldm_block(node(2)).scans_open(),
        1,
        "the committed one's scan closed"
    );
    c.send(ldm(node(2)), SignalBody::LdmAbortReq { tx_id: 0x35 });
    c.settle();
    c.take();
    assert_eq!(
        c.ldm_block(node(2)).scans_open(),
        0,
        "the aborted one's scan closed"
    );
    assert_eq!(c.ldm_block(node(2)).transactions(), 0);
}

#[test]
fn rows_of_a_saved_gci_survive_a_crash_and_uncommitted_ones_do_not() {
    let mut c = Cluster::start(17, 1);
    c.create_table();
    let n = node(2);
    let durable: Vec<Op> = (0..30)
        .map(|k| Op::write(OpKind::Insert, k, k + 1))
        .collect();
    c.run_ops(0x40, &durable);
    c.end(0x40, Some(2));
    c.send(ldm(n), SignalBody::GcpSaveReq { gci: 2 });
    c.settle();
    assert!(c
        .take()
        .iter()
        .any(|s| s.body == SignalBody::GcpSaveConf { gci: 2 }));
    let later: Vec<Op> = (30..40)
        .map(|k| Op::write(OpKind::Insert, k, k + 1))
        .collect();
    c.run_ops(0x41, &later);
    c.end(0x41, Some(3));
    let uncommitted: Vec<Op> = (40..45)
        .map(|k| Op::write(OpKind::Insert, k, k + 1))
        .collect();
    c.run_ops(0x42, &uncommitted);
    // Let a local checkpoint run too (interval 500 ms), so restore reads one.
    c.sim.run_for(Duration::from_secs(1));
    assert!(
        c.ldm_block(n).stats().lcps_started >= 1,
        "a local checkpoint started"
    );

    c.sim.crash(n);
    c.disks[&n].crash();
    c.sim.restart(n);
    c.sim.run_for(Duration::from_secs(2));
    assert!(c.ldm_block(n).is_open(), "reopened from disk");
    let keys: Vec<i64> = (0..45).collect();
    let seen = c.read_committed_at(n, &keys);
    for k in 0..30 {
        assert_eq!(
            seen[&k],
            Some((Some(k + 1), Some(format!("s{}", k + 1)))),
            "durable key {k}"
        );
    }
    let later_rows = (30..40).filter(|k| seen[k].is_some()).count();
    assert!(
        later_rows == 0 || later_rows == 10,
        "GCI 3 is restored whole or not at all: {later_rows}"
    );
    for k in 40..45 {
        assert_eq!(seen[&k], None, "uncommitted key {k}");
    }
}

#[test]
fn a_failed_fsync_of_a_global_checkpoint_shuts_the_node_down() {
    let mut c = Cluster::start(18, 1);
    c.create_table();
    let n = node(2);
    c.run_ops(0x50, &[Op::write(OpKind::Insert, 1, 1)]);
    c.end(0x50, Some(2));
    c.disks[&n].fail_next_sync();
    c.send(ldm(n), SignalBody::GcpSaveReq { gci: 2 });
    // The sync runs on an io thread: its failure comes back with its FsConf.
    c.settle();
    let signals = c.take();
    assert!(
        !signals
            .iter()
            .any(|s| matches!(s.body, SignalBody::GcpSaveConf { .. })),
        "no confirmation"
    );
    let summary = c.sim.summary(n).unwrap();
    assert!(!summary.up, "the node went down");
    assert_eq!(summary.shutdowns, 1);
    let reason = summary.down_reason.unwrap();
    assert!(reason.contains("cannot make GCI 2 durable"), "{reason}");
}

/// A one-node cluster whose file requests each take 200 ms (the returned
/// latency), with one row inserted by transaction `tx` in GCI 2, not yet
/// saved.
fn with_slow_io(seed: u64, tx: u64) -> (Cluster, NodeId, Duration) {
    let mut c = Cluster::start(seed, 1);
    c.create_table();
    let slow = Duration::from_millis(200);
    c.sim.io = IoSettings {
        latency_min: slow,
        latency_max: slow,
    };
    c.run_ops(tx, &[Op::write(OpKind::Insert, 1, 1)]);
    c.end(tx, Some(2));
    (c, node(2), slow)
}

/// The redo sync of a global checkpoint runs on an io thread: while it is
/// in flight (a slow disk: 200 ms here) the instance goes on reading and
/// writing, and `GcpSaveConf` comes only once the sync completed, with
/// the GCI durable in the redo log part by then and not before.
#[test]
fn key_operations_go_on_while_a_redo_sync_is_in_flight() {
    let (mut c, n, slow) = with_slow_io(19, 0x60);
    let saved = |signals: &[Signal]| {
        signals
            .iter()
            .any(|s| s.body == SignalBody::GcpSaveConf { gci: 2 })
    };
    c.send(ldm(n), SignalBody::GcpSaveReq { gci: 2 });
    let asked_at = c.sim.now();
    c.sim.run_for(Duration::from_millis(5));
    assert!(!saved(&c.take()), "not confirmed before the sync completed");
    // Reads and writes of later GCIs go on meanwhile, answered at once.
    let read = c.run_ops(0x61, &[Op::read(1, LockMode::Shared)]);
    assert_eq!(read[0].code, 0);
    c.end(0x61, Some(3));
    let written = c.run_ops(0x62, &[Op::write(OpKind::Update, 1, 7)]);
    assert_eq!(written[0].code, 0);
    c.end(0x62, Some(3));
    assert!(
        c.sim.now() < asked_at + slow,
        "all of it before the sync completed"
    );
    let instance = c.ldm_block(n).storage().unwrap();
    assert!(instance.flush_in_flight());
    assert!(
        instance.durable_gci().is_none_or(|d| d < 2),
        "GCI 2 is not durable before its sync completed"
    );
    assert!(!saved(&c.take()), "still not confirmed");
    c.sim.run_for(slow);
    assert!(saved(&c.take()), "confirmed once the sync completed");
    let instance = c.ldm_block(n).storage().unwrap();
    assert!(!instance.flush_in_flight());
    assert_eq!(instance.durable_gci(), Some(2));
    assert_eq!(c.ldm_block(n).stats().gcp_saves, 1);
}

/// A local checkpoint's file syncs (finishing the LCP, the redo trim's
/// control file) run on an io thread: on a slow disk the checkpoint
/// completes only after them, while key operations are answered at once.
#[test]
fn a_local_checkpoint_completes_after_its_syncs_and_key_operations_go_on() {
    let (mut c, n, slow) = with_slow_io(20, 0x70);
    c.send(ldm(n), SignalBody::GcpSaveReq { gci: 2 });
    c.sim.run_for(slow + Duration::from_millis(10));
    assert!(c
        .take()
        .iter()
        .any(|s| s.body == SignalBody::GcpSaveConf { gci: 2 }));
    // The node's sysfile keeps GCI 2 (as its distribution block says), so
    // an LCP holding it may complete.
    c.sim.inject(Signal {
        receiver: ldm(n),
        sender: BlockRef::new(n, BlockNumber::DISTRIBUTION, 0),
        body: SignalBody::GcpCompleteRep { gci: 2 },
    });
    // The checkpoint interval of this harness starts one soon.
    let deadline = c.sim.now() + Duration::from_secs(3);
    while c.ldm_block(n).stats().lcps_started == 0 && c.sim.now() < deadline {
        c.sim.run_for(Duration::from_millis(1));
    }
    assert_eq!(c.ldm_block(n).stats().lcps_started, 1);
    let started = c.sim.now();
    for round in 0..5 {
        let answer = c.run_ops(0x71 + round, &[Op::read(1, LockMode::Committed)]);
        assert_eq!(answer[0].code, 0);
    }
    assert!(
        c.sim.now() < started + slow,
        "answered while the sync is in flight"
    );
    assert_eq!(
        c.ldm_block(n).stats().lcps_completed,
        0,
        "not complete before its files are synced"
    );
    c.sim.run_for(3 * slow);
    assert_eq!(c.ldm_block(n).stats().lcps_completed, 1);
}

impl Cluster {
    /// Sends an ALTER TABLE of the test table to the dictionary of the
    /// first node; does not run the simulation.
    fn send_alter(&mut self, request_id: u32, table: &TableDef) {
        let dict = BlockRef::new(self.data_nodes[0], BlockNumber::DICTIONARY, 0);
        self.send(
            dict,
            SignalBody::DictAlterTableReq {
                request_id,
                table_id: table.id,
                table: table.to_bytes(),
            },
        );
    }

    /// The version of every fragment of the test table on `at`.
    fn fragment_versions(&self, at: NodeId) -> Vec<u32> {
        let id = self.table().id;
        let storage = self.ldm_block(at).storage().unwrap();
        storage
            .fragment_ids()
            .filter(|&(t, _)| t == id)
            .map(|(t, p)| storage.fragment_ref(t, p).unwrap().table_version())
            .collect()
    }

    /// The whole row of `key` read committed on `at`, `None` if absent.
    fn read_row_at(&mut self, at: NodeId, key: i64) -> Option<Vec<Value>> {
        let ops = self.batch(&[Op::read(key, LockMode::Committed)], self.table().version);
        self.send(
            ldm(at),
            SignalBody::LdmKeyReq {
                tx_id: 0xEEEF,
                tc: tc(),
                chain: signal::Chain::new(),
                ops,
            },
        );
        self.settle();
        let signals = self.take();
        let answer = self.answers(&signals, 0xEEEF).remove(&0).expect("answered");
        if answer.code == error::NO_SUCH_ROW {
            return None;
        }
        assert_eq!(answer.code, 0, "{answer:?}");
        answer.row
    }
}

/// The test table with a column `extra INT NULL DEFAULT 5` appended.
fn with_extra_column(table: &TableDef) -> TableDef {
    let mut altered = table.clone();
    altered.columns.push(
        Column::new("extra", ColumnType::Int { unsigned: false })
            .nullable()
            .with_default(Value::Int(5)),
    );
    altered
}

#[test]
fn alter_table_adds_a_column_to_every_replica_with_rows_and_survives_a_restart() {
    let mut c = Cluster::start(19, 2);
    let table = c.create_table();
    let rows: Vec<Op> = (0..20)
        .map(|k| Op::write(OpKind::Insert, k, k + 1))
        .collect();
    c.run_ops(0x60, &rows);
    c.end(0x60, Some(2));

    // The same alter renames the table and its value column: rows refer to
    // columns by position, so the rename rides along and survives restart.
    let mut altered = with_extra_column(&table);
    altered.name = format!("{}_renamed", table.name);
    altered.columns[1].name = "value_renamed".into();
    c.send_alter(77, &altered);
    c.sim.run_for(Duration::from_millis(200));
    let version = c
        .take()
        .into_iter()
        .find_map(|s| match s.body {
            SignalBody::DictAlterTableConf {
                request_id: 77,
                version,
                ..
            } => Some(version),
            _ => None,
        })
        .expect("the alter is confirmed");
    assert_eq!(version, 2);
    for n in c.data_nodes.clone() {
        let versions = c.fragment_versions(n);
        assert!(
            !versions.is_empty() && versions.iter().all(|&v| v == 2),
            "node {n}: {versions:?}"
        );
        assert!(!c.ldm_block(n).alter_pending());
    }
    // A client with the old definition gets 241 and refreshes.
    let old = c.run_ops(0x61, &[Op::read(3, LockMode::Committed)]);
    assert_eq!(old[0].code, error::WRONG_SCHEMA_VERSION);
    let mut def = altered.clone();
    def.version = 2;
    c.table = Some(def);
    // Every replica reads the old rows with the new column at its default.
    for n in c.data_nodes.clone() {
        for k in [0, 7, 19] {
            let row = c.read_row_at(n, k).expect("the row is there");
            assert_eq!(row.len(), 4);
            assert_eq!(row[1], Value::Int(k + 1), "node {n} key {k}");
            assert_eq!(row[3], Value::Int(5), "node {n} key {k}");
        }
    }
    // Writes go on at the new version (an insert must give every column:
    // the TC fills in defaults, this test plays the TC with two values).
    let answers = c.run_ops(0x62, &[Op::write(OpKind::Update, 7, 70), Op::delete(8)]);
    assert!(answers.iter().all(|a| a.code == 0), "{answers:?}");
    c.end(0x62, Some(3));
    let n = node(3);
    c.send(ldm(n), SignalBody::GcpSaveReq { gci: 3 });
    c.settle();
    assert!(c
        .take()
        .iter()
        .any(|s| s.body == SignalBody::GcpSaveConf { gci: 3 }));

    // A restart restores the rows written before and after the alter.
    c.sim.crash(n);
    c.disks[&n].crash();
    c.sim.restart(n);
    c.sim.run_for(Duration::from_secs(3));
    assert!(c.ldm_block(n).is_open(), "reopened from disk");
    assert!(c.fragment_versions(n).iter().all(|&v| v == 2));
    let seven = c.read_row_at(n, 7).unwrap();
    assert_eq!((&seven[1], &seven[3]), (&Value::Int(70), &Value::Int(5)));
    assert_eq!(c.read_row_at(n, 8), None);
    assert_eq!(c.read_row_at(n, 19).unwrap()[3], Value::Int(5));
}

#[test]
fn an_alter_waits_for_the_transactions_on_its_table_and_refuses_new_ones_meanwhile() {
    let mut c = Cluster::start(20, 1);
    let table = c.create_table();
    let n = node(2);
    c.run_ops(
        0x70,
        &[
            Op::write(OpKind::Insert, 1, 1),
            Op::write(OpKind::Insert, 2, 2),
        ],
    );
    c.end(0x70, Some(2));
    // A transaction holds a change on the table.
    c.run_ops(0x71, &[Op::write(OpKind::Update, 1, 10)]);

    c.send_alter(78, &with_extra_column(&table));
    c.sim.run_for(Duration::from_millis(100));
    let signals = c.take();
    assert!(
        !signals
            .iter()
            .any(|s| matches!(s.body, SignalBody::DictAlterTableConf { .. })),
        "the alter waits: {signals:?}"
    );
    assert!(c.ldm_block(n).alter_pending());
    assert_eq!(c.fragment_versions(n), vec![1]);
    // New work on the table is refused with a temporary error meanwhile.
    let busy = c.run_ops(0x72, &[Op::write(OpKind::Insert, 3, 3)]);
    assert_eq!(busy[0].code, error::BUSY);
    assert_eq!(error::class(error::BUSY), error::ErrorClass::Temporary);

    // The holder commits: the alter goes through.
    c.send(
        ldm(n),
        SignalBody::LdmCommitReq {
            tx_id: 0x71,
            epoch: signal::epoch::make(3, 0),
        },
    );
    c.sim.run_for(Duration::from_millis(100));
    let signals = c.take();
    assert!(signals.iter().any(|s| s.body
        == SignalBody::LdmCommitConf {
            tx_id: 0x71,
            gci: 3
        }));
    assert!(signals.iter().any(|s| matches!(
        s.body,
        SignalBody::DictAlterTableConf {
            request_id: 78,
            version: 2,
            ..
        }
    )));
    assert!(!c.ldm_block(n).alter_pending());
    assert_eq!(c.fragment_versions(n), vec![2]);
    let mut def = with_extra_column(&table);
    def.version = 2;
    c.table = Some(def);
    let one = c.read_row_at(n, 1).unwrap();
    assert_eq!((&one[1], &one[3]), (&Value::Int(10), &Value::Int(5)));
    assert_eq!(c.ldm_block(n).transactions(), 0);
}

#[test]
fn adding_a_unique_index_by_alter_is_refused_and_a_drop_reaches_the_ldm() {
    let mut c = Cluster::start(21, 1);
    let table = c.create_table();
    let mut unique = table.clone();
    unique.indexes.push(schema::IndexDef {
        name: "u_s".into(),
        id: 0,
        columns: vec![2],
        kind: schema::IndexKind::Unique,
    });
    c.send_alter(79, &unique);
    c.sim.run_for(Duration::from_millis(200));
    let refused = c.take().into_iter().any(|s| {
        matches!(s.body, SignalBody::DictAlterTableRef { request_id: 79, code, ref message }
            if code == error::UNSUPPORTED_ALTER && message.contains("unique index `u_s`")
                && message.contains("not supported yet"))
    });
    assert!(
        refused,
        "adding a unique index is refused with a clear error"
    );
    assert_eq!(c.fragment_versions(node(2)), vec![1]);
    let dict = BlockRef::new(node(2), BlockNumber::DICTIONARY, 0);
    // A drop reaches the LDM: its fragments go.
    c.send(
        dict,
        SignalBody::DictDropTableReq {
            request_id: 78,
            table_id: table.id,
        },
    );
    c.sim.run_for(Duration::from_millis(200));
    assert!(c
        .take()
        .iter()
        .any(|s| matches!(s.body, SignalBody::DictDropTableConf { request_id: 78, .. })));
    assert_eq!(
        c.ldm_block(node(2))
            .storage()
            .unwrap()
            .fragment_ids()
            .count(),
        0
    );
}

#[test]
fn an_alter_that_waits_too_long_restarts_the_node_which_restores_the_new_version() {
    let mut c = Cluster::start(22, 1);
    let table = c.create_table();
    let n = node(2);
    c.run_ops(0x80, &[Op::write(OpKind::Insert, 1, 1)]);
    c.end(0x80, Some(2));
    c.send(ldm(n), SignalBody::GcpSaveReq { gci: 2 });
    c.settle();
    // A transaction that never ends holds a lock on the table.
    c.run_ops(0x81, &[Op::read(1, LockMode::Shared)]);
    c.send_alter(80, &with_extra_column(&table));
    c.sim
        .run_for(datanode::ldm::ALTER_WAIT_MAX - Duration::from_millis(500));
    assert!(c.ldm_block(n).alter_pending(), "still waiting");
    c.sim.run_for(Duration::from_secs(1));
    let summary = c.sim.summary(n).unwrap();
    assert!(summary.shutdowns >= 1, "the node went down");
    let reason = summary.down_reason.unwrap_or_default();
    assert!(reason.contains("waited"), "{reason}");
    // It comes back (its dictionary committed the alter) at the new version.
    c.sim.run_for(Duration::from_secs(3));
    if !c.sim.summary(n).unwrap().up {
        c.sim.restart(n);
        c.sim.run_for(Duration::from_secs(3));
    }
    assert!(c.ldm_block(n).is_open());
    assert_eq!(c.fragment_versions(n), vec![2]);
    let mut def = with_extra_column(&table);
    def.version = 2;
    c.table = Some(def);
    let one = c.read_row_at(n, 1).unwrap();
    assert_eq!((&one[1], &one[3]), (&Value::Int(1), &Value::Int(5)));
}

/// The TC's abort reaches a backup directly, the write it aborts reaches
/// it by way of the primary: the abort can come first. The late write must
/// then be dropped, not executed — executed, it would hold a lock no commit
/// or abort ever releases.
#[test]
fn a_write_that_arrives_after_its_transactions_abort_is_dropped() {
    let mut c = Cluster::start(16, 2);
    c.create_table();
    let key = 7;
    let home = c.placement.home(c.partition_of(key));
    let backup = home.backups().next().expect("two replicas");
    let late = 0x30;
    c.send(ldm(backup), SignalBody::LdmAbortReq { tx_id: late });
    c.settle();
    // What the primary forwards: the rest of the chain is empty.
    let version = c.table().version;
    let ops = c.batch(&[Op::write(OpKind::Insert, key, 1)], version);
    c.send(
        ldm(backup),
        SignalBody::LdmKeyReq {
            tx_id: late,
            tc: tc(),
            chain: signal::Chain::new(),
            ops,
        },
    );
    c.settle();
    let signals = c.take();
    assert!(
        c.answers(&signals, late).is_empty(),
        "a late request of an aborted transaction is not executed: {signals:?}"
    );
    assert_eq!(c.ldm_block(backup).transactions(), 0, "no record, no lock");
    // Another transaction writes the key at once, on both replicas.
    c.send_ops(0x31, &[Op::write(OpKind::Insert, key, 2)]);
    c.settle();
    let signals = c.take();
    assert_eq!(c.answers(&signals, 0x31)[&0].code, 0, "{signals:?}");
    c.end(0x31, Some(2));
    for n in [node(2), node(3)] {
        let seen = c.read_committed_at(n, &[key]);
        assert!(seen[&key].is_some(), "node {n} holds the second write");
    }
}

#[test]
fn a_full_disk_fails_checkpoints_at_a_growing_pause_and_they_resume_with_room() {
    let mut c = Cluster::start(21, 1);
    c.create_table();
    let n = node(2);
    let rows: Vec<Op> = (0..40)
        .map(|k| Op::write(OpKind::Insert, k, k + 1))
        .collect();
    c.run_ops(0x90, &rows);
    c.end(0x90, Some(2));
    c.send(ldm(n), SignalBody::GcpSaveReq { gci: 2 });
    c.settle();
    c.sim.inject(Signal {
        receiver: ldm(n),
        sender: BlockRef::new(n, BlockNumber::DISTRIBUTION, 0),
        body: SignalBody::GcpCompleteRep { gci: 2 },
    });
    // No free space: a checkpoint's files cannot grow, the redo log's
    // allocated files still take records.
    c.disks[&n].fill();
    let full_for = Duration::from_secs(8);
    c.sim.run_for(full_for);
    let stats = c.ldm_block(n).stats().clone();
    assert!(stats.lcps_failed >= 2, "checkpoints were tried: {stats:?}");
    assert_eq!(stats.lcps_completed, 0, "{stats:?}");
    // Every 500 ms without a pause; 1 + 2 + 4 s with one.
    assert!(
        stats.lcps_started <= 4,
        "{} checkpoints started in {full_for:?}: no growing pause",
        stats.lcps_started
    );
    let summary = c.sim.summary(n).unwrap();
    assert!(
        summary.up && summary.shutdowns == 0,
        "the node stays up: {summary:?}"
    );
    // Reads and writes go on while the redo log has room.
    c.run_ops(0x91, &[Op::write(OpKind::Update, 1, 100)]);
    c.end(0x91, Some(3));
    let answer = c.run_ops(0x92, &[Op::read(2, LockMode::Committed)]);
    assert_eq!(answer[0].code, 0);
    c.end(0x92, None);
    // GCI 3 is saved (the redo log has its space) and kept, so that a
    // checkpoint holding it may complete.
    c.send(ldm(n), SignalBody::GcpSaveReq { gci: 3 });
    c.settle();
    assert!(c
        .take()
        .iter()
        .any(|s| s.body == SignalBody::GcpSaveConf { gci: 3 }));
    c.sim.inject(Signal {
        receiver: ldm(n),
        sender: BlockRef::new(n, BlockNumber::DISTRIBUTION, 0),
        body: SignalBody::GcpCompleteRep { gci: 3 },
    });

    c.disks[&n].allow_writes();
    // The next try comes within the longest pause so far (8 s).
    let deadline = c.sim.now() + Duration::from_secs(10);
    while c.ldm_block(n).stats().lcps_completed == 0 && c.sim.now() < deadline {
        c.sim.run_for(Duration::from_millis(10));
    }
    assert!(
        c.ldm_block(n).stats().lcps_completed >= 1,
        "a checkpoint completes once there is room: {:?}",
        c.ldm_block(n).stats()
    );
}

/// One `BackupFragReq` to node `n`'s LDM, run to its answer: `Ok((rows,
/// bytes, done))` or `Err((code, message))`.
fn backup_step(
    c: &mut Cluster,
    n: NodeId,
    version: u32,
    rows_max: u32,
    flags: u32,
    path: &str,
) -> Result<(u64, u64, bool), (u32, String)> {
    let table_id = c.table().id;
    c.send(
        ldm(n),
        SignalBody::BackupFragReq {
            request_id: 7,
            backup_id: 1,
            table_id,
            table_version: version,
            partition: 0,
            rows_max,
            flags,
            path: path.to_owned(),
        },
    );
    c.settle();
    let answers: Vec<_> = c
        .take()
        .into_iter()
        .filter_map(|s| match s.body {
            SignalBody::BackupFragConf {
                rows, bytes, done, ..
            } => Some(Ok((rows, bytes, done))),
            SignalBody::BackupFragRef { code, message, .. } => Some(Err((code, message))),
            _ => None,
        })
        .collect();
    assert_eq!(answers.len(), 1, "one answer: {answers:?}");
    answers.into_iter().next().unwrap()
}

/// The row images of a backup data file, each block's checksum checked.
fn backup_images(bytes: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    use storage::backup_file::{BLOCK_FILE_MAGIC, BLOCK_HEADER_BYTES};
    assert_eq!(&bytes[..8], BLOCK_FILE_MAGIC);
    let mut at = 8;
    let mut images = Vec::new();
    let u32_at = |b: &[u8], i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap()) as usize;
    while at < bytes.len() {
        let len = u32_at(bytes, at);
        let payload = &bytes[at + BLOCK_HEADER_BYTES..at + BLOCK_HEADER_BYTES + len];
        assert_eq!(
            crc32c::crc32c(payload) as usize,
            u32_at(bytes, at + 4),
            "block at {at}"
        );
        let mut i = 0;
        while i < payload.len() {
            let (fixed, var) = (u32_at(payload, i), u32_at(payload, i + 4));
            let f = payload[i + 8..i + 8 + fixed].to_vec();
            let v = payload[i + 8 + fixed..i + 8 + fixed + var].to_vec();
            images.push((f, v));
            i += 8 + fixed + var;
        }
        at += BLOCK_HEADER_BYTES + len;
    }
    assert_eq!(at, bytes.len(), "the file ends with a whole block");
    images
}

/// A backup's fragment scan (`ldm::backup`): the node writes every
/// committed row of its fragment once, in steps of at most `rows_max`,
/// with rows updated between steps taken either before or after, never
/// an uncommitted image; the file is durable (synced) before the last
/// answer; bad requests and a failed write are refused naming what was
/// wrong, and the node stays up.
#[test]
fn a_backup_scan_writes_every_committed_row_of_its_fragment_to_a_synced_file() {
    let mut c = Cluster::start(31, 1);
    let table = c.create_table();
    let n = node(2);
    let keys: Vec<i64> = (0..600).filter(|k| c.partition_of(*k) == 0).collect();
    assert!(keys.len() > 200, "{} keys in partition 0", keys.len());
    let rows: Vec<Op> = keys
        .iter()
        .map(|&k| Op::write(OpKind::Insert, k, 1))
        .collect();
    c.run_ops(0xa0, &rows);
    c.end(0xa0, Some(2));
    // An uncommitted change, open for the whole scan: never in the file.
    c.run_ops(0xa1, &[Op::write(OpKind::Update, keys[5], 666)]);

    let dir = "/backups/BACKUP-1";
    let path = format!("{dir}/T{}.P0.data", table.id);
    let version = table.version;
    let (mut rows_seen, mut steps) = (0, 0);
    let mut flags = signal::backup_frag::START;
    loop {
        let (rows, bytes, done) = backup_step(&mut c, n, version, 64, flags, &path).unwrap();
        flags = 0;
        assert!(
            rows - rows_seen <= 64 && bytes >= 8,
            "{rows} rows, {bytes} bytes"
        );
        rows_seen = rows;
        steps += 1;
        if done {
            assert_eq!(rows as usize, keys.len());
            let durable = c.disks[&n]
                .durable_contents(Path::new(&path))
                .expect("synced");
            assert_eq!(durable.len() as u64, bytes, "every byte synced");
            break;
        }
        if steps == 2 {
            // Committed between steps: every row but the locked one now
            // has v = 2.
            let updates: Vec<Op> = keys
                .iter()
                .filter(|&&k| k != keys[5])
                .map(|&k| Op::write(OpKind::Update, k, 2))
                .collect();
            c.run_ops(0xa2, &updates);
            c.end(0xa2, Some(3));
        }
        assert!(steps < 100, "the scan ends");
    }
    assert!(steps >= 4, "{steps} steps of at most 64 rows");
    let durable = c.disks[&n].durable_contents(Path::new(&path)).unwrap();
    let layout = schema::RowLayout::new(&table);
    let mut got = BTreeMap::new();
    for (fixed, var) in backup_images(&durable) {
        let id = layout.decode_column(&fixed, &var, 0).to_value();
        let v = layout.decode_column(&fixed, &var, 1).to_value();
        let Value::Int(id) = id else {
            panic!("id {id:?}")
        };
        assert!(got.insert(id, v.clone()).is_none(), "row {id} twice");
        assert!(
            v == Value::Int(1) || v == Value::Int(2),
            "row {id}: v = {v:?}, a committed value"
        );
    }
    assert!(
        got.keys().copied().eq(keys.iter().copied()),
        "every row once"
    );
    assert!(
        got.values().any(|v| *v == Value::Int(2)),
        "rows ahead of the cursor are new"
    );

    // ---- refusals, each naming what was wrong ----
    let refused = |r: Result<(u64, u64, bool), (u32, String)>| r.expect_err("refused");
    let (code, message) = refused(backup_step(
        &mut c,
        n,
        version,
        64,
        signal::backup_frag::START,
        &path,
    ));
    assert_eq!(code, error::ALREADY_EXISTS, "{message}");
    assert!(message.contains(&path), "{message}");
    let (code, message) = refused(backup_step(&mut c, n, version, 64, 0, &path));
    assert_eq!(code, error::UNKNOWN_SCAN, "{message}");
    let start = signal::backup_frag::START;
    let (code, message) = refused(backup_step(
        &mut c,
        n,
        version,
        64,
        start,
        "relative/T.data",
    ));
    assert_eq!(code, error::MALFORMED_REQUEST, "{message}");
    let other = format!("{dir}/other.data");
    let (code, message) = refused(backup_step(&mut c, n, version + 1, 64, start, &other));
    assert_eq!(code, error::WRONG_SCHEMA_VERSION, "{message}");
    let (code, message) = refused(backup_step(&mut c, n, version, 0, start, &other));
    assert_eq!(code, error::MALFORMED_REQUEST, "{message}");

    // ---- a write that fails: refused naming the file; the node serves on ----
    let failing = format!("{dir}/failing.data");
    let (rows, _, done) = backup_step(&mut c, n, version, 64, start, &failing).unwrap();
    assert!(rows == 64 && !done);
    c.disks[&n].fail_next_write_to("failing");
    let mut answer = Ok((0, 0, false));
    for _ in 0..20 {
        answer = backup_step(&mut c, n, version, 64, 0, &failing);
        if answer.is_err() {
            break;
        }
    }
    let (code, message) = refused(answer);
    assert_eq!(code, error::BACKUP_FILE_FAILED, "{message}");
    assert!(message.contains("failing.data"), "{message}");
    c.end(0xa1, None);
    let answer = c.run_ops(0xa3, &[Op::read(keys[5], LockMode::Committed)]);
    assert_eq!(answer[0].code, 0, "the node still serves");
    c.end(0xa3, None);
    assert!(c.sim.summary(n).unwrap().up);
}

/// One `BackupLogReq` to node `n`'s LDM; the answers after settling.
fn backup_log_step(
    c: &mut Cluster,
    n: NodeId,
    flags: u32,
    stop: u64,
    tables: Vec<u32>,
    path: &str,
) -> Vec<SignalBody> {
    c.send(
        ldm(n),
        SignalBody::BackupLogReq {
            request_id: 9,
            backup_id: 1,
            flags,
            stop_epoch: stop,
            tables,
            path: path.to_owned(),
        },
    );
    c.settle();
    c.take()
        .into_iter()
        .map(|s| s.body)
        .filter(|b| {
            matches!(
                b,
                SignalBody::BackupLogConf { .. } | SignalBody::BackupLogRef { .. }
            )
        })
        .collect()
}

/// A backup's log (`ldm::backup`): from its start every committed change
/// of its tables goes to the file with its epoch and kind, in commit
/// order, nothing uncommitted; the stop is answered only once the master
/// marks the stop epoch complete, with the file synced.
#[test]
fn a_backup_log_holds_every_commit_from_its_start_and_completes_at_the_stop_epoch() {
    use signal::backup_log::{START, STOP};
    use storage::backup_file::{LOG_DELETE, LOG_WRITE};
    let mut c = Cluster::start(33, 1);
    let table = c.create_table();
    let n = node(2);
    // Before the log: not in it.
    c.run_ops(0xb0, &[Op::write(OpKind::Insert, 1, 1)]);
    c.end(0xb0, Some(2));
    let path = "/backups/BACKUP-1/L2.0.log";
    let started = backup_log_step(&mut c, n, START, 0, vec![table.id], path);
    assert!(
        matches!(started[..], [SignalBody::BackupLogConf { done: false, .. }]),
        "{started:?}"
    );
    c.run_ops(
        0xb1,
        &[
            Op::write(OpKind::Insert, 2, 2),
            Op::write(OpKind::Update, 1, 5),
        ],
    );
    c.end(0xb1, Some(3));
    c.run_ops(0xb2, &[Op::delete(2)]);
    c.end(0xb2, Some(4));
    // Never committed: not in it.
    c.run_ops(0xb3, &[Op::write(OpKind::Insert, 9, 9)]);
    c.end(0xb3, None);
    let stop = signal::epoch::make(4, 0);
    let early = backup_log_step(&mut c, n, STOP, stop, Vec::new(), path);
    assert!(
        early.is_empty(),
        "no answer before the stop epoch is complete: {early:?}"
    );
    c.sim.inject(Signal {
        receiver: ldm(n),
        sender: BlockRef::new(n, BlockNumber::DISTRIBUTION, 0),
        body: SignalBody::SubGcpCompleteRep { epoch: stop },
    });
    c.settle();
    let done: Vec<_> = c.take().into_iter().map(|s| s.body).collect();
    let Some(SignalBody::BackupLogConf {
        records,
        bytes,
        epoch,
        done: true,
        ..
    }) = done
        .iter()
        .find(|b| matches!(b, SignalBody::BackupLogConf { .. }))
        .cloned()
    else {
        panic!("the stop answered done once the epoch is complete: {done:?}");
    };
    assert_eq!((records, epoch), (3, stop));
    let durable = c.disks[&n]
        .durable_contents(Path::new(path))
        .expect("synced");
    assert_eq!(durable.len() as u64, bytes, "every byte synced");
    // Records: epoch, table, kind, image (the data file's image framing).
    let mut got = Vec::new();
    let layout = schema::RowLayout::new(&table);
    for (head, var) in backup_images_of_log(&durable) {
        let (epoch, t, kind, fixed) = head;
        assert_eq!(t, table.id);
        let id = layout.decode_column(&fixed, &var, 0).to_value();
        let v = layout.decode_column(&fixed, &var, 1).to_value();
        got.push((signal::epoch::hi(epoch), kind, id, v));
    }
    assert_eq!(
        got,
        vec![
            (3, LOG_WRITE, Value::Int(2), Value::Int(2)),
            (3, LOG_WRITE, Value::Int(1), Value::Int(5)),
            (4, LOG_DELETE, Value::Int(2), Value::Int(2)),
        ],
        "the commits since the start, in commit order"
    );
}

/// The records of a backup log file: ((epoch, table, kind, fixed), var).
#[allow(clippy::type_complexity)]
fn backup_images_of_log(bytes: &[u8]) -> Vec<((u64, u32, u32, Vec<u8>), Vec<u8>)> {
    use storage::backup_file::{BLOCK_FILE_MAGIC, BLOCK_HEADER_BYTES};
    assert_eq!(&bytes[..8], BLOCK_FILE_MAGIC);
    let u32_at = |b: &[u8], i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
    let mut out = Vec::new();
    let mut at = 8;
    while at < bytes.len() {
        let len = u32_at(bytes, at) as usize;
        let payload = &bytes[at + BLOCK_HEADER_BYTES..at + BLOCK_HEADER_BYTES + len];
        assert_eq!(crc32c::crc32c(payload), u32_at(bytes, at + 4));
        let mut i = 0;
        while i < payload.len() {
            let epoch = u64::from_le_bytes(payload[i..i + 8].try_into().unwrap());
            let (t, kind) = (u32_at(payload, i + 8), u32_at(payload, i + 12));
            let (fixed, var) = (
                u32_at(payload, i + 16) as usize,
                u32_at(payload, i + 20) as usize,
            );
            let f = payload[i + 24..i + 24 + fixed].to_vec();
            let v = payload[i + 24 + fixed..i + 24 + fixed + var].to_vec();
            out.push(((epoch, t, kind, f), v));
            i += 24 + fixed + var;
        }
        at += BLOCK_HEADER_BYTES + len;
    }
    out
}
