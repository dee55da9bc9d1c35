package core

import (
	"errors"
	"fmt"
)

// Kind is the class of a failure. Its numeric value is the C status code
// (LEASES_OK is 0), so every surface reports the same number for the same rule.
type Kind int

// The kinds, in C status order. Do not renumber: this is ABI.
const (
	KindInvalidArgument Kind = iota + 1
	KindInvalidDuration
	KindNotFound
	KindNothingToClaim
	KindWrongState
	KindLeaseLost
	KindExpired
	KindCancelled
	KindNotExtended
	KindClockRegressed
	KindClosed
	KindBadToken
	KindBusy
	KindStorage
	KindOutcomeUnknown
	KindSchemaTooNew
	KindForked
	KindInternal
	// KindInterrupted: a wait was ended by its caller, through a cancelled
	// context or a C canceller; only the waiting functions return it.
	KindInterrupted
)

var kindNames = map[Kind]string{
	KindInvalidArgument: "invalid_argument",
	KindInvalidDuration: "invalid_duration",
	KindNotFound:        "not_found",
	KindNothingToClaim:  "nothing_to_claim",
	KindWrongState:      "wrong_state",
	KindLeaseLost:       "lease_lost",
	KindExpired:         "expired",
	KindCancelled:       "cancelled",
	KindNotExtended:     "not_extended",
	KindClockRegressed:  "clock_regressed",
	KindClosed:          "closed",
	KindBadToken:        "bad_token",
	KindBusy:            "busy",
	KindStorage:         "storage",
	KindOutcomeUnknown:  "outcome_unknown",
	KindSchemaTooNew:    "schema_too_new",
	KindForked:          "forked",
	KindInternal:        "internal",
	KindInterrupted:     "interrupted",
}

// Kinds lists every kind in status order.
func Kinds() []Kind {
	out := make([]Kind, 0, len(kindNames))
	for k := KindInvalidArgument; k <= KindInterrupted; k++ {
		out = append(out, k)
	}
	return out
}

// String is the stable snake_case name shared by every surface.
func (k Kind) String() string {
	if n, ok := kindNames[k]; ok {
		return n
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Error is every failure the authority reports. Compare with errors.Is against
// the Err* sentinels, or errors.As to read Kind. Messages never hold a secret.
type Error struct {
	Kind Kind
	Msg  string
	// JobID names the job the failed operation acted on, when there was one:
	// a lease's job, the job a claim chose or was given, a cancelled job.
	// After an outcome_unknown claim it is how the caller finds the claim
	// (it returned no lease). A job id is never a secret.
	JobID string
	// ClaimedJobID names the job a claim chose when the claim's outcome is
	// unknown (Claim, the waiting claims, CompleteAndClaimNext): the lease
	// it did not return. For a plain claim it equals JobID; for
	// CompleteAndClaimNext JobID is the completed lease's job and this is
	// the next one. Empty for every other error. Never a secret.
	ClaimedJobID string
	Err          error // underlying cause (storage errors); never holds a secret
	// missingProduction names the production a not_found is about, when
	// the production itself does not exist (MissingProduction).
	missingProduction string
}

// MissingProduction reports whether err is not_found because a production
// does not exist, and its name: a caller can then suggest a name that does
// exist, or creating it (the CLI does).
func MissingProduction(err error) (name string, ok bool) {
	var e *Error
	if errors.As(err, &e) && e.Kind == KindNotFound && e.missingProduction != "" {
		return e.missingProduction, true
	}
	return "", false
}

func (e *Error) Error() string {
	if e.Msg == "" {
		return e.Kind.String()
	}
	if e.Err != nil {
		return e.Kind.String() + ": " + e.Msg + ": " + e.Err.Error()
	}
	return e.Kind.String() + ": " + e.Msg
}

func (e *Error) Unwrap() error { return e.Err }

// Is matches any *Error of the same Kind, so errors.Is(err, ErrExpired) works,
// and ErrNotHeld matches each kind that says the claim is no longer held.
func (e *Error) Is(target error) bool {
	if target == ErrNotHeld {
		return e.Kind.NotHeld()
	}
	var t *Error
	if errors.As(target, &t) {
		return t.Kind == e.Kind
	}
	return false
}

// Sentinels for errors.Is.
var (
	ErrInvalidArgument = &Error{Kind: KindInvalidArgument}
	ErrInvalidDuration = &Error{Kind: KindInvalidDuration}
	ErrNotFound        = &Error{Kind: KindNotFound}
	ErrNothingToClaim  = &Error{Kind: KindNothingToClaim}
	ErrWrongState      = &Error{Kind: KindWrongState}
	ErrLeaseLost       = &Error{Kind: KindLeaseLost}
	ErrExpired         = &Error{Kind: KindExpired}
	ErrCancelled       = &Error{Kind: KindCancelled}
	ErrNotExtended     = &Error{Kind: KindNotExtended}
	ErrClockRegressed  = &Error{Kind: KindClockRegressed}
	ErrClosed          = &Error{Kind: KindClosed}
	ErrBadToken        = &Error{Kind: KindBadToken}
	ErrBusy            = &Error{Kind: KindBusy}
	ErrStorage         = &Error{Kind: KindStorage}
	ErrOutcomeUnknown  = &Error{Kind: KindOutcomeUnknown}
	ErrSchemaTooNew    = &Error{Kind: KindSchemaTooNew}
	ErrForked          = &Error{Kind: KindForked}
	ErrInternal        = &Error{Kind: KindInternal}
	ErrInterrupted     = &Error{Kind: KindInterrupted}
)

// ErrNotHeld matches, with errors.Is, every error saying the worker no longer
// holds its claim and must stop: lease_lost, expired and cancelled (the
// bindings' NotHeldError / is_not_held). It is never returned itself.
var ErrNotHeld error = notHeld{}

type notHeld struct{}

func (notHeld) Error() string { return "not held: the claim was lost, expired or cancelled" }

// NotHeld reports whether k says the claim is no longer held.
func (k Kind) NotHeld() bool {
	return k == KindLeaseLost || k == KindExpired || k == KindCancelled
}

// KindOf returns the kind of err, KindInternal for foreign errors, 0 for nil.
func KindOf(err error) Kind {
	if err == nil {
		return 0
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return KindInternal
}

// aboutJob names jobID in err (a copy), unless err already names a job.
func aboutJob(err error, jobID string) error {
	var e *Error
	if jobID == "" || !errors.As(err, &e) || e.JobID != "" {
		return err
	}
	c := *e
	c.JobID = jobID
	return &c
}

func errf(k Kind, format string, args ...any) *Error {
	return &Error{Kind: k, Msg: fmt.Sprintf(format, args...)}
}
