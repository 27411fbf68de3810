//! How a query's SELECTs combine: UNION, EXCEPT and INTERSECT, each
//! DISTINCT or ALL, nested as the parser bound them (INTERSECT before
//! UNION and EXCEPT, left to right otherwise, parentheses first), and a
//! parenthesised part's own ORDER BY … LIMIT.
//!
//! The SELECTs run first, in order, each into its own rows; then
//! [`combine`] folds them as the tree says. Rows compare as a DISTINCT
//! compares them (`group_key`: strings under the result column's
//! collation, numbers by value, NULL equal to NULL).

use std::cmp::Ordering;

use stdx::{KeyMap, KeyState};

use schema::Collation;

use super::{order_cmp, GENERAL_CI};
use crate::engine::expr::{Kind, Val};

/// A set operator.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum SetOp {
    Union,
    Except,
    Intersect,
}

impl SetOp {
    /// The word EXPLAIN shows (`select_type`, `<union1,2>`).
    pub(super) fn word(self) -> &'static str {
        match self {
            SetOp::Union => "UNION",
            SetOp::Except => "EXCEPT",
            SetOp::Intersect => "INTERSECT",
        }
    }
}

/// The ORDER BY … LIMIT of a parenthesised set operation, applied to its
/// rows before they combine further.
#[derive(Clone, Debug, Default)]
pub(super) struct Bound {
    /// Result columns and descending.
    pub(super) order: Vec<(usize, bool)>,
    pub(super) limit: Option<u64>,
    pub(super) offset: u64,
}

/// The tree of a query's set operations; `B` is what a parenthesised
/// part bounds its rows with (the parsed query while planning, a
/// [`Bound`] once planned).
#[derive(Clone, Debug)]
pub(super) enum SetNode<B> {
    /// The n-th SELECT of the query, left to right.
    Select(usize),
    Op {
        op: SetOp,
        /// ALL: duplicates count (UNION ALL appends; EXCEPT ALL and
        /// INTERSECT ALL take counts apart).
        all: bool,
        left: Box<SetNode<B>>,
        right: Box<SetNode<B>>,
    },
    Bounded {
        inner: Box<SetNode<B>>,
        bound: B,
    },
}

impl<B> SetNode<B> {
    /// The same tree with each bound mapped (planning resolves them once
    /// the result columns are known).
    pub(super) fn try_map<C, E>(
        self,
        f: &mut impl FnMut(B) -> Result<C, E>,
    ) -> Result<SetNode<C>, E> {
        Ok(match self {
            SetNode::Select(at) => SetNode::Select(at),
            SetNode::Op {
                op,
                all,
                left,
                right,
            } => SetNode::Op {
                op,
                all,
                left: Box::new(left.try_map(f)?),
                right: Box::new(right.try_map(f)?),
            },
            SetNode::Bounded { inner, bound } => SetNode::Bounded {
                inner: Box::new(inner.try_map(f)?),
                bound: f(bound)?,
            },
        })
    }

    /// Whether combining needs a table of rows (anything but UNION ALL
    /// and a single SELECT): EXPLAIN's "Using temporary".
    pub(super) fn uses_temporary(&self) -> bool {
        match self {
            SetNode::Select(_) => false,
            SetNode::Op {
                op,
                all,
                left,
                right,
            } => *op != SetOp::Union || !*all || left.uses_temporary() || right.uses_temporary(),
            SetNode::Bounded { .. } => true,
        }
    }

    /// The operators of the tree, left to right.
    fn ops(&self, out: &mut Vec<SetOp>) {
        match self {
            SetNode::Select(_) => {}
            SetNode::Op {
                op, left, right, ..
            } => {
                left.ops(out);
                out.push(*op);
                right.ops(out);
            }
            SetNode::Bounded { inner, .. } => inner.ops(out),
        }
    }

    /// How EXPLAIN names the result: `UNION`, `EXCEPT` or `INTERSECT`
    /// when one operator is used throughout, else MariaDB's `UNIT`.
    pub(super) fn result_word(&self) -> &'static str {
        let mut ops = Vec::new();
        self.ops(&mut ops);
        match ops.split_first() {
            Some((first, rest)) if rest.iter().all(|o| o == first) => first.word(),
            Some(_) => "UNIT",
            None => "UNION",
        }
    }

    /// Per SELECT after the first, the operator that joins it to what is
    /// before it (EXPLAIN's `select_type`).
    pub(super) fn linkage(&self) -> Vec<SetOp> {
        let mut ops = Vec::new();
        self.ops(&mut ops);
        ops
    }
}

/// The rows of `node`, each SELECT's rows taken from `arms` (each taken
/// once). `deduplicated`: whatever this part gives is deduplicated
/// above it, so its own duplicates need no removing.
pub(super) fn combine(
    node: &SetNode<Bound>,
    arms: &mut [Vec<Vec<Val>>],
    columns: &Columns,
    deduplicated: bool,
) -> Vec<Vec<Val>> {
    match node {
        SetNode::Select(at) => std::mem::take(&mut arms[*at]),
        SetNode::Op {
            op: SetOp::Union,
            all,
            left,
            right,
        } => {
            let here = !*all && !deduplicated;
            let mut rows = combine(left, arms, columns, deduplicated || !*all);
            rows.extend(combine(right, arms, columns, deduplicated || !*all));
            if here {
                distinct(rows, columns)
            } else {
                rows
            }
        }
        SetNode::Op {
            op,
            all,
            left,
            right,
        } => {
            let keep = *op == SetOp::Intersect;
            let left_rows = combine(left, arms, columns, !*all);
            // Only which rows the right side has matters to DISTINCT.
            let right_rows = combine(right, arms, columns, !*all);
            let mut counts: KeyMap<Vec<u8>, u64> =
                KeyMap::with_capacity_and_hasher(right_rows.len(), KeyState::default());
            for r in &right_rows {
                *counts.entry(columns.key(r)).or_insert(0) += 1;
            }
            if !*all {
                let mut seen =
                    KeyMap::with_capacity_and_hasher(left_rows.len(), KeyState::default());
                return left_rows
                    .into_iter()
                    .filter(|r| {
                        let key = columns.key(r);
                        counts.contains_key(&key) == keep && seen.insert(key, ()).is_none()
                    })
                    .collect();
            }
            // ALL: a row m times on the left and n times on the right is
            // there max(m - n, 0) times (EXCEPT) or min(m, n) times
            // (INTERSECT), its copies together where it first was.
            let mut groups: Vec<(Vec<Val>, u64)> = Vec::new();
            let mut at: KeyMap<Vec<u8>, usize> =
                KeyMap::with_capacity_and_hasher(left_rows.len(), KeyState::default());
            for r in left_rows {
                let key = columns.key(&r);
                match at.get(&key) {
                    Some(&g) => groups[g].1 += 1,
                    None => {
                        at.insert(key, groups.len());
                        groups.push((r, 1));
                    }
                }
            }
            let mut out = Vec::new();
            for (key, g) in at {
                let m = groups[g].1;
                let n = counts.get(&key).copied().unwrap_or(0);
                groups[g].1 = if keep { m.min(n) } else { m.saturating_sub(n) };
            }
            for (row, times) in groups {
                for _ in 1..times {
                    out.push(row.clone());
                }
                if times > 0 {
                    out.push(row);
                }
            }
            out
        }
        SetNode::Bounded { inner, bound } => {
            let mut rows = combine(inner, arms, columns, false);
            // MariaDB drops an ORDER BY without a LIMIT inside: the order
            // of what is combined further is not kept anyway.
            if bound.limit.is_none() && bound.offset == 0 {
                return rows;
            }
            sort(&mut rows, &bound.order, &columns.collations);
            limit(rows, bound.limit, bound.offset)
        }
    }
}

/// The rows in order of the result columns `order` (column, descending).
pub(super) fn sort(
    rows: &mut [Vec<Val>],
    order: &[(usize, bool)],
    collations: &[Option<Collation>],
) {
    if order.is_empty() {
        return;
    }
    rows.sort_by(|a, b| {
        for (at, desc) in order {
            let coll = collations.get(*at).copied().unwrap_or(GENERAL_CI);
            let o = order_cmp(&a[*at], &b[*at], coll);
            let o = if *desc { o.reverse() } else { o };
            if o.is_ne() {
                return o;
            }
        }
        Ordering::Equal
    });
}

/// `LIMIT offset, limit` of rows.
pub(super) fn limit(rows: Vec<Vec<Val>>, limit: Option<u64>, offset: u64) -> Vec<Vec<Val>> {
    if limit.is_none() && offset == 0 {
        return rows;
    }
    let offset = usize::try_from(offset).unwrap_or(usize::MAX);
    let limit = limit.map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX));
    rows.into_iter().skip(offset).take(limit).collect()
}

/// The rows without repeats, each where it first was.
pub(super) fn distinct(rows: Vec<Vec<Val>>, columns: &Columns) -> Vec<Vec<Val>> {
    let mut seen = KeyMap::with_capacity_and_hasher(rows.len(), KeyState::default());
    rows.into_iter()
        .filter(|r| seen.insert(columns.key(r), ()).is_none())
        .collect()
}

/// How the rows of a set operation (or DISTINCT) are told apart, column by
/// column: strings under the column's collation, and a DOUBLE column's
/// numbers as doubles, as MariaDB compares them (`COALESCE(d, e)` of a
/// DECIMAL d and a DOUBLE e is a DOUBLE column, but hands on the
/// DECIMAL it takes: two decimals one double apart are one row).
pub(in crate::engine::exec) struct Columns {
    pub collations: Vec<Option<Collation>>,
    doubles: Vec<bool>,
}

impl Columns {
    /// The columns of kinds `kinds`.
    pub(in crate::engine::exec) fn of(kinds: &[Kind]) -> Columns {
        Columns {
            collations: kinds.iter().map(|k| super::kind_collation(*k)).collect(),
            doubles: kinds.iter().map(|k| *k == Kind::Double).collect(),
        }
    }

    /// A row's key (`group_key`).
    pub(in crate::engine::exec) fn key(&self, row: &[Val]) -> Vec<u8> {
        let mut key = Vec::new();
        self.key_into(row, &mut key);
        key
    }

    /// A row's key appended to `key`.
    pub(in crate::engine::exec) fn key_into(&self, row: &[Val], key: &mut Vec<u8>) {
        if !self.doubles.contains(&true) {
            super::group_key_into(row, &self.collations, key);
            return;
        }
        let row: Vec<Val> = row
            .iter()
            .zip(self.doubles.iter().chain(std::iter::repeat(&false)))
            .map(|(v, double)| match (v, double) {
                (Val::Dec(d), true) => Val::Double(d.to_f64()),
                (Val::Int(i), true) => Val::Double(*i as f64),
                (Val::UInt(u), true) => Val::Double(*u as f64),
                _ => v.clone(),
            })
            .collect();
        super::group_key_into(&row, &self.collations, key);
    }
}
