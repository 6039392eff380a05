package server

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"

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

// WithSpanExporter makes tracing.enabled export to exp instead of OTLP
// (tests and benchmarks: the provider and sampler are the daemon's own).
func WithSpanExporter(exp sdktrace.SpanExporter) Option {
	return func(s *Server) { s.spanExp = exp }
}

// setupTracing builds the OTLP tracer provider tracing.enabled asks for;
// nil, nil when tracing is off and no provider was given.
func (s *Server) setupTracing(cfg *config.Config) (engine.Tracer, error) {
	t := cfg.Tracing
	if s.tp == nil && !t.Enabled {
		return nil, nil
	}
	if s.tp == nil {
		exp := s.spanExp
		if exp == nil {
			var err error
			if exp, err = otlptracehttp.New(context.Background()); err != nil {
				return nil, fmt.Errorf("server: tracing: %w", err)
			}
		}
		ratio, ok, err := rootRatio(t.SampleRatio)
		if err != nil {
			return nil, err
		}
		opts := []sdktrace.TracerProviderOption{sdktrace.WithBatcher(exp), sdktrace.WithResource(resource.Default())}
		if ok {
			// Floodgate draws the roots itself (decisionTracer.Start), so
			// the SDK keeps every span it is asked for and follows parents.
			opts = append(opts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())))
		}
		tp := sdktrace.NewTracerProvider(opts...) // otherwise: OTEL_TRACES_SAMPLER's sampler
		s.closeFns = append(s.closeFns, func() error { return tp.Shutdown(context.Background()) })
		s.tp = tp
		return decisionTracer{t: tp.Tracer(tracerName), ratio: ratio, draws: ok}, nil
	}
	return decisionTracer{t: s.tp.Tracer(tracerName)}, nil // a given provider samples alone
}

const tracerName = "github.com/floodgate/floodgate"

// rootRatio is the share of the traces starting at Floodgate to sample,
// when the sampler is parent based: tracing.sample_ratio, else
// OTEL_TRACES_SAMPLER's parentbased_traceidratio (its _ARG, default 1),
// parentbased_always_on (the default) or parentbased_always_off. ok is
// false for the spec's other samplers (always_on, traceidratio, ...),
// which ignore a parent's flag: the SDK then decides every span itself.
func rootRatio(configured *float64) (ratio float64, ok bool, err error) {
	if r := configured; r != nil {
		if *r < 0 || *r > 1 {
			return 0, false, fmt.Errorf("server: tracing.sample_ratio is %v: want 0 to 1", *r)
		}
		return *r, true, nil
	}
	switch strings.TrimSpace(os.Getenv("OTEL_TRACES_SAMPLER")) {
	case "", "parentbased_always_on":
		return 1, true, nil
	case "parentbased_always_off":
		return 0, true, nil
	case "parentbased_traceidratio":
		r, err := strconv.ParseFloat(strings.TrimSpace(os.Getenv("OTEL_TRACES_SAMPLER_ARG")), 64)
		if err != nil || r < 0 || r > 1 {
			r = 1 // as the SDK reads a missing or invalid argument
		}
		return r, true, nil
	}
	return 0, false, nil
}

// traced continues the caller's trace (W3C traceparent, tracestate) in
// the request's context, so that decision spans are its children. A
// request without traceparent has no trace to continue (tracestate alone
// is ignored, as W3C Trace Context says): it goes on as it came.
func (s *Server) traced(h http.Handler) http.Handler {
	if s.tp == nil {
		return h
	}
	prop := propagation.TraceContext{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := r.Header["Traceparent"]; !ok {
			h.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r.WithContext(prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))))
	})
}

// decisionTracer starts a span per decision, "floodgate.decision", with
// attributes named after the RateLimit header fields' parameters
// (draft-ietf-httpapi-ratelimit-headers): the policy that the response
// speaks of, its quota (q) and window (w, seconds), remaining (r) and
// reset (t, seconds), and the decision.
//
// With draws, it samples parent based before asking the SDK for a span: a
// decision under a caller's sampled span is traced, one under an unsampled
// span is not, and one with no parent is with probability ratio. An
// unsampled decision then costs a context lookup and a random draw; the
// SDK's Start (IDs, a span, a context) would cost more than the decision's
// own work around it.
type decisionTracer struct {
	t     trace.Tracer
	ratio float64
	draws bool
}

func (d decisionTracer) Start(ctx context.Context, rule string) (context.Context, func(*engine.Outcome)) {
	if d.draws {
		if parent := trace.SpanContextFromContext(ctx); parent.IsValid() {
			if !parent.IsSampled() {
				return ctx, nil
			}
		} else if rand.Float64() >= d.ratio {
			return ctx, nil
		}
	}
	sctx, span := d.t.Start(ctx, "floodgate.decision")
	if !span.IsRecording() {
		// Not sampled: nothing to record, so no attributes and no
		// closure are built, and the decision keeps the caller's context.
		return ctx, nil
	}
	span.SetAttributes(attribute.String("floodgate.rule", rule))
	return sctx, func(o *engine.Outcome) {
		span.SetAttributes(outcomeAttributes(o)...)
		switch {
		case o.CallerEnded():
			span.SetStatus(codes.Error, "the caller's context ended: "+o.Err.Error())
		case o.Verdict == engine.Unavailable:
			span.SetStatus(codes.Error, "rate-limit store unavailable")
		}
		span.End()
	}
}

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
