package envoyrls

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	rlconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// everyField sets every field of ratelimit.config.ratelimit.v3.
func everyField() *rlconfv3.RateLimitConfig {
	return &rlconfv3.RateLimitConfig{Name: "route-1", Domain: "edge", Descriptors: []*rlconfv3.RateLimitDescriptor{
		{Key: "client", Value: "sam", ShadowMode: true, DetailedMetric: true,
			RateLimit: &rlconfv3.RateLimitPolicy{Unit: rlconfv3.RateLimitUnit_MINUTE, RequestsPerUnit: 7, Name: "sam",
				Replaces: []*rlconfv3.RateLimitReplace{{Name: "per-client"}}},
			Descriptors: []*rlconfv3.RateLimitDescriptor{{Key: "path", RateLimit: &rlconfv3.RateLimitPolicy{Unlimited: true}}}},
		{Key: "client", RateLimit: &rlconfv3.RateLimitPolicy{Unit: rlconfv3.RateLimitUnit_DAY, RequestsPerUnit: 100, Name: "per-client"}},
		{Key: "ip", RateLimit: &rlconfv3.RateLimitPolicy{Unit: rlconfv3.RateLimitUnit_SECOND, RequestsPerUnit: 1}},
		{Key: "region", RateLimit: &rlconfv3.RateLimitPolicy{Unit: rlconfv3.RateLimitUnit_HOUR, RequestsPerUnit: 0}},
	}}
}

// sameAsFile is everyField in envoyproxy/ratelimit's file format.
const sameAsFile = `domain: edge
descriptors:
  - key: client
    value: sam
    shadow_mode: true
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 7, name: sam, replaces: [{name: per-client}]}
    descriptors:
      - key: path
        rate_limit: {unlimited: true}
  - key: client
    rate_limit: {unit: day, requests_per_unit: 100, name: per-client}
  - key: ip
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: region
    rate_limit: {unit: hour, requests_per_unit: 0}
`

// TestFromProtoIsTheFile: a RateLimitConfig translates into the very
// Domain its file form parses into, every field included.
func TestFromProtoIsTheFile(t *testing.T) {
	got, err := FromProto(everyField())
	if err != nil {
		t.Fatal(err)
	}
	want, err := Parse("xds:route-1", []byte(sameAsFile))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("FromProto:\n%+v\nParse:\n%+v", got, want)
	}
}

func TestFromProtoRefuses(t *testing.T) {
	deep := &rlconfv3.RateLimitDescriptor{Key: "k"}
	for range maxDepth + 1 {
		deep = &rlconfv3.RateLimitDescriptor{Key: "k", Descriptors: []*rlconfv3.RateLimitDescriptor{deep}}
	}
	for name, tc := range map[string]struct {
		c    *rlconfv3.RateLimitConfig
		want string
	}{
		"no unit":      {rlConfig("d", &rlconfv3.RateLimitDescriptor{Key: "k", RateLimit: &rlconfv3.RateLimitPolicy{RequestsPerUnit: 5}}), "unit"},
		"unknown unit": {rlConfig("d", &rlconfv3.RateLimitDescriptor{Key: "k", RateLimit: &rlconfv3.RateLimitPolicy{Unit: 9, RequestsPerUnit: 5}}), `"9"`},
		"unlimited with unit": {rlConfig("d", &rlconfv3.RateLimitDescriptor{Key: "k",
			RateLimit: &rlconfv3.RateLimitPolicy{Unit: rlconfv3.RateLimitUnit_SECOND, Unlimited: true}}), "unlimited"},
		"empty domain": {rlConfig("", &rlconfv3.RateLimitDescriptor{Key: "k"}), "domain is empty"},
		"no key":       {rlConfig("d", &rlconfv3.RateLimitDescriptor{Value: "v"}), "no key"},
		"twice":        {rlConfig("d", &rlconfv3.RateLimitDescriptor{Key: "k"}, &rlconfv3.RateLimitDescriptor{Key: "k"}), "twice"},
		"too deep":     {rlConfig("d", deep), "deeper"},
		"newer field":  {withUnknown(rlConfig("d", &rlconfv3.RateLimitDescriptor{Key: "k", RateLimit: &rlconfv3.RateLimitPolicy{Unlimited: true}})), "does not know"},
	} {
		_, err := FromProto(tc.c)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "xds:n") {
			t.Errorf("%s: %v, want ErrInvalid naming xds:n and %q", name, err, tc.want)
		}
	}
}

// withUnknown adds to c's first policy a field 9 the protos do not name,
// as a newer management server's quota_mode-like field would arrive.
func withUnknown(c *rlconfv3.RateLimitConfig) *rlconfv3.RateLimitConfig {
	p := c.Descriptors[0].RateLimit.ProtoReflect()
	p.SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 9, protowire.VarintType), 1))
	return c
}

// TestFromProtoNewerUnits: week, month and year, as newer protos number
// them, are read.
func TestFromProtoNewerUnits(t *testing.T) {
	for n, want := range map[rlconfv3.RateLimitUnit]string{5: "month", 6: "year", 7: "week"} {
		d, err := FromProto(rlConfig("d", &rlconfv3.RateLimitDescriptor{Key: "k", RateLimit: &rlconfv3.RateLimitPolicy{Unit: n, RequestsPerUnit: 1}}))
		if err != nil || d.Descriptors[0].RateLimit.Unit != want {
			t.Errorf("unit %d: %v %v, want %s", n, d, err, want)
		}
	}
}

func rlConfig(domain string, ds ...*rlconfv3.RateLimitDescriptor) *rlconfv3.RateLimitConfig {
	return &rlconfv3.RateLimitConfig{Name: "n", Domain: domain, Descriptors: ds}
}

// TestValidateDomainTwice: an in-memory Config refuses a domain given
// twice, as Load refuses it across files.
func TestValidateDomainTwice(t *testing.T) {
	a, _ := FromProto(rlConfig("d", &rlconfv3.RateLimitDescriptor{Key: "k"}))
	b, _ := FromProto(rlConfig("d", &rlconfv3.RateLimitDescriptor{Key: "j"}))
	if err := (&Config{Domains: []*Domain{a}}).Validate(); err != nil {
		t.Error(err)
	}
	if err := (&Config{Domains: []*Domain{a, b}}).Validate(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `domain "d"`) {
		t.Errorf("%v, want the domain named", err)
	}
}

// FuzzFromProto: any bytes a management server sends either fail to
// decode or translate into a Domain that validates, never a panic.
func FuzzFromProto(f *testing.F) {
	b, _ := proto.Marshal(everyField())
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		var c rlconfv3.RateLimitConfig
		if proto.Unmarshal(data, &c) != nil {
			return
		}
		d, err := FromProto(&c)
		if err == nil {
			if verr := (&Config{Domains: []*Domain{d}}).Validate(); verr != nil {
				t.Fatalf("FromProto accepted what Validate refuses: %v", verr)
			}
		}
	})
}
