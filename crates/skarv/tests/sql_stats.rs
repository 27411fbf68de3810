//! Cluster statistics through a real MySQL client: row counts from the
//! data nodes steer the join order (EXPLAIN and the rows read show it),
//! `ANALYZE TABLE` stores index cardinality in a cluster table that the
//! other SQL node reads (`SHOW INDEX`, EXPLAIN's rows, the choice between
//! two indexes), the catalog shows row counts, and `IN` on the
//! distribution key prunes a scan to the partitions holding its values
//! (EXPLAIN's `partitions`, `Ndb_pruned_scan_count`).

mod common;

use std::collections::HashMap;

use common::{connect, Sandbox};
use mysql::prelude::Queryable;
use mysql::Conn;

/// Rows of the large table and values of its join column.
const BIG_ROWS: u64 = 5_000;
const SMALL_ROWS: u64 = 10;

fn status(conn: &mut Conn) -> HashMap<String, u64> {
    let rows: Vec<(String, String)> = conn.query("SHOW SESSION STATUS").expect("show status");
    rows.into_iter()
        .filter_map(|(name, value)| value.parse().ok().map(|v| (name, v)))
        .collect()
}

/// Rows the data nodes returned to the session for `sql`.
fn rows_read(conn: &mut Conn, sql: &str) -> (usize, u64) {
    let name = "Ndb_api_read_row_count_session";
    let before = status(conn)[name];
    let rows: Vec<mysql::Row> = conn.query(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    let after = status(conn)[name];
    (rows.len(), after - before)
}

/// EXPLAIN's rows as text: (table, partitions, type, key, rows).
fn explain(conn: &mut Conn, sql: &str) -> Vec<[String; 5]> {
    let rows: Vec<mysql::Row> = conn
        .query(format!("EXPLAIN {sql}"))
        .unwrap_or_else(|e| panic!("EXPLAIN {sql}: {e}"));
    rows.into_iter()
        .map(|r| {
            let text = |name: &str| -> String {
                r.get::<Option<String>, _>(name)
                    .flatten()
                    .unwrap_or_else(|| "NULL".into())
            };
            [
                text("table"),
                text("partitions"),
                text("type"),
                text("key"),
                text("rows"),
            ]
        })
        .collect()
}

#[test]
fn statistics_choose_the_join_order_and_analyze_reaches_every_sql_node() {
    let sandbox = Sandbox::start_configured("sql-stats", 46_500, 2, &["--sql-nodes", "2"]);
    let mut conn = connect(sandbox.sql_port_of(0));
    conn.query_drop("CREATE DATABASE sx")
        .expect("create database");
    conn.query_drop("USE sx").expect("use");
    // `w` is declared first: without cardinality it wins a tie with `s_id`.
    conn.query_drop(
        "CREATE TABLE big (id INT PRIMARY KEY, w INT, s_id INT, KEY w (w), KEY s_id (s_id))",
    )
    .expect("create big");
    conn.query_drop("CREATE TABLE small (id INT PRIMARY KEY, v INT)")
        .expect("create small");
    let small: Vec<String> = (1..=SMALL_ROWS).map(|i| format!("({i}, {i})")).collect();
    conn.query_drop(format!("INSERT INTO small VALUES {}", small.join(",")))
        .expect("insert small");
    let big: Vec<String> = (1..=BIG_ROWS)
        .map(|i| format!("({i}, {}, {})", i % 2, i % SMALL_ROWS + 1))
        .collect();
    for chunk in big.chunks(1_000) {
        conn.query_drop(format!("INSERT INTO big VALUES {}", chunk.join(",")))
            .expect("insert big");
    }

    // Written order and the fixed guesses (1,000 rows each) put `big`
    // first; its row count puts `small` first, and `big` is read by its
    // index on `s_id`.
    let join = "SELECT big.id, small.v FROM big JOIN small ON big.s_id = small.id \
                WHERE small.v = 3";
    let plan = explain(&mut conn, join);
    assert_eq!(plan[0][0], "small", "{plan:?}");
    assert_eq!(plan[0][4], SMALL_ROWS.to_string(), "{plan:?}");
    assert_eq!(
        (plan[1][0].as_str(), plan[1][2].as_str()),
        ("big", "ref"),
        "{plan:?}"
    );
    let (found, read) = rows_read(&mut conn, join);
    let matches = BIG_ROWS / SMALL_ROWS;
    assert_eq!(found as u64, matches);
    // The one row of `small` (its filter is pushed), then its rows of
    // `big` by the index.
    assert_eq!(read, 1 + matches);
    let straight = "SELECT STRAIGHT_JOIN big.id, small.v FROM big JOIN small \
                    ON big.s_id = small.id WHERE small.v = 3";
    let (found, read_straight) = rows_read(&mut conn, straight);
    assert_eq!(found as u64, matches);
    // `big` whole, then `small` by key for each batch of its rows.
    assert!(read_straight > BIG_ROWS, "{read_straight}");

    // The catalog shows the counts.
    let rows: Option<u64> = conn
        .query_first(
            "SELECT TABLE_ROWS FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = 'sx' AND TABLE_NAME = 'big'",
        )
        .expect("information_schema.TABLES");
    assert_eq!(rows, Some(BIG_ROWS));
    let status: Vec<mysql::Row> = conn
        .query("SHOW TABLE STATUS LIKE 'small'")
        .expect("show table status");
    assert_eq!(status[0].get::<u64, _>("Rows"), Some(SMALL_ROWS));
    assert!(status[0].get::<u64, _>("Data_length").unwrap_or(0) > 0);

    // Before ANALYZE: no cardinality; of two indexes the first declared.
    let pick = "SELECT id FROM big WHERE s_id = 3 AND w = 1";
    let plan = explain(&mut conn, pick);
    assert_eq!(plan[0][3], "w", "{plan:?}");
    // A range: a third of the rows, MySQL's guess without statistics.
    let range = "SELECT id FROM big WHERE id BETWEEN 101 AND 300";
    let open_range = "SELECT id FROM big WHERE id > 4990";
    let plan = explain(&mut conn, range);
    assert_eq!(plan[0][4], (BIG_ROWS / 3).to_string(), "{plan:?}");

    // ANALYZE: MySQL's result set; a missing table is an error row.
    let result: Vec<(String, String, String, String)> = conn
        .query("ANALYZE TABLE big, small, nope")
        .expect("analyze");
    let expected = [
        ("sx.big", "analyze", "status", "OK"),
        ("sx.small", "analyze", "status", "OK"),
        (
            "sx.nope",
            "analyze",
            "Error",
            "Table 'sx.nope' doesn't exist",
        ),
        ("sx.nope", "analyze", "status", "Operation failed"),
    ];
    let result: Vec<(&str, &str, &str, &str)> = result
        .iter()
        .map(|(a, b, c, d)| (a.as_str(), b.as_str(), c.as_str(), d.as_str()))
        .collect();
    assert_eq!(result, expected);

    // The other SQL node reads the stored cardinality.
    let mut other = connect(sandbox.sql_port_of(1));
    other.query_drop("USE sx").expect("use");
    let index: Vec<(String, u64)> = other
        .query_map("SHOW INDEX FROM big", |row: mysql::Row| {
            (
                row.get::<String, _>("Key_name").unwrap_or_default(),
                row.get::<u64, _>("Cardinality").unwrap_or(0),
            )
        })
        .expect("show index");
    assert_eq!(
        index,
        [
            ("PRIMARY".to_owned(), BIG_ROWS),
            ("w".to_owned(), 2),
            ("s_id".to_owned(), SMALL_ROWS)
        ]
    );
    let card: Vec<u64> = other
        .query(
            "SELECT CARDINALITY FROM information_schema.STATISTICS \
             WHERE TABLE_SCHEMA = 'sx' AND TABLE_NAME = 'big' ORDER BY INDEX_NAME",
        )
        .expect("information_schema.STATISTICS");
    assert_eq!(card, [BIG_ROWS, SMALL_ROWS, 2]);
    // Rows per key (rows / cardinality) pick `s_id` (500 rows a value)
    // over `w` (2,500), and EXPLAIN's rows are those estimates.
    let plan = explain(&mut other, pick);
    assert_eq!(plan[0][3], "s_id", "{plan:?}");
    assert_eq!(plan[0][4], (BIG_ROWS / SMALL_ROWS).to_string(), "{plan:?}");
    let plan = explain(&mut other, join);
    assert_eq!(plan[0][0], "small", "{plan:?}");
    assert_eq!(plan[1][4], matches.to_string(), "{plan:?}");
    // A range on an integer first column: the rows between the bounds
    // ANALYZE found (1 and 5,000), spread evenly.
    let plan = explain(&mut other, range);
    assert_eq!(plan[0][4], "200", "{plan:?}");
    let plan = explain(&mut other, open_range);
    assert_eq!(plan[0][4], "10", "{plan:?}");

    // Ranges on a DATE and a DECIMAL first column are estimated from
    // their bounds too: 28 days a month over three years, and prices a
    // quarter apart.
    conn.query_drop(
        "CREATE TABLE ev (id INT PRIMARY KEY, d DATE, p DECIMAL(8,2), KEY d (d), KEY p (p))",
    )
    .expect("create ev");
    let ev: Vec<String> = (0..1_000u32)
        .map(|i| {
            let month = i / 28;
            let date = format!(
                "{}-{:02}-{:02}",
                2020 + month / 12,
                month % 12 + 1,
                i % 28 + 1
            );
            format!("({i}, '{date}', {}.{:02})", i / 4, (i % 4) * 25)
        })
        .collect();
    conn.query_drop(format!("INSERT INTO ev VALUES {}", ev.join(",")))
        .expect("insert ev");
    let ranges = [
        (
            "d",
            "SELECT id FROM ev WHERE d BETWEEN '2021-03-01' AND '2021-03-31'",
        ),
        ("p", "SELECT id FROM ev WHERE p BETWEEN 10 AND 20"),
    ];
    for (key, sql) in ranges {
        let plan = explain(&mut other, sql);
        assert_eq!(
            (plan[0][3].as_str(), plan[0][4].as_str()),
            (key, "333"),
            "{plan:?}"
        );
    }
    other.query_drop("ANALYZE TABLE ev").expect("analyze ev");
    for (key, sql) in ranges {
        let found = other.query::<u32, _>(sql).expect("the range").len() as f64;
        let plan = explain(&mut other, sql);
        let estimated: f64 = plan[0][4].parse().expect("rows");
        assert_eq!(plan[0][3], key, "{plan:?}");
        assert!(
            (found * 0.8..=found * 1.25).contains(&estimated),
            "{sql}: {estimated} rows estimated, {found} found"
        );
    }
}

#[test]
fn an_in_list_on_the_distribution_key_prunes_to_its_partitions() {
    let sandbox = Sandbox::start_configured("sql-prune-in", 46_600, 2, &["--sql-nodes", "1"]);
    let mut conn = connect(sandbox.sql_port());
    conn.query_drop("CREATE DATABASE px")
        .expect("create database");
    conn.query_drop("USE px").expect("use");
    conn.query_drop(
        "CREATE TABLE trail (id INT, u INT, v INT, PRIMARY KEY (id, u)) \
         PARTITION BY KEY (u) PARTITIONS 8",
    )
    .expect("create trail");
    let rows: Vec<String> = (0..240)
        .map(|i| format!("({i}, {}, {})", i % 24, i * 7 % 11))
        .collect();
    conn.query_drop(format!("INSERT INTO trail VALUES {}", rows.join(",")))
        .expect("insert");
    let pruned_count = |conn: &mut Conn, sql: &str| -> (Vec<(i32, i32, i32)>, u64) {
        let name = "Ndb_pruned_scan_count";
        let before = status(conn)[name];
        let rows: Vec<(i32, i32, i32)> = conn.query(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
        (rows, status(conn)[name] - before)
    };
    let values = [1, 5, 9, 13];
    // Each value's partition, as EXPLAIN of `u = value` shows it.
    let mut partitions: Vec<String> = Vec::new();
    for u in values {
        let plan = explain(&mut conn, &format!("SELECT * FROM trail WHERE u = {u}"));
        assert!(!plan[0][1].contains(','), "{plan:?}");
        partitions.push(plan[0][1].clone());
    }
    partitions.sort_by_key(|p| p[1..].parse::<u32>().unwrap_or(u32::MAX));
    partitions.dedup();
    let list = values.map(|v| v.to_string()).join(", ");
    let sql = format!("SELECT id, u, v FROM trail WHERE u IN ({list}) ORDER BY id");
    let plan = explain(&mut conn, &sql);
    assert_eq!(plan[0][1], partitions.join(","), "{plan:?}");
    let (pruned, count) = pruned_count(&mut conn, &sql);
    assert_eq!(pruned.len(), 40);
    assert_eq!(count, 1);
    // The same rows unpruned (`u + 0` fixes no partition).
    let unpruned_sql = format!("SELECT id, u, v FROM trail WHERE u + 0 IN ({list}) ORDER BY id");
    let plan = explain(&mut conn, &unpruned_sql);
    assert_eq!(plan[0][1], "p0,p1,p2,p3,p4,p5,p6,p7", "{plan:?}");
    let (unpruned, count) = pruned_count(&mut conn, &unpruned_sql);
    assert_eq!(count, 0);
    assert_eq!(pruned, unpruned);
    // A locking read and a DELETE take the same pruned path.
    let (locked, count) = pruned_count(
        &mut conn,
        &format!("SELECT id, u, v FROM trail WHERE u IN ({list}) ORDER BY id FOR UPDATE"),
    );
    assert_eq!((locked.len(), count), (40, 1));
    conn.query_drop(format!("DELETE FROM trail WHERE u IN ({list})"))
        .expect("delete");
    let left: u64 = conn
        .query_first("SELECT COUNT(*) FROM trail")
        .expect("count")
        .unwrap_or(0);
    assert_eq!(left, 200);
}
