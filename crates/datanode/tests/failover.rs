//! Data node failure in the deterministic simulator (docs/transactions.md,
//! "Node failure"): real membership, dictionary, distribution, TC and LDM
//! blocks; an API node runs transactions through the TCs of the live nodes
//! while one data node crashes at a random moment, for many seeds.
//!
//! Each transaction `i` inserts two fresh rows, keys `2i` and `2i + 1`, with
//! value `i`: in one request that commits, or in two (the second commits),
//! so that failures find transactions idle, executing and committing. A
//! transaction refused with a temporary error is retried (new id, same
//! rows) on a live TC and must commit; one whose TC crashed under it has an
//! unknown outcome. The checks at the end: every transaction seen committed
//! is read back with its value, every one refused left nothing (its retry's
//! inserts succeed), every one with an unknown outcome is all there or all
//! gone; no lock is left (a write to every key commits at once); no record
//! is left in TCs and LDMs; the replicas of a node group that are both up
//! hold the same rows; no takeover is pending.

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
/// Transactions of one run, and how many are in flight at once.
const TRANSACTIONS: u64 = 40;
const IN_FLIGHT_MAX: usize = 6;
/// Retries of a transaction refused with a temporary error.
const RETRIES_MAX: u32 = 5;
/// Longest a run may take in simulated time.
const RUN_MAX: Duration = Duration::from_secs(20);

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
    groups: Vec<Vec<NodeId>>,
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
            groups,
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
            if !read {
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

/// Where one transaction of the workload stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// Not sent yet (or to be retried).
    Waiting,
    /// Its first request (of two) is at `tc`.
    First {
        tc: NodeId,
        tx_id: u64,
    },
    /// Its committing request is at `tc`.
    Committing {
        tc: NodeId,
        tx_id: u64,
    },
    Committed,
    /// Its TC crashed while it committed: all or nothing.
    Unknown,
}

/// One run: `n` nodes in groups of `replicas`, one crashed at a random
/// moment of the workload.
/// What a run went through: (outcomes unknown, transactions retried,
/// aborted by the failure, taken over).
type RunStats = (usize, usize, u64, u64);

fn crash_during_workload(seed: u64, n: u8, replicas: usize) -> RunStats {
    let mut cluster = Cluster::start(seed, n, replicas);
    let mut rng = Rng::seeded(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let victim = cluster.data_nodes[(rng.next_u64() % u64::from(n)) as usize];
    // The crash comes after a random number of answers, a random number
    // of simulated microseconds after the last of them.
    let crash_after = rng.next_u64() % (TRANSACTIONS - 4);
    let crash_delay = Duration::from_micros(rng.next_u64() % 1_000);
    let mut answered = 0u64;
    let mut crash_at = None;
    let mut crashed = false;
    let mut stages = vec![Stage::Waiting; TRANSACTIONS as usize];
    let two_requests: Vec<bool> = (0..TRANSACTIONS)
        .map(|_| rng.next_u64().is_multiple_of(2))
        .collect();
    let mut retries = vec![0u32; TRANSACTIONS as usize];
    let mut by_tx: BTreeMap<u64, usize> = BTreeMap::new();
    let until = cluster.sim.now() + RUN_MAX;
    loop {
        if !crashed && crash_at.is_some_and(|at| cluster.sim.now() >= at) {
            cluster.sim.crash(victim);
            crashed = true;
            // The client sees the connection close: what it had in flight
            // on the victim's TC has no answer coming.
            for stage in stages.iter_mut() {
                match *stage {
                    Stage::First { tc, .. } if tc == victim => *stage = Stage::Waiting,
                    Stage::Committing { tc, .. } if tc == victim => *stage = Stage::Unknown,
                    _ => {}
                }
            }
        }
        for (tx_id, outcome) in cluster.answers() {
            let Some(&i) = by_tx.get(&tx_id) else {
                continue;
            };
            answered += 1;
            if answered >= crash_after && crash_at.is_none() {
                crash_at = Some(cluster.sim.now() + crash_delay);
            }
            stages[i] = match (stages[i], outcome) {
                (Stage::First { tc, tx_id }, Ok(0)) => {
                    let ops = cluster.batch(OpKind::Insert, &[2 * i as i64 + 1], i as i64);
                    cluster.send(
                        tc_of(tc),
                        SignalBody::TcKeyReq {
                            tx_id,
                            flags: tc_flags::COMMIT,
                            ops,
                        },
                    );
                    Stage::Committing { tc, tx_id }
                }
                (Stage::Committing { .. }, Ok(flags)) => {
                    assert_eq!(flags, tc_flags::COMMITTED, "transaction {i} committed");
                    Stage::Committed
                }
                (Stage::First { .. } | Stage::Committing { .. }, Err(code)) => {
                    assert_eq!(
                        error::class(code),
                        ErrorClass::Temporary,
                        "seed {seed}: transaction {i} failed with {code}, not a temporary error"
                    );
                    retries[i] += 1;
                    assert!(
                        retries[i] <= RETRIES_MAX,
                        "seed {seed}: transaction {i} failed {RETRIES_MAX} times, last {code}"
                    );
                    Stage::Waiting
                }
                // An answer from a TC already given up on.
                (stage, _) => stage,
            };
        }
        let in_flight = stages
            .iter()
            .filter(|s| matches!(s, Stage::First { .. } | Stage::Committing { .. }))
            .count();
        if crash_after == 0 && crash_at.is_none() {
            crash_at = Some(cluster.sim.now() + crash_delay);
        }
        let mut free = IN_FLIGHT_MAX.saturating_sub(in_flight);
        for i in 0..TRANSACTIONS as usize {
            if free == 0 {
                break;
            }
            if stages[i] != Stage::Waiting {
                continue;
            }
            free -= 1;
            let live = cluster.live_nodes();
            let tc = live[(rng.next_u64() % live.len() as u64) as usize];
            let tx_id = cluster.tx_id();
            by_tx.insert(tx_id, i);
            let (keys, flags, stage) = if two_requests[i] {
                (
                    vec![2 * i as i64],
                    tc_flags::START,
                    Stage::First { tc, tx_id },
                )
            } else {
                (
                    vec![2 * i as i64, 2 * i as i64 + 1],
                    tc_flags::START | tc_flags::COMMIT,
                    Stage::Committing { tc, tx_id },
                )
            };
            let ops = cluster.batch(OpKind::Insert, &keys, i as i64);
            cluster.send(tc_of(tc), SignalBody::TcKeyReq { tx_id, flags, ops });
            stages[i] = stage;
        }
        let done = stages
            .iter()
            .all(|s| matches!(s, Stage::Committed | Stage::Unknown));
        if done && crashed {
            break;
        }
        assert!(
            cluster.sim.now() < until,
            "seed {seed}: the workload does not end: {stages:?}"
        );
        cluster.sim.run_for(Duration::from_micros(100));
    }
    // Takeover and GCPs settle.
    cluster.sim.run_for(Duration::from_secs(1));
    let (mut aborts, mut taken) = (0, 0);
    for n in cluster.live_nodes() {
        let c = cluster.sim.block::<TcBlock>(tc_of(n)).unwrap().counters();
        aborts += c.node_failure_aborts;
        taken += c.taken_over;
    }
    check(&mut cluster, seed, &stages);
    (
        stages.iter().filter(|s| **s == Stage::Unknown).count(),
        retries.iter().filter(|r| **r > 0).count(),
        aborts,
        taken,
    )
}

fn check(cluster: &mut Cluster, seed: u64, stages: &[Stage]) {
    let keys: Vec<i64> = (0..2 * TRANSACTIONS as i64).collect();
    let values = cluster.read(&keys);
    for (i, stage) in stages.iter().enumerate() {
        let (a, b) = (values[2 * i], values[2 * i + 1]);
        match stage {
            Stage::Committed => assert_eq!(
                (a, b),
                (Some(i as i64), Some(i as i64)),
                "seed {seed}: committed transaction {i} reads back"
            ),
            Stage::Unknown => assert!(
                (a, b) == (Some(i as i64), Some(i as i64)) || (a, b) == (None, None),
                "seed {seed}: transaction {i} whose TC died is all or nothing: {a:?} {b:?}"
            ),
            other => panic!("seed {seed}: transaction {i} ended as {other:?}"),
        }
    }
    // No lock is left: a write of every key commits at once.
    let ops = cluster.batch(OpKind::Write, &keys, -1);
    let (outcome, _) = cluster.run_one(tc_flags::START | tc_flags::COMMIT, ops);
    assert_eq!(
        outcome,
        Ok(tc_flags::COMMITTED),
        "seed {seed}: every key is writable"
    );
    cluster.sim.run_for(Duration::from_millis(200));
    let live = cluster.live_nodes();
    for &n in &live {
        let tc = cluster.sim.block::<TcBlock>(tc_of(n)).unwrap();
        assert_eq!(
            tc.transactions_in_use(),
            0,
            "seed {seed}: node {n}: transactions left"
        );
        assert_eq!(
            tc.operations_in_use(),
            0,
            "seed {seed}: node {n}: operations left"
        );
        let dist = cluster
            .sim
            .block::<Distribution>(Distribution::address(n))
            .unwrap();
        assert!(
            dist.takeover_pending().is_empty(),
            "seed {seed}: node {n}: takeover of {:?} pending",
            dist.takeover_pending()
        );
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
            assert_eq!(
                ldm.scans_open(),
                0,
                "seed {seed}: node {n} LDM {i}: scans left"
            );
            assert_eq!(ldm.commits_forgotten(), 0);
        }
    }
    // Replicas of a group that are both up hold the same rows.
    for group in &cluster.groups {
        let up: Vec<NodeId> = group.iter().copied().filter(|n| live.contains(n)).collect();
        assert!(!up.is_empty(), "seed {seed}: group {group:?} lost");
        let rows = |n: NodeId| -> Vec<(u32, u64)> {
            let mut rows = Vec::new();
            for i in 0..LDM_INSTANCES {
                let ldm = cluster
                    .sim
                    .block::<LdmBlock<SimDisk>>(ldm_of(n, i))
                    .unwrap();
                let storage = ldm.storage().expect("open");
                for (t, p) in storage.fragment_ids() {
                    rows.push((p, storage.fragment_ref(t, p).unwrap().row_count()));
                }
            }
            rows.sort_unstable();
            rows
        };
        let first = rows(up[0]);
        for &other in &up[1..] {
            assert_eq!(
                rows(other),
                first,
                "seed {seed}: replicas {} and {other} differ",
                up[0]
            );
        }
    }
    let durable = cluster
        .sim
        .block::<Distribution>(Distribution::address(live[0]))
        .map(|d| d.durable_gci());
    let master_durable = live
        .iter()
        .filter_map(|&n| cluster.sim.block::<Distribution>(Distribution::address(n)))
        .find(|d| d.is_master())
        .map(|d| d.durable_gci());
    assert!(
        master_durable.is_some_and(|g| g > 0),
        "seed {seed}: global checkpoints go on after the failure ({durable:?})"
    );
}

/// Runs the seeds and checks that the failure hit every kind of
/// transaction somewhere (else the runs test nothing).
fn many_seeds(seeds: std::ops::RangeInclusive<u64>, n: u8, replicas: usize) {
    let mut total: RunStats = (0, 0, 0, 0);
    for seed in seeds {
        let (unknown, retried, aborted, taken) = crash_during_workload(seed, n, replicas);
        total = (
            total.0 + unknown,
            total.1 + retried,
            total.2 + aborted,
            total.3 + taken,
        );
    }
    let (unknown, retried, aborted, taken) = total;
    assert!(
        unknown > 0 && retried > 0 && aborted > 0 && taken > 0,
        "the crashes hit transactions of every kind: {unknown} unknown, {retried} retried, \
         {aborted} aborted by a surviving TC, {taken} taken over"
    );
}

#[test]
fn two_nodes_two_replicas_a_node_crashes_at_a_random_moment() {
    many_seeds(1..=40, 2, 2);
}

#[test]
fn four_nodes_two_replicas_a_node_crashes_at_a_random_moment() {
    many_seeds(101..=124, 4, 2);
}
