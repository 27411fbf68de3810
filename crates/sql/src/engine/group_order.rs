//! MariaDB's `GROUP BY x [ASC | DESC], …`: the groups come in that order
//! when no ORDER BY names another (MySQL 5.7's syntax, which MariaDB
//! 10.11 keeps). `sqlparser` reads no direction after a GROUP BY item
//! (1064), so [`strip`] takes the words out of the tokens before the
//! parse, noting the SELECT they were in by the place of its SELECT
//! keyword, and [`apply`] gives that SELECT's query the ORDER BY they
//! make when it has none of its own. Groups are in ascending order
//! already (`select::aggregate`), so a list of ASC alone changes
//! nothing.

use sqlparser::ast::{
    Expr, Function, FunctionArg, FunctionArgExpr, FunctionArgumentList, FunctionArguments,
    GroupByExpr, GroupByWithModifier, Ident, ObjectName, OrderBy, OrderByExpr, OrderByKind,
    OrderByOptions, OrderBySort, Query, SetExpr, Statement, Value, VisitMut, VisitorMut,
};
use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Location, Token, TokenWithSpan, Whitespace};
use std::ops::ControlFlow;

use crate::error::{SqlError, SqlResult};

/// The directions written in the GROUP BYs of one statement text: for
/// each SELECT (the place of its keyword) that wrote one, whether each
/// item is DESC.
#[derive(Debug, Default)]
pub(crate) struct GroupOrder {
    selects: Vec<(Location, Vec<bool>)>,
}

/// Words that end a GROUP BY's list at its own depth.
const CLAUSE_ENDS: &[Keyword] = &[
    Keyword::HAVING,
    Keyword::ORDER,
    Keyword::LIMIT,
    Keyword::WINDOW,
    Keyword::WITH,
    Keyword::UNION,
    Keyword::EXCEPT,
    Keyword::INTERSECT,
    Keyword::FOR,
    Keyword::INTO,
    Keyword::LOCK,
    Keyword::PROCEDURE,
];

fn keyword(t: &Token) -> Option<Keyword> {
    match t {
        Token::Word(w) if w.quote_style.is_none() => Some(w.keyword),
        _ => None,
    }
}

/// Takes `ASC` and `DESC` after GROUP BY items out of `tokens` (made
/// whitespace, so every other token keeps its place) and notes where
/// they were. None when the text has none.
pub(crate) fn strip(tokens: &mut [TokenWithSpan]) -> Option<GroupOrder> {
    // Cheap first: no GROUP, or no ASC or DESC at all.
    let mut group = false;
    let mut direction = false;
    for t in tokens.iter() {
        match keyword(&t.token) {
            Some(Keyword::GROUP) => group = true,
            Some(Keyword::ASC | Keyword::DESC) => direction = true,
            _ => {}
        }
    }
    if !(group && direction) {
        return None;
    }
    let significant: Vec<usize> = (0..tokens.len())
        .filter(|&at| !matches!(tokens[at].token, Token::Whitespace(_)))
        .collect();
    let mut order = GroupOrder::default();
    // The SELECT last seen at each depth of parentheses.
    let mut selects: Vec<Option<Location>> = vec![None];
    let mut depth = 0usize;
    let mut n = 0;
    while n < significant.len() {
        let at = significant[n];
        match &tokens[at].token {
            Token::LParen => {
                depth += 1;
                if selects.len() <= depth {
                    selects.push(None);
                }
                selects[depth] = None;
            }
            Token::RParen => depth = depth.saturating_sub(1),
            t if keyword(t) == Some(Keyword::SELECT) => {
                selects[depth] = Some(tokens[at].span.start);
            }
            t if keyword(t) == Some(Keyword::GROUP)
                && significant
                    .get(n + 1)
                    .is_some_and(|&b| keyword(&tokens[b].token) == Some(Keyword::BY)) =>
            {
                let (items, next) = group_items(tokens, &significant, n + 2);
                if let (Some(select), true) = (selects[depth], items.iter().any(Option::is_some)) {
                    for at in items.iter().flatten().map(|(at, _)| *at) {
                        tokens[at].token = Token::Whitespace(Whitespace::Space);
                    }
                    let desc = items.iter().map(|i| i.is_some_and(|(_, d)| d)).collect();
                    order.selects.push((select, desc));
                }
                n = next;
                continue;
            }
            _ => {}
        }
        n += 1;
    }
    (!order.selects.is_empty()).then_some(order)
}

/// The items of a GROUP BY list starting at `significant[from]`: for
/// each, the direction word that ends it (its token and whether it is
/// DESC), and where the list ends.
fn group_items(
    tokens: &[TokenWithSpan],
    significant: &[usize],
    from: usize,
) -> (Vec<Option<(usize, bool)>>, usize) {
    let mut items = Vec::new();
    let mut nested = 0usize;
    let mut last: Option<usize> = None;
    let mut n = from;
    let end_item = |last: Option<usize>, items: &mut Vec<Option<(usize, bool)>>| {
        let word = last.and_then(|at| match keyword(&tokens[at].token) {
            Some(Keyword::ASC) => Some((at, false)),
            Some(Keyword::DESC) => Some((at, true)),
            _ => None,
        });
        items.push(word);
    };
    while n < significant.len() {
        let at = significant[n];
        let t = &tokens[at].token;
        match t {
            Token::LParen => nested += 1,
            Token::RParen if nested == 0 => break,
            Token::RParen => nested -= 1,
            Token::Comma if nested == 0 => {
                end_item(last, &mut items);
                last = None;
                n += 1;
                continue;
            }
            Token::SemiColon => break,
            t if nested == 0 && keyword(t).is_some_and(|k| CLAUSE_ENDS.contains(&k)) => break,
            _ => {}
        }
        last = Some(at);
        n += 1;
    }
    end_item(last, &mut items);
    (items, n)
}

/// Gives each SELECT that [`strip`] noted with a DESC the ORDER BY its
/// GROUP BY's directions make, when its query has no ORDER BY (which
/// decides the order then, as in MariaDB). WITH ROLLUP orders its rows
/// itself and takes no ORDER BY (1221), so there each DESC item is
/// wrapped in [`ROLLUP_DESC`] instead, which the planner takes off again
/// ([`rollup_desc`]).
pub(crate) fn apply(order: &GroupOrder, statement: &mut Statement) -> SqlResult<()> {
    struct Apply<'o> {
        order: &'o GroupOrder,
    }
    impl VisitorMut for Apply<'_> {
        type Break = SqlError;
        fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<SqlError> {
            let has_order = query.order_by.is_some();
            let SetExpr::Select(select) = query.body.as_mut() else {
                return ControlFlow::Continue(());
            };
            let start = select.select_token.0.span.start;
            let Some((_, desc)) = self.order.selects.iter().find(|(at, _)| *at == start) else {
                return ControlFlow::Continue(());
            };
            let GroupByExpr::Expressions(exprs, modifiers) = &mut select.group_by else {
                return ControlFlow::Continue(());
            };
            // `strip` splits the list at the commas the parser splits it at.
            debug_assert_eq!(exprs.len(), desc.len(), "GROUP BY items of {select}");
            if !desc.iter().any(|d| *d) || exprs.len() != desc.len() {
                return ControlFlow::Continue(());
            }
            if modifiers.contains(&GroupByWithModifier::Rollup) {
                for (e, d) in exprs.iter_mut().zip(desc) {
                    if *d {
                        let inner = std::mem::replace(e, Expr::value(Value::Null));
                        *e = Expr::Function(Function {
                            name: ObjectName::from(vec![Ident::new(ROLLUP_DESC)]),
                            uses_odbc_syntax: false,
                            parameters: FunctionArguments::None,
                            args: FunctionArguments::List(FunctionArgumentList {
                                duplicate_treatment: None,
                                args: vec![FunctionArg::Unnamed(FunctionArgExpr::Expr(inner))],
                                clauses: Vec::new(),
                            }),
                            filter: None,
                            null_treatment: None,
                            over: None,
                            within_group: Vec::new(),
                        });
                    }
                }
                return ControlFlow::Continue(());
            }
            if !has_order {
                let exprs = exprs.clone();
                query.order_by = Some(order_by(&exprs, desc));
            }
            ControlFlow::Continue(())
        }
    }
    match statement.visit(&mut Apply { order }) {
        ControlFlow::Break(e) => Err(e),
        ControlFlow::Continue(()) => Ok(()),
    }
}

/// The function a DESC item of a GROUP BY … WITH ROLLUP is wrapped in
/// between the parse and the planner. Not a function of MySQL's; a view's
/// text keeps it (it reads back the same).
pub(crate) const ROLLUP_DESC: &str = "skarv_group_desc";

/// A GROUP BY item without its [`ROLLUP_DESC`] wrapper, and whether it had
/// one.
pub(crate) fn rollup_desc(e: &Expr) -> (&Expr, bool) {
    if let Expr::Function(f) = e {
        if let (true, FunctionArguments::List(list)) = (
            f.name.0.len() == 1
                && f.name.0[0]
                    .as_ident()
                    .is_some_and(|i| i.value.eq_ignore_ascii_case(ROLLUP_DESC)),
            &f.args,
        ) {
            if let [FunctionArg::Unnamed(FunctionArgExpr::Expr(inner))] = list.args.as_slice() {
                return (inner, true);
            }
        }
    }
    (e, false)
}

/// The ORDER BY of GROUP BY items with their directions.
fn order_by(exprs: &[Expr], desc: &[bool]) -> OrderBy {
    let items = exprs
        .iter()
        .zip(desc)
        .map(|(e, d)| OrderByExpr {
            expr: e.clone(),
            options: OrderByOptions {
                sort: Some(if *d {
                    OrderBySort::Desc
                } else {
                    OrderBySort::Asc
                }),
                nulls_first: None,
            },
            with_fill: None,
        })
        .collect();
    OrderBy {
        kind: OrderByKind::Expressions(items),
        interpolate: None,
    }
}

#[cfg(test)]
mod tests {
    fn parsed(sql: &str) -> String {
        let statements = crate::engine::parse(sql).expect("parses");
        statements
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    }

    #[test]
    fn desc_becomes_the_order_by_of_its_own_select() {
        assert_eq!(
            parsed("SELECT k, COUNT(*) FROM t GROUP BY k DESC"),
            "SELECT k, COUNT(*) FROM t GROUP BY k ORDER BY k DESC"
        );
        assert_eq!(
            parsed("SELECT a, b FROM t GROUP BY a DESC, b LIMIT 2"),
            "SELECT a, b FROM t GROUP BY a, b ORDER BY a DESC, b ASC LIMIT 2"
        );
        // An ORDER BY of its own decides.
        assert_eq!(
            parsed("SELECT k FROM t GROUP BY k DESC ORDER BY COUNT(*)"),
            "SELECT k FROM t GROUP BY k ORDER BY COUNT(*)"
        );
        // ASC alone: the groups' own order.
        assert_eq!(
            parsed("SELECT k FROM t GROUP BY k ASC"),
            "SELECT k FROM t GROUP BY k"
        );
        // A subquery's GROUP BY is its own; the outer one's stays as it is.
        assert_eq!(
            parsed(
                "SELECT x FROM (SELECT MOD(k, 3) x FROM t GROUP BY MOD(k, 3) DESC) d \
                 GROUP BY x HAVING x > 0"
            ),
            "SELECT x FROM (SELECT MOD(k, 3) AS x FROM t GROUP BY MOD(k, 3) ORDER BY MOD(k, 3) DESC) \
             d GROUP BY x HAVING x > 0"
        );
    }

    #[test]
    fn directions_elsewhere_are_left_alone() {
        // An ORDER BY's, a window's and GROUP_CONCAT's DESC are their own.
        assert_eq!(
            parsed(
                "SELECT k, GROUP_CONCAT(v ORDER BY v DESC), ROW_NUMBER() OVER (ORDER BY k DESC) \
                 FROM t GROUP BY k"
            ),
            "SELECT k, GROUP_CONCAT(v ORDER BY v DESC), ROW_NUMBER() OVER (ORDER BY k DESC) \
             FROM t GROUP BY k"
        );
        // WITH ROLLUP takes no ORDER BY: the DESC items are marked.
        assert_eq!(
            parsed("SELECT a, b FROM t GROUP BY a DESC, b WITH ROLLUP"),
            "SELECT a, b FROM t GROUP BY skarv_group_desc(a), b WITH ROLLUP"
        );
    }
}
