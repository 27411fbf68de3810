//! Error codes of transactions: the numbers the LDM, the TC and the client
//! agree on, each with its class (may a retry succeed?) and a default
//! message.
//!
//! Numbers are NDB's where NDB has the same error, so that people who know
//! NDB recognise them, and the classes are NDB's error statuses: temporary
//! (retry the transaction), permanent (it will fail again), unknown result
//! (it may have committed: check before retrying). Codes Skarv needs and
//! NDB has no number for are in the 9000s. The data dictionary's codes
//! (`datanode::dictionary`) are here too, with the same meanings.
//!
//! Decisions:
//! - DataMemory full (827) is **permanent**, as NDB classifies it
//!   (insufficient space): retrying at once does not help; space comes back
//!   only when rows are deleted or memory is added, which is an
//!   operator's or application's action, and an automatic retry loop on a
//!   full node would only add load.
//! - 4010 is **unknown result**: the TC's node failed while it held the
//!   transaction, and the commit may have reached the replicas (the
//!   dictionary uses 4010 the same way: read back to learn the outcome).
//!   When a TC knows that a node failure aborted the transaction, it says
//!   286, which is temporary.
//! - 284 (table not yet known to this TC) is temporary: the table's
//!   definition is still on its way to this node; 723 (no such table) is
//!   permanent.
//! - The application errors (bad value, value too long, NULL in a NOT NULL
//!   column, unknown column, key missing, primary key update) use NDB API
//!   numbers of the same meaning; their message is the generic one, and
//!   the data node's error message names the table and column.

/// What a client should do about an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// Retrying the transaction may succeed (overload, lock timeout, node
    /// recovery).
    Temporary,
    /// Retrying will fail the same way (no such row, bad value, schema).
    Permanent,
    /// The transaction may or may not have committed.
    UnknownResult,
}

/// Success.
pub const OK: u32 = 0;

// Data (NDB "no data found", "constraint violation", "insufficient space").
/// The row does not exist (NDB 626).
pub const NO_SUCH_ROW: u32 = 626;
/// An insert found a row with the same primary key (NDB 630).
pub const DUPLICATE_KEY: u32 = 630;
/// A unique index already holds the value (NDB 893).
pub const UNIQUE_VIOLATION: u32 = 893;
/// DataMemory is full (NDB 827; permanent, see the module doc).
pub const DATA_MEMORY_FULL: u32 = 827;

// Temporary: timeouts, resources, overload.
/// A lock wait exceeded TransactionDeadlockDetectionTimeout, probably a
/// deadlock (NDB 266).
pub const LOCK_TIMEOUT: u32 = 266;
/// The transaction was idle longer than TransactionInactiveTimeout and was
/// aborted (NDB 237).
pub const TRANSACTION_TIMEOUT: u32 = 237;
/// The TC has no free transaction record (NDB 4006, out of connection
/// objects; MaxNoOfConcurrentTransactions).
pub const OUT_OF_TRANSACTIONS: u32 = 4006;
/// The TC has no free operation record (NDB 233;
/// MaxNoOfConcurrentOperations).
pub const OUT_OF_TC_OPERATIONS: u32 = 233;
/// An LDM has no free operation record (NDB 1217).
pub const OUT_OF_LDM_OPERATIONS: u32 = 1217;
/// The TC has no free scan record (NDB 245, too many active scans).
pub const TOO_MANY_SCANS: u32 = 245;
/// The redo log is too full to take more writes (NDB 410).
pub const REDO_OVERLOADED: u32 = 410;
/// Send buffers towards another node are full (NDB 1218).
pub const SEND_BUFFERS_OVERLOADED: u32 = 1218;
/// A node failure aborted the transaction; nothing was committed (NDB 286).
pub const NODE_FAILURE_ABORTED: u32 = 286;
/// The data node is stopping on purpose (a graceful stop or restart): its
/// TC starts no new transaction; retry on another node (NDB 280).
pub const NODE_SHUTDOWN: u32 = 280;
/// The table's definition has not reached this TC yet (NDB 284).
pub const TABLE_NOT_YET_KNOWN: u32 = 284;

// Unknown result.
/// The TC's node failed with the transaction in its hands; it may have
/// committed (NDB 4010).
pub const NODE_FAILURE: u32 = 4010;
/// No data node could be reached (NDB 4009, cluster failure).
pub const CLUSTER_FAILURE: u32 = 4009;
/// No answer within the request timeout (NDB 4012).
pub const REQUEST_TIMEOUT: u32 = 4012;

// Schema (the dictionary's codes, same meanings as in datanode::dictionary).
/// Busy with another schema operation (NDB 701).
pub const BUSY: u32 = 701;
/// A table definition does not decode or breaks a limit (NDB 703).
pub const BAD_DEFINITION: u32 = 703;
/// No more table ids or room for tables (NDB 707).
pub const TOO_MANY_TABLES: u32 = 707;
/// The node is not a started cluster member yet (NDB 711).
pub const NOT_STARTED: u32 = 711;
/// A table of that name exists (NDB 721).
pub const ALREADY_EXISTS: u32 = 721;
/// No such table (NDB 723).
pub const NO_SUCH_TABLE: u32 = 723;
/// The alter changes something that cannot be altered (NDB 741).
pub const UNSUPPORTED_ALTER: u32 = 741;
/// The request was built for another version of the table (NDB 241):
/// refresh the table's metadata.
pub const WRONG_SCHEMA_VERSION: u32 = 241;
/// A member could not prepare a schema change; nothing changed (NDB 4011).
pub const PREPARE_FAILED: u32 = 4011;
/// No such index on the table (NDB 4243, index not found).
pub const NO_SUCH_INDEX: u32 = 4243;

// Application errors: the request does not fit the table.
/// No such column (NDB 4004, attribute not found).
pub const NO_SUCH_COLUMN: u32 = 4004;
/// NULL for a NOT NULL column (NDB 4203).
pub const NULL_NOT_ALLOWED: u32 = 4203;
/// A value longer than its column (NDB 4209, length error).
pub const VALUE_TOO_LONG: u32 = 4209;
/// A value of the wrong type, out of range, too precise, or not a valid
/// date (NDB 4217 area; Skarv's choice of number).
pub const BAD_VALUE: u32 = 4217;
/// The op does not give every key column (NDB 4116, operation not defined
/// correctly, probably missing a key).
pub const KEY_MISSING: u32 = 4116;
/// An update sets a primary-key column (NDB 4202).
pub const PRIMARY_KEY_UPDATE: u32 = 4202;
/// An operation that is not well-formed for its table (a value for a read,
/// a missing column on insert, a column given twice, a bad partition).
pub const BAD_OPERATION: u32 = 9001;
/// A filter that does not fit its table (incomparable columns, LIKE on a
/// non-character column).
pub const BAD_FILTER: u32 = 9002;
/// A scan id the TC does not know (closed, or never opened).
pub const UNKNOWN_SCAN: u32 = 9003;
/// The request's bytes are not a valid batch (a bug or corruption).
pub const MALFORMED_REQUEST: u32 = 9004;
/// The request breaks a size limit (ops per batch, batch bytes).
pub const REQUEST_TOO_LARGE: u32 = 9005;
/// `wait_durable`: the commit's global checkpoint was lost: a system
/// restart went back below it (the commit is not in the database).
pub const COMMIT_LOST_BY_RESTART: u32 = 9006;
/// `wait_durable`: whether the commit survived cannot be told (the cluster
/// restarted more than once since, or the commit came before a restart the
/// TC knows no more of); read the row to find out.
pub const DURABILITY_UNKNOWN: u32 = 9007;
/// A subscription subscribed again at a restarted node cannot go on: no
/// node of that node's group kept it (the whole group, or the cluster,
/// restarted since it began). No longer sent: since wire version 18 the
/// node answers `SubLostRef`, naming the restart, and the client goes on
/// (docs/events.md, "A whole-cluster restart"); the number stays taken.
pub const SUBSCRIPTION_LOST: u32 = 9008;
/// A data node could not write its share of a backup: its data file could
/// not be created, written or synced (the message names the file and the
/// I/O error; NDB: the 13xx backup errors).
pub const BACKUP_FILE_FAILED: u32 = 9009;
/// A locking read that must not wait (`ops::NO_WAIT`, a scan's
/// `LockWait::NoWait`: `FOR UPDATE NOWAIT`) found a row another
/// transaction holds. Temporary: the holder's end frees it. Only the
/// operation fails; the transaction goes on.
pub const LOCK_BUSY: u32 = 9010;

/// One entry of the error table.
struct Entry {
    code: u32,
    class: ErrorClass,
    message: &'static str,
}

const fn entry(code: u32, class: ErrorClass, message: &'static str) -> Entry {
    Entry {
        code,
        class,
        message,
    }
}

use ErrorClass::{Permanent, Temporary, UnknownResult};

/// Every code with its class and message.
const ERRORS: &[Entry] = &[
    entry(OK, Permanent, "no error"),
    entry(NO_SUCH_ROW, Permanent, "no row with this key"),
    entry(
        DUPLICATE_KEY,
        Permanent,
        "a row with this primary key exists already",
    ),
    entry(
        UNIQUE_VIOLATION,
        Permanent,
        "the value exists already in a unique index",
    ),
    entry(
        DATA_MEMORY_FULL,
        Permanent,
        "the table is full: DataMemory is used up",
    ),
    entry(
        LOCK_TIMEOUT,
        Temporary,
        "lock wait timed out, probably a deadlock: retry the transaction",
    ),
    entry(
        TRANSACTION_TIMEOUT,
        Temporary,
        "the transaction was idle too long and was aborted",
    ),
    entry(
        OUT_OF_TRANSACTIONS,
        Temporary,
        "out of transaction records in the transaction coordinator",
    ),
    entry(
        OUT_OF_TC_OPERATIONS,
        Temporary,
        "out of operation records in the transaction coordinator",
    ),
    entry(
        OUT_OF_LDM_OPERATIONS,
        Temporary,
        "out of operation records in the local data manager",
    ),
    entry(
        TOO_MANY_SCANS,
        Temporary,
        "too many scans open in the transaction coordinator",
    ),
    entry(
        REDO_OVERLOADED,
        Temporary,
        "the redo log is overloaded: retry later",
    ),
    entry(
        SEND_BUFFERS_OVERLOADED,
        Temporary,
        "send buffers to another node are full: retry later",
    ),
    entry(
        NODE_FAILURE_ABORTED,
        Temporary,
        "a node failure aborted the transaction",
    ),
    entry(
        NODE_SHUTDOWN,
        Temporary,
        "the data node is shutting down: retry the transaction on another node",
    ),
    entry(
        TABLE_NOT_YET_KNOWN,
        Temporary,
        "the table is not yet known to this transaction coordinator",
    ),
    entry(
        NODE_FAILURE,
        UnknownResult,
        "a node failed during the transaction: it may have committed",
    ),
    entry(
        CLUSTER_FAILURE,
        UnknownResult,
        "no data node could be reached",
    ),
    entry(
        REQUEST_TIMEOUT,
        UnknownResult,
        "no answer from the data node in time",
    ),
    entry(
        COMMIT_LOST_BY_RESTART,
        Permanent,
        "the commit was lost: a system restart went back to an earlier global checkpoint",
    ),
    entry(
        DURABILITY_UNKNOWN,
        UnknownResult,
        "unknown whether the commit survived the cluster's restarts: read the row to find out",
    ),
    entry(
        SUBSCRIPTION_LOST,
        Permanent,
        "the subscription was lost: its node group restarted since it began",
    ),
    entry(
        BACKUP_FILE_FAILED,
        Permanent,
        "a data node could not write its backup file",
    ),
    entry(
        LOCK_BUSY,
        Temporary,
        "the row is locked by another transaction, and the read does not wait",
    ),
    entry(BUSY, Temporary, "busy with another schema operation"),
    entry(BAD_DEFINITION, Permanent, "invalid table definition"),
    entry(TOO_MANY_TABLES, Permanent, "no room for more tables"),
    entry(NOT_STARTED, Temporary, "the node is not started yet"),
    entry(
        ALREADY_EXISTS,
        Permanent,
        "a table of that name exists already",
    ),
    entry(NO_SUCH_TABLE, Permanent, "no such table"),
    entry(UNSUPPORTED_ALTER, Permanent, "unsupported alter table"),
    entry(
        WRONG_SCHEMA_VERSION,
        Permanent,
        "the table has changed: refresh its metadata",
    ),
    entry(
        PREPARE_FAILED,
        Temporary,
        "a node could not prepare the schema change; nothing changed",
    ),
    entry(NO_SUCH_INDEX, Permanent, "no such index"),
    entry(NO_SUCH_COLUMN, Permanent, "no such column"),
    entry(
        NULL_NOT_ALLOWED,
        Permanent,
        "NULL given for a NOT NULL column",
    ),
    entry(VALUE_TOO_LONG, Permanent, "value too long for its column"),
    entry(BAD_VALUE, Permanent, "value does not fit its column"),
    entry(
        KEY_MISSING,
        Permanent,
        "the operation does not give the whole key",
    ),
    entry(
        PRIMARY_KEY_UPDATE,
        Permanent,
        "an update cannot change the primary key",
    ),
    entry(
        BAD_OPERATION,
        Permanent,
        "the operation does not fit its table",
    ),
    entry(
        BAD_FILTER,
        Permanent,
        "the scan filter does not fit its table",
    ),
    entry(UNKNOWN_SCAN, Permanent, "no such scan"),
    entry(MALFORMED_REQUEST, Permanent, "malformed request"),
    entry(REQUEST_TOO_LARGE, Permanent, "request too large"),
];

fn lookup(code: u32) -> Option<&'static Entry> {
    ERRORS.iter().find(|e| e.code == code)
}

/// The class of a code. A code this build does not know is an unknown
/// result, as NDB treats unknown codes: the safe assumption for a client.
pub fn class(code: u32) -> ErrorClass {
    lookup(code).map_or(UnknownResult, |e| e.class)
}

/// The default message of a code.
pub fn message(code: u32) -> &'static str {
    lookup(code).map_or("unknown error code", |e| e.message)
}

/// What a client is told of a transaction failed by operation `op_index`,
/// answered with `code`, on table `table_id` (`table`: its name, when the
/// answering node knows it). The TC and an LDM answering a read itself
/// word it alike.
pub fn failed_op_message(table: Option<&str>, table_id: u32, op_index: u32, code: u32) -> String {
    let message = message(code);
    match table {
        Some(name) => format!("table `{name}`, operation {op_index}: {message}"),
        None => format!("table `id {table_id}`, operation {op_index}: {message}"),
    }
}

/// The message of a reply whose results do not fit one batch.
pub fn reply_too_large_message(e: &crate::ProtoError) -> String {
    format!("the reply does not fit in one batch: {e}")
}

/// Whether the code is in the table.
pub fn is_known(code: u32) -> bool {
    lookup(code).is_some()
}

/// Every known code, for tests and documentation.
pub fn codes() -> impl Iterator<Item = u32> {
    ERRORS.iter().map(|e| e.code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_classified() {
        let mut seen = std::collections::HashSet::new();
        for code in codes() {
            assert!(seen.insert(code), "code {code} twice");
            assert!(!message(code).is_empty());
        }
        assert_eq!(class(LOCK_TIMEOUT), Temporary);
        assert_eq!(class(REDO_OVERLOADED), Temporary);
        assert_eq!(class(NO_SUCH_ROW), Permanent);
        assert_eq!(class(NODE_FAILURE), UnknownResult);
        assert_eq!(class(123_456), UnknownResult);
        assert_eq!(message(123_456), "unknown error code");
    }

    #[test]
    fn dictionary_codes_keep_their_numbers() {
        // The numbers crates/datanode/src/dictionary uses.
        let dictionary = [
            (BUSY, 701),
            (BAD_DEFINITION, 703),
            (TOO_MANY_TABLES, 707),
            (NOT_STARTED, 711),
            (ALREADY_EXISTS, 721),
            (NO_SUCH_TABLE, 723),
            (UNSUPPORTED_ALTER, 741),
            (WRONG_SCHEMA_VERSION, 241),
            (NODE_FAILURE, 4010),
            (NODE_SHUTDOWN, 280),
            (PREPARE_FAILED, 4011),
        ];
        for (ours, theirs) in dictionary {
            assert_eq!(ours, theirs);
        }
        for temporary in [BUSY, NOT_STARTED, PREPARE_FAILED] {
            assert_eq!(class(temporary), Temporary);
        }
    }
}
