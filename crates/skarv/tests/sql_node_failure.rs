//! A data node killed under SQL load (issue 20): a sandbox of 4 data nodes
//! (2 node groups × 2 replicas) and a SQL node, writers moving money
//! between accounts in transactions through the `mysql` crate, and one data
//! node SIGKILLed (its angel too, so it stays down). The test asserts that
//! - every error a writer sees is one MySQL clients retry (1297, the
//!   cluster's temporary error; 1205/1213) or says the commit's outcome is
//!   unknown (1180), and the writers commit again soon after the kill;
//! - nothing committed is lost and nothing is half done: the balances
//!   still sum to what they started at, every transfer acknowledged is in
//!   the history, and every transfer in the history was acknowledged or had
//!   an unknown outcome.

mod common;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{sigkill, Sandbox};
use mysql::prelude::Queryable;
use mysql::{Conn, OptsBuilder};

const ACCOUNTS: u32 = 100;
const BALANCE: i64 = 1_000;
const WRITERS: u64 = 4;
/// Commits (all writers) before the kill, so it lands in a steady load.
const COMMITS_BEFORE_KILL: usize = 200;
/// Commits after the kill that show the writers go on.
const COMMITS_AFTER_KILL_MIN: usize = 100;
/// The writers must commit again this soon after the kill (generous for
/// CI's two slow cores; the goal is about a second).
const PROGRESS_AFTER_KILL_MAX: Duration = Duration::from_secs(15);
/// Bound on the whole run.
const RUN_MAX: Duration = Duration::from_secs(120);
/// The data node killed: one of the second node group's.
const KILLED: u64 = 4;

fn connect(port: u16) -> Conn {
    let opts = OptsBuilder::new()
        .ip_or_hostname(Some("127.0.0.1"))
        .tcp_port(port)
        .user(Some("root"))
        .prefer_socket(false)
        .db_name(Some("bank"));
    Conn::new(opts).expect("connect to the SQL node")
}

/// MySQL errors a client retries after a node failure, and 1180 (the
/// commit's outcome is unknown).
fn retryable(code: u16) -> bool {
    matches!(code, 1297 | 1205 | 1213 | 1180)
}

/// What the writers share.
#[derive(Default)]
struct Tally {
    committed: AtomicUsize,
    acknowledged: Mutex<BTreeSet<u64>>,
    unknown: Mutex<BTreeSet<u64>>,
    errors: Mutex<Vec<(Instant, u16, String)>>,
    last_commit: Mutex<Option<Instant>>,
}

/// One transfer, `id` its history row: Ok(true) committed, Ok(false) rolled
/// back by a retryable error, Err for any other error.
fn transfer(conn: &mut Conn, id: u64, tally: &Tally) -> Result<bool, String> {
    let from = (id * 7) % u64::from(ACCOUNTS);
    let to = (id * 13 + 1) % u64::from(ACCOUNTS);
    let amount = (id % 50) + 1;
    let statements = [
        "START TRANSACTION".to_owned(),
        format!("UPDATE accounts SET balance = balance - {amount} WHERE id = {from}"),
        format!("UPDATE accounts SET balance = balance + {amount} WHERE id = {to}"),
        format!("INSERT INTO history (id, from_id, to_id, amount) VALUES ({id}, {from}, {to}, {amount})"),
    ];
    for statement in &statements {
        if let Err(error) = conn.query_drop(statement) {
            return settle(conn, id, error, false, tally);
        }
    }
    match conn.query_drop("COMMIT") {
        Ok(()) => Ok(true),
        Err(error) => settle(conn, id, error, true, tally),
    }
}

fn settle(
    conn: &mut Conn,
    id: u64,
    error: mysql::Error,
    at_commit: bool,
    tally: &Tally,
) -> Result<bool, String> {
    let mysql::Error::MySqlError(e) = &error else {
        return Err(format!("transfer {id}: not a MySQL error: {error}"));
    };
    if !retryable(e.code) {
        return Err(format!("transfer {id}: {} {}", e.code, e.message));
    }
    if at_commit && e.code == 1180 {
        tally.unknown.lock().unwrap().insert(id);
    }
    tally
        .errors
        .lock()
        .unwrap()
        .push((Instant::now(), e.code, e.message.clone()));
    // The transaction is gone on the cluster; end it in the session too.
    let _ = conn.query_drop("ROLLBACK");
    Ok(false)
}

#[test]
fn a_data_node_killed_under_sql_load_loses_nothing() {
    let sandbox = Sandbox::start_configured("sql-failover", 29_800, 4, &["--sql-nodes", "1"]);
    let port = sandbox.sql_port();
    {
        let opts = OptsBuilder::new()
            .ip_or_hostname(Some("127.0.0.1"))
            .tcp_port(port)
            .user(Some("root"))
            .prefer_socket(false);
        let mut setup = Conn::new(opts).expect("connect");
        setup.query_drop("CREATE DATABASE bank").expect("database");
        setup
            .query_drop("CREATE TABLE bank.accounts (id INT PRIMARY KEY, balance BIGINT NOT NULL)")
            .expect("accounts");
        setup
            .query_drop(
                "CREATE TABLE bank.history (id BIGINT UNSIGNED PRIMARY KEY, from_id INT, \
                 to_id INT, amount INT)",
            )
            .expect("history");
        let rows: Vec<String> = (0..ACCOUNTS).map(|i| format!("({i}, {BALANCE})")).collect();
        setup
            .query_drop(format!(
                "INSERT INTO bank.accounts VALUES {}",
                rows.join(", ")
            ))
            .expect("the accounts");
    }

    let tally = Arc::new(Tally::default());
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (tally, stop) = (Arc::clone(&tally), Arc::clone(&stop));
            std::thread::spawn(move || -> Result<(), String> {
                let mut conn = connect(port);
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let id = w * 1_000_000 + n;
                    if transfer(&mut conn, id, &tally)? {
                        tally.acknowledged.lock().unwrap().insert(id);
                        tally.committed.fetch_add(1, Ordering::Relaxed);
                        *tally.last_commit.lock().unwrap() = Some(Instant::now());
                    }
                }
                Ok(())
            })
        })
        .collect();

    let began = Instant::now();
    let wait_commits = |n: usize| {
        while tally.committed.load(Ordering::Relaxed) < n {
            assert!(
                began.elapsed() < RUN_MAX,
                "the writers stalled at {n} commits"
            );
            assert!(!writers.iter().any(|w| w.is_finished()), "a writer failed");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    wait_commits(COMMITS_BEFORE_KILL);
    sigkill(sandbox.angel_pid(KILLED));
    sigkill(sandbox.pid(KILLED));
    let killed_at = Instant::now();
    let at_kill = tally.committed.load(Ordering::Relaxed);
    wait_commits(at_kill + COMMITS_AFTER_KILL_MIN);
    stop.store(true, Ordering::Relaxed);
    for writer in writers {
        writer
            .join()
            .expect("a writer thread")
            .expect("only retryable errors");
    }

    // How long the writers saw errors after the kill.
    let errors = tally.errors.lock().unwrap().clone();
    let after: Vec<_> = errors.iter().filter(|(at, ..)| *at >= killed_at).collect();
    let last_error = after.iter().map(|(at, ..)| *at).max();
    let window = last_error.map_or(Duration::ZERO, |at| at.duration_since(killed_at));
    eprintln!(
        "{} commits; {} retryable errors after the kill, the last {window:?} after it; codes {:?}",
        tally.committed.load(Ordering::Relaxed),
        after.len(),
        after
            .iter()
            .map(|(_, code, _)| *code)
            .collect::<BTreeSet<_>>()
    );
    assert!(
        window < PROGRESS_AFTER_KILL_MAX,
        "errors went on for {window:?} after the kill"
    );

    // Nothing lost, nothing half done.
    let mut check = connect(port);
    let sum: i64 = check
        .query_first("SELECT SUM(balance) FROM accounts")
        .expect("sum")
        .expect("a row");
    assert_eq!(
        sum,
        i64::from(ACCOUNTS) * BALANCE,
        "money is neither made nor lost"
    );
    let stored: BTreeSet<u64> = check
        .query::<u64, _>("SELECT id FROM history")
        .expect("history")
        .into_iter()
        .collect();
    let acknowledged = tally.acknowledged.lock().unwrap().clone();
    let unknown = tally.unknown.lock().unwrap().clone();
    let lost: Vec<_> = acknowledged.difference(&stored).collect();
    assert!(lost.is_empty(), "acknowledged transfers lost: {lost:?}");
    let unexplained: Vec<_> = stored
        .iter()
        .filter(|id| !acknowledged.contains(id) && !unknown.contains(id))
        .collect();
    assert!(
        unexplained.is_empty(),
        "transfers stored that were neither acknowledged nor of unknown outcome: {unexplained:?}"
    );
}
