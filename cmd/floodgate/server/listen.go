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
// open connections (more wait in the kernel's backlog), over TLS when
// listeners.tls is set.
func listen(addr string, l config.Listeners, logger *slog.Logger) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	ln = &limitListener{Listener: ln, free: make(chan struct{}, l.MaxConnections)}
	if l.TLS == nil {
		return ln, nil
	}
	certs, err := newCertFiles(l.TLS, logger)
	if err != nil {
		ln.Close()
		return nil, err
	}
	return tls.NewListener(ln, &tls.Config{MinVersion: tls.VersionTLS12, GetConfigForClient: certs.config}), nil
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

// limitListener accepts a connection only while fewer than cap(free) are
// open: past it, Accept waits for one to close, and new clients wait in
// the kernel's backlog instead of costing a goroutine and buffers each.
type limitListener struct {
	net.Listener
	free chan struct{} // one element per open connection
}

func (l *limitListener) Accept() (net.Conn, error) {
	l.free <- struct{}{}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.free
		return nil, err
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
