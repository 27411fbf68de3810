#!/usr/bin/env python3
"""Loads the customers/orders data set into a server and times queries
on it (bench/queries-compare.sh runs it against each system).

    queries-compare.py load PORT CUSTOMERS ORDERS
    queries-compare.py time PORT RUNS QUERIES_FILE OUT_JSON

`load`: 1,000-row customers (id, name, country; a key on country) and
orders (id, customer_id, created, amount DECIMAL(10,2), status; keys on
customer_id and created) from a fixed seed, so every system holds the
same rows; then ANALYZE TABLE. `time`: each query's best time of RUNS
runs over one connection (PyMySQL), and its answer, written as JSON.
"""

import json
import random
import sys
import time

import pymysql

COUNTRIES = ["SE", "NO", "DK", "FI", "DE", "FR", "UK", "US", "ES", "IT"]
STATUSES = ["new", "paid", "shipped", "done", "cancel"]
INSERT_ROWS = 1000


def connect(port, database=None):
    return pymysql.connect(host="127.0.0.1", port=port, user="root",
                           database=database, autocommit=True)


def load(port, customers, orders):
    cur = connect(port).cursor()
    cur.execute("DROP DATABASE IF EXISTS qbench")
    cur.execute("CREATE DATABASE qbench")
    cur.execute("USE qbench")
    cur.execute("CREATE TABLE customers (id INT PRIMARY KEY, name VARCHAR(40),"
                " country VARCHAR(20), KEY (country))")
    cur.execute("CREATE TABLE orders (id INT PRIMARY KEY, customer_id INT, created DATETIME,"
                " amount DECIMAL(10,2), status VARCHAR(10), KEY (customer_id), KEY (created))")
    rows = [(i, "cust%d" % i, COUNTRIES[i % len(COUNTRIES)]) for i in range(1, customers + 1)]
    for at in range(0, len(rows), INSERT_ROWS):
        cur.executemany("INSERT INTO customers VALUES (%s, %s, %s)", rows[at:at + INSERT_ROWS])
    rng = random.Random(1)
    for first in range(1, orders + 1, INSERT_ROWS):
        batch = []
        for i in range(first, min(first + INSERT_ROWS, orders + 1)):
            created = "2024-%02d-%02d %02d:%02d:00" % (rng.randint(1, 12), rng.randint(1, 28),
                                                       rng.randint(0, 23), rng.randint(0, 59))
            batch.append((i, rng.randint(1, customers), created,
                          rng.randint(100, 100000) / 100, rng.choice(STATUSES)))
        cur.executemany("INSERT INTO orders VALUES (%s, %s, %s, %s, %s)", batch)
    for table in ("customers", "orders"):
        cur.execute("ANALYZE TABLE " + table)
        cur.fetchall()


def timed(port, runs, queries_file, out):
    queries = [line.strip() for line in open(queries_file)
               if line.strip() and not line.startswith("#")]
    cur = connect(port, "qbench").cursor()
    results = []
    for query in queries:
        best = None
        for _ in range(runs):
            started = time.perf_counter()
            cur.execute(query)
            rows = cur.fetchall()
            took = time.perf_counter() - started
            best = took if best is None else min(best, took)
        answer = [[None if v is None else str(v) for v in row] for row in rows]
        if " ORDER BY " not in query.upper():
            answer.sort(key=lambda r: [(v is None, v or "") for v in r])
        results.append({"query": query, "seconds": best, "answer": answer})
    json.dump(results, open(out, "w"))


def main():
    if sys.argv[1] == "load":
        load(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
    elif sys.argv[1] == "time":
        timed(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5])
    else:
        sys.exit("queries-compare.py load|time …")


if __name__ == "__main__":
    main()
