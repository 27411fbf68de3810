//! DDL while DML runs, through real SQL nodes: ALTER TABLE (online and
//! copying), on one SQL node while clients of another update, read and
//! count the table. Nothing acknowledged is lost, nothing is counted
//! twice, and the writers only see the errors a MySQL client retries.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{wait_for, Sandbox};
use mysql::prelude::Queryable;
use mysql::{Conn, OptsBuilder};

const ROWS: u64 = 2_000;
const WRITERS: u64 = 3;
/// Errors a writer may see while the table changes under it: the
/// definition changed (1412, retry), the name unknown between a copy's
/// two renames (1146), a lock wait (1205), a retryable cluster error.
const RETRIED: [u16; 4] = [1412, 1146, 1205, 1297];

/// root's connection to the SQL node on `port`, in database `db`.
fn connect_to(port: u16, db: Option<&str>) -> Conn {
    let opts = OptsBuilder::new()
        .ip_or_hostname(Some("127.0.0.1"))
        .tcp_port(port)
        .user(Some("root"))
        .db_name(db)
        .prefer_socket(false);
    Conn::new(opts).expect("connect")
}

fn connect(port: u16) -> Conn {
    connect_to(port, Some("ddl"))
}

fn code(e: &mysql::Error) -> u16 {
    match e {
        mysql::Error::MySqlError(e) => e.code,
        other => panic!("not a MySQL error: {other:?}"),
    }
}

#[test]
fn alters_under_updates_from_another_sql_node_lose_nothing() {
    let sandbox = Sandbox::start_configured("sql-ddl", 35_500, 2, &["--sql-nodes", "2"]);
    let (first, second) = (sandbox.sql_port_of(0), sandbox.sql_port_of(1));
    let mut admin = connect_to(first, None);
    admin.query_drop("CREATE DATABASE ddl").unwrap();
    admin
        .query_drop("CREATE TABLE ddl.t (id INT PRIMARY KEY, v INT NOT NULL, pad VARCHAR(20))")
        .unwrap();
    for chunk in (0..ROWS).collect::<Vec<_>>().chunks(200) {
        let values: Vec<String> = chunk.iter().map(|i| format!("({i}, 0, 'p{i}')")).collect();
        admin
            .query_drop(format!("INSERT INTO ddl.t VALUES {}", values.join(",")))
            .unwrap();
    }

    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let acked: Arc<Mutex<HashMap<u64, u64>>> = Arc::default();
    let unknown: Arc<Mutex<HashMap<u64, u64>>> = Arc::default();
    let failures: Arc<Mutex<Vec<String>>> = Arc::default();
    let mut threads = Vec::new();
    for w in 0..WRITERS {
        let (stop, done, acked, unknown, failures) = (
            stop.clone(),
            done.clone(),
            acked.clone(),
            unknown.clone(),
            failures.clone(),
        );
        threads.push(std::thread::spawn(move || {
            let mut conn = connect(second);
            let mut i = w;
            while !stop.load(Ordering::Relaxed) {
                let id = (i * 7) % ROWS;
                i += WRITERS;
                match conn.query_drop(format!("UPDATE t SET v = v + 1 WHERE id = {id}")) {
                    Ok(()) if conn.affected_rows() == 1 => {
                        *acked.lock().unwrap().entry(id).or_default() += 1;
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(()) => failures
                        .lock()
                        .unwrap()
                        .push(format!("row {id}: updated {} rows", conn.affected_rows())),
                    Err(e) if code(&e) == 1180 => {
                        *unknown.lock().unwrap().entry(id).or_default() += 1;
                    }
                    Err(e) if RETRIED.contains(&code(&e)) => {}
                    Err(e) => failures.lock().unwrap().push(format!("row {id}: {e}")),
                }
            }
        }));
    }
    {
        let (stop, failures) = (stop.clone(), failures.clone());
        threads.push(std::thread::spawn(move || {
            let mut conn = connect(second);
            while !stop.load(Ordering::Relaxed) {
                match conn.query_first::<u64, _>("SELECT COUNT(*) FROM t") {
                    Ok(Some(n)) if n == ROWS => {}
                    Ok(n) => failures.lock().unwrap().push(format!("count {n:?}")),
                    Err(e) if RETRIED.contains(&code(&e)) => {}
                    Err(e) => failures.lock().unwrap().push(format!("count: {e}")),
                }
            }
        }));
    }

    // Each change waits for the writers to make progress after the last,
    // so every change runs under load and none starves the writers.
    let progress = |what: &str| {
        let from = done.load(Ordering::Relaxed);
        wait_for(what, Duration::from_secs(60), || {
            done.load(Ordering::Relaxed) >= from + 100
        });
    };
    progress("updates before the first ALTER");
    for alter in [
        // Copying: a retyped column, a dropped one, a UNIQUE key on rows.
        "ALTER TABLE ddl.t MODIFY v BIGINT NOT NULL",
        "ALTER TABLE ddl.t DROP COLUMN pad",
        // Online: a column and an index added, a column renamed back.
        "ALTER TABLE ddl.t ADD COLUMN w INT NULL",
        "ALTER TABLE ddl.t ADD INDEX iv (v)",
        "ALTER TABLE ddl.t ADD UNIQUE KEY uw (w, id)",
        "ALTER TABLE ddl.t RENAME COLUMN w TO w2",
    ] {
        admin
            .query_drop(alter)
            .unwrap_or_else(|e| panic!("{alter}: {e}"));
        progress(alter);
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    let failures = failures.lock().unwrap();
    assert!(failures.is_empty(), "unexpected answers: {failures:?}");

    // Every acknowledged update is there once; an unknown outcome may be.
    let rows: Vec<(u64, u64)> = admin.query("SELECT id, v FROM ddl.t").unwrap();
    assert_eq!(rows.len() as u64, ROWS);
    let (acked, unknown) = (acked.lock().unwrap(), unknown.lock().unwrap());
    for (id, v) in rows {
        let low = acked.get(&id).copied().unwrap_or(0);
        let high = low + unknown.get(&id).copied().unwrap_or(0);
        assert!(
            (low..=high).contains(&v),
            "row {id}: v = {v}, {low} acknowledged, {} unknown",
            high - low
        );
    }
    let columns: Vec<String> = admin
        .query(
            "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'ddl' \
                AND TABLE_NAME = 't' ORDER BY ORDINAL_POSITION",
        )
        .unwrap();
    assert_eq!(columns, ["id", "v", "w2"]);
}

#[test]
fn an_idle_transaction_holding_locks_does_not_block_an_alter_or_stop_the_cluster() {
    let sandbox = Sandbox::start_configured("sql-ddl-idle", 35_600, 2, &["--sql-nodes", "2"]);
    let (first, second) = (sandbox.sql_port_of(0), sandbox.sql_port_of(1));
    let mut admin = connect_to(first, None);
    admin.query_drop("CREATE DATABASE ddl").unwrap();
    admin
        .query_drop("CREATE TABLE ddl.t (id INT PRIMARY KEY, v INT NOT NULL)")
        .unwrap();
    admin
        .query_drop("INSERT INTO ddl.t VALUES (1, 1), (2, 2)")
        .unwrap();

    // A client takes a lock and goes quiet with its transaction open.
    let mut idle = connect(second);
    idle.query_drop("BEGIN").unwrap();
    idle.query_drop("UPDATE t SET v = 100 WHERE id = 1")
        .unwrap();

    // The ALTER's data nodes ask the idle transaction's TC to abort it
    // after ALTER_ABORT_AFTER, rather than restarting after ALTER_WAIT_MAX.
    admin
        .query_drop("ALTER TABLE ddl.t ADD COLUMN w INT NULL")
        .expect("the alter goes through");
    for id in [2u64, 3] {
        let state = sandbox.state(id);
        assert_eq!(state, "started", "data node {id} kept running");
    }
    let commit = idle.query_drop("COMMIT");
    assert_eq!(
        commit.as_ref().map_err(code).err(),
        Some(1297),
        "the idle transaction was rolled back with a retryable error: {commit:?}"
    );
    let v: Option<u64> = admin
        .query_first("SELECT v FROM ddl.t WHERE id = 1")
        .unwrap();
    assert_eq!(v, Some(1), "the aborted update is not there");
    admin
        .query_drop("UPDATE ddl.t SET v = 5, w = 6 WHERE id = 2")
        .unwrap();
}
