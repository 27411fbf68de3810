//! The client against a real management server and a small data node
//! stand-in on loopback: a TCP peer that speaks the frame format, answers
//! the hello, registrations, table lookups and key requests (every op ok,
//! reads return a row made from the key). It checks the client's own
//! machinery without a cluster: one request per batch, the receive-thread
//! activation threshold, asynchronous sends, futures, node loss, and
//! client-side checks of bad input; and, with a counting allocator, an
//! upper bound on the heap allocations of an asynchronous transaction.

use std::io::Write;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use proto::{OpBatchReader, OpKind, ResultWriter};
use signal::{encode_frame, tc_flags, BlockRef, DictTableGroup, NodeId, Signal, SignalBody};
use skarv_client::schema_types::TableDef;
use skarv_client::{
    codes, Cluster, ClusterOptions, Epoch, ExecMode, LockMode, Op, SpinMethod, Value,
};
use testkit::allocations;

mod standin;
use standin::{greet, kv_table_def, read_frame, registered, start_standin, Standin};

const DATA_NODE: u8 = 2;

// This binary counts each thread's allocations (testkit::CountingAllocator).
#[global_allocator]
static ALLOCATOR: testkit::CountingAllocator = testkit::CountingAllocator;

/// What the stand-in saw.
#[derive(Default)]
struct Seen {
    key_requests: AtomicU64,
    ops: AtomicU64,
    /// Ops of the largest request.
    largest: AtomicU64,
    /// Close the connection on the next request with COMMIT.
    drop_on_commit: AtomicBool,
    /// While true, answers to key requests wait (the test decides when a
    /// late answer comes, not a clock).
    confs_held: Mutex<bool>,
    confs_released: Condvar,
    /// Answers to key requests written to the client.
    confs_sent: AtomicU64,
}

impl Seen {
    fn hold_confs(&self, hold: bool) {
        *self.confs_held.lock().expect("not poisoned") = hold;
        self.confs_released.notify_all();
    }

    /// Waits while answers are held.
    fn pass_confs(&self) {
        let held = self.confs_held.lock().expect("not poisoned");
        drop(
            self.confs_released
                .wait_while(held, |held| *held)
                .expect("not poisoned"),
        );
    }
}

fn table_def() -> TableDef {
    kv_table_def("kv", 20)
}

fn answer(signal: &Signal, seen: &Seen) -> Option<SignalBody> {
    match &signal.body {
        SignalBody::ApiRegReq { .. } => Some(registered()),
        SignalBody::DictGetTableReq {
            request_id, name, ..
        } => Some(if name == "kv" {
            SignalBody::DictGetTableConf {
                request_id: *request_id,
                group: DictTableGroup {
                    tables: vec![table_def().to_bytes()],
                },
            }
        } else {
            SignalBody::DictGetTableRef {
                request_id: *request_id,
                code: 723,
                message: format!("no table `{name}`"),
            }
        }),
        SignalBody::TcKeyReq { tx_id, flags, ops } => {
            let batch = OpBatchReader::new(ops).expect("valid op batch");
            seen.key_requests.fetch_add(1, Ordering::SeqCst);
            seen.ops.fetch_add(batch.len() as u64, Ordering::SeqCst);
            seen.largest.fetch_max(batch.len() as u64, Ordering::SeqCst);
            let mut results = Vec::new();
            let mut writer = ResultWriter::new(&mut results);
            for op in batch.iter() {
                if op.header.kind == OpKind::Read {
                    let key = op.keys().next().expect("a key");
                    let Value::Int(k) = key.to_value() else {
                        panic!("an INT key")
                    };
                    let row = [Value::Int(k), Value::Int(k * 10)];
                    writer.row(op.header.op_index);
                    if op.projection_count() == 0 {
                        row.iter().for_each(|v| writer.value(v.as_ref()));
                    } else {
                        op.projection()
                            .for_each(|c| writer.value(row[usize::from(c)].as_ref()));
                    }
                    writer.end_row().expect("fits");
                } else {
                    writer.ok(op.header.op_index).expect("fits");
                }
            }
            drop(writer);
            let committed = flags & tc_flags::COMMIT != 0;
            Some(SignalBody::TcKeyConf {
                tx_id: *tx_id,
                flags: if committed { tc_flags::COMMITTED } else { 0 },
                epoch: signal::epoch::make(7, 3),
                incarnation: 0x51,
                results,
            })
        }
        _ => None,
    }
}

fn serve(mut stream: TcpStream, seen: Arc<Seen>, delay: Duration) {
    let mut buffer = Vec::new();
    let me = NodeId::new(DATA_NODE).expect("id");
    if greet(&mut stream, &mut buffer, me).is_none() {
        return;
    }
    let mut out = Vec::new();
    while let Some(signals) = read_frame(&mut stream, &mut buffer) {
        for signal in signals {
            let commit = matches!(&signal.body, SignalBody::TcKeyReq { flags, .. } if flags & tc_flags::COMMIT != 0);
            if commit && seen.drop_on_commit.swap(false, Ordering::SeqCst) {
                return;
            }
            let Some(body) = answer(&signal, &seen) else {
                continue;
            };
            let conf = matches!(body, SignalBody::TcKeyConf { .. });
            if conf {
                std::thread::sleep(delay);
                seen.pass_confs();
            }
            let reply = Signal {
                receiver: signal.sender,
                sender: BlockRef::new(me, signal.receiver.block, 0),
                body,
            };
            out.clear();
            encode_frame(&[reply], &mut out).expect("encodes");
            if stream.write_all(&out).is_err() {
                return;
            }
            if conf {
                seen.confs_sent.fetch_add(1, Ordering::SeqCst);
            }
        }
    }
}

struct Setup {
    _standin: Standin,
    connect: String,
    seen: Arc<Seen>,
}

fn setup(name: &str, delay: Duration) -> Setup {
    let seen = Arc::new(Seen::default());
    let serving = Arc::clone(&seen);
    let standin = start_standin(name, DATA_NODE, &[10, 11, 12], move |stream| {
        serve(stream, Arc::clone(&serving), delay)
    });
    Setup {
        connect: standin.connect.clone(),
        _standin: standin,
        seen,
    }
}

fn options(threshold: usize) -> ClusterOptions {
    ClusterOptions {
        connect_timeout: Duration::from_secs(10),
        request_timeout: Duration::from_secs(10),
        recv_thread_activation_threshold: threshold,
        ..ClusterOptions::default()
    }
}

#[test]
fn a_thousand_operations_travel_in_one_request_and_reads_return_rows() {
    let setup = setup("batch", Duration::ZERO);
    let cluster = Cluster::connect_with(&setup.connect, options(8)).expect("connects");
    assert_eq!(
        cluster.live_nodes(),
        vec![NodeId::new(DATA_NODE).expect("id")]
    );
    let session = cluster.session().expect("session");
    let kv = session.table("kv").expect("table");
    let before = cluster.stats().tc_key_reqs_sent;
    let tx = session
        .begin_with_hint(&kv, &[Value::Int(1)])
        .expect("begin");
    assert_eq!(
        u64::from(cluster.node_id().get()),
        tx.id() >> 48,
        "tx id carries the API node id"
    );
    for k in 0..1_000i64 {
        tx.insert(&kv, &[("k", Value::Int(k)), ("v", Value::Int(-k))])
            .expect("valid insert");
    }
    assert_eq!(tx.pending_ops(), 1_000);
    let outcome = tx.execute(ExecMode::Commit).expect("committed");
    assert!(outcome.committed);
    assert_eq!(outcome.epoch, Some(Epoch::new(7, 3).in_incarnation(0x51)));
    assert_eq!(outcome.gci(), Some(7));
    assert_eq!(outcome.epoch.map(|e| (e.hi(), e.lo())), Some((7, 3)));
    assert_eq!(
        setup.seen.key_requests.load(Ordering::SeqCst),
        1,
        "one TcKeyReq for 1,000 ops"
    );
    assert_eq!(setup.seen.largest.load(Ordering::SeqCst), 1_000);
    assert_eq!(cluster.stats().tc_key_reqs_sent - before, 1);
    // A committed transaction takes no more operations.
    let late = tx
        .insert(&kv, &[("k", Value::Int(5)), ("v", Value::Int(5))])
        .expect_err("committed");
    assert!(late.is_permanent());

    let tx = session.begin().expect("begin");
    let a = tx
        .read(&kv, &[Value::Int(4)], LockMode::Shared)
        .expect("read");
    let b = tx
        .define(Op::read(&kv, &[Value::Int(6)]).columns(&["v"]))
        .expect("read v");
    let mut outcome = tx.execute(ExecMode::Commit).expect("reads");
    assert_eq!(
        outcome.row(a).and_then(|r| r.get("v")),
        Some(&Value::Int(40))
    );
    assert_eq!(
        outcome.row(a).and_then(|r| r.get("k")),
        Some(&Value::Int(4))
    );
    let row_b = outcome.take_row(b).expect("row b");
    assert_eq!(
        row_b.values(),
        &[Value::Int(60)],
        "only the projected column"
    );
    assert_eq!(row_b.get("k"), None);
}

/// A session's own counters (NDB's `Ndb_api_*_count_session`) follow
/// what it did: operations, executes, round trips, rows, transactions.
#[test]
fn a_sessions_counters_count_its_operations_and_round_trips() {
    let setup = setup("stats", Duration::ZERO);
    let cluster = Cluster::connect_with(&setup.connect, options(8)).expect("connects");
    let session = cluster.session().expect("session");
    let kv = session.table("kv").expect("table");
    let other = cluster.session().expect("another session");
    let before = session.stats();
    {
        let tx = session.begin().expect("begin");
        for k in 0..100i64 {
            tx.insert(&kv, &[("k", Value::Int(k)), ("v", Value::Int(k))])
                .expect("insert");
        }
        tx.execute(ExecMode::Commit).expect("committed");
    }
    let s = session.stats();
    assert_eq!(s.pk_op - before.pk_op, 100);
    assert_eq!(s.exec - before.exec, 1, "one request");
    assert_eq!(
        s.wait_exec_complete - before.wait_exec_complete,
        1,
        "one round trip"
    );
    assert_eq!(s.trans_start - before.trans_start, 1);
    assert_eq!(s.trans_commit - before.trans_commit, 1);
    assert_eq!(s.trans_close - before.trans_close, 1);
    assert_eq!(s.trans_abort - before.trans_abort, 0);
    assert!(s.bytes_sent > before.bytes_sent);
    assert_eq!(s.read_row, before.read_row);

    let tx = session.begin().expect("begin");
    tx.read(&kv, &[Value::Int(1)], LockMode::Committed)
        .expect("read");
    tx.read(&kv, &[Value::Int(2)], LockMode::Committed)
        .expect("read");
    tx.execute(ExecMode::NoCommit).expect("reads");
    tx.execute(ExecMode::Rollback).expect("rolled back");
    drop(tx);
    let t = session.stats();
    assert_eq!(t.read_row - s.read_row, 2);
    assert_eq!(t.pk_op - s.pk_op, 2);
    assert_eq!(t.trans_abort - s.trans_abort, 1);
    assert!(t.bytes_received > s.bytes_received, "the rows came back");
    assert!(t.wait_nanos > s.wait_nanos);
    // Another session's counters are its own.
    assert_eq!(other.stats(), skarv_client::SessionStats::default());
}

#[test]
fn bad_input_is_a_permanent_error_naming_table_and_column_and_the_session_stays_usable() {
    let setup = setup("bad-input", Duration::ZERO);
    let cluster = Cluster::connect_with(&setup.connect, options(8)).expect("connects");
    let session = cluster.session().expect("session");
    let missing = session.table("nope").expect_err("no such table");
    assert_eq!(missing.code, codes::NO_SUCH_TABLE);
    assert!(missing.message.contains("nope"), "{missing}");
    let kv = session.table("kv").expect("table");
    let tx = session.begin().expect("begin");
    let cases = [
        (
            tx.insert(&kv, &[("k", Value::Int(1)), ("zz", Value::Int(1))]),
            codes::NO_SUCH_COLUMN,
            "zz",
        ),
        (
            tx.insert(
                &kv,
                &[("k", Value::Int(1)), ("v", Value::String("x".into()))],
            ),
            codes::BAD_VALUE,
            "v",
        ),
        (
            tx.insert(&kv, &[("v", Value::Int(1))]),
            codes::KEY_MISSING,
            "k",
        ),
        (
            tx.insert(&kv, &[("k", Value::Int(1))]),
            codes::BAD_OPERATION,
            "v",
        ),
        (
            tx.update(&kv, &[Value::Int(1)], &[("k", Value::Int(2))]),
            codes::PRIMARY_KEY_UPDATE,
            "k",
        ),
        (
            tx.define(Op::insert_at(
                &kv,
                &[(0, Value::Int(1)), (5, Value::Int(1))],
            )),
            codes::NO_SUCH_COLUMN,
            "position 5",
        ),
        (
            tx.update(
                &kv,
                &[Value::Int(1)],
                &[("v", Value::Int(2)), ("zz", Value::Int(2))],
            ),
            codes::NO_SUCH_COLUMN,
            "zz",
        ),
        (
            tx.define(Op::update_at(&kv, &[Value::Int(1)], &[(0, Value::Int(2))])),
            codes::PRIMARY_KEY_UPDATE,
            "k",
        ),
        (
            tx.define(Op::insert_at(&kv, &[(1, Value::Int(1))])),
            codes::KEY_MISSING,
            "k",
        ),
        (
            tx.read(&kv, &[], LockMode::Committed),
            codes::KEY_MISSING,
            "kv",
        ),
        (
            tx.read(&kv, &[Value::Null], LockMode::Committed),
            codes::NULL_NOT_ALLOWED,
            "k",
        ),
    ];
    for (result, code, column) in cases {
        let error = result.expect_err("refused on the client");
        assert_eq!(error.code, code, "{error}");
        assert!(error.is_permanent(), "{error}");
        assert!(
            error.message.contains("kv") && error.message.contains(column),
            "{error}"
        );
    }
    assert_eq!(tx.pending_ops(), 0, "refused ops are not kept");
    assert_eq!(
        setup.seen.key_requests.load(Ordering::SeqCst),
        0,
        "nothing was sent"
    );
    tx.insert(&kv, &[("k", Value::Int(1)), ("v", Value::Int(2))])
        .expect("a good op after bad ones");
    // Columns by position: the same ops as by name.
    tx.define(Op::insert_at(
        &kv,
        &[(1, Value::Int(3)), (0, Value::Int(2))],
    ))
    .expect("an insert by position, in any order");
    tx.define(Op::update_at(&kv, &[Value::Int(2)], &[(1, Value::Int(4))]))
        .expect("an update by position");
    assert_eq!(tx.pending_ops(), 3);
    assert!(tx.execute(ExecMode::Commit).expect("commits").committed);
    assert_eq!(setup.seen.ops.load(Ordering::SeqCst), 3);
}

/// Reads key `k` in a transaction of its own: the stand-in's value is
/// `k * 10`.
fn read_own_key(session: &skarv_client::Session, kv: &Arc<skarv_client::Table>, k: i64) {
    let tx = session.begin().expect("begin");
    let read = tx
        .read(kv, &[Value::Int(k)], LockMode::Committed)
        .expect("read");
    let outcome = tx.execute(ExecMode::Commit).expect("executes");
    assert_eq!(
        outcome.row(read).and_then(|r| r.get("v")),
        Some(&Value::Int(k * 10))
    );
}

/// A thread that owns the poll spins before it blocks: with a static
/// 500 µs spin and a data node that answers at once, replies are read
/// while it spins; without a spin, none is.
#[test]
fn the_poll_owner_reads_replies_that_come_while_it_spins() {
    let setup = setup("spin", Duration::ZERO);
    let round_trips = |spin_us: u32| {
        let options = ClusterOptions {
            spin_method: SpinMethod::Static,
            spin_us,
            ..options(8)
        };
        let cluster = Cluster::connect_with(&setup.connect, options).expect("connects");
        let session = cluster.session().expect("session");
        let kv = session.table("kv").expect("table");
        for k in 0..200 {
            read_own_key(&session, &kv, k);
        }
        cluster.stats().spin_replies
    };
    assert_eq!(round_trips(0), 0, "no spin, no reply read while spinning");
    assert!(round_trips(500) > 0, "replies read while spinning");
}

#[test]
fn waiting_threads_receive_themselves_below_the_threshold_and_the_receive_thread_above() {
    let setup = setup("threshold", Duration::from_millis(5));
    let cluster = Cluster::connect_with(&setup.connect, options(2)).expect("connects");
    let run = |threads: usize, txs: usize| {
        std::thread::scope(|scope| {
            for t in 0..threads {
                let cluster = cluster.clone();
                scope.spawn(move || {
                    let session = cluster.session().expect("session");
                    let kv = session.table("kv").expect("table");
                    for i in 0..txs {
                        read_own_key(&session, &kv, (t * 1000 + i) as i64);
                    }
                });
            }
        });
    };
    run(1, 10);
    let alone = cluster.stats();
    assert_eq!(
        alone.receive_thread_rounds, 0,
        "one waiting thread is below the threshold: {alone:?}"
    );
    assert!(alone.receive_rounds > 0);
    run(12, 10);
    let crowd = cluster.stats();
    assert!(
        crowd.receive_thread_rounds > 0,
        "12 waiting threads activate the receive thread: {crowd:?}"
    );
    assert_eq!(setup.seen.key_requests.load(Ordering::SeqCst), 130);
}

#[test]
fn asynchronous_transactions_go_out_together_and_complete_by_callback() {
    let setup = setup("async", Duration::ZERO);
    let cluster = Cluster::connect_with(&setup.connect, options(8)).expect("connects");
    let session = cluster.session().expect("session");
    let kv = session.table("kv").expect("table");
    let done = Arc::new(Mutex::new(Vec::new()));
    for k in 0..300i64 {
        let tx = session.begin().expect("begin");
        tx.write(&kv, &[("k", Value::Int(k)), ("v", Value::Int(k))])
            .expect("write");
        let done = Arc::clone(&done);
        session
            .prepare(tx, ExecMode::Commit, move |outcome| {
                done.lock()
                    .expect("lock")
                    .push((k, outcome.map(|o| o.committed)));
            })
            .expect("prepared");
    }
    let tx = session.begin().expect("begin");
    tx.write(&kv, &[("k", Value::Int(1)), ("v", Value::Int(1))])
        .expect("write");
    let refused = session
        .prepare(tx, ExecMode::NoCommit, |_| {})
        .expect_err("NoCommit is not asynchronous");
    assert!(refused.is_permanent());
    let writes_before = cluster.stats().write_calls;
    assert_eq!(session.send().expect("sent"), 300);
    assert!(
        cluster.stats().write_calls - writes_before < 10,
        "300 requests in a few writes"
    );
    let mut completed = 0;
    while completed < 300 {
        let n = session.poll(300 - completed, Duration::from_secs(10));
        assert!(n > 0, "progress");
        completed += n;
    }
    let done = done.lock().expect("lock");
    assert_eq!(done.len(), 300);
    assert!(done.iter().all(|(_, r)| *r == Ok(true)));
    assert_eq!(session.in_flight(), 0);
}

/// Most heap allocations (and reallocations) one asynchronous read may
/// cost the thread that prepares, sends and polls it, once the session is
/// warm: the row's values, decoded when the test reads them, and the
/// reply's buffer, which is smaller here than the thread's payload buffers
/// keep (`signal::buffers::BUFFER_KEPT_BYTES_MIN`; a wider row's comes
/// back from them when its row drops). The transaction's state and buffers
/// come from the session's spares, the outcome's one result is inline.
/// (Before transaction buffers were pooled, `skarv bench flex` made about
/// 23 per transaction, counted over the whole process; this bound was 5.)
const ALLOCATIONS_PER_READ_MAX: u64 = 2;

#[test]
fn tagged_transactions_complete_in_order_of_tags_with_few_allocations() {
    const ROUND: usize = 200;
    const ROUNDS_WARM: usize = 2;
    const ROUNDS_MEASURED: usize = 5;
    let setup = setup("tagged", Duration::ZERO);
    let cluster = Cluster::connect_with(&setup.connect, options(8)).expect("connects");
    let session = cluster.session().expect("session");
    let kv = session.table("kv").expect("table");
    let mut out = Vec::with_capacity(ROUND);
    let mut seen = [false; ROUND];
    let mut keys = vec![[Value::Int(0)]; ROUND];
    let mut round = |base: i64| {
        for (i, key) in keys.iter_mut().enumerate() {
            key[0] = Value::Int(base + i as i64);
            let tx = session.begin_with_hint(&kv, key).expect("begin");
            tx.read(&kv, key, LockMode::Committed).expect("read");
            session
                .prepare_tagged(tx, ExecMode::Commit, i as u64)
                .expect("prepared");
        }
        assert_eq!(session.send().expect("sent"), ROUND);
        let mut completed = 0;
        while completed < ROUND {
            let n = session.poll(ROUND - completed, Duration::from_secs(10));
            assert!(n > 0, "progress");
            completed += n;
        }
        assert_eq!(session.take_completed(&mut out), ROUND);
        assert_eq!(session.in_flight(), 0);
        seen.fill(false);
        for (tag, outcome) in out.drain(..) {
            let i = usize::try_from(tag).expect("a small tag");
            assert!(!seen[i], "tag {tag} completed twice");
            seen[i] = true;
            let outcome = outcome.expect("committed");
            assert!(outcome.committed);
            let Some(skarv_client::OpResult::Row(row)) = outcome.results().first() else {
                panic!("tag {tag}: a row, got {:?}", outcome.results())
            };
            assert_eq!(
                row.values(),
                &[
                    Value::Int(base + i as i64),
                    Value::Int((base + i as i64) * 10)
                ]
            );
        }
        assert!(seen.iter().all(|s| *s), "every tag completed");
    };
    for r in 0..ROUNDS_WARM {
        round((r * ROUND) as i64);
    }
    let before = allocations();
    for r in ROUNDS_WARM..ROUNDS_WARM + ROUNDS_MEASURED {
        round((r * ROUND) as i64);
    }
    let per_read = (allocations() - before) / (ROUND * ROUNDS_MEASURED) as u64;
    assert!(
        per_read <= ALLOCATIONS_PER_READ_MAX,
        "{per_read} allocations per asynchronous read (at most {ALLOCATIONS_PER_READ_MAX})"
    );
    // Outcomes not taken count against the session's limit.
    let tx = session.begin().expect("begin");
    tx.read(&kv, &[Value::Int(1)], LockMode::Committed)
        .expect("read");
    session
        .prepare_tagged(tx, ExecMode::Commit, 1)
        .expect("prepared");
    session.send().expect("sent");
    assert_eq!(session.poll(1, Duration::from_secs(10)), 1);
    assert_eq!(session.in_flight(), 0, "completed, not taken");
    assert_eq!(session.take_completed(&mut out), 1);
    assert_eq!(out[0].0, 1);
}

#[test]
fn several_sessions_send_their_transactions_in_one_write_per_connection() {
    const SESSIONS: usize = 4;
    let setup = setup("send-all", Duration::ZERO);
    let cluster = Cluster::connect_with(&setup.connect, options(8)).expect("connects");
    let other = Cluster::connect_with(&setup.connect, options(8)).expect("connects");
    let mut sessions: Vec<_> = (0..SESSIONS)
        .map(|_| cluster.session().expect("session"))
        .collect();
    sessions.push(other.session().expect("session"));
    let kv = sessions[0].table("kv").expect("table");
    for (i, session) in sessions.iter().enumerate() {
        for j in 0..2 {
            let key = [Value::Int((10 * i + j) as i64)];
            let tx = session.begin_with_hint(&kv, &key).expect("begin");
            tx.read(&kv, &key, LockMode::Committed).expect("read");
            session
                .prepare_tagged(tx, ExecMode::Commit, j as u64)
                .expect("prepared");
        }
    }
    let requests_before = setup.seen.key_requests.load(Ordering::SeqCst);
    let (writes, other_writes) = (cluster.stats().write_calls, other.stats().write_calls);
    let refs: Vec<&skarv_client::Session> = sessions.iter().collect();
    assert_eq!(
        skarv_client::send_all(&refs).expect("sent"),
        2 * (SESSIONS + 1)
    );
    assert_eq!(
        cluster.stats().write_calls - writes,
        1,
        "the first connection's sessions share one write"
    );
    assert_eq!(other.stats().write_calls - other_writes, 1);
    let mut out = Vec::new();
    for (i, session) in sessions.iter().enumerate() {
        let mut completed = 0;
        while completed < 2 {
            let n = session.poll(2 - completed, Duration::from_secs(10));
            assert!(n > 0, "progress");
            completed += n;
        }
        out.clear();
        assert_eq!(session.take_completed(&mut out), 2);
        for (tag, outcome) in out.drain(..) {
            let outcome = outcome.expect("committed");
            let Some(skarv_client::OpResult::Row(row)) = outcome.results().first() else {
                panic!("session {i} tag {tag}: a row, got {:?}", outcome.results())
            };
            let k = (10 * i as u64 + tag) as i64;
            assert_eq!(row.values(), &[Value::Int(k), Value::Int(k * 10)]);
        }
        // Each session counts its own requests, bytes and commits.
        let stats = session.stats();
        assert_eq!(stats.exec, 2, "session {i}");
        assert_eq!(stats.trans_commit, 2, "session {i}");
        assert!(stats.bytes_sent > 0, "session {i}");
        assert_eq!(session.in_flight(), 0);
    }
    assert_eq!(
        setup.seen.key_requests.load(Ordering::SeqCst) - requests_before,
        2 * (SESSIONS + 1) as u64
    );
    // Sent by themselves, the same make one write per session.
    let writes = cluster.stats().write_calls;
    for session in &sessions[..SESSIONS] {
        let tx = session.begin().expect("begin");
        tx.read(&kv, &[Value::Int(1)], LockMode::Committed)
            .expect("read");
        session
            .prepare_tagged(tx, ExecMode::Commit, 9)
            .expect("prepared");
        session.send().expect("sent");
        assert_eq!(session.poll(1, Duration::from_secs(10)), 1);
        out.clear();
        session.take_completed(&mut out);
    }
    assert_eq!(cluster.stats().write_calls - writes, SESSIONS as u64);
}

#[test]
fn executes_started_later_go_out_together_and_keep_their_transactions_open() {
    let setup = setup("later", Duration::ZERO);
    let cluster = Cluster::connect_with(&setup.connect, options(8)).expect("connects");
    let sessions: Vec<_> = (0..3)
        .map(|_| cluster.session().expect("session"))
        .collect();
    let kv = sessions[0].table("kv").expect("table");
    let txs: Vec<_> = sessions.iter().map(|s| s.begin().expect("begin")).collect();
    let mut started = Vec::new();
    for (i, tx) in txs.iter().enumerate() {
        let key = [Value::Int(i as i64 + 1)];
        let read = tx.read(&kv, &key, LockMode::Committed).expect("read");
        started.push((read, tx.execute_later(ExecMode::NoCommit).expect("started")));
    }
    let writes = cluster.stats().write_calls;
    let refs: Vec<&skarv_client::Session> = sessions.iter().collect();
    assert_eq!(skarv_client::send_all(&refs).expect("sent"), 3);
    assert_eq!(cluster.stats().write_calls - writes, 1, "one write for all");
    for (i, (tx, (read, later))) in txs.iter().zip(started).enumerate() {
        let outcome = tx.finish_later(later).expect("answered");
        let k = i as i64 + 1;
        assert_eq!(
            outcome.row(read).map(|r| r.values().to_vec()),
            Some(vec![Value::Int(k), Value::Int(k * 10)])
        );
        assert!(!outcome.committed, "the transaction stays open");
        assert_eq!(sessions[i].stats().wait_exec_complete, 1);
    }
    for tx in &txs {
        assert!(tx.execute(ExecMode::Commit).expect("commit").committed);
    }
    // Finishing one nobody sent sends it.
    let tx = sessions[0].begin().expect("begin");
    tx.read(&kv, &[Value::Int(9)], LockMode::Committed)
        .expect("read");
    let later = tx.execute_later(ExecMode::Commit).expect("started");
    assert!(tx.finish_later(later).expect("answered").committed);
}

/// A minimal executor: polls on this thread, parks until woken.
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let std::task::Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        std::thread::park_timeout(Duration::from_millis(100));
    }
}

#[test]
fn a_future_executes_and_a_lost_node_gives_the_ndb_error() {
    let setup = setup("future", Duration::ZERO);
    let cluster = Cluster::connect_with(&setup.connect, options(8)).expect("connects");
    let session = cluster.session().expect("session");
    let kv = session.table("kv").expect("table");
    let tx = session.begin().expect("begin");
    let read = tx
        .read(&kv, &[Value::Int(3)], LockMode::Committed)
        .expect("read");
    let outcome = block_on(tx.execute_async(ExecMode::NoCommit)).expect("executes");
    assert_eq!(
        outcome.row(read).and_then(|r| r.get("v")),
        Some(&Value::Int(30))
    );
    tx.write(&kv, &[("k", Value::Int(3)), ("v", Value::Int(1))])
        .expect("write");
    setup.seen.drop_on_commit.store(true, Ordering::SeqCst);
    let error = tx
        .execute(ExecMode::Commit)
        .expect_err("the node went away with the commit");
    assert_eq!(error.code, codes::NODE_FAILURE, "{error}");
    assert!(error.is_unknown_result());
    // The connection thread reconnects; the session goes on.
    assert_eq!(cluster.wait_until_ready(Duration::from_secs(10)), 1);
    let tx = session.begin().expect("begin");
    tx.write(&kv, &[("k", Value::Int(4)), ("v", Value::Int(1))])
        .expect("write");
    assert!(
        tx.execute(ExecMode::Commit)
            .expect("commits after the reconnect")
            .committed
    );
}

/// Asynchronous transactions whose node goes away before it answers end
/// with NDB's error (a commit: unknown result, 4010), those that wait too
/// long with 4012 (and their late answers are dropped), and the session
/// goes on.
#[test]
fn asynchronous_transactions_lost_with_their_node_or_too_late_end_with_ndbs_errors() {
    let setup = setup("async-lost", Duration::ZERO);
    let cluster = Cluster::connect_with(&setup.connect, options(8)).expect("connects");
    let session = cluster.session().expect("session");
    let kv = session.table("kv").expect("table");
    let prepare = |tag: u64| {
        let tx = session.begin().expect("begin");
        let k = tag as i64;
        tx.write(&kv, &[("k", Value::Int(k)), ("v", Value::Int(k))])
            .expect("write");
        session
            .prepare_tagged(tx, ExecMode::Commit, tag)
            .expect("prepared");
    };
    // The stand-in closes the connection on the first commit: the frame's
    // other requests are lost unanswered with it.
    setup.seen.drop_on_commit.store(true, Ordering::SeqCst);
    for tag in 0..5 {
        prepare(tag);
    }
    assert_eq!(session.send().expect("sent"), 5);
    let mut completed = 0;
    while completed < 5 {
        let n = session.poll(5 - completed, Duration::from_secs(10));
        assert!(n > 0, "progress");
        completed += n;
    }
    assert_eq!(session.in_flight(), 0);
    let mut out = Vec::new();
    assert_eq!(session.take_completed(&mut out), 5);
    out.sort_by_key(|(tag, _)| *tag);
    for (tag, outcome) in &out {
        let error = outcome.as_ref().expect_err("lost with the node");
        assert_eq!(error.code, codes::NODE_FAILURE, "tag {tag}: {error}");
        assert!(error.is_unknown_result());
        assert!(error.to_string().contains("was lost"), "{error}");
    }
    // The connection thread reconnects; asynchronous transactions go on.
    assert_eq!(cluster.wait_until_ready(Duration::from_secs(10)), 1);
    prepare(5);
    assert_eq!(session.send().expect("sent"), 1);
    assert_eq!(session.poll(1, Duration::from_secs(10)), 1);
    out.clear();
    session.take_completed(&mut out);
    assert!(out[0].1.as_ref().expect("commits").committed);

    // Answers that take longer than the request timeout: the stand-in holds
    // them until the request has expired.
    let late = crate::setup("async-late", Duration::ZERO);
    late.seen.hold_confs(true);
    let options = ClusterOptions {
        request_timeout: Duration::from_millis(30),
        ..options(8)
    };
    let cluster = Cluster::connect_with(&late.connect, options).expect("connects");
    let session = cluster.session().expect("session");
    let kv = session.table("kv").expect("table");
    let tx = session.begin().expect("begin");
    tx.read(&kv, &[Value::Int(1)], LockMode::Committed)
        .expect("read");
    session
        .prepare_tagged(tx, ExecMode::Commit, 7)
        .expect("prepared");
    assert_eq!(session.send().expect("sent"), 1);
    // No answer can come while they are held: the wait ends empty, three
    // request timeouts after the send, and expires the request, which the
    // next poll completes at once.
    assert_eq!(session.poll(1, Duration::from_millis(100)), 0);
    assert_eq!(session.poll(1, Duration::ZERO), 1);
    out.clear();
    session.take_completed(&mut out);
    let error = out[0].1.as_ref().expect_err("expired");
    assert_eq!(error.code, codes::REQUEST_TIMEOUT, "{error}");
    assert_eq!(session.in_flight(), 0);
    // The late answer comes and is dropped; nothing completes twice. Polls
    // go on until the client has received it (bounded), each completing
    // nothing.
    let received = cluster.stats().signals_received;
    late.seen.hold_confs(false);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while late.seen.confs_sent.load(Ordering::SeqCst) == 0
        || cluster.stats().signals_received == received
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the late answer never reached the client"
        );
        assert_eq!(session.poll(1, Duration::from_millis(10)), 0);
    }
    assert_eq!(session.poll(1, Duration::ZERO), 0);
    assert_eq!(session.in_flight(), 0);
}

/// A dropped transaction's state (kept by the session for the next one)
/// comes back empty: the next transaction has none of its operations, its
/// own id, and is open even if the dropped one had ended.
#[test]
fn a_dropped_transactions_state_serves_the_next_one_emptied() {
    let setup = setup("reuse", Duration::ZERO);
    let cluster = Cluster::connect_with(&setup.connect, options(8)).expect("connects");
    let session = cluster.session().expect("session");
    let kv = session.table("kv").expect("table");
    let dropped = session.begin().expect("begin");
    for k in 0..3 {
        dropped
            .write(&kv, &[("k", Value::Int(k)), ("v", Value::Int(k))])
            .expect("write");
    }
    assert_eq!(dropped.pending_ops(), 3);
    let dropped_id = dropped.id();
    drop(dropped);
    let ops_before = setup.seen.ops.load(Ordering::SeqCst);
    let tx = session.begin().expect("begin");
    assert_eq!(tx.pending_ops(), 0, "none of the dropped one's operations");
    assert_ne!(tx.id(), dropped_id);
    let read = tx
        .read(&kv, &[Value::Int(2)], LockMode::Committed)
        .expect("read");
    let outcome = tx.execute(ExecMode::Commit).expect("commits");
    assert_eq!(outcome.results().len(), 1);
    assert_eq!(
        outcome.row(read).and_then(|r| r.get("v")),
        Some(&Value::Int(20))
    );
    assert_eq!(setup.seen.ops.load(Ordering::SeqCst), ops_before + 1);
    // Committed, then dropped: the next transaction is open.
    drop(tx);
    let tx = session.begin().expect("begin");
    tx.write(&kv, &[("k", Value::Int(5)), ("v", Value::Int(5))])
        .expect("an open transaction takes operations");
    assert!(tx.execute(ExecMode::Commit).expect("commits").committed);
    // Two at once have their own states.
    let (a, b) = (session.begin().expect("a"), session.begin().expect("b"));
    a.delete(&kv, &[Value::Int(1)]).expect("delete");
    assert_eq!((a.pending_ops(), b.pending_ops()), (1, 0));
}
