//! Joins against a real cluster (a `skarv sandbox` of one data node; the
//! `skarv` binary built next to this test: `cargo build -p skarv` first, or
//! set `SKARV_BIN`): batched key access costs one native round trip per
//! batch of outer rows, not one per row, counted with the connection's
//! `Cluster::stats()`.

use std::net::{IpAddr, Ipv4Addr};

use sql::backend::Backend;
use sql::engine::plan::join::JOIN_BATCH_ROWS;
use sql::engine::Conn;

mod common;
use common::*;

/// Rows of the outer table.
const OUTER_ROWS: usize = 1_000;

#[test]
fn joins_over_a_sandbox() {
    let sandbox = Sandbox::start("sql-joins", 1, 1, 43000);
    let engine = engine_on(&sandbox);
    let session = engine.cluster.session().expect("session");
    let mut conn = engine.open(&session, IpAddr::V4(Ipv4Addr::LOCALHOST));
    log_in_root(&mut conn);
    q(&mut conn, "CREATE DATABASE j");
    conn.use_database("j").expect("use j");
    q(
        &mut conn,
        "CREATE TABLE o (id INT PRIMARY KEY, k INT, g INT, KEY kg (g))",
    );
    q(&mut conn, "CREATE TABLE i (id INT PRIMARY KEY, v INT)");
    q(
        &mut conn,
        "CREATE TABLE r (id INT PRIMARY KEY, k INT, KEY kk (k))",
    );
    q(&mut conn, "CREATE TABLE n (a INT, b INT)");
    for start in (0..OUTER_ROWS).step_by(250) {
        let values =
            |f: &dyn Fn(usize) -> String| (start..start + 250).map(f).collect::<Vec<_>>().join(",");
        // o.k points at i's row 2 × id (half of them exist), o.g groups by 10.
        q(
            &mut conn,
            &format!(
                "INSERT INTO o VALUES {}",
                values(&|x| format!("({x}, {}, {})", 2 * x, x % 10))
            ),
        );
        q(
            &mut conn,
            &format!(
                "INSERT INTO i VALUES {}",
                values(&|x| format!("({x}, {x})"))
            ),
        );
        q(
            &mut conn,
            &format!(
                "INSERT INTO r VALUES {}",
                values(&|x| format!("({x}, {})", x / 2))
            ),
        );
        q(
            &mut conn,
            &format!("INSERT INTO n VALUES {}", values(&|x| format!("({x}, 1)"))),
        );
    }
    let batches = OUTER_ROWS.div_ceil(JOIN_BATCH_ROWS) as u64;
    // Batched key access is what is counted here: pushed joins (which
    // would read these in the data nodes) are `sql_pushed.rs`'s.
    q(&mut conn, "SET ndb_join_pushdown = OFF");

    // Primary-key reads: the keys of a batch of outer rows in one execute.
    let (rows, key_reqs, _) = cost(
        &engine,
        &mut conn,
        "SELECT COUNT(*), SUM(i.v) FROM o JOIN i ON i.id = o.k",
    );
    // o.k = 0, 2, …, 1998: those below 1000 find a row.
    assert_eq!(rows, vec![vec!["500".to_owned(), "249500".to_owned()]]);
    assert!(
        key_reqs >= batches && key_reqs <= batches + 2 + STATS_REFRESH_KEY_REQS,
        "{key_reqs} key batches for {OUTER_ROWS} outer rows (batches of {JOIN_BATCH_ROWS})"
    );
    // The written order does not matter: the table reached by key is read
    // second.
    let (rows, key_reqs, _) = cost(
        &engine,
        &mut conn,
        "SELECT COUNT(*) FROM i JOIN o ON i.id = o.k",
    );
    assert_eq!(rows, vec![vec!["500".to_owned()]]);
    assert!(
        key_reqs >= batches && key_reqs <= batches + 2 + STATS_REFRESH_KEY_REQS,
        "{key_reqs} key batches"
    );
    // LEFT JOIN: the same reads, NULL-extended rows for the misses.
    let (rows, key_reqs, _) = cost(
        &engine,
        &mut conn,
        "SELECT COUNT(*), COUNT(i.id) FROM o LEFT JOIN i ON i.id = o.k",
    );
    assert_eq!(rows, vec![vec!["1000".to_owned(), "500".to_owned()]]);
    assert!(
        key_reqs <= batches + 2 + STATS_REFRESH_KEY_REQS,
        "{key_reqs} key batches"
    );

    // LIMIT without ORDER BY stops after the first batch.
    let (rows, key_reqs, _) = cost(
        &engine,
        &mut conn,
        "SELECT o.id, i.v FROM o JOIN i ON i.id = o.k LIMIT 5",
    );
    assert_eq!(rows.len(), 5);
    assert!(
        key_reqs <= 2 + STATS_REFRESH_KEY_REQS,
        "{key_reqs} key batches for LIMIT 5"
    );

    // An ordered index: one range scan per batch, not one per outer row.
    let (rows, _, scans) = cost(
        &engine,
        &mut conn,
        "SELECT COUNT(*) FROM o JOIN r ON r.k = o.id",
    );
    // r.k = id / 2: each k in 0..500 has two rows.
    assert_eq!(rows, vec![vec!["1000".to_owned()]]);
    assert!(
        scans < OUTER_ROWS as u64 / 10,
        "{scans} scan requests for {OUTER_ROWS} outer rows"
    );

    // No usable key: the inner table is read once, not once per outer row.
    let (rows, _, scans) = cost(
        &engine,
        &mut conn,
        "SELECT COUNT(*) FROM o JOIN n ON n.a = o.k",
    );
    assert_eq!(rows, vec![vec!["500".to_owned()]]);
    assert!(scans < 20, "{scans} scan requests");

    explain(&mut conn);
    multi_table_writes(&engine, &mut conn, batches);
}

/// Multi-table UPDATE and DELETE: their join reads in batches as a
/// SELECT's, their writes go in batches of `OPS_PER_EXECUTE_MAX` (not one
/// round trip per row), the first joined row of a target row decides its
/// values (ORDER BY orders the joined rows), LIMIT counts joined rows, and
/// EXPLAIN shows the join's plan.
fn multi_table_writes(engine: &sql::engine::Engine, conn: &mut Conn<'_>, batches: u64) {
    use sql::engine::exec::OPS_PER_EXECUTE_MAX;
    q(conn, "CREATE TABLE w (id INT PRIMARY KEY, v INT, n INT)");
    q(conn, "INSERT INTO w SELECT id, 0, 0 FROM o");
    // Every o row finds its w row by key; the 500 with an i row change.
    let (_, key_reqs, _) = cost(
        engine,
        conn,
        "UPDATE w JOIN o ON o.id = w.id JOIN i ON i.id = o.k SET w.v = i.v + 1",
    );
    let writes = 500usize.div_ceil(OPS_PER_EXECUTE_MAX) as u64;
    assert!(
        key_reqs <= 2 * batches + writes + 3 + STATS_REFRESH_KEY_REQS,
        "{key_reqs} key batches to join {OUTER_ROWS} rows twice and change 500"
    );
    assert_eq!(
        q(conn, "SELECT COUNT(*), SUM(v) FROM w WHERE v > 0"),
        vec![vec!["500".to_owned(), (249_500 + 500).to_string()]]
    );
    // r.k = id / 2: w row x is in the joined rows of r 2x and 2x + 1; in
    // descending order of r.id the second comes first and decides.
    q(
        conn,
        "UPDATE w JOIN r ON r.k = w.id SET w.n = r.id, w.v = w.v + 1 ORDER BY r.id DESC",
    );
    assert_eq!(
        q(
            conn,
            "SELECT n, v FROM w WHERE id IN (0, 7, 499) ORDER BY id"
        ),
        vec![
            vec!["1".to_owned(), "2".to_owned()],
            vec!["15".to_owned(), "16".to_owned()],
            vec!["999".to_owned(), "1000".to_owned()],
        ]
    );
    // LIMIT 4 of the joined rows in r's order: r 0 to 3, w rows 0 and 1.
    q(
        conn,
        "UPDATE w JOIN r ON r.k = w.id SET w.n = -1 ORDER BY r.id LIMIT 4",
    );
    assert_eq!(
        q(conn, "SELECT id FROM w WHERE n = -1 ORDER BY id"),
        vec![vec!["0".to_owned()], vec!["1".to_owned()]]
    );
    assert_eq!(
        plan_of(conn, "UPDATE w JOIN o ON o.id = w.id SET w.v = o.k"),
        vec![
            row("w", "ALL", "NULL", "NULL", "NULL"),
            row(
                "o",
                "eq_ref",
                "PRIMARY",
                "j.w.id",
                "Using join buffer (Batched Key Access)"
            ),
        ]
    );
    // DELETE of both tables' rows, in batches; w's 500 rows without an i
    // row, and the r rows of w's first 10.
    let (_, key_reqs, _) = cost(
        engine,
        conn,
        "DELETE w FROM w JOIN o ON o.id = w.id LEFT JOIN i ON i.id = o.k WHERE i.id IS NULL",
    );
    assert!(
        key_reqs <= 2 * batches + writes + 3 + STATS_REFRESH_KEY_REQS,
        "{key_reqs} key batches to delete 500 rows"
    );
    assert_eq!(
        q(conn, "SELECT COUNT(*) FROM w"),
        vec![vec!["500".to_owned()]]
    );
    q(
        conn,
        "DELETE w, r FROM w JOIN r ON r.k = w.id WHERE w.id < 10",
    );
    assert_eq!(
        q(
            conn,
            "SELECT (SELECT COUNT(*) FROM w), (SELECT COUNT(*) FROM r)"
        ),
        vec![vec!["490".to_owned(), "980".to_owned()]]
    );
}

/// (table, type, key, ref, Extra) of each row of `EXPLAIN sql`.
fn plan_of(conn: &mut Conn<'_>, sql: &str) -> Vec<[String; 5]> {
    q(conn, &format!("EXPLAIN {sql}"))
        .into_iter()
        .map(|r| {
            [
                r[2].clone(),
                r[4].clone(),
                r[6].clone(),
                r[8].clone(),
                r[11].clone(),
            ]
        })
        .collect()
}

fn row(table: &str, ty: &str, key: &str, reference: &str, extra: &str) -> [String; 5] {
    [table, ty, key, reference, extra].map(str::to_owned)
}

/// EXPLAIN shows the plan the executor runs (the same planner call): the
/// join order, each table's access, index hints.
fn explain(conn: &mut Conn<'_>) {
    let bka = "Using join buffer (Batched Key Access)";
    assert_eq!(
        plan_of(conn, "SELECT COUNT(*) FROM i JOIN o ON i.id = o.k"),
        vec![
            row("o", "ALL", "NULL", "NULL", "NULL"),
            row("i", "eq_ref", "PRIMARY", "j.o.k", bka),
        ]
    );
    assert_eq!(
        plan_of(conn, "SELECT * FROM o JOIN r ON r.k = o.id WHERE o.g = 3"),
        vec![
            row(
                "o",
                "ref",
                "kg",
                "const",
                "Using where; Using pushed condition"
            ),
            row("r", "ref", "kk", "j.o.id", bka),
        ]
    );
    assert_eq!(
        plan_of(conn, "SELECT * FROM o JOIN n ON n.a = o.k")[1],
        row(
            "n",
            "ALL",
            "NULL",
            "NULL",
            "Using where; Using join buffer (hash join)"
        )
    );
    // STRAIGHT_JOIN and LEFT JOIN keep the written order.
    let straight = plan_of(conn, "SELECT STRAIGHT_JOIN * FROM i JOIN o ON i.id = o.k");
    assert_eq!(straight[0][0], "i");
    assert_eq!(straight[1][..2], ["o".to_owned(), "ALL".to_owned()]);
    let left = plan_of(conn, "SELECT * FROM i LEFT JOIN o ON i.id = o.k");
    assert_eq!(left[0][0], "i");
    // A constant key read goes first whatever the written order.
    let constant = plan_of(conn, "SELECT * FROM o JOIN i ON i.id = o.k WHERE i.id = 4");
    assert_eq!(constant[0][..2], ["i".to_owned(), "const".to_owned()]);
    // Index hints, on joins and on single tables.
    assert_eq!(
        plan_of(
            conn,
            "SELECT * FROM o JOIN i IGNORE INDEX (PRIMARY) ON i.id = o.k"
        )[1][..3],
        ["i".to_owned(), "ALL".to_owned(), "NULL".to_owned()]
    );
    assert_eq!(
        plan_of(conn, "SELECT * FROM o USE INDEX () WHERE g = 3"),
        vec![row(
            "o",
            "ALL",
            "NULL",
            "NULL",
            "Using where; Using pushed condition"
        )]
    );
    assert_eq!(
        plan_of(
            conn,
            "SELECT * FROM o FORCE INDEX (kg) WHERE g = 3 AND id = 5"
        )[0][..3],
        ["o".to_owned(), "ref".to_owned(), "kg".to_owned()]
    );
    assert_eq!(
        plan_of(conn, "SELECT * FROM o WHERE g = 3 AND id = 5")[0][..3],
        ["o".to_owned(), "const".to_owned(), "PRIMARY".to_owned()]
    );
    let json = q(
        conn,
        "EXPLAIN FORMAT=JSON SELECT COUNT(*) FROM o JOIN i ON i.id = o.k",
    );
    let json = &json[0][0];
    assert!(json.contains("\"nested_loop\": ["), "{json}");
    assert!(json.contains("\"access_type\": \"eq_ref\""), "{json}");
    assert!(
        json.contains("\"using_join_buffer\": \"Batched Key Access\""),
        "{json}"
    );
    // Without an equality to hash on, each kept row is tested.
    assert_eq!(
        plan_of(conn, "SELECT * FROM o JOIN n ON n.a < o.k")[1][4],
        "Using where; Using join buffer (Block Nested Loop)"
    );
    // EXPLAIN ANALYZE runs it: 1,000 rows scanned, four batches of keys,
    // 500 rows found.
    let tree = q(conn, "EXPLAIN ANALYZE SELECT * FROM o JOIN i ON i.id = o.k");
    let tree = &tree[0][0];
    let lines: Vec<&str> = tree.lines().collect();
    assert!(lines[0].starts_with("-> Nested loop inner join") && lines[0].contains(" rows=500 "));
    assert!(lines[1].contains("Table scan on o") && lines[1].contains(" rows=1000 "));
    assert!(
        lines[2].contains("Single-row index lookup on i using PRIMARY (id=j.o.k)")
            && lines[2].contains(" rows=500 loops=4)"),
        "{tree}"
    );
}

/// Rows of the table `top_n_in_index_order` reads.
const TOP_TABLE_ROWS: usize = 2_000;

/// ORDER BY an ordered index's columns with a small LIMIT, on a table of
/// several partitions: the first rows of each partition in index order,
/// a scan per partition, not the whole table (counted in bytes received);
/// a LIMIT near the table's size reads it whole.
#[test]
fn top_n_in_index_order() {
    let sandbox = Sandbox::start("sql-top-n", 2, 1, 43_600);
    let engine = engine_on(&sandbox);
    let session = engine.cluster.session().expect("session");
    let mut conn = engine.open(&session, IpAddr::V4(Ipv4Addr::LOCALHOST));
    log_in_root(&mut conn);
    q(&mut conn, "CREATE DATABASE top");
    conn.use_database("top").expect("use top");
    q(
        &mut conn,
        "CREATE TABLE r (id INT PRIMARY KEY, k INT, g INT, v VARCHAR(40), KEY kk (k), \
         KEY gk (g, k))",
    );
    let partitions = u64::from(session.table("top/def/r").expect("r").def().partitions);
    assert!(partitions > 1, "{partitions} partitions");
    for start in (0..TOP_TABLE_ROWS).step_by(500) {
        let values: Vec<String> = (start..start + 500)
            .map(|x| format!("({x}, {}, {}, 'a value of some length {x}')", x / 2, x % 7))
            .collect();
        q(
            &mut conn,
            &format!("INSERT INTO r VALUES {}", values.join(",")),
        );
    }
    // What a statement reads: scans asked and bytes received.
    let read = |conn: &mut Conn<'_>, sql: &str| {
        let before = engine.cluster.stats();
        let rows = q(conn, sql);
        let after = engine.cluster.stats();
        (
            rows,
            after.scan_reqs_sent - before.scan_reqs_sent,
            after.bytes_received - before.bytes_received,
        )
    };
    let (whole, _, whole_bytes) = read(&mut conn, "SELECT k, v FROM r");
    assert_eq!(whole.len(), TOP_TABLE_ROWS);
    let last = (TOP_TABLE_ROWS / 2 - 1).to_string();
    let before_last = (TOP_TABLE_ROWS / 2 - 2).to_string();
    let (rows, scans, bytes) = read(&mut conn, "SELECT k, v FROM r ORDER BY k DESC LIMIT 4");
    let ks: Vec<&str> = rows.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(ks, [&last, &last, &before_last, &before_last]);
    // Rows of one k in the index's order: by primary key (descending
    // here), whichever partitions hold them, as MariaDB's index gives them.
    let vs: Vec<&str> = rows.iter().map(|r| r[1].as_str()).collect();
    assert_eq!(
        vs,
        (0..4)
            .map(|i| format!("a value of some length {}", TOP_TABLE_ROWS - 1 - i))
            .collect::<Vec<_>>()
    );
    assert!(scans >= partitions, "{scans} scans: one per partition");
    assert!(
        bytes * 20 < whole_bytes,
        "a top 4 received {bytes} bytes, the whole table {whole_bytes}"
    );
    // By primary key, with a condition the data nodes test and an OFFSET.
    let (rows, _, bytes) = read(
        &mut conn,
        "SELECT id FROM r WHERE v <> 'a value of some length 3' ORDER BY id LIMIT 3 OFFSET 2",
    );
    assert_eq!(rows, [["2"], ["4"], ["5"]]);
    assert!(bytes * 20 < whole_bytes, "a top 5 received {bytes} bytes");
    // An index's leading column fixed by the WHERE orders nothing.
    let (rows, _, bytes) = read(
        &mut conn,
        "SELECT k FROM r WHERE g = 3 ORDER BY k DESC LIMIT 4",
    );
    assert_eq!(rows, [["999"], ["995"], ["992"], ["988"]]);
    assert!(
        bytes * 20 < whole_bytes,
        "a top 4 of g = 3 received {bytes} bytes"
    );
    // A range of another index that finds many rows (g = 3: a seventh of
    // the table, as ANALYZE TABLE counts it) gives way to the ORDER BY's
    // own index read in order, stopping at the LIMIT.
    q(&mut conn, "ANALYZE TABLE r");
    let (rows, _, bytes) = read(
        &mut conn,
        "SELECT id FROM r WHERE g = 3 ORDER BY id DESC LIMIT 3",
    );
    assert_eq!(rows, [["1998"], ["1991"], ["1984"]]);
    assert!(
        bytes * 20 < whole_bytes,
        "a top 3 of g = 3 by id received {bytes} bytes"
    );
    // A job queue's claim (`UPDATE … ORDER BY id LIMIT 1`) reads a few
    // candidates of each partition, not the table.
    let before = engine.cluster.stats();
    q(
        &mut conn,
        "UPDATE r SET v = 'taken' WHERE v <> 'taken' ORDER BY id DESC LIMIT 2",
    );
    let bytes = engine.cluster.stats().bytes_received - before.bytes_received;
    assert_eq!(q(&mut conn, "SELECT ROW_COUNT()"), [["2"]]);
    assert!(
        bytes * 20 < whole_bytes,
        "a claim of 2 received {bytes} bytes"
    );
    let taken = q(&mut conn, "SELECT id FROM r WHERE v = 'taken' ORDER BY id");
    assert_eq!(taken, [["1998"], ["1999"]]);
    // A join ordered by the first table's primary key reads that table
    // along it, a few rows of each partition, not the join: the
    // customers-first plan would read every row of r by its g.
    q(
        &mut conn,
        "CREATE TABLE c (id INT PRIMARY KEY, name VARCHAR(20), region INT)",
    );
    let customers: Vec<String> = (0..50)
        .map(|x| format!("({x}, 'n{x}', {})", x % 5))
        .collect();
    q(
        &mut conn,
        &format!("INSERT INTO c VALUES {}", customers.join(",")),
    );
    q(&mut conn, "ANALYZE TABLE c");
    let latest = "SELECT r.id, c.name FROM r JOIN c ON c.id = r.g ORDER BY r.id DESC LIMIT 3";
    let (rows, _, bytes) = read(&mut conn, latest);
    assert_eq!(rows, [["1999", "n4"], ["1998", "n3"], ["1997", "n2"]]);
    assert!(
        bytes * 20 < whole_bytes,
        "a join's top 3 received {bytes} bytes"
    );
    let plan = q(&mut conn, &format!("EXPLAIN {latest}"));
    assert_eq!(
        (
            plan[0][2].as_str(),
            plan[0][4].as_str(),
            plan[0][6].as_str()
        ),
        ("r", "index", "PRIMARY"),
        "{plan:?}"
    );
    assert!(!plan[0][11].contains("filesort"), "{plan:?}");
    // An OFFSET past half the table still reads r along its order, merged.
    let deep =
        "SELECT r.id, c.name FROM r JOIN c ON c.id = r.g ORDER BY r.id DESC LIMIT 3 OFFSET 1200";
    assert_eq!(
        q(&mut conn, deep),
        [["799", "n1"], ["798", "n0"], ["797", "n6"]]
    );
    let plan = q(&mut conn, &format!("EXPLAIN {deep}"));
    assert_eq!(
        (plan[0][2].as_str(), plan[0][6].as_str()),
        ("r", "PRIMARY"),
        "{plan:?}"
    );
    // A condition on the later table that one row in seven passes takes
    // rounds of more rows per partition; one no row passes gives way to
    // the plan without the order.
    let (rows, _, bytes) = read(
        &mut conn,
        "SELECT r.id FROM r JOIN c ON c.id = r.g WHERE c.region = 3 ORDER BY r.id DESC LIMIT 10",
    );
    let expected: Vec<[String; 1]> = (0..10).map(|i| [(1998 - 7 * i).to_string()]).collect();
    assert_eq!(rows, expected);
    assert!(
        bytes * 5 < whole_bytes,
        "a join's top 10 of a seventh received {bytes} bytes"
    );
    let (rows, _, _) = read(
        &mut conn,
        "SELECT r.id FROM r JOIN c ON c.id = r.g WHERE c.name = 'nobody' ORDER BY r.id LIMIT 5",
    );
    assert!(rows.is_empty(), "{rows:?}");
    // MIN and MAX along indexes read a row per partition and aggregate.
    let (rows, _, bytes) = read(&mut conn, "SELECT MAX(k), MIN(id) FROM r");
    assert_eq!(rows, [["999", "0"]]);
    assert!(
        bytes * 20 < whole_bytes,
        "MIN and MAX received {bytes} bytes"
    );
    let plan = q(&mut conn, "EXPLAIN SELECT MAX(k), MIN(id) FROM r");
    assert_eq!(plan[0][11], "Select tables optimized away", "{plan:?}");
    // COUNT(*) of the whole table: the partitions' row counts, no row.
    let (rows, _, bytes) = read(&mut conn, "SELECT COUNT(*), COUNT(*) * 2 FROM r");
    assert_eq!(rows, [["2000", "4000"]]);
    assert!(bytes * 100 < whole_bytes, "COUNT(*) received {bytes} bytes");
    let plan = q(&mut conn, "EXPLAIN SELECT COUNT(*) FROM r");
    assert_eq!(plan[0][11], "Select tables optimized away", "{plan:?}");
    // GROUP BY an index's column with a LIMIT reads its first groups only.
    let (rows, _, bytes) = read(
        &mut conn,
        "SELECT k, COUNT(*), SUM(id) FROM r GROUP BY k LIMIT 3",
    );
    assert_eq!(rows, [["0", "2", "1"], ["1", "2", "5"], ["2", "2", "9"]]);
    assert!(
        bytes * 10 < whole_bytes,
        "three groups received {bytes} bytes"
    );
    // The WHERE fixes the index's leading column (gk is (g, k)).
    let (rows, _, bytes) = read(&mut conn, "SELECT MIN(k) FROM r WHERE g = 3");
    assert_eq!(rows, [["1"]]);
    assert!(
        bytes * 20 < whole_bytes,
        "MIN of g = 3 received {bytes} bytes"
    );
    // A larger LIMIT, and an OFFSET, read about their rows too: each
    // partition's in index order, merged, never the table.
    let (rows, _, bytes) = read(&mut conn, "SELECT k, v FROM r ORDER BY k LIMIT 400");
    assert_eq!(rows.len(), 400);
    assert_eq!(rows[399][0], "199");
    assert!(bytes * 3 < whole_bytes, "a top 400 received {bytes} bytes");
    let (rows, _, bytes) = read(&mut conn, "SELECT k, v FROM r ORDER BY k LIMIT 1000, 3");
    assert_eq!(
        rows,
        [
            ["500", "a value of some length 1000"],
            ["500", "a value of some length 1001"],
            ["501", "a value of some length 1002"]
        ]
    );
    assert!(
        bytes * 3 < whole_bytes * 2,
        "an offset of 1,000 received {bytes} bytes"
    );
    // Without a LIMIT, every row, in order, and no sort.
    let (rows, _, _) = read(&mut conn, "SELECT id FROM r ORDER BY k DESC, id DESC");
    let ids: Vec<usize> = rows.iter().map(|r| r[0].parse().expect("id")).collect();
    assert_eq!(ids, (0..TOP_TABLE_ROWS).rev().collect::<Vec<_>>());
    let plan = q(
        &mut conn,
        "EXPLAIN SELECT id FROM r ORDER BY k DESC, id DESC",
    );
    assert!(!plan[0][11].contains("filesort"), "{plan:?}");
    // Batched key access through an ordered index: the keys of a batch of
    // outer rows (300 of them, every third value of r.k) are a range each,
    // so only their rows come back, not the span from the smallest to the
    // largest (nine tenths of r).
    q(&mut conn, "CREATE TABLE s (id INT PRIMARY KEY, k INT)");
    let spread: Vec<String> = (0..300).map(|x| format!("({x}, {})", 3 * x)).collect();
    q(
        &mut conn,
        &format!("INSERT INTO s VALUES {}", spread.join(",")),
    );
    let joined = "SELECT COUNT(*), SUM(r.id) FROM s STRAIGHT_JOIN r ON r.k = s.k";
    let plan = q(&mut conn, &format!("EXPLAIN {joined}"));
    assert_eq!(
        (
            plan[1][2].as_str(),
            plan[1][4].as_str(),
            plan[1][6].as_str()
        ),
        ("r", "ref", "kk"),
        "{plan:?}"
    );
    // r.k = s.k = 3x holds r's ids 6x and 6x + 1.
    let sum: usize = (0..300).map(|x| 12 * x + 1).sum();
    let (rows, _, bytes) = read(&mut conn, joined);
    assert_eq!(rows, [["600".to_string(), sum.to_string()]]);
    assert!(
        bytes * 2 < whole_bytes,
        "a join of 600 of r's rows received {bytes} bytes, the whole table {whole_bytes}"
    );
}

/// Rows of `distinct_reads_step_over_repeats`' table: ten values of `g`,
/// 300 rows each.
const DISTINCT_TABLE_ROWS: usize = 3_000;

/// `SELECT DISTINCT g`, `COUNT(DISTINCT g)` and `GROUP BY g` with
/// aggregates that ignore repeats, over an index led by `g`: each
/// partition's distinct scan sends one row per value (a loose index
/// scan), not the table (counted in bytes received); a WHERE the data
/// nodes test whole keeps it, one they cannot, and a transaction's own
/// pending writes, read every row and still answer right. `COUNT(*) …
/// WHERE` is a counting scan, sending a number, not the rows.
#[test]
fn distinct_reads_step_over_repeats() {
    let sandbox = Sandbox::start("sql-distinct", 2, 1, 43_700);
    let engine = engine_on(&sandbox);
    let session = engine.cluster.session().expect("session");
    let mut conn = engine.open(&session, IpAddr::V4(Ipv4Addr::LOCALHOST));
    log_in_root(&mut conn);
    q(&mut conn, "CREATE DATABASE dist");
    conn.use_database("dist").expect("use dist");
    q(
        &mut conn,
        "CREATE TABLE d (id INT PRIMARY KEY, g INT, h VARCHAR(10), v VARCHAR(40), \
         KEY gk (g), KEY ghk (g, h))",
    );
    for start in (0..DISTINCT_TABLE_ROWS).step_by(500) {
        let values: Vec<String> = (start..start + 500)
            .map(|x| {
                let h = ["b", "A", "a", "B"][x % 4];
                format!("({x}, {}, '{h}', 'a value of some length {x}')", x % 10)
            })
            .collect();
        q(
            &mut conn,
            &format!("INSERT INTO d VALUES {}", values.join(",")),
        );
    }
    let read = |conn: &mut Conn<'_>, sql: &str| {
        let before = engine.cluster.stats();
        let rows = q(conn, sql);
        let after = engine.cluster.stats();
        (rows, after.bytes_received - before.bytes_received)
    };
    let (whole, whole_bytes) = read(&mut conn, "SELECT g, v FROM d");
    assert_eq!(whole.len(), DISTINCT_TABLE_ROWS);
    let one = |v: &str| vec![vec![v.to_string()]];
    let digits: Vec<Vec<String>> = (0..10).map(|g| vec![g.to_string()]).collect();
    let few = |bytes: u64, what: &str| {
        assert!(
            bytes * 20 < whole_bytes,
            "{what} received {bytes} bytes, the whole table {whole_bytes}"
        );
    };
    let (rows, bytes) = read(&mut conn, "SELECT COUNT(DISTINCT g) FROM d");
    assert_eq!(rows, one("10"));
    few(bytes, "COUNT(DISTINCT g)");
    let (rows, bytes) = read(&mut conn, "SELECT DISTINCT g FROM d ORDER BY g");
    assert_eq!(rows, digits);
    few(bytes, "DISTINCT g");
    let plan = q(&mut conn, "EXPLAIN SELECT DISTINCT g FROM d");
    assert_eq!(plan[0][6], "gk", "{plan:?}");
    assert!(plan[0][11].contains("Using index for group-by"), "{plan:?}");
    // A range read of the prefix, as MariaDB's loose index scan; its rows
    // the values ANALYZE TABLE counted.
    assert_eq!(plan[0][4], "range", "{plan:?}");
    q(&mut conn, "ANALYZE TABLE d");
    let plan = q(&mut conn, "EXPLAIN SELECT COUNT(DISTINCT g, h) FROM d");
    assert_eq!(
        (
            plan[0][4].as_str(),
            plan[0][6].as_str(),
            plan[0][9].as_str()
        ),
        ("range", "ghk", "20"),
        "{plan:?}"
    );
    // Two columns, 'a' and 'A' one value under the column's case-blind
    // collation, the index's first row of each shown (ids 1 and 2 of g
    // = 1 and 2 hold 'A' and 'a').
    let (rows, bytes) = read(
        &mut conn,
        "SELECT g, MIN(h), MAX(h), COUNT(DISTINCT h) FROM d GROUP BY g ORDER BY g LIMIT 3",
    );
    let expected: Vec<Vec<String>> = [
        ["0", "a", "b", "2"],
        ["1", "A", "B", "2"],
        ["2", "a", "b", "2"],
    ]
    .iter()
    .map(|r| r.iter().map(|v| (*v).to_string()).collect())
    .collect();
    assert_eq!(rows, expected);
    few(bytes, "GROUP BY g with MIN(h)");
    // A WHERE bounding g, which `gk` alone would read: the same bounds
    // along `ghk`, one row per (g, h).
    let (rows, bytes) = read(
        &mut conn,
        "SELECT g, MAX(h), COUNT(DISTINCT h) FROM d WHERE g >= 8 GROUP BY g",
    );
    let expected: Vec<Vec<String>> = [["8", "b", "2"], ["9", "B", "2"]]
        .iter()
        .map(|r| r.iter().map(|v| (*v).to_string()).collect())
        .collect();
    assert_eq!(rows, expected);
    few(bytes, "GROUP BY g WHERE g >= 8");
    // A WHERE the data nodes test: still one row per value.
    let (rows, bytes) = read(
        &mut conn,
        "SELECT COUNT(DISTINCT g) FROM d WHERE id >= 2995",
    );
    assert_eq!(rows, one("5"));
    few(bytes, "COUNT(DISTINCT g) WHERE id >= 2995");
    // One they cannot (a function of the row): every row, the same answer.
    let (rows, bytes) = read(
        &mut conn,
        "SELECT COUNT(DISTINCT g) FROM d WHERE REVERSE(v) < '2'",
    );
    assert_eq!(rows, one("2"));
    assert!(bytes * 4 > whole_bytes, "{bytes} of {whole_bytes}");
    // COUNT(*) counts repeats: read as before.
    let (rows, _) = read(&mut conn, "SELECT g, COUNT(*) FROM d GROUP BY g LIMIT 1");
    assert_eq!(rows, [["0".to_string(), "300".to_string()]]);
    // COUNT(*) of a WHERE the data nodes test whole: a counting scan, a
    // number per partition and batch instead of the rows (a value listed
    // twice counted once); one they cannot test exactly (a function, text
    // under another collation than the column's) reads the rows.
    for (sql, expected, counted) in [
        ("SELECT COUNT(*) FROM d WHERE g >= 7", "900", true),
        (
            "SELECT COUNT(*), COUNT(id) FROM d WHERE g = 3 AND id < 2000",
            "200",
            true,
        ),
        ("SELECT COUNT(*) FROM d WHERE g IN (1, 2, 9)", "900", true),
        ("SELECT COUNT(*) FROM d WHERE g IN (1, 1)", "300", true),
        // Text under the column's collation: each row tested once by
        // the data nodes' filter, 'a' and 'A' one value.
        ("SELECT COUNT(*) FROM d WHERE h IN ('a', 'A')", "1500", true),
        ("SELECT COUNT(*) FROM d WHERE h = 'B'", "1500", true),
        (
            "SELECT COUNT(*) FROM d WHERE h = _utf8mb4'B' COLLATE utf8mb4_bin",
            "750",
            false,
        ),
        (
            "SELECT COUNT(*) FROM d WHERE REVERSE(v) < '2'",
            "600",
            false,
        ),
    ] {
        let (rows, bytes) = read(&mut conn, sql);
        assert_eq!(rows[0][0], expected, "{sql}");
        if counted {
            few(bytes, sql);
        } else {
            assert!(
                bytes * 20 > whole_bytes / 10,
                "{sql}: {bytes} of {whole_bytes}"
            );
        }
    }
    // Counts, sums, MIN and MAX of integer columns, grouped by columns or
    // not, over a WHERE the data nodes test whole: an aggregating scan, a
    // row per group, partition and batch instead of the rows; of an
    // expression, the rows.
    for (sql, expected, aggregated) in [
        (
            "SELECT COUNT(*), SUM(id), MIN(g), MAX(id) FROM d",
            &["3000", "4498500", "0", "2999"][..],
            true,
        ),
        (
            "SELECT g, COUNT(*), SUM(id), AVG(id) FROM d WHERE id < 1000 GROUP BY g",
            &["0", "100", "49500", "495.0000"][..],
            true,
        ),
        ("SELECT COUNT(*) FROM d GROUP BY h", &["1500"][..], true),
        ("SELECT SUM(id + 1) FROM d", &["4501500"][..], false),
        // DISTINCT aggregates of a column no index leads (h: 'b', 'A',
        // 'a', 'B', two values case-blind): grouped by it too; and
        // SELECT DISTINCT of it, as its groups.
        (
            "SELECT COUNT(DISTINCT h), COUNT(*), SUM(DISTINCT g) FROM d",
            &["2", "3000", "45"][..],
            true,
        ),
        (
            "SELECT g, COUNT(DISTINCT h), COUNT(*) FROM d WHERE id < 1000 GROUP BY g",
            &["0", "2", "100"][..],
            true,
        ),
        (
            "SELECT COUNT(*) FROM (SELECT DISTINCT h FROM d) t",
            &["2"][..],
            true,
        ),
        ("SELECT COUNT(DISTINCT UPPER(h)) FROM d", &["2"][..], false),
    ] {
        let (rows, bytes) = read(&mut conn, sql);
        assert_eq!(rows[0], expected, "{sql}");
        if aggregated {
            few(bytes, sql);
        } else {
            assert!(
                bytes * 4 > whole_bytes / 10,
                "{sql}: {bytes} of {whole_bytes}"
            );
        }
    }
    // EXPLAIN says which reads are aggregating scans.
    let extra = |conn: &mut Conn<'_>, sql: &str| q(conn, &format!("EXPLAIN {sql}"))[0][11].clone();
    for (sql, pushed) in [
        ("SELECT g, SUM(id) FROM d GROUP BY g", true),
        ("SELECT COUNT(DISTINCT h) FROM d WHERE g > 3", true),
        ("SELECT DISTINCT h FROM d", true),
        ("SELECT SUM(id + 1) FROM d", false),
        ("SELECT DISTINCT g FROM d", false),
    ] {
        let extra = extra(&mut conn, sql);
        assert_eq!(
            extra.contains("Using pushed aggregation"),
            pushed,
            "{sql}: {extra}"
        );
    }
    // Aggregates of d joined to a table by its primary key, grouped by
    // that table's columns: d aggregated per join key where it is, a row
    // per key, partition and batch; with a condition the SQL node tests,
    // the joined rows.
    q(
        &mut conn,
        "CREATE TABLE dk (g INT PRIMARY KEY, label VARCHAR(10))",
    );
    q(
        &mut conn,
        "INSERT INTO dk VALUES (0, 'even'), (1, 'odd'), (2, 'even'), (3, 'odd'), (4, 'even')",
    );
    let joined = "SELECT k.label, COUNT(*), SUM(d.id) FROM dk k JOIN d ON d.g = k.g";
    let (rows, bytes) = read(&mut conn, &format!("{joined} GROUP BY k.label"));
    // g = id % 10: 300 rows each, their ids summed per label.
    let expected: Vec<Vec<String>> = [["even", "900", "1347300"], ["odd", "600", "898200"]]
        .iter()
        .map(|r| r.iter().map(|v| (*v).to_string()).collect())
        .collect();
    assert_eq!(rows, expected);
    few(bytes, "aggregates below the join");
    // EXPLAIN shows d's read as the aggregating scan it is.
    let d_row = |conn: &mut Conn<'_>, sql: &str| {
        let plan = q(conn, &format!("EXPLAIN {sql}"));
        let row = plan.iter().find(|r| r[2] == "d").cloned();
        row.unwrap_or_else(|| panic!("{sql}: no row of d in {plan:?}"))
    };
    let row = d_row(&mut conn, &format!("{joined} GROUP BY k.label"));
    assert!(row[11].contains("Using pushed aggregation"), "{row:?}");
    assert_eq!(row[4], "ALL", "{row:?}");
    let row = d_row(
        &mut conn,
        &format!("{joined} WHERE REVERSE(d.v) > '' GROUP BY k.label"),
    );
    assert!(!row[11].contains("Using pushed aggregation"), "{row:?}");
    let (rows, bytes) = read(
        &mut conn,
        &format!("{joined} WHERE REVERSE(d.v) > '' GROUP BY k.label"),
    );
    assert_eq!(rows, expected);
    assert!(bytes * 4 > whole_bytes / 10, "{bytes} of {whole_bytes}");
    // A condition of the other table that picks one row: that table
    // first, then d aggregated for its key only (along gk), not joined
    // row by row (300 rows of d) nor aggregated whole.
    let (rows, bytes) = read(
        &mut conn,
        &format!("{joined} WHERE k.g = 1 GROUP BY k.label"),
    );
    assert_eq!(
        rows,
        [["odd".to_string(), "300".to_string(), "448800".to_string()]]
    );
    // (Joined, d's 300 rows of two columns came to 9,282 bytes of the
    // whole table's 185,574; this read to 358.)
    assert!(
        bytes * 100 < whole_bytes,
        "the other table first: {bytes} bytes of {whole_bytes}"
    );
    // No row of it: nothing of d read.
    let (rows, _) = read(
        &mut conn,
        &format!("{joined} WHERE k.g = 7 GROUP BY k.label"),
    );
    assert!(rows.is_empty(), "{rows:?}");
    // Few join keys of a large table: its rows read by those keys (5 of
    // d's 3,000), not all of them.
    let (rows, bytes) = read(
        &mut conn,
        "SELECT COUNT(*) FROM d JOIN dk ON dk.g = d.id GROUP BY d.h ORDER BY 1",
    );
    assert_eq!(rows, [["2".to_string()], ["3".to_string()]]);
    few(bytes, "aggregates below the join, the other table by key");
    q(&mut conn, "DROP TABLE dk");
    // A transaction's own pending write is seen.
    q(&mut conn, "SET transaction_allow_batching = 1");
    q(&mut conn, "BEGIN");
    q(&mut conn, "INSERT INTO d VALUES (5000, 42, 'c', 'new')");
    let (rows, _) = read(&mut conn, "SELECT COUNT(DISTINCT g) FROM d");
    assert_eq!(rows, one("11"));
    let (rows, _) = read(&mut conn, "SELECT COUNT(*) FROM d WHERE g >= 7");
    assert_eq!(rows, one("901"));
    let (rows, _) = read(&mut conn, "SELECT g, SUM(id) FROM d WHERE g > 9 GROUP BY g");
    assert_eq!(rows, [["42".to_string(), "5000".to_string()]]);
    q(&mut conn, "ROLLBACK");
    q(&mut conn, "SET transaction_allow_batching = 0");
}
