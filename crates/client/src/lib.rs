//! `skarv-client`: the native API of Skarv (DESIGN.md §6; NDB's NDB API).
//!
//! A program becomes an *API node* of the cluster with [`Cluster::connect`]
//! (the connect string is the management server's `host:port`). Each user
//! thread opens a [`Session`] (NDB's `Ndb` object), starts transactions on
//! it — with a key hint, so that they run on the data node holding the
//! key's primary replica — defines operations and executes them in batches:
//! every `execute` is one request and one reply, whatever the number of
//! operations. Scans are iterators that fetch batches. Many transactions
//! can be in flight at once through [`Session::prepare`], [`Session::send`]
//! and [`Session::poll`] (or [`Transaction::execute_async`] as a future;
//! [`Session::prepare_tagged`] and [`Session::take_completed`] do without
//! boxed callbacks).
//!
//! ```no_run
//! use skarv_client::{Cluster, ExecMode, LockMode, Value};
//! use skarv_client::schema_types::{Collation, Column, ColumnType, TableDef};
//!
//! # fn main() -> Result<(), skarv_client::Error> {
//! let cluster = Cluster::connect("127.0.0.1:1186")?;
//! let session = cluster.session()?;
//! let def = TableDef::new("kv", 0, vec![
//!     Column::new("k", ColumnType::BigInt { unsigned: false }),
//!     Column::new("v", ColumnType::VarChar { max: 100, collation: Collation::Utf8mb4Bin }),
//! ])
//! .primary_key(vec![0])
//! .partitions(0);
//! session.create_table(&def)?;
//! let kv = session.table("kv")?;
//!
//! let tx = session.begin_with_hint(&kv, &[Value::Int(1)])?;
//! tx.insert(&kv, &[("k", Value::Int(1)), ("v", Value::String("one".into()))])?;
//! tx.execute(ExecMode::Commit)?;
//!
//! let tx = session.begin()?;
//! let read = tx.read(&kv, &[Value::Int(1)], LockMode::Committed)?;
//! let outcome = tx.execute(ExecMode::Commit)?;
//! assert_eq!(outcome.row(read).and_then(|r| r.get("v")), Some(&Value::String("one".into())));
//! # Ok(())
//! # }
//! ```
//!
//! Table options are fields of the [`schema_types::TableDef`] given to
//! [`Session::create_table`]: the partition count, `READ_BACKUP`
//! (`.read_backup(true)`: committed reads by key are served by any
//! replica, the coordinator's own first) and `FULLY_REPLICATED`
//! (`.fully_replicated(true)`: every data node holds the whole table;
//! implies `READ_BACKUP`). For such tables
//! [`Session::begin_with_read_hint`] starts a transaction that begins with
//! a committed read on one of the key's replicas, spread over them, rather
//! than always on the primary (docs/transactions.md, "Placement and
//! routing").
//!
//! BLOB and TEXT values of any size are written and read whole
//! (`Value::Bytes`, `Value::String`); the client keeps their parts in the
//! hidden parts tables inside the same transaction, which may take several
//! requests (docs/transactions.md, "BLOB and TEXT"; at most
//! [`BLOB_BYTES_MAX`] per value).
//!
//! A commit's [`Outcome::epoch`] is its [`Epoch`]: the global checkpoint
//! ([`Epoch::hi`], the unit of durability) and the micro-GCP within it
//! ([`Epoch::lo`], every `TimeBetweenEpochs`). A commit is answered once it
//! is in memory on every replica; [`Session::wait_durable`] with its epoch
//! returns once its global checkpoint is on disk on every live data node
//! (docs/transactions.md, "Global checkpoints").
//!
//! Errors ([`Error`]) carry NDB-style codes and a class: temporary (retry
//! the transaction), permanent, or unknown result (it may have committed).
//! Bad input — an unknown table or column, a value of the wrong type or
//! too long, a missing key — is found on the client before anything is
//! sent, and the session stays usable.
//!
//! Threads of a cluster connection (seed 003): a connection thread
//! (connects, heartbeats), a send thread (finishes writes that user threads
//! could not), a receive thread (receives while more than
//! `recv_thread_activation_threshold` user threads wait; below that a
//! waiting user thread receives for everybody, polling without blocking
//! for a short adaptive spin first: `ClusterOptions::spin_method`), and a
//! wakeup thread.

#![warn(missing_docs)]

mod backup;
mod blob;
mod cluster;
mod dbinfo;
mod epoch;
mod error;
pub mod events;
mod journal;
mod link;
mod pool;
mod pushed;
mod receiver;
pub mod routing;
mod scan;
mod schema;
mod session;
mod stats;
mod transaction;

pub use ::schema::{Value, ValueRef};
pub use backup::{BackupFragProgress, BackupFragRequest, BackupLogProgress, BackupLogRequest};
pub use blob::BLOB_BYTES_MAX;
pub use cluster::{
    Cluster, ClusterOptions, ClusterStats, TableCache, CLIENT_SPIN_DEFAULT_US, SESSIONS_MAX,
};
pub use dbinfo::DbinfoRows;
pub use epoch::Epoch;
pub use error::{Error, ErrorClass, Result};
pub use events::{
    ChangeKind, EpochChanges, Event, Images, RowChange, SchemaChange, SchemaKind, SubscribeOptions,
    Subscription, SubscriptionState,
};
pub use journal::JOURNAL_BYTES_MAX;
/// How a poll owner spins for its reply (`ClusterOptions::spin_method`):
/// the data nodes' `SpinMethod`.
pub use kernel::thread_config::SpinMethod;
pub use link::SEND_BUFFER_MAX_BYTES;
pub use pool::ClusterPool;
pub use proto::error as codes;
pub use proto::scan::AggregateFn;
pub use proto::{CmpOp, Filter};
pub use pushed::{JoinedRow, PushedChild, PushedIter, PushedKey};
pub use scan::{close_scans, ScanIter, ScanOptions, TableStats, SCAN_BATCH_ROWS_DEFAULT};
pub use schema::Table;
pub use session::{send_all, Callback, Session, IN_FLIGHT_MAX};
pub use stats::SessionStats;
pub use transaction::{
    ExecMode, ExecuteFuture, Later, LockMode, LockWait, Op, OpHandle, OpResult, Outcome, Row,
    Transaction,
};
pub use transport::stream::LinkKind;

/// The schema types a table definition is made of (from the `schema` crate).
pub mod schema_types {
    pub use ::schema::{
        Collation, Column, ColumnType, Date, DateTime, Decimal, IndexDef, IndexKind, TableDef,
    };
}
