//! Views: `CREATE [OR REPLACE] [ALGORITHM=…] [DEFINER=…] [SQL SECURITY …]
//! VIEW v [(cols)] AS SELECT …`, `ALTER VIEW`, `DROP VIEW [IF EXISTS]`,
//! `SHOW CREATE VIEW`. A view is a row of the cluster table
//! [`VIEWS_TABLE`] (its query's text, with the tables it names qualified
//! by their database), so every SQL node sees it and it outlives any SQL
//! node. A SELECT reads a view as a derived table of its query (always
//! materialised, whatever ALGORITHM says). Writes through an updatable
//! view become writes of its table (`exec::through_view`), held to its
//! WHERE by `WITH … CHECK OPTION`.

use schema::{Collation, ColumnType as NativeType, TableDef, Value};
use skarv_client::{ExecMode, Op, ScanOptions};
use sqlparser::ast::{self, ObjectType, Statement};

use super::catalog::{self, retry, system_table, text_of};
use super::{Answered, Conn};
use crate::backend::{OkInfo, ResultSink};
use crate::error::{codes, SqlError, SqlResult};
use crate::value::{charset, ColumnMeta, ColumnType, SqlValue};

/// The cluster table of views: one row per view, keyed by (db, name).
pub const VIEWS_TABLE: &str = "mysql/def/skarv_views";
/// Longest view query kept, in characters.
pub const VIEW_TEXT_CHARS_MAX: u16 = 4_000;
/// Longest list of a view's column names kept, in characters.
const VIEW_COLUMNS_CHARS_MAX: u16 = 1_000;
/// Longest ALGORITHM / SQL SECURITY / DEFINER text kept, in characters.
const VIEW_WORD_CHARS_MAX: u16 = 200;
/// Longest column name, in characters (MariaDB's NAME_CHAR_LEN).
const COLUMN_NAME_CHARS_MAX: usize = 64;
/// What separates a view's column names in its row (no name holds it).
const COLUMN_SEPARATOR: char = '\u{1}';

/// A view as stored.
#[derive(Clone, Debug)]
pub struct View {
    /// Its database.
    pub db: String,
    /// Its name.
    pub name: String,
    /// Its query, tables qualified.
    pub body: String,
    /// The column names given (empty: the query's).
    pub columns: Vec<String>,
    /// `UNDEFINED`, `MERGE` or `TEMPTABLE`.
    pub algorithm: String,
    /// `DEFINER` or `INVOKER`.
    pub security: String,
    /// `user`@`host`.
    pub definer: String,
    /// `WITH [CASCADED | LOCAL] CHECK OPTION`.
    pub check: CheckOption,
}

/// A view's `WITH … CHECK OPTION`: rows written through it must be rows
/// it shows (`exec::through_view`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CheckOption {
    /// None: a row written may fall outside the view.
    #[default]
    None,
    /// `WITH [CASCADED] CHECK OPTION`: the view's WHERE and those of
    /// every view under it.
    Cascaded,
    /// `WITH LOCAL CHECK OPTION`: the view's WHERE, and those of views
    /// under it that have a check option of their own.
    Local,
}

impl CheckOption {
    /// Its word, as SHOW CREATE VIEW and information_schema.VIEWS show it
    /// (`NONE` for none).
    pub fn word(self) -> &'static str {
        match self {
            CheckOption::None => "NONE",
            CheckOption::Cascaded => "CASCADED",
            CheckOption::Local => "LOCAL",
        }
    }
}

impl View {
    /// Its query, parsed.
    pub fn query(&self) -> SqlResult<ast::Query> {
        match super::parse(&self.body)?.into_iter().next() {
            Some(Statement::Query(q)) => Ok(*q),
            _ => Err(SqlError::unsupported(format_args!(
                "the stored query of view '{}.{}'",
                self.db, self.name
            ))),
        }
    }

    /// MySQL's `SHOW CREATE VIEW` text.
    pub fn create_text(&self) -> String {
        let columns = if self.columns.is_empty() {
            String::new()
        } else {
            let names: Vec<String> = self.columns.iter().map(|c| quote(c)).collect();
            format!(" ({})", names.join(","))
        };
        format!(
            "CREATE ALGORITHM={} DEFINER={} SQL SECURITY {} VIEW {}{columns} AS {}",
            self.algorithm,
            self.definer,
            self.security,
            quote(&self.name),
            self.body
        ) + match self.check {
            CheckOption::None => "",
            CheckOption::Cascaded => " WITH CASCADED CHECK OPTION",
            CheckOption::Local => " WITH LOCAL CHECK OPTION",
        }
    }
}

fn quote(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// The definition of [`VIEWS_TABLE`] (made by `catalog::bootstrap`).
pub fn table_def() -> TableDef {
    let text = |max: u16| NativeType::VarChar {
        max,
        collation: Collation::Utf8mb4Bin,
    };
    let name = text(catalog::IDENTIFIER_CHARS_MAX as u16);
    TableDef::new(
        VIEWS_TABLE,
        0,
        vec![
            schema::Column::new("db", name),
            schema::Column::new("name", name),
            schema::Column::new("body", text(VIEW_TEXT_CHARS_MAX)),
            schema::Column::new("columns", text(VIEW_COLUMNS_CHARS_MAX)),
            schema::Column::new("algorithm", text(VIEW_WORD_CHARS_MAX)),
            schema::Column::new("security", text(VIEW_WORD_CHARS_MAX)),
            schema::Column::new("definer", text(VIEW_WORD_CHARS_MAX)),
        ],
    )
    .primary_key(vec![0, 1])
    .partitions(0)
}

/// The `algorithm` column holds the ALGORITHM and, after a space, the
/// check option's word when it has one (`UNDEFINED CASCADED`): the table's
/// columns stay as older builds made them.
fn view_of(row: &skarv_client::Row) -> View {
    let columns = text_of(row, "columns");
    let stored = text_of(row, "algorithm");
    let (algorithm, check) = match stored.split_once(' ') {
        Some((a, "CASCADED")) => (a.to_owned(), CheckOption::Cascaded),
        Some((a, "LOCAL")) => (a.to_owned(), CheckOption::Local),
        _ => (stored, CheckOption::None),
    };
    View {
        db: text_of(row, "db"),
        name: text_of(row, "name"),
        body: text_of(row, "body"),
        columns: if columns.is_empty() {
            Vec::new()
        } else {
            columns.split(COLUMN_SEPARATOR).map(str::to_owned).collect()
        },
        algorithm,
        security: text_of(row, "security"),
        definer: text_of(row, "definer"),
        check,
    }
}

/// The view `db.name`, if there is one.
pub fn find(conn: &Conn<'_>, db: &str, name: &str) -> SqlResult<Option<View>> {
    let table = system_table(conn, VIEWS_TABLE)?;
    let key = [Value::String(db.to_owned()), Value::String(name.to_owned())];
    let row = retry(|| {
        let tx = conn.native.begin()?;
        let read = tx.define(Op::read(&table, &key).ignore_error())?;
        let mut outcome = tx.execute(ExecMode::Commit)?;
        Ok(outcome.take_row(read))
    })?;
    Ok(row.as_ref().map(view_of))
}

/// Every view (of `db` when given), by database and name.
pub fn list(conn: &Conn<'_>, db: Option<&str>) -> SqlResult<Vec<View>> {
    let table = system_table(conn, VIEWS_TABLE)?;
    let mut out = retry(|| {
        let tx = conn.native.begin()?;
        let mut out = Vec::new();
        for row in tx.scan(&table, ScanOptions::default())? {
            out.push(view_of(&row?));
        }
        Ok(out)
    })?;
    out.retain(|v| db.is_none_or(|d| v.db == d));
    out.sort_by(|a, b| (&a.db, &a.name).cmp(&(&b.db, &b.name)));
    Ok(out)
}

/// The view a FROM name names, when it names no table (the caller tried
/// the table first: a view costs a read only where a table is missing).
pub fn for_name(conn: &Conn<'_>, name: &ast::ObjectName) -> SqlResult<Option<View>> {
    let (db, view) = super::ddl::object_name(name)?;
    let Some(db) = db.or_else(|| conn.session.database.clone()) else {
        return Ok(None);
    };
    find(conn, &db, &view)
}

/// `CREATE VIEW`, `ALTER VIEW` and `DROP VIEW`; `check`: the `WITH …
/// CHECK OPTION` the session took off the text (which the parser does not
/// read).
pub fn statement(
    conn: &mut Conn<'_>,
    statement: &Statement,
    check: CheckOption,
) -> SqlResult<Answered> {
    match statement {
        Statement::CreateView(cv) => {
            if cv.materialized || cv.temporary || cv.to.is_some() {
                return Err(SqlError::unsupported(format_args!(
                    "`{}`",
                    super::stdx_truncate(&statement.to_string(), 60)
                )));
            }
            let params = cv.params.as_ref();
            let mut view = define(
                conn,
                &cv.name,
                &cv.columns
                    .iter()
                    .map(|c| c.name.value.clone())
                    .collect::<Vec<_>>(),
                &cv.query,
                params
                    .and_then(|p| p.algorithm.as_ref())
                    .map(|a| a.to_string()),
                params
                    .and_then(|p| p.security.as_ref())
                    .map(|s| s.to_string()),
                params
                    .and_then(|p| p.definer.as_ref())
                    .map(|d| d.to_string()),
            )?;
            view.check = checked(&view, check)?;
            store(conn, &view, cv.or_replace, false)?;
            Ok(Answered::Ok(OkInfo::default()))
        }
        Statement::AlterView(ast::AlterView {
            name,
            operation: ast::AlterViewOperation::As { columns, query, .. },
            ..
        }) => {
            let names: Vec<String> = columns.iter().map(|c| c.value.clone()).collect();
            let mut view = define(conn, name, &names, query, None, None, None)?;
            view.check = checked(&view, check)?;
            store(conn, &view, true, true)?;
            Ok(Answered::Ok(OkInfo::default()))
        }
        Statement::Drop {
            object_type: ObjectType::View,
            if_exists,
            names,
            ..
        } => drop(conn, names, *if_exists),
        other => Err(SqlError::unsupported(format_args!("`{other}`"))),
    }
}

/// `check` for `view`: a check option needs a view rows can be written
/// through (1368, MySQL's).
fn checked(view: &View, check: CheckOption) -> SqlResult<CheckOption> {
    if check != CheckOption::None && !super::exec::through_view::is_updatable(view) {
        return Err(SqlError::new(
            codes::VIEW_NONUPD_CHECK,
            format!(
                "CHECK OPTION on non-updatable view `{}`.`{}`",
                view.db, view.name
            ),
        ));
    }
    Ok(check)
}

/// A view of `query` named `name`: its query checked (it must plan), its
/// tables qualified.
fn define(
    conn: &mut Conn<'_>,
    name: &ast::ObjectName,
    columns: &[String],
    query: &ast::Query,
    algorithm: Option<String>,
    security: Option<String>,
    definer: Option<String>,
) -> SqlResult<View> {
    let (db, view) = super::ddl::object_name(name)?;
    let Some(db) = db.or_else(|| conn.session.database.clone()) else {
        return Err(SqlError::new(codes::NO_DB, "No database selected"));
    };
    catalog::check_name(&view, false)?;
    catalog::database(conn, &db)?;
    // The query's tables, qualified by the database they are in now (not
    // the names its WITH gives).
    let mut query = query.clone();
    let ctes = super::exec::cte::names_defined(&query);
    let _ = ast::visit_relations_mut(&mut query, |relation| {
        let cte = match relation.0.as_slice() {
            [p] => p
                .as_ident()
                .is_some_and(|i| ctes.iter().any(|c| c.eq_ignore_ascii_case(&i.value))),
            _ => false,
        };
        if relation.0.len() == 1 && !cte {
            relation
                .0
                .insert(0, ast::ObjectNamePart::Identifier(ast::Ident::new(&db)));
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    // It must plan: unknown tables and columns fail here, as in MySQL.
    let m = super::exec::plan_only(conn, &query)?;
    if !columns.is_empty() && columns.len() != m.len() {
        return Err(SqlError::new(
            codes::VIEW_WRONG_LIST,
            "View's SELECT and view's field list have different column counts",
        ));
    }
    // The items named by their text keep the text's names in the body
    // kept (which is written anew); the first SELECT's get the view's
    // column names when it has no list of its own.
    let written = super::exec::statement_text(conn);
    if columns.is_empty() {
        let names: Vec<String> = m.iter().map(|c| c.name.to_string()).collect();
        let items = first_select(&mut query.body).and_then(|s| items_of(s, names.len()));
        let names = column_names(items.as_deref(), names)?;
        super::exec::alias_written_names(&mut query, &written);
        if let (Some(s), Some(items)) = (first_select(&mut query.body), &items) {
            name_items(s, &names, items);
        }
    } else {
        unique_names(columns.iter().map(String::as_str))?;
        super::exec::alias_written_names(&mut query, &written);
    }
    let body = query.to_string();
    if body.chars().count() > usize::from(VIEW_TEXT_CHARS_MAX) {
        return Err(SqlError::unsupported(format_args!(
            "views whose query is longer than {VIEW_TEXT_CHARS_MAX} characters"
        )));
    }
    let definer = definer.unwrap_or_else(|| {
        let host = if conn.session.host.is_empty() {
            "localhost".to_owned()
        } else {
            conn.session.host.clone()
        };
        format!("`{}`@`{host}`", conn.session.user)
    });
    Ok(View {
        db,
        name: view,
        body,
        columns: columns.to_vec(),
        algorithm: algorithm.unwrap_or_else(|| "UNDEFINED".to_owned()),
        security: security.unwrap_or_else(|| "DEFINER".to_owned()),
        definer,
        check: CheckOption::None,
    })
}

/// 1060 for two names alike (case aside).
fn unique_names<'n>(names: impl Iterator<Item = &'n str>) -> SqlResult<()> {
    let mut seen: Vec<&str> = Vec::new();
    for n in names {
        if seen.iter().any(|o| o.eq_ignore_ascii_case(n)) {
            return Err(SqlError::new(
                codes::DUP_FIELDNAME,
                format!("Duplicate column name '{n}'"),
            ));
        }
        seen.push(n);
    }
    Ok(())
}

/// The first SELECT of a query's body: the one that names its columns.
fn first_select(set: &mut ast::SetExpr) -> Option<&mut ast::Select> {
    match set {
        ast::SetExpr::Select(s) => Some(s),
        ast::SetExpr::SetOperation { left, .. } => first_select(left),
        ast::SetExpr::Query(q) => first_select(&mut q.body),
        _ => None,
    }
}

/// Per item of a view's first SELECT: the column it gives (the first of
/// a `*`'s) and whether it is named by its text (neither a column nor an
/// alias). None where the items cannot be matched to the `columns`
/// columns (`*` twice).
fn items_of(s: &ast::Select, columns: usize) -> Option<Vec<(usize, bool)>> {
    let star = |i: &ast::SelectItem| {
        matches!(
            i,
            ast::SelectItem::Wildcard(_) | ast::SelectItem::QualifiedWildcard(..)
        )
    };
    let stars = s.projection.iter().filter(|i| star(i)).count();
    if stars > 1 {
        return None;
    }
    // The columns one `*` gives.
    let starred = (columns + stars).checked_sub(s.projection.len())?;
    let mut column = 0;
    let mut items = Vec::with_capacity(s.projection.len());
    for item in &s.projection {
        let (width, text) = match item {
            i if star(i) => (starred, false),
            ast::SelectItem::UnnamedExpr(ast::Expr::Identifier(i)) => (1, i.value.starts_with('@')),
            ast::SelectItem::UnnamedExpr(ast::Expr::CompoundIdentifier(p)) => {
                (1, p.first().is_some_and(|p| p.value.starts_with('@')))
            }
            ast::SelectItem::UnnamedExpr(_) => (1, true),
            ast::SelectItem::ExprWithAlias { .. } => (1, false),
            _ => return None,
        };
        items.push((column, text));
        column += width;
    }
    (column == columns).then_some(items)
}

/// A view's column names from its query's (`names`), as MariaDB makes
/// them when the view has no list (`items`: [`items_of`] its first
/// SELECT; None: the names as they are): an item named by its text
/// whose name is no valid column name (longer than 64 characters, empty,
/// or ending in a space) is `Name_exp_<position>`, and one whose name an
/// earlier column has (or that has an earlier such item's name) is
/// renamed `My_exp_<name>`, `My_exp_1_<name>`, …. Two columns or aliases
/// of one name are 1060.
fn column_names(items: Option<&[(usize, bool)]>, mut names: Vec<String>) -> SqlResult<Vec<String>> {
    let Some(items) = items else {
        unique_names(names.iter().map(String::as_str))?;
        return Ok(names);
    };
    // Per column: whether it is named by its text.
    let mut text = vec![false; names.len()];
    for &(column, named) in items {
        text[column] |= named;
    }
    for (at, name) in names.iter_mut().enumerate() {
        let bad =
            name.is_empty() || name.ends_with(' ') || name.chars().count() > COLUMN_NAME_CHARS_MAX;
        if text[at] && bad {
            *name = format!("Name_exp_{}", at + 1);
        }
    }
    for at in 0..names.len() {
        for before in 0..at {
            if !names[at].eq_ignore_ascii_case(&names[before]) {
                continue;
            }
            if text[at] {
                names[at] = unique_expression_name(&names, at);
            } else if text[before] {
                names[before] = unique_expression_name(&names, before);
            } else {
                return Err(SqlError::new(
                    codes::DUP_FIELDNAME,
                    format!("Duplicate column name '{}'", names[at]),
                ));
            }
        }
    }
    Ok(names)
}

/// MariaDB's name for the column `at` named by its text that another
/// has the name of: the first of `My_exp_<name>`, `My_exp_1_<name>`, …
/// that no other column has (64 characters at most).
fn unique_expression_name(names: &[String], at: usize) -> String {
    let name = &names[at];
    (0..)
        .map(|attempt: usize| {
            let n = if attempt == 0 {
                format!("My_exp_{name}")
            } else {
                format!("My_exp_{attempt}_{name}")
            };
            n.chars().take(COLUMN_NAME_CHARS_MAX).collect::<String>()
        })
        .find(|n| {
            names
                .iter()
                .enumerate()
                .all(|(i, o)| i == at || !o.eq_ignore_ascii_case(n))
        })
        .expect("some attempt is free: there are fewer names than attempts")
}

/// Gives the first SELECT's items named by their text (`items`, as
/// [`items_of`] found them before they were given their written names)
/// the view's column names as aliases.
fn name_items(s: &mut ast::Select, names: &[String], items: &[(usize, bool)]) {
    for (item, &(column, text)) in s.projection.iter_mut().zip(items) {
        if let (
            true,
            ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. },
        ) = (text, &*item)
        {
            *item = ast::SelectItem::ExprWithAlias {
                expr: e.clone(),
                alias: ast::Ident::with_quote('`', names[column].as_str()),
            };
        }
    }
}

/// Keeps a view: `replace` allows one of the name already; `must_exist`
/// (ALTER VIEW) wants one. A table of the name: 1050 (CREATE) or 1347.
fn store(conn: &Conn<'_>, view: &View, replace: bool, must_exist: bool) -> SqlResult<()> {
    if catalog::table(conn, Some(&view.db), &view.name).is_ok() {
        if must_exist {
            return Err(not_view(&view.db, &view.name));
        }
        return Err(SqlError::new(
            codes::TABLE_EXISTS,
            format!("Table '{}' already exists", view.name),
        ));
    }
    let existing = find(conn, &view.db, &view.name)?;
    if must_exist && existing.is_none() {
        return Err(SqlError::new(
            codes::TABLE_NOT_FOUND,
            format!("Table '{}.{}' doesn't exist", view.db, view.name),
        ));
    }
    if existing.is_some() && !replace {
        return Err(SqlError::new(
            codes::TABLE_EXISTS,
            format!("Table '{}' already exists", view.name),
        ));
    }
    let table = system_table(conn, VIEWS_TABLE)?;
    let joined = view
        .columns
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(&COLUMN_SEPARATOR.to_string());
    let row = [
        ("db", Value::String(view.db.clone())),
        ("name", Value::String(view.name.clone())),
        ("body", Value::String(view.body.clone())),
        ("columns", Value::String(joined)),
        (
            "algorithm",
            Value::String(match view.check {
                CheckOption::None => view.algorithm.clone(),
                check => format!("{} {}", view.algorithm, check.word()),
            }),
        ),
        ("security", Value::String(view.security.clone())),
        ("definer", Value::String(view.definer.clone())),
    ];
    let created = retry(|| {
        let tx = conn.native.begin()?;
        if replace {
            tx.write(&table, &row)?;
        } else {
            tx.insert(&table, &row)?;
        }
        match tx.execute(ExecMode::Commit) {
            Ok(_) => Ok(true),
            Err(e) if e.code == skarv_client::codes::DUPLICATE_KEY => Ok(false),
            Err(e) => Err(e),
        }
    })?;
    if !created {
        // Another SQL node made it in between.
        return Err(SqlError::new(
            codes::TABLE_EXISTS,
            format!("Table '{}' already exists", view.name),
        ));
    }
    Ok(())
}

/// MySQL's 1347.
pub fn not_view(db: &str, name: &str) -> SqlError {
    SqlError::new(codes::WRONG_OBJECT, format!("'{db}.{name}' is not VIEW"))
}

fn drop(conn: &mut Conn<'_>, names: &[ast::ObjectName], if_exists: bool) -> SqlResult<Answered> {
    let table = system_table(conn, VIEWS_TABLE)?;
    let mut missing = Vec::new();
    for name in names {
        let (db, view) = super::ddl::object_name(name)?;
        let Some(db) = db.or_else(|| conn.session.database.clone()) else {
            return Err(SqlError::new(codes::NO_DB, "No database selected"));
        };
        if find(conn, &db, &view)?.is_none() {
            if catalog::table(conn, Some(&db), &view).is_ok() {
                return Err(not_view(&db, &view));
            }
            missing.push(format!("{db}.{view}"));
            continue;
        }
        delete_row(conn, &table, &db, &view)?;
    }
    if !missing.is_empty() {
        let message = format!("Unknown table '{}'", missing.join(","));
        if !if_exists {
            return Err(SqlError::new(codes::BAD_TABLE, message));
        }
        for m in missing {
            catalog::note(conn, codes::BAD_TABLE, format!("Unknown table '{m}'"));
        }
    }
    Ok(Answered::Ok(OkInfo::default()))
}

/// Deletes the row of view `db.name` (gone already is fine: another SQL
/// node dropped it first).
fn delete_row(
    conn: &Conn<'_>,
    table: &std::sync::Arc<skarv_client::Table>,
    db: &str,
    name: &str,
) -> SqlResult<()> {
    let key = [Value::String(db.to_owned()), Value::String(name.to_owned())];
    retry(|| {
        let tx = conn.native.begin()?;
        tx.delete(table, &key)?;
        match tx.execute(ExecMode::Commit) {
            Ok(_) => Ok(()),
            Err(e) if e.code == skarv_client::codes::NO_SUCH_ROW => Ok(()),
            Err(e) => Err(e),
        }
    })
}

/// Drops every view of a database (DROP DATABASE).
pub fn drop_database(conn: &Conn<'_>, db: &str) -> SqlResult<()> {
    let table = system_table(conn, VIEWS_TABLE)?;
    for v in list(conn, Some(db))? {
        delete_row(conn, &table, &v.db, &v.name)?;
    }
    Ok(())
}

/// `SHOW CREATE VIEW v`: 1347 for a table, 1146 for nothing.
pub fn show_create(
    conn: &mut Conn<'_>,
    name: &ast::ObjectName,
    more: bool,
    sink: &mut dyn ResultSink,
) -> SqlResult<Answered> {
    let (db, view) = super::ddl::object_name(name)?;
    let Some(db) = db.or_else(|| conn.session.database.clone()) else {
        return Err(SqlError::new(codes::NO_DB, "No database selected"));
    };
    let Some(v) = find(conn, &db, &view)? else {
        if catalog::table(conn, Some(&db), &view).is_ok() {
            return Err(not_view(&db, &view));
        }
        return Err(SqlError::new(
            codes::TABLE_NOT_FOUND,
            format!("Table '{db}.{view}' doesn't exist"),
        ));
    };
    let col = |name: &str, chars: u32| {
        ColumnMeta::expr(
            name,
            ColumnType::VarString,
            charset::UTF8MB4_GENERAL_CI,
            chars * 4,
        )
    };
    let columns = [
        col("View", 64),
        col("Create View", 4096),
        col("character_set_client", 32),
        col("collation_connection", 32),
    ];
    let text = |s: String| SqlValue::Bytes(s.into_bytes());
    let rows = vec![vec![
        text(v.name.clone()),
        text(v.create_text()),
        text("utf8mb4".to_owned()),
        text("utf8mb4_general_ci".to_owned()),
    ]];
    super::send_rows(sink, &columns, rows, more)?;
    Ok(Answered::Done)
}
