//! Node restart in the deterministic simulator (docs/recovery.md, "Node
//! restart"): 2 data nodes × 2 replicas. One node crashes, writes commit
//! without it (updates, deletes, inserts), it restarts with its disk as it
//! was and catches up from the live replica while a client keeps writing;
//! then the OTHER node crashes and every committed write is read back from
//! the restarted one: the newest value of each row, and no row deleted
//! while it was down. The harness is the one of `failover.rs`.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use config::Placement;
use datanode::dictionary::{schema_dir, Dictionary, DictionaryConfig};
use datanode::distribution::{Distribution, DistributionConfig};
use datanode::ldm::{LdmBlock, LdmBlockConfig};
use datanode::membership::{Membership, MembershipConfig};
use datanode::tc::{TcBlock, TcConfig};
use kernel::simulator::Simulation;
use kernel::{Block, Context, Rng};
use proto::error::{self, ErrorClass};
use proto::ops::{LockMode, OpBatchWriter, OpHeader, OpKind, IGNORE_ERROR, NO_INDEX, NO_PARTITION};
use proto::results::ResultReader;
use signal::{tc_flags, BlockNumber, BlockRef, NodeId, Signal, SignalBody};
use storage::disk::SimDisk;
use storage::ldm::LdmConfig;
use storage::schema::{Column, ColumnType, TableDef, Value};

const API: NodeId = match NodeId::new(200) {
    Some(id) => id,
    None => unreachable!(),
};
const LDM_INSTANCES: u32 = 2;
const PARTITIONS: u32 = 8;
const GCP_INTERVAL: Duration = Duration::from_millis(50);
const DEADLOCK_TIMEOUT: Duration = Duration::from_millis(400);

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

struct Recorder {
    got: Arc<Mutex<Vec<Signal>>>,
}

impl Block for Recorder {
    fn execute(&mut self, signal: Signal, _ctx: &mut Context<'_>) {
        self.got.lock().unwrap().push(signal);
    }
}

struct Cluster {
    sim: Simulation,
    data_nodes: Vec<NodeId>,
    got: Arc<Mutex<Vec<Signal>>>,
    table: Option<TableDef>,
    next_tx: u64,
}

impl Cluster {
    /// `n` data nodes in groups of `replicas`, one TC and `LDM_INSTANCES`
    /// LDM instances each.
    fn start(seed: u64, n: u8, replicas: usize) -> Cluster {
        let mut sim = Simulation::new(seed);
        let data_nodes: Vec<NodeId> = (0..n).map(|i| node(2 + i)).collect();
        let groups: Vec<Vec<NodeId>> = data_nodes.chunks(replicas).map(<[_]>::to_vec).collect();
        let placement = Placement::new(groups.clone(), LDM_INSTANCES);
        for &id in &data_nodes {
            let disk = SimDisk::new(seed ^ u64::from(id.get()) << 32);
            let all = data_nodes.clone();
            let placement = placement.clone();
            let node_groups = groups.clone();
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
                    .with_local_tcs(vec![tc_of(id)])
                    .with_node_groups(node_groups.clone());
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
                        gcp_interval: GCP_INTERVAL,
                        tc_instances: 1,
                        ldm_instances: LDM_INSTANCES,
                    });
                    let tc = TcBlock::new(TcConfig {
                        node: id,
                        instance: 0,
                        placement: placement.clone(),
                        tc_instances: 1,
                        transactions_max: 256,
                        operations_max: 4_096,
                        scans_max: 8,
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
                        (tc_of(id), Box::new(tc)),
                    ];
                    for i in 0..LDM_INSTANCES {
                        let mut config = LdmConfig::new(i, format!("/data/ndb_{id}_fs/ldm{i}"));
                        config.data_memory_bytes = 16 << 20;
                        config.redo_file_size_bytes = 1 << 20;
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
        };
        cluster.sim.run_for(Duration::from_secs(2));
        cluster.create_table();
        cluster
    }

    fn live_nodes(&self) -> Vec<NodeId> {
        self.data_nodes
            .iter()
            .copied()
            .filter(|&n| self.sim.is_up(n))
            .collect()
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

    fn create_table(&mut self) {
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
                name: "accounts".into(),
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
    fn batch(&self, kind: OpKind, keys: &[i64], v: i64) -> Vec<u8> {
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
    fn answers(&self) -> Vec<(u64, Result<u32, u32>)> {
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
    fn run_one(&mut self, flags: u32, ops: Vec<u8>) -> (Result<u32, u32>, Vec<u8>) {
        let tx_id = self.tx_id();
        let tc = tc_of(self.live_nodes()[0]);
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
    fn read(&mut self, keys: &[i64]) -> Vec<Option<i64>> {
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

/// Rows written before the crash.
const ROWS: i64 = 300;
/// Most simulated time the restarted node may take to catch up.
const CATCH_UP_MAX: Duration = Duration::from_secs(20);

/// Commits `kind` of `keys` with value `v` on the TC of `tc`, retrying
/// temporary errors (a starting node's TC refuses until it knows the
/// node states); records the outcome in `model`.
fn commit(
    cluster: &mut Cluster,
    model: &mut BTreeMap<i64, Option<i64>>,
    tc: NodeId,
    kind: OpKind,
    keys: &[i64],
    v: i64,
) {
    for _ in 0..50 {
        let ops = cluster.batch(kind, keys, v);
        let tx_id = cluster.tx_id();
        cluster.send(
            tc_of(tc),
            SignalBody::TcKeyReq {
                tx_id,
                flags: tc_flags::START | tc_flags::COMMIT,
                ops,
            },
        );
        let until = cluster.sim.now() + Duration::from_secs(3);
        let mut outcome = None;
        while cluster.sim.now() < until && outcome.is_none() {
            cluster.sim.run_for(Duration::from_millis(1));
            outcome = cluster
                .answers()
                .into_iter()
                .find(|(t, _)| *t == tx_id)
                .map(|(_, o)| o);
        }
        match outcome {
            Some(Ok(flags)) => {
                assert_eq!(flags, tc_flags::COMMITTED);
                for &k in keys {
                    model.insert(k, (kind != OpKind::Delete).then_some(v));
                }
                return;
            }
            Some(Err(code)) => {
                assert_eq!(
                    error::class(code),
                    ErrorClass::Temporary,
                    "{kind:?} of {keys:?} on {tc}: error {code}"
                );
                cluster.sim.run_for(Duration::from_millis(20));
            }
            None => {
                let mut state = String::new();
                for n in cluster.live_nodes() {
                    let d = cluster
                        .sim
                        .block::<Distribution>(Distribution::address(n))
                        .unwrap();
                    state += &format!("\nnode {n}: states {:?}", d.node_states());
                    for i in 0..LDM_INSTANCES {
                        let l = cluster
                            .sim
                            .block::<LdmBlock<SimDisk>>(ldm_of(n, i))
                            .unwrap();
                        state += &format!(
                            "\n  ldm {i}: open {} starting {} txs {} held {} copies out {} {:?}",
                            l.is_open(),
                            l.is_starting(),
                            l.transactions(),
                            l.requests_held(),
                            l.copies_out(),
                            l.stats()
                        );
                    }
                    let t = cluster.sim.block::<TcBlock>(tc_of(n)).unwrap();
                    state += &format!("\n  tc: txs {}", t.transactions_in_use());
                }
                panic!("{kind:?} of {keys:?} on {tc}: no answer{state}")
            }
        }
    }
    panic!("{kind:?} of {keys:?} on {tc}: refused 50 times");
}

fn serving(cluster: &Cluster, n: NodeId) -> bool {
    (0..LDM_INSTANCES).all(|i| {
        cluster
            .sim
            .block::<LdmBlock<SimDisk>>(ldm_of(n, i))
            .is_some_and(|l| l.is_open() && !l.is_starting())
    }) && cluster
        .live_nodes()
        .iter()
        .filter_map(|&m| cluster.sim.block::<Distribution>(Distribution::address(m)))
        .all(|d| d.node_states().is_some_and(|s| s.serving.contains(n)))
}

/// The scenario; returns how many writes ran while the node caught up.
fn restart_catches_up(seed: u64) -> usize {
    let mut cluster = Cluster::start(seed, 2, 2);
    let mut rng = Rng::seeded(seed);
    let mut model = BTreeMap::new();
    let (first, victim) = (node(2), node(3));
    let keys: Vec<i64> = (0..ROWS).collect();
    for chunk in keys.chunks(50) {
        commit(&mut cluster, &mut model, first, OpKind::Insert, chunk, 0);
    }
    cluster.sim.run_for(Duration::from_millis(300));
    cluster.sim.crash(victim);
    cluster.sim.run_for(Duration::from_millis(500));
    // While it is down: updates, deletes, inserts.
    for k in (0..100).step_by(10) {
        let chunk: Vec<i64> = (k..k + 10).collect();
        commit(&mut cluster, &mut model, first, OpKind::Update, &chunk, 1);
    }
    let deleted: Vec<i64> = (100..150).collect();
    commit(&mut cluster, &mut model, first, OpKind::Delete, &deleted, 0);
    let inserted: Vec<i64> = (ROWS..ROWS + 50).collect();
    commit(
        &mut cluster,
        &mut model,
        first,
        OpKind::Insert,
        &inserted,
        1,
    );
    cluster.sim.run_for(Duration::from_millis(300));
    cluster.sim.restart(victim);
    // The client keeps writing, through both TCs (the restarted one's once
    // the client's connection to it is back), while it catches up.
    let reconnected = cluster.sim.now() + Duration::from_millis(500);
    let until = cluster.sim.now() + CATCH_UP_MAX;
    let mut writes = 0;
    let mut after = 0;
    while after < 20 {
        assert!(
            cluster.sim.now() < until,
            "seed {seed}: node {victim} does not catch up"
        );
        let tc = if rng.next_u64().is_multiple_of(3) && cluster.sim.now() > reconnected {
            victim
        } else {
            first
        };
        let k = (rng.next_u64() % (ROWS as u64 + 50)) as i64;
        let v = 100 + writes as i64;
        let exists = model.get(&k).copied().flatten().is_some();
        match rng.next_u64() % 4 {
            0 if exists => commit(&mut cluster, &mut model, tc, OpKind::Delete, &[k], 0),
            _ => commit(&mut cluster, &mut model, tc, OpKind::Write, &[k], v),
        }
        writes += 1;
        if serving(&cluster, victim) {
            after += 1;
        }
    }
    cluster.sim.run_for(Duration::from_millis(300));
    // The other node crashes: everything reads back from the restarted one.
    cluster.sim.crash(first);
    cluster.sim.run_for(Duration::from_secs(2));
    assert_eq!(cluster.live_nodes(), vec![victim]);
    let all: Vec<i64> = (0..ROWS + 50).collect();
    let values = cluster.read(&all);
    for (&k, got) in all.iter().zip(&values) {
        let want = model.get(&k).copied().flatten();
        assert_eq!(
            *got, want,
            "seed {seed}: key {k} on the restarted node {victim}"
        );
    }
    for i in 0..LDM_INSTANCES {
        let ldm = cluster
            .sim
            .block::<LdmBlock<SimDisk>>(ldm_of(victim, i))
            .unwrap();
        assert_eq!(ldm.copies_out(), 0, "seed {seed}: copies left");
    }
    writes
}

#[test]
fn a_restarted_node_catches_up_before_it_serves() {
    let mut writes = 0;
    for seed in 1..=3 {
        writes += restart_catches_up(seed);
    }
    assert!(writes > 60, "writes ran while the node caught up: {writes}");
}
