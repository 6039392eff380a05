package envoyrls

import (
	"context"
	"sync"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
)

// ServerCodec is the grpc.ServerOption a server that Registers a Service
// must be built with: a codec (grpc.ForceServerCodecV2) that reads
// RateLimitRequest and writes RateLimitResponse with protowire (wire.go),
// and hands every other message (grpc.health.v1, reflection, other
// services on the same server) to grpc's proto codec unchanged.
func ServerCodec() grpc.ServerOption { return grpc.ForceServerCodecV2(codec{}) }

// codec is ServerCodec's encoding.CodecV2.
type codec struct{}

var protoCodec = encoding.GetCodecV2(proto.Name)

// answerSize is what a pooled answer buffer holds: above grpc's pooling
// threshold (mem.NewBuffer pools only larger buffers), and room for a
// response of many descriptors; a larger one grows it once.
const answerSize = 4 << 10

// Marshal hands an answer (a mem.Buffer the handler wrote) to grpc, which
// frees it once sent; anything else goes to the proto codec.
func (codec) Marshal(v any) (mem.BufferSlice, error) {
	if b, ok := v.(mem.Buffer); ok {
		return mem.BufferSlice{b}, nil
	}
	return protoCodec.Marshal(v)
}

// Unmarshal copies a RateLimitRequest into the request's own buffer (grpc
// reuses data once this returns) and parses it; anything else goes to
// the proto codec. Errors: errWire.
func (codec) Unmarshal(data mem.BufferSlice, v any) error {
	r, ok := v.(*request)
	if !ok {
		return protoCodec.Unmarshal(data, v)
	}
	for _, b := range data {
		r.buf = append(r.buf, b.ReadOnlyData()...)
	}
	return r.parse()
}

func (codec) Name() string { return proto.Name }

// serviceDesc is rlsv3's RateLimitService with a handler that decodes
// into a pooled request and answers with a pooled buffer: the service's
// name, method and reflection metadata are the generated code's.
var serviceDesc = grpc.ServiceDesc{
	ServiceName: rlsv3.RateLimitService_ServiceDesc.ServiceName,
	HandlerType: (*rlsv3.RateLimitServiceServer)(nil),
	Methods:     []grpc.MethodDesc{{MethodName: "ShouldRateLimit", Handler: handle}},
	Metadata:    rlsv3.RateLimitService_ServiceDesc.Metadata,
}

var requests = sync.Pool{New: func() any { return new(request) }}

// maxPooled is the largest request buffer put back in the pool: a rare
// large request must not keep its memory for every later one.
const maxPooled = 64 << 10

// handle is ShouldRateLimit's grpc.MethodDesc handler. An interceptor
// sees the request as an *envoyrls.request and the answer as a
// mem.Buffer.
func handle(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	s := srv.(*Service)
	r := requests.Get().(*request)
	r.reset()
	defer func() {
		if cap(r.buf) <= maxPooled {
			requests.Put(r)
		}
	}()
	if err := dec(r); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return s.answer(ctx, r)
	}
	info := &grpc.UnaryServerInfo{Server: s, FullMethod: rlsv3.RateLimitService_ShouldRateLimit_FullMethodName}
	return interceptor(ctx, r, info, func(ctx context.Context, req any) (any, error) {
		return s.answer(ctx, req.(*request))
	})
}

// answer decides r and returns the response's wire form in a buffer of
// grpc's pool (mem.Buffer, freed by grpc once sent).
func (s *Service) answer(ctx context.Context, r *request) (any, error) {
	resp := responses.Get().(*response)
	defer putResponse(resp)
	if err := s.serve(ctx, r, resp); err != nil {
		return nil, err
	}
	pool := mem.DefaultBufferPool()
	buf := pool.Get(answerSize)
	*buf = resp.appendWire((*buf)[:0])
	return mem.NewBuffer(buf, pool), nil
}

var responses = sync.Pool{New: func() any { return new(response) }}

func putResponse(resp *response) {
	clear(resp.statuses)
	clear(resp.headers)
	*resp = response{statuses: resp.statuses[:0], headers: resp.headers[:0]}
	responses.Put(resp)
}
