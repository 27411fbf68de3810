//! The seam between the wire and SQL: the protocol drives one [`Backend`]
//! per connection and the backend writes its answers into a [`ResultSink`]
//! the protocol implements (text rows for `COM_QUERY`, binary rows for
//! `COM_STMT_EXECUTE`). Neither side knows the other's internals, so the
//! protocol is tested with a backend of its own and the engine without
//! sockets.

use std::io;
use std::net::IpAddr;

use crate::error::SqlError;
use crate::value::{ColumnMeta, SqlValue};

/// What a user's password is stored as: only the hashes the two
/// authentication plugins need, never the password.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credentials {
    /// The account has no password: any empty answer is accepted.
    pub empty: bool,
    /// `mysql_native_password`: SHA1(SHA1(password)).
    pub native: [u8; 20],
    /// `caching_sha2_password`: SHA256(SHA256(password)); with it the
    /// server checks a fast-auth scramble without ever holding the password.
    pub sha2: [u8; 32],
}

/// How a statement ended, for OK packets and the status of a result set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OkInfo {
    /// Rows changed (MySQL's affected rows: an `ON DUPLICATE KEY UPDATE`
    /// that changed a row counts 2).
    pub affected_rows: u64,
    /// `LAST_INSERT_ID()` after the statement (0: none).
    pub last_insert_id: u64,
    /// Warnings the statement left (`SHOW WARNINGS` lists them).
    pub warnings: u16,
    /// The human-readable info ("Rows matched: 1  Changed: 1  Warnings: 0").
    pub info: String,
    /// Another result of this multi-statement follows
    /// (`SERVER_MORE_RESULTS_EXISTS`).
    pub more_results: bool,
    /// What the statement changed of the session that the client asked to
    /// be told of (`session_track_*`), sent to a client that set
    /// `CLIENT_SESSION_TRACK` with `SERVER_SESSION_STATE_CHANGED`.
    pub state_changes: Vec<StateChange>,
}

/// One change of a session's state an OK packet reports (MySQL's session
/// state tracking).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StateChange {
    /// A tracked system variable was set (`SESSION_TRACK_SYSTEM_VARIABLES`):
    /// its name and value as `SELECT @@name` shows it.
    Variable(String, String),
    /// The current database changed (`SESSION_TRACK_SCHEMA`).
    Schema(String),
}

/// Server status flags the protocol puts in OK and EOF packets; the
/// backend tells them through [`Backend::status_flags`].
pub mod status {
    #![allow(missing_docs)]
    pub const IN_TRANS: u16 = 0x0001;
    pub const AUTOCOMMIT: u16 = 0x0002;
    pub const MORE_RESULTS_EXISTS: u16 = 0x0008;
    pub const NO_GOOD_INDEX_USED: u16 = 0x0010;
    pub const NO_INDEX_USED: u16 = 0x0020;
    pub const CURSOR_EXISTS: u16 = 0x0040;
    pub const LAST_ROW_SENT: u16 = 0x0080;
    pub const DB_DROPPED: u16 = 0x0100;
    pub const NO_BACKSLASH_ESCAPES: u16 = 0x0200;
    pub const QUERY_WAS_SLOW: u16 = 0x0800;
    pub const PS_OUT_PARAMS: u16 = 0x1000;
    pub const IN_TRANS_READONLY: u16 = 0x2000;
    pub const SESSION_STATE_CHANGED: u16 = 0x4000;
}

/// Where a statement's answer goes. For one statement the backend calls
/// either `ok`, or `error`, or `columns`, then `row` for each row, then
/// `end_rows` (or `error` to end a result set that failed half way).
pub trait ResultSink {
    /// A result set starts with these columns.
    fn columns(&mut self, columns: &[ColumnMeta]) -> io::Result<()>;
    /// One row; `values.len()` equals the columns'.
    fn row(&mut self, values: &[SqlValue]) -> io::Result<()>;
    /// The result set is complete.
    fn end_rows(&mut self, info: &OkInfo) -> io::Result<()>;
    /// A statement without a result set succeeded.
    fn ok(&mut self, info: &OkInfo) -> io::Result<()>;
    /// The statement failed (also: a result set failed after its columns).
    fn error(&mut self, error: &SqlError) -> io::Result<()>;
    /// `LOAD DATA LOCAL`: asks the client for its file `name` and reads
    /// it, before anything else is answered. None: this client does not
    /// send files (it did not offer `CLIENT_LOCAL_FILES`), or the sink is
    /// not a client's. Dropping the reader reads what the client has not
    /// sent yet, so that the answer follows the file.
    fn local_infile(&mut self, name: &str) -> io::Result<Option<Box<dyn io::Read + '_>>> {
        let _ = name;
        Ok(None)
    }
    /// A sink inside the SQL node (INSERT … SELECT's) that takes rows as
    /// the engine's values, not as the protocol's: where they go, or None
    /// for a client's sink. Through the protocol a value is shown as its
    /// column is (a quotient rounded to its scale) and converted twice.
    fn values(&mut self) -> Option<&mut Vec<Vec<crate::engine::expr::Val>>> {
        None
    }
}

/// A prepared statement as the client learns it.
#[derive(Clone, Debug, PartialEq)]
pub struct Prepared {
    /// Its id on this connection (the protocol's statement id).
    pub id: u32,
    /// One per `?`, in order.
    pub params: Vec<ColumnMeta>,
    /// The result set's columns; empty when it has none.
    pub columns: Vec<ColumnMeta>,
}

/// Who is connecting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Login<'a> {
    /// The user name sent.
    pub user: &'a str,
    /// The client's address.
    pub host: IpAddr,
    /// The database asked for with `CLIENT_CONNECT_WITH_DB`.
    pub database: Option<&'a str>,
    /// The client set `CLIENT_FOUND_ROWS`: an UPDATE's affected rows are
    /// the rows it matched, not only those it changed (Django asks so).
    pub found_rows: bool,
    /// The client set `CLIENT_INTERACTIVE` (the `mysql` CLI): its session's
    /// `wait_timeout` starts as `interactive_timeout`.
    pub interactive: bool,
}

/// One connection's SQL side. Every method answers; none panics on bad
/// input. Dropping a backend aborts its open transaction.
pub trait Backend {
    /// The connection id (the handshake's and `CONNECTION_ID()`'s).
    fn connection_id(&self) -> u32;

    /// The stored credentials of `user` connecting from `host`, or the
    /// error to send (1045 when the account does not exist: the protocol
    /// sends the same 1045 for an unknown user and a wrong password).
    fn credentials(&mut self, login: &Login<'_>) -> Result<Credentials, SqlError>;

    /// Authentication passed: the session becomes this user's (and
    /// switches to `login.database`; an unknown database is 1049, a
    /// forbidden one 1044). Also called for `COM_CHANGE_USER`, which
    /// resets the session first.
    fn logged_in(&mut self, login: &Login<'_>) -> Result<(), SqlError>;

    /// `COM_QUERY`: one statement, or several separated by `;` when
    /// `multi` (the client set `CLIENT_MULTI_STATEMENTS`). Each statement's
    /// answer goes to `sink`, all but the last with `more_results` set;
    /// the first error ends the run. Only an I/O error of the sink is
    /// returned.
    fn query(&mut self, sql: &str, multi: bool, sink: &mut dyn ResultSink) -> io::Result<()>;

    /// `COM_STMT_PREPARE`.
    fn prepare(&mut self, sql: &str) -> Result<Prepared, SqlError>;

    /// `COM_STMT_EXECUTE` with its parameters decoded (long data already
    /// appended). The answer goes to `sink` as for `query`.
    fn execute(
        &mut self,
        id: u32,
        params: &[SqlValue],
        sink: &mut dyn ResultSink,
    ) -> io::Result<()>;

    /// Whether `COM_STMT_EXECUTE` of statement `id` may be started for a
    /// thread-pool batch now (see [`Backend::execute_deferrable`]). A
    /// cheap look: no statement runs.
    fn may_defer(&self, _id: u32) -> bool {
        false
    }

    /// `COM_STMT_EXECUTE` as [`Backend::execute`], except that a statement
    /// whose data-node requests can wait may stop with them prepared in
    /// its native session, unsent, and nothing written: true. The thread
    /// pool then sends the requests of every connection it started
    /// together and calls [`Backend::finish_deferred`]. False: answered.
    fn execute_deferrable(
        &mut self,
        id: u32,
        params: &[SqlValue],
        sink: &mut dyn ResultSink,
    ) -> io::Result<bool> {
        self.execute(id, params, sink).map(|()| false)
    }

    /// Whether `COM_QUERY` of `sql` may be started for a thread-pool batch
    /// now (see [`Backend::query_deferrable`]): one SELECT of one table
    /// with a WHERE, which may read one row by key. The backend may keep
    /// what it parsed for the `query_deferrable` that follows.
    fn may_defer_query(&mut self, _sql: &str) -> bool {
        false
    }

    /// `COM_QUERY` of a statement [`Backend::may_defer_query`] took, as
    /// [`Backend::execute_deferrable`] is to `execute`: true when the
    /// read's request waits, unsent, for [`Backend::finish_deferred`].
    fn query_deferrable(&mut self, sql: &str, sink: &mut dyn ResultSink) -> io::Result<bool> {
        self.query(sql, false, sink).map(|()| false)
    }

    /// Answers the statement [`Backend::execute_deferrable`] (or
    /// [`Backend::query_deferrable`]) deferred, its requests sent.
    fn finish_deferred(&mut self, sink: &mut dyn ResultSink) -> io::Result<()> {
        sink.error(&SqlError::new(
            crate::error::codes::UNKNOWN,
            "internal error of the SQL node: no statement was deferred",
        ))
    }

    /// `COM_STMT_CLOSE` (no answer is sent; an unknown id is ignored).
    fn close(&mut self, id: u32);

    /// Whether a statement id is prepared here (for `COM_STMT_RESET` and
    /// `COM_STMT_SEND_LONG_DATA`, which the protocol handles itself).
    fn has_statement(&self, id: u32) -> bool;

    /// `COM_INIT_DB`.
    fn use_database(&mut self, database: &str) -> Result<(), SqlError>;

    /// `COM_FIELD_LIST`: the columns of a table of the current database.
    fn field_list(&mut self, table: &str) -> Result<Vec<ColumnMeta>, SqlError>;

    /// `COM_RESET_CONNECTION`: roll back, drop prepared statements, user
    /// variables and session variables; keep the user and database.
    fn reset(&mut self);

    /// Status flags for OK and EOF packets (`status::IN_TRANS`, …).
    fn status_flags(&self) -> u16;

    /// The session state changes not yet reported (a command answered by
    /// the protocol's own OK: `COM_INIT_DB`), taken.
    fn take_state_changes(&mut self) -> Vec<StateChange> {
        Vec::new()
    }

    /// The connection is going away (`COM_QUIT`, a closed socket, an
    /// error): roll back whatever is open.
    fn disconnect(&mut self);

    /// Whether the server or a `KILL` asked this connection to end.
    fn killed(&self) -> bool;

    /// The client sent a command other than a query or a prepared
    /// statement's (a `COM_PING`, say): the connection is not idle.
    fn touched(&mut self) {}

    /// The client's handshake named this collation id as its character
    /// set (the session's `character_set_client`/`_results` follow it).
    fn client_collation(&mut self, _collation: u8) {}

    /// Whether statement text and string parameters arrive as latin1
    /// (`character_set_client`), to be converted to UTF-8.
    fn latin1_client(&self) -> bool {
        false
    }

    /// Whether results go out as latin1 (`character_set_results`).
    fn latin1_results(&self) -> bool {
        false
    }
}
