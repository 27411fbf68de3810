//! The SQL test suite (`tests/sql/*.test`, run by `mysqltest` through
//! `tests/sql/run.sh`, expected output recorded against MariaDB) against
//! a sandbox's SQL node, in the text protocol and then in the prepared
//! statement protocol. Needs `mysqltest` and `mysql` (`.ci/run` installs
//! them).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{text, Sandbox};

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs the suite (`extra`: more arguments to run.sh) and fails with its
/// per-file report unless every file passed.
fn run_suite(sandbox: &Sandbox, extra: &[&str]) {
    let port = sandbox.sql_port().to_string();
    let logs = sandbox.dir.join(format!("sql-tests{}", extra.join("")));
    let output = Command::new(root().join("tests/sql/run.sh"))
        .args(["--host", "127.0.0.1", "--port", &port])
        .args(extra)
        .env("SQL_TEST_LOGS", &logs)
        .output()
        .expect("run tests/sql/run.sh");
    assert!(output.status.success(), "{}", text(&output));
}

#[test]
fn the_sql_suite_passes_against_a_sandbox() {
    let sandbox = Sandbox::start_configured("sql-suite", 30_500, 2, &["--sql-nodes", "1"]);
    run_suite(&sandbox, &[]);
    run_suite(&sandbox, &["--ps"]);
}
