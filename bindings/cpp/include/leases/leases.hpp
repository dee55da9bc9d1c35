// leases.hpp: the C++17 projection of include/leases.h (libleases), header-only.
// It owns the RAII handles, the integral std::chrono duration rules and the
// status -> exception mapping; every rule of the authority stays in the library.
//
// Usage and decisions: docs/cpp.md. In short:
//   * Authority, Lease, Edit and Execution are move-only and wrap their C
//     handle in a std::unique_ptr whose deleter calls the C release function;
//     capi() returns the raw handle. Destructors free local memory only: a
//     Lease destructor never renews, releases or completes; an unfinished Edit
//     is rolled back and an unfinished Execution removes its own files.
//   * Durations are std::chrono::duration<Rep, Period> with an integral Rep.
//     Floating or custom Rep types fail to compile; values that are not a
//     positive whole number of microseconds up to 24 h throw InvalidDurationError
//     before any library call. Nothing is ever rounded.
//   * Every failure throws a leases::Error subclass, one per leases_status;
//     the message comes from leases_last_error() and never holds a secret.
//     claim() returns std::nullopt when there is nothing to claim.
//
// Threads: as in leases.h. An Authority or Lease may be shared between
// threads; use an Edit or Execution from one thread at a time.
#ifndef LEASES_LEASES_HPP
#define LEASES_LEASES_HPP

#include <leases.h>
#include <signal.h>

#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <ratio>
#include <stdexcept>
#include <system_error>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace leases {

// ---- errors ----------------------------------------------------------------

/// Base of every error the projection throws. status() is the leases_status
/// of the failed call (docs/errors.md).
class Error : public std::runtime_error {
public:
    Error(leases_status status, const std::string &message, const std::string &job_id = std::string())
        : std::runtime_error(message), status_(status), job_id_(job_id) {}

    /// The C status code (LEASES_EXPIRED, ...).
    [[nodiscard]] leases_status status() const noexcept { return status_; }
    /// The status name of tests/vectors/statuses.json ("expired", ...).
    [[nodiscard]] const char *name() const noexcept { return leases_status_name(status_); }
    /// The id of the job the failure names (leases_last_error_job_id), or
    /// empty. After OutcomeUnknownError from a claim (Authority::claim,
    /// claim_job, Lease::complete_and_claim_next) it is the job the claim
    /// chose, whose lease was not returned: observe it, and cancel it or let
    /// it expire. Never a secret.
    [[nodiscard]] const std::string &job_id() const noexcept { return job_id_; }

private:
    leases_status status_;
    std::string job_id_;
};

/// Base of the statuses that mean the claim is no longer held: another claim
/// is current (LeaseLostError), it expired (ExpiredError), or the coordinator
/// cancelled the job (CancelledError). The worker must stop; catch this base
/// to treat the three alike.
class NotHeldError : public Error {
public:
    using Error::Error;
};

// One class per status, named after it (wrong_state -> WrongStateError, as in
// Python; Rust's ErrorKind::WrongState), generated from leases.h.
#define LEASES_HPP_ERROR_CLASS(Name, Base, Status)                                    \
    class Name : public Base {                                                        \
    public:                                                                           \
        static constexpr leases_status code = Status;                                 \
        explicit Name(const std::string &message, const std::string &job_id = std::string()) \
            : Base(Status, message, job_id) {}                                        \
    }

/// The loaded libleases.so has another ABI number than the leases.h this
/// program was compiled with, or an older revision of it. No library call was
/// made, so status() is LEASES_INTERNAL; it is not an InternalError (the
/// library has no bug).
class AbiMismatch : public Error {
public:
    AbiMismatch(std::uint32_t compiled, std::uint32_t loaded, std::uint32_t compiled_revision,
                std::uint32_t loaded_revision)
        : Error(LEASES_INTERNAL,
                "libleases ABI mismatch: compiled against LEASES_ABI_VERSION " + std::to_string(compiled) +
                    " revision " + std::to_string(compiled_revision) +
                    ", but the loaded libleases.so reports ABI version " + std::to_string(loaded) +
                    " revision " + std::to_string(loaded_revision) +
                    "; it needs the same ABI version and at least that revision: install a newer "
                    "library or rebuild against the installed leases.h"),
          compiled_(compiled), loaded_(loaded), compiled_revision_(compiled_revision),
          loaded_revision_(loaded_revision) {}

    [[nodiscard]] std::uint32_t compiled() const noexcept { return compiled_; }
    [[nodiscard]] std::uint32_t loaded() const noexcept { return loaded_; }
    [[nodiscard]] std::uint32_t compiled_revision() const noexcept { return compiled_revision_; }
    [[nodiscard]] std::uint32_t loaded_revision() const noexcept { return loaded_revision_; }

private:
    std::uint32_t compiled_, loaded_, compiled_revision_, loaded_revision_;
};

// BEGIN GENERATED by abi/leases_abi.py from include/leases.h (make abi-generate)
LEASES_HPP_ERROR_CLASS(InvalidArgumentError, Error, LEASES_INVALID_ARGUMENT);  // bad input: NULL, empty, invalid UTF-8, NUL byte, oversize, non-canonical id, bad facts JSON, unknown handle; an output path twice in one completion, or a fact or output the job already has; a new name (production, key, worker, fact key) that is not NFC, holds an invisible character or has white space at either end; in listings, a malformed or foreign cursor, an unknown state or event kind, a page limit outside 0..1000, a window over 24 h; a priority, run-at, delay or retry policy out of its bounds, an options struct of a bad size, a redrive of a state other than failed, dead or cancelled
LEASES_HPP_ERROR_CLASS(InvalidDurationError, Error, LEASES_INVALID_DURATION);  // not a whole number of microseconds in 1 .. LEASES_MAX_DURATION_US; or a complete-and-claim-next whose new claim would be born expired (a duration shorter than the commit took): nothing was written, and the lease being completed still holds its claim
LEASES_HPP_ERROR_CLASS(NotFoundError, Error, LEASES_NOT_FOUND);  // the production or job does not exist, or the lease or token belongs to another production; or the database does not exist and was opened not to be created
LEASES_HPP_ERROR_CLASS(NothingToClaimError, Error, LEASES_NOTHING_TO_CLAIM);  // the production has no claimable job (a delayed or backing-off job is not claimable before its time)
LEASES_HPP_ERROR_CLASS(WrongStateError, Error, LEASES_WRONG_STATE);  // the job is in a state that forbids the operation, or this claim already finished through another handle; a claim by id before the job's run-at or backoff has passed, or of a dead job; a retry of a job that is not failed, dead or cancelled; creating a production that exists with another retry policy
LEASES_HPP_ERROR_CLASS(LeaseLostError, NotHeldError, LEASES_LEASE_LOST);  // the job's current claim is another one (also when another claim has since finished the job, or a claim noticed that this one had lapsed)
LEASES_HPP_ERROR_CLASS(ExpiredError, NotHeldError, LEASES_EXPIRED);  // the claim's expiry has passed on the authority's clock (at the start, or before the operation committed)
LEASES_HPP_ERROR_CLASS(CancelledError, NotHeldError, LEASES_CANCELLED);  // the coordinator cancelled the job
LEASES_HPP_ERROR_CLASS(NotExtendedError, Error, LEASES_NOT_EXTENDED);  // a renewal would not move the expiry later
LEASES_HPP_ERROR_CLASS(ClockRegressedError, Error, LEASES_CLOCK_REGRESSED);  // the authority's clock is behind its durable high-water mark
LEASES_HPP_ERROR_CLASS(ClosedError, Error, LEASES_CLOSED);  // the lease, edit, execution or authority handle is closed or consumed, or (a lease) pending until its edit commits
LEASES_HPP_ERROR_CLASS(BadTokenError, Error, LEASES_BAD_TOKEN);  // the token is malformed, too long, non-canonical, of another version, or fails its checksum
LEASES_HPP_ERROR_CLASS(BusyError, Error, LEASES_BUSY);  // a lock (SQLite's writer lock or a PostgreSQL row lock) was not obtained within the busy timeout, or the server kept aborting the operation over conflicts; nothing was written
LEASES_HPP_ERROR_CLASS(StorageError, Error, LEASES_STORAGE);  // the database could not be opened, read or written (on PostgreSQL also an unreachable server or a lost connection); nothing changed
LEASES_HPP_ERROR_CLASS(OutcomeUnknownError, Error, LEASES_OUTCOME_UNKNOWN);  // the commit itself failed: it may or may not have persisted; the lease stays active locally and its next use asks the store (an edit's leases too); a claim then returns no lease and names the job (leases_last_error_job_id)
LEASES_HPP_ERROR_CLASS(SchemaTooNewError, Error, LEASES_SCHEMA_TOO_NEW);  // the database was written by a newer library
LEASES_HPP_ERROR_CLASS(ForkedError, Error, LEASES_FORKED);  // called in a fork()ed child of the process that loaded the library
LEASES_HPP_ERROR_CLASS(InternalError, Error, LEASES_INTERNAL);  // a bug, reported instead of crashing the host; the process goes on
LEASES_HPP_ERROR_CLASS(InterruptedError, Error, LEASES_INTERRUPTED);  // a wait was ended by its canceller (returned only by the waiting functions of revision 1)

/// Throws the Error subclass of status with message and the job id the
/// failure names (empty: none); status must not be LEASES_OK. An unknown
/// status (a newer library) throws the base Error.
[[noreturn]] inline void throw_status(leases_status status, const std::string &message,
                                      const std::string &job_id = std::string()) {
    switch (status) {
    case LEASES_INVALID_ARGUMENT: throw InvalidArgumentError(message, job_id);
    case LEASES_INVALID_DURATION: throw InvalidDurationError(message, job_id);
    case LEASES_NOT_FOUND: throw NotFoundError(message, job_id);
    case LEASES_NOTHING_TO_CLAIM: throw NothingToClaimError(message, job_id);
    case LEASES_WRONG_STATE: throw WrongStateError(message, job_id);
    case LEASES_LEASE_LOST: throw LeaseLostError(message, job_id);
    case LEASES_EXPIRED: throw ExpiredError(message, job_id);
    case LEASES_CANCELLED: throw CancelledError(message, job_id);
    case LEASES_NOT_EXTENDED: throw NotExtendedError(message, job_id);
    case LEASES_CLOCK_REGRESSED: throw ClockRegressedError(message, job_id);
    case LEASES_CLOSED: throw ClosedError(message, job_id);
    case LEASES_BAD_TOKEN: throw BadTokenError(message, job_id);
    case LEASES_BUSY: throw BusyError(message, job_id);
    case LEASES_STORAGE: throw StorageError(message, job_id);
    case LEASES_OUTCOME_UNKNOWN: throw OutcomeUnknownError(message, job_id);
    case LEASES_SCHEMA_TOO_NEW: throw SchemaTooNewError(message, job_id);
    case LEASES_FORKED: throw ForkedError(message, job_id);
    case LEASES_INTERNAL: throw InternalError(message, job_id);
    case LEASES_INTERRUPTED: throw InterruptedError(message, job_id);
    default: throw Error(status, message, job_id);
    }
}
// END GENERATED

#undef LEASES_HPP_ERROR_CLASS

// The names before the status-named classes, kept for one release after 0.1.0.
using InvalidArgument [[deprecated("use leases::InvalidArgumentError")]] = InvalidArgumentError;
using DurationError [[deprecated("use leases::InvalidDurationError")]] = InvalidDurationError;
using NotFound [[deprecated("use leases::NotFoundError")]] = NotFoundError;
using NothingToClaim [[deprecated("use leases::NothingToClaimError")]] = NothingToClaimError;
using StateError [[deprecated("use leases::WrongStateError")]] = WrongStateError;
using LeaseLost [[deprecated("use leases::LeaseLostError")]] = LeaseLostError;
using Expired [[deprecated("use leases::ExpiredError")]] = ExpiredError;
using Cancelled [[deprecated("use leases::CancelledError")]] = CancelledError;
using NotExtended [[deprecated("use leases::NotExtendedError")]] = NotExtendedError;
using ClockRegressed [[deprecated("use leases::ClockRegressedError")]] = ClockRegressedError;
using Closed [[deprecated("use leases::ClosedError")]] = ClosedError;
using TokenError [[deprecated("use leases::BadTokenError")]] = BadTokenError;
using Busy [[deprecated("use leases::BusyError")]] = BusyError;
using OutcomeUnknown [[deprecated("use leases::OutcomeUnknownError")]] = OutcomeUnknownError;
using SchemaError [[deprecated("use leases::SchemaTooNewError")]] = SchemaTooNewError;
using ForkedProcess [[deprecated("use leases::ForkedError")]] = ForkedError;

/// Turns the status of a C call made on this thread just now into an
/// exception carrying leases_last_error(); does nothing for LEASES_OK. Useful
/// when mixing raw C calls (through capi()) with the projection.
inline void check(leases_status status) {
    if (status == LEASES_OK) {
        return;
    }
    // Copied at once: the texts are valid only until this thread's next call.
    std::string message = leases_last_error();
    std::string job_id = leases_last_error_job_id();
    if (message.empty()) {
        message = std::string(leases_status_name(status)) + " (status " +
                  std::to_string(status) + ")";
    }
    throw_status(status, message, job_id);
}

// ---- library -----------------------------------------------------------------

/// The release version of the loaded library ("0.1.0").
[[nodiscard]] inline std::string version() { return leases_version(); }
/// The ABI number of the loaded library (compare LEASES_ABI_VERSION).
[[nodiscard]] inline std::uint32_t abi_version() noexcept { return leases_abi_version(); }
/// The ABI revision of the loaded library (at least LEASES_ABI_REVISION).
[[nodiscard]] inline std::uint32_t abi_revision() noexcept { return leases_abi_revision(); }

/// Time points the library reports (lease expiry): microseconds since the
/// Unix epoch on the system clock.
using time_point = std::chrono::time_point<std::chrono::system_clock, std::chrono::microseconds>;

/// The longest claim or renewal, inclusive (24 h).
inline constexpr std::chrono::microseconds max_duration{LEASES_MAX_DURATION_US};

/// Writes d as people write a duration, the spelling of every surface's
/// messages (tests/vectors/durations.json, "shown"): the hours, minutes and
/// seconds that are not zero, largest first, then the rest under a second
/// in the largest of ms, us and ns that states it whole: `48h`, `1h30m`,
/// `250ms`, `1500us`, `1s500ms`; zero is `0s`, a negative duration starts
/// with `-`. A period that is not a whole number of nanoseconds (thirds of
/// a second), or a count beyond std::uintmax_t in those units, is written
/// exactly as `COUNT x NUM/DEN s`. Integral counts only.
template <class Rep, class Period>
[[nodiscard]] std::string format_duration(std::chrono::duration<Rep, Period> d) {
    static_assert(std::is_integral_v<Rep> && !std::is_same_v<Rep, bool>,
                  "leases::format_duration writes integral durations only");
    static_assert(Period::num > 0 && Period::den > 0, "leases: the duration period must be positive");
    using umax = std::uintmax_t;
    constexpr umax umax_max = std::numeric_limits<umax>::max();
    const Rep count = d.count();
    auto exact = [&] {
        std::string shown;
        if constexpr (std::is_signed_v<Rep>) {
            shown = count < Rep(0) ? "-" + std::to_string(static_cast<unsigned long long>(
                                              umax(0) - static_cast<umax>(count)))
                                   : std::to_string(static_cast<unsigned long long>(count));
        } else {
            shown = std::to_string(static_cast<unsigned long long>(count));
        }
        return shown + " x " + std::to_string(Period::num) + "/" + std::to_string(Period::den) + " s";
    };
    // Nanoseconds per tick: Period in microseconds (as whole_us reads it),
    // times 1000, when that is whole and fits.
    using r = std::ratio_divide<Period, std::micro>;
    constexpr bool whole_ns = 1000 % r::den == 0;
    constexpr umax ns_mul = whole_ns ? umax(1000 / r::den) : 1;
    constexpr bool fits = whole_ns && umax(r::num) <= umax_max / ns_mul;
    if constexpr (!fits || std::numeric_limits<Rep>::digits > std::numeric_limits<umax>::digits) {
        return exact();
    } else {
        constexpr umax ns_per_tick = umax(r::num) * ns_mul;
        bool negative = false;
        umax mag = static_cast<umax>(count);
        if constexpr (std::is_signed_v<Rep>) {
            negative = count < Rep(0);
            if (negative) {
                mag = umax(0) - mag;
            }
        }
        umax hours = 0;
        umax secs = 0;  // under an hour
        umax frac_ns = 0;
        if constexpr (ns_per_tick % 1'000'000'000 == 0) {
            // Count in the largest of h, m and s that divides a tick, so
            // that hours::max() is written in hours, not overflowed.
            constexpr umax secs_per_tick = ns_per_tick / 1'000'000'000;
            constexpr umax base = secs_per_tick % 3600 == 0 ? 3600 : secs_per_tick % 60 == 0 ? 60 : 1;
            constexpr umax bases_per_tick = secs_per_tick / base;
            if (mag > umax_max / bases_per_tick) {
                return exact();
            }
            const umax v = mag * bases_per_tick;
            hours = v / (3600 / base);
            secs = v % (3600 / base) * base;
        } else {
            // Count in the largest of ms, us and ns that divides a tick.
            constexpr umax unit = ns_per_tick % 1'000'000 == 0 ? 1'000'000 : ns_per_tick % 1000 == 0 ? 1000 : 1;
            constexpr umax units_per_tick = ns_per_tick / unit;
            constexpr umax units_per_sec = 1'000'000'000 / unit;
            if (mag > umax_max / units_per_tick) {
                return exact();
            }
            const umax v = mag * units_per_tick;
            hours = v / units_per_sec / 3600;
            secs = v / units_per_sec % 3600;
            frac_ns = v % units_per_sec * unit;
        }
        if (hours == 0 && secs == 0 && frac_ns == 0) {
            return "0s";
        }
        std::string out = negative ? "-" : "";
        const auto part = [&out](umax n, const char *name) {
            if (n != 0) {
                out += std::to_string(static_cast<unsigned long long>(n)) + name;
            }
        };
        part(hours, "h");
        part(secs / 60, "m");
        part(secs % 60, "s");
        if (frac_ns % 1'000'000 == 0) {
            part(frac_ns / 1'000'000, "ms");
        } else if (frac_ns % 1000 == 0) {
            part(frac_ns / 1000, "us");
        } else {
            part(frac_ns, "ns");
        }
        return out;
    }
}

namespace detail {

// Throws AbiMismatch unless the loaded library has the compiled ABI number
// and at least the compiled revision.
inline void check_abi(std::uint32_t compiled, std::uint32_t loaded, std::uint32_t compiled_revision,
                      std::uint32_t loaded_revision) {
    if (compiled != loaded || loaded_revision < compiled_revision) {
        throw AbiMismatch(compiled, loaded, compiled_revision, loaded_revision);
    }
}

// The check every Authority makes before it is used.
inline void check_loaded_abi() {
    check_abi(LEASES_ABI_VERSION, leases_abi_version(), LEASES_ABI_REVISION, leases_abi_revision());
}

// The input limit of leases.h for the parameter named what (bytes 0: none).
struct Limit {
    std::size_t bytes;
    const char *name;
};
inline Limit limit_of(const std::string &what) noexcept {
    if (what == "production" || what == "worker" || what == "key" || what == "job_id") {
        return {LEASES_MAX_NAME_LEN, "LEASES_MAX_NAME_LEN"};
    }
    if (what == "reason") {
        return {LEASES_MAX_REASON_LEN, "LEASES_MAX_REASON_LEN"};
    }
    if (what == "facts_json") {
        return {LEASES_MAX_FACTS_LEN, "LEASES_MAX_FACTS_LEN"};
    }
    if (what == "path" || what == "output_dir") {
        return {LEASES_MAX_PATH_LEN, "LEASES_MAX_PATH_LEN"};
    }
    return {0, ""};
}

// Refuses an input longer than its limit before anything reads or copies it
// (the library would copy it whole before refusing it).
inline void check_size(std::size_t size, std::size_t limit, const char *what, const char *limit_name) {
    if (limit != 0 && size > limit) {
        throw InvalidArgumentError(std::string(what) + " is " + std::to_string(size) + " bytes, over the limit of " +
                                   std::to_string(limit) + " (" + limit_name + ")");
    }
}

// A C string for an input, checked against its limit first. std::string may
// hold a NUL byte the C side would silently cut at, turning "a\0b" into
// another name: reject it instead.
inline const char *c_str(const std::string &s, const char *what) {
    const Limit limit = limit_of(what);
    check_size(s.size(), limit.bytes, what, limit.name);
    if (s.find('\0') != std::string::npos) {
        throw InvalidArgumentError(std::string(what) + " contains a NUL byte");
    }
    return s.c_str();
}

// Takes ownership of a string the library allocated.
inline std::string take_string(char *p) {
    std::unique_ptr<char, void (*)(void *)> owned(p, leases_free);
    return p ? std::string(p) : std::string();
}

template <class Rep>
inline constexpr bool valid_rep_v = std::is_integral_v<Rep> && !std::is_same_v<Rep, bool>;

template <class Rep, class Period>
[[noreturn]] void reject_duration(Rep count, const char *why) {
    throw InvalidDurationError("duration " + format_duration(std::chrono::duration<Rep, Period>(count)) + " is " + why +
                        "; a claim or renewal needs a positive whole number of microseconds "
                        "up to 24 h (nothing is rounded)");
}

// Why the count of d is not a whole number of microseconds in lo_us .. max_us
// (lo_us 0 or 1), or nullptr with *out set. Never overflows: d's count is
// compared against the limit expressed in d's own period.
template <class Rep, class Period>
const char *whole_us(std::chrono::duration<Rep, Period> d, std::uintmax_t lo_us, std::uintmax_t max_us,
                     std::int64_t *out) {
    // r = Period / 1 us, reduced: count * r::num / r::den microseconds.
    using r = std::ratio_divide<Period, std::micro>;
    constexpr std::uintmax_t num = static_cast<std::uintmax_t>(r::num);
    constexpr std::uintmax_t den = static_cast<std::uintmax_t>(r::den);
    const Rep count = d.count();
    bool negative = false;
    if constexpr (std::is_signed_v<Rep>) {
        negative = count < Rep(0);
    }
    if (negative || (lo_us > 0 && count == Rep(0))) {
        return lo_us > 0 ? "not positive" : "negative";
    }
    // Only an extension type (__int128) is wider than uintmax_t. A count
    // beyond uintmax_t is rejected here rather than truncated below.
    if constexpr (std::numeric_limits<Rep>::digits > std::numeric_limits<std::uintmax_t>::digits) {
        if (count > static_cast<Rep>(std::numeric_limits<std::uintmax_t>::max())) {
            return "out of range";
        }
    }
    const std::uintmax_t c = static_cast<std::uintmax_t>(count);
    if (c % den != 0) {
        return "not a whole number of microseconds";
    }
    const std::uintmax_t whole = c / den;  // count * r::num / r::den == whole * num
    if (whole > max_us / num) {
        return max_us == static_cast<std::uintmax_t>(LEASES_MAX_DURATION_US) ? "longer than 24 h" : "too long";
    }
    *out = static_cast<std::int64_t>(whole * num);
    return nullptr;
}

template <class Rep, class Period>
constexpr void require_integral_rep() {
    static_assert(valid_rep_v<Rep>,
                  "leases: durations need an integral count type such as std::chrono::seconds "
                  "or std::chrono::milliseconds; floating-point and custom Rep types are "
                  "rejected because the authority never rounds a duration");
    static_assert(Period::num > 0 && Period::den > 0, "leases: the duration period must be positive");
}

// The exact number of microseconds of d, or InvalidDurationError.
template <class Rep, class Period>
std::int64_t to_us(std::chrono::duration<Rep, Period> d) {
    require_integral_rep<Rep, Period>();
    if constexpr (valid_rep_v<Rep>) {
        std::int64_t us = 0;
        if (const char *why = whole_us(d, 1, static_cast<std::uintmax_t>(LEASES_MAX_DURATION_US), &us)) {
            reject_duration<Rep, Period>(d.count(), why);
        }
        return us;
    } else {
        return 0;  // unreachable: the static_assert above already failed
    }
}

// The exact microseconds of d (what names it) in 0 .. max_us, else
// InvalidArgumentError saying why and what the bounds are (bounds). For
// bounds that decide nothing about a lease (waits) or that the library
// checks as arguments (delays): never rounded either.
template <class Rep, class Period>
std::int64_t to_bounded_us(std::chrono::duration<Rep, Period> d, std::int64_t max_us, const char *what,
                           const char *bounds) {
    require_integral_rep<Rep, Period>();
    if constexpr (valid_rep_v<Rep>) {
        std::int64_t us = 0;
        if (const char *why = whole_us(d, 0, static_cast<std::uintmax_t>(max_us), &us)) {
            throw InvalidArgumentError(std::string(what) + " " + format_duration(d) + " is " + why + ": " + bounds);
        }
        return us;
    } else {
        return 0;  // unreachable: the static_assert above already failed
    }
}

// A wait bound: 0 .. 24 h, as leases.h reports a wait out of range.
template <class Rep, class Period>
std::int64_t to_wait_us(std::chrono::duration<Rep, Period> d, const char *what) {
    return to_bounded_us(d, LEASES_MAX_WAIT_US, what, "a wait is a whole number of microseconds in 0 .. 24 h");
}

// A delay: 0 .. LEASES_MAX_DELAY_US (366 days), as the library reports a
// delay out of its bounds.
template <class Rep, class Period>
std::int64_t to_delay_us(std::chrono::duration<Rep, Period> d, const char *what) {
    return to_bounded_us(d, LEASES_MAX_DELAY_US, what,
                         "a delay is a whole number of microseconds in 0 .. 366 days (LEASES_MAX_DELAY_US)");
}

struct AuthorityDeleter {
    void operator()(leases_authority *p) const noexcept { leases_authority_close(p); }
};
struct LeaseDeleter {
    void operator()(leases_lease *p) const noexcept { leases_lease_free(p); }
};
struct EditDeleter {
    void operator()(leases_edit *p) const noexcept { leases_edit_abort(p); }
};
struct ExecutionDeleter {
    void operator()(leases_execution *p) const noexcept { leases_execution_abandon(p); }
};
struct CancellerDeleter {
    void operator()(leases_canceller *p) const noexcept { leases_canceller_free(p); }
};

}  // namespace detail

/// Validates a duration as every claim and renewal does, returning its exact
/// microseconds (1 .. 86'400'000'000); throws InvalidDurationError otherwise.
template <class Rep, class Period>
[[nodiscard]] std::int64_t to_microseconds(std::chrono::duration<Rep, Period> d) {
    return detail::to_us(d);
}

// ---- listings ------------------------------------------------------------------

/// The state of a job. Unknown stands for a state added by a newer library;
/// Job::state_text keeps its spelling, so a listing never fails because of it.
/// Dead: the job used up its production's attempts (terminal; redrivable).
// The enumerator JobState::Cancelled and the deprecated alias leases::Cancelled
// (of CancelledError) live in different scopes and never meet, but GCC's
// -Wshadow flags the enumerator all the same: a user building with
// -Wshadow -Werror must not fail on our header.
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wshadow"
#endif
enum class JobState { Requested, Claimed, Completed, Failed, Cancelled, Dead, Unknown };
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

/// The listing spelling of a known state ("requested", ...); "unknown" for Unknown.
[[nodiscard]] inline const char *to_string(JobState s) noexcept {
    switch (s) {
    case JobState::Requested: return "requested";
    case JobState::Claimed: return "claimed";
    case JobState::Completed: return "completed";
    case JobState::Failed: return "failed";
    case JobState::Cancelled: return "cancelled";
    case JobState::Dead: return "dead";
    case JobState::Unknown: break;
    }
    return "unknown";
}

/// The state a listing spells text; Unknown for any other text.
[[nodiscard]] inline JobState job_state_from(const std::string &text) noexcept {
    for (JobState s : {JobState::Requested, JobState::Claimed, JobState::Completed, JobState::Failed,
                       JobState::Cancelled, JobState::Dead}) {
        if (text == to_string(s)) {
            return s;
        }
    }
    return JobState::Unknown;
}

/// One job as the authority sees it (Authority::jobs). Never holds a secret.
struct Job {
    std::string id;                         ///< lowercase UUID
    std::string production;                 ///< production name
    std::optional<std::string> key;         ///< the request key, if any
    JobState state = JobState::Unknown;     ///< the current state
    std::string state_text;                 ///< the state as listed (kept for Unknown)
    std::optional<std::string> worker;      ///< the current claim's worker
    std::optional<time_point> claimed_at;   ///< when the current claim was made
    std::optional<time_point> expiry;       ///< when the current claim expires (exclusive)
    std::int64_t attempts = 0;              ///< claims since the request or the last redrive
    std::optional<std::string> reason;      ///< the failure reason of a failed job
    std::int32_t priority = 0;              ///< 0 .. LEASES_MAX_PRIORITY, higher is claimed first
    /// When a requested job is or becomes claimable (its run-at, delay or
    /// backoff), or when a claimed one becomes claimable again if its claim
    /// lapses; nullopt once finished. Authority time.
    std::optional<time_point> claimable_at;
};

/// One entry of the authority's event log (Authority::events). Never holds a secret.
struct Event {
    std::int64_t seq = 0;                   ///< increasing; pass the last one seen as after_seq
    time_point at{};                        ///< when, on the authority's clock
    std::string production;                 ///< production name
    std::optional<std::string> job_id;      ///< the job, for job events
    std::string kind;                       ///< "requested", "claimed", "renewed", ...
    std::optional<std::string> worker;      ///< the worker, for claim events
    std::optional<time_point> expiry;       ///< the claim's expiry, for claim events
    std::optional<std::string> detail;      ///< extra detail (a failure reason, ...)
};

namespace detail {

// A small, strict JSON reader for the library's listings, pages and
// records. Every JSON value parses (a field added later must not break an
// older program); strings, integers, booleans and null are read out, and
// every value keeps its span of the document, so a fact's value is handed
// on as the JSON text the library wrote. Anything malformed throws
// InternalError: the library never produces it.
class JsonReader {
public:
    struct Value {
        enum class Kind { Null, Bool, Integer, OtherNumber, String, Array, Object } kind = Kind::Null;
        bool boolean = false;
        std::int64_t number = 0;  // an Integer's value
        std::string text;         // a String's decoded bytes; an OtherNumber's literal
        // Where the value lies in the document: its JSON text, as the
        // library wrote it, is document.substr(begin, end - begin).
        std::size_t begin = 0, end = 0;
        std::vector<Value> items;
        std::vector<std::pair<std::string, Value>> members;

        /// The member key, or nullptr.
        const Value *find(const std::string &key) const {
            for (const auto &m : members) {
                if (m.first == key) {
                    return &m.second;
                }
            }
            return nullptr;
        }
        /// The member key; throws InternalError if there is none.
        const Value &operator[](const std::string &key) const {
            const Value *v = find(key);
            if (v == nullptr) {
                fail("no member " + key);
            }
            return *v;
        }
        /// The string; throws InternalError for another kind.
        const std::string &str() const {
            if (kind != Kind::String) {
                fail("not a string");
            }
            return text;
        }
        /// The integer; throws InternalError for another kind.
        std::int64_t integer() const {
            if (kind != Kind::Integer) {
                fail("not an integer");
            }
            return number;
        }
    };

    explicit JsonReader(const std::string &text) : s_(text) {}

    Value document() {
        Value v = value(0);
        skip_space();
        if (pos_ != s_.size()) {
            fail("trailing characters");
        }
        return v;
    }

    [[noreturn]] static void fail(const std::string &why) {
        throw InternalError("libleases returned a listing this projection cannot read: " + why);
    }

private:
    static constexpr int max_depth = 64;

    void skip_space() {
        while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) {
            ++pos_;
        }
    }
    char peek() {
        skip_space();
        if (pos_ >= s_.size()) {
            fail("unexpected end");
        }
        return s_[pos_];
    }
    void expect(char c) {
        if (peek() != c) {
            fail(std::string("expected '") + c + "'");
        }
        ++pos_;
    }
    bool literal(const char *word) {
        const std::string w(word);
        if (s_.compare(pos_, w.size(), w) == 0) {
            pos_ += w.size();
            return true;
        }
        return false;
    }

    Value value(int depth) {
        if (depth > max_depth) {
            fail("nested too deeply");
        }
        (void)peek();
        const std::size_t begin = pos_;
        Value v = bare_value(depth);
        v.begin = begin;
        v.end = pos_;
        return v;
    }

    Value bare_value(int depth) {
        Value v;
        const char c = peek();
        if (c == '{') {
            ++pos_;
            v.kind = Value::Kind::Object;
            if (peek() == '}') {
                ++pos_;
                return v;
            }
            for (;;) {
                if (peek() != '"') {
                    fail("expected a member name");
                }
                std::string key = string();
                expect(':');
                v.members.emplace_back(std::move(key), value(depth + 1));
                if (peek() == ',') {
                    ++pos_;
                    continue;
                }
                expect('}');
                return v;
            }
        }
        if (c == '[') {
            ++pos_;
            v.kind = Value::Kind::Array;
            if (peek() == ']') {
                ++pos_;
                return v;
            }
            for (;;) {
                v.items.push_back(value(depth + 1));
                if (peek() == ',') {
                    ++pos_;
                    continue;
                }
                expect(']');
                return v;
            }
        }
        if (c == '"') {
            v.kind = Value::Kind::String;
            v.text = string();
            return v;
        }
        if (literal("null")) {
            return v;
        }
        if (literal("true")) {
            v.kind = Value::Kind::Bool;
            v.boolean = true;
            return v;
        }
        if (literal("false")) {
            v.kind = Value::Kind::Bool;
            return v;
        }
        return number();
    }

    Value number() {
        const std::size_t start = pos_;
        if (pos_ < s_.size() && s_[pos_] == '-') {
            ++pos_;
        }
        const std::size_t digits = pos_;
        while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
            ++pos_;
        }
        if (pos_ == digits || (s_[digits] == '0' && pos_ - digits > 1)) {
            fail("bad number");
        }
        bool integral = true;
        if (pos_ < s_.size() && s_[pos_] == '.') {
            integral = false;
            const std::size_t frac = ++pos_;
            while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
            if (pos_ == frac) fail("bad number");
        }
        if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
            integral = false;
            ++pos_;
            if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
            const std::size_t exp = pos_;
            while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
            if (pos_ == exp) fail("bad number");
        }
        Value v;
        v.kind = integral ? Value::Kind::Integer : Value::Kind::OtherNumber;
        if (!integral) {
            v.text = s_.substr(start, pos_ - start);
        }
        if (integral) {
            // Accumulate negatively so INT64_MIN fits; overflow is an error.
            const bool negative = s_[start] == '-';
            std::int64_t acc = 0;
            for (std::size_t i = digits; i < pos_; ++i) {
                const int d = s_[i] - '0';
                if (acc < (std::numeric_limits<std::int64_t>::min() + d) / 10) {
                    fail("integer out of range");
                }
                acc = acc * 10 - d;
            }
            if (!negative && acc == std::numeric_limits<std::int64_t>::min()) {
                fail("integer out of range");
            }
            v.number = negative ? acc : -acc;
        }
        return v;
    }

    unsigned hex4() {
        if (s_.size() - pos_ < 4) {
            fail("bad \\u escape");
        }
        unsigned u = 0;
        for (int i = 0; i < 4; ++i) {
            const char h = s_[pos_++];
            u <<= 4;
            if (h >= '0' && h <= '9') u |= static_cast<unsigned>(h - '0');
            else if (h >= 'a' && h <= 'f') u |= static_cast<unsigned>(h - 'a' + 10);
            else if (h >= 'A' && h <= 'F') u |= static_cast<unsigned>(h - 'A' + 10);
            else fail("bad \\u escape");
        }
        return u;
    }

    void utf8(std::string &out, unsigned cp) {
        if (cp < 0x80) {
            out += static_cast<char>(cp);
        } else if (cp < 0x800) {
            out += static_cast<char>(0xC0 | (cp >> 6));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            out += static_cast<char>(0xE0 | (cp >> 12));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        } else {
            out += static_cast<char>(0xF0 | (cp >> 18));
            out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        }
    }

    std::string string() {
        expect('"');
        std::string out;
        for (;;) {
            if (pos_ >= s_.size()) {
                fail("unterminated string");
            }
            const char c = s_[pos_++];
            if (c == '"') {
                return out;
            }
            if (static_cast<unsigned char>(c) < 0x20) {
                fail("control character in a string");
            }
            if (c != '\\') {
                out += c;
                continue;
            }
            if (pos_ >= s_.size()) {
                fail("unterminated string");
            }
            const char e = s_[pos_++];
            switch (e) {
            case '"': out += '"'; break;
            case '\\': out += '\\'; break;
            case '/': out += '/'; break;
            case 'b': out += '\b'; break;
            case 'f': out += '\f'; break;
            case 'n': out += '\n'; break;
            case 'r': out += '\r'; break;
            case 't': out += '\t'; break;
            case 'u': {
                unsigned cp = hex4();
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    if (!literal("\\u")) fail("lone surrogate");
                    const unsigned low = hex4();
                    if (low < 0xDC00 || low > 0xDFFF) fail("lone surrogate");
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    fail("lone surrogate");
                }
                utf8(out, cp);
                break;
            }
            default: fail("bad escape");
            }
        }
    }

    const std::string &s_;
    std::size_t pos_ = 0;
};

// Field readers of one listed object; a wrong type is a listing this
// projection cannot read.
struct ListedObject {
    const JsonReader::Value &v;

    const JsonReader::Value *field(const char *key) const { return v.find(key); }
    std::optional<std::string> opt_string(const char *key) const {
        const auto *f = field(key);
        if (f == nullptr || f->kind == JsonReader::Value::Kind::Null) return std::nullopt;
        if (f->kind != JsonReader::Value::Kind::String) JsonReader::fail(std::string(key) + " is not a string");
        return f->text;
    }
    std::string string(const char *key) const {
        auto s = opt_string(key);
        if (!s) JsonReader::fail(std::string(key) + " is missing");
        return *s;
    }
    std::optional<std::int64_t> opt_integer(const char *key) const {
        const auto *f = field(key);
        if (f == nullptr || f->kind == JsonReader::Value::Kind::Null) return std::nullopt;
        if (f->kind != JsonReader::Value::Kind::Integer) JsonReader::fail(std::string(key) + " is not an integer");
        return f->number;
    }
    std::int64_t integer(const char *key) const {
        auto i = opt_integer(key);
        if (!i) JsonReader::fail(std::string(key) + " is missing");
        return *i;
    }
    std::optional<time_point> opt_time(const char *key) const {
        auto us = opt_integer(key);
        if (!us) return std::nullopt;
        return time_point(std::chrono::microseconds(*us));
    }
};

// The objects of an array value, each read by each.
template <class F>
auto read_items(const JsonReader::Value &array, F each)
    -> std::vector<decltype(each(std::declval<ListedObject>()))> {
    if (array.kind != JsonReader::Value::Kind::Array) {
        JsonReader::fail("not an array");
    }
    std::vector<decltype(each(std::declval<ListedObject>()))> out;
    out.reserve(array.items.size());
    for (const auto &item : array.items) {
        if (item.kind != JsonReader::Value::Kind::Object) {
            JsonReader::fail("an item is not an object");
        }
        out.push_back(each(ListedObject{item}));
    }
    return out;
}

template <class F>
auto parse_listing(const std::string &json, F each) -> std::vector<decltype(each(std::declval<ListedObject>()))> {
    return read_items(JsonReader(json).document(), each);
}

// The document of a paged call or a record: an object.
inline JsonReader::Value parse_object(const std::string &json) {
    JsonReader::Value doc = JsonReader(json).document();
    if (doc.kind != JsonReader::Value::Kind::Object) {
        JsonReader::fail("not an object");
    }
    return doc;
}

// Reads the fields of a job object into j (a listing's job, a page's, or
// the common part of a record).
inline void read_job(const ListedObject &o, Job &j) {
    j.id = o.string("id");
    j.production = o.string("production");
    j.key = o.opt_string("key");
    j.state_text = o.string("state");
    j.state = job_state_from(j.state_text);
    j.worker = o.opt_string("worker");
    j.claimed_at = o.opt_time("claimed_at_unix_us");
    j.expiry = o.opt_time("expiry_unix_us");
    j.attempts = o.integer("attempts");
    j.reason = o.opt_string("reason");
    // Absent before revision 1 (a listing a revision-0 library wrote).
    const std::int64_t priority = o.opt_integer("priority").value_or(0);
    if (priority < 0 || priority > std::numeric_limits<std::int32_t>::max()) {
        JsonReader::fail("priority out of range");
    }
    j.priority = static_cast<std::int32_t>(priority);
    j.claimable_at = o.opt_time("claimable_at_unix_us");
}

inline Job job_from(const ListedObject &o) {
    Job j;
    read_job(o, j);
    return j;
}

inline Event event_from(const ListedObject &o) {
    Event e;
    e.seq = o.integer("seq");
    e.at = time_point(std::chrono::microseconds(o.integer("at_unix_us")));
    e.production = o.string("production");
    e.job_id = o.opt_string("job_id");
    e.kind = o.string("kind");
    e.worker = o.opt_string("worker");
    e.expiry = o.opt_time("expiry_unix_us");
    e.detail = o.opt_string("detail");
    return e;
}

}  // namespace detail

/// Parses a jobs listing (the JSON of leases_jobs_json); throws InternalError
/// if it is not the documented shape. Authority::jobs calls it.
[[nodiscard]] inline std::vector<Job> parse_jobs(const std::string &json) {
    return detail::parse_listing(json, detail::job_from);
}

/// Parses an events listing (the JSON of leases_events_json); throws
/// InternalError if it is not the documented shape. Authority::events calls it.
[[nodiscard]] inline std::vector<Event> parse_events(const std::string &json) {
    return detail::parse_listing(json, detail::event_from);
}

// ---- facts as values ------------------------------------------------------------

class FactValue;
/// A fact's array: its items in order.
using FactArray = std::vector<FactValue>;
/// A fact's object: its members in the order of the JSON text.
using FactObject = std::vector<std::pair<std::string, FactValue>>;

/// A fact's value, typed: null, a boolean, an integer (64-bit), another
/// number (a double), a string (UTF-8), an array or an object; what
/// metadata and provenance hold (Facts maps each key to its value's JSON
/// text). parse() reads JSON text into one, to_json() writes it back as
/// compact JSON for complete() and the other calls that take facts_json.
class FactValue {
public:
    using Variant = std::variant<std::nullptr_t, bool, std::int64_t, double, std::string, FactArray, FactObject>;

    FactValue() : v_(nullptr) {}
    FactValue(std::nullptr_t) : v_(nullptr) {}
    FactValue(bool b) : v_(b) {}
    FactValue(int i) : v_(static_cast<std::int64_t>(i)) {}
    FactValue(long i) : v_(static_cast<std::int64_t>(i)) {}
    FactValue(long long i) : v_(static_cast<std::int64_t>(i)) {}
    FactValue(double d) : v_(d) {}
    FactValue(const char *s) : v_(std::string(s)) {}
    FactValue(std::string s) : v_(std::move(s)) {}
    FactValue(FactArray a) : v_(std::move(a)) {}
    FactValue(FactObject o) : v_(std::move(o)) {}

    bool is_null() const { return std::holds_alternative<std::nullptr_t>(v_); }
    bool is_bool() const { return std::holds_alternative<bool>(v_); }
    bool is_integer() const { return std::holds_alternative<std::int64_t>(v_); }
    /// An integer or another number.
    bool is_number() const { return is_integer() || std::holds_alternative<double>(v_); }
    bool is_string() const { return std::holds_alternative<std::string>(v_); }
    bool is_array() const { return std::holds_alternative<FactArray>(v_); }
    bool is_object() const { return std::holds_alternative<FactObject>(v_); }

    /// The value; each throws InvalidArgumentError when it holds another kind.
    bool as_bool() const { return get<bool>("a boolean"); }
    std::int64_t as_integer() const { return get<std::int64_t>("an integer"); }
    /// The number as a double (an integer converts).
    double as_number() const {
        if (is_integer()) {
            return static_cast<double>(std::get<std::int64_t>(v_));
        }
        return get<double>("a number");
    }
    const std::string &as_string() const { return get<std::string>("a string"); }
    const FactArray &as_array() const { return get<FactArray>("an array"); }
    const FactObject &as_object() const { return get<FactObject>("an object"); }

    /// The object's member key, or nullptr (also for a value that is no object).
    const FactValue *find(const std::string &key) const {
        if (const auto *o = std::get_if<FactObject>(&v_)) {
            for (const auto &m : *o) {
                if (m.first == key) {
                    return &m.second;
                }
            }
        }
        return nullptr;
    }

    const Variant &variant() const { return v_; }

    /// Reads JSON text (one value, as a fact's value or a whole facts_json);
    /// throws InvalidArgumentError for text that is not JSON, nests deeper
    /// than 64 levels, or holds an integer outside 64 bits.
    static FactValue parse(const std::string &json);

    /// Compact JSON text; throws InvalidArgumentError for a number that JSON
    /// cannot write (infinite or NaN).
    std::string to_json() const {
        std::string out;
        write(out);
        return out;
    }

    friend bool operator==(const FactValue &a, const FactValue &b) { return a.v_ == b.v_; }
    friend bool operator!=(const FactValue &a, const FactValue &b) { return !(a == b); }

private:
    template <class T>
    const T &get(const char *what) const {
        if (const T *p = std::get_if<T>(&v_)) {
            return *p;
        }
        static const char *const kinds[] = {"null", "a boolean", "an integer", "a number", "a string", "an array",
                                            "an object"};
        throw InvalidArgumentError(std::string("this fact's value is not ") + what + ": it is " + kinds[v_.index()]);
    }

    static FactValue from(const detail::JsonReader::Value &v) {
        using Kind = detail::JsonReader::Value::Kind;
        switch (v.kind) {
        case Kind::Null: return FactValue();
        case Kind::Bool: return FactValue(v.boolean);
        case Kind::Integer: return FactValue(static_cast<long long>(v.number));
        case Kind::OtherNumber: {
            double d = 0;
            const auto r = std::from_chars(v.text.data(), v.text.data() + v.text.size(), d);
            if (r.ec != std::errc() || !std::isfinite(d)) {
                throw InvalidArgumentError("fact number " + v.text + " is out of a double's range");
            }
            return FactValue(d);
        }
        case Kind::String: return FactValue(v.text);
        case Kind::Array: {
            FactArray a;
            a.reserve(v.items.size());
            for (const auto &item : v.items) {
                a.push_back(from(item));
            }
            return FactValue(std::move(a));
        }
        case Kind::Object: {
            FactObject o;
            o.reserve(v.members.size());
            for (const auto &m : v.members) {
                o.emplace_back(m.first, from(m.second));
            }
            return FactValue(std::move(o));
        }
        }
        return FactValue();
    }

    static void write_string(std::string &out, const std::string &s) {
        static const char hex[] = "0123456789abcdef";
        out += '"';
        for (const char ch : s) {
            const auto c = static_cast<unsigned char>(ch);
            switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            case '\b': out += "\\b"; break;
            case '\f': out += "\\f"; break;
            default:
                if (c < 0x20) {
                    out += "\\u00";
                    out += hex[c >> 4];
                    out += hex[c & 0xf];
                } else {
                    out += ch;
                }
            }
        }
        out += '"';
    }

    void write(std::string &out) const {
        if (is_null()) {
            out += "null";
        } else if (const bool *b = std::get_if<bool>(&v_)) {
            out += *b ? "true" : "false";
        } else if (const auto *i = std::get_if<std::int64_t>(&v_)) {
            out += std::to_string(*i);
        } else if (const double *d = std::get_if<double>(&v_)) {
            if (!std::isfinite(*d)) {
                throw InvalidArgumentError("a fact's number must be finite: JSON has no infinity or NaN");
            }
            char buf[32];
            const auto r = std::to_chars(buf, buf + sizeof buf, *d);
            std::string text(buf, r.ptr);
            // Stays a number other than an integer when read back.
            if (text.find_first_of(".eE") == std::string::npos) {
                text += ".0";
            }
            out += text;
        } else if (const auto *s = std::get_if<std::string>(&v_)) {
            write_string(out, *s);
        } else if (const auto *a = std::get_if<FactArray>(&v_)) {
            out += '[';
            for (std::size_t k = 0; k < a->size(); ++k) {
                if (k) out += ',';
                (*a)[k].write(out);
            }
            out += ']';
        } else if (const auto *o = std::get_if<FactObject>(&v_)) {
            out += '{';
            for (std::size_t k = 0; k < o->size(); ++k) {
                if (k) out += ',';
                write_string(out, (*o)[k].first);
                out += ':';
                (*o)[k].second.write(out);
            }
            out += '}';
        }
    }

    Variant v_;
};

inline FactValue FactValue::parse(const std::string &json) {
    detail::JsonReader::Value doc;
    try {
        doc = detail::JsonReader(json).document();
    } catch (const InternalError &e) {
        // The reader's words are for a listing; say it of the caller's text.
        std::string why = e.what();
        const std::string prefix = "libleases returned a listing this projection cannot read: ";
        if (why.compare(0, prefix.size(), prefix) == 0) {
            why = why.substr(prefix.size());
        }
        throw InvalidArgumentError("not a fact's JSON value: " + why);
    }
    return from(doc);
}

/// A fact: a key and its typed value.
using Fact = std::pair<std::string, FactValue>;

// ---- records and pages ---------------------------------------------------------

/// A file a completion registered (the reference executor's output).
struct Output {
    std::string path;    ///< absolute: the output directory, '/', job id, '.', nonce, ".out"
    std::int64_t size = 0;  ///< bytes
    std::string sha256;  ///< lowercase hex
    std::string nonce;   ///< the execution's nonce
};

/// What a job's completion published. Metadata and provenance map each key
/// to its value's JSON text as the library returns it (compact; string
/// escapes may differ from the published text, the values do not), for any
/// JSON library to read (FactValue::parse reads one into a typed value); both are empty before a completion or when none
/// was published.
struct Facts {
    std::map<std::string, std::string> metadata;
    std::map<std::string, std::string> provenance;
    std::vector<Output> outputs;
};

/// One ended claim of a job (JobRecord::attempt_history).
struct Attempt {
    std::int64_t number = 0;             ///< the job's attempt count when it was claimed
    std::string worker;                  ///< who held the claim
    time_point claimed_at{};             ///< authority time
    time_point ended_at{};               ///< authority time
    std::string ending;                  ///< "completed", "failed", "retry", "released", "expired", "cancelled"
    std::optional<std::string> reason;   ///< the reason given, if any
};

/// One job read back (Authority::job): the listing's fields, the payload's
/// size (never the payload), when it was requested and last changed, the
/// facts its completion published and its newest LEASES_ATTEMPT_HISTORY_LEN
/// ended attempts, oldest first. Never holds a secret.
struct JobRecord : Job {
    std::int64_t payload_size = 0;
    time_point requested_at{};
    time_point updated_at{};
    Facts facts;
    std::vector<Attempt> attempt_history;
};

/// A production as listed.
struct Production {
    std::string id;
    std::string name;
    time_point created_at{};
};

/// One page of jobs or productions: the items and the cursor of the next
/// page (nullopt after the last page).
template <class T>
struct Page {
    std::vector<T> items;
    std::optional<std::string> next;
};

/// One page of events: next is the after_seq of the following call; more
/// says whether more events can be read now (else: later, from next).
struct EventPage {
    std::vector<Event> items;
    std::int64_t next = 0;
    bool more = false;
};

namespace detail {

// The member key of an object value as a key -> JSON text map.
inline std::map<std::string, std::string> raw_members(const std::string &json, const JsonReader::Value *object,
                                                      const char *what) {
    std::map<std::string, std::string> out;
    if (object == nullptr || object->kind == JsonReader::Value::Kind::Null) {
        return out;
    }
    if (object->kind != JsonReader::Value::Kind::Object) {
        JsonReader::fail(std::string(what) + " is not an object");
    }
    for (const auto &m : object->members) {
        out[m.first] = json.substr(m.second.begin, m.second.end - m.second.begin);
    }
    return out;
}

inline Production production_from(const ListedObject &o) {
    Production p;
    p.id = o.string("id");
    p.name = o.string("name");
    p.created_at = time_point(std::chrono::microseconds(o.integer("created_at_unix_us")));
    return p;
}

// The cursor of a page: a string, or null after the last page.
inline std::optional<std::string> next_cursor(const JsonReader::Value &doc) {
    return ListedObject{doc}.opt_string("next");
}

// A "facts" object (of a record, or of a page with facts) read into Facts.
inline Facts read_facts(const std::string &json, const JsonReader::Value &facts) {
    if (facts.kind != JsonReader::Value::Kind::Object) {
        JsonReader::fail("facts is not an object");
    }
    Facts f;
    f.metadata = raw_members(json, facts.find("metadata"), "metadata");
    f.provenance = raw_members(json, facts.find("provenance"), "provenance");
    if (const auto *outputs = facts.find("outputs");
        outputs != nullptr && outputs->kind != JsonReader::Value::Kind::Null) {
        f.outputs = read_items(*outputs, [](const ListedObject &x) {
            Output out;
            out.path = x.string("path");
            out.size = x.integer("size");
            out.sha256 = x.string("sha256");
            out.nonce = x.string("nonce");
            return out;
        });
    }
    return f;
}

}  // namespace detail

/// One page of jobs with their facts (Authority::jobs_page_facts): the page
/// of jobs_page, and the facts of each completed job on it by job id (empty
/// Facts when its completion published none; no entry for other jobs), read
/// in the same call.
struct JobsFactsPage {
    std::vector<Job> items;
    std::optional<std::string> next;
    std::map<std::string, Facts> facts;
};

/// Parses one job's record (the JSON of leases_job_json); throws
/// InternalError if it is not the documented shape. Authority::job calls it.
[[nodiscard]] inline JobRecord parse_job_record(const std::string &json) {
    using Kind = detail::JsonReader::Value::Kind;
    const detail::JsonReader::Value doc = detail::parse_object(json);
    const detail::ListedObject o{doc};
    JobRecord r;
    detail::read_job(o, r);
    r.payload_size = o.integer("payload_size");
    r.requested_at = time_point(std::chrono::microseconds(o.integer("requested_at_unix_us")));
    r.updated_at = time_point(std::chrono::microseconds(o.integer("updated_at_unix_us")));
    if (const auto *facts = o.field("facts"); facts != nullptr && facts->kind != Kind::Null) {
        r.facts = detail::read_facts(json, *facts);
    }
    if (const auto *history = o.field("attempt_history"); history != nullptr && history->kind != Kind::Null) {
        r.attempt_history = detail::read_items(*history, [](const detail::ListedObject &x) {
            Attempt a;
            a.number = x.integer("number");
            a.worker = x.string("worker");
            a.claimed_at = time_point(std::chrono::microseconds(x.integer("claimed_at_unix_us")));
            a.ended_at = time_point(std::chrono::microseconds(x.integer("ended_at_unix_us")));
            a.ending = x.string("ending");
            a.reason = x.opt_string("reason");
            return a;
        });
    }
    return r;
}

/// Parses a page of leases_jobs_page_json; InternalError if malformed.
[[nodiscard]] inline Page<Job> parse_jobs_page(const std::string &json) {
    const detail::JsonReader::Value doc = detail::parse_object(json);
    return {detail::read_items(doc["jobs"], detail::job_from), detail::next_cursor(doc)};
}

/// Parses a page of leases_jobs_page_facts_json; InternalError if malformed.
[[nodiscard]] inline JobsFactsPage parse_jobs_facts_page(const std::string &json) {
    const detail::JsonReader::Value doc = detail::parse_object(json);
    JobsFactsPage page{detail::read_items(doc["jobs"], detail::job_from), detail::next_cursor(doc), {}};
    const auto &facts = doc["facts"];
    if (facts.kind != detail::JsonReader::Value::Kind::Object) {
        detail::JsonReader::fail("facts is not an object");
    }
    for (const auto &m : facts.members) {
        page.facts.emplace(m.first, detail::read_facts(json, m.second));
    }
    return page;
}

/// Parses a page of leases_events_page_json; InternalError if malformed.
[[nodiscard]] inline EventPage parse_events_page(const std::string &json) {
    const detail::JsonReader::Value doc = detail::parse_object(json);
    const auto &more = doc["more"];
    if (more.kind != detail::JsonReader::Value::Kind::Bool) {
        detail::JsonReader::fail("more is not a boolean");
    }
    return {detail::read_items(doc["events"], detail::event_from), doc["next"].integer(), more.boolean};
}

/// Parses a page of leases_productions_page_json; InternalError if malformed.
[[nodiscard]] inline Page<Production> parse_productions_page(const std::string &json) {
    const detail::JsonReader::Value doc = detail::parse_object(json);
    return {detail::read_items(doc["productions"], detail::production_from), detail::next_cursor(doc)};
}

/// An input range over a listing read a page at a time (Authority::each_job,
/// each_event, each_production): begin() reads the first page, incrementing
/// past a page's last item reads the next, so memory stays one page however
/// long the listing is. Single pass; move-only; it must outlive its
/// iterators (a range-for keeps it alive). A page that fails throws from
/// begin() or operator++.
template <class T>
class Pages {
public:
    /// Reads the next page into items; returns false when no page follows it.
    using Fetch = std::function<bool(std::vector<T> &items)>;

    explicit Pages(Fetch fetch) : fetch_(std::move(fetch)) {}
    Pages(Pages &&) noexcept = default;
    Pages &operator=(Pages &&) noexcept = default;
    Pages(const Pages &) = delete;
    Pages &operator=(const Pages &) = delete;
    ~Pages() = default;

    class iterator {
    public:
        using iterator_category = std::input_iterator_tag;
        using value_type = T;
        using difference_type = std::ptrdiff_t;
        using pointer = const T *;
        using reference = const T &;

        iterator() = default;
        reference operator*() const { return pages_->items_[pages_->index_]; }
        pointer operator->() const { return &pages_->items_[pages_->index_]; }
        iterator &operator++() {
            pages_->advance();
            if (pages_->exhausted()) {
                pages_ = nullptr;
            }
            return *this;
        }
        // What it++ returns: the item it pointed at (*it++ is valid on an
        // input iterator), kept by value since the step may read a page.
        class Postfix {
        public:
            explicit Postfix(T item) : item_(std::move(item)) {}
            const T &operator*() const noexcept { return item_; }

        private:
            T item_;
        };
        Postfix operator++(int) {
            Postfix was(**this);
            ++*this;
            return was;
        }
        friend bool operator==(const iterator &a, const iterator &b) noexcept { return a.pages_ == b.pages_; }
        friend bool operator!=(const iterator &a, const iterator &b) noexcept { return a.pages_ != b.pages_; }

    private:
        friend class Pages;
        explicit iterator(Pages *pages) noexcept : pages_(pages) {}
        Pages *pages_ = nullptr;
    };

    /// Reads the first page (once; later calls continue where it stands).
    iterator begin() {
        if (!started_) {
            started_ = true;
            more_ = true;
            load();
        }
        return exhausted() ? end() : iterator(this);
    }
    iterator end() noexcept { return iterator(); }

private:
    // Reads pages until one has items or none follows (an events page may
    // be empty while more are listable).
    void load() {
        items_.clear();
        index_ = 0;
        while (items_.empty() && more_) {
            more_ = fetch_(items_);
        }
    }
    void advance() {
        if (++index_ >= items_.size()) {
            load();
        }
    }
    bool exhausted() const noexcept { return index_ >= items_.size(); }

    Fetch fetch_;
    std::vector<T> items_;
    std::size_t index_ = 0;
    bool started_ = false;
    bool more_ = false;
};

/// The query of a jobs page or of Authority::each_job.
struct JobQuery {
    std::vector<JobState> states;  ///< any of these; empty: every state (Unknown is refused)
    std::string key;               ///< exactly this key; empty: any
    std::string job_id;            ///< exactly this job; empty: any
    /// Items per page: 0 is LEASES_DEFAULT_PAGE_SIZE, at most LEASES_MAX_PAGE_SIZE.
    std::uint32_t page_size = 0;
};

/// The query of an events page or of Authority::each_event.
struct EventQuery {
    std::string production;          ///< empty: every production
    std::string job_id;              ///< empty: every job
    std::vector<std::string> kinds;  ///< any of these ("claimed", "retry", ...); empty: every kind; needs a production or job_id
    std::int64_t after_seq = 0;      ///< list events with a greater seq
    /// Items per page: 0 is LEASES_DEFAULT_PAGE_SIZE, at most LEASES_MAX_PAGE_SIZE.
    std::uint32_t page_size = 0;
};

class Execution;

class Execution;

// ---- waiting -----------------------------------------------------------------

/// The longest wait of Authority::claim_wait and Lease::wait_lost, inclusive (24 h).
inline constexpr std::chrono::microseconds max_wait{LEASES_MAX_WAIT_US};

/// Ends the waits it is given (Authority::claim_wait, Lease::wait_lost) with
/// InterruptedError, now and later (it stays cancelled). One canceller may
/// serve many waits in many threads; cancel() may be called from any thread,
/// but not from a signal handler (it is not async-signal-safe: a signal
/// handler calls Worker::request_stop, or sets a flag of its own and the
/// program waits in slices). Destroy it only after the waits it was given
/// returned. Move-only.
class Canceller {
public:
    Canceller() {
        leases_canceller *out = nullptr;
        check(leases_canceller_new(&out));
        handle_.reset(out);
    }
    /// Adopts a handle the caller owns (from the C API).
    explicit Canceller(leases_canceller *owned) noexcept : handle_(owned) {}

    Canceller(Canceller &&) noexcept = default;
    Canceller &operator=(Canceller &&) noexcept = default;
    Canceller(const Canceller &) = delete;
    Canceller &operator=(const Canceller &) = delete;
    ~Canceller() = default;

    /// Cancels every wait given this canceller, running or to come.
    void cancel() const { check(leases_canceller_cancel(handle_.get())); }

    [[nodiscard]] leases_canceller *capi() const noexcept { return handle_.get(); }

private:
    std::unique_ptr<leases_canceller, detail::CancellerDeleter> handle_;
};

/// What Lease::check and Lease::wait_lost found: the lease still holds its
/// claim (held(), and the object converts to true), or why not: the status
/// its next operation would get (LEASES_CANCELLED, LEASES_EXPIRED,
/// LEASES_LEASE_LOST, LEASES_CLOSED, LEASES_CLOCK_REGRESSED, ...) and the
/// library's message, which never holds a secret.
class Verdict {
public:
    Verdict(leases_status reason, std::string message) : reason_(reason), message_(std::move(message)) {}

    [[nodiscard]] bool held() const noexcept { return reason_ == LEASES_OK; }
    explicit operator bool() const noexcept { return held(); }
    /// LEASES_OK while held, else why not.
    [[nodiscard]] leases_status reason() const noexcept { return reason_; }
    /// The status name of reason() ("ok", "cancelled", ...).
    [[nodiscard]] const char *name() const noexcept { return leases_status_name(reason_); }
    /// The library's description of the reason (empty while held).
    [[nodiscard]] const std::string &message() const noexcept { return message_; }
    /// Whether the claim is gone the way NotHeldError means: another claim is
    /// current, it expired, or the coordinator cancelled the job.
    [[nodiscard]] bool not_held() const noexcept {
        return reason_ == LEASES_LEASE_LOST || reason_ == LEASES_EXPIRED || reason_ == LEASES_CANCELLED;
    }
    /// Throws the Error subclass of reason() (CancelledError, ...); does
    /// nothing while held.
    void throw_if_not_held() const {
        if (!held()) {
            throw_status(reason_, message_.empty() ? std::string(name()) : message_);
        }
    }

private:
    leases_status reason_;
    std::string message_;
};

// ---- retries, run-at and priorities -------------------------------------------

/// The longest run-at distance, delay and backoff cap (366 days).
inline constexpr std::chrono::microseconds max_delay{LEASES_MAX_DELAY_US};

/// A production's retry policy (Authority::create_production,
/// set_retry_policy). The backoff after attempt n is backoff_base * 2^(n-1),
/// scaled by a uniform factor within +-jitter_percent %, then capped at
/// backoff_cap. A default-constructed policy is the library's default (25
/// attempts, 1 s doubling to 1 h, +-20 %). Out-of-bounds values throw
/// InvalidArgumentError from the call and change nothing.
struct RetryPolicy {
    std::int32_t max_attempts = 25;  ///< claims before the job is dead: 1 .. LEASES_MAX_ATTEMPTS
    /// The first backoff: 0 (retry at once) .. backoff_cap.
    std::chrono::microseconds backoff_base = std::chrono::seconds(1);
    /// The longest backoff: backoff_base .. max_delay.
    std::chrono::microseconds backoff_cap = std::chrono::hours(1);
    std::int32_t jitter_percent = 20;  ///< 0 .. 100

    friend bool operator==(const RetryPolicy &a, const RetryPolicy &b) noexcept {
        return a.max_attempts == b.max_attempts && a.backoff_base == b.backoff_base &&
               a.backoff_cap == b.backoff_cap && a.jitter_percent == b.jitter_percent;
    }
    friend bool operator!=(const RetryPolicy &a, const RetryPolicy &b) noexcept { return !(a == b); }
};

/// How long a production keeps its finished jobs, by state (from when each
/// finished), and its events (from when each was recorded); zero keeps them
/// for good, else 1 us .. LEASES_MAX_RETENTION_US. A default-constructed
/// value is the library's default policy.
struct RetentionPolicy {
    std::chrono::microseconds keep_completed = std::chrono::hours(24 * 7);
    std::chrono::microseconds keep_failed = std::chrono::hours(24 * 30);
    std::chrono::microseconds keep_dead = std::chrono::hours(24 * 30);
    std::chrono::microseconds keep_cancelled = std::chrono::hours(24 * 7);
    std::chrono::microseconds keep_events = std::chrono::hours(24 * 7);

    friend bool operator==(const RetentionPolicy &a, const RetentionPolicy &b) noexcept {
        return a.keep_completed == b.keep_completed && a.keep_failed == b.keep_failed &&
               a.keep_dead == b.keep_dead && a.keep_cancelled == b.keep_cancelled && a.keep_events == b.keep_events;
    }
    friend bool operator!=(const RetentionPolicy &a, const RetentionPolicy &b) noexcept { return !(a == b); }
};

/// What Authority::prune deletes: one production or every one (empty), by
/// each production's policy or by an age (older_than, nonzero), with an
/// archive written and synced first (non-empty path), or only counting
/// (dry_run).
struct PruneOptions {
    std::string production;
    std::chrono::microseconds older_than{0};
    std::string archive;
    bool dry_run = false;
};

/// What Authority::prune deleted (or, with dry_run, would).
struct PruneResult {
    std::int64_t jobs = 0;
    std::int64_t events = 0;
};

/// How a job is requested (Authority::request_job with options): a priority
/// and at most one of run_at and delay, both on the authority's clock. A
/// default-constructed value is priority 0, claimable at once.
struct RequestOptions {
    std::int32_t priority = 0;  ///< 0 .. LEASES_MAX_PRIORITY; higher is claimed first
    /// Claimable from this authority time on (as records report times); a
    /// time in the past means now; at most the authority's now + max_delay.
    std::optional<time_point> run_at;
    /// Claimable this long after the authority's now; zero: no delay; at most max_delay.
    std::chrono::microseconds delay{0};
};

namespace detail {

// A states filter as the library spells it ("requested,claimed"); empty:
// none. Unknown names no state this header knows: InvalidArgumentError.
inline std::string state_names(const std::vector<JobState> &states) {
    std::string out;
    for (JobState s : states) {
        if (s == JobState::Unknown) {
            throw InvalidArgumentError("states: JobState::Unknown names no state");
        }
        out += (out.empty() ? "" : ",") + std::string(to_string(s));
    }
    return out;
}

// An event kinds filter ("claimed,retry"); a kind that is empty or holds a
// comma would read as other kinds: InvalidArgumentError.
inline std::string kind_names(const std::vector<std::string> &kinds) {
    std::string out;
    for (const std::string &k : kinds) {
        if (k.empty() || k.find(',') != std::string::npos) {
            throw InvalidArgumentError("kinds: an event kind is a non-empty name without a comma");
        }
        out += (out.empty() ? "" : ",") + k;
    }
    return out;
}

inline std::uint32_t page_size(std::uint32_t n) {
    if (n > LEASES_MAX_PAGE_SIZE) {
        throw InvalidArgumentError("page size " + std::to_string(n) + " is over LEASES_MAX_PAGE_SIZE (" +
                                   std::to_string(LEASES_MAX_PAGE_SIZE) + ")");
    }
    return n;
}

inline leases_retry_policy c_policy(const RetryPolicy &p) noexcept {
    leases_retry_policy c = LEASES_RETRY_POLICY_INIT;
    c.max_attempts = p.max_attempts;
    c.jitter_percent = p.jitter_percent;
    c.backoff_base_us = static_cast<std::int64_t>(p.backoff_base.count());
    c.backoff_cap_us = static_cast<std::int64_t>(p.backoff_cap.count());
    return c;
}

inline leases_request_options c_options(const RequestOptions &o) noexcept {
    leases_request_options c = LEASES_REQUEST_OPTIONS_INIT;
    c.priority = o.priority;
    // Values pass as given (a zero is the library's "none", never a default
    // this side picks); the library checks every bound.
    c.run_at_unix_us = o.run_at ? static_cast<std::int64_t>(o.run_at->time_since_epoch().count()) : 0;
    c.delay_us = static_cast<std::int64_t>(o.delay.count());
    return c;
}

}  // namespace detail

// ---- lease -------------------------------------------------------------------

/// An owning lease on one job. Destroying it frees local memory only: the
/// claim lasts until it is released, failed, completed, expires, or the
/// coordinator cancels the job.
class Lease {
public:
    /// Adopts a handle the caller owns (from the C API).
    explicit Lease(leases_lease *owned) noexcept : handle_(owned) {}

    Lease(Lease &&) noexcept = default;
    Lease &operator=(Lease &&) noexcept = default;
    Lease(const Lease &) = delete;
    Lease &operator=(const Lease &) = delete;
    ~Lease() = default;

    /// The C handle (still owned by this Lease); NULL after a move.
    [[nodiscard]] leases_lease *capi() const noexcept { return handle_.get(); }
    /// Gives up ownership of the C handle; the caller must leases_lease_free it.
    [[nodiscard]] leases_lease *release_capi() noexcept { return handle_.release(); }

    /// Sets the expiry to now + duration; must extend it (NotExtendedError) and
    /// commit before the current expiry (ExpiredError).
    template <class Rep, class Period>
    void renew(std::chrono::duration<Rep, Period> duration) {
        const std::int64_t us = detail::to_us(duration);
        leases::check(leases_lease_renew(handle_.get(), us));
    }
    /// Gives the job back (requested again); closes the lease.
    void release() { leases::check(leases_lease_release(handle_.get())); }
    /// Marks the job failed with reason; closes the lease.
    void fail(const std::string &reason) {
        leases::check(leases_lease_fail(handle_.get(), detail::c_str(reason, "reason")));
    }
    /// Fails the job as retryable: the attempt ends and the job returns to
    /// the queue after the production policy's backoff for this attempt, or
    /// becomes dead if it was the last. reason may be empty. Closes the lease.
    void fail_retry(const std::string &reason = std::string()) {
        leases::check(leases_lease_fail_retry(handle_.get(), detail::c_str(reason, "reason"), 0));
    }
    /// As fail_retry(reason), but the job returns after delay (on the
    /// authority's clock) instead of the policy's backoff; zero: the
    /// backoff. A delay that is negative, over max_delay or not whole
    /// microseconds throws InvalidArgumentError and changes nothing.
    template <class Rep, class Period>
    void fail_retry(const std::string &reason, std::chrono::duration<Rep, Period> delay) {
        const std::int64_t us = detail::to_delay_us(delay, "delay");
        leases::check(leases_lease_fail_retry(handle_.get(), detail::c_str(reason, "reason"), us));
    }
    /// Completes the job publishing facts_json ({"metadata": {...},
    /// "provenance": {...}}; empty means none); closes the lease.
    void complete(const std::string &facts_json = std::string()) {
        leases::check(leases_lease_complete(handle_.get(), detail::c_str(facts_json, "facts_json")));
    }
    /// Completes the job as complete(facts_json) does and claims the
    /// production's next claimable job for the same worker for duration, in
    /// one commit; the arguments in the order of every face (C, Go, Python,
    /// Rust): facts, then duration. Returns the new lease, or std::nullopt
    /// when nothing was claimable (the completion committed all the same). A
    /// refused completion throws its error and claims nothing; this lease is
    /// closed once it succeeds. OutcomeUnknownError: no new lease, this one
    /// stays active, and the error's job_id() is the job the claim chose.
    template <class Rep, class Period>
    [[nodiscard]] std::optional<Lease> complete_and_claim_next(const std::string &facts_json,
                                                               std::chrono::duration<Rep, Period> duration) {
        const std::int64_t us = detail::to_us(duration);
        leases_lease *out = nullptr;
        leases::check(leases_lease_complete_and_claim_next(handle_.get(), detail::c_str(facts_json, "facts_json"), us,
                                                           &out));
        if (out == nullptr) {
            return std::nullopt;
        }
        return Lease(out);
    }
    /// complete_and_claim_next publishing no facts.
    template <class Rep, class Period>
    [[nodiscard]] std::optional<Lease> complete_and_claim_next(std::chrono::duration<Rep, Period> duration) {
        return complete_and_claim_next(std::string(), duration);
    }
    /// The order of 0.1.0, duration before facts, kept for one release.
    template <class Rep, class Period>
    [[deprecated("pass the facts first, as every face does: complete_and_claim_next(facts_json, duration)")]]
    [[nodiscard]] std::optional<Lease> complete_and_claim_next(std::chrono::duration<Rep, Period> duration,
                                                               const std::string &facts_json) {
        return complete_and_claim_next(facts_json, duration);
    }

    /// The expiry last confirmed by the authority (local, no store access).
    [[nodiscard]] time_point expiry() const {
        return time_point(std::chrono::microseconds(expiry_unix_us()));
    }
    /// The same expiry in microseconds since the Unix epoch.
    [[nodiscard]] std::int64_t expiry_unix_us() const {
        std::int64_t us = 0;
        leases::check(leases_lease_expiry(handle_.get(), &us));
        return us;
    }
    [[nodiscard]] std::string job_id() const {
        char *out = nullptr;
        leases::check(leases_lease_job_id(handle_.get(), &out));
        return detail::take_string(out);
    }
    [[nodiscard]] std::string production() const {
        char *out = nullptr;
        leases::check(leases_lease_production(handle_.get(), &out));
        return detail::take_string(out);
    }
    [[nodiscard]] std::string worker() const {
        char *out = nullptr;
        leases::check(leases_lease_worker(handle_.get(), &out));
        return detail::take_string(out);
    }
    /// The claimed job's payload bytes, the worker's input. Reads the store;
    /// works while the lease is active or pending in an edit.
    [[nodiscard]] std::vector<std::uint8_t> payload() const {
        std::uint8_t *out = nullptr;
        std::size_t len = 0;
        leases::check(leases_lease_payload(handle_.get(), &out, &len));
        std::unique_ptr<std::uint8_t, void (*)(void *)> owned(out, leases_free);
        return out ? std::vector<std::uint8_t>(out, out + len) : std::vector<std::uint8_t>();
    }

    /// Exports the active lease as a token for another process. The token is
    /// a credential: keep it out of logs, argument lists and environments.
    [[nodiscard]] std::string export_token() const {
        char *out = nullptr;
        leases::check(leases_lease_export(handle_.get(), &out));
        return detail::take_string(out);
    }

    /// Begins a reference-executor run writing into output_dir.
    [[nodiscard]] inline Execution execution(const std::string &output_dir);

    /// Keeps the lease alive in the background: renews it by the rules of
    /// renew(duration) every interval (zero: a third of duration; else at
    /// least 1 ms and below duration). It stops when the lease closes, at
    /// stop_keep_alive(), when the Lease is destroyed (which still writes
    /// nothing), when the authority closes, and when a renewal is rejected or
    /// retries give up; check() and wait_lost() then say why. Calling it again
    /// replaces the running renewer. docs/workers.md says how long a duration
    /// must be.
    template <class Rep, class Period>
    void keep_alive(std::chrono::duration<Rep, Period> duration) {
        keep_alive(duration, std::chrono::microseconds::zero());
    }
    template <class Rep, class Period, class IRep, class IPeriod>
    void keep_alive(std::chrono::duration<Rep, Period> duration, std::chrono::duration<IRep, IPeriod> interval) {
        const std::int64_t us = detail::to_us(duration);
        const std::int64_t interval_us = interval == interval.zero() ? 0 : detail::to_us(interval);
        leases::check(leases_lease_keep_alive(handle_.get(), us, interval_us));
    }
    /// Stops the keep-alive, if one runs; returns once no renewal can be
    /// written any more. The lease stays as it is.
    void stop_keep_alive() { leases::check(leases_lease_keep_alive_stop(handle_.get())); }

    /// Asks the store, without writing, whether the lease still holds its
    /// claim now on the authority's clock. Throws only when it could not ask
    /// (BusyError, StorageError, ...), which says nothing about the claim.
    [[nodiscard]] Verdict check() const {
        leases_status reason = LEASES_OK;
        leases::check(leases_lease_check(handle_.get(), &reason));
        return verdict(reason);
    }

    /// Waits until this process knows the lease is over (its keep-alive was
    /// rejected or gave up, it closed here, an operation or check() found the
    /// claim over), at most timeout; std::nullopt when the timeout passed
    /// first. A coordinator's cancel reaches a kept-alive lease within one
    /// renewal interval. Throws InterruptedError when canceller (if any) ends
    /// the wait, InvalidArgumentError for a timeout outside 0 .. 24 h.
    template <class Rep, class Period>
    [[nodiscard]] std::optional<Verdict> wait_lost(std::chrono::duration<Rep, Period> timeout,
                                                   const Canceller *canceller = nullptr) const {
        const std::int64_t us = detail::to_wait_us(timeout, "timeout");
        leases_status reason = LEASES_OK;
        leases::check(leases_lease_wait_lost(handle_.get(), us, canceller ? canceller->capi() : nullptr, &reason));
        if (reason == LEASES_OK) {
            return std::nullopt;
        }
        return verdict(reason);
    }
    template <class Rep, class Period>
    [[nodiscard]] std::optional<Verdict> wait_lost(std::chrono::duration<Rep, Period> timeout,
                                                   const Canceller &canceller) const {
        return wait_lost(timeout, &canceller);
    }

private:
    // The verdict of a reason the library just reported on this thread
    // (leases_last_error() describes it).
    static Verdict verdict(leases_status reason) {
        return Verdict(reason, reason == LEASES_OK ? std::string() : std::string(leases_last_error()));
    }

    std::unique_ptr<leases_lease, detail::LeaseDeleter> handle_;
};

namespace detail {

// The lease of a claim call that returned st: nullopt for nothing to claim,
// else the lease, or the status's exception.
inline std::optional<Lease> claimed(leases_status st, leases_lease *out) {
    if (st == LEASES_NOTHING_TO_CLAIM) {
        return std::nullopt;
    }
    check(st);
    return Lease(out);
}

}  // namespace detail

// ---- execution ---------------------------------------------------------------

/// One execution request of the reference executor: write temp_path(), then
/// finish() renames it to final_path() and completes the lease registering
/// the output. Destroying an unfinished Execution abandons it (removes only
/// its own files); it never completes or fails the lease.
class Execution {
public:
    explicit Execution(leases_execution *owned) noexcept : handle_(owned) {}

    Execution(Execution &&) noexcept = default;
    Execution &operator=(Execution &&) noexcept = default;
    Execution(const Execution &) = delete;
    Execution &operator=(const Execution &) = delete;
    ~Execution() = default;

    [[nodiscard]] leases_execution *capi() const noexcept { return handle_.get(); }

    /// The temporary file to write (contains the job id and the nonce).
    [[nodiscard]] std::string temp_path() const { return path(leases_execution_temp_path(handle_.get())); }
    /// The final file name finish() renames the temporary file to.
    [[nodiscard]] std::string final_path() const { return path(leases_execution_final_path(handle_.get())); }

    /// Fsyncs and renames the output, then completes the lease with facts_json.
    /// Consumes the execution, except when it throws InvalidArgumentError (bad
    /// facts_json): then nothing happened and it can be finished again.
    void finish(const std::string &facts_json = std::string()) {
        const char *facts = detail::c_str(facts_json, "facts_json");
        const leases_status st = leases_execution_finish(handle_.get(), facts);
        if (st != LEASES_INVALID_ARGUMENT) {
            (void)handle_.release();  // consumed by the library, success or not
        }
        check(st);
    }
    /// Removes this execution's files and consumes it. Never throws.
    void abandon() noexcept { handle_.reset(); }

private:
    static std::string path(const char *p) {
        if (p == nullptr) {
            throw ClosedError("execution is finished, abandoned or moved from");
        }
        return p;
    }

    std::unique_ptr<leases_execution, detail::ExecutionDeleter> handle_;
};

inline Execution Lease::execution(const std::string &output_dir) {
    leases_execution *out = nullptr;
    leases::check(leases_execution_begin(handle_.get(), detail::c_str(output_dir, "output_dir"), &out));
    return Execution(out);
}

// ---- edit --------------------------------------------------------------------

/// One write transaction holding the writer lock: claims made in it are
/// pending until commit(). Destroying an uncommitted Edit rolls it back
/// (closing its pending leases). Keep edits short.
class Edit {
public:
    explicit Edit(leases_edit *owned) noexcept : handle_(owned) {}

    Edit(Edit &&) noexcept = default;
    Edit &operator=(Edit &&) noexcept = default;
    Edit(const Edit &) = delete;
    Edit &operator=(const Edit &) = delete;
    ~Edit() = default;

    [[nodiscard]] leases_edit *capi() const noexcept { return handle_.get(); }

    /// Claims the next job inside the edit; the lease is pending (ClosedError for
    /// its own operations) until commit(). nullopt: nothing to claim.
    template <class Rep, class Period>
    [[nodiscard]] std::optional<Lease> claim(const std::string &production, const std::string &worker,
                                             std::chrono::duration<Rep, Period> duration) {
        const std::int64_t us = detail::to_us(duration);
        leases_lease *out = nullptr;
        const leases_status st = leases_edit_claim(handle_.get(), detail::c_str(production, "production"),
                                                   detail::c_str(worker, "worker"), us, &out);
        return detail::claimed(st, out);
    }

    /// Completes lease (pending from this edit, or active) inside the edit;
    /// published only if the edit commits.
    void complete(Lease &lease, const std::string &facts_json = std::string()) {
        check(leases_edit_complete(handle_.get(), lease.capi(), detail::c_str(facts_json, "facts_json")));
    }

    /// Commits. The edit is consumed whether or not the commit succeeds.
    void commit() {
        leases_edit *edit = handle_.release();
        check(leases_edit_commit(edit));
    }
    /// Rolls back and consumes the edit. Never throws.
    void abort() noexcept { handle_.reset(); }

private:
    std::unique_ptr<leases_edit, detail::EditDeleter> handle_;
};

// ---- authority -----------------------------------------------------------------

namespace detail {

// The paged calls on a raw handle: a range keeps the handle, which stays put
// when its Authority is moved.
inline std::string jobs_page_json(leases_authority *a, const std::string &production, const std::string &states,
                                  const std::string &key, const std::string &job_id, const std::string &cursor,
                                  std::uint32_t limit) {
    char *out = nullptr;
    check(leases_jobs_page_json(a, c_str(production, "production"), c_str(states, "states"), c_str(key, "key"),
                                c_str(job_id, "job_id"), c_str(cursor, "cursor"), limit, &out));
    return take_string(out);
}
inline std::string jobs_page_facts_json(leases_authority *a, const std::string &production,
                                        const std::string &states, const std::string &key,
                                        const std::string &job_id, const std::string &cursor, std::uint32_t limit) {
    char *out = nullptr;
    check(leases_jobs_page_facts_json(a, c_str(production, "production"), c_str(states, "states"), c_str(key, "key"),
                                      c_str(job_id, "job_id"), c_str(cursor, "cursor"), limit, &out));
    return take_string(out);
}
inline std::string events_page_json(leases_authority *a, const std::string &production, const std::string &job_id,
                                    const std::string &kinds, std::int64_t after_seq, std::uint32_t limit) {
    char *out = nullptr;
    check(leases_events_page_json(a, c_str(production, "production"), c_str(job_id, "job_id"), c_str(kinds, "kinds"),
                                  after_seq, limit, &out));
    return take_string(out);
}
inline std::string productions_page_json(leases_authority *a, const std::string &cursor, std::uint32_t limit) {
    char *out = nullptr;
    check(leases_productions_page_json(a, c_str(cursor, "cursor"), limit, &out));
    return take_string(out);
}

}  // namespace detail

/// SQLite's PRAGMA synchronous (OpenOptions::synchronous), with its meaning:
/// Normal can lose the last acknowledged operations on power loss or an
/// operating system crash (not on a crash of the process); Full, the
/// default, and Extra do not. SQLite only: anything but Default with a
/// PostgreSQL location throws InvalidArgumentError.
enum class Synchronous : std::int32_t {
    Default = LEASES_SYNCHRONOUS_DEFAULT,  ///< Full
    Normal = LEASES_SYNCHRONOUS_NORMAL,
    Full = LEASES_SYNCHRONOUS_FULL,
    Extra = LEASES_SYNCHRONOUS_EXTRA,
};

/// How Authority::open(path, options) opens; every member's default is the
/// library's (Authority::open(path) exactly).
struct OpenOptions {
    /// Refuse to create: a location that holds no authority throws
    /// NotFoundError and nothing is created (an older schema still migrates).
    bool must_exist = false;
    /// SQLite's synchronous mode.
    Synchronous synchronous = Synchronous::Default;
    /// How long an operation waits for a lock (SQLite's writer lock; on
    /// PostgreSQL row locks and connections) before BusyError; zero: 10 s.
    /// Used at millisecond resolution (rounded up), at most
    /// LEASES_MAX_DURATION_US.
    std::chrono::microseconds busy_timeout{0};
};

/// An open authority database. Safe to share between threads. Leases that
/// outlive it report ClosedError.
class Authority {
public:
    /// Adopts a handle the caller owns (from the C API, e.g. a test open).
    /// Checks the ABI number like open().
    explicit Authority(leases_authority *owned) : handle_(owned) {
        detail::check_loaded_abi();
    }

    Authority(Authority &&) noexcept = default;
    Authority &operator=(Authority &&) noexcept = default;
    Authority(const Authority &) = delete;
    Authority &operator=(const Authority &) = delete;
    ~Authority() = default;

    /// Opens (creating or migrating) the database at path. Throws AbiMismatch
    /// before touching the file if the loaded library has another ABI or an
    /// older revision.
    ///
    /// path is a SQLite file (a std::filesystem::path converts), or a
    /// postgres:// or postgresql:// connection URL, which selects the
    /// PostgreSQL store; either is passed to leases_authority_open unchanged.
    /// A failed open throws StorageError; its message never shows a URL's
    /// password.
    [[nodiscard]] static Authority open(const std::string &path) {
        detail::check_loaded_abi();
        leases_authority *out = nullptr;
        check(leases_authority_open(detail::c_str(path, "path"), &out));
        return Authority(out);
    }

    /// Opens with options (OpenOptions; leases_authority_open_v2):
    ///
    ///     auto a = leases::Authority::open(path, {/*must_exist=*/true});
    ///     leases::OpenOptions o;
    ///     o.synchronous = leases::Synchronous::Normal;
    ///     o.busy_timeout = 250ms;
    ///     auto b = leases::Authority::open(path, o);
    ///
    /// With must_exist a missing authority throws NotFoundError and nothing
    /// is created; a bad option throws InvalidArgumentError before anything
    /// is opened.
    [[nodiscard]] static Authority open(const std::string &path, const OpenOptions &options) {
        leases_open_options o = LEASES_OPEN_OPTIONS_INIT;
        o.flags = options.must_exist ? LEASES_OPEN_MUST_EXIST : 0;
        o.synchronous = static_cast<std::int32_t>(options.synchronous);
        o.busy_timeout_us = static_cast<std::int64_t>(options.busy_timeout.count());
        return open_v2(path, o);
    }

    /// The raw C struct of 0.1.0, kept for one release: use OpenOptions.
    template <class Options, std::enable_if_t<std::is_same_v<Options, leases_open_options>, int> = 0>
    [[deprecated("open with leases::OpenOptions (must_exist, synchronous, busy_timeout), not leases_open_options")]]
    [[nodiscard]] static Authority open(const std::string &path, const Options &options) {
        return open_v2(path, options);
    }

private:
    static Authority open_v2(const std::string &path, const leases_open_options &options) {
        detail::check_loaded_abi();
        leases_authority *out = nullptr;
        check(leases_authority_open_v2(detail::c_str(path, "path"), &options, &out));
        return Authority(out);
    }

public:
    [[nodiscard]] leases_authority *capi() const noexcept { return handle_.get(); }
    /// Closes the database now (the destructor does it otherwise).
    void close() noexcept { handle_.reset(); }

    /// Creates a production; an existing name is fine.
    void create_production(const std::string &name) {
        check(leases_production_create(handle_.get(), detail::c_str(name, "production")));
    }

    /// Creates a production with a retry policy. An existing name is fine
    /// with the same policy and WrongStateError with another (change it with
    /// set_retry_policy); a policy out of bounds is InvalidArgumentError.
    void create_production(const std::string &name, const RetryPolicy &policy) {
        const leases_retry_policy c = detail::c_policy(policy);
        check(leases_production_create_v2(handle_.get(), detail::c_str(name, "production"), &c));
    }
    /// The coordinator's change of a production's policy (RetryPolicy{}: the
    /// default); it applies to every attempt that ends after it, and a
    /// policy_changed event records it.
    void set_retry_policy(const std::string &production, const RetryPolicy &policy) {
        const leases_retry_policy c = detail::c_policy(policy);
        check(leases_production_set_policy(handle_.get(), detail::c_str(production, "production"), &c));
    }

    /// The coordinator's change of a production's retention policy; pruning
    /// applies it from its next batch, and a retention_changed event records it.
    void set_retention_policy(const std::string &production, const RetentionPolicy &policy) {
        leases_retention_policy c = LEASES_RETENTION_POLICY_INIT;
        c.keep_completed_us = static_cast<std::int64_t>(policy.keep_completed.count());
        c.keep_failed_us = static_cast<std::int64_t>(policy.keep_failed.count());
        c.keep_dead_us = static_cast<std::int64_t>(policy.keep_dead.count());
        c.keep_cancelled_us = static_cast<std::int64_t>(policy.keep_cancelled.count());
        c.keep_events_us = static_cast<std::int64_t>(policy.keep_events.count());
        check(leases_production_set_retention(handle_.get(), detail::c_str(production, "production"), &c));
    }
    /// A production's retention policy.
    [[nodiscard]] RetentionPolicy retention_policy(const std::string &production) {
        leases_retention_policy c = LEASES_RETENTION_POLICY_INIT;
        check(leases_production_retention(handle_.get(), detail::c_str(production, "production"), &c));
        RetentionPolicy r;
        r.keep_completed = std::chrono::microseconds(c.keep_completed_us);
        r.keep_failed = std::chrono::microseconds(c.keep_failed_us);
        r.keep_dead = std::chrono::microseconds(c.keep_dead_us);
        r.keep_cancelled = std::chrono::microseconds(c.keep_cancelled_us);
        r.keep_events = std::chrono::microseconds(c.keep_events_us);
        return r;
    }
    /// Deletes the finished jobs and events past their retention (PruneOptions),
    /// in batches of at most 64 jobs and 1000 events, each one short
    /// transaction; never a requested or claimed job.
    PruneResult prune(const PruneOptions &options = PruneOptions{}) {
        leases_prune_options c = LEASES_PRUNE_OPTIONS_INIT;
        c.flags = options.dry_run ? LEASES_PRUNE_DRY_RUN : 0;
        c.older_than_us = static_cast<std::int64_t>(options.older_than.count());
        const char *production =
            options.production.empty() ? nullptr : detail::c_str(options.production, "production");
        const char *archive = options.archive.empty() ? nullptr : detail::c_str(options.archive, "path");
        PruneResult r;
        check(leases_prune(handle_.get(), production, archive, &c, &r.jobs, &r.events));
        return r;
    }

    /// Requests a job with a priority and a run-at or delay (RequestOptions);
    /// bad options throw InvalidArgumentError and write nothing. A repeated
    /// keyed request returns the existing job: the first request's options stand.
    [[nodiscard]] std::string request_job(const std::string &production, const std::string &key,
                                          const std::string &payload, const RequestOptions &options) {
        return request_job(production, key, reinterpret_cast<const std::uint8_t *>(payload.data()),
                           payload.size(), options);
    }
    [[nodiscard]] std::string request_job(const std::string &production, const std::string &key,
                                          const std::vector<std::uint8_t> &payload, const RequestOptions &options) {
        return request_job(production, key, payload.data(), payload.size(), options);
    }
    [[nodiscard]] std::string request_job(const std::string &production, const std::string &key,
                                          const std::uint8_t *payload, std::size_t payload_len,
                                          const RequestOptions &options) {
        detail::check_size(payload_len, LEASES_MAX_PAYLOAD_LEN, "payload", "LEASES_MAX_PAYLOAD_LEN");
        const leases_request_options c = detail::c_options(options);
        char *out = nullptr;
        check(leases_job_request_v2(handle_.get(), detail::c_str(production, "production"),
                                    detail::c_str(key, "key"), payload_len ? payload : nullptr, payload_len, &c,
                                    &out));
        return detail::take_string(out);
    }

    /// Requests a job; with a key the request is idempotent. Returns the job id.
    [[nodiscard]] std::string request_job(const std::string &production, const std::string &key = std::string(),
                                          const std::string &payload = std::string()) {
        return request_job(production, key, reinterpret_cast<const std::uint8_t *>(payload.data()),
                           payload.size());
    }
    [[nodiscard]] std::string request_job(const std::string &production, const std::string &key,
                                          const std::vector<std::uint8_t> &payload) {
        return request_job(production, key, payload.data(), payload.size());
    }
    [[nodiscard]] std::string request_job(const std::string &production, const std::string &key,
                                          const std::uint8_t *payload, std::size_t payload_len) {
        detail::check_size(payload_len, LEASES_MAX_PAYLOAD_LEN, "payload", "LEASES_MAX_PAYLOAD_LEN");
        char *out = nullptr;
        check(leases_job_request(handle_.get(), detail::c_str(production, "production"),
                                 detail::c_str(key, "key"), payload_len ? payload : nullptr, payload_len,
                                 &out));
        return detail::take_string(out);
    }

    /// Claims the next claimable job (FIFO) for duration; nullopt if none.
    template <class Rep, class Period>
    [[nodiscard]] std::optional<Lease> claim(const std::string &production, const std::string &worker,
                                             std::chrono::duration<Rep, Period> duration) {
        const std::int64_t us = detail::to_us(duration);
        leases_lease *out = nullptr;
        const leases_status st = leases_claim(handle_.get(), detail::c_str(production, "production"),
                                              detail::c_str(worker, "worker"), us, &out);
        return detail::claimed(st, out);
    }

    /// Claims the next claimable job like claim(), waiting up to wait (0 ..
    /// 24 h, whole microseconds; zero is claim()) for one to become
    /// claimable. While it waits it writes nothing and holds no lock; it wakes
    /// when a request or a release commits anywhere and when a claim expires
    /// on the authority's clock. nullopt when wait passed. Throws
    /// InterruptedError when canceller (if any) is or gets cancelled, nothing
    /// claimed; ClosedError when the authority closes meanwhile. wait is this
    /// host's patience, measured on its monotonic clock, and decides nothing
    /// about the lease. Blocks only the calling thread.
    template <class Rep, class Period, class WRep, class WPeriod>
    [[nodiscard]] std::optional<Lease> claim_wait(const std::string &production, const std::string &worker,
                                                  std::chrono::duration<Rep, Period> duration,
                                                  std::chrono::duration<WRep, WPeriod> wait,
                                                  const Canceller *canceller = nullptr) {
        const std::int64_t us = detail::to_us(duration);
        const std::int64_t wait_us = detail::to_wait_us(wait, "wait");
        leases_lease *out = nullptr;
        const leases_status st =
            leases_claim_wait(handle_.get(), detail::c_str(production, "production"), detail::c_str(worker, "worker"),
                              us, wait_us, canceller ? canceller->capi() : nullptr, &out);
        return detail::claimed(st, out);
    }
    template <class Rep, class Period, class WRep, class WPeriod>
    [[nodiscard]] std::optional<Lease> claim_wait(const std::string &production, const std::string &worker,
                                                  std::chrono::duration<Rep, Period> duration,
                                                  std::chrono::duration<WRep, WPeriod> wait,
                                                  const Canceller &canceller) {
        return claim_wait(production, worker, duration, wait, &canceller);
    }

    /// Claims one given job.
    template <class Rep, class Period>
    [[nodiscard]] Lease claim_job(const std::string &production, const std::string &job_id,
                                  const std::string &worker, std::chrono::duration<Rep, Period> duration) {
        const std::int64_t us = detail::to_us(duration);
        leases_lease *out = nullptr;
        check(leases_claim_job(handle_.get(), detail::c_str(production, "production"),
                               detail::c_str(job_id, "job_id"), detail::c_str(worker, "worker"), us, &out));
        return Lease(out);
    }

    /// Coordinator cancel (no secret); not blocked by clock regression.
    void cancel(const std::string &production, const std::string &job_id) {
        check(leases_cancel(handle_.get(), detail::c_str(production, "production"),
                            detail::c_str(job_id, "job_id")));
    }

    /// The coordinator's redrive of one failed, dead or cancelled job (no
    /// secret): it is requested again, claimable at once, its attempts reset
    /// to 0 (its attempt history keeps the old ones). Another state:
    /// WrongStateError.
    void retry_job(const std::string &production, const std::string &job_id) {
        check(leases_job_retry(handle_.get(), detail::c_str(production, "production"),
                               detail::c_str(job_id, "job_id")));
    }
    /// Redrives every job of the production in state (Failed, Dead or
    /// Cancelled; another is InvalidArgumentError) as retry_job does each, in
    /// batches: each job's redrive is atomic, the whole is not (after a
    /// failure, list the jobs to see). Returns how many were redriven.
    [[nodiscard]] std::int64_t redrive(const std::string &production, JobState state) {
        const std::string name = detail::state_names({state});
        std::int64_t count = 0;
        check(leases_production_redrive(handle_.get(), detail::c_str(production, "production"), name.c_str(),
                                        &count));
        return count;
    }

    /// Turns an exported token back into an active lease.
    [[nodiscard]] Lease import_token(const std::string &token) {
        if (token.size() > LEASES_MAX_TOKEN_LEN) {
            // Checked before the scan and the call: a token is short.
            throw BadTokenError("token is " + std::to_string(token.size()) + " bytes, over the limit of " +
                                std::to_string(LEASES_MAX_TOKEN_LEN) + " (LEASES_MAX_TOKEN_LEN)");
        }
        if (token.find('\0') != std::string::npos) {
            // A NUL would cut the token short on the C side; it is malformed.
            throw BadTokenError("token contains a NUL byte");
        }
        leases_lease *out = nullptr;
        check(leases_lease_import(handle_.get(), token.c_str(), &out));
        return Lease(out);
    }

    /// Begins an edit (one write transaction; may throw BusyError).
    [[nodiscard]] Edit edit() {
        leases_edit *out = nullptr;
        check(leases_edit_begin(handle_.get(), &out));
        return Edit(out);
    }

    /// The production's jobs in request order, typed (no secrets).
    [[nodiscard]] std::vector<Job> jobs(const std::string &production) { return parse_jobs(jobs_json(production)); }
    /// Events with seq > after_seq, oldest first, typed; empty production: all.
    [[nodiscard]] std::vector<Event> events(const std::string &production = std::string(), std::int64_t after_seq = 0) {
        return parse_events(events_json(production, after_seq));
    }

    /// The production's jobs as the library's JSON array (no secrets; docs in leases.h).
    [[nodiscard]] std::string jobs_json(const std::string &production) {
        char *out = nullptr;
        check(leases_jobs_json(handle_.get(), detail::c_str(production, "production"), &out));
        return detail::take_string(out);
    }
    /// Events with seq > after_seq as a JSON array; empty production: all.
    [[nodiscard]] std::string events_json(const std::string &production = std::string(),
                                          std::int64_t after_seq = 0) {
        char *out = nullptr;
        check(leases_events_json(handle_.get(), detail::c_str(production, "production"), after_seq, &out));
        return detail::take_string(out);
    }

    // Paged observations: the library's JSON (docs/c-api.md). An empty
    // string is "no filter" (states and kinds: comma-separated names), an
    // empty cursor the first page, a limit of 0 LEASES_DEFAULT_PAGE_SIZE.

    /// One page of jobs: {"jobs": [...], "next": cursor or null}.
    [[nodiscard]] std::string jobs_page_json(const std::string &production, const std::string &states = std::string(),
                                             const std::string &key = std::string(),
                                             const std::string &job_id = std::string(),
                                             const std::string &cursor = std::string(), std::uint32_t limit = 0) {
        return detail::jobs_page_json(handle_.get(), production, states, key, job_id, cursor, limit);
    }
    /// One page of jobs with their facts: {"jobs": [...], "next": cursor or
    /// null, "facts": {job id: facts, ...}}.
    [[nodiscard]] std::string jobs_page_facts_json(const std::string &production,
                                                   const std::string &states = std::string(),
                                                   const std::string &key = std::string(),
                                                   const std::string &job_id = std::string(),
                                                   const std::string &cursor = std::string(), std::uint32_t limit = 0) {
        return detail::jobs_page_facts_json(handle_.get(), production, states, key, job_id, cursor, limit);
    }
    /// One page of events: {"events": [...], "next": seq, "more": bool}.
    [[nodiscard]] std::string events_page_json(const std::string &production = std::string(),
                                               const std::string &job_id = std::string(),
                                               const std::string &kinds = std::string(), std::int64_t after_seq = 0,
                                               std::uint32_t limit = 0) {
        return detail::events_page_json(handle_.get(), production, job_id, kinds, after_seq, limit);
    }
    /// One job's record: the listing's fields, payload_size, times and facts.
    [[nodiscard]] std::string job_json(const std::string &production, const std::string &job_id) {
        char *out = nullptr;
        check(leases_job_json(handle_.get(), detail::c_str(production, "production"),
                              detail::c_str(job_id, "job_id"), &out));
        return detail::take_string(out);
    }
    /// One page of productions: {"productions": [...], "next": cursor or null}.
    [[nodiscard]] std::string productions_page_json(const std::string &cursor = std::string(),
                                                    std::uint32_t limit = 0) {
        return detail::productions_page_json(handle_.get(), cursor, limit);
    }
    // Paged observations, typed (no secrets). Every argument is checked
    // when the call is made, before any store access.

    /// One job read back: state, worker, times, priority, attempts, payload
    /// size, the facts its completion published and its attempt history.
    [[nodiscard]] JobRecord job(const std::string &production, const std::string &job_id) {
        return parse_job_record(job_json(production, job_id));
    }
    /// One page of the production's jobs in request order; pass the page's
    /// next as cursor for the following one.
    [[nodiscard]] Page<Job> jobs_page(const std::string &production, const JobQuery &query = JobQuery(),
                                      const std::string &cursor = std::string()) {
        return parse_jobs_page(jobs_page_json(production, detail::state_names(query.states), query.key,
                                              query.job_id, cursor, detail::page_size(query.page_size)));
    }
    /// The same page as jobs_page with the facts of its completed jobs, read
    /// in one call (not one job() per job).
    [[nodiscard]] JobsFactsPage jobs_page_facts(const std::string &production, const JobQuery &query = JobQuery(),
                                                const std::string &cursor = std::string()) {
        return parse_jobs_facts_page(jobs_page_facts_json(production, detail::state_names(query.states), query.key,
                                                          query.job_id, cursor,
                                                          detail::page_size(query.page_size)));
    }
    /// One page of events (query.after_seq onwards).
    [[nodiscard]] EventPage events_page(const EventQuery &query = EventQuery()) {
        return parse_events_page(events_page_json(query.production, query.job_id, detail::kind_names(query.kinds),
                                                  query.after_seq, detail::page_size(query.page_size)));
    }
    /// One page of productions in byte order of their names.
    [[nodiscard]] Page<Production> productions_page(const std::string &cursor = std::string(),
                                                    std::uint32_t limit = 0) {
        return parse_productions_page(productions_page_json(cursor, detail::page_size(limit)));
    }

    /// Every job of the production that matches query, in request order, a
    /// page at a time: each job that existed when the first page was read
    /// comes once, in the state its page saw. The Authority must outlive the range.
    [[nodiscard]] Pages<Job> each_job(const std::string &production, JobQuery query = JobQuery()) {
        (void)detail::c_str(production, "production");
        const std::string states = detail::state_names(query.states);
        (void)detail::c_str(query.key, "key");
        (void)detail::c_str(query.job_id, "job_id");
        (void)detail::page_size(query.page_size);
        std::optional<std::string> cursor = std::string();
        return Pages<Job>([h = handle_.get(), production, states, query, cursor](std::vector<Job> &items) mutable {
            Page<Job> page = parse_jobs_page(
                detail::jobs_page_json(h, production, states, query.key, query.job_id, *cursor, query.page_size));
            items = std::move(page.items);
            cursor = std::move(page.next);
            return cursor.has_value();
        });
    }
    /// The events after query.after_seq that can be read now, oldest first,
    /// a page at a time; it ends when no more can be read yet (continue
    /// later from the last event's seq).
    [[nodiscard]] Pages<Event> each_event(EventQuery query = EventQuery()) {
        (void)detail::c_str(query.production, "production");
        (void)detail::c_str(query.job_id, "job_id");
        const std::string kinds = detail::kind_names(query.kinds);
        (void)detail::page_size(query.page_size);
        if (query.after_seq < 0) {
            throw InvalidArgumentError("after_seq must not be negative");
        }
        return Pages<Event>([h = handle_.get(), query, kinds](std::vector<Event> &items) mutable {
            EventPage page = parse_events_page(
                detail::events_page_json(h, query.production, query.job_id, kinds, query.after_seq, query.page_size));
            items = std::move(page.items);
            query.after_seq = page.next;
            return page.more;
        });
    }
    /// Every production by name, a page at a time.
    [[nodiscard]] Pages<Production> each_production(std::uint32_t page_size = 0) {
        (void)detail::page_size(page_size);
        std::optional<std::string> cursor = std::string();
        return Pages<Production>([h = handle_.get(), page_size, cursor](std::vector<Production> &items) mutable {
            Page<Production> page = parse_productions_page(detail::productions_page_json(h, *cursor, page_size));
            items = std::move(page.items);
            cursor = std::move(page.next);
            return cursor.has_value();
        });
    }

    /// The production's jobs by state: {"requested": n, ..., "at_unix_us": t}.
    [[nodiscard]] std::string job_counts_json(const std::string &production) {
        char *out = nullptr;
        check(leases_job_counts_json(handle_.get(), detail::c_str(production, "production"), &out));
        return detail::take_string(out);
    }

private:
    std::unique_ptr<leases_authority, detail::AuthorityDeleter> handle_;
};


// ---- worker ------------------------------------------------------------------

/// What a Worker does (docs/cpp.md, "Writing a worker"). Zero is every
/// field's default, with the meaning every face of libleases gives it
/// (tests/vectors/worker_loop.json).
struct WorkerOptions {
    std::string production;  ///< the production to claim from
    std::string worker;      ///< the worker name recorded with each claim
    /// Each claim's duration, renewed by the keep-alive while the handler runs.
    std::chrono::microseconds duration{std::chrono::minutes(1)};
    /// The keep-alive's interval; zero: a third of duration.
    std::chrono::microseconds keep_alive_interval{0};
    /// After a drain request, how long the running handlers may go on; then
    /// their jobs are given back (released) and run() returns without
    /// waiting for them. nullopt or zero: the running handlers always finish.
    std::optional<std::chrono::microseconds> drain_timeout;
    /// Stop after this many claims; 0: no limit.
    std::uint64_t max_jobs = 0;
    /// Stop once a claim waiting 100 ms finds nothing.
    bool exit_when_empty = false;
    /// How many handlers run at once, each on a std::thread of its own; 0: 1.
    /// At most 1024.
    unsigned concurrency = 0;
};

/// What Worker::run did.
struct WorkerReport {
    std::uint64_t claimed = 0;    ///< leases claimed
    /// Of claimed, those the previous job's completion claimed in its own
    /// commit (Lease::complete_and_claim_next): one commit for both.
    /// Counted with concurrency 1 only (0 otherwise).
    std::uint64_t claimed_in_completion = 0;
    std::uint64_t completed = 0;  ///< jobs completed with the handler's facts
    std::uint64_t released = 0;   ///< jobs given back: the keep-alive could not start, a give-back stop, or the drain timeout passed
    std::uint64_t retried = 0;    ///< jobs failed for a retry (the production's backoff): the handler threw
    std::uint64_t by_handler = 0; ///< jobs the handler settled itself (Execution::finish, Lease::fail, release, ...)
    std::uint64_t unsettled = 0;  ///< jobs the worker could not settle (the claim was gone, the store failed)
    bool drain_timed_out = false; ///< the drain timeout passed: the running jobs were released, their handlers left running
    bool gave_back = false;       ///< the jobs still out were given back (drain timeout or request_give_back)
};

namespace detail {

struct WorkerDeleter {
    void operator()(leases_worker *w) const noexcept { leases_worker_free(w); }
};

// An integer member of the worker's stats JSON (0 when absent).
inline std::uint64_t worker_stat(leases_worker *w, const char *key) {
    char *out = nullptr;
    check(leases_worker_stats_json(w, &out));
    const JsonReader::Value doc = parse_object(take_string(out));
    const JsonReader::Value *v = doc.find(key);
    return v != nullptr && v->kind == JsonReader::Value::Kind::Integer ? static_cast<std::uint64_t>(v->number) : 0;
}

// What one run of a Worker shares with its handler threads; a thread whose
// handler outlives run() (the drain timeout passed) keeps it alive.
struct WorkerRun {
    std::unique_ptr<leases_worker, WorkerDeleter> handle;
    std::function<std::string(Lease &)> handler;
    std::shared_ptr<const std::atomic<int>> requested;  // the Worker's stop request
    std::atomic<int> applied{0};                  // the stop mode passed to leases_worker_stop
    std::atomic<std::uint64_t> unsettled{0}, in_completion{0};
    bool count_in_completion = false;
    std::mutex mu;
    leases_status failed = LEASES_OK;  // why leases_worker_next could not go on
    std::string failed_message;

    // Passes a stop request on to the handle (never from a signal handler).
    void apply(int mode) {
        int done = applied.load();
        while (mode > done) {
            if (applied.compare_exchange_weak(done, mode)) {
                (void)leases_worker_stop(handle.get(), mode == 1 ? LEASES_STOP_DRAIN : LEASES_STOP_GIVE_BACK);
                return;
            }
        }
    }
};

}  // namespace detail

/// A worker loop on the library's one loop (leases_worker, docs/workers.md):
/// the claims, the keep-alive, back-off (50 ms doubling to 5 s), max jobs,
/// exit-when-empty, drain and the drain timeout are the library's; the
/// Worker runs the handler on WorkerOptions::concurrency std::threads
/// sharing the handle. The handler gets each job's lease, kept alive while
/// it runs; what it returns completes the job (facts JSON; empty: none),
/// claiming the next in the same commit when the loop would claim again
/// anyway. When it throws, the attempt fails for a retry (it returns after
/// the production's backoff, or is dead after its last attempt) with the
/// exception's what() as the reason, made a reason by the library's one
/// rule (invalid UTF-8 becomes U+FFFD); anything else thrown gives the
/// reason "worker: the handler threw". A handler may settle the lease itself
/// (Lease::complete, fail, release, Lease::execution then Execution::finish);
/// the worker then leaves it as it is. Never move the lease out of the
/// handler's reference: it belongs to the worker.
///
/// request_stop() drains: no new claim, the running handlers finish (or,
/// after WorkerOptions::drain_timeout, their jobs are released), run()
/// returns. request_give_back() gives the jobs out back at once. Both only
/// store to a lock-free std::atomic<int>, so they are async-signal-safe; run()
/// passes the request on to the library within 100 ms. StopSignals installs
/// SIGINT/SIGTERM handlers that call them (the first signal drains, the
/// second gives back).
///
/// RAII: the destructor never writes to the store; every write happens
/// inside run(). Not copyable or movable (a signal handler may hold its
/// address). The handler should return soon after stop_requested() or a
/// lost lease (Lease::wait_lost reports LEASES_CLOSED once the worker gave
/// the job back).
class Worker {
public:
    using Handler = std::function<std::string(Lease &)>;

    /// Checks the options (InvalidArgumentError, InvalidDurationError) before
    /// any store access. authority must outlive run().
    Worker(Authority &authority, WorkerOptions options) : auth_(authority), opt_(std::move(options)) {
        (void)detail::c_str(opt_.production, "production");
        (void)detail::c_str(opt_.worker, "worker");
        if (opt_.production.empty() || opt_.worker.empty()) {
            throw InvalidArgumentError("worker: production and worker must not be empty");
        }
        (void)detail::to_us(opt_.duration);
        if (opt_.keep_alive_interval != opt_.keep_alive_interval.zero() &&
            (detail::to_us(opt_.keep_alive_interval) < 1000 || opt_.keep_alive_interval >= opt_.duration)) {
            throw InvalidDurationError("worker: keep_alive_interval must be zero (a third of the duration) or "
                                       "at least 1 ms and below the duration");
        }
        if (opt_.drain_timeout) {
            (void)detail::to_wait_us(*opt_.drain_timeout, "worker: drain_timeout");
        }
        if (opt_.concurrency > 1024) {
            throw InvalidArgumentError("worker: concurrency must be at most 1024");
        }
        if (opt_.max_jobs > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
            throw InvalidArgumentError("worker: max_jobs is too large");
        }
    }

    Worker(const Worker &) = delete;
    Worker &operator=(const Worker &) = delete;
    Worker(Worker &&) = delete;
    Worker &operator=(Worker &&) = delete;
    ~Worker() = default;

    /// Asks run() to drain and return. Async-signal-safe; idempotent.
    void request_stop() noexcept {
        int none = 0;
        stop_->compare_exchange_strong(none, 1);
    }
    /// Asks run() to give the jobs out back at once and return (after a
    /// drain too). Async-signal-safe; idempotent.
    void request_give_back() noexcept { stop_->store(2); }
    /// Whether a stop (drain or give-back) was requested.
    [[nodiscard]] bool stop_requested() const noexcept { return stop_->load() != 0; }

    /// Runs the loop until a stop request, max_jobs claims, or (with
    /// exit_when_empty) an empty production, and every job out is settled
    /// or given back. Throws for an unknown production, a closed authority
    /// or another failure the loop cannot go on from (after the running
    /// handlers returned); busy, storage, outcome-unknown and
    /// clock-regressed claims are retried with back-off.
    WorkerReport run(Handler handler) {
        if (!handler) {
            throw InvalidArgumentError("worker: the handler is empty");
        }
        leases_worker_options o = LEASES_WORKER_OPTIONS_INIT;
        o.flags = opt_.exit_when_empty ? LEASES_WORKER_EXIT_WHEN_EMPTY : 0;
        o.concurrency = static_cast<std::int32_t>(opt_.concurrency);
        o.max_jobs = static_cast<std::int64_t>(opt_.max_jobs);
        o.interval_us = opt_.keep_alive_interval == opt_.keep_alive_interval.zero()
                            ? 0 : detail::to_us(opt_.keep_alive_interval);
        o.drain_timeout_us = opt_.drain_timeout ? detail::to_wait_us(*opt_.drain_timeout, "worker: drain_timeout") : 0;
        leases_worker *h = nullptr;
        check(leases_worker_new(auth_.capi(), detail::c_str(opt_.production, "production"),
                                detail::c_str(opt_.worker, "worker"), detail::to_us(opt_.duration), &o, &h));
        auto run = std::make_shared<detail::WorkerRun>();
        run->handle.reset(h);
        run->handler = std::move(handler);
        run->requested = stop_;
        run->count_in_completion = opt_.concurrency <= 1;

        const unsigned n = opt_.concurrency == 0 ? 1 : opt_.concurrency;
        std::vector<std::thread> threads;
        std::vector<std::shared_ptr<std::atomic<int>>> phases;  // 0 claiming, 1 in the handler, 2 returned
        try {
            for (unsigned i = 0; i < n; ++i) {
                phases.push_back(std::make_shared<std::atomic<int>>(0));
                threads.emplace_back(serve, run, phases.back());
            }
        } catch (...) {
            (void)leases_worker_stop(h, LEASES_STOP_GIVE_BACK);
            for (std::thread &t : threads) {
                t.join();
            }
            throw;
        }
        // This thread passes stop requests on (a signal handler cannot) and
        // waits for the loop's end.
        std::int32_t end = LEASES_WORKER_RUNNING;
        while (end == LEASES_WORKER_RUNNING) {
            run->apply(stop_->load());
            if (leases_worker_wait(h, 100000, nullptr, &end) != LEASES_OK) {
                end = LEASES_WORKER_FAILED;
            }
        }
        run->apply(stop_->load());
        for (std::size_t i = 0; i < threads.size(); ++i) {
            // A handler still running after its job was given back is left
            // to finish on its own; its lease reports LEASES_CLOSED.
            if (end == LEASES_WORKER_GAVE_BACK && phases[i]->load() == 1) {
                threads[i].detach();
            } else {
                threads[i].join();
            }
        }
        WorkerReport report;
        report.claimed = detail::worker_stat(h, "claimed");
        report.completed = detail::worker_stat(h, "completed");
        report.retried = detail::worker_stat(h, "failed");
        report.released = detail::worker_stat(h, "released");
        report.by_handler = detail::worker_stat(h, "settled");
        report.unsettled = run->unsettled.load();
        // Every job claimed is settled or given back once the loop ended:
        // the rest were given back (a drain timeout, a give-back, a lease
        // claimed for the next caller as the stop came).
        const std::uint64_t accounted = report.completed + report.retried + report.released + report.by_handler +
                                        report.unsettled;
        report.released += report.claimed > accounted ? report.claimed - accounted : 0;
        report.claimed_in_completion = run->in_completion.load();
        report.gave_back = end == LEASES_WORKER_GAVE_BACK;
        report.drain_timed_out = report.gave_back && run->applied.load() == 1;
        const std::lock_guard<std::mutex> lock(run->mu);
        if (run->failed != LEASES_OK) {
            throw_status(run->failed, run->failed_message);
        }
        return report;
    }

private:
    // One handler thread: next, the handler, settle, until the loop hands
    // out nothing more.
    static void serve(std::shared_ptr<detail::WorkerRun> run, std::shared_ptr<std::atomic<int>> phase) {
        leases_worker *h = run->handle.get();
        for (;;) {
            leases_lease *l = nullptr;
            const leases_status st = leases_worker_next(h, 1000000, &l);
            if (st == LEASES_NOTHING_TO_CLAIM) {
                continue;
            }
            if (st != LEASES_OK) {
                const std::lock_guard<std::mutex> lock(run->mu);
                if (run->failed == LEASES_OK) {
                    run->failed = st;
                    run->failed_message = leases_last_error();
                }
                break;
            }
            if (l == nullptr) {
                break;
            }
            phase->store(1);
            Lease lease(l);  // the worker's: never freed here
            std::string text;
            std::int32_t outcome = LEASES_RESULT_COMPLETE;
            try {
                text = run->handler(lease);
            } catch (const std::exception &e) {
                outcome = LEASES_RESULT_FAIL_RETRY;
                text = e.what();
            } catch (...) {
                outcome = LEASES_RESULT_FAIL_RETRY;
                text = "worker: the handler threw";
            }
            if (lease.capi() != l) {
                std::terminate();  // the handler moved the worker's lease away: it would free it
            }
            (void)lease.release_capi();
            phase->store(0);
            run->apply(run->requested->load());  // a completion after a stop request claims nothing
            settle(*run, l, outcome, text);
        }
        phase->store(2);
    }

    static void settle(detail::WorkerRun &run, leases_lease *l, std::int32_t outcome, const std::string &text) {
        leases_worker *h = run.handle.get();
        leases_status lost = LEASES_OK;
        if (leases_lease_wait_lost(l, 0, nullptr, &lost) == LEASES_OK && lost == LEASES_CLOSED) {
            // The handler closed the lease itself, or the worker gave it back.
            const leases_status st = leases_worker_settle(h, l, LEASES_RESULT_SETTLED, nullptr, 0);
            if (st == LEASES_OK || st == LEASES_CLOSED) {
                return;
            }
        }
        const std::uint64_t before = run.count_in_completion && outcome == LEASES_RESULT_COMPLETE
                                         ? claimed_so_far(h) : 0;
        leases_status st = leases_worker_settle(h, l, outcome, text.data(), text.size());
        if (st == LEASES_OK && before != 0 && claimed_so_far(h) > before) {
            run.in_completion.fetch_add(1);
        }
        if (st == LEASES_INVALID_ARGUMENT && outcome == LEASES_RESULT_COMPLETE) {
            // Facts the library refused: the attempt fails for a retry, with why.
            const std::string why = std::string("worker: the handler's facts were refused: ") + leases_last_error();
            st = leases_worker_settle(h, l, LEASES_RESULT_FAIL_RETRY, why.data(), why.size());
        }
        if (st == LEASES_INVALID_ARGUMENT) {
            st = leases_worker_settle(h, l, LEASES_RESULT_RELEASE, nullptr, 0);  // nothing else can take it back
        }
        if (st != LEASES_OK && st != LEASES_CLOSED) {
            run.unsettled.fetch_add(1);
        }
    }

    // The loop's claims so far; 0 when it cannot say (a handler thread
    // must not throw).
    static std::uint64_t claimed_so_far(leases_worker *h) noexcept {
        try {
            return detail::worker_stat(h, "claimed");
        } catch (...) {
            return 0;
        }
    }

    static_assert(std::atomic<int>::is_always_lock_free,
                  "request_stop must be async-signal-safe: a lock-free atomic store");

    Authority &auth_;
    WorkerOptions opt_;
    // 0 none, 1 drain, 2 give back; shared with the handler threads, which
    // may outlive run() and the Worker (the drain timeout).
    std::shared_ptr<std::atomic<int>> stop_ = std::make_shared<std::atomic<int>>(0);
};

/// Installs SIGINT and SIGTERM handlers (SA_ONSTACK, as leases.h requires
/// while the Go runtime is in the process) that stop worker: the first
/// signal drains (Worker::request_stop), the next gives the jobs back at
/// once (Worker::request_give_back). The handlers only store to lock-free
/// atomics: async-signal-safe. The destructor restores the previous
/// handlers. One StopSignals at a time per process (a second throws
/// InvalidArgumentError).
class StopSignals {
public:
    explicit StopSignals(Worker &worker) {
        Worker *none = nullptr;
        if (!target().compare_exchange_strong(none, &worker)) {
            throw InvalidArgumentError("StopSignals: another StopSignals is installed");
        }
        struct sigaction sa {};
        sa.sa_handler = &StopSignals::on_signal;
        sa.sa_flags = SA_ONSTACK | SA_RESTART;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, &old_int_);
        sigaction(SIGTERM, &sa, &old_term_);
    }
    StopSignals(const StopSignals &) = delete;
    StopSignals &operator=(const StopSignals &) = delete;
    ~StopSignals() {
        sigaction(SIGINT, &old_int_, nullptr);
        sigaction(SIGTERM, &old_term_, nullptr);
        target().store(nullptr);
    }

private:
    static std::atomic<Worker *> &target() noexcept {
        static std::atomic<Worker *> worker{nullptr};
        return worker;
    }
    static void on_signal(int) noexcept {
        if (Worker *w = target().load()) {
            if (w->stop_requested()) {
                w->request_give_back();
            } else {
                w->request_stop();
            }
        }
    }
    static_assert(std::atomic<Worker *>::is_always_lock_free, "the signal handler stores lock-free only");

    struct sigaction old_int_ {};
    struct sigaction old_term_ {};
};

}  // namespace leases

#endif  // LEASES_LEASES_HPP
