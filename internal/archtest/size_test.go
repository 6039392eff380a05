package archtest

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The daemon's packages keep functions short enough to read whole and
// files short enough to hold one subject.
const (
	maxFuncLines = 60
	maxFileLines = 500
)

var sized = []string{daemon + "/config", daemon + "/server", "engine", "httplimit", "pattern", "tierhttp"}

// TestSizes: no function of the sized packages over maxFuncLines, no file
// over maxFileLines (tests excepted).
func TestSizes(t *testing.T) {
	fset := token.NewFileSet()
	for _, dir := range sized {
		files, err := filepath.Glob(filepath.Join("../..", dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no Go files (%v)", dir, err)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			name := filepath.Join(dir, filepath.Base(path))
			if n := bytes.Count(src, []byte("\n")); n > maxFileLines {
				t.Errorf("%s: %d lines, at most %d", name, n, maxFileLines)
			}
			f, err := parser.ParseFile(fset, path, src, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range f.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok || fn.Body == nil {
					continue
				}
				if n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; n > maxFuncLines {
					t.Errorf("%s: %s is %d lines, at most %d", name, fn.Name.Name, n, maxFuncLines)
				}
			}
		}
	}
}
