//! The number formats of MariaDB's locales (`FORMAT(x, d, locale)`):
//! each locale's decimal point, thousands separator and grouping, as
//! MariaDB 10.11 gives them (read from it by formatting
//! 1234567890123.5 under every name of two letters, an underscore and
//! two capitals; `bg_BG`'s separator is a NUL byte there, and so here).

/// How the whole digits are grouped, from the point leftwards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grouping {
    /// No separators.
    None,
    /// Threes: 1,234,567.
    Thousands,
    /// Three, then twos: 12,34,567 (Indian).
    Lakhs,
}

/// A locale's number format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NumberFormat {
    pub decimal_point: u8,
    pub thousands_separator: u8,
    pub grouping: Grouping,
}

/// `en_US`'s: what FORMAT uses without a locale or with an unknown one.
pub const EN_US: NumberFormat = NumberFormat {
    decimal_point: b'.',
    thousands_separator: b',',
    grouping: Grouping::Thousands,
};

/// MariaDB's locales by name, sorted: decimal point, thousands separator,
/// grouping.
const LOCALES: [(&str, u8, u8, Grouping); 113] = [
    ("ar_AE", b'.', b',', Grouping::Thousands),
    ("ar_BH", b'.', b',', Grouping::Thousands),
    ("ar_DZ", b'.', b',', Grouping::Thousands),
    ("ar_EG", b'.', b',', Grouping::Thousands),
    ("ar_IN", b'.', b',', Grouping::Thousands),
    ("ar_IQ", b'.', b',', Grouping::Thousands),
    ("ar_JO", b'.', b',', Grouping::Thousands),
    ("ar_KW", b'.', b',', Grouping::Thousands),
    ("ar_LB", b'.', b',', Grouping::Thousands),
    ("ar_LY", b'.', b',', Grouping::Thousands),
    ("ar_MA", b'.', b',', Grouping::Thousands),
    ("ar_OM", b'.', b',', Grouping::Thousands),
    ("ar_QA", b'.', b',', Grouping::Thousands),
    ("ar_SA", b'.', 0, Grouping::None),
    ("ar_SD", b'.', b',', Grouping::Thousands),
    ("ar_SY", b'.', b',', Grouping::Thousands),
    ("ar_TN", b'.', b',', Grouping::Thousands),
    ("ar_YE", b'.', b',', Grouping::Thousands),
    ("be_BY", b',', b'.', Grouping::Thousands),
    ("bg_BG", b',', b'\0', Grouping::Thousands),
    ("ca_ES", b',', 0, Grouping::None),
    ("cs_CZ", b',', b' ', Grouping::Thousands),
    ("da_DK", b',', b'.', Grouping::Thousands),
    ("de_AT", b',', 0, Grouping::None),
    ("de_BE", b',', b'.', Grouping::Thousands),
    ("de_CH", b'.', b'\'', Grouping::Thousands),
    ("de_DE", b',', b'.', Grouping::Thousands),
    ("de_LU", b',', b'.', Grouping::Thousands),
    ("el_GR", b',', 0, Grouping::None),
    ("en_AU", b'.', b',', Grouping::Thousands),
    ("en_CA", b'.', b',', Grouping::Thousands),
    ("en_GB", b'.', b',', Grouping::Thousands),
    ("en_IN", b'.', b',', Grouping::Lakhs),
    ("en_NZ", b'.', b',', Grouping::Thousands),
    ("en_PH", b'.', b',', Grouping::Thousands),
    ("en_US", b'.', b',', Grouping::Thousands),
    ("en_ZA", b'.', b',', Grouping::Thousands),
    ("en_ZW", b'.', b',', Grouping::Thousands),
    ("es_AR", b',', b'.', Grouping::Thousands),
    ("es_BO", b',', b'.', Grouping::Thousands),
    ("es_CL", b',', b'.', Grouping::Thousands),
    ("es_CO", b',', b'.', Grouping::Thousands),
    ("es_CR", b',', b' ', Grouping::Thousands),
    ("es_DO", b'.', b',', Grouping::Thousands),
    ("es_EC", b',', b'.', Grouping::Thousands),
    ("es_ES", b',', b'.', Grouping::Thousands),
    ("es_GT", b'.', b',', Grouping::Thousands),
    ("es_HN", b'.', b',', Grouping::Thousands),
    ("es_MX", b'.', b',', Grouping::Thousands),
    ("es_NI", b'.', b',', Grouping::Thousands),
    ("es_PA", b'.', b',', Grouping::Thousands),
    ("es_PE", b'.', b',', Grouping::Thousands),
    ("es_PR", b'.', b',', Grouping::Thousands),
    ("es_PY", b',', b'.', Grouping::Thousands),
    ("es_SV", b'.', b',', Grouping::Thousands),
    ("es_US", b'.', b',', Grouping::Thousands),
    ("es_UY", b',', b'.', Grouping::Thousands),
    ("es_VE", b',', b'.', Grouping::Thousands),
    ("et_EE", b',', b' ', Grouping::Thousands),
    ("eu_ES", b',', 0, Grouping::None),
    ("fi_FI", b',', b' ', Grouping::Thousands),
    ("fo_FO", b',', b'.', Grouping::Thousands),
    ("fr_BE", b',', 0, Grouping::None),
    ("fr_CA", b',', 0, Grouping::None),
    ("fr_CH", b',', 0, Grouping::None),
    ("fr_FR", b',', 0, Grouping::None),
    ("fr_LU", b',', 0, Grouping::None),
    ("gl_ES", b',', 0, Grouping::None),
    ("gu_IN", b'.', b',', Grouping::Thousands),
    ("he_IL", b'.', b',', Grouping::Thousands),
    ("hi_IN", b'.', b',', Grouping::Thousands),
    ("hr_HR", b',', 0, Grouping::None),
    ("hu_HU", b',', b'.', Grouping::Thousands),
    ("id_ID", b',', b'.', Grouping::Thousands),
    ("is_IS", b',', b'.', Grouping::Thousands),
    ("it_CH", b',', b'\'', Grouping::Thousands),
    ("it_IT", b',', 0, Grouping::None),
    ("ja_JP", b'.', b',', Grouping::Thousands),
    ("ka_GE", b',', b' ', Grouping::Thousands),
    ("ko_KR", b'.', b',', Grouping::Thousands),
    ("lt_LT", b',', b'.', Grouping::Thousands),
    ("lv_LV", b',', b' ', Grouping::Thousands),
    ("mk_MK", b',', b' ', Grouping::Thousands),
    ("mn_MN", b',', b'.', Grouping::Thousands),
    ("ms_MY", b'.', b',', Grouping::Thousands),
    ("nb_NO", b',', b'.', Grouping::Thousands),
    ("nl_BE", b',', 0, Grouping::None),
    ("nl_NL", b',', 0, Grouping::None),
    ("no_NO", b',', b'.', Grouping::Thousands),
    ("pl_PL", b',', 0, Grouping::None),
    ("pt_BR", b',', 0, Grouping::None),
    ("pt_PT", b',', 0, Grouping::None),
    ("rm_CH", b',', b'\'', Grouping::Thousands),
    ("ro_RO", b',', b'.', Grouping::Thousands),
    ("ru_RU", b',', b' ', Grouping::Thousands),
    ("ru_UA", b',', b'.', Grouping::Thousands),
    ("sk_SK", b',', b' ', Grouping::Thousands),
    ("sl_SI", b',', 0, Grouping::None),
    ("sq_AL", b',', b'.', Grouping::Thousands),
    ("sr_RS", b'.', 0, Grouping::None),
    ("sr_YU", b'.', 0, Grouping::None),
    ("sv_FI", b',', b' ', Grouping::Thousands),
    ("sv_SE", b',', b' ', Grouping::Thousands),
    ("ta_IN", b'.', b',', Grouping::Lakhs),
    ("te_IN", b'.', b',', Grouping::Lakhs),
    ("th_TH", b'.', b',', Grouping::Thousands),
    ("tr_TR", b',', b'.', Grouping::Thousands),
    ("uk_UA", b',', b'.', Grouping::Thousands),
    ("ur_PK", b'.', b',', Grouping::Thousands),
    ("vi_VN", b',', b'.', Grouping::Thousands),
    ("zh_CN", b'.', b',', Grouping::Thousands),
    ("zh_HK", b'.', b',', Grouping::Thousands),
    ("zh_TW", b'.', b',', Grouping::Thousands),
];

/// The number format of a locale, its name in any case (`de_de`).
pub fn number_format(name: &str) -> Option<NumberFormat> {
    LOCALES
        .binary_search_by(|(n, ..)| cmp_ignoring_case(n, name))
        .ok()
        .map(|at| {
            let (_, decimal_point, thousands_separator, grouping) = LOCALES[at];
            NumberFormat {
                decimal_point,
                thousands_separator,
                grouping,
            }
        })
}

fn cmp_ignoring_case(a: &str, b: &str) -> std::cmp::Ordering {
    a.bytes()
        .map(|c| c.to_ascii_lowercase())
        .cmp(b.bytes().map(|c| c.to_ascii_lowercase()))
}

/// `text` (a number as `-123456.78`) with the whole digits grouped and
/// the point as `format` writes them.
pub fn group(text: &str, format: NumberFormat) -> Vec<u8> {
    let (sign, rest) = match text.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", text),
    };
    let (int, frac) = match rest.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (rest, None),
    };
    let mut out = Vec::with_capacity(text.len() + int.len() / 2 + 1);
    out.extend_from_slice(sign.as_bytes());
    let n = int.len();
    for (i, c) in int.bytes().enumerate() {
        // Digits from this one to the point.
        let left = n - i;
        let boundary = i > 0
            && match format.grouping {
                Grouping::None => false,
                Grouping::Thousands => left % 3 == 0,
                Grouping::Lakhs => left == 3 || (left > 3 && (left - 3) % 2 == 0),
            };
        if boundary {
            out.push(format.thousands_separator);
        }
        out.push(c);
    }
    if let Some(f) = frac {
        out.push(format.decimal_point);
        out.extend_from_slice(f.as_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locales_are_sorted_for_the_search() {
        for pair in LOCALES.windows(2) {
            assert!(cmp_ignoring_case(pair[0].0, pair[1].0).is_lt(), "{pair:?}");
        }
    }

    #[test]
    fn numbers_group_as_each_locale_writes_them() {
        let of = |name| number_format(name).expect(name);
        assert_eq!(group("1234567.89", EN_US), b"1,234,567.89");
        assert_eq!(group("-1234567.89", of("de_DE")), b"-1.234.567,89");
        assert_eq!(
            group("1234567890123.5", of("EN_in")),
            b"12,34,56,78,90,123.5"
        );
        assert_eq!(group("123", of("en_IN")), b"123");
        assert_eq!(group("1234", of("en_IN")), b"1,234");
        assert_eq!(group("1234567.89", of("fr_FR")), b"1234567,89");
        assert_eq!(group("1234567", of("de_CH")), b"1'234'567");
        assert_eq!(group("1234", of("bg_BG")), b"1\x00234");
        assert_eq!(number_format("xx_YY"), None);
    }
}
