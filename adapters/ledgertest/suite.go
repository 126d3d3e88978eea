package ledgertest

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
	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/domain/ledger"
)

// Fixture is one ledger store under test and the reading back of its receipts.
type Fixture struct {
	Store ledger.Store
	// Receipts returns the stored receipts of the deliveries that carried events of b, in the order
	// they were stored.
	Receipts func(ctx context.Context, b booking.ID) ([]ledger.Receipt, error)
	// UnreadNewStreams runs the suite's services with ledger.Service.WithUnreadNewStreams, for a store
	// that answers as that option requires.
	UnreadNewStreams bool
}

// Factory returns a fixture for one test.
type Factory func(t *testing.T) Fixture

// Run runs every contract test against fixtures made by newFixture.
func Run(t *testing.T, newFixture Factory) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(*testing.T, Fixture)
	}{
		{"RecordThenRedelivery", testRecordThenRedelivery},
		{"ConcurrentCopiesOfOneDelivery", testConcurrentCopiesOfOneDelivery},
		{"ConcurrentDeliveriesOfOneBooking", testConcurrentDeliveriesOfOneBooking},
		{"ConcurrentDifferentEventsOnOneBooking", testConcurrentDifferentEventsOnOneBooking},
		{"ContentionIsBoundedAndReported", testContentionIsBoundedAndReported},
		{"RescheduleSpansTwoStreams", testRescheduleSpansTwoStreams},
		{"InvalidEventIsQuarantinedNotAppended", testInvalidEventIsQuarantinedNotAppended},
		{"UnmappedAndUnmappableDeliveriesKeepTheirReceipt", testUnmappedAndUnmappable},
		{"CancelBeforeCreateKeepsBoth", testCancelBeforeCreateKeepsBoth},
		{"CommitStoresDuplicateWhenEveryAppendWasDuplicate", testCommitStoresDuplicate},
		{"CommitPassesVersionConflictsThrough", testCommitPassesVersionConflictsThrough},
		{"TwoServicesDecideOneBookingRight", testTwoServicesDecideOneBookingRight},
		{"ConcurrentCopiesThroughTwoServices", testConcurrentCopiesThroughTwoServices},
		{"NewBookingsAreDecidedWithoutARead", testNewBookingsAreDecidedWithoutARead},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newFixture(t))
		})
	}
}

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func ctxFor(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

// bookingID is a booking of this test only.
func bookingID(name string) booking.ID {
	return booking.ID(name + "-" + uuid.NewString()[:8])
}

func eventID(name string) eventlog.EventID {
	return eventlog.EventID(eventlog.UUIDv5(uuid.NameSpaceURL, []byte("ledger-test:"+name)))
}

func scheduled(b booking.ID, name string, start time.Time) booking.Event {
	return booking.Event{
		ID: eventID(string(b) + name), Booking: b, Provider: "test", ProviderRef: name, OccurredAt: t0.Add(-time.Hour),
		Payload: booking.Scheduled{Slot: booking.Slot{Meeting: "m-" + string(b), Resources: []string{"host-1"}, Start: start, End: start.Add(30 * time.Minute)}},
	}
}

func canceled(b booking.ID, name string, at time.Time) booking.Event {
	return booking.Event{ID: eventID(string(b) + name), Booking: b, Provider: "test", ProviderRef: name, OccurredAt: at, Payload: booking.Canceled{Reason: "test"}}
}

func delivery(deliveryID string, events ...booking.Event) ledger.Delivery {
	return ledger.Delivery{
		Receipt: ledger.Receipt{Provider: "test", ReceivedAt: time.Now(), DeliveryID: deliveryID, Secret: "index 0", Body: []byte(`{"raw":true}`)},
		Events:  events,
	}
}

func service(f Fixture) *ledger.Service { return serviceOver(f, f.Store) }

// serviceOver is a service as the fixture asks for, over store (f.Store or a wrapper of it); each
// service has its own memory of the streams it saw, as two serve processes would.
func serviceOver(f Fixture, store ledger.Store) *ledger.Service {
	svc := ledger.NewService(store, eventcodec.JSON{})
	if f.UnreadNewStreams {
		svc.WithUnreadNewStreams(1024)
	}
	return svc
}

func stream(t *testing.T, f Fixture, b booking.ID) []eventlog.RecordedEvent {
	t.Helper()
	recs, err := f.Store.ReadStream(ctxFor(t), b.Stream())
	require.NoError(t, err)
	return recs
}

func outcomes(t *testing.T, f Fixture, b booking.ID) []ledger.Outcome {
	t.Helper()
	rs, err := f.Receipts(ctxFor(t), b)
	require.NoError(t, err)
	out := []ledger.Outcome{}
	for _, r := range rs {
		out = append(out, r.Outcome)
	}
	return out
}

func ids(recs []eventlog.RecordedEvent) []eventlog.EventID {
	out := make([]eventlog.EventID, len(recs))
	for i, r := range recs {
		out[i] = r.ID
	}
	return out
}

func testRecordThenRedelivery(t *testing.T, f Fixture) {
	svc := service(f)
	b := bookingID("b")
	d := delivery("d-1", scheduled(b, "created", t0))

	res, err := svc.Record(ctxFor(t), d)
	require.NoError(t, err)
	assert.Equal(t, ledger.OutcomeAccepted, res.Outcome)
	assert.Equal(t, 1, res.Appended)
	assert.Equal(t, b, res.Booking)
	assert.Equal(t, d.Events[0].ID, res.EventID)

	again, err := svc.Record(ctxFor(t), d)
	require.NoError(t, err)
	assert.Equal(t, ledger.OutcomeDuplicate, again.Outcome)
	assert.Zero(t, again.Appended)

	assert.Len(t, stream(t, f, b), 1, "a redelivery is never appended twice")
	assert.Equal(t, []ledger.Outcome{ledger.OutcomeAccepted, ledger.OutcomeDuplicate}, outcomes(t, f, b), "every delivery gets a receipt")
}

func testConcurrentCopiesOfOneDelivery(t *testing.T, f Fixture) {
	recordCopiesAtOnce(t, f, []*ledger.Service{service(f)}, bookingID("b-race"), 20)
}

// recordCopiesAtOnce records n copies of one delivery creating b at the same time, the i'th through
// svcs[i%len(svcs)], and checks that the event is stored once, one copy is accepted, the others are
// duplicates and every copy gets a receipt.
func recordCopiesAtOnce(t *testing.T, f Fixture, svcs []*ledger.Service, b booking.ID, n int) {
	t.Helper()
	d := delivery("d-same", scheduled(b, "created", t0))
	results := make([]ledger.Result, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			results[i], errs[i] = svcs[i%len(svcs)].Record(context.Background(), d)
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
	assert.Len(t, stream(t, f, b), 1, "the event is stored once")
	got := outcomes(t, f, b)
	assert.Len(t, got, n, "one receipt per copy")
	assert.Equal(t, 1, countOf(got, ledger.OutcomeAccepted), "stored receipts agree with the answers")
}

// testConcurrentDeliveriesOfOneBooking sends 8 copies each of two deliveries for one booking at the
// same time: each event is stored once, each delivery is accepted once, every copy gets a receipt.
func testConcurrentDeliveriesOfOneBooking(t *testing.T, f Fixture) {
	svc := service(f)
	b := bookingID("b-pair")
	first := scheduled(b, "created", t0)
	cancel := canceled(b, "canceled", first.OccurredAt.Add(time.Hour))
	deliveries := []ledger.Delivery{delivery("create", first), delivery("cancel", cancel)}

	const copies = 8
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		answered = map[string]map[ledger.Outcome]int{"create": {}, "cancel": {}}
		start    = make(chan struct{})
	)
	for i := range 2 * copies {
		d := deliveries[i%2]
		wg.Go(func() {
			<-start
			var (
				res ledger.Result
				err error
			)
			for redelivery := 0; redelivery < 5; redelivery++ {
				if res, err = svc.Record(ctxFor(t), d); !errors.Is(err, ledger.ErrContention) {
					break
				}
			}
			if err != nil {
				t.Errorf("record %s: %v", d.Receipt.DeliveryID, err)
				return
			}
			mu.Lock()
			answered[d.Receipt.DeliveryID][res.Outcome]++
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	for _, id := range []string{"create", "cancel"} {
		assert.Equal(t, map[ledger.Outcome]int{ledger.OutcomeAccepted: 1, ledger.OutcomeDuplicate: copies - 1}, answered[id], id)
	}
	assert.Len(t, outcomes(t, f, b), 2*copies)
	assert.ElementsMatch(t, []eventlog.EventID{first.ID, cancel.ID}, ids(stream(t, f, b)))
}

// testConcurrentDifferentEventsOnOneBooking: distinct events racing on one stream all land, with no
// lost update and gapless versions — the exact-version append and the reload-and-decide loop at work.
// A writer that loses every one of its bounded attempts gets ErrContention (the HTTP layer's 503), and
// then does what a provider does: it delivers again. No other error is acceptable.
func testConcurrentDifferentEventsOnOneBooking(t *testing.T, f Fixture) {
	svc := service(f)
	b := bookingID("b-busy")
	_, err := svc.Record(ctxFor(t), delivery("d-create", scheduled(b, "created", t0)))
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
			e := booking.Event{ID: eventID(fmt.Sprintf("%s-noshow-%d", b, i)), Booking: b, Provider: "test", OccurredAt: t0.Add(time.Duration(i) * time.Minute), Payload: p}
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
	recs := stream(t, f, b)
	require.Len(t, recs, n+1, "no lost update")
	for i, r := range recs {
		assert.Equal(t, uint64(i+1), r.Version)
	}
}

// staleStore hides the stream's latest events from the ledger, so every commit it plans conflicts.
type staleStore struct{ ledger.Store }

func (s staleStore) ReadStream(ctx context.Context, stream string) ([]eventlog.RecordedEvent, error) {
	recs, err := s.Store.ReadStream(ctx, stream)
	if len(recs) > 0 {
		recs = recs[:len(recs)-1]
	}
	return recs, err
}

func testContentionIsBoundedAndReported(t *testing.T, f Fixture) {
	b := bookingID("b-stale")
	_, err := service(f).Record(ctxFor(t), delivery("d-create", scheduled(b, "created", t0)))
	require.NoError(t, err)

	stale := serviceOver(f, staleStore{f.Store}).WithMaxAttempts(3)
	_, err = stale.Record(ctxFor(t), delivery("d-cancel", canceled(b, "canceled", t0)))
	require.ErrorIs(t, err, ledger.ErrContention)

	assert.Len(t, stream(t, f, b), 1, "nothing appended when the ledger gives up")
	assert.Equal(t, []ledger.Outcome{ledger.OutcomeAccepted}, outcomes(t, f, b), "no receipt for a delivery that was not acknowledged")
}

// testRescheduleSpansTwoStreams: a Cal.com-style reschedule writes the new booking and the implied
// cancel of the old one in one commit; its redelivery is a duplicate on both.
func testRescheduleSpansTwoStreams(t *testing.T, f Fixture) {
	svc := service(f)
	old, renewed := bookingID("calcom-old"), bookingID("calcom-new")
	_, err := svc.Record(ctxFor(t), delivery("d-old", scheduled(old, "created", t0)))
	require.NoError(t, err)

	next := scheduled(renewed, "created", t0.Add(2*time.Hour))
	next.Payload = booking.Scheduled{Slot: next.Payload.(booking.Scheduled).Slot, RescheduledFrom: old}
	implied := booking.Event{ID: eventID(string(old) + "implied"), Booking: old, Provider: "test", OccurredAt: t0,
		Payload: booking.Canceled{Implied: true, CanceledBy: "provider", RescheduledTo: renewed}}
	d := delivery("d-resched", next, implied)

	res, err := svc.Record(ctxFor(t), d)
	require.NoError(t, err)
	assert.Equal(t, ledger.OutcomeAccepted, res.Outcome)
	assert.Equal(t, 2, res.Appended)
	again, err := svc.Record(ctxFor(t), d)
	require.NoError(t, err)
	assert.Equal(t, ledger.OutcomeDuplicate, again.Outcome)

	for b, want := range map[booking.ID]int{old: 2, renewed: 1} {
		assert.Len(t, stream(t, f, b), want, b)
	}
	// The receipt names both bookings: each finds it, the booking of its later events too.
	assert.Equal(t, []ledger.Outcome{ledger.OutcomeAccepted, ledger.OutcomeAccepted, ledger.OutcomeDuplicate}, outcomes(t, f, old))
	assert.Equal(t, []ledger.Outcome{ledger.OutcomeAccepted, ledger.OutcomeDuplicate}, outcomes(t, f, renewed))
}

func testInvalidEventIsQuarantinedNotAppended(t *testing.T, f Fixture) {
	b := bookingID("b-bad")
	bad := scheduled(b, "created", t0)
	bad.Payload = booking.Scheduled{Slot: booking.Slot{Meeting: "m", Resources: []string{"h"}, Start: t0, End: t0.Add(-time.Minute)}}
	res, err := service(f).Record(ctxFor(t), delivery("d-bad", bad))
	require.NoError(t, err)
	assert.Equal(t, ledger.OutcomeQuarantined, res.Outcome)
	assert.Contains(t, res.Reason, "not after start")
	assert.Empty(t, stream(t, f, b))
	rs, err := f.Receipts(ctxFor(t), b)
	require.NoError(t, err)
	require.Len(t, rs, 1)
	assert.Equal(t, ledger.OutcomeQuarantined, rs[0].Outcome)
	assert.Equal(t, []byte(`{"raw":true}`), rs[0].Body, "the verified body is kept for operators")
}

func testUnmappedAndUnmappable(t *testing.T, f Fixture) {
	svc := service(f)
	res, err := svc.Record(ctxFor(t), ledger.Delivery{Receipt: ledger.Receipt{Provider: "test", ReceivedAt: t0, DeliveryID: "d-ign", Reason: "routing_form_submission.created not mapped"}})
	require.NoError(t, err)
	assert.Equal(t, ledger.OutcomeIgnored, res.Outcome)
	assert.Equal(t, "routing_form_submission.created not mapped", res.Reason)

	res, err = svc.Record(ctxFor(t), ledger.Delivery{Receipt: ledger.Receipt{Provider: "test", ReceivedAt: t0, DeliveryID: "d-q"}, MapErr: errors.New("payload.uri missing")})
	require.NoError(t, err)
	assert.Equal(t, ledger.OutcomeQuarantined, res.Outcome)
	assert.Equal(t, "payload.uri missing", res.Reason)
}

// testCancelBeforeCreateKeepsBoth: the cancel overtakes its create; both are kept, and the fold by
// provider time ends canceled however they arrived.
func testCancelBeforeCreateKeepsBoth(t *testing.T, f Fixture) {
	svc := service(f)
	b := bookingID("b-late")
	create := scheduled(b, "created", t0)
	cancel := canceled(b, "canceled", t0.Add(-time.Hour+4*time.Minute))
	for _, e := range []booking.Event{cancel, create} {
		res, err := svc.Record(ctxFor(t), delivery(string(e.Type()), e))
		require.NoError(t, err)
		assert.Equal(t, ledger.OutcomeAccepted, res.Outcome)
	}
	recs := stream(t, f, b)
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

func rawEvent(b booking.ID, name string) (eventlog.EventData, ledger.EventRef) {
	e := canceled(b, name, t0)
	data, err := eventcodec.JSON{}.Encode(e)
	if err != nil {
		panic(err)
	}
	return data, ledger.EventRef{Booking: b, Stream: b.Stream(), ID: e.ID, Type: e.Type()}
}

func testCommitStoresDuplicate(t *testing.T, f Fixture) {
	one, two := bookingID("b-one"), bookingID("b-two")
	a, aRef := rawEvent(one, "a")
	b, bRef := rawEvent(two, "b")
	_, err := f.Store.Commit(ctxFor(t), ledger.Commit{
		Appends: []ledger.Append{{Stream: one.Stream(), Expected: eventlog.NoStream(), Events: []eventlog.EventData{a}}},
		Receipt: ledger.Receipt{Provider: "test", ReceivedAt: t0, DeliveryID: "first", Outcome: ledger.OutcomeAccepted, Events: []ledger.EventRef{aRef}},
	})
	require.NoError(t, err)

	cases := []struct {
		name    string
		appends []ledger.Append
		refs    []ledger.EventRef
		want    ledger.Outcome
	}{
		{"all duplicate", []ledger.Append{{Stream: one.Stream(), Expected: eventlog.Exact(0), Events: []eventlog.EventData{a}}},
			[]ledger.EventRef{aRef}, ledger.OutcomeDuplicate},
		{"one new", []ledger.Append{
			{Stream: one.Stream(), Expected: eventlog.Exact(0), Events: []eventlog.EventData{a}},
			{Stream: two.Stream(), Expected: eventlog.Exact(0), Events: []eventlog.EventData{b}},
		}, []ledger.EventRef{aRef, bRef}, ledger.OutcomeAccepted},
		{"receipt only", nil, []ledger.EventRef{aRef}, ledger.OutcomeAccepted},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := ledger.Receipt{Provider: "test", ReceivedAt: t0, DeliveryID: tc.name, Outcome: ledger.OutcomeAccepted, Events: tc.refs}
			res, err := f.Store.Commit(ctxFor(t), ledger.Commit{Appends: tc.appends, Receipt: r})
			require.NoError(t, err)
			assert.Equal(t, tc.want, res.Outcome)
			assert.Len(t, res.Appends, len(tc.appends))
			got, err := f.Receipts(ctxFor(t), one)
			require.NoError(t, err)
			require.NotEmpty(t, got)
			last := got[len(got)-1]
			assert.Equal(t, tc.name, last.DeliveryID)
			assert.Equal(t, tc.want, last.Outcome, "the receipt is stored with the outcome reported")
		})
	}
	assert.Equal(t, []eventlog.EventID{a.ID}, ids(stream(t, f, one)))
	assert.Equal(t, []eventlog.EventID{b.ID}, ids(stream(t, f, two)))
}

func testCommitPassesVersionConflictsThrough(t *testing.T, f Fixture) {
	b := bookingID("b-conflict")
	a, aRef := rawEvent(b, "a")
	next, nextRef := rawEvent(b, "next")
	_, err := f.Store.Commit(ctxFor(t), ledger.Commit{
		Appends: []ledger.Append{{Stream: b.Stream(), Expected: eventlog.NoStream(), Events: []eventlog.EventData{a}}},
		Receipt: ledger.Receipt{Provider: "test", ReceivedAt: t0, DeliveryID: "first", Outcome: ledger.OutcomeAccepted, Events: []ledger.EventRef{aRef}},
	})
	require.NoError(t, err)
	_, err = f.Store.Commit(ctxFor(t), ledger.Commit{
		Appends: []ledger.Append{{Stream: b.Stream(), Expected: eventlog.Exact(0), Events: []eventlog.EventData{next}}},
		Receipt: ledger.Receipt{Provider: "test", ReceivedAt: t0, DeliveryID: "stale", Outcome: ledger.OutcomeAccepted, Events: []ledger.EventRef{nextRef}},
	})
	require.ErrorIs(t, err, eventlog.ErrVersionConflict, "the ledger reloads and decides again on this error")
	assert.Equal(t, []ledger.Outcome{ledger.OutcomeAccepted}, outcomes(t, f, b), "no receipt for a commit that did not happen")
	assert.Equal(t, []eventlog.EventID{a.ID}, ids(stream(t, f, b)))
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

// testTwoServicesDecideOneBookingRight: a service that has not seen a booking another one recorded
// (another serve process sharing the store, or one restarted) decides it against what is stored:
// its cancel is appended after the create, its copy of the create is a duplicate, and a create
// arriving after the other's cancel is a finding.
func testTwoServicesDecideOneBookingRight(t *testing.T, f Fixture) {
	b := bookingID("b-two-services")
	create := scheduled(b, "created", t0)
	cancel := canceled(b, "canceled", t0)
	res, err := service(f).Record(ctxFor(t), delivery("d-create", create))
	require.NoError(t, err)
	require.Equal(t, ledger.OutcomeAccepted, res.Outcome)

	res, err = service(f).Record(ctxFor(t), delivery("d-create", create))
	require.NoError(t, err)
	assert.Equal(t, ledger.OutcomeDuplicate, res.Outcome, "a copy through a service that never saw the booking")
	assert.Zero(t, res.Appended)

	res, err = service(f).Record(ctxFor(t), delivery("d-cancel", cancel))
	require.NoError(t, err)
	assert.Equal(t, ledger.OutcomeAccepted, res.Outcome)
	recs := stream(t, f, b)
	require.Len(t, recs, 2)
	assert.Equal(t, []eventlog.EventID{create.ID, cancel.ID}, ids(recs))
	assert.Equal(t, []uint64{1, 2}, []uint64{recs[0].Version, recs[1].Version})
	assert.Equal(t, []ledger.Outcome{ledger.OutcomeAccepted, ledger.OutcomeDuplicate, ledger.OutcomeAccepted}, outcomes(t, f, b))

	late := bookingID("b-two-services-late")
	// The cancel happened before the create (scheduled's provider time is t0 - 1h): canceled is
	// terminal, so the create is kept as a finding.
	_, err = service(f).Record(ctxFor(t), delivery("d-late-cancel", canceled(late, "canceled", t0.Add(-2*time.Hour))))
	require.NoError(t, err)
	res, err = service(f).Record(ctxFor(t), delivery("d-late-create", scheduled(late, "created", t0.Add(time.Hour))))
	require.NoError(t, err)
	assert.Equal(t, ledger.OutcomeAccepted, res.Outcome)
	require.NotNil(t, res.Finding, "the create is decided against the stored cancel, not against an empty stream")
	assert.Len(t, stream(t, f, late), 2)
}

// testConcurrentCopiesThroughTwoServices: copies of one new booking's delivery reach two services at
// once; the event is stored once, one copy is accepted, every copy gets a receipt.
func testConcurrentCopiesThroughTwoServices(t *testing.T, f Fixture) {
	svcs := []*ledger.Service{service(f), service(f)}
	for round := range 3 {
		recordCopiesAtOnce(t, f, svcs, bookingID(fmt.Sprintf("b-two-race-%d", round)), 16)
	}
}

// countingStore counts the stream reads the ledger makes.
type countingStore struct {
	ledger.Store
	mu    sync.Mutex
	reads int
}

func (s *countingStore) ReadStream(ctx context.Context, stream string) ([]eventlog.RecordedEvent, error) {
	s.mu.Lock()
	s.reads++
	s.mu.Unlock()
	return s.Store.ReadStream(ctx, stream)
}

func (s *countingStore) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads
}

// testNewBookingsAreDecidedWithoutARead: with WithUnreadNewStreams a new booking costs no stream read,
// a booking the service saw is read before deciding (no wasted commit), and one another service
// wrote is read after its guess conflicted.
func testNewBookingsAreDecidedWithoutARead(t *testing.T, f Fixture) {
	if !f.UnreadNewStreams {
		t.Skip("the fixture's store reads every stream before deciding")
	}
	cs := &countingStore{Store: f.Store}
	svc := serviceOver(f, cs)
	b := bookingID("b-unread")
	res, err := svc.Record(ctxFor(t), delivery("d-create", scheduled(b, "created", t0)))
	require.NoError(t, err)
	assert.Equal(t, ledger.OutcomeAccepted, res.Outcome)
	assert.Equal(t, 0, cs.count(), "a new booking is decided without reading its stream")

	res, err = svc.Record(ctxFor(t), delivery("d-cancel", canceled(b, "canceled", t0)))
	require.NoError(t, err)
	assert.Equal(t, ledger.OutcomeAccepted, res.Outcome)
	assert.Equal(t, 1, cs.count(), "a booking the service appended to is read before deciding")

	other := bookingID("b-unread-other")
	_, err = service(f).Record(ctxFor(t), delivery("d-other", scheduled(other, "created", t0)))
	require.NoError(t, err)
	res, err = svc.Record(ctxFor(t), delivery("d-other-cancel", canceled(other, "canceled", t0)))
	require.NoError(t, err)
	assert.Equal(t, ledger.OutcomeAccepted, res.Outcome)
	assert.Equal(t, 2, cs.count(), "a wrong guess reads the stream once and decides again")
	assert.Len(t, stream(t, f, other), 2)
	assert.Equal(t, []ledger.Outcome{ledger.OutcomeAccepted, ledger.OutcomeAccepted}, outcomes(t, f, other))
}
