package core

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/libleases/libleases/core/internal/legacyfixture"
	"github.com/libleases/libleases/core/store"
	"github.com/libleases/libleases/core/store/pgstore"
	"github.com/libleases/libleases/core/store/sqlitestore"
	"github.com/stretchr/testify/require"
)

func TestMigrationFromThePreLeaseSchemaExpiresEveryClaim(t *testing.T) {
	ids := []string{uuid.NewString(), uuid.NewString(), uuid.NewString(), uuid.NewString(), uuid.NewString()}
	claimID := uuid.NewString()
	path := buildLegacy(t, legacyfixture.Fixture{
		ProductionName: "nightly",
		Jobs: []legacyfixture.Job{
			{ID: ids[0], Key: "a", Payload: []byte("A"), State: "requested"},
			{ID: ids[1], Key: "b", State: "claimed", Worker: "old-w", ClaimID: claimID, ClaimedAt: 1_700_000_000_000_000},
			{ID: ids[2], State: "completed", Worker: "old-w", ClaimedAt: 1_700_000_000_000_001},
			{ID: ids[3], State: "failed", Worker: "old-w", Reason: "boom", ClaimedAt: 1_700_000_000_000_002},
			{ID: ids[4], State: "cancelled"},
		},
		Facts: map[string]map[string]string{ids[2]: {"frames": "7"}},
	})
	a, err := Open(path)
	require.NoError(t, err)
	defer a.Close()
	js, err := a.Jobs("nightly")
	require.NoError(t, err)
	require.Len(t, js, 5)
	want := []string{StateRequested, StateRequested, StateCompleted, StateFailed, StateCancelled}
	for i, j := range js {
		require.Equal(t, ids[i], j.ID, "request order is kept")
		require.Equal(t, want[i], j.State)
	}
	require.Equal(t, "boom", js[3].Reason)
	require.Equal(t, "old-w", js[2].Worker, "terminal jobs keep their attribution")
	payload, err := a.Payload("nightly", ids[0])
	require.NoError(t, err)
	require.Equal(t, []byte("A"), payload)
	facts, err := a.FactsOf("nightly", ids[2])
	require.NoError(t, err)
	require.JSONEq(t, "7", string(facts.Metadata["frames"]))

	evs, err := a.Events("nightly", 0)
	require.NoError(t, err)
	var expired []Event
	for _, e := range evs {
		if e.Kind == "claim_expired" {
			expired = append(expired, e)
		}
	}
	require.Len(t, expired, 1)
	require.Equal(t, ids[1], expired[0].JobID)
	require.Contains(t, expired[0].Detail, "migration")

	// The migrated job is claimable again, before the later requested ones.
	l, err := a.Claim("nightly", "w", time.Minute)
	require.NoError(t, err)
	require.Equal(t, ids[0], l.JobID())
	l, err = a.Claim("nightly", "w", time.Minute)
	require.NoError(t, err)
	require.Equal(t, ids[1], l.JobID())
	// Keys survive: the same request is still idempotent.
	id, err := a.RequestJob("nightly", "a", []byte("A"))
	require.NoError(t, err)
	require.Equal(t, ids[0], id)
	require.NoError(t, a.Close())

	// The old plaintext claim id is gone from the schema.
	claimIDColumns, version := schemaFacts(t, path)
	require.Zero(t, claimIDColumns)
	current := sqlitestore.SchemaVersion
	if testingPostgres() {
		current = pgstore.SchemaVersion
	}
	require.Equal(t, current, version, "migrated to the current schema")
}

// The pre-lease schema had no expiry: a migrated job that finished then keeps
// its worker and claim time, and shows no expiry (not 1970).
func TestAMigratedTerminalJobShowsNoExpiry(t *testing.T) {
	ids := []string{uuid.NewString(), uuid.NewString(), uuid.NewString()}
	path := buildLegacy(t, legacyfixture.Fixture{
		ProductionName: "nightly",
		Jobs: []legacyfixture.Job{
			{ID: ids[0], State: "completed", Worker: "old-w", ClaimedAt: 1_700_000_000_000_001},
			{ID: ids[1], State: "failed", Worker: "old-w", Reason: "boom", ClaimedAt: 1_700_000_000_000_002},
			{ID: ids[2], State: "cancelled", Worker: "old-w", ClaimedAt: 1_700_000_000_000_003},
		},
	})
	a, err := Open(path)
	require.NoError(t, err)
	defer a.Close()
	js, err := a.Jobs("nightly")
	require.NoError(t, err)
	require.Len(t, js, 3)
	for i, j := range js {
		require.True(t, j.Expiry.IsZero(), "job %d (%s) shows expiry %s", i, j.State, j.Expiry)
		require.Equal(t, int64(1_700_000_000_000_001+i), j.ClaimedAt.UnixMicro(), "the claim time is kept")
		require.Equal(t, "old-w", j.Worker)
		var listed map[string]any
		require.NoError(t, json.Unmarshal([]byte(mustJSON(t, j)), &listed))
		require.Nil(t, listed["expiry_unix_us"], "the listing's expiry is null")
		one, err := a.Job("nightly", j.ID)
		require.NoError(t, err)
		require.True(t, one.Expiry.IsZero())
	}
}

// buildLegacy writes a pre-lease (version 1) database for the store under
// test and returns its location.
func buildLegacy(t *testing.T, fx legacyfixture.Fixture) string {
	t.Helper()
	if testingPostgres() {
		loc := freshSchema(t)
		require.NoError(t, legacyfixture.BuildPG(loc, fx))
		return loc
	}
	path := filepath.Join(t.TempDir(), "old.db")
	require.NoError(t, legacyfixture.Build(path, fx))
	return path
}

// schemaFacts reads how many claim_id columns the jobs table has, and the
// schema version.
func schemaFacts(t *testing.T, location string) (claimIDColumns, version int) {
	t.Helper()
	if testingPostgres() {
		ctx := context.Background()
		c, err := pgx.Connect(ctx, location)
		require.NoError(t, err)
		defer c.Close(ctx)
		require.NoError(t, c.QueryRow(ctx, `SELECT count(*) FROM information_schema.columns
			WHERE table_schema = current_schema() AND table_name = 'leases_jobs' AND column_name = 'claim_id'`).Scan(&claimIDColumns))
		require.NoError(t, c.QueryRow(ctx, `SELECT v FROM leases_meta WHERE k = 'schema_version'`).Scan(&version))
		return
	}
	db, err := sql.Open("sqlite", "file:"+location)
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM pragma_table_info('jobs') WHERE name = 'claim_id'`).Scan(&claimIDColumns))
	require.NoError(t, db.QueryRow(`PRAGMA user_version`).Scan(&version))
	return
}

func TestANewerSchemaIsRefused(t *testing.T) {
	path := newLocation(t, "new.db")
	a, err := Open(path)
	require.NoError(t, err)
	require.NoError(t, a.Close())
	if testingPostgres() {
		pgExec(t, path, `UPDATE leases_meta SET v = 99 WHERE k = 'schema_version'`)
	} else {
		db, err := sql.Open("sqlite", "file:"+path)
		require.NoError(t, err)
		_, err = db.Exec(`PRAGMA user_version = 99`)
		require.NoError(t, err)
		db.Close()
	}
	_, err = Open(path)
	requireKind(t, err, KindSchemaTooNew)
	require.Contains(t, err.Error(), "99")
}

func TestAFileThatIsNotALeasesDatabaseIsRefused(t *testing.T) {
	dir := t.TempDir()
	foreign := filepath.Join(dir, "foreign.db")
	db, err := sql.Open("sqlite", "file:"+foreign)
	require.NoError(t, err)
	_, err = db.Exec(`CREATE TABLE t (x)`)
	require.NoError(t, err)
	db.Close()
	_, err = Open(foreign)
	requireKind(t, err, KindStorage)
	require.Contains(t, err.Error(), "not a libleases")

	garbage := filepath.Join(dir, "garbage.db")
	require.NoError(t, os.WriteFile(garbage, bytes.Repeat([]byte("not a database "), 500), 0o600))
	_, err = Open(garbage)
	requireKind(t, err, KindStorage)
	got, _ := os.ReadFile(garbage)
	require.Equal(t, bytes.Repeat([]byte("not a database "), 500), got, "a refused file is left untouched")

	_, err = Open(dir)
	requireKind(t, err, KindStorage)
	_, err = Open("")
	requireKind(t, err, KindInvalidArgument)
	_, err = Open("bad\xffpath")
	requireKind(t, err, KindInvalidArgument)
}

func TestPathsWithURICharactersOpenExactlyThatFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a #b?c=d&e%20f.db")
	a, err := Open(path)
	require.NoError(t, err)
	_, err = a.CreateProduction("p")
	require.NoError(t, err)
	require.NoError(t, a.Close())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	names := []string{}
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.Contains(t, names, "a #b?c=d&e%20f.db")
	for _, n := range names {
		require.True(t, strings.HasPrefix(n, "a #b?c=d&e%20f.db"), "stray file %q", n)
	}
}

func TestOpeningCreatesTheFileInWALModeWithFullSync(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	a, err := Open(path)
	require.NoError(t, err)
	defer a.Close()
	sq := a.b.(interface{ Pragma(string) (string, error) })
	mode, err := sq.Pragma("journal_mode")
	require.NoError(t, err)
	require.Equal(t, "wal", mode)
	syncLevel, err := sq.Pragma("synchronous")
	require.NoError(t, err)
	require.Equal(t, "2", syncLevel) // FULL
	bt, err := sq.Pragma("busy_timeout")
	require.NoError(t, err)
	require.NotEqual(t, "0", bt)
}

// ---- secrets ------------------------------------------------------------------

func TestSecretsNeverAppearInListingsEventsErrorsOrTheDatabaseFile(t *testing.T) {
	f := newFixture(t)
	f.request(3)
	var secrets, tokens []string
	var errs []string
	for i := 0; i < 3; i++ {
		l := f.claim("w", time.Minute)
		tok, err := l.Export()
		require.NoError(t, err)
		tokens = append(tokens, tok)
		raw := l.secret.Bytes()
		secrets = append(secrets, hex.EncodeToString(raw[:]), uuid.UUID(raw).String(), string(raw[:]))
		require.NoError(t, l.Renew(2*time.Minute))
		errs = append(errs, fmtAll(l)...)
		if i == 0 {
			require.NoError(t, l.Complete(Facts{}))
			errs = append(errs, l.Renew(time.Hour).Error())
		}
		if i == 1 {
			require.NoError(t, f.a.Cancel("p", l.JobID()))
			errs = append(errs, l.Renew(time.Hour).Error())
			_, err := f.a.Import(tok)
			errs = append(errs, err.Error())
		}
	}
	f.clk.advance(time.Hour)
	_, err := f.a.Import(tokens[2])
	errs = append(errs, err.Error())
	js, err := f.a.Jobs("p")
	require.NoError(t, err)
	evs, err := f.a.Events("", 0)
	require.NoError(t, err)
	var text strings.Builder
	for _, j := range js {
		text.WriteString(mustJSON(t, j))
	}
	for _, e := range evs {
		text.WriteString(mustJSON(t, e))
	}
	text.WriteString(strings.Join(errs, "\n"))
	require.NoError(t, f.a.Close())
	files := storedBytes(t, f.path)
	require.NotEmpty(t, files)
	for _, s := range append(secrets, tokens...) {
		require.NotContains(t, text.String(), s)
		require.NotContains(t, files, s, "the database keeps only hashes")
	}
}

func fmtAll(l *Lease) []string {
	return []string{l.String(), l.GoString(), sprintf("%v", l), sprintf("%+v", l.secret), sprintf("%#v", l.secret)}
}

// ---- storage failures -------------------------------------------------------------

// faultyBackend fails chosen steps of the transactions of a real backend, to
// prove that the rules report storage failures honestly.
type faultyBackend struct {
	commitErr      error // returned by Commit
	commitSucceeds bool  // the underlying commit still happens (outcome unknown)
	factsErr       error
}

type faultyTx struct {
	store.Tx
	b *faultyBackend
}

func (t *faultyTx) Commit() error {
	if t.b.commitErr == nil {
		return t.Tx.Commit()
	}
	if t.b.commitSucceeds {
		t.Tx.Commit()
	} else {
		t.Tx.Rollback()
	}
	return t.b.commitErr
}

func (t *faultyTx) InsertFacts(ctx context.Context, fs []store.Fact) error {
	if t.b.factsErr != nil {
		return t.b.factsErr
	}
	return t.Tx.InsertFacts(ctx, fs)
}

func faulty(a *Authority) *faultyBackend {
	fb := &faultyBackend{}
	wrapTxs(a, func(tx store.Tx) store.Tx { return &faultyTx{Tx: tx, b: fb} })
	return fb
}

func TestAStorageFailureDuringCommitIsOutcomeUnknownAndTheLeaseStaysActive(t *testing.T) {
	f := newFixture(t)
	f.request(2)
	l := f.claim("w", time.Minute)
	fb := faulty(f.a)
	fb.commitErr, fb.commitSucceeds = errors.New("disk I/O error (fsync)"), true
	err := l.Complete(Facts{})
	requireKind(t, err, KindOutcomeUnknown)
	require.False(t, errors.Is(err, ErrStorage), "outcome unknown is distinct from a rejection")
	require.Equal(t, LeaseActive, l.State())
	fb.commitErr = nil
	// The commit did survive: the next use asks the store and learns it.
	requireKind(t, l.Renew(time.Hour), KindWrongState)

	l2 := f.claim("w", time.Minute)
	fb.commitErr, fb.commitSucceeds = errors.New("disk I/O error (fsync)"), false
	requireKind(t, l2.Release(), KindOutcomeUnknown)
	fb.commitErr = nil
	require.NoError(t, l2.Renew(2*time.Minute), "it did not survive: the lease still holds")
}

func TestAStorageFailureBeforeCommitChangesNothing(t *testing.T) {
	f := newFixture(t)
	f.request(1)
	l := f.claim("w", time.Minute)
	before := f.snapshot()
	fb := faulty(f.a)
	fb.factsErr = errors.New("database or disk is full")
	err := l.Complete(Facts{Metadata: map[string]json.RawMessage{"a": json.RawMessage("1")}})
	requireKind(t, err, KindStorage)
	require.Equal(t, before, f.snapshot())
	require.Equal(t, LeaseActive, l.State())
}

func TestBusyIsReportedWhenTheWriterLockIsNotObtainedInTime(t *testing.T) {
	f := newFixture(t)
	ids := f.request(1)
	e, err := f.a.Begin()
	require.NoError(t, err)
	defer e.Abort()
	// The edit holds the writer lock (SQLite) or the job's row (PostgreSQL).
	_, err = e.ClaimJob("p", ids[0], "w", time.Minute)
	require.NoError(t, err)
	other, err := OpenWith(f.path, Options{BusyTimeout: 50 * time.Millisecond})
	require.NoError(t, err)
	defer other.Close()
	other.setClock(f.clk.Now)
	_, err = other.ClaimJob("p", ids[0], "w", time.Minute)
	requireKind(t, err, KindBusy)
	_, err = other.Jobs("p")
	require.NoError(t, err, "readers are not blocked by the writer (WAL)")
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// A claim whose commit reached the store but was reported failed returns no
// lease: the error names the job (Error.JobID and the message), so the
// caller can find the claim and cancel it, or let it expire.
func TestAClaimWhoseOutcomeIsUnknownNamesItsJob(t *testing.T) {
	f := newFixture(t)
	ids := f.request(2)
	fb := faulty(f.a)
	fb.commitErr, fb.commitSucceeds = errors.New("disk I/O error (fsync)"), true
	l, err := f.a.Claim("p", "w", time.Minute)
	require.Nil(t, l)
	requireKind(t, err, KindOutcomeUnknown)
	var e *Error
	require.True(t, errors.As(err, &e))
	require.Equal(t, ids[0], e.JobID)
	require.Contains(t, err.Error(), ids[0])
	fb.commitErr = nil
	j := f.job(ids[0])
	require.Equal(t, StateClaimed, j.State, "the claim did persist")
	require.Equal(t, "w", j.Worker)
	require.NoError(t, f.a.Cancel("p", e.JobID), "the job id is enough to give it back")

	// Not persisted: the error still names the job it tried.
	fb.commitErr, fb.commitSucceeds = errors.New("disk I/O error (fsync)"), false
	_, err = f.a.ClaimJob("p", ids[1], "w", time.Minute)
	requireKind(t, err, KindOutcomeUnknown)
	require.True(t, errors.As(err, &e))
	require.Equal(t, ids[1], e.JobID)
	fb.commitErr = nil
	require.Equal(t, StateRequested, f.job(ids[1]).State)
}

// An edit's leases are in the caller's hands already: when the edit's
// commit outcome is unknown they become active, and their first use asks
// the store whether the claim is theirs.
func TestAnEditWhoseOutcomeIsUnknownLeavesItsLeasesToAskTheStore(t *testing.T) {
	for _, persisted := range []bool{true, false} {
		f := newFixture(t)
		f.request(2)
		fb := faulty(f.a)
		e, err := f.a.Begin()
		require.NoError(t, err)
		l, err := e.Claim("p", "w", time.Minute)
		require.NoError(t, err)
		done, err := e.Claim("p", "w", time.Minute)
		require.NoError(t, err)
		require.NoError(t, e.Complete(done, Facts{}))
		fb.commitErr, fb.commitSucceeds = errors.New("connection reset during COMMIT"), persisted
		requireKind(t, e.Commit(), KindOutcomeUnknown)
		fb.commitErr = nil
		require.Equal(t, LeaseActive, l.State(), "persisted=%v", persisted)
		require.Equal(t, LeaseActive, done.State(), "persisted=%v", persisted)
		if persisted {
			require.NoError(t, l.Renew(time.Hour), "the claim is this lease's")
			requireKind(t, done.Complete(Facts{}), KindWrongState)
			continue
		}
		requireKind(t, l.Renew(time.Hour), KindLeaseLost)
		requireKind(t, done.Complete(Facts{}), KindLeaseLost)
		require.Equal(t, StateRequested, f.job(l.JobID()).State)
	}
}

func TestASubMillisecondBusyTimeoutIsRoundedUpNotDropped(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	a, err := OpenWith(path, Options{BusyTimeout: 300 * time.Microsecond})
	require.NoError(t, err)
	defer a.Close()
	bt, err := a.b.(interface{ Pragma(string) (string, error) }).Pragma("busy_timeout")
	require.NoError(t, err)
	require.Equal(t, "1", bt, "SQLite counts whole milliseconds; 300 µs waits 1 ms, not 0")
}
