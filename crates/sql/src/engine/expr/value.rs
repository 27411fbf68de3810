//! [`Val`]: a value while an expression is evaluated, with MySQL's
//! conversions between numbers, strings and temporal values.

use std::cmp::Ordering;
use std::fmt::Write as _;

use crate::value::{Date, Time};

/// Digits after the point a decimal division adds (MySQL's
/// `div_precision_increment` default).
pub const DIV_PRECISION_INCREMENT_DIGITS: u8 = 4;
/// Most digits after the point a decimal keeps (MySQL's 30).
pub const DECIMAL_SCALE_MAX: u8 = 30;
/// Most digits of a DECIMAL type (MySQL's precision limit, 65): of a
/// column, a CAST, a UNION's or CASE's decimal column.
pub const DECIMAL_DIGITS_MAX: u32 = 65;

/// A decimal's digits: a 256-bit integer holds every number of up to 76
/// digits, so that a value or an intermediate result may have more digits
/// than a DECIMAL type (MariaDB's hold 81: `65 nines + 1` is a number
/// before it is stored); past 76, arithmetic is out of range (1690).
pub type Mantissa = ethnum::I256;

/// Integers below this are exact doubles (2^53).
const EXACT_DOUBLE_INTEGER_LIMIT: f64 = 9_007_199_254_740_992.0;

/// The largest power of ten that is an exact double (10^22).
const EXACT_DOUBLE_POWER_OF_TEN_MAX: u8 = 22;
/// Microseconds in a second.
pub const MICROS_PER_SECOND: i64 = 1_000_000;
/// Microseconds in a day.
pub const MICROS_PER_DAY: i64 = 86_400 * MICROS_PER_SECOND;

/// An exact decimal: `mantissa / 10^scale`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dec {
    /// The digits, signed; never more than [`MANTISSA_DIGITS_MAX`] of them
    /// once a result is checked ([`Dec::checked`]).
    pub mantissa: Mantissa,
    /// Digits after the point.
    pub scale: u8,
}

/// A value during evaluation.
#[derive(Clone, Debug, PartialEq)]
pub enum Val {
    /// SQL NULL.
    Null,
    /// A signed integer.
    Int(i64),
    /// An unsigned integer (UNSIGNED columns, values past `i64::MAX`).
    UInt(u64),
    /// An exact decimal.
    Dec(Dec),
    /// A double.
    Double(f64),
    /// A string (UTF-8 for character data; bytes for binary).
    Str(Vec<u8>),
    /// A date.
    Date(Date),
    /// A date and time.
    DateTime(Date, Time),
    /// A duration in microseconds (TIME).
    Time(i64),
}

/// Digits a [`Mantissa`] holds whatever they are (10^76 < 2^255).
pub const MANTISSA_DIGITS_MAX: u32 = 76;

/// Digits of one word of MariaDB's decimal (`DIG_PER_DEC1`): a quotient
/// keeps whole words of them ([`super::eval::division_digits`]).
pub const DECIMAL_WORD_DIGITS: u32 = 9;

/// 10^n; n at most [`MANTISSA_DIGITS_MAX`].
/// Every power a decimal scales by is read here: a 256-bit `pow` is a few
/// wide multiplications, and every rescale, text and range check of a
/// decimal took one.
pub fn pow10(n: u8) -> Mantissa {
    static POWERS: std::sync::LazyLock<[Mantissa; MANTISSA_DIGITS_MAX as usize + 1]> =
        std::sync::LazyLock::new(|| {
            let mut powers = [Mantissa::ONE; MANTISSA_DIGITS_MAX as usize + 1];
            for i in 1..powers.len() {
                powers[i] = powers[i - 1] * 10i128;
            }
            powers
        });
    assert!(
        u32::from(n) <= MANTISSA_DIGITS_MAX,
        "10^{n} is past what a mantissa holds"
    );
    POWERS[usize::from(n)]
}

/// 10^[`MANTISSA_DIGITS_MAX`]: no decimal's mantissa reaches it.
fn digits_bound() -> Mantissa {
    pow10(MANTISSA_DIGITS_MAX as u8)
}

impl Dec {
    /// `value` with `scale` digits after the point.
    pub fn new(mantissa: impl Into<Mantissa>, scale: u8) -> Dec {
        Dec {
            mantissa: mantissa.into(),
            scale,
        }
    }

    /// [`Dec::new`] when the mantissa has at most [`MANTISSA_DIGITS_MAX`]
    /// digits, as every result of arithmetic must (1690 past them).
    pub fn checked(mantissa: Mantissa, scale: u8) -> Option<Dec> {
        let d = Dec { mantissa, scale };
        d.fits().then_some(d)
    }

    /// Whether its digits are within [`MANTISSA_DIGITS_MAX`].
    pub fn fits(self) -> bool {
        self.mantissa.unsigned_abs() < digits_bound().unsigned_abs()
    }

    /// This value at another scale, rounded half away from zero when
    /// shortened; None when it does not fit.
    pub fn rescale(self, scale: u8) -> Option<Dec> {
        match scale.cmp(&self.scale) {
            Ordering::Equal => Some(self),
            Ordering::Greater => {
                let m = self.mantissa.checked_mul(pow10(scale - self.scale))?;
                Dec::checked(m, scale)
            }
            Ordering::Less => {
                let d = pow10(self.scale - scale);
                let q = self.mantissa / d;
                let r = self.mantissa % d;
                let q = if r.abs() * 2 >= d { q + r.signum() } else { q };
                Some(Dec::new(q, scale))
            }
        }
    }

    /// A double as MariaDB makes a decimal of it: from its shortest
    /// digits (2.675e0 is 2.675, not the 2.67499… it holds in binary), so
    /// that rounding it to a scale rounds those digits once. None for
    /// NaN, an infinity, or one past what a mantissa holds.
    pub fn of_double(f: f64) -> Option<Dec> {
        Dec::parse(&f.to_string())
    }

    /// As a double.
    pub fn to_f64(self) -> f64 {
        // One division of two exact doubles is rounded correctly; past
        // them (digits beyond 2^53, a scale past 10^22, exact doubles
        // both) the decimal's text is read, as MariaDB's `decimal2double`
        // reads it (strtod): dividing an inexact mantissa can miss the
        // nearest double (HEX(18446744073709551615 / -7) ends C00, not A00).
        let m = self.mantissa.as_f64();
        if m.abs() < EXACT_DOUBLE_INTEGER_LIMIT && self.scale <= EXACT_DOUBLE_POWER_OF_TEN_MAX {
            m / 10f64.powi(i32::from(self.scale))
        } else {
            self.to_text()
                .parse()
                .unwrap_or(m / 10f64.powi(i32::from(self.scale)))
        }
    }

    /// Its value rounded to an integer, the nearest of 128 bits past
    /// their range (no integer type of SQL's reaches it: callers clamp
    /// to theirs).
    pub fn round_i128(self) -> i128 {
        self.rescale(0).map_or(0, |d| saturating_i128(d.mantissa))
    }

    /// Parses `[-+]digits[.digits][e[-+]n]`; None when it is not one.
    pub fn parse(text: &str) -> Option<Dec> {
        let text = text.trim();
        let (neg, digits) = match text.as_bytes().first() {
            Some(b'-') => (true, &text[1..]),
            Some(b'+') => (false, &text[1..]),
            _ => (false, text),
        };
        let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
        if int.is_empty() && frac.is_empty() {
            return None;
        }
        if !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
            return None;
        }
        let frac = &frac[..frac.len().min(usize::from(DECIMAL_SCALE_MAX))];
        // Leading zeros are no digits (`000…01` of any length is 1).
        let int = int.trim_start_matches('0');
        let mut m = Mantissa::ZERO;
        for b in int.bytes().chain(frac.bytes()) {
            m = m
                .checked_mul(Mantissa::from(10i128))?
                .checked_add(Mantissa::from(b - b'0'))?;
        }
        let scale = u8::try_from(frac.len()).ok()?;
        Dec::checked(if neg { -m } else { m }, scale)
    }

    /// As MySQL prints it: every digit of the scale.
    pub fn to_text(self) -> String {
        let mut out = String::new();
        if self.mantissa < 0 {
            out.push('-');
        }
        let abs = self.mantissa.unsigned_abs();
        let d = pow10(self.scale).unsigned_abs();
        let _ = write!(out, "{}", abs / d);
        if self.scale > 0 {
            let _ = write!(out, ".{:0width$}", abs % d, width = usize::from(self.scale));
        }
        out
    }

    /// Compares two decimals exactly.
    pub fn cmp_dec(self, other: Dec) -> Ordering {
        let scale = self.scale.max(other.scale);
        match (self.rescale(scale), other.rescale(scale)) {
            (Some(a), Some(b)) => a.mantissa.cmp(&b.mantissa),
            _ => self
                .to_f64()
                .partial_cmp(&other.to_f64())
                .unwrap_or(Ordering::Equal),
        }
    }

    /// Digits of the whole part: 0 for one under 1 (which DECIMAL(M,M)
    /// holds).
    pub fn whole_digits(self) -> u32 {
        digits(self.mantissa.unsigned_abs() / pow10(self.scale).unsigned_abs())
    }

    /// Digits before the point.
    pub fn int_digits(self) -> u32 {
        self.whole_digits().max(1)
    }
}

/// A mantissa as an i128, the nearest limit past its range.
pub fn saturating_i128(m: Mantissa) -> i128 {
    i128::try_from(m).unwrap_or(if m < 0 { i128::MIN } else { i128::MAX })
}

/// Decimal digits of a number (0 for 0).
fn digits(mut n: ethnum::U256) -> u32 {
    let mut count = 0;
    // 10^19 fits a u64: nineteen digits a step, then one at a time.
    let step = ethnum::U256::from(10_000_000_000_000_000_000u64);
    while n >= step {
        n /= step;
        count += 19;
    }
    while n > 0u128 {
        n /= 10u128;
        count += 1;
    }
    count
}

/// Days from 0000-03-01-based civil date (Howard Hinnant's algorithm).
pub fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date of a day number (days since 1970-01-01).
pub fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Microseconds since 1970-01-01 00:00 of a date and time (no time zone).
pub fn datetime_micros(date: Date, time: Time) -> i64 {
    let days = days_from_civil(
        i64::from(date.year),
        i64::from(date.month),
        i64::from(date.day),
    );
    days * MICROS_PER_DAY + time_of_day_micros(time)
}

/// Microseconds since midnight of a time of day.
pub fn time_of_day_micros(time: Time) -> i64 {
    (i64::from(time.hour) * 3600 + i64::from(time.minute) * 60 + i64::from(time.second))
        * MICROS_PER_SECOND
        + i64::from(time.micros)
}

/// The date and time of microseconds since 1970-01-01 00:00; None outside
/// years 0..=9999.
pub fn datetime_of_micros(micros: i64) -> Option<(Date, Time)> {
    let days = micros.div_euclid(MICROS_PER_DAY);
    let rest = micros.rem_euclid(MICROS_PER_DAY);
    let (y, m, d) = civil_from_days(days);
    if !(0..=9999).contains(&y) {
        return None;
    }
    let secs = rest / MICROS_PER_SECOND;
    Some((
        Date {
            year: y as u16,
            month: m as u8,
            day: d as u8,
        },
        Time {
            hour: (secs / 3600) as u8,
            minute: (secs / 60 % 60) as u8,
            second: (secs % 60) as u8,
            micros: (rest % MICROS_PER_SECOND) as u32,
        },
    ))
}

/// Whether a date is a real calendar day.
pub fn date_valid(d: Date) -> bool {
    schema::Date::new(d.year, d.month, d.day).is_valid()
}

/// A number read as a date and time, as MySQL's `number_to_datetime`
/// reads one: 0 is the zero date; `[YY]YYMMDD` and `[YY]YYMMDDhhmmss`,
/// where a two-digit year is 2000-2069 below 70 and 1970-1999 from it,
/// and a shorter number is `MMDD` of 2000 (`101` is 2000-01-01). None for
/// a number between those forms or a day that is not one.
pub fn datetime_of_number(n: u64) -> Option<(Date, Option<Time>)> {
    number_datetime(n, false)
}

/// [`datetime_of_number`], but a zero month or day is kept (a fuzzy date,
/// `20240200`), as MariaDB reads one for an expression: YEAR, MONTH and
/// DAY read its parts, a calendar computation refuses it
/// (`eval::calendar_datetime`). Stored values stay strict.
pub fn datetime_of_number_fuzzy(n: u64) -> Option<(Date, Option<Time>)> {
    number_datetime(n, true)
}

/// The time of day of a date and time's number as a TIME column reads it
/// (MariaDB's `Field_time::store`): its date only in range, month up to
/// 12 and day up to 31 (`20240231123456` is 12:34:56, zero parts too).
pub fn time_of_datetime_number(n: u64) -> Option<Time> {
    let shifted = match n {
        101_000_000..=691_231_235_959 => n + 20_000_000_000_000,
        700_101_000_000..=991_231_235_959 => n + 19_000_000_000_000,
        10_000_101_000_000..=99_991_231_235_959 => n,
        _ => return number_datetime(n, true).map(|(_, t)| t.unwrap_or_default()),
    };
    let (ymd, hms) = (shifted / 1_000_000, shifted % 1_000_000);
    if ymd / 100 % 100 > 12 || ymd % 100 > 31 {
        return None;
    }
    Some(Time {
        hour: u8::try_from(hms / 10_000).ok().filter(|h| *h < 24)?,
        minute: u8::try_from(hms / 100 % 100).ok().filter(|m| *m < 60)?,
        second: u8::try_from(hms % 100).ok().filter(|s| *s < 60)?,
        micros: 0,
    })
}

fn number_datetime(n: u64, fuzzy: bool) -> Option<(Date, Option<Time>)> {
    if n == 0 {
        return Some((Date::default(), None));
    }
    let (full, timed) = match n {
        0..=100 => return None,
        101..=691_231 => ((n + 20_000_000) * 1_000_000, false),
        691_232..=700_100 => return None,
        700_101..=991_231 => ((n + 19_000_000) * 1_000_000, false),
        991_232..=10_000_100 => return None,
        10_000_101..=99_991_231 => (n * 1_000_000, false),
        99_991_232..=100_999_999 => return None,
        101_000_000..=691_231_235_959 => (n + 20_000_000_000_000, true),
        691_231_235_960..=700_100_999_999 => return None,
        700_101_000_000..=991_231_235_959 => (n + 19_000_000_000_000, true),
        991_231_235_960..=10_000_100_999_999 => return None,
        10_000_101_000_000..=99_991_231_235_959 => (n, true),
        _ => return None,
    };
    let (ymd, hms) = (full / 1_000_000, full % 1_000_000);
    let date = Date {
        year: u16::try_from(ymd / 10_000).ok()?,
        month: u8::try_from(ymd / 100 % 100).ok().filter(|m| *m <= 12)?,
        day: u8::try_from(ymd % 100).ok().filter(|d| *d <= 31)?,
    };
    let zero_part = date.month == 0 || date.day == 0;
    if (zero_part && !fuzzy) || (!zero_part && !date_valid(date)) {
        return None;
    }
    if !timed {
        return Some((date, None));
    }
    let time = Time {
        hour: u8::try_from(hms / 10_000).ok().filter(|h| *h < 24)?,
        minute: u8::try_from(hms / 100 % 100).ok().filter(|m| *m < 60)?,
        second: u8::try_from(hms % 100).ok().filter(|s| *s < 60)?,
        micros: 0,
    };
    Some((date, Some(time)))
}

/// Parses `YYYY-MM-DD[ HH:MM:SS[.ffffff]]` (also `T` and other
/// punctuation between parts, and `YYYYMMDD[HHMMSS]`).
pub fn parse_datetime(text: &str) -> Option<(Date, Option<Time>)> {
    datetime_text_parts(text, false, false)
}

/// [`parse_datetime_fuzzy`], but a day past its month's last is kept too
/// (`2024-02-30`), as MariaDB reads text compared with a date
/// (`TIME_FUZZY_DATES | TIME_INVALID_DATES`): it orders by its parts.
pub fn parse_datetime_compared(text: &str) -> Option<(Date, Option<Time>)> {
    datetime_text_parts(text, true, true)
}

/// [`parse_datetime`], but a zero month or day is kept (`2024-00-10`, a
/// fuzzy date), as MariaDB reads text for an expression (see
/// [`datetime_of_number_fuzzy`]).
pub fn parse_datetime_fuzzy(text: &str) -> Option<(Date, Option<Time>)> {
    datetime_text_parts(text, true, false)
}

fn datetime_text_parts(
    text: &str,
    fuzzy: bool,
    invalid_days: bool,
) -> Option<(Date, Option<Time>)> {
    let text = text.trim();
    let nums: Vec<&str> = text
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .collect();
    if nums.len() == 1 && (nums[0].len() == 6 || nums[0].len() == 12) && text.len() == nums[0].len()
    {
        // `YYMMDD[hhmmss]`: the two-digit year as a number's.
        return number_datetime(nums[0].parse().ok()?, fuzzy);
    }
    let parts: Vec<u32> = if nums.len() == 1 && (nums[0].len() == 8 || nums[0].len() == 14) {
        let s = nums[0];
        let mut v: Vec<u32> = vec![
            s[0..4].parse().ok()?,
            s[4..6].parse().ok()?,
            s[6..8].parse().ok()?,
        ];
        if s.len() == 14 {
            v.push(s[8..10].parse().ok()?);
            v.push(s[10..12].parse().ok()?);
            v.push(s[12..14].parse().ok()?);
        }
        v
    } else {
        let mut v = Vec::new();
        for (i, n) in nums.iter().enumerate() {
            if i == 6 {
                let digits = &n[..n.len().min(6)];
                let micros: u32 = digits.parse().ok()?;
                v.push(micros * 10u32.pow(6 - digits.len() as u32));
            } else {
                v.push(n.parse().ok()?);
            }
        }
        v
    };
    // A time may stop after its hour or minute (`2024-01-05 10` is 10:00),
    // as MariaDB reads it, when a space or a `T` parts it from the date
    // (`10:11:12.5` is a time, not a date and an hour).
    if parts.len() < 3 || parts.len() > 7 {
        return None;
    }
    if (parts.len() == 4 || parts.len() == 5) && nums.len() >= 4 {
        let offset = |s: &str| s.as_ptr() as usize - text.as_ptr() as usize;
        let between = &text[offset(nums[2]) + nums[2].len()..offset(nums[3])];
        if !between.contains([' ', 'T']) {
            return None;
        }
    }
    let year = if nums[0].len() <= 2 {
        if parts[0] < 70 {
            parts[0] + 2000
        } else {
            parts[0] + 1900
        }
    } else {
        parts[0]
    };
    let date = Date {
        year: u16::try_from(year).ok().filter(|y| *y <= 9999)?,
        month: u8::try_from(parts[1]).ok().filter(|m| *m <= 12)?,
        day: u8::try_from(parts[2]).ok().filter(|d| *d <= 31)?,
    };
    let zero_part = date.month == 0 || date.day == 0;
    if zero_part && !fuzzy && date != Date::default() {
        return None;
    }
    if !zero_part && !invalid_days && !date_valid(date) {
        return None;
    }
    if parts.len() == 3 {
        return Some((date, None));
    }
    let time = Time {
        hour: u8::try_from(parts[3]).ok().filter(|h| *h < 24)?,
        minute: u8::try_from(parts.get(4).copied().unwrap_or(0))
            .ok()
            .filter(|m| *m < 60)?,
        second: u8::try_from(parts.get(5).copied().unwrap_or(0))
            .ok()
            .filter(|s| *s < 60)?,
        micros: parts.get(6).copied().unwrap_or(0),
    };
    Some((date, Some(time)))
}

/// Parses a TIME: `[-][D ]HH:MM[:SS[.ffffff]]` or `[-]HHMMSS`.
pub fn parse_time(text: &str) -> Option<i64> {
    let text = text.trim();
    let (neg, rest) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (days, rest) = match rest.split_once(' ') {
        Some((d, r)) => (d.parse::<i64>().ok()?, r),
        None => (0, rest),
    };
    let (whole, frac) = rest.split_once('.').unwrap_or((rest, ""));
    let fields: Vec<i64> = if whole.contains(':') {
        whole
            .split(':')
            .map(|p| p.parse::<i64>().ok())
            .collect::<Option<_>>()?
    } else {
        let n: i64 = whole.parse().ok()?;
        vec![n / 10_000, n / 100 % 100, n % 100]
    };
    let (h, m, s) = match fields.as_slice() {
        [h, m] => (*h, *m, 0),
        [h, m, s] => (*h, *m, *s),
        _ => return None,
    };
    if m >= 60 || s >= 60 {
        return None;
    }
    let digits = &frac[..frac.len().min(6)];
    let micros = if digits.is_empty() {
        0
    } else {
        digits.parse::<i64>().ok()? * 10i64.pow(6 - digits.len() as u32)
    };
    let hours = days.checked_mul(24)?.checked_add(h)?;
    let secs = hours.checked_mul(3600)?.checked_add(m * 60 + s)?;
    let total = secs.checked_mul(MICROS_PER_SECOND)?.checked_add(micros)?;
    Some(if neg { -total } else { total })
}

/// A TIME's text: `[-]HH:MM:SS[.ffffff]` with `fsp` digits.
pub fn time_text(micros: i64, fsp: u8) -> String {
    let neg = micros < 0;
    let abs = micros.unsigned_abs();
    let secs = abs / 1_000_000;
    let mut out = format!(
        "{}{:02}:{:02}:{:02}",
        if neg { "-" } else { "" },
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    );
    push_fraction(&mut out, (abs % 1_000_000) as u32, fsp);
    out
}

fn push_fraction(out: &mut String, micros: u32, fsp: u8) {
    if fsp > 0 {
        let digits = format!("{micros:06}");
        out.push('.');
        out.push_str(&digits[..usize::from(fsp.min(6))]);
    }
}

/// A date's text.
pub fn date_text(d: Date) -> String {
    format!("{:04}-{:02}-{:02}", d.year, d.month, d.day)
}

/// A datetime's text with `fsp` fractional digits.
pub fn datetime_text(d: Date, t: Time, fsp: u8) -> String {
    let mut out = format!(
        "{} {:02}:{:02}:{:02}",
        date_text(d),
        t.hour,
        t.minute,
        t.second
    );
    push_fraction(&mut out, t.micros, fsp);
    out
}

/// `bytes` made UTF-8 text the way MariaDB converts bytes into utf8mb4:
/// every byte of an invalid or cut sequence is '?'. None when they are
/// text already; else the text and the offset of the first bad byte.
pub fn utf8_replaced(bytes: &[u8]) -> Option<(String, usize)> {
    let first_bad = std::str::from_utf8(bytes).err()?.valid_up_to();
    let mut out = String::with_capacity(bytes.len());
    let mut rest = bytes;
    loop {
        match std::str::from_utf8(rest) {
            Ok(text) => {
                out.push_str(text);
                return Some((out, first_bad));
            }
            Err(e) => {
                let (good, tail) = rest.split_at(e.valid_up_to());
                // `good` is UTF-8: the error says so.
                out.push_str(std::str::from_utf8(good).unwrap_or_default());
                let bad = e.error_len().unwrap_or(tail.len());
                out.extend(std::iter::repeat_n('?', bad));
                rest = &tail[bad..];
            }
        }
    }
}

/// A byte as MariaDB's messages show one of a bad string: printable ASCII
/// as it is, any other `\xHH`.
pub fn push_shown_byte(out: &mut String, b: u8) {
    if (0x20..0x7f).contains(&b) {
        out.push(char::from(b));
    } else {
        out.push_str(&format!("\\x{b:02X}"));
    }
}

/// A number prefix ([`str_number_prefix`]) read as a double, and whether
/// it lay past a double's range: then the nearest finite limit, never an
/// infinity, as MariaDB's `my_strtod` gives ±DBL_MAX (`'1e400' + 0` is
/// 1.7976931348623157e308 with 1292; a DOUBLE column refuses it, 1264).
pub fn prefix_double(prefix: &str) -> (f64, bool) {
    let f = prefix.parse::<f64>().unwrap_or(0.0);
    if f.is_infinite() {
        (f64::MAX.copysign(f), true)
    } else {
        (f, false)
    }
}

/// How a string reads as a number: the longest numeric prefix, and
/// whether the whole string was that number (MySQL warns 1292 when not).
pub fn str_number_prefix(text: &str) -> (&str, bool) {
    let trimmed = text.trim_start();
    let b = trimmed.as_bytes();
    let mut i = 0;
    if i < b.len() && (b[i] == b'-' || b[i] == b'+') {
        i += 1;
    }
    let digits_start = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    if i < b.len() && b[i] == b'.' {
        i += 1;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
    }
    let mantissa_digits = i > digits_start && !(i == digits_start + 1 && b[digits_start] == b'.');
    if mantissa_digits && i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        let mut j = i + 1;
        if j < b.len() && (b[j] == b'-' || b[j] == b'+') {
            j += 1;
        }
        let exp_start = j;
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        if j > exp_start {
            i = j;
        }
    }
    let prefix = if mantissa_digits { &trimmed[..i] } else { "" };
    let whole = mantissa_digits && trimmed[i..].trim().is_empty();
    (prefix, whole)
}

impl Val {
    /// Whether this is NULL.
    pub fn is_null(&self) -> bool {
        matches!(self, Val::Null)
    }

    /// A string value.
    pub fn str(s: impl Into<String>) -> Val {
        Val::Str(s.into().into_bytes())
    }

    /// The value as text (what CONCAT and the text protocol see).
    pub fn to_text(&self) -> String {
        match self {
            Val::Null => String::new(),
            Val::Int(v) => v.to_string(),
            Val::UInt(v) => v.to_string(),
            Val::Dec(d) => d.to_text(),
            Val::Double(v) => double_text(*v),
            Val::Str(b) => String::from_utf8_lossy(b).into_owned(),
            Val::Date(d) => date_text(*d),
            Val::DateTime(d, t) => datetime_text(*d, *t, if t.micros == 0 { 0 } else { 6 }),
            Val::Time(m) => time_text(*m, if m % 1_000_000 == 0 { 0 } else { 6 }),
        }
    }

    /// As a double (strings by their numeric prefix; the flag says the
    /// string was not wholly a number).
    pub fn to_f64(&self) -> (f64, bool) {
        match self {
            Val::Null => (0.0, false),
            Val::Int(v) => (*v as f64, false),
            Val::UInt(v) => (*v as f64, false),
            Val::Dec(d) => (d.to_f64(), false),
            Val::Double(v) => (*v, false),
            Val::Str(b) => {
                let text = String::from_utf8_lossy(b);
                let (prefix, whole) = str_number_prefix(&text);
                let (f, overflowed) = prefix_double(prefix);
                (f, !whole || overflowed)
            }
            Val::Date(_) | Val::DateTime(..) | Val::Time(_) => {
                (self.temporal_number().to_f64(), false)
            }
        }
    }

    /// A temporal value as MySQL's number (20240102, 20240102030405, 10203).
    pub fn temporal_number(&self) -> Dec {
        match self {
            Val::Date(d) => Dec::new(
                i128::from(d.year) * 10_000 + i128::from(d.month) * 100 + i128::from(d.day),
                0,
            ),
            Val::DateTime(d, t) => {
                let whole =
                    (i128::from(d.year) * 10_000 + i128::from(d.month) * 100 + i128::from(d.day))
                        * 1_000_000
                        + i128::from(t.hour) * 10_000
                        + i128::from(t.minute) * 100
                        + i128::from(t.second);
                if t.micros == 0 {
                    Dec::new(whole, 0)
                } else {
                    Dec::new(whole * 1_000_000 + i128::from(t.micros), 6)
                }
            }
            Val::Time(m) => {
                let abs = m.unsigned_abs();
                let secs = abs / 1_000_000;
                let whole = i128::from(secs / 3600 * 10_000 + secs / 60 % 60 * 100 + secs % 60);
                let sign = if *m < 0 { -1 } else { 1 };
                let micros = abs % 1_000_000;
                if micros == 0 {
                    Dec::new(sign * whole, 0)
                } else {
                    Dec::new(sign * (whole * 1_000_000 + i128::from(micros)), 6)
                }
            }
            _ => Dec::new(0, 0),
        }
    }

    /// Whether the value is true in a condition (NULL: None).
    pub fn truth(&self) -> Option<bool> {
        match self {
            Val::Null => None,
            Val::Int(v) => Some(*v != 0),
            Val::UInt(v) => Some(*v != 0),
            Val::Dec(d) => Some(d.mantissa != 0),
            Val::Double(v) => Some(*v != 0.0),
            other => Some(other.to_f64().0 != 0.0),
        }
    }
}

/// A double as MySQL prints it (shortest form that reads back, `1e20`
/// style for large and small magnitudes).
pub fn double_text(v: f64) -> String {
    if v.is_nan() || v.is_infinite() {
        return "NULL".into();
    }
    if v == 0.0 {
        return "0".into();
    }
    let abs = v.abs();
    if (1e-15..1e15).contains(&abs) {
        let mut s = format!("{v}");
        if s.contains('e') {
            s = format!("{v:e}");
        }
        s
    } else {
        let s = format!("{v:e}");
        // Rust writes 1e20 / 1.5e-20; MySQL 1e20 / 1.5e-20 too.
        s
    }
}
