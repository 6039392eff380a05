package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate"
)

// TestNewRefuses: a nil client (also a typed nil), a nil option and an
// option out of range are ErrInvalidOption; nothing panics later instead.
func TestNewRefuses(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled: New does not contact Redis
	defer rdb.Close()
	for name, tc := range map[string]struct {
		client redis.UniversalClient
		opts   []Option
		msg    string
	}{
		"nil client":         {nil, nil, "nil client"},
		"nil *redis.Client":  {(*redis.Client)(nil), nil, "nil client"},
		"nil *ClusterClient": {(*redis.ClusterClient)(nil), nil, "nil client"},
		"nil option":         {rdb, []Option{nil}, "nil option"},
		"zero timeout":       {rdb, []Option{WithTimeout(0)}, "timeout must be positive"},
		"brace in prefix":    {rdb, []Option{WithPrefix("a{")}, "contains '{' or '}'"},
		"nil clock":          {rdb, []Option{WithClock(nil)}, "nil clock"},
		"batch of 0":         {rdb, []Option{WithBatching(0, 1)}, "maxBatch and maxInFlight ≥ 1"},
	} {
		t.Run(name, func(t *testing.T) {
			s, err := New(tc.client, tc.opts...)
			if s != nil || !errors.Is(err, floodgate.ErrInvalidOption) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("New = %v, %v; want ErrInvalidOption mentioning %q", s, err, tc.msg)
			}
		})
	}
	s, err := New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Ping(context.Background()).Err(); err == nil || errors.Is(err, redis.ErrClosed) {
		t.Fatalf("after Store.Close the client must still be open (its dial fails, it is not closed): %v", err)
	}
}

// TestClientTimeoutIsDeadline: when go-redis times out first (its
// ReadTimeout, here shorter than the store's per-call timeout, against a
// server stuck in DEBUG SLEEP), the error is ErrStoreUnavailable and also
// context.DeadlineExceeded, as for the store's own timeout, whether or not
// the client honours contexts.
func TestClientTimeoutIsDeadline(t *testing.T) {
	p := startPrivateRedis(t)
	// The function library loads once, through a client without the short
	// read timeout: on a busy machine that first call can outlast it.
	warm := redis.NewClient(&redis.Options{Addr: p.addr()})
	defer warm.Close()
	if ws, err := New(warm); err != nil {
		t.Fatal(err)
	} else if err := ws.Take(context.Background(), "warm", one, onePolicy(floodgate.GCRA), make([]floodgate.Result, 1)); err != nil {
		t.Fatal(err)
	}
	for _, honours := range []bool{false, true} {
		t.Run(fmt.Sprintf("ContextTimeoutEnabled=%v", honours), func(t *testing.T) {
			// 250 ms: time for a call on a busy machine, a quarter of the 1 s sleep below.
			rdb := redis.NewClient(&redis.Options{Addr: p.addr(), ContextTimeoutEnabled: honours, ReadTimeout: 250 * time.Millisecond, MaxRetries: -1})
			defer rdb.Close()
			s, err := New(rdb, WithTimeout(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			res := make([]floodgate.Result, 1)
			ps := onePolicy(floodgate.GCRA)
			if err := s.Take(context.Background(), "k", one, ps, res); err != nil {
				t.Fatal(err)
			}
			sleeper := redis.NewClient(&redis.Options{Addr: p.addr()})
			defer sleeper.Close()
			done := make(chan struct{})
			go func() { sleeper.Do(context.Background(), "debug", "sleep", "1"); close(done) }()
			defer func() { <-done }()
			time.Sleep(100 * time.Millisecond) // let the sleep begin
			err = s.Take(context.Background(), "k", one, ps, res)
			if !errors.Is(err, floodgate.ErrStoreUnavailable) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "i/o timeout") {
				t.Fatalf("go-redis read timeout: %v; want ErrStoreUnavailable and context.DeadlineExceeded, naming the i/o timeout", err)
			}
		})
	}
}
