package postgres_test

import (
	"math"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/domain/eventlog"
)

// TestLogRangeHoldsWhatReadAllReturns: a range (and its count) holds exactly the events ReadAll returns
// after the same position — not those of a transaction that is still open, nor those at or before the
// position — its relation reads them with their bytes, the next range takes what became readable
// since, and a range read again later holds the same events.
func TestLogRangeHoldsWhatReadAllReturns(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := testCtx(t)
	read := func(from, to eventlog.Position) []eventlog.RecordedEvent {
		rows, err := pool.Query(ctx, `SELECT * FROM (`+s.LogRelation(from, to)+`) r ORDER BY stream_id, version`)
		require.NoError(t, err)
		got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (eventlog.RecordedEvent, error) {
			var e eventlog.RecordedEvent
			var v int64
			err := r.Scan(&e.StreamID, &v, (*[16]byte)(&e.ID), &e.Type, &e.Data, &e.Metadata)
			e.Version = uint64(v)
			return e, err
		})
		require.NoError(t, err)
		return got
	}
	rowsOf := func(events []eventlog.RecordedEvent) []eventlog.RecordedEvent { // what the relation has of each
		var rows []eventlog.RecordedEvent
		for _, e := range events {
			rows = append(rows, eventlog.RecordedEvent{StreamID: e.StreamID, Version: e.Version, ID: e.ID, Type: e.Type, Data: e.Data, Metadata: e.Metadata})
		}
		return rows
	}

	before, err := s.Append(ctx, streamName(t), eventlog.NoStream(), events(t, 2))
	require.NoError(t, err)
	readAllEventually(t, s, eventlog.Position{}, 2)
	_, err = s.Append(ctx, streamName(t), eventlog.NoStream(), events(t, 3))
	require.NoError(t, err)
	readable := readAllEventually(t, s, before.Position, 3)
	open, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = open.Rollback(ctx) }()
	_, err = open.Exec(ctx, `SELECT pg_current_xact_id()`) // older than the append below
	require.NoError(t, err)
	_, err = s.Append(ctx, streamName(t), eventlog.NoStream(), events(t, 2)) // committed, not readable yet
	require.NoError(t, err)

	n, last, err := s.LogRange(ctx, before.Position)
	require.NoError(t, err)
	assert.EqualValues(t, 3, n, "the readable events only: not the committed one past an open older transaction")
	assert.Equal(t, readable[2].Position, last)
	assert.ElementsMatch(t, rowsOf(readable), read(before.Position, last))
	counted, err := s.EventsAfter(ctx, before.Position, math.MaxInt64)
	require.NoError(t, err)
	assert.EqualValues(t, 3, counted, "EventsAfter counts what ReadAll returns")
	n, again, err := s.LogRange(ctx, last)
	require.NoError(t, err)
	assert.Zero(t, n, "nothing more is readable while the older transaction is open")
	assert.Equal(t, last, again)

	require.NoError(t, open.Rollback(ctx))
	want := readAllEventually(t, s, last, 2)
	first := last
	n, last, err = s.LogRange(ctx, last)
	require.NoError(t, err)
	assert.EqualValues(t, 2, n)
	assert.Equal(t, want[len(want)-1].Position, last)
	assert.ElementsMatch(t, rowsOf(want), read(first, last))
	assert.ElementsMatch(t, rowsOf(readable), read(before.Position, first), "a range read again holds the same events")

	_, err = s.Append(ctx, streamName(t), eventlog.NoStream(), events(t, 1))
	require.NoError(t, err)
	more := readAllEventually(t, s, last, 1)
	n, last2, err := s.LogRange(ctx, last)
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)
	assert.Equal(t, more[0].Position, last2)
	assert.ElementsMatch(t, rowsOf(append(append(readable, want...), more...)), read(before.Position, last2),
		"consecutive ranges make one")

	n, last3, err := s.LogRange(ctx, last2)
	require.NoError(t, err)
	assert.Zero(t, n)
	assert.Equal(t, last2, last3)
}
