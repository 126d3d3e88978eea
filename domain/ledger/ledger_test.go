package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/eventcodec"
	"bookingledger/adapters/postgres"
	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/domain/ledger"
)

// These tests run the ledger service against the real PostgreSQL store: the service's promises
// (duplicates recognised, conflicts retried, receipts in the same commit) are only worth what the
// store under it does.

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func newService(t *testing.T) (*ledger.Service, *postgres.Store) {
	t.Helper()
	store := postgres.NewStore(pgtest.NewDatabase(t))
	return ledger.NewService(store, eventcodec.JSON{}), store
}

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

func id(name string) eventlog.EventID {
	return eventlog.EventID(uuid.NewSHA1(uuid.NameSpaceURL, []byte("ledger-test:"+name)))
}

func scheduled(b booking.ID, name string, start time.Time) booking.Event {
	return booking.Event{
		ID: id(string(b) + name), Booking: b, Provider: "test", ProviderRef: name, OccurredAt: t0.Add(-time.Hour),
		Payload: booking.Scheduled{Slot: booking.Slot{Meeting: "m-" + string(b), Resources: []string{"host-1"}, Start: start, End: start.Add(30 * time.Minute)}},
	}
}

func canceled(b booking.ID, name string, at time.Time) booking.Event {
	return booking.Event{ID: id(string(b) + name), Booking: b, Provider: "test", ProviderRef: name, OccurredAt: at, Payload: booking.Canceled{Reason: "test"}}
}

func delivery(deliveryID string, events ...booking.Event) ledger.Delivery {
	return ledger.Delivery{
		Receipt: ledger.Receipt{Provider: "test", ReceivedAt: time.Now(), DeliveryID: deliveryID, Secret: "index 0", Body: []byte(`{"raw":true}`)},
		Events:  events,
	}
}

func outcomes(t *testing.T, store *postgres.Store, b booking.ID) []ledger.Outcome {
	t.Helper()
	rs, err := store.ReceiptsForBooking(ctx(t), string(b))
	require.NoError(t, err)
	out := []ledger.Outcome{}
	for _, r := range rs {
		out = append(out, r.Receipt.Outcome)
	}
	return out
}

func TestRecordThenRedelivery(t *testing.T) {
	svc, store := newService(t)
	d := delivery("d-1", scheduled("b-1", "created", t0))

	res, err := svc.Record(ctx(t), d)
	require.NoError(t, err)
	assert.Equal(t, ledger.OutcomeAccepted, res.Outcome)
	assert.Equal(t, 1, res.Appended)
	assert.Equal(t, booking.ID("b-1"), res.Booking)
	assert.Equal(t, d.Events[0].ID, res.EventID)

	again, err := svc.Record(ctx(t), d)
	require.NoError(t, err)
	assert.Equal(t, ledger.OutcomeDuplicate, again.Outcome)
	assert.Zero(t, again.Appended)

	recs, err := store.ReadStream(ctx(t), booking.ID("b-1").Stream())
	require.NoError(t, err)
	assert.Len(t, recs, 1, "a redelivery is never appended twice")
	assert.Equal(t, []ledger.Outcome{ledger.OutcomeAccepted, ledger.OutcomeDuplicate}, outcomes(t, store, "b-1"), "every delivery gets a receipt")
}

func TestConcurrentCopiesOfOneDelivery(t *testing.T) {
	svc, store := newService(t)
	d := delivery("d-same", scheduled("b-race", "created", t0))
	const n = 20
	results := make([]ledger.Result, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			results[i], errs[i] = svc.Record(context.Background(), d)
		})
	}
	close(start)
	wg.Wait()
	accepted := 0
	for i := range n {
		require.NoError(t, errs[i])
		if results[i].Outcome == ledger.OutcomeAccepted {
			accepted++
		} else {
			assert.Equal(t, ledger.OutcomeDuplicate, results[i].Outcome)
		}
	}
	assert.Equal(t, 1, accepted, "exactly one copy is accepted")
	recs, err := store.ReadStream(ctx(t), booking.ID("b-race").Stream())
	require.NoError(t, err)
	assert.Len(t, recs, 1)
	got := outcomes(t, store, "b-race")
	assert.Len(t, got, n, "one receipt per copy")
	assert.Equal(t, 1, countOf(got, ledger.OutcomeAccepted), "stored receipts agree with the answers")
}

// TestConcurrentDifferentEventsOnOneBooking: distinct events racing on one stream all land, with no lost
// update and gapless versions — the exact-version append and the reload-and-decide loop at work. A
// writer that loses every one of its bounded attempts gets ErrContention (the HTTP layer's 503), and
// then does what a provider does: it delivers again. No other error is acceptable.
func TestConcurrentDifferentEventsOnOneBooking(t *testing.T) {
	svc, store := newService(t)
	_, err := svc.Record(ctx(t), delivery("d-create", scheduled("b-busy", "created", t0)))
	require.NoError(t, err)
	const n = 12
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			var p booking.Payload = booking.NoShowMarked{}
			if i%2 == 1 {
				p = booking.NoShowCleared{}
			}
			e := booking.Event{ID: id(fmt.Sprintf("b-busy-noshow-%d", i)), Booking: "b-busy", Provider: "test", OccurredAt: t0.Add(time.Duration(i) * time.Minute), Payload: p}
			var (
				res ledger.Result
				err error
			)
			for redelivery := 0; redelivery < 5; redelivery++ {
				res, err = svc.Record(context.Background(), delivery(fmt.Sprintf("d-%d", i), e))
				if !errors.Is(err, ledger.ErrContention) {
					break
				}
			}
			if err == nil && res.Outcome != ledger.OutcomeAccepted {
				err = fmt.Errorf("outcome %s", res.Outcome)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		assert.NoError(t, err, "delivery %d", i)
	}
	recs, err := store.ReadStream(ctx(t), booking.ID("b-busy").Stream())
	require.NoError(t, err)
	require.Len(t, recs, n+1, "no lost update")
	for i, r := range recs {
		assert.Equal(t, uint64(i+1), r.Version)
	}
}

// staleStore hides the stream's latest events from the ledger, so every commit it plans conflicts.
type staleStore struct{ *postgres.Store }

func (s staleStore) ReadStream(ctx context.Context, stream string) ([]eventlog.RecordedEvent, error) {
	recs, err := s.Store.ReadStream(ctx, stream)
	if len(recs) > 0 {
		recs = recs[:len(recs)-1]
	}
	return recs, err
}

func TestContentionIsBoundedAndReported(t *testing.T) {
	svc, store := newService(t)
	_, err := svc.Record(ctx(t), delivery("d-create", scheduled("b-stale", "created", t0)))
	require.NoError(t, err)

	stale := ledger.NewService(staleStore{store}, eventcodec.JSON{}).WithMaxAttempts(3)
	_, err = stale.Record(ctx(t), delivery("d-cancel", canceled("b-stale", "canceled", t0)))
	require.ErrorIs(t, err, ledger.ErrContention)

	recs, err := store.ReadStream(ctx(t), booking.ID("b-stale").Stream())
	require.NoError(t, err)
	assert.Len(t, recs, 1, "nothing appended when the ledger gives up")
	assert.Equal(t, []ledger.Outcome{ledger.OutcomeAccepted}, outcomes(t, store, "b-stale"), "no receipt for a delivery that was not acknowledged")
}

// TestRescheduleSpansTwoStreamsAtomically: a Cal.com-style reschedule writes the new booking and the
// implied cancel of the old one in one commit; its redelivery is a duplicate on both.
func TestRescheduleSpansTwoStreamsAtomically(t *testing.T) {
	svc, store := newService(t)
	_, err := svc.Record(ctx(t), delivery("d-old", scheduled("calcom-old", "created", t0)))
	require.NoError(t, err)

	next := scheduled("calcom-new", "created", t0.Add(2*time.Hour))
	next.Payload = booking.Scheduled{Slot: next.Payload.(booking.Scheduled).Slot, RescheduledFrom: "calcom-old"}
	implied := booking.Event{ID: id("implied"), Booking: "calcom-old", Provider: "test", OccurredAt: t0, Payload: booking.Canceled{Implied: true, CanceledBy: "provider", RescheduledTo: "calcom-new"}}
	d := delivery("d-resched", next, implied)

	res, err := svc.Record(ctx(t), d)
	require.NoError(t, err)
	assert.Equal(t, ledger.OutcomeAccepted, res.Outcome)
	assert.Equal(t, 2, res.Appended)
	again, err := svc.Record(ctx(t), d)
	require.NoError(t, err)
	assert.Equal(t, ledger.OutcomeDuplicate, again.Outcome)

	for b, want := range map[booking.ID]int{"calcom-old": 2, "calcom-new": 1} {
		recs, err := store.ReadStream(ctx(t), b.Stream())
		require.NoError(t, err)
		assert.Len(t, recs, want, b)
	}
}

func TestInvalidEventIsQuarantinedNotAppended(t *testing.T) {
	svc, store := newService(t)
	bad := scheduled("b-bad", "created", t0)
	bad.Payload = booking.Scheduled{Slot: booking.Slot{Meeting: "m", Resources: []string{"h"}, Start: t0, End: t0.Add(-time.Minute)}}
	res, err := svc.Record(ctx(t), delivery("d-bad", bad))
	require.NoError(t, err)
	assert.Equal(t, ledger.OutcomeQuarantined, res.Outcome)
	assert.Contains(t, res.Reason, "not after start")
	recs, err := store.ReadStream(ctx(t), booking.ID("b-bad").Stream())
	require.NoError(t, err)
	assert.Empty(t, recs)
	rs, err := store.ReceiptsForBooking(ctx(t), "b-bad")
	require.NoError(t, err)
	require.Len(t, rs, 1)
	assert.Equal(t, ledger.OutcomeQuarantined, rs[0].Receipt.Outcome)
	assert.Equal(t, []byte(`{"raw":true}`), rs[0].Receipt.Body, "the verified body is kept for operators")
}

func TestUnmappedAndUnmappableDeliveriesKeepTheirReceipt(t *testing.T) {
	svc, _ := newService(t)
	res, err := svc.Record(ctx(t), ledger.Delivery{Receipt: ledger.Receipt{Provider: "test", ReceivedAt: t0, DeliveryID: "d-ign", Reason: "routing_form_submission.created not mapped"}})
	require.NoError(t, err)
	assert.Equal(t, ledger.OutcomeIgnored, res.Outcome)
	assert.Equal(t, "routing_form_submission.created not mapped", res.Reason)

	res, err = svc.Record(ctx(t), ledger.Delivery{Receipt: ledger.Receipt{Provider: "test", ReceivedAt: t0, DeliveryID: "d-q"}, MapErr: fmt.Errorf("payload.uri missing")})
	require.NoError(t, err)
	assert.Equal(t, ledger.OutcomeQuarantined, res.Outcome)
	assert.Equal(t, "payload.uri missing", res.Reason)
}

// TestCancelBeforeCreateKeepsBoth: the cancel overtakes its create; both are kept, and the fold by
// provider time ends canceled however they arrived.
func TestCancelBeforeCreateKeepsBoth(t *testing.T) {
	svc, store := newService(t)
	create := scheduled("b-late", "created", t0)
	cancel := canceled("b-late", "canceled", t0.Add(-time.Hour+4*time.Minute))
	for _, e := range []booking.Event{cancel, create} {
		res, err := svc.Record(ctx(t), delivery(string(e.Type()), e))
		require.NoError(t, err)
		assert.Equal(t, ledger.OutcomeAccepted, res.Outcome)
	}
	recs, err := store.ReadStream(ctx(t), booking.ID("b-late").Stream())
	require.NoError(t, err)
	require.Len(t, recs, 2)
	assert.Equal(t, cancel.ID, recs[0].ID, "arrival order is kept in the stream")
	var events []booking.Event
	for _, r := range recs {
		e, err := eventcodec.JSON{}.Decode(r)
		require.NoError(t, err)
		events = append(events, e)
	}
	assert.Equal(t, booking.StatusCanceled, booking.Fold(events).Status)
}

func countOf(os []ledger.Outcome, o ledger.Outcome) int {
	n := 0
	for _, x := range os {
		if x == o {
			n++
		}
	}
	return n
}
