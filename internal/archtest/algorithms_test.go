package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoHandListsOfAlgorithms: no Go file of the repository, tests
// included, spells out a list of three or more algorithms
// ([]floodgate.Algorithm{...}): a list of them all is
// floodgate.Algorithms(), which a new algorithm joins by itself, while a
// hand list silently leaves it out of a suite. Lists of one or two (the
// two bucket algorithms, say) are chosen cases, not "every algorithm".
func TestNoHandListsOfAlgorithms(t *testing.T) {
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "../.." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.CompositeLit); ok && isAlgorithmSlice(lit.Type) && len(lit.Elts) >= 3 {
				t.Errorf("%s: a hand list of %d algorithms; loop over floodgate.Algorithms()", fset.Position(lit.Pos()), len(lit.Elts))
			}
			return true
		})
		return nil
	})
	if err != nil || checked == 0 {
		t.Fatalf("walking the repository: %v (%d files)", err, checked)
	}
}

// isAlgorithmSlice reports whether e is []floodgate.Algorithm, or
// []Algorithm (within package floodgate).
func isAlgorithmSlice(e ast.Expr) bool {
	arr, ok := e.(*ast.ArrayType)
	if !ok || arr.Len != nil {
		return false
	}
	switch elt := arr.Elt.(type) {
	case *ast.SelectorExpr:
		return elt.Sel.Name == "Algorithm" && isIdent(elt.X, "floodgate")
	case *ast.Ident:
		return elt.Name == "Algorithm"
	}
	return false
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}
