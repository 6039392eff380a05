// Command rlsdiff sends every request of a case file to two Envoy rate
// limit services at the same moment (envoyproxy/ratelimit as A,
// Floodgate's envoy_rls as B) and compares their answers:
// overall_code, each descriptor's code, current_limit, limit_remaining,
// duration_until_reset (whole seconds; A rounds down the clock, so B's
// exact duration is rounded up, ±1 s where the two calls straddle a
// second), dynamic_metadata and the RateLimit-Limit, -Remaining and
// -Reset headers (the reset as the durations). scripts/ratelimit-diff.sh
// runs it.
//
// The case file has one request a line: a domain, the request's
// hits_addend, then its descriptors, each "key=value,key=value" with
// optional "@own=N" (the descriptor's own hits_addend) and
// "@limit=N/UNIT" (its limit override). A line "! reason" lists a known
// difference of the next request; "#" starts a comment. It exits 1 when
// an answer differs without such a line, or such a line's answers agree.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

type request struct {
	line    int
	req     *rlsv3.RateLimitRequest
	allowed string // the listed difference, or ""
}

func main() {
	a := flag.String("a", "", "envoyproxy/ratelimit's gRPC address")
	b := flag.String("b", "", "Floodgate's envoy_rls address")
	cases := flag.String("cases", "", "the case file")
	flag.Parse()
	reqs, err := parse(*cases)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Exit(run(*a, *b, reqs))
}

func parse(file string) ([]request, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var reqs []request
	allowed := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
			continue
		case strings.HasPrefix(line, "!"):
			allowed = strings.TrimSpace(line[1:])
			continue
		}
		r, err := parseLine(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", file, n, err)
		}
		reqs = append(reqs, request{line: n, req: r, allowed: allowed})
		allowed = ""
	}
	return reqs, sc.Err()
}

func parseLine(line string) (*rlsv3.RateLimitRequest, error) {
	f := strings.Fields(line)
	if len(f) < 3 {
		return nil, fmt.Errorf("want a domain, a hits_addend and descriptors: %q", line)
	}
	hits, err := strconv.ParseUint(f[1], 10, 32)
	if err != nil {
		return nil, err
	}
	req := &rlsv3.RateLimitRequest{Domain: f[0], HitsAddend: uint32(hits)}
	for _, d := range f[2:] {
		parts := strings.Split(d, "@")
		desc := &commonv3.RateLimitDescriptor{}
		for _, kv := range strings.Split(parts[0], ",") {
			k, v, _ := strings.Cut(kv, "=")
			desc.Entries = append(desc.Entries, &commonv3.RateLimitDescriptor_Entry{Key: k, Value: v})
		}
		for _, opt := range parts[1:] {
			name, val, _ := strings.Cut(opt, "=")
			switch name {
			case "own":
				n, err := strconv.ParseUint(val, 10, 64)
				if err != nil {
					return nil, err
				}
				desc.HitsAddend = wrapperspb.UInt64(n)
			case "limit":
				q, unit, _ := strings.Cut(val, "/")
				n, err := strconv.ParseUint(q, 10, 32)
				if err != nil {
					return nil, err
				}
				desc.Limit = &commonv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: uint32(n), Unit: typev3.RateLimitUnit(typev3.RateLimitUnit_value[unit])}
			default:
				return nil, fmt.Errorf("unknown descriptor option %q", opt)
			}
		}
		req.Descriptors = append(req.Descriptors, desc)
	}
	return req, nil
}

// answer is one service's answer in comparable parts.
type answer struct {
	text   string    // everything but the resets
	resets []float64 // seconds; -1 for none
}

func run(a, b string, reqs []request) int {
	var clients [2]rlsv3.RateLimitServiceClient
	for i, addr := range []string{a, b} {
		c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		defer c.Close()
		clients[i] = rlsv3.NewRateLimitServiceClient(c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	diffs, listed, unexpected := 0, 0, 0
	for n, r := range reqs {
		var got [2]answer
		var wg sync.WaitGroup
		for i, cl := range clients {
			wg.Add(1)
			go func() { // both at the same moment
				defer wg.Done()
				resp, err := cl.ShouldRateLimit(ctx, r.req)
				got[i] = summarize(resp, err, i == 1)
			}()
		}
		wg.Wait()
		same := got[0].text == got[1].text && sameResets(got[0].resets, got[1].resets)
		switch {
		case !same && r.allowed != "":
			diffs++
			listed++
			fmt.Printf("request %d (line %d), listed: %s\n  ratelimit: %s %v\n  floodgate: %s %v\n", n+1, r.line, r.allowed, got[0].text, got[0].resets, got[1].text, got[1].resets)
		case !same:
			diffs++
			unexpected++
			fmt.Printf("request %d (line %d) DIFFERS\n  ratelimit: %s %v\n  floodgate: %s %v\n", n+1, r.line, got[0].text, got[0].resets, got[1].text, got[1].resets)
		case r.allowed != "":
			unexpected++
			fmt.Printf("request %d (line %d): listed as differing (%s), but both answer %s\n", n+1, r.line, r.allowed, got[0].text)
		}
	}
	fmt.Printf("rlsdiff: %d requests, %d differences (%d listed, %d unexpected)\n", len(reqs), diffs, listed, unexpected)
	if unexpected > 0 {
		return 1
	}
	return 0
}

func sameResets(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if (a[i] < 0) != (b[i] < 0) || a[i]-b[i] > 1 || b[i]-a[i] > 1 {
			return false
		}
	}
	return true
}

func summarize(resp *rlsv3.RateLimitResponse, err error, exact bool) answer {
	if err != nil {
		return answer{text: "error " + status.Code(err).String()}
	}
	var b strings.Builder
	var resets []float64
	b.WriteString(resp.OverallCode.String())
	for _, s := range resp.Statuses {
		fmt.Fprintf(&b, " [%s %d", s.Code, s.LimitRemaining)
		if cl := s.CurrentLimit; cl != nil {
			fmt.Fprintf(&b, " limit %d/%s %q", cl.RequestsPerUnit, cl.Unit, cl.Name)
		}
		b.WriteString("]")
		r := -1.0
		if s.DurationUntilReset != nil {
			d := s.DurationUntilReset.AsDuration()
			if exact {
				d = (d + time.Second - 1).Truncate(time.Second) // round up, as A's whole seconds are
			}
			r = d.Seconds()
		}
		resets = append(resets, r)
	}
	for _, h := range resp.ResponseHeadersToAdd {
		if strings.EqualFold(h.Key, "RateLimit-Reset") { // seconds, compared as the resets are
			r, _ := strconv.ParseFloat(h.Value, 64)
			resets = append(resets, r)
			continue
		}
		fmt.Fprintf(&b, " %s: %s", strings.ToLower(h.Key), h.Value)
	}
	if md := resp.GetDynamicMetadata(); md != nil {
		j, _ := json.Marshal(md.AsMap())
		// protobuf's text form of a limit override varies its spacing.
		b.WriteString(" metadata " + strings.Join(strings.Fields(strings.ReplaceAll(string(j), ": ", ":")), " "))
	}
	return answer{text: b.String(), resets: resets}
}
