//! MySQL errors: a code, its SQLSTATE and a message, as an ERR packet
//! carries them. Every refusal of the SQL node is one of these, with
//! MySQL's code where MySQL has one (docs/sql.md lists them).

use std::fmt;

/// An error to send to the client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SqlError {
    /// MySQL's error number (1064, 1146, …).
    pub code: u16,
    /// Five-character SQLSTATE ("42S02", …).
    pub state: &'static str,
    /// The message, naming what was wrong.
    pub message: String,
}

/// Result of the engine's work.
pub type SqlResult<T> = Result<T, SqlError>;

impl SqlError {
    /// An error of a code whose SQLSTATE is known ([`state_of`]).
    pub fn new(code: u16, message: impl Into<String>) -> SqlError {
        SqlError {
            code,
            state: state_of(code),
            message: message.into(),
        }
    }

    /// 1105: what the SQL node does not support (yet), naming it.
    pub fn unsupported(what: impl fmt::Display) -> SqlError {
        SqlError::new(codes::UNKNOWN, format!("not supported by Skarv: {what}"))
    }

    /// 1064: a syntax error near a piece of the statement.
    pub fn syntax(detail: impl fmt::Display) -> SqlError {
        SqlError::new(
            codes::PARSE,
            format!(
                "You have an error in your SQL syntax; check the manual that corresponds to \
                 your Skarv server version for the right syntax to use: {detail}"
            ),
        )
    }
}

impl SqlError {
    /// 1064 as MySQL words it: the statement text from where the parser
    /// stopped (`near`, at most [`SYNTAX_NEAR_CHARS_MAX`] characters; empty
    /// at the end of the statement) and its line; `detail` (what the
    /// parser expected) follows in parentheses.
    pub fn syntax_near(near: &str, line: u64, detail: impl fmt::Display) -> SqlError {
        let near: String = near.chars().take(SYNTAX_NEAR_CHARS_MAX).collect();
        SqlError::new(
            codes::PARSE,
            format!(
                "You have an error in your SQL syntax; check the manual that corresponds to \
                 your Skarv server version for the right syntax to use near '{near}' at line \
                 {line} ({detail})"
            ),
        )
    }
}

/// Bytes 1300's message shows from the first that is not UTF-8 (MariaDB's).
const INVALID_UTF8_SHOWN_BYTES_MAX: usize = 3;

impl SqlError {
    /// 1300 for `bytes` that are not utf8mb4 (from `at`, the first bad
    /// byte): "Invalid utf8mb4 character string: 'FF4243'", the bytes in
    /// hex, as MariaDB names a statement's text or a binary literal that
    /// must become text.
    pub fn invalid_utf8mb4(bytes: &[u8], at: usize) -> SqlError {
        let bad: String = bytes
            .get(at..)
            .unwrap_or_default()
            .iter()
            .take(INVALID_UTF8_SHOWN_BYTES_MAX)
            .map(|b| format!("{b:02X}"))
            .collect();
        SqlError::new(
            codes::INVALID_CHARACTER_STRING,
            format!("Invalid utf8mb4 character string: '{bad}'"),
        )
    }
}

/// Characters of the statement a syntax error quotes (MySQL's 80).
pub const SYNTAX_NEAR_CHARS_MAX: usize = 80;

impl fmt::Display for SqlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ERROR {} ({}): {}", self.code, self.state, self.message)
    }
}

impl std::error::Error for SqlError {}

/// MySQL error numbers the SQL node sends.
pub mod codes {
    #![allow(missing_docs)]
    pub const CON_COUNT: u16 = 1040;
    pub const HANDSHAKE: u16 = 1043;
    /// A write of a read-only table (ndbinfo's).
    pub const OPEN_AS_READONLY: u16 = 1036;
    pub const DBACCESS_DENIED: u16 = 1044;
    pub const ACCESS_DENIED: u16 = 1045;
    pub const NO_DB: u16 = 1046;
    pub const UNKNOWN_COM: u16 = 1047;
    pub const BAD_NULL: u16 = 1048;
    pub const BAD_DB: u16 = 1049;
    pub const TABLE_EXISTS: u16 = 1050;
    pub const BAD_TABLE: u16 = 1051;
    pub const NON_UNIQ: u16 = 1052;
    pub const SERVER_SHUTDOWN: u16 = 1053;
    pub const BAD_FIELD: u16 = 1054;
    pub const WRONG_FIELD_WITH_GROUP: u16 = 1055;
    pub const DUP_FIELDNAME: u16 = 1060;
    pub const DUP_KEYNAME: u16 = 1061;
    pub const DUP_ENTRY: u16 = 1062;
    pub const PARSE: u16 = 1064;
    pub const EMPTY_QUERY: u16 = 1065;
    pub const NONUNIQ_TABLE: u16 = 1066;
    pub const INVALID_DEFAULT: u16 = 1067;
    pub const MULTIPLE_PRI_KEY: u16 = 1068;
    pub const TOO_LONG_KEY: u16 = 1071;
    pub const NET_PACKET_TOO_LARGE: u16 = 1153;
    /// `INSERT DELAYED` of a table whose engine has no delayed inserts
    /// (MariaDB's answer for InnoDB and NDB alike).
    pub const DELAYED_NOT_SUPPORTED: u16 = 1616;
    pub const TOO_MANY_ROWS: u16 = 1172;
    /// "No data - zero rows fetched, selected, or processed" (a warning
    /// of `SELECT … INTO` that found no row).
    pub const SP_FETCH_NO_DATA: u16 = 1329;
    /// "Expression for field `a` is referring to uninitialized field `b`"
    /// (a DEFAULT naming a column whose own DEFAULT is not evaluated yet).
    pub const EXPRESSION_REFERS_TO_UNINIT_FIELD: u16 = 4029;
    /// "Function or expression '…' cannot be used in the DEFAULT clause
    /// of `c`".
    pub const FUNCTION_NOT_DEFAULT: u16 = 1901;
    pub const RECORD_FILE_FULL: u16 = 1114;
    pub const UNKNOWN_TABLE: u16 = 1109;
    pub const UNKNOWN: u16 = 1105;
    pub const TABLE_NOT_FOUND: u16 = 1146;
    /// `SET TRANSACTION …` inside a transaction.
    pub const CANT_CHANGE_TX_CHARACTERISTICS: u16 = 1568;
    /// `sql_safe_updates`: an UPDATE or DELETE no key narrows, no LIMIT.
    pub const UPDATE_WITHOUT_KEY_IN_SAFE_MODE: u16 = 1175;
    pub const TABLEACCESS_DENIED: u16 = 1142;
    pub const NOT_ALLOWED_COMMAND: u16 = 1148;
    pub const UNKNOWN_SYSTEM_VARIABLE: u16 = 1193;
    pub const LOCK_WAIT_TIMEOUT: u16 = 1205;
    pub const LOCK_DEADLOCK: u16 = 1213;
    pub const WRONG_VALUE_FOR_VAR: u16 = 1231;
    pub const WRONG_TYPE_FOR_VAR: u16 = 1232;
    pub const WRONG_ARGUMENTS: u16 = 1210;
    pub const UNKNOWN_STMT_HANDLER: u16 = 1243;
    pub const UNSUPPORTED_PS: u16 = 1295;
    pub const GET_TEMPORARY_ERRMSG: u16 = 1297;
    pub const OUT_OF_RANGE: u16 = 1264;
    /// A value out of its type's range in an expression (`POW`, `EXP`).
    pub const DATA_OUT_OF_RANGE: u16 = 1690;
    /// A pattern `REGEXP` cannot compile.
    pub const REGEXP_ERROR: u16 = 1139;
    /// `GET_LOCK` and its kin: a name empty or too long; too many locks.
    pub const USER_LOCK_WRONG_NAME: u16 = 3057;
    pub const USER_LOCK_DEADLOCK: u16 = 3058;
    pub const TRUNCATED_WRONG_VALUE: u16 = 1292;
    pub const INVALID_CHARACTER_STRING: u16 = 1300;
    pub const DATA_OVERFLOW: u16 = 1916;
    pub const WARN_DATA_TRUNCATED: u16 = 1265;
    pub const DATA_TOO_LONG: u16 = 1406;
    pub const WRONG_USAGE_PLACEMENT: u16 = 1234;
    pub const WRONG_USAGE: u16 = 1221;
    pub const WRONG_PARAMCOUNT_TO_NATIVE_FCT: u16 = 1582;
    pub const CONSTRAINT_FAILED: u16 = 4025;
    pub const DUP_CONSTRAINT_NAME: u16 = 1826;
    pub const CANT_CREATE_TABLE: u16 = 1005;
    pub const ROW_IS_REFERENCED_2: u16 = 1451;
    pub const NO_REFERENCED_ROW_2: u16 = 1452;
    pub const ROW_IS_REFERENCED: u16 = 1217;
    pub const TRUNCATE_ILLEGAL_FK: u16 = 1701;
    pub const TOO_MANY_KEY_PARTS: u16 = 1070;
    pub const TRUNCATED_WRONG_VALUE_FOR_FIELD: u16 = 1366;
    pub const NO_SUCH_INDEX: u16 = 1176;
    pub const CANT_DROP_FIELD_OR_KEY: u16 = 1091;
    pub const DB_CREATE_EXISTS: u16 = 1007;
    pub const DB_DROP_EXISTS: u16 = 1008;
    pub const QUERY_INTERRUPTED: u16 = 1317;
    pub const NO_SUCH_THREAD: u16 = 1094;
    pub const CANNOT_USER: u16 = 1396;
    pub const NONEXISTING_GRANT: u16 = 1141;
    pub const SPECIFIC_ACCESS_DENIED: u16 = 1227;
    pub const MALFORMED_PACKET: u16 = 1835;
    pub const QUERY_TIMEOUT: u16 = 3024;
    pub const STATEMENT_TIMEOUT: u16 = 1969;
    pub const UNKNOWN_LOCALE: u16 = 1649;
    pub const WRONG_VALUE_FOR_TYPE: u16 = 1411;
    pub const UNKNOWN_STORAGE_ENGINE: u16 = 1286;
    pub const WARN_USING_OTHER_HANDLER: u16 = 1266;
    pub const DIVISION_BY_ZERO: u16 = 1365;
    pub const WRONG_VALUE_COUNT_ON_ROW: u16 = 1136;
    pub const FIELD_SPECIFIED_TWICE: u16 = 1110;
    pub const REQUIRES_PRIMARY_KEY: u16 = 1173;
    pub const BAD_FIELD_SPEC: u16 = 1063;
    pub const TOO_BIG_FIELDLENGTH: u16 = 1074;
    pub const TOO_BIG_ROWSIZE: u16 = 1118;
    pub const CANT_REOPEN_TABLE: u16 = 1137;
    pub const WRONG_AUTO_KEY: u16 = 1075;
    pub const KEY_COLUMN_DOES_NOT_EXIST: u16 = 1072;
    pub const NO_DEFAULT_FOR_FIELD: u16 = 1364;
    pub const CANT_LOCK: u16 = 1015;
    pub const ERROR_DURING_COMMIT: u16 = 1180;
    pub const ERROR_DURING_ROLLBACK: u16 = 1181;
    pub const UNKNOWN_CHARACTER_SET: u16 = 1115;
    pub const UNKNOWN_COLLATION: u16 = 1273;
    pub const OPTION_PREVENTS_STATEMENT: u16 = 1290;
    pub const NOT_SUPPORTED_YET: u16 = 1235;
    /// ER_NON_UPDATABLE_TABLE.
    pub const NON_UPDATABLE_TABLE: u16 = 1288;
    /// "Column 'c' is not updatable" (a view's expression column).
    pub const NONUPDATEABLE_COLUMN: u16 = 1348;
    /// "The target table v of the INSERT is not insertable-into".
    pub const NON_INSERTABLE_TABLE: u16 = 1471;
    pub const VIEW_MULTIUPDATE: u16 = 1393;
    pub const VIEW_NO_INSERT_FIELD_LIST: u16 = 1394;
    pub const VIEW_DELETE_MERGE_VIEW: u16 = 1395;
    /// "CHECK OPTION on non-updatable view `db`.`v`".
    pub const VIEW_NONUPD_CHECK: u16 = 1368;
    /// "CHECK OPTION failed `db`.`v`": a row written through a view
    /// WITH CHECK OPTION that the view would not show.
    pub const VIEW_CHECK_FAILED: u16 = 1369;
    /// ER_UPDATE_TABLE_USED: a multi-table DELETE's subquery reads a table
    /// it deletes from.
    pub const UPDATE_TABLE_USED: u16 = 1093;
    /// ER_MULTI_UPDATE_KEY_CONFLICT: a table updated under two names has
    /// its primary key changed.
    pub const MULTI_UPDATE_KEY_CONFLICT: u16 = 1706;
    pub const INCORRECT_GLOBAL_LOCAL_VAR: u16 = 1238;
    pub const GLOBAL_VARIABLE: u16 = 1229;
    pub const LOCAL_VARIABLE: u16 = 1228;
    pub const VAR_CANT_BE_READ: u16 = 1233;
    pub const TRANS_CACHE_FULL: u16 = 1197;
    pub const TABLE_CANT_HANDLE_AUTO_INCREMENT: u16 = 1164;
    pub const NO_SUCH_USER: u16 = 1449;
    pub const OPERAND_COLUMNS: u16 = 1241;
    pub const SUBQUERY_NO_1_ROW: u16 = 1242;
    /// "FUNCTION db.f does not exist".
    pub const SP_DOES_NOT_EXIST: u16 = 1305;
    /// "Trigger does not exist" (Skarv has no triggers).
    pub const TRG_DOES_NOT_EXIST: u16 = 1360;
    /// "Unknown event 'e'" (Skarv has no events).
    pub const EVENT_DOES_NOT_EXIST: u16 = 1539;
    /// "You are not using binary logging".
    pub const NO_BINARY_LOGGING: u16 = 1381;
    pub const INVALID_GROUP_FUNC_USE: u16 = 1111;
    pub const MIX_OF_GROUP_FUNC_AND_FIELDS: u16 = 1140;
    pub const WRONG_NUMBER_OF_COLUMNS_IN_SELECT: u16 = 1222;
    pub const NO_TABLES_USED: u16 = 1096;
    pub const WRONG_DB_NAME: u16 = 1102;
    pub const WRONG_TABLE_NAME: u16 = 1103;
    pub const WRONG_COLUMN_NAME: u16 = 1166;
    pub const TOO_LONG_IDENT: u16 = 1059;
    pub const ILLEGAL_VALUE_FOR_TYPE: u16 = 1367;
    pub const DERIVED_MUST_HAVE_ALIAS: u16 = 1248;
    pub const WRONG_OBJECT: u16 = 1347;
    pub const VIEW_WRONG_LIST: u16 = 1353;
    /// LOAD DATA: a row with fewer fields than columns.
    pub const WARN_TOO_FEW_RECORDS: u16 = 1261;
    /// LOAD DATA: a row with more fields than columns.
    pub const WARN_TOO_MANY_RECORDS: u16 = 1262;
    /// MySQL's EE_STAT: a file that cannot be opened.
    pub const CANT_GET_STAT: u16 = 13;
    /// A file that is not there.
    pub const FILE_NOT_FOUND: u16 = 29;
    /// Reading from the client failed.
    pub const NET_READ_ERROR: u16 = 1158;
    /// MariaDB's ER_LOAD_INFILE_CAPABILITY_DISABLED: LOCAL refused.
    pub const LOCAL_INFILE_DISABLED: u16 = 4166;
    /// INTO OUTFILE: the file is there already.
    pub const FILE_EXISTS: u16 = 1086;
    /// MySQL's EE_CANTCREATEFILE: a file that cannot be made or written.
    pub const CANT_CREATE_FILE_EE: u16 = 1;
    /// A syntax MariaDB still takes and means to drop.
    pub const WARN_DEPRECATED_SYNTAX: u16 = 1287;
    /// "Incorrect DATE value: '…'" (a temporal literal that is not one;
    /// SQLSTATE HY000).
    pub const WRONG_VALUE: u16 = 1525;
}

/// The SQLSTATE MySQL gives an error number ("HY000" when it gives none).
pub fn state_of(code: u16) -> &'static str {
    use codes::*;
    match code {
        CON_COUNT => "08004",
        HANDSHAKE => "08S01",
        CANT_CHANGE_TX_CHARACTERISTICS => "25001",
        // A write in a READ ONLY transaction.
        1792 => "25006",
        // No such account (SHOW CREATE USER, GRANT to one).
        1133 => "28000",
        DBACCESS_DENIED
        | ACCESS_DENIED
        | TABLEACCESS_DENIED
        | SPECIFIC_ACCESS_DENIED
        | NONEXISTING_GRANT => "42000",
        NO_DB => "3D000",
        UNKNOWN_COM => "08S01",
        BAD_NULL | CONSTRAINT_FAILED => "23000",
        BAD_DB => "42000",
        TABLE_EXISTS => "42S01",
        BAD_TABLE | UNKNOWN_TABLE => "42S02",
        NON_UNIQ => "23000",
        SERVER_SHUTDOWN => "08S01",
        BAD_FIELD => "42S22",
        EXPRESSION_REFERS_TO_UNINIT_FIELD => "01000",
        WRONG_FIELD_WITH_GROUP | MIX_OF_GROUP_FUNC_AND_FIELDS => "42000",
        DUP_FIELDNAME => "42S21",
        DUP_KEYNAME | WRONG_USAGE_PLACEMENT | WRONG_PARAMCOUNT_TO_NATIVE_FCT => "42000",
        DUP_ENTRY => "23000",
        PARSE | EMPTY_QUERY | NONUNIQ_TABLE | INVALID_DEFAULT | MULTIPLE_PRI_KEY | TOO_LONG_KEY => {
            "42000"
        }
        NET_PACKET_TOO_LARGE => "08S01",
        TABLE_NOT_FOUND => "42S02",
        WRONG_VALUE_FOR_VAR | WRONG_TYPE_FOR_VAR => "42000",
        LOCK_WAIT_TIMEOUT => "HY000",
        LOCK_DEADLOCK => "40001",
        OUT_OF_RANGE | DATA_OUT_OF_RANGE => "22003",
        DATA_TOO_LONG => "22001",
        TRUNCATED_WRONG_VALUE_FOR_FIELD => "22007",
        TRUNCATED_WRONG_VALUE => "22007",
        WARN_DATA_TRUNCATED | WARN_TOO_FEW_RECORDS | WARN_TOO_MANY_RECORDS => "01000",
        NET_READ_ERROR => "08S01",
        NO_SUCH_INDEX | REGEXP_ERROR | SP_DOES_NOT_EXIST => "42000",
        VIEW_CHECK_FAILED => "44000",
        CANT_DROP_FIELD_OR_KEY => "42000",
        DB_CREATE_EXISTS | DB_DROP_EXISTS => "HY000",
        QUERY_INTERRUPTED | STATEMENT_TIMEOUT => "70100",
        DIVISION_BY_ZERO => "22012",
        WRONG_VALUE_COUNT_ON_ROW => "21S01",
        FIELD_SPECIFIED_TWICE | TOO_MANY_ROWS => "42000",
        BAD_FIELD_SPEC | TOO_BIG_FIELDLENGTH | TOO_BIG_ROWSIZE | WRONG_AUTO_KEY => "42000",
        KEY_COLUMN_DOES_NOT_EXIST | TRUNCATE_ILLEGAL_FK | TOO_MANY_KEY_PARTS => "42000",
        ROW_IS_REFERENCED_2 | NO_REFERENCED_ROW_2 | ROW_IS_REFERENCED => "23000",
        OPERAND_COLUMNS | SUBQUERY_NO_1_ROW | WRONG_NUMBER_OF_COLUMNS_IN_SELECT => "21000",
        WRONG_DB_NAME | WRONG_TABLE_NAME | WRONG_COLUMN_NAME | TOO_LONG_IDENT => "42000",
        UNSUPPORTED_PS => "HY000",
        NOT_SUPPORTED_YET | DERIVED_MUST_HAVE_ALIAS => "42000",
        _ => "HY000",
    }
}
