//! The SQL node's sessions and accounts through a real MySQL client (the
//! `mysql` crate): accounts and grants kept in the cluster (an account made
//! through one SQL node logs in through another), wrong passwords, missing
//! privileges, system variables and warnings, `KILL` of a connection
//! that waits for its client, `wait_timeout` closing an idle one, and
//! workers sharing a job queue by `FOR UPDATE SKIP LOCKED`.

mod common;

use std::time::{Duration, Instant};

use common::{wait_for, Sandbox};
use mysql::prelude::Queryable;
use mysql::{Conn, Opts, OptsBuilder};

/// A sandbox of 2 data nodes and 2 SQL nodes, its ports from `port_range`.
fn start(name: &str, port_range: u16) -> Sandbox {
    Sandbox::start_configured(name, port_range, 2, &["--sql-nodes", "2"])
}

fn opts(port: u16, user: &str, password: Option<&str>) -> Opts {
    OptsBuilder::new()
        .ip_or_hostname(Some("127.0.0.1"))
        .tcp_port(port)
        .user(Some(user))
        .pass(password)
        .prefer_socket(false)
        .into()
}

fn connect(port: u16, user: &str, password: Option<&str>) -> mysql::Result<Conn> {
    Conn::new(opts(port, user, password))
}

/// The MySQL error code of a failed statement or login.
fn code(result: mysql::Result<impl std::fmt::Debug>) -> u16 {
    match result {
        Err(mysql::Error::MySqlError(e)) => e.code,
        other => panic!("expected a MySQL error, got {other:?}"),
    }
}

#[test]
fn accounts_live_in_the_cluster_and_grants_are_enforced() {
    let sandbox = start("sql-accounts", 29_600);
    let (first, second) = (sandbox.sql_port_of(0), sandbox.sql_port_of(1));
    let mut root = connect(first, "root", None).expect("root@localhost without a password");
    root.query_drop("CREATE USER 'ann'@'%' IDENTIFIED BY 'secret'")
        .expect("create user");
    assert_eq!(
        code(root.query_drop("CREATE USER 'ann'@'%' IDENTIFIED BY 'x'")),
        1396,
        "the account exists"
    );

    // The other SQL node knows the account at once: it is in the cluster.
    let mut ann = connect(second, "ann", Some("secret")).expect("ann logs in through node 2");
    assert_eq!(
        code(connect(second, "ann", Some("wrong"))),
        1045,
        "wrong password"
    );
    assert_eq!(
        code(connect(first, "nobody", None)),
        1045,
        "no such account"
    );

    // Without a privilege: 1044 for a database-level statement.
    assert_eq!(code(ann.query_drop("CREATE DATABASE annsdb")), 1044);
    root.query_drop("GRANT CREATE, DROP ON annsdb.* TO 'ann'@'%'")
        .expect("grant");
    let grants: Vec<String> = root
        .query("SHOW GRANTS FOR 'ann'@'%'")
        .expect("show grants");
    assert_eq!(
        grants,
        [
            "GRANT USAGE ON *.* TO `ann`@`%`",
            "GRANT CREATE, DROP ON `annsdb`.* TO `ann`@`%`"
        ]
    );
    // SHOW CREATE USER: the password as its mysql_native_password hash
    // (MariaDB's text for 'secret'); an account sees its own, not others'.
    let create: Vec<String> = root
        .query("SHOW CREATE USER 'ann'@'%'")
        .expect("show create user");
    assert_eq!(
        create,
        ["CREATE USER `ann`@`%` IDENTIFIED BY PASSWORD '*14E65567ABDB5135D0CFD9A70B3032C179A49EE7'"]
    );
    let own: Vec<String> = ann.query("SHOW CREATE USER").expect("one's own");
    assert_eq!(own, create);
    assert_eq!(
        code(ann.query_drop("SHOW CREATE USER root@localhost")),
        1044
    );
    assert_eq!(code(root.query_drop("SHOW CREATE USER 'nobody'@'%'")), 1133);
    // Grants are read at login (and USE), as MySQL applies them.
    let mut ann = connect(second, "ann", Some("secret")).expect("ann logs in again");
    ann.query_drop("CREATE DATABASE annsdb")
        .expect("CREATE with the grant");
    assert_eq!(code(ann.query_drop("CREATE DATABASE other")), 1044);
    root.query_drop("REVOKE CREATE, DROP ON annsdb.* FROM 'ann'@'%'")
        .expect("revoke");
    let mut ann = connect(second, "ann", Some("secret")).expect("ann logs in again");
    assert_eq!(
        code(ann.query_drop("DROP DATABASE annsdb")),
        1044,
        "revoked"
    );

    // A changed password holds everywhere; a dropped account logs in nowhere.
    root.query_drop("ALTER USER 'ann'@'%' IDENTIFIED BY 'new'")
        .expect("alter user");
    assert_eq!(code(connect(second, "ann", Some("secret"))), 1045);
    connect(second, "ann", Some("new")).expect("the new password");
    root.query_drop("DROP USER 'ann'@'%'").expect("drop user");
    assert_eq!(code(connect(first, "ann", Some("new"))), 1045);
    // A statement that finds nothing to drop or revoke releases its locks:
    // the account statements after it run (each was 1205 once).
    root.query_drop("DROP USER IF EXISTS 'ghost'@'%'")
        .expect("drop a missing user if exists");
    assert_eq!(
        code(root.query_drop("REVOKE SELECT ON annsdb.* FROM 'root'@'localhost'")),
        1141,
        "no such grant"
    );
    root.query_drop("CREATE USER 'bob'@'%'")
        .expect("an account statement after them");
    root.query_drop("DROP USER 'bob'@'%'").expect("drop bob");
    root.query_drop("DROP DATABASE annsdb")
        .expect("root drops it");
}

#[test]
fn variables_warnings_and_kill() {
    let sandbox = start("sql-session", 29_700);
    let port = sandbox.sql_port();
    let mut conn = connect(port, "root", None).expect("root");

    let rows: Vec<(String, String)> = conn
        .query("SHOW VARIABLES LIKE 'autocommit'")
        .expect("show variables");
    assert_eq!(rows, [("autocommit".to_owned(), "ON".to_owned())]);
    conn.query_drop("SET autocommit = 0").expect("set");
    let rows: Vec<(String, String)> = conn
        .query("SHOW SESSION VARIABLES LIKE 'autocommit'")
        .expect("show variables");
    assert_eq!(rows[0].1, "OFF");
    assert_eq!(code(conn.query_drop("SET no_such_variable = 1")), 1193);
    assert_eq!(
        code(conn.query_drop("SET version = 'x'")),
        1238,
        "read only"
    );
    assert_eq!(
        code(conn.query_drop("SET max_connections = 5")),
        1229,
        "global only"
    );
    assert_eq!(
        code(conn.query_drop("SET autocommit = 7")),
        1231,
        "bad value"
    );
    // A setting Skarv cannot honour is refused, not taken and ignored.
    assert_eq!(
        code(conn.query_drop("SET div_precision_increment = 8")),
        1231,
        "division keeps 4 digits"
    );
    conn.query_drop("SET div_precision_increment = 4")
        .expect("the one value it computes with");

    // Another isolation level is a warning: transactions are READ COMMITTED.
    conn.query_drop("SET SESSION TRANSACTION ISOLATION LEVEL SERIALIZABLE")
        .expect("a warning, not an error");
    assert_eq!(conn.warnings(), 1);
    let warnings: Vec<(String, u32, String)> = conn.query("SHOW WARNINGS").expect("warnings");
    assert_eq!(warnings.len(), 1);
    assert!(warnings[0].2.contains("READ COMMITTED"), "{warnings:?}");

    // KILL ends a connection that waits for its client's next command.
    let mut idle = connect(port, "root", None).expect("a second connection");
    let idle_id = idle.connection_id();
    common::kill_and_wait_gone(&mut conn, idle_id);
    assert!(idle.ping().is_err(), "the killed connection is closed");
    assert_eq!(code(conn.query_drop("KILL 999999")), 1094, "unknown thread");

    // wait_timeout: a connection whose client sends nothing for longer
    // than its session's limit is closed and counted in Aborted_clients;
    // one that pings within it stays. An interactive client's session
    // starts from interactive_timeout.
    let aborted = |conn: &mut Conn| -> u64 {
        let rows: Vec<(String, u64)> = conn
            .query("SHOW GLOBAL STATUS LIKE 'Aborted_clients'")
            .expect("status");
        rows[0].1
    };
    let before = aborted(&mut conn);
    let mut sleepy = connect(port, "root", None).expect("a sleepy connection");
    let sleepy_id = sleepy.connection_id();
    sleepy
        .query_drop("SET SESSION wait_timeout = 1")
        .expect("set");
    let mut pinger = connect(port, "root", None).expect("a pinging connection");
    pinger
        .query_drop("SET SESSION wait_timeout = 2")
        .expect("set");
    let start = Instant::now();
    wait_for(
        "the idle connection to close",
        Duration::from_secs(10),
        || {
            assert!(pinger.ping().is_ok(), "a connection that pings stays");
            std::thread::sleep(Duration::from_millis(200));
            let ids: Vec<u64> = conn
                .query_map("SHOW PROCESSLIST", |row: mysql::Row| {
                    row.get::<u64, _>(0).expect("an id")
                })
                .expect("processlist");
            !ids.contains(&u64::from(sleepy_id))
        },
    );
    assert!(
        start.elapsed() >= Duration::from_secs(1),
        "not before its limit"
    );
    assert!(sleepy.ping().is_err(), "the idle connection is closed");
    assert!(pinger.ping().is_ok(), "the pinging one is not");
    assert_eq!(aborted(&mut conn), before + 1);
    conn.query_drop("SET GLOBAL interactive_timeout = 100")
        .expect("set");
    let interactive = OptsBuilder::from_opts(opts(port, "root", None))
        .additional_capabilities(mysql::consts::CapabilityFlags::CLIENT_INTERACTIVE);
    let mut interactive = Conn::new(interactive).expect("an interactive client");
    let limit: Option<u64> = interactive
        .query_first("SELECT @@wait_timeout")
        .expect("read");
    assert_eq!(limit, Some(100));
    let limit: Option<u64> = pinger
        .query_first("SELECT @@GLOBAL.wait_timeout")
        .expect("read");
    assert_eq!(limit, Some(28_800), "others keep wait_timeout's");
    conn.query_drop("SET GLOBAL interactive_timeout = 28800")
        .expect("set");
}

/// Connections held open at once by `a_thousand_idle_connections_are_served`
/// (the floor).
const IDLE_CONNECTIONS: usize = 1_000;

#[test]
fn a_thousand_idle_connections_are_served() {
    let sandbox = Sandbox::start_configured("sql-idle", 29_900, 2, &["--sql-nodes", "1"]);
    let port = sandbox.sql_port();
    let mut idle: Vec<Conn> = (0..IDLE_CONNECTIONS)
        .map(|i| connect(port, "root", None).unwrap_or_else(|e| panic!("connection {i}: {e}")))
        .collect();
    let mut probe = connect(port, "root", None).expect("one more");
    let connected: Vec<(String, String)> = probe
        .query("SHOW STATUS LIKE 'Threads_connected'")
        .expect("status");
    assert_eq!(connected[0].1, (IDLE_CONNECTIONS + 1).to_string());
    // Every idle connection still answers, and a statement on one sees
    // what another committed.
    probe.query_drop("CREATE DATABASE idle").expect("database");
    probe
        .query_drop("CREATE TABLE idle.t (id INT PRIMARY KEY)")
        .expect("table");
    probe
        .query_drop("INSERT INTO idle.t VALUES (7)")
        .expect("row");
    for (i, conn) in idle.iter_mut().enumerate() {
        let id: Option<u32> = conn
            .query_first("SELECT id FROM idle.t WHERE id = 7")
            .unwrap_or_else(|e| panic!("connection {i}: {e}"));
        assert_eq!(id, Some(7), "connection {i}");
    }
    drop(idle);
    common::wait_threads_connected(&mut probe, 1);
}

#[test]
fn a_client_killed_inside_a_transaction_leaves_nothing_locked() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::{Command, Stdio};
    let sandbox = start("sql-killed-client", 29_800);
    let port = sandbox.sql_port_of(0);
    let mut root = connect(port, "root", None).unwrap();
    root.query_drop("CREATE DATABASE k").unwrap();
    root.query_drop("CREATE TABLE k.t (id INT PRIMARY KEY, v INT)")
        .unwrap();
    root.query_drop("INSERT INTO k.t VALUES (1, 1)").unwrap();

    // The `mysql` CLI takes a row lock inside a transaction, says so, and
    // is killed with SIGKILL: its socket closes with no COM_QUIT.
    let mut client = Command::new("mysql")
        .args(["-h", "127.0.0.1", "-P", &port.to_string(), "-u", "root"])
        .args(["--batch", "--unbuffered", "--skip-column-names", "k"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the mysql client (Debian: mariadb-client) runs");
    let mut stdin = client.stdin.take().unwrap();
    stdin
        .write_all(b"BEGIN; UPDATE t SET v = 2 WHERE id = 1; SELECT 'locked';\n")
        .unwrap();
    stdin.flush().unwrap();
    let mut line = String::new();
    BufReader::new(client.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "locked");
    client.kill().unwrap();
    client.wait().unwrap();

    // Another client gets the row's lock (within the lock-wait timeout, so
    // the killed client's transaction was rolled back, not left waiting),
    // and the killed client's update is not there.
    let before: Option<i64> = root.query_first("SELECT v FROM k.t WHERE id = 1").unwrap();
    assert_eq!(before, Some(1), "the killed transaction's update is gone");
    root.query_drop("UPDATE k.t SET v = 3 WHERE id = 1")
        .expect("the row is not locked");
    let after: Option<i64> = root.query_first("SELECT v FROM k.t WHERE id = 1").unwrap();
    assert_eq!(after, Some(3));

    // A client that closes its socket right behind its last command (the
    // command's bytes and the close in one TCP segment, so that the SQL
    // node's poll reports them together): the command is answered, then
    // the close ends the session and rolls its transaction back. The
    // thread pool parked such a session after reading the command, with
    // no edge left for the close: it lived on, the row locked, until
    // `wait_timeout`.
    let mut raw = RawClient::login(port, "k");
    raw.query("BEGIN");
    raw.send_query_and_close("UPDATE t SET v = 4 WHERE id = 1");
    assert_eq!(raw.reply()[0], 0x00, "the update is answered with OK");
    common::wait_threads_connected(&mut root, 1);
    root.query_drop("UPDATE k.t SET v = 5 WHERE id = 1")
        .expect("the closed client's row is not locked");
    let last: Option<i64> = root.query_first("SELECT v FROM k.t WHERE id = 1").unwrap();
    assert_eq!(last, Some(5), "the closed client's update was rolled back");
}

/// A MySQL client written by hand (the `mysql` crate does not let a test
/// decide when its socket closes): logs in as root with no password.
struct RawClient {
    stream: std::net::TcpStream,
}

impl RawClient {
    fn login(port: u16, database: &str) -> RawClient {
        use std::io::Write;
        let stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        let mut client = RawClient { stream };
        let greeting = client.reply();
        assert_eq!(greeting[0], 10, "protocol 10 handshake");
        // HandshakeResponse41: PROTOCOL_41, SECURE_CONNECTION,
        // CONNECT_WITH_DB, LONG_PASSWORD; utf8mb4; root, an empty password.
        let flags: u32 = 0x0200 | 0x8000 | 0x0008 | 0x0001;
        let mut payload = Vec::new();
        payload.extend_from_slice(&flags.to_le_bytes());
        payload.extend_from_slice(&(16u32 << 20).to_le_bytes());
        payload.push(45);
        payload.extend_from_slice(&[0; 23]);
        payload.extend_from_slice(b"root\0");
        payload.push(0);
        payload.extend_from_slice(database.as_bytes());
        payload.push(0);
        let packet = packet(1, &payload);
        client.stream.write_all(&packet).expect("login");
        assert_eq!(client.reply()[0], 0x00, "logged in");
        client
    }

    /// The payload of the next packet.
    fn reply(&mut self) -> Vec<u8> {
        use std::io::Read;
        let mut header = [0u8; 4];
        self.stream
            .read_exact(&mut header)
            .expect("a packet header");
        let len = u32::from_le_bytes([header[0], header[1], header[2], 0]) as usize;
        let mut payload = vec![0u8; len];
        self.stream.read_exact(&mut payload).expect("a packet");
        payload
    }

    /// Runs a statement that answers OK.
    fn query(&mut self, sql: &str) {
        use std::io::Write;
        let packet = packet(0, &[&[0x03], sql.as_bytes()].concat());
        self.stream.write_all(&packet).expect("query");
        let reply = self.reply();
        assert_eq!(reply[0], 0x00, "{sql}: {reply:?}");
    }

    /// Sends a statement and the end of the connection in one segment.
    fn send_query_and_close(&mut self, sql: &str) {
        use std::io::Write;
        use std::os::fd::AsRawFd;
        let on: libc::c_int = 1;
        // SAFETY: sets an int option of a socket we own from an int we own.
        let corked = unsafe {
            libc::setsockopt(
                self.stream.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_CORK,
                (&on as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        assert_eq!(corked, 0, "TCP_CORK");
        let packet = packet(0, &[&[0x03], sql.as_bytes()].concat());
        self.stream.write_all(&packet).expect("query");
        self.stream
            .shutdown(std::net::Shutdown::Write)
            .expect("shutdown");
    }
}

/// A MySQL packet: 3 bytes of length, the sequence number, the payload.
fn packet(seq: u8, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut out = len.to_le_bytes()[..3].to_vec();
    out.push(seq);
    out.extend_from_slice(payload);
    out
}

/// `max_execution_time` stops a SELECT (not a write) with 3024, before
/// or after `max_statement_time`'s 1969 as either runs out first, `KILL
/// QUERY` stops a `SLEEP` with 1317, `SHOW … WHERE` filters by the SHOW's
/// columns, `information_schema.PROCESSLIST` lists this node's
/// connections, and a TIMESTAMP reads in the session's time zone through
/// both protocols.
#[test]
fn deadlines_show_where_processlist_and_time_zones() {
    let sandbox = Sandbox::start_configured("sql-session-limits", 42_200, 2, &["--sql-nodes", "1"]);
    let port = sandbox.sql_port();
    let mut conn = connect(port, "root", None).expect("root");
    conn.query_drop("CREATE DATABASE lim")
        .expect("create database");
    conn.query_drop("USE lim").expect("use");
    conn.query_drop("CREATE TABLE t (id INT PRIMARY KEY, v INT, ts TIMESTAMP NULL)")
        .expect("create table");
    conn.query_drop("INSERT INTO t (id, v) VALUES (1, 1), (2, 2), (3, 3)")
        .expect("insert");

    // max_execution_time: a SELECT past it fails with 3024 long before it
    // would have ended; a write is not limited.
    conn.query_drop("SET max_execution_time = 200")
        .expect("set");
    let started = Instant::now();
    let result = conn.query::<(i32, i32), _>("SELECT id, SLEEP(2) FROM t");
    assert_eq!(code(result), 3024);
    assert!(
        started.elapsed() < Duration::from_millis(1_500),
        "{:?}",
        started.elapsed()
    );
    let result = conn.query::<i64, _>("SELECT COUNT(*) FROM t WHERE SLEEP(0.15) = 0");
    assert_eq!(code(result), 3024, "a scan's filter");
    let one: Vec<i32> = conn
        .query("SELECT SLEEP(1)")
        .expect("SLEEP alone returns 1");
    assert_eq!(one, [1]);
    conn.query_drop("UPDATE t SET v = v + SLEEP(0.1)")
        .expect("writes are not limited");
    conn.query_drop("SET max_execution_time = 0").expect("set");
    let rows: Vec<(i32, i32)> = conn
        .query("SELECT id, SLEEP(0.1) FROM t")
        .expect("no limit");
    assert_eq!(rows.len(), 3);

    // Under MySQL's max_execution_time and MariaDB's max_statement_time,
    // a SELECT stops at the earlier, with that one's error.
    conn.query_drop("SET max_execution_time = 10000, max_statement_time = 0.2")
        .expect("set");
    let result = conn.query::<(i32, i32), _>("SELECT id, SLEEP(2) FROM t");
    assert_eq!(code(result), 1969, "max_statement_time first");
    conn.query_drop("SET max_execution_time = 200, max_statement_time = 10")
        .expect("set");
    let result = conn.query::<(i32, i32), _>("SELECT id, SLEEP(2) FROM t");
    assert_eq!(code(result), 3024, "max_execution_time first");
    conn.query_drop("SET max_execution_time = 0, max_statement_time = 0")
        .expect("set");

    // KILL QUERY stops a SLEEP at once.
    let mut sleeper = connect(port, "root", None).expect("a second connection");
    let sleeper_id = sleeper.connection_id();
    let sleeping = std::thread::spawn(move || {
        let started = Instant::now();
        let result = sleeper.query::<(i32, i32), _>("SELECT id, SLEEP(30) FROM lim.t");
        (result, started.elapsed())
    });
    wait_for("the SLEEP to run", Duration::from_secs(10), || {
        let running: Vec<u64> = conn
            .query(format!(
                "SELECT ID FROM information_schema.PROCESSLIST WHERE ID = {sleeper_id} \
                 AND INFO LIKE '%SLEEP(30)%'"
            ))
            .expect("processlist");
        !running.is_empty()
    });
    conn.query_drop(format!("KILL QUERY {sleeper_id}"))
        .expect("kill query");
    let (result, took) = sleeping.join().expect("the sleeper");
    assert_eq!(code(result), 1317);
    assert!(took < Duration::from_secs(10), "{took:?}");

    // information_schema.PROCESSLIST: this connection, as SHOW shows it.
    let me: Vec<(u64, String, String)> = conn
        .query("SELECT ID, USER, COMMAND FROM information_schema.PROCESSLIST WHERE ID = CONNECTION_ID()")
        .expect("processlist");
    assert_eq!(
        me,
        [(
            u64::from(conn.connection_id()),
            "root".to_owned(),
            "Query".to_owned()
        )]
    );

    // SHOW … WHERE, as Connector/J sends it.
    let rows: Vec<(String, String)> = conn
        .query("SHOW VARIABLES WHERE Variable_name = 'autocommit' OR Variable_name = 'time_zone'")
        .expect("show variables where");
    assert_eq!(
        rows,
        [
            ("autocommit".to_owned(), "ON".to_owned()),
            ("time_zone".to_owned(), "SYSTEM".to_owned())
        ]
    );
    let tables: Vec<String> = conn
        .query("SHOW TABLE STATUS WHERE Name = 't' AND Engine = 'ndbcluster'")
        .map(|rows: Vec<mysql::Row>| {
            rows.into_iter()
                .map(|r| r.get::<String, _>(0).expect("a name"))
                .collect()
        })
        .expect("show table status where");
    assert_eq!(tables, ["t"]);
    assert_eq!(
        code(conn.query_drop("SHOW COLUMNS FROM t WHERE nosuch = 1")),
        1054
    );

    // A TIMESTAMP written at +02:00 reads two hours earlier at +00:00, in
    // text and in prepared statements; a filter on it compares in UTC.
    conn.query_drop("SET time_zone = '+02:00'")
        .expect("set time_zone");
    conn.query_drop("UPDATE t SET ts = '2020-06-01 12:00:00' WHERE id = 1")
        .expect("update");
    conn.query_drop("SET time_zone = '+00:00'")
        .expect("set time_zone");
    let text: Vec<String> = conn
        .query("SELECT CAST(ts AS CHAR) FROM t WHERE id = 1")
        .expect("text");
    assert_eq!(text, ["2020-06-01 10:00:00"]);
    let found: Vec<i32> = conn
        .exec("SELECT id FROM t WHERE ts = ?", ("2020-06-01 10:00:00",))
        .expect("prepared");
    assert_eq!(found, [1]);
    assert_eq!(code(conn.query_drop("SET time_zone = 'Europe/Oslo'")), 1298);

    // A latin1 client: text goes out as latin1 ('?' for what latin1
    // lacks), and its bytes come in as latin1 (UTF-8 'é' is two
    // characters to it, as to MySQL).
    conn.query_drop("CREATE TABLE s (id INT PRIMARY KEY, s VARCHAR(20))")
        .expect("create");
    conn.query_drop("INSERT INTO s VALUES (1, 'café 中')")
        .expect("insert");
    let mut latin1 = connect(port, "root", None).expect("a latin1 client");
    latin1.query_drop("SET NAMES latin1").expect("set names");
    let bytes: Vec<Vec<u8>> = latin1.query("SELECT s FROM lim.s").expect("select");
    assert_eq!(bytes, [b"caf\xe9 ?".to_vec()]);
    let chars: Vec<(i64, Vec<u8>)> = latin1
        .query("SELECT CHAR_LENGTH('é'), 'é'")
        .expect("select");
    assert_eq!(chars, [(2, "é".as_bytes().to_vec())]);
    latin1
        .query_drop("SET character_set_results = NULL")
        .expect("no conversion");
    let bytes: Vec<Vec<u8>> = latin1.query("SELECT s FROM lim.s").expect("select");
    assert_eq!(bytes, ["café 中".as_bytes().to_vec()]);
}

/// The SQL node's peak resident memory (VmHWM), in KiB.
fn peak_kib(pid: u64) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no VmHWM in {status}"))
}

/// A SELECT of a whole table is sent as it is read: the SQL node's peak
/// memory grows by a small part of the result's size (it held the whole
/// result before, about 7 times its bytes), and LIMIT/OFFSET still hold.
#[test]
fn a_large_result_is_sent_as_it_is_read() {
    const ROWS: usize = 40_000;
    const PAD_BYTES: usize = 1_000;
    const ROWS_PER_INSERT: usize = 500;
    let sandbox = Sandbox::start_configured("sql-stream", 42_700, 2, &["--sql-nodes", "1"]);
    let mut conn = connect(sandbox.sql_port(), "root", None).expect("root");
    conn.query_drop("CREATE DATABASE big")
        .expect("create database");
    conn.query_drop("USE big").expect("use");
    conn.query_drop("CREATE TABLE t (id INT PRIMARY KEY, pad VARCHAR(1000))")
        .expect("create table");
    for first in (0..ROWS).step_by(ROWS_PER_INSERT) {
        let values: Vec<String> = (first..first + ROWS_PER_INSERT)
            .map(|id| {
                format!(
                    "({id}, REPEAT('{}', {PAD_BYTES}))",
                    (b'a' + (id % 26) as u8) as char
                )
            })
            .collect();
        conn.query_drop(format!("INSERT INTO t VALUES {}", values.join(",")))
            .expect("insert");
    }
    let pid = sandbox.sql_pid();
    let before = peak_kib(pid);
    let mut rows = 0;
    let mut bytes = 0;
    let mut ids = 0u64;
    for row in conn.query_iter("SELECT * FROM t").expect("select") {
        let (id, pad): (u64, String) = mysql::from_row(row.expect("row"));
        rows += 1;
        bytes += pad.len();
        ids += id;
    }
    let grown_kib = peak_kib(pid).saturating_sub(before);
    assert_eq!(rows, ROWS);
    assert_eq!(bytes, ROWS * PAD_BYTES);
    assert_eq!(ids, (ROWS as u64 - 1) * ROWS as u64 / 2);
    let result_kib = (ROWS * PAD_BYTES / 1024) as u64;
    assert!(
        grown_kib < result_kib / 4,
        "the SQL node's peak grew by {grown_kib} KiB for a {result_kib} KiB result"
    );
    let some: Vec<u64> = conn
        .query("SELECT id FROM t WHERE id < 100 LIMIT 7 OFFSET 5")
        .expect("limit");
    assert_eq!(some.len(), 7);
    assert!(some.iter().all(|id| *id < 100), "{some:?}");
    let count: Option<u64> = conn
        .query_first("SELECT COUNT(*) FROM t WHERE pad LIKE 'b%'")
        .expect("count");
    assert_eq!(count, Some((ROWS / 26 + usize::from(ROWS % 26 > 1)) as u64));

    // A join's rows go as they are joined: the SQL node holds the outer
    // table (narrow here) and one batch, not the result.
    conn.query_drop("CREATE TABLE m (id INT PRIMARY KEY, tid INT)")
        .expect("create m");
    for first in (0..ROWS).step_by(ROWS_PER_INSERT) {
        let values: Vec<String> = (first..first + ROWS_PER_INSERT)
            .map(|id| format!("({id}, {})", ROWS - 1 - id))
            .collect();
        conn.query_drop(format!("INSERT INTO m VALUES {}", values.join(",")))
            .expect("insert m");
    }
    // Pushed to the data nodes (the default), then joined in the SQL
    // node by batched key reads.
    for pushdown in ["ON", "OFF"] {
        conn.query_drop(format!("SET ndb_join_pushdown = {pushdown}"))
            .expect("set pushdown");
        let before = peak_kib(pid);
        let (mut rows, mut bytes, mut matched) = (0, 0, 0);
        let join = "SELECT STRAIGHT_JOIN m.id, m.tid, t.id, t.pad FROM m JOIN t ON t.id = m.tid";
        for row in conn.query_iter(join).expect("join") {
            let (id, tid, t_id, pad): (usize, usize, usize, String) =
                mysql::from_row(row.expect("row"));
            rows += 1;
            bytes += pad.len();
            matched += usize::from(tid == ROWS - 1 - id && t_id == tid);
        }
        let grown_kib = peak_kib(pid).saturating_sub(before);
        assert_eq!(
            (rows, matched, bytes),
            (ROWS, ROWS, ROWS * PAD_BYTES),
            "pushdown {pushdown}"
        );
        // Half the result's bytes: the outer table held (40,000 rows of
        // two values, about 5 MiB as values) and the allocator's segments
        // (10 MiB once, with the pushdown off) stay under it, where a
        // join held whole is several times the result.
        assert!(
            grown_kib < result_kib / 2,
            "pushdown {pushdown}: the SQL node's peak grew by {grown_kib} KiB for a {result_kib} KiB join"
        );
        let top: Vec<(u64, u64)> = conn
            .query("SELECT m.id, t.id FROM m JOIN t ON t.id = m.tid ORDER BY t.id DESC LIMIT 3 OFFSET 2")
            .expect("join order limit");
        let last = ROWS as u64 - 1;
        assert_eq!(
            top,
            [(2, last - 2), (3, last - 3), (4, last - 4)],
            "pushdown {pushdown}"
        );
        let limited: Vec<u64> = conn
            .query("SELECT t.id FROM m JOIN t ON t.id = m.tid WHERE m.id >= 100 LIMIT 5")
            .expect("join limit");
        assert_eq!(limited.len(), 5, "pushdown {pushdown}");
        assert!(limited.iter().all(|id| *id <= last - 100), "{limited:?}");
    }
    // The connection serves on after a join that ended early.
    let count: Option<u64> = conn.query_first("SELECT COUNT(*) FROM m").expect("count m");
    assert_eq!(count, Some(ROWS as u64));
}

/// What Django's MySQL backend relies on, through a real client: affected
/// rows under `CLIENT_FOUND_ROWS` (an UPDATE that matched but changed
/// nothing is 1, not 0: Django's `update_or_create` and `save()` check
/// it), `EXPLAIN FORMAT=TREE` (its `explain()`), `DROP CHECK` of the name
/// it makes up for a column's check, and `ROLLBACK TO SAVEPOINT` after a
/// write that failed (its `atomic()` around a create) and after writes.
#[test]
fn what_django_relies_on() {
    let sandbox = Sandbox::start_configured("sql-session-django", 48_500, 2, &["--sql-nodes", "1"]);
    let port = sandbox.sql_port();
    let found: Opts = OptsBuilder::from_opts(opts(port, "root", None))
        .additional_capabilities(mysql::consts::CapabilityFlags::CLIENT_FOUND_ROWS)
        .into();
    let mut django = Conn::new(found).expect("root, with CLIENT_FOUND_ROWS");
    let mut plain = connect(port, "root", None).expect("root");
    django
        .query_drop("CREATE DATABASE dj")
        .expect("create database");
    for conn in [&mut django, &mut plain] {
        conn.query_drop("USE dj").expect("use");
    }
    django
        .query_drop(
            "CREATE TABLE t (id INT PRIMARY KEY, v INT, u INT UNIQUE, \
             n INT UNSIGNED CHECK (n >= 0))",
        )
        .expect("create table");
    django
        .query_drop("CREATE TABLE o (id INT PRIMARY KEY)")
        .expect("create table");
    django
        .query_drop("INSERT INTO t VALUES (1, 1, 1, 1), (2, 2, 2, 2), (3, 3, 3, 3)")
        .expect("insert");
    django
        .query_drop("INSERT INTO o VALUES (1), (2)")
        .expect("insert");
    // (statement, affected rows with CLIENT_FOUND_ROWS, without): MariaDB's.
    let cases = [
        ("UPDATE t SET v = 1 WHERE id IN (1, 2)", 2, 1),
        ("UPDATE t SET v = v", 3, 0),
        ("UPDATE t, o SET t.v = o.id WHERE t.id = o.id", 2, 1),
        (
            "INSERT INTO t VALUES (1, 1, 1, 1) ON DUPLICATE KEY UPDATE v = 1",
            1,
            0,
        ),
        (
            "INSERT INTO t VALUES (1, 1, 1, 1), (4, 4, 4, 4) ON DUPLICATE KEY UPDATE v = 9",
            3,
            3,
        ),
    ];
    for (sql, with_flag, _) in cases {
        django.query_drop(sql).expect(sql);
        assert_eq!(django.affected_rows(), with_flag, "FOUND_ROWS: {sql}");
        let row_count: Option<i64> = django.query_first("SELECT ROW_COUNT()").expect("row_count");
        assert_eq!(row_count, Some(with_flag as i64), "ROW_COUNT() of {sql}");
    }
    plain
        .query_drop("DELETE FROM t WHERE id = 4")
        .expect("delete");
    plain.query_drop("UPDATE t SET v = id").expect("reset");
    for (sql, _, without) in cases {
        let sql = sql.replace("v = 9", "v = 4");
        plain.query_drop(&sql).expect("statement");
        assert_eq!(plain.affected_rows(), without, "without FOUND_ROWS: {sql}");
    }

    // EXPLAIN FORMAT=TREE: the tree EXPLAIN ANALYZE prints, estimated.
    let tree: String = django
        .query_first("EXPLAIN FORMAT=TREE SELECT * FROM t JOIN o ON o.id = t.id WHERE t.v > 0")
        .expect("explain")
        .expect("a row");
    let lines: Vec<&str> = tree.lines().collect();
    assert_eq!(lines.len(), 3, "{tree}");
    assert!(
        lines[0].starts_with("-> Nested loop inner join  (rows="),
        "{tree}"
    );
    assert!(
        lines[1].starts_with("    -> ") && lines[2].starts_with("    -> "),
        "{tree}"
    );
    assert!(!tree.contains("actual time"), "not run: {tree}");
    let tree: String = django
        .query_first("EXPLAIN FORMAT=TREE SELECT * FROM t WHERE id = 2")
        .expect("explain")
        .expect("a row");
    assert_eq!(
        tree,
        "-> Rows fetched by primary key on t (1 keys)  (rows=1)\n"
    );

    // Django drops a column's check by the name it made up for it, then
    // redefines the column, which drops the check (MariaDB's naming).
    django
        .query_drop("ALTER TABLE t DROP CHECK `__unnamed_constraint_1__`")
        .expect("a note, not an error");
    let notes: Vec<(String, u16, String)> = django.query("SHOW WARNINGS").expect("warnings");
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert_eq!((notes[0].0.as_str(), notes[0].1), ("Note", 1091));
    assert_eq!(
        code(django.query_drop("ALTER TABLE t DROP CHECK no_such_check")),
        1091,
        "a name of the user's own must exist"
    );
    django
        .query_drop("ALTER TABLE t MODIFY n INT NOT NULL")
        .expect("modify");
    let checks: Vec<String> = django
        .query("SELECT CONSTRAINT_NAME FROM information_schema.CHECK_CONSTRAINTS WHERE CONSTRAINT_SCHEMA = 'dj'")
        .expect("checks");
    assert!(checks.is_empty(), "{checks:?}");

    // A savepoint around a write that fails: the transaction keeps its
    // earlier write, and rolling back to the savepoint passes no write.
    django.query_drop("BEGIN").expect("begin");
    django
        .query_drop("UPDATE t SET v = 100 WHERE id = 1")
        .expect("update");
    django.query_drop("SAVEPOINT s1").expect("savepoint");
    assert_eq!(
        code(django.query_drop("INSERT INTO t VALUES (1, 0, 50, 0)")),
        1062
    );
    django
        .query_drop("ROLLBACK TO SAVEPOINT s1")
        .expect("no write since the savepoint took effect");
    django.query_drop("RELEASE SAVEPOINT s1").expect("release");
    django.query_drop("COMMIT").expect("commit");
    let v: Option<i32> = plain
        .query_first("SELECT v FROM t WHERE id = 1")
        .expect("select");
    assert_eq!(v, Some(100));
    // A duplicate of another UNIQUE key in an INSERT fails only the
    // statement too (the data nodes take the row back), as in MariaDB.
    django.query_drop("BEGIN").expect("begin");
    django
        .query_drop("UPDATE t SET v = 150 WHERE id = 1")
        .expect("update");
    django.query_drop("SAVEPOINT s2").expect("savepoint");
    assert_eq!(
        code(django.query_drop("INSERT INTO t VALUES (9, 0, 2, 0)")),
        1062
    );
    django
        .query_drop("ROLLBACK TO SAVEPOINT s2")
        .expect("the failed INSERT wrote nothing");
    django.query_drop("COMMIT").expect("commit");
    let v: Option<i32> = plain
        .query_first("SELECT v FROM t WHERE id = 1")
        .expect("select");
    assert_eq!(v, Some(150));
    // An UPDATE that would give a row another's UNIQUE value fails the
    // statement only, as in MariaDB: the transaction keeps its write.
    django.query_drop("BEGIN").expect("begin");
    django
        .query_drop("UPDATE t SET v = 200 WHERE id = 1")
        .expect("update");
    let Err(mysql::Error::MySqlError(e)) = django.query_drop("UPDATE t SET u = 2 WHERE id = 1")
    else {
        panic!("a duplicate of u");
    };
    assert_eq!(e.code, 1062);
    assert_eq!(e.message, "Duplicate entry '2' for key 'u'");
    django.query_drop("COMMIT").expect("commit");
    let v: Option<i32> = plain
        .query_first("SELECT v FROM t WHERE id = 1")
        .expect("select");
    assert_eq!(
        v,
        Some(200),
        "the statement failed, the transaction did not"
    );
    // ROLLBACK TO a savepoint that writes followed takes back those
    // writes only (Django's atomic() blocks nested in a test case's, and
    // Sequelize's nested transactions): the write before it commits.
    django.query_drop("BEGIN").expect("begin");
    django
        .query_drop("UPDATE t SET v = 300 WHERE id = 1")
        .expect("update");
    django.query_drop("SAVEPOINT s3").expect("savepoint");
    django
        .query_drop("UPDATE t SET v = 400 WHERE id = 2")
        .expect("update");
    django
        .query_drop("ROLLBACK TO SAVEPOINT s3")
        .expect("rolled back to the savepoint");
    let vs: Vec<i32> = django
        .query("SELECT v FROM t WHERE id IN (1, 2) ORDER BY id")
        .expect("select");
    assert_eq!(vs, [300, 2], "the transaction as it was at the savepoint");
    django.query_drop("COMMIT").expect("commit");
    let vs: Vec<i32> = plain
        .query("SELECT v FROM t WHERE id IN (1, 2) ORDER BY id")
        .expect("select");
    assert_eq!(vs, [300, 2], "the write before the savepoint committed");
    // Under transaction_allow_batching the writes deferred before a
    // savepoint are sent when it is set; those after it are taken back.
    django
        .query_drop("SET transaction_allow_batching = 1")
        .expect("batching");
    django.query_drop("BEGIN").expect("begin");
    django
        .query_drop("UPDATE t SET v = 500 WHERE id = 1")
        .expect("update");
    django.query_drop("SAVEPOINT s4").expect("savepoint");
    django
        .query_drop("UPDATE t SET v = 600 WHERE id = 1")
        .expect("update");
    django
        .query_drop("INSERT INTO t VALUES (50, 50, 50, 0)")
        .expect("insert");
    django
        .query_drop("ROLLBACK TO SAVEPOINT s4")
        .expect("rolled back to the savepoint");
    django.query_drop("COMMIT").expect("commit");
    django
        .query_drop("SET transaction_allow_batching = 0")
        .expect("no batching");
    let vs: Vec<(i32, i32)> = plain
        .query("SELECT id, v FROM t WHERE id IN (1, 50) ORDER BY id")
        .expect("select");
    assert_eq!(vs, [(1, 500)], "the deferred write before the savepoint");
    // A JSON column is sent with MySQL 8's type code, by which drivers
    // (Node's mysql2) parse it; a LONGTEXT and an expression stay text.
    use mysql::consts::ColumnType as T;
    django
        .query_drop("CREATE TABLE js (id INT PRIMARY KEY, j JSON, t LONGTEXT)")
        .expect("create table");
    django
        .query_drop("INSERT INTO js VALUES (1, '{\"a\": 1}', 'x')")
        .expect("insert");
    let types = |conn: &mut Conn, sql: &str| -> Vec<T> {
        let result = conn.query_iter(sql).expect(sql);
        result
            .columns()
            .as_ref()
            .iter()
            .map(|c| c.column_type())
            .collect()
    };
    assert_eq!(
        types(&mut django, "SELECT j, t, CONCAT(j), j AS k FROM js"),
        [
            T::MYSQL_TYPE_JSON,
            T::MYSQL_TYPE_BLOB,
            T::MYSQL_TYPE_LONG_BLOB,
            T::MYSQL_TYPE_JSON
        ]
    );
    assert_eq!(
        types(&mut django, "SELECT j FROM js UNION SELECT t FROM js"),
        [T::MYSQL_TYPE_BLOB]
    );
    let mut stmt_types = {
        let stmt = django
            .prep("SELECT j FROM js WHERE id = ?")
            .expect("prepare");
        stmt.columns()
            .iter()
            .map(|c| c.column_type())
            .collect::<Vec<_>>()
    };
    stmt_types.dedup();
    assert_eq!(stmt_types, [T::MYSQL_TYPE_JSON]);
    let j: Option<String> = django
        .exec_first("SELECT j FROM js WHERE id = ?", (1,))
        .expect("execute");
    assert_eq!(j.as_deref(), Some("{\"a\": 1}"));
}

/// Jobs of the queue `queue_workers_take_each_job_once` makes.
const QUEUE_JOBS: u32 = 120;
/// Its workers, each on a connection of its own.
const QUEUE_WORKERS: u32 = 4;

/// How a queue worker takes jobs: the ids it took in one go (empty when
/// it found none free), marked done with its number in the table.
type TakeJobs = fn(&mut Conn, u32) -> Vec<u32>;

/// The job queues of `… ORDER BY id LIMIT n FOR UPDATE SKIP LOCKED`
/// (Solid Queue's, Django's `select_for_update(skip_locked=True)`), of a
/// waiting `… ORDER BY id LIMIT 1 FOR UPDATE`, and of delayed_job's
/// `UPDATE … WHERE worker IS NULL ORDER BY id LIMIT 1` under real
/// concurrency: the workers take every job exactly once, and none of
/// them waits out a lock (no 1205). Their statements claim rows in order
/// (`exec::claim`); a locking scan in their place locks the whole queue in
/// every partition at once, and two workers deadlock (1205 after
/// TransactionDeadlockDetectionTimeout, over and over).
#[test]
fn queue_workers_take_each_job_once() {
    let sandbox = Sandbox::start_configured("sql-skip-locked", 50_500, 2, &["--sql-nodes", "1"]);
    let port = sandbox.sql_port();
    let mut root = connect(port, "root", None).expect("root");
    root.query_drop("CREATE DATABASE q").expect("database");
    root.query_drop(
        "CREATE TABLE q.jobs (id INT PRIMARY KEY, state VARCHAR(8) NOT NULL, worker INT, \
         args TEXT)",
    )
    .expect("table");
    let values: Vec<String> = (1..=QUEUE_JOBS)
        .map(|id| format!("({id}, 'new', NULL, 'job {id}')"))
        .collect();
    root.query_drop(format!("INSERT INTO q.jobs VALUES {}", values.join(", ")))
        .expect("jobs");
    // A locking LIMIT without ORDER BY locks the rows it takes, not the
    // rest of the queue (nor a batch of 256 from each partition).
    let mut other = connect(port, "root", None).expect("another");
    root.query_drop("BEGIN").expect("begin");
    let took: Vec<u32> = root
        .query("SELECT id FROM q.jobs WHERE state = 'new' LIMIT 2 FOR UPDATE SKIP LOCKED")
        .expect("two jobs");
    assert_eq!(took.len(), 2);
    other.query_drop("BEGIN").expect("begin");
    let free: Option<u32> = other
        .query_first("SELECT COUNT(*) FROM q.jobs FOR UPDATE SKIP LOCKED")
        .expect("the rest");
    assert_eq!(free, Some(QUEUE_JOBS - 2), "jobs left to others");
    other.query_drop("ROLLBACK").expect("rollback");
    root.query_drop("ROLLBACK").expect("rollback");

    let skipping: TakeJobs = |conn, worker| {
        conn.query_drop("BEGIN").expect("begin");
        // A prepared statement on half the workers (the binary
        // protocol's path), text on the others.
        let take = "SELECT id FROM q.jobs WHERE state = 'new' ORDER BY id LIMIT 3 \
                    FOR UPDATE SKIP LOCKED";
        let ids: Vec<u32> = if worker % 2 == 0 {
            conn.exec(take, ())
        } else {
            conn.query(take)
        }
        .unwrap_or_else(|e| panic!("worker {worker}: {e}"));
        mark_done(conn, worker, &ids);
        ids
    };
    let waiting: TakeJobs = |conn, worker| {
        conn.query_drop("BEGIN").expect("begin");
        let ids: Vec<u32> = conn
            .query("SELECT id FROM q.jobs WHERE state = 'new' ORDER BY id LIMIT 1 FOR UPDATE")
            .unwrap_or_else(|e| panic!("worker {worker}: {e}"));
        mark_done(conn, worker, &ids);
        ids
    };
    let updating: TakeJobs = |conn, worker| {
        conn.query_drop(format!(
            "UPDATE q.jobs SET state = 'done', worker = {worker} \
             WHERE state = 'new' ORDER BY id LIMIT 1"
        ))
        .unwrap_or_else(|e| panic!("worker {worker}: {e}"));
        if conn.affected_rows() == 0 {
            return Vec::new();
        }
        // The job this worker just took: its highest done one.
        let id: Option<u32> = conn
            .query_first(format!(
                "SELECT MAX(id) FROM q.jobs WHERE state = 'done' AND worker = {worker}"
            ))
            .expect("the job taken");
        id.into_iter().collect()
    };
    for (name, take) in [
        ("skip locked", skipping),
        ("waiting", waiting),
        ("updating", updating),
    ] {
        root.query_drop("UPDATE q.jobs SET state = 'new', worker = NULL")
            .expect("the queue again");
        let by_worker = run_queue(port, take);
        let mut all: Vec<u32> = by_worker.iter().flatten().copied().collect();
        all.sort_unstable();
        let expected: Vec<u32> = (1..=QUEUE_JOBS).collect();
        assert_eq!(all, expected, "{name}: every job taken exactly once");
        // The table agrees with what each worker says it took.
        for (w, ids) in by_worker.iter().enumerate() {
            for id in ids {
                let row: Option<(String, u32)> = root
                    .query_first(format!("SELECT state, worker FROM q.jobs WHERE id = {id}"))
                    .expect("a job");
                assert_eq!(
                    row,
                    Some(("done".to_owned(), w as u32 + 1)),
                    "{name}: job {id}"
                );
            }
        }
    }
}

/// Rows of the same IN list, in different orders, updated by
/// `UPDATE … WHERE id IN (…)` and locked by `SELECT … FOR UPDATE` from
/// several connections at once: each statement locks its rows in primary
/// key order (`claim::claim_keys`), so they queue up and none waits out
/// a deadlock (1205). With the rows locked by one batch of key reads (no
/// order), most statements ended in 1205 after the lock timeout. One
/// table has a TEXT column (claimed by its other columns, then read
/// whole).
#[test]
fn in_list_locks_queue_up() {
    const ROWS: u32 = 16;
    const ROUNDS: u32 = 15;
    let sandbox = Sandbox::start_configured("sql-in-list", 51_500, 2, &["--sql-nodes", "1"]);
    let port = sandbox.sql_port();
    let mut root = connect(port, "root", None).expect("root");
    root.query_drop("CREATE DATABASE il").expect("database");
    root.query_drop("CREATE TABLE il.c (id INT PRIMARY KEY, n INT NOT NULL)")
        .expect("c");
    root.query_drop("CREATE TABLE il.t (id INT PRIMARY KEY, n INT NOT NULL, body TEXT)")
        .expect("t");
    let values: Vec<String> = (1..=ROWS).map(|id| format!("({id}, 0)")).collect();
    root.query_drop(format!("INSERT INTO il.c VALUES {}", values.join(", ")))
        .expect("rows of c");
    let values: Vec<String> = (1..=ROWS).map(|id| format!("({id}, 0, '')")).collect();
    root.query_drop(format!("INSERT INTO il.t VALUES {}", values.join(", ")))
        .expect("rows of t");
    let workers: Vec<_> = (1..=QUEUE_WORKERS)
        .map(|worker| {
            std::thread::spawn(move || {
                let mut conn = connect(port, "root", None).expect("a worker");
                // Each worker's own order of the ids (a multiplicative
                // step through them).
                let step = [3, 5, 7, 11][worker as usize - 1];
                for round in 0..ROUNDS {
                    let list: Vec<String> = (0..ROWS)
                        .map(|i| ((i * step + round) % ROWS + 1).to_string())
                        .collect();
                    let list = list.join(", ");
                    let run = |conn: &mut Conn, sql: String| {
                        conn.query_drop(&sql).unwrap_or_else(|e| {
                            panic!("worker {worker}, round {round}: {sql}: {e}")
                        });
                    };
                    run(
                        &mut conn,
                        format!("UPDATE il.c SET n = n + 1 WHERE id IN ({list})"),
                    );
                    run(
                        &mut conn,
                        format!(
                            "UPDATE il.t SET n = n + 1, body = CONCAT(body, 'x') \
                             WHERE id IN ({list})"
                        ),
                    );
                    run(&mut conn, "BEGIN".to_owned());
                    let locked: Vec<u32> = conn
                        .query(format!(
                            "SELECT id FROM il.c WHERE id IN ({list}) FOR UPDATE"
                        ))
                        .unwrap_or_else(|e| panic!("worker {worker}, round {round}: {e}"));
                    assert_eq!(locked, (1..=ROWS).collect::<Vec<_>>(), "in key order");
                    run(
                        &mut conn,
                        format!("UPDATE il.c SET n = n + 1 WHERE id IN ({list})"),
                    );
                    run(&mut conn, "COMMIT".to_owned());
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("a worker ends without an error");
    }
    let expected = QUEUE_WORKERS * ROUNDS;
    let c: Vec<(u32, u32)> = root.query("SELECT id, n FROM il.c ORDER BY id").expect("c");
    assert_eq!(
        c,
        (1..=ROWS).map(|id| (id, 2 * expected)).collect::<Vec<_>>()
    );
    let t: Vec<(u32, u32, u32)> = root
        .query("SELECT id, n, LENGTH(body) FROM il.t ORDER BY id")
        .expect("t");
    assert_eq!(
        t,
        (1..=ROWS)
            .map(|id| (id, expected, expected))
            .collect::<Vec<_>>()
    );
}

/// Marks jobs `ids` done by `worker` and commits.
fn mark_done(conn: &mut Conn, worker: u32, ids: &[u32]) {
    if !ids.is_empty() {
        let list: Vec<String> = ids.iter().map(u32::to_string).collect();
        conn.query_drop(format!(
            "UPDATE q.jobs SET state = 'done', worker = {worker} WHERE id IN ({})",
            list.join(", ")
        ))
        .unwrap_or_else(|e| panic!("worker {worker}: {e}"));
    }
    conn.query_drop("COMMIT").expect("commit");
}

/// Runs `QUEUE_WORKERS` workers taking jobs with `take` until none is
/// left; each worker's jobs.
fn run_queue(port: u16, take: TakeJobs) -> Vec<Vec<u32>> {
    let workers: Vec<_> = (1..=QUEUE_WORKERS)
        .map(|worker| {
            std::thread::spawn(move || -> Vec<u32> {
                let mut conn = connect(port, "root", None).expect("a worker");
                let mut taken = Vec::new();
                let start = Instant::now();
                loop {
                    assert!(
                        start.elapsed() < Duration::from_secs(60),
                        "worker {worker} stuck"
                    );
                    let ids = take(&mut conn, worker);
                    if ids.is_empty() {
                        // Empty while others hold the rest, or done.
                        let left: Option<u64> = conn
                            .query_first("SELECT COUNT(*) FROM q.jobs WHERE state = 'new'")
                            .expect("count");
                        if left == Some(0) {
                            return taken;
                        }
                        std::thread::sleep(Duration::from_millis(5));
                        continue;
                    }
                    taken.extend(ids);
                }
            })
        })
        .collect();
    workers
        .into_iter()
        .map(|w| w.join().expect("a worker ends without a failure"))
        .collect()
}
