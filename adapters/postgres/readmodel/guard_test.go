package readmodel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/eventcodec"
	"bookingledger/adapters/postgres/readmodel"
)

// past is a day whose slots ended long before any run: their claims leave the guard.
var past = time.Date(2020, 3, 2, 0, 0, 0, 0, time.UTC)

// guardedOf returns each claim's guarded flag by booking.
func (e *env) guardedOf(t testing.TB) map[string]bool {
	t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT booking, guarded FROM calendar_slots`)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (struct {
		b string
		g bool
	}, error) {
		var v struct {
			b string
			g bool
		}
		return v, r.Scan(&v.b, &v.g)
	})
	require.NoError(t, err)
	m := map[string]bool{}
	for _, v := range out {
		m[v.b] = v.g
	}
	return m
}

// clash inserts, in a transaction it rolls back, a holder of another meeting on host-a's claim of
// booking over whose slot is slot, and returns the database's refusal (nil when the guard let it in).
func (e *env) clash(t testing.TB, over string, start, end time.Time) error {
	t.Helper()
	ctx := context.Background()
	tx, err := e.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `INSERT INTO calendar_slots (booking, resource_id, resource, meeting, during, priority_at, holder)
SELECT 'intruder', resource_id, resource, 'another meeting', tstzrange($2, $3), $2, true FROM calendar_slots WHERE booking = $1`, over, start, end)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23P01" {
		return err
	}
	require.NoError(t, err)
	return nil
}

// A rebuild loads the claims whose slot ended before its horizon unguarded and the rest guarded, and
// rebuilds what the incremental projection built (the flag is the guard's, not the calendar's). An
// unguarded holder is not in the guard; a holder of a slot to come still is, and a clash with it is
// refused by the database.
func TestRebuildLeavesEndedClaimsOutOfTheGuard(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	// One delivery at a time, the first on its own: the live path (a catch-up of an empty read model
	// from the start loads as a rebuild does).
	for _, d := range []delivery{
		one("new", created("calendly-new", at(-3, 0), slot("ev-new", at(9, 0), 60, "host-a"))),
		one("old", created("calendly-old", past.Add(-48*time.Hour), slot("ev-old", past.Add(9*time.Hour), 60, "host-a"))),
		one("old-loser", created("calendly-old-loser", past.Add(-24*time.Hour), slot("ev-old-2", past.Add(9*time.Hour+30*time.Minute), 60, "host-a"))),
	} {
		e.deliver(t, d)
		e.catchUp(t)
	}
	incremental := snapshotOf(t, e)
	require.Equal(t, []string{"calendly-new", "calendly-old"}, e.holders(t))
	assert.Equal(t, map[string]bool{"calendly-old": true, "calendly-old-loser": true, "calendly-new": true}, e.guardedOf(t),
		"the live projection inserts every claim guarded")
	require.Error(t, e.clash(t, "calendly-old", past.Add(9*time.Hour), past.Add(10*time.Hour)), "a guarded past holder is in the guard")

	e.waitReadable(t)
	rm := readmodel.New(e.pool, e.store, eventcodec.JSON{}, readmodel.Options{})
	require.NoError(t, rm.Rebuild(ctx, nil))

	assert.Equal(t, incremental, snapshotOf(t, e), "rebuilt rows differ from incremental ones")
	assert.Equal(t, map[string]bool{"calendly-old": false, "calendly-old-loser": false, "calendly-new": true}, e.guardedOf(t))
	assert.NoError(t, e.clash(t, "calendly-old", past.Add(9*time.Hour), past.Add(10*time.Hour)), "an unguarded holder is out of the guard")
	err := e.clash(t, "calendly-new", at(9, 30), at(10, 30))
	require.Error(t, err, "a clash with a holder of a slot to come is refused by the database")
	assert.Contains(t, err.Error(), "calendar_slots_no_double_booking_")
}

// The sweep unguards only the claims whose slot ended more than GuardMargin ago, and nothing else
// about them changes; a second sweep finds none.
func TestSweepGuardTakesOnlyEndedClaims(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Minute)
	for _, d := range []delivery{ // the live path, as above
		one("new", created("calendly-new", at(-3, 0), slot("ev-new", at(9, 0), 60, "host-a"))),
		one("old", created("calendly-old", past.Add(-48*time.Hour), slot("ev-old", past.Add(9*time.Hour), 60, "host-a"))),
		one("old-loser", created("calendly-old-loser", past.Add(-24*time.Hour), slot("ev-old-2", past.Add(9*time.Hour+30*time.Minute), 60, "host-a"))),
		// Ended an hour ago: within the margin, it stays in the guard.
		one("recent", created("calendly-recent", now.Add(-72*time.Hour), slot("ev-recent", now.Add(-2*time.Hour), 60, "host-b"))),
		// Under way: started before the margin, not ended.
		one("long", created("calendly-long", now.Add(-72*time.Hour), slot("ev-long", now.Add(-48*time.Hour), 72*60, "host-c"))),
	} {
		e.deliver(t, d)
		e.catchUp(t)
	}
	require.Equal(t, map[string]bool{"calendly-old": true, "calendly-old-loser": true, "calendly-recent": true, "calendly-long": true, "calendly-new": true},
		e.guardedOf(t), "the live projection inserts every claim guarded")
	before := snapshotOf(t, e)

	n, err := e.rm.SweepGuard(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 2, n)
	assert.Equal(t, map[string]bool{"calendly-old": false, "calendly-old-loser": false, "calendly-recent": true, "calendly-long": true, "calendly-new": true},
		e.guardedOf(t))
	assert.Equal(t, before, snapshotOf(t, e), "the sweep changed the calendar")
	n, err = e.rm.SweepGuard(ctx)
	require.NoError(t, err)
	assert.Zero(t, n)
}

// A rebuild loads its claims into a staging table that has the guard from the start (the exclusion
// constraints are made on the empty table, not built over the loaded one): once the chunks are
// computed, the loaded table refuses a clash with a holder of a slot to come.
func TestRebuildLoadsClaimsIntoAGuardedTable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	for _, d := range []delivery{
		one("new", created("calendly-new", at(-3, 0), slot("ev-new", at(9, 0), 60, "host-a"))),
		one("old", created("calendly-old", past.Add(-48*time.Hour), slot("ev-old", past.Add(9*time.Hour), 60, "host-a"))),
	} {
		e.deliver(t, d)
	}
	e.catchUp(t)
	e.waitReadable(t)
	guards := queryStrings(t, e, `SELECT count(*)::text FROM pg_constraint WHERE conrelid = 'calendar_slots'::regclass AND contype = 'x'`)
	require.Equal(t, []string{"8"}, guards)

	checked := false
	rm := readmodel.New(e.pool, e.store, eventcodec.JSON{}, readmodel.Options{Phases: func(phase string, _ time.Duration) {
		if phase != "compute" {
			return
		}
		checked = true
		staged := queryStrings(t, e, `SELECT relname FROM pg_class WHERE relname LIKE 'calendar\_slots\_rebuild\_%' AND relkind = 'r'`)
		require.Len(t, staged, 1)
		table := pgx.Identifier{staged[0]}.Sanitize()
		assert.Equal(t, guards, queryStrings(t, e, `SELECT count(*)::text FROM pg_constraint WHERE conrelid = '`+staged[0]+`'::regclass AND contype = 'x'`),
			"the staging table is loaded without the guard")
		assert.Equal(t, []string{"calendly-new true", "calendly-old false"},
			queryStrings(t, e, `SELECT booking || ' ' || guarded FROM `+table+` ORDER BY 1`), "the claims are loaded, the ended one unguarded")
		tx, err := e.pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		_, err = tx.Exec(ctx, `INSERT INTO `+table+` (booking, resource_id, resource, meeting, during, priority_at, holder, guarded)
SELECT 'intruder', resource_id, resource, 'another meeting', tstzrange($1, $2), $1, true, true FROM `+table+` WHERE booking = 'calendly-new'`,
			at(9, 30), at(10, 30))
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr, "the loaded staging table let a clash in")
		assert.Equal(t, "23P01", pgErr.Code)
	}})
	require.NoError(t, rm.Rebuild(ctx, nil))
	assert.True(t, checked, "the rebuild reported no compute phase")
}
