package rlqs_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/memorystore"
	"github.com/floodgate/floodgate/rlqs"
	"github.com/floodgate/floodgate/rlqs/rlqsclient"
)

// A quota service for the domain "envoy" on a memory store (a
// redisstore.Store shares the quota between servers), and the reference
// client deciding locally on the lease it gets.
func Example() {
	store, err := memorystore.New()
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	rules, err := rlqs.NewRules(map[string][]rlqs.Rule{"envoy": {{
		Match:  map[string]string{"name": rlqs.Any},
		Policy: floodgate.Policy{Name: "api", Algorithm: floodgate.FixedWindow, Quota: 1000, Window: time.Second},
	}}})
	if err != nil {
		log.Fatal(err)
	}
	srv, err := rlqs.NewServer(store, rules, rlqs.Options{})
	if err != nil {
		log.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	g := grpc.NewServer()
	srv.Register(g)
	go g.Serve(lis)
	defer g.Stop()

	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	c, err := rlqsclient.New(conn, rlqsclient.Settings{Domain: "envoy", Interval: rlqs.DefaultInterval}, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	id := map[string]string{"name": "api"}
	c.Allow(id) // the bucket's first request: allowed (no assignment yet), and it subscribes
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Sync(ctx); err != nil { // go c.Run(ctx) reports every interval instead
		log.Fatal(err)
	}
	_, lease := c.State(id)
	tb := lease.GetTokenBucket()
	fmt.Println(tb.GetMaxTokens(), "tokens, refilled every", tb.GetFillInterval().AsDuration())
	// Output: 158 tokens, refilled every 125ms
}
