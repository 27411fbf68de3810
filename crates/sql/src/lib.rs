//! The SQL node (`skarv sql`; NDB's SQL node, a `mysqld` whose tables live
//! in the cluster). It is an API node of the cluster that speaks MySQL's
//! client/server protocol, so the `mysql` client, drivers and sysbench work
//! against it unchanged.
//!
//! The parts, each a module of its own:
//! - [`protocol`]: the wire — packets, the handshake and authentication,
//!   commands, text and binary result sets. It knows nothing of SQL: it
//!   calls a [`backend::Backend`] per connection and writes what the
//!   backend hands its [`backend::ResultSink`].
//! - [`engine`]: SQL — statements parsed by `sqlparser` (MySQL dialect),
//!   lowered into Skarv's own plan types, and run with the native API
//!   (`skarv-client`); the catalog (databases, tables, users and grants, all
//!   kept in the cluster so every SQL node agrees); sessions and their
//!   variables and transactions.
//! - [`value`] and [`error`]: what the two share — values, column metadata
//!   and MySQL's error codes.
//! - `server`: the listener, the cluster connections and the threads of
//!   the connections (one each, or [`thread_pool`]).

pub mod backend;
pub mod engine;
pub mod error;
pub mod protocol;
mod server;
pub mod thread_pool;
pub mod value;

pub use server::{
    connection_pool_default, serve, serve_on, serve_with, thread_pool_size_default, ServerOptions,
    ThreadHandling, CONNECTION_POOL_MAX, MAX_CONNECTIONS_DEFAULT, MAX_CONNECTIONS_MAX,
};
