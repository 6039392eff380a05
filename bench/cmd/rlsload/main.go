// Command rlsload drives gRPC rate limit services with the same load and
// prints decisions per second and each server's CPU per decision, for
// scripts/bench-rls.sh: Envoy's RateLimitService/ShouldRateLimit
// (Floodgate's envoy_rls face, envoyproxy/ratelimit) or gubernator's
// V1/GetRateLimits. With -rate it offers a fixed rate instead and prints
// the answers' latency quantiles (p50, p99, p99.9). With -diff it sends one request sequence to two
// RateLimitService servers and compares their answers.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

func main() {
	proto := flag.String("proto", "envoy", "envoy (ShouldRateLimit) or gubernator (GetRateLimits)")
	addr := flag.String("addr", "127.0.0.1:8081", "server address")
	keys := flag.Int("keys", 1, "distinct keys, spread over the calls")
	conc := flag.Int("conc", 64, "concurrent calls")
	conns := flag.Int("conns", 4, "gRPC connections the calls share")
	dur := flag.Duration("duration", 5*time.Second, "how long to load")
	pids := flag.String("pids", "", "comma-separated PIDs whose CPU (utime+stime) is counted as the server's")
	redisPID := flag.String("redis-pid", "", "a PID whose CPU per decision is also printed on its own (redis-server's)")
	label := flag.String("label", "", "name printed first on the result line")
	diff := flag.String("diff", "", "two RateLimitService addresses A,B: send one request sequence to both and compare")
	writeConfig := flag.String("write-config", "", "write the configuration of -diff (domain diff) and of the load (domain bench) into this directory and exit")
	rate := flag.Int("rate", 0, "offer this many calls a second, open loop, and print latency quantiles instead of the closed-loop rate")
	suffix := flag.String("suffix", strconv.FormatInt(time.Now().UnixNano(), 36), "-diff: appended to every value, so runs do not share counters")
	flag.Parse()
	if *writeConfig != "" {
		if err := writeConfigs(*writeConfig, *suffix); err != nil {
			log.Fatal(err)
		}
		return
	}
	if *diff != "" {
		a, b, _ := strings.Cut(*diff, ",")
		os.Exit(differential(a, b, *suffix))
	}
	call, err := caller(*proto, *addr, *conns)
	if err != nil {
		log.Fatal(err)
	}
	before, redisBefore := cpu(*pids), cpu(*redisPID)
	if *rate > 0 {
		lat, errs, late := openLoop(call, *keys, *rate, *dur)
		fmt.Println(latencyLine(*label, *keys, *rate, *dur, lat, errs, late, float64((cpu(*pids)-before).Microseconds())/float64(max(len(lat), 1))))
		return
	}
	n, errs := load(call, *keys, *conc, *dur)
	used, redisUsed := cpu(*pids)-before, cpu(*redisPID)-redisBefore
	if n == 0 {
		log.Fatalf("no decision answered (%d errors)", errs)
	}
	perDecision := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(n) }
	fmt.Printf("%s\t%d keys\t%.0f decisions/s\t%.1f µs server CPU/decision\t%d errors\t%.2f µs Redis CPU/decision\n",
		*label, *keys, float64(n)/dur.Seconds(), perDecision(used), errs, perDecision(redisUsed))
}

// load runs conc loops calling call with keys spread round-robin until dur
// ends, and returns the answered calls and the errors.
func load(call func(ctx context.Context, key string) error, keys, conc int, dur time.Duration) (n, errs int64) {
	names := make([]string, keys)
	for i := range names {
		names[i] = "k" + strconv.Itoa(i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	var ok, bad, next atomic.Int64
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				err := call(ctx, names[next.Add(1)%int64(keys)])
				switch {
				case err == nil:
					ok.Add(1)
				case ctx.Err() == nil && status.Code(err) != codes.DeadlineExceeded:
					// The server's copy of the deadline can expire just
					// before the client's: those are the run's end.
					bad.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return ok.Load(), bad.Load()
}

// caller returns one decision's call on conns connections to addr.
func caller(proto, addr string, conns int) (func(ctx context.Context, key string) error, error) {
	cs := make([]*grpc.ClientConn, conns)
	for i := range cs {
		c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, err
		}
		cs[i] = c
	}
	var rr atomic.Int64
	pick := func() *grpc.ClientConn { return cs[rr.Add(1)%int64(len(cs))] }
	switch proto {
	case "envoy":
		clients := make([]rlsv3.RateLimitServiceClient, len(cs))
		for i, c := range cs {
			clients[i] = rlsv3.NewRateLimitServiceClient(c)
		}
		return func(ctx context.Context, key string) error {
			req := &rlsv3.RateLimitRequest{Domain: "bench", Descriptors: []*commonv3.RateLimitDescriptor{
				{Entries: []*commonv3.RateLimitDescriptor_Entry{{Key: "client", Value: key}}}}}
			resp, err := clients[rr.Add(1)%int64(len(clients))].ShouldRateLimit(ctx, req)
			if err == nil && resp.OverallCode != rlsv3.RateLimitResponse_OK {
				return fmt.Errorf("refused: the quota was reached")
			}
			return err
		}, nil
	case "gubernator":
		return func(ctx context.Context, key string) error {
			req, resp := rawMessage(gubernatorRequest(key)), rawMessage(nil)
			err := pick().Invoke(ctx, "/pb.gubernator.V1/GetRateLimits", &req, &resp, grpc.ForceCodecV2(rawCodec{}))
			if err == nil && gubernatorStatus(resp) != 0 {
				return fmt.Errorf("refused: the quota was reached")
			}
			return err
		}, nil
	}
	return nil, fmt.Errorf("unknown -proto %q", proto)
}

// cpu sums utime+stime of the PIDs in list, read from /proc.
func cpu(list string) time.Duration {
	var total int64
	for _, p := range strings.Split(list, ",") {
		if p == "" {
			continue
		}
		b, err := os.ReadFile("/proc/" + p + "/stat")
		if err != nil {
			log.Fatalf("pid %s: %v", p, err)
		}
		// Fields after the command's closing parenthesis; utime and stime
		// are the 14th and 15th of the whole line.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
		u, _ := strconv.ParseInt(f[11], 10, 64)
		s, _ := strconv.ParseInt(f[12], 10, 64)
		total += u + s
	}
	return time.Duration(total) * time.Second / 100 // USER_HZ
}
