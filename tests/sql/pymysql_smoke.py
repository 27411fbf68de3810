#!/usr/bin/env python3
"""PyMySQL against a MySQL server (Skarv's SQL node, or MariaDB to check
this script): connect, create, insert and select with parameters, a
transaction committed and one rolled back, LOAD DATA LOCAL of a file of
the client's, and the error codes a driver maps to its exceptions. Exits 0 when everything held, else 1 naming the
first check that failed.

    tests/sql/pymysql_smoke.py --host 127.0.0.1 --port 21864 [--user root]
"""

import argparse
import datetime
import decimal
import os
import sys
import tempfile

import pymysql

DATABASE = "sq_pymysql"
CONNECT_TIMEOUT_S = 10


def check(what, got, want):
    if got != want:
        raise AssertionError(f"{what}: got {got!r}, want {want!r}")


def expect_error(cursor, code, sql, args=None):
    try:
        cursor.execute(sql, args)
    except pymysql.MySQLError as error:
        check(f"error code of {sql!r}", error.args[0], code)
        return
    raise AssertionError(f"{sql!r} succeeded; want error {code}")


def run(options):
    connect = dict(
        host=options.host,
        port=options.port,
        user=options.user,
        password=options.password,
        connect_timeout=CONNECT_TIMEOUT_S,
        charset="utf8mb4",
        autocommit=True,
    )
    db = pymysql.connect(**connect)
    with db.cursor() as c:
        c.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
        c.execute(f"CREATE DATABASE {DATABASE}")
        c.execute(f"USE {DATABASE}")
        c.execute(
            "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(20) NOT NULL,"
            " price DECIMAL(8,2), made DATETIME, data VARBINARY(16), n BIGINT UNSIGNED)"
        )
        check(
            "insert one row",
            c.execute(
                "INSERT INTO items VALUES (%s, %s, %s, %s, %s, %s)",
                (1, "kaffe", decimal.Decimal("12.50"), datetime.datetime(2024, 5, 17, 8, 0),
                 b"\x00\x01\xff", 18446744073709551615),
            ),
            1,
        )
        rows = [(i, f"item {i}", decimal.Decimal(i) / 4, None, None, i) for i in range(2, 12)]
        check("executemany", c.executemany(
            "INSERT INTO items VALUES (%s, %s, %s, %s, %s, %s)", rows), 10)
        c.execute("SELECT id, name, price, made, data, n FROM items WHERE id = %s", (1,))
        check(
            "select by key, decoded types",
            c.fetchall(),
            ((1, "kaffe", decimal.Decimal("12.50"), datetime.datetime(2024, 5, 17, 8, 0),
              b"\x00\x01\xff", 18446744073709551615),),
        )
        c.execute("SELECT id FROM items WHERE id IN %s ORDER BY id", ((3, 5, 99),))
        check("select IN list", c.fetchall(), ((3,), (5,)))
        c.execute("SELECT COUNT(*), SUM(n) FROM items WHERE id BETWEEN %s AND %s", (2, 11))
        check("aggregate over a range", c.fetchone(), (10, decimal.Decimal(65)))
        c.execute("SELECT name FROM items WHERE name = %s", ("it's \"quoted\"",))
        check("quoted parameter matches nothing", c.fetchall(), ())
        check("update", c.execute("UPDATE items SET price = price * 2 WHERE id = %s", (2,)), 1)
        check("delete", c.execute("DELETE FROM items WHERE id = %s", (11,)), 1)

        expect_error(c, 1062, "INSERT INTO items (id, name) VALUES (%s, %s)", (1, "again"))
        expect_error(c, 1146, "SELECT * FROM no_such_table")
        expect_error(c, 1054, "SELECT no_such_column FROM items")
        expect_error(c, 1064, "SELEC 1")
        expect_error(c, 1048, "INSERT INTO items (id, name) VALUES (%s, %s)", (50, None))
        expect_error(c, 1406, "INSERT INTO items (id, name) VALUES (%s, %s)", (51, "x" * 21))

    # A transaction rolled back, then one committed, seen from a second connection.
    db.autocommit(False)
    other = pymysql.connect(database=DATABASE, **connect)
    with db.cursor() as c, other.cursor() as o:
        c.execute("INSERT INTO items (id, name) VALUES (%s, %s)", (100, "rolled back"))
        o.execute("SELECT COUNT(*) FROM items WHERE id = 100")
        check("uncommitted row unseen by another connection", o.fetchone(), (0,))
        db.rollback()
        c.execute("SELECT COUNT(*) FROM items WHERE id = 100")
        check("rolled back row gone", c.fetchone(), (0,))
        c.execute("INSERT INTO items (id, name) VALUES (%s, %s)", (101, "committed"))
        db.commit()
        o.execute("SELECT name FROM items WHERE id = 101")
        check("committed row seen by another connection", o.fetchone(), ("committed",))
    db.autocommit(True)
    other.close()

    # LOAD DATA LOCAL: the driver sends a file of its host when asked.
    path = os.path.join(tempfile.mkdtemp(prefix="pymysql-smoke-"), "items.csv")
    with open(path, "w") as f:
        f.write('200,"local, one",1.5\n201,\\N,2.5\n')
    loader = pymysql.connect(database=DATABASE, local_infile=True, **connect)
    with loader.cursor() as c:
        check(
            "rows of LOAD DATA LOCAL",
            c.execute(
                f"LOAD DATA LOCAL INFILE '{path}' INTO TABLE items"
                " FIELDS TERMINATED BY ',' OPTIONALLY ENCLOSED BY '\"' (id, name, price)"
            ),
            2,
        )
        c.execute("SELECT name, price FROM items WHERE id >= 200 ORDER BY id")
        check(
            "rows loaded",
            c.fetchall(),
            (("local, one", decimal.Decimal("1.50")), ("", decimal.Decimal("2.50"))),
        )
        c.execute("DELETE FROM items WHERE id >= 200")
    loader.close()
    os.remove(path)

    with db.cursor() as c:
        c.execute("SELECT COUNT(*) FROM items")
        check("rows at the end", c.fetchone(), (11,))
        c.execute(f"DROP DATABASE {DATABASE}")
    db.ping(reconnect=False)
    db.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=3306)
    parser.add_argument("--user", default="root")
    parser.add_argument("--password", default="")
    options = parser.parse_args()
    try:
        run(options)
    except (AssertionError, pymysql.MySQLError, OSError) as error:
        print(f"pymysql_smoke: FAIL: {error}", file=sys.stderr)
        return 1
    print("pymysql_smoke: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
