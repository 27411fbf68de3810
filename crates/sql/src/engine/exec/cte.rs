//! Common table expressions: `WITH [RECURSIVE] name [(cols)] AS (query),
//! … query`.
//!
//! A CTE is a named derived table visible in its query (the query's FROM
//! lists, its subqueries and derived tables) and in the later CTEs of the
//! same `WITH` (with `RECURSIVE`, in its own definition too). It runs
//! when first read and its rows are kept for the rest of the statement, so
//! a CTE read twice runs once; the kept rows obey the derived tables'
//! limits (`DERIVED_ROWS_MAX`, `DERIVED_BYTES_MAX`).
//!
//! A recursive CTE is MySQL's: the query blocks of its UNION that do not
//! name it (the anchors) run once; then those that do run again and again,
//! each time reading only the rows the previous round added, until a round
//! adds none (UNION DISTINCT: no row not seen before). The columns are the
//! anchors'. More than `@@cte_max_recursion_depth` rounds is MySQL's 3636.
//!
//! The scope is a stack on the connection ([`Scope`]): a query's `WITH`
//! pushes its CTEs while the query is planned (which runs its derived
//! tables and subqueries) and pops them after. A CTE being run sees only
//! what its definition may: the entries under it, and itself only while
//! it recurses. A view's query sees none of the statement's CTEs.

use std::ops::ControlFlow;
use std::sync::atomic::Ordering as AtomicOrdering;
use std::sync::Arc;

use schema::Collation;
use sqlparser::ast::{self, SetExpr, SetOperator, SetQuantifier, Visit, Visitor};
use sqlparser::tokenizer::Location;

use super::derived::{self, Derived, Materialised};
use crate::engine::expr::Val;
use crate::engine::Conn;
use crate::error::{codes, SqlError, SqlResult};

/// MySQL's ER_CTE_RECURSIVE_REQUIRES_UNION.
const CTE_RECURSIVE_REQUIRES_UNION: u16 = 3573;
/// MySQL's ER_CTE_RECURSIVE_REQUIRES_NONRECURSIVE_FIRST.
const CTE_RECURSIVE_REQUIRES_ANCHOR: u16 = 3574;
/// MySQL's ER_CTE_RECURSIVE_FORBIDS_AGGREGATION.
const CTE_RECURSIVE_FORBIDS_AGGREGATION: u16 = 3575;
/// MySQL's ER_CTE_RECURSIVE_FORBIDDEN_JOIN_ORDER.
const CTE_RECURSIVE_FORBIDDEN_JOIN_ORDER: u16 = 3576;
/// MySQL's ER_CTE_RECURSIVE_REQUIRES_SINGLE_REFERENCE.
const CTE_RECURSIVE_REQUIRES_SINGLE_REFERENCE: u16 = 3577;
/// MySQL's ER_CTE_MAX_RECURSION_DEPTH.
const CTE_MAX_RECURSION_DEPTH: u16 = 3636;
/// The session variable bounding a recursive CTE's rounds.
const DEPTH_VARIABLE: &str = "cte_max_recursion_depth";
/// Its default, should the variable not read as a number.
const DEPTH_DEFAULT_ROUNDS: u64 = 1000;

/// The CTEs in scope for the running statement, innermost last.
#[derive(Default)]
pub struct Scope {
    entries: Vec<Entry>,
}

impl Scope {
    /// How many entries there are (a mark to [`Scope::truncate`] back to).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no CTE is in scope.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Drops the entries past `mark` (a query's `WITH` going out of scope).
    pub fn truncate(&mut self, mark: usize) {
        self.entries.truncate(mark);
    }
}

/// One CTE in scope.
struct Entry {
    name: String,
    cte: Arc<ast::Cte>,
    /// `WITH RECURSIVE` and its definition names it.
    recursive: bool,
    state: State,
}

/// Where a CTE's rows stand.
enum State {
    /// Not read yet.
    Pending,
    /// Being run and not recursing: its name means what it meant outside.
    Running,
    /// Recursing: its name reads the previous round's rows.
    Working(Arc<Kept>),
    /// Run: its rows for the rest of the statement.
    Done(Arc<Kept>),
}

/// A CTE's result.
struct Kept {
    /// Its columns' names (the column list's, else the query's).
    names: Vec<String>,
    /// Its columns (rows empty: they are in `rows`).
    shape: Materialised,
    rows: Arc<Vec<Vec<Val>>>,
}

/// Brings a `WITH`'s CTEs into scope (until the caller truncates back):
/// 1066 for a name twice in one `WITH`.
pub(crate) fn push(conn: &mut Conn<'_>, with: &ast::With) -> SqlResult<()> {
    for (at, cte) in with.cte_tables.iter().enumerate() {
        let name = cte.alias.name.value.clone();
        if with.cte_tables[..at]
            .iter()
            .any(|c| c.alias.name.value.eq_ignore_ascii_case(&name))
        {
            return Err(SqlError::new(
                codes::NONUNIQ_TABLE,
                format!("Not unique table/alias: '{name}'"),
            ));
        }
        let recursive = with.recursive && names(&cte.query, &name);
        conn.ctes.entries.push(Entry {
            name,
            cte: Arc::new(cte.clone()),
            recursive,
            state: State::Pending,
        });
    }
    Ok(())
}

/// Whether `query` names the table `name` anywhere (unqualified).
fn names(query: &impl Visit, name: &str) -> bool {
    count_refs(query, name) > 0
}

/// How often `node` names the table `name` (unqualified).
fn count_refs(node: &impl Visit, name: &str) -> usize {
    let mut n = 0;
    let _ = ast::visit_relations(node, |r| {
        if is_name(r, name) {
            n += 1;
        }
        ControlFlow::<()>::Continue(())
    });
    n
}

/// Whether a FROM name is the unqualified `name`.
fn is_name(r: &ast::ObjectName, name: &str) -> bool {
    match r.0.as_slice() {
        [p] => p
            .as_ident()
            .is_some_and(|i| i.value.eq_ignore_ascii_case(name)),
        _ => false,
    }
}

/// The CTE in scope that a FROM name names, if any: an unqualified name,
/// innermost first (a CTE shadows a table of the same name).
pub(crate) fn find(conn: &Conn<'_>, name: &ast::ObjectName) -> Option<usize> {
    conn.ctes
        .entries
        .iter()
        .rposition(|e| !matches!(e.state, State::Running) && is_name(name, &e.name))
}

/// Reads the CTE `at` (from [`find`]) as a derived table named by the
/// FROM's alias or the CTE's name, running it if this statement has not.
pub(crate) fn read(
    conn: &mut Conn<'_>,
    at: usize,
    alias: Option<&ast::TableAlias>,
    placeholders: &[Location],
    params: Option<&[Val]>,
) -> SqlResult<Derived> {
    let name = alias.map_or_else(
        || conn.ctes.entries[at].name.clone(),
        |a| a.name.value.clone(),
    );
    // Its identity for EXPLAIN (one `<derivedN>` however often it is read).
    let key = Arc::as_ptr(&conn.ctes.entries[at].cte) as usize;
    let kept = match &conn.ctes.entries[at].state {
        State::Done(k) | State::Working(k) => {
            let k = Arc::clone(k);
            super::select::note_again(conn, &name, key);
            k
        }
        State::Pending | State::Running => {
            let mark = super::select::explain_mark(conn);
            // Only what the definition may see: the entries under it.
            let above = conn.ctes.entries.split_off(at + 1);
            let run = run(conn, at, placeholders, params);
            conn.ctes.entries.extend(above);
            let kept = match run {
                Ok((kept, noted)) => {
                    if let Some((arms, distinct, recursive_from)) = noted {
                        super::select::note_ran(
                            conn,
                            mark,
                            &name,
                            arms,
                            distinct,
                            recursive_from,
                            Some(key),
                        );
                    }
                    Arc::new(kept)
                }
                Err(e) => {
                    // A failure a subquery keeps for later must not leave
                    // the CTE hidden from the statement's other reads.
                    conn.ctes.entries[at].state = State::Pending;
                    return Err(e);
                }
            };
            conn.ctes.entries[at].state = State::Done(Arc::clone(&kept));
            kept
        }
    };
    derived::of_rows(name, &kept.names, &kept.shape, Arc::clone(&kept.rows))
}

/// What EXPLAIN notes of a CTE's run: its SELECTs' rows, whether its
/// UNION is DISTINCT, and where a recursive one's recursive blocks start.
type Noted = Option<(Vec<Vec<super::select::ExplainRow>>, bool, Option<usize>)>;

/// Runs the CTE `at`, the top of the stack now.
fn run(
    conn: &mut Conn<'_>,
    at: usize,
    placeholders: &[Location],
    params: Option<&[Val]>,
) -> SqlResult<(Kept, Noted)> {
    let entry = &mut conn.ctes.entries[at];
    entry.state = State::Running;
    let cte = Arc::clone(&entry.cte);
    let name = entry.name.clone();
    if entry.recursive {
        return recursive(conn, at, &cte, &name, placeholders, params);
    }
    super::select::capture_next(conn);
    let m = super::select::materialise(conn, &cte.query, placeholders, params)?;
    let noted = super::select::derived_captured(conn).map(|(arms, d)| (arms, d, None));
    let rows = m.rows;
    let shape = Materialised {
        rows: Vec::new(),
        ..m
    };
    derived::check_kept(&rows, &name)?;
    let kept = Kept {
        names: derived::column_names(&cte.alias, &shape)?,
        shape,
        rows: Arc::new(rows),
    };
    Ok((kept, noted))
}

/// The query blocks of a UNION, left to right; `distinct`: some UNION is
/// not ALL.
fn blocks<'q>(body: &'q SetExpr, out: &mut Vec<&'q SetExpr>, distinct: &mut bool) {
    match body {
        SetExpr::SetOperation {
            op: SetOperator::Union,
            set_quantifier,
            left,
            right,
        } => {
            if !matches!(set_quantifier, SetQuantifier::All) {
                *distinct = true;
            }
            blocks(left, out, distinct);
            blocks(right, out, distinct);
        }
        SetExpr::Query(q)
            if q.order_by.is_none() && q.limit_clause.is_none() && q.with.is_none() =>
        {
            blocks(&q.body, out, distinct)
        }
        other => out.push(other),
    }
}

/// Runs a recursive CTE: anchors once, then rounds of the recursive
/// blocks over the previous round's new rows until one adds none.
fn recursive(
    conn: &mut Conn<'_>,
    at: usize,
    cte: &ast::Cte,
    name: &str,
    placeholders: &[Location],
    params: Option<&[Val]>,
) -> SqlResult<(Kept, Noted)> {
    let q = &cte.query;
    // EXPLAIN's rows of the blocks: the anchors', then the recursive
    // ones' (as their first round plans them).
    let mut noted: Vec<Vec<super::select::ExplainRow>> = Vec::new();
    let explaining = super::select::explain_mark(conn).is_some();
    if q.order_by.is_some() || q.limit_clause.is_some() {
        return Err(SqlError::new(
            codes::NOT_SUPPORTED_YET,
            "This version of MySQL doesn't yet support 'ORDER BY / LIMIT over UNION in \
             recursive Common Table Expression'",
        ));
    }
    let mut parts = Vec::new();
    let mut distinct = false;
    blocks(&q.body, &mut parts, &mut distinct);
    if parts.len() < 2 {
        return Err(SqlError::new(
            CTE_RECURSIVE_REQUIRES_UNION,
            format!("Recursive Common Table Expression '{name}' should contain a UNION"),
        ));
    }
    let (recursive, anchors): (Vec<&SetExpr>, Vec<&SetExpr>) =
        parts.into_iter().partition(|p| names(*p, name));
    if anchors.is_empty() {
        return Err(SqlError::new(
            CTE_RECURSIVE_REQUIRES_ANCHOR,
            format!(
                "Recursive Common Table Expression '{name}' should have one or more \
                 non-recursive query blocks followed by one or more recursive ones"
            ),
        ));
    }
    for block in &recursive {
        check_recursive_block(block, name)?;
    }
    let query_of = |block: &SetExpr| {
        let mut part = (**q).clone();
        part.body = Box::new(block.clone());
        part
    };
    // Anchors: the columns are the first one's.
    let mut seen: stdx::KeySet<Vec<u8>> = stdx::KeySet::default();
    let mut shape: Option<Materialised> = None;
    let mut all: Vec<Vec<Val>> = Vec::new();
    let mut budget = Budget::default();
    for block in &anchors {
        super::select::capture_next(conn);
        let m = super::select::materialise(conn, &query_of(block), placeholders, params)?;
        if let Some((arms, _)) = super::select::derived_captured(conn) {
            noted.extend(arms);
        }
        let collations = super::select::collations_of(shape.as_ref().unwrap_or(&m));
        let fresh = take_new(m.rows, distinct, &collations, &mut seen);
        budget.add(&fresh, name)?;
        all.extend(fresh);
        match &shape {
            None => {
                shape = Some(Materialised {
                    rows: Vec::new(),
                    ..m
                })
            }
            Some(s) if s.metas.len() != m.metas.len() => return Err(column_count()),
            Some(_) => {}
        }
    }
    let shape = shape.unwrap_or_default();
    let recursive_from = noted.len();
    let names = derived::column_names(&cte.alias, &shape)?;
    let recursive: Vec<ast::Query> = recursive.into_iter().map(query_of).collect();
    let depth = conn
        .session
        .vars
        .get(DEPTH_VARIABLE)
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(DEPTH_DEFAULT_ROUNDS);
    let mut work = all.clone();
    // Only planned (PREPARE): the recursive blocks are planned once over
    // no rows, for their errors.
    let mut rounds: u64 = 0;
    while !work.is_empty() || (params.is_none() && rounds == 0) {
        rounds += 1;
        if rounds > depth {
            return Err(SqlError::new(
                CTE_MAX_RECURSION_DEPTH,
                format!(
                    "Recursive query aborted after {rounds} iterations. Try increasing \
                     @@cte_max_recursion_depth to a larger value."
                ),
            ));
        }
        if conn.info.query_killed.load(AtomicOrdering::Relaxed) {
            return Err(SqlError::new(
                codes::QUERY_INTERRUPTED,
                "Query execution was interrupted",
            ));
        }
        conn.ctes.entries[at].state = State::Working(Arc::new(Kept {
            names: names.clone(),
            shape: shape.clone(),
            rows: Arc::new(std::mem::take(&mut work)),
        }));
        for part in &recursive {
            if rounds == 1 {
                super::select::capture_next(conn);
            }
            let m = super::select::materialise(conn, part, placeholders, params)?;
            if let Some((arms, _)) = super::select::derived_captured(conn) {
                noted.extend(arms);
            }
            if m.metas.len() != shape.metas.len() {
                return Err(column_count());
            }
            let collations = super::select::collations_of(&shape);
            let fresh = take_new(m.rows, distinct, &collations, &mut seen);
            check_lengths(&fresh, &shape, &names, all.len() + work.len())?;
            budget.add(&fresh, name)?;
            work.extend(fresh);
        }
        all.extend(work.iter().cloned());
        if params.is_none() {
            break;
        }
    }
    let kept = Kept {
        names,
        shape,
        rows: Arc::new(all),
    };
    Ok((
        kept,
        explaining.then_some((noted, distinct, Some(recursive_from))),
    ))
}

/// 1222: blocks of different column counts.
fn column_count() -> SqlError {
    SqlError::new(
        codes::WRONG_NUMBER_OF_COLUMNS_IN_SELECT,
        "The used SELECT statements have a different number of columns",
    )
}

/// The rows of a round that count: all of them (UNION ALL), or those not
/// seen before (UNION DISTINCT), strings equal under `collations` (the
/// CTE's columns').
fn take_new(
    rows: Vec<Vec<Val>>,
    distinct: bool,
    collations: &[Option<Collation>],
    seen: &mut stdx::KeySet<Vec<u8>>,
) -> Vec<Vec<Val>> {
    if !distinct {
        return rows;
    }
    rows.into_iter()
        .filter(|r| seen.insert(super::select::group_key(r, collations)))
        .collect()
}

/// The rows and bytes a recursive CTE has kept, against the derived
/// tables' limits (counted as rounds add rows, not rescanned).
#[derive(Default)]
struct Budget {
    rows: usize,
    bytes: usize,
}

impl Budget {
    fn add(&mut self, fresh: &[Vec<Val>], name: &str) -> SqlResult<()> {
        self.rows += fresh.len();
        self.bytes += derived::kept_bytes(fresh);
        derived::check_totals(self.rows, self.bytes, name)
    }
}

/// MySQL's 1406 for a recursive block's string longer than the anchor's
/// column (the columns' types are the anchors'). `before`: rows already
/// kept, for the row number.
fn check_lengths(
    fresh: &[Vec<Val>],
    shape: &Materialised,
    names: &[String],
    before: usize,
) -> SqlResult<()> {
    for (at, meta) in shape.metas.iter().enumerate() {
        if !matches!(
            shape.kinds.get(at),
            Some(crate::engine::expr::Kind::Str { .. })
        ) {
            continue;
        }
        let bytes_per_char = if meta.charset == crate::value::charset::BINARY {
            1
        } else {
            4
        };
        let max_chars = (meta.length / bytes_per_char) as usize;
        for (n, row) in fresh.iter().enumerate() {
            let Some(Val::Str(s)) = row.get(at) else {
                continue;
            };
            let chars = if bytes_per_char == 1 {
                s.len()
            } else {
                String::from_utf8_lossy(s).chars().count()
            };
            if chars > max_chars {
                return Err(SqlError::new(
                    codes::DATA_TOO_LONG,
                    format!(
                        "Data too long for column '{}' at row {}",
                        names.get(at).map_or("", String::as_str),
                        before + n + 1
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// MySQL's rules for a recursive query block: a plain SELECT naming the
/// CTE once, in its FROM (not in a subquery of an expression, nor on the
/// inner side of a LEFT JOIN), without aggregates, window functions,
/// GROUP BY or DISTINCT.
fn check_recursive_block(block: &SetExpr, name: &str) -> SqlResult<()> {
    let SetExpr::Select(s) = block else {
        return Err(SqlError::new(
            codes::NOT_SUPPORTED_YET,
            "This version of MySQL doesn't yet support 'ORDER BY / LIMIT over UNION in \
             recursive Common Table Expression'",
        ));
    };
    let single = || {
        SqlError::new(
            CTE_RECURSIVE_REQUIRES_SINGLE_REFERENCE,
            format!(
                "In recursive query block of Recursive Common Table Expression '{name}', the \
                 recursive table must be referenced only once, and not in any subquery"
            ),
        )
    };
    if count_refs(block, name) != 1 {
        return Err(single());
    }
    let mut in_from = 0;
    for twj in &s.from {
        in_from += count_refs(&twj.relation, name);
        for j in &twj.joins {
            let refs = count_refs(&j.relation, name);
            in_from += refs;
            if refs > 0
                && matches!(
                    j.join_operator,
                    ast::JoinOperator::Left(_) | ast::JoinOperator::LeftOuter(_)
                )
            {
                return Err(SqlError::new(
                    CTE_RECURSIVE_FORBIDDEN_JOIN_ORDER,
                    format!(
                        "In recursive query block of Recursive Common Table Expression \
                         '{name}', the recursive table must neither be in the right argument \
                         of a LEFT JOIN, nor be forced to be non-first with join order hints"
                    ),
                ));
            }
        }
    }
    // Named once in all, and that once in the FROM list: not in a
    // subquery of an expression, whose result is kept by its text for the
    // statement and so would not follow the rounds.
    if in_from != 1 {
        return Err(single());
    }
    let grouped = !matches!(&s.group_by, ast::GroupByExpr::Expressions(e, _) if e.is_empty());
    if grouped || s.distinct.is_some() || has_aggregate(s) {
        return Err(SqlError::new(
            CTE_RECURSIVE_FORBIDS_AGGREGATION,
            format!(
                "Recursive Common Table Expression '{name}' can contain neither aggregation \
                 nor window functions in recursive query block"
            ),
        ));
    }
    Ok(())
}

/// Aggregate functions MySQL knows by name.
const AGGREGATES: &[&str] = &[
    "AVG",
    "BIT_AND",
    "BIT_OR",
    "BIT_XOR",
    "COUNT",
    "GROUP_CONCAT",
    "JSON_ARRAYAGG",
    "JSON_OBJECTAGG",
    "MAX",
    "MIN",
    "STD",
    "STDDEV",
    "STDDEV_POP",
    "STDDEV_SAMP",
    "SUM",
    "VARIANCE",
    "VAR_POP",
    "VAR_SAMP",
];

/// Whether `s`'s select list or HAVING holds an aggregate or a window
/// function (not looking into subqueries).
pub(crate) fn has_aggregate(s: &ast::Select) -> bool {
    struct Finder {
        depth: usize,
        found: bool,
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
            if let ast::Expr::Function(f) = e {
                let fname = f.name.to_string();
                if self.depth == 0
                    && (f.over.is_some()
                        || AGGREGATES.iter().any(|a| a.eq_ignore_ascii_case(&fname)))
                {
                    self.found = true;
                    return ControlFlow::Break(());
                }
            }
            ControlFlow::Continue(())
        }
    }
    let mut f = Finder {
        depth: 0,
        found: false,
    };
    let _ = s.projection.visit(&mut f);
    if let Some(h) = &s.having {
        let _ = h.visit(&mut f);
    }
    f.found
}

/// Runs `f` with no CTE in scope (a view's query: it sees its own `WITH`
/// only), restoring the scope after.
pub(crate) fn hidden<R>(conn: &mut Conn<'_>, f: impl FnOnce(&mut Conn<'_>) -> R) -> R {
    let saved = std::mem::take(&mut conn.ctes);
    let r = f(conn);
    conn.ctes = saved;
    r
}

/// The names the `WITH` clauses anywhere in `node` give (a FROM name that
/// is one of them, unqualified, may be a CTE rather than a table).
pub(crate) fn names_defined(node: &impl Visit) -> Vec<String> {
    struct Names(Vec<String>);
    impl Visitor for Names {
        type Break = ();
        fn pre_visit_query(&mut self, q: &ast::Query) -> ControlFlow<()> {
            if let Some(with) = &q.with {
                self.0
                    .extend(with.cte_tables.iter().map(|c| c.alias.name.value.clone()));
            }
            ControlFlow::Continue(())
        }
    }
    let mut names = Names(Vec::new());
    let _ = node.visit(&mut names);
    names.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlparser::dialect::MySqlDialect;
    use sqlparser::parser::Parser;

    /// The CTE `c` of `sql`'s WITH and its UNION's blocks.
    fn cte_of(sql: &str) -> ast::Cte {
        let statements = Parser::parse_sql(&MySqlDialect {}, sql).expect("parses");
        let ast::Statement::Query(q) = &statements[0] else {
            panic!("not a query: {sql}");
        };
        q.with.as_ref().expect("a WITH").cte_tables[0].clone()
    }

    /// The error code of the first recursive block of `sql`'s CTE `c`.
    fn refused(sql: &str) -> Option<u16> {
        let cte = cte_of(sql);
        let mut parts = Vec::new();
        let mut distinct = false;
        blocks(&cte.query.body, &mut parts, &mut distinct);
        let block = parts
            .into_iter()
            .find(|p| names(*p, "c"))
            .expect("a block naming c");
        check_recursive_block(block, "c").err().map(|e| e.code)
    }

    #[test]
    fn blocks_are_the_unions_parts_and_any_distinct_counts() {
        let cte = cte_of(
            "WITH RECURSIVE c (n) AS (SELECT 1 UNION ALL SELECT 2 UNION SELECT n FROM c) \
             SELECT * FROM c",
        );
        let mut parts = Vec::new();
        let mut distinct = false;
        blocks(&cte.query.body, &mut parts, &mut distinct);
        assert_eq!(parts.len(), 3);
        assert!(distinct);
        assert_eq!(parts.iter().filter(|p| names(**p, "C")).count(), 1);
    }

    #[test]
    fn recursive_blocks_follow_mysqls_rules() {
        let w =
            |block: &str| format!("WITH RECURSIVE c (n) AS (SELECT 1 UNION ALL {block}) SELECT 1");
        assert_eq!(refused(&w("SELECT n + 1 FROM c WHERE n < 3")), None);
        assert_eq!(refused(&w("SELECT n + 1 FROM c JOIN t ON t.a = c.n")), None);
        assert_eq!(
            refused(&w("SELECT n + 1 FROM c LEFT JOIN t ON t.a = c.n")),
            None
        );
        assert_eq!(refused(&w("SELECT n FROM (SELECT n FROM c) d")), None);
        assert_eq!(refused(&w("SELECT SUM(n) FROM c")), Some(3575));
        assert_eq!(refused(&w("SELECT n FROM c GROUP BY n")), Some(3575));
        assert_eq!(refused(&w("SELECT DISTINCT n FROM c")), Some(3575));
        assert_eq!(
            refused(&w("SELECT t.a FROM t LEFT JOIN c ON t.a = c.n")),
            Some(3576)
        );
        assert_eq!(refused(&w("SELECT x.n FROM c x, c y")), Some(3577));
        assert_eq!(
            refused(&w("SELECT n FROM c WHERE n IN (SELECT n FROM c)")),
            Some(3577)
        );
        assert_eq!(
            refused(&w("SELECT 1 FROM t WHERE EXISTS (SELECT 1 FROM c)")),
            Some(3577)
        );
    }
}
