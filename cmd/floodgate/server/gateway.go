package server

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/floodgate/floodgate/clientip"
	"github.com/floodgate/floodgate/cmd/floodgate/config"
	"github.com/floodgate/floodgate/header"
	"github.com/floodgate/floodgate/httplimit"
)

func (s *Server) serveGateway(w http.ResponseWriter, r *http.Request) {
	st := s.state.Load()
	if st.gateway == nil {
		writeProblem(w, http.StatusNotFound, "Not Found", "the gateway is switched off in the configuration")
		return
	}
	s.observeGateway(st, st.gateway, w, r)
}

// newTransport is shared by every proxy a reload builds, so idle upstream
// connections survive reloads.
func newTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 1024
	t.MaxIdleConnsPerHost = 512
	t.IdleConnTimeout = 90 * time.Second
	return t
}

func (s *Server) newProxy(target *url.URL, g *config.Gateway, res *clientip.Resolver) http.Handler {
	// The header timeout lives in the transport, which is rebuilt only when
	// it changes, so idle upstream connections survive other reloads.
	if s.transport.ResponseHeaderTimeout != g.Timeout.D() {
		old := s.transport
		s.transport = newTransport()
		s.transport.ResponseHeaderTimeout = g.Timeout.D()
		old.CloseIdleConnections()
	}
	return s.proxyFor(target, g, res, s.transport)
}

// proxyFor proxies to target through t.
func (s *Server) proxyFor(target *url.URL, g *config.Gateway, res *clientip.Resolver, t *http.Transport) http.Handler {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			setForwarded(pr, res)
		},
		Transport:     t,
		FlushInterval: g.FlushInterval.D(),
		ErrorHandler:  s.upstreamError,
		ErrorLog:      slog.NewLogLogger(s.logger.Handler(), slog.LevelWarn),
	}
}

// setForwarded writes X-Forwarded-For/-Host/-Proto for the upstream. The
// incoming values are kept only from a trusted proxy; from anyone else they
// are the client's own words, so the chain restarts at the peer. X-Real-IP
// always carries the client address Floodgate keyed on.
func setForwarded(pr *httputil.ProxyRequest, res *clientip.Resolver) {
	in, out := pr.In, pr.Out
	peer, trusted := res.Peer(in)
	ok := peer.IsValid()
	var xff []string
	if trusted {
		for _, v := range in.Header.Values("X-Forwarded-For") {
			for _, part := range strings.Split(v, ",") {
				if part = strings.TrimSpace(part); part != "" {
					xff = append(xff, part)
				}
			}
		}
	}
	if ok {
		xff = append(xff, peer.String())
	}
	if len(xff) > 0 {
		out.Header.Set("X-Forwarded-For", strings.Join(xff, ", "))
	}
	host, proto := in.Host, "http"
	if in.TLS != nil {
		proto = "https"
	}
	if trusted {
		if v := in.Header.Get("X-Forwarded-Host"); v != "" {
			host = v
		}
		if v := in.Header.Get("X-Forwarded-Proto"); v != "" {
			proto = v
		}
		if v := in.Header.Values("Forwarded"); len(v) > 0 {
			out.Header["Forwarded"] = v
		}
	}
	out.Header.Set("X-Forwarded-Host", host)
	out.Header.Set("X-Forwarded-Proto", proto)
	out.Header.Del("X-Real-Ip")
	for name := range out.Header {
		// "X_Forwarded_For" is X-Forwarded-For to CGI, WSGI and PHP,
		// which map both '-' and '_' to '_': dropped whoever sent it.
		if strings.Contains(name, "_") && isAddressHeader(http.CanonicalHeaderKey(strings.ReplaceAll(name, "_", "-"))) {
			out.Header.Del(name)
		}
	}
	if !trusted {
		for _, h := range clientAddressHeaders {
			out.Header.Del(h)
		}
	}
	switch {
	case trusted:
		if a, err := res.ClientIP(in); err == nil {
			out.Header.Set("X-Real-Ip", a.String())
		}
	case ok:
		out.Header.Set("X-Real-Ip", peer.String()) // an untrusted peer is the client
	}
}

// clientAddressHeaders are the fields CDNs and proxies use to name the
// client or the original request, besides the X-Forwarded-* ones and
// X-Real-IP that setForwarded writes itself. From an untrusted peer they
// are the client's own words, which an app behind the gateway could
// believe, so they do not go upstream.
var clientAddressHeaders = []string{
	"Cf-Connecting-Ip", "Cf-Connecting-Ipv6", "True-Client-Ip", "X-Client-Ip", "Fastly-Client-Ip",
	"X-Cluster-Client-Ip", "X-Original-Forwarded-For", "X-Forwarded", "Forwarded-For",
	"X-Forwarded-Port", "X-Forwarded-Server", "X-Forwarded-Prefix", "X-Forwarded-Uri",
	"X-Forwarded-Method", "X-Original-Uri", "X-Original-Method", "X-Original-Host", "X-Envoy-External-Address",
	"Client-Ip", "X-Originating-Ip", "X-Remote-Ip", "X-Remote-Addr", "X-Proxyuser-Ip", "Fly-Client-Ip",
	"X-Appengine-User-Ip", "X-Azure-Clientip", "X-Forwarded-Ssl", "X-Forwarded-Scheme", "X-Host",
	"X-Original-Url", "X-Rewrite-Url",
}

// isAddressHeader reports whether name (canonical) is one the gateway
// writes or drops: the X-Forwarded-* it sets, X-Real-IP, Forwarded, or one
// of clientAddressHeaders.
func isAddressHeader(name string) bool {
	switch name {
	case "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Real-Ip", "Forwarded":
		return true
	}
	return slices.Contains(clientAddressHeaders, name)
}

// upstreamError answers for an upstream that failed: 504 when it did not
// answer in time, 502 otherwise, each as problem+json. The cause is
// logged; the client learns its kind, not internal addresses.
func (s *Server) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	var ne net.Error
	if r.Context().Err() == nil && errors.As(err, &ne) && ne.Timeout() {
		s.m.upstreamErrors.WithLabelValues("timeout").Inc()
		s.logger.Warn("upstream timed out", "path", r.URL.Path, "error", err)
		writeProblem(w, http.StatusGatewayTimeout, "Gateway Timeout", "the upstream did not answer in time")
		return
	}
	if r.Context().Err() != nil {
		return // the client went away; nobody reads an answer
	}
	if errors.Is(err, httplimit.ErrBodyLimited) {
		// A body of unknown length ran past its content-bytes quota (or
		// max_body_bytes) while it streamed: the client's doing, not the
		// upstream's. The upstream saw a body cut short, which it must
		// discard; the units read so far stay spent.
		s.m.upstreamErrors.WithLabelValues("body_limited").Inc()
		writeProblem(w, http.StatusRequestEntityTooLarge, "Content Too Large", "the request body exceeds its content-bytes limit")
		return
	}
	reason := "it failed"
	var op *net.OpError
	switch {
	case errors.As(err, &op) && op.Op == "dial":
		reason = "it refused the connection or cannot be reached"
	case errors.Is(err, context.DeadlineExceeded):
		reason = "it did not answer in time"
	case op != nil:
		reason = "the connection to it broke"
	}
	s.m.upstreamErrors.WithLabelValues("unreachable").Inc()
	s.logger.Warn("upstream failed", "path", r.URL.Path, "error", err)
	writeProblem(w, http.StatusBadGateway, "Bad Gateway", "the upstream server did not answer: "+reason)
}

func writeProblem(w http.ResponseWriter, status int, title, detail string) {
	header.Problem{Title: title, Status: status, Detail: detail}.Write(w)
}

// demoUpstream is the built-in upstream of `upstream: demo`, so the
// quickstart needs nothing else running.
type demoUpstream struct {
	srv *http.Server
	url string
}

func startDemo(logger *slog.Logger) (*demoUpstream, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(struct {
			OK     bool   `json:"ok"`
			Method string `json:"method"`
			Path   string `json:"path"`
			Client string `json:"client"`
		}{true, r.Method, r.URL.Path, r.Header.Get("X-Real-Ip")})
	})
	d := &demoUpstream{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, url: "http://" + ln.Addr().String()}
	go d.srv.Serve(ln)
	logger.Info("demo upstream started", "url", d.url)
	return d, nil
}

func (d *demoUpstream) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	d.srv.Shutdown(ctx)
}
