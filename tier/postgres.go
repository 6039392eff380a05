package tier

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/header"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DB is what this package needs of PostgreSQL; *pgxpool.Pool, *pgx.Conn
// and pgx.Tx all provide it.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Begin(ctx context.Context) (pgx.Tx, error)
}

//go:embed migrations/*.sql
var migrations embed.FS

// migrationLock is the pg_advisory_xact_lock key Migrate holds, so that
// replicas starting together apply each migration once.
const migrationLock = 0x666c6f6f64676174 // "floodgat"

// Migrate creates or updates the tables Postgres reads (api_keys, tiers,
// tier_policies) by applying the embedded migrations/*.sql files not yet
// recorded in floodgate_schema_migrations, in name order, in one
// transaction. Running it again is harmless. Errors name the file.
func Migrate(ctx context.Context, db DB) error {
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("tier: migrate: %w", err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(migrationLock)); err != nil {
		return fmt.Errorf("tier: migrate: lock: %w", err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS floodgate_schema_migrations (
		version    text PRIMARY KEY,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("tier: migrate: %w", err)
	}
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return err
	}
	slices.Sort(names)
	for _, name := range names {
		version := strings.TrimSuffix(strings.TrimPrefix(name, "migrations/"), ".sql")
		var done bool
		if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM floodgate_schema_migrations WHERE version = $1)", version).Scan(&done); err != nil {
			return fmt.Errorf("tier: migrate %s: %w", name, err)
		}
		if done {
			continue
		}
		sql, err := migrations.ReadFile(name)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, string(sql)); err != nil {
			return fmt.Errorf("tier: migrate %s: %w", name, err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO floodgate_schema_migrations (version) VALUES ($1)", version); err != nil {
			return fmt.Errorf("tier: migrate %s: %w", name, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("tier: migrate: %w", err)
	}
	return nil
}

// Postgres is a Source reading the tables Migrate creates: one query per
// lookup. Put it behind a Cache.
type Postgres struct {
	db DB
}

// NewPostgres returns a Source over db, typically a *pgxpool.Pool.
func NewPostgres(db DB) *Postgres { return &Postgres{db: db} }

// lookupSQL fetches a key and its tier's policies in one round trip; a
// key whose tier has no policies still yields one row, of NULLs.
const lookupSQL = `SELECT k.tenant_id, k.tier, k.enabled,
	p.name, p.algorithm, p.quota, p.window_ms, p.burst, p.unit
FROM api_keys k LEFT JOIN tier_policies p ON p.tier = k.tier
WHERE k.key_hash = $1
ORDER BY p.position`

// Lookup implements Source. Errors: ErrUnknownKey, ErrDisabledKey,
// ErrInvalidTier for a tier without policies or with a row
// floodgate.ValidatePolicies refuses, and ErrUnavailable wrapping any
// database error (connection, timeout, missing table).
func (s *Postgres) Lookup(ctx context.Context, h Hash) (Entry, error) {
	rows, err := s.db.Query(ctx, lookupSQL, h[:])
	if err != nil {
		return Entry{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	defer rows.Close()
	var (
		e       Entry
		enabled bool
		found   bool
	)
	for rows.Next() {
		var (
			name, alg, unit      *string
			quota, window, burst *int64
		)
		if err := rows.Scan(&e.Tenant, &e.Tier, &enabled, &name, &alg, &quota, &window, &burst, &unit); err != nil {
			return Entry{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		found = true
		if name == nil {
			continue // the LEFT JOIN found no policy
		}
		if *unit == header.UnitConcurrentRequests {
			e.Concurrency = append(e.Concurrency, floodgate.Concurrency{Name: *name, Max: *quota})
			continue
		}
		p, err := policyFromRow(*name, *alg, *quota, *window, *burst, *unit)
		if err != nil {
			return Entry{}, fmt.Errorf("%w %q: %w", ErrInvalidTier, e.Tier, err)
		}
		e.Policies = append(e.Policies, p)
	}
	if err := rows.Err(); err != nil {
		return Entry{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	switch {
	case !found:
		return Entry{}, ErrUnknownKey
	case !enabled:
		return Entry{}, ErrDisabledKey
	}
	if err := checkTier(e.Tier, e.Limits); err != nil {
		return Entry{}, err
	}
	return e, nil
}

func policyFromRow(name, alg string, quota, windowMS, burst int64, unit string) (floodgate.Policy, error) {
	a, err := floodgate.ParseAlgorithm(alg)
	if err != nil {
		return floodgate.Policy{}, err
	}
	u, err := floodgate.ParseUnit(unit)
	if err != nil {
		return floodgate.Policy{}, err
	}
	return floodgate.Policy{Name: name, Algorithm: a, Quota: quota, Window: time.Duration(windowMS) * time.Millisecond, Burst: burst, Unit: u}, nil
}
