package detect

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// WebhookConfig says where and how alerts are POSTed.
type WebhookConfig struct {
	// URL receives each Alert as a JSON body (Content-Type
	// application/json); http or https. Required.
	URL string
	// Headers are added to each request, e.g. an Authorization token.
	Headers map[string]string
	// Timeout bounds one attempt; default 5s.
	Timeout time.Duration
	// Attempts is the most tries per alert; default 4 (1 + 3 retries).
	Attempts int
	// Backoff is the wait before the first retry, doubled after each (with
	// up to 20% jitter) and capped at 30s; default 500ms.
	Backoff time.Duration
	// Queue is how many alerts may wait to be sent; default 100. An alert
	// arriving while the queue is full is dropped and counted, so alerting
	// never slows requests down.
	Queue int
	// Client sends the requests; default a client without its own timeout
	// (each attempt has Timeout).
	Client *http.Client
}

// webhook delivers alerts from one goroutine, off the request path.
type webhook struct {
	cfg      WebhookConfig
	logger   *slog.Logger
	queue    chan Alert
	done     chan struct{} // closed when the sender has returned
	abort    context.Context
	cancel   context.CancelFunc
	once     sync.Once
	mu       sync.RWMutex
	closed   bool
	outcomes *prometheus.CounterVec
}

func newWebhook(cfg WebhookConfig, logger *slog.Logger) (*webhook, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("detect: webhook URL %q: want an absolute http or https URL", cfg.URL)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = 4
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = 500 * time.Millisecond
	}
	if cfg.Queue <= 0 {
		cfg.Queue = 100
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &webhook{
		cfg: cfg, logger: logger,
		queue: make(chan Alert, cfg.Queue), done: make(chan struct{}),
		abort: ctx, cancel: cancel,
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "floodgate_abuse_webhook_total",
			Help: "Abuse alert webhook deliveries by outcome: sent, failed (after every attempt) or dropped (queue full or closing).",
		}, []string{"outcome"}),
	}
	go w.run()
	return w, nil
}

// send queues a without waiting.
func (w *webhook) send(a Alert) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		w.outcomes.WithLabelValues("dropped").Inc()
		return
	}
	select {
	case w.queue <- a:
	default:
		w.outcomes.WithLabelValues("dropped").Inc()
		w.logger.Warn("abuse webhook queue full; alert dropped", slog.String("rule", a.Rule), slog.String("key", a.Key))
	}
}

func (w *webhook) run() {
	defer close(w.done)
	for a := range w.queue {
		if err := w.deliver(a); err != nil {
			w.outcomes.WithLabelValues("failed").Inc()
			w.logger.Error("abuse webhook failed", slog.String("rule", a.Rule), slog.String("key", a.Key), slog.Any("error", err))
			continue
		}
		w.outcomes.WithLabelValues("sent").Inc()
	}
}

// deliver POSTs a, retrying network errors, 5xx and 429 with backoff.
// Other 4xx answers are final: the receiver refuses the payload, and
// sending it again would not change that.
func (w *webhook) deliver(a Alert) error {
	body, err := json.Marshal(a)
	if err != nil {
		return err
	}
	wait := w.cfg.Backoff
	for attempt := 1; ; attempt++ {
		retry, err := w.attempt(body)
		if err == nil {
			return nil
		}
		if !retry || attempt >= w.cfg.Attempts {
			return fmt.Errorf("attempt %d of %d: %w", attempt, w.cfg.Attempts, err)
		}
		d := wait + time.Duration(rand.Int64N(int64(wait)/5+1))
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-w.abort.Done():
			t.Stop()
			return fmt.Errorf("attempt %d of %d: %w (gave up while closing)", attempt, w.cfg.Attempts, err)
		}
		wait = min(2*wait, 30*time.Second)
	}
}

func (w *webhook) attempt(body []byte) (retry bool, err error) {
	ctx, cancel := context.WithTimeout(w.abort, w.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "floodgate-abuse-webhook")
	for k, v := range w.cfg.Headers {
		req.Header.Set(k, v)
	}
	resp, err := w.cfg.Client.Do(req)
	if err != nil {
		return true, err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
	resp.Body.Close()
	switch {
	case resp.StatusCode < 300:
		return false, nil
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return true, fmt.Errorf("status %d", resp.StatusCode)
	default:
		return false, fmt.Errorf("status %d", resp.StatusCode)
	}
}

// close stops accepting alerts, lets the queue drain until ctx ends, then
// abandons what is left.
func (w *webhook) close(ctx context.Context) error {
	w.once.Do(func() {
		w.mu.Lock()
		w.closed = true
		close(w.queue)
		w.mu.Unlock()
	})
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		w.cancel()
		<-w.done
		return fmt.Errorf("detect: webhook: %w; alerts not yet delivered were dropped", ctx.Err())
	}
}
