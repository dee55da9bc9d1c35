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
	"go/types"
	"os"
	"path/filepath"
	"reflect"
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

// handles are the types of the front door that reach the store: each
// exported method is checked one by one. Every other type with methods must
// be in values.
var handles = map[string]reflect.Type{
	"Authority": reflect.TypeFor[*Authority](),
	"Lease":     reflect.TypeFor[*Lease](),
	"Edit":      reflect.TypeFor[*Edit](),
	"Execution": reflect.TypeFor[*Execution](),
}

// values are the types whose methods compute from the value alone (how it
// prints, marshals, compares, or what it derives): they hold no handle of
// the store, and none of their methods may take one.
var values = map[string]reflect.Type{
	"Kind":            reflect.TypeFor[*Kind](),
	"Error":           reflect.TypeFor[*Error](),
	"LeaseState":      reflect.TypeFor[*LeaseState](),
	"Secret":          reflect.TypeFor[*Secret](),
	"Token":           reflect.TypeFor[*Token](),
	"Production":      reflect.TypeFor[*Production](),
	"Job":             reflect.TypeFor[*Job](),
	"Event":           reflect.TypeFor[*Event](),
	"Attempt":         reflect.TypeFor[*Attempt](),
	"RetryPolicy":     reflect.TypeFor[*RetryPolicy](),
	"RetentionPolicy": reflect.TypeFor[*RetentionPolicy](),
	"PruneResult":     reflect.TypeFor[*PruneResult](),
	"JobRecord":       reflect.TypeFor[*JobRecord](),
	"JobTimes":        reflect.TypeFor[*JobTimes](),
	"JobCounts":       reflect.TypeFor[*JobCounts](),
	"MinuteCount":     reflect.TypeFor[*MinuteCount](),
	"WorkerActivity":  reflect.TypeFor[*WorkerActivity](),
	"ClockReading":    reflect.TypeFor[*ClockReading](),
}

// Reasons a method or function needs no context.
const (
	presents  = "presents the value: how it prints, logs or marshals; reads only its own fields"
	local     = "reads the handle's own fields, not the store"
	plainRead = "reads only: it commits nothing (the observations, ListJobs and the rest, are the reads that take a context)"
	inEdit    = "runs in the edit's transaction, under the context the edit was begun with (BeginContext)"
	computes  = "computes from its arguments alone: no store"
	opening   = "opens an authority: connecting is bounded by the connect timeout, and creating or migrating " +
		"the schema, the one commit of opening, by the busy timeout (Options); no call of it has a context to pass"
	stopsLocal = "ends the handle's own work: rolls back or stops, commits nothing"
)

// notWrites are the exported methods of the handles that take no context,
// and why each needs none; the presenting methods of every handle first.
var notWrites = map[string]map[string]string{
	"*": {"String": presents, "GoString": presents, "Format": presents, "LogValue": presents, "MarshalJSON": presents},
	"Authority": {
		"Close": "ends the authority: its waits, renewers and pruner stop and open edits roll back; it commits nothing",
		"SetPruneInterval": "schedules the background pruner, whose passes run under the authority's own context, " +
			"ended by Close or SetPruneInterval(0); it writes nothing itself",
		"Productions":   plainRead,
		"Jobs":          plainRead,
		"Job":           plainRead,
		"Payload":       plainRead,
		"Events":        plainRead,
		"FactsOf":       plainRead,
		"HighWaterMark": plainRead,

		"SetLogger":           "sets where the authority logs what it cannot return; nothing of the store",
		"LastBackgroundPrune": local,
	},
	"Lease": {
		"Payload":        plainRead,
		"Export":         local,
		"Done":           local,
		"Err":            local,
		"Expiry":         local,
		"ExpiryUnixUS":   local,
		"JobID":          local,
		"Production":     local,
		"ProductionID":   local,
		"State":          local,
		"Worker":         local,
		"BeginExecution": "reserves a temporary file; nothing is written to the store",
		"KeepAlive": "starts a renewer and returns: each renewal must commit before the lease's expiry, " +
			"and StopKeepAlive, the lease's end or Close stops it",
		"StopKeepAlive": stopsLocal,
	},
	"Edit": {
		"RequestJob":     inEdit,
		"RequestJobWith": inEdit,
		"Claim":          inEdit,
		"ClaimJob":       inEdit,
		"Complete":       inEdit,
		"Commit":         inEdit,
		"Abort":          stopsLocal,
	},
	"Execution": {
		"Abandon":   "removes the temporary file; nothing is written to the store",
		"TempPath":  local,
		"FinalPath": local,
		"Nonce":     local,
		"Lease":     local,
	},
}

// notWriteFuncs are the exported functions of core and of the front door
// that take no context, and why each needs none.
var notWriteFuncs = map[string]string{
	"Open":                   opening,
	"OpenWith":               opening,
	"OpenStore":              opening,
	"IsPostgres":             computes,
	"KindOf":                 computes,
	"Kinds":                  computes,
	"MissingProduction":      computes,
	"ValidateDuration":       computes,
	"ValidateDurationUS":     computes,
	"FormatDuration":         computes,
	"KeepAliveInterval":      computes,
	"DisplayName":            computes,
	"DefaultRetryPolicy":     computes,
	"DefaultRetentionPolicy": computes,
	"IsJobIDPrefix":          computes,
	"NewSecret":              computes,
	"EncodeToken":            computes,
	"DecodeToken":            computes,
	"ParseFacts":             computes,
}

var contextType = reflect.TypeFor[context.Context]()

// takesContext reports whether m (a method value's type: the receiver is
// not a parameter) takes a context first.
func takesContext(m reflect.Type) bool { return m.NumIn() > 0 && m.In(0) == contextType }

// contextFormOf reports whether c is plain with a context first: the same
// parameters after it, the same results.
func contextFormOf(plain, c reflect.Type) bool {
	if !takesContext(c) || c.NumIn() != plain.NumIn()+1 || c.NumOut() != plain.NumOut() ||
		c.IsVariadic() != plain.IsVariadic() {
		return false
	}
	for i := 0; i < plain.NumIn(); i++ {
		if c.In(i+1) != plain.In(i) {
			return false
		}
	}
	for i := 0; i < plain.NumOut(); i++ {
		if c.Out(i) != plain.Out(i) {
			return false
		}
	}
	return true
}

// methodsOf is the exported method set of t as callers see it (the
// receiver dropped from each signature).
func methodsOf(t reflect.Type) map[string]reflect.Type {
	ms := map[string]reflect.Type{}
	for i := 0; i < t.NumMethod(); i++ {
		m := t.Method(i)
		in := make([]reflect.Type, 0, m.Type.NumIn()-1)
		for j := 1; j < m.Type.NumIn(); j++ {
			in = append(in, m.Type.In(j))
		}
		out := make([]reflect.Type, 0, m.Type.NumOut())
		for j := 0; j < m.Type.NumOut(); j++ {
			out = append(out, m.Type.Out(j))
		}
		ms[m.Name] = reflect.FuncOf(in, out, m.Type.IsVariadic())
	}
	return ms
}

// declared lists, from the source of a package as a program built without
// test tags sees it, the exported top-level functions (name: first
// parameter's type as written, "" for none) and the types that have
// exported methods.
func declared(t *testing.T, pattern, pkg string) (funcs map[string]string, receivers map[string]bool) {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob(pattern)
	require.NoError(t, err)
	funcs, receivers = map[string]string{}, map[string]bool{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		require.NoError(t, err)
		if f.Name.Name != pkg || hasBuildTag(f) {
			continue
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || !fn.Name.IsExported() {
				continue
			}
			if fn.Recv == nil {
				first := ""
				if ps := fn.Type.Params.List; len(ps) > 0 {
					first = types.ExprString(ps[0].Type)
				}
				funcs[fn.Name.Name] = first
				continue
			}
			recv := fn.Recv.List[0].Type
			if star, ok := recv.(*ast.StarExpr); ok {
				recv = star.X
			}
			if id, ok := recv.(*ast.Ident); ok && id.IsExported() {
				receivers[id.Name] = true
			}
		}
	}
	return funcs, receivers
}

// contextForms checks the rule over everything exported: every method of a
// handle, and every exported function of core and of the front door, takes
// a context first, has a …Context form (the same with a context first), or
// is listed as needing none, with the reason. It returns the …Context forms
// of the handles, "Type.Name", sorted.
func contextForms(t *testing.T) []string {
	t.Helper()
	var missing, forms []string
	for tn, ty := range handles {
		ms := methodsOf(ty)
		for name, m := range ms {
			if takesContext(m) {
				if strings.HasSuffix(name, "Context") {
					forms = append(forms, tn+"."+name)
				}
				continue
			}
			if c, ok := ms[name+"Context"]; ok {
				require.True(t, contextFormOf(m, c), "%s.%sContext is not %s with a context first", tn, name, name)
				continue
			}
			if notWrites["*"][name] == "" && notWrites[tn][name] == "" {
				missing = append(missing, tn+"."+name)
			}
		}
		for name := range notWrites[tn] {
			m, ok := ms[name]
			require.True(t, ok, "notWrites lists %s.%s, which does not exist", tn, name)
			_, hasForm := ms[name+"Context"]
			require.False(t, takesContext(m) || hasForm, "notWrites lists %s.%s, which has a context", tn, name)
		}
	}
	for tn, ty := range values {
		for name, m := range methodsOf(ty) {
			for i := 0; i < m.NumIn(); i++ {
				for _, h := range handles {
					require.NotEqual(t, h, m.In(i), "%s.%s takes a handle of the store: check it as a handle", tn, name)
				}
			}
		}
	}
	funcs, receivers := declared(t, "core/*.go", "core")
	doorFuncs, doorReceivers := declared(t, "*.go", "leases")
	for n := range doorReceivers {
		receivers[n] = true
	}
	for n := range receivers {
		_, h := handles[n]
		_, v := values[n]
		require.True(t, h || v, "%s has exported methods: list it in handles or values", n)
	}
	for n, first := range doorFuncs {
		funcs[n] = first
	}
	for name, first := range funcs {
		_, hasForm := funcs[name+"Context"]
		switch {
		case first == "context.Context" || hasForm:
			require.Empty(t, notWriteFuncs[name], "notWriteFuncs lists %s, which has a context", name)
		case notWriteFuncs[name] == "":
			missing = append(missing, name)
		}
	}
	for name := range notWriteFuncs {
		_, ok := funcs[name]
		require.True(t, ok, "notWriteFuncs lists %s, which does not exist", name)
	}
	sort.Strings(missing)
	require.Empty(t, missing, "writes without a …Context form (or, if one is no write, list it in notWrites "+
		"or notWriteFuncs with the reason)")
	sort.Strings(forms)
	return forms
}

// Every Go write takes a context.Context as the waits do (…Context, as
// database/sql names them): found by enumerating what the front door
// exports, so a write added without one fails here. A context that has
// ended before the write ends it, nothing is written, and the error is
// busy wrapping the context's error; a live one writes as the plain form
// does. Each …Context form is exercised so, on each store.
func TestEveryGoWriteTakesAContextAsTheWaitsDo(t *testing.T) {
	forms := contextForms(t)
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
				"Authority.CreateProductionContext": func(ctx context.Context) error {
					_, err := auth.CreateProductionContext(ctx, "q")
					return err
				},
				"Authority.CreateProductionWithPolicyContext": func(ctx context.Context) error {
					_, err := auth.CreateProductionWithPolicyContext(ctx, "q", DefaultRetryPolicy())
					return err
				},
				"Authority.CreateProductionWithPoliciesContext": func(ctx context.Context) error {
					_, err := auth.CreateProductionWithPoliciesContext(ctx, "q", DefaultRetryPolicy(), DefaultRetentionPolicy())
					return err
				},
				"Authority.SetRetryPolicyContext": func(ctx context.Context) error {
					return auth.SetRetryPolicyContext(ctx, "p", DefaultRetryPolicy())
				},
				"Authority.SetRetentionPolicyContext": func(ctx context.Context) error {
					return auth.SetRetentionPolicyContext(ctx, "p", RetentionPolicy{Completed: time.Hour})
				},
				"Authority.RequestJobContext": func(ctx context.Context) error {
					_, err := auth.RequestJobContext(ctx, "p", "k", nil)
					return err
				},
				"Authority.RequestJobWithContext": func(ctx context.Context) error {
					_, err := auth.RequestJobWithContext(ctx, "p", "k", nil, RequestOptions{})
					return err
				},
				"Authority.CancelContext":   func(ctx context.Context) error { return auth.CancelContext(ctx, "p", ids[2]) },
				"Authority.RetryJobContext": func(ctx context.Context) error { return auth.RetryJobContext(ctx, "p", ids[3]) },
				"Authority.RedriveContext": func(ctx context.Context) error {
					_, err := auth.RedriveContext(ctx, "p", StateCancelled)
					return err
				},
				"Authority.ClaimContext": func(ctx context.Context) error {
					_, err := auth.ClaimContext(ctx, "p", "w", time.Minute)
					return err
				},
				"Authority.ClaimJobContext": func(ctx context.Context) error {
					_, err := auth.ClaimJobContext(ctx, "p", ids[1], "w", time.Minute)
					return err
				},
				"Authority.ImportContext": func(ctx context.Context) error { _, err := auth.ImportContext(ctx, tok); return err },
				"Authority.BeginContext":  func(ctx context.Context) error { _, err := auth.BeginContext(ctx); return err },
				"Lease.RenewContext":      func(ctx context.Context) error { return l.RenewContext(ctx, time.Hour) },
				"Lease.ReleaseContext":    func(ctx context.Context) error { return l.ReleaseContext(ctx) },
				"Lease.FailContext":       func(ctx context.Context) error { return l.FailContext(ctx, "r") },
				"Lease.FailRetryContext": func(ctx context.Context) error {
					return l.FailRetryContext(ctx, "r", time.Second)
				},
				"Lease.CompleteContext": func(ctx context.Context) error { return l.CompleteContext(ctx, Facts{}) },
				"Lease.CompleteAndClaimNextContext": func(ctx context.Context) error {
					_, err := l.CompleteAndClaimNextContext(ctx, Facts{}, time.Minute)
					return err
				},
			}
			// FinishContext is checked last: it consumes the execution.
			exercised := []string{"Execution.FinishContext"}
			for name := range writes {
				exercised = append(exercised, name)
			}
			sort.Strings(exercised)
			require.Equal(t, forms, exercised, "every …Context form is exercised here")
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
			kept := RetentionPolicy{Completed: time.Hour, Events: time.Hour}
			require.NoError(t, auth.SetRetentionPolicyContext(live, "p", kept))
			q, err := auth.CreateProductionWithPoliciesContext(live, "q", DefaultRetryPolicy(), kept)
			require.NoError(t, err)
			require.Equal(t, kept, q.Retention)
			prods, err := auth.Productions()
			require.NoError(t, err)
			require.Len(t, prods, 2)
			for _, p := range prods {
				require.Equal(t, kept, p.Retention, p.Name)
			}
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
