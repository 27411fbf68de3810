//! Accounts and grants, kept in cluster tables so every SQL node agrees
//! (NDB's distributed privilege tables):
//!
//! - `mysql/def/user`: one row per account (`user`, `host`), the two
//!   password hashes the authentication plugins need (never the password),
//!   and the account's global privileges as a bit set;
//! - `mysql/def/db`: one row per (`user`, `host`, `db`) grant, its bit set.
//!
//! A session reads its account's grants when it logs in and again at every
//! `USE` (MySQL applies global grants at the next connection and database
//! grants at the next `USE` too). Privileges are checked per statement
//! before it runs ([`authorize`]): 1142 for a table, 1044 for a database.
//! The account statements are parsed here from their tokens, because the
//! parser does not take MySQL's `'user'@'host'`.

use std::io;
use std::net::IpAddr;
use std::sync::Arc;

use schema::{Collation, Column, ColumnType as NativeType, TableDef, Value};
use skarv_client::{ExecMode, LockMode, Op, ScanOptions, Session, Table};
use sqlparser::ast::Statement;
use sqlparser::dialect::MySqlDialect;
use sqlparser::tokenizer::{Token, Tokenizer};

use super::{send_rows, Answered, Conn, Engine};
use crate::backend::{Credentials, Login, OkInfo, ResultSink};
use crate::error::{codes, SqlError, SqlResult};
use crate::value::{charset, ColumnMeta, ColumnType, SqlValue};

/// The account table.
pub const USER_TABLE: &str = "mysql/def/user";
/// The database grants table.
pub const DB_TABLE: &str = "mysql/def/db";
/// One row (`id` 0) whose `version` every change of an account or a grant
/// rewrites in the same transaction: a SQL node keeps the accounts it read
/// ([`Cache`]) while this row holds the version it read them at, so a
/// login costs one key read rather than scans of both tables.
pub const VERSION_TABLE: &str = "mysql/def/skarv_privileges_version";
/// Longest user name (MySQL's).
pub const USER_CHARS_MAX: u16 = 32;
/// Longest host pattern (MySQL's).
pub const HOST_CHARS_MAX: u16 = 255;
/// Longest database name (MySQL's).
pub const DB_CHARS_MAX: u16 = 64;

/// Privileges, one bit each.
pub mod privilege {
    #![allow(missing_docs)]
    pub const SELECT: u64 = 1 << 0;
    pub const INSERT: u64 = 1 << 1;
    pub const UPDATE: u64 = 1 << 2;
    pub const DELETE: u64 = 1 << 3;
    pub const CREATE: u64 = 1 << 4;
    pub const DROP: u64 = 1 << 5;
    pub const ALTER: u64 = 1 << 6;
    pub const INDEX: u64 = 1 << 7;
    pub const PROCESS: u64 = 1 << 8;
    pub const SUPER: u64 = 1 << 9;
    pub const CREATE_USER: u64 = 1 << 10;
    pub const GRANT_OPTION: u64 = 1 << 11;
    /// `ALL [PRIVILEGES]` on `*.*` (not GRANT OPTION, as MySQL's).
    pub const ALL_GLOBAL: u64 = SELECT
        | INSERT
        | UPDATE
        | DELETE
        | CREATE
        | DROP
        | ALTER
        | INDEX
        | PROCESS
        | SUPER
        | CREATE_USER;
    /// `ALL [PRIVILEGES]` on `db.*`.
    pub const ALL_DB: u64 = SELECT | INSERT | UPDATE | DELETE | CREATE | DROP | ALTER | INDEX;
    /// Names in `SHOW GRANTS` order.
    pub const NAMES: &[(u64, &str)] = &[
        (SELECT, "SELECT"),
        (INSERT, "INSERT"),
        (UPDATE, "UPDATE"),
        (DELETE, "DELETE"),
        (CREATE, "CREATE"),
        (DROP, "DROP"),
        (PROCESS, "PROCESS"),
        (INDEX, "INDEX"),
        (ALTER, "ALTER"),
        (SUPER, "SUPER"),
        (CREATE_USER, "CREATE USER"),
    ];
}

/// One account row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Account {
    /// User name ("" for MySQL's anonymous user).
    pub user: String,
    /// Host pattern (`%`, `localhost`, `10.0.%`, …).
    pub host: String,
    /// The password hashes.
    pub credentials: Credentials,
    /// Global privileges.
    pub privileges: u64,
}

/// What a session may do: read from its account at login and at `USE`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Grants {
    /// Global privileges.
    pub global: u64,
    /// Per database (exact names).
    pub databases: Vec<(String, u64)>,
}

impl Grants {
    /// The privileges held on database `db`.
    pub fn on(&self, db: &str) -> u64 {
        self.global
            | self
                .databases
                .iter()
                .filter(|(d, _)| d == db)
                .fold(0, |acc, (_, p)| acc | p)
    }
}

fn varchar(max: u16, collation: Collation) -> NativeType {
    NativeType::VarChar { max, collation }
}

fn user_table_def() -> TableDef {
    TableDef::new(
        USER_TABLE,
        0,
        vec![
            Column::new("user", varchar(USER_CHARS_MAX, Collation::Utf8mb4Bin)),
            Column::new("host", varchar(HOST_CHARS_MAX, Collation::Utf8mb4GeneralCi)),
            Column::new("empty_password", NativeType::TinyInt { unsigned: true }),
            Column::new("native_hash", NativeType::Binary { len: 20 }),
            Column::new("sha2_hash", NativeType::Binary { len: 32 }),
            Column::new("privileges", NativeType::BigInt { unsigned: true }),
        ],
    )
    .primary_key(vec![0, 1])
}

fn db_table_def() -> TableDef {
    TableDef::new(
        DB_TABLE,
        0,
        vec![
            Column::new("user", varchar(USER_CHARS_MAX, Collation::Utf8mb4Bin)),
            Column::new("host", varchar(HOST_CHARS_MAX, Collation::Utf8mb4GeneralCi)),
            Column::new("db", varchar(DB_CHARS_MAX, Collation::Utf8mb4Bin)),
            Column::new("privileges", NativeType::BigInt { unsigned: true }),
        ],
    )
    .primary_key(vec![0, 1, 2])
}

fn version_table_def() -> TableDef {
    TableDef::new(
        VERSION_TABLE,
        0,
        vec![
            Column::new("id", NativeType::TinyInt { unsigned: true }),
            Column::new("version", NativeType::BigInt { unsigned: true }),
        ],
    )
    .primary_key(vec![0])
}

/// Every account and database grant, as read at one version of
/// [`VERSION_TABLE`].
#[derive(Debug, Default)]
pub struct Snapshot {
    /// The version read before the tables (None: the row was missing, and
    /// the snapshot is not kept).
    version: Option<u64>,
    /// Every account.
    pub accounts: Vec<Account>,
    /// Every database grant: (user, host, db, privileges).
    pub grants: Vec<(String, String, String, u64)>,
}

impl Snapshot {
    /// The database grants of one account.
    fn grants_of(&self, user: &str, host: &str) -> Vec<(String, u64)> {
        self.grants
            .iter()
            .filter(|(u, h, ..)| u == user && h.eq_ignore_ascii_case(host))
            .map(|(_, _, db, bits)| (db.clone(), *bits))
            .collect()
    }
}

/// The accounts a SQL node read last (see [`VERSION_TABLE`]).
#[derive(Debug, Default)]
pub struct Cache(std::sync::Mutex<Option<Arc<Snapshot>>>);

impl Cache {
    /// `FLUSH PRIVILEGES`: the next look reads the tables again.
    pub fn forget(&self) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }
}

/// A value no other change picks: the time in nanoseconds mixed with a
/// per-process counter, so that two SQL nodes bumping at once differ.
fn fresh_version() -> u64 {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let count = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    nanos ^ (u64::from(std::process::id()) << 40) ^ count.rotate_left(17)
}

/// Adds to `tx` the rewrite of the version row (every account or grant
/// change does, in its own transaction).
fn bump_version(session: &Session, tx: &skarv_client::Transaction<'_>) -> SqlResult<()> {
    let table = session.table(VERSION_TABLE).map_err(native)?;
    tx.write(
        &table,
        &[
            ("id", Value::UInt(0)),
            ("version", Value::UInt(fresh_version())),
        ],
    )
    .map_err(native)?;
    Ok(())
}

/// Ends `tx` without its changes, releasing its locks (the version row's
/// above all), where a statement stops after an `ExecMode::NoCommit`.
fn rollback(tx: &skarv_client::Transaction<'_>) {
    // Its outcome changes nothing: the statement's own answer is sent
    // either way, and a failed rollback leaves the TC to abort it.
    let _ = tx.execute(ExecMode::Rollback);
}

/// The accounts and grants as the cluster holds them now: the cached
/// snapshot when the version row still names it (one key read), else
/// read again (a scan of each table).
pub fn snapshot(engine: &Engine, session: &Session) -> SqlResult<Arc<Snapshot>> {
    let table = session.table(VERSION_TABLE).map_err(native)?;
    let tx = session.begin().map_err(native)?;
    let key = [Value::UInt(0)];
    let read = tx
        .define(Op::read(&table, &key).ignore_error())
        .map_err(native)?;
    let outcome = tx.execute(ExecMode::Commit).map_err(native)?;
    let version = outcome.row(read).map(|r| u64_of(r.get("version")));
    let mut cache = engine.accounts.0.lock().unwrap_or_else(|p| p.into_inner());
    if let (Some(v), Some(cached)) = (version, cache.as_ref()) {
        if cached.version == Some(v) {
            return Ok(Arc::clone(cached));
        }
    }
    let snapshot = Arc::new(Snapshot {
        version,
        accounts: load_accounts(session)?,
        grants: load_all_db_grants(session)?,
    });
    *cache = version.map(|_| Arc::clone(&snapshot));
    Ok(snapshot)
}

/// A privilege an account holds: (grantee, database, privilege, grantable).
pub type PrivilegeRow = (String, Option<String>, &'static str, bool);

/// `information_schema.USER_PRIVILEGES` (`schema`: false) or
/// `SCHEMA_PRIVILEGES`: (grantee, database, privilege, grantable), a row
/// per privilege held (`USAGE` for an account with no global one, as
/// MySQL's). Every account's for a session that may read the accounts
/// (global SELECT, as `SHOW GRANTS FOR`), else its own.
pub fn privilege_rows(conn: &Conn<'_>, schema: bool) -> SqlResult<Vec<PrivilegeRow>> {
    let snapshot = snapshot(&conn.engine, conn.native)?;
    let all = conn.grants.global & privilege::SELECT != 0;
    let visible = |user: &str, host: &str| {
        all || (user == conn.session.user && host.eq_ignore_ascii_case(&conn.session.host))
    };
    let mut rows = Vec::new();
    let mut push = |user: &str, host: &str, db: Option<&str>, bits: u64| {
        let grantee = super::server_info::grantee(user, host);
        let grantable = bits & privilege::GRANT_OPTION != 0;
        let held: Vec<&'static str> = privilege::NAMES
            .iter()
            .filter(|(bit, _)| bits & bit != 0)
            .map(|(_, name)| *name)
            .collect();
        if held.is_empty() && db.is_none() {
            rows.push((grantee.clone(), None, "USAGE", grantable));
        }
        for name in held {
            rows.push((grantee.clone(), db.map(str::to_owned), name, grantable));
        }
    };
    if schema {
        for (user, host, db, bits) in &snapshot.grants {
            if visible(user, host) {
                push(user, host, Some(db), *bits);
            }
        }
    } else {
        for a in &snapshot.accounts {
            if visible(&a.user, &a.host) {
                push(&a.user, &a.host, None, a.privileges);
            }
        }
    }
    Ok(rows)
}

fn native(error: skarv_client::Error) -> SqlError {
    super::txn::native_error(&error)
}

/// Creates the account tables when missing (another SQL node may create
/// them at the same moment: "exists" is success) and, when there is no
/// account at all, `root`@`localhost` without a password and with every
/// privilege — reachable from this machine only, as MySQL's
/// `--initialize-insecure` makes it.
pub fn bootstrap(_engine: &Arc<Engine>, session: &Session) -> SqlResult<()> {
    for def in [user_table_def(), db_table_def(), version_table_def()] {
        match session.create_table(&def) {
            Ok(_) => {}
            Err(e) if e.code == skarv_client::codes::ALREADY_EXISTS => {}
            Err(e) => return Err(native(e)),
        }
    }
    // The version row, once: an insert that finds it is fine.
    let table = session.table(VERSION_TABLE).map_err(native)?;
    let tx = session.begin().map_err(native)?;
    tx.define(
        Op::insert(
            &table,
            &[
                ("id", Value::UInt(0)),
                ("version", Value::UInt(fresh_version())),
            ],
        )
        .ignore_error(),
    )
    .map_err(native)?;
    tx.execute(ExecMode::Commit).map_err(native)?;
    if load_accounts(session)?.is_empty() {
        let root = Account {
            user: "root".to_owned(),
            host: "localhost".to_owned(),
            credentials: hash_password(""),
            privileges: privilege::ALL_GLOBAL | privilege::GRANT_OPTION,
        };
        match write_account(session, &root, Write::Insert) {
            Ok(()) => tracing::info!("created account 'root'@'localhost' without a password"),
            // Another SQL node made it first.
            Err(e) if e.code == codes::CANNOT_USER => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The hashes stored for a password (both plugins'; the empty password is
/// flagged so that an empty answer passes whatever the plugin).
pub fn hash_password(password: &str) -> Credentials {
    crate::protocol::auth::credentials_for(password.as_bytes())
}

fn bytes_of(value: Option<&Value>) -> Vec<u8> {
    match value {
        Some(Value::Bytes(b)) => b.clone(),
        Some(Value::String(s)) => s.clone().into_bytes(),
        _ => Vec::new(),
    }
}

fn string_of(value: Option<&Value>) -> String {
    String::from_utf8_lossy(&bytes_of(value)).into_owned()
}

fn u64_of(value: Option<&Value>) -> u64 {
    match value {
        Some(Value::UInt(u)) => *u,
        Some(Value::Int(i)) => u64::try_from(*i).unwrap_or(0),
        _ => 0,
    }
}

/// Every account (a scan: accounts are few and logins are not the hot path).
pub fn load_accounts(session: &Session) -> SqlResult<Vec<Account>> {
    let table = session.table(USER_TABLE).map_err(native)?;
    let tx = session.begin().map_err(native)?;
    let mut accounts = Vec::new();
    for row in tx.scan(&table, ScanOptions::default()).map_err(native)? {
        let row = row.map_err(native)?;
        let mut native_hash = [0u8; 20];
        let mut sha2_hash = [0u8; 32];
        let n = bytes_of(row.get("native_hash"));
        let s = bytes_of(row.get("sha2_hash"));
        if n.len() == 20 && s.len() == 32 {
            native_hash.copy_from_slice(&n);
            sha2_hash.copy_from_slice(&s);
        }
        accounts.push(Account {
            user: string_of(row.get("user")),
            host: string_of(row.get("host")),
            credentials: Credentials {
                empty: u64_of(row.get("empty_password")) != 0,
                native: native_hash,
                sha2: sha2_hash,
            },
            privileges: u64_of(row.get("privileges")),
        });
    }
    Ok(accounts)
}

/// Every database grant: (user, host, db, privileges).
fn load_all_db_grants(session: &Session) -> SqlResult<Vec<(String, String, String, u64)>> {
    let table = session.table(DB_TABLE).map_err(native)?;
    let tx = session.begin().map_err(native)?;
    let mut grants = Vec::new();
    for row in tx.scan(&table, ScanOptions::default()).map_err(native)? {
        let row = row.map_err(native)?;
        grants.push((
            string_of(row.get("user")),
            string_of(row.get("host")),
            string_of(row.get("db")),
            u64_of(row.get("privileges")),
        ));
    }
    Ok(grants)
}

/// How to write an account row.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Write {
    /// A new account: 1396 when it exists.
    Insert,
    /// An existing one: 1396 when it does not.
    Update,
}

fn write_account(session: &Session, account: &Account, how: Write) -> SqlResult<()> {
    let table = session.table(USER_TABLE).map_err(native)?;
    let row = [
        ("user", Value::String(account.user.clone())),
        ("host", Value::String(account.host.clone())),
        (
            "empty_password",
            Value::UInt(u64::from(account.credentials.empty)),
        ),
        (
            "native_hash",
            Value::Bytes(account.credentials.native.to_vec()),
        ),
        ("sha2_hash", Value::Bytes(account.credentials.sha2.to_vec())),
        ("privileges", Value::UInt(account.privileges)),
    ];
    let tx = session.begin().map_err(native)?;
    bump_version(session, &tx)?;
    match how {
        Write::Insert => tx.insert(&table, &row),
        Write::Update => {
            let key = [row[0].1.clone(), row[1].1.clone()];
            tx.update(&table, &key, &row[2..])
        }
    }
    .map_err(native)?;
    match tx.execute(ExecMode::Commit) {
        Ok(_) => Ok(()),
        Err(e)
            if e.code == skarv_client::codes::DUPLICATE_KEY
                || e.code == skarv_client::codes::NO_SUCH_ROW =>
        {
            Err(SqlError::new(
                codes::CANNOT_USER,
                format!(
                    "Operation {} failed for '{}'@'{}'",
                    if how == Write::Insert {
                        "CREATE USER"
                    } else {
                        "ALTER USER"
                    },
                    account.user,
                    account.host
                ),
            ))
        }
        Err(e) => Err(native(e)),
    }
}

/// MySQL's host patterns: `%` any run, `_` one character; `localhost`
/// matches the loopback addresses.
fn host_matches(pattern: &str, host: IpAddr) -> bool {
    if pattern.eq_ignore_ascii_case("localhost") {
        return host.is_loopback();
    }
    super::session::like_matches(pattern, &host.to_string())
}

/// How specific a host pattern is (MySQL sorts accounts so the most
/// specific match wins): literal before patterns, longer literal prefix
/// first.
fn host_rank(pattern: &str) -> (u8, usize) {
    match pattern.find(['%', '_']) {
        None => (0, usize::MAX - pattern.len()),
        Some(at) => (1, usize::MAX - at),
    }
}

/// The account a login matches: the most specific host first, then a named
/// user before the anonymous one.
fn match_account<'a>(accounts: &'a [Account], user: &str, host: IpAddr) -> Option<&'a Account> {
    let mut candidates: Vec<&Account> = accounts
        .iter()
        .filter(|a| (a.user == user || a.user.is_empty()) && host_matches(&a.host, host))
        .collect();
    candidates.sort_by_key(|a| (host_rank(&a.host), a.user.is_empty()));
    candidates.first().copied()
}

fn access_denied(login: &Login<'_>) -> SqlError {
    SqlError::new(
        codes::ACCESS_DENIED,
        format!("Access denied for user '{}'@'{}'", login.user, login.host),
    )
}

/// The stored credentials of the account a login matches (1045 when none:
/// the protocol words it the same as a wrong password).
pub fn credentials(conn: &mut Conn<'_>, login: &Login<'_>) -> SqlResult<Credentials> {
    let snapshot = snapshot(&conn.engine, conn.native)?;
    match match_account(&snapshot.accounts, login.user, login.host) {
        Some(account) => Ok(account.credentials.clone()),
        None => Err(access_denied(login)),
    }
}

/// Authentication passed: the session takes the account and its grants,
/// then the database asked for.
pub fn logged_in(conn: &mut Conn<'_>, login: &Login<'_>) -> SqlResult<()> {
    let snapshot = snapshot(&conn.engine, conn.native)?;
    let Some(account) = match_account(&snapshot.accounts, login.user, login.host) else {
        return Err(access_denied(login));
    };
    conn.session
        .set_user(login.user.to_owned(), account.host.clone());
    conn.grants = Grants {
        global: account.privileges,
        databases: snapshot.grants_of(&account.user, &account.host),
    };
    conn.info
        .state
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .user = login.user.to_owned();
    if let Some(db) = login.database.filter(|d| !d.is_empty()) {
        super::session::use_database(conn, db)?;
    }
    Ok(())
}

fn account_of(conn: &Conn<'_>) -> String {
    format!("'{}'@'{}'", conn.session.user, conn.session.host)
}

/// `USE db`'s check: 1044 without any privilege on it. Refreshes the
/// session's grants first (grants apply at the next `USE`, as MySQL's).
pub fn check_database_access(conn: &mut Conn<'_>, db: &str) -> SqlResult<()> {
    if conn.session.user.is_empty() {
        // Before login (COM_CHANGE_USER's reset): nothing to check yet.
        return Ok(());
    }
    let user = conn.session.user.clone();
    let host = conn.session.host.clone();
    let snapshot = snapshot(&conn.engine, conn.native)?;
    if let Some(account) = snapshot
        .accounts
        .iter()
        .find(|a| a.user == user && a.host == host)
    {
        conn.grants.global = account.privileges;
        conn.grants.databases = snapshot.grants_of(&user, &host);
    }
    if db.eq_ignore_ascii_case("information_schema") || conn.grants.on(db) != 0 {
        return Ok(());
    }
    Err(SqlError::new(
        codes::DBACCESS_DENIED,
        format!(
            "Access denied for user {} to database '{db}'",
            account_of(conn)
        ),
    ))
}

/// `KILL` of another account's connection needs SUPER (or PROCESS here).
pub fn may_kill(conn: &Conn<'_>, owner: &str, id: u64) -> SqlResult<()> {
    if owner == conn.session.user
        || conn.grants.global & (privilege::SUPER | privilege::PROCESS) != 0
    {
        return Ok(());
    }
    Err(SqlError::new(
        1095,
        format!("You are not owner of thread {id}"),
    ))
}

/// The privilege a statement needs on each table it names, and the
/// privilege a database-level statement needs on its database.
fn needed(statement: &Statement) -> Option<u64> {
    use privilege::*;
    use Statement as S;
    Some(match statement {
        S::Query(_) => SELECT,
        S::Insert(insert) => {
            if insert.replace_into {
                INSERT | DELETE
            } else {
                INSERT
            }
        }
        S::Update(_) => UPDATE,
        S::Delete(_) => DELETE,
        S::CreateTable(_) | S::CreateDatabase { .. } | S::CreateSchema { .. } => CREATE,
        S::Drop { .. } | S::Truncate(_) => DROP,
        S::AlterTable { .. } | S::RenameTable(_) => ALTER,
        S::CreateIndex(_) => INDEX,
        _ => return None,
    })
}

/// LOAD DATA's check, a statement [`authorize`] does not read: INSERT on
/// its table, and DELETE too for REPLACE.
pub fn authorize_table(conn: &Conn<'_>, db: &str, table: &str, replace: bool) -> SqlResult<()> {
    let need = if replace {
        privilege::INSERT | privilege::DELETE
    } else {
        privilege::INSERT
    };
    let held = conn.grants.global | conn.grants.on(db);
    if held & need == need {
        return Ok(());
    }
    Err(SqlError::new(
        codes::TABLEACCESS_DENIED,
        format!(
            "{} command denied to user {} for table '{table}'",
            privilege_name(need & !held),
            account_of(conn)
        ),
    ))
}

fn privilege_name(bits: u64) -> &'static str {
    privilege::NAMES
        .iter()
        .find(|(b, _)| bits & b != 0)
        .map_or("USAGE", |(_, n)| n)
}

/// Checks a statement against the session's grants before it runs: every
/// table it names (its database: the one named or the current one) needs
/// the statement's privilege there. `information_schema` is readable by
/// everyone; SHOW statements are not checked (their lists are the
/// cluster's, as NDB shows them).
pub fn authorize(conn: &Conn<'_>, statement: &Statement) -> SqlResult<()> {
    let Some(need) = needed(statement) else {
        return Ok(());
    };
    if conn.grants.global & need == need {
        return Ok(());
    }
    let mut denied: Option<SqlError> = None;
    let current = conn.session.database.clone();
    let mut check = |db: Option<String>, table: Option<String>| {
        if denied.is_some() {
            return;
        }
        let Some(db) = db.or_else(|| current.clone()) else {
            return; // 1046 comes from the statement itself.
        };
        if db.eq_ignore_ascii_case("information_schema") && need == privilege::SELECT {
            return;
        }
        // Reads of other tables in a write (INSERT … SELECT) need SELECT;
        // the statement's own privilege is checked on every table named,
        // which is stricter than MySQL only for such reads.
        if conn.grants.on(&db) & need != need {
            let name = privilege_name(need & !conn.grants.on(&db));
            denied = Some(match table {
                Some(table) => SqlError::new(
                    codes::TABLEACCESS_DENIED,
                    format!(
                        "{name} command denied to user {} for table '{table}'",
                        account_of(conn)
                    ),
                ),
                None => SqlError::new(
                    codes::DBACCESS_DENIED,
                    format!(
                        "Access denied for user {} to database '{db}'",
                        account_of(conn)
                    ),
                ),
            });
        }
    };
    match statement {
        Statement::CreateDatabase { db_name, .. } => {
            check(Some(unquote(&db_name.to_string())), None);
        }
        Statement::CreateSchema { schema_name, .. } => {
            check(Some(unquote(&schema_name.to_string())), None);
        }
        _ => {
            let ctes = super::exec::cte::names_defined(statement);
            let _ = sqlparser::ast::visit_relations(statement, |relation| {
                let parts: Vec<String> =
                    relation.0.iter().map(|p| unquote(&p.to_string())).collect();
                match parts.as_slice() {
                    // A common table expression's name is no table.
                    [table] if ctes.iter().any(|c| c.eq_ignore_ascii_case(table)) => {}
                    [table] => check(None, Some(table.clone())),
                    [db, table] => check(Some(db.clone()), Some(table.clone())),
                    _ => {}
                }
                std::ops::ControlFlow::<()>::Continue(())
            });
            if let Statement::Drop {
                object_type, names, ..
            } = statement
            {
                if object_type.to_string().eq_ignore_ascii_case("DATABASE")
                    || object_type.to_string().eq_ignore_ascii_case("SCHEMA")
                {
                    for name in names {
                        check(Some(unquote(&name.to_string())), None);
                    }
                }
            }
        }
    }
    match denied {
        Some(error) => Err(error),
        None => Ok(()),
    }
}

fn unquote(s: &str) -> String {
    s.trim_matches('`').to_owned()
}

// ---- account statements, parsed from their tokens ----

/// A cursor over a statement's significant tokens.
struct Words {
    tokens: Vec<Token>,
    at: usize,
}

impl Words {
    fn new(sql: &str) -> SqlResult<Words> {
        let tokens = Tokenizer::new(&MySqlDialect {}, sql)
            .tokenize()
            .map_err(SqlError::syntax)?
            .into_iter()
            .filter(|t| !matches!(t, Token::Whitespace(_)))
            .collect();
        Ok(Words { tokens, at: 0 })
    }

    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn next(&mut self) -> Option<Token> {
        let token = self.tokens.get(self.at).cloned();
        self.at += usize::from(token.is_some());
        token
    }

    fn near(&self) -> SqlError {
        let rest: Vec<String> = self.tokens[self.at.min(self.tokens.len())..]
            .iter()
            .take(6)
            .map(ToString::to_string)
            .collect();
        SqlError::syntax(format_args!("near '{}'", rest.join(" ")))
    }

    /// Takes a keyword (case-insensitive) if it is next.
    fn keyword(&mut self, word: &str) -> bool {
        match self.peek() {
            Some(Token::Word(w))
                if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(word) =>
            {
                self.at += 1;
                true
            }
            _ => false,
        }
    }

    fn expect(&mut self, word: &str) -> SqlResult<()> {
        if self.keyword(word) {
            Ok(())
        } else {
            Err(self.near())
        }
    }

    fn token(&mut self, token: &Token) -> bool {
        if self.peek() == Some(token) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    /// A name: a bare or quoted word, or a string.
    fn name(&mut self) -> SqlResult<String> {
        match self.next() {
            Some(Token::Word(w)) => Ok(w.value),
            Some(Token::SingleQuotedString(s)) | Some(Token::DoubleQuotedString(s)) => Ok(s),
            _ => {
                self.at = self.at.saturating_sub(1);
                Err(self.near())
            }
        }
    }

    /// `'user'@'host'`, `user@host`, `'user'` (host `%`), `CURRENT_USER`.
    fn account(&mut self, conn: &Conn<'_>) -> SqlResult<(String, String)> {
        if self.keyword("CURRENT_USER") {
            if self.token(&Token::LParen) && !self.token(&Token::RParen) {
                return Err(self.near());
            }
            return Ok((conn.session.user.clone(), conn.session.host.clone()));
        }
        let first = self.name()?;
        if self.token(&Token::AtSign) {
            return Ok((first, self.name()?));
        }
        // The tokenizer keeps `u@h` as one word.
        match first.split_once('@') {
            Some((user, host)) => Ok((user.to_owned(), host.to_owned())),
            None => Ok((first, "%".to_owned())),
        }
    }

    fn done(&self) -> SqlResult<()> {
        if self.at >= self.tokens.len() {
            Ok(())
        } else {
            Err(self.near())
        }
    }
}

fn check_account_name(user: &str, host: &str) -> SqlResult<()> {
    if user.chars().count() > usize::from(USER_CHARS_MAX) {
        return Err(SqlError::new(
            1470,
            format!("String '{user}' is too long for user name (should be no longer than {USER_CHARS_MAX})"),
        ));
    }
    if host.chars().count() > usize::from(HOST_CHARS_MAX) {
        return Err(SqlError::new(
            1470,
            format!("String '{host}' is too long for host name (should be no longer than {HOST_CHARS_MAX})"),
        ));
    }
    Ok(())
}

/// A global privilege a statement needs (`what` names it in the error).
pub(crate) fn require(conn: &Conn<'_>, bits: u64, what: &str) -> SqlResult<()> {
    if conn.grants.global & bits == bits {
        return Ok(());
    }
    Err(SqlError::new(
        codes::SPECIFIC_ACCESS_DENIED,
        format!(
            "Access denied; you need (at least one of) the {what} privilege(s) for this operation"
        ),
    ))
}

/// Runs an account statement recognised from its leading words
/// (`session::Extra::Text`): CREATE/DROP/ALTER/RENAME USER, SET PASSWORD,
/// GRANT, REVOKE, SHOW GRANTS.
pub fn text_statement(
    conn: &mut Conn<'_>,
    head: &str,
    sql: &str,
    more: bool,
    sink: &mut dyn ResultSink,
) -> SqlResult<Answered> {
    let mut w = Words::new(sql)?;
    match head {
        "CREATE USER" => create_user(conn, &mut w),
        "DROP USER" => drop_user(conn, &mut w),
        "ALTER USER" => alter_user(conn, &mut w),
        "SET PASSWORD" => set_password(conn, &mut w),
        "GRANT" => grant(conn, &mut w, true),
        "REVOKE" => grant(conn, &mut w, false),
        "SHOW GRANTS" => show_grants(conn, &mut w, more, sink),
        "SHOW CREATE USER" => show_create_user(conn, &mut w, more, sink),
        other => Err(SqlError::unsupported(format_args!("`{other}`"))),
    }
}

/// `IDENTIFIED [WITH plugin] BY 'password'` (or `AS 'hash'`, refused).
fn identified(w: &mut Words) -> SqlResult<Option<String>> {
    if !w.keyword("IDENTIFIED") {
        return Ok(None);
    }
    if w.keyword("WITH") {
        let plugin = w.name()?;
        if !matches!(
            plugin.to_ascii_lowercase().as_str(),
            "mysql_native_password" | "caching_sha2_password"
        ) {
            return Err(SqlError::new(
                1524,
                format!("Plugin '{plugin}' is not loaded"),
            ));
        }
        if !w.keyword("BY") {
            return Err(SqlError::unsupported(
                "IDENTIFIED WITH … AS 'hash' (give the password with BY)",
            ));
        }
    } else {
        w.expect("BY")?;
    }
    match w.next() {
        Some(Token::SingleQuotedString(s)) | Some(Token::DoubleQuotedString(s)) => Ok(Some(s)),
        _ => Err(w.near()),
    }
}

fn create_user(conn: &mut Conn<'_>, w: &mut Words) -> SqlResult<Answered> {
    require(conn, privilege::CREATE_USER, "CREATE USER")?;
    w.expect("CREATE")?;
    w.expect("USER")?;
    let if_not_exists = w.keyword("IF") && {
        w.expect("NOT")?;
        w.expect("EXISTS")?;
        true
    };
    loop {
        let (user, host) = w.account(conn)?;
        check_account_name(&user, &host)?;
        let password = identified(w)?.unwrap_or_default();
        let account = Account {
            user,
            host,
            credentials: hash_password(&password),
            privileges: 0,
        };
        match write_account(conn.native, &account, Write::Insert) {
            Ok(()) => {}
            Err(e) if if_not_exists && e.code == codes::CANNOT_USER => conn.session.note_only(
                3163,
                format!(
                    "Authorization ID '{}'@'{}' already exists.",
                    account.user, account.host
                ),
            ),
            Err(e) => return Err(e),
        }
        if !w.token(&Token::Comma) {
            break;
        }
    }
    w.done()?;
    Ok(Answered::Ok(OkInfo::default()))
}

fn delete_account(conn: &Conn<'_>, user: &str, host: &str) -> SqlResult<bool> {
    let session = conn.native;
    let users = session.table(USER_TABLE).map_err(native)?;
    let dbs = session.table(DB_TABLE).map_err(native)?;
    let tx = session.begin().map_err(native)?;
    bump_version(session, &tx)?;
    let key = [
        Value::String(user.to_owned()),
        Value::String(host.to_owned()),
    ];
    // A missing row is an answer here, not an error of the transaction.
    let found = tx
        .define(
            Op::read(&users, &key)
                .lock(LockMode::Exclusive)
                .ignore_error(),
        )
        .map_err(native)?;
    let outcome = tx.execute(ExecMode::NoCommit).map_err(native)?;
    if outcome.row(found).is_none() {
        // A dropped transaction is not rolled back: its lock on the
        // version row would stop every later account statement (1205).
        rollback(&tx);
        return Ok(false);
    }
    tx.delete(&users, &key).map_err(native)?;
    let grants: Vec<Vec<Value>> = tx
        .scan(&dbs, ScanOptions::default())
        .map_err(native)?
        .filter_map(|r| r.ok())
        .filter(|r| {
            string_of(r.get("user")) == user && string_of(r.get("host")).eq_ignore_ascii_case(host)
        })
        .map(|r| {
            vec![
                r.get("user").cloned().unwrap_or(Value::Null),
                r.get("host").cloned().unwrap_or(Value::Null),
                r.get("db").cloned().unwrap_or(Value::Null),
            ]
        })
        .collect();
    for key in &grants {
        tx.delete(&dbs, key).map_err(native)?;
    }
    tx.execute(ExecMode::Commit).map_err(native)?;
    Ok(true)
}

fn drop_user(conn: &mut Conn<'_>, w: &mut Words) -> SqlResult<Answered> {
    require(conn, privilege::CREATE_USER, "CREATE USER")?;
    w.expect("DROP")?;
    w.expect("USER")?;
    let if_exists = w.keyword("IF") && {
        w.expect("EXISTS")?;
        true
    };
    loop {
        let (user, host) = w.account(conn)?;
        if !delete_account(conn, &user, &host)? {
            if !if_exists {
                return Err(SqlError::new(
                    codes::CANNOT_USER,
                    format!("Operation DROP USER failed for '{user}'@'{host}'"),
                ));
            }
            conn.session.note_only(
                3162,
                format!("Authorization ID '{user}'@'{host}' does not exist."),
            );
        }
        if !w.token(&Token::Comma) {
            break;
        }
    }
    w.done()?;
    Ok(Answered::Ok(OkInfo::default()))
}

fn change_password(conn: &mut Conn<'_>, user: &str, host: &str, password: &str) -> SqlResult<()> {
    let accounts = load_accounts(conn.native)?;
    let Some(account) = accounts
        .iter()
        .find(|a| a.user == user && a.host.eq_ignore_ascii_case(host))
    else {
        return Err(SqlError::new(
            codes::CANNOT_USER,
            format!("Operation ALTER USER failed for '{user}'@'{host}'"),
        ));
    };
    let mut account = account.clone();
    account.credentials = hash_password(password);
    write_account(conn.native, &account, Write::Update)
}

fn alter_user(conn: &mut Conn<'_>, w: &mut Words) -> SqlResult<Answered> {
    w.expect("ALTER")?;
    w.expect("USER")?;
    let if_exists = w.keyword("IF") && {
        w.expect("EXISTS")?;
        true
    };
    loop {
        let (user, host) = w.account(conn)?;
        let own = user == conn.session.user && host == conn.session.host;
        if !own {
            require(conn, privilege::CREATE_USER, "CREATE USER")?;
        }
        let Some(password) = identified(w)? else {
            return Err(SqlError::unsupported(
                "ALTER USER without IDENTIFIED BY (only passwords can be changed)",
            ));
        };
        match change_password(conn, &user, &host, &password) {
            Err(e) if if_exists && e.code == codes::CANNOT_USER => conn.session.note_only(
                3162,
                format!("Authorization ID '{user}'@'{host}' does not exist."),
            ),
            other => other?,
        }
        if !w.token(&Token::Comma) {
            break;
        }
    }
    w.done()?;
    Ok(Answered::Ok(OkInfo::default()))
}

fn set_password(conn: &mut Conn<'_>, w: &mut Words) -> SqlResult<Answered> {
    w.expect("SET")?;
    w.expect("PASSWORD")?;
    let (user, host) = if w.keyword("FOR") {
        w.account(conn)?
    } else {
        (conn.session.user.clone(), conn.session.host.clone())
    };
    if !(user == conn.session.user && host == conn.session.host) {
        require(conn, privilege::CREATE_USER, "CREATE USER")?;
    }
    if !w.token(&Token::Eq) {
        return Err(w.near());
    }
    let password = match w.next() {
        Some(Token::SingleQuotedString(s)) | Some(Token::DoubleQuotedString(s)) => s,
        _ => return Err(w.near()),
    };
    w.done()?;
    change_password(conn, &user, &host, &password)?;
    Ok(Answered::Ok(OkInfo::default()))
}

/// `priv [, priv …]`.
fn privileges(w: &mut Words) -> SqlResult<u64> {
    use privilege::*;
    let mut bits = 0;
    loop {
        let word = w.name()?.to_ascii_uppercase();
        bits |= match word.as_str() {
            "ALL" => {
                w.keyword("PRIVILEGES");
                ALL_GLOBAL
            }
            "SELECT" => SELECT,
            "INSERT" => INSERT,
            "UPDATE" => UPDATE,
            "DELETE" => DELETE,
            "CREATE" => {
                if w.keyword("USER") {
                    CREATE_USER
                } else {
                    CREATE
                }
            }
            "DROP" => DROP,
            "ALTER" => ALTER,
            "INDEX" => INDEX,
            "PROCESS" => PROCESS,
            "SUPER" => SUPER,
            "USAGE" => 0,
            "GRANT" => {
                w.expect("OPTION")?;
                GRANT_OPTION
            }
            other => {
                return Err(SqlError::unsupported(format_args!(
                    "the privilege {other} (Skarv grants SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, \
                     ALTER, INDEX, PROCESS, SUPER, CREATE USER, ALL)"
                )))
            }
        };
        if !w.token(&Token::Comma) {
            return Ok(bits);
        }
    }
}

/// `*.*` (None) or `db.*` / `*` (the current database).
fn grant_target(conn: &Conn<'_>, w: &mut Words) -> SqlResult<Option<String>> {
    w.keyword("TABLE");
    if w.token(&Token::Mul) {
        if w.token(&Token::Period) {
            if w.token(&Token::Mul) {
                return Ok(None);
            }
            return Err(w.near());
        }
        return match &conn.session.database {
            Some(db) => Ok(Some(db.clone())),
            None => Err(SqlError::new(codes::NO_DB, "No database selected")),
        };
    }
    let db = w.name()?;
    if w.token(&Token::Period) && w.token(&Token::Mul) {
        return Ok(Some(db));
    }
    Err(SqlError::unsupported(
        "grants on single tables or columns (grant on *.* or db.*)",
    ))
}

fn grant(conn: &mut Conn<'_>, w: &mut Words, give: bool) -> SqlResult<Answered> {
    w.expect(if give { "GRANT" } else { "REVOKE" })?;
    let mut bits = privileges(w)?;
    w.expect("ON")?;
    let target = grant_target(conn, w)?;
    w.expect(if give { "TO" } else { "FROM" })?;
    let mut grantees = Vec::new();
    loop {
        let account = w.account(conn)?;
        let password = if give { identified(w)? } else { None };
        grantees.push((account, password));
        if !w.token(&Token::Comma) {
            break;
        }
    }
    if give && w.keyword("WITH") {
        w.expect("GRANT")?;
        w.expect("OPTION")?;
        bits |= privilege::GRANT_OPTION;
    }
    w.done()?;
    if target.is_some() && bits & privilege::ALL_GLOBAL == privilege::ALL_GLOBAL {
        bits = (bits & !privilege::ALL_GLOBAL) | privilege::ALL_DB;
    }
    // The granter needs GRANT OPTION and the privileges it gives.
    let held = match &target {
        None => conn.grants.global,
        Some(db) => conn.grants.on(db),
    };
    if conn.grants.global & privilege::GRANT_OPTION == 0
        || held & bits & !privilege::GRANT_OPTION != bits & !privilege::GRANT_OPTION
    {
        return Err(SqlError::new(
            codes::DBACCESS_DENIED,
            format!(
                "Access denied for user {} to database '{}'",
                account_of(conn),
                target.as_deref().unwrap_or("*")
            ),
        ));
    }
    let accounts = load_accounts(conn.native)?;
    for ((user, host), password) in grantees {
        let Some(account) = accounts
            .iter()
            .find(|a| a.user == user && a.host.eq_ignore_ascii_case(&host))
        else {
            return Err(SqlError::new(
                if give {
                    USER_ROW_MISSING
                } else {
                    codes::NONEXISTING_GRANT
                },
                if give {
                    format!("Can't find any matching row in the user table for '{user}'@'{host}'")
                } else {
                    format!("There is no such grant defined for user '{user}' on host '{host}'")
                },
            ));
        };
        let mut account = account.clone();
        if let Some(password) = password {
            account.credentials = hash_password(&password);
        }
        match &target {
            None => {
                account.privileges = if give {
                    account.privileges | bits
                } else {
                    account.privileges & !bits
                };
                write_account(conn.native, &account, Write::Update)?;
            }
            Some(db) => {
                write_account(conn.native, &account, Write::Update)?;
                write_db_grant(conn.native, &account, db, bits, give)?;
            }
        }
    }
    Ok(Answered::Ok(OkInfo::default()))
}

fn write_db_grant(
    session: &Session,
    account: &Account,
    db: &str,
    bits: u64,
    give: bool,
) -> SqlResult<()> {
    let table: Arc<Table> = session.table(DB_TABLE).map_err(native)?;
    let key = [
        Value::String(account.user.clone()),
        Value::String(account.host.clone()),
        Value::String(db.to_owned()),
    ];
    let tx = session.begin().map_err(native)?;
    bump_version(session, &tx)?;
    let read = tx
        .define(
            Op::read(&table, &key)
                .lock(LockMode::Exclusive)
                .ignore_error(),
        )
        .map_err(native)?;
    let outcome = tx.execute(ExecMode::NoCommit).map_err(native)?;
    let before = outcome.row(read).map_or(0, |r| u64_of(r.get("privileges")));
    let after = if give { before | bits } else { before & !bits };
    if !give && before == 0 {
        rollback(&tx);
        return Err(SqlError::new(
            codes::NONEXISTING_GRANT,
            format!(
                "There is no such grant defined for user '{}' on host '{}'",
                account.user, account.host
            ),
        ));
    }
    if after == 0 {
        tx.delete(&table, &key).map_err(native)?;
    } else {
        let row = [
            ("user", key[0].clone()),
            ("host", key[1].clone()),
            ("db", key[2].clone()),
            ("privileges", Value::UInt(after)),
        ];
        tx.write(&table, &row).map_err(native)?;
    }
    tx.execute(ExecMode::Commit).map_err(native)?;
    Ok(())
}

fn grant_list(bits: u64) -> String {
    if bits & privilege::ALL_GLOBAL == privilege::ALL_GLOBAL {
        return "ALL PRIVILEGES".to_owned();
    }
    let names: Vec<&str> = privilege::NAMES
        .iter()
        .filter(|(b, _)| bits & b != 0)
        .map(|(_, n)| *n)
        .collect();
    if names.is_empty() {
        "USAGE".to_owned()
    } else {
        names.join(", ")
    }
}

fn show_grants(
    conn: &mut Conn<'_>,
    w: &mut Words,
    more: bool,
    sink: &mut dyn ResultSink,
) -> SqlResult<Answered> {
    w.expect("SHOW")?;
    w.expect("GRANTS")?;
    let (user, host) = if w.keyword("FOR") {
        w.account(conn)?
    } else {
        (conn.session.user.clone(), conn.session.host.clone())
    };
    w.done()?;
    let missing = || {
        SqlError::new(
            codes::NONEXISTING_GRANT,
            format!("There is no such grant defined for user '{user}' on host '{host}'"),
        )
    };
    let account = &shown_account(conn, &user, &host, missing)?;
    let with = |bits: u64| {
        if bits & privilege::GRANT_OPTION != 0 {
            " WITH GRANT OPTION"
        } else {
            ""
        }
    };
    let mut lines = vec![format!(
        "GRANT {} ON *.* TO `{}`@`{}`{}",
        grant_list(account.privileges),
        account.user,
        account.host,
        with(account.privileges)
    )];
    let mut dbs = snapshot(&conn.engine, conn.native)?.grants_of(&account.user, &account.host);
    dbs.sort();
    for (db, bits) in dbs {
        let list = if bits & privilege::ALL_DB == privilege::ALL_DB {
            "ALL PRIVILEGES".to_owned()
        } else {
            grant_list(bits)
        };
        lines.push(format!(
            "GRANT {list} ON `{db}`.* TO `{}`@`{}`{}",
            account.user,
            account.host,
            with(bits)
        ));
    }
    let title = format!("Grants for {}@{}", account.user, account.host);
    let columns = [ColumnMeta::expr(
        title,
        ColumnType::VarString,
        charset::UTF8MB4_GENERAL_CI,
        4096,
    )];
    let rows = lines
        .into_iter()
        .map(|l| vec![SqlValue::Bytes(l.into_bytes())])
        .collect();
    send_rows(sink, &columns, rows, more)?;
    Ok(Answered::Done)
}

/// `SHOW CREATE USER [account]` (the session's own without one): the
/// CREATE USER that makes the account again, as MariaDB writes it (the
/// password as its `mysql_native_password` hash).
fn show_create_user(
    conn: &mut Conn<'_>,
    w: &mut Words,
    more: bool,
    sink: &mut dyn ResultSink,
) -> SqlResult<Answered> {
    w.expect("SHOW")?;
    w.expect("CREATE")?;
    w.expect("USER")?;
    let (user, host) = if w.at >= w.tokens.len() {
        (conn.session.user.clone(), conn.session.host.clone())
    } else {
        w.account(conn)?
    };
    w.done()?;
    let missing = || {
        SqlError::new(
            USER_ROW_MISSING,
            "Can't find any matching row in the user table",
        )
    };
    let account = &shown_account(conn, &user, &host, missing)?;
    let mut text = format!("CREATE USER `{}`@`{}`", account.user, account.host);
    if !account.credentials.empty {
        let hash: String = account
            .credentials
            .native
            .iter()
            .map(|b| format!("{b:02X}"))
            .collect();
        text.push_str(&format!(" IDENTIFIED BY PASSWORD '*{hash}'"));
    }
    let title = format!("CREATE USER for {}@{}", account.user, account.host);
    let columns = [ColumnMeta::expr(
        title,
        ColumnType::VarString,
        charset::UTF8MB4_GENERAL_CI,
        4096,
    )];
    send_rows(
        sink,
        &columns,
        vec![vec![SqlValue::Bytes(text.into_bytes())]],
        more,
    )?;
    Ok(Answered::Done)
}

/// The account `user`@`host` a SHOW shows: one's own, or any with the
/// global SELECT (1044 else); `missing` when there is none.
fn shown_account(
    conn: &Conn<'_>,
    user: &str,
    host: &str,
    missing: impl FnOnce() -> SqlError,
) -> SqlResult<Account> {
    let own = user == conn.session.user && host == conn.session.host;
    if !own && conn.grants.global & privilege::SELECT == 0 {
        return Err(SqlError::new(
            codes::DBACCESS_DENIED,
            format!(
                "Access denied for user {} to database 'mysql'",
                account_of(conn)
            ),
        ));
    }
    load_accounts(conn.native)?
        .into_iter()
        .find(|a| a.user == user && a.host.eq_ignore_ascii_case(host))
        .ok_or_else(missing)
}

/// MariaDB's 1133, of an account that is not there.
const USER_ROW_MISSING: u16 = 1133;

/// `io` errors are not account errors; kept for the sink's signature.
#[allow(dead_code)]
fn io_error(e: io::Error) -> SqlError {
    SqlError::new(codes::UNKNOWN, e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn account(user: &str, host: &str) -> Account {
        Account {
            user: user.to_owned(),
            host: host.to_owned(),
            credentials: hash_password(""),
            privileges: 0,
        }
    }

    #[test]
    fn the_most_specific_host_wins() {
        let accounts = [
            account("u", "%"),
            account("u", "127.0.0.1"),
            account("", "localhost"),
        ];
        let local = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let far = IpAddr::V4(Ipv4Addr::new(10, 1, 2, 3));
        assert_eq!(
            match_account(&accounts, "u", local).unwrap().host,
            "127.0.0.1"
        );
        assert_eq!(match_account(&accounts, "u", far).unwrap().host, "%");
        assert_eq!(match_account(&accounts, "x", local).unwrap().user, "");
        assert!(match_account(&accounts, "x", far).is_none());
        // localhost is loopback only: root@localhost is not reachable from elsewhere.
        let root = [account("root", "localhost")];
        assert!(match_account(&root, "root", far).is_none());
        assert!(match_account(&root, "root", local).is_some());
    }

    #[test]
    fn passwords_are_stored_as_the_plugins_hashes() {
        let c = hash_password("secret");
        assert!(!c.empty);
        // SHA1(SHA1("secret")), as MySQL's PASSWORD('secret') without the '*'.
        let hex: String = c.native.iter().map(|b| format!("{b:02X}")).collect();
        assert_eq!(hex, "14E65567ABDB5135D0CFD9A70B3032C179A49EE7");
        assert!(hash_password("").empty);
    }

    #[test]
    fn grants_combine_global_and_database_bits() {
        let g = Grants {
            global: privilege::SELECT,
            databases: vec![("d".into(), privilege::INSERT)],
        };
        assert_eq!(g.on("d"), privilege::SELECT | privilege::INSERT);
        assert_eq!(g.on("e"), privilege::SELECT);
        assert_eq!(
            grant_list(privilege::SELECT | privilege::INSERT),
            "SELECT, INSERT"
        );
        assert_eq!(grant_list(privilege::ALL_GLOBAL), "ALL PRIVILEGES");
    }
}
