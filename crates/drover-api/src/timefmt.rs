//! Times as kubectl shows them: ages (`5s`, `3m20s`, `2d4h`) and the
//! RFC 1123 dates of `describe` (`Mon, 02 Jan 2006 15:04:05 +0000`).
//!
//! Every function takes "now" as an argument, so that output is testable.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Reads an RFC 3339 time as Kubernetes objects carry it
/// (`2024-05-01T12:00:00Z`, with an optional fraction, or with a UTC
/// offset such as `+02:00`).
pub fn parse_time(text: &str) -> Option<SystemTime> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    if let Ok(t) = humantime::parse_rfc3339(text) {
        return Some(t);
    }
    // humantime only reads UTC ("Z"): handle an explicit offset here,
    // `+hh:mm` or `-hh:mm` with hh at most 23 and mm at most 59, as Go's
    // RFC 3339 parser (the API server's) requires.
    let bytes = text.as_bytes();
    if bytes.len() > 6 && bytes[bytes.len() - 3] == b':' {
        // (Checked before splitting: the sign is where a char begins.)
        let east = match bytes[bytes.len() - 6] {
            b'+' => true,
            b'-' => false,
            _ => return None,
        };
        let (base, offset) = text.split_at(text.len() - 6);
        let hours = two_digits(&offset[1..3]).filter(|h| *h < 24)?;
        let minutes = two_digits(&offset[4..6]).filter(|m| *m < 60)?;
        let utc = humantime::parse_rfc3339(&format!("{base}Z")).ok()?;
        let shift = Duration::from_secs(hours * 3600 + minutes * 60);
        // 12:00+02:00 is 10:00Z.
        return if east {
            utc.checked_sub(shift)
        } else {
            utc.checked_add(shift)
        };
    }
    None
}

/// The number written with exactly two ASCII digits.
fn two_digits(text: &str) -> Option<u64> {
    match text.as_bytes() {
        [a, b] if a.is_ascii_digit() && b.is_ascii_digit() => {
            Some(u64::from(a - b'0') * 10 + u64::from(b - b'0'))
        }
        _ => None,
    }
}

/// `now - then` in nanoseconds, negative when `then` is in the future.
fn signed_nanos(then: SystemTime, now: SystemTime) -> i128 {
    match now.duration_since(then) {
        Ok(d) => d.as_nanos() as i128,
        Err(e) => -(e.duration().as_nanos() as i128),
    }
}

/// kubectl's `HumanDuration` of a signed duration in nanoseconds: `0s` for
/// up to 2 s in the future (clock skew), `<invalid>` beyond.
pub fn human_duration_nanos(nanos: i128) -> String {
    let seconds = nanos / 1_000_000_000; // truncates toward zero, like Go's int()
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    human_duration(Duration::from_nanos(nanos.max(0) as u64))
}

/// kubectl's `HumanDuration`: `59s`, `119s`, `2m`, `9m59s`, `10m`, `3h`,
/// `7h59m`, `8h`, `47h`, `2d`, `7d23h`, `8d`, `2y`, `3y120d`, `8y`.
pub fn human_duration(d: Duration) -> String {
    let seconds = d.as_secs();
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        if s == 0 {
            return format!("{minutes}m");
        }
        return format!("{minutes}m{s}s");
    } else if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        let m = minutes % 60;
        if m == 0 {
            return format!("{hours}h");
        }
        return format!("{hours}h{m}m");
    } else if hours < 48 {
        return format!("{hours}h");
    } else if hours < 24 * 8 {
        let h = hours % 24;
        if h == 0 {
            return format!("{}d", hours / 24);
        }
        return format!("{}d{h}h", hours / 24);
    } else if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    } else if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        if dy == 0 {
            return format!("{}y", hours / 24 / 365);
        }
        return format!("{}y{dy}d", hours / 24 / 365);
    }
    format!("{}y", hours / 24 / 365)
}

/// The age of a timestamp as kubectl's AGE and LAST SEEN columns show it;
/// `<unknown>` when there is none (or it can't be read).
pub fn age(timestamp: Option<&str>, now: SystemTime) -> String {
    match timestamp.and_then(parse_time) {
        Some(t) => human_duration_nanos(signed_nanos(t, now)),
        None => "<unknown>".into(),
    }
}

const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// The civil date of a day count since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Go's `time.RFC1123Z` layout in UTC: `Mon, 02 Jan 2006 15:04:05 +0000`,
/// as `kubectl describe` prints times.
pub fn rfc1123z(t: SystemTime) -> String {
    let secs = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_secs() as i64,
        Err(e) => -(e.duration().as_secs_f64().ceil() as i64),
    };
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{}, {d:02} {} {y:04} {:02}:{:02}:{:02} +0000",
        DAYS[days.rem_euclid(7) as usize],
        MONTHS[(m - 1) as usize],
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// A stored timestamp in `describe`'s format; `<unset>` when absent, the
/// text itself when it can't be read.
pub fn describe_time(timestamp: Option<&str>) -> String {
    match timestamp {
        None => "<unset>".into(),
        Some(s) if s.trim().is_empty() => "<unset>".into(),
        Some(s) => parse_time(s).map(rfc1123z).unwrap_or_else(|| s.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> SystemTime {
        parse_time(s).unwrap()
    }

    #[test]
    fn human_durations_match_kubectl() {
        let cases = [
            (0, "0s"),
            (5, "5s"),
            (119, "119s"),
            (120, "2m"),
            (121, "2m1s"),
            (599, "9m59s"),
            (600, "10m"),
            (3 * 3600 - 1, "179m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 60, "3h1m"),
            (8 * 3600 - 60, "7h59m"),
            (8 * 3600 - 1, "7h59m"),
            (8 * 3600, "8h"),
            // From 8 hours on, kubectl drops the minutes.
            (8 * 3600 + 30 * 60, "8h"),
            (8 * 3600 + 59 * 60 + 59, "8h"),
            (9 * 3600 + 1, "9h"),
            (47 * 3600 + 59 * 60, "47h"),
            (48 * 3600, "2d"),
            (52 * 3600, "2d4h"),
            (8 * 86_400 - 1, "7d23h"),
            (8 * 86_400, "8d"),
            (729 * 86_400, "729d"),
            (730 * 86_400, "2y"),
            (850 * 86_400, "2y120d"),
            (8 * 365 * 86_400 - 86_400, "7y364d"),
            (8 * 365 * 86_400, "8y"),
            (9 * 365 * 86_400 + 100 * 86_400, "9y"),
        ];
        for (secs, want) in cases {
            assert_eq!(human_duration(Duration::from_secs(secs)), want, "{secs}s");
        }
    }

    #[test]
    fn future_times_tolerate_a_little_skew() {
        assert_eq!(human_duration_nanos(-1_500_000_000), "0s");
        assert_eq!(human_duration_nanos(-2_000_000_000), "<invalid>");
        let now = at("2024-05-01T12:00:00Z");
        assert_eq!(age(Some("2024-05-01T12:00:01Z"), now), "0s");
        assert_eq!(age(Some("2024-05-01T12:00:10Z"), now), "<invalid>");
    }

    #[test]
    fn ages_from_timestamps() {
        let now = at("2024-05-03T16:00:00Z");
        assert_eq!(age(Some("2024-05-03T15:59:55Z"), now), "5s");
        assert_eq!(age(Some("2024-05-03T15:57:00Z"), now), "3m");
        assert_eq!(age(Some("2024-05-01T12:00:00Z"), now), "2d4h");
        assert_eq!(age(Some("2024-05-03T15:59:55.750000Z"), now), "4s");
        // An offset: 17:59:00+02:00 is 15:59:00Z.
        assert_eq!(age(Some("2024-05-03T17:59:00+02:00"), now), "60s");
        assert_eq!(age(Some("2024-05-03T14:59:00-01:00"), now), "60s");
        assert_eq!(age(Some("2024-05-03T15:59:00+00:00"), now), "60s");
        assert_eq!(age(None, now), "<unknown>");
        assert_eq!(age(Some(""), now), "<unknown>");
        assert_eq!(age(Some("yesterday"), now), "<unknown>");
    }

    #[test]
    fn an_offset_is_subtracted_when_east_of_utc_and_added_when_west() {
        let utc = at("2024-05-01T10:00:00Z");
        assert_eq!(parse_time("2024-05-01T12:00:00+02:00"), Some(utc));
        assert_eq!(parse_time("2024-05-01T08:30:00-01:30"), Some(utc));
        assert_eq!(parse_time("2024-05-01T10:00:00+00:00"), Some(utc));
        assert_eq!(parse_time("2024-05-01T10:00:00-00:00"), Some(utc));
        assert_eq!(parse_time("2024-05-02T09:59:00+23:59"), Some(utc));
        assert_eq!(parse_time("2024-04-30T10:01:00-23:59"), Some(utc));
        assert_eq!(
            parse_time("2024-05-01T12:00:00.5+02:00"),
            utc.checked_add(Duration::from_millis(500))
        );
    }

    /// Go's RFC 3339 parser takes an offset hour up to 23 and minute up to
    /// 59, written with two digits each.
    #[test]
    fn an_offset_out_of_range_or_not_two_digits_is_not_a_time() {
        for bad in [
            "2024-05-01T12:00:00+24:00",
            "2024-05-01T12:00:00-24:00",
            "2024-05-01T12:00:00+02:60",
            "2024-05-01T12:00:00+99:99",
            "2024-05-01T12:00:00++1:00",
            "2024-05-01T12:00:00+-1:00",
            "2024-05-01T12:00:00+02:+1",
            "2024-05-01T12:00:00+ 2:00",
            "2024-05-01T12:00:00*02:00",
            "2024-05-01T12:00:00é:00",
            "+02:00",
            "2024-05-01T12:00:00",
        ] {
            assert_eq!(parse_time(bad), None, "{bad}");
        }
    }

    #[test]
    fn rfc1123z_like_go() {
        assert_eq!(
            rfc1123z(at("2006-01-02T15:04:05Z")),
            "Mon, 02 Jan 2006 15:04:05 +0000"
        );
        assert_eq!(rfc1123z(UNIX_EPOCH), "Thu, 01 Jan 1970 00:00:00 +0000");
        assert_eq!(
            rfc1123z(at("2024-02-29T23:59:59Z")),
            "Thu, 29 Feb 2024 23:59:59 +0000"
        );
        assert_eq!(
            describe_time(Some("2000-03-01T00:00:00Z")),
            "Wed, 01 Mar 2000 00:00:00 +0000"
        );
        // Around the 1st of March, where the algorithm's year begins, in
        // centuries past and to come (dates checked with GNU `date -u`).
        assert_eq!(
            describe_time(Some("1970-03-01T00:00:00Z")),
            "Sun, 01 Mar 1970 00:00:00 +0000"
        );
        assert_eq!(
            describe_time(Some("1999-12-31T23:59:59Z")),
            "Fri, 31 Dec 1999 23:59:59 +0000"
        );
        assert_eq!(
            describe_time(Some("2100-02-28T12:00:00Z")),
            "Sun, 28 Feb 2100 12:00:00 +0000"
        );
        assert_eq!(
            describe_time(Some("2100-03-01T00:00:00Z")),
            "Mon, 01 Mar 2100 00:00:00 +0000"
        );
        assert_eq!(describe_time(None), "<unset>");
        assert_eq!(describe_time(Some("garbage")), "garbage");
    }
}
