package envoyrls

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/redisstore"
)

// The tests of this file hold envoyproxy/ratelimit's answers on
// testdata/limits/parity.yaml (docs/ENVOY.md; scripts/ratelimit-diff.sh
// compares the same cases with the real service). Their clock stands 50
// minutes before the hour's end, so every hourly reset is 50m.

const hourLeft = 50 * time.Minute

func (f *fixture) parity(t *testing.T, hits uint32, ds ...*commonv3.RateLimitDescriptor) *rlsv3.RateLimitResponse {
	t.Helper()
	resp, err := f.client.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "parity", HitsAddend: hits, Descriptors: ds})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// addend is d with its own hits_addend.
func addend(d *commonv3.RateLimitDescriptor, n uint64) *commonv3.RateLimitDescriptor {
	d.HitsAddend = wrapperspb.UInt64(n)
	return d
}

// expectReset checks each status's duration_until_reset; -1 wants none.
func expectReset(t *testing.T, resp *rlsv3.RateLimitResponse, resets ...time.Duration) {
	t.Helper()
	for i, s := range resp.Statuses {
		got := time.Duration(-1)
		if s.DurationUntilReset != nil {
			got = s.DurationUntilReset.AsDuration()
		}
		if got != resets[i] {
			t.Errorf("status %d: duration_until_reset %v, want %v", i, got, resets[i])
		}
	}
}

// nearCacheStore runs fn on Redis with the near cache on.
func nearCacheStore(t *testing.T, fn func(t *testing.T, f *fixture)) {
	f := &fixture{}
	f.now.Store(start.UnixNano())
	c := redis.NewClient(&redis.Options{Addr: testkit.Env(t, "FLOODGATE_TEST_REDIS")})
	t.Cleanup(func() { c.Close() })
	s, err := redisstore.New(c, redisstore.WithClock(f.clock), redisstore.WithNearCache(1000, time.Second),
		redisstore.WithPrefix(fmt.Sprintf("fgrls:%d:", time.Now().UnixNano())), redisstore.WithTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	f.serve(t, s, Options{})
	fn(t, f)
}

// Issue point 1: shadow mode never refuses, whatever the cost.
func TestParityShadowNeverRefuses(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		resp := f.parity(t, 5, desc("shadow=s")) // more than the whole limit of 2
		expect(t, resp, ok, ok, 0)
		expectReset(t, resp, hourLeft)
		expect(t, f.parity(t, 1, desc("shadow=s")), ok, ok, 1)
		expect(t, f.parity(t, 2, desc("shadow=s")), ok, ok, 0) // over: 0 left, as ratelimit says
	})
}

// Issue point 2: a cost above the whole limit is OVER_LIMIT with the
// window's reset, near cache or not.
func TestParityCostAboveLimit(t *testing.T) {
	check := func(t *testing.T, f *fixture) {
		resp := f.parity(t, 4, desc("cost=c"))
		expect(t, resp, over, over, 0)
		expectReset(t, resp, hourLeft)
		for range 3 {
			f.parity(t, 1, desc("cost=c"))
		}
		expect(t, f.parity(t, 1, desc("cost=c")), over, over, 0) // the near cache holds the key now
		resp = f.parity(t, 9, desc("cost=c"))
		expect(t, resp, over, over, 0)
		expectReset(t, resp, hourLeft)
	}
	eachStore(t, check)
	t.Run("near cache", func(t *testing.T) { nearCacheStore(t, check) })
}

// Issue point 3: a descriptor's own hits_addend 0 checks without
// spending; the request's 0 means 1.
func TestParityCheckOnly(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		expect(t, f.parity(t, 0, addend(desc("cost=k"), 0)), ok, ok, 3) // nothing spent
		expect(t, f.parity(t, 3, desc("cost=k")), ok, ok, 0)
		resp := f.parity(t, 0, addend(desc("cost=k"), 0)) // at the limit exactly
		expect(t, resp, ok, ok, 0)
		expectReset(t, resp, hourLeft)
		expect(t, f.parity(t, 0, desc("cost=k")), over, over, 0) // the request's 0 is 1
		resp = f.parity(t, 0, addend(desc("zero=z"), 0))         // requests_per_unit 0, checked
		expect(t, resp, ok, ok, 0)
		if resp.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 0 || resp.Statuses[0].CurrentLimit == nil {
			t.Errorf("current_limit %v", resp.Statuses[0].CurrentLimit)
		}
		expect(t, f.parity(t, 0, desc("zero=z")), over, over, 0)
	})
}

// Issue point 4: beside a refusing descriptor, the others show their
// peeked remaining and reset (nothing of theirs is spent: K3).
func TestParityPeekedRemaining(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		expect(t, f.parity(t, 0, desc("a=x"), desc("b=x")), ok, ok, 0, ok, 1)
		resp := f.parity(t, 0, desc("a=x"), desc("b=x"))
		expect(t, resp, over, over, 0, ok, 1)
		expectReset(t, resp, hourLeft, hourLeft)
		resp = f.parity(t, 0, desc("zero=z"), desc("b=y"))
		expect(t, resp, over, over, 0, ok, 2)
		expectReset(t, resp, time.Hour-10*time.Minute, hourLeft)
	})
}

// Issue point 5: unlimited descriptors are set aside before replaces, and
// limits replacing each other both go.
func TestParityReplaces(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		two := []*commonv3.RateLimitDescriptor{desc("free=x"), desc("plan=x")}
		expect(t, f.parity(t, 0, two...), ok, ok, math.MaxUint32, ok, 1)
		expect(t, f.parity(t, 0, two...), ok, ok, math.MaxUint32, ok, 0)
		expect(t, f.parity(t, 0, two...), over, ok, math.MaxUint32, over, 0)
		for range 3 {
			resp := f.parity(t, 0, desc("m1=x"), desc("m2=x"))
			expect(t, resp, ok, ok, 0, ok, 0)
			if resp.Statuses[0].CurrentLimit != nil || resp.Statuses[1].CurrentLimit != nil {
				t.Errorf("replaced limits answered: %v", resp)
			}
		}
		expect(t, f.parity(t, 0, desc("m1=x")), ok, ok, 0) // alone, it limits
		expect(t, f.parity(t, 0, desc("m1=x")), over, over, 0)
	})
}

// Issue point 8: quota mode never refuses; over, it is OK with 0 left and
// no reset, and it does not stop another descriptor from spending.
func TestParityQuotaMode(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		resp := f.parity(t, 0, desc("quota=q"), desc("b=q"))
		expect(t, resp, ok, ok, 0, ok, 1)
		expectReset(t, resp, hourLeft, hourLeft)
		resp = f.parity(t, 0, desc("quota=q"), desc("b=q"))
		expect(t, resp, ok, ok, 0, ok, 0)
		expectReset(t, resp, -1, hourLeft)
		if resp.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 1 {
			t.Errorf("current_limit %v", resp.Statuses[0].CurrentLimit)
		}
		expect(t, f.parity(t, 0, desc("quota=q"), desc("b=q")), over, ok, 0, over, 0)
	})
}

// Issue point 8: a * inside a value is literal text, as in
// envoyproxy/ratelimit; a trailing * is a prefix of "key_value".
func TestParityWildcards(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		expect(t, f.parity(t, 0, desc("host=www.example.com")), ok, ok, 0)
		expect(t, f.parity(t, 0, desc("host=www.example.com")), ok, ok, 0) // no limit applies
		expect(t, f.parity(t, 0, desc("host=*.example.com")), ok, ok, 0)
		expect(t, f.parity(t, 0, desc("host=*.example.com")), over, over, 0)
		expect(t, f.parity(t, 0, desc("w=axb")), ok, ok, 0)
		expect(t, f.parity(t, 0, desc("w=axb")), ok, ok, 0)
		expect(t, f.parity(t, 0, desc("w=a*b")), ok, ok, 0)
		expect(t, f.parity(t, 0, desc("w=a*b")), over, over, 0)
		// x_y=z1 is named "x_y_z1", which the wildcard "x_y_z*" prefixes.
		expect(t, f.parity(t, 0, desc("x_y=z1")), ok, ok, 0)
		expect(t, f.parity(t, 0, desc("x_y=z1")), over, over, 0)
		expect(t, f.parity(t, 0, desc("x=y_z2")), ok, ok, 0) // its own counter
	})
}

// Issue point 9: a descriptor's own limit replaces the file's, as a limit
// of its own.
func TestParityLimitOverride(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		o := desc("a=o")
		o.Limit = &commonv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 2, Unit: typev3.RateLimitUnit_MINUTE}
		resp := f.parity(t, 0, o)
		expect(t, resp, ok, ok, 1)
		expectReset(t, resp, time.Minute)
		if cl := resp.Statuses[0].CurrentLimit; cl.RequestsPerUnit != 2 || cl.Unit != rlsv3.RateLimitResponse_RateLimit_MINUTE || cl.Name != "" {
			t.Errorf("current_limit %v", cl)
		}
		expect(t, f.parity(t, 0, o), ok, ok, 0)
		expect(t, f.parity(t, 0, o), over, over, 0)
		expect(t, f.parity(t, 0, desc("a=o")), ok, ok, 0) // the file's limit, its own counter
		u := desc("nolimit=o")                            // no descriptor of the file: still limited
		u.Limit = &commonv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_HOUR}
		expect(t, f.parity(t, 0, u), ok, ok, 0)
		expect(t, f.parity(t, 0, u), over, over, 0)
		u.Limit.Unit = 0 // UNKNOWN
		_, err := f.client.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "parity", Descriptors: []*commonv3.RateLimitDescriptor{u}})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("unit UNKNOWN: %v, want InvalidArgument", err)
		}
	})
}

// Issue point 8: envoyproxy/ratelimit's response dynamic metadata.
func TestParityDynamicMetadata(t *testing.T) {
	f := &fixture{}
	f.now.Store(start.UnixNano())
	f.serve(t, testkit.Memory(t), Options{DynamicMetadata: true})
	q := addend(desc("quota=m", "sub=1"), 0)
	q.Limit = &commonv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 5, Unit: typev3.RateLimitUnit_HOUR}
	const descs = `"descriptors":[{"entries":["quota=m"]},{"entries":["quota=m","sub=1"],"hitsAddend":0,"limit":"requests_per_unit:5 unit:HOUR"}],"domain":"parity","hitsAddend":1`
	for i, want := range []string{
		`{` + descs + `,"quotaModeEnabled":true}`,
		`{` + descs + `,"quotaModeEnabled":true,"quotaModeViolations":[0]}`,
	} {
		resp, err := f.client.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "parity", HitsAddend: 1, Descriptors: []*commonv3.RateLimitDescriptor{desc("quota=m"), q}})
		if err != nil {
			t.Fatal(err)
		}
		expect(t, resp, ok, ok, 0, ok, 5)
		if got := canonical(t, resp.DynamicMetadata); got != want {
			t.Errorf("request %d: dynamic_metadata\n%s, want\n%s", i, got, want)
		}
	}
}

// canonical is s as JSON with its keys sorted and the override's text
// form with single spaces (protobuf's text form varies its spacing on
// purpose).
func canonical(t *testing.T, s *structpb.Struct) string {
	t.Helper()
	b, err := json.Marshal(s.AsMap())
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(strings.Fields(strings.ReplaceAll(string(b), ": ", ":")), " ")
}

// Issue point 7: envoyproxy/ratelimit's LIMIT_RESPONSE_HEADERS_ENABLED
// headers: of the last refusing descriptor, else of the one with the
// least remaining; the reset in whole seconds.
func TestParityLimitHeaders(t *testing.T) {
	f := &fixture{}
	f.now.Store(start.Add(1500 * time.Millisecond).UnixNano())
	f.serve(t, testkit.Memory(t), Options{LimitHeaders: &LimitHeaders{Reset: "X-Reset"}})
	headers := func(resp *rlsv3.RateLimitResponse) string {
		var hs []string
		for _, h := range resp.ResponseHeadersToAdd {
			hs = append(hs, h.Key+": "+h.Value)
		}
		return strings.Join(hs, ", ")
	}
	for i, tc := range []struct {
		ds   []*commonv3.RateLimitDescriptor
		want string
	}{
		{[]*commonv3.RateLimitDescriptor{desc("free=h"), desc("b=h"), desc("cost=h")}, "RateLimit-Limit: 2, RateLimit-Remaining: 1, X-Reset: 2999"},
		{[]*commonv3.RateLimitDescriptor{desc("cost=h"), desc("b=h")}, "RateLimit-Limit: 2, RateLimit-Remaining: 0, X-Reset: 2999"},
		{[]*commonv3.RateLimitDescriptor{desc("a=h"), desc("cost=h")}, "RateLimit-Limit: 1, RateLimit-Remaining: 0, X-Reset: 2999"},              // the first of equals
		{[]*commonv3.RateLimitDescriptor{desc("b=h"), desc("a=h"), desc("cost=x")}, "RateLimit-Limit: 1, RateLimit-Remaining: 0, X-Reset: 2999"}, // the last refusing
		{[]*commonv3.RateLimitDescriptor{desc("free=h"), desc("nothing=h")}, ""},
	} {
		if got := headers(f.parity(t, 0, tc.ds...)); got != tc.want {
			t.Errorf("request %d: headers %q, want %q", i, got, tc.want)
		}
	}
}
