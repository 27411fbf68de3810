//! The transaction coordinator and the global checkpoint protocol in the
//! deterministic simulator: real membership, dictionary, distribution, TC
//! and LDM blocks on the data nodes (simulated disks), and a test block on
//! an API node that sends `TcKeyReq`/`TcScanReq`/`TcWaitGciReq` and records
//! every answer. Results are checked against a model (a `BTreeMap`), and
//! tests end with checks of what the blocks hold (no transaction, scan or
//! operation record left behind).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use config::Placement;
use datanode::dictionary::{schema_dir, Dictionary, DictionaryConfig};
use datanode::distribution::{Distribution, DistributionConfig};
use datanode::ldm::{LdmBlock, LdmBlockConfig, LdmStats};
use datanode::membership::{Membership, MembershipConfig};
use datanode::tc::{TcBlock, TcConfig};
use kernel::simulator::Simulation;
use kernel::{Block, Context, Rng};
use proto::error;
use proto::ops::{
    LockMode, OpBatchWriter, OpHeader, OpKind, IGNORE_ERROR, KEY_INFO, NO_INDEX, NO_PARTITION,
};
use proto::results::ResultReader;
use proto::scan::{Bound, RowBatchReader, ScanSpec};
use proto::{CmpOp, Filter};
use schema::{
    distribution_hash, partition_of, Column, ColumnType, IndexDef, IndexKind, KeyEncoder, TableDef,
    Value,
};
use signal::{tc_flags, BlockNumber, BlockRef, NodeId, Signal, SignalBody};
use storage::disk::SimDisk;
use storage::ldm::LdmConfig;

const API: NodeId = match NodeId::new(200) {
    Some(id) => id,
    None => unreachable!(),
};
const LDM_INSTANCES: u32 = 2;
const PARTITIONS: u32 = 8;
const DEADLOCK_TIMEOUT: Duration = Duration::from_millis(400);
const GCP_INTERVAL: Duration = Duration::from_millis(100);
const EPOCH_INTERVAL: Duration = Duration::from_millis(20);
/// Longest a test waits for an answer that must come.
const ANSWER_WAIT: Duration = Duration::from_secs(3);

fn node(n: u8) -> NodeId {
    NodeId::new(n).unwrap()
}

fn api() -> BlockRef {
    BlockRef::new(API, BlockNumber::API_CLUSTER, 0)
}

fn tc_of(n: NodeId) -> BlockRef {
    BlockRef::new(n, BlockNumber::TRANSACTION_COORDINATOR, 0)
}

fn ldm_of(n: NodeId, i: u32) -> BlockRef {
    BlockRef::new(n, BlockNumber::LOCAL_DATA_MANAGER, i as u16)
}

/// The API node's block: records what comes back.
struct Recorder {
    got: Arc<Mutex<Vec<Signal>>>,
}

impl Block for Recorder {
    fn execute(&mut self, signal: Signal, _ctx: &mut Context<'_>) {
        self.got.lock().unwrap().push(signal);
    }
}

/// A TC that never sees an `LdmKeyConf`'s `ok_in_order` claim: it reads
/// every result batch, the general path its common-case shortcut must agree with.
struct NoClaims(TcBlock);

impl Block for NoClaims {
    fn start(&mut self, ctx: &mut Context<'_>) {
        self.0.start(ctx);
    }

    fn execute(&mut self, mut signal: Signal, ctx: &mut Context<'_>) {
        if let SignalBody::LdmKeyConf { ok_in_order, .. } = &mut signal.body {
            *ok_in_order = 0;
        }
        self.0.execute(signal, ctx);
    }
}

/// Limits of the TC under test.
#[derive(Clone, Copy)]
struct Limits {
    transactions: u32,
    operations: u32,
    scans: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            transactions: 64,
            operations: 4_096,
            scans: 8,
        }
    }
}

/// One operation on the test table `(id BIGINT, v INT NULL, s VARCHAR(20) NULL)`.
#[derive(Clone, Debug)]
struct Op {
    kind: OpKind,
    lock: LockMode,
    key: i64,
    v: Option<i64>,
    flags: u8,
}

impl Op {
    fn read(key: i64, lock: LockMode) -> Op {
        Op {
            kind: OpKind::Read,
            lock,
            key,
            v: None,
            flags: 0,
        }
    }

    fn write(kind: OpKind, key: i64, v: i64) -> Op {
        Op {
            kind,
            lock: LockMode::Exclusive,
            key,
            v: Some(v),
            flags: 0,
        }
    }

    fn delete(key: i64) -> Op {
        Op {
            kind: OpKind::Delete,
            lock: LockMode::Exclusive,
            key,
            v: None,
            flags: 0,
        }
    }

    fn ignoring(mut self) -> Op {
        self.flags |= IGNORE_ERROR;
        self
    }
}

/// The answer to one operation: code, and the row of a read.
#[derive(Clone, Debug, PartialEq)]
struct OpAnswer {
    op_index: u32,
    code: u32,
    row: Option<Vec<Value>>,
}

/// Rows of a scan, and how many batches brought them.
type ScannedRows = (Vec<Vec<Value>>, usize);

/// How a transaction request ended.
#[derive(Clone, Debug, PartialEq)]
enum Reply {
    Conf {
        flags: u32,
        /// The commit's epoch (`signal::epoch`); 0 when not committed.
        epoch: u64,
        answers: Vec<OpAnswer>,
    },
    Ref {
        code: u32,
        op_index: u32,
        message: String,
    },
}

/// How often the simulated cluster runs GCPs, and the size of each of the
/// four files of every LDM instance's redo log part.
#[derive(Clone, Copy, Debug)]
struct Logs {
    gcp_interval: Duration,
    redo_file_size_bytes: u64,
}

struct Cluster {
    sim: Simulation,
    data_nodes: Vec<NodeId>,
    got: Arc<Mutex<Vec<Signal>>>,
    table: Option<TableDef>,
    next_tx: u64,
    next_request: u32,
}

impl Cluster {
    /// `n` data nodes in one node group (`n` replicas), each with one TC
    /// and `LDM_INSTANCES` LDM instances.
    fn start(seed: u64, n: u8, limits: Limits) -> Cluster {
        Cluster::start_with(seed, n, limits, false)
    }

    /// [`Cluster::start`]; with `no_claims` every TC reads every result
    /// batch (see [`NoClaims`]).
    fn start_with(seed: u64, n: u8, limits: Limits, no_claims: bool) -> Cluster {
        let logs = Logs {
            gcp_interval: GCP_INTERVAL,
            redo_file_size_bytes: 1 << 20,
        };
        Cluster::start_logged(seed, n, limits, no_claims, logs)
    }

    /// [`Cluster::start_with`] with the GCP interval and redo file size of `logs`.
    fn start_logged(seed: u64, n: u8, limits: Limits, no_claims: bool, logs: Logs) -> Cluster {
        let data_nodes: Vec<NodeId> = (0..n).map(|i| node(2 + i)).collect();
        let placement = Placement::new(vec![data_nodes.clone()], LDM_INSTANCES);
        Cluster::start_placed(seed, placement, limits, no_claims, logs)
    }

    /// `n` data nodes, each a node group of its own (one replica): a TC
    /// reaches the other node's partitions over the simulated network.
    fn start_spread(seed: u64, n: u8, limits: Limits) -> Cluster {
        let groups = (0..n).map(|i| vec![node(2 + i)]).collect();
        let logs = Logs {
            gcp_interval: GCP_INTERVAL,
            redo_file_size_bytes: 1 << 20,
        };
        Cluster::start_placed(
            seed,
            Placement::new(groups, LDM_INSTANCES),
            limits,
            false,
            logs,
        )
    }

    fn start_placed(
        seed: u64,
        placement: Placement,
        limits: Limits,
        no_claims: bool,
        logs: Logs,
    ) -> Cluster {
        let mut sim = Simulation::new(seed);
        let data_nodes: Vec<NodeId> = placement.node_groups().iter().flatten().copied().collect();
        for &id in &data_nodes {
            let disk = SimDisk::new(seed ^ u64::from(id.get()) << 32);
            let all = data_nodes.clone();
            let placement = placement.clone();
            let mut start_ids = Rng::seeded(seed ^ u64::from(id.get()));
            sim.add_node(
                id,
                Box::new(move |id, incarnation| {
                    let membership = Membership::new(MembershipConfig {
                        node: id,
                        data_nodes: all.clone(),
                        mgmd: None,
                        heartbeat_interval: Duration::from_millis(500),
                        api_heartbeat_interval: Duration::from_millis(300),
                        start_partial_timeout: Duration::from_secs(3),
                        start_id: start_ids.next_u64() ^ u64::from(incarnation),
                        pid: 1000 + u32::from(id.get()),
                    })
                    .with_local_tcs(vec![tc_of(id)]);
                    let mut local = vec![tc_of(id)];
                    local.extend((0..LDM_INSTANCES).map(|i| ldm_of(id, i)));
                    let dictionary = Dictionary::new(
                        DictionaryConfig {
                            node: id,
                            schema_dir: schema_dir(Path::new("/data"), id),
                        },
                        Box::new(disk.clone()),
                    )
                    .expect("the dictionary loads its schema")
                    .with_local_blocks(local, placement.default_partitions());
                    let distribution = Distribution::new(DistributionConfig {
                        node: id,
                        gcp_interval: logs.gcp_interval,
                        epoch_interval: EPOCH_INTERVAL,
                        tc_instances: 1,
                        ldm_instances: LDM_INSTANCES,
                    });
                    let tc = TcBlock::new(TcConfig {
                        node: id,
                        instance: 0,
                        placement: placement.clone(),
                        tc_instances: 1,
                        transactions_max: limits.transactions,
                        operations_max: limits.operations,
                        scans_max: limits.scans,
                        deadlock_timeout: DEADLOCK_TIMEOUT,
                    });
                    let mut blocks: Vec<(BlockRef, Box<dyn Block>)> = vec![
                        (
                            BlockRef::new(id, BlockNumber::MEMBERSHIP, 0),
                            Box::new(membership),
                        ),
                        (
                            BlockRef::new(id, BlockNumber::DICTIONARY, 0),
                            Box::new(dictionary),
                        ),
                        (Distribution::address(id), Box::new(distribution)),
                        (
                            tc_of(id),
                            if no_claims {
                                Box::new(NoClaims(tc))
                            } else {
                                Box::new(tc)
                            },
                        ),
                    ];
                    for i in 0..LDM_INSTANCES {
                        let mut config = LdmConfig::new(i, format!("/data/ndb_{id}_fs/ldm{i}"));
                        config.data_memory_bytes = 16 << 20;
                        config.redo_file_size_bytes = logs.redo_file_size_bytes;
                        config.redo_files = 4;
                        let ldm = LdmBlock::new(
                            LdmBlockConfig {
                                node: id,
                                instance: i,
                                placement: placement.clone(),
                                ldm: config,
                                lcp_interval: Duration::from_secs(5),
                            },
                            disk.clone(),
                        );
                        blocks.push((ldm_of(id, i), Box::new(ldm)));
                    }
                    blocks
                }),
            );
        }
        let got = Arc::new(Mutex::new(Vec::new()));
        let recorded = Arc::clone(&got);
        sim.add_node(
            API,
            Box::new(move |id, _| {
                let block: Box<dyn Block> = Box::new(Recorder {
                    got: Arc::clone(&recorded),
                });
                vec![(BlockRef::new(id, BlockNumber::API_CLUSTER, 0), block)]
            }),
        );
        let mut cluster = Cluster {
            sim,
            data_nodes,
            got,
            table: None,
            next_tx: (u64::from(API.get()) << 48) | 1,
            next_request: 1,
        };
        cluster.sim.run_for(Duration::from_secs(2));
        cluster
    }

    fn tc(&self) -> &TcBlock {
        self.tc_on(self.data_nodes[0])
    }

    fn tc_on(&self, n: NodeId) -> &TcBlock {
        self.sim.block::<TcBlock>(tc_of(n)).expect("the TC is up")
    }

    fn master(&self) -> &Distribution {
        self.data_nodes
            .iter()
            .filter_map(|&n| self.sim.block::<Distribution>(Distribution::address(n)))
            .find(|d| d.is_master())
            .expect("a distribution master")
    }

    fn take(&self) -> Vec<Signal> {
        std::mem::take(&mut *self.got.lock().unwrap())
    }

    fn send(&mut self, to: BlockRef, body: SignalBody) {
        self.sim.inject(Signal {
            receiver: to,
            sender: api(),
            body,
        });
    }

    fn tx_id(&mut self) -> u64 {
        self.next_tx += 1;
        self.next_tx
    }

    /// Creates the test table with `PARTITIONS` partitions and an ordered
    /// index on `v`, and reads its definition back.
    fn create_table(&mut self) -> TableDef {
        self.create_table_with(false)
    }

    /// `accounts`, with `READ_BACKUP` as asked.
    fn create_table_with(&mut self, read_backup: bool) -> TableDef {
        let table = TableDef::new(
            "accounts",
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
        .index(IndexDef {
            name: "by_v".into(),
            id: 0,
            columns: vec![1],
            kind: IndexKind::Ordered,
        })
        .partitions(PARTITIONS)
        .read_backup(read_backup);
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
        self.sim.run_for(Duration::from_millis(300));
        let answers = self.take();
        assert!(
            answers
                .iter()
                .any(|s| matches!(s.body, SignalBody::DictCreateTableConf { request_id: r, .. } if r == request_id)),
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
        self.sim.run_for(Duration::from_millis(20));
        let table = self
            .take()
            .into_iter()
            .find_map(|s| match s.body {
                SignalBody::DictGetTableConf { group, .. } => {
                    Some(TableDef::decode(&group.tables[0]).unwrap())
                }
                _ => None,
            })
            .expect("the table is found by name");
        assert_eq!(table.partitions, PARTITIONS);
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

    fn batch(&self, ops: &[Op]) -> Vec<u8> {
        let table = self.table();
        let mut out = Vec::new();
        let mut w = OpBatchWriter::new(&mut out);
        for (i, op) in ops.iter().enumerate() {
            w.begin(&OpHeader {
                op_index: i as u32,
                table_id: table.id,
                table_version: table.version,
                index_id: NO_INDEX,
                partition: NO_PARTITION,
                kind: op.kind,
                lock: op.lock,
                flags: op.flags,
            });
            w.key(Value::Int(op.key).as_ref());
            if matches!(op.kind, OpKind::Insert | OpKind::Update | OpKind::Write) {
                let v = op.v.expect("a write has a value");
                w.value(1, Value::Int(v).as_ref());
                w.value(2, Value::String(format!("s{v}")).as_ref());
            }
            w.end().unwrap();
        }
        drop(w);
        out
    }

    /// Sends a request without waiting.
    fn submit(&mut self, tx: u64, flags: u32, ops: &[Op]) {
        let first = self.data_nodes[0];
        self.submit_to(first, tx, flags, ops);
    }

    /// `submit` through the TC of node `n`.
    fn submit_to(&mut self, n: NodeId, tx: u64, flags: u32, ops: &[Op]) {
        let ops = self.batch(ops);
        let tc = tc_of(n);
        self.send(
            tc,
            SignalBody::TcKeyReq {
                tx_id: tx,
                flags,
                ops,
            },
        );
    }

    /// Runs until the reply of `tx` comes; `None` if none within `wait`.
    fn reply_within(&mut self, tx: u64, wait: Duration) -> Option<Reply> {
        let until = self.sim.now() + wait;
        loop {
            if let Some(reply) = self.take_reply(tx) {
                return Some(reply);
            }
            if self.sim.now() >= until {
                return None;
            }
            self.sim.run_for(Duration::from_millis(1));
        }
    }

    fn take_reply(&mut self, tx: u64) -> Option<Reply> {
        let mut got = self.got.lock().unwrap();
        let at = got.iter().position(|s| {
            matches!(s.body, SignalBody::TcKeyConf { tx_id, .. } | SignalBody::TcKeyRef { tx_id, .. } if tx_id == tx)
        })?;
        let signal = got.remove(at);
        Some(match signal.body {
            SignalBody::TcKeyConf {
                flags,
                epoch,
                results,
                ..
            } => Reply::Conf {
                flags,
                epoch,
                answers: decode_results(&results),
            },
            SignalBody::TcKeyRef {
                code,
                op_index,
                message,
                ..
            } => Reply::Ref {
                code,
                op_index,
                message,
            },
            _ => unreachable!(),
        })
    }

    fn execute(&mut self, tx: u64, flags: u32, ops: &[Op]) -> Reply {
        self.submit(tx, flags, ops);
        self.reply_within(tx, ANSWER_WAIT)
            .unwrap_or_else(|| panic!("transaction {tx:#x}: no reply"))
    }

    /// One whole transaction per key of `keys`, the op `op_of(k)`, all
    /// submitted before any is waited for (in flight together); each must
    /// commit in a GCI.
    fn commit_together(&mut self, keys: &[i64], op_of: impl Fn(i64) -> Op) {
        let txs: Vec<u64> = keys
            .iter()
            .map(|&k| {
                let tx = self.tx_id();
                self.submit(tx, tc_flags::START | tc_flags::COMMIT, &[op_of(k)]);
                tx
            })
            .collect();
        for tx in txs {
            let reply = self
                .reply_within(tx, ANSWER_WAIT)
                .unwrap_or_else(|| panic!("transaction {tx:#x}: no reply"));
            assert!(
                committed(&reply).0 > 0,
                "transaction {tx:#x} committed in a GCI"
            );
        }
    }

    /// One transaction that runs `ops` and commits.
    fn commit(&mut self, ops: &[Op]) -> Reply {
        let tx = self.tx_id();
        self.execute(tx, tc_flags::START | tc_flags::COMMIT, ops)
    }

    /// Committed reads of `keys`: the value of `v` of each, or `None`.
    fn read_values(&mut self, keys: &[i64]) -> Vec<Option<i64>> {
        let first = self.data_nodes[0];
        self.read_values_on(first, keys)
    }

    /// `read_values` through the TC of node `n`.
    fn read_values_on(&mut self, n: NodeId, keys: &[i64]) -> Vec<Option<i64>> {
        let ops: Vec<Op> = keys
            .iter()
            .map(|&k| Op::read(k, LockMode::Committed).ignoring())
            .collect();
        let tx = self.tx_id();
        self.submit_to(n, tx, tc_flags::START | tc_flags::COMMIT, &ops);
        let reply = self
            .reply_within(tx, ANSWER_WAIT)
            .unwrap_or_else(|| panic!("reads on {n}: no reply"));
        match reply {
            Reply::Conf { answers, .. } => answers
                .iter()
                .map(|a| match a.code {
                    0 => Some(int(&a.row.as_ref().expect("a read returns a row")[1])),
                    error::NO_SUCH_ROW => None,
                    other => panic!("read answered {other}"),
                })
                .collect(),
            other => panic!("reads failed: {other:?}"),
        }
    }

    /// Runs a scan to its end: its rows, and how many batches came.
    fn scan(&mut self, spec: &ScanSpec) -> Result<ScannedRows, (u32, String)> {
        let tx = self.tx_id();
        let scan_id = 7;
        let tc = tc_of(self.data_nodes[0]);
        self.send(
            tc,
            SignalBody::TcScanReq {
                tx_id: tx,
                scan_id,
                flags: tc_flags::START,
                spec: spec.to_bytes(),
            },
        );
        let mut rows = Vec::new();
        let mut batches = 0;
        let until = self.sim.now() + ANSWER_WAIT * 4;
        let outcome = loop {
            assert!(
                self.sim.now() < until,
                "scan of transaction {tx:#x} does not end"
            );
            self.sim.run_for(Duration::from_millis(1));
            let mut finished = None;
            let mut next = 0;
            for s in self.take() {
                match s.body {
                    SignalBody::TcScanConf {
                        tx_id,
                        rows: bytes,
                        done,
                        ..
                    } if tx_id == tx => {
                        batches += 1;
                        let reader = RowBatchReader::new(&bytes).expect("a valid row batch");
                        for row in reader.iter() {
                            rows.push(row.values().map(|v| v.to_value()).collect());
                        }
                        if done {
                            finished = Some(Ok(()));
                        } else {
                            next += 1;
                        }
                    }
                    SignalBody::TcScanRef {
                        tx_id,
                        code,
                        message,
                        ..
                    } if tx_id == tx => {
                        finished = Some(Err((code, message)));
                    }
                    _ => {}
                }
            }
            if let Some(outcome) = finished {
                break outcome;
            }
            for _ in 0..next {
                self.send(
                    tc,
                    SignalBody::TcScanNextReq {
                        tx_id: tx,
                        scan_id,
                        close: false,
                    },
                );
            }
        };
        if self.tc().transactions_in_use() > 0 {
            // The scan's transaction: end it.
            let _ = self.execute(tx, tc_flags::ROLLBACK, &[]);
        }
        outcome.map(|()| (rows, batches))
    }

    fn full_scan_spec(&self) -> ScanSpec {
        let table = self.table();
        ScanSpec {
            table_id: table.id,
            table_version: table.version,
            index_id: NO_INDEX,
            lower: None,
            upper: None,
            descending: false,
            lock: LockMode::Committed,
            partition: NO_PARTITION,
            batch_rows: 16,
            projection: Vec::new(),
            filter: None,
            key_info: false,
        }
    }

    /// Every row as (id, v), by a full scan.
    fn scan_all(&mut self) -> BTreeMap<i64, i64> {
        let spec = self.full_scan_spec();
        let (rows, _) = self.scan(&spec).expect("a full scan");
        let mut out = BTreeMap::new();
        for row in rows {
            assert!(
                out.insert(int(&row[0]), int(&row[1])).is_none(),
                "a row scanned twice"
            );
        }
        out
    }

    /// Nothing is left behind in the TCs and the LDMs.
    fn check_idle(&self) {
        for &n in &self.data_nodes {
            let tc = self.tc_on(n);
            assert_eq!(
                tc.transactions_in_use(),
                0,
                "node {n}: transaction records left"
            );
            assert_eq!(tc.scans_in_use(), 0, "node {n}: scan records left");
            assert_eq!(
                tc.operations_in_use(),
                0,
                "node {n}: operation records left"
            );
            for i in 0..LDM_INSTANCES {
                let ldm = &self.sim.block::<LdmBlock<SimDisk>>(ldm_of(n, i)).unwrap();
                assert_eq!(ldm.transactions(), 0, "node {n} LDM {i}: transactions left");
                assert_eq!(ldm.requests_held(), 0, "node {n} LDM {i}: requests left");
                assert_eq!(ldm.scans_open(), 0, "node {n} LDM {i}: scans left");
            }
        }
    }
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        other => panic!("not an integer: {other:?}"),
    }
}

fn decode_results(bytes: &[u8]) -> Vec<OpAnswer> {
    if bytes.is_empty() {
        return Vec::new();
    }
    let reader = ResultReader::new(bytes).expect("a valid result batch");
    reader
        .iter()
        .map(|r| OpAnswer {
            op_index: r.op_index,
            code: r.code,
            row: r
                .has_row
                .then(|| r.values().map(|v| v.to_value()).collect()),
        })
        .collect()
}

/// A commit's GCI (its epoch's hi) and answers.
fn committed(reply: &Reply) -> (u32, &[OpAnswer]) {
    let (epoch, answers) = committed_epoch(reply);
    (signal::epoch::hi(epoch), answers)
}

/// A commit's epoch and answers.
fn committed_epoch(reply: &Reply) -> (u64, &[OpAnswer]) {
    match reply {
        Reply::Conf {
            flags,
            epoch,
            answers,
        } => {
            assert_eq!(*flags, tc_flags::COMMITTED, "committed: {reply:?}");
            (*epoch, answers)
        }
        other => panic!("expected a commit, got {other:?}"),
    }
}

fn started(seed: u64, limits: Limits) -> Cluster {
    let mut cluster = Cluster::start(seed, 1, limits);
    cluster.create_table();
    cluster
}

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
fn gcis_increase_and_wait_gci_is_answered_when_durable() {
    let mut cluster = started(17, Limits::default());
    let mut last = 0;
    for k in 0..20 {
        let (gci, _) = committed(&cluster.commit(&[Op::write(OpKind::Insert, k, k)])).to_owned();
        assert!(gci >= last, "GCIs never go back: {gci} after {last}");
        last = gci;
        cluster.sim.run_for(GCP_INTERVAL / 3);
    }
    assert!(last > 2, "GCIs advance with time: {last}");
    let tc = tc_of(cluster.data_nodes[0]);
    cluster.send(tc, SignalBody::TcWaitGciReq { gci: last });
    let until = cluster.sim.now() + ANSWER_WAIT;
    let durable = loop {
        let answer = cluster.take().into_iter().find_map(|s| match s.body {
            SignalBody::TcWaitGciConf { gci, durable_gci } => Some((gci, durable_gci)),
            _ => None,
        });
        if let Some((gci, durable)) = answer {
            assert_eq!(gci, last);
            break durable;
        }
        assert!(cluster.sim.now() < until, "TcWaitGciReq answered");
        cluster.sim.run_for(Duration::from_millis(1));
    };
    assert!(
        durable >= last,
        "answered once GCI {last} is durable: {durable}"
    );
    assert!(cluster.master().durable_gci() >= last);
    assert!(cluster.tc().durable_gci() >= last);
    // The LDMs flushed it.
    for i in 0..LDM_INSTANCES {
        let ldm = cluster
            .sim
            .block::<LdmBlock<SimDisk>>(ldm_of(cluster.data_nodes[0], i))
            .unwrap();
        let flushed = ldm.storage().and_then(|s| s.durable_gci()).unwrap_or(0);
        assert!(
            flushed >= last,
            "LDM {i} flushed GCI {flushed}, {last} committed"
        );
    }
    cluster.check_idle();
}

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

/// Writes that fill the redo log faster than `TimeBetweenGlobalCheckpoints`
/// comes round: each LDM's local checkpoint asks for the GCP it waits for
/// (`GcpHurryReq`, passed to the master by the other node), completes and
/// frees redo, so no write is refused (410) although the GCP timer never
/// fires during the test.
#[test]
fn checkpoints_hurry_the_gcp_so_sustained_writes_never_overload_the_redo_log() {
    let logs = Logs {
        gcp_interval: Duration::from_secs(3_600),
        redo_file_size_bytes: 256 << 10,
    };
    let mut cluster = Cluster::start_logged(24, 2, Limits::default(), false, logs);
    cluster.create_table();
    const KEYS: i64 = 200;
    let inserts: Vec<Op> = (0..KEYS).map(|k| Op::write(OpKind::Insert, k, k)).collect();
    committed(&cluster.commit(&inserts));
    let ldms: Vec<BlockRef> = cluster
        .data_nodes
        .iter()
        .flat_map(|&n| (0..LDM_INSTANCES).map(move |i| ldm_of(n, i)))
        .collect();
    let ldm = |cluster: &Cluster, at: BlockRef| {
        cluster
            .sim
            .block::<LdmBlock<SimDisk>>(at)
            .expect("the LDM is up")
            .stats()
            .clone()
    };
    let gci_at_start = cluster.master().durable_gci();
    // Each round writes KEYS records of about 80 bytes per replica, half on
    // each instance; 400 rounds are about eight times a 1 MiB part. A round
    // every 5 ms fills a part from half to the 80 % where writes are refused
    // in about 0.4 s: the pace of a real node's 256 MiB part under 50 MB/s
    // of redo, scaled down.
    for round in 1..=400 {
        cluster.sim.run_for(Duration::from_millis(5));
        let updates: Vec<Op> = (0..KEYS)
            .map(|k| Op::write(OpKind::Update, k, round))
            .collect();
        match cluster.commit(&updates) {
            Reply::Conf { .. } => {}
            Reply::Ref { code, message, .. } => {
                panic!("round {round}: the update was refused with {code}: {message}")
            }
        }
    }
    for &at in &ldms {
        let stats = ldm(&cluster, at);
        assert!(stats.lcps_completed >= 2, "{at}: {stats:?}");
        assert!(stats.gcp_hurries >= 2, "{at}: {stats:?}");
    }
    assert!(
        cluster.master().durable_gci() > gci_at_start + 2,
        "hurried GCPs made GCIs durable without the timer"
    );
    for &n in &cluster.data_nodes {
        let distribution = cluster
            .sim
            .block::<Distribution>(Distribution::address(n))
            .expect("the distribution block is up");
        let hurries = distribution.hurries();
        if distribution.is_master() {
            assert!(
                hurries.gcps_started >= 2 && hurries.forwarded == 0,
                "{n}: {hurries:?}"
            );
        } else {
            assert!(
                hurries.forwarded >= 2 && hurries.gcps_started == 0,
                "{n}: {hurries:?}"
            );
        }
    }
    let values = cluster.read_values(&(0..KEYS).collect::<Vec<_>>());
    assert!(values.iter().all(|v| *v == Some(400)), "{values:?}");
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
fn a_restarted_node_gets_gcis_above_what_its_redo_flushed() {
    let mut cluster = started(21, Limits::default());
    let ops: Vec<Op> = (0..20).map(|k| Op::write(OpKind::Insert, k, k)).collect();
    let (gci, _) = committed(&cluster.commit(&ops)).to_owned();
    cluster.sim.run_for(GCP_INTERVAL * 5);
    let durable = cluster.master().durable_gci();
    assert!(durable >= gci, "GCI {gci} durable: {durable}");
    let n = cluster.data_nodes[0];
    cluster.sim.crash(n);
    cluster.sim.restart(n);
    cluster.sim.run_for(Duration::from_secs(2));
    let (after, _) = committed(&cluster.commit(&[Op::write(OpKind::Insert, 100, 1)])).to_owned();
    assert!(
        after > durable,
        "GCI {after} after a restart, {durable} was flushed before it"
    );
    let values = cluster.read_values(&[0, 19, 100]);
    assert_eq!(
        values,
        vec![Some(0), Some(19), Some(1)],
        "durable rows survive the restart"
    );
    cluster.check_idle();
}

// ---------------------------------------------------------------------------
// Unique indexes: operations by unique key and index upkeep in the TC.

/// The unique-index test table `people (id BIGINT, u INT NULL, s VARCHAR(20)
/// utf8mb4_general_ci NULL, n INT NULL)` with unique indexes `by_u (u)` and
/// `by_s (s)`, and its hidden tables.
struct PeopleTables {
    base: TableDef,
    by_u: TableDef,
    by_s: TableDef,
}

impl PeopleTables {
    fn index_id(&self, name: &str) -> u32 {
        self.base
            .indexes
            .iter()
            .find(|i| i.name == name)
            .expect("an index of people")
            .id
    }
}

/// One key operation on `people`: by primary key (`by: None`, key = id) or
/// by a unique index (key = the index's value).
#[derive(Clone, Debug)]
struct KeyOp {
    kind: OpKind,
    lock: LockMode,
    by: Option<&'static str>,
    key: Value,
    /// Written columns: (1 = u, 2 = s, 3 = n).
    values: Vec<(u16, Value)>,
    flags: u8,
}

impl KeyOp {
    fn read(by: Option<&'static str>, key: Value) -> KeyOp {
        KeyOp {
            kind: OpKind::Read,
            lock: LockMode::Shared,
            by,
            key,
            values: Vec::new(),
            flags: 0,
        }
    }

    fn insert(id: i64, u: Option<i64>, s: Option<&str>, n: i64) -> KeyOp {
        KeyOp::write(OpKind::Insert, id, u, s, n)
    }

    fn write(kind: OpKind, id: i64, u: Option<i64>, s: Option<&str>, n: i64) -> KeyOp {
        KeyOp {
            kind,
            lock: LockMode::Exclusive,
            by: None,
            key: Value::Int(id),
            values: vec![(1, opt_int(u)), (2, opt_str(s)), (3, Value::Int(n))],
            flags: 0,
        }
    }

    fn update(by: Option<&'static str>, key: Value, values: Vec<(u16, Value)>) -> KeyOp {
        KeyOp {
            kind: OpKind::Update,
            lock: LockMode::Exclusive,
            by,
            key,
            values,
            flags: 0,
        }
    }

    fn delete(by: Option<&'static str>, key: Value) -> KeyOp {
        KeyOp {
            kind: OpKind::Delete,
            lock: LockMode::Exclusive,
            by,
            key,
            values: Vec::new(),
            flags: 0,
        }
    }

    fn ignoring(mut self) -> KeyOp {
        self.flags |= IGNORE_ERROR;
        self
    }
}

fn opt_int(v: Option<i64>) -> Value {
    v.map_or(Value::Null, Value::Int)
}

fn opt_str(v: Option<&str>) -> Value {
    v.map_or(Value::Null, |s| Value::String(s.to_string()))
}

/// A row of the model.
#[derive(Clone, Debug, PartialEq)]
struct Person {
    u: Option<i64>,
    s: Option<String>,
    n: i64,
}

impl Person {
    fn row(&self, id: i64) -> Vec<Value> {
        vec![
            Value::Int(id),
            opt_int(self.u),
            opt_str(self.s.as_deref()),
            Value::Int(self.n),
        ]
    }

    fn set(&mut self, values: &[(u16, Value)]) {
        for (c, v) in values {
            match (c, v) {
                (1, Value::Int(u)) => self.u = Some(*u),
                (1, Value::Null) => self.u = None,
                (2, Value::String(s)) => self.s = Some(s.clone()),
                (2, Value::Null) => self.s = None,
                (3, Value::Int(n)) => self.n = *n,
                other => panic!("not a value of people: {other:?}"),
            }
        }
    }
}

type People = BTreeMap<i64, Person>;

/// Equal under `utf8mb4_general_ci` (ASCII here): case and trailing
/// spaces do not count.
fn same_text(a: &str, b: &str) -> bool {
    a.trim_end().eq_ignore_ascii_case(b.trim_end())
}

/// What running `op` on `model` gives, in order: `Ok((code, row))` and the
/// model changed, or `Err(())` for a unique violation (the transaction
/// aborts).
fn model_apply(model: &mut People, op: &KeyOp) -> Result<(u32, Option<Vec<Value>>), ()> {
    let id = match (op.by, &op.key) {
        (None, Value::Int(id)) => Some(*id),
        (Some("by_u"), Value::Int(u)) => model
            .iter()
            .find(|(_, p)| p.u == Some(*u))
            .map(|(id, _)| *id),
        (Some("by_s"), Value::String(s)) => model
            .iter()
            .find(|(_, p)| p.s.as_deref().is_some_and(|t| same_text(t, s)))
            .map(|(id, _)| *id),
        (_, Value::Null) => None,
        other => panic!("bad op {other:?}"),
    };
    let violates = |model: &People, id: i64, p: &Person| {
        model.iter().any(|(other, q)| {
            *other != id
                && ((p.u.is_some() && p.u == q.u)
                    || p.s
                        .as_deref()
                        .is_some_and(|s| q.s.as_deref().is_some_and(|t| same_text(t, s))))
        })
    };
    let found = id.and_then(|id| model.get(&id).cloned().map(|p| (id, p)));
    match (op.kind, found) {
        (OpKind::Read, Some((id, p))) => Ok((0, Some(p.row(id)))),
        (OpKind::Read | OpKind::Update | OpKind::Delete, None) => Ok((error::NO_SUCH_ROW, None)),
        (OpKind::Insert, Some(_)) => Ok((error::DUPLICATE_KEY, None)),
        (OpKind::Insert | OpKind::Write, None) => {
            let id = id.expect("by primary key");
            let mut p = Person {
                u: None,
                s: None,
                n: 0,
            };
            p.set(&op.values);
            if violates(model, id, &p) {
                return Err(());
            }
            model.insert(id, p);
            Ok((0, None))
        }
        (OpKind::Update | OpKind::Write, Some((id, mut p))) => {
            p.set(&op.values);
            if violates(model, id, &p) {
                return Err(());
            }
            model.insert(id, p);
            Ok((0, None))
        }
        (OpKind::Delete, Some((id, _))) => {
            model.remove(&id);
            Ok((0, None))
        }
    }
}

impl Cluster {
    /// Creates `people` and reads back its group (base and hidden tables).
    fn create_people(&mut self) -> PeopleTables {
        let ci = schema::Collation::Utf8mb4GeneralCi;
        let table = TableDef::new(
            "people",
            0,
            vec![
                Column::new("id", ColumnType::BigInt { unsigned: false }),
                Column::new("u", ColumnType::Int { unsigned: false }).nullable(),
                Column::new(
                    "s",
                    ColumnType::VarChar {
                        max: 20,
                        collation: ci,
                    },
                )
                .nullable(),
                Column::new("n", ColumnType::Int { unsigned: false }).nullable(),
            ],
        )
        .primary_key(vec![0])
        .index(IndexDef {
            name: "by_u".into(),
            id: 0,
            columns: vec![1],
            kind: IndexKind::Unique,
        })
        .index(IndexDef {
            name: "by_s".into(),
            id: 0,
            columns: vec![2],
            kind: IndexKind::Unique,
        })
        .partitions(PARTITIONS);
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
        self.sim.run_for(Duration::from_millis(300));
        let answers = self.take();
        assert!(
            answers.iter().any(
                |s| matches!(s.body, SignalBody::DictCreateTableConf { request_id: r, .. } if r == request_id)
            ),
            "create answered: {answers:?}"
        );
        self.send(
            dict,
            SignalBody::DictGetTableReq {
                request_id,
                table_id: 0,
                name: "people".into(),
            },
        );
        self.sim.run_for(Duration::from_millis(20));
        let tables: Vec<TableDef> = self
            .take()
            .into_iter()
            .find_map(|s| match s.body {
                SignalBody::DictGetTableConf { group, .. } => Some(
                    group
                        .tables
                        .iter()
                        .map(|t| TableDef::decode(t).unwrap())
                        .collect(),
                ),
                _ => None,
            })
            .expect("people is found by name");
        let base = tables[0].clone();
        let hidden = |name: &str| {
            let id = base.indexes.iter().find(|i| i.name == name).unwrap().id;
            tables
                .iter()
                .find(|t| t.id == id)
                .expect("the index's hidden table")
                .clone()
        };
        PeopleTables {
            by_u: hidden("by_u"),
            by_s: hidden("by_s"),
            base,
        }
    }

    fn people_batch(&self, people: &PeopleTables, ops: &[KeyOp]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut w = OpBatchWriter::new(&mut out);
        for (i, op) in ops.iter().enumerate() {
            w.begin(&OpHeader {
                op_index: 100 + i as u32,
                table_id: people.base.id,
                table_version: people.base.version,
                index_id: op.by.map_or(NO_INDEX, |name| people.index_id(name)),
                partition: NO_PARTITION,
                kind: op.kind,
                lock: op.lock,
                flags: op.flags,
            });
            w.key(op.key.as_ref());
            for (c, v) in &op.values {
                w.value(*c, v.as_ref());
            }
            w.end().unwrap();
        }
        drop(w);
        out
    }

    fn submit_people(&mut self, people: &PeopleTables, tx: u64, flags: u32, ops: &[KeyOp]) {
        let ops = self.people_batch(people, ops);
        let tc = tc_of(self.data_nodes[0]);
        self.send(
            tc,
            SignalBody::TcKeyReq {
                tx_id: tx,
                flags,
                ops,
            },
        );
    }

    fn execute_people(
        &mut self,
        people: &PeopleTables,
        tx: u64,
        flags: u32,
        ops: &[KeyOp],
    ) -> Reply {
        self.submit_people(people, tx, flags, ops);
        self.reply_within(tx, ANSWER_WAIT)
            .unwrap_or_else(|| panic!("transaction {tx:#x}: no reply"))
    }

    fn commit_people(&mut self, people: &PeopleTables, ops: &[KeyOp]) -> Reply {
        let tx = self.tx_id();
        self.execute_people(people, tx, tc_flags::START | tc_flags::COMMIT, ops)
    }

    /// Every row of a table, by a full scan.
    fn scan_table(&mut self, table: &TableDef) -> Vec<Vec<Value>> {
        let spec = ScanSpec {
            table_id: table.id,
            table_version: table.version,
            index_id: NO_INDEX,
            lower: None,
            upper: None,
            descending: false,
            lock: LockMode::Committed,
            partition: NO_PARTITION,
            batch_rows: 16,
            projection: Vec::new(),
            filter: None,
            key_info: false,
        };
        self.scan(&spec).expect("a full scan").0
    }

    /// The table and both unique indexes hold exactly the model.
    fn check_people(&mut self, people: &PeopleTables, model: &People) {
        let mut rows = self.scan_table(&people.base);
        rows.sort_by_key(|r| int(&r[0]));
        let expected: Vec<Vec<Value>> = model.iter().map(|(id, p)| p.row(*id)).collect();
        assert_eq!(rows, expected, "the base table holds the model");
        let base_key = |id: i64| {
            let mut bytes = Vec::new();
            KeyEncoder::primary_key(&people.base)
                .encode(&[Value::Int(id)], &mut bytes)
                .unwrap();
            Value::Bytes(bytes)
        };
        let mut by_u: Vec<(i64, Value)> = self
            .scan_table(&people.by_u)
            .into_iter()
            .map(|r| (int(&r[0]), r[1].clone()))
            .collect();
        by_u.sort_by_key(|(u, _)| *u);
        let mut expected_u: Vec<(i64, Value)> = model
            .iter()
            .filter_map(|(id, p)| p.u.map(|u| (u, base_key(*id))))
            .collect();
        expected_u.sort_by_key(|(u, _)| *u);
        assert_eq!(
            by_u, expected_u,
            "unique index by_u holds the model's index"
        );
        let mut by_s: Vec<(String, Value)> = self
            .scan_table(&people.by_s)
            .into_iter()
            .map(|r| match &r[0] {
                Value::String(s) => (s.trim_end().to_lowercase(), r[1].clone()),
                other => panic!("not a string: {other:?}"),
            })
            .collect();
        by_s.sort_by(|a, b| a.0.cmp(&b.0));
        let mut expected_s: Vec<(String, Value)> = model
            .iter()
            .filter_map(|(id, p)| {
                p.s.as_ref()
                    .map(|s| (s.trim_end().to_lowercase(), base_key(*id)))
            })
            .collect();
        expected_s.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            by_s, expected_s,
            "unique index by_s holds the model's index"
        );
    }
}

fn started_people(seed: u64) -> (Cluster, PeopleTables) {
    let mut cluster = Cluster::start(seed, 1, Limits::default());
    // `accounts` too: the scan helper ends its transaction through it.
    cluster.create_table();
    let people = cluster.create_people();
    (cluster, people)
}

/// Runs `ops` in one committing transaction and checks the reply against
/// the model run in request order.
fn run_against_model(
    cluster: &mut Cluster,
    people: &PeopleTables,
    model: &mut People,
    ops: &[KeyOp],
) {
    let mut next = model.clone();
    let mut expected = Vec::new();
    let mut violation = None;
    for (i, op) in ops.iter().enumerate() {
        match model_apply(&mut next, op) {
            Ok(answer) => expected.push(answer),
            Err(()) => {
                violation = Some(i);
                break;
            }
        }
    }
    let reply = cluster.commit_people(people, ops);
    if let Some(i) = violation {
        match reply {
            Reply::Ref {
                code,
                op_index,
                message,
            } => {
                assert_eq!(code, error::UNIQUE_VIOLATION, "{message} for {ops:?}");
                assert_eq!(op_index, 100 + i as u32, "{message}");
                assert!(message.contains("unique index `by_"), "{message}");
            }
            other => panic!("op {i} violates a unique index: {other:?} for {ops:?}"),
        }
        return;
    }
    let (_, answers) = committed(&reply);
    assert_eq!(answers.len(), ops.len());
    for (i, ((answer, (code, row)), op)) in answers.iter().zip(&expected).zip(ops).enumerate() {
        assert_eq!(answer.op_index, 100 + i as u32, "answers in request order");
        assert_eq!(answer.code, *code, "op {i} {op:?} of {ops:?}");
        assert_eq!(answer.row, *row, "op {i} {op:?} of {ops:?}");
    }
    *model = next;
}

#[test]
fn unique_keys_random_workload_matches_a_model() {
    let (mut cluster, people) = started_people(21);
    let mut rng = Rng::seeded(21);
    let mut model = People::new();
    let mut aborted = 0;
    for _ in 0..60 {
        let n = 1 + rng.below(8) as usize;
        let mut ops = Vec::new();
        for _ in 0..n {
            let id = rng.below(12) as i64;
            let u = (rng.below(4) > 0).then(|| rng.below(10) as i64);
            let s_of = |rng: &mut Rng| {
                let k = rng.below(10);
                if rng.below(2) == 0 {
                    format!("Name{k}")
                } else {
                    format!("name{k} ")
                }
            };
            let s = (rng.below(4) > 0).then(|| s_of(&mut rng));
            let by_u = Value::Int(rng.below(10) as i64);
            let by_s = Value::String(s_of(&mut rng));
            let op = match rng.below(11) {
                0 => KeyOp::read(None, Value::Int(id)),
                1 => KeyOp::read(Some("by_u"), by_u),
                2 => KeyOp::read(Some("by_s"), by_s),
                3 | 4 => KeyOp::insert(id, u, s.as_deref(), rng.below(100) as i64),
                5 => KeyOp::write(OpKind::Write, id, u, s.as_deref(), rng.below(100) as i64),
                6 => KeyOp::update(None, Value::Int(id), vec![(1, opt_int(u))]),
                7 => KeyOp::update(
                    Some("by_u"),
                    by_u,
                    vec![(2, opt_str(s.as_deref())), (3, Value::Int(7))],
                ),
                8 => KeyOp::update(
                    Some("by_s"),
                    by_s,
                    vec![(3, Value::Int(rng.below(100) as i64))],
                ),
                9 => KeyOp::delete(None, Value::Int(id)),
                _ => KeyOp::delete(Some("by_u"), by_u),
            };
            ops.push(op.ignoring());
        }
        let before = model.len();
        run_against_model(&mut cluster, &people, &mut model, &ops);
        if model.len() == before {
            aborted += 1;
        }
    }
    assert!(
        !model.is_empty() && aborted < 60,
        "the workload did something"
    );
    cluster.check_people(&people, &model);
    cluster.check_idle();
}

#[test]
fn ops_by_unique_key_see_earlier_ops_of_their_request() {
    let (mut cluster, people) = started_people(22);
    let mut model = People::new();
    let ops = [
        KeyOp::insert(1, Some(5), Some("Ann"), 10),
        KeyOp::read(Some("by_u"), Value::Int(5)),
        KeyOp::update(Some("by_u"), Value::Int(5), vec![(1, Value::Int(6))]),
        KeyOp::read(Some("by_u"), Value::Int(5)).ignoring(),
        KeyOp::read(Some("by_u"), Value::Int(6)),
        KeyOp::read(Some("by_s"), Value::String("ANN".into())),
        KeyOp::insert(2, Some(5), Some("Bob"), 20),
        KeyOp::delete(Some("by_s"), Value::String("ann".into())),
        KeyOp::insert(3, Some(6), Some("aNN"), 30),
        KeyOp::update(None, Value::Int(3), vec![(2, Value::String("Cid".into()))]),
        KeyOp::read(Some("by_s"), Value::String("cid".into())),
    ];
    run_against_model(&mut cluster, &people, &mut model, &ops);
    assert_eq!(model.len(), 2);
    cluster.check_people(&people, &model);
    // Committed reads by unique key in a later transaction.
    let reads = [
        KeyOp {
            lock: LockMode::Committed,
            ..KeyOp::read(Some("by_u"), Value::Int(6))
        },
        KeyOp {
            lock: LockMode::Committed,
            ..KeyOp::read(Some("by_u"), Value::Int(99))
        }
        .ignoring(),
    ];
    run_against_model(&mut cluster, &people, &mut model, &reads);
    // Without IGNORE_ERROR a lookup that finds nothing fails the request.
    match cluster.commit_people(&people, &[KeyOp::delete(Some("by_u"), Value::Int(42))]) {
        Reply::Ref { code, op_index, .. } => {
            assert_eq!((code, op_index), (error::NO_SUCH_ROW, 100));
        }
        other => panic!("{other:?}"),
    }
    cluster.check_idle();
}

#[test]
fn a_duplicate_unique_value_aborts_with_893_and_leaves_nothing() {
    let (mut cluster, people) = started_people(23);
    let mut model = People::new();
    run_against_model(
        &mut cluster,
        &people,
        &mut model,
        &[KeyOp::insert(1, Some(5), Some("x"), 1)],
    );
    for ignoring in [false, true] {
        let mut dup = KeyOp::insert(2, Some(5), Some("y"), 2);
        if ignoring {
            dup = dup.ignoring();
        }
        let ops = [KeyOp::insert(3, Some(7), Some("z"), 3), dup];
        match cluster.commit_people(&people, &ops) {
            Reply::Ref {
                code,
                op_index,
                message,
            } => {
                assert_eq!(
                    (code, op_index),
                    (error::UNIQUE_VIOLATION, 101),
                    "{message}"
                );
                assert!(
                    message.contains("`by_u`") && message.contains("people"),
                    "{message}"
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            error::class(error::UNIQUE_VIOLATION),
            proto::ErrorClass::Permanent
        );
        cluster.check_people(&people, &model);
    }
    // The same through an update, and a case-insensitive string.
    run_against_model(
        &mut cluster,
        &people,
        &mut model,
        &[KeyOp::insert(2, Some(6), Some("Y"), 2)],
    );
    for op in [
        KeyOp::update(None, Value::Int(2), vec![(1, Value::Int(5))]),
        KeyOp::update(
            Some("by_u"),
            Value::Int(6),
            vec![(2, Value::String("X ".into()))],
        ),
        KeyOp::write(OpKind::Write, 2, Some(6), Some("x"), 0),
    ] {
        match cluster.commit_people(&people, &[op]) {
            Reply::Ref { code, .. } => assert_eq!(code, error::UNIQUE_VIOLATION),
            other => panic!("{other:?}"),
        }
    }
    cluster.check_people(&people, &model);
    cluster.check_idle();
}

#[test]
fn updates_move_index_entries_deletes_free_them_and_nulls_repeat() {
    let (mut cluster, people) = started_people(24);
    let mut model = People::new();
    let steps: Vec<Vec<KeyOp>> = vec![
        vec![KeyOp::insert(1, Some(1), Some("a"), 0)],
        vec![KeyOp::update(None, Value::Int(1), vec![(1, Value::Int(2))])],
        // The old value is free again, the new one taken.
        vec![KeyOp::insert(2, Some(1), Some("b"), 0)],
        vec![KeyOp::delete(None, Value::Int(1))],
        vec![KeyOp::insert(3, Some(2), Some("a"), 0)],
        // NULLs: many rows, no index entries.
        (10..15)
            .map(|id| KeyOp::insert(id, None, None, id))
            .collect(),
        vec![KeyOp::update(
            None,
            Value::Int(2),
            vec![(1, Value::Null), (2, Value::Null)],
        )],
        vec![KeyOp::update(
            None,
            Value::Int(10),
            vec![(1, Value::Int(1))],
        )],
        // An update of other columns only leaves the entries alone.
        vec![KeyOp::update(
            Some("by_u"),
            Value::Int(1),
            vec![(3, Value::Int(99))],
        )],
        // Write (upsert) over an existing row moves its entries too.
        vec![KeyOp::write(OpKind::Write, 3, Some(4), Some("c"), 5)],
        vec![KeyOp::read(Some("by_u"), Value::Null).ignoring()],
    ];
    for ops in &steps {
        run_against_model(&mut cluster, &people, &mut model, ops);
        cluster.check_people(&people, &model);
    }
    assert_eq!(model.values().filter(|p| p.u.is_none()).count(), 5);
    cluster.check_idle();
}

#[test]
fn two_transactions_inserting_one_value_meet_on_the_index_row() {
    let (mut cluster, people) = started_people(25);
    for (commit_first, id) in [(true, 1), (false, 3)] {
        let first = cluster.tx_id();
        let reply = cluster.execute_people(
            &people,
            first,
            tc_flags::START,
            &[KeyOp::insert(id, Some(9 + id), None, 0)],
        );
        assert!(matches!(reply, Reply::Conf { .. }), "{reply:?}");
        let second = cluster.tx_id();
        cluster.submit_people(
            &people,
            second,
            tc_flags::START | tc_flags::COMMIT,
            &[KeyOp::insert(id + 1, Some(9 + id), None, 0)],
        );
        assert_eq!(
            cluster.reply_within(second, DEADLOCK_TIMEOUT / 2),
            None,
            "the second waits for the index row"
        );
        let end = if commit_first {
            tc_flags::COMMIT
        } else {
            tc_flags::ROLLBACK
        };
        let reply = cluster.execute_people(&people, first, end, &[]);
        assert!(matches!(reply, Reply::Conf { .. }), "{reply:?}");
        let second_reply = cluster
            .reply_within(second, ANSWER_WAIT)
            .expect("the second is answered");
        let mut model = People::new();
        let winner = if commit_first {
            match second_reply {
                Reply::Ref { code, .. } => assert_eq!(code, error::UNIQUE_VIOLATION),
                other => panic!("{other:?}"),
            }
            id
        } else {
            committed(&second_reply);
            id + 1
        };
        model.insert(
            winner,
            Person {
                u: Some(9 + id),
                s: None,
                n: 0,
            },
        );
        cluster.check_people(&people, &model);
        committed(&cluster.commit_people(&people, &[KeyOp::delete(None, Value::Int(winner))]));
    }
    cluster.check_people(&people, &People::new());
    cluster.check_idle();
}

#[test]
fn hidden_index_tables_are_not_written_directly() {
    let (mut cluster, people) = started_people(26);
    let mut ops = Vec::new();
    let mut w = OpBatchWriter::new(&mut ops);
    w.begin(&OpHeader {
        op_index: 0,
        table_id: people.by_u.id,
        table_version: people.by_u.version,
        index_id: NO_INDEX,
        partition: NO_PARTITION,
        kind: OpKind::Insert,
        lock: LockMode::Exclusive,
        flags: 0,
    });
    w.key(Value::Int(1).as_ref());
    w.value(1, Value::Bytes(vec![0; 8]).as_ref());
    w.end().unwrap();
    drop(w);
    let tx = cluster.tx_id();
    let tc = tc_of(cluster.data_nodes[0]);
    cluster.send(
        tc,
        SignalBody::TcKeyReq {
            tx_id: tx,
            flags: tc_flags::START | tc_flags::COMMIT,
            ops,
        },
    );
    match cluster.reply_within(tx, ANSWER_WAIT).expect("answered") {
        Reply::Ref { code, message, .. } => {
            assert_eq!(code, error::BAD_OPERATION);
            assert!(message.contains("base table"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    cluster.check_people(&people, &People::new());
    cluster.check_idle();
}

impl Cluster {
    /// The sum of one counter of every LDM instance's stats.
    fn ldm_total(&self, counter: impl Fn(&LdmStats) -> u64) -> u64 {
        self.data_nodes
            .iter()
            .flat_map(|&n| (0..LDM_INSTANCES).map(move |i| ldm_of(n, i)))
            .map(|at| counter(self.sim.block::<LdmBlock<SimDisk>>(at).unwrap().stats()))
            .sum()
    }

    /// `LdmKeyReq`s received by every LDM instance so far.
    fn key_requests(&self) -> u64 {
        self.ldm_total(|s| s.key_requests)
    }
}

#[test]
fn unique_key_batches_take_a_few_rounds_not_one_per_op() {
    let (mut cluster, people) = started_people(27);
    let mut model = People::new();
    let instances = u64::from(LDM_INSTANCES);
    let rounds = |cluster: &mut Cluster, model: &mut People, ops: &[KeyOp]| {
        let before = cluster.key_requests();
        run_against_model(cluster, &people, model, ops);
        cluster.key_requests() - before
    };
    let inserts: Vec<KeyOp> = (0..300)
        .map(|id| KeyOp::insert(id, Some(id * 2), Some(&format!("p{id}")), id))
        .collect();
    // Base round, index round: at most one request per LDM instance each.
    assert!(rounds(&mut cluster, &mut model, &inserts) <= 2 * instances);
    let reads: Vec<KeyOp> = (0..300)
        .map(|id| KeyOp::read(Some("by_u"), Value::Int(id * 2)))
        .collect();
    assert!(rounds(&mut cluster, &mut model, &reads) <= 2 * instances);
    let deletes: Vec<KeyOp> = (0..150)
        .map(|id| KeyOp::delete(Some("by_s"), Value::String(format!("P{id}"))))
        .collect();
    assert!(rounds(&mut cluster, &mut model, &deletes) <= 3 * instances);
    let updates: Vec<KeyOp> = (150..300)
        .map(|id| KeyOp::update(None, Value::Int(id), vec![(1, Value::Int(id * 2 + 1))]))
        .collect();
    assert!(rounds(&mut cluster, &mut model, &updates) <= 2 * instances);
    assert_eq!(model.len(), 150);
    cluster.check_people(&people, &model);
    // An op by unique key after an insert of its value runs after it: a
    // second segment, still not one request per op.
    let ordered = [
        KeyOp::insert(1_000, Some(1_000), None, 0),
        KeyOp::read(Some("by_u"), Value::Int(1_000)),
    ];
    let used = rounds(&mut cluster, &mut model, &ordered);
    assert!((2..=4).contains(&used), "{used}");
    cluster.check_people(&people, &model);
    cluster.check_idle();
}

/// The GCI switch keeps dependency order: a `GcpPrepareReq` that reaches
/// one TC before another (here: delivered to TC A alone, as a slow link to
/// B would) must not let A commit in `g + 1` while B still commits in `g`,
/// or a transaction on B that read A's commit would land in an earlier GCI
/// than what it read (a restore to `g` would hold it without its cause).
#[test]
fn a_commit_that_read_another_is_never_in_an_earlier_gci() {
    let mut cluster = Cluster::start(22, 2, Limits::default());
    cluster.create_table();
    let (a, b) = (cluster.data_nodes[0], cluster.data_nodes[1]);
    committed(&cluster.commit(&[Op::write(OpKind::Insert, 1, 1)]));
    // Just after a switch: the next one is a GCP interval away.
    let before = cluster.tc_on(a).current_gci();
    let until = cluster.sim.now() + GCP_INTERVAL * 3;
    while cluster.tc_on(a).current_gci() == before {
        assert!(cluster.sim.now() < until, "GCPs run");
        cluster.sim.run_for(Duration::from_millis(1));
    }
    cluster.sim.run_for(Duration::from_millis(5));
    let g = cluster.tc_on(a).current_gci();
    assert_eq!(cluster.tc_on(b).current_gci(), g, "both TCs switched");
    let master = cluster
        .data_nodes
        .iter()
        .copied()
        .find(|&n| {
            cluster
                .sim
                .block::<Distribution>(Distribution::address(n))
                .is_some_and(|d| d.is_master())
        })
        .expect("a master");
    cluster.sim.inject(Signal {
        receiver: tc_of(a),
        sender: Distribution::address(master),
        body: SignalBody::GcpPrepareReq {
            epoch: signal::epoch::make(g + 1, 0),
        },
    });
    // T1 on A writes row 1; T2 on B reads row 1 under an exclusive lock
    // (waiting for T1 if T1 holds it) and writes row 2 from what it read.
    let t1 = cluster.tx_id();
    cluster.submit_to(
        a,
        t1,
        tc_flags::START | tc_flags::COMMIT,
        &[Op::write(OpKind::Update, 1, 2)],
    );
    cluster.sim.run_for(Duration::from_millis(3));
    let t2 = cluster.tx_id();
    cluster.submit_to(b, t2, tc_flags::START, &[Op::read(1, LockMode::Exclusive)]);
    let read = cluster
        .reply_within(t2, ANSWER_WAIT)
        .expect("T2's read answered");
    let seen = match &read {
        Reply::Conf { answers, .. } => int(&answers[0].row.as_ref().expect("row 1 exists")[1]),
        other => panic!("T2's read failed: {other:?}"),
    };
    assert_eq!(seen, 2, "T2 read T1's write (it waited for T1's commit)");
    cluster.submit_to(
        b,
        t2,
        tc_flags::COMMIT,
        &[Op::write(OpKind::Write, 2, seen)],
    );
    let r2 = cluster.reply_within(t2, ANSWER_WAIT).expect("T2 answered");
    let r1 = cluster.reply_within(t1, ANSWER_WAIT).expect("T1 answered");
    let (gci1, _) = committed(&r1);
    let (gci2, _) = committed(&r2);
    assert!(
        gci1 > g,
        "T1 committed after the injected prepare: GCI {gci1}, prepared from {g}"
    );
    assert!(
        gci2 >= gci1,
        "T2 read T1 (GCI {gci1}) yet committed in GCI {gci2}: a restore to {gci2} would hold T2 without T1"
    );
    cluster.sim.run_for(GCP_INTERVAL * 2);
    cluster.check_idle();
}

/// Micro-GCPs: every `EPOCH_INTERVAL` the epoch's lo advances inside the
/// GCI, every `GCP_INTERVAL` hi advances with lo back at 0; each switch
/// round ends with the previous epoch reported complete to every TC, in
/// increasing order and always below the epoch in use; the commit reply
/// carries the epoch, above every epoch reported complete when it comes,
/// and wait_gci waits for its hi.
#[test]
fn epochs_advance_between_gcps_and_are_reported_complete_in_order() {
    let mut cluster = Cluster::start(23, 2, Limits::default());
    cluster.create_table();
    let nodes = cluster.data_nodes.clone();
    let mut seen_lo = 0;
    let mut last_epoch = 0;
    let mut last_complete = vec![0u64; nodes.len()];
    let mut reports = 0;
    for k in 0..40 {
        let n = nodes[k as usize % nodes.len()];
        let tx = cluster.tx_id();
        cluster.submit_to(
            n,
            tx,
            tc_flags::START | tc_flags::COMMIT,
            &[Op::write(OpKind::Write, k, k)],
        );
        let reply = cluster
            .reply_within(tx, ANSWER_WAIT)
            .expect("a commit answered");
        let (epoch, _) = committed_epoch(&reply);
        let current = cluster.tc_on(n).current_epoch();
        assert!(
            epoch <= current && epoch >= last_epoch,
            "commit epoch {epoch:#x}: at most the TC's ({current:#x}), at least the last commit's ({last_epoch:#x})"
        );
        last_epoch = epoch;
        for (i, &m) in nodes.iter().enumerate() {
            let tc = cluster.tc_on(m);
            let complete = tc.complete_epoch();
            assert!(
                complete >= last_complete[i],
                "complete epochs never go back on {m}"
            );
            assert!(
                complete < tc.current_epoch() || complete == 0,
                "node {m}: epoch {complete:#x} complete while {:#x} in use",
                tc.current_epoch()
            );
            if complete > last_complete[i] {
                reports += 1;
            }
            last_complete[i] = complete;
        }
        seen_lo = seen_lo.max(signal::epoch::lo(epoch));
        cluster.sim.run_for(EPOCH_INTERVAL / 2);
    }
    assert!(seen_lo > 0, "commits answered with lo > 0: {last_epoch:#x}");
    assert!(reports > 10, "epochs were reported complete: {reports}");
    // wait_gci takes the commit epoch's hi.
    let gci = signal::epoch::hi(last_epoch);
    let tc = tc_of(nodes[0]);
    cluster.send(tc, SignalBody::TcWaitGciReq { gci });
    let until = cluster.sim.now() + ANSWER_WAIT;
    let durable = loop {
        let answer = cluster.take().into_iter().find_map(|s| match s.body {
            SignalBody::TcWaitGciConf {
                gci: g,
                durable_gci,
            } if g == gci => Some(durable_gci),
            _ => None,
        });
        if let Some(durable) = answer {
            break durable;
        }
        assert!(cluster.sim.now() < until, "TcWaitGciReq answered");
        cluster.sim.run_for(Duration::from_millis(1));
    };
    assert!(
        durable >= gci,
        "answered once GCI {gci} is durable: {durable}"
    );
    // A micro-GCP saves nothing: the durable GCI follows the GCPs only.
    let master = cluster.master();
    assert!(master.complete_epoch() > 0);
    assert!(
        u64::from(master.durable_gci()) < signal::epoch::hi(master.complete_epoch()) as u64 + 1,
        "durable GCI {} at most the complete epoch's hi",
        master.durable_gci()
    );
    cluster.sim.run_for(GCP_INTERVAL * 2);
    let _ = cluster.take();
    cluster.check_idle();
}

/// With one replica every commit chain starts on the TC's own node: the
/// chains go at once, none waits to be batched, however many commit together.
#[test]
fn commit_chains_that_start_on_the_tcs_node_are_not_batched() {
    let mut cluster = Cluster::start(25, 1, Limits::default());
    cluster.create_table();
    const TRANSACTIONS: i64 = 64;
    let keys: Vec<i64> = (0..TRANSACTIONS).collect();
    cluster.commit_together(&keys, |k| Op::write(OpKind::Insert, k, 10 * k));
    assert_eq!(cluster.tc().counters().commit_batches, 0);
    let values = cluster.read_values(&keys);
    assert!(values.iter().zip(&keys).all(|(v, k)| *v == Some(10 * k)));
    cluster.check_idle();
}

/// With two replicas, writes started together cross between the nodes in
/// key batches: a primary passes the requests of a round on to the backup
/// in one `LdmKeyBatchReq`, the backup answers a TC on the other node in
/// one `LdmKeyConfBatch`. Every write commits once on each replica, with
/// its value, and nothing is left behind.
#[test]
fn writes_started_together_cross_between_nodes_in_key_batches_and_each_commits_on_both_replicas() {
    let mut cluster = Cluster::start(24, 2, Limits::default());
    // READ_BACKUP: a committed read stays on its TC's node, so reading
    // through each node reads each replica.
    cluster.create_table_with(true);
    // (requests passed on in batches, answers in batches, commits), all instances.
    let stats = |cluster: &Cluster| -> (u64, u64, u64) {
        (
            cluster.ldm_total(|s| s.key_batches),
            cluster.ldm_total(|s| s.key_conf_batches),
            cluster.ldm_total(|s| s.commits),
        )
    };
    let before = stats(&cluster);
    const TRANSACTIONS: i64 = 64;
    let keys: Vec<i64> = (0..TRANSACTIONS).collect();
    // Inserts, then updates of the same rows: each round in flight at once
    // through one TC.
    for (kind, value) in [(OpKind::Insert, 10), (OpKind::Update, 20)] {
        cluster.commit_together(&keys, |k| Op::write(kind, k, value * k + 1));
    }
    let after = stats(&cluster);
    assert!(after.0 > before.0, "no requests were passed on together");
    assert!(after.1 > before.1, "no answers went to a TC together");
    assert_eq!(
        after.2 - before.2,
        2 * 2 * TRANSACTIONS as u64,
        "each write committed on its primary and its backup, once"
    );
    for n in cluster.data_nodes.clone() {
        let local_reads = cluster.tc_on(n).counters().local_reads;
        let values = cluster.read_values_on(n, &keys);
        assert!(
            values
                .iter()
                .zip(&keys)
                .all(|(v, &k)| *v == Some(20 * k + 1)),
            "through node {n}: {values:?}"
        );
        assert_eq!(
            cluster.tc_on(n).counters().local_reads - local_reads,
            TRANSACTIONS as u64,
            "every read through {n} read its replica on {n}"
        );
    }
    cluster.check_idle();
}

#[test]
fn commits_started_together_travel_in_batches_and_each_commits_on_both_replicas() {
    let mut cluster = Cluster::start(22, 2, Limits::default());
    cluster.create_table();
    let commits = |cluster: &Cluster| cluster.ldm_total(|s| s.commits);
    let before = commits(&cluster);
    let batches_before = cluster.tc().counters().commit_batches;
    // Many one-row inserts in flight at once through one TC: their commits
    // start close together, and those of one chain share a signal.
    const TRANSACTIONS: i64 = 64;
    let keys: Vec<i64> = (0..TRANSACTIONS).collect();
    cluster.commit_together(&keys, |k| Op::write(OpKind::Insert, k, 10 * k));
    assert!(
        cluster.tc().counters().commit_batches > batches_before,
        "no commit chains were sent together"
    );
    assert_eq!(
        commits(&cluster) - before,
        2 * TRANSACTIONS as u64,
        "each insert committed on its primary and its backup, once"
    );
    let values = cluster.read_values(&keys);
    assert!(values.iter().zip(&keys).all(|(v, k)| *v == Some(10 * k)));
    cluster.check_idle();
}

impl Cluster {
    /// `LdmKeyCommitReq`s committed by every LDM instance so far.
    fn one_phase_commits(&self) -> u64 {
        self.ldm_total(|s| s.one_phase_commits)
    }
}

#[test]
fn whole_transactions_on_one_replica_commit_with_their_ops() {
    let mut cluster = started(27, Limits::default());
    // Wait for the first GCI: before it, commits take the two-phase path.
    cluster.sim.run_for(GCP_INTERVAL * 3);
    let (tc_before, ldm_before) = (
        cluster.tc().counters().one_phase,
        cluster.one_phase_commits(),
    );
    // Two keys of one partition: every op of a transaction goes to one
    // LDM instance, whose commit is its answer.
    let p = cluster.partition_of(1);
    let k = (2..)
        .find(|k| cluster.partition_of(*k) == p)
        .expect("a key");
    let reply = cluster.commit(&[
        Op::write(OpKind::Insert, 1, 10),
        Op::write(OpKind::Insert, k, 20),
    ]);
    assert!(committed(&reply).0 > 0, "committed in a GCI");
    // The commit's reply is the LDM's answer to the ops: each op answered,
    // in order, the locked read with its row.
    let reply = cluster.commit(&[
        Op::write(OpKind::Update, 1, 11),
        Op::read(k, LockMode::Exclusive),
    ]);
    let (_, answers) = committed(&reply);
    assert_eq!(
        answers
            .iter()
            .map(|a| (a.op_index, a.code))
            .collect::<Vec<_>>(),
        vec![(0, 0), (1, 0)]
    );
    assert_eq!(answers[0].row, None);
    assert_eq!(answers[1].row.as_ref().map(|r| int(&r[1])), Some(20));
    committed(&cluster.commit(&[Op::delete(k)]));
    assert_eq!(cluster.tc().counters().one_phase - tc_before, 3);
    assert_eq!(cluster.one_phase_commits() - ldm_before, 3);
    assert_eq!(cluster.read_values(&[1, k]), vec![Some(11), None]);
    // Two partitions (two LDM instances): two phases.
    let placement = Placement::new(vec![vec![node(2)]], LDM_INSTANCES);
    let instance = |k: i64| placement.home(cluster.partition_of(k)).ldm_instance;
    let other = (2..).find(|k| instance(*k) != instance(1));
    let other = other.expect("a key on the other instance");
    committed(&cluster.commit(&[
        Op::write(OpKind::Update, 1, 12),
        Op::write(OpKind::Insert, other, 1),
    ]));
    assert_eq!(cluster.one_phase_commits() - ldm_before, 3);
    // A transaction of two requests commits in two phases.
    let tx = cluster.tx_id();
    assert!(matches!(
        cluster.execute(tx, tc_flags::START, &[Op::write(OpKind::Update, 1, 12)]),
        Reply::Conf { .. }
    ));
    committed(&cluster.execute(tx, tc_flags::COMMIT, &[]));
    assert_eq!(cluster.one_phase_commits() - ldm_before, 3);
    assert_eq!(cluster.read_values(&[1, other]), vec![Some(12), Some(1)]);
    cluster.check_idle();

    // Two replicas: never one-phase.
    let mut two = Cluster::start(28, 2, Limits::default());
    two.create_table();
    two.sim.run_for(GCP_INTERVAL * 3);
    committed(&two.commit(&[Op::write(OpKind::Insert, 1, 10)]));
    assert_eq!(two.tc().counters().one_phase, 0);
    assert_eq!(two.one_phase_commits(), 0);
    two.check_idle();
}

#[test]
fn a_one_phase_transaction_with_a_failing_op_commits_nothing() {
    let mut cluster = started(29, Limits::default());
    cluster.sim.run_for(GCP_INTERVAL * 3);
    committed(&cluster.commit(&[Op::write(OpKind::Insert, 1, 10)]));
    let ldm_before = cluster.one_phase_commits();
    // The update runs, then the insert finds the row: the LDM commits
    // nothing and the TC aborts, as it would after a prepare.
    let reply = cluster.commit(&[
        Op::write(OpKind::Update, 1, 11),
        Op::write(OpKind::Insert, 1, 12),
    ]);
    assert!(
        matches!(reply, Reply::Ref { code, op_index: 1, .. } if code == error::DUPLICATE_KEY),
        "{reply:?}"
    );
    assert_eq!(cluster.one_phase_commits(), ldm_before);
    assert_eq!(cluster.read_values(&[1]), vec![Some(10)]);
    // Nothing is left locked or counted: the row takes a write, and GCPs go on.
    let epoch = cluster.tc().current_epoch();
    committed(&cluster.commit(&[Op::write(OpKind::Update, 1, 13)]));
    cluster.sim.run_for(GCP_INTERVAL * 3);
    assert!(cluster.tc().complete_epoch() > epoch);
    assert_eq!(cluster.read_values(&[1]), vec![Some(13)]);
    cluster.check_idle();
}

/// A one-phase transaction of one write runs at its arrival on the LDM,
/// with no request record: it commits, or fails as before, and a failed
/// one leaves what the TC's abort releases. An insert of a key that exists
/// takes the row's lock before it fails: the abort releases it, so the
/// next write of the row commits at once; an update of a missing key
/// leaves nothing.
#[test]
fn a_one_phase_write_alone_commits_at_once_or_fails_leaving_its_lock_to_the_abort() {
    let mut cluster = started(31, Limits::default());
    cluster.sim.run_for(GCP_INTERVAL * 3);
    let before = cluster.one_phase_commits();
    committed(&cluster.commit(&[Op::write(OpKind::Insert, 1, 10)]));
    committed(&cluster.commit(&[Op::write(OpKind::Update, 1, 11)]));
    assert_eq!(cluster.one_phase_commits() - before, 2);
    for (op, code) in [
        (Op::write(OpKind::Insert, 1, 12), error::DUPLICATE_KEY),
        (Op::write(OpKind::Update, 2, 12), error::NO_SUCH_ROW),
        (Op::delete(3), error::NO_SUCH_ROW),
    ] {
        let reply = cluster.commit(&[op]);
        assert!(
            matches!(reply, Reply::Ref { code: c, op_index: 0, .. } if c == code),
            "{reply:?}"
        );
        cluster.check_idle();
    }
    assert_eq!(cluster.one_phase_commits() - before, 2);
    let started = cluster.sim.now();
    committed(&cluster.commit(&[Op::write(OpKind::Update, 1, 13)]));
    assert!(
        cluster.sim.now() - started < DEADLOCK_TIMEOUT,
        "the failed insert's lock was released by its abort"
    );
    assert_eq!(cluster.one_phase_commits() - before, 3);
    assert_eq!(cluster.read_values(&[1, 2, 3]), vec![Some(13), None, None]);
    cluster.check_idle();
}

/// How a one-phase update of row `KEY`, waiting for the lock of an open
/// transaction that commits `commit_after` later (never: `None`), ended:
/// its reply, when the reply came, whether the TC timed it out, and the
/// row's value after both ended.
fn one_phase_behind_a_lock(commit_after: Option<Duration>) -> (Reply, Duration, bool, Option<i64>) {
    const KEY: i64 = 5;
    // Node 2's TC, the row on node 3: LDM and TC talk over the network.
    let mut cluster = Cluster::start_spread(30, 2, Limits::default());
    cluster.create_table();
    let placement = Placement::new(vec![vec![node(2)], vec![node(3)]], LDM_INSTANCES);
    assert_eq!(
        placement.home(cluster.partition_of(KEY)).primary(),
        node(3),
        "the row lives on the other node"
    );
    cluster.sim.run_for(GCP_INTERVAL * 3);
    committed(&cluster.commit(&[Op::write(OpKind::Insert, KEY, 10)]));
    let holder = cluster.tx_id();
    assert!(matches!(
        cluster.execute(
            holder,
            tc_flags::START,
            &[Op::write(OpKind::Update, KEY, 11)]
        ),
        Reply::Conf { .. }
    ));
    let waiter = cluster.tx_id();
    let timeouts_before = cluster.tc().counters().lock_timeouts;
    cluster.submit(
        waiter,
        tc_flags::START | tc_flags::COMMIT,
        &[Op::write(OpKind::Update, KEY, 22)],
    );
    let sent = cluster.sim.now();
    if let Some(after) = commit_after {
        cluster.sim.run_until(sent + after);
        cluster.submit(holder, tc_flags::COMMIT, &[]);
    }
    let reply = cluster
        .reply_within(waiter, ANSWER_WAIT)
        .expect("the waiter is answered");
    let answered = cluster.sim.now() - sent;
    if commit_after.is_some() {
        let holder_reply = cluster
            .reply_within(holder, ANSWER_WAIT)
            .expect("the holder is answered");
        committed(&holder_reply);
    } else {
        committed(&cluster.execute(holder, tc_flags::COMMIT, &[]));
    }
    let timed_out = cluster.tc().counters().lock_timeouts > timeouts_before;
    let value = cluster.read_values(&[KEY])[0];
    // Neither left a lock behind (the waiter's is released by its commit
    // or abort): the row takes a write at once.
    let started = cluster.sim.now();
    committed(&cluster.commit(&[Op::write(OpKind::Update, KEY, 33)]));
    assert!(cluster.sim.now() - started < DEADLOCK_TIMEOUT);
    cluster.check_idle();
    (reply, answered, timed_out, value)
}

#[test]
fn a_one_phase_commit_racing_its_lock_timeout_has_one_outcome() {
    // Never granted: the TC times it out and the LDM drops it.
    let (reply, answered, timed_out, value) = one_phase_behind_a_lock(None);
    assert!(
        matches!(reply, Reply::Ref { code, .. } if code == error::LOCK_TIMEOUT),
        "{reply:?}"
    );
    assert!(timed_out && answered >= DEADLOCK_TIMEOUT);
    assert_eq!(value, Some(11));
    // The lock is granted at every moment around that timeout: the LDM
    // commits, or the TC's abort reaches it first, never both. Where the
    // commit and the abort cross, the LDM's commit stands.
    let (mut commits, mut aborts, mut crossed) = (0, 0, 0);
    let step = Duration::from_micros(40);
    let mut after = answered.saturating_sub(Duration::from_millis(3));
    while after <= answered + Duration::from_millis(1) {
        let (reply, _, timed_out, value) = one_phase_behind_a_lock(Some(after));
        match reply {
            Reply::Conf { flags, .. } => {
                assert_eq!(flags, tc_flags::COMMITTED);
                assert_eq!(value, Some(22), "committed after the holder ({after:?})");
                commits += 1;
                crossed += u32::from(timed_out);
            }
            Reply::Ref { code, .. } => {
                assert_eq!(code, error::LOCK_TIMEOUT);
                assert_eq!(
                    value,
                    Some(11),
                    "the timed-out update left nothing ({after:?})"
                );
                aborts += 1;
            }
        }
        after += step;
    }
    assert!(
        commits > 0 && aborts > 0,
        "{commits} commits, {aborts} timeouts"
    );
    assert!(
        crossed > 0,
        "no commit crossed the TC's abort ({commits} commits, {aborts} timeouts)"
    );
}

impl Cluster {
    /// The LDM instance of `key`'s partition on the first data node (a
    /// cluster of one node group of that node alone).
    fn instance_of(&self, key: i64) -> u32 {
        let placement = Placement::new(vec![vec![self.data_nodes[0]]], LDM_INSTANCES);
        placement.home(self.partition_of(key)).ldm_instance
    }

    /// `n` keys above 1 on the LDM instance of key 1: a transaction of
    /// them and key 1 goes whole to that instance.
    fn keys_beside_1(&self, n: usize) -> Vec<i64> {
        let instance = self.instance_of(1);
        (2..)
            .filter(|&k| self.instance_of(k) == instance)
            .take(n)
            .collect()
    }

    /// (TC reads handed to an LDM, `LdmReadReq`s the LDMs answered, TC
    /// commits) on node `n`.
    fn hand_offs(&self, n: NodeId) -> (u64, u64, u64) {
        let counters = self.tc_on(n).counters();
        let answered = (0..LDM_INSTANCES)
            .map(|i| {
                let ldm = self.sim.block::<LdmBlock<SimDisk>>(ldm_of(n, i));
                ldm.expect("an LDM instance").stats().reads_answered
            })
            .sum();
        (counters.reads_handed_off, answered, counters.committed)
    }
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
