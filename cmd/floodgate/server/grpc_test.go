package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// TestRLSRefusesHugeMetadata: ShouldRateLimit calls carrying 4 MiB and
// 15 MiB of metadata (grpc-go's own default cap is 16 MiB) are refused by
// the envoy_rls face at listeners.max_header_bytes (64 KiB), while the
// same call with 1 KiB of metadata is answered. The call is written frame by
// frame, as a hostile client would, since grpc-go's client would refuse
// to send it once the server announced its limit.
func TestRLSRefusesHugeMetadata(t *testing.T) {
	limits := filepath.Join(t.TempDir(), "limits.yaml")
	y := "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: day, requests_per_unit: 100}\n"
	if err := os.WriteFile(limits, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	f := start(t, fmt.Sprintf(rlsConfig, limits))
	addr := f.srv.Addr(FaceEnvoyRLS)
	if got := rawRLSCall(t, addr, 1<<10); got != "grpc-status 0" {
		t.Fatalf("1 KiB of metadata: %s, want grpc-status 0", got)
	}
	// grpc-go's defaults answer both.
	for _, size := range []int{4 << 20, 15 << 20} {
		if got := rawRLSCall(t, addr, size); strings.HasPrefix(got, "grpc-status 0") {
			t.Fatalf("%d MiB of metadata was answered: %s", size>>20, got)
		} else {
			t.Logf("%d MiB of metadata: %s", size>>20, got)
		}
	}
	if got := rawRLSCall(t, addr, 1<<10); got != "grpc-status 0" {
		t.Fatalf("after the refusal: %s, want grpc-status 0", got)
	}
}

// rawRLSCall sends one ShouldRateLimit call over a fresh HTTP/2
// connection with about metadata bytes of custom metadata, ignoring the
// server's SETTINGS (metadata counted as the header list is: names,
// values and 32 bytes per field), and describes how it ended: "grpc-status N",
// "RST_STREAM <code>", "GOAWAY <code>" or "closed".
func rawRLSCall(t *testing.T, addr string, metadata int) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	fr := &lockedFramer{Framer: http2.NewFramer(c, nil)}
	ended := make(chan string, 1)
	fr.mu.Lock() // the preface goes before any SETTINGS acknowledgement
	go func() { ended <- readRLSEnd(http2.NewFramer(nil, c), fr) }()

	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, h := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":authority", addr},
		{":path", "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"},
		{"content-type", "application/grpc"}, {"te", "trailers"}} {
		enc.WriteField(hpack.HeaderField{Name: h[0], Value: h[1]})
	}
	pad := strings.Repeat("p", 8<<10)
	for size := 0; size < metadata; { // as the header list counts it: RFC 7541 §4.1
		f := hpack.HeaderField{Name: fmt.Sprintf("x-pad-%d", size), Value: pad[:min(len(pad), metadata-size)], Sensitive: true}
		enc.WriteField(f)
		size += int(f.Size())
	}
	msg, _ := proto.Marshal(&rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*commonv3.RateLimitDescriptor{
		{Entries: []*commonv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "192.0.2.9"}}}}})
	body := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(msg)))

	send := func() error {
		defer fr.mu.Unlock()
		if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
			return err
		}
		if err := fr.WriteSettings(); err != nil {
			return err
		}
		block := hb.Bytes()
		first := block[:min(len(block), 16<<10)]
		block = block[len(first):]
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: first, EndHeaders: len(block) == 0}); err != nil {
			return err
		}
		for len(block) > 0 {
			n := min(len(block), 16<<10)
			if err := fr.WriteContinuation(1, n == len(block), block[:n]); err != nil {
				return err
			}
			block = block[n:]
		}
		return fr.WriteData(1, true, append(body, msg...))
	}
	if err := send(); err != nil {
		select {
		case end := <-ended:
			return end
		case <-time.After(10 * time.Second):
			return "closed while sending: " + err.Error()
		}
	}
	return <-ended
}

// lockedFramer writes frames one goroutine at a time.
type lockedFramer struct {
	mu sync.Mutex
	*http2.Framer
}

// readRLSEnd reads frames until stream 1 ends or the connection does,
// acknowledging the server's SETTINGS on w.
func readRLSEnd(fr *http2.Framer, w *lockedFramer) string {
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return "closed: " + err.Error()
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				w.mu.Lock()
				w.WriteSettingsAck()
				w.mu.Unlock()
			}
		case *http2.RSTStreamFrame:
			return "RST_STREAM " + f.ErrCode.String()
		case *http2.GoAwayFrame:
			return "GOAWAY " + f.ErrCode.String()
		case *http2.MetaHeadersFrame:
			if s := f.PseudoValue("status"); s != "" && s != "200" {
				return "HTTP " + s
			}
			for _, h := range f.RegularFields() {
				if h.Name == "grpc-status" {
					return "grpc-status " + h.Value
				}
			}
		}
	}
}

// TestRLSMessageCap: a request message over listeners.grpc.max_message_bytes
// (default 128 KiB) fails with RESOURCE_EXHAUSTED; one of 100 KiB reaches
// the service, which refuses its over-long descriptor itself.
func TestRLSMessageCap(t *testing.T) {
	limits := filepath.Join(t.TempDir(), "limits.yaml")
	if err := os.WriteFile(limits, []byte("domain: edge\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: 100}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := start(t, fmt.Sprintf(rlsConfig, limits))
	rls := rlsClient(t, f.srv.Addr(FaceEnvoyRLS))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tc := range []struct {
		size int
		want codes.Code
	}{{100 << 10, codes.InvalidArgument}, {200 << 10, codes.ResourceExhausted}} {
		_, err := rls.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*commonv3.RateLimitDescriptor{
			{Entries: []*commonv3.RateLimitDescriptor_Entry{{Key: "k", Value: strings.Repeat("v", tc.size)}}}}})
		if got := status.Code(err); got != tc.want {
			t.Errorf("a %d KiB request: %v (%v), want %v", tc.size>>10, got, err, tc.want)
		}
	}
}
