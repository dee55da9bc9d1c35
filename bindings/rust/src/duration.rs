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
        return Err(Error::new(ErrorKind::InvalidDuration, "duration must be positive, got 0"));
    }
    if !d.subsec_nanos().is_multiple_of(1_000) {
        return Err(Error::new(
            ErrorKind::InvalidDuration,
            format!("duration {d:?} is not a whole number of microseconds (nothing is rounded)"),
        ));
    }
    if d > MAX_DURATION {
        return Err(Error::new(ErrorKind::InvalidDuration, format!("duration {d:?} is longer than the limit of 24h")));
    }
    // d <= 24 h, so the microsecond count fits an i64.
    Ok(d.as_micros() as i64)
}
