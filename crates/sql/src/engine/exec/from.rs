//! FROM lists of more than one table: the tables, their columns as one
//! combined row (written order), and the ON / USING / NATURAL conditions
//! lowered over it, as a [`JoinSpec`] for `plan::join`.

use std::sync::Arc;

use sqlparser::ast::{self, JoinConstraint as C, JoinOperator as J};
use sqlparser::tokenizer::Location;

use super::{table_of, table_scope, with_scope};
use crate::engine::expr::{Expr, ScopeColumn, Val};
use crate::engine::plan::join::{Hints, JoinSpec, JoinTable, JOIN_TABLES_MAX};
use crate::engine::Conn;
use crate::error::{codes, SqlError, SqlResult};

/// A FROM list of several tables.
pub(super) struct JoinFrom {
    /// The tables and conditions.
    pub spec: JoinSpec,
    /// Columns an unqualified name does not find (USING's right copies).
    pub hidden: Vec<usize>,
    /// What `*` expands to, in MySQL's order (USING columns first).
    pub star: Vec<usize>,
    /// How many of `star`'s positions each comma-separated group of the
    /// FROM gives, in order.
    pub star_groups: Vec<usize>,
    /// Conjuncts of inner joins' ON that run correlated subqueries: tested
    /// with the WHERE's late ones, on the joined rows.
    pub late: Vec<Expr>,
}

/// How a table joins the ones before it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Inner,
    Straight,
    Left,
    Right,
}

/// The FROM list of `s` (more than one table).
pub(super) fn join_from(
    conn: &mut Conn<'_>,
    s: &ast::Select,
    placeholders: &[Location],
    params: Option<&[Val]>,
) -> SqlResult<JoinFrom> {
    let mut tables: Vec<JoinTable> = Vec::new();
    let mut columns: Vec<ScopeColumn> = Vec::new();
    let mut hidden = Vec::new();
    let mut star = Vec::new();
    let mut star_groups = Vec::new();
    let mut inner_on = Vec::new();
    let mut late = Vec::new();
    let straight = s.select_modifiers.as_ref().is_some_and(|m| m.straight_join);
    for twj in &s.from {
        let group_start = tables.len();
        let first = add_table(
            conn,
            &twj.relation,
            &mut tables,
            &mut columns,
            placeholders,
            params,
        )?;
        let mut group_star: Vec<usize> = positions_of(&tables[first]);
        for join in &twj.joins {
            let (kind, constraint) = match &join.join_operator {
                J::Join(c) | J::Inner(c) | J::CrossJoin(c) => (Kind::Inner, c),
                J::StraightJoin(c) => (Kind::Straight, c),
                J::Left(c) | J::LeftOuter(c) => (Kind::Left, c),
                J::Right(c) | J::RightOuter(c) => (Kind::Right, c),
                _ => {
                    return Err(SqlError::unsupported(format_args!(
                        "the join `{}`",
                        crate::engine::stdx_truncate(&join.to_string(), 60)
                    )))
                }
            };
            let j = add_table(
                conn,
                &join.relation,
                &mut tables,
                &mut columns,
                placeholders,
                params,
            )?;
            // ON sees the tables of its own comma-separated group so far.
            let visible: Vec<ScopeColumn> = columns
                .iter()
                .enumerate()
                .map(|(at, c)| {
                    let t = table_at_tables(&tables, at);
                    if t.is_some_and(|t| t >= group_start && t <= j) {
                        c.clone()
                    } else {
                        ScopeColumn {
                            name: Arc::default(),
                            table: Arc::default(),
                            ..c.clone()
                        }
                    }
                })
                .collect();
            let names: Vec<String> = match constraint {
                C::Using(list) => list
                    .iter()
                    .map(|n| {
                        n.0.last()
                            .and_then(|p| p.as_ident())
                            .map_or_else(|| n.to_string(), |i| i.value.clone())
                    })
                    .collect(),
                C::Natural => group_star
                    .iter()
                    .map(|p| columns[*p].name.to_string())
                    .filter(|name| {
                        tables[j]
                            .table
                            .columns
                            .iter()
                            .any(|c| c.name.eq_ignore_ascii_case(name))
                    })
                    .collect(),
                C::On(_) | C::None => Vec::new(),
                C::UsingAlias(..) => return Err(SqlError::unsupported("USING … AS")),
            };
            // (left, right) positions of each USING column.
            let mut commons = Vec::new();
            for name in &names {
                let left: Vec<usize> = group_star
                    .iter()
                    .copied()
                    .filter(|p| columns[*p].name.eq_ignore_ascii_case(name))
                    .collect();
                let right = positions_of(&tables[j])
                    .into_iter()
                    .find(|p| columns[*p].name.eq_ignore_ascii_case(name));
                let (l, r) = match (left.as_slice(), right) {
                    ([l], Some(r)) => (*l, r),
                    ([_, _, ..], Some(_)) => {
                        return Err(SqlError::new(
                            codes::NON_UNIQ,
                            format!("Column '{name}' in FROM is ambiguous"),
                        ))
                    }
                    _ => {
                        return Err(SqlError::new(
                            codes::BAD_FIELD,
                            format!("Unknown column '{name}' in 'FROM'"),
                        ))
                    }
                };
                commons.push((l, r));
            }
            if let C::On(e) = constraint {
                super::correlated::plan(conn, e, 0, &visible, &hidden, placeholders)?;
            }
            let mut conds = Vec::new();
            with_scope(conn, visible, placeholders, |scope| {
                scope.clause = "ON";
                scope.hidden = hidden.clone();
                for (l, r) in &commons {
                    let side = |p: usize| {
                        let t = table_at_tables(&tables, p).unwrap_or(0);
                        ast::Expr::CompoundIdentifier(vec![
                            ast::Ident::new(&tables[t].alias),
                            ast::Ident::new(&*columns[p].name),
                        ])
                    };
                    let eq = ast::Expr::BinaryOp {
                        left: Box::new(side(*l)),
                        op: ast::BinaryOperator::Eq,
                        right: Box::new(side(*r)),
                    };
                    conds.push(scope.lower(&eq)?);
                }
                if let C::On(e) = constraint {
                    conds.push(scope.lower_condition(e)?);
                }
                Ok(())
            })?;
            let (lefts, rights): (Vec<usize>, Vec<usize>) = commons.iter().copied().unzip();
            let right_rest: Vec<usize> = positions_of(&tables[j])
                .into_iter()
                .filter(|p| !rights.contains(p))
                .collect();
            let left_rest: Vec<usize> = group_star
                .iter()
                .copied()
                .filter(|p| !lefts.contains(p))
                .collect();
            group_star = if kind == Kind::Right {
                // MySQL's RIGHT JOIN is the LEFT JOIN the other way round.
                hidden.extend(&lefts);
                rights
                    .iter()
                    .chain(&right_rest)
                    .chain(&left_rest)
                    .copied()
                    .collect()
            } else {
                hidden.extend(&rights);
                lefts
                    .iter()
                    .chain(&left_rest)
                    .chain(&right_rest)
                    .copied()
                    .collect()
            };
            if conds.iter().any(Expr::has_sub) {
                // A LEFT JOIN's runs as a LATERAL derived table
                // (`select::outer_join_laterals`); not a RIGHT JOIN's.
                if matches!(kind, Kind::Left | Kind::Right) {
                    return Err(SqlError::unsupported(
                        "correlated subqueries in the ON of a RIGHT JOIN (write it as a LEFT JOIN)",
                    ));
                }
                // An inner join's ON is its WHERE: tested after the join.
                for c in std::mem::take(&mut conds) {
                    for part in c.conjuncts() {
                        if part.has_sub() {
                            late.push(part.clone());
                        } else {
                            conds.push(part.clone());
                        }
                    }
                }
            }
            match kind {
                Kind::Inner => inner_on.extend(conds),
                Kind::Straight => {
                    inner_on.extend(conds);
                    tables[j].after = (0..j).collect();
                }
                Kind::Left => {
                    tables[j].outer = true;
                    tables[j].on = conds;
                    tables[j].after = (0..j).collect();
                }
                Kind::Right => {
                    if j - group_start != 1 {
                        return Err(SqlError::unsupported(
                            "RIGHT JOIN after another join (write it as a LEFT JOIN)",
                        ));
                    }
                    let a = group_start;
                    tables[a].outer = true;
                    tables[a].on = conds;
                    tables[a].after = (0..group_start).chain([j]).collect();
                    tables[j].after = (0..group_start).collect();
                }
            }
        }
        star_groups.push(group_star.len());
        star.extend(group_star);
    }
    // An outer table's columns are NULL where nothing matched: NULL-able
    // after the join (its ONs, lowered above, read its real rows), as
    // MariaDB's result metadata and CREATE TABLE … SELECT have them.
    for t in tables.iter().filter(|t| t.outer) {
        for at in positions_of(t) {
            columns[at].nullable = true;
            columns[at].meta.flags &= !crate::value::flags::NOT_NULL;
        }
    }
    Ok(JoinFrom {
        spec: JoinSpec {
            tables,
            inner_on,
            straight,
            columns,
        },
        hidden,
        star,
        star_groups,
        late,
    })
}

/// The combined positions of one table's columns.
fn positions_of(t: &JoinTable) -> Vec<usize> {
    (t.offset..t.offset + t.table.columns.len()).collect()
}

fn table_at_tables(tables: &[JoinTable], col: usize) -> Option<usize> {
    tables
        .iter()
        .position(|t| col >= t.offset && col < t.offset + t.table.columns.len())
}

/// Adds one table of the FROM list; its index.
fn add_table(
    conn: &mut Conn<'_>,
    factor: &ast::TableFactor,
    tables: &mut Vec<JoinTable>,
    columns: &mut Vec<ScopeColumn>,
    placeholders: &[Location],
    params: Option<&[Val]>,
) -> SqlResult<usize> {
    if tables.len() >= JOIN_TABLES_MAX {
        return Err(SqlError::new(
            1116,
            format!("Too many tables; MySQL can only use {JOIN_TABLES_MAX} tables in a join"),
        ));
    }
    let derived = match factor {
        ast::TableFactor::Derived {
            lateral,
            subquery,
            alias,
            ..
        } => Some(super::derived::derived(
            conn,
            subquery,
            alias.as_ref(),
            *lateral,
            placeholders,
            params,
        )?),
        ast::TableFactor::Table {
            name,
            alias,
            args: None,
            ..
        } if super::select::is_virtual(conn, name) => {
            let (db, table_name) = super::select::virtual_table(conn, name).unwrap_or_default();
            Some(super::derived::of_virtual(
                conn,
                &db,
                &table_name,
                alias.as_ref(),
            )?)
        }
        ast::TableFactor::Table {
            name,
            alias,
            args: None,
            ..
        } => match super::source_of(conn, name)? {
            super::Source::View(v) => {
                Some(super::derived::of_view(conn, &v, alias.as_ref(), params)?)
            }
            super::Source::Cte(at) => Some(super::cte::read(
                conn,
                at,
                alias.as_ref(),
                placeholders,
                params,
            )?),
            super::Source::Table(_) => None,
        },
        _ => None,
    };
    if let Some(d) = derived {
        // A derived table or a view: its rows are kept, the join reads
        // them as a table read whole (`JoinTable::rows`).
        if tables
            .iter()
            .any(|t| t.alias.eq_ignore_ascii_case(&d.alias))
        {
            return Err(SqlError::new(
                codes::NONUNIQ_TABLE,
                format!("Not unique table/alias: '{}'", d.alias),
            ));
        }
        let offset = columns.len();
        columns.extend(d.columns);
        tables.push(JoinTable {
            table: d.table,
            alias: d.alias,
            offset,
            outer: false,
            on: Vec::new(),
            after: Vec::new(),
            hints: Hints::default(),
            rows: Some(d.rows),
            semi: None,
        });
        return Ok(tables.len() - 1);
    }
    let ast::TableFactor::Table {
        name,
        alias,
        index_directives,
        args: None,
        ..
    } = factor
    else {
        let what = match factor {
            ast::TableFactor::NestedJoin { .. } => "nested joins (parentheses in FROM)",
            _ => "this table factor in a join",
        };
        return Err(SqlError::unsupported(what));
    };
    let table = table_of(conn, name)?;
    let alias = alias
        .as_ref()
        .map_or_else(|| table.name.clone(), |a| a.name.value.clone());
    if tables.iter().any(|t| t.alias.eq_ignore_ascii_case(&alias)) {
        return Err(SqlError::new(
            codes::NONUNIQ_TABLE,
            format!("Not unique table/alias: '{alias}'"),
        ));
    }
    let hints = Hints::from_ast(&table, &alias, index_directives)?;
    let offset = columns.len();
    columns.extend(table_scope(&table, &alias));
    tables.push(JoinTable {
        table,
        alias,
        offset,
        outer: false,
        on: Vec::new(),
        after: Vec::new(),
        hints,
        rows: None,
        semi: None,
    });
    Ok(tables.len() - 1)
}
