// The host process never crashes because of us: every C export recovers
// panics. A panic that escaped one export would kill the host, so the rule is
// pinned on the code of every export (the C suite proves the recovery itself
// works, through leases_testing_panic).
package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"strings"
	"testing"
)

func TestEveryExportRecoversPanics(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	funcs := map[string]*ast.FuncDecl{}
	var exports []*ast.FuncDecl
	for _, f := range pkgs["main"].Files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv != nil {
				continue
			}
			funcs[fd.Name.Name] = fd
			if fd.Doc != nil && hasExportDirective(fd.Doc) {
				exports = append(exports, fd)
			}
		}
	}
	if len(exports) < 30 {
		t.Fatalf("found only %d exports; the parser missed the //export lines", len(exports))
	}
	for _, fd := range exports {
		if !recovers(fd, funcs) {
			t.Errorf("%s: an export must begin with `defer recoverTo(...)`, or only return a helper that does",
				fd.Name.Name)
		}
	}
}

func hasExportDirective(g *ast.CommentGroup) bool {
	for _, c := range g.List {
		if strings.HasPrefix(c.Text, "//export ") {
			return true
		}
	}
	return false
}

// recovers: the body starts with `defer recoverTo(...)`, or is a single
// `return helper(...)` whose helper starts that way.
func recovers(fd *ast.FuncDecl, funcs map[string]*ast.FuncDecl) bool {
	if fd.Body == nil || len(fd.Body.List) == 0 {
		return false
	}
	if d, ok := fd.Body.List[0].(*ast.DeferStmt); ok {
		if id, ok := d.Call.Fun.(*ast.Ident); ok && id.Name == "recoverTo" {
			return true
		}
	}
	if len(fd.Body.List) != 1 {
		return false
	}
	r, ok := fd.Body.List[0].(*ast.ReturnStmt)
	if !ok || len(r.Results) != 1 {
		return false
	}
	call, ok := r.Results[0].(*ast.CallExpr)
	if !ok {
		return false
	}
	id, ok := call.Fun.(*ast.Ident)
	if !ok || funcs[id.Name] == nil || funcs[id.Name] == fd {
		return false
	}
	return recovers(funcs[id.Name], funcs)
}
