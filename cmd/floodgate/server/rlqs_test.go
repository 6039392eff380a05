package server

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/floodgate/floodgate/rlqs/rlqsclient"
)

const rlqsConfig = `
policies:
  api: {algorithm: fixed-window, quota: 1000, window: 1m}
rlqs:
  listen: 127.0.0.1:0
  domains:
    envoy:
      - {match: {name: api}, policy: api}
admin: {listen: "127.0.0.1:0"}
log: {level: error}
`

// TestRLQSFace: the daemon serves the quota service and health on
// rlqs.listen; a report gets a lease from the store; a reload that drops
// the bucket's rule abandons it.
func TestRLQSFace(t *testing.T) {
	f := start(t, rlqsConfig)
	conn, err := grpc.NewClient(f.srv.Addr(FaceRLQS), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hc, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: rlqsService})
	if err != nil || hc.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v %v", hc, err)
	}
	c, err := rlqsclient.New(conn, rlqsclient.Settings{Domain: "envoy", Interval: 100 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	id := map[string]string{"name": "api"}
	for range 8 {
		c.Allow(id)
	}
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	// 8 requests reported over the interval of the immediate report: a
	// lease of ⌈8 × 1.25⌉ + 1 tokens.
	if st, s := c.State(id); st != rlqsclient.Active || s.GetTokenBucket().GetMaxTokens() != 11 {
		t.Fatalf("state %v, strategy %v: want active with 11 tokens", st, s)
	}
	before := c.Answers()
	y := strings.Replace(rlqsConfig, "name: api}", "name: other}", 1)
	if err := os.WriteFile(f.file, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := f.srv.Reload(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); c.Answers() == before; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no abandon after the reload")
		}
	}
	if st, _ := c.State(id); st != rlqsclient.Untracked {
		t.Fatalf("state %v after the rule went away, want untracked", st)
	}
}
