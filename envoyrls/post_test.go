package envoyrls

import (
	"context"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	rlconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"gopkg.in/yaml.v3"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/redisstore"
)

// The tests of this file send what Envoy sends for a cost known only at
// the end of a stream (docs/ENVOY.md, "Costs reported when the stream
// ends"): a ShouldRateLimit before the request whose descriptors carry
// hits_addend 0 (a check), and one more when the stream ends, from the
// same rate limit actions, carrying the cost (apply_on_stream_done).

// llm asks domain "llm" of testdata/post.
func (f *fixture) llm(t *testing.T, ds ...*commonv3.RateLimitDescriptor) *rlsv3.RateLimitResponse {
	t.Helper()
	resp, err := f.client.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "llm", Descriptors: ds})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func (f *fixture) advance(d time.Duration) { f.now.Add(int64(d)) }

func TestPostChargeCountsPastTheLimit(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		f.load(t, "testdata/post")
		alice := func(n uint64) *commonv3.RateLimitDescriptor { return addend(desc("user=alice"), n) }
		expect(t, f.llm(t, alice(0)), ok, ok, 1000)     // the check before the request
		expect(t, f.llm(t, alice(1200)), over, over, 0) // its answer: 1,200 tokens, counted all the same
		expect(t, f.llm(t, alice(0)), over, over, 0)    // in debt: the next check is refused
		expect(t, f.llm(t, alice(1)), over, over, 0)    // and a cost is still counted
		f.advance(50 * time.Minute)                     // a new hour: the debt ends with the window
		expect(t, f.llm(t, alice(0)), ok, ok, 1000)
		expect(t, f.llm(t, alice(998)), ok, ok, 2) // a cost that fits is spent as always
		expect(t, f.llm(t, alice(0)), ok, ok, 2)
		expect(t, f.llm(t, alice(5)), over, over, 0) // 3 past the limit
		expect(t, f.llm(t, alice(0)), over, over, 0)
		expect(t, f.llm(t, alice(0)), over, over, 0) // a check spends nothing, even in debt
		f.advance(time.Hour)
		expect(t, f.llm(t, alice(1000)), ok, ok, 0)
		// Not one unit left: a check is refused (envoyproxy/ratelimit
		// answers OK at the limit exactly), since what it admits is
		// charged in full.
		expect(t, f.llm(t, alice(0)), over, over, 0)
	})
}

// TestPostChargeFailToLocal: with the store down, fail-to-local counts
// post-charges on the local store and refuses past the limit, as it does
// for limits that are not post-charged.
func TestPostChargeFailToLocal(t *testing.T) {
	down, err := redisstore.New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1}), redisstore.WithTimeout(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(engine.Config{Store: down, Local: testkit.Memory(t)})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Load("testdata/post")
	if err != nil {
		t.Fatal(err)
	}
	rules, err := Compile(eng, cfg, floodgate.FailToLocal)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := NewService(func() *Rules { return rules }, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []rlsv3.RateLimitResponse_Code
	for range 3 {
		resp, err := svc.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "llm", Descriptors: []*commonv3.RateLimitDescriptor{addend(desc("user=alice"), 400)}})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, resp.OverallCode)
	}
	if want := []rlsv3.RateLimitResponse_Code{ok, ok, over}; !reflect.DeepEqual(got, want) {
		t.Fatalf("costs of 400 on a local limit of 1,000 with the store down: %v, want %v", got, want)
	}
}

func TestPostChargeRepaidByRefill(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		f.load(t, "testdata/post")
		bucket := func(n uint64) *commonv3.RateLimitDescriptor { return addend(desc("bucket=b"), n) }
		expect(t, f.llm(t, bucket(900)), over, over, 0) // 600 a minute: 300 in debt
		f.advance(29 * time.Second)                     // 290 refilled: 10 still owed
		expect(t, f.llm(t, bucket(0)), over, over, 0)
		f.advance(2 * time.Second) // 310 refilled: 10 free
		expect(t, f.llm(t, bucket(0)), ok, ok, 10)
		// A cost larger than the whole bucket is counted too (an
		// ordinary limit answers it OVER_LIMIT and spends nothing).
		expect(t, f.llm(t, bucket(1000)), over, over, 0)
		f.advance(time.Minute + 38*time.Second) // 990 past the capacity: 980 refilled
		expect(t, f.llm(t, bucket(0)), over, over, 0)
		f.advance(3 * time.Second) // 1,010 refilled
		expect(t, f.llm(t, bucket(0)), ok, ok, 20)
	})
}

func TestPostChargeBesideOtherLimits(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		f.load(t, "testdata/post")
		// Shadow mode: counted, never refused.
		expect(t, f.llm(t, addend(desc("shadowed=s"), 150)), ok, ok, 0)
		expect(t, f.llm(t, addend(desc("shadowed=s"), 0)), ok, ok, 0)
		// A post-charged check that refuses keeps the request's other
		// limits unspent (all or nothing).
		expect(t, f.llm(t, addend(desc("user=bob"), 1001)), over, over, 0)
		expect(t, f.llm(t, addend(desc("user=bob"), 0), desc("plain=p")), over, over, 0, ok, 3)
		expect(t, f.llm(t, desc("plain=p")), ok, ok, 2)
		// So does a post-charged cost past the limit.
		expect(t, f.llm(t, addend(desc("user=bob"), 5), desc("plain=r")), over, over, 0, ok, 3)
		expect(t, f.llm(t, desc("plain=r")), ok, ok, 2)
		// A cost reported at the stream's end is counted even when
		// another limit of the call refuses; that one spends nothing.
		expect(t, f.llm(t, desc("plain=p")), ok, ok, 1)
		expect(t, f.llm(t, desc("plain=p")), ok, ok, 0)
		expect(t, f.llm(t, addend(desc("user=erin"), 10), desc("plain=p")), over, ok, 990, over, 0)
		expect(t, f.llm(t, addend(desc("user=erin"), 0)), ok, ok, 990)
		// An ordinary limit is unchanged: a cost above what is left is
		// refused and not counted.
		expect(t, f.llm(t, addend(desc("plain=q"), 2)), ok, ok, 1)
		expect(t, f.llm(t, addend(desc("plain=q"), 2)), over, over, 0)
		expect(t, f.llm(t, addend(desc("plain=q"), 1)), ok, ok, 0)
	})
}

// envoyGateway is the RateLimitConfig Envoy Gateway's xDS translator
// builds for docs/USAGE.md's BackendTrafficPolicy: domain the listener
// (namespace/gateway/listener), the route's generic key, and one
// descriptor per rule keyed by the x-user-id header (rule-<i>-match-0).
func envoyGateway() *rlconfv3.RateLimitConfig {
	rule := func(i string, perUnit uint32, unit rlconfv3.RateLimitUnit) *rlconfv3.RateLimitDescriptor {
		return &rlconfv3.RateLimitDescriptor{Key: "rule-" + i + "-match-0", RateLimit: &rlconfv3.RateLimitPolicy{RequestsPerUnit: perUnit, Unit: unit}}
	}
	route := "httproute/default/llm/rule/0/match/0/*"
	return &rlconfv3.RateLimitConfig{Name: "default/eg/http", Domain: "default/eg/http", Descriptors: []*rlconfv3.RateLimitDescriptor{
		{Key: route, Value: route, Descriptors: []*rlconfv3.RateLimitDescriptor{
			rule("0", 20_000, rlconfv3.RateLimitUnit_MINUTE),
			rule("1", 1_000_000, rlconfv3.RateLimitUnit_DAY),
		}},
	}}
}

// TestEnvoyGatewayTokens loads docs/USAGE.md's Envoy Gateway rules
// through FromProto, post-charged by envoy_rls.post_charge (Config.PostCharge),
// and sends the calls Envoy makes for them.
func TestEnvoyGatewayTokens(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		d, err := FromProto(envoyGateway())
		if err != nil {
			t.Fatal(err)
		}
		r, err := Compile(f.eng, &Config{Domains: []*Domain{d}, PostCharge: []string{"default/eg/http"}}, floodgate.FailClosed)
		if err != nil {
			t.Fatal(err)
		}
		f.rules.Store(r)
		call := func(user string, hits uint64) *rlsv3.RateLimitResponse {
			t.Helper()
			route := "httproute/default/llm/rule/0/match/0/*"
			ds := make([]*commonv3.RateLimitDescriptor, 2)
			for i := range ds {
				ds[i] = addend(desc(route+"="+route, "rule-"+string(rune('0'+i))+"-match-0="+user), hits)
			}
			resp, err := f.client.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "default/eg/http", Descriptors: ds})
			if err != nil {
				t.Fatal(err)
			}
			return resp
		}
		expect(t, call("alice", 0), ok, ok, 20_000, ok, 1_000_000)   // cost.request.number: 0
		expect(t, call("alice", 4_000), ok, ok, 16_000, ok, 996_000) // cost.response: the answer's tokens
		expect(t, call("alice", 30_000), over, over, 0, ok, 966_000) // counted past the minute's 16,000
		expect(t, call("alice", 0), over, over, 0, ok, 966_000)      // refused until repaid
		expect(t, call("bob", 0), ok, ok, 20_000, ok, 1_000_000)     // another user's budget
		f.advance(50 * time.Second)                                  // still this minute: 14,000 owed
		expect(t, call("alice", 0), over, over, 0, ok, 966_000)
		f.advance(10 * time.Second) // the minute's window ends with its debt
		expect(t, call("alice", 0), ok, ok, 20_000, ok, 966_000)
	})
}

// usageBlock is the ```yaml block of docs/USAGE.md that starts with head.
func usageBlock(t *testing.T, head string) string {
	t.Helper()
	doc, err := os.ReadFile("../docs/USAGE.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	start := strings.Index(text, "```yaml\n"+head)
	if start < 0 {
		t.Fatalf("docs/USAGE.md has no yaml block starting %q", head)
	}
	block := text[start+len("```yaml\n"):]
	return block[:strings.Index(block, "```")]
}

// TestUsageDocEnvoyGateway: docs/USAGE.md's file form of the rules is
// what FromProto makes of envoyGateway(), post_charge aside, and its
// BackendTrafficPolicy has envoyGateway()'s limits, each checked at the
// request (cost 0) and charged from the response's metadata.
func TestUsageDocEnvoyGateway(t *testing.T) {
	var btp struct {
		Spec struct {
			RateLimit struct {
				Global struct {
					Rules []struct {
						Limit struct {
							Requests uint32
							Unit     string
						}
						Cost struct {
							Request struct {
								From   string
								Number *int
							}
							Response struct {
								From     string
								Metadata struct{ Namespace, Key string }
							}
						}
					}
				}
			} `yaml:"rateLimit"`
		}
	}
	dec := yaml.NewDecoder(strings.NewReader(usageBlock(t, "apiVersion: aigateway.envoyproxy.io/v1alpha1\nkind: AIGatewayRoute\n")))
	for len(btp.Spec.RateLimit.Global.Rules) == 0 {
		if err := dec.Decode(&btp); err != nil {
			t.Fatalf("docs/USAGE.md's BackendTrafficPolicy: %v", err)
		}
	}
	rules := btp.Spec.RateLimit.Global.Rules
	limits := envoyGateway().Descriptors[0].Descriptors
	if len(rules) != len(limits) {
		t.Fatalf("%d rules in the BackendTrafficPolicy, %d limits in envoyGateway()", len(rules), len(limits))
	}
	for i, r := range rules {
		p := limits[i].RateLimit
		if r.Limit.Requests != p.RequestsPerUnit || !strings.EqualFold(r.Limit.Unit, p.Unit.String()) ||
			r.Cost.Request.From != "Number" || r.Cost.Request.Number == nil || *r.Cost.Request.Number != 0 ||
			r.Cost.Response.From != "Metadata" || r.Cost.Response.Metadata.Key != "llm_total_token" {
			t.Errorf("rule %d: %+v, want %d per %v", i, r, p.RequestsPerUnit, p.Unit)
		}
	}
	got, err := Parse("USAGE.md", []byte(usageBlock(t, "domain: default/eg/http\n")))
	if err != nil {
		t.Fatal(err)
	}
	want, err := FromProto(envoyGateway())
	if err != nil {
		t.Fatal(err)
	}
	got.File = want.File
	if !reflect.DeepEqual(got, want) {
		t.Errorf("docs/USAGE.md's rules differ from Envoy Gateway's:\n%+v\n%+v", got.Descriptors[0], want.Descriptors[0])
	}
}
