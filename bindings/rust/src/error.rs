//! `Error` and `ErrorKind`: one kind per C status (tests/vectors/statuses.json)
//! plus `AbiMismatch`, which the crate reports itself.

use std::ffi::CStr;
use std::fmt;

use crate::sys;

/// What went wrong. One variant per rejection status of `include/leases.h`
/// (same meaning, same order as `docs/errors.md`), plus
/// [`ErrorKind::AbiMismatch`], which has no C status because it is detected
/// by this crate before any call that could report one.
///
/// `LEASES_NOTHING_TO_CLAIM` has a variant for completeness, but the safe API
/// reports it as `Ok(None)` from [`Authority::claim`](crate::Authority::claim)
/// and [`Edit::claim`](crate::Edit::claim).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Bad input: empty, NUL byte, invalid UTF-8, oversize, non-canonical id, bad facts.
    InvalidArgument,
    /// Not a positive whole number of microseconds up to 24 h.
    InvalidDuration,
    /// Production or job does not exist, or the lease/token belongs to another production.
    NotFound,
    /// The production has no claimable job.
    NothingToClaim,
    /// The job's state forbids the operation, or this claim already finished through another handle.
    WrongState,
    /// The job's current claim is another one.
    LeaseLost,
    /// The claim expired on the authority's clock (at the start, or before commit).
    Expired,
    /// The coordinator cancelled the job.
    Cancelled,
    /// A renewal would not move the expiry later.
    NotExtended,
    /// The authority's clock is behind its durable high-water mark.
    ClockRegressed,
    /// The lease, edit, execution or authority is closed, consumed, or (a lease) pending.
    Closed,
    /// The token is malformed, too long, non-canonical, of another version, or fails its checksum.
    BadToken,
    /// The writer lock was not obtained within the busy timeout.
    Busy,
    /// The database failed before commit; nothing changed.
    Storage,
    /// The commit itself failed: it may or may not have persisted. Not a
    /// rejection; the lease stays active locally and its next use asks the store.
    OutcomeUnknown,
    /// The database file was written by a newer library.
    SchemaTooNew,
    /// Called in a `fork()`ed child of the process that loaded the library.
    Forked,
    /// A bug in the library, reported instead of crashing the process.
    Internal,
    /// The loaded `libleases.so` reports another ABI version than
    /// [`ABI_VERSION`](crate::ABI_VERSION); no authority was opened.
    AbiMismatch,
}

impl ErrorKind {
    /// Every kind, in status order (index + 1 is the C status), then
    /// `AbiMismatch`, which has no status.
    pub const ALL: [ErrorKind; 19] = [
        ErrorKind::InvalidArgument,
        ErrorKind::InvalidDuration,
        ErrorKind::NotFound,
        ErrorKind::NothingToClaim,
        ErrorKind::WrongState,
        ErrorKind::LeaseLost,
        ErrorKind::Expired,
        ErrorKind::Cancelled,
        ErrorKind::NotExtended,
        ErrorKind::ClockRegressed,
        ErrorKind::Closed,
        ErrorKind::BadToken,
        ErrorKind::Busy,
        ErrorKind::Storage,
        ErrorKind::OutcomeUnknown,
        ErrorKind::SchemaTooNew,
        ErrorKind::Forked,
        ErrorKind::Internal,
        ErrorKind::AbiMismatch,
    ];

    /// The kind of a C status; `None` for `LEASES_OK` and unknown values.
    pub fn from_code(code: i32) -> Option<ErrorKind> {
        if code < 1 {
            return None;
        }
        Self::ALL.get(code as usize - 1).copied().filter(|k| *k != ErrorKind::AbiMismatch)
    }

    /// The C status (`LEASES_…`) of this kind; `None` for `AbiMismatch`.
    pub fn code(self) -> Option<i32> {
        if self == ErrorKind::AbiMismatch {
            return None;
        }
        Self::ALL.iter().position(|k| *k == self).map(|i| i as i32 + 1)
    }

    /// The status name shared by every surface (`"lease_lost"`, …), as
    /// `leases_status_name` spells it; `"abi_mismatch"` for `AbiMismatch`.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::InvalidArgument => "invalid_argument",
            ErrorKind::InvalidDuration => "invalid_duration",
            ErrorKind::NotFound => "not_found",
            ErrorKind::NothingToClaim => "nothing_to_claim",
            ErrorKind::WrongState => "wrong_state",
            ErrorKind::LeaseLost => "lease_lost",
            ErrorKind::Expired => "expired",
            ErrorKind::Cancelled => "cancelled",
            ErrorKind::NotExtended => "not_extended",
            ErrorKind::ClockRegressed => "clock_regressed",
            ErrorKind::Closed => "closed",
            ErrorKind::BadToken => "bad_token",
            ErrorKind::Busy => "busy",
            ErrorKind::Storage => "storage",
            ErrorKind::OutcomeUnknown => "outcome_unknown",
            ErrorKind::SchemaTooNew => "schema_too_new",
            ErrorKind::Forked => "forked",
            ErrorKind::Internal => "internal",
            ErrorKind::AbiMismatch => "abi_mismatch",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A failed call: its [`ErrorKind`] and the library's message.
///
/// Messages come from `leases_last_error()` (which never holds a secret) or
/// from this crate's own checks (which never quote a token or secret), so
/// neither `Display` nor `Debug` can show a credential.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    code: Option<i32>,
    message: String,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error { kind, code: None, message: message.into() }
    }

    /// Builds the error of a failed C call; must run on the calling thread
    /// right after the call, because the message is per thread.
    pub(crate) fn from_status(status: sys::leases_status) -> Error {
        // SAFETY: leases_last_error never returns NULL; the string is owned by
        // the library and valid until this thread's next call, and is copied here.
        let message = unsafe { CStr::from_ptr(sys::leases_last_error()) }.to_string_lossy().into_owned();
        let kind = ErrorKind::from_code(status).unwrap_or(ErrorKind::Internal);
        let message = if ErrorKind::from_code(status).is_none() {
            format!("libleases returned unknown status {status}: {message}")
        } else {
            message
        };
        Error { kind, code: Some(status), message }
    }

    /// What went wrong.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The raw C status the library returned; `None` when this crate detected
    /// the problem itself before calling (durations, NUL bytes, ABI version).
    pub fn status(&self) -> Option<i32> {
        self.code
    }

    /// The human-readable message, without the kind.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.kind.name();
        // The library's messages already start with the status name.
        if self.message.is_empty() {
            f.write_str(name)
        } else if self.message.strip_prefix(name).is_some_and(|rest| rest.starts_with(": ")) {
            f.write_str(&self.message)
        } else {
            write!(f, "{name}: {}", self.message)
        }
    }
}

impl std::error::Error for Error {}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Turns a status into `Ok(())` or the calling thread's error.
pub(crate) fn check(status: sys::leases_status) -> Result<()> {
    if status == sys::LEASES_OK {
        Ok(())
    } else {
        Err(Error::from_status(status))
    }
}
