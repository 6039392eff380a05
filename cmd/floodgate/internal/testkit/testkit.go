// Package testkit holds what the daemon's tests share across its packages:
// the addresses of the test services, an HTTP request with its answer
// read, a memory store, and a buffer several goroutines may write to. The
// daemon's module imports no internal package of the library's (a
// released daemon builds against a released library), so its tests keep
// these few helpers of their own.
package testkit

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/floodgate/floodgate/memorystore"
)

// Env returns the value of the environment variable naming a test service
// (scripts/services-up.sh exports them). A missing variable fails the test,
// never skips it, so a missing service cannot pass for a passing test; only
// -short skips.
func Env(t testing.TB, name string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: needs the test services")
	}
	v := os.Getenv(name)
	if v == "" {
		t.Fatalf("%s is not set: start the test services with scripts/services-up.sh and `. /tmp/floodgate-test/env`, or run `make test`", name)
	}
	return v
}

// client follows no redirects, so tests see the status a server sent.
var client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// Do sends a request with body and the header pairs hdr (name, value, ...)
// and returns the response with its body read and closed.
func Do(t testing.TB, method, url, body string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// Buffer collects output, such as a process's or a logger's, safely across
// goroutines.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Memory returns a memory store made with opts and closed when t ends; an
// option the store refuses fails t.
func Memory(t testing.TB, opts ...memorystore.Option) *memorystore.Store {
	t.Helper()
	s, err := memorystore.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
