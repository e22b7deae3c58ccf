// Package lint checks project conventions that go vet does not: error causes
// are wrapped with %w (so errors.Is works across layers), atomics are typed
// (atomic.Int64, not atomic.AddInt64), and panics with a message name their
// package ("cache: ...").
package lint

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// sources returns the parsed non-test Go files of the repository.
func sources(t *testing.T) (*token.FileSet, map[string]*ast.File) {
	t.Helper()
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && p != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files[p] = f
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 50 {
		t.Fatalf("found only %d Go files: wrong root?", len(files))
	}
	return fset, files
}

var verbRE = regexp.MustCompile(`%[-+# 0-9.*]*[a-zA-Z%]`)

// TestErrorCausesAreWrapped: fmt.Errorf(..., err) formats err with %w.
func TestErrorCausesAreWrapped(t *testing.T) {
	fset, files := sources(t)
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || !isSel(call.Fun, "fmt", "Errorf") || len(call.Args) < 2 {
				return true
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok {
				return true
			}
			format, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			var verbs []string
			for _, v := range verbRE.FindAllString(format, -1) {
				if v != "%%" {
					verbs = append(verbs, v)
				}
			}
			for i, a := range call.Args[1:] {
				id, ok := a.(*ast.Ident)
				if !ok || (id.Name != "err" && !strings.HasSuffix(id.Name, "Err")) || i >= len(verbs) {
					continue
				}
				if verbs[i] != "%w" {
					t.Errorf("%s: error %s formatted with %s, not %%w: the cause is lost for errors.Is", fset.Position(call.Pos()), id.Name, verbs[i])
				}
			}
			return true
		})
	}
}

// TestTypedAtomics: no atomic.AddInt64-style functions on plain integers.
func TestTypedAtomics(t *testing.T) {
	raw := regexp.MustCompile(`^(Add|Load|Store|Swap|CompareAndSwap)(Int32|Int64|Uint32|Uint64|Uintptr|Pointer)$`)
	fset, files := sources(t)
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if ok && isIdent(sel.X, "atomic") && raw.MatchString(sel.Sel.Name) {
				t.Errorf("%s: atomic.%s: use a typed atomic (atomic.Int64 ...)", fset.Position(sel.Pos()), sel.Sel.Name)
			}
			return true
		})
	}
}

// TestPanicMessagesNamePackage: panic("...") starts with "pkg: ".
func TestPanicMessagesNamePackage(t *testing.T) {
	prefix := regexp.MustCompile(`^[a-z][a-z0-9/]*: `)
	fset, files := sources(t)
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || !isIdent(call.Fun, "panic") || len(call.Args) != 1 {
				return true
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			if s, _ := strconv.Unquote(lit.Value); !prefix.MatchString(s) {
				t.Errorf("%s: panic(%s): name the package (\"pkg: ...\")", fset.Position(call.Pos()), lit.Value)
			}
			return true
		})
	}
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

func isSel(e ast.Expr, pkg, name string) bool {
	sel, ok := e.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == name && isIdent(sel.X, pkg)
}
