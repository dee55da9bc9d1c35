// One front door: a Go program imports only this package. Every public
// name of core is re-exported here, and every write takes a context the
// way the waits do.
package leases

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/libleases/libleases/internal/pgtest"
	"github.com/stretchr/testify/require"
)

// notReExported are core's public names a program has no use for, each with
// its reason; everything else must be reachable as leases.<Name>.
var notReExported = map[string]string{
	"OpenStore": "opens a core.Authority over a store.Backend: leases.Open and OpenWith choose the store",
}

// coreNames lists the exported top-level names of package core, as a
// program built without test tags sees them.
func coreNames(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("core/*.go")
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		require.NoError(t, err)
		if f.Name.Name != "core" || hasBuildTag(f) {
			continue
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.IsExported() {
					seen[d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							seen[s.Name.Name] = true
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								seen[n.Name] = true
							}
						}
					}
				}
			}
		}
	}
	var names []string
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func hasBuildTag(f *ast.File) bool {
	for _, g := range f.Comments {
		for _, c := range g.List {
			if strings.HasPrefix(c.Text, "//go:build") {
				return true
			}
		}
	}
	return false
}

// frontDoorNames lists the exported top-level names of this package.
func frontDoorNames(t *testing.T) map[string]bool {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	require.NoError(t, err)
	names := map[string]bool{}
	for _, f := range pkgs["leases"].Files {
		for n, o := range f.Scope.Objects {
			if ast.IsExported(n) && o.Kind != ast.Bad {
				names[n] = true
			}
		}
	}
	return names
}

// A Go program needs one import: every public name of core, the
// observation types included (listings, pages, counts, records, the
// clock), is a name of this package too.
func TestTheGoFrontDoorExportsEveryPublicNameOfCore(t *testing.T) {
	door := frontDoorNames(t)
	var missing []string
	for _, n := range coreNames(t) {
		if _, skip := notReExported[n]; !skip && !door[n] {
			missing = append(missing, n)
		}
	}
	require.Empty(t, missing, "core names a Go program cannot reach through package leases")
	for n := range notReExported {
		require.False(t, door[n], "%s is listed as not re-exported but is", n)
	}
}

// The observations can be used through the front door alone.
func TestTheObservationsNeedNoImportButLeases(t *testing.T) {
	auth, err := Open(filepath.Join(t.TempDir(), "jobs.db"))
	require.NoError(t, err)
	defer auth.Close()
	ctx := context.Background()
	_, err = auth.CreateProductionContext(ctx, "p")
	require.NoError(t, err)
	id, err := auth.RequestJobContext(ctx, "p", "k", []byte("x"))
	require.NoError(t, err)
	var page JobPage
	page, err = auth.ListJobs(ctx, "p", JobQuery{States: []string{StateRequested}, Limit: DefaultPageSize})
	require.NoError(t, err)
	require.Len(t, page.Jobs, 1)
	var rec JobRecord
	rec, err = auth.JobDetail(ctx, "p", id)
	require.NoError(t, err)
	require.Equal(t, id, rec.ID)
	var counts JobCounts
	counts, err = auth.Counts(ctx, "p")
	require.NoError(t, err)
	require.Equal(t, int64(1), counts.Requested)
	var events EventPage
	events, err = auth.ListEvents(ctx, EventQuery{Production: "p"})
	require.NoError(t, err)
	require.NotEmpty(t, events.Events)
	var prods ProductionPage
	prods, err = auth.ListProductions(ctx, ProductionQuery{})
	require.NoError(t, err)
	require.Len(t, prods.Productions, 1)
	var clock ClockReading
	clock, err = auth.ReadClock(ctx)
	require.NoError(t, err)
	require.False(t, clock.Now.IsZero())
}

// goLocations is each store a test runs on: a SQLite file, and a fresh
// PostgreSQL schema when a server is configured (required under
// LEASES_REQUIRE_PG).
func goLocations(t *testing.T) map[string]func(t *testing.T) string {
	return map[string]func(t *testing.T) string{
		"sqlite":   func(t *testing.T) string { return filepath.Join(t.TempDir(), "jobs.db") },
		"postgres": func(t *testing.T) string { return pgtest.FreshSchema(t, false) },
	}
}

// Every Go write takes a context.Context as the waits do (…Context, as
// database/sql names them): a context that has ended before the write
// ends it, nothing is written, and the error is busy wrapping the
// context's error; a live one writes as the plain form does.
func TestEveryGoWriteTakesAContextAsTheWaitsDo(t *testing.T) {
	for store, location := range goLocations(t) {
		t.Run(store, func(t *testing.T) {
			auth, err := Open(location(t))
			require.NoError(t, err)
			defer auth.Close()
			live := context.Background()
			_, err = auth.CreateProductionWithPolicyContext(live, "p", RetryPolicy{MaxAttempts: 3, BackoffCap: time.Hour})
			require.NoError(t, err)
			ids := make([]string, 4)
			for i := range ids {
				ids[i], err = auth.RequestJobWithContext(live, "p", "", []byte{byte(i)}, RequestOptions{Priority: 1})
				require.NoError(t, err)
			}
			require.NoError(t, auth.CancelContext(live, "p", ids[3]))
			l, err := auth.ClaimContext(live, "p", "w", time.Minute)
			require.NoError(t, err)
			require.Equal(t, ids[0], l.JobID())
			tok, err := l.Export()
			require.NoError(t, err)
			x, err := l.BeginExecution(t.TempDir())
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(x.TempPath(), []byte("out"), 0o600))

			ended, cancel := context.WithCancel(live)
			cancel()
			snapshot := func() string {
				jobs, err := auth.Jobs("p")
				require.NoError(t, err)
				evs, err := auth.Events("p", 0)
				require.NoError(t, err)
				prods, err := auth.Productions()
				require.NoError(t, err)
				return strings.TrimSpace(strings.Join([]string{fmtAll(jobs), fmtAll(evs), fmtAll(prods)}, "\n"))
			}
			before := snapshot()
			writes := map[string]func(ctx context.Context) error{
				"CreateProductionContext": func(ctx context.Context) error { _, err := auth.CreateProductionContext(ctx, "q"); return err },
				"CreateProductionWithPolicyContext": func(ctx context.Context) error {
					_, err := auth.CreateProductionWithPolicyContext(ctx, "q", DefaultRetryPolicy())
					return err
				},
				"SetRetryPolicyContext": func(ctx context.Context) error { return auth.SetRetryPolicyContext(ctx, "p", DefaultRetryPolicy()) },
				"RequestJobContext":     func(ctx context.Context) error { _, err := auth.RequestJobContext(ctx, "p", "k", nil); return err },
				"RequestJobWithContext": func(ctx context.Context) error {
					_, err := auth.RequestJobWithContext(ctx, "p", "k", nil, RequestOptions{})
					return err
				},
				"CancelContext":   func(ctx context.Context) error { return auth.CancelContext(ctx, "p", ids[2]) },
				"RetryJobContext": func(ctx context.Context) error { return auth.RetryJobContext(ctx, "p", ids[3]) },
				"RedriveContext":  func(ctx context.Context) error { _, err := auth.RedriveContext(ctx, "p", StateCancelled); return err },
				"ClaimContext":    func(ctx context.Context) error { _, err := auth.ClaimContext(ctx, "p", "w", time.Minute); return err },
				"ClaimJobContext": func(ctx context.Context) error {
					_, err := auth.ClaimJobContext(ctx, "p", ids[1], "w", time.Minute)
					return err
				},
				"ImportContext":  func(ctx context.Context) error { _, err := auth.ImportContext(ctx, tok); return err },
				"BeginContext":   func(ctx context.Context) error { _, err := auth.BeginContext(ctx); return err },
				"RenewContext":   func(ctx context.Context) error { return l.RenewContext(ctx, time.Hour) },
				"ReleaseContext": func(ctx context.Context) error { return l.ReleaseContext(ctx) },
				"FailContext":    func(ctx context.Context) error { return l.FailContext(ctx, "r") },
				"FailRetryContext": func(ctx context.Context) error {
					return l.FailRetryContext(ctx, "r", time.Second)
				},
				"CompleteContext": func(ctx context.Context) error { return l.CompleteContext(ctx, Facts{}) },
				"CompleteAndClaimNextContext": func(ctx context.Context) error {
					_, err := l.CompleteAndClaimNextContext(ctx, Facts{}, time.Minute)
					return err
				},
			}
			for name, write := range writes {
				err := write(ended)
				require.True(t, errors.Is(err, ErrBusy), "%s: %v", name, err)
				require.True(t, errors.Is(err, context.Canceled), "%s: %v", name, err)
				require.Equal(t, before, snapshot(), "%s wrote under an ended context", name)
			}
			err = x.FinishContext(ended, Facts{})
			require.True(t, errors.Is(err, context.Canceled), "FinishContext: %v", err)
			require.Equal(t, before, snapshot(), "FinishContext wrote under an ended context")

			// Live contexts write.
			require.NoError(t, l.RenewContext(live, time.Hour))
			next, err := l.CompleteAndClaimNextContext(live, Facts{}, time.Minute)
			require.NoError(t, err)
			require.Equal(t, ids[1], next.JobID())
			require.NoError(t, next.FailRetryContext(live, "again", 0))
			n, err := auth.RedriveContext(live, "p", StateCancelled)
			require.NoError(t, err)
			require.Equal(t, int64(1), n)
			e, err := auth.BeginContext(live)
			require.NoError(t, err)
			_, err = e.RequestJob("p", "in-edit", nil)
			require.NoError(t, err)
			require.NoError(t, e.Commit())
			j, err := auth.Job("p", ids[0])
			require.NoError(t, err)
			require.Equal(t, StateCompleted, j.State)
		})
	}
}

func fmtAll[T any](xs []T) string {
	var b strings.Builder
	for _, x := range xs {
		b.WriteString(strings.ReplaceAll(strings.TrimSpace(fmt.Sprintf("%+v", x)), "\n", " "))
		b.WriteString("\n")
	}
	return b.String()
}
