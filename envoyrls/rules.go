package envoyrls

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
)

// Rules is a Config compiled on an engine: per domain, the descriptor tree
// whose limits decide requests. It is safe for concurrent use; a reload
// compiles new Rules.
type Rules struct {
	domains map[string]*level
	post    map[string]bool // the domains of Config.PostCharge; "*" every one
	eng     *engine.Engine
	fm      floodgate.FailureMode
	// overrides holds the limits of requests' own RateLimitDescriptor.limit,
	// compiled on first use, one per requests_per_unit and unit.
	mu        sync.Mutex
	overrides map[overrideKey]*limit
}

// maxOverrides bounds the distinct per-request limits compiled for one
// Rules: Envoy's limits come from a route's configuration or metadata,
// a handful, so more is a misconfiguration or a client choosing its limit.
const maxOverrides = 1024

type overrideKey struct {
	perUnit uint32
	unit    rlsv3.RateLimitResponse_RateLimit_Unit
	post    bool // in a domain of Config.PostCharge
}

// level is one depth of a descriptor tree, as envoyproxy/ratelimit holds
// it: nodes by "key_value" (or "key" alone), and the names ending in *.
type level struct {
	nodes    map[string]*node
	wildcard []wildcard // in file order: the first prefix that matches wins
}

// wildcard is a descriptor whose "key_value" name ends in *: it matches a
// request entry whose "key_value" starts with prefix.
type wildcard struct {
	prefix []byte
	node   *node
}

// node is one configured descriptor.
type node struct {
	limit *limit // nil: no limit at this depth
	next  *level // nil: nothing nested
	// share, with share_threshold, is the wildcard's "key_value*" name:
	// every request it matches is counted under it, in one counter.
	share string
}

// limit is a descriptor's compiled rate_limit.
type limit struct {
	path      string           // domain.key_value.key…, as envoyproxy/ratelimit names it
	labels    [3]string        // domain, key1, key2 of its metrics (compiling.labels)
	rule      *engine.Compiled // nil when unlimited or refusing everything
	unlimited bool
	shadow    bool
	quota     bool // quota_mode: never refuses the request
	post      bool // post-charged: every hit counts (RateLimit.PostCharge)
	name      string
	replaces  []string
	// errorOnFailure: no failure_mode was set, so a failing store is a
	// gRPC error and Envoy's own failure mode decides.
	errorOnFailure bool
	current        *rlsv3.RateLimitResponse_RateLimit // shared and never modified
	currentWire    []byte                             // current's wire form (currentWire)
	policy         floodgate.Policy                   // its Quota is 0 for a limit refusing everything
}

// Compile readies cfg's limits as engine rules, one per rate_limit, each
// with one policy named by the limit's name or its descriptor path.
// defaultFailure is the failure mode of limits that set none (the engine
// answers Unavailable under FailClosed, and the service then returns a
// gRPC error).
func Compile(eng *engine.Engine, cfg *Config, defaultFailure floodgate.FailureMode) (*Rules, error) {
	r := &Rules{domains: map[string]*level{}, post: map[string]bool{}, eng: eng, fm: defaultFailure, overrides: map[overrideKey]*limit{}}
	for _, d := range cfg.PostCharge {
		r.post[d] = true
	}
	for _, d := range cfg.Domains {
		lv, err := compileLevel(eng, d.Descriptors, d.Domain, compiling{fm: defaultFailure, post: r.posts(d.Domain), labels: [3]string{d.Domain}, depth: 1})
		if err != nil {
			return nil, fmt.Errorf("envoyrls: %s: %w", d.File, err)
		}
		if lv == nil {
			lv = &level{}
		}
		r.domains[d.Domain] = lv
	}
	return r, nil
}

// compiling is what a domain's limits take from outside their files, and
// the metric labels of the level being compiled.
type compiling struct {
	fm   floodgate.FailureMode // of limits that set no failure_mode
	post bool                  // every limit is post-charged (Config.PostCharge)
	// labels are the domain and the path's first two entry names
	// (key_value or key), whole: a name may hold dots, as an IP address
	// does, so the dotted path cannot be split back into them. depth is
	// the number of them set.
	labels [3]string
	depth  int
}

// posts reports whether Config.PostCharge names domain.
func (r *Rules) posts(domain string) bool { return r.post[domain] || r.post["*"] }

func compileLevel(eng *engine.Engine, ds []*Descriptor, path string, cc compiling) (*level, error) {
	if len(ds) == 0 {
		return nil, nil
	}
	lv := &level{nodes: map[string]*node{}}
	for _, d := range ds {
		name := d.Key
		if d.Value != "" {
			name += "_" + d.Value
		}
		p := path + "." + name
		child := cc
		if child.depth < len(child.labels) {
			child.labels[child.depth] = name
		}
		child.depth++
		n := &node{}
		if d.RateLimit != nil {
			l, err := compileLimit(eng, d, p, child)
			if err != nil {
				return nil, err
			}
			n.limit = l
		}
		next, err := compileLevel(eng, d.Descriptors, p, child)
		if err != nil {
			return nil, err
		}
		n.next = next
		lv.nodes[name] = n
		if strings.HasSuffix(name, "*") {
			if d.ShareThreshold {
				n.share = name
			}
			lv.wildcard = append(lv.wildcard, wildcard{prefix: []byte(strings.TrimSuffix(name, "*")), node: n})
		}
	}
	return lv, nil
}

func compileLimit(eng *engine.Engine, d *Descriptor, path string, cc compiling) (*limit, error) {
	rl, fm := d.RateLimit, cc.fm
	l := &limit{path: path, labels: cc.labels, unlimited: rl.Unlimited, shadow: d.ShadowMode, quota: d.QuotaMode, post: rl.PostCharge || cc.post,
		name: rl.Name, errorOnFailure: rl.FailureMode == ""}
	for _, r := range rl.Replaces {
		l.replaces = append(l.replaces, r.Name)
	}
	if l.unlimited {
		return l, nil
	}
	p, err := rl.Policy(policyName(rl.Name, path))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	l.policy = p
	l.current = &rlsv3.RateLimitResponse_RateLimit{Name: rl.Name, RequestsPerUnit: rl.RequestsPerUnit, Unit: protoUnit(rl)}
	if rl.Window != "" {
		l.current.RequestsPerUnit = uint32(min(p.Quota, 1<<32-1))
	}
	l.currentWire = currentWire(l.current)
	if p.Quota == 0 {
		return l, nil
	}
	if rl.FailureMode != "" {
		fm, _ = floodgate.ParseFailureMode(rl.FailureMode)
	}
	mode := engine.Enforce
	if d.ShadowMode || d.QuotaMode {
		// Neither refuses; a quota-mode limit over its quota must not
		// stop the others from spending (engine.DecideAll).
		mode = engine.Shadow
	}
	if l.rule, err = eng.Compile(engine.Rule{Name: "envoy:" + path, Policies: []floodgate.Policy{p}, Mode: mode, FailureMode: fm}); err != nil {
		return nil, err
	}
	return l, nil
}

// protoUnit is the unit Envoy is told: the configured one, or UNKNOWN for
// a window that is not a unit (the RateLimit-Policy field then says w).
func protoUnit(rl *RateLimit) rlsv3.RateLimitResponse_RateLimit_Unit {
	if rl.Window != "" || rl.UnitMultiplier > 1 {
		return rlsv3.RateLimitResponse_RateLimit_UNKNOWN
	}
	return rlsv3.RateLimitResponse_RateLimit_Unit(rlsv3.RateLimitResponse_RateLimit_Unit_value[strings.ToUpper(rl.Unit)])
}

// policyName is name when it is a valid policy name, else the descriptor
// path made into one: characters outside [A-Za-z0-9_.-] become _, and a
// path longer than 64 characters keeps its start and a hash of the whole.
func policyName(name, path string) string {
	if name == "" {
		name = path
	}
	b := []byte(name)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			b[i] = '_'
		}
	}
	if len(b) > 64 {
		h := fnv.New32a()
		h.Write([]byte(name))
		b = fmt.Appendf(b[:55], "-%08x", h.Sum32())
	}
	return string(b)
}

// override is the limit of a request descriptor's own
// RateLimitDescriptor.limit, as envoyproxy/ratelimit builds it: the
// request's requests_per_unit and unit, enforcing (never shadow or quota
// mode), without name or replaces, post-charged in a domain of
// Config.PostCharge. Errors: a unit that is not one of Envoy's, or more
// distinct overrides than maxOverrides.
func (r *Rules) override(perUnit uint32, unit int32, domain string) (*limit, error) {
	k := overrideKey{perUnit, rlsv3.RateLimitResponse_RateLimit_Unit(unit), r.posts(domain)}
	r.mu.Lock()
	defer r.mu.Unlock()
	if l := r.overrides[k]; l != nil {
		return l, nil
	}
	if len(r.overrides) >= maxOverrides {
		return nil, fmt.Errorf("more than %d distinct limit overrides", maxOverrides)
	}
	name := strings.ToLower(k.unit.String())
	if _, ok := units[name]; !ok {
		return nil, fmt.Errorf("limit override unit %v is not one of second, minute, hour, day, week, month, year", k.unit)
	}
	d := &Descriptor{RateLimit: &RateLimit{Unit: name, RequestsPerUnit: k.perUnit}}
	path := fmt.Sprintf("override_%d_per_%s", k.perUnit, name)
	l, err := compileLimit(r.eng, d, path, compiling{fm: r.fm, post: k.post, labels: [3]string{path}, depth: 1})
	if err != nil {
		return nil, err
	}
	r.overrides[k] = l
	return l, nil
}

// match finds the limit of one request descriptor in domain's tree, as
// envoyproxy/ratelimit does: at each depth the entry's "key_value" name
// first, then the first wildcard whose prefix that name has, then the key
// alone; the limit is the one at the depth of the descriptor's last
// entry. It appends the descriptor's partition key to key and returns it,
// and reports whether the descriptor is listed without a limit on purpose
// (a node with neither a limit nor nested descriptors).
func (lv *level) match(key []byte, entries []entry) (l *limit, k []byte, listed bool) {
	var nbuf [128]byte
	for i, e := range entries {
		if lv == nil {
			return nil, key, false
		}
		name := append(append(append(nbuf[:0], e.key...), '_'), e.value...)
		n, wild := lv.nodes[string(name)], false
		if n == nil {
			for _, w := range lv.wildcard {
				if bytes.HasPrefix(name, w.prefix) {
					n, wild = w.node, true
					break
				}
			}
		}
		if n == nil {
			n = lv.nodes[string(e.key)]
		}
		if n == nil {
			return nil, key, false
		}
		key = append(append(append(key, 0), e.key...), 0)
		if wild && n.share != "" {
			key = append(key, sharedValue(n.share, e.key)...)
		} else {
			key = append(key, e.value...)
		}
		if i == len(entries)-1 {
			return n.limit, key, n.limit == nil && n.next == nil
		}
		lv = n.next
	}
	return nil, key, false
}

// sharedValue is the value a share_threshold wildcard counts every match
// under: its name without "key_" when it starts so, else the whole name.
func sharedValue(share string, key []byte) string {
	if len(share) > len(key) && share[len(key)] == '_' && share[:len(key)] == string(key) {
		return share[len(key)+1:]
	}
	return share
}

// rawKey is a descriptor's partition key without any tree: its domain and
// entries, as an override counts them.
func rawKey(key []byte, entries []entry) []byte {
	for _, e := range entries {
		key = append(append(append(append(key, 0), e.key...), 0), e.value...)
	}
	return key
}
