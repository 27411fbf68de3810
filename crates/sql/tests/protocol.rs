//! The MySQL protocol driven by a real client (the `mysql` crate) against a
//! toy backend of the test's own: text and binary results of every type,
//! multi-statements, both authentication plugins, ping, reset, change
//! user, 16 MiB packets, `max_allowed_packet`, `max_connections`, and a
//! panicking connection that leaves the server serving.

use std::collections::HashMap;
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use mysql::prelude::Queryable;
use mysql::{Conn, OptsBuilder, Row, Value};
use sql::backend::{status, Backend, Credentials, Login, OkInfo, Prepared, ResultSink};
use sql::error::{codes, SqlError};
use sql::protocol::{self, auth, Plugin, ProtocolOptions};
use sql::value::{charset, flags, ColumnMeta, ColumnType, Date, SqlValue, Time};

/// How long a test waits for the server to notice a client went away.
const WAIT_MAX: Duration = Duration::from_secs(10);

/// What every toy connection of a server reports to the test.
#[derive(Default)]
struct Shared {
    disconnects: AtomicUsize,
    resets: AtomicUsize,
    logins: AtomicUsize,
}

/// A backend that answers a few fixed statements (see `statement`).
struct Toy {
    id: u32,
    shared: Arc<Shared>,
    user: String,
    database: Option<String>,
    in_transaction: bool,
    statements: HashMap<u32, String>,
    next_statement: u32,
    killed: bool,
}

fn column(name: &str, ty: ColumnType, flags: u16, decimals: u8) -> ColumnMeta {
    let binary = !matches!(
        ty,
        ColumnType::VarString | ColumnType::VarChar | ColumnType::Enum | ColumnType::Set
    );
    let charset = if binary {
        charset::BINARY
    } else {
        charset::UTF8MB4_GENERAL_CI
    };
    let mut column = ColumnMeta::expr(name, ty, charset, 20);
    column.flags = flags;
    column.decimals = decimals;
    column
}

/// One column of every type, and a row of values for them.
fn every_type() -> (Vec<ColumnMeta>, Vec<SqlValue>) {
    let date = Date {
        year: 2024,
        month: 2,
        day: 29,
    };
    let clock = Time {
        hour: 13,
        minute: 14,
        second: 15,
        micros: 123_456,
    };
    let unsigned = flags::UNSIGNED;
    let mut bit = column("bit", ColumnType::Bit, unsigned, 0);
    bit.length = 10;
    let columns = vec![
        column("tiny", ColumnType::Tiny, 0, 0),
        column("utiny", ColumnType::Tiny, unsigned, 0),
        column("short", ColumnType::Short, 0, 0),
        column("year", ColumnType::Year, unsigned, 0),
        column("int24", ColumnType::Int24, 0, 0),
        column("long", ColumnType::Long, 0, 0),
        column("longlong", ColumnType::LongLong, 0, 0),
        column("ulonglong", ColumnType::LongLong, unsigned, 0),
        column("float", ColumnType::Float, 0, 31),
        column("double", ColumnType::Double, 0, 31),
        column("decimal", ColumnType::NewDecimal, 0, 2),
        column("varchar", ColumnType::VarString, 0, 0),
        column("blob", ColumnType::Blob, flags::BLOB | flags::BINARY, 0),
        column("date", ColumnType::Date, 0, 0),
        column("datetime", ColumnType::DateTime, 0, 6),
        column("timestamp", ColumnType::Timestamp, 0, 0),
        column("time", ColumnType::Time, 0, 3),
        bit,
        column("enum", ColumnType::String, flags::ENUM, 0),
        column("json", ColumnType::Json, flags::BLOB, 0),
    ];
    let values = vec![
        SqlValue::Int(-5),
        SqlValue::UInt(250),
        SqlValue::Int(-300),
        SqlValue::UInt(2024),
        SqlValue::Int(-70_000),
        SqlValue::Int(-2_000_000_000),
        SqlValue::Int(i64::MIN),
        SqlValue::UInt(u64::MAX),
        SqlValue::Float(1.1),
        SqlValue::Double(0.1 + 0.2),
        SqlValue::Decimal("-12.50".to_owned()),
        SqlValue::Bytes("héllo".as_bytes().to_vec()),
        SqlValue::Bytes((0..=255).collect()),
        SqlValue::Date(date),
        SqlValue::DateTime(date, clock),
        SqlValue::DateTime(
            Date {
                year: 2001,
                month: 1,
                day: 1,
            },
            Time::default(),
        ),
        SqlValue::Time {
            negative: true,
            days: 1,
            time: Time {
                hour: 2,
                minute: 3,
                second: 4,
                micros: 500_000,
            },
        },
        SqlValue::UInt(0x201),
        SqlValue::Bytes(b"b".to_vec()),
        SqlValue::Bytes(br#"{"a": 1}"#.to_vec()),
    ];
    (columns, values)
}

/// The columns that carry `values` back (the `echo` statement).
fn echo_columns(values: &[SqlValue]) -> Vec<ColumnMeta> {
    values
        .iter()
        .enumerate()
        .map(|(i, value)| {
            let name = format!("p{i}");
            match value {
                SqlValue::Int(_) => column(&name, ColumnType::LongLong, 0, 0),
                SqlValue::UInt(_) => column(&name, ColumnType::LongLong, flags::UNSIGNED, 0),
                SqlValue::Float(_) => column(&name, ColumnType::Float, 0, 31),
                SqlValue::Double(_) => column(&name, ColumnType::Double, 0, 31),
                SqlValue::Decimal(_) => column(&name, ColumnType::NewDecimal, 0, 2),
                SqlValue::Date(_) => column(&name, ColumnType::Date, 0, 0),
                SqlValue::DateTime(..) => column(&name, ColumnType::DateTime, 0, 6),
                SqlValue::Time { .. } => column(&name, ColumnType::Time, 0, 6),
                SqlValue::Null | SqlValue::Bytes(_) => column(&name, ColumnType::Blob, 0, 0),
            }
        })
        .collect()
}

fn one_row(
    sink: &mut dyn ResultSink,
    columns: &[ColumnMeta],
    values: &[SqlValue],
    more: bool,
) -> io::Result<()> {
    sink.columns(columns)?;
    sink.row(values)?;
    sink.end_rows(&OkInfo {
        more_results: more,
        ..OkInfo::default()
    })
}

impl Toy {
    fn new(id: u32, shared: Arc<Shared>) -> Toy {
        Toy {
            id,
            shared,
            user: String::new(),
            database: None,
            in_transaction: false,
            statements: HashMap::new(),
            next_statement: 1,
            killed: false,
        }
    }

    /// Answers one statement; false when it failed.
    fn statement(
        &mut self,
        sql: &str,
        params: &[SqlValue],
        more: bool,
        sink: &mut dyn ResultSink,
    ) -> io::Result<bool> {
        let ok = |affected_rows| OkInfo {
            affected_rows,
            more_results: more,
            ..OkInfo::default()
        };
        let text = |name: &str, value: &[u8]| {
            (
                vec![column(name, ColumnType::VarString, 0, 0)],
                vec![SqlValue::Bytes(value.to_vec())],
            )
        };
        let lower = sql.trim().to_ascii_lowercase();
        let words: Vec<&str> = lower.split_whitespace().collect();
        match words.as_slice() {
            ["select", "1"] => {
                let columns = [column("1", ColumnType::LongLong, flags::NOT_NULL, 0)];
                one_row(sink, &columns, &[SqlValue::Int(1)], more)?;
            }
            ["select", "@@max_allowed_packet"] => {
                let columns = [column("@@max_allowed_packet", ColumnType::LongLong, 0, 0)];
                let value = SqlValue::Int(protocol::MAX_ALLOWED_PACKET_BYTES_DEFAULT as i64);
                one_row(sink, &columns, &[value], more)?;
            }
            ["select", "types"] => {
                let (columns, values) = every_type();
                sink.columns(&columns)?;
                sink.row(&values)?;
                sink.row(&vec![SqlValue::Null; columns.len()])?;
                sink.end_rows(&ok(0))?;
            }
            ["echo", ..] if !params.is_empty() => {
                one_row(sink, &echo_columns(params), params, more)?;
            }
            ["echo", ..] => {
                let (columns, values) = text("echo", sql.trim()[4..].trim_start().as_bytes());
                one_row(sink, &columns, &values, more)?;
            }
            ["big", n] => {
                let n: usize = n.parse().unwrap_or(0);
                let (columns, values) = text("big", &vec![b'x'; n]);
                one_row(sink, &columns, &values, more)?;
            }
            ["rows", n] => {
                let n: usize = n.parse().unwrap_or(0);
                let columns = [column("n", ColumnType::LongLong, 0, 0)];
                sink.columns(&columns)?;
                for i in 0..n {
                    sink.row(&[SqlValue::Int(i as i64)])?;
                }
                sink.end_rows(&ok(0))?;
            }
            ["user"] => {
                let database = self.database.clone().unwrap_or_default();
                let columns = [
                    column("user", ColumnType::VarString, 0, 0),
                    column("db", ColumnType::VarString, 0, 0),
                ];
                let values = [
                    SqlValue::Bytes(self.user.clone().into_bytes()),
                    SqlValue::Bytes(database.into_bytes()),
                ];
                one_row(sink, &columns, &values, more)?;
            }
            ["insert", ..] => sink.ok(&OkInfo {
                affected_rows: 3,
                last_insert_id: 7,
                info: "Records: 3  Duplicates: 0  Warnings: 0".to_owned(),
                ..ok(3)
            })?,
            ["set", ..] => sink.ok(&ok(0))?,
            ["begin"] => {
                self.in_transaction = true;
                sink.ok(&ok(0))?;
            }
            ["commit"] => {
                self.in_transaction = false;
                sink.ok(&ok(0))?;
            }
            ["kill", "me"] => {
                self.killed = true;
                sink.ok(&ok(0))?;
            }
            ["kill", id] => {
                let (columns, values) = text("killed", id.as_bytes());
                one_row(sink, &columns, &values, more)?;
            }
            ["panic"] => panic!("the toy backend was asked to panic"),
            ["error"] => {
                sink.error(&SqlError::new(
                    codes::TABLE_NOT_FOUND,
                    "Table 'db.t' doesn't exist",
                ))?;
                return Ok(false);
            }
            _ => {
                sink.error(&SqlError::syntax(format_args!("near '{sql}'")))?;
                return Ok(false);
            }
        }
        Ok(true)
    }
}

impl Backend for Toy {
    fn connection_id(&self) -> u32 {
        self.id
    }

    fn credentials(&mut self, login: &Login<'_>) -> Result<Credentials, SqlError> {
        match login.user {
            "root" => Ok(auth::credentials_for(b"")),
            "alice" => Ok(auth::credentials_for(b"secret")),
            _ => Err(SqlError::new(codes::ACCESS_DENIED, "no such user")),
        }
    }

    fn logged_in(&mut self, login: &Login<'_>) -> Result<(), SqlError> {
        if login.database == Some("nodb") {
            return Err(SqlError::new(codes::BAD_DB, "Unknown database 'nodb'"));
        }
        self.shared.logins.fetch_add(1, Ordering::Relaxed);
        self.user = login.user.to_owned();
        self.database = login.database.map(str::to_owned);
        Ok(())
    }

    fn query(&mut self, sql: &str, multi: bool, sink: &mut dyn ResultSink) -> io::Result<()> {
        let statements: Vec<&str> = if multi {
            sql.split(';').filter(|s| !s.trim().is_empty()).collect()
        } else {
            vec![sql]
        };
        for (at, statement) in statements.iter().enumerate() {
            let more = at + 1 < statements.len();
            if !self.statement(statement, &[], more, sink)? {
                break;
            }
        }
        Ok(())
    }

    fn prepare(&mut self, sql: &str) -> Result<Prepared, SqlError> {
        if sql.trim() == "error" {
            return Err(SqlError::syntax("near 'error'"));
        }
        let id = self.next_statement;
        self.next_statement += 1;
        self.statements.insert(id, sql.to_owned());
        let params = sql.matches('?').count();
        let columns = match sql.trim() {
            "select types" => every_type().0,
            s if s.starts_with("echo") => {
                vec![column("p", ColumnType::Blob, 0, 0); params]
            }
            _ => Vec::new(),
        };
        Ok(Prepared {
            id,
            params: vec![column("?", ColumnType::VarString, 0, 0); params],
            columns,
        })
    }

    fn execute(
        &mut self,
        id: u32,
        params: &[SqlValue],
        sink: &mut dyn ResultSink,
    ) -> io::Result<()> {
        match self.statements.get(&id).cloned() {
            Some(sql) => self.statement(&sql, params, false, sink).map(|_| ()),
            None => sink.error(&SqlError::new(
                codes::UNKNOWN_STMT_HANDLER,
                "unknown statement",
            )),
        }
    }

    fn close(&mut self, id: u32) {
        self.statements.remove(&id);
    }

    fn has_statement(&self, id: u32) -> bool {
        self.statements.contains_key(&id)
    }

    fn use_database(&mut self, database: &str) -> Result<(), SqlError> {
        if database == "nodb" {
            return Err(SqlError::new(codes::BAD_DB, "Unknown database 'nodb'"));
        }
        self.database = Some(database.to_owned());
        Ok(())
    }

    fn field_list(&mut self, table: &str) -> Result<Vec<ColumnMeta>, SqlError> {
        match table {
            "t" => Ok(every_type().0),
            _ => Err(SqlError::new(
                codes::TABLE_NOT_FOUND,
                format!("Table '{table}' doesn't exist"),
            )),
        }
    }

    fn reset(&mut self) {
        self.shared.resets.fetch_add(1, Ordering::Relaxed);
        self.statements.clear();
        self.in_transaction = false;
    }

    fn status_flags(&self) -> u16 {
        let in_trans = if self.in_transaction {
            status::IN_TRANS
        } else {
            0
        };
        status::AUTOCOMMIT | in_trans
    }

    fn disconnect(&mut self) {
        self.shared.disconnects.fetch_add(1, Ordering::Relaxed);
    }

    fn killed(&self) -> bool {
        self.killed
    }
}

/// A toy server on an ephemeral port of 127.0.0.1.
struct Server {
    address: SocketAddr,
    shared: Arc<Shared>,
}

fn start(options: ProtocolOptions, max_connections: u32) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    let address = listener.local_addr().expect("its address");
    let shared = Arc::new(Shared::default());
    let ids = Arc::new(AtomicUsize::new(1));
    let for_connections = Arc::clone(&shared);
    thread::spawn(move || {
        sql::serve_with(
            listener,
            max_connections,
            options,
            move |stream, peer, options| {
                let id = ids.fetch_add(1, Ordering::Relaxed) as u32;
                let mut toy = Toy::new(id, Arc::clone(&for_connections));
                let _ = protocol::serve_connection(stream, &mut toy, peer.ip(), options);
            },
        )
    });
    Server { address, shared }
}

fn toy() -> Server {
    start(ProtocolOptions::default(), sql::MAX_CONNECTIONS_DEFAULT)
}

fn opts(server: &Server, user: &str, password: Option<&str>) -> OptsBuilder {
    OptsBuilder::new()
        .ip_or_hostname(Some(server.address.ip().to_string()))
        .tcp_port(server.address.port())
        .prefer_socket(false)
        .user(Some(user))
        .pass(password)
}

fn connect(server: &Server) -> Conn {
    Conn::new(opts(server, "root", None)).expect("connect as root")
}

fn server_error(error: mysql::Error) -> (u16, String, String) {
    match error {
        mysql::Error::MySqlError(e) => (e.code, e.state, e.message),
        other => panic!("expected a server error, got {other:?}"),
    }
}

#[test]
fn select_one_over_the_text_protocol() {
    let server = toy();
    let mut conn = connect(&server);
    let value: Option<i64> = conn.query_first("select 1").unwrap();
    assert_eq!(value, Some(1));
    assert!(conn.server_version() >= (8, 0, 36));
    assert!(conn.connection_id() >= 1);
}

#[test]
fn every_type_over_the_text_protocol() {
    let server = toy();
    let mut conn = connect(&server);
    let rows: Vec<Row> = conn.query("select types").unwrap();
    assert_eq!(rows.len(), 2);
    let text: Vec<Vec<u8>> = rows[0]
        .clone()
        .unwrap()
        .into_iter()
        .map(|value| match value {
            Value::Bytes(bytes) => bytes,
            other => panic!("text protocol value {other:?}"),
        })
        .collect();
    let expected: Vec<&[u8]> = vec![
        b"-5",
        b"250",
        b"-300",
        b"2024",
        b"-70000",
        b"-2000000000",
        b"-9223372036854775808",
        b"18446744073709551615",
        b"1.1",
        b"0.30000000000000004",
        b"-12.50",
        "héllo".as_bytes(),
        &[],
        b"2024-02-29",
        b"2024-02-29 13:14:15.123456",
        b"2001-01-01 00:00:00",
        b"-26:03:04.500",
        &[0x02, 0x01],
        b"b",
        br#"{"a": 1}"#,
    ];
    for (at, (got, want)) in text.iter().zip(&expected).enumerate() {
        if at == 12 {
            assert_eq!(got, &(0..=255).collect::<Vec<u8>>());
        } else {
            assert_eq!(got, want, "column {at}");
        }
    }
    assert!(rows[1].clone().unwrap().iter().all(|v| *v == Value::NULL));
    // The column definitions arrived as sent.
    let columns = rows[0].columns_ref();
    assert_eq!(columns[1].name_str(), "utiny");
    assert!(columns[1]
        .flags()
        .contains(mysql::consts::ColumnFlags::UNSIGNED_FLAG));
    assert_eq!(columns[14].decimals(), 6);
    assert_eq!(
        columns[0].column_type(),
        mysql::consts::ColumnType::MYSQL_TYPE_TINY
    );
}

#[test]
fn every_type_over_the_binary_protocol() {
    let server = toy();
    let mut conn = connect(&server);
    let statement = conn.prep("select types").unwrap();
    assert_eq!(statement.num_columns(), 20);
    let rows: Vec<Row> = conn.exec(&statement, ()).unwrap();
    let values = rows[0].clone().unwrap();
    let expected = vec![
        Value::Int(-5),
        Value::Int(250),
        Value::Int(-300),
        Value::Int(2024),
        Value::Int(-70_000),
        Value::Int(-2_000_000_000),
        Value::Int(i64::MIN),
        Value::UInt(u64::MAX),
        Value::Float(1.1),
        Value::Double(0.1 + 0.2),
        Value::Bytes(b"-12.50".to_vec()),
        Value::Bytes("héllo".as_bytes().to_vec()),
        Value::Bytes((0..=255).collect()),
        Value::Date(2024, 2, 29, 0, 0, 0, 0),
        Value::Date(2024, 2, 29, 13, 14, 15, 123_456),
        Value::Date(2001, 1, 1, 0, 0, 0, 0),
        Value::Time(true, 1, 2, 3, 4, 500_000),
        Value::Bytes(vec![0x02, 0x01]),
        Value::Bytes(b"b".to_vec()),
        Value::Bytes(br#"{"a": 1}"#.to_vec()),
    ];
    assert_eq!(values, expected);
    assert!(rows[1].clone().unwrap().iter().all(|v| *v == Value::NULL));
}

#[test]
fn parameters_of_every_type_round_trip_and_their_types_are_remembered() {
    let server = toy();
    let mut conn = connect(&server);
    let statement = conn.prep("echo ?, ?, ?, ?, ?, ?, ?, ?, ?").unwrap();
    assert_eq!(statement.num_params(), 9);
    let params = vec![
        Value::Int(-42),
        Value::UInt(u64::MAX),
        Value::Float(2.5),
        Value::Double(-1e300),
        Value::Bytes(b"text \x00 with nul".to_vec()),
        Value::NULL,
        Value::Date(2020, 12, 31, 23, 59, 58, 999_999),
        Value::Time(false, 3, 4, 5, 6, 7),
        Value::Date(1999, 1, 2, 0, 0, 0, 0),
    ];
    let row: Row = conn
        .exec_first(&statement, params.clone())
        .unwrap()
        .unwrap();
    assert_eq!(row.unwrap(), params);
    // Executing again sends the types again (the mysql crate always
    // binds); a second run must not be confused by remembered ones.
    let row: Row = conn
        .exec_first(&statement, params.clone())
        .unwrap()
        .unwrap();
    assert_eq!(row.unwrap(), params);
}

#[test]
fn long_data_and_packets_over_16_mib_both_ways() {
    let server = toy();
    let mut conn = connect(&server);
    const LEN: usize = (16 << 20) + 5;
    // A result row longer than one frame.
    let big: Option<Vec<u8>> = conn.query_first(format!("big {LEN}")).unwrap();
    assert_eq!(big.map(|b| b.len()), Some(LEN));
    // A statement longer than one frame.
    let text = "y".repeat(LEN);
    let echoed: Option<Vec<u8>> = conn.query_first(format!("echo {text}")).unwrap();
    assert_eq!(echoed.map(|b| b.len()), Some(LEN));
    // A parameter over 16 MiB: the client sends it as long data.
    let statement = conn.prep("echo ?").unwrap();
    let value = vec![7u8; LEN];
    let row: Row = conn
        .exec_first(&statement, (value.clone(),))
        .unwrap()
        .unwrap();
    assert_eq!(row.unwrap(), vec![Value::Bytes(value)]);
    // The long data was forgotten after that execute.
    let row: Row = conn
        .exec_first(&statement, (b"small".to_vec(),))
        .unwrap()
        .unwrap();
    assert_eq!(row.unwrap(), vec![Value::Bytes(b"small".to_vec())]);
}

#[test]
fn many_rows_stream_in_order() {
    let server = toy();
    let mut conn = connect(&server);
    let rows: Vec<i64> = conn.query("rows 100000").unwrap();
    assert_eq!(rows.len(), 100_000);
    assert!(rows.iter().enumerate().all(|(i, &n)| n == i as i64));
}

#[test]
fn multi_statements_return_each_result_and_stop_at_an_error() {
    let server = toy();
    let mut conn = connect(&server);
    let mut result = conn
        .query_iter("select 1; insert; echo hi; error; select 1")
        .unwrap();
    let mut sets = Vec::new();
    while let Some(set) = result.iter() {
        let affected = set.affected_rows();
        let rows: Vec<Row> = set.collect::<Result<_, _>>().unwrap();
        sets.push((rows.len(), affected));
        if sets.len() == 3 {
            break;
        }
    }
    assert_eq!(sets, vec![(1, 0), (0, 3), (1, 0)]);
    let next = result.iter().map(|mut set| set.next());
    match next {
        Some(Some(Err(error))) => assert_eq!(server_error(error).0, codes::TABLE_NOT_FOUND),
        other => panic!("expected the error of the fourth statement, got {other:?}"),
    }
    drop(result);
    // The connection is usable after the error ended the run.
    let value: Option<i64> = conn.query_first("select 1").unwrap();
    assert_eq!(value, Some(1));
}

#[test]
fn ok_packets_carry_affected_rows_insert_id_and_info() {
    let server = toy();
    let mut conn = connect(&server);
    conn.query_drop("insert").unwrap();
    assert_eq!(conn.affected_rows(), 3);
    assert_eq!(conn.last_insert_id(), 7);
    assert_eq!(conn.info_str(), "Records: 3  Duplicates: 0  Warnings: 0");
}

#[test]
fn errors_carry_code_state_and_message() {
    let server = toy();
    let mut conn = connect(&server);
    let error = conn.query_drop("error").unwrap_err();
    let (code, state, message) = server_error(error);
    assert_eq!((code, state.as_str()), (1146, "42S02"));
    assert_eq!(message, "Table 'db.t' doesn't exist");
    let error = conn.prep("error").unwrap_err();
    assert_eq!(server_error(error).0, codes::PARSE);
    // The connection goes on.
    assert_eq!(conn.query_first::<i64, _>("select 1").unwrap(), Some(1));
}

#[test]
fn native_password_right_and_wrong() {
    let server = toy();
    let mut conn = Conn::new(opts(&server, "alice", Some("secret"))).expect("right password");
    let user: Option<(String, String)> = conn.query_first("user").unwrap();
    assert_eq!(user, Some(("alice".to_owned(), String::new())));
    let error = Conn::new(opts(&server, "alice", Some("wrong"))).unwrap_err();
    let (code, state, message) = server_error(error);
    assert_eq!((code, state.as_str()), (1045, "28000"));
    assert_eq!(
        message,
        "Access denied for user 'alice'@'127.0.0.1' (using password: YES)"
    );
    let error = Conn::new(opts(&server, "alice", None)).unwrap_err();
    let message = server_error(error).2;
    assert!(message.ends_with("(using password: NO)"), "{message}");
    let error = Conn::new(opts(&server, "mallory", Some("x"))).unwrap_err();
    assert_eq!(server_error(error).0, codes::ACCESS_DENIED);
    let error = Conn::new(opts(&server, "root", Some("x"))).unwrap_err();
    assert_eq!(server_error(error).0, codes::ACCESS_DENIED);
}

#[test]
fn caching_sha2_fast_auth_right_and_wrong() {
    let options = ProtocolOptions {
        auth_plugin: Plugin::CachingSha2,
        ..ProtocolOptions::default()
    };
    let server = start(options, 10);
    let mut conn = Conn::new(opts(&server, "alice", Some("secret"))).expect("right password");
    assert_eq!(conn.query_first::<i64, _>("select 1").unwrap(), Some(1));
    let error = Conn::new(opts(&server, "alice", Some("wrong"))).unwrap_err();
    assert_eq!(server_error(error).0, codes::ACCESS_DENIED);
    let mut root = Conn::new(opts(&server, "root", None)).expect("root without password");
    assert_eq!(root.query_first::<i64, _>("select 1").unwrap(), Some(1));
}

#[test]
fn connect_with_a_database_and_change_it() {
    let server = toy();
    let mut conn = Conn::new(opts(&server, "root", None).db_name(Some("shop"))).unwrap();
    let user: Option<(String, String)> = conn.query_first("user").unwrap();
    assert_eq!(user, Some(("root".to_owned(), "shop".to_owned())));
    conn.select_db("other").unwrap();
    let user: Option<(String, String)> = conn.query_first("user").unwrap();
    assert_eq!(user.map(|u| u.1), Some("other".to_owned()));
    let error = conn.select_db("nodb").unwrap_err();
    assert_eq!(server_error(error).0, codes::BAD_DB);
    let error = Conn::new(opts(&server, "root", None).db_name(Some("nodb"))).unwrap_err();
    assert_eq!(server_error(error).0, codes::BAD_DB);
}

#[test]
fn ping_reset_and_change_user() {
    let server = toy();
    let mut conn = connect(&server);
    conn.ping().unwrap();
    let statement = conn.prep("echo ?").unwrap();
    conn.reset().unwrap();
    assert_eq!(server.shared.resets.load(Ordering::Relaxed), 1);
    // The reset dropped the statement on both sides.
    let row: Row = conn.exec_first("echo ?", (1,)).unwrap().unwrap();
    assert_eq!(row.unwrap(), vec![Value::Int(1)]);
    drop(statement);
    let change = mysql::ChangeUserOpts::default()
        .with_user(Some("alice".to_owned()))
        .with_pass(Some("secret".to_owned()))
        .with_db_name(Some("shop".to_owned()));
    conn.change_user(change).unwrap();
    let user: Option<(String, String)> = conn.query_first("user").unwrap();
    assert_eq!(user, Some(("alice".to_owned(), "shop".to_owned())));
    let wrong = mysql::ChangeUserOpts::default()
        .with_user(Some("alice".to_owned()))
        .with_pass(Some("nope".to_owned()));
    let error = conn.change_user(wrong).unwrap_err();
    assert_eq!(server_error(error).0, codes::ACCESS_DENIED);
}

#[test]
fn a_statement_closed_is_unknown_afterwards() {
    let server = toy();
    let mut conn = connect(&server);
    let statement = conn.prep("insert ?").unwrap();
    conn.exec_drop(&statement, (5,)).unwrap();
    assert_eq!(conn.affected_rows(), 3);
    conn.close(statement.clone()).unwrap();
    let error = conn.exec_drop(&statement, (5,)).unwrap_err();
    let (code, _, message) = server_error(error);
    assert_eq!(code, codes::UNKNOWN_STMT_HANDLER);
    assert!(message.contains("mysqld_stmt_execute"), "{message}");
}

#[test]
fn a_packet_over_max_allowed_packet_is_refused_and_its_connection_closed() {
    let options = ProtocolOptions {
        max_allowed_packet_bytes: 1 << 20,
        ..ProtocolOptions::default()
    };
    let server = start(options, 10);
    let mut conn = connect(&server);
    let error = conn
        .query_drop(format!("echo {}", "z".repeat(2 << 20)))
        .unwrap_err();
    let text = format!("{error:?}");
    eprintln!("max_allowed_packet error: {text}");
    assert!(
        text.contains("1153") || text.contains("max_allowed_packet") || text.contains("Io"),
        "{text}"
    );
    assert!(conn.ping().is_err(), "the connection was closed");
    // Others are served.
    let mut other = connect(&server);
    assert_eq!(other.query_first::<i64, _>("select 1").unwrap(), Some(1));
}

#[test]
fn over_max_connections_a_client_reads_1040() {
    let server = start(ProtocolOptions::default(), 2);
    let first = connect(&server);
    let second = connect(&server);
    let error = Conn::new(opts(&server, "root", None)).unwrap_err();
    let (code, _, message) = server_error(error);
    assert_eq!(
        (code, message.as_str()),
        (codes::CON_COUNT, "Too many connections")
    );
    drop(first);
    // The slot comes back once the server saw the client go; the client
    // retries until then (bounded).
    let deadline = Instant::now() + WAIT_MAX;
    let mut conn = loop {
        match Conn::new(opts(&server, "root", None)) {
            Ok(conn) => break conn,
            Err(error) if Instant::now() < deadline => drop(error),
            Err(error) => panic!("no slot came back: {error}"),
        }
    };
    assert_eq!(conn.query_first::<i64, _>("select 1").unwrap(), Some(1));
    drop(second);
}

#[test]
fn a_panicking_connection_closes_alone_and_disconnect_is_always_called() {
    let server = toy();
    let mut bystander = connect(&server);
    let mut victim = connect(&server);
    assert!(victim.query_drop("panic").is_err());
    assert_eq!(
        bystander.query_first::<i64, _>("select 1").unwrap(),
        Some(1)
    );
    let mut killed = connect(&server);
    killed.query_drop("kill me").unwrap();
    assert!(
        killed.ping().is_err(),
        "a killed connection is closed after its statement"
    );
    drop(bystander);
    // Every connection that ended told its backend, the panicking one
    // through unwinding (its backend was dropped, not disconnected) aside.
    let raw = TcpStream::connect(server.address).unwrap();
    drop(raw);
    let deadline = Instant::now() + WAIT_MAX;
    while server.shared.disconnects.load(Ordering::Relaxed) < 3 && Instant::now() < deadline {
        thread::yield_now();
    }
    assert_eq!(server.shared.disconnects.load(Ordering::Relaxed), 3);
}

#[test]
fn a_thousand_idle_connections_are_served() {
    const CONNECTIONS: usize = 1_000;
    let server = toy();
    let mut connections: Vec<Conn> = (0..CONNECTIONS).map(|_| connect(&server)).collect();
    let first: Option<i64> = connections[0].query_first("select 1").unwrap();
    let last: Option<i64> = connections[CONNECTIONS - 1]
        .query_first("select 1")
        .unwrap();
    assert_eq!((first, last), (Some(1), Some(1)));
    for conn in &mut connections {
        conn.ping().unwrap();
    }
    assert_eq!(server.shared.logins.load(Ordering::Relaxed), CONNECTIONS);
}
