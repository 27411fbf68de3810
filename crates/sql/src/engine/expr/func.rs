//! Scalar functions.

use schema::Collation;

use super::eval::{
    alternatives_kind, calendar_datetime, compare, fuzzy_datetime, to_datetime, Ctx, TimeLimit,
};
use super::value::{
    self, datetime_micros, datetime_of_micros, days_from_civil, time_of_day_micros, Dec, Val,
    MICROS_PER_DAY, MICROS_PER_SECOND,
};
use super::{Expr, Kind, Scope};
use crate::error::{SqlError, SqlResult};
use crate::value::{Date, Time};

/// Longest string a function builds, in bytes (MySQL's
/// `max_allowed_packet` bounds it there; past it the result is NULL).
pub const STRING_RESULT_BYTES_MAX: usize = 64 << 20;

/// What WEIGHT_STRING weighs, known from its argument's kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightOf {
    /// Text under a collation: utf8mb4_general_ci's weights two bytes a
    /// character (a character past the BMP weighs U+FFFD), utf8mb4_bin's
    /// code points three.
    Text(Collation),
    /// A binary string, or a date or time: its bytes (a date's text).
    Bytes,
    /// A number: NULL, as MariaDB's.
    Nothing,
}

/// A scalar function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Func {
    Concat,
    ConcatWs,
    Length,
    CharLength,
    Upper,
    Lower,
    Substring,
    TrimBoth,
    TrimLeading,
    TrimTrailing,
    Replace,
    Left,
    Right,
    Lpad,
    Rpad,
    Abs,
    Ceil,
    Floor,
    Round,
    Truncate,
    Mod,
    /// GREATEST and LEAST: the collation their strings compare under (the
    /// one they meet in; None: bytes), utf8mb4_general_ci until the
    /// lowering has their arguments.
    Greatest(Option<Collation>),
    Least(Option<Collation>),
    Now,
    CurDate,
    CurTime,
    UtcTimestamp,
    UtcDate,
    UtcTime,
    FromUnixtime,
    ConvertTz,
    Sleep,
    UnixTimestamp,
    DateFormat,
    Date,
    Year,
    Month,
    Day,
    Hour,
    Minute,
    Second,
    DateAdd,
    DateSub,
    LastInsertId,
    ConnectionId,
    Database,
    Version,
    User,
    If,
    IfNull,
    NullIf,
    Coalesce,
    Collate(Collation),
    Repeat,
    Hex,
    SubstringIndex,
    StrToDate,
    Sqrt,
    Sign,
    Reverse,
    Power,
    Locate,
    Instr,
    LastDay,
    DayOfWeek,
    DateDiff,
    Md5,
    Sha1,
    Sha2,
    Crc32,
    /// A JSON function (`expr::json`).
    Json(super::json::JsonFn),
    /// The operators `|`, `&`, `^`, `<<`, `>>` and `~` (not callable by
    /// name): on 64-bit unsigned integers, as MySQL's.
    BitOr,
    BitAnd,
    BitXor,
    ShiftLeft,
    ShiftRight,
    BitNot,
    Uuid,
    Rand,
    Unhex,
    ToBase64,
    FromBase64,
    IsNull,
    Field,
    /// An ENUM's or SET's value in a numeric context (`e + 1`, `s = 3`):
    /// the member's 1-based index (0 for ''), or the SET's bits, as
    /// MariaDB reads one there. Made by lowering, not callable: its
    /// arguments are the value, the members joined by NUL, and 1 for a SET.
    MemberNumber,
    /// An outer query's ENUM or SET column bound in a correlated
    /// subquery: its value (the first argument), which a numeric context
    /// reads as [`Func::MemberNumber`] of the same arguments, as it reads
    /// the column itself. Made by lowering, not callable.
    OuterMember,
    /// An outer query's BIT column bound in a correlated subquery: its
    /// value (the first argument), which a string context reads as its
    /// bytes ([`Func::BitBytes`] of the same arguments: the value and its
    /// width in bytes), as it reads the column itself. Made by lowering,
    /// not callable.
    OuterBit,
    /// `@name` in a statement that assigns user variables: args the name
    /// and the value at the statement's start, read at each evaluation
    /// (the statement's assignments first).
    UserVar,
    /// `@name := value`: args the name and the value, which is the result.
    SetUserVar,
    /// A BIT column's value in a string context: args the value and its
    /// width in bytes; its big-endian bytes, a binary string, as MariaDB
    /// makes it (`CONCAT(b)` of a BIT(8) holding 65 is 'A').
    BitBytes,
    /// A binary string made text (CAST AS CHAR, CONVERT USING utf8mb4):
    /// each byte that is not part of a UTF-8 character becomes '?' with
    /// one warning 1300 naming the bytes from the first such, as MariaDB's
    /// conversion gives it (not U+FFFD); any other value as it is.
    Utf8Checked,
    /// A binary literal (`0x41`, `X'41'`, `b'1000001'`, `_binary'A'`): its
    /// one argument, the bytes, typed binary as MariaDB types it, but
    /// coercible (4), so a column's collation wins over it (`s = 0x41`
    /// compares as `s`), where a CAST AS BINARY (2) wins over the column.
    BinaryLiteral,
    /// A number or a date among strings made text by the lowering (of IF's,
    /// CASE's or COALESCE's alternatives): its one argument, the text, of
    /// the number's coercibility (5), so a binary string among them
    /// decides (`IF(c, 0x41, d)` is binary), where a written CAST AS CHAR
    /// (2) does not give way.
    NumberText,
    /// A binary string argument of a function that counts or cuts
    /// characters (`reads_characters`): its one argument, whose bytes the
    /// function reads as its characters, UTF-8 or not (`LOCATE('a',
    /// X'C38961')` is 3, as MariaDB's).
    Bytes,
    /// A comparison's NULL-able number operand after a text column (`b =
    /// a` of a VARCHAR b and an INT a): args the operand and the column;
    /// true when the comparison reads the text as a DECIMAL (against an
    /// integer; else a DOUBLE). The operand's value; when it is NULL, the
    /// text is read as that number first, for its warning, as MariaDB's
    /// comparator reads the left operand before it finds the right one
    /// NULL (DML seed 182: a strict write fails on it).
    NullAfterText(bool),
    /// A comparison's text operand that is no column, before a number
    /// (`INSERT(b, 2, 1, 'Q') < MOD(f, 0)`): its text read as the number
    /// the comparison reads (a DECIMAL against an integer: true; else a
    /// DOUBLE), before the other operand is evaluated, so its warning
    /// comes first, as MariaDB's comparator reads the left operand first
    /// (DML seed 356). Any other value passes as it is.
    TextAsNumber(bool),
    /// A constant read once before the rows with a warning (a string
    /// compared with a number column): args the value, a site number, the
    /// warning's code and message. The first evaluation in the statement
    /// leaves the warning, as MariaDB reads such a constant at the first
    /// row it compares (none for a table without rows).
    WarnOnce,
    /// A condition MariaDB tests row by row though it is constant: a
    /// comparison with a subquery that reads a table, in an UPDATE's or
    /// DELETE's WHERE (its optimizer does not evaluate such an expensive
    /// constant before the rows). Args the condition; never a constant,
    /// so it is tested in its place among the conjuncts.
    PerRow,
    FindInSet,
    Elt,
    /// ELT in a numeric context: the argument taken read as a number
    /// (`val_real` of MariaDB's ELT reads the argument's own: a DATE's
    /// 20251013, not the 2025 of its text), not made text first.
    EltNumber,
    Ascii,
    Space,
    Exp,
    Ln,
    Log,
    Log2,
    Log10,
    Sin,
    Cos,
    Tan,
    Atan,
    Radians,
    Degrees,
    Weekday,
    DayName,
    MonthName,
    DayOfYear,
    Quarter,
    ToDays,
    BitCount,
    InetAton,
    InetNtoa,
    TimestampDiff,
    RegexpLike,
    RegexpReplace,
    Format,
    Conv,
    /// MariaDB's CHR(n): CHAR(n USING utf8mb4), NULL with 1300 where its
    /// bytes are no UTF-8.
    Chr,
    /// CONVERT(bytes USING latin1): latin1's characters of the bytes, as
    /// the UTF-8 text Skarv holds.
    Latin1Text,
    /// BENCHMARK(n, expr): expr evaluated n times, 0.
    Benchmark,
    /// GET_FORMAT(DATE | TIME | DATETIME | TIMESTAMP, 'USA' | …): the
    /// dialect makes the keyword a string.
    GetFormat,
    /// STRCMP: the collation its two strings compare under (the one they
    /// meet in; None: bytes), utf8mb4_general_ci until the lowering has
    /// its arguments.
    Strcmp(Option<Collation>),
    Char,
    TimeToSec,
    SecToTime,
    TimeDiff,
    MakeDate,
    Week,
    FoundRows,
    RowCount,
    GetLock,
    ReleaseLock,
    ReleaseAllLocks,
    IsFreeLock,
    IsUsedLock,
    Timestamp,
    TimeOf,
    RandSeeded,
    Pi,
    Asin,
    Acos,
    Cot,
    Ord,
    BitLength,
    Quote,
    Insert,
    Soundex,
    /// MariaDB's NATURAL_SORT_KEY(s): s with each run of digits written
    /// so that text order is number order.
    NaturalSortKey,
    /// WEIGHT_STRING(s [AS CHAR(n) | AS BINARY(n)]): what s sorts as.
    WeightString(WeightOf),
    Microsecond,
    ToSeconds,
    FromDays,
    YearWeek,
    WeekOfYear,
    MakeTime,
    PeriodAdd,
    PeriodDiff,
    AddTime,
    SubTime,
    TimeFormat,
    UuidShort,
    IsIpv4,
    IsIpv6,
    Inet6Aton,
    Inet6Ntoa,
    /// MySQL 8's UUID_TO_BIN(uuid [, swap]).
    UuidToBin,
    /// MySQL 8's BIN_TO_UUID(bytes [, swap]).
    BinToUuid,
    /// MySQL 8's IS_UUID(text).
    IsUuid,
    /// COMPRESS(text): MySQL's zlib layout.
    Compress,
    Uncompress,
    UncompressedLength,
    /// AES_ENCRYPT(text, key): AES-128-ECB with MySQL's key folding.
    AesEncrypt,
    AesDecrypt,
    RandomBytes,
    Crc32c,
    /// MariaDB's LAST_VALUE(a, …, z): each evaluated, z given.
    LastValue,
    /// INTERVAL(n, n1, n2, …): how many of the sorted n1, n2, … are at
    /// most n (-1 for a NULL n).
    IntervalIndex,
    RegexpInstr,
    RegexpSubstr,
    ExportSet,
    MakeSet,
}

fn arity(name: &str, args: &[Expr], min: usize, max: usize) -> SqlResult<()> {
    if args.len() < min || args.len() > max {
        return Err(SqlError::new(
            1582,
            format!("Incorrect parameter count in the call to native function '{name}'"),
        ));
    }
    Ok(())
}

/// MariaDB's `CURRENT_ROLE()`: the session's role, none (Skarv has no
/// roles), a NULL string.
pub fn no_role() -> Expr {
    Expr::Cast(Box::new(Expr::Lit(Val::Null)), super::CastTo::Char)
}

/// A call by name.
pub fn lower_call(name: &str, args: Vec<Expr>) -> SqlResult<Expr> {
    use Func as F;
    if name == "CURRENT_ROLE" {
        arity(name, &args, 0, 0)?;
        return Ok(no_role());
    }
    let (f, min, max) = match name {
        "CONCAT" => (F::Concat, 1, usize::MAX),
        "CONCAT_WS" => (F::ConcatWs, 2, usize::MAX),
        "LENGTH" | "OCTET_LENGTH" => (F::Length, 1, 1),
        "CHAR_LENGTH" | "CHARACTER_LENGTH" => (F::CharLength, 1, 1),
        "UPPER" | "UCASE" => (F::Upper, 1, 1),
        "LOWER" | "LCASE" => (F::Lower, 1, 1),
        "SUBSTRING" | "SUBSTR" | "MID" => (F::Substring, 2, 3),
        "TRIM" => (F::TrimBoth, 1, 2),
        "LTRIM" => (F::TrimLeading, 1, 1),
        "RTRIM" => (F::TrimTrailing, 1, 1),
        "REPLACE" => (F::Replace, 3, 3),
        "LEFT" => (F::Left, 2, 2),
        "RIGHT" => (F::Right, 2, 2),
        "LPAD" => (F::Lpad, 3, 3),
        "RPAD" => (F::Rpad, 3, 3),
        "ABS" => (F::Abs, 1, 1),
        "CEIL" | "CEILING" => (F::Ceil, 1, 1),
        "FLOOR" => (F::Floor, 1, 1),
        "ROUND" => (F::Round, 1, 2),
        "TRUNCATE" => (F::Truncate, 2, 2),
        "MOD" => (F::Mod, 2, 2),
        "GREATEST" => (
            F::Greatest(Some(Collation::Utf8mb4GeneralCi)),
            2,
            usize::MAX,
        ),
        "LEAST" => (F::Least(Some(Collation::Utf8mb4GeneralCi)), 2, usize::MAX),
        "NOW" | "CURRENT_TIMESTAMP" | "LOCALTIME" | "LOCALTIMESTAMP" | "SYSDATE" => (F::Now, 0, 1),
        "CURDATE" | "CURRENT_DATE" => (F::CurDate, 0, 0),
        "CURTIME" | "CURRENT_TIME" => (F::CurTime, 0, 1),
        "UTC_TIMESTAMP" => (F::UtcTimestamp, 0, 1),
        "UTC_DATE" => (F::UtcDate, 0, 0),
        "UTC_TIME" => (F::UtcTime, 0, 1),
        "FROM_UNIXTIME" => (F::FromUnixtime, 1, 2),
        "CONVERT_TZ" => (F::ConvertTz, 3, 3),
        "SLEEP" => (F::Sleep, 1, 1),
        "UNIX_TIMESTAMP" => (F::UnixTimestamp, 0, 1),
        "DATE_FORMAT" => (F::DateFormat, 2, 2),
        "DATE" => (F::Date, 1, 1),
        "YEAR" => (F::Year, 1, 1),
        "MONTH" => (F::Month, 1, 1),
        "DAY" | "DAYOFMONTH" => (F::Day, 1, 1),
        "HOUR" => (F::Hour, 1, 1),
        "MINUTE" => (F::Minute, 1, 1),
        "SECOND" => (F::Second, 1, 1),
        // ADDDATE(d, n) and SUBDATE(d, n): n days.
        "ADDDATE" | "SUBDATE" if args.len() == 2 => {
            let mut args = args;
            args.push(Expr::Lit(Val::str("DAY")));
            let f = if name == "ADDDATE" {
                F::DateAdd
            } else {
                F::DateSub
            };
            return Ok(Expr::Func(f, args));
        }
        // MariaDB's ADD_MONTHS(d, n): DATE_ADD(d, INTERVAL n MONTH).
        "ADD_MONTHS" if args.len() == 2 => {
            let mut args = args;
            args.push(Expr::Lit(Val::str("MONTH")));
            return Ok(Expr::Func(F::DateAdd, args));
        }
        "ADD_MONTHS" => (F::DateAdd, 2, 2),
        "DATE_ADD" | "ADDDATE" => (F::DateAdd, 3, 3),
        "DATE_SUB" | "SUBDATE" => (F::DateSub, 3, 3),
        "LAST_INSERT_ID" => (F::LastInsertId, 0, 1),
        "CONNECTION_ID" => (F::ConnectionId, 0, 0),
        "DATABASE" | "SCHEMA" => (F::Database, 0, 0),
        "VERSION" => (F::Version, 0, 0),
        "USER" | "CURRENT_USER" | "SESSION_USER" | "SYSTEM_USER" => (F::User, 0, 0),
        "IF" => (F::If, 3, 3),
        "IFNULL" => (F::IfNull, 2, 2),
        "NULLIF" => (F::NullIf, 2, 2),
        "COALESCE" => (F::Coalesce, 1, usize::MAX),
        "REPEAT" => (F::Repeat, 2, 2),
        "HEX" => (F::Hex, 1, 1),
        "SUBSTRING_INDEX" => (F::SubstringIndex, 3, 3),
        "STR_TO_DATE" => (F::StrToDate, 2, 2),
        "SQRT" => (F::Sqrt, 1, 1),
        "SIGN" => (F::Sign, 1, 1),
        "REVERSE" => (F::Reverse, 1, 1),
        "POWER" | "POW" => (F::Power, 2, 2),
        "LOCATE" | "POSITION" => (F::Locate, 2, 3),
        "INSTR" => (F::Instr, 2, 2),
        "LAST_DAY" => (F::LastDay, 1, 1),
        "DAYOFWEEK" => (F::DayOfWeek, 1, 1),
        "DATEDIFF" => (F::DateDiff, 2, 2),
        "MD5" => (F::Md5, 1, 1),
        "SHA1" | "SHA" => (F::Sha1, 1, 1),
        "SHA2" => (F::Sha2, 2, 2),
        "CRC32" => (F::Crc32, 1, 2),
        "CRC32C" => (F::Crc32c, 1, 2),
        "COMPRESS" => (F::Compress, 1, 1),
        "UNCOMPRESS" => (F::Uncompress, 1, 1),
        "UNCOMPRESSED_LENGTH" => (F::UncompressedLength, 1, 1),
        "AES_ENCRYPT" => (F::AesEncrypt, 2, 2),
        "AES_DECRYPT" => (F::AesDecrypt, 2, 2),
        "RANDOM_BYTES" => (F::RandomBytes, 1, 1),
        "LAST_VALUE" => (F::LastValue, 1, usize::MAX),
        "INTERVAL" => (F::IntervalIndex, 2, usize::MAX),
        "UUID" => (F::Uuid, 0, 0),
        "RAND" if args.len() == 1 => {
            // Each RAND(seed) of a statement has its own sequence, kept in
            // the statement's Env under this call site's number.
            static SITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let site = SITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let mut args = args;
            args.push(Expr::Lit(Val::UInt(site)));
            return Ok(Expr::Func(F::RandSeeded, args));
        }
        "RAND" => (F::Rand, 0, 0),
        "PI" => (F::Pi, 0, 0),
        "ASIN" => (F::Asin, 1, 1),
        "ACOS" => (F::Acos, 1, 1),
        "COT" => (F::Cot, 1, 1),
        "ORD" => (F::Ord, 1, 1),
        "BIT_LENGTH" => (F::BitLength, 1, 1),
        "QUOTE" => (F::Quote, 1, 1),
        "INSERT" => (F::Insert, 4, 4),
        "SOUNDEX" => (F::Soundex, 1, 1),
        "NATURAL_SORT_KEY" => (F::NaturalSortKey, 1, 1),
        // Its argument's kind picks what it weighs (the lowering's).
        "WEIGHT_STRING" => (F::WeightString(WeightOf::Nothing), 1, 3),
        "MICROSECOND" => (F::Microsecond, 1, 1),
        "TO_SECONDS" => (F::ToSeconds, 1, 1),
        "FROM_DAYS" => (F::FromDays, 1, 1),
        "YEARWEEK" => (F::YearWeek, 1, 2),
        "WEEKOFYEAR" => (F::WeekOfYear, 1, 1),
        "MAKETIME" => (F::MakeTime, 3, 3),
        "PERIOD_ADD" => (F::PeriodAdd, 2, 2),
        "PERIOD_DIFF" => (F::PeriodDiff, 2, 2),
        "ADDTIME" => (F::AddTime, 2, 2),
        "SUBTIME" => (F::SubTime, 2, 2),
        "TIME_FORMAT" => (F::TimeFormat, 2, 2),
        "UUID_SHORT" => (F::UuidShort, 0, 0),
        "IS_IPV4" => (F::IsIpv4, 1, 1),
        "IS_IPV6" => (F::IsIpv6, 1, 1),
        "INET6_ATON" => (F::Inet6Aton, 1, 1),
        "INET6_NTOA" => (F::Inet6Ntoa, 1, 1),
        "UUID_TO_BIN" => (F::UuidToBin, 1, 2),
        "BIN_TO_UUID" => (F::BinToUuid, 1, 2),
        "IS_UUID" => (F::IsUuid, 1, 1),
        // MariaDB's take two arguments (MySQL's take up to six).
        "REGEXP_INSTR" => (F::RegexpInstr, 2, 2),
        "REGEXP_SUBSTR" => (F::RegexpSubstr, 2, 2),
        "EXPORT_SET" => (F::ExportSet, 3, 5),
        "MAKE_SET" => (F::MakeSet, 2, usize::MAX),
        "UNHEX" => (F::Unhex, 1, 1),
        "TO_BASE64" => (F::ToBase64, 1, 1),
        "FROM_BASE64" => (F::FromBase64, 1, 1),
        "ISNULL" => (F::IsNull, 1, 1),
        "FIELD" => (F::Field, 2, usize::MAX),
        "FIND_IN_SET" => (F::FindInSet, 2, 2),
        "ELT" => (F::Elt, 2, usize::MAX),
        "ASCII" => (F::Ascii, 1, 1),
        "SPACE" => (F::Space, 1, 1),
        "EXP" => (F::Exp, 1, 1),
        "LN" => (F::Ln, 1, 1),
        "LOG" => (F::Log, 1, 2),
        "LOG2" => (F::Log2, 1, 1),
        "LOG10" => (F::Log10, 1, 1),
        "SIN" => (F::Sin, 1, 1),
        "COS" => (F::Cos, 1, 1),
        "TAN" => (F::Tan, 1, 1),
        "ATAN" => (F::Atan, 1, 2),
        "ATAN2" => (F::Atan, 2, 2),
        "RADIANS" => (F::Radians, 1, 1),
        "DEGREES" => (F::Degrees, 1, 1),
        "WEEKDAY" => (F::Weekday, 1, 1),
        "DAYNAME" => (F::DayName, 1, 1),
        "MONTHNAME" => (F::MonthName, 1, 1),
        "DAYOFYEAR" => (F::DayOfYear, 1, 1),
        "QUARTER" => (F::Quarter, 1, 1),
        "TO_DAYS" => (F::ToDays, 1, 1),
        "BIT_COUNT" => (F::BitCount, 1, 1),
        "INET_ATON" => (F::InetAton, 1, 1),
        "INET_NTOA" => (F::InetNtoa, 1, 1),
        "TIMESTAMPDIFF" => (F::TimestampDiff, 3, 3),
        "REGEXP_LIKE" => (F::RegexpLike, 2, 3),
        "REGEXP_REPLACE" => (F::RegexpReplace, 3, 3),
        // FORMAT(x, d, locale): en_US only (the third is not taken yet).
        "FORMAT" => (F::Format, 2, 3),
        "CONV" => (F::Conv, 3, 3),
        "BIN" => {
            arity(name, &args, 1, 1)?;
            let mut args = args;
            args.extend([Expr::Lit(Val::Int(10)), Expr::Lit(Val::Int(2))]);
            return Ok(Expr::Func(F::Conv, args));
        }
        "OCT" => {
            arity(name, &args, 1, 1)?;
            let mut args = args;
            args.extend([Expr::Lit(Val::Int(10)), Expr::Lit(Val::Int(8))]);
            return Ok(Expr::Func(F::Conv, args));
        }
        "STRCMP" => (F::Strcmp(Some(Collation::Utf8mb4GeneralCi)), 2, 2),
        "CHAR" => (F::Char, 1, usize::MAX),
        "CHR" => (F::Chr, 1, 1),
        "BENCHMARK" => (F::Benchmark, 2, 2),
        "GET_FORMAT" => (F::GetFormat, 2, 2),
        "TIME_TO_SEC" => (F::TimeToSec, 1, 1),
        "SEC_TO_TIME" => (F::SecToTime, 1, 1),
        "TIMEDIFF" => (F::TimeDiff, 2, 2),
        "MAKEDATE" => (F::MakeDate, 2, 2),
        "WEEK" => (F::Week, 1, 2),
        "FOUND_ROWS" => (F::FoundRows, 0, 0),
        "ROW_COUNT" => (F::RowCount, 0, 0),
        "GET_LOCK" => (F::GetLock, 2, 2),
        "RELEASE_LOCK" => (F::ReleaseLock, 1, 1),
        "RELEASE_ALL_LOCKS" => (F::ReleaseAllLocks, 0, 0),
        "IS_FREE_LOCK" => (F::IsFreeLock, 1, 1),
        "IS_USED_LOCK" => (F::IsUsedLock, 1, 1),
        "TIMESTAMP" => (F::Timestamp, 1, 2),
        "TIME" => (F::TimeOf, 1, 1),
        // TIMESTAMPADD(unit, n, d) is DATE_ADD(d, INTERVAL n unit).
        "TIMESTAMPADD" => {
            arity(name, &args, 3, 3)?;
            let mut args = args;
            // (unit, n, d) to (d, n, unit).
            args.swap(0, 2);
            return Ok(Expr::Func(F::DateAdd, args));
        }
        _ => match super::json::JsonFn::by_name(name) {
            Some((f, min, max)) => (F::Json(f), min, max),
            None => {
                return Err(SqlError::new(
                    crate::error::codes::SP_DOES_NOT_EXIST,
                    format!("FUNCTION {name} does not exist"),
                ))
            }
        },
    };
    arity(name, &args, min, max)?;
    // CHAR(0x41) reads a hex or bit literal as its number, as MariaDB's
    // (its `x'41'` reads as 0 there: a difference, docs/sql.md).
    let args = match f {
        F::Char | F::Chr => args
            .into_iter()
            .map(|a| match a {
                a @ Expr::Func(F::BinaryLiteral, _) => super::bit_literal_number(a),
                a => a,
            })
            .collect(),
        _ => args,
    };
    Ok(Expr::Func(f, args))
}

/// The fractional digits a `NOW(fsp)`-like call asks for (a literal).
fn fsp_arg(args: &[Expr]) -> u8 {
    match args.first() {
        Some(Expr::Lit(Val::Int(f))) => (*f).clamp(0, 6) as u8,
        _ => 0,
    }
}

/// The fractional digits of a string literal first argument, as MySQL
/// shows a date and time made of it (None: not a string literal).
fn literal_fsp(args: &[Expr]) -> Option<u8> {
    match args.first() {
        Some(Expr::Lit(Val::Str(b))) => Some(
            String::from_utf8_lossy(b)
                .split_once('.')
                .map_or(0, |(_, f)| f.trim().len().min(6) as u8),
        ),
        _ => None,
    }
}

/// The local date and time `micros` (UTC) is in a zone `tz_secs` east of
/// UTC, its microseconds cut to `fsp` digits.
fn local_datetime(micros: i64, tz_secs: i64, fsp: u32) -> Val {
    let (d, t) = datetime_of_micros(micros + tz_secs * MICROS_PER_SECOND).unwrap_or_default();
    let unit = 10u32.pow(6 - fsp.min(6));
    Val::DateTime(
        d,
        Time {
            micros: t.micros / unit * unit,
            ..t
        },
    )
}

/// The zone a `CONVERT_TZ` argument names, in seconds east of UTC: an
/// offset or `SYSTEM` (the SQL node's zone, UTC); named zones need tz
/// tables the SQL node does not have (None: the result is NULL, as
/// MySQL's without them).
fn zone_secs(zone: &str) -> Option<i64> {
    if zone.eq_ignore_ascii_case("SYSTEM") {
        return Some(0);
    }
    crate::engine::session::offset_secs(zone)
}

/// Longest one wait of `SLEEP` between checks for `KILL QUERY` and the
/// statement's deadline, in milliseconds.
pub const SLEEP_SLICE_MS: u64 = 10;
/// The display length less decimals from which MariaDB's FLOOR and CEIL
/// of a DECIMAL are a DECIMAL rather than a BIGINT (its
/// `DECIMAL_LONGLONG_DIGITS` less 2).
pub const INT_VAL_DECIMAL_LENGTH_MIN: u32 = 20;

/// GET_FORMAT's result column, in characters (MariaDB's VARCHAR(17)).
pub const GET_FORMAT_CHARS: u32 = 17;

/// Seconds `SLEEP` may be asked to wait (a year; more is taken as this).
pub const SLEEP_SECONDS_MAX: f64 = 365.0 * 86_400.0;

fn text_kind() -> Kind {
    Kind::Str {
        collation: Some(Collation::Utf8mb4GeneralCi),
    }
}

impl Func {
    /// The kind of the function's values.
    pub fn kind(self, args: &[Expr], scope: &Scope<'_>) -> Kind {
        use Func as F;
        let arg = |i: usize| args.get(i).map_or(Kind::Null, |a| scope.kind(a));
        match self {
            // A read of a variable its statement creates has the kind of
            // the value assigned (the third argument, never evaluated).
            F::UserVar => arg(args.len() - 1),
            F::WarnOnce
            | F::OuterMember
            | F::OuterBit
            | F::PerRow
            | F::Utf8Checked
            | F::NumberText
            | F::Bytes
            | F::NullAfterText(_) => arg(0),
            F::TextAsNumber(_) => Kind::Double,
            F::BitBytes | F::BinaryLiteral => Kind::Str { collation: None },
            // The collation the strings meet in: a binary string's where it
            // is the most binding.
            F::Concat | F::ConcatWs => {
                super::eval::shared_text_kind(args.iter(), scope).unwrap_or_else(text_kind)
            }
            F::SetUserVar => arg(1),
            F::Substring
            | F::TrimBoth
            | F::TrimLeading
            | F::TrimTrailing
            | F::Replace
            | F::Left
            | F::Right
            | F::Lpad
            | F::Rpad
            | F::Upper
            | F::Lower
            | F::Quote => match arg(0) {
                Kind::Str { collation } => Kind::Str { collation },
                _ => text_kind(),
            },
            F::DateFormat | F::Database | F::Version | F::User | F::Hex => text_kind(),
            F::Md5
            | F::Sha1
            | F::Sha2
            | F::Uuid
            | F::ToBase64
            | F::DayName
            | F::MonthName
            | F::Space
            | F::InetNtoa => text_kind(),
            F::Unhex
            | F::FromBase64
            | F::Char
            | F::Compress
            | F::Uncompress
            | F::AesEncrypt
            | F::AesDecrypt
            | F::RandomBytes => Kind::Str { collation: None },
            F::LastValue => arg(args.len().saturating_sub(1)),
            F::IntervalIndex => Kind::Int { unsigned: false },
            F::RegexpReplace | F::Format | F::Conv | F::Chr | F::GetFormat | F::Latin1Text => {
                text_kind()
            }
            F::Benchmark => Kind::Int { unsigned: false },
            F::SecToTime | F::TimeDiff => Kind::Time { fsp: 0 },
            F::MakeDate => Kind::Date,
            F::Timestamp => match (arg(0), literal_fsp(args)) {
                (Kind::DateTime { fsp }, _) => Kind::DateTime { fsp },
                (_, Some(fsp)) => Kind::DateTime { fsp },
                _ => Kind::DateTime { fsp: 0 },
            },
            // TIME(x) keeps x's digits; text is read with all six,
            // unless it is a literal whose digits can be counted.
            F::TimeOf => match (arg(0), literal_fsp(args)) {
                (Kind::Time { fsp } | Kind::DateTime { fsp }, _) => Kind::Time { fsp },
                (Kind::Dec { scale }, _) => Kind::Time { fsp: scale.min(6) },
                (Kind::Double, _) => Kind::Time { fsp: 6 },
                (Kind::Str { .. }, Some(fsp)) => Kind::Time { fsp },
                (Kind::Str { .. }, None) => Kind::Time { fsp: 6 },
                _ => Kind::Time { fsp: 0 },
            },
            F::Elt | F::EltNumber => match alternatives_kind(args.iter().skip(1), scope) {
                k @ Kind::Str { .. } => k,
                _ => text_kind(),
            },
            F::Insert => match arg(0) {
                Kind::Str { collation } => Kind::Str { collation },
                _ => text_kind(),
            },
            F::WeightString(_) => Kind::Str { collation: None },
            F::Soundex
            | F::NaturalSortKey
            | F::TimeFormat
            | F::Inet6Ntoa
            | F::BinToUuid
            | F::RegexpSubstr
            | F::ExportSet
            | F::MakeSet => text_kind(),
            F::Inet6Aton | F::UuidToBin => Kind::Str { collation: None },
            F::Json(f) => f.kind(),
            F::RandSeeded | F::Pi | F::Asin | F::Acos | F::Cot => Kind::Double,
            F::Ord
            | F::BitLength
            | F::Microsecond
            | F::ToSeconds
            | F::YearWeek
            | F::WeekOfYear
            | F::PeriodAdd
            | F::PeriodDiff
            | F::IsIpv4
            | F::IsIpv6
            | F::IsUuid
            | F::RegexpInstr => Kind::Int { unsigned: false },
            F::UuidShort => Kind::Int { unsigned: true },
            F::FromDays => Kind::Date,
            F::MakeTime => Kind::Time {
                fsp: match arg(2) {
                    Kind::Dec { scale } => scale.min(6),
                    Kind::Double | Kind::Str { .. } => 6,
                    _ => 0,
                },
            },
            F::AddTime | F::SubTime => {
                let fsp = |k: Kind| match k {
                    Kind::DateTime { fsp } | Kind::Time { fsp } => fsp,
                    Kind::Dec { scale } => scale.min(6),
                    Kind::Double | Kind::Str { .. } => 6,
                    _ => 0,
                };
                match arg(0) {
                    Kind::DateTime { fsp: f } => Kind::DateTime {
                        fsp: f.max(fsp(arg(1))),
                    },
                    Kind::Time { fsp: f } => Kind::Time {
                        fsp: f.max(fsp(arg(1))),
                    },
                    // A string may be a date and time or a time: the
                    // result is text, as MariaDB's.
                    _ => text_kind(),
                }
            }
            F::Rand
            | F::Exp
            | F::Ln
            | F::Log
            | F::Log2
            | F::Log10
            | F::Sin
            | F::Cos
            | F::Tan
            | F::Atan
            | F::Radians
            | F::Degrees => Kind::Double,
            // BIT_COUNT is a signed INT, as MariaDB's (`BIT_COUNT(12) - 20`
            // is -18, not 1690).
            F::BitCount => Kind::Int { unsigned: false },
            F::Crc32
            | F::Crc32c
            | F::UncompressedLength
            | F::InetAton
            | F::BitOr
            | F::BitAnd
            | F::BitXor
            | F::ShiftLeft
            | F::ShiftRight
            | F::BitNot => Kind::Int { unsigned: true },
            F::IsNull
            | F::Field
            | F::MemberNumber
            | F::FindInSet
            | F::Ascii
            | F::Weekday
            | F::DayOfYear
            | F::Quarter
            | F::ToDays
            | F::TimestampDiff
            | F::RegexpLike
            | F::Strcmp(_)
            | F::TimeToSec
            | F::Week => Kind::Int { unsigned: false },
            F::Repeat | F::SubstringIndex | F::Reverse => match arg(0) {
                Kind::Str { collation } => Kind::Str { collation },
                _ => text_kind(),
            },
            F::Sqrt | F::Power => Kind::Double,
            F::Sign | F::Locate | F::Instr | F::DayOfWeek | F::DateDiff => {
                Kind::Int { unsigned: false }
            }
            F::LastDay => Kind::Date,
            F::StrToDate => match args.get(1) {
                Some(Expr::Lit(f)) => {
                    let f = f.to_text();
                    let timed = [
                        "%H", "%i", "%s", "%S", "%T", "%h", "%I", "%k", "%l", "%f", "%r",
                    ]
                    .iter()
                    .any(|x| f.contains(x));
                    if timed {
                        Kind::DateTime {
                            fsp: if f.contains("%f") { 6 } else { 0 },
                        }
                    } else {
                        Kind::Date
                    }
                }
                _ => Kind::DateTime { fsp: 0 },
            },
            F::Collate(c) => Kind::Str { collation: Some(c) },
            F::Length
            | F::CharLength
            | F::Year
            | F::Month
            | F::Day
            | F::Hour
            | F::Minute
            | F::Second => Kind::Int { unsigned: false },
            F::LastInsertId | F::ConnectionId | F::FoundRows => Kind::Int { unsigned: true },
            F::RowCount | F::GetLock | F::ReleaseLock | F::IsFreeLock => {
                Kind::Int { unsigned: false }
            }
            F::ReleaseAllLocks | F::IsUsedLock => Kind::Int { unsigned: true },
            F::Sleep => Kind::Int { unsigned: false },
            F::CurTime | F::UtcTime => Kind::Time { fsp: fsp_arg(args) },
            F::UtcDate => Kind::Date,
            F::FromUnixtime if args.len() == 2 => text_kind(),
            F::FromUnixtime => Kind::DateTime {
                fsp: match arg(0) {
                    Kind::Dec { scale } => scale.min(6),
                    Kind::Double | Kind::Str { .. } => 6,
                    _ => 0,
                },
            },
            F::ConvertTz => match (arg(0), literal_fsp(args)) {
                (Kind::DateTime { fsp }, _) => Kind::DateTime { fsp },
                (_, Some(fsp)) => Kind::DateTime { fsp },
                _ => Kind::DateTime { fsp: 6 },
            },
            F::UnixTimestamp => Kind::Int { unsigned: false },
            F::Abs | F::Mod => match arg(0) {
                k if k.is_numeric() => k,
                _ => Kind::Double,
            },
            F::Ceil | F::Floor => match arg(0) {
                Kind::Int { unsigned } => Kind::Int { unsigned },
                // MariaDB's: a DECIMAL whose display length less its
                // decimals reaches 20 (a whole part past 17 digits) gives
                // a DECIMAL, a shorter one a BIGINT. Where the length is
                // not known here (a computed DECIMAL), a BIGINT.
                Kind::Dec { .. }
                    if scope
                        .decimal_whole_length(&args[0])
                        .is_some_and(|l| l >= INT_VAL_DECIMAL_LENGTH_MIN) =>
                {
                    Kind::Dec { scale: 0 }
                }
                // Unsigned of an unsigned DECIMAL, as MariaDB's
                // `unsigned_flag` (`-1 * CEIL(ud)` is 1690).
                Kind::Dec { .. } => Kind::Int {
                    unsigned: scope.unsigned_number(&args[0]),
                },
                _ => Kind::Double,
            },
            F::Round | F::Truncate => {
                let digits = match args.get(1) {
                    Some(Expr::Lit(Val::Int(d))) => (*d).clamp(0, 30) as u8,
                    _ => 0,
                };
                match arg(0) {
                    Kind::Int { unsigned } => Kind::Int { unsigned },
                    // Shown with the digits asked for, as MariaDB's
                    // (ROUND(1.23, 6) is 1.230000; ROUND(1/3, 6) 0.333333,
                    // from the quotient's digits).
                    Kind::Dec { .. } => Kind::Dec { scale: digits },
                    _ => Kind::Double,
                }
            }
            F::Greatest(_) | F::Least(_) | F::Coalesce => alternatives_kind(args.iter(), scope),
            F::IfNull => alternatives_kind(args.iter().take(2), scope),
            F::If => alternatives_kind(args.iter().skip(1).take(2), scope),
            F::NullIf => arg(0),
            F::Now | F::UtcTimestamp => Kind::DateTime { fsp: fsp_arg(args) },
            F::CurDate | F::Date => Kind::Date,
            F::DateAdd | F::DateSub => match arg(0) {
                Kind::Date => {
                    let unit = match args.get(2) {
                        Some(Expr::Lit(v)) => v.to_text().to_ascii_uppercase(),
                        _ => String::new(),
                    };
                    if matches!(
                        unit.as_str(),
                        "DAY" | "WEEK" | "MONTH" | "QUARTER" | "YEAR" | "YEAR_MONTH"
                    ) {
                        Kind::Date
                    } else if unit.ends_with("MICROSECOND") {
                        Kind::DateTime { fsp: 6 }
                    } else {
                        Kind::DateTime { fsp: 0 }
                    }
                }
                Kind::DateTime { fsp } => Kind::DateTime {
                    fsp: if Func::interval_is_micro(args) {
                        6
                    } else {
                        fsp
                    },
                },
                _ => text_kind(),
            },
        }
    }

    /// Whether DATE_ADD/DATE_SUB's `args` name a unit of microseconds
    /// (`MICROSECOND`, `SECOND_MICROSECOND`, ...), whose result has six
    /// fractional digits.
    pub fn interval_is_micro(args: &[Expr]) -> bool {
        matches!(args.get(2), Some(Expr::Lit(v))
            if v.to_text().to_ascii_uppercase().ends_with("MICROSECOND"))
    }

    /// Whether the result can be NULL, given whether each argument can.
    pub fn nullable(self, mut args: impl Iterator<Item = bool>) -> bool {
        use Func as F;
        match self {
            F::Now
            | F::CurDate
            | F::CurTime
            | F::UtcTimestamp
            | F::UtcDate
            | F::UtcTime
            | F::FoundRows
            | F::RowCount
            | F::ConnectionId
            | F::Version => false,
            F::Rand | F::IsNull | F::Field | F::IntervalIndex => false,
            F::RandSeeded | F::Pi | F::UuidShort | F::IsIpv4 | F::IsIpv6 => false,
            // MariaDB's string functions that say so of any argument
            // (their result may pass max_allowed_packet), and USER(),
            // UUID() and QUOTE() too: their metadata is NULL-able there.
            // UNIX_TIMESTAMP too (of a date out of its range: NULL).
            F::Concat | F::Upper | F::Lower | F::Quote | F::User | F::Uuid | F::UnixTimestamp => {
                true
            }
            F::Database | F::NullIf => true,
            // IF(c, a, b): NULL where a or b is, and (MariaDB's metadata)
            // where the condition is: `IF(i > 1, 2, 3)` says NULL-able.
            F::If => args.any(|n| n),
            // NULL only when every argument is.
            F::Coalesce | F::IfNull => args.all(|n| n),
            // NULL only of a NULL argument, as MariaDB's metadata says.
            F::Length
            | F::CharLength
            | F::Abs
            | F::Round
            | F::Truncate
            | F::Ceil
            | F::Floor
            | F::Sign
            | F::BitCount
            | F::BitAnd
            | F::BitOr
            | F::BitXor
            | F::BitNot
            | F::ShiftLeft
            | F::ShiftRight
            | F::Greatest(_)
            | F::Least(_)
            | F::Ascii
            | F::Ord
            | F::Locate
            | F::Instr
            | F::Strcmp(_)
            | F::Crc32
            | F::FindInSet
            | F::Degrees
            | F::Radians
            // `x REGEXP p`: a bad pattern is an error (1139), not NULL.
            | F::RegexpLike => args.any(|n| n),
            // LAST_INSERT_ID(expr) is NULL where expr is.
            F::LastInsertId => args.any(|n| n),
            _ => true,
        }
    }

    /// Whether a call with constant arguments is constant in a statement.
    pub fn is_deterministic(self) -> bool {
        // SLEEP waits on every call (per row), as MySQL's; UUID, UUID_SHORT,
        // RAND and RANDOM_BYTES give a new value each call; the lock functions act each
        // call; LAST_INSERT_ID(expr) changes what LAST_INSERT_ID() reads
        // later in the same statement.
        !matches!(
            self,
            Func::Sleep
                | Func::Uuid
                | Func::Rand
                | Func::RandSeeded
                | Func::UuidShort
                | Func::LastInsertId
                | Func::UserVar
                | Func::SetUserVar
                | Func::WarnOnce
                | Func::PerRow
                | Func::GetLock
                | Func::ReleaseLock
                | Func::ReleaseAllLocks
                | Func::IsFreeLock
                | Func::IsUsedLock
                | Func::RandomBytes
                | Func::Benchmark
        )
    }

    /// The characters of a string result, as MariaDB's
    /// `fix_length_and_dec` counts them (its `max_char_length`): what
    /// the result's column length says and what `CREATE TABLE … SELECT`
    /// makes its column of. A length the arguments do not bound (REPEAT
    /// of a column's count) is [`TEXT_CHARS_MAX`].
    pub fn result_chars(self, args: &[Expr], scope: &Scope<'_>) -> u32 {
        let chars = |i: usize| args.get(i).map_or(0, |a| scope.display_chars(a));
        let bytes = |i: usize| args.get(i).map_or(0, |a| scope.display_bytes(a));
        let all = |from: usize| args.iter().skip(from).map(|a| scope.display_chars(a));
        let sum = |from: usize| all(from).fold(0u32, u32::saturating_add);
        let most = |from: usize| all(from).max().unwrap_or(0);
        // A constant count or length (None: not one, or NULL).
        let constant = |i: usize| match args.get(i) {
            Some(Expr::Lit(v)) if !v.is_null() => Some(v.to_f64().0),
            _ => None,
        };
        let count = |i: usize| constant(i).map(|n| n.clamp(0.0, f64::from(TEXT_CHARS_MAX)) as u32);
        let is_text = |i: usize| {
            args.get(i)
                .is_some_and(|a| matches!(scope.kind(a), Kind::Str { .. }))
        };
        match self {
            Func::Concat => sum(0),
            Func::ConcatWs => {
                let separators = args.len().saturating_sub(2) as u32;
                chars(0).saturating_mul(separators).saturating_add(sum(1))
            }
            Func::Repeat => count(1).map_or(TEXT_CHARS_MAX, |n| chars(0).saturating_mul(n)),
            Func::Lpad | Func::Rpad | Func::Space => {
                let at = usize::from(self != Func::Space);
                count(at).unwrap_or(TEXT_CHARS_MAX)
            }
            Func::Replace => {
                // Every match of `from` made `to`.
                let (text, from, to) = (chars(0), chars(1), chars(2));
                if to > from && from > 0 {
                    text.saturating_add((text / from).saturating_mul(to - from))
                } else {
                    text
                }
            }
            Func::Substring => {
                // MariaDB's arithmetic, on the argument's bytes: SUBSTR(s,
                // 2) of a VARCHAR(20) is 79 characters long there.
                let mut length = bytes(0);
                // The position as an integer (0.5 is 1, as val_int rounds).
                match constant(1).map(f64::round) {
                    // From position 0 nothing (MariaDB's `start - 1`
                    // wraps and takes the whole length off).
                    Some(0.0) => length = 0,
                    Some(start) if start < 0.0 => length = length.min((-start) as u32),
                    Some(start) if start >= 1.0 => {
                        length =
                            length.saturating_sub((start - 1.0).min(f64::from(u32::MAX)) as u32)
                    }
                    _ => {}
                }
                match constant(2) {
                    Some(n) if n <= 0.0 => 0,
                    Some(n) => length.min(n.min(f64::from(u32::MAX)) as u32),
                    None => length,
                }
            }
            Func::Left | Func::Right => count(1).map_or(chars(0), |n| n.min(chars(0))),
            Func::Insert => chars(0).saturating_add(chars(3)),
            Func::Hex if is_text(0) => bytes(0).saturating_mul(2),
            // Of an unsigned integer twice its length (MariaDB's), of
            // other numbers 16.
            Func::Hex => match args.first() {
                Some(a) if matches!(scope.kind(a), Kind::Int { unsigned: true }) => {
                    scope.meta(a, "").length.saturating_mul(2)
                }
                _ => HEX_NUMBER_CHARS,
            },
            Func::Unhex => bytes(0).saturating_add(1) / 2,
            Func::FromBase64 => bytes(0).saturating_mul(3).div_ceil(4),
            Func::ToBase64 => {
                let encoded = bytes(0).saturating_add(2) / 3 * 4;
                encoded.saturating_add(encoded.saturating_sub(1) / BASE64_LINE_CHARS as u32)
            }
            Func::Elt => most(1),
            Func::MakeSet => sum(1).saturating_add(args.len().saturating_sub(2) as u32),
            Func::ExportSet => {
                let separator = if args.len() > 3 { chars(3) } else { 1 };
                chars(1)
                    .max(chars(2))
                    .saturating_mul(EXPORT_SET_BITS)
                    .saturating_add(separator.saturating_mul(EXPORT_SET_BITS - 1))
            }
            Func::Conv => CONV_CHARS,
            // MariaDB's: the whole digits, a separator each three, a
            // point, a sign and the decimals asked for (of a number whose
            // digits are known).
            Func::Format => {
                let decimals = count(1).map_or(FORMAT_DECIMALS_MAX, |d| d.min(FORMAT_DECIMALS_MAX));
                // Rounded to its decimals first: dropping some may carry.
                // Of a DOUBLE or text, a DOUBLE's widest whole part; of a
                // temporal value, its number's digits (`20240102`).
                let whole = args.first().and_then(|a| match scope.kind(a) {
                    Kind::Int { .. } | Kind::Dec { .. } => scope
                        .decimal_digits(a)
                        .map(|(w, scale)| w + u32::from(decimals < scale)),
                    Kind::Double | Kind::Str { .. } => Some(FORMAT_DOUBLE_WHOLE_DIGITS),
                    Kind::Null => Some(FORMAT_DOUBLE_WHOLE_DIGITS - 1),
                    Kind::Date => Some(u32::from(super::DATE_NUMBER_DIGITS)),
                    Kind::DateTime { .. } => Some(u32::from(super::DATETIME_NUMBER_DIGITS)),
                    Kind::Time { .. } => Some(u32::from(super::TIME_NUMBER_DIGITS)),
                });
                match whole {
                    Some(w) => {
                        let separators = w / 3 + u32::from(decimals > 0) + 1;
                        w + separators + decimals
                    }
                    None => chars(0),
                }
            }
            Func::Char => (args.len() as u32).saturating_mul(4),
            Func::Chr => 4,
            Func::Latin1Text => chars(0),
            Func::GetFormat => GET_FORMAT_CHARS,
            Func::Sha2 => match constant(1).map(|n| n as i64) {
                Some(224) => 56,
                Some(0 | 256) => 64,
                Some(384) => 96,
                _ => 128,
            },
            Func::InetNtoa => INET_NTOA_CHARS,
            Func::DateFormat | Func::TimeFormat => match args.get(1) {
                Some(Expr::Lit(Val::Str(format))) => date_format_chars(format),
                _ => DATE_FORMAT_CHARS_UNKNOWN,
            },
            Func::RegexpReplace => TEXT_CHARS_MAX,
            Func::Json(j) => {
                use super::json::JsonFn as J;
                // A value in a document as MariaDB sizes it: twice its
                // characters (escapes) and four (quotes, separator), a
                // number's one more.
                let value = |a: &Expr| {
                    let number = u32::from(!matches!(scope.kind(a), Kind::Str { .. } | Kind::Null));
                    (scope.display_chars(a) + number)
                        .saturating_mul(2)
                        .saturating_add(4)
                };
                let values = |from: usize, step: usize| {
                    args.iter()
                        .skip(from)
                        .step_by(step)
                        .map(value)
                        .fold(0u32, u32::saturating_add)
                };
                match j {
                    J::Array => values(0, 1).saturating_add(2),
                    // And `: ` after each key.
                    J::Object => values(0, 1).saturating_add(2 + args.len() as u32),
                    // The paths, and the values set at them.
                    J::Set | J::Insert | J::Replace | J::ArrayAppend | J::ArrayInsert => {
                        chars(0).saturating_add(values(1, 1))
                    }
                    J::Extract => chars(0)
                        .saturating_mul(args.len().saturating_sub(1) as u32)
                        .saturating_add(2),
                    J::MergePatch | J::MergePreserve => sum(0).saturating_add(2),
                    // Every character escaped (`\u001f`), and the quotes.
                    J::Quote => chars(0).saturating_mul(6).saturating_add(2),
                    J::Type => JSON_TYPE_CHARS,
                    J::Search => TEXT_CHARS_MAX,
                    _ => chars(0),
                }
            }
            Func::Database => 64,
            Func::User => USER_CHARS,
            Func::Version => 60,
            Func::Md5 => 32,
            Func::Sha1 => 40,
            Func::Uuid => 36,
            Func::DayName | Func::MonthName => 9,
            Func::Inet6Ntoa => 39,
            Func::Inet6Aton | Func::UuidToBin => 16,
            Func::BinToUuid => 36,
            Func::IsUuid => 1,
            Func::Soundex => chars(0).max(4),
            // A run of n digits may grow by n / 9 + 1 characters; less
            // only by leading zeros.
            Func::NaturalSortKey => chars(0).saturating_add(chars(0) / 9 + 1),
            // Three bytes a character at most (utf8mb4_bin's).
            Func::WeightString(_) => count(2).unwrap_or_else(|| chars(0)).saturating_mul(3),
            // Each character escaped and two quotes; at least NULL's 4.
            // Room for NULL (unquoted) only where the argument may be one:
            // `QUOTE('')` is two characters, as MariaDB sizes it.
            Func::Quote => {
                let quoted = chars(0).saturating_mul(2).saturating_add(2);
                match scope.nullable(&args[0]) {
                    true => quoted.max(4),
                    false => quoted,
                }
            }
            Func::If => chars(1).max(chars(2)),
            Func::IfNull | Func::Coalesce | Func::Greatest(_) | Func::Least(_) => most(0),
            _ if args.is_empty() => super::TEXT_CHARS_UNKNOWN,
            _ => chars(0),
        }
    }

    /// Evaluates the call.
    pub fn eval(self, args: &[Expr], row: &[Val], ctx: &mut Ctx<'_>) -> SqlResult<Val> {
        use Func as F;
        // Lazy ones first: only the branch taken is evaluated.
        match self {
            F::If => {
                // MariaDB takes IF's condition for a top-level one: an AND
                // in it stops at a NULL as at a FALSE (`abort_on_null`),
                // under its ORs too, as a WHERE's does (`Expr::test`): `IF(b
                // > 0 AND 'x' >= id, …)` of a NULL b reads no 'x' (CREATE …
                // SELECT seed 39).
                let holds = match &args[0] {
                    c @ (Expr::And(..) | Expr::Or(..)) => c.test(row, ctx)?,
                    c => {
                        let c = c.eval(row, ctx)?;
                        ctx.truth(&c) == Some(true)
                    }
                };
                return if holds {
                    args[1].eval(row, ctx)
                } else {
                    args[2].eval(row, ctx)
                };
            }
            F::IfNull | F::Coalesce => {
                for a in args {
                    let v = a.eval(row, ctx)?;
                    if !v.is_null() {
                        return Ok(v);
                    }
                }
                return Ok(Val::Null);
            }
            // BENCHMARK(n, expr): expr n times (each its own evaluation),
            // then 0. KILL QUERY stops it with 1317; past a deadline it
            // stops and gives its 0, as MariaDB's does.
            F::Benchmark => {
                let n = args[0].eval(row, ctx)?;
                if n.is_null() {
                    return Ok(Val::Null);
                }
                let n = ctx.num_i64(&n);
                if n < 0 {
                    ctx.warn(
                        crate::error::codes::WRONG_VALUE_FOR_TYPE,
                        format!("Incorrect count value: '{n}' for function benchmark"),
                    );
                    return Ok(Val::Null);
                }
                for _ in 0..n {
                    args[1].eval(row, ctx)?;
                    if let Err(e) = ctx.check_killed() {
                        if e.code == crate::error::codes::QUERY_INTERRUPTED {
                            return Err(e);
                        }
                        break;
                    }
                }
                return Ok(Val::Int(0));
            }
            // NULLIF(NULL, y) is NULL without y, as MariaDB's comparison.
            F::NullIf => {
                let x = args[0].eval(row, ctx)?;
                if x.is_null() {
                    return Ok(Val::Null);
                }
                let y = args[1].eval(row, ctx)?;
                // A third argument: the first as it compares (an ENUM's
                // index beside a number), the first itself the value.
                let coll = Some(Collation::Utf8mb4GeneralCi);
                let equal = !y.is_null()
                    && match args.get(2) {
                        Some(c) => compare(&c.eval(row, ctx)?, &y, coll, ctx).is_eq(),
                        None => compare(&x, &y, coll, ctx).is_eq(),
                    };
                return Ok(if equal { Val::Null } else { x });
            }
            F::UserVar => {
                let (Expr::Lit(Val::Str(name)), Expr::Lit(initial)) = (&args[0], &args[1]) else {
                    unreachable!("@name lowered with its name and value");
                };
                let name = std::str::from_utf8(name).unwrap_or_default();
                return Ok(ctx
                    .env
                    .user_vars
                    .get(name)
                    .unwrap_or_else(|| initial.clone()));
            }
            F::WarnOnce => {
                let [value, Expr::Lit(Val::UInt(site)), Expr::Lit(Val::UInt(code)), Expr::Lit(message), ..] =
                    args
                else {
                    unreachable!("a constant read once is lowered with its warning");
                };
                let value = value.eval(row, ctx)?;
                if ctx.env.warned_once.first(*site) {
                    ctx.warnings.push((*code as u16, message.to_text()));
                }
                return Ok(value);
            }
            // ELT evaluates its index and the argument it names only.
            F::Elt | F::EltNumber => {
                let index = args[0].eval(row, ctx)?;
                if index.is_null() {
                    return Ok(Val::Null);
                }
                let n = ctx.num_i64(&index);
                return match usize::try_from(n) {
                    Ok(n) if n >= 1 && n < args.len() => {
                        let taken = args[n].eval(row, ctx)?;
                        Ok(if self == F::Elt {
                            elt_text(taken)
                        } else {
                            elt_number(taken)
                        })
                    }
                    _ => Ok(Val::Null),
                };
            }
            F::SetUserVar => {
                let Expr::Lit(Val::Str(name)) = &args[0] else {
                    unreachable!("@name := lowered with its name");
                };
                let value = args[1].eval(row, ctx)?;
                let name = std::str::from_utf8(name).unwrap_or_default();
                ctx.env.user_vars.set(name, value.clone());
                return Ok(value);
            }
            _ => {}
        }
        let mut v = Vec::with_capacity(args.len());
        // These stop at a NULL argument, as MariaDB's (those after it are
        // not evaluated, nor their errors or warnings given); CONCAT_WS
        // and DATE_ADD at a NULL first one.
        let to_null = matches!(
            self,
            F::Greatest(_) | F::Least(_) | F::Concat | F::Log | F::Atan
        );
        let first_null = matches!(self, F::ConcatWs | F::DateAdd | F::DateSub);
        for (at, a) in args.iter().enumerate() {
            let x = a.eval(row, ctx)?;
            if x.is_null() && (to_null || (first_null && at == 0)) {
                return Ok(Val::Null);
            }
            v.push(x);
        }
        // A string function given bytes that are not UTF-8 (a BLOB's, a
        // BINARY's, a BIT's) works on bytes, as MariaDB's does on binary
        // strings: each byte is read as one character (Latin-1) and
        // written back as the byte it was. Through text they became
        // U+FFFD. A binary string that is valid UTF-8 is still read by
        // its characters.
        // A binary string's bytes are its characters even where they
        // are UTF-8: the lowering marks it `Func::Bytes`.
        if self.reads_characters()
            && (args.iter().any(|a| matches!(a, Expr::Func(F::Bytes, _)))
                || v.iter()
                    .any(|x| matches!(x, Val::Str(b) if std::str::from_utf8(b).is_err())))
        {
            if matches!(self, F::Upper | F::Lower) {
                return Ok(v.swap_remove(0));
            }
            let chars = v
                .into_iter()
                .map(|x| match x {
                    Val::Str(b) => Val::str(b.iter().map(|&c| char::from(c)).collect::<String>()),
                    other => other,
                })
                .collect();
            return Ok(match self.apply(args, chars, ctx)? {
                Val::Str(text) => Val::Str(latin1_bytes(&text)),
                other => other,
            });
        }
        self.apply(args, v, ctx)
    }

    /// The string functions that count or cut characters (see `eval`).
    pub(crate) fn reads_characters(self) -> bool {
        use Func as F;
        matches!(
            self,
            F::Substring
                | F::Left
                | F::Right
                | F::Lpad
                | F::Rpad
                | F::Replace
                | F::Reverse
                | F::TrimBoth
                | F::TrimLeading
                | F::TrimTrailing
                | F::Insert
                | F::SubstringIndex
                | F::Locate
                | F::Instr
                | F::CharLength
                | F::Upper
                | F::Lower
        )
    }

    /// The call over its evaluated arguments `v`.
    fn apply(self, args: &[Expr], v: Vec<Val>, ctx: &mut Ctx<'_>) -> SqlResult<Val> {
        use Func as F;
        let null_in = v.iter().any(Val::is_null);
        let s = |i: usize| v[i].to_text();
        Ok(match self {
            F::Json(f) => return f.eval(args, &v, ctx),
            F::If
            | F::IfNull
            | F::Coalesce
            | F::UserVar
            | F::SetUserVar
            | F::WarnOnce
            | F::Elt
            | F::EltNumber => Val::Null,
            F::NullIf => unreachable!("NULLIF is evaluated lazily above"),
            F::Benchmark => unreachable!("BENCHMARK is evaluated lazily above"),
            F::Chr => {
                if null_in {
                    return Ok(Val::Null);
                }
                let bytes = char_bytes(&v, ctx);
                match std::str::from_utf8(&bytes) {
                    Ok(_) => Val::Str(bytes),
                    Err(e) => {
                        let e = SqlError::invalid_utf8mb4(&bytes, e.valid_up_to());
                        ctx.warn(e.code, e.message);
                        Val::Null
                    }
                }
            }
            F::Latin1Text => match &v[0] {
                Val::Str(bytes) => Val::str(crate::protocol::latin1::decode(bytes)),
                other => other.clone(),
            },
            F::GetFormat => match get_format(&s(0), &s(1)) {
                Some(format) if !null_in => Val::str(format),
                _ => Val::Null,
            },
            F::Concat => {
                if null_in {
                    return Ok(Val::Null);
                }
                let mut out = Vec::new();
                for x in &v {
                    if !push_bytes(&mut out, x) {
                        return Ok(Val::Null);
                    }
                }
                Val::Str(out)
            }
            F::ConcatWs => {
                if v[0].is_null() {
                    return Ok(Val::Null);
                }
                // Bytes as they are (a BIT's, a BLOB's), as CONCAT's: through
                // text, bytes that are not UTF-8 became U+FFFD.
                let text;
                let sep: &[u8] = match &v[0] {
                    Val::Str(b) => b,
                    other => {
                        text = other.to_text();
                        text.as_bytes()
                    }
                };
                let mut out = Vec::new();
                for (at, x) in v[1..].iter().filter(|x| !x.is_null()).enumerate() {
                    if at > 0 {
                        out.extend_from_slice(sep);
                    }
                    if !push_bytes(&mut out, x) {
                        return Ok(Val::Null);
                    }
                }
                Val::Str(out)
            }
            F::IsNull => Val::Int(i64::from(v[0].is_null())),
            F::Utf8Checked => match &v[0] {
                Val::Str(b) if std::str::from_utf8(b).is_err() => {
                    let charset = v.get(1).map_or_else(|| "utf8mb4".to_owned(), Val::to_text);
                    Val::Str(utf8_checked(b, &charset, ctx))
                }
                other => other.clone(),
            },
            F::BitBytes => {
                let bits = match &v[0] {
                    Val::Null => return Ok(Val::Null),
                    Val::UInt(u) => *u,
                    other => ctx.num_i64(other) as u64,
                };
                let width = usize::try_from(ctx.num_i64(&v[1])).unwrap_or(8).clamp(1, 8);
                Val::Str(bits.to_be_bytes()[8 - width..].to_vec())
            }
            F::MemberNumber => member_number(&v[0], &v[1].to_text(), v[2].truth() == Some(true)),
            F::Field => {
                // 0 for NULL; otherwise the first equal argument's place.
                if v[0].is_null() {
                    return Ok(Val::Int(0));
                }
                let mut at = 0;
                for (i, x) in v.iter().enumerate().skip(1) {
                    if !x.is_null()
                        && compare(&v[0], x, Some(Collation::Utf8mb4GeneralCi), ctx).is_eq()
                    {
                        at = i as i64;
                        break;
                    }
                }
                Val::Int(at)
            }
            F::Uuid => Val::str(uuid_v1()),
            F::ReleaseAllLocks => match &ctx.env.user_locks {
                Some(locks) => Val::UInt(locks.release_all(ctx.env.connection_id)),
                None => Val::Null,
            },
            F::Char => Val::Str(char_bytes(&v, ctx)),
            F::Rand => Val::Double(random_unit()),
            F::RandSeeded => {
                let site = ctx.num_i64(&v[1]) as u64;
                let mut states = ctx.env.rand_states.lock();
                // A seed that reads a column seeds again on every row, as
                // MySQL's; a constant one seeds once per statement.
                let state = match states.get_mut(&site) {
                    Some(state) if args[0].is_constant() => state,
                    _ => {
                        let seed = match &v[0] {
                            Val::Null => 0,
                            x => ctx.num_i64(x),
                        };
                        states.insert(site, MysqlRand::seeded(seed as u32));
                        states.get_mut(&site).expect("just inserted")
                    }
                };
                Val::Double(state.next())
            }
            F::LastInsertId if v.len() == 1 => {
                // NULL sets 0 and gives NULL, as MariaDB's.
                let id = match &v[0] {
                    Val::Null => None,
                    Val::UInt(u) => Some(*u),
                    x => Some(ctx.num_i64(x) as u64),
                };
                ctx.env.last_insert_id.call(id.unwrap_or(0));
                id.map_or(Val::Null, Val::UInt)
            }
            F::IsIpv4 => Val::Int(i64::from(!v[0].is_null() && ipv4_bytes(&s(0)).is_some())),
            F::IsIpv6 => Val::Int(i64::from(!v[0].is_null() && ipv6_bytes(&s(0)).is_some())),
            // MySQL's: the word NULL, unquoted.
            F::Quote if v[0].is_null() => Val::str("NULL"),
            F::MakeSet => {
                if v[0].is_null() {
                    return Ok(Val::Null);
                }
                let bits = ctx.num_i64(&v[0]) as u64;
                let mut out: Vec<u8> = Vec::new();
                for (i, x) in v[1..].iter().enumerate().take(64) {
                    if bits >> i & 1 == 1 && !x.is_null() {
                        if !out.is_empty() {
                            out.push(b',');
                        }
                        out.extend_from_slice(&bytes(x));
                    }
                }
                Val::Str(out)
            }
            F::Week | F::YearWeek if v.len() == 2 && v[1].is_null() && !v[0].is_null() => {
                // A NULL mode reads as mode 0 (MariaDB's).
                let Some((d, _)) = calendar_datetime(&v[0], ctx) else {
                    return Ok(Val::Null);
                };
                week_value(self, d, 0)
            }
            // The lowering gives `server_id` as the argument.
            F::UuidShort => Val::UInt(uuid_short(v.first().map_or(1, |x| ctx.num_i64(x)) as u64)),
            F::TextAsNumber(integer) => match &v[0] {
                Val::Str(text) => super::eval::compared_number(text, integer, ctx),
                other => other.clone(),
            },
            F::NullAfterText(integer) => {
                if let (Val::Null, Val::Str(text)) = (&v[0], &v[1]) {
                    super::eval::compared_number(text, integer, ctx);
                }
                v[0].clone()
            }
            // Every argument was evaluated (an assignment in one holds).
            F::LastValue => v.last().cloned().unwrap_or(Val::Null),
            // MySQL's binary search of the bounds (which it takes as
            // sorted: of unsorted ones its answer, whatever it is).
            F::IntervalIndex => match v.split_first() {
                Some((Val::Null, _)) | None => Val::Int(-1),
                Some((n, bounds)) => {
                    let n = ctx.num_f64(n);
                    let bound = |i: usize, ctx: &mut Ctx<'_>| match &bounds[i] {
                        Val::Null => f64::NEG_INFINITY,
                        b => ctx.num_f64(b),
                    };
                    let (mut start, mut end) = (0usize, bounds.len() - 1);
                    while start != end {
                        let mid = (start + end).div_ceil(2);
                        if n >= bound(mid, ctx) {
                            start = mid;
                        } else {
                            end = mid - 1;
                        }
                    }
                    Val::Int(if n < bound(start, ctx) {
                        0
                    } else {
                        start as i64 + 1
                    })
                }
            },
            // FORMAT's NULL locale is an unknown one (below).
            _ if null_in && !matches!(self, F::Greatest(_) | F::Least(_) | F::Format) => Val::Null,
            F::Md5 => {
                use md5::Digest;
                Val::str(hex_lower(&md5::Md5::digest(bytes(&v[0]))))
            }
            F::Sha1 => {
                use sha1::Digest;
                Val::str(hex_lower(&sha1::Sha1::digest(bytes(&v[0]))))
            }
            F::Sha2 => {
                use sha2::Digest;
                let data = bytes(&v[0]);
                match ctx.num_i64(&v[1]) {
                    0 | 256 => Val::str(hex_lower(&sha2::Sha256::digest(&data))),
                    224 => Val::str(hex_lower(&sha2::Sha224::digest(&data))),
                    384 => Val::str(hex_lower(&sha2::Sha384::digest(&data))),
                    512 => Val::str(hex_lower(&sha2::Sha512::digest(&data))),
                    _ => {
                        ctx.warn(
                            1583,
                            "Incorrect parameters in the call to native function 'sha2'".to_owned(),
                        );
                        Val::Null
                    }
                }
            }
            // CRC32(crc, text) and CRC32C(crc, text) go on from `crc`.
            F::Crc32 => match v.as_slice() {
                [text] => Val::UInt(u64::from(crc32fast::hash(&bytes(text)))),
                [crc, text] => {
                    let mut h = crc32fast::Hasher::new_with_initial(ctx.num_i64(crc) as u32);
                    h.update(&bytes(text));
                    Val::UInt(u64::from(h.finalize()))
                }
                _ => Val::Null,
            },
            F::Crc32c => match v.as_slice() {
                [text] => Val::UInt(u64::from(crc32c::crc32c(&bytes(text)))),
                [crc, text] => Val::UInt(u64::from(crc32c::crc32c_append(
                    ctx.num_i64(crc) as u32,
                    &bytes(text),
                ))),
                _ => Val::Null,
            },
            F::Compress => compress(&bytes(&v[0])),
            F::Uncompress => uncompress(&bytes(&v[0]), ctx),
            F::UncompressedLength => {
                Val::UInt(compressed_length(&bytes(&v[0])).map_or(0, |n| n as u64))
            }
            F::AesEncrypt => Val::Str(aes_encrypt(&bytes(&v[0]), &bytes(&v[1]))),
            F::AesDecrypt => aes_decrypt(&bytes(&v[0]), &bytes(&v[1])).map_or(Val::Null, Val::Str),
            F::RandomBytes => match usize::try_from(ctx.num_i64(&v[0])) {
                Ok(n) if n <= RANDOM_BYTES_MAX => {
                    let mut out = vec![0u8; n];
                    getrandom::fill(&mut out).map_err(|e| {
                        SqlError::new(
                            crate::error::codes::UNKNOWN,
                            format!("RANDOM_BYTES: the system's generator failed: {e}"),
                        )
                    })?;
                    Val::Str(out)
                }
                // MariaDB's NULL for a length out of 0 to 1024.
                _ => Val::Null,
            },
            F::Unhex => {
                let text = s(0);
                let digits = text.trim_end().as_bytes();
                // An odd count reads as if a 0 led it.
                let padded: Vec<u8> = if digits.len() % 2 == 1 {
                    std::iter::once(b'0')
                        .chain(digits.iter().copied())
                        .collect()
                } else {
                    digits.to_vec()
                };
                let nibble = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
                let out: Option<Vec<u8>> = padded
                    .chunks(2)
                    .map(|p| Some(nibble(p[0])? << 4 | nibble(p[1])?))
                    .collect();
                out.map_or(Val::Null, Val::Str)
            }
            F::ToBase64 => {
                use base64::Engine;
                let text = base64::engine::general_purpose::STANDARD.encode(bytes(&v[0]));
                // MySQL breaks the text every 76 characters.
                let lines: Vec<&str> = text
                    .as_bytes()
                    .chunks(BASE64_LINE_CHARS)
                    .map(|c| std::str::from_utf8(c).unwrap_or_default())
                    .collect();
                Val::str(lines.join("\n"))
            }
            F::FromBase64 => {
                use base64::Engine;
                let text: Vec<u8> = bytes(&v[0])
                    .into_iter()
                    .filter(|b| !b.is_ascii_whitespace())
                    .collect();
                base64::engine::general_purpose::STANDARD
                    .decode(text)
                    .map_or(Val::Null, Val::Str)
            }
            F::FindInSet => {
                let needle = s(0);
                if needle.contains(',') {
                    return Ok(Val::Int(0));
                }
                let list = s(1);
                if list.is_empty() {
                    return Ok(Val::Int(0));
                }
                let at = list.split(',').position(|item| {
                    compare(
                        &Val::str(item),
                        &Val::str(needle.as_str()),
                        Some(Collation::Utf8mb4GeneralCi),
                        ctx,
                    )
                    .is_eq()
                });
                Val::Int(at.map_or(0, |i| i as i64 + 1))
            }
            F::Ascii => Val::Int(bytes(&v[0]).first().map_or(0, |b| i64::from(*b))),
            F::Space => {
                let n = ctx.num_i64(&v[0]).max(0) as usize;
                if n > STRING_RESULT_BYTES_MAX {
                    return Ok(Val::Null);
                }
                Val::str(" ".repeat(n))
            }
            F::Exp => {
                let r = ctx.num_f64(&v[0]).exp();
                if !r.is_finite() {
                    return Err(SqlError::new(
                        1690,
                        format!("DOUBLE value is out of range in 'exp({})'", s(0)),
                    ));
                }
                Val::Double(r)
            }
            F::Ln | F::Log | F::Log2 | F::Log10 => {
                let (base, x) = if self == F::Log && v.len() == 2 {
                    (Some(ctx.num_f64(&v[0])), ctx.num_f64(&v[1]))
                } else {
                    (None, ctx.num_f64(&v[0]))
                };
                // The logarithm of a number at most 0 (or to a base at most
                // 1) is NULL, with MariaDB's warning.
                if x <= 0.0 || base.is_some_and(|b| b <= 1.0) {
                    ctx.warn(1365, "Division by 0".to_owned());
                    return Ok(Val::Null);
                }
                double_or_null(match (self, base) {
                    (F::Log2, _) => x.log2(),
                    (F::Log10, _) => x.log10(),
                    (_, Some(b)) => x.ln() / b.ln(),
                    _ => x.ln(),
                })
            }
            F::Sin => double_or_null(ctx.num_f64(&v[0]).sin()),
            F::Cos => double_or_null(ctx.num_f64(&v[0]).cos()),
            F::Tan => double_or_null(ctx.num_f64(&v[0]).tan()),
            F::Atan => double_or_null(match v.len() {
                2 => ctx.num_f64(&v[0]).atan2(ctx.num_f64(&v[1])),
                _ => ctx.num_f64(&v[0]).atan(),
            }),
            F::Radians => double_or_null(ctx.num_f64(&v[0]).to_radians()),
            F::Degrees => double_or_null(ctx.num_f64(&v[0]).to_degrees()),
            F::Weekday | F::DayName | F::MonthName | F::DayOfYear | F::Quarter | F::ToDays => {
                let read = if matches!(self, F::Quarter | F::MonthName) {
                    fuzzy_datetime
                } else {
                    calendar_datetime
                };
                let Some((d, _)) = read(&v[0], ctx) else {
                    return Ok(Val::Null);
                };
                let day = |y: i64, m: i64, dd: i64| days_from_civil(y, m, dd);
                let days = day(i64::from(d.year), i64::from(d.month), i64::from(d.day));
                // 1970-01-01 was a Thursday: 3 with Monday = 0.
                let weekday = (days + 3).rem_euclid(7);
                match self {
                    F::Weekday => Val::Int(weekday),
                    F::DayName => Val::str(DAY_NAMES[weekday as usize]),
                    F::MonthName => match MONTH_NAMES.get(usize::from(d.month).wrapping_sub(1)) {
                        Some(name) => Val::str(*name),
                        None => Val::Null,
                    },
                    F::DayOfYear => Val::Int(days - day(i64::from(d.year), 1, 1) + 1),
                    F::Quarter => Val::Int((i64::from(d.month) + 2) / 3),
                    _ => Val::Int(day_number(d)),
                }
            }
            F::RegexpLike => {
                // Match type: `c` case-sensitive, `i` not (the last one
                // given wins, as MySQL's); without one, case-insensitive.
                let ci = v
                    .get(2)
                    .map(|m| m.to_text())
                    .and_then(|m| m.chars().rev().find(|c| matches!(c, 'c' | 'i')))
                    .is_none_or(|c| c == 'i');
                let matched = regexp_is_match(&s(1), ci, &s(0))?;
                Val::Int(i64::from(matched))
            }
            F::RegexpReplace => {
                let replaced = regexp_replace(&s(1), true, &s(0), &s(2))?;
                Val::str(replaced)
            }
            F::Format => {
                if v[0].is_null() || v[1].is_null() {
                    return Ok(Val::Null);
                }
                let locale = match v.get(2) {
                    None => super::locale::EN_US,
                    Some(locale) => {
                        let name = if locale.is_null() {
                            "NULL".into()
                        } else {
                            s(2)
                        };
                        if name.eq_ignore_ascii_case("sr_YU") {
                            ctx.warn(
                                crate::error::codes::WARN_DEPRECATED_SYNTAX,
                                "'sr_YU' is deprecated and will be removed in a future release. \
                                 Please use sr_RS instead",
                            );
                        }
                        super::locale::number_format(&name).unwrap_or_else(|| {
                            ctx.warn(
                                crate::error::codes::UNKNOWN_LOCALE,
                                format!("Unknown locale: '{name}'"),
                            );
                            super::locale::EN_US
                        })
                    }
                };
                let digits = ctx.num_i64(&v[1]).clamp(0, 30);
                let rounded = round(&v[0], digits, false, ctx)?;
                let mut text = match rounded {
                    // A negative zero, or a negative rounded to zero, has
                    // no sign in MariaDB's text ("0.000").
                    Val::Double(x) => format!("{:.*}", digits as usize, x + 0.0),
                    other => other.to_text(),
                };
                // Exactly `digits` fractional digits, zeros added.
                let have = text.split_once('.').map_or(0, |(_, f)| f.len());
                if digits > 0 && have == 0 {
                    text.push('.');
                }
                text.extend(std::iter::repeat_n(
                    '0',
                    (digits as usize).saturating_sub(have),
                ));
                Val::Str(super::locale::group(&text, locale))
            }
            F::Conv => {
                let (from, to) = (ctx.num_i64(&v[1]), ctx.num_i64(&v[2]));
                match conv(&s(0), from, to) {
                    Some(text) => Val::str(text),
                    None => Val::Null,
                }
            }
            // Its arguments as strings, whatever they are (a date against
            // 'grape ' compares its text, not as dates; numbers too).
            F::Strcmp(_) if null_in => Val::Null,
            F::Strcmp(collation) => Val::Int(
                match compare(
                    &Val::str(v[0].to_text()),
                    &Val::str(v[1].to_text()),
                    collation,
                    ctx,
                ) {
                    std::cmp::Ordering::Less => -1,
                    std::cmp::Ordering::Equal => 0,
                    std::cmp::Ordering::Greater => 1,
                },
            ),
            F::TimeToSec => match time_micros(&v[0]) {
                Some(m) => Val::Int(m / MICROS_PER_SECOND),
                None => Val::Null,
            },
            F::SecToTime => {
                let asked = ctx.num_i64(&v[0]);
                let secs = asked.clamp(-TIME_SECONDS_MAX, TIME_SECONDS_MAX);
                if secs != asked {
                    ctx.warn(
                        codes_truncated(),
                        format!("Truncated incorrect seconds value: '{}'", s(0)),
                    );
                }
                Val::Time(secs * MICROS_PER_SECOND)
            }
            F::TimeDiff => {
                // Two dates and times, or two times; a mix is NULL.
                let dated = |x: &Val| match x {
                    Val::Date(_) | Val::DateTime(..) => true,
                    Val::Str(b) => super::value::parse_datetime(&String::from_utf8_lossy(b))
                        .is_some_and(|(_, t)| t.is_some()),
                    _ => false,
                };
                let micros = if dated(&v[0]) && dated(&v[1]) {
                    match (to_datetime(&v[0], ctx), to_datetime(&v[1], ctx)) {
                        (Some((da, ta)), Some((db, tb))) => {
                            Some(datetime_micros(da, ta) - datetime_micros(db, tb))
                        }
                        _ => None,
                    }
                } else if !dated(&v[0]) && !dated(&v[1]) {
                    time_micros(&v[0])
                        .zip(time_micros(&v[1]))
                        .map(|(a, b)| a - b)
                } else {
                    None
                };
                match micros {
                    Some(m) => Val::Time(m.clamp(
                        -TIME_SECONDS_MAX * MICROS_PER_SECOND,
                        TIME_SECONDS_MAX * MICROS_PER_SECOND,
                    )),
                    None => Val::Null,
                }
            }
            F::Timestamp => {
                // TIMESTAMP(d [, t]): d as a date and time, t added.
                let Some((d, t)) = to_datetime(&v[0], ctx) else {
                    return Ok(Val::Null);
                };
                let add = match v.get(1) {
                    Some(x) => match time_micros(x) {
                        Some(m) => m,
                        None => return Ok(Val::Null),
                    },
                    None => 0,
                };
                match datetime_of_micros(datetime_micros(d, t) + add) {
                    Some((d, t)) => Val::DateTime(d, t),
                    None => Val::Null,
                }
            }
            F::TimeOf => time_of(&v[0], ctx),
            F::MakeDate => {
                let (year, day) = (ctx.num_i64(&v[0]), ctx.num_i64(&v[1]));
                if day <= 0 || !(0..=9999).contains(&year) {
                    return Ok(Val::Null);
                }
                // Two-digit years as MySQL reads them.
                let year = match year {
                    0..=69 => year + 2000,
                    70..=99 => year + 1900,
                    y => y,
                };
                let days = days_from_civil(year, 1, 1) + day - 1;
                match datetime_of_micros(days * MICROS_PER_DAY) {
                    Some((d, _)) if d.year <= 9999 => Val::Date(d),
                    _ => Val::Null,
                }
            }
            F::Week | F::YearWeek | F::WeekOfYear => {
                // default_week_format is 0; WEEKOFYEAR is mode 3.
                let mode = match (self, v.get(1)) {
                    (F::WeekOfYear, _) => 3,
                    (_, Some(mode)) => ctx.num_i64(mode),
                    (_, None) => 0,
                };
                let Some((d, _)) = calendar_datetime(&v[0], ctx) else {
                    return Ok(Val::Null);
                };
                week_value(self, d, mode)
            }
            F::Pi => Val::Double(std::f64::consts::PI),
            F::Asin => double_or_null(ctx.num_f64(&v[0]).asin()),
            F::Acos => double_or_null(ctx.num_f64(&v[0]).acos()),
            F::Cot => {
                let r = 1.0 / ctx.num_f64(&v[0]).tan();
                if !r.is_finite() {
                    return Err(SqlError::new(
                        1690,
                        format!("DOUBLE value is out of range in 'cot({})'", s(0)),
                    ));
                }
                Val::Double(r)
            }
            F::Ord => {
                // A multi-byte character's bytes, most significant first;
                // a byte that starts no UTF-8 character is itself.
                let b = bytes(&v[0]);
                let valid = match std::str::from_utf8(&b) {
                    Ok(text) => text,
                    Err(e) => std::str::from_utf8(&b[..e.valid_up_to()]).unwrap_or_default(),
                };
                let width = valid.chars().next().map_or(b.len().min(1), char::len_utf8);
                Val::Int(b[..width].iter().fold(0, |n, x| n << 8 | i64::from(*x)))
            }
            F::BitLength => Val::Int(bytes(&v[0]).len() as i64 * 8),
            F::Quote => Val::Str(quote(&bytes(&v[0]))),
            F::Insert => {
                let chars: Vec<char> = s(0).chars().collect();
                let n = chars.len() as i64;
                let (pos, len) = (ctx.num_i64(&v[1]), ctx.num_i64(&v[2]));
                if pos < 1 || pos > n {
                    return Ok(v[0].clone());
                }
                let start = (pos - 1) as usize;
                let end = if len < 0 || len > n - pos + 1 {
                    chars.len()
                } else {
                    start + len as usize
                };
                let mut out: String = chars[..start].iter().collect();
                out.push_str(&s(3));
                out.extend(&chars[end..]);
                Val::str(out)
            }
            F::Soundex => Val::str(soundex(&s(0))),
            F::NaturalSortKey => Val::str(natural_sort_key(&s(0))),
            F::WeightString(of) => match (&v[0], of) {
                (Val::Null, _) | (_, WeightOf::Nothing) => Val::Null,
                (x, _) => {
                    // AS CHAR(n) / AS BINARY(n): n characters or bytes,
                    // cut or padded (spaces, zero bytes).
                    let width = v
                        .get(2)
                        .map(|n| usize::try_from(ctx.num_i64(n)).unwrap_or(0));
                    let as_binary = v.get(1).is_some_and(|k| k.to_text() == "BINARY");
                    let bytes = match x {
                        Val::Str(b) => b.clone(),
                        other => other.to_text().into_bytes(),
                    };
                    if let Some(n) = width.filter(|n| as_binary && *n < bytes.len()) {
                        ctx.warn(
                            codes_truncated(),
                            format!(
                                "Truncated incorrect BINARY({n}) value: '{}'",
                                String::from_utf8_lossy(&bytes)
                            ),
                        );
                    }
                    weight_string(&bytes, of, width, as_binary)
                }
            },
            F::Microsecond => match time_or_time_of_day(&v[0]) {
                Some(m) => Val::Int((m.unsigned_abs() % 1_000_000) as i64),
                None => Val::Null,
            },
            F::ToSeconds => match calendar_datetime(&v[0], ctx) {
                Some((d, t)) => {
                    Val::Int(day_number(d) * 86_400 + time_of_day_micros(t) / MICROS_PER_SECOND)
                }
                None => Val::Null,
            },
            F::FromDays => Val::Date(from_day_number(ctx.num_i64(&v[0]))),
            F::MakeTime => {
                let (hour, minute) = (ctx.num_i64(&v[0]), ctx.num_i64(&v[1]));
                let second = match &v[2] {
                    Val::Int(i) => Dec::new(i128::from(*i), 0),
                    Val::UInt(u) => Dec::new(i128::from(*u), 0),
                    Val::Dec(d) => *d,
                    other => {
                        Dec::parse(&format!("{:.6}", ctx.num_f64(other))).unwrap_or(Dec::new(-1, 0))
                    }
                };
                let micros = second
                    .rescale(6)
                    .map_or(-1, |d| value::saturating_i128(d.mantissa));
                if micros >= 60_000_000 {
                    ctx.warn(
                        codes_truncated(),
                        format!("Truncated incorrect seconds value: '{}'", s(2)),
                    );
                }
                if !(0..60).contains(&minute) || !(0..60_000_000).contains(&micros) {
                    return Ok(Val::Null);
                }
                let negative = hour < 0 || (hour == 0 && v[0].to_text().starts_with('-'));
                // Any hour past 838 gives the same answer.
                let whole = (hour.unsigned_abs().min(1_000_000) as i64 * 3600 + minute * 60)
                    * MICROS_PER_SECOND
                    + micros as i64;
                let max = TIME_SECONDS_MAX * MICROS_PER_SECOND;
                let m = if whole > max {
                    ctx.warn(
                        codes_truncated(),
                        format!(
                            "Truncated incorrect time value: '{}{}:{:02}:{:02}'",
                            if negative { "-" } else { "" },
                            hour.unsigned_abs(),
                            minute,
                            micros / 1_000_000
                        ),
                    );
                    max
                } else {
                    whole
                };
                Val::Time(if negative { -m } else { m })
            }
            F::PeriodAdd => {
                let (period, months) = (ctx.num_i64(&v[0]), ctx.num_i64(&v[1]));
                Val::Int(if period == 0 {
                    0
                } else {
                    month_to_period(period_to_month(period) + months)
                })
            }
            F::PeriodDiff => {
                Val::Int(period_to_month(ctx.num_i64(&v[0])) - period_to_month(ctx.num_i64(&v[1])))
            }
            F::AddTime | F::SubTime => {
                let Some(mut add) = time_micros(&v[1]) else {
                    return Ok(Val::Null);
                };
                if self == F::SubTime {
                    add = -add;
                }
                let dated = match &v[0] {
                    Val::DateTime(..) => true,
                    Val::Str(b) => super::value::parse_datetime(&String::from_utf8_lossy(b))
                        .is_some_and(|(_, t)| t.is_some()),
                    _ => false,
                };
                if dated {
                    let Some((d, t)) = to_datetime(&v[0], ctx) else {
                        return Ok(Val::Null);
                    };
                    return Ok(match datetime_of_micros(datetime_micros(d, t) + add) {
                        Some((d, t)) if d.year <= 9999 => Val::DateTime(d, t),
                        _ => Val::Null,
                    });
                }
                let Some(base) = time_micros(&v[0]) else {
                    return Ok(Val::Null);
                };
                let m = base + add;
                // Past 838:59:59 a TIME stops there, as MariaDB's (with
                // the fraction a string result keeps).
                let max = TIME_SECONDS_MAX * MICROS_PER_SECOND
                    + if matches!(v[0], Val::Time(_)) {
                        0
                    } else {
                        999_999
                    };
                if m.abs() > max {
                    ctx.warn(
                        codes_truncated(),
                        format!(
                            "Truncated incorrect time value: '{}'",
                            Val::Time(m).to_text()
                        ),
                    );
                }
                Val::Time(m.clamp(-max, max))
            }
            F::TimeFormat => match time_or_time_of_day(&v[0]).and_then(|m| time_format(m, &s(1))) {
                Some(text) => Val::str(text),
                None => Val::Null,
            },
            F::Inet6Aton => {
                let text = s(0);
                match ipv4_bytes(&text) {
                    Some(b) => Val::Str(b.to_vec()),
                    None => ipv6_bytes(&text).map_or(Val::Null, |b| Val::Str(b.to_vec())),
                }
            }
            F::UuidToBin | F::BinToUuid | F::IsUuid if null_in => Val::Null,
            F::IsUuid => Val::Int(i64::from(uuid_bytes(&s(0)).is_some())),
            F::UuidToBin => {
                let Some(mut b) = uuid_bytes(&s(0)) else {
                    return Err(bad_uuid(&s(0), "uuid_to_bin"));
                };
                if v.get(1).is_some_and(|f| ctx.num_i64(f) != 0) {
                    // The time-low and time-high groups swapped, so that
                    // version-1 UUIDs made in order sort in order.
                    b = swap_uuid_time(b, true);
                }
                Val::Str(b.to_vec())
            }
            F::BinToUuid => {
                let raw = bytes(&v[0]);
                let Ok(mut b) = <[u8; 16]>::try_from(raw.as_slice()) else {
                    return Err(bad_uuid(&v[0].to_text(), "bin_to_uuid"));
                };
                if v.get(1).is_some_and(|f| ctx.num_i64(f) != 0) {
                    b = swap_uuid_time(b, false);
                }
                let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
                Val::str(format!(
                    "{}-{}-{}-{}-{}",
                    &hex[0..8],
                    &hex[8..12],
                    &hex[12..16],
                    &hex[16..20],
                    &hex[20..32]
                ))
            }
            F::Inet6Ntoa => match bytes(&v[0]).as_slice() {
                [a, b, c, d] => Val::str(format!("{a}.{b}.{c}.{d}")),
                b if b.len() == 16 => {
                    let mut words = [0u16; 8];
                    for (i, w) in words.iter_mut().enumerate() {
                        *w = u16::from_be_bytes([b[2 * i], b[2 * i + 1]]);
                    }
                    Val::str(ipv6_text(&words))
                }
                _ => Val::Null,
            },
            F::RegexpInstr => {
                let text = s(0);
                let at = with_regex(&s(1), true, |re| re.find(&text).map(|m| m.start()))?;
                Val::Int(at.map_or(0, |at| text[..at].chars().count() as i64 + 1))
            }
            F::RegexpSubstr => {
                let text = s(0);
                let found = with_regex(&s(1), true, |re| {
                    re.find(&text).map(|m| m.as_str().to_owned())
                })?;
                Val::str(found.unwrap_or_default())
            }
            F::ExportSet => {
                let bits = ctx.num_i64(&v[0]) as u64;
                let sep = v.get(3).map_or_else(|| b",".to_vec(), bytes);
                // Past 64 (or below 0) the count is 64, as MySQL's.
                let count = match v.get(4).map(|n| ctx.num_i64(n)) {
                    Some(n @ 0..=64) => n as usize,
                    _ => 64,
                };
                let (on, off) = (bytes(&v[1]), bytes(&v[2]));
                let mut out = Vec::new();
                for i in 0..count {
                    if i > 0 {
                        out.extend_from_slice(&sep);
                    }
                    out.extend_from_slice(if bits >> i & 1 == 1 { &on } else { &off });
                }
                Val::Str(out)
            }
            F::TimestampDiff => {
                let (Some((da, ta)), Some((db, tb))) =
                    (calendar_datetime(&v[1], ctx), calendar_datetime(&v[2], ctx))
                else {
                    return Ok(Val::Null);
                };
                let unit = s(0);
                match timestamp_diff(&unit, (da, ta), (db, tb)) {
                    Some(n) => Val::Int(n),
                    None => {
                        return Err(SqlError::syntax(format!(
                            "TIMESTAMPDIFF: unknown unit {unit}"
                        )))
                    }
                }
            }
            F::BitCount => Val::Int(i64::from(bits_of(&v[0], ctx).count_ones())),
            F::BitOr | F::BitAnd | F::BitXor | F::ShiftLeft | F::ShiftRight | F::BitNot => {
                if null_in {
                    return Ok(Val::Null);
                }
                let a = bits_of(&v[0], ctx);
                let b = v.get(1).map_or(0, |b| bits_of(b, ctx));
                Val::UInt(match self {
                    F::BitOr => a | b,
                    F::BitAnd => a & b,
                    F::BitXor => a ^ b,
                    // A shift by 64 or more leaves no bit (MySQL's, not the
                    // CPU's modulo-64 count).
                    F::ShiftLeft => a
                        .checked_shl(u32::try_from(b).unwrap_or(u32::MAX))
                        .unwrap_or(0),
                    F::ShiftRight => a
                        .checked_shr(u32::try_from(b).unwrap_or(u32::MAX))
                        .unwrap_or(0),
                    _ => !a,
                })
            }
            F::InetAton => inet_aton(&s(0)).map_or(Val::Null, |n| Val::UInt(u64::from(n))),
            F::InetNtoa => match &v[0] {
                Val::Int(i) if u32::try_from(*i).is_ok() => Val::str(inet_ntoa(*i as u32)),
                Val::UInt(u) if u32::try_from(*u).is_ok() => Val::str(inet_ntoa(*u as u32)),
                other => match u32::try_from(ctx.num_i64(other)) {
                    Ok(n) => Val::str(inet_ntoa(n)),
                    Err(_) => Val::Null,
                },
            },
            F::Greatest(collation) | F::Least(collation) => {
                if null_in {
                    return Ok(Val::Null);
                }
                let greatest = matches!(self, F::Greatest(_));
                let mut best = v[0].clone();
                for x in &v[1..] {
                    let o = compare(x, &best, collation, ctx);
                    if (greatest && o.is_gt()) || (!greatest && o.is_lt()) {
                        best = x.clone();
                    }
                }
                // A DOUBLE among them makes the call DOUBLE: the winner is
                // that double (`CAST(GREATEST(1e0, d) AS UNSIGNED)` of a
                // long decimal d reads the rounded double, as MariaDB's).
                if matches!(best, Val::Int(_) | Val::UInt(_) | Val::Dec(_))
                    && v.iter().any(|x| matches!(x, Val::Double(_)))
                {
                    best = Val::Double(ctx.num_f64(&best));
                }
                best
            }
            F::Length => Val::Int(match &v[0] {
                Val::Str(b) => b.len() as i64,
                other => other.to_text().len() as i64,
            }),
            F::CharLength => Val::Int(s(0).chars().count() as i64),
            F::Upper => Val::str(s(0).chars().map(simple_upper).collect::<String>()),
            F::Lower => Val::str(s(0).chars().map(simple_lower).collect::<String>()),
            F::Collate(_)
            | F::OuterMember
            | F::OuterBit
            | F::PerRow
            | F::BinaryLiteral
            | F::NumberText
            | F::Bytes => v[0].clone(),
            F::Substring => {
                let chars: Vec<char> = s(0).chars().collect();
                let n = chars.len() as i64;
                let pos = ctx.num_i64(&v[1]);
                let start = if pos > 0 {
                    pos - 1
                } else if pos < 0 {
                    n + pos
                } else {
                    return Ok(Val::str(""));
                };
                if start < 0 || start >= n {
                    return Ok(Val::str(""));
                }
                let len = match v.get(2) {
                    Some(l) => ctx.num_i64(l).max(0),
                    None => n,
                };
                let end = start.saturating_add(len).min(n);
                Val::str(
                    chars[start as usize..end as usize]
                        .iter()
                        .collect::<String>(),
                )
            }
            F::TrimBoth | F::TrimLeading | F::TrimTrailing => {
                let text = s(0);
                let what = v.get(1).map_or_else(|| " ".to_owned(), Val::to_text);
                if what.is_empty() {
                    return Ok(Val::str(text));
                }
                let mut t = text.as_str();
                if self != F::TrimTrailing {
                    while let Some(rest) = t.strip_prefix(what.as_str()) {
                        t = rest;
                    }
                }
                if self != F::TrimLeading {
                    while let Some(rest) = t.strip_suffix(what.as_str()) {
                        t = rest;
                    }
                }
                Val::str(t)
            }
            F::Replace => {
                let from = s(1);
                if from.is_empty() {
                    v[0].clone()
                } else {
                    Val::str(s(0).replace(&from, &s(2)))
                }
            }
            F::Left | F::Right => {
                let chars: Vec<char> = s(0).chars().collect();
                let n = ctx.num_i64(&v[1]).clamp(0, chars.len() as i64) as usize;
                let part: String = if self == F::Left {
                    chars[..n].iter().collect()
                } else {
                    chars[chars.len() - n..].iter().collect()
                };
                Val::str(part)
            }
            F::Lpad | F::Rpad => {
                let text: Vec<char> = s(0).chars().collect();
                let n = ctx.num_i64(&v[1]);
                if n < 0 {
                    return Ok(Val::Null);
                }
                let n = n as usize;
                if n.saturating_mul(4) > STRING_RESULT_BYTES_MAX {
                    return Ok(Val::Null);
                }
                if text.len() >= n {
                    return Ok(Val::str(text[..n].iter().collect::<String>()));
                }
                let pad: Vec<char> = s(2).chars().collect();
                if pad.is_empty() {
                    return Ok(Val::Null);
                }
                let fill: String = pad.iter().cycle().take(n - text.len()).collect();
                let text: String = text.into_iter().collect();
                Val::str(if self == F::Lpad {
                    fill + &text
                } else {
                    text + &fill
                })
            }
            F::Abs => match &v[0] {
                Val::Int(x) => Val::Int(x.checked_abs().ok_or_else(|| {
                    SqlError::new(1690, format!("BIGINT value is out of range in 'abs({x})'"))
                })?),
                Val::UInt(x) => Val::UInt(*x),
                Val::Dec(d) => Val::Dec(Dec::new(d.mantissa.saturating_abs(), d.scale)),
                other => Val::Double(ctx.num_f64(other).abs()),
            },
            F::Ceil | F::Floor => match &v[0] {
                Val::Int(_) | Val::UInt(_) => v[0].clone(),
                Val::Dec(d) => {
                    let p = value::pow10(d.scale);
                    let q = d.mantissa.div_euclid(p);
                    let r = d.mantissa.rem_euclid(p);
                    let q = if self == F::Ceil && r != 0 {
                        q + 1i128
                    } else {
                        q
                    };
                    // A BIGINT where it fits; past it a DECIMAL, which
                    // the result's kind is for an argument that long
                    // (MariaDB's rule, in `Func::kind`).
                    match i64::try_from(q) {
                        Ok(q) => Val::Int(q),
                        Err(_) => Val::Dec(Dec::new(q, 0)),
                    }
                }
                other => {
                    let f = ctx.num_f64(other);
                    Val::Double(if self == F::Ceil { f.ceil() } else { f.floor() })
                }
            },
            F::Round | F::Truncate => {
                let digits = match v.get(1) {
                    Some(d) => ctx.num_i64(d).clamp(-60, 30),
                    None => 0,
                };
                round(&v[0], digits, self == F::Truncate, ctx)?
            }
            F::Mod => super::eval::arith(super::Arith::Mod, v[0].clone(), v[1].clone(), ctx)?,
            F::Now | F::UtcTimestamp | F::CurTime | F::UtcTime => {
                let tz = if matches!(self, F::Now | F::CurTime) {
                    ctx.env.tz_secs
                } else {
                    0
                };
                let fsp = v.first().map_or(0, |f| ctx.num_i64(f).clamp(0, 6) as u32);
                let at = local_datetime(ctx.env.now_micros, tz, fsp);
                match (self, at) {
                    (F::CurTime | F::UtcTime, Val::DateTime(_, t)) => {
                        Val::Time(time_of_day_micros(t))
                    }
                    (_, at) => at,
                }
            }
            F::CurDate | F::UtcDate => {
                let tz = if self == F::CurDate {
                    ctx.env.tz_secs
                } else {
                    0
                };
                match local_datetime(ctx.env.now_micros, tz, 0) {
                    Val::DateTime(d, _) => Val::Date(d),
                    other => other,
                }
            }
            F::UnixTimestamp => match v.first() {
                None => Val::Int(ctx.env.now_micros.div_euclid(MICROS_PER_SECOND)),
                Some(x) => match calendar_datetime(x, ctx) {
                    Some((d, t)) => {
                        let utc = datetime_micros(d, t) - ctx.env.tz_secs * MICROS_PER_SECOND;
                        Val::Int(utc.max(0).div_euclid(MICROS_PER_SECOND))
                    }
                    None => Val::Null,
                },
            },
            F::FromUnixtime => {
                let (micros, fsp) = match &v[0] {
                    Val::Int(i) => (i.checked_mul(MICROS_PER_SECOND), 0),
                    Val::UInt(u) => (
                        i64::try_from(*u)
                            .ok()
                            .and_then(|i| i.checked_mul(MICROS_PER_SECOND)),
                        0,
                    ),
                    Val::Dec(d) => (
                        d.rescale(6).and_then(|m| i64::try_from(m.mantissa).ok()),
                        u32::from(d.scale.min(6)),
                    ),
                    other => {
                        let f = ctx.num_f64(other) * 1e6;
                        (f.is_finite().then(|| f.round() as i64), 6)
                    }
                };
                let Some(micros) = micros.filter(|m| *m >= 0) else {
                    return Ok(Val::Null);
                };
                let at = local_datetime(micros, ctx.env.tz_secs, fsp);
                match (v.get(1), at) {
                    (Some(format), Val::DateTime(d, t)) => {
                        Val::str(date_format(d, t, &format.to_text()))
                    }
                    (_, at) => at,
                }
            }
            F::ConvertTz => {
                let (Some(from), Some(to)) = (zone_secs(&s(1)), zone_secs(&s(2))) else {
                    return Ok(Val::Null);
                };
                let Some((d, t)) = to_datetime(&v[0], ctx) else {
                    return Ok(Val::Null);
                };
                let utc = datetime_micros(d, t) - from * MICROS_PER_SECOND;
                local_datetime(utc, to, 6)
            }
            F::Sleep => {
                let secs = ctx.num_f64(&v[0]).clamp(0.0, SLEEP_SECONDS_MAX);
                let end = std::time::Instant::now() + std::time::Duration::from_secs_f64(secs);
                // Interrupted (KILL QUERY, `max_execution_time`), SLEEP
                // returns 1 as MySQL's, and the statement's next check
                // stops it; MariaDB's `max_statement_time` fails it here.
                loop {
                    if ctx.interrupted() {
                        if let Some(d) = ctx
                            .deadline
                            .filter(|d| d.limit == TimeLimit::StatementTime && ctx.expired.get())
                        {
                            return Err(d.error());
                        }
                        return Ok(Val::Int(1));
                    }
                    let now = std::time::Instant::now();
                    if now >= end {
                        break;
                    }
                    let slice = std::time::Duration::from_millis(SLEEP_SLICE_MS);
                    std::thread::sleep((end - now).min(slice));
                }
                Val::Int(0)
            }
            F::Date => match fuzzy_datetime(&v[0], ctx) {
                Some((d, _)) => Val::Date(d),
                None => Val::Null,
            },
            // A time's parts, as MySQL reads its argument: as a TIME (a
            // string `'10:11:12'`, `'1 10:11:12'`, `'101112'`, a number
            // 101112) or a datetime's time of day; the hours past 23 too
            // (`HOUR('100:00:00')` is 100); what is neither is NULL with
            // 1292.
            // A number past TIME's range (838:59:59) is a datetime's
            // (`HOUR(240229123456)` is 12), as MySQL's `number_to_time`.
            F::Hour | F::Minute | F::Second
                if matches!(
                    &v[0],
                    Val::Int(_) | Val::UInt(_) | Val::Dec(_) | Val::Double(_)
                ) && ctx.num_f64(&v[0]).abs() > TIME_NUMBER_MAX =>
            {
                // Its own warnings are a time's, not a datetime's.
                let before = ctx.warnings.len();
                let read = fuzzy_datetime(&v[0], ctx);
                ctx.warnings.truncate(before);
                match read {
                    Some((_, t)) => Val::Int(i64::from(match self {
                        F::Hour => t.hour,
                        F::Minute => t.minute,
                        _ => t.second,
                    })),
                    None => {
                        ctx.warn(
                            codes_truncated(),
                            format!("Incorrect time value: '{}'", v[0].to_text()),
                        );
                        Val::Null
                    }
                }
            }
            F::Hour | F::Minute | F::Second => match time_or_time_of_day(&v[0]) {
                Some(m) => {
                    let seconds = (m.unsigned_abs() / 1_000_000) as i64;
                    Val::Int(match self {
                        F::Hour => seconds / 3600,
                        F::Minute => seconds / 60 % 60,
                        _ => seconds % 60,
                    })
                }
                None => match time_prefix(&v[0]) {
                    // The digits before the rest, as MySQL's `str_to_time`
                    // stops there: `HOUR('10-11-12')` reads 10 seconds.
                    Some(m) => {
                        ctx.warn(
                            codes_truncated(),
                            format!("Truncated incorrect time value: '{}'", v[0].to_text()),
                        );
                        let seconds = (m.unsigned_abs() / 1_000_000) as i64;
                        Val::Int(match self {
                            F::Hour => seconds / 3600,
                            F::Minute => seconds / 60 % 60,
                            _ => seconds % 60,
                        })
                    }
                    None => {
                        ctx.warn(
                            codes_truncated(),
                            format!("Incorrect time value: '{}'", v[0].to_text()),
                        );
                        Val::Null
                    }
                },
            },
            F::Year | F::Month | F::Day => {
                let (d, t) = match &v[0] {
                    Val::Time(m) => {
                        let abs = m.unsigned_abs() / 1_000_000;
                        let t = Time {
                            hour: (abs / 3600 % 24) as u8,
                            minute: (abs / 60 % 60) as u8,
                            second: (abs % 60) as u8,
                            micros: 0,
                        };
                        (Date::default(), t)
                    }
                    other => match fuzzy_datetime(other, ctx) {
                        Some(x) => x,
                        None => return Ok(Val::Null),
                    },
                };
                let _ = t;
                Val::Int(i64::from(match self {
                    F::Year => d.year,
                    F::Month => u16::from(d.month),
                    _ => u16::from(d.day),
                }))
            }
            F::DateAdd | F::DateSub => {
                let Some((d, t)) = to_datetime(&v[0], ctx) else {
                    return Ok(Val::Null);
                };
                // The zero date (0, '0000-00-00') or one with a zero part
                // is no day to count from: NULL and 1292, as MariaDB's.
                if !super::value::date_valid(d) {
                    let text = match &v[0] {
                        Val::Str(_) | Val::Date(_) => v[0].to_text(),
                        _ => super::value::datetime_text(d, t, 0),
                    };
                    ctx.warn(
                        crate::error::codes::TRUNCATED_WRONG_VALUE,
                        format!("Incorrect datetime value: '{text}'"),
                    );
                    return Ok(Val::Null);
                }
                let unit = s(2).to_ascii_uppercase();
                let was_date = match &v[0] {
                    Val::Date(_) => true,
                    Val::Str(b) => super::value::parse_datetime(&String::from_utf8_lossy(b))
                        .is_some_and(|(_, t)| t.is_none()),
                    // A number of a date's digits (20240301) is a date.
                    Val::Int(_) | Val::UInt(_) => u64::try_from(ctx.num_i64(&v[0]))
                        .ok()
                        .and_then(super::value::datetime_of_number)
                        .is_some_and(|(_, t)| t.is_none()),
                    _ => false,
                };
                if unit.contains('_') {
                    // A compound unit: its fields read from the text.
                    let Some(amount) = compound_interval(&s(1), &unit) else {
                        return Ok(Val::Null);
                    };
                    let amount = if self == F::DateSub { -amount } else { amount };
                    return if unit == "YEAR_MONTH" {
                        date_add(d, t, amount, "MONTH", was_date)
                    } else {
                        // Never a DATE: the unit has a time part.
                        date_add(d, t, amount, "MICROSECOND", false)
                    };
                }
                let mut amount = ctx.num_i64(&v[1]);
                if self == F::DateSub {
                    amount = -amount;
                }
                date_add(d, t, amount, &unit, was_date)?
            }
            F::DateFormat => match fuzzy_datetime(&v[0], ctx) {
                Some((d, t)) => Val::str(date_format(d, t, &s(1))),
                None => Val::Null,
            },
            F::Repeat => {
                let n = ctx.num_i64(&v[1]).max(0) as usize;
                let unit = bytes(&v[0]);
                if unit.len().saturating_mul(n) > STRING_RESULT_BYTES_MAX {
                    return Ok(Val::Null);
                }
                Val::Str(unit.repeat(n))
            }
            F::Hex => match &v[0] {
                Val::Str(b) => Val::str(b.iter().map(|x| format!("{x:02X}")).collect::<String>()),
                // A date or time as its text, as MariaDB's HEX reads it.
                temporal @ (Val::Date(_) | Val::DateTime(..) | Val::Time(_)) => Val::str(
                    temporal
                        .to_text()
                        .bytes()
                        .map(|x| format!("{x:02X}"))
                        .collect::<String>(),
                ),
                other => {
                    // As BIGINT UNSIGNED bits: a fraction rounds, past
                    // the type (either end, for a double or a decimal,
                    // read through a double) it is all ones, a negative
                    // number its two's complement, as MariaDB's HEX reads it.
                    let n = match other {
                        Val::Dec(_) | Val::Double(_) => {
                            let f = ctx.num_f64(other).round();
                            if f <= i64::MIN as f64 || f >= u64::MAX as f64 {
                                u64::MAX
                            } else if f < 0.0 {
                                f as i64 as u64
                            } else {
                                f as u64
                            }
                        }
                        _ => bits_of(other, ctx),
                    };
                    Val::str(format!("{n:X}"))
                }
            },
            F::SubstringIndex => {
                let text = s(0);
                let delim = s(1);
                let count = ctx.num_i64(&v[2]);
                if delim.is_empty() || count == 0 {
                    return Ok(Val::str(""));
                }
                let parts: Vec<&str> = text.split(delim.as_str()).collect();
                let n = usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX);
                if n >= parts.len() {
                    return Ok(Val::str(text));
                }
                Val::str(if count > 0 {
                    parts[..n].join(&delim)
                } else {
                    parts[parts.len() - n..].join(&delim)
                })
            }
            F::StrToDate => match str_to_date(&s(0), &s(1)) {
                Some((d, Some(t))) => Val::DateTime(d, t),
                Some((d, None)) => Val::Date(d),
                None => {
                    ctx.warn(
                        codes_truncated(),
                        format!(
                            "Incorrect datetime value: '{}' for function str_to_date",
                            s(0)
                        ),
                    );
                    Val::Null
                }
            },
            F::Sqrt => {
                let x = ctx.num_f64(&v[0]);
                if x < 0.0 {
                    Val::Null
                } else {
                    Val::Double(x.sqrt())
                }
            }
            F::Power => {
                let r = ctx.num_f64(&v[0]).powf(ctx.num_f64(&v[1]));
                if r.is_finite() {
                    Val::Double(r)
                } else {
                    return Err(SqlError::new(
                        1690,
                        format!("DOUBLE value is out of range in 'pow({},{})'", s(0), s(1)),
                    ));
                }
            }
            F::Sign => Val::Int(match &v[0] {
                Val::Int(i) => i.signum(),
                Val::UInt(u) => i64::from(*u > 0),
                Val::Dec(d) => d.mantissa.signum128() as i64,
                other => {
                    let x = ctx.num_f64(other);
                    if x > 0.0 {
                        1
                    } else if x < 0.0 {
                        -1
                    } else {
                        0
                    }
                }
            }),
            F::Reverse => Val::str(s(0).chars().rev().collect::<String>()),
            F::Locate | F::Instr => {
                let (needle, hay) = if self == F::Locate {
                    (s(0), s(1))
                } else {
                    (s(1), s(0))
                };
                // One character for one, so positions are the text's.
                let hay: Vec<char> = hay.chars().map(simple_lower).collect();
                let needle: Vec<char> = needle.chars().map(simple_lower).collect();
                let from = match v.get(2) {
                    Some(p) => ctx.num_i64(p),
                    None => 1,
                };
                if from < 1 {
                    return Ok(Val::Int(0));
                }
                let start = usize::try_from(from - 1).unwrap_or(usize::MAX);
                if needle.is_empty() {
                    return Ok(Val::Int(if start <= hay.len() { from } else { 0 }));
                }
                let found = (start..hay.len().saturating_sub(needle.len()) + 1)
                    .find(|i| hay[*i..].starts_with(&needle));
                Val::Int(found.map_or(0, |i| i as i64 + 1))
            }
            // A zero day is the month's last (2024-02-00: 2024-02-29); a
            // zero month NULL without a warning, as MariaDB's.
            F::LastDay => match fuzzy_datetime(&v[0], ctx) {
                Some((d, _)) if d.month != 0 => {
                    let (y, m) = (i64::from(d.year), i64::from(d.month));
                    let next = if m == 12 {
                        days_from_civil(y + 1, 1, 1)
                    } else {
                        days_from_civil(y, m + 1, 1)
                    };
                    let last = (next - days_from_civil(y, m, 1)) as u8;
                    Val::Date(Date { day: last, ..d })
                }
                _ => Val::Null,
            },
            F::DayOfWeek => match calendar_datetime(&v[0], ctx) {
                Some((d, _)) => {
                    let days =
                        days_from_civil(i64::from(d.year), i64::from(d.month), i64::from(d.day));
                    // 1970-01-01 was a Thursday (5 in MySQL's Sunday = 1).
                    Val::Int((days + 4).rem_euclid(7) + 1)
                }
                None => Val::Null,
            },
            F::DateDiff => match (calendar_datetime(&v[0], ctx), calendar_datetime(&v[1], ctx)) {
                (Some((a, _)), Some((b, _))) => {
                    let day = |d: Date| {
                        days_from_civil(i64::from(d.year), i64::from(d.month), i64::from(d.day))
                    };
                    Val::Int(day(a) - day(b))
                }
                _ => Val::Null,
            },
            F::LastInsertId => Val::UInt(ctx.env.last_insert_id.get()),
            F::FoundRows => Val::UInt(ctx.env.found_rows),
            F::GetLock | F::ReleaseLock | F::IsFreeLock | F::IsUsedLock => {
                let Some(locks) = ctx.env.user_locks.clone() else {
                    return Ok(Val::Null);
                };
                let (name, me) = (s(0), ctx.env.connection_id);
                match self {
                    F::GetLock => {
                        // A negative timeout waits for ever (MySQL 5.7+).
                        let secs = ctx.num_f64(&v[1]);
                        let timeout = (secs >= 0.0).then(|| {
                            std::time::Duration::from_secs_f64(secs.min(SLEEP_SECONDS_MAX))
                        });
                        match locks.get(&name, me, timeout, || ctx.interrupted())? {
                            crate::engine::user_locks::Got::Taken => Val::Int(1),
                            crate::engine::user_locks::Got::TimedOut => Val::Int(0),
                            crate::engine::user_locks::Got::Interrupted => Val::Null,
                        }
                    }
                    F::ReleaseLock => match locks.release(&name, me)? {
                        Some(mine) => Val::Int(i64::from(mine)),
                        None => Val::Null,
                    },
                    F::IsFreeLock => Val::Int(i64::from(locks.holder(&name)?.is_none())),
                    _ => match locks.holder(&name)? {
                        Some(id) => Val::UInt(u64::from(id)),
                        None => Val::Null,
                    },
                }
            }
            F::RowCount => Val::Int(ctx.env.row_count),
            F::ConnectionId => Val::UInt(u64::from(ctx.env.connection_id)),
            F::Database => match &ctx.env.database {
                Some(db) => Val::str(db.clone()),
                None => Val::Null,
            },
            F::Version => Val::str(ctx.env.version),
            F::User => Val::str(ctx.env.user.to_string()),
        })
    }
}

/// MySQL's day number of a date (`TO_DAYS`): 0000-03-01 on, it counts
/// days as the proleptic Gregorian calendar does.
fn day_number(d: Date) -> i64 {
    // MySQL's day number of 1970-01-01 is 719,528.
    days_from_civil(i64::from(d.year), i64::from(d.month), i64::from(d.day)) + 719_528
}

/// `FROM_DAYS`: the date of a day number; before year 1 and past year
/// 9999 the zero date, as MySQL's.
fn from_day_number(n: i64) -> Date {
    /// Day numbers of 0001-01-01 and of 10000-01-01.
    const FIRST: i64 = 366;
    const PAST_LAST: i64 = 3_652_425;
    if !(FIRST..PAST_LAST).contains(&n) {
        return Date::default();
    }
    let (y, m, d) = super::value::civil_from_days(n - 719_528);
    Date {
        year: y as u16,
        month: m as u8,
        day: d as u8,
    }
}

/// `WEEK`, `YEARWEEK` and `WEEKOFYEAR` of a date in a mode (MySQL's
/// `calc_week`: bit 0 weeks start on Monday, bit 1 week 0 counts as the
/// last week of the year before, bit 2 week 1 is the first with the
/// first day of the week rather than the first with four days).
fn week_value(f: Func, d: Date, mode: i64) -> Val {
    const MONDAY_FIRST: i64 = 1;
    const WEEK_YEAR: i64 = 2;
    const FIRST_WEEKDAY: i64 = 4;
    let mut behaviour = mode & 7;
    if behaviour & MONDAY_FIRST == 0 {
        behaviour ^= FIRST_WEEKDAY;
    }
    if f == Func::YearWeek {
        behaviour |= WEEK_YEAR;
    }
    let days_in_year = |y: i64| {
        if y % 4 == 0 && (y % 100 != 0 || (y % 400 == 0 && y != 0)) {
            366
        } else {
            365
        }
    };
    let daynr = day_number(d);
    let mut first_daynr = day_number(Date {
        month: 1,
        day: 1,
        ..d
    });
    let monday_first = behaviour & MONDAY_FIRST != 0;
    let mut week_year = behaviour & WEEK_YEAR != 0;
    let first_weekday = behaviour & FIRST_WEEKDAY != 0;
    let mut weekday = (first_daynr + 5 + i64::from(!monday_first)).rem_euclid(7);
    let mut year = i64::from(d.year);
    let short_first_week =
        |weekday: i64| (first_weekday && weekday != 0) || (!first_weekday && weekday >= 4);
    let week = 'week: {
        if d.month == 1 && i64::from(d.day) <= 7 - weekday {
            if !week_year && short_first_week(weekday) {
                break 'week 0;
            }
            week_year = true;
            year -= 1;
            let days = days_in_year(year);
            first_daynr -= days;
            weekday = (weekday + 53 * 7 - days).rem_euclid(7);
        }
        let days = if short_first_week(weekday) {
            daynr - (first_daynr + (7 - weekday))
        } else {
            daynr - (first_daynr - weekday)
        };
        if week_year && days >= 52 * 7 {
            let weekday = (weekday + days_in_year(year)) % 7;
            if (!first_weekday && weekday < 4) || (first_weekday && weekday == 0) {
                year += 1;
                break 'week 1;
            }
        }
        days / 7 + 1
    };
    Val::Int(if f == Func::YearWeek {
        year * 100 + week
    } else {
        week
    })
}

/// `PERIOD_ADD`'s months of a period, `YYMM` or `YYYYMM` (MySQL's
/// two-digit years: 70 to 99 are 19xx).
fn period_to_month(period: i64) -> i64 {
    if period == 0 {
        return 0;
    }
    let year = match period / 100 {
        y @ 0..70 => y + 2000,
        y @ 70..100 => y + 1900,
        y => y,
    };
    year * 12 + period % 100 - 1
}

fn month_to_period(month: i64) -> i64 {
    if month == 0 {
        return 0;
    }
    let year = match month / 12 {
        y @ 0..70 => y + 2000,
        y @ 70..100 => y + 1900,
        y => y,
    };
    year * 100 + month % 12 + 1
}

/// `TIME_FORMAT`: a time (any number of hours) in a format of hour,
/// minute, second and microsecond specifiers; None (NULL) where the
/// format asks for a part of a date.
fn time_format(micros: i64, format: &str) -> Option<String> {
    let abs = micros.unsigned_abs();
    let secs = abs / 1_000_000;
    let (hours, minute, second, fraction) =
        (secs / 3600, secs / 60 % 60, secs % 60, abs % 1_000_000);
    let h12 = match hours % 12 {
        0 => 12,
        h => h,
    };
    let am_pm = if hours % 24 < 12 { "AM" } else { "PM" };
    let mut out = String::new();
    if micros < 0 {
        out.push('-');
    }
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let Some(spec) = chars.next() else { break };
        let piece = match spec {
            'H' => format!("{hours:02}"),
            'k' => hours.to_string(),
            'h' | 'I' => format!("{h12:02}"),
            'l' => h12.to_string(),
            'i' => format!("{minute:02}"),
            's' | 'S' => format!("{second:02}"),
            'f' => format!("{fraction:06}"),
            'p' => am_pm.to_owned(),
            'T' => format!("{hours:02}:{minute:02}:{second:02}"),
            'r' => format!("{h12:02}:{minute:02}:{second:02} {am_pm}"),
            'a' | 'b' | 'c' | 'D' | 'd' | 'e' | 'j' | 'M' | 'm' | 'U' | 'u' | 'V' | 'v' | 'W'
            | 'w' | 'X' | 'x' | 'Y' | 'y' => return None,
            other => other.to_string(),
        };
        out.push_str(&piece);
    }
    Some(out)
}

/// `QUOTE`: in single quotes, with `\`, `'`, NUL and Ctrl-Z escaped.
fn quote(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() + 2);
    out.push(b'\'');
    for &b in text {
        match b {
            b'\\' | b'\'' => out.extend_from_slice(&[b'\\', b]),
            0 => out.extend_from_slice(b"\\0"),
            0x1A => out.extend_from_slice(b"\\Z"),
            _ => out.push(b),
        }
    }
    out.push(b'\'');
    out
}

/// `SOUNDEX`, as MySQL's: letters only; a code repeats only where a
/// coded letter (not a vowel) comes between; at least four characters.
/// WEIGHT_STRING's bytes of `bytes` (`width`: AS CHAR(n) characters,
/// or AS BINARY(n) bytes when `as_binary`).
fn weight_string(bytes: &[u8], of: WeightOf, width: Option<usize>, as_binary: bool) -> Val {
    if as_binary || of == WeightOf::Bytes {
        let mut out = bytes.to_vec();
        if let Some(n) = width {
            out.resize(n, 0);
        }
        return Val::Str(out);
    }
    let WeightOf::Text(collation) = of else {
        return Val::Null;
    };
    let text = String::from_utf8_lossy(bytes);
    let mut chars: Vec<char> = text.chars().collect();
    if let Some(n) = width {
        chars.resize(n, ' ');
    }
    let mut out = Vec::with_capacity(chars.len() * 3);
    for c in chars {
        let w = u32::from(collation.weight(c));
        match collation {
            Collation::Utf8mb4Bin => out.extend_from_slice(&w.to_be_bytes()[1..]),
            Collation::Utf8mb4GeneralCi => {
                let w = if w > 0xFFFF { 0xFFFD } else { w };
                out.extend_from_slice(&(w as u16).to_be_bytes());
            }
        }
    }
    Val::Str(out)
}

/// MariaDB's NATURAL_SORT_KEY: each run of digits loses its leading
/// zeros (one zero stays of an all-zero run) and is prefixed by its
/// length less one, written as nines while it is 9 or more and then the
/// rest (`7` is `07`, `10` is `110`, ten digits `90…`), so that a longer
/// number sorts after a shorter one.
fn natural_sort_key(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 4);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if !c.is_ascii_digit() {
            out.push(c);
            continue;
        }
        let mut run = String::from(c);
        while let Some(&d) = chars.peek().filter(|d| d.is_ascii_digit()) {
            run.push(d);
            chars.next();
        }
        let digits = match run.trim_start_matches('0') {
            "" => "0",
            d => d,
        };
        let mut n = digits.len() - 1;
        while n >= 9 {
            out.push('9');
            n -= 9;
        }
        out.push(char::from(b'0' + n as u8));
        out.push_str(digits);
    }
    out
}

fn soundex(text: &str) -> String {
    /// Codes of A to Z (0: not coded).
    const CODES: &[u8; 26] = b"01230120022455012623010202";
    let code = |c: char| CODES[(c.to_ascii_uppercase() as u8 - b'A') as usize];
    let mut letters = text.chars().filter(char::is_ascii_alphabetic);
    let Some(first) = letters.next() else {
        return String::new();
    };
    let mut out = String::from(first.to_ascii_uppercase());
    let mut last = code(first);
    for c in letters {
        let x = code(c);
        if x != b'0' && x != last {
            out.push(x as char);
            last = x;
        }
    }
    while out.len() < 4 {
        out.push('0');
    }
    out
}

/// `IS_IPV4`'s dotted quad: four numbers of at most 255.
fn ipv4_bytes(text: &str) -> Option<[u8; 4]> {
    let mut out = [0u8; 4];
    let mut parts = text.split('.');
    for byte in &mut out {
        let part = parts.next()?;
        if part.is_empty() || part.len() > 3 || !part.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        *byte = part.parse().ok()?;
    }
    parts.next().is_none().then_some(out)
}

/// `IS_IPV6`'s address: eight groups of hexadecimal, `::` for a run of
/// zeros, a dotted quad in place of the last two.
fn ipv6_bytes(text: &str) -> Option<[u8; 16]> {
    text.parse::<std::net::Ipv6Addr>().ok().map(|a| a.octets())
}

/// `INET6_NTOA`'s text, as MySQL's: the longest run of zero groups (even
/// one) as `::`, and an IPv4-compatible or IPv4-mapped address with its
/// dotted quad.
fn ipv6_text(words: &[u16; 8]) -> String {
    let (mut gap, mut run): ((usize, usize), Option<(usize, usize)>) = ((8, 0), None);
    for (i, w) in words.iter().enumerate() {
        if *w == 0 {
            let (at, len) = run.unwrap_or((i, 0));
            run = Some((at, len + 1));
        } else if let Some(r) = run.take() {
            if r.1 > gap.1 {
                gap = r;
            }
        }
    }
    if let Some(r) = run {
        if r.1 > gap.1 {
            gap = r;
        }
    }
    if gap.0 == 0 && (gap.1 == 6 || (gap.1 == 5 && words[5] == 0xFFFF)) {
        let [a, b] = words[6].to_be_bytes();
        let [c, d] = words[7].to_be_bytes();
        let prefix = if gap.1 == 6 { "::" } else { "::ffff:" };
        return format!("{prefix}{a}.{b}.{c}.{d}");
    }
    let mut out = String::new();
    let mut i = 0;
    while i < 8 {
        if i == gap.0 {
            out.push_str(if i == 0 { "::" } else { ":" });
            i += gap.1;
            continue;
        }
        out.push_str(&format!("{:x}", words[i]));
        if i < 7 {
            out.push(':');
        }
        i += 1;
    }
    out
}

/// `UUID_SHORT()`, as MySQL lays it out: the server id's low byte, the
/// seconds the SQL node started at, and a counter; the SQL node's first
/// call sets the first two.
fn uuid_short(server_id: u64) -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;
    static NEXT: OnceLock<AtomicU64> = OnceLock::new();
    NEXT.get_or_init(|| {
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        AtomicU64::new(((server_id & 255) << 56).wrapping_add(started << 24))
    })
    .fetch_add(1, Ordering::Relaxed)
}

/// The sequences of a statement's `RAND(seed)` calls, by call site (no
/// allocation until one is called: every statement makes an [`Env`]).
///
/// [`Env`]: super::eval::Env
#[derive(Debug, Default)]
pub struct RandStates(std::sync::Mutex<std::collections::HashMap<u64, MysqlRand>>);

impl RandStates {
    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<u64, MysqlRand>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Clone for RandStates {
    fn clone(&self) -> Self {
        RandStates(std::sync::Mutex::new(self.lock().clone()))
    }
}

/// MySQL's `RAND(seed)` generator (`my_rnd`), the same sequence for the
/// same seed.
#[derive(Clone, Copy, Debug)]
pub struct MysqlRand {
    seed1: u64,
    seed2: u64,
}

impl MysqlRand {
    const MAX: u64 = 0x3FFF_FFFF;

    /// Seeded as MySQL's `Item_func_rand::seed_random`.
    pub fn seeded(seed: u32) -> MysqlRand {
        let seed1 = seed.wrapping_mul(0x10001).wrapping_add(55_555_555);
        let seed2 = seed.wrapping_mul(0x1000_0001);
        MysqlRand {
            seed1: u64::from(seed1) % Self::MAX,
            seed2: u64::from(seed2) % Self::MAX,
        }
    }

    /// The next value, in [0, 1).
    pub fn next(&mut self) -> f64 {
        self.seed1 = (self.seed1 * 3 + self.seed2) % Self::MAX;
        self.seed2 = (self.seed1 + self.seed2 + 33) % Self::MAX;
        self.seed1 as f64 / Self::MAX as f64
    }
}

/// Characters per line of `TO_BASE64`'s text (MySQL's).
const BASE64_LINE_CHARS: usize = 76;

/// `TIMESTAMPDIFF(unit, a, b)`: whole units from `a` to `b`, cut toward
/// zero; months (and quarters and years) count a month only once the
/// day and time of `b` reach those of `a`, as MySQL's. None for an
/// unknown unit.
fn timestamp_diff(unit: &str, a: (Date, Time), b: (Date, Time)) -> Option<i64> {
    let (ma, mb) = (datetime_micros(a.0, a.1), datetime_micros(b.0, b.1));
    let per = |micros: i64| Some((mb - ma) / micros);
    match unit {
        "MICROSECOND" => per(1),
        "SECOND" => per(MICROS_PER_SECOND),
        "MINUTE" => per(60 * MICROS_PER_SECOND),
        "HOUR" => per(3_600 * MICROS_PER_SECOND),
        "DAY" => per(MICROS_PER_DAY),
        "WEEK" => per(7 * MICROS_PER_DAY),
        "MONTH" | "QUARTER" | "YEAR" => {
            let month_of = |d: Date| i64::from(d.year) * 12 + i64::from(d.month);
            let mut months = month_of(b.0) - month_of(a.0);
            // The rest of each: day of month and time of day.
            let rest = |(d, t): (Date, Time)| (d.day, time_of_day_micros(t));
            let (ra, rb) = (rest(a), rest(b));
            if mb >= ma && months > 0 && rb < ra {
                months -= 1;
            } else if mb < ma && months < 0 && rb > ra {
                months += 1;
            }
            Some(match unit {
                "MONTH" => months,
                "QUARTER" => months / 3,
                _ => months / 12,
            })
        }
        _ => None,
    }
}

/// Longest pattern `REGEXP` compiles, in bytes, and the most memory its
/// compiled form may take: a pattern is the user's input.
const REGEX_PATTERN_BYTES_MAX: usize = 4096;
const REGEX_COMPILED_BYTES_MAX: usize = 1 << 20;

/// Whether `text` matches `pattern` somewhere.
fn regexp_is_match(pattern: &str, case_insensitive: bool, text: &str) -> SqlResult<bool> {
    with_regex(pattern, case_insensitive, |re| re.is_match(text))
}

/// Runs `f` with `pattern` compiled. The last pattern compiled on this
/// thread is kept: a constant pattern (the usual case) compiles once per
/// statement's rows, not once per row.
fn with_regex<T>(
    pattern: &str,
    case_insensitive: bool,
    f: impl FnOnce(&regex::Regex) -> T,
) -> SqlResult<T> {
    use std::cell::RefCell;
    thread_local! {
        static LAST: RefCell<Option<(String, bool, regex::Regex)>> = const { RefCell::new(None) };
    }
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        let fresh = !matches!(&*last, Some((p, ci, _)) if p == pattern && *ci == case_insensitive);
        if fresh {
            if pattern.len() > REGEX_PATTERN_BYTES_MAX {
                return Err(SqlError::new(
                    crate::error::codes::REGEXP_ERROR,
                    format!("Regex error 'pattern longer than {REGEX_PATTERN_BYTES_MAX} bytes'"),
                ));
            }
            let compiled = regex::RegexBuilder::new(pattern)
                .case_insensitive(case_insensitive)
                .size_limit(REGEX_COMPILED_BYTES_MAX)
                .build()
                .map_err(|e| {
                    let why = e.to_string();
                    let first = why.lines().last().unwrap_or("invalid pattern").trim();
                    SqlError::new(
                        crate::error::codes::REGEXP_ERROR,
                        format!("Regex error '{first}'"),
                    )
                })?;
            *last = Some((pattern.to_owned(), case_insensitive, compiled));
        }
        let (_, _, re) = last.as_ref().expect("just set");
        Ok(f(re))
    })
}

/// Appends a value's bytes (a string's as they are, anything else's
/// text) for CONCAT and CONCAT_WS; false past `STRING_RESULT_BYTES_MAX`.
fn push_bytes(out: &mut Vec<u8>, v: &Val) -> bool {
    match v {
        Val::Str(b) => out.extend_from_slice(b),
        other => out.extend_from_slice(other.to_text().as_bytes()),
    }
    out.len() <= STRING_RESULT_BYTES_MAX
}

/// Text whose characters stand for bytes (`Func::eval` over bytes that
/// are not UTF-8) back as those bytes; a character past U+00FF (from an
/// argument that was text) as its UTF-8.
fn latin1_bytes(text: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(text);
    let mut out = Vec::with_capacity(text.len());
    for c in text.chars() {
        match u8::try_from(u32::from(c)) {
            Ok(b) => out.push(b),
            Err(_) => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
        }
    }
    out
}

/// ELT's value: the argument taken, as text (a date's, a number's), as
/// MariaDB's string function gives it; NULL as it is.
fn elt_text(v: Val) -> Val {
    match v {
        Val::Null | Val::Str(_) => v,
        other => Val::str(other.to_text()),
    }
}

/// ELT's value read as a number: a temporal value's number, anything
/// else as it is (text is read as a number where it is used).
fn elt_number(v: Val) -> Val {
    match v {
        Val::Date(_) | Val::DateTime(..) | Val::Time(_) => Val::Dec(v.temporal_number()),
        other => other,
    }
}

/// Seconds in the largest TIME (838:59:59).
const TIME_SECONDS_MAX: i64 = 838 * 3_600 + 59 * 60 + 59;
/// Microseconds in the largest TIME (838:59:59.999999).
const TIME_MICROS_MAX: i64 = TIME_SECONDS_MAX * MICROS_PER_SECOND + 999_999;

/// A TIME's microseconds: a TIME, a DATETIME's time of day, or text that
/// reads as a time.
fn time_micros(v: &Val) -> Option<i64> {
    match v {
        Val::Time(m) => Some(*m),
        Val::DateTime(_, t) => Some(time_of_day_micros(*t)),
        Val::Date(_) => Some(0),
        other => super::value::parse_time(&other.to_text()),
    }
}

/// TIME(x): x's time (a date and time's time of day), as MariaDB reads
/// it: text past a valid time is cut with a warning, as is a time past
/// ±838:59:59 (clipped there); text that is no time is NULL with
/// warning 1292.
pub(super) fn time_of(v: &Val, ctx: &mut Ctx<'_>) -> Val {
    let text = match v {
        Val::Null => return Val::Null,
        Val::Time(_) | Val::DateTime(..) | Val::Date(_) => {
            return time_micros(v).map_or(Val::Null, Val::Time)
        }
        other => other.to_text(),
    };
    match time_of_text(&text) {
        TimeText::Invalid => {
            ctx.warn(codes_truncated(), format!("Incorrect time value: '{text}'"));
            Val::Null
        }
        TimeText::Time(m, cut, _) => {
            cut.tell(&text, ctx);
            // Past the range, clipped at its largest whole second, as
            // MariaDB's (838:59:59.999999 itself is in it).
            if m.abs() > TIME_MICROS_MAX {
                let whole = TIME_SECONDS_MAX * MICROS_PER_SECOND;
                return Val::Time(m.clamp(-whole, whole));
            }
            Val::Time(m)
        }
    }
}

/// A string compared with a TIME, read as MariaDB converts it to one:
/// [`time_of`]'s reading but not clipped at ±838:59:59 (`tm <
/// '839:00:00'` holds for 838:59:59), text that is no time 00:00:00,
/// each with 1292.
pub fn compared_time(text: &[u8], ctx: &mut Ctx<'_>) -> i64 {
    let text = String::from_utf8_lossy(text);
    match time_of_text(&text) {
        TimeText::Invalid => {
            TimeCut::Truncated.tell(&text, ctx);
            0
        }
        TimeText::Time(m, cut, _) => {
            cut.tell(&text, ctx);
            m
        }
    }
}

/// What text reads as for a TIME.
enum TimeText {
    /// No time.
    Invalid,
    /// A time (microseconds, not clipped at ±838:59:59), how much of the
    /// text it took, and whether text followed it.
    Time(i64, TimeCut, bool),
}

/// How text read as a TIME was cut.
enum TimeCut {
    /// Not.
    Whole,
    /// Text after the time, or past ±838:59:59 (clipped): a warning.
    Truncated,
    /// Fraction digits past six: a note.
    Digits,
}

impl TimeCut {
    fn tell(&self, text: &str, ctx: &mut Ctx<'_>) {
        let message = || format!("Truncated incorrect time value: '{text}'");
        match self {
            TimeCut::Whole => {}
            TimeCut::Truncated => ctx.warn(codes_truncated(), message()),
            TimeCut::Digits => ctx.note(codes_truncated(), message()),
        }
    }
}

/// Reads text as [`time_of`] does.
fn time_of_text(text: &str) -> TimeText {
    let trimmed = text.trim();
    // A number of more than 6 integer digits, or text with a date, is a
    // date and time.
    let whole = trimmed.split('.').next().unwrap_or("");
    let digits_only = !whole.is_empty()
        && whole
            .trim_start_matches('-')
            .bytes()
            .all(|b| b.is_ascii_digit());
    if !digits_only || whole.trim_start_matches('-').len() > 6 {
        if let Some((_, Some(t))) = super::value::parse_datetime(trimmed) {
            // Text after it (`…05x`) is told only where the time is stored.
            let tail = trimmed.bytes().last().is_some_and(|b| !b.is_ascii_digit());
            return TimeText::Time(time_of_day_micros(t), TimeCut::Whole, tail);
        }
    }
    // The longest prefix that reads as a time.
    let valid = trimmed
        .bytes()
        .take_while(|b| b.is_ascii_digit() || matches!(b, b':' | b'.' | b'-' | b' '))
        .count();
    let prefix = trimmed[..valid].trim_end();
    let Some(m) = super::value::parse_time(prefix).filter(|_| !prefix.is_empty()) else {
        return TimeText::Invalid;
    };
    let tail = prefix.len() < trimmed.len();
    let cut = if tail || m.abs() > TIME_MICROS_MAX {
        TimeCut::Truncated
    } else if prefix.split_once('.').is_some_and(|(_, f)| f.len() > 6) {
        TimeCut::Digits
    } else {
        TimeCut::Whole
    };
    TimeText::Time(m, cut, tail)
}

/// Text stored into a TIME column outside strict mode, as MariaDB reads
/// it: the time it begins with (microseconds, not clipped at
/// ±838:59:59) and whether text followed it; None when it begins with
/// no time.
pub fn stored_time(text: &str) -> Option<(i64, bool)> {
    match time_of_text(text) {
        TimeText::Invalid => None,
        TimeText::Time(m, _, tail) => Some((m, tail)),
    }
}

/// [`time_micros`], where text may also be a date and time (its time
/// of day).
fn time_or_time_of_day(v: &Val) -> Option<i64> {
    match v {
        Val::Str(b) => {
            let text = String::from_utf8_lossy(b);
            match super::value::parse_datetime(&text) {
                Some((_, Some(t))) => Some(time_of_day_micros(t)),
                _ => super::value::parse_time(&text),
            }
        }
        other => time_micros(other),
    }
}

/// The TIME a string's leading digits (and a fraction after them) read
/// as, where the whole string is none (`'10-11-12'`: 00:00:10).
fn time_prefix(v: &Val) -> Option<i64> {
    let Val::Str(b) = v else {
        return None;
    };
    let text = String::from_utf8_lossy(b);
    let text = text.trim_start();
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    // `'10:61:00'` is a time out of range, not digits then text.
    if digits == 0 || text[digits..].starts_with(':') {
        return None;
    }
    super::value::parse_time(&text[..digits])
}

/// CHAR(n, …)'s bytes: each integer's, most significant first (four at
/// most); NULLs left out.
fn char_bytes(v: &[Val], ctx: &mut Ctx<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    for x in v {
        if x.is_null() {
            continue;
        }
        let n = ctx.num_i64(x) as u64 as u32;
        let bytes = n.to_be_bytes();
        let first = bytes.iter().position(|b| *b != 0).unwrap_or(3);
        out.extend_from_slice(&bytes[first..]);
    }
    out
}

/// GET_FORMAT's formats, MySQL's: for DATE, DATETIME (and TIMESTAMP) or
/// TIME, then USA, JIS, ISO, EUR or INTERNAL, in any case.
fn get_format(kind: &str, standard: &str) -> Option<&'static str> {
    const STANDARDS: [&str; 5] = ["USA", "JIS", "ISO", "EUR", "INTERNAL"];
    const DATE: [&str; 5] = ["%m.%d.%Y", "%Y-%m-%d", "%Y-%m-%d", "%d.%m.%Y", "%Y%m%d"];
    const DATETIME: [&str; 5] = [
        "%Y-%m-%d %H.%i.%s",
        "%Y-%m-%d %H:%i:%s",
        "%Y-%m-%d %H:%i:%s",
        "%Y-%m-%d %H.%i.%s",
        "%Y%m%d%H%i%s",
    ];
    const TIME: [&str; 5] = ["%h:%i:%s %p", "%H:%i:%s", "%H:%i:%s", "%H.%i.%s", "%H%i%s"];
    let at = STANDARDS
        .iter()
        .position(|s| s.eq_ignore_ascii_case(standard))?;
    let formats = match kind.to_ascii_uppercase().as_str() {
        "DATE" => DATE,
        "DATETIME" | "TIMESTAMP" => DATETIME,
        "TIME" => TIME,
        _ => return None,
    };
    Some(formats[at])
}

/// `CONV(text, from, to)`: the number `text` in base `from` (2 to 36; the
/// longest valid prefix, 64 bits wrapping as MySQL's) written in base
/// `|to|` in upper case, as a signed number when `to` is negative. None
/// for a base out of range.
fn conv(text: &str, from: i64, to: i64) -> Option<String> {
    let (from, to_abs) = (from.unsigned_abs(), to.unsigned_abs());
    if !(2..=36).contains(&from) || !(2..=36).contains(&to_abs) {
        return None;
    }
    let text = text.trim();
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let mut n: u64 = 0;
    for c in digits.chars() {
        let Some(d) = c.to_digit(from as u32) else {
            break;
        };
        n = n.wrapping_mul(from).wrapping_add(u64::from(d));
    }
    let (negative_out, mut n) = if negative {
        if to < 0 {
            (true, n)
        } else {
            (false, n.wrapping_neg())
        }
    } else if to < 0 && (n as i64) < 0 {
        (true, (n as i64).unsigned_abs())
    } else {
        (false, n)
    };
    if n == 0 {
        return Some("0".to_owned());
    }
    let mut out = Vec::new();
    while n > 0 {
        let d = (n % to_abs) as u32;
        out.push(std::char::from_digit(d, to_abs as u32)?.to_ascii_uppercase());
        n /= to_abs;
    }
    if negative_out {
        out.push('-');
    }
    Some(out.iter().rev().collect())
}

/// `REGEXP_REPLACE(text, pattern, replacement)`: every match replaced;
/// `\N` in the replacement is group N (MariaDB's), `$` is literal.
fn regexp_replace(
    pattern: &str,
    case_insensitive: bool,
    text: &str,
    replacement: &str,
) -> SqlResult<String> {
    // MariaDB's replacement syntax to the regex crate's.
    let mut rust = String::with_capacity(replacement.len());
    let mut chars = replacement.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek().is_some_and(char::is_ascii_digit) => {
                rust.push_str("${");
                rust.push(chars.next().expect("peeked"));
                rust.push('}');
            }
            '$' => rust.push_str("$$"),
            other => rust.push(other),
        }
    }
    with_regex(pattern, case_insensitive, |re| {
        re.replace_all(text, rust.as_str()).into_owned()
    })
}

/// The 16 bytes of a UUID in one of MySQL's forms: 32 hex digits, with
/// dashes after the 8th, 12th, 16th and 20th, or that in braces; None for
/// anything else.
fn uuid_bytes(text: &str) -> Option<[u8; 16]> {
    let inner = match text.strip_prefix('{') {
        Some(rest) => rest.strip_suffix('}')?,
        None => text,
    };
    let hex: Vec<u8> = match inner.len() {
        32 => inner.bytes().collect(),
        36 => {
            let b = inner.as_bytes();
            if [8, 13, 18, 23].iter().any(|&i| b[i] != b'-') {
                return None;
            }
            inner.bytes().filter(|&c| c != b'-').collect()
        }
        _ => return None,
    };
    if hex.len() != 32 {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut out = [0u8; 16];
    for (i, pair) in hex.chunks(2).enumerate() {
        out[i] = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Some(out)
}

/// UUID_TO_BIN's swap (`to_bin`) and BIN_TO_UUID's, which undoes it: the
/// time-high group (bytes 6-7) first, then time-mid (4-5), time-low (0-3).
fn swap_uuid_time(b: [u8; 16], to_bin: bool) -> [u8; 16] {
    let mut out = b;
    if to_bin {
        out[0..2].copy_from_slice(&b[6..8]);
        out[2..4].copy_from_slice(&b[4..6]);
        out[4..8].copy_from_slice(&b[0..4]);
    } else {
        out[0..4].copy_from_slice(&b[4..8]);
        out[4..6].copy_from_slice(&b[2..4]);
        out[6..8].copy_from_slice(&b[0..2]);
    }
    out
}

/// MySQL's 1411 for a value that is no UUID.
fn bad_uuid(shown: &str, function: &str) -> SqlError {
    SqlError::new(
        1411,
        format!("Incorrect string value: '{shown}' for function {function}"),
    )
}

/// The largest number that reads as a TIME, 838:59:59 as HHMMSS; past it
/// a number is a datetime's (`number_to_time`).
const TIME_NUMBER_MAX: f64 = 8_385_959.0;

/// RANDOM_BYTES' largest length (MariaDB's; NULL past it).
const RANDOM_BYTES_MAX: usize = 1024;

/// COMPRESS as MySQL lays it out: the length, 4 bytes little-endian,
/// then the zlib stream, and a '.' after one ending in a space (which a
/// CHAR column would strip); nothing for nothing.
fn compress(data: &[u8]) -> Val {
    use std::io::Write as _;
    if data.is_empty() {
        return Val::Str(Vec::new());
    }
    let mut out = (data.len() as u32).to_le_bytes().to_vec();
    let mut z = flate2::write::ZlibEncoder::new(out, flate2::Compression::default());
    // Writing into memory cannot fail.
    let _ = z.write_all(data);
    out = z.finish().unwrap_or_default();
    if out.last() == Some(&b' ') {
        out.push(b'.');
    }
    Val::Str(out)
}

/// The length COMPRESS's first 4 bytes give, little-endian, its two top
/// bits left out (MySQL's); None for fewer bytes.
fn compressed_length(data: &[u8]) -> Option<usize> {
    let head: [u8; 4] = data.get(..4)?.try_into().ok()?;
    Some((u32::from_le_bytes(head) & 0x3FFF_FFFF) as usize)
}

/// UNCOMPRESS of COMPRESS's layout: NULL, with MariaDB's warning, for a
/// length past the longest string a function builds (1256) or a stream
/// that is no zlib one of that length (1259).
fn uncompress(data: &[u8], ctx: &mut Ctx<'_>) -> Val {
    use std::io::Read as _;
    let Some(len) = compressed_length(data) else {
        return Val::Str(Vec::new());
    };
    if len > STRING_RESULT_BYTES_MAX {
        ctx.warn(
            1256,
            format!(
                "Uncompressed data size too large; the maximum size is {STRING_RESULT_BYTES_MAX} \
                 (probably, length of uncompressed data was corrupted)"
            ),
        );
        return Val::Null;
    }
    let mut out = Vec::with_capacity(len);
    let read = flate2::read::ZlibDecoder::new(&data[4..])
        .take(len as u64 + 1)
        .read_to_end(&mut out);
    if read.is_err() || out.len() != len {
        ctx.warn(1259, "ZLIB: Input data corrupted");
        return Val::Null;
    }
    Val::Str(out)
}

/// MySQL's AES key: the key's bytes XORed in turn into 16 zero bytes.
fn aes_key(key: &[u8]) -> aes::Aes128 {
    use aes::cipher::KeyInit as _;
    let mut folded = [0u8; 16];
    for (i, b) in key.iter().enumerate() {
        folded[i % 16] ^= b;
    }
    aes::Aes128::new(&folded.into())
}

/// AES_ENCRYPT: AES-128-ECB with PKCS#7 padding (MySQL's default
/// `block_encryption_mode`).
fn aes_encrypt(data: &[u8], key: &[u8]) -> Vec<u8> {
    use aes::cipher::BlockEncrypt as _;
    let cipher = aes_key(key);
    let pad = 16 - data.len() % 16;
    let mut out = data.to_vec();
    out.extend(std::iter::repeat_n(pad as u8, pad));
    for block in out.chunks_exact_mut(16) {
        cipher.encrypt_block(block.into());
    }
    out
}

/// AES_DECRYPT: None where the text is no whole blocks or its padding
/// is wrong (a wrong key, mostly), as MySQL's NULL.
fn aes_decrypt(data: &[u8], key: &[u8]) -> Option<Vec<u8>> {
    use aes::cipher::BlockDecrypt as _;
    if data.is_empty() || !data.len().is_multiple_of(16) {
        return None;
    }
    let cipher = aes_key(key);
    let mut out = data.to_vec();
    for block in out.chunks_exact_mut(16) {
        cipher.decrypt_block(block.into());
    }
    let pad = usize::from(*out.last()?);
    if pad == 0
        || pad > 16
        || out[out.len() - pad..]
            .iter()
            .any(|&b| usize::from(b) != pad)
    {
        return None;
    }
    out.truncate(out.len() - pad);
    Some(out)
}

/// A value's bytes, as the string functions read them.
fn bytes(v: &Val) -> Vec<u8> {
    match v {
        Val::Str(b) => b.clone(),
        other => other.to_text().into_bytes(),
    }
}

fn hex_lower(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// A DOUBLE result; NULL where it is not a finite number (MariaDB's
/// answer for an overflow or a domain error).
fn double_or_null(x: f64) -> Val {
    if x.is_finite() {
        Val::Double(x)
    } else {
        Val::Null
    }
}

/// `INET_ATON`: dotted quads, and MySQL's short forms (`127.1` is
/// 127.0.0.1: the last part fills the rest); None for anything else.
fn inet_aton(text: &str) -> Option<u32> {
    let parts: Vec<u32> = text
        .split('.')
        .map(|p| {
            (!p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
                .then(|| p.parse().ok())
                .flatten()
        })
        .collect::<Option<_>>()?;
    if parts.is_empty() || parts.len() > 4 || parts.iter().any(|p| *p > 255) {
        return None;
    }
    let (last, leading) = parts.split_last()?;
    let mut n = 0u32;
    for (i, p) in leading.iter().enumerate() {
        n |= p << (24 - 8 * i);
    }
    Some(n | last)
}

fn inet_ntoa(n: u32) -> String {
    let [a, b, c, d] = n.to_be_bytes();
    format!("{a}.{b}.{c}.{d}")
}

/// A version 1 UUID as MySQL's `UUID()` makes one: the time in 100 ns
/// steps since 1582-10-15, a clock sequence and a node id; here the
/// sequence and node are random per process (MySQL uses the MAC address
/// when it has one), and the time never repeats within the process.
/// The number of an ENUM's or SET's value `v`: its member's index (0
/// for the empty string of a bad value) or its members' bits; `names`
/// the members joined by NUL (`Members::joined`).
pub(crate) fn member_number(v: &Val, names: &str, set: bool) -> Val {
    if v.is_null() {
        return Val::Null;
    }
    let value = v.to_text();
    let mut names = names.split('\0');
    if set {
        let parts: Vec<&str> = value.split(',').collect();
        let bits =
            names
                .enumerate()
                .filter(|(_, n)| parts.contains(n))
                .fold(
                    0u64,
                    |bits, (i, _)| if i < 64 { bits | 1 << i } else { bits },
                );
        i64::try_from(bits).map_or(Val::UInt(bits), Val::Int)
    } else {
        Val::Int(names.position(|n| n == value).map_or(0, |i| i as i64 + 1))
    }
}

fn uuid_v1() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;
    /// 100 ns steps from 1582-10-15 to 1970-01-01.
    const GREGORIAN_OFFSET: u64 = 0x01B2_1DD2_1381_4000;
    static LAST: AtomicU64 = AtomicU64::new(0);
    static NODE: OnceLock<(u16, u64)> = OnceLock::new();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| (d.as_nanos() / 100) as u64)
        + GREGORIAN_OFFSET;
    // Strictly increasing, so two calls in one step differ.
    let mut last = LAST.load(Ordering::Relaxed);
    let time = loop {
        let next = now.max(last + 1);
        match LAST.compare_exchange_weak(last, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => break next,
            Err(seen) => last = seen,
        }
    };
    let (sequence, node) = *NODE.get_or_init(|| {
        let r = random_u64();
        // The multicast bit set: a node id that is not a MAC address.
        (
            (r >> 48) as u16 & 0x3FFF,
            (r & 0xFFFF_FFFF_FFFF) | 0x0100_0000_0000,
        )
    });
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        time & 0xFFFF_FFFF,
        (time >> 32) & 0xFFFF,
        ((time >> 48) & 0x0FFF) | 0x1000,
        sequence | 0x8000,
        node
    )
}

/// 64 random bits (a thread's xorshift seeded from the clock and the
/// thread: `RAND()` and `UUID()` need no cryptographic quality).
fn random_u64() -> u64 {
    use std::cell::Cell;
    thread_local! {
        static STATE: Cell<u64> = const { Cell::new(0) };
    }
    STATE.with(|state| {
        let mut x = state.get();
        if x == 0 {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            let here = &x as *const u64 as u64;
            x = (nanos ^ here.rotate_left(32)) | 1;
        }
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        state.set(x);
        x
    })
}

/// `RAND()`: uniform in [0, 1).
fn random_unit() -> f64 {
    (random_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// ROUND or TRUNCATE of a value to `digits` (negative: left of the
/// point). An integer's result past its type is 1690, where MariaDB makes
/// the result a DECIMAL from the argument's digits (a type here comes from
/// kinds, which carry no digits).
fn round(v: &Val, digits: i64, truncate: bool, ctx: &mut Ctx<'_>) -> SqlResult<Val> {
    let dec = match v {
        Val::Int(x) => Some(Dec::new(i128::from(*x), 0)),
        Val::UInt(x) => Some(Dec::new(i128::from(*x), 0)),
        Val::Dec(d) => Some(*d),
        _ => None,
    };
    match dec {
        Some(d) => {
            let keep = digits.max(0) as u8;
            let r = if truncate {
                if keep >= d.scale {
                    d
                } else {
                    let p = 10i128.pow(u32::from(d.scale - keep));
                    Dec::new(d.mantissa / p, keep)
                }
            } else if keep >= d.scale {
                d
            } else {
                d.rescale(keep).unwrap_or(d)
            };
            let r = if digits < 0 {
                // From the value itself, fraction included: rounding it to
                // an integer first rounded twice (994.63 to 995, then to
                // 1000 rather than 990).
                let unit = digits
                    .unsigned_abs()
                    .min(u64::from(value::MANTISSA_DIGITS_MAX)) as u32;
                let shift = unit + u32::from(d.scale);
                if shift > value::MANTISSA_DIGITS_MAX {
                    // A unit past every digit the value can have.
                    Dec::new(0, 0)
                } else {
                    let p = value::pow10(shift as u8);
                    let q = d.mantissa / p;
                    let rem = d.mantissa % p;
                    let q = if !truncate && rem.abs() * 2 >= p {
                        q + rem.signum()
                    } else {
                        q
                    };
                    match q
                        .checked_mul(value::pow10(unit as u8))
                        .and_then(|m| Dec::checked(m, 0))
                    {
                        Some(d) => d,
                        None => return Ok(Val::Null),
                    }
                }
            } else {
                r
            };
            let past = || {
                let name = if truncate { "truncate" } else { "round" };
                SqlError::new(
                    crate::error::codes::DATA_OUT_OF_RANGE,
                    format!(
                        "BIGINT value is out of range in '{name}({}, {digits})'",
                        v.to_text()
                    ),
                )
            };
            Ok(match v {
                Val::Int(_) => Val::Int(i64::try_from(r.mantissa).map_err(|_| past())?),
                Val::UInt(_) => Val::UInt(u64::try_from(r.mantissa).map_err(|_| past())?),
                _ => Val::Dec(r),
            })
        }
        None => {
            let f = ctx.num_f64(v);
            let p = 10f64.powi(digits as i32);
            let x = f * p;
            let x = if truncate {
                x.trunc()
            } else {
                // MySQL rounds half away from zero for exact values and
                // to nearest for doubles.
                x.round_ties_even()
            };
            Ok(Val::Double(x / p))
        }
    }
}

/// A compound INTERVAL's amount, as MySQL reads its text (`'1 2:30'` for
/// DAY_MINUTE): a leading `-` negates it; the runs of digits are its
/// fields, right-aligned (too few leave out the leading ones, too many
/// are None); a MICROSECOND field of fewer than 6 digits is a fraction
/// (`'10.5'` SECOND_MICROSECOND is 10.5 s). Months for YEAR_MONTH,
/// microseconds for the others.
fn compound_interval(text: &str, unit: &str) -> Option<i64> {
    // Microseconds per field: day, hour, minute, second, microsecond.
    const MICROS: [i64; 5] = [
        MICROS_PER_DAY,
        3_600 * MICROS_PER_SECOND,
        60 * MICROS_PER_SECOND,
        MICROS_PER_SECOND,
        1,
    ];
    // Each field's worth, the unit's fields in order (YEAR_MONTH: months).
    let fields: &[i64] = match unit {
        "SECOND_MICROSECOND" => &MICROS[3..5],
        "MINUTE_MICROSECOND" => &MICROS[2..5],
        "MINUTE_SECOND" => &MICROS[2..4],
        "HOUR_MICROSECOND" => &MICROS[1..5],
        "HOUR_SECOND" => &MICROS[1..4],
        "HOUR_MINUTE" => &MICROS[1..3],
        "DAY_MICROSECOND" => &MICROS[0..5],
        "DAY_SECOND" => &MICROS[0..4],
        "DAY_MINUTE" => &MICROS[0..3],
        "DAY_HOUR" => &MICROS[0..2],
        "YEAR_MONTH" => &[12, 1],
        _ => return None,
    };
    let text = text.trim_start();
    let (negative, text) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let groups: Vec<&str> = text
        .split(|c: char| !c.is_ascii_digit())
        .filter(|g| !g.is_empty())
        .collect();
    if groups.len() > fields.len() {
        return None;
    }
    let skip = fields.len() - groups.len();
    let mut total: i64 = 0;
    for (i, group) in groups.iter().enumerate() {
        let field = skip + i;
        let mut n: i64 = group.parse().ok()?;
        if unit.ends_with("MICROSECOND") && field == fields.len() - 1 && group.len() < 6 {
            n *= 10i64.pow(6 - group.len() as u32);
        }
        total = total.checked_add(n.checked_mul(fields[field])?)?;
    }
    Some(if negative { -total } else { total })
}

fn date_add(d: Date, t: Time, amount: i64, unit: &str, was_date: bool) -> SqlResult<Val> {
    let bad = || SqlError::unsupported(format_args!("INTERVAL unit {unit}"));
    let micros_unit = match unit {
        "MICROSECOND" => Some(1),
        "SECOND" => Some(MICROS_PER_SECOND),
        "MINUTE" => Some(60 * MICROS_PER_SECOND),
        "HOUR" => Some(3600 * MICROS_PER_SECOND),
        "DAY" => Some(MICROS_PER_DAY),
        "WEEK" => Some(7 * MICROS_PER_DAY),
        _ => None,
    };
    if let Some(u) = micros_unit {
        let m = datetime_micros(d, t).saturating_add(amount.saturating_mul(u));
        return Ok(match datetime_of_micros(m) {
            Some((d2, _)) if was_date && matches!(unit, "DAY" | "WEEK") => Val::Date(d2),
            Some((d2, t2)) => Val::DateTime(d2, t2),
            None => Val::Null,
        });
    }
    let months = match unit {
        "MONTH" => amount,
        "QUARTER" => amount.saturating_mul(3),
        "YEAR" => amount.saturating_mul(12),
        _ => return Err(bad()),
    };
    let total = (i64::from(d.year) * 12 + i64::from(d.month) - 1).saturating_add(months);
    let (y, m) = (total.div_euclid(12), total.rem_euclid(12) + 1);
    if !(0..=9999).contains(&y) {
        return Ok(Val::Null);
    }
    let last = (days_from_civil(
        if m == 12 { y + 1 } else { y },
        if m == 12 { 1 } else { m + 1 },
        1,
    ) - days_from_civil(y, m, 1)) as u8;
    let d2 = Date {
        year: y as u16,
        month: m as u8,
        day: d.day.min(last),
    };
    Ok(if was_date {
        Val::Date(d2)
    } else {
        Val::DateTime(d2, t)
    })
}

const MONTH_NAMES: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DAY_NAMES: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

/// `DATE_FORMAT` with the common specifiers.
pub fn date_format(d: Date, t: Time, format: &str) -> String {
    let mut out = String::new();
    let mut chars = format.chars();
    let weekday = (days_from_civil(i64::from(d.year), i64::from(d.month), i64::from(d.day)) + 3)
        .rem_euclid(7) as usize;
    let month_name = MONTH_NAMES
        .get(usize::from(d.month).wrapping_sub(1))
        .copied();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let Some(spec) = chars.next() else { break };
        let h12 = match t.hour % 12 {
            0 => 12,
            h => h,
        };
        let piece = match spec {
            'Y' => format!("{:04}", d.year),
            'y' => format!("{:02}", d.year % 100),
            'm' => format!("{:02}", d.month),
            'c' => d.month.to_string(),
            'd' => format!("{:02}", d.day),
            'e' => d.day.to_string(),
            'H' => format!("{:02}", t.hour),
            'k' => t.hour.to_string(),
            'h' | 'I' => format!("{h12:02}"),
            'l' => h12.to_string(),
            'i' => format!("{:02}", t.minute),
            's' | 'S' => format!("{:02}", t.second),
            'f' => format!("{:06}", t.micros),
            'p' => if t.hour < 12 { "AM" } else { "PM" }.to_owned(),
            'T' => format!("{:02}:{:02}:{:02}", t.hour, t.minute, t.second),
            'r' => format!(
                "{h12:02}:{:02}:{:02} {}",
                t.minute,
                t.second,
                if t.hour < 12 { "AM" } else { "PM" }
            ),
            'M' => month_name.unwrap_or("").to_owned(),
            'b' => month_name.map_or(String::new(), |m| m[..3].to_owned()),
            'W' => DAY_NAMES[weekday].to_owned(),
            'a' => DAY_NAMES[weekday][..3].to_owned(),
            'w' => ((weekday + 1) % 7).to_string(),
            'j' => {
                let doy = days_from_civil(i64::from(d.year), i64::from(d.month), i64::from(d.day))
                    - days_from_civil(i64::from(d.year), 1, 1)
                    + 1;
                format!("{doy:03}")
            }
            // Weeks as WEEK's modes 0 to 3 give them, and the year of
            // the week for %V (mode 2) and %v (mode 3).
            'U' | 'u' | 'V' | 'v' => {
                let mode = match spec {
                    'U' => 0,
                    'u' => 1,
                    'V' => 2,
                    _ => 3,
                };
                let Val::Int(week) = week_value(Func::Week, d, mode) else {
                    unreachable!("a week is a number")
                };
                format!("{week:02}")
            }
            'X' | 'x' => {
                let mode = if spec == 'X' { 2 } else { 3 };
                let Val::Int(year_week) = week_value(Func::YearWeek, d, mode) else {
                    unreachable!("a year and week is a number")
                };
                format!("{:04}", year_week / 100)
            }
            'D' => {
                let suffix = match (d.day % 10, d.day / 10) {
                    (_, 1) => "th",
                    (1, _) => "st",
                    (2, _) => "nd",
                    (3, _) => "rd",
                    _ => "th",
                };
                format!("{}{suffix}", d.day)
            }
            '%' => "%".to_owned(),
            other => other.to_string(),
        };
        out.push_str(&piece);
    }
    out
}

fn codes_truncated() -> u16 {
    crate::error::codes::TRUNCATED_WRONG_VALUE
}

/// `STR_TO_DATE`: the text read by the format's specifiers (the common
/// ones); None when it does not match.
fn str_to_date(text: &str, format: &str) -> Option<(Date, Option<Time>)> {
    let mut d = Date::default();
    let mut t = Time::default();
    let mut timed = false;
    let mut pm: Option<bool> = None;
    let b = text.as_bytes();
    let mut at = 0usize;
    let num = |at: &mut usize, max: usize| -> Option<u32> {
        let start = *at;
        while *at < b.len() && *at - start < max && b[*at].is_ascii_digit() {
            *at += 1;
        }
        text.get(start..*at)?.parse().ok()
    };
    let mut spec = format.chars();
    while let Some(c) = spec.next() {
        if c != '%' {
            if at < b.len() && b[at] as char == c {
                at += 1;
                continue;
            }
            return None;
        }
        match spec.next()? {
            'Y' => d.year = u16::try_from(num(&mut at, 4)?).ok()?,
            'y' => {
                let y = num(&mut at, 2)?;
                d.year = u16::try_from(if y < 70 { 2000 + y } else { 1900 + y }).ok()?;
            }
            'm' | 'c' => d.month = u8::try_from(num(&mut at, 2)?).ok()?,
            'd' | 'e' => d.day = u8::try_from(num(&mut at, 2)?).ok()?,
            'H' | 'k' | 'h' | 'I' | 'l' => {
                t.hour = u8::try_from(num(&mut at, 2)?).ok()?;
                timed = true;
            }
            'i' => {
                t.minute = u8::try_from(num(&mut at, 2)?).ok()?;
                timed = true;
            }
            's' | 'S' => {
                t.second = u8::try_from(num(&mut at, 2)?).ok()?;
                timed = true;
            }
            'f' => {
                let start = at;
                let v = num(&mut at, 6)?;
                t.micros = v * 10u32.pow(6 - (at - start) as u32);
                timed = true;
            }
            'p' => {
                let word = text.get(at..at + 2)?.to_ascii_uppercase();
                pm = Some(word == "PM");
                at += 2;
            }
            'T' => {
                t.hour = u8::try_from(num(&mut at, 2)?).ok()?;
                at += usize::from(b.get(at) == Some(&b':'));
                t.minute = u8::try_from(num(&mut at, 2)?).ok()?;
                at += usize::from(b.get(at) == Some(&b':'));
                t.second = u8::try_from(num(&mut at, 2)?).ok()?;
                timed = true;
            }
            'M' | 'b' => {
                let rest = text.get(at..)?.to_ascii_lowercase();
                let (i, name) = MONTH_NAMES.iter().enumerate().find_map(|(i, m)| {
                    let m = m.to_ascii_lowercase();
                    if rest.starts_with(&m) {
                        Some((i, m.len()))
                    } else if rest.starts_with(&m[..3]) {
                        Some((i, 3))
                    } else {
                        None
                    }
                })?;
                d.month = (i + 1) as u8;
                at += name;
            }
            '%' => {
                if b.get(at) != Some(&b'%') {
                    return None;
                }
                at += 1;
            }
            _ => return None,
        }
    }
    if let Some(pm) = pm {
        t.hour = t.hour % 12 + if pm { 12 } else { 0 };
    }
    if d.month > 12 || d.day > 31 || t.hour > 23 || t.minute > 59 || t.second > 59 {
        return None;
    }
    if d != Date::default() && !super::value::date_valid(d) {
        return None;
    }
    Some((d, timed.then_some(t)))
}

/// A value of BIT_AND, BIT_OR or BIT_XOR as MariaDB's aggregates take it:
/// through BIGINT (`val_int`), not a bit operator's decimal. A decimal
/// rounds half up, a double half to even, a string is read as an
/// integer; past BIGINT, its end with a warning (so 1e19 is 2^63 - 1).
pub fn aggregate_bits_of(v: &Val, ctx: &mut Ctx<'_>) -> u64 {
    let (lo, hi) = (i128::from(i64::MIN), i128::from(i64::MAX));
    let overflow = |shown: String, ctx: &mut Ctx<'_>| {
        let message = super::eval::overflow_message(&shown, "INT");
        ctx.warn(crate::error::codes::DATA_OVERFLOW, message);
    };
    let i = match v {
        Val::Int(i) => return *i as u64,
        Val::UInt(u) => return *u,
        Val::Dec(d) => {
            let i = d.round_i128();
            if !(lo..=hi).contains(&i) {
                overflow(d.to_text(), ctx);
            }
            i.clamp(lo, hi)
        }
        Val::Double(f) => {
            let r = f.round_ties_even();
            // i64::MAX as a double is 2^63, already past it.
            if r < i64::MIN as f64 || r >= i64::MAX as f64 {
                overflow(v.to_text(), ctx);
            }
            i128::from(r as i64)
        }
        Val::Str(b) => super::eval::string_integer(b, hi, ctx).0,
        other => other.temporal_number().round_i128().clamp(lo, hi),
    };
    i as i64 as u64
}

/// An operand of a bit operator as MySQL takes it: 64 bits, a negative
/// integer in two's complement, any other number rounded to an integer
/// and clamped to the signed or unsigned 64-bit range.
pub fn bits_of(v: &Val, ctx: &mut Ctx<'_>) -> u64 {
    // A decimal exactly, rounded (a double would lose the low bits of
    // 2^64 - 372: BIT_COUNT is 60, not 64); past the range, its end with
    // MariaDB's warning.
    let of_decimal = |d: Dec, ctx: &mut Ctx<'_>| {
        let i = d.round_i128();
        let (clamped, ty) = if i < 0 {
            (i.max(i128::from(i64::MIN)), "INT")
        } else {
            (i.min(i128::from(u64::MAX)), "UNSIGNED INT")
        };
        if clamped != i {
            let message = super::eval::overflow_message(&d.to_text(), ty);
            ctx.warn(crate::error::codes::DATA_OVERFLOW, message);
        }
        if i < 0 {
            clamped as i64 as u64
        } else {
            clamped as u64
        }
    };
    let of_double = |f: f64| {
        let f = f.round();
        if f >= u64::MAX as f64 {
            u64::MAX
        } else if f <= i64::MIN as f64 {
            i64::MIN as u64
        } else if f < 0.0 {
            f as i64 as u64
        } else {
            f as u64
        }
    };
    match v {
        Val::Int(i) => *i as u64,
        Val::UInt(u) => *u,
        Val::Dec(d) => of_decimal(*d, ctx),
        // MariaDB reads any other operand as a decimal: a string exactly
        // (warning of a DECIMAL value), a double as its shortest digits
        // (2^63 is 9223372036854776000, so `2^63 >> 1` is
        // 4611686018427388000, not 2^62). Past a decimal's digits, the
        // double clamps.
        Val::Str(b) => match ctx.str_dec(b) {
            Some(d) => of_decimal(d, ctx),
            None => of_double(v.to_f64().0),
        },
        Val::Double(f) => match Dec::of_double(*f) {
            Some(d) => of_decimal(d, ctx),
            None => of_double(*f),
        },
        other => of_double(ctx.num_f64(other)),
    }
}

/// Longest text of bytes a warning 1300 shows, "..." included (MariaDB's
/// `ErrConvString` buffer).
const INVALID_STRING_SHOWN_MAX: usize = 64;

/// `bytes` as UTF-8 text the way MariaDB converts a binary string to
/// `charset` (utf8mb3 or utf8mb4; 4-byte characters are kept in either,
/// Skarv's text being utf8mb4): every byte of an invalid or cut sequence
/// is '?', with one warning 1300 showing the bytes from the first such
/// (printable ASCII as it is, others `\xHH`).
fn utf8_checked(bytes: &[u8], charset: &str, ctx: &mut Ctx<'_>) -> Vec<u8> {
    let Some((text, at)) = super::value::utf8_replaced(bytes) else {
        return bytes.to_vec();
    };
    let mut shown = String::new();
    for &b in &bytes[at..] {
        super::value::push_shown_byte(&mut shown, b);
        if shown.len() > INVALID_STRING_SHOWN_MAX {
            break;
        }
    }
    if shown.len() > INVALID_STRING_SHOWN_MAX {
        shown.truncate(INVALID_STRING_SHOWN_MAX - 3);
        shown.push_str("...");
    }
    ctx.warn(
        crate::error::codes::INVALID_CHARACTER_STRING,
        format!("Invalid {charset} character string: '{shown}'"),
    );
    text.into_bytes()
}

/// MariaDB's most characters of a text result (`MAX_BLOB_WIDTH`): a
/// LONGTEXT's.
pub const TEXT_CHARS_MAX: u32 = 16_777_216;
/// HEX of a number: a BIGINT's 16 digits.
const HEX_NUMBER_CHARS: u32 = 16;
/// EXPORT_SET's bits.
const EXPORT_SET_BITS: u32 = 64;
/// CONV's longest result: 64 binary digits and a sign.
const CONV_CHARS: u32 = 65;
/// INET_NTOA's longest address, `255.255.255.255` as MariaDB sizes it.
const INET_NTOA_CHARS: u32 = 31;
/// USER(): a user name's 128 characters, `@` and a host's 255.
const USER_CHARS: u32 = 384;
/// FORMAT's most decimals (MariaDB's `FORMAT_MAX_DECIMALS`).
const FORMAT_DECIMALS_MAX: u32 = 38;

/// The whole digits MariaDB allows FORMAT of a DOUBLE or of text: a
/// DOUBLE's widest (1.8e308 written out) and a sign.
const FORMAT_DOUBLE_WHOLE_DIGITS: u32 = 310;
/// JSON_TYPE's longest name, as MariaDB sizes it.
const JSON_TYPE_CHARS: u32 = 12;
/// DATE_FORMAT of a format that is no literal.
const DATE_FORMAT_CHARS_UNKNOWN: u32 = 64;

/// The characters MariaDB sizes DATE_FORMAT's result at for a format
/// (`Item_func_date_format::format_length`): per conversion its longest
/// text, names at their longest in any locale.
fn date_format_chars(format: &[u8]) -> u32 {
    let mut size = 0u32;
    let mut at = 0;
    while at < format.len() {
        if format[at] == b'%' && at + 1 < format.len() {
            at += 1;
            size += match format[at] {
                b'M' | b'W' => 64,
                b'D' | b'Y' | b'x' | b'X' => 4,
                b'a' | b'b' => 32,
                b'j' => 3,
                b'U' | b'u' | b'V' | b'v' | b'y' | b'm' | b'd' | b'h' | b'I' | b'i' | b'l'
                | b'p' | b'S' | b's' | b'c' | b'e' => 2,
                b'k' | b'H' => 7,
                b'r' => 11,
                b'T' => 8,
                b'f' => 6,
                _ => 1,
            };
        } else {
            size += 1;
        }
        at += 1;
    }
    size
}

/// The uppercase of a character as MariaDB's utf8mb4 maps it: one
/// character for one (`UPPER('straße')` is `STRAßE`, of the same length),
/// by MariaDB's table (`case_table`).
pub(crate) fn simple_upper(c: char) -> char {
    if c.is_ascii() {
        return c.to_ascii_uppercase();
    }
    case_of(c).map_or(c, |(upper, _)| upper)
}

/// The lowercase of a character as MariaDB's utf8mb4 maps it (see
/// [`simple_upper`]): `Σ` is `σ` wherever it stands.
pub(crate) fn simple_lower(c: char) -> char {
    if c.is_ascii() {
        return c.to_ascii_lowercase();
    }
    case_of(c).map_or(c, |(_, lower)| lower)
}

/// A character's (uppercase, lowercase) in MariaDB's table; None where it
/// maps to itself both ways.
fn case_of(c: char) -> Option<(char, char)> {
    let code = u16::try_from(u32::from(c)).ok()?;
    let table = super::case_table::CASES;
    let at = table.binary_search_by_key(&code, |(c, _, _)| *c).ok()?;
    let (_, upper, lower) = table[at];
    // The table holds characters of the plane only, none a surrogate.
    Some((
        char::from_u32(u32::from(upper)).unwrap_or(c),
        char::from_u32(u32::from(lower)).unwrap_or(c),
    ))
}
