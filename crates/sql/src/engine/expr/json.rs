//! JSON functions over text, as MariaDB's: a JSON value is a string (a
//! `JSON` column is LONGTEXT in utf8mb4_bin), parsed when a function needs
//! its structure. What they return is written as MariaDB writes it
//! (`{"a": 1, "b": [1, 2]}`: a space after `:` and `,`), numbers as their
//! text, members in document order.
//!
//! The parser is ours, not serde_json's: the output must keep a number's
//! text (`2.50`) and the members' order, which serde_json gives only under
//! features that would change it for the whole workspace.

use super::eval::Ctx;
use super::{Expr, Kind, Val};
use crate::error::SqlResult;

/// Deepest nesting of arrays and objects parsed (MariaDB's limit, 4040).
pub const JSON_DEPTH_MAX: usize = 32;
/// Most path legs in one JSON path.
pub const JSON_PATH_LEGS_MAX: usize = 64;

/// A JSON function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JsonFn {
    Valid,
    Type,
    Extract,
    Unquote,
    Quote,
    Object,
    Array,
    Length,
    Keys,
    Depth,
    ContainsPath,
    Contains,
    Set,
    Insert,
    Replace,
    Remove,
    ArrayAppend,
    ArrayInsert,
    MergePatch,
    /// JSON_MERGE_PRESERVE, and JSON_MERGE (MariaDB's deprecated alias,
    /// which reports itself by this name too).
    MergePreserve,
    Search,
    /// JSON_VALUE(doc, path): the scalar at the path, unquoted.
    Value,
    /// MariaDB's JSON_QUERY(doc, path): the object or array there, as
    /// written.
    Query,
    /// MariaDB's JSON_EXISTS(doc, path).
    Exists,
    /// JSON_OVERLAPS(a, b): a value in common.
    Overlaps,
    /// MariaDB's JSON_EQUALS(a, b): the same JSON value.
    Equals,
    /// MariaDB's JSON_NORMALIZE: members sorted, numbers as doubles.
    Normalize,
    /// MariaDB's JSON_COMPACT: no white space.
    Compact,
    /// MariaDB's JSON_LOOSE: its usual spacing.
    Loose,
    /// MariaDB's JSON_DETAILED (and JSON_PRETTY): one value a line.
    Detailed,
}

impl JsonFn {
    /// The function a name calls, and its fewest and most arguments.
    pub fn by_name(name: &str) -> Option<(JsonFn, usize, usize)> {
        Some(match name {
            "JSON_VALID" => (JsonFn::Valid, 1, 1),
            "JSON_TYPE" => (JsonFn::Type, 1, 1),
            "JSON_EXTRACT" => (JsonFn::Extract, 2, usize::MAX),
            "JSON_UNQUOTE" => (JsonFn::Unquote, 1, 1),
            "JSON_QUOTE" => (JsonFn::Quote, 1, 1),
            "JSON_OBJECT" => (JsonFn::Object, 0, usize::MAX),
            "JSON_ARRAY" => (JsonFn::Array, 0, usize::MAX),
            "JSON_LENGTH" => (JsonFn::Length, 1, 2),
            "JSON_KEYS" => (JsonFn::Keys, 1, 2),
            "JSON_DEPTH" => (JsonFn::Depth, 1, 1),
            "JSON_CONTAINS_PATH" => (JsonFn::ContainsPath, 3, usize::MAX),
            "JSON_CONTAINS" => (JsonFn::Contains, 2, 3),
            "JSON_SET" => (JsonFn::Set, 3, usize::MAX),
            "JSON_INSERT" => (JsonFn::Insert, 3, usize::MAX),
            "JSON_REPLACE" => (JsonFn::Replace, 3, usize::MAX),
            "JSON_REMOVE" => (JsonFn::Remove, 2, usize::MAX),
            "JSON_ARRAY_APPEND" => (JsonFn::ArrayAppend, 3, usize::MAX),
            "JSON_ARRAY_INSERT" => (JsonFn::ArrayInsert, 3, usize::MAX),
            "JSON_MERGE_PATCH" => (JsonFn::MergePatch, 2, usize::MAX),
            "JSON_MERGE_PRESERVE" | "JSON_MERGE" => (JsonFn::MergePreserve, 2, usize::MAX),
            "JSON_SEARCH" => (JsonFn::Search, 3, usize::MAX),
            "JSON_VALUE" => (JsonFn::Value, 2, 2),
            "JSON_QUERY" => (JsonFn::Query, 2, 2),
            "JSON_EXISTS" => (JsonFn::Exists, 2, 2),
            "JSON_OVERLAPS" => (JsonFn::Overlaps, 2, 2),
            "JSON_EQUALS" => (JsonFn::Equals, 2, 2),
            "JSON_NORMALIZE" => (JsonFn::Normalize, 1, 1),
            "JSON_COMPACT" => (JsonFn::Compact, 1, 1),
            "JSON_LOOSE" => (JsonFn::Loose, 1, 1),
            "JSON_DETAILED" | "JSON_PRETTY" => (JsonFn::Detailed, 1, 2),
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            JsonFn::Valid => "json_valid",
            JsonFn::Type => "json_type",
            JsonFn::Extract => "json_extract",
            JsonFn::Unquote => "json_unquote",
            JsonFn::Quote => "json_quote",
            JsonFn::Object => "json_object",
            JsonFn::Array => "json_array",
            JsonFn::Length => "json_length",
            JsonFn::Keys => "json_keys",
            JsonFn::Depth => "json_depth",
            JsonFn::ContainsPath => "json_contains_path",
            JsonFn::Contains => "json_contains",
            JsonFn::Set => "json_set",
            JsonFn::Insert => "json_insert",
            JsonFn::Replace => "json_replace",
            JsonFn::Remove => "json_remove",
            JsonFn::ArrayAppend => "json_array_append",
            JsonFn::ArrayInsert => "json_array_insert",
            JsonFn::MergePatch => "json_merge_patch",
            JsonFn::MergePreserve => "json_merge_preserve",
            JsonFn::Search => "json_search",
            JsonFn::Value => "json_value",
            JsonFn::Query => "json_query",
            JsonFn::Exists => "json_exists",
            JsonFn::Overlaps => "json_overlaps",
            JsonFn::Equals => "json_equals",
            JsonFn::Normalize => "json_normalize",
            JsonFn::Compact => "json_compact",
            JsonFn::Loose => "json_loose",
            JsonFn::Detailed => "json_detailed",
        }
    }

    /// The kind of its values.
    pub fn kind(self) -> Kind {
        match self {
            JsonFn::Valid
            | JsonFn::Length
            | JsonFn::Depth
            | JsonFn::ContainsPath
            | JsonFn::Contains
            | JsonFn::Exists
            | JsonFn::Overlaps
            | JsonFn::Equals => Kind::Int { unsigned: false },
            _ => Kind::Str {
                collation: Some(schema::Collation::Utf8mb4Bin),
            },
        }
    }

    /// Whether the function's value is JSON text that another JSON
    /// function takes as JSON (nested), not as a string to quote.
    fn gives_json(self) -> bool {
        matches!(
            self,
            JsonFn::Extract
                | JsonFn::Quote
                | JsonFn::Object
                | JsonFn::Array
                | JsonFn::Keys
                | JsonFn::Set
                | JsonFn::Insert
                | JsonFn::Replace
                | JsonFn::Remove
                | JsonFn::ArrayAppend
                | JsonFn::ArrayInsert
                | JsonFn::MergePatch
                | JsonFn::MergePreserve
                | JsonFn::Search
                | JsonFn::Query
                | JsonFn::Normalize
                | JsonFn::Compact
                | JsonFn::Loose
                | JsonFn::Detailed
        )
    }

    /// Evaluates the call; `v`: its arguments' values.
    pub fn eval(self, args: &[Expr], v: &[Val], ctx: &mut Ctx<'_>) -> SqlResult<Val> {
        let text = |i: usize| v[i].to_text();
        Ok(match self {
            JsonFn::Valid => match &v[0] {
                Val::Null => Val::Null,
                x => {
                    let text = x.to_text();
                    let valid = parse(&text).map_err(|at| {
                        let (code, message) = self.syntax_error(1, &text, at);
                        ctx.note(code, message);
                    });
                    Val::Int(i64::from(valid.is_ok()))
                }
            },
            JsonFn::Object => {
                if v.len() % 2 == 1 {
                    return Err(crate::error::SqlError::new(
                        1582,
                        "Incorrect parameter count in the call to native function 'JSON_OBJECT'",
                    ));
                }
                let mut members = Vec::with_capacity(v.len() / 2);
                for (i, pair) in v.chunks(2).enumerate() {
                    // A NULL name is the empty one, as MariaDB writes it.
                    let name = if pair[0].is_null() {
                        String::new()
                    } else {
                        pair[0].to_text()
                    };
                    members.push((name, of_sql(&args[2 * i + 1], &pair[1])));
                }
                Val::str(write(&Json::Object(members)))
            }
            JsonFn::Array => {
                let items = args.iter().zip(v).map(|(a, x)| of_sql(a, x)).collect();
                Val::str(write(&Json::Array(items)))
            }
            JsonFn::Quote => match &v[0] {
                Val::Null => Val::Null,
                x => Val::str(write(&Json::String(x.to_text()))),
            },
            JsonFn::Set
            | JsonFn::Insert
            | JsonFn::Replace
            | JsonFn::ArrayAppend
            | JsonFn::ArrayInsert
                if v.len().is_multiple_of(2) =>
            {
                return Err(crate::error::SqlError::new(
                    1582,
                    format!(
                        "Incorrect parameter count in the call to native function '{}'",
                        self.name().to_ascii_uppercase()
                    ),
                ));
            }
            // Their values may be NULL (JSON null); their document and
            // paths not.
            JsonFn::Set | JsonFn::Insert | JsonFn::Replace | JsonFn::ArrayAppend => {
                if v[0].is_null() || v.iter().skip(1).step_by(2).any(Val::is_null) {
                    return Ok(Val::Null);
                }
                let Some(mut doc) = self.document(v, 0, ctx) else {
                    return Ok(Val::Null);
                };
                for i in (1..v.len()).step_by(2) {
                    let Some(path) = self.exact_path(&v[i], i + 1, ctx) else {
                        return Ok(Val::Null);
                    };
                    let value = of_sql(&args[i + 1], &v[i + 1]);
                    self.change(&mut doc, &path, value);
                }
                Val::str(write(&doc))
            }
            JsonFn::ArrayInsert => {
                if v[0].is_null() || v.iter().skip(1).step_by(2).any(Val::is_null) {
                    return Ok(Val::Null);
                }
                // MariaDB reads every path before the document.
                let mut paths = Vec::with_capacity(v.len() / 2);
                for i in (1..v.len()).step_by(2) {
                    let Some(path) = self.exact_path(&v[i], i + 1, ctx) else {
                        return Ok(Val::Null);
                    };
                    paths.push(path);
                }
                let Some(mut doc) = self.document(v, 0, ctx) else {
                    return Ok(Val::Null);
                };
                for (k, path) in paths.iter().enumerate() {
                    // The path must name an array's element; else NULL,
                    // without a warning, as MariaDB answers.
                    let Some((Leg::Index(n), parent)) = path.split_last() else {
                        return Ok(Val::Null);
                    };
                    // A parent that is missing or no array: unchanged.
                    if let Some(Json::Array(items)) = locate(&mut doc, parent) {
                        // Here `last` is past the last element, as
                        // MariaDB's (`$[last]` appends).
                        let at = match *n {
                            At::Start(n) => n.min(items.len()),
                            At::End(k) => items.len().saturating_sub(k),
                        };
                        items.insert(at, of_sql(&args[2 * k + 2], &v[2 * k + 2]));
                    }
                }
                Val::str(write(&doc))
            }
            JsonFn::MergePatch => {
                // RFC 7396, as MariaDB applies it: a NULL argument makes the
                // result NULL until a patch that is no object replaces it.
                let mut merged: Option<Json> = None;
                for (i, x) in v.iter().enumerate() {
                    let patch = match x {
                        Val::Null => None,
                        _ => match self.document(v, i, ctx) {
                            Some(j) => Some(j),
                            None => return Ok(Val::Null),
                        },
                    };
                    merged = match (merged, patch) {
                        (_, None) => None,
                        (_, Some(p)) if i == 0 || !matches!(p, Json::Object(_)) => Some(p),
                        (None, Some(_)) => None,
                        (Some(target), Some(p)) => Some(merge_patch(target, p)),
                    };
                }
                match merged {
                    Some(j) => Val::str(write(&j)),
                    None => Val::Null,
                }
            }
            JsonFn::Search => return self.search(v, ctx),
            _ if v.iter().any(Val::is_null) => Val::Null,
            JsonFn::MergePreserve => {
                let mut merged: Option<Json> = None;
                for i in 0..v.len() {
                    let Some(j) = self.document(v, i, ctx) else {
                        return Ok(Val::Null);
                    };
                    merged = Some(match merged {
                        None => j,
                        Some(m) => merge_preserve(m, j),
                    });
                }
                merged.map_or(Val::Null, |j| Val::str(write(&j)))
            }
            JsonFn::Remove => {
                let Some(mut doc) = self.document(v, 0, ctx) else {
                    return Ok(Val::Null);
                };
                for (i, p) in v.iter().enumerate().skip(1) {
                    let Some(path) = self.exact_path(p, i + 1, ctx) else {
                        return Ok(Val::Null);
                    };
                    let Some((last, parent)) = path.split_last() else {
                        // `$` itself cannot go.
                        ctx.warn(
                            4051,
                            format!(
                                "Path expression '$' is not allowed in argument {} to function 'json_remove'.",
                                i + 1
                            ),
                        );
                        return Ok(Val::Null);
                    };
                    match (locate(&mut doc, parent), last) {
                        (Some(Json::Object(members)), Leg::Member(name)) => {
                            members.retain(|(k, _)| k != name);
                        }
                        (Some(Json::Array(items)), Leg::Index(n)) => {
                            if let Some(n) = n.of(items.len()).filter(|&n| n < items.len()) {
                                items.remove(n);
                            }
                        }
                        _ => {}
                    }
                }
                Val::str(write(&doc))
            }
            JsonFn::Contains => {
                let Some(doc) = self.document(v, 0, ctx) else {
                    return Ok(Val::Null);
                };
                let Some(candidate) = self.document(v, 1, ctx) else {
                    return Ok(Val::Null);
                };
                let target = match v.get(2) {
                    None => Some(&doc),
                    Some(p) => {
                        let Some(path) = self.exact_path(p, 3, ctx) else {
                            return Ok(Val::Null);
                        };
                        let mut found = Vec::new();
                        select(&doc, &path, &mut found);
                        found.into_iter().next()
                    }
                };
                match target {
                    None => Val::Null,
                    Some(t) => Val::Int(i64::from(contains(t, &candidate))),
                }
            }
            JsonFn::Unquote => {
                let s = text(0);
                if !s.trim_start().starts_with('"') {
                    return Ok(Val::str(s));
                }
                match parse(&s) {
                    Ok(Json::String(inner)) => Val::str(inner),
                    Ok(_) => Val::str(s),
                    Err(at) => {
                        let (code, message) = self.syntax_error(1, &s, at);
                        ctx.warn(code, message);
                        Val::str(s)
                    }
                }
            }
            // The path is read first (a bad one warns whatever the
            // document); MariaDB reads the document as a stream and
            // answers NULL, without a warning, where it stops making sense.
            // The scalar is unquoted (true and false as 1 and 0, as
            // MariaDB's); JSON null, an array, an object and a missing
            // value are NULL.
            // The path first, as JSON_VALUE's; an object or an array as
            // it was written; anything else (a wildcard path too) NULL.
            JsonFn::Query => {
                if v[0].is_null() || v[1].is_null() {
                    return Ok(Val::Null);
                }
                let path = match parse_path(&text(1)) {
                    Ok(path) if path.iter().any(Leg::is_wild) => return Ok(Val::Null),
                    Ok(path) => path,
                    Err(at) => {
                        let (code, message) = self.path_error(2, &text(1), at);
                        ctx.warn(code, message);
                        return Ok(Val::Null);
                    }
                };
                let doc_text = text(0);
                let Ok((doc, spans)) = parse_with_spans(&doc_text) else {
                    return Ok(Val::Null);
                };
                let mut found = Vec::new();
                select(&doc, &path, &mut found);
                match found.first() {
                    Some(j @ (Json::Array(_) | Json::Object(_))) => {
                        let mut all = Vec::with_capacity(spans.len());
                        preorder(&doc, &mut all);
                        let at = all.iter().position(|x| std::ptr::eq(*x, *j));
                        match at.and_then(|i| spans.get(i)) {
                            Some(&(a, b)) => Val::str(doc_text[a..b].to_owned()),
                            None => Val::str(write(j)),
                        }
                    }
                    _ => Val::Null,
                }
            }
            // A bad path is NULL without a warning, as MariaDB's.
            JsonFn::Exists => {
                if v[0].is_null() || v[1].is_null() {
                    return Ok(Val::Null);
                }
                let Ok(path) = parse_path(&text(1)) else {
                    return Ok(Val::Null);
                };
                let Some(doc) = self.document(v, 0, ctx) else {
                    return Ok(Val::Null);
                };
                let mut found = Vec::new();
                select(&doc, &path, &mut found);
                Val::Int(i64::from(!found.is_empty()))
            }
            // A document that is no JSON overlaps nothing (0, warned).
            JsonFn::Overlaps => {
                if v[0].is_null() || v[1].is_null() {
                    return Ok(Val::Null);
                }
                let (Some(a), Some(b)) = (self.document(v, 0, ctx), self.document(v, 1, ctx))
                else {
                    return Ok(Val::Int(0));
                };
                Val::Int(i64::from(overlaps(&a, &b)))
            }
            JsonFn::Equals => {
                if v[0].is_null() || v[1].is_null() {
                    return Ok(Val::Null);
                }
                let (Some(a), Some(b)) = (self.document(v, 0, ctx), self.document(v, 1, ctx))
                else {
                    return Ok(Val::Null);
                };
                Val::Int(i64::from(equal(&a, &b)))
            }
            JsonFn::Normalize | JsonFn::Compact | JsonFn::Loose | JsonFn::Detailed => {
                if v[0].is_null() {
                    return Ok(Val::Null);
                }
                let Some(doc) = self.document(v, 0, ctx) else {
                    return Ok(Val::Null);
                };
                let mut out = String::new();
                match self {
                    JsonFn::Normalize => write_laid(&doc, NORMAL, &mut out),
                    JsonFn::Compact => write_laid(&doc, COMPACT, &mut out),
                    JsonFn::Loose => write_into(&doc, &mut out),
                    _ => {
                        // The indent, MariaDB's `tab_size` (4; at most 64).
                        let width = match v.get(1) {
                            Some(w) if !w.is_null() => ctx.num_i64(w).clamp(0, 64) as usize,
                            _ => 4,
                        };
                        write_detailed(&doc, width, 0, &mut out);
                    }
                }
                Val::str(out)
            }
            JsonFn::Value => {
                if v[0].is_null() || v[1].is_null() {
                    return Ok(Val::Null);
                }
                let Some(path) = self.exact_path(&v[1], 2, ctx) else {
                    return Ok(Val::Null);
                };
                let Ok(doc) = parse(&v[0].to_text()) else {
                    return Ok(Val::Null);
                };
                let mut found = Vec::new();
                select(&doc, &path, &mut found);
                match found.first() {
                    Some(Json::String(s)) => Val::str(s.clone()),
                    Some(Json::Number(n)) => Val::str(n.clone()),
                    Some(Json::Bool(b)) => Val::str(if *b { "1" } else { "0" }),
                    _ => Val::Null,
                }
            }
            _ => {
                let Some(doc) = self.document(v, 0, ctx) else {
                    return Ok(Val::Null);
                };
                self.on_document(&doc, v, ctx)
            }
        })
    }

    /// Argument `arg`'s path, without wildcards (a change names one
    /// place); None, with MariaDB's warning, when it is not one.
    fn exact_path(self, p: &Val, arg: usize, ctx: &mut Ctx<'_>) -> Option<Vec<Leg>> {
        let name = self.name();
        match parse_path(&p.to_text()) {
            Ok(path) if path.iter().any(Leg::is_wild) => {
                ctx.warn(
                    4044,
                    format!(
                        "Wildcards or range in JSON path not allowed in argument {arg} to function '{name}'"
                    ),
                );
                None
            }
            Ok(path) => Some(path),
            Err(at) => {
                let (code, message) = self.path_error(arg, &p.to_text(), at);
                ctx.warn(code, message);
                None
            }
        }
    }

    /// MariaDB's complaint about path `text` of argument `arg` that stopped
    /// making sense at byte `at`: 4041 at its end, else 4042.
    fn path_error(self, arg: usize, text: &str, at: usize) -> (u16, String) {
        position_error(self.name(), "path", (4041, 4042), arg, text, at)
    }

    /// JSON_SEARCH(doc, 'one'|'all', pattern [, escape [, path…]]): the
    /// paths of the strings (and numbers and booleans, by their text) that
    /// match the LIKE pattern, under one of the paths if any are given, in
    /// document order: NULL for none, one as a JSON string, several
    /// ('all') as an array of them.
    fn search(self, v: &[Val], ctx: &mut Ctx<'_>) -> SqlResult<Val> {
        // The escape is checked first: a wrong one fails the statement.
        let escape = match v.get(3) {
            None | Some(Val::Null) => '\\',
            Some(e) => {
                let text = e.to_text();
                let mut chars = text.chars();
                match (chars.next(), chars.next()) {
                    (None, _) => '\\',
                    (Some(c), None) => c,
                    _ => {
                        return Err(crate::error::SqlError::new(
                            1210,
                            "Incorrect arguments to ESCAPE",
                        ))
                    }
                }
            }
        };
        if v[..3].iter().any(Val::is_null) || v.iter().skip(4).any(Val::is_null) {
            return Ok(Val::Null);
        }
        let all = match v[1].to_text().to_ascii_lowercase().as_str() {
            "all" => true,
            "one" => false,
            _ => {
                ctx.warn(
                    4046,
                    "Argument 2 to function 'json_search' must be \"one\" or \"all\".",
                );
                return Ok(Val::Null);
            }
        };
        let mut paths = Vec::new();
        for (i, p) in v.iter().enumerate().skip(4) {
            let text = p.to_text();
            match parse_path(&text) {
                Ok(path) => paths.push(path),
                Err(at) => {
                    let (code, message) = self.path_error(i + 1, &text, at);
                    ctx.warn(code, message);
                    return Ok(Val::Null);
                }
            }
        }
        let Some(doc) = self.document(v, 0, ctx) else {
            return Ok(Val::Null);
        };
        let pattern = v[2].to_text();
        let mut found = Vec::new();
        let mut at = Vec::new();
        let under = Under::of(&doc, &paths);
        search_in(&doc, &mut at, &under, &pattern, escape, all, &mut found);
        Ok(match found.len() {
            0 => Val::Null,
            1 => Val::str(quoted(&found[0])),
            _ => Val::str(write(&Json::Array(
                found.into_iter().map(Json::String).collect(),
            ))),
        })
    }

    /// JSON_SET, JSON_INSERT, JSON_REPLACE or JSON_ARRAY_APPEND of `value`
    /// at `path` (whose parent must exist; else nothing changes).
    fn change(self, doc: &mut Json, path: &[Leg], value: Json) {
        let (add, replace) = match self {
            JsonFn::Set => (true, true),
            JsonFn::Insert => (true, false),
            JsonFn::Replace => (false, true),
            _ => (false, false),
        };
        if self == JsonFn::ArrayAppend {
            if let Some(target) = locate(doc, path) {
                match target {
                    Json::Array(items) => items.push(value),
                    other => {
                        let old = std::mem::replace(other, Json::Null);
                        *other = Json::Array(vec![old, value]);
                    }
                }
            }
            return;
        }
        let Some((last, parent_path)) = path.split_last() else {
            if replace {
                *doc = value;
            }
            return;
        };
        let Some(parent) = locate(doc, parent_path) else {
            return;
        };
        match (parent, last) {
            (Json::Object(members), Leg::Member(name)) => {
                match members.iter_mut().find(|(k, _)| k == name) {
                    Some((_, m)) if replace => *m = value,
                    Some(_) => {}
                    None if add => members.push((name.clone(), value)),
                    None => {}
                }
            }
            (Json::Array(items), Leg::Index(n)) => match n.of(items.len()) {
                Some(n) if n < items.len() && replace => items[n] = value,
                Some(n) if n < items.len() => {}
                // Past either end: added at the end.
                _ if add => items.push(value),
                _ => {}
            },
            // `[0]` of a value that is no array is the value itself;
            // another index makes it an array of it and the new value.
            (other, Leg::Index(At::Start(0))) if replace => *other = value,
            (_, Leg::Index(At::Start(0))) => {}
            (other, Leg::Index(_)) if add => {
                let old = std::mem::replace(other, Json::Null);
                *other = Json::Array(vec![old, value]);
            }
            _ => {}
        }
    }

    /// Argument `i` parsed as JSON; None, with MariaDB's warning, when it
    /// is not JSON.
    fn document(self, v: &[Val], i: usize, ctx: &mut Ctx<'_>) -> Option<Json> {
        let text = v[i].to_text();
        parse(&text)
            .map_err(|at| {
                let (code, message) = self.syntax_error(i + 1, &text, at);
                ctx.warn(code, message);
            })
            .ok()
    }

    /// MariaDB's complaint about JSON text `text` of argument `arg` that
    /// stopped making sense at byte `at`: 4037 at its end, else 4038.
    fn syntax_error(self, arg: usize, text: &str, at: usize) -> (u16, String) {
        position_error(self.name(), "text", (4037, 4038), arg, text, at)
    }

    /// The functions that read a parsed document (its paths in `v[1..]`).
    fn on_document(self, doc: &Json, v: &[Val], ctx: &mut Ctx<'_>) -> Val {
        let mut paths = Vec::new();
        let first_path = if self == JsonFn::ContainsPath { 2 } else { 1 };
        for (i, p) in v.iter().enumerate().skip(first_path) {
            let text = p.to_text();
            match parse_path(&text) {
                Ok(path) => paths.push(path),
                Err(at) => {
                    let (code, message) = self.path_error(i + 1, &text, at);
                    ctx.warn(code, message);
                    return Val::Null;
                }
            }
        }
        // The value a function of one optional path reads.
        let target = |paths: &[Vec<Leg>]| -> Option<&Json> {
            match paths.first() {
                None => Some(doc),
                Some(path) => {
                    let mut found = Vec::new();
                    select(doc, path, &mut found);
                    found.into_iter().next()
                }
            }
        };
        match self {
            JsonFn::Type => Val::str(match doc {
                Json::Null => "NULL",
                Json::Bool(_) => "BOOLEAN",
                Json::Number(n) if n.contains(['.', 'e', 'E']) => "DOUBLE",
                Json::Number(_) => "INTEGER",
                Json::String(_) => "STRING",
                Json::Array(_) => "ARRAY",
                Json::Object(_) => "OBJECT",
            }),
            JsonFn::Depth => Val::Int(depth(doc) as i64),
            JsonFn::Length => match target(&paths) {
                None => Val::Null,
                Some(Json::Array(items)) => Val::Int(items.len() as i64),
                Some(Json::Object(members)) => Val::Int(members.len() as i64),
                Some(_) => Val::Int(1),
            },
            JsonFn::Keys => match target(&paths) {
                Some(Json::Object(members)) => Val::str(write(&Json::Array(
                    members
                        .iter()
                        .map(|(k, _)| Json::String(k.clone()))
                        .collect(),
                ))),
                _ => Val::Null,
            },
            JsonFn::Extract => {
                let mut found = Vec::new();
                for path in &paths {
                    select(doc, path, &mut found);
                }
                if paths.len() > 1 {
                    // In document order, as MariaDB lists them.
                    let mut order = Vec::new();
                    preorder(doc, &mut order);
                    found.sort_by_key(|j| order.iter().position(|o| std::ptr::eq(*o, *j)));
                }
                let wrap = paths.len() > 1 || paths.iter().any(|p| p.iter().any(Leg::is_wild));
                match (found.as_slice(), wrap) {
                    ([], _) => Val::Null,
                    ([one], false) => Val::str(write(one)),
                    (many, _) => Val::str(write(&Json::Array(
                        many.iter().map(|j| (*j).clone()).collect(),
                    ))),
                }
            }
            JsonFn::ContainsPath => {
                let all = match v[1].to_text().to_ascii_lowercase().as_str() {
                    "all" => true,
                    "one" => false,
                    _ => {
                        ctx.warn(
                            4046,
                            "Argument 2 to function 'json_contains_path' must be \"one\" or \"all\".".to_owned(),
                        );
                        return Val::Null;
                    }
                };
                let has = |path: &Vec<Leg>| {
                    let mut found = Vec::new();
                    select(doc, path, &mut found);
                    !found.is_empty()
                };
                Val::Int(i64::from(if all {
                    paths.iter().all(has)
                } else {
                    paths.iter().any(has)
                }))
            }
            JsonFn::Valid
            | JsonFn::Unquote
            | JsonFn::Quote
            | JsonFn::Object
            | JsonFn::Array
            | JsonFn::Contains
            | JsonFn::Set
            | JsonFn::Insert
            | JsonFn::Replace
            | JsonFn::Remove
            | JsonFn::ArrayAppend
            | JsonFn::ArrayInsert
            | JsonFn::MergePatch
            | JsonFn::MergePreserve
            | JsonFn::Search
            | JsonFn::Value
            | JsonFn::Query
            | JsonFn::Exists
            | JsonFn::Overlaps
            | JsonFn::Equals
            | JsonFn::Normalize
            | JsonFn::Compact
            | JsonFn::Loose
            | JsonFn::Detailed => unreachable!("answered before parsing"),
        }
    }
}

/// The JSON text of a SQL value (`arg` the expression that gave it), as
/// JSON_ARRAY writes its items.
pub fn sql_value_text(arg: &Expr, v: &Val) -> String {
    write(&of_sql(arg, v))
}

/// A string as a JSON string (quoted, escaped).
pub fn quoted(s: &str) -> String {
    write(&Json::String(s.to_owned()))
}

/// A SQL value as a JSON value: NULL as null, numbers as numbers, the
/// text of another JSON function as the JSON it is, other strings quoted.
fn of_sql(arg: &Expr, v: &Val) -> Json {
    match v {
        Val::Null => Json::Null,
        Val::Int(_) | Val::UInt(_) | Val::Dec(_) => Json::Number(v.to_text()),
        Val::Double(d) if d.is_finite() => Json::Number(v.to_text()),
        _ => {
            let text = v.to_text();
            let nested = matches!(arg, Expr::Func(super::Func::Json(f), _) if f.gives_json());
            match nested.then(|| parse(&text).ok()).flatten() {
                Some(j) => j,
                None => Json::String(text),
            }
        }
    }
}

/// MariaDB's complaint about argument `arg` of function `name`, JSON
/// `what` ("text" or "path") `text` that stopped making sense at byte
/// `at`: `codes.0` (unexpected end) at its end, else `codes.1`.
pub fn position_error(
    name: &str,
    what: &str,
    codes: (u16, u16),
    arg: usize,
    text: &str,
    at: usize,
) -> (u16, String) {
    // Past the end (`**` at the end of a path) is a syntax error just
    // after it.
    if at == text.len() {
        let message =
            format!("Unexpected end of JSON {what} in argument {arg} to function '{name}'");
        (codes.0, message)
    } else {
        let message = format!(
            "Syntax error in JSON {what} in argument {arg} to function '{name}' at position {}",
            at.min(text.len()) + 1
        );
        (codes.1, message)
    }
}

/// A parsed JSON value: numbers keep their text.
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Number(String),
    String(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

/// The value an exact path (no wildcards) names, to change it.
fn locate<'j>(j: &'j mut Json, path: &[Leg]) -> Option<&'j mut Json> {
    let Some((leg, rest)) = path.split_first() else {
        return Some(j);
    };
    match (leg, j) {
        (Leg::Member(name), Json::Object(members)) => {
            let (_, m) = members.iter_mut().find(|(k, _)| k == name)?;
            locate(m, rest)
        }
        (Leg::Index(n), Json::Array(items)) => {
            let n = n.of(items.len())?;
            locate(items.get_mut(n)?, rest)
        }
        (Leg::Index(At::Start(0)), other) => locate(other, rest),
        _ => None,
    }
}

/// JSON_CONTAINS: whether `candidate` is in `target` (an array holds a
/// value one of its elements holds, and an array whose elements it each
/// holds; an object holds an object whose members it each holds; scalars
/// equal, numbers by value).
fn contains(target: &Json, candidate: &Json) -> bool {
    match (target, candidate) {
        (Json::Array(items), Json::Array(wanted)) => {
            wanted.iter().all(|w| items.iter().any(|i| contains(i, w)))
        }
        (Json::Array(items), other) => items.iter().any(|i| contains(i, other)),
        (Json::Object(members), Json::Object(wanted)) => wanted
            .iter()
            .all(|(k, w)| members.iter().any(|(name, m)| name == k && contains(m, w))),
        (Json::Number(a), Json::Number(b)) => {
            a == b || matches!((a.parse::<f64>(), b.parse::<f64>()), (Ok(x), Ok(y)) if x == y)
        }
        (a, b) => a == b,
    }
}

/// JSON_MERGE_PATCH of two documents (RFC 7396): a patch that is no
/// object replaces the target; an object's members patch the target's
/// (which is taken as `{}` when it is no object) in its order, new ones
/// after, a null member removing it.
fn merge_patch(target: Json, patch: Json) -> Json {
    let Json::Object(patch) = patch else {
        return patch;
    };
    let mut members = match target {
        Json::Object(m) => m,
        _ => Vec::new(),
    };
    for (name, value) in patch {
        let at = members.iter().position(|(k, _)| *k == name);
        match (value, at) {
            (Json::Null, Some(at)) => {
                members.remove(at);
            }
            (Json::Null, None) => {}
            (value, Some(at)) => {
                let old = std::mem::replace(&mut members[at].1, Json::Null);
                members[at].1 = merge_patch(old, value);
            }
            // Patched onto nothing, so that its own nulls go.
            (value, None) => members.push((name, merge_patch(Json::Null, value))),
        }
    }
    Json::Object(members)
}

/// JSON_MERGE_PRESERVE of two documents: objects merge member by member
/// (a name in both merges its two values); anything else is the array of
/// both sides' elements, a value that is no array counting as one.
fn merge_preserve(a: Json, b: Json) -> Json {
    match (a, b) {
        (Json::Object(mut members), Json::Object(more)) => {
            for (name, value) in more {
                match members.iter_mut().find(|(k, _)| *k == name) {
                    Some((_, m)) => {
                        let old = std::mem::replace(m, Json::Null);
                        *m = merge_preserve(old, value);
                    }
                    None => members.push((name, value)),
                }
            }
            Json::Object(members)
        }
        (a, b) => {
            let elements = |j: Json| match j {
                Json::Array(items) => items,
                other => vec![other],
            };
            let mut items = elements(a);
            items.extend(elements(b));
            Json::Array(items)
        }
    }
}

/// The values JSON_SEARCH's paths reach (its matches must be at or under
/// one), or every value when it is given none.
struct Under<'j> {
    reached: Option<std::collections::HashSet<*const Json>>,
    _doc: std::marker::PhantomData<&'j Json>,
}

impl<'j> Under<'j> {
    fn of(doc: &'j Json, paths: &[Vec<Leg>]) -> Under<'j> {
        let reached = (!paths.is_empty()).then(|| {
            let mut found = Vec::new();
            for p in paths {
                select(doc, p, &mut found);
            }
            found.into_iter().map(|j| j as *const Json).collect()
        });
        Under {
            reached,
            _doc: std::marker::PhantomData,
        }
    }

    /// Whether `j` is one of the values reached.
    fn holds(&self, j: &Json) -> bool {
        self.reached
            .as_ref()
            .is_none_or(|r| r.contains(&(j as *const Json)))
    }
}

/// JSON_SEARCH's walk of `j`, at path `at` (its legs): pushes onto
/// `found` the path of each scalar but null whose text matches `pattern`,
/// in document order, when it is at or under a value `under` holds; stops
/// at the first unless `all`.
fn search_in(
    j: &Json,
    at: &mut Vec<Leg>,
    under: &Under<'_>,
    pattern: &str,
    escape: char,
    all: bool,
    found: &mut Vec<String>,
) {
    search_from(j, at, under, under.holds(j), pattern, escape, all, found);
}

/// [`search_in`] of `j`, `inside` a value its paths reach or not.
#[allow(clippy::too_many_arguments)]
fn search_from(
    j: &Json,
    at: &mut Vec<Leg>,
    under: &Under<'_>,
    inside: bool,
    pattern: &str,
    escape: char,
    all: bool,
    found: &mut Vec<String>,
) {
    if !all && !found.is_empty() {
        return;
    }
    let text = match j {
        Json::String(s) => Some(s.as_str()),
        Json::Number(n) => Some(n.as_str()),
        Json::Bool(true) => Some("true"),
        Json::Bool(false) => Some("false"),
        Json::Null => None,
        Json::Array(items) => {
            for (n, item) in items.iter().enumerate() {
                at.push(Leg::Index(At::Start(n)));
                let inside = inside || under.holds(item);
                search_from(item, at, under, inside, pattern, escape, all, found);
                at.pop();
            }
            None
        }
        Json::Object(members) => {
            for (name, m) in members {
                at.push(Leg::Member(name.clone()));
                let inside = inside || under.holds(m);
                search_from(m, at, under, inside, pattern, escape, all, found);
                at.pop();
            }
            None
        }
    };
    let Some(text) = text else {
        return;
    };
    // MariaDB matches under the pattern's collation; a literal's is the
    // connection's utf8mb4_general_ci here.
    if inside && super::eval::like(text, pattern, escape, true) {
        let mut path = String::from("$");
        for leg in at.iter() {
            match leg {
                // MariaDB writes a name as it is, quoted or not.
                Leg::Member(name) => {
                    path.push('.');
                    path.push_str(name);
                }
                Leg::Index(At::Start(n)) => path.push_str(&format!("[{n}]")),
                // The walk's own legs are names and positions.
                _ => {}
            }
        }
        found.push(path);
    }
}

/// Every value of `j`, itself first, in document order.
pub fn preorder<'j>(j: &'j Json, out: &mut Vec<&'j Json>) {
    out.push(j);
    match j {
        Json::Array(items) => items.iter().for_each(|i| preorder(i, out)),
        Json::Object(members) => members.iter().for_each(|(_, m)| preorder(m, out)),
        _ => {}
    }
}

fn depth(j: &Json) -> usize {
    match j {
        Json::Array(items) if !items.is_empty() => 1 + items.iter().map(depth).max().unwrap_or(0),
        Json::Object(members) if !members.is_empty() => {
            1 + members.iter().map(|(_, m)| depth(m)).max().unwrap_or(0)
        }
        _ => 1,
    }
}

/// JSON text as MariaDB writes it.
pub fn write(j: &Json) -> String {
    let mut out = String::new();
    write_into(j, &mut out);
    out
}

fn write_into(j: &Json, out: &mut String) {
    write_laid(j, LOOSE, out);
}

/// How a document is written on one line: what goes between elements
/// and members, what between a name and its value, and whether members
/// are sorted and numbers normalized (JSON_NORMALIZE's).
#[derive(Clone, Copy)]
struct Layout {
    between: &'static str,
    named: &'static str,
    normal: bool,
}

/// MariaDB's usual layout (`{"a": [1, 2]}`).
const LOOSE: Layout = Layout {
    between: ", ",
    named: ": ",
    normal: false,
};

/// JSON_COMPACT's: no white space.
const COMPACT: Layout = Layout {
    between: ",",
    named: ":",
    normal: false,
};

/// JSON_NORMALIZE's: compact, members sorted by name, numbers as
/// [`normal_number`].
const NORMAL: Layout = Layout {
    between: ",",
    named: ":",
    normal: true,
};

fn write_laid(j: &Json, layout: Layout, out: &mut String) {
    match j {
        Json::Null => out.push_str("null"),
        Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Json::Number(n) if layout.normal => out.push_str(&normal_number(n)),
        Json::Number(n) => out.push_str(n),
        Json::String(s) => write_string(s, out),
        Json::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(layout.between);
                }
                write_laid(item, layout, out);
            }
            out.push(']');
        }
        Json::Object(members) => {
            let ordered = if layout.normal {
                sorted(members)
            } else {
                members.iter().collect()
            };
            out.push('{');
            for (i, (k, m)) in ordered.into_iter().enumerate() {
                if i > 0 {
                    out.push_str(layout.between);
                }
                write_string(k, out);
                out.push_str(layout.named);
                write_laid(m, layout, out);
            }
            out.push('}');
        }
    }
}

/// JSON_DETAILED's text, as MariaDB lays it out: each element and member
/// on a line of its own, indented `width` per level, an object's or
/// array's value of a member on the line after its name; an array of one
/// scalar (and an empty one) on one line.
fn write_detailed(j: &Json, width: usize, depth: usize, out: &mut String) {
    let line = |out: &mut String, depth: usize| {
        out.push('\n');
        out.extend(std::iter::repeat_n(' ', width * depth));
    };
    match j {
        Json::Array(items) if items.is_empty() => out.push_str("[]"),
        Json::Array(items)
            if items.len() == 1 && !matches!(items[0], Json::Array(_) | Json::Object(_)) =>
        {
            out.push('[');
            write_into(&items[0], out);
            out.push(']');
        }
        Json::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                line(out, depth + 1);
                write_detailed(item, width, depth + 1, out);
            }
            line(out, depth);
            out.push(']');
        }
        Json::Object(members) => {
            out.push('{');
            for (i, (k, m)) in members.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                line(out, depth + 1);
                write_string(k, out);
                out.push_str(": ");
                if matches!(m, Json::Array(_) | Json::Object(_)) {
                    line(out, depth + 1);
                }
                write_detailed(m, width, depth + 1, out);
            }
            line(out, depth);
            out.push('}');
        }
        scalar => write_into(scalar, out),
    }
}

/// A JSON number written as MariaDB normalizes it, from its digits (no
/// rounding through a double): `d.dddE±n`, `0.0E0` for zero (`123.45` is
/// `1.2345E2`, `0.001` is `1.0E-3`).
fn normal_number(text: &str) -> String {
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(at) => (
            &unsigned[..at],
            unsigned[at + 1..].parse::<i64>().unwrap_or(0),
        ),
        None => (unsigned, 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits: String = whole.chars().chain(fraction.chars()).collect();
    let Some(first) = digits.find(|c| c != '0') else {
        return "0.0E0".to_owned();
    };
    let significant = digits[first..].trim_end_matches('0');
    // The point after the first significant digit.
    let exponent = exponent + whole.len() as i64 - first as i64 - 1;
    let rest = if significant.len() > 1 {
        &significant[1..]
    } else {
        "0"
    };
    format!(
        "{}{}.{}E{}",
        if negative { "-" } else { "" },
        &significant[..1],
        rest,
        exponent
    )
}

/// An object's members sorted by name.
fn sorted(m: &[(String, Json)]) -> Vec<&(String, Json)> {
    let mut v: Vec<&(String, Json)> = m.iter().collect();
    v.sort_by(|p, q| p.0.cmp(&q.0));
    v
}

/// JSON_EQUALS: the same value (members in any order, numbers by value).
fn equal(a: &Json, b: &Json) -> bool {
    match (a, b) {
        (Json::Number(x), Json::Number(y)) => normal_number(x) == normal_number(y),
        (Json::Array(x), Json::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| equal(p, q))
        }
        (Json::Object(x), Json::Object(y)) => {
            x.len() == y.len()
                && sorted(x)
                    .into_iter()
                    .zip(sorted(y))
                    .all(|((k, p), (l, q))| k == l && equal(p, q))
        }
        (x, y) => x == y,
    }
}

/// JSON_OVERLAPS, as MariaDB's: two arrays share an element; an array
/// and a scalar or an object, when it holds it; two objects share a
/// member (name and value); two scalars are equal.
fn overlaps(a: &Json, b: &Json) -> bool {
    match (a, b) {
        (Json::Array(x), Json::Array(y)) => x.iter().any(|p| y.iter().any(|q| equal(p, q))),
        (Json::Array(x), other) | (other, Json::Array(x)) => x.iter().any(|p| equal(p, other)),
        (Json::Object(x), Json::Object(y)) => x
            .iter()
            .any(|(k, p)| y.iter().any(|(l, q)| k == l && equal(p, q))),
        (Json::Object(_), _) | (_, Json::Object(_)) => false,
        (x, y) => equal(x, y),
    }
}

fn write_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Parses JSON text; Err: the byte offset where it stopped making sense.
pub fn parse(text: &str) -> Result<Json, usize> {
    let mut p = Parser {
        s: text.as_bytes(),
        at: 0,
        spans: None,
    };
    let v = p.value(0)?;
    p.space();
    if p.at != p.s.len() {
        return Err(p.at);
    }
    Ok(v)
}

/// [`parse`], with where each value was written: the byte range of each,
/// in document order (the order of [`preorder`]), so that a value can be
/// given back as written (JSON_TABLE's JSON columns, as MariaDB's).
pub fn parse_with_spans(text: &str) -> Result<(Json, Vec<(usize, usize)>), usize> {
    let mut p = Parser {
        s: text.as_bytes(),
        at: 0,
        spans: Some(Vec::new()),
    };
    let v = p.value(0)?;
    p.space();
    if p.at != p.s.len() {
        return Err(p.at);
    }
    Ok((v, p.spans.unwrap_or_default()))
}

struct Parser<'a> {
    s: &'a [u8],
    at: usize,
    /// Each value's byte range, in document order, when asked for.
    spans: Option<Vec<(usize, usize)>>,
}

impl Parser<'_> {
    fn space(&mut self) {
        while self.s.get(self.at).is_some_and(|b| b.is_ascii_whitespace()) {
            self.at += 1;
        }
    }

    fn eat(&mut self, word: &[u8]) -> bool {
        if self.s[self.at..].starts_with(word) {
            self.at += word.len();
            true
        } else {
            false
        }
    }

    fn value(&mut self, depth: usize) -> Result<Json, usize> {
        self.space();
        let slot = self.spans.as_mut().map(|spans| {
            spans.push((self.at, self.at));
            spans.len() - 1
        });
        let v = self.value_here(depth)?;
        if let (Some(i), Some(spans)) = (slot, self.spans.as_mut()) {
            spans[i].1 = self.at;
        }
        Ok(v)
    }

    /// The value that starts here (after white space).
    fn value_here(&mut self, depth: usize) -> Result<Json, usize> {
        let Some(&b) = self.s.get(self.at) else {
            return Err(self.at);
        };
        match b {
            b'{' | b'[' if depth >= JSON_DEPTH_MAX => Err(self.at),
            b'{' => {
                self.at += 1;
                let mut members = Vec::new();
                self.space();
                if self.eat(b"}") {
                    return Ok(Json::Object(members));
                }
                loop {
                    self.space();
                    if self.s.get(self.at) != Some(&b'"') {
                        return Err(self.at);
                    }
                    let key = self.string()?;
                    self.space();
                    if !self.eat(b":") {
                        return Err(self.at);
                    }
                    let v = self.value(depth + 1)?;
                    members.push((key, v));
                    self.space();
                    if self.eat(b"}") {
                        return Ok(Json::Object(members));
                    }
                    if !self.eat(b",") {
                        return Err(self.at);
                    }
                }
            }
            b'[' => {
                self.at += 1;
                let mut items = Vec::new();
                self.space();
                if self.eat(b"]") {
                    return Ok(Json::Array(items));
                }
                loop {
                    items.push(self.value(depth + 1)?);
                    self.space();
                    if self.eat(b"]") {
                        return Ok(Json::Array(items));
                    }
                    if !self.eat(b",") {
                        return Err(self.at);
                    }
                }
            }
            b'"' => Ok(Json::String(self.string()?)),
            b't' if self.eat(b"true") => Ok(Json::Bool(true)),
            b'f' if self.eat(b"false") => Ok(Json::Bool(false)),
            b'n' if self.eat(b"null") => Ok(Json::Null),
            b'-' | b'0'..=b'9' => self.number(),
            _ => Err(self.at),
        }
    }

    fn number(&mut self) -> Result<Json, usize> {
        let start = self.at;
        let digits = |p: &mut Self| {
            let from = p.at;
            while p.s.get(p.at).is_some_and(u8::is_ascii_digit) {
                p.at += 1;
            }
            p.at > from
        };
        self.eat(b"-");
        if !digits(self) {
            return Err(self.at);
        }
        if self.eat(b".") && !digits(self) {
            return Err(self.at);
        }
        if self
            .s
            .get(self.at)
            .is_some_and(|b| matches!(b, b'e' | b'E'))
        {
            self.at += 1;
            if !self.eat(b"+") {
                self.eat(b"-");
            }
            if !digits(self) {
                return Err(self.at);
            }
        }
        let text = std::str::from_utf8(&self.s[start..self.at]).map_err(|_| start)?;
        Ok(Json::Number(text.to_owned()))
    }

    /// A string at `"`: its value, escapes undone.
    fn string(&mut self) -> Result<String, usize> {
        self.at += 1;
        let mut out = Vec::new();
        loop {
            let Some(&b) = self.s.get(self.at) else {
                return Err(self.at);
            };
            self.at += 1;
            match b {
                b'"' => return String::from_utf8(out).map_err(|_| self.at),
                b'\\' => {
                    let Some(&e) = self.s.get(self.at) else {
                        return Err(self.at);
                    };
                    self.at += 1;
                    let c = match e {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let hex = self.s.get(self.at..self.at + 4).ok_or(self.at)?;
                            let hex = std::str::from_utf8(hex).map_err(|_| self.at)?;
                            let code = u32::from_str_radix(hex, 16).map_err(|_| self.at)?;
                            self.at += 4;
                            char::from_u32(code).unwrap_or('\u{fffd}')
                        }
                        _ => return Err(self.at - 1),
                    };
                    let mut buf = [0; 4];
                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
                b if b < 0x20 => return Err(self.at - 1),
                b => out.push(b),
            }
        }
    }
}

/// One step of a JSON path.
#[derive(Clone, Debug, PartialEq)]
pub enum Leg {
    Member(String),
    AnyMember,
    /// `[n]`, `[last]`, `[last-n]`, `[-n]`.
    Index(At),
    AnyIndex,
    /// `[m to n]`, both ends in.
    Range(At, At),
    /// `**`: any number of steps down, none too.
    AnyDepth,
}

impl Leg {
    /// Whether it may reach several values.
    pub fn is_wild(&self) -> bool {
        matches!(
            self,
            Leg::AnyMember | Leg::AnyIndex | Leg::Range(..) | Leg::AnyDepth
        )
    }
}

/// An array position of a path: from the start, or back from the last
/// element (`last` is `End(0)`, `last-2` and `-3` are `End(2)`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum At {
    Start(usize),
    End(usize),
}

impl At {
    /// The position in an array of `len` elements (None: before its
    /// first; it may be past its last).
    fn of(self, len: usize) -> Option<usize> {
        match self {
            At::Start(n) => Some(n),
            At::End(k) => len.checked_sub(k + 1),
        }
    }
}

/// A path `$`, `.name`, `."quoted name"`, `.*`, `**`, `[n]`, `[last]`,
/// `[last-n]`, `[-n]`, `[m to n]`, `[*]`; Err: where it stopped making
/// sense.
pub fn parse_path(text: &str) -> Result<Vec<Leg>, usize> {
    let s = text.as_bytes();
    let mut at = 0;
    let skip = |at: &mut usize| {
        while s.get(*at).is_some_and(u8::is_ascii_whitespace) {
            *at += 1;
        }
    };
    skip(&mut at);
    if s.get(at) != Some(&b'$') {
        return Err(at);
    }
    at += 1;
    let mut legs = Vec::new();
    loop {
        skip(&mut at);
        let Some(&b) = s.get(at) else {
            return Ok(legs);
        };
        if legs.len() >= JSON_PATH_LEGS_MAX {
            return Err(at);
        }
        match b {
            // `**` must be followed by a step.
            b'*' if s.get(at + 1) == Some(&b'*') => {
                at += 2;
                if s.get(at).is_none() {
                    // MariaDB's is a syntax error there, not an end too
                    // soon (past the end says so: `position_error`).
                    return Err(at + 1);
                }
                legs.push(Leg::AnyDepth);
            }
            b'.' => {
                at += 1;
                skip(&mut at);
                match s.get(at) {
                    Some(b'*') => {
                        at += 1;
                        legs.push(Leg::AnyMember);
                    }
                    Some(b'"') => {
                        let mut p = Parser { s, at, spans: None };
                        let name = p.string()?;
                        at = p.at;
                        legs.push(Leg::Member(name));
                    }
                    _ => {
                        let from = at;
                        while s.get(at).is_some_and(|b| {
                            b.is_ascii_alphanumeric() || *b == b'_' || *b == b'$' || *b >= 0x80
                        }) {
                            at += 1;
                        }
                        if at == from {
                            return Err(at);
                        }
                        legs.push(Leg::Member(text[from..at].to_owned()));
                    }
                }
            }
            b'[' => {
                at += 1;
                skip(&mut at);
                if s.get(at) == Some(&b'*') {
                    at += 1;
                    legs.push(Leg::AnyIndex);
                } else {
                    let first = position(text, &mut at)?;
                    // MariaDB's range: one space each side of `to`.
                    if s[at..].starts_with(b" to ") {
                        at += 4;
                        let last = position(text, &mut at)?;
                        legs.push(Leg::Range(first, last));
                    } else {
                        legs.push(Leg::Index(first));
                    }
                }
                skip(&mut at);
                if s.get(at) != Some(&b']') {
                    return Err(at);
                }
                at += 1;
            }
            _ => return Err(at),
        }
    }
}

/// An array position of a path at `at` (`n`, `-n`, `last`, `last-n`,
/// MariaDB's: no space after the minus), moved past.
fn position(text: &str, at: &mut usize) -> Result<At, usize> {
    let s = text.as_bytes();
    let digits = |at: &mut usize| -> Result<usize, usize> {
        let from = *at;
        while s.get(*at).is_some_and(u8::is_ascii_digit) {
            *at += 1;
        }
        text[from..*at].parse().map_err(|_| from)
    };
    if s[*at..].starts_with(b"last") {
        *at += 4;
        while s.get(*at) == Some(&b' ') && s.get(*at + 1) == Some(&b'-') {
            *at += 1;
        }
        if s.get(*at) != Some(&b'-') {
            return Ok(At::End(0));
        }
        *at += 1;
        return digits(at).map(At::End);
    }
    if s.get(*at) == Some(&b'-') {
        *at += 1;
        let n = digits(at)?;
        // `-0` is the first element, as `0`.
        return Ok(n.checked_sub(1).map_or(At::Start(0), At::End));
    }
    digits(at).map(At::Start)
}

/// The values `path` reaches from `j`, in document order.
pub fn select<'j>(j: &'j Json, path: &[Leg], out: &mut Vec<&'j Json>) {
    let Some((leg, rest)) = path.split_first() else {
        out.push(j);
        return;
    };
    match (leg, j) {
        (Leg::Member(name), Json::Object(members)) => {
            if let Some((_, m)) = members.iter().find(|(k, _)| k == name) {
                select(m, rest, out);
            }
        }
        (Leg::AnyMember, Json::Object(members)) => {
            for (_, m) in members {
                select(m, rest, out);
            }
        }
        (Leg::Index(n), Json::Array(items)) => {
            if let Some(item) = n.of(items.len()).and_then(|n| items.get(n)) {
                select(item, rest, out);
            }
        }
        // `$[0]` of a value that is no array is the value itself (and so
        // is `$[0 to 0]`).
        (Leg::Index(At::Start(0)), other) => select(other, rest, out),
        (Leg::AnyIndex, Json::Array(items)) => {
            for item in items {
                select(item, rest, out);
            }
        }
        (Leg::Range(from, to), Json::Array(items)) => {
            for n in range_of(*from, *to, items.len()) {
                select(&items[n], rest, out);
            }
        }
        (Leg::Range(from, to), other) if !range_of(*from, *to, 1).is_empty() => {
            select(other, rest, out);
        }
        (Leg::AnyDepth, j) => any_depth(j, rest, out),
        _ => {}
    }
}

/// The positions `[from to to]` names in an array of `len` elements (a
/// start before the first is the first, an end past the last the last).
fn range_of(from: At, to: At, len: usize) -> std::ops::Range<usize> {
    let start = from.of(len).unwrap_or(0);
    let end = to.of(len).map_or(0, |n| (n + 1).min(len));
    start..end.max(start)
}

/// `**` then `rest` from `j`: the values `rest` reaches from `j` or any
/// value under it, in document order (a child's own matches before those
/// under it), as MariaDB lists them.
fn any_depth<'j>(j: &'j Json, rest: &[Leg], out: &mut Vec<&'j Json>) {
    let Some((leg, after)) = rest.split_first() else {
        return;
    };
    if !matches!(j, Json::Array(_)) && *leg == Leg::Index(At::Start(0)) {
        select(j, after, out);
    }
    // Whether `leg` steps from `j` to its child `key` (a name or a
    // position among `len`).
    let steps = |key: Result<&str, (usize, usize)>| match (leg, key) {
        (Leg::Member(name), Ok(k)) => name == k,
        (Leg::AnyMember, Ok(_)) | (Leg::AnyIndex, Err(_)) => true,
        (Leg::Index(n), Err((i, len))) => n.of(len) == Some(i),
        (Leg::Range(from, to), Err((i, len))) => range_of(*from, *to, len).contains(&i),
        _ => false,
    };
    match j {
        Json::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                if steps(Err((i, items.len()))) {
                    select(item, after, out);
                }
                any_depth(item, rest, out);
            }
        }
        Json::Object(members) => {
            for (k, m) in members {
                if steps(Ok(k)) {
                    select(m, after, out);
                }
                any_depth(m, rest, out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_normalize_from_their_digits() {
        for (text, want) in [
            ("0", "0.0E0"),
            ("-0.0", "0.0E0"),
            ("1", "1.0E0"),
            ("-1.5", "-1.5E0"),
            ("123.45", "1.2345E2"),
            ("0.001", "1.0E-3"),
            ("1e100", "1.0E100"),
            ("-12E+2", "-1.2E3"),
            ("1.5e-3", "1.5E-3"),
            ("12345678901234567890", "1.234567890123456789E19"),
            ("100", "1.0E2"),
        ] {
            assert_eq!(normal_number(text), want, "{text}");
        }
        // Equal values, however written; overlaps element by element.
        let j = |t: &str| parse(t).unwrap();
        assert!(equal(&j("1e2"), &j("100.0")));
        assert!(!equal(&j("[1,2]"), &j("[2,1]")));
        assert!(equal(&j(r#"{"a":1,"b":[2]}"#), &j(r#"{"b":[2.0],"a":1}"#)));
        assert!(overlaps(&j("[1,[2]]"), &j("[[2],3]")));
        assert!(!overlaps(&j("[1,[2]]"), &j("[2]")));
        assert!(overlaps(&j(r#"{"a":1}"#), &j(r#"[{"a":1}]"#)));
        assert!(!overlaps(&j("{}"), &j("{}")));
    }

    #[test]
    fn spans_are_where_each_value_was_written() {
        let text = r#" {"a" : [1,  2], "b":{"k" :"v"}, "a":null } "#;
        let (doc, spans) = parse_with_spans(text).expect("parses");
        let mut all = Vec::new();
        preorder(&doc, &mut all);
        assert_eq!(all.len(), spans.len());
        let written: Vec<&str> = spans.iter().map(|&(a, b)| &text[a..b]).collect();
        assert_eq!(
            written,
            [
                r#"{"a" : [1,  2], "b":{"k" :"v"}, "a":null }"#,
                "[1,  2]",
                "1",
                "2",
                r#"{"k" :"v"}"#,
                r#""v""#,
                "null",
            ]
        );
        assert_eq!(parse_with_spans("[1,").map(|_| ()), Err(3));
    }

    #[test]
    fn documents_are_written_back_as_mariadb_writes_them() {
        let j = parse(
            r#" {"a":{"b":[1,2.50,-3e2]},"c" : "x\ny\u0041", "d":[true,false,null], "e":{}} "#,
        )
        .unwrap();
        assert_eq!(
            write(&j),
            r#"{"a": {"b": [1, 2.50, -3e2]}, "c": "x\nyA", "d": [true, false, null], "e": {}}"#
        );
        for bad in [
            "{a:1}",
            "[1,]",
            "01x",
            "\"unterminated",
            "[1] 2",
            "",
            "{\"a\" 1}",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        let deep = "[".repeat(JSON_DEPTH_MAX + 1) + &"]".repeat(JSON_DEPTH_MAX + 1);
        assert!(parse(&deep).is_err());
    }

    #[test]
    fn merges_patch_and_preserve_as_mariadb() {
        let j = |t: &str| parse(t).unwrap();
        let patch = |a: &str, b: &str| write(&merge_patch(j(a), j(b)));
        assert_eq!(
            patch(r#"{"a":1,"b":2}"#, r#"{"b":null,"c":3}"#),
            r#"{"a": 1, "c": 3}"#
        );
        assert_eq!(patch(r#"{"a":1}"#, r#"{"a":{"b":null}}"#), r#"{"a": {}}"#);
        assert_eq!(patch("[1]", "[2]"), "[2]");
        let preserve = |a: &str, b: &str| write(&merge_preserve(j(a), j(b)));
        assert_eq!(
            preserve(r#"{"a":1,"b":2}"#, r#"{"b":3,"c":4}"#),
            r#"{"a": 1, "b": [2, 3], "c": 4}"#
        );
        assert_eq!(preserve(r#"{"a":1}"#, "[1]"), r#"[{"a": 1}, 1]"#);
        assert_eq!(preserve("1", "2"), "[1, 2]");
    }

    #[test]
    fn search_finds_paths_in_document_order_under_the_paths_given() {
        let doc = parse(r#"{"a":"xy","b":[1,"x",null,true],"c":{"a":"x"}}"#).unwrap();
        let find = |pattern: &str, paths: &[&str], all: bool| {
            let paths: Vec<Vec<Leg>> = paths.iter().map(|p| parse_path(p).unwrap()).collect();
            let mut found = Vec::new();
            search_in(
                &doc,
                &mut Vec::new(),
                &Under::of(&doc, &paths),
                pattern,
                '\\',
                all,
                &mut found,
            );
            found
        };
        assert_eq!(find("x%", &[], true), ["$.a", "$.b[1]", "$.c.a"]);
        assert_eq!(find("x%", &[], false), ["$.a"]);
        assert_eq!(find("X", &["$.c", "$.b[*]"], true), ["$.b[1]", "$.c.a"]);
        assert_eq!(find("true", &[], true), ["$.b[3]"]);
        assert!(find("null", &[], true).is_empty());
    }

    #[test]
    fn paths_select_members_and_elements_in_order() {
        let j = parse(r#"{"a": [{"x": 1}, {"x": 2}], "b c": 3}"#).unwrap();
        let get = |p: &str| {
            let mut out = Vec::new();
            select(&j, &parse_path(p).unwrap(), &mut out);
            out.into_iter().map(write).collect::<Vec<_>>()
        };
        assert_eq!(get("$.a[1].x"), ["2"]);
        assert_eq!(get("$.a[*].x"), ["1", "2"]);
        assert_eq!(get("$.\"b c\""), ["3"]);
        assert_eq!(get("$.*").len(), 2);
        assert!(get("$.z").is_empty());
        assert!(parse_path("a").is_err());
        assert!(parse_path("$.").is_err());
        assert!(parse_path("$[x]").is_err());
    }
}
