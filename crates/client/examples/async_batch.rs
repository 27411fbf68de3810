//! Thousands of transactions in flight through the asynchronous API
//! (prepare many, send them in one go, poll for completions), printing the
//! rate.
//!
//! `cargo run --release -p skarv-client --example async_batch -- --connect HOST:PORT
//! [--transactions N] [--in-flight M]`

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use skarv_client::schema_types::{Column, ColumnType, TableDef};
use skarv_client::{codes, Cluster, ExecMode, Value, IN_FLIGHT_MAX};

const TABLE: &str = "async_batch_example";

#[derive(Parser)]
struct Args {
    /// The management server, `host:port`.
    #[arg(long)]
    connect: String,
    /// Transactions to run in all.
    #[arg(long, default_value_t = 20_000)]
    transactions: u64,
    /// Transactions in flight at once (at most the session's IN_FLIGHT_MAX).
    #[arg(long, default_value_t = 1_000)]
    in_flight: usize,
}

fn main() {
    let args = Args::parse();
    if let Err(error) = run(&args) {
        eprintln!("async_batch: {error}");
        std::process::exit(1);
    }
}

fn run(args: &Args) -> Result<(), skarv_client::Error> {
    let in_flight = args.in_flight.clamp(1, IN_FLIGHT_MAX);
    let cluster = Cluster::connect(&args.connect)?;
    let session = cluster.session()?;
    match session.drop_table(TABLE) {
        Ok(())
        | Err(skarv_client::Error {
            code: codes::NO_SUCH_TABLE,
            ..
        }) => {}
        Err(e) => return Err(e),
    }
    let def = TableDef::new(
        TABLE,
        0,
        vec![
            Column::new("k", ColumnType::BigInt { unsigned: true }),
            Column::new("v", ColumnType::BigInt { unsigned: true }),
        ],
    )
    .primary_key(vec![0])
    .partitions(0);
    session.create_table(&def)?;
    let table = session.table(TABLE)?;
    let committed = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut next = 0u64;
    let mut done = 0u64;
    while done < args.transactions {
        while next < args.transactions && session.in_flight() < in_flight {
            let key = [Value::UInt(next)];
            let tx = session.begin_with_hint(&table, &key)?;
            tx.write(
                &table,
                &[("k", Value::UInt(next)), ("v", Value::UInt(next * 2))],
            )?;
            let (committed, failed) = (Arc::clone(&committed), Arc::clone(&failed));
            session.prepare(tx, ExecMode::Commit, move |outcome| match outcome {
                Ok(o) if o.committed => {
                    committed.fetch_add(1, Ordering::Relaxed);
                }
                _ => {
                    failed.fetch_add(1, Ordering::Relaxed);
                }
            })?;
            next += 1;
        }
        session.send()?;
        done += session.poll(1, Duration::from_secs(30)) as u64;
    }
    let elapsed = start.elapsed();
    let committed = committed.load(Ordering::Relaxed);
    let failed = failed.load(Ordering::Relaxed);
    println!(
        "{committed} transactions committed, {failed} failed, {in_flight} in flight, in {:.3} s: {:.0} transactions/s",
        elapsed.as_secs_f64(),
        committed as f64 / elapsed.as_secs_f64().max(1e-9)
    );
    session.drop_table(TABLE)?;
    if failed > 0 {
        return Err(skarv_client::Error::new(
            codes::BAD_OPERATION,
            format!("{failed} transactions failed"),
        ));
    }
    Ok(())
}
