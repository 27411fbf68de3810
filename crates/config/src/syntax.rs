//! The text of `config.ini` as sections of `name=value` lines, each with its
//! line number for messages. What names and values mean is decided in
//! `parameters` and `cluster`; this module only knows NDB's file syntax:
//!
//! - `[section]` headers, names case-insensitive, with NDB's aliases;
//! - `name=value` or `name: value`, both sides trimmed;
//! - comments: `#` to the end of any line, `;` at the start of a line
//!   (so a `;` inside a value is kept);
//! - blank lines.

use crate::error::{ConfigError, ConfigErrorKind};

/// What a section configures.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum SectionKind {
    DataDefault,
    Data,
    MgmDefault,
    Mgm,
    /// `[api default]` and `[mysqld default]`: NDB treats them as one.
    ApiDefault,
    Api {
        mysqld: bool,
    },
    /// Transporter defaults: accepted so that NDB files load, not used.
    TcpDefault,
}

/// The sections a file may have, for messages.
pub(crate) const SECTIONS_ALLOWED: &str = "[ndbd default], [ndbd], [ndb_mgmd default], \
     [ndb_mgmd], [api default], [api], [mysqld default], [mysqld], [tcp default], and NDB's \
     aliases [db default], [db], [mgm default], [mgm]";

impl SectionKind {
    pub(crate) fn is_default(self) -> bool {
        matches!(
            self,
            SectionKind::DataDefault
                | SectionKind::MgmDefault
                | SectionKind::ApiDefault
                | SectionKind::TcpDefault
        )
    }

    /// The section a node of this kind (or of this default) is defined in.
    pub(crate) fn node_section_name(self) -> &'static str {
        match self {
            SectionKind::DataDefault | SectionKind::Data => "[ndbd]",
            SectionKind::MgmDefault | SectionKind::Mgm => "[ndb_mgmd]",
            SectionKind::ApiDefault | SectionKind::Api { .. } => "[api]",
            SectionKind::TcpDefault => "[tcp]",
        }
    }

    /// The kind named by a header's text (between the brackets).
    fn from_header(name: &str) -> Option<SectionKind> {
        let words: Vec<String> = name
            .split_whitespace()
            .map(|word| word.to_ascii_lowercase())
            .collect();
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        let kind = match words.as_slice() {
            ["ndbd" | "db", "default"] => SectionKind::DataDefault,
            ["ndbd" | "db"] => SectionKind::Data,
            ["ndb_mgmd" | "mgm", "default"] => SectionKind::MgmDefault,
            ["ndb_mgmd" | "mgm"] => SectionKind::Mgm,
            ["api" | "mysqld", "default"] => SectionKind::ApiDefault,
            ["api"] => SectionKind::Api { mysqld: false },
            ["mysqld"] => SectionKind::Api { mysqld: true },
            ["tcp", "default"] => SectionKind::TcpDefault,
            _ => return None,
        };
        Some(kind)
    }
}

/// One `[section]` and the parameters under it.
#[derive(Clone, Debug)]
pub(crate) struct Section {
    pub kind: SectionKind,
    /// The header as written, e.g. `[DB]`, for messages.
    pub header: String,
    pub line: usize,
    pub entries: Vec<Entry>,
}

/// One `name=value` line.
#[derive(Clone, Debug)]
pub(crate) struct Entry {
    /// As written (trimmed); matched case-insensitively later.
    pub name: String,
    /// Trimmed; may be empty.
    pub value: String,
    pub line: usize,
}

/// Splits `text` into sections; refuses lines that are neither a header, a
/// parameter, a comment nor blank, unknown sections, and parameters before
/// the first section.
pub(crate) fn parse_sections(text: &str, source_name: &str) -> Result<Vec<Section>, ConfigError> {
    let mut sections: Vec<Section> = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        let content = strip_comment(raw).trim();
        if content.is_empty() {
            continue;
        }
        if content.starts_with('[') {
            sections.push(parse_header(content, line, source_name)?);
            continue;
        }
        let entry = parse_entry(content, line, source_name)?;
        match sections.last_mut() {
            Some(section) => section.entries.push(entry),
            None => {
                return Err(ConfigError::at(
                    source_name,
                    line,
                    ConfigErrorKind::OutsideSection {
                        parameter: entry.name,
                    },
                ))
            }
        }
    }
    Ok(sections)
}

fn strip_comment(raw: &str) -> &str {
    if raw.trim_start().starts_with(';') {
        return "";
    }
    match raw.find('#') {
        Some(start) => &raw[..start],
        None => raw,
    }
}

fn parse_header(content: &str, line: usize, source_name: &str) -> Result<Section, ConfigError> {
    assert!(content.starts_with('['));
    let Some(name) = content.strip_prefix('[').and_then(|c| c.strip_suffix(']')) else {
        return Err(ConfigError::at(
            source_name,
            line,
            ConfigErrorKind::UnclosedHeader {
                text: content.to_string(),
            },
        ));
    };
    let kind = SectionKind::from_header(name).ok_or_else(|| {
        ConfigError::at(
            source_name,
            line,
            ConfigErrorKind::UnknownSection {
                name: name.trim().to_string(),
                allowed: SECTIONS_ALLOWED,
            },
        )
    })?;
    Ok(Section {
        kind,
        header: format!("[{}]", name.trim()),
        line,
        entries: Vec::new(),
    })
}

/// `name=value` or `name: value`: the first `=` or `:` separates them, so
/// a value may hold either (`HostName: fe80::1`, `DataDir=C:\data`).
fn parse_entry(content: &str, line: usize, source_name: &str) -> Result<Entry, ConfigError> {
    let syntax_error = || {
        ConfigError::at(
            source_name,
            line,
            ConfigErrorKind::Syntax {
                text: content.to_string(),
            },
        )
    };
    let split = content.find(['=', ':']).ok_or_else(syntax_error)?;
    let name = content[..split].trim();
    let value = content[split + 1..].trim();
    let name_ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !name_ok {
        return Err(syntax_error());
    }
    Ok(Entry {
        name: name.to_string(),
        value: value.to_string(),
        line,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sections(text: &str) -> Vec<Section> {
        match parse_sections(text, "t.ini") {
            Ok(sections) => sections,
            Err(error) => panic!("{text:?}: {error}"),
        }
    }

    #[test]
    fn headers_entries_comments_and_lines() {
        let text = "# top comment\n\n[NDBD  Default]\nNoOfReplicas = 2 # two copies\n\
                    ; a comment\n  DataMemory: 2G\n[DB]\nHostName=fe80::1\nDataDir=/a;b\n";
        let sections = sections(text);
        assert_eq!(sections.len(), 2);
        assert_eq!(sections[0].kind, SectionKind::DataDefault);
        assert_eq!(sections[0].header, "[NDBD  Default]");
        assert_eq!(sections[0].line, 3);
        let entries: Vec<(&str, &str, usize)> = sections[0]
            .entries
            .iter()
            .map(|e| (e.name.as_str(), e.value.as_str(), e.line))
            .collect();
        assert_eq!(entries, [("NoOfReplicas", "2", 4), ("DataMemory", "2G", 6)]);
        assert_eq!(sections[1].kind, SectionKind::Data);
        assert_eq!(sections[1].entries[0].value, "fe80::1");
        assert_eq!(sections[1].entries[1].value, "/a;b");
    }

    #[test]
    fn every_section_name_and_alias() {
        let cases = [
            ("ndbd default", SectionKind::DataDefault),
            ("DB DEFAULT", SectionKind::DataDefault),
            ("ndbd", SectionKind::Data),
            ("db", SectionKind::Data),
            ("ndb_mgmd default", SectionKind::MgmDefault),
            ("MGM DEFAULT", SectionKind::MgmDefault),
            ("ndb_mgmd", SectionKind::Mgm),
            ("MGM", SectionKind::Mgm),
            ("api default", SectionKind::ApiDefault),
            ("mysqld default", SectionKind::ApiDefault),
            ("API", SectionKind::Api { mysqld: false }),
            ("mysqld", SectionKind::Api { mysqld: true }),
            ("TCP DEFAULT", SectionKind::TcpDefault),
        ];
        for (name, kind) in cases {
            assert_eq!(SectionKind::from_header(name), Some(kind), "{name}");
        }
        for name in ["tcp", "computer", "ndbd defaults", "", "shm"] {
            assert_eq!(SectionKind::from_header(name), None, "{name}");
        }
    }

    #[test]
    fn bad_lines_are_refused_with_their_line() {
        let cases = [
            ("[ndbd]\nDataMemory\n", "t.ini:2: expected \"[section]\""),
            ("[ndbd]\n=5\n", "t.ini:2: expected"),
            (
                "[ndbd\n",
                "t.ini:1: section header \"[ndbd\" has no closing \"]\"",
            ),
            (
                "\n[computer]\n",
                "t.ini:2: unknown section [computer]; allowed: [ndbd default]",
            ),
            (
                "NoOfReplicas=2\n[ndbd]\n",
                "t.ini:1: parameter \"NoOfReplicas\" comes before",
            ),
        ];
        for (text, expected) in cases {
            let message = match parse_sections(text, "t.ini") {
                Ok(sections) => panic!("{text:?} parsed: {sections:?}"),
                Err(error) => error.to_string(),
            };
            assert!(message.starts_with(expected), "{message:?} vs {expected:?}");
        }
    }
}
