//! Window functions' values: once a query's rows are known (grouped and
//! past HAVING), each window's rows are put in partition and ORDER BY
//! order, and every row gets its value from its place among them.
//!
//! A frame-using aggregate folds its frame's rows; consecutive rows whose
//! frames start at the same row and end no earlier (the default frame, a
//! running total) fold only the rows added, so those cost O(n); a sliding
//! frame (`ROWS BETWEEN 2 PRECEDING AND 2 FOLLOWING`) folds each row's
//! frame anew, O(n × frame).

use std::cmp::Ordering;

use super::select::{order_cmp, AggState};
use crate::engine::expr::{Ctx, Expr, FrameBound, Val, WinFn, WinSpec};
use crate::error::{SqlError, SqlResult};

/// The expressions of a window function evaluated per row (for the
/// columns a query must read and its correlated subqueries).
pub fn exprs(w: &WinSpec) -> impl Iterator<Item = &Expr> {
    w.args
        .iter()
        .chain(w.agg.iter().filter_map(|a| a.arg.as_ref()))
        .chain(&w.partition)
        .chain(w.order.iter().map(|(e, _)| e))
}

/// What a row brings to one window: its partition and order keys and its
/// argument values.
struct Input {
    partition: Vec<Val>,
    order: Vec<Val>,
    args: Vec<Val>,
    agg_arg: Val,
}

/// Every window's value for every row (`values[row][window]`), and the
/// rows' places in the windows' order when they all sort the same way.
pub struct Computed {
    pub values: Vec<Vec<Val>>,
    /// The rows (by place in `rows`) in the one order every window that
    /// sorts puts them in (PARTITION BY, then ORDER BY): MariaDB returns
    /// the rows of a query without ORDER BY in its windows' last sort
    /// (`SELECT id, ROW_NUMBER() OVER (ORDER BY score DESC)` comes
    /// ranked). None when no window sorts, or they sort differently
    /// (MariaDB's choice of the last is its own).
    pub sorted: Option<Vec<usize>>,
}

/// Every window's values. `rows`: each row and its aggregates, as the
/// select items see them.
pub fn compute(
    windows: &[WinSpec],
    rows: &[(&[Val], &[Val])],
    ctx: &mut Ctx<'_>,
) -> SqlResult<Computed> {
    let mut out: Vec<Vec<Val>> = vec![Vec::with_capacity(windows.len()); rows.len()];
    // Sorts compare by their Debug form (as ROLLUP's expressions do:
    // `Expr` has no equality).
    let sort_of = |w: &WinSpec| {
        let sorts = !w.partition.is_empty() || !w.order.is_empty();
        sorts.then(|| format!("{:?} {:?}", w.partition, w.order))
    };
    let mut sorts = windows.iter().filter_map(sort_of);
    let one_sort = sorts.next().filter(|first| sorts.all(|s| s == *first));
    let mut sorted = None;
    for w in windows {
        let mut inputs = Vec::with_capacity(rows.len());
        for (row, aggs) in rows {
            ctx.check_killed()?;
            let correlated = ctx.correlated;
            let mut c = ctx.child(ctx.params, aggs, correlated);
            let result = input(w, row, &mut c);
            ctx.absorb(c);
            inputs.push(result?);
        }
        let (values, order) = one_window(w, &inputs, ctx)?;
        for (slot, v) in out.iter_mut().zip(values) {
            slot.push(v);
        }
        if one_sort.is_some() && sort_of(w).is_some() {
            sorted = Some(order);
        }
    }
    Ok(Computed {
        values: out,
        sorted,
    })
}

fn input(w: &WinSpec, row: &[Val], c: &mut Ctx<'_>) -> SqlResult<Input> {
    let mut eval_all = |es: &mut dyn Iterator<Item = &Expr>| -> SqlResult<Vec<Val>> {
        es.map(|e| e.eval(row, c)).collect()
    };
    let partition = eval_all(&mut w.partition.iter())?;
    let order = eval_all(&mut w.order.iter().map(|(e, _)| e))?;
    let args = eval_all(&mut w.args.iter())?;
    let agg_arg = match w.agg.as_ref() {
        Some(a) => match &a.arg {
            Some(e) => e.eval(row, c)?,
            None => Val::Int(1),
        },
        None => Val::Null,
    };
    Ok(Input {
        partition,
        order,
        args,
        agg_arg,
    })
}

/// One window's value for each row, and the rows in its order.
fn one_window(
    w: &WinSpec,
    inputs: &[Input],
    ctx: &mut Ctx<'_>,
) -> SqlResult<(Vec<Val>, Vec<usize>)> {
    let n = inputs.len();
    // Keys compare as GROUP BY and ORDER BY compare them: strings under
    // their collations.
    let cmp_partition = |a: &Input, b: &Input| -> Ordering {
        for ((x, y), coll) in a
            .partition
            .iter()
            .zip(&b.partition)
            .zip(&w.partition_collations)
        {
            let o = order_cmp(x, y, *coll);
            if o.is_ne() {
                return o;
            }
        }
        Ordering::Equal
    };
    let cmp_order = |a: &Input, b: &Input| -> Ordering {
        for (((x, y), (_, desc)), coll) in a
            .order
            .iter()
            .zip(&b.order)
            .zip(&w.order)
            .zip(&w.order_collations)
        {
            let o = order_cmp(x, y, *coll);
            let o = if *desc { o.reverse() } else { o };
            if o.is_ne() {
                return o;
            }
        }
        Ordering::Equal
    };
    let mut sorted: Vec<usize> = (0..n).collect();
    sorted.sort_by(|&a, &b| {
        cmp_partition(&inputs[a], &inputs[b]).then_with(|| cmp_order(&inputs[a], &inputs[b]))
    });
    let mut values = vec![Val::Null; n];
    let mut start = 0;
    while start < n {
        let mut end = start + 1;
        while end < n && cmp_partition(&inputs[sorted[start]], &inputs[sorted[end]]).is_eq() {
            end += 1;
        }
        let part = &sorted[start..end];
        // Peer groups: rows equal under the window's ORDER BY.
        let mut peer_first = vec![0; part.len()];
        let mut peer_last = vec![0; part.len()];
        let mut group_no = vec![0u64; part.len()];
        let mut first = 0;
        let mut groups = 0;
        for j in 0..part.len() {
            if j > 0 && cmp_order(&inputs[part[j - 1]], &inputs[part[j]]).is_ne() {
                first = j;
            }
            if first == j {
                groups += 1;
            }
            peer_first[j] = first;
            group_no[j] = groups;
        }
        let mut last = part.len().saturating_sub(1);
        for j in (0..part.len()).rev() {
            if j + 1 < part.len() && peer_first[j + 1] != peer_first[j] {
                last = j;
            }
            peer_last[j] = last;
        }
        let peers = Peers {
            first: &peer_first,
            last: &peer_last,
        };
        let mut running: Option<(usize, usize, AggState)> = None;
        let percentile = match w.func {
            WinFn::PercentileCont | WinFn::PercentileDisc => percentile(w, part, inputs, ctx),
            _ => Val::Null,
        };
        for j in 0..part.len() {
            ctx.check_killed()?;
            let len = part.len();
            let here = &inputs[part[j]];
            let v = match w.func {
                WinFn::RowNumber => Val::Int(j as i64 + 1),
                WinFn::Rank => Val::Int(peer_first[j] as i64 + 1),
                WinFn::DenseRank => Val::Int(group_no[j] as i64),
                WinFn::PercentRank => Val::Double(if len > 1 {
                    peer_first[j] as f64 / (len - 1) as f64
                } else {
                    0.0
                }),
                WinFn::CumeDist => Val::Double((peer_last[j] + 1) as f64 / len as f64),
                WinFn::Ntile => ntile(&here.args[0], j, len, ctx)?,
                WinFn::Lag | WinFn::Lead => {
                    let step = if w.func == WinFn::Lag {
                        -w.offset
                    } else {
                        w.offset
                    };
                    let at = j as i64 + step;
                    if at >= 0 && (at as usize) < len {
                        inputs[part[at as usize]].args[0].clone()
                    } else {
                        here.args.get(1).cloned().unwrap_or(Val::Null)
                    }
                }
                WinFn::FirstValue | WinFn::LastValue | WinFn::NthValue => {
                    match frame(w, j, len, &peers, part, inputs) {
                        None => Val::Null,
                        Some((a, b)) => {
                            let at = match w.func {
                                WinFn::FirstValue => Some(a),
                                WinFn::LastValue => Some(b),
                                _ => usize::try_from(w.offset - 1)
                                    .ok()
                                    .and_then(|n| a.checked_add(n))
                                    .filter(|at| *at <= b),
                            };
                            at.map_or(Val::Null, |at| inputs[part[at]].args[0].clone())
                        }
                    }
                }
                WinFn::PercentileCont | WinFn::PercentileDisc => percentile.clone(),
                WinFn::Agg => {
                    let spec = w
                        .agg
                        .as_ref()
                        .expect("an aggregate window has its aggregate");
                    match frame(w, j, len, &peers, part, inputs) {
                        None => AggState::fresh(spec).finish(spec, ctx)?,
                        Some((a, b)) => {
                            // A frame from the same first row that reaches
                            // as far or further: fold only the rows added.
                            // `running`: (first row, next row to fold, state).
                            let (mut state, from) = match running.take() {
                                Some((ra, next, st)) if ra == a && next <= b + 1 => (st, next),
                                _ => (AggState::fresh(spec), a),
                            };
                            for at in from..=b {
                                state.fold(spec, inputs[part[at]].agg_arg.clone(), ctx)?;
                            }
                            let value = state.clone().finish(spec, ctx)?;
                            running = Some((a, b + 1, state));
                            value
                        }
                    }
                }
            };
            values[part[j]] = v;
        }
        start = end;
    }
    Ok((values, sorted))
}

/// PERCENTILE_CONT's or PERCENTILE_DISC's value over a partition, its
/// rows in the order of x (the window's one ORDER BY key), NULLs left
/// out: CONT interpolates between the values around position p·(n − 1),
/// as MariaDB's; DISC is the first value whose cumulative distribution
/// k/n reaches p.
fn percentile(w: &WinSpec, part: &[usize], inputs: &[Input], ctx: &mut Ctx<'_>) -> Val {
    let xs: Vec<&Val> = part
        .iter()
        .map(|&i| &inputs[i].order[0])
        .filter(|v| !v.is_null())
        .collect();
    let n = xs.len();
    if n == 0 {
        return Val::Null;
    }
    if w.func == WinFn::PercentileCont {
        let at = w.fraction * (n - 1) as f64;
        let (lo, hi) = (at.floor() as usize, at.ceil() as usize);
        let (a, b) = (ctx.num_f64(xs[lo]), ctx.num_f64(xs[hi]));
        return Val::Double(a + (at - lo as f64) * (b - a));
    }
    let k = (1..=n)
        .find(|k| *k as f64 / n as f64 >= w.fraction)
        .unwrap_or(n);
    xs[k - 1].clone()
}

/// A partition's peer groups: each position's first and last peer.
struct Peers<'a> {
    first: &'a [usize],
    last: &'a [usize],
}

/// The positions (first, last) of row `j`'s frame in its partition of
/// `len` rows; None when it is empty.
fn frame(
    w: &WinSpec,
    j: usize,
    len: usize,
    peers: &Peers<'_>,
    part: &[usize],
    inputs: &[Input],
) -> Option<(usize, usize)> {
    let f = w.frame;
    let last = len - 1;
    let (a, b) = if f.rows {
        let a = match f.start {
            FrameBound::UnboundedPreceding => 0,
            FrameBound::Preceding(k) => j as i128 - i128::from(k),
            FrameBound::CurrentRow => j as i128,
            FrameBound::Following(k) => j as i128 + i128::from(k),
            FrameBound::UnboundedFollowing => len as i128,
        };
        let b = match f.end {
            FrameBound::UnboundedPreceding => -1,
            FrameBound::Preceding(k) => j as i128 - i128::from(k),
            FrameBound::CurrentRow => j as i128,
            FrameBound::Following(k) => j as i128 + i128::from(k),
            FrameBound::UnboundedFollowing => last as i128,
        };
        (a.max(0), b.min(last as i128))
    } else {
        let a = match f.start {
            FrameBound::UnboundedPreceding => 0,
            FrameBound::CurrentRow => peers.first[j] as i128,
            bound => range_bound(w, j, bound, true, part, inputs) as i128,
        };
        let b = match f.end {
            FrameBound::UnboundedFollowing => last as i128,
            FrameBound::CurrentRow => peers.last[j] as i128,
            bound => range_bound(w, j, bound, false, part, inputs) as i128 - 1,
        };
        (a, b)
    };
    (a <= b).then_some((a as usize, b as usize))
}

/// RANGE `k PRECEDING`/`k FOLLOWING` over the one ORDER BY key: the first
/// position whose key is at least (`start`) or past (`!start`) the row's
/// key moved by k in the order's direction. A NULL key's frame is its
/// peers (the NULLs).
fn range_bound(
    w: &WinSpec,
    j: usize,
    bound: FrameBound,
    start: bool,
    part: &[usize],
    inputs: &[Input],
) -> usize {
    let desc = w.order.first().is_some_and(|(_, d)| *d);
    let key = |at: usize| -> Option<f64> {
        let v = &inputs[part[at]].order[0];
        (!v.is_null()).then(|| number(v))
    };
    let Some(here) = key(j) else {
        let nulls = |at: usize| inputs[part[at]].order[0].is_null();
        return if start {
            (0..=j)
                .rev()
                .take_while(|at| nulls(*at))
                .last()
                .unwrap_or(j)
        } else {
            (j..part.len())
                .take_while(|at| nulls(*at))
                .last()
                .map_or(j + 1, |l| l + 1)
        };
    };
    let k = match bound {
        FrameBound::Preceding(k) => -(k as f64),
        FrameBound::Following(k) => k as f64,
        _ => 0.0,
    };
    // The bound's key in the sort's direction.
    let target = if desc { here - k } else { here + k };
    // Position of the first row not before the target (start) or after
    // it (end), in sorted order (NULLs sort first ascending, last
    // descending, and are never inside a numeric range).
    let before = |at: usize| -> bool {
        match key(at) {
            None => !desc,
            Some(x) => {
                if desc {
                    if start {
                        x > target
                    } else {
                        x >= target
                    }
                } else if start {
                    x < target
                } else {
                    x <= target
                }
            }
        }
    };
    // `before` holds for a prefix of the sorted partition: a binary
    // search, not a walk per row (O(n log n) for the partition).
    let (mut low, mut high) = (0, part.len());
    while low < high {
        let mid = low + (high - low) / 2;
        if before(mid) {
            low = mid + 1;
        } else {
            high = mid;
        }
    }
    debug_assert!(
        low == 0 || before(low - 1),
        "RANGE keys out of order at {low}"
    );
    low
}

/// A RANGE key as a number (the frame's offset is one).
fn number(v: &Val) -> f64 {
    match v {
        Val::Int(i) => *i as f64,
        Val::UInt(u) => *u as f64,
        Val::Double(d) => *d,
        Val::Dec(d) => d.to_f64(),
        other => other.to_text().trim().parse().unwrap_or(0.0),
    }
}

/// NTILE(n) of the row at position `j` of `len`: the first `len % n`
/// buckets hold one row more.
fn ntile(n: &Val, j: usize, len: usize, ctx: &mut Ctx<'_>) -> SqlResult<Val> {
    let n = match n {
        Val::Int(i) => *i,
        Val::UInt(u) => i64::try_from(*u).unwrap_or(i64::MAX),
        Val::Null => 0,
        other => ctx.num_i64(other),
    };
    if n < 1 {
        return Err(SqlError::new(
            crate::engine::expr::window::NTILE_NOT_POSITIVE,
            "Argument of NTILE must be greater than 0",
        ));
    }
    let n = n as u64;
    let (len, j) = (len as u64, j as u64);
    let small = len / n;
    let big = len % n;
    // Rows in the `big` larger buckets come first.
    let bucket = if j < big * (small + 1) {
        j / (small + 1)
    } else {
        big + (j - big * (small + 1)) / small.max(1)
    };
    Ok(Val::Int(bucket as i64 + 1))
}
