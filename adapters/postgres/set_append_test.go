package postgres_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/postgres"
	"bookingledger/domain/eventlog"
	"bookingledger/domain/ledger"
)

// TestSetAppendAnswersAsBlAppend: every case of an append answers the same in a group commit through
// the set-based append (ADR 0026) and through bl_append alone — what is stored, the versions answered,
// duplicate or not, the error, the receipt — whether the set-based append wrote it or left it to
// bl_append. Each case is a group of the delivery under test between two that append to new streams.
func TestSetAppendAnswersAsBlAppend(t *testing.T) {
	t.Parallel()
	type outcome struct {
		first, last uint64
		duplicate   bool
		err         error
		outcome     ledger.Outcome
		stored      []uint64 // the stream's versions, in global order
		version     int64    // the stream row's
		receipts    int
		neighbours  []error
	}
	cases := []struct {
		name     string
		before   func(t *testing.T, s *postgres.Store, st string, evs []eventlog.EventData) // what is stored first
		expected eventlog.ExpectedVersion
		err      error
		refused  bool // the set-based statement is refused: an event ID stored already
	}{
		{name: "new stream", expected: eventlog.NoStream()},
		{name: "exact 0 on a new stream", expected: eventlog.Exact(0)},
		{name: "exact at the stream's version", expected: eventlog.Exact(2), before: storeTwo},
		{name: "exact behind the stream", expected: eventlog.Exact(1), before: storeTwo, err: eventlog.ErrVersionConflict},
		{name: "exact ahead of the stream", expected: eventlog.Exact(5), before: storeTwo, err: eventlog.ErrVersionConflict},
		{name: "new stream that exists", expected: eventlog.NoStream(), before: storeTwo, err: eventlog.ErrVersionConflict},
		{name: "exact on a stream that does not exist", expected: eventlog.Exact(3), err: eventlog.ErrVersionConflict},
		{name: "the same events again", expected: eventlog.NoStream(), before: storeThese},
		{name: "an event stored in another stream", expected: eventlog.NoStream(), before: storeElsewhere, err: eventlog.ErrPartialDuplicate, refused: true},
		{name: "some events stored already", expected: eventlog.Exact(3), before: storeFirstOfThese, err: eventlog.ErrPartialDuplicate, refused: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			evs := events(t, 3)
			var got [2]outcome
			for i, set := range []bool{true, false} {
				s, pool := newStore(t)
				if !set {
					postgres.SetAppendOff(s)
				}
				ctx := testCtx(t)
				st := streamName(t)
				if tc.before != nil {
					tc.before(t, s, st, evs)
				}
				fresh := func() ledger.Commit {
					n := streamName(t)
					return commitOf("d-"+n, appendOf(n, eventlog.NoStream(), events(t, 2)...))
				}
				group := []ledger.Commit{fresh(), commitOf("d-case", appendOf(st, tc.expected, evs...)), fresh()}
				results, errs := commitHeldGroup(t, s, group)
				if set && !tc.refused {
					assert.Equal(t, 1, postgres.SetGroups(s), "the group committed through the set-based statement")
				} else {
					assert.Zero(t, postgres.SetGroups(s), "bl_append alone")
				}
				res := results[1]
				o := outcome{err: errs[1], outcome: res.Outcome, neighbours: []error{errs[0], errs[2]}}
				if errs[1] == nil {
					require.Len(t, res.Appends, 1)
					o.first, o.last, o.duplicate = res.Appends[0].FirstVersion, res.Appends[0].LastVersion, res.Appends[0].Duplicate
				}
				stored, err := s.ReadStream(ctx, st)
				require.NoError(t, err)
				var prev eventlog.Position
				for _, e := range stored {
					require.Positive(t, e.Position.Compare(prev), "global order follows versions")
					prev = e.Position
					o.stored = append(o.stored, e.Version)
				}
				_ = pool.QueryRow(ctx, `SELECT version FROM streams WHERE stream_id = $1`, st).Scan(&o.version)
				o.receipts = count(t, pool, `SELECT count(*) FROM receipts WHERE delivery_id = 'd-case'`)
				if errs[1] == nil && !o.duplicate {
					assert.Equal(t, stored[len(stored)-1].Position, res.Appends[0].Position, "the answer is where the last event was stored")
				}
				for _, k := range []int{0, 2} {
					require.NoError(t, errs[k], "the other deliveries of the group")
					n, err := s.ReadStream(ctx, group[k].Appends[0].Stream)
					require.NoError(t, err)
					assert.Len(t, n, 2)
					assert.Equal(t, n[1].Position, results[k].Appends[0].Position)
				}
				got[i] = o
			}
			if tc.err != nil {
				require.ErrorIs(t, got[0].err, tc.err)
			} else {
				require.NoError(t, got[0].err)
			}
			assert.Equal(t, errorClass(got[1].err), errorClass(got[0].err), "the error, set-based and bl_append")
			assert.Equal(t, got[1].first, got[0].first)
			assert.Equal(t, got[1].last, got[0].last)
			assert.Equal(t, got[1].duplicate, got[0].duplicate)
			assert.Equal(t, got[1].outcome, got[0].outcome)
			assert.Equal(t, got[1].stored, got[0].stored)
			assert.Equal(t, got[1].receipts, got[0].receipts)
			assert.Equal(t, got[1].version, got[0].version, "the stream row's version")
			assert.Equal(t, int64(len(got[0].stored)), got[0].version, "the stream row counts its events")
		})
	}
}

func errorClass(err error) error {
	for _, e := range []error{eventlog.ErrVersionConflict, eventlog.ErrPartialDuplicate, eventlog.ErrInvalidAppend} {
		if errors.Is(err, e) {
			return e
		}
	}
	return err
}

func storeTwo(t *testing.T, s *postgres.Store, st string, _ []eventlog.EventData) {
	t.Helper()
	_, err := s.Append(testCtx(t), st, eventlog.NoStream(), events(t, 2))
	require.NoError(t, err)
}

func storeThese(t *testing.T, s *postgres.Store, st string, evs []eventlog.EventData) {
	t.Helper()
	_, err := s.Append(testCtx(t), st, eventlog.NoStream(), evs)
	require.NoError(t, err)
}

func storeFirstOfThese(t *testing.T, s *postgres.Store, st string, evs []eventlog.EventData) {
	t.Helper()
	_, err := s.Append(testCtx(t), st, eventlog.NoStream(), append(events(t, 2), evs[0]))
	require.NoError(t, err)
}

func storeElsewhere(t *testing.T, s *postgres.Store, _ string, evs []eventlog.EventData) {
	t.Helper()
	_, err := s.Append(testCtx(t), streamName(t), eventlog.NoStream(), evs[1:2])
	require.NoError(t, err)
}

// TestSetGroupCommitsWhatItCanAndResendsTheRest: a group whose deliveries the set-based append takes
// commits them in its statement; a delivery whose stream is not where it expects (a conflict, or a
// copy whose events are stored: a duplicate) is committed again through bl_append and answers as
// there; one whose event ID is stored in another stream makes the server refuse the statement, and
// the whole group is committed again through bl_append. Nothing is stored twice, every receipt once.
func TestSetGroupCommitsWhatItCanAndResendsTheRest(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := testCtx(t)
	existing, other, copied := streamName(t), streamName(t), streamName(t)
	for _, st := range []string{existing, other} {
		_, err := s.Append(ctx, st, eventlog.NoStream(), events(t, 2))
		require.NoError(t, err)
	}
	copyEvents := events(t, 2)
	_, err := s.Commit(ctx, commitOf("d-copied", appendOf(copied, eventlog.NoStream(), copyEvents...)))
	require.NoError(t, err)

	fresh := func(n int) ledger.Commit {
		st := streamName(t)
		return commitOf("d-"+st, appendOf(st, eventlog.NoStream(), events(t, n)...))
	}
	group := []ledger.Commit{
		fresh(1),
		commitOf("d-conflict", appendOf(existing, eventlog.Exact(1), event(t, "booking.canceled.v1"))),
		fresh(3),
		commitOf("d-copied", appendOf(copied, eventlog.NoStream(), copyEvents...)),
		commitOf("d-next", appendOf(other, eventlog.Exact(2), event(t, "booking.canceled.v1"))),
	}
	results, errs := commitHeldGroup(t, s, group)
	assert.Equal(t, 1, postgres.SetGroups(s), "the group committed through the set-based statement")
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], eventlog.ErrVersionConflict)
	require.NoError(t, errs[2])
	require.NoError(t, errs[3])
	require.NoError(t, errs[4])
	assert.Equal(t, ledger.OutcomeDuplicate, results[3].Outcome)
	assert.True(t, results[3].Appends[0].Duplicate)
	assert.Equal(t, ledger.OutcomeAccepted, results[4].Outcome)
	assert.Equal(t, uint64(3), results[4].Appends[0].FirstVersion)
	for i, c := range group {
		if errs[i] != nil {
			assert.Zero(t, count(t, pool, `SELECT count(*) FROM receipts WHERE delivery_id = $1`, c.Receipt.DeliveryID), "delivery %d", i)
			continue
		}
		stored, err := s.ReadStream(ctx, c.Appends[0].Stream)
		require.NoError(t, err)
		a := results[i].Appends[0]
		assert.Equal(t, stored[a.LastVersion-1].Position, a.Position, "delivery %d: the answer is where its last event is", i)
		assert.Equal(t, a.LastVersion, stored[len(stored)-1].Version, "delivery %d", i)
	}
	assert.Equal(t, 2, count(t, pool, `SELECT count(*) FROM receipts WHERE delivery_id = 'd-copied'`))
	assert.Equal(t, 2, count(t, pool, `SELECT count(*) FROM events WHERE stream_id = $1`, existing))
	assert.Equal(t, 3, count(t, pool, `SELECT count(*) FROM events WHERE stream_id = $1`, other))
	assert.Equal(t, 2, count(t, pool, `SELECT count(*) FROM events WHERE stream_id = $1`, copied))

	// An event ID stored in another stream: the statement is refused, and bl_append answers.
	stolen := event(t, "booking.scheduled.v1")
	_, err = s.Append(ctx, streamName(t), eventlog.NoStream(), []eventlog.EventData{stolen})
	require.NoError(t, err)
	thief := streamName(t)
	group = []ledger.Commit{fresh(1), commitOf("d-thief", appendOf(thief, eventlog.NoStream(), stolen)), fresh(2)}
	results, errs = commitHeldGroup(t, s, group)
	assert.Equal(t, 1, postgres.SetGroups(s), "refused, the group was committed through bl_append")
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], eventlog.ErrPartialDuplicate)
	require.NoError(t, errs[2])
	assert.Equal(t, ledger.OutcomeAccepted, results[2].Outcome)
	assert.Zero(t, count(t, pool, `SELECT count(*) FROM streams WHERE stream_id = $1`, thief))
	for _, i := range []int{0, 2} {
		assert.Equal(t, 1, count(t, pool, `SELECT count(*) FROM receipts WHERE delivery_id = $1`, group[i].Receipt.DeliveryID))
	}
}

// TestSetAppendDeadlockIsCommittedAgain: a group the set-based append takes, whose transaction
// PostgreSQL aborts as a deadlock's victim, is committed again through bl_append: every delivery
// is stored once and none is lost. Another session holds the second delivery's stream and then asks
// for the first's, which the group holds.
func TestSetAppendDeadlockIsCommittedAgain(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := testCtx(t)
	first, second := "booking-a-"+streamName(t)[len("booking-"):], "booking-b-"+streamName(t)[len("booking-"):]
	for _, st := range []string{first, second} {
		_, err := s.Append(ctx, st, eventlog.NoStream(), []eventlog.EventData{event(t, "booking.scheduled.v1")})
		require.NoError(t, err)
	}
	var (
		results []ledger.CommitResult
		errs    []error
	)
	deadlock(t, pool, `SELECT 1 FROM streams WHERE stream_id = $1 FOR UPDATE`, second, first, func() (wait func()) {
		w := startHeldGroup(t, s, []ledger.Commit{
			commitOf("d-first", appendOf(first, eventlog.Exact(1), event(t, "booking.canceled.v1"))),
			commitOf("d-second", appendOf(second, eventlog.Exact(1), event(t, "booking.canceled.v1"))),
		})
		return func() { results, errs = w() }
	})
	for i, st := range []string{first, second} {
		require.NoError(t, errs[i])
		assert.Equal(t, ledger.OutcomeAccepted, results[i].Outcome)
		assert.Equal(t, 2, count(t, pool, `SELECT count(*) FROM events WHERE stream_id = $1`, st))
	}
	assert.Equal(t, 2, count(t, pool, `SELECT count(*) FROM receipts WHERE delivery_id IN ('d-first', 'd-second')`))
}
