package envoyrls

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/internal/testkit"
)

func writeFile(t *testing.T, name, content string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestLoadDirectory(t *testing.T) {
	cfg, err := Load("testdata/limits")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range cfg.Domains {
		names = append(names, d.Domain+"@"+filepath.Base(d.File))
	}
	if got := strings.Join(names, " "); got != "files@files.yml parity@parity.yaml shop@shop.yaml" {
		t.Errorf("domains %s (dot files and other names are skipped)", got)
	}
	w, err := cfg.Domains[2].Descriptors[len(cfg.Domains[2].Descriptors)-1].RateLimit.Period()
	if err != nil || w != 90*time.Second {
		t.Errorf("window: %v %v", w, err)
	}
}

func TestParseRefuses(t *testing.T) {
	for name, tc := range map[string]struct{ yaml, want string }{
		"misspelt field":       {"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unt: 1}\n", "requests_per_unt"},
		"misspelt extension":   {"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, algoritm: gcra}\n", "algoritm"},
		"unknown algorithm":    {"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, algorithm: leaky}\n", "leaky"},
		"unknown unit":         {"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n", "fortnight"},
		"no unit":              {"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {requests_per_unit: 1}\n", "unit"},
		"empty domain":         {"descriptors:\n  - key: k\n", "domain is empty"},
		"no key":               {"domain: d\ndescriptors:\n  - value: v\n", "no key"},
		"twice":                {"domain: d\ndescriptors:\n  - {key: k, value: v}\n  - {key: k, value: v}\n", "twice"},
		"unlimited with unit":  {"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, unit: second}\n", "unlimited"},
		"window and unit":      {"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {window: 90s, unit: second, requests_per_unit: 1}\n", "window"},
		"bad window":           {"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {window: soon, requests_per_unit: 1}\n", "soon"},
		"burst on a window":    {"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, burst: 5}\n", "burst"},
		"failure mode":         {"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, failure_mode: open}\n", "failure_mode"},
		"empty replaces":       {"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, replaces: [{name: \"\"}]}\n", "empty name"},
		"replaces itself":      {"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {name: n, unit: second, requests_per_unit: 1, replaces: [{name: n}]}\n", "its own name"},
		"unlimited multiplied": {"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, unit_multiplier: 2}\n", "unlimited"},
		"share without *":      {"domain: d\ndescriptors:\n  - {key: k, value: v, share_threshold: true}\n", "share_threshold"},
		"empty":                {"", "empty"},
	} {
		_, err := Parse("f.yaml", []byte(tc.yaml))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", name, err, tc.want)
		}
	}
}

func TestLoadRefusesDomainTwice(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir+"/a.yaml", "domain: d\n")
	writeFile(t, dir+"/b.yaml", "domain: d\n")
	if _, err := Load(dir); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "another file") {
		t.Errorf("Load: %v", err)
	}
}

func TestPolicyName(t *testing.T) {
	long := "d." + strings.Repeat("k_v.", 30)
	for in, want := range map[[2]string]string{
		{"", "shop.client_vip"}:  "shop.client_vip",
		{"my_limit", "x"}:        "my_limit",
		{"", "shop.path_/api/*"}: "shop.path__api__",
		{"", long}:               long[:55] + "-",
	} {
		if got := policyName(in[0], in[1]); !strings.HasPrefix(got, want) || len(got) > 64 {
			t.Errorf("policyName(%q, %q) = %q, want %q…", in[0], in[1], got, want)
		}
	}
}

// FuzzParse: no input panics the loader, and whatever it accepts compiles.
func FuzzParse(f *testing.F) {
	seed, err := os.ReadFile("testdata/limits/shop.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte("domain: d\ndescriptors:\n  - key: k\n    value: v*\n    rate_limit: {window: 1ms, requests_per_unit: 4294967295, algorithm: gcra}\n"))
	f.Add([]byte("domain: d\ndescriptors: [{key: k, descriptors: [{key: j, rate_limit: {unit: year, unit_multiplier: 4294967295, requests_per_unit: 1}}]}]"))
	eng, err := engine.New(engine.Config{Store: testkit.Memory(f)})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Parse("fuzz.yaml", data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error not wrapping ErrInvalid: %v", err)
			}
			return
		}
		if _, err := Compile(eng, &Config{Domains: []*Domain{d}}, floodgate.FailClosed); err != nil {
			t.Fatalf("accepted but does not compile: %v", err)
		}
	})
}

// TestExample: examples/envoy's files load and compile as the daemon
// does (with a local store for fail-to-local).
func TestExample(t *testing.T) {
	cfg, err := Load("../examples/envoy/ratelimit")
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(engine.Config{Store: testkit.Memory(t), Local: testkit.Memory(t)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Compile(eng, cfg, floodgate.FailClosed); err != nil {
		t.Fatal(err)
	}
}

// TestUnknownFieldWording: a misspelt field is named with its file and
// line, not by a Go type name.
func TestUnknownFieldWording(t *testing.T) {
	_, err := Parse("rl.yaml", []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 5, algoritm: gcra}\n"))
	if err == nil || err.Error() != `envoyrls: invalid configuration: rl.yaml:4: unknown field "algoritm"` {
		t.Fatalf("error %v", err)
	}
}

// TestLoadRefusesEmptyDirectory: a directory with no descriptor file would
// switch every limit off; it is refused like an empty file.
func TestLoadRefusesEmptyDirectory(t *testing.T) {
	if _, err := Load(t.TempDir()); !errors.Is(err, ErrInvalid) {
		t.Fatalf("empty directory: %v, want ErrInvalid", err)
	}
}

// TestParseAliases: anchors and aliases load, as envoyproxy/ratelimit
// loads them; a document whose aliases would expand it out of proportion
// is refused (yaml.v3's check) before anything is built.
func TestParseAliases(t *testing.T) {
	d, err := Parse("f.yaml", []byte("domain: d\ndescriptors:\n  - {key: a, rate_limit: &l {unit: hour, requests_per_unit: 7}}\n  - {key: b, rate_limit: *l}\n"))
	if err != nil || d.Descriptors[1].RateLimit.RequestsPerUnit != 7 || d.Descriptors[1].RateLimit.Unit != "hour" {
		t.Fatalf("%+v %v", d, err)
	}
	var b strings.Builder
	b.WriteString("domain: d\ndescriptors:\n  - &a0 {key: k}\n")
	for i := 1; i < 40; i++ {
		fmt.Fprintf(&b, "  - &a%d {key: k%d, descriptors: [%s]}\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d,", i-1), 9), ","))
	}
	if _, err := Parse("f.yaml", []byte(b.String())); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "excessive aliasing") {
		t.Errorf("9^39 descriptors by aliases: %v", err)
	}
}

// TestValidateInMemory: a tree built in memory, as from xDS, is checked
// as a file's is.
func TestValidateInMemory(t *testing.T) {
	good := &Domain{File: "xds:edge", Domain: "edge", Descriptors: []*Descriptor{{Key: "k", RateLimit: &RateLimit{Unit: "minute", RequestsPerUnit: 5}}}}
	if err := (&Config{Domains: []*Domain{good}}).Validate(); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]*Config{
		"no unit":      {Domains: []*Domain{{File: "xds:a", Domain: "a", Descriptors: []*Descriptor{{Key: "k", RateLimit: &RateLimit{RequestsPerUnit: 5}}}}}},
		"self replace": {Domains: []*Domain{{File: "xds:a", Domain: "a", Descriptors: []*Descriptor{{Key: "k", RateLimit: &RateLimit{Name: "n", Unit: "second", Replaces: []Replace{{Name: "n"}}}}}}}},
		"twice":        {Domains: []*Domain{good, good}},
		"nil":          {Domains: []*Domain{nil}},
	} {
		if err := c.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}
