package main

import (
	"context"
	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/cmd/floodgate/internal/pgtest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/floodgate/floodgate/tier"
)

// run runs the floodgate binary with env (on top of the environment
// minus FLOODGATE_DATABASE_URL) and returns stdout, stderr and the exit
// status.
func run(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, DatabaseEnv+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

var keyLine = regexp.MustCompile(`^fg_[A-Za-z0-9_-]{43}\n\nid:     ([0-9a-f]{16})\ntenant: acme\ntier:   free\n`)

func TestKeysAndTiersCommands(t *testing.T) {
	dbURL := pgtest.Database(t)
	env := []string{DatabaseEnv + "=" + dbURL}

	// Errors of nested commands are printed, with a non-zero status.
	out, stderr, code := run(t, env, "keys", "add", "--tenant", "acme", "--tier", "free")
	if code != 1 || out != "" || stderr != "floodgate keys add: tier: keys add: no tier \"free\" (create it with `floodgate tiers set`)\n" {
		t.Fatalf("keys add to an unknown tier: status %d, stdout %q, stderr %q", code, out, stderr)
	}

	out, stderr, code = run(t, env, "tiers", "set", "free", "--policy", "name=free-minute,quota=10,window=1m")
	if code != 0 || out != "tier free: name=free-minute,quota=10,window=1m0s,algorithm=sliding-window-counter\n" || stderr != "" {
		t.Fatalf("tiers set: status %d, stdout %q, stderr %q", code, out, stderr)
	}
	out, stderr, code = run(t, env, "keys", "add", "--tenant", "acme", "--tier", "free")
	m := keyLine.FindStringSubmatch(out)
	if code != 0 || m == nil || stderr != "" {
		t.Fatalf("keys add: status %d, stdout %q, stderr %q", code, out, stderr)
	}
	key := strings.SplitN(out, "\n", 2)[0]
	if id := tier.HashKey(key).ID(); id != m[1] {
		t.Errorf("printed id %s, but the key's hash starts %s", m[1], id)
	}

	// The stored row is the key's hash, never the key.
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	src := tier.NewPostgres(conn)
	e, err := src.Lookup(ctx, tier.HashKey(key))
	if err != nil || e.Tenant != "acme" || e.Tier != "free" || len(e.Policies) != 1 || e.Policies[0].Quota != 10 || e.Policies[0].Window != time.Minute {
		t.Fatalf("lookup of the new key: %+v, %v", e, err)
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM api_keys WHERE position($1::bytea IN key_hash) > 0", []byte(key)).Scan(&n); err != nil || n != 0 {
		t.Errorf("rows holding the key itself: %d, %v", n, err)
	}

	// -c: database.url of a configuration, when neither flag nor variable is set.
	cfg := filepath.Join(t.TempDir(), "floodgate.yaml")
	if err := os.WriteFile(cfg, []byte("api: {listen: ':0'}\ndatabase: {url: \"${FG_TEST_DB}\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, code = run(t, []string{"FG_TEST_DB=" + dbURL}, "tiers", "list", "-c", cfg)
	if code != 0 || out != "TIER  KEYS  POLICIES\nfree  1     name=free-minute,quota=10,window=1m0s,algorithm=sliding-window-counter\n" {
		t.Errorf("tiers list -c: status %d, stdout %q, stderr %q", code, out, stderr)
	}
	// Given the key itself, revoke refuses, names the ID and never echoes the key.
	out, stderr, code = run(t, nil, "keys", "revoke", "--database", dbURL, key)
	if code != 1 || out != "" || strings.Contains(stderr, key) || !strings.Contains(stderr, "revoke it by its ID, "+m[1]) {
		t.Errorf("keys revoke KEY: status %d, stdout %q, stderr %q", code, out, stderr)
	}
	out, stderr, code = run(t, nil, "keys", "revoke", "--database", dbURL, m[1])
	if code != 0 || out != "revoked "+m[1]+"; caches refuse it once their entry expires\n" {
		t.Errorf("keys revoke: status %d, stdout %q, stderr %q", code, out, stderr)
	}
	if _, err := src.Lookup(ctx, tier.HashKey(key)); err != tier.ErrDisabledKey {
		t.Errorf("lookup after revoke: %v", err)
	}
}

func TestKeysCommandErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"keys", "list"}, "floodgate keys list: no database: give --database, set $FLOODGATE_DATABASE_URL, or name a configuration with database.url in -c\n"},
		{[]string{"keys", "revoke"}, "floodgate keys revoke: accepts 1 arg(s), received 0\n"},
		{[]string{"keys", "ad"}, "floodgate keys: unknown command \"ad\" (run floodgate keys --help)\n"},
		{[]string{"tiers", "set", "free", "--database", "postgres://x/y", "--policy", "name=m,quota=0,window=1m"},
			"floodgate tiers set: floodgate: invalid policy: policy \"m\": quota must be positive, got 0\n"},
		{[]string{"tiers", "list", "--database", "postgres://u:secret@host:notaport/db"},
			"floodgate tiers list: the database URL is not a PostgreSQL connection string (want postgres://user:password@host:5432/db)\n"},
	} {
		out, stderr, code := run(t, nil, tc.args...)
		if code != 1 || out != "" || stderr != tc.want {
			t.Errorf("%v: status %d, stdout %q, stderr:\n %q\nwant:\n %q", tc.args, code, out, stderr, tc.want)
		}
	}
}

// TestPrintTiersAndKeys: the tables of `floodgate tiers list` and
// `floodgate keys list`.
func TestPrintTiersAndKeys(t *testing.T) {
	var b strings.Builder
	min := floodgate.Policy{Name: "free", Algorithm: floodgate.SlidingWindowCounter, Quota: 10, Window: time.Minute}
	if err := printTiers(&b, []tier.TierInfo{
		{Name: "free", Keys: 1, Limits: tier.Limits{Policies: []floodgate.Policy{min}}},
		{Name: "capped", Limits: tier.Limits{Concurrency: []floodgate.Concurrency{{Name: "inflight", Max: 4}}}},
	}); err != nil {
		t.Fatal(err)
	}
	want := "TIER    KEYS  POLICIES\n" +
		"free    1     name=free,quota=10,window=1m0s,algorithm=sliding-window-counter\n" +
		"capped  0     name=inflight,quota=4,unit=concurrent-requests\n"
	if b.String() != want {
		t.Errorf("tiers:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := printKeys(&b, []tier.Key{{ID: "0123456789abcdef", Tenant: "acme", Tier: "free", Created: at, Revoked: &at}}); err != nil {
		t.Fatal(err)
	}
	want = "ID                TENANT  TIER  STATE                         CREATED\n" +
		"0123456789abcdef  acme    free  revoked 2025-01-02T03:04:05Z  2025-01-02T03:04:05Z\n"
	if b.String() != want {
		t.Errorf("keys:\n%s\nwant:\n%s", b.String(), want)
	}
}
