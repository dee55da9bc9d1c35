package core

import (
	"strconv"
	"strings"
	"time"
)

// MaxDuration is the longest claim or renewal: 24 hours, inclusive.
const MaxDuration = 24 * time.Hour

// MaxDurationUS is MaxDuration in microseconds (LEASES_MAX_DURATION_US).
const MaxDurationUS int64 = 86_400_000_000

// ValidateDuration is the one duration rule of every surface: positive, whole
// microseconds, at most 24 h. Nothing is ever rounded. It returns microseconds.
func ValidateDuration(d time.Duration) (int64, error) {
	if d <= 0 {
		return 0, errf(KindInvalidDuration, "duration must be positive, got %s", FormatDuration(d))
	}
	if d > MaxDuration {
		return 0, errf(KindInvalidDuration, "duration must be at most 24h, got %s", FormatDuration(d))
	}
	if d%time.Microsecond != 0 {
		return 0, errf(KindInvalidDuration, "duration must be a whole number of microseconds, got %s", FormatDuration(d))
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

// FormatDuration writes d as people write a duration, the one spelling of
// every surface's messages (tests/vectors/durations.json "shown"): the
// hours, minutes and seconds that are not zero, largest first, then what
// is left under a second in the largest of ms, us and ns that states it
// whole: 48h, 1h30m, 1m30s, 250ms, 1500us, 1s500ms, 999ns. Zero is 0s; a
// negative duration starts with -. The CLI reads back every whole-µs text.
func FormatDuration(d time.Duration) string {
	var b strings.Builder
	mag := uint64(d)
	if d < 0 {
		b.WriteByte('-')
		mag = -mag
	}
	writeDuration(&b, mag/1e9, mag%1e9)
	return b.String()
}

// writeDuration writes secs seconds and ns nanoseconds (ns < 1e9).
func writeDuration(b *strings.Builder, secs, ns uint64) {
	if secs == 0 && ns == 0 {
		b.WriteString("0s")
		return
	}
	for _, u := range []struct {
		n    uint64
		name string
	}{{secs / 3600, "h"}, {secs % 3600 / 60, "m"}, {secs % 60, "s"}} {
		if u.n != 0 {
			b.WriteString(strconv.FormatUint(u.n, 10) + u.name)
		}
	}
	switch {
	case ns == 0:
	case ns%1e6 == 0:
		b.WriteString(strconv.FormatUint(ns/1e6, 10) + "ms")
	case ns%1e3 == 0:
		b.WriteString(strconv.FormatUint(ns/1e3, 10) + "us")
	default:
		b.WriteString(strconv.FormatUint(ns, 10) + "ns")
	}
}
