package client

import (
	"context"
	"encoding/base64"
	"log/slog"
	"net/http"
	"time"
)

// audit writes one Debug record per observed policy item (C8), or one
// record without policy attributes for a refusal or Retry-After that came
// without rate-limit fields; responses carrying no signal at all produce
// none. Absent values (q, w, r, t) are omitted rather than written as 0,
// which would read as a real value. Outliers and malformed fields also get
// a Warn record, since they mean a server (or something in between) sent
// values the client refused to follow.
//
// Attributes: origin, time (RFC 3339, the response's arrival), dialect,
// policy, unit, pk (base64, as sent: it is the server's own partition
// label, not an identity), q, w, r, t (seconds), status, method, path (no
// query, which may hold secrets), attempt, request_id, within_signal
// (whether the request was sent while a fresh signal still left quota),
// probe, cached, retry_after (seconds), problem, outlier.
func (tr *Transport) audit(ctx context.Context, originName string, at time.Time, req *http.Request, attempt int, t *ticket, s *Signal) {
	l := tr.cfg.logger
	for _, err := range s.Ignored {
		tr.stats.ignored.Add(1)
		l.LogAttrs(ctx, slog.LevelWarn, "malformed rate-limit field ignored", slog.String("origin", originName), slog.String("error", err.Error()))
	}
	if len(s.Items) == 0 && !s.HasRetryAfter && s.Problem == nil && s.Status != 429 {
		return
	}
	if !l.Enabled(ctx, slog.LevelDebug) {
		// No audit records wanted: skip building them (this runs on every
		// response), but still count and warn about outliers.
		for _, it := range s.Items {
			if it.Outlier != "" {
				tr.outlier(ctx, originName, it)
			}
		}
		return
	}
	common := []slog.Attr{
		slog.String("origin", originName),
		slog.Time("time", at),
		slog.String("dialect", s.Dialect.String()),
		slog.Int("status", s.Status),
		slog.String("method", req.Method),
		slog.String("path", req.URL.Path),
		slog.Int("attempt", attempt),
		slog.Bool("within_signal", t.within),
		slog.Bool("probe", t.probe),
		slog.Bool("cached", s.Cached),
	}
	if tr.cfg.requestIDs != "" {
		if id := req.Header.Get(tr.cfg.requestIDs); id != "" {
			common = append(common, slog.String("request_id", id))
		}
	}
	if s.HasRetryAfter {
		common = append(common, slog.Int64("retry_after", int64(s.RetryDelay/time.Second)))
	}
	if s.Problem != nil {
		common = append(common, slog.String("problem", s.Problem.Type))
	}
	if len(s.Items) == 0 {
		l.LogAttrs(ctx, slog.LevelDebug, "ratelimit observation", common...)
		return
	}
	for _, it := range s.Items {
		attrs := append(common[:len(common):len(common)],
			slog.String("policy", it.Policy),
			slog.String("unit", it.Unit),
		)
		if it.PartitionKey != nil {
			attrs = append(attrs, slog.String("pk", base64.StdEncoding.EncodeToString(it.PartitionKey)))
		}
		if it.HasPolicy {
			attrs = append(attrs, slog.Int64("q", it.Quota))
			if it.Window > 0 {
				attrs = append(attrs, slog.Int64("w", it.Window))
			}
		}
		if it.HasRemaining {
			attrs = append(attrs, slog.Int64("r", it.Remaining))
		}
		if it.HasWindow {
			attrs = append(attrs, slog.Int64("t", it.EffectiveWindow))
		}
		if it.Outlier != "" {
			attrs = append(attrs, slog.String("outlier", it.Outlier))
		}
		l.LogAttrs(ctx, slog.LevelDebug, "ratelimit observation", attrs...)
		if it.Outlier != "" {
			tr.outlier(ctx, originName, it)
		}
	}
}

// outlier counts an item ignored as an outlier and logs a warning.
func (tr *Transport) outlier(ctx context.Context, originName string, it Item) {
	tr.stats.outliers.Add(1)
	tr.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "ratelimit outlier ignored",
		slog.String("origin", originName), slog.String("policy", it.Policy), slog.String("reason", it.Outlier))
}
