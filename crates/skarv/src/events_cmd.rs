//! `skarv events`: prints the change stream of some tables
//! (docs/events.md), the tool a user reaches for to see it work.
//!
//! Tables are named as the SQL node shows them, `database.table` (the
//! dictionary's `database/def/table`); a name without a dot is a native
//! table's own name. With `--json` each line is one JSON object: a change
//! `{"epoch": "<hi>/<lo>", "table": "db.t", "kind": "insert"|"update"|
//! "delete", "before": {…} or null, "after": {…} or null}`, the end of an
//! epoch `{"epoch": "<hi>/<lo>", "complete": true}`, a gap
//! `{"gap": {"from": "<hi>/<lo>", "to": "<hi>/<lo>"}}`, and after a
//! whole-cluster restart `{"restart": {"restored": "<hi>/<lo>", "resumed":
//! "<hi>/<lo>"}}` (the epochs printed before it above `restored` were
//! undone; the stream goes on after `resumed`, numbered anew).

use std::io::Write;

use clap::{Args, ValueEnum};
use serde_json::{json, Map, Value as Json};
use skarv_client::{
    ChangeKind, Cluster, Epoch, EpochChanges, Event, Images, RowChange, SchemaChange,
    SubscribeOptions, Value,
};

#[derive(Clone, Copy, Debug, ValueEnum)]
enum ImagesArg {
    /// Every column before and after.
    Full,
    /// Before: the key; after: the key and the changed columns.
    Minimal,
}

#[derive(Args)]
pub struct EventsArgs {
    /// The management server, `host:port`.
    #[arg(long, default_value = "localhost:1186", value_name = "HOST:PORT")]
    connect: String,
    /// A table to follow, `database.table` as SQL shows it (repeat for
    /// more).
    #[arg(long = "table", value_name = "DB.T", required = true)]
    tables: Vec<String>,
    /// Full or minimal row images.
    #[arg(long, value_enum, default_value = "full")]
    images: ImagesArg,
    /// One JSON object per line.
    #[arg(long)]
    json: bool,
    /// Bytes of changes buffered at most before a gap (the subscription's
    /// `max_alloc`).
    #[arg(long, value_name = "BYTES", default_value_t = skarv_client::events::MAX_ALLOC_DEFAULT_BYTES)]
    max_alloc: usize,
    /// Stop after this many epochs (0: run until killed).
    #[arg(long, value_name = "N", default_value_t = 0)]
    epochs: u64,
}

/// The dictionary's name of `db.t` (`db/def/t`); a name without a dot is
/// already one.
fn cluster_name(name: &str) -> String {
    match name.split_once('.') {
        Some((db, table)) => format!("{db}/def/{table}"),
        None => name.to_owned(),
    }
}

/// `db.t` for the dictionary's `db/def/t`; other names as they are.
fn sql_name(name: &str) -> String {
    match name.split_once("/def/") {
        Some((db, table)) => format!("{db}.{table}"),
        None => name.to_owned(),
    }
}

pub fn run(args: EventsArgs) -> Result<(), String> {
    crate::die_quietly_on_broken_pipe();
    crate::init_logging();
    let cluster =
        Cluster::connect(&args.connect).map_err(|e| format!("connect to {}: {e}", args.connect))?;
    let session = cluster.session().map_err(|e| e.to_string())?;
    let names: Vec<String> = args.tables.iter().map(|t| cluster_name(t)).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let options = SubscribeOptions {
        images: match args.images {
            ImagesArg::Full => Images::Full,
            ImagesArg::Minimal => Images::Minimal,
        },
        max_alloc: args.max_alloc,
        ..SubscribeOptions::default()
    };
    let subscription = session
        .subscribe(&names, options)
        .map_err(|e| format!("subscribe: {e}"))?;
    tracing::info!(
        "subscribed to {}; epochs after {}",
        args.tables.join(", "),
        subscription.start_epoch()
    );
    let stdout = std::io::stdout();
    let mut epochs = 0u64;
    for event in subscription {
        let event = event.map_err(|e| e.to_string())?;
        let mut out = stdout.lock();
        let written = match &event {
            Event::Epoch(e) => {
                epochs += 1;
                print_epoch(&mut out, e, args.json)
            }
            Event::Gap { from, to } => print_gap(&mut out, *from, *to, args.json),
            Event::Restart { restored, resumed } => {
                print_restart(&mut out, *restored, *resumed, args.json)
            }
        };
        written.map_err(|e| format!("stdout: {e}"))?;
        if args.epochs != 0 && epochs >= args.epochs {
            return Ok(());
        }
    }
    Err(
        "the subscription ended (a data node cut it off, or the cluster restarted again before it \
         could go on, or a restarted node was its node group's only one left): the gap above names \
         the epochs lost"
            .to_owned(),
    )
}

fn print_epoch(out: &mut impl Write, e: &EpochChanges, json: bool) -> std::io::Result<()> {
    let (epoch, changes) = (e.epoch, &e.changes);
    for (at, change) in changes.iter().enumerate() {
        for schema in e.schema.iter().filter(|s| s.at == at) {
            print_schema(out, epoch, schema, json)?;
        }
        if json {
            writeln!(out, "{}", change_json(epoch, change))?;
        } else {
            let image = |i: &Option<Vec<(&str, Value)>>| match i {
                None => "-".to_owned(),
                Some(cols) => Json::Object(image_json(cols)).to_string(),
            };
            writeln!(
                out,
                "{epoch} {} {} before={} after={}",
                change.kind.as_str(),
                sql_name(change.table),
                image(&change.before),
                image(&change.after)
            )?;
        }
    }
    for schema in e.schema.iter().filter(|s| s.at >= changes.len()) {
        print_schema(out, epoch, schema, json)?;
    }
    if json {
        writeln!(
            out,
            "{}",
            json!({"epoch": epoch.to_string(), "complete": true})
        )
    } else {
        writeln!(out, "{epoch} complete ({} changes)", changes.len())
    }
}

/// A schema event: `{"epoch": "<hi>/<lo>", "table": "db.t", "schema":
/// "alter"|"drop"|"replace", "version": N}`, where it falls among the epoch's
/// changes.
fn print_schema(
    out: &mut impl Write,
    epoch: Epoch,
    schema: &SchemaChange,
    json: bool,
) -> std::io::Result<()> {
    let table = sql_name(&schema.table);
    if json {
        let line = json!({
            "epoch": epoch.to_string(),
            "table": table,
            "schema": schema.kind.as_str(),
            "version": schema.version,
        });
        writeln!(out, "{line}")
    } else {
        writeln!(
            out,
            "{epoch} {} {table} (version {})",
            schema.kind.as_str(),
            schema.version
        )
    }
}

fn print_gap(out: &mut impl Write, from: Epoch, to: Epoch, json: bool) -> std::io::Result<()> {
    if json {
        let gap = json!({"gap": {"from": from.to_string(), "to": to.to_string()}});
        writeln!(out, "{gap}")
    } else {
        writeln!(out, "gap: epochs {from} to {to} lost")
    }
}

/// The cluster restarted from disk: which epochs stand, where the stream
/// goes on (`Event::Restart`).
fn print_restart(
    out: &mut impl Write,
    restored: Epoch,
    resumed: Epoch,
    json: bool,
) -> std::io::Result<()> {
    if json {
        let restart =
            json!({"restart": {"restored": restored.to_string(), "resumed": resumed.to_string()}});
        writeln!(out, "{restart}")
    } else {
        writeln!(
            out,
            "restart: the cluster restarted from disk; epochs up to {restored} stand, later ones \
             printed were undone; the stream goes on after {resumed}"
        )
    }
}

/// One change as the JSON line of issue 22.
fn change_json(epoch: Epoch, change: &RowChange) -> Json {
    let image = |i: &Option<Vec<(&str, Value)>>| match i {
        None => Json::Null,
        Some(cols) => Json::Object(image_json(cols)),
    };
    let kind = match change.kind {
        ChangeKind::Insert => "insert",
        ChangeKind::Update => "update",
        ChangeKind::Delete => "delete",
    };
    json!({
        "epoch": epoch.to_string(),
        "table": sql_name(change.table),
        "kind": kind,
        "before": image(&change.before),
        "after": image(&change.after),
    })
}

fn image_json(columns: &[(&str, Value)]) -> Map<String, Json> {
    columns
        .iter()
        .map(|(name, value)| (name.to_string(), value_json(value)))
        .collect()
}

/// A value as JSON: numbers as numbers, text as strings, bytes as a hex
/// string, dates and decimals in their SQL text.
fn value_json(value: &Value) -> Json {
    match value {
        Value::Null => Json::Null,
        Value::Int(v) => json!(v),
        Value::UInt(v) | Value::Bit(v) => json!(v),
        Value::Float(v) => json!(v),
        Value::Double(v) => json!(v),
        Value::Decimal(d) => json!(d.to_string()),
        Value::String(s) => json!(s),
        Value::Bytes(b) => json!(hex(b)),
        Value::Date(d) => json!(d.to_string()),
        Value::DateTime(d) => json!(d.to_string()),
        Value::Timestamp(us) => json!(us),
        Value::BlobHead {
            total_bytes,
            inline,
        } => json!({"total_bytes": total_bytes, "inline": hex(inline)}),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_as_the_sql_node_shows_them() {
        assert_eq!(cluster_name("shop.orders"), "shop/def/orders");
        assert_eq!(cluster_name("kv"), "kv");
        assert_eq!(sql_name("shop/def/orders"), "shop.orders");
        assert_eq!(sql_name("kv"), "kv");
    }

    #[test]
    fn a_change_prints_as_issue_22_says() {
        let change = RowChange {
            table: "d/def/t",
            kind: ChangeKind::Update,
            before: Some(vec![("k", Value::Int(1)), ("v", Value::Null)]),
            after: Some(vec![
                ("k", Value::Int(1)),
                ("v", Value::String("x".to_owned())),
            ]),
        };
        let line = change_json(Epoch::new(7, 2), &change);
        assert_eq!(
            line,
            json!({"epoch": "7/2", "table": "d.t", "kind": "update",
                   "before": {"k": 1, "v": null}, "after": {"k": 1, "v": "x"}})
        );
        let mut out = Vec::new();
        print_gap(&mut out, Epoch::new(7, 3), Epoch::new(8, 0), true).expect("written");
        assert_eq!(
            String::from_utf8(out).expect("utf-8"),
            "{\"gap\":{\"from\":\"7/3\",\"to\":\"8/0\"}}\n"
        );
        let mut out = Vec::new();
        print_restart(&mut out, Epoch::new(6, u32::MAX), Epoch::new(7, 4), true).expect("written");
        assert_eq!(
            String::from_utf8(out).expect("utf-8"),
            "{\"restart\":{\"restored\":\"6/4294967295\",\"resumed\":\"7/4\"}}\n"
        );
    }
}
