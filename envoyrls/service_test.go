package envoyrls

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/header"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/memorystore"
	"github.com/floodgate/floodgate/redisstore"
)

const (
	ok   = rlsv3.RateLimitResponse_OK
	over = rlsv3.RateLimitResponse_OVER_LIMIT
)

// start is ten minutes into an hour, so no hourly window ends while a
// test's clock stands there.
var start = time.Date(2031, 3, 4, 5, 10, 0, 0, time.UTC)

type fixture struct {
	svc    *Service
	client rlsv3.RateLimitServiceClient
	rules  atomic.Pointer[Rules]
	eng    *engine.Engine
	reg    *prometheus.Registry
	logs   *testkit.Buffer
	now    atomic.Int64 // UnixNano of the fixture's clock
}

func (f *fixture) clock() time.Time { return time.Unix(0, f.now.Load()) }

// eachStore runs fn on the memory store and on Redis at
// $FLOODGATE_TEST_REDIS, each with a clock of f's.
func eachStore(t *testing.T, fn func(t *testing.T, f *fixture)) {
	t.Run("memory", func(t *testing.T) {
		f := &fixture{}
		f.now.Store(start.UnixNano())
		m := testkit.Memory(t, memorystore.WithClock(f.clock))
		f.serve(t, m, Options{})
		fn(t, f)
	})
	t.Run("redis", func(t *testing.T) {
		f := &fixture{}
		f.now.Store(start.UnixNano())
		c := redis.NewClient(&redis.Options{Addr: testkit.Env(t, "FLOODGATE_TEST_REDIS")})
		t.Cleanup(func() { c.Close() })
		s, err := redisstore.New(c, redisstore.WithClock(f.clock), redisstore.WithPrefix(fmt.Sprintf("fgrls:%d:", time.Now().UnixNano())), redisstore.WithTimeout(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		f.serve(t, s, Options{})
		fn(t, f)
	})
}

// serve compiles testdata/limits on an engine over store and serves it on
// a loopback gRPC listener.
func (f *fixture) serve(t *testing.T, store floodgate.Store, opt Options) {
	t.Helper()
	var err error
	if f.eng, err = engine.New(engine.Config{Store: store}); err != nil {
		t.Fatal(err)
	}
	f.load(t, "testdata/limits")
	f.reg, f.logs = prometheus.NewRegistry(), &testkit.Buffer{}
	opt.Registerer, opt.Logger, opt.Now = f.reg, slog.New(slog.NewTextHandler(f.logs, nil)), f.clock
	if opt.Fields.Style == 0 {
		opt.Fields.Style = engine.None
	}
	svc, err := NewService(f.rules.Load, opt)
	if err != nil {
		t.Fatal(err)
	}
	f.svc = svc
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(ServerCodec())
	svc.Register(g)
	go g.Serve(ln)
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	f.client = rlsv3.NewRateLimitServiceClient(conn)
}

func (f *fixture) load(t *testing.T, path string) {
	t.Helper()
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Compile(f.eng, cfg, floodgate.FailClosed)
	if err != nil {
		t.Fatal(err)
	}
	f.rules.Store(r)
}

// desc builds a descriptor from "key=value" pairs.
func desc(pairs ...string) *commonv3.RateLimitDescriptor {
	d := &commonv3.RateLimitDescriptor{}
	for _, p := range pairs {
		k, v, _ := strings.Cut(p, "=")
		d.Entries = append(d.Entries, &commonv3.RateLimitDescriptor_Entry{Key: k, Value: v})
	}
	return d
}

func (f *fixture) ask(t *testing.T, hits uint32, ds ...*commonv3.RateLimitDescriptor) *rlsv3.RateLimitResponse {
	t.Helper()
	resp, err := f.client.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "shop", HitsAddend: hits, Descriptors: ds})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// expect checks a response's overall code and each status's code and
// limit_remaining.
func expect(t *testing.T, resp *rlsv3.RateLimitResponse, overall rlsv3.RateLimitResponse_Code, codeRemaining ...any) {
	t.Helper()
	if resp.OverallCode != overall {
		t.Errorf("overall %v, want %v (%v)", resp.OverallCode, overall, resp)
	}
	if len(resp.Statuses) != len(codeRemaining)/2 {
		t.Fatalf("%d statuses, want %d", len(resp.Statuses), len(codeRemaining)/2)
	}
	for i, s := range resp.Statuses {
		code, rem := codeRemaining[2*i].(rlsv3.RateLimitResponse_Code), codeRemaining[2*i+1].(int)
		if s.Code != code || s.LimitRemaining != uint32(rem) {
			t.Errorf("status %d: %v remaining %d, want %v remaining %d", i, s.Code, s.LimitRemaining, code, rem)
		}
	}
}

func TestKeyOnlyAndMostSpecific(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		for want := 2; want >= 0; want-- {
			expect(t, f.ask(t, 0, desc("client=alice")), ok, ok, want)
		}
		resp := f.ask(t, 0, desc("client=alice"))
		expect(t, resp, over, over, 0)
		cl := resp.Statuses[0].CurrentLimit
		if cl.RequestsPerUnit != 3 || cl.Unit != rlsv3.RateLimitResponse_RateLimit_HOUR {
			t.Errorf("current_limit %v", cl)
		}
		if d := resp.Statuses[0].DurationUntilReset.AsDuration(); d != 50*time.Minute {
			t.Errorf("duration_until_reset %v, want the hour's end, 50m", d)
		}
		expect(t, f.ask(t, 0, desc("client=bob")), ok, ok, 2) // its own counter
		for want := 4; want >= 0; want-- {
			expect(t, f.ask(t, 0, desc("client=vip")), ok, ok, want) // key and value over key
		}
	})
}

func TestWildcardNestedUnlimited(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		expect(t, f.ask(t, 0, desc("path=/api/users")), ok, ok, 1)
		expect(t, f.ask(t, 0, desc("path=/api/users")), ok, ok, 0)
		expect(t, f.ask(t, 0, desc("path=/api/users")), over, over, 0)
		expect(t, f.ask(t, 0, desc("path=/api/orders")), ok, ok, 1) // a counter per value
		expect(t, f.ask(t, 0, desc("path=/web")), ok, ok, 0)        // no limit

		expect(t, f.ask(t, 0, desc("tenant=acme", "user=u1")), ok, ok, 1)
		expect(t, f.ask(t, 0, desc("tenant=acme", "user=u1")), ok, ok, 0)
		expect(t, f.ask(t, 0, desc("tenant=acme", "user=u1")), over, over, 0)
		expect(t, f.ask(t, 0, desc("tenant=acme")), ok, ok, 0) // a placeholder: no limit at depth 1
		expect(t, f.ask(t, 0, desc("user=u1")), ok, ok, 0)     // user is nested only
		expect(t, f.ask(t, 0, desc("tenant=other", "user=u1")), ok, ok, 0)

		for range 3 {
			resp := f.ask(t, 0, desc("internal=ldap"))
			expect(t, resp, ok, ok, math.MaxUint32)
			if resp.Statuses[0].CurrentLimit != nil {
				t.Errorf("unlimited has current_limit %v", resp.Statuses[0].CurrentLimit)
			}
		}
		expect(t, f.ask(t, 0, desc("blocked=yes")), over, over, 0)
		expect(t, f.ask(t, 0, desc("health=x")), ok, ok, 0)
	})
}

func TestShareThresholdAndMultiplier(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		ask := func(v string) *rlsv3.RateLimitResponse {
			resp, err := f.client.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "files", Descriptors: []*commonv3.RateLimitDescriptor{desc("bucket=" + v)}})
			if err != nil {
				t.Fatal(err)
			}
			return resp
		}
		expect(t, ask("public-a"), ok, ok, 1)
		expect(t, ask("public-b"), ok, ok, 0) // one counter for every value the wildcard matches
		resp := ask("public-c")
		expect(t, resp, over, over, 0)
		if u := resp.Statuses[0].CurrentLimit.Unit; u != rlsv3.RateLimitResponse_RateLimit_UNKNOWN {
			t.Errorf("unit of a 2-day window: %v", u)
		}
	})
}

func TestShadowMode(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		expect(t, f.ask(t, 0, desc("trial=t1")), ok, ok, 0)
		for range 3 {
			expect(t, f.ask(t, 0, desc("trial=t1")), ok, ok, 0) // over its quota of 1, answered OK
		}
		// A shadow descriptor over its limit does not refuse another.
		expect(t, f.ask(t, 0, desc("trial=t1"), desc("client=sam")), ok, ok, 0, ok, 2)
	})
}

func TestReplaces(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		both := []*commonv3.RateLimitDescriptor{desc("region=eu", "user=bob"), desc("plan=gold", "user=bob")}
		for want := 3; want >= 0; want-- {
			// bob_limit (1 an hour) is replaced by the plan's 4.
			expect(t, f.ask(t, 0, both...), ok, ok, 0, ok, want)
		}
		expect(t, f.ask(t, 0, both...), over, ok, 0, over, 0)
		// The replaced limit was never spent.
		expect(t, f.ask(t, 0, desc("region=eu", "user=bob")), ok, ok, 0)
		expect(t, f.ask(t, 0, desc("region=eu", "user=bob")), over, over, 0)
	})
}

func TestHitsAddend(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		expect(t, f.ask(t, 2, desc("client=carol")), ok, ok, 1)
		expect(t, f.ask(t, 2, desc("client=carol")), over, over, 0) // 2 do not fit in 1: nothing spent
		expect(t, f.ask(t, 0, desc("client=carol")), ok, ok, 0)     // 0 means 1
		d := desc("client=dan")
		d.HitsAddend = wrapperspb.UInt64(3) // a descriptor's own addend wins
		expect(t, f.ask(t, 1, d), ok, ok, 0)
		expect(t, f.ask(t, 9, desc("client=erin")), over, over, 0) // more than the quota
	})
}

func TestAllOrNothing(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		two := []*commonv3.RateLimitDescriptor{desc("client=dave"), desc("path=/api/x")}
		expect(t, f.ask(t, 0, two...), ok, ok, 2, ok, 1)
		expect(t, f.ask(t, 0, two...), ok, ok, 1, ok, 0)
		// The path is spent: the client's quota is left as it was.
		expect(t, f.ask(t, 0, two...), over, ok, 1, over, 0)
		expect(t, f.ask(t, 0, two...), over, ok, 1, over, 0)
		expect(t, f.ask(t, 0, desc("client=dave")), ok, ok, 0)
		// A descriptor refusing everything spends no other's quota, and
		// the other shows what it has left (the peek).
		expect(t, f.ask(t, 0, desc("client=fay"), desc("blocked=yes")), over, ok, 3, over, 0)
		expect(t, f.ask(t, 0, desc("client=fay")), ok, ok, 2)
	})
}

func TestAlgorithmAndWindow(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		expect(t, f.ask(t, 0, desc("bucket=b")), ok, ok, 1)
		expect(t, f.ask(t, 0, desc("bucket=b")), ok, ok, 0)
		expect(t, f.ask(t, 0, desc("bucket=b")), over, over, 0) // a burst of 2
		f.now.Add(int64(6 * time.Second))                       // 10 a minute: one token back
		expect(t, f.ask(t, 0, desc("bucket=b")), ok, ok, 0)

		resp := f.ask(t, 0, desc("window=w"))
		expect(t, resp, ok, ok, 1)
		if u := resp.Statuses[0].CurrentLimit.Unit; u != rlsv3.RateLimitResponse_RateLimit_UNKNOWN {
			t.Errorf("unit of a 90s window: %v", u)
		}

		// An anchored window of a minute opens with the key's first
		// request, here 6 s into the clock's minute, and ends 60 s later.
		expect(t, f.ask(t, 0, desc("anchored=a")), ok, ok, 1)
		expect(t, f.ask(t, 0, desc("anchored=a")), ok, ok, 0)
		f.now.Add(int64(59 * time.Second))
		expect(t, f.ask(t, 0, desc("anchored=a")), over, over, 0)
		f.now.Add(int64(time.Second))
		expect(t, f.ask(t, 0, desc("anchored=a")), ok, ok, 1)
	})
}

func TestUnknownDomainAndUnmatched(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		req := &rlsv3.RateLimitRequest{Domain: "shpo", Descriptors: []*commonv3.RateLimitDescriptor{desc("client=a"), desc("client=b")}}
		for range 3 {
			resp, err := f.client.ShouldRateLimit(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			expect(t, resp, ok, ok, 0, ok, 0)
		}
		for range 2 {
			expect(t, f.ask(t, 0, desc("clinet=a")), ok, ok, 0)
		}
		unknown := counter(t, f.reg, "unknown_domain", "")
		unmatched := counter(t, f.reg, "unmatched", "shop")
		if unknown != 3 || unmatched != 2 {
			t.Errorf("unmatched_total: unknown_domain %v (want 3), unmatched %v (want 2)", unknown, unmatched)
		}
		if n := strings.Count(f.logs.String(), "reason=unknown_domain"); n != 1 {
			t.Errorf("%d lines for the unknown domain within a minute, want 1:\n%s", n, f.logs)
		}
		f.now.Add(int64(61 * time.Second))
		f.client.ShouldRateLimit(context.Background(), req)
		logs := f.logs.String()
		if n := strings.Count(logs, "reason=unknown_domain"); n != 2 || !strings.Contains(logs, "count=3") || !strings.Contains(logs, "domain=shpo") {
			t.Errorf("after a minute, want a second line counting 3:\n%s", logs)
		}
		if !strings.Contains(logs, "reason=unmatched domain=shop keys=clinet") {
			t.Errorf("no line for the unmatched descriptor:\n%s", logs)
		}
	})
}

// counter reads floodgate_envoy_unmatched_total{reason,domain}.
func counter(t *testing.T, reg *prometheus.Registry, reason, domain string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if mf.GetName() == "floodgate_envoy_unmatched_total" && labels["reason"] == reason && labels["domain"] == domain {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no floodgate_envoy_unmatched_total{reason=%q,domain=%q}", reason, domain)
	return 0
}

func TestBadInput(t *testing.T) {
	f := &fixture{}
	f.now.Store(start.UnixNano())
	f.serve(t, testkit.Memory(t, memorystore.WithClock(f.clock)), Options{})
	many := make([]*commonv3.RateLimitDescriptor, 10_000)
	for i := range many {
		many[i] = desc(fmt.Sprintf("client=c%d", i))
	}
	for name, req := range map[string]*rlsv3.RateLimitRequest{
		"empty domain":       {Descriptors: []*commonv3.RateLimitDescriptor{desc("client=a")}},
		"no descriptors":     {Domain: "shop"},
		"no entries":         {Domain: "shop", Descriptors: []*commonv3.RateLimitDescriptor{{}}},
		"empty key":          {Domain: "shop", Descriptors: []*commonv3.RateLimitDescriptor{desc("=v")}},
		"nul byte":           {Domain: "shop", Descriptors: []*commonv3.RateLimitDescriptor{desc("client=a\x00b")}},
		"10,000 descriptors": {Domain: "shop", Descriptors: many},
		"huge key":           {Domain: "shop", Descriptors: []*commonv3.RateLimitDescriptor{desc("client=" + strings.Repeat("x", 100_000))}},
		"negative hits":      {Domain: "shop", Descriptors: []*commonv3.RateLimitDescriptor{{Entries: desc("client=a").Entries, IsNegativeHits: true}}},
	} {
		_, err := f.client.ShouldRateLimit(context.Background(), req)
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", name, err)
		}
	}
	expect(t, f.ask(t, 0, desc("client=a")), ok, ok, 2) // still serving
}

func TestResponseHeaders(t *testing.T) {
	f := &fixture{}
	f.now.Store(start.UnixNano())
	f.serve(t, testkit.Memory(t, memorystore.WithClock(f.clock)), Options{Fields: engine.Fields{Style: engine.Draft11}})
	resp := f.ask(t, 0, desc("client=a"), desc("path=/api/a"))
	got := map[string]string{}
	for _, h := range resp.ResponseHeadersToAdd {
		got[h.Key] = h.Value
	}
	limits, err := header.ParseLimit(got["ratelimit"])
	if err != nil || len(limits) != 2 || limits[0].Remaining != 2 || limits[1].Remaining != 1 {
		t.Errorf("ratelimit %q: %v %v", got["ratelimit"], limits, err)
	}
	policies, err := header.ParsePolicy(got["ratelimit-policy"])
	if err != nil || len(policies) != 2 || policies[0].Quota != 3 || policies[0].Window != 3600 || policies[1].Quota != 2 {
		t.Errorf("ratelimit-policy %q: %v %v", got["ratelimit-policy"], policies, err)
	}
	if _, legacy := got["x-ratelimit-remaining"]; legacy || len(got) != 2 {
		t.Errorf("fields %v, want the draft-11 two", got)
	}
}

func TestReload(t *testing.T) {
	eachStore(t, func(t *testing.T, f *fixture) {
		expect(t, f.ask(t, 0, desc("client=gil")), ok, ok, 2)
		dir := t.TempDir()
		writeFile(t, dir+"/shop.yaml", "domain: shop\ndescriptors:\n  - key: client\n    rate_limit: {unit: hour, requests_per_unit: 10}\n")
		f.load(t, dir)
		expect(t, f.ask(t, 0, desc("client=gil")), ok, ok, 8)  // the same counter, the new quota
		expect(t, f.ask(t, 0, desc("path=/api/a")), ok, ok, 0) // gone with the old file
	})
}

// TestCallerDeadlineAnswersDeadlineExceeded (REQUIREMENTS S3): when the
// caller's deadline ends a Redis call (a lone call runs inline with that
// deadline on its socket, and fails a moment before the context's timer
// fires), the service answers DEADLINE_EXCEEDED, as a service that did not
// answer in time, so that Envoy's failure mode decides; not OVER_LIMIT,
// which would refuse the request in its place (the limit is fail-closed).
// The next call is decided.
func TestCallerDeadlineAnswersDeadlineExceeded(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: testkit.Env(t, "FLOODGATE_TEST_REDIS"), ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	s, err := redisstore.New(c, redisstore.WithPrefix(fmt.Sprintf("fgrls:%d:", time.Now().UnixNano())))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{}
	f.now.Store(time.Now().UnixNano())
	f.serve(t, s, Options{})
	req := &rlsv3.RateLimitRequest{Domain: "shop", HitsAddend: 1, Descriptors: []*commonv3.RateLimitDescriptor{desc("client=alice")}}
	resp, err := f.svc.ShouldRateLimit(testkit.Late{Context: context.Background()}, req)
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("past the caller's deadline: %v, %v; want DEADLINE_EXCEEDED", resp, err)
	}
	if resp := f.ask(t, 1, desc("client=alice")); resp.OverallCode != rlsv3.RateLimitResponse_OK {
		t.Fatalf("the next call: %v", resp)
	}
}
