//! Writes through a view: INSERT, REPLACE, UPDATE and DELETE whose target
//! is an updatable view become the same statement of the view's table, as
//! MySQL's MERGE algorithm runs them.
//!
//! A view is updatable when its query reads one table (or one updatable
//! view), or a join of tables, with no DISTINCT, GROUP BY, HAVING, aggregate, window function,
//! UNION, LIMIT or WITH: each of its rows is then one row of that table.
//! The rewrite (one level per view, at most `VIEW_NESTING_MAX` as a read
//! of views follows):
//! - the target becomes the view's table, under the view's alias for it;
//! - every column of the view the statement names (bare, or qualified by
//!   the view's name or the statement's alias for it) becomes the view's
//!   expression for it; a name the view has not is 1054, as MySQL's (the
//!   table's other columns are not visible through the view). Names inside
//!   a subquery of the statement are the subquery's and left alone;
//! - UPDATE and DELETE add the view's WHERE to theirs, so they change only
//!   rows the view shows;
//! - a column set or inserted must be a plain column of the table in the
//!   view (1348 for an expression's); an INSERT without a column list
//!   needs every view column to be one (1471), and fills the table's other
//!   columns with their defaults.
//!
//! A join view (tables joined, each a table) is written as MariaDB
//! writes one ([`join_view`]): an UPDATE of one table's columns becomes a
//! multi-table UPDATE of the view's join, an INSERT of one table's
//! columns an INSERT into that table.
//!
//! A view WITH CHECK OPTION adds its WHERE (over the table, as it stands
//! after the views below it) to the checks the write makes of each row it
//! writes, beside the table's CHECK constraints (`write::lower_checks`):
//! 1369 for a row the view would not show. CASCADED (the default) checks
//! every view below too; LOCAL only those with an option of their own.

use std::ops::ControlFlow;

use sqlparser::ast::{self, Statement, VisitMut, VisitorMut};

use super::derived::VIEW_NESTING_MAX;
use super::{source_of, Source};
use crate::engine::views::{CheckOption, View};
use crate::engine::Conn;
use crate::error::{codes, SqlError, SqlResult};

/// A view's WHERE that rows written through it must hold (WITH CHECK
/// OPTION), over the table written: 1369 naming the view when one does
/// not (a NULL fails too: such a row is not in the view).
#[derive(Clone, Debug)]
pub struct ViewCheck {
    /// The view's database and name.
    pub db: String,
    pub name: String,
    /// Its WHERE, its names the table's columns, unqualified.
    pub cond: ast::Expr,
}

/// The statement `statement` (an INSERT, REPLACE, UPDATE or DELETE of one
/// target) becomes once every view it writes through is replaced by its
/// table, and the checks of those views' CHECK OPTIONs; None when its
/// target is no view.
pub(crate) fn rewrite(
    conn: &Conn<'_>,
    statement: &Statement,
) -> SqlResult<Option<(Statement, Vec<ViewCheck>)>> {
    let mut current: Option<Statement> = None;
    let mut checks = Vec::new();
    // A CASCADED option above checks every view below.
    let mut cascaded = false;
    // A failed check names the view written through (MySQL's and
    // MariaDB's 1369), whichever view's WHERE it was.
    let mut written: Option<(String, String)> = None;
    let done = |current: Option<Statement>,
                mut checks: Vec<ViewCheck>,
                written: Option<(String, String)>| {
        for c in &mut checks {
            unqualify(&mut c.cond);
            if let Some((db, name)) = &written {
                c.db.clone_from(db);
                c.name.clone_from(name);
            }
        }
        Ok(current.map(|s| (s, checks)))
    };
    for _ in 0..VIEW_NESTING_MAX {
        let now = current.as_ref().unwrap_or(statement);
        let Some(name) = target_name(now) else {
            return done(current, checks, written);
        };
        let view = match source_of(conn, name)? {
            Source::View(v) => v,
            Source::Table(_) | Source::Cte(_) => return done(current, checks, written),
        };
        if written.is_none() {
            written = Some((view.db.clone(), view.name.clone()));
        }
        cascaded |= view.check == CheckOption::Cascaded;
        let check = cascaded || view.check != CheckOption::None;
        current = Some(one_view(conn, now, name, &view, &mut checks, check)?);
    }
    Err(SqlError::unsupported(format_args!(
        "writes through more than {VIEW_NESTING_MAX} views over views"
    )))
}

/// The one table an INSERT, UPDATE or DELETE writes, by name.
fn target_name(statement: &Statement) -> Option<&ast::ObjectName> {
    match statement {
        Statement::Insert(ins) => match &ins.table {
            ast::TableObject::TableName(name) => Some(name),
            _ => None,
        },
        Statement::Update(up) if !super::multi::is_multi_update(up) => match &up.table.relation {
            ast::TableFactor::Table { name, .. } => Some(name),
            _ => None,
        },
        Statement::Delete(del) => match &super::write::delete_target(del)?.relation {
            ast::TableFactor::Table { name, .. } => Some(name),
            _ => None,
        },
        _ => None,
    }
}

/// The statement's verb, as MySQL's messages name it.
fn verb(statement: &Statement) -> &'static str {
    match statement {
        Statement::Insert(ins) if ins.replace_into => "REPLACE",
        Statement::Insert(_) => "INSERT",
        Statement::Update(_) => "UPDATE",
        _ => "DELETE",
    }
}

/// A view's query taken apart for writing through it.
struct Updatable {
    /// The table (or view) it reads, and its alias there (a join view's
    /// first table).
    base: ast::ObjectName,
    base_alias: Option<ast::TableAlias>,
    /// A join view's tables, each by the name its columns are qualified
    /// with there (its alias, else its name), and its FROM; empty for a
    /// view of one table.
    joined: Vec<(String, ast::ObjectName)>,
    from: Vec<ast::TableWithJoins>,
    /// Its columns: name, the expression over the base, and the base
    /// column when the expression is one (with, in a join view, the
    /// qualifier of its table).
    columns: Vec<Column>,
    /// Its WHERE.
    selection: Option<ast::Expr>,
}

/// A view column: its name, its expression, and the table column it is
/// (None for an expression) with the name of that column's table in a
/// join view (None in a view of one table).
type Column = (String, ast::Expr, Option<ast::Ident>, Option<String>);

/// Whether a view can be written through (`information_schema.VIEWS`'s
/// IS_UPDATABLE).
pub(crate) fn is_updatable(view: &View) -> bool {
    view.query()
        .ok()
        .as_ref()
        .and_then(updatable_select)
        .is_some()
}

/// The SELECT of an updatable view's query, else None.
fn updatable_select(query: &ast::Query) -> Option<&ast::Select> {
    if query.with.is_some() || query.limit_clause.is_some() || query.fetch.is_some() {
        return None;
    }
    let ast::SetExpr::Select(select) = &*query.body else {
        return None;
    };
    let grouped = match &select.group_by {
        ast::GroupByExpr::All(_) => true,
        ast::GroupByExpr::Expressions(e, _) => !e.is_empty(),
    };
    // One table, or a join of tables (MariaDB's join views: an UPDATE
    // of one table's columns, an INSERT into one table).
    let plain = |t: &ast::TableFactor| matches!(t, ast::TableFactor::Table { args: None, .. });
    let one_table = !select.from.is_empty()
        && select.from.iter().all(|t| {
            plain(&t.relation)
                && t.joins.iter().all(|j| {
                    plain(&j.relation)
                        && matches!(
                            j.join_operator,
                            ast::JoinOperator::Join(_)
                                | ast::JoinOperator::Inner(_)
                                | ast::JoinOperator::CrossJoin(_)
                                | ast::JoinOperator::Left(_)
                                | ast::JoinOperator::LeftOuter(_)
                                | ast::JoinOperator::StraightJoin(_)
                        )
                })
        });
    if select.distinct.is_some()
        || grouped
        || select.having.is_some()
        || select.qualify.is_some()
        || !one_table
        || super::cte::has_aggregate(select)
        || select.projection.iter().any(|item| match item {
            ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. } => {
                reads_subquery(e)
            }
            _ => false,
        })
    {
        return None;
    }
    Some(select)
}

/// Whether a select item reads a subquery (its value is then no column of
/// the table's row).
fn reads_subquery(e: &ast::Expr) -> bool {
    let mut found = false;
    let _ = ast::visit_expressions(e, |e| {
        if matches!(
            e,
            ast::Expr::Subquery(_)
                | ast::Expr::Exists { .. }
                | ast::Expr::In {
                    target: ast::InTarget::Subquery(_),
                    ..
                }
        ) {
            found = true;
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    });
    found
}

/// Drops the qualifiers of `cond`'s column names (outside subqueries): a
/// view's WHERE over one table, checked over that table's row.
fn unqualify(cond: &mut ast::Expr) {
    struct Strip(usize);
    impl VisitorMut for Strip {
        type Break = ();
        fn pre_visit_query(&mut self, _: &mut ast::Query) -> ControlFlow<()> {
            self.0 += 1;
            ControlFlow::Continue(())
        }
        fn post_visit_query(&mut self, _: &mut ast::Query) -> ControlFlow<()> {
            self.0 -= 1;
            ControlFlow::Continue(())
        }
        fn post_visit_expr(&mut self, e: &mut ast::Expr) -> ControlFlow<()> {
            if self.0 == 0 {
                if let ast::Expr::CompoundIdentifier(parts) = e {
                    if let Some(last) = parts.last() {
                        *e = ast::Expr::Identifier(last.clone());
                    }
                }
            }
            ControlFlow::Continue(())
        }
    }
    let _ = cond.visit(&mut Strip(0));
}

/// The view taken apart; 1288 (1471 for an INSERT) when it is not
/// updatable.
fn updatable(conn: &Conn<'_>, view: &View, shown: &str, verb: &str) -> SqlResult<Updatable> {
    let query = view.query()?;
    let not_updatable = || {
        if matches!(verb, "INSERT" | "REPLACE") {
            SqlError::new(
                codes::NON_INSERTABLE_TABLE,
                format!("The target table {shown} of the {verb} is not insertable-into"),
            )
        } else {
            SqlError::new(
                codes::NON_UPDATABLE_TABLE,
                format!("The target table {shown} of the {verb} is not updatable"),
            )
        }
    };
    let Some(select) = updatable_select(&query) else {
        return Err(not_updatable());
    };
    let ast::TableFactor::Table { name, alias, .. } = &select.from[0].relation else {
        return Err(not_updatable());
    };
    // A join view's tables, by their qualifier there, with their columns
    // (its tables must be tables: a view in it is not written through).
    let mut joined: Vec<(String, ast::ObjectName, Vec<String>)> = Vec::new();
    let factors = select
        .from
        .iter()
        .flat_map(|t| std::iter::once(&t.relation).chain(t.joins.iter().map(|j| &j.relation)));
    if select.from.len() > 1 || !select.from[0].joins.is_empty() {
        for factor in factors {
            let ast::TableFactor::Table { name, alias, .. } = factor else {
                return Err(not_updatable());
            };
            let Source::Table(t) = source_of(conn, name)? else {
                return Err(not_updatable());
            };
            let qualifier = match alias {
                Some(a) => a.name.value.clone(),
                None => crate::engine::expr::name_parts(name)
                    .last()
                    .cloned()
                    .unwrap_or_default(),
            };
            let names = t.columns.iter().map(|c| c.name.clone()).collect();
            joined.push((qualifier, name.clone(), names));
        }
    }
    // The table of a join view's column: by its qualifier, else the one
    // table that has it.
    let owner_of = |e: &ast::Expr| -> Option<String> {
        match e {
            ast::Expr::CompoundIdentifier(parts) if parts.len() >= 2 => {
                let q = &parts[parts.len() - 2].value;
                joined
                    .iter()
                    .find(|(j, ..)| j.eq_ignore_ascii_case(q))
                    .map(|(j, ..)| j.clone())
            }
            ast::Expr::Identifier(i) => {
                let mut having = joined
                    .iter()
                    .filter(|(_, _, cols)| cols.iter().any(|c| c.eq_ignore_ascii_case(&i.value)));
                match (having.next(), having.next()) {
                    (Some((j, ..)), None) => Some(j.clone()),
                    _ => None,
                }
            }
            _ => None,
        }
    };
    let mut columns = Vec::new();
    for item in &select.projection {
        match item {
            ast::SelectItem::UnnamedExpr(e) => {
                columns.push((crate::engine::expr::item_name(e, ""), e.clone()));
            }
            ast::SelectItem::ExprWithAlias { expr, alias } => {
                columns.push((alias.value.clone(), expr.clone()));
            }
            ast::SelectItem::ExprWithAliases { .. } => return Err(not_updatable()),
            ast::SelectItem::Wildcard(_) | ast::SelectItem::QualifiedWildcard(..)
                if joined.is_empty() =>
            {
                for column in base_column_names(conn, name)? {
                    let e = ast::Expr::Identifier(ast::Ident::new(column.clone()));
                    columns.push((column, e));
                }
            }
            ast::SelectItem::Wildcard(_) | ast::SelectItem::QualifiedWildcard(..) => {
                let only = match item {
                    ast::SelectItem::QualifiedWildcard(
                        ast::SelectItemQualifiedWildcardKind::ObjectName(q),
                        _,
                    ) => crate::engine::expr::name_parts(q).last().cloned(),
                    _ => None,
                };
                for (qualifier, _, names) in &joined {
                    if only
                        .as_ref()
                        .is_some_and(|o| !o.eq_ignore_ascii_case(qualifier))
                    {
                        continue;
                    }
                    for column in names {
                        let e = ast::Expr::CompoundIdentifier(vec![
                            ast::Ident::new(qualifier.clone()),
                            ast::Ident::new(column.clone()),
                        ]);
                        columns.push((column.clone(), e));
                    }
                }
            }
        }
    }
    if !view.columns.is_empty() {
        if view.columns.len() != columns.len() {
            return Err(not_updatable());
        }
        for (c, given) in columns.iter_mut().zip(&view.columns) {
            c.0.clone_from(given);
        }
    }
    let columns = columns
        .into_iter()
        .map(|(name, e)| {
            let base = match &e {
                ast::Expr::Identifier(i) => Some(i.clone()),
                ast::Expr::CompoundIdentifier(parts) => parts.last().cloned(),
                _ => None,
            };
            if joined.is_empty() {
                return (name, e, base, None);
            }
            // In a join view a column is named with its table's
            // qualifier, so that it names one column of the join.
            match (owner_of(&e), base) {
                (Some(owner), Some(base)) => {
                    let e = ast::Expr::CompoundIdentifier(vec![
                        ast::Ident::new(owner.clone()),
                        base.clone(),
                    ]);
                    (name, e, Some(base), Some(owner))
                }
                (_, _) => (name, e, None, None),
            }
        })
        .collect();
    Ok(Updatable {
        base: name.clone(),
        base_alias: alias.clone(),
        joined: joined.into_iter().map(|(q, n, _)| (q, n)).collect(),
        from: select.from.clone(),
        columns,
        selection: select.selection.clone(),
    })
}

/// The column names of the table or view `name` (a view's `*`).
fn base_column_names(conn: &Conn<'_>, name: &ast::ObjectName) -> SqlResult<Vec<String>> {
    match source_of(conn, name)? {
        Source::Table(t) => Ok(t.columns.iter().map(|c| c.name.clone()).collect()),
        Source::View(v) => Ok(updatable(conn, &v, &v.name, "UPDATE")?
            .columns
            .into_iter()
            .map(|(n, ..)| n)
            .collect()),
        Source::Cte(_) => Err(SqlError::unsupported("a view of a WITH query")),
    }
}

/// `statement`, whose target `name` is `view`, written against the view's
/// table.
fn one_view(
    conn: &Conn<'_>,
    statement: &Statement,
    name: &ast::ObjectName,
    view: &View,
    checks: &mut Vec<ViewCheck>,
    check: bool,
) -> SqlResult<Statement> {
    let verb = verb(statement);
    let shown = name.0.last().map_or_else(
        || view.name.clone(),
        |p| p.to_string().trim_matches('`').to_owned(),
    );
    let u = updatable(conn, view, &shown, verb)?;
    // The checks of views above, over this view's columns: over its table's.
    let alias = match statement {
        Statement::Update(up) => match &up.table.relation {
            ast::TableFactor::Table { alias, .. } => alias.clone(),
            _ => None,
        },
        Statement::Delete(del) => {
            super::write::delete_target(del).and_then(|t| match &t.relation {
                ast::TableFactor::Table { alias, .. } => alias.clone(),
                _ => None,
            })
        }
        _ => None,
    };
    let above = Names {
        u: &u,
        qualifiers: qualifiers(name, alias.as_ref(), view),
    };
    for c in checks.iter_mut() {
        above.substitute(&mut c.cond, "WHERE")?;
    }
    if !u.joined.is_empty() {
        return join_view(statement, name, alias.as_ref(), view, &u, checks, check);
    }
    if check {
        if let Some(cond) = &u.selection {
            checks.push(ViewCheck {
                db: view.db.clone(),
                name: view.name.clone(),
                cond: cond.clone(),
            });
        }
    }
    let mut out = statement.clone();
    match &mut out {
        Statement::Insert(ins) => {
            ins.table = ast::TableObject::TableName(u.base.clone());
            ins.table_alias = None;
            let named: Vec<ast::Ident> = if ins.columns.is_empty() {
                if u.columns.iter().any(|c| c.2.is_none()) {
                    return Err(SqlError::new(
                        codes::NON_INSERTABLE_TABLE,
                        format!("The target table {shown} of the {verb} is not insertable-into"),
                    ));
                }
                u.columns.iter().filter_map(|c| c.2.clone()).collect()
            } else {
                ins.columns
                    .iter()
                    .map(|c| {
                        let parts = crate::engine::expr::name_parts(c);
                        settable(&u, parts.last().map_or("", String::as_str), "INSERT INTO")
                    })
                    .collect::<SqlResult<_>>()?
            };
            ins.columns = named
                .into_iter()
                .map(|i| ast::ObjectName(vec![ast::ObjectNamePart::Identifier(i)]))
                .collect();
            let scope = Names {
                u: &u,
                qualifiers: qualifiers(name, None, view),
            };
            if let Some(ast::OnInsert::DuplicateKeyUpdate(assignments)) = &mut ins.on {
                for a in assignments {
                    assign(&scope, a, "UPDATE", "field list")?;
                }
            }
        }
        Statement::Update(up) => {
            let ast::TableFactor::Table { name, alias, .. } = &mut up.table.relation else {
                return Err(SqlError::unsupported("this UPDATE through a view"));
            };
            let scope = Names {
                u: &u,
                qualifiers: qualifiers(name, alias.as_ref(), view),
            };
            *name = u.base.clone();
            alias.clone_from(&u.base_alias);
            for a in &mut up.assignments {
                assign(&scope, a, "SET", "SET")?;
            }
            up.selection = scope.filtered(up.selection.take())?;
            for o in &mut up.order_by {
                scope.substitute(&mut o.expr, "ORDER BY")?;
            }
        }
        Statement::Delete(del) => {
            let from = match &mut del.from {
                ast::FromTable::WithFromKeyword(f) | ast::FromTable::WithoutKeyword(f) => f,
            };
            let Some(ast::TableWithJoins {
                relation: ast::TableFactor::Table { name, alias, .. },
                ..
            }) = from.first_mut()
            else {
                return Err(SqlError::unsupported("this DELETE through a view"));
            };
            if !del.tables.is_empty() {
                return Err(SqlError::unsupported("DELETE v FROM v through a view"));
            }
            let scope = Names {
                u: &u,
                qualifiers: qualifiers(name, alias.as_ref(), view),
            };
            *name = u.base.clone();
            alias.clone_from(&u.base_alias);
            del.selection = scope.filtered(del.selection.take())?;
            for o in &mut del.order_by {
                scope.substitute(&mut o.expr, "ORDER BY")?;
            }
        }
        _ => return Err(SqlError::unsupported("this statement through a view")),
    }
    Ok(out)
}

/// `statement` through a join view, as MariaDB writes through one: an
/// UPDATE of one table's columns becomes a multi-table UPDATE of the
/// view's join (its rows those the view shows), an INSERT with a column
/// list of one table's columns an INSERT into that table; 1393 when they
/// name columns of two tables, 1394 for an INSERT without a column list,
/// 1395 for a DELETE. A CHECK OPTION holds when its WHERE reads the
/// written table only (a WHERE over another table of the join is not
/// supported with it).
fn join_view(
    statement: &Statement,
    name: &ast::ObjectName,
    alias: Option<&ast::TableAlias>,
    view: &View,
    u: &Updatable,
    checks: &mut Vec<ViewCheck>,
    check: bool,
) -> SqlResult<Statement> {
    let shown = format!("{}.{}", view.db, view.name);
    let two_tables = || {
        SqlError::new(
            codes::VIEW_MULTIUPDATE,
            format!("Can not modify more than one base table through a join view '{shown}'"),
        )
    };
    // The one table the written columns are of.
    let one_owner = |owners: &mut dyn Iterator<Item = String>| -> SqlResult<String> {
        let first = owners
            .next()
            .ok_or_else(|| SqlError::syntax("nothing to write"))?;
        for o in owners {
            if !o.eq_ignore_ascii_case(&first) {
                return Err(two_tables());
            }
        }
        Ok(first)
    };
    let owned = |column: &str, clause: &str| -> SqlResult<(ast::Ident, String)> {
        let base = settable(u, column, clause)?;
        let owner = u
            .columns
            .iter()
            .find(|c| c.0.eq_ignore_ascii_case(column))
            .and_then(|c| c.3.clone())
            .ok_or_else(|| unknown(column, clause))?;
        Ok((base, owner))
    };
    let table_of = |owner: &str| {
        u.joined
            .iter()
            .find(|(q, _)| q.eq_ignore_ascii_case(owner))
            .map(|(_, n)| n.clone())
            .ok_or_else(two_tables)
    };
    // The view's CHECK OPTION over the written table's row.
    let mut add_check = |owner: &str| -> SqlResult<()> {
        let Some(cond) = u.selection.as_ref().filter(|_| check) else {
            return Ok(());
        };
        let mut other = false;
        let _ = ast::visit_expressions(cond, |e| {
            let of_other = match e {
                ast::Expr::CompoundIdentifier(parts) if parts.len() >= 2 => {
                    !parts[parts.len() - 2].value.eq_ignore_ascii_case(owner)
                }
                ast::Expr::Identifier(i) => !u.columns.iter().any(|c| {
                    c.3.as_deref()
                        .is_some_and(|o| o.eq_ignore_ascii_case(owner))
                        && c.2
                            .as_ref()
                            .is_some_and(|b| b.value.eq_ignore_ascii_case(&i.value))
                }),
                _ => false,
            };
            other |= of_other;
            ControlFlow::<()>::Continue(())
        });
        if other {
            return Err(SqlError::unsupported(format_args!(
                "WITH CHECK OPTION of the join view {shown} whose WHERE reads a table not written"
            )));
        }
        checks.push(ViewCheck {
            db: view.db.clone(),
            name: view.name.clone(),
            cond: cond.clone(),
        });
        Ok(())
    };
    let mut out = statement.clone();
    match &mut out {
        Statement::Delete(_) => {
            return Err(SqlError::new(
                codes::VIEW_DELETE_MERGE_VIEW,
                format!("Can not delete from join view '{shown}'"),
            ))
        }
        Statement::Insert(ins) => {
            if ins.columns.is_empty() {
                return Err(SqlError::new(
                    codes::VIEW_NO_INSERT_FIELD_LIST,
                    format!("Can not insert into join view '{shown}' without fields list"),
                ));
            }
            if ins.on.is_some() {
                return Err(SqlError::unsupported(format_args!(
                    "ON DUPLICATE KEY UPDATE through the join view {shown}"
                )));
            }
            let named = ins
                .columns
                .iter()
                .map(|c| {
                    let parts = crate::engine::expr::name_parts(c);
                    owned(parts.last().map_or("", String::as_str), "INSERT INTO")
                })
                .collect::<SqlResult<Vec<_>>>()?;
            let owner = one_owner(&mut named.iter().map(|(_, o)| o.clone()))?;
            add_check(&owner)?;
            ins.table = ast::TableObject::TableName(table_of(&owner)?);
            ins.table_alias = None;
            ins.columns = named
                .into_iter()
                .map(|(i, _)| ast::ObjectName(vec![ast::ObjectNamePart::Identifier(i)]))
                .collect();
        }
        Statement::Update(up) => {
            let scope = Names {
                u,
                qualifiers: qualifiers(name, alias, view),
            };
            let mut owners = Vec::with_capacity(up.assignments.len());
            for a in &mut up.assignments {
                let column = target_column(&scope, a, "SET")?;
                let (base, owner) = owned(&column, "SET")?;
                a.target = ast::AssignmentTarget::ColumnName(ast::ObjectName(vec![
                    ast::ObjectNamePart::Identifier(ast::Ident::new(owner.clone())),
                    ast::ObjectNamePart::Identifier(base),
                ]));
                owners.push(owner);
                if !super::write::is_default_word(&a.value) {
                    scope.substitute(&mut a.value, "SET")?;
                }
            }
            let owner = one_owner(&mut owners.into_iter())?;
            add_check(&owner)?;
            if !up.order_by.is_empty() || up.limit.is_some() {
                return Err(SqlError::unsupported(format_args!(
                    "ORDER BY or LIMIT in an UPDATE of the join view {shown}"
                )));
            }
            up.selection = scope.filtered(up.selection.take())?;
            let mut from = u.from.clone();
            up.table = from.remove(0);
            up.from = (!from.is_empty()).then_some(ast::UpdateTableFromKind::BeforeSet(from));
        }
        _ => return Err(SqlError::unsupported("this statement through a view")),
    }
    Ok(out)
}

/// The names a column of the view may be qualified by: the statement's
/// alias for it, else its name (`v`, `db.v`).
fn qualifiers(
    name: &ast::ObjectName,
    alias: Option<&ast::TableAlias>,
    view: &View,
) -> Vec<Vec<String>> {
    match alias {
        Some(a) => vec![vec![a.name.value.clone()]],
        None => {
            let parts = crate::engine::expr::name_parts(name);
            let last = parts.last().cloned().unwrap_or_default();
            vec![vec![last.clone()], vec![view.db.clone(), last]]
        }
    }
}

/// The base column a written view column names: 1054 for a name the view
/// has not, 1348 for a column that is an expression.
fn settable(u: &Updatable, column: &str, clause: &str) -> SqlResult<ast::Ident> {
    let Some((name, _, base, _)) = u
        .columns
        .iter()
        .find(|(n, ..)| n.eq_ignore_ascii_case(column))
    else {
        return Err(unknown(column, clause));
    };
    base.clone().ok_or_else(|| {
        SqlError::new(
            codes::NONUPDATEABLE_COLUMN,
            format!("Column '{name}' is not updatable"),
        )
    })
}

fn unknown(column: &str, clause: &str) -> SqlError {
    SqlError::new(
        codes::BAD_FIELD,
        format!("Unknown column '{column}' in '{clause}'"),
    )
}

/// A SET (or ON DUPLICATE KEY UPDATE) item through the view; `target`
/// and `value`: the clauses a 1054 names for each (MariaDB's words).
fn assign(
    scope: &Names<'_>,
    a: &mut ast::Assignment,
    target_clause: &str,
    value_clause: &str,
) -> SqlResult<()> {
    let column = target_column(scope, a, target_clause)?;
    let base = settable(scope.u, &column, target_clause)?;
    a.target =
        ast::AssignmentTarget::ColumnName(ast::ObjectName(vec![ast::ObjectNamePart::Identifier(
            base,
        )]));
    if !super::write::is_default_word(&a.value) {
        scope.substitute(&mut a.value, value_clause)?;
    }
    Ok(())
}

/// The view column a SET item assigns: its name, once its qualifier (if
/// any) is checked to name the view (1054 otherwise, in `clause`).
fn target_column(scope: &Names<'_>, a: &ast::Assignment, clause: &str) -> SqlResult<String> {
    let ast::AssignmentTarget::ColumnName(target) = &a.target else {
        return Err(SqlError::unsupported("tuple assignments"));
    };
    let parts = crate::engine::expr::name_parts(target);
    let Some((column, qualifier)) = parts.split_last() else {
        return Err(SqlError::syntax("an empty column name"));
    };
    if !qualifier.is_empty() && !scope.qualifies(qualifier) {
        return Err(unknown(&parts.join("."), clause));
    }
    Ok(column.clone())
}

/// The view's columns as a statement names them.
struct Names<'a> {
    u: &'a Updatable,
    qualifiers: Vec<Vec<String>>,
}

impl Names<'_> {
    fn qualifies(&self, qualifier: &[String]) -> bool {
        self.qualifiers.iter().any(|q| {
            q.len() == qualifier.len()
                && q.iter()
                    .zip(qualifier)
                    .all(|(a, b)| a.eq_ignore_ascii_case(b))
        })
    }

    /// The view's WHERE and the statement's, both over the base table.
    fn filtered(&self, selection: Option<ast::Expr>) -> SqlResult<Option<ast::Expr>> {
        let mine = match selection {
            Some(mut e) => {
                self.substitute(&mut e, "WHERE")?;
                Some(e)
            }
            None => None,
        };
        Ok(match (self.u.selection.clone(), mine) {
            (Some(view), Some(mine)) => Some(ast::Expr::BinaryOp {
                left: Box::new(ast::Expr::Nested(Box::new(view))),
                op: ast::BinaryOperator::And,
                right: Box::new(ast::Expr::Nested(Box::new(mine))),
            }),
            (view, mine) => view.or(mine),
        })
    }

    /// Replaces every column of the view `e` names (outside its
    /// subqueries) by the view's expression for it.
    fn substitute(&self, e: &mut ast::Expr, clause: &str) -> SqlResult<()> {
        struct Sub<'n, 'c> {
            names: &'n Names<'n>,
            clause: &'c str,
            depth: usize,
            failure: Option<SqlError>,
        }
        impl VisitorMut for Sub<'_, '_> {
            type Break = ();
            fn pre_visit_query(&mut self, _: &mut ast::Query) -> ControlFlow<()> {
                self.depth += 1;
                ControlFlow::Continue(())
            }
            fn post_visit_query(&mut self, _: &mut ast::Query) -> ControlFlow<()> {
                self.depth -= 1;
                ControlFlow::Continue(())
            }
            fn post_visit_expr(&mut self, e: &mut ast::Expr) -> ControlFlow<()> {
                if self.depth > 0 {
                    return ControlFlow::Continue(());
                }
                let default = super::write::is_default_word(e);
                let (column, qualifier): (String, Vec<String>) = match e {
                    // DEFAULT is a word, `@x` a user variable.
                    ast::Expr::Identifier(i) if !default && !i.value.starts_with('@') => {
                        (i.value.clone(), Vec::new())
                    }
                    ast::Expr::CompoundIdentifier(parts) => {
                        let mut names: Vec<String> =
                            parts.iter().map(|p| p.value.clone()).collect();
                        let last = names.pop().unwrap_or_default();
                        (last, names)
                    }
                    _ => return ControlFlow::Continue(()),
                };
                let found = self
                    .names
                    .u
                    .columns
                    .iter()
                    .find(|(n, ..)| n.eq_ignore_ascii_case(&column));
                match found {
                    Some((_, expr, ..))
                        if qualifier.is_empty() || self.names.qualifies(&qualifier) =>
                    {
                        *e = match expr {
                            ast::Expr::Identifier(_) | ast::Expr::CompoundIdentifier(_) => {
                                expr.clone()
                            }
                            other => ast::Expr::Nested(Box::new(other.clone())),
                        };
                        ControlFlow::Continue(())
                    }
                    _ => {
                        let mut shown = qualifier;
                        shown.push(column);
                        self.failure = Some(unknown(&shown.join("."), self.clause));
                        ControlFlow::Break(())
                    }
                }
            }
        }
        let mut sub = Sub {
            names: self,
            clause,
            depth: 0,
            failure: None,
        };
        let _ = e.visit(&mut sub);
        match sub.failure {
            Some(f) => Err(f),
            None => Ok(()),
        }
    }
}
