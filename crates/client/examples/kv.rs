//! A first program on the native API: create a table, insert, read,
//! update, delete and scan rows, print what happened, drop the table.
//!
//! `cargo run --release -p skarv-client --example kv -- --connect HOST:PORT`

use clap::Parser;
use skarv_client::schema_types::{Collation, Column, ColumnType, TableDef};
use skarv_client::{codes, Cluster, ExecMode, LockMode, ScanOptions, Value};

/// The example's table; dropped at the end (and first, if a run left it).
const TABLE: &str = "kv_example";

#[derive(Parser)]
struct Args {
    /// The management server, `host:port`.
    #[arg(long)]
    connect: String,
}

fn main() {
    let args = Args::parse();
    if let Err(error) = run(&args.connect) {
        eprintln!("kv: {error}");
        std::process::exit(1);
    }
}

fn run(connect: &str) -> Result<(), skarv_client::Error> {
    let cluster = Cluster::connect(connect)?;
    println!(
        "connected as API node {} to data nodes {:?}",
        cluster.node_id(),
        cluster.live_nodes()
    );
    let session = cluster.session()?;
    match session.drop_table(TABLE) {
        Ok(()) => println!("dropped `{TABLE}` left by an earlier run"),
        Err(e) if e.code == codes::NO_SUCH_TABLE => {}
        Err(e) => return Err(e),
    }
    let text = ColumnType::VarChar {
        max: 64,
        collation: Collation::Utf8mb4Bin,
    };
    let def = TableDef::new(
        TABLE,
        0,
        vec![
            Column::new("k", ColumnType::BigInt { unsigned: false }),
            Column::new("v", text),
        ],
    )
    .primary_key(vec![0])
    .partitions(0);
    let id = session.create_table(&def)?;
    let kv = session.table(TABLE)?;
    println!(
        "created table `{TABLE}` (id {id}, {} partitions)",
        kv.def().partitions
    );

    let tx = session.begin()?;
    for k in 1..=10i64 {
        tx.insert(
            &kv,
            &[
                ("k", Value::Int(k)),
                ("v", Value::String(format!("value {k}"))),
            ],
        )?;
    }
    let outcome = tx.execute(ExecMode::Commit)?;
    let epoch = outcome.epoch.expect("a commit has its epoch");
    let durable = session.wait_durable(epoch)?;
    println!(
        "inserted 10 rows in one batch (committed in epoch {epoch}: global checkpoint {}, \
         durable up to {durable})",
        epoch.hi()
    );

    let tx = session.begin_with_hint(&kv, &[Value::Int(3)])?;
    let read = tx.read(&kv, &[Value::Int(3)], LockMode::Committed)?;
    let outcome = tx.execute(ExecMode::Commit)?;
    println!(
        "read k=3 on node {}: v={}",
        tx.node(),
        show(outcome.row(read).and_then(|r| r.get("v")))
    );

    let tx = session.begin_with_hint(&kv, &[Value::Int(3)])?;
    tx.update(
        &kv,
        &[Value::Int(3)],
        &[("v", Value::String("three".into()))],
    )?;
    tx.delete(&kv, &[Value::Int(4)])?;
    tx.execute(ExecMode::Commit)?;
    println!("updated k=3, deleted k=4");

    let tx = session.begin()?;
    let mut rows = Vec::new();
    for row in tx.scan(&kv, ScanOptions::default())? {
        let row = row?;
        rows.push((row.get("k").cloned(), row.get("v").cloned()));
    }
    tx.execute(ExecMode::Commit)?;
    rows.sort_by_key(|(k, _)| match k {
        Some(Value::Int(k)) => *k,
        _ => i64::MAX,
    });
    println!("scanned {} rows:", rows.len());
    for (k, v) in &rows {
        println!("  k={} v={}", show(k.as_ref()), show(v.as_ref()));
    }
    let three = rows.iter().find(|(k, _)| *k == Some(Value::Int(3)));
    let four = rows.iter().find(|(k, _)| *k == Some(Value::Int(4)));
    if rows.len() != 9
        || three.map(|r| &r.1) != Some(&Some(Value::String("three".into())))
        || four.is_some()
    {
        return Err(skarv_client::Error::new(
            codes::BAD_OPERATION,
            "the scan does not show the changes made",
        ));
    }
    session.drop_table(TABLE)?;
    println!("dropped table `{TABLE}`");
    Ok(())
}

/// A value as SQL would print it.
fn show(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => "NULL".to_owned(),
        Some(Value::Int(v)) => v.to_string(),
        Some(Value::UInt(v)) => v.to_string(),
        Some(Value::String(v)) => format!("'{v}'"),
        Some(other) => format!("{other:?}"),
    }
}
