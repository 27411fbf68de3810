//! Heap allocations the SQL engine makes per statement, on the thread that
//! runs it: the statements sysbench's `oltp_point_select` and
//! `oltp_read_only` send, prepared, over a real sandbox. The engine's hot
//! path is a prepared point select; each allocation there is paid on
//! every one of them (and, freed on another thread later, in cache misses
//! too). The bounds are today's counts with little room: a change that
//! adds allocations to these paths fails here and says how many.

use std::io;
use std::net::{IpAddr, Ipv4Addr};

use sql::backend::{Backend, OkInfo, ResultSink};
use sql::engine::Conn;
use sql::error::SqlError;
use sql::value::{ColumnMeta, SqlValue};

mod common;
use common::*;

#[global_allocator]
static ALLOCATOR: testkit::CountingAllocator = testkit::CountingAllocator;

/// Rows of the table.
const ROWS: i64 = 100;
/// Executions measured per statement.
const RUNS: u64 = 200;

/// Most allocations a prepared point select (`SELECT c FROM t WHERE id
/// = ?`) may make (55 when the statement text, its placeholders and
/// `USER()`'s text stopped being copied per execute; 64 before).
const POINT_SELECT_ALLOCATIONS_MAX: u64 = 58;
/// Most allocations a prepared range select of ten rows may make (155).
const RANGE_SELECT_ALLOCATIONS_MAX: u64 = 162;
/// Most allocations a prepared point select may make on the thread pool's
/// batched path (its read deferred, sent, then answered), where its plan
/// and key shape are kept (21; 25 with the key worked out by the general
/// planner).
const DEFERRED_POINT_SELECT_ALLOCATIONS_MAX: u64 = 23;

/// Counts rows and keeps nothing, so that the sink allocates nothing.
#[derive(Default)]
struct Sink {
    rows: u64,
    error: Option<String>,
}

impl ResultSink for Sink {
    fn columns(&mut self, _columns: &[ColumnMeta]) -> io::Result<()> {
        Ok(())
    }
    fn row(&mut self, _values: &[SqlValue]) -> io::Result<()> {
        self.rows += 1;
        Ok(())
    }
    fn end_rows(&mut self, _info: &OkInfo) -> io::Result<()> {
        Ok(())
    }
    fn ok(&mut self, _info: &OkInfo) -> io::Result<()> {
        Ok(())
    }
    fn error(&mut self, error: &SqlError) -> io::Result<()> {
        self.error = Some(error.to_string());
        Ok(())
    }
}

fn q(conn: &mut Conn<'_>, sql: &str) {
    let mut sink = Sink::default();
    conn.query(sql, false, &mut sink).expect("sink never fails");
    assert!(sink.error.is_none(), "{sql}: {:?}", sink.error);
}

/// Allocations per execution of `sql` (prepared) with `params(run)`, and
/// the rows each returned.
fn allocations(
    conn: &mut Conn<'_>,
    sql: &str,
    params: impl Fn(u64) -> Vec<SqlValue>,
) -> (u64, u64) {
    let id = conn
        .prepare(sql)
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .id;
    let mut rows = 0;
    // The first executions fill caches (table info, the session's buffers).
    for run in 0..10 {
        let mut sink = Sink::default();
        conn.execute(id, &params(run), &mut sink).expect("sink");
        assert!(sink.error.is_none(), "{sql}: {:?}", sink.error);
    }
    let mut total = 0;
    for run in 0..RUNS {
        let values = params(run);
        let mut sink = Sink::default();
        let before = testkit::allocations();
        conn.execute(id, &values, &mut sink).expect("sink");
        total += testkit::allocations() - before;
        assert!(sink.error.is_none(), "{sql}: {:?}", sink.error);
        rows = sink.rows;
    }
    (total / RUNS, rows)
}

/// Allocations per execution of `sql` (prepared) with `params(run)` as the
/// thread pool runs it: deferred, its read sent by `session`, answered.
fn deferred_allocations(
    conn: &mut Conn<'_>,
    session: &skarv_client::Session,
    sql: &str,
    params: impl Fn(u64) -> Vec<SqlValue>,
) -> u64 {
    let id = conn
        .prepare(sql)
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .id;
    let run_one = |conn: &mut Conn<'_>, run: u64| {
        let values = params(run);
        let mut sink = Sink::default();
        let before = testkit::allocations();
        let deferred = conn
            .execute_deferrable(id, &values, &mut sink)
            .expect("sink");
        assert!(deferred, "{sql}: a key read is deferred");
        skarv_client::send_all(&[session]).expect("sent");
        conn.finish_deferred(&mut sink).expect("sink");
        let made = testkit::allocations() - before;
        assert!(sink.error.is_none(), "{sql}: {:?}", sink.error);
        assert_eq!(sink.rows, 1, "{sql}");
        made
    };
    for run in 0..10 {
        run_one(conn, run);
    }
    (0..RUNS).map(|run| run_one(conn, run)).sum::<u64>() / RUNS
}

#[test]
fn allocations_per_prepared_statement() {
    let sandbox = Sandbox::start("sql-allocs", 1, 1, 43_200);
    let engine = engine_on(&sandbox);
    let session = engine.cluster.session().expect("session");
    let mut conn = engine.open(&session, IpAddr::V4(Ipv4Addr::LOCALHOST));
    log_in_root(&mut conn);
    q(&mut conn, "CREATE DATABASE sb");
    conn.use_database("sb").expect("use sb");
    // sysbench's table.
    q(
        &mut conn,
        "CREATE TABLE sbtest1 (id INT NOT NULL AUTO_INCREMENT, k INT NOT NULL DEFAULT 0, \
         c CHAR(120) NOT NULL DEFAULT '', pad CHAR(60) NOT NULL DEFAULT '', \
         PRIMARY KEY (id), KEY k_1 (k))",
    );
    let values: Vec<String> = (1..=ROWS)
        .map(|i| format!("({i}, {}, 'c-{i}', 'pad-{i}')", i % 10))
        .collect();
    q(
        &mut conn,
        &format!("INSERT INTO sbtest1 VALUES {}", values.join(",")),
    );
    let key = |run: u64| vec![SqlValue::Int(1 + (run as i64 % ROWS))];
    let (point, rows) = allocations(&mut conn, "SELECT c FROM sbtest1 WHERE id=?", key);
    assert_eq!(rows, 1);
    let range = |run: u64| {
        let start = 1 + (run as i64 % (ROWS - 10));
        vec![SqlValue::Int(start), SqlValue::Int(start + 9)]
    };
    let (ranged, rows) = allocations(
        &mut conn,
        "SELECT c FROM sbtest1 WHERE id BETWEEN ? AND ?",
        range,
    );
    assert_eq!(rows, 10);
    let deferred =
        deferred_allocations(&mut conn, &session, "SELECT c FROM sbtest1 WHERE id=?", key);
    eprintln!(
        "allocations per execution: point select {point}, batched {deferred}, range of 10 {ranged}"
    );
    assert!(
        deferred <= DEFERRED_POINT_SELECT_ALLOCATIONS_MAX,
        "a batched prepared point select made {deferred} allocations \
         (most {DEFERRED_POINT_SELECT_ALLOCATIONS_MAX})"
    );
    assert!(
        point <= POINT_SELECT_ALLOCATIONS_MAX,
        "a prepared point select made {point} allocations (most {POINT_SELECT_ALLOCATIONS_MAX})"
    );
    assert!(
        ranged <= RANGE_SELECT_ALLOCATIONS_MAX,
        "a prepared range select of 10 rows made {ranged} allocations \
         (most {RANGE_SELECT_ALLOCATIONS_MAX})"
    );
}
