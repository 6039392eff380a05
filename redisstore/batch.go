package redisstore

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// request is one Take on its way to Redis.
type request struct {
	keys  []string // one per policy
	arg   []byte   // the script's argument for this request (see encode)
	group uint32   // requests of one group may share a script call

	out []int64 // replyFields per policy, as the script replies
	err error

	state atomic.Int32  // queued, taken or abandoned
	call  atomic.Uint64 // the id of the call that carries it, once taken (see callError)
	done  chan struct{} // one send per use by an executor: out/err are ready
	timer *time.Timer   // bounds the caller's wait (Store.wait); kept with r, as a new one per wait costs more

	keyBuf [4]string
	args   [8]any // the script call's arguments when r is sent alone (see evalCmd)
}

const (
	queued int32 = iota
	taken
	abandoned
)

var requestPool = sync.Pool{New: func() any { return &request{done: make(chan struct{}, 1)} }}

func getRequest(n int) *request {
	r := requestPool.Get().(*request)
	r.state.Store(queued)
	r.call.Store(0)
	r.err = nil
	if n <= len(r.keyBuf) {
		r.keys = r.keyBuf[:n]
	} else {
		r.keys = make([]string, n)
	}
	return r
}

// putRequest recycles r; only a caller whose r was answered (it ran r
// itself, or received r's done signal) may call it, since until then an
// executor may still write to r.
func putRequest(r *request) {
	clear(r.keyBuf[:])
	clear(r.args[:])
	r.keys, r.out = nil, nil
	requestPool.Put(r)
}

// batcher coalesces concurrent requests into batches, at most maxBatch
// requests each and at most maxInFlight batches at a time.
//
// There is no timer and no waiting for a batch to fill: a request that finds
// fewer than maxInFlight batches running starts one at once (alone, when
// nothing else is queued); requests arriving while all are busy queue up,
// and each executor, when its batch is answered, takes everything queued (up
// to maxBatch) as its next batch. So batches grow exactly as fast as Redis
// answers more slowly than requests arrive, and a lone caller pays no delay.
//
// Batches run on executor goroutines, so that callers wait with their own
// deadline and can leave whether or not the Redis client honours context
// deadlines on its sockets. An executor whose queue runs dry parks for up
// to executorIdle before it exits, and a new batch goes to a parked one
// before a new goroutine is started: a goroutine started per batch grows
// its stack through go-redis' call path anew each time, 5 % of the RLS
// door's CPU on Redis (docs/BENCHMARKS.md, "Envoy rate limit service: the
// Redis path").
//
// The one exception saves a lone caller two
// goroutine switches: when the client does honour them (inline) and no
// other batch is in flight (nothing is queued then either), the caller runs
// its request itself, bounded by its own context. Under load, requests keep
// going to the executors, whose batches carry many decisions per call.
type batcher struct {
	maxBatch    int
	maxInFlight int
	inline      bool
	timeout     time.Duration
	// exec runs a batch under ctx; caller is the context of the caller
	// running it inline, nil for an executor's batch.
	exec  func(ctx context.Context, batch []*request, caller context.Context)
	timer inlineTimer // bounds the inline call

	mu       sync.Mutex
	queue    []*request
	inFlight int
	idle     int             // parked executors not yet handed a batch
	handoff  chan []*request // batches for parked executors; made on first use
}

// executorIdle is how long an executor with nothing to run waits for a
// batch before it exits: long enough to outlast the gaps of any steady
// load, short enough that an idle Store holds no goroutine for long.
const executorIdle = 100 * time.Millisecond

// submit queues r and makes sure an executor will run it, or runs it on
// the caller's goroutine and reports true: r is answered then, and its done
// channel is not used.
func (b *batcher) submit(ctx context.Context, r *request) (ran bool) {
	b.mu.Lock()
	if b.inFlight >= b.maxInFlight {
		b.queue = append(b.queue, r)
		b.mu.Unlock()
		return false
	}
	b.inFlight++
	if b.inline && b.inFlight == 1 {
		r.state.Store(taken)
		b.mu.Unlock()
		callCtx := b.timer.start(ctx, b.timeout)
		batch := [1]*request{r}
		b.exec(callCtx, batch[:], ctx)
		b.timer.finish(callCtx)
		b.mu.Lock()
		if next := b.takeLocked(nil, nil); len(next) > 0 {
			b.startLocked(next) // the slot this call held passes to next
		} else {
			b.inFlight--
		}
		b.mu.Unlock()
		return true
	}
	batch := b.takeLocked(make([]*request, 0, min(b.maxBatch, 1+len(b.queue))), r)
	b.startLocked(batch)
	b.mu.Unlock()
	return false
}

// startLocked hands batch to a parked executor, or starts one.
func (b *batcher) startLocked(batch []*request) {
	if b.idle > 0 {
		b.idle--
		b.handoff <- batch // buffered for every parked executor: never blocks
		return
	}
	if b.handoff == nil {
		b.handoff = make(chan []*request, b.maxInFlight)
	}
	go b.run(batch)
}

// takeLocked moves first (if not nil) and then queued requests into batch,
// up to maxBatch, skipping abandoned ones.
func (b *batcher) takeLocked(batch []*request, first *request) []*request {
	if first != nil && first.state.CompareAndSwap(queued, taken) {
		batch = append(batch, first)
	}
	i := 0
	for ; i < len(b.queue) && len(batch) < b.maxBatch; i++ {
		if q := b.queue[i]; q.state.CompareAndSwap(queued, taken) {
			batch = append(batch, q)
		}
	}
	n := copy(b.queue, b.queue[i:])
	clear(b.queue[n:])
	b.queue = b.queue[:n]
	return batch
}

// run executes batch, then whatever queued meanwhile; with the queue empty
// it parks until startLocked hands it another batch, and exits after
// executorIdle without one.
func (b *batcher) run(batch []*request) {
	idle := time.NewTimer(executorIdle)
	defer idle.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
		b.exec(ctx, batch, nil)
		cancel()
		for i, r := range batch {
			r.done <- struct{}{} // buffered: never blocks, even if the caller left
			batch[i] = nil
		}
		b.mu.Lock()
		batch = b.takeLocked(batch[:0], nil)
		if len(batch) > 0 {
			b.mu.Unlock()
			continue
		}
		b.inFlight--
		b.idle++
		b.mu.Unlock()
		if batch = b.park(idle); batch == nil {
			return
		}
	}
}

// park waits for a handed-off batch; after executorIdle it takes one that
// was handed off meanwhile, or leaves the parked count and returns nil.
// Every batch sent on handoff decremented idle first, so the executors
// parked are always idle plus the batches waiting in handoff.
func (b *batcher) park(idle *time.Timer) []*request {
	if !idle.Stop() {
		// Fired during the batches before: with timers before Go 1.23's
		// (GODEBUG=asynctimerchan=1) its tick would wait in the channel
		// and end this wait at once, as Store.wait guards against too.
		select {
		case <-idle.C:
		default:
		}
	}
	idle.Reset(executorIdle)
	select {
	case batch := <-b.handoff:
		idle.Stop()
		return batch
	case <-idle.C:
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case batch := <-b.handoff:
		return batch
	default:
		b.idle--
		return nil
	}
}
