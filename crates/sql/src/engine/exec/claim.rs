//! Claiming the first rows of a statement's order: a locking statement
//! with a LIMIT (`UPDATE jobs SET owner = 7 WHERE owner IS NULL ORDER BY
//! id LIMIT 1`, `SELECT … ORDER BY id LIMIT 1 FOR UPDATE`, a job queue's)
//! reads its candidates without locks, then locks them by primary key in
//! the statement's order until it has as many as the LIMIT asks for.
//!
//! A locking scan locks every row its condition passes, in every
//! partition at once and in no order. Two workers running the queue's
//! statement each lock part of the queue and wait for the other's part:
//! a deadlock that only `TransactionDeadlockDetectionTimeout` ends (1205
//! for one of them, every time). InnoDB locks in index order and stops at
//! the LIMIT, so its workers queue up behind each other instead.
//!
//! The invariant that keeps claims free of deadlocks: **a claim never
//! waits for a row while holding a row of its own statement that comes
//! after it in the claim order.** Keys are locked in batches that do not
//! wait (`NOWAIT`); at the first row of a batch another transaction holds,
//! the rows the batch locked after it are unlocked again, and only that
//! row is then waited for. Two claims ordering the same rows alike can
//! then never wait for each other in a cycle. (Unlocking needs a
//! transaction that held no lock before the statement — else a row
//! locked earlier would be released — and a table without BLOB/TEXT
//! parts; otherwise those rows stay locked, and a deadlock is possible
//! again, ended by the timeout as before.)
//!
//! A row is taken under its lock only if the statement's condition still
//! holds for its current values (another worker may have claimed it
//! meanwhile), as InnoDB's semi-consistent read re-checks a row it waited
//! for; a row that no longer matches is unlocked (when it may be).

use std::sync::Arc;

use schema::Value;
use skarv_client::{ExecMode, Filter, LockWait, Op, OpResult, Transaction};

use super::write::key_bytes;
use super::{key_read, sql_row_of, txn, RowLock, OPS_PER_EXECUTE_MAX};
use crate::engine::catalog::TableInfo;
use crate::engine::expr::{Ctx, Expr, Val};
use crate::engine::plan::Access;
use crate::error::SqlResult;

/// Rows claimed: each row's values and its primary key.
pub(crate) type Rows = Vec<(Vec<Val>, Vec<Value>)>;

/// Most rows a LIMIT may ask for and still be claimed key by key; a larger
/// one locks by scan, as before (a purge's `DELETE … LIMIT 100000` is not
/// a queue, and its rows' keys would all be held here).
pub const CLAIM_ROWS_MAX: usize = 10_000;

/// What a claim locks and keeps.
pub(crate) struct Claim<'a> {
    pub table: &'a Arc<TableInfo>,
    pub lock: RowLock,
    /// The statement's condition, tested again on each locked row.
    pub cond: Option<&'a Expr>,
    /// Whether rows locked but not taken may be unlocked again.
    pub may_unlock: bool,
    /// The columns a taken row is read with (None: all).
    pub columns: Option<&'a [&'a str]>,
    /// Whether the candidates were read with the condition (its warnings
    /// given then, not again under the lock); false for keys the
    /// statement named, whose rows meet the condition first here.
    pub tested: bool,
}

/// Whether a statement on `table` in `tx` may unlock the rows its claim
/// does not take: only when no lock of the transaction can be among them
/// (it held none before) and unlocking a row releases all of it (no
/// BLOB/TEXT parts, which a locking read locks too).
pub(crate) fn may_unlock(tx: &Transaction<'_>, table: &TableInfo) -> bool {
    !tx.may_hold_locks() && !table.native.has_blobs()
}

/// The names of `table`'s columns that have no BLOB/TEXT parts: a claim
/// that locks rows by them alone locks no part, so unlocking a row it
/// does not take releases all it locked.
pub(crate) fn plain_columns(table: &TableInfo) -> Vec<&str> {
    let native = &table.native;
    native
        .def()
        .columns
        .iter()
        .map(|c| c.name.as_str())
        .filter(|name| native.blob_parts_table(name).is_none())
        .collect()
}

/// Whether the rows a claim reads first (those columns named, with the
/// primary key) can be read without a lock: a BLOB/TEXT value is read
/// under a shared lock even by a committed read, which would make every
/// claim's candidates conflict with every other's.
pub(crate) fn can_claim(table: &TableInfo, columns: Option<&[&str]>) -> bool {
    let native = &table.native;
    match columns {
        None => !native.has_blobs(),
        Some(names) => names.iter().all(|n| native.blob_parts_table(n).is_none()),
    }
}

/// Whether the statement's condition gives a row the same answer when
/// it is tested again under the row's lock: no RAND(), UUID() or the
/// like, no subquery (run once per row again).
pub(crate) fn steady(cond: Option<&Expr>) -> bool {
    let mut steady = true;
    if let Some(cond) = cond {
        cond.each(&mut |e| {
            steady &= match e {
                Expr::Func(f, _) => f.is_deterministic(),
                Expr::Sub(_) => false,
                _ => true,
            }
        });
    }
    steady
}

/// Locks rows of `keys` (read without a lock, in the order the statement
/// takes them) until `want` of them pass the condition under their lock.
/// Returns those rows (as locked) in `keys`' order.
pub(crate) fn claim(
    tx: &Transaction<'_>,
    c: &Claim<'_>,
    keys: &[Vec<Value>],
    want: usize,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Rows> {
    let table = c.table;
    let native = &table.native;
    let mut taken = Vec::with_capacity(want.min(keys.len()));
    let mut at = 0;
    while taken.len() < want && at < keys.len() {
        let end = keys
            .len()
            .min(at + (want - taken.len()).min(OPS_PER_EXECUTE_MAX));
        let batch = &keys[at..end];
        // A batch of one may as well wait: it holds nothing after itself.
        let wait = match c.lock.wait {
            LockWait::Wait if batch.len() > 1 => LockWait::NoWait,
            w => w,
        };
        let lock = RowLock {
            mode: c.lock.mode,
            wait,
        };
        let mut handles = Vec::with_capacity(batch.len());
        for key in batch {
            let op = key_read(native, key, Some(lock), None, c.columns);
            handles.push(
                tx.define(op)
                    .map_err(|e| txn::native_error_in(&e, &table.name))?,
            );
        }
        let outcome = tx
            .execute(ExecMode::NoCommit)
            .map_err(|e| txn::native_error_in(&e, &table.name))?;
        let mut busy = None;
        let mut release: Vec<&[Value]> = Vec::new();
        for (i, h) in handles.into_iter().enumerate() {
            match outcome.result(h) {
                Some(OpResult::Row(r)) => {
                    if busy.is_some() {
                        // Locked after a row it must wait for: let it go
                        // (the invariant above); it is read again after.
                        if c.may_unlock {
                            release.push(&batch[i]);
                        }
                        continue;
                    }
                    let row = sql_row_of(table, r, ctx.env.tz_secs);
                    if passes(c, &row, ctx)? {
                        taken.push((row, batch[i].clone()));
                    } else if c.may_unlock {
                        release.push(&batch[i]);
                    }
                }
                Some(OpResult::Failed(e)) if e.code == skarv_client::codes::LOCK_BUSY => {
                    // Only a NOWAIT of ours: the statement's own NOWAIT is
                    // its 1205.
                    if c.lock.wait == LockWait::NoWait {
                        return Err(txn::native_error_in(e, &table.name));
                    }
                    busy.get_or_insert(i);
                }
                // Gone since it was read (or held, under SKIP LOCKED).
                Some(OpResult::Failed(e)) if e.code == skarv_client::codes::NO_SUCH_ROW => {}
                Some(OpResult::Failed(e)) => return Err(txn::native_error_in(e, &table.name)),
                _ => {}
            }
        }
        unlock(tx, table, &release)?;
        at = match busy {
            None => end,
            Some(i) => {
                // Wait for this one row alone, holding none after it.
                let key = &keys[at + i];
                if let Some(row) = wait_for(tx, c, key, ctx)? {
                    taken.push((row, key.clone()));
                }
                at + i + 1
            }
        };
    }
    Ok(taken)
}

/// The rows of several primary keys (`WHERE id IN (…)`, an UPDATE's or
/// DELETE's, `SELECT … FOR UPDATE`'s) locked in primary key order by
/// [`claim`], passing `cond` under their lock, in that order. Key reads
/// sent as one batch lock in no order: two statements over the same rows
/// each held some and waited for the other's, a deadlock only
/// `TransactionDeadlockDetectionTimeout` broke (1205, for most of them
/// under contention); InnoDB locks an IN list's rows in index order. A
/// table with BLOB/TEXT columns is claimed by its other columns
/// ([`plain_columns`]: unlocking a row then releases all the claim
/// locked) and the rows taken read again with `columns`, under the locks
/// held. None — read the keys as before — for one key (nothing to
/// order), more than `CLAIM_ROWS_MAX`, a key that does not encode, or a
/// transaction that may hold locks already (unlocking a row would
/// release a lock it took before).
pub(crate) fn claim_keys(
    tx: &Transaction<'_>,
    table: &Arc<TableInfo>,
    keys: &[Vec<Value>],
    lock: RowLock,
    cond: Option<&Expr>,
    columns: Option<&[&str]>,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Option<Rows>> {
    if keys.len() < 2 || keys.len() > CLAIM_ROWS_MAX || tx.may_hold_locks() {
        return Ok(None);
    }
    // In primary key order, each row once (two values a collation deems
    // equal are one key).
    let encoder = schema::KeyEncoder::primary_key(table.native.def());
    let mut ordered = Vec::with_capacity(keys.len());
    for key in keys {
        let mut bytes = Vec::new();
        if encoder.encode(key, &mut bytes).is_err() {
            return Ok(None);
        }
        ordered.push((bytes, key));
    }
    ordered.sort_by(|a, b| a.0.cmp(&b.0));
    ordered.dedup_by(|a, b| a.0 == b.0);
    let keys: Vec<Vec<Value>> = ordered.into_iter().map(|(_, key)| key.clone()).collect();
    let blobs = table.native.has_blobs();
    let plain = blobs.then(|| plain_columns(table));
    let c = Claim {
        table,
        lock,
        cond,
        may_unlock: true,
        columns: if blobs { plain.as_deref() } else { columns },
        tested: false,
    };
    let taken = claim(tx, &c, &keys, keys.len(), ctx)?;
    if !blobs || taken.is_empty() {
        return Ok(Some(taken));
    }
    // The rows taken with their BLOB/TEXT values, in the same order: the
    // statement holds their locks, so this waits for nothing.
    let mut whole = Vec::with_capacity(taken.len());
    for chunk in taken.chunks(OPS_PER_EXECUTE_MAX) {
        let mut handles = Vec::with_capacity(chunk.len());
        for (_, key) in chunk {
            handles.push(
                tx.define(key_read(&table.native, key, Some(lock), None, columns))
                    .map_err(|e| txn::native_error_in(&e, &table.name))?,
            );
        }
        let outcome = tx
            .execute(ExecMode::NoCommit)
            .map_err(|e| txn::native_error_in(&e, &table.name))?;
        for (h, (_, key)) in handles.into_iter().zip(chunk) {
            if let Some(r) = super::found_row(table, outcome.result(h))? {
                whole.push((sql_row_of(table, r, ctx.env.tz_secs), key.clone()));
            }
        }
    }
    Ok(Some(whole))
}

/// The row of `key` locked, waiting for it; None when it is gone or no
/// longer passes (then unlocked, when it may be).
fn wait_for(
    tx: &Transaction<'_>,
    c: &Claim<'_>,
    key: &[Value],
    ctx: &mut Ctx<'_>,
) -> SqlResult<Option<Vec<Val>>> {
    let table = c.table;
    let h = tx
        .define(key_read(&table.native, key, Some(c.lock), None, c.columns))
        .map_err(|e| txn::native_error_in(&e, &table.name))?;
    let outcome = tx
        .execute(ExecMode::NoCommit)
        .map_err(|e| txn::native_error_in(&e, &table.name))?;
    let Some(r) = super::found_row(table, outcome.result(h))? else {
        return Ok(None);
    };
    let row = sql_row_of(table, r, ctx.env.tz_secs);
    if passes(c, &row, ctx)? {
        return Ok(Some(row));
    }
    if c.may_unlock {
        unlock(tx, table, &[key])?;
    }
    Ok(None)
}

/// Where a claim's candidates are read from, without a lock: the
/// statement's access, pushed filter and condition, and the columns its
/// WHERE and ORDER BY name.
pub(crate) struct Candidates<'a> {
    pub table: &'a Arc<TableInfo>,
    pub access: &'a Access,
    pub filter: &'a Option<Filter>,
    pub cond: Option<&'a Expr>,
    pub columns: Option<&'a [&'a str]>,
}

impl Candidates<'_> {
    /// At most `stop` candidates (None: all), each with its key; `along`:
    /// one partition only, in index order (its number, descending).
    fn read(
        &self,
        tx: &Transaction<'_>,
        ctx: &mut Ctx<'_>,
        stop: Option<usize>,
        along: Option<(u32, bool)>,
    ) -> SqlResult<Rows> {
        super::fetch_keyed(
            tx,
            self.table,
            self.access,
            self.filter.clone(),
            self.cond,
            ctx,
            stop,
            self.columns,
            along,
        )
    }
}

/// [`claim`] of rows in no particular order: candidates read a few more
/// than wanted at a time (a scan that stops early returns the same first
/// ones again), more when those run out, each lot in primary-key order.
pub(crate) fn claim_unordered(
    tx: &Transaction<'_>,
    c: &Claim<'_>,
    want: usize,
    ctx: &mut Ctx<'_>,
    from: &Candidates<'_>,
) -> SqlResult<Rows> {
    let def = c.table.native.def();
    let mut taken = Vec::with_capacity(want.min(CLAIM_ROWS_MAX));
    let mut seen = std::collections::HashSet::new();
    let mut stop = want.saturating_mul(2).max(CANDIDATES_MIN);
    loop {
        let found = from.read(tx, ctx, Some(stop), None)?;
        let exhausted = found.len() < stop;
        let mut fresh: Vec<(Vec<u8>, Vec<Value>)> = found
            .into_iter()
            .map(|(_, key)| (key_bytes(def, &key), key))
            .filter(|(bytes, _)| seen.insert(bytes.clone()))
            .collect();
        fresh.sort_by(|a, b| a.0.cmp(&b.0));
        let keys: Vec<Vec<Value>> = fresh.into_iter().map(|(_, key)| key).collect();
        taken.extend(claim(tx, c, &keys, want - taken.len(), ctx)?);
        if taken.len() >= want || exhausted {
            return Ok(taken);
        }
        stop = stop.saturating_mul(4);
    }
}

/// Puts an ordered claim's candidates in ORDER BY's order (ties by
/// primary key) and gives their keys.
pub(crate) type InOrder<'f> = dyn FnMut(Rows, &mut Ctx<'_>) -> SqlResult<Vec<Vec<Value>>> + 'f;

/// [`claim`] in ORDER BY's order: `order` puts candidates in it (ties by
/// primary key) and gives their keys. With `along` (the table's
/// partitions and whether descending: the access reads an ordered index
/// in that order), a few more than wanted from each
/// partition first — the first rows of the table are among them — so a
/// long queue is not read whole for one job; all candidates only when
/// those were not enough (others took them meanwhile). The rows that lot
/// took stay locked by the statement and are taken again from the whole.
pub(crate) fn claim_in_order(
    tx: &Transaction<'_>,
    c: &Claim<'_>,
    want: usize,
    ctx: &mut Ctx<'_>,
    from: &Candidates<'_>,
    along: Option<(u32, bool)>,
    order: &mut InOrder<'_>,
) -> SqlResult<Rows> {
    if let Some((partitions, descending)) = along {
        let per = want.saturating_mul(2).max(CANDIDATES_MIN);
        let mut found = Vec::new();
        let mut cut = false;
        for partition in 0..partitions {
            let rows = from.read(tx, ctx, Some(per), Some((partition, descending)))?;
            cut |= rows.len() >= per;
            found.extend(rows);
        }
        let keys = order(found, ctx)?;
        let taken = claim(tx, c, &keys, want, ctx)?;
        if taken.len() >= want || !cut {
            return Ok(taken);
        }
    }
    let found = from.read(tx, ctx, None, None)?;
    let keys = order(found, ctx)?;
    claim(tx, c, &keys, want, ctx)
}

/// Fewest candidates an unordered claim reads at a time.
const CANDIDATES_MIN: usize = 16;

/// Whether a locked row still passes the condition. Its warnings were the
/// candidates' read's already (when they were read: `Claim::tested`), so
/// they are not given twice.
fn passes(c: &Claim<'_>, row: &[Val], ctx: &mut Ctx<'_>) -> SqlResult<bool> {
    let Some(cond) = c.cond else {
        return Ok(true);
    };
    let warned = ctx.warnings.len();
    let pass = cond.test(row, ctx)?;
    if c.tested {
        ctx.warnings.truncate(warned);
    }
    Ok(pass)
}

/// Unlocks rows this statement locked and does not take (one round trip).
fn unlock(tx: &Transaction<'_>, table: &TableInfo, keys: &[&[Value]]) -> SqlResult<()> {
    if keys.is_empty() {
        return Ok(());
    }
    for chunk in keys.chunks(OPS_PER_EXECUTE_MAX) {
        for key in chunk {
            tx.define(Op::unlock(&table.native, key))
                .map_err(|e| txn::native_error_in(&e, &table.name))?;
        }
        tx.execute(ExecMode::NoCommit)
            .map_err(|e| txn::native_error_in(&e, &table.name))?;
    }
    Ok(())
}
