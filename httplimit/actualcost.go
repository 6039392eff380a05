package httplimit

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
)

// costWriter takes the actual cost out of a response: from the header
// named name when the handler writes its header, or from the trailer of
// that name after the handler returns, and removes it either way, so the
// client never sees it.
type costWriter struct {
	http.ResponseWriter
	name   string // canonical header name
	cost   int64
	found  bool
	headed bool
}

func (c *costWriter) WriteHeader(code int) {
	c.head()
	c.ResponseWriter.WriteHeader(code)
}

func (c *costWriter) Write(b []byte) (int, error) {
	c.head()
	return c.ResponseWriter.Write(b)
}

// Flush passes a flush on, the header first.
func (c *costWriter) Flush() {
	c.head()
	http.NewResponseController(c.ResponseWriter).Flush() //nolint:errcheck // as http.Flusher, no error to report
}

// Unwrap lets http.ResponseController reach the writer beneath.
func (c *costWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// head reads and removes the cost header, once, before the header is
// written, and takes the name out of a Trailer announcement so that a
// trailer of that name is never sent.
func (c *costWriter) head() {
	if c.headed {
		return
	}
	c.headed = true
	h := c.Header()
	c.read(h, c.name)
	if ann := h.Values("Trailer"); len(ann) > 0 {
		var kept []string
		for _, v := range ann {
			for _, n := range strings.Split(v, ",") {
				if n = strings.TrimSpace(n); n != "" && http.CanonicalHeaderKey(n) != c.name {
					kept = append(kept, n)
				}
			}
		}
		h.Del("Trailer")
		if len(kept) > 0 {
			h.Set("Trailer", strings.Join(kept, ", "))
		}
	}
}

// trailer reads and removes the cost set as a trailer, after the handler.
func (c *costWriter) trailer() {
	h := c.Header()
	c.read(h, c.name)
	c.read(h, http.TrailerPrefix+c.name)
}

func (c *costWriter) read(h http.Header, name string) {
	v, ok := h[name]
	if !ok {
		return
	}
	delete(h, name)
	// A repeated header is no count: its values joined would read "2",
	// "0" as 20.
	if len(v) != 1 {
		return
	}
	if n, err := strconv.ParseInt(strings.TrimSpace(v[0]), 10, 64); err == nil && n >= 0 {
		c.cost, c.found = n, true
	}
}

// serveCounted runs next with the response's actual cost taken out of
// it (Rule.CostHeader), then settles the request's charge with it.
func (m *Middleware) serveCounted(w http.ResponseWriter, r *http.Request, next http.Handler, ru *rule, out *engine.Outcome, charged int64) {
	cw := &costWriter{ResponseWriter: w, name: ru.costHeader}
	at := time.Now()
	if m.fields.Now != nil {
		at = m.fields.Now()
	}
	next.ServeHTTP(cw, r)
	cw.head()
	cw.trailer()
	if !cw.found {
		return
	}
	// The response is done: the settlement must not die with its context.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
	defer cancel()
	if err := out.Settle(ctx, floodgate.Cost{Requests: charged}, floodgate.Cost{Requests: cw.cost}, at); err != nil {
		m.logger.LogAttrs(ctx, slog.LevelError, "rate limit settlement failed", slog.String("rule", ru.name), slog.Any("error", err))
	}
}
