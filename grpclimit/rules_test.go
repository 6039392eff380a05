package grpclimit_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/grpclimit"
	"github.com/floodgate/floodgate/httplimit"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/memorystore"
	"github.com/floodgate/floodgate/redisstore"
	"github.com/floodgate/floodgate/secret"
)

const (
	check = "/grpc.health.v1.Health/Check"
	watch = "/grpc.health.v1.Health/Watch"
)

// hourly is an engine rule of one fixed-window policy of quota an hour.
func hourly(policy string, quota int64) engine.Rule {
	return engine.Rule{Policies: []floodgate.Policy{{Name: policy, Algorithm: floodgate.FixedWindow, Quota: quota, Window: time.Hour}}}
}

// serveRules runs the health service behind a Limiter of cfg, on a memory
// store whose clock stands at at unless cfg has a Store.
func serveRules(t *testing.T, cfg grpclimit.Config) healthpb.HealthClient {
	t.Helper()
	if cfg.Store == nil {
		cfg.Store = testkit.Memory(t, memorystore.WithClock(func() time.Time { return at }))
	}
	l, err := grpclimit.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return dial(t, grpc.NewServer(grpc.UnaryInterceptor(l.Unary()), grpc.StreamInterceptor(l.Stream())))
}

// outcome says how a call ended: "ok", the policies of a refusal's
// QuotaFailure, or another status code.
func outcome(err error) string {
	st := status.Convert(err)
	switch st.Code() {
	case codes.OK:
		return "ok"
	case codes.ResourceExhausted:
	default:
		return st.Code().String()
	}
	var subjects []string
	for _, d := range st.Details() {
		if qf, ok := d.(*errdetails.QuotaFailure); ok {
			for _, v := range qf.Violations {
				subjects = append(subjects, v.Subject)
			}
		}
	}
	return "refused by " + strings.Join(subjects, ",")
}

// watchOnce opens a Watch stream and reads its first message.
func watchOnce(ctx context.Context, c healthpb.HealthClient) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err == nil {
		_, err = s.Recv()
	}
	return err
}

// TestRulesPerMethod: each call is decided by the first rule whose pattern
// matches its full method name, under that rule's policies; a call no rule
// matches passes unlimited and without rate-limit metadata.
func TestRulesPerMethod(t *testing.T) {
	c := serveRules(t, grpclimit.Config{Key: grpclimit.ByMethod(), Rules: []grpclimit.Rule{
		{Method: check, Rule: hourly("checks", 2)},
		{Method: "/grpc.health.v1.Health/{method}", Rule: hourly("health", 1)},
	}})
	ctx := context.Background()
	var got []string
	for range 3 {
		_, err := c.Check(ctx, &healthpb.HealthCheckRequest{})
		got = append(got, outcome(err))
	}
	for range 2 {
		got = append(got, outcome(watchOnce(ctx, c)))
	}
	want := []string{"ok", "ok", "refused by checks", "ok", "refused by health"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("calls: %q, want %q", got, want)
	}

	only := serveRules(t, grpclimit.Config{Key: grpclimit.ByMethod(), Rules: []grpclimit.Rule{{Method: check, Rule: hourly("checks", 1)}}})
	for i := range 3 {
		ctx, cancel := context.WithCancel(ctx)
		s, err := only.Watch(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Recv(); err != nil {
			t.Fatalf("unmatched Watch %d: %v", i, err)
		}
		if md, _ := s.Header(); len(md.Get("ratelimit")) != 0 {
			t.Errorf("unmatched Watch %d got ratelimit metadata %q", i, md.Get("ratelimit"))
		}
		cancel()
	}
}

// TestRulesBeforeRule: Config.Rule takes the calls no rule of Rules
// matches; the rule's own Key overrides Config.Key.
func TestRulesBeforeRule(t *testing.T) {
	store := testkit.Memory(t, memorystore.WithClock(func() time.Time { return at }))
	eng, err := engine.New(engine.Config{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	rest, err := eng.Compile(engine.Rule{Name: "rest", Policies: hourly("rest", 1).Policies})
	if err != nil {
		t.Fatal(err)
	}
	c := serveRules(t, grpclimit.Config{Engine: eng, Rule: rest, Key: grpclimit.ByMethod(), Rules: []grpclimit.Rule{
		{Method: check, Key: grpclimit.ByMetadata("x-api-key"), Rule: hourly("checks", 1)},
	}})
	ctx := context.Background()
	alice := metadata.AppendToOutgoingContext(ctx, "x-api-key", "alice")
	bob := metadata.AppendToOutgoingContext(ctx, "x-api-key", "bob")
	var got []string
	for _, ctx := range []context.Context{alice, alice, bob, ctx} {
		_, err := c.Check(ctx, &healthpb.HealthCheckRequest{})
		got = append(got, outcome(err))
	}
	got = append(got, outcome(watchOnce(ctx, c)), outcome(watchOnce(ctx, c)))
	want := []string{"ok", "refused by checks", "ok", "Unauthenticated", "ok", "refused by rest"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("calls: %q, want %q", got, want)
	}
}

// TestRuleErrors: New names the rule at fault and what is wrong.
func TestRuleErrors(t *testing.T) {
	store := testkit.Memory(t)
	for _, tc := range []struct {
		cfg  grpclimit.Config
		want string
	}{
		{grpclimit.Config{}, "grpclimit: no rule"},
		{grpclimit.Config{Rules: []grpclimit.Rule{{Method: check, Rule: hourly("p", 1)}}}, "Rules need an Engine or a Store"},
		{grpclimit.Config{Store: store, Rules: []grpclimit.Rule{{Method: "grpc.health.v1.Health/Check", Rule: hourly("p", 1)}}},
			`rule "grpc.health.v1.Health/Check": method "grpc.health.v1.Health/Check" is not a full method name pattern`},
		{grpclimit.Config{Store: store, Rules: []grpclimit.Rule{{Method: "POST /grpc.health.v1.Health/Check", Rule: hourly("p", 1)}}},
			"is not a full method name pattern"},
		{grpclimit.Config{Store: store, Rules: []grpclimit.Rule{{Method: "/pkg.S/{m", Rule: hourly("p", 1)}}},
			`grpclimit: rule "/pkg.S/{m": pattern "/pkg.S/{m"`},
		{grpclimit.Config{Store: store, Rules: []grpclimit.Rule{{Method: check}}}, "no policies or concurrency caps: it would limit nothing"},
		{grpclimit.Config{Store: store, Rules: []grpclimit.Rule{{Method: check, Rule: engine.Rule{Policies: []floodgate.Policy{{Name: "p"}}}}}}, "grpclimit: "},
		{grpclimit.Config{Store: store, Rules: []grpclimit.Rule{
			{Method: "/grpc.health.v1.Health/", Rule: hourly("all", 1)}, {Method: check, Rule: hourly("check", 1)}}},
			`rule "/grpc.health.v1.Health/Check" (/grpc.health.v1.Health/Check) is never reached: rule "/grpc.health.v1.Health/" (/grpc.health.v1.Health/) takes its calls first; put the narrower rule first`},
	} {
		_, err := grpclimit.New(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want an error with %q", tc.cfg.Rules, err, tc.want)
		}
	}
}

// TestMetadataKeyNeverStored: with ByMetadata, the API key sent reaches
// neither Redis (no key name of the whole instance contains it; the
// rule's state is under its SHA-256 ID) nor the refusal log.
func TestMetadataKeyNeverStored(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: testkit.Env(t, "FLOODGATE_TEST_REDIS")})
	t.Cleanup(func() { rdb.Close() })
	prefix := "grpclimit-test:" + t.Name() + ":" + time.Now().Format("150405.000000") + ":"
	store, err := redisstore.New(rdb, redisstore.WithTimeout(5*time.Second), redisstore.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	var log testkit.Buffer
	raw := fmt.Sprintf("secret-key-carol-%d", time.Now().UnixNano())
	c := serveRules(t, grpclimit.Config{Store: store, Key: grpclimit.ByMetadata("x-api-key"), Logger: slog.New(slog.NewTextHandler(&log, nil)),
		Rules: []grpclimit.Rule{{Method: "/", Rule: engine.Rule{Name: "calls", Policies: []floodgate.Policy{
			{Name: "minute", Algorithm: floodgate.SlidingWindowCounter, Quota: 2, Window: time.Minute},
			{Name: "burst", Algorithm: floodgate.TokenBucket, Quota: 10, Window: time.Second, Burst: 5}}}}}})
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-api-key", raw)
	var got []string
	for range 3 {
		_, err := c.Check(ctx, &healthpb.HealthCheckRequest{})
		got = append(got, outcome(err))
	}
	if want := "[ok ok refused by minute]"; fmt.Sprint(got) != want {
		t.Fatalf("calls: %v, want %s", got, want)
	}
	ours, err := rdb.Keys(ctx, prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(ours) != 2 || !strings.Contains(strings.Join(ours, " "), secret.ID(raw)) {
		t.Errorf("the rule's keys %q: want its two policies' keys, under the API key's ID %s", ours, secret.ID(raw))
	}
	var leaked []string
	iter := rdb.Scan(ctx, 0, "*"+raw+"*", 1000).Iterator()
	for iter.Next(ctx) {
		leaked = append(leaked, iter.Val())
	}
	if err := iter.Err(); err != nil || len(leaked) != 0 {
		t.Errorf("keys holding the raw API key: %q (%v)", leaked, err)
	}
	if s := log.String(); strings.Contains(s, raw) || !strings.Contains(s, "key="+httplimit.Fingerprint(secret.ID(raw))) {
		t.Errorf("refusal log: %s", s)
	}
}

// TestRefusalLog: refusals are logged as the HTTP door logs them, one
// record per rule and key per interval counting those held back, with the
// method; admitted calls are not logged.
func TestRefusalLog(t *testing.T) {
	var log testkit.Buffer
	now := at
	c := serveRules(t, grpclimit.Config{Key: grpclimit.ByMethod(), Logger: slog.New(slog.NewTextHandler(&log, nil)),
		Now: func() time.Time { return now }, Rules: []grpclimit.Rule{{Method: check, Rule: hourly("checks", 1)}}})
	ctx := context.Background()
	for range 5 {
		c.Check(ctx, &healthpb.HealthCheckRequest{})
	}
	lines := func() []string { return strings.Split(strings.TrimSpace(log.String()), "\n") }
	want := `level=WARN msg="rate limit exceeded" rule=/grpc.health.v1.Health/Check method=/grpc.health.v1.Health/Check policy=checks key=` +
		httplimit.Fingerprint(check) + " retry_after=3000 suppressed=0"
	if got := lines(); len(got) != 1 || !strings.HasSuffix(got[0], want) {
		t.Fatalf("four refusals: %q, want one record ending %q", got, want)
	}
	now = now.Add(10 * time.Second) // the interval; the store's clock stands still
	c.Check(ctx, &healthpb.HealthCheckRequest{})
	if got := lines(); len(got) != 2 || !strings.HasSuffix(got[1], "suppressed=3") {
		t.Fatalf("after the interval: %q, want a second record counting 3 held back", got)
	}
}

// TestCallerDeadlineOnRedis (REQUIREMENTS S3): a call whose context's
// deadline ends its Redis call (a lone call runs inline with that deadline
// on its socket, and fails a moment before the context's timer fires) is
// answered DEADLINE_EXCEEDED, as a call that ran out of time, not
// UNAVAILABLE as if the store failed; the next call is decided.
func TestCallerDeadlineOnRedis(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: testkit.Env(t, "FLOODGATE_TEST_REDIS"), ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	store, err := redisstore.New(rdb, redisstore.WithTimeout(5*time.Second),
		redisstore.WithPrefix("grpclimit-test:"+t.Name()+":"+time.Now().Format("150405.000000")+":"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := grpclimit.New(grpclimit.Config{Store: store, Key: grpclimit.ByMetadata("x-api-key"),
		Rules: []grpclimit.Rule{{Method: "/", Rule: hourly("calls", 100)}}})
	if err != nil {
		t.Fatal(err)
	}
	in := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-api-key", "dave"))
	info := &grpc.UnaryServerInfo{FullMethod: "/grpc.health.v1.Health/Check"}
	ok := func(context.Context, any) (any, error) { return "ok", nil }
	if _, err := l.Unary()(testkit.Late{Context: in}, nil, info, ok); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("past the call's deadline: %v, want DEADLINE_EXCEEDED", err)
	}
	if resp, err := l.Unary()(in, nil, info, ok); err != nil || resp != "ok" {
		t.Fatalf("the next call: %v, %v", resp, err)
	}
}
