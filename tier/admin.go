package tier

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/header"
)

// AddedKey is a key AddKey has just made.
type AddedKey struct {
	// Secret is the key itself, to hand to its owner. Only its Hash is
	// stored, so nothing can show it again: keep it out of logs.
	Secret string
	Hash   Hash
	Tenant string
	Tier   string
}

// AddKey creates an enabled key for tenant on tier and stores its hash;
// it returns the key and prints nothing. Errors: an empty tenant, an
// unknown tier, or the database's.
func AddKey(ctx context.Context, db DB, tenant, tierName string) (AddedKey, error) {
	if tenant == "" {
		return AddedKey{}, errors.New("tier: keys add: empty tenant")
	}
	key, err := NewKey()
	if err != nil {
		return AddedKey{}, err
	}
	h := HashKey(key)
	_, err = db.Exec(ctx, "INSERT INTO api_keys (key_hash, tenant_id, tier) VALUES ($1, $2, $3)", h[:], tenant, tierName)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23503" { // foreign_key_violation
		return AddedKey{}, fmt.Errorf("tier: keys add: no tier %q (create it with `floodgate tiers set`)", tierName)
	}
	if err != nil {
		return AddedKey{}, fmt.Errorf("tier: keys add: %w", err)
	}
	return AddedKey{Secret: key, Hash: h, Tenant: tenant, Tier: tierName}, nil
}

// RevokeKey disables one key, named by its ID (16 hex digits, as ListKeys
// prints) or its full hash (64 hex digits), and returns its ID. Caches
// keep answering for it until their entry expires (CacheOptions.TTL).
// Given the key itself, it refuses, naming the key's ID to use instead
// (the secret belongs in no command line). Errors: a reference of neither
// form, no such key, or the database's; none repeats the reference unless
// it is an ID or a hash.
func RevokeKey(ctx context.Context, db DB, ref string) (string, error) {
	const revoke = "UPDATE api_keys SET enabled = false, revoked_at = coalesce(revoked_at, now()) WHERE "
	var (
		where string
		arg   any
		id    string
	)
	switch {
	case strings.HasPrefix(ref, KeyPrefix):
		return "", fmt.Errorf("tier: keys revoke: that is a key itself; revoke it by its ID, %s", HashKey(ref).ID())
	case len(ref) == 64:
		h, err := ParseHash(ref)
		if err != nil {
			return "", fmt.Errorf("tier: keys revoke: %w", err)
		}
		where, arg, id = "key_hash = $1", h[:], h.ID()
	case len(ref) == 16 && isHex(ref):
		where, arg, id = "key_id = $1", strings.ToLower(ref), strings.ToLower(ref)
	default:
		return "", fmt.Errorf("tier: keys revoke: want a key ID (16 hex digits) or a key hash (64), got %d characters", len(ref))
	}
	tag, err := db.Exec(ctx, revoke+where, arg)
	if err != nil {
		return "", fmt.Errorf("tier: keys revoke: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return "", fmt.Errorf("tier: keys revoke: no key %s", id)
	}
	return id, nil
}

func isHex(s string) bool {
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// Key is one API key as ListKeys reports it: never the key itself.
type Key struct {
	ID      string // Hash.ID
	Tenant  string
	Tier    string
	Enabled bool
	Created time.Time
	Revoked *time.Time // nil for a key never revoked
}

// ListKeys returns the keys of tenant, or of every tenant when tenant is
// "", newest first.
func ListKeys(ctx context.Context, db DB, tenant string) ([]Key, error) {
	rows, err := db.Query(ctx, `SELECT key_id, tenant_id, tier, enabled, created_at, revoked_at
		FROM api_keys WHERE $1 = '' OR tenant_id = $1 ORDER BY created_at DESC, key_id`, tenant)
	if err != nil {
		return nil, fmt.Errorf("tier: keys list: %w", err)
	}
	defer rows.Close()
	var out []Key
	for rows.Next() {
		var k Key
		if err := rows.Scan(&k.ID, &k.Tenant, &k.Tier, &k.Enabled, &k.Created, &k.Revoked); err != nil {
			return nil, fmt.Errorf("tier: keys list: %w", err)
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("tier: keys list: %w", err)
	}
	return out, nil
}

// TiersSet creates tier name or replaces all of its limits, in one
// transaction; keys on the tier get the new limits as caches refresh.
// Errors: floodgate.ErrInvalidPolicy (wrapped) for invalid limits, or
// the database's.
func TiersSet(ctx context.Context, db DB, name string, limits Limits) error {
	if err := checkTier(name, limits); err != nil {
		return err
	}
	for _, p := range limits.Policies {
		if p.Window%time.Millisecond != 0 {
			return fmt.Errorf("%w: policy %q: window %v is not whole milliseconds, as tier_policies stores it", floodgate.ErrInvalidPolicy, p.Name, p.Window)
		}
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("tier: tiers set: %w", err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `INSERT INTO tiers (name) VALUES ($1)
		ON CONFLICT (name) DO UPDATE SET updated_at = now()`, name); err != nil {
		return fmt.Errorf("tier: tiers set: %w", err)
	}
	if _, err := tx.Exec(ctx, "DELETE FROM tier_policies WHERE tier = $1", name); err != nil {
		return fmt.Errorf("tier: tiers set: %w", err)
	}
	rows := make([]floodgate.Policy, 0, len(limits.Policies)+len(limits.Concurrency))
	rows = append(rows, limits.Policies...)
	for _, c := range limits.Concurrency {
		// tier_policies wants an algorithm and a window on every row; an
		// in-flight cap uses neither, so any valid pair will do.
		rows = append(rows, floodgate.Policy{Name: c.Name, Algorithm: floodgate.FixedWindow, Quota: c.Max, Window: time.Second})
	}
	for i, p := range rows {
		unit := p.Unit.String()
		if i >= len(limits.Policies) {
			unit = header.UnitConcurrentRequests
		}
		if _, err := tx.Exec(ctx, `INSERT INTO tier_policies (tier, position, name, algorithm, quota, window_ms, burst, unit)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
			name, i, p.Name, p.Algorithm.String(), p.Quota, p.Window.Milliseconds(), p.Burst, unit); err != nil {
			return fmt.Errorf("tier: tiers set %q: policy %q: %w", name, p.Name, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("tier: tiers set: %w", err)
	}
	return nil
}

// TierInfo is one tier as ListTiers reports it.
type TierInfo struct {
	Name   string
	Keys   int64 // enabled keys on the tier
	Limits Limits
}

// ListTiers returns every tier with its limits and number of enabled
// keys, by name.
func ListTiers(ctx context.Context, db DB) ([]TierInfo, error) {
	rows, err := db.Query(ctx, `SELECT t.name,
			(SELECT count(*) FROM api_keys k WHERE k.tier = t.name AND k.enabled),
			p.name, p.algorithm, p.quota, p.window_ms, p.burst, p.unit
		FROM tiers t LEFT JOIN tier_policies p ON p.tier = t.name
		ORDER BY t.name, p.position`)
	if err != nil {
		return nil, fmt.Errorf("tier: tiers list: %w", err)
	}
	defer rows.Close()
	var list []TierInfo
	for rows.Next() {
		var (
			name                 string
			keys                 int64
			pname, alg, unit     *string
			quota, window, burst *int64
		)
		if err := rows.Scan(&name, &keys, &pname, &alg, &quota, &window, &burst, &unit); err != nil {
			return nil, fmt.Errorf("tier: tiers list: %w", err)
		}
		if len(list) == 0 || list[len(list)-1].Name != name {
			list = append(list, TierInfo{Name: name, Keys: keys})
		}
		l := &list[len(list)-1].Limits
		switch {
		case pname == nil:
		case *unit == header.UnitConcurrentRequests:
			l.Concurrency = append(l.Concurrency, floodgate.Concurrency{Name: *pname, Max: *quota})
		default:
			p, err := policyFromRow(*pname, *alg, *quota, *window, *burst, *unit)
			if err != nil {
				return nil, fmt.Errorf("tier: tiers list: tier %q: %w", name, err)
			}
			l.Policies = append(l.Policies, p)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("tier: tiers list: %w", err)
	}
	return list, nil
}

// ParseLimit reads a policy or an in-flight cap from comma-separated
// key=value pairs, the form `floodgate tiers set --policy` takes:
//
//	name=minute,quota=10,window=1m[,algorithm=gcra][,burst=20][,unit=requests]
//	name=inflight,quota=4,unit=concurrent-requests
//
// window is a Go duration; algorithm defaults to sliding-window-counter. A
// cap (unit=concurrent-requests) takes only name and quota. The limit is
// appended to l and validated (errors wrap floodgate.ErrInvalidPolicy).
func ParseLimit(spec string, l *Limits) error {
	p := floodgate.Policy{Algorithm: floodgate.SlidingWindowCounter}
	isCap := false
	for field := range strings.SplitSeq(spec, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(field), "=")
		if !ok {
			return fmt.Errorf("%w: %q: want key=value, got %q", floodgate.ErrInvalidPolicy, spec, field)
		}
		var err error
		switch k {
		case "name":
			p.Name = v
		case "quota":
			p.Quota, err = strconv.ParseInt(v, 10, 64)
		case "window":
			p.Window, err = time.ParseDuration(v)
		case "burst":
			p.Burst, err = strconv.ParseInt(v, 10, 64)
		case "algorithm":
			p.Algorithm, err = floodgate.ParseAlgorithm(v)
		case "unit":
			if isCap = v == header.UnitConcurrentRequests; !isCap {
				p.Unit, err = floodgate.ParseUnit(v)
			}
		default:
			err = fmt.Errorf("unknown key %q (want name, quota, window, burst, algorithm or unit)", k)
		}
		if err != nil {
			return fmt.Errorf("%w: %q: %s: %w", floodgate.ErrInvalidPolicy, spec, k, err)
		}
	}
	if isCap {
		c := floodgate.Concurrency{Name: p.Name, Max: p.Quota}
		l.Concurrency = append(l.Concurrency, c)
		return c.Validate()
	}
	l.Policies = append(l.Policies, p)
	return p.Validate()
}

// FormatLimits writes limits as ParseLimit reads them, separated by "; ",
// e.g. "name=minute,quota=10,window=1m0s,algorithm=sliding-window-counter".
func FormatLimits(l Limits) string {
	var b strings.Builder
	for _, p := range l.Policies {
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "name=%s,quota=%d,window=%s,algorithm=%s", p.Name, p.Quota, p.Window, p.Algorithm)
		if p.Burst > 0 {
			fmt.Fprintf(&b, ",burst=%d", p.Burst)
		}
		if p.Unit != floodgate.Requests {
			fmt.Fprintf(&b, ",unit=%s", p.Unit)
		}
	}
	for _, c := range l.Concurrency {
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "name=%s,quota=%d,unit=%s", c.Name, c.Max, header.UnitConcurrentRequests) // no window or algorithm to speak of
	}
	if b.Len() == 0 {
		return "(none)"
	}
	return b.String()
}
