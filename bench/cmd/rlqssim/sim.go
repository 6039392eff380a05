package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"sync/atomic"
	"time"

	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/memorystore"
	"github.com/floodgate/floodgate/rlqs"
	"github.com/floodgate/floodgate/rlqs/rlqsclient"
)

// start is on a whole second: the store's fixed windows and the
// simulation's are the same.
var start = time.Date(2031, 3, 4, 5, 0, 0, 0, time.UTC)

// Config is one simulated run.
type Config struct {
	Clients  int
	Quota    int64         // per 1 s fixed window, all clients together
	Duration time.Duration // simulated
	Interval time.Duration // the report interval, server and clients
	Slack    float64       // the server's rlqs.Options.Slack
	Flash    bool          // 0.5× the quota, plus 3× on client 0 from 25 % to 50 % of the run; else 2× steady
	Seed     uint64
}

// Result is what a run measured.
type Result struct {
	Worst                  float64 // the largest admitted ÷ quota of any window
	FalseRefusals          float64 // refused while the window had room, ÷ what an exact limiter admits
	CallsPerClientInterval float64
	Decisions              int64
}

// counting counts a Store's Take calls.
type counting struct {
	floodgate.Store
	calls atomic.Int64
}

func (c *counting) Take(ctx context.Context, key string, cost floodgate.Cost, ps []floodgate.Policy, rs []floodgate.Result) error {
	c.calls.Add(1)
	return c.Store.Take(ctx, key, cost, ps, rs)
}

var bucket = map[string]string{"name": "hot"}

// serve starts an RLQS server on loopback over store, one fixed-window
// policy of quota a second for every bucket of domain "envoy", and dials
// it; stop closes the connection and stops the server.
func serve(store floodgate.Store, quota int64, opts rlqs.Options) (conn *grpc.ClientConn, stop func(), err error) {
	p := floodgate.Policy{Name: "hot", Algorithm: floodgate.FixedWindow, Quota: quota, Window: time.Second}
	rules, err := rlqs.NewRules(map[string][]rlqs.Rule{"envoy": {{Match: map[string]string{"name": rlqs.Any}, Policy: p}}})
	if err != nil {
		return nil, nil, err
	}
	srv, err := rlqs.NewServer(store, rules, opts)
	if err != nil {
		return nil, nil, err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	g := grpc.NewServer()
	srv.Register(g)
	go g.Serve(lis)
	conn, err = grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		g.Stop()
		return nil, nil, err
	}
	return conn, func() { conn.Close(); g.Stop() }, nil
}

// Simulate runs cfg on a virtual clock in 1 ms steps: a real server and
// real clients over gRPC on loopback, each client reporting once per
// interval at its own phase (and at once on its first request, as Envoy
// does), waiting for the answer before time moves on.
func Simulate(cfg Config) (Result, error) {
	var now atomic.Int64
	now.Store(start.UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	mem, err := memorystore.New(memorystore.WithClock(clock))
	if err != nil {
		return Result{}, err
	}
	defer mem.Close()
	store := &counting{Store: mem}
	conn, stop, err := serve(store, cfg.Quota, rlqs.Options{Interval: cfg.Interval, Slack: cfg.Slack, Now: clock})
	if err != nil {
		return Result{}, err
	}
	defer stop()
	deny := &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_BlanketRule_{BlanketRule: typev3.RateLimitStrategy_DENY_ALL}}
	clients := make([]*rlqsclient.Client, cfg.Clients)
	for i := range clients {
		c, err := rlqsclient.New(conn, rlqsclient.Settings{Domain: "envoy", Interval: cfg.Interval, NoAssignment: deny}, clock)
		if err != nil {
			return Result{}, err
		}
		defer c.Close()
		clients[i] = c
	}
	return run(cfg, clients, func(d time.Duration) { now.Add(int64(d)) }, store)
}

func run(cfg Config, clients []*rlqsclient.Client, advance func(time.Duration), store *counting) (Result, error) {
	traffic := rand.New(rand.NewPCG(cfg.Seed, uint64(cfg.Clients)<<1|b2u(cfg.Flash)))
	steps := int(cfg.Duration / time.Millisecond)
	every := int(cfg.Interval / time.Millisecond)
	windows := steps / 1000
	admitted, demand := make([]int64, windows), make([]int64, windows)
	subscribed := make([]bool, len(clients))
	var res Result
	ctx := context.Background()
	for step := range steps {
		w := step / 1000
		for i, c := range clients {
			n := poisson(traffic, rate(cfg, i, step)/1000)
			for range n {
				if c.Allow(bucket) {
					admitted[w]++
				}
			}
			demand[w] += int64(n)
			res.Decisions += int64(n)
			due := step%every == i*every/len(clients)
			if n > 0 && !subscribed[i] {
				subscribed[i], due = true, true
			}
			if due && subscribed[i] {
				sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				err := c.Sync(sctx)
				cancel()
				if err != nil {
					return Result{}, fmt.Errorf("client %d at %d ms: %w", i, step, err)
				}
			}
		}
		advance(time.Millisecond)
	}
	var refused, exact int64
	for w := range windows {
		res.Worst = max(res.Worst, float64(admitted[w])/float64(cfg.Quota))
		e := min(demand[w], cfg.Quota)
		exact += e
		refused += max(0, e-admitted[w])
	}
	res.FalseRefusals = float64(refused) / float64(exact)
	res.CallsPerClientInterval = float64(store.calls.Load()) / float64(len(clients)*steps/every)
	return res, nil
}

// rate is client i's demand at step, requests/s.
func rate(cfg Config, i, step int) float64 {
	q, n := float64(cfg.Quota), float64(cfg.Clients)
	if !cfg.Flash {
		return 2 * q / n
	}
	r := 0.5 * q / n
	total := int(cfg.Duration / time.Millisecond)
	if i == 0 && step >= total/4 && step < total/2 {
		r += 3 * q
	}
	return r
}

// poisson draws from a Poisson distribution of mean lambda: Knuth's
// method below 30, a rounded normal above (the error is far below the
// figures' precision).
func poisson(r *rand.Rand, lambda float64) int {
	if lambda > 30 {
		return max(0, int(math.Round(lambda+math.Sqrt(lambda)*r.NormFloat64())))
	}
	l, k, p := math.Exp(-lambda), 0, 1.0
	for {
		p *= r.Float64()
		if p <= l {
			return k
		}
		k++
	}
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
