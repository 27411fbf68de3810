#!/usr/bin/env bash
# The SQL test suite: each tests/sql/NAME.test (mysqltest's language) runs
# against a MySQL server with `mysqltest`, and its output must equal
# NAME.result, recorded against MariaDB (see README.md in this directory).
#
#   tests/sql/run.sh [--record] [--ps] [--host H] [--port P] [--user U] [NAME...]
#
# Without names, every .test file runs. Each file's outcome is printed
# ("pass NAME" / "FAIL NAME" with the start of its difference), then a count;
# the status is 0 only when every file passed. --record rewrites the .result
# files from the server's output instead (record against MariaDB only).
# --ps runs every statement through the prepared-statement protocol
# (mysqltest --ps-protocol: binary results), against the same .result files.
# Environment: MYSQLTEST (the mysqltest binary), MYSQL (the mysql client),
# SQL_TEST_LOGS (where outputs and .reject files go; a new directory under
# /tmp by default), SQL_TEST_TIMEOUT_S (per file, default 120).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
host=127.0.0.1
port=3306
user=root
record=0
ps=0
names=()
while [ $# -gt 0 ]; do
    case "$1" in
    --record) record=1 ;;
    --ps) ps=1 ;;
    --host) host="$2"; shift ;;
    --port) port="$2"; shift ;;
    --user) user="$2"; shift ;;
    -h | --help) sed -n '2,17p' "$0"; exit 0 ;;
    -*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
    *) names+=("${1%.test}") ;;
    esac
    shift
done

MYSQLTEST="${MYSQLTEST:-$(command -v mysqltest || command -v mariadb-test || true)}"
MYSQL="${MYSQL:-$(command -v mysql || command -v mariadb || true)}"
if [ -z "$MYSQLTEST" ] || [ -z "$MYSQL" ]; then
    echo "run.sh: needs mysqltest and mysql (Debian: apt-get install mariadb-test mariadb-client)" >&2
    exit 2
fi
timeout_s="${SQL_TEST_TIMEOUT_S:-120}"
logs="${SQL_TEST_LOGS:-$(mktemp -d /tmp/skarv-sql-tests.XXXXXX)}"
mkdir -p "$logs"
# Where tests write their files (mysqltest's $MYSQL_TMP_DIR, as in MariaDB's suite):
# LOAD DATA reads them, so the server must run on this host.
export MYSQL_TMP_DIR="$logs"

if [ ${#names[@]} -eq 0 ]; then
    for file in "$here"/*.test; do
        names+=("$(basename "$file" .test)")
    done
fi

# mysqltest connects to a database: each file makes its own, but the first
# connection needs one that exists.
start_db=sqltest
if ! timeout "$timeout_s" "$MYSQL" --host="$host" --port="$port" --user="$user" \
    -e "CREATE DATABASE IF NOT EXISTS $start_db" >"$logs/setup.log" 2>&1; then
    echo "run.sh: cannot reach the server on $host:$port: $(tail -1 "$logs/setup.log")" >&2
    echo "0 passed, ${#names[@]} failed (no server)"
    exit 1
fi

passed=0
failed=()
for name in "${names[@]}"; do
    test_file="$here/$name.test"
    result_file="$here/$name.result"
    if [ ! -f "$test_file" ]; then
        echo "FAIL $name: no such file $test_file"
        failed+=("$name")
        continue
    fi
    args=(--host="$host" --port="$port" --user="$user" --database="$start_db"
        --test-file="$test_file" --result-file="$result_file"
        --logdir="$logs" --tmpdir="$logs" --silent)
    if [ "$ps" -eq 1 ]; then
        args+=(--ps-protocol)
    fi
    if [ "$record" -eq 1 ]; then
        args+=(--record)
    elif [ ! -f "$result_file" ]; then
        echo "FAIL $name: no $name.result (record it against MariaDB with --record)"
        failed+=("$name")
        continue
    fi
    status=0
    timeout "$timeout_s" "$MYSQLTEST" "${args[@]}" >"$logs/$name.out" 2>&1 || status=$?
    # mysqltest leaves the output that differed beside the .result: move it
    # to the logs, out of the source tree.
    if [ -f "$here/$name.reject" ]; then
        mv "$here/$name.reject" "$logs/$name.reject"
    fi
    if [ "$status" -eq 0 ]; then
        echo "pass $name"
        passed=$((passed + 1))
    else
        case "$status" in
        124) why="timed out after ${timeout_s} s" ;;
        *) why="mysqltest exit status $status" ;;
        esac
        echo "FAIL $name ($why; output in $logs/$name.out, $name.reject beside it)"
        sed -n '1,15p' "$logs/$name.out" | sed 's/^/    /'
        failed+=("$name")
    fi
done

echo "${passed} passed, ${#failed[@]} failed${failed[*]:+: ${failed[*]}}"
[ ${#failed[@]} -eq 0 ]
