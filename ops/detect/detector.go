package detect

import (
	"context"
	"fmt"
	"hash/maphash"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/httplimit"
)

// Defaults of an AbuseRule (REQUIREMENTS O3: the same client IP limited
// 100 times within one minute).
const (
	DefaultAbuseThreshold = 100
	DefaultAbuseWindow    = time.Minute
)

// KeyFunc derives the key abuse is counted by from a rule name and its
// partition key; "" means the event is not counted.
type KeyFunc func(rule, key string) string

// PartitionKey counts by the whole partition key: for a rule keyed by
// client IP, by IP.
func PartitionKey(_, key string) string { return key }

// KeyPart counts by the i-th "|"-separated part of the partition key
// (from 0), e.g. KeyPart(0) for the IP of a rule keyed "{ip}|{route}", so
// one IP hammering many routes is one offender. A key with fewer parts, or
// with "-" (absent) there, is not counted.
func KeyPart(i int) KeyFunc {
	return func(_, key string) string {
		for n := 0; ; n++ {
			part, rest, more := strings.Cut(key, "|")
			if n == i {
				if part == "-" {
					return ""
				}
				return part
			}
			if !more {
				return ""
			}
			key = rest
		}
	}
}

// AbuseRule says when limited requests of one key count as abuse.
type AbuseRule struct {
	// Threshold is how many limited requests within Window fire an alert;
	// default 100.
	Threshold int
	// Window is the sliding span the Threshold is counted over; default 1m.
	Window time.Duration
	// Key derives the counted key; default PartitionKey.
	Key KeyFunc
	// Block, when positive, refuses the key on this rule for that long after
	// an alert (429 abnormal-usage-detected); 0 only alerts.
	Block time.Duration
	// Off disables detection for the rule (useful to exempt one rule from a
	// default).
	Off bool
}

// DetectorConfig configures NewDetector.
type DetectorConfig struct {
	// Default applies to rules absent from Rules. Its zero value means the
	// defaults above: threshold 100, window 1m, no block.
	Default AbuseRule
	// Rules overrides Default per rule name.
	Rules map[string]AbuseRule
	// Webhook, if set, receives each alert as a JSON POST.
	Webhook *WebhookConfig
	// RawKeys puts partition keys into alerts, logs and webhooks as they
	// are; by default only their fingerprints leave the process.
	RawKeys bool
	// MaxKeys bounds the keys tracked at once; default 10,000. Each holds up
	// to Threshold timestamps (8 bytes each). When full, keys that cannot
	// reach their threshold any more go first, then the least active.
	MaxKeys int
	// RecentAlerts is how many alerts Alerts keeps; default 50.
	RecentAlerts int
	// Logger gets one error-level record per alert; default slog.Default().
	Logger *slog.Logger
	// Registerer, if set, gets the detector's counters.
	Registerer prometheus.Registerer
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Alert is one detection of sustained abuse: the payload of the webhook,
// the entries of Alerts and of the dashboard.
type Alert struct {
	// Type is always "floodgate.abuse_detected".
	Type string `json:"type"`
	// Time is when the threshold was reached.
	Time time.Time `json:"time"`
	// Rule is the rule that limited the requests.
	Rule string `json:"rule"`
	// Policy is the policy that denied the last of them.
	Policy string `json:"policy"`
	// Key is the counted key: a fingerprint unless RawKeys.
	Key string `json:"key"`
	// Count is the limited requests seen within Window (= Threshold).
	Count int `json:"count"`
	// Threshold and WindowSeconds are the rule's settings.
	Threshold     int     `json:"threshold"`
	WindowSeconds float64 `json:"window_seconds"`
	// BlockedUntil is when the block ends; absent when not blocking.
	BlockedUntil *time.Time `json:"blocked_until,omitempty"`
}

// Detector raises alerts on sustained abuse (REQUIREMENTS O3). It is an
// engine.Observer counting denied decisions per rule and key, and an
// engine.Blocker refusing keys blocked after an alert. Alerts are
// deduplicated: after one fires for a key, the next can only fire a whole
// Window later. Shadow denials (rules on trial) and reduced-capacity
// refusals (no client's fault) are not counted.
type Detector struct {
	cfg    DetectorConfig
	rules  atomic.Pointer[ruleSet]
	seed   maphash.Seed
	shards [16]detShard

	alertsMu sync.Mutex
	alerts   []Alert // ring, newest last
	hook     *webhook

	alertsTotal  *prometheus.CounterVec
	blockedTotal *prometheus.CounterVec
}

type ruleSet struct {
	def   AbuseRule
	rules map[string]AbuseRule
}

type detShard struct {
	mu     sync.Mutex
	keys   map[ruleKey]*history
	blocks map[ruleKey]time.Time
}

type ruleKey struct{ rule, key string }

// history is a ring of the last Threshold limited times of one key, in
// Unix nanoseconds: exact sliding-window counting in Threshold×8 bytes.
type history struct {
	times  []int64 // ring of the last size denial times
	size   int     // the threshold the ring was built for
	next   int
	quiet  int64 // no alert before this time (deduplication)
	policy string
}

// NewDetector checks cfg and returns a running Detector; Close stops its
// webhook sender. Errors: a negative threshold, window or block; a bad
// webhook URL; or a metrics registration error.
func NewDetector(cfg DetectorConfig) (*Detector, error) {
	if err := checkRules(cfg.Default, cfg.Rules); err != nil {
		return nil, err
	}
	if cfg.MaxKeys <= 0 {
		cfg.MaxKeys = 10_000
	}
	if cfg.RecentAlerts <= 0 {
		cfg.RecentAlerts = 50
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	d := &Detector{
		cfg:  cfg,
		seed: maphash.MakeSeed(),
		alertsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "floodgate_abuse_alerts_total", Help: "Abuse alerts raised: a key limited Threshold times within Window.",
		}, []string{"rule"}),
		blockedTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "floodgate_abuse_blocked_total", Help: "Requests refused because their key was blocked after an abuse alert.",
		}, []string{"rule"}),
	}
	d.rules.Store(&ruleSet{def: cfg.Default, rules: cfg.Rules})
	for i := range d.shards {
		d.shards[i].keys = make(map[ruleKey]*history)
		d.shards[i].blocks = make(map[ruleKey]time.Time)
	}
	if cfg.Webhook != nil {
		h, err := newWebhook(*cfg.Webhook, cfg.Logger)
		if err != nil {
			return nil, err
		}
		d.hook = h
	}
	if cfg.Registerer != nil {
		cs := []prometheus.Collector{d.alertsTotal, d.blockedTotal}
		if d.hook != nil {
			cs = append(cs, d.hook.outcomes)
		}
		for _, c := range cs {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return d, nil
}

func checkRules(def AbuseRule, rules map[string]AbuseRule) error {
	check := func(name string, r AbuseRule) error {
		if r.Threshold < 0 || r.Window < 0 || r.Block < 0 {
			return fmt.Errorf("detect: abuse rule %q: threshold, window and block must not be negative", name)
		}
		return nil
	}
	if err := check("default", def); err != nil {
		return err
	}
	for n, r := range rules {
		if err := check(n, r); err != nil {
			return err
		}
	}
	return nil
}

// SetRules replaces Default and Rules, e.g. on a configuration reload.
// Counts, alerts and blocks already made are kept. It returns the same
// errors as NewDetector for bad rules, changing nothing then.
func (d *Detector) SetRules(def AbuseRule, rules map[string]AbuseRule) error {
	if err := checkRules(def, rules); err != nil {
		return err
	}
	d.rules.Store(&ruleSet{def: def, rules: rules})
	return nil
}

// rule returns the settings in force for rule, with defaults filled in.
func (d *Detector) rule(name string) AbuseRule {
	rs := d.rules.Load()
	r, ok := rs.rules[name]
	if !ok {
		r = rs.def
	}
	if r.Threshold == 0 {
		r.Threshold = DefaultAbuseThreshold
	}
	if r.Window == 0 {
		r.Window = DefaultAbuseWindow
	}
	if r.Key == nil {
		r.Key = PartitionKey
	}
	return r
}

func (d *Detector) shard(k ruleKey) *detShard {
	var h maphash.Hash
	h.SetSeed(d.seed)
	h.WriteString(k.rule)
	h.WriteByte(0)
	h.WriteString(k.key)
	return &d.shards[h.Sum64()%uint64(len(d.shards))]
}

// Observe counts a denied event; at the threshold it raises an alert.
func (d *Detector) Observe(e engine.Event) {
	if e.Verdict != engine.Denied { // refused by a limit: not a shadow's, a reduction's or a block's
		return
	}
	r := d.rule(e.Rule)
	if r.Off {
		return
	}
	k := ruleKey{e.Rule, r.Key(e.Rule, e.Key)}
	if k.key == "" {
		return
	}
	now := d.cfg.Now()
	ns := now.UnixNano()
	s := d.shard(k)
	s.mu.Lock()
	h := s.keys[k]
	if h == nil {
		if len(s.keys) >= max(1, d.cfg.MaxKeys/len(d.shards)) {
			s.evict(ns)
		}
		h = &history{times: make([]int64, 0, min(r.Threshold, 16))}
		s.keys[k] = h
	}
	h.policy = e.Policy
	if h.size != r.Threshold {
		// New, or the threshold changed on a reload: a ring built for
		// another size would be misread, so count afresh.
		h.times, h.next, h.size = h.times[:0], 0, r.Threshold
	}
	if len(h.times) < r.Threshold {
		h.times = append(h.times, ns)
	} else {
		h.times[h.next] = ns
		h.next = (h.next + 1) % r.Threshold
	}
	// Full ring: the oldest of the last Threshold events is the next to be
	// overwritten. All of them inside the window means Threshold within it.
	fire := false
	if len(h.times) == r.Threshold && ns-h.times[h.next%len(h.times)] < int64(r.Window) && ns >= h.quiet {
		fire = true
		h.quiet = ns + int64(r.Window)
	}
	var until time.Time
	if fire && r.Block > 0 {
		until = now.Add(r.Block)
		s.blocks[k] = until
	}
	policy := h.policy
	s.mu.Unlock()
	if fire {
		d.raise(now, e.Rule, policy, k.key, r, until)
	}
}

// evict frees room in a full shard. Called with s.mu held. Windows differ
// per rule, so idleness is judged by a span longer than any sensible
// window: keys idle for 10 minutes and out of their quiet period go first.
// Otherwise the key with the fewest recorded events goes, so a spray of
// one-off keys cannot push out a key that is building up to its threshold.
func (s *detShard) evict(now int64) {
	var victim ruleKey
	fewest, lastAt := -1, int64(0)
	for k, h := range s.keys {
		last := h.times[(h.next+len(h.times)-1)%len(h.times)]
		if now-last > int64(10*time.Minute) && now >= h.quiet {
			delete(s.keys, k)
			continue
		}
		if n := len(h.times); fewest < 0 || n < fewest || n == fewest && last < lastAt {
			victim, fewest, lastAt = k, n, last
		}
	}
	if fewest >= 0 {
		delete(s.keys, victim)
	}
}

func (d *Detector) raise(now time.Time, rule, policy, key string, r AbuseRule, until time.Time) {
	shown := key
	if !d.cfg.RawKeys {
		shown = httplimit.Fingerprint(key)
	}
	a := Alert{
		Type: "floodgate.abuse_detected", Time: now.UTC(), Rule: rule, Policy: policy, Key: shown,
		Count: r.Threshold, Threshold: r.Threshold, WindowSeconds: r.Window.Seconds(),
	}
	if !until.IsZero() {
		u := until.UTC()
		a.BlockedUntil = &u
	}
	d.alertsTotal.WithLabelValues(rule).Inc()
	attrs := []slog.Attr{
		slog.String("rule", rule), slog.String("policy", policy), slog.String("key", shown),
		slog.Int("count", r.Threshold), slog.String("window", r.Window.String()),
	}
	if r.Block > 0 {
		attrs = append(attrs, slog.String("blocked_for", r.Block.String()))
	}
	// WARN, not ERROR: a client's behaviour is not the daemon failing, and
	// a load test from one address would page whoever alerts on errors.
	d.cfg.Logger.LogAttrs(context.Background(), slog.LevelWarn, "abuse detected", attrs...)
	d.alertsMu.Lock()
	if len(d.alerts) >= d.cfg.RecentAlerts {
		d.alerts = append(d.alerts[:0], d.alerts[1:]...)
	}
	d.alerts = append(d.alerts, a)
	d.alertsMu.Unlock()
	if d.hook != nil {
		d.hook.send(a)
	}
}

// Blocked implements engine.Blocker: whether rule's key is blocked after
// an alert, and for how long more.
func (d *Detector) Blocked(rule, key string) (time.Duration, bool) {
	r := d.rule(rule)
	if r.Off || r.Block <= 0 {
		return 0, false
	}
	k := ruleKey{rule, r.Key(rule, key)}
	if k.key == "" {
		return 0, false
	}
	s := d.shard(k)
	s.mu.Lock()
	until, ok := s.blocks[k]
	now := d.cfg.Now()
	if ok && !now.Before(until) {
		delete(s.blocks, k)
		ok = false
	}
	s.mu.Unlock()
	if !ok {
		return 0, false
	}
	d.blockedTotal.WithLabelValues(rule).Inc()
	return until.Sub(now), true
}

// Block is an active block, as Blocks lists it.
type Block struct {
	Rule  string    `json:"rule"`
	Key   string    `json:"key"` // fingerprint unless RawKeys
	Until time.Time `json:"until"`
}

// Blocks returns the blocks in force.
func (d *Detector) Blocks() []Block {
	now := d.cfg.Now()
	var out []Block
	for i := range d.shards {
		s := &d.shards[i]
		s.mu.Lock()
		for k, until := range s.blocks {
			if now.Before(until) {
				key := k.key
				if !d.cfg.RawKeys {
					key = httplimit.Fingerprint(key)
				}
				out = append(out, Block{Rule: k.rule, Key: key, Until: until.UTC()})
			}
		}
		s.mu.Unlock()
	}
	return out
}

// Alerts returns the most recent alerts, oldest first.
func (d *Detector) Alerts() []Alert {
	d.alertsMu.Lock()
	defer d.alertsMu.Unlock()
	out := make([]Alert, len(d.alerts))
	copy(out, d.alerts)
	return out
}

// Close stops the webhook sender, waiting until ctx is done for alerts
// still queued or being retried. It returns ctx's error if it gave up.
func (d *Detector) Close(ctx context.Context) error {
	if d.hook == nil {
		return nil
	}
	return d.hook.close(ctx)
}
