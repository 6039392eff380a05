// Package pgtest gives the daemon's tests a PostgreSQL database of their
// own on the server FLOODGATE_TEST_POSTGRES names (scripts/services-up.sh
// exports it).
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/floodgate/floodgate/cmd/floodgate/internal/testkit"
)

// Database creates a database named floodgate_test_<random>, drops it when
// the test ends, and returns its URL. Without FLOODGATE_TEST_POSTGRES the
// test fails (it is skipped only under -short): a missing service must not
// pass for a passing test.
func Database(t testing.TB) string {
	t.Helper()
	admin := testkit.Env(t, "FLOODGATE_TEST_POSTGRES")
	var b [6]byte
	rand.Read(b[:])
	name := "floodgate_test_" + hex.EncodeToString(b[:])
	if err := exec(admin, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create a test database on FLOODGATE_TEST_POSTGRES (start it with scripts/services-up.sh): %v", err)
	}
	t.Cleanup(func() {
		if err := exec(admin, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop %s: %v", name, err)
		}
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// exec runs one statement on a connection of its own.
func exec(dsn, sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}
