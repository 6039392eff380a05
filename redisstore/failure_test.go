package redisstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/internal/testkit"
)

// privateRedis is a redis-server this test starts on a free port and may
// stop and restart at will, so that no other test loses its server.
type privateRedis struct {
	t    testing.TB
	port int
	dir  string
	cmd  *exec.Cmd
}

func startPrivateRedis(t testing.TB) *privateRedis {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: starts a redis-server")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redis-server not found on PATH (%v): install Redis, or run `make test` on a machine that has it", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	p := &privateRedis{t: t, port: port, dir: t.TempDir()}
	p.start()
	t.Cleanup(p.stop)
	return p
}

func (p *privateRedis) addr() string { return "127.0.0.1:" + strconv.Itoa(p.port) }

func (p *privateRedis) start() {
	p.t.Helper()
	p.cmd = exec.Command("redis-server", "--port", strconv.Itoa(p.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", p.dir, "--enable-debug-command", "local")
	p.cmd.Stdout, p.cmd.Stderr = io.Discard, io.Discard
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: p.addr(), MaxRetries: -1})
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); c.Ping(context.Background()).Err() != nil; {
		if time.Now().After(deadline) {
			p.t.Fatalf("private redis-server on %d did not answer PING", p.port)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop kills the server (our own child process, by its pid) and waits for it.
func (p *privateRedis) stop() {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	p.cmd = nil
}

func TestUnavailableWrapsCause(t *testing.T) {
	p := startPrivateRedis(t)
	p.stop() // nothing listens on the port now
	// One dial, no retries: go-redis would otherwise redial for 500 ms, past
	// the 50 ms timeout, and the error would be the timeout, not its cause.
	rdb := redis.NewClient(&redis.Options{Addr: p.addr(), MaxRetries: -1, DialerRetries: 1})
	defer rdb.Close()
	s, err := New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	res := make([]floodgate.Result, 1)
	err = s.Take(context.Background(), "k", one, onePolicy(floodgate.GCRA), res)
	if !errors.Is(err, floodgate.ErrStoreUnavailable) || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("Take on a closed port: %v, want ErrStoreUnavailable wrapping ECONNREFUSED", err)
	}
	if err := s.Reset(context.Background(), "k", onePolicy(floodgate.GCRA)); !errors.Is(err, floodgate.ErrStoreUnavailable) {
		t.Fatalf("Reset on a closed port: %v, want ErrStoreUnavailable", err)
	}
}

func onePolicy(a floodgate.Algorithm) []floodgate.Policy {
	return []floodgate.Policy{{Name: "p", Algorithm: a, Quota: 3, Window: time.Minute}}
}

// TestTimeouts: a server stuck in DEBUG SLEEP. The per-call timeout (50 ms
// here) ends a call with ErrStoreUnavailable; a shorter context
// deadline ends it sooner with the context's error. Both with a client that
// honours context deadlines (calls run inline) and one that does not (calls
// run on a helper goroutine).
func TestTimeouts(t *testing.T) {
	p := startPrivateRedis(t)
	for _, honours := range []bool{false, true} {
		t.Run(fmt.Sprintf("ContextTimeoutEnabled=%v", honours), func(t *testing.T) {
			rdb := redis.NewClient(&redis.Options{Addr: p.addr(), ContextTimeoutEnabled: honours})
			defer rdb.Close()
			s, err := New(rdb, WithTimeout(50*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			res := make([]floodgate.Result, 1)
			ps := onePolicy(floodgate.TokenBucket)
			if err := s.Take(context.Background(), "k", one, ps, res); err != nil {
				t.Fatal(err)
			}
			sleeper := redis.NewClient(&redis.Options{Addr: p.addr()})
			defer sleeper.Close()
			done := make(chan struct{})
			go func() { sleeper.Do(context.Background(), "debug", "sleep", "0.6"); close(done) }()
			defer func() { <-done }()
			time.Sleep(50 * time.Millisecond) // let the sleep begin

			start := time.Now()
			err = s.Take(context.Background(), "k", one, ps, res)
			if el := time.Since(start); !errors.Is(err, floodgate.ErrStoreUnavailable) || !errors.Is(err, context.DeadlineExceeded) || el > 400*time.Millisecond {
				// ~50 ms; the bound only tells it from the 550 ms left of the sleep.
				t.Errorf("per-call timeout: %v after %v, want ErrStoreUnavailable (deadline exceeded) after ~50ms", err, el)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Millisecond)
			defer cancel()
			start = time.Now()
			err = s.Take(ctx, "k", one, ps, res)
			if el := time.Since(start); !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, floodgate.ErrStoreUnavailable) || el > 400*time.Millisecond {
				t.Errorf("context deadline: %v after %v, want context.DeadlineExceeded after ~15ms", err, el)
			}
		})
	}
}

// TestLimiterFailureModes stops the private server mid-test: FailOpen
// admits, FailClosed denies, FailToLocal limits with its local quota; every
// failure is counted. Once the server is back, decisions come from Redis
// again within a second, with no action taken.
func TestLimiterFailureModes(t *testing.T) {
	p := startPrivateRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: p.addr(), DialTimeout: 50 * time.Millisecond})
	defer rdb.Close()
	s, err := New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	ps := []floodgate.Policy{{Name: "api", Algorithm: floodgate.SlidingWindowCounter, Quota: 4, Window: time.Minute}}
	quiet := floodgate.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	retry := floodgate.WithStoreRetry(100 * time.Millisecond)
	mk := func(opts ...floodgate.Option) *floodgate.Limiter {
		l, err := floodgate.NewLimiter(s, ps, append([]floodgate.Option{quiet, retry}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	local := testkit.Memory(t)
	closed := mk(floodgate.WithFailureMode(floodgate.FailClosed))
	open := mk(floodgate.WithFailureMode(floodgate.FailOpen))
	toLocal := mk(floodgate.WithLocalFallback(local, 0.5)) // 4 × 0.5 = 2 locally
	ctx := context.Background()

	for name, l := range map[string]*floodgate.Limiter{"closed": closed, "open": open, "local": toLocal} {
		d, err := l.Take(ctx, "healthy-"+name, 1)
		if err != nil || !d.Allowed || d.Degraded || d.Remaining != 3 {
			t.Fatalf("%s before the outage: %+v, %v; want allowed, remaining 3, not degraded", name, d, err)
		}
	}

	p.stop()

	d, err := closed.Take(ctx, "k", 1)
	if !errors.Is(err, floodgate.ErrStoreUnavailable) || d.Allowed {
		t.Errorf("FailClosed during the outage: allowed=%v err=%v, want denied with ErrStoreUnavailable", d.Allowed, err)
	}
	d, err = open.Take(ctx, "k", 1)
	if err != nil || !d.Allowed || !d.Degraded {
		t.Errorf("FailOpen during the outage: %+v, %v; want allowed and degraded", d, err)
	}
	for i, want := range []bool{true, true, false} {
		d, err = toLocal.Take(ctx, "k", 1)
		if err != nil || d.Allowed != want || !d.Degraded {
			t.Errorf("FailToLocal call %d during the outage: allowed=%v degraded=%v err=%v; want allowed=%v degraded", i+1, d.Allowed, d.Degraded, err, want)
		}
	}
	if closed.StoreErrors() != 1 || open.StoreErrors() != 1 || toLocal.StoreErrors() != 3 {
		t.Errorf("store errors counted: closed %d, open %d, local %d; want 1, 1, 3", closed.StoreErrors(), open.StoreErrors(), toLocal.StoreErrors())
	}

	p.start() // empty: the script must be loaded again
	back := time.Now()
	for name, l := range map[string]*floodgate.Limiter{"closed": closed, "open": open, "local": toLocal} {
		for {
			d, err := l.Take(ctx, "after-"+name, 1)
			if err == nil && !d.Degraded {
				if !d.Allowed || d.Remaining != 3 {
					t.Errorf("%s after recovery: %+v, want allowed with remaining 3", name, d)
				}
				break
			}
			if time.Since(back) > 5*time.Second { // 3 ms unloaded; the bound holds on a saturated host
				t.Fatalf("%s: no decision from Redis within 5 s of its return (last: degraded=%v err=%v)", name, d.Degraded, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	t.Logf("normal decisions %v after the server came back", time.Since(back).Round(time.Millisecond))
	checkTTLs(t, rdb, "fg:", true)
}
