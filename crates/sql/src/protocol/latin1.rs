//! MySQL's `latin1` (Windows-1252, with the five bytes it leaves undefined
//! taken as the C1 controls of the same number) to and from UTF-8, for
//! clients whose `character_set_client`/`character_set_results` is latin1.

/// What bytes 0x80–0x9F are in MySQL's latin1; the rest are U+0000–U+00FF.
const HIGH_CONTROLS: [char; 32] = [
    '\u{20AC}', '\u{0081}', '\u{201A}', '\u{0192}', '\u{201E}', '\u{2026}', '\u{2020}', '\u{2021}',
    '\u{02C6}', '\u{2030}', '\u{0160}', '\u{2039}', '\u{0152}', '\u{008D}', '\u{017D}', '\u{008F}',
    '\u{0090}', '\u{2018}', '\u{2019}', '\u{201C}', '\u{201D}', '\u{2022}', '\u{2013}', '\u{2014}',
    '\u{02DC}', '\u{2122}', '\u{0161}', '\u{203A}', '\u{0153}', '\u{009D}', '\u{017E}', '\u{0178}',
];

/// latin1 bytes as UTF-8 text (every byte is a character).
pub fn decode(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|&b| match b {
            0x80..=0x9F => HIGH_CONTROLS[usize::from(b - 0x80)],
            _ => char::from(b),
        })
        .collect()
}

/// A latin1 client's statement text as UTF-8, its `_binary'…'` literals
/// kept as the bytes they hold (written as hex literals: `_binary X'FF'`),
/// as MySQL does not convert a binary string.
pub fn decode_statement(sql: &[u8]) -> String {
    let mut out = Vec::with_capacity(sql.len());
    let mut at = 0;
    let mut quote: Option<u8> = None;
    while at < sql.len() {
        let b = sql[at];
        if let Some(q) = quote {
            out.push(b);
            if b == b'\\' && q != b'`' {
                if let Some(&next) = sql.get(at + 1) {
                    out.push(next);
                }
                at += 2;
                continue;
            }
            if b == q {
                quote = None;
            }
            at += 1;
            continue;
        }
        if matches!(b, b'\'' | b'"' | b'`') {
            quote = Some(b);
            out.push(b);
            at += 1;
            continue;
        }
        let word_before = at > 0 && (sql[at - 1].is_ascii_alphanumeric() || sql[at - 1] >= 0x80);
        let introducer =
            !word_before && sql.len() >= at + 7 && sql[at..at + 7].eq_ignore_ascii_case(b"_binary");
        if introducer {
            let mut start = at + 7;
            while sql.get(start).is_some_and(u8::is_ascii_whitespace) {
                start += 1;
            }
            if let Some((bytes, end)) = sql
                .get(start)
                .filter(|q| matches!(q, b'\'' | b'"'))
                .and_then(|_| literal(sql, start))
                // ASCII reads the same either way; kept as written, the
                // literal names its result column as the client wrote it.
                .filter(|(bytes, _)| !bytes.is_ascii())
            {
                out.extend_from_slice(b"_binary X'");
                for byte in bytes {
                    out.extend_from_slice(format!("{byte:02X}").as_bytes());
                }
                out.push(b'\'');
                at = end;
                continue;
            }
        }
        out.push(b);
        at += 1;
    }
    decode(&out)
}

/// The bytes of the quoted literal or identifier at `start` (escapes
/// undone; a backquoted identifier has none) and where the text after it
/// begins; None when it is left open.
pub(super) fn literal(sql: &[u8], start: usize) -> Option<(Vec<u8>, usize)> {
    let quote = sql[start];
    let mut bytes = Vec::new();
    let mut at = start + 1;
    loop {
        match *sql.get(at)? {
            b'\\' if quote != b'`' => {
                let escaped = *sql.get(at + 1)?;
                match escaped {
                    b'0' => bytes.push(0),
                    b'b' => bytes.push(8),
                    b'n' => bytes.push(b'\n'),
                    b'r' => bytes.push(b'\r'),
                    b't' => bytes.push(b'\t'),
                    b'Z' => bytes.push(26),
                    // MySQL keeps the backslash of \% and \_ (LIKE's).
                    b'%' | b'_' => bytes.extend_from_slice(&[b'\\', escaped]),
                    other => bytes.push(other),
                }
                at += 2;
            }
            b if b == quote && sql.get(at + 1) == Some(&quote) => {
                bytes.push(quote);
                at += 2;
            }
            b if b == quote => return Some((bytes, at + 1)),
            b => {
                bytes.push(b);
                at += 1;
            }
        }
    }
}

/// UTF-8 bytes as latin1; a character latin1 lacks (or bytes that are not
/// UTF-8) becomes `?`, as MySQL converts.
pub fn encode(utf8: &[u8]) -> Vec<u8> {
    String::from_utf8_lossy(utf8)
        .chars()
        .map(|c| match u32::from(c) {
            x @ (0..=0x7F | 0xA0..=0xFF) => x as u8,
            _ => HIGH_CONTROLS
                .iter()
                .position(|h| *h == c)
                .map_or(b'?', |at| 0x80 + at as u8),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latin1_round_trips_and_unmapped_characters_become_question_marks() {
        let all: Vec<u8> = (0..=255u8).collect();
        assert_eq!(encode(decode(&all).as_bytes()), all);
        assert_eq!(decode(b"caf\xe9 \x80"), "café €");
        assert_eq!(encode("æøå €".as_bytes()), b"\xe6\xf8\xe5 \x80");
        assert_eq!(encode("中文 ok".as_bytes()), b"?? ok");
    }

    #[test]
    fn binary_literals_keep_their_bytes() {
        assert_eq!(
            decode_statement(b"INSERT INTO t VALUES ('\xe9', _binary'\xff\\0''', _BINARY \"a\")"),
            "INSERT INTO t VALUES ('\u{e9}', _binary X'FF0027', _BINARY \"a\")"
        );
        assert_eq!(
            decode_statement(b"SELECT '_binary\xe9'"),
            "SELECT '_binary\u{e9}'"
        );
        assert_eq!(
            decode_statement(b"SELECT _binary'open"),
            "SELECT _binary'open"
        );
        assert_eq!(
            decode_statement(b"SELECT a_binary'\xe9'"),
            "SELECT a_binary'\u{e9}'"
        );
    }
}
