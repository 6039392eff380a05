package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// diffConfig is the differential run's configuration, in
// envoyproxy/ratelimit's format; %[1]s is the run's suffix, so that exact
// values are the run's own too.
const diffConfig = `domain: diff
descriptors:
  - key: client
    rate_limit: {unit: hour, requests_per_unit: 4}
  - key: client
    value: vip%[1]s
    rate_limit: {unit: hour, requests_per_unit: 6}
  - key: path
    value: /api/*
    rate_limit: {unit: hour, requests_per_unit: 3}
  - key: tenant
    value: acme%[1]s
    descriptors:
      - key: user
        rate_limit: {unit: day, requests_per_unit: 3}
  - key: internal
    rate_limit: {unlimited: true}
  - key: trial
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: region
    value: eu%[1]s
    descriptors:
      - key: user
        value: bob
        rate_limit: {name: bob_limit, unit: hour, requests_per_unit: 2}
  - key: plan
    value: gold%[1]s
    descriptors:
      - key: user
        value: bob
        rate_limit:
          replaces: [{name: bob_limit}]
          unit: hour
          requests_per_unit: 3
`

// benchConfig is the load's: one key-only descriptor whose quota is never
// reached.
const benchConfig = `domain: bench
descriptors:
  - key: client
    rate_limit: {unit: hour, requests_per_unit: 1000000000}
`

func writeConfigs(dir, suffix string) error {
	if err := os.WriteFile(filepath.Join(dir, "diff.yaml"), fmt.Appendf(nil, diffConfig, suffix), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "bench.yaml"), []byte(benchConfig), 0o644)
}

// call is one request of the sequence: descriptors as "k=v,k=v" and the
// hits_addend.
type call struct {
	descs []string
	hits  uint32
}

// sequence stays within envoyproxy/ratelimit's semantics: no request
// has a descriptor over its limit while another one is spent.
func sequence(s string) []call {
	var seq []call
	add := func(n int, hits uint32, descs ...string) {
		for range n {
			seq = append(seq, call{descs, hits})
		}
	}
	add(6, 0, "client=a"+s)                                         // key only: 4 then over
	add(7, 0, "client=vip"+s)                                       // key and value over key alone
	add(4, 0, "path=/api/x"+s)                                      // wildcard
	add(1, 0, "path=/api/y"+s)                                      // a counter per value
	add(1, 0, "path=/web"+s)                                        // no limit
	add(4, 0, "tenant=acme"+s+",user=u"+s)                          // nested
	add(1, 0, "tenant=acme"+s)                                      // a placeholder
	add(1, 0, "user=u"+s)                                           // nested only
	add(2, 0, "internal=x"+s)                                       // unlimited
	add(3, 0, "trial=t"+s)                                          // shadow mode
	add(4, 0, "region=eu"+s+",user=bob", "plan=gold"+s+",user=bob") // replaces
	add(3, 0, "region=eu"+s+",user=bob")                            // the replaced limit, unspent
	add(3, 0, "client=m"+s, "path=/api/m"+s)                        // two descriptors, both within quota
	add(2, 2, "client=h"+s)                                         // hits_addend 2
	add(1, 1, "client=h"+s)                                         // then over
	add(2, 0, "clinet=a"+s)                                         // unmatched
	return seq
}

func descriptor(s string) *commonv3.RateLimitDescriptor {
	d := &commonv3.RateLimitDescriptor{}
	for _, kv := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(kv, "=")
		d.Entries = append(d.Entries, &commonv3.RateLimitDescriptor_Entry{Key: k, Value: v})
	}
	return d
}

// differential sends the sequence to a and b in turn and prints every
// answer that differs in overall_code, a descriptor's code or its
// limit_remaining; it returns the exit status (1 on any difference).
func differential(a, b, suffix string) int {
	clients := [2]rlsv3.RateLimitServiceClient{}
	for i, addr := range []string{a, b} {
		c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			fmt.Println(err)
			return 2
		}
		clients[i] = rlsv3.NewRateLimitServiceClient(c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	seq, diffs := sequence(suffix), 0
	for n, c := range seq {
		req := &rlsv3.RateLimitRequest{Domain: "diff", HitsAddend: c.hits}
		for _, d := range c.descs {
			req.Descriptors = append(req.Descriptors, descriptor(d))
		}
		var got [2]string
		for i, cl := range clients {
			resp, err := cl.ShouldRateLimit(ctx, req)
			got[i] = summary(resp, err)
		}
		if got[0] != got[1] {
			diffs++
			fmt.Printf("request %d %v: %s\n  A: %s\n  B: %s\n", n, c.descs, "differs", got[0], got[1])
		}
	}
	fmt.Printf("differential: %d requests, %d differing answers (overall_code, codes, limit_remaining)\n", len(seq), diffs)
	if diffs > 0 {
		return 1
	}
	return 0
}

func summary(resp *rlsv3.RateLimitResponse, err error) string {
	if err != nil {
		return "error " + err.Error()
	}
	var b strings.Builder
	b.WriteString(resp.OverallCode.String())
	for _, s := range resp.Statuses {
		fmt.Fprintf(&b, " [%s %d]", s.Code, s.LimitRemaining)
	}
	return b.String()
}
