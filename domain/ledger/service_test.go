package ledger_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/eventcodec"
	"bookingledger/adapters/memstore"
	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/domain/ledger"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// recorder keeps every commit the service makes.
type recorder struct {
	ledger.Store
	commits []ledger.Commit
}

func (r *recorder) Commit(ctx context.Context, c ledger.Commit) (ledger.CommitResult, error) {
	r.commits = append(r.commits, c)
	return r.Store.Commit(ctx, c)
}

// conflicting answers every commit with appends as a version conflict, and counts them.
type conflicting struct {
	ledger.Store
	commits int
}

func (c *conflicting) Commit(ctx context.Context, cm ledger.Commit) (ledger.CommitResult, error) {
	if len(cm.Appends) > 0 {
		c.commits++
		return ledger.CommitResult{}, eventlog.ErrVersionConflict
	}
	return c.Store.Commit(ctx, cm)
}

func newService(s ledger.Store) *ledger.Service { return ledger.NewService(s, eventcodec.JSON{}) }

func event(b booking.ID, id byte, at time.Duration, p booking.Payload) booking.Event {
	return booking.Event{ID: eventlog.EventID{id, b[0]}, Booking: b, Provider: "test", OccurredAt: t0.Add(at), Payload: p}
}

func scheduled(b booking.ID, id byte, at time.Duration) booking.Event {
	return event(b, id, at, booking.Scheduled{Slot: booking.Slot{Meeting: "m", Resources: []string{"h"}, Start: t0.Add(24 * time.Hour), End: t0.Add(25 * time.Hour)}})
}

func deliver(id string, events ...booking.Event) ledger.Delivery {
	return ledger.Delivery{Receipt: ledger.Receipt{Provider: "test", DeliveryID: id, ReceivedAt: t0}, Events: events}
}

func record(t *testing.T, svc *ledger.Service, d ledger.Delivery) ledger.Result {
	t.Helper()
	res, err := svc.Record(context.Background(), d)
	require.NoError(t, err)
	return res
}

// Result.Finding is the refusal a delivery newly caused: set for an accepted late create, not for its
// redelivery (nothing appended), not for a later delivery that applies although an older finding
// stands, and set for a stored event whose refusal changes reason (superseded → after the cancel).
// A delivery to two streams reports its first stream's.
func TestRecordReportsOnlyTheFindingItCaused(t *testing.T) {
	svc := newService(memstore.New())
	record(t, svc, deliver("cancel", event("a", 1, 0, booking.Canceled{})))
	late := scheduled("a", 2, time.Minute)
	res := record(t, svc, deliver("late", late))
	assert.Equal(t, ledger.OutcomeAccepted, res.Outcome)
	require.NotNil(t, res.Finding)
	assert.Equal(t, late.ID, res.Finding.Event)
	assert.Equal(t, booking.FindingAfterTerminal, res.Finding.Code)

	res = record(t, svc, deliver("late", late))
	assert.Equal(t, ledger.OutcomeDuplicate, res.Outcome)
	assert.Nil(t, res.Finding, "a redelivery caused nothing")

	res = record(t, svc, deliver("paid", event("a", 3, 2*time.Minute, booking.PaymentSucceeded{Refs: []string{"stripe:pi_1"}})))
	assert.Equal(t, ledger.OutcomeAccepted, res.Outcome)
	assert.Nil(t, res.Finding, "the late create's finding is not this delivery's")

	request := event("b", 2, 2*time.Minute, booking.Requested{Slot: booking.Slot{Meeting: "m", Resources: []string{"h"}, Start: t0.Add(time.Hour), End: t0.Add(2 * time.Hour)}})
	record(t, svc, deliver("b1", scheduled("b", 1, 0), request))
	res = record(t, svc, deliver("b2", event("b", 3, time.Minute, booking.Canceled{})))
	require.NotNil(t, res.Finding)
	assert.Equal(t, request.ID, res.Finding.Event)
	assert.Equal(t, booking.FindingAfterTerminal, res.Finding.Code)

	record(t, svc, deliver("c", event("c", 1, 0, booking.Canceled{})))
	record(t, svc, deliver("d", event("d", 1, 0, booking.Canceled{})))
	lateC, lateD := scheduled("c", 2, time.Minute), scheduled("d", 2, time.Minute)
	res = record(t, svc, deliver("cd", lateC, lateD))
	require.NotNil(t, res.Finding)
	assert.Equal(t, lateC.ID, res.Finding.Event)
}

// A delivery's personal data is committed with the events it appends, never with a redelivery; its
// free text leaves the event, bounded and storable.
func TestRecordKeepsPersonalDataOnlyWithAppends(t *testing.T) {
	rec := &recorder{Store: memstore.New()}
	svc := newService(rec)
	reason := "ill\x00" + strings.Repeat("é", ledger.MaxFreeTextBytes)
	d := deliver("c1", event("a", 1, 0, booking.Canceled{Reason: reason, CanceledBy: "invitee"}))
	d.Contacts = []ledger.Contact{{Booking: "a", Email: "p@example.com"}}
	record(t, svc, d)
	record(t, svc, d)
	require.Len(t, rec.commits, 2)
	first := rec.commits[0]
	assert.Equal(t, d.Contacts, first.Personal.Contacts)
	require.Len(t, first.Personal.FreeTexts, 1)
	text := first.Personal.FreeTexts[0].Text
	assert.True(t, ledger.Storable(text))
	assert.LessOrEqual(t, len(text), ledger.MaxFreeTextBytes+len("…"))
	assert.True(t, strings.HasPrefix(text, "ill "))
	assert.True(t, rec.commits[1].Personal.IsZero(), "a redelivery saves no personal data")
}

// The conflict loop makes exactly the attempts it is bounded to; a guess that a stream is new costs
// none of them.
func TestRecordAttemptBound(t *testing.T) {
	c := &conflicting{Store: memstore.New()}
	_, err := newService(c).WithMaxAttempts(3).Record(context.Background(), deliver("d", scheduled("a", 1, 0)))
	require.ErrorIs(t, err, ledger.ErrContention)
	assert.Equal(t, 3, c.commits)

	store := memstore.New()
	record(t, newService(store), deliver("first", scheduled("a", 1, 0)))
	fresh := newService(store).WithUnreadNewStreams(16).WithMaxAttempts(1)
	res := record(t, fresh, deliver("second", event("a", 2, time.Minute, booking.NoShowMarked{})))
	assert.Equal(t, ledger.OutcomeAccepted, res.Outcome)
	assert.Equal(t, 1, res.Appended)
}

// A delivery carrying one event twice appends it once; a service that has not seen a stream still
// reads it before appending a delivery that brings it more than one event (part of which may be
// stored already).
func TestRecordAppendsEachEventOnce(t *testing.T) {
	store := memstore.New()
	create := scheduled("a", 1, 0)
	res := record(t, newService(store), deliver("twice", create, create))
	assert.Equal(t, 1, res.Appended)
	recs, err := store.ReadStream(context.Background(), booking.ID("a").Stream())
	require.NoError(t, err)
	assert.Len(t, recs, 1)

	fresh := newService(store).WithUnreadNewStreams(16)
	res = record(t, fresh, deliver("both", create, event("a", 2, time.Minute, booking.NoShowMarked{})))
	assert.Equal(t, ledger.OutcomeAccepted, res.Outcome)
	assert.Equal(t, 1, res.Appended)
}

// A rejected delivery's receipt keeps neither body nor events; an unmapped one says why.
func TestRejectAndIgnoreReceipts(t *testing.T) {
	rec := &recorder{Store: memstore.New()}
	svc := newService(rec)
	r := ledger.Receipt{Provider: "test", DeliveryID: "x", Body: []byte("secret body"), Events: []ledger.EventRef{{Booking: "a"}}}
	require.NoError(t, svc.Reject(context.Background(), r, "bad signature"))
	require.Len(t, rec.commits, 1)
	got := rec.commits[0].Receipt
	assert.Equal(t, ledger.OutcomeRejected, got.Outcome)
	assert.Equal(t, "bad signature", got.Reason)
	assert.Nil(t, got.Body)
	assert.Nil(t, got.Events)
	assert.Empty(t, rec.commits[0].Appends)

	res := record(t, svc, ledger.Delivery{Receipt: ledger.Receipt{Provider: "test", DeliveryID: "y"}})
	assert.Equal(t, ledger.OutcomeIgnored, res.Outcome)
	assert.Equal(t, "event type not mapped", res.Reason)
}

// staleRead hides a stream's last event from the service, as a read that raced a concurrent copy of
// the delivery does.
type staleRead struct{ ledger.Store }

func (s staleRead) ReadStream(ctx context.Context, stream string) ([]eventlog.RecordedEvent, error) {
	recs, err := s.Store.ReadStream(ctx, stream)
	if len(recs) > 0 {
		recs = recs[:len(recs)-1]
	}
	return recs, err
}

// A late create whose commit the store finds stored already (a concurrent copy won) is a duplicate,
// and the finding is the winner's to report, not this copy's.
func TestRecordDuplicateAfterARaceReportsNoFinding(t *testing.T) {
	store := memstore.New()
	record(t, newService(store), deliver("cancel", event("a", 1, 0, booking.Canceled{})))
	late := scheduled("a", 2, time.Minute)
	require.NotNil(t, record(t, newService(store), deliver("late", late)).Finding)
	res := record(t, newService(staleRead{store}), deliver("late", late))
	assert.Equal(t, ledger.OutcomeDuplicate, res.Outcome)
	assert.Nil(t, res.Finding)
}

// otherBooking decodes every stored event as one of another booking.
type otherBooking struct{ eventcodec.JSON }

func (c otherBooking) Decode(r eventlog.RecordedEvent) (booking.Event, error) {
	e, err := c.JSON.Decode(r)
	e.Booking = "someone-else"
	return e, err
}

// An event that its stream's stored events say belongs to another booking is quarantined with its
// receipt, not retried.
func TestRecordQuarantinesAnEventOfAnotherBooking(t *testing.T) {
	store := memstore.New()
	record(t, newService(store), deliver("first", scheduled("a", 1, 0)))
	res := record(t, ledger.NewService(store, otherBooking{}), deliver("second", event("a", 2, time.Minute, booking.NoShowMarked{})))
	assert.Equal(t, ledger.OutcomeQuarantined, res.Outcome)
	assert.Contains(t, res.Reason, booking.ErrWrongBooking.Error())
}

// An event the domain refuses (here: no provider) is quarantined with its receipt, never retried.
func TestRecordQuarantinesAnInvalidEvent(t *testing.T) {
	e := scheduled("a", 1, 0)
	e.Provider = ""
	res := record(t, newService(memstore.New()), deliver("bad", e))
	assert.Equal(t, ledger.OutcomeQuarantined, res.Outcome)
	assert.Contains(t, res.Reason, booking.ErrInvalidEvent.Error())
}

// A fact recorded under one provider identity is not appended again under another that names the
// same fact (Event.Fact): Cal.com's webhook identity holds a per-send stamp its API cannot know. Either
// path may come first; a redelivered fact of another delivery stamp is one fact too.
func TestRecordAppendsAFactOnceWhateverItsID(t *testing.T) {
	withRef := func(id byte, ref, fact string) booking.Event {
		e := scheduled("calcom-u1", id, 0)
		e.Provider, e.ProviderRef, e.Fact = "calcom", ref, fact
		return e
	}
	hook := withRef(1, "BOOKING_CREATED u1 2030-01-01T10:00:00.000Z", "BOOKING_CREATED u1")
	api := withRef(2, "BOOKING_CREATED u1 api", "BOOKING_CREATED u1")
	other := withRef(3, "BOOKING_CREATED u10 api", "BOOKING_CREATED u10") // a prefix, not the fact
	other.Booking = "calcom-u1"
	for _, order := range [][]booking.Event{{hook, api}, {api, hook}} {
		svc := newService(memstore.New())
		first := record(t, svc, deliver("d1", order[0]))
		assert.Equal(t, ledger.OutcomeAccepted, first.Outcome)
		missing, err := svc.Unrecorded(context.Background(), []booking.Event{order[1], other})
		require.NoError(t, err)
		assert.Equal(t, []booking.Event{other}, missing, "a dry run sees the fact as recorded")
		second := record(t, svc, deliver("d2", order[1]))
		assert.Equal(t, ledger.OutcomeDuplicate, second.Outcome)
		assert.Zero(t, second.Appended)
	}
	svc := newService(memstore.New())
	record(t, svc, deliver("d1", hook))
	assert.Equal(t, 1, record(t, svc, deliver("d3", other)).Appended, "another fact whose name begins alike is appended")
	noFact := api
	noFact.Fact = ""
	assert.Equal(t, 1, record(t, svc, deliver("d4", noFact)).Appended, "without Fact only the ID decides")
}
