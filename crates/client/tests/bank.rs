//! The bank-transfer test (issue 4): threads move money between accounts
//! in transactions on a real sandbox (two data nodes, two replicas), with
//! random rollbacks and injected failing operations. Every transfer writes
//! a history row in the same transaction, so at the end the total is
//! unchanged and every balance is its opening balance plus what the
//! committed history rows moved in and out of it — nothing more, nothing
//! less. Needs the `skarv` binary (`cargo build -p skarv`, or `SKARV_BIN`).

use std::collections::BTreeMap;
use std::sync::Arc;

use skarv_client::schema_types::{Column, ColumnType, TableDef};
use skarv_client::{codes, Cluster, ExecMode, LockMode, Row, ScanOptions, Session, Table, Value};

mod common;
use common::*;

const ACCOUNTS: i64 = 16;
const OPENING_BALANCE: i64 = 1_000;
const THREADS: u64 = 4;
const TRANSFERS_PER_THREAD: u64 = 40;
/// Retries of one transfer after temporary errors (lock-wait timeouts).
const RETRIES_MAX: u32 = 20;

fn bigint(name: &str) -> Column {
    Column::new(name, ColumnType::BigInt { unsigned: false })
}

fn int_of(row: &Row, column: &str) -> i64 {
    match row.get(column) {
        Some(Value::Int(v)) => *v,
        other => panic!("column {column}: {other:?}"),
    }
}

/// What one attempt of a transfer did.
enum Attempt {
    Committed,
    RolledBack,
    /// Failed with this error; retried when temporary.
    Failed(skarv_client::Error),
}

/// One transfer: lock both accounts (lower id first, so transfers never
/// wait for each other in a cycle), move the money, record it, then
/// commit — or roll back, or fail on purpose with an operation that must
/// fail (a second history row with the same id: duplicate key).
fn transfer(
    session: &Session,
    accounts: &Arc<Table>,
    history: &Arc<Table>,
    id: i64,
    (from, to, amount): (i64, i64, i64),
    fate: u64,
) -> Attempt {
    let tx = match session.begin_with_hint(accounts, &[Value::Int(from)]) {
        Ok(tx) => tx,
        Err(error) => return Attempt::Failed(error),
    };
    let result = (|| {
        let mut balances = BTreeMap::new();
        for account in [from.min(to), from.max(to)] {
            let read = tx.read(accounts, &[Value::Int(account)], LockMode::Exclusive)?;
            let outcome = tx.execute(ExecMode::NoCommit)?;
            let row = outcome.row(read).expect("every account exists");
            balances.insert(account, int_of(row, "balance"));
        }
        tx.update(
            accounts,
            &[Value::Int(from)],
            &[("balance", Value::Int(balances[&from] - amount))],
        )?;
        tx.update(
            accounts,
            &[Value::Int(to)],
            &[("balance", Value::Int(balances[&to] + amount))],
        )?;
        let record = [
            ("id", Value::Int(id)),
            ("from_account", Value::Int(from)),
            ("to_account", Value::Int(to)),
            ("amount", Value::Int(amount)),
        ];
        tx.insert(history, &record)?;
        match fate {
            0 => {
                tx.execute(ExecMode::Rollback)?;
                Ok(Attempt::RolledBack)
            }
            1 => {
                // Injected failure: the same history row twice.
                tx.insert(history, &record)?;
                tx.execute(ExecMode::Commit)?;
                panic!("transfer {id}: a duplicate history row committed");
            }
            _ => {
                tx.execute(ExecMode::Commit)?;
                Ok(Attempt::Committed)
            }
        }
    })();
    result.unwrap_or_else(Attempt::Failed)
}

#[derive(Default, Debug)]
struct Tally {
    committed: u64,
    rolled_back: u64,
    injected: u64,
    retried: u64,
}

fn run_thread(cluster: &Cluster, thread: u64) -> Tally {
    let session = cluster.session().expect("session");
    let accounts = session.table("bank_accounts").expect("accounts");
    let history = session.table("bank_history").expect("history");
    let mut rng =
        testkit::Rng::new(0x9e37_79b9_7f4a_7c15 ^ (thread + 1).wrapping_mul(0xff51_afd7_ed55_8ccd));
    let mut tally = Tally::default();
    for n in 0..TRANSFERS_PER_THREAD {
        let id = (thread * TRANSFERS_PER_THREAD + n) as i64;
        let from = rng.below(ACCOUNTS as u64) as i64;
        let to = (from + 1 + rng.below(ACCOUNTS as u64 - 1) as i64) % ACCOUNTS;
        let amount = 1 + rng.below(100) as i64;
        // One in ten rolled back, one in ten failing on purpose.
        let fate = rng.below(10);
        let mut retries = 0;
        loop {
            match transfer(&session, &accounts, &history, id, (from, to, amount), fate) {
                Attempt::Committed => tally.committed += 1,
                Attempt::RolledBack => tally.rolled_back += 1,
                Attempt::Failed(error) if fate == 1 && error.code == codes::DUPLICATE_KEY => {
                    tally.injected += 1;
                }
                Attempt::Failed(error) if error.is_temporary() && retries < RETRIES_MAX => {
                    retries += 1;
                    tally.retried += 1;
                    continue;
                }
                Attempt::Failed(error) => panic!("transfer {id} (thread {thread}): {error}"),
            }
            break;
        }
    }
    tally
}

#[test]
fn transfers_keep_the_total_and_every_balance_is_explained_by_the_history() {
    let sandbox = Sandbox::start("bank", 2, 2, 24000);
    let cluster = Cluster::connect(&sandbox.connect).expect("connect");
    let session = cluster.session().expect("session");
    let accounts_def = TableDef::new("bank_accounts", 0, vec![bigint("id"), bigint("balance")])
        .primary_key(vec![0])
        .partitions(0);
    let history_def = TableDef::new(
        "bank_history",
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
    session
        .create_table(&accounts_def)
        .expect("create accounts");
    session.create_table(&history_def).expect("create history");
    let accounts = session.table("bank_accounts").expect("accounts");
    let tx = session.begin().expect("begin");
    for id in 0..ACCOUNTS {
        tx.insert(
            &accounts,
            &[
                ("id", Value::Int(id)),
                ("balance", Value::Int(OPENING_BALANCE)),
            ],
        )
        .expect("insert account");
    }
    tx.execute(ExecMode::Commit).expect("open the accounts");

    // One cluster connection (API node), one session per thread, as NDB
    // applications do.
    let tallies: Vec<Tally> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..THREADS)
            .map(|thread| {
                let cluster = &cluster;
                scope.spawn(move || run_thread(cluster, thread))
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().expect("a transfer thread panicked"))
            .collect()
    });
    let committed: u64 = tallies.iter().map(|t| t.committed).sum();
    let attempted_fates: u64 = tallies
        .iter()
        .map(|t| t.committed + t.rolled_back + t.injected)
        .sum();
    assert_eq!(attempted_fates, THREADS * TRANSFERS_PER_THREAD);
    assert!(committed > 0, "no transfer committed: {tallies:?}");

    // Read everything back in one transaction with full scans.
    let history = session.table("bank_history").expect("history");
    let tx = session.begin().expect("begin");
    let balances: BTreeMap<i64, i64> = tx
        .scan(&accounts, ScanOptions::default())
        .expect("scan accounts")
        .map(|row| {
            let row = row.expect("account row");
            (int_of(&row, "id"), int_of(&row, "balance"))
        })
        .collect();
    let mut expected: BTreeMap<i64, i64> = (0..ACCOUNTS).map(|id| (id, OPENING_BALANCE)).collect();
    let mut history_rows = 0u64;
    for row in tx
        .scan(&history, ScanOptions::default())
        .expect("scan history")
    {
        let row = row.expect("history row");
        let amount = int_of(&row, "amount");
        *expected
            .get_mut(&int_of(&row, "from_account"))
            .expect("from") -= amount;
        *expected.get_mut(&int_of(&row, "to_account")).expect("to") += amount;
        history_rows += 1;
    }
    tx.execute(ExecMode::Commit)
        .expect("end the reading transaction");

    assert_eq!(
        history_rows, committed,
        "one history row per committed transfer, none for rolled back or failed ones"
    );
    assert_eq!(
        balances.values().sum::<i64>(),
        ACCOUNTS * OPENING_BALANCE,
        "the total never changes"
    );
    assert_eq!(
        balances, expected,
        "every balance is its opening balance plus the committed transfers"
    );
}
