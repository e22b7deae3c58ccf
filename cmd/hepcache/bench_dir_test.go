package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchDirsAbsolute (issue 34, first week 0): every bench command with
// a --dir flag makes it absolute before anything reaches a child (xrootd,
// hepcache serve), which runs in another working directory: `bench wan`
// with its default results/wan stopped at once ("xrootd exited at start").
// The child side is TestRelativeDirs (internal/xrdproc).
func TestBenchDirsAbsolute(t *testing.T) {
	files, _ := filepath.Glob("bench*.go")
	fset := token.NewFileSet()
	n := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			hasDir, abs := false, false
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				c, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				switch fun := c.Fun.(type) {
				case *ast.SelectorExpr:
					if fun.Sel.Name == "StringVar" && len(c.Args) > 1 {
						if lit, ok := c.Args[1].(*ast.BasicLit); ok && lit.Value == `"dir"` {
							hasDir = true
						}
					}
				case *ast.Ident:
					abs = abs || fun.Name == "absPath"
				}
				return true
			})
			if hasDir {
				n++
				if !abs {
					t.Errorf("%s: %s has a --dir flag it does not make absolute (absPath)", name, fn.Name.Name)
				}
			}
		}
	}
	if n < 10 {
		t.Errorf("found %d bench commands with --dir, want them all", n)
	}
}
