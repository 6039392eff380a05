package server

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/cmd/floodgate/internal/testkit"
)

// TestRedisLogsThroughSlog: with Redis down, go-redis's own complaints
// (its pool failing to dial) come out of the daemon's JSON logger as WARN
// records, and every line of the log is JSON.
func TestRedisLogsThroughSlog(t *testing.T) {
	var buf testkit.Buffer
	f := start(t, fmt.Sprintf(redisConfig, "fail-open", "127.0.0.1:1", 0),
		WithLogger(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	for range 3 {
		check(t, f, `{"key":"r","rule":"api"}`)
	}
	var fromRedis int
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("a line that is not JSON: %q", line)
		}
		if rec["msg"] == "redis client" && rec["level"] == "WARN" && strings.Contains(fmt.Sprint(rec["detail"]), "127.0.0.1:1") {
			fromRedis++
		}
	}
	if fromRedis == 0 {
		t.Errorf("no go-redis record in the log:\n%s", buf.String())
	}
}
