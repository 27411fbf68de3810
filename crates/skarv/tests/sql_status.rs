//! The SQL node's status counters, partition pruning and slow query log
//! through a real MySQL client: `Ndb_api_*_count_session` moves as the
//! native operations a statement makes (a key read is one round trip, a
//! pruned scan counts `Ndb_pruned_scan_count`), `SHOW GLOBAL STATUS` sums
//! the connections, a scan whose condition fixes the distribution key
//! returns what the unpruned scan returns, and the slow query log is
//! written in the layout `mysqldumpslow` reads.

mod common;

use std::collections::HashMap;
use std::process::Command;

use common::{connect, Sandbox};
use mysql::prelude::Queryable;
use mysql::{Conn, OptsBuilder};

/// A sandbox of 2 data nodes and one SQL node, its ports from `port_range`.
fn start(name: &str, port_range: u16) -> Sandbox {
    Sandbox::start_configured(name, port_range, 2, &["--sql-nodes", "1"])
}

/// `SHOW [GLOBAL] STATUS` as a map.
fn status(conn: &mut Conn, global: bool) -> HashMap<String, u64> {
    let sql = if global {
        "SHOW GLOBAL STATUS"
    } else {
        "SHOW SESSION STATUS"
    };
    let rows: Vec<(String, String)> = conn.query(sql).expect("show status");
    rows.into_iter()
        .filter_map(|(name, value)| value.parse().ok().map(|v| (name, v)))
        .collect()
}

/// How much each counter moved from `before` to `after`.
fn moved(before: &HashMap<String, u64>, after: &HashMap<String, u64>, name: &str) -> u64 {
    let get = |m: &HashMap<String, u64>| {
        *m.get(name)
            .unwrap_or_else(|| panic!("no status variable {name}"))
    };
    get(after) - get(before)
}

/// The session's counters around `sql` (the SHOW before and after count
/// as statements of their own).
fn around(conn: &mut Conn, sql: &str) -> (Vec<Vec<String>>, HashMap<String, u64>) {
    let before = status(conn, false);
    let rows: Vec<mysql::Row> = conn.query(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    let after = status(conn, false);
    let rows = rows
        .into_iter()
        .map(|r| {
            r.unwrap()
                .into_iter()
                .map(|v| v.as_sql(true))
                .collect::<Vec<String>>()
        })
        .collect();
    let delta = after
        .keys()
        .map(|k| (k.clone(), moved(&before, &after, k)))
        .collect();
    (rows, delta)
}

/// One sandbox for both parts (a test's sandbox takes a port range of its
/// own; this file has one).
#[test]
fn status_counters_pruning_and_the_slow_query_log() {
    let sandbox = start("sql-status", 43_500);
    counters_follow_the_native_operations_and_pruned_scans_agree(&sandbox);
    the_slow_query_log_is_mysqls_and_mysqldumpslow_reads_it(&sandbox);
    an_order_by_past_the_sort_buffer_merges_runs_from_disk(&sandbox);
}

/// Rows of the sort test's table.
const SORTED_ROWS: u32 = 6_000;

/// An ORDER BY whose rows pass `sort_buffer_size` is sorted in runs on
/// disk and merged (`Sort_merge_passes` moves; with 6,000 rows of about
/// 200 bytes in the 32 KiB floor of the buffer, more runs than one merge
/// takes, so a pass merges runs into runs first): the rows are the ones a
/// sort here gives, ties in the order the in-memory sort gives them, by
/// byte keys (integers, strings) and by values (a double), with an
/// OFFSET, and through a join; with the default buffer nothing is merged
/// and the answer is the same.
fn an_order_by_past_the_sort_buffer_merges_runs_from_disk(sandbox: &Sandbox) {
    let mut conn = connect(sandbox.sql_port());
    conn.query_drop("CREATE DATABASE fsort")
        .expect("create database");
    conn.query_drop("USE fsort").expect("use");
    conn.query_drop("CREATE TABLE r (id INT PRIMARY KEY, grp INT, s VARCHAR(40), d DOUBLE)")
        .expect("create");
    let row = |id: u32| {
        let grp = id * 7_919 % 97;
        let s = format!("r{:03}", id * 31 % 1_000);
        let d = f64::from(id * 13 % 251) / 4.0;
        (id, grp, s, d)
    };
    let rows: Vec<(u32, u32, String, f64)> = (1..=SORTED_ROWS).map(row).collect();
    for chunk in rows.chunks(500) {
        let values: Vec<String> = chunk
            .iter()
            .map(|(id, grp, s, d)| format!("({id}, {grp}, '{s}', {d})"))
            .collect();
        conn.query_drop(format!("INSERT INTO r VALUES {}", values.join(", ")))
            .expect("insert");
    }
    let text = |rows: Vec<mysql::Row>| -> Vec<Vec<String>> {
        rows.into_iter()
            .map(|r| {
                r.unwrap()
                    .into_iter()
                    .map(|v| v.as_sql(true).trim_matches('\'').to_owned())
                    .collect()
            })
            .collect()
    };
    // The first row where two answers differ, not thousands of rows.
    let same = |got: &[Vec<String>], want: &[Vec<String>], what: &str| {
        let at = got.iter().zip(want).position(|(g, w)| g != w);
        assert!(
            at.is_none() && got.len() == want.len(),
            "{what}: {} rows against {}; first difference at {at:?}: {:?} against {:?}",
            got.len(),
            want.len(),
            at.map(|i| &got[i]),
            at.map(|i| &want[i]),
        );
    };
    let queries = [
        "SELECT id, grp, s FROM r ORDER BY grp DESC, s, id",
        "SELECT id, d FROM r ORDER BY d, id DESC",
        "SELECT id, grp FROM r ORDER BY grp LIMIT 18446744073709551615 OFFSET 10",
        "SELECT a.id, b.s FROM r a JOIN r b ON b.id = a.grp + 1 ORDER BY b.s DESC, a.id",
    ];
    let mut answers = Vec::new();
    for buffer in ["1024", "DEFAULT"] {
        conn.query_drop(format!("SET SESSION sort_buffer_size = {buffer}"))
            .expect("set sort_buffer_size");
        let mut got = Vec::new();
        for sql in queries {
            let before = status(&mut conn, false);
            let rows: Vec<mysql::Row> = conn.query(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
            let after = status(&mut conn, false);
            let passes = moved(&before, &after, "Sort_merge_passes");
            if buffer == "DEFAULT" {
                assert_eq!(passes, 0, "{sql}: fits the default buffer");
            } else {
                assert!(
                    passes > 1,
                    "{sql}: {passes} merge passes in a 32 KiB buffer"
                );
            }
            got.push(text(rows));
        }
        answers.push(got);
    }
    // The same rows whatever the buffer (the third query's ties come in
    // the order the scan gave them, which may differ between runs).
    for q in [0, 1, 3] {
        same(&answers[0][q], &answers[1][q], queries[q]);
    }
    let answers = &answers[0];

    // What a sort here gives.
    let mut want = rows.clone();
    want.sort_by(|a, b| b.1.cmp(&a.1).then(a.2.cmp(&b.2)).then(a.0.cmp(&b.0)));
    let want: Vec<Vec<String>> = want
        .iter()
        .map(|(id, grp, s, _)| vec![id.to_string(), grp.to_string(), s.clone()])
        .collect();
    same(&answers[0], &want, "ORDER BY grp DESC, s, id");
    let mut want = rows.clone();
    want.sort_by(|a, b| a.3.total_cmp(&b.3).then(b.0.cmp(&a.0)));
    let ids: Vec<String> = want.iter().map(|r| r.0.to_string()).collect();
    let got: Vec<String> = answers[1].iter().map(|r| r[0].clone()).collect();
    assert_eq!(got, ids, "ORDER BY d, id DESC");
    // Ties (one grp) in any order, the groups ascending, the first ten
    // rows skipped.
    assert_eq!(answers[2].len(), SORTED_ROWS as usize - 10);
    let grps: Vec<u32> = answers[2]
        .iter()
        .map(|r| r[1].parse().expect("grp"))
        .collect();
    assert!(grps.windows(2).all(|w| w[0] <= w[1]), "ascending groups");
    let mut all: Vec<u32> = rows.iter().map(|r| r.1).collect();
    all.sort_unstable();
    assert_eq!(grps, all[10..], "the groups after the first ten rows");
    let by_id: HashMap<u32, &(u32, u32, String, f64)> = rows.iter().map(|r| (r.0, r)).collect();
    let mut want: Vec<(String, u32)> = rows
        .iter()
        .filter_map(|a| by_id.get(&(a.1 + 1)).map(|b| (b.2.clone(), a.0)))
        .collect();
    want.sort_by(|x, y| y.0.cmp(&x.0).then(x.1.cmp(&y.1)));
    let want: Vec<Vec<String>> = want
        .into_iter()
        .map(|(s, id)| vec![id.to_string(), s])
        .collect();
    same(&answers[3], &want, "the join's ORDER BY b.s DESC, a.id");
}

fn counters_follow_the_native_operations_and_pruned_scans_agree(sandbox: &Sandbox) {
    let port = sandbox.sql_port();
    let mut conn = connect(port);
    conn.query_drop("CREATE DATABASE st")
        .expect("create database");
    conn.query_drop("USE st").expect("use");
    // The distribution key leads the primary key (PRIMARY is an ordered
    // index on it: `u = c` is a range scan), or does not (`u = c` is a
    // full scan).
    conn.query_drop(
        "CREATE TABLE lead (u INT, id INT, v INT, PRIMARY KEY (u, id)) \
         ENGINE=NDB PARTITION BY KEY (u)",
    )
    .expect("create lead");
    conn.query_drop(
        "CREATE TABLE trail (id INT, u INT, v INT, PRIMARY KEY (id, u)) \
         ENGINE=NDB PARTITION BY KEY (u)",
    )
    .expect("create trail");
    for table in ["lead", "trail"] {
        let rows: Vec<String> = (0..120)
            .map(|i| {
                let (u, id) = (i % 12, i);
                match table {
                    "lead" => format!("({u}, {id}, {})", i * 7 % 11),
                    _ => format!("({id}, {u}, {})", i * 7 % 11),
                }
            })
            .collect();
        conn.query_drop(format!("INSERT INTO {table} VALUES {}", rows.join(", ")))
            .expect("insert");
    }

    // A key read: one round trip, one primary-key operation, one row.
    let (rows, d) = around(&mut conn, "SELECT v FROM lead WHERE u = 3 AND id = 3");
    assert_eq!(rows.len(), 1);
    assert_eq!(d["Ndb_api_pk_op_count_session"], 1, "{d:?}");
    assert_eq!(d["Ndb_api_wait_exec_complete_count_session"], 1, "{d:?}");
    assert_eq!(d["Ndb_api_read_row_count_session"], 1, "{d:?}");
    assert_eq!(d["Ndb_api_table_scan_count_session"], 0, "{d:?}");
    assert_eq!(d["Ndb_api_range_scan_count_session"], 0, "{d:?}");
    // The statement and the second SHOW.
    assert_eq!(d["Questions"], 2, "{d:?}");
    assert_eq!(d["Com_select"], 1, "{d:?}");
    assert_eq!(d["Com_show_status"], 1, "{d:?}");
    assert!(d["Ndb_api_bytes_sent_count_session"] > 0, "{d:?}");
    assert!(d["Ndb_api_bytes_received_count_session"] > 0, "{d:?}");

    // Pruned and unpruned scans of both tables give the same rows; only
    // the pruned ones count, once each.
    for table in ["lead", "trail"] {
        for u in [0, 5, 11] {
            let pruned = format!("SELECT u, id, v FROM {table} WHERE u = {u} ORDER BY id");
            let (pruned_rows, d) = around(&mut conn, &pruned);
            assert_eq!(pruned_rows.len(), 10, "{pruned}");
            assert_eq!(d["Ndb_api_pruned_scan_count_session"], 1, "{pruned}: {d:?}");
            assert_eq!(d["Ndb_pruned_scan_count"], 1, "{pruned}: {d:?}");
            let scans =
                d["Ndb_api_table_scan_count_session"] + d["Ndb_api_range_scan_count_session"];
            assert_eq!(scans, 1, "{pruned}: {d:?}");
            // One partition: every row read is one of the answer's.
            assert_eq!(d["Ndb_api_read_row_count_session"], 10, "{pruned}: {d:?}");

            let unpruned = format!("SELECT u, id, v FROM {table} WHERE u + 0 = {u} ORDER BY id");
            let (unpruned_rows, d) = around(&mut conn, &unpruned);
            assert_eq!(unpruned_rows, pruned_rows, "{table}, u = {u}");
            assert_eq!(
                d["Ndb_api_pruned_scan_count_session"], 0,
                "{unpruned}: {d:?}"
            );
            // A full scan, or one of PRIMARY for the ORDER BY: every row.
            let scans =
                d["Ndb_api_table_scan_count_session"] + d["Ndb_api_range_scan_count_session"];
            assert_eq!(scans, 1, "{unpruned}: {d:?}");
            assert_eq!(
                d["Ndb_api_read_row_count_session"], 120,
                "{unpruned}: {d:?}"
            );
        }
    }
    // A text key compares by its collation: the partition of 'aBC' holds
    // 'abc', 'Abc ' and 'ABC' (the distribution hash is the collation's).
    conn.query_drop(
        "CREATE TABLE named (name VARCHAR(20), id INT, PRIMARY KEY (id, name)) \
         ENGINE=NDB PARTITION BY KEY (name)",
    )
    .expect("create named");
    conn.query_drop("INSERT INTO named VALUES ('abc', 1), ('Abc ', 2), ('xyz', 3), ('ABC', 4)")
        .expect("insert");
    let (rows, d) = around(
        &mut conn,
        "SELECT id FROM named WHERE name = 'aBC' ORDER BY id",
    );
    // The text protocol's values, as SQL literals.
    assert_eq!(rows, [["'1'"], ["'2'"], ["'4'"]]);
    assert_eq!(d["Ndb_api_pruned_scan_count_session"], 1, "{d:?}");

    // With more conditions the scan stays pruned; IN over the key prunes
    // to its values' partitions (counted unless they are all of them;
    // `sql_stats.rs` tests a table of 8 partitions).
    let (rows, d) = around(&mut conn, "SELECT id FROM lead WHERE u = 4 AND id > 50");
    assert_eq!(rows.len(), 6);
    assert_eq!(d["Ndb_api_pruned_scan_count_session"], 1, "{d:?}");
    let (plan, _) = around(&mut conn, "EXPLAIN SELECT id FROM trail WHERE u IN (1, 2)");
    let (all, _) = around(&mut conn, "EXPLAIN SELECT id FROM trail");
    let pruned = u64::from(plan[0][3] != all[0][3]);
    let (rows, d) = around(&mut conn, "SELECT id FROM trail WHERE u IN (1, 2)");
    assert_eq!(rows.len(), 20);
    assert_eq!(d["Ndb_api_pruned_scan_count_session"], pruned, "{d:?}");

    // A transaction: start, commit; an explicit rollback counts an abort.
    let before = status(&mut conn, false);
    conn.query_drop("BEGIN").expect("begin");
    conn.query_drop("UPDATE lead SET v = v + 1 WHERE u = 1 AND id = 1")
        .expect("update");
    conn.query_drop("COMMIT").expect("commit");
    conn.query_drop("BEGIN").expect("begin");
    conn.query_drop("UPDATE lead SET v = v + 1 WHERE u = 1 AND id = 1")
        .expect("update");
    conn.query_drop("ROLLBACK").expect("rollback");
    let after = status(&mut conn, false);
    assert_eq!(moved(&before, &after, "Com_begin"), 2);
    assert_eq!(moved(&before, &after, "Com_commit"), 1);
    assert_eq!(moved(&before, &after, "Com_rollback"), 1);
    assert_eq!(moved(&before, &after, "Com_update"), 2);
    assert!(moved(&before, &after, "Ndb_api_trans_commit_count_session") >= 1);
    assert!(moved(&before, &after, "Ndb_api_trans_abort_count_session") >= 1);

    // Multi-table UPDATE and DELETE count as MariaDB's `_multi` forms.
    let before = status(&mut conn, false);
    conn.query_drop(
        "UPDATE lead AS a JOIN lead AS b ON b.u = a.u AND b.id = a.id SET a.v = b.v + 1 \
         WHERE a.u = 1 AND a.id = 1",
    )
    .expect("multi-table update");
    conn.query_drop("DELETE a FROM lead AS a JOIN lead AS b ON b.id = a.id WHERE a.id < 0")
        .expect("multi-table delete");
    let after = status(&mut conn, false);
    assert_eq!(moved(&before, &after, "Com_update_multi"), 1);
    assert_eq!(moved(&before, &after, "Com_update"), 0);
    assert_eq!(moved(&before, &after, "Com_delete_multi"), 1);
    assert_eq!(moved(&before, &after, "Com_delete"), 0);

    // The global figures sum the connections; a session's are its own.
    let mut other = connect(port);
    let mine = status(&mut conn, false);
    let global = status(&mut conn, true);
    for _ in 0..5 {
        other
            .query_drop("SELECT v FROM st.lead WHERE u = 2 AND id = 2")
            .expect("select");
    }
    let global_after = status(&mut conn, true);
    let mine_after = status(&mut conn, false);
    // The other's 5 statements, and this one's SHOWs.
    assert!(moved(&global, &global_after, "Com_select") >= 5);
    assert_eq!(moved(&mine, &mine_after, "Com_select"), 0);
    assert!(moved(&global, &global_after, "Ndb_api_pk_op_count") >= 5);
    assert_eq!(moved(&mine, &mine_after, "Ndb_api_pk_op_count_session"), 0);
    assert!(global_after["Threads_connected"] >= 2);
    // A closed connection's counts stay in the global figures.
    drop(other);
    let closed = status(&mut conn, true);
    assert!(closed["Com_select"] >= global_after["Com_select"]);
    assert!(closed["Questions"] >= global_after["Questions"]);
    // information_schema has them too.
    let questions: Option<(String, String)> = conn
        .query_first(
            "SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.SESSION_STATUS \
             WHERE VARIABLE_NAME = 'COM_SELECT'",
        )
        .expect("information_schema.SESSION_STATUS");
    assert!(questions.is_some());
    let pushed: Vec<(String, String)> = conn
        .query("SHOW GLOBAL STATUS LIKE 'Ndb_pushed_queries_executed'")
        .expect("like");
    assert_eq!(pushed, [("Ndb_pushed_queries_executed".into(), "0".into())]);
}

fn the_slow_query_log_is_mysqls_and_mysqldumpslow_reads_it(sandbox: &Sandbox) {
    let port = sandbox.sql_port();
    let mut conn = connect(port);
    let file: String = conn
        .query_first("SELECT @@slow_query_log_file")
        .expect("select")
        .expect("a row");
    assert!(
        file.starts_with(sandbox.dir.to_str().expect("UTF-8")),
        "the sandbox's SQL node logs in the sandbox: {file}"
    );
    let off: (i64, String) = conn
        .query_first("SELECT @@slow_query_log, @@long_query_time")
        .expect("select")
        .expect("a row");
    assert_eq!(off, (0, "10.000000".to_owned()));
    conn.query_drop("CREATE DATABASE slow")
        .expect("create database");
    conn.query_drop("CREATE TABLE slow.t (id INT PRIMARY KEY, v INT) ENGINE=NDB")
        .expect("create table");
    conn.query_drop("INSERT INTO slow.t VALUES (1, 10), (2, 20), (3, 30)")
        .expect("insert");
    // Off: nothing is written while the log is off.
    assert!(std::fs::read_to_string(&file)
        .unwrap_or_default()
        .is_empty());

    // Only an account with SUPER turns the log on or names its file.
    conn.query_drop("CREATE USER 'plain'@'%'")
        .expect("create user");
    let mut plain = Conn::new(
        OptsBuilder::new()
            .ip_or_hostname(Some("127.0.0.1"))
            .tcp_port(port)
            .user(Some("plain"))
            .prefer_socket(false),
    )
    .expect("plain logs in");
    for sql in [
        "SET GLOBAL slow_query_log = ON",
        "SET GLOBAL slow_query_log_file = '/tmp/elsewhere.log'",
        "FLUSH LOGS",
        "FLUSH STATUS",
        "FLUSH PRIVILEGES",
    ] {
        match plain.query_drop(sql) {
            Err(mysql::Error::MySqlError(e)) => assert_eq!(e.code, 1227, "{sql}"),
            other => panic!("{sql}: {other:?}"),
        }
    }
    drop(plain);
    conn.query_drop("SET GLOBAL slow_query_log = ON")
        .expect("on");
    conn.query_drop("SET long_query_time = 0")
        .expect("every statement is slow");
    let before = status(&mut conn, false)["Slow_queries"];
    conn.query_drop("USE slow").expect("use");
    let rows: Vec<(i64, i64)> = conn
        .query("SELECT id, v FROM t WHERE v >= 20 ORDER BY id")
        .expect("select");
    assert_eq!(rows.len(), 2);
    conn.query_drop("UPDATE t SET v = 11 WHERE id = 1")
        .expect("update");
    let after = status(&mut conn, false)["Slow_queries"];
    // USE, SELECT, UPDATE and the first SHOW (the second counts at its end).
    assert!(after - before >= 4, "Slow_queries moved {}", after - before);

    // Another connection with the default long_query_time logs nothing.
    let mut quick = connect(port);
    quick
        .query_drop("SELECT v FROM slow.t WHERE id = 2")
        .expect("select");
    drop(quick);
    conn.query_drop("SET GLOBAL slow_query_log = OFF")
        .expect("off");

    let log = std::fs::read_to_string(&file).expect("the slow log");
    let mut lines = log.lines();
    let header = lines.next().expect("a header");
    assert!(
        header.starts_with('/') && header.contains(", Version: "),
        "{header}"
    );
    assert!(header.ends_with("started with:"), "{header}");
    assert!(lines.next().expect("port line").starts_with("Tcp port: "));
    assert!(lines.next().expect("columns line").starts_with("Time "));
    // Entries: the `# Query_time` lines and the statements after them.
    let entries: Vec<&str> = log.split("# Time: ").skip(1).collect();
    let find = |statement: &str| {
        entries
            .iter()
            .find(|e| e.trim_end().ends_with(statement))
            .unwrap_or_else(|| panic!("no entry for {statement} in\n{log}"))
    };
    let select = find("SELECT id, v FROM t WHERE v >= 20 ORDER BY id;");
    assert!(
        select.contains("# User@Host: root[root] @ localhost [127.0.0.1]"),
        "{select}"
    );
    assert!(select.contains("Schema: slow"), "{select}");
    assert!(
        select.contains("Rows_sent: 2  Rows_examined: 2"),
        "{select}"
    );
    assert!(select.contains("\nSET timestamp="), "{select}");
    let query_time = select
        .split("# Query_time: ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|t| t.parse::<f64>().ok())
        .expect("a Query_time");
    assert!(query_time > 0.0 && query_time < 60.0, "{query_time}");
    let update = find("UPDATE t SET v = 11 WHERE id = 1;");
    assert!(update.contains("# Rows_affected: 1"), "{update}");
    // `use` once, where the database changed.
    assert_eq!(log.matches("\nuse slow;\n").count(), 1, "{log}");
    assert!(
        !log.contains("WHERE id = 2"),
        "the quick connection was not logged"
    );

    // mysqldumpslow (Debian's, in mariadb-client) reads it.
    match Command::new("mysqldumpslow")
        .args(["-s", "c", &file])
        .output()
    {
        Ok(out) => {
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "{text}");
            assert!(
                text.contains("SELECT id, v FROM t WHERE v >= N ORDER BY id"),
                "{text}"
            );
            assert!(text.contains("Rows_sent=2.0 (2)"), "{text}");
            assert!(text.contains("root[root]@localhost"), "{text}");
            assert!(
                !text.contains("Version"),
                "the header is not read as a statement: {text}"
            );
        }
        Err(e) => println!("mysqldumpslow not run (not installed: {e})"),
    }

    // FLUSH LOGS opens the file again by its name: a log rotated by
    // renaming it (logrotate's way) starts anew, and the renamed one keeps
    // what it had.
    conn.query_drop("SET GLOBAL slow_query_log = ON")
        .expect("on");
    let rotated = format!("{file}.1");
    std::fs::rename(&file, &rotated).expect("rotate the slow log");
    conn.query_drop("SELECT v FROM slow.t WHERE id = 3")
        .expect("logged in the renamed file");
    conn.query_drop("FLUSH SLOW LOGS").expect("flush slow logs");
    conn.query_drop("SELECT v FROM slow.t WHERE id = 1 + 0")
        .expect("logged in the new file");
    conn.query_drop("SET GLOBAL slow_query_log = OFF")
        .expect("off");
    let old = std::fs::read_to_string(&rotated).expect("the renamed log");
    let new = std::fs::read_to_string(&file).expect("a new log after FLUSH LOGS");
    assert!(
        old.contains("WHERE id = 3;") && !old.contains("id = 1 + 0"),
        "{old}"
    );
    assert!(
        new.contains(", Version: "),
        "the new file has a header: {new}"
    );
    assert!(
        new.contains("WHERE id = 1 + 0;") && !new.contains("id = 3;"),
        "{new}"
    );

    // FLUSH STATUS: the session's counters start again; the global ones
    // keep what the session had counted.
    let global_before = status(&mut conn, true)["Questions"];
    assert!(status(&mut conn, false)["Questions"] > 10);
    conn.query_drop("FLUSH STATUS").expect("flush status");
    let session = status(&mut conn, false);
    assert!(session["Questions"] <= 2, "{}", session["Questions"]);
    assert_eq!(session["Com_select"], 0);
    assert!(status(&mut conn, true)["Questions"] >= global_before);
}
