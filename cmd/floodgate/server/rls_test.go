package server

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/floodgate/floodgate/cmd/floodgate/internal/testkit"
)

const rlsConfig = `
envoy_rls: {listen: "127.0.0.1:0", config: %q, headers: draft11}
admin: {listen: "127.0.0.1:0"}
log: {level: error}
`

// TestEnvoyRLSFace: the daemon serves the rate limit service, health and
// reflection on envoy_rls.listen, and a reload brings new descriptors.
func TestEnvoyRLSFace(t *testing.T) {
	dir := t.TempDir()
	limits := filepath.Join(dir, "limits.yaml")
	write := func(quota int) {
		y := fmt.Sprintf("domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: day, requests_per_unit: %d}\n", quota)
		if err := os.WriteFile(limits, []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(2)
	f := start(t, fmt.Sprintf(rlsConfig, limits))
	conn, err := grpc.NewClient(f.srv.Addr(FaceEnvoyRLS), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rls := rlsv3.NewRateLimitServiceClient(conn)
	ask := func() *rlsv3.RateLimitResponse {
		resp, err := rls.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*commonv3.RateLimitDescriptor{
			{Entries: []*commonv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "192.0.2.1"}}}}})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for _, want := range []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT} {
		if resp := ask(); resp.OverallCode != want {
			t.Fatalf("%v, want %v", resp, want)
		}
	}
	if resp := ask(); len(resp.ResponseHeadersToAdd) != 2 {
		t.Errorf("headers: draft11 wants RateLimit and RateLimit-Policy, got %v", resp.ResponseHeadersToAdd)
	}
	hc, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: rlsService})
	if err != nil || hc.Status != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health: %v %v", hc, err)
	}
	stream, err := reflectpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stream.Send(&reflectpb.ServerReflectionRequest{MessageRequest: &reflectpb.ServerReflectionRequest_ListServices{}})
	r, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range r.GetListServicesResponse().GetService() {
		found = found || s.Name == rlsService
	}
	if !found {
		t.Errorf("reflection lists %v", r.GetListServicesResponse().GetService())
	}
	write(5)
	if err := f.srv.Reload(); err != nil {
		t.Fatal(err)
	}
	if resp := ask(); resp.OverallCode != rlsv3.RateLimitResponse_OK || resp.Statuses[0].LimitRemaining != 2 {
		t.Errorf("after reload to 5 (2 spent before it; refusals spend nothing): %v", resp)
	}
}

// TestEnvoyRLSDynamicMetadata: envoy_rls.dynamic_metadata puts
// envoyproxy/ratelimit's dynamic_metadata in the daemon's answers, with
// the quota-mode descriptors over their limit.
func TestEnvoyRLSDynamicMetadata(t *testing.T) {
	limits := filepath.Join(t.TempDir(), "limits.yaml")
	y := "domain: ai\ndescriptors:\n  - key: tokens\n    quota_mode: true\n    rate_limit: {unit: hour, requests_per_unit: 1}\n"
	if err := os.WriteFile(limits, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	f := start(t, fmt.Sprintf("envoy_rls: {listen: \"127.0.0.1:0\", config: %q, dynamic_metadata: true}\nadmin: {listen: \"127.0.0.1:0\"}\nlog: {level: error}\n", limits))
	rls := rlsClient(t, f.srv.Addr(FaceEnvoyRLS))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := &rlsv3.RateLimitRequest{Domain: "ai", Descriptors: []*commonv3.RateLimitDescriptor{
		{Entries: []*commonv3.RateLimitDescriptor_Entry{{Key: "tokens", Value: "team-a"}}}}}
	for i, want := range []int{0, 1} { // violations: none, then descriptor 0
		resp, err := rls.ShouldRateLimit(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		md := resp.GetDynamicMetadata().AsMap()
		v, _ := md["quotaModeViolations"].([]any)
		if resp.OverallCode != rlsv3.RateLimitResponse_OK || md["domain"] != "ai" || md["quotaModeEnabled"] != true || len(v) != want {
			t.Errorf("request %d: %v, metadata %v", i, resp.OverallCode, md)
		}
	}
}

// TestEnvoyRLSPostCharge: envoy_rls.post_charge makes every limit of the
// named domain count the cost Envoy reports when a stream ends, past
// what is left; a domain not named refuses and counts nothing. A named
// domain no rule has is warned of, by name, and does not stop the start.
func TestEnvoyRLSPostCharge(t *testing.T) {
	limits := filepath.Join(t.TempDir(), "limits.yaml")
	y := "domain: %s\ndescriptors:\n  - key: user\n    rate_limit: {unit: day, requests_per_unit: 100}\n"
	if err := os.WriteFile(limits, []byte(fmt.Sprintf(y, "ai")), 0o644); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(filepath.Dir(limits), "other.yaml")
	if err := os.WriteFile(other, []byte(fmt.Sprintf(y, "web")), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs testkit.Buffer
	f := start(t, fmt.Sprintf("envoy_rls: {listen: \"127.0.0.1:0\", config: %q, post_charge: [ai, chat]}\nadmin: {listen: \"127.0.0.1:0\"}\nlog: {level: error}\n", filepath.Dir(limits)),
		WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if l := logs.String(); strings.Count(l, "envoy_rls.post_charge names a domain") != 1 || !strings.Contains(l, "domain=chat") {
		t.Errorf("want one warning, of domain chat; logs:\n%s", l)
	}
	rls := rlsClient(t, f.srv.Addr(FaceEnvoyRLS))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ask := func(domain string, hits uint64) (rlsv3.RateLimitResponse_Code, uint32) {
		d := &commonv3.RateLimitDescriptor{Entries: []*commonv3.RateLimitDescriptor_Entry{{Key: "user", Value: "u1"}}, HitsAddend: wrapperspb.UInt64(hits)}
		resp, err := rls.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: domain, Descriptors: []*commonv3.RateLimitDescriptor{d}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.OverallCode, resp.Statuses[0].LimitRemaining
	}
	for _, c := range []struct {
		domain string
		hits   uint64
		code   rlsv3.RateLimitResponse_Code
		left   uint32
	}{
		{"ai", 60, rlsv3.RateLimitResponse_OK, 40},
		{"ai", 70, rlsv3.RateLimitResponse_OVER_LIMIT, 0}, // counted: 30 past the limit
		{"ai", 0, rlsv3.RateLimitResponse_OVER_LIMIT, 0},  // the next check is refused
		{"web", 60, rlsv3.RateLimitResponse_OK, 40},
		{"web", 70, rlsv3.RateLimitResponse_OVER_LIMIT, 0}, // refused, not counted
		{"web", 0, rlsv3.RateLimitResponse_OK, 40},
	} {
		if code, left := ask(c.domain, c.hits); code != c.code || left != c.left {
			t.Errorf("%s, hits %d: %v, %d left; want %v, %d", c.domain, c.hits, code, left, c.code, c.left)
		}
	}
}
