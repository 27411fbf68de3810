//! The SQL node's connection pool and thread pool through real clients:
//! every cluster connection of the pool is an API node `skarv admin show`
//! lists; 2,000 idle connections hold no thread each and all answer while
//! a few others are busy; a statement that runs long lets its thread group
//! start another worker (the stall limit); `KILL` ends an idle connection
//! at once.

mod common;

use std::time::{Duration, Instant};

use common::Sandbox;
use mysql::prelude::Queryable;
use mysql::{Conn, OptsBuilder};

/// Idle connections held open at once.
const IDLE_CONNECTIONS: usize = 2_000;
/// Cluster connections of the SQL node.
const POOL: u64 = 3;
/// Statements a thread group runs at once before its stall limit.
const PER_GROUP: usize = sql::thread_pool::GROUP_STATEMENTS_MAX;
/// How long the long statements run, in s; a short one must not wait
/// for them (the stall limit is 500 ms).
const LONG_STATEMENT_S: u64 = 8;
/// Busy clients beside the idle ones.
const BUSY_CLIENTS: usize = 4;
/// Threads the SQL node may have besides its workers and pollers (the
/// cluster connections' receive and send threads, the listener, …).
const THREADS_BESIDES_POOL: usize = 64;

fn connect(port: u16) -> mysql::Result<Conn> {
    Conn::new(
        OptsBuilder::new()
            .ip_or_hostname(Some("127.0.0.1"))
            .tcp_port(port)
            .user(Some("root"))
            .prefer_socket(false),
    )
}

/// Threads of process `pid`.
fn threads_of(pid: u64) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("/proc/<pid>/task")
        .count()
}

/// Resident memory of process `pid`, in bytes.
fn rss_of(pid: u64) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|kb| kb.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmRSS")
        * 1024
}

#[test]
fn idle_connections_hold_no_thread_and_the_pool_is_in_admin_show() {
    let pool = POOL.to_string();
    let sandbox = Sandbox::start_configured(
        "sql-pool",
        45_500,
        2,
        &["--sql-nodes", "1", "--sql-connection-pool", &pool],
    );
    let port = sandbox.sql_port();
    let pid = sandbox.sql_pid();

    // Every cluster connection of the pool is an API node of the cluster.
    let show = sandbox.show();
    let mut ids: Vec<u64> = show["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .filter(|node| node["pid"].as_u64() == Some(pid) && node["state"] == "started")
        .filter_map(|node| node["id"].as_u64())
        .collect();
    ids.sort_unstable();
    assert_eq!(ids.len() as u64, POOL, "{show}");
    let mut probe = connect(port).expect("probe");
    let (size, listed, handling, groups): (u64, String, String, usize) = probe
        .query_first(
            "SELECT @@ndb_cluster_connection_pool, @@ndb_cluster_connection_pool_nodeids, \
             @@thread_handling, @@thread_pool_size",
        )
        .expect("variables")
        .expect("a row");
    assert_eq!(size, POOL);
    let mut listed: Vec<u64> = listed
        .split(',')
        .map(|id| id.parse().expect("id"))
        .collect();
    listed.sort_unstable();
    assert_eq!(listed, ids);
    assert_eq!(handling, "pool-of-threads");
    probe.query_drop("CREATE DATABASE pool").expect("database");
    probe
        .query_drop("CREATE TABLE pool.t (id INT PRIMARY KEY, n INT)")
        .expect("table");
    probe
        .query_drop("INSERT INTO pool.t VALUES (1, 0), (2, 0), (3, 0), (4, 0), (7, 7)")
        .expect("rows");

    // 2,000 idle connections: no thread each.
    let rss_before = rss_of(pid);
    let mut idle: Vec<Conn> = (0..IDLE_CONNECTIONS)
        .map(|i| connect(port).unwrap_or_else(|e| panic!("connection {i}: {e}")))
        .collect();
    let rss_after = rss_of(pid);
    let threads = threads_of(pid);
    eprintln!(
        "{IDLE_CONNECTIONS} idle connections: {threads} threads, {} bytes of RSS each",
        rss_after.saturating_sub(rss_before) / IDLE_CONNECTIONS as u64
    );
    assert!(
        threads < THREADS_BESIDES_POOL + groups * (1 + PER_GROUP),
        "{threads} threads for {IDLE_CONNECTIONS} idle connections"
    );

    // A few busy clients update in transactions while every idle
    // connection answers.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let busy: Vec<_> = (0..BUSY_CLIENTS)
        .map(|at| {
            let stop = std::sync::Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut conn = connect(port).expect("busy client");
                let mut done = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    conn.query_drop("BEGIN").expect("begin");
                    conn.exec_drop("UPDATE pool.t SET n = n + 1 WHERE id = ?", (at + 1,))
                        .expect("update");
                    conn.query_drop("COMMIT").expect("commit");
                    done += 1;
                }
                done
            })
        })
        .collect();
    for (i, conn) in idle.iter_mut().enumerate() {
        let id: Option<u32> = conn
            .query_first("SELECT id FROM pool.t WHERE id = 7")
            .unwrap_or_else(|e| panic!("connection {i}: {e}"));
        assert_eq!(id, Some(7), "connection {i}");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let updates: u64 = busy
        .into_iter()
        .map(|b| b.join().expect("busy client"))
        .sum();
    let total: Option<u64> = probe
        .query_first("SELECT SUM(n) FROM pool.t WHERE id <= 4")
        .expect("sum");
    assert_eq!(total, Some(updates), "every committed update is there");

    // Statements that run long (more than every group runs at once) let
    // the groups start more workers: a short one still answers at once.
    let sleepers: Vec<_> = idle
        .drain(..groups * PER_GROUP * 2)
        .map(|mut conn| {
            std::thread::spawn(move || {
                conn.query_drop(format!("SELECT SLEEP({LONG_STATEMENT_S})"))
                    .expect("sleep");
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(100)); // let the sleeps start
    let asked = Instant::now();
    for conn in idle.iter_mut().take(16) {
        let one: Option<u32> = conn.query_first("SELECT 1").expect("select 1");
        assert_eq!(one, Some(1));
    }
    let waited = asked.elapsed();
    assert!(
        waited < Duration::from_secs(LONG_STATEMENT_S - 3),
        "short statements waited {waited:?} behind long ones"
    );

    // KILL ends an idle connection at once.
    let mut victim = idle.pop().expect("a connection");
    let victim_id = victim.connection_id();
    common::kill_and_wait_gone(&mut probe, victim_id);
    assert!(victim.ping().is_err(), "the killed connection is closed");
    for sleeper in sleepers {
        sleeper.join().expect("sleeper");
    }
    drop(idle);
    common::wait_threads_connected(&mut probe, 1);
}

/// One status figure of `conn` (`global` or the session's).
fn status_of(conn: &mut Conn, global: bool, name: &str) -> u64 {
    let scope = if global { "GLOBAL" } else { "SESSION" };
    let row: Option<(String, String)> = conn
        .query_first(format!("SHOW {scope} STATUS LIKE '{name}'"))
        .expect("show status");
    let (_, value) = row.unwrap_or_else(|| panic!("status {name}"));
    value.parse().expect("a number")
}

/// Point selects (prepared, then text) of many clients at once: a worker of the thread
/// pool sends the reads of the connections it serves together (one write
/// per data node, one round trip for all), and every client still gets its
/// own row (or none) and its own counters. A read of a transaction is
/// batched only while it takes no lock.
#[test]
fn point_selects_of_many_clients_go_to_the_data_nodes_in_batches() {
    const CLIENTS: usize = 12;
    const SELECTS: usize = 150;
    const ROWS: usize = 100;
    const IN_TRANSACTION: usize = 10;
    let sandbox = Sandbox::start_configured("sql-batch", 47_500, 2, &["--sql-nodes", "1"]);
    let port = sandbox.sql_port();
    let mut probe = connect(port).expect("probe");
    probe.query_drop("CREATE DATABASE b").expect("database");
    probe
        .query_drop(
            "CREATE TABLE b.t (id INT PRIMARY KEY, u INT NOT NULL, c VARCHAR(20), UNIQUE KEY (u))",
        )
        .expect("table");
    let values: Vec<String> = (1..=ROWS)
        .map(|id| format!("({id}, {}, 'row-{id}')", id + 1000))
        .collect();
    probe
        .query_drop(format!("INSERT INTO b.t VALUES {}", values.join(", ")))
        .expect("rows");
    let reads_before = status_of(&mut probe, true, "Threadpool_batched_reads");
    let batches_before = status_of(&mut probe, true, "Threadpool_batches");
    let clients: Vec<_> = (0..CLIENTS)
        .map(|client| {
            std::thread::spawn(move || {
                let mut conn = connect(port).expect("client");
                let by_id = conn
                    .prep("SELECT c, id FROM b.t WHERE id = ?")
                    .expect("prepare");
                let by_u = conn
                    .prep("SELECT id FROM b.t WHERE u = ?")
                    .expect("prepare");
                for i in 0..SELECTS {
                    // Some keys have no row.
                    let id = (client * 7 + i) % (ROWS + 10) + 1;
                    let row: Option<(String, u64)> =
                        conn.exec_first(&by_id, (id,)).expect("select by id");
                    let wanted = (id <= ROWS).then(|| (format!("row-{id}"), id as u64));
                    assert_eq!(row, wanted, "client {client} id {id}");
                    let found: Option<u64> =
                        conn.exec_first(&by_u, (id + 1000,)).expect("select by u");
                    assert_eq!(found, (id <= ROWS).then_some(id as u64), "u {}", id + 1000);
                }
                // Every statement counted on its own session.
                assert_eq!(
                    status_of(&mut conn, false, "Ndb_api_pk_op_count_session"),
                    SELECTS as u64
                );
                assert_eq!(
                    status_of(&mut conn, false, "Com_stmt_execute"),
                    2 * SELECTS as u64
                );
            })
        })
        .collect();
    for client in clients {
        client.join().expect("a client thread");
    }
    let reads = status_of(&mut probe, true, "Threadpool_batched_reads") - reads_before;
    let batches = status_of(&mut probe, true, "Threadpool_batches") - batches_before;
    eprintln!("{reads} reads in {batches} batches");
    // A connection whose input waits while its group is busy (or came
    // before it was parked) is queued and served as a batch of one: every
    // read goes the batch's way.
    assert_eq!(reads, (2 * CLIENTS * SELECTS) as u64, "batched reads");
    assert!(
        batches < reads,
        "some batch held two reads or more: {batches} batches"
    );
    // Inside a transaction a read without a lock is batched too; once the
    // transaction wrote, its reads lock (they see its writes) and are not:
    // they could wait for a lock of another connection of the batch.
    let mut conn = connect(port).expect("client");
    let by_id = conn
        .prep("SELECT c FROM b.t WHERE id = ?")
        .expect("prepare");
    let before = status_of(&mut probe, true, "Threadpool_batched_reads");
    conn.query_drop("BEGIN").expect("begin");
    for id in 1..=IN_TRANSACTION {
        let c: Option<String> = conn.exec_first(&by_id, (id,)).expect("select");
        assert_eq!(c, Some(format!("row-{id}")));
    }
    let unlocked = status_of(&mut probe, true, "Threadpool_batched_reads") - before;
    assert!(
        unlocked > 0,
        "reads of a transaction that did not write go in batches"
    );
    conn.exec_drop("UPDATE b.t SET c = 'changed' WHERE id = ?", (1,))
        .expect("update");
    let before = status_of(&mut probe, true, "Threadpool_batched_reads");
    for id in 1..=IN_TRANSACTION {
        let c: Option<String> = conn.exec_first(&by_id, (id,)).expect("select");
        let wanted = if id == 1 {
            "changed".to_owned()
        } else {
            format!("row-{id}")
        };
        assert_eq!(c, Some(wanted), "the transaction sees its own write");
    }
    let locked = status_of(&mut probe, true, "Threadpool_batched_reads") - before;
    assert_eq!(locked, 0, "no locking read batched");
    conn.query_drop("COMMIT").expect("commit");

    // The text protocol's point selects go in batches too, answered as
    // text rows, each counted on its own session.
    let reads_before = status_of(&mut probe, true, "Threadpool_batched_reads");
    let batches_before = status_of(&mut probe, true, "Threadpool_batches");
    let clients: Vec<_> = (0..CLIENTS)
        .map(|client| {
            std::thread::spawn(move || {
                let mut conn = connect(port).expect("client");
                // The driver's own SELECT @@… at connect counts too.
                let selects_before = status_of(&mut conn, false, "Com_select");
                for i in 0..SELECTS {
                    let id = (client * 5 + i) % (ROWS + 10) + 1;
                    let row: Option<(String, u64)> = conn
                        .query_first(format!("select c, id from b.t where id = {id}"))
                        .expect("text select by id");
                    // Row 1 holds the write committed above.
                    let c = if id == 1 {
                        "changed".to_owned()
                    } else {
                        format!("row-{id}")
                    };
                    let wanted = (id <= ROWS).then_some((c, id as u64));
                    assert_eq!(row, wanted, "client {client} id {id}");
                }
                let selects = status_of(&mut conn, false, "Com_select") - selects_before;
                assert_eq!(selects, SELECTS as u64);
                assert_eq!(
                    status_of(&mut conn, false, "Ndb_api_pk_op_count_session"),
                    SELECTS as u64
                );
            })
        })
        .collect();
    for client in clients {
        client.join().expect("a client thread");
    }
    let reads = status_of(&mut probe, true, "Threadpool_batched_reads") - reads_before;
    let batches = status_of(&mut probe, true, "Threadpool_batches") - batches_before;
    eprintln!("text: {reads} reads in {batches} batches");
    assert_eq!(reads, (CLIENTS * SELECTS) as u64, "batched text reads");
    assert!(
        batches < reads,
        "some batch held two text reads or more: {batches} batches"
    );
}
