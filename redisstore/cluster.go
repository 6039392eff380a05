package redisstore

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate"
)

// On a Cluster, a batch's script calls go to the masters of their slots,
// and a call the Cluster redirects — MOVED or ASK while a slot moves, or
// TRYAGAIN while a slot's keys are split between two masters — did not run
// and must be sent again, alone. go-redis' Cluster pipeline resends a
// master's whole part when its first call is redirected, calls that
// already ran included, which would spend those decisions twice; so the
// store sends each master's part on that master's own connection, which
// resends nothing, and resends only the redirected calls itself.

// tryAgainFor is how long a call answered TRYAGAIN is retried, every
// tryAgainPause, before the error is returned: a slot migration moves a
// slot's keys in batches, so the split that causes TRYAGAIN rarely outlasts
// a millisecond or two. A var for the tests.
var (
	tryAgainFor   = 2 * time.Millisecond
	tryAgainPause = 250 * time.Microsecond
)

// maxRedirects bounds the resends of one call after MOVED or ASK.
const maxRedirects = 8

// processCluster sends cmds (one script call per hash slot) through cc:
// one pipeline per master, the masters in parallel, then the redirected
// calls again, one by one. cmds[i] is replaced by the call that answered.
func processCluster(ctx context.Context, cc *redis.ClusterClient, cmds []*redis.IntSliceCmd) {
	if len(cmds) == 1 {
		_ = cc.Process(ctx, cmds[0])
	} else {
		perMaster(ctx, cc, cmds)
	}
	for i, c := range cmds {
		if redirected(c.Err()) {
			cmds[i] = resend(ctx, cc, c)
		}
	}
}

// perMaster sends each master's part of cmds as one pipeline on that
// master's client, which follows no redirect.
func perMaster(ctx context.Context, cc *redis.ClusterClient, cmds []*redis.IntSliceCmd) {
	parts := map[*redis.Client][]*redis.IntSliceCmd{}
	for _, c := range cmds {
		m, err := cc.MasterForKey(ctx, firstKey(c))
		if err != nil {
			c.SetErr(err)
			continue
		}
		parts[m] = append(parts[m], c)
	}
	var wg sync.WaitGroup
	for m, part := range parts {
		send := func() {
			pipe := m.Pipeline()
			for _, c := range part {
				_ = pipe.Process(ctx, c)
			}
			_, _ = pipe.Exec(ctx) // errors are read per command
		}
		if len(parts) == 1 {
			send()
			return
		}
		wg.Go(send)
	}
	wg.Wait()
}

// resend sends c again until it is not redirected: after MOVED or ASK
// through cc, which follows the redirect for this one call; after TRYAGAIN
// a pause later to the slot's master (go-redis would back off for many
// milliseconds), for at most tryAgainFor of TRYAGAIN answers.
func resend(ctx context.Context, cc *redis.ClusterClient, c *redis.IntSliceCmd) *redis.IntSliceCmd {
	var tryingSince time.Time
	for redirects := 0; redirects < maxRedirects; {
		again := redis.NewIntSliceCmd(ctx, c.Args()...)
		again.SetFirstKeyPos(3)
		if tryAgain(c.Err()) {
			if tryingSince.IsZero() {
				tryingSince = time.Now()
			}
			if time.Since(tryingSince) >= tryAgainFor || floodgate.SystemClock.Sleep(ctx, tryAgainPause) != nil {
				return c
			}
			if m, err := cc.MasterForKey(ctx, firstKey(c)); err != nil {
				again.SetErr(err)
			} else {
				_ = m.Process(ctx, again)
			}
		} else {
			redirects++
			_ = cc.Process(ctx, again)
		}
		if c = again; !redirected(c.Err()) {
			return c
		}
	}
	return c
}

func firstKey(c *redis.IntSliceCmd) string {
	k, _ := c.Args()[3].(string)
	return k
}

// redirected reports an answer meaning the call did not run where it was
// sent: MOVED, ASK or TRYAGAIN.
func redirected(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return strings.HasPrefix(msg, "MOVED ") || strings.HasPrefix(msg, "ASK ") || tryAgain(err)
}

func tryAgain(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "TRYAGAIN") }
