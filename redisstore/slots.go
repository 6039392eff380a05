package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate"
)

// acquireScript takes one in-flight slot as a lease: a sorted set per key
// and policy whose members are holders' tokens scored by their lease's end
// (server ms). Expired leases are dropped first, so a replica that crashed
// while holding slots gives them back when its leases end; the set itself
// expires with its last lease.
var acquireScript = redis.NewScript(acquireSource)

const acquireSource = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local quota, lease = tonumber(ARGV[1]), tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local n = redis.call('ZCARD', KEYS[1])
if n >= quota then return {0, 0} end
redis.call('ZADD', KEYS[1], now + lease, ARGV[3])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], tonumber(last[2]))
return {1, quota - n - 1}
`

// Acquire implements floodgate.Slots with leases (see acquireScript).
// lease bounds how long a crashed holder keeps a slot; at least 1 ms.
// Errors: ErrStoreUnavailable wrapping the cause, or ctx's error.
func (s *Store) Acquire(ctx context.Context, key string, c floodgate.Concurrency, lease time.Duration) (func(), int64, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, false, err
	}
	k := s.prefix + "{" + tag(key, s.maxKeyLen) + "}:" + c.Name + ":slots"
	var raw [12]byte
	rand.Read(raw[:])
	token := hex.EncodeToString(raw[:])
	ms := max(lease.Milliseconds(), 1)
	var res []int64
	err := s.call(ctx, func(ctx context.Context) error {
		var err error
		res, err = s.once(ctx, acquireScript, acquireSource, k, c.Max, ms, token).Result()
		return err
	})
	if err != nil {
		return nil, 0, false, err
	}
	if len(res) != 2 {
		return nil, 0, false, fmt.Errorf("%w: unexpected slot reply %v", floodgate.ErrStoreUnavailable, res)
	}
	if res[0] != 1 {
		return nil, 0, false, nil
	}
	var once sync.Once
	release := func() {
		// Best effort, detached from the request (call adds the timeout):
		// if it fails, the lease ends anyway.
		once.Do(func() {
			s.call(context.WithoutCancel(ctx), func(ctx context.Context) error { return s.client.ZRem(ctx, k, token).Err() })
		})
	}
	return release, res[1], true, nil
}

// once runs a script of one key, sent at most once (see scriptCmd): by
// its SHA-1, and by its source if the server lacks it (nothing ran then).
func (s *Store) once(ctx context.Context, sc *redis.Script, source, key string, args ...any) *scriptCmd {
	cmd := newScriptCmd(ctx, append([]any{"evalsha", sc.Hash(), 1, key}, args...)...)
	if err := s.client.Process(ctx, cmd); err == nil || !strings.HasPrefix(err.Error(), "NOSCRIPT") {
		return cmd
	}
	cmd = newScriptCmd(ctx, append([]any{"eval", source, 1, key}, args...)...)
	_ = s.client.Process(ctx, cmd)
	return cmd
}

// call runs f under the per-call timeout. f runs on its own goroutine
// because go-redis honours context deadlines on sockets only when the
// client was built with ContextTimeoutEnabled.
func (s *Store) call(ctx context.Context, f func(context.Context) error) error {
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- f(cctx) }()
	select {
	case err := <-done:
		if err != nil {
			return s.unavailable(ctx, err)
		}
		return nil
	case <-cctx.Done():
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return s.timedOut()
	}
}
