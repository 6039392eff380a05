package server

import (
	"context"
	"fmt"

	"github.com/floodgate/floodgate/cmd/floodgate/config"
	"github.com/floodgate/floodgate/rlqs"
)

// FaceRLQS is Envoy's rate limit quota service, a gRPC listener of its own.
const FaceRLQS Face = "rlqs"

// rlqsService is the gRPC service name the health service reports on.
const rlqsService = "envoy.service.rate_limit_quota.v3.RateLimitQuotaService"

// rlqsFace is the running gRPC server of the rlqs face. Its leases are
// taken from the daemon's store directly, not through the engine: the
// failure mode of a lease is the client's expired_assignment_behavior.
type rlqsFace struct {
	*grpcFace
	svc *rlqs.Server
}

// startRLQS listens on rlqs.listen with the quota service, grpc.health.v1
// and server reflection.
func (s *Server) startRLQS() error {
	r := s.start.RLQS
	if r == nil {
		return nil
	}
	svc, err := rlqs.NewServer(s.store, r.Rules, rlqs.Options{Interval: r.Interval.D(), TTL: r.TTL.D(), Slack: r.Slack, Logger: s.logger, Registerer: s.reg})
	if err != nil {
		return fmt.Errorf("server: %s: %w", FaceRLQS, err)
	}
	// listeners.tls, when set, is the service's transport security too.
	ln, err := listen(r.Listen, s.start.Listeners, s.logger)
	if err != nil {
		return fmt.Errorf("server: %s: %w", FaceRLQS, err)
	}
	s.rlqs = &rlqsFace{s.serveGRPC(FaceRLQS, rlqsService, ln, svc.Register), svc}
	return nil
}

// applyRLQS gives a running face the rules of a new configuration: its
// streams abandon the buckets no rule matches any more. The listener,
// interval, TTL and slack are read at start.
func (s *Server) applyRLQS(cfg *config.Config) {
	f, o, n := s.rlqs, s.start.RLQS, cfg.RLQS
	if f == nil || n == nil {
		if (o == nil) != (n == nil) {
			s.logger.Warn("configuration change needs a restart", "change", "rlqs on or off")
		}
		return
	}
	if o.Listen != n.Listen || o.Interval != n.Interval || o.TTL != n.TTL || o.Slack != n.Slack {
		s.logger.Warn("configuration change needs a restart", "change", "rlqs listen, interval, ttl or slack")
	}
	f.svc.SetRules(n.Rules)
}

// stopRLQS reports NOT_SERVING and ends the streams: a stream lives as
// long as its client, so waiting for them would wait for ever; clients
// reconnect to another replica and keep their assignments until the TTL.
func (s *Server) stopRLQS(context.Context) {
	if f := s.rlqs; f != nil {
		f.health.Shutdown()
		f.g.Stop()
	}
}
