package envoyrls

import (
	"cmp"
	"math"
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/floodgate/floodgate/engine"
)

// dynamicMetadata is envoyproxy/ratelimit's response dynamic metadata for
// req (see Options.DynamicMetadata).
func dynamicMetadata(req *rlsv3.RateLimitRequest, steps []step, resp *rlsv3.RateLimitResponse) *structpb.Struct {
	descs := make([]*structpb.Value, 0, len(req.Descriptors))
	for _, d := range req.Descriptors {
		entries := make([]*structpb.Value, 0, len(d.Entries))
		for _, e := range d.Entries {
			entries = append(entries, structpb.NewStringValue(e.GetKey()+"="+e.GetValue()))
		}
		f := map[string]*structpb.Value{"entries": structpb.NewListValue(&structpb.ListValue{Values: entries})}
		if o := d.GetLimit(); o != nil {
			f["limit"] = structpb.NewStringValue(prototext.MarshalOptions{}.Format(o))
		}
		if h := d.GetHitsAddend(); h != nil {
			f["hitsAddend"] = structpb.NewNumberValue(float64(h.GetValue()))
		}
		descs = append(descs, structpb.NewStructValue(&structpb.Struct{Fields: f}))
	}
	fields := map[string]*structpb.Value{
		"domain":      structpb.NewStringValue(req.Domain),
		"descriptors": structpb.NewListValue(&structpb.ListValue{Values: descs}),
	}
	if h := req.GetHitsAddend(); h != 0 {
		fields["hitsAddend"] = structpb.NewNumberValue(float64(h))
	}
	var violations []*structpb.Value
	enabled := false
	for i, st := range steps {
		enabled = enabled || st.limit != nil && st.limit.quota
		if st.quotaOver {
			violations = append(violations, structpb.NewNumberValue(float64(i)))
		}
	}
	if len(violations) > 0 {
		fields["quotaModeViolations"] = structpb.NewListValue(&structpb.ListValue{Values: violations})
	}
	fields["quotaModeEnabled"] = structpb.NewBoolValue(enabled)
	return &structpb.Struct{Fields: fields}
}

// limitHeaders are envoyproxy/ratelimit's headers of a response (see
// LimitHeaders), or none when no descriptor has a limit.
func (s *Service) limitHeaders(steps []step, statuses []*rlsv3.RateLimitResponse_DescriptorStatus) []*corev3.HeaderValue {
	var chosen *rlsv3.RateLimitResponse_DescriptorStatus
	var window time.Duration
	least := uint32(math.MaxUint32)
	for i, ds := range statuses {
		refused := ds.Code == rlsv3.RateLimitResponse_OVER_LIMIT
		if ds.CurrentLimit != nil && (refused || ds.LimitRemaining < least) {
			chosen, window, least = ds, steps[i].limit.policy.Window, ds.LimitRemaining
			if refused {
				least = 0
			}
		}
	}
	if chosen == nil {
		return nil
	}
	h := *s.opt.LimitHeaders
	now := s.opt.Now()
	secs := int64(window / time.Second)
	reset := secs - now.Unix()%max(secs, 1)
	return []*corev3.HeaderValue{
		{Key: cmp.Or(h.Limit, "RateLimit-Limit"), Value: strconv.FormatUint(uint64(chosen.CurrentLimit.RequestsPerUnit), 10)},
		{Key: cmp.Or(h.Remaining, "RateLimit-Remaining"), Value: strconv.FormatUint(uint64(chosen.LimitRemaining), 10)},
		{Key: cmp.Or(h.Reset, "RateLimit-Reset"), Value: strconv.FormatInt(reset, 10)},
	}
}

// headers writes the RateLimit fields of every decided descriptor.
func (s *Service) headers(outs []engine.Outcome) []*corev3.HeaderValue {
	m := engine.Merge(outs)
	h := map[string][]string{}
	s.opt.Fields.Set(h, &m)
	var hv []*corev3.HeaderValue
	for k, vs := range h {
		for _, v := range vs {
			hv = append(hv, &corev3.HeaderValue{Key: strings.ToLower(k), Value: v})
		}
	}
	return hv
}
