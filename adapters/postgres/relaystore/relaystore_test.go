package relaystore_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/adapters/postgres/relaystore"
)

func ptr[T any](v T) *T { return &v }

// Settings are checked against their bounds before any statement; nil fields are left to the
// statement (a default, or the stored value).
func TestSettingsUpdateArgsCheckTheBounds(t *testing.T) {
	t.Parallel()
	args, err := relaystore.SettingsUpdate{Ordered: ptr(true), RatePerSecond: ptr(2.5), DisableAfter: ptr(time.Hour)}.Args()
	require.NoError(t, err)
	assert.Equal(t, []any{true, 2.5, nil, nil, time.Hour.Milliseconds()}, args)
	for name, u := range map[string]relaystore.SettingsUpdate{
		"rate":          {RatePerSecond: ptr(relaystore.MaxRate + 1.0)},
		"concurrency":   {Concurrency: ptr(-1)},
		"breaker":       {BreakerFailures: ptr(relaystore.MaxBreakerFailures + 1)},
		"disable-after": {DisableAfter: ptr(time.Millisecond)},
	} {
		_, err := u.Args()
		assert.ErrorIs(t, err, relaystore.ErrInvalid, name)
	}
}

// An endpoint round-trips with its settings' defaults; disabling reports whether it was disabled
// before; enabling a relay-disabled endpoint ends its paused deliveries dead unless sendMissed, and
// gives the others back to be sent.
func TestEndpointsRoundTripAndEnableResumesOrSkips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewDatabase(t)
	s := relaystore.New(pool)
	e, err := s.InsertEndpoint(ctx, relaystore.NewEndpoint{URL: "https://example.test/hook", Description: "desc"}, "whsec_x")
	require.NoError(t, err)
	got, err := s.Endpoint(ctx, e.ID)
	require.NoError(t, err)
	assert.Equal(t, e, got)
	assert.Equal(t, 5, got.BreakerFailures)
	assert.Equal(t, 5*24*time.Hour, got.DisableAfter)
	_, err = s.Endpoint(ctx, e.ID+1)
	assert.ErrorIs(t, err, relaystore.ErrNotFound)

	var was []bool
	for range 2 {
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			d, w, err := relaystore.Disable(ctx, tx, e.ID, "test")
			assert.True(t, d.Disabled)
			was = append(was, w)
			return err
		}))
	}
	assert.Equal(t, []bool{false, true}, was)

	_, err = pool.Exec(ctx, `UPDATE relay_endpoints SET auto_disabled = true WHERE id = $1`, e.ID)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO relay_deliveries (endpoint_id, event_id, booking, stream, stream_version, event_type, recorded_at, state)
VALUES ($1, gen_random_uuid(), 'b', 'booking-b', 1, 'booking.scheduled.v1', now(), 'paused'),
       ($1, gen_random_uuid(), 'b', 'booking-b', 2, 'booking.scheduled.v1', now(), 'paused')`, e.ID)
	require.NoError(t, err)
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		en, ids, err := relaystore.Enable(ctx, tx, e.ID, false, "skipped")
		assert.False(t, en.Disabled)
		assert.Empty(t, ids, "without sendMissed the paused ones end")
		return err
	}))
	dead, err := s.Deliveries(ctx, relaystore.DeliveryQuery{EndpointID: e.ID, State: relaystore.StateDead})
	require.NoError(t, err)
	require.Len(t, dead, 2)
	assert.Equal(t, "skipped", dead[0].LastError)
}

// A delivery that an admission holds behind an earlier version while a sustained disable is being
// committed escapes the disable's pause: the admission waits on the earlier version the disable
// paused, then holds the later one, which the disable's statement had already passed. Held, it has no
// job that would find the endpoint disabled. PauseDisabled, run after the disable committed, pauses it.
func TestPauseDisabledCatchesAHoldThatRacedTheDisable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewDatabase(t)
	s := relaystore.New(pool)
	e, err := s.InsertEndpoint(ctx, relaystore.NewEndpoint{URL: "https://example.test/hook"}, "whsec_x")
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE relay_endpoints SET ordered = true WHERE id = $1`, e.ID)
	require.NoError(t, err)
	insert := func(version int) int64 {
		var id int64
		require.NoError(t, pool.QueryRow(ctx, `INSERT INTO relay_deliveries (endpoint_id, event_id, booking, stream, stream_version, event_type, recorded_at, state)
VALUES ($1, gen_random_uuid(), 'b', 'booking-b', $2, 'booking.updated.v1', now(), 'pending') RETURNING id`, e.ID, version).Scan(&id))
		return id
	}
	v1, v2 := insert(1), insert(2)
	held := func(id int64) (state, why string) {
		require.NoError(t, pool.QueryRow(ctx, `SELECT state, coalesce(held, '') FROM relay_deliveries WHERE id = $1`, id).Scan(&state, &why))
		return state, why
	}

	disable, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer disable.Rollback(ctx) //nolint:errcheck // a no-op after the commit
	paused, err := relaystore.DisableSustained(ctx, disable, e.ID, "test")
	require.NoError(t, err)
	assert.Equal(t, []int64{v1, v2}, paused)
	// The fan-out read the endpoint as enabled: version 3 comes pending, and its job admits it.
	v3 := insert(3)
	admitted := make(chan []int64, 1)
	go func() {
		var blocked []int64
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var err error
			blocked, err = relaystore.HoldOrdered(ctx, tx, []int64{v3})
			return err
		})
		assert.NoError(t, err)
		admitted <- blocked
	}()
	// The admission waits for the disable's lock on version 2 before the disable commits.
	require.Eventually(t, func() bool {
		var waiting bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock')`).Scan(&waiting))
		return waiting
	}, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, disable.Commit(ctx))
	assert.Equal(t, []int64{v3}, slices.Compact(<-admitted)) // once per earlier version it waits for
	state, why := held(v3)
	require.Equal(t, [2]string{relaystore.StatePending, relaystore.HeldOrder}, [2]string{state, why}, "the gap PauseDisabled closes")

	got, err := s.PauseDisabled(ctx, e.ID)
	require.NoError(t, err)
	assert.Equal(t, []int64{v3}, got)
	state, why = held(v3)
	assert.Equal(t, [2]string{relaystore.StatePaused, ""}, [2]string{state, why})

	// An enabled endpoint's pending deliveries stay.
	other, err := s.InsertEndpoint(ctx, relaystore.NewEndpoint{URL: "https://example.test/other"}, "whsec_y")
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO relay_deliveries (endpoint_id, event_id, booking, stream, stream_version, event_type, recorded_at, state)
VALUES ($1, gen_random_uuid(), 'b', 'booking-b', 1, 'booking.updated.v1', now(), 'pending')`, other.ID)
	require.NoError(t, err)
	got, err = s.PauseDisabled(ctx, other.ID)
	require.NoError(t, err)
	assert.Empty(t, got)
}
