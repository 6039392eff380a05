package envoyrls

import (
	"context"
	"math"
	"testing"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// A hostile hits_addend never wraps a counter into admitting: every
// algorithm refuses a cost past its quota and keeps what was left.
func TestHugeHitsAddend(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		for _, key := range []string{"client=h", "bucket=h", "window=h"} {
			for _, n := range []uint64{math.MaxUint64, math.MaxInt64, 1 << 62, 1 << 53, 1 << 40, 1 << 32, math.MaxUint32} {
				d := desc(key)
				d.HitsAddend = wrapperspb.UInt64(n)
				resp, err := f.client.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "shop", Descriptors: []*commonv3.RateLimitDescriptor{d}})
				if err != nil {
					t.Fatalf("%s %d: %v", key, n, err)
				}
				if resp.OverallCode != over {
					t.Errorf("%s hits %d: %v", key, n, resp)
				}
			}
			resp := f.ask(t, 1, desc(key))
			if resp.OverallCode != ok {
				t.Errorf("%s: after huge costs, one hit refused: %v", key, resp)
			}
		}
		// Overrides with huge counts and huge costs.
		for _, u := range []typev3.RateLimitUnit{typev3.RateLimitUnit_SECOND, typev3.RateLimitUnit_YEAR} {
			d := desc("client=o")
			d.Limit = &commonv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: math.MaxUint32, Unit: u}
			d.HitsAddend = wrapperspb.UInt64(math.MaxUint64)
			resp, err := f.client.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "shop", Descriptors: []*commonv3.RateLimitDescriptor{d}})
			if err != nil {
				t.Fatal(err)
			}
			if resp.OverallCode != over {
				t.Errorf("override %v max cost: %v", u, resp)
			}
			d.HitsAddend = wrapperspb.UInt64(math.MaxUint32)
			resp, err = f.client.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "shop", Descriptors: []*commonv3.RateLimitDescriptor{d}})
			if err != nil {
				t.Fatal(err)
			}
			if resp.OverallCode != ok || resp.Statuses[0].LimitRemaining != 0 {
				t.Errorf("override %v exact cost: %v", u, resp)
			}
		}
	})
}
