//! The duration rule of every surface: positive whole microseconds up to 24 h
//! inclusive, checked here before any FFI call; nothing is ever rounded.

use std::time::Duration;

use crate::error::{Error, ErrorKind, Result};
use crate::sys;

/// The longest claim or renewal: 24 hours, inclusive.
pub const MAX_DURATION: Duration = Duration::from_micros(sys::LEASES_MAX_DURATION_US as u64);

/// Converts `d` to the C `duration_us`, or `Err(InvalidDuration)` for zero,
/// over 24 h, or a fractional number of microseconds.
///
/// ```
/// use std::time::Duration;
/// use leases::{duration_us, ErrorKind};
///
/// assert_eq!(duration_us(Duration::from_millis(250)).unwrap(), 250_000);
/// assert_eq!(duration_us(Duration::from_nanos(1500)).unwrap_err().kind(), ErrorKind::InvalidDuration);
/// ```
pub fn duration_us(d: Duration) -> Result<i64> {
    if d.is_zero() {
        return Err(Error::new(ErrorKind::InvalidDuration, "duration must be positive, got 0s"));
    }
    if !d.subsec_nanos().is_multiple_of(1_000) {
        return Err(Error::new(
            ErrorKind::InvalidDuration,
            format!("duration {} is not a whole number of microseconds (nothing is rounded)", format_duration(d)),
        ));
    }
    if d > MAX_DURATION {
        return Err(Error::new(
            ErrorKind::InvalidDuration,
            format!("duration {} is longer than the limit of 24h", format_duration(d)),
        ));
    }
    // d <= 24 h, so the microsecond count fits an i64.
    Ok(d.as_micros() as i64)
}

/// Writes `d` as people write a duration, the spelling of every surface's
/// messages (`tests/vectors/durations.json`, "shown"): the hours, minutes
/// and seconds that are not zero, largest first, then the rest under a
/// second in the largest of ms, us and ns that states it whole. Zero is
/// `0s`.
///
/// ```
/// use std::time::Duration;
/// use leases::format_duration;
///
/// assert_eq!(format_duration(Duration::from_secs(48 * 3600)), "48h");
/// assert_eq!(format_duration(Duration::from_secs(90 * 60)), "1h30m");
/// assert_eq!(format_duration(Duration::from_millis(250)), "250ms");
/// assert_eq!(format_duration(Duration::from_micros(1500)), "1500us");
/// assert_eq!(format_duration(Duration::from_millis(1500)), "1s500ms");
/// ```
pub fn format_duration(d: Duration) -> String {
    let (secs, frac) = (d.as_secs(), d.subsec_nanos());
    if secs == 0 && frac == 0 {
        return "0s".to_owned();
    }
    let mut out = String::new();
    for (n, unit) in [(secs / 3600, "h"), (secs % 3600 / 60, "m"), (secs % 60, "s")] {
        if n != 0 {
            out += &format!("{n}{unit}");
        }
    }
    if frac != 0 {
        out += &if frac % 1_000_000 == 0 {
            format!("{}ms", frac / 1_000_000)
        } else if frac % 1_000 == 0 {
            format!("{}us", frac / 1_000)
        } else {
            format!("{frac}ns")
        };
    }
    out
}
