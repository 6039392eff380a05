package envoyrls

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

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

// Register adds the service to g, which must be built with ServerCodec
// (grpc.NewServer(envoyrls.ServerCodec(), …)); without it every call
// fails with codes.Internal.
func (s *Service) Register(g *grpc.Server) { g.RegisterService(&serviceDesc, s) }

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
// (engine.DecideAll). It is the gRPC method's Go form, for calls without
// gRPC: it writes req to the wire and reads the answer back, so that it
// decides exactly as a call through Register does. Errors: InvalidArgument
// for a malformed request or a limit override of no known unit,
// Unavailable when the store fails and the matched limit set no
// failure_mode.
func (s *Service) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	r := new(request)
	var err error
	if r.buf, err = proto.Marshal(req); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if err := r.parse(); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	var resp response
	if err := s.serve(ctx, r, &resp); err != nil {
		return nil, err
	}
	out := new(rlsv3.RateLimitResponse)
	if err := proto.Unmarshal(resp.appendWire(nil), out); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return out, nil
}

// serve decides r into resp; see ShouldRateLimit.
func (s *Service) serve(ctx context.Context, req *request, resp *response) error {
	if err := s.check(req); err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	r := s.rules()
	var tree *level
	known := false
	if r != nil {
		tree, known = r.domains[string(req.domain)]
	}
	if !known {
		s.miss("unknown_domain", "", req, &req.descriptors[0])
	}
	var sbuf [4]step
	steps := sbuf[:0]
	for i := range req.descriptors {
		d := &req.descriptors[i]
		st := step{cost: cost(req, d), out: -1}
		if known {
			var kbuf [128]byte
			if d.limit != nil {
				l, err := r.override(d.perUnit, d.unit, string(req.domain))
				if err != nil {
					return status.Error(codes.InvalidArgument, err.Error())
				}
				st.limit, st.key = l, string(rawKey(append(kbuf[:0], req.domain...), req.entriesOf(d)))
			} else {
				l, key, listed := tree.match(append(kbuf[:0], req.domain...), req.entriesOf(d))
				st.limit, st.key = l, string(key)
				if l == nil && !listed {
					s.miss("unmatched", string(req.domain), req, d)
				}
			}
		}
		steps = append(steps, st)
	}
	replace(steps)
	if err := s.decide(ctx, steps, resp); err != nil {
		return err
	}
	if s.opt.DynamicMetadata {
		resp.metadata = dynamicMetadata(req, steps, resp)
	}
	return nil
}

// cost is what d spends, as envoyproxy/ratelimit counts it: the
// descriptor's own hits_addend when set (0 checks without spending), else
// the request's, where 0 means 1 (Envoy sends 0 when unset).
func cost(req *request, d *descriptor) int64 {
	if d.hasHits {
		return int64(min(d.hits, math.MaxInt64))
	}
	return int64(max(req.hitsAddend, 1))
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

// check refuses what no configuration could match and what would make
// the service do unbounded work.
func (s *Service) check(req *request) error {
	switch n := len(req.descriptors); {
	case len(req.domain) == 0:
		return fmt.Errorf("domain is empty")
	case n == 0:
		return fmt.Errorf("no descriptors")
	case n > s.opt.MaxDescriptors:
		return fmt.Errorf("%d descriptors, more than the %d accepted", n, s.opt.MaxDescriptors)
	}
	if bytes.IndexByte(req.domain, 0) >= 0 {
		return fmt.Errorf("domain holds a NUL byte")
	}
	for i := range req.descriptors {
		d := &req.descriptors[i]
		if d.n == 0 {
			return fmt.Errorf("descriptor %d has no entries", i)
		}
		if d.negative {
			return fmt.Errorf("descriptor %d: negative hits are not supported", i)
		}
		size := len(req.domain)
		for j, e := range req.entriesOf(d) {
			if len(e.key) == 0 {
				return fmt.Errorf("descriptor %d entry %d has an empty key", i, j)
			}
			if bytes.IndexByte(e.key, 0) >= 0 || bytes.IndexByte(e.value, 0) >= 0 {
				return fmt.Errorf("descriptor %d entry %d holds a NUL byte", i, j)
			}
			size += len(e.key) + len(e.value) + 2
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
func (s *Service) miss(reason, label string, req *request, d *descriptor) {
	s.unmatched.WithLabelValues(reason, label).Inc()
	if n, ok := s.logs.due(reason + "\x00" + label); ok {
		var keys []string
		for _, e := range req.entriesOf(d) {
			keys = append(keys, string(e.key))
		}
		s.opt.Logger.Warn("envoy rate limit request matched no limit: answered OK", "reason", reason, "domain", string(req.domain),
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
