package rlqsclient

import (
	"time"

	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
)

// local enforces one RateLimitStrategy on this side of the stream.
type local interface {
	allow(now time.Time) bool
}

type blanket bool

func (b blanket) allow(time.Time) bool { return bool(b) }

// tokenBucket is Envoy's token bucket: full at first, TokensPerFill added
// every FillInterval (here continuously, pro rata), never above MaxTokens.
type tokenBucket struct {
	tokens, max, perSecond float64
	last                   time.Time
}

func (t *tokenBucket) allow(now time.Time) bool {
	if dt := now.Sub(t.last); dt > 0 {
		t.tokens = min(t.max, t.tokens+dt.Seconds()*t.perSecond)
		t.last = now
	}
	if t.tokens >= 1 {
		t.tokens--
		return true
	}
	return false
}

// perUnit is requests_per_time_unit: a count per window of the unit,
// aligned to the epoch.
type perUnit struct {
	limit  uint64
	unit   time.Duration
	window int64
	count  uint64
}

func (p *perUnit) allow(now time.Time) bool {
	if w := now.UnixNano() / int64(p.unit); w != p.window {
		p.window, p.count = w, 0
	}
	if p.count >= p.limit {
		return false
	}
	p.count++
	return true
}

var units = map[typev3.RateLimitUnit]time.Duration{
	typev3.RateLimitUnit_SECOND: time.Second,
	typev3.RateLimitUnit_MINUTE: time.Minute,
	typev3.RateLimitUnit_HOUR:   time.Hour,
	typev3.RateLimitUnit_DAY:    24 * time.Hour,
	// MONTH and YEAR are calendar units; a fixed length stands in.
	typev3.RateLimitUnit_MONTH: 30 * 24 * time.Hour,
	typev3.RateLimitUnit_YEAR:  365 * 24 * time.Hour,
}

// enforcer returns the local limiter of s; a nil strategy allows all, as
// the QuotaAssignmentAction's rate_limit_strategy says when unset.
func enforcer(s *typev3.RateLimitStrategy, now time.Time) local {
	switch v := s.GetStrategy().(type) {
	case *typev3.RateLimitStrategy_BlanketRule_:
		return blanket(v.BlanketRule == typev3.RateLimitStrategy_ALLOW_ALL)
	case *typev3.RateLimitStrategy_TokenBucket:
		tb := v.TokenBucket
		fill := float64(1)
		if tb.TokensPerFill != nil {
			fill = float64(tb.TokensPerFill.Value)
		}
		per := tb.GetFillInterval().AsDuration()
		if per <= 0 {
			return blanket(false)
		}
		return &tokenBucket{tokens: float64(tb.MaxTokens), max: float64(tb.MaxTokens), perSecond: fill / per.Seconds(), last: now}
	case *typev3.RateLimitStrategy_RequestsPerTimeUnit_:
		unit, ok := units[v.RequestsPerTimeUnit.TimeUnit]
		if !ok {
			return blanket(false)
		}
		return &perUnit{limit: v.RequestsPerTimeUnit.RequestsPerTimeUnit, unit: unit, window: -1}
	}
	return blanket(true)
}
