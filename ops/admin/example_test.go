package admin_test

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
	"github.com/floodgate/floodgate/ops/admin"
	"github.com/floodgate/floodgate/ops/detect"
	"github.com/floodgate/floodgate/ops/reduce"
	"github.com/floodgate/floodgate/ops/stats"
	"github.com/floodgate/floodgate/ops/top"
)

// Abuse detection, top offenders, the dashboard's statistics and shared
// capacity reductions, wired into the middleware and an admin listener.
// Compiled, not run: it needs Redis and sends webhooks.
func Example_inYourServer() {
	ctx := context.Background()
	store, err := memorystore.New()
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	rules := []httplimit.Rule{{Pattern: "/api/",
		Rule: engine.Rule{
			Policies: []floodgate.Policy{{Name: "api", Algorithm: floodgate.GCRA, Quota: 100, Window: time.Minute}},
		}}}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	token := os.Getenv("ADMIN_TOKEN")
	adminMux := http.NewServeMux()

	st := stats.NewStats(stats.Config{})
	offenders := top.NewOffenders(top.OffendersConfig{})
	det, err := detect.NewDetector(detect.DetectorConfig{
		Default:    detect.AbuseRule{Threshold: 100, Window: time.Minute, Block: 5 * time.Minute},
		Webhook:    &detect.WebhookConfig{URL: "https://alerts.example.com/hooks/floodgate"},
		Registerer: prometheus.DefaultRegisterer,
	})
	red := reduce.NewReductions(reduce.ReductionsConfig{Store: reduce.NewRedisReductions(rdb, "fg:")})
	eng, err := engine.New(engine.Config{Store: store,
		Observer: engine.Observers{det, offenders, st}, Blocker: det, Capacity: red,
	})
	if err != nil {
		log.Fatal(err)
	}
	mw, err := httplimit.New(httplimit.Config{Engine: eng, Rules: rules})
	adminMux.Handle("/", admin.NewAdmin(admin.Config{Detector: det, Offenders: offenders, Stats: st, Reductions: red, Token: token}))
	defer det.Close(ctx)
	defer red.Close()

	if err != nil {
		log.Fatal(err)
	}
	go http.ListenAndServe("127.0.0.1:9090", adminMux)
	log.Fatal(http.ListenAndServe(":8080", mw.Wrap(http.NotFoundHandler())))
}
