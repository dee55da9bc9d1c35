// Package leases is the Go API of libleases: it opens an authority by
// location (a SQLite path, or a postgres:// URL) and re-exports what a Go
// program needs from package core, so one import is enough. The rules live
// in core (github.com/libleases/libleases/core), which names no concrete
// store and stays importable on its own.
//
//	auth, err := leases.Open("jobs.db")
//	lease, err := auth.Claim("nightly", "worker-1", 30*time.Second)
//	if errors.Is(err, leases.ErrNothingToClaim) { ... }
package leases

import (
	"time"

	"github.com/libleases/libleases/core"
	"github.com/libleases/libleases/core/store"
	"github.com/libleases/libleases/core/store/stores"
)

// Options tune OpenWith: BusyTimeout, Synchronous (SQLite only) and
// MustExist. The zero value is the safe default.
type Options = stores.Options

// Open opens the authority at location, creating it if it does not exist
// and migrating an older schema. A location starting with postgres:// or
// postgresql:// (any letter case) is a PostgreSQL connection URL; anything
// else is the path of a SQLite file.
func Open(location string) (*Authority, error) { return OpenWith(location, Options{}) }

// OpenWith is Open with options. With MustExist, a location that holds no
// authority is ErrNotFound and nothing is created.
func OpenWith(location string, opts Options) (*Authority, error) {
	return core.OpenStore(location, stores.Name(location), func() (store.Backend, error) {
		return stores.Open(location, opts)
	})
}

// IsPostgres reports whether location selects the PostgreSQL store.
func IsPostgres(location string) bool { return stores.IsPostgres(location) }

// The types of package core.
type (
	Authority  = core.Authority
	Edit       = core.Edit
	Lease      = core.Lease
	LeaseState = core.LeaseState
	Execution  = core.Execution
	Production = core.Production
	Job        = core.Job
	Event      = core.Event
	Facts      = core.Facts
	Output     = core.Output
	Token      = core.Token
	Secret     = core.Secret
	Error      = core.Error
	Kind       = core.Kind
	// Retries, run-at and priorities (docs/CONCEPTS.md).
	RetryPolicy    = core.RetryPolicy
	RequestOptions = core.RequestOptions
	Attempt        = core.Attempt
	// Pages of jobs (docs/observing.md); JobQuery.Facts reads the page's
	// facts with it (JobPage.Facts).
	JobQuery  = core.JobQuery
	JobPage   = core.JobPage
	JobRecord = core.JobRecord
)

// Local states of a lease handle.
const (
	LeasePending = core.LeasePending
	LeaseActive  = core.LeaseActive
	LeaseClosed  = core.LeaseClosed
)

// Job states as observed.
const (
	StateRequested = core.StateRequested
	StateClaimed   = core.StateClaimed
	StateCompleted = core.StateCompleted
	StateFailed    = core.StateFailed
	StateCancelled = core.StateCancelled
	StateDead      = core.StateDead
)

// Limits on caller input.
const (
	MaxNameLen    = core.MaxNameLen
	MaxReasonLen  = core.MaxReasonLen
	MaxPayloadLen = core.MaxPayloadLen
	MaxFactsLen   = core.MaxFactsLen
	MaxPathLen    = core.MaxPathLen
	MaxTokenLen   = core.MaxTokenLen
	MaxDuration   = core.MaxDuration
	MaxDurationUS = core.MaxDurationUS
	// Bounds of retries, run-at and priorities.
	MaxPriority       = core.MaxPriority
	MaxAttemptsLimit  = core.MaxAttemptsLimit
	MaxDelay          = core.MaxDelay
	AttemptHistoryLen = core.AttemptHistoryLen
)

// Bounds of waiting claims and keep-alives (docs/workers.md).
const (
	MaxWait              = core.MaxWait
	MaxWaitUS            = core.MaxWaitUS
	MinKeepAliveInterval = core.MinKeepAliveInterval
)

// KeepAliveOption adjusts Lease.KeepAlive.
type KeepAliveOption = core.KeepAliveOption

// KeepAliveInterval sets the time between a keep-alive's renewals (default:
// a third of the duration).
func KeepAliveInterval(interval time.Duration) KeepAliveOption {
	return core.KeepAliveInterval(interval)
}

// The kinds of failure, in C status order (docs/errors.md).
const (
	KindInvalidArgument = core.KindInvalidArgument
	KindInvalidDuration = core.KindInvalidDuration
	KindNotFound        = core.KindNotFound
	KindNothingToClaim  = core.KindNothingToClaim
	KindWrongState      = core.KindWrongState
	KindLeaseLost       = core.KindLeaseLost
	KindExpired         = core.KindExpired
	KindCancelled       = core.KindCancelled
	KindNotExtended     = core.KindNotExtended
	KindClockRegressed  = core.KindClockRegressed
	KindClosed          = core.KindClosed
	KindBadToken        = core.KindBadToken
	KindBusy            = core.KindBusy
	KindStorage         = core.KindStorage
	KindOutcomeUnknown  = core.KindOutcomeUnknown
	KindSchemaTooNew    = core.KindSchemaTooNew
	KindForked          = core.KindForked
	KindInternal        = core.KindInternal
	KindInterrupted     = core.KindInterrupted
)

// Sentinels for errors.Is, one per kind.
var (
	ErrInvalidArgument = core.ErrInvalidArgument
	ErrInvalidDuration = core.ErrInvalidDuration
	ErrNotFound        = core.ErrNotFound
	ErrNothingToClaim  = core.ErrNothingToClaim
	ErrWrongState      = core.ErrWrongState
	ErrLeaseLost       = core.ErrLeaseLost
	ErrExpired         = core.ErrExpired
	ErrCancelled       = core.ErrCancelled
	ErrNotExtended     = core.ErrNotExtended
	ErrClockRegressed  = core.ErrClockRegressed
	ErrClosed          = core.ErrClosed
	ErrBadToken        = core.ErrBadToken
	ErrBusy            = core.ErrBusy
	ErrStorage         = core.ErrStorage
	ErrOutcomeUnknown  = core.ErrOutcomeUnknown
	ErrSchemaTooNew    = core.ErrSchemaTooNew
	ErrForked          = core.ErrForked
	ErrInternal        = core.ErrInternal
	ErrInterrupted     = core.ErrInterrupted
	// ErrNotHeld matches lease_lost, expired and cancelled together.
	ErrNotHeld = core.ErrNotHeld
)

// KindOf returns the kind of err: KindInternal for a foreign error, 0 for nil.
func KindOf(err error) Kind { return core.KindOf(err) }

// Kinds lists every kind in status order.
func Kinds() []Kind { return core.Kinds() }

// DefaultRetryPolicy is the policy of a production created without one.
func DefaultRetryPolicy() RetryPolicy { return core.DefaultRetryPolicy() }

// ParseFacts reads facts JSON: {"metadata": {...}, "provenance": {...}}.
func ParseFacts(text string) (Facts, error) { return core.ParseFacts(text) }

// ValidateDuration checks a claim duration: a positive whole number of
// microseconds up to MaxDuration; it returns the microseconds.
func ValidateDuration(d time.Duration) (int64, error) { return core.ValidateDuration(d) }

// ValidateDurationUS is ValidateDuration in microseconds.
func ValidateDurationUS(us int64) (time.Duration, error) { return core.ValidateDurationUS(us) }

// EncodeToken encodes a token canonically (it holds the secret: a credential).
func EncodeToken(t Token) (string, error) { return core.EncodeToken(t) }

// DecodeToken parses a token text; every error is KindBadToken.
func DecodeToken(text string) (Token, error) { return core.DecodeToken(text) }

// DisplayName is a name as a listing prints it for people: look-alike and
// invisible characters escaped, so no two names print alike.
func DisplayName(name string) string { return core.DisplayName(name) }

// NewSecret makes a claim secret of 16 bytes.
func NewSecret(b [16]byte) Secret { return core.NewSecret(b) }
