package rlqs

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/rlqs/internal/nilcheck"
)

// Defaults of Options.
const (
	DefaultInterval      = 125 * time.Millisecond // Envoy refuses a reporting_interval of 100 ms or less
	DefaultTTLIntervals  = 5
	DefaultIdleAfter     = time.Minute
	DefaultMaxBuckets    = 4096
	DefaultMaxEntries    = 16
	DefaultMaxEntryBytes = 256
	DefaultMaxMessages   = 1024 // a burst of new buckets each sends its first report at once
)

// Options configures a Server. Zero fields take their defaults.
type Options struct {
	// Interval is the report interval the server expects of its clients
	// (Envoy's reporting_interval): a lease refills once per Interval, and
	// a report sooner than Interval/2 after a bucket's last lease only
	// updates its accounting. Default DefaultInterval.
	Interval time.Duration
	// TTL is every assignment's assignment_time_to_live; default
	// DefaultTTLIntervals × Interval.
	TTL time.Duration
	// IdleAfter abandons a bucket whose reports counted no request for
	// this long; default DefaultIdleAfter.
	IdleAfter time.Duration
	// MaxBuckets bounds the buckets one stream may hold; default
	// DefaultMaxBuckets.
	MaxBuckets int
	// MaxEntries bounds the entries of one BucketId, MaxEntryBytes the
	// bytes of one entry's key and value together; defaults
	// DefaultMaxEntries and DefaultMaxEntryBytes.
	MaxEntries, MaxEntryBytes int
	// MaxMessages bounds the messages one stream may send per Interval;
	// default DefaultMaxMessages.
	MaxMessages int
	// Slack is how late, in intervals, a report or the answer to it may
	// be while the client's bucket keeps refilling: a lease holds that
	// much more in reserve, so late reports over-admit less and a tight
	// quota refuses a little more (docs/BENCHMARKS.md, "RLQS"). 0 to 1;
	// default 0.
	Slack float64
	// Now is the server's clock; default time.Now. The Store keeps its own.
	Now func() time.Time
	// Logger gets store failures; default slog.Default().
	Logger *slog.Logger
	// Registerer, if set, gets floodgate_rlqs_store_calls_total{result},
	// floodgate_rlqs_streams and floodgate_rlqs_streams_refused_total{code}.
	Registerer prometheus.Registerer
}

func (o *Options) fill() error {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	if o.Interval == 0 {
		o.Interval = DefaultInterval
	}
	if o.TTL == 0 {
		o.TTL = DefaultTTLIntervals * o.Interval
	}
	if o.IdleAfter == 0 {
		o.IdleAfter = DefaultIdleAfter
	}
	def(&o.MaxBuckets, DefaultMaxBuckets)
	def(&o.MaxEntries, DefaultMaxEntries)
	def(&o.MaxEntryBytes, DefaultMaxEntryBytes)
	def(&o.MaxMessages, DefaultMaxMessages)
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Interval < time.Millisecond || o.TTL < 0 || o.IdleAfter < 0 || o.MaxBuckets < 0 || o.MaxEntries < 0 || o.MaxEntryBytes < 0 || o.MaxMessages < 0 || o.Slack < 0 || o.Slack > 1 {
		return fmt.Errorf("%w: rlqs: an option is out of range (interval %v ≥ 1ms, slack 0 to 1, the others ≥ 0)", floodgate.ErrInvalidOption, o.Interval)
	}
	return nil
}

// Server is the RateLimitQuotaService. It is safe for concurrent use; each
// stream is served by its own goroutine.
type Server struct {
	rlqspb.UnimplementedRateLimitQuotaServiceServer
	store floodgate.Store
	opt   Options
	rules atomic.Pointer[Rules]
	calls atomic.Uint64
	m     *metrics

	mu      sync.Mutex
	shared  map[string]*shared   // by bucket key, across this server's streams
	streams map[*stream]struct{} // for reload notices
}

// shared is what this server's streams know together of one bucket.
type shared struct {
	demand    float64 // requests/s, summed over the streams holding the bucket
	holders   int
	remaining int64     // the quota left after the last Take
	until     time.Time // when remaining stops being true (the Take's ResetAfter); zero until a Take ran
	// pool is reserved in the Store and held by no stream: what a stream's
	// shrunk lease gave back, for the other streams; valid in poolWindow
	// (windowOf) only.
	pool       int64
	poolWindow int64
}

// left is what the bucket has left as far as this server knows: remaining
// until the quota next grows, then the whole capacity (a Take finds out).
func (sh *shared) left(p floodgate.Policy, now time.Time) int64 {
	if now.Before(sh.until) {
		return sh.remaining
	}
	return p.Capacity()
}

// NewServer returns a Server deciding with store under rules. Errors wrap
// floodgate.ErrInvalidOption for a nil store or rules, or an option out of
// range.
func NewServer(store floodgate.Store, rules *Rules, opt Options) (*Server, error) {
	if nilcheck.Nil(store) || rules == nil {
		return nil, fmt.Errorf("%w: rlqs: nil store or rules", floodgate.ErrInvalidOption)
	}
	if err := opt.fill(); err != nil {
		return nil, err
	}
	m, err := newMetrics(opt.Registerer)
	if err != nil {
		return nil, fmt.Errorf("rlqs: metrics: %w", err)
	}
	s := &Server{store: store, opt: opt, m: m, shared: map[string]*shared{}, streams: map[*stream]struct{}{}}
	s.rules.Store(rules)
	return s, nil
}

// Register adds the service to g.
func (s *Server) Register(g *grpc.Server) { rlqspb.RegisterRateLimitQuotaServiceServer(g, s) }

// SetRules replaces the rules. Every stream then abandons its buckets no
// rule matches any more (AbandonAction) and leases anew, at its next
// report, those whose policy changed.
func (s *Server) SetRules(r *Rules) {
	if r == nil {
		return
	}
	s.rules.Store(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	for st := range s.streams {
		select {
		case st.reload <- struct{}{}:
		default: // one notice pending is enough
		}
	}
}

// StoreCalls is the number of Store.Take calls made so far.
func (s *Server) StoreCalls() uint64 { return s.calls.Load() }

// StreamRateLimitQuotas serves one client: its first message names the
// domain, every message reports usage per bucket, and the answers carry
// assignments and abandons. Errors, which end the stream and change no
// state: InvalidArgument for a missing, unknown or changed domain, an
// empty or oversized BucketId; ResourceExhausted for more than MaxBuckets
// buckets or MaxMessages messages per Interval.
func (s *Server) StreamRateLimitQuotas(gs rlqspb.RateLimitQuotaService_StreamRateLimitQuotasServer) error {
	st := &stream{srv: s, reload: make(chan struct{}, 1), buckets: map[string]*bucket{}}
	s.mu.Lock()
	s.streams[st] = struct{}{}
	s.mu.Unlock()
	s.m.streams.Inc()
	defer s.drop(st)

	msgs := make(chan *rlqspb.RateLimitQuotaUsageReports)
	errc := make(chan error, 1)
	go func() {
		for {
			m, err := gs.Recv()
			if err != nil {
				errc <- err
				return
			}
			select {
			case msgs <- m:
			case <-gs.Context().Done():
				return
			}
		}
	}()
	for {
		var resp *rlqspb.RateLimitQuotaResponse
		select {
		case m := <-msgs:
			r, err := st.handle(gs.Context(), m)
			if err != nil {
				s.m.refused(err)
				return err
			}
			resp = r
		case <-st.reload:
			resp = st.reconcile()
		case err := <-errc:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case <-gs.Context().Done():
			return gs.Context().Err()
		}
		if resp != nil && len(resp.BucketAction) > 0 {
			if err := gs.Send(resp); err != nil {
				return err
			}
		}
	}
}

// drop forgets a finished stream and its share of every bucket's demand.
// What its leases reserved stays spent: the quota errs towards refusing.
func (s *Server) drop(st *stream) {
	s.m.streams.Dec()
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.streams, st)
	for k, b := range st.buckets {
		s.leave(k, b.demand)
	}
}

// leave removes one holder's demand from a bucket; s.mu held.
func (s *Server) leave(key string, demand float64) {
	sh := s.shared[key]
	if sh == nil {
		return
	}
	sh.demand -= demand
	if sh.holders--; sh.holders <= 0 {
		delete(s.shared, key)
	}
}

func invalid(format string, a ...any) error {
	return status.Errorf(codes.InvalidArgument, "rlqs: "+format, a...)
}
