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
//     positive whole number of microseconds up to 24 h throw DurationError
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

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <ratio>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace leases {

// ---- errors ----------------------------------------------------------------

/// Base of every error the projection throws. status() is the leases_status
/// of the failed call (docs/errors.md).
class Error : public std::runtime_error {
public:
    Error(leases_status status, const std::string &message)
        : std::runtime_error(message), status_(status) {}

    /// The C status code (LEASES_EXPIRED, ...).
    [[nodiscard]] leases_status status() const noexcept { return status_; }
    /// The status name of tests/vectors/statuses.json ("expired", ...).
    [[nodiscard]] const char *name() const noexcept { return leases_status_name(status_); }

private:
    leases_status status_;
};

// One class per status. The names follow the other projections (Python:
// leases.DurationError, ...); the comment names the C status.
#define LEASES_HPP_ERROR_CLASS(Name, Status)                                          \
    class Name : public Error {                                                       \
    public:                                                                           \
        static constexpr leases_status code = Status;                                 \
        explicit Name(const std::string &message) : Error(Status, message) {}         \
    }

LEASES_HPP_ERROR_CLASS(InvalidArgument, LEASES_INVALID_ARGUMENT);  // bad input or handle
LEASES_HPP_ERROR_CLASS(DurationError, LEASES_INVALID_DURATION);    // not 1 us .. 24 h whole us
LEASES_HPP_ERROR_CLASS(NotFound, LEASES_NOT_FOUND);                // production or job unknown
LEASES_HPP_ERROR_CLASS(NothingToClaim, LEASES_NOTHING_TO_CLAIM);   // check() only: claim() gives nullopt
LEASES_HPP_ERROR_CLASS(StateError, LEASES_WRONG_STATE);            // job/claim state forbids it
LEASES_HPP_ERROR_CLASS(LeaseLost, LEASES_LEASE_LOST);              // another claim is current
LEASES_HPP_ERROR_CLASS(Expired, LEASES_EXPIRED);                   // the claim expired
LEASES_HPP_ERROR_CLASS(Cancelled, LEASES_CANCELLED);               // coordinator cancelled the job
LEASES_HPP_ERROR_CLASS(NotExtended, LEASES_NOT_EXTENDED);          // renewal would not extend
LEASES_HPP_ERROR_CLASS(ClockRegressed, LEASES_CLOCK_REGRESSED);    // clock behind high-water mark
LEASES_HPP_ERROR_CLASS(Closed, LEASES_CLOSED);                     // closed, pending or consumed
LEASES_HPP_ERROR_CLASS(TokenError, LEASES_BAD_TOKEN);              // malformed token
LEASES_HPP_ERROR_CLASS(Busy, LEASES_BUSY);                         // writer lock not obtained
LEASES_HPP_ERROR_CLASS(StorageError, LEASES_STORAGE);              // database failed, nothing changed
LEASES_HPP_ERROR_CLASS(OutcomeUnknown, LEASES_OUTCOME_UNKNOWN);    // commit failed, may have persisted
LEASES_HPP_ERROR_CLASS(SchemaError, LEASES_SCHEMA_TOO_NEW);        // file from a newer library
LEASES_HPP_ERROR_CLASS(ForkedProcess, LEASES_FORKED);              // used in a fork()ed child
LEASES_HPP_ERROR_CLASS(InternalError, LEASES_INTERNAL);            // library bug, recovered

#undef LEASES_HPP_ERROR_CLASS

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

/// Throws the Error subclass of status with message (status must not be
/// LEASES_OK). An unknown status (a newer library) throws the base Error.
[[noreturn]] inline void throw_status(leases_status status, const std::string &message) {
    switch (status) {
    case LEASES_INVALID_ARGUMENT: throw InvalidArgument(message);
    case LEASES_INVALID_DURATION: throw DurationError(message);
    case LEASES_NOT_FOUND: throw NotFound(message);
    case LEASES_NOTHING_TO_CLAIM: throw NothingToClaim(message);
    case LEASES_WRONG_STATE: throw StateError(message);
    case LEASES_LEASE_LOST: throw LeaseLost(message);
    case LEASES_EXPIRED: throw Expired(message);
    case LEASES_CANCELLED: throw Cancelled(message);
    case LEASES_NOT_EXTENDED: throw NotExtended(message);
    case LEASES_CLOCK_REGRESSED: throw ClockRegressed(message);
    case LEASES_CLOSED: throw Closed(message);
    case LEASES_BAD_TOKEN: throw TokenError(message);
    case LEASES_BUSY: throw Busy(message);
    case LEASES_STORAGE: throw StorageError(message);
    case LEASES_OUTCOME_UNKNOWN: throw OutcomeUnknown(message);
    case LEASES_SCHEMA_TOO_NEW: throw SchemaError(message);
    case LEASES_FORKED: throw ForkedProcess(message);
    case LEASES_INTERNAL: throw InternalError(message);
    default: throw Error(status, message);
    }
}

/// Turns the status of a C call made on this thread just now into an
/// exception carrying leases_last_error(); does nothing for LEASES_OK. Useful
/// when mixing raw C calls (through capi()) with the projection.
inline void check(leases_status status) {
    if (status == LEASES_OK) {
        return;
    }
    // Copied at once: the text is valid only until this thread's next call.
    std::string message = leases_last_error();
    if (message.empty()) {
        message = std::string(leases_status_name(status)) + " (status " +
                  std::to_string(status) + ")";
    }
    throw_status(status, message);
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

// A C string for an input. std::string may hold a NUL byte the C side would
// silently cut at, turning "a\0b" into another name: reject it instead.
inline const char *c_str(const std::string &s, const char *what) {
    if (s.find('\0') != std::string::npos) {
        throw InvalidArgument(std::string(what) + " contains a NUL byte");
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
    std::string shown;
    if constexpr (std::is_signed_v<Rep>) {
        shown = std::to_string(static_cast<long long>(count));
    } else {
        shown = std::to_string(static_cast<unsigned long long>(count));
    }
    throw DurationError("duration " + shown + " x " + std::to_string(Period::num) + "/" +
                        std::to_string(Period::den) + " s is " + why +
                        "; a claim or renewal needs a positive whole number of microseconds "
                        "up to 24 h (nothing is rounded)");
}

// The exact number of microseconds of d, or DurationError. Never overflows:
// d's count is compared against the limit expressed in d's own period.
template <class Rep, class Period>
std::int64_t to_us(std::chrono::duration<Rep, Period> d) {
    static_assert(valid_rep_v<Rep>,
                  "leases: durations need an integral count type such as std::chrono::seconds "
                  "or std::chrono::milliseconds; floating-point and custom Rep types are "
                  "rejected because the authority never rounds a duration");
    static_assert(Period::num > 0 && Period::den > 0, "leases: the duration period must be positive");
    if constexpr (valid_rep_v<Rep>) {
        // r = Period / 1 us, reduced: count * r::num / r::den microseconds.
        using r = std::ratio_divide<Period, std::micro>;
        constexpr std::uintmax_t num = static_cast<std::uintmax_t>(r::num);
        constexpr std::uintmax_t den = static_cast<std::uintmax_t>(r::den);
        constexpr std::uintmax_t max_us = static_cast<std::uintmax_t>(LEASES_MAX_DURATION_US);
        const Rep count = d.count();
        if (!(count > Rep(0))) {
            reject_duration<Rep, Period>(count, "not positive");
        }
        // Only an extension type (__int128) is wider than uintmax_t. A count
        // beyond uintmax_t is rejected here rather than truncated below.
        if constexpr (std::numeric_limits<Rep>::digits > std::numeric_limits<std::uintmax_t>::digits) {
            if (count > static_cast<Rep>(std::numeric_limits<std::uintmax_t>::max())) {
                reject_duration<Rep, Period>(count, "out of range");
            }
        }
        const std::uintmax_t c = static_cast<std::uintmax_t>(count);
        if (c % den != 0) {
            reject_duration<Rep, Period>(count, "not a whole number of microseconds");
        }
        const std::uintmax_t whole = c / den;  // count * r::num / r::den == whole * num
        if (whole > max_us / num) {
            reject_duration<Rep, Period>(count, "longer than 24 h");
        }
        return static_cast<std::int64_t>(whole * num);
    } else {
        return 0;  // unreachable: the static_assert above already failed
    }
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

}  // namespace detail

/// Validates a duration as every claim and renewal does, returning its exact
/// microseconds (1 .. 86'400'000'000); throws DurationError otherwise.
template <class Rep, class Period>
[[nodiscard]] std::int64_t to_microseconds(std::chrono::duration<Rep, Period> d) {
    return detail::to_us(d);
}

class Execution;

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

    /// Sets the expiry to now + duration; must extend it (NotExtended) and
    /// commit before the current expiry (Expired).
    template <class Rep, class Period>
    void renew(std::chrono::duration<Rep, Period> duration) {
        const std::int64_t us = detail::to_us(duration);
        check(leases_lease_renew(handle_.get(), us));
    }
    /// Gives the job back (requested again); closes the lease.
    void release() { check(leases_lease_release(handle_.get())); }
    /// Marks the job failed with reason; closes the lease.
    void fail(const std::string &reason) {
        check(leases_lease_fail(handle_.get(), detail::c_str(reason, "reason")));
    }
    /// Completes the job publishing facts_json ({"metadata": {...},
    /// "provenance": {...}}; empty means none); closes the lease.
    void complete(const std::string &facts_json = std::string()) {
        check(leases_lease_complete(handle_.get(), detail::c_str(facts_json, "facts_json")));
    }

    /// The expiry last confirmed by the authority (local, no store access).
    [[nodiscard]] time_point expiry() const {
        return time_point(std::chrono::microseconds(expiry_unix_us()));
    }
    /// The same expiry in microseconds since the Unix epoch.
    [[nodiscard]] std::int64_t expiry_unix_us() const {
        std::int64_t us = 0;
        check(leases_lease_expiry(handle_.get(), &us));
        return us;
    }
    [[nodiscard]] std::string job_id() const {
        char *out = nullptr;
        check(leases_lease_job_id(handle_.get(), &out));
        return detail::take_string(out);
    }
    [[nodiscard]] std::string production() const {
        char *out = nullptr;
        check(leases_lease_production(handle_.get(), &out));
        return detail::take_string(out);
    }
    [[nodiscard]] std::string worker() const {
        char *out = nullptr;
        check(leases_lease_worker(handle_.get(), &out));
        return detail::take_string(out);
    }
    /// The claimed job's payload bytes, the worker's input. Reads the store;
    /// works while the lease is active or pending in an edit.
    [[nodiscard]] std::vector<std::uint8_t> payload() const {
        std::uint8_t *out = nullptr;
        std::size_t len = 0;
        check(leases_lease_payload(handle_.get(), &out, &len));
        std::unique_ptr<std::uint8_t, void (*)(void *)> owned(out, leases_free);
        return out ? std::vector<std::uint8_t>(out, out + len) : std::vector<std::uint8_t>();
    }

    /// Exports the active lease as a token for another process. The token is
    /// a credential: keep it out of logs, argument lists and environments.
    [[nodiscard]] std::string export_token() const {
        char *out = nullptr;
        check(leases_lease_export(handle_.get(), &out));
        return detail::take_string(out);
    }

    /// Begins a reference-executor run writing into output_dir.
    [[nodiscard]] inline Execution execution(const std::string &output_dir);

private:
    std::unique_ptr<leases_lease, detail::LeaseDeleter> handle_;
};

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
    /// Consumes the execution, except when it throws InvalidArgument (bad
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
            throw Closed("execution is finished, abandoned or moved from");
        }
        return p;
    }

    std::unique_ptr<leases_execution, detail::ExecutionDeleter> handle_;
};

inline Execution Lease::execution(const std::string &output_dir) {
    leases_execution *out = nullptr;
    check(leases_execution_begin(handle_.get(), detail::c_str(output_dir, "output_dir"), &out));
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

    /// Claims the next job inside the edit; the lease is pending (Closed for
    /// its own operations) until commit(). nullopt: nothing to claim.
    template <class Rep, class Period>
    [[nodiscard]] std::optional<Lease> claim(const std::string &production, const std::string &worker,
                                             std::chrono::duration<Rep, Period> duration) {
        const std::int64_t us = detail::to_us(duration);
        leases_lease *out = nullptr;
        const leases_status st = leases_edit_claim(handle_.get(), detail::c_str(production, "production"),
                                                   detail::c_str(worker, "worker"), us, &out);
        if (st == LEASES_NOTHING_TO_CLAIM) {
            return std::nullopt;
        }
        check(st);
        return Lease(out);
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

/// An open authority database. Safe to share between threads. Leases that
/// outlive it report Closed.
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

    [[nodiscard]] leases_authority *capi() const noexcept { return handle_.get(); }
    /// Closes the database now (the destructor does it otherwise).
    void close() noexcept { handle_.reset(); }

    /// Creates a production; an existing name is fine.
    void create_production(const std::string &name) {
        check(leases_production_create(handle_.get(), detail::c_str(name, "production")));
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
        if (st == LEASES_NOTHING_TO_CLAIM) {
            return std::nullopt;
        }
        check(st);
        return Lease(out);
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

    /// Turns an exported token back into an active lease.
    [[nodiscard]] Lease import_token(const std::string &token) {
        if (token.find('\0') != std::string::npos) {
            // A NUL would cut the token short on the C side; it is malformed.
            throw TokenError("token contains a NUL byte");
        }
        leases_lease *out = nullptr;
        check(leases_lease_import(handle_.get(), token.c_str(), &out));
        return Lease(out);
    }

    /// Begins an edit (one write transaction; may throw Busy).
    [[nodiscard]] Edit edit() {
        leases_edit *out = nullptr;
        check(leases_edit_begin(handle_.get(), &out));
        return Edit(out);
    }

    /// The production's jobs as a JSON array (no secrets; docs in leases.h).
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

private:
    std::unique_ptr<leases_authority, detail::AuthorityDeleter> handle_;
};

}  // namespace leases

#endif  // LEASES_LEASES_HPP
