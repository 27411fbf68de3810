#!/usr/bin/env python3
"""Differential fuzzing of SELECT: random queries over one small schema,
run on Skarv's SQL node and on MariaDB (the reference, README.md), their
answers compared. A difference is a bug unless docs/sql.md explains it;
what it finds becomes a case of the SQL suite (NAME.test, recorded
against MariaDB) once fixed.

    tests/sql/difffuzz.py --skarv-port P --mariadb-port M [--seed S] [--queries N] [--dml]
        [--create-select] [--db D]

Both servers get the database `difffuzz` (or --db: concurrent runs need
one each), dropped first, with the same rows. The run depends on its
seed only; each difference is printed with the query and both answers
(rows, or the error code), at most --show of them, and the status is 1
when there was one. Needs PyMySQL.

The queries keep to what both can answer the same way: every result is
compared as a multiset unless the query orders by every selected column,
floating-point values are compared to 12 significant digits, and errors
are compared by code.

With --dml the statements are writes instead: INSERT (IGNORE, ON
DUPLICATE KEY UPDATE, … SELECT), REPLACE, UPDATE and DELETE (with ORDER
BY … LIMIT, and multi-table ones joined to t1) of values of every kind into columns of every kind, out of
range, too long, not a date, a duplicate key. After each one the error
code, or the affected rows and the warnings' codes, are compared, and
then the table it wrote, row by row.

With --dml --transactions the writes run inside transactions: BEGIN,
SAVEPOINT, ROLLBACK TO SAVEPOINT, RELEASE SAVEPOINT, COMMIT and ROLLBACK
come between them at random, each compared too, and after each every
table is compared.

With --create-select each statement is a CREATE TABLE … SELECT of
computed columns: the outcome, the new table's column types and
NULL-ness (information_schema) and its rows are compared.
"""

import argparse
import random
import re
import sys
import unicodedata

import pymysql

SCHEMA = [
    "CREATE TABLE t1 (id INT PRIMARY KEY, a INT, b VARCHAR(20), c DECIMAL(10,2),"
    " d DATE, e DOUBLE, f BIGINT UNSIGNED)",
    "CREATE TABLE t2 (id INT PRIMARY KEY, t1_id INT, x INT, y VARCHAR(10), KEY (t1_id))",
    # The target of --dml: a column of each kind, with narrow ranges and
    # widths, a unique key and a NOT NULL column with a default.
    "CREATE TABLE t3 (id INT PRIMARY KEY, k INT, ti TINYINT, su SMALLINT UNSIGNED, ch CHAR(5),"
    " vc VARCHAR(8), dc DECIMAL(5,2), dt DATE, dtm DATETIME, db DOUBLE, nn INT NOT NULL DEFAULT 5,"
    " UNIQUE KEY (k))",
    # The other types, for --dml too.
    "CREATE TABLE t4 (id INT PRIMARY KEY, e ENUM('a','b','c'), s SET('x','y','z'), tm TIME, yr YEAR,"
    " bt BIT(8), tx TEXT, bl BLOB, fl FLOAT, ub BIGINT UNSIGNED, ud DECIMAL(6,2) UNSIGNED,"
    " ts TIMESTAMP NULL, d52 DOUBLE(5,2), mi MEDIUMINT)",
]

T3 = {
    "k": ["1", "2", "3", "-1", "NULL", "'4'", "2.5", "7"],
    "ti": ["0", "127", "128", "-128", "-129", "'12abc'", "' 7'", "''", "NULL", "3.5", "-2.5", "1e2"],
    "su": ["0", "65535", "65536", "-1", "'300'", "NULL", "4.49", "'0x10'"],
    "ch": ["'ab'", "'abcde'", "'abcdef'", "'ab   '", "NULL", "42", "''", "'Éé'"],
    "vc": ["'abc'", "'abcdefgh'", "'abcdefghi'", "'ab  '", "NULL", "1.50", "'a b'", "'abcdefgh  '"],
    "dc": ["1.234", "999.99", "999.995", "-999.99", "1000", "'12.5x'", "NULL", "0.005", "1e2", "'-0'"],
    "dt": ["'2024-02-29'", "'2023-02-29'", "'2024-1-5'", "20240105", "'0000-00-00'", "NULL",
           "'2024-01-05 10:11:12'", "'garbage'", "'1999-12-31'"],
    "dtm": ["'2024-02-29 23:59:59'", "'2024-02-29'", "'2024-02-29 24:00:00'", "20240105101112",
            "NULL", "'2024-02-29 10:00:00.7'", "'x'"],
    "db": ["0.1", "1e308", "-2.5", "'3.25'", "NULL", "1e-5", "'abc'"],
    "nn": ["1", "NULL", "-7", "DEFAULT"],
}

T4 = {
    "e": ["'a'", "'B'", "'d'", "2", "0", "4", "NULL", "''", "'a '"],
    "s": ["'x'", "'x,y'", "'y,x'", "'w'", "'x,w'", "3", "8", "0", "NULL", "''"],
    "tm": ["'10:11:12'", "'838:59:59'", "'839:00:00'", "'-01:00:00'", "101112", "'1 02:00:00'", "'x'",
           "NULL", "'10:60:00'", "12.5"],
    "yr": ["2024", "'2024'", "69", "70", "'0'", "0", "1900", "2156", "NULL", "'abc'"],
    "bt": ["0", "255", "256", "b'101'", "'a'", "NULL", "-1"],
    "tx": ["'hello'", "NULL", "''", "REPEAT('a', 300)", "123", "'tail  '"],
    "bl": ["'bin'", "NULL", "X'00FF'", "''"],
    "fl": ["1.5", "3.4e38", "3.5e38", "-1e-50", "'2.5x'", "NULL", "0.1"],
    "ub": ["0", "-1", "18446744073709551615", "18446744073709551616", "'12'", "NULL", "1e19", "2e19"],
    "ud": ["0", "-0.01", "9999.99", "10000", "'5.555'", "NULL", "-0"],
    "ts": ["'2024-01-05 10:00:00'", "'1970-01-01 00:00:00'", "'2038-01-19 03:14:08'",
           "'2038-01-19 03:14:07'", "NULL", "20240105101112", "'2024-02-30 10:00:00'"],
    "d52": ["123.456", "999.995", "1000", "-999.99", "NULL", "'1.005'"],
    "mi": ["8388607", "8388608", "-8388609", "NULL", "'7x'"],
}

WORDS = ["apple", "Banana", "cherry", "", "date", "Éclair", "fig", "grape ", "a%b", "x_y"]


def rows(rng):
    t1 = []
    for i in range(1, 41):
        pick = lambda values: rng.choice(values + [None])
        t1.append((
            i,
            pick([rng.randint(-5, 20) for _ in range(6)]),
            pick(WORDS),
            pick(["%d.%02d" % (rng.randint(-999, 999), rng.randint(0, 99)) for _ in range(5)]),
            pick(["2024-02-29", "1999-12-31", "2026-01-01", "2000-06-15", "1970-01-01"]),
            pick([0.5, -2.25, 1e10, 3.0, 0.1]),
            pick([0, 1, 18446744073709551615, 4294967296, 7]),
        ))
    t2 = []
    for i in range(1, 61):
        t2.append((
            i,
            rng.choice([rng.randint(1, 45), None]),
            rng.choice([rng.randint(-3, 9), None]),
            rng.choice(WORDS[:6] + [None]),
        ))
    return t1, t2


def literal(v):
    if v is None:
        return "NULL"
    if isinstance(v, str):
        return "'" + v.replace("\\", "\\\\").replace("'", "''") + "'"
    return repr(v) if isinstance(v, float) else str(v)


class Gen:
    """A random query; `cols` are the columns in scope, by kind."""

    def __init__(self, rng, binary=None, nulls=None):
        self.rng = rng
        # With --binary-literals, some ASCII words are written as hex
        # literals, drawn from their own generator so that a seed's
        # queries are otherwise the same with or without them.
        self.binary = binary
        # With --nulls, some conditions are NULL or constant ones (SQL's
        # three values under NOT, XOR, AND and OR), drawn likewise.
        self.nulls = nulls
        # --set-ops: EXCEPT and INTERSECT [ALL] among a UNION's operators,
        # chosen from a stream of their own (the base seed's queries stay).
        self.set_ops = None

    def null_cond(self, scope):
        r = self.nulls
        col = r.choice(scope)[0]
        return r.choice([
            "NULL", "1", "0", "NULL = 1", "NULLIF(1, 1)",
            "%s > NULL" % col,
            "%s IN (1, NULL, 3)" % col,
            "%s NOT IN (2, NULL)" % col,
            "(%s <=> NULL)" % col,
        ])

    def word(self):
        w = self.rng.choice(WORDS)
        if self.binary is not None and w.isascii() and self.binary.random() < 0.3:
            return ("0x%s" if w and self.binary.random() < 0.5 else "X'%s'") % w.encode().hex()
        return literal(w)

    def col(self, scope, kind=None):
        cands = [c for c in scope if kind is None or c[1] == kind]
        return self.rng.choice(cands or scope)[0]

    def num(self, scope, depth=0):
        r = self.rng.random()
        if depth > 2 or r < 0.35:
            return self.col(scope, "int") if self.rng.random() < 0.8 else str(self.rng.randint(-3, 12))
        ops = [
            lambda: "(%s %s %s)" % (self.num(scope, depth + 1), self.rng.choice("+-*"),
                                    self.num(scope, depth + 1)),
            lambda: "(%s DIV %s)" % (self.num(scope, depth + 1), self.rng.choice(["2", "3", "-4"])),
            lambda: "(%s %% %s)" % (self.num(scope, depth + 1), self.rng.choice(["2", "5", "-3"])),
            lambda: "ABS(%s)" % self.num(scope, depth + 1),
            lambda: "COALESCE(%s, %s)" % (self.num(scope, depth + 1), self.num(scope, depth + 1)),
            lambda: "IF(%s, %s, %s)" % (self.cond(scope, depth + 1), self.num(scope, depth + 1),
                                        self.num(scope, depth + 1)),
            lambda: "CASE WHEN %s THEN %s ELSE %s END" % (self.cond(scope, depth + 1),
                                                         self.num(scope, depth + 1),
                                                         self.num(scope, depth + 1)),
            lambda: "LENGTH(%s)" % self.text(scope, depth + 1),
            lambda: "ROUND(%s, %d)" % (self.col(scope, "dec"), self.rng.randint(-1, 2)),
            lambda: "(%s + %s)" % (self.col(scope, "dec"), self.num(scope, depth + 1)),
            lambda: "GREATEST(%s, %s)" % (self.num(scope, depth + 1), self.num(scope, depth + 1)),
            lambda: "YEAR(%s)" % self.col(scope, "date"),
            lambda: "DATEDIFF(%s, '2000-01-01')" % self.col(scope, "date"),
            lambda: "NULLIF(%s, %s)" % (self.num(scope, depth + 1), self.num(scope, depth + 1)),
            lambda: "CAST(%s AS SIGNED)" % self.text(scope, depth + 1),
            # Implicit conversions, division, more functions.
            lambda: "(%s / %s)" % (self.num(scope, depth + 1), self.rng.choice(["3", "-7", "0", "2.5"])),
            lambda: "(%s + %s)" % (self.num(scope, depth + 1), self.text(scope, depth + 1)),
            lambda: "FLOOR(%s)" % self.col(scope, "dec"),
            lambda: "CEIL(%s)" % self.col(scope, "dec"),
            lambda: "TRUNCATE(%s, %d)" % (self.col(scope, "dec"), self.rng.randint(-1, 1)),
            lambda: "SIGN(%s)" % self.num(scope, depth + 1),
            lambda: "MOD(%s, %s)" % (self.num(scope, depth + 1), self.rng.choice(["4", "-2", "0"])),
            lambda: "LEAST(%s, %s)" % (self.num(scope, depth + 1), self.num(scope, depth + 1)),
            lambda: "MONTH(%s)" % self.col(scope, "date"),
            lambda: "DAYOFWEEK(%s)" % self.col(scope, "date"),
            lambda: "TO_DAYS(%s)" % self.col(scope, "date"),
            lambda: "TIMESTAMPDIFF(MONTH, %s, '2024-01-31')" % self.col(scope, "date"),
            lambda: "LOCATE('a', %s)" % self.text(scope, depth + 1),
            lambda: "CHAR_LENGTH(%s)" % self.text(scope, depth + 1),
            lambda: "ASCII(%s)" % self.text(scope, depth + 1),
            lambda: "STRCMP(%s, %s)" % (self.text(scope, depth + 1), self.text(scope, depth + 1)),
            lambda: "(%s & 6)" % self.num(scope, depth + 1),
            lambda: "(%s >> 1)" % self.num(scope, depth + 1),
            lambda: "BIT_COUNT(%s)" % self.num(scope, depth + 1),
            lambda: "CAST(%s AS DECIMAL(10,3))" % self.num(scope, depth + 1),
            lambda: "CAST(%s AS UNSIGNED)" % self.num(scope, depth + 1),
            lambda: "(%s * %s)" % (self.col(scope, "dbl"), self.num(scope, depth + 1)),
        ]
        return self.rng.choice(ops)()

    def text(self, scope, depth=0):
        r = self.rng.random()
        if depth > 2 or r < 0.4:
            return self.col(scope, "text") if self.rng.random() < 0.8 else self.word()
        ops = [
            lambda: "CONCAT(%s, %s)" % (self.text(scope, depth + 1), self.text(scope, depth + 1)),
            lambda: "UPPER(%s)" % self.text(scope, depth + 1),
            lambda: "LOWER(%s)" % self.text(scope, depth + 1),
            lambda: "SUBSTRING(%s, %d, %d)" % (self.text(scope, depth + 1), self.rng.randint(-2, 3),
                                               self.rng.randint(0, 4)),
            lambda: "TRIM(%s)" % self.text(scope, depth + 1),
            lambda: "REPLACE(%s, 'a', 'zz')" % self.text(scope, depth + 1),
            lambda: "COALESCE(%s, 'none')" % self.text(scope, depth + 1),
            lambda: "LPAD(%s, 6, '*')" % self.text(scope, depth + 1),
            lambda: "CONCAT_WS('-', %s, %s)" % (self.text(scope, depth + 1), self.num(scope, depth + 1)),
            lambda: "DATE_FORMAT(%s, '%%Y/%%m')" % self.col(scope, "date"),
            lambda: "CAST(%s AS CHAR)" % self.num(scope, depth + 1),
            lambda: "REVERSE(%s)" % self.text(scope, depth + 1),
            lambda: "LEFT(%s, %d)" % (self.text(scope, depth + 1), self.rng.randint(0, 4)),
            lambda: "RPAD(%s, %d, '.')" % (self.text(scope, depth + 1), self.rng.randint(0, 7)),
            lambda: "IF(%s, %s, %s)" % (self.cond(scope, depth + 1), self.text(scope, depth + 1),
                                        self.text(scope, depth + 1)),
            lambda: "INSERT(%s, 2, 1, 'Q')" % self.text(scope, depth + 1),
            lambda: "DATE_ADD(%s, INTERVAL %d DAY)" % (self.col(scope, "date"), self.rng.randint(-400, 400)),
            lambda: "MONTHNAME(%s)" % self.col(scope, "date"),
            lambda: "HEX(%s)" % self.num(scope, depth + 1),
            lambda: "SUBSTRING_INDEX(%s, 'a', %d)" % (self.text(scope, depth + 1), self.rng.randint(-2, 2)),
            lambda: "REPEAT(%s, 2)" % self.text(scope, depth + 1),
            lambda: "CONCAT(%s, %s)" % (self.text(scope, depth + 1), self.num(scope, depth + 1)),
            lambda: "FORMAT(%s, %d)" % (self.col(scope, "dec"), self.rng.randint(0, 2)),
            lambda: "RTRIM(%s)" % self.text(scope, depth + 1),
            lambda: "QUOTE(%s)" % self.text(scope, depth + 1),
            lambda: "ELT(%d, %s, %s)" % (self.rng.randint(0, 3), self.text(scope, depth + 1),
                                         self.text(scope, depth + 1)),
        ]
        return self.rng.choice(ops)()

    def cond(self, scope, depth=0):
        if self.nulls is not None and self.nulls.random() < 0.2:
            return self.null_cond(scope)
        r = self.rng.random()
        # MariaDB 10.11 answers 1 for `v NOT IN (SELECT c …)` whose c has a
        # NULL when v lies outside c's type (t1.f's 4294967296 against an
        # INT), where NULL is right (docs/sql.md): the left side of an IN
        # subquery is a column within INT (an expression of one may leave
        # it: CAST(a AS UNSIGNED), a / 3, e * 8), not a BIGINT UNSIGNED.
        in_range = [c for c in scope if c[0] not in ("t1.f", "t4.ub")]
        if depth > 2 or r < 0.5:
            ops = [
                lambda: "%s %s %s" % (self.num(scope, depth + 1), self.rng.choice(["=", "<", ">", "<=", ">=", "<>", "<=>"]),
                                      self.num(scope, depth + 1)),
                lambda: "%s IS %sNULL" % (self.col(scope), self.rng.choice(["", "NOT "])),
                lambda: "%s %sIN (%s)" % (self.num(scope, depth + 1), self.rng.choice(["", "NOT "]),
                                          ", ".join(str(self.rng.randint(-2, 10)) for _ in range(3))),
                lambda: "%s BETWEEN %d AND %d" % (self.num(scope, depth + 1), self.rng.randint(-5, 3),
                                                  self.rng.randint(3, 15)),
                lambda: "%s LIKE %s" % (self.text(scope, depth + 1),
                                        literal(self.rng.choice(["a%", "%a%", "_a%", "%e", "a\\%b", "%"]))),
                lambda: "%s = %s" % (self.text(scope, depth + 1), self.text(scope, depth + 1)),
                lambda: "%s < %s" % (self.col(scope, "date"), literal(self.rng.choice(["2001-01-01", "2024-02-29"]))),
                lambda: "%s > %s" % (self.col(scope, "dec"), self.rng.choice(["0", "-1.5", "100"])),
                # Strings against numbers, and dates against strings.
                lambda: "%s %s %s" % (self.text(scope, depth + 1), self.rng.choice(["=", "<", ">="]),
                                      self.num(scope, depth + 1)),
                lambda: "%s BETWEEN '1999-06-01' AND '2024-12-31'" % self.col(scope, "date"),
                lambda: "%s IN ('apple', 'FIG', 3)" % self.text(scope, depth + 1),
                lambda: "%s REGEXP '^[a-d]'" % self.text(scope, depth + 1),
            lambda: "EXISTS (SELECT 1 FROM t2 s WHERE s.x = %s)" % self.num(scope, depth + 1),
            lambda: "%s IN (SELECT s.x FROM t2 s WHERE s.y IS NOT NULL)" % self.col(in_range, "int"),
            lambda: "%s %s (SELECT MAX(s.x) FROM t2 s WHERE s.t1_id > %d)" % (
                self.num(scope, depth + 1), self.rng.choice(["=", "<", ">="]), self.rng.randint(0, 30)),
            lambda: "%s NOT IN (SELECT s.t1_id FROM t2 s)" % self.col(in_range, "int"),
            ]
            return self.rng.choice(ops)()
        ops = [
            lambda: "(%s AND %s)" % (self.cond(scope, depth + 1), self.cond(scope, depth + 1)),
            lambda: "(%s OR %s)" % (self.cond(scope, depth + 1), self.cond(scope, depth + 1)),
            lambda: "NOT (%s)" % self.cond(scope, depth + 1),
            lambda: "(%s XOR %s)" % (self.cond(scope, depth + 1), self.cond(scope, depth + 1)),
        ]
        return self.rng.choice(ops)()

    def create_select(self):
        """A CREATE TABLE ct … SELECT of 1 to 4 computed columns named
        c0, c1, … over t1, t2 or their join, maybe grouped."""
        rng = self.rng
        t1 = [("t1.id", "int"), ("t1.a", "int"), ("t1.b", "text"), ("t1.c", "dec"), ("t1.d", "date"),
              ("t1.f", "int"), ("t1.e", "dbl")]
        t2 = [("t2.id", "int"), ("t2.t1_id", "int"), ("t2.x", "int"), ("t2.y", "text")]
        scope, source = rng.choice([
            (t1, "t1"), (t2, "t2"),
            (t1 + t2, "t1 %s t2 ON t2.t1_id = t1.id" % rng.choice(["JOIN", "LEFT JOIN"]))])
        where = " WHERE " + self.cond(scope) if rng.random() < 0.5 else ""
        pick = [self.num, self.text, self.num, lambda s: self.col(s, None)]
        items = [rng.choice(pick)(scope) for _ in range(rng.randint(1, 4))]
        group = ""
        if rng.random() < 0.25:
            key = self.col(scope, rng.choice(["int", "text"]))
            fn = rng.choice(["COUNT(*)", "SUM(%s)", "MIN(%s)", "MAX(%s)", "AVG(%s)",
                             "GROUP_CONCAT(%s ORDER BY %s)"])
            items = [key, fn.replace("%s", self.num(scope, 2))]
            group = " GROUP BY " + key
        named = ", ".join("%s c%d" % (e, i) for i, e in enumerate(items))
        return "CREATE TABLE ct SELECT %s FROM %s%s%s" % (named, source, where, group)

    def query(self):
        rng = self.rng
        t1 = [("t1.id", "int"), ("t1.a", "int"), ("t1.b", "text"), ("t1.c", "dec"), ("t1.d", "date"),
              ("t1.f", "int"), ("t1.e", "dbl")]
        t2 = [("t2.id", "int"), ("t2.t1_id", "int"), ("t2.x", "int"), ("t2.y", "text")]
        shape = rng.random()
        if shape < 0.45:
            scope, source = t1, "t1"
        elif shape < 0.6:
            scope, source = t2, "t2"
        else:
            join = rng.choice(["JOIN", "LEFT JOIN", "RIGHT JOIN"])
            on = rng.choice(["t2.t1_id = t1.id", "t2.x = t1.a", "t2.t1_id = t1.id AND t2.x > 0"])
            scope, source = t1 + t2, "t1 %s t2 ON %s" % (join, on)
        where = ""
        if rng.random() < 0.7:
            where = " WHERE " + self.cond(scope)
            if rng.random() < 0.15:
                where += " AND t1.id IN (SELECT t1_id FROM t2 WHERE x > %d)" % rng.randint(-2, 6) \
                    if source.startswith("t1") else ""
        if rng.random() < 0.08:
            # Counts of the whole WHERE, ungrouped (a counting scan where
            # the data nodes test it all).
            counts = rng.choice(["COUNT(*)", "COUNT(*), COUNT(1)", "COUNT(*) + 1",
                                 "COUNT(%s)" % self.col(scope, "int")])
            return "SELECT %s FROM %s%s" % (counts, source, where), True
        if rng.random() < 0.05:
            # Aggregates of t2's plain columns grouped by t1's columns over
            # the join by t1's key (aggregated below the join where the
            # data nodes test t2's conditions).
            t1s = [c for c in t1 if c[1] in ("int", "text")]
            aggs = []
            for _ in range(rng.randint(1, 3)):
                fn = rng.choice(["COUNT(*)", "COUNT(%s)", "SUM(%s)", "MIN(%s)", "MAX(%s)",
                                 "AVG(%s)"])
                aggs.append(fn.replace("%s", rng.choice(["t2.x", "t2.id", "t2.t1_id"])))
            keys = [rng.choice(t1s)[0] for _ in range(rng.randint(0, 2))]
            conds = []
            if rng.random() < 0.5:
                conds.append(self.cond(t1))
            if rng.random() < 0.5:
                conds.append(self.cond(t2))
            where = " WHERE " + " AND ".join(conds) if conds else ""
            on = rng.choice(["t2.t1_id = t1.id", "t1.id = t2.t1_id"])
            sql = "SELECT %s FROM t1 JOIN t2 ON %s%s" % (", ".join(keys + aggs), on, where)
            if keys:
                sql += " GROUP BY " + ", ".join(keys)
            return sql, True
        if rng.random() < 0.1:
            # Aggregates of plain integer and DECIMAL columns, grouped by
            # columns or not (an aggregating scan where the data nodes
            # test the whole WHERE).
            nums = [c for c, kind in scope if kind in ("int", "dec")]
            ordered = nums + [c for c, kind in scope if kind == "date"]
            # DISTINCT ones of any column: grouped by it too.
            anything = [c for c, kind in scope]
            aggs = []
            for _ in range(rng.randint(1, 4)):
                fn = rng.choice(["COUNT(*)", "COUNT(%s)", "SUM(%s)", "MIN(%s)", "MAX(%s)",
                                 "AVG(%s)", "COUNT(DISTINCT %s)", "SUM(DISTINCT %s)"])
                pick = ordered if fn[:3] in ("MIN", "MAX") else nums
                if fn == "COUNT(DISTINCT %s)":
                    pick = anything
                aggs.append(fn.replace("%s", rng.choice(pick)))
            keys = [self.col(scope, rng.choice(["int", "text"]))
                    for _ in range(rng.randint(0, 2))]
            sql = "SELECT %s FROM %s%s" % (", ".join(keys + aggs), source, where)
            if keys:
                sql += " GROUP BY " + ", ".join(keys)
            return sql, True
        if rng.random() < 0.3:
            # Grouped: by one or two expressions, with aggregates.
            keys = [self.col(scope, rng.choice(["int", "text"])) for _ in range(rng.randint(1, 2))]
            aggs = []
            for _ in range(rng.randint(1, 3)):
                fn = rng.choice(["COUNT(*)", "COUNT(%s)", "SUM(%s)", "MIN(%s)", "MAX(%s)", "AVG(%s)",
                                 "COUNT(DISTINCT %s)", "GROUP_CONCAT(%s ORDER BY %s)"])
                arg = self.num(scope, 2)
                aggs.append(fn % ((arg,) * fn.count("%s")))
            items = keys + aggs
            having = ""
            if rng.random() < 0.3:
                having = " HAVING COUNT(*) > %d" % rng.randint(0, 2)
            sql = "SELECT %s FROM %s%s GROUP BY %s%s" % (", ".join(items), source, where,
                                                          ", ".join(keys), having)
            # Without ORDER BY the groups come in GROUP BY order.
            return sql, True
        if rng.random() < 0.1:
            # A UNION of two or three selects whose columns may differ in
            # type (numbers, strings, dates, NULL): the result's type is
            # aggregated over them.
            n = rng.randint(1, 2)

            def item(scope):
                return rng.choice([
                    lambda: self.num(scope),
                    lambda: self.num(scope),
                    lambda: self.text(scope),
                    lambda: "NULL",
                    lambda: rng.choice(["2", "2.5", "-1.25", "'2'", "2e0", "DATE '2024-01-01'",
                                        "TIMESTAMP '2024-01-01 10:00:00'", "CAST(7 AS UNSIGNED)"]),
                    lambda: "t1.d" if scope is t1 else "t1_id",
                ])()
            arms = ["SELECT %s FROM t1" % ", ".join(item(t1) for _ in range(n)),
                    "SELECT %s FROM t2" % ", ".join(item(t2) for _ in range(n))]
            if rng.random() < 0.3:
                arms.append("SELECT %s" % ", ".join(
                    rng.choice(["NULL", "2", "2.0", "'x'", "1e0"]) for _ in range(n)))
            sql = arms[0]
            for arm in arms[1:]:
                op = rng.choice(["UNION", "UNION ALL"])
                if self.set_ops is not None:
                    op = self.set_ops.choice(["UNION", "UNION ALL", "EXCEPT", "EXCEPT ALL",
                                              "INTERSECT", "INTERSECT ALL"])
                sql += " %s %s" % (op, arm)
            return sql, False
        if rng.random() < 0.08 and source == "t1":
            # Window functions over a unique order: one answer per row.
            part = rng.choice(["", "PARTITION BY %s " % self.col(t1, rng.choice(["int", "text", "date"]))])
            frame = rng.choice(["", " ROWS BETWEEN 1 PRECEDING AND CURRENT ROW",
                                " ROWS BETWEEN UNBOUNDED PRECEDING AND 1 FOLLOWING"])
            fn = rng.choice(["ROW_NUMBER()", "SUM(%s)", "COUNT(%s)", "MAX(%s)", "AVG(%s)",
                             "LAG(%s)", "LEAD(%s, 2)", "FIRST_VALUE(%s)", "NTILE(3)"])
            if "%s" in fn:
                fn = fn % self.num(t1, 1)
            framed = frame if fn.split("(")[0] in ("SUM", "COUNT", "MAX", "AVG", "FIRST_VALUE") else ""
            return ("SELECT t1.id, %s OVER (%sORDER BY t1.id%s) FROM t1%s"
                    % (fn, part, framed, where)), False
        items = []
        for _ in range(rng.randint(1, 4)):
            items.append(rng.choice([self.num, self.text, self.num])(scope))
        if rng.random() < 0.1 and source.startswith("t1") and "t2" not in source:
            items.append("(SELECT COUNT(*) FROM t2 s WHERE s.t1_id = t1.id)")
        distinct = "DISTINCT " if rng.random() < 0.15 else ""
        sql = "SELECT %s%s FROM %s%s" % (distinct, ", ".join(items), source, where)
        ordered = False
        if rng.random() < 0.4:
            # Ordered by every item, then limited: the answer is one list.
            sql += " ORDER BY " + ", ".join(str(i + 1) + rng.choice(["", " DESC"])
                                            for i in range(len(items)))
            ordered = True
            if rng.random() < 0.5:
                sql += " LIMIT %d" % rng.randint(0, 10)
                ordered = "limit"
        return sql, ordered


def norm(v):
    if v is None:
        return None
    if isinstance(v, float):
        return float("%.12g" % v)
    if isinstance(v, bytes):
        return v
    s = str(v)
    # Decimals and doubles sent as text.
    try:
        if any(ch in s for ch in ".eE") and s.strip():
            return float("%.12g" % float(s))
    except ValueError:
        pass
    return s

class DmlGen:
    """A random write to t3 (or to t1, whose rows the SELECTs read)."""

    def __init__(self, rng, binary=None, nulls=None):
        self.rng = rng
        self.exprs = Gen(rng, binary, nulls)
        self.table, self.spec = "t3", T3

    def value(self, col):
        return self.rng.choice(self.spec[col])

    def cols(self):
        cols = self.rng.sample(list(self.spec), self.rng.randint(1, 4))
        return ["id"] + cols

    def row(self, cols):
        return "(" + ", ".join(str(self.rng.randint(1, 30)) if c == "id" else self.value(c)
                               for c in cols) + ")"

    def where(self):
        rng = self.rng
        if self.table == "t4":
            col = rng.choice(list(T4))
            return rng.choice([
                "id < %d" % rng.randint(1, 30),
                "%s IS NULL" % col,
                "%s IS NOT NULL" % col,
                "id BETWEEN %d AND %d" % (rng.randint(1, 15), rng.randint(10, 30)),
                "%s = %s" % (col, self.value(col)),
                "%s > %s" % (col, self.value(col)),
            ])
        return rng.choice([
            "id < %d" % rng.randint(1, 30),
            "k IS NULL",
            "ti > %d" % rng.randint(-5, 100),
            "vc LIKE 'a%'",
            "dt < '2020-01-01'",
            "id BETWEEN %d AND %d" % (rng.randint(1, 15), rng.randint(10, 30)),
            "dc > 0 OR su = 0",
            "id IN (%d, %d, %d)" % (rng.randint(1, 30), rng.randint(1, 30), rng.randint(1, 30)),
            "ch = 'ab'",
            "nn <> 5",
        ])

    def qualified(self, sql):
        """`sql` with the target table's columns named with it (outside
        string literals): t1 has an `id` and an `e` too."""
        names = ["id"] + list(self.spec)
        parts = sql.split("'")
        for i in range(0, len(parts), 2):
            parts[i] = re.sub(r"(?<![\w.])(%s)\b" % "|".join(names), self.table + r".\1", parts[i])
        return "'".join(parts)

    def multi_table(self):
        """A multi-table UPDATE or DELETE of the target joined to t1 by
        key (at most one t1 row per target row: the first joined row
        decides, and MariaDB's and Skarv's join orders may differ)."""
        rng = self.rng
        table = self.table
        t1 = [("t1.a", "int"), ("t1.b", "text"), ("t1.c", "dec"), ("t1.d", "date"), ("t1.e", "dbl"),
              ("t1.f", "int")]
        cond = rng.choice([
            lambda: self.qualified(self.where()),
            lambda: self.exprs.cond(t1, 1),
            lambda: "%s AND %s" % (self.qualified(self.where()), self.exprs.cond(t1, 1)),
        ])()
        joined = rng.choice([
            "%s JOIN t1 ON t1.id = %s.id" % (table, table),
            "%s LEFT JOIN t1 ON t1.id = %s.id" % (table, table),
            "t1 JOIN %s ON %s.id = t1.id" % (table, table),
            "%s, t1" % table,
        ])
        if joined.endswith(", t1"):
            cond = "t1.id = %s.id AND (%s)" % (table, cond)
        if rng.random() < 0.3:
            return "DELETE %s%s FROM %s WHERE %s" % (
                rng.choice(["", "IGNORE "]), table, joined, cond)
        sets = []
        for c in rng.sample(list(self.spec), rng.randint(1, 2)):
            sources = [self.value(c), self.qualified(self.set_expr(c))] + [
                x for x, kind in t1 if kind != "date"]
            sets.append("%s.%s = %s" % (table, c, rng.choice(sources)))
        ignore = "IGNORE " if rng.random() < 0.2 else ""
        return "UPDATE %s%s SET %s WHERE %s" % (ignore, joined, ", ".join(sets), cond)

    def set_expr(self, col):
        rng = self.rng
        return rng.choice([
            lambda: self.value(col),
            lambda: "%s + 1" % col,
            lambda: "%s * 2" % col,
            lambda: "%s - 200" % col,
            lambda: "CONCAT(%s, 'xyz')" % col,
            lambda: "NULL",
            lambda: "id * 10",
            lambda: "%s / 3" % col,
            lambda: "-%s" % col,
        ])()

    def statement(self):
        rng = self.rng
        self.table, self.spec = rng.choice([("t3", T3), ("t4", T4)])
        table = self.table
        r = rng.random()
        if r < 0.35:
            cols = self.cols()
            verb = rng.choice(["INSERT", "INSERT", "INSERT IGNORE", "REPLACE"])
            sql = "%s INTO %s (%s) VALUES %s" % (verb, table, ", ".join(cols), ", ".join(
                self.row(cols) for _ in range(rng.randint(1, 4))))
            if verb == "INSERT" and rng.random() < 0.4:
                col = rng.choice(list(self.spec))
                sql += " ON DUPLICATE KEY UPDATE %s = %s" % (col, rng.choice([
                    self.set_expr(col), "VALUES(%s)" % col if col in cols else self.value(col)]))
            return sql, table
        if r < 0.45:
            self.table, self.spec = "t3", T3
            cols = rng.sample(["k", "ti", "su", "ch", "vc", "dc", "dt", "db"], rng.randint(1, 3))
            src = {"k": "t1.a", "ti": "t1.a * 10", "su": "t1.f", "ch": "t1.b", "vc": "t1.b",
                   "dc": "t1.c", "dt": "t1.d", "db": "t1.e"}
            verb = rng.choice(["INSERT", "INSERT IGNORE", "REPLACE"])
            return ("%s INTO t3 (id, %s) SELECT t1.id + %d, %s FROM t1 WHERE %s" % (
                verb, ", ".join(cols), rng.randint(0, 20), ", ".join(src[c] for c in cols),
                self.exprs.cond([("t1.id", "int"), ("t1.a", "int"), ("t1.b", "text"), ("t1.c", "dec"),
                                 ("t1.d", "date"), ("t1.e", "dbl")], 2))), "t3"
        if r < 0.75:
            cols = rng.sample(list(self.spec), rng.randint(1, 3))
            sets = ", ".join("%s = %s" % (c, "DEFAULT" if c == "nn" and rng.random() < 0.2
                                          else self.set_expr(c)) for c in cols)
            ignore = "IGNORE " if rng.random() < 0.2 else ""
            sql = "UPDATE %s%s SET %s WHERE %s" % (ignore, table, sets, self.where())
            if rng.random() < 0.3:
                sql += " ORDER BY id%s LIMIT %d" % (rng.choice(["", " DESC"]), rng.randint(0, 4))
            return sql, table
        if r < 0.85:
            sql = "DELETE FROM %s WHERE %s" % (table, self.where())
            if rng.random() < 0.3:
                sql += " ORDER BY id%s LIMIT %d" % (rng.choice(["", " DESC"]), rng.randint(0, 3))
            return sql, table
        if r < 0.93:
            return self.multi_table(), table
        # A write of t1 by the SELECT fuzzer's expressions.
        scope = [("t1.id", "int"), ("t1.a", "int"), ("t1.b", "text"), ("t1.c", "dec"), ("t1.d", "date"),
                 ("t1.e", "dbl"), ("t1.f", "int")]
        col, kind = rng.choice([("a", "num"), ("b", "text"), ("c", "num"), ("e", "num"), ("f", "num")])
        expr = self.exprs.num(scope, 1) if kind == "num" else self.exprs.text(scope, 1)
        return "UPDATE t1 SET %s = %s WHERE %s" % (col, expr, self.exprs.cond(scope, 2)), "t1"


def write(conn, sql):
    try:
        with conn.cursor() as cur:
            affected = cur.execute(sql)
            cur.execute("SHOW WARNINGS")
            codes = sorted(set(r[1] for r in cur.fetchall()))
            return "ok", affected, codes
    except pymysql.err.MySQLError as e:
        return "error", e.args[0] if e.args else None


# What the reads after each write see of t3 and t4 (ENUM and SET columns
# as text and as numbers).
READ_SCOPES = {
    "t3": [("t3.id", "int"), ("t3.k", "int"), ("t3.ti", "int"), ("t3.su", "int"), ("t3.ch", "text"),
           ("t3.vc", "text"), ("t3.dc", "dec"), ("t3.dt", "date"), ("t3.dtm", "date"), ("t3.db", "dbl"),
           ("t3.nn", "int")],
    "t4": [("t4.id", "int"), ("t4.e", "text"), ("t4.e", "int"), ("t4.s", "text"), ("t4.s", "int"),
           ("t4.yr", "int"), ("t4.bt", "int"), ("t4.fl", "dbl"), ("t4.ub", "int"), ("t4.ud", "dec"),
           ("t4.ts", "date"), ("t4.d52", "dbl"), ("t4.mi", "int"), ("t4.tx", "text")],
}


class TxGen:
    """Transaction control between the writes (--transactions), with its
    own generator: the savepoints it has set, as MariaDB keeps them."""

    def __init__(self, rng):
        self.rng = rng
        self.open = False
        self.savepoints = []

    def statement(self):
        rng = self.rng
        r = rng.random()
        if not self.open:
            if r < 0.3:
                self.open = True
                return "BEGIN"
            return None
        if r < 0.08:
            name = "s%d" % rng.randint(1, 4)
            if name in self.savepoints:
                self.savepoints.remove(name)
            self.savepoints.append(name)
            return "SAVEPOINT " + name
        if r < 0.16 and self.savepoints:
            name = rng.choice(self.savepoints)
            del self.savepoints[self.savepoints.index(name) + 1:]
            return "ROLLBACK TO SAVEPOINT " + name
        if r < 0.19 and self.savepoints:
            name = rng.choice(self.savepoints)
            del self.savepoints[self.savepoints.index(name):]
            return "RELEASE SAVEPOINT " + name
        if r < 0.23:
            self.open, self.savepoints = False, []
            return rng.choice(["COMMIT", "COMMIT", "ROLLBACK"])
        return None


def same_tables(conns, n, what, args, differences):
    """Compares every table the writes touch; prints the first ones."""
    for table in ("t1", "t3", "t4"):
        ta = run(conns["skarv"], "SELECT * FROM %s ORDER BY id" % table)
        tb = run(conns["mariadb"], "SELECT * FROM %s ORDER BY id" % table)
        if ta != tb:
            if differences < args.show:
                print("---- after %d: %s: %s differs" % (n, what, table))
                if ta[0] == tb[0] == "rows":
                    print("  rows only in skarv:   %s" % [r for r in ta[1] if r not in tb[1]][:4])
                    print("  rows only in mariadb: %s" % [r for r in tb[1] if r not in ta[1]][:4])
            return False
    return True


def dml(conns, rng, args):
    gen = DmlGen(rng, binary_rng(args, 0), nulls_rng(args, 0))
    control = TxGen(random.Random(args.seed + 2_000_003)) if args.transactions else None
    # The reads draw from their own generator, so that the writes of a
    # seed are the same with or without them.
    reads = Gen(random.Random(args.seed + 1_000_003), binary_rng(args, 1), nulls_rng(args, 1))
    differences = 0
    for n in range(args.queries):
        tx = control.statement() if control else None
        if tx:
            a = write(conns["skarv"], tx)
            b = write(conns["mariadb"], tx)
            if a != b and differences < args.show:
                print("---- statement %d: %s" % (n, tx))
                print("  skarv:   %s" % (a,))
                print("  mariadb: %s" % (b,))
            if a != b or not same_tables(conns, n, tx, args, differences):
                differences += 1
                resync(conns, control)
        sql, table = gen.statement()
        a = write(conns["skarv"], sql)
        b = write(conns["mariadb"], sql)
        if table in READ_SCOPES:
            scope = READ_SCOPES[table]
            items = ", ".join(reads.rng.choice([reads.num, reads.text, reads.num])(scope)
                              for _ in range(reads.rng.randint(1, 3)))
            source = table
            if reads.rng.random() < 0.3:
                # Joined with t1 on the key (and its columns in scope).
                scope = scope + [("t1.a", "int"), ("t1.b", "text"), ("t1.c", "dec"), ("t1.d", "date")]
                source = "%s %s t1 ON t1.id = %s.%s" % (table, reads.rng.choice(["JOIN", "LEFT JOIN"]),
                                                        table, reads.rng.choice(["id", "k" if table == "t3"
                                                                                 else "mi"]))
                items = ", ".join(reads.rng.choice([reads.num, reads.text, reads.num])(scope)
                                  for _ in range(reads.rng.randint(1, 3)))
            read = "SELECT %s FROM %s" % (items, source)
            if reads.rng.random() < 0.6:
                read += " WHERE " + reads.cond(scope)
            ra, rb = answers(conns, read, ordered=False)
            if ra != rb:
                differences += 1
                if differences <= args.show:
                    show("read after %d: %s" % (n, read), ra, rb)
        ta = run(conns["skarv"], "SELECT * FROM %s ORDER BY id" % table)
        tb = run(conns["mariadb"], "SELECT * FROM %s ORDER BY id" % table)
        if a != b or ta != tb:
            differences += 1
            if differences <= args.show:
                print("---- statement %d: %s" % (n, sql))
                print("  skarv:   %s" % (a,))
                print("  mariadb: %s" % (b,))
                if ta != tb and ta[0] == tb[0] == "rows":
                    only_a = [r for r in ta[1] if r not in tb[1]]
                    only_b = [r for r in tb[1] if r not in ta[1]]
                    print("  rows only in skarv:   %s" % only_a[:4])
                    print("  rows only in mariadb: %s" % only_b[:4])
            # The next statement starts from the same rows again.
            if control:
                resync(conns, control)
            for name in ("skarv", "mariadb"):
                with conns[name].cursor() as cur:
                    cur.execute("DELETE FROM %s" % table)
                    if table == "t1":
                        cur.execute("INSERT INTO t1 SELECT * FROM t1_orig")
    print("%d statements (seed %d): %d differ" % (args.queries, args.seed, differences))
    return 1 if differences else 0


def resync(conns, control):
    """After a difference inside a transaction: both roll back, and the
    tables start again from the same rows."""
    control.open, control.savepoints = False, []
    for name in ("skarv", "mariadb"):
        with conns[name].cursor() as cur:
            cur.execute("ROLLBACK")
            for table in ("t3", "t4"):
                cur.execute("DELETE FROM %s" % table)
            cur.execute("DELETE FROM t1")
            cur.execute("INSERT INTO t1 SELECT * FROM t1_orig")


def create_select(conns, rng, args):
    """Each statement a CREATE TABLE … SELECT on both servers: its error
    code or affected rows, then the table's columns (type and NULL-ness,
    as information_schema shows them) and rows are compared; the table
    is dropped before the next."""
    gen = Gen(rng, binary_rng(args, 0), nulls_rng(args, 0))
    differences = 0
    columns = ("SELECT COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE FROM information_schema.COLUMNS"
               " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'ct' ORDER BY ORDINAL_POSITION")
    for n in range(args.queries):
        sql = gen.create_select()
        a = write(conns["skarv"], sql)[:2]
        b = write(conns["mariadb"], sql)[:2]
        ca, cb = run(conns["skarv"], columns), run(conns["mariadb"], columns)
        ra, rb = answers(conns, "SELECT * FROM ct", ordered=False) if a[0] == "ok" else (None, None)
        if a != b or ca != cb or ra != rb:
            differences += 1
            if differences <= args.show:
                print("---- statement %d: %s" % (n, sql))
                print("  skarv:   %s %s" % (a, ca[1] if ca[0] == "rows" else ca))
                print("  mariadb: %s %s" % (b, cb[1] if cb[0] == "rows" else cb))
                if ra != rb:
                    show("rows", ra, rb)
        for name in ("skarv", "mariadb"):
            with conns[name].cursor() as cur:
                cur.execute("DROP TABLE IF EXISTS ct")
    print("%d statements (seed %d): %d differ" % (args.queries, args.seed, differences))
    return 1 if differences else 0


def answers(conns, sql, ordered):
    """Both servers' answers to `sql`, rows as multisets unless `ordered`.
    Ordered answers that differ only in the order of rows whose ORDER BY
    values are equal under utf8mb4_general_ci (case, accents, trailing
    spaces) are the same answer: either order is right."""
    a = run(conns["skarv"], sql)
    b = run(conns["mariadb"], sql)
    if a[0] == b[0] == "rows" and not ordered:
        a, b = ("rows", sortable(a[1])), ("rows", sortable(b[1]))
    elif a[0] == b[0] == "rows" and a != b and folded(a[1]) == folded(b[1]):
        if ordered == "limit" or sortable(a[1]) == sortable(b[1]):
            a = b
    return a, b


def folded(rows):
    """Rows as a general_ci comparison sees their text."""
    def fold(v):
        if not isinstance(v, str):
            return v
        plain = unicodedata.normalize("NFKD", v)
        plain = "".join(c for c in plain if not unicodedata.combining(c))
        return plain.casefold().rstrip(" ")
    return [tuple(fold(v) for v in r) for r in rows]


def show(what, a, b):
    """Prints a difference: the statement and the first rows of each answer."""
    print("---- " + what)
    print("  skarv:   %s" % ((a if a[0] != "rows" else a[1][:8]),))
    print("  mariadb: %s" % ((b if b[0] != "rows" else b[1][:8]),))


def run(conn, sql):
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            return "rows", [tuple(norm(v) for v in r) for r in cur.fetchall()]
    except pymysql.err.MySQLError as e:
        code = e.args[0] if e.args else None
        return "error", code
    except Exception as e:  # a driver that cannot decode a value
        return "exception", type(e).__name__


def sortable(rows):
    return sorted(rows, key=lambda r: tuple((v is None, str(type(v)), v if v is not None else 0) for v in r))


def connect(port):
    return pymysql.connect(host="127.0.0.1", port=port, user="root", autocommit=True,
                           charset="utf8mb4")


def binary_rng(args, stream):
    """The generator of --binary-literals' choices, or None without it."""
    if not args.binary_literals:
        return None
    return random.Random(args.seed * 2 + stream + 7_000_001)


def nulls_rng(args, stream):
    """The generator of --nulls' choices, or None without it."""
    if not args.nulls:
        return None
    return random.Random(args.seed * 2 + stream + 9_000_001)


def set_ops_rng(args):
    """The generator of --set-ops' choices, or None without it."""
    if not args.set_ops:
        return None
    return random.Random(args.seed * 2 + 11_000_001)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--skarv-port", type=int, required=True)
    ap.add_argument("--mariadb-port", type=int, required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--show", type=int, default=20)
    ap.add_argument("--dml", action="store_true", help="writes instead of SELECTs")
    ap.add_argument("--transactions", action="store_true",
                    help="with --dml: the writes inside transactions with savepoints")
    ap.add_argument("--create-select", action="store_true",
                    help="CREATE TABLE … SELECT: the columns' types and the rows compared")
    ap.add_argument("--binary-literals", action="store_true",
                    help="write some text literals as hex literals (0x61, X'61')")
    ap.add_argument("--set-ops", action="store_true",
                    help="EXCEPT and INTERSECT [ALL] among the UNIONs of SELECTs")
    ap.add_argument("--nulls", action="store_true",
                    help="some conditions NULL or constant (three-valued logic)")
    ap.add_argument("--db", default="difffuzz",
                    help="the database to (re)create on both servers; one per concurrent run")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    t1, t2 = rows(rng)
    conns = {}
    for name, port in [("skarv", args.skarv_port), ("mariadb", args.mariadb_port)]:
        c = connect(port)
        with c.cursor() as cur:
            cur.execute("DROP DATABASE IF EXISTS `%s`" % args.db)
            cur.execute("CREATE DATABASE `%s`" % args.db)
            cur.execute("USE `%s`" % args.db)
            for ddl in SCHEMA:
                cur.execute(ddl)
            cur.execute("INSERT INTO t1 VALUES " + ", ".join(
                "(" + ", ".join(literal(v) for v in r) + ")" for r in t1))
            cur.execute("INSERT INTO t2 VALUES " + ", ".join(
                "(" + ", ".join(literal(v) for v in r) + ")" for r in t2))
            cur.execute("CREATE TABLE t1_orig LIKE t1")
            cur.execute("INSERT INTO t1_orig SELECT * FROM t1")
        conns[name] = c
    if args.dml:
        return dml(conns, rng, args)
    if args.create_select:
        return create_select(conns, rng, args)
    gen = Gen(rng, binary_rng(args, 0), nulls_rng(args, 0))
    gen.set_ops = set_ops_rng(args)
    differences = 0
    both_errors = 0
    for n in range(args.queries):
        sql, ordered = gen.query()
        a, b = answers(conns, sql, ordered)
        if a[0] == "error" and b[0] == "error":
            both_errors += 1
        if a != b:
            differences += 1
            if differences <= args.show:
                show("query %d: %s" % (n, sql), a, b)
    print("%d queries (seed %d): %d differ, %d errors on both" % (args.queries, args.seed,
                                                                  differences, both_errors))
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
