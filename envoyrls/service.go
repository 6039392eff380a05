package envoyrls

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
)

// Defaults of Options.
const (
	DefaultMaxDescriptors = 64
	DefaultMaxKeyLength   = 1024
)

// Options configures a Service.
type Options struct {
	// Fields selects the rate-limit fields put in response_headers_to_add;
	// the zero value's Style is engine.Both, so set engine.None for none
	// (the daemon's default: see docs/ENVOY.md).
	Fields engine.Fields
	// MaxDescriptors is the most descriptors one request may carry;
	// default DefaultMaxDescriptors.
	MaxDescriptors int
	// MaxKeyLength bounds, in bytes, a descriptor's domain, keys and
	// values together; default DefaultMaxKeyLength.
	MaxKeyLength int
	// Registerer, if set, gets floodgate_envoy_unmatched_total.
	Registerer prometheus.Registerer
	// Logger gets the once-a-minute lines about unknown domains and
	// unmatched descriptors; default slog.Default().
	Logger *slog.Logger
	// Now is the clock of those lines and of the duration_until_reset
	// of a limit refusing everything; default time.Now.
	Now func() time.Time
	// DynamicMetadata puts envoyproxy/ratelimit's dynamic_metadata in
	// every response (its RESPONSE_DYNAMIC_METADATA): the domain, each
	// descriptor's entries as "key=value", its limit override and
	// hits_addend, the request's hits_addend, the indexes of the
	// quota-mode descriptors over their limit (quotaModeViolations) and
	// whether any matched limit is in quota mode (quotaModeEnabled).
	DynamicMetadata bool
	// LimitHeaders, when set, sends envoyproxy/ratelimit's response
	// headers (its LIMIT_RESPONSE_HEADERS_ENABLED) instead of Fields'.
	LimitHeaders *LimitHeaders
	// Stats, if set, counts each limit's hits under envoyproxy/ratelimit's
	// metric names (stats.go).
	Stats *Stats
}

// LimitHeaders are envoyproxy/ratelimit's three response headers, by the
// names its LIMIT_LIMIT_HEADER, LIMIT_REMAINING_HEADER and
// LIMIT_RESET_HEADER give (empty: its defaults, RateLimit-Limit,
// RateLimit-Remaining and RateLimit-Reset). They speak of one descriptor
// with a limit: the last refusing one, else the one with the least
// remaining (the first of equals); the limit is its requests_per_unit,
// the reset whole seconds until its window ends.
type LimitHeaders struct {
	Limit, Remaining, Reset string
}

// Service is Envoy's rate limit service (envoy.service.ratelimit.v3) on a
// Floodgate engine. It is safe for concurrent use.
type Service struct {
	rlsv3.UnimplementedRateLimitServiceServer
	rules     func() *Rules
	opt       Options
	unmatched *prometheus.CounterVec
	logs      everyMinute
}

// NewService returns a Service deciding by the Rules rules returns at
// each request (so a reload swaps them). Errors: the metric could not be
// registered.
func NewService(rules func() *Rules, opt Options) (*Service, error) {
	if opt.MaxDescriptors <= 0 {
		opt.MaxDescriptors = DefaultMaxDescriptors
	}
	if opt.MaxKeyLength <= 0 {
		opt.MaxKeyLength = DefaultMaxKeyLength
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	s := &Service{rules: rules, opt: opt, logs: everyMinute{now: opt.Now, last: map[string]time.Time{}, n: map[string]int{}}}
	s.unmatched = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "floodgate_envoy_unmatched_total",
		Help: "Envoy rate limit descriptors that no limit applies to, by reason (unknown_domain, unmatched) and domain (empty for an unknown one).",
	}, []string{"reason", "domain"})
	if opt.Registerer != nil {
		if err := opt.Registerer.Register(s.unmatched); err != nil {
			return nil, fmt.Errorf("envoyrls: metrics: %w", err)
		}
	}
	return s, nil
}

// Register adds the service to g.
func (s *Service) Register(g *grpc.Server) { rlsv3.RegisterRateLimitServiceServer(g, s) }

// step is one request descriptor's match.
type step struct {
	limit     *limit
	unlimited bool // an unlimited limit matched: set aside before replaces
	key       string
	cost      int64 // 0: check only, spending nothing
	out       int   // index into the engine outcomes; -1 when not decided
	peeked    bool  // outs[out] is a peek: nothing was spent
	counted   bool  // post-charged past what was left (decidePost)
	refused   bool  // peeked because another descriptor refuses the request anyway
	quotaOver bool  // a quota-mode limit over its quota answered OK
}

// ShouldRateLimit decides req: every descriptor's limit all or nothing
// (engine.DecideAll). Errors: InvalidArgument for a malformed request or
// a limit override of no known unit, Unavailable when the store fails and
// the matched limit set no failure_mode.
func (s *Service) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	if err := s.check(req); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	r := s.rules()
	var tree *level
	known := false
	if r != nil {
		tree, known = r.domains[req.Domain]
	}
	if !known {
		s.miss("unknown_domain", "", req.Domain, req.Descriptors[0])
	}
	var sbuf [4]step
	steps := sbuf[:0]
	for _, d := range req.Descriptors {
		st := step{cost: cost(req, d), out: -1}
		if known {
			var kbuf [128]byte
			if o := d.GetLimit(); o != nil {
				l, err := r.override(o, req.Domain)
				if err != nil {
					return nil, status.Error(codes.InvalidArgument, err.Error())
				}
				st.limit, st.key = l, string(rawKey(append(kbuf[:0], req.Domain...), d.Entries))
			} else {
				l, key, listed := tree.match(append(kbuf[:0], req.Domain...), d.Entries)
				st.limit, st.key = l, string(key)
				if l == nil && !listed {
					s.miss("unmatched", req.Domain, req.Domain, d)
				}
			}
		}
		steps = append(steps, st)
	}
	replace(steps)
	resp, err := s.decide(ctx, steps)
	if err == nil && s.opt.DynamicMetadata {
		resp.DynamicMetadata = dynamicMetadata(req, steps, resp)
	}
	return resp, err
}

// cost is what d spends, as envoyproxy/ratelimit counts it: the
// descriptor's own hits_addend when set (0 checks without spending), else
// the request's, where 0 means 1 (Envoy sends 0 when unset).
func cost(req *rlsv3.RateLimitRequest, d *commonv3.RateLimitDescriptor) int64 {
	if h := d.GetHitsAddend(); h != nil {
		return int64(min(h.Value, math.MaxInt64))
	}
	return int64(max(req.GetHitsAddend(), 1))
}

// replace sets unlimited limits aside, then drops every limit whose name
// a matched limit replaces, as envoyproxy/ratelimit does: the names are
// collected from every match first (an unlimited one's too), so two
// limits replacing each other both go.
func replace(steps []step) {
	var replaced map[string]bool
	for i := range steps {
		l := steps[i].limit
		if l == nil {
			continue
		}
		for _, name := range l.replaces {
			if replaced == nil {
				replaced = map[string]bool{}
			}
			replaced[name] = true
		}
		if l.unlimited {
			steps[i].limit, steps[i].unlimited = nil, true
		}
	}
	for i := range steps {
		if l := steps[i].limit; l != nil && l.name != "" && replaced[l.name] {
			steps[i].limit = nil
		}
	}
}

// refuses reports whether a step, unasked, refuses the request: a limit
// of requests_per_unit 0 that enforces and spends.
func (st *step) refuses() bool {
	l := st.limit
	return l != nil && l.rule == nil && st.cost > 0 && !l.shadow && !l.quota
}

func (s *Service) decide(ctx context.Context, steps []step) (*rlsv3.RateLimitResponse, error) {
	var ebuf [4]engine.Step
	es := ebuf[:0] // decided together; the others are looked at or post-charged
	refuseAll := false
	for i := range steps {
		refuseAll = refuseAll || steps[i].refuses()
	}
	// A step's outcome is outs[i] when decided together, else
	// outs[len(steps)+i].
	var obuf [8]engine.Outcome
	outs := append(obuf[:0], make([]engine.Outcome, 2*len(steps))...)
	refuseAll = decidePost(ctx, steps, outs[len(steps):]) || refuseAll
	for i := range steps {
		st := &steps[i]
		if st.limit == nil || st.limit.rule == nil || st.limit.post {
			continue
		}
		if st.cost == 0 || refuseAll {
			// A check only, or a request refused anyway: spend nothing,
			// and show what is left (REQUIREMENTS K3).
			st.out, st.peeked, st.refused = len(steps)+i, true, refuseAll
			continue
		}
		st.out = len(es)
		es = append(es, engine.Step{Rule: st.limit.rule, Request: engine.Request{Key: st.key, Cost: floodgate.Cost{Requests: st.cost}}})
	}
	if len(es) > 0 {
		engine.DecideAll(ctx, es, outs[:len(es)])
	}
	for i := range steps {
		if st := &steps[i]; st.peeked && !st.limit.post {
			outs[st.out] = st.limit.rule.Peek(ctx, st.key)
		}
	}
	resp := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK, Statuses: make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(steps))}
	for i := range steps {
		ds, err := s.status(&steps[i], outs)
		if err != nil {
			return nil, err
		}
		if ds.Code == rlsv3.RateLimitResponse_OVER_LIMIT {
			resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
		}
		resp.Statuses[i] = ds
	}
	switch {
	case s.opt.LimitHeaders != nil:
		resp.ResponseHeadersToAdd = s.limitHeaders(steps, resp.Statuses)
	case s.opt.Fields.Style != engine.None && len(es) > 0 && !refuseAll:
		resp.ResponseHeadersToAdd = s.headers(outs[:len(es)])
	}
	return resp, nil
}

// status is one descriptor's answer, as envoyproxy/ratelimit gives it: OK
// alone when no limit applies, OK with the largest remaining for an
// unlimited one; else the limit's code, remaining (0 when over) and
// duration_until_reset. A shadow-mode limit is OK whatever it says, and a
// quota-mode one over its limit is OK with remaining 0 and no reset.
func (s *Service) status(st *step, outs []engine.Outcome) (*rlsv3.RateLimitResponse_DescriptorStatus, error) {
	l := st.limit
	switch {
	case st.unlimited:
		return &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK, LimitRemaining: math.MaxUint32}, nil
	case l == nil:
		return &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}, nil
	}
	ds := &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK, CurrentLimit: l.current}
	over := st.cost > 0 // requests_per_unit 0 (no rule): any spending is over
	var remaining int64
	var reset time.Duration
	if l.rule != nil {
		o := &outs[st.out]
		if o.Verdict == engine.Unavailable && l.errorOnFailure && !st.refused {
			return nil, status.Error(codes.Unavailable, "rate limit store unavailable")
		}
		remaining, reset, over = st.standing(o)
	}
	s.opt.Stats.observe(l, st.cost, !over, remaining)
	ds.LimitRemaining = uint32(min(remaining, math.MaxUint32))
	if reset <= 0 {
		w := l.policy.Window
		reset = w - time.Duration(s.opt.Now().UnixNano())%w
	}
	ds.DurationUntilReset = durationpb.New(reset)
	if over {
		ds.LimitRemaining = 0
		if l.quota && !l.shadow {
			st.quotaOver = true
			ds.DurationUntilReset = nil
		} else if !l.shadow {
			ds.Code = rlsv3.RateLimitResponse_OVER_LIMIT
		}
	}
	return ds, nil
}

// standing reads a step's outcome: what is left, until when, and whether
// the step is over its limit.
func (st *step) standing(o *engine.Outcome) (remaining int64, reset time.Duration, over bool) {
	if o.Summary >= 0 {
		it := o.Item(o.Summary)
		remaining, reset = it.Remaining, it.ResetAfter
		// A peek's Allowed says whether a cost of 1 fits.
		over = !it.Allowed || st.peeked && it.Remaining < st.cost
	}
	switch {
	case st.counted:
		over = true // the post-charge's standing is after the debt it made
	case st.cost == 0 && st.limit.post:
		over = o.Verdict != engine.Allowed // not one unit is left
	case st.cost == 0:
		over = false // a check only: these counters never pass the limit
	case o.Verdict == engine.Denied && st.peeked, o.Verdict == engine.Unavailable && st.refused:
	case o.Verdict != engine.Allowed:
		over = true
	}
	return remaining, reset, over
}

// check refuses what no configuration could match and what would make
// the service do unbounded work.
func (s *Service) check(req *rlsv3.RateLimitRequest) error {
	switch n := len(req.GetDescriptors()); {
	case req.GetDomain() == "":
		return fmt.Errorf("domain is empty")
	case n == 0:
		return fmt.Errorf("no descriptors")
	case n > s.opt.MaxDescriptors:
		return fmt.Errorf("%d descriptors, more than the %d accepted", n, s.opt.MaxDescriptors)
	}
	if strings.IndexByte(req.Domain, 0) >= 0 {
		return fmt.Errorf("domain holds a NUL byte")
	}
	for i, d := range req.Descriptors {
		if len(d.GetEntries()) == 0 {
			return fmt.Errorf("descriptor %d has no entries", i)
		}
		if d.GetIsNegativeHits() {
			return fmt.Errorf("descriptor %d: negative hits are not supported", i)
		}
		size := len(req.Domain)
		for j, e := range d.Entries {
			if e.GetKey() == "" {
				return fmt.Errorf("descriptor %d entry %d has an empty key", i, j)
			}
			if strings.IndexByte(e.Key, 0) >= 0 || strings.IndexByte(e.Value, 0) >= 0 {
				return fmt.Errorf("descriptor %d entry %d holds a NUL byte", i, j)
			}
			size += len(e.Key) + len(e.Value) + 2
		}
		if size > s.opt.MaxKeyLength {
			return fmt.Errorf("descriptor %d is %d bytes with its domain, more than the %d accepted", i, size, s.opt.MaxKeyLength)
		}
	}
	return nil
}

// miss counts a descriptor no limit applies to and logs it at most once a
// minute per reason and domain: envoyproxy/ratelimit answers these OK
// silently, so a misspelt domain or key would switch limiting off unseen.
func (s *Service) miss(reason, label, domain string, d *commonv3.RateLimitDescriptor) {
	s.unmatched.WithLabelValues(reason, label).Inc()
	if n, ok := s.logs.due(reason + "\x00" + label); ok {
		var keys []string
		for _, e := range d.GetEntries() {
			keys = append(keys, e.GetKey())
		}
		s.opt.Logger.Warn("envoy rate limit request matched no limit: answered OK", "reason", reason, "domain", domain,
			"keys", strings.Join(keys, ","), "count", n)
	}
}

// everyMinute says when a line of a kind is due: the first time, then at
// most once a minute, with how many occurred since the last line.
type everyMinute struct {
	mu   sync.Mutex
	now  func() time.Time
	last map[string]time.Time
	n    map[string]int
}

func (e *everyMinute) due(kind string) (count int, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.n[kind]++
	now := e.now()
	if last, seen := e.last[kind]; seen && now.Sub(last) < time.Minute {
		return 0, false
	}
	e.last[kind] = now
	count = e.n[kind]
	e.n[kind] = 0
	return count, true
}
