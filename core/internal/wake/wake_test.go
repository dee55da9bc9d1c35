package wake

import (
	"testing"
	"time"

	"github.com/libleases/libleases/internal/testwait"
	"github.com/stretchr/testify/require"
)

func woken(w *Waiter) bool {
	select {
	case <-w.C():
		return true
	default:
		return false
	}
}

func join(t *testing.T, h *Hub, key string, n int) []*Waiter {
	t.Helper()
	ws := make([]*Waiter, n)
	for i := range ws {
		w, _, err := h.Join(key)
		require.NoError(t, err)
		ws[i] = w
	}
	return ws
}

func TestAWakeSignalsOnlyTheHeadOfItsKey(t *testing.T) {
	h := New(0)
	ws := join(t, h, "p", 3)
	other := join(t, h, "q", 1)[0]
	h.Wake("p")
	require.True(t, woken(ws[0]))
	require.False(t, woken(ws[1]))
	require.False(t, woken(ws[2]))
	require.False(t, woken(other))
}

func TestASignalledHeadAbsorbsFurtherWakes(t *testing.T) {
	h := New(0)
	ws := join(t, h, "p", 2)
	h.Wake("p")
	h.Wake("p")
	require.True(t, woken(ws[0]))
	require.False(t, woken(ws[1]), "the head's coming look sees both commits")
}

func TestAWakeAfterArmIsKeptForTheNextLook(t *testing.T) {
	h := New(0)
	w := join(t, h, "p", 1)[0]
	h.Wake("p")
	w.Arm() // the wake before Arm is forgotten: the look starts after it
	require.False(t, woken(w))
	h.Wake("p") // a commit during the look
	require.True(t, woken(w), "a wake during a look must not be lost")
}

func TestOnlyTheHeadLooksAndAWaiterBehindItWakesTheHeadInstead(t *testing.T) {
	h := New(0)
	ws := join(t, h, "p", 3)
	require.True(t, ws[0].MayLook())
	require.False(t, woken(ws[0]), "the head's own look wakes nobody")
	ws[0].Arm() // the head looks
	require.False(t, ws[2].MayLook())
	require.True(t, woken(ws[0]), "the head looks again for the waiter behind it")
	require.False(t, woken(ws[1]))
	require.False(t, woken(ws[2]))
	ws[0].Arm() // looks again; then claims and leaves, waking the next
	ws[0].Leave(true)
	require.True(t, ws[1].MayLook(), "the next head looks")
}

func TestAWaiterThatHandedItsLookOverIsWokenOnceItIsTheHead(t *testing.T) {
	h := New(0)
	ws := join(t, h, "p", 2)
	h.WakeAll()
	<-ws[1].C()
	require.False(t, ws[1].MayLook()) // the wake it held goes to the head
	ws[0].Arm()
	ws[0].Leave(false) // found nothing, then its wait passed
	require.False(t, woken(ws[1]))
	h.Wake("p") // a commit
	require.True(t, woken(ws[1]), "a wake of the new head must not be lost")
}

func TestLeavingAfterAClaimPassesTheWakeToTheNextHead(t *testing.T) {
	h := New(0)
	ws := join(t, h, "p", 3)
	ws[0].Arm()
	ws[0].Leave(true)
	require.True(t, woken(ws[1]))
	require.False(t, woken(ws[2]))
}

func TestLeavingWithAnUnconsumedWakePassesItOn(t *testing.T) {
	h := New(0)
	ws := join(t, h, "p", 2)
	h.Wake("p")
	ws[0].Leave(false) // e.g. its wait bound passed just then
	require.True(t, woken(ws[1]))
}

func TestLeavingQuietlyWakesNobody(t *testing.T) {
	h := New(0)
	ws := join(t, h, "p", 2)
	ws[0].Leave(false)
	require.False(t, woken(ws[1]))
	ws[0].Leave(true) // a second Leave does nothing
	require.False(t, woken(ws[1]))
	require.Equal(t, 1, h.Waiting())
}

func TestAWaiterInTheMiddleLeavesTheQueueIntact(t *testing.T) {
	h := New(0)
	ws := join(t, h, "p", 3)
	ws[1].Leave(false)
	ws[0].Leave(true)
	require.True(t, woken(ws[2]))
	ws[2].Leave(false)
	require.Equal(t, 0, h.Waiting())
	require.Empty(t, h.queues, "an empty queue is dropped")
}

func TestWakeAnyWakesTheHeadOfEveryKeyAndWakeAllEveryWaiter(t *testing.T) {
	h := New(0)
	p := join(t, h, "p", 2)
	q := join(t, h, "q", 2)
	h.WakeAny()
	require.True(t, woken(p[0]))
	require.True(t, woken(q[0]))
	require.False(t, woken(p[1]))
	require.False(t, woken(q[1]))
	for _, w := range append(p, q...) {
		w.Arm()
	}
	h.WakeAll()
	for _, w := range append(p, q...) {
		require.True(t, woken(w))
	}
}

func TestWakeInWakesTheHeadAtTheEarliestRequestedTime(t *testing.T) {
	h := New(0)
	ws := join(t, h, "p", 2)
	ws[1].WakeIn(time.Hour)
	start := time.Now()
	ws[1].WakeIn(20 * time.Millisecond) // earlier: wins
	ws[0].WakeIn(time.Hour)             // later: ignored
	select {
	case <-ws[0].C():
	case <-time.After(testwait.EventuallyBound):
		t.Fatal("the timer never fired")
	}
	require.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond)
	require.False(t, woken(ws[1]), "a timer wakes the head only")
}

func TestTheSafetyPollWakesTheHeadAgainAndAgain(t *testing.T) {
	h := New(20 * time.Millisecond)
	w := join(t, h, "p", 1)[0]
	for i := 0; i < 3; i++ {
		select {
		case <-w.C():
			w.Arm()
		case <-time.After(testwait.EventuallyBound):
			t.Fatalf("safety poll %d never came", i)
		}
	}
	w.Leave(false)
	h.mu.Lock()
	defer h.mu.Unlock()
	require.Empty(t, h.queues, "the last waiter's departure stops the timer")
}

func TestCloseClosesDoneAndRefusesNewWaiters(t *testing.T) {
	h := New(time.Hour)
	w := join(t, h, "p", 1)[0]
	h.Close()
	h.Close()
	select {
	case <-h.Done():
	default:
		t.Fatal("Done is open after Close")
	}
	_, _, err := h.Join("p")
	require.ErrorIs(t, err, ErrClosed)
	w.WakeIn(time.Millisecond) // no timer after Close
	w.Leave(false)
}

// quietLook runs one look that finds nothing, for a waiter that then leaves.
func quietLookBy(t *testing.T, h *Hub, key string, wakeIn time.Duration) {
	t.Helper()
	w, _, err := h.Join(key)
	require.NoError(t, err)
	w.FoundNothing(w.Arm(), time.Now(), wakeIn, 0)
	w.Leave(false)
}

func joinLooks(t *testing.T, h *Hub, key string) bool {
	t.Helper()
	w, look, err := h.Join(key)
	require.NoError(t, err)
	t.Cleanup(func() { w.Leave(false) })
	return look
}

func TestAWaiterNeedNotLookWhenNothingHappenedSinceALookFoundNothing(t *testing.T) {
	h := New(time.Hour)
	require.True(t, joinLooks(t, h, "p"), "nothing known yet")
	quietLookBy(t, h, "p", 0)
	require.False(t, joinLooks(t, h, "p"))
	require.True(t, joinLooks(t, h, "q"), "another key has its own looks")
	h.Wake("q") // any wake may concern any key (WakeAny knows no key)
	require.True(t, joinLooks(t, h, "p"))
	quietLookBy(t, h, "p", 0)
	h.Invalidate()
	require.True(t, joinLooks(t, h, "p"))
}

func TestALookThatRacedAWakeIsNotTrusted(t *testing.T) {
	h := New(time.Hour)
	w, _, err := h.Join("p")
	require.NoError(t, err)
	epoch := w.Arm()
	h.Wake("p") // a commit during the look
	w.FoundNothing(epoch, time.Now(), 0, 0)
	w.Leave(false)
	require.True(t, joinLooks(t, h, "p"))
}

func TestAQuietLookLapsesAtItsWakeTimeAndWithTheSafetyPoll(t *testing.T) {
	// "Need not look yet" holds only until the wake time (the safety poll):
	// a host that stalls past it between the look and the join makes the
	// look due, so the not-yet checks below run only when the join came in
	// time. They always do on a host that is not stalled for ~100 ms.
	const wakeIn = 100 * time.Millisecond
	h := New(time.Hour)
	start := time.Now()
	quietLookBy(t, h, "p", wakeIn)
	w, look, err := h.Join("p")
	require.NoError(t, err)
	if time.Since(start) < wakeIn {
		require.False(t, look)
		select {
		case <-w.C(): // the timer the look asked for, set again for the new queue
			require.GreaterOrEqual(t, time.Since(start), wakeIn)
		case <-time.After(testwait.EventuallyBound):
			t.Fatal("the quiet look's wake time was forgotten")
		}
	}
	w.Leave(false)
	require.True(t, joinLooks(t, h, "p"), "past its wake time")

	s := New(wakeIn)
	start = time.Now()
	quietLookBy(t, s, "p", 0)
	if look := joinLooks(t, s, "p"); time.Since(start) < wakeIn {
		require.False(t, look)
	}
	time.Sleep(wakeIn + 20*time.Millisecond)
	require.True(t, joinLooks(t, s, "p"), "older than the safety poll")
}

func TestAQuietLookIsRememberedFromWhenItStartedNotFromWhenItEnded(t *testing.T) {
	// A claim that expires 50 ms after the look started: a waiter that
	// joins after then must look, however long the look itself took.
	h := New(time.Hour)
	w, _, err := h.Join("p")
	require.NoError(t, err)
	started := time.Now().Add(-40 * time.Millisecond) // a slow look
	w.FoundNothing(w.Arm(), started, 50*time.Millisecond, time.Millisecond)
	w.Leave(false)
	time.Sleep(15 * time.Millisecond)
	require.True(t, joinLooks(t, h, "p"), "the expiry the look saw coming has passed")
}
