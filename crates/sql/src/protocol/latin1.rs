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
}
