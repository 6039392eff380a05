package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/internal/ctxend"
	"github.com/floodgate/floodgate/internal/nilcheck"
)

// Store is a floodgate.Store over a go-redis client. Create it with New; it
// is safe for concurrent use.
type Store struct {
	client    redis.UniversalClient
	grouping  grouping
	prefix    string
	maxKeyLen int
	timeout   time.Duration
	clock     func() time.Time // nil: the Redis server's TIME
	slack     int64            // ms added to every TTL
	near      *nearCache
	// noFunctions: the server cannot load the function library, so calls
	// use EVALSHA of the script.
	noFunctions atomic.Bool

	maxBatch, maxInFlight int
	inline                bool          // the client honours context deadlines (see New)
	waitReplicas          int           // WithDurability; 0: off
	waitTimeout           time.Duration // WithDurability
	one                   *shard        // every call's, except on a Cluster
	shards                sync.Map      // Cluster master's address → *shard
}

// grouping says which requests of a batch may share one script call: all
// keys of a script call must live on one Redis node, and on a Cluster in
// one hash slot.
type grouping uint8

const (
	groupAll  grouping = iota // one server: every request in one call
	groupSlot                 // Redis Cluster: one call per hash slot
	groupTag                  // client-side sharding (e.g. Ring): one call per partition key
)

// testClockSlack lengthens every TTL under WithClock.
const testClockSlack = time.Minute

// Option configures a Store.
type Option func(*config) error

type config struct {
	prefix       string
	maxKeyLen    int
	timeout      time.Duration
	clock        func() time.Time
	nearSize     int
	nearMin      time.Duration
	maxBatch     int
	maxInFlight  int
	waitReplicas int
	waitTimeout  time.Duration
}

// WithPrefix sets the start of every key name (default "fg:"). It must not
// contain '{' or '}', which would take the hash tag's place.
func WithPrefix(prefix string) Option {
	return func(c *config) error {
		if strings.ContainsAny(prefix, "{}") {
			return fmt.Errorf("redisstore: prefix %q contains '{' or '}'", prefix)
		}
		c.prefix = prefix
		return nil
	}
}

// DefaultTimeout is WithTimeout's default and the daemon's
// store.redis.timeout: above the slowest answer of a healthy Redis on a
// busy host (three 80 ms stalls of the server under load give no error at
// this timeout; at the former 50 ms, 104,902 of 105,103 requests failed:
// docs/REDIS.md, "Timeouts").
const DefaultTimeout = time.Second

// WithTimeout bounds each Take and Reset (default DefaultTimeout): past
// it, the call returns ErrStoreUnavailable wrapping
// context.DeadlineExceeded, whatever the client's own timeouts. A shorter deadline on the caller's context
// wins.
func WithTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("redisstore: timeout must be positive, got %v", d)
		}
		c.timeout = d
		return nil
	}
}

// WithMaxKeyLength sets the longest partition key (bytes) used literally in
// key names (default 128); longer keys are replaced by a 33-byte hash (see
// docs/REDIS.md, "Key layout").
func WithMaxKeyLength(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("redisstore: max key length must be at least 1, got %d", n)
		}
		c.maxKeyLen = n
		return nil
	}
}

// WithNearCache answers repeated denials without Redis: when Redis denies a
// request and the shortest RetryAfter among its denying policies is at
// least minRetryAfter, later requests for the same key with the same
// policies and a cost at least as large are denied locally until that
// RetryAfter has passed (counted from when the first call was sent), with
// RetryAfter and ResetAfter reduced by the time elapsed. About size keys
// are held (size rounded up to a multiple of its 16 shards); a full shard
// drops the soonest to expire of 8 sampled entries. Only denials are cached, so the
// cache never admits what Redis would deny. A Reset through this Store
// clears the key's entry; a Reset made elsewhere is seen here once the entry
// expires. Off by default.
func WithNearCache(size int, minRetryAfter time.Duration) Option {
	return func(c *config) error {
		if size < 1 || minRetryAfter <= 0 {
			return fmt.Errorf("redisstore: near cache needs size ≥ 1 and minRetryAfter > 0, got %d and %v", size, minRetryAfter)
		}
		c.nearSize, c.nearMin = size, minRetryAfter
		return nil
	}
}

// WithBatching sets how concurrent calls are coalesced: at most maxBatch
// requests per script call (default 128) and at most maxInFlight batches
// waiting on Redis at a time (default 4; on a Cluster, per master).
// WithBatching(1, n) sends one request per call, on at most n connections.
func WithBatching(maxBatch, maxInFlight int) Option {
	return func(c *config) error {
		if maxBatch < 1 || maxInFlight < 1 {
			return fmt.Errorf("redisstore: batching needs maxBatch and maxInFlight ≥ 1, got %d and %d", maxBatch, maxInFlight)
		}
		c.maxBatch, c.maxInFlight = maxBatch, maxInFlight
		return nil
	}
}

// WithClock makes the store read time from now instead of the Redis
// server's TIME. For tests only: with several application servers, their
// clocks would disagree. Key expiry still runs on the server's clock, which
// keeps moving while a test clock stands still, so each TTL is lengthened
// by a minute to keep state alive for the test's (clock) duration.
//
// The algorithms treat state older than its window as fresh, so the longer
// TTL changes no decision.
func WithClock(now func() time.Time) Option {
	return func(c *config) error {
		if now == nil {
			return errors.New("redisstore: WithClock: nil clock")
		}
		c.clock = now
		return nil
	}
}

// New returns a Store over client: a *redis.Client (standalone, or Sentinel
// through redis.NewFailoverClient), a *redis.ClusterClient, or any other
// UniversalClient. New does not contact Redis; the code is loaded on first
// use and again whenever a server says it lacks it. It needs Redis 6.0 or
// later; docs/REDIS.md lists the commands its Redis user must be allowed.
//
// A client with ContextTimeoutEnabled lets a lone caller run its own script
// call, saving two goroutine switches of latency; without it, go-redis
// bounds socket reads by its ReadTimeout rather than by contexts, so every
// call is made on a helper goroutine and the caller waits no longer than
// the per-call timeout either way.
//
// Errors: floodgate.ErrInvalidOption (wrapped) for a nil client, a nil
// option or an option out of range; an error naming the algorithm for one
// of floodgate.Algorithms() that the store does not speak.
func New(client redis.UniversalClient, opts ...Option) (*Store, error) {
	if err := checkAlgorithms(floodgate.Algorithms()); err != nil {
		return nil, err
	}
	if nilcheck.Nil(client) {
		return nil, fmt.Errorf("%w: redisstore: nil client", floodgate.ErrInvalidOption)
	}
	c := config{prefix: "fg:", maxKeyLen: 128, timeout: DefaultTimeout, maxBatch: 128, maxInFlight: 4}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: redisstore: nil option", floodgate.ErrInvalidOption)
		}
		if err := o(&c); err != nil {
			return nil, fmt.Errorf("%w: %w", floodgate.ErrInvalidOption, err)
		}
	}
	if c.waitReplicas > 0 && c.waitTimeout >= c.timeout {
		return nil, fmt.Errorf("%w: redisstore: durability timeout %v must be shorter than the per-call timeout %v", floodgate.ErrInvalidOption, c.waitTimeout, c.timeout)
	}
	s := &Store{
		client:    client,
		prefix:    c.prefix,
		maxKeyLen: c.maxKeyLen,
		timeout:   c.timeout,
		clock:     c.clock,

		maxBatch: c.maxBatch, maxInFlight: c.maxInFlight,
		waitReplicas: c.waitReplicas, waitTimeout: c.waitTimeout,
	}
	if c.clock != nil {
		s.slack = testClockSlack.Milliseconds()
	}
	if c.nearSize > 0 {
		s.near = newNearCache(c.nearSize, c.nearMin)
	}
	switch cl := client.(type) {
	case *redis.Client:
		s.grouping, s.inline = groupAll, cl.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		s.grouping, s.inline = groupSlot, cl.Options().ContextTimeoutEnabled
	default:
		s.grouping = groupTag
	}
	s.one = s.newShard(nil)
	return s, nil
}

// Close closes nothing and returns nil: the Store owns no connection, and
// the client passed to New stays the caller's to close, after the Store's
// last call. It is there so that a Store can stand where a
// memorystore.Store did (defer store.Close()). Like that store, it still
// answers after Close.
func (s *Store) Close() error { return nil }

// Take implements floodgate.Store: one script call (possibly shared with
// concurrent calls) decides every policy for key, all or nothing.
//
// Errors: ErrInvalidCost and ErrCostExceedsQuota, ErrInvalidPolicy for a
// policy of an algorithm the store does not speak (before any I/O); ctx's
// error when ctx ends first; otherwise ErrStoreUnavailable wrapping the
// cause — a connection failure (the call is not resent: it may have run),
// the per-call timeout, an error reply (including READONLY, CLUSTERDOWN and
// the like during a failover), ErrNotReplicated under WithDurability, or on
// a Cluster the open breaker of the key's master.
func (s *Store) Take(ctx context.Context, key string, cost floodgate.Cost, policies []floodgate.Policy, results []floodgate.Result) error {
	if err := floodgate.CheckCost(cost, policies); err != nil {
		return err
	}
	if err := spoken.Refuse("redisstore", policies); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	t := tag(key, s.maxKeyLen)
	var sent time.Time
	if s.near != nil && cost.Kind == floodgate.Admit { // a settlement is always counted
		sent = s.localNow()
		if s.near.answer(t, policies, cost, sent, results) {
			return nil
		}
	}
	r := s.request(t, cost, policies)
	if err := s.wait(ctx, r); err != nil {
		return err
	}
	denied, peek := false, cost.IsPeek()
	for i := range policies {
		o := r.out[replyFields*i:]
		allowed, retry := o[0] == 1, o[3]
		if !allowed && !peek && cost.Of(policies[i].Unit) == 0 {
			// The script sees only each policy's part of the cost, so a
			// request none of whose policies it charges (a bodiless request
			// against content-bytes policies) reads to it as a peek. It is
			// not one: a policy charged nothing reports its standing and
			// never denies.
			allowed, retry = true, 0
		}
		results[i] = floodgate.Result{
			Allowed:    allowed,
			Remaining:  o[1],
			ResetAfter: time.Duration(o[2]) * time.Microsecond,
			RetryAfter: time.Duration(retry) * time.Microsecond,
			FullAfter:  time.Duration(o[4]) * time.Microsecond,
		}
		denied = denied || !allowed
	}
	putRequest(r)
	if denied && s.near != nil {
		s.near.remember(t, policies, cost, sent, results)
	}
	return nil
}

// request builds the script call's part for one Take of the key whose tag
// is t.
func (s *Store) request(t string, cost floodgate.Cost, policies []floodgate.Policy) *request {
	r := getRequest(len(policies))
	for i := range policies {
		r.keys[i] = redisKey(s.prefix, t, &policies[i])
	}
	now := int64(-1)
	if s.clock != nil {
		now = s.clock().UnixMicro()
	}
	r.encode(now, policies, cost)
	if s.grouping != groupAll {
		r.group = uint32(slot(t)) // with groupTag, refined by the tag itself in groups
	}
	return r
}

// wait submits r and waits for its answer, the caller's ctx or the per-call
// timeout. On an error return r must not be reused: an executor may still
// hold it.
func (s *Store) wait(ctx context.Context, r *request) error {
	sh, err := s.shardFor(ctx, r)
	if err != nil {
		putRequest(r)
		return s.unavailable(ctx, err)
	}
	if !sh.b.submit(ctx, r) {
		if r.timer == nil {
			r.timer = time.NewTimer(s.timeout)
		} else {
			r.timer.Reset(s.timeout) // stopped and drained by the wait before
		}
		// The timer is stopped here, not deferred: r may go back to the
		// pool below, and the next caller to get it arms the same timer.
		select {
		case <-r.done:
			if !r.timer.Stop() {
				// Fired meanwhile: with timers before Go 1.23's
				// (GODEBUG=asynctimerchan=1) its tick would wait in the
				// channel and end the next wait at once.
				select {
				case <-r.timer.C:
				default:
				}
			}
		case <-ctx.Done():
			r.timer.Stop()
			r.state.CompareAndSwap(queued, abandoned)
			return ctx.Err()
		case <-r.timer.C:
			r.state.CompareAndSwap(queued, abandoned)
			// The call r rides on, or for a request still queued the last
			// one started, which it waited behind: the Breaker counts
			// one failure for all.
			id := r.call.Load()
			if id == 0 {
				id = sh.lastCall.Load()
			}
			return &callError{id: id, isolated: sh.br != nil, err: s.timedOut()}
		}
	}
	if r.err != nil {
		err := r.err
		putRequest(r)
		return s.unavailable(ctx, err)
	}
	return nil
}

// timedOut is the error of a call that got no answer within the per-call
// timeout.
func (s *Store) timedOut() error {
	return fmt.Errorf("%w: no answer within %v: %w", floodgate.ErrStoreUnavailable, s.timeout, context.DeadlineExceeded)
}

// unavailable is the error of a call that failed with err: ctx's error if
// the caller's ctx has ended or its deadline has passed (a socket deadline
// taken from ctx fails the call a moment before ctx's timer fires; see
// ctxend), else ErrStoreUnavailable wrapping err. A
// timeout, however go-redis reports it (os.ErrDeadlineExceeded from a
// socket deadline set by ContextTimeoutEnabled or ReadTimeout, a pool
// timeout, or the context's own), also wraps context.DeadlineExceeded, as
// WithTimeout promises.
func (s *Store) unavailable(ctx context.Context, err error) error {
	if err := ctxend.Err(ctx); err != nil {
		return err
	}
	if isTimeout(err) && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w: %w", floodgate.ErrStoreUnavailable, context.DeadlineExceeded, err)
	}
	return fmt.Errorf("%w: %w", floodgate.ErrStoreUnavailable, err)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() || errors.Is(err, redis.ErrPoolTimeout)
}

func (s *Store) localNow() time.Time {
	if s.clock != nil {
		return s.clock()
	}
	return time.Now()
}

// Reset implements floodgate.Store: it deletes key's state under policies
// (one DEL; the keys share a slot) and forgets any near-cache entry for it.
// Errors as for Take.
func (s *Store) Reset(ctx context.Context, key string, policies []floodgate.Policy) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t := tag(key, s.maxKeyLen)
	if s.near != nil {
		s.near.forget(t)
	}
	if len(policies) == 0 {
		return nil
	}
	keys := make([]string, len(policies))
	for i := range policies {
		keys[i] = redisKey(s.prefix, t, &policies[i])
	}
	return s.call(ctx, func(ctx context.Context) error { return s.client.Del(ctx, keys...).Err() })
}

// exec runs one batch: one call per group, pipelined when there are
// several, then sets each request's out or err, and reports whether a call
// failed.
func (s *Store) exec(ctx context.Context, batch []*request) (failed bool) {
	// A lone group, the common case, is held on the stack.
	var oneGroup [1][]*request
	var oneCmd [1]*scriptCmd
	groups, cmds := s.groups(oneGroup[:0], batch), oneCmd[:]
	if len(groups) > 1 {
		cmds = make([]*scriptCmd, len(groups))
	}
	for i, g := range groups {
		cmds[i] = s.codeCall(ctx, g)
	}
	s.process(ctx, cmds)
	// The server lacked the code: it restarted without persistence, was
	// flushed, failed over to a node that never had it, or is older than
	// Redis 7. Nothing ran, so load it (on every master of a Cluster) and
	// go again; should a node still lack it, EVAL sends the source itself.
	var retry []int
	for i, c := range cmds {
		if functionsRefused(c.Err()) {
			s.noFunctions.Store(true) // for good: the server will not run FCALL
		}
		if codeMissing(c.Err()) {
			retry = append(retry, i)
		}
	}
	if len(retry) > 0 {
		s.load(ctx)
		again := make([]*scriptCmd, len(retry))
		for j, i := range retry {
			again[j] = s.codeCall(ctx, groups[i])
		}
		s.process(ctx, again)
		var last []*scriptCmd
		var lastIdx []int
		for j, i := range retry {
			cmds[i] = again[j]
			if codeMissing(again[j].Err()) {
				last = append(last, evalCmd(ctx, "eval", script, s.slack, groups[i]))
				lastIdx = append(lastIdx, i)
			}
		}
		if len(last) > 0 {
			s.process(ctx, last)
			for j, i := range lastIdx {
				cmds[i] = last[j]
			}
		}
	}
	for i, g := range groups {
		if cmds[i].Err() != nil {
			failed = true // execShard tells the Cluster client to look again
		}
		deliver(g, cmds[i])
	}
	return failed
}

// codeCall builds the call of the loaded code for group: FCALL of the function
// library, or EVALSHA of the script once functions proved unavailable.
func (s *Store) codeCall(ctx context.Context, group []*request) *scriptCmd {
	if s.noFunctions.Load() {
		return evalCmd(ctx, "evalsha", scriptSHAArg, s.slack, group)
	}
	return evalCmd(ctx, "fcall", functionNameArg, s.slack, group)
}

// functionNameArg and scriptSHAArg are functionName and scriptSHA as call
// arguments, converted to interfaces once instead of on every call.
var functionNameArg, scriptSHAArg any = functionName, scriptSHA

// codeMissing reports an answer meaning that the server lacks the code
// called or will not run it that way: NOSCRIPT for EVALSHA; for FCALL, an
// unknown function, or functions refused (see functionsRefused). Nothing
// ran.
func codeMissing(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return strings.HasPrefix(msg, "NOSCRIPT") || strings.HasPrefix(msg, "ERR Function not found") || functionsRefused(err)
}

// functionsRefused reports an answer to FCALL or FUNCTION LOAD that trying
// again cannot change: an unknown command or subcommand (Redis before 7,
// which quotes it `fcall`, where 7 writes 'fcall'; or a rename-command) or
// a user not allowed it. Key permissions and other NOPERMs do not count.
func functionsRefused(err error) bool {
	if err == nil {
		return false
	}
	msg := strings.ToLower(err.Error())
	return (strings.HasPrefix(msg, "err unknown command") || strings.HasPrefix(msg, "err unknown subcommand") || strings.HasPrefix(msg, "noperm")) &&
		(strings.Contains(msg, "fcall") || strings.Contains(msg, "function"))
}

// load loads the function library on every master (on a Cluster) or the
// one server. A server that refuses it switches the store to the script
// for good, which it then loads. Errors are not returned: they show in the
// calls that follow.
func (s *Store) load(ctx context.Context) {
	if !s.noFunctions.Load() {
		err := s.everyMaster(ctx, func(ctx context.Context, c redis.Cmdable) error {
			return c.FunctionLoadReplace(ctx, library).Err()
		})
		if !functionsRefused(err) {
			return
		}
		s.noFunctions.Store(true)
	}
	_ = s.everyMaster(ctx, func(ctx context.Context, c redis.Cmdable) error { return c.ScriptLoad(ctx, script).Err() })
}

// everyMaster runs fn on every master of a Cluster, every shard of a Ring,
// or the one server.
func (s *Store) everyMaster(ctx context.Context, fn func(context.Context, redis.Cmdable) error) error {
	each := func(ctx context.Context, c *redis.Client) error { return fn(ctx, c) }
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, each)
	case *redis.Ring:
		return c.ForEachShard(ctx, each)
	}
	return fn(ctx, s.client)
}

// failed asks a Cluster client to reload its slot map (asynchronously, at
// most every 200 ms; go-redis coalesces the requests). go-redis reloads it
// itself on a MOVED answer, but a dead master gives none: calls to it time
// out while still dialing, and without this the client would keep routing
// to it after its replica has been promoted.
func (s *Store) failed() {
	if cc, ok := s.client.(*redis.ClusterClient); ok {
		cc.ReloadState(context.Background())
	}
}

// process sends cmds, each at most once (see scriptCmd), followed under
// WithDurability by one WAIT on the same connection.
func (s *Store) process(ctx context.Context, cmds []*scriptCmd) {
	if cc, ok := s.client.(*redis.ClusterClient); ok {
		s.processCluster(ctx, cc, cmds)
		return
	}
	w := s.waitFor(ctx)
	if len(cmds) == 1 && w == nil {
		_ = s.client.Process(ctx, cmds[0])
		return
	}
	s.pipeline(ctx, s.client, cmds, w)
}

// pipeline sends cmds and w (if not nil) as one pipeline through c, and
// fails the calls w found not replicated.
func (s *Store) pipeline(ctx context.Context, c redis.Cmdable, cmds []*scriptCmd, w *waitCmd) {
	pipe := c.Pipeline()
	for _, c := range cmds {
		_ = pipe.Process(ctx, c)
	}
	if w != nil {
		_ = pipe.Process(ctx, w)
	}
	_, _ = pipe.Exec(ctx) // errors are read per command
	s.checkWait(w, cmds)
}

// groups appends to groups the parts of batch that each script call may
// carry.
func (s *Store) groups(groups [][]*request, batch []*request) [][]*request {
	if s.grouping == groupAll || len(batch) == 1 {
		return append(groups, batch)
	}
next:
	for _, r := range batch {
		for i, g := range groups {
			if g[0].group == r.group && (s.grouping == groupSlot || sameTag(g[0], r)) {
				groups[i] = append(g, r)
				continue next
			}
		}
		groups = append(groups, []*request{r})
	}
	return groups
}

// sameTag reports whether two requests' keys carry the same hash tag.
func sameTag(a, b *request) bool {
	ka, kb := a.keys[0], b.keys[0]
	return ka[:strings.IndexByte(ka, '}')] == kb[:strings.IndexByte(kb, '}')]
}

// evalCmd builds one call of the code (FCALL, EVALSHA or EVAL) for group
// (see lua/dispatch.lua for the argument layout): verb and body are the
// command's name and the function's name, the script's SHA-1 or the
// script. The arguments of a lone request's call are held in the request,
// so a call built for it replaces the last one's: build it once that one
// is answered.
func evalCmd(ctx context.Context, verb, body any, slack int64, group []*request) *scriptCmd {
	nkeys := 0
	for _, r := range group {
		nkeys += len(r.keys)
	}
	n := 4 + nkeys + len(group)
	var args []any
	if len(group) == 1 && n <= len(group[0].args) {
		args = group[0].args[:0] // a lone request's own, reused from call to call
	} else {
		args = make([]any, 0, n)
	}
	args = append(args, verb, body, nkeys)
	for _, r := range group {
		for _, k := range r.keys {
			args = append(args, k)
		}
	}
	args = append(args, slack)
	for _, r := range group {
		args = append(args, r.arg)
	}
	return newScriptCmd(ctx, args...)
}

var (
	errShortReply = errors.New("redisstore: script reply has the wrong length")
	// errOutOfRange is a request's answer when a number of its reply is one
	// the script never computes from a state it wrote (a negative time, an
	// allowed flag other than 0 or 1): some other writer left a value at
	// one of its keys, such as an infinite debt, which would otherwise
	// reach clients as a negative Retry-After.
	errOutOfRange = errors.New("redisstore: script reply out of range: a key holds a value Floodgate did not write")
	// errKeyRefused is a request's answer when Redis refused a command on
	// one of its keys (dispatch.lua's REFUSED): a value of another type at
	// it (WRONGTYPE), or a key the user may not touch. The other requests
	// of the call are decided.
	errKeyRefused = errors.New("redisstore: Redis refused a command on one of the request's keys: a value of another type (WRONGTYPE) or a key the user may not touch")
)

// refused is dispatch.lua's REFUSED.
const refused = -2

// replyFields is how many numbers the script replies per policy: allowed,
// remaining, reset after, retry after and full after (dispatch.lua).
const replyFields = 5

// deliver hands each request of group its part of cmd's reply.
func deliver(group []*request, cmd *scriptCmd) {
	vals, err := cmd.Result()
	if err == nil {
		n := 0
		for _, r := range group {
			n += replyFields * len(r.keys)
		}
		if len(vals) != n {
			err = errShortReply
		}
	}
	for _, r := range group {
		if err != nil {
			r.err = err
			continue
		}
		n := replyFields * len(r.keys)
		r.out, vals = vals[:n:n], vals[n:]
		if r.out[0] == refused {
			r.err = errKeyRefused
		} else if !inRange(r.out) {
			r.err = errOutOfRange
		}
	}
}

// inRange reports whether every policy's reply in out is one the script
// can give: allowed 0 or 1, remaining and the three times not negative.
func inRange(out []int64) bool {
	for i := 0; i < len(out); i += replyFields {
		o := out[i : i+replyFields]
		if o[0]&^1 != 0 || o[1] < 0 || o[2] < 0 || o[3] < 0 || o[4] < 0 {
			return false
		}
	}
	return true
}
