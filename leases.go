// Package leases is the Go API of libleases: it opens an authority by
// location (a SQLite path, or a postgres:// URL) and re-exports what a Go
// program needs from package core, so one import is enough. The rules live
// in core (github.com/libleases/libleases/core), which names no concrete
// store and stays importable on its own.
//
//	auth, err := leases.Open("jobs.db")
//	lease, err := auth.Claim("nightly", "worker-1", 30*time.Second)
//	if errors.Is(err, leases.ErrNothingToClaim) { ... }
//
// Every write has a form that takes a context.Context, as the waits and
// the observations do (ClaimContext, CompleteContext, RequestJobContext,
// ...: the names database/sql uses): a context that ends before the write
// commits ends it and nothing is written.
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
	// Retention, pruning and archives (docs/CONCEPTS.md).
	RetentionPolicy = core.RetentionPolicy
	PruneOptions    = core.PruneOptions
	PruneResult     = core.PruneResult
	BackgroundPrune = core.BackgroundPrune
)

// KeepForGood, as a duration of a RetentionPolicy, keeps what it covers for
// good; DefaultPruneInterval is how often an open authority prunes.
const (
	KeepForGood          = core.KeepForGood
	DefaultPruneInterval = core.DefaultPruneInterval
	// MaxRetention bounds every duration of a retention policy; a pruning
	// transaction deletes at most PruneJobBatch jobs and PruneEventBatch
	// events.
	MaxRetention    = core.MaxRetention
	PruneJobBatch   = core.PruneJobBatch
	PruneEventBatch = core.PruneEventBatch
)

// FinishedStates are the states whose jobs pruning deletes.
var FinishedStates = core.FinishedStates

// The observations (docs/observing.md): paged listings, one job's record,
// counts, the events of a timeline and the authority's clock.
type (
	ProductionQuery = core.ProductionQuery
	ProductionPage  = core.ProductionPage
	JobQuery        = core.JobQuery
	JobPage         = core.JobPage
	JobRecord       = core.JobRecord
	EventQuery      = core.EventQuery
	EventPage       = core.EventPage
	RecentPage      = core.RecentPage
	JobCounts       = core.JobCounts
	MinuteCount     = core.MinuteCount
	WorkerActivity  = core.WorkerActivity
	ClockReading    = core.ClockReading
	JobTimes        = core.JobTimes
)

// Bounds of the observations.
const (
	DefaultPageSize   = core.DefaultPageSize
	MaxPageSize       = core.MaxPageSize
	MaxCursorLen      = core.MaxCursorLen
	MaxObservedWindow = core.MaxObservedWindow
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

// DefaultRetentionPolicy is the retention policy of a production created
// without one.
func DefaultRetentionPolicy() RetentionPolicy { return core.DefaultRetentionPolicy() }

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

// FormatDuration writes d as people write durations: 48h, 1h30m, 250ms,
// 1500us; the CLI reads back every whole-µs text.
func FormatDuration(d time.Duration) string { return core.FormatDuration(d) }

// MissingProduction reports whether err is not_found because a production
// does not exist, and its name.
func MissingProduction(err error) (name string, ok bool) { return core.MissingProduction(err) }

// Job id prefixes: the shortest prefix accepted in place of a whole id,
// and how many ids an ambiguous prefix's error lists.
const (
	MinJobIDPrefix     = core.MinJobIDPrefix
	MaxJobIDCandidates = core.MaxJobIDCandidates
)

// IsJobIDPrefix reports whether s is a job id or a prefix of one long
// enough to look up (at least MinJobIDPrefix characters).
func IsJobIDPrefix(s string) bool { return core.IsJobIDPrefix(s) }
