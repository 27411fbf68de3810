//! Expression tests: MySQL expressions and what MariaDB 10.11 gives for
//! them (recorded with `mysql -N -B -e "SET time_zone='+00:00'; SELECT …"`
//! against a private `mariadbd`).

use sqlparser::ast::{SelectItem, SetExpr, Statement};

use super::eval::{Ctx, Env};
use super::{Scope, Val};
use crate::error::{SqlError, SqlResult};
use crate::value::{flags, ColumnMeta, ColumnType};

/// The one item of a parsed `SELECT item`.
fn select_item(statements: &[Statement]) -> &sqlparser::ast::Expr {
    let Statement::Query(q) = &statements[0] else {
        panic!("a query")
    };
    let SetExpr::Select(s) = &*q.body else {
        panic!("a select")
    };
    let SelectItem::UnnamedExpr(e) = &s.projection[0] else {
        panic!("an expression")
    };
    e
}

/// `f` of a scope of no columns, whose variables are their names.
fn with_scope<R>(f: impl FnOnce(&mut Scope<'_>) -> R) -> R {
    let var = |name: &str, _: bool| -> SqlResult<Val> { Ok(Val::str(name.to_owned())) };
    let user = |_: &str| Val::Null;
    let mut scope = Scope::new(Vec::new(), &[], &var, &user);
    f(&mut scope)
}

/// `SELECT item` lowered and named from `sql` (empty: from the tree).
fn lowered_item(statements: &[Statement], sql: &str) -> SqlResult<(super::Expr, ColumnMeta)> {
    let e = select_item(statements);
    with_scope(|scope| {
        let lowered = scope.lower(e)?;
        let meta = scope.meta(&lowered, &super::item_name(e, sql));
        Ok((lowered, meta))
    })
}

fn lower_select(sql: &str) -> SqlResult<(super::Expr, ColumnMeta)> {
    lowered_item(&crate::engine::parse(&format!("SELECT {sql}"))?, "")
}

fn eval(sql: &str) -> SqlResult<(String, Vec<(u16, String)>)> {
    let (e, meta) = lower_select(sql)?;
    let env = Env {
        now_micros: 1_700_000_000_000_000,
        ..Env::default()
    };
    let mut ctx = Ctx::new(&[], &env);
    let v = e.eval(&[], &mut ctx)?;
    let text = match v {
        Val::Null => "NULL".to_owned(),
        // As it is sent: a decimal at its column's scale (a quotient holds
        // more digits).
        Val::Dec(d) if meta.ty == crate::value::ColumnType::NewDecimal => {
            d.rescale(meta.decimals).unwrap_or(d).to_text()
        }
        v => v.to_text(),
    };
    Ok((text, ctx.warnings))
}

/// (expression, MariaDB's answer).
const MARIADB: &[(&str, &str)] = &[
    ("1", "1"),
    ("1.5", "1.5"),
    ("'a'", "a"),
    ("7 DIV 2", "3"),
    ("7 / 2", "3.5000"),
    ("1 + 1.25", "2.25"),
    ("1 + 1e0", "2"),
    ("'3' + 4", "7"),
    ("'3x' + 4", "7"),
    ("10 % 3", "1"),
    ("-7 % 3", "-1"),
    ("5 / 0", "NULL"),
    ("1 = 1", "1"),
    ("'a' = 'A'", "1"),
    ("'a ' = 'a'", "1"),
    ("NULL = NULL", "NULL"),
    ("NULL <=> NULL", "1"),
    ("1 IN (1, 2)", "1"),
    ("3 IN (1, NULL)", "NULL"),
    ("2 BETWEEN 1 AND 3", "1"),
    ("'abc' LIKE 'a%'", "1"),
    ("'abc' LIKE 'A_C'", "1"),
    ("'a%c' LIKE 'a\\%c'", "1"),
    ("NULL IS NULL", "1"),
    ("0 IS FALSE", "1"),
    ("CASE WHEN 1 > 2 THEN 'x' ELSE 'y' END", "y"),
    ("CASE 2 WHEN 1 THEN 'one' WHEN 2 THEN 'two' END", "two"),
    ("IF(1, 'yes', 'no')", "yes"),
    ("IFNULL(NULL, 3)", "3"),
    ("NULLIF(1, 1)", "NULL"),
    ("COALESCE(NULL, NULL, 'c')", "c"),
    ("CAST('12abc' AS SIGNED)", "12"),
    ("CAST(-1 AS UNSIGNED)", "18446744073709551615"),
    ("CAST(3.14159 AS DECIMAL(5,2))", "3.14"),
    ("CAST('2024-01-02' AS DATE)", "2024-01-02"),
    (
        "CAST('2024-01-02 03:04:05' AS DATETIME)",
        "2024-01-02 03:04:05",
    ),
    ("CAST(1.5 AS CHAR)", "1.5"),
    ("CONCAT('a', 1, 2.5)", "a12.5"),
    ("CONCAT('a', NULL)", "NULL"),
    ("CONCAT_WS('-', 'a', NULL, 'b')", "a-b"),
    ("LENGTH('héllo')", "6"),
    ("CHAR_LENGTH('héllo')", "5"),
    ("UPPER('abc')", "ABC"),
    ("SUBSTRING('abcdef', 2, 3)", "bcd"),
    ("SUBSTRING('abcdef', -2)", "ef"),
    ("TRIM('  x  ')", "x"),
    ("TRIM(LEADING 'x' FROM 'xxaxx')", "axx"),
    ("REPLACE('aaa', 'a', 'bb')", "bbbbbb"),
    ("LEFT('abcdef', 2)", "ab"),
    ("RIGHT('abcdef', 2)", "ef"),
    ("LPAD('7', 3, '0')", "007"),
    ("RPAD('ab', 5, 'xy')", "abxyx"),
    ("ABS(-3)", "3"),
    ("CEIL(1.2)", "2"),
    ("FLOOR(-1.2)", "-2"),
    // A DECIMAL past BIGINT: a DECIMAL, no error.
    ("FLOOR(12345678901234567890.5)", "12345678901234567890"),
    ("CEIL(-12345678901234567890.5)", "-12345678901234567890"),
    ("CEILING(9223372036854775807.5)", "9223372036854775808"),
    ("FLOOR(-9223372036854775808.5)", "-9223372036854775809"),
    ("ROUND(2.5)", "3"),
    ("ROUND(-2.5)", "-3"),
    ("ROUND(1.2345, 2)", "1.23"),
    ("ROUND(1234, -2)", "1200"),
    ("TRUNCATE(1.999, 1)", "1.9"),
    ("MOD(10, 4)", "2"),
    ("GREATEST(1, 5, 3)", "5"),
    ("LEAST('b', 'a', 'c')", "a"),
    (
        "DATE_FORMAT('2024-03-05 14:07:09', '%Y/%m/%d %H:%i:%s %W %M %p')",
        "2024/03/05 14:07:09 Tuesday March PM",
    ),
    ("DATE('2024-03-05 14:07:09')", "2024-03-05"),
    ("YEAR('2024-03-05')", "2024"),
    ("MONTH('2024-03-05')", "3"),
    ("DAY('2024-03-05')", "5"),
    ("DATE_ADD('2024-01-31', INTERVAL 1 MONTH)", "2024-02-29"),
    ("DATE_SUB('2024-03-01', INTERVAL 1 DAY)", "2024-02-29"),
    (
        "DATE_ADD('2024-01-01 10:00:00', INTERVAL 90 MINUTE)",
        "2024-01-01 11:30:00",
    ),
    ("UNIX_TIMESTAMP('1970-01-02 00:00:00')", "86400"),
    ("1 XOR 1", "0"),
    ("NOT 0", "1"),
    ("2 * 3.5", "7.0"),
    ("1.0 / 3", "0.33333"),
    ("_binary'ab\\0c' = 'ab\\0c'", "1"),
    ("HEX(_binary'ab\\0c')", "61620063"),
    ("_utf8mb4'x'", "x"),
    ("HEX(_binary X'FF00')", "FF00"),
    ("_latin1'abc'", "abc"),
    ("_binary'AB' = 'ab'", "0"),
    ("HEX(CAST(X'FF00' AS BINARY))", "FF00"),
    ("RAND(1)", "0.40540353712197724"),
    ("RAND(NULL)", "0.15522042769493574"),
    ("WEEK('2020-01-05', 4)", "2"),
    ("YEARWEEK('2026-01-01', 6)", "202553"),
    ("WEEKOFYEAR('2021-01-03')", "53"),
    ("SOUNDEX('Tymczak')", "T520"),
    ("INSERT('Quadratic', 3, 4, 'What')", "QuWhattic"),
    ("FROM_DAYS(730669)", "2000-07-03"),
    ("TO_SECONDS('2009-11-29 13:43:32')", "63426721412"),
    ("PERIOD_ADD(0801, 13)", "200902"),
    ("INET6_NTOA(INET6_ATON('1:0:0:2:0:0:0:3'))", "1:0:0:2::3"),
    ("EXPORT_SET(6, '1', '0', ',', 4)", "0,1,1,0"),
    ("MAKE_SET(5, 'a', NULL, 'c')", "a,c"),
    ("TIME_FORMAT('100:00:00', '%h %p')", "04 AM"),
    (
        "ADDTIME('01:00:00.999999', '02:00:00.999998')",
        "03:00:01.999997",
    ),
    // Decimals of up to 65 digits (more while computing), as MariaDB's:
    // an i128 held 38.
    (
        "12345678901234567890.5 * 12345678901234567890",
        "152415787532388367508078039325636336045.0",
    ),
    (
        "99999999999999999999999999999999999999 + 1",
        "100000000000000000000000000000000000000",
    ),
    (
        "99999999999999999999999999999999999999999999999999999999999999999 + 1",
        "100000000000000000000000000000000000000000000000000000000000000000",
    ),
    (
        "123456789012345678901234567890123456789012345 / 7",
        "17636684144620811271604938270017636684144620.7143",
    ),
    (
        "CAST('123456789012345678901234567890123456789012345.678' AS DECIMAL(65,3))",
        "123456789012345678901234567890123456789012345.678",
    ),
    (
        "ROUND(123456789012345678901234567890123456789012345.678, -40)",
        "123460000000000000000000000000000000000000000",
    ),
    (
        "CAST(123456789012345678901234567890123456789012345.5 AS SIGNED)",
        "9223372036854775807",
    ),
    (
        "CAST(-123456789012345678901234567890123456789012345.5 AS UNSIGNED)",
        "0",
    ),
    // A quotient holds MariaDB's digits (words of nine) past its scale.
    ("ROUND(1/3, 6)", "0.333333"),
    ("ROUND(2/3, 12)", "0.666666666000"),
    ("(1/3)*3", "1.0000"),
    ("CONCAT(1/3)", "0.3333"),
    ("CAST(1/3 AS CHAR)", "0.3333"),
    ("ROUND(1.123456789012/3, 20)", "0.37448559633733333300"),
    ("ROUND(1.25/3, 12)", "0.416666666000"),
];

#[test]
fn expressions_give_what_mariadb_gives() {
    let mut wrong = Vec::new();
    for (sql, want) in MARIADB {
        match eval(sql) {
            Ok((got, _)) if got == *want => {}
            Ok((got, _)) => wrong.push(format!("{sql}: got {got}, MariaDB {want}")),
            Err(e) => wrong.push(format!("{sql}: error {e}, MariaDB {want}")),
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn warnings_and_errors_as_mariadb() {
    // Division by zero: NULL and warning 1365.
    let (v, w) = eval("5 / 0").expect("evaluates");
    assert_eq!(v, "NULL");
    assert_eq!(w, vec![(1365, "Division by 0".to_owned())]);
    // A string that is not wholly a number: 1292.
    let (_, w) = eval("'3x' + 4").expect("evaluates");
    assert_eq!(w[0].0, 1292);
    assert_eq!(w[0].1, "Truncated incorrect DOUBLE value: '3x'");
    // BIGINT overflow: 1690, as MariaDB words it.
    let e: SqlError = eval("9223372036854775807 + 1").expect_err("overflows");
    assert_eq!(e.code, 1690);
    assert_eq!(
        e.message,
        "BIGINT value is out of range in '9223372036854775807 + 1'"
    );
    assert_eq!(eval("FOO(1)").expect_err("unknown").code, 1305);
    assert_eq!(eval("COUNT(*)").expect_err("no group").code, 1111);
}

#[test]
fn result_metadata_as_mysql() {
    let (_, m) = lower_select("1").expect("lowers");
    assert_eq!(m.ty, ColumnType::Long);
    assert_eq!(m.length, 1);
    assert_eq!(m.charset, 63);
    assert_eq!(m.flags, flags::NOT_NULL | flags::BINARY | flags::NUM);
    let (_, m) = lower_select("1.5").expect("lowers");
    assert_eq!((m.ty, m.length, m.decimals), (ColumnType::NewDecimal, 4, 1));
    assert_eq!(m.flags, flags::NOT_NULL | flags::BINARY | flags::NUM);
    // FLOOR/CEIL of a DECIMAL: an INT, a BIGINT or (its whole part past
    // 17 digits) a DECIMAL, of the argument's length less its decimals.
    for (sql, ty, length) in [
        ("FLOOR(1.5)", ColumnType::Long, 3),
        ("CEIL(12345678901234567.5)", ColumnType::LongLong, 19),
        ("FLOOR(123456789012345678.5)", ColumnType::NewDecimal, 20),
        ("CEIL(-12345678901234567890.5)", ColumnType::NewDecimal, 22),
    ] {
        let (_, m) = lower_select(sql).expect("lowers");
        assert_eq!((m.ty, m.length, m.decimals), (ty, length, 0), "{sql}");
    }
    let (_, m) = lower_select("'a'").expect("lowers");
    assert_eq!((m.ty, m.charset, m.length), (ColumnType::VarString, 45, 4));
    assert_eq!(m.flags, flags::NOT_NULL);
    let (_, m) = lower_select("_binary'ab'").expect("lowers");
    assert_eq!((m.ty, m.charset), (ColumnType::VarString, 63));
    assert_eq!(m.flags & flags::BINARY, flags::BINARY);
    let (_, m) = lower_select("NOW()").expect("lowers");
    assert_eq!((m.ty, m.length), (ColumnType::DateTime, 19));
    let (_, m) = lower_select("NULL").expect("lowers");
    assert_eq!(m.ty, ColumnType::Null);
    let (_, m) = lower_select("1e0").expect("lowers");
    assert_eq!((m.ty, m.decimals), (ColumnType::Double, 31));
    // DATE_ADD of text: a STRING of 19 characters (4 bytes each here) and
    // its decimals, as MariaDB's (STRING 57 / 63 / 78 under utf8mb3).
    for (sql, length, decimals) in [
        ("DATE_ADD('2020-01-01', INTERVAL 1 DAY)", 76, 0),
        ("DATE_SUB(20200101, INTERVAL 1 DAY)", 76, 0),
        (
            "DATE_ADD('2020-01-01 10:00:00.5', INTERVAL 1 SECOND)",
            84,
            1,
        ),
        ("ADDDATE('2020-01-01', INTERVAL 1 MICROSECOND)", 104, 6),
    ] {
        let (_, m) = lower_select(sql).expect("lowers");
        assert_eq!(
            (m.ty, m.length, m.decimals),
            (ColumnType::String, length, decimals),
            "{sql}"
        );
    }
    let (_, m) = lower_select("DATE_ADD(NOW(), INTERVAL 1 DAY)").expect("lowers");
    assert_eq!(m.ty, ColumnType::DateTime);
    // An integer function's or a condition's type and length are
    // MariaDB's (recorded with --column-type-info against MariaDB 10.11).
    for (sql, ty, length) in [
        ("MONTH(NOW())", ColumnType::Long, 2),
        ("YEAR(NOW())", ColumnType::Long, 4),
        ("ASCII('a')", ColumnType::Long, 3),
        ("LENGTH('abc')", ColumnType::Long, 10),
        ("BIT_LENGTH('abc')", ColumnType::LongLong, 11),
        ("TIME_TO_SEC('01:00:00')", ColumnType::LongLong, 17),
        ("LOCATE('b', 'abc')", ColumnType::Long, 11),
        ("1 = 1", ColumnType::Long, 1),
        ("'a' LIKE 'b'", ColumnType::Long, 1),
        ("1 IN (1, 2) AND 2 BETWEEN 1 AND 3", ColumnType::Long, 1),
    ] {
        let (_, m) = lower_select(sql).expect("lowers");
        assert_eq!((m.ty, m.length), (ty, length), "{sql}");
    }
}

#[test]
fn regexp_like_as_mysql_8() {
    // MySQL 8's function (MariaDB 10.11 has only the operator): match
    // type `c` is case-sensitive, `i` not, the last one wins.
    for (sql, want) in [
        ("REGEXP_LIKE('ABC', 'b')", "1"),
        ("REGEXP_LIKE('ABC', 'b', 'c')", "0"),
        ("REGEXP_LIKE('ABC', 'b', 'ci')", "1"),
        ("REGEXP_LIKE('ABC', 'b', 'ic')", "0"),
        ("REGEXP_LIKE(NULL, 'b')", "NULL"),
    ] {
        assert_eq!(eval(sql).expect(sql).0, want, "{sql}");
    }
    // A pattern that does not compile: 1139 (42000), as MariaDB's.
    let e = eval("'a' REGEXP '('").expect_err("bad pattern");
    assert_eq!((e.code, e.state), (1139, "42000"), "{e}");
    assert!(e.message.starts_with("Regex error '"), "{e}");
    let long = format!("'a' REGEXP '{}'", "a".repeat(5_000));
    assert_eq!(eval(&long).expect_err("too long").code, 1139);
}

#[test]
fn uuid_functions_as_mysql_8() {
    // MySQL 8's UUID_TO_BIN, BIN_TO_UUID and IS_UUID (MariaDB has none):
    // the answers of MySQL's manual.
    let u = "'6ccd780c-baba-1026-9564-5b8c656024db'";
    for (sql, want) in [
        (
            format!("HEX(UUID_TO_BIN({u}))"),
            "6CCD780CBABA102695645B8C656024DB",
        ),
        (
            format!("HEX(UUID_TO_BIN({u}, 0))"),
            "6CCD780CBABA102695645B8C656024DB",
        ),
        (
            format!("HEX(UUID_TO_BIN({u}, 1))"),
            "1026BABA6CCD780C95645B8C656024DB",
        ),
        (
            format!("BIN_TO_UUID(UUID_TO_BIN({u}))"),
            "6ccd780c-baba-1026-9564-5b8c656024db",
        ),
        (
            format!("BIN_TO_UUID(UUID_TO_BIN({u}, 1), 1)"),
            "6ccd780c-baba-1026-9564-5b8c656024db",
        ),
        // Read back without the swap, the swapped bytes show their order.
        (
            format!("BIN_TO_UUID(UUID_TO_BIN({u}, 1))"),
            "1026baba-6ccd-780c-9564-5b8c656024db",
        ),
        (
            "HEX(UUID_TO_BIN('{6CCD780C-BABA-1026-9564-5B8C656024DB}'))".to_owned(),
            "6CCD780CBABA102695645B8C656024DB",
        ),
        (
            "HEX(UUID_TO_BIN('6ccd780cbaba102695645b8c656024db'))".to_owned(),
            "6CCD780CBABA102695645B8C656024DB",
        ),
        ("LENGTH(UUID_TO_BIN(UUID()))".to_owned(), "16"),
        (
            "IS_UUID(BIN_TO_UUID(UUID_TO_BIN(UUID(), 1), 1))".to_owned(),
            "1",
        ),
        (format!("IS_UUID({u})"), "1"),
        (
            "IS_UUID('6CCD780C-BABA-1026-9564-5B8C656024DB')".to_owned(),
            "1",
        ),
        (
            "IS_UUID('6ccd780cbaba102695645b8c656024db')".to_owned(),
            "1",
        ),
        (
            "IS_UUID('{6ccd780c-baba-1026-9564-5b8c656024db}')".to_owned(),
            "1",
        ),
        (
            "IS_UUID('6ccd780c-baba-1026-9564-5b8c6560')".to_owned(),
            "0",
        ),
        (
            "IS_UUID('6ccd780c-baba-1026-9564-5b8c656024dg')".to_owned(),
            "0",
        ),
        (
            "IS_UUID('6ccd780cb-aba-1026-9564-5b8c656024db')".to_owned(),
            "0",
        ),
        (
            "IS_UUID('{6ccd780c-baba-1026-9564-5b8c656024db')".to_owned(),
            "0",
        ),
        ("IS_UUID(12)".to_owned(), "0"),
        ("IS_UUID(NULL)".to_owned(), "NULL"),
        ("UUID_TO_BIN(NULL)".to_owned(), "NULL"),
        ("BIN_TO_UUID(NULL)".to_owned(), "NULL"),
    ] {
        assert_eq!(eval(&sql).expect(&sql).0, want, "{sql}");
    }
    // Not a UUID, or not 16 bytes: MySQL's 1411 naming the value.
    for (sql, function) in [
        ("UUID_TO_BIN('nope')", "uuid_to_bin"),
        ("BIN_TO_UUID('short')", "bin_to_uuid"),
    ] {
        let e = eval(sql).expect_err(sql);
        assert_eq!(e.code, 1411, "{sql}: {e:?}");
        assert!(e.message.contains(function), "{sql}: {e:?}");
    }
    assert_eq!(eval("UUID_TO_BIN()").expect_err("no argument").code, 1582);
}

#[test]
fn any_value_is_its_argument() {
    // MySQL 8's ANY_VALUE(x): x itself (Skarv does not enforce
    // ONLY_FULL_GROUP_BY, which it exists to get round).
    assert_eq!(eval("ANY_VALUE(1 + 2)").unwrap().0, "3");
    assert_eq!(eval("ANY_VALUE('a') = 'a'").unwrap().0, "1");
    assert_eq!(eval("ANY_VALUE(NULL)").unwrap().0, "NULL");
    assert_eq!(eval("ANY_VALUE(1, 2)").expect_err("two").code, 1582);
}

#[test]
fn json_arrows_as_mysql_8() {
    // MySQL 8's `->` is JSON_EXTRACT and `->>` JSON_UNQUOTE of it (MariaDB
    // has neither; the functions' answers are recorded against it).
    let doc = r#"'{"a": "x", "n": 2, "b": [1, "two", {"c": null}]}'"#;
    for path in ["$.a", "$.n", "$.b", "$.b[1]", "$.b[2].c", "$.nope", "$"] {
        let arrow = eval(&format!("{doc}->'{path}'")).expect(path);
        let extract = eval(&format!("JSON_EXTRACT({doc}, '{path}')")).expect(path);
        assert_eq!(arrow, extract, "->'{path}'");
        let long = eval(&format!("{doc}->>'{path}'")).expect(path);
        let unquote = eval(&format!("JSON_UNQUOTE(JSON_EXTRACT({doc}, '{path}'))")).expect(path);
        assert_eq!(long, unquote, "->>'{path}'");
    }
    assert_eq!(eval(&format!("{doc}->'$.a'")).unwrap().0, r#""x""#);
    assert_eq!(eval(&format!("{doc}->>'$.a'")).unwrap().0, "x");
    // Part of the column reference: it binds before every operator.
    for (sql, want) in [
        (format!("{doc}->'$.n' + 1"), "3"),
        (format!("{doc}->>'$.n' * 3"), "6"),
        (format!("{doc}->>'$.a' = 'x'"), "1"),
        (format!("{doc}->'$.n' BETWEEN 1 AND 2"), "1"),
        (format!("{doc}->>'$.b[1]' LIKE 't%'"), "1"),
    ] {
        assert_eq!(eval(&sql).expect(&sql).0, want, "{sql}");
    }
    // A bad path is JSON_EXTRACT's warning and NULL.
    let (v, warnings) = eval(&format!("{doc}->'a'")).unwrap();
    assert_eq!(v, "NULL");
    assert_eq!(warnings.first().map(|w| w.0), Some(4042), "{warnings:?}");
    // Named by its text, as MySQL names it.
    let sql = format!("SELECT {doc}->>'$.a'");
    let (_, meta) = lowered_item(&crate::engine::parse(&sql).unwrap(), &sql).unwrap();
    assert_eq!(&*meta.name, format!("{doc}->>'$.a'"));
}

#[test]
fn like_matches_as_mysql() {
    use super::eval::like;
    assert!(like("abc", "a%", '\\', false));
    assert!(like("abc", "%c", '\\', false));
    assert!(like("abc", "a_c", '\\', false));
    assert!(!like("abc", "a_", '\\', false));
    assert!(like("a%c", "a\\%c", '\\', false));
    assert!(!like("abc", "a\\%c", '\\', false));
    assert!(like("ABC", "a%", '\\', true));
    assert!(!like("ABC", "a%", '\\', false));
    assert!(like("", "%", '\\', false));
    assert!(like("aXbXc", "a%b%c", '\\', false));
}

#[test]
fn unaliased_items_are_named_by_their_text() {
    let name = |item: &str| {
        let sql = format!("SELECT {item} FROM t");
        let statements = crate::engine::parse(&sql).expect("parses");
        let Statement::Query(q) = &statements[0] else {
            panic!("a query")
        };
        let SetExpr::Select(s) = &*q.body else {
            panic!("a select")
        };
        let SelectItem::UnnamedExpr(e) = &s.projection[0] else {
            panic!("an expression")
        };
        super::item_name(e, &sql)
    };
    for item in [
        "COUNT( * )",
        "k+1",
        "SUM(k)",
        "CONCAT('a(', b)",
        "NOW()",
        "IFNULL(a, (1 + 2))",
        "a",
        "t.a",
        "CAST(k AS DOUBLE(5,1))",
        "cast( (k) as double(5, 1) )",
        "1 + CAST(k AS DOUBLE(5,1))",
    ] {
        let want = if item == "t.a" { "a" } else { item };
        assert_eq!(name(item), want);
    }
    assert_eq!(name("'x'"), "x");
}

#[test]
fn cast_to_fixed_decimals_as_mariadb() {
    // MariaDB's `truncate_double`: the fraction rounded half to even,
    // clipped to M - D integer digits with a note 1264.
    for (sql, want) in [
        ("CAST(1.25 AS DOUBLE(5,1))", "1.2"),
        ("CAST(2.35 AS DOUBLE(5,1))", "2.4"),
        ("CAST(-2.25 AS DOUBLE(5,1))", "-2.2"),
        ("CAST(1.255 AS DOUBLE(5,2))", "1.25"),
        ("CAST(-0.04 AS DOUBLE(1,1))", "0"),
        ("CAST(3.5 AS DOUBLE(0,0))", "3"),
        ("CAST(2.5 AS DOUBLE(0,0))", "2"),
        ("CAST(1.25 AS DOUBLE(40,31))", "1.25"),
        ("CAST(NULL AS DOUBLE(5,1))", "NULL"),
    ] {
        let (got, warnings) = eval(sql).expect(sql);
        assert_eq!((got.as_str(), warnings.len()), (want, 0), "{sql}");
    }
    let note = super::eval::NOTE_BIT | 1264;
    let (got, warnings) = eval("CAST(123456 AS DOUBLE(5,1))").expect("clips");
    assert_eq!(got, "9999.9");
    let inner = "Out of range value for column '(null)' at row 1".to_owned();
    assert_eq!(warnings, vec![(note, inner)]);
    let (got, _) = eval("CAST(-1e300 AS DOUBLE(6,2))").expect("clips");
    assert_eq!(got, "-9999.99");
    // A select item names its note; its metadata has length M, D decimals.
    let (mut e, m) = lower_select("CAST(1e9 AS DOUBLE(7,2))").expect("lowers");
    assert_eq!((m.ty, m.length, m.decimals), (ColumnType::Double, 7, 2));
    super::name_cast(&mut e, "x");
    let env = Env::default();
    let mut ctx = Ctx::new(&[], &env);
    assert_eq!(
        e.eval(&[], &mut ctx).expect("evaluates").to_text(),
        "99999.99"
    );
    let named = "Out of range value for column 'x' at row 1".to_owned();
    assert_eq!(ctx.warnings, vec![(note, named)]);
    let (_, m) = lower_select("CAST(1 AS DOUBLE(40,31))").expect("lowers");
    assert_eq!((m.length, m.decimals), (40, 31));
    // M past 65, D past 38, D past M; FLOAT(M,D) is no CAST type.
    for (sql, code) in [
        ("CAST(1 AS DOUBLE(66,2))", 1426),
        ("CAST(1 AS DOUBLE(65,39))", 1425),
        ("CAST(1 AS DOUBLE(2,3))", 1427),
        ("CAST(1 AS DOUBLE(0,1))", 1427),
        ("CAST(1 AS FLOAT(5,1))", 1064),
    ] {
        assert_eq!(eval(sql).expect_err(sql).code, code, "{sql}");
    }
    let e = eval("CAST(1.25 AS DOUBLE(66,2))").expect_err("too big");
    assert_eq!(
        e.message,
        "Too big precision specified for '1.25'. Maximum is 65"
    );
}

#[test]
fn a_killed_statement_stops_with_1317() {
    let env = Env::default();
    let flag = std::sync::atomic::AtomicBool::new(false);
    let mut ctx = Ctx::new(&[], &env);
    ctx.killed = Some(&flag);
    assert!(ctx.check_killed().is_ok());
    flag.store(true, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(ctx.check_killed().expect_err("killed").code, 1317);
}

mod no_panics {
    use proptest::prelude::*;

    fn literal() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<i64>().prop_map(|v| v.to_string()),
            any::<u64>().prop_map(|v| v.to_string()),
            (any::<i32>(), 0u32..40).prop_map(|(m, s)| format!("{m}.{}", "9".repeat(s as usize))),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| format!("{f:e}")),
            "[a-z0-9 %_:.-]{0,12}".prop_map(|s| format!("'{s}'")),
            Just("NULL".to_owned()),
            Just("'2024-02-29 23:59:59.999999'".to_owned()),
            Just("'838:59:59'".to_owned()),
            Just("'-99999999 12:00:00'".to_owned()),
            Just("'9999-12-31'".to_owned()),
        ]
    }

    fn expr() -> impl Strategy<Value = String> {
        literal().prop_recursive(4, 32, 4, |inner| {
            let two = (inner.clone(), inner.clone());
            let three = (inner.clone(), inner.clone(), inner.clone());
            prop_oneof![
                (
                    two.clone(),
                    prop::sample::select(vec![
                        "+", "-", "*", "/", "DIV", "%", "=", "<", "<=>", "AND", "OR", "XOR",
                        "LIKE",
                    ])
                )
                    .prop_map(|((a, b), op)| format!("({a} {op} {b})")),
                (
                    two.clone(),
                    prop::sample::select(vec![
                        "CONCAT",
                        "LEFT",
                        "RIGHT",
                        "REPEAT_NOT",
                        "ROUND",
                        "TRUNCATE",
                        "MOD",
                        "IFNULL",
                        "NULLIF",
                        "GREATEST",
                        "LEAST",
                        "DATE_FORMAT",
                        "CONCAT_WS",
                        "SUBSTRING",
                    ])
                )
                    .prop_map(|((a, b), f)| format!("{f}({a}, {b})")),
                (
                    three,
                    prop::sample::select(vec!["LPAD", "RPAD", "REPLACE", "IF", "SUBSTRING"])
                )
                    .prop_map(|((a, b, c), f)| format!("{f}({a}, {b}, {c})")),
                (
                    inner.clone(),
                    prop::sample::select(vec![
                        "ABS",
                        "CEIL",
                        "FLOOR",
                        "UPPER",
                        "LENGTH",
                        "DATE",
                        "YEAR",
                        "MONTH",
                        "UNIX_TIMESTAMP",
                        "-",
                    ])
                )
                    .prop_map(|(a, f)| format!("{f}({a})")),
                (
                    inner.clone(),
                    prop::sample::select(vec![
                        "SIGNED",
                        "UNSIGNED",
                        "CHAR",
                        "DECIMAL(65,30)",
                        "DECIMAL(5,2)",
                        "DATE",
                        "DATETIME",
                        "TIME",
                        "DOUBLE",
                    ])
                )
                    .prop_map(|(a, t)| format!("CAST({a} AS {t})")),
                (
                    two,
                    prop::sample::select(vec!["DAY", "MONTH", "YEAR", "SECOND", "QUARTER"])
                )
                    .prop_map(|((a, b), u)| format!("DATE_ADD({a}, INTERVAL {b} {u})")),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]
        /// Whatever the expression, evaluation answers (a value or an
        /// error), never a panic.
        #[test]
        fn evaluation_never_panics(e in expr()) {
            let _ = super::eval(&e);
        }
    }
}

/// An expression's text in a session `tz_secs` east of UTC, at
/// 2023-11-14 22:13:20 UTC.
fn eval_in_zone(sql: &str, tz_secs: i64) -> String {
    let (e, _) = lower_select(sql).expect("lowers");
    let env = Env {
        now_micros: 1_700_000_000_000_000,
        tz_secs,
        ..Env::default()
    };
    let mut ctx = Ctx::new(&[], &env);
    let v = e.eval(&[], &mut ctx).expect("evaluates");
    if v.is_null() {
        "NULL".to_owned()
    } else {
        v.to_text()
    }
}

#[test]
fn time_functions_follow_the_session_time_zone() {
    let plus2 = 2 * 3600;
    assert_eq!(eval_in_zone("NOW()", 0), "2023-11-14 22:13:20");
    assert_eq!(eval_in_zone("NOW()", plus2), "2023-11-15 00:13:20");
    assert_eq!(eval_in_zone("SYSDATE()", plus2), "2023-11-15 00:13:20");
    assert_eq!(eval_in_zone("CURDATE()", plus2), "2023-11-15");
    assert_eq!(eval_in_zone("CURTIME()", plus2), "00:13:20");
    assert_eq!(
        eval_in_zone("UTC_TIMESTAMP()", plus2),
        "2023-11-14 22:13:20"
    );
    assert_eq!(eval_in_zone("UTC_DATE()", plus2), "2023-11-14");
    assert_eq!(eval_in_zone("UNIX_TIMESTAMP()", plus2), "1700000000");
    assert_eq!(eval_in_zone("UNIX_TIMESTAMP(NOW())", plus2), "1700000000");
    assert_eq!(
        eval_in_zone("FROM_UNIXTIME(0)", -3600),
        "1969-12-31 23:00:00"
    );
    assert_eq!(eval_in_zone("FROM_UNIXTIME(-1)", 0), "NULL");
    assert_eq!(
        eval_in_zone(
            "CONVERT_TZ('2020-01-01 00:00:00', '+01:00', '-01:30')",
            plus2
        ),
        "2019-12-31 21:30:00"
    );
    assert_eq!(
        eval_in_zone(
            "CONVERT_TZ('2020-01-01 00:00:00', 'Europe/Oslo', '+00:00')",
            0
        ),
        "NULL"
    );
}

#[test]
fn seeded_rand_is_mysqls_sequence_and_pi_shows_six_decimals() {
    // MariaDB: SELECT RAND(10) over three rows.
    let mut r = super::func::MysqlRand::seeded(10);
    let got: Vec<f64> = (0..3).map(|_| r.next()).collect();
    assert_eq!(
        got,
        [0.6570515219653505, 0.12820613023657923, 0.6698761160204896]
    );
    let (_, meta) = lower_select("PI()").unwrap();
    assert_eq!((meta.ty, meta.decimals), (ColumnType::Double, 6));
}

/// Every expression the parser accepts, nested as deep as it takes them,
/// is lowered, typed and evaluated on a thread with a quarter of a
/// connection's stack: lowering, whose frames are largest, grows its
/// stack where it runs short, so a statement is answered (or refused with
/// an error), never the SQL node's stack overflowed (which aborts the
/// process for every client; `IF` nested 20 deep did, unoptimised).
#[test]
fn the_deepest_expressions_fit_a_connection_stack() {
    let forms = [
        "IF(1, {}, 'b')",
        "CONCAT({}, 'b')",
        "CASE WHEN 1 THEN {} ELSE 'b' END",
        "COALESCE({}, 'b')",
        "GREATEST({}, 'b')",
        "({} + 1)",
        "NOT ({})",
        "UPPER({})",
    ];
    let outcome = std::thread::Builder::new()
        .stack_size(crate::server::CONNECTION_STACK_BYTES)
        .spawn(move || {
            let mut deepest = Vec::new();
            for form in forms {
                let nested = |depth: usize| {
                    (0..depth).fold("'a'".to_owned(), |inner, _| form.replace("{}", &inner))
                };
                let depth = (1..200)
                    .take_while(|&d| crate::engine::parse(&format!("SELECT {}", nested(d))).is_ok())
                    .last()
                    .unwrap_or(0);
                // Answered or refused; either way the thread lives. The
                // item is named from the statement's text, as a session
                // names it (not from the tree's deep `Display`).
                let _ = lower_and_eval(&format!("SELECT {}", nested(depth)));
                deepest.push((form, depth));
            }
            deepest
        })
        .unwrap()
        .join()
        .expect("the deepest expressions fit the connection stack");
    for (form, depth) in outcome {
        assert!(depth >= 20, "{form} nests only {depth} deep");
    }
}

/// A SELECT's one item lowered, named from `sql`, typed and evaluated,
/// as a session does (the deepest-expression test).
fn lower_and_eval(sql: &str) -> SqlResult<Val> {
    let (lowered, _) = lowered_item(&crate::engine::parse(sql)?, sql)?;
    let env = Env::default();
    let mut ctx = Ctx::new(&[], &env);
    lowered.eval(&[], &mut ctx)
}

/// Lowering grows its own stack where the thread's runs short: the
/// deepest `IF` the parser takes lowers on a thread of 64 KiB, which one
/// level's frames fill in an unoptimised build.
#[test]
fn lowering_grows_its_own_stack() {
    let nested =
        |depth: usize| (0..depth).fold("'a'".to_owned(), |inner, _| format!("IF(1, {inner}, 'b')"));
    let depth = (1..200)
        .take_while(|&d| crate::engine::parse(&format!("SELECT {}", nested(d))).is_ok())
        .last()
        .unwrap_or(0);
    assert!(depth >= 20, "IF nests only {depth} deep");
    let statements = crate::engine::parse(&format!("SELECT {}", nested(depth))).unwrap();
    let lowered = std::thread::Builder::new()
        .stack_size(64 << 10)
        .spawn(move || with_scope(|scope| scope.lower(select_item(&statements)).is_ok()))
        .unwrap()
        .join()
        .expect("lowering fits a small stack");
    assert!(lowered);
}

#[test]
fn text_of_no_fraction_keeps_a_sum_fixed() {
    // MariaDB gives DATE_FORMAT, HEX, CAST AS CHAR (and TIME_FORMAT,
    // DAYNAME, MONTHNAME) decimals 0, so a sum with them shows the other
    // operand's: a quotient's four; a string literal's are not fixed.
    for (sql, decimals) in [
        ("(@a / 7) + DATE_FORMAT(@d, '%Y')", 4),
        ("1.5 + HEX(@a)", 1),
        ("1.5 + CAST(@a AS CHAR)", 1),
        ("2 + DAYNAME(@d)", 0),
        ("1.5 + CONCAT(@a)", 31),
        ("1.5 + '1'", 31),
        // The text columns themselves, as MariaDB describes them.
        ("DATE_FORMAT(@d, '%Y')", 0),
        ("CAST(@a AS CHAR)", 0),
        ("CONCAT(@a)", 31),
    ] {
        let (_, meta) = lower_select(sql).expect("lowers");
        assert_eq!(meta.decimals, decimals, "{sql}");
    }
}
