package archtest

import (
	"bufio"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/floodgate/floodgate"

// pkg is one package of the repository's modules as `go list` reports
// it, with paths relative to the root module ("" for the root package).
type pkg struct {
	dir         string
	imports     []string // direct, relative for the modules' own
	deps        []string // transitive, likewise
	testImports []string // of its tests, in-package and external
}

// daemon is the directory of the daemon's module, which holds the daemon's
// packages and requires the library's modules like any user.
const daemon = "cmd/floodgate"

// modules are the directories of the modules whose packages are placed in
// layers: the library's (the root module and those nested in it, docs/
// ARCHITECTURE.md "Modules"), the daemon's and the gRPC example's. bench,
// deploy and examples/chi are modules of their own outside the layers.
var modules = []string{"", "grpclimit", "envoyrls", "rlqs", "metrics", "ops", "tier", "tierhttp", daemon, "examples/envoy/grpcservice"}

// libraryModules are the modules a library user may require.
var libraryModules = modules[:8]

// moduleOf returns the module holding the package in dir: the longest of
// modules that is dir or a parent of it.
func moduleOf(dir string) string {
	best := ""
	for _, m := range modules {
		if m != "" && under(dir, m) && len(m) > len(best) {
			best = m
		}
	}
	return best
}

// listPackages lists the packages of every module of modules, keyed by
// directory.
func listPackages(t *testing.T) map[string]pkg {
	t.Helper()
	pkgs := map[string]pkg{}
	for _, m := range modules {
		cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}\t{{join .Imports \" \"}}\t{{join .Deps \" \"}}\t{{join .TestImports \" \"}} {{join .XTestImports \" \"}}", "./...")
		cmd.Dir = "../../" + m
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list ./... in %s: %v", name(m), err)
		}
		for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
			f := strings.Split(line, "\t")
			if len(f) != 4 {
				t.Fatalf("go list in %s: %q", name(m), line)
			}
			p := pkg{dir: rel(f[0]), imports: rels(f[1]), deps: rels(f[2]), testImports: rels(f[3])}
			pkgs[p.dir] = p
		}
	}
	return pkgs
}

func rel(path string) string {
	if path == module {
		return ""
	}
	if r, ok := strings.CutPrefix(path, module+"/"); ok {
		return r
	}
	return path
}

func rels(s string) []string {
	var out []string
	for _, p := range strings.Fields(s) {
		out = append(out, rel(p))
	}
	return out
}

// under reports whether dir is one of roots or inside one.
func under(dir string, roots ...string) bool {
	for _, r := range roots {
		if dir == r || strings.HasPrefix(dir, r+"/") {
			return true
		}
	}
	return false
}

// The arrows of docs/ARCHITECTURE.md, as what each layer must not reach.
// Deps are transitive; "direct" rules look at the package's own imports
// only (the engine reaches net/http through header's field syntax, but
// speaks no HTTP itself).
var rules = []struct {
	name   string
	of     func(dir string) bool
	forbid []string
	direct bool
}{
	{
		name:   "nothing below the daemon imports its module",
		of:     func(d string) bool { return !under(d, daemon, "internal/archtest") },
		forbid: []string{daemon},
	},
	{
		name: "the library core and the stores speak no HTTP and know no door",
		of: func(d string) bool {
			return d == "" || under(d, "algorithm", "memorystore", "redisstore", "storetest", "lease")
		},
		forbid: []string{"net/http", "header", "httplimit", "grpclimit", "envoyrls", "rlqs", "engine", "metrics", "ops", "tier", daemon, "client", "clientip"},
	},
	{
		name:   "the engine is below every door",
		of:     func(d string) bool { return d == "engine" },
		forbid: []string{"httplimit", "grpclimit", "envoyrls", "ops", "tier", "metrics", daemon, "clientip"},
	},
	{
		name:   "the engine writes fields into maps, not HTTP messages",
		of:     func(d string) bool { return d == "engine" },
		forbid: []string{"net/http"},
		direct: true,
	},
	{
		name:   "config reads the file into the library's types; it builds no door and opens no store",
		of:     func(d string) bool { return d == daemon+"/config" },
		forbid: []string{"httplimit", "grpclimit", "tier", "ops", "metrics", "memorystore", "redisstore", "github.com/jackc/pgx/v5", "github.com/redis/go-redis/v9"},
	},
	{
		name:   "route patterns are HTTP-free, so config checks what the middleware enforces",
		of:     func(d string) bool { return d == "pattern" },
		forbid: []string{"net/http"},
	},
	{
		name:   "tier is data and lookups; its HTTP side is tierhttp",
		of:     func(d string) bool { return d == "tier" },
		forbid: []string{"httplimit", "engine", "tierhttp", "clientip"},
	},
	{
		name:   "tier speaks no HTTP of its own",
		of:     func(d string) bool { return d == "tier" },
		forbid: []string{"net/http"},
		direct: true,
	},
	{
		name:   "rlqs leases from a Store; it knows no other door and no engine",
		of:     func(d string) bool { return under(d, "rlqs") },
		forbid: []string{"httplimit", "grpclimit", "envoyrls", "engine", "ops", "tier", "metrics", daemon, "client"},
	},
	{
		name:   "the reference RLQS client speaks the protocol only: no server, no store",
		of:     func(d string) bool { return d == "rlqs/rlqsclient" },
		forbid: []string{"rlqs", "memorystore", "redisstore"},
	},
	{
		name:   "the client is a peer of the daemon, not part of it",
		of:     func(d string) bool { return d == "client" },
		forbid: []string{"engine", "httplimit", "ops", "tier", daemon, "redisstore", "memorystore"},
	},
}

func TestDependencyDirection(t *testing.T) {
	pkgs := listPackages(t)
	for _, r := range rules {
		matched := false
		for _, dir := range sortedKeys(pkgs) {
			if !r.of(dir) {
				continue
			}
			matched = true
			p := pkgs[dir]
			list := p.deps
			if r.direct {
				list = p.imports
			}
			for _, d := range list {
				if under(d, r.forbid...) {
					t.Errorf("%s: %s imports %s", r.name, name(dir), d)
				}
			}
		}
		if !matched {
			t.Errorf("%s: no package is checked (was one renamed?)", r.name)
		}
	}
}

func name(dir string) string {
	if dir == "" {
		return "floodgate"
	}
	return dir
}

func sortedKeys(m map[string]pkg) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// mapEntry is a line of the package map: two spaces, a directory ending in
// "/", then its description.
var mapEntry = regexp.MustCompile(`^  ([a-z0-9_/]+)/\s`)

// TestPackageMap: the map in docs/ARCHITECTURE.md lists every package of
// the library's modules and the daemon's (examples/ stands for the runnable
// examples under it; bench/ and deploy/ are modules of their own) and
// nothing that is not one.
func TestPackageMap(t *testing.T) {
	f, err := os.Open("../../docs/ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mapped := map[string]bool{"": true} // the map's first line is the module itself
	inMap := false
	for s := bufio.NewScanner(f); s.Scan(); {
		line := s.Text()
		switch {
		case strings.HasPrefix(line, "```"):
			inMap = !inMap
		case inMap:
			if m := mapEntry.FindStringSubmatch(line); m != nil {
				mapped[m[1]] = true
			}
		}
	}
	pkgs := listPackages(t)
	for _, dir := range sortedKeys(pkgs) {
		if !mapped[dir] && !under(dir, "examples") {
			t.Errorf("package %s is missing from docs/ARCHITECTURE.md's package map", dir)
		}
	}
	for dir := range mapped {
		if _, ok := pkgs[dir]; !ok && !slices.Contains([]string{"examples", "bench", "deploy"}, dir) {
			t.Errorf("docs/ARCHITECTURE.md's package map lists %s/, which is not a package", dir)
		}
	}
}
