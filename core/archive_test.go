package core

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// prunerProcess prunes the authority at loc with the archive
// LEASES_TEST_ARCHIVE (every finished job, whatever its age); with
// LEASES_TEST_KILL_AT = "step:n" it creates LEASES_TEST_SIGNAL at the n-th
// pruneStep of that name and then waits to be killed.
func prunerProcess(loc string) int {
	a, err := Open(loc)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 2
	}
	var at string
	var n int
	if k := os.Getenv("LEASES_TEST_KILL_AT"); k != "" {
		fmt.Sscanf(k, "%s", &at)
		for i := range k {
			if k[i] == ':' {
				at = k[:i]
				fmt.Sscanf(k[i+1:], "%d", &n)
			}
		}
	}
	seen := 0
	pruneStep = func(step string, _ int64) {
		if step != at {
			return
		}
		if seen++; seen == n {
			os.WriteFile(os.Getenv("LEASES_TEST_SIGNAL"), nil, 0o600)
			time.Sleep(time.Hour)
		}
	}
	if _, err := a.Prune(context.Background(), PruneOptions{OlderThan: time.Microsecond,
		Archive: os.Getenv("LEASES_TEST_ARCHIVE")}); err != nil {
		fmt.Fprintln(os.Stderr, "prune:", err)
		return 1
	}
	return 0
}

// archived reads an archive: the job ids and event seqs of its marked
// batches (records whose batch has a mark), counting repeats, and how many
// batches were marked and ended.
type archiveContents struct {
	jobs, events   map[string]int
	marked, ended  int
	unmarkedRecord int
}

func readArchive(t *testing.T, path string) archiveContents {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	type rec struct {
		Type   string          `json:"type"`
		Batch  int64           `json:"batch"`
		Job    json.RawMessage `json:"job"`
		Events []Event         `json:"events"`
		Event  *Event          `json:"event"`
	}
	var recs []rec
	marks := map[int64]bool{}
	c := archiveContents{jobs: map[string]int{}, events: map[string]int{}}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, maxArchiveLine)
	for sc.Scan() {
		var r rec
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r), sc.Text())
		switch r.Type {
		case "batch":
			marks[r.Batch] = true
			c.marked++
		case "deleted":
			c.ended++
		default:
			recs = append(recs, r)
		}
	}
	require.NoError(t, sc.Err())
	for _, r := range recs {
		if !marks[r.Batch] {
			c.unmarkedRecord++
			continue
		}
		if r.Type == "job" {
			var j struct {
				ID string `json:"id"`
			}
			require.NoError(t, json.Unmarshal(r.Job, &j))
			c.jobs[j.ID]++
			for _, e := range r.Events {
				c.events[fmt.Sprint(e.Seq)]++
			}
		} else {
			c.events[fmt.Sprint(r.Event.Seq)]++
		}
	}
	return c
}

// completedJobs makes n completed jobs with facts (and one with many
// renewals, whose events take more than one transaction to delete), then a
// requested job, the newest.
func (f *fixture) completedJobs(n int) []string {
	f.t.Helper()
	var ids []string
	for i := 0; i < n; i++ {
		ids = append(ids, f.finished(StateCompleted))
	}
	long := f.request(1)[0]
	l, err := f.a.ClaimJob("p", long, "w", time.Minute)
	require.NoError(f.t, err)
	for i := 0; i < PruneEventBatch+200; i++ {
		f.clk.advance(time.Microsecond)
		require.NoError(f.t, l.Renew(time.Minute))
	}
	require.NoError(f.t, l.Complete(Facts{}))
	f.request(1)
	return append(ids, long)
}

func TestAPruneWithAnArchiveWritesEveryDeletedJobWithItsFactsHistoryAndEvents(t *testing.T) {
	f := newFixture(t)
	f.retention(RetentionPolicy{Completed: time.Hour, Events: time.Hour})
	ids := f.completedJobs(70)
	old := f.request(1)[0] // requested: only its events go
	f.request(1)
	f.clk.advance(2 * time.Hour)
	path := filepath.Join(t.TempDir(), "archive.jsonl")
	r := f.prune(PruneOptions{Archive: path})
	require.EqualValues(t, len(ids), r.Jobs)
	for _, id := range ids {
		f.gone(id)
	}
	require.Equal(t, StateRequested, f.job(old).State)
	c := readArchive(t, path)
	require.Equal(t, c.marked, c.ended)
	require.Zero(t, c.unmarkedRecord)
	require.Len(t, c.jobs, len(ids))
	for _, id := range ids {
		require.Equal(t, 1, c.jobs[id], "job %s archived once", id)
	}
	for seq, n := range c.events {
		require.Equal(t, 1, n, "event %s archived once", seq)
	}
	require.EqualValues(t, len(c.events), r.Events)

	// A job's line holds its facts, history, payload and events.
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Contains(t, string(b), `"score":1`)
	require.Contains(t, string(b), `"ending":"completed"`)
	require.Contains(t, string(b), `"kind":"renewed"`)
	require.NotContains(t, string(b), "claim_hash")

	// A second prune with the same archive continues it and writes nothing
	// again.
	f.prune(PruneOptions{Archive: path})
	require.Equal(t, c.jobs, readArchive(t, path).jobs)

	// A dry run counts and deletes nothing.
	f.finished(StateCompleted)
	f.request(1)
	f.clk.advance(2 * time.Hour)
	dry := f.prune(PruneOptions{DryRun: true})
	require.EqualValues(t, 1, dry.Jobs)
	require.NotZero(t, dry.Events)
	require.Equal(t, dry.Jobs, f.prune(PruneOptions{}).Jobs)
}

func TestAPruneKilledMidwayWithAnArchiveDeletesNothingUnarchivedAndArchivesNothingTwiceOnRerun(t *testing.T) {
	f := newFixture(t)
	ids := f.completedJobs(150)
	dir := t.TempDir()
	path := filepath.Join(dir, "archive.jsonl")

	// The missing jobs are all in marked batches of the archive.
	check := func() archiveContents {
		t.Helper()
		c := readArchive(t, path)
		for _, id := range ids {
			if _, err := f.a.Job("p", id); err != nil {
				requireKind(t, err, KindNotFound)
				require.Equal(t, 1, c.jobs[id], "deleted job %s is in the archive once", id)
			}
		}
		for seq, n := range c.events {
			require.Equal(t, 1, n, "event %s archived once", seq)
		}
		return c
	}
	for i, at := range []string{"marked:2", "deleting:1", "deleting:2"} {
		signal := filepath.Join(dir, fmt.Sprintf("signal%d", i))
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "LEASES_TEST_PRUNER="+f.path, "LEASES_TEST_ARCHIVE="+path,
			"LEASES_TEST_KILL_AT="+at, "LEASES_TEST_SIGNAL="+signal)
		cmd.Stderr = os.Stderr
		require.NoError(t, cmd.Start())
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(time.Millisecond) {
			if _, err := os.Stat(signal); err == nil {
				break
			}
			require.True(t, time.Now().Before(deadline), "the pruner never reached %s", at)
		}
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()
		c := check()
		require.Equal(t, c.marked, c.ended+1, "killed after %s: one batch marked and not ended", at)
	}
	// A torn write at the end (a kill while writing records) is cut away.
	af, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = af.WriteString(`{"type":"job","batch":999,"job":{"id":"x"}}` + "\n" + `{"type":"jo`)
	require.NoError(t, err)
	require.NoError(t, af.Close())

	f.clk.advance(time.Hour)
	f.prune(PruneOptions{OlderThan: time.Microsecond, Archive: path})
	c := check()
	require.Equal(t, c.marked, c.ended)
	require.Zero(t, c.unmarkedRecord, "the torn batch was cut away")
	for _, id := range ids {
		f.gone(id)
	}
	require.Len(t, c.jobs, len(ids))
}

func TestAWholeProductionIsDeletedOnlyWithoutLiveJobsAndWithItsArchive(t *testing.T) {
	f := newFixture(t)
	f.retention(RetentionPolicy{}) // keeps everything: deleting ignores the policy
	ids := []string{f.finished(StateCompleted), f.finished(StateFailed), f.finished(StateCancelled)}
	live := f.request(1)[0]
	other, err := f.a.CreateProduction("other")
	require.NoError(t, err)
	kept, err := f.a.RequestJob("other", "", nil)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "p.jsonl")
	ctx := context.Background()

	_, err = f.a.DeleteProduction(ctx, "p", path)
	requireKind(t, err, KindWrongState)
	require.Equal(t, StateRequested, f.job(live).State, "a production with a requested job is refused")
	require.NoError(t, f.a.Cancel("p", live))
	ids = append(ids, live)

	r, err := f.a.DeleteProduction(ctx, "p", path)
	require.NoError(t, err)
	require.EqualValues(t, len(ids), r.Jobs)
	_, err = f.a.Jobs("p")
	requireKind(t, err, KindNotFound)
	c := readArchive(t, path)
	for _, id := range ids {
		require.Equal(t, 1, c.jobs[id], "job %s archived once", id)
	}
	require.Equal(t, c.marked, c.ended)
	// The other production is untouched, and the name may be used again.
	j, err := f.a.Job("other", kept)
	require.NoError(t, err)
	require.Equal(t, StateRequested, j.State)
	ps, err := f.a.Productions()
	require.NoError(t, err)
	require.Equal(t, []string{other.Name}, []string{ps[0].Name})
	require.Len(t, ps, 1)
	_, err = f.a.CreateProduction("p")
	require.NoError(t, err)
	js, err := f.a.Jobs("p")
	require.NoError(t, err)
	require.Empty(t, js)
}
