package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"math/rand/v2"
	"os"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/envoyproxy/go-control-plane/pkg/client/sotw/v3"
	rlconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/floodgate/floodgate/cmd/floodgate/config"
	"github.com/floodgate/floodgate/envoyrls"
)

// rlsRules is what the envoy_rls rules come from besides the files: the
// xDS snapshot in force, and the counters of every load.
type rlsRules struct {
	domains []*envoyrls.Domain // the xDS snapshot in force; guarded by Server.mu
	loaded  atomic.Bool        // an xDS snapshot was applied
	// loadSuccess and loadError count loads of the envoy_rls rules (a
	// configuration that compiled them, an xDS snapshot), under
	// envoyproxy/ratelimit's names.
	loadSuccess, loadError prometheus.Counter
	snapshots              *prometheus.CounterVec
	stop                   context.CancelFunc
	done                   chan struct{}
}

func newRLSRules(reg prometheus.Registerer) (*rlsRules, error) {
	x := &rlsRules{
		loadSuccess: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ratelimit_service_config_load_success",
			Help: "Loads of the envoy_rls rules that succeeded (a configuration that compiled them, or an xDS snapshot), as envoyproxy/ratelimit names them.",
		}),
		loadError: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ratelimit_service_config_load_error",
			Help: "Loads of the envoy_rls rules that failed and left the rules in force serving, as envoyproxy/ratelimit names them.",
		}),
		snapshots: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "floodgate_envoy_xds_snapshots_total",
			Help: "RateLimitConfig snapshots received over xDS, by result: ack (applied) or nack (refused; the rules in force keep serving).",
		}, []string{"result"}),
	}
	for _, c := range []prometheus.Collector{x.loadSuccess, x.loadError, x.snapshots} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return x, nil
}

// count adds a load's result to ratelimit_service_config_load_*.
func (x *rlsRules) count(err error) {
	if err != nil {
		x.loadError.Inc()
	} else {
		x.loadSuccess.Inc()
	}
}

// RLSReady reports whether the envoy_rls rules are in force: always with
// files alone; with xDS, once a first snapshot was applied.
func (s *Server) RLSReady() bool {
	e := s.start.EnvoyRLS
	if e == nil || e.XDS == nil {
		return true
	}
	s.mu.Lock()
	x := s.xds
	s.mu.Unlock()
	return x != nil && x.loaded.Load()
}

// startXDS follows the management server until stopXDS.
func (s *Server) startXDS(c *config.XDS) {
	ctx, cancel := context.WithCancel(context.Background())
	s.mu.Lock()
	x := s.xds
	x.stop, x.done = cancel, make(chan struct{})
	s.mu.Unlock()
	go func() {
		defer close(x.done)
		s.followXDS(ctx, c)
	}()
}

func (s *Server) stopXDS() {
	s.mu.Lock()
	x := s.xds
	s.mu.Unlock()
	if x == nil || x.stop == nil {
		return
	}
	x.stop()
	<-x.done
}

// followXDS keeps one ADS stream open, reconnecting after a failure with
// a jittered exponential backoff that a received snapshot resets.
func (s *Server) followXDS(ctx context.Context, c *config.XDS) {
	b := backoff{initial: c.BackoffInitial.D(), max: c.BackoffMax.D()}
	for {
		err := s.streamXDS(ctx, c, &b)
		if ctx.Err() != nil {
			return
		}
		d := b.next()
		s.logger.Warn("xDS stream ended; reconnecting", "server", c.Server, "error", err, "after", d)
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
	}
}

// streamXDS runs one ADS stream: every response is a whole snapshot,
// applied and ACKed, or NACKed with the reason while the rules in force
// keep serving.
func (s *Server) streamXDS(ctx context.Context, c *config.XDS, b *backoff) error {
	opts, err := xdsDialOptions(c)
	if err != nil {
		return err
	}
	conn, err := grpc.NewClient(c.Server, opts...)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(metadata.NewOutgoingContext(ctx, metadata.New(c.Headers)))
	defer cancel()
	ads := sotw.NewADSClient(ctx, xdsNode(c), envoyrls.TypeURL)
	if err := ads.InitConnect(conn); err != nil {
		return err
	}
	s.logger.Info("xDS stream open", "server", c.Server, "node_id", c.NodeID)
	for {
		resp, err := ads.Fetch()
		if err != nil {
			return err
		}
		b.reset()
		if err := s.answerXDS(ads, resp.Resources, c.Server); err != nil {
			return err
		}
	}
}

// answerXDS applies one snapshot and ACKs it, or NACKs it with the reason
// it did not load; the error is the stream's, from sending the answer.
func (s *Server) answerXDS(ads sotw.ADSClient, resources []*anypb.Any, server string) error {
	if err := s.applyXDS(resources); err != nil {
		s.xds.snapshots.WithLabelValues("nack").Inc()
		s.logger.Error("xDS snapshot refused; the rules in force keep serving", "server", server, "error", err)
		return ads.Nack(err.Error())
	}
	s.xds.snapshots.WithLabelValues("ack").Inc()
	return ads.Ack()
}

// applyXDS translates a snapshot, validates and compiles it with the
// files' domains, and swaps the rules in at once. Counters live in the
// store under each limit's name or descriptor path, so a limit the
// snapshot keeps keeps counting where it was.
func (s *Server) applyXDS(resources []*anypb.Any) error {
	domains, err := fromResources(resources)
	if err != nil {
		s.xds.count(err)
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.state.Load()
	prev := s.xds.domains
	s.xds.domains = domains
	r, err := s.rulesFor(st.cfg)
	s.xds.count(err)
	if err != nil {
		s.xds.domains = prev
		return err
	}
	st.rls.Store(r)
	s.xds.loaded.Store(true)
	s.logger.Info("xDS rules applied", "domains", len(domains))
	return nil
}

// fromResources translates a snapshot's RateLimitConfig resources.
func fromResources(resources []*anypb.Any) ([]*envoyrls.Domain, error) {
	domains := make([]*envoyrls.Domain, 0, len(resources))
	for i, r := range resources {
		var pc rlconfv3.RateLimitConfig
		if err := r.UnmarshalTo(&pc); err != nil {
			return nil, fmt.Errorf("resource %d: %w", i, err)
		}
		d, err := envoyrls.FromProto(&pc)
		if err != nil {
			return nil, err
		}
		domains = append(domains, d)
	}
	return domains, nil
}

// xdsNode is the node the management server keys its snapshots by.
func xdsNode(c *config.XDS) *corev3.Node {
	md := map[string]any{}
	for k, v := range c.NodeMetadata {
		md[k] = v
	}
	st, _ := structpb.NewStruct(md) // string values cannot fail
	return &corev3.Node{Id: c.NodeID, Metadata: st}
}

// xdsDialOptions reads the TLS files at each connection, so a rotated
// certificate is used from the next reconnection on.
func xdsDialOptions(c *config.XDS) ([]grpc.DialOption, error) {
	var opts []grpc.DialOption
	if c.MaxMessageBytes > 0 {
		opts = append(opts, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(c.MaxMessageBytes)))
	}
	t := c.TLS
	if t == nil {
		return append(opts, grpc.WithTransportCredentials(insecure.NewCredentials())), nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("xds tls: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("xds tls: %s holds no PEM certificate", t.CAFile)
		}
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("xds tls: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return append(opts, grpc.WithTransportCredentials(credentials.NewTLS(tc))), nil
}

// backoff is a jittered exponential wait: each next doubles the bound
// up to max and waits a random time in [bound/2, bound], so replicas cut
// off together do not come back together.
type backoff struct {
	initial, max, bound time.Duration
}

func (b *backoff) next() time.Duration {
	if b.bound == 0 {
		b.bound = b.initial
	} else {
		b.bound = min(2*b.bound, b.max)
	}
	half := b.bound / 2
	return half + rand.N(b.bound-half+1)
}

func (b *backoff) reset() { b.bound = 0 }
