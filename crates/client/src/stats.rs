//! Per-session counters, as NDB's `Ndb` object keeps them (the figures
//! behind MySQL Cluster's `Ndb_api_*_count_session` status variables).
//!
//! A session belongs to one thread at a time (it is not `Sync`), so its
//! counters are plain integers in `Cell`s: counting costs a load and a
//! store, no atomic and no shared cache line. Whoever wants a figure for
//! many sessions (an SQL node's `Ndb_api_*_count`) sums the snapshots
//! ([`Session::stats`](crate::Session::stats)) the sessions' threads hand
//! it.

use std::cell::Cell;

/// Defines [`SessionStats`] (the snapshot) and `Counts` (the cells) with
/// the same fields, in NDB's order, each with NDB's name.
macro_rules! session_counters {
    ($($(#[doc = $doc:literal])* $field:ident,)*) => {
        /// A snapshot of one session's counters (see the module doc). Each
        /// field is NDB's counter of the same name (`Ndb_api_<name>_count`).
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct SessionStats {
            $($(#[doc = $doc])* pub $field: u64,)*
        }

        impl SessionStats {
            /// The counters' names, as NDB spells them inside
            /// `Ndb_api_<name>_count`, in NDB's order.
            pub const NAMES: &'static [&'static str] = &[$(stringify!($field),)*];

            /// The values, in the order of [`SessionStats::NAMES`].
            pub fn values(&self) -> [u64; SessionStats::NAMES.len()] {
                [$(self.$field,)*]
            }

            /// Adds `other`'s counts to these (a sum over sessions).
            pub fn add(&mut self, other: &SessionStats) {
                $(self.$field = self.$field.wrapping_add(other.$field);)*
            }
        }

        /// The live counters of a session.
        #[derive(Default, Debug)]
        pub(crate) struct Counts {
            $(pub $field: Cell<u64>,)*
        }

        impl Counts {
            /// What they say now.
            pub fn snapshot(&self) -> SessionStats {
                SessionStats {
                    $($field: self.$field.get(),)*
                }
            }
        }
    };
}

session_counters! {
    /// Times the session's thread waited for the answer of an execute
    /// (a round trip of key operations, or a commit).
    wait_exec_complete,
    /// Times it waited for a batch of scan rows.
    wait_scan_result,
    /// Times it waited for the answer of a schema request.
    wait_meta_request,
    /// Nanoseconds spent in those waits.
    wait_nanos,
    /// Bytes the session sent to data nodes (signals, framed).
    bytes_sent,
    /// Bytes of answers it received: the rows and results of key and
    /// scan replies (signal headers are not counted).
    bytes_received,
    /// Transactions started.
    trans_start,
    /// Transactions committed.
    trans_commit,
    /// Transactions rolled back, asked or on an error.
    trans_abort,
    /// Transactions closed (dropped).
    trans_close,
    /// Operations by primary key (reads and writes).
    pk_op,
    /// Operations through a unique index.
    uk_op,
    /// Full-table scans started.
    table_scan,
    /// Ordered-index scans started.
    range_scan,
    /// Scans pruned to one partition (counted with the table or range
    /// scans too).
    pruned_scan,
    /// Batches of scan rows received.
    scan_batch,
    /// Rows read, by key or by scan.
    read_row,
    /// Rows read by a scan pruned to a partition that has a replica on
    /// the transaction's TC node (key reads are not counted here).
    trans_local_read_row,
    /// Execute requests sent (`TcKeyReq`): batches of key operations.
    exec,
    /// Pushed joins defined (NDB's `Ndb_pushed_queries_defined`).
    pushed_queries_defined,
    /// Pushed joins defined that were not run pushed (`Ndb_pushed_queries_dropped`).
    pushed_queries_dropped,
    /// Pushed joins run (`Ndb_pushed_queries_executed`).
    pushed_queries_executed,
    /// Rows pushed joins read, of every table of the join (`Ndb_pushed_reads`).
    pushed_reads,
}

/// Adds `n` to a counter.
#[inline]
pub(crate) fn add(counter: &Cell<u64>, n: u64) {
    counter.set(counter.get().wrapping_add(n));
}

/// Adds one to a counter.
#[inline]
pub(crate) fn bump(counter: &Cell<u64>) {
    add(counter, 1);
}
