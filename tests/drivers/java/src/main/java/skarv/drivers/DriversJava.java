package skarv.drivers;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Types;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.LocalTime;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import java.util.TimeZone;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

/**
 * JDBC drivers (MySQL Connector/J, and MariaDB Connector/J) against a MySQL
 * server — Skarv's SQL node, or MySQL/MariaDB as the reference — the way
 * applications use them: logins, DDL, server-side and client-side prepared
 * statements, every column type read back natively, transactions, batches,
 * generated keys, error codes, DatabaseMetaData, several connections at
 * once, ping and multiple result sets. Prints "drivers-java: ok" at the
 * end, or names the failing check and exits non-zero.
 *
 * <p>Arguments: HOST PORT.
 */
public final class DriversJava {
    /** The database the checks create and drop. */
    private static final String DB = "drivers_java";
    /** Threads of the parallel check, and rows each writes. */
    private static final int POOL_THREADS = 4;
    private static final int POOL_ROWS_PER_THREAD = 40;
    /** Rows of each batch insert. */
    private static final int BATCH_ROWS = 100;
    /** How long the parallel check may take, in seconds. */
    private static final int POOL_WAIT_S = 120;
    /** Login and socket timeouts, in milliseconds. */
    private static final int CONNECT_TIMEOUT_MS = 10_000;
    private static final int SOCKET_TIMEOUT_MS = 120_000;

    private static String host;
    private static String port;
    private static boolean mariadbServer;

    /** A failed check, with its name. */
    static final class CheckFailed extends RuntimeException {
        CheckFailed(String message) {
            super(message);
        }
    }

    private static void require(boolean ok, String what) {
        if (!ok) {
            throw new CheckFailed(what);
        }
    }

    private static void requireEq(Object got, Object want, String what) {
        if (!Objects.equals(got, want)) {
            throw new CheckFailed(what + ": got " + got + ", want " + want);
        }
    }

    /** A JDBC driver and the connection options that select each mode. */
    record Driver(String name, String scheme, String serverPrep, String clientPrep,
            String batch) {}

    private static final Driver CONNECTOR_J = new Driver("Connector/J", "jdbc:mysql",
            "useServerPrepStmts=true&cachePrepStmts=true", "useServerPrepStmts=false",
            "rewriteBatchedStatements=true");
    private static final Driver MARIADB = new Driver("MariaDB Connector/J", "jdbc:mariadb",
            "useServerPrepStmts=true", "useServerPrepStmts=false", "useBulkStmts=false");

    private static String url(Driver d, String db, String options) {
        String base = d.scheme + "://" + host + ":" + port + "/" + db + "?connectTimeout="
                + CONNECT_TIMEOUT_MS + "&socketTimeout=" + SOCKET_TIMEOUT_MS;
        return options.isEmpty() ? base : base + "&" + options;
    }

    private static Connection connect(Driver d, String db, String options) throws SQLException {
        return DriverManager.getConnection(url(d, db, options), "root", "");
    }

    public static void main(String[] args) {
        if (args.length != 2) {
            System.err.println("usage: DriversJava HOST PORT");
            System.exit(2);
        }
        host = args[0];
        port = args[1];
        // TIMESTAMP values are compared as written: the JVM in UTC, as the
        // servers' time zone (Skarv's TIMESTAMPs are UTC).
        TimeZone.setDefault(TimeZone.getTimeZone("UTC"));
        String check = "start";
        try {
            for (Driver d : List.of(CONNECTOR_J, MARIADB)) {
                check = d.name + ": setup";
                setup(d);
                check = d.name + ": logins";
                logins(d);
                for (String prep : List.of(d.serverPrep, d.clientPrep)) {
                    check = d.name + ": types (" + prep + ")";
                    types(d, prep);
                }
                check = d.name + ": transactions";
                transactions(d);
                for (String prep : List.of(d.serverPrep, d.clientPrep)) {
                    check = d.name + ": batches and generated keys (" + prep + ")";
                    batches(d, prep + "&" + d.batch);
                    check = d.name + ": error codes (" + prep + ")";
                    errors(d, prep);
                }
                for (String options : List.of("", "useInformationSchema=true")) {
                    check = d.name + ": DatabaseMetaData (" + options + ")";
                    metadata(d, options);
                }
                check = d.name + ": parallel connections";
                parallel(d);
                check = d.name + ": multiple result sets";
                multiResults(d);
                // MySQL's Connector/J merges an execute's columns with
                // those of the prepare and fails on a column added in
                // between (ArrayIndexOutOfBoundsException, against MariaDB
                // 10.11 too): only MariaDB's driver, which asks for
                // CACHE_METADATA, is checked.
                if (d == MARIADB) {
                    check = d.name + ": a prepared statement across ALTER TABLE";
                    preparedAcrossAlter(d);
                }
                check = d.name + ": drop";
                try (Connection c = connect(d, "", "")) {
                    c.createStatement().execute("DROP DATABASE " + DB);
                }
            }
        } catch (Throwable e) {
            System.err.println("drivers-java: FAILED: " + check + ": " + e);
            if (e instanceof SQLException s) {
                System.err.println("  error code " + s.getErrorCode() + ", SQLSTATE "
                        + s.getSQLState());
            }
            e.printStackTrace();
            System.exit(1);
        }
        System.out.println("drivers-java: ok");
    }

    private static void setup(Driver d) throws SQLException {
        try (Connection c = connect(d, "", "")) {
            require(c.isValid(5), "isValid (ping) as root without a password");
            DatabaseMetaData md = c.getMetaData();
            mariadbServer = md.getDatabaseProductVersion().contains("MariaDB");
            Statement s = c.createStatement();
            s.execute("DROP DATABASE IF EXISTS " + DB);
            s.execute("CREATE DATABASE " + DB);
        }
    }

    /** Users with each password plugin log in; a wrong password is 1045. */
    private static void logins(Driver d) throws SQLException {
        List<String> plugins = new ArrayList<>(List.of("mysql_native_password"));
        if (!mariadbServer) { // MariaDB has no caching_sha2_password
            plugins.add("caching_sha2_password");
        }
        try (Connection root = connect(d, DB, "")) {
            Statement s = root.createStatement();
            int n = 0;
            for (String plugin : plugins) {
                String user = "drv_java_" + n++;
                String password = "pw-" + plugin;
                String identified = mariadbServer ? "IDENTIFIED BY '" + password + "'"
                        : "IDENTIFIED WITH " + plugin + " BY '" + password + "'";
                s.execute("DROP USER IF EXISTS '" + user + "'@'%'");
                s.execute("CREATE USER '" + user + "'@'%' " + identified);
                s.execute("GRANT ALL ON " + DB + ".* TO '" + user + "'@'%'");
                try (Connection c = DriverManager.getConnection(url(d, DB, ""), user, password)) {
                    ResultSet rs = c.createStatement().executeQuery("SELECT CURRENT_USER()");
                    require(rs.next(), "a row of CURRENT_USER()");
                    requireEq(rs.getString(1), user + "@%", "CURRENT_USER() (" + plugin + ")");
                }
                try (Connection c = DriverManager.getConnection(url(d, DB, ""), user, "wrong")) {
                    throw new CheckFailed("a wrong password logged in (" + plugin + ")");
                } catch (SQLException e) {
                    requireEq(e.getErrorCode(), 1045, "a wrong password's code (" + plugin + ")");
                }
                s.execute("DROP USER '" + user + "'@'%'");
            }
        }
    }

    private static final String TYPES_TABLE = "CREATE TABLE IF NOT EXISTS types ("
            + " id INT PRIMARY KEY,"
            + " ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, siu SMALLINT UNSIGNED,"
            + " mi MEDIUMINT, i INT, iu INT UNSIGNED, bi BIGINT, biu BIGINT UNSIGNED,"
            + " de DECIMAL(20,6), f FLOAT, d DOUBLE,"
            + " c CHAR(5), vc VARCHAR(50), tx TEXT, bl BLOB, bn BINARY(4), vb VARBINARY(10),"
            + " dt DATE, tm TIME, dtm DATETIME(6), ts TIMESTAMP NULL DEFAULT NULL, y YEAR,"
            + " e ENUM('a','b','c'), st SET('x','y','z'))";
    private static final String TYPES_COLUMNS = "id, ti, tiu, si, siu, mi, i, iu, bi, biu, de,"
            + " f, d, c, vc, tx, bl, bn, vb, dt, tm, dtm, ts, y, e, st";
    private static final int TYPES_COUNT = 26;

    /** The java.sql.Types each column reports. */
    private static final int[] TYPES_SQL = {Types.INTEGER, Types.TINYINT, Types.TINYINT,
        Types.SMALLINT, Types.SMALLINT, Types.INTEGER, Types.INTEGER, Types.INTEGER,
        Types.BIGINT, Types.BIGINT, Types.DECIMAL, Types.REAL, Types.DOUBLE, Types.CHAR,
        Types.VARCHAR, Types.LONGVARCHAR, Types.LONGVARBINARY, Types.BINARY, Types.VARBINARY,
        Types.DATE, Types.TIME, Types.TIMESTAMP, Types.TIMESTAMP, Types.DATE, Types.CHAR,
        Types.CHAR};

    /** As {@link #TYPES_SQL}, as MariaDB Connector/J maps them. */
    private static final int[] TYPES_SQL_MARIADB = {Types.INTEGER, Types.TINYINT, Types.TINYINT,
        Types.SMALLINT, Types.SMALLINT, Types.INTEGER, Types.INTEGER, Types.INTEGER,
        Types.BIGINT, Types.BIGINT, Types.DECIMAL, Types.REAL, Types.DOUBLE, Types.CHAR,
        Types.VARCHAR, Types.VARCHAR, Types.VARBINARY, Types.VARBINARY, Types.VARBINARY,
        Types.DATE, Types.TIME, Types.TIMESTAMP, Types.TIMESTAMP, Types.DATE, Types.CHAR,
        Types.CHAR};

    /** A row of `types`, as written and as read back through getters. */
    record Row(int id, byte ti, short tiu, short si, int siu, int mi, int i, long iu, long bi,
            BigInteger biu, BigDecimal de, float f, double d, String c, String vc, String tx,
            byte[] bl, byte[] bn, byte[] vb, LocalDate dt, String tm, LocalDateTime dtm,
            LocalDateTime ts, int y, String e, String st) {
        List<Object> values() {
            return Arrays.asList(id, ti, tiu, si, siu, mi, i, iu, bi, biu, de, f, d, c, vc, tx,
                    Arrays.toString(bl), Arrays.toString(bn), Arrays.toString(vb), dt, tm, dtm,
                    ts, y, e, st);
        }
    }

    /**
     * The rows the type checks write. No negative TIME: Connector/J 9.5
     * reads a binary one wrongly against MariaDB too ("-12:34:56" as
     * "12:34:56", "-838:59:59" as "-794:59:59"); Go's check has them.
     */
    private static List<Row> sampleRows(int base) {
        byte[] big = new byte[60_000];
        Arrays.fill(big, (byte) 7);
        return List.of(
                new Row(base + 1, Byte.MIN_VALUE, (short) 0, Short.MIN_VALUE, 0, -8388608,
                        Integer.MIN_VALUE, 0L, Long.MIN_VALUE, BigInteger.ZERO,
                        new BigDecimal("-12345678901234.123456"), -1.5f, -1e100, "ab", "hello",
                        "some text", new byte[] {0, 1, 2, (byte) 255}, new byte[] {'x', 'y', 0, 0},
                        new byte[0], LocalDate.of(1000, 1, 1), "00:00:00",
                        LocalDateTime.of(1000, 1, 1, 0, 0), LocalDateTime.of(1970, 1, 1, 0, 0, 1),
                        1901, "a", ""),
                new Row(base + 2, Byte.MAX_VALUE, (short) 255, Short.MAX_VALUE, 65535, 8388607,
                        Integer.MAX_VALUE, 4294967295L, Long.MAX_VALUE,
                        new BigInteger("18446744073709551615"),
                        new BigDecimal("99999999999999.999999"), 3.25f, 2.5e-300, "åäö",
                        "€ and ✓", "t".repeat(3000), big, new byte[] {1, 2, (byte) 0xFE, -1},
                        "bin\0".getBytes(StandardCharsets.UTF_8), LocalDate.of(9999, 12, 31),
                        "838:59:59", LocalDateTime.of(9999, 12, 31, 23, 59, 59, 999_999_000),
                        LocalDateTime.of(2038, 1, 19, 3, 14, 7), 2155, "c", "x,z"),
                new Row(base + 3, (byte) 0, (short) 1, (short) 0, 1, 0, 0, 1L, 0L, BigInteger.ONE,
                        new BigDecimal("0.000001"), 0f, 0d, "", "", "", new byte[0],
                        new byte[] {0, 0, 0, 0}, new byte[0], LocalDate.of(2024, 2, 29),
                        "12:34:56", LocalDateTime.of(2024, 2, 29, 12, 34, 56, 123_456_000),
                        LocalDateTime.of(2024, 2, 29, 12, 34, 56), 2024, "b", "x,y,z"));
    }

    /** A value's text, cut short for messages (and compared as such: the
     *  cut keeps the length). */
    private static String brief(Object v) {
        String text = String.valueOf(v);
        return text.length() <= 80 ? text
                : text.substring(0, 80) + "… (" + text.length() + " chars, hash "
                        + text.hashCode() + ")";
    }

    private static void bind(PreparedStatement p, Row r) throws SQLException {
        int k = 1;
        p.setInt(k++, r.id);
        p.setByte(k++, r.ti);
        p.setShort(k++, r.tiu);
        p.setShort(k++, r.si);
        p.setInt(k++, r.siu);
        p.setInt(k++, r.mi);
        p.setInt(k++, r.i);
        p.setLong(k++, r.iu);
        p.setLong(k++, r.bi);
        // setObject(BigInteger) binds a signed BIGINT (the maximum would overflow).
        p.setBigDecimal(k++, new BigDecimal(r.biu));
        p.setBigDecimal(k++, r.de);
        p.setFloat(k++, r.f);
        p.setDouble(k++, r.d);
        p.setString(k++, r.c);
        p.setString(k++, r.vc);
        p.setString(k++, r.tx);
        p.setBytes(k++, r.bl);
        p.setBytes(k++, r.bn);
        p.setBytes(k++, r.vb);
        p.setObject(k++, r.dt);
        p.setString(k++, r.tm);
        p.setObject(k++, r.dtm);
        p.setObject(k++, r.ts);
        p.setInt(k++, r.y);
        p.setString(k++, r.e);
        p.setString(k++, r.st);
    }

    private static Row read(ResultSet rs) throws SQLException {
        int k = 1;
        return new Row(rs.getInt(k++), rs.getByte(k++), rs.getShort(k++), rs.getShort(k++),
                rs.getInt(k++), rs.getInt(k++), rs.getInt(k++), rs.getLong(k++), rs.getLong(k++),
                rs.getBigDecimal(k++).toBigIntegerExact(), rs.getBigDecimal(k++),
                rs.getFloat(k++), rs.getDouble(k++), rs.getString(k++), rs.getString(k++),
                rs.getString(k++), rs.getBytes(k++), rs.getBytes(k++), rs.getBytes(k++),
                rs.getObject(k++, LocalDate.class), rs.getString(k++),
                rs.getObject(k++, LocalDateTime.class), rs.getObject(k++, LocalDateTime.class),
                rs.getInt(k++), rs.getString(k++), rs.getString(k++));
    }

    /** Rows written with placeholders and read back through typed getters. */
    private static void types(Driver d, String prep) throws SQLException {
        boolean server = prep.contains("useServerPrepStmts=true");
        int base = server ? 0 : 10;
        try (Connection c = connect(d, DB, prep)) {
            c.createStatement().execute(TYPES_TABLE);
            String marks = String.join(", ", java.util.Collections.nCopies(TYPES_COUNT, "?"));
            List<Row> rows = sampleRows(base);
            if (mariadbServer && d == CONNECTOR_J) {
                // MariaDB announces itself as "5.5.5-10.…": Connector/J takes
                // it for a server without fractional seconds and drops them.
                rows = rows.stream().map(r -> new Row(r.id, r.ti, r.tiu, r.si, r.siu, r.mi, r.i,
                        r.iu, r.bi, r.biu, r.de, r.f, r.d, r.c, r.vc, r.tx, r.bl, r.bn, r.vb, r.dt,
                        r.tm, r.dtm.withNano(0), r.ts, r.y, r.e, r.st)).toList();
            }
            try (PreparedStatement p = c.prepareStatement(
                    "INSERT INTO types (" + TYPES_COLUMNS + ") VALUES (" + marks + ")")) {
                for (Row r : rows) {
                    bind(p, r);
                    requireEq(p.executeUpdate(), 1, "insert row " + r.id);
                }
            }
            try (PreparedStatement p = c.prepareStatement("INSERT INTO types (id) VALUES (?)")) {
                p.setInt(1, base + 4);
                p.executeUpdate();
            }
            // Over a prepared statement (binary rows when server-side) and a
            // plain one (text rows).
            for (boolean prepared : List.of(true, false)) {
                ResultSet rs;
                if (prepared) {
                    PreparedStatement p = c.prepareStatement("SELECT " + TYPES_COLUMNS
                            + " FROM types WHERE id > ? AND id < ? ORDER BY id");
                    p.setInt(1, base);
                    p.setInt(2, base + 4);
                    rs = p.executeQuery();
                } else {
                    rs = c.createStatement().executeQuery("SELECT " + TYPES_COLUMNS
                            + " FROM types WHERE id > " + base + " AND id < " + (base + 4)
                            + " ORDER BY id");
                }
                String how = prepared ? "prepared" : "plain";
                ResultSetMetaData md = rs.getMetaData();
                requireEq(md.getColumnCount(), TYPES_COUNT, "columns");
                if (System.getenv("DRIVERS_DEBUG") != null) {
                    for (int k = 1; k <= TYPES_COUNT; k++) {
                        System.err.print(md.getColumnType(k) + ", ");
                    }
                    System.err.println();
                }
                for (int k = 1; k <= TYPES_COUNT; k++) {
                    int[] want = d == MARIADB ? TYPES_SQL_MARIADB : TYPES_SQL;
                    requireEq(md.getColumnType(k), want[k - 1],
                            how + ": java.sql.Types of " + md.getColumnName(k) + " ("
                                    + md.getColumnTypeName(k) + ")");
                }
                requireEq(md.isSigned(10), false, how + ": BIGINT UNSIGNED is unsigned");
                requireEq(md.isSigned(9), true, how + ": BIGINT is signed");
                requireEq(md.getPrecision(11), 20, how + ": DECIMAL(20,6)'s precision");
                requireEq(md.getScale(11), 6, how + ": DECIMAL(20,6)'s scale");
                requireEq(md.getColumnTypeName(10), "BIGINT UNSIGNED", how + ": type name");
                requireEq(md.getColumnClassName(10), "java.math.BigInteger",
                        how + ": BIGINT UNSIGNED's class");
                requireEq(rs.getClass().getName().isEmpty(), false, "a result set");
                for (Row want : rows) {
                    require(rs.next(), how + ": row " + want.id);
                    requireEq(rs.getObject("biu"), want.biu, how + ": getObject(biu)");
                    List<Object> got = read(rs).values();
                    List<Object> wanted = want.values();
                    String[] names = TYPES_COLUMNS.split(", ");
                    for (int k = 0; k < TYPES_COUNT; k++) {
                        requireEq(brief(got.get(k)), brief(wanted.get(k)),
                                how + ": row " + want.id + " column " + names[k]);
                    }
                }
                require(!rs.next(), how + ": no more rows");
                rs.close();
                rs = c.createStatement().executeQuery(
                        "SELECT bi, d, vc, bl, dtm, dt, y, e FROM types WHERE id = " + (base + 4));
                require(rs.next(), "the row of NULLs");
                for (int k = 1; k <= 8; k++) {
                    requireEq(rs.getObject(k), null, "NULL column " + k);
                    rs.getLong(1);
                    require(rs.wasNull(), "wasNull");
                }
                rs.close();
            }
        }
    }

    /** setAutoCommit(false), commit, rollback, isolation, read only. */
    private static void transactions(Driver d) throws SQLException {
        try (Connection c = connect(d, DB, d.serverPrep);
                Connection other = connect(d, DB, "")) {
            c.createStatement().execute("CREATE TABLE tx (id INT PRIMARY KEY, v VARCHAR(10))");
            c.setAutoCommit(false);
            c.setTransactionIsolation(Connection.TRANSACTION_READ_COMMITTED);
            try (PreparedStatement p = c.prepareStatement("INSERT INTO tx VALUES (?, ?)")) {
                for (int i = 1; i <= 3; i++) {
                    p.setInt(1, i);
                    p.setString(2, "v" + i);
                    p.executeUpdate();
                }
            }
            // By key: a scan of Skarv's does not see its transaction's own
            // uncommitted inserts yet (docs/sql.md).
            ResultSet own = c.createStatement().executeQuery(
                    "SELECT COUNT(*) FROM tx WHERE id IN (1, 2, 3)");
            require(own.next(), "a count");
            requireEq(own.getLong(1), 3L, "a transaction reads its own rows");
            requireEq(count(other, "tx"), 0L, "another connection sees no uncommitted rows");
            c.rollback();
            requireEq(count(c, "tx"), 0L, "rows after rollback");
            c.createStatement().executeUpdate("INSERT INTO tx VALUES (1, 'c1'), (2, 'c2')");
            c.commit();
            requireEq(count(other, "tx"), 2L, "rows after commit");
            c.setAutoCommit(true);
            c.setReadOnly(true);
            requireEq(count(c, "tx"), 2L, "a read-only connection reads");
            if (d == CONNECTOR_J) {
                // Connector/J's setReadOnly sends SET SESSION TRANSACTION
                // READ ONLY (and refuses writes itself too); MariaDB's
                // keeps it to itself.
                ResultSet ro = c.createStatement().executeQuery("SELECT @@tx_read_only");
                require(ro.next(), "@@tx_read_only");
                requireEq(ro.getLong(1), 1L, "the session's access mode after setReadOnly(true)");
            }
            c.setReadOnly(false);
            c.createStatement().executeUpdate("UPDATE tx SET v = v WHERE id = 1");
            requireEq(c.getAutoCommit(), true, "autocommit");
        }
    }

    private static long count(Connection c, String table) throws SQLException {
        ResultSet rs = c.createStatement().executeQuery("SELECT COUNT(*) FROM " + table);
        require(rs.next(), "a count");
        return rs.getLong(1);
    }

    /** addBatch/executeBatch, getGeneratedKeys, LAST_INSERT_ID(). */
    private static void batches(Driver d, String options) throws SQLException {
        try (Connection c = connect(d, DB, options)) {
            Statement s = c.createStatement();
            s.execute("DROP TABLE IF EXISTS ai");
            s.execute("CREATE TABLE ai (id BIGINT UNSIGNED AUTO_INCREMENT PRIMARY KEY, v INT)");
            try (PreparedStatement p = c.prepareStatement("INSERT INTO ai (v) VALUES (?)",
                    Statement.RETURN_GENERATED_KEYS)) {
                p.setInt(1, -1);
                requireEq(p.executeUpdate(), 1, "one insert");
                ResultSet keys = p.getGeneratedKeys();
                require(keys.next(), "a generated key");
                long first = keys.getLong(1);
                require(first >= 1, "a generated key >= 1: " + first);
                ResultSet last = s.executeQuery("SELECT LAST_INSERT_ID()");
                require(last.next(), "LAST_INSERT_ID()");
                requireEq(last.getLong(1), first, "LAST_INSERT_ID() = the generated key");
                for (int i = 0; i < BATCH_ROWS; i++) {
                    p.setInt(1, i);
                    p.addBatch();
                }
                int[] counts = p.executeBatch();
                requireEq(counts.length, BATCH_ROWS, "batch counts");
                for (int n : counts) {
                    require(n == 1 || n == Statement.SUCCESS_NO_INFO, "a batch count " + n);
                }
                keys = p.getGeneratedKeys();
                List<Long> ids = new ArrayList<>();
                while (keys.next()) {
                    ids.add(keys.getLong(1));
                }
                requireEq(ids.size(), BATCH_ROWS, "the batch's generated keys");
                // Each key is the row's: v counts up with id.
                ResultSet rs = s.executeQuery("SELECT id, v FROM ai WHERE v >= 0 ORDER BY id");
                int n = 0;
                while (rs.next()) {
                    requireEq(rs.getLong(1), ids.get(n), "the key of batch row " + n);
                    requireEq(rs.getInt(2), n, "batch row " + n);
                    n++;
                }
                requireEq(n, BATCH_ROWS, "batch rows read back");
            }
            s.executeUpdate("INSERT INTO ai (v) VALUES (-2)", Statement.RETURN_GENERATED_KEYS);
            ResultSet keys = s.getGeneratedKeys();
            require(keys.next(), "a generated key of a plain statement");
            ResultSet rs = s.executeQuery("SELECT v FROM ai WHERE id = " + keys.getLong(1));
            require(rs.next(), "the row of the plain statement's key");
            requireEq(rs.getInt(1), -2, "the row of the plain statement's key");
        }
    }

    /** The server's codes reach the driver: 1062, 1146, 1064. */
    private static void errors(Driver d, String options) throws SQLException {
        try (Connection c = connect(d, DB, options)) {
            expectError(c, "INSERT INTO tx VALUES (?, 'dup')", 1, 1062, "23000");
            expectError(c, "SELECT * FROM no_such_table WHERE id = ?", 1, 1146, "42S02");
            expectError(c, "SELECT * FROM tx WHERE id = ? ORDER", 1, 1064, "42000");
            expectError(c, "SELEKT 1", null, 1064, "42000");
            expectError(c, "INSERT INTO tx VALUES (1, 'dup')", null, 1062, "23000");
            require(c.isValid(5), "the connection is good after errors");
        }
    }

    private static void expectError(Connection c, String sql, Integer arg, int code,
            String state) throws SQLException {
        try {
            if (arg == null) {
                c.createStatement().execute(sql);
            } else {
                try (PreparedStatement p = c.prepareStatement(sql)) {
                    p.setInt(1, arg);
                    p.execute();
                }
            }
            throw new CheckFailed(sql + ": no error, want " + code);
        } catch (SQLException e) {
            requireEq(e.getErrorCode(), code, sql + ": the error code (" + e.getMessage() + ")");
            requireEq(e.getSQLState(), state, sql + ": the SQLSTATE");
        }
    }

    /** getTables, getColumns, getPrimaryKeys, getCatalogs. */
    private static void metadata(Driver d, String options) throws SQLException {
        try (Connection c = connect(d, DB, options)) {
            DatabaseMetaData md = c.getMetaData();
            List<String> catalogs = new ArrayList<>();
            try (ResultSet rs = md.getCatalogs()) {
                while (rs.next()) {
                    catalogs.add(rs.getString("TABLE_CAT"));
                }
            }
            require(catalogs.contains(DB), "getCatalogs lists " + DB + ": " + catalogs);
            // The current database after a USE statement: MariaDB
            // Connector/J reads it from the OK packet's session state
            // changes (Connector/J keeps its own, as against MySQL, whose
            // manual says to use setCatalog); and after setCatalog.
            requireEq(c.getCatalog(), DB, "getCatalog");
            c.createStatement().execute("USE information_schema");
            if (d == MARIADB) {
                requireEq(c.getCatalog(), "information_schema", "getCatalog after USE");
            }
            c.setCatalog(DB);
            requireEq(c.getCatalog(), DB, "getCatalog after setCatalog");
            ResultSet now = c.createStatement().executeQuery("SELECT DATABASE()");
            require(now.next(), "DATABASE()");
            requireEq(now.getString(1), DB, "DATABASE() after setCatalog");
            List<String> tables = new ArrayList<>();
            try (ResultSet rs = md.getTables(DB, null, "%", new String[] {"TABLE"})) {
                while (rs.next()) {
                    requireEq(rs.getString("TABLE_CAT"), DB, "getTables' TABLE_CAT");
                    requireEq(rs.getString("TABLE_TYPE"), "TABLE", "getTables' TABLE_TYPE");
                    tables.add(rs.getString("TABLE_NAME"));
                }
            }
            tables.sort(null);
            requireEq(tables, List.of("ai", "tx", "types"), "getTables");
            List<String> columns = new ArrayList<>();
            try (ResultSet rs = md.getColumns(DB, null, "types", "%")) {
                while (rs.next()) {
                    String name = rs.getString("COLUMN_NAME");
                    columns.add(name);
                    int at = rs.getInt("ORDINAL_POSITION");
                    requireEq(columns.size(), at, "ORDINAL_POSITION of " + name);
                    switch (name) {
                        case "id" -> {
                            requireEq(rs.getInt("DATA_TYPE"), Types.INTEGER, "id's DATA_TYPE");
                            requireEq(rs.getInt("NULLABLE"), DatabaseMetaData.columnNoNulls,
                                    "id is NOT NULL");
                        }
                        case "biu" -> {
                            requireEq(rs.getInt("DATA_TYPE"), Types.BIGINT, "biu's DATA_TYPE");
                            requireEq(rs.getString("TYPE_NAME"), "BIGINT UNSIGNED",
                                    "biu's TYPE_NAME");
                        }
                        case "de" -> {
                            requireEq(rs.getInt("DATA_TYPE"), Types.DECIMAL, "de's DATA_TYPE");
                            requireEq(rs.getInt("COLUMN_SIZE"), 20, "de's COLUMN_SIZE");
                            requireEq(rs.getInt("DECIMAL_DIGITS"), 6, "de's DECIMAL_DIGITS");
                        }
                        case "vc" -> {
                            requireEq(rs.getInt("DATA_TYPE"), Types.VARCHAR, "vc's DATA_TYPE");
                            requireEq(rs.getInt("COLUMN_SIZE"), 50, "vc's COLUMN_SIZE");
                            requireEq(rs.getInt("NULLABLE"), DatabaseMetaData.columnNullable,
                                    "vc is nullable");
                        }
                        case "dtm" -> requireEq(rs.getInt("DATA_TYPE"), Types.TIMESTAMP,
                                "dtm's DATA_TYPE");
                        default -> { }
                    }
                }
            }
            requireEq(String.join(", ", columns), TYPES_COLUMNS, "getColumns");
            try (ResultSet rs = md.getColumns(DB, null, "ai", "id")) {
                require(rs.next(), "getColumns of ai.id");
                requireEq(rs.getString("IS_AUTOINCREMENT"), "YES", "ai.id's IS_AUTOINCREMENT");
            }
            try (ResultSet rs = md.getPrimaryKeys(DB, null, "tx")) {
                require(rs.next(), "getPrimaryKeys of tx");
                requireEq(rs.getString("COLUMN_NAME"), "id", "tx's primary key");
                require(!rs.next(), "one primary key column");
            }
        }
    }

    /** Several connections at once, each inserting and reading its rows. */
    private static void parallel(Driver d) throws Exception {
        try (Connection c = connect(d, DB, "")) {
            c.createStatement().execute(
                    "CREATE TABLE pool (w INT, n INT, PRIMARY KEY (w, n))");
        }
        ExecutorService pool = Executors.newFixedThreadPool(POOL_THREADS);
        List<Future<Void>> done = new ArrayList<>();
        for (int t = 0; t < POOL_THREADS; t++) {
            int w = t;
            done.add(pool.submit(() -> {
                try (Connection c = connect(d, DB, w % 2 == 0 ? d.serverPrep : d.clientPrep);
                        PreparedStatement ins = c.prepareStatement(
                                "INSERT INTO pool VALUES (?, ?)");
                        PreparedStatement sel = c.prepareStatement(
                                "SELECT n FROM pool WHERE w = ? AND n = ?")) {
                    for (int n = 0; n < POOL_ROWS_PER_THREAD; n++) {
                        ins.setInt(1, w);
                        ins.setInt(2, n);
                        ins.executeUpdate();
                        sel.setInt(1, w);
                        sel.setInt(2, n);
                        try (ResultSet rs = sel.executeQuery()) {
                            require(rs.next(), "thread " + w + " reads row " + n);
                            requireEq(rs.getInt(1), n, "thread " + w + " row");
                        }
                    }
                    require(c.isValid(5), "thread " + w + " ping");
                }
                return null;
            }));
        }
        pool.shutdown();
        require(pool.awaitTermination(POOL_WAIT_S, TimeUnit.SECONDS), "the threads end");
        for (Future<Void> f : done) {
            f.get();
        }
        try (Connection c = connect(d, DB, "")) {
            requireEq(count(c, "pool"), (long) POOL_THREADS * POOL_ROWS_PER_THREAD, "pool rows");
        }
    }

    /** allowMultiQueries=true: several result sets of one execute. */
    /**
     * One server-side prepared statement executed before and after its
     * table gains a column: the executes after the change see it (a server
     * that skips unchanged result metadata, as MariaDB's CACHE_METADATA
     * lets it, must not skip changed metadata), and an execute after that
     * reads the same columns again.
     */
    private static void preparedAcrossAlter(Driver d) throws SQLException {
        try (Connection c = connect(d, DB, d.serverPrep)) {
            Statement s = c.createStatement();
            s.execute("CREATE TABLE ta (id INT PRIMARY KEY, v VARCHAR(10))");
            s.execute("INSERT INTO ta VALUES (1, 'one'), (2, 'two')");
            try (PreparedStatement p = c.prepareStatement("SELECT * FROM ta WHERE id = ?")) {
                List<String> seen = new ArrayList<>();
                for (int round = 0; round < 4; round++) {
                    if (round == 2) {
                        s.execute("ALTER TABLE ta ADD COLUMN n INT NOT NULL DEFAULT 7");
                    }
                    p.setInt(1, 1 + round % 2);
                    try (ResultSet rs = p.executeQuery()) {
                        require(rs.next(), "a row in round " + round);
                        int columns = rs.getMetaData().getColumnCount();
                        StringBuilder b = new StringBuilder();
                        for (int i = 1; i <= columns; i++) {
                            b.append(rs.getMetaData().getColumnName(i)).append('=')
                                    .append(rs.getString(i)).append(' ');
                        }
                        seen.add(b.toString().trim());
                    }
                }
                requireEq(seen, List.of("id=1 v=one", "id=2 v=two", "id=1 v=one n=7",
                        "id=2 v=two n=7"), "the rows before and after ALTER TABLE");
            }
            s.execute("DROP TABLE ta");
        }
    }

    private static void multiResults(Driver d) throws SQLException {
        try (Connection c = connect(d, DB, "allowMultiQueries=true")) {
            Statement s = c.createStatement();
            boolean isResult = s.execute(
                    "SELECT 1 AS a; UPDATE tx SET v = 'u' WHERE id = 1; SELECT v FROM tx ORDER BY id");
            List<String> seen = new ArrayList<>();
            while (true) {
                if (isResult) {
                    try (ResultSet rs = s.getResultSet()) {
                        StringBuilder b = new StringBuilder();
                        while (rs.next()) {
                            b.append(rs.getString(1)).append(' ');
                        }
                        seen.add("rows " + b.toString().trim());
                    }
                } else {
                    int n = s.getUpdateCount();
                    if (n == -1) {
                        break;
                    }
                    seen.add("updated " + n);
                }
                isResult = s.getMoreResults();
            }
            requireEq(seen, List.of("rows 1", "updated 1", "rows u c2"), "the results");
        }
    }
}
