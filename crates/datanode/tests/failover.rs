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

#[path = "common/accounts.rs"]
mod accounts;
mod common;

use common::*;

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

/// What a run went through: (outcomes unknown, transactions retried,
/// aborted by the failure, taken over).
type RunStats = (usize, usize, u64, u64);

/// Transactions of one run, and how many are in flight at once.
const TRANSACTIONS: u64 = 40;
const IN_FLIGHT_MAX: usize = 6;
/// Retries of a transaction refused with a temporary error.
const RETRIES_MAX: u32 = 5;
/// Longest a run may take in simulated time.
const RUN_MAX: Duration = Duration::from_secs(20);

/// One run: `n` nodes in groups of `replicas`, one crashed at a random
/// moment of the workload.
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

/// Runs a transaction of two requests on the TC of `node`: `ops`, then
/// the commit alone (two phases: a transaction of one request that writes
/// to one instance commits in one, `one_phase_write_*` below).
fn in_two_requests(cluster: &mut Cluster, node: NodeId, ops: Vec<u8>) -> (u64, Result<u32, u32>) {
    let tx_id = cluster.tx_id();
    let flags = tc_flags::START;
    cluster.send(tc_of(node), SignalBody::TcKeyReq { tx_id, flags, ops });
    assert_eq!(answer_of(cluster, tx_id), Some(Ok(0)), "the first request");
    let (flags, ops) = (tc_flags::COMMIT, Vec::new());
    cluster.send(tc_of(node), SignalBody::TcKeyReq { tx_id, flags, ops });
    (
        tx_id,
        answer_of(cluster, tx_id).expect("the commit's answer"),
    )
}

/// The answer to transaction `tx_id`, waited for up to 5 simulated seconds.
fn answer_of(cluster: &mut Cluster, tx_id: u64) -> Option<Result<u32, u32>> {
    let until = cluster.sim.now() + Duration::from_secs(5);
    while cluster.sim.now() < until {
        cluster.sim.run_for(Duration::from_millis(1));
        let answer = cluster.answers().into_iter().find(|(t, _)| *t == tx_id);
        if let Some((_, answer)) = answer {
            return Some(answer);
        }
    }
    None
}

/// The linear commit (docs/transactions.md, "Commit and abort"): a write
/// to a partition of two replicas prepares at the primary, then the
/// backup; the commit goes from the TC to the backup, on to the primary,
/// and the primary answers the TC: three signals, one of them local to
/// the TC's node when it is the primary's.
#[test]
fn a_write_commits_along_its_replicas_from_the_backup_to_the_primary() {
    for seed in 0..4 {
        let mut cluster = Cluster::start(seed, 2, 2);
        cluster.sim.enable_trace();
        let from = cluster.sim.trace().len();
        let ops = cluster.batch(OpKind::Insert, &[seed as i64], 7);
        let node = cluster.live_nodes()[0];
        let (_, outcome) = in_two_requests(&mut cluster, node, ops);
        assert_eq!(outcome, Ok(tc_flags::COMMITTED));
        let lines: Vec<&String> = cluster.sim.trace()[from..]
            .iter()
            .filter(|l| {
                [
                    "LdmKeyReq",
                    "LdmCommitChainReq",
                    "LdmCommitConf",
                    "LdmCommitReq",
                ]
                .iter()
                .any(|s| l.contains(s))
            })
            .collect();
        let steps: Vec<_> = lines.iter().map(|l| parse_exec(l)).collect();
        let names: Vec<&str> = steps.iter().map(|s| s.1.as_str()).collect();
        assert_eq!(
            names,
            [
                "LdmKeyReq",
                "LdmKeyReq",
                "LdmCommitChainReq",
                "LdmCommitChainReq",
                "LdmCommitConf"
            ],
            "seed {seed}: {lines:#?}"
        );
        let (primary, backup, tc) = (&steps[0].0, &steps[1].0, &steps[0].2);
        assert_ne!(primary, backup);
        assert_eq!(&steps[1].2, primary, "prepare: primary → backup");
        assert_eq!(
            (&steps[2].0, &steps[2].2),
            (backup, tc),
            "commit: TC → backup"
        );
        assert_eq!(
            (&steps[3].0, &steps[3].2),
            (primary, backup),
            "commit: backup → primary"
        );
        assert_eq!(
            (&steps[4].0, &steps[4].2),
            (tc, primary),
            "conf: primary → TC"
        );
        assert_eq!(cluster.read(&[seed as i64]), [Some(7)]);
    }
}

/// A commit chain broken by a node failure runs again over the live
/// replicas: the other node crashes right when the TC starts the commit
/// (its part of the chain is lost with it); the TC's transaction still
/// commits, and the survivor has the row.
#[test]
fn a_commit_chain_broken_by_a_node_failure_runs_again_without_it() {
    for seed in 0..6 {
        let mut cluster = Cluster::start(seed, 2, 2);
        cluster.sim.enable_trace();
        let from = cluster.sim.trace().len();
        let tc_node = cluster.data_nodes[(seed % 2) as usize];
        let other = cluster.data_nodes[1 - (seed % 2) as usize];
        let tx_id = cluster.tx_id();
        let ops = cluster.batch(OpKind::Insert, &[40 + seed as i64], 9);
        let flags = tc_flags::START;
        cluster.send(tc_of(tc_node), SignalBody::TcKeyReq { tx_id, flags, ops });
        assert_eq!(answer_of(&mut cluster, tx_id), Some(Ok(0)), "seed {seed}");
        let (flags, ops) = (tc_flags::COMMIT, Vec::new());
        let commit_from = cluster.sim.trace().len();
        cluster.send(tc_of(tc_node), SignalBody::TcKeyReq { tx_id, flags, ops });
        let tc = tc_of(tc_node).to_string();
        let mut steps = 0;
        // The TC starts the commit as it takes the commit request.
        while !cluster.sim.trace()[commit_from..]
            .iter()
            .any(|l| l.contains(&format!("exec {tc} TcKeyReq")))
        {
            assert!(cluster.sim.step(), "seed {seed}: the simulation ran dry");
            steps += 1;
            assert!(steps < 1_000_000, "seed {seed}: no commit request at {tc}");
        }
        cluster.sim.crash(other);
        let until = cluster.sim.now() + Duration::from_secs(5);
        let mut answer = None;
        while answer.is_none() && cluster.sim.now() < until {
            cluster.sim.run_for(Duration::from_millis(5));
            answer = cluster
                .answers()
                .into_iter()
                .find(|(t, _)| *t == tx_id)
                .map(|(_, a)| a);
        }
        assert_eq!(answer, Some(Ok(tc_flags::COMMITTED)), "seed {seed}");
        let restarted = cluster.sim.trace()[from..]
            .iter()
            .filter(|l| {
                l.contains(&format!(
                    "exec {} LdmCommitChainReq <- {tc}",
                    ldm_of(tc_node, 0)
                )) || l.contains(&format!(
                    "exec {} LdmCommitChainReq <- {tc}",
                    ldm_of(tc_node, 1)
                ))
            })
            .count();
        assert!(
            restarted >= 1,
            "seed {seed}: the TC sent the chain to its own node's LDM"
        );
        assert_eq!(cluster.read(&[40 + seed as i64]), [Some(9)], "seed {seed}");
    }
}

/// The one-phase commit over two replicas (docs/transactions.md,
/// "One-phase commit"): a transaction of one request that writes to one
/// partition goes TC → primary → backup, which decides and commits, →
/// primary, which commits last and answers the TC: no commit round.
#[test]
fn one_phase_write_is_decided_by_the_backup_and_answered_by_the_primary() {
    for seed in 0..4 {
        let mut cluster = Cluster::start(seed, 2, 2);
        cluster.sim.enable_trace();
        let from = cluster.sim.trace().len();
        let ops = cluster.batch(OpKind::Insert, &[seed as i64], 7);
        let (outcome, _) = cluster.run_one(tc_flags::START | tc_flags::COMMIT, ops);
        assert_eq!(outcome, Ok(tc_flags::COMMITTED));
        let steps: Vec<(String, String, String)> = cluster.sim.trace()[from..]
            .iter()
            .filter(|l| ["LdmKey", "LdmCommit"].iter().any(|s| l.contains(s)))
            .map(|l| parse_exec(l))
            .collect();
        let names: Vec<&str> = steps.iter().map(|s| s.1.as_str()).collect();
        assert_eq!(
            names,
            [
                "LdmKeyCommitReq",
                "LdmKeyCommitReq",
                "LdmKeyCommitted",
                "LdmKeyCommitted"
            ],
            "seed {seed}: {steps:#?}"
        );
        let (primary, backup, tc) = (&steps[0].0, &steps[1].0, &steps[0].2);
        assert_eq!(&steps[1].2, primary, "primary → backup");
        assert_eq!(
            (&steps[2].0, &steps[2].2),
            (primary, backup),
            "backup → primary"
        );
        assert_eq!((&steps[3].0, &steps[3].2), (tc, primary), "primary → TC");
        assert_eq!(cluster.read(&[seed as i64]), [Some(7)]);
    }
}

/// "exec <receiver> <signal> <- <sender>" (the simulator's trace).
fn parse_exec(l: &str) -> (String, String, String) {
    let rest = &l[l.find("exec ").expect("an exec line") + 5..];
    let mut words = rest.split_whitespace();
    let receiver = words.next().unwrap().to_owned();
    let signal = words.next().unwrap().to_owned();
    assert_eq!(words.next(), Some("<-"));
    (receiver, signal, words.next().unwrap().to_owned())
}

/// A node failure at each step of a one-phase commit over two replicas:
/// the node that is not the TC's crashes right after the primary runs the
/// ops, after the backup does, or after the primary takes the backup's
/// answer. It is the primary or the backup (by the key). The client's
/// answer is definite, and true: committed with the row on the survivor,
/// or a temporary error with nothing there (a failed backup leaves the
/// outcome to the primary, which commits; a failed primary leaves it to
/// the backup, which the TC asks, `LdmOutcomeReq`).
#[test]
fn one_phase_write_survives_a_failure_of_either_replica_at_each_step() {
    let mut seen = std::collections::BTreeSet::new();
    for seed in 0..24u64 {
        let step = (seed % 3) as usize;
        let key = 100 + seed as i64;
        let mut cluster = Cluster::start(seed, 2, 2);
        cluster.sim.enable_trace();
        let from = cluster.sim.trace().len();
        let tc_node = cluster.data_nodes[(seed / 3 % 2) as usize];
        let other = cluster.data_nodes[1 - (seed / 3 % 2) as usize];
        let tx_id = cluster.tx_id();
        let ops = cluster.batch(OpKind::Insert, &[key], 5);
        let flags = tc_flags::START | tc_flags::COMMIT;
        cluster.send(tc_of(tc_node), SignalBody::TcKeyReq { tx_id, flags, ops });
        // Run to the chosen step: the nth LdmKeyCommitReq/LdmKeyCommitted
        // executed (primary, backup, primary).
        let mut n = 0;
        let mut other_is_primary = None;
        let until = cluster.sim.now() + Duration::from_secs(5);
        while n <= step {
            assert!(cluster.sim.step(), "seed {seed}: the simulation ran dry");
            let trace = &cluster.sim.trace()[from..];
            let execs: Vec<_> = trace
                .iter()
                .filter(|l| l.contains(" LdmKeyCommitReq ") || l.contains(" LdmKeyCommitted "))
                .map(|l| parse_exec(l))
                .collect();
            if let Some(first) = execs.first() {
                other_is_primary = Some(first.0.starts_with(&format!("{other}:")));
            }
            n = execs.len();
            assert!(cluster.sim.now() < until, "seed {seed}: no step {step}");
        }
        let other_is_primary = other_is_primary.expect("the primary ran the ops");
        cluster.sim.crash(other);
        let answer = answer_of(&mut cluster, tx_id);
        let row = cluster.read(&[key])[0];
        match answer {
            Some(Ok(flags)) => {
                assert_eq!(flags, tc_flags::COMMITTED, "seed {seed}");
                assert_eq!(row, Some(5), "seed {seed}: committed, and the row is gone");
            }
            Some(Err(code)) => {
                assert_eq!(
                    error::class(code),
                    ErrorClass::Temporary,
                    "seed {seed}: {code}"
                );
                assert_eq!(
                    row, None,
                    "seed {seed}: refused with {code}, and the row is there"
                );
            }
            None => panic!("seed {seed}: no answer"),
        }
        seen.insert((other_is_primary, step, answer.is_some_and(|a| a.is_ok())));
    }
    // Both replicas failed at every step; each failed backup still
    // commits; a primary that failed after the backup committed leaves a
    // commit the TC learns from the backup.
    for step in 0..3 {
        assert!(seen.contains(&(false, step, true)), "{seen:?}");
        assert!(seen.iter().any(|s| s.0 && s.1 == step), "{seen:?}");
    }
    assert!(seen.contains(&(true, 1, true)), "{seen:?}");
}

/// A failed primary's last answer, arriving after its failure was handled
/// (`Simulation::set_late_signals`): the TC asked the backup, which had
/// committed (`LdmOutcomeReq`), answered the client committed and ended
/// the transaction; the primary's own `LdmKeyCommitted` then comes for a
/// transaction the TC no longer has, and is dropped (3af97f7; CI's
/// `rolling_restart` found it, a graceful stop's last signals).
#[test]
fn a_failed_primarys_late_answer_after_the_backups_is_dropped() {
    let mut after_the_answer = 0;
    for seed in 0..16u64 {
        let key = 500 + seed as i64;
        let mut cluster = Cluster::start(seed, 2, 2);
        cluster.sim.set_late_signals(true);
        cluster.sim.enable_trace();
        let from = cluster.sim.trace().len();
        let tc_node = cluster.data_nodes[(seed % 2) as usize];
        let other = cluster.data_nodes[1 - (seed % 2) as usize];
        let tx_id = cluster.tx_id();
        let ops = cluster.batch(OpKind::Insert, &[key], 5);
        let flags = tc_flags::START | tc_flags::COMMIT;
        cluster.send(tc_of(tc_node), SignalBody::TcKeyReq { tx_id, flags, ops });
        // Run until the primary, on the other node, has executed its last
        // step (the third LdmKeyCommitReq/LdmKeyCommitted): its answer to
        // the TC is in flight.
        let until = cluster.sim.now() + Duration::from_secs(5);
        let execs = loop {
            assert!(cluster.sim.step(), "seed {seed}: the simulation ran dry");
            let execs: Vec<_> = cluster.sim.trace()[from..]
                .iter()
                .filter(|l| l.contains(" LdmKeyCommitReq ") || l.contains(" LdmKeyCommitted "))
                .map(|l| parse_exec(l))
                .collect();
            if execs.len() == 3 {
                break execs;
            }
            assert!(cluster.sim.now() < until, "seed {seed}: no third step");
        };
        if !execs[0].0.starts_with(&format!("{other}:")) {
            continue; // The TC's node holds the primary: nothing in flight.
        }
        cluster.sim.crash(other);
        let answer = answer_of(&mut cluster, tx_id);
        assert_eq!(answer, Some(Ok(tc_flags::COMMITTED)), "seed {seed}");
        cluster
            .sim
            .run_for(kernel::simulator::LATE_SIGNAL_DELAY_MAX);
        assert_eq!(cluster.read(&[key])[0], Some(5), "seed {seed}");
        let trace = &cluster.sim.trace()[from..];
        let answered = trace.iter().position(|l| l.contains(" TcKeyConf "));
        let late = trace
            .iter()
            .position(|l| l.contains("late LdmKeyCommitted"));
        if let (Some(answered), Some(late)) = (answered, late) {
            after_the_answer += usize::from(late > answered);
        }
    }
    assert!(after_the_answer > 0, "no late answer came after the TC's");
}
