package envoyrls

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
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
	// Now is the clock of those lines; default time.Now.
	Now func() time.Time
	// Stats, if set, counts each limit's hits under envoyproxy/ratelimit's
	// metric names (stats.go).
	Stats *Stats
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
	limit *limit
	key   string
	cost  int64
	out   int // index into the engine outcomes; -1 when not decided
}

// ShouldRateLimit decides req: every descriptor's limit all or nothing
// (engine.DecideAll). Errors: InvalidArgument for a malformed request,
// Unavailable when the store fails and the matched limit set no
// failure_mode.
func (s *Service) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	if err := s.check(req); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	hits := int64(max(req.GetHitsAddend(), 1))
	var tree *level
	known := false
	if r := s.rules(); r != nil {
		tree, known = r.domains[req.Domain]
	}
	if !known {
		s.miss("unknown_domain", "", req.Domain, req.Descriptors[0])
	}
	var sbuf [4]step
	steps := sbuf[:0]
	for _, d := range req.Descriptors {
		st := step{cost: hits, out: -1}
		if h := d.GetHitsAddend(); h != nil && h.Value > 0 {
			st.cost = int64(min(h.Value, math.MaxInt64))
		}
		if known {
			var kbuf [128]byte
			l, key, listed := tree.match(append(kbuf[:0], req.Domain...), d.Entries)
			st.limit, st.key = l, string(key)
			if l == nil && !listed {
				s.miss("unmatched", req.Domain, req.Domain, d)
			}
		}
		steps = append(steps, st)
	}
	replace(steps)
	return s.decide(ctx, steps)
}

// replace drops the limits another matched limit replaces by name.
func replace(steps []step) {
	for _, a := range steps {
		if a.limit == nil {
			continue
		}
		for _, name := range a.limit.replaces {
			for j := range steps {
				if b := steps[j].limit; b != nil && b != a.limit && b.name == name {
					steps[j].limit = nil
				}
			}
		}
	}
}

func (s *Service) decide(ctx context.Context, steps []step) (*rlsv3.RateLimitResponse, error) {
	var ebuf [4]engine.Step
	es := ebuf[:0]
	refuseAll := false // a requests_per_unit of 0 matched: spend nothing
	for i := range steps {
		l := steps[i].limit
		switch {
		case l == nil || l.unlimited:
		case l.rule == nil:
			refuseAll = refuseAll || !l.shadow
		default:
			steps[i].out = len(es)
			es = append(es, engine.Step{Rule: l.rule, Request: engine.Request{Key: steps[i].key, Cost: floodgate.Cost{Requests: steps[i].cost}}})
		}
	}
	var obuf [4]engine.Outcome
	outs := obuf[:0]
	outs = append(outs, make([]engine.Outcome, len(es))...)
	if !refuseAll {
		engine.DecideAll(ctx, es, outs)
	}
	resp := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK, Statuses: make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(steps))}
	for i, st := range steps {
		ds, err := s.status(st, outs, refuseAll)
		if err != nil {
			return nil, err
		}
		if ds.Code == rlsv3.RateLimitResponse_OVER_LIMIT {
			resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
		}
		resp.Statuses[i] = ds
	}
	if s.opt.Fields.Style != engine.None && len(outs) > 0 && !refuseAll {
		resp.ResponseHeadersToAdd = s.headers(outs)
	}
	return resp, nil
}

// status is one descriptor's answer, as envoyproxy/ratelimit gives it: OK
// alone when no limit applies, OK with the largest remaining for an
// unlimited one.
func (s *Service) status(st step, outs []engine.Outcome, refuseAll bool) (*rlsv3.RateLimitResponse_DescriptorStatus, error) {
	l := st.limit
	switch {
	case l == nil:
		return &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}, nil
	case l.unlimited:
		return &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK, LimitRemaining: math.MaxUint32}, nil
	case l.rule == nil:
		s.opt.Stats.observe(l, st.cost, false, 0)
		code := rlsv3.RateLimitResponse_OVER_LIMIT
		if l.shadow {
			code = rlsv3.RateLimitResponse_OK
		}
		w := l.policy.Window
		reset := w - time.Duration(s.opt.Now().UnixNano())%w
		return &rlsv3.RateLimitResponse_DescriptorStatus{Code: code, CurrentLimit: l.current, DurationUntilReset: durationpb.New(reset)}, nil
	}
	ds := &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK, CurrentLimit: l.current}
	if refuseAll {
		return ds, nil // not asked: another descriptor refuses everything
	}
	o := &outs[st.out]
	if o.Len() > 0 {
		it := o.Item(0)
		s.opt.Stats.observe(l, st.cost, it.Allowed, it.Remaining)
	}
	switch o.Verdict {
	case engine.Allowed:
	case engine.Unavailable:
		if l.errorOnFailure {
			return nil, status.Error(codes.Unavailable, "rate limit store unavailable")
		}
		ds.Code = rlsv3.RateLimitResponse_OVER_LIMIT
	default:
		ds.Code = rlsv3.RateLimitResponse_OVER_LIMIT
	}
	if o.Len() > 0 {
		it := o.Item(0)
		if ds.Code == rlsv3.RateLimitResponse_OK {
			ds.LimitRemaining = uint32(min(it.Remaining, math.MaxUint32))
		}
		ds.DurationUntilReset = durationpb.New(it.ResetAfter)
	}
	return ds, nil
}

// headers writes the RateLimit fields of every decided descriptor.
func (s *Service) headers(outs []engine.Outcome) []*corev3.HeaderValue {
	m := engine.Merge(outs)
	h := map[string][]string{}
	s.opt.Fields.Set(h, &m)
	var hv []*corev3.HeaderValue
	for k, vs := range h {
		for _, v := range vs {
			hv = append(hv, &corev3.HeaderValue{Key: strings.ToLower(k), Value: v})
		}
	}
	return hv
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
