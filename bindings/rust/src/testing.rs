//! Test seams of `include/leases_testing.h` (feature `testing`, linked
//! against `build/test/libleases.so`). Production builds of the library do not
//! contain them, so no production caller can choose the authority's time.

use std::path::Path;
use std::ptr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::{check, Error, ErrorKind, Result};
use crate::{c_path, check_abi, library_abi, sys, Authority};

/// Freezes `authority`'s clock at `now`, or (`None`) restores the system clock.
pub fn set_clock(authority: &Authority, now: Option<SystemTime>) -> Result<()> {
    let us = match now {
        None => 0,
        Some(t) => {
            let d = t
                .duration_since(UNIX_EPOCH)
                .map_err(|_| Error::new(ErrorKind::InvalidArgument, "test clock before 1970"))?;
            i64::try_from(d.as_micros()).map_err(|_| Error::new(ErrorKind::InvalidArgument, "test clock too late"))?
        }
    };
    // SAFETY: live handle.
    check(unsafe { sys::testing::leases_testing_set_clock(authority.as_raw(), us) })
}

/// Opens an authority with a writer-lock busy timeout instead of the default 10 s.
pub fn open_with_busy_timeout(path: impl AsRef<Path>, busy_timeout: Duration) -> Result<Authority> {
    check_abi(library_abi())?;
    let path = c_path("path", path.as_ref())?;
    let us = i64::try_from(busy_timeout.as_micros())
        .map_err(|_| Error::new(ErrorKind::InvalidArgument, "busy timeout too long"))?;
    let mut raw = ptr::null_mut();
    // SAFETY: valid C string, valid out pointer.
    check(unsafe { sys::testing::leases_testing_open(path.as_ptr(), us, &mut raw) })?;
    Ok(Authority { raw })
}

/// Panics inside the library, which recovers and reports [`ErrorKind::Internal`].
pub fn panic_in_library() -> Result<()> {
    // SAFETY: no arguments.
    check(unsafe { sys::testing::leases_testing_panic() })
}

/// Makes every later commit of `authority` persist and then report
/// [`ErrorKind::OutcomeUnknown`], as one whose acknowledgement was lost.
pub fn lose_commit_acks(authority: &Authority) -> Result<()> {
    // SAFETY: live handle.
    check(unsafe { sys::testing::leases_testing_lose_commit_acks(authority.as_raw()) })
}
