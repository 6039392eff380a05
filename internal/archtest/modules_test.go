package archtest

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// requirements are, per library module, the modules its packages import
// (tests included, since go.mod holds what they need too), with the
// package that needs each. A library user's `go list -m all` holds the
// requirements of the modules it requires and what those require, nothing
// of the daemon's (its CLI, file watcher and browser test live in the
// daemon's module, cmd/floodgate). A new entry is a decision every user of
// that module pays for; one in the root module, a decision every user of
// Floodgate pays for.
var requirements = map[string]map[string]string{
	"": {
		"github.com/dunglas/httpsfv":              "header",
		"github.com/realclientip/realclientip-go": "clientip",
		"github.com/redis/go-redis/v9":            "redisstore",
		"github.com/sony/gobreaker/v2":            "client",
		"golang.org/x/time":                       "client",
	},
	"grpclimit": {
		module:                         "the engine and httplimit's keys",
		"github.com/redis/go-redis/v9": "its tests on Redis",
		"google.golang.org/genproto/googleapis/rpc": "RetryInfo in a refusal's details",
		"google.golang.org/grpc":                    "the interceptors",
		"google.golang.org/protobuf":                "durationpb in RetryInfo",
	},
	"envoyrls": {
		module: "the engine",
		"github.com/envoyproxy/go-control-plane/envoy":     "Envoy's rate limit service",
		"github.com/envoyproxy/go-control-plane/ratelimit": "RateLimitConfig over xDS",
		"github.com/prometheus/client_golang":              "envoyproxy/ratelimit's metrics",
		"github.com/redis/go-redis/v9":                     "its tests on Redis",
		"google.golang.org/grpc":                           "the service",
		"google.golang.org/protobuf":                       "the protos",
		"gopkg.in/yaml.v3":                                 "envoyproxy/ratelimit's files",
	},
	"rlqs": {
		module: "the Store it leases from",
		"github.com/envoyproxy/go-control-plane/envoy": "Envoy's rate limit quota service",
		"github.com/prometheus/client_golang":          "the server's metrics",
		"github.com/redis/go-redis/v9":                 "its tests on Redis",
		"google.golang.org/grpc":                       "the service and the client",
		"google.golang.org/protobuf":                   "the protos",
	},
	"metrics": {
		module:                                "the engine's events",
		"github.com/prometheus/client_golang": "the series",
	},
	"ops": {
		module:                                "the engine, httplimit",
		module + "/metrics":                   "the admin routes' tests, with the engine's series",
		"github.com/prometheus/client_golang": "the ops packages' series",
		"github.com/redis/go-redis/v9":        "reductions in Redis",
	},
	"tier": {
		module:                    "floodgate's policies, header's problem types",
		"github.com/jackc/pgx/v5": "the PostgreSQL source",
		"golang.org/x/sync":       "one lookup per key at a time (singleflight)",
	},
	"tierhttp": {
		module:                    "the engine and httplimit",
		module + "/tier":          "the tiers it reads",
		"github.com/jackc/pgx/v5": "TestPostgres, the PostgreSQL source behind the plan",
	},
}

// heavy are the dependencies a library user should pay for only by
// importing the package that needs them.
var heavy = []string{"google.golang.org/grpc", "github.com/envoyproxy/", "github.com/jackc/pgx", "github.com/prometheus/"}

// TestLibraryRequirements: each library module's direct requirements are
// exactly its list in requirements (scripts/tidy-check.sh keeps go.mod
// what its imports need, so a package that starts to import a new
// dependency fails here, and a heavy one in the root module fails
// TestUserGraph too).
func TestLibraryRequirements(t *testing.T) {
	for _, m := range libraryModules {
		t.Run(name(m), func(t *testing.T) {
			want := requirements[m]
			direct := directRequirements(t, m)
			for _, path := range direct {
				if _, ok := want[path]; !ok {
					t.Errorf("%s/go.mod requires %s, which none of its packages should need (daemon-only code belongs in %s's module)", name(m), path, daemon)
				}
			}
			for path, by := range want {
				if !slices.Contains(direct, path) {
					t.Errorf("%s/go.mod no longer requires %s (for %s): drop it from this list", name(m), path, by)
				}
			}
		})
	}
}

// directRequirements returns the requirements of the module in dir that
// go.mod does not mark indirect.
func directRequirements(t *testing.T, dir string) []string {
	t.Helper()
	cmd := exec.Command("go", "mod", "edit", "-json")
	cmd.Dir = "../../" + dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod edit -json in %s: %v", name(dir), err)
	}
	var mod struct {
		Require []struct {
			Path     string
			Indirect bool
		}
	}
	if err := json.Unmarshal(out, &mod); err != nil {
		t.Fatal(err)
	}
	var direct []string
	for _, r := range mod.Require {
		if !r.Indirect {
			direct = append(direct, r.Path)
		}
	}
	return direct
}

// entryPoints are the packages a library user imports, each with the heavy
// dependencies its module graph must not hold.
var entryPoints = []struct {
	pkg    string
	forbid []string
}{
	{"", heavy},
	{"memorystore", heavy},
	{"redisstore", heavy},
	{"httplimit", heavy},
	{"client", heavy},
	{"lease", heavy},
	{"grpclimit", []string{"github.com/jackc/pgx", "github.com/prometheus/"}},
	{"envoyrls", []string{"github.com/jackc/pgx"}},
	{"rlqs", []string{"github.com/jackc/pgx"}},
	{"rlqs/rlqsclient", []string{"github.com/jackc/pgx"}},
	{"metrics", []string{"google.golang.org/grpc", "github.com/envoyproxy/", "github.com/jackc/pgx"}},
	{"ops/admin", []string{"google.golang.org/grpc", "github.com/envoyproxy/", "github.com/jackc/pgx"}},
	{"tier", []string{"google.golang.org/grpc", "github.com/envoyproxy/", "github.com/prometheus/"}},
	{"tierhttp", []string{"google.golang.org/grpc", "github.com/envoyproxy/", "github.com/prometheus/"}},
}

// TestUserGraph: for each entry point, a new module that imports it alone
// (its library modules replaced by this checkout, as a release's tags
// would serve them) is tidied, and its `go list -m all` holds none of the
// heavy dependencies the entry point does not need. This is what a user
// sees, test dependencies of the library's modules included, since their
// go.mod files list those too.
func TestUserGraph(t *testing.T) {
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	sums := goSums(t, repo)
	for _, e := range entryPoints {
		t.Run(name(e.pkg), func(t *testing.T) {
			t.Parallel()
			graph := userGraph(t, repo, sums, e.pkg)
			for _, m := range graph {
				for _, f := range e.forbid {
					if strings.HasPrefix(m, f) {
						t.Errorf("a module importing only %s has %s in its go list -m all", name(e.pkg), m)
					}
				}
			}
			if !slices.Contains(graph, module+"/"+moduleOf(e.pkg)) && moduleOf(e.pkg) != "" {
				t.Errorf("the graph lacks %s's module: %q", name(e.pkg), graph)
			}
		})
	}
}

// goSums returns the lines of every module's go.sum in the repository, so
// that a scratch module checks what it downloads against them.
func goSums(t *testing.T, repo string) []byte {
	t.Helper()
	var all []byte
	for _, m := range append(slices.Clone(modules), "bench", "deploy", "examples/chi") {
		b, err := os.ReadFile(filepath.Join(repo, m, "go.sum"))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return all
}

// userGraph tidies a module importing pkg and returns its go list -m all.
func userGraph(t *testing.T, repo string, sums []byte, pkg string) []string {
	t.Helper()
	dir := t.TempDir()
	gomod := "module example.com/user\n\ngo 1.26.0\n\n"
	for _, m := range libraryModules {
		gomod += "replace " + strings.TrimSuffix(module+"/"+m, "/") + " => " + filepath.Join(repo, m) + "\n"
	}
	main := "package main\n\nimport _ \"" + strings.TrimSuffix(module+"/"+pkg, "/") + "\"\n\nfunc main() {}\n"
	for f, body := range map[string][]byte{"go.mod": []byte(gomod), "go.sum": sums, "main.go": []byte(main)} {
		if err := os.WriteFile(filepath.Join(dir, f), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) string {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("mod", "tidy")
	var graph []string
	for _, line := range strings.Split(strings.TrimSpace(run("list", "-m", "all")), "\n") {
		graph = append(graph, strings.Fields(line)[0])
	}
	return graph
}

// internalDir reports whether dir is an internal package, importable only
// from below the directory holding its internal element.
func internalDir(dir string) bool {
	return strings.HasPrefix(dir, "internal/") || strings.Contains(dir, "/internal/")
}

// TestModuleInternals: no module's code imports an internal package of
// another module. A module built as a user's dependency compiles against
// whatever version of the other module the user's graph selects, and an
// internal package keeps no compatibility across versions. The daemon
// goes further: its tests too use only exported packages of the library,
// so that a release's daemon resolves against the library's tag as any
// user does. The library modules' tests, which only this repository
// builds, share the root module's test helpers (internal/testkit, opstest,
// tiertest), and so may the packages only tests import (testSupport).
func TestModuleInternals(t *testing.T) {
	pkgs := listPackages(t)
	for _, dir := range sortedKeys(pkgs) {
		p := pkgs[dir]
		imports := p.imports
		switch {
		case moduleOf(dir) == daemon:
			imports = append(slices.Clone(imports), p.testImports...)
		case in(dir, testSupport):
			continue // built by tests only, as tests are
		}
		for _, imp := range imports {
			if _, ours := pkgs[imp]; ours && internalDir(imp) && moduleOf(imp) != moduleOf(dir) {
				t.Errorf("%s (module %s) imports %s of module %s: give it an exported home or a copy of its own", name(dir), name(moduleOf(dir)), imp, name(moduleOf(imp)))
			}
		}
	}
}
