package envoyrls

import (
	"fmt"
	"strings"

	rlconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// TypeURL is the xDS resource type of envoyproxy/ratelimit's rules, as
// Envoy Gateway serves them.
const TypeURL = "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig"

// FromProto translates one xDS RateLimitConfig into a Domain and validates
// it as Parse validates a file, naming it "xds:<name>" in errors. Every
// field of ratelimit.config.ratelimit.v3 is mapped: name, domain and
// descriptors; a descriptor's key, value, rate_limit, descriptors,
// shadow_mode and detailed_metric; a policy's unit (UNKNOWN is no unit,
// which only an unlimited policy may have), requests_per_unit, unlimited,
// name and replaces. A field the protos do not name (from a newer
// schema) is refused. Errors wrap ErrInvalid.
func FromProto(c *rlconfv3.RateLimitConfig) (*Domain, error) {
	file := "xds:" + c.GetName()
	if err := protoDepth(c.GetDescriptors(), 1); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalid, file, err)
	}
	if unknownFields(c.ProtoReflect()) {
		// A field of newer protos would be dropped unseen and the rule
		// decided without it: refused instead.
		return nil, fmt.Errorf("%w: %s: fields this version of ratelimit.config.ratelimit.v3 does not know", ErrInvalid, file)
	}
	d := &Domain{File: file, Domain: c.GetDomain(), Descriptors: fromProtoDescriptors(c.GetDescriptors())}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return d, nil
}

// protoDepth refuses a tree deeper than any file may be before it is
// copied, so a hostile snapshot cannot make the translation recurse
// without bound.
func protoDepth(ds []*rlconfv3.RateLimitDescriptor, depth int) error {
	if len(ds) > 0 && depth > maxDepth {
		return fmt.Errorf("descriptors nest deeper than %d", maxDepth)
	}
	for _, d := range ds {
		if err := protoDepth(d.GetDescriptors(), depth+1); err != nil {
			return err
		}
	}
	return nil
}

// unknownFields reports whether m or a message in it holds fields its
// schema does not name.
func unknownFields(m protoreflect.Message) bool {
	if len(m.GetUnknown()) > 0 {
		return true
	}
	found := false
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.Message() == nil:
		case fd.IsList():
			for i := 0; i < v.List().Len() && !found; i++ {
				found = unknownFields(v.List().Get(i).Message())
			}
		default:
			found = unknownFields(v.Message())
		}
		return !found
	})
	return found
}

func fromProtoDescriptors(ps []*rlconfv3.RateLimitDescriptor) []*Descriptor {
	if len(ps) == 0 {
		return nil
	}
	out := make([]*Descriptor, len(ps))
	for i, p := range ps {
		out[i] = &Descriptor{
			Key:            p.GetKey(),
			Value:          p.GetValue(),
			RateLimit:      fromProtoPolicy(p.GetRateLimit()),
			Descriptors:    fromProtoDescriptors(p.GetDescriptors()),
			ShadowMode:     p.GetShadowMode(),
			DetailedMetric: p.GetDetailedMetric(),
		}
	}
	return out
}

// protoUnits names the RateLimitUnit values: those of the v0.1.0 protos,
// and the week, month and year newer protos add (WEEK = 7, MONTH = 5,
// YEAR = 6), so that a newer management server's units are read too.
var protoUnits = map[rlconfv3.RateLimitUnit]string{
	rlconfv3.RateLimitUnit_SECOND: "second", rlconfv3.RateLimitUnit_MINUTE: "minute", rlconfv3.RateLimitUnit_HOUR: "hour",
	rlconfv3.RateLimitUnit_DAY: "day", 5: "month", 6: "year", 7: "week",
}

func fromProtoPolicy(p *rlconfv3.RateLimitPolicy) *RateLimit {
	if p == nil {
		return nil
	}
	rl := &RateLimit{RequestsPerUnit: p.GetRequestsPerUnit(), Unlimited: p.GetUnlimited(), Name: p.GetName()}
	if u := p.GetUnit(); u != rlconfv3.RateLimitUnit_UNKNOWN {
		rl.Unit = protoUnits[u]
		if rl.Unit == "" {
			rl.Unit = strings.ToLower(u.String()) // a number: Period refuses it
		}
	}
	for _, r := range p.GetReplaces() {
		rl.Replaces = append(rl.Replaces, Replace{Name: r.GetName()})
	}
	return rl
}
