package server

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/redis/go-redis/v9"
)

// redisLogger routes go-redis's own lines (a pool that cannot dial, a
// cluster or sentinel client changing its view) into the daemon's slog
// logger, as WARN records with the message in "detail", so that a
// log.format: json log holds JSON lines only. go-redis formats the
// messages itself; they name addresses, not credentials.
type redisLogger struct{ l *slog.Logger }

func (r redisLogger) Printf(ctx context.Context, format string, v ...any) {
	r.l.LogAttrs(ctx, slog.LevelWarn, "redis client", slog.String("detail", fmt.Sprintf(format, v...)))
}

// routeRedisLogs makes l go-redis's logger. go-redis has one per process:
// the last Server built wins, which in a daemon is the only one.
func routeRedisLogs(l *slog.Logger) { redis.SetLogger(redisLogger{l}) }
