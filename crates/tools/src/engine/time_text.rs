//! Times as the tools print them, in one place: seconds since the epoch as text through a
//! strftime pattern (jiff), in the local time zone (`TZ`, else `/etc/localtime`, as
//! `localtime(3)` finds it) or in UTC, with the C locale's month names.

use jiff::tz::TimeZone;
use jiff::Timestamp;
use std::sync::OnceLock;

/// The local time zone, found once per process.
fn local_zone() -> &'static TimeZone {
    static ZONE: OnceLock<TimeZone> = OnceLock::new();
    ZONE.get_or_init(TimeZone::system)
}

/// `secs` (seconds since the epoch) in `zone` through `pattern`; `None` beyond the years
/// -9999 to 9999.
fn format(secs: i64, zone: &TimeZone, pattern: &str) -> Option<String> {
    let at = Timestamp::from_second(secs).ok()?;
    Some(
        at.to_zoned_datetime(zone.clone())
            .strftime(pattern)
            .to_string(),
    )
}

/// `secs` (seconds since the epoch) in the local time zone through the strftime `pattern`
/// (`%Y-%m-%d %H:%M`); `None` beyond the years -9999 to 9999.
pub fn local(secs: i64, pattern: &str) -> Option<String> {
    format(secs, local_zone(), pattern)
}

/// `secs` (seconds since the epoch) in UTC through the strftime `pattern`; `None` beyond the
/// years -9999 to 9999.
pub fn utc(secs: i64, pattern: &str) -> Option<String> {
    format(secs, &TimeZone::UTC, pattern)
}

/// Now, in the local time zone, through the strftime `pattern`.
pub fn now_local(pattern: &str) -> String {
    Timestamp::now()
        .to_zoned_datetime(local_zone().clone())
        .strftime(pattern)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_of_the_tools_in_utc() {
        // 2026-11-26 07:05:09 UTC, a Thursday.
        let t = 1_795_676_709;
        assert_eq!(utc(t, "%Y-%m-%d %H:%M:%S").unwrap(), "2026-11-26 07:05:09");
        assert_eq!(utc(t, "%b %e %Y %H:%M").unwrap(), "Nov 26 2026 07:05");
        assert_eq!(utc(86_400 * 3, "%b %e %Y").unwrap(), "Jan  4 1970");
        assert_eq!(utc(-1, "%Y-%m-%d %H:%M:%S").unwrap(), "1969-12-31 23:59:59");
        assert_eq!(utc(i64::MAX, "%Y"), None);
    }
}
