package grpclimit

import (
	"context"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
)

// costTaker takes the actual cost out of the metadata a handler sends
// (Config.CostKey): the first value under key, removed before it goes out.
type costTaker struct {
	key   string
	cost  int64
	found bool
}

func (c *costTaker) take(md metadata.MD) metadata.MD {
	vs, ok := md[c.key]
	if !ok {
		return md
	}
	md = md.Copy()
	delete(md, c.key)
	if len(md) == 0 {
		md = nil // nothing else to send
	}
	if len(vs) == 0 { // set with no value (an MD literal): no count
		return md
	}
	if n, err := strconv.ParseInt(strings.TrimSpace(vs[0]), 10, 64); err == nil && n >= 0 {
		c.cost, c.found = n, true
	}
	return md
}

// transportStream is a unary call's stream with the cost taken out of
// its header and trailer metadata.
type transportStream struct {
	grpc.ServerTransportStream
	*costTaker
}

func (s transportStream) SetHeader(md metadata.MD) error {
	return s.ServerTransportStream.SetHeader(s.take(md))
}

func (s transportStream) SendHeader(md metadata.MD) error {
	return s.ServerTransportStream.SendHeader(s.take(md))
}

func (s transportStream) SetTrailer(md metadata.MD) error {
	return s.ServerTransportStream.SetTrailer(s.take(md))
}

// serverStream is a stream call's stream with the cost taken out of its
// header and trailer metadata, whether set on it or through its context
// (grpc.SetTrailer).
type serverStream struct {
	grpc.ServerStream
	*costTaker
	ctx context.Context
}

func (s serverStream) Context() context.Context { return s.ctx }

func (s serverStream) SetHeader(md metadata.MD) error  { return s.ServerStream.SetHeader(s.take(md)) }
func (s serverStream) SendHeader(md metadata.MD) error { return s.ServerStream.SendHeader(s.take(md)) }
func (s serverStream) SetTrailer(md metadata.MD)       { s.ServerStream.SetTrailer(s.take(md)) }

// withCost returns ctx with its transport stream's metadata passing c.
func withCost(ctx context.Context, c *costTaker) context.Context {
	return grpc.NewContextWithServerTransportStream(ctx, transportStream{grpc.ServerTransportStreamFromContext(ctx), c})
}

// settle charges the call's actual cost, if its handler reported one, in
// place of the 1 it was admitted with; a failure goes unreported, as the
// call has ended.
func (l *Limiter) settle(ctx context.Context, out *engine.Outcome, c *costTaker, at time.Time) {
	if !c.found {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = out.Settle(ctx, floodgate.Cost{Requests: 1}, floodgate.Cost{Requests: c.cost}, at)
}

// now is the time a refund names its charge by: the fields' clock.
func (l *Limiter) now() time.Time {
	if l.fields.Now != nil {
		return l.fields.Now()
	}
	return time.Now()
}
