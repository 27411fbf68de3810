//! The SQL dialect the parser is run with: MariaDB's, which is
//! `sqlparser`'s `MySqlDialect` with one shortcut.
//!
//! For every expression the parser first tries to read a typed literal
//! (`DATE '2026-12-01'`), and when that fails (a number, a string) it
//! formats an error message it then throws away. A 16-row `INSERT` of
//! three values a row paid that 48 times: 7.7 % of the SQL node's time
//! in seed 001's 16-row insert case. A literal token cannot start a type
//! name, so [`SkarvDialect`] reads it as a value at once, which is what
//! the parser does after its failed attempt.
//!
//! One precedence differs from `MySqlDialect`'s, which gives the logical
//! `XOR` the rank of PostgreSQL's bitwise `#`, above the comparisons, so
//! that `a < b XOR c` read as `a < (b XOR c)`: MariaDB ranks `XOR` between
//! `AND` and `OR` ([`XOR_PRECEDENCE`]). And MariaDB's prefix `!` (NOT of
//! the highest rank), which `MySqlDialect` does not read, is read here,
//! and so is `BINARY x`, a cast of MariaDB's rank, which `MySqlDialect`
//! reads as a cast of the whole expression after it.
//!
//! Everything else is `MySqlDialect`'s: each method `MySqlDialect`
//! overrides is forwarded, and [`Dialect::dialect`] answers its type, so
//! the parser's `dialect_of!(… is MySqlDialect)` checks hold.
//! `sql_fuzz.rs` (`the_dialect_reads_the_suite_as_mysql_does`) parses
//! every statement of the SQL tests with both and compares the trees,
//! which catches a method `MySqlDialect` overrides in a later `sqlparser`
//! and this one misses.

use std::any::TypeId;

use sqlparser::ast::{Expr, Statement};
use sqlparser::dialect::{Dialect, MySqlDialect, Precedence};
use sqlparser::keywords::Keyword;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::{Token, TokenWithSpan};

/// The logical `XOR`'s rank: below `AND` (10), above `OR` (5), as in
/// MariaDB's grammar (`%left OR_SYM OR2_SYM`, `%left XOR`, `%left AND_SYM
/// AND_AND_SYM`), so that `a < b XOR c < d` is `(a < b) XOR (c < d)`.
pub const XOR_PRECEDENCE: u8 = 7;

/// The rank `!`'s operand is read at: above every binary operator
/// (MySQL's `*` is 40, `::` 50), so that `!1 + 1` is `(!1) + 1`.
const BANG_NOT_PRECEDENCE: u8 = 60;

/// The rank `BINARY`'s operand is read at: that of `!`'s (MariaDB ranks
/// BINARY and COLLATE above `!`; none of them is an infix operator that
/// could take the operand's place).
const BINARY_PRECEDENCE: u8 = BANG_NOT_PRECEDENCE;

/// MariaDB's dialect (see the module doc).
#[derive(Debug, Default, Clone, Copy)]
pub struct SkarvDialect;

const MYSQL: MySqlDialect = MySqlDialect {};

/// Forwards `MySqlDialect`'s flags (methods of `&self` only).
macro_rules! forward_flags {
    ($($name:ident),* $(,)?) => {
        $(fn $name(&self) -> bool {
            MYSQL.$name()
        })*
    };
}

impl Dialect for SkarvDialect {
    fn dialect(&self) -> TypeId {
        TypeId::of::<MySqlDialect>()
    }

    /// `CHARSET cs` in a column's definition: MySQL's word for
    /// `CHARACTER SET cs` there (the parser takes the two words only).
    fn parse_column_option(
        &self,
        parser: &mut Parser,
    ) -> Result<Option<Result<Option<sqlparser::ast::ColumnOption>, ParserError>>, ParserError>
    {
        if !parser.parse_keyword(Keyword::CHARSET) {
            return Ok(None);
        }
        let name = parser.parse_object_name(false);
        Ok(Some(name.map(|n| {
            Some(sqlparser::ast::ColumnOption::CharacterSet(n))
        })))
    }

    fn parse_prefix(&self, parser: &mut Parser) -> Option<Result<Expr, ParserError>> {
        match parser.peek_token_ref().token {
            Token::Number(..)
            | Token::SingleQuotedString(_)
            | Token::DoubleQuotedString(_)
            | Token::HexStringLiteral(_) => Some(parser.parse_value().map(Expr::Value)),
            // MariaDB's `!`: NOT binding tighter than any operator (`!a = b`
            // is `(NOT a) = b`), where the parser's `!` (when a dialect
            // has it) has NOT's low rank.
            Token::ExclamationMark => {
                parser.next_token();
                Some(
                    parser
                        .parse_subexpr(BANG_NOT_PRECEDENCE)
                        .map(|expr| Expr::UnaryOp {
                            op: sqlparser::ast::UnaryOperator::BangNot,
                            expr: Box::new(expr),
                        }),
                )
            }
            // MariaDB's `BINARY x`: a cast to binary binding as tightly as
            // COLLATE (`BINARY s = 'A'` is `(BINARY s) = 'A'`, `BINARY(s)`
            // the same), where the parser reads a whole expression after
            // it (`BINARY (s = 'A')`) and takes `BINARY(` for a function.
            // Where no operand follows (`SET @@character_set_database =
            // binary`, mysqlimport's), the word is left to the parser: a
            // value there.
            Token::Word(ref w) if w.keyword == Keyword::BINARY && w.quote_style.is_none() => {
                let operand = parser.maybe_parse(|p| {
                    p.next_token();
                    p.parse_subexpr(BINARY_PRECEDENCE)
                });
                match operand {
                    Ok(Some(expr)) => Some(Ok(Expr::Cast {
                        kind: sqlparser::ast::CastKind::Cast,
                        expr: Box::new(expr),
                        data_type: sqlparser::ast::DataType::Binary(None),
                        format: None,
                    })),
                    Ok(None) => None,
                    Err(e) => Some(Err(e)),
                }
            }
            // MySQL forms the parser lacks, each tried and, where the text
            // is no such form, left to the parser.
            Token::Word(ref w) if w.quote_style.is_none() => {
                let form: fn(&mut Parser) -> Result<Expr, ParserError> = match w.keyword {
                    Keyword::CAST => cast_with_charset,
                    Keyword::TRIM => trim_spaces_from,
                    Keyword::EXTRACT => extract_compound,
                    Keyword::INTERVAL => interval_function,
                    Keyword::ROW => row_constructor,
                    Keyword::CHAR => char_using,
                    Keyword::NoKeyword if w.value.eq_ignore_ascii_case("GET_FORMAT") => {
                        get_format_of_kind
                    }
                    Keyword::NoKeyword if w.value.eq_ignore_ascii_case("WEIGHT_STRING") => {
                        weight_string_as
                    }
                    _ => return None,
                };
                match parser.maybe_parse(form) {
                    Ok(Some(expr)) => Some(Ok(expr)),
                    Ok(None) => None,
                    Err(e) => Some(Err(e)),
                }
            }
            _ => None,
        }
    }

    fn supports_string_literal_table_alias(&self, explicit: bool) -> bool {
        MYSQL.supports_string_literal_table_alias(explicit)
    }

    fn is_identifier_start(&self, ch: char) -> bool {
        MYSQL.is_identifier_start(ch)
    }

    fn is_identifier_part(&self, ch: char) -> bool {
        MYSQL.is_identifier_part(ch)
    }

    fn is_delimited_identifier_start(&self, ch: char) -> bool {
        MYSQL.is_delimited_identifier_start(ch)
    }

    fn identifier_quote_style(&self, identifier: &str) -> Option<char> {
        MYSQL.identifier_quote_style(identifier)
    }

    fn ordered_bind_placeholder_style(&self) -> Option<sqlparser::dialect::BindPlaceholderStyle> {
        MYSQL.ordered_bind_placeholder_style()
    }

    fn parse_infix(
        &self,
        parser: &mut Parser,
        expr: &Expr,
        precedence: u8,
    ) -> Option<Result<Expr, ParserError>> {
        MYSQL.parse_infix(parser, expr, precedence)
    }

    fn parse_statement(&self, parser: &mut Parser) -> Option<Result<Statement, ParserError>> {
        if parser.peek_keyword(Keyword::UPDATE) && update_lists_tables(parser) {
            return Some(parse_update_of_tables(parser));
        }
        if parser.peek_keyword(Keyword::SET) {
            match parser.maybe_parse(set_character_set) {
                Ok(Some(statement)) => return Some(Ok(statement)),
                Ok(None) => {}
                Err(e) => return Some(Err(e)),
            }
        }
        if parser.peek_keyword(Keyword::DELETE) {
            if let Some(error) = multi_delete_order_or_limit(parser) {
                return Some(Err(error));
            }
            return Some(parse_delete_returning_last(parser));
        }
        MYSQL.parse_statement(parser)
    }

    /// ON is a reserved word of MariaDB's, never a select item's alias
    /// without AS: `INSERT … SELECT 1, 2 ON DUPLICATE KEY UPDATE …` ends
    /// its select list there (the parser read ON as the alias, then failed
    /// at DUPLICATE).
    fn is_column_alias(&self, kw: &Keyword, parser: &mut Parser) -> bool {
        *kw != Keyword::ON && MYSQL.is_column_alias(kw, parser)
    }

    fn is_table_factor_alias(&self, explicit: bool, kw: &Keyword, parser: &mut Parser) -> bool {
        MYSQL.is_table_factor_alias(explicit, kw, parser)
    }

    /// MySQL's `col->path` and `col->>path` are part of the column
    /// reference, binding before any operator (`d->'$.n' + 1` adds to the
    /// extracted value); the parser's default puts them below `+`.
    fn get_next_precedence(&self, parser: &Parser) -> Option<Result<u8, ParserError>> {
        match parser.peek_token_ref().token {
            Token::Arrow | Token::LongArrow => Some(Ok(self.prec_value(Precedence::DoubleColon))),
            _ => MYSQL.get_next_precedence(parser),
        }
    }

    fn prec_value(&self, prec: Precedence) -> u8 {
        match prec {
            Precedence::Xor => XOR_PRECEDENCE,
            other => MYSQL.prec_value(other),
        }
    }

    forward_flags!(
        supports_string_literal_backslash_escape,
        supports_string_literal_concatenation,
        ignores_wildcard_escapes,
        supports_numeric_prefix,
        supports_literal_prefix_in_qualified_name,
        supports_bitwise_shift_operators,
        supports_singular_value_keyword,
        supports_multiline_comment_hints,
        require_interval_qualifier,
        supports_limit_comma,
        supports_create_table_select,
        supports_insert_set,
        supports_user_host_grantee,
        supports_table_hints,
        requires_single_line_comment_whitespace,
        supports_hash_comment,
        supports_match_against,
        supports_select_modifiers,
        supports_set_names,
        supports_comma_separated_set_assignments,
        supports_alter_column_position,
        supports_update_order_by,
        supports_data_type_signed_suffix,
        supports_data_type_zerofill_suffix,
        supports_cross_join_constraint,
        supports_double_ampersand_operator,
        supports_binary_kw_as_cast,
        supports_table_partitions,
        supports_comment_optimizer_hint,
        supports_constraint_keyword_without_name,
        supports_key_column_option,
        supports_group_by_with_modifier,
        supports_left_associative_joins_without_parens,
    );
}

/// The tokens of the statement ahead, from the next one, up to its end
/// (`;` or the end of the text), each with its depth in parentheses.
fn statement_ahead<'p>(
    parser: &'p Parser<'_>,
) -> impl Iterator<Item = (usize, &'p TokenWithSpan)> + Clone + 'p {
    let mut depth = 0usize;
    (0..)
        .map(|n| parser.peek_nth_token_ref(n))
        .take_while(|t| !matches!(t.token, Token::EOF | Token::SemiColon))
        .map(move |t| {
            match t.token {
                Token::LParen => depth += 1,
                Token::RParen => depth = depth.saturating_sub(1),
                _ => {}
            }
            (depth, t)
        })
}

/// Whether the UPDATE ahead names several tables separated by commas
/// before its SET (`UPDATE a, b SET …`), which the parser does not read
/// (it takes one table with its joins).
fn update_lists_tables(parser: &Parser) -> bool {
    statement_ahead(parser)
        .take_while(|(depth, t)| {
            *depth > 0 || !matches!(&t.token, Token::Word(w) if w.keyword == Keyword::SET)
        })
        .any(|(depth, t)| depth == 0 && t.token == Token::Comma)
}

/// MariaDB's multi-table UPDATE (`UPDATE a, b JOIN c ON … SET … WHERE …
/// [ORDER BY …] [LIMIT n]`), read as the parser's `Update` with the first
/// comma-separated item as its table and the others as its FROM (before
/// SET); `UPDATE OR IGNORE` is what `UPDATE IGNORE` is mended to.
fn parse_update_of_tables(parser: &mut Parser) -> Result<Statement, ParserError> {
    use sqlparser::ast::{SqliteOnConflict, Update, UpdateTableFromKind};
    let update_token = parser.next_token();
    let or = parser
        .parse_keywords(&[Keyword::OR, Keyword::IGNORE])
        .then_some(SqliteOnConflict::Ignore);
    let mut tables = parser.parse_comma_separated(Parser::parse_table_and_joins)?;
    let table = tables.remove(0);
    parser.expect_keyword_is(Keyword::SET)?;
    let assignments = parser.parse_comma_separated(Parser::parse_assignment)?;
    let selection = if parser.parse_keyword(Keyword::WHERE) {
        Some(parser.parse_expr()?)
    } else {
        None
    };
    let order_by = if parser.parse_keywords(&[Keyword::ORDER, Keyword::BY]) {
        parser.parse_comma_separated(Parser::parse_order_by_expr)?
    } else {
        Vec::new()
    };
    let limit = if parser.parse_keyword(Keyword::LIMIT) {
        Some(parser.parse_expr()?)
    } else {
        None
    };
    Ok(Statement::Update(Update {
        update_token: update_token.into(),
        optimizer_hints: Vec::new(),
        table,
        on_cluster: None,
        assignments,
        from: Some(UpdateTableFromKind::BeforeSet(tables)),
        selection,
        returning: None,
        output: None,
        or,
        order_by,
        limit,
        settings: None,
    }))
}

/// The syntax error of a multi-table DELETE with ORDER BY or LIMIT, which
/// MariaDB's grammar gives only the single-table form: at the ORDER or
/// LIMIT, as MariaDB's 1064 quotes the text from there. Multi-table: a
/// list of tables before FROM (`DELETE a, b FROM …`, `DELETE a FROM a
/// JOIN b …`) or a USING.
fn multi_delete_order_or_limit(parser: &Parser) -> Option<ParserError> {
    let word = |t: &TokenWithSpan, k: Keyword| matches!(&t.token, Token::Word(w) if w.keyword == k);
    let mut tokens = statement_ahead(parser)
        .filter(|(depth, _)| *depth == 0)
        .map(|(_, t)| t);
    // DELETE, then a table's name before FROM, or FROM … USING.
    tokens.next()?;
    let mut multi = !tokens
        .clone()
        .next()
        .is_some_and(|t| word(t, Keyword::FROM));
    let mut ahead = tokens.peekable();
    while let Some(t) = ahead.next() {
        multi |= word(t, Keyword::USING);
        let ends = word(t, Keyword::LIMIT)
            || (word(t, Keyword::ORDER) && ahead.peek().is_some_and(|n| word(n, Keyword::BY)));
        if ends {
            return multi.then(|| {
                let at = t.span.start;
                ParserError::ParserError(format!(
                    "Expected: end of statement, found: {} at Line: {}, Column: {}",
                    t.token, at.line, at.column
                ))
            });
        }
    }
    None
}

/// A DELETE with MariaDB's `RETURNING` after its ORDER BY and LIMIT
/// (`DELETE FROM t ORDER BY id LIMIT 1 RETURNING id`): the parser takes
/// the list only before them, as PostgreSQL writes it.
fn parse_delete_returning_last(parser: &mut Parser) -> Result<Statement, ParserError> {
    let delete = parser.next_token();
    let mut statement = parser.parse_delete(delete)?;
    if let Statement::Delete(del) = &mut statement {
        if del.returning.is_none() && parser.parse_keyword(Keyword::RETURNING) {
            del.returning = Some(parser.parse_comma_separated(Parser::parse_select_item)?);
        }
    }
    Ok(statement)
}

/// `CAST(x AS CHAR[(n)] CHARACTER SET cs)` (and `CHARSET cs`): MySQL's
/// cast to text of a character set, which is `CONVERT(x, CHAR[(n)]
/// CHARACTER SET cs)` (the parser takes the character set there only).
fn cast_with_charset(parser: &mut Parser) -> Result<Expr, ParserError> {
    parser.expect_keyword(Keyword::CAST)?;
    parser.expect_token(&Token::LParen)?;
    let expr = parser.parse_expr()?;
    parser.expect_keyword(Keyword::AS)?;
    let data_type = parser.parse_data_type()?;
    if !matches!(
        data_type,
        sqlparser::ast::DataType::Char(_) | sqlparser::ast::DataType::Character(_)
    ) || !(parser.parse_keywords(&[Keyword::CHARACTER, Keyword::SET])
        || parser.parse_keyword(Keyword::CHARSET))
    {
        return parser.expected("CHARACTER SET", parser.peek_token());
    }
    let charset = parser.parse_object_name(false)?;
    parser.expect_token(&Token::RParen)?;
    Ok(Expr::Convert {
        is_try: false,
        expr: Box::new(expr),
        data_type: Some(data_type),
        charset: Some(charset),
        target_before_value: false,
        styles: Vec::new(),
    })
}

/// `TRIM(BOTH | LEADING | TRAILING FROM s)`: the spaces trimmed, which the
/// parser takes only with what to trim (`TRIM(BOTH ' ' FROM s)`, what it
/// becomes).
fn trim_spaces_from(parser: &mut Parser) -> Result<Expr, ParserError> {
    use sqlparser::ast::TrimWhereField as W;
    parser.expect_keyword(Keyword::TRIM)?;
    parser.expect_token(&Token::LParen)?;
    let trim_where = match parser.expect_one_of_keywords(&[
        Keyword::BOTH,
        Keyword::LEADING,
        Keyword::TRAILING,
    ])? {
        Keyword::BOTH => W::Both,
        Keyword::LEADING => W::Leading,
        _ => W::Trailing,
    };
    parser.expect_keyword(Keyword::FROM)?;
    let expr = parser.parse_expr()?;
    parser.expect_token(&Token::RParen)?;
    Ok(Expr::Trim {
        expr: Box::new(expr),
        trim_where: Some(trim_where),
        trim_what: Some(Box::new(Expr::Value(
            sqlparser::ast::Value::SingleQuotedString(" ".to_owned()).into(),
        ))),
        trim_characters: None,
    })
}

/// MySQL's compound units of EXTRACT, which the parser does not know.
pub const EXTRACT_COMPOUND_UNITS: &[&str] = &[
    "YEAR_MONTH",
    "DAY_HOUR",
    "DAY_MINUTE",
    "DAY_SECOND",
    "DAY_MICROSECOND",
    "HOUR_MINUTE",
    "HOUR_SECOND",
    "HOUR_MICROSECOND",
    "MINUTE_SECOND",
    "MINUTE_MICROSECOND",
    "SECOND_MICROSECOND",
];

/// `EXTRACT(YEAR_MONTH FROM d)` and the other compound units: the field
/// kept by name (`expr::Scope` computes it). The statement's words come
/// mended (`session::mend_words`): the unit as the standard's `YEAR TO
/// MONTH` (`MICROSECOND TO SECOND` for SECOND_MICROSECOND).
fn extract_compound(parser: &mut Parser) -> Result<Expr, ParserError> {
    parser.expect_keyword(Keyword::EXTRACT)?;
    parser.expect_token(&Token::LParen)?;
    let lead = parser.parse_identifier()?.value.to_ascii_uppercase();
    let unit = if parser.parse_keyword(Keyword::TO) {
        let last = parser.parse_identifier()?.value.to_ascii_uppercase();
        if lead == "MICROSECOND" && last == "SECOND" {
            "SECOND_MICROSECOND".to_owned()
        } else {
            format!("{lead}_{last}")
        }
    } else {
        lead
    };
    if !EXTRACT_COMPOUND_UNITS.contains(&unit.as_str()) {
        return parser.expected("a compound unit", parser.peek_token());
    }
    parser.expect_keyword(Keyword::FROM)?;
    let expr = parser.parse_expr()?;
    parser.expect_token(&Token::RParen)?;
    Ok(Expr::Extract {
        field: sqlparser::ast::DateTimeField::Custom(sqlparser::ast::Ident::new(unit)),
        syntax: sqlparser::ast::ExtractSyntax::From,
        expr: Box::new(expr),
    })
}

/// `SET CHARACTER SET cs` (`SET CHARSET cs`, `… DEFAULT`): the client's
/// and the results' character set, the connection's the database's
/// (utf8mb4: every database's here), as MySQL sets them.
fn set_character_set(parser: &mut Parser) -> Result<Statement, ParserError> {
    use sqlparser::ast::{Ident, ObjectName, ObjectNamePart, Set, SetAssignment, Value};
    parser.expect_keyword(Keyword::SET)?;
    if !(parser.parse_keywords(&[Keyword::CHARACTER, Keyword::SET])
        || parser.parse_keyword(Keyword::CHARSET))
    {
        return parser.expected("CHARACTER SET", parser.peek_token());
    }
    let charset = if parser.parse_keyword(Keyword::DEFAULT) {
        "utf8mb4".to_owned()
    } else {
        let token = parser.next_token();
        match token.token {
            Token::SingleQuotedString(s) | Token::DoubleQuotedString(s) => s,
            Token::Word(w) => w.value,
            _ => return parser.expected("a character set", token),
        }
    };
    let assign = |name: &str, value: &str| SetAssignment {
        scope: None,
        name: ObjectName(vec![ObjectNamePart::Identifier(Ident::new(name))]),
        value: Expr::Value(Value::SingleQuotedString(value.to_owned()).into()),
    };
    Ok(Statement::Set(Set::MultipleAssignments {
        assignments: vec![
            assign("character_set_client", &charset),
            assign("character_set_results", &charset),
            assign("character_set_connection", "utf8mb4"),
        ],
    }))
}

/// MySQL's `INTERVAL(n, n1, n2, …)`, a function (the parser takes the
/// word for an interval: `INTERVAL (1) DAY` stays one, a unit after the
/// parentheses telling it apart).
fn interval_function(parser: &mut Parser) -> Result<Expr, ParserError> {
    parser.expect_keyword(Keyword::INTERVAL)?;
    parser.expect_token(&Token::LParen)?;
    let args = parser.parse_comma_separated(Parser::parse_expr)?;
    parser.expect_token(&Token::RParen)?;
    if args.len() < 2 {
        return parser.expected("INTERVAL(n, n1, …)", parser.peek_token());
    }
    if let Token::Word(w) = &parser.peek_token_ref().token {
        if w.keyword != Keyword::NoKeyword && w.quote_style.is_none() && is_interval_unit(&w.value)
        {
            return parser.expected("no unit after INTERVAL(…)", parser.peek_token());
        }
    }
    let args = args.iter().collect::<Vec<_>>();
    Ok(crate::engine::expr::ast_call("INTERVAL", args))
}

/// Whether `word` is a unit of an interval (`DAY`, `HOUR`, `YEAR_MONTH`…).
fn is_interval_unit(word: &str) -> bool {
    const UNITS: &[&str] = &[
        "MICROSECOND",
        "SECOND",
        "MINUTE",
        "HOUR",
        "DAY",
        "WEEK",
        "MONTH",
        "QUARTER",
        "YEAR",
    ];
    UNITS.iter().any(|u| u.eq_ignore_ascii_case(word))
        || EXTRACT_COMPOUND_UNITS
            .iter()
            .any(|u| u.eq_ignore_ascii_case(word))
}

/// `CHAR(n, … USING charset)`: the bytes of `CHAR(n, …)` read in that
/// character set, `CONVERT(CHAR(n, …) USING charset)` (the parser takes
/// no USING inside CHAR).
fn char_using(parser: &mut Parser) -> Result<Expr, ParserError> {
    parser.expect_keyword(Keyword::CHAR)?;
    parser.expect_token(&Token::LParen)?;
    let args = parser.parse_comma_separated(Parser::parse_expr)?;
    parser.expect_keyword(Keyword::USING)?;
    let charset = parser.parse_object_name(false)?;
    parser.expect_token(&Token::RParen)?;
    let args = args.iter().collect::<Vec<_>>();
    Ok(Expr::Convert {
        is_try: false,
        expr: Box::new(crate::engine::expr::ast_call("CHAR", args)),
        data_type: None,
        charset: Some(charset),
        target_before_value: false,
        styles: Vec::new(),
    })
}

/// `GET_FORMAT(DATE | TIME | DATETIME | TIMESTAMP, standard)`: the kind
/// a keyword, which the call takes as its name in a string.
fn get_format_of_kind(parser: &mut Parser) -> Result<Expr, ParserError> {
    parser.next_token();
    parser.expect_token(&Token::LParen)?;
    let kind = parser.expect_one_of_keywords(&[
        Keyword::DATE,
        Keyword::TIME,
        Keyword::DATETIME,
        Keyword::TIMESTAMP,
    ])?;
    parser.expect_token(&Token::Comma)?;
    let standard = parser.parse_expr()?;
    parser.expect_token(&Token::RParen)?;
    Ok(crate::engine::expr::ast_call(
        "GET_FORMAT",
        vec![&keyword_text(kind), &standard],
    ))
}

/// `WEIGHT_STRING(s AS CHAR(n))` or `AS BINARY(n)`: the call with the
/// kind's word and n as arguments (the parser takes no AS in a call).
fn weight_string_as(parser: &mut Parser) -> Result<Expr, ParserError> {
    parser.next_token();
    parser.expect_token(&Token::LParen)?;
    let s = parser.parse_expr()?;
    parser.expect_keyword(Keyword::AS)?;
    let kind = parser.expect_one_of_keywords(&[Keyword::CHAR, Keyword::BINARY])?;
    parser.expect_token(&Token::LParen)?;
    let n = parser.parse_expr()?;
    parser.expect_token(&Token::RParen)?;
    parser.expect_token(&Token::RParen)?;
    Ok(crate::engine::expr::ast_call(
        "WEIGHT_STRING",
        vec![&s, &keyword_text(kind), &n],
    ))
}

/// A keyword a call takes as a word (`GET_FORMAT(DATE, …)`), as the
/// string of its name the function reads.
fn keyword_text(kind: Keyword) -> Expr {
    Expr::Value(sqlparser::ast::Value::SingleQuotedString(format!("{kind:?}")).into())
}

/// `ROW(a, b)`: the row `(a, b)`.
fn row_constructor(parser: &mut Parser) -> Result<Expr, ParserError> {
    parser.expect_keyword(Keyword::ROW)?;
    parser.expect_token(&Token::LParen)?;
    let items = parser.parse_comma_separated(Parser::parse_expr)?;
    parser.expect_token(&Token::RParen)?;
    if items.len() < 2 {
        return parser.expected("a row of two values or more", parser.peek_token());
    }
    Ok(Expr::Tuple(items))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bang_is_not_of_the_highest_rank() {
        use sqlparser::ast::{BinaryOperator as B, UnaryOperator as U};
        let parsed = Parser::parse_sql(&SkarvDialect, "SELECT !a = b * !c").expect("parses");
        let Statement::Query(q) = &parsed[0] else {
            panic!("not a query");
        };
        let sqlparser::ast::SetExpr::Select(s) = q.body.as_ref() else {
            panic!("not a SELECT");
        };
        let sqlparser::ast::SelectItem::UnnamedExpr(e) = &s.projection[0] else {
            panic!("not an expression");
        };
        // (!a) = (b * (!c))
        let Expr::BinaryOp {
            left,
            op: B::Eq,
            right,
        } = e
        else {
            panic!("{e:?}");
        };
        assert!(
            matches!(&**left, Expr::UnaryOp { op: U::BangNot, expr } if matches!(&**expr, Expr::Identifier(_)))
        );
        let Expr::BinaryOp {
            right: c,
            op: B::Multiply,
            ..
        } = &**right
        else {
            panic!("{right:?}");
        };
        assert!(matches!(&**c, Expr::UnaryOp { op: U::BangNot, .. }));
    }

    #[test]
    fn binary_casts_its_next_operand_only() {
        let shown = |sql: &str| -> String {
            Parser::parse_sql(&SkarvDialect, sql).expect("parses")[0].to_string()
        };
        assert_eq!(
            shown("SELECT BINARY s = 'A'"),
            "SELECT CAST(s AS BINARY) = 'A'"
        );
        assert_eq!(
            shown("SELECT BINARY(s) LIKE 'a%'"),
            "SELECT CAST((s) AS BINARY) LIKE 'a%'"
        );
        // No operand: a value, as the parser reads it (mysqlimport sends
        // this one).
        assert_eq!(
            shown("SET @@character_set_database=binary"),
            "SET @@character_set_database = binary"
        );
    }

    #[test]
    fn on_is_no_select_item_alias() {
        let parsed = Parser::parse_sql(
            &SkarvDialect,
            "INSERT INTO t SELECT 1, 2 ON DUPLICATE KEY UPDATE a = 1",
        )
        .expect("parses");
        let Statement::Insert(ins) = &parsed[0] else {
            panic!("not an INSERT");
        };
        assert!(ins.on.is_some());
        assert!(Parser::parse_sql(&SkarvDialect, "SELECT 1 ON").is_err());
        assert!(Parser::parse_sql(&SkarvDialect, "SELECT 1 AS `on`, 2 other").is_ok());
    }

    #[test]
    fn an_update_lists_tables_and_a_multi_table_delete_is_not_sorted() {
        use sqlparser::ast::{SqliteOnConflict, UpdateTableFromKind};
        let update = |sql: &str| match Parser::parse_sql(&SkarvDialect, sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .remove(0)
        {
            Statement::Update(up) => up,
            other => panic!("{sql}: {other}"),
        };
        let up = update("UPDATE a, b JOIN c ON c.id = b.id SET a.x = 1 WHERE a.id = b.id LIMIT 2");
        assert_eq!(up.table.to_string(), "a");
        let Some(UpdateTableFromKind::BeforeSet(more)) = &up.from else {
            panic!("no FROM: {:?}", up.from);
        };
        assert_eq!(more.len(), 1);
        assert_eq!(more[0].joins.len(), 1);
        assert!(up.selection.is_some() && up.limit.is_some());
        assert_eq!(
            update("UPDATE OR IGNORE a, b SET a.x = 1").or,
            Some(SqliteOnConflict::Ignore)
        );
        // A comma inside parentheses lists nothing.
        let up = update("UPDATE a SET x = (SELECT 1 FROM b, c), y = 2");
        assert!(up.from.is_none() && up.assignments.len() == 2);
        // MariaDB gives ORDER BY and LIMIT to the single-table DELETE only.
        for (sql, refused) in [
            (
                "DELETE a FROM a JOIN b ON a.id = b.id ORDER BY a.id",
                Some("ORDER"),
            ),
            ("DELETE a, b FROM a, b LIMIT 1", Some("LIMIT")),
            (
                "DELETE FROM a, b USING a JOIN b ORDER BY a.id",
                Some("ORDER"),
            ),
            ("DELETE FROM a ORDER BY id LIMIT 1", None),
            (
                "DELETE FROM a WHERE id IN (SELECT id FROM b ORDER BY id LIMIT 1)",
                None,
            ),
        ] {
            let parsed = Parser::parse_sql(&SkarvDialect, sql);
            match refused {
                Some(word) => {
                    let error = parsed.expect_err(sql).to_string();
                    assert!(
                        error.contains(&format!("found: {word} at Line: 1")),
                        "{sql}: {error}"
                    );
                }
                None => assert!(parsed.is_ok(), "{sql}: {parsed:?}"),
            }
        }
    }

    #[test]
    fn literals_are_values_at_once() {
        for (sql, want) in [
            ("SELECT 5", "SELECT 5"),
            ("SELECT 'a' 'b'", "SELECT 'ab'"),
            ("SELECT X'4a'", "SELECT X'4a'"),
            ("SELECT DATE '2026-12-01'", "SELECT DATE '2026-12-01'"),
            (
                "INSERT INTO t VALUES (1, 'x', 2.5e3)",
                "INSERT INTO t VALUES (1, 'x', 2.5e3)",
            ),
        ] {
            let parsed = Parser::parse_sql(&SkarvDialect, sql).expect("parses");
            assert_eq!(parsed[0].to_string(), want);
        }
    }
}
