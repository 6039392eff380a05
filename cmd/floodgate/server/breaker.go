package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/cmd/floodgate/config"
)

// newBreaker is the one breaker in front of the store, shared by every
// rule: its state is the gauge floodgate_store_breaker_state (0 closed,
// 1 open, 2 half-open), and each transition is one log record.
func (s *Server) newBreaker(cfg *config.Config) (*floodgate.Breaker, error) {
	gauge := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "floodgate_store_breaker_state",
		Help: "The store's circuit breaker: 0 closed (the store is asked), 1 open (the failure mode answers), 2 half-open (one probe asks).",
	})
	if err := s.reg.Register(gauge); err != nil {
		return nil, err
	}
	log := floodgate.BreakerLogger(s.logger, cfg.Store.Type)
	return floodgate.NewBreaker(floodgate.BreakerConfig{
		Threshold: cfg.Store.Breaker.Threshold,
		Cooldown:  cfg.Store.Breaker.Cooldown.D(),
		OnChange: func(from, to floodgate.BreakerState) {
			gauge.Set(float64(to))
			log(from, to)
		},
	}), nil
}
