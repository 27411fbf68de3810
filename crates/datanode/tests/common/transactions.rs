//! The calls of the transaction coordinator tests (`tc_*.rs`) on the
//! shared [`Cluster`]: operations on the test table `accounts (id BIGINT,
//! v INT NULL, s VARCHAR(20) NULL)` checked against a model, whole
//! transactions, scans, and the checks of what the blocks hold at the end
//! (no transaction, scan or operation record left behind).
#![allow(dead_code, unused_imports)] // each test file uses its own part

pub use std::collections::BTreeMap;
pub use std::sync::{Arc, Mutex};
pub use std::time::Duration;

pub use config::Placement;
pub use datanode::distribution::Distribution;
pub use datanode::ldm::{LdmBlock, LdmStats};
pub use datanode::tc::TcBlock;
pub use kernel::simulator::Simulation;
pub use kernel::{Block, Context, Rng};
pub use proto::error;
pub use proto::ops::{
    LockMode, OpBatchWriter, OpHeader, OpKind, IGNORE_ERROR, KEY_INFO, NO_INDEX, NO_PARTITION,
};
pub use proto::results::ResultReader;
pub use proto::scan::{Bound, RowBatchReader, ScanSpec};
pub use proto::{CmpOp, Filter};
pub use schema::{
    distribution_hash, partition_of, Column, ColumnType, IndexDef, IndexKind, KeyEncoder, TableDef,
    Value,
};
pub use signal::{tc_flags, BlockNumber, BlockRef, NodeId, Signal, SignalBody};
pub use storage::disk::SimDisk;

use crate::common::*;

pub const GCP_INTERVAL: Duration = Duration::from_millis(100);
pub const EPOCH_INTERVAL: Duration = Duration::from_millis(20);
/// Longest a test waits for an answer that must come.
pub const ANSWER_WAIT: Duration = Duration::from_secs(3);

/// A TC that never sees an `LdmKeyConf`'s `ok_in_order` claim: it reads
/// every result batch, the general path its common-case shortcut must agree with.
pub struct NoClaims(pub Box<dyn Block>);

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

    fn check_invariants(&self) {
        self.0.check_invariants();
    }
}

/// Limits of the TC under test.
#[derive(Clone, Copy)]
pub struct Limits {
    pub transactions: u32,
    pub operations: u32,
    pub scans: u32,
    /// `MaxBufferedEpochs`.
    pub buffered_epochs: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            transactions: 64,
            operations: 4_096,
            scans: 8,
            buffered_epochs: 100,
        }
    }
}

/// One operation on the test table `(id BIGINT, v INT NULL, s VARCHAR(20) NULL)`.
#[derive(Clone, Debug)]
pub struct Op {
    pub kind: OpKind,
    pub lock: LockMode,
    pub key: i64,
    pub v: Option<i64>,
    pub flags: u8,
}

impl Op {
    pub fn read(key: i64, lock: LockMode) -> Op {
        Op {
            kind: OpKind::Read,
            lock,
            key,
            v: None,
            flags: 0,
        }
    }

    pub fn write(kind: OpKind, key: i64, v: i64) -> Op {
        Op {
            kind,
            lock: LockMode::Exclusive,
            key,
            v: Some(v),
            flags: 0,
        }
    }

    pub fn delete(key: i64) -> Op {
        Op {
            kind: OpKind::Delete,
            lock: LockMode::Exclusive,
            key,
            v: None,
            flags: 0,
        }
    }

    pub fn ignoring(mut self) -> Op {
        self.flags |= IGNORE_ERROR;
        self
    }
}

/// The answer to one operation: code, and the row of a read.
#[derive(Clone, Debug, PartialEq)]
pub struct OpAnswer {
    pub op_index: u32,
    pub code: u32,
    pub row: Option<Vec<Value>>,
}

/// Rows of a scan, and how many batches brought them.
pub type ScannedRows = (Vec<Vec<Value>>, usize);
/// A scan's rows, batches, and whether its transaction was released.
pub type ReleasedScan = (Vec<Vec<Value>>, usize, bool);

/// How a transaction request ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
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
pub struct Logs {
    pub gcp_interval: Duration,
    pub redo_file_size_bytes: u64,
}

impl Cluster {
    /// `n` data nodes in one node group (`n` replicas), each with one TC
    /// and `LDM_INSTANCES` LDM instances.
    pub fn start(seed: u64, n: u8, limits: Limits) -> Cluster {
        Cluster::start_with(seed, n, limits, false)
    }

    /// [`Cluster::start`]; with `no_claims` every TC reads every result
    /// batch (see [`NoClaims`]).
    pub fn start_with(seed: u64, n: u8, limits: Limits, no_claims: bool) -> Cluster {
        let logs = Logs {
            gcp_interval: GCP_INTERVAL,
            redo_file_size_bytes: 1 << 20,
        };
        Cluster::start_logged(seed, n, limits, no_claims, logs)
    }

    /// [`Cluster::start_with`] with the GCP interval and redo file size of `logs`.
    pub fn start_logged(seed: u64, n: u8, limits: Limits, no_claims: bool, logs: Logs) -> Cluster {
        let data_nodes: Vec<NodeId> = (0..n).map(|i| node(2 + i)).collect();
        let placement = Placement::new(vec![data_nodes.clone()], LDM_INSTANCES);
        Cluster::start_placed(seed, placement, limits, no_claims, logs)
    }

    /// `n` data nodes, each a node group of its own (one replica): a TC
    /// reaches the other node's partitions over the simulated network.
    pub fn start_spread(seed: u64, n: u8, limits: Limits) -> Cluster {
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

    pub fn start_placed(
        seed: u64,
        placement: Placement,
        limits: Limits,
        no_claims: bool,
        logs: Logs,
    ) -> Cluster {
        let tune = move |spec: &mut NodeSpec| {
            spec.gcp_interval = logs.gcp_interval;
            spec.epoch_interval = EPOCH_INTERVAL;
            spec.redo_file_size_bytes = logs.redo_file_size_bytes;
            spec.transactions_max = limits.transactions;
            spec.operations_max = limits.operations;
            spec.scans_max = limits.scans;
            spec.max_buffered_epochs = limits.buffered_epochs;
        };
        let adapt = move |blocks: &mut Vec<BlockPlacement>| {
            if !no_claims {
                return;
            }
            let tcs: Vec<BlockRef> = blocks
                .iter()
                .map(|b| b.address)
                .filter(|a| a.block == BlockNumber::TRANSACTION_COORDINATOR)
                .collect();
            for tc in tcs {
                replace_block(blocks, tc, |real| Box::new(NoClaims(real)));
            }
        };
        let mut cluster = Cluster::wire(seed, placement, tune, adapt);
        cluster.sim.run_for(START_TIME);
        cluster
    }

    pub fn tc(&self) -> &TcBlock {
        self.tc_on(self.data_nodes[0])
    }

    pub fn master(&self) -> &Distribution {
        self.data_nodes
            .iter()
            .filter_map(|&n| self.sim.block::<Distribution>(Distribution::address(n)))
            .find(|d| d.is_master())
            .expect("a distribution master")
    }

    /// Creates the test table with `PARTITIONS` partitions and an ordered
    /// index on `v`, and reads its definition back.
    pub fn create_table(&mut self) -> TableDef {
        self.create_table_with(false)
    }

    /// `accounts`, with `READ_BACKUP` as asked.
    pub fn create_table_with(&mut self, read_backup: bool) -> TableDef {
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
        let table = self.create_table_def(table);
        assert_eq!(table.partitions, PARTITIONS);
        table
    }

    pub fn table(&self) -> &TableDef {
        self.table.as_ref().expect("created")
    }

    pub fn partition_of(&self, key: i64) -> u32 {
        let table = self.table();
        let mut bytes = Vec::new();
        KeyEncoder::distribution_key(table)
            .encode(&[Value::Int(key)], &mut bytes)
            .unwrap();
        partition_of(distribution_hash(&bytes), table.partitions)
    }

    pub fn batch(&self, ops: &[Op]) -> Vec<u8> {
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
                // Columns an alter added (NULL-able): NULL.
                for c in 3..table.columns.len() {
                    w.value(c as u16, Value::Null.as_ref());
                }
            }
            w.end().unwrap();
        }
        drop(w);
        out
    }

    /// Sends a request without waiting.
    pub fn submit(&mut self, tx: u64, flags: u32, ops: &[Op]) {
        let first = self.data_nodes[0];
        self.submit_to(first, tx, flags, ops);
    }

    /// `submit` through the TC of node `n`.
    pub fn submit_to(&mut self, n: NodeId, tx: u64, flags: u32, ops: &[Op]) {
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
    pub fn reply_within(&mut self, tx: u64, wait: Duration) -> Option<Reply> {
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

    pub fn take_reply(&mut self, tx: u64) -> Option<Reply> {
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

    pub fn execute(&mut self, tx: u64, flags: u32, ops: &[Op]) -> Reply {
        self.submit(tx, flags, ops);
        self.reply_within(tx, ANSWER_WAIT)
            .unwrap_or_else(|| panic!("transaction {tx:#x}: no reply"))
    }

    /// One whole transaction per key of `keys`, the op `op_of(k)`, all
    /// submitted before any is waited for (in flight together); each must
    /// commit in a GCI.
    pub fn commit_together(&mut self, keys: &[i64], op_of: impl Fn(i64) -> Op) {
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
    pub fn commit(&mut self, ops: &[Op]) -> Reply {
        let tx = self.tx_id();
        self.execute(tx, tc_flags::START | tc_flags::COMMIT, ops)
    }

    /// Committed reads of `keys`: the value of `v` of each, or `None`.
    pub fn read_values(&mut self, keys: &[i64]) -> Vec<Option<i64>> {
        let first = self.data_nodes[0];
        self.read_values_on(first, keys)
    }

    /// `read_values` through the TC of node `n`.
    pub fn read_values_on(&mut self, n: NodeId, keys: &[i64]) -> Vec<Option<i64>> {
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
    pub fn scan(&mut self, spec: &ScanSpec) -> Result<ScannedRows, (u32, String)> {
        self.scan_request(tc_flags::START, spec.to_bytes())
    }

    /// Runs a pushed join (`proto::QueryTree`) to its end: its joined rows.
    pub fn pushed_scan(&mut self, tree: &[u8]) -> Result<ScannedRows, (u32, String)> {
        self.scan_request(tc_flags::START | tc_flags::PUSHED, tree.to_vec())
    }

    /// Runs a `TcScanReq` of `flags` and `spec` to its end.
    pub fn scan_request(
        &mut self,
        flags: u32,
        spec: Vec<u8>,
    ) -> Result<ScannedRows, (u32, String)> {
        let tx = self.tx_id();
        let outcome = self.scan_in(tx, flags, spec);
        if self.tc().transactions_in_use() > 0 {
            // The scan's transaction: end it.
            let _ = self.execute(tx, tc_flags::ROLLBACK, &[]);
        }
        outcome.map(|(rows, batches, _)| (rows, batches))
    }

    /// Sends `TcScanReq` to the first data node's TC: that TC.
    fn send_scan_req(&mut self, tx: u64, scan_id: u32, flags: u32, spec: Vec<u8>) -> BlockRef {
        let tc = tc_of(self.data_nodes[0]);
        self.send(
            tc,
            SignalBody::TcScanReq {
                tx_id: tx,
                scan_id,
                flags,
                spec,
            },
        );
        tc
    }

    /// Starts a `TcScanReq` of `flags` and `spec` in transaction `tx`,
    /// closes it after its first batch, and says whether the close's answer
    /// released the transaction (`tc_flags::RELEASE`).
    pub fn scan_closed_early(&mut self, tx: u64, flags: u32, spec: Vec<u8>) -> bool {
        let scan_id = 9;
        let tc = self.send_scan_req(tx, scan_id, flags, spec);
        let until = self.sim.now() + ANSWER_WAIT * 4;
        let mut closed = false;
        loop {
            assert!(self.sim.now() < until, "scan of {tx:#x} does not end");
            self.sim.run_for(Duration::from_millis(1));
            for s in self.take() {
                match s.body {
                    SignalBody::TcScanConf {
                        tx_id,
                        done,
                        released,
                        ..
                    } if tx_id == tx => {
                        if done {
                            assert!(closed, "the scan ended before its close");
                            return released;
                        }
                        if !closed {
                            closed = true;
                            self.send(
                                tc,
                                SignalBody::TcScanNextReq {
                                    tx_id: tx,
                                    scan_id,
                                    close: true,
                                },
                            );
                        }
                    }
                    SignalBody::TcScanRef { tx_id, message, .. } if tx_id == tx => {
                        panic!("scan of {tx:#x} failed: {message}")
                    }
                    _ => {}
                }
            }
        }
    }

    /// Runs a `TcScanReq` of `flags` and `spec` in transaction `tx` to its
    /// end: its rows, batches, and whether its last batch said the
    /// transaction was released (`tc_flags::RELEASE`).
    pub fn scan_in(
        &mut self,
        tx: u64,
        flags: u32,
        spec: Vec<u8>,
    ) -> Result<ReleasedScan, (u32, String)> {
        let scan_id = 7;
        let tc = self.send_scan_req(tx, scan_id, flags, spec);
        let mut rows = Vec::new();
        let mut batches = 0;
        let mut released = false;
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
                        released: r,
                        ..
                    } if tx_id == tx => {
                        assert!(!r || done, "released only with the last batch");
                        released |= r;
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
        outcome.map(|()| (rows, batches, released))
    }

    pub fn full_scan_spec(&self) -> ScanSpec {
        full_scan_spec(self.table())
    }

    /// Every row as (id, v), by a full scan.
    pub fn scan_all(&mut self) -> BTreeMap<i64, i64> {
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
    pub fn check_idle(&self) {
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

pub fn int(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        other => panic!("not an integer: {other:?}"),
    }
}

pub fn decode_results(bytes: &[u8]) -> Vec<OpAnswer> {
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
pub fn committed(reply: &Reply) -> (u32, &[OpAnswer]) {
    let (epoch, answers) = committed_epoch(reply);
    (signal::epoch::hi(epoch), answers)
}

/// A commit's epoch and answers.
pub fn committed_epoch(reply: &Reply) -> (u64, &[OpAnswer]) {
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

pub fn started(seed: u64, limits: Limits) -> Cluster {
    let mut cluster = Cluster::start(seed, 1, limits);
    cluster.create_table();
    cluster
}

impl Cluster {
    /// The sum of one counter of every LDM instance's stats.
    pub fn ldm_total(&self, counter: impl Fn(&LdmStats) -> u64) -> u64 {
        self.data_nodes
            .iter()
            .flat_map(|&n| (0..LDM_INSTANCES).map(move |i| ldm_of(n, i)))
            .map(|at| counter(self.sim.block::<LdmBlock<SimDisk>>(at).unwrap().stats()))
            .sum()
    }

    /// `LdmKeyReq`s received by every LDM instance so far.
    pub fn key_requests(&self) -> u64 {
        self.ldm_total(|s| s.key_requests)
    }
}

impl Cluster {
    /// `LdmKeyCommitReq`s committed by every LDM instance so far.
    pub fn one_phase_commits(&self) -> u64 {
        self.ldm_total(|s| s.one_phase_commits)
    }
}

impl Cluster {
    /// The LDM instance of `key`'s partition on the first data node (a
    /// cluster of one node group of that node alone).
    pub fn instance_of(&self, key: i64) -> u32 {
        let placement = Placement::new(vec![vec![self.data_nodes[0]]], LDM_INSTANCES);
        placement.home(self.partition_of(key)).ldm_instance
    }

    /// `n` keys above 1 on the LDM instance of key 1: a transaction of
    /// them and key 1 goes whole to that instance.
    pub fn keys_beside_1(&self, n: usize) -> Vec<i64> {
        let instance = self.instance_of(1);
        (2..)
            .filter(|&k| self.instance_of(k) == instance)
            .take(n)
            .collect()
    }

    /// (TC reads handed to an LDM, `LdmReadReq`s the LDMs answered, TC
    /// commits) on node `n`.
    pub fn hand_offs(&self, n: NodeId) -> (u64, u64, u64) {
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
