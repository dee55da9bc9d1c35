package core

import "time"

// MaxDuration is the longest claim or renewal: 24 hours, inclusive.
const MaxDuration = 24 * time.Hour

// MaxDurationUS is MaxDuration in microseconds (LEASES_MAX_DURATION_US).
const MaxDurationUS int64 = 86_400_000_000

// ValidateDuration is the one duration rule of every surface: positive, whole
// microseconds, at most 24 h. Nothing is ever rounded. It returns microseconds.
func ValidateDuration(d time.Duration) (int64, error) {
	if d <= 0 {
		return 0, errf(KindInvalidDuration, "duration must be positive, got %s", d)
	}
	if d > MaxDuration {
		return 0, errf(KindInvalidDuration, "duration must be at most 24h, got %s", d)
	}
	if d%time.Microsecond != 0 {
		return 0, errf(KindInvalidDuration, "duration must be a whole number of microseconds, got %s", d)
	}
	return int64(d / time.Microsecond), nil
}

// ValidateDurationUS applies ValidateDuration to a count of microseconds, the
// unit of the C ABI.
func ValidateDurationUS(us int64) (time.Duration, error) {
	if us <= 0 {
		return 0, errf(KindInvalidDuration, "duration must be positive, got %dus", us)
	}
	if us > MaxDurationUS {
		return 0, errf(KindInvalidDuration, "duration must be at most 86400000000us (24h), got %dus", us)
	}
	d := time.Duration(us) * time.Microsecond
	if _, err := ValidateDuration(d); err != nil {
		return 0, err
	}
	return d, nil
}

func describeUS(us int64) string {
	return time.UnixMicro(us).UTC().Format("2006-01-02T15:04:05.000000Z")
}
