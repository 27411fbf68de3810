//! Transactions: autocommit, `BEGIN`/`COMMIT`/`ROLLBACK`, and the native
//! API's errors as MySQL errors.
//!
//! A connection holds at most one native [`Transaction`] across
//! statements. Outside an explicit transaction (and with autocommit on)
//! every statement begins its own and commits it at its end; a statement
//! that fails rolls its transaction back, so it leaves nothing. Inside one
//! (`BEGIN`, or autocommit off) statements execute without committing and
//! `COMMIT` commits. As in NDB, an error that aborts the native transaction
//! (a lock wait timeout, a node failure, a duplicate key) rolls back the
//! whole transaction, not only the statement.

use skarv_client::{codes as native, ExecMode, Transaction};
use sqlparser::ast::{Statement, TransactionAccessMode, TransactionMode};

use super::{Answered, Conn};
use crate::backend::{status, OkInfo};
use crate::error::{codes, SqlError, SqlResult};

/// MySQL's ER_TABLE_DEF_CHANGED.
pub(crate) const TABLE_DEF_CHANGED: u16 = 1412;

/// A connection's transaction state.
#[derive(Default)]
pub struct TxState<'s> {
    /// The open native transaction (none until a statement needs one).
    pub tx: Option<Transaction<'s>>,
    /// `BEGIN`/`START TRANSACTION` was run and not yet ended.
    pub explicit: bool,
    /// The open transaction is READ ONLY (`START TRANSACTION READ ONLY`,
    /// `SET TRANSACTION READ ONLY` before it, or the session's
    /// `transaction_read_only`).
    pub read_only: bool,
    /// `SET TRANSACTION READ ONLY|READ WRITE`: the next transaction's
    /// access mode, used once.
    pub next_read_only: Option<bool>,
    /// The open transaction wrote: its reads lock (shared), so that they
    /// see its own writes.
    pub wrote: bool,
    /// Write statements run in the open transaction, so far.
    pub writes: u64,
    /// `SAVEPOINT`s of the open transaction, oldest first.
    savepoints: Vec<Savepoint>,
    /// Operations pending in the transaction when the running statement
    /// took it (deferred writes of earlier statements, under
    /// `transaction_allow_batching`).
    pending_at_start: usize,
}

impl TxState<'_> {
    /// `status::IN_TRANS` while a transaction is open.
    pub fn status_flags(&self) -> u16 {
        let mut flags = 0;
        if self.explicit || self.tx.is_some() {
            flags |= status::IN_TRANS;
        }
        if self.explicit && self.read_only {
            flags |= status::IN_TRANS_READONLY;
        }
        flags
    }
}

/// A `SAVEPOINT` of the open transaction.
struct Savepoint {
    name: String,
    /// `TxState::writes` when it was set.
    writes: u64,
    /// The native transaction's journal mark when it was set
    /// (`Transaction::journal_mark`); 0 when no native transaction was
    /// open yet (the one [`take`] opens journals from its start).
    mark: usize,
}

/// Whether statements run inside a transaction that outlives them
/// (`BEGIN`, or autocommit off).
pub fn in_transaction(conn: &Conn<'_>) -> bool {
    conn.tx.explicit || !conn.session.autocommit
}

/// Whether writes are deferred: inside a transaction with
/// `transaction_allow_batching` on, a statement's writes stay in the
/// native transaction, unsent, until a read, a scan or the commit needs
/// them, so `BEGIN; INSERT; …; INSERT; COMMIT` is one round trip (seed
/// 001). As in NDB, an error of a deferred write (a duplicate key) is
/// reported by the statement that sends it, and it ends the transaction.
pub fn batching(conn: &Conn<'_>) -> bool {
    in_transaction(conn) && conn.session.vars.hot().transaction_allow_batching
}

/// `BEGIN`, `COMMIT`, `ROLLBACK`.
pub fn statement(conn: &mut Conn<'_>, statement: &Statement) -> SqlResult<Answered> {
    match statement {
        Statement::StartTransaction { modes, .. } => {
            let text = statement.to_string().to_ascii_uppercase();
            begin(
                conn,
                access_mode(modes),
                text.contains("CONSISTENT SNAPSHOT"),
            )
        }
        Statement::Commit { chain, .. } => {
            commit(conn)?;
            if *chain {
                conn.tx.explicit = true;
            }
            Ok(Answered::Ok(OkInfo::default()))
        }
        Statement::Rollback {
            savepoint: Some(name),
            ..
        } => rollback_to_savepoint(conn, &name.value),
        Statement::Savepoint { name } => {
            // Outside a transaction a savepoint ends with its statement.
            if in_transaction(conn) {
                // From the first savepoint on, the transaction keeps the
                // rows' images from before its writes, which a rollback
                // to a savepoint puts back.
                // Writes deferred by `transaction_allow_batching` are
                // sent first (`journal_mark`): an error of theirs ends the
                // transaction, as at any statement that sends them.
                let marked = conn.tx.tx.as_ref().map_or(Ok(0), |tx| tx.journal_mark());
                let mark = match marked {
                    Ok(mark) => mark,
                    Err(e) => {
                        rollback(conn);
                        let mut error = native_error(&e);
                        error
                            .message
                            .push_str(" (the whole transaction was rolled back)");
                        return Err(error);
                    }
                };
                let writes = conn.tx.writes;
                let savepoints = &mut conn.tx.savepoints;
                savepoints.retain(|s| !s.name.eq_ignore_ascii_case(&name.value));
                savepoints.push(Savepoint {
                    name: name.value.clone(),
                    writes,
                    mark,
                });
            }
            Ok(Answered::Ok(OkInfo::default()))
        }
        Statement::ReleaseSavepoint { name } => {
            let at = savepoint_at(conn, &name.value)?;
            conn.tx.savepoints.truncate(at);
            if conn.tx.savepoints.is_empty() {
                if let Some(tx) = &conn.tx.tx {
                    tx.journal_stop();
                }
            }
            Ok(Answered::Ok(OkInfo::default()))
        }
        Statement::Rollback { chain, .. } => {
            rollback(conn);
            if *chain {
                conn.tx.explicit = true;
            }
            Ok(Answered::Ok(OkInfo::default()))
        }
        other => Err(SqlError::unsupported(format_args!("`{other}`"))),
    }
}

/// Where savepoint `name` is among the open transaction's; 1305 when it
/// is not there.
fn savepoint_at(conn: &Conn<'_>, name: &str) -> SqlResult<usize> {
    conn.tx
        .savepoints
        .iter()
        .position(|s| s.name.eq_ignore_ascii_case(name))
        .ok_or_else(|| {
            SqlError::new(
                codes::SP_DOES_NOT_EXIST,
                format!("SAVEPOINT {name} does not exist"),
            )
        })
}

/// `ROLLBACK TO [SAVEPOINT] name`: the rows written since the savepoint
/// are put back as they were then, from the native transaction's journal
/// (`skarv_client::Transaction::rollback_to_mark`: one request deletes
/// them, one more inserts their old images), and the transaction goes on
/// with its earlier writes and its locks (InnoDB keeps the locks too).
/// No write since: nothing is sent (mysqldump's `--single-transaction`
/// sets a savepoint before each table it reads and rolls back to it
/// after). When the journal cannot take the writes back, or putting them
/// back fails, the whole transaction is rolled back and the statement
/// fails: the writes the client wanted undone must never reach a later
/// COMMIT (Sequelize commits after a failed rollback to a savepoint).
fn rollback_to_savepoint(conn: &mut Conn<'_>, name: &str) -> SqlResult<Answered> {
    let at = savepoint_at(conn, name)?;
    let Savepoint { writes, mark, .. } = conn.tx.savepoints[at];
    if conn.tx.writes != writes {
        if let Some(tx) = &conn.tx.tx {
            if let Err(why) = tx.journal_covers(mark) {
                rollback(conn);
                return Err(SqlError::unsupported(format_args!(
                    "ROLLBACK TO SAVEPOINT {name}: {why}, so the whole transaction was \
                     rolled back"
                )));
            }
            if let Err(e) = tx.rollback_to_mark(mark) {
                rollback(conn);
                let mut error = native_error(&e);
                error.message.push_str(&format!(
                    " (while rolling back to SAVEPOINT {name}: the whole transaction was \
                     rolled back)"
                ));
                return Err(error);
            }
        }
        conn.tx.writes = writes;
    }
    conn.tx.savepoints.truncate(at + 1);
    Ok(Answered::Ok(OkInfo::default()))
}

/// `BEGIN` / `START TRANSACTION [READ ONLY] [WITH CONSISTENT SNAPSHOT]`
/// (the session's statement splitter calls it for the forms `sqlparser`
/// does not parse): commits what is open, as MySQL does, and opens an
/// explicit transaction. A consistent snapshot is not something Skarv
/// reads give: a warning says so.
pub fn begin(conn: &mut Conn<'_>, read_only: Option<bool>, snapshot: bool) -> SqlResult<Answered> {
    let next = conn.tx.next_read_only.take();
    commit(conn)?;
    conn.tx.explicit = true;
    conn.tx.read_only = read_only
        .or(next)
        .unwrap_or_else(|| session_read_only(conn));
    if snapshot {
        warn(
            conn,
            codes::UNKNOWN,
            "WITH CONSISTENT SNAPSHOT was ignored: Skarv reads the latest committed rows".into(),
        );
    }
    Ok(Answered::Ok(OkInfo::default()))
}

/// `LOCK TABLES t READ [LOCAL] | [LOW_PRIORITY] WRITE, …` (mysqldump's,
/// and a dump's around its INSERTs): commits what is open, as MySQL's
/// does, and checks that the tables exist (1146). It takes no lock, as
/// NDB's table locks do not reach the cluster's other SQL nodes: other
/// sessions go on reading and writing the tables (docs/sql.md).
pub fn lock_tables(
    conn: &mut Conn<'_>,
    tables: &[sqlparser::ast::LockTable],
) -> SqlResult<Answered> {
    commit(conn)?;
    for t in tables {
        let name = sqlparser::ast::ObjectName::from(vec![t.table.clone()]);
        super::exec::source_of(conn, &name)?;
    }
    conn.session.tables_locked = true;
    Ok(Answered::Ok(OkInfo::default()))
}

/// `UNLOCK TABLES`: after LOCK TABLES, commits what is open (MySQL's).
pub fn unlock_tables(conn: &mut Conn<'_>) -> SqlResult<Answered> {
    if std::mem::take(&mut conn.session.tables_locked) {
        commit(conn)?;
    }
    Ok(Answered::Ok(OkInfo::default()))
}

/// Leaves a warning for the running statement.
pub fn warn(conn: &mut Conn<'_>, code: u16, message: String) {
    conn.session.warn(code, message);
}

/// `SET autocommit = on`: commits an open transaction (as MySQL does);
/// off: later statements run in one transaction until `COMMIT`.
pub fn set_autocommit(conn: &mut Conn<'_>, on: bool) -> SqlResult<()> {
    if on && !conn.session.autocommit {
        conn.session.autocommit = true;
        if !conn.tx.explicit {
            commit(conn)?;
        }
        return Ok(());
    }
    conn.session.autocommit = on;
    Ok(())
}

/// Commits whatever is open; the transaction ends either way.
pub fn commit(conn: &mut Conn<'_>) -> SqlResult<()> {
    // A COMMIT ends `SET TRANSACTION`'s wait for a next transaction too,
    // as MariaDB's.
    conn.tx.next_read_only = None;
    conn.tx.savepoints.clear();
    conn.tx.writes = 0;
    conn.tx.explicit = false;
    conn.tx.read_only = false;
    conn.tx.wrote = false;
    let Some(tx) = conn.tx.tx.take() else {
        return Ok(());
    };
    tx.execute(ExecMode::Commit)
        .map(|_| ())
        .map_err(|e| commit_error(&e))
}

/// Rolls back whatever is open.
pub fn rollback(conn: &mut Conn<'_>) {
    conn.tx.next_read_only = None;
    conn.tx.savepoints.clear();
    conn.tx.writes = 0;
    conn.tx.explicit = false;
    conn.tx.read_only = false;
    conn.tx.wrote = false;
    if let Some(tx) = conn.tx.tx.take() {
        let _ = tx.execute(ExecMode::Rollback);
    }
}

/// Rolls back whatever is open, ignoring errors (the connection is going).
pub fn rollback_quietly(conn: &mut Conn<'_>) {
    rollback(conn);
}

/// READ ONLY or READ WRITE in a transaction's modes (None: neither).
pub(crate) fn access_mode(modes: &[TransactionMode]) -> Option<bool> {
    modes.iter().rev().find_map(|m| match m {
        TransactionMode::AccessMode(TransactionAccessMode::ReadOnly) => Some(true),
        TransactionMode::AccessMode(TransactionAccessMode::ReadWrite) => Some(false),
        _ => None,
    })
}

/// The session's `transaction_read_only`.
fn session_read_only(conn: &Conn<'_>) -> bool {
    conn.session.vars.hot().read_only
}

/// A transaction is open: BEGIN's, or the one autocommit off opened at
/// its first statement.
pub(crate) fn transaction_open(conn: &Conn<'_>) -> bool {
    conn.tx.explicit || conn.tx.tx.is_some()
}

/// Whether a write now would be in a READ ONLY transaction: BEGIN's, the
/// open implicit one's (autocommit off), or the one it would open.
pub(crate) fn read_only_now(conn: &Conn<'_>) -> bool {
    if transaction_open(conn) {
        conn.tx.read_only
    } else {
        conn.tx
            .next_read_only
            .unwrap_or_else(|| session_read_only(conn))
    }
}

/// The transaction a statement runs in: the open one, or a new one.
pub fn take<'s>(conn: &mut Conn<'s>) -> SqlResult<Transaction<'s>> {
    let tx = match conn.tx.tx.take() {
        Some(tx) => tx,
        None => {
            if !conn.tx.explicit {
                // An implicit transaction (a statement's, or autocommit
                // off): its access mode.
                let next = conn.tx.next_read_only.take();
                conn.tx.read_only = next.unwrap_or_else(|| session_read_only(conn));
            }
            let tx = conn.native.begin().map_err(|e| native_error(&e))?;
            if !conn.tx.savepoints.is_empty() {
                // Savepoints set before the transaction's first statement
                // mark its start (0).
                tx.journal_mark().map_err(|e| native_error(&e))?;
            }
            tx
        }
    };
    conn.tx.pending_at_start = tx.pending_ops();
    Ok(tx)
}

/// Lends a running statement's transaction back to the connection, so
/// that what the statement runs meanwhile (an UPDATE's correlated
/// subqueries) takes it with [`take`] and reads through it, seeing its
/// writes. [`take_back`] ends the loan. Only inside a transaction: an
/// autocommit statement's nested [`finish`] would commit it.
pub fn lend<'s>(conn: &mut Conn<'s>, tx: Transaction<'s>) -> usize {
    debug_assert!(in_transaction(conn));
    conn.tx.tx = Some(tx);
    conn.tx.pending_at_start
}

/// Ends a [`lend`]: the transaction, unless what ran meanwhile ended it
/// (an error that rolled it back: None), and the statement's
/// `pending_at_start` as it was before the loan.
pub fn take_back<'s>(conn: &mut Conn<'s>, pending_at_start: usize) -> Option<Transaction<'s>> {
    conn.tx.pending_at_start = pending_at_start;
    conn.tx.tx.take()
}

/// Where a statement inside a transaction goes back to when it fails
/// after FOREIGN KEY actions wrote child rows (MySQL's statement
/// rollback). Those writes cannot be inverted by the statement itself
/// (they are of other tables, at any depth), so the transaction's
/// journal is turned on for the statement and the mark taken back to.
pub(crate) struct StatementMark {
    mark: usize,
    /// The statement turned the journal on (no savepoint had): it turns
    /// it off again when it ends.
    own_journal: bool,
}

/// Takes the statement's mark, once, before `rows` parent rows meet
/// `actions`, when those can write child rows
/// ([`super::exec::foreign::actions_write`]); nothing outside a
/// transaction, where a failed statement rolls back whole. Sends what is
/// pending first (`journal_mark`).
pub(crate) fn mark_statement(
    conn: &Conn<'_>,
    tx: &Transaction<'_>,
    (actions, rows): (&[super::exec::foreign::ParentAction], usize),
    at: &mut Option<StatementMark>,
) -> SqlResult<()> {
    if at.is_some()
        || rows == 0
        || !in_transaction(conn)
        || !super::exec::foreign::actions_write(actions)
    {
        return Ok(());
    }
    let own_journal = !tx.journal_active();
    let mark = tx.journal_mark().map_err(|e| native_error(&e))?;
    *at = Some(StatementMark { mark, own_journal });
    Ok(())
}

/// A statement that took a [`StatementMark`] ended: when it failed, every
/// row it wrote (child rows of its FOREIGN KEY actions too) is put back
/// and the transaction goes on; if that cannot be done the transaction is
/// rolled back whole (and [`finish`] says so).
pub(crate) fn end_statement(tx: &Transaction<'_>, at: Option<StatementMark>, failed: bool) {
    let Some(StatementMark { mark, own_journal }) = at else {
        return;
    };
    if failed {
        // On an error the whole transaction is rolled back by it.
        let _ = tx.rollback_to_mark(mark);
    }
    if own_journal {
        tx.journal_stop();
    }
}

/// Sends what a transaction has pending (deferred writes) before
/// something that does not carry them: a scan.
pub fn flush(tx: &Transaction<'_>) -> Result<(), skarv_client::Error> {
    if tx.pending_ops() > 0 {
        tx.execute(ExecMode::NoCommit)?;
    }
    Ok(())
}

/// A statement is done with its transaction: on success it stays open
/// inside a transaction (its pending operations sent) and commits with
/// them otherwise; on failure it is rolled back when the error ended it
/// (or always, outside a transaction).
pub fn finish<'s, T>(
    conn: &mut Conn<'s>,
    tx: Transaction<'s>,
    result: SqlResult<T>,
) -> SqlResult<T> {
    let result = match result {
        Ok(value) if in_transaction(conn) && tx.pending_ops() > 0 && !batching(conn) => tx
            .execute(ExecMode::NoCommit)
            .map(|_| value)
            .map_err(|e| native_error(&e)),
        other => other,
    };
    match result {
        Ok(value) => {
            if in_transaction(conn) {
                conn.tx.tx = Some(tx);
                Ok(value)
            } else {
                conn.tx.wrote = false;
                tx.execute(ExecMode::Commit).map_err(|e| commit_error(&e))?;
                Ok(value)
            }
        }
        Err(error) => {
            // Still usable: the statement left nothing pending (what is
            // pending from earlier deferring statements is sent) and the
            // transaction is open (an execute of nothing only checks that).
            let pending = tx.pending_ops();
            let clean = pending == 0 || (batching(conn) && pending == conn.tx.pending_at_start);
            let usable = clean && tx.execute(ExecMode::NoCommit).is_ok();
            let mut error = error;
            if in_transaction(conn) && usable {
                conn.tx.tx = Some(tx);
            } else {
                if in_transaction(conn)
                    && conn.tx.writes > 1
                    && !error.message.contains("transaction")
                {
                    // Earlier statements' writes went with it (a unique
                    // index's duplicate ends a native transaction, as in
                    // NDB): the client must not think them kept.
                    error.message.push_str(
                        " (the whole transaction was rolled back, with its earlier writes)",
                    );
                }
                // The whole transaction is gone (as InnoDB's deadlock and
                // NDB's errors end it): later statements start afresh.
                conn.tx.savepoints.clear();
                conn.tx.writes = 0;
                conn.tx.wrote = false;
                conn.tx.explicit = false;
                conn.tx.read_only = false;
                let _ = tx.execute(ExecMode::Rollback);
            }
            Err(error)
        }
    }
}

pub(crate) fn commit_error(e: &skarv_client::Error) -> SqlError {
    if e.is_unknown_result() {
        return SqlError::new(
            codes::ERROR_DURING_COMMIT,
            format!(
                "Got error {} '{}' during COMMIT: the commit may or may not have happened",
                e.code, e.message
            ),
        );
    }
    native_error(e)
}

/// [`native_error`] of an operation on `table`, for the messages that
/// name it.
pub fn native_error_in(error: &skarv_client::Error, table: &str) -> SqlError {
    match error.code {
        native::DATA_MEMORY_FULL => SqlError::new(
            codes::RECORD_FILE_FULL,
            format!("The table '{table}' is full"),
        ),
        _ => native_error(error),
    }
}

/// A native API error as the MySQL error a client understands.
pub fn native_error(error: &skarv_client::Error) -> SqlError {
    match error.code {
        native::WRONG_SCHEMA_VERSION => SqlError::new(
            TABLE_DEF_CHANGED,
            "Table definition has changed, please retry transaction",
        ),
        // NOWAIT's refusal is MariaDB's 1205 too (MySQL 8 says 3572).
        native::LOCK_TIMEOUT | native::TRANSACTION_TIMEOUT | native::LOCK_BUSY | 274 => {
            SqlError::new(
                codes::LOCK_WAIT_TIMEOUT,
                "Lock wait timeout exceeded; try restarting transaction",
            )
        }
        native::DUPLICATE_KEY | native::UNIQUE_VIOLATION => SqlError::new(
            codes::DUP_ENTRY,
            format!("Duplicate entry for key: {}", error.message),
        ),
        native::DATA_MEMORY_FULL => SqlError::new(
            codes::RECORD_FILE_FULL,
            format!("The table is full ({})", error.message),
        ),
        native::NO_SUCH_TABLE => SqlError::new(codes::TABLE_NOT_FOUND, error.message.clone()),
        _ if error.is_unknown_result() => SqlError::new(
            codes::ERROR_DURING_COMMIT,
            format!(
                "Got error {} '{}' from NDBCLUSTER: the outcome of the transaction is unknown",
                error.code, error.message
            ),
        ),
        _ if error.is_temporary() => SqlError::new(
            codes::GET_TEMPORARY_ERRMSG,
            format!(
                "Got temporary error {} '{}' from NDBCLUSTER",
                error.code, error.message
            ),
        ),
        _ => SqlError::new(
            1296,
            format!(
                "Got error {} '{}' from NDBCLUSTER",
                error.code, error.message
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn native_errors_map_to_mysql_codes() {
        let e = |code| native_error(&skarv_client::Error::new(code, "m"));
        assert_eq!(e(native::LOCK_TIMEOUT).code, 1205);
        assert_eq!(e(native::LOCK_BUSY).code, 1205);
        assert_eq!(e(native::DUPLICATE_KEY).code, 1062);
        assert_eq!(e(native::UNIQUE_VIOLATION).code, 1062);
        assert_eq!(e(native::DATA_MEMORY_FULL).code, 1114);
        assert_eq!(e(native::NODE_FAILURE_ABORTED).code, 1297);
        assert_eq!(e(native::NODE_FAILURE).code, 1180);
        assert_eq!(e(native::BAD_FILTER).code, 1296);
        assert_eq!(e(native::WRONG_SCHEMA_VERSION).code, 1412);
        let full = native_error_in(
            &skarv_client::Error::new(native::DATA_MEMORY_FULL, "m"),
            "t",
        );
        assert_eq!(full.message, "The table 't' is full");
    }
}
