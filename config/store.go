package config

import "time"

// Breaker configures the circuit breaker in front of the store
// (floodgate.Breaker).
type Breaker struct {
	// Threshold is the consecutive failed calls that open it; default 5.
	Threshold int `yaml:"threshold"`
	// Cooldown is how long it stays open before one call probes the
	// store; default 200ms.
	Cooldown Duration `yaml:"cooldown"`
}

// Defaults of the store's breaker (floodgate.DefaultBreakerThreshold and
// DefaultBreakerCooldown).
const (
	DefaultBreakerThreshold = 5
	DefaultBreakerCooldown  = 200 * time.Millisecond
)

func (v *validator) breaker() {
	b := &v.cfg.Store.Breaker
	if !v.has("store.breaker.threshold") {
		b.Threshold = DefaultBreakerThreshold
	} else if b.Threshold < 1 {
		v.fail("store.breaker.threshold", "must be at least 1, got %d", b.Threshold)
	}
	if !v.has("store.breaker.cooldown") {
		b.Cooldown = Duration(DefaultBreakerCooldown)
	} else if b.Cooldown <= 0 {
		v.fail("store.breaker.cooldown", "must be positive")
	}
}
