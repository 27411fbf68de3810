//! The simulated cluster that the datanode tests share: data nodes wired
//! by `datanode::wiring` (the blocks a real node runs, with simulated
//! disks and this harness's timings), an API node whose [`Recorder`] keeps
//! every answer, and the plumbing every test needs (send, take the answers,
//! create a table). A test tunes each node's spec, leaves out blocks it
//! plays itself, or replaces blocks (`Cluster::wire`).
//!
//! The tests of one subject add their calls to [`Cluster`] in a module of
//! their own beside this one, which their files include by path:
//! `accounts.rs` (the node failure and restart tests: one `accounts`
//! table, batches of key operations) and `transactions.rs` (the TC tests:
//! operations checked against a model, scans, unique indexes).
#![allow(dead_code, unused_imports)] // each test file uses its own part

pub use std::collections::BTreeMap;
pub use std::sync::{Arc, Mutex};
pub use std::time::Duration;

pub use config::Placement;
pub use datanode::distribution::Distribution;
pub use datanode::ldm::LdmBlock;
pub use datanode::simulation::add_data_node;
pub use datanode::tc::TcBlock;
pub use datanode::wiring::{replace_block, NodeSpec};
pub use kernel::runtime::BlockPlacement;
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
pub use storage::instance::LdmConfig;

pub const API: NodeId = match NodeId::new(200) {
    Some(id) => id,
    None => unreachable!(),
};
pub const LDM_INSTANCES: u32 = 2;
pub const PARTITIONS: u32 = 8;
pub const DEADLOCK_TIMEOUT: Duration = Duration::from_millis(400);
/// Simulated time the data nodes get to start and agree on a view.
pub const START_TIME: Duration = Duration::from_secs(2);

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

/// The API node's block: records every signal that comes.
pub struct Recorder {
    pub got: Arc<Mutex<Vec<Signal>>>,
}

impl Block for Recorder {
    fn execute(&mut self, signal: Signal, _ctx: &mut Context<'_>) {
        self.got.lock().unwrap().push(signal);
    }
}

/// Data node `id` of `placement` as this harness runs it: the simulator's
/// node ([`NodeSpec::simulated`]) with the slower heartbeats and start
/// timeout that these tests' timings were written for.
pub fn harness_spec(id: NodeId, placement: &Placement) -> NodeSpec {
    NodeSpec {
        heartbeat_interval: Duration::from_millis(500),
        api_heartbeat_interval: Duration::from_millis(300),
        start_partial_timeout: Duration::from_secs(3),
        deadlock_timeout: DEADLOCK_TIMEOUT,
        ..NodeSpec::simulated(id, placement.clone())
    }
}

pub struct Cluster {
    pub sim: Simulation,
    pub data_nodes: Vec<NodeId>,
    pub groups: Vec<Vec<NodeId>>,
    pub placement: Placement,
    /// Each data node's disk (crash it after the node to lose what was
    /// not synced).
    pub disks: BTreeMap<NodeId, SimDisk>,
    /// What the API node's [`Recorder`] got.
    pub got: Arc<Mutex<Vec<Signal>>>,
    /// The table of later requests, once created.
    pub table: Option<TableDef>,
    pub next_tx: u64,
    pub next_request: u32,
}

impl Cluster {
    /// The data nodes of `placement`, each incarnation wired from
    /// [`harness_spec`] changed by `tune`, its blocks then handed to
    /// `adapt` (to replace some, [`replace_block`]); and the API node.
    /// Nothing has run yet.
    pub fn wire(
        seed: u64,
        placement: Placement,
        tune: impl Fn(&mut NodeSpec),
        adapt: impl FnMut(&mut Vec<BlockPlacement>) + Clone + 'static,
    ) -> Cluster {
        let mut sim = Simulation::new(seed);
        let groups = placement.node_groups().to_vec();
        let data_nodes: Vec<NodeId> = groups.iter().flatten().copied().collect();
        let mut disks = BTreeMap::new();
        for &id in &data_nodes {
            let disk = SimDisk::new(seed ^ u64::from(id.get()) << 32);
            disks.insert(id, disk.clone());
            let mut spec = harness_spec(id, &placement);
            tune(&mut spec);
            add_data_node(&mut sim, seed, spec, disk, adapt.clone());
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
        Cluster {
            sim,
            data_nodes,
            groups,
            placement,
            disks,
            got,
            table: None,
            next_tx: (u64::from(API.get()) << 48) | 1,
            next_request: 1,
        }
    }

    /// Takes every signal the API node got so far.
    pub fn take(&self) -> Vec<Signal> {
        std::mem::take(&mut *self.got.lock().unwrap())
    }

    pub fn request_id(&mut self) -> u32 {
        let request_id = self.next_request;
        self.next_request += 1;
        request_id
    }

    pub fn tc_on(&self, n: NodeId) -> &TcBlock {
        self.sim.block::<TcBlock>(tc_of(n)).expect("the TC is up")
    }

    pub fn ldm_on(&self, n: NodeId, instance: u32) -> &LdmBlock<SimDisk> {
        self.sim
            .block::<LdmBlock<SimDisk>>(ldm_of(n, instance))
            .unwrap_or_else(|| panic!("node {n} LDM {instance} is down"))
    }

    /// Creates `table` through the dictionary of the first data node,
    /// reads its definition back by name and makes it the table of later
    /// requests.
    pub fn create_table_def(&mut self, table: TableDef) -> TableDef {
        let table = self.create_table_group(table).swap_remove(0);
        self.table = Some(table.clone());
        table
    }

    /// Creates `table` through the dictionary of the first data node and
    /// reads back by name its group: the table, then the hidden tables
    /// derived from it (unique indexes, blob parts).
    pub fn create_table_group(&mut self, table: TableDef) -> Vec<TableDef> {
        let name = table.name.clone();
        let request_id = self.request_id();
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
            answers.iter().any(|s| matches!(
                s.body,
                SignalBody::DictCreateTableConf { request_id: r, .. } if r == request_id
            )),
            "create answered: {answers:?}"
        );
        self.send(
            dict,
            SignalBody::DictGetTableReq {
                request_id,
                table_id: 0,
                name,
            },
        );
        self.sim.run_for(Duration::from_millis(20));
        self.take()
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
            .expect("the table is found by name")
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
}

/// A committed full scan of `table` in batches of 16 rows.
pub fn full_scan_spec(table: &TableDef) -> proto::ScanSpec {
    proto::ScanSpec {
        table_id: table.id,
        table_version: table.version,
        index_id: NO_INDEX,
        lower: None,
        upper: None,
        more_ranges: Vec::new(),
        descending: false,
        lock: LockMode::Committed,
        lock_wait: proto::LockWait::Wait,
        partition: NO_PARTITION,
        batch_rows: 16,
        projection: Vec::new(),
        filter: None,
        key_info: false,
        stats: false,
        partitions: Vec::new(),
        distinct_prefix: 0,
        count: false,
        aggregates: Vec::new(),
        group_by: Vec::new(),
    }
}
