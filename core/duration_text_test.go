package core

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDurationsInMessagesAreWrittenAsPeopleWriteThem(t *testing.T) {
	for d, want := range map[time.Duration]string{
		48 * time.Hour:                  "48h",
		90 * time.Minute:                "1h30m",
		90 * time.Second:                "1m30s",
		250 * time.Millisecond:          "250ms",
		1500 * time.Microsecond:         "1500us",
		1500 * time.Millisecond:         "1s500ms",
		999:                             "999ns",
		1500:                            "1500ns",
		0:                               "0s",
		-time.Microsecond:               "-1us",
		24*time.Hour - time.Microsecond: "23h59m59s999999us",
		24*time.Hour + time.Microsecond: "24h1us",
		math.MaxInt64:                   "2562047h47m16s854775807ns",
		math.MinInt64:                   "-2562047h47m16s854775808ns",
	} {
		require.Equal(t, want, FormatDuration(d), "%d ns", int64(d))
	}
	_, err := ValidateDuration(48 * time.Hour)
	require.EqualError(t, err, "invalid_duration: duration must be at most 24h, got 48h")
	_, err = ValidateDuration(1500)
	require.EqualError(t, err, "invalid_duration: duration must be a whole number of microseconds, got 1500ns")
}
