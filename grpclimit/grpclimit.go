// Package grpclimit limits the calls of a Go gRPC server with Floodgate's
// engine: unary and stream server interceptors that pick a rule per call
// by its full method name (patterns in package pattern's path syntax, as
// HTTP rules have routes), keyed by the peer address (behind trusted
// proxies, by x-forwarded-for), a metadata value (hashed, as API keys are
// by the HTTP door), the full method name or a function. Refusals are
// logged, one record per rule and key per interval. A refused call ends with
// codes.ResourceExhausted carrying google.rpc.RetryInfo and
// google.rpc.QuotaFailure details, and every call gets the ratelimit and
// ratelimit-policy fields as response header metadata. UnaryClientRetry is
// the client side: it waits as RetryInfo asks and tries again.
package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/clientip"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/httplimit"
	"github.com/floodgate/floodgate/pattern"
	"github.com/floodgate/floodgate/refusallog"
	"github.com/floodgate/floodgate/secret"
)

// KeyFunc returns a call's partition key. An error that is a gRPC status
// ends the call with it; any other ends it with codes.InvalidArgument.
type KeyFunc func(ctx context.Context, fullMethod string) (string, error)

// ByPeer keys calls by the client's address as r resolves it: the peer's,
// or, when the peer is one of r's trusted proxies, the x-forwarded-for
// metadata's (and the other sources r is configured with). A nil r uses
// the peer address alone.
func ByPeer(r *clientip.Resolver) KeyFunc {
	if r == nil {
		r, _ = clientip.New(clientip.Config{})
	}
	return func(ctx context.Context, _ string) (string, error) {
		p, ok := peer.FromContext(ctx)
		if !ok || p.Addr == nil {
			return "", status.Error(codes.Internal, "grpclimit: no peer address")
		}
		// The resolver reads an HTTP request: gRPC's metadata has the
		// same shape as its header (lower-case names).
		req := &http.Request{RemoteAddr: p.Addr.String(), Header: http.Header{}}
		md, _ := metadata.FromIncomingContext(ctx)
		for k, vs := range md {
			req.Header[http.CanonicalHeaderKey(k)] = vs
		}
		return r.Key(req), nil
	}
}

// ByMetadata keys calls by the first value of the metadata name (an API
// key, say), hashed as the HTTP door's httplimit.APIKey hashes it: the key
// is the first 16 hex digits of the value's SHA-256 (as tier.Hash.ID), so
// no store, log or metric ever holds the value. A call without it is
// refused with codes.Unauthenticated.
func ByMetadata(name string) KeyFunc {
	name = strings.ToLower(name)
	return func(ctx context.Context, _ string) (string, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		if vs := md.Get(name); len(vs) > 0 && vs[0] != "" {
			return secret.ID(vs[0]), nil
		}
		return "", status.Errorf(codes.Unauthenticated, "grpclimit: no %s metadata", name)
	}
}

// ByMethod keys calls by their full method name, e.g.
// "/pkg.Service/Method": one quota per method for all clients.
func ByMethod() KeyFunc {
	return func(_ context.Context, method string) (string, error) { return method, nil }
}

// Rule limits the calls whose full method name its Method pattern
// matches. The engine's side (name, policies, caps, modes, lease) is the
// embedded engine.Rule, whose Name defaults to Method.
type Rule struct {
	// Method selects calls by full method name, a pattern of package
	// pattern with no method or host: "/pkg.Service/Method" one method,
	// "/pkg.Service/" (or "/pkg.Service/{method}") every method of a
	// service, "/" every call. Names compare without regard to case.
	Method string
	// Key is the partition key; default Config.Key.
	Key KeyFunc
	engine.Rule
}

// Config configures a Limiter.
type Config struct {
	// Rules are tried in order on each call's full method name and the
	// first match decides it; a rule no call can reach (an earlier pattern
	// covers it) is an error. A call no rule matches goes to Rule, or, with
	// no Rule, passes unlimited.
	Rules []Rule
	// Engine compiles Rules; or give Store and New builds one. Required
	// with Rules.
	Engine *engine.Engine
	// Store keeps the counters of an Engine New builds.
	Store floodgate.Store
	// Rule, if set, decides every call that no rule of Rules matches.
	// Rule or Rules is required.
	Rule *engine.Compiled
	// Key is the partition key; default ByPeer(nil).
	Key KeyFunc
	// Fields writes the response metadata; the zero value sends the
	// draft-11 fields and X-RateLimit-* (engine.Both). Its Now is also
	// the time a refund (CostKey) names its charge by.
	Fields engine.Fields
	// Logger gets the records of refusals (REQUIREMENTS O1), with the key
	// as httplimit.Fingerprint shows it; default slog.Default().
	Logger *slog.Logger
	// RefusalLogInterval is the least time between two records of one
	// key's refusals by one rule; default 10s, negative for a record per
	// refusal.
	RefusalLogInterval time.Duration
	// Now is the refusal log's clock; default time.Now.
	Now func() time.Time
	// CostKey names a response metadata key (lower case) in which the
	// handler reports the call's actual cost, in a trailer (grpc.SetTrailer)
	// or its header: the interceptor removes it before it is sent and
	// settles the call's cost of 1 with it, the excess post-charged
	// (counted even past the quota), a smaller cost refunded. A value that
	// is no non-negative integer is removed and ignored. "" reads nothing.
	CostKey string
}

// route is a rule made ready to serve: a parsed pattern (nil: every call),
// its key and its compiled limits.
type route struct {
	method *pattern.Pattern
	key    KeyFunc
	limits *engine.Compiled
}

// Limiter holds the interceptors of its rules.
type Limiter struct {
	routes   []route
	fields   engine.Fields
	logger   *slog.Logger
	refusals *refusallog.Log
	costKey  string
}

// New returns a Limiter, or an error naming the rule at fault: no Rule
// and no Rules, Rules without Engine or Store, a Method that is not a
// pattern of a path alone, a rule the engine refuses, or one an earlier
// rule shadows.
func New(cfg Config) (*Limiter, error) {
	if cfg.Rule == nil && len(cfg.Rules) == 0 {
		return nil, errors.New("grpclimit: no rule")
	}
	if cfg.Key == nil {
		cfg.Key = ByPeer(nil)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	l := &Limiter{fields: cfg.Fields, logger: cfg.Logger, refusals: refusallog.New(cfg.RefusalLogInterval, cfg.Now), costKey: strings.ToLower(cfg.CostKey)}
	routes, err := compile(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.Rule != nil {
		routes = append(routes, route{key: cfg.Key, limits: cfg.Rule})
	}
	l.routes = routes
	return l, nil
}

// compile makes cfg.Rules ready to serve, in order.
func compile(cfg Config) ([]route, error) {
	if len(cfg.Rules) == 0 {
		return nil, nil
	}
	eng := cfg.Engine
	if eng == nil {
		if cfg.Store == nil {
			return nil, errors.New("grpclimit: Rules need an Engine or a Store")
		}
		var err error
		if eng, err = engine.New(engine.Config{Store: cfg.Store}); err != nil {
			return nil, fmt.Errorf("grpclimit: %w", err)
		}
	}
	routes := make([]route, len(cfg.Rules))
	pats := make([]*pattern.Pattern, len(cfg.Rules))
	for i, in := range cfg.Rules {
		if in.Name == "" {
			in.Name = in.Method
		}
		if !strings.HasPrefix(in.Method, "/") {
			return nil, fmt.Errorf("grpclimit: rule %q: method %q is not a full method name pattern (want \"/pkg.Service/Method\", \"/pkg.Service/\" or \"/\")", in.Name, in.Method)
		}
		p, err := pattern.Parse(in.Method)
		if err != nil {
			return nil, fmt.Errorf("grpclimit: rule %q: %w", in.Name, err)
		}
		if len(in.Policies) == 0 && len(in.Concurrency) == 0 {
			return nil, fmt.Errorf("grpclimit: rule %q: no policies or concurrency caps: it would limit nothing", in.Name)
		}
		c, err := eng.Compile(in.Rule)
		if err != nil {
			return nil, fmt.Errorf("grpclimit: %w", err)
		}
		if in.Key == nil {
			in.Key = cfg.Key
		}
		routes[i], pats[i] = route{method: p, key: in.Key, limits: c}, p
	}
	if sh := pattern.Shadows(nil, pats); len(sh) > 0 {
		s := sh[0]
		return nil, fmt.Errorf("grpclimit: rule %q (%s) is never reached: rule %q (%s) takes its calls first; %s",
			routes[s.Rule].limits.Name(), pats[s.Rule], routes[s.By].limits.Name(), pats[s.By], s.Advice())
	}
	return routes, nil
}

// match returns the route of a call, or nil when none matches.
func (l *Limiter) match(method string) *route {
	for i := range l.routes {
		if r := &l.routes[i]; r.method == nil || r.method.Match("", "", method) {
			return r
		}
	}
	return nil
}

// Unary is the unary server interceptor.
func (l *Limiter) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		out, err := l.decide(ctx, info.FullMethod, func(md metadata.MD) error { return grpc.SetHeader(ctx, md) })
		if err != nil {
			return nil, err
		}
		if out == nil { // no rule matched: nothing to settle
			return handler(ctx, req)
		}
		defer out.Release()
		if l.costKey == "" {
			return handler(ctx, req)
		}
		c, at := &costTaker{key: l.costKey}, l.now()
		resp, err := handler(withCost(ctx, c), req)
		l.settle(ctx, out, c, at)
		return resp, err
	}
}

// Stream is the stream server interceptor: a stream is one call, decided
// when it opens.
func (l *Limiter) Stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		out, err := l.decide(ss.Context(), info.FullMethod, ss.SetHeader)
		if err != nil {
			return err
		}
		if out == nil {
			return handler(srv, ss)
		}
		defer out.Release()
		if l.costKey == "" {
			return handler(srv, ss)
		}
		c, at := &costTaker{key: l.costKey}, l.now()
		err = handler(srv, serverStream{ss, c, withCost(ss.Context(), c)})
		l.settle(ss.Context(), out, c, at)
		return err
	}
}

// decide runs the rule of one call and sets its fields with setHeader.
// The error is the status a refused call ends with; a call no rule
// matches gets neither an outcome nor an error.
func (l *Limiter) decide(ctx context.Context, method string, setHeader func(metadata.MD) error) (*engine.Outcome, error) {
	ru := l.match(method)
	if ru == nil {
		return nil, nil
	}
	key, err := ru.key(ctx, method)
	if err != nil {
		if _, ok := status.FromError(err); ok {
			return nil, err
		}
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	out := ru.limits.Decide(ctx, engine.Request{Key: key, Cost: floodgate.Cost{Requests: 1}})
	h := map[string][]string{}
	l.fields.Set(h, &out)
	md := metadata.MD{}
	for k, vs := range h {
		md[strings.ToLower(k)] = vs
	}
	if len(md) > 0 {
		_ = setHeader(md) // fails only once headers went out, which they have not
	}
	if out.Verdict == engine.Allowed {
		return &out, nil
	}
	l.logRefusal(ctx, ru.limits.Name(), method, key, &out)
	return nil, refusal(&out)
}

// logRefusal logs a refusal of a limit as the HTTP door does (message,
// rule, policy, fingerprinted key, retry_after, suppressed), with the
// method, unless one of the same rule and key was logged within the
// interval. A failing store is the Limiter's to log, not a refusal.
func (l *Limiter) logRefusal(ctx context.Context, rule, method, key string, out *engine.Outcome) {
	msg := refusalMessages[out.Verdict]
	if msg == "" {
		return
	}
	n, ok := l.refusals.Admit(rule, key)
	if !ok {
		return
	}
	attrs := []slog.Attr{slog.String("rule", rule), slog.String("method", method)}
	if out.Verdict != engine.Blocked {
		attrs = append(attrs, slog.String("policy", out.Item(out.Summary).Name))
	}
	attrs = append(attrs, slog.String("key", httplimit.Fingerprint(key)),
		slog.Int64("retry_after", engine.RetryAfterSeconds(out)), slog.Int64("suppressed", n))
	l.logger.LogAttrs(ctx, slog.LevelWarn, msg, attrs...)
}

// refusalMessages are the HTTP door's log messages per verdict.
var refusalMessages = map[engine.Verdict]string{engine.Denied: "rate limit exceeded",
	engine.Reduced: "refused under reduced capacity", engine.Blocked: "blocked for abnormal usage"}

// refusal is the status of a call the engine did not admit.
func refusal(out *engine.Outcome) error {
	switch out.Verdict {
	case engine.Unavailable:
		if out.CallerEnded() {
			return status.FromContextError(out.Err).Err()
		}
		return status.Error(codes.Unavailable, "rate limit store unavailable")
	case engine.Reduced:
		return withRetry(status.New(codes.Unavailable, "capacity temporarily reduced"), out)
	}
	st := status.New(codes.ResourceExhausted, "rate limit exceeded")
	qf := &errdetails.QuotaFailure{}
	for _, name := range out.Violated() {
		qf.Violations = append(qf.Violations, &errdetails.QuotaFailure_Violation{Subject: name, Description: "quota of policy " + name + " exhausted"})
	}
	if out.Verdict == engine.Blocked {
		qf.Violations = append(qf.Violations, &errdetails.QuotaFailure_Violation{Subject: "blocked", Description: "abnormal usage detected"})
	}
	if s, err := st.WithDetails(qf); err == nil {
		st = s
	}
	return withRetry(st, out)
}

func withRetry(st *status.Status, out *engine.Outcome) error {
	if out.RetryAfter <= 0 {
		return st.Err()
	}
	if s, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(out.RetryAfter)}); err == nil {
		st = s
	}
	return st.Err()
}
