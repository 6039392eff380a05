package server

import (
	"context"
	"fmt"
	"slices"
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

// TestTracingParentBased: the daemon's own sampler (tracing.sample_ratio)
// draws the traces that start at Floodgate before any span is made, and
// follows a caller's W3C traceparent otherwise: at ratio 0, only requests
// under a sampled parent are traced; at ratio 1, every request is, except
// those under an unsampled parent.
func TestTracingParentBased(t *testing.T) {
	const (
		sampled   = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		unsampled = "00-5bf92f3577b34da6a3ce929d0e0e4736-10f067aa0ba902b7-00"
	)
	for _, c := range []struct {
		ratio string
		want  []string // the parents of the spans made, "" for a root
	}{
		{"0", []string{"4bf92f3577b34da6a3ce929d0e0e4736"}},
		{"1", []string{"", "4bf92f3577b34da6a3ce929d0e0e4736", ""}},
	} {
		exp := tracetest.NewInMemoryExporter()
		f := start(t, baseConfig+"tracing: {enabled: true, sample_ratio: "+c.ratio+"}\n", WithSpanExporter(exp))
		for i, parent := range []string{"", sampled, unsampled, "-"} {
			h := []string{"traceparent", parent}
			if parent == "" {
				h = nil
			}
			if parent == "-" {
				h = []string{"tracestate", "k=v"} // without traceparent: ignored
			}
			resp, _ := testkit.Do(t, "POST", f.url(FaceAPI, "/v1/check"), fmt.Sprintf(`{"key":"p%d","rule":"api"}`, i), h...)
			if resp.StatusCode != 200 {
				t.Fatalf("ratio %s, check %d: %d", c.ratio, i, resp.StatusCode)
			}
		}
		if err := f.srv.tp.(*sdktrace.TracerProvider).ForceFlush(context.Background()); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, s := range exp.GetSpans() {
			p := ""
			if s.Parent.IsValid() {
				p = s.Parent.TraceID().String()
			}
			got = append(got, p)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("ratio %s: spans with parents %q, want %q", c.ratio, got, c.want)
		}
	}
}

// TestRootRatio: without tracing.sample_ratio, the parent-based samplers
// of OTEL_TRACES_SAMPLER are drawn by Floodgate too; the others are left
// to the SDK.
func TestRootRatio(t *testing.T) {
	half := 0.5
	for _, c := range []struct {
		configured   *float64
		sampler, arg string
		ratio        float64
		ok           bool
	}{
		{configured: &half, sampler: "always_on", ratio: 0.5, ok: true},
		{ratio: 1, ok: true},
		{sampler: "parentbased_always_on", ratio: 1, ok: true},
		{sampler: "parentbased_always_off", ratio: 0, ok: true},
		{sampler: "parentbased_traceidratio", arg: "0.25", ratio: 0.25, ok: true},
		{sampler: "parentbased_traceidratio", arg: "two", ratio: 1, ok: true},
		{sampler: "traceidratio", arg: "0.25"},
		{sampler: "always_on"},
	} {
		t.Setenv("OTEL_TRACES_SAMPLER", c.sampler)
		t.Setenv("OTEL_TRACES_SAMPLER_ARG", c.arg)
		ratio, ok, err := rootRatio(c.configured)
		if err != nil || ratio != c.ratio || ok != c.ok {
			t.Errorf("%q %q: %v %v %v, want %v %v", c.sampler, c.arg, ratio, ok, err, c.ratio, c.ok)
		}
	}
	bad := 1.5
	if _, _, err := rootRatio(&bad); err == nil {
		t.Error("tracing.sample_ratio 1.5 accepted")
	}
}
