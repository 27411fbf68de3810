//! Common table expressions through a real MySQL client, where the
//! answer is not MariaDB's or not in the result (`tests/sql/cte.test`
//! holds the rest): a CTE read twice scans its table once (the session's
//! `Ndb_api_table_scan_count_session` and `…range_scan…`), a recursive CTE counts to 1,000
//! under the default `cte_max_recursion_depth` and stops with MySQL's 3636
//! past it (MariaDB stops without an error at `max_recursive_iterations`),
//! and EXPLAIN shows a CTE as a derived table.

mod common;

use std::collections::HashMap;

use common::{connect, Sandbox};
use mysql::prelude::Queryable;
use mysql::Conn;

/// The session's scans so far (full and index scans).
fn scans(conn: &mut Conn) -> u64 {
    let rows: Vec<(String, String)> = conn
        .query("SHOW SESSION STATUS LIKE 'Ndb_api_%_scan_count_session'")
        .expect("show status");
    let map: HashMap<String, String> = rows.into_iter().collect();
    [
        "Ndb_api_table_scan_count_session",
        "Ndb_api_range_scan_count_session",
    ]
    .iter()
    .map(|name| map[*name].parse::<u64>().expect("a count"))
    .sum()
}

/// The MySQL error code and message of a failed statement.
fn error(result: mysql::Result<Vec<mysql::Row>>) -> (u16, String) {
    match result {
        Err(mysql::Error::MySqlError(e)) => (e.code, e.message),
        other => panic!("expected a MySQL error, got {other:?}"),
    }
}

#[test]
fn ctes_run_once_recurse_within_the_depth_and_explain() {
    let sandbox = Sandbox::start_configured("sql-cte", 37_600, 2, &["--sql-nodes", "1"]);
    let mut conn = connect(sandbox.sql_port());
    conn.query_drop("CREATE DATABASE cte")
        .expect("create database");
    conn.query_drop("USE cte").expect("use");
    conn.query_drop("CREATE TABLE t (k INT PRIMARY KEY, v INT)")
        .expect("create table");
    conn.query_drop("INSERT INTO t VALUES (1, 10), (2, 20), (3, 30), (4, 40)")
        .expect("insert");

    // Two derived tables of the same query scan twice; a CTE read twice
    // runs once.
    let sql = "SELECT COUNT(*) FROM (SELECT k FROM t) x JOIN (SELECT k FROM t) y ON x.k = y.k";
    let before = scans(&mut conn);
    let n: Option<u64> = conn.query_first(sql).expect("derived twice");
    assert_eq!(n, Some(4));
    assert_eq!(
        scans(&mut conn) - before,
        2,
        "two derived tables, two scans"
    );
    let sql = "WITH c AS (SELECT k, v FROM t) \
               SELECT COUNT(*), SUM(x.v + y.v) FROM c x JOIN c y ON x.k = y.k";
    let before = scans(&mut conn);
    let row: Option<(u64, u64)> = conn.query_first(sql).expect("cte twice");
    assert_eq!(row, Some((4, 200)));
    assert_eq!(scans(&mut conn) - before, 1, "a CTE read twice is run once");
    // Also when read from a subquery and the FROM list.
    let sql = "WITH c AS (SELECT k FROM t WHERE v > 15) \
               SELECT COUNT(*) FROM c WHERE k IN (SELECT k FROM c)";
    let before = scans(&mut conn);
    let n: Option<u64> = conn.query_first(sql).expect("cte in a subquery");
    assert_eq!(n, Some(3));
    assert_eq!(scans(&mut conn) - before, 1, "{sql}");
    // Prepared, executed twice: once per execution.
    let stmt = conn
        .prep("WITH c AS (SELECT k FROM t WHERE k > ?) SELECT COUNT(*) FROM c x, c y")
        .expect("prepare");
    for (above, want) in [(2u64, 4u64), (0, 16)] {
        let before = scans(&mut conn);
        let n: Option<u64> = conn.exec_first(&stmt, (above,)).expect("execute");
        assert_eq!(n, Some(want));
        assert_eq!(scans(&mut conn) - before, 1, "k > {above}");
    }

    // Recursion: 1..1000 within the default depth of 1,000 rounds.
    let row: Option<(u64, u64)> = conn
        .query_first(
            "WITH RECURSIVE c (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 1000) \
             SELECT COUNT(*), SUM(n) FROM c",
        )
        .expect("1..1000");
    assert_eq!(row, Some((1000, 500_500)));
    let depth: Option<u64> = conn
        .query_first("SELECT @@cte_max_recursion_depth")
        .expect("depth");
    assert_eq!(depth, Some(1000));
    let endless = "WITH RECURSIVE c (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c) \
                   SELECT COUNT(*) FROM c";
    let (code, message) = error(conn.query(endless));
    assert_eq!(code, 3636, "{message}");
    assert_eq!(
        message,
        "Recursive query aborted after 1001 iterations. Try increasing \
         @@cte_max_recursion_depth to a larger value."
    );
    // The session's own depth: 5 rounds reach 5 (the fifth adds nothing),
    // 6 are too many.
    conn.query_drop("SET SESSION cte_max_recursion_depth = 5")
        .expect("set depth");
    let n: Option<u64> = conn
        .query_first(
            "WITH RECURSIVE c (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 5) \
             SELECT MAX(n) FROM c",
        )
        .expect("within 5");
    assert_eq!(n, Some(5));
    let (code, message) = error(conn.query(
        "WITH RECURSIVE c (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 6) \
         SELECT MAX(n) FROM c",
    ));
    assert_eq!(code, 3636, "{message}");
    assert!(message.contains("after 6 iterations"), "{message}");
    conn.query_drop("SET SESSION cte_max_recursion_depth = DEFAULT")
        .expect("reset depth");
    // A round that reads a table: each round's scan sees the last round's
    // rows only.
    let walked: Vec<(u64, u64)> = conn
        .query(
            "WITH RECURSIVE w (k, total) AS (SELECT k, v FROM t WHERE k = 1 UNION ALL \
             SELECT t.k, w.total + t.v FROM w JOIN t ON t.k = w.k + 1) \
             SELECT k, total FROM w ORDER BY k",
        )
        .expect("walk");
    assert_eq!(walked, vec![(1, 10), (2, 30), (3, 60), (4, 100)]);

    // EXPLAIN: a CTE is read as a derived table (`<derivedN>`, type ALL),
    // its query listed once as a DERIVED row however often it is read.
    let rows: Vec<mysql::Row> = conn
        .query("EXPLAIN WITH c AS (SELECT k FROM t) SELECT * FROM c x JOIN c y ON x.k = y.k")
        .expect("explain");
    let tables: Vec<String> = rows
        .iter()
        .map(|r| {
            r.get::<Option<String>, _>("table")
                .flatten()
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(tables, vec!["<derived2>", "<derived2>", "t"], "{rows:?}");
    drop(sandbox);
}
