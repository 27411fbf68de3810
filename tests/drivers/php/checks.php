<?php
// PHP's own MySQL protocol implementation (mysqlnd), through both of its
// APIs: mysqli and PDO_MySQL, against a MySQL-protocol server. Run by
// crates/skarv/tests/sql_drivers.rs: php checks.php --host H --port P.
// Every check compares with a known answer and throws, naming itself,
// when the server answers otherwise; the program prints
// `drivers-php: ok` at the end. Passes against MariaDB 10.11 too.

declare(strict_types=1);

$opts = getopt('', ['host:', 'port:']);
$host = $opts['host'] ?? '127.0.0.1';
$port = (int)($opts['port'] ?? 3306);
$db = 'php_checks';

function same(string $what, $got, $want): void
{
    if ($got !== $want) {
        throw new RuntimeException(
            "$what: got " . var_export($got, true) . ', want ' . var_export($want, true)
        );
    }
}

function fails(string $what, callable $f, int $code): void
{
    try {
        $f();
    } catch (mysqli_sql_exception $e) {
        same("$what (error code)", $e->getCode(), $code);
        return;
    } catch (PDOException $e) {
        same("$what (error code)", $e->errorInfo[1] ?? null, $code);
        return;
    }
    throw new RuntimeException("$what: no error, want $code");
}

// ---- mysqli ----------------------------------------------------------
mysqli_report(MYSQLI_REPORT_ERROR | MYSQLI_REPORT_STRICT);
$my = new mysqli($host, 'root', '', '', $port);
$my->set_charset('utf8mb4');
same('mysqli character_set_name', $my->character_set_name(), 'utf8mb4');
$my->query("DROP DATABASE IF EXISTS $db");
$my->query("CREATE DATABASE $db");
$my->select_db($db);
same('mysqli select_db', $my->query('SELECT DATABASE()')->fetch_row()[0], $db);

$my->query(
    'CREATE TABLE t (
        id INT AUTO_INCREMENT PRIMARY KEY,
        name VARCHAR(40) NOT NULL UNIQUE,
        n BIGINT,
        price DECIMAL(10,2),
        ratio DOUBLE,
        born DATE,
        at DATETIME(3),
        flag TINYINT(1),
        bits BIT(8),
        doc JSON,
        body LONGTEXT,
        raw LONGBLOB
    )'
);

// Text protocol: a multi-row insert, affected rows, insert_id, info.
$my->query(
    "INSERT INTO t (name, n, price, ratio, born, at, flag, bits, doc, body)
     VALUES ('a', 1, 1.50, 0.25, '2024-02-29', '2024-02-29 10:11:12.345', 1, b'101', '{\"k\": [1, 2]}', 'x'),
            ('b', -9007199254740993, -0.01, 1e300, NULL, NULL, 0, NULL, NULL, '')"
);
same('mysqli affected_rows of a 2-row INSERT', $my->affected_rows, 2);
same('mysqli insert_id', $my->insert_id, 1);
same('mysqli info', $my->info, 'Records: 2  Duplicates: 0  Warnings: 0');

// Text protocol results: mysqlnd gives ints and floats as PHP's types
// only when asked (MYSQLI_OPT_INT_AND_FLOAT_NATIVE); strings otherwise.
$r = $my->query('SELECT id, name, n, price, born, flag, doc FROM t ORDER BY id');
same('mysqli num_rows', $r->num_rows, 2);
$row = $r->fetch_assoc();
same('mysqli text row', $row, [
    'id' => '1', 'name' => 'a', 'n' => '1', 'price' => '1.50', 'born' => '2024-02-29',
    'flag' => '1', 'doc' => '{"k": [1, 2]}',
]);
$row = $r->fetch_row();
same('mysqli text row 2', $row, ['2', 'b', '-9007199254740993', '-0.01', null, '0', null]);
same('mysqli end of rows', $r->fetch_row(), null);

// Column metadata.
$f = $my->query('SELECT id, name, price, at, bits FROM t LIMIT 0')->fetch_fields();
same('mysqli field names', array_map(fn($c) => $c->name, $f), ['id', 'name', 'price', 'at', 'bits']);
same('mysqli field types', array_map(fn($c) => $c->type, $f), [
    MYSQLI_TYPE_LONG, MYSQLI_TYPE_VAR_STRING, MYSQLI_TYPE_NEWDECIMAL, MYSQLI_TYPE_DATETIME,
    MYSQLI_TYPE_BIT,
]);
same('mysqli field table', $f[0]->table, 't');
same('mysqli decimals', [$f[2]->decimals, $f[3]->decimals], [2, 3]);
same('mysqli primary key flag', ($f[0]->flags & MYSQLI_PRI_KEY_FLAG) !== 0, true);
same('mysqli auto_increment flag', ($f[0]->flags & MYSQLI_AUTO_INCREMENT_FLAG) !== 0, true);
same('mysqli not null flag', ($f[1]->flags & MYSQLI_NOT_NULL_FLAG) !== 0, true);

// Native types in the text protocol.
$n = new mysqli($host, 'root', '', $db, $port);
$n->options(MYSQLI_OPT_INT_AND_FLOAT_NATIVE, true);
$row = $n->query('SELECT id, n, ratio, price FROM t WHERE id = 2')->fetch_row();
same('mysqli native text types', $row, [2, -9007199254740993, 1e300, '-0.01']);
$n->close();

// Server-side prepared statements: every type both ways.
$s = $my->prepare('INSERT INTO t (name, n, price, ratio, born, at, bits, body, raw) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)');
$name = 'c';
$big = PHP_INT_MAX;
$price = '12345678.99';
$ratio = -2.5;
$born = '1999-12-31';
$at = '2000-01-01 00:00:00.5';
$bits = 255;
$body = str_repeat('é', 40000);
$raw = null;
$s->bind_param('sisdssisb', $name, $big, $price, $ratio, $born, $at, $bits, $body, $raw);
$blob = '';
for ($i = 0; $i < 256; $i++) {
    $blob .= chr($i);
}
$blob = str_repeat($blob, 300);
foreach (str_split($blob, 8192) as $piece) {
    $s->send_long_data(8, $piece);
}
$s->execute();
same('mysqli prepared affected_rows', $s->affected_rows, 1);
same('mysqli prepared insert_id', $s->insert_id, 3);
$s->close();

$s = $my->prepare('SELECT id, name, n, price, ratio, born, at, flag, bits, body, raw FROM t WHERE id = ?');
$id = 3;
$s->bind_param('i', $id);
$s->execute();
$row = $s->get_result()->fetch_assoc();
same('mysqli binary row', [
    $row['id'], $row['name'], $row['n'], $row['price'], $row['ratio'], $row['born'], $row['at'],
    $row['flag'], $row['bits'],
], [3, 'c', PHP_INT_MAX, '12345678.99', -2.5, '1999-12-31', '2000-01-01 00:00:00.500', null, 255]);
same('mysqli binary LONGTEXT', $row['body'], $body);
same('mysqli binary BLOB', $row['raw'], $blob);
// bind_result over the same statement, executed again for another id.
$id = 1;
$s->execute();
$s->bind_result($rid, $rname, $rn, $rprice, $rratio, $rborn, $rat, $rflag, $rbits, $rbody, $rraw);
same('mysqli fetch', $s->fetch(), true);
same('mysqli bind_result', [$rid, $rname, $rn, $rprice, $rborn, $rbits], [1, 'a', 1, '1.50', '2024-02-29', 5]);
same('mysqli fetch end', $s->fetch(), null);
$s->close();

// A statement's metadata, and its parameter count.
$s = $my->prepare('SELECT name, price FROM t WHERE id > ? AND name <> ?');
same('mysqli param_count', $s->param_count, 2);
same('mysqli field_count', $s->field_count, 2);
$meta = $s->result_metadata()->fetch_fields();
same('mysqli prepared metadata', [$meta[0]->name, $meta[1]->type], ['name', MYSQLI_TYPE_NEWDECIMAL]);
$s->close();

// Errors: duplicate key, unknown table, syntax, wrong column; the
// connection goes on.
fails('mysqli duplicate', fn() => $my->query("INSERT INTO t (name) VALUES ('a')"), 1062);
same('mysqli sqlstate', $my->sqlstate, '23000');
fails('mysqli unknown table', fn() => $my->query('SELECT * FROM nope'), 1146);
fails('mysqli syntax', fn() => $my->query('SELEC 1'), 1064);
fails('mysqli unknown column', fn() => $my->prepare('SELECT nope FROM t'), 1054);
same('mysqli after errors', $my->query('SELECT COUNT(*) FROM t')->fetch_row()[0], '3');

// Warnings.
$my->query("SET sql_mode = ''");
$my->query("UPDATE t SET flag = 'x' WHERE id = 1");
same('mysqli warning_count', $my->warning_count, 1);
$w = $my->get_warnings();
same('mysqli warning', [$w->errno, $w->next()], [1366, false]);
$my->query("SET sql_mode = DEFAULT");

// Multiple statements and results.
$my->multi_query("SELECT 1 AS a; SELECT 'two' AS b, 3 AS c; UPDATE t SET n = n WHERE id = 1");
$sets = [];
do {
    if ($res = $my->store_result()) {
        $sets[] = $res->fetch_all(MYSQLI_NUM);
        $res->free();
    } else {
        $sets[] = $my->affected_rows;
    }
} while ($my->more_results() && $my->next_result());
same('mysqli multi_query', $sets, [[['1']], [['two', '3']], 0]);

// Unbuffered results.
$r = $my->query('SELECT id FROM t ORDER BY id', MYSQLI_USE_RESULT);
$ids = [];
while ($row = $r->fetch_row()) {
    $ids[] = $row[0];
}
$r->free();
same('mysqli unbuffered', $ids, ['1', '2', '3']);

// Transactions and savepoints.
$my->begin_transaction();
$my->query("INSERT INTO t (name) VALUES ('tx1')");
$my->savepoint('sp');
$my->query("INSERT INTO t (name) VALUES ('tx2')");
$my->release_savepoint('sp');
$my->savepoint('sp2');
$my->query("DELETE FROM t WHERE name = 'tx1'");
// (mysqli's rollback(0, 'sp2') sends `ROLLBACK /*sp2*/`: the whole one.)
$my->query('ROLLBACK TO SAVEPOINT sp2');
$my->commit();
same('mysqli savepoints', $my->query("SELECT GROUP_CONCAT(name ORDER BY name) FROM t WHERE name LIKE 'tx%'")->fetch_row()[0], 'tx1,tx2');
$my->autocommit(false);
$my->query("DELETE FROM t WHERE name LIKE 'tx%'");
$my->rollback();
$my->autocommit(true);
same('mysqli rollback', $my->query("SELECT COUNT(*) FROM t WHERE name LIKE 'tx%'")->fetch_row()[0], '2');

// Escaping, and a character outside the BMP.
$odd = "it's \"quoted\" \\ back\nslash \0 nul 😀";
$my->query("INSERT INTO t (name, body) VALUES ('esc', '" . $my->real_escape_string($odd) . "')");
same('mysqli escaping', $my->query("SELECT body FROM t WHERE name = 'esc'")->fetch_row()[0], $odd);
same('mysqli ping', $my->ping(), true);
same('mysqli stat', str_starts_with($my->stat(), 'Uptime: '), true);
same('mysqli change_user', $my->change_user('root', '', $db), true);
same('mysqli after change_user', $my->query('SELECT @@autocommit')->fetch_row()[0], '1');
$my->close();

// ---- PDO ---------------------------------------------------------------
$dsn = "mysql:host=$host;port=$port;dbname=$db;charset=utf8mb4";
foreach ([true, false] as $emulate) {
    $how = $emulate ? 'PDO emulated' : 'PDO native';
    $pdo = new PDO($dsn, 'root', '', [
        PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION,
        PDO::ATTR_EMULATE_PREPARES => $emulate,
        PDO::ATTR_DEFAULT_FETCH_MODE => PDO::FETCH_ASSOC,
    ]);
    $pdo->exec('DROP TABLE IF EXISTS p');
    $pdo->exec('CREATE TABLE p (id BIGINT AUTO_INCREMENT PRIMARY KEY, k VARCHAR(20) UNIQUE, v DECIMAL(8,3), d DATETIME, ok BOOLEAN, b LONGBLOB)');
    $ins = $pdo->prepare('INSERT INTO p (k, v, d, ok, b) VALUES (:k, :v, :d, :ok, :b)');
    foreach (['x' => '1.125', 'y' => '-2.000', 'z' => null] as $k => $v) {
        $ins->bindValue(':k', $k);
        $ins->bindValue(':v', $v, $v === null ? PDO::PARAM_NULL : PDO::PARAM_STR);
        $ins->bindValue(':d', '2025-06-30 23:59:59');
        $ins->bindValue(':ok', $k !== 'y', PDO::PARAM_BOOL);
        $stream = fopen('php://memory', 'r+');
        fwrite($stream, str_repeat($k, 70000));
        rewind($stream);
        $ins->bindParam(':b', $stream, PDO::PARAM_LOB);
        $ins->execute();
        same("$how rowCount", $ins->rowCount(), 1);
    }
    same("$how lastInsertId", $pdo->lastInsertId(), '3');
    $sel = $pdo->prepare('SELECT id, k, v, d, ok, LENGTH(b) AS n FROM p WHERE id >= ? ORDER BY id');
    $sel->execute([2]);
    $rows = $sel->fetchAll();
    // Both ways mysqlnd gives ints as ints (PHP 8.1 on); DECIMAL stays a string.
    same("$how rows", $rows, [
        ['id' => 2, 'k' => 'y', 'v' => '-2.000', 'd' => '2025-06-30 23:59:59', 'ok' => 0, 'n' => 70000],
        ['id' => 3, 'k' => 'z', 'v' => null, 'd' => '2025-06-30 23:59:59', 'ok' => 1, 'n' => 70000],
    ]);
    $sel = $pdo->prepare('SELECT b FROM p WHERE k = ?');
    $sel->execute(['x']);
    same("$how LOB", $sel->fetchColumn(), str_repeat('x', 70000));
    $meta = $pdo->query('SELECT id, v FROM p LIMIT 1')->getColumnMeta(1);
    same("$how getColumnMeta", [$meta['name'], $meta['native_type'], $meta['precision']], ['v', 'NEWDECIMAL', 3]);
    // Named parameter used in a LIKE, and IN with positional ones.
    $sel = $pdo->prepare('SELECT k FROM p WHERE k IN (?, ?, ?) ORDER BY k DESC');
    $sel->execute(['x', 'z', 'nope']);
    same("$how IN", $sel->fetchAll(PDO::FETCH_COLUMN), ['z', 'x']);
    // Errors keep the connection.
    try {
        $pdo->exec("INSERT INTO p (k) VALUES ('x')");
        throw new RuntimeException("$how: no duplicate error");
    } catch (PDOException $e) {
        same("$how duplicate", [$e->errorInfo[0], $e->errorInfo[1]], ['23000', 1062]);
    }
    fails("$how unknown column", fn() => $pdo->query('SELECT nope FROM p'), 1054);
    // Transactions.
    $pdo->beginTransaction();
    same("$how inTransaction", $pdo->inTransaction(), true);
    $pdo->exec("UPDATE p SET v = 0 WHERE k = 'x'");
    $pdo->rollBack();
    same("$how rollBack", $pdo->query("SELECT v FROM p WHERE k = 'x'")->fetchColumn(), '1.125');
    $pdo->beginTransaction();
    same("$how exec count", $pdo->exec("UPDATE p SET v = v * 2 WHERE k IN ('x', 'y')"), 2);
    $pdo->commit();
    same("$how commit", $pdo->query("SELECT SUM(v) FROM p")->fetchColumn(), '-1.750');
    // Several statements in one query (emulated prepares only).
    if ($emulate) {
        $st = $pdo->query("SELECT 1 AS one; SELECT k FROM p WHERE k = 'y'");
        $first = $st->fetchAll();
        same("$how nextRowset", $st->nextRowset(), true);
        same("$how rowsets", [$first, $st->fetchAll()], [[['one' => 1]], [['k' => 'y']]]);
        same("$how no more rowsets", $st->nextRowset(), false);
    }
    // Unbuffered.
    $pdo->setAttribute(PDO::MYSQL_ATTR_USE_BUFFERED_QUERY, false);
    $st = $pdo->query('SELECT k FROM p ORDER BY k');
    same("$how unbuffered", $st->fetchAll(PDO::FETCH_COLUMN), ['x', 'y', 'z']);
    $pdo = null;
}

// PDO's connection options: FOUND_ROWS and an init command.
$pdo = new PDO($dsn, 'root', '', [
    PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION,
    PDO::MYSQL_ATTR_FOUND_ROWS => true,
    PDO::MYSQL_ATTR_INIT_COMMAND => "SET @who = 'init'",
]);
same('PDO init command', $pdo->query('SELECT @who')->fetchColumn(), 'init');
same('PDO FOUND_ROWS: rows matched', $pdo->exec("UPDATE p SET k = k WHERE k IN ('x', 'y')"), 2);
$pdo->exec("DROP DATABASE $db");

echo "drivers-php: ok\n";
