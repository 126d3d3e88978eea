package relaystore_test

import (
	"context"
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
