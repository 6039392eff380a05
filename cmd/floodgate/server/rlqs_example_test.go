package server

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rate_limit_quota/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"gopkg.in/yaml.v3"

	"github.com/floodgate/floodgate/cmd/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/rlqs/rlqsclient"
)

// TestRLQSExample: docs/RLQS.md's two files are examples/rlqs' as they
// are; Envoy's bootstrap decodes into go-control-plane's types and passes
// their validation, the filter's config included; and the daemon on
// floodgate.yaml serves the reference client configured as that filter:
// the bucket id its builder makes gets a lease of its tenant's quota.
func TestRLQSExample(t *testing.T) {
	envoyYAML := read(t, "../../../examples/rlqs/envoy.yaml")
	fgYAML := read(t, "../../../examples/rlqs/floodgate.yaml")
	doc := read(t, "../../../docs/RLQS.md")
	for _, f := range []string{envoyYAML, fgYAML} {
		if !strings.Contains(doc, "```yaml\n"+f+"```\n") {
			t.Errorf("docs/RLQS.md does not show this file as it is:\n%s", f)
		}
	}
	filter, bucket := envoyFilter(t, envoyYAML)

	y := strings.Replace(fgYAML, "listen: 127.0.0.1:8084", "listen: 127.0.0.1:0", 1)
	if y == fgYAML || !strings.Contains(envoyYAML, "port_value: 8084") {
		t.Fatal("floodgate.yaml's listener and envoy.yaml's floodgate_rlqs cluster must name port 8084")
	}
	f := start(t, y, WithStore(testkit.Memory(t), nil))
	if got := f.srv.start.RLQS.Interval.D(); got != bucket.ReportingInterval.AsDuration() {
		t.Fatalf("rlqs.interval %v, reporting_interval %v: they must agree", got, bucket.ReportingInterval.AsDuration())
	}
	conn, err := grpc.NewClient(f.srv.Addr(FaceRLQS), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	exp := bucket.ExpiredAssignmentBehavior
	c, err := rlqsclient.New(conn, rlqsclient.Settings{
		Domain: filter.Domain, Interval: bucket.ReportingInterval.AsDuration(),
		NoAssignment: bucket.NoAssignmentBehavior.GetFallbackRateLimit(),
		Expired:      &rlqsclient.Expired{Timeout: exp.ExpiredAssignmentBehaviorTimeout.AsDuration(), Fallback: exp.GetFallbackRateLimit()},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The id Envoy builds for a request with x-tenant: tenant-a.
	id := map[string]string{}
	for k, v := range bucket.BucketIdBuilder.BucketIdBuilder {
		id[k] = v.GetStringValue()
		if v.GetCustomValue() != nil {
			id[k] = "tenant-a"
		}
	}
	if id["name"] != "api" || id["tenant"] != "tenant-a" {
		t.Fatalf("bucket id %v", id)
	}
	c.Allow(id)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	// The first lease: an even part of per-tenant's 1,000/s for one
	// interval, ⌈125 × 1.25⌉ + 1.
	if st, s := c.State(id); st != rlqsclient.Active || s.GetTokenBucket().GetMaxTokens() != 158 {
		t.Fatalf("state %v, strategy %v: want a lease of 158 tokens", st, s)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// envoyFilter decodes an Envoy bootstrap as Envoy reads it (YAML as
// proto3 JSON, Any resolved by type URL), validates it with
// go-control-plane's generated rules, and returns its rate_limit_quota
// filter and the settings of its first bucket matcher.
func envoyFilter(t *testing.T, y string) (*rlqsv3.RateLimitQuotaFilterConfig, *rlqsv3.RateLimitQuotaBucketSettings) {
	t.Helper()
	var tree any
	if err := yaml.Unmarshal([]byte(y), &tree); err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(tree)
	if err != nil {
		t.Fatal(err)
	}
	var boot bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(js, &boot); err != nil {
		t.Fatal(err)
	}
	var hcm hcmv3.HttpConnectionManager
	var filter rlqsv3.RateLimitQuotaFilterConfig
	var bucket rlqsv3.RateLimitQuotaBucketSettings
	unpack(t, boot.StaticResources.Listeners[0].FilterChains[0].Filters[0].GetTypedConfig(), &hcm)
	unpack(t, hcm.HttpFilters[0].GetTypedConfig(), &filter)
	unpack(t, filter.BucketMatchers.GetMatcherList().Matchers[0].OnMatch.GetAction().GetTypedConfig(), &bucket)
	for _, m := range []interface{ ValidateAll() error }{&boot, &hcm, &filter, &bucket} {
		if err := m.ValidateAll(); err != nil {
			t.Fatal(err)
		}
	}
	return &filter, &bucket
}

func unpack(t *testing.T, a interface{ UnmarshalTo(proto.Message) error }, m proto.Message) {
	t.Helper()
	if err := a.UnmarshalTo(m); err != nil {
		t.Fatal(err)
	}
}
