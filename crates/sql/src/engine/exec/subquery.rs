//! Uncorrelated subqueries in expressions: each runs once per statement,
//! before the expressions around it are lowered, and its rows are kept
//! (by the subquery's text) for the statement; lowering then makes of it
//! a constant (scalar, `EXISTS`) or a list of constants (`IN`, `ANY`,
//! `ALL`), which the planner can use like a written list (key reads for
//! `pk IN (SELECT …)`).
//!
//! A subquery that names a column of the query around it (correlated)
//! cannot run on its own: its error is kept, and lowering (which sees the
//! outer columns) tells it apart from a plain unknown column.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::Arc;

use sqlparser::ast::{self, Visit, Visitor};
use sqlparser::tokenizer::Location;

use super::derived::{check_kept, Materialised};
use crate::engine::catalog::TableInfo;
use crate::engine::expr::Val;
use crate::engine::Conn;
use crate::error::{codes, SqlError, SqlResult};

/// What a subquery gave: its rows, or the error it failed with.
pub type Outcome = Result<Arc<Materialised>, SqlError>;

/// The statement's subqueries by their text.
#[derive(Default)]
pub struct Cache {
    /// Results by `Query::to_string()`.
    pub results: HashMap<String, Outcome>,
    /// Views being read inside views now.
    pub view_depth: usize,
    /// The text of the view whose query is planned now, innermost: its
    /// query's places are in it, not in the statement's (select items
    /// are named by the text they were written as).
    pub view_text: Option<Arc<str>>,
    /// Correlated subqueries planned to run per row, by text: their
    /// columns (`exec/correlated.rs`).
    pub correlated: HashMap<String, Arc<Materialised>>,
    /// The outer rows a correlated subquery runs against now, innermost
    /// last.
    pub outer: Vec<crate::engine::expr::OuterRow>,
    /// Correlated subqueries' results by text and bound values.
    pub per_row: super::correlated::RowCache,
    /// What each correlated subquery did, by text, while `EXPLAIN
    /// ANALYZE` runs its query (None otherwise: nothing is counted).
    pub analyze: Option<HashMap<String, super::correlated::RunStats>>,
    /// The derived tables an `EXPLAIN`'s query reads, noted as they run
    /// (None otherwise).
    pub(crate) explain: Option<super::select::ExplainNotes>,
    /// The statement's range bounds that warned (`Env::range_warned`).
    pub range_warned: Arc<crate::engine::expr::eval::WarnedOnce>,
}

impl Cache {
    /// Forgets the previous statement's results.
    pub fn clear(&mut self) {
        self.results.clear();
        self.view_depth = 0;
        self.view_text = None;
        self.correlated.clear();
        self.outer.clear();
        self.per_row = Default::default();
        self.analyze = None;
        self.explain = None;
        self.range_warned = Default::default();
    }
}

/// Finds the subqueries of expressions at one query depth.
struct Finder {
    depth: usize,
    base: usize,
    found: Vec<ast::Query>,
}

impl Visitor for Finder {
    type Break = ();

    fn pre_visit_query(&mut self, _: &ast::Query) -> ControlFlow<()> {
        self.depth += 1;
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _: &ast::Query) -> ControlFlow<()> {
        self.depth -= 1;
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, e: &ast::Expr) -> ControlFlow<()> {
        use ast::Expr as E;
        if self.depth == self.base {
            match e {
                E::Subquery(q)
                | E::Exists { subquery: q, .. }
                | E::In {
                    target: ast::InTarget::Subquery(q),
                    ..
                } => self.found.push((**q).clone()),
                _ => {}
            }
        }
        ControlFlow::Continue(())
    }
}

/// The subqueries in `node`'s expressions at query depth `base` (0: not
/// inside any query of `node`; 1: in `node` itself when it is a query).
pub(crate) fn find(node: &impl Visit, base: usize) -> Vec<ast::Query> {
    let mut f = Finder {
        depth: 0,
        base,
        found: Vec::new(),
    };
    let _ = node.visit(&mut f);
    f.found
}

/// Runs (with `params` None: only plans) the subqueries of `node` at
/// depth `base` that this statement has not run yet, keeping what each
/// gave. A subquery may read the table its UPDATE, DELETE or INSERT
/// writes (MariaDB 10.3+; MySQL's 1093): it runs here, before any row is
/// written, so it reads the rows as they were.
pub(crate) fn prepare(
    conn: &mut Conn<'_>,
    node: &impl Visit,
    base: usize,
    placeholders: &[Location],
    params: Option<&[Val]>,
) -> SqlResult<()> {
    for q in find(node, base) {
        let key = q.to_string();
        if conn.subqueries.results.contains_key(&key) {
            continue;
        }
        let outcome = match super::select::materialise(conn, &q, placeholders, params) {
            Ok(m) => {
                check_kept(&m.rows, "subquery")?;
                Ok(Arc::new(m))
            }
            // Perhaps a column of the outer query, or an aggregate of the
            // outer query's columns in its WHERE: lowering decides.
            Err(e) if may_be_correlated(&e) => Err(e),
            Err(e) => return Err(e),
        };
        conn.subqueries.results.insert(key, outcome);
    }
    Ok(())
}

/// Whether a subquery's error when planned alone may be its naming the
/// outer query: a column it does not find (1054), or an aggregate where
/// its own would be refused (1111: `WHERE x > SUM(t.a)` of an outer `t`).
pub(crate) fn may_be_correlated(e: &crate::error::SqlError) -> bool {
    e.code == codes::BAD_FIELD || e.code == codes::INVALID_GROUP_FUNC_USE
}

/// Whether a subquery of `node` reads `target` (by name, in this
/// statement's database when unqualified).
pub(crate) fn reads_target(conn: &Conn<'_>, node: &impl Visit, target: &TableInfo) -> bool {
    let database = conn.session.database.clone().unwrap_or_default();
    find(node, 0).iter().any(|q| {
        ast::visit_relations(q, |name| {
            let parts = crate::engine::expr::name_parts(name);
            let (db, table) = match parts.as_slice() {
                [t] => (database.as_str(), t.as_str()),
                [d, t] => (d.as_str(), t.as_str()),
                _ => return ControlFlow::Continue(()),
            };
            if db.eq_ignore_ascii_case(&target.db) && table.eq_ignore_ascii_case(&target.name) {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
        .is_break()
    })
}
