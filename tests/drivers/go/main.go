// Command drivers-go exercises Go's github.com/go-sql-driver/mysql against a
// MySQL server (Skarv's SQL node, or MySQL/MariaDB as the reference) the way
// applications use it: logins, DDL, placeholders (server-side prepared and
// interpolated), every column type read back natively, transactions,
// generated keys, error codes, a pool of parallel connections, ping and
// multiple result sets. It prints "drivers-go: ok" at the end, or names the
// failing check and exits non-zero.
//
// Usage: go run . -host 127.0.0.1 -port 3306 (or DRIVERS_HOST/DRIVERS_PORT).
package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
)

// The database the checks create and drop.
const testDB = "drivers_go"

// Connections of the pool check, and statements each runs.
const (
	poolConns        = 8
	poolRowsPerConn  = 40
	connectTimeoutS  = 10
	statementTimeout = 60 * time.Second
)

var host, port string

func main() {
	flag.StringVar(&host, "host", envOr("DRIVERS_HOST", "127.0.0.1"), "server host")
	flag.StringVar(&port, "port", envOr("DRIVERS_PORT", "3306"), "server port")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 5*statementTimeout)
	defer cancel()
	if err := run(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "drivers-go: FAILED: %v\n", err)
		os.Exit(1)
	}
	fmt.Println("drivers-go: ok")
}

func envOr(name, dflt string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return dflt
}

// dsn is a DSN for user/password with extra options (k=v&…).
func dsn(user, password, db, options string) string {
	cfg := mysql.NewConfig()
	cfg.User = user
	cfg.Passwd = password
	cfg.Net = "tcp"
	cfg.Addr = host + ":" + port
	cfg.DBName = db
	cfg.Timeout = connectTimeoutS * time.Second
	s := cfg.FormatDSN()
	if options != "" {
		if strings.Contains(s, "?") {
			s += "&" + options
		} else {
			s += "?" + options
		}
	}
	return s
}

func open(user, password, db, options string) (*sql.DB, error) {
	d, err := sql.Open("mysql", dsn(user, password, db, options))
	if err != nil {
		return nil, err
	}
	return d, nil
}

// check wraps an error with the name of the check that failed.
func check(name string, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

func run(ctx context.Context) error {
	root, err := open("root", "", "", "parseTime=true")
	if err != nil {
		return check("open root", err)
	}
	defer root.Close()
	if err := root.PingContext(ctx); err != nil {
		return check("ping as root without a password", err)
	}
	var version string
	if err := root.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return check("SELECT VERSION()", err)
	}
	mariadb := strings.Contains(version, "MariaDB")
	for _, stmt := range []string{
		"DROP DATABASE IF EXISTS " + testDB,
		"CREATE DATABASE " + testDB,
	} {
		if _, err := root.ExecContext(ctx, stmt); err != nil {
			return check(stmt, err)
		}
	}
	steps := []struct {
		name string
		f    func(context.Context, bool) error
	}{
		{"logins", checkLogins},
		{"types", checkTypes},
		{"transactions", checkTransactions},
		{"generated keys", checkGeneratedKeys},
		{"error codes", checkErrors},
		{"pool", checkPool},
		{"multiple result sets", checkMultiResults},
	}
	for _, s := range steps {
		if err := s.f(ctx, mariadb); err != nil {
			return check(s.name, err)
		}
	}
	if _, err := root.ExecContext(ctx, "DROP DATABASE "+testDB); err != nil {
		return check("DROP DATABASE", err)
	}
	return nil
}

// checkLogins creates users with each password plugin and logs in as them.
func checkLogins(ctx context.Context, mariadb bool) error {
	root, err := open("root", "", testDB, "")
	if err != nil {
		return err
	}
	defer root.Close()
	plugins := []string{"mysql_native_password"}
	if !mariadb { // MariaDB has no caching_sha2_password
		plugins = append(plugins, "caching_sha2_password")
	}
	for i, plugin := range plugins {
		user := fmt.Sprintf("drv_go_%d", i)
		password := "pw-" + plugin
		identified := "IDENTIFIED WITH " + plugin + " BY '" + password + "'"
		if mariadb { // MariaDB spells it IDENTIFIED VIA; BY alone is native
			identified = "IDENTIFIED BY '" + password + "'"
		}
		for _, stmt := range []string{
			"DROP USER IF EXISTS '" + user + "'@'%'",
			"CREATE USER '" + user + "'@'%' " + identified,
			"GRANT ALL ON " + testDB + ".* TO '" + user + "'@'%'",
		} {
			if _, err := root.ExecContext(ctx, stmt); err != nil {
				return check(stmt, err)
			}
		}
		d, err := open(user, password, testDB, "")
		if err != nil {
			return err
		}
		var current string
		err = d.QueryRowContext(ctx, "SELECT CURRENT_USER()").Scan(&current)
		d.Close()
		if err != nil {
			return check("login as "+user+" ("+plugin+")", err)
		}
		if current != user+"@%" {
			return fmt.Errorf("CURRENT_USER() as %s is %q", user, current)
		}
		bad, _ := open(user, "wrong", testDB, "")
		err = bad.PingContext(ctx)
		bad.Close()
		if code := errorCode(err); code != 1045 {
			return fmt.Errorf("a wrong password for %s (%s): want 1045, got %v", user, plugin, err)
		}
		if _, err := root.ExecContext(ctx, "DROP USER '"+user+"'@'%'"); err != nil {
			return check("DROP USER", err)
		}
	}
	return nil
}

func errorCode(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

const typesTable = `CREATE TABLE types (
  id INT PRIMARY KEY,
  ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, siu SMALLINT UNSIGNED,
  mi MEDIUMINT, i INT, iu INT UNSIGNED, bi BIGINT, biu BIGINT UNSIGNED,
  de DECIMAL(20,6), f FLOAT, d DOUBLE,
  c CHAR(5), vc VARCHAR(50), tx TEXT, bl BLOB, bn BINARY(4), vb VARBINARY(10),
  dt DATE, tm TIME, dtm DATETIME(6), ts TIMESTAMP NULL DEFAULT NULL, y YEAR,
  e ENUM('a','b','c'), st SET('x','y','z'))`

const typesColumns = "id, ti, tiu, si, siu, mi, i, iu, bi, biu, de, f, d, c, vc, tx, bl, bn, vb, " +
	"dt, tm, dtm, ts, y, e, st"

// The database type names the driver reports for the columns of `types`
// (from the field types and flags the server sends).
var typesNames = []string{"INT", "TINYINT", "UNSIGNED TINYINT", "SMALLINT", "UNSIGNED SMALLINT",
	"MEDIUMINT", "INT", "UNSIGNED INT", "BIGINT", "UNSIGNED BIGINT", "DECIMAL", "FLOAT",
	"DOUBLE", "CHAR", "VARCHAR", "TEXT", "BLOB", "BINARY", "VARBINARY", "DATE", "TIME",
	"DATETIME", "TIMESTAMP", "YEAR", "ENUM", "SET"}

// A row of `types`, as written and as read back.
type typesRow struct {
	id         int32
	ti         int8
	tiu        uint8
	si         int16
	siu        uint16
	mi, i      int32
	iu         uint32
	bi         int64
	biu        uint64
	de         string
	f          float32
	d          float64
	c, vc, tx  string
	bl, bn, vb []byte
	dt         time.Time
	tm         string
	dtm, ts    time.Time
	y          int16
	e, st      string
}

func (r *typesRow) args() []any {
	return []any{r.id, r.ti, r.tiu, r.si, r.siu, r.mi, r.i, r.iu, r.bi, r.biu, r.de, r.f, r.d,
		r.c, r.vc, r.tx, r.bl, r.bn, r.vb, r.dt, r.tm, r.dtm, r.ts, r.y, r.e, r.st}
}

func (r *typesRow) dests() []any {
	return []any{&r.id, &r.ti, &r.tiu, &r.si, &r.siu, &r.mi, &r.i, &r.iu, &r.bi, &r.biu, &r.de,
		&r.f, &r.d, &r.c, &r.vc, &r.tx, &r.bl, &r.bn, &r.vb, &r.dt, &r.tm, &r.dtm, &r.ts, &r.y,
		&r.e, &r.st}
}

func sampleRows() []typesRow {
	utc := time.UTC
	return []typesRow{
		{1, math.MinInt8, 0, math.MinInt16, 0, -8388608, math.MinInt32, 0, math.MinInt64, 0,
			"-12345678901234.123456", -1.5, -1e100, "ab", "hello", "some text",
			[]byte{0, 1, 2, 255}, []byte{'x', 'y', 0, 0}, []byte{},
			time.Date(1000, 1, 1, 0, 0, 0, 0, utc), "-838:59:59",
			time.Date(1000, 1, 1, 0, 0, 0, 0, utc), time.Date(1970, 1, 1, 0, 0, 1, 0, utc),
			1901, "a", ""},
		{2, math.MaxInt8, math.MaxUint8, math.MaxInt16, math.MaxUint16, 8388607, math.MaxInt32,
			math.MaxUint32, math.MaxInt64, math.MaxUint64, "99999999999999.999999", 3.25,
			2.5e-300, "åäö", "€ and ✓", strings.Repeat("t", 3000), bytes.Repeat([]byte{7}, 60000),
			[]byte{1, 2, 0xFE, 0xFF}, []byte("bin\x00"),
			time.Date(9999, 12, 31, 0, 0, 0, 0, utc), "838:59:59",
			time.Date(9999, 12, 31, 23, 59, 59, 999999000, utc),
			time.Date(2038, 1, 19, 3, 14, 7, 0, utc), 2155, "c", "x,z"},
		{3, 0, 1, 0, 1, 0, 0, 1, 0, 1, "0.000001", 0, 0, "", "", "", []byte{}, []byte{0, 0, 0, 0},
			[]byte{}, time.Date(2024, 2, 29, 0, 0, 0, 0, utc), "12:34:56",
			time.Date(2024, 2, 29, 12, 34, 56, 123456000, utc),
			time.Date(2024, 2, 29, 12, 34, 56, 0, utc), 2024, "b", "x,y,z"},
	}
}

func equalRows(a, b *typesRow) bool {
	return fmt.Sprintf("%#v", a.args()) == fmt.Sprintf("%#v", b.args())
}

// checkTypes writes rows with placeholders, server-side prepared and
// interpolated, and reads every column back natively, over the text and
// the binary protocol.
func checkTypes(ctx context.Context, _ bool) error {
	prepared, err := open("root", "", testDB, "parseTime=true&loc=UTC&time_zone=%27%2B00%3A00%27")
	if err != nil {
		return err
	}
	defer prepared.Close()
	interpolated, err := open("root", "", testDB,
		"parseTime=true&loc=UTC&interpolateParams=true&time_zone=%27%2B00%3A00%27")
	if err != nil {
		return err
	}
	defer interpolated.Close()
	if _, err := prepared.ExecContext(ctx, typesTable); err != nil {
		return check("CREATE TABLE types", err)
	}
	insert := "INSERT INTO types (" + typesColumns + ") VALUES (" +
		strings.TrimSuffix(strings.Repeat("?, ", 26), ", ") + ")"
	rows := sampleRows()
	for i := range rows {
		db := prepared
		how := "server-side prepared"
		if i%2 == 1 {
			db, how = interpolated, "interpolated"
		}
		if _, err := db.ExecContext(ctx, insert, rows[i].args()...); err != nil {
			return check(fmt.Sprintf("insert row %d (%s)", rows[i].id, how), err)
		}
	}
	if _, err := prepared.ExecContext(ctx, "INSERT INTO types (id) VALUES (?)", 4); err != nil {
		return check("insert a row of NULLs", err)
	}
	for _, mode := range []struct {
		name string
		db   *sql.DB
		args []any
	}{
		{"text protocol", prepared, nil},
		{"binary protocol", prepared, []any{0}},
		{"interpolated", interpolated, []any{0}},
	} {
		q := "SELECT " + typesColumns + " FROM types WHERE id < 4 ORDER BY id"
		if mode.args != nil {
			q = "SELECT " + typesColumns + " FROM types WHERE id > ? AND id < 4 ORDER BY id"
		}
		rs, err := mode.db.QueryContext(ctx, q, mode.args...)
		if err != nil {
			return check("select ("+mode.name+")", err)
		}
		cts, err := rs.ColumnTypes()
		if err != nil {
			return err
		}
		for i, ct := range cts {
			if ct.DatabaseTypeName() != typesNames[i] {
				rs.Close()
				return fmt.Errorf("%s: column %s is %s, want %s", mode.name, ct.Name(),
					ct.DatabaseTypeName(), typesNames[i])
			}
		}
		n := 0
		for rs.Next() {
			var got typesRow
			if err := rs.Scan(got.dests()...); err != nil {
				rs.Close()
				return check(fmt.Sprintf("scan row %d (%s)", n+1, mode.name), err)
			}
			want := rows[n]
			if !equalRows(&got, &want) {
				rs.Close()
				return fmt.Errorf("%s: row %d read back as\n%#v\nwant\n%#v", mode.name, n+1,
					got.args(), want.args())
			}
			n++
		}
		if err := rs.Err(); err != nil {
			return check("rows ("+mode.name+")", err)
		}
		rs.Close()
		if n != len(rows) {
			return fmt.Errorf("%s: %d rows, want %d", mode.name, n, len(rows))
		}
		// The row of NULLs: every column scans into a Null* (or nil bytes).
		var (
			ni  sql.NullInt64
			nf  sql.NullFloat64
			ns  sql.NullString
			nb  []byte
			nt  sql.NullTime
			ndt sql.NullTime
		)
		q = "SELECT bi, d, vc, bl, dtm, dt FROM types WHERE id = 4"
		var a []any
		if mode.args != nil {
			q, a = "SELECT bi, d, vc, bl, dtm, dt FROM types WHERE id = ?", []any{4}
		}
		err = mode.db.QueryRowContext(ctx, q, a...).Scan(&ni, &nf, &ns, &nb, &nt, &ndt)
		if err != nil {
			return check("the row of NULLs ("+mode.name+")", err)
		}
		if ni.Valid || nf.Valid || ns.Valid || nb != nil || nt.Valid || ndt.Valid {
			return fmt.Errorf("%s: the row of NULLs read back as %v %v %v %v %v %v", mode.name,
				ni, nf, ns, nb, nt, ndt)
		}
	}
	return nil
}

// checkTransactions: BeginTx, commit and rollback, and an isolation level.
func checkTransactions(ctx context.Context, _ bool) error {
	db, err := open("root", "", testDB, "")
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE TABLE tx (id INT PRIMARY KEY, v VARCHAR(10))"); err != nil {
		return check("CREATE TABLE tx", err)
	}
	count := func() (int, error) {
		var n int
		err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM tx").Scan(&n)
		return n, err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return check("BeginTx", err)
	}
	for i := 1; i <= 3; i++ {
		if _, err := tx.ExecContext(ctx, "INSERT INTO tx VALUES (?, ?)", i, "v"); err != nil {
			return check("insert in a transaction", err)
		}
	}
	// By key: a scan of Skarv's does not see its transaction's own
	// uncommitted inserts yet (docs/sql.md).
	var inside int
	err = tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM tx WHERE id IN (1, 2, 3)").Scan(&inside)
	if err != nil {
		return check("read own writes", err)
	}
	if inside != 3 {
		return fmt.Errorf("a transaction sees %d of its own 3 rows", inside)
	}
	if n, err := count(); err != nil || n != 0 {
		return fmt.Errorf("another connection sees %d uncommitted rows (%v)", n, err)
	}
	if err := tx.Rollback(); err != nil {
		return check("Rollback", err)
	}
	if n, err := count(); err != nil || n != 0 {
		return fmt.Errorf("%d rows after rollback (%v)", n, err)
	}
	tx, err = db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return check("BeginTx READ COMMITTED", err)
	}
	stmt, err := tx.PrepareContext(ctx, "INSERT INTO tx VALUES (?, ?)")
	if err != nil {
		return check("Prepare in a transaction", err)
	}
	for i := 1; i <= 3; i++ {
		if _, err := stmt.ExecContext(ctx, i, fmt.Sprint("c", i)); err != nil {
			return check("prepared insert in a transaction", err)
		}
	}
	stmt.Close()
	if err := tx.Commit(); err != nil {
		return check("Commit", err)
	}
	if n, err := count(); err != nil || n != 3 {
		return fmt.Errorf("%d rows after commit, want 3 (%v)", n, err)
	}
	ro, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return check("BeginTx read only", err)
	}
	var v string
	if err := ro.QueryRowContext(ctx, "SELECT v FROM tx WHERE id = ?", 2).Scan(&v); err != nil {
		return check("read in a read-only transaction", err)
	}
	if v != "c2" {
		return fmt.Errorf("read %q in a read-only transaction, want c2", v)
	}
	return check("Commit read only", ro.Commit())
}

// checkGeneratedKeys: LastInsertId over both protocols, LAST_INSERT_ID().
func checkGeneratedKeys(ctx context.Context, _ bool) error {
	db, err := open("root", "", testDB, "")
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // LAST_INSERT_ID() is the connection's
	if _, err := db.ExecContext(ctx,
		"CREATE TABLE ai (id BIGINT UNSIGNED AUTO_INCREMENT PRIMARY KEY, v INT)"); err != nil {
		return check("CREATE TABLE ai", err)
	}
	res, err := db.ExecContext(ctx, "INSERT INTO ai (v) VALUES (1)")
	if err != nil {
		return check("insert (text)", err)
	}
	first, err := res.LastInsertId()
	if err != nil || first < 1 {
		return fmt.Errorf("LastInsertId (text) %d, %v", first, err)
	}
	res, err = db.ExecContext(ctx, "INSERT INTO ai (v) VALUES (?), (?), (?)", 2, 3, 4)
	if err != nil {
		return check("insert (prepared)", err)
	}
	id, err := res.LastInsertId()
	if err != nil || id <= first {
		return fmt.Errorf("LastInsertId (prepared) %d after %d, %v", id, first, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 3 {
		return fmt.Errorf("RowsAffected %d, want 3 (%v)", n, err)
	}
	var last int64
	if err := db.QueryRowContext(ctx, "SELECT LAST_INSERT_ID()").Scan(&last); err != nil {
		return check("SELECT LAST_INSERT_ID()", err)
	}
	if last != id {
		return fmt.Errorf("LAST_INSERT_ID() %d, LastInsertId %d", last, id)
	}
	var v int
	if err := db.QueryRowContext(ctx, "SELECT v FROM ai WHERE id = ?", id).Scan(&v); err != nil || v != 2 {
		return fmt.Errorf("the first row of the multi-row insert has v %d (%v), want 2", v, err)
	}
	return nil
}

// checkErrors: the server's codes reach the driver as MySQLError.Number.
func checkErrors(ctx context.Context, _ bool) error {
	for _, options := range []string{"", "interpolateParams=true"} {
		db, err := open("root", "", testDB, options)
		if err != nil {
			return err
		}
		for _, c := range []struct {
			query string
			args  []any
			code  uint16
			state string
		}{
			{"INSERT INTO tx VALUES (?, ?)", []any{1, "dup"}, 1062, "23000"},
			{"INSERT INTO tx VALUES (1, 'dup')", nil, 1062, "23000"},
			{"SELECT * FROM no_such_table WHERE id = ?", []any{1}, 1146, "42S02"},
			{"SELECT * FROM no_such_table", nil, 1146, "42S02"},
			{"SELEKT 1", nil, 1064, "42000"},
			{"SELECT * FROM tx WHERE id = ? ORDER", []any{1}, 1064, "42000"},
		} {
			_, err := db.ExecContext(ctx, c.query, c.args...)
			var me *mysql.MySQLError
			if !errors.As(err, &me) || me.Number != c.code || string(me.SQLState[:]) != c.state {
				db.Close()
				return fmt.Errorf("%q (%s): want %d (%s), got %v", c.query, options, c.code,
					c.state, err)
			}
		}
		// The connection is still good after the errors.
		err = db.PingContext(ctx)
		db.Close()
		if err != nil {
			return check("ping after errors", err)
		}
	}
	return nil
}

// checkPool: database/sql's pool, several connections at once.
func checkPool(ctx context.Context, _ bool) error {
	db, err := open("root", "", testDB, "")
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(poolConns)
	db.SetMaxIdleConns(poolConns)
	if _, err := db.ExecContext(ctx, "CREATE TABLE pool (w INT, n INT, PRIMARY KEY (w, n))"); err != nil {
		return check("CREATE TABLE pool", err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, poolConns)
	for w := 0; w < poolConns; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for n := 0; n < poolRowsPerConn; n++ {
				if _, err := db.ExecContext(ctx, "INSERT INTO pool VALUES (?, ?)", w, n); err != nil {
					errs <- fmt.Errorf("worker %d insert %d: %w", w, n, err)
					return
				}
				var got int
				err := db.QueryRowContext(ctx, "SELECT n FROM pool WHERE w = ? AND n = ?", w, n).
					Scan(&got)
				if err != nil || got != n {
					errs <- fmt.Errorf("worker %d read %d: %d, %v", w, n, got, err)
					return
				}
			}
			if err := db.PingContext(ctx); err != nil {
				errs <- fmt.Errorf("worker %d ping: %w", w, err)
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return err
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM pool").Scan(&n); err != nil {
		return check("count", err)
	}
	if n != poolConns*poolRowsPerConn {
		return fmt.Errorf("%d rows, want %d", n, poolConns*poolRowsPerConn)
	}
	if open := db.Stats().MaxOpenConnections; open != poolConns {
		return fmt.Errorf("pool max open %d", open)
	}
	return nil
}

// checkMultiResults: multiStatements=true and NextResultSet.
func checkMultiResults(ctx context.Context, _ bool) error {
	db, err := open("root", "", testDB, "multiStatements=true")
	if err != nil {
		return err
	}
	defer db.Close()
	rs, err := db.QueryContext(ctx, "SELECT 1 AS a; SELECT 'two' AS b, 3 AS c; SELECT COUNT(*) FROM tx")
	if err != nil {
		return check("a multi-statement query", err)
	}
	defer rs.Close()
	var got []string
	for {
		cols, err := rs.Columns()
		if err != nil {
			return err
		}
		for rs.Next() {
			vals := make([]sql.RawBytes, len(cols))
			dests := make([]any, len(cols))
			for i := range vals {
				dests[i] = &vals[i]
			}
			if err := rs.Scan(dests...); err != nil {
				return err
			}
			parts := []string{}
			for i, v := range vals {
				parts = append(parts, cols[i]+"="+string(v))
			}
			got = append(got, strings.Join(parts, ","))
		}
		if !rs.NextResultSet() {
			break
		}
	}
	if err := rs.Err(); err != nil {
		return check("result sets", err)
	}
	want := "a=1|b=two,c=3|COUNT(*)=3"
	if strings.Join(got, "|") != want {
		return fmt.Errorf("result sets %q, want %q", strings.Join(got, "|"), want)
	}
	// Statements without results among them, and an error that stops the run.
	if _, err := db.ExecContext(ctx,
		"INSERT INTO tx VALUES (10, 'm'); UPDATE tx SET v = 'n' WHERE id = 10"); err != nil {
		return check("a multi-statement exec", err)
	}
	_, err = db.ExecContext(ctx, "DELETE FROM tx WHERE id = 10; INSERT INTO tx VALUES (1, 'd')")
	if code := errorCode(err); code != 1062 {
		return fmt.Errorf("the second statement's 1062, got %v", err)
	}
	return nil
}
