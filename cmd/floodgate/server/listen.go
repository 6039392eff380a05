package server

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/floodgate/floodgate/cmd/floodgate/config"
)

// listen opens one listener as listeners says: at most MaxConnections
// open connections, over TLS when listeners.tls is set. At the cap, an
// HTTP server whose ConnState is the listener's (see shedding) has its
// connection idle longest closed to make room; otherwise new clients wait
// in the kernel's backlog.
func listen(addr string, l config.Listeners, logger *slog.Logger) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	ll := &limitListener{Listener: ln, free: make(chan struct{}, l.MaxConnections), idle: map[net.Conn]idleConn{}}
	if l.TLS == nil {
		return ll, nil
	}
	certs, err := newCertFiles(l.TLS, logger)
	if err != nil {
		ln.Close()
		return nil, err
	}
	return &tlsListener{Listener: tls.NewListener(ll, &tls.Config{MinVersion: tls.VersionTLS12, GetConfigForClient: certs.config}), limit: ll}, nil
}

// shedding returns the http.Server ConnState hook that lets ln close idle
// connections at its cap, or nil when ln is not one of listen's.
func shedding(ln net.Listener) func(net.Conn, http.ConnState) {
	switch l := ln.(type) {
	case *limitListener:
		return l.track
	case *tlsListener:
		return l.limit.track
	}
	return nil
}

// tlsListener is a TLS listener over a limitListener.
type tlsListener struct {
	net.Listener
	limit *limitListener
}

// httpServer builds the http.Server of one listener. The gateway streams
// bodies both ways, so its whole-request bounds are its own
// (gateway.upload_timeout, gateway.write_timeout); every other face reads
// and writes small bodies.
func httpServer(h http.Handler, cfg *config.Config, gateway bool, errorLog *slog.Logger) *http.Server {
	l := cfg.Listeners
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.ReadHeaderTimeout.D(),
		ReadTimeout:       l.ReadTimeout.D(),
		WriteTimeout:      l.WriteTimeout.D(),
		IdleTimeout:       l.IdleTimeout.D(),
		MaxHeaderBytes:    l.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(errorLog.Handler(), slog.LevelWarn),
	}
	if gateway {
		srv.ReadTimeout, srv.WriteTimeout = cfg.Gateway.UploadTimeout.D(), cfg.Gateway.WriteTimeout.D()
	}
	return srv
}

// certFiles serves a certificate and client CAs read from files, read
// again when a file changes (checked at most once a second, on a
// handshake), so a renewed certificate needs no restart. A file that
// fails to load is logged and the last good one kept.
type certFiles struct {
	spec   *config.TLS
	logger *slog.Logger

	mu      sync.Mutex
	checked time.Time
	stamp   string // the files' sizes and modification times
	conf    *tls.Config
}

func newCertFiles(spec *config.TLS, logger *slog.Logger) (*certFiles, error) {
	c := &certFiles{spec: spec, logger: logger}
	conf, err := c.load()
	if err != nil {
		return nil, err
	}
	c.conf, c.stamp, c.checked = conf, c.stat(), time.Now()
	return c, nil
}

func (c *certFiles) config(*tls.ClientHelloInfo) (*tls.Config, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now := time.Now(); now.Sub(c.checked) >= time.Second {
		c.checked = now
		if stamp := c.stat(); stamp != c.stamp {
			conf, err := c.load()
			if err != nil {
				c.logger.Error("TLS files rejected; the previous certificate keeps serving", "error", err)
			} else {
				c.conf, c.stamp = conf, stamp
				c.logger.Info("TLS files reloaded", "cert_file", c.spec.CertFile)
			}
		}
	}
	return c.conf, nil
}

func (c *certFiles) stat() string {
	var b bytes.Buffer
	for _, f := range []string{c.spec.CertFile, c.spec.KeyFile, c.spec.ClientCAFile} {
		if fi, err := os.Stat(f); err == nil {
			fmt.Fprintf(&b, "%d/%d;", fi.Size(), fi.ModTime().UnixNano())
		}
	}
	return b.String()
}

func (c *certFiles) load() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(c.spec.CertFile, c.spec.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("server: tls: %w", err)
	}
	conf := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}}
	if f := c.spec.ClientCAFile; f != "" {
		pem, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("server: tls: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, errors.New("server: tls: no certificate in " + f)
		}
		conf.ClientCAs, conf.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return conf, nil
}

// limitListener serves a connection only while fewer than cap(free) are
// open. Past it, Accept takes the next connection from the kernel,
// closes the connection idle longest (one waiting for its next request,
// or for its first for over a second), then waits for a free place; other
// new clients wait in the kernel's backlog instead of costing a goroutine
// and buffers each. So idle keep-alive connections cannot lock new
// clients out until their idle timeout.
type limitListener struct {
	net.Listener
	free chan struct{} // one element per open connection

	mu   sync.Mutex
	idle map[net.Conn]idleConn
}

// idleConn is a connection without a request in progress.
type idleConn struct {
	since time.Time
	fresh bool // has not sent its first request yet
}

func (l *limitListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	select {
	case l.free <- struct{}{}:
	default:
		l.shed(time.Now())
		l.free <- struct{}{}
	}
	return &limitedConn{Conn: c, release: func() { <-l.free }}, nil
}

type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// track is the http.Server ConnState hook: connections between requests
// (or before their first) may be shed.
func (l *limitListener) track(c net.Conn, st http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch st {
	case http.StateNew, http.StateIdle:
		l.idle[c] = idleConn{since: time.Now(), fresh: st == http.StateNew}
	default:
		delete(l.idle, c)
	}
}

// shed closes the connection idle longest, if any; closing it frees its
// place (limitedConn.Close). A connection that has not sent its first
// request counts only after a second, as net/http's Shutdown does after
// five: its client may be about to send. A scan of at most
// max_connections entries, made only at the cap.
func (l *limitListener) shed(now time.Time) {
	l.mu.Lock()
	var oldest net.Conn
	var since time.Time
	for c, ic := range l.idle {
		if ic.fresh && now.Sub(ic.since) < time.Second {
			continue
		}
		if oldest == nil || ic.since.Before(since) {
			oldest, since = c, ic.since
		}
	}
	delete(l.idle, oldest)
	l.mu.Unlock()
	if oldest != nil {
		oldest.Close()
	}
}
