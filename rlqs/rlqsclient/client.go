// Package rlqsclient is a reference client of Envoy's Rate Limit Quota
// Service, doing what Envoy's rate_limit_quota filter does: the first
// request of a bucket subscribes it (an immediate report) and is decided
// by the no-assignment behaviour; usage is reported every interval; the
// current assignment is enforced locally; an assignment past its time to
// live falls back per the expired-assignment behaviour, and then, or when
// the server says so, the bucket is abandoned and starts over.
package rlqsclient

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Settings are the filter's, for every bucket (Envoy's
// RateLimitQuotaFilterConfig.domain and RateLimitQuotaBucketSettings).
type Settings struct {
	// Domain is sent in each stream's first message; required.
	Domain string
	// Interval is reporting_interval; required.
	Interval time.Duration
	// NoAssignment is no_assignment_behavior.fallback_rate_limit, applied
	// until the first assignment; nil allows all.
	NoAssignment *typev3.RateLimitStrategy
	// Expired is expired_assignment_behavior; nil abandons a bucket whose
	// assignment expired.
	Expired *Expired
}

// Expired is expired_assignment_behavior.
type Expired struct {
	// Timeout is expired_assignment_behavior_timeout: how long the
	// behaviour applies before the bucket is abandoned; 0 is no limit.
	Timeout time.Duration
	// Fallback is fallback_rate_limit; when nil, ReuseLast decides.
	Fallback *typev3.RateLimitStrategy
	// ReuseLast is reuse_last_assignment; false with a nil Fallback
	// allows all.
	ReuseLast bool
}

// State is where a bucket stands.
type State int

// The states of a bucket, as the filter's documentation names them.
const (
	Untracked    State = iota // no request matched it yet, or abandoned
	NoAssignment              // subscribed, waiting for the first assignment
	Active                    // an assignment within its time to live
	ExpiredState              // the assignment expired; the fallback applies
)

// Client reports to one RLQS server and decides requests locally. It is
// safe for concurrent use.
type Client struct {
	set Settings
	now func() time.Time
	rpc rlqspb.RateLimitQuotaServiceClient

	mu      sync.Mutex
	buckets map[string]*bucket
	answers uint64
	answer  chan struct{} // closed and replaced on every answer
	fresh   chan struct{} // a new bucket wants an immediate report

	sendMu sync.Mutex // one sender at a time; guards stream
	stream rlqspb.RateLimitQuotaService_StreamRateLimitQuotasClient
	cancel context.CancelFunc
}

type bucket struct {
	id              map[string]string
	state           State
	enforce         local
	active          *typev3.RateLimitStrategy
	expires         time.Time // zero: never
	allowed, denied uint64
	since           time.Time
}

// ErrInvalidSettings is returned by New for settings it cannot use.
var ErrInvalidSettings = errors.New("rlqsclient: invalid settings")

// New returns a client of the RateLimitQuotaService on conn; now is its
// clock (nil: time.Now). The stream opens at the first report.
func New(conn grpc.ClientConnInterface, set Settings, now func() time.Time) (*Client, error) {
	if set.Domain == "" || set.Interval <= 0 {
		return nil, fmt.Errorf("%w: a domain and a positive interval are required", ErrInvalidSettings)
	}
	if now == nil {
		now = time.Now
	}
	return &Client{set: set, now: now, rpc: rlqspb.NewRateLimitQuotaServiceClient(conn),
		buckets: map[string]*bucket{}, answer: make(chan struct{}), fresh: make(chan struct{}, 1)}, nil
}

// Allow decides one request matched into the bucket id, locally.
func (c *Client) Allow(id map[string]string) bool {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	key := keyOf(id)
	b := c.buckets[key]
	if b != nil {
		b = c.expire(key, b, now)
	}
	if b == nil {
		b = &bucket{id: maps.Clone(id), state: NoAssignment, enforce: enforcer(c.set.NoAssignment, now), since: now}
		if c.set.NoAssignment == nil {
			b.enforce = blanket(true)
		}
		c.buckets[key] = b
		select {
		case c.fresh <- struct{}{}:
		default:
		}
	}
	ok := b.enforce.allow(now)
	if ok {
		b.allowed++
	} else {
		b.denied++
	}
	return ok
}

// expire moves b past its assignment's time to live; nil when abandoned.
func (c *Client) expire(key string, b *bucket, now time.Time) *bucket {
	if b.state == Active && !b.expires.IsZero() && !now.Before(b.expires) {
		e := c.set.Expired
		if e == nil {
			delete(c.buckets, key)
			return nil
		}
		b.state = ExpiredState
		switch {
		case e.Fallback != nil:
			b.enforce = enforcer(e.Fallback, now)
		case !e.ReuseLast:
			b.enforce = blanket(true)
		}
	}
	if b.state == ExpiredState && c.set.Expired.Timeout > 0 && !now.Before(b.expires.Add(c.set.Expired.Timeout)) {
		delete(c.buckets, key)
		return nil
	}
	return b
}

// State returns the state of the bucket id and its active strategy.
func (c *Client) State(id map[string]string) (State, *typev3.RateLimitStrategy) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := keyOf(id)
	b := c.buckets[key]
	if b != nil {
		b = c.expire(key, b, c.now())
	}
	if b == nil {
		return Untracked, nil
	}
	return b.state, b.active
}

// Report sends one message with every bucket's usage since its last
// report, opening the stream first if none is open.
func (c *Client) Report(ctx context.Context) error {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	first := false
	if c.stream == nil {
		sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		s, err := c.rpc.StreamRateLimitQuotas(sctx)
		if err != nil {
			cancel()
			return err
		}
		c.stream, c.cancel, first = s, cancel, true
		go c.receive(s)
	}
	m := c.usage()
	if len(m.BucketQuotaUsages) == 0 {
		return nil
	}
	if first {
		m.Domain = c.set.Domain
	}
	if err := c.stream.Send(m); err != nil {
		c.closeStream()
		return err
	}
	return nil
}

func (c *Client) usage() *rlqspb.RateLimitQuotaUsageReports {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	m := &rlqspb.RateLimitQuotaUsageReports{}
	for _, key := range slices.Sorted(maps.Keys(c.buckets)) {
		b := c.buckets[key]
		m.BucketQuotaUsages = append(m.BucketQuotaUsages, &rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{
			BucketId:           &rlqspb.BucketId{Bucket: maps.Clone(b.id)},
			TimeElapsed:        durationpb.New(now.Sub(b.since)),
			NumRequestsAllowed: b.allowed,
			NumRequestsDenied:  b.denied,
		})
		b.allowed, b.denied, b.since = 0, 0, now
	}
	return m
}

// closeStream drops the stream; the next report opens another. sendMu held.
func (c *Client) closeStream() {
	if c.stream != nil {
		c.cancel()
		c.stream = nil
	}
}

// receive applies the server's answers until the stream ends.
func (c *Client) receive(s rlqspb.RateLimitQuotaService_StreamRateLimitQuotasClient) {
	for {
		m, err := s.Recv()
		if err != nil {
			c.sendMu.Lock()
			if c.stream == s {
				c.closeStream()
			}
			c.sendMu.Unlock()
			return
		}
		c.apply(m)
	}
}

// apply follows rlqs.proto: a new or changed strategy, or any after
// expiry, replaces the active one (a fresh limiter); the same strategy
// only extends the time to live; abandon forgets the bucket.
func (c *Client) apply(m *rlqspb.RateLimitQuotaResponse) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, a := range m.BucketAction {
		key := keyOf(a.GetBucketId().GetBucket())
		b := c.buckets[key]
		if b == nil {
			continue
		}
		if a.GetAbandonAction() != nil {
			delete(c.buckets, key)
			continue
		}
		q := a.GetQuotaAssignmentAction()
		if q == nil {
			continue
		}
		if b.state != Active || !proto.Equal(q.RateLimitStrategy, b.active) {
			b.active, b.enforce, b.state = q.RateLimitStrategy, enforcer(q.RateLimitStrategy, now), Active
		}
		b.expires = time.Time{}
		if ttl := q.AssignmentTimeToLive; ttl != nil {
			b.expires = now.Add(ttl.AsDuration())
		}
	}
	c.answers++
	close(c.answer)
	c.answer = make(chan struct{})
}

// Sync reports and waits for the server's next answer.
func (c *Client) Sync(ctx context.Context) error {
	c.mu.Lock()
	wait := c.answer
	c.mu.Unlock()
	if err := c.Report(ctx); err != nil {
		return err
	}
	select {
	case <-wait:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Answers is the number of server messages applied so far.
func (c *Client) Answers() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.answers
}

// Run reports every Interval, and at once when a request subscribes a new
// bucket, until ctx ends. A failed report is retried at the next tick on a
// new stream.
func (c *Client) Run(ctx context.Context) {
	t := time.NewTicker(c.set.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			c.Close()
			return
		case <-t.C:
		case <-c.fresh:
		}
		_ = c.Report(ctx) // the stream is dropped and reopened next time
	}
}

// Close ends the stream.
func (c *Client) Close() {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	if c.stream != nil {
		_ = c.stream.CloseSend()
	}
	c.closeStream()
}

// keyOf names a bucket id regardless of its entries' order: each key and
// value length-prefixed, keys sorted (one entry, the usual id, sorts
// without a slice).
func keyOf(id map[string]string) string {
	b := make([]byte, 0, 64)
	put := func(k, v string) {
		b = strconv.AppendInt(b, int64(len(k)), 10)
		b = append(b, ':')
		b = append(b, k...)
		b = strconv.AppendInt(b, int64(len(v)), 10)
		b = append(b, ':')
		b = append(b, v...)
	}
	if len(id) == 1 {
		for k, v := range id {
			put(k, v)
		}
		return string(b)
	}
	for _, k := range slices.Sorted(maps.Keys(id)) {
		put(k, id[k])
	}
	return string(b)
}
