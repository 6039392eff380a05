package envoyrls

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/envoyrls/internal/readhead"
)

// ErrInvalid marks every configuration error; errors.Is(err, ErrInvalid)
// holds for what Parse and Load return about a file's content.
var ErrInvalid = errors.New("envoyrls: invalid configuration")

// MaxFileSize is the largest configuration file read, in bytes.
const MaxFileSize = 4 << 20

// maxDepth bounds descriptor nesting: no request can carry more entries
// than a descriptor nests, and Envoy sends a handful.
const maxDepth = 32

// Config is a set of domains, as read from one file or a directory of
// them. It holds no engine state: Compile readies it.
type Config struct {
	Domains []*Domain
	// PostCharge names the domains whose every limit is post-charged, as
	// RateLimit.PostCharge makes one limit; "*" names every domain. It is
	// how limits that reach Floodgate over xDS, whose protos have no such
	// field, count the costs Envoy reports at the end of a stream.
	PostCharge []string
}

// Domain is one file's content: a domain and its descriptor tree, in
// envoyproxy/ratelimit's format.
type Domain struct {
	File        string        `yaml:"-"`
	Domain      string        `yaml:"domain"`
	Descriptors []*Descriptor `yaml:"descriptors"`
}

// Descriptor is one level of the tree: a key, an optional value (a
// trailing * makes it a prefix), an optional limit and nested levels.
type Descriptor struct {
	Key         string        `yaml:"key"`
	Value       string        `yaml:"value"`
	RateLimit   *RateLimit    `yaml:"rate_limit"`
	Descriptors []*Descriptor `yaml:"descriptors"`
	ShadowMode  bool          `yaml:"shadow_mode"`
	// DetailedMetric and ValueToMetric name metrics by the request's value
	// in envoyproxy/ratelimit; Floodgate's metrics are per descriptor
	// path whatever they say, so they are accepted and change nothing.
	DetailedMetric bool `yaml:"detailed_metric"`
	ValueToMetric  bool `yaml:"value_to_metric"`
	// ShareThreshold makes every value a wildcard matches share one
	// counter, under the wildcard's pattern.
	ShareThreshold bool `yaml:"share_threshold"`
	// QuotaMode, as in envoyproxy/ratelimit, never refuses a request: a
	// descriptor over its limit answers OK with limit_remaining 0 and no
	// duration_until_reset, and is listed in the response's dynamic
	// metadata (quotaModeViolations) when that is on.
	QuotaMode bool `yaml:"quota_mode"`
}

// RateLimit is a descriptor's limit: envoyproxy/ratelimit's fields, then
// Floodgate's extensions.
type RateLimit struct {
	Unit            string    `yaml:"unit"`
	RequestsPerUnit uint32    `yaml:"requests_per_unit"`
	UnitMultiplier  uint32    `yaml:"unit_multiplier"`
	Unlimited       bool      `yaml:"unlimited"`
	Name            string    `yaml:"name"`
	Replaces        []Replace `yaml:"replaces"`

	// Algorithm is a floodgate.Algorithm name; default fixed-window,
	// aligned to the unit as envoyproxy/ratelimit counts.
	Algorithm string `yaml:"algorithm"`
	// Window replaces unit × unit_multiplier with any duration, e.g. 90s.
	Window string `yaml:"window"`
	// Burst is the bucket of token-bucket and gcra.
	Burst int64 `yaml:"burst"`
	// FailureMode is fail-closed (OVER_LIMIT while the store fails),
	// fail-open or fail-to-local; unset, a store failure is a gRPC
	// UNAVAILABLE error and Envoy's failure_mode_deny decides.
	FailureMode string `yaml:"failure_mode"`
	// PostCharge counts every hit, as envoyproxy/ratelimit does: a cost
	// that does not fit what is left is counted anyway, leaving the key in
	// debt, and answered OVER_LIMIT; a check (hits_addend 0) is OVER_LIMIT
	// while not one unit is left. For the costs Envoy reports when a
	// stream ends (apply_on_stream_done), which must never be dropped.
	PostCharge bool `yaml:"post_charge"`
}

// Replace names a limit that a matching descriptor's limit replaces.
type Replace struct {
	Name string `yaml:"name"`
}

// units are the unit names envoyproxy/ratelimit accepts, with its lengths
// (a month is 30 days and a year 365, as it counts them).
var units = map[string]time.Duration{
	"second": time.Second, "minute": time.Minute, "hour": time.Hour, "day": 24 * time.Hour,
	"week": 7 * 24 * time.Hour, "month": 30 * 24 * time.Hour, "year": 365 * 24 * time.Hour,
}

// Parse reads one file's content, naming it file in errors. Unknown and
// misspelt fields are errors, as are an empty domain, a descriptor
// without a key, a key-value pair given twice at one level, a limit
// without a unit (unless unlimited) and an unknown extension value.
func Parse(file string, data []byte) (*Domain, error) {
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%w: %s: larger than %d bytes", ErrInvalid, file, MaxFileSize)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var root yaml.Node
	if err := dec.Decode(&root); err != nil {
		if err == io.EOF {
			return nil, fmt.Errorf("%w: %s: empty file", ErrInvalid, file)
		}
		return nil, yamlError(file, err)
	}
	if err := checkDepth(&root, 0); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalid, file, err)
	}
	d := &Domain{File: file}
	strict := yaml.NewDecoder(bytes.NewReader(data))
	strict.KnownFields(true)
	if err := strict.Decode(d); err != nil {
		return nil, yamlError(file, err)
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return d, nil
}

// yamlMessage is one of yaml.v3's messages: "line N: what".
var yamlMessage = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)

// unknownField is yaml.v3's message for a field a strict decoder does not
// know: "field algoritm not found in type envoyrls.RateLimit".
var unknownField = regexp.MustCompile(`^field (\S+) not found in type \S+$`)

// yamlError words a YAML decoding error as "file:line: what", one per
// line, naming an unknown field as such rather than by a Go type.
func yamlError(file string, err error) error {
	msgs := []string{strings.TrimPrefix(err.Error(), "yaml: ")}
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs = te.Errors
	}
	out := make([]string, 0, len(msgs))
	for _, m := range msgs {
		where := file
		if g := yamlMessage.FindStringSubmatch(strings.TrimSpace(m)); g != nil {
			where, m = file+":"+g[1], g[2]
		}
		if g := unknownField.FindStringSubmatch(m); g != nil {
			m = fmt.Sprintf("unknown field %q", g[1])
		}
		out = append(out, where+": "+m)
	}
	return fmt.Errorf("%w: %s", ErrInvalid, strings.Join(out, "; "))
}

// checkDepth refuses documents nested beyond any real tree. Anchors and
// aliases are accepted, as envoyproxy/ratelimit accepts them; yaml.v3
// refuses a document whose aliases expand it out of proportion.
func checkDepth(n *yaml.Node, depth int) error {
	if depth > 4*maxDepth {
		return errors.New("nested too deeply")
	}
	for _, c := range n.Content {
		if err := checkDepth(c, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// Validate checks a domain however it was built (Parse calls it; a
// domain translated from another source, such as xDS, needs it before
// Compile): the checks Parse lists, and envoyproxy/ratelimit's on
// replaces (no empty name, no limit replacing itself). The error wraps
// ErrInvalid and names d.File and the descriptor path.
func (d *Domain) Validate() error {
	err := errors.New("domain is empty")
	if d.Domain != "" {
		err = validateLevel(d.Descriptors, d.Domain, 1)
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalid, d.File, err)
	}
	return nil
}

func validateLevel(ds []*Descriptor, path string, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("%s: descriptors nest deeper than %d", path, maxDepth)
	}
	seen := map[string]bool{}
	for _, desc := range ds {
		if desc == nil || desc.Key == "" {
			return fmt.Errorf("%s: a descriptor has no key", path)
		}
		p := path + "." + desc.Key
		if desc.Value != "" {
			p += "_" + desc.Value
		}
		if seen[p] {
			return fmt.Errorf("%s: given twice at one level", p)
		}
		seen[p] = true
		if desc.ShareThreshold && !strings.HasSuffix(p, "*") {
			return fmt.Errorf("%s: share_threshold needs a wildcard value (ending in *)", p)
		}
		if rl := desc.RateLimit; rl != nil {
			if err := rl.validate(); err != nil {
				return fmt.Errorf("%s: rate_limit: %v", p, err)
			}
		}
		if err := validateLevel(desc.Descriptors, p, depth+1); err != nil {
			return err
		}
	}
	return nil
}

func (rl *RateLimit) validate() error {
	for _, r := range rl.Replaces {
		if r.Name == "" {
			return errors.New("replaces has an empty name")
		}
		if r.Name == rl.Name {
			return fmt.Errorf("replaces its own name %q", r.Name)
		}
	}
	if rl.Unlimited {
		// As envoyproxy/ratelimit: a unit is refused (a unit it does not
		// know is not a unit, and is ignored with requests_per_unit).
		if _, unit := units[strings.ToLower(rl.Unit)]; unit || rl.Window != "" || rl.Algorithm != "" || rl.Burst != 0 || rl.UnitMultiplier != 0 {
			return errors.New("unlimited takes no unit, unit_multiplier, window, algorithm or burst")
		}
		return nil
	}
	if _, err := rl.Policy("x"); err != nil {
		return err
	}
	if rl.FailureMode != "" {
		if _, err := floodgate.ParseFailureMode(rl.FailureMode); err != nil {
			return fmt.Errorf("unknown failure_mode %q (want fail-closed, fail-open or fail-to-local)", rl.FailureMode)
		}
	}
	return nil
}

// Period is the limit's window: Window when set, else unit ×
// unit_multiplier (0 meaning 1).
func (rl *RateLimit) Period() (time.Duration, error) {
	if rl.Window != "" {
		if rl.Unit != "" || rl.UnitMultiplier != 0 {
			return 0, errors.New("window replaces unit and unit_multiplier: give one or the other")
		}
		w, err := time.ParseDuration(rl.Window)
		if err != nil || w < time.Millisecond {
			return 0, fmt.Errorf("window %q is not a duration of at least 1ms", rl.Window)
		}
		return w, nil
	}
	u, ok := units[strings.ToLower(rl.Unit)]
	if !ok {
		return 0, fmt.Errorf("unit %q is not one of second, minute, hour, day, week, month, year", rl.Unit)
	}
	m := max(rl.UnitMultiplier, 1)
	if time.Duration(m) > math.MaxInt64/u {
		return 0, fmt.Errorf("unit_multiplier %d makes the window too long", m)
	}
	return u * time.Duration(m), nil
}

// Policy is the floodgate.Policy the limit decides by, named name. A
// requests_per_unit of 0 refuses every request and has no policy: the
// error is nil and the Quota 0.
func (rl *RateLimit) Policy(name string) (floodgate.Policy, error) {
	w, err := rl.Period()
	if err != nil {
		return floodgate.Policy{}, err
	}
	p := floodgate.Policy{Name: name, Algorithm: floodgate.FixedWindow, Quota: int64(rl.RequestsPerUnit), Window: w, Burst: rl.Burst}
	if rl.Algorithm != "" {
		if p.Algorithm, err = floodgate.ParseAlgorithm(rl.Algorithm); err != nil {
			return p, err
		}
	}
	if p.Quota == 0 {
		if rl.Burst != 0 {
			return p, errors.New("burst with requests_per_unit 0")
		}
		return p, nil // refuses everything, as envoyproxy/ratelimit does
	}
	return p, p.Validate()
}

// Load reads path: one file, or every *.yaml and *.yml file of a
// directory (not its subdirectories; names starting with a dot are
// skipped, as Kubernetes' ConfigMap bookkeeping is), which must hold at
// least one. A domain defined in
// two files is an error, as envoyproxy/ratelimit has it by default.
func Load(path string) (*Config, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	files := []string{path}
	if fi.IsDir() {
		entries, err := os.ReadDir(path)
		if err != nil {
			return nil, err
		}
		files = files[:0]
		for _, e := range entries {
			n := e.Name()
			if strings.HasPrefix(n, ".") || e.IsDir() || !(strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml")) {
				continue
			}
			files = append(files, filepath.Join(path, n))
		}
		if len(files) == 0 {
			// An emptied directory would turn every limit off: refused,
			// so a reload keeps the rules in force, as for an empty file.
			return nil, fmt.Errorf("%w: %s: no .yaml or .yml file in the directory", ErrInvalid, path)
		}
	}
	cfg := &Config{}
	for _, f := range files {
		d, err := readFile(f)
		if err != nil {
			return nil, err
		}
		cfg.Domains = append(cfg.Domains, d)
	}
	return cfg, cfg.check()
}

func readFile(name string) (*Domain, error) {
	data, err := readhead.File(name, MaxFileSize)
	if err != nil {
		return nil, err
	}
	return Parse(name, data)
}

// Validate checks a Config built in memory as Load checks files: every
// domain (Domain.Validate), and no domain twice. The error wraps
// ErrInvalid.
func (c *Config) Validate() error {
	for _, d := range c.Domains {
		if d == nil {
			return fmt.Errorf("%w: a domain is nil", ErrInvalid)
		}
		if err := d.Validate(); err != nil {
			return err
		}
	}
	return c.check()
}

// check refuses a domain defined twice.
func (c *Config) check() error {
	var names []string
	for _, d := range c.Domains {
		if slices.Contains(names, d.Domain) {
			return fmt.Errorf("%w: %s: domain %q is defined in another file too", ErrInvalid, d.File, d.Domain)
		}
		names = append(names, d.Domain)
	}
	return nil
}
