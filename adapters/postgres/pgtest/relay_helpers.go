package pgtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// NewKeptDatabaseURL is NewDatabaseURLWith for a database that outlives the test that asks for it: a
// package whose tests take turns on a few databases (adapters/relay) creates them once and empties
// them between tests instead of creating and dropping one per test. It returns the database's URL and
// the function that drops it (FORCE: connections still open are closed), which the caller runs once
// no test uses it any more (after m.Run in TestMain). A test binary killed before that leaves the
// database behind in the throwaway test cluster.
func NewKeptDatabaseURL(t testing.TB, extra Extra) (string, func() error) {
	t.Helper()
	base := baseURL(t)
	tmpl := migratedTemplate(t, base, extra)
	name := randomName(t, "bl_test_")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	create := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize() + " TEMPLATE " + pgx.Identifier{tmpl}.Sanitize() + " STRATEGY FILE_COPY"
	if err := adminExec(ctx, base, create); err != nil {
		t.Fatalf("pgtest: create test database: %v", err)
	}
	u, err := withDatabase(base, name)
	if err != nil {
		t.Fatalf("pgtest: %s: %v", EnvURL, err)
	}
	drop := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := adminExec(ctx, base, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("pgtest: drop test database %s: %w", name, err)
		}
		return nil
	}
	return u, drop
}
