//! Global checkpoints and epochs as the TCs see them: GCIs that rise and
//! are waited for, checkpoints that hurry the GCP, GCIs after a restart,
//! dependency order across the GCI switch, epochs between GCPs.
//!
//! The cluster is the shared test harness (`common`: data nodes wired as
//! a real node, an API node that records every answer) with the TC
//! tests' calls (`common/transactions.rs`).

mod common;
#[path = "common/transactions.rs"]
mod transactions;

use common::*;
use transactions::*;

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
    cluster.send(
        tc,
        SignalBody::TcWaitGciReq {
            gci: last,
            incarnation: 0,
        },
    );
    let until = cluster.sim.now() + ANSWER_WAIT;
    let durable = loop {
        let answer = cluster.take().into_iter().find_map(|s| match s.body {
            SignalBody::TcWaitGciConf {
                gci, durable_gci, ..
            } => Some((gci, durable_gci)),
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
    cluster.send(
        tc,
        SignalBody::TcWaitGciReq {
            gci,
            incarnation: 0,
        },
    );
    let until = cluster.sim.now() + ANSWER_WAIT;
    let durable = loop {
        let answer = cluster.take().into_iter().find_map(|s| match s.body {
            SignalBody::TcWaitGciConf {
                gci: g,
                durable_gci,
                ..
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

/// A graceful stop of an idle node (`skarv admin stop N`): its TC drains at
/// once, waits for the GCI its commits are in — one hurried GCP — and the
/// node leaves well within a second of simulated time, its last commit
/// durable on the node that stays. (The TC once waited for the open GCI
/// read again at every check: each hurried GCP opened the next, so every
/// stop ran into the drain limit and stopped "anyway" after 5 s.)
#[test]
fn a_graceful_stop_of_an_idle_node_waits_for_one_gcp_only() {
    const STOP_MAX: Duration = Duration::from_millis(500);
    let mut cluster = Cluster::start(29, 2, Limits::default());
    cluster.create_table();
    let (gci, _) = committed(&cluster.commit(&[Op::write(OpKind::Insert, 1, 1)])).to_owned();
    let leaving = cluster.data_nodes[1];
    let stays = cluster.data_nodes[0];
    cluster.sim.inject(Signal {
        receiver: BlockRef::new(leaving, BlockNumber::MEMBERSHIP, 0),
        sender: BlockRef::new(node(1), BlockNumber::MANAGEMENT, 0),
        body: SignalBody::MgmStopOrd { restart: false },
    });
    let ordered = cluster.sim.now();
    while cluster.sim.summary(leaving).unwrap().shutdowns == 0 {
        assert!(
            cluster.sim.now().saturating_since(ordered) < STOP_MAX,
            "node {leaving} still up {STOP_MAX:?} after an idle stop (TC durable GCI {}, node durable {})",
            cluster.tc_on(leaving).durable_gci(),
            cluster.master().durable_gci(),
        );
        cluster.sim.run_for(Duration::from_millis(1));
    }
    assert!(
        cluster.tc_on(stays).durable_gci() >= gci,
        "the commit in GCI {gci} is durable when the node leaves: {}",
        cluster.tc_on(stays).durable_gci()
    );
}
