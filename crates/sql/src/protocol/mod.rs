//! MySQL's client/server protocol (the wire side of the SQL node): packets,
//! the handshake and authentication, commands, text and binary result
//! sets. It knows nothing of SQL: one [`Backend`] per connection answers,
//! through the [`ResultSink`](crate::backend::ResultSink) this module
//! implements.
//!
//! Written by hand rather than over a crate: the server-side crates
//! (`opensrv-mysql`, `msql-srv`) lack multi-statements, AuthMoreData (so no
//! real `caching_sha2_password`) and panic on unknown parameter types, and
//! `mysql_common` is built for clients (its packet types allocate per field
//! and it has no server state machine). The protocol is small; owning it
//! keeps every limit, every error and the one-`write`-per-answer buffering
//! in our hands.
//!
//! The rooms:
//! - `packet`: framing (16 MiB continuation, `max_allowed_packet`) and the
//!   field codecs;
//! - [`auth`]: the two plugins' scramble math and what an account stores;
//! - `connection`: the handshake and the command loop;
//! - `text` and `binary`: values as the text and binary protocols send
//!   them.
//!
//! Where it differs from MySQL's server:
//! - no TLS (an SSL request gets ERR 1043 naming it) and no compression;
//! - `caching_sha2_password` is fast auth only: the account's
//!   SHA256(SHA256(pw)) is stored, so full authentication (RSA or TLS) is
//!   never needed; a client that answers the handshake with another plugin
//!   than the one announced is switched to its own (to native for one
//!   Skarv does not speak);
//! - no cursors: `COM_STMT_EXECUTE` sends the whole result whatever cursor
//!   it asks for, and `COM_STMT_FETCH` is an unknown command (1047);
//! - statement text, names and user names must be UTF-8 (1300 otherwise);
//! - `COM_FIELD_LIST` ignores its wildcard; a failed `COM_CHANGE_USER`
//!   closes the connection;
//! - the OK and EOF packets of one `COM_QUERY` carry the status flags the
//!   backend reports once the whole query is done (a multi-statement's
//!   earlier results included).

pub mod auth;
mod binary;
mod connection;
pub(crate) mod latin1;
mod packet;
pub(crate) mod text;

/// A double of fixed decimals as MariaDB prints it (the engine's string of
/// such a double is the same text).
pub use text::fixed as fixed_decimals_text;
pub use text::float as float_text;
/// A value as the text protocol sends it for a column (a default shown as
/// the column's values are).
pub use text::render as render_text;

use std::io::{self, Read, Write};
use std::net::IpAddr;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Instant;

use crate::backend::Backend;
use crate::error::SqlError;

pub use auth::Plugin;

/// The version the handshake announces: clients parse the leading MySQL
/// version (8.0 features) and show the rest.
pub const SERVER_VERSION: &str = concat!("8.0.36-Skarv-", env!("CARGO_PKG_VERSION"));

/// MySQL's `max_allowed_packet` default (64 MiB): a longer packet from a
/// client is answered with ERR 1153 and its connection closed.
pub const MAX_ALLOWED_PACKET_BYTES_DEFAULT: usize = 64 << 20;

/// Longest message of an ERR packet, in bytes (MySQL's `MYSQL_ERRMSG_SIZE`).
pub const ERROR_MESSAGE_BYTES_MAX: usize = 512;

/// What every connection of a server shares.
#[derive(Debug)]
pub struct ServerStats {
    /// When the server started (`COM_STATISTICS`' uptime).
    pub started: Instant,
    /// Connections being served now.
    pub connections: AtomicUsize,
}

impl Default for ServerStats {
    fn default() -> ServerStats {
        ServerStats {
            started: Instant::now(),
            connections: AtomicUsize::new(0),
        }
    }
}

/// How connections are served.
#[derive(Clone, Debug)]
pub struct ProtocolOptions {
    /// Longest packet accepted from a client, in bytes.
    pub max_allowed_packet_bytes: usize,
    /// The version string of the handshake.
    pub server_version: String,
    /// The plugin the handshake announces (MySQL 5.7's
    /// `mysql_native_password` by default; a client answering with
    /// `caching_sha2_password` is verified with it all the same).
    pub auth_plugin: Plugin,
    /// Shared counters.
    pub stats: Arc<ServerStats>,
}

impl Default for ProtocolOptions {
    fn default() -> ProtocolOptions {
        ProtocolOptions {
            max_allowed_packet_bytes: MAX_ALLOWED_PACKET_BYTES_DEFAULT,
            server_version: SERVER_VERSION.to_owned(),
            auth_plugin: Plugin::Native,
            stats: Arc::new(ServerStats::default()),
        }
    }
}

/// Serves one client connection until it ends: the handshake, then one
/// command after another. `Backend::disconnect` is called however it ends,
/// unless the backend panicked (it is not called again while unwinding; the
/// caller drops it). An error of the stream is returned (the connection is
/// over either way).
pub fn serve_connection<S: Read + Write>(
    stream: S,
    backend: &mut dyn Backend,
    peer: IpAddr,
    options: &ProtocolOptions,
) -> io::Result<()> {
    connection::serve(stream, backend, peer, options)
}

/// How [`Wire::begin_command`] left a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Begun {
    /// Not taken (not whole, or not one to defer): [`Wire::command`]
    /// serves it.
    NotTaken,
    /// Answered already (the backend did not defer it); the answer is not
    /// written out yet.
    Answered,
    /// Its requests wait in the backend's native session to be sent.
    Deferred,
}

/// One client connection, owning its stream, served a step at a time: a
/// thread pool parks it while its client is idle and serves one command
/// at a time on whichever thread is free ([`serve_connection`] serves
/// one on the calling thread to its end).
pub struct Wire<S: Read + Write>(connection::Wire<S>);

impl<S: Read + Write> Wire<S> {
    /// A connection on `stream`, not yet greeted.
    pub fn new(stream: S, peer: IpAddr, options: &ProtocolOptions) -> io::Result<Wire<S>> {
        connection::Wire::new(stream, peer, options).map(Wire)
    }

    /// The handshake and login: true when the client is logged in; false
    /// when the connection is over (the client went away, or was refused
    /// and told why). The caller calls `Backend::disconnect` once the
    /// connection is over, whichever way it ends.
    pub fn login(
        &mut self,
        backend: &mut dyn Backend,
        options: &ProtocolOptions,
    ) -> io::Result<bool> {
        self.0.login(backend, options)
    }

    /// Reads one command (waiting for it) and writes its whole answer;
    /// false when the connection is over (the client quit, the stream
    /// ended or the backend was killed).
    pub fn command(
        &mut self,
        backend: &mut dyn Backend,
        options: &ProtocolOptions,
    ) -> io::Result<bool> {
        self.0.command(backend, options)
    }

    /// Starts the client's next command for a thread-pool batch, when it
    /// has come whole (reading the socket once if nothing is buffered: the
    /// caller knows it readable) and is an execute the backend may defer
    /// ([`crate::backend::Backend::may_defer`]). [`Begun::NotTaken`]
    /// leaves everything for [`Wire::command`]; otherwise
    /// [`Wire::finish_command`] completes it.
    pub fn begin_command(
        &mut self,
        backend: &mut dyn Backend,
        options: &ProtocolOptions,
    ) -> io::Result<Begun> {
        self.0.begin_command(backend, options)
    }

    /// Completes a command [`Wire::begin_command`] took: answers a
    /// deferred execute (its requests sent), writes the answer out; false
    /// when the connection is over, as for [`Wire::command`].
    pub fn finish_command(
        &mut self,
        backend: &mut dyn Backend,
        options: &ProtocolOptions,
        begun: Begun,
    ) -> io::Result<bool> {
        self.0.finish_command(backend, options, begun)
    }

    /// Whether the client's next command is already read into the buffer
    /// (pipelined): a poller of the socket would not see it, so it is to
    /// be served at once.
    pub fn has_buffered_input(&self) -> bool {
        self.0.has_buffered_input()
    }

    /// Whether all the client sent is taken (nothing buffered, and the
    /// last read from the socket came back short): a poller may wait for
    /// the socket's next edge without looking at it first.
    pub fn drained(&self) -> bool {
        self.0.drained()
    }

    /// The stream.
    pub fn stream(&self) -> &S {
        self.0.stream()
    }
}

/// Turns a client away: the handshake (so that it can read the reason),
/// then `error` as the answer to its login, then the end of the connection
/// (`max_connections`' 1040, a cluster that cannot be reached).
pub fn refuse_connection<S: Read + Write>(
    stream: S,
    error: &SqlError,
    options: &ProtocolOptions,
) -> io::Result<()> {
    connection::refuse(stream, error, options)
}

#[cfg(test)]
pub(crate) mod testing {
    //! An in-memory duplex stream for the protocol's unit tests.
    use std::io::{self, Read, Write};

    /// Reads `input`, collects what is written.
    pub struct Duplex {
        pub input: io::Cursor<Vec<u8>>,
        pub output: Vec<u8>,
    }

    impl Duplex {
        pub fn new(input: Vec<u8>) -> Duplex {
            Duplex {
                input: io::Cursor::new(input),
                output: Vec::new(),
            }
        }
    }

    impl Read for Duplex {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.input.read(buf)
        }
    }

    impl Write for Duplex {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.output.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
}
