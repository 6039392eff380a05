package archtest

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every package of the repository keeps functions short enough to read
// whole and files short enough to hold one subject.
const (
	maxFuncLines = 60
	maxFileLines = 500
)

// longer are the functions and files over the bounds today, each with why
// it stays so for now. An entry that is no longer over its bound fails
// TestSizes too, so the list only shrinks; a new long function is split,
// or placed here with its reason for a reviewer to weigh.
var longer = map[string]string{
	"bench/cmd/rlqssim/hot.go: Hot":       "the real-time hot-key run told in order: servers, clients, the windows measured; not split yet",
	"client/audit.go: audit":              "one audit record (REQUIREMENTS C8): a flat list of fields, in the record's order",
	"client/probe.go: writeProbe":         "the probe command's report: a flat list of lines, in the order printed",
	"client/signal.go: Extract":           "the precedence of the header formats (digest §2.5), one step per format; not split yet",
	"client/state.go: reserve":            "the client's gate: caps, breaker, observation expiry and probe in their order of checking; not split yet",
	"client/state.go: observe":            "the client's state update from one signal; not split yet",
	"client/transport.go: attempt":        "one attempt through gate, caps and breaker; not split yet",
	"cmd/floodgate/reduce.go: newReduce":  "a cobra command: flags and their help text",
	"cmd/floodgate/tiers.go: newKeys":     "a cobra command with three subcommands: flags and their help text",
	"cmd/floodgate/tiers.go: newTiers":    "a cobra command with two subcommands: flags and their help text",
	"header/legacy.go: Detect":            "the digest §2.5 detection, one case per format in its order",
	"header/ratelimit.go: parsePolicy":    "one pass over an SF List checking each parameter of draft-11 §3.1 in turn",
	"header/retryafter.go: parseHTTPDate": "the three HTTP-date forms parsed by position (RFC 9110 §5.6.7)",
	"ops/stats/stats.go: Snapshot":        "merges the shards' counters field by field",
	"storetest/scripts.go: scripts":       "a table of scripted sequences with their arithmetic, not logic",
	"storetest/wait.go: wait":             "one conformance scenario told in order; not split yet",
	"header/legacy.go":                    "the legacy formats' writers and Detect; not split yet",
	"header/ratelimit.go":                 "the draft-11 fields' writers and parsers; not split yet",
	"memorystore/store.go":                "the store's options, Take's paths and the sweeper; not split yet",
	"redisstore/store.go":                 "the store's options, Take, Wait and the batch's replies; not split yet",
}

// goFiles returns every non-test Go file of the repository (testdata and
// hidden directories aside), relative to its root.
func goFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "../.." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			files = append(files, strings.TrimPrefix(filepath.ToSlash(path), "../../"))
		}
		return nil
	})
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files (%v)", err)
	}
	return files
}

// TestSizes: no function over maxFuncLines and no file over maxFileLines
// (tests excepted) in any package of any module of the repository, but
// those in longer, which must still be over.
func TestSizes(t *testing.T) {
	fset := token.NewFileSet()
	over := map[string]bool{}
	for _, name := range goFiles(t) {
		src, err := os.ReadFile(filepath.Join("../..", name))
		if err != nil {
			t.Fatal(err)
		}
		if n := bytes.Count(src, []byte("\n")); n > maxFileLines {
			over[name] = true
			if longer[name] == "" {
				t.Errorf("%s: %d lines, at most %d", name, n, maxFileLines)
			}
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			if n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; n > maxFuncLines {
				key := name + ": " + fn.Name.Name
				over[key] = true
				if longer[key] == "" {
					t.Errorf("%s is %d lines, at most %d", key, n, maxFuncLines)
				}
			}
		}
	}
	for key := range longer {
		if !over[key] {
			t.Errorf("%s is within its bound now: remove it from longer", key)
		}
	}
}
