package header

import (
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"testing"
)

func TestProblemWrite(t *testing.T) {
	rec := httptest.NewRecorder()
	rec.Header().Set("Content-Length", "999") // e.g. an upstream's, which must not survive
	QuotaExceeded("rate limit of 5 requests per 1m exceeded", 7, "login").Write(rec)
	if rec.Code != 429 {
		t.Errorf("status %d, want 429", rec.Code)
	}
	h := rec.Header()
	if h.Get("Content-Type") != ProblemContentType || h.Get("Cache-Control") != "no-store" || h.Get("Content-Length") != strconv.Itoa(rec.Body.Len()) {
		t.Errorf("headers %v for a body of %d bytes", h, rec.Body.Len())
	}
	var got Problem
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || got.Status != 429 || got.RetryAfter != 7 ||
		len(got.ViolatedPolicies) != 1 || got.ViolatedPolicies[0] != "login" || got.Type != ProblemQuotaExceeded {
		t.Errorf("body %s: %+v, %v", rec.Body, got, err)
	}
}
