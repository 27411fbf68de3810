//! Node restart in the deterministic simulator (docs/recovery.md, "Node
//! restart"): 2 data nodes × 2 replicas. One node crashes, writes commit
//! without it (updates, deletes, inserts), it restarts with its disk as it
//! was and catches up from the live replica while a client keeps writing;
//! then the OTHER node crashes and every committed write is read back from
//! the restarted one: the newest value of each row, and no row deleted
//! while it was down. The harness is `tests/common`, shared with
//! `failover.rs`.

#[path = "common/accounts.rs"]
mod accounts;
mod common;

use common::*;
use datanode::membership::Membership;
use signal::NodeState;

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
        // What `skarv admin show` says: starting until it serves (a
        // rolling restart that waits for "started" must not take the copy
        // source down while the copy runs), then started.
        let reported = cluster
            .sim
            .block::<Membership>(BlockRef::new(victim, BlockNumber::MEMBERSHIP, 0))
            .map(Membership::reported_state);
        // Reported started only once its node's distribution block counts
        // it serving (the copy is done); its LDM instances and the other
        // nodes learn that by signal, a moment later.
        let counted_serving = cluster
            .sim
            .block::<Distribution>(Distribution::address(victim))
            .and_then(|d| d.node_states().map(|s| s.serving.contains(victim)))
            .unwrap_or(false);
        if reported == Some(NodeState::Started) {
            assert!(
                counted_serving,
                "seed {seed}: node {victim} reported started while it copies"
            );
        }
        if cluster.serving(victim) {
            after += 1;
        }
        if after == 20 {
            assert_eq!(
                reported,
                Some(NodeState::Started),
                "seed {seed}: node {victim} serves"
            );
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

/// A transaction left open and idle does not hold a node restart back for
/// ever: the TC waits at most `DRAIN_WAIT_MAX` for it, then aborts it, and
/// its client's next request learns so with the temporary 286.
#[test]
fn an_idle_open_transaction_does_not_hold_a_restart_back() {
    let mut cluster = Cluster::start(7, 2, 2);
    let mut model = BTreeMap::new();
    let (first, victim) = (node(2), node(3));
    commit(
        &mut cluster,
        &mut model,
        first,
        OpKind::Insert,
        &[1, 2, 3],
        0,
    );
    cluster.sim.crash(victim);
    cluster.sim.run_for(Duration::from_millis(500));
    // Opened on the live node, one write done, never committed.
    let idle = cluster.tx_id();
    let ops = cluster.batch(OpKind::Update, &[1], 5);
    cluster.send(
        tc_of(first),
        SignalBody::TcKeyReq {
            tx_id: idle,
            flags: tc_flags::START,
            ops,
        },
    );
    cluster.sim.run_for(Duration::from_millis(50));
    assert_eq!(
        cluster.answers(),
        vec![(idle, Ok(0))],
        "the first request is answered, the transaction stays open"
    );
    cluster.sim.restart(victim);
    let restarted = cluster.sim.now();
    let until = restarted + datanode::tc::DRAIN_WAIT_MAX + Duration::from_secs(10);
    while !cluster.serving(victim) {
        assert!(
            cluster.sim.now() < until,
            "node {victim} never serves: the idle transaction holds it back"
        );
        cluster.sim.run_for(Duration::from_millis(10));
    }
    assert!(
        cluster.sim.now() >= restarted + datanode::tc::DRAIN_WAIT_MAX,
        "the TC waited for the open transaction before it gave up on it"
    );
    // The open transaction was rolled back: its next request is refused
    // with the temporary 286, and its write is gone.
    let ops = cluster.batch(OpKind::Update, &[2], 6);
    cluster.send(
        tc_of(first),
        SignalBody::TcKeyReq {
            tx_id: idle,
            flags: tc_flags::COMMIT,
            ops,
        },
    );
    cluster.sim.run_for(Duration::from_millis(50));
    assert_eq!(
        cluster.answers(),
        vec![(idle, Err(error::NODE_FAILURE_ABORTED))]
    );
    assert_eq!(cluster.read(&[1, 2, 3]), [Some(0), Some(0), Some(0)]);
}

/// A node that restarts with an empty disk (an initial node restart, or
/// `--discard-corrupt`) learns its tables from the master's dictionary;
/// its LDMs must hold them before the master asks them to copy. Here the
/// restarted node's dictionary thread is slow: the master's node states
/// and `NodeCopyReq` reach its LDMs long before the schema it synced. The
/// copy must still bring every row (a copy of "every fragment here" with
/// no tables yet copied nothing, and the node served an empty table).
#[test]
fn an_emptied_node_copies_the_tables_its_dictionary_learns_late() {
    for seed in 1..=2 {
        let mut cluster = Cluster::start(seed, 2, 2);
        let mut model = BTreeMap::new();
        let (first, victim) = (node(2), node(3));
        let keys: Vec<i64> = (0..ROWS).collect();
        for chunk in keys.chunks(50) {
            commit(&mut cluster, &mut model, first, OpKind::Insert, chunk, 0);
        }
        cluster.sim.run_for(Duration::from_millis(300));
        cluster.sim.crash(victim);
        cluster.disks[&victim].wipe();
        cluster.sim.run_for(Duration::from_millis(500));
        cluster
            .sim
            .delay_local(victim, BlockNumber::DICTIONARY, Duration::from_secs(2));
        cluster.sim.restart(victim);
        let until = cluster.sim.now() + CATCH_UP_MAX;
        while !cluster.serving(victim) {
            assert!(
                cluster.sim.now() < until,
                "seed {seed}: node {victim} does not catch up"
            );
            cluster.sim.run_for(Duration::from_millis(50));
        }
        cluster.sim.clear_delays();
        cluster.sim.run_for(Duration::from_millis(300));
        cluster.sim.crash(first);
        cluster.sim.run_for(Duration::from_secs(2));
        assert_eq!(cluster.live_nodes(), vec![victim]);
        let values = cluster.read(&keys);
        for (&k, got) in keys.iter().zip(&values) {
            let want = model.get(&k).copied().flatten();
            assert_eq!(
                *got, want,
                "seed {seed}: key {k} on the restarted node {victim}"
            );
        }
    }
}
