//! The SQL engine against a real cluster: a `skarv sandbox` of one data
//! node (the `skarv` binary built next to this test: `cargo build -p skarv`
//! first, or set `SKARV_BIN`). Native tables named `db/def/t` are created
//! with the native API and SQL runs over them through `engine::Conn` with a
//! sink that collects what the protocol would send.

use std::io;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use skarv_client::schema_types::{Collation, Column, ColumnType, IndexDef, IndexKind, TableDef};
use skarv_client::{Cluster, ClusterOptions, Session};
use sql::backend::{Backend, OkInfo, ResultSink};
use sql::engine::{Conn, Engine};
use sql::error::SqlError;
use sql::value::{ColumnMeta, ColumnType as MyType, SqlValue};

mod common;
use common::*;

/// What one statement answered.
#[derive(Debug, Default)]
struct Answer {
    columns: Vec<ColumnMeta>,
    rows: Vec<Vec<SqlValue>>,
    ok: Option<OkInfo>,
    error: Option<SqlError>,
}

#[derive(Default)]
struct Sink {
    answers: Vec<Answer>,
}

impl Sink {
    fn current(&mut self) -> &mut Answer {
        if self.answers.is_empty() {
            self.answers.push(Answer::default());
        }
        self.answers.last_mut().expect("one answer")
    }
}

impl ResultSink for Sink {
    fn columns(&mut self, columns: &[ColumnMeta]) -> io::Result<()> {
        self.answers.push(Answer {
            columns: columns.to_vec(),
            ..Answer::default()
        });
        Ok(())
    }
    fn row(&mut self, values: &[SqlValue]) -> io::Result<()> {
        self.current().rows.push(values.to_vec());
        Ok(())
    }
    fn end_rows(&mut self, info: &OkInfo) -> io::Result<()> {
        self.current().ok = Some(info.clone());
        Ok(())
    }
    fn ok(&mut self, info: &OkInfo) -> io::Result<()> {
        self.answers.push(Answer {
            ok: Some(info.clone()),
            ..Answer::default()
        });
        Ok(())
    }
    fn error(&mut self, error: &SqlError) -> io::Result<()> {
        self.answers.push(Answer {
            error: Some(error.clone()),
            ..Answer::default()
        });
        Ok(())
    }
}

fn run(conn: &mut Conn<'_>, sql: &str) -> Answer {
    let mut sink = Sink::default();
    conn.query(sql, false, &mut sink).expect("sink never fails");
    assert_eq!(sink.answers.len(), 1, "one answer to {sql}");
    sink.answers.pop().expect("an answer")
}

/// Rows as text, as the text protocol would show them.
fn text(a: &Answer) -> Vec<Vec<String>> {
    if let Some(e) = &a.error {
        panic!("unexpected error {e}");
    }
    a.rows
        .iter()
        .map(|r| {
            r.iter()
                .map(|v| match v {
                    SqlValue::Null => "NULL".to_owned(),
                    SqlValue::Int(i) => i.to_string(),
                    SqlValue::UInt(u) => u.to_string(),
                    SqlValue::Float(f) => f.to_string(),
                    SqlValue::Double(f) => f.to_string(),
                    SqlValue::Decimal(d) => d.clone(),
                    SqlValue::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
                    SqlValue::Date(d) => format!("{:04}-{:02}-{:02}", d.year, d.month, d.day),
                    SqlValue::DateTime(d, t) => format!(
                        "{:04}-{:02}-{:02} {:02}:{:02}:{:02}",
                        d.year, d.month, d.day, t.hour, t.minute, t.second
                    ),
                    other => format!("{other:?}"),
                })
                .collect()
        })
        .collect()
}

fn q(conn: &mut Conn<'_>, sql: &str) -> Vec<Vec<String>> {
    text(&run(conn, sql))
}

fn ok(conn: &mut Conn<'_>, sql: &str) -> OkInfo {
    let a = run(conn, sql);
    if let Some(e) = a.error {
        panic!("{sql}: {e}");
    }
    a.ok.expect("an OK")
}

fn err(conn: &mut Conn<'_>, sql: &str) -> SqlError {
    run(conn, sql)
        .error
        .unwrap_or_else(|| panic!("{sql} should fail"))
}

fn rows(spec: &[&[&str]]) -> Vec<Vec<String>> {
    spec.iter()
        .map(|r| r.iter().map(|s| (*s).to_owned()).collect())
        .collect()
}

/// `db/def/t`: id INT primary key, k INT (ordered index `k`), c VARCHAR(20)
/// (unique index `c`), n DECIMAL(10,2) NULL. Plus an ordered index on id.
fn create_t(session: &Session) {
    let def = TableDef::new(
        "db/def/t",
        0,
        vec![
            Column::new("id", ColumnType::Int { unsigned: false }),
            Column::new("k", ColumnType::Int { unsigned: false }),
            Column::new(
                "c",
                ColumnType::VarChar {
                    max: 20,
                    collation: Collation::Utf8mb4GeneralCi,
                },
            ),
            Column::new(
                "n",
                ColumnType::Decimal {
                    precision: 10,
                    scale: 2,
                },
            )
            .nullable(),
        ],
    )
    .primary_key(vec![0])
    .index(IndexDef {
        name: "PRIMARY".into(),
        id: 1,
        columns: vec![0],
        kind: IndexKind::Ordered,
    })
    .index(IndexDef {
        name: "k".into(),
        id: 2,
        columns: vec![1],
        kind: IndexKind::Ordered,
    })
    .index(IndexDef {
        name: "c".into(),
        id: 3,
        columns: vec![2],
        kind: IndexKind::Unique,
    })
    .partitions(0);
    session.create_table(&def).expect("create db/def/t");
}

#[test]
fn sql_over_a_sandbox() {
    let sandbox = Sandbox::start("sql-engine", 1, 1, 28000);
    let options = ClusterOptions {
        request_timeout: Duration::from_secs(10),
        ..ClusterOptions::default()
    };
    let cluster = Cluster::connect_with(&sandbox.connect, options).expect("connects");
    let engine = Engine::start(cluster).expect("engine");
    let session = engine.cluster.session().expect("session");
    create_t(&session);
    let mut conn = engine.open(&session, IpAddr::V4(Ipv4Addr::LOCALHOST));
    conn.use_database("db").expect("use db");

    plans(&mut conn);
    without_tables(&mut conn);
    inserts_and_key_reads(&mut conn);
    scans_filters_and_ranges(&mut conn);
    aggregates_and_order(&mut conn);
    updates_and_deletes(&mut conn);
    transactions(&engine, &session, &mut conn);
    prepared_statements(&mut conn);
    sysbench_statements(&mut conn);
    plans_agree_with_a_full_scan(&mut conn);
}

/// Whatever access path and pushed filter a WHERE gets, its rows are the
/// rows for which the condition, evaluated in the SQL node over a full
/// scan, is true.
fn plans_agree_with_a_full_scan(conn: &mut Conn<'_>) {
    ok(
        conn,
        "INSERT INTO t VALUES (50, -5, 'Alpha', 0.5), (51, 0, 'alpha x', NULL), \
         (52, 7, 'beta', -2.25), (53, 7, 'BETA%x', 100), (54, 2147483647, '', 7)",
    );
    // A small deterministic generator (xorshift): the same conditions on
    // every run.
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    };
    let columns = ["id", "k", "c", "n"];
    let constants = [
        "0",
        "1",
        "2",
        "7",
        "50",
        "52",
        "-5",
        "2.5",
        "'7'",
        "'beta'",
        "'ALPHA'",
        "'alpha'",
        "NULL",
        "100.00",
        "'2'",
        "2147483647",
    ];
    let ops = ["=", "<>", "<", "<=", ">", ">=", "<=>"];
    fn atom(next: &mut dyn FnMut(usize) -> usize, c: &[&str], k: &[&str], o: &[&str]) -> String {
        let col = c[next(c.len())];
        match next(6) {
            0 => format!("{col} IS NULL"),
            1 => format!("{col} IN ({}, {})", k[next(k.len())], k[next(k.len())]),
            2 => format!(
                "{col} BETWEEN {} AND {}",
                k[next(k.len())],
                k[next(k.len())]
            ),
            3 => format!("{col} LIKE '{}%'", ["a", "B", "", "al", "beta\\%"][next(5)]),
            _ => format!("{col} {} {}", o[next(o.len())], k[next(k.len())]),
        }
    }
    for _ in 0..1_000 {
        let mut cond = atom(&mut next, &columns, &constants, &ops);
        for _ in 0..next(3) {
            let joiner = ["AND", "OR", "AND NOT"][next(3)];
            let more = atom(&mut next, &columns, &constants, &ops);
            cond = format!("{cond} {joiner} {more}");
        }
        let planned = q(conn, &format!("SELECT id FROM t WHERE {cond} ORDER BY id"));
        let scanned: Vec<Vec<String>> = q(conn, &format!("SELECT id, ({cond}) FROM t ORDER BY id"))
            .into_iter()
            .filter(|r| r[1] == "1")
            .map(|r| vec![r[0].clone()])
            .collect();
        assert_eq!(planned, scanned, "WHERE {cond}");
        // UPDATE and DELETE find the same rows (the DELETE rolled back).
        if next(10) == 0 {
            let info = ok(conn, &format!("UPDATE t SET n = n WHERE {cond}"));
            let matched = format!("Rows matched: {}  Changed: 0  ", scanned.len());
            assert!(
                info.info.starts_with(&matched),
                "UPDATE … WHERE {cond}: {}",
                info.info
            );
            ok(conn, "BEGIN");
            let info = ok(conn, &format!("DELETE FROM t WHERE {cond}"));
            assert_eq!(
                info.affected_rows,
                scanned.len() as u64,
                "DELETE … WHERE {cond}"
            );
            ok(conn, "ROLLBACK");
        }
    }
    ok(conn, "DELETE FROM t WHERE id BETWEEN 50 AND 54");
}

/// The statements of sysbench's oltp_read_write, prepared, in a
/// transaction.
fn sysbench_statements(conn: &mut Conn<'_>) {
    let texts = [
        "SELECT c FROM t WHERE id=?",
        "SELECT c FROM t WHERE id BETWEEN ? AND ?",
        "SELECT SUM(k) FROM t WHERE id BETWEEN ? AND ?",
        "SELECT c FROM t WHERE id BETWEEN ? AND ? ORDER BY c",
        "SELECT DISTINCT c FROM t WHERE id BETWEEN ? AND ? ORDER BY c",
        "UPDATE t SET k=k+1 WHERE id=?",
        "UPDATE t SET c=? WHERE id=?",
        "DELETE FROM t WHERE id=?",
        "INSERT INTO t (id, k, c, n) VALUES (?, ?, ?, ?)",
    ];
    let ids: Vec<u32> = texts
        .iter()
        .map(|t| conn.prepare(t).unwrap_or_else(|e| panic!("{t}: {e}")).id)
        .collect();
    let begin = conn.prepare("BEGIN").expect("BEGIN").id;
    let commit = conn.prepare("COMMIT").expect("COMMIT").id;
    let int = |i: i64| SqlValue::Int(i);
    let s = |t: &str| SqlValue::Bytes(t.as_bytes().to_vec());
    let mut sink = Sink::default();
    let mut exec = |conn: &mut Conn<'_>, id: u32, params: &[SqlValue]| {
        conn.execute(id, params, &mut sink).expect("sink");
        let a = sink.answers.pop().expect("an answer");
        if let Some(e) = &a.error {
            panic!("statement {id}: {e}");
        }
        text(&a)
    };
    exec(conn, begin, &[]);
    assert_eq!(exec(conn, ids[0], &[int(2)]), rows(&[&["two"]]));
    assert_eq!(exec(conn, ids[1], &[int(1), int(3)]).len(), 3);
    assert_eq!(exec(conn, ids[2], &[int(1), int(2)]), rows(&[&["31"]]));
    assert_eq!(
        exec(conn, ids[3], &[int(1), int(3)]),
        rows(&[&["one"], &["three"], &["two"]])
    );
    assert_eq!(exec(conn, ids[4], &[int(1), int(3)]).len(), 3);
    exec(conn, ids[5], &[int(2)]);
    exec(conn, ids[6], &[s("deux"), int(2)]);
    exec(conn, ids[7], &[int(10)]);
    exec(conn, ids[8], &[int(10), int(1), s("again"), SqlValue::Null]);
    exec(conn, commit, &[]);
    assert_eq!(
        q(conn, "SELECT k, c FROM t WHERE id IN (2, 10) ORDER BY id"),
        rows(&[&["21", "deux"], &["1", "again"]])
    );
}

/// The access path each WHERE gets, and the filter pushed with it.
fn plans(conn: &mut Conn<'_>) {
    use skarv_client::Filter;
    use sql::engine::exec::{table_scope, with_scope};
    use sql::engine::expr::{Ctx, Env};
    use sql::engine::plan::{access, Access};
    let table = sql::engine::catalog::table(conn, None, "t").expect("t");
    let plan = |conn: &mut Conn<'_>, cond: &str| {
        let sql = format!("SELECT 1 FROM t WHERE {cond}");
        let parsed = sql::engine::parse(&sql).expect("parses");
        let sqlparser::ast::Statement::Query(q) = &parsed[0] else {
            panic!("a query")
        };
        let sqlparser::ast::SetExpr::Select(s) = &*q.body else {
            panic!("a select")
        };
        let where_ = s.selection.clone().expect("where");
        let lowered = with_scope(conn, table_scope(&table, "t"), &[], |scope| {
            scope.lower(&where_)
        })
        .expect("lowers");
        let env = Env::default();
        let mut ctx = Ctx::new(&[], &env);
        access(&table, Some(&lowered), &mut ctx).expect("plans")
    };
    let key = |v: i64| vec![skarv_client::Value::Int(v)];
    assert_eq!(plan(conn, "id = 1").0, Access::Keys(vec![key(1)]));
    assert_eq!(plan(conn, "1 = id AND k > 3").0, Access::Keys(vec![key(1)]));
    assert_eq!(
        plan(conn, "id IN (1, 2, 2)").0,
        Access::Keys(vec![key(1), key(2)])
    );
    assert!(matches!(
        plan(conn, "c = 'x'").0,
        Access::Unique { ref index, .. } if index == "c"
    ));
    assert!(matches!(
        plan(conn, "k BETWEEN 1 AND 5").0,
        Access::Range { ref index, lower: Some(_), upper: Some(_), .. } if index == "k"
    ));
    assert!(matches!(
        plan(conn, "id >= 2").0,
        Access::Range { ref index, lower: Some(_), upper: None, .. } if index == "PRIMARY"
    ));
    // Not exact in the column's type: no key read, and nothing pushed.
    assert_eq!(plan(conn, "id = 1.5"), (Access::Scan, None));
    assert_eq!(plan(conn, "c = 5"), (Access::Scan, None));
    let (a, f) = plan(conn, "n IS NULL AND c LIKE 'ab%'");
    assert_eq!(a, Access::Scan);
    assert_eq!(
        f,
        Some(Filter::And(vec![
            Filter::IsNull(3),
            Filter::LikePrefix {
                column: 2,
                prefix: "ab".into()
            }
        ]))
    );
    assert_eq!(plan(conn, "1 = 0").0, Access::Nothing);
}

fn without_tables(conn: &mut Conn<'_>) {
    let a = run(conn, "SELECT 1");
    assert_eq!(text(&a), rows(&[&["1"]]));
    assert_eq!(a.columns[0].ty, MyType::LongLong);
    assert_eq!(a.columns[0].name, "1");
    assert_eq!(
        q(conn, "SELECT @@version_comment LIMIT 1"),
        rows(&[&["Skarv"]])
    );
    assert_eq!(q(conn, "SELECT DATABASE()"), rows(&[&["db"]]));
    let a = run(conn, "SELECT 1.5, 'a', 7 DIV 2, 7 / 2, 1 + 1.25, NULL");
    assert_eq!(
        text(&a),
        rows(&[&["1.5", "a", "3", "3.5000", "2.25", "NULL"]])
    );
    assert_eq!(a.columns[0].ty, MyType::NewDecimal);
    assert_eq!(a.columns[0].decimals, 1);
    assert_eq!(a.columns[1].ty, MyType::VarString);
    let now = q(conn, "SELECT NOW()");
    assert_eq!(now[0][0].len(), 19);
}

fn inserts_and_key_reads(conn: &mut Conn<'_>) {
    let info = ok(
        conn,
        "INSERT INTO t (id, k, c, n) VALUES (1, 10, 'one', 1.5), (2, 20, 'two', NULL), \
         (3, 30, 'three', 3)",
    );
    assert_eq!(info.affected_rows, 3);
    ok(conn, "INSERT INTO t SET id = 4, k = 40, c = 'four'");
    assert_eq!(
        q(conn, "SELECT id, k, c, n FROM t WHERE id = 1"),
        rows(&[&["1", "10", "one", "1.50"]])
    );
    assert_eq!(
        q(conn, "SELECT c FROM t WHERE id IN (3, 1, 99) ORDER BY id"),
        rows(&[&["one"], &["three"]])
    );
    assert_eq!(q(conn, "SELECT id FROM t WHERE c = 'TWO'"), rows(&[&["2"]]));
    assert!(q(conn, "SELECT id FROM t WHERE id = 99").is_empty());
    // Duplicates and strict mode.
    let e = err(conn, "INSERT INTO t VALUES (1, 11, 'x', NULL)");
    assert_eq!(e.code, 1062, "{e}");
    assert_eq!(e.message, "Duplicate entry '1' for key 'PRIMARY'");
    let e = err(conn, "INSERT INTO t VALUES (5, 50, 'one', NULL)");
    assert_eq!(e.code, 1062, "{e}");
    assert_eq!(e.message, "Duplicate entry 'one' for key 'c'");
    let e = err(
        conn,
        "INSERT INTO t VALUES (5, 50, 'a string longer than twenty', NULL)",
    );
    assert_eq!(e.code, 1406, "{e}");
    let e = err(conn, "INSERT INTO t VALUES (5, 99999999999, 'x', NULL)");
    assert_eq!(e.code, 1264, "{e}");
    let e = err(conn, "INSERT INTO t VALUES (5, NULL, 'x', NULL)");
    assert_eq!(e.code, 1048, "{e}");
    let e = err(conn, "INSERT INTO t (id, c) VALUES (5, 'x')");
    assert_eq!(e.code, 1364, "{e}");
    let e = err(conn, "INSERT INTO t VALUES (5, 'abc', 'x', NULL)");
    assert_eq!(e.code, 1366, "{e}");
    // A failed autocommit statement leaves nothing.
    let e = err(
        conn,
        "INSERT INTO t VALUES (6, 60, 's', NULL), (1, 1, 'dup', NULL)",
    );
    assert_eq!(e.code, 1062);
    assert!(q(conn, "SELECT id FROM t WHERE id = 6").is_empty());
    // INSERT IGNORE: the duplicate is a warning.
    let info = ok(
        conn,
        "INSERT IGNORE INTO t VALUES (6, 60, 'six', NULL), (1, 1, 'dup', NULL)",
    );
    assert_eq!(info.affected_rows, 1);
    assert_eq!(info.info, "Records: 2  Duplicates: 1  Warnings: 1");
    ok(conn, "DELETE FROM t WHERE id = 6");
    let info = ok(
        conn,
        "INSERT IGNORE INTO t VALUES (6, 60, 'six', NULL), (7, 1, 'one', NULL)",
    );
    assert_eq!(
        info.affected_rows, 1,
        "the unique index conflict is skipped"
    );
    assert_eq!(conn.tx.warnings[0].1, "Duplicate entry 'one' for key 'c'");
    ok(conn, "DELETE FROM t WHERE id = 6");
    // REPLACE counts the row it replaced.
    let info = ok(conn, "REPLACE INTO t VALUES (4, 41, 'four', NULL)");
    assert_eq!(info.affected_rows, 2);
    assert_eq!(q(conn, "SELECT k FROM t WHERE id = 4"), rows(&[&["41"]]));
    // ON DUPLICATE KEY UPDATE.
    let info = ok(
        conn,
        "INSERT INTO t VALUES (4, 42, 'four', NULL) ON DUPLICATE KEY UPDATE k = VALUES(k) + 1",
    );
    assert_eq!(info.affected_rows, 2);
    assert_eq!(q(conn, "SELECT k FROM t WHERE id = 4"), rows(&[&["43"]]));
    // A conflict on the unique index `c` updates the row holding 'four'.
    let info = ok(
        conn,
        "INSERT INTO t VALUES (44, 1, 'four', NULL) ON DUPLICATE KEY UPDATE k = k + 1",
    );
    assert_eq!(info.affected_rows, 2);
    assert_eq!(
        q(conn, "SELECT id, k FROM t WHERE c = 'four'"),
        rows(&[&["4", "44"]])
    );
    ok(conn, "UPDATE t SET k = 43 WHERE id = 4");
}

fn scans_filters_and_ranges(conn: &mut Conn<'_>) {
    assert_eq!(
        q(
            conn,
            "SELECT id FROM t WHERE k > 15 AND c LIKE 't%' ORDER BY id"
        ),
        rows(&[&["2"], &["3"]])
    );
    assert_eq!(
        q(conn, "SELECT id FROM t WHERE id BETWEEN 2 AND 3"),
        rows(&[&["2"], &["3"]])
    );
    assert_eq!(
        q(
            conn,
            "SELECT id FROM t WHERE id >= 2 ORDER BY id DESC LIMIT 2"
        ),
        rows(&[&["4"], &["3"]])
    );
    assert_eq!(
        q(conn, "SELECT id FROM t WHERE n IS NULL ORDER BY id"),
        rows(&[&["2"], &["4"]])
    );
    assert_eq!(
        q(conn, "SELECT id, k * 2 AS kk FROM t WHERE k + 0 = 20"),
        rows(&[&["2", "40"]])
    );
    assert_eq!(
        q(conn, "SELECT * FROM t ORDER BY id LIMIT 1 OFFSET 1"),
        rows(&[&["2", "20", "two", "NULL"]])
    );
    assert_eq!(
        q(
            conn,
            "SELECT id FROM t WHERE c = 'one' OR c = 'two' ORDER BY 1"
        ),
        rows(&[&["1"], &["2"]])
    );
    let e = err(conn, "SELECT nope FROM t");
    assert_eq!(e.code, 1054);
    let e = err(conn, "SELECT 1 FROM missing");
    assert_eq!(e.code, 1146);
}

fn aggregates_and_order(conn: &mut Conn<'_>) {
    assert_eq!(
        q(
            conn,
            "SELECT COUNT(*), SUM(k), MIN(c), MAX(id), AVG(k) FROM t"
        ),
        rows(&[&["4", "103", "four", "4", "25.7500"]])
    );
    assert_eq!(
        q(conn, "SELECT COUNT(n), SUM(n) FROM t WHERE id < 10"),
        rows(&[&["2", "4.50"]])
    );
    assert_eq!(
        q(conn, "SELECT COUNT(*) FROM t WHERE id > 100"),
        rows(&[&["0"]])
    );
    assert_eq!(
        q(
            conn,
            "SELECT n IS NULL AS nul, COUNT(*) FROM t GROUP BY nul HAVING COUNT(*) > 1 ORDER BY nul"
        ),
        rows(&[&["0", "2"], &["1", "2"]])
    );
    assert_eq!(
        q(conn, "SELECT DISTINCT n IS NULL FROM t ORDER BY 1"),
        rows(&[&["0"], &["1"]])
    );
    assert_eq!(
        q(conn, "SELECT c FROM t ORDER BY c DESC LIMIT 2"),
        rows(&[&["two"], &["three"]])
    );
    assert_eq!(
        q(conn, "SELECT 1 UNION SELECT 1 UNION ALL SELECT 2"),
        rows(&[&["1"], &["2"]])
    );
    assert_eq!(
        q(
            conn,
            "SELECT COUNT(DISTINCT n IS NULL), COUNT(DISTINCT id) FROM t"
        ),
        rows(&[&["2", "4"]])
    );
    assert_eq!(
        q(
            conn,
            "SELECT id FROM t WHERE id < 3 UNION SELECT k FROM t WHERE id = 1 ORDER BY 1 DESC LIMIT 2"
        ),
        rows(&[&["10"], &["2"]])
    );
    assert_eq!(
        q(
            conn,
            "SELECT k > 20 AS big, COUNT(*) FROM t GROUP BY big ORDER BY COUNT(*) DESC, big"
        ),
        rows(&[&["0", "2"], &["1", "2"]])
    );
    // A column keeps its metadata under an alias.
    let a = run(conn, "SELECT id AS x, k + 1 AS y FROM t WHERE id = 1");
    assert_eq!(a.columns[0].name, "x");
    assert_eq!(a.columns[0].org_name, "id");
    assert_eq!(a.columns[0].table, "t");
    assert_eq!(a.columns[0].ty, MyType::Long);
    assert_eq!(a.columns[1].ty, MyType::LongLong);
    assert_eq!(a.columns[1].table, "");
    // Unaliased items are named by their text as written.
    let a = run(
        conn,
        "SELECT k+1, COUNT( * ), id FROM t GROUP BY k ORDER BY k LIMIT 1",
    );
    let names: Vec<&str> = a.columns.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["k+1", "COUNT( * )", "id"]);
    let e = err(conn, "SELECT k FROM t GROUP BY COUNT(*)");
    assert_eq!(e.code, 1111);
}

fn updates_and_deletes(conn: &mut Conn<'_>) {
    let info = ok(conn, "UPDATE t SET k = k + 1 WHERE id = 1");
    assert_eq!(info.affected_rows, 1);
    assert_eq!(info.info, "Rows matched: 1  Changed: 1  Warnings: 0");
    let info = ok(conn, "UPDATE t SET k = 11 WHERE id = 1");
    assert_eq!(info.affected_rows, 0, "an unchanged row is not affected");
    assert_eq!(info.info, "Rows matched: 1  Changed: 0  Warnings: 0");
    let info = ok(conn, "UPDATE t SET n = 9.99 WHERE k >= 20");
    assert_eq!(info.affected_rows, 3);
    assert_eq!(q(conn, "SELECT SUM(n) FROM t"), rows(&[&["31.47"]]));
    let info = ok(conn, "UPDATE t SET k = k + 100 ORDER BY id DESC LIMIT 1");
    assert_eq!(info.affected_rows, 1);
    assert_eq!(q(conn, "SELECT k FROM t WHERE id = 4"), rows(&[&["143"]]));
    // A new primary key moves the row.
    ok(conn, "INSERT INTO t VALUES (30, 300, 'thirty', NULL)");
    let info = ok(conn, "UPDATE t SET id = 31 WHERE id = 30");
    assert_eq!(info.affected_rows, 1);
    assert_eq!(
        q(conn, "SELECT id, k, c FROM t WHERE id IN (30, 31)"),
        rows(&[&["31", "300", "thirty"]])
    );
    assert_eq!(err(conn, "UPDATE t SET id = 1 WHERE id = 31").code, 1062);
    ok(conn, "DELETE FROM t WHERE id = 31");
    let e = err(conn, "UPDATE t SET k = 'nope' WHERE id = 1");
    assert_eq!(e.code, 1366);
    ok(
        conn,
        "INSERT INTO t VALUES (7, 70, 'seven', NULL), (8, 80, 'eight', NULL)",
    );
    let info = ok(conn, "DELETE FROM t WHERE id IN (7, 8)");
    assert_eq!(info.affected_rows, 2);
    ok(
        conn,
        "INSERT INTO t VALUES (7, 70, 'seven', NULL), (8, 80, 'eight', NULL)",
    );
    let info = ok(conn, "DELETE FROM t WHERE k >= 70 AND k < 100");
    assert_eq!(info.affected_rows, 2);
    assert_eq!(q(conn, "SELECT COUNT(*) FROM t"), rows(&[&["4"]]));
}

fn transactions(engine: &std::sync::Arc<Engine>, session: &Session, conn: &mut Conn<'_>) {
    let other_session = engine.cluster.session().expect("session");
    let mut other = engine.open(&other_session, IpAddr::V4(Ipv4Addr::LOCALHOST));
    other.use_database("db").expect("use");
    ok(conn, "BEGIN");
    ok(conn, "INSERT INTO t VALUES (9, 90, 'nine', NULL)");
    assert_eq!(q(conn, "SELECT c FROM t WHERE id = 9"), rows(&[&["nine"]]));
    assert!(
        q(&mut other, "SELECT c FROM t WHERE id = 9").is_empty(),
        "not visible before COMMIT"
    );
    ok(conn, "ROLLBACK");
    assert!(q(conn, "SELECT c FROM t WHERE id = 9").is_empty());
    ok(conn, "START TRANSACTION");
    ok(conn, "INSERT INTO t VALUES (9, 90, 'nine', NULL)");
    ok(conn, "UPDATE t SET k = 91 WHERE id = 9");
    ok(conn, "COMMIT");
    assert_eq!(
        q(&mut other, "SELECT k FROM t WHERE id = 9"),
        rows(&[&["91"]])
    );
    // autocommit off: statements wait for COMMIT.
    sql::engine::txn::set_autocommit(conn, false).expect("autocommit off");
    ok(conn, "DELETE FROM t WHERE id = 9");
    assert_eq!(
        q(&mut other, "SELECT k FROM t WHERE id = 9"),
        rows(&[&["91"]])
    );
    sql::engine::txn::set_autocommit(conn, true).expect("autocommit on commits");
    assert!(q(&mut other, "SELECT k FROM t WHERE id = 9").is_empty());
    // A failed INSERT in a transaction takes back its rows; the
    // transaction goes on.
    ok(conn, "BEGIN");
    ok(conn, "INSERT INTO t VALUES (20, 200, 'twenty', NULL)");
    let e = err(
        conn,
        "INSERT INTO t VALUES (21, 210, 'twenty-one', NULL), (1, 1, 'dup', NULL)",
    );
    assert_eq!(e.code, 1062);
    ok(conn, "COMMIT");
    assert_eq!(
        q(&mut other, "SELECT id FROM t WHERE id IN (20, 21)"),
        rows(&[&["20"]])
    );
    ok(conn, "DELETE FROM t WHERE id = 20");
    // INSERT … SELECT.
    let info = ok(
        conn,
        "INSERT INTO t (id, k, c) SELECT id + 100, k, CONCAT(c, '!') FROM t WHERE id <= 2",
    );
    assert_eq!(info.affected_rows, 2);
    assert_eq!(
        q(conn, "SELECT c FROM t WHERE id > 100 ORDER BY id"),
        rows(&[&["one!"], &["two!"]])
    );
    ok(conn, "DELETE FROM t WHERE id > 100");
    // A lock held by one transaction: the other waits, then gets 1205 and
    // its transaction is rolled back.
    ok(conn, "BEGIN");
    ok(conn, "UPDATE t SET k = k + 1 WHERE id = 1");
    ok(&mut other, "BEGIN");
    ok(&mut other, "INSERT INTO t VALUES (22, 220, 'x', NULL)");
    let e = err(&mut other, "UPDATE t SET k = 5 WHERE id = 1");
    assert_eq!(e.code, 1205, "{e}");
    assert_eq!(
        e.message,
        "Lock wait timeout exceeded; try restarting transaction"
    );
    assert!(!other.tx.explicit, "the transaction ended");
    ok(conn, "ROLLBACK");
    assert!(
        q(&mut other, "SELECT id FROM t WHERE id = 22").is_empty(),
        "rolled back with it"
    );
    // A read-only transaction refuses writes.
    ok(conn, "START TRANSACTION READ ONLY");
    assert_eq!(err(conn, "DELETE FROM t WHERE id = 1").code, 1792);
    ok(conn, "ROLLBACK");
    let _ = session;
}

fn prepared_statements(conn: &mut Conn<'_>) {
    let p = conn
        .prepare("SELECT c, k FROM t WHERE id = ?")
        .expect("prepare");
    assert_eq!(p.params.len(), 1);
    assert_eq!(p.columns.len(), 2);
    assert_eq!(p.columns[0].name, "c");
    let mut sink = Sink::default();
    conn.execute(p.id, &[SqlValue::Int(2)], &mut sink)
        .expect("execute");
    assert_eq!(text(&sink.answers[0]), rows(&[&["two", "20"]]));
    let ins = conn
        .prepare("INSERT INTO t (id, k, c, n) VALUES (?, ?, ?, ?)")
        .expect("prepare insert");
    let mut sink = Sink::default();
    conn.execute(
        ins.id,
        &[
            SqlValue::Int(10),
            SqlValue::Int(100),
            SqlValue::Bytes(b"ten".to_vec()),
            SqlValue::Null,
        ],
        &mut sink,
    )
    .expect("execute");
    assert_eq!(
        sink.answers[0].ok.as_ref().map(|o| o.affected_rows),
        Some(1)
    );
    let begin = conn.prepare("BEGIN").expect("prepare BEGIN");
    let commit = conn.prepare("COMMIT").expect("prepare COMMIT");
    let mut sink = Sink::default();
    conn.execute(begin.id, &[], &mut sink).expect("begin");
    conn.execute(p.id, &[SqlValue::Int(10)], &mut sink)
        .expect("read");
    conn.execute(commit.id, &[], &mut sink).expect("commit");
    assert!(
        sink.answers.iter().all(|a| a.error.is_none()),
        "{:?}",
        sink.answers
    );
    assert_eq!(text(&sink.answers[1]), rows(&[&["ten", "100"]]));
    let range = conn
        .prepare("SELECT SUM(k) FROM t WHERE id BETWEEN ? AND ?")
        .expect("prepare range");
    let mut sink = Sink::default();
    conn.execute(range.id, &[SqlValue::Int(1), SqlValue::Int(2)], &mut sink)
        .expect("range");
    assert_eq!(text(&sink.answers[0]), rows(&[&["31"]]));
    let limited = conn
        .prepare("SELECT id FROM t ORDER BY id LIMIT ?")
        .expect("prepare LIMIT ?");
    assert_eq!(limited.columns.len(), 1);
    let mut sink = Sink::default();
    conn.execute(limited.id, &[SqlValue::Int(2)], &mut sink)
        .expect("limit");
    assert_eq!(text(&sink.answers[0]), rows(&[&["1"], &["2"]]));
    conn.close(p.id);
    assert!(!conn.has_statement(p.id));
    let mut sink = Sink::default();
    conn.execute(p.id, &[SqlValue::Int(2)], &mut sink)
        .expect("answers");
    assert_eq!(sink.answers[0].error.as_ref().map(|e| e.code), Some(1243));
}
