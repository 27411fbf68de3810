//! The join executor: runs a [`JoinPlan`] step by step over the combined
//! rows found so far. A table read on its own is read once and matched in
//! memory; a table read by key is read with batched key access: the key
//! values of [`JOIN_BATCH_ROWS`] outer rows go to the data nodes as one
//! batch of key reads (one `execute`), or as one multi-range scan of an
//! ordered index, a range per distinct key.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use schema::Value;
use skarv_client::Transaction;
use skarv_client::{ExecMode, Filter, Op, OpResult, ScanOptions};

use super::{fetch, sql_row_of, RowLock, FETCH_ROWS_MAX};
use crate::engine::catalog::{SqlType, TableInfo};
use crate::engine::expr::eval::compare;
use crate::engine::expr::{Ctx, Expr, Val};
use crate::engine::plan::join::{JoinPlan, JoinSpec, Keyed, KeyedKind, SemiKind, StepAccess};
use crate::engine::plan::{exact, join::JOIN_BATCH_ROWS};
use crate::engine::txn;
use crate::error::{SqlError, SqlResult};

/// What one step did (for `EXPLAIN ANALYZE`).
#[derive(Clone, Debug, Default)]
pub struct StepStats {
    /// Rows the step read from the data nodes.
    pub read: u64,
    /// Combined rows it passed on.
    pub rows: u64,
    /// Native batches it sent (key-read executes or scans).
    pub batches: u64,
    /// Time spent in it.
    pub time: Duration,
}

/// Runs a join: the combined rows that pass every condition. The first
/// table's rows go through the later steps `JOIN_BATCH_ROWS` at a time,
/// so `stop_after` (a LIMIT without ORDER BY) ends the reads of the later
/// tables early and a batch of key reads serves that many outer rows.
pub(crate) fn run(
    tx: &Transaction<'_>,
    spec: &JoinSpec,
    plan: &JoinPlan,
    lock: Option<RowLock>,
    ctx: &mut Ctx<'_>,
    stats: Option<&mut Vec<StepStats>>,
    stop_after: Option<usize>,
) -> SqlResult<Vec<Vec<Val>>> {
    let mut out = Vec::new();
    run_each(tx, spec, plan, lock, ctx, stats, &mut |row, _| {
        push(&mut out, row)?;
        Ok(stop_after.is_none_or(|n| out.len() < n))
    })?;
    Ok(out)
}

/// Runs a join, handing `each` every combined row as its batch of outer
/// rows is through the last step: the SQL node holds the first table's
/// rows, the tables kept for a hash join and one batch's combined rows,
/// never the result. `each` answers whether to go on (false: a LIMIT is
/// reached, and the later tables' reads end there).
pub(crate) fn run_each(
    tx: &Transaction<'_>,
    spec: &JoinSpec,
    plan: &JoinPlan,
    lock: Option<RowLock>,
    ctx: &mut Ctx<'_>,
    stats: Option<&mut Vec<StepStats>>,
    each: &mut dyn FnMut(Vec<Val>, &mut Ctx<'_>) -> SqlResult<bool>,
) -> SqlResult<()> {
    let width = spec.columns.len();
    let mut runner = Runner::new(tx, spec, plan, lock);
    if !plan.steps.is_empty() {
        // Leading steps the data nodes can join (`exec::pushed`) run as one request.
        let pushed = super::pushed::pushable(spec, plan, lock.is_some(), ctx.env.join_pushdown);
        let (first, next_step) = match &pushed {
            // Every step pushed: the rows go on as the data nodes send them.
            Some(p) if p.steps == plan.steps.len() => {
                super::pushed::run_each(tx, spec, plan, p, ctx, &mut runner.stats, each)?;
                (Vec::new(), p.steps)
            }
            // The later steps read while no scan is open: the pushed
            // rows are taken first.
            Some(p) => {
                let mut rows = Vec::new();
                super::pushed::run_each(tx, spec, plan, p, ctx, &mut runner.stats, &mut |r, _| {
                    push(&mut rows, r).map(|()| true)
                })?;
                (rows, p.steps)
            }
            None => (runner.step(0, vec![vec![Val::Null; width]], ctx)?, 1),
        };
        'chunks: for chunk in first.chunks(JOIN_BATCH_ROWS) {
            let mut rows = chunk.to_vec();
            for at in next_step..plan.steps.len() {
                if rows.is_empty() {
                    continue 'chunks;
                }
                rows = runner.step(at, rows, ctx)?;
            }
            for row in rows {
                if !each(row, ctx)? {
                    break 'chunks;
                }
            }
        }
    }
    if let Some(s) = stats {
        *s = runner.stats;
    }
    Ok(())
}

/// A top N of a join read along its first table's order
/// ([`plan::join::plan_in_order`](crate::engine::plan::join::plan_in_order)):
/// ORDER BY names only that table's columns, so a combined row sorts
/// where its first table's row does, and the rows of the first table
/// read in that order, joined until N combined rows are made, hold the
/// top N. Web applications' "latest 20 orders with their customers".
pub(crate) struct TopJoin {
    /// The plan; its first step reads an ordered index in ORDER BY's order.
    pub plan: JoinPlan,
    /// ORDER BY's columns (positions in the first table) and collations.
    pub keys: Vec<(usize, Option<schema::Collation>)>,
    /// ORDER BY … DESC.
    pub descending: bool,
    /// OFFSET plus LIMIT: the combined rows wanted.
    pub stop_after: usize,
    /// The first table's rows it is estimated to read (`EXPLAIN`'s).
    pub rows: u64,
    /// Most rows (every table's) the run may expect to read before it
    /// gives up for the plan chosen without the order: the estimate of
    /// what that reads.
    pub budget: u64,
}

/// Fewest rows of the first table a top N join joins in its first round.
pub(crate) const TOP_JOIN_ROWS_MIN: usize = 16;

/// Runs a [`TopJoin`], handing `each` the combined rows of the first
/// table's rows in ORDER BY's order: its partitions' rows read in index
/// order and merged (`merge::merged_each`), joined in rounds (N rows,
/// then twice as many each round, up to a join batch) until N combined
/// rows are made or the table is read to its end. Ok(false): after a
/// round, the rows read so far times N over the rows made passed the
/// budget (a WHERE on the later tables that few rows pass), or the
/// transaction has writes to flush that the merge's own transactions
/// would not see, or the table has more partitions than a merge reads
/// (`MERGE_PARTITIONS_MAX`); the caller then forgets what `each` had and
/// runs the plan chosen without the order.
pub(crate) fn run_top(
    tx: &Transaction<'_>,
    spec: &JoinSpec,
    top: &TopJoin,
    ctx: &mut Ctx<'_>,
    stats: Option<&mut Vec<StepStats>>,
    each: &mut dyn FnMut(Vec<Val>, &mut Ctx<'_>) -> SqlResult<bool>,
) -> SqlResult<bool> {
    let plan = &top.plan;
    let first = &plan.steps[0];
    let t = &spec.tables[first.table];
    let StepAccess::Own(access) = &first.access else {
        unreachable!("a top N join's first table is read on its own, in order");
    };
    let order: Vec<(Expr, bool)> = top
        .keys
        .iter()
        .map(|(c, _)| (Expr::Col(*c), top.descending))
        .collect();
    let partitions = t.table.native.def().partitions;
    let keys = super::merge::merge_keys(&t.table, &order, access);
    let mergeable =
        tx.pending_ops() == 0 && partitions as usize <= super::merge::MERGE_PARTITIONS_MAX;
    let Some(keys) = keys.filter(|_| mergeable) else {
        return Ok(false);
    };
    let mut runner = Runner::new(tx, spec, plan, None);
    let columns = runner.columns[0].clone();
    let mut round = Round {
        rows: Vec::new(),
        size: top.stop_after.max(TOP_JOIN_ROWS_MIN),
        made: 0,
        outcome: None,
    };
    let empty = vec![Val::Null; spec.columns.len()];
    let merged = ((0..partitions).collect(), keys);
    let read = super::merge::MergedRead {
        filter: first.filter.clone(),
        columns: columns.as_deref(),
        stop_after: usize::try_from(top.rows).ok(),
        ..super::merge::MergedRead::along(&t.table, access, top.descending, merged)
    };
    super::merge::merged_each(tx.session(), read, ctx, |row, ctx| {
        runner.stats[0].read += 1;
        round.rows.push(row);
        if round.rows.len() < round.size {
            return Ok(true);
        }
        round.outcome = round.join(&mut runner, &empty, top, ctx, each)?;
        round.size = round.size.saturating_mul(2).min(JOIN_BATCH_ROWS);
        Ok(round.outcome.is_none())
    })?;
    if round.outcome.is_none() {
        // Every partition read to its end: the last round's rows joined,
        // and the run is over whatever they cost.
        round.join(&mut runner, &empty, top, ctx, each)?;
        round.outcome = Some(true);
    }
    if let Some(s) = stats {
        *s = runner.stats;
    }
    Ok(round.outcome != Some(false))
}

/// A round of [`run_top`]: the first table's rows read since the last.
struct Round {
    rows: Vec<Vec<Val>>,
    /// Rows a round joins.
    size: usize,
    /// Combined rows made so far.
    made: usize,
    /// Some(true): N rows made, or `each` had enough; Some(false): past
    /// the budget.
    outcome: Option<bool>,
}

impl Round {
    /// Joins the round's rows through the later steps, handing `each`
    /// what they make; Some once the run is over.
    fn join(
        &mut self,
        runner: &mut Runner<'_, '_>,
        empty: &[Val],
        top: &TopJoin,
        ctx: &mut Ctx<'_>,
        each: &mut dyn FnMut(Vec<Val>, &mut Ctx<'_>) -> SqlResult<bool>,
    ) -> SqlResult<Option<bool>> {
        let started = Instant::now();
        let spec = runner.spec;
        let first = &runner.plan.steps[0];
        let mut combined = Vec::new();
        for row in self.rows.drain(..) {
            combine(
                spec,
                first,
                empty,
                std::iter::once(&row),
                ctx,
                &mut combined,
            )?;
        }
        runner.stats[0].batches += 1;
        runner.stats[0].rows += combined.len() as u64;
        runner.stats[0].time += started.elapsed();
        for chunk in combined.chunks(JOIN_BATCH_ROWS) {
            let mut joined = chunk.to_vec();
            for at in 1..runner.plan.steps.len() {
                if joined.is_empty() {
                    break;
                }
                joined = runner.step(at, joined, ctx)?;
            }
            for row in joined {
                self.made += 1;
                if !each(row, ctx)? {
                    return Ok(Some(true));
                }
            }
        }
        if self.made >= top.stop_after {
            return Ok(Some(true));
        }
        // What reaching N would read at the rate seen so far (at least
        // one row made): past the budget, the plan chosen without the
        // order is cheaper.
        let spent: u64 = runner.stats.iter().map(|s| s.read).sum();
        let projected = spent.saturating_mul(top.stop_after as u64) / self.made.max(1) as u64;
        Ok((projected > top.budget).then_some(false))
    }
}

/// Rows of a kept table by their hash join key.
type Buckets = stdx::KeyMap<Vec<u8>, Vec<usize>>;

/// A table read whole, kept for every outer row: its rows, and buckets by
/// the hash join's key when it has one (with the earlier column and fold).
struct Kept {
    rows: Vec<Vec<Val>>,
    hash: Option<(usize, Fold, Buckets)>,
}

/// The state of one join's run.
struct Runner<'r, 's> {
    tx: &'r Transaction<'s>,
    spec: &'r JoinSpec,
    plan: &'r JoinPlan,
    lock: Option<RowLock>,
    kept: Vec<Option<Kept>>,
    stats: Vec<StepStats>,
    /// Per step, the native columns its table's reads ask for (None:
    /// all of them).
    columns: Vec<Option<Vec<&'r str>>>,
}

impl<'r, 's> Runner<'r, 's> {
    /// A runner of `plan`, whose tables' reads ask for the columns the
    /// statement names (`JoinPlan::used`; None: every column) and those
    /// the plan's own conditions and keys name.
    fn new(
        tx: &'r Transaction<'s>,
        spec: &'r JoinSpec,
        plan: &'r JoinPlan,
        lock: Option<RowLock>,
    ) -> Self {
        let columns = match &plan.used {
            Some(used) => {
                let mut used = used.to_vec();
                used.resize(spec.columns.len(), false);
                let mut named = Vec::new();
                for step in &plan.steps {
                    let keys = match &step.access {
                        StepAccess::Keyed(k) => {
                            // The key's own columns: a batch's rows are
                            // matched to their outer rows by them.
                            let offset = spec.tables[step.table].offset;
                            named.extend(k.columns.iter().map(|c| offset + c));
                            &k.exprs[..]
                        }
                        StepAccess::Own(_) => &[],
                    };
                    for e in step.matching.iter().chain(&step.post).chain(keys) {
                        crate::engine::plan::join::columns(e, &mut named);
                    }
                }
                for t in &spec.tables {
                    for e in &t.on {
                        crate::engine::plan::join::columns(e, &mut named);
                    }
                }
                for e in &spec.inner_on {
                    crate::engine::plan::join::columns(e, &mut named);
                }
                for at in named {
                    if let Some(u) = used.get_mut(at) {
                        *u = true;
                    }
                }
                plan.steps
                    .iter()
                    .map(|step| {
                        let t = &spec.tables[step.table];
                        let width = t.table.columns.len();
                        used.get(t.offset..t.offset + width)
                            .and_then(|u| super::columns_used(&t.table, u))
                    })
                    .collect()
            }
            None => vec![None; plan.steps.len()],
        };
        Runner {
            tx,
            spec,
            plan,
            lock,
            kept: (0..plan.steps.len()).map(|_| None).collect(),
            stats: vec![StepStats::default(); plan.steps.len()],
            columns,
        }
    }

    /// The combined rows step `at` makes of `rows`.
    fn step(
        &mut self,
        at: usize,
        rows: Vec<Vec<Val>>,
        ctx: &mut Ctx<'_>,
    ) -> SqlResult<Vec<Vec<Val>>> {
        let started = Instant::now();
        let spec = self.spec;
        let step = &self.plan.steps[at];
        let t = &spec.tables[step.table];
        let mut next = Vec::new();
        match &step.access {
            StepAccess::Own(access) => {
                if let (None, Some(rows)) = (&self.kept[at], &t.rows) {
                    // A derived table: its kept rows, matched by `matching`.
                    let inner: Vec<Vec<Val>> = rows.as_ref().clone();
                    self.stats[at].read += inner.len() as u64;
                    let hash = hash_pair(spec, step).map(|(mine, other, fold)| {
                        let mut buckets = Buckets::default();
                        for (i, r) in inner.iter().enumerate() {
                            if let Some(key) = hash_key(&r[mine - t.offset], fold) {
                                buckets.entry(key).or_default().push(i);
                            }
                        }
                        (other, fold, buckets)
                    });
                    self.kept[at] = Some(Kept { rows: inner, hash });
                }
                if at == 0 && self.kept[at].is_none() && t.semi.is_none() && !t.outer {
                    // The first table is read once: each row is combined
                    // as the scan hands it over, and none is kept (a copy
                    // of the table besides its combined rows).
                    let [outer] = rows.as_slice() else {
                        unreachable!("the first step starts from one empty row");
                    };
                    let mut read = 0u64;
                    super::fetch_each(
                        self.tx,
                        &t.table,
                        access,
                        step.filter.clone(),
                        self.lock,
                        false,
                        None,
                        ctx,
                        None,
                        self.columns[at].as_deref(),
                        super::ScanShape::default(),
                        |row, _key, ctx| {
                            read += 1;
                            combine(spec, step, outer, std::iter::once(&row), ctx, &mut next)?;
                            Ok(true)
                        },
                    )?;
                    self.stats[at].batches += 1;
                    self.stats[at].read += read;
                    self.stats[at].rows += next.len() as u64;
                    self.stats[at].time += started.elapsed();
                    return Ok(next);
                }
                if self.kept[at].is_none() {
                    let found = fetch(
                        self.tx,
                        &t.table,
                        access,
                        step.filter.clone(),
                        self.lock,
                        false,
                        None,
                        ctx,
                        None,
                        None,
                        self.columns[at].as_deref(),
                    )?;
                    self.stats[at].batches += 1;
                    self.stats[at].read += found.len() as u64;
                    let inner: Vec<Vec<Val>> = found.into_iter().map(|(r, _)| r).collect();
                    // An equality with an earlier table: a hash join.
                    let hash = hash_pair(spec, step).map(|(mine, other, fold)| {
                        let mut buckets = Buckets::default();
                        for (i, r) in inner.iter().enumerate() {
                            if let Some(key) = hash_key(&r[mine - t.offset], fold) {
                                buckets.entry(key).or_default().push(i);
                            }
                        }
                        (other, fold, buckets)
                    });
                    self.kept[at] = Some(Kept { rows: inner, hash });
                }
                let Some(kept) = &self.kept[at] else {
                    return Ok(next);
                };
                for outer in &rows {
                    match &kept.hash {
                        Some((other, fold, buckets)) => {
                            let found = hash_key(&outer[*other], *fold)
                                .and_then(|k| buckets.get(&k))
                                .map_or(&[][..], Vec::as_slice);
                            let candidates = found.iter().filter_map(|i| kept.rows.get(*i));
                            combine(spec, step, outer, candidates, ctx, &mut next)?;
                        }
                        None => combine(spec, step, outer, kept.rows.iter(), ctx, &mut next)?,
                    }
                }
            }
            StepAccess::Keyed(k) => {
                for chunk in rows.chunks(JOIN_BATCH_ROWS) {
                    let batch = read_batch(
                        self.tx,
                        (&t.table, self.columns[at].as_deref()),
                        k,
                        step.filter.as_ref(),
                        chunk,
                        self.lock,
                        ctx,
                    )?;
                    self.stats[at].batches += 1;
                    self.stats[at].read += batch.rows.len() as u64;
                    for (i, outer) in chunk.iter().enumerate() {
                        combine(spec, step, outer, batch.for_row(i), ctx, &mut next)?;
                    }
                }
            }
        }
        self.stats[at].rows += next.len() as u64;
        self.stats[at].time += started.elapsed();
        Ok(next)
    }
}

/// How a hash join folds a value into its bucket key: values the
/// comparison deems equal get the same key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fold {
    /// Integers, by value.
    Int,
    /// utf8mb4_general_ci: lower case, trailing spaces ignored.
    GeneralCi,
    /// utf8mb4_bin: trailing spaces ignored.
    Bin,
    /// Dates and times, by their text.
    Text,
}

/// An equality of the step's table's column with an earlier table's, of
/// kinds a bucket key compares exactly as SQL does: (this table's
/// column, the other column, how to fold), combined positions.
pub(crate) fn hash_pair(
    spec: &JoinSpec,
    step: &crate::engine::plan::join::Step,
) -> Option<(usize, usize, Fold)> {
    use crate::engine::expr::{CmpOp, Kind};
    let me = step.table;
    step.matching.iter().find_map(|c| {
        let Expr::Cmp(CmpOp::Eq, a, b, coll) = c else {
            return None;
        };
        let (Expr::Col(x), Expr::Col(y)) = (&**a, &**b) else {
            return None;
        };
        let tx = crate::engine::plan::join::table_at(spec, *x)?;
        let ty = crate::engine::plan::join::table_at(spec, *y)?;
        let (mine, other) = match (tx == me, ty == me) {
            (true, false) => (*x, *y),
            (false, true) => (*y, *x),
            _ => return None,
        };
        // The declared types, so that every value is of the variant the
        // fold expects (a BIT or ENUM column is neither an integer nor
        // text here).
        let ty = |pos: usize| {
            let t = &spec.tables[crate::engine::plan::join::table_at(spec, pos)?];
            t.table.columns.get(pos - t.offset).map(|c| &c.ty)
        };
        let family = |pos: usize| match ty(pos)? {
            SqlType::TinyInt { .. }
            | SqlType::SmallInt { .. }
            | SqlType::MediumInt { .. }
            | SqlType::Int { .. }
            | SqlType::BigInt { .. } => Some(0),
            SqlType::Char { .. } | SqlType::VarChar { .. } | SqlType::Text { .. } => Some(1),
            SqlType::Date => Some(2),
            _ => None,
        };
        if family(mine)? != family(other)? {
            return None;
        }
        let fold = match (spec.columns[mine].kind, spec.columns[other].kind) {
            (Kind::Int { .. }, Kind::Int { .. }) => Fold::Int,
            (Kind::Date, Kind::Date) => Fold::Text,
            (Kind::Str { collation: p }, Kind::Str { collation: q }) if p == q && *coll == p => {
                match p? {
                    schema::Collation::Utf8mb4GeneralCi => Fold::GeneralCi,
                    schema::Collation::Utf8mb4Bin => Fold::Bin,
                }
            }
            _ => return None,
        };
        Some((mine, other, fold))
    })
}

/// The bucket key of a value (None for NULL, which equals nothing).
fn hash_key(v: &Val, fold: Fold) -> Option<Vec<u8>> {
    let trimmed = |b: &[u8]| {
        let end = b.iter().rposition(|c| *c != b' ').map_or(0, |p| p + 1);
        b[..end].to_vec()
    };
    match (v, fold) {
        (Val::Null, _) => None,
        (Val::Int(i), Fold::Int) => Some(i128::from(*i).to_le_bytes().to_vec()),
        (Val::UInt(u), Fold::Int) => Some(i128::from(*u).to_le_bytes().to_vec()),
        // As `Collation::compare`: trailing spaces off, then each
        // character's weight.
        (Val::Str(b), Fold::GeneralCi) => {
            let mut key = Vec::with_capacity(b.len());
            schema::Collation::Utf8mb4GeneralCi.sort_key_into(b, &mut key);
            Some(key)
        }
        (Val::Str(b), Fold::Bin) => Some(trimmed(b)),
        (other, _) => Some(other.to_text().into_bytes()),
    }
}

/// Matches one outer row with candidate rows of the step's table.
pub(crate) fn combine<'r>(
    spec: &JoinSpec,
    step: &crate::engine::plan::join::Step,
    outer: &[Val],
    candidates: impl Iterator<Item = &'r Vec<Val>>,
    ctx: &mut Ctx<'_>,
    out: &mut Vec<Vec<Val>>,
) -> SqlResult<()> {
    let t = &spec.tables[step.table];
    if let Some(kind) = t.semi {
        // A subquery's table: the outer row once, at its first match
        // (semi-join), or only without one (anti-join).
        let mut matched = false;
        for c in candidates {
            ctx.check_killed()?;
            let mut row = outer.to_vec();
            row[t.offset..t.offset + c.len()].clone_from_slice(c);
            if test_all(&step.matching, &row, ctx)? && test_all(&step.post, &row, ctx)? {
                matched = true;
                if kind == SemiKind::Semi {
                    push(out, row)?;
                }
                break;
            }
        }
        if kind == SemiKind::Anti && !matched {
            push(out, outer.to_vec())?;
        }
        return Ok(());
    }
    let mut matched = false;
    for c in candidates {
        ctx.check_killed()?;
        let mut row = outer.to_vec();
        row[t.offset..t.offset + c.len()].clone_from_slice(c);
        if test_all(&step.matching, &row, ctx)? {
            matched = true;
            if test_all(&step.post, &row, ctx)? {
                push(out, row)?;
            }
        }
    }
    if t.outer && !matched {
        // NULL-extended: the outer row's slot of this table stays NULL.
        let row = outer.to_vec();
        if test_all(&step.post, &row, ctx)? {
            push(out, row)?;
        }
    }
    Ok(())
}

/// Keeps a combined row: past `FETCH_ROWS_MAX` the join fails naming it.
fn push(out: &mut Vec<Vec<Val>>, row: Vec<Val>) -> SqlResult<()> {
    if out.len() >= FETCH_ROWS_MAX {
        return Err(SqlError::unsupported(format_args!(
            "joins of more than {FETCH_ROWS_MAX} rows in the SQL node"
        )));
    }
    out.push(row);
    Ok(())
}

fn test_all(conds: &[Expr], row: &[Val], ctx: &mut Ctx<'_>) -> SqlResult<bool> {
    for c in conds {
        if !c.test(row, ctx)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The inner rows one batch found.
struct Batch {
    /// Rows of the inner table (its own columns).
    rows: Vec<Vec<Val>>,
    /// Key reads: per outer row of the chunk, the row its key found.
    by_outer: Option<Vec<Option<usize>>>,
    /// Ordered scans: the rows with a key (no NULL in its columns), by
    /// key in the index's order.
    sorted: Vec<usize>,
    /// Ordered scans: per outer row of the chunk, the places in `sorted`
    /// of the rows its key equals (empty for no key, such as a NULL).
    ranges: Vec<std::ops::Range<usize>>,
}

impl Batch {
    /// The candidate rows for the `at`-th outer row of the chunk: the
    /// rows the index found for its key (the join's conditions are tested
    /// on each after).
    fn for_row(&self, at: usize) -> impl Iterator<Item = &Vec<Val>> {
        let keyed = self
            .by_outer
            .as_ref()
            .and_then(|b| b.get(at).copied().flatten());
        let sorted = match &self.by_outer {
            Some(_) => &[][..],
            None => self
                .ranges
                .get(at)
                .and_then(|r| self.sorted.get(r.clone()))
                .unwrap_or(&[]),
        };
        keyed
            .into_iter()
            .chain(sorted.iter().copied())
            .filter_map(|i| self.rows.get(i))
    }
}

/// Two keys in index order, given as pairs of their values, each pair
/// compared under its column's collation.
fn key_cmp<'v>(
    pairs: impl Iterator<Item = (&'v Val, &'v Val)>,
    collations: &[Option<schema::Collation>],
    ctx: &mut Ctx<'_>,
) -> Ordering {
    for ((x, y), coll) in pairs.zip(collations) {
        let o = compare(x, y, *coll, ctx);
        if o.is_ne() {
            return o;
        }
    }
    Ordering::Equal
}

/// Whether a column holds text (compared under a PAD SPACE collation).
fn is_text(ty: &SqlType) -> bool {
    matches!(
        ty,
        SqlType::Char { .. } | SqlType::VarChar { .. } | SqlType::Text { .. }
    )
}

/// Reads the inner rows for one chunk of outer rows: one native batch.
fn read_batch(
    tx: &Transaction<'_>,
    (table, columns): (&Arc<TableInfo>, Option<&[&str]>),
    k: &Keyed,
    own_filter: Option<&Filter>,
    chunk: &[Vec<Val>],
    lock: Option<RowLock>,
    ctx: &mut Ctx<'_>,
) -> SqlResult<Batch> {
    // Each outer row's key in stored form.
    let mut keys: Vec<Option<Vec<Value>>> = Vec::with_capacity(chunk.len());
    for outer in chunk {
        let mut native = Vec::with_capacity(k.exprs.len());
        let mut ok = true;
        for (e, c) in k.exprs.iter().zip(&k.columns) {
            let mut v = e.eval(outer, ctx)?;
            // Text compares PAD SPACE: trailing spaces do not count, and
            // may be more than the column holds.
            if let (Val::Str(b), true) = (&mut v, is_text(&table.columns[*c].ty)) {
                let end = b.iter().rposition(|ch| *ch != b' ').map_or(0, |p| p + 1);
                b.truncate(end);
            }
            // NULL equals nothing; a value the column cannot hold exactly
            // equals none of its values.
            match exact(table, *c, &v, ctx.env.tz_secs) {
                Some(n) => native.push(n),
                None => {
                    ok = false;
                    break;
                }
            }
        }
        keys.push(ok.then_some(native));
    }
    let native_table = &table.native;
    match k.kind {
        KeyedKind::Primary | KeyedKind::Unique => {
            // One read per distinct key, all in one execute.
            let mut distinct: HashMap<Vec<u8>, usize> = HashMap::new();
            let mut handles = Vec::new();
            let mut slot_of = Vec::with_capacity(chunk.len());
            for key in &keys {
                let Some(native) = key else {
                    slot_of.push(None);
                    continue;
                };
                let bytes = super::key_bytes(native);
                if let Some(at) = distinct.get(&bytes) {
                    slot_of.push(Some(*at));
                    continue;
                }
                let mut op = Op::read(native_table, native)
                    .lock(RowLock::mode_of(lock))
                    .lock_wait(RowLock::wait_of(lock))
                    .ignore_error();
                if k.kind == KeyedKind::Unique {
                    op = op.index(&k.index);
                }
                if let Some(columns) = columns {
                    op = op.columns(columns);
                }
                handles.push(
                    tx.define(op)
                        .map_err(|e| txn::native_error_in(&e, &table.name))?,
                );
                distinct.insert(bytes, handles.len() - 1);
                slot_of.push(Some(handles.len() - 1));
            }
            let mut rows = Vec::new();
            let mut row_of = vec![None; handles.len()];
            if !handles.is_empty() {
                let outcome = tx
                    .execute(ExecMode::NoCommit)
                    .map_err(|e| txn::native_error_in(&e, &table.name))?;
                for (at, h) in handles.into_iter().enumerate() {
                    match outcome.result(h) {
                        Some(OpResult::Row(r)) => {
                            rows.push(sql_row_of(table, r, ctx.env.tz_secs));
                            row_of[at] = Some(rows.len() - 1);
                        }
                        Some(OpResult::Failed(e)) if e.code == skarv_client::codes::NO_SUCH_ROW => {
                        }
                        Some(OpResult::Failed(e)) => {
                            return Err(txn::native_error_in(e, &table.name))
                        }
                        _ => {}
                    }
                }
            }
            let by_outer = slot_of
                .into_iter()
                .map(|s| s.and_then(|at| row_of[at]))
                .collect();
            Ok(Batch {
                rows,
                by_outer: Some(by_outer),
                sorted: Vec::new(),
                ranges: Vec::new(),
            })
        }
        KeyedKind::Ordered => {
            // One multi-range scan: each distinct key of the chunk an
            // equal range, in key order, so the data nodes read the rows
            // of those keys and no others (MySQL's multi-range read).
            let collations: Vec<Option<schema::Collation>> = k
                .columns
                .iter()
                .map(|c| table.columns[*c].ty.collation())
                .collect();
            // Each key as the column's own value (the stored form read
            // back): it compares with the rows' values as the index
            // orders them, whatever the type of the outer expression.
            let probes: Vec<Option<Vec<Val>>> = keys
                .iter()
                .map(|key| {
                    key.as_ref().map(|native| {
                        k.columns
                            .iter()
                            .zip(native)
                            .map(|(c, v)| {
                                super::convert::from_native(
                                    v,
                                    &table.columns[*c].ty,
                                    ctx.env.tz_secs,
                                )
                            })
                            .collect()
                    })
                })
                .collect();
            let cmp = |a: &[Val], b: &[Val], ctx: &mut Ctx<'_>| {
                key_cmp(a.iter().zip(b), &collations, ctx)
            };
            // Distinct keys in key order: keys a collation deems equal
            // ('a' and 'A') are one range, so that no row comes twice.
            let mut order: Vec<usize> = (0..keys.len()).filter(|i| probes[*i].is_some()).collect();
            let probe = |i: usize| probes[i].as_deref().unwrap_or(&[]);
            order.sort_by(|a, b| cmp(probe(*a), probe(*b), ctx));
            order.dedup_by(|a, b| cmp(probe(*a), probe(*b), ctx).is_eq());
            let mut rows = Vec::new();
            if !order.is_empty() {
                let range = |i: usize| {
                    let native = keys[i].clone().unwrap_or_default();
                    (Some((native.clone(), true)), Some((native, true)))
                };
                let (lower, upper) = range(order[0]);
                let options = ScanOptions {
                    index: Some(k.index.as_str()),
                    lower,
                    upper,
                    more_ranges: order[1..].iter().map(|i| range(*i)).collect(),
                    filter: own_filter.cloned(),
                    projection: columns.map(<[&str]>::to_vec),
                    lock: lock.map(|l| l.mode),
                    lock_wait: RowLock::wait_of(lock),
                    ..ScanOptions::default()
                };
                let scan = tx
                    .scan(native_table, options)
                    .map_err(|e| txn::native_error_in(&e, &table.name))?;
                for r in scan {
                    let r = r.map_err(|e| txn::native_error_in(&e, &table.name))?;
                    ctx.check_killed()?;
                    if rows.len() >= FETCH_ROWS_MAX {
                        return Err(SqlError::unsupported(format_args!(
                            "joins of more than {FETCH_ROWS_MAX} rows in the SQL node"
                        )));
                    }
                    rows.push(sql_row_of(table, &r, ctx.env.tz_secs));
                }
            }
            // The rows in key order, for each outer row's binary search;
            // a row's key is compared where it stands in the row.
            let row_cmp = |row: &[Val], key: &[Val], ctx: &mut Ctx<'_>| {
                key_cmp(
                    k.columns.iter().map(|c| &row[*c]).zip(key),
                    &collations,
                    ctx,
                )
            };
            let mut sorted: Vec<usize> = (0..rows.len())
                .filter(|i| k.columns.iter().all(|c| !rows[*i][*c].is_null()))
                .collect();
            sorted.sort_by(|a, b| {
                let pairs = k.columns.iter().map(|c| (&rows[*a][*c], &rows[*b][*c]));
                key_cmp(pairs, &collations, ctx)
            });
            let mut ranges = Vec::with_capacity(probes.len());
            for p in &probes {
                ranges.push(match p {
                    None => 0..0,
                    Some(p) => {
                        let start = sorted.partition_point(|r| row_cmp(&rows[*r], p, ctx).is_lt());
                        let end = start
                            + sorted[start..]
                                .partition_point(|r| row_cmp(&rows[*r], p, ctx).is_eq());
                        start..end
                    }
                });
            }
            Ok(Batch {
                rows,
                by_outer: None,
                sorted,
                ranges,
            })
        }
    }
}
