package readmodel_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/eventcodec"
	"bookingledger/adapters/eventlogtest"
	"bookingledger/adapters/postgres/readmodel"
	"bookingledger/projections"
)

// catalogOf describes the read-model tables as the migration made them: every index and constraint by
// name and definition, every column, and the tables' storage options (autovacuum on).
func catalogOf(t *testing.T, e *env) []string {
	t.Helper()
	return queryStrings(t, e, `SELECT format('%s index %s: %s', x.indrelid::regclass, i.relname,
    regexp_replace(pg_get_indexdef(x.indexrelid), ' ON \S+ ', ' ON _ '))
FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
WHERE x.indrelid::regclass::text IN ('calendar_bookings', 'calendar_slots', 'payment_streams', 'payment_stream_refs', 'calendar_booking_refs')
UNION ALL
SELECT format('%s constraint %s: %s', conrelid::regclass, conname, pg_get_constraintdef(oid)) FROM pg_constraint
WHERE conrelid::regclass::text IN ('calendar_bookings', 'calendar_slots', 'payment_streams', 'payment_stream_refs', 'calendar_booking_refs')
UNION ALL
SELECT format('%s column %s %s %s default %s', c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
    pg_get_expr(d.adbin, d.adrelid))
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE c.relname IN ('calendar_bookings', 'calendar_slots', 'payment_streams', 'payment_stream_refs', 'calendar_booking_refs')
  AND a.attnum > 0 AND NOT a.attisdropped
UNION ALL
SELECT format('%s options %s', relname, reloptions) FROM pg_class
WHERE relname IN ('calendar_bookings', 'calendar_slots', 'payment_streams', 'payment_stream_refs', 'calendar_booking_refs')
ORDER BY 1`)
}

func tableOIDs(t *testing.T, e *env) []string {
	t.Helper()
	return queryStrings(t, e, `SELECT format('%s %s', relname, oid) FROM pg_class
WHERE relname IN ('calendar_bookings', 'calendar_slots', 'payment_streams', 'payment_stream_refs', 'calendar_booking_refs') ORDER BY 1`)
}

func stagingTables(t *testing.T, e *env) []string {
	t.Helper()
	return queryStrings(t, e, `SELECT relname FROM pg_class WHERE relname LIKE '%\_rebuild\_%' AND relkind = 'r' ORDER BY 1`)
}

// The rebuild loads staging tables and swaps them in: the result equals the incremental one, the
// tables carry exactly the migration's indexes and constraints under their names, readers only ever
// see the emptied or the complete read model, a write that fails before its commit changes nothing
// readers see, and staging tables a crashed write left behind are dropped by the next one.
func TestRebuildSwapsInStagedTables(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	for _, seed := range []uint64{4, 5} {
		for _, d := range genScenario(seed) {
			e.deliver(t, d)
		}
	}
	e.catchUp(t)
	want := snapshotOf(t, e)
	catalog := catalogOf(t, e)
	oids := tableOIDs(t, e)
	bookings, slots := e.count(t, "calendar_bookings"), e.count(t, "calendar_slots")
	require.Positive(t, slots)

	// Left by a write that crashed after loading, and by one killed while it built the indexes.
	_, err := e.pool.Exec(ctx, `CREATE TABLE calendar_slots_rebuild_00000000000000aa (LIKE calendar_slots INCLUDING ALL);
INSERT INTO calendar_slots_rebuild_00000000000000aa SELECT * FROM calendar_slots;
CREATE TABLE calendar_bookings_rebuild_00000000000000cc (LIKE calendar_bookings INCLUDING ALL EXCLUDING INDEXES);
INSERT INTO calendar_bookings_rebuild_00000000000000cc SELECT * FROM calendar_bookings;
ALTER TABLE calendar_bookings_rebuild_00000000000000cc ADD PRIMARY KEY (booking)`)
	require.NoError(t, err)

	// A write that fails in its final transaction.
	dying := readmodel.New(e.pool, e.store, eventcodec.JSON{}, readmodel.Options{})
	injected := errors.New("injected crash before the swap commits")
	readmodel.SetFailAfterApply(dying, func() error { return injected })
	require.ErrorIs(t, dying.Rebuild(ctx, nil), injected)
	assert.Equal(t, oids, tableOIDs(t, e), "the failed write swapped tables")
	assert.Zero(t, e.count(t, "calendar_bookings"), "emptied by the reset, not filled by the failed write")
	cp, err := dying.Checkpoint(ctx)
	require.NoError(t, err)
	assert.True(t, cp.Rebuilding)
	assert.Zero(t, cp.EventsApplied)
	assert.Empty(t, stagingTables(t, e), "the failed write's staging tables and the leftover are dropped")

	_, err = e.pool.Exec(ctx, `CREATE TABLE calendar_slots_rebuild_00000000000000bb (LIKE calendar_slots INCLUDING ALL)`)
	require.NoError(t, err)

	// Readers poll both tables in one statement while the rebuild runs.
	var (
		stop     atomic.Bool
		wg       sync.WaitGroup
		seen     [][2]int
		readErr  error
		complete = [2]int{bookings, slots}
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			var b, s int
			if err := e.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM calendar_bookings), (SELECT count(*) FROM calendar_slots)`).Scan(&b, &s); err != nil {
				readErr = err
				return
			}
			if len(seen) == 0 || seen[len(seen)-1] != [2]int{b, s} {
				seen = append(seen, [2]int{b, s})
			}
		}
	}()
	rm := readmodel.New(e.pool, e.store, eventcodec.JSON{}, readmodel.Options{})
	require.NoError(t, rm.Rebuild(ctx, nil))
	stop.Store(true)
	wg.Wait()
	require.NoError(t, readErr)
	for _, s := range seen {
		assert.Contains(t, [][2]int{{0, 0}, complete}, s, "a reader saw a half-written read model")
	}
	// The poller's last read may have begun before the swap committed; a read now sees the result.
	assert.Equal(t, complete, [2]int{e.count(t, "calendar_bookings"), e.count(t, "calendar_slots")})

	assert.Equal(t, want, snapshotOf(t, e))
	assert.Equal(t, catalog, catalogOf(t, e), "the swapped tables differ from the migration's")
	assert.NotEqual(t, oids, tableOIDs(t, e), "the rebuild loaded in place instead of swapping")
	assert.Empty(t, stagingTables(t, e))
	cp, err = rm.Checkpoint(ctx)
	require.NoError(t, err)
	assert.False(t, cp.Rebuilding)

	// The swapped tables serve the incremental path and keep the guard.
	for _, d := range genScenario(6) {
		e.deliver(t, d)
	}
	e.catchUp(t)
	require.NotEmpty(t, queryStrings(t, e, `SELECT booking FROM calendar_slots WHERE NOT holder`), "no claim in conflict to test the guard with")
	_, err = e.pool.Exec(ctx, `UPDATE calendar_slots SET holder = true`)
	assert.ErrorContains(t, err, "calendar_slots_no_double_booking")
}

// What a swap would not carry over — a view, a grant, another owner, a storage option — makes the
// rebuild load the tables in place.
func TestRebuildLoadsInPlaceWhenTablesHaveDependents(t *testing.T) {
	t.Parallel()
	role := fmt.Sprintf("rb_owner_%d", time.Now().UnixNano())
	cases := []struct {
		name, setup, check, undo string
		want                     []string
	}{
		{"a view over calendar_slots", `CREATE VIEW holders_view AS SELECT booking FROM calendar_slots WHERE holder`,
			`SELECT count(*)::text FROM holders_view`, ``, nil},
		{"a grant on calendar_bookings", `GRANT SELECT ON calendar_bookings TO PUBLIC`,
			`SELECT has_table_privilege('public', 'calendar_bookings', 'SELECT')::text`, ``, []string{"true"}},
		{"payment_streams owned by another role", `CREATE ROLE ` + role + `; ALTER TABLE payment_streams OWNER TO ` + role,
			`SELECT tableowner FROM pg_tables WHERE tablename = 'payment_streams'`,
			`ALTER TABLE payment_streams OWNER TO current_user; DROP ROLE ` + role, []string{role}},
		{"a storage option on calendar_slots", `ALTER TABLE calendar_slots SET (fillfactor = 80)`,
			`SELECT array_to_string(reloptions, ',') FROM pg_class WHERE relname = 'calendar_slots'`, ``, []string{"fillfactor=80"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // on a database of its own
			e := newEnv(t)
			ctx := context.Background()
			for _, d := range genScenario(8) {
				e.deliver(t, d)
			}
			e.catchUp(t)
			want := snapshotOf(t, e)
			_, err := e.pool.Exec(ctx, c.setup)
			require.NoError(t, err)
			if c.undo != "" {
				t.Cleanup(func() {
					_, err := e.pool.Exec(context.Background(), c.undo)
					assert.NoError(t, err)
				})
			}
			oids := tableOIDs(t, e)
			before := queryStrings(t, e, c.check)
			if c.want != nil {
				require.Equal(t, c.want, before)
			}

			require.NoError(t, e.rm.Rebuild(ctx, nil))
			assert.Equal(t, want, snapshotOf(t, e))
			assert.Equal(t, oids, tableOIDs(t, e), "the tables were swapped")
			assert.Equal(t, before, queryStrings(t, e, c.check))
			assert.Empty(t, stagingTables(t, e))
			cp, err := e.rm.Checkpoint(ctx)
			require.NoError(t, err)
			assert.False(t, cp.Rebuilding)
		})
	}
}

// A first run over an empty log has nothing to copy into a replay: it leaves no staging tables
// behind (a backup would meet them), and what arrives later is applied as usual.
func TestFirstRunOverAnEmptyLogLeavesNoReplay(t *testing.T) {
	t.Parallel()
	e := newEnvOn(t, eventlogtest.StorePostgres) // the copying path: the read model shares the store's database
	require.NotNil(t, e.log())
	_, err := e.rm.Runner(projections.RunnerOptions{}).CatchUp(context.Background())
	require.NoError(t, err)
	assert.Empty(t, stagingTables(t, e))
	e.deliver(t, one("d-intro", introCall))
	e.catchUp(t)
	assert.Equal(t, 1, e.count(t, "calendar_bookings"))
	assert.Empty(t, stagingTables(t, e))
}
