//! Pushed joins (NDB's SPJ) through a real MySQL client on 2 data nodes ×
//! 2 replicas: a 2-, a 3-table and an outer join return the same rows with
//! `ndb_join_pushdown` on and off, and pushed they cost one round trip per
//! batch of first-table rows: no key-read round trips from the SQL node,
//! where the unpushed join makes one per 256 rows per table.

mod common;

use std::collections::HashMap;

use common::{connect, Sandbox};
use mysql::prelude::Queryable;
use mysql::Conn;

/// Rows of the first table: more than one batch of key reads (256).
const ROWS_A: usize = 1_000;

fn status(conn: &mut Conn, global: bool) -> HashMap<String, u64> {
    let sql = if global {
        "SHOW GLOBAL STATUS LIKE 'Ndb%'"
    } else {
        "SHOW SESSION STATUS LIKE 'Ndb%'"
    };
    let rows: Vec<(String, String)> = conn.query(sql).expect("show status");
    rows.into_iter()
        .filter_map(|(name, value)| value.parse().ok().map(|v| (name, v)))
        .collect()
}

/// What one query did: its rows (sorted) and how the counters moved.
struct Run {
    rows: Vec<Vec<String>>,
    moved: HashMap<String, u64>,
}

impl Run {
    fn get(&self, name: &str) -> u64 {
        *self
            .moved
            .get(name)
            .unwrap_or_else(|| panic!("no status variable {name}"))
    }

    /// Round trips: waits for key-read answers and for scan batches.
    fn round_trips(&self) -> u64 {
        self.get("Ndb_api_wait_exec_complete_count_session")
            + self.get("Ndb_api_wait_scan_result_count_session")
    }
}

fn run(conn: &mut Conn, sql: &str) -> Run {
    let before: HashMap<String, u64> = status(conn, false)
        .into_iter()
        .chain(status(conn, true))
        .collect();
    let rows: Vec<mysql::Row> = conn.query(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    let after: HashMap<String, u64> = status(conn, false)
        .into_iter()
        .chain(status(conn, true))
        .collect();
    let mut rows: Vec<Vec<String>> = rows
        .into_iter()
        .map(|r| r.unwrap().into_iter().map(|v| v.as_sql(true)).collect())
        .collect();
    rows.sort();
    let moved = after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0)))
        .collect();
    Run { rows, moved }
}

#[test]
fn pushed_joins_return_the_unpushed_rows_in_one_round_trip_per_batch() {
    let sandbox = Sandbox::start_configured("sql-pushed", 37_020, 2, &["--sql-nodes", "1"]);
    let mut conn = connect(sandbox.sql_port());
    for sql in [
        "CREATE DATABASE spj",
        "USE spj",
        "CREATE TABLE a (id INT PRIMARY KEY, b_id INT, x VARCHAR(10))",
        "CREATE TABLE b (id INT PRIMARY KEY, c_id INT, y INT)",
        "CREATE TABLE c (id INT PRIMARY KEY, z VARCHAR(10))",
    ] {
        conn.query_drop(sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    // Every 10th row of a points at no b row; every 7th b row at no c row.
    let a: Vec<String> = (0..ROWS_A)
        .map(|i| {
            let b = if i % 10 == 9 {
                "NULL".to_owned()
            } else {
                (i % 100).to_string()
            };
            format!("({i}, {b}, 'x{i}')")
        })
        .collect();
    for chunk in a.chunks(250) {
        conn.query_drop(format!("INSERT INTO a VALUES {}", chunk.join(",")))
            .expect("insert a");
    }
    let b: Vec<String> = (0..90)
        .map(|i| format!("({i}, {}, {})", if i % 7 == 6 { 99 } else { i % 10 }, i * 3))
        .collect();
    conn.query_drop(format!("INSERT INTO b VALUES {}", b.join(",")))
        .expect("insert b");
    let c: Vec<String> = (0..10).map(|i| format!("({i}, 'z{i}')")).collect();
    conn.query_drop(format!("INSERT INTO c VALUES {}", c.join(",")))
        .expect("insert c");

    let queries = [
        (
            "2 tables",
            // STRAIGHT_JOIN: with the tables' statistics the planner may
            // rather read the small b first and hash-join a, which is no
            // pushed join.
            "SELECT STRAIGHT_JOIN a.id, a.x, b.y FROM a JOIN b ON b.id = a.b_id",
            2,
        ),
        (
            "3 tables",
            "SELECT STRAIGHT_JOIN a.id, b.y, c.z FROM a JOIN b ON b.id = a.b_id \
             JOIN c ON c.id = b.c_id",
            3,
        ),
        (
            "outer",
            "SELECT a.id, b.y, c.z FROM a LEFT JOIN b ON b.id = a.b_id \
             LEFT JOIN c ON c.id = b.c_id",
            3,
        ),
    ];
    for (what, sql, tables) in queries {
        conn.query_drop("SET ndb_join_pushdown = OFF").unwrap();
        let off = run(&mut conn, sql);
        conn.query_drop("SET ndb_join_pushdown = ON").unwrap();
        let on = run(&mut conn, sql);
        assert!(!off.rows.is_empty(), "{what}: rows found");
        assert_eq!(on.rows, off.rows, "{what}: pushed and unpushed rows");
        // Unpushed: every later table costs a key batch per 256 rows.
        assert_eq!(off.get("Ndb_pushed_queries_executed"), 0, "{what}: off");
        assert!(
            off.get("Ndb_api_wait_exec_complete_count_session") >= (tables as u64 - 1) * 3,
            "{what}: unpushed key batches: {:?}",
            off.get("Ndb_api_wait_exec_complete_count_session")
        );
        // Pushed: one round trip per batch of root rows; the one execute
        // left is the autocommit read's commit.
        assert!(
            on.get("Ndb_api_wait_exec_complete_count_session") <= 1,
            "{what}: no key-read round trips: {}",
            on.get("Ndb_api_wait_exec_complete_count_session")
        );
        let batches = on.get("Ndb_api_scan_batch_count_session");
        assert!(
            on.round_trips() <= batches + 1,
            "{what}: {} round trips for {batches} batches",
            on.round_trips()
        );
        assert!(
            on.round_trips() < off.round_trips(),
            "{what}: pushed {} round trips, unpushed {}",
            on.round_trips(),
            off.round_trips()
        );
        // Pushed as one query, without key reads from the SQL node.
        assert_eq!(on.get("Ndb_pushed_queries_executed"), 1, "{what}: pushed");
        assert_eq!(
            on.get("Ndb_api_pk_op_count_session"),
            0,
            "{what}: no key reads"
        );
        assert!(
            on.get("Ndb_pushed_reads") >= on.rows.len() as u64,
            "{what}: reads"
        );
        eprintln!(
            "{what}: {} rows; round trips pushed {} (batches {batches}), unpushed {}",
            on.rows.len(),
            on.round_trips(),
            off.round_trips()
        );
    }

    // EXPLAIN says what is pushed, as NDB's mysqld does.
    let explain: Vec<mysql::Row> = conn
        .query(queries[1].1.replace("SELECT", "EXPLAIN SELECT"))
        .expect("explain");
    let extra: Vec<String> = explain
        .into_iter()
        .map(|r| {
            r.get::<Option<String>, _>("Extra")
                .flatten()
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(
        extra,
        [
            "Parent of 3 pushed join@1",
            "Child of 'a' in pushed join@1",
            "Child of 'b' in pushed join@1"
        ]
    );
    // A locking read is not pushed; its rows are the same.
    conn.query_drop("BEGIN").unwrap();
    let locked = run(&mut conn, &format!("{} FOR UPDATE", queries[0].1));
    conn.query_drop("COMMIT").unwrap();
    assert_eq!(locked.get("Ndb_pushed_queries_executed"), 0, "FOR UPDATE");
    conn.query_drop("SET ndb_join_pushdown = OFF").unwrap();
    let plain = run(&mut conn, queries[0].1);
    assert_eq!(locked.rows, plain.rows);
}
