//! Measures how long commits stall when a data node fails or hangs:
//! `--threads` sessions update rows in a loop for `--seconds`, and the
//! program prints the longest gap between two successful commits (of any
//! thread), the gaps above `--report-ms`, and the errors by code.
//!
//! ```sh
//! cargo run --release -p skarv-client --example commit_gaps -- \
//!     --connect 127.0.0.1:21860 --seconds 30 &
//! kill -STOP <pid of a data node>   # later: kill -CONT
//! ```

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use skarv_client::schema_types::{Column, ColumnType, TableDef};
use skarv_client::{codes, Cluster, ExecMode, Value};

const TABLE: &str = "commit_gaps";
/// Rows the threads update (spread over every partition).
const ROWS: i64 = 1_000;

#[derive(Parser)]
struct Args {
    #[arg(long)]
    connect: String,
    #[arg(long, default_value_t = 4)]
    threads: usize,
    #[arg(long, default_value_t = 30)]
    seconds: u64,
    /// Gaps longer than this are listed.
    #[arg(long, default_value_t = 200)]
    report_ms: u64,
}

fn main() {
    let args = Args::parse();
    if let Err(error) = run(&args) {
        eprintln!("commit_gaps: {error}");
        std::process::exit(1);
    }
}

fn run(args: &Args) -> Result<(), skarv_client::Error> {
    let cluster = Cluster::connect(&args.connect)?;
    let session = cluster.session()?;
    match session.drop_table(TABLE) {
        Ok(()) => {}
        Err(e) if e.code == codes::NO_SUCH_TABLE => {}
        Err(e) => return Err(e),
    }
    let def = TableDef::new(
        TABLE,
        0,
        vec![
            Column::new("k", ColumnType::BigInt { unsigned: false }),
            Column::new("v", ColumnType::BigInt { unsigned: false }),
        ],
    )
    .primary_key(vec![0])
    .partitions(0);
    session.create_table(&def)?;
    let table = session.table(TABLE)?;
    let tx = session.begin()?;
    for k in 0..ROWS {
        tx.insert(&table, &[("k", Value::Int(k)), ("v", Value::Int(0))])?;
    }
    tx.execute(ExecMode::Commit)?;
    let start = Instant::now();
    let end = start + Duration::from_secs(args.seconds);
    let commits: Arc<Mutex<Vec<Duration>>> = Arc::default();
    let errors: Arc<Mutex<BTreeMap<u32, u64>>> = Arc::default();
    let threads: Vec<_> = (0..args.threads)
        .map(|t| {
            let (cluster, commits, errors) =
                (cluster.clone(), Arc::clone(&commits), Arc::clone(&errors));
            std::thread::spawn(move || -> Result<(), skarv_client::Error> {
                let session = cluster.session()?;
                let table = session.table(TABLE)?;
                let mut k = t as i64;
                while Instant::now() < end {
                    k = (k + 7) % ROWS;
                    let key = [Value::Int(k)];
                    let done = session.begin_with_hint(&table, &key).and_then(|tx| {
                        tx.update(&table, &key, &[("v", Value::Int(k))])?;
                        tx.execute(ExecMode::Commit)
                    });
                    match done {
                        Ok(_) => commits.lock().expect("lock").push(start.elapsed()),
                        Err(e) => *errors.lock().expect("lock").entry(e.code).or_default() += 1,
                    }
                }
                Ok(())
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("a load thread")?;
    }
    let mut commits = std::mem::take(&mut *commits.lock().expect("lock"));
    commits.sort();
    let mut longest = (Duration::ZERO, Duration::ZERO);
    let mut previous = Duration::ZERO;
    for &at in commits.iter().chain(std::iter::once(&start.elapsed())) {
        let gap = at - previous;
        if gap > longest.0 {
            longest = (gap, previous);
        }
        if gap > Duration::from_millis(args.report_ms) {
            println!(
                "gap {} ms from {:.3} s",
                gap.as_millis(),
                previous.as_secs_f64()
            );
        }
        previous = at;
    }
    println!(
        "commits {} longest_gap_ms {} at_s {:.3} errors {:?}",
        commits.len(),
        longest.0.as_millis(),
        longest.1.as_secs_f64(),
        errors.lock().expect("lock")
    );
    Ok(())
}
