package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/internal/ctxend"
)

// scriptCmd is one call of the decision code. go-redis resends a command
// after a broken connection (MaxRetries, 3 by default, on every client
// kind, in pipelines and on a Cluster's nodes too) when it cannot know
// whether the command ran; a decision resent after it ran is spent twice.
// NoRetry turns those resends off for this command and any pipeline that
// carries it; go-redis still sends it again when it never reached the wire
// (a stale connection found before the write) or was redirected (MOVED,
// ASK, READONLY), which is its first run. A call whose outcome is unknown
// is a store error for its requests.
type scriptCmd struct{ *redis.IntSliceCmd }

// NoRetry implements redis.Cmder: the decision code is never resent after
// it may have run.
func (scriptCmd) NoRetry() bool { return true }

func newScriptCmd(ctx context.Context, args ...any) *scriptCmd {
	c := &scriptCmd{redis.NewIntSliceCmd(ctx, args...)}
	c.SetFirstKeyPos(3)
	return c
}

// waitCmd is WAIT: sent after a call's script calls on the same
// connection, it answers once that many replicas have every write before
// it, or at its timeout with how many had.
type waitCmd struct{ *redis.IntCmd }

func (waitCmd) NoRetry() bool { return true }

// WithDurability makes every script call (one per batch and master, not
// one per decision) wait until replicas replicas have its writes, with
// Redis's WAIT replicas timeout on the same connection. A call that fewer
// replicas confirmed within timeout is a store error for its requests
// (wrapping ErrNotReplicated): Redis counted them, but a failover to a
// replica could lose the count, so no answer goes out on it. With it, a
// failover to a replica that confirmed loses no decision Redis answered
// (docs/REDIS.md, "Failover"); without it, the writes of the last
// replication lag are lost. Off by default; replicas ≥ 1, timeout > 0 and
// shorter than WithTimeout's.
func WithDurability(replicas int, timeout time.Duration) Option {
	return func(c *config) error {
		if replicas < 1 || timeout <= 0 {
			return fmt.Errorf("redisstore: durability needs replicas ≥ 1 and timeout > 0, got %d and %v", replicas, timeout)
		}
		c.waitReplicas, c.waitTimeout = replicas, timeout
		return nil
	}
}

// ErrNotReplicated is the cause of a store error under WithDurability when
// fewer replicas than asked confirmed a call's writes in time.
var ErrNotReplicated = errors.New("redisstore: writes not confirmed by enough replicas")

// waitFor returns the WAIT to append to a pipeline, or nil without
// durability.
func (s *Store) waitFor(ctx context.Context) *waitCmd {
	if s.waitReplicas == 0 {
		return nil
	}
	return &waitCmd{redis.NewIntCmd(ctx, "wait", s.waitReplicas, s.waitTimeout.Milliseconds())}
}

// checkWait fails every answered call of cmds when w (if any) reports
// fewer replicas than asked.
func (s *Store) checkWait(w *waitCmd, cmds []*scriptCmd) {
	if w == nil {
		return
	}
	n, err := w.Result()
	if err == nil && n >= int64(s.waitReplicas) {
		return
	}
	cause := fmt.Errorf("%w: %d of %d within %v", ErrNotReplicated, n, s.waitReplicas, s.waitTimeout)
	if err != nil {
		cause = fmt.Errorf("%w: %w", ErrNotReplicated, err)
	}
	for _, c := range cmds {
		if c.Err() == nil {
			c.SetErr(cause)
		}
	}
}

// callIDs numbers store calls as they start, for every Store of the
// process, so that a Breaker shared by several Stores tells their calls
// apart.
var callIDs atomic.Uint64

// callError is a failed call's error as each request that rode on it
// sees it, with the call's id: floodgate.Breaker counts one failure per
// call, and none for a failure one Cluster master's breaker handles
// (isolated).
type callError struct {
	id       uint64
	isolated bool
	err      error
}

func (e *callError) Error() string { return e.err.Error() }
func (e *callError) Unwrap() error { return e.err }

// StoreCall implements the interface floodgate.Breaker reads: the call's
// number, and whether the failure is confined to part of the store that a
// breaker of the store's own answers for.
func (e *callError) StoreCall() (id uint64, isolated bool) { return e.id, e.isolated }

// shard is one destination of script calls: the one server, or one master
// of a Cluster, with its own batcher (its executors, in-flight bound and
// timeouts) and, on a Cluster, its own breaker, so that a master that
// hangs holds up and fails only the requests for its slots.
type shard struct {
	b        batcher
	br       *callBreaker  // nil: the Limiter's breaker serves (one server)
	lastCall atomic.Uint64 // the id of the last call started
}

// shardFor returns the shard that serves r: the one server's, or on a
// Cluster its slot's master's, made on first use.
func (s *Store) shardFor(ctx context.Context, r *request) (*shard, error) {
	cc, ok := s.client.(*redis.ClusterClient)
	if !ok {
		return s.one, nil
	}
	m, err := cc.MasterForKey(ctx, r.keys[0])
	if err != nil {
		return nil, err
	}
	addr := m.Options().Addr
	if sh, ok := s.shards.Load(addr); ok {
		return sh.(*shard), nil
	}
	sh, _ := s.shards.LoadOrStore(addr, s.newShard(&callBreaker{}))
	return sh.(*shard), nil
}

func (s *Store) newShard(br *callBreaker) *shard {
	sh := &shard{br: br}
	sh.b = batcher{maxBatch: s.maxBatch, maxInFlight: s.maxInFlight, inline: s.inline, timeout: s.timeout,
		exec: func(ctx context.Context, batch []*request, caller context.Context) {
			s.execShard(ctx, caller, sh, batch)
		}}
	return sh
}

// execShard runs batch unless sh's breaker is open, and tells the breaker
// how the call went. caller is the context of the caller running the batch
// inline, else nil: a call its caller's deadline or cancellation ended
// says nothing of the master (internal/ctxend).
func (s *Store) execShard(ctx, caller context.Context, sh *shard, batch []*request) {
	id := callIDs.Add(1)
	sh.lastCall.Store(id)
	for _, r := range batch {
		r.call.Store(id)
	}
	if sh.br != nil && !sh.br.allow(time.Now()) {
		for _, r := range batch {
			r.err = &callError{id: id, isolated: true, err: errShardOpen}
		}
		s.failed() // the slots may have moved to a promoted replica meanwhile
		return
	}
	failed := s.exec(ctx, batch)
	left := failed && caller != nil && ctxend.Err(caller) != nil
	if failed && !left {
		s.failed()
	}
	for _, r := range batch {
		if r.err != nil && failed {
			r.err = &callError{id: id, isolated: sh.br != nil, err: r.err}
		}
	}
	switch {
	case sh.br == nil:
	case left:
		sh.br.left()
	default:
		sh.br.done(time.Now(), failed)
	}
}

// errShardOpen answers requests for a Cluster master whose breaker is open.
var errShardOpen = errors.New("redisstore: this Cluster master's breaker is open after consecutive failed calls")

// callBreaker is a Cluster master's breaker: floodgate.DefaultBreakerThreshold
// consecutive failed calls open it for floodgate.DefaultBreakerCooldown,
// after which one call probes the master while the others fail at once.
// It is consulted once per call, not per request.
type callBreaker struct {
	mu        sync.Mutex
	failures  int
	openUntil time.Time // zero: closed
	probing   bool
}

func (b *callBreaker) allow(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.openUntil.IsZero():
		return true
	case b.probing || now.Before(b.openUntil):
		return false
	}
	b.probing = true
	return true
}

// left ends a call its caller's context ended: that says nothing of the
// master, so a probe's turn passes to the next call and nothing is counted.
func (b *callBreaker) left() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.probing = false
}

func (b *callBreaker) done(now time.Time, failed bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.probing = false
	if !failed {
		b.failures, b.openUntil = 0, time.Time{}
		return
	}
	if b.failures++; b.failures >= floodgate.DefaultBreakerThreshold || !b.openUntil.IsZero() {
		b.openUntil = now.Add(floodgate.DefaultBreakerCooldown)
	}
}

// call runs f, a command outside the loaded code (Reset's DEL), under the
// per-call timeout. f runs on its own goroutine
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
		if err := ctxend.Err(ctx); err != nil {
			return err
		}
		return s.timedOut()
	}
}
