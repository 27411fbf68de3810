//! The simulated cluster of the node failure and node restart tests: real
//! membership, dictionary, distribution, TC and LDM blocks on each data node
//! (simulated disks), an API node whose block records every answer, one
//! table `accounts (id BIGINT, v BIGINT)`, and the calls the tests make
//! (batches, one request to its answer, committed reads). The data nodes
//! are built by the library's whole-cluster harness
//! (`datanode::simulation::cluster::data_node_blocks`), so these tests and
//! `skarv sim` run one node wiring.
#![allow(dead_code, unused_imports)] // each test file uses its own part

pub use std::collections::BTreeMap;
pub use std::sync::{Arc, Mutex};
pub use std::time::Duration;

pub use config::Placement;
pub use datanode::distribution::Distribution;
pub use datanode::ldm::LdmBlock;
pub use datanode::simulation::cluster::{add_data_nodes, data_node_blocks, WholeSpec};
pub use datanode::tc::TcBlock;
pub use kernel::simulator::Simulation;
pub use kernel::{Block, Context, Rng};
pub use proto::error::{self, ErrorClass};
pub use proto::ops::{
    LockMode, OpBatchWriter, OpHeader, OpKind, IGNORE_ERROR, NO_INDEX, NO_PARTITION,
};
pub use proto::results::ResultReader;
pub use schema::{Column, ColumnType, TableDef, Value};
pub use signal::{tc_flags, BlockNumber, BlockRef, NodeId, Signal, SignalBody};
pub use storage::disk::SimDisk;
pub use storage::ldm::LdmConfig;

pub const API: NodeId = match NodeId::new(200) {
    Some(id) => id,
    None => unreachable!(),
};
pub const LDM_INSTANCES: u32 = 2;
pub const PARTITIONS: u32 = 8;
pub const GCP_INTERVAL: Duration = Duration::from_millis(50);
pub const DEADLOCK_TIMEOUT: Duration = Duration::from_millis(400);

pub fn node(n: u8) -> NodeId {
    NodeId::new(n).unwrap()
}

pub fn api() -> BlockRef {
    BlockRef::new(API, BlockNumber::API_CLUSTER, 0)
}

pub fn tc_of(n: NodeId) -> BlockRef {
    BlockRef::new(n, BlockNumber::TRANSACTION_COORDINATOR, 0)
}

pub fn ldm_of(n: NodeId, i: u32) -> BlockRef {
    BlockRef::new(n, BlockNumber::LOCAL_DATA_MANAGER, i as u16)
}

pub struct Recorder {
    pub got: Arc<Mutex<Vec<Signal>>>,
}

impl Block for Recorder {
    fn execute(&mut self, signal: Signal, _ctx: &mut Context<'_>) {
        self.got.lock().unwrap().push(signal);
    }
}

pub struct Cluster {
    pub sim: Simulation,
    pub data_nodes: Vec<NodeId>,
    pub groups: Vec<Vec<NodeId>>,
    /// Each data node's disk (crash it after the node to lose what was
    /// not synced).
    pub disks: BTreeMap<NodeId, SimDisk>,
    pub got: Arc<Mutex<Vec<Signal>>>,
    pub table: Option<TableDef>,
    pub next_tx: u64,
}

impl Cluster {
    /// `n` data nodes in groups of `replicas`, one TC and `LDM_INSTANCES`
    /// LDM instances each.
    pub fn start(seed: u64, n: u8, replicas: usize) -> Cluster {
        let mut sim = Simulation::new(seed);
        let data_nodes: Vec<NodeId> = (0..n).map(|i| node(2 + i)).collect();
        let groups: Vec<Vec<NodeId>> = data_nodes.chunks(replicas).map(<[_]>::to_vec).collect();
        let placement = Placement::new(groups.clone(), LDM_INSTANCES);
        // The data nodes are the whole-cluster scenario's, without an
        // arbitrator (a tie goes on) and with this file's timings.
        let spec = WholeSpec {
            data_nodes: n,
            replicas: replicas as u8,
            ldm_instances: LDM_INSTANCES,
            partitions: PARTITIONS,
            gcp_interval: GCP_INTERVAL,
            heartbeat_interval: Duration::from_millis(500),
            api_heartbeat_interval: Duration::from_millis(300),
            start_partial_timeout: Duration::from_secs(3),
            deadlock_timeout: DEADLOCK_TIMEOUT,
            ..WholeSpec::default()
        };
        let mut disks = BTreeMap::new();
        for &id in &data_nodes {
            let disk = SimDisk::new(seed ^ u64::from(id.get()) << 32);
            disks.insert(id, disk);
        }
        add_data_nodes(
            &mut sim,
            seed,
            &spec,
            &data_nodes,
            &groups,
            &placement,
            &disks,
            None,
        );
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
            groups,
            disks,
            got,
            table: None,
            next_tx: (u64::from(API.get()) << 48) | 1,
        };
        cluster.sim.run_for(Duration::from_secs(2));
        cluster.create_table();
        cluster
    }

    pub fn live_nodes(&self) -> Vec<NodeId> {
        self.data_nodes
            .iter()
            .copied()
            .filter(|&n| self.sim.is_up(n))
            .collect()
    }

    pub fn send(&mut self, to: BlockRef, body: SignalBody) {
        self.sim.inject(Signal {
            receiver: to,
            sender: api(),
            body,
        });
    }

    pub fn tx_id(&mut self) -> u64 {
        self.next_tx += 1;
        self.next_tx
    }

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

    /// Creates `table` (columns `id` BIGINT key, `v` BIGINT NULL, as
    /// [`Cluster::batch`] writes them) and makes it the table of later
    /// batches.
    pub fn create_table_def(&mut self, table: TableDef) {
        let name = table.name.clone();
        let dict = BlockRef::new(self.data_nodes[0], BlockNumber::DICTIONARY, 0);
        self.send(
            dict,
            SignalBody::DictCreateTableReq {
                request_id: 1,
                table: table.to_bytes(),
            },
        );
        self.sim.run_for(Duration::from_millis(300));
        self.send(
            dict,
            SignalBody::DictGetTableReq {
                request_id: 2,
                table_id: 0,
                name,
            },
        );
        self.sim.run_for(Duration::from_millis(20));
        let table = std::mem::take(&mut *self.got.lock().unwrap())
            .into_iter()
            .find_map(|s| match s.body {
                SignalBody::DictGetTableConf { group, .. } => {
                    Some(TableDef::decode(&group.tables[0]).unwrap())
                }
                _ => None,
            })
            .expect("the table is created");
        self.table = Some(table);
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
