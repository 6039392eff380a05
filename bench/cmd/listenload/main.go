// Command listenload measures what hostile clients cost a running
// daemon's listeners, reading the daemon's RSS from /proc (Linux):
//
//	listenload -pid PID rls -addr 127.0.0.1:8070 -calls 96 -metadata 15728640 -for 5s
//	listenload -pid PID idle -addr 127.0.0.1:8080 -conns 10000
//
// rls keeps that many ShouldRateLimit calls in flight, each on its own
// HTTP/2 connection, written frame by frame so no client-side limit
// applies, with the given metadata (and -message bytes of request), and
// prints the daemon's RSS before and its peak during the run. idle opens
// that many keep-alive connections that each make one GET and then stay
// idle, then times a new client's GET. scripts/listener-bounds.sh runs
// both; the figures are in docs/DEPLOY.md, "Listener bounds".
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/floodgate/floodgate/bench/internal/procrss"
)

func main() {
	pid := flag.Int("pid", 0, "the daemon's process id, for its RSS")
	flag.Parse()
	if *pid == 0 || flag.NArg() < 1 {
		log.Fatal("usage: listenload -pid PID rls|idle [flags]")
	}
	fs := flag.NewFlagSet(flag.Arg(0), flag.ExitOnError)
	addr := fs.String("addr", "", "listener address")
	calls := fs.Int("calls", 96, "rls: calls in flight")
	metadata := fs.Int("metadata", 15<<20, "rls: metadata bytes per call")
	message := fs.Int("message", 0, "rls: request message bytes (a descriptor value that long)")
	dur := fs.Duration("for", 5*time.Second, "rls: how long")
	viaGRPC := fs.Bool("grpc", false, "rls: send through grpc-go's client (flow control, the server's header limit) instead of raw frames")
	conns := fs.Int("conns", 10_000, "idle: connections")
	fs.Parse(flag.Args()[1:])
	idle := rss(*pid)
	switch flag.Arg(0) {
	case "rls":
		send := rawCaller(*addr, *metadata, *message)
		if *viaGRPC {
			send = grpcCaller(*addr, *metadata, *message)
		}
		peak, done, ends := rlsFlood(*pid, *calls, send, *dur)
		fmt.Printf("rls: %d calls in flight, %d B metadata, %d B message, %v: %d calls ended (%s)\n",
			*calls, *metadata, *message, *dur, done, ends)
		fmt.Printf("rss idle %.1f MiB, peak %.1f MiB (%.2fx)\n", mib(idle), mib(peak), float64(peak)/float64(idle))
	case "idle":
		idleConns(*pid, *addr, *conns, idle)
	default:
		log.Fatalf("unknown mode %q", flag.Arg(0))
	}
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// rss is the process's resident set in bytes (VmRSS).
func rss(pid int) int64 {
	n, err := procrss.Of(pid)
	if err != nil {
		log.Fatal(err)
	}
	return n
}

// sampler records the peak RSS every 50 ms until stopped.
func sampler(pid int) (stop func() int64) {
	var peak atomic.Int64
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			peak.Store(max(peak.Load(), rss(pid)))
			select {
			case <-quit:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return func() int64 { close(quit); <-done; return max(peak.Load(), rss(pid)) }
}

// rawCaller sends each call on a fresh connection, frame by frame.
func rawCaller(addr string, metadata, message int) func() string {
	block := headerBlock(addr, metadata)
	msg, _ := proto.Marshal(request(message))
	body := append(binary.BigEndian.AppendUint32([]byte{0}, uint32(len(msg))), msg...)
	return func() string { return call(addr, block, body) }
}

// grpcCaller sends calls through grpc-go, each caller on a connection of
// its own, kept for its next call as a real client would.
func grpcCaller(addr string, mdBytes, message int) func() string {
	var pairs []string
	pad := strings.Repeat("p", 8<<10)
	for size := 0; size < mdBytes; {
		k, v := fmt.Sprintf("x-pad-%d", size), pad[:max(1, min(len(pad), mdBytes-size-48))]
		pairs = append(pairs, k, v)
		size += len(k) + len(v) + 32
	}
	req := request(message)
	ctx := metadata.AppendToOutgoingContext(context.Background(), pairs...)
	var mu sync.Mutex
	var free []rlsv3.RateLimitServiceClient // one connection per caller, reused
	return func() string {
		mu.Lock()
		var c rlsv3.RateLimitServiceClient
		if n := len(free); n > 0 {
			c, free = free[n-1], free[:n-1]
		}
		mu.Unlock()
		if c == nil {
			conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				return "client error"
			}
			c = rlsv3.NewRateLimitServiceClient(conn)
		}
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		_, err := c.ShouldRateLimit(ctx, req)
		mu.Lock()
		free = append(free, c)
		mu.Unlock()
		return status.Code(err).String()
	}
}

func rlsFlood(pid int, calls int, send func() string, d time.Duration) (peak int64, done int64, ends string) {
	stop := sampler(pid)
	var n atomic.Int64
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	deadline := time.Now().Add(d)
	for range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				end := send()
				n.Add(1)
				mu.Lock()
				seen[end]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	peak = stop()
	var parts []string
	for k, v := range seen {
		parts = append(parts, fmt.Sprintf("%s: %d", k, v))
	}
	return peak, n.Load(), strings.Join(parts, ", ")
}

func headerBlock(addr string, metadata int) []byte {
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, h := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":authority", addr},
		{":path", "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"},
		{"content-type", "application/grpc"}, {"te", "trailers"}} {
		enc.WriteField(hpack.HeaderField{Name: h[0], Value: h[1]})
	}
	// metadata counts as the header list does (RFC 7541 §4.1): names,
	// values and 32 bytes per field.
	pad := strings.Repeat("p", 8<<10)
	for size := 0; size < metadata; {
		f := hpack.HeaderField{Name: fmt.Sprintf("x-pad-%d", size), Value: pad[:max(1, min(len(pad), metadata-size-48))], Sensitive: true}
		enc.WriteField(f)
		size += int(f.Size())
	}
	return hb.Bytes()
}

// request is a ShouldRateLimit request of about message bytes.
func request(message int) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*commonv3.RateLimitDescriptor{
		{Entries: []*commonv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "192.0.2.9" + strings.Repeat("x", max(0, message-40))}}}}}
}

// call sends one call on a fresh connection and says how it ended.
func call(addr string, block, body []byte) string {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return "dial error"
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	w := http2.NewFramer(c, nil)
	var mu sync.Mutex
	mu.Lock()
	ended := make(chan string, 1)
	go func() { ended <- readEnd(http2.NewFramer(nil, c), w, &mu) }()
	err = func() error {
		defer mu.Unlock()
		if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
			return err
		}
		if err := w.WriteSettings(); err != nil {
			return err
		}
		first := block[:min(len(block), 16<<10)]
		rest := block[len(first):]
		if err := w.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: first, EndHeaders: len(rest) == 0}); err != nil {
			return err
		}
		for len(rest) > 0 {
			k := min(len(rest), 16<<10)
			if err := w.WriteContinuation(1, k == len(rest), rest[:k]); err != nil {
				return err
			}
			rest = rest[k:]
		}
		for b := body; len(b) > 0; {
			k := min(len(b), 16<<10)
			if err := w.WriteData(1, k == len(b), b[:k]); err != nil {
				return err
			}
			b = b[k:]
		}
		return nil
	}()
	if err != nil {
		select {
		case end := <-ended:
			return end
		case <-time.After(5 * time.Second):
			return "closed while sending"
		}
	}
	return <-ended
}

func readEnd(fr *http2.Framer, w *http2.Framer, mu *sync.Mutex) string {
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return "closed"
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				mu.Lock()
				w.WriteSettingsAck()
				mu.Unlock()
			}
		case *http2.RSTStreamFrame:
			return "RST_STREAM " + f.ErrCode.String()
		case *http2.GoAwayFrame:
			return "GOAWAY " + f.ErrCode.String()
		case *http2.MetaHeadersFrame:
			for _, h := range f.RegularFields() {
				if h.Name == "grpc-status" {
					return "grpc-status " + h.Value
				}
			}
		}
	}
}

// idleConns opens n keep-alive connections, each idle after one GET,
// then times a new client's GET.
func idleConns(pid int, addr string, n int, before int64) {
	get := func(c net.Conn, br *bufio.Reader) error {
		if _, err := fmt.Fprint(c, "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"); err != nil {
			return err
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}
	var held []net.Conn
	failed := 0
	begin := time.Now()
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			failed++
			continue
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if err := get(c, bufio.NewReader(c)); err != nil {
			failed++
			c.Close()
			continue
		}
		held = append(held, c)
	}
	fmt.Printf("idle: %d keep-alive connections opened in %v (%d failed)\n", len(held), time.Since(begin).Round(time.Millisecond), failed)
	time.Sleep(time.Second)
	fmt.Printf("rss before %.1f MiB, with the idle connections %.1f MiB\n", mib(before), mib(rss(pid)))
	for i := range 3 {
		start := time.Now()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			log.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(15 * time.Second))
		err = get(c, bufio.NewReader(c))
		fmt.Printf("new client %d: served in %v (error %v)\n", i+1, time.Since(start).Round(time.Microsecond), err)
		c.Close()
	}
	open := 0
	for _, c := range held {
		c.SetReadDeadline(time.Now().Add(time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); err != nil && strings.Contains(err.Error(), "timeout") {
			open++
		}
		c.Close()
	}
	fmt.Printf("idle connections still open afterwards: %d of %d\n", open, len(held))
}
