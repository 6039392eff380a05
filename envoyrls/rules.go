package envoyrls

import (
	"fmt"
	"hash/fnv"
	"strings"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
)

// Rules is a Config compiled on an engine: per domain, the descriptor tree
// whose limits decide requests. It is immutable and safe for concurrent
// use; a reload compiles new Rules.
type Rules struct {
	domains map[string]*level
}

// level is one depth of a descriptor tree.
type level struct {
	exact    map[entry]*node
	wildcard []wildcard // in file order: the first prefix that matches wins
	keyOnly  map[string]*node
}

type entry struct{ key, value string }

type wildcard struct {
	key, prefix string
	node        *node
}

// node is one configured descriptor.
type node struct {
	limit *limit // nil: no limit at this depth
	next  *level // nil: nothing nested
	// share, with share_threshold, is the value every matching request
	// is counted under (the wildcard pattern), so they share one counter.
	share string
}

// limit is a descriptor's compiled rate_limit.
type limit struct {
	path      string           // domain.key_value.key…, as envoyproxy/ratelimit names it
	rule      *engine.Compiled // nil when unlimited or refusing everything
	unlimited bool
	shadow    bool
	name      string
	replaces  []string
	// errorOnFailure: no failure_mode was set, so a failing store is a
	// gRPC error and Envoy's own failure mode decides.
	errorOnFailure bool
	current        *rlsv3.RateLimitResponse_RateLimit // shared and never modified
	policy         floodgate.Policy                   // its Quota is 0 for a limit refusing everything
}

// Compile readies cfg's limits as engine rules, one per rate_limit, each
// with one policy named by the limit's name or its descriptor path.
// defaultFailure is the failure mode of limits that set none (the engine
// answers Unavailable under FailClosed, and the service then returns a
// gRPC error).
func Compile(eng *engine.Engine, cfg *Config, defaultFailure floodgate.FailureMode) (*Rules, error) {
	r := &Rules{domains: map[string]*level{}}
	for _, d := range cfg.Domains {
		lv, err := compileLevel(eng, d.Descriptors, d.Domain, defaultFailure)
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

func compileLevel(eng *engine.Engine, ds []*Descriptor, path string, fm floodgate.FailureMode) (*level, error) {
	if len(ds) == 0 {
		return nil, nil
	}
	lv := &level{exact: map[entry]*node{}, keyOnly: map[string]*node{}}
	for _, d := range ds {
		p := path + "." + d.Key
		if d.Value != "" {
			p += "_" + d.Value
		}
		n := &node{}
		if d.RateLimit != nil {
			l, err := compileLimit(eng, d, p, fm)
			if err != nil {
				return nil, err
			}
			n.limit = l
		}
		next, err := compileLevel(eng, d.Descriptors, p, fm)
		if err != nil {
			return nil, err
		}
		n.next = next
		switch {
		case strings.HasSuffix(d.Value, "*"):
			if d.ShareThreshold {
				n.share = d.Value
			}
			lv.wildcard = append(lv.wildcard, wildcard{key: d.Key, prefix: strings.TrimSuffix(d.Value, "*"), node: n})
		case d.Value != "":
			lv.exact[entry{d.Key, d.Value}] = n
		default:
			lv.keyOnly[d.Key] = n
		}
	}
	return lv, nil
}

func compileLimit(eng *engine.Engine, d *Descriptor, path string, fm floodgate.FailureMode) (*limit, error) {
	rl := d.RateLimit
	l := &limit{path: path, unlimited: rl.Unlimited, shadow: d.ShadowMode, name: rl.Name, errorOnFailure: rl.FailureMode == ""}
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
	if p.Quota == 0 {
		return l, nil
	}
	if rl.FailureMode != "" {
		fm, _ = floodgate.ParseFailureMode(rl.FailureMode)
	}
	mode := engine.Enforce
	if d.ShadowMode {
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

// match finds the limit of one request descriptor in domain's tree, as
// envoyproxy/ratelimit does: at each depth key and value first, then the
// first wildcard whose prefix the value has, then the key alone; the
// limit is the one at the depth of the descriptor's last entry. It
// appends the descriptor's partition key to key and returns it, and
// reports whether the descriptor is listed without a limit on purpose (a
// node with neither a limit nor nested descriptors).
func (lv *level) match(key []byte, entries []*commonv3.RateLimitDescriptor_Entry) (l *limit, k []byte, listed bool) {
	for i, e := range entries {
		if lv == nil {
			return nil, key, false
		}
		n := lv.exact[entry{e.Key, e.Value}]
		if n == nil {
			for _, w := range lv.wildcard {
				if w.key == e.Key && strings.HasPrefix(e.Value, w.prefix) {
					n = w.node
					break
				}
			}
		}
		if n == nil {
			n = lv.keyOnly[e.Key]
		}
		if n == nil {
			return nil, key, false
		}
		v := e.Value
		if n.share != "" {
			v = n.share
		}
		key = append(append(append(append(key, 0), e.Key...), 0), v...)
		if i == len(entries)-1 {
			return n.limit, key, n.limit == nil && n.next == nil
		}
		lv = n.next
	}
	return nil, key, false
}
