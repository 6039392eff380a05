package main

import (
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// gubernator's messages are written and read with protowire, from the
// field numbers of its gubernator.proto, so that the benchmark needs none
// of its code.

// gubernatorRequest is a GetRateLimitsReq of one RateLimitReq: name
// "bench", unique_key key, 1 hit of a token bucket of 1,000,000,000 an
// hour, so the quota is never reached.
func gubernatorRequest(key string) []byte {
	var r []byte
	r = protowire.AppendTag(r, 1, protowire.BytesType)
	r = protowire.AppendString(r, "bench")
	r = protowire.AppendTag(r, 2, protowire.BytesType)
	r = protowire.AppendString(r, key)
	for _, f := range [][2]uint64{{3, 1}, {4, 1_000_000_000}, {5, 3_600_000}} {
		r = protowire.AppendTag(r, protowire.Number(f[0]), protowire.VarintType)
		r = protowire.AppendVarint(r, f[1])
	}
	var req []byte
	req = protowire.AppendTag(req, 1, protowire.BytesType)
	return protowire.AppendBytes(req, r)
}

// gubernatorStatus reads the status (0 under the limit) of the first
// response of a GetRateLimitsResp; -1 when there is none.
func gubernatorStatus(b []byte) int {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return -1
		}
		b = b[n:]
		if num == 1 && typ == protowire.BytesType {
			resp, _ := protowire.ConsumeBytes(b)
			return int(varintField(resp, 1))
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return -1
		}
		b = b[n:]
	}
	return -1
}

func varintField(b []byte, field protowire.Number) uint64 {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0
		}
		b = b[n:]
		if num == field && typ == protowire.VarintType {
			v, _ := protowire.ConsumeVarint(b)
			return v
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return 0
		}
		b = b[n:]
	}
	return 0
}

// rawMessage is a message already in its wire form.
type rawMessage []byte

// rawCodec sends and receives rawMessage as it is.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*rawMessage))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*rawMessage) = data.Materialize()
	return nil
}

func (rawCodec) Name() string { return "proto" }

var _ encoding.CodecV2 = rawCodec{}
