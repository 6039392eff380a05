// Package grpclimit limits the calls of a Go gRPC server with Floodgate's
// engine: unary and stream server interceptors keyed by the peer address
// (behind trusted proxies, by x-forwarded-for), a metadata value, the full
// method name or a function. A refused call ends with
// codes.ResourceExhausted carrying google.rpc.RetryInfo and
// google.rpc.QuotaFailure details, and every call gets the ratelimit and
// ratelimit-policy fields as response header metadata. UnaryClientRetry is
// the client side: it waits as RetryInfo asks and tries again.
package grpclimit

import (
	"context"
	"errors"
	"net/http"
	"strings"

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
// key, say); a call without it is refused with codes.Unauthenticated.
func ByMetadata(name string) KeyFunc {
	name = strings.ToLower(name)
	return func(ctx context.Context, _ string) (string, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		if vs := md.Get(name); len(vs) > 0 && vs[0] != "" {
			return vs[0], nil
		}
		return "", status.Errorf(codes.Unauthenticated, "grpclimit: no %s metadata", name)
	}
}

// ByMethod keys calls by their full method name, e.g.
// "/pkg.Service/Method": one quota per method for all clients.
func ByMethod() KeyFunc {
	return func(_ context.Context, method string) (string, error) { return method, nil }
}

// Config configures a Limiter.
type Config struct {
	// Rule decides each call; required.
	Rule *engine.Compiled
	// Key is the partition key; default ByPeer(nil).
	Key KeyFunc
	// Fields writes the response metadata; the zero value sends the
	// draft-11 fields and X-RateLimit-* (engine.Both). Its Now is also
	// the time a refund (CostKey) names its charge by.
	Fields engine.Fields
	// CostKey names a response metadata key (lower case) in which the
	// handler reports the call's actual cost, in a trailer (grpc.SetTrailer)
	// or its header: the interceptor removes it before it is sent and
	// settles the call's cost of 1 with it, the excess post-charged
	// (counted even past the quota), a smaller cost refunded. A value that
	// is no non-negative integer is removed and ignored. "" reads nothing.
	CostKey string
}

// Limiter holds the interceptors of one rule.
type Limiter struct {
	rule    *engine.Compiled
	key     KeyFunc
	fields  engine.Fields
	costKey string
}

// New returns a Limiter, or an error when cfg has no Rule.
func New(cfg Config) (*Limiter, error) {
	if cfg.Rule == nil {
		return nil, errors.New("grpclimit: no rule")
	}
	if cfg.Key == nil {
		cfg.Key = ByPeer(nil)
	}
	return &Limiter{rule: cfg.Rule, key: cfg.Key, fields: cfg.Fields, costKey: strings.ToLower(cfg.CostKey)}, nil
}

// Unary is the unary server interceptor.
func (l *Limiter) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		out, err := l.decide(ctx, info.FullMethod, func(md metadata.MD) error { return grpc.SetHeader(ctx, md) })
		if err != nil {
			return nil, err
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

// decide runs the rule for one call and sets its fields with setHeader.
// The error is the status a refused call ends with.
func (l *Limiter) decide(ctx context.Context, method string, setHeader func(metadata.MD) error) (*engine.Outcome, error) {
	key, err := l.key(ctx, method)
	if err != nil {
		if _, ok := status.FromError(err); ok {
			return nil, err
		}
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	out := l.rule.Decide(ctx, engine.Request{Key: key, Cost: floodgate.Cost{Requests: 1}})
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
	return nil, refusal(&out)
}

// refusal is the status of a call the engine did not admit.
func refusal(out *engine.Outcome) error {
	switch out.Verdict {
	case engine.Unavailable:
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
