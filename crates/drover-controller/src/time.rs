//! Instants as the planners see them: a [`Timestamp`] passed in by the
//! caller (the planners never read a clock), and the RFC 3339 text that
//! Kubernetes objects carry (`creationTimestamp`, `lastTransitionTime`,
//! `timeAdded`, …).
//!
//! Objects store seconds (`2024-05-01T12:00:00Z`, like Kubernetes'
//! `metav1.Time`); events may carry microseconds (`metav1.MicroTime`).
//! Parsing accepts any fraction and any UTC offset.
//!
//! ```
//! use drover_controller::time::Timestamp;
//! use std::time::Duration;
//!
//! let t: Timestamp = "2024-05-01T12:00:00.5+02:00".parse().unwrap();
//! assert_eq!(t.to_rfc3339(), "2024-05-01T10:00:00Z");
//! assert_eq!((t + Duration::from_secs(90)).to_rfc3339_micros(), "2024-05-01T10:01:30.500000Z");
//! ```

use std::fmt;
use std::ops::{Add, Sub};
use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const NANOS_PER_SECOND: i64 = 1_000_000_000;
const SECONDS_PER_DAY: i64 = 86_400;

/// An instant: nanoseconds since the Unix epoch (UTC), from 1678 to 2262.
///
/// Arithmetic saturates instead of overflowing, so a far-away deadline
/// never panics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Timestamp(i64);

/// Why a text is not an RFC 3339 time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid RFC 3339 time {text:?}: {reason}")]
pub struct TimestampError {
    /// The text.
    pub text: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl Timestamp {
    /// 1970-01-01T00:00:00Z.
    pub const UNIX_EPOCH: Timestamp = Timestamp(0);
    /// The earliest representable instant.
    pub const MIN: Timestamp = Timestamp(i64::MIN);
    /// The latest representable instant.
    pub const MAX: Timestamp = Timestamp(i64::MAX);

    /// The instant `nanos` nanoseconds after the epoch.
    pub const fn from_unix_nanos(nanos: i64) -> Self {
        Timestamp(nanos)
    }

    /// The instant `millis` milliseconds after the epoch.
    pub const fn from_unix_millis(millis: i64) -> Self {
        Timestamp(millis.saturating_mul(1_000_000))
    }

    /// The instant `seconds` seconds after the epoch.
    pub const fn from_unix_seconds(seconds: i64) -> Self {
        Timestamp(seconds.saturating_mul(NANOS_PER_SECOND))
    }

    /// Nanoseconds since the epoch.
    pub const fn unix_nanos(self) -> i64 {
        self.0
    }

    /// Whole seconds since the epoch (rounded towards the past).
    pub const fn unix_seconds(self) -> i64 {
        self.0.div_euclid(NANOS_PER_SECOND)
    }

    /// The time elapsed from `earlier` to `self`; zero when `earlier` is
    /// not earlier.
    pub fn duration_since(self, earlier: Timestamp) -> Duration {
        let nanos = i128::from(self.0) - i128::from(earlier.0);
        if nanos <= 0 {
            Duration::ZERO
        } else {
            Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
        }
    }

    /// `self + duration`, saturating at [`Timestamp::MAX`].
    pub fn saturating_add(self, duration: Duration) -> Self {
        let nanos = i64::try_from(duration.as_nanos()).unwrap_or(i64::MAX);
        Timestamp(self.0.saturating_add(nanos))
    }

    /// `self - duration`, saturating at [`Timestamp::MIN`].
    pub fn saturating_sub(self, duration: Duration) -> Self {
        let nanos = i64::try_from(duration.as_nanos()).unwrap_or(i64::MAX);
        Timestamp(self.0.saturating_sub(nanos))
    }

    /// Reads an RFC 3339 time: `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`.
    pub fn parse_rfc3339(text: &str) -> Result<Self, TimestampError> {
        parse(text).map_err(|reason| TimestampError {
            text: text.to_owned(),
            reason,
        })
    }

    /// Reads an optional RFC 3339 field of an object; `None` when absent or
    /// not valid.
    pub fn parse_field(field: Option<&str>) -> Option<Self> {
        field.and_then(|text| Timestamp::parse_rfc3339(text).ok())
    }

    /// The RFC 3339 form in UTC with whole seconds, as Kubernetes writes
    /// object times: `2024-05-01T10:00:00Z`.
    pub fn to_rfc3339(self) -> String {
        let (date, time) = self.civil();
        format!("{date}T{time}Z")
    }

    /// The RFC 3339 form in UTC with microseconds, as Kubernetes writes
    /// `eventTime`: `2024-05-01T10:00:00.000000Z`.
    pub fn to_rfc3339_micros(self) -> String {
        let (date, time) = self.civil();
        let micros = self.0.rem_euclid(NANOS_PER_SECOND) / 1_000;
        format!("{date}T{time}.{micros:06}Z")
    }

    fn civil(self) -> (String, String) {
        let seconds = self.unix_seconds();
        let days = seconds.div_euclid(SECONDS_PER_DAY);
        let in_day = seconds.rem_euclid(SECONDS_PER_DAY);
        let (year, month, day) = civil_from_days(days);
        (
            format!("{year:04}-{month:02}-{day:02}"),
            format!(
                "{:02}:{:02}:{:02}",
                in_day / 3600,
                in_day % 3600 / 60,
                in_day % 60
            ),
        )
    }
}

impl Add<Duration> for Timestamp {
    type Output = Timestamp;
    fn add(self, duration: Duration) -> Timestamp {
        self.saturating_add(duration)
    }
}

impl Sub<Duration> for Timestamp {
    type Output = Timestamp;
    fn sub(self, duration: Duration) -> Timestamp {
        self.saturating_sub(duration)
    }
}

impl fmt::Display for Timestamp {
    /// The RFC 3339 form with whole seconds.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

impl FromStr for Timestamp {
    type Err = TimestampError;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Timestamp::parse_rfc3339(text)
    }
}

impl From<SystemTime> for Timestamp {
    fn from(time: SystemTime) -> Self {
        match time.duration_since(UNIX_EPOCH) {
            Ok(after) => Timestamp::UNIX_EPOCH.saturating_add(after),
            Err(before) => Timestamp::UNIX_EPOCH.saturating_sub(before.duration()),
        }
    }
}

impl From<Timestamp> for SystemTime {
    fn from(time: Timestamp) -> Self {
        let magnitude = Duration::from_nanos(time.0.unsigned_abs());
        if time.0 >= 0 {
            UNIX_EPOCH + magnitude
        } else {
            UNIX_EPOCH - magnitude
        }
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year.rem_euclid(400);
    let month_from_march = (month + 9) % 12;
    let day_of_year = (153 * month_from_march + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The date of a day number (the inverse of [`days_from_civil`]).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let days = days + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

fn digits(bytes: &[u8], range: std::ops::Range<usize>) -> Result<i64, &'static str> {
    let part = bytes.get(range).ok_or("too short")?;
    if part.is_empty() || !part.iter().all(u8::is_ascii_digit) {
        return Err("expected digits");
    }
    Ok(part
        .iter()
        .fold(0i64, |acc, b| acc * 10 + i64::from(b - b'0')))
}

fn expect(bytes: &[u8], at: usize, allowed: &[u8]) -> Result<(), &'static str> {
    match bytes.get(at) {
        Some(b) if allowed.contains(b) => Ok(()),
        _ => Err("unexpected character"),
    }
}

fn parse(text: &str) -> Result<Timestamp, &'static str> {
    let b = text.as_bytes();
    let year = digits(b, 0..4)?;
    expect(b, 4, b"-")?;
    let month = digits(b, 5..7)?;
    expect(b, 7, b"-")?;
    let day = digits(b, 8..10)?;
    expect(b, 10, b"Tt")?;
    let hour = digits(b, 11..13)?;
    expect(b, 13, b":")?;
    let minute = digits(b, 14..16)?;
    expect(b, 16, b":")?;
    let second = digits(b, 17..19)?;
    if !(1..=12).contains(&month) {
        return Err("month out of range");
    }
    if day < 1 || day > days_in_month(year, month) {
        return Err("day out of range");
    }
    if hour > 23 || minute > 59 || second > 59 {
        return Err("time of day out of range");
    }
    let mut at = 19;
    let mut nanos = 0i64;
    if b.get(at) == Some(&b'.') {
        at += 1;
        let start = at;
        while b.get(at).is_some_and(u8::is_ascii_digit) {
            if at - start < 9 {
                nanos = nanos * 10 + i64::from(b[at] - b'0');
            }
            at += 1;
        }
        if at == start {
            return Err("empty fraction");
        }
        for _ in (at - start)..9 {
            nanos *= 10;
        }
    }
    let offset_seconds = match b.get(at) {
        Some(b'Z' | b'z') if at + 1 == b.len() => 0,
        Some(sign @ (b'+' | b'-')) if at + 6 == b.len() => {
            let hours = digits(b, at + 1..at + 3)?;
            expect(b, at + 3, b":")?;
            let minutes = digits(b, at + 4..at + 6)?;
            if hours > 23 || minutes > 59 {
                return Err("offset out of range");
            }
            let offset = hours * 3600 + minutes * 60;
            if *sign == b'+' {
                offset
            } else {
                -offset
            }
        }
        _ => return Err("expected Z or a ±HH:MM offset at the end"),
    };
    let seconds =
        days_from_civil(year, month, day) * SECONDS_PER_DAY + hour * 3600 + minute * 60 + second
            - offset_seconds;
    seconds
        .checked_mul(NANOS_PER_SECOND)
        .and_then(|n| n.checked_add(nanos))
        .map(Timestamp)
        .ok_or("out of the representable range (1678-2262)")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_instants() {
        assert_eq!(Timestamp::UNIX_EPOCH.to_rfc3339(), "1970-01-01T00:00:00Z");
        let t = Timestamp::parse_rfc3339("2024-02-29T23:59:59Z").unwrap();
        assert_eq!(t.unix_seconds(), 1_709_251_199);
        assert_eq!(t.to_string(), "2024-02-29T23:59:59Z");
        let before = Timestamp::parse_rfc3339("1969-12-31T23:59:59.25Z").unwrap();
        assert_eq!(before.unix_nanos(), -750_000_000);
        assert_eq!(before.to_rfc3339_micros(), "1969-12-31T23:59:59.250000Z");
        let offset = Timestamp::parse_rfc3339("2024-01-01T01:30:00+01:30").unwrap();
        assert_eq!(offset.to_rfc3339(), "2024-01-01T00:00:00Z");
        let west = Timestamp::parse_rfc3339("2023-12-31T19:00:00-05:00").unwrap();
        assert_eq!(west, offset);
        // The last day of a 400-year era (a leap day every 400 years): one
        // day in 146,097, which random days seldom hit.
        let t = Timestamp::parse_rfc3339("2000-02-29T12:00:00Z").unwrap();
        assert_eq!(t.to_rfc3339(), "2000-02-29T12:00:00Z");
        for year in [1600, 2000, 2400] {
            let days = days_from_civil(year, 2, 29);
            assert_eq!(civil_from_days(days), (year, 2, 29));
            assert_eq!(civil_from_days(days + 1), (year, 3, 1));
        }
        assert_eq!(civil_from_days(days_from_civil(2000, 3, 1)), (2000, 3, 1));
        // The largest offsets there are.
        let east = Timestamp::parse_rfc3339("2024-01-01T23:59:00+23:59").unwrap();
        assert_eq!(east.to_rfc3339(), "2024-01-01T00:00:00Z");
        let fine = Timestamp::parse_rfc3339("2024-01-01T00:00:00.123456789123Z").unwrap();
        assert_eq!(fine.unix_nanos() % 1_000_000_000, 123_456_789);
    }

    #[test]
    fn rejects_malformed_text() {
        for bad in [
            "",
            "2024-01-01",
            "2024-01-01T00:00:00",
            "2024-13-01T00:00:00Z",
            "2023-02-29T00:00:00Z",
            "2024-01-01T24:00:00Z",
            "2024-01-01T00:00:00.Z",
            "2024-01-01 00:00:00Z",
            "2024-01-01T00:00:00+0100",
            "2024-01-01T00:00:00+24:00",
            "2024-01-01T00:00:00-23:60",
            "2024-01-01T00:00:00Zjunk",
            "0001-01-01T00:00:00Z",
        ] {
            assert!(Timestamp::parse_rfc3339(bad).is_err(), "{bad}");
        }
        assert_eq!(Timestamp::parse_field(Some("nope")), None);
        assert_eq!(Timestamp::parse_field(None), None);
    }

    #[test]
    fn arithmetic_saturates() {
        let t = Timestamp::from_unix_seconds(10);
        assert_eq!(t + Duration::from_secs(5), Timestamp::from_unix_seconds(15));
        assert_eq!(t - Duration::from_secs(5), Timestamp::from_unix_seconds(5));
        assert_eq!(
            t.duration_since(Timestamp::from_unix_seconds(4)),
            Duration::from_secs(6)
        );
        assert_eq!(
            Timestamp::from_unix_seconds(4).duration_since(t),
            Duration::ZERO
        );
        assert_eq!(Timestamp::MAX + Duration::from_secs(1), Timestamp::MAX);
        assert_eq!(Timestamp::MIN - Duration::from_secs(1), Timestamp::MIN);
        assert_eq!(
            Timestamp::MAX.duration_since(Timestamp::MIN),
            Duration::from_nanos(u64::MAX)
        );
    }

    #[test]
    fn system_time_round_trip() {
        let now = Timestamp::from_unix_millis(1_700_000_000_123);
        let system: SystemTime = now.into();
        assert_eq!(Timestamp::from(system), now);
        let early = Timestamp::from_unix_nanos(-5);
        assert_eq!(Timestamp::from(SystemTime::from(early)), early);
    }

    proptest! {
        #[test]
        fn text_round_trips(seconds in -6_000_000_000i64..9_000_000_000i64, micros in 0i64..1_000_000) {
            let t = Timestamp::from_unix_nanos(seconds * NANOS_PER_SECOND + micros * 1_000);
            prop_assert_eq!(Timestamp::parse_rfc3339(&t.to_rfc3339_micros()).unwrap(), t);
            let whole = Timestamp::from_unix_seconds(seconds);
            prop_assert_eq!(Timestamp::parse_rfc3339(&t.to_rfc3339()).unwrap(), whole);
        }

        #[test]
        fn days_round_trip(days in -1_000_000i64..1_000_000i64) {
            let (y, m, d) = civil_from_days(days);
            prop_assert!((1..=12).contains(&m) && d >= 1 && d <= days_in_month(y, m));
            prop_assert_eq!(days_from_civil(y, m, d), days);
        }
    }
}
