package main

import (
	"net/http/httptest"
	"testing"

	"github.com/floodgate/floodgate/internal/testkit"
)

func TestWritesBurstThree(t *testing.T) {
	store := testkit.Memory(t)
	r, err := newRouter(store)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []int{201, 201, 201, 429} {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequest("POST", "/articles", nil))
		if rec.Code != want {
			t.Fatalf("write %d: %d, want %d", i+1, rec.Code, want)
		}
	}
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, httptest.NewRequest("GET", "/articles", nil))
	if rec.Code != 200 || rec.Header().Get("RateLimit") == "" {
		t.Fatalf("read: %d %q", rec.Code, rec.Header().Get("RateLimit"))
	}
}
