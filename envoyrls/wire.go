package envoyrls

import (
	"errors"
	"time"
	"unicode/utf8"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// The two messages of ShouldRateLimit read and written with protowire,
// field by field, from the field numbers of envoy/service/ratelimit/v3/rls.proto
// and envoy/extensions/common/ratelimit/v3/ratelimit.proto: a call then
// costs no reflection and, once the pools are warm, no allocation of its
// own. wire_test.go holds both to the generated go-control-plane code.

// request is a RateLimitRequest as the service reads it. Every byte slice
// points into buf, a copy of the wire message that the request keeps
// (and reuses) for its life.
type request struct {
	buf         []byte
	domain      []byte
	hitsAddend  uint32
	descriptors []descriptor
	entries     []entry // the descriptors' entries, each descriptor's together
}

// descriptor is a RateLimitDescriptor: its entries are
// request.entries[first:first+n].
type descriptor struct {
	first, n int
	// limit is the RateLimitOverride's wire form, nil when absent; when
	// the field occurs twice its occurrences are joined, as proto merges
	// them. perUnit and unit are read from it.
	limit    []byte
	perUnit  uint32
	unit     int32
	hits     uint64 // hits_addend's value, when hasHits
	hasHits  bool
	negative bool // is_negative_hits
}

// entry is a RateLimitDescriptor.Entry.
type entry struct{ key, value []byte }

// entriesOf returns d's entries.
func (r *request) entriesOf(d *descriptor) []entry { return r.entries[d.first : d.first+d.n] }

// errWire is a request that is not a RateLimitRequest on the wire, or
// holds a string that is not UTF-8 (which proto3 refuses too).
var errWire = errors.New("envoyrls: malformed RateLimitRequest")

// reset empties r, keeping its buffers' capacity.
func (r *request) reset() {
	r.buf, r.domain, r.hitsAddend = r.buf[:0], nil, 0
	r.descriptors, r.entries = r.descriptors[:0], r.entries[:0]
}

// parse reads r.buf into r, as proto.Unmarshal reads a RateLimitRequest:
// the last occurrence of a scalar wins, a known field of another wire type
// and unknown fields are skipped. Errors: errWire.
func (r *request) parse() error {
	return eachField(r.buf, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			if !utf8.Valid(v) {
				return errWire
			}
			r.domain = v
		case num == 2 && typ == protowire.BytesType:
			r.descriptors = append(r.descriptors, descriptor{first: len(r.entries)})
			return r.parseDescriptor(v, &r.descriptors[len(r.descriptors)-1])
		case num == 3 && typ == protowire.VarintType:
			r.hitsAddend = uint32(x)
		}
		return nil
	})
}

func (r *request) parseDescriptor(b []byte, d *descriptor) error {
	return eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			e, err := parseEntry(v)
			if err != nil {
				return err
			}
			r.entries = append(r.entries, e)
			d.n++
		case num == 2 && typ == protowire.BytesType:
			if d.limit == nil {
				d.limit = v[:len(v):len(v)] // an append below copies
			} else {
				d.limit = append(d.limit, v...)
			}
			if d.limit == nil {
				d.limit = []byte{} // present, if empty
			}
			return eachField(v, func(num protowire.Number, typ protowire.Type, m []byte, x uint64) error {
				switch {
				case num == 1 && typ == protowire.VarintType:
					d.perUnit = uint32(x)
				case num == 2 && typ == protowire.VarintType:
					d.unit = int32(x)
				case num == 3 && typ == protowire.BytesType:
					// unit_multiplier, a UInt32Value: unused, but proto
					// refuses the request when it is malformed.
					return eachField(m, skip)
				}
				return nil
			})
		case num == 3 && typ == protowire.BytesType:
			d.hasHits = true
			return eachField(v, func(num protowire.Number, typ protowire.Type, _ []byte, x uint64) error {
				if num == 1 && typ == protowire.VarintType {
					d.hits = x
				}
				return nil
			})
		case num == 4 && typ == protowire.VarintType:
			d.negative = x != 0
		}
		return nil
	})
}

func parseEntry(b []byte) (entry, error) {
	var e entry
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType || num != 1 && num != 2 {
			return nil
		}
		if !utf8.Valid(v) {
			return errWire
		}
		if num == 1 {
			e.key = v
		} else {
			e.value = v
		}
		return nil
	})
	return e, err
}

// skip is a field visitor that reads nothing: eachField(b, skip) checks
// that b is a message.
func skip(protowire.Number, protowire.Type, []byte, uint64) error { return nil }

// eachField calls fn with every field of the message b: its number, its
// wire type, and its value (v for a length-delimited field, x for a
// varint; neither for the other types, which fn may only skip).
func eachField(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || num > protowire.MaxValidNumber { // ConsumeTag checks the lower bound only
			return errWire
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return errWire
		}
		b = b[n:]
		if err := fn(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}

// response is a RateLimitResponse as the service writes it.
type response struct {
	code     rlsv3.RateLimitResponse_Code
	statuses []descStatus
	headers  []headerValue // response_headers_to_add
	metadata *structpb.Struct
}

// descStatus is a RateLimitResponse.DescriptorStatus.
type descStatus struct {
	code      rlsv3.RateLimitResponse_Code
	limit     *limit // current_limit is limit.currentWire; nil: none
	remaining uint32
	reset     time.Duration // duration_until_reset, when hasReset
	hasReset  bool
}

// headerValue is a config.core.v3.HeaderValue of key and value.
type headerValue struct{ key, value string }

// appendWire appends resp's wire form to b, field by field in field
// number order, as proto.Marshal writes it.
func (resp *response) appendWire(b []byte) []byte {
	if resp.code != 0 {
		b = protowire.AppendTag(b, 1, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(resp.code))
	}
	for i := range resp.statuses {
		st := &resp.statuses[i]
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(st.size()))
		b = st.appendWire(b)
	}
	for _, h := range resp.headers {
		b = protowire.AppendTag(b, 3, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(stringSize(1, h.key)+stringSize(2, h.value)))
		b = appendString(appendString(b, 1, h.key), 2, h.value)
	}
	if resp.metadata != nil {
		b = protowire.AppendTag(b, 6, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(proto.Size(resp.metadata)))
		b, _ = proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(b, resp.metadata)
	}
	return b
}

func (st *descStatus) size() int {
	n := varintSize(1, uint64(st.code)) + varintSize(3, uint64(st.remaining))
	if st.limit != nil {
		n += 1 + protowire.SizeBytes(len(st.limit.currentWire))
	}
	if st.hasReset {
		n += 1 + protowire.SizeBytes(durationSize(st.reset))
	}
	return n
}

func (st *descStatus) appendWire(b []byte) []byte {
	b = appendVarint(b, 1, uint64(st.code))
	if st.limit != nil {
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendBytes(b, st.limit.currentWire)
	}
	b = appendVarint(b, 3, uint64(st.remaining))
	if st.hasReset {
		b = protowire.AppendTag(b, 4, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(durationSize(st.reset)))
		secs, nanos := durationParts(st.reset)
		b = appendVarint(appendVarint(b, 1, uint64(secs)), 2, uint64(int64(nanos)))
	}
	return b
}

// durationParts splits d as durationpb.New does: seconds and nanos of
// the same sign.
func durationParts(d time.Duration) (int64, int32) {
	nanos := d.Nanoseconds()
	return nanos / 1e9, int32(nanos % 1e9)
}

func durationSize(d time.Duration) int {
	secs, nanos := durationParts(d)
	return varintSize(1, uint64(secs)) + varintSize(2, uint64(int64(nanos)))
}

// currentWire is the wire form of a RateLimitResponse.RateLimit: the
// current_limit a limit answers with, written once when it is compiled.
func currentWire(rl *rlsv3.RateLimitResponse_RateLimit) []byte {
	b := appendVarint(nil, 1, uint64(rl.RequestsPerUnit))
	b = appendVarint(b, 2, uint64(rl.Unit))
	return appendString(b, 3, rl.Name)
}

// appendVarint appends field num of value x, omitted when 0 (proto3).
func appendVarint(b []byte, num protowire.Number, x uint64) []byte {
	if x == 0 {
		return b
	}
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), x)
}

func varintSize(num protowire.Number, x uint64) int {
	if x == 0 {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeVarint(x)
}

// appendString appends field num of value s, omitted when empty (proto3).
func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	return protowire.AppendString(protowire.AppendTag(b, num, protowire.BytesType), s)
}

func stringSize(num protowire.Number, s string) int {
	if s == "" {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeBytes(len(s))
}
