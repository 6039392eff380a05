package envoyrls

import (
	"bytes"
	"math"
	"testing"
	"time"
	"unicode/utf8"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// wireRequests are RateLimitRequests of every field the service reads,
// written by the generated code.
func wireRequests() []*rlsv3.RateLimitRequest {
	e := func(k, v string) *commonv3.RateLimitDescriptor_Entry {
		return &commonv3.RateLimitDescriptor_Entry{Key: k, Value: v}
	}
	return []*rlsv3.RateLimitRequest{
		{},
		{Domain: "bench", Descriptors: []*commonv3.RateLimitDescriptor{{Entries: []*commonv3.RateLimitDescriptor_Entry{e("client", "k1")}}}},
		{Domain: "shop", HitsAddend: 7, Descriptors: []*commonv3.RateLimitDescriptor{
			{Entries: []*commonv3.RateLimitDescriptor_Entry{e("a", ""), e("", "b"), e("ключ", "値 ☃")}},
			{Entries: []*commonv3.RateLimitDescriptor_Entry{e("x", "y")}, HitsAddend: wrapperspb.UInt64(0)},
			{Entries: []*commonv3.RateLimitDescriptor_Entry{e("x", "y")}, HitsAddend: wrapperspb.UInt64(math.MaxUint64), IsNegativeHits: true},
			{Limit: &commonv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 5, Unit: typev3.RateLimitUnit_MINUTE, UnitMultiplier: wrapperspb.UInt32(3)}},
			{Limit: &commonv3.RateLimitDescriptor_RateLimitOverride{}},
			{},
		}},
		{Domain: "d", HitsAddend: math.MaxUint32},
	}
}

// sameRequest fails t unless r holds what the generated code read into
// ref, field for field.
func sameRequest(t *testing.T, r *request, ref *rlsv3.RateLimitRequest) {
	t.Helper()
	if string(r.domain) != ref.Domain || r.hitsAddend != ref.HitsAddend || len(r.descriptors) != len(ref.Descriptors) {
		t.Fatalf("read domain %q, hits_addend %d, %d descriptors; the generated code %q, %d, %d",
			r.domain, r.hitsAddend, len(r.descriptors), ref.Domain, ref.HitsAddend, len(ref.Descriptors))
	}
	for i, want := range ref.Descriptors {
		d := &r.descriptors[i]
		got := r.entriesOf(d)
		if len(got) != len(want.Entries) {
			t.Fatalf("descriptor %d: %d entries, the generated code %d", i, len(got), len(want.Entries))
		}
		for j, e := range want.Entries {
			if string(got[j].key) != e.Key || string(got[j].value) != e.Value {
				t.Fatalf("descriptor %d entry %d: %q=%q, the generated code %q=%q", i, j, got[j].key, got[j].value, e.Key, e.Value)
			}
		}
		if d.negative != want.IsNegativeHits || d.hasHits != (want.HitsAddend != nil) || d.hits != want.HitsAddend.GetValue() {
			t.Fatalf("descriptor %d: negative %v, hits %v %d; the generated code %v, %v", i, d.negative, d.hasHits, d.hits, want.IsNegativeHits, want.HitsAddend)
		}
		if (d.limit != nil) != (want.Limit != nil) || d.perUnit != want.Limit.GetRequestsPerUnit() || d.unit != int32(want.Limit.GetUnit()) {
			t.Fatalf("descriptor %d: limit %v %d %d; the generated code %v", i, d.limit != nil, d.perUnit, d.unit, want.Limit)
		}
		if d.limit != nil {
			var o commonv3.RateLimitDescriptor_RateLimitOverride
			if err := proto.Unmarshal(d.limit, &o); err != nil || !proto.Equal(&o, want.Limit) {
				t.Fatalf("descriptor %d: limit %v (%v), the generated code %v", i, &o, err, want.Limit)
			}
		}
	}
}

// parseAgrees parses b both ways: the generated code and parse must both
// refuse it, or both read the same request.
func parseAgrees(t *testing.T, b []byte) {
	t.Helper()
	var ref rlsv3.RateLimitRequest
	refErr := proto.Unmarshal(b, &ref)
	r := &request{buf: b}
	err := r.parse()
	if (err != nil) != (refErr != nil) {
		t.Fatalf("parse %x: error %v, the generated code's %v", b, err, refErr)
	}
	if err == nil {
		sameRequest(t, r, &ref)
	}
}

// handWritten are requests the generated code does not write but reads:
// scalars repeated (the last wins), a message field repeated (merged),
// fields of the wrong wire type and unknown ones (skipped), and malformed
// ones (refused).
func handWritten() [][]byte {
	tag := func(b []byte, num protowire.Number, typ protowire.Type) []byte {
		return protowire.AppendTag(b, num, typ)
	}
	str := func(b []byte, num protowire.Number, s string) []byte {
		return protowire.AppendString(tag(b, num, protowire.BytesType), s)
	}
	varint := func(b []byte, num protowire.Number, x uint64) []byte {
		return protowire.AppendVarint(tag(b, num, protowire.VarintType), x)
	}
	msg := func(b []byte, num protowire.Number, m []byte) []byte {
		return protowire.AppendBytes(tag(b, num, protowire.BytesType), m)
	}
	entry := str(str(nil, 1, "k"), 2, "v")
	limitA, limitB := varint(varint(nil, 1, 5), 2, 2), varint(nil, 2, 3)
	desc := msg(msg(msg(msg(nil, 1, entry), 2, limitA), 2, limitB), 3, varint(nil, 1, 9))
	desc = msg(varint(msg(desc, 3, varint(nil, 2, 4)), 4, 2), 9, []byte("unknown"))
	return [][]byte{
		varint(str(str(varint(varint(nil, 3, 1), 3, 1<<40), 1, "a"), 1, "b"), 2, 3),
		msg(str(nil, 1, "d"), 2, desc),
		msg(nil, 2, msg(nil, 1, varint(str(nil, 1, "k"), 1, 7))),                    // entry key as a varint: skipped
		protowire.AppendFixed32(tag(str(nil, 1, "d"), 7, protowire.Fixed32Type), 1), // unknown fixed32
		protowire.AppendFixed64(tag(nil, 1, protowire.Fixed64Type), 1),              // domain as fixed64: skipped
		tag(tag(varint(nil, 3, 1), 8, protowire.StartGroupType), 8, protowire.EndGroupType),
		str(nil, 1, "\xff"),                           // not UTF-8
		msg(nil, 2, msg(nil, 1, str(nil, 2, "\xc3"))), // not UTF-8, nested
		{0x0a, 0x05, 'a'},                             // truncated
		{0x00},                                        // field number 0
		tag(nil, 5, protowire.EndGroupType),           // an end without a start
		{0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, // an 11-byte varint
	}
}

// TestWireRequest holds parse to the generated go-control-plane code:
// the same fields from every request it writes and every hand-written one.
func TestWireRequest(t *testing.T) {
	for _, req := range wireRequests() {
		b, err := proto.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		parseAgrees(t, b)
	}
	for _, b := range handWritten() {
		parseAgrees(t, b)
	}
}

// FuzzWireRequest: for any bytes, parse and the generated code agree on
// whether they are a RateLimitRequest and on every field the service
// reads. Its seeds (every request of TestWireRequest) run with go test.
func FuzzWireRequest(f *testing.F) {
	for _, req := range wireRequests() {
		b, err := proto.Marshal(req)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, b := range handWritten() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { parseAgrees(t, b) })
}

// toProto is resp as the generated code holds it.
func toProto(resp *response) *rlsv3.RateLimitResponse {
	out := &rlsv3.RateLimitResponse{OverallCode: resp.code, DynamicMetadata: resp.metadata}
	for _, st := range resp.statuses {
		ds := &rlsv3.RateLimitResponse_DescriptorStatus{Code: st.code, LimitRemaining: st.remaining}
		if st.limit != nil {
			ds.CurrentLimit = st.limit.current
		}
		if st.hasReset {
			ds.DurationUntilReset = durationpb.New(st.reset)
		}
		out.Statuses = append(out.Statuses, ds)
	}
	for _, h := range resp.headers {
		out.ResponseHeadersToAdd = append(out.ResponseHeadersToAdd, &corev3.HeaderValue{Key: h.key, Value: h.value})
	}
	return out
}

// writeAgrees fails t unless resp's wire form is, byte for byte, what
// the generated code writes of the same response.
func writeAgrees(t *testing.T, resp *response) {
	t.Helper()
	want, err := proto.MarshalOptions{Deterministic: true}.Marshal(toProto(resp))
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.appendWire(nil); !bytes.Equal(got, want) {
		t.Fatalf("wrote %x, the generated code %x", got, want)
	}
}

func limitOf(name string, perUnit uint32, unit rlsv3.RateLimitResponse_RateLimit_Unit) *limit {
	l := &limit{current: &rlsv3.RateLimitResponse_RateLimit{Name: name, RequestsPerUnit: perUnit, Unit: unit}}
	l.currentWire = currentWire(l.current)
	return l
}

// TestWireResponse holds appendWire to the generated code: every field
// the service writes, zero values (left out) and extremes.
func TestWireResponse(t *testing.T) {
	hour := limitOf("per_hour", 10, rlsv3.RateLimitResponse_RateLimit_HOUR)
	for _, resp := range []*response{
		{},
		{code: rlsv3.RateLimitResponse_OK, statuses: []descStatus{{code: rlsv3.RateLimitResponse_OK}}},
		{code: rlsv3.RateLimitResponse_OVER_LIMIT, statuses: []descStatus{
			{code: rlsv3.RateLimitResponse_OVER_LIMIT, limit: hour, reset: 1500 * time.Millisecond, hasReset: true},
			{code: rlsv3.RateLimitResponse_OK, remaining: math.MaxUint32},
			{limit: limitOf("", 0, 0), hasReset: true},
			{limit: limitOf("ü", math.MaxUint32, 99), remaining: 3, reset: -time.Nanosecond - time.Second, hasReset: true},
			{reset: time.Duration(math.MaxInt64), hasReset: true},
		}, headers: []headerValue{{"ratelimit-limit", "10"}, {"", "v"}, {"k", ""}}},
	} {
		writeAgrees(t, resp)
	}
	// Dynamic metadata is a map: compared as messages, not as bytes.
	md, _ := structpb.NewStruct(map[string]any{"domain": "d", "descriptors": []any{map[string]any{"entries": []any{"a=b"}}}, "quotaModeEnabled": true})
	resp := &response{code: rlsv3.RateLimitResponse_OK, metadata: md}
	var got rlsv3.RateLimitResponse
	if err := proto.Unmarshal(resp.appendWire(nil), &got); err != nil || !proto.Equal(&got, toProto(resp)) {
		t.Fatalf("read back %v (%v), want %v", &got, err, toProto(resp))
	}
}

// FuzzWireResponse: for any field values, appendWire writes what the
// generated code writes. Its seeds run with go test.
func FuzzWireResponse(f *testing.F) {
	f.Add(int32(2), uint32(0), int64(1e9), "name", uint32(10), int32(3), "k", "v", true)
	f.Add(int32(-1), uint32(math.MaxUint32), int64(math.MinInt64), "", uint32(0), int32(-7), "", "", false)
	f.Fuzz(func(t *testing.T, code int32, remaining uint32, reset int64, name string, perUnit uint32, unit int32, key, value string, hasReset bool) {
		if !utf8.ValidString(name) || !utf8.ValidString(key) || !utf8.ValidString(value) {
			return // proto3 strings: the generated code refuses them, and no limit or header has one
		}
		st := descStatus{code: rlsv3.RateLimitResponse_Code(code), limit: limitOf(name, perUnit, rlsv3.RateLimitResponse_RateLimit_Unit(unit)),
			remaining: remaining, reset: time.Duration(reset), hasReset: hasReset}
		writeAgrees(t, &response{code: rlsv3.RateLimitResponse_Code(code), statuses: []descStatus{st, {}}, headers: []headerValue{{key, value}}})
	})
}

// TestWireAllocs: reading a request into a used one and writing an answer
// into a used buffer allocate nothing.
func TestWireAllocs(t *testing.T) {
	b, err := proto.Marshal(wireRequests()[2])
	if err != nil {
		t.Fatal(err)
	}
	r := &request{}
	resp := &response{code: rlsv3.RateLimitResponse_OK, statuses: []descStatus{{limit: limitOf("n", 1, 1), remaining: 5, reset: time.Second, hasReset: true}}}
	var out []byte
	allocs := testing.AllocsPerRun(100, func() {
		r.reset()
		r.buf = append(r.buf, b...)
		if err := r.parse(); err != nil {
			t.Fatal(err)
		}
		out = resp.appendWire(out[:0])
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per request and answer, want 0", allocs)
	}
}
