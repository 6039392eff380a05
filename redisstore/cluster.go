package redisstore

import (
	"context"
	"fmt"
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
// Under WithDurability each master's pipeline ends with WAIT, and a
// redirected call, resent on another connection than its WAIT's, counts as
// not confirmed.
func (s *Store) processCluster(ctx context.Context, cc *redis.ClusterClient, cmds []*scriptCmd) {
	if len(cmds) == 1 && s.waitReplicas == 0 {
		_ = cc.Process(ctx, cmds[0])
	} else {
		s.perMaster(ctx, cc, cmds)
	}
	for i, c := range cmds {
		if redirected(c.Err()) {
			cmds[i] = resend(ctx, cc, c)
			if s.waitReplicas > 0 && cmds[i].Err() == nil {
				cmds[i].SetErr(fmt.Errorf("%w: the call was redirected", ErrNotReplicated))
			}
		}
	}
}

// perMaster sends each master's part of cmds as one pipeline on that
// master's client, which follows no redirect.
func (s *Store) perMaster(ctx context.Context, cc *redis.ClusterClient, cmds []*scriptCmd) {
	parts := map[*redis.Client][]*scriptCmd{}
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
		send := func() { s.pipeline(ctx, m, part, s.waitFor(ctx)) }
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
func resend(ctx context.Context, cc *redis.ClusterClient, c *scriptCmd) *scriptCmd {
	var tryingSince time.Time
	for redirects := 0; redirects < maxRedirects; {
		again := newScriptCmd(ctx, c.Args()...)
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

func firstKey(c *scriptCmd) string {
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
