package main

import (
	"net/http/httptest"
	"testing"

	"github.com/floodgate/floodgate/internal/testkit"
)

func TestHundredPerMinute(t *testing.T) {
	store := testkit.Memory(t)
	h, err := newHandler(store)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 101 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/hello", nil))
		if want := map[bool]int{true: 200, false: 429}[i < 100]; rec.Code != want {
			t.Fatalf("request %d: %d, want %d", i+1, rec.Code, want)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
	if rec.Code != 200 {
		t.Fatalf("healthz: %d", rec.Code)
	}
}
