package server

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/floodgate/floodgate/cmd/floodgate/config"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/tier"
	"github.com/floodgate/floodgate/tierhttp"
)

// pgTiers is the PostgreSQL key source: one pool and one cache for the
// life of the process, so that a reload neither reconnects nor forgets the
// keys it has already looked up.
type pgTiers struct {
	url   string
	cache config.TierCache
	pool  *pgxpool.Pool
	src   *tier.Cache
	stop  context.CancelFunc
	done  chan struct{}
}

// migrateTimeout bounds one attempt of tier.Migrate.
const migrateTimeout = 10 * time.Second

// migrateRetry is the pause between attempts while the database is down
// at start.
var migrateRetry = 5 * time.Second

// openTiers connects the PostgreSQL key source when cfg needs one and none
// is open yet. Like a Redis store, a database that is down at start is
// not fatal: the migrations are retried in the background, and until they
// succeed lookups fail, so unknown keys get the rule's failure mode.
// Callers hold s.mu, or are New.
func (s *Server) openTiers(cfg *config.Config) error {
	if s.pg != nil || cfg.Tiers == nil || cfg.Tiers.Source != "postgres" || !cfg.UsesTiers() {
		return nil
	}
	pcfg, err := pgxpool.ParseConfig(cfg.Database.URL)
	if err != nil {
		return fmt.Errorf("server: database.url: not a PostgreSQL connection string")
	}
	if pcfg.ConnConfig.ConnectTimeout == 0 {
		pcfg.ConnConfig.ConnectTimeout = 5 * time.Second
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), pcfg) // connects lazily
	if err != nil {
		return fmt.Errorf("server: database: %w", err)
	}
	opts := cacheOptions(cfg.Tiers.Cache)
	opts.Logger = s.logger
	pg := &pgTiers{url: cfg.Database.URL, cache: cfg.Tiers.Cache, pool: pool, src: tier.NewCache(tier.NewPostgres(pool), opts), done: make(chan struct{})}
	ctx, stop := context.WithCancel(context.Background())
	pg.stop = stop
	if err := migrateOnce(ctx, pool); err != nil {
		s.logger.Error("tier: cannot create or update the key tables; retrying in the background, unknown keys follow the failure mode meanwhile",
			"error", err, "retry_every", migrateRetry)
		go s.migrateLater(ctx, pg)
	} else {
		close(pg.done)
	}
	s.pg = pg
	s.closeFns = append(s.closeFns, func() error {
		pg.stop()
		<-pg.done
		pool.Close()
		return nil
	})
	return nil
}

func migrateOnce(ctx context.Context, pool *pgxpool.Pool) error {
	ctx, cancel := context.WithTimeout(ctx, migrateTimeout)
	defer cancel()
	return tier.Migrate(ctx, pool)
}

func (s *Server) migrateLater(ctx context.Context, pg *pgTiers) {
	defer close(pg.done)
	t := time.NewTicker(migrateRetry)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := migrateOnce(ctx, pg.pool); err == nil {
			s.logger.Info("tier: key tables ready")
			return
		} else if ctx.Err() == nil {
			s.logger.Warn("tier: migration still failing", "error", err)
		}
	}
}

// tierSource returns the key source rules of cfg use: the process's
// PostgreSQL cache, or a Static built from cfg (so a reload changes its
// keys and plans). nil when no rule has a tiers section.
func (s *Server) tierSource(cfg *config.Config) (tier.Source, error) {
	if cfg.Tiers == nil || !cfg.UsesTiers() {
		return nil, nil
	}
	switch cfg.Tiers.Source {
	case "static":
		src, err := tier.NewStatic(staticPlans(cfg), staticKeys(cfg))
		if err != nil {
			return nil, fmt.Errorf("server: tiers: %w", err)
		}
		return src, nil
	case "postgres":
		if err := s.openTiers(cfg); err != nil {
			return nil, err
		}
		return s.pg.src, nil
	}
	return nil, fmt.Errorf("server: tiers: unknown source %q", cfg.Tiers.Source)
}

// cacheOptions are the tier cache's settings; zero values take its
// defaults.
func cacheOptions(c config.TierCache) tier.CacheOptions {
	return tier.CacheOptions{
		TTL: c.TTL.D(), NegativeTTL: c.NegativeTTL.D(), MaxEntries: c.MaxEntries,
		MaxStale: c.MaxStale.D(), QueryTimeout: c.QueryTimeout.D(), RetryInterval: c.RetryInterval.D(),
	}
}

// staticPlans are the tiers of a static source with their compiled limits.
func staticPlans(cfg *config.Config) map[string]tier.Limits {
	plans := cfg.TierPlans()
	out := make(map[string]tier.Limits, len(plans))
	for name, l := range plans {
		out[name] = tier.Limits(l)
	}
	return out
}

// staticKeys are the API keys of a static source.
func staticKeys(cfg *config.Config) []tier.StaticKey {
	out := make([]tier.StaticKey, 0, len(cfg.Tiers.Keys))
	for _, k := range cfg.Tiers.Keys {
		out = append(out, tier.StaticKey{Hash: tier.Hash(k.Hash()), Tenant: k.Tenant, Tier: k.Tier, Disabled: k.Disabled})
	}
	return out
}

// tierPlan returns rule i's httplimit.Rule.Plan over src.
func tierPlan(cfg *config.Config, i int, src tier.Source) func(*http.Request) (engine.Plan, error) {
	rt := cfg.Rules[i].Tiers
	opts := tierhttp.PlanOptions{Header: rt.Header, Partition: tierhttp.ByTenant}
	if rt.Partition == "key" {
		opts.Partition = tierhttp.ByKey
	}
	if rt.PerRoute {
		opts.Route = cfg.Rules[i].Match
	}
	return tierhttp.Plan(src, opts)
}

// tiersRestart lists the tier settings a reload cannot change: the
// database and its cache are opened once.
func (s *Server) tiersRestart(cfg *config.Config) []string {
	pg := s.pg
	if pg == nil || cfg.Tiers == nil || cfg.Tiers.Source != "postgres" {
		return nil
	}
	var out []string
	if cfg.Database.URL != pg.url {
		out = append(out, "database.url")
	}
	if cfg.Tiers.Cache != pg.cache {
		out = append(out, "tiers.cache")
	}
	return out
}
