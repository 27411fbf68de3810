//! One client connection: the handshake (v10), authentication, and the
//! command loop. Every answer of a command is buffered and written with
//! one `write` when the command is done.
//!
//! A packet that does not parse gets ERR 1835 and the connection goes on
//! (the framing is intact); a packet that breaks the framing (too long,
//! out of sequence) gets its ERR and the connection closes.

use std::io::{self, Read, Write};
use std::net::IpAddr;
use std::sync::atomic::Ordering;

use crate::backend::{status, Backend, Login, OkInfo, ResultSink};
use crate::error::{codes, SqlError};
use crate::value::{charset, ColumnMeta, SqlValue};

use super::auth::{self, Plugin, NONCE_BYTES};
use super::binary::{self, ParamError, ParamType};
use super::packet::{
    put_lenenc_bytes, put_lenenc_int, put_nul_bytes, put_u16, put_u32, Cursor, Malformed, PacketIo,
    ReadError,
};
use super::text;
use super::{ProtocolOptions, ERROR_MESSAGE_BYTES_MAX};

/// Capability flags (`CLIENT_*`).
#[allow(missing_docs)]
pub mod caps {
    pub const LONG_PASSWORD: u32 = 0x1;
    pub const FOUND_ROWS: u32 = 0x2;
    pub const LONG_FLAG: u32 = 0x4;
    pub const CONNECT_WITH_DB: u32 = 0x8;
    pub const LOCAL_FILES: u32 = 0x80;
    pub const PROTOCOL_41: u32 = 0x200;
    pub const INTERACTIVE: u32 = 0x400;
    pub const SSL: u32 = 0x800;
    pub const TRANSACTIONS: u32 = 0x2000;
    pub const SECURE_CONNECTION: u32 = 0x8000;
    pub const MULTI_STATEMENTS: u32 = 0x1_0000;
    pub const MULTI_RESULTS: u32 = 0x2_0000;
    pub const PS_MULTI_RESULTS: u32 = 0x4_0000;
    pub const PLUGIN_AUTH: u32 = 0x8_0000;
    pub const CONNECT_ATTRS: u32 = 0x10_0000;
    pub const PLUGIN_AUTH_LENENC_CLIENT_DATA: u32 = 0x20_0000;
    pub const SESSION_TRACK: u32 = 0x80_0000;
    pub const DEPRECATE_EOF: u32 = 0x100_0000;
}

/// MariaDB's extended capability flags (`MARIADB_CLIENT_*`): the upper half
/// of a 64-bit capability set, exchanged in bytes MySQL leaves reserved
/// when the server does not set `CLIENT_MYSQL` (`CLIENT_LONG_PASSWORD`).
#[allow(missing_docs)]
pub mod mariadb_caps {
    /// `MARIADB_CLIENT_CACHE_METADATA` (1 << 36): the column count of a
    /// result set carries a "metadata follows" byte, and an execute whose
    /// columns are those the client last saw for the statement sends none.
    pub const CACHE_METADATA: u32 = 1 << 4;
}

/// What the server offers; a connection uses what the client also sets.
///
/// Not `CLIENT_LONG_PASSWORD`: MariaDB reads that bit as `CLIENT_MYSQL`,
/// and a client (libmariadb: sysbench, the `mysql` CLI, mysqltest;
/// MariaDB's Connector/J) reads [`SERVER_MARIADB_CAPS`] only from a server
/// without it, as from MariaDB itself, which has not set it since 10.2.
/// Every client sets it and none needs the server to.
///
/// `CLIENT_SESSION_TRACK`, as MySQL 8 and MariaDB offer it: an OK packet's
/// info is `string<lenenc>` (as every server writes it) only for a client
/// that set it, and such a client (MariaDB Connector/J) follows the
/// current database and tracked variables from the changes OK packets
/// carry ([`crate::backend::StateChange`]).
pub const SERVER_CAPS: u32 = caps::FOUND_ROWS
    | caps::LONG_FLAG
    | caps::CONNECT_WITH_DB
    | caps::LOCAL_FILES
    | caps::PROTOCOL_41
    | caps::INTERACTIVE
    | caps::TRANSACTIONS
    | caps::SECURE_CONNECTION
    | caps::MULTI_STATEMENTS
    | caps::MULTI_RESULTS
    | caps::PS_MULTI_RESULTS
    | caps::PLUGIN_AUTH
    | caps::PLUGIN_AUTH_LENENC_CLIENT_DATA
    | caps::CONNECT_ATTRS
    | caps::SESSION_TRACK
    | caps::DEPRECATE_EOF;

/// The MariaDB extended capabilities the server offers (see [`mariadb_caps`]).
pub const SERVER_MARIADB_CAPS: u32 = mariadb_caps::CACHE_METADATA;

/// The handshake's protocol version.
const PROTOCOL_VERSION: u8 = 10;
/// The character set the handshake names: `utf8mb4_general_ci`, which every
/// client knows (MySQL 8's 255 is unknown to MariaDB's).
const HANDSHAKE_CHARSET: u8 = 45;
/// The length of an SSL request: a handshake response cut after its
/// fixed part.
const SSL_REQUEST_BYTES: usize = 32;
/// Prepared statements one connection may hold (MySQL's
/// `max_prepared_stmt_count` default, which MySQL counts per server).
pub const STATEMENTS_MAX: usize = 16_382;
/// Parameters or columns of one prepared statement (PREPARE_OK's u16).
pub const STATEMENT_FIELDS_MAX: usize = u16::MAX as usize;

/// Command bytes.
mod command {
    pub const QUIT: u8 = 0x01;
    pub const INIT_DB: u8 = 0x02;
    pub const QUERY: u8 = 0x03;
    pub const FIELD_LIST: u8 = 0x04;
    pub const STATISTICS: u8 = 0x09;
    pub const PROCESS_KILL: u8 = 0x0c;
    pub const PING: u8 = 0x0e;
    pub const CHANGE_USER: u8 = 0x11;
    pub const STMT_PREPARE: u8 = 0x16;
    pub const STMT_EXECUTE: u8 = 0x17;
    pub const STMT_SEND_LONG_DATA: u8 = 0x18;
    pub const STMT_CLOSE: u8 = 0x19;
    pub const STMT_RESET: u8 = 0x1a;
    pub const SET_OPTION: u8 = 0x1b;
    pub const RESET_CONNECTION: u8 = 0x1f;
}

/// Packet headers.
const OK_HEADER: u8 = 0x00;
const EOF_HEADER: u8 = 0xfe;
const ERR_HEADER: u8 = 0xff;
/// AuthMoreData, and its "fast authentication succeeded" byte.
const AUTH_MORE_DATA: u8 = 0x01;
const FAST_AUTH_SUCCESS: u8 = 0x03;
/// COM_SET_OPTION's values.
const MULTI_STATEMENTS_ON: u16 = 0;
const MULTI_STATEMENTS_OFF: u16 = 1;

/// What the protocol keeps of a prepared statement.
#[derive(Debug)]
struct Statement {
    /// Its number of parameters.
    params: usize,
    /// Parameter types of the last execute that bound them.
    types: Option<Vec<ParamType>>,
    /// `COM_STMT_SEND_LONG_DATA` per parameter since the last execute.
    long_data: Vec<Option<Vec<u8>>>,
    /// Their bytes together, bounded by `max_allowed_packet`.
    long_data_bytes: usize,
    /// An error of a long-data command, answered by the next execute.
    long_data_error: Option<SqlError>,
    /// The result columns the client last received for the statement (in
    /// the prepare's answer or an execute's): with `CACHE_METADATA`, an
    /// execute whose columns are these sends none.
    described: Vec<ColumnMeta>,
}

impl Statement {
    fn new(params: usize, described: Vec<ColumnMeta>) -> Statement {
        Statement {
            params,
            types: None,
            long_data: vec![None; params],
            long_data_bytes: 0,
            long_data_error: None,
            described,
        }
    }

    fn clear_long_data(&mut self) {
        self.long_data.iter_mut().for_each(|data| *data = None);
        self.long_data_bytes = 0;
        self.long_data_error = None;
    }
}

/// Whether the connection goes on after a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flow {
    Continue,
    Close,
}

/// What a connection keeps between commands (see [`super::Wire`]).
pub struct Wire<S: Read + Write> {
    io: PacketIo<S>,
    peer: IpAddr,
    nonce: [u8; NONCE_BYTES],
    /// The capabilities both sides set.
    caps: u32,
    /// The MariaDB extended capabilities both sides set ([`mariadb_caps`]).
    mariadb_caps: u32,
    statements: foldhash::HashMap<u32, Statement>,
    /// The statement of the execute being answered (its `described`).
    executing: Option<u32>,
    /// The deferred command's rows are binary (`COM_STMT_EXECUTE`), not
    /// text (`COM_QUERY`).
    deferred_binary: bool,
}

impl<S: Read + Write> Wire<S> {
    /// See [`super::Wire::new`].
    pub fn new(stream: S, peer: IpAddr, options: &ProtocolOptions) -> io::Result<Wire<S>> {
        Ok(Wire {
            io: PacketIo::new(stream, options.max_allowed_packet_bytes),
            peer,
            nonce: auth::nonce()?,
            caps: 0,
            mariadb_caps: 0,
            statements: Default::default(),
            executing: None,
            deferred_binary: true,
        })
    }

    /// See [`super::Wire::login`].
    pub fn login(
        &mut self,
        backend: &mut dyn Backend,
        options: &ProtocolOptions,
    ) -> io::Result<bool> {
        Connection {
            w: self,
            backend,
            options,
        }
        .handshake()
    }

    /// See [`super::Wire::command`].
    pub fn command(
        &mut self,
        backend: &mut dyn Backend,
        options: &ProtocolOptions,
    ) -> io::Result<bool> {
        let mut connection = Connection {
            w: self,
            backend,
            options,
        };
        Ok(connection.one_command()? == Flow::Continue)
    }

    /// See [`super::Wire::begin_command`].
    pub fn begin_command(
        &mut self,
        backend: &mut dyn Backend,
        options: &ProtocolOptions,
    ) -> io::Result<super::Begun> {
        self.io.reset_seq();
        let latin1 = backend.latin1_client();
        let id = match self.io.peek_packet()? {
            Some([command::STMT_EXECUTE, a, b, c, d, ..]) => {
                Some(u32::from_le_bytes([*a, *b, *c, *d]))
            }
            // Text: only UTF-8 that reads as a SELECT (a latin1 client's
            // text, or one with binary literals, goes the usual way).
            Some([command::QUERY, text @ ..]) if !latin1 => match std::str::from_utf8(text) {
                Ok(sql) if starts_with_select(sql) && backend.may_defer_query(sql) => None,
                _ => return Ok(super::Begun::NotTaken),
            },
            _ => return Ok(super::Begun::NotTaken),
        };
        if id.is_some_and(|id| !backend.may_defer(id)) {
            return Ok(super::Begun::NotTaken);
        }
        let packet = match self.io.read_packet() {
            Ok(packet) => packet,
            Err(ReadError::Io(error)) => return Err(error),
            // The packet was checked whole and in sequence.
            Err(other) => unreachable!("a peeked packet failed to read: {other:?}"),
        };
        self.deferred_binary = id.is_some();
        let mut connection = Connection {
            w: self,
            backend,
            options,
        };
        let deferred = match id {
            Some(_) => connection.execute_with(&packet[1..], true)?,
            None => {
                // Checked above, on the same bytes.
                let sql = std::str::from_utf8(&packet[1..]).unwrap_or_default();
                connection
                    .answer_with(false, |backend, sink| backend.query_deferrable(sql, sink))?
            }
        };
        Ok(if deferred {
            super::Begun::Deferred
        } else {
            super::Begun::Answered
        })
    }

    /// See [`super::Wire::finish_command`].
    pub fn finish_command(
        &mut self,
        backend: &mut dyn Backend,
        options: &ProtocolOptions,
        begun: super::Begun,
    ) -> io::Result<bool> {
        let mut connection = Connection {
            w: self,
            backend,
            options,
        };
        if begun == super::Begun::Deferred {
            let binary = connection.w.deferred_binary;
            connection.answer_with(binary, |backend, sink| {
                backend.finish_deferred(sink).map(|()| false)
            })?;
        }
        Ok(connection.end_command(Flow::Continue)? == Flow::Continue)
    }

    /// See [`super::Wire::has_buffered_input`].
    pub fn has_buffered_input(&self) -> bool {
        self.io.has_buffered_input()
    }

    /// See [`super::Wire::drained`].
    pub fn drained(&self) -> bool {
        self.io.drained()
    }

    /// The stream.
    pub fn stream(&self) -> &S {
        self.io.stream_ref()
    }
}

/// Whether `sql` begins with the keyword SELECT (after blanks): the cheap
/// test before a text command is parsed for a thread-pool batch.
fn starts_with_select(sql: &str) -> bool {
    let text = sql.trim_start().as_bytes();
    text.len() > 6 && text[..6].eq_ignore_ascii_case(b"select") && !text[6].is_ascii_alphanumeric()
}

struct Connection<'a, S: Read + Write> {
    w: &'a mut Wire<S>,
    backend: &'a mut dyn Backend,
    options: &'a ProtocolOptions,
}

/// See [`super::serve_connection`].
pub fn serve<S: Read + Write>(
    stream: S,
    backend: &mut dyn Backend,
    peer: IpAddr,
    options: &ProtocolOptions,
) -> io::Result<()> {
    let result = run(stream, &mut *backend, peer, options);
    backend.disconnect();
    result
}

fn run<S: Read + Write>(
    stream: S,
    backend: &mut dyn Backend,
    peer: IpAddr,
    options: &ProtocolOptions,
) -> io::Result<()> {
    let mut wire = Wire::new(stream, peer, options)?;
    let mut connection = Connection {
        w: &mut wire,
        backend,
        options,
    };
    if connection.handshake()? {
        connection.commands()?;
    }
    Ok(())
}

/// See [`super::refuse_connection`].
pub fn refuse<S: Read + Write>(
    stream: S,
    error: &SqlError,
    options: &ProtocolOptions,
) -> io::Result<()> {
    let mut io = PacketIo::new(stream, options.max_allowed_packet_bytes);
    let nonce = auth::nonce()?;
    write_greeting(&mut io, options, 0, &nonce, status::AUTOCOMMIT)?;
    io.flush()?;
    match io.read_packet() {
        Ok(_) | Err(ReadError::TooLarge | ReadError::OutOfOrder) => {}
        Err(ReadError::Closed) => return Ok(()),
        Err(ReadError::Io(e)) => return Err(e),
    }
    write_err(&mut io, error)?;
    io.flush()
}

/// A login as the handshake response or `COM_CHANGE_USER` carries it.
struct LoginRequest<'p> {
    user: String,
    database: Option<String>,
    response: &'p [u8],
    /// None: the client did not name one.
    plugin: Option<&'p [u8]>,
    /// The collation id the client named (0: none).
    collation: u8,
}

impl<'a, S: Read + Write> Connection<'a, S> {
    /// Greets, reads the login and authenticates; true when the client is
    /// logged in.
    fn handshake(&mut self) -> io::Result<bool> {
        let id = self.backend.connection_id();
        let status = self.backend.status_flags();
        write_greeting(&mut self.w.io, self.options, id, &self.w.nonce, status)?;
        self.w.io.flush()?;
        let Some(packet) = self.read_or_answer()? else {
            return Ok(false);
        };
        let request = match parse_handshake_response(&packet) {
            Ok((client_caps, client_mariadb_caps, request)) => {
                self.w.caps = client_caps & SERVER_CAPS;
                self.w.mariadb_caps = client_mariadb_caps & SERVER_MARIADB_CAPS;
                request
            }
            Err(error) => {
                self.send_error(&error)?;
                return Ok(false);
            }
        };
        self.login(&request)
    }

    /// Authenticates `request` and tells the backend; sends OK, or the
    /// error (and the connection is to close).
    fn login(&mut self, request: &LoginRequest<'_>) -> io::Result<bool> {
        let login = Login {
            user: &request.user,
            host: self.w.peer,
            database: request.database.as_deref(),
            found_rows: self.w.caps & caps::FOUND_ROWS != 0,
            interactive: self.w.caps & caps::INTERACTIVE != 0,
        };
        if !self.authenticate(&login, request.response, request.plugin)? {
            return Ok(false);
        }
        if let Err(error) = self.backend.logged_in(&login) {
            self.send_error(&error)?;
            return Ok(false);
        }
        if request.collation != 0 {
            self.backend.client_collation(request.collation);
        }
        let status = self.backend.status_flags();
        write_ok(
            &mut self.w.io,
            OK_HEADER,
            &OkInfo::default(),
            status,
            self.w.caps,
        )?;
        self.w.io.flush()?;
        Ok(true)
    }

    /// Checks the client's answer to the nonce with the plugin it chose
    /// (switching it to `mysql_native_password` when it chose one Skarv
    /// does not speak). Sends the refusal itself.
    fn authenticate(
        &mut self,
        login: &Login<'_>,
        response: &[u8],
        plugin: Option<&[u8]>,
    ) -> io::Result<bool> {
        let mut response = response.to_vec();
        let plugin_auth = self.w.caps & caps::PLUGIN_AUTH != 0;
        let announced = self.options.auth_plugin;
        let plugin = match plugin {
            _ if !plugin_auth => Plugin::Native,
            None | Some(b"") => announced,
            Some(name) => {
                // A client that answered with another plugin than the one
                // announced had no nonce for it (libmysql and MariaDB's
                // client send an empty answer then and wait for a switch):
                // switch it to its own plugin, or to native for one Skarv
                // does not speak.
                let plugin = Plugin::from_name(name).unwrap_or(Plugin::Native);
                if Plugin::from_name(name) != Some(announced) {
                    let Some(answer) = self.switch_to(plugin)? else {
                        return Ok(false);
                    };
                    response = answer;
                }
                plugin
            }
        };
        // An empty password's answer: nothing, or one NUL (libmysql's
        // `caching_sha2_password` client sends that).
        if response == [0] {
            response.clear();
        }
        let credentials = match self.backend.credentials(login) {
            Ok(credentials) => Some(credentials),
            Err(error) if error.code == codes::ACCESS_DENIED => None,
            Err(error) => {
                self.send_error(&error)?;
                return Ok(false);
            }
        };
        let passed = credentials.is_some_and(|credentials| {
            auth::verify(&credentials, plugin, &self.w.nonce, &response)
        });
        if !passed {
            let error = access_denied(login.user, self.w.peer, !response.is_empty());
            self.send_error(&error)?;
            return Ok(false);
        }
        if plugin == Plugin::CachingSha2 && !response.is_empty() {
            self.w
                .io
                .write_packet(&[AUTH_MORE_DATA, FAST_AUTH_SUCCESS])?;
        }
        Ok(true)
    }

    /// AuthSwitchRequest to `plugin` with the same nonce; the client's
    /// answer, or None when it went away.
    fn switch_to(&mut self, plugin: Plugin) -> io::Result<Option<Vec<u8>>> {
        let at = self.w.io.begin();
        let out = self.w.io.out();
        out.push(EOF_HEADER);
        put_nul_bytes(out, plugin.name().as_bytes());
        out.extend_from_slice(&self.w.nonce);
        out.push(0);
        self.w.io.end(at)?;
        self.w.io.flush()?;
        self.read_or_answer()
    }

    /// Reads a packet; a packet that breaks the framing is answered (and
    /// None returned: the connection is to close), as is a closed stream.
    fn read_or_answer(&mut self) -> io::Result<Option<Vec<u8>>> {
        match self.w.io.read_packet() {
            Ok(packet) => Ok(Some(packet)),
            Err(ReadError::Closed) => Ok(None),
            Err(ReadError::TooLarge) => {
                let error = SqlError::new(
                    codes::NET_PACKET_TOO_LARGE,
                    "Got a packet bigger than 'max_allowed_packet' bytes",
                );
                self.send_error(&error)?;
                Ok(None)
            }
            Err(ReadError::OutOfOrder) => {
                let error = SqlError::new(NET_PACKETS_OUT_OF_ORDER, "Got packets out of order");
                self.send_error(&error)?;
                Ok(None)
            }
            Err(ReadError::Io(error)) if error.kind() == io::ErrorKind::UnexpectedEof => Ok(None),
            Err(ReadError::Io(error)) => Err(error),
        }
    }

    fn send_error(&mut self, error: &SqlError) -> io::Result<()> {
        write_err(&mut self.w.io, error)?;
        self.w.io.flush()
    }

    /// The command loop: one command, its answer written at once, until
    /// the client quits, the stream ends or the backend was killed.
    fn commands(&mut self) -> io::Result<()> {
        while self.one_command()? == Flow::Continue {}
        Ok(())
    }

    /// Reads one command and writes its whole answer; Close when the
    /// client quit, the stream ended or the backend was killed.
    fn one_command(&mut self) -> io::Result<Flow> {
        self.w.io.reset_seq();
        let Some(packet) = self.read_or_answer()? else {
            return Ok(Flow::Close);
        };
        let flow = self.command(&packet)?;
        self.end_command(flow)
    }

    /// Writes a command's answer out; Close when the connection is over.
    fn end_command(&mut self, flow: Flow) -> io::Result<Flow> {
        self.w.io.flush()?;
        self.w.io.shrink_idle();
        if flow == Flow::Close || self.backend.killed() {
            return Ok(Flow::Close);
        }
        Ok(Flow::Continue)
    }

    fn command(&mut self, packet: &[u8]) -> io::Result<Flow> {
        let Some((&command, payload)) = packet.split_first() else {
            write_err(&mut self.w.io, &malformed())?;
            return Ok(Flow::Continue);
        };
        if !matches!(
            command,
            command::QUERY | command::STMT_EXECUTE | command::STMT_PREPARE
        ) {
            // Those mark the connection busy themselves.
            self.backend.touched();
        }
        match command {
            command::QUIT => return Ok(Flow::Close),
            command::INIT_DB => self.init_db(payload)?,
            command::QUERY => self.query(payload)?,
            command::FIELD_LIST => self.field_list(payload)?,
            command::STATISTICS => self.statistics()?,
            command::PROCESS_KILL => self.process_kill(payload)?,
            command::PING => self.ok()?,
            command::CHANGE_USER => return self.change_user(payload),
            command::STMT_PREPARE => self.prepare(payload)?,
            command::STMT_EXECUTE => self.execute(payload)?,
            command::STMT_SEND_LONG_DATA => self.send_long_data(payload),
            command::STMT_CLOSE => self.close_statement(payload),
            command::STMT_RESET => self.reset_statement(payload)?,
            command::SET_OPTION => self.set_option(payload)?,
            command::RESET_CONNECTION => {
                self.backend.reset();
                self.w.statements.clear();
                self.ok()?;
            }
            _ => write_err(
                &mut self.w.io,
                &SqlError::new(codes::UNKNOWN_COM, "Unknown command"),
            )?,
        }
        Ok(Flow::Continue)
    }

    fn ok(&mut self) -> io::Result<()> {
        let status = self.backend.status_flags();
        let info = OkInfo {
            state_changes: self.backend.take_state_changes(),
            ..OkInfo::default()
        };
        write_ok(&mut self.w.io, OK_HEADER, &info, status, self.w.caps)
    }

    fn answer(&mut self, result: Result<(), SqlError>) -> io::Result<()> {
        match result {
            Ok(()) => self.ok(),
            Err(error) => write_err(&mut self.w.io, &error),
        }
    }

    fn init_db(&mut self, payload: &[u8]) -> io::Result<()> {
        let result = utf8(payload).and_then(|database| self.backend.use_database(database));
        self.answer(result)
    }

    fn query(&mut self, payload: &[u8]) -> io::Result<()> {
        if self.backend.latin1_client() {
            return self.run_query(&super::latin1::decode_statement(payload));
        }
        let sql = match utf8(payload) {
            Ok(sql) => sql,
            Err(error) => match binary_literals_as_hex(payload) {
                // A client-side prepared statement's binary argument
                // (`_binary'…'` of Go's and MariaDB's drivers, PyMySQL).
                Some(sql) => return self.run_query(&sql),
                None => return write_err(&mut self.w.io, &error),
            },
        };
        self.run_query(sql)
    }

    fn run_query(&mut self, sql: &str) -> io::Result<()> {
        let multi = self.w.caps & caps::MULTI_STATEMENTS != 0;
        let status = self.backend.status_flags();
        let mut sink = Sink::new(&mut self.w.io, self.w.caps, false, status);
        sink.metadata_flag = self.w.mariadb_caps & mariadb_caps::CACHE_METADATA != 0;
        sink.latin1 = self.backend.latin1_results();
        self.backend.query(sql, multi, &mut sink)?;
        sink.finish()?;
        self.w.io.set_status(self.backend.status_flags());
        Ok(())
    }

    /// COM_FIELD_LIST: the table's column definitions (each with a NULL
    /// default), then EOF. The wildcard that may follow is not applied.
    fn field_list(&mut self, payload: &[u8]) -> io::Result<()> {
        let table = Cursor::new(payload).nul_or_rest();
        let columns = utf8(table).and_then(|table| self.backend.field_list(table));
        match columns {
            Ok(columns) => {
                for column in &columns {
                    write_column(&mut self.w.io, column, true)?;
                }
                let status = self.backend.status_flags();
                write_terminator(&mut self.w.io, self.w.caps, &OkInfo::default(), status)
            }
            Err(error) => write_err(&mut self.w.io, &error),
        }
    }

    fn statistics(&mut self) -> io::Result<()> {
        let stats = &self.options.stats;
        let text = format!(
            "Uptime: {}  Threads: {}  Server: {}",
            stats.started.elapsed().as_secs(),
            stats.connections.load(Ordering::Relaxed),
            self.options.server_version
        );
        self.w.io.write_packet(text.as_bytes())
    }

    fn process_kill(&mut self, payload: &[u8]) -> io::Result<()> {
        match Cursor::new(payload).u32() {
            Ok(id) => self.run_query(&format!("KILL {id}")),
            Err(Malformed) => write_err(&mut self.w.io, &malformed()),
        }
    }

    /// COM_CHANGE_USER: the session is reset and the new user
    /// authenticated against this connection's nonce; a failure closes
    /// the connection (its session is gone).
    fn change_user(&mut self, payload: &[u8]) -> io::Result<Flow> {
        let request = match parse_change_user(payload, self.w.caps) {
            Ok(request) => request,
            Err(Malformed) => {
                write_err(&mut self.w.io, &malformed())?;
                return Ok(Flow::Close);
            }
        };
        self.backend.reset();
        self.w.statements.clear();
        Ok(if self.login(&request)? {
            Flow::Continue
        } else {
            Flow::Close
        })
    }

    fn prepare(&mut self, payload: &[u8]) -> io::Result<()> {
        let decoded;
        let sql = if self.backend.latin1_client() {
            decoded = super::latin1::decode_statement(payload);
            decoded.as_str()
        } else {
            match utf8(payload) {
                Ok(sql) => sql,
                Err(error) => return write_err(&mut self.w.io, &error),
            }
        };
        if self.w.statements.len() >= STATEMENTS_MAX {
            let error = SqlError::new(
                MAX_PREPARED_STMT_COUNT_REACHED,
                format!(
                    "Can't create more than max_prepared_stmt_count statements (current value: \
                     {STATEMENTS_MAX})"
                ),
            );
            return write_err(&mut self.w.io, &error);
        }
        let prepared = match self.backend.prepare(sql) {
            Ok(prepared) => prepared,
            Err(error) => return write_err(&mut self.w.io, &error),
        };
        let fields = prepared.params.len().max(prepared.columns.len());
        if fields > STATEMENT_FIELDS_MAX {
            self.backend.close(prepared.id);
            let error = SqlError::new(
                PS_MANY_PARAM,
                "Prepared statement contains too many placeholders",
            );
            return write_err(&mut self.w.io, &error);
        }
        let at = self.w.io.begin();
        let out = self.w.io.out();
        out.push(OK_HEADER);
        put_u32(out, prepared.id);
        put_u16(out, prepared.columns.len() as u16);
        put_u16(out, prepared.params.len() as u16);
        out.push(0);
        put_u16(out, 0);
        self.w.io.end(at)?;
        let status = self.backend.status_flags();
        for fields in [&prepared.params, &prepared.columns] {
            if fields.is_empty() {
                continue;
            }
            for field in fields {
                write_column(&mut self.w.io, field, false)?;
            }
            if self.w.caps & caps::DEPRECATE_EOF == 0 {
                write_eof(&mut self.w.io, 0, status)?;
            }
        }
        let statement = Statement::new(prepared.params.len(), prepared.columns);
        self.w.statements.insert(prepared.id, statement);
        Ok(())
    }

    fn execute(&mut self, payload: &[u8]) -> io::Result<()> {
        self.execute_with(payload, false).map(|_| ())
    }

    /// COM_STMT_EXECUTE; with `deferrable`, the backend may defer it
    /// (true: nothing is written yet).
    fn execute_with(&mut self, payload: &[u8], deferrable: bool) -> io::Result<bool> {
        let mut cursor = Cursor::new(payload);
        let Ok(id) = cursor.u32() else {
            return write_err(&mut self.w.io, &malformed()).map(|()| false);
        };
        self.w.executing = Some(id);
        // The cursor flags (a cursor is never opened: the whole result is
        // sent, as MySQL does for a statement that needs none) and the
        // iteration count, always 1.
        if cursor.u8().and_then(|_| cursor.u32()).is_err() {
            return write_err(&mut self.w.io, &malformed()).map(|()| false);
        }
        let mut params = match self.decode_params(id, &mut cursor) {
            Ok(params) => params,
            Err(error) => return write_err(&mut self.w.io, &error).map(|()| false),
        };
        if self.backend.latin1_client() {
            for p in &mut params {
                if let SqlValue::Bytes(b) = p {
                    *b = super::latin1::decode(b).into_bytes();
                }
            }
        }
        self.answer_with(true, |backend, sink| {
            if deferrable {
                backend.execute_deferrable(id, &params, sink)
            } else {
                backend.execute(id, &params, sink).map(|()| false)
            }
        })
    }

    /// Runs `answer` with a sink for the command's answer (binary rows
    /// when `binary`), then ends what it left open and sets the status of
    /// its OK and EOF packets, unless it deferred the command (true: it
    /// has written nothing).
    fn answer_with(
        &mut self,
        binary: bool,
        answer: impl FnOnce(&mut dyn Backend, &mut dyn ResultSink) -> io::Result<bool>,
    ) -> io::Result<bool> {
        let status = self.backend.status_flags();
        let mut sink = Sink::new(&mut self.w.io, self.w.caps, binary, status);
        sink.metadata_flag = self.w.mariadb_caps & mariadb_caps::CACHE_METADATA != 0;
        if binary && sink.metadata_flag {
            sink.described = self
                .w
                .executing
                .and_then(|id| self.w.statements.get_mut(&id))
                .map(|statement| &mut statement.described);
        }
        sink.latin1 = self.backend.latin1_results();
        if answer(&mut *self.backend, &mut sink)? {
            return Ok(true);
        }
        sink.finish()?;
        self.w.io.set_status(self.backend.status_flags());
        Ok(false)
    }

    /// The parameters of an execute: NULL bitmap, the new-params-bound
    /// flag, the types (remembered for the executes that do not bind), the
    /// values; long data stands in for a value and is then forgotten.
    fn decode_params(
        &mut self,
        id: u32,
        cursor: &mut Cursor<'_>,
    ) -> Result<Vec<SqlValue>, SqlError> {
        let Some(statement) = self.w.statements.get_mut(&id) else {
            return Err(unknown_statement(id, "mysqld_stmt_execute"));
        };
        let mut long_data = std::mem::take(&mut statement.long_data);
        statement.long_data = vec![None; statement.params];
        statement.long_data_bytes = 0;
        if let Some(error) = statement.long_data_error.take() {
            return Err(error);
        }
        let count = statement.params;
        if count == 0 {
            return Ok(Vec::new());
        }
        let bad = |error: ParamError| match error {
            ParamError::Malformed => malformed(),
            ParamError::Bad => wrong_arguments("mysqld_stmt_execute"),
        };
        let null_bitmap = cursor.bytes(count.div_ceil(8)).map_err(|_| malformed())?;
        let bound = cursor.u8().map_err(|_| malformed())?;
        if bound == 1 {
            let types = (0..count)
                .map(|_| binary::param_type(cursor))
                .collect::<Result<Vec<_>, _>>()
                .map_err(bad)?;
            statement.types = Some(types);
        }
        let Some(types) = &statement.types else {
            return Err(wrong_arguments("mysqld_stmt_execute"));
        };
        let mut params = Vec::with_capacity(count);
        for (index, &ty) in types.iter().enumerate() {
            let value = if let Some(data) = long_data[index].take() {
                SqlValue::Bytes(data)
            } else if null_bitmap[index / 8] & (1 << (index % 8)) != 0 {
                SqlValue::Null
            } else {
                binary::param_value(cursor, ty).map_err(bad)?
            };
            params.push(value);
        }
        Ok(params)
    }

    /// COM_STMT_SEND_LONG_DATA: no answer; a problem is kept for the
    /// next execute.
    fn send_long_data(&mut self, payload: &[u8]) {
        let mut cursor = Cursor::new(payload);
        let (Ok(id), Ok(param)) = (cursor.u32(), cursor.u16()) else {
            return;
        };
        let data = cursor.rest();
        let limit = self.options.max_allowed_packet_bytes;
        let Some(statement) = self.w.statements.get_mut(&id) else {
            return;
        };
        let param = usize::from(param);
        if param >= statement.params {
            let error = wrong_arguments("mysqld_stmt_send_long_data");
            statement.long_data_error.get_or_insert(error);
            return;
        }
        if statement.long_data_bytes + data.len() > limit {
            let error = SqlError::new(
                codes::NET_PACKET_TOO_LARGE,
                "Parameter of prepared statement which is set through mysql_send_long_data() \
                 is longer than 'max_allowed_packet' bytes",
            );
            statement.long_data_error.get_or_insert(error);
            statement.long_data[param] = None;
            return;
        }
        statement.long_data_bytes += data.len();
        statement.long_data[param]
            .get_or_insert_with(Vec::new)
            .extend_from_slice(data);
    }

    fn close_statement(&mut self, payload: &[u8]) {
        if let Ok(id) = Cursor::new(payload).u32() {
            self.w.statements.remove(&id);
            self.backend.close(id);
        }
    }

    fn reset_statement(&mut self, payload: &[u8]) -> io::Result<()> {
        let Ok(id) = Cursor::new(payload).u32() else {
            return write_err(&mut self.w.io, &malformed());
        };
        let known = self.backend.has_statement(id);
        let result = match self.w.statements.get_mut(&id) {
            Some(statement) if known => {
                statement.clear_long_data();
                Ok(())
            }
            _ => Err(unknown_statement(id, "mysqld_stmt_reset")),
        };
        self.answer(result)
    }

    /// COM_SET_OPTION: multi-statements on or off; answered with EOF.
    fn set_option(&mut self, payload: &[u8]) -> io::Result<()> {
        match Cursor::new(payload).u16() {
            Ok(MULTI_STATEMENTS_ON) => self.w.caps |= caps::MULTI_STATEMENTS,
            Ok(MULTI_STATEMENTS_OFF) => self.w.caps &= !caps::MULTI_STATEMENTS,
            Ok(_) => {
                let error = SqlError::new(codes::UNKNOWN_COM, "Unknown command");
                return write_err(&mut self.w.io, &error);
            }
            Err(Malformed) => return write_err(&mut self.w.io, &malformed()),
        }
        let status = self.backend.status_flags();
        write_terminator(&mut self.w.io, self.w.caps, &OkInfo::default(), status)
    }
}

/// ER_NET_PACKETS_OUT_OF_ORDER.
const NET_PACKETS_OUT_OF_ORDER: u16 = 1156;
/// ER_PS_MANY_PARAM.
const PS_MANY_PARAM: u16 = 1390;
/// ER_MAX_PREPARED_STMT_COUNT_REACHED.
const MAX_PREPARED_STMT_COUNT_REACHED: u16 = 1461;

fn malformed() -> SqlError {
    SqlError::new(codes::MALFORMED_PACKET, "Malformed communication packet.")
}

fn wrong_arguments(to: &str) -> SqlError {
    SqlError::new(
        codes::WRONG_ARGUMENTS,
        format!("Incorrect arguments to {to}"),
    )
}

fn unknown_statement(id: u32, to: &str) -> SqlError {
    SqlError::new(
        codes::UNKNOWN_STMT_HANDLER,
        format!("Unknown prepared statement handler ({id}) given to {to}"),
    )
}

fn access_denied(user: &str, host: IpAddr, with_password: bool) -> SqlError {
    let using = if with_password { "YES" } else { "NO" };
    SqlError {
        code: codes::ACCESS_DENIED,
        // MySQL's SQLSTATE for 1045 (invalid authorization).
        state: "28000",
        message: format!("Access denied for user '{user}'@'{host}' (using password: {using})"),
    }
}

fn bad_handshake(detail: &str) -> SqlError {
    SqlError::new(codes::HANDSHAKE, format!("Bad handshake: {detail}"))
}

/// Statement text and names are UTF-8 (`utf8mb4`); other bytes are
/// refused, not guessed at.
fn utf8(bytes: &[u8]) -> Result<&str, SqlError> {
    std::str::from_utf8(bytes)
        .map_err(|error| SqlError::invalid_utf8mb4(bytes, error.valid_up_to()))
}

/// Statement text whose only bytes that are not UTF-8 are inside string
/// literals, with each such literal written as the hex literal of its bytes
/// (`'a\xFF'` becomes `X'61FF'`; an introducer before it stays valid:
/// `_binary X'61FF'`). None when other bytes are not UTF-8, or a quote is
/// left open.
fn binary_literals_as_hex(sql: &[u8]) -> Option<String> {
    let mut out = String::with_capacity(sql.len() * 2);
    let mut plain = 0; // the start of the text not yet copied
    let mut at = 0;
    while at < sql.len() {
        let quote = sql[at];
        if !matches!(quote, b'\'' | b'"' | b'`') {
            at += 1;
            continue;
        }
        // The literal's bytes, unescaped, and where it ends.
        let (bytes, after) = super::latin1::literal(sql, at)?;
        let end = after - 1;
        let literal = &sql[at..=end];
        if quote != b'`' && std::str::from_utf8(literal).is_err() {
            out.push_str(std::str::from_utf8(&sql[plain..at]).ok()?);
            // The space keeps `_binary` a word of its own.
            out.push_str(" X'");
            for b in &bytes {
                out.push_str(&format!("{b:02X}"));
            }
            out.push('\'');
            plain = end + 1;
        }
        at = end + 1;
    }
    out.push_str(std::str::from_utf8(&sql[plain..]).ok()?);
    Some(out)
}

/// Parses HandshakeResponse41: the client's capabilities and its login.
/// The client's capabilities, its MariaDB extended ones, and its login.
fn parse_handshake_response(packet: &[u8]) -> Result<(u32, u32, LoginRequest<'_>), SqlError> {
    let mut cursor = Cursor::new(packet);
    let bad = |_| bad_handshake("the login packet is malformed");
    let client_caps = cursor.u32().map_err(bad)?;
    if client_caps & caps::SSL != 0 && packet.len() == SSL_REQUEST_BYTES {
        return Err(bad_handshake(
            "Skarv does not speak TLS (SSL); connect without it (--ssl-mode=DISABLED)",
        ));
    }
    if client_caps & caps::PROTOCOL_41 == 0 {
        return Err(bad_handshake(
            "not supported by Skarv: clients without CLIENT_PROTOCOL_41 (MySQL before 4.1)",
        ));
    }
    // Max packet size, character set, 23 bytes of filler whose last 4 are
    // the extended capabilities of a client that knows it talks to a
    // MariaDB-like server (it then clears `CLIENT_MYSQL`).
    cursor.bytes(4).map_err(bad)?;
    let collation = cursor.u8().map_err(bad)?;
    cursor.bytes(19).map_err(bad)?;
    let extended = cursor.u32().map_err(bad)?;
    let mariadb_caps = if client_caps & caps::LONG_PASSWORD == 0 {
        extended
    } else {
        0
    };
    let user = String::from_utf8_lossy(cursor.nul_bytes().map_err(bad)?).into_owned();
    let response = if client_caps & caps::PLUGIN_AUTH_LENENC_CLIENT_DATA != 0 {
        cursor.lenenc_bytes()
    } else if client_caps & caps::SECURE_CONNECTION != 0 {
        cursor.u8().and_then(|len| cursor.bytes(usize::from(len)))
    } else {
        cursor.nul_bytes()
    }
    .map_err(bad)?;
    let database = if client_caps & caps::CONNECT_WITH_DB != 0 && !cursor.is_empty() {
        let name = cursor.nul_or_rest();
        (!name.is_empty()).then(|| String::from_utf8_lossy(name).into_owned())
    } else {
        None
    };
    let plugin = if client_caps & caps::PLUGIN_AUTH != 0 && !cursor.is_empty() {
        Some(cursor.nul_or_rest())
    } else {
        None
    };
    // Connection attributes (CLIENT_CONNECT_ATTRS) follow; Skarv keeps none.
    Ok((
        client_caps,
        mariadb_caps,
        LoginRequest {
            user,
            database,
            response,
            plugin,
            collation,
        },
    ))
}

/// Parses COM_CHANGE_USER's payload (after the command byte).
fn parse_change_user(payload: &[u8], caps: u32) -> Result<LoginRequest<'_>, Malformed> {
    let mut cursor = Cursor::new(payload);
    let user = String::from_utf8_lossy(cursor.nul_bytes()?).into_owned();
    let response = if caps & caps::SECURE_CONNECTION != 0 {
        let len = cursor.u8()?;
        cursor.bytes(usize::from(len))?
    } else {
        cursor.nul_bytes()?
    };
    let database = cursor.nul_or_rest();
    let database = (!database.is_empty()).then(|| String::from_utf8_lossy(database).into_owned());
    let mut plugin = None;
    let mut collation = 0;
    if cursor.remaining() >= 2 {
        collation = (cursor.u16()? & 0xff) as u8;
        if caps & caps::PLUGIN_AUTH != 0 && !cursor.is_empty() {
            plugin = Some(cursor.nul_or_rest());
        }
    }
    Ok(LoginRequest {
        user,
        database,
        response,
        plugin,
        collation,
    })
}

fn write_greeting<S: Read + Write>(
    io: &mut PacketIo<S>,
    options: &ProtocolOptions,
    connection_id: u32,
    nonce: &[u8; NONCE_BYTES],
    status: u16,
) -> io::Result<()> {
    let at = io.begin();
    let out = io.out();
    out.push(PROTOCOL_VERSION);
    let version: Vec<u8> = options.server_version.bytes().filter(|&b| b != 0).collect();
    put_nul_bytes(out, &version);
    put_u32(out, connection_id);
    out.extend_from_slice(&nonce[..8]);
    out.push(0);
    put_u16(out, SERVER_CAPS as u16);
    out.push(HANDSHAKE_CHARSET);
    put_u16(out, status);
    put_u16(out, (SERVER_CAPS >> 16) as u16);
    out.push(NONCE_BYTES as u8 + 1);
    // 6 reserved bytes, then MariaDB's extended capabilities.
    out.extend_from_slice(&[0; 6]);
    put_u32(out, SERVER_MARIADB_CAPS);
    out.extend_from_slice(&nonce[8..]);
    out.push(0);
    put_nul_bytes(out, options.auth_plugin.name().as_bytes());
    io.end(at)
}

/// An OK packet (`header` 0xFE: the OK that ends a result set when the
/// client set `CLIENT_DEPRECATE_EOF`).
fn write_ok<S: Read + Write>(
    io: &mut PacketIo<S>,
    header: u8,
    info: &OkInfo,
    status: u16,
    caps: u32,
) -> io::Result<()> {
    let changes = caps & caps::SESSION_TRACK != 0 && !info.state_changes.is_empty();
    let at = io.begin();
    let out = io.out();
    out.push(header);
    put_lenenc_int(out, info.affected_rows);
    put_lenenc_int(out, info.last_insert_id);
    let status_at = out.len();
    let mut status = status_of(info, status);
    if changes {
        status |= status::SESSION_STATE_CHANGED;
    }
    put_u16(out, status);
    put_u16(out, info.warnings);
    if !info.info.is_empty() || changes {
        // `string<lenenc>`, as MySQL's `net_send_ok` writes it (its manual
        // says `string<EOF>` for a client without CLIENT_SESSION_TRACK;
        // clients read what the servers send).
        put_lenenc_bytes(out, info.info.as_bytes());
    }
    if changes {
        put_lenenc_bytes(out, &state_changes(&info.state_changes));
    }
    io.mark_status(status_at);
    io.end(at)
}

/// The session state changes of an OK packet: per change its type
/// (`SESSION_TRACK_SYSTEM_VARIABLES` 0, `SESSION_TRACK_SCHEMA` 1) and its
/// data, length-prefixed (a variable's name and value, a database's name,
/// each length-prefixed inside it).
fn state_changes(changes: &[crate::backend::StateChange]) -> Vec<u8> {
    use crate::backend::StateChange;
    let mut out = Vec::new();
    let mut data = Vec::new();
    for change in changes {
        data.clear();
        let kind = match change {
            StateChange::Variable(name, value) => {
                put_lenenc_bytes(&mut data, name.as_bytes());
                put_lenenc_bytes(&mut data, value.as_bytes());
                0
            }
            StateChange::Schema(name) => {
                put_lenenc_bytes(&mut data, name.as_bytes());
                1
            }
        };
        out.push(kind);
        put_lenenc_bytes(&mut out, &data);
    }
    out
}

fn write_eof<S: Read + Write>(io: &mut PacketIo<S>, warnings: u16, status: u16) -> io::Result<()> {
    let at = io.begin();
    let out = io.out();
    out.push(EOF_HEADER);
    put_u16(out, warnings);
    let status_at = out.len();
    put_u16(out, status);
    io.mark_status(status_at);
    io.end(at)
}

/// The end of a result set: EOF, or OK with 0xFE under DEPRECATE_EOF.
fn write_terminator<S: Read + Write>(
    io: &mut PacketIo<S>,
    caps: u32,
    info: &OkInfo,
    status: u16,
) -> io::Result<()> {
    if caps & caps::DEPRECATE_EOF != 0 {
        write_ok(io, EOF_HEADER, info, status, caps)
    } else {
        write_eof(io, info.warnings, status_of(info, status))
    }
}

fn status_of(info: &OkInfo, status: u16) -> u16 {
    if info.more_results {
        status | status::MORE_RESULTS_EXISTS
    } else {
        status & !status::MORE_RESULTS_EXISTS
    }
}

fn write_err<S: Read + Write>(io: &mut PacketIo<S>, error: &SqlError) -> io::Result<()> {
    let at = io.begin();
    let out = io.out();
    out.push(ERR_HEADER);
    put_u16(out, error.code);
    out.push(b'#');
    let state = error.state.as_bytes();
    let mut sql_state = *b"HY000";
    if state.len() == sql_state.len() {
        sql_state.copy_from_slice(state);
    }
    out.extend_from_slice(&sql_state);
    let mut end = error.message.len().min(ERROR_MESSAGE_BYTES_MAX);
    while !error.message.is_char_boundary(end) {
        end -= 1;
    }
    out.extend_from_slice(&error.message.as_bytes()[..end]);
    io.end(at)
}

/// A column definition (ColumnDefinition41); COM_FIELD_LIST's carry a
/// default value too (NULL here).
fn write_column<S: Read + Write>(
    io: &mut PacketIo<S>,
    column: &ColumnMeta,
    field_list: bool,
) -> io::Result<()> {
    let at = io.begin();
    let out = io.out();
    put_lenenc_bytes(out, b"def");
    put_lenenc_bytes(out, column.schema.as_bytes());
    put_lenenc_bytes(out, column.table.as_bytes());
    put_lenenc_bytes(out, column.org_table.as_bytes());
    put_lenenc_bytes(out, column.name.as_bytes());
    put_lenenc_bytes(out, column.org_name.as_bytes());
    // The length of the fixed fields that follow.
    out.push(0x0c);
    put_u16(out, column.charset);
    put_u32(out, column.length);
    out.push(if column.json {
        crate::value::ColumnType::Json as u8
    } else {
        column.ty as u8
    });
    put_u16(out, column.flags);
    out.push(column.decimals);
    put_u16(out, 0);
    if field_list {
        out.push(0xfb);
    }
    io.end(at)
}

/// Where a statement's answer stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SinkState {
    /// A statement's answer may start.
    Ready,
    /// Columns were sent; rows follow.
    Rows,
    /// The last answer was sent: the client reads nothing more.
    Done,
}

/// The protocol's [`ResultSink`]: text or binary result sets, OK and ERR,
/// written into the connection's output buffer. A backend that calls it
/// out of order gets its answer ended with an internal error rather than
/// a stream the client cannot read.
struct Sink<'a, S: Read + Write> {
    io: &'a mut PacketIo<S>,
    caps: u32,
    binary: bool,
    /// Status for the packets, set again once the backend is done.
    status: u16,
    columns: Vec<ColumnMeta>,
    state: SinkState,
    answered: bool,
    scratch: Vec<u8>,
    /// Text goes out as latin1 (`character_set_results`).
    latin1: bool,
    /// The column count carries MariaDB's "metadata follows" byte
    /// (`CACHE_METADATA` was agreed).
    metadata_flag: bool,
    /// An execute's statement's columns as the client last received them:
    /// the same again are not sent. None: always sent.
    described: Option<&'a mut Vec<ColumnMeta>>,
    /// Result sets begun in this answer.
    results: u32,
}

impl<'a, S: Read + Write> Sink<'a, S> {
    /// A sink for one command's answer; the status of its OK and EOF
    /// packets is set again after the backend is done.
    fn new(io: &'a mut PacketIo<S>, caps: u32, binary: bool, status: u16) -> Sink<'a, S> {
        Sink {
            io,
            caps,
            binary,
            status,
            columns: Vec::new(),
            state: SinkState::Ready,
            answered: false,
            scratch: Vec::new(),
            latin1: false,
            metadata_flag: false,
            described: None,
            results: 0,
        }
    }

    /// Ends an answer the backend left open (a backend bug: the client
    /// must not wait forever).
    fn finish(&mut self) -> io::Result<()> {
        match self.state {
            SinkState::Done => Ok(()),
            SinkState::Ready if !self.answered => self.misuse("the statement sent no answer"),
            SinkState::Ready => self.misuse("more results were announced and not sent"),
            SinkState::Rows => self.misuse("a result set was not ended"),
        }
    }

    fn misuse(&mut self, what: &str) -> io::Result<()> {
        self.state = SinkState::Done;
        let error = SqlError::new(
            codes::UNKNOWN,
            format!("internal error of the SQL node: {what}"),
        );
        write_err(self.io, &error)
    }

    fn after(&mut self, info: &OkInfo) {
        self.answered = true;
        self.state = if info.more_results {
            SinkState::Ready
        } else {
            SinkState::Done
        };
    }

    fn text_row(&mut self, values: &[SqlValue]) {
        let out = self.io.out();
        for (value, column) in values.iter().zip(&self.columns) {
            match value {
                SqlValue::Null => out.push(0xfb),
                SqlValue::Bytes(bytes) => put_lenenc_bytes(out, bytes),
                _ => {
                    self.scratch.clear();
                    text::render(value, column, &mut self.scratch);
                    put_lenenc_bytes(out, &self.scratch);
                }
            }
        }
    }
}

impl<S: Read + Write> ResultSink for Sink<'_, S> {
    fn columns(&mut self, columns: &[ColumnMeta]) -> io::Result<()> {
        match self.state {
            SinkState::Ready if columns.is_empty() => {
                return self.misuse("a result set without columns")
            }
            SinkState::Ready => {}
            SinkState::Rows => return self.misuse("a result set started inside another"),
            SinkState::Done => return Ok(()),
        }
        self.answered = true;
        self.state = SinkState::Rows;
        self.results += 1;
        self.columns.clear();
        self.columns.extend_from_slice(columns);
        if self.latin1 {
            // Text columns are latin1 for this client: one byte a
            // character, as MySQL describes them.
            for column in &mut self.columns {
                if column.charset != charset::BINARY && column.charset != charset::LATIN1_SWEDISH_CI
                {
                    column.length /= 4;
                    column.charset = charset::LATIN1_SWEDISH_CI;
                }
            }
        }
        // With CACHE_METADATA, an execute's one result set whose columns
        // the client has (from the prepare or the last execute) goes
        // without them. A second result set in one answer is always
        // described and the statement's columns forgotten: which of them
        // the client keeps is its own affair, so the next execute sends
        // them again.
        let described = match self.described.as_deref_mut() {
            Some(described) if self.results > 1 => {
                described.clear();
                None
            }
            other => other,
        };
        let skip = described
            .as_deref()
            .is_some_and(|described| *described == self.columns);
        let at = self.io.begin();
        put_lenenc_int(self.io.out(), self.columns.len() as u64);
        if self.metadata_flag {
            self.io.out().push(u8::from(!skip));
        }
        self.io.end(at)?;
        if !skip {
            for column in &self.columns {
                write_column(self.io, column, false)?;
            }
            if let Some(described) = described {
                described.clone_from(&self.columns);
            }
        }
        if self.caps & caps::DEPRECATE_EOF == 0 {
            write_eof(self.io, 0, self.status)?;
        }
        Ok(())
    }

    fn row(&mut self, values: &[SqlValue]) -> io::Result<()> {
        match self.state {
            SinkState::Rows => {}
            SinkState::Ready => return self.misuse("a row outside a result set"),
            SinkState::Done => return Ok(()),
        }
        if values.len() != self.columns.len() {
            return self.misuse("a row whose values do not match its columns");
        }
        let converted: Vec<SqlValue>;
        let values = if self.latin1 {
            converted = values
                .iter()
                .zip(&self.columns)
                .map(|(v, c)| match v {
                    SqlValue::Bytes(b) if c.charset != charset::BINARY => {
                        SqlValue::Bytes(super::latin1::encode(b))
                    }
                    other => other.clone(),
                })
                .collect();
            &converted[..]
        } else {
            values
        };
        let at = self.io.begin();
        if self.binary {
            if let Err(error) = binary::encode_row(&self.columns, values, self.io.out()) {
                self.io.out().truncate(at);
                self.state = SinkState::Done;
                return write_err(self.io, &error);
            }
        } else {
            self.text_row(values);
        }
        self.io.end(at)
    }

    fn end_rows(&mut self, info: &OkInfo) -> io::Result<()> {
        match self.state {
            SinkState::Rows => {}
            SinkState::Ready => return self.misuse("a result set ended that was not started"),
            SinkState::Done => return Ok(()),
        }
        self.after(info);
        write_terminator(self.io, self.caps, info, self.status)
    }

    fn ok(&mut self, info: &OkInfo) -> io::Result<()> {
        match self.state {
            SinkState::Ready => {}
            SinkState::Rows => return self.misuse("OK inside a result set"),
            SinkState::Done => return Ok(()),
        }
        self.after(info);
        write_ok(self.io, OK_HEADER, info, self.status, self.caps)
    }

    fn error(&mut self, error: &SqlError) -> io::Result<()> {
        if self.state == SinkState::Done {
            return Ok(());
        }
        self.answered = true;
        self.state = SinkState::Done;
        write_err(self.io, error)
    }

    fn local_infile(&mut self, name: &str) -> io::Result<Option<Box<dyn Read + '_>>> {
        // Only a client that offered to send files is asked, and only
        // between answers.
        if self.caps & caps::LOCAL_FILES == 0 || self.state != SinkState::Ready {
            return Ok(None);
        }
        let at = self.io.begin();
        self.io.out().push(LOCAL_INFILE_REQUEST);
        self.io.out().extend_from_slice(name.as_bytes());
        self.io.end(at)?;
        self.io.flush()?;
        Ok(Some(Box::new(LocalFile {
            io: &mut *self.io,
            packet: Vec::new(),
            at: 0,
            done: false,
        })))
    }
}

/// The header byte of the packet that asks the client for a file.
const LOCAL_INFILE_REQUEST: u8 = 0xFB;

/// The file a client sends for `LOAD DATA LOCAL`: its packets, in order,
/// up to an empty one.
struct LocalFile<'a, S: Read + Write> {
    io: &'a mut PacketIo<S>,
    packet: Vec<u8>,
    /// Bytes of `packet` already read.
    at: usize,
    /// The empty packet came (or reading failed: nothing more comes).
    done: bool,
}

impl<S: Read + Write> Read for LocalFile<'_, S> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.at == self.packet.len() {
            if self.done {
                return Ok(0);
            }
            match self.io.read_packet() {
                Ok(packet) if packet.is_empty() => self.done = true,
                Ok(packet) => {
                    self.packet = packet;
                    self.at = 0;
                }
                Err(error) => {
                    self.done = true;
                    return Err(match error {
                        ReadError::Io(e) => e,
                        ReadError::Closed => io::ErrorKind::UnexpectedEof.into(),
                        ReadError::TooLarge => io::Error::other(
                            "a packet of the file is longer than max_allowed_packet",
                        ),
                        ReadError::OutOfOrder => io::Error::other("packets out of order"),
                    });
                }
            }
        }
        let n = out.len().min(self.packet.len() - self.at);
        out[..n].copy_from_slice(&self.packet[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

impl<S: Read + Write> Drop for LocalFile<'_, S> {
    /// A load that stopped early (an error) still reads the rest of the
    /// file: its answer must come after the client's last packet.
    fn drop(&mut self) {
        while !self.done {
            match self.io.read_packet() {
                Ok(packet) if !packet.is_empty() => {}
                _ => self.done = true,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn binary_literals_that_are_not_utf8_become_hex() {
        use super::binary_literals_as_hex as hex;
        assert_eq!(
            hex(b"INSERT INTO t VALUES (_binary'a\xFF\\'\\0''', '\xC3\xA5')").as_deref(),
            Some("INSERT INTO t VALUES (_binary X'61FF270027', '\u{e5}')")
        );
        assert_eq!(
            hex(b"SELECT \"x\xFE\", `c`, 'ok'").as_deref(),
            Some("SELECT  X'78FE', `c`, 'ok'")
        );
        assert_eq!(
            hex(b"SELECT 'a\\%\xFF'").as_deref(),
            Some("SELECT  X'615C25FF'")
        );
        assert_eq!(hex(b"SELECT \xFF"), None, "outside a literal");
        assert_eq!(hex(b"SELECT 'open\xFF"), None, "a quote left open");
        assert_eq!(hex(b"SELECT `a\xFF`"), None, "an identifier");
    }

    use std::net::Ipv4Addr;

    use proptest::prelude::*;

    use super::*;
    use crate::backend::{Credentials, Prepared};
    use crate::protocol::testing::Duplex;
    use crate::value::{charset, ColumnType};

    /// A backend for the wire tests: root without a password, a few
    /// statements, prepared statements that answer OK.
    #[derive(Default)]
    struct Echo {
        in_transaction: bool,
        queries: Vec<String>,
        statements: Vec<u32>,
        /// Prepared statements that begin with "select": one column, named
        /// "a" at the prepare and by the first parameter at an execute.
        selects: Vec<u32>,
        executed: Vec<Vec<SqlValue>>,
        disconnected: bool,
    }

    impl Backend for Echo {
        fn connection_id(&self) -> u32 {
            7
        }
        fn credentials(&mut self, login: &Login<'_>) -> Result<Credentials, SqlError> {
            match login.user {
                "root" => Ok(auth::credentials_for(b"")),
                _ => Err(SqlError::new(codes::ACCESS_DENIED, "no such user")),
            }
        }
        fn logged_in(&mut self, _login: &Login<'_>) -> Result<(), SqlError> {
            Ok(())
        }
        fn query(&mut self, sql: &str, _multi: bool, sink: &mut dyn ResultSink) -> io::Result<()> {
            self.queries.push(sql.to_owned());
            match sql {
                "select 1" => {
                    let column = ColumnMeta::expr("1", ColumnType::LongLong, charset::BINARY, 1);
                    sink.columns(&[column])?;
                    sink.row(&[SqlValue::Int(1)])?;
                    sink.end_rows(&OkInfo::default())
                }
                "begin" => {
                    self.in_transaction = true;
                    sink.ok(&OkInfo::default())
                }
                "silent" => Ok(()),
                _ => sink.error(&SqlError::syntax(sql)),
            }
        }
        fn prepare(&mut self, sql: &str) -> Result<Prepared, SqlError> {
            let id = self.statements.len() as u32 + 1;
            self.statements.push(id);
            let param = ColumnMeta::expr("?", ColumnType::VarString, charset::BINARY, 0);
            let columns = if sql.starts_with("select") {
                self.selects.push(id);
                vec![ColumnMeta::expr(
                    "a",
                    ColumnType::LongLong,
                    charset::BINARY,
                    1,
                )]
            } else {
                Vec::new()
            };
            Ok(Prepared {
                id,
                params: vec![param; sql.matches('?').count()],
                columns,
            })
        }
        fn execute(
            &mut self,
            id: u32,
            params: &[SqlValue],
            sink: &mut dyn ResultSink,
        ) -> io::Result<()> {
            self.executed.push(params.to_vec());
            if let (true, [SqlValue::Bytes(name)]) = (self.selects.contains(&id), params) {
                let name = String::from_utf8_lossy(name);
                let column =
                    ColumnMeta::expr(name.as_ref(), ColumnType::LongLong, charset::BINARY, 1);
                sink.columns(&[column])?;
                sink.row(&[SqlValue::Int(1)])?;
                return sink.end_rows(&OkInfo::default());
            }
            sink.ok(&OkInfo::default())
        }
        fn close(&mut self, id: u32) {
            self.statements.retain(|&s| s != id);
        }
        fn has_statement(&self, id: u32) -> bool {
            self.statements.contains(&id)
        }
        fn use_database(&mut self, _database: &str) -> Result<(), SqlError> {
            Ok(())
        }
        fn field_list(&mut self, _table: &str) -> Result<Vec<ColumnMeta>, SqlError> {
            Ok(vec![ColumnMeta::expr(
                "a",
                ColumnType::Long,
                charset::BINARY,
                11,
            )])
        }
        fn reset(&mut self) {
            self.in_transaction = false;
        }
        fn status_flags(&self) -> u16 {
            status::AUTOCOMMIT
                | if self.in_transaction {
                    status::IN_TRANS
                } else {
                    0
                }
        }
        fn disconnect(&mut self) {
            self.disconnected = true;
        }
        fn killed(&self) -> bool {
            false
        }
    }

    /// A frame header's bytes.
    const HEADER: usize = 4;

    const CLIENT_CAPS: u32 = caps::PROTOCOL_41
        | caps::SECURE_CONNECTION
        | caps::PLUGIN_AUTH
        | caps::PLUGIN_AUTH_LENENC_CLIENT_DATA
        | caps::MULTI_STATEMENTS
        | caps::MULTI_RESULTS;

    fn frame(seq: u8, payload: &[u8]) -> Vec<u8> {
        let mut out = (payload.len() as u32).to_le_bytes()[..3].to_vec();
        out.push(seq);
        out.extend_from_slice(payload);
        out
    }

    fn login(caps: u32, user: &str, response: &[u8], plugin: Option<&str>) -> Vec<u8> {
        let mut out = Vec::new();
        put_u32(&mut out, caps);
        put_u32(&mut out, 1 << 24);
        out.push(45);
        out.extend_from_slice(&[0; 23]);
        put_nul_bytes(&mut out, user.as_bytes());
        put_lenenc_bytes(&mut out, response);
        if let Some(plugin) = plugin {
            put_nul_bytes(&mut out, plugin.as_bytes());
        }
        frame(1, &out)
    }

    /// Command packets, each starting a sequence.
    fn commands(packets: &[&[u8]]) -> Vec<u8> {
        packets.iter().flat_map(|p| frame(0, p)).collect()
    }

    /// Serves `input` and returns the backend and the payloads written.
    fn serve_bytes(input: Vec<u8>) -> (Echo, Vec<Vec<u8>>) {
        let mut backend = Echo::default();
        let mut stream = Duplex::new(input);
        let peer = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let _ = serve(&mut stream, &mut backend, peer, &ProtocolOptions::default());
        assert!(
            backend.disconnected,
            "disconnect is called however the connection ends"
        );
        (backend, frames(&stream.output))
    }

    /// Splits what the server wrote into payloads, checking the framing.
    fn frames(mut wire: &[u8]) -> Vec<Vec<u8>> {
        let mut payloads = Vec::new();
        while !wire.is_empty() {
            assert!(wire.len() >= 4, "a cut header");
            let len = usize::from(wire[0]) | usize::from(wire[1]) << 8 | usize::from(wire[2]) << 16;
            assert!(wire.len() >= 4 + len, "a cut payload");
            payloads.push(wire[4..4 + len].to_vec());
            wire = &wire[4 + len..];
        }
        payloads
    }

    fn root(caps: u32) -> Vec<u8> {
        login(caps, "root", b"", Some("mysql_native_password"))
    }

    fn err_code(payload: &[u8]) -> Option<u16> {
        (payload.first() == Some(&ERR_HEADER)).then(|| u16::from_le_bytes([payload[1], payload[2]]))
    }

    fn ok_status(payload: &[u8]) -> u16 {
        let mut cursor = Cursor::new(&payload[1..]);
        cursor.lenenc_int().unwrap();
        cursor.lenenc_int().unwrap();
        cursor.u16().unwrap()
    }

    #[test]
    fn the_greeting_announces_version_capabilities_and_a_nonce() {
        let (_, out) = serve_bytes(Vec::new());
        let greeting = &out[0];
        assert_eq!(greeting[0], PROTOCOL_VERSION);
        let mut cursor = Cursor::new(&greeting[1..]);
        assert!(cursor.nul_bytes().unwrap().starts_with(b"8.0.36-Skarv-"));
        assert_eq!(cursor.u32().unwrap(), 7);
        let nonce_start = cursor.bytes(8).unwrap().to_vec();
        assert_eq!(cursor.u8().unwrap(), 0);
        let low = cursor.u16().unwrap();
        cursor.bytes(3).unwrap();
        let high = cursor.u16().unwrap();
        assert_eq!(u32::from(low) | u32::from(high) << 16, SERVER_CAPS);
        assert_eq!(
            SERVER_CAPS & caps::LONG_PASSWORD,
            0,
            "CLIENT_MYSQL clear: the MariaDB capabilities are read"
        );
        assert_eq!(cursor.u8().unwrap(), 21);
        cursor.bytes(6).unwrap();
        assert_eq!(cursor.u32().unwrap(), SERVER_MARIADB_CAPS);
        let nonce_end = cursor.nul_bytes().unwrap();
        assert_eq!(nonce_start.len() + nonce_end.len(), NONCE_BYTES);
        assert_eq!(cursor.nul_bytes().unwrap(), b"mysql_native_password");
    }

    #[test]
    fn with_deprecate_eof_a_result_set_ends_with_an_ok_and_has_no_eof() {
        let mut input = root(CLIENT_CAPS | caps::DEPRECATE_EOF);
        input.extend(commands(&[b"\x03select 1"]));
        let (_, out) = serve_bytes(input);
        // Greeting, OK, then: count, column, row, terminator.
        assert_eq!(out.len(), 6, "{out:?}");
        assert_eq!(out[2], [1]);
        assert_eq!(out[4], [1, b'1']);
        assert_eq!(out[5][0], EOF_HEADER);
        assert_eq!(ok_status(&out[5]), status::AUTOCOMMIT);
    }

    #[test]
    fn without_deprecate_eof_columns_and_rows_end_with_eof() {
        let mut input = root(CLIENT_CAPS);
        input.extend(commands(&[b"\x03select 1"]));
        let (_, out) = serve_bytes(input);
        assert_eq!(out.len(), 7, "{out:?}");
        assert_eq!(out[4][0], EOF_HEADER);
        assert_eq!(out[4].len(), 5);
        assert_eq!(out[5], [1, b'1']);
        assert_eq!(out[6][0], EOF_HEADER);
        assert_eq!(out[6].len(), 5);
    }

    #[test]
    fn an_ok_carries_the_status_after_its_statement() {
        let mut input = root(CLIENT_CAPS);
        input.extend(commands(&[b"\x03begin"]));
        let (_, out) = serve_bytes(input);
        assert_eq!(ok_status(&out[2]), status::AUTOCOMMIT | status::IN_TRANS);
    }

    #[test]
    fn an_unknown_plugin_is_switched_to_native_password() {
        let mut input = login(CLIENT_CAPS, "root", b"", Some("sha256_password"));
        input.extend(frame(3, b""));
        let (_, out) = serve_bytes(input);
        assert_eq!(out[1][0], EOF_HEADER);
        let mut cursor = Cursor::new(&out[1][1..]);
        assert_eq!(cursor.nul_bytes().unwrap(), b"mysql_native_password");
        assert_eq!(cursor.rest().len(), NONCE_BYTES + 1);
        assert_eq!(out[2][0], OK_HEADER);
    }

    #[test]
    fn another_plugin_than_announced_is_switched_to_itself() {
        // As MariaDB's client with --default-auth=caching_sha2_password
        // and no password: an empty answer, then one NUL after the switch.
        let mut input = login(CLIENT_CAPS, "root", b"", Some("caching_sha2_password"));
        input.extend(frame(3, b"\0"));
        let (_, out) = serve_bytes(input);
        assert_eq!(out[1][0], EOF_HEADER);
        let mut cursor = Cursor::new(&out[1][1..]);
        assert_eq!(cursor.nul_bytes().unwrap(), b"caching_sha2_password");
        assert_eq!(out[2][0], OK_HEADER, "{out:?}");
        assert_eq!(out.len(), 3);
    }

    #[test]
    fn an_ssl_request_or_an_unknown_user_is_refused_and_closed() {
        let mut ssl = Vec::new();
        put_u32(&mut ssl, CLIENT_CAPS | caps::SSL);
        ssl.extend_from_slice(&[0; 28]);
        let (_, out) = serve_bytes(frame(1, &ssl));
        assert_eq!(err_code(&out[1]), Some(codes::HANDSHAKE));
        assert!(String::from_utf8_lossy(&out[1]).contains("TLS"));
        let mut input = login(CLIENT_CAPS, "bob", b"", None);
        input.extend(commands(&[b"\x03select 1"]));
        let (backend, out) = serve_bytes(input);
        assert_eq!(out.len(), 2);
        assert_eq!(err_code(&out[1]), Some(codes::ACCESS_DENIED));
        assert!(backend.queries.is_empty());
    }

    #[test]
    fn bad_commands_get_errors_and_the_connection_goes_on() {
        let mut input = root(CLIENT_CAPS);
        input.extend(commands(&[
            b"",
            b"\x63",
            b"\x17\x01\x00",
            b"\x1a\x09\x00\x00\x00",
            b"\x03\xff\xfe",
            b"\x0e",
        ]));
        let (_, out) = serve_bytes(input);
        let codes: Vec<_> = out[2..].iter().map(|p| err_code(p)).collect();
        assert_eq!(
            codes,
            [
                Some(codes::MALFORMED_PACKET),
                Some(codes::UNKNOWN_COM),
                Some(codes::MALFORMED_PACKET),
                Some(codes::UNKNOWN_STMT_HANDLER),
                Some(codes::INVALID_CHARACTER_STRING),
                None,
            ]
        );
    }

    #[test]
    fn execute_decodes_parameters_and_remembers_their_types() {
        let mut input = root(CLIENT_CAPS);
        // Two parameters: bound as LONGLONG and VAR_STRING, then executed
        // again without binding, then with an unknown type.
        let mut first = vec![0x17, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0b00, 1, 0x08, 0, 0xfd, 0];
        first.extend_from_slice(&(-2i64).to_le_bytes());
        first.extend_from_slice(&[2, b'h', b'i']);
        let mut second = vec![0x17, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0b10, 0];
        second.extend_from_slice(&5i64.to_le_bytes());
        let third = vec![0x17, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0x42, 0, 0xfd, 0];
        input.extend(commands(&[b"\x16echo ?, ?", &first, &second, &third]));
        let (backend, out) = serve_bytes(input);
        assert_eq!(
            backend.executed,
            [
                vec![SqlValue::Int(-2), SqlValue::Bytes(b"hi".to_vec())],
                vec![SqlValue::Int(5), SqlValue::Null],
            ]
        );
        assert_eq!(err_code(out.last().unwrap()), Some(codes::WRONG_ARGUMENTS));
    }

    /// An execute with a VAR_STRING parameter `name` (bound every time).
    fn execute_named(id: u8, name: &str) -> Vec<u8> {
        let mut packet = vec![0x17, id, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0xfd, 0];
        put_lenenc_bytes(&mut packet, name.as_bytes());
        packet
    }

    /// MariaDB's CACHE_METADATA: a client that clears CLIENT_MYSQL and sets
    /// the extended capability gets the "metadata follows" byte in every
    /// column count, and an execute whose columns it already has (from the
    /// prepare or the last execute) gets none; one without it gets them
    /// every time, without the byte.
    #[test]
    fn cached_metadata_is_sent_only_when_the_columns_change() {
        let mariadb_login = |caps: u32| {
            let mut input = root(caps);
            // The last 4 bytes of the login's 23-byte filler.
            let at = HEADER + 4 + 4 + 1 + 19;
            input[at..at + 4].copy_from_slice(&mariadb_caps::CACHE_METADATA.to_le_bytes());
            input
        };
        let run = |input: Vec<u8>| {
            let mut input = input;
            let (a, b) = (execute_named(1, "a"), execute_named(1, "b"));
            input.extend(commands(&[
                b"\x16select ?",
                &a,
                &b,
                &b,
                &a,
                b"\x03select 1",
            ]));
            serve_bytes(input).1
        };
        let caps = CLIENT_CAPS | caps::DEPRECATE_EOF;
        let out = run(mariadb_login(caps));
        // Greeting, OK, prepare OK, its parameter and its column.
        assert_eq!(out[2][0], OK_HEADER);
        let executes = &out[5..];
        // Count and metadata-follows, (column), row, terminator.
        let a_again = &executes[..3];
        assert_eq!(a_again[0], [1, 0], "the prepare's column again: none sent");
        let b_new = &executes[3..7];
        assert_eq!(b_new[0], [1, 1], "a new column name: sent");
        assert_eq!(b_new[1][0..4], [3, b'd', b'e', b'f']);
        let b_again = &executes[7..10];
        assert_eq!(b_again[0], [1, 0]);
        let a_new = &executes[10..14];
        assert_eq!(a_new[0], [1, 1]);
        let text = &executes[14..];
        assert_eq!(
            text[0],
            [1, 1],
            "text results always describe their columns"
        );
        assert_eq!(text.len(), 4);

        // The capability bit of a client that sets CLIENT_MYSQL is not read.
        let out = run(mariadb_login(caps | caps::LONG_PASSWORD));
        let counts = out[5..].iter().filter(|p| p.as_slice() == [1]).count();
        assert_eq!(counts, 5, "every result set has its columns and no byte");
        assert_eq!(out.len(), 5 + 5 * 4);
    }

    #[test]
    fn long_data_stands_in_for_a_parameter_once() {
        let mut input = root(CLIENT_CAPS);
        let long = |chunk: &[u8]| {
            let mut p = vec![0x18, 1, 0, 0, 0, 0, 0];
            p.extend_from_slice(chunk);
            p
        };
        let execute = vec![0x17, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0xfc, 0];
        let mut again = execute.clone();
        again.extend_from_slice(&[1, b'z']);
        input.extend(commands(&[
            b"\x16echo ?",
            &long(b"ab"),
            &long(b"cd"),
            &execute,
            &again,
        ]));
        let (backend, out) = serve_bytes(input);
        let expected = [
            vec![SqlValue::Bytes(b"abcd".to_vec())],
            vec![SqlValue::Bytes(b"z".to_vec())],
        ];
        assert_eq!(backend.executed, expected);
        // PREPARE_OK, its parameter and EOF; the long data has no answer.
        assert_eq!(out.len(), 2 + 3 + 2);
    }

    #[test]
    fn set_option_field_list_statistics_and_kill() {
        let mut input = root(CLIENT_CAPS);
        input.extend(commands(&[
            b"\x1b\x01\x00",
            b"\x04t\x00",
            b"\x09",
            b"\x0c\x05\x00\x00\x00",
        ]));
        let (backend, out) = serve_bytes(input);
        assert_eq!(out[2][0], EOF_HEADER);
        // The field list: one column (with its default) and EOF.
        assert_eq!(*out[3].last().unwrap(), 0xfb);
        assert_eq!(out[4][0], EOF_HEADER);
        assert!(out[5].starts_with(b"Uptime: "));
        assert_eq!(backend.queries, ["KILL 5"]);
    }

    #[test]
    fn a_backend_that_sends_nothing_still_answers_the_client() {
        let mut input = root(CLIENT_CAPS);
        input.extend(commands(&[b"\x03silent"]));
        let (_, out) = serve_bytes(input);
        assert_eq!(err_code(&out[2]), Some(codes::UNKNOWN));
    }

    #[test]
    fn a_packet_out_of_sequence_gets_1156_and_closes() {
        let mut input = root(CLIENT_CAPS);
        input.extend(frame(3, b"\x03select 1"));
        input.extend(commands(&[b"\x03select 1"]));
        let (backend, out) = serve_bytes(input);
        assert_eq!(out.len(), 3);
        assert_eq!(err_code(&out[2]), Some(NET_PACKETS_OUT_OF_ORDER));
        assert!(backend.queries.is_empty());
    }

    /// Command bytes the decoder knows, and some it does not.
    fn command_byte() -> impl Strategy<Value = u8> {
        prop_oneof![
            Just(command::QUERY),
            Just(command::INIT_DB),
            Just(command::FIELD_LIST),
            Just(command::PROCESS_KILL),
            Just(command::CHANGE_USER),
            Just(command::STMT_PREPARE),
            Just(command::STMT_EXECUTE),
            Just(command::STMT_SEND_LONG_DATA),
            Just(command::STMT_CLOSE),
            Just(command::STMT_RESET),
            Just(command::SET_OPTION),
            Just(command::RESET_CONNECTION),
            any::<u8>(),
        ]
    }

    /// A command packet: a random one, or an execute or long data of
    /// statement 1 (prepared first) whose rest is random.
    fn packet() -> impl Strategy<Value = Vec<u8>> {
        let random = (command_byte(), prop::collection::vec(any::<u8>(), 0..40));
        let tail = prop::collection::vec(any::<u8>(), 0..24);
        prop_oneof![
            random.prop_map(|(command, payload)| [vec![command], payload].concat()),
            tail.clone().prop_map(|tail| [
                &[command::STMT_EXECUTE, 1, 0, 0, 0, 0, 1, 0, 0, 0][..],
                &tail
            ]
            .concat()),
            tail.prop_map(|tail| [&[command::STMT_SEND_LONG_DATA, 1, 0, 0, 0][..], &tail].concat()),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Random commands (after a prepare, so executes find their
        /// statement), each framed, then random bytes: the server answers
        /// each with well-framed packets or closes, and never panics.
        #[test]
        fn random_and_mutated_packets_never_panic(
            packets in prop::collection::vec(packet(), 0..12),
            tail in prop::collection::vec(any::<u8>(), 0..64),
            flip in any::<(usize, u8)>(),
        ) {
            let mut input = root(CLIENT_CAPS);
            input.extend(commands(&[b"\x16echo ?, ?, ?"]));
            for packet in &packets {
                input.extend(frame(0, packet));
            }
            input.extend_from_slice(&tail);
            // Mutate one byte somewhere after the login.
            let login_len = root(CLIENT_CAPS).len();
            if input.len() > login_len {
                let index = login_len + flip.0 % (input.len() - login_len);
                input[index] ^= flip.1;
            }
            let (_, out) = serve_bytes(input);
            prop_assert!(!out.is_empty());
        }

        /// Random logins (a valid one mutated, or random bytes, in random
        /// frames): refused or accepted, never a panic.
        #[test]
        fn random_logins_never_panic(
            caps in any::<u32>(),
            user in "[a-z]{0,6}",
            response in prop::collection::vec(any::<u8>(), 0..40),
            plugin in prop::option::of("[a-z_0-9]{0,24}"),
            junk in prop::collection::vec(any::<u8>(), 0..80),
            cut in any::<usize>(),
        ) {
            let mut input = login(caps, &user, &response, plugin.as_deref());
            let keep = HEADER + cut % (input.len() - HEADER + 1);
            input.truncate(keep);
            input.extend_from_slice(&junk);
            let (_, out) = serve_bytes(input);
            prop_assert!(!out.is_empty());
        }
    }
}
