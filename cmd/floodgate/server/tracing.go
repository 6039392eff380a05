package server

import (
	"context"
	"fmt"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/floodgate/floodgate/cmd/floodgate/config"
	"github.com/floodgate/floodgate/engine"
)

// WithTracerProvider traces decisions with tp whatever tracing.enabled
// says (tests: an SDK provider with an in-memory exporter).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(s *Server) { s.tp = tp }
}

// setupTracing builds the OTLP tracer provider tracing.enabled asks for;
// nil, nil when tracing is off and no provider was given.
func (s *Server) setupTracing(cfg *config.Config) (engine.Tracer, error) {
	t := cfg.Tracing
	if s.tp == nil && !t.Enabled {
		return nil, nil
	}
	if s.tp == nil {
		exp, err := otlptracehttp.New(context.Background())
		if err != nil {
			return nil, fmt.Errorf("server: tracing: %w", err)
		}
		opts := []sdktrace.TracerProviderOption{sdktrace.WithBatcher(exp), sdktrace.WithResource(resource.Default())}
		if r := t.SampleRatio; r != nil {
			if *r < 0 || *r > 1 {
				return nil, fmt.Errorf("server: tracing.sample_ratio is %v: want 0 to 1", *r)
			}
			opts = append(opts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(*r))))
		}
		tp := sdktrace.NewTracerProvider(opts...) // without a sampler: OTEL_TRACES_SAMPLER
		s.closeFns = append(s.closeFns, func() error { return tp.Shutdown(context.Background()) })
		s.tp = tp
	}
	return decisionTracer{s.tp.Tracer("github.com/floodgate/floodgate")}, nil
}

// traced continues the caller's trace (W3C traceparent, tracestate) in
// the request's context, so that decision spans are its children.
func (s *Server) traced(h http.Handler) http.Handler {
	if s.tp == nil {
		return h
	}
	prop := propagation.TraceContext{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))))
	})
}

// decisionTracer starts a span per decision, "floodgate.decision", with
// attributes named after the RateLimit header fields' parameters
// (draft-ietf-httpapi-ratelimit-headers): the policy that the response
// speaks of, its quota (q) and window (w, seconds), remaining (r) and
// reset (t, seconds), and the decision.
type decisionTracer struct{ t trace.Tracer }

func (d decisionTracer) Start(ctx context.Context, rule string) (context.Context, func(*engine.Outcome)) {
	sctx, span := d.t.Start(ctx, "floodgate.decision")
	if !span.IsRecording() {
		// Not sampled: nothing to record, so no attributes and no
		// closure are built, and the decision keeps the caller's context.
		return ctx, endNothing
	}
	span.SetAttributes(attribute.String("floodgate.rule", rule))
	return sctx, func(o *engine.Outcome) {
		span.SetAttributes(outcomeAttributes(o)...)
		if o.Verdict == engine.Unavailable {
			span.SetStatus(codes.Error, "rate-limit store unavailable")
		}
		span.End()
	}
}

func endNothing(*engine.Outcome) {}

func outcomeAttributes(o *engine.Outcome) []attribute.KeyValue {
	a := []attribute.KeyValue{
		attribute.String("ratelimit.decision", o.Verdict.String()),
		attribute.Bool("floodgate.degraded", o.Degraded),
	}
	if o.Summary >= 0 {
		it := o.Item(o.Summary)
		a = append(a,
			attribute.String("ratelimit.policy", it.Name),
			attribute.Int64("ratelimit.quota", it.Quota),
			attribute.Float64("ratelimit.window", it.Window.Seconds()),
			attribute.Int64("ratelimit.remaining", it.Remaining),
			attribute.Float64("ratelimit.reset", it.ResetAfter.Seconds()))
	}
	if o.RetryAfter > 0 {
		a = append(a, attribute.Float64("ratelimit.retry_after", o.RetryAfter.Seconds()))
	}
	return a
}
