package server

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// uploadConfig: a content-bytes quota of 100 per hour on uploads.
const uploadConfig = `
gateway: {listen: "127.0.0.1:0", upstream: %q}
log: {level: error}
policies:
  bytes: {algorithm: fixed-window, quota: 100, window: 1h, unit: content-bytes}
rules:
  - {name: upload, match: "POST /upload", policies: [bytes]}
`

// TestChunkedUploadOverQuota: a body of unknown length that runs past its
// content-bytes quota while it streams is answered 413, not the 502 of an
// upstream failure.
func TestChunkedUploadOverQuota(t *testing.T) {
	f := start(t, uploadConfig)
	body := io.MultiReader(strings.NewReader(strings.Repeat("x", 60)), strings.NewReader(strings.Repeat("y", 60)))
	req, _ := http.NewRequest("POST", f.url(FaceGateway, "/upload"), io.NopCloser(body)) // no ContentLength: chunked
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), "content-bytes limit") {
		t.Fatalf("120 chunked bytes against 100: %d %s, want 413", resp.StatusCode, b)
	}
}
