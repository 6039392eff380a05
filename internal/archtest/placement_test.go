package archtest

import (
	"slices"
	"strings"
	"testing"
)

// layers places every package of the library's and the daemon's modules,
// as allow-lists: pkgs names the packages of a layer (a directory, or
// "dir/" for every package below dir), may the packages of the modules
// they may import directly ("dir/" likewise; "" is floodgate itself).
// A package no layer names fails TestEveryPackagePlaced, so a new door,
// store or helper is guarded from its first commit; the deny rules of
// TestDependencyDirection add what must not be reached even indirectly.
var layers = []struct {
	name string
	pkgs []string
	may  []string
}{
	{"the core: policies, results, the Store interfaces", []string{""}, []string{"internal/nilcheck", "internal/ctxend"}},
	{"the algorithms' arithmetic", []string{"algorithm"}, nil},
	{"the stores", []string{"memorystore", "redisstore"}, []string{"", "algorithm", "internal/nilcheck", "internal/algset", "internal/ctxend"}},
	{"a Store over a Store: local leases of hot keys", []string{"lease"}, []string{"", "internal/nilcheck"}},
	{"the stores' conformance suites", []string{"storetest"}, []string{"", "algorithm"}},
	{"formats and matching without a door", []string{"header", "pattern", "clientip"}, []string{""}},
	{"what every door shares: a secret's ID and comparison, bounded refusal records", []string{"secret", "refusallog"}, nil},
	{"the engine", []string{"engine"}, []string{"", "header", "internal/nilcheck", "internal/ctxend"}},
	{"the doors", []string{"httplimit", "grpclimit", "envoyrls", "tierhttp"},
		[]string{"", "engine", "header", "pattern", "clientip", "tier", "httplimit",
			"internal/nilcheck", "envoyrls/internal/readhead", "refusallog", "secret"}},
	{"Envoy's rate limit quota service on a Store, and its reference client", []string{"rlqs", "rlqs/rlqsclient"}, []string{"", "rlqs/internal/nilcheck"}},
	{"the engine's observers and capacity", []string{"metrics", "ops/"}, []string{"", "engine", "header", "httplimit", "ops/", "secret"}},
	{"API-key tiers as data", []string{"tier"}, []string{"", "header"}},
	{"the client of rate-limited APIs", []string{"client"}, []string{"", "header"}},
	{"the modules' internal helpers", []string{"internal/nilcheck", "internal/ctxend", "internal/archtest", "envoyrls/internal/readhead", "rlqs/internal/nilcheck", daemon + "/internal/readhead"}, nil},
	{"what every store checks of the algorithms", []string{"internal/algset"}, []string{""}},
	{"what tests share", testSupport,
		[]string{"", "memorystore", "engine", "header", "clientip", "httplimit", "internal/testkit", daemon + "/internal/testkit"}},
	{"the runnable examples", []string{"examples/"}, []string{"", "memorystore", "redisstore", "engine", "clientip", "httplimit", "grpclimit"}},
	{"the daemon's configuration", []string{daemon + "/config"}, []string{"", "clientip", "engine", "envoyrls", "rlqs", "header", "pattern", daemon + "/internal/readhead"}},
	{"the daemon", []string{daemon, daemon + "/server"}, []string{"", "algorithm", "memorystore", "redisstore", "header", "pattern", "clientip", "engine",
		"httplimit", "grpclimit", "envoyrls", "rlqs", "tierhttp", "metrics", "ops/", "tier", "client", "secret", daemon + "/"}},
}

// testSupport are the packages only tests import.
var testSupport = []string{"internal/testkit", "internal/opstest", "internal/tiertest", "tierhttp/internal/pgtest", daemon + "/internal/testkit", daemon + "/internal/pgtest"}

// in reports whether dir is one of names, a "dir/" entry naming dir's
// ancestors.
func in(dir string, names []string) bool {
	for _, n := range names {
		if n == dir || strings.HasSuffix(n, "/") && strings.HasPrefix(dir, n) {
			return true
		}
	}
	return false
}

// TestEveryPackagePlaced: each package is in exactly one layer, and each
// layer entry names a package that exists.
func TestEveryPackagePlaced(t *testing.T) {
	pkgs := listPackages(t)
	for _, dir := range sortedKeys(pkgs) {
		var placed []string
		for _, l := range layers {
			if in(dir, l.pkgs) {
				placed = append(placed, l.name)
			}
		}
		switch len(placed) {
		case 0:
			t.Errorf("package %s is in no layer: place it in internal/archtest's layers (what it may import) and in docs/ARCHITECTURE.md's map", name(dir))
		case 1:
		default:
			t.Errorf("package %s is in %d layers: %q", name(dir), len(placed), placed)
		}
	}
	for _, l := range layers {
		for _, p := range l.pkgs {
			if !slices.ContainsFunc(sortedKeys(pkgs), func(dir string) bool { return in(dir, []string{p}) }) {
				t.Errorf("layer %q names %q, which holds no package (was it renamed?)", l.name, p)
			}
		}
	}
}

// TestLayerImports: a package imports, of the two modules, only what its
// layer may (its own package's imports, tests excepted).
func TestLayerImports(t *testing.T) {
	pkgs := listPackages(t)
	for _, dir := range sortedKeys(pkgs) {
		for _, l := range layers {
			if !in(dir, l.pkgs) {
				continue
			}
			for _, imp := range pkgs[dir].imports {
				if _, ours := pkgs[imp]; ours && !in(imp, l.may) {
					t.Errorf("%s (%s) imports %s, which its layer may not: add it to the layer's may list if the arrow is right, and to docs/ARCHITECTURE.md", name(dir), l.name, name(imp))
				}
			}
		}
	}
}
