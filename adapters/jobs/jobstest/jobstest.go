// Package jobstest is what the tests of packages running River's jobs share: the template that puts
// River's tables into their test databases.
package jobstest

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"bookingledger/adapters/jobs"
	"bookingledger/adapters/postgres/pgtest"
)

// Template puts River's tables into the template of the test databases (pgtest.Extra): migrating
// River in every database is DDL costing the server about 0.1 s of CPU per database, copying the files
// it made nearly nothing. One definition for every package: the template is named "river" on the
// shared test cluster, so two definitions would have to agree on what it holds. A test that must have
// River's newest migrations runs jobs.Migrate again (a no-op when the template had them).
var Template = pgtest.Extra{Name: "river", Migrate: func(ctx context.Context, pool *pgxpool.Pool) error {
	_, err := jobs.Migrate(ctx, pool, nil)
	return err
}}
