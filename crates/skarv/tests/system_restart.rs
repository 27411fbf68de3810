//! Real processes: a system restart of 2 node groups × 2 replicas under a
//! bank workload (issue 6, item 5; docs/recovery.md, "System restart").
//! Threads move money between accounts, each transfer writing a history
//! row in the same transaction, and ask now and then that a transfer's GCI
//! be durable (`wait_durable`). Every data node is SIGKILLed at once; the
//! angels start them again and the cluster restores one GCI the cluster
//! completed. Then:
//! - the bank total is intact, and every balance is its opening balance
//!   plus the history rows that are there (replicas agree: the check reads
//!   every partition from one replica, then with one node of each group
//!   killed for good, from the other);
//! - every transfer whose GCI the client was told durable is there;
//! - every history row there is a transfer the client saw committed or
//!   whose outcome the kill swallowed.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use skarv_client::schema_types::{Column, ColumnType, TableDef};
use skarv_client::{Cluster, Epoch, ExecMode, LockMode, Row, ScanOptions, Session, Value};

use common::{sigkill, Sandbox};

const ACCOUNTS: i64 = 16;
const OPENING_BALANCE: i64 = 1_000;
const THREADS: u64 = 3;
/// Load before the kill.
const LOAD_BEFORE_KILL: Duration = Duration::from_millis(2_500);
/// Longest the data nodes may take to serve again after the kill.
const RESTART_MAX: Duration = Duration::from_secs(40);
/// Attempts of a read while the cluster comes back.
const READ_ATTEMPTS_MAX: u32 = 200;
const DATA_NODES: [u64; 4] = [2, 3, 4, 5];

fn bigint(name: &str) -> Column {
    Column::new(name, ColumnType::BigInt { unsigned: false })
}

fn int_of(row: &Row, column: &str) -> i64 {
    match row.get(column) {
        Some(Value::Int(v)) => *v,
        other => panic!("column {column}: {other:?}"),
    }
}

/// What the threads saw.
#[derive(Default)]
struct Log {
    /// Transfers seen committed: id → (from, to, amount, GCI).
    committed: BTreeMap<i64, (i64, i64, i64, u32)>,
    /// Transfers whose outcome is unknown (the kill came during them).
    unknown: BTreeSet<i64>,
    /// Transfers whose GCI `wait_durable` said durable.
    durable: BTreeSet<i64>,
}

/// One transfer; `Ok(Some(epoch))` when committed.
fn transfer(
    session: &Session,
    id: i64,
    from: i64,
    to: i64,
    amount: i64,
) -> skarv_client::Result<Option<Epoch>> {
    let accounts = session.table("sr_accounts")?;
    let history = session.table("sr_history")?;
    let tx = session.begin_with_hint(&accounts, &[Value::Int(from)])?;
    let mut balances = BTreeMap::new();
    for account in [from.min(to), from.max(to)] {
        let read = tx.read(&accounts, &[Value::Int(account)], LockMode::Exclusive)?;
        let outcome = tx.execute(ExecMode::NoCommit)?;
        let row = outcome.row(read).expect("every account exists");
        balances.insert(account, int_of(row, "balance"));
    }
    tx.update(
        &accounts,
        &[Value::Int(from)],
        &[("balance", Value::Int(balances[&from] - amount))],
    )?;
    tx.update(
        &accounts,
        &[Value::Int(to)],
        &[("balance", Value::Int(balances[&to] + amount))],
    )?;
    tx.insert(
        &history,
        &[
            ("id", Value::Int(id)),
            ("from_account", Value::Int(from)),
            ("to_account", Value::Int(to)),
            ("amount", Value::Int(amount)),
        ],
    )?;
    let outcome = tx.execute(ExecMode::Commit)?;
    Ok(outcome.epoch.filter(|_| outcome.committed))
}

/// Transfers until `stop`; temporary errors are retried before the kill.
/// After an error once `killed` is set, the transfer's outcome is unknown
/// and the thread ends.
fn run_thread(
    cluster: &Cluster,
    thread: u64,
    stop: &AtomicBool,
    killed: &AtomicBool,
    log: &Mutex<Log>,
) {
    let session = cluster.session().expect("session");
    let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ (thread + 1).wrapping_mul(0xff51_afd7_ed55_8ccd);
    let mut next = move |n: u64| {
        seed ^= seed >> 12;
        seed ^= seed << 25;
        seed ^= seed >> 27;
        seed.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    };
    let mut n = 0i64;
    while !stop.load(Ordering::Acquire) {
        let id = thread as i64 * 1_000_000 + n;
        n += 1;
        let from = next(ACCOUNTS as u64) as i64;
        let to = (from + 1 + next(ACCOUNTS as u64 - 1) as i64) % ACCOUNTS;
        let amount = 1 + next(100) as i64;
        loop {
            let was_killed = killed.load(Ordering::Acquire);
            match transfer(&session, id, from, to, amount) {
                Ok(Some(epoch)) => {
                    let gci = epoch.hi();
                    log.lock()
                        .unwrap()
                        .committed
                        .insert(id, (from, to, amount, gci));
                    if n % 4 == 0 {
                        if let Ok(durable) = session.wait_durable(epoch) {
                            if durable >= gci && !was_killed {
                                log.lock().unwrap().durable.insert(id);
                            }
                        }
                    }
                    break;
                }
                Ok(None) => panic!("transfer {id}: not committed, no error"),
                Err(_) if killed.load(Ordering::Acquire) => {
                    log.lock().unwrap().unknown.insert(id);
                    return;
                }
                Err(error) if error.is_temporary() => std::thread::sleep(Duration::from_millis(5)),
                Err(error) => panic!("transfer {id} before the kill: {error}"),
            }
        }
    }
}

/// The balances and the history rows, read in one transaction; retried
/// while the cluster comes back.
/// Balances by account; history rows by id: (from, to, amount).
type Bank = (BTreeMap<i64, i64>, BTreeMap<i64, (i64, i64, i64)>);

fn read_bank(connect: &str) -> Bank {
    let mut last = String::new();
    let mut cluster: Option<Cluster> = None;
    for _ in 0..READ_ATTEMPTS_MAX {
        if cluster.is_none() {
            match Cluster::connect(connect) {
                Ok(c) => cluster = Some(c),
                Err(error) => last = error.to_string(),
            }
        }
        let attempt = |cluster: &Cluster| -> skarv_client::Result<_> {
            let session = cluster.session()?;
            let accounts = session.table("sr_accounts")?;
            let history = session.table("sr_history")?;
            let tx = session.begin()?;
            let mut balances = BTreeMap::new();
            for row in tx.scan(&accounts, ScanOptions::default())? {
                let row = row?;
                balances.insert(int_of(&row, "id"), int_of(&row, "balance"));
            }
            let mut rows = BTreeMap::new();
            for row in tx.scan(&history, ScanOptions::default())? {
                let row = row?;
                rows.insert(
                    int_of(&row, "id"),
                    (
                        int_of(&row, "from_account"),
                        int_of(&row, "to_account"),
                        int_of(&row, "amount"),
                    ),
                );
            }
            tx.execute(ExecMode::Commit)?;
            Ok((balances, rows))
        };
        let Some(c) = &cluster else {
            std::thread::sleep(Duration::from_millis(200));
            continue;
        };
        match attempt(c) {
            Ok(read) => return read,
            Err(error) => last = error.to_string(),
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("the bank cannot be read: {last}");
}

fn check(
    log: &Log,
    balances: &BTreeMap<i64, i64>,
    rows: &BTreeMap<i64, (i64, i64, i64)>,
    when: &str,
) {
    assert_eq!(
        balances.len() as i64,
        ACCOUNTS,
        "{when}: every account is there"
    );
    assert_eq!(
        balances.values().sum::<i64>(),
        ACCOUNTS * OPENING_BALANCE,
        "{when}: the bank total"
    );
    let mut expected: BTreeMap<i64, i64> = (0..ACCOUNTS).map(|id| (id, OPENING_BALANCE)).collect();
    for (id, &(from, to, amount)) in rows {
        assert!(
            log.committed
                .get(id)
                .is_some_and(|c| (c.0, c.1, c.2) == (from, to, amount))
                || log.unknown.contains(id),
            "{when}: history row {id} is no transfer the client committed or lost"
        );
        *expected.get_mut(&from).expect("from") -= amount;
        *expected.get_mut(&to).expect("to") += amount;
    }
    assert_eq!(
        *balances, expected,
        "{when}: every balance is explained by the history"
    );
    for id in &log.durable {
        assert!(
            rows.contains_key(id),
            "{when}: transfer {id} was told durable, it is gone"
        );
    }
}

#[test]
fn a_sigkill_of_every_data_node_keeps_the_bank_and_every_durable_transfer() {
    let sandbox = Sandbox::start_with("sysrestart", 28_000, 4);
    let cluster = Cluster::connect(&sandbox.connect).expect("connect");
    let session = cluster.session().expect("session");
    let accounts = TableDef::new("sr_accounts", 0, vec![bigint("id"), bigint("balance")])
        .primary_key(vec![0])
        .partitions(0);
    let history = TableDef::new(
        "sr_history",
        0,
        vec![
            bigint("id"),
            bigint("from_account"),
            bigint("to_account"),
            bigint("amount"),
        ],
    )
    .primary_key(vec![0])
    .partitions(0);
    session.create_table(&accounts).expect("create accounts");
    session.create_table(&history).expect("create history");
    let table = session.table("sr_accounts").expect("accounts");
    let tx = session.begin().expect("begin");
    for id in 0..ACCOUNTS {
        tx.insert(
            &table,
            &[
                ("id", Value::Int(id)),
                ("balance", Value::Int(OPENING_BALANCE)),
            ],
        )
        .expect("insert account");
    }
    let opened = tx.execute(ExecMode::Commit).expect("open the accounts");
    session
        .wait_durable(opened.epoch.expect("an epoch"))
        .expect("the accounts are durable");

    let log = Mutex::new(Log::default());
    let (stop, killed) = (AtomicBool::new(false), AtomicBool::new(false));
    let pids: Vec<u64> = DATA_NODES.iter().map(|&n| sandbox.pid(n)).collect();
    std::thread::scope(|scope| {
        for thread in 0..THREADS {
            let (cluster, stop, killed, log) = (&cluster, &stop, &killed, &log);
            scope.spawn(move || run_thread(cluster, thread, stop, killed, log));
        }
        std::thread::sleep(LOAD_BEFORE_KILL);
        killed.store(true, Ordering::Release);
        for &pid in &pids {
            sigkill(pid);
        }
        stop.store(true, Ordering::Release);
    });
    let log = log.into_inner().unwrap();
    assert!(
        log.committed.len() > 20 && !log.durable.is_empty(),
        "{} transfers committed",
        log.committed.len()
    );

    // The angels start every node again.
    let start = Instant::now();
    loop {
        let show = sandbox.show();
        let started = DATA_NODES.iter().zip(&pids).all(|(&id, &old)| {
            show["nodes"].as_array().is_some_and(|nodes| {
                nodes
                    .iter()
                    .any(|n| n["id"] == id && n["state"] == "started" && n["pid"] != old)
            })
        });
        if started {
            break;
        }
        assert!(
            start.elapsed() < RESTART_MAX,
            "the data nodes do not start again; logs under {}",
            sandbox.dir.display()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let (balances, rows) = read_bank(&sandbox.connect);
    check(&log, &balances, &rows, "after the system restart");
    // The master chose one restart GCI (the first start was one to GCI 0).
    let restarts: Vec<String> = std::fs::read_dir(&sandbox.dir)
        .expect("the sandbox directory")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .flat_map(|text| {
            text.lines()
                .filter(|l| l.contains("system restart to GCI") && l.contains("done"))
                .filter(|l| !l.contains("to GCI 0 done"))
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(restarts.len(), 1, "one system restart: {restarts:?}");

    // The other replica: one node of each group down for good (its angel first).
    for id in [2u64, 4] {
        let pid = sandbox.pid(id);
        sigkill(sandbox.angel_pid(id));
        sigkill(pid);
        std::thread::sleep(Duration::from_secs(1));
    }
    let (balances_other, rows_other) = read_bank(&sandbox.connect);
    assert_eq!(
        (&balances_other, &rows_other),
        (&balances, &rows),
        "the other replicas hold the same"
    );
}
