//! Application drivers against a sandbox's SQL node: Go's
//! `github.com/go-sql-driver/mysql` (`tests/drivers/go`) and GORM
//! (`tests/drivers/go/gorm`), JDBC — MySQL
//! Connector/J and MariaDB Connector/J (`tests/drivers/java`), with
//! Hibernate ORM over Connector/J — and
//! Python's ORMs over PyMySQL, SQLAlchemy and Django with its migrations
//! (`tests/drivers/python/orms.py`), and Node's mysql2 with Sequelize
//! (`tests/drivers/node/orms.js`) and with TypeORM and knex
//! (`tests/drivers/node/typeorm_knex.js`), PHP's mysqlnd through
//! mysqli and PDO (`tests/drivers/php/checks.php`), and Rails'
//! ActiveRecord 6.1 over the mysql2 gem, with its schema, migrations and
//! models (`tests/drivers/ruby/activerecord.rb`). Each program
//! logs in, creates a schema, writes and reads back every column type
//! through server-side and client-side prepared statements, and checks
//! transactions, batches, generated keys, error codes, metadata, a pool of
//! connections and multiple result sets; it prints `drivers-…: ok` or names
//! the check that failed. The same programs pass against MariaDB 10.11.
//!
//! `go`, `mvn`, `java`, `node`, `php` (with mysqli and pdo_mysql) and
//! `ruby` (with ActiveRecord 6.1 and mysql2) must be installed, Django and
//! SQLAlchemy
//! in `target/ci-tools/python` and mysql2, Sequelize, TypeORM and knex in
//! `tests/drivers/node/node_modules` (`.ci/run` installs them): a missing
//! tool fails the test, naming it. Go's modules come from its proxy
//! the first time (then its module cache); Maven's artifacts go to
//! `target/ci-tools/m2`, fetched once.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{text, Sandbox};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Cargo's target directory (where Maven's repository and build go).
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root().join("target"), PathBuf::from)
}

fn start(name: &str, port_range: u16) -> Sandbox {
    Sandbox::start_configured(name, port_range, 2, &["--sql-nodes", "1"])
}

/// Fails the test naming `tool` (and its Debian package) when it does not
/// run: a test that cannot run is never a pass.
fn require_tool(tool: &str, version_arg: &str, package: &str) {
    let ran = Command::new(tool).arg(version_arg).output();
    assert!(
        ran.as_ref().is_ok_and(|o| o.status.success()),
        "NOT INSTALLED: {tool} (Debian: {package}; .ci/run installs it): {ran:?}"
    );
}

/// Runs a driver program against the SQL node at `port` (its
/// `--host 127.0.0.1 --port P`) and checks that it passed.
fn run_against(port: &str, mut program: Command, ok: &str) {
    let output = program
        .args(["--host", "127.0.0.1", "--port", port])
        .output()
        .unwrap_or_else(|e| panic!("run {program:?}: {e}"));
    assert_ran(&output, ok);
}

/// The program exited 0 and printed its `ok` line.
fn assert_ran(output: &std::process::Output, ok: &str) {
    assert!(output.status.success(), "{}", text(output));
    assert!(
        String::from_utf8_lossy(&output.stdout).contains(ok),
        "{}",
        text(output)
    );
}

#[test]
fn go_sql_driver_mysql_and_gorm_work_against_the_sql_node() {
    require_tool("go", "version", "golang-go");
    let sandbox = start("sql-drivers-go", 40_500);
    let port = sandbox.sql_port().to_string();
    // The driver's checks, then GORM's (`tests/drivers/go/gorm`).
    for (program, ok) in [(".", "drivers-go: ok"), ("./gorm", "drivers-gorm: ok")] {
        let output = Command::new("go")
            .args(["run", program, "-host", "127.0.0.1", "-port", &port])
            .current_dir(root().join("tests/drivers/go"))
            .output()
            .expect("run go");
        assert_ran(&output, ok);
    }
}

#[test]
fn jdbc_drivers_and_hibernate_work_against_the_sql_node() {
    require_tool("java", "-version", "default-jdk-headless");
    require_tool("mvn", "-v", "maven");
    let sandbox = start("sql-drivers-java", 41_000);
    let port = sandbox.sql_port().to_string();
    let target = target_dir();
    // The drivers' checks, then Hibernate's over Connector/J.
    let programs = [
        ("skarv.drivers.DriversJava", "drivers-java: ok"),
        ("skarv.drivers.HibernateChecks", "drivers-hibernate: ok"),
    ];
    for (main, ok) in programs {
        let output = Command::new("mvn")
            .arg("-q")
            .arg("-B")
            .arg(format!(
                "-Dmaven.repo.local={}",
                target.join("ci-tools/m2").display()
            ))
            .arg(format!(
                "-Ddrivers.build.dir={}",
                target.join("drivers-java").display()
            ))
            .arg(format!("-Ddrivers.main={main}"))
            .arg(format!("-Dexec.args=127.0.0.1 {port}"))
            .args(["compile", "exec:java"])
            .current_dir(root().join("tests/drivers/java"))
            .output()
            .expect("run mvn");
        assert_ran(&output, ok);
    }
}

#[test]
fn python_orms_work_against_the_sql_node() {
    let packages = target_dir().join("ci-tools/python");
    let found = Command::new("python3")
        .args([
            "-c",
            "import django, sqlalchemy, pymysql; \
             assert django.VERSION[:2] == (5, 2), django.VERSION; \
             assert sqlalchemy.__version__.startswith('2.0.'), sqlalchemy.__version__",
        ])
        .env("PYTHONPATH", &packages)
        .output();
    assert!(
        found.as_ref().is_ok_and(|o| o.status.success()),
        "NOT INSTALLED: Django and SQLAlchemy in {} (.ci/run installs them: pip install \
         --target {} 'django==5.2.*' 'sqlalchemy==2.0.*'), or PyMySQL: {found:?}",
        packages.display(),
        packages.display()
    );
    let sandbox = start("sql-drivers-python", 49_000);
    let port = sandbox.sql_port().to_string();
    let mut program = Command::new("python3");
    program
        .arg(root().join("tests/drivers/python/orms.py"))
        .env("PYTHONPATH", &packages);
    run_against(&port, program, "drivers-python: ok");
}

#[test]
fn php_mysqli_and_pdo_work_against_the_sql_node() {
    require_tool("php", "--version", "php-cli");
    let modules = Command::new("php").arg("-m").output();
    assert!(
        modules.as_ref().is_ok_and(|o| {
            let listed = String::from_utf8_lossy(&o.stdout);
            ["mysqli", "mysqlnd", "pdo_mysql"]
                .iter()
                .all(|m| listed.lines().any(|l| l.trim() == *m))
        }),
        "NOT INSTALLED: PHP's mysqli and pdo_mysql (Debian: php-mysql; .ci/run installs it): \
         {modules:?}"
    );
    let sandbox = start("sql-drivers-php", 38_000);
    let port = sandbox.sql_port().to_string();
    let mut program = Command::new("php");
    program.arg(root().join("tests/drivers/php/checks.php"));
    run_against(&port, program, "drivers-php: ok");
}

#[test]
fn ruby_activerecord_works_against_the_sql_node() {
    require_tool("ruby", "--version", "ruby");
    let found = Command::new("ruby")
        .args([
            "-e",
            "require 'active_record'; require 'mysql2'; \
             raise ActiveRecord.version.to_s unless ActiveRecord.version.to_s.start_with?('6.1.')",
        ])
        .output();
    assert!(
        found.as_ref().is_ok_and(|o| o.status.success()),
        "NOT INSTALLED: ActiveRecord 6.1 and the mysql2 gem (Debian: ruby-activerecord, \
         ruby-mysql2; .ci/run installs them): {found:?}"
    );
    let sandbox = start("sql-drivers-ruby", 34_000);
    let port = sandbox.sql_port().to_string();
    let mut program = Command::new("ruby");
    program.arg(root().join("tests/drivers/ruby/activerecord.rb"));
    run_against(&port, program, "drivers-ruby: ok");
}

#[test]
fn node_mysql2_sequelize_typeorm_and_knex_work_against_the_sql_node() {
    require_tool("node", "--version", "nodejs");
    let dir = root().join("tests/drivers/node");
    let packages = ["mysql2", "sequelize", "typeorm", "reflect-metadata", "knex"];
    let missing: Vec<&str> = packages
        .into_iter()
        .filter(|p| !dir.join("node_modules").join(p).is_dir())
        .collect();
    assert!(
        missing.is_empty(),
        "NOT INSTALLED: {} in {} (.ci/run installs mysql2, Sequelize, TypeORM and knex: npm ci \
         there)",
        missing.join(", "),
        dir.join("node_modules").display()
    );
    let sandbox = start("sql-drivers-node", 49_500);
    let port = sandbox.sql_port().to_string();
    // mysql2 and Sequelize, then TypeORM and knex.
    let programs = [
        ("orms.js", "drivers-node: ok"),
        ("typeorm_knex.js", "drivers-typeorm-knex: ok"),
    ];
    for (script, ok) in programs {
        let mut program = Command::new("node");
        program.arg(script).current_dir(&dir);
        run_against(&port, program, ok);
    }
}
