package esdb_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/esdb"
	"bookingledger/adapters/esdb/esdbtest"
	"bookingledger/adapters/ledgertest"
	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/domain/ledger"
)

// flakyReceipts is a ReceiptWriter whose next writes can be made to fail.
type flakyReceipts struct {
	mu               sync.Mutex
	failures         int // receipts
	personalFailures int
	stored           []ledger.Receipt
	personal         []ledger.Personal
}

func (f *flakyReceipts) SavePersonal(_ context.Context, p ledger.Personal) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.personalFailures > 0 {
		f.personalFailures--
		return errors.New("personal data database unreachable")
	}
	if !p.IsZero() {
		f.personal = append(f.personal, p)
	}
	return nil
}

func (f *flakyReceipts) InsertReceipt(_ context.Context, r ledger.Receipt) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failures > 0 {
		f.failures--
		return 0, errors.New("receipt database unreachable")
	}
	f.stored = append(f.stored, r)
	return int64(len(f.stored)), nil
}

func (f *flakyReceipts) all() []ledger.Receipt {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]ledger.Receipt(nil), f.stored...)
}

// testCodec is a minimal wire format for the two payloads these tests use.
type testCodec struct{}

type testWire struct {
	Booking    string    `json:"booking"`
	Provider   string    `json:"provider"`
	Ref        string    `json:"ref"`
	OccurredAt time.Time `json:"occurred_at"`
	Meeting    string    `json:"meeting,omitempty"`
	Resources  []string  `json:"resources,omitempty"`
	Start      time.Time `json:"start,omitzero"`
	End        time.Time `json:"end,omitzero"`
	Reason     string    `json:"reason,omitempty"`
}

func (testCodec) Encode(e booking.Event) (eventlog.EventData, error) {
	w := testWire{Booking: string(e.Booking), Provider: e.Provider, Ref: e.ProviderRef, OccurredAt: e.OccurredAt}
	switch p := e.Payload.(type) {
	case booking.Scheduled:
		w.Meeting, w.Resources, w.Start, w.End = p.Slot.Meeting, p.Slot.Resources, p.Slot.Start, p.Slot.End
	case booking.Canceled:
		w.Reason = p.Reason
	default:
		return eventlog.EventData{}, fmt.Errorf("test codec cannot encode %T", p)
	}
	data, err := json.Marshal(w)
	return eventlog.EventData{ID: e.ID, Type: string(e.Type()), Data: data}, err
}

func (testCodec) Decode(r eventlog.RecordedEvent) (booking.Event, error) {
	var w testWire
	if err := json.Unmarshal(r.Data, &w); err != nil {
		return booking.Event{}, err
	}
	e := booking.Event{ID: r.ID, Booking: booking.ID(w.Booking), Provider: w.Provider, ProviderRef: w.Ref, OccurredAt: w.OccurredAt}
	switch booking.EventType(r.Type) {
	case booking.TypeScheduled:
		e.Payload = booking.Scheduled{Slot: booking.Slot{Meeting: w.Meeting, Resources: w.Resources, Start: w.Start, End: w.End}, Capacity: 1}
	case booking.TypeCanceled:
		e.Payload = booking.Canceled{Reason: w.Reason}
	default:
		return booking.Event{}, fmt.Errorf("test codec cannot decode %s", r.Type)
	}
	return e, nil
}

func scheduled(id booking.ID, ref string) booking.Event {
	start := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	return booking.Event{
		ID:          eventlog.EventID(uuid.NewSHA1(uuid.NameSpaceURL, []byte("test:"+ref))),
		Booking:     id,
		Provider:    "calendly",
		ProviderRef: ref,
		OccurredAt:  start.Add(-48 * time.Hour),
		Payload: booking.Scheduled{Capacity: 1, Slot: booking.Slot{
			Meeting: "meeting-" + ref, Resources: []string{"host-1"}, Start: start, End: start.Add(30 * time.Minute),
		}},
	}
}

func delivery(id string, events ...booking.Event) ledger.Delivery {
	return ledger.Delivery{
		Receipt: ledger.Receipt{Provider: "calendly", ReceivedAt: time.Now().UTC(), DeliveryID: id, Body: []byte(`{}`)},
		Events:  events,
	}
}

// TestReceiptFailureAfterAppendHealsOnRetry is the append-then-receipt seam: the event reaches
// EventStoreDB, the receipt write fails, Commit fails (the HTTP layer answers 503), and the provider's
// retry finds the event by its ID and records a duplicate receipt; the event is stored once.
func TestReceiptFailureAfterAppendHealsOnRetry(t *testing.T) {
	srv := esdbtest.New(t)
	store := openStore(t, srv.ConnString())
	receipts := &flakyReceipts{failures: 1}
	svc := ledger.NewService(esdb.NewLedgerStore(store, receipts), testCodec{})
	bk := booking.ID("calendly-" + uuid.NewString()[:8])
	d := delivery("delivery-1", scheduled(bk, "invitee-1"))

	_, err := svc.Record(ctxFor(t), d)
	require.Error(t, err, "the delivery must not be acknowledged without its receipt")
	assert.ErrorIs(t, err, eventlog.ErrUnavailable, "so that it is answered 503 and retried")
	assert.Empty(t, receipts.all())
	recs, err := store.ReadStream(ctxFor(t), bk.Stream())
	require.NoError(t, err)
	require.Len(t, recs, 1, "the append happened before the receipt failed")

	res, err := svc.Record(ctxFor(t), d)
	require.NoError(t, err)
	assert.Equal(t, ledger.OutcomeDuplicate, res.Outcome)
	assert.Zero(t, res.Appended)
	got := receipts.all()
	require.Len(t, got, 1)
	assert.Equal(t, ledger.OutcomeDuplicate, got[0].Outcome)
	assert.Equal(t, "delivery-1", got[0].DeliveryID)
	recs, err = store.ReadStream(ctxFor(t), bk.Stream())
	require.NoError(t, err)
	assert.Equal(t, []eventlog.EventID{d.Events[0].ID}, ids(recs), "the event is stored exactly once")
}

// TestCommitFailuresBesideTheEventsAreUnavailable: the writes that go to PostgreSQL beside the events
// fail as unavailable, so that the delivery is answered 503 and retried: the personal data, before
// anything is appended, and a receipt that has no events before it.
func TestCommitFailuresBesideTheEventsAreUnavailable(t *testing.T) {
	srv := esdbtest.New(t)
	store := openStore(t, srv.ConnString())
	receipts := &flakyReceipts{personalFailures: 1}
	ls := esdb.NewLedgerStore(store, receipts)
	bk := booking.ID("calendly-" + uuid.NewString()[:8])
	ev := newEvent(string(booking.TypeScheduled))
	_, err := ls.Commit(ctxFor(t), ledger.Commit{
		Receipt:  ledger.Receipt{Provider: "calendly", DeliveryID: "delivery-1", Outcome: ledger.OutcomeAccepted},
		Appends:  []ledger.Append{{Stream: bk.Stream(), Expected: eventlog.NoStream(), Events: []eventlog.EventData{ev}}},
		Personal: ledger.Personal{Contacts: []ledger.Contact{{Booking: bk, Email: "ada@example.com"}}},
	})
	require.ErrorIs(t, err, eventlog.ErrUnavailable)
	assert.Zero(t, srv.StreamLength(bk.Stream()), "nothing appended before the personal data is saved")
	assert.Empty(t, receipts.all())

	receipts.failures = 1
	_, err = ls.Commit(ctxFor(t), ledger.Commit{Receipt: ledger.Receipt{Provider: "calendly", DeliveryID: "delivery-2", Outcome: ledger.OutcomeRejected}})
	require.ErrorIs(t, err, eventlog.ErrUnavailable)
	assert.NotContains(t, err.Error(), "events appended", "a receipt alone says so")
}

// TestReceiptIsDuplicateOnlyWhenEveryAppendWas: a delivery over two streams whose appends are one new,
// one a re-append (either order) is accepted; one whose appends are both re-appends is a duplicate.
func TestReceiptIsDuplicateOnlyWhenEveryAppendWas(t *testing.T) {
	srv := esdbtest.New(t)
	store := openStore(t, srv.ConnString())
	receipts := &flakyReceipts{}
	ls := esdb.NewLedgerStore(store, receipts)
	stored := bookingStream(t)
	old := newEvent("test.a.v1")
	_, err := store.Append(ctxFor(t), stored, eventlog.NoStream(), []eventlog.EventData{old})
	require.NoError(t, err)
	reappend := ledger.Append{Stream: stored, Expected: eventlog.NoStream(), Events: []eventlog.EventData{old}}
	fresh := func() ledger.Append {
		return ledger.Append{Stream: bookingStream(t), Expected: eventlog.NoStream(), Events: []eventlog.EventData{newEvent("test.b.v1")}}
	}
	for _, c := range []struct {
		name    string
		appends []ledger.Append
		want    ledger.Outcome
	}{
		{"new, then stored", []ledger.Append{fresh(), reappend}, ledger.OutcomeAccepted},
		{"stored, then new", []ledger.Append{reappend, fresh()}, ledger.OutcomeAccepted},
		{"both stored", []ledger.Append{reappend, reappend}, ledger.OutcomeDuplicate},
	} {
		res, err := ls.Commit(ctxFor(t), ledger.Commit{Receipt: ledger.Receipt{Provider: "calendly", DeliveryID: c.name, Outcome: ledger.OutcomeAccepted}, Appends: c.appends})
		require.NoError(t, err, c.name)
		assert.Equal(t, c.want, res.Outcome, c.name)
		got := receipts.all()
		assert.Equal(t, c.want, got[len(got)-1].Outcome, c.name)
	}
}

// TestLedgerContract runs the ledger's storage contract over esdb.LedgerStore: events in the
// in-process EventStoreDB test server, receipts in memory.
func TestLedgerContract(t *testing.T) {
	srv := esdbtest.New(t)
	ledgertest.Run(t, func(t *testing.T) ledgertest.Fixture {
		receipts := &flakyReceipts{}
		return ledgertest.Fixture{
			Store: esdb.NewLedgerStore(openStore(t, srv.ConnString()), receipts),
			Receipts: func(_ context.Context, b booking.ID) ([]ledger.Receipt, error) {
				var out []ledger.Receipt
				for _, r := range receipts.all() {
					if slices.ContainsFunc(r.Events, func(e ledger.EventRef) bool { return e.Booking == b }) {
						out = append(out, r)
					}
				}
				return out, nil
			},
		}
	})
}
