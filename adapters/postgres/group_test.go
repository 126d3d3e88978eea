package postgres_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/postgres"
	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/domain/eventlog"
	"bookingledger/domain/ledger"
)

// commitHeldGroup queues commits while the store's group commit is held, so that all of them are
// committed as one group, then releases it and returns each Commit's answer.
func commitHeldGroup(t *testing.T, s *postgres.Store, commits []ledger.Commit) ([]ledger.CommitResult, []error) {
	t.Helper()
	return startHeldGroup(t, s, commits)()
}

// startHeldGroup is commitHeldGroup that returns once the group is on its way: wait returns the
// answers.
func startHeldGroup(t *testing.T, s *postgres.Store, commits []ledger.Commit) (wait func() ([]ledger.CommitResult, []error)) {
	t.Helper()
	ctx := testCtx(t)
	release := make(chan struct{})
	postgres.HoldCommits(s, func() { <-release })
	results := make([]ledger.CommitResult, len(commits))
	errs := make([]error, len(commits))
	var wg sync.WaitGroup
	for i, c := range commits {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = s.Commit(ctx, c)
		}()
		// One at a time, so the group keeps the order of commits.
		require.Eventually(t, func() bool { return postgres.QueuedCommits(s) == i+1 }, 10*time.Second, time.Millisecond)
	}
	close(release)
	return func() ([]ledger.CommitResult, []error) {
		wg.Wait()
		return results, errs
	}
}

func TestGroupCommitThatFailsAcknowledgesNone(t *testing.T) {
	t.Parallel()
	s, pool := newFreshStore(t)
	ctx := testCtx(t)
	// A deferred constraint trigger fails the transaction at COMMIT, after every statement succeeded:
	// the latest point at which a group can fail.
	_, err := pool.Exec(ctx, `
CREATE FUNCTION fail_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'injected commit failure'; END $$;
CREATE CONSTRAINT TRIGGER fail_at_commit AFTER INSERT ON receipts DEFERRABLE INITIALLY DEFERRED
FOR EACH ROW EXECUTE FUNCTION fail_at_commit()`)
	require.NoError(t, err)
	var commits []ledger.Commit
	var streams []string
	for range 8 {
		st := streamName(t)
		streams = append(streams, st)
		commits = append(commits, withPersonal(commitOf("d-"+st, appendOf(st, eventlog.NoStream(), event(t, "booking.scheduled.v1"))),
			bookingOf(st), st+"@example.com"))
	}
	_, errs := commitHeldGroup(t, s, commits)
	for i, err := range errs {
		assert.ErrorContains(t, err, "injected commit failure", "delivery %d", i)
	}
	assert.Zero(t, count(t, pool, `SELECT count(*) FROM events WHERE stream_id = ANY($1)`, streams))
	assert.Zero(t, count(t, pool, `SELECT count(*) FROM receipts`))
	assert.Zero(t, count(t, pool, `SELECT count(*) FROM contacts`), "the personal data went with the group")
	assert.Zero(t, count(t, pool, `SELECT count(*) FROM free_texts`))
}

func TestGroupCommitIsolatesTheDeliveryAtFault(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	var commits []ledger.Commit
	var streams []string
	for i := range 8 {
		st := streamName(t)
		streams = append(streams, st)
		c := commitOf("d-"+st, appendOf(st, eventlog.NoStream(), event(t, "booking.scheduled.v1")))
		if i == 3 {
			c.Receipt.Outcome = "lost" // violates receipts_outcome_check: the group is refused
		}
		commits = append(commits, c)
	}
	results, errs := commitHeldGroup(t, s, commits)
	for i := range commits {
		if i == 3 {
			assert.Error(t, errs[i])
			continue
		}
		require.NoError(t, errs[i], "delivery %d", i)
		assert.Equal(t, ledger.OutcomeAccepted, results[i].Outcome)
	}
	assert.Equal(t, 7, count(t, pool, `SELECT count(*) FROM events WHERE stream_id = ANY($1)`, streams))
	assert.Zero(t, count(t, pool, `SELECT count(*) FROM events WHERE stream_id = $1`, streams[3]))
	assert.Equal(t, 7, count(t, pool, `SELECT count(*) FROM receipts`))
}

// Deliveries of one booking in one group are decided in order against each other: the first appends,
// an identical copy is a duplicate (its receipt says so, although the same transaction wrote the
// events), and a different delivery planned against the same version conflicts alone, without a
// receipt, so that the ledger reloads and decides it again.
func TestGroupCommitDecidesOneBookingsDeliveriesInOrder(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	st := streamName(t)
	create, cancel := event(t, "booking.scheduled.v1"), event(t, "booking.canceled.v1")
	other := streamName(t)
	results, errs := commitHeldGroup(t, s, []ledger.Commit{
		commitOf("d-create", appendOf(st, eventlog.NoStream(), create)),
		commitOf("d-create", appendOf(st, eventlog.NoStream(), create)),
		commitOf("d-cancel", appendOf(st, eventlog.NoStream(), cancel)),
		commitOf("d-other", appendOf(other, eventlog.NoStream(), event(t, "booking.scheduled.v1"))),
	})
	require.NoError(t, errs[0])
	assert.Equal(t, ledger.OutcomeAccepted, results[0].Outcome)
	require.NoError(t, errs[1])
	assert.Equal(t, ledger.OutcomeDuplicate, results[1].Outcome)
	assert.True(t, results[1].Appends[0].Duplicate)
	assert.Equal(t, results[0].Appends[0].Position, results[1].Appends[0].Position)
	assert.ErrorIs(t, errs[2], eventlog.ErrVersionConflict)
	require.NoError(t, errs[3])
	assert.Equal(t, ledger.OutcomeAccepted, results[3].Outcome)

	got, err := s.ReadStream(testCtx(t), st)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, create.ID, got[0].ID)
	assert.Equal(t, 2, count(t, pool, `SELECT count(*) FROM receipts WHERE delivery_id = 'd-create'`))
	assert.Zero(t, count(t, pool, `SELECT count(*) FROM receipts WHERE delivery_id = 'd-cancel'`))

	// Decided again against the stored create, the cancel appends after it.
	res, err := s.Commit(testCtx(t), commitOf("d-cancel", appendOf(st, eventlog.Exact(1), cancel)))
	require.NoError(t, err)
	assert.Equal(t, uint64(2), res.Appends[0].LastVersion)
}

// A group's appends answer in the caller's order, although they are locked in stream-name order.
func TestGroupCommitAnswersAppendsInTheCallersOrder(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	a, b := "booking-zz-"+streamName(t)[len("booking-"):], "booking-aa-"+streamName(t)[len("booking-"):]
	res, err := s.Commit(testCtx(t), commitOf("d-two", appendOf(a, eventlog.NoStream(), events(t, 2)...),
		appendOf(b, eventlog.NoStream(), event(t, "booking.scheduled.v1"))))
	require.NoError(t, err)
	require.Len(t, res.Appends, 2)
	assert.Equal(t, uint64(2), res.Appends[0].LastVersion, "the first append (two events) answers first")
	assert.Equal(t, uint64(1), res.Appends[1].LastVersion)
}

// A caller that stops waiting before its group is sent writes nothing.
func TestGroupCommitSkipsCallersThatGaveUp(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	release := make(chan struct{})
	postgres.HoldCommits(s, func() { <-release })
	ctx, cancel := context.WithCancel(testCtx(t))
	st := streamName(t)
	done := make(chan error, 1)
	go func() {
		_, err := s.Commit(ctx, commitOf("d-gone", appendOf(st, eventlog.NoStream(), event(t, "booking.scheduled.v1"))))
		done <- err
	}()
	require.Eventually(t, func() bool { return postgres.QueuedCommits(s) == 1 }, 10*time.Second, time.Millisecond)
	cancel()
	close(release)
	assert.ErrorIs(t, <-done, context.Canceled)
	// Groups run one after another: once a later commit is answered, the abandoned one was dealt with.
	_, err := s.Commit(testCtx(t), commitOf("d-later", appendOf(streamName(t), eventlog.NoStream(), event(t, "booking.scheduled.v1"))))
	require.NoError(t, err)
	assert.Zero(t, count(t, pool, `SELECT count(*) FROM receipts WHERE delivery_id = 'd-gone'`))
}

// Each delivery of a group keeps its own request headers, whether it appended or only left a receipt
// (a duplicate, an ignored delivery), and reads them back in their order.
func TestGroupCommitKeepsEachDeliverysHeaders(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	var commits []ledger.Commit
	for i := range 6 {
		st := streamName(t)
		c := commitOf("d-"+st, appendOf(st, eventlog.NoStream(), event(t, "booking.scheduled.v1")))
		if i%3 == 2 {
			c = ledger.Commit{Receipt: ledger.Receipt{Provider: "test", ReceivedAt: time.Now(), DeliveryID: "d-" + st, Outcome: ledger.OutcomeIgnored}}
		}
		c.Receipt.Headers = []ledger.Header{{Name: "User-Agent", Value: fmt.Sprintf("sender-%d", i)},
			{Name: "Webhook-Id", Value: "d-" + st}, {Name: "Webhook-Id", Value: fmt.Sprintf("second value: %d", i)}}
		commits = append(commits, c)
	}
	_, errs := commitHeldGroup(t, s, commits)
	for i, c := range commits {
		require.NoError(t, errs[i], "delivery %d", i)
		got, err := s.ListReceipts(testCtx(t), postgres.ReceiptFilter{})
		require.NoError(t, err)
		idx := slices.IndexFunc(got, func(r postgres.StoredReceipt) bool { return r.Receipt.DeliveryID == c.Receipt.DeliveryID })
		require.GreaterOrEqual(t, idx, 0, "delivery %d has a receipt", i)
		assert.Equal(t, c.Receipt.Headers, got[idx].Receipt.Headers, "delivery %d", i)
	}
}

// A group's deliveries with appends are committed by one statement from concatenated arrays: each
// delivery's appends, events, receipt (event references, headers, body) and personal data must come
// back as its own, whatever the others carry, and as if they had come one by one: of two copies of a
// delivery the later contact wins and the earlier text stays, and their one body is stored once.
func TestGroupCommitStoresEachDeliveryAsItsOwn(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := testCtx(t)
	zz, aa := "booking-zz-"+streamName(t)[len("booking-"):], "booking-aa-"+streamName(t)[len("booking-"):]
	three, bare, other := streamName(t), streamName(t), streamName(t)
	nilData := event(t, "booking.scheduled.v1")
	nilData.Data, nilData.Metadata = nil, []byte{}
	evThree := events(t, 3)

	two := commitOf("d-two", appendOf(zz, eventlog.NoStream(), events(t, 2)...), appendOf(aa, eventlog.NoStream(), event(t, "booking.scheduled.v1")))
	two.Receipt.Headers = []ledger.Header{{Name: "User-Agent", Value: "two"}, {Name: "Webhook-Id", Value: "d-two"}}
	two = withPersonal(two, bookingOf(zz), "two@example.com")
	first := withPersonal(commitOf("d-three", appendOf(three, eventlog.NoStream(), evThree...)), bookingOf(three), "first@example.com")
	first.Receipt.Headers = []ledger.Header{{Name: "User-Agent", Value: "three"}}
	copyOf := withPersonal(commitOf("d-three", appendOf(three, eventlog.NoStream(), evThree...)), bookingOf(three), "later@example.com")
	copyOf.Personal.FreeTexts[0].Text = "a later text"
	noBody := commitOf("d-bare", appendOf(bare, eventlog.NoStream(), nilData))
	noBody.Receipt.Body = nil
	ignored := ledger.Commit{Receipt: ledger.Receipt{Provider: "test", ReceivedAt: time.Now().UTC().Truncate(time.Microsecond),
		DeliveryID: "d-ignored", Outcome: ledger.OutcomeIgnored, Body: []byte(`{"ignored":true}`),
		Headers: []ledger.Header{{Name: "User-Agent", Value: "ignored"}}}}
	conflict := withPersonal(commitOf("d-conflict", appendOf(three, eventlog.Exact(0), event(t, "booking.canceled.v1"))), bookingOf(three), "conflict@example.com")
	lone := commitOf("d-other", appendOf(other, eventlog.NoStream(), event(t, "booking.scheduled.v1")))

	commits := []ledger.Commit{two, first, ignored, noBody, copyOf, conflict, lone}
	results, errs := commitHeldGroup(t, s, commits)
	for i := range commits {
		if i == 5 {
			assert.ErrorIs(t, errs[i], eventlog.ErrVersionConflict)
			continue
		}
		require.NoError(t, errs[i], "delivery %d", i)
	}
	assert.Equal(t, []ledger.Outcome{ledger.OutcomeAccepted, ledger.OutcomeAccepted, ledger.OutcomeIgnored, ledger.OutcomeAccepted,
		ledger.OutcomeDuplicate}, []ledger.Outcome{results[0].Outcome, results[1].Outcome, results[2].Outcome, results[3].Outcome, results[4].Outcome})
	require.Len(t, results[0].Appends, 2)
	assert.Equal(t, uint64(2), results[0].Appends[0].LastVersion, "answered in the caller's order")
	assert.Equal(t, uint64(1), results[0].Appends[1].LastVersion)
	assert.Equal(t, uint64(3), results[1].Appends[0].LastVersion)
	assert.True(t, results[4].Appends[0].Duplicate, "the copy is an idempotent re-append")
	assert.Equal(t, results[1].Appends[0].Position, results[4].Appends[0].Position)

	for _, st := range []string{zz, aa, three, bare, other} {
		var want []eventlog.EventData
		for _, c := range []ledger.Commit{two, first, noBody, lone} {
			for _, a := range c.Appends {
				if a.Stream == st {
					want = a.Events
				}
			}
		}
		got, err := s.ReadStream(ctx, st)
		require.NoError(t, err)
		require.Len(t, got, len(want), st)
		for k := range want {
			assert.Equal(t, want[k].ID, got[k].ID, st)
			assert.Equal(t, want[k].Data, got[k].Data, st)
			assert.Equal(t, want[k].Metadata, got[k].Metadata, st)
		}
	}

	stored, err := s.ListReceipts(ctx, postgres.ReceiptFilter{})
	require.NoError(t, err)
	require.Len(t, stored, 6, "every delivery but the conflicting one has its receipt")
	for i, c := range commits {
		if i == 5 {
			continue
		}
		var got []postgres.StoredReceipt
		for _, r := range stored {
			if r.Receipt.DeliveryID == c.Receipt.DeliveryID {
				got = append(got, r)
			}
		}
		require.NotEmpty(t, got, "delivery %d", i)
		r := got[0].Receipt // newest first: of the two copies, the later
		if i == 1 {
			r = got[len(got)-1].Receipt
		}
		assert.Equal(t, c.Receipt.Events, nonNilRefs(r.Events), "delivery %d", i)
		assert.Equal(t, c.Receipt.Headers, r.Headers, "delivery %d", i)
		assert.Equal(t, c.Receipt.Body, r.Body, "delivery %d", i)
	}
	assert.Equal(t, 1, count(t, pool, `SELECT count(DISTINCT body_digest) FROM receipts WHERE delivery_id = 'd-three'`))
	assert.Equal(t, 2, count(t, pool, `SELECT count(*) FROM receipts WHERE delivery_id = 'd-three' AND body_digest IS NOT NULL`))
	assert.Zero(t, count(t, pool, `SELECT count(*) FROM receipts WHERE delivery_id = 'd-bare' AND body_digest IS NOT NULL`))

	assert.Equal(t, "later@example.com", contactOf(t, pool, bookingOf(three)), "the later copy's contact wins")
	assert.Equal(t, "two@example.com", contactOf(t, pool, bookingOf(zz)))
	assert.Equal(t, 1, count(t, pool, `SELECT count(*) FROM free_texts WHERE booking = $1 AND text = 'text of first@example.com'`, string(bookingOf(three))))
	assert.Equal(t, 1, count(t, pool, `SELECT count(*) FROM free_texts WHERE booking = $1`, string(bookingOf(three))))
}

func nonNilRefs(refs []ledger.EventRef) []ledger.EventRef {
	if len(refs) == 0 {
		return nil
	}
	return refs
}

// In a group, a delivery's receipt is stored as duplicate only when every one of its appends was an
// idempotent re-append: one stream already written and one new is accepted, as committed alone
// (TestCommitOutcomes).
func TestGroupCommitStoresDuplicateOnlyWhenEveryAppendWas(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := testCtx(t)
	written, fresh, other := streamName(t), streamName(t), streamName(t)
	stored := event(t, "booking.scheduled.v1")
	_, err := s.Append(ctx, written, eventlog.NoStream(), []eventlog.EventData{stored})
	require.NoError(t, err)
	results, errs := commitHeldGroup(t, s, []ledger.Commit{
		commitOf("d-half", appendOf(written, eventlog.Exact(0), stored), appendOf(fresh, eventlog.NoStream(), event(t, "booking.scheduled.v1"))),
		commitOf("d-whole", appendOf(written, eventlog.Exact(0), stored)),
		commitOf("d-other", appendOf(other, eventlog.NoStream(), event(t, "booking.scheduled.v1"))),
	})
	for i, err := range errs {
		require.NoError(t, err, "delivery %d", i)
	}
	assert.Equal(t, []bool{true, false}, []bool{results[0].Appends[0].Duplicate, results[0].Appends[1].Duplicate})
	assert.Equal(t, []ledger.Outcome{ledger.OutcomeAccepted, ledger.OutcomeDuplicate, ledger.OutcomeAccepted},
		[]ledger.Outcome{results[0].Outcome, results[1].Outcome, results[2].Outcome})
	assert.Equal(t, 1, count(t, pool, `SELECT count(*) FROM receipts WHERE delivery_id = 'd-half' AND outcome = 'accepted'`))
	assert.Equal(t, 1, count(t, pool, `SELECT count(*) FROM receipts WHERE delivery_id = 'd-whole' AND outcome = 'duplicate'`))
}

// A delivery of a group whose appends PostgreSQL aborts as a deadlock's victim fails alone, as a
// version conflict (the ledger decides it again), and the rest of the group commits: its
// subtransaction was undone, not the group's transaction. Another session holds the second
// delivery's stream and then asks for the first's, which the group holds.
func TestGroupCommitAnswersADeadlockedDeliveryAsAConflict(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	postgres.SetAppendOff(s) // bl_try_appends' subtransactions; the set-based append: TestSetAppendDeadlockIsCommittedAgain
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
	require.NoError(t, errs[0])
	assert.Equal(t, ledger.OutcomeAccepted, results[0].Outcome)
	assert.ErrorIs(t, errs[1], eventlog.ErrVersionConflict)
	assert.Equal(t, 2, count(t, pool, `SELECT count(*) FROM events WHERE stream_id = $1`, first))
	assert.Equal(t, 1, count(t, pool, `SELECT count(*) FROM events WHERE stream_id = $1`, second))
	assert.Zero(t, count(t, pool, `SELECT count(*) FROM receipts WHERE delivery_id = 'd-second'`))
}

// A group whose only delivery with appends conflicts (the others leave receipts only) commits that
// delivery by its own statement: it fails alone, without a receipt or personal data, and the
// receipt-only deliveries are stored.
func TestGroupCommitLeavesNoReceiptOfItsOnlyFailingAppend(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := testCtx(t)
	st := streamName(t)
	_, err := s.Append(ctx, st, eventlog.NoStream(), []eventlog.EventData{event(t, "booking.scheduled.v1")})
	require.NoError(t, err)
	ignored := ledger.Commit{Receipt: ledger.Receipt{Provider: "test", ReceivedAt: time.Now(), DeliveryID: "d-ignored", Outcome: ledger.OutcomeIgnored}}
	conflict := withPersonal(commitOf("d-conflict", appendOf(st, eventlog.Exact(0), event(t, "booking.canceled.v1"))), bookingOf(st), "conflict@example.com")
	results, errs := commitHeldGroup(t, s, []ledger.Commit{ignored, conflict})
	require.NoError(t, errs[0])
	assert.Equal(t, ledger.OutcomeIgnored, results[0].Outcome)
	assert.ErrorIs(t, errs[1], eventlog.ErrVersionConflict)
	assert.Equal(t, 1, count(t, pool, `SELECT count(*) FROM receipts WHERE delivery_id = 'd-ignored'`))
	assert.Zero(t, count(t, pool, `SELECT count(*) FROM receipts WHERE delivery_id = 'd-conflict'`))
	assert.Empty(t, contactOf(t, pool, bookingOf(st)))
	assert.Zero(t, count(t, pool, `SELECT count(*) FROM free_texts`))
	assert.Equal(t, 1, count(t, pool, `SELECT count(*) FROM events WHERE stream_id = $1`, st))
}

// A group whose connection is lost is not committed one by one: whether the server committed it is
// unknown, so every delivery of it is answered as unavailable (the sender retries; a redelivery is
// then a duplicate). Here the server has the whole group and waits for a stream another session
// holds when the client's side of the connection goes.
func TestGroupCommitLostWithItsConnectionIsNotRetried(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabaseURL(t)
	pool := pgtest.Open(t, url)
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil {
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
		return c, err
	}
	storePool, err := pgxpool.NewWithConfig(testCtx(t), cfg)
	require.NoError(t, err)
	t.Cleanup(storePool.Close)
	s := postgres.NewStore(storePool)
	ctx := testCtx(t)
	st := streamName(t)
	_, err = s.Append(ctx, st, eventlog.NoStream(), []eventlog.EventData{event(t, "booking.scheduled.v1")})
	require.NoError(t, err)

	other, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = other.Rollback(ctx) }()
	_, err = other.Exec(ctx, `SELECT 1 FROM streams WHERE stream_id = $1 FOR UPDATE`, st)
	require.NoError(t, err)
	wait := startHeldGroup(t, s, []ledger.Commit{
		commitOf("d-waits", appendOf(st, eventlog.Exact(1), event(t, "booking.canceled.v1"))),
		commitOf("d-new", appendOf(streamName(t), eventlog.NoStream(), event(t, "booking.scheduled.v1"))),
	})
	require.Eventually(t, func() bool {
		return count(t, pool, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) == 1
	}, 10*time.Second, 10*time.Millisecond, "the group waits for the stream")
	mu.Lock()
	for _, c := range conns {
		_ = c.Close()
	}
	mu.Unlock()
	require.NoError(t, other.Rollback(ctx)) // a delivery sent again would not wait

	_, errs := wait()
	for i, err := range errs {
		assert.ErrorIs(t, err, eventlog.ErrUnavailable, "delivery %d", i)
	}
}

// fakeSealer seals a body as SealedPrefix followed by the body, under one data key per subject; it is
// enough for the body and data key rows, which are all a commit needs of a sealer.
type fakeSealer struct {
	mu   sync.Mutex
	keys map[string][16]byte
}

func (f *fakeSealer) SealBody(subject string, body []byte) (ledger.SealedBody, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.keys == nil {
		f.keys = map[string][16]byte{}
	}
	k, ok := f.keys[subject]
	if !ok {
		if _, err := rand.Read(k[:]); err != nil {
			return ledger.SealedBody{}, err
		}
		f.keys[subject] = k
	}
	return ledger.SealedBody{Digest: sha256.Sum256(body), Data: append([]byte(ledger.SealedPrefix), body...), KeyID: k,
		Subject: subject, KEKID: "test", Wrapped: []byte("wrapped")}, nil
}

func (f *fakeSealer) OpenBody(_ context.Context, _, stored []byte) (ledger.BodyState, error) {
	return ledger.BodyState{Plain: stored[len(ledger.SealedPrefix):]}, nil
}

// A group of deliveries with sealed bodies commits in one transaction, each body stored as its
// subject's (commitGroupSQL stores the subject with the body and asks whether it is erased). Without the subject its data key's row cannot be stored: the group's statement would fail
// and its deliveries be committed one by one, each in a transaction and WAL flush of its own, which
// is what group commit is for.
func TestGroupCommitOfSealedBodiesIsOneTransaction(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	s = s.WithBodySealer(&fakeSealer{})
	var commits []ledger.Commit
	for i := range 3 {
		st := streamName(t)
		c := commitOf("d-sealed-"+st, appendOf(st, eventlog.NoStream(), event(t, "booking.scheduled.v1")))
		c.Receipt.Body = []byte(fmt.Sprintf(`{"sealed":%d}`, i))
		commits = append(commits, c)
	}
	results, errs := commitHeldGroup(t, s, commits)
	for i := range commits {
		require.NoError(t, errs[i], "delivery %d", i)
		require.Len(t, results[i].Appends, 1)
		assert.Equal(t, results[0].Appends[0].Position.Commit, results[i].Appends[0].Position.Commit, "delivery %d: the group's transaction", i)
	}
	assert.Equal(t, 3, count(t, pool, `SELECT count(*) FROM receipt_bodies b JOIN receipts r ON r.body_digest = b.digest
WHERE b.subject = r.bookings[1] AND b.key_id IS NOT NULL`))
}

// A group's answer that lacks part of a delivery's append results (here its duplicate flags) fails
// that group's Commits with an error instead of crashing the process in the committer's goroutine.
// The statement itself succeeded, so what it stored stays; the deliveries answered with an error are
// sent again by their providers and found stored.
func TestGroupCommitRefusesAnIncompleteAnswer(t *testing.T) {
	t.Parallel()
	s, pool := newFreshStore(t)
	postgres.SetAppendOff(s) // the answer checked is bl_try_appends'
	ctx := testCtx(t)
	_, err := pool.Exec(ctx, `ALTER FUNCTION bl_try_appends(text[], text[], bigint[], int[], uuid[], text[], bytea[], bytea[]) RENAME TO bl_try_appends_whole;
CREATE FUNCTION bl_try_appends(p_streams text[], p_kinds text[], p_versions bigint[], p_counts int[], p_ids uuid[], p_types text[],
    p_data bytea[], p_metadata bytea[], OUT status text, OUT message text, OUT detail text, OUT first_versions bigint[],
    OUT last_versions bigint[], OUT tx_ids xid8[], OUT positions bigint[], OUT duplicates boolean[])
LANGUAGE sql AS $$
    SELECT w.status, w.message, w.detail, w.first_versions, w.last_versions, w.tx_ids, w.positions, NULL::boolean[]
    FROM bl_try_appends_whole(p_streams, p_kinds, p_versions, p_counts, p_ids, p_types, p_data, p_metadata) w
$$`)
	require.NoError(t, err)
	var commits []ledger.Commit
	for range 2 {
		st := streamName(t)
		commits = append(commits, commitOf("d-"+st, appendOf(st, eventlog.NoStream(), event(t, "booking.scheduled.v1"))))
	}
	_, errs := commitHeldGroup(t, s, commits)
	for i, err := range errs {
		require.Error(t, err, "delivery %d", i)
		assert.Contains(t, err.Error(), "incomplete", "delivery %d", i)
	}
}
