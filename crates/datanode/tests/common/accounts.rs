//! The calls of the node failure and restart tests on the shared
//! [`Cluster`]: one table `accounts (id BIGINT, v BIGINT)`, batches of key
//! operations on it, one request to its answer, committed reads.
#![allow(dead_code)] // each test file uses its own part

use crate::common::*;

/// The simulator's: fast GCPs make short runs cover many.
pub const GCP_INTERVAL: Duration = Duration::from_millis(50);

impl Cluster {
    /// `n` data nodes in groups of `replicas`, one TC and `LDM_INSTANCES`
    /// LDM instances each, started, with the `accounts` table.
    pub fn start(seed: u64, n: u8, replicas: usize) -> Cluster {
        let data_nodes: Vec<NodeId> = (0..n).map(|i| node(2 + i)).collect();
        let groups: Vec<Vec<NodeId>> = data_nodes.chunks(replicas).map(<[_]>::to_vec).collect();
        let placement = Placement::new(groups, LDM_INSTANCES);
        let mut cluster = Cluster::wire(
            seed,
            placement,
            |spec| spec.gcp_interval = GCP_INTERVAL,
            |_| {},
        );
        cluster.sim.run_for(START_TIME);
        cluster.create_table();
        cluster
    }

    /// Creates `accounts (id BIGINT, v BIGINT NULL)` with `PARTITIONS`
    /// partitions.
    pub fn create_table(&mut self) {
        let table = TableDef::new(
            "accounts",
            0,
            vec![
                Column::new("id", ColumnType::BigInt { unsigned: false }),
                Column::new("v", ColumnType::BigInt { unsigned: false }).nullable(),
            ],
        )
        .primary_key(vec![0])
        .partitions(PARTITIONS);
        self.create_table_def(table);
    }

    /// An op batch: `kind` on each key with value `v` (reads: committed,
    /// ignoring a missing row).
    pub fn batch(&self, kind: OpKind, keys: &[i64], v: i64) -> Vec<u8> {
        let table = self.table.as_ref().expect("created");
        let mut out = Vec::new();
        let mut w = OpBatchWriter::new(&mut out);
        for (i, &key) in keys.iter().enumerate() {
            let read = kind == OpKind::Read;
            w.begin(&OpHeader {
                op_index: i as u32,
                table_id: table.id,
                table_version: table.version,
                index_id: NO_INDEX,
                partition: NO_PARTITION,
                kind,
                lock: if read {
                    LockMode::Committed
                } else {
                    LockMode::Exclusive
                },
                flags: if read { IGNORE_ERROR } else { 0 },
            });
            w.key(Value::Int(key).as_ref());
            if !read && kind != OpKind::Delete {
                w.value(1, Value::Int(v).as_ref());
            }
            w.end().unwrap();
        }
        drop(w);
        out
    }

    /// Takes the answers to key requests that came: (tx, Ok(flags) or
    /// Err(code)).
    pub fn answers(&self) -> Vec<(u64, Result<u32, u32>)> {
        let mut got = self.got.lock().unwrap();
        let mut out = Vec::new();
        got.retain(|s| match &s.body {
            SignalBody::TcKeyConf { tx_id, flags, .. } => {
                out.push((*tx_id, Ok(*flags)));
                false
            }
            SignalBody::TcKeyRef { tx_id, code, .. } => {
                out.push((*tx_id, Err(*code)));
                false
            }
            _ => true,
        });
        out
    }

    /// Runs one request on a live TC to its answer.
    pub fn run_one(&mut self, flags: u32, ops: Vec<u8>) -> (Result<u32, u32>, Vec<u8>) {
        let node = self.live_nodes()[0];
        self.run_one_on(node, flags, ops)
    }

    /// Whether data node `n` serves: its LDM instances are open and done
    /// starting, and every live node's distribution block counts it serving.
    pub fn serving(&self, n: NodeId) -> bool {
        (0..LDM_INSTANCES).all(|i| {
            self.sim
                .block::<LdmBlock<SimDisk>>(ldm_of(n, i))
                .is_some_and(|l| l.is_open() && !l.is_starting())
        }) && self
            .live_nodes()
            .iter()
            .filter_map(|&m| self.sim.block::<Distribution>(Distribution::address(m)))
            .all(|d| d.node_states().is_some_and(|s| s.serving.contains(n)))
    }

    /// Runs one request on the TC of data node `node` to its answer.
    pub fn run_one_on(
        &mut self,
        node: NodeId,
        flags: u32,
        ops: Vec<u8>,
    ) -> (Result<u32, u32>, Vec<u8>) {
        let tx_id = self.tx_id();
        let tc = tc_of(node);
        self.send(tc, SignalBody::TcKeyReq { tx_id, flags, ops });
        let until = self.sim.now() + Duration::from_secs(3);
        while self.sim.now() < until {
            self.sim.run_for(Duration::from_millis(1));
            let mut got = self.got.lock().unwrap();
            if let Some(at) = got.iter().position(|s| {
                matches!(s.body, SignalBody::TcKeyConf { tx_id: t, .. } | SignalBody::TcKeyRef { tx_id: t, .. } if t == tx_id)
            }) {
                return match got.remove(at).body {
                    SignalBody::TcKeyConf { flags, results, .. } => (Ok(flags), results),
                    SignalBody::TcKeyRef { code, .. } => (Err(code), Vec::new()),
                    _ => unreachable!(),
                };
            }
        }
        panic!("transaction {tx_id:#x} on {tc}: no answer");
    }

    /// Committed reads of `keys`: the value of each, or `None`.
    pub fn read(&mut self, keys: &[i64]) -> Vec<Option<i64>> {
        let ops = self.batch(OpKind::Read, keys, 0);
        let (outcome, results) = self.run_one(tc_flags::START | tc_flags::COMMIT, ops);
        assert_eq!(outcome, Ok(tc_flags::COMMITTED), "reads of {keys:?}");
        let reader = ResultReader::new(&results).expect("a valid result batch");
        reader
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
}
