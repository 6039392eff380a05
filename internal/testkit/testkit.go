// Package testkit holds what Floodgate's tests share across packages: the
// addresses of the test services, an HTTP request with its answer read,
// a memory store, a buffer several goroutines may write to, and a context
// caught between its deadline and its timer.
package testkit

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

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

// Late is a context at the moment its deadline has passed and its timer
// has not yet fired: Deadline is a millisecond ago, Err still nil.
type Late struct{ context.Context }

// Deadline implements context.Context.
func (Late) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }
