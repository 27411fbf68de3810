//! The catalog: databases and tables as SQL sees them, kept in the cluster.
//!
//! A table `t` of database `d` is the cluster table `d/def/t` (NDB's
//! naming), so every SQL node of the cluster sees it at once. What MySQL
//! declares and the storage has no type for (TIME, YEAR, ENUM, SET, the
//! TEXT/BLOB sizes, AUTO_INCREMENT) is the SQL node's: it travels with the
//! table definition ([`SqlType`] per column), and values are converted at
//! the edge (`exec`).
//!
//! Databases are rows of the cluster table `mysql/def/skarv_databases`;
//! auto-increment sequences rows of `mysql/def/skarv_sequences`, keyed by
//! table id (NDB's `SYSTAB_0`); both are made by [`bootstrap`].

pub mod meta;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use schema::{Collation, ColumnType as NativeType, TableDef};
use skarv_client::{ExecMode, LockMode, Op, ScanOptions, Session, Table, Value};

use super::{Conn, Engine};
use crate::error::{codes, SqlError, SqlResult};
use crate::value::{charset, flags, ColumnMeta};

/// The size class of a TEXT or BLOB column (MySQL's four).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BlobSize {
    /// TINYTEXT/TINYBLOB: 255 bytes.
    Tiny,
    /// TEXT/BLOB: 65,535 bytes.
    Normal,
    /// MEDIUMTEXT/MEDIUMBLOB: 16 MiB − 1.
    Medium,
    /// LONGTEXT/LONGBLOB: 4 GiB − 1 (bounded by `BLOB_BYTES_MAX`).
    Long,
}

/// A column's type as MySQL declares it. Each maps onto one storage type
/// ([`SqlType::native`]); the ones the storage lacks are kept as numbers.
#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum SqlType {
    TinyInt {
        unsigned: bool,
    },
    SmallInt {
        unsigned: bool,
    },
    MediumInt {
        unsigned: bool,
    },
    Int {
        unsigned: bool,
    },
    BigInt {
        unsigned: bool,
    },
    /// `digits`: FLOAT(M,D), whose values are rounded to D decimals.
    /// `unsigned`: a negative value is out of range (MariaDB's UNSIGNED
    /// of FLOAT, DOUBLE and DECIMAL, which keep their range otherwise).
    Float {
        digits: Option<FixedDigits>,
        unsigned: bool,
    },
    /// `digits`: DOUBLE(M,D) (REAL(M,D), DOUBLE PRECISION(M,D)).
    Double {
        digits: Option<FixedDigits>,
        unsigned: bool,
    },
    Decimal {
        precision: u8,
        scale: u8,
        unsigned: bool,
    },
    Char {
        length: u16,
        collation: Collation,
    },
    VarChar {
        max: u16,
        collation: Collation,
    },
    Binary {
        length: u16,
    },
    VarBinary {
        max: u16,
    },
    Text {
        size: BlobSize,
        collation: Collation,
    },
    Blob {
        size: BlobSize,
    },
    Date,
    /// Stored as BIGINT: signed microseconds.
    Time {
        fsp: u8,
    },
    DateTime {
        fsp: u8,
    },
    Timestamp {
        fsp: u8,
    },
    /// Stored as SMALLINT UNSIGNED: the year, 0 for 0000.
    Year,
    Bit {
        bits: u8,
    },
    /// Stored as SMALLINT UNSIGNED: the 1-based index, 0 for ''.
    Enum(Vec<String>),
    /// Stored as BIGINT UNSIGNED: a bit per member.
    Set(Vec<String>),
}

/// The (M,D) of FLOAT(M,D) or DOUBLE(M,D): M digits in all, D of them
/// after the point. MariaDB rounds a stored value to D decimals, refuses
/// one of more than M − D integer digits (1264), and shows D decimals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FixedDigits {
    /// Digits in all, D..=255.
    pub m: u8,
    /// Digits after the point, 0..=30.
    pub d: u8,
}

impl FixedDigits {
    /// The largest magnitude a value may have once rounded: M − D nines,
    /// then D nines after the point (`99999999.99` for (10,2)).
    pub fn max(self) -> f64 {
        let int_digits = i32::from(self.m) - i32::from(self.d);
        10f64.powi(int_digits) - 10f64.powi(-i32::from(self.d))
    }

    /// `v` rounded to D decimals as MariaDB's `Field_real::truncate`
    /// rounds it: the fraction above the floor scaled by 10^D and rounded
    /// half to even (`rint`), so 2.25 at D = 1 is 2.2 and -99999.94 is
    /// -99999.9, as MariaDB stores them.
    pub fn round(self, v: f64) -> f64 {
        if !v.is_finite() {
            return v;
        }
        let scale = 10f64.powi(i32::from(self.d));
        let floor = v.floor();
        floor + ((v - floor) * scale).round_ties_even() / scale
    }
}

/// One visible column of a table (the hidden `$PK` is not one).
#[derive(Clone, Debug)]
pub struct SqlColumn {
    /// Its name.
    pub name: String,
    /// Its position in the native table (`Table::columns`).
    pub native: usize,
    /// Its declared type.
    pub ty: SqlType,
    /// NULL allowed.
    pub nullable: bool,
    /// AUTO_INCREMENT.
    pub auto_increment: bool,
    /// Its result-set metadata (schema, table and names filled in).
    pub meta: ColumnMeta,
    /// The default as SQL shows it, unquoted (None: no default, or NULL
    /// for a nullable column). The native column holds it too, converted
    /// (TIME as microseconds, ENUM as its index, …), where it has one.
    pub default: Option<String>,
    /// `DEFAULT CURRENT_TIMESTAMP` (DATETIME/TIMESTAMP): the executor fills
    /// the statement's time when the column is not given.
    pub default_now: bool,
    /// `default` is an expression's text (`ColumnMeta::default_expr`): the
    /// executor evaluates it when the column is not given.
    pub default_expr: bool,
    /// `ON UPDATE CURRENT_TIMESTAMP`: the executor sets it on every update.
    pub on_update_now: bool,
    /// ZEROFILL was declared (values are not padded: MySQL 8 deprecates it).
    pub zerofill: bool,
    /// The declared integer display width (`INT(11)`), if any.
    pub width: Option<u16>,
    /// `COMMENT '…'`.
    pub comment: String,
}

/// A table as the SQL node sees it.
#[derive(Clone, Debug)]
pub struct TableInfo {
    /// Its database.
    pub db: String,
    /// Its name within the database.
    pub name: String,
    /// The native table (`db/def/name`).
    pub native: Arc<Table>,
    /// The visible columns, in declared order.
    pub columns: Vec<SqlColumn>,
    /// The table has no declared primary key: the hidden `$PK` (BIGINT
    /// UNSIGNED) is its key, filled from the table's auto-increment.
    pub hidden_key: bool,
    /// The SQL metadata the table was created with (defaults for a table
    /// made outside SQL).
    pub sql: meta::TableMeta,
    /// Its keys as SQL sees them, with the native indexes that serve them.
    pub keys: Vec<KeyInfo>,
    /// Row count and index cardinality for the cost model, shared by the
    /// node's sessions (`engine::stats`).
    pub stats: Arc<super::stats::StatsCell>,
}

/// A key of a table (PRIMARY, UNIQUE or KEY) and the native indexes that
/// serve it: NDB's layout, where a primary key is the table's hash key plus
/// an ordered index `PRIMARY`, a UNIQUE key `u` a unique hash index
/// `u$unique` plus an ordered index `u`, and a KEY an ordered index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyInfo {
    /// MySQL's name (`PRIMARY` for the primary key).
    pub name: String,
    /// Its columns' positions in the native table, in key order.
    pub columns: Vec<usize>,
    /// The primary key (lookups by `Op::read` on the table itself).
    pub primary: bool,
    /// PRIMARY or UNIQUE.
    pub unique: bool,
    /// The native ordered index for ranges and `ORDER BY`
    /// (`ScanOptions::index`), if it has one.
    pub ordered: Option<String>,
    /// The native unique hash index for lookups (`Op::index`), for a
    /// UNIQUE key.
    pub hash: Option<String>,
}

/// The keys of a native table as SQL sees them (see [`KeyInfo`]).
pub fn keys_of(def: &TableDef) -> Vec<KeyInfo> {
    use super::ddl::{PRIMARY, UNIQUE_SUFFIX};
    let mut keys = Vec::new();
    if !def.has_hidden_primary_key() {
        let ordered = def.indexes.iter().find(|i| i.name == PRIMARY);
        keys.push(KeyInfo {
            name: PRIMARY.to_owned(),
            columns: ordered.map_or(def.primary_key.clone(), |i| i.columns.clone()),
            primary: true,
            unique: true,
            ordered: ordered.map(|i| i.name.clone()),
            hash: None,
        });
    }
    for index in &def.indexes {
        if index.name == PRIMARY {
            continue;
        }
        match index.kind {
            schema::IndexKind::Ordered => {
                let hash = format!("{}{UNIQUE_SUFFIX}", index.name);
                let hash = def.indexes.iter().find(|i| i.name == hash);
                keys.push(KeyInfo {
                    name: index.name.clone(),
                    columns: index.columns.clone(),
                    primary: false,
                    unique: hash.is_some(),
                    ordered: Some(index.name.clone()),
                    hash: hash.map(|h| h.name.clone()),
                });
            }
            schema::IndexKind::Unique => {
                let base = index.name.strip_suffix(UNIQUE_SUFFIX);
                if base.is_some_and(|b| def.indexes.iter().any(|i| i.name == b)) {
                    continue;
                }
                keys.push(KeyInfo {
                    name: base.unwrap_or(&index.name).to_owned(),
                    columns: index.columns.clone(),
                    primary: false,
                    unique: true,
                    ordered: None,
                    hash: Some(index.name.clone()),
                });
            }
        }
    }
    // MySQL's order (`sort_keys`), which SHOW CREATE TABLE, SHOW INDEX and
    // information_schema show: the primary key, then UNIQUE keys of NOT
    // NULL columns, other UNIQUE keys, then the rest, each class in the
    // order the keys were made (a stable sort of the native indexes').
    keys.sort_by_key(|k| {
        if k.primary {
            0
        } else if !k.unique {
            3
        } else if k.columns.iter().any(|&c| def.columns[c].nullable) {
            2
        } else {
            1
        }
    });
    keys
}

impl TableInfo {
    /// A column by name (case-insensitive, as MySQL's).
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns
            .iter()
            .position(|c| c.name.eq_ignore_ascii_case(name))
    }

    /// The SQL column stored in native column `native`; None for a native
    /// column SQL does not show (a hidden key).
    pub fn sql_column(&self, native: usize) -> Option<usize> {
        self.columns.iter().position(|c| c.native == native)
    }

    /// The SQL columns of the primary key, in key order (none of a hidden
    /// key's).
    pub fn primary_key_columns(&self) -> impl Iterator<Item = usize> + '_ {
        self.native
            .def()
            .primary_key
            .iter()
            .filter_map(|native| self.sql_column(*native))
    }

    /// The AUTO_INCREMENT column, if the table has one.
    pub fn auto_increment_column(&self) -> Option<usize> {
        self.columns.iter().position(|c| c.auto_increment)
    }

    /// The table's id in the cluster (the auto-increment sequence's key).
    pub fn id(&self) -> u32 {
        self.native.id()
    }

    /// A session's temporary table ([`Temporaries`]).
    pub fn is_temporary(&self) -> bool {
        split_cluster_name(&self.native.def().name)
            .is_some_and(|(_, t)| t.starts_with(TEMPORARY_PREFIX))
    }
}

/// The prefix of the cluster tables that hold temporary tables, within
/// the copies' `#sql-` that SHOW and lookups by name skip: then the SQL
/// node's id, the connection's and a number of the connection's.
pub const TEMPORARY_PREFIX: &str = "#sql-tmp-";

/// Most temporary tables one connection holds at once.
pub const TEMPORARY_TABLES_MAX: usize = 1_024;

/// One temporary table of a connection: its name and the cluster table
/// that holds it.
#[derive(Clone, Debug)]
pub struct Temporary {
    /// Its database.
    pub db: String,
    /// Its name there, which it takes from any table of that name for
    /// this connection.
    pub name: String,
    /// The cluster table (`db/def/#sql-tmp-<node>-<connection>-<n>`).
    pub cluster: String,
}

/// A connection's temporary tables (`CREATE TEMPORARY TABLE`): real
/// cluster tables under hidden names, found by their names first for this
/// connection only, dropped when it ends (or at the SQL node's next start,
/// `alter_copy::recover`, when it did not end cleanly).
#[derive(Debug, Default)]
pub struct Temporaries {
    tables: Vec<Temporary>,
    /// The number of the next one's cluster name.
    next: u64,
}

impl Temporaries {
    /// The temporary table `db`.`name`, if the connection has one.
    pub fn find(&self, db: &str, name: &str) -> Option<&Temporary> {
        self.tables.iter().find(|t| t.db == db && t.name == name)
    }

    /// A cluster name for a new temporary table of `db`, unique to the
    /// SQL node (`node`) and connection (`connection`).
    pub fn new_cluster_name(&mut self, db: &str, node: u32, connection: u32) -> String {
        self.next += 1;
        cluster_name(
            db,
            &format!("{TEMPORARY_PREFIX}{node}-{connection}-{}", self.next),
        )
    }

    /// How many the connection holds.
    pub fn len(&self) -> usize {
        self.tables.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.tables.is_empty()
    }

    /// Keeps a created one.
    pub fn add(&mut self, table: Temporary) {
        debug_assert!(self.find(&table.db, &table.name).is_none());
        self.tables.push(table);
    }

    /// Forgets `db`.`name` (dropped), giving it back.
    pub fn remove(&mut self, db: &str, name: &str) -> Option<Temporary> {
        let at = self
            .tables
            .iter()
            .position(|t| t.db == db && t.name == name)?;
        Some(self.tables.remove(at))
    }

    /// Forgets them all, giving them back (the connection ends).
    pub fn take_all(&mut self) -> Vec<Temporary> {
        std::mem::take(&mut self.tables)
    }
}

/// Drops every temporary table of the connection (it ends or is reset);
/// one that will not drop is left to the SQL node's next start.
pub fn drop_temporaries(conn: &mut Conn<'_>) {
    for t in conn.temporary.take_all() {
        if let Err(e) = conn.native.drop_table(&t.cluster) {
            tracing::warn!(table = %t.cluster, error = %e, "could not drop a temporary table");
        }
    }
}

/// The cluster table that holds `db`.`table`.
pub fn cluster_name(db: &str, table: &str) -> String {
    format!("{db}/def/{table}")
}

/// The database and table of a cluster table name, if it is one SQL sees
/// (`db/def/name`, no hidden `$` table).
pub fn split_cluster_name(name: &str) -> Option<(&str, &str)> {
    let (db, rest) = name.split_once("/def/")?;
    if db.is_empty() || rest.is_empty() || rest.contains('/') || name.starts_with('$') {
        return None;
    }
    Some((db, rest))
}

/// The database the SQL node keeps its system tables in.
pub const SYSTEM_DB: &str = "mysql";
/// The virtual, read-only database of views on the catalog.
pub const INFORMATION_SCHEMA: &str = "information_schema";
/// The read-only database of the data nodes' figures (NDB's `ndbinfo`):
/// its rows come from the data nodes (`Session::dbinfo`).
pub const NDBINFO: &str = "ndbinfo";
/// A database's character set and collation when CREATE DATABASE names
/// neither (and those of the system databases).
pub const DEFAULT_CHARSET: &str = "utf8mb4";
pub const DEFAULT_COLLATION: &str = "utf8mb4_general_ci";
/// The cluster table of databases: one row per database.
pub const DATABASES_TABLE: &str = "mysql/def/skarv_databases";
/// The cluster table of auto-increment sequences, keyed by table id (NDB's
/// `SYSTAB_0`).
pub const SEQUENCES_TABLE: &str = "mysql/def/skarv_sequences";
/// Values a SQL node reserves from a table's sequence at once unless the
/// session's `ndb_autoincrement_prefetch_sz` says otherwise (NDB 8.0's
/// default; at 1 every insert reads and updates the sequence row, which
/// serialises inserts: seed 001 measured 1,212 tps against 3,472 at 256).
pub const AUTO_INCREMENT_PREFETCH: u64 = 512;
/// Longest database, table, column and index name, in characters
/// (MySQL's `NAME_CHAR_LEN`).
pub const IDENTIFIER_CHARS_MAX: usize = 64;
/// Tries of a system-table transaction that met a temporary error (a
/// busy dictionary, a node failure, two SQL nodes racing).
const SYSTEM_RETRIES_MAX: u32 = 10;
/// Wait between those tries, in milliseconds.
const SYSTEM_RETRY_WAIT_MS: u64 = 50;

/// A range of auto-increment values reserved by this SQL node.
#[derive(Clone, Copy, Debug)]
struct Reserved {
    next: u64,
    end: u64,
}

/// What this SQL node knows of one table's sequence.
#[derive(Clone, Copy, Debug, Default)]
struct Sequence {
    /// The values it may hand out.
    range: Option<Reserved>,
    /// The sequence row was last seen at or above this: it only grows
    /// (TRUNCATE's and ALTER's resets forget the slot), so an explicit
    /// value below it needs no round trip to be noted.
    floor: u64,
}

/// Caches the SQL node shares between connections.
#[derive(Default)]
pub struct Shared {
    /// Reserved auto-increment ranges by table id (a dropped and
    /// re-created table has a new id, so an entry never outlives its
    /// table's meaning). Each table's range has a lock of its own, held
    /// across a reservation's round trip to the cluster, so that one
    /// table's reservation never waits for another's.
    sequences: Mutex<HashMap<u32, Arc<Mutex<Sequence>>>>,
    /// The SQL view of each table by cluster name, kept while the client's
    /// cached native definition is the one it was made from (a new
    /// definition is a new `Arc<Table>`), so a statement does not decode
    /// the SQL metadata again.
    tables: Mutex<HashMap<String, Arc<TableInfo>>>,
}

/// Most tables whose SQL view [`Shared`] keeps; past it the cache starts
/// over (a cheap bound: entries are rebuilt from the client's cache).
const TABLE_INFO_CACHE_MAX: usize = 4_096;

/// Makes sure the SQL node's system tables exist: creating one that
/// another SQL node created at the same moment is success (721).
pub fn bootstrap(_engine: &Arc<Engine>, session: &Session) -> SqlResult<()> {
    create_system_tables(session)
}

/// Raises table `table_id`'s auto-increment sequence so that the next
/// value any SQL node hands out is at least `next`; never lowers it.
/// `skarv restore` calls it for each restored table with an
/// AUTO_INCREMENT column, with the source's sequence and past the largest
/// value restored (as `ndb_restore` restores NDB's auto-increment
/// values), so the first INSERT after a restore does not collide with a
/// restored row. Makes the SQL node's system tables first where no SQL
/// node has yet. A SQL node holding a range of the table's values from
/// before (a restore into a table it inserted into) uses that range up
/// first: values it skips past on a duplicate are not reused.
pub fn raise_sequence(session: &Session, table_id: u32, next: u64) -> SqlResult<()> {
    create_system_tables(session)?;
    let seq = retry(|| session.table(SEQUENCES_TABLE))?;
    let id = Value::UInt(u64::from(table_id));
    let key = [id.clone()];
    retry(|| {
        let tx = session.begin()?;
        let current = locked_next(&tx, &seq, &key)?;
        if current.is_some_and(|current| current >= next) {
            return Ok(());
        }
        tx.write(
            &seq,
            &[("table_id", id.clone()), ("next", Value::UInt(next))],
        )?;
        tx.execute(ExecMode::Commit).map(|_| ())
    })
}

/// A table's sequence row read in `tx` under an exclusive lock: its
/// `next`, or `None` when the table has no row yet.
fn locked_next(
    tx: &skarv_client::Transaction<'_>,
    seq: &Arc<Table>,
    key: &[Value],
) -> skarv_client::Result<Option<u64>> {
    let read = tx.define(Op::read(seq, key).lock(LockMode::Exclusive).ignore_error())?;
    let outcome = tx.execute(ExecMode::NoCommit)?;
    Ok(outcome.row(read).and_then(|r| match r.get("next") {
        Some(Value::UInt(v)) => Some(*v),
        _ => None,
    }))
}

/// Creates the SQL node's system tables that do not exist yet.
fn create_system_tables(session: &Session) -> SqlResult<()> {
    let name_type = NativeType::VarChar {
        max: IDENTIFIER_CHARS_MAX as u16,
        collation: Collation::Utf8mb4Bin,
    };
    let databases = TableDef::new(
        DATABASES_TABLE,
        0,
        vec![
            schema::Column::new("name", name_type),
            schema::Column::new("charset", name_type),
            schema::Column::new("collation", name_type),
        ],
    )
    .primary_key(vec![0])
    .partitions(0);
    let sequences = TableDef::new(
        SEQUENCES_TABLE,
        0,
        vec![
            schema::Column::new("table_id", NativeType::Int { unsigned: true }),
            schema::Column::new("next", NativeType::BigInt { unsigned: true }),
        ],
    )
    .primary_key(vec![0])
    .partitions(0);
    let index_stats = super::stats::index_stats_table_def();
    for def in [databases, sequences, super::views::table_def(), index_stats] {
        retry(|| match session.table(&def.name) {
            Ok(_) => Ok(()),
            Err(e) if e.code == skarv_client::codes::NO_SUCH_TABLE => {
                match session.create_table(&def) {
                    Ok(_) => Ok(()),
                    Err(e) if e.code == skarv_client::codes::ALREADY_EXISTS => Ok(()),
                    Err(e) => Err(e),
                }
            }
            Err(e) => Err(e),
        })?;
    }
    Ok(())
}

/// Runs `f` again while it fails with a temporary error, a few times.
pub(crate) fn retry<T>(mut f: impl FnMut() -> skarv_client::Result<T>) -> SqlResult<T> {
    let mut tries = 0;
    loop {
        match f() {
            Ok(v) => return Ok(v),
            Err(e) if e.is_temporary() && tries + 1 < SYSTEM_RETRIES_MAX => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(SYSTEM_RETRY_WAIT_MS));
            }
            Err(e) => return Err(native_error(&e)),
        }
    }
}

/// A native error as a MySQL one: the schema codes SQL has its own
/// numbers for, else the query helper's mapping.
pub fn native_error(e: &skarv_client::Error) -> SqlError {
    use skarv_client::codes as n;
    match e.code {
        n::BAD_DEFINITION if e.message.contains("rows of up to") => SqlError::new(
            codes::TOO_BIG_ROWSIZE,
            format!(
                "Row size too large. The maximum row size for the used table type is {}: {}",
                schema::ROW_BYTES_MAX,
                e.message
            ),
        ),
        n::BAD_DEFINITION if e.message.contains("keys take up to") => SqlError::new(
            codes::TOO_LONG_KEY,
            format!("Specified key was too long: {}", e.message),
        ),
        n::BAD_DEFINITION | n::UNSUPPORTED_ALTER => SqlError::unsupported(&e.message),
        _ => super::txn::native_error(e),
    }
}

/// A note of the running statement (level "Note", as MySQL gives `IF
/// [NOT] EXISTS` statements that found nothing to do).
pub fn note(conn: &mut Conn<'_>, code: u16, message: impl Into<String>) {
    conn.session.note_only(code, message.into());
}

/// A warning of the running statement (`SHOW WARNINGS`).
pub fn warn(conn: &mut Conn<'_>, code: u16, message: impl Into<String>) {
    conn.session.warn(code, message.into());
}

/// 1102/1103 for a name MySQL refuses: empty, longer than 64
/// characters, ending in a space, or holding what a cluster table name
/// cannot (`/`, and `.`/`\` in a database name, as MySQL's files).
pub fn check_name(name: &str, database: bool) -> SqlResult<()> {
    let bad = name.is_empty()
        || name.chars().count() > IDENTIFIER_CHARS_MAX
        || name.ends_with(' ')
        || name.contains('/')
        || name.contains('\0')
        || (database && (name.contains('\\') || name.contains('.')))
        || name.starts_with('$')
        || (!database && super::alter_copy::is_temp_name(name));
    if !bad {
        return Ok(());
    }
    if database {
        Err(SqlError::new(
            codes::WRONG_DB_NAME,
            format!("Incorrect database name '{name}'"),
        ))
    } else {
        Err(SqlError::new(
            codes::WRONG_TABLE_NAME,
            format!("Incorrect table name '{name}'"),
        ))
    }
}

/// A table, by the database the statement named or the session's current
/// one: 1046 when neither, 1146 for an unknown table.
pub fn table(conn: &Conn<'_>, db: Option<&str>, name: &str) -> SqlResult<Arc<TableInfo>> {
    let Some(db) = db.or(conn.session.database.as_deref()) else {
        return Err(SqlError::new(codes::NO_DB, "No database selected"));
    };
    let missing = || {
        SqlError::new(
            codes::TABLE_NOT_FOUND,
            format!("Table '{db}.{name}' doesn't exist"),
        )
    };
    if name.contains('/')
        || db.contains('/')
        || is_virtual_db(db)
        || super::alter_copy::is_temp_name(name)
    {
        return Err(missing());
    }
    // The connection's temporary table of the name hides any other.
    let cluster = match conn.temporary.find(db, name) {
        Some(t) => t.cluster.clone(),
        None => cluster_name(db, name),
    };
    let native = match conn.native.table(&cluster) {
        Ok(native) => native,
        Err(e) if e.code == skarv_client::codes::NO_SUCH_TABLE => return Err(missing()),
        Err(e) => return Err(native_error(&e)),
    };
    let mut tables = conn
        .engine
        .catalog
        .tables
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if let Some(info) = tables.get(&cluster) {
        // (A temporary table renamed keeps its cluster table.)
        if Arc::ptr_eq(&info.native, &native) && info.name == name && info.db == db {
            return Ok(Arc::clone(info));
        }
    }
    let info = Arc::new(table_info(db, name, native));
    if tables.len() >= TABLE_INFO_CACHE_MAX {
        tables.clear();
    }
    tables.insert(cluster, Arc::clone(&info));
    Ok(info)
}

/// The SQL view of a native table: each column's type from the table's
/// SQL metadata when it has some, else from its storage type (a table made
/// outside SQL, or metadata this build cannot read).
pub fn table_info(db: &str, name: &str, native: Arc<Table>) -> TableInfo {
    let def = native.def();
    let sql = if def.sql_meta.is_empty() {
        meta::TableMeta::default()
    } else {
        match meta::TableMeta::decode(&def.sql_meta) {
            Ok(sql) => sql,
            Err(e) => {
                tracing::warn!(table = %def.name, "{e}; columns are shown by their storage types");
                meta::TableMeta::default()
            }
        }
    };
    let mut columns = Vec::with_capacity(def.columns.len());
    let mut hidden_key = false;
    for (at, column) in def.columns.iter().enumerate() {
        if column.name == schema::HIDDEN_PRIMARY_KEY_COLUMN {
            hidden_key = true;
            continue;
        }
        let declared = sql.columns.iter().find(|c| usize::from(c.native) == at);
        let ty = match declared {
            Some(d) if d.ty.native() == column.ty => d.ty.clone(),
            _ => SqlType::of_native(column.ty),
        };
        let declared = declared.filter(|d| d.ty == ty);
        let mut meta = column_meta(&ty, column.nullable);
        if def.primary_key.contains(&at) {
            meta.flags |= flags::PRI_KEY | flags::NOT_NULL;
        }
        for index in &def.indexes {
            // The ordered twins NDB keeps of a primary or unique key are
            // not keys of their own to MySQL.
            let twin = index.name == super::ddl::PRIMARY
                || (index.kind == schema::IndexKind::Ordered
                    && def.indexes.iter().any(|u| {
                        u.name.strip_suffix(super::ddl::UNIQUE_SUFFIX) == Some(index.name.as_str())
                    }));
            if !twin && index.columns.first() == Some(&at) {
                meta.flags |= match index.kind {
                    schema::IndexKind::Unique if index.columns.len() == 1 => flags::UNIQUE_KEY,
                    _ => flags::MULTIPLE_KEY,
                };
            }
        }
        let auto_increment = declared.is_some_and(|d| d.auto_increment);
        if auto_increment {
            meta.flags |= flags::AUTO_INCREMENT;
        }
        if declared.is_some_and(|d| d.zerofill) {
            meta.flags |= flags::ZEROFILL | flags::UNSIGNED;
        }
        if declared.is_some_and(|d| d.on_update_now) {
            meta.flags |= flags::ON_UPDATE_NOW;
        }
        let default = match declared {
            // A number as the column holds it; the rest as written.
            Some(d) => d.default.as_ref().map(|text| {
                let held = column.default.as_ref();
                held.and_then(|v| held_number_text(&ty, v, &meta))
                    .unwrap_or_else(|| text.clone())
            }),
            None => column.default.as_ref().and_then(native_default_text),
        };
        let default_now = declared.is_some_and(|d| d.default_now);
        if default.is_none() && !default_now && !column.nullable && !auto_increment {
            meta.flags |= flags::NO_DEFAULT_VALUE;
        }
        // MariaDB's JSON column: LONGTEXT with its implicit check.
        meta.json = matches!(ty, SqlType::Text { .. })
            && sql.checks.iter().any(|c| {
                c.column.as_deref() == Some(column.name.as_str())
                    && c.expr == format!("json_valid(`{}`)", column.name)
            });
        meta.schema = db.into();
        meta.table = name.into();
        meta.org_table = Arc::clone(&meta.table);
        meta.name = column.name.as_str().into();
        meta.org_name = Arc::clone(&meta.name);
        columns.push(SqlColumn {
            name: column.name.clone(),
            native: at,
            ty,
            nullable: column.nullable,
            auto_increment,
            meta,
            default_expr: default.is_some() && declared.is_some_and(|d| d.default_expr),
            default,
            default_now,
            on_update_now: declared.is_some_and(|d| d.on_update_now),
            zerofill: declared.is_some_and(|d| d.zerofill),
            width: declared.and_then(|d| d.width),
            comment: declared.map(|d| d.comment.clone()).unwrap_or_default(),
        });
    }
    let keys = keys_of(def);
    TableInfo {
        db: db.to_owned(),
        name: name.to_owned(),
        native,
        columns,
        hidden_key,
        sql,
        keys,
        stats: Arc::default(),
    }
}

/// A numeric default as MariaDB shows it (SHOW CREATE TABLE, SHOW COLUMNS,
/// information_schema.COLUMNS): the value the column holds, printed as
/// its values print (`0.00` for DECIMAL(5,2) or DOUBLE(6,2) DEFAULT 0,
/// `2` for INT DEFAULT 1.6, `10` for DOUBLE DEFAULT 1e1; unpadded under
/// ZEROFILL, as Skarv's values are). None for any other type.
fn held_number_text(ty: &SqlType, value: &Value, meta: &ColumnMeta) -> Option<String> {
    if !ty.is_number() {
        return None;
    }
    let value = match super::exec::convert::from_native(value, ty, 0) {
        super::expr::Val::Null => return None,
        // MariaDB shows a default of -0e0 as 0 (-0 + 0 is 0).
        super::expr::Val::Double(f) => super::expr::Val::Double(f + 0.0),
        v => v,
    };
    let mut text = Vec::new();
    crate::protocol::render_text(&super::exec::convert::to_sql(&value, meta), meta, &mut text);
    String::from_utf8(text).ok()
}

/// A native default as SQL shows it (tables made outside SQL).
fn native_default_text(value: &Value) -> Option<String> {
    Some(match value {
        Value::Null => return None,
        Value::Int(v) => v.to_string(),
        Value::UInt(v) | Value::Bit(v) => v.to_string(),
        Value::Float(v) => v.to_string(),
        Value::Double(v) => v.to_string(),
        Value::Decimal(v) => v.to_string(),
        Value::String(s) => s.clone(),
        Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        Value::Date(d) => format!("{:04}-{:02}-{:02}", d.year, d.month, d.day),
        Value::DateTime(_) | Value::Timestamp(_) | Value::BlobHead { .. } => return None,
    })
}

/// Whether a database name is one of the virtual ones
/// (`information_schema`), read-only and without cluster tables.
pub fn is_virtual_db(name: &str) -> bool {
    name.eq_ignore_ascii_case(INFORMATION_SCHEMA) || is_ndbinfo(name)
}

/// Whether `name` is `ndbinfo` (as MySQL on Linux, database names are
/// matched exactly, but the virtual ones in any case).
pub fn is_ndbinfo(name: &str) -> bool {
    name.eq_ignore_ascii_case(NDBINFO)
}

/// 1049 for `performance_schema`, which Skarv has not.
fn performance_schema(name: &str) -> Option<SqlError> {
    name.eq_ignore_ascii_case("performance_schema").then(|| {
        SqlError::new(
            codes::BAD_DB,
            "Unknown database 'performance_schema' (Skarv has no performance_schema)",
        )
    })
}

/// A database as the catalog keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Database {
    /// Its name.
    pub name: String,
    /// Its default character set.
    pub charset: String,
    /// Its default collation.
    pub collation: String,
}

fn system_database(name: &str) -> Database {
    Database {
        name: name.to_owned(),
        charset: DEFAULT_CHARSET.to_owned(),
        collation: DEFAULT_COLLATION.to_owned(),
    }
}

pub(crate) fn text_of(row: &skarv_client::Row, column: &str) -> String {
    match row.get(column) {
        Some(Value::String(s)) => s.clone(),
        _ => String::new(),
    }
}

/// Every database: `information_schema`, `mysql` and the cluster's, by
/// name.
pub fn databases(conn: &Conn<'_>) -> SqlResult<Vec<Database>> {
    let table = system_table(conn, DATABASES_TABLE)?;
    let mut out = retry(|| {
        let tx = conn.native.begin()?;
        let mut out = Vec::new();
        for row in tx.scan(&table, ScanOptions::default())? {
            let row = row?;
            out.push(Database {
                name: text_of(&row, "name"),
                charset: text_of(&row, "charset"),
                collation: text_of(&row, "collation"),
            });
        }
        Ok(out)
    })?;
    for name in [INFORMATION_SCHEMA, NDBINFO, SYSTEM_DB] {
        if !out.iter().any(|d| d.name == name) {
            out.push(system_database(name));
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// One database, or 1049.
pub fn database(conn: &Conn<'_>, name: &str) -> SqlResult<Database> {
    if let Some(e) = performance_schema(name) {
        return Err(e);
    }
    if is_ndbinfo(name) {
        return Ok(system_database(NDBINFO));
    }
    if is_virtual_db(name) {
        return Ok(system_database(INFORMATION_SCHEMA));
    }
    if name == SYSTEM_DB {
        return Ok(system_database(SYSTEM_DB));
    }
    let unknown = || SqlError::new(codes::BAD_DB, format!("Unknown database '{name}'"));
    if check_name(name, true).is_err() {
        return Err(unknown());
    }
    let table = system_table(conn, DATABASES_TABLE)?;
    let key = [Value::String(name.to_owned())];
    let row = retry(|| {
        let tx = conn.native.begin()?;
        let read = tx.define(Op::read(&table, &key).ignore_error())?;
        let mut outcome = tx.execute(ExecMode::Commit)?;
        Ok(outcome.take_row(read))
    })?;
    match row {
        Some(row) => Ok(Database {
            name: text_of(&row, "name"),
            charset: text_of(&row, "charset"),
            collation: text_of(&row, "collation"),
        }),
        None => Err(unknown()),
    }
}

/// Whether a database exists (for `USE` and `COM_INIT_DB`): `Ok(false)`
/// for an unknown one; 1049 with a message for `performance_schema`.
pub fn database_exists(conn: &Conn<'_>, name: &str) -> SqlResult<bool> {
    match database(conn, name) {
        Ok(_) => Ok(true),
        Err(e) if e.code == codes::BAD_DB && performance_schema(name).is_none() => Ok(false),
        Err(e) => Err(e),
    }
}

/// Adds a database row: `Ok(false)` when it exists already.
pub fn insert_database(conn: &Conn<'_>, db: &Database) -> SqlResult<bool> {
    let table = system_table(conn, DATABASES_TABLE)?;
    retry(|| {
        let tx = conn.native.begin()?;
        tx.insert(
            &table,
            &[
                ("name", Value::String(db.name.clone())),
                ("charset", Value::String(db.charset.clone())),
                ("collation", Value::String(db.collation.clone())),
            ],
        )?;
        match tx.execute(ExecMode::Commit) {
            Ok(_) => Ok(true),
            Err(e) if e.code == skarv_client::codes::DUPLICATE_KEY => Ok(false),
            Err(e) => Err(e),
        }
    })
}

/// Removes a database row: `Ok(false)` when there was none.
pub fn delete_database(conn: &Conn<'_>, name: &str) -> SqlResult<bool> {
    let table = system_table(conn, DATABASES_TABLE)?;
    let key = [Value::String(name.to_owned())];
    retry(|| {
        let tx = conn.native.begin()?;
        tx.delete(&table, &key)?;
        match tx.execute(ExecMode::Commit) {
            Ok(_) => Ok(true),
            Err(e) if e.code == skarv_client::codes::NO_SUCH_ROW => Ok(false),
            Err(e) => Err(e),
        }
    })
}

/// The names of a database's tables, sorted (the cluster's list, as the
/// data node asked knows it).
pub fn table_names(conn: &Conn<'_>, db: &str) -> SqlResult<Vec<String>> {
    if is_ndbinfo(db) {
        return Ok(signal::dbinfo::TABLES
            .iter()
            .map(|t| t.name.to_owned())
            .collect());
    }
    if is_virtual_db(db) {
        return Ok(super::show::INFORMATION_SCHEMA_TABLES
            .iter()
            .map(|t| (*t).to_owned())
            .collect());
    }
    let all = retry(|| conn.native.list_tables())?;
    let mut names: Vec<String> = all
        .iter()
        .filter_map(|n| split_cluster_name(n))
        .filter(|(d, t)| *d == db && !super::alter_copy::is_temp_name(t))
        .map(|(_, t)| t.to_owned())
        .collect();
    names.sort();
    Ok(names)
}

pub(crate) fn system_table(conn: &Conn<'_>, name: &str) -> SqlResult<Arc<Table>> {
    retry(|| conn.native.table(name))
}

/// The next `count` values of a table's auto-increment (for its
/// AUTO_INCREMENT column or hidden key): the first of them. Values are
/// unique cluster-wide; a SQL node reserves them in ranges of at least
/// `ndb_autoincrement_prefetch_sz` (one locking read and update of the
/// sequence row, in a transaction of its own, not the user's), so values
/// from two SQL nodes interleave, as NDB's do.
pub fn next_auto_increment(conn: &Conn<'_>, table: &TableInfo, count: u64) -> SqlResult<u64> {
    let count = count.max(1);
    let slot = sequence_slot(conn, table.id());
    let mut sequence = slot.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(range) = sequence.range.as_mut() {
        if range.end - range.next >= count {
            let first = range.next;
            range.next += count;
            return Ok(first);
        }
    }
    let prefetch = conn
        .session
        .vars
        .get("ndb_autoincrement_prefetch_sz")
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(AUTO_INCREMENT_PREFETCH);
    let want = count.max(prefetch);
    let first = reserve(conn, table, want, None)?;
    sequence.range = Some(Reserved {
        next: first + count,
        end: first + want,
    });
    sequence.floor = sequence.floor.max(first + want);
    Ok(first)
}

/// The lock and range of one table's sequence on this node (made on first
/// use).
fn sequence_slot(conn: &Conn<'_>, table_id: u32) -> Arc<Mutex<Sequence>> {
    let mut sequences = conn
        .engine
        .catalog
        .sequences
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    Arc::clone(sequences.entry(table_id).or_default())
}

/// Forgets this node's range of a table's sequence.
fn forget_sequence(conn: &Conn<'_>, table_id: u32) {
    conn.engine
        .catalog
        .sequences
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&table_id);
}

/// An explicit value was stored in the AUTO_INCREMENT column: later
/// generated values must be above it (MySQL's rule), on every SQL node.
pub fn note_explicit_auto_increment(
    conn: &Conn<'_>,
    table: &TableInfo,
    value: u64,
) -> SqlResult<()> {
    let slot = sequence_slot(conn, table.id());
    let mut sequence = slot.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(reserved) = sequence.range.as_mut() {
        if value < reserved.next {
            return Ok(());
        }
        if value < reserved.end {
            // Inside this node's reservation: skip past it here.
            reserved.next = value + 1;
            return Ok(());
        }
        sequence.range = None;
    }
    if value < sequence.floor {
        // Every value generated from now on, by any SQL node, comes from
        // the sequence row, which is at or above the floor already.
        return Ok(());
    }
    let next = value.saturating_add(1);
    let first = reserve(conn, table, 0, Some(next))?;
    sequence.floor = sequence.floor.max(first);
    Ok(())
}

/// Sets a table's sequence so that the next value is at least `next`
/// (`ALTER TABLE … AUTO_INCREMENT=n`, TRUNCATE's restart with `Some(1)`
/// and `exact`).
pub fn set_auto_increment(conn: &Conn<'_>, table_id: u32, next: u64, exact: bool) -> SqlResult<()> {
    forget_sequence(conn, table_id);
    let seq = system_table(conn, SEQUENCES_TABLE)?;
    let key = [Value::UInt(u64::from(table_id))];
    retry(|| {
        let tx = conn.native.begin()?;
        if exact {
            tx.write(
                &seq,
                &[
                    ("table_id", Value::UInt(u64::from(table_id))),
                    ("next", Value::UInt(next)),
                ],
            )?;
            tx.execute(ExecMode::Commit)?;
            return Ok(());
        }
        let read = tx.define(
            Op::read(&seq, &key)
                .lock(LockMode::Exclusive)
                .ignore_error(),
        )?;
        let outcome = tx.execute(ExecMode::NoCommit)?;
        let current = outcome.row(read).and_then(|r| match r.get("next") {
            Some(Value::UInt(v)) => Some(*v),
            _ => None,
        });
        match current {
            Some(current) if current >= next => {
                tx.execute(ExecMode::Rollback)?;
            }
            Some(_) => {
                tx.update(&seq, &key, &[("next", Value::UInt(next))])?;
                tx.execute(ExecMode::Commit)?;
            }
            None => {
                tx.insert(
                    &seq,
                    &[
                        ("table_id", Value::UInt(u64::from(table_id))),
                        ("next", Value::UInt(next)),
                    ],
                )?;
                tx.execute(ExecMode::Commit)?;
            }
        }
        Ok(())
    })
}

/// Forgets a dropped table's sequence (its row and this node's range).
pub fn drop_sequence(conn: &Conn<'_>, table_id: u32) -> SqlResult<()> {
    forget_sequence(conn, table_id);
    let seq = system_table(conn, SEQUENCES_TABLE)?;
    let key = [Value::UInt(u64::from(table_id))];
    retry(|| {
        let tx = conn.native.begin()?;
        tx.define(Op::delete(&seq, &key).ignore_error())?;
        tx.execute(ExecMode::Commit).map(|_| ())
    })
}

/// The next value the sequence would give (SHOW TABLE STATUS,
/// information_schema.TABLES): this node's cached next, else the
/// sequence row's, else the table's start.
pub fn peek_auto_increment(conn: &Conn<'_>, table: &TableInfo) -> SqlResult<u64> {
    let cached = *sequence_slot(conn, table.id())
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if let Some(range) = cached.range {
        return Ok(range.next);
    }
    let seq = system_table(conn, SEQUENCES_TABLE)?;
    let key = [Value::UInt(u64::from(table.id()))];
    let next = retry(|| {
        let tx = conn.native.begin()?;
        let read = tx.define(Op::read(&seq, &key).ignore_error())?;
        let outcome = tx.execute(ExecMode::Commit)?;
        Ok(outcome.row(read).and_then(|r| match r.get("next") {
            Some(Value::UInt(v)) => Some(*v),
            _ => None,
        }))
    })?;
    Ok(next.unwrap_or(table.sql.auto_increment_start.max(1)))
}

/// Takes `want` values from the table's sequence row (or, with
/// `at_least`, moves it up to that and takes none): the first value taken.
fn reserve(conn: &Conn<'_>, table: &TableInfo, want: u64, at_least: Option<u64>) -> SqlResult<u64> {
    let seq = system_table(conn, SEQUENCES_TABLE)?;
    let id = u64::from(table.id());
    let key = [Value::UInt(id)];
    let start = table.sql.auto_increment_start.max(1);
    retry(|| {
        let tx = conn.native.begin()?;
        let current = locked_next(&tx, &seq, &key)?;
        let first = current.unwrap_or(start);
        let first = at_least.map_or(first, |n| first.max(n));
        let next = first.checked_add(want).ok_or_else(|| {
            skarv_client::Error::new(
                skarv_client::codes::BAD_VALUE,
                format!("the auto-increment of table {id} is exhausted"),
            )
        })?;
        if current.is_some() {
            tx.update(&seq, &key, &[("next", Value::UInt(next))])?;
        } else {
            // Two SQL nodes inserting at once: one gets 630 and tries again.
            tx.insert(
                &seq,
                &[("table_id", Value::UInt(id)), ("next", Value::UInt(next))],
            )?;
        }
        match tx.execute(ExecMode::Commit) {
            Ok(_) => Ok(first),
            Err(e) if e.code == skarv_client::codes::DUPLICATE_KEY => Err(
                skarv_client::Error::new(skarv_client::codes::BUSY, "sequence row raced"),
            ),
            Err(e) => Err(e),
        }
    })
}

impl SqlType {
    /// The collation a text type compares under; None for any other type.
    pub fn collation(&self) -> Option<Collation> {
        match self {
            SqlType::Char { collation, .. }
            | SqlType::VarChar { collation, .. }
            | SqlType::Text { collation, .. } => Some(*collation),
            _ => None,
        }
    }

    /// An integer, FLOAT, DOUBLE or DECIMAL type: a number with no other
    /// meaning (not BIT, YEAR or a temporal type).
    pub fn is_number(&self) -> bool {
        self.is_integer()
            || matches!(
                self,
                SqlType::Float { .. } | SqlType::Double { .. } | SqlType::Decimal { .. }
            )
    }

    /// TINYINT to BIGINT: an integer with no other meaning (not YEAR nor
    /// BIT, whose stored form and comparison differ).
    pub fn is_integer(&self) -> bool {
        matches!(
            self,
            SqlType::TinyInt { .. }
                | SqlType::SmallInt { .. }
                | SqlType::MediumInt { .. }
                | SqlType::Int { .. }
                | SqlType::BigInt { .. }
        )
    }

    /// The storage type that holds this type's values.
    pub fn native(&self) -> NativeType {
        match self {
            SqlType::TinyInt { unsigned } => NativeType::TinyInt {
                unsigned: *unsigned,
            },
            SqlType::SmallInt { unsigned } => NativeType::SmallInt {
                unsigned: *unsigned,
            },
            SqlType::MediumInt { unsigned } => NativeType::MediumInt {
                unsigned: *unsigned,
            },
            SqlType::Int { unsigned } => NativeType::Int {
                unsigned: *unsigned,
            },
            SqlType::BigInt { unsigned } => NativeType::BigInt {
                unsigned: *unsigned,
            },
            SqlType::Float { .. } => NativeType::Float,
            SqlType::Double { .. } => NativeType::Double,
            SqlType::Decimal {
                precision, scale, ..
            } => NativeType::Decimal {
                precision: *precision,
                scale: *scale,
            },
            SqlType::Char { length, collation } => NativeType::Char {
                len: *length,
                collation: *collation,
            },
            SqlType::VarChar { max, collation } => NativeType::VarChar {
                max: *max,
                collation: *collation,
            },
            SqlType::Binary { length } => NativeType::Binary { len: *length },
            SqlType::VarBinary { max } => NativeType::VarBinary { max: *max },
            SqlType::Text { collation, .. } => NativeType::Text {
                collation: *collation,
            },
            SqlType::Blob { .. } => NativeType::Blob,
            SqlType::Date => NativeType::Date,
            SqlType::Time { .. } => NativeType::BigInt { unsigned: false },
            SqlType::DateTime { fsp } => NativeType::DateTime { fsp: *fsp },
            SqlType::Timestamp { fsp } => NativeType::Timestamp { fsp: *fsp },
            SqlType::Year | SqlType::Enum(_) => NativeType::SmallInt { unsigned: true },
            SqlType::Set(_) => NativeType::BigInt { unsigned: true },
            SqlType::Bit { bits } => NativeType::Bit { bits: *bits },
        }
    }

    /// The SQL type of a storage type, for columns without SQL metadata.
    pub fn of_native(ty: NativeType) -> SqlType {
        match ty {
            NativeType::TinyInt { unsigned } => SqlType::TinyInt { unsigned },
            NativeType::SmallInt { unsigned } => SqlType::SmallInt { unsigned },
            NativeType::MediumInt { unsigned } => SqlType::MediumInt { unsigned },
            NativeType::Int { unsigned } => SqlType::Int { unsigned },
            NativeType::BigInt { unsigned } => SqlType::BigInt { unsigned },
            NativeType::Float => SqlType::Float {
                digits: None,
                unsigned: false,
            },
            NativeType::Double => SqlType::Double {
                digits: None,
                unsigned: false,
            },
            NativeType::Decimal { precision, scale } => SqlType::Decimal {
                precision,
                scale,
                unsigned: false,
            },
            NativeType::Char { len, collation } => SqlType::Char {
                length: len,
                collation,
            },
            NativeType::VarChar { max, collation } => SqlType::VarChar { max, collation },
            NativeType::Binary { len } => SqlType::Binary { length: len },
            NativeType::VarBinary { max } => SqlType::VarBinary { max },
            NativeType::Date => SqlType::Date,
            NativeType::DateTime { fsp } => SqlType::DateTime { fsp },
            NativeType::Timestamp { fsp } => SqlType::Timestamp { fsp },
            NativeType::Bit { bits } => SqlType::Bit { bits },
            NativeType::Blob => SqlType::Blob {
                size: BlobSize::Long,
            },
            NativeType::Text { collation } => SqlType::Text {
                size: BlobSize::Long,
                collation,
            },
        }
    }
}

/// The protocol's collation number of a string collation.
pub(crate) fn collation_charset(collation: Collation) -> u16 {
    match collation {
        Collation::Utf8mb4Bin => charset::UTF8MB4_BIN,
        Collation::Utf8mb4GeneralCi => charset::UTF8MB4_GENERAL_CI,
    }
}

/// The result-set metadata MySQL gives a column of this type (names left
/// empty for the caller).
pub fn column_meta(ty: &SqlType, nullable: bool) -> ColumnMeta {
    use crate::value::ColumnType as T;
    let real_flags = |unsigned: bool| flags::NUM | if unsigned { flags::UNSIGNED } else { 0 };
    let int = |t: T, length: u32, unsigned: bool| {
        let flags = flags::NUM | if unsigned { flags::UNSIGNED } else { 0 };
        (t, charset::BINARY, length, flags, 0u8)
    };
    let blob_length = |size: BlobSize| match size {
        BlobSize::Tiny => 255,
        BlobSize::Normal => 65_535,
        BlobSize::Medium => 16_777_215,
        BlobSize::Long => u32::MAX,
    };
    // MySQL's display lengths count bytes of the character set: 4 per
    // utf8mb4 character.
    let chars = |n: u16| u32::from(n) * 4;
    let (ty, charset, length, mut flags, decimals) = match ty {
        SqlType::TinyInt { unsigned } => int(T::Tiny, 4 - u32::from(*unsigned), *unsigned),
        SqlType::SmallInt { unsigned } => int(T::Short, 6 - u32::from(*unsigned), *unsigned),
        SqlType::MediumInt { unsigned } => int(T::Int24, 9 - u32::from(*unsigned), *unsigned),
        SqlType::Int { unsigned } => int(T::Long, 11 - u32::from(*unsigned), *unsigned),
        SqlType::BigInt { unsigned } => int(T::LongLong, 20, *unsigned),
        // MariaDB's length of a FLOAT(M,D) or DOUBLE(M,D) is M, its
        // decimals D (the text protocol prints D decimals).
        SqlType::Float {
            digits: Some(f),
            unsigned,
        }
        | SqlType::Double {
            digits: Some(f),
            unsigned,
        } => {
            let t = if matches!(ty, SqlType::Float { .. }) {
                T::Float
            } else {
                T::Double
            };
            (
                t,
                charset::BINARY,
                u32::from(f.m),
                real_flags(*unsigned),
                f.d,
            )
        }
        SqlType::Float {
            digits: None,
            unsigned,
        } => (T::Float, charset::BINARY, 12, real_flags(*unsigned), 31),
        SqlType::Double {
            digits: None,
            unsigned,
        } => (T::Double, charset::BINARY, 22, real_flags(*unsigned), 31),
        // MariaDB's length: the digits, the point, and a sign unless
        // UNSIGNED.
        SqlType::Decimal {
            precision,
            scale,
            unsigned,
        } => {
            let length = u32::from(*precision) + u32::from(*scale > 0) + u32::from(!*unsigned);
            (
                T::NewDecimal,
                charset::BINARY,
                length,
                real_flags(*unsigned),
                *scale,
            )
        }
        SqlType::Char { length, collation } => (
            T::String,
            collation_charset(*collation),
            chars(*length),
            0,
            0,
        ),
        SqlType::VarChar { max, collation } => (
            T::VarString,
            collation_charset(*collation),
            chars(*max),
            0,
            0,
        ),
        SqlType::Binary { length } => (
            T::String,
            charset::BINARY,
            u32::from(*length),
            flags::BINARY,
            0,
        ),
        SqlType::VarBinary { max } => (
            T::VarString,
            charset::BINARY,
            u32::from(*max),
            flags::BINARY,
            0,
        ),
        SqlType::Text { size, collation } => (
            T::Blob,
            collation_charset(*collation),
            blob_length(*size),
            flags::BLOB,
            0,
        ),
        SqlType::Blob { size } => (
            T::Blob,
            charset::BINARY,
            blob_length(*size),
            flags::BLOB | flags::BINARY,
            0,
        ),
        SqlType::Date => (T::Date, charset::BINARY, 10, flags::BINARY, 0),
        SqlType::Time { fsp } => {
            let length = 10 + u32::from(*fsp) + u32::from(*fsp > 0);
            (T::Time, charset::BINARY, length, flags::BINARY, *fsp)
        }
        SqlType::DateTime { fsp } => {
            let length = 19 + u32::from(*fsp) + u32::from(*fsp > 0);
            (T::DateTime, charset::BINARY, length, flags::BINARY, *fsp)
        }
        SqlType::Timestamp { fsp } => {
            let length = 19 + u32::from(*fsp) + u32::from(*fsp > 0);
            let flags = flags::BINARY | flags::TIMESTAMP;
            (T::Timestamp, charset::BINARY, length, flags, *fsp)
        }
        // ZEROFILL as MariaDB marks a YEAR: a client pads its binary value
        // to four digits (0000).
        SqlType::Year => (
            T::Year,
            charset::BINARY,
            4,
            flags::UNSIGNED | flags::ZEROFILL | flags::NUM,
            0,
        ),
        SqlType::Bit { bits } => (
            T::Bit,
            charset::BINARY,
            u32::from(*bits),
            flags::UNSIGNED,
            0,
        ),
        SqlType::Enum(members) => {
            let longest = members.iter().map(|m| m.chars().count()).max().unwrap_or(0);
            let length = u32::try_from(longest).unwrap_or(u32::MAX).saturating_mul(4);
            (
                T::String,
                charset::UTF8MB4_GENERAL_CI,
                length,
                flags::ENUM,
                0,
            )
        }
        SqlType::Set(members) => {
            let total: usize = members.iter().map(|m| m.chars().count() + 1).sum();
            let length = u32::try_from(total).unwrap_or(u32::MAX).saturating_mul(4);
            (
                T::String,
                charset::UTF8MB4_GENERAL_CI,
                length,
                flags::SET,
                0,
            )
        }
    };
    if !nullable {
        flags |= flags::NOT_NULL;
    }
    ColumnMeta {
        schema: Arc::default(),
        table: Arc::default(),
        org_table: Arc::default(),
        name: Arc::default(),
        org_name: Arc::default(),
        charset,
        length,
        ty,
        flags,
        decimals,
        json: false,
    }
}
