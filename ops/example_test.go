package ops_test

import (
	"context"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/httplimit"
	"github.com/floodgate/floodgate/memorystore"
	"github.com/floodgate/floodgate/ops"
)

// Abuse detection, top offenders, the dashboard's statistics and shared
// capacity reductions, wired into the middleware and an admin listener.
// Compiled, not run: it needs Redis and sends webhooks.
func Example_inYourServer() {
	ctx := context.Background()
	store := memorystore.New()
	defer store.Close()
	rules := []httplimit.Rule{{Pattern: "/api/",
		Policies: []floodgate.Policy{{Name: "api", Algorithm: floodgate.GCRA, Quota: 100, Window: time.Minute}}}}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	token := os.Getenv("ADMIN_TOKEN")
	adminMux := http.NewServeMux()

	stats := ops.NewStats(ops.StatsConfig{})
	top := ops.NewOffenders(ops.OffendersConfig{})
	det, err := ops.NewDetector(ops.DetectorConfig{
		Default:    ops.AbuseRule{Threshold: 100, Window: time.Minute, Block: 5 * time.Minute},
		Webhook:    &ops.WebhookConfig{URL: "https://alerts.example.com/hooks/floodgate"},
		Registerer: prometheus.DefaultRegisterer,
	})
	red := ops.NewReductions(ops.ReductionsConfig{Store: ops.NewRedisReductions(rdb, "fg:")})
	mw, err := httplimit.New(httplimit.Config{
		Store: store, Rules: rules,
		Observer: engine.Observers{det, top, stats}, Blocker: det, Capacity: red,
	})
	adminMux.Handle("/", ops.NewAdmin(ops.AdminConfig{Detector: det, Offenders: top, Stats: stats, Reductions: red, Token: token}))
	defer det.Close(ctx)
	defer red.Close()

	if err != nil {
		log.Fatal(err)
	}
	go http.ListenAndServe("127.0.0.1:9090", adminMux)
	log.Fatal(http.ListenAndServe(":8080", mw.Wrap(http.NotFoundHandler())))
}
