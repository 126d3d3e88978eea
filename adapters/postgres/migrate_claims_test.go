package postgres_test

import (
	"os"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/postgres"
	"bookingledger/adapters/postgres/pgtest"
)

// TestClaimsMigrationUpgradesALastReleaseDatabase: a database migrated by the last release (every
// migration before 0185), with claims in it, upgrades to the claims' new indexes; the claims stay,
// bl_overlapping_claims finds short and long ones, and the guard still refuses two holders of
// different meetings on one resource and admits a group meeting's invitees.
func TestClaimsMigrationUpgradesALastReleaseDatabase(t *testing.T) {
	t.Parallel()
	pool := pgtest.Open(t, pgtest.NewEmptyDatabaseURL(t))
	ctx := testCtx(t)
	older := fstest.MapFS{}
	for _, name := range migrationFiles(t) {
		if name < "0185" {
			data, err := os.ReadFile("migrations/" + name + ".sql")
			require.NoError(t, err)
			older["migrations/"+name+".sql"] = &fstest.MapFile{Data: data}
		}
	}
	require.NoError(t, postgres.MigrateFS(ctx, pool, older))
	_, err := pool.Exec(ctx, `INSERT INTO calendar_resources (resource) VALUES ('host-1'), ('host-2');
INSERT INTO calendar_slots (booking, resource_id, resource, meeting, during, priority_at, holder) VALUES
    ('x', 1, 'host-1', 'https://api.calendly.com/scheduled_events/AAAA', '[2027-03-01 10:00Z, 2027-03-01 11:00Z)', '2027-01-01Z', true),
    ('y', 1, 'host-1', 'https://api.calendly.com/scheduled_events/AAAB', '[2027-03-01 10:30Z, 2027-03-01 11:30Z)', '2027-01-02Z', false),
    ('retreat', 2, 'host-2', 'retreat', '[2027-03-01Z, 2027-03-11Z)', '2027-01-01Z', true),
    ('late', 2, 'host-2', 'late-call', '[2027-03-10 10:00Z, 2027-03-10 10:30Z)', '2027-01-02Z', false)`)
	require.NoError(t, err)

	require.NoError(t, postgres.Migrate(ctx, pool))
	assert.Equal(t, 4, count(t, pool, `SELECT count(*) FROM calendar_slots`))
	overlapping := func(resource int, during string) []string {
		rows, err := pool.Query(ctx, `SELECT b FROM bl_overlapping_claims($1, $2::tstzrange) b ORDER BY b`, resource, during)
		require.NoError(t, err)
		var out []string
		for rows.Next() {
			var b string
			require.NoError(t, rows.Scan(&b))
			out = append(out, b)
		}
		require.NoError(t, rows.Err())
		return out
	}
	assert.Equal(t, []string{"x", "y"}, overlapping(1, "[2027-03-01 10:40Z, 2027-03-01 10:50Z)"))
	assert.Equal(t, []string{"y"}, overlapping(1, "[2027-03-01 11:00Z, 2027-03-01 12:00Z)"), "ranges are half-open")
	assert.Equal(t, []string{"late", "retreat"}, overlapping(2, "[2027-03-10Z, 2027-03-11Z)"), "a ten-day claim, nine days back")
	assert.Empty(t, overlapping(2, "[2027-03-11Z, 2027-03-12Z)"))

	_, err = pool.Exec(ctx, `UPDATE calendar_slots SET holder = true WHERE booking IN ('y', 'late')`)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	assert.Equal(t, "23P01", pgErr.Code)
	assert.Regexp(t, `^calendar_slots_no_double_booking_[0-7]$`, pgErr.ConstraintName)
	_, err = pool.Exec(ctx, `INSERT INTO calendar_slots (booking, resource_id, resource, meeting, during, priority_at, holder)
VALUES ('x-second-invitee', 1, 'host-1', 'https://api.calendly.com/scheduled_events/AAAA', '[2027-03-01 10:00Z, 2027-03-01 11:00Z)', '2027-01-03Z', true)`)
	assert.NoError(t, err, "invitees of one meeting share its slot")
}
