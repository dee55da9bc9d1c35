// Every write path of the authority waits its turn in the SQLite store's
// writer queue (core/store/sqlitestore/writers.go), so threads of one
// process are served in order whatever they write.
package core

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/libleases/libleases/internal/testwait"
	"github.com/stretchr/testify/require"
)

func TestEveryWritePathWaitsItsTurnInTheWriterQueue(t *testing.T) {
	f := realFixture(t)
	b, err := Open(f.path) // a second handle of this process on the same file
	require.NoError(t, err)
	defer b.Close()
	queue, ok := b.b.(interface{ WaitingWriters() int })
	if !ok {
		t.Skip("the writer queue is SQLite's: PostgreSQL has no writer lock")
	}
	ctx := context.Background()
	claim := func(d time.Duration) *Lease {
		t.Helper()
		l, err := b.Claim("p", "w", d)
		require.NoError(t, err)
		return l
	}
	// Each case readies its state, then returns the write to run while
	// another writer holds the turn.
	cases := []struct {
		name  string
		ready func() func() error
	}{
		{"claim, with promotion and a lapse", func() func() error {
			f.request(1)
			// Lapses: the claim below ends it. 200 ms, so that it commits
			// within its duration on a loaded host too.
			claim(200 * time.Millisecond)
			_, err := b.RequestJobWith("p", "", nil, RequestOptions{Delay: time.Millisecond})
			require.NoError(t, err)
			time.Sleep(250 * time.Millisecond)
			return func() error { _, err := b.Claim("p", "w", time.Minute); return err }
		}},
		{"waiting claim", func() func() error {
			f.request(1)
			return func() error { _, err := b.ClaimWait(ctx, "p", "w", time.Minute, time.Minute); return err }
		}},
		{"fail_retry", func() func() error {
			f.request(1)
			l := claim(time.Minute)
			return func() error { return l.FailRetry("again", 0) }
		}},
		{"retry", func() func() error {
			id := f.request(1)[0]
			l, err := b.ClaimJob("p", id, "w", time.Minute)
			require.NoError(t, err)
			require.NoError(t, l.Fail("broken"))
			return func() error { return b.RetryJob("p", id) }
		}},
		{"set_policy", func() func() error {
			return func() error { return b.SetRetryPolicy("p", RetryPolicy{MaxAttempts: 1, BackoffCap: time.Hour}) }
		}},
		{"redrive", func() func() error {
			id := f.request(1)[0]
			l, err := b.ClaimJob("p", id, "w", time.Minute)
			require.NoError(t, err)
			require.NoError(t, l.Release()) // the last attempt (max_attempts 1): dead
			return func() error {
				n, err := b.Redrive("p", StateDead)
				if err == nil && n < 1 {
					err = fmt.Errorf("redrove %d jobs", n)
				}
				return err
			}
		}},
		{"keep-alive renewal", func() func() error {
			id := f.request(1)[0]
			l, err := b.ClaimJob("p", id, "w", time.Second)
			require.NoError(t, err)
			return func() error {
				defer l.StopKeepAlive()
				if err := l.KeepAlive(time.Second, KeepAliveInterval(5*time.Millisecond)); err != nil {
					return err
				}
				for end := time.Now().Add(30 * time.Second); f.renewals(id) == 0; time.Sleep(time.Millisecond) {
					if time.Now().After(end) {
						return fmt.Errorf("never renewed")
					}
				}
				return nil
			}
		}},
		{"complete and claim next", func() func() error {
			f.request(2)
			l := claim(time.Minute)
			return func() error { _, err := l.CompleteAndClaimNext(Facts{}, time.Minute); return err }
		}},
	}
	for _, c := range cases {
		write := c.ready()
		e, err := f.a.begin(ctx) // holds the turn, and the file's writer lock
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() { done <- write() }()
		testwait.Eventually(t, func() bool { return queue.WaitingWriters() == 1 })
		select {
		case err := <-done:
			t.Fatalf("%s: ran while another writer held the turn (%v)", c.name, err)
		default:
		}
		e.Abort()
		select {
		case err := <-done:
			require.NoError(t, err, c.name)
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: never ran after the turn was released", c.name)
		}
		require.Zero(t, queue.WaitingWriters(), c.name)
	}
}
