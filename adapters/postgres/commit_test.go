package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/postgres"
	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/domain/ledger"
)

func appendOf(stream string, expected eventlog.ExpectedVersion, evs ...eventlog.EventData) ledger.Append {
	return ledger.Append{Stream: stream, Expected: expected, Events: evs}
}

// commitOf is an accepted delivery whose receipt names every appended event.
func commitOf(deliveryID string, appends ...ledger.Append) ledger.Commit {
	c := ledger.Commit{Appends: appends, Receipt: ledger.Receipt{
		Provider:   "calendly",
		ReceivedAt: time.Date(2026, 3, 14, 9, 26, 54, 12000, time.UTC),
		DeliveryID: deliveryID,
		Secret:     "0:sha256:1a2b3c4d",
		Outcome:    ledger.OutcomeAccepted,
		Body:       []byte(`{"event":"invitee.created"}`),
	}}
	for _, a := range appends {
		for _, e := range a.Events {
			id := booking.ID(a.Stream[len(booking.StreamPrefix):])
			c.Receipt.Events = append(c.Receipt.Events, ledger.EventRef{Booking: id, Stream: a.Stream, ID: e.ID, Type: booking.EventType(e.Type)})
		}
	}
	return c
}

// TestCommitIsAtomic: the appends and the receipt travel as one pipelined batch outside an explicit
// transaction; PostgreSQL runs such a batch as one implicit transaction. If that ever stopped being
// true (a driver change sending a Sync per statement), the first append would survive here.
func TestCommitIsAtomic(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := testCtx(t)
	busy := streamName(t)
	stored := event(t, "booking.scheduled.v1")
	_, err := s.Append(ctx, busy, eventlog.NoStream(), []eventlog.EventData{stored})
	require.NoError(t, err)

	tests := []struct {
		name   string
		second func() ledger.Append
		edit   func(*ledger.Commit)
		want   error
	}{
		{name: "second append conflicts", second: func() ledger.Append {
			return appendOf(busy, eventlog.Exact(5), event(t, "booking.canceled.v1"))
		}, want: eventlog.ErrVersionConflict},
		{name: "second append partly duplicate", second: func() ledger.Append {
			return appendOf(busy, eventlog.Any(), stored, event(t, "booking.canceled.v1"))
		}, want: eventlog.ErrPartialDuplicate},
		{name: "receipt insert fails", second: func() ledger.Append {
			return appendOf(busy, eventlog.Exact(1), event(t, "booking.canceled.v1"))
		}, edit: func(c *ledger.Commit) { c.Receipt.Outcome = "lost" }}, // violates receipts_outcome_check
	}
	for _, tc := range tests {
		// Alone, on one stream, a delivery commits through bl_append itself (commitAloneOneStreamSQL).
		for _, alone := range []bool{false, true} {
			name := tc.name
			if alone {
				name += " alone"
			}
			t.Run(name, func(t *testing.T) {
				first := streamName(t)
				appends := []ledger.Append{appendOf(first, eventlog.NoStream(), event(t, "booking.scheduled.v1")), tc.second()}
				if alone {
					appends = appends[1:]
				}
				c := commitOf("delivery-"+first, appends...)
				if tc.edit != nil {
					tc.edit(&c)
				}
				_, err := s.Commit(ctx, c)
				require.Error(t, err)
				if tc.want != nil {
					assert.ErrorIs(t, err, tc.want)
				}
				assert.Contains(t, err.Error(), "delivery-"+first)

				got, err := s.ReadStream(ctx, first)
				require.NoError(t, err)
				assert.Empty(t, got, "the first append must be rolled back")
				assert.Zero(t, count(t, pool, `SELECT count(*) FROM streams WHERE stream_id = $1`, first))
				busyEvents, err := s.ReadStream(ctx, busy)
				require.NoError(t, err)
				assert.Len(t, busyEvents, 1)
				assert.Zero(t, count(t, pool, `SELECT count(*) FROM receipts WHERE delivery_id = $1`, "delivery-"+first), "no receipt")
			})
		}
	}
}

// A commit whose appends are malformed (an event without ID or type, an ID twice) is refused as an
// invalid append before anything is sent: no event, stream or receipt of it is stored.
func TestCommitRefusesInvalidAppends(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := testCtx(t)
	twice := event(t, "booking.scheduled.v1")
	for name, bad := range map[string][]eventlog.EventData{
		"no id":     {{Type: "booking.canceled.v1"}},
		"no type":   {{ID: newID(t)}},
		"id twice":  {twice, twice},
		"no events": {},
	} {
		t.Run(name, func(t *testing.T) {
			good, st := streamName(t), streamName(t)
			c := commitOf("d-"+st, appendOf(good, eventlog.NoStream(), event(t, "booking.scheduled.v1")))
			c.Appends = append(c.Appends, appendOf(st, eventlog.Any(), bad...))
			_, err := s.Commit(ctx, c)
			require.ErrorIs(t, err, eventlog.ErrInvalidAppend)
			assert.Zero(t, count(t, pool, `SELECT count(*) FROM streams WHERE stream_id IN ($1, $2)`, good, st))
			assert.Zero(t, count(t, pool, `SELECT count(*) FROM receipts WHERE delivery_id = $1`, "d-"+st))
		})
	}
}

func TestCommitOutcomes(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := testCtx(t)
	stream := streamName(t)
	e1, e2 := event(t, "booking.scheduled.v1"), event(t, "booking.rescheduled.v1")

	res, err := s.Commit(ctx, commitOf("d-1", appendOf(stream, eventlog.NoStream(), e1)))
	require.NoError(t, err)
	assert.Equal(t, ledger.OutcomeAccepted, res.Outcome)
	require.Len(t, res.Appends, 1)
	assert.Equal(t, uint64(1), res.Appends[0].FirstVersion)
	assert.Equal(t, uint64(1), res.Appends[0].LastVersion)
	assert.NotZero(t, res.Appends[0].Position.Commit)
	assert.False(t, res.Appends[0].Duplicate)

	// The same delivery again, planned before the first commit was visible: stored as duplicate.
	res, err = s.Commit(ctx, commitOf("d-1", appendOf(stream, eventlog.NoStream(), e1)))
	require.NoError(t, err)
	assert.Equal(t, ledger.OutcomeDuplicate, res.Outcome)
	assert.True(t, res.Appends[0].Duplicate)

	// Two streams, one of them already written: something new was written, so accepted.
	other := streamName(t)
	res, err = s.Commit(ctx, commitOf("d-2", appendOf(stream, eventlog.Exact(0), e1), appendOf(other, eventlog.NoStream(), e2)))
	require.NoError(t, err)
	assert.Equal(t, ledger.OutcomeAccepted, res.Outcome)
	assert.True(t, res.Appends[0].Duplicate)
	assert.False(t, res.Appends[1].Duplicate)

	// Receipts without appends are stored as given.
	for _, o := range []ledger.Outcome{ledger.OutcomeDuplicate, ledger.OutcomeIgnored, ledger.OutcomeQuarantined, ledger.OutcomeRejected} {
		c := commitOf("d-" + string(o))
		c.Receipt.Outcome, c.Receipt.Reason = o, "because "+string(o)
		res, err := s.Commit(ctx, c)
		require.NoError(t, err)
		assert.Equal(t, o, res.Outcome)
		assert.Empty(t, res.Appends)
	}
	assert.Equal(t, 1, count(t, pool, `SELECT count(*) FROM receipts WHERE delivery_id = 'd-rejected' AND receipt_body(body, body_digest) IS NULL`),
		"an unverified body is never stored")
	assert.Equal(t, 1, count(t, pool, `SELECT count(*) FROM receipts WHERE delivery_id = 'd-ignored' AND receipt_body(body, body_digest) IS NOT NULL`))

	var outcomes []string
	rows, err := pool.Query(ctx, `SELECT outcome FROM receipts WHERE delivery_id IN ('d-1', 'd-2') ORDER BY id`)
	require.NoError(t, err)
	for rows.Next() {
		var o string
		require.NoError(t, rows.Scan(&o))
		outcomes = append(outcomes, o)
	}
	require.NoError(t, rows.Err())
	assert.Equal(t, []string{"accepted", "duplicate", "accepted"}, outcomes)
}

// TestConcurrentCopiesOfOneDelivery: 20 copies of one delivery, all planned against the empty stream
// (as the ledger would when they arrive together), commit at once.
func TestConcurrentCopiesOfOneDelivery(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := testCtx(t)
	stream := streamName(t)
	e := event(t, "booking.scheduled.v1")
	const copies = 20

	var (
		wg       sync.WaitGroup
		start    = make(chan struct{})
		mu       sync.Mutex
		returned = map[ledger.Outcome]int{}
	)
	for range copies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := s.Commit(ctx, commitOf("d-same", appendOf(stream, eventlog.Exact(0), e)))
			if !assert.NoError(t, err) {
				return
			}
			mu.Lock()
			returned[res.Outcome]++
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()

	assert.Equal(t, map[ledger.Outcome]int{ledger.OutcomeAccepted: 1, ledger.OutcomeDuplicate: copies - 1}, returned)
	assert.Equal(t, 1, count(t, pool, `SELECT count(*) FROM events WHERE stream_id = $1`, stream))
	assert.Equal(t, copies, count(t, pool, `SELECT count(*) FROM receipts WHERE delivery_id = 'd-same'`))
	assert.Equal(t, 1, count(t, pool, `SELECT count(*) FROM receipts WHERE delivery_id = 'd-same' AND outcome = 'accepted'`))
	assert.Equal(t, 1, count(t, pool, `SELECT version FROM streams WHERE stream_id = $1`, stream))
}

func TestReceiptsForBooking(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := testCtx(t)
	bk := "bk-" + streamName(t)
	stream := booking.ID(bk).Stream()
	e1, e2 := event(t, "booking.scheduled.v1"), event(t, "booking.canceled.v1")

	c1 := commitOf("d-1", appendOf(stream, eventlog.NoStream(), e1))
	_, err := s.Commit(ctx, c1)
	require.NoError(t, err)
	_, err = s.Commit(ctx, commitOf("d-unrelated", appendOf(streamName(t), eventlog.NoStream(), event(t, "x.v1"))))
	require.NoError(t, err)
	c2 := commitOf("d-2", appendOf(stream, eventlog.Exact(1), e2))
	c2.Receipt.Reason = "canceled by invitee"
	_, err = s.Commit(ctx, c2)
	require.NoError(t, err)
	// The EventStoreDB adapter's path: events elsewhere, the outcome stored as given.
	c3 := commitOf("d-3", appendOf(stream, eventlog.Exact(2), event(t, "booking.no_show_marked.v1")))
	id3, err := s.InsertReceipt(ctx, c3.Receipt)
	require.NoError(t, err)

	got, err := s.ReceiptsForBooking(ctx, bk)
	require.NoError(t, err)
	require.Len(t, got, 3)
	assert.Less(t, got[0].ID, got[1].ID)
	assert.Equal(t, id3, got[2].ID)
	for i, want := range []ledger.Receipt{c1.Receipt, c2.Receipt, c3.Receipt} {
		r := got[i]
		assert.Equal(t, want.Provider, r.Receipt.Provider)
		assert.True(t, want.ReceivedAt.Equal(r.Receipt.ReceivedAt), "received_at %s != %s", r.Receipt.ReceivedAt, want.ReceivedAt)
		r.Receipt.ReceivedAt = want.ReceivedAt
		assert.Equal(t, want, r.Receipt)
		assert.False(t, r.RecordedAt.IsZero())
	}
	assert.Equal(t, ledger.OutcomeAccepted, got[2].Receipt.Outcome, "InsertReceipt keeps accepted without events in its transaction")

	none, err := s.ReceiptsForBooking(ctx, "bk-none")
	require.NoError(t, err)
	assert.Empty(t, none)
}

// TestCountQuarantined counts the quarantined receipts and no others, through the partial index.
func TestCountQuarantined(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := testCtx(t)
	for i, o := range []ledger.Outcome{ledger.OutcomeQuarantined, ledger.OutcomeAccepted, ledger.OutcomeIgnored,
		ledger.OutcomeQuarantined, ledger.OutcomeDuplicate, ledger.OutcomeQuarantined, ledger.OutcomeDeferred, ledger.OutcomeRejected} {
		r := commitOf(fmt.Sprintf("d-%d", i)).Receipt
		r.Outcome = o
		_, err := s.InsertReceipt(ctx, r)
		require.NoError(t, err)
	}
	n, err := s.CountQuarantined(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(3), n)
}

// TestReceiptQueriesUseIndexes guards the indexes auditors and operators rely on.
func TestReceiptQueriesUseIndexes(t *testing.T) {
	t.Parallel()
	_, pool := newFreshStore(t)
	ctx := testCtx(t)
	conn, err := pool.Acquire(ctx) // an empty table: only with seq scans off does a plan show the index
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, `SET enable_seqscan = off`)
	require.NoError(t, err)
	defer func() { _, _ = conn.Exec(context.Background(), `RESET enable_seqscan`) }()
	for _, c := range []struct{ index, query string }{
		{"receipts_bookings_idx", `EXPLAIN SELECT id FROM receipts WHERE bookings @> ARRAY['b1'] ORDER BY id`},
		{"receipts_quarantined_idx", `EXPLAIN ` + postgres.CountQuarantinedSQL},
		// The quarantine's reconciliation items (readmodel): the same rows, in id order.
		{"receipts_quarantined_idx", `EXPLAIN SELECT r.id FROM receipts r WHERE r.outcome = 'quarantined' ORDER BY r.id`},
		{"receipts_delivery_id_idx", `EXPLAIN SELECT id FROM receipts WHERE delivery_id = 'd'`},
		{"events_tx_position_idx", `EXPLAIN SELECT * FROM events WHERE (tx_id, global_position) > ('1'::xid8, 0) ORDER BY tx_id, global_position LIMIT 10`},
	} {
		rows, err := conn.Query(ctx, c.query)
		require.NoError(t, err)
		var plan string
		for rows.Next() {
			var line string
			require.NoError(t, rows.Scan(&line))
			plan += line + "\n"
		}
		require.NoError(t, rows.Err())
		assert.Contains(t, plan, c.index, "plan:\n%s", plan)
	}
	// The operators' list of quarantined receipts (GET /api/receipts?outcome=quarantined), as the
	// connection keeps it after its first executions: a generic plan, for which only an outcome written
	// into the statement can select the partial index. Walking every receipt's id for the few
	// quarantined ones would read the whole table.
	_, err = conn.Exec(ctx, `SET plan_cache_mode = force_generic_plan; PREPARE quarantined_list AS `+postgres.ListReceiptsSQL(ledger.OutcomeQuarantined))
	require.NoError(t, err)
	defer func() { _, _ = conn.Exec(context.Background(), `DEALLOCATE quarantined_list; RESET plan_cache_mode`) }()
	var plan []string
	rows, err := conn.Query(ctx, `EXPLAIN EXECUTE quarantined_list('quarantined', '', 100, 0)`)
	require.NoError(t, err)
	plan, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	assert.Contains(t, strings.Join(plan, "\n"), "receipts_quarantined_idx", "plan:\n%s", strings.Join(plan, "\n"))

	// A GIN index with a pending list merges all of it inside the one insert that finds it full
	// (migration 0190): the receipts' goes to its tree on every insert.
	var opts []string
	require.NoError(t, conn.QueryRow(ctx, `SELECT coalesce(reloptions, '{}') FROM pg_class WHERE relname = 'receipts_bookings_idx'`).Scan(&opts))
	assert.Contains(t, opts, "fastupdate=off")
}

// TestCommitsAcrossStreamsDoNotDeadlock: deliveries that touch the same two streams in opposite orders
// must not deadlock (PostgreSQL would abort one after deadlock_timeout); results stay in the caller's
// order.
func TestCommitsAcrossStreamsDoNotDeadlock(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := testCtx(t)
	a, b := "booking-a-"+streamName(t), "booking-b-"+streamName(t)
	const workers, each = 8, 10
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				first, second := a, b
				if (w+i)%2 == 1 {
					first, second = b, a
				}
				res, err := s.Commit(ctx, commitOf("d-x",
					appendOf(first, eventlog.Any(), event(t, "x.v1"), event(t, "x.v1")),
					appendOf(second, eventlog.Any(), event(t, "x.v1"))))
				if !assert.NoError(t, err) {
					return
				}
				assert.Equal(t, uint64(1), res.Appends[0].LastVersion-res.Appends[0].FirstVersion, "result 0 is the two-event append")
				assert.Equal(t, res.Appends[1].FirstVersion, res.Appends[1].LastVersion, "result 1 is the one-event append")
			}
		}()
	}
	wg.Wait()
	for _, st := range []string{a, b} {
		got, err := s.ReadStream(ctx, st)
		require.NoError(t, err)
		assert.Len(t, got, workers*each*3/2)
	}
}

// TestCommitSendsADeadlockVictimAgain: a delivery committed alone whose transaction PostgreSQL aborts
// to break a deadlock is sent again rather than failed (the abort rolled all of it back). Another
// session holds the delivery's body row and then asks for its stream's row, which the commit holds
// while it waits for the body's: the cycle a receipt-only copy of a delivery makes with a copy that
// appends, in two groups. Or it holds the second of the delivery's streams and asks for the first:
// the abort hits the appends themselves, which alone are not a subtransaction of their own.
func TestCommitSendsADeadlockVictimAgain(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := testCtx(t)
	stream, second := "booking-a-"+streamName(t)[len("booking-"):], "booking-b-"+streamName(t)[len("booking-"):]
	_, err := s.Commit(ctx, commitOf("delivery-first", appendOf(stream, eventlog.NoStream(), event(t, "booking.scheduled.v1")),
		appendOf(second, eventlog.NoStream(), event(t, "booking.scheduled.v1"))))
	require.NoError(t, err)
	var digest []byte
	require.NoError(t, pool.QueryRow(ctx, `SELECT body_digest FROM receipts WHERE delivery_id = 'delivery-first'`).Scan(&digest))
	require.NotEmpty(t, digest)

	var done error
	deadlock(t, pool, `SELECT 1 FROM receipt_bodies WHERE digest = $1 FOR UPDATE`, digest, stream, func() (wait func()) {
		return commitInBackground(t, s, commitOf("delivery-second", appendOf(stream, eventlog.Exact(1), event(t, "booking.canceled.v1"))), &done)
	})
	require.NoError(t, done)
	deadlock(t, pool, `SELECT 1 FROM streams WHERE stream_id = $1 FOR UPDATE`, second, stream, func() (wait func()) {
		return commitInBackground(t, s, commitOf("delivery-third", appendOf(stream, eventlog.Exact(2), event(t, "booking.rescheduled.v1")),
			appendOf(second, eventlog.Exact(1), event(t, "booking.canceled.v1"))), &done)
	})
	require.NoError(t, done)
	evs, err := s.ReadStream(ctx, stream)
	require.NoError(t, err)
	assert.Len(t, evs, 3, "each delivery's event is stored once")
	evs, err = s.ReadStream(ctx, second)
	require.NoError(t, err)
	assert.Len(t, evs, 2)
}

func commitInBackground(t *testing.T, s *postgres.Store, c ledger.Commit, err *error) (wait func()) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := s.Commit(testCtx(t), c)
		done <- err
	}()
	return func() { *err = <-done }
}

// deadlock makes the session of what start sends a deadlock's victim: another session holds a row
// (hold, with holdArg), start sends, and once it waits for a lock the other session asks for stream's
// row, which start's statement must hold by then. It returns when start's wait has.
func deadlock(t *testing.T, pool *pgxpool.Pool, hold string, holdArg any, stream string, start func() (wait func())) {
	t.Helper()
	ctx := testCtx(t)
	other, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = other.Rollback(ctx) }()
	// The sender's session detects the cycle (its deadlock_timeout, 1 s by default, runs out first), so
	// it is the victim.
	_, err = other.Exec(ctx, `SET LOCAL deadlock_timeout = '30s'`)
	require.NoError(t, err)
	_, err = other.Exec(ctx, hold, holdArg)
	require.NoError(t, err)
	wait := start()
	require.Eventually(t, func() bool {
		return count(t, pool, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) == 1
	}, 10*time.Second, 10*time.Millisecond, "the sender waits for the row held")
	_, err = other.Exec(ctx, `SELECT 1 FROM streams WHERE stream_id = $1 FOR UPDATE`, stream)
	require.NoError(t, err, "the sender, not this session, was the victim")
	require.NoError(t, other.Rollback(ctx))
	wait()
}

// TestCommitAnswersWhereEachAppendWasStored: every way a delivery is committed (alone on one stream,
// alone on several, alone in a group beside a receipt-only delivery, several in a group, and copies
// that come back as idempotent re-appends) answers each append with the versions, transaction and
// global position of its events as they are read back. A caller that waits for a projection to reach
// a commit's position waits for the wrong event if the answer is not the stored one; the group paths
// build these answers in SQL (bl_appends, commitOneSQL), apart from bl_append's own.
func TestCommitAnswersWhereEachAppendWasStored(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := testCtx(t)
	check := func(t *testing.T, c ledger.Commit, res ledger.CommitResult, duplicate bool) {
		t.Helper()
		require.Len(t, res.Appends, len(c.Appends))
		for i, a := range c.Appends {
			stored, err := s.ReadStream(ctx, a.Stream)
			require.NoError(t, err)
			byID := map[eventlog.EventID]eventlog.RecordedEvent{}
			for _, e := range stored {
				byID[e.ID] = e
			}
			first, ok := byID[a.Events[0].ID]
			require.True(t, ok, "append %d: first event stored", i)
			last, ok := byID[a.Events[len(a.Events)-1].ID]
			require.True(t, ok, "append %d: last event stored", i)
			got := res.Appends[i]
			assert.Equal(t, first.Version, got.FirstVersion, "append %d: first version", i)
			assert.Equal(t, last.Version, got.LastVersion, "append %d: last version", i)
			assert.Equal(t, last.Position, got.Position, "append %d: the position of its last event", i)
			assert.Equal(t, duplicate, got.Duplicate, "append %d: duplicate", i)
		}
	}
	// Streams with events already, so that versions and positions differ from one another.
	before := func(t *testing.T) string {
		st := streamName(t)
		_, err := s.Append(ctx, st, eventlog.NoStream(), events(t, 3))
		require.NoError(t, err)
		return st
	}
	receiptOnly := func(id string) ledger.Commit {
		c := commitOf(id)
		c.Receipt.Outcome = ledger.OutcomeIgnored
		return c
	}

	alone := commitOf("d-alone", appendOf(before(t), eventlog.Exact(3), events(t, 2)...))
	aloneMany := commitOf("d-alone-many", appendOf(before(t), eventlog.Exact(3), events(t, 2)...),
		appendOf(streamName(t), eventlog.NoStream(), events(t, 3)...))
	inGroupBesideReceipt := commitOf("d-beside", appendOf(before(t), eventlog.Any(), events(t, 2)...))
	groupOne := commitOf("d-group-one", appendOf(before(t), eventlog.Exact(3), events(t, 2)...))
	groupMany := commitOf("d-group-many", appendOf(before(t), eventlog.StreamExists(), events(t, 3)...),
		appendOf(streamName(t), eventlog.NoStream(), events(t, 2)...))

	// Every delivery alone and in groups; copies answer where the originals were stored.
	commitAll := func(t *testing.T, copies bool, receiptOnlyID string) {
		for _, c := range []ledger.Commit{alone, aloneMany} {
			res, err := s.Commit(ctx, c)
			require.NoError(t, err)
			check(t, c, res, copies)
		}
		results, errs := commitHeldGroup(t, s, []ledger.Commit{receiptOnly(receiptOnlyID), inGroupBesideReceipt})
		require.NoError(t, errs[0])
		require.NoError(t, errs[1])
		check(t, inGroupBesideReceipt, results[1], copies)
		results, errs = commitHeldGroup(t, s, []ledger.Commit{groupOne, groupMany})
		for i, c := range []ledger.Commit{groupOne, groupMany} {
			require.NoError(t, errs[i])
			check(t, c, results[i], copies)
		}
	}
	commitAll(t, false, "d-ignored")
	t.Run("copies", func(t *testing.T) { commitAll(t, true, "d-ignored-2") })
}
