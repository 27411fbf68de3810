#!/usr/bin/env python3
"""Seed 001's tuning cases against a SQL node: each case runs a workload two
ways (the lever off and on) for SECONDS with PROCESSES client processes and
prints both rates and their ratio, beside the gain seed 001 reports.

    bench/seed001.py HOST PORT [--seconds S] [--processes N] [--cases a,b,…]

Cases (seed 001's figures in brackets):
  insert16   1 row per INSERT vs 16 rows per INSERT, rows/s            [15×]
  in10       10 primary-key SELECTs vs one IN of 10 keys, rows/s        [6×]
  batching   BEGIN; 11 × INSERT; COMMIT, transaction_allow_batching
             0 vs 1, transactions/s                                     [+80 %]
  autoinc    INSERT into an AUTO_INCREMENT table,
             ndb_autoincrement_prefetch_sz 1 vs the default, rows/s     [2.9×]
  pruned     SELECT … WHERE user_id = ? on a table distributed by
             user_id vs one distributed by id, queries/s                [no figure]
  join       a 2-table join (STRAIGHT_JOIN), 200 rows of a range each
             reaching a row of the other table by primary key, counted
             and summed in the SQL node (one row back),
             ndb_join_pushdown 0 (batched key access) vs 1, joined
             rows/s                                       [large, "AQL"]
Each process has its own connection and its own key range; the tables live
in the database `seed001` (made, and dropped at the end). PyMySQL sends
statements as text (client-side placeholders).
"""

import argparse
import multiprocessing as mp
import sys
import time

import pymysql

ROWS_PER_PROCESS_MAX = 10_000_000


def connect(host, port, db=None):
    return pymysql.connect(host=host, port=port, user="root", database=db, autocommit=True)


def setup(host, port):
    c = connect(host, port)
    cur = c.cursor()
    cur.execute("DROP DATABASE IF EXISTS seed001")
    cur.execute("CREATE DATABASE seed001")
    cur.execute("USE seed001")
    cur.execute("CREATE TABLE ins (id BIGINT PRIMARY KEY, v INT, c CHAR(60))")
    cur.execute("CREATE TABLE rd (id INT PRIMARY KEY, v INT, c CHAR(60))")
    cur.execute("CREATE TABLE ai (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT)")
    cur.execute(
        "CREATE TABLE by_user (user_id INT, id INT, v INT, PRIMARY KEY (user_id, id))"
        " PARTITION BY KEY (user_id)"
    )
    cur.execute(
        "CREATE TABLE by_id (user_id INT, id INT, v INT, PRIMARY KEY (id), KEY (user_id))"
    )
    # A 2-table join: 2,000 rows reach one of 500 by primary key.
    cur.execute("CREATE TABLE jo (id INT PRIMARY KEY, c_id INT, v INT)")
    cur.execute("CREATE TABLE jc (id INT PRIMARY KEY, name CHAR(20))")
    cur.execute("INSERT INTO jc VALUES " + ",".join(f"({i}, 'c{i}')" for i in range(500)))
    for start in range(0, 2_000, 500):
        values = ",".join(f"({i}, {i % 500}, {i})" for i in range(start, start + 500))
        cur.execute(f"INSERT INTO jo VALUES {values}")
    # Rows to read: 10,000 for rd; 100 users × 20 rows for the pruning tables.
    for start in range(0, 10_000, 500):
        values = ",".join(f"({i}, {i}, 'row{i}')" for i in range(start, start + 500))
        cur.execute(f"INSERT INTO rd VALUES {values}")
    for table in ("by_user", "by_id"):
        values = ",".join(
            f"({u}, {u * 20 + i}, {i})" for u in range(100) for i in range(20)
        )
        cur.execute(f"INSERT INTO {table} VALUES {values}")
    c.close()


def worker(args):
    host, port, case, variant, seconds, proc = args
    c = connect(host, port, "seed001")
    cur = c.cursor()
    done = 0
    n = 0
    # Keys of their own for each case, variant and process.
    run = list(CASES).index(case) * 2 + variant
    base = (run * 64 + proc) * ROWS_PER_PROCESS_MAX
    if case == "batching":
        cur.execute(f"SET transaction_allow_batching = {1 if variant else 0}")
    if case == "join":
        cur.execute(f"SET ndb_join_pushdown = {1 if variant else 0}")
    if case == "autoinc" and not variant:
        cur.execute("SET ndb_autoincrement_prefetch_sz = 1")
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if case == "insert16":
            if variant:
                rows = ",".join(f"({base + n + i}, {i}, 'x')" for i in range(16))
                cur.execute(f"INSERT INTO ins VALUES {rows}")
                n += 16
                done += 16
            else:
                cur.execute(f"INSERT INTO ins VALUES ({base + n}, 1, 'x')")
                n += 1
                done += 1
        elif case == "in10":
            first = (proc * 997 + n * 10) % 9_990
            n += 1
            if variant:
                ids = ",".join(str(first + i) for i in range(10))
                cur.execute(f"SELECT c FROM rd WHERE id IN ({ids})")
                done += len(cur.fetchall())
            else:
                for i in range(10):
                    cur.execute(f"SELECT c FROM rd WHERE id = {first + i}")
                    done += len(cur.fetchall())
        elif case == "batching":
            cur.execute("BEGIN")
            for i in range(11):
                cur.execute(f"INSERT INTO ins VALUES ({base + n + i}, {i}, 'b')")
            cur.execute("COMMIT")
            n += 11
            done += 1
        elif case == "autoinc":
            cur.execute("INSERT INTO ai (v) VALUES (1)")
            done += 1
        elif case == "join":
            first = (proc * 131 + n * JOIN_RANGE_ROWS) % (2_000 - JOIN_RANGE_ROWS)
            n += 1
            cur.execute(
                # STRAIGHT_JOIN: the planner's range estimate (a fixed
                # third of the table) would pick a hash join over a scan
                # of jc both ways, and the case would compare nothing.
                # One aggregate row back: with 200 rows a query, PyMySQL's
                # decoding of them bounded both ways alike.
                "SELECT COUNT(*), SUM(LENGTH(jc.name))"
                " FROM jo STRAIGHT_JOIN jc ON jc.id = jo.c_id"
                f" WHERE jo.id BETWEEN {first} AND {first + JOIN_RANGE_ROWS - 1}"
            )
            (count, _), = cur.fetchall()
            assert count == JOIN_RANGE_ROWS, (first, count)
            done += count
        elif case == "pruned":
            user = (proc * 31 + n) % 100
            n += 1
            table = "by_user" if variant else "by_id"
            cur.execute(f"SELECT v FROM {table} WHERE user_id = {user}")
            rows = cur.fetchall()
            assert len(rows) == 20, (table, user, len(rows))
            done += 1
    c.close()
    return done


CASES = {
    # name: (unit, off label, on label, seed 001's gain)
    "insert16": ("rows/s", "1 row/INSERT", "16 rows/INSERT", "15×"),
    "in10": ("rows/s", "10 × pk =", "IN (10 keys)", "6×"),
    "batching": ("tx/s", "batching 0", "batching 1", "1.8×"),
    "autoinc": ("rows/s", "prefetch 1", "prefetch default", "2.9× (1 vs 256)"),
    "pruned": ("queries/s", "by id (all partitions)", "by user_id (one)", "-"),
    "join": ("rows/s", "2-table join not pushed", "pushed", "large (AQL)"),
}
# Rows of the first table per query of the "join" case.
JOIN_RANGE_ROWS = 200


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--processes", type=int, default=8)
    p.add_argument("--cases", default=",".join(CASES))
    a = p.parse_args()
    cases = [c for c in a.cases.split(",") if c]
    for c in cases:
        if c not in CASES:
            sys.exit(f"seed001.py: unknown case {c} (known: {', '.join(CASES)})")
    setup(a.host, a.port)
    print(f"{'case':10} {'off':>24} {'on':>24} {'on/off':>7}  seed 001")
    with mp.Pool(a.processes) as pool:
        for case in cases:
            unit, off_label, on_label, seed = CASES[case]
            rates = []
            for variant in (0, 1):
                jobs = [(a.host, a.port, case, variant, a.seconds, i) for i in range(a.processes)]
                started = time.monotonic()
                total = sum(pool.map(worker, jobs))
                rates.append(total / (time.monotonic() - started))
            ratio = rates[1] / rates[0] if rates[0] else float("inf")
            print(
                f"{case:10} {rates[0]:>12.0f} {unit:>11} {rates[1]:>12.0f} {unit:>11} {ratio:>6.2f}×"
                f"  {seed}   ({off_label} vs {on_label})"
            )
    c = connect(a.host, a.port)
    c.cursor().execute("DROP DATABASE seed001")
    c.close()


if __name__ == "__main__":
    main()
