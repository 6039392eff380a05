package server

import (
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/floodgate/floodgate/cmd/floodgate/internal/testkit"
)

// TestTracingSpanPerDecision: with a tracer provider (the SDK's, its
// in-memory exporter), every door's decision is one "floodgate.decision"
// span, a child of the caller's W3C traceparent, carrying the rule, the
// decision and the RateLimit fields' values.
func TestTracingSpanPerDecision(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	f := start(t, strings.Replace(baseConfig, `trusted_proxies: ["10.0.0.0/8"]`, `trusted_proxies: ["127.0.0.1"]`, 1), WithTracerProvider(tp))
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for range 4 {
		testkit.Do(t, "POST", f.url(FaceGateway, "/login"), "", "traceparent", parent)
	}
	testkit.Do(t, "GET", f.url(FaceForwardAuth, "/v1/auth"), "", "X-Forwarded-Uri", "/api/x", "X-Forwarded-Method", "GET", "X-API-Key", "k1", "traceparent", parent)
	check(t, f, `{"key":"c1","rule":"api"}`)
	spans := exp.GetSpans()
	if len(spans) != 6 {
		t.Fatalf("%d spans, want 6 (4 gateway, 1 forward-auth, 1 API)", len(spans))
	}
	attrs := func(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
		m := map[attribute.Key]attribute.Value{}
		for _, kv := range s.Attributes {
			m[kv.Key] = kv.Value
		}
		return m
	}
	for i, s := range spans[:5] {
		if s.Name != "floodgate.decision" || s.Parent.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || s.Parent.SpanID().String() != "00f067aa0ba902b7" {
			t.Errorf("span %d: %s, parent %v", i, s.Name, s.Parent)
		}
	}
	last := attrs(spans[3]) // the 4th login: denied
	if last["floodgate.rule"].AsString() != "login" || last["ratelimit.decision"].AsString() != "denied" ||
		last["ratelimit.policy"].AsString() != "login" || last["ratelimit.quota"].AsInt64() != 3 ||
		last["ratelimit.window"].AsFloat64() != 3600 || last["ratelimit.remaining"].AsInt64() != 0 || last["ratelimit.retry_after"].AsFloat64() <= 0 {
		t.Errorf("denied login span: %v", spans[3].Attributes)
	}
	first := attrs(spans[0])
	if first["ratelimit.decision"].AsString() != "allowed" || first["ratelimit.remaining"].AsInt64() != 2 {
		t.Errorf("first login span: %v", spans[0].Attributes)
	}
	if a := attrs(spans[4]); a["floodgate.rule"].AsString() != "api" {
		t.Errorf("forward-auth span: %v", spans[4].Attributes)
	}
	if a := attrs(spans[5]); a["floodgate.rule"].AsString() != "api" || spans[5].Parent.IsValid() {
		t.Errorf("API span: %v, parent %v", spans[5].Attributes, spans[5].Parent)
	}
}
