package client

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Probe sends one GET to url through c, never retried, and writes to w
// what the response said about rate limits and what the client would do
// next: the request line and status, the dialect, Retry-After, the
// problem type, one table row per policy (name, unit, pk, q, w, r, t, the
// pace it permits in units per second, and why an item is ignored), the
// malformed fields ignored, and the next step (wait, probe, or the pace
// the next requests get). It backs `floodgate probe URL`.
//
// c may be nil (a client with default options). When c.Transport is not a
// *Transport, Probe wraps it in one with default options for this call.
// The response body is read (at most 1 MiB) and closed. Probe returns an
// error only when no response arrived (bad URL, transport error, open
// breaker, ctx done) or writing to w failed; any HTTP status is a result.
func Probe(ctx context.Context, c *http.Client, url string, w io.Writer) error {
	if c == nil {
		c = &http.Client{}
	}
	tr, ok := c.Transport.(*Transport)
	if !ok {
		tr = newTransport(c.Transport, defaults())
		cc := *c
		cc.Transport = tr
		c = &cc
	}
	req, err := http.NewRequestWithContext(context.WithValue(ctx, noRetryKey{}, true), http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("client: probe: %w", err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("client: probe: %w", err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()

	st, _ := tr.State(originOf(resp.Request))
	return writeProbe(w, tr, resp, st)
}

func writeProbe(w io.Writer, tr *Transport, resp *http.Response, st OriginState) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s -> %s\n", resp.Request.Method, resp.Request.URL, resp.Status)
	s := st.Last
	if s == nil {
		s = &Signal{Status: resp.StatusCode}
	}
	ra, prob := "-", "-"
	if s.HasRetryAfter {
		ra = s.RetryAfter.String() + " (" + s.RetryDelay.Round(time.Second).String() + ")"
	}
	if s.Problem != nil {
		prob = s.Problem.Type
		if len(s.Problem.ViolatedPolicies) > 0 {
			prob += " violated=" + strings.Join(s.Problem.ViolatedPolicies, ",")
		}
	}
	fmt.Fprintf(&b, "dialect: %s  cached: %v  retry-after: %s  problem: %s\n\n", s.Dialect, s.Cached, ra, prob)

	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "POLICY\tUNIT\tPK\tQ\tW\tR\tT\tPACE/S\tNOTE")
	if len(s.Items) == 0 {
		fmt.Fprintln(tw, "(none)\t\t\t\t\t\t\t\t")
	}
	for _, it := range s.Items {
		pk, q, wnd, r, t, pace := "-", "-", "-", "-", "-", "-"
		if it.PartitionKey != nil {
			pk = base64.StdEncoding.EncodeToString(it.PartitionKey)
		}
		if it.HasPolicy {
			q = strconv.FormatInt(it.Quota, 10)
			if it.Window > 0 {
				wnd = strconv.FormatInt(it.Window, 10)
			}
		}
		if it.HasRemaining {
			r = strconv.FormatInt(it.Remaining, 10)
		}
		if it.HasWindow {
			t = strconv.FormatInt(it.EffectiveWindow, 10)
		}
		if p, ok := it.Pace(tr.cfg.maxWindow); ok {
			pace = strconv.FormatFloat(p, 'f', 3, 64)
		}
		note := it.Outlier
		if note != "" {
			note = "ignored: " + note
		} else if !it.KnownUnit {
			note = "unknown unit: not paced"
		} else if it.HasRemaining && it.Remaining == 0 {
			note = "exhausted"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", strconv.Quote(it.Policy), it.Unit, pk, q, wnd, r, t, pace, note)
	}
	tw.Flush()
	for _, e := range s.Ignored {
		fmt.Fprintf(&b, "ignored field: %v\n", e)
	}
	fmt.Fprintf(&b, "\nnext: %s\n", nextStep(tr, st))
	_, err := io.WriteString(w, b.String())
	return err
}

// nextStep says in one line what the transport would do with the next
// request to the origin.
func nextStep(tr *Transport, st OriginState) string {
	now := tr.cfg.now()
	local := fmt.Sprintf("local caps %g req/s, %d in flight", tr.cfg.rps, tr.cfg.concurrency)
	switch {
	case st.BlockedUntil.After(now):
		return fmt.Sprintf("wait %s (%s), then send one probe and ramp up from factor %.2f; %s",
			st.BlockedUntil.Sub(now).Round(time.Millisecond), st.Cause, st.Factor, local)
	case st.NeedProbe:
		return fmt.Sprintf("send one probe, then ramp up from factor %.2f; %s", st.Factor, local)
	}
	return fmt.Sprintf("send at most one request every %s (%.3f req/s, factor %.2f); %s",
		st.Interval.Round(time.Millisecond), 1/st.Interval.Seconds(), st.Factor, local)
}
