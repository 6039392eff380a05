package server

import (
	"strings"
	"testing"

	"github.com/floodgate/floodgate/internal/testkit"
)

// TestAnswerLength: every answer of the decision API states its length,
// short ones (which net/http measures itself) and a batch's longer than
// net/http buffers (which writeJSON measures), so that none goes out
// chunked.
func TestAnswerLength(t *testing.T) {
	f := start(t, baseConfig)
	batch := "[" + strings.TrimSuffix(strings.Repeat(`{"key":"user-1","rule":"api"},`, 20), ",") + "]"
	for _, tc := range []struct{ method, path, body string }{
		{"POST", "/v1/check", `{"key":"user-1","rule":"api"}`},
		{"POST", "/v1/check", batch},
		{"GET", "/v1/limits/user-1", ""},
		{"POST", "/v1/check", `{"key":"user-1","rule":"nope"}`}, // a problem answer
	} {
		resp, body := testkit.Do(t, tc.method, f.url(FaceAPI, tc.path), tc.body)
		if resp.ContentLength != int64(len(body)) || len(resp.TransferEncoding) > 0 {
			t.Errorf("%s %s (%d bytes of body): Content-Length %d, Transfer-Encoding %v", tc.method, tc.path, len(body), resp.ContentLength, resp.TransferEncoding)
		}
	}
	if _, body := testkit.Do(t, "POST", f.url(FaceAPI, "/v1/check"), batch); len(body) <= selfLength {
		t.Errorf("the batch's answer is %d bytes, not above selfLength (%d): it tests nothing of writeJSON's own field", len(body), selfLength)
	}
}
