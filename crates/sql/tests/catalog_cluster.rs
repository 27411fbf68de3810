//! The catalog against a real cluster: a `skarv sandbox` of one data node
//! (the `skarv` binary built next to this test: `cargo build -p skarv`
//! first, or set `SKARV_BIN`), driven through the engine's `Backend` with
//! a collecting `ResultSink`: databases, tables of every type, SHOW CREATE
//! TABLE's round trip, SHOW, information_schema, ALTER, auto-increment
//! from two SQL nodes, and MySQL's errors.

mod common;

use std::io;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use common::Sandbox;
use skarv_client::{Cluster, Session};
use sql::backend::{Backend, Login, OkInfo, ResultSink};
use sql::engine::{catalog, ddl, show, Conn, Engine};
use sql::error::SqlError;
use sql::value::{ColumnMeta, SqlValue};

/// This file's port range.
const PORT_RANGE_START: u16 = 31_000;

/// What a statement answered.
#[derive(Debug, Default)]
struct Collected {
    columns: Vec<ColumnMeta>,
    rows: Vec<Vec<SqlValue>>,
    ok: Option<OkInfo>,
    error: Option<SqlError>,
}

impl ResultSink for Collected {
    fn columns(&mut self, columns: &[ColumnMeta]) -> io::Result<()> {
        self.columns = columns.to_vec();
        Ok(())
    }
    fn row(&mut self, values: &[SqlValue]) -> io::Result<()> {
        assert_eq!(
            values.len(),
            self.columns.len(),
            "a row as wide as its columns"
        );
        self.rows.push(values.to_vec());
        Ok(())
    }
    fn end_rows(&mut self, info: &OkInfo) -> io::Result<()> {
        self.ok = Some(info.clone());
        Ok(())
    }
    fn ok(&mut self, info: &OkInfo) -> io::Result<()> {
        self.ok = Some(info.clone());
        Ok(())
    }
    fn error(&mut self, error: &SqlError) -> io::Result<()> {
        self.error = Some(error.clone());
        Ok(())
    }
}

fn cell(v: &SqlValue) -> String {
    match v {
        SqlValue::Null => "NULL".to_owned(),
        SqlValue::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        SqlValue::UInt(u) => u.to_string(),
        SqlValue::Int(i) => i.to_string(),
        other => format!("{other:?}"),
    }
}

/// Runs one statement as the session would: `ddl::recognise` first (the
/// hook `session::parse_query` is to call), else `Backend::query`.
fn run(conn: &mut Conn<'_>, sql: &str) -> Collected {
    let mut out = Collected::default();
    match ddl::recognise(sql) {
        Some(Ok(statement)) => match ddl::run(conn, &statement, false, &mut out) {
            Ok(sql::engine::Answered::Done) => {}
            Ok(sql::engine::Answered::Ok(info)) => out.ok = Some(info),
            Err(e) => out.error = Some(e),
        },
        Some(Err(e)) => out.error = Some(e),
        None => conn
            .query(sql, false, &mut out)
            .expect("the sink never fails"),
    }
    out
}

/// The rows of a statement that must succeed, as text.
fn rows(conn: &mut Conn<'_>, sql: &str) -> Vec<Vec<String>> {
    let out = run(conn, sql);
    if let Some(e) = out.error {
        panic!("`{sql}` failed: {e}");
    }
    out.rows
        .iter()
        .map(|r| r.iter().map(cell).collect())
        .collect()
}

fn exec(conn: &mut Conn<'_>, sql: &str) {
    let out = run(conn, sql);
    if let Some(e) = out.error {
        panic!("`{sql}` failed: {e}");
    }
    assert!(out.ok.is_some(), "`{sql}` answered nothing");
}

/// The MySQL error code a statement fails with.
fn code(conn: &mut Conn<'_>, sql: &str) -> u16 {
    match run(conn, sql).error {
        Some(e) => e.code,
        None => panic!("`{sql}` succeeded"),
    }
}

const LOCALHOST: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

const EVERY_TYPE: &str = "CREATE TABLE every_type (
  id INT UNSIGNED NOT NULL AUTO_INCREMENT,
  ti TINYINT, si SMALLINT UNSIGNED, mi MEDIUMINT, bi BIGINT NOT NULL DEFAULT -5,
  zf INT(5) UNSIGNED ZEROFILL,
  dc DECIMAL(10,2) DEFAULT '1.50', nm NUMERIC(5), fl FLOAT, db DOUBLE, rl REAL,
  ch CHAR(3) DEFAULT 'ab', vc VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  bn BINARY(4), vb VARBINARY(9),
  tt TINYTEXT, tx TEXT, mt MEDIUMTEXT, lt LONGTEXT,
  tb TINYBLOB, bl BLOB, mb MEDIUMBLOB, lb LONGBLOB,
  d DATE DEFAULT '2024-02-29', t TIME(3), dt DATETIME(6), ts TIMESTAMP NULL,
  upd DATETIME DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
  y YEAR, b BIT(5), e ENUM('x','y') NOT NULL DEFAULT 'y', s SET('p','q'),
  flag BOOL COMMENT 'a flag',
  PRIMARY KEY (id),
  UNIQUE KEY u_vc (vc),
  KEY k_multi (ti, si),
  INDEX (mi)
) ENGINE=NDBCLUSTER DEFAULT CHARSET=utf8mb4 COMMENT='every type'";

/// What MariaDB 10.11 shows for `EVERY_TYPE` (ENGINE aside), checked
/// against a private `mariadbd`.
const EVERY_TYPE_SHOWN: &str = "CREATE TABLE `every_type` (
  `id` int(10) unsigned NOT NULL AUTO_INCREMENT,
  `ti` tinyint(4) DEFAULT NULL,
  `si` smallint(5) unsigned DEFAULT NULL,
  `mi` mediumint(9) DEFAULT NULL,
  `bi` bigint(20) NOT NULL DEFAULT -5,
  `zf` int(5) unsigned zerofill DEFAULT NULL,
  `dc` decimal(10,2) DEFAULT 1.50,
  `nm` decimal(5,0) DEFAULT NULL,
  `fl` float DEFAULT NULL,
  `db` double DEFAULT NULL,
  `rl` double DEFAULT NULL,
  `ch` char(3) DEFAULT 'ab',
  `vc` varchar(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT NULL,
  `bn` binary(4) DEFAULT NULL,
  `vb` varbinary(9) DEFAULT NULL,
  `tt` tinytext DEFAULT NULL,
  `tx` text DEFAULT NULL,
  `mt` mediumtext DEFAULT NULL,
  `lt` longtext DEFAULT NULL,
  `tb` tinyblob DEFAULT NULL,
  `bl` blob DEFAULT NULL,
  `mb` mediumblob DEFAULT NULL,
  `lb` longblob DEFAULT NULL,
  `d` date DEFAULT '2024-02-29',
  `t` time(3) DEFAULT NULL,
  `dt` datetime(6) DEFAULT NULL,
  `ts` timestamp NULL DEFAULT NULL,
  `upd` datetime DEFAULT current_timestamp() ON UPDATE current_timestamp(),
  `y` year(4) DEFAULT NULL,
  `b` bit(5) DEFAULT NULL,
  `e` enum('x','y') NOT NULL DEFAULT 'y',
  `s` set('p','q') DEFAULT NULL,
  `flag` tinyint(1) DEFAULT NULL COMMENT 'a flag',
  PRIMARY KEY (`id`),
  UNIQUE KEY `u_vc` (`vc`),
  KEY `k_multi` (`ti`,`si`),
  KEY `mi` (`mi`)
) ENGINE=ndbcluster DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci COMMENT='every type'";

/// The connection logged in as the bootstrap account, root@localhost.
fn login(mut conn: Conn<'_>) -> Conn<'_> {
    let login = Login {
        user: "root",
        host: LOCALHOST,
        database: None,
        found_rows: false,
        interactive: false,
    };
    conn.logged_in(&login).expect("root@localhost logs in");
    conn
}

#[test]
fn the_catalog_against_a_cluster() {
    let sandbox = Sandbox::start("sql-catalog", 1, 1, PORT_RANGE_START);
    // Two SQL nodes start at once: both make sure the system tables exist,
    // and the one that loses the race to create them (721) starts too.
    let start = || {
        let connect = sandbox.connect.clone();
        std::thread::spawn(move || {
            let cluster = Cluster::connect(&connect).expect("connects to the sandbox");
            assert_eq!(cluster.wait_until_ready(Duration::from_secs(60)), 1);
            Engine::start(cluster).expect("the engine starts")
        })
    };
    let (first, second) = (start(), start());
    let engine = first.join().expect("first SQL node");
    let other = second.join().expect("second SQL node");
    let session = engine.cluster.session().expect("session");
    let mut conn = login(engine.open(&session, LOCALHOST));
    let conn = &mut conn;

    databases(conn);
    every_type(conn);
    show_and_information_schema(conn);
    errors(conn);
    alters(conn);
    copy_recovery(conn, &engine);
    auto_increment(conn, &other);
    two_sql_nodes_alter(conn, &other);
    two_sql_nodes_views(conn, &other, &sandbox);
    sysbench(conn);
    partition_and_ndb_options(conn);
    drops(conn);
}

fn databases(conn: &mut Conn<'_>) {
    let names = rows(conn, "SHOW DATABASES");
    assert!(
        names.contains(&vec!["information_schema".to_owned()]),
        "{names:?}"
    );
    assert!(names.contains(&vec!["mysql".to_owned()]), "{names:?}");
    exec(conn, "CREATE DATABASE d1");
    assert_eq!(code(conn, "CREATE DATABASE d1"), 1007);
    exec(conn, "CREATE DATABASE IF NOT EXISTS d1");
    exec(
        conn,
        "CREATE DATABASE d2 CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
    );
    assert_eq!(
        rows(conn, "SHOW DATABASES LIKE 'd%'"),
        vec![vec!["d1"], vec!["d2"]]
    );
    assert_eq!(code(conn, "CREATE DATABASE `a/b`"), 1102);
    assert_eq!(code(conn, "CREATE DATABASE d3 CHARACTER SET koi8r"), 1115);
    assert_eq!(code(conn, "CREATE DATABASE d3 COLLATE nonsense"), 1273);
    assert_eq!(code(conn, "DROP DATABASE nope"), 1008);
    exec(conn, "DROP DATABASE IF EXISTS nope");
    assert!(catalog::database_exists(conn, "d1").unwrap());
    assert!(
        !catalog::database_exists(conn, "D1").unwrap(),
        "names are case-sensitive"
    );
    assert_eq!(
        catalog::database_exists(conn, "performance_schema")
            .unwrap_err()
            .code,
        1049
    );
    assert!(catalog::database_exists(conn, "information_schema").unwrap());
    let create = rows(conn, "SHOW CREATE DATABASE d2");
    assert_eq!(
        create[0][1],
        "CREATE DATABASE `d2` /*!40100 DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin */"
    );
    assert_eq!(code(conn, "SHOW CREATE DATABASE nope"), 1049);
    // No database selected yet.
    assert_eq!(code(conn, "CREATE TABLE t (a INT)"), 1046);
    assert_eq!(code(conn, "SHOW TABLES"), 1046);
    conn.use_database("d1").unwrap();
}

fn every_type(conn: &mut Conn<'_>) {
    exec(conn, EVERY_TYPE);
    let shown = rows(conn, "SHOW CREATE TABLE every_type");
    assert_eq!(shown[0][0], "every_type");
    assert_eq!(shown[0][1], EVERY_TYPE_SHOWN, "\n{}", shown[0][1]);
    // The round trip: what SHOW CREATE TABLE says creates the same table.
    exec(conn, &EVERY_TYPE_SHOWN.replace("`every_type`", "`again`"));
    let again = rows(conn, "SHOW CREATE TABLE again");
    assert_eq!(
        again[0][1],
        EVERY_TYPE_SHOWN.replace("`every_type`", "`again`")
    );
    // table() reads the SQL types back from the cluster.
    let info = catalog::table(conn, None, "every_type").unwrap();
    let ty = |name: &str| info.columns[info.column(name).unwrap()].ty.clone();
    assert_eq!(ty("t"), catalog::SqlType::Time { fsp: 3 });
    assert_eq!(ty("y"), catalog::SqlType::Year);
    assert_eq!(
        ty("e"),
        catalog::SqlType::Enum(vec!["x".into(), "y".into()])
    );
    assert_eq!(
        ty("tt"),
        catalog::SqlType::Text {
            size: catalog::BlobSize::Tiny,
            collation: schema::Collation::Utf8mb4GeneralCi
        }
    );
    let id = &info.columns[0];
    assert!(id.auto_increment && !id.nullable);
    assert_eq!(
        id.meta.flags & sql::value::flags::AUTO_INCREMENT,
        sql::value::flags::AUTO_INCREMENT
    );
    assert_eq!(
        info.columns[info.column("e").unwrap()].default.as_deref(),
        Some("y")
    );
    assert!(info.columns[info.column("upd").unwrap()].default_now);
    use sql::value::flags::{MULTIPLE_KEY, PRI_KEY, UNIQUE_KEY};
    let key_flags = |name: &str| {
        info.columns[info.column(name).unwrap()].meta.flags & (PRI_KEY | UNIQUE_KEY | MULTIPLE_KEY)
    };
    assert_eq!(key_flags("id"), PRI_KEY);
    assert_eq!(key_flags("vc"), UNIQUE_KEY);
    assert_eq!(key_flags("ti"), MULTIPLE_KEY);
    assert_eq!(key_flags("si"), 0);
    // The keys and the native indexes that serve them, for the planner.
    let keys: Vec<(&str, bool, Option<&str>, Option<&str>)> = info
        .keys
        .iter()
        .map(|k| {
            (
                k.name.as_str(),
                k.unique,
                k.ordered.as_deref(),
                k.hash.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        keys,
        vec![
            ("PRIMARY", true, Some("PRIMARY"), None),
            ("u_vc", true, Some("u_vc"), Some("u_vc$unique")),
            ("k_multi", false, Some("k_multi"), None),
            ("mi", false, Some("mi"), None),
        ]
    );
    // COM_FIELD_LIST gives the same metadata.
    let fields = show::field_list(conn, "every_type").unwrap();
    assert_eq!(fields.len(), 33);
    assert_eq!(fields[0], id.meta);
}

fn show_and_information_schema(conn: &mut Conn<'_>) {
    assert_eq!(
        rows(conn, "SHOW TABLES"),
        vec![vec!["again"], vec!["every_type"]]
    );
    assert_eq!(
        rows(conn, "SHOW FULL TABLES FROM d1 LIKE 'ev%'"),
        vec![vec!["every_type", "BASE TABLE"]]
    );
    let out = run(conn, "SHOW TABLES FROM d1 LIKE 'ev%'");
    assert_eq!(&*out.columns[0].name, "Tables_in_d1 (ev%)");
    let columns = rows(conn, "SHOW COLUMNS FROM every_type LIKE 'id'");
    assert_eq!(
        columns,
        vec![vec![
            "id",
            "int(10) unsigned",
            "NO",
            "PRI",
            "NULL",
            "auto_increment"
        ]]
    );
    let described = rows(conn, "DESCRIBE every_type");
    assert_eq!(described.len(), 33);
    assert_eq!(
        described[12],
        vec!["vc", "varchar(20)", "YES", "UNI", "NULL", ""]
    );
    assert_eq!(described[1][3], "MUL");
    let full = rows(conn, "SHOW FULL COLUMNS FROM d1.every_type LIKE 'flag'");
    assert_eq!(full[0][2], "NULL", "no collation for a number");
    assert_eq!(full[0][8], "a flag");
    let index = rows(conn, "SHOW INDEX FROM every_type");
    let summary: Vec<(String, String, String, String)> = index
        .iter()
        .map(|r| (r[2].clone(), r[1].clone(), r[3].clone(), r[4].clone()))
        .collect();
    let s = |a: &str, b: &str, c: &str, d: &str| (a.into(), b.into(), c.into(), d.into());
    assert_eq!(
        summary,
        vec![
            s("PRIMARY", "0", "1", "id"),
            s("u_vc", "0", "1", "vc"),
            s("k_multi", "1", "1", "ti"),
            s("k_multi", "1", "2", "si"),
            s("mi", "1", "1", "mi"),
        ]
    );
    let status = rows(conn, "SHOW TABLE STATUS LIKE 'every%'");
    assert_eq!(status.len(), 1);
    assert_eq!(status[0][0], "every_type");
    assert_eq!(status[0][1], "ndbcluster");
    assert_eq!(status[0][17], "every type");
    let engines = rows(conn, "SHOW ENGINES");
    assert_eq!(
        engines[0][..2],
        ["ndbcluster".to_owned(), "DEFAULT".to_owned()]
    );
    assert_eq!(
        rows(conn, "SHOW COLLATION LIKE '%bin'")[0][0],
        "utf8mb4_bin"
    );

    let (cols, schemata) = show::information_schema_rows(conn, "schemata").unwrap();
    assert_eq!(&*cols[1].name, "SCHEMA_NAME");
    assert!(schemata
        .iter()
        .any(|r| cell(&r[1]) == "d2" && cell(&r[3]) == "utf8mb4_bin"));
    let (_, tables) = show::information_schema_rows(conn, "TABLES").unwrap();
    assert!(tables.iter().any(|r| cell(&r[1]) == "d1"
        && cell(&r[2]) == "every_type"
        && cell(&r[20]) == "every type"));
    let (cols, columns) = show::information_schema_rows(conn, "COLUMNS").unwrap();
    assert_eq!(&*cols[15].name, "COLUMN_TYPE");
    let e = columns
        .iter()
        .find(|r| cell(&r[2]) == "every_type" && cell(&r[3]) == "e")
        .expect("column e");
    assert_eq!(cell(&e[15]), "enum('x','y')");
    assert_eq!(cell(&e[7]), "enum");
    // COLUMN_DEFAULT is the default's bare value, as MySQL 8 gives it
    // (MariaDB quotes it: docs/sql.md).
    assert_eq!(cell(&e[5]), "y");
    let (_, stats) = show::information_schema_rows(conn, "statistics").unwrap();
    assert_eq!(
        stats.iter().filter(|r| cell(&r[2]) == "every_type").count(),
        5
    );
    let (_, usage) = show::information_schema_rows(conn, "KEY_COLUMN_USAGE").unwrap();
    let mut keys: Vec<String> = usage
        .iter()
        .filter(|r| cell(&r[5]) == "every_type")
        .map(|r| format!("{}.{}", cell(&r[2]), cell(&r[6])))
        .collect();
    keys.sort();
    assert_eq!(keys, vec!["PRIMARY.id", "u_vc.vc"]);
    assert_eq!(
        show::information_schema_rows(conn, "INNODB_TRX")
            .unwrap_err()
            .code,
        1109
    );
    assert!(show::is_virtual_db("INFORMATION_SCHEMA"));
    let described = rows(conn, "DESCRIBE information_schema.TABLES");
    assert_eq!(
        described[2][..2],
        ["TABLE_NAME".to_owned(), "varchar(64)".to_owned()]
    );
    assert_eq!(described.len(), 21);
    assert_eq!(code(conn, "DESCRIBE information_schema.nope"), 1146);
    assert_eq!(
        rows(conn, "SHOW TABLES FROM information_schema").len(),
        show::INFORMATION_SCHEMA_TABLES.len()
    );
}

fn errors(conn: &mut Conn<'_>) {
    assert_eq!(code(conn, "CREATE TABLE every_type (a INT)"), 1050);
    exec(conn, "CREATE TABLE IF NOT EXISTS every_type (a INT)");
    assert_eq!(code(conn, "SHOW CREATE TABLE nope"), 1146);
    assert_eq!(code(conn, "DESCRIBE nope"), 1146);
    assert_eq!(code(conn, "CREATE TABLE t (a INT, A INT)"), 1060);
    assert_eq!(
        code(
            conn,
            "CREATE TABLE t (a INT PRIMARY KEY, b INT PRIMARY KEY)"
        ),
        1068
    );
    assert_eq!(code(conn, "CREATE TABLE t (a INT, KEY (b))"), 1072);
    assert_eq!(
        code(conn, "CREATE TABLE t (a INT AUTO_INCREMENT, b INT)"),
        1075
    );
    assert_eq!(
        code(
            conn,
            "CREATE TABLE t (a INT AUTO_INCREMENT KEY, b INT AUTO_INCREMENT, KEY (b))"
        ),
        1075
    );
    assert_eq!(
        code(conn, "CREATE TABLE t (a INT, KEY k (a), KEY k (a))"),
        1061
    );
    assert_eq!(code(conn, "CREATE TABLE t (a JSONB)"), 1105);
    assert_eq!(code(conn, "CREATE TABLE t (a VARCHAR(70000))"), 1074);
    assert_eq!(
        code(conn, "CREATE TABLE t (a VARCHAR(10000), b VARCHAR(10000))"),
        1118
    );
    assert_eq!(code(conn, "CREATE TABLE t (a TINYINT DEFAULT 300)"), 1067);
    assert_eq!(
        code(conn, "CREATE TABLE t (a INT NOT NULL DEFAULT NULL)"),
        1067
    );
    assert_eq!(code(conn, "CREATE TABLE t (a TEXT, KEY (a))"), 1170);
    assert_eq!(code(conn, "CREATE TABLE `x/y` (a INT)"), 1103);
    assert_eq!(
        code(
            conn,
            "CREATE TABLE t (a INT) ENGINE=NDB COLLATE=koi8r_general_ci"
        ),
        1273
    );
    assert_eq!(code(conn, "CREATE TABLE nodb.t (a INT)"), 1049);
    assert_eq!(
        code(conn, "CREATE TABLE information_schema.t (a INT)"),
        1044
    );
    assert_eq!(code(conn, "RENAME TABLE every_type TO nodb.other"), 1049);
    // Nothing of the refused ones was made.
    assert_eq!(
        rows(conn, "SHOW TABLES LIKE 't'"),
        Vec::<Vec<String>>::new()
    );
}

fn alters(conn: &mut Conn<'_>) {
    exec(conn, "CREATE TABLE a1 (id INT PRIMARY KEY, v INT)");
    exec(
        conn,
        "ALTER TABLE a1 ADD COLUMN w VARCHAR(10) DEFAULT 'z', ADD INDEX iv (v)",
    );
    exec(conn, "CREATE INDEX iw ON a1 (w)");
    let shown = rows(conn, "SHOW CREATE TABLE a1");
    assert_eq!(
        shown[0][1],
        "CREATE TABLE `a1` (\n  `id` int(11) NOT NULL,\n  `v` int(11) DEFAULT NULL,\n  \
         `w` varchar(10) DEFAULT 'z',\n  PRIMARY KEY (`id`),\n  KEY `iv` (`v`),\n  KEY `iw` (`w`)\n\
         ) ENGINE=ndbcluster DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci"
    );
    // Table options alone change only the SQL metadata (an alter the
    // dictionary takes without a column or index change).
    let version = catalog::table(conn, None, "a1").unwrap().native.version();
    exec(conn, "ALTER TABLE a1 COMMENT='changed', ENGINE=InnoDB");
    let info = catalog::table(conn, None, "a1").unwrap();
    assert_eq!(info.native.version(), version + 1);
    assert_eq!(info.sql.comment, "changed");
    assert!(rows(conn, "SHOW CREATE TABLE a1")[0][1].ends_with("COMMENT='changed'"));
    assert_eq!(
        code(conn, "ALTER TABLE a1 COMMENT='NDB_TABLE=READ_BACKUP=1'"),
        1105
    );
    exec(conn, "DROP INDEX iw ON a1");
    exec(conn, "ALTER TABLE a1 DROP INDEX iv");
    assert_eq!(code(conn, "ALTER TABLE a1 DROP INDEX iv"), 1091);
    assert_eq!(code(conn, "ALTER TABLE a1 ADD COLUMN v INT"), 1060);
    // A rename is online: the same table (id) under a new name.
    let id = catalog::table(conn, None, "a1").unwrap().id();
    exec(conn, "ALTER TABLE a1 RENAME TO a2");
    assert_eq!(code(conn, "SELECT * FROM a1"), 1146);
    assert_eq!(catalog::table(conn, None, "a2").unwrap().id(), id);
    exec(conn, "RENAME TABLE a2 TO a1");
    exec(
        conn,
        "ALTER TABLE a1 RENAME COLUMN w TO w2, RENAME COLUMN w2 TO w",
    );
    assert_eq!(catalog::table(conn, None, "a1").unwrap().id(), id);
    // What the dictionary cannot change in place is a copy: a new table
    // under the old name.
    exec(conn, "ALTER TABLE a1 ADD COLUMN x INT FIRST");
    let copied = catalog::table(conn, None, "a1").unwrap();
    assert_ne!(copied.id(), id, "a copying ALTER makes a new table");
    assert_eq!(copied.columns[0].name, "x");
    exec(
        conn,
        "ALTER TABLE a1 ADD COLUMN y INT NOT NULL, ADD UNIQUE (v)",
    );
    exec(
        conn,
        "ALTER TABLE a1 DROP COLUMN x, DROP COLUMN y, DROP INDEX v",
    );
    assert_eq!(code(conn, "ALTER TABLE a1 DROP COLUMN nope"), 1091);
    assert_eq!(code(conn, "ALTER TABLE a1 DROP COLUMN id"), 1105);
    assert_eq!(code(conn, "ALTER TABLE a1 DROP PRIMARY KEY"), 1105);
    // No copy is left behind, and SHOW never lists one.
    let names = conn.native.list_tables().unwrap();
    assert!(!names.iter().any(|n| n.contains("#sql-")), "{names:?}");
    assert_eq!(code(conn, "ALTER TABLE a1 ADD INDEX (nope)"), 1072);
    assert_eq!(code(conn, "ALTER TABLE nope ADD INDEX (v)"), 1146);
    let index = rows(conn, "SHOW INDEX FROM a1");
    assert_eq!(index.len(), 1, "{index:?}");
    exec(conn, "TRUNCATE TABLE a1");
    assert!(rows(conn, "SHOW CREATE TABLE a1")[0][1].contains("`w` varchar(10) DEFAULT 'z'"));
}

/// What a SQL node that died during a copying ALTER leaves (a locked
/// table, its `#sql-new-` copy, a table renamed to `#sql-old-` before the
/// swap finished) holds writers, until the node starts again and
/// `alter_copy::recover` undoes it.
fn copy_recovery(conn: &mut Conn<'_>, engine: &Arc<Engine>) {
    use sql::engine::alter_copy;
    use sql::engine::catalog::meta::CopyLock;
    let me = u32::from(engine.cluster.node_id().get());
    exec(conn, "CREATE TABLE r1 (id INT PRIMARY KEY, v INT)");
    exec(conn, "CREATE TABLE r2 (id INT PRIMARY KEY, v INT)");
    exec(conn, "INSERT INTO r1 VALUES (1, 1), (2, 2)");
    exec(conn, "INSERT INTO r2 VALUES (3, 3)");
    let lock = |conn: &mut Conn<'_>, name: &str, rename: Option<String>| {
        let info = catalog::table(conn, None, name).unwrap();
        let mut sql = info.sql.clone();
        sql.copy = Some(CopyLock {
            owner: me,
            started_ms: 1,
            from: info.native.def().name.clone(),
        });
        let mut def = info.native.def().clone();
        def.sql_meta = sql.encode();
        if let Some(to) = rename {
            def.name = catalog::cluster_name(&info.db, &to);
        }
        conn.native.alter_table(def).unwrap();
        info
    };
    let r1 = lock(conn, "r1", None);
    let mut copy = r1.native.def().clone();
    copy.name = catalog::cluster_name(&r1.db, &format!("#sql-new-{me}-5"));
    copy.id = 0;
    copy.version = 0;
    copy.indexes.iter_mut().for_each(|i| i.id = 0);
    conn.native.create_table(&copy).unwrap();
    lock(conn, "r2", Some(format!("#sql-old-{me}-6")));

    exec(conn, "SET SESSION innodb_lock_wait_timeout = 1");
    assert_eq!(
        code(conn, "UPDATE r1 SET v = 10"),
        1205,
        "a locked table holds writers"
    );
    assert_eq!(
        rows(conn, "SELECT v FROM r1 WHERE id = 2"),
        [["2"]],
        "reads go on"
    );
    // A multi-table UPDATE or DELETE waits for the copy of a table it
    // changes, not of one it only reads.
    exec(conn, "CREATE TABLE r3 (id INT PRIMARY KEY, v INT)");
    exec(conn, "INSERT INTO r3 VALUES (1, 0), (2, 0)");
    assert_eq!(
        code(conn, "UPDATE r1 JOIN r3 ON r3.id = r1.id SET r1.v = 5"),
        1205,
        "a multi-table UPDATE of a locked table waits"
    );
    assert_eq!(
        code(conn, "DELETE r1 FROM r1 JOIN r3 ON r3.id = r1.id"),
        1205,
        "a multi-table DELETE of a locked table waits"
    );
    exec(conn, "UPDATE r3 JOIN r1 ON r1.id = r3.id SET r3.v = r1.v");
    assert_eq!(
        rows(conn, "SELECT id, v FROM r3 ORDER BY id"),
        [["1", "1"], ["2", "2"]],
        "a locked table is read"
    );
    assert_eq!(code(conn, "SELECT * FROM r2"), 1146);
    assert_eq!(code(conn, "ALTER TABLE r1 ADD COLUMN z INT"), 1105);
    assert_eq!(
        rows(conn, "SHOW TABLES LIKE '#sql%'"),
        Vec::<Vec<String>>::new()
    );

    let session = engine.cluster.session().unwrap();
    alter_copy::recover(engine, &session).unwrap();
    exec(conn, "UPDATE r1 SET v = 10 WHERE id = 1");
    exec(conn, "UPDATE r2 SET v = 30");
    assert_eq!(
        rows(conn, "SELECT id, v FROM r2"),
        [["3", "30"]],
        "r2 is back"
    );
    let names = conn.native.list_tables().unwrap();
    assert!(!names.iter().any(|n| n.contains("#sql-")), "{names:?}");
    exec(conn, "SET SESSION innodb_lock_wait_timeout = 50");
    exec(conn, "DROP TABLE r1, r2");
}

fn auto_increment(conn: &mut Conn<'_>, other: &Arc<Engine>) {
    exec(
        conn,
        "CREATE TABLE ai (id BIGINT AUTO_INCREMENT PRIMARY KEY) AUTO_INCREMENT=100",
    );
    let info = catalog::table(conn, None, "ai").unwrap();
    let first = catalog::next_auto_increment(conn, &info, 1).unwrap();
    assert_eq!(first, 100);
    assert_eq!(catalog::next_auto_increment(conn, &info, 3).unwrap(), 101);
    assert_eq!(catalog::next_auto_increment(conn, &info, 1).unwrap(), 104);
    // A second SQL node (its own cluster connection) draws from the same
    // sequence: its range starts after this node's reservation.
    let other_session: Session = other.cluster.session().unwrap();
    let other_conn = login(other.open(&other_session, LOCALHOST));
    let other_info = catalog::table(&other_conn, Some("d1"), "ai").unwrap();
    let theirs = catalog::next_auto_increment(&other_conn, &other_info, 1).unwrap();
    assert_eq!(theirs, 100 + catalog::AUTO_INCREMENT_PREFETCH);
    // Values from both never repeat.
    let mut seen = std::collections::BTreeSet::new();
    for k in 0..100 {
        let (c, i): (&Conn<'_>, _) = if k % 3 == 0 {
            (&other_conn, &other_info)
        } else {
            (&*conn, &info)
        };
        let v = catalog::next_auto_increment(c, i, 1).unwrap();
        assert!(seen.insert(v), "{v} handed out twice");
    }
    // An explicit value above the counter moves it: at once on this node,
    // on another once its reserved range is used up (as in NDB).
    catalog::note_explicit_auto_increment(conn, &info, 10_000).unwrap();
    assert!(catalog::next_auto_increment(conn, &info, 1).unwrap() > 10_000);
    let past_range = catalog::AUTO_INCREMENT_PREFETCH + 1;
    assert!(catalog::next_auto_increment(&other_conn, &other_info, past_range).unwrap() > 10_000);
    // ALTER TABLE … AUTO_INCREMENT moves it up; SHOW CREATE TABLE tells.
    exec(conn, "ALTER TABLE ai AUTO_INCREMENT=50000");
    assert_eq!(
        catalog::next_auto_increment(conn, &info, 1).unwrap(),
        50_000
    );
    // The hidden key draws from the table's sequence too.
    exec(conn, "CREATE TABLE nokey (v INT)");
    let nokey = catalog::table(conn, None, "nokey").unwrap();
    assert!(nokey.hidden_key);
    assert_eq!(nokey.columns.len(), 1);
    assert_eq!(catalog::next_auto_increment(conn, &nokey, 1).unwrap(), 1);
    drop(other_conn);
}

/// An alter through a SQL node whose cached definition is older than the
/// cluster's is refused with 1412 and goes through when retried.
fn two_sql_nodes_alter(conn: &mut Conn<'_>, other: &Arc<Engine>) {
    exec(conn, "CREATE TABLE c2 (id INT PRIMARY KEY, v INT, w INT)");
    let other_session = other.cluster.session().unwrap();
    let mut theirs = login(other.open(&other_session, LOCALHOST));
    theirs.use_database("d1").unwrap();
    assert_eq!(rows(&mut theirs, "SHOW INDEX FROM c2").len(), 1);
    exec(conn, "CREATE INDEX iv ON c2 (v)");
    assert_eq!(code(&mut theirs, "CREATE INDEX iw ON c2 (w)"), 1412);
    exec(&mut theirs, "CREATE INDEX iw ON c2 (w)");
    let index = rows(conn, "SHOW INDEX FROM c2");
    let names: Vec<&str> = index.iter().map(|r| r[2].as_str()).collect();
    assert_eq!(names, vec!["PRIMARY", "iv", "iw"]);
}

/// A view made on one SQL node is read on another and on a SQL node
/// started afterwards (it lives in the cluster); MySQL's errors.
fn two_sql_nodes_views(conn: &mut Conn<'_>, other: &Arc<Engine>, sandbox: &Sandbox) {
    exec(conn, "CREATE TABLE vt (id INT PRIMARY KEY, v INT)");
    exec(conn, "INSERT INTO vt VALUES (1, 10), (2, 20)");
    exec(conn, "CREATE VIEW vv AS SELECT id, v * 2 AS w FROM vt");
    let other_session = other.cluster.session().unwrap();
    let mut theirs = login(other.open(&other_session, LOCALHOST));
    theirs.use_database("d1").unwrap();
    assert_eq!(
        rows(&mut theirs, "SELECT * FROM vv ORDER BY id"),
        vec![vec!["1", "20"], vec!["2", "40"]]
    );
    exec(
        &mut theirs,
        "CREATE OR REPLACE VIEW vv AS SELECT id FROM vt WHERE v > 10",
    );
    assert_eq!(rows(conn, "SELECT * FROM vv"), vec![vec!["2"]]);
    // A SQL node started now finds it too.
    let cluster = Cluster::connect(&sandbox.connect).expect("connects to the sandbox");
    assert_eq!(cluster.wait_until_ready(Duration::from_secs(60)), 1);
    let third = Engine::start(cluster).expect("the engine starts");
    let third_session = third.cluster.session().unwrap();
    let mut late = login(third.open(&third_session, LOCALHOST));
    late.use_database("d1").unwrap();
    assert_eq!(rows(&mut late, "SELECT id FROM vv"), vec![vec!["2"]]);
    let create = rows(&mut late, "SHOW CREATE VIEW vv");
    assert!(
        create[0][1].contains("VIEW `vv` AS SELECT id FROM d1.vt"),
        "{create:?}"
    );
    assert_eq!(code(&mut late, "SHOW CREATE VIEW vt"), 1347);
    assert_eq!(code(&mut late, "DROP VIEW vt"), 1347);
    assert_eq!(code(&mut late, "DROP VIEW nosuch"), 1051);
    // A write through the view, from the node that found it: a row of vt,
    // whose v the view does not show (NULL, so outside `v > 10`).
    exec(&mut late, "INSERT INTO vv VALUES (3)");
    assert_eq!(
        rows(conn, "SELECT id, v FROM vt WHERE id = 3"),
        vec![vec!["3", "NULL"]]
    );
    assert_eq!(rows(conn, "SELECT * FROM vv"), vec![vec!["2"]]);
    assert_eq!(code(&mut late, "ALTER VIEW vt AS SELECT 1"), 1347);
    exec(&mut late, "DROP VIEW vv");
    assert_eq!(code(conn, "SELECT * FROM vv"), 1146);
    exec(conn, "DROP TABLE vt");
}

/// sysbench's own schema statements.
fn sysbench(conn: &mut Conn<'_>) {
    exec(
        conn,
        "CREATE TABLE sbtest1(\n  id INTEGER NOT NULL AUTO_INCREMENT,\n  \
         k INTEGER DEFAULT '0' NOT NULL,\n  c CHAR(120) DEFAULT '' NOT NULL,\n  \
         pad CHAR(60) DEFAULT '' NOT NULL,\n  PRIMARY KEY (id)\n) /*! ENGINE = innodb */",
    );
    exec(conn, "CREATE INDEX k_1 ON sbtest1(k)");
    let info = catalog::table(conn, None, "sbtest1").unwrap();
    assert_eq!(info.columns[1].default.as_deref(), Some("0"));
    assert_eq!(info.keys[1].ordered.as_deref(), Some("k_1"));
    exec(conn, "DROP TABLE IF EXISTS sbtest1");
}

fn partition_and_ndb_options(conn: &mut Conn<'_>) {
    exec(
        conn,
        "CREATE TABLE p (a INT, b INT, c INT, PRIMARY KEY (a, b)) ENGINE=NDB \
         COMMENT=\"NDB_TABLE=READ_BACKUP=1,FULLY_REPLICATED=1\" PARTITION BY KEY (b) PARTITIONS 2",
    );
    let info = catalog::table(conn, None, "p").unwrap();
    let def = info.native.def();
    assert!(def.read_backup && def.fully_replicated);
    assert_eq!(def.partitions, 2);
    assert_eq!(def.distribution_key, vec![1], "b leads the native key");
    let shown = rows(conn, "SHOW CREATE TABLE p");
    assert!(
        shown[0][1].ends_with(
            "COMMENT='NDB_TABLE=READ_BACKUP=1,FULLY_REPLICATED=1'\nPARTITION BY KEY (`b`)"
        ),
        "{}",
        shown[0][1]
    );
    assert!(
        shown[0][1].contains("PRIMARY KEY (`a`,`b`)"),
        "{}",
        shown[0][1]
    );
    assert_eq!(
        code(
            conn,
            "CREATE TABLE p2 (a INT, b INT, PRIMARY KEY (a)) PARTITION BY KEY (b)"
        ),
        1503
    );
    assert_eq!(
        code(conn, "CREATE TABLE p2 (a INT) COMMENT='NDB_TABLE=NOPE=1'"),
        1478
    );
    exec(conn, "CREATE TABLE l LIKE p");
    let like = catalog::table(conn, None, "l").unwrap();
    assert_eq!(like.native.def().distribution_key, vec![1]);
    assert_eq!(like.columns.len(), 3);
}

fn drops(conn: &mut Conn<'_>) {
    assert_eq!(code(conn, "DROP TABLE l, nope"), 1051);
    assert_eq!(
        code(conn, "DROP TABLE l"),
        1051,
        "l went with the statement before"
    );
    exec(conn, "DROP TABLE IF EXISTS nope, p");
    exec(conn, "DROP DATABASE d1");
    assert_eq!(conn.session.database, None);
    assert_eq!(code(conn, "SHOW TABLES FROM d1"), 1049);
    exec(conn, "CREATE DATABASE d1");
    assert_eq!(rows(conn, "SHOW TABLES FROM d1"), Vec::<Vec<String>>::new());
    exec(conn, "DROP DATABASE d1");
    exec(conn, "DROP DATABASE d2");
    assert_eq!(code(conn, "DROP DATABASE mysql"), 1044);
    assert_eq!(code(conn, "DROP TABLE mysql.skarv_sequences"), 1044);
    assert_eq!(code(conn, "TRUNCATE TABLE mysql.skarv_databases"), 1044);
    assert_eq!(
        code(conn, "CREATE INDEX i ON mysql.skarv_databases (charset)"),
        1044
    );
    let system = rows(conn, "SHOW TABLES FROM mysql");
    for table in ["skarv_databases", "skarv_sequences"] {
        assert!(system.contains(&vec![table.to_owned()]), "{system:?}");
    }
}
