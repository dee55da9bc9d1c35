// Rules of docs/DESIGN.md that no other test of this package pinned: each
// test is named after its rule and fails if the rule breaks.
package core

import (
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestImportWritesNoEventButAdvancesTheMark(t *testing.T) {
	f := newFixture(t)
	f.request(1)
	l := f.claim("w", time.Hour)
	tok, err := l.Export()
	require.NoError(t, err)
	f.clk.advance(time.Minute)
	before := f.snapshot()
	require.Equal(t, t0, before.hwm)
	imported, err := f.a.Import(tok)
	require.NoError(t, err)
	require.Equal(t, l.JobID(), imported.JobID())
	after := f.snapshot()
	require.Equal(t, before.events, after.events, "an import writes no event")
	require.Equal(t, before.jobs, after.jobs, "an import changes no job")
	require.Equal(t, t0+60_000_000, after.hwm, "an import is guarded: it advances the mark to its sample")
}

func TestAStorageFailureInsideAnEditAbortsItButARejectionDoesNot(t *testing.T) {
	f := newFixture(t)
	f.request(2)
	before := f.snapshot()
	fb := faulty(f.a)
	e, err := f.a.Begin()
	require.NoError(t, err)
	first, err := e.Claim("p", "w", time.Minute)
	require.NoError(t, err)
	requireKind(t, e.Complete(first, Facts{Metadata: map[string]json.RawMessage{"a": json.RawMessage(`{`)}}),
		KindInvalidArgument) // a rejection: the edit goes on
	second, err := e.Claim("p", "w", time.Minute)
	require.NoError(t, err, "the edit is still usable after a rejection")

	fb.factsErr = errors.New("database or disk is full")
	requireKind(t, e.Complete(first, Facts{Metadata: map[string]json.RawMessage{"a": json.RawMessage(`1`)}}), KindStorage)
	requireKind(t, e.Commit(), KindClosed) // a storage failure aborted the edit
	require.Equal(t, LeaseClosed, first.State())
	require.Equal(t, LeaseClosed, second.State())
	fb.factsErr = nil
	require.Equal(t, before, f.snapshot(), "nothing of the aborted edit was written")
}

// The secret check is the one comparison an attacker can time: it must stay
// constant-time over hashes (timing is never asserted in tests, so the rule
// is pinned on the code itself), and no other code of the package may
// compare a claim hash.
func TestSecretsAreComparedInConstantTimeOverHashes(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", nil, 0)
	require.NoError(t, err)
	matches, hashUses := 0, 0
	for name, file := range pkgs["core"].Files {
		if len(name) > 8 && name[len(name)-8:] == "_test.go" {
			continue
		}
		ast.Inspect(file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				if n.Name.Name == "matches" && n.Recv != nil {
					matches++
					calls := map[string]bool{}
					ast.Inspect(n.Body, func(m ast.Node) bool {
						if c, ok := m.(*ast.CallExpr); ok {
							if s, ok := c.Fun.(*ast.SelectorExpr); ok {
								if x, ok := s.X.(*ast.Ident); ok {
									calls[x.Name+"."+s.Sel.Name] = true
								}
							}
						}
						// Comparing lengths is fine; comparing hash or secret
						// bytes (string(x) == string(y), s.hash() == ...) is not.
						if b, ok := m.(*ast.BinaryExpr); ok && (b.Op == token.EQL || b.Op == token.NEQ) {
							if bytesOperand(b.X) || bytesOperand(b.Y) {
								calls["=="] = true
							}
						}
						return true
					})
					require.True(t, calls["subtle.ConstantTimeCompare"], "Secret.matches must use subtle.ConstantTimeCompare")
					require.False(t, calls["bytes.Equal"] || calls["=="], "Secret.matches compares with an early-exit comparison")
				}
			case *ast.SelectorExpr:
				if n.Sel.Name == "ClaimHash" {
					hashUses++
				}
			}
			return true
		})
	}
	require.Equal(t, 1, matches, "exactly one Secret.matches")
	// One read (checkHeld passes it to matches) and three writes (claimIn
	// sets it; a noticed lapse and a redrive clear it).
	require.Equal(t, 4, hashUses, "a claim hash is read outside Secret.matches")
}

// bytesOperand: an operand made of hash or secret bytes: string(x) or a
// call of hash().
func bytesOperand(e ast.Expr) bool {
	c, ok := e.(*ast.CallExpr)
	if !ok {
		return false
	}
	switch f := c.Fun.(type) {
	case *ast.Ident:
		return f.Name == "string"
	case *ast.SelectorExpr:
		return f.Sel.Name == "hash"
	}
	return false
}
