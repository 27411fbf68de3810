//! The statement front end fuzzed through a live SQL node: statements of
//! the SQL test suite (`tests/sql/*.test`), mutated (cut, tokens dropped,
//! doubled, swapped or replaced by hostile ones, odd characters put in,
//! two statements spliced), sent over a real connection as text and as
//! prepared statements. Every one must get an answer — a result or a
//! MySQL error — on the same connection; the connection must never drop,
//! and the server must go on serving a connection opened at the start.
//! The run is deterministic: the seed (`SQL_FUZZ_SEED`, default fixed) and
//! the count (`SQL_FUZZ_STATEMENTS`) say what is sent, and a failure
//! prints the statement.

mod common;

use std::path::PathBuf;

use common::Sandbox;
use mysql::prelude::Queryable;
use mysql::{Conn, OptsBuilder};

/// Statements sent by default: enough to reach every statement kind of the
/// suite many times, in well under a minute of a debug build.
const STATEMENTS_DEFAULT: usize = 3_000;
/// Statements whose effect ends or stalls the connection on purpose.
const SKIPPED_WORDS: [&str; 4] = ["KILL", "SLEEP", "BENCHMARK", "SHUTDOWN"];
/// Tokens the mutations put in.
const HOSTILE: [&str; 32] = [
    "SELECT",
    "FROM",
    "WHERE",
    "(",
    ")",
    ",",
    "NULL",
    "'x'",
    "1e308",
    "-9223372036854775809",
    "18446744073709551616",
    "0x",
    "X'GG'",
    "`",
    "\"",
    "'",
    "\\",
    "UNION",
    "ORDER BY",
    "GROUP BY",
    "LIMIT",
    "VALUES",
    "DEFAULT",
    "CAST(",
    "AS",
    "CHAR",
    "?",
    "@@",
    "@x",
    ";",
    "/*",
    "--",
];
const ODD: [&str; 6] = ["\u{0}", "é", "😀", "\u{202e}", "\t", "\n"];

/// The statements of the suite's `.test` files (directives and comments
/// left out, statements joined across lines up to their `;`).
fn corpus() -> Vec<String> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/sql");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/sql")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "test"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("a test file");
        let mut current = String::new();
        for line in text.lines() {
            let t = line.trim();
            if t.is_empty() || t.starts_with('#') || t.starts_with("--") {
                continue;
            }
            let lower = t.to_ascii_lowercase();
            if ["connect", "connection", "disconnect"]
                .iter()
                .any(|w| lower.starts_with(w))
            {
                continue;
            }
            current.push_str(t);
            current.push(' ');
            if t.ends_with(';') {
                out.push(current.trim().trim_end_matches(';').to_owned());
                current.clear();
            }
        }
    }
    assert!(out.len() > 100, "the corpus has {} statements", out.len());
    out
}

/// `SkarvDialect` (`crates/sql/src/engine/dialect.rs`) reads every
/// statement of the suite as `MySqlDialect` does: the same tree, or an
/// error from both, or (MariaDB's grammar that `MySqlDialect` lacks) a
/// tree from it alone, or (what MariaDB's grammar refuses) an error from
/// it alone. It forwards each method `MySqlDialect` overrides; one it
/// missed (a later sqlparser's) would show here.
#[test]
fn the_dialect_reads_the_suite_as_mysql_does() {
    use sqlparser::dialect::MySqlDialect;
    use sqlparser::parser::Parser;
    let statements = corpus();
    let mut parsed = 0;
    for sql in &statements {
        // The logical XOR ranks below the comparisons here, as in MariaDB,
        // and above them in `MySqlDialect` (dialect.rs): trees differ.
        // So does the word BINARY, a cast of the next operand only here,
        // of the whole expression after it there (and `BINARY(` a
        // function there), and `ROW(a, b)`, the row `(a, b)` here and a
        // function ROW there, and `GET_FORMAT(DATE, …)`, whose DATE is a
        // word here and a column there.
        let upper = sql.to_ascii_uppercase();
        let binary = upper.match_indices("BINARY").any(|(at, _)| {
            let before = upper[..at].chars().next_back();
            !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        });
        if upper.contains(" XOR ")
            || binary
            || upper.contains("ROW(")
            || upper.contains("GET_FORMAT(")
        {
            continue;
        }
        let ours = Parser::parse_sql(&sql::engine::dialect::SkarvDialect, sql);
        let theirs = Parser::parse_sql(&MySqlDialect {}, sql);
        match (&ours, &theirs) {
            (Ok(a), Ok(b)) => {
                assert_eq!(a, b, "{sql}");
                parsed += 1;
            }
            (Err(_), Err(_)) => {}
            // MariaDB's grammar that `MySqlDialect` does not read: the
            // prefix `!`, ON ending a select list without FROM.
            (Ok(_), Err(_)) => {}
            // What MariaDB's grammar refuses and `MySqlDialect` reads: a
            // multi-table DELETE's ORDER BY or LIMIT.
            (Err(e), Ok(_))
                if sql.to_ascii_uppercase().starts_with("DELETE")
                    && e.to_string().contains("Expected: end of statement") => {}
            _ => panic!("{sql}: {ours:?} against {theirs:?}"),
        }
    }
    assert!(
        parsed > statements.len() / 2,
        "{parsed} of {}",
        statements.len()
    );
}

fn tokens(s: &str) -> Vec<String> {
    s.split_whitespace().map(str::to_owned).collect()
}

fn mutate(rng: &mut testkit::Rng, corpus: &[String]) -> String {
    let base = &corpus[rng.index(corpus.len())];
    let mut words = tokens(base);
    match rng.index(7) {
        0 => {
            let cut = rng.index(base.len() + 1);
            return base
                .char_indices()
                .take_while(|(i, _)| *i < cut)
                .map(|(_, c)| c)
                .collect();
        }
        1 if !words.is_empty() => {
            let at = rng.index(words.len());
            words.remove(at);
        }
        2 if !words.is_empty() => {
            let at = rng.index(words.len());
            let w = words[at].clone();
            words.insert(at, w);
        }
        3 if words.len() > 1 => {
            let (a, b) = (rng.index(words.len()), rng.index(words.len()));
            words.swap(a, b);
        }
        4 => {
            let at = rng.index(words.len() + 1);
            words.insert(at, HOSTILE[rng.index(HOSTILE.len())].to_owned());
        }
        5 => {
            let other = tokens(&corpus[rng.index(corpus.len())]);
            let keep = rng.index(words.len() + 1);
            words.truncate(keep);
            let from = rng.index(other.len() + 1);
            words.extend(other.into_iter().skip(from));
        }
        _ => {
            let at = rng.index(words.len() + 1);
            words.insert(at, ODD[rng.index(ODD.len())].to_owned());
        }
    }
    words.join(" ")
}

#[test]
fn mutated_statements_get_answers_and_never_drop_the_connection() {
    let seed: u64 = std::env::var("SQL_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5ca1_ab1e);
    let count: usize = std::env::var("SQL_FUZZ_STATEMENTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(STATEMENTS_DEFAULT);
    let sandbox = Sandbox::start_configured("sql-fuzz", 35_800, 2, &["--sql-nodes", "1"]);
    let port = sandbox.sql_port();
    let connect = || {
        let opts = OptsBuilder::new()
            .ip_or_hostname(Some("127.0.0.1"))
            .tcp_port(port)
            .user(Some("root"))
            .prefer_socket(false);
        Conn::new(opts).expect("connect")
    };
    let mut sentinel = connect();
    let mut fuzz = connect();
    fuzz.query_drop("CREATE DATABASE IF NOT EXISTS fuzz")
        .unwrap();
    fuzz.query_drop("USE fuzz").unwrap();
    // Tables the suite's statements name, so that mutations reach past
    // the catalog into the planner and executors.
    for ddl in [
        "CREATE TABLE t (id INT PRIMARY KEY, a INT, b VARCHAR(20), c TEXT, KEY ka (a))",
        "CREATE TABLE u (id INT PRIMARY KEY, v INT)",
    ] {
        fuzz.query_drop(ddl).unwrap();
    }
    fuzz.query_drop("INSERT INTO t VALUES (1, 10, 'x', 'one'), (2, 20, NULL, NULL)")
        .unwrap();

    let corpus = corpus();
    let mut rng = testkit::Rng::new(seed);
    let (mut answered, mut errors) = (0usize, 0usize);
    for n in 0..count {
        let statement = mutate(&mut rng, &corpus);
        let upper = statement.to_ascii_uppercase();
        if SKIPPED_WORDS.iter().any(|w| upper.contains(w)) {
            continue;
        }
        let prepared = rng.index(4) == 0;
        let result = if prepared {
            fuzz.prep(&statement).map(|_| ())
        } else {
            fuzz.query_drop(&statement)
        };
        match result {
            Ok(()) => answered += 1,
            Err(mysql::Error::MySqlError(_)) => errors += 1,
            // The client refused before sending (e.g. a NUL in a prepared
            // statement's text): nothing reached the server.
            Err(mysql::Error::DriverError(_)) => {}
            Err(e) => panic!(
                "statement {n} (seed {seed}, prepared {prepared}) lost the connection: {e}\n\
                 statement: {statement:?}"
            ),
        }
        if n % 500 == 0 {
            let one: Option<u64> = sentinel.query_first("SELECT 1").unwrap();
            assert_eq!(one, Some(1), "the server serves others after statement {n}");
            // A statement may leave the session in a transaction, read
            // only, or in a database that is gone: start it over, as a
            // pool would.
            fuzz.query_drop("ROLLBACK").ok();
            fuzz.query_drop("SET SESSION TRANSACTION READ WRITE").ok();
            fuzz.query_drop("USE fuzz").ok();
        }
    }
    // The last statements may have left the session elsewhere too.
    fuzz.query_drop("ROLLBACK").ok();
    fuzz.query_drop("SET SESSION TRANSACTION READ WRITE")
        .unwrap();
    fuzz.query_drop("USE fuzz").unwrap();
    deepest_statements_get_answers(&mut fuzz);
    let one: Option<u64> = sentinel.query_first("SELECT 1").unwrap();
    assert_eq!(one, Some(1));
    assert!(
        answered > count / 20 && errors > count / 4,
        "{answered} answered, {errors} errors: the mutations reach both outcomes"
    );
}

/// Expressions nested as deep as the parser takes them, in every clause
/// that lowers one, as text and prepared: each gets an answer. Lowering
/// recurses once per level with large frames, and before it grew its
/// stack, `IF` nested 20 deep overflowed a connection's stack, which
/// aborts the SQL node for every client.
fn deepest_statements_get_answers(conn: &mut Conn) {
    const FORMS: [&str; 5] = [
        "IF(1, {}, 'b')",
        "CONCAT({}, 'b')",
        "CASE WHEN 1 THEN {} ELSE 'b' END",
        "COALESCE({}, 'b')",
        "({} + 1)",
    ];
    const CLAUSES: [&str; 4] = [
        "SELECT {} AS x",
        "SELECT id FROM t WHERE {} = 'a'",
        "UPDATE t SET b = {} WHERE id = 99",
        "INSERT INTO u VALUES (99, LENGTH({}))",
    ];
    for form in FORMS {
        let nested =
            |depth: usize| (0..depth).fold("'a'".to_owned(), |inner, _| form.replace("{}", &inner));
        let mut deepest = 0;
        for depth in (10..=60).step_by(10) {
            for clause in CLAUSES {
                let statement = clause.replace("{}", &nested(depth));
                for prepared in [false, true] {
                    let result = if prepared {
                        conn.prep(&statement).map(|_| ())
                    } else {
                        conn.query_drop(&statement)
                    };
                    match result {
                        Ok(()) => deepest = deepest.max(depth),
                        Err(mysql::Error::MySqlError(_)) => {}
                        Err(e) => panic!(
                            "{form} nested {depth} deep lost the connection: {e}\n{statement}"
                        ),
                    }
                }
            }
        }
        assert!(deepest >= 40, "{form} answered only to {deepest} deep");
    }
    conn.query_drop("DELETE FROM u WHERE id = 99").unwrap();
}
