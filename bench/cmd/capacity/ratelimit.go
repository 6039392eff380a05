package main

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/bench/internal/redisload"
)

// ratelimit is no algorithm of Floodgate's: -alg ratelimit measures, under
// the same load, the Redis pattern of envoyproxy/ratelimit's fixed-window
// cache, so that the two meet the same moments of a noisy machine.
const ratelimit floodgate.Algorithm = 255

func name(a floodgate.Algorithm) string {
	if a == ratelimit {
		return "ratelimit(INCRBY+EXPIRE)"
	}
	return a.String()
}

// ratelimitTake does for one descriptor what envoyproxy/ratelimit does
// without its local cache: the key is the descriptor and the start of the
// current window (s), and one pipeline sends INCRBY key hits and EXPIRE key
// window; the request is admitted while the count is at most the quota.
// Each decision is its own pipeline, as in ratelimit without implicit
// pipelining (its default).
func ratelimitTake(c redis.UniversalClient, prefix string, quota int64) redisload.Take {
	return func(ctx context.Context, key string) (bool, error) {
		window := time.Now().Unix()
		k := prefix + key + "_" + strconv.FormatInt(window, 10)
		pipe := c.Pipeline()
		incr := pipe.IncrBy(ctx, k, 1)
		pipe.Expire(ctx, k, time.Second)
		if _, err := pipe.Exec(ctx); err != nil {
			return false, err
		}
		return incr.Val() <= quota, nil
	}
}
