//! Table statistics for the cost model (NDB's table statistics and index
//! statistics):
//!
//! - **Rows and memory** per table come from the data nodes: a statistics
//!   scan (`Transaction::table_stats`) asks the primary replica of every
//!   partition for its committed row count and memory (NDB's pseudo-columns
//!   `ROW_COUNT` and `FRAGMENT_MEMORY`). Each SQL node keeps them in the
//!   table's [`StatsCell`] and fetches them again on the first use after
//!   [`STATS_REFRESH_MS`]: one round trip per table per interval, not per
//!   query; a statement that finds the values being fetched by another uses
//!   the old ones.
//! - **Index cardinality** (distinct values of each prefix of an ordered
//!   index) is computed by `ANALYZE TABLE`, which reads each ordered index
//!   (at most [`ANALYZE_SAMPLE_ROWS_MAX`] rows, scaled to the table's rows
//!   past it) and writes one row per index to the cluster table
//!   [`INDEX_STATS_TABLE`] (NDB's `mysql.ndb_index_stat_head`), so every SQL
//!   node reads the same values with its next refresh; with them, the
//!   least and greatest value of an integer first column ([`Bounds`]), for
//!   the rows a range finds. Without `ANALYZE`
//!   an index has no cardinality and the planner guesses
//!   ([`crate::engine::plan::join::REF_ROWS_GUESS`]).

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use schema::{Collation, Column, ColumnType as NativeType, IndexKind, TableDef, Value};
use skarv_client::{CmpOp, ExecMode, Filter, ScanOptions, Session};

use super::catalog::TableInfo;
use super::Conn;
use crate::error::{SqlError, SqlResult};

/// How long a SQL node uses a table's row count and cardinality before it
/// fetches them again, in milliseconds.
pub const STATS_REFRESH_MS: u64 = 1_000;
/// Most rows `ANALYZE TABLE` reads of one ordered index; a larger table's
/// cardinality is scaled from the rows read (the first the scan returns).
pub const ANALYZE_SAMPLE_ROWS_MAX: u64 = 100_000;
/// The cluster table of index statistics: one row per (table id, index).
pub const INDEX_STATS_TABLE: &str = "mysql/def/ndb_index_stat_head";
/// Longest list of per-prefix cardinalities kept, in bytes.
const CARDINALITY_TEXT_MAX: u16 = 1_024;
/// Longest native index name kept.
const INDEX_NAME_CHARS_MAX: u16 = 128;

/// The least and greatest value of an index's first column, as points
/// on a line that keeps the column's order ([`Bounds::position`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bounds {
    pub least: f64,
    pub greatest: f64,
}

impl Bounds {
    /// `v` as a point on a line that keeps its type's order, with the
    /// distance between two neighbouring values (1 for integers and
    /// dates, whose exclusive bounds move by one; 0 for the continuous
    /// kinds): integers as themselves, FLOAT, DOUBLE and DECIMAL as their
    /// value, DATE as days, DATETIME as seconds, TIMESTAMP as stored.
    /// None for text and the rest, whose ranges keep the fixed guess.
    pub fn position(v: &Value) -> Option<(f64, f64)> {
        let days = |d: &schema::Date| {
            super::expr::value::days_from_civil(
                i64::from(d.year),
                i64::from(d.month),
                i64::from(d.day),
            ) as f64
        };
        Some(match v {
            Value::Int(i) => (*i as f64, 1.0),
            Value::UInt(u) => (*u as f64, 1.0),
            Value::Date(d) => (days(d), 1.0),
            Value::Float(f) if f.is_finite() => (f64::from(*f), 0.0),
            Value::Double(f) if f.is_finite() => (*f, 0.0),
            Value::Decimal(d) => (d.to_string().parse().ok()?, 0.0),
            Value::DateTime(t) => (
                days(&t.date) * 86_400.0
                    + f64::from(t.hour) * 3_600.0
                    + f64::from(t.minute) * 60.0
                    + f64::from(t.second)
                    + f64::from(t.micros) / 1e6,
                0.0,
            ),
            Value::Timestamp(t) => (*t as f64, 0.0),
            _ => return None,
        })
    }

    /// How a cardinality row's text carries them: `;least,greatest` after
    /// the list (a node that does not know them reads the list alone).
    fn text(&self) -> String {
        format!(";{},{}", self.least, self.greatest)
    }

    fn parse(text: &str) -> Option<Bounds> {
        let (least, greatest) = text.split_once(',')?;
        let (least, greatest): (f64, f64) = (least.parse().ok()?, greatest.parse().ok()?);
        (least.is_finite() && greatest.is_finite() && least <= greatest)
            .then_some(Bounds { least, greatest })
    }
}

/// What `ANALYZE TABLE` found of one native ordered index.
#[derive(Debug, Clone)]
struct IndexStats {
    name: String,
    /// Distinct values of each prefix of its columns.
    cardinality: Vec<u64>,
    /// Its first column's least and greatest value, when of a kind with a
    /// position and every row was read.
    bounds: Option<Bounds>,
}

/// The statistics a SQL node keeps for one table (in its `TableInfo`,
/// shared by every session of the node).
#[derive(Debug, Default)]
pub struct StatsCell(Mutex<State>);

#[derive(Debug, Default, Clone)]
struct State {
    /// Committed rows as the data nodes counted them; None: never fetched.
    rows: Option<u64>,
    memory_bytes: u64,
    /// What `ANALYZE TABLE` found of each native ordered index.
    indexes: Vec<IndexStats>,
    /// When the values were fetched (or a fetch was started).
    fetched: Option<Instant>,
}

impl StatsCell {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The table's rows, when fetched.
    pub fn rows(&self) -> Option<u64> {
        self.state().rows
    }

    /// The bytes of memory the table's primary replicas hold.
    pub fn memory_bytes(&self) -> u64 {
        self.state().memory_bytes
    }

    /// Distinct values of the first `prefix` columns of the native
    /// ordered index `index` (`ANALYZE TABLE`'s), if known.
    pub fn cardinality(&self, index: &str, prefix: usize) -> Option<u64> {
        let state = self.state();
        let found = state.indexes.iter().find(|i| i.name == index)?;
        found.cardinality.get(prefix.checked_sub(1)?).copied()
    }

    /// The least and greatest value of `index`'s first column, when it is
    /// of a kind with a position ([`Bounds::position`]) and `ANALYZE
    /// TABLE` read the whole index.
    pub fn bounds(&self, index: &str) -> Option<Bounds> {
        let state = self.state();
        state.indexes.iter().find(|i| i.name == index)?.bounds
    }

    /// Rows one value of the first `prefix` columns of `index` finds:
    /// rows / cardinality, when both are known.
    pub fn rows_per_key(&self, index: &str, prefix: usize) -> Option<u64> {
        let rows = self.rows()?;
        let card = self.cardinality(index, prefix)?.max(1);
        Some(rows.div_ceil(card).max(1))
    }

    /// Claims the refresh when the values are older than the interval:
    /// the caller fetches, every other statement goes on with the old
    /// values meanwhile.
    fn claim(&self, now: Instant) -> bool {
        let mut state = self.state();
        let stale = state
            .fetched
            .is_none_or(|t| now.duration_since(t) >= Duration::from_millis(STATS_REFRESH_MS));
        if stale {
            state.fetched = Some(now);
        }
        stale
    }
}

/// Fetches `table`'s statistics if they are older than
/// [`STATS_REFRESH_MS`]. A failure leaves the old values (statistics only
/// steer the plan): the next use after the interval tries again.
pub fn refresh(conn: &Conn<'_>, table: &TableInfo) {
    if table.stats.claim(Instant::now()) {
        let _ = fetch(conn.native, table);
    }
}

/// Fetches `table`'s statistics now (`ANALYZE TABLE`, `SHOW TABLE
/// STATUS`, `information_schema.TABLES`).
pub fn refresh_now(conn: &Conn<'_>, table: &TableInfo) -> SqlResult<()> {
    table.stats.state().fetched = Some(Instant::now());
    fetch(conn.native, table)
}

fn fetch(session: &Session, table: &TableInfo) -> SqlResult<()> {
    let tx = session.begin().map_err(native)?;
    let counted = tx.table_stats(&table.native).map_err(native)?;
    let indexes = load_cardinality(session, &tx, table)?;
    let _ = tx.execute(ExecMode::Rollback);
    let mut state = table.stats.state();
    state.rows = Some(counted.rows);
    state.memory_bytes = counted.memory_bytes;
    state.indexes = indexes;
    Ok(())
}

/// The cardinalities (and bounds) `ANALYZE TABLE` stored for `table`
/// (rows of another version of the table are left out: its indexes may
/// differ).
fn load_cardinality(
    session: &Session,
    tx: &skarv_client::Transaction<'_>,
    table: &TableInfo,
) -> SqlResult<Vec<IndexStats>> {
    let stats_table = match session.table(INDEX_STATS_TABLE) {
        Ok(t) => t,
        Err(e) if e.code == skarv_client::codes::NO_SUCH_TABLE => return Ok(Vec::new()),
        Err(e) => return Err(native(e)),
    };
    let def = table.native.def();
    let options = ScanOptions {
        filter: Some(Filter::Cmp {
            column: 0,
            op: CmpOp::Eq,
            value: Value::UInt(u64::from(def.id)),
        }),
        ..ScanOptions::default()
    };
    let mut out = Vec::new();
    for row in tx.scan(&stats_table, options).map_err(native)? {
        let row = row.map_err(native)?;
        let version = match row.get("table_version") {
            Some(Value::UInt(v)) => *v,
            _ => continue,
        };
        if version != u64::from(def.version) {
            continue;
        }
        let (Some(Value::String(index)), Some(Value::String(list))) =
            (row.get("index_name"), row.get("cardinality"))
        else {
            continue;
        };
        let (list, tail) = list.split_once(';').unwrap_or((list, ""));
        out.push(IndexStats {
            name: index.clone(),
            cardinality: list.split(',').filter_map(|n| n.parse().ok()).collect(),
            bounds: Bounds::parse(tail),
        });
    }
    Ok(out)
}

fn native(e: skarv_client::Error) -> SqlError {
    super::catalog::native_error(&e)
}

/// The definition of [`INDEX_STATS_TABLE`].
pub fn index_stats_table_def() -> TableDef {
    TableDef::new(
        INDEX_STATS_TABLE,
        0,
        vec![
            Column::new("table_id", NativeType::Int { unsigned: true }),
            Column::new(
                "index_name",
                NativeType::VarChar {
                    max: INDEX_NAME_CHARS_MAX,
                    collation: Collation::Utf8mb4Bin,
                },
            ),
            Column::new("table_version", NativeType::Int { unsigned: true }),
            Column::new("table_rows", NativeType::BigInt { unsigned: true }),
            Column::new("sample_rows", NativeType::BigInt { unsigned: true }),
            Column::new(
                "cardinality",
                NativeType::VarChar {
                    max: CARDINALITY_TEXT_MAX,
                    collation: Collation::Utf8mb4Bin,
                },
            ),
            Column::new("load_time", NativeType::BigInt { unsigned: true }),
        ],
    )
    .primary_key(vec![0, 1])
    .partitions(0)
}

/// Distinct values of each prefix of `index`'s columns over at most
/// [`ANALYZE_SAMPLE_ROWS_MAX`] rows of the index, the rows read, and the
/// bounds of its first column (None past the sample, or when a value has
/// no position: text, NULL).
fn index_cardinality(
    session: &Session,
    table: &TableInfo,
    index: &schema::IndexDef,
) -> SqlResult<(Vec<u64>, u64, Option<Bounds>)> {
    let tx = session.begin().map_err(native)?;
    let def = table.native.def();
    let names: Vec<&str> = index
        .columns
        .iter()
        .map(|c| def.columns[*c].name.as_str())
        .collect();
    let options = ScanOptions {
        index: Some(index.name.as_str()),
        projection: Some(names),
        ..ScanOptions::default()
    };
    // The partitions' rows come one partition's batch after another, each
    // in index order but not merged: count distinct prefixes in sets.
    let mut seen: Vec<HashSet<Vec<u8>>> = vec![HashSet::new(); index.columns.len()];
    let mut read = 0u64;
    let mut key = Vec::new();
    // None: no row yet; Some(None): a first value without a position.
    let mut bounds: Option<Option<Bounds>> = None;
    for row in tx.scan(&table.native, options).map_err(native)? {
        let row = row.map_err(native)?;
        let first = row
            .values()
            .first()
            .and_then(Bounds::position)
            .map(|(at, _)| at);
        bounds = Some(match (bounds, first) {
            (None, Some(n)) => Some(Bounds {
                least: n,
                greatest: n,
            }),
            (Some(Some(b)), Some(n)) => Some(Bounds {
                least: b.least.min(n),
                greatest: b.greatest.max(n),
            }),
            _ => None,
        });
        key.clear();
        for (set, v) in seen.iter_mut().zip(row.values()) {
            // A prefix as bytes: each value's debug form and a separator
            // no form contains unescaped.
            key.extend_from_slice(format!("{v:?}").as_bytes());
            key.push(0);
            if !set.contains(&key) {
                set.insert(key.clone());
            }
        }
        read += 1;
        if read >= ANALYZE_SAMPLE_ROWS_MAX {
            break;
        }
    }
    let distinct = seen.iter().map(|s| s.len() as u64).collect();
    let _ = tx.execute(ExecMode::Rollback);
    let whole = read < ANALYZE_SAMPLE_ROWS_MAX;
    Ok((distinct, read, bounds.flatten().filter(|_| whole)))
}

/// Counts `table`'s rows, computes every ordered index's cardinality and
/// stores them; this SQL node uses them at once, others at their next
/// refresh.
pub(crate) fn analyze_one(conn: &Conn<'_>, table: &TableInfo) -> SqlResult<()> {
    let session = conn.native;
    let counted = session.table_stats(&table.native).map_err(native)?;
    let def = table.native.def();
    let stats_table = session.table(INDEX_STATS_TABLE).map_err(native)?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut indexes = Vec::new();
    for index in def.indexes.iter().filter(|i| i.kind == IndexKind::Ordered) {
        let (distinct, read, bounds) = index_cardinality(session, table, index)?;
        // Past the sample: as many rows per value as in the sample.
        let scaled: Vec<u64> = distinct
            .iter()
            .map(|d| {
                if read < ANALYZE_SAMPLE_ROWS_MAX || read == 0 {
                    *d
                } else {
                    let per_value = (read as f64 / (*d).max(1) as f64).max(1.0);
                    ((counted.rows as f64 / per_value).round() as u64).max(1)
                }
            })
            .collect();
        let mut text: String = scaled
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(",");
        if let Some(b) = bounds {
            text.push_str(&b.text());
        }
        let row = [
            ("table_id", Value::UInt(u64::from(def.id))),
            ("index_name", Value::String(index.name.clone())),
            ("table_version", Value::UInt(u64::from(def.version))),
            ("table_rows", Value::UInt(counted.rows)),
            ("sample_rows", Value::UInt(read)),
            ("cardinality", Value::String(text)),
            ("load_time", Value::UInt(now)),
        ];
        let tx = session.begin().map_err(native)?;
        tx.write(&stats_table, &row).map_err(native)?;
        tx.execute(ExecMode::Commit).map_err(native)?;
        indexes.push(IndexStats {
            name: index.name.clone(),
            cardinality: scaled,
            bounds,
        });
    }
    let mut state = table.stats.state();
    state.rows = Some(counted.rows);
    state.memory_bytes = counted.memory_bytes;
    state.indexes = indexes;
    state.fetched = Some(Instant::now());
    Ok(())
}
