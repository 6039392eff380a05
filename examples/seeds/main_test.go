package main

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/floodgate/floodgate/internal/testkit"
)

func TestSeedSetup(t *testing.T) {
	store := testkit.Memory(t)
	h, err := newHandler(store)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	status := func(method, path, key string) int {
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		if key != "" {
			req.Header.Set("X-API-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for i := range 5 {
		if s := status("POST", "/login", ""); s != 200 {
			t.Fatalf("login %d: %d", i+1, s)
		}
	}
	if s := status("POST", "/login", ""); s != 429 {
		t.Fatalf("6th login: %d, want 429", s)
	}
	if s := status("GET", "/api/items", "wrong"); s != 401 {
		t.Fatalf("bad key: %d, want 401", s)
	}
	for i := range 5 {
		if s := status("GET", "/api/items", "demo-key-1"); s != 200 {
			t.Fatalf("api %d: %d", i+1, s)
		}
	}
	if s := status("GET", "/api/items", "demo-key-1"); s != 429 {
		t.Fatalf("6th within a second: %d, want 429 from the burst policy", s)
	}
	if s := status("GET", "/api/items", "demo-key-2"); s != 200 {
		t.Fatalf("another key: %d", s)
	}
	for range 10 {
		if s := status("GET", "/healthz", ""); s != 200 {
			t.Fatalf("healthz: %d", s)
		}
	}
}
