//! Subqueries against a real cluster (a `skarv sandbox` of one data node;
//! the `skarv` binary built next to this test: `cargo build -p skarv`
//! first, or set `SKARV_BIN`): a correlated `EXISTS`/`IN` runs as a
//! semi-join with batched key access, one native batch of key reads per
//! `JOIN_BATCH_ROWS` outer rows rather than one query per outer row; an
//! uncorrelated subquery runs once per statement; any other correlated
//! subquery (and a LATERAL derived table) runs once per distinct outer
//! value.

use std::net::{IpAddr, Ipv4Addr};

use sql::backend::Backend;
use sql::engine::plan::join::JOIN_BATCH_ROWS;
use sql::value::SqlValue;

mod common;
use common::*;

/// Rows of the outer table.
const OUTER_ROWS: usize = 1_000;
/// Distinct values of `g.grp` (the per-row subqueries' outer column).
const GROUPS: usize = 20;

#[test]
fn subqueries_over_a_sandbox() {
    let sandbox = Sandbox::start("sql-subq", 1, 1, 36040);
    let engine = engine_on(&sandbox);
    let session = engine.cluster.session().expect("session");
    let mut conn = engine.open(&session, IpAddr::V4(Ipv4Addr::LOCALHOST));
    log_in_root(&mut conn);
    q(&mut conn, "CREATE DATABASE sq");
    conn.use_database("sq").expect("use sq");
    q(
        &mut conn,
        "CREATE TABLE o (id INT PRIMARY KEY, k INT NOT NULL)",
    );
    q(&mut conn, "CREATE TABLE i (id INT PRIMARY KEY, v INT)");
    for start in (0..OUTER_ROWS).step_by(250) {
        let values =
            |f: &dyn Fn(usize) -> String| (start..start + 250).map(f).collect::<Vec<_>>().join(",");
        // o.k points at i's row 2 × id: half of them exist.
        q(
            &mut conn,
            &format!(
                "INSERT INTO o VALUES {}",
                values(&|x| format!("({x}, {})", 2 * x))
            ),
        );
        q(
            &mut conn,
            &format!(
                "INSERT INTO i VALUES {}",
                values(&|x| format!("({x}, {x})"))
            ),
        );
    }
    let batches = OUTER_ROWS.div_ceil(JOIN_BATCH_ROWS) as u64;
    let half = (OUTER_ROWS / 2).to_string();

    // EXISTS by the inner table's primary key: a semi-join whose key
    // reads go out a batch of outer rows at a time.
    let (rows, key_reqs, scans) = cost(
        &engine,
        &mut conn,
        "SELECT COUNT(*) FROM o WHERE EXISTS (SELECT 1 FROM i WHERE i.id = o.k)",
    );
    assert_eq!(rows, vec![vec![half.clone()]]);
    // One scan of o (its batches of rows).
    assert!(scans < 10, "{scans} scan requests");
    assert!(
        key_reqs >= batches && key_reqs <= batches + 2 + STATS_REFRESH_KEY_REQS,
        "{key_reqs} key batches for {OUTER_ROWS} outer rows (batches of {JOIN_BATCH_ROWS})"
    );
    // IN, correlated, and NOT EXISTS (an anti-join): the same.
    let (rows, key_reqs, _) = cost(
        &engine,
        &mut conn,
        "SELECT COUNT(*) FROM o WHERE o.k IN (SELECT i.id FROM i WHERE i.v = o.k)",
    );
    assert_eq!(rows, vec![vec![half.clone()]]);
    assert!(
        key_reqs <= batches + 2 + STATS_REFRESH_KEY_REQS,
        "{key_reqs} key batches (IN)"
    );
    let (rows, key_reqs, _) = cost(
        &engine,
        &mut conn,
        "SELECT COUNT(*) FROM o WHERE NOT EXISTS (SELECT 1 FROM i WHERE i.id = o.k)",
    );
    assert_eq!(rows, vec![vec![half.clone()]]);
    assert!(
        key_reqs <= batches + 2 + STATS_REFRESH_KEY_REQS,
        "{key_reqs} key batches (NOT EXISTS)"
    );
    // EXPLAIN says what runs.
    let plan = q(
        &mut conn,
        "EXPLAIN SELECT id FROM o WHERE EXISTS (SELECT 1 FROM i WHERE i.id = o.k)",
    );
    assert_eq!(plan.len(), 2, "{plan:?}");
    assert_eq!(plan[1][1], "SIMPLE");
    assert!(plan[1][11].contains("FirstMatch(o)"), "{plan:?}");

    // An uncorrelated subquery runs once: `pk IN (SELECT …)` is then one
    // batch of key reads, not a read per outer row.
    let (rows, key_reqs, scans) = cost(
        &engine,
        &mut conn,
        "SELECT COUNT(*) FROM o WHERE id IN (SELECT id FROM i WHERE v < 100)",
    );
    assert_eq!(rows, vec![vec!["100".to_owned()]]);
    assert!(scans < 10, "{scans} scan requests (one scan of i)");
    assert!(key_reqs <= 2, "{key_reqs} key batches");

    // A scalar subquery in the select list: once for the statement, not
    // once per row (one scan of o, one of i).
    let (rows, key_reqs, scans) = cost(
        &engine,
        &mut conn,
        "SELECT id, (SELECT MAX(v) FROM i) FROM o WHERE id < 3 OR id >= 0",
    );
    assert_eq!(rows.len(), OUTER_ROWS);
    assert_eq!(rows[0][1], (OUTER_ROWS - 1).to_string());
    assert!(
        scans < 20 && key_reqs <= 2,
        "{scans} scans, {key_reqs} key batches"
    );

    // A derived table joined by key.
    let (rows, key_reqs, _) = cost(
        &engine,
        &mut conn,
        "SELECT COUNT(*) FROM (SELECT k FROM o) d JOIN i ON i.id = d.k",
    );
    assert_eq!(rows, vec![vec![half]]);
    assert!(
        key_reqs <= batches + 2 + STATS_REFRESH_KEY_REQS,
        "{key_reqs} key batches (derived)"
    );

    // A correlated subquery the rewrite does not take runs per outer row,
    // once per distinct outer value (the statement's per-row cache): g's
    // 1,000 rows hold `GROUPS` values of `grp`, so `GROUPS` key reads of i.
    q(
        &mut conn,
        "CREATE TABLE g (id INT PRIMARY KEY, grp INT NOT NULL)",
    );
    q(
        &mut conn,
        &format!("INSERT INTO g SELECT id, id % {GROUPS} FROM o"),
    );
    let counter = |conn: &mut sql::engine::Conn<'_>, name: &str| -> u64 {
        let rows = q(conn, &format!("SHOW SESSION STATUS LIKE '{name}'"));
        rows[0][1].parse().expect("a count")
    };
    let (hits, misses) = (
        counter(&mut conn, "Subquery_cache_hit"),
        counter(&mut conn, "Subquery_cache_miss"),
    );
    let (rows, key_reqs, scans) = cost(
        &engine,
        &mut conn,
        "SELECT id, (SELECT v FROM i WHERE i.id = g.grp) FROM g ORDER BY id",
    );
    assert_eq!(
        counter(&mut conn, "Subquery_cache_miss") - misses,
        GROUPS as u64
    );
    assert_eq!(
        counter(&mut conn, "Subquery_cache_hit") - hits,
        (OUTER_ROWS - GROUPS) as u64
    );
    assert_eq!(rows.len(), OUTER_ROWS);
    assert_eq!(rows[27], vec!["27".to_owned(), (27 % GROUPS).to_string()]);
    assert!(scans < 10, "{scans} scan requests (one scan of g)");
    assert!(
        key_reqs >= GROUPS as u64 && key_reqs <= GROUPS as u64 + 2 + STATS_REFRESH_KEY_REQS,
        "{key_reqs} key reads for {GROUPS} distinct outer values"
    );
    // In WHERE under OR (no rewrite): the same cache.
    let (rows, key_reqs, _) = cost(
        &engine,
        &mut conn,
        "SELECT COUNT(*) FROM g WHERE g.id < 0 OR (SELECT v FROM i WHERE i.id = g.grp) >= 10",
    );
    assert_eq!(rows, vec![vec![(OUTER_ROWS / 2).to_string()]]);
    assert!(
        key_reqs <= GROUPS as u64 + 2 + STATS_REFRESH_KEY_REQS,
        "{key_reqs} key reads (WHERE)"
    );
    // A LATERAL derived table: the same binding and cache.
    let (rows, key_reqs, _) = cost(
        &engine,
        &mut conn,
        "SELECT COUNT(*), SUM(d.v) FROM g, LATERAL (SELECT v FROM i WHERE i.id = g.grp) AS d",
    );
    let sum: usize = (0..OUTER_ROWS).map(|x| x % GROUPS).sum();
    assert_eq!(rows, vec![vec![OUTER_ROWS.to_string(), sum.to_string()]]);
    assert!(
        key_reqs <= GROUPS as u64 + 2 + STATS_REFRESH_KEY_REQS,
        "{key_reqs} key reads (LATERAL)"
    );
    // Placeholders inside a per-row subquery (the binary protocol): each
    // run binds the statement's parameters and the outer row's values.
    let p = conn
        .prepare(concat!(
            "SELECT id, (SELECT v FROM i WHERE i.id = g.grp + ?) FROM g ",
            "WHERE id < ? ORDER BY id"
        ))
        .expect("prepare");
    let mut sink = RowsSink::default();
    conn.execute(p.id, &[SqlValue::Int(100), SqlValue::Int(3)], &mut sink)
        .expect("execute");
    assert!(sink.error.is_none(), "{:?}", sink.error);
    let want: Vec<Vec<SqlValue>> = (0..3)
        .map(|x| vec![SqlValue::Int(x), SqlValue::Int(100 + x)])
        .collect();
    assert_eq!(sink.rows, want);
    // EXPLAIN says what runs: a dependent subquery reading i by key.
    let plan = q(
        &mut conn,
        "EXPLAIN SELECT id, (SELECT v FROM i WHERE i.id = g.grp) FROM g",
    );
    assert_eq!(plan.len(), 2, "{plan:?}");
    assert_eq!(plan[1][1], "DEPENDENT SUBQUERY", "{plan:?}");
    assert_eq!(plan[1][4], "eq_ref", "{plan:?}");
    // Inside a transaction an UPDATE's per-row subquery reads through the
    // statement's own transaction, so it sees the transaction's writes
    // (i's new rows), and still runs once per distinct outer value.
    q(&mut conn, "BEGIN");
    let added: Vec<String> = (0..GROUPS)
        .map(|x| format!("({}, {})", 10_000 + x, 7 * x))
        .collect();
    q(
        &mut conn,
        &format!("INSERT INTO i VALUES {}", added.join(",")),
    );
    let misses = counter(&mut conn, "Subquery_cache_miss");
    q(
        &mut conn,
        "UPDATE g SET grp = (SELECT v FROM i WHERE i.id = 10000 + g.grp) WHERE id < 100",
    );
    assert_eq!(
        counter(&mut conn, "Subquery_cache_miss") - misses,
        GROUPS as u64
    );
    let sum: usize = (0..100).map(|x| 7 * (x % GROUPS)).sum();
    let rows = q(&mut conn, "SELECT SUM(grp) FROM g WHERE id < 100");
    assert_eq!(rows, vec![vec![sum.to_string()]]);
    // DELETE too.
    q(
        &mut conn,
        "DELETE FROM g WHERE id < 100 AND (SELECT v FROM i WHERE i.id = 10000 + g.grp / 7) > 70",
    );
    let rows = q(&mut conn, "SELECT COUNT(*) FROM g WHERE id < 100");
    assert_eq!(rows, vec![vec!["55".to_owned()]]);
    // The table written may be read (MariaDB 10.3+, not MySQL: 1093): the
    // last row's NOT NULL grp would take NULL, 1048, and nothing is written.
    let before = q(&mut conn, "SELECT SUM(grp), COUNT(*) FROM g");
    let e = try_q(
        &mut conn,
        "UPDATE g SET grp = (SELECT MAX(x.grp) FROM g x WHERE x.id = g.id + 1)",
    )
    .expect_err("1048");
    assert_eq!(e.code, 1048, "{e}");
    assert_eq!(q(&mut conn, "SELECT SUM(grp), COUNT(*) FROM g"), before);
    // EXPLAIN UPDATE shows the subquery's plan.
    let plan = q(
        &mut conn,
        "EXPLAIN UPDATE g SET grp = (SELECT v FROM i WHERE i.id = g.grp) WHERE id < 10",
    );
    assert_eq!(plan.len(), 2, "{plan:?}");
    assert_eq!(plan[0][1], "UPDATE", "{plan:?}");
    assert_eq!(plan[1][1], "DEPENDENT SUBQUERY", "{plan:?}");
    assert_eq!(plan[1][4], "eq_ref", "{plan:?}");
    q(&mut conn, "ROLLBACK");
    let rows = q(&mut conn, "SELECT COUNT(*), SUM(grp) FROM g WHERE id < 100");
    let sum: usize = (0..100).map(|x| x % GROUPS).sum();
    assert_eq!(rows, vec![vec!["100".to_owned(), sum.to_string()]]);
    // EXPLAIN ANALYZE runs it: the subquery ran once per distinct outer
    // value (its loops), giving one row each time.
    let tree = q(
        &mut conn,
        "EXPLAIN ANALYZE SELECT id, (SELECT v FROM i WHERE i.id = g.grp) FROM g",
    );
    let tree = &tree[0][0];
    let lines: Vec<&str> = tree.lines().collect();
    assert!(
        lines[0].starts_with("-> Table scan on g") && lines[0].contains(" rows=1000 "),
        "{tree}"
    );
    assert!(
        lines[1].starts_with("-> Select #2 (subquery in projection; dependent)")
            && lines[1].ends_with(&format!(" rows=1 loops={GROUPS})")),
        "{tree}"
    );
    assert!(
        lines[2].starts_with("    -> ") && lines[2].contains(" on i"),
        "{tree}"
    );
    // FORMAT=JSON nests it where MySQL does: under the table whose
    // condition runs it.
    let json = q(
        &mut conn,
        "EXPLAIN FORMAT=JSON SELECT id FROM g WHERE (SELECT v FROM i WHERE i.id = g.grp) > 3",
    );
    let json = &json[0][0];
    assert!(json.contains("\"attached_subqueries\": ["), "{json}");
    assert!(json.contains("\"dependent\": true"), "{json}");
    assert!(json.contains("\"select_id\": 2"), "{json}");
    // EXPLAIN lists a derived table's query as `<derivedN>` and DERIVED
    // rows; a CTE read twice runs once, so its query is listed once.
    let plan = q(
        &mut conn,
        concat!(
            "EXPLAIN WITH c AS (SELECT grp, COUNT(*) AS n FROM g GROUP BY grp) ",
            "SELECT * FROM c JOIN c AS c2 ON c2.grp = c.grp"
        ),
    );
    let shape: Vec<[&str; 3]> = plan
        .iter()
        .map(|r| [r[0].as_str(), r[1].as_str(), r[2].as_str()])
        .collect();
    assert_eq!(
        shape,
        vec![
            ["1", "PRIMARY", "<derived2>"],
            ["1", "PRIMARY", "<derived2>"],
            ["2", "DERIVED", "g"],
        ],
        "{plan:?}"
    );
    // A JSON_TABLE over each row of g: a table of the SELECT's own (not a
    // dependent query), with MariaDB's Extra; its rows are g's.
    let plan = q(
        &mut conn,
        concat!(
            "EXPLAIN SELECT g.id, jt.v FROM g, JSON_TABLE(CONCAT('[', g.grp, ',0]'), '$[*]' ",
            "COLUMNS (v INT PATH '$')) AS jt"
        ),
    );
    let shape: Vec<[&str; 3]> = plan
        .iter()
        .map(|r| [r[1].as_str(), r[2].as_str(), r[r.len() - 1].as_str()])
        .collect();
    assert_eq!(
        shape,
        vec![
            ["SIMPLE", "g", "NULL"],
            ["SIMPLE", "jt", "Table function: json_table"]
        ],
        "{plan:?}"
    );
    let json = q(
        &mut conn,
        "EXPLAIN FORMAT=JSON SELECT * FROM JSON_TABLE('[1]', '$[*]' COLUMNS (v INT PATH '$')) AS jt",
    );
    let json = &json[0][0];
    assert!(json.contains("\"table_name\": \"jt\""), "{json}");
    assert!(
        json.contains("\"table_function\": \"json_table\""),
        "{json}"
    );
    let rows = q(
        &mut conn,
        concat!(
            "SELECT COUNT(*), SUM(jt.v), SUM(jt.n) FROM g, JSON_TABLE(CONCAT('[', g.grp, ',0]'), ",
            "'$[*]' COLUMNS (n FOR ORDINALITY, v INT PATH '$')) AS jt"
        ),
    );
    let grp_sum: usize = (0..OUTER_ROWS).map(|x| x % GROUPS).sum();
    assert_eq!(
        rows,
        vec![vec![
            (2 * OUTER_ROWS).to_string(),
            grp_sum.to_string(),
            (3 * OUTER_ROWS).to_string()
        ]],
    );
    // Placeholders in a LEFT JOIN's ON that runs a correlated subquery
    // (rewritten as a LATERAL table, its conjuncts moved) and in a table's
    // ON after a LATERAL one bind where they were written.
    let p = conn
        .prepare(concat!(
            "SELECT g.id, x.id FROM g LEFT JOIN i x ON x.id = g.grp + ? ",
            "AND x.v > (SELECT MIN(v) FROM i WHERE i.id = g.grp) - ? WHERE g.id < ? ORDER BY g.id"
        ))
        .expect("prepare");
    let mut sink = RowsSink::default();
    conn.execute(
        p.id,
        &[SqlValue::Int(1), SqlValue::Int(0), SqlValue::Int(3)],
        &mut sink,
    )
    .expect("execute");
    assert!(sink.error.is_none(), "{:?}", sink.error);
    // x.id = grp + 1 has v = grp + 1 > grp - 0: every row matches.
    let want: Vec<Vec<SqlValue>> = (0..3)
        .map(|x| vec![SqlValue::Int(x), SqlValue::Int(x + 1)])
        .collect();
    assert_eq!(sink.rows, want);
    let mut sink = RowsSink::default();
    conn.execute(
        p.id,
        &[SqlValue::Int(1), SqlValue::Int(-5), SqlValue::Int(2)],
        &mut sink,
    )
    .expect("execute");
    // v = grp + 1 > grp + 5 never holds: NULL-extended.
    let want: Vec<Vec<SqlValue>> = (0..2)
        .map(|x| vec![SqlValue::Int(x), SqlValue::Null])
        .collect();
    assert_eq!(sink.rows, want);
    let p = conn
        .prepare(concat!(
            "SELECT g.id, x.v FROM g, LATERAL (SELECT v + ? AS v FROM i WHERE i.id = g.grp) ",
            "AS d JOIN i x ON x.id = d.v + ? WHERE g.id < ? ORDER BY g.id"
        ))
        .expect("prepare");
    let mut sink = RowsSink::default();
    conn.execute(
        p.id,
        &[SqlValue::Int(10), SqlValue::Int(1), SqlValue::Int(2)],
        &mut sink,
    )
    .expect("execute");
    assert!(sink.error.is_none(), "{:?}", sink.error);
    let want: Vec<Vec<SqlValue>> = (0..2)
        .map(|x| vec![SqlValue::Int(x), SqlValue::Int(x + 11)])
        .collect();
    assert_eq!(sink.rows, want);

    // A subquery may read the table its UPDATE, DELETE or one-row INSERT
    // writes (MariaDB 10.3+; MySQL's 1093), and reads it as it was before
    // the statement, as MariaDB's does; an INSERT of several rows refuses
    // one, since MariaDB reads it again for each row (where it can see the
    // rows written before).
    q(&mut conn, "CREATE TABLE w (id INT PRIMARY KEY, v INT)");
    q(&mut conn, "INSERT INTO w VALUES (1, 1), (2, 2), (3, 3)");
    q(
        &mut conn,
        "UPDATE w SET v = (SELECT SUM(x.v) FROM w AS x WHERE x.id < w.id) ORDER BY id",
    );
    let rows = |pairs: &[(&str, &str)]| -> Vec<Vec<String>> {
        pairs
            .iter()
            .map(|(a, b)| vec![a.to_string(), b.to_string()])
            .collect()
    };
    let all = "SELECT id, v FROM w ORDER BY id";
    assert_eq!(
        q(&mut conn, all),
        rows(&[("1", "NULL"), ("2", "1"), ("3", "3")])
    );
    q(&mut conn, "DELETE FROM w WHERE v < (SELECT MAX(v) FROM w)");
    q(
        &mut conn,
        "INSERT INTO w VALUES (4, (SELECT MAX(x.id) FROM w AS x))",
    );
    q(
        &mut conn,
        "INSERT INTO w VALUES (4, 0) ON DUPLICATE KEY UPDATE v = (SELECT COUNT(*) FROM w)",
    );
    assert_eq!(
        q(&mut conn, all),
        rows(&[("1", "NULL"), ("3", "3"), ("4", "3")])
    );
    let refused = try_q(
        &mut conn,
        "INSERT INTO w VALUES (5, 0), (6, (SELECT COUNT(*) FROM w))",
    )
    .expect_err("several rows reading the table written");
    assert_eq!(refused.code, 1105, "{}", refused.message);
    assert!(
        refused.message.contains("several rows"),
        "{}",
        refused.message
    );
    assert_eq!(
        q(&mut conn, "SELECT COUNT(*) FROM w"),
        vec![vec!["3".to_owned()]]
    );
}
