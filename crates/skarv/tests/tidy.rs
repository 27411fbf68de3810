//! Tidy: what the compiler and clippy do not catch, checked over every Rust
//! file of the workspace.

use std::path::{Path, PathBuf};

/// Longest source line, in characters (rustfmt keeps code to 100; this
/// bounds comments, strings and macro input, which it does not wrap).
const LINE_LENGTH_MAX_CHARS: usize = 130;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn sources_are_tidy() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    rust_files(&crates, &mut files);
    assert!(
        files.len() > 20,
        "found only {} files under {}",
        files.len(),
        crates.display()
    );
    let forbidden = [
        concat!("dbg", "!("),
        concat!("todo", "!("),
        concat!("unimplemented", "!("),
    ];
    let mut problems = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (number, line) in text.lines().enumerate() {
            let at = format!("{}:{}", file.display(), number + 1);
            // Tables in doc comments cannot wrap.
            let doc_table = line.trim_start().starts_with("//! |");
            if line.chars().count() > LINE_LENGTH_MAX_CHARS && !doc_table {
                problems.push(format!(
                    "{at}: longer than {LINE_LENGTH_MAX_CHARS} characters"
                ));
            }
            for word in forbidden {
                if line.contains(word) {
                    problems.push(format!("{at}: {word}"));
                }
            }
            if line.ends_with(' ') || line.contains('\t') {
                problems.push(format!("{at}: trailing space or tab"));
            }
        }
        if !text.starts_with("//!") && !file.ends_with("main.rs") {
            // Every module says why it exists.
            let first = text.lines().next().unwrap_or("");
            if !first.starts_with("//!") {
                problems.push(format!(
                    "{}: no //! module doc on the first line",
                    file.display()
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
