//! How commits travel: commit chains and key requests in batches between
//! nodes, and the one-phase commit of a whole transaction on one replica.
//!
//! The cluster is the shared test harness (`common`: data nodes wired as
//! a real node, an API node that records every answer) with the TC
//! tests' calls (`common/transactions.rs`).

mod common;
#[path = "common/transactions.rs"]
mod transactions;

use common::*;
use transactions::*;

/// With one replica every commit chain starts on the TC's own node: the
/// chains go at once, none waits to be batched, however many commit
/// together. Each transaction writes a row on each of the two LDM
/// instances, so that it commits in two phases, along a chain per
/// instance (a one-phase commit, a lone write's, has no chain to batch).
#[test]
fn commit_chains_that_start_on_the_tcs_node_are_not_batched() {
    let mut cluster = Cluster::start(25, 1, Limits::default());
    cluster.create_table();
    // One key per instance: a transaction writing `k` and its partner
    // `partner[k]` has a participant on each.
    let instance_of = |cluster: &Cluster, k: i64| {
        let partition = cluster.partition_of(k);
        cluster.placement.home(partition).ldm_instance
    };
    let (on_0, on_1): (Vec<i64>, Vec<i64>) = (0..400).partition(|&k| instance_of(&cluster, k) == 0);
    const TRANSACTIONS: usize = 64;
    assert!(on_0.len() >= TRANSACTIONS && on_1.len() >= TRANSACTIONS);
    let pairs: Vec<(i64, i64)> = on_0.into_iter().zip(on_1).take(TRANSACTIONS).collect();
    let tc = cluster.tc().counters();
    let ldm_commits = cluster.ldm_total(|s| s.commits);
    // All in flight at once through the one TC: their commits start
    // close together, as those that are batched between nodes do.
    let txs: Vec<u64> = pairs
        .iter()
        .map(|&(a, b)| {
            let tx = cluster.tx_id();
            let ops = [
                Op::write(OpKind::Insert, a, 10 * a),
                Op::write(OpKind::Insert, b, 10 * b),
            ];
            cluster.submit(tx, tc_flags::START | tc_flags::COMMIT, &ops);
            tx
        })
        .collect();
    for tx in txs {
        let reply = cluster.reply_within(tx, ANSWER_WAIT);
        let reply = reply.unwrap_or_else(|| panic!("transaction {tx:#x}: no reply"));
        assert!(committed(&reply).0 > 0, "{tx:#x} committed in a GCI");
    }
    let after = cluster.tc().counters();
    assert_eq!(
        after.committed - tc.committed,
        TRANSACTIONS as u64,
        "every transaction committed"
    );
    assert_eq!(after.one_phase, tc.one_phase, "none in one phase");
    assert_eq!(
        cluster.ldm_total(|s| s.commits) - ldm_commits,
        2 * TRANSACTIONS as u64,
        "each transaction committed along its two chains"
    );
    assert_eq!(
        after.commit_batches, tc.commit_batches,
        "no commit chain starting on the TC's node waited to be batched"
    );
    let keys: Vec<i64> = pairs.iter().flat_map(|&(a, b)| [a, b]).collect();
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

    // Two replicas: writes only are one-phase, the backup deciding: it
    // commits first, then the primary, which answers.
    let mut two = Cluster::start(28, 2, Limits::default());
    two.create_table();
    two.sim.run_for(GCP_INTERVAL * 3);
    let tc_before = two.tc().counters().one_phase;
    for k in 1..=8 {
        committed(&two.commit(&[Op::write(OpKind::Insert, k, 10 * k)]));
    }
    let one_phase = two.tc().counters().one_phase - tc_before;
    assert!(one_phase > 0, "no two-replica write was one-phase");
    assert_eq!(
        two.one_phase_commits(),
        2 * one_phase,
        "committed on both replicas"
    );
    assert_eq!(two.ldm_total(|s| s.one_phase_passed), one_phase);
    // A locked read makes it two-phase (the backup would not answer it).
    let before = two.tc().counters().one_phase;
    committed(&two.commit(&[
        Op::write(OpKind::Update, 1, 11),
        Op::read(1, LockMode::Exclusive),
    ]));
    assert_eq!(two.tc().counters().one_phase, before);
    for n in two.data_nodes.clone() {
        assert_eq!(two.read_values_on(n, &[1, 8]), vec![Some(11), Some(80)]);
    }
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
