package admin

import (
	"embed"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/floodgate/floodgate/header"
	"github.com/floodgate/floodgate/httplimit"
	"github.com/floodgate/floodgate/ops/detect"
	"github.com/floodgate/floodgate/ops/reduce"
	"github.com/floodgate/floodgate/ops/stats"
	"github.com/floodgate/floodgate/ops/top"
	"github.com/floodgate/floodgate/secret"
)

//go:embed dashboard
var dashboardFiles embed.FS

// Config configures NewAdmin. Every part is optional; the routes of a
// missing part answer 404.
type Config struct {
	Detector   *detect.Detector
	Offenders  *top.Offenders
	Stats      *stats.Stats
	Reductions *reduce.Reductions
	// Policies are the configured policy names; a reduction naming any
	// other (except "*") is refused with 400. Empty accepts any name.
	Policies []string
	// KnownPolicies, if set, is asked instead of Policies on each request,
	// for a daemon whose configuration can be reloaded.
	KnownPolicies func() []string
	// Token, when set, must come as "Authorization: Bearer <token>" on the
	// routes that change something (POST and DELETE /v1/admin/reduce).
	// The read-only routes and the dashboard are open: the admin listener
	// is meant to be private (127.0.0.1 by default).
	Token string
	// Authorize, if set, replaces the Token check: it reports whether r may
	// change something, having written the refusal itself when not.
	Authorize func(w http.ResponseWriter, r *http.Request) bool
	// TopN is how many offenders per rule the dashboard shows; default 10.
	TopN int
	// Logger gets a record per change made; default slog.Default().
	Logger *slog.Logger
}

// Admin is the http.Handler of the admin routes:
//
//	POST   /v1/admin/reduce      start a temporary capacity reduction
//	DELETE /v1/admin/reduce      end reductions early (?policy=... repeated; none: all)
//	GET    /v1/admin/reductions  reductions in force
//	GET    /v1/admin/top         most limited keys (?rule=...&n=...)
//	GET    /v1/admin/alerts      recent abuse alerts and blocks in force
//	GET    /dashboard/           the live dashboard (files embedded in the binary)
//	GET    /dashboard/data.json  what the dashboard draws
//
// Errors are RFC 9457 problem+json bodies.
type Admin struct {
	cfg Config
	mux *http.ServeMux
}

// ReduceRequest is the body of POST /v1/admin/reduce.
type ReduceRequest struct {
	// Policies to reduce; ["*"] for all. Required.
	Policies []string `json:"policies"`
	// Factor is the share of the quota kept, 0 < factor < 1 (0.5: half).
	Factor float64 `json:"factor"`
	// Duration is how long it holds, as Go writes durations ("10m", "90s").
	Duration string `json:"duration"`
	// Reason is free text shown on the dashboard and logged.
	Reason string `json:"reason,omitempty"`
}

// ReduceResponse is the answer of POST /v1/admin/reduce and GET
// /v1/admin/reductions.
type ReduceResponse struct {
	Reductions []reduce.Reduction `json:"reductions"`
}

// NewAdmin returns the handler.
func NewAdmin(cfg Config) *Admin {
	if cfg.TopN <= 0 {
		cfg.TopN = 10
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	a := &Admin{cfg: cfg, mux: http.NewServeMux()}
	a.mux.HandleFunc("POST /v1/admin/reduce", a.reduce)
	a.mux.HandleFunc("DELETE /v1/admin/reduce", a.endReduce)
	a.mux.HandleFunc("GET /v1/admin/reductions", a.reductions)
	a.mux.HandleFunc("GET /v1/admin/top", a.top)
	a.mux.HandleFunc("GET /v1/admin/alerts", a.alerts)
	a.mux.HandleFunc("GET /dashboard/data.json", a.data)
	sub, _ := fs.Sub(dashboardFiles, "dashboard")
	static := http.StripPrefix("/dashboard/", http.FileServer(http.FS(sub)))
	a.mux.Handle("GET /dashboard/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		// The page loads only its own files; nothing from elsewhere.
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:")
		static.ServeHTTP(w, r)
	}))
	a.mux.Handle("GET /dashboard", http.RedirectHandler("/dashboard/", http.StatusMovedPermanently))
	return a
}

// ServeHTTP implements http.Handler.
func (a *Admin) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.mux.ServeHTTP(w, r) }

// Patterns returns the ServeMux patterns Admin answers, for mounting it on
// a shared mux: mux.Handle(p, admin) for each.
func (a *Admin) Patterns() []string {
	return []string{"/v1/admin/", "/dashboard", "/dashboard/"}
}

func (a *Admin) authorized(w http.ResponseWriter, r *http.Request) bool {
	if a.cfg.Authorize != nil {
		return a.cfg.Authorize(w, r)
	}
	if a.cfg.Token == "" {
		return true
	}
	got, ok := httplimit.BearerToken(r)
	if ok && secret.Equal(got, a.cfg.Token) {
		return true
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="floodgate-admin"`)
	writeProblem(w, http.StatusUnauthorized, "a valid admin token is required")
	return false
}

func (a *Admin) reduce(w http.ResponseWriter, r *http.Request) {
	if a.cfg.Reductions == nil {
		http.NotFound(w, r)
		return
	}
	if !a.authorized(w, r) {
		return
	}
	var req ReduceRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeProblem(w, http.StatusBadRequest, "body: "+err.Error())
		return
	}
	d, err := time.ParseDuration(req.Duration)
	if err != nil {
		writeProblem(w, http.StatusBadRequest, "duration: "+err.Error())
		return
	}
	known := a.cfg.Policies
	if a.cfg.KnownPolicies != nil {
		known = a.cfg.KnownPolicies()
	}
	for _, p := range req.Policies {
		if p != reduce.AllPolicies && len(known) > 0 && !slices.Contains(known, p) {
			writeProblem(w, http.StatusBadRequest, "policies: unknown policy "+strconv.Quote(p)+" (defined: "+strings.Join(known, ", ")+")")
			return
		}
	}
	out, err := a.cfg.Reductions.Set(r.Context(), req.Policies, req.Factor, d, req.Reason)
	switch {
	case errors.Is(err, reduce.ErrBadFactor), errors.Is(err, reduce.ErrBadDuration), errors.Is(err, reduce.ErrNoPolicies):
		writeProblem(w, http.StatusBadRequest, err.Error())
		return
	case err != nil:
		writeProblem(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	a.cfg.Logger.Info("admin: capacity reduction requested", slog.Any("policies", req.Policies),
		slog.Float64("factor", req.Factor), slog.Duration("duration", d), slog.String("remote", r.RemoteAddr))
	writeJSON(w, http.StatusOK, ReduceResponse{Reductions: out})
}

func (a *Admin) endReduce(w http.ResponseWriter, r *http.Request) {
	if a.cfg.Reductions == nil {
		http.NotFound(w, r)
		return
	}
	if !a.authorized(w, r) {
		return
	}
	policies := r.URL.Query()["policy"]
	if len(policies) == 0 {
		for _, x := range a.cfg.Reductions.Active() {
			policies = append(policies, x.Policy)
		}
	}
	if err := a.cfg.Reductions.End(r.Context(), policies); err != nil {
		writeProblem(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, ReduceResponse{Reductions: a.cfg.Reductions.Active()})
}

func (a *Admin) reductions(w http.ResponseWriter, r *http.Request) {
	if a.cfg.Reductions == nil {
		http.NotFound(w, r)
		return
	}
	writeJSON(w, http.StatusOK, ReduceResponse{Reductions: orEmpty(a.cfg.Reductions.Active())})
}

// TopResponse is the answer of GET /v1/admin/top.
type TopResponse struct {
	// Rules maps a rule name to its heaviest limited keys, heaviest first.
	Rules map[string][]top.Entry `json:"rules"`
	// Keys is "fingerprint" or "raw": what Entry.Key holds.
	Keys string `json:"keys"`
}

func (a *Admin) top(w http.ResponseWriter, r *http.Request) {
	if a.cfg.Offenders == nil {
		http.NotFound(w, r)
		return
	}
	n := a.cfg.TopN
	if s := r.URL.Query().Get("n"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 || v > 1000 {
			writeProblem(w, http.StatusBadRequest, "n: want a number from 1 to 1000")
			return
		}
		n = v
	}
	writeJSON(w, http.StatusOK, a.topOf(r.URL.Query()["rule"], n))
}

func (a *Admin) topOf(rules []string, n int) TopResponse {
	out := TopResponse{Rules: map[string][]top.Entry{}, Keys: "fingerprint"}
	if a.cfg.Offenders.RawKeys() {
		out.Keys = "raw"
	}
	if len(rules) == 0 {
		rules = a.cfg.Offenders.Rules()
	}
	for _, rule := range rules {
		out.Rules[rule] = orEmpty(a.cfg.Offenders.Top(rule, n))
	}
	return out
}

// AlertsResponse is the answer of GET /v1/admin/alerts.
type AlertsResponse struct {
	// Alerts are the most recent first.
	Alerts []detect.Alert `json:"alerts"`
	Blocks []detect.Block `json:"blocks"`
}

func (a *Admin) alerts(w http.ResponseWriter, r *http.Request) {
	if a.cfg.Detector == nil {
		http.NotFound(w, r)
		return
	}
	writeJSON(w, http.StatusOK, a.alertsOf())
}

func (a *Admin) alertsOf() AlertsResponse {
	al := a.cfg.Detector.Alerts()
	slices.Reverse(al)
	return AlertsResponse{Alerts: orEmpty(al), Blocks: orEmpty(a.cfg.Detector.Blocks())}
}

// DashboardData is GET /dashboard/data.json. Absent parts are null.
type DashboardData struct {
	Stats      *stats.Snapshot    `json:"stats"`
	Top        *TopResponse       `json:"top"`
	Reductions []reduce.Reduction `json:"reductions"`
	Alerts     *AlertsResponse    `json:"alerts"`
}

func (a *Admin) data(w http.ResponseWriter, r *http.Request) {
	var d DashboardData
	if a.cfg.Stats != nil {
		s := a.cfg.Stats.Snapshot()
		d.Stats = &s
	}
	if a.cfg.Offenders != nil {
		t := a.topOf(nil, a.cfg.TopN)
		d.Top = &t
	}
	if a.cfg.Reductions != nil {
		d.Reductions = orEmpty(a.cfg.Reductions.Active())
	}
	if a.cfg.Detector != nil {
		al := a.alertsOf()
		d.Alerts = &al
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, d)
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		writeProblem(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)+1))
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}

func writeProblem(w http.ResponseWriter, status int, detail string) {
	header.Problem{Title: http.StatusText(status), Status: status, Detail: detail}.Write(w)
}
