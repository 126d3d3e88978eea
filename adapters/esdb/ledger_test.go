package esdb_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/esdb"
	"bookingledger/adapters/esdb/esdbtest"
	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/domain/ledger"
)

// flakyReceipts is a ReceiptWriter whose next writes can be made to fail.
type flakyReceipts struct {
	mu       sync.Mutex
	failures int
	stored   []ledger.Receipt
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

func TestCommitStoresDuplicateWhenEveryAppendWasDuplicate(t *testing.T) {
	srv := esdbtest.New(t)
	store := openStore(t, srv.ConnString())
	receipts := &flakyReceipts{}
	ls := esdb.NewLedgerStore(store, receipts)
	one, two := bookingStream(t), bookingStream(t)
	a, b := newEvent("test.a.v1"), newEvent("test.b.v1")
	_, err := store.Append(ctxFor(t), one, eventlog.NoStream(), []eventlog.EventData{a})
	require.NoError(t, err)

	cases := []struct {
		name    string
		appends []ledger.Append
		want    ledger.Outcome
	}{
		{"all duplicate", []ledger.Append{{Stream: one, Expected: eventlog.Exact(0), Events: []eventlog.EventData{a}}}, ledger.OutcomeDuplicate},
		{"one new", []ledger.Append{
			{Stream: one, Expected: eventlog.Exact(0), Events: []eventlog.EventData{a}},
			{Stream: two, Expected: eventlog.Exact(0), Events: []eventlog.EventData{b}},
		}, ledger.OutcomeAccepted},
		{"receipt only", nil, ledger.OutcomeAccepted},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := ledger.Receipt{Provider: "standard", DeliveryID: tc.name, Outcome: ledger.OutcomeAccepted}
			res, err := ls.Commit(ctxFor(t), ledger.Commit{Appends: tc.appends, Receipt: r})
			require.NoError(t, err)
			assert.Equal(t, tc.want, res.Outcome)
			assert.Len(t, res.Appends, len(tc.appends))
			got := receipts.all()
			assert.Equal(t, tc.want, got[len(got)-1].Outcome, "the receipt is stored with the outcome reported")
		})
	}
}

func TestCommitPassesVersionConflictsThrough(t *testing.T) {
	srv := esdbtest.New(t)
	store := openStore(t, srv.ConnString())
	receipts := &flakyReceipts{}
	ls := esdb.NewLedgerStore(store, receipts)
	name := bookingStream(t)
	_, err := store.Append(ctxFor(t), name, eventlog.NoStream(), []eventlog.EventData{newEvent("test.a.v1")})
	require.NoError(t, err)
	_, err = ls.Commit(ctxFor(t), ledger.Commit{
		Appends: []ledger.Append{{Stream: name, Expected: eventlog.Exact(0), Events: []eventlog.EventData{newEvent("test.b.v1")}}},
		Receipt: ledger.Receipt{DeliveryID: "d", Outcome: ledger.OutcomeAccepted},
	})
	require.ErrorIs(t, err, eventlog.ErrVersionConflict, "the ledger reloads and decides again on this error")
	assert.Empty(t, receipts.all(), "no receipt for a commit that did not happen")
}

// TestConcurrentDeliveriesThroughTheLedger sends 8 copies each of two deliveries for one booking at
// the same time: each event is stored once, each delivery is accepted once, every copy gets a receipt.
func TestConcurrentDeliveriesThroughTheLedger(t *testing.T) {
	srv := esdbtest.New(t)
	store := openStore(t, srv.ConnString())
	receipts := &flakyReceipts{}
	svc := ledger.NewService(esdb.NewLedgerStore(store, receipts), testCodec{})
	bk := booking.ID("calendly-" + uuid.NewString()[:8])
	first := scheduled(bk, "invitee-1")
	cancel := booking.Event{
		ID: eventlog.EventID(uuid.NewSHA1(uuid.NameSpaceURL, []byte("test:cancel"))), Booking: bk, Provider: "calendly",
		ProviderRef: "cancel", OccurredAt: first.OccurredAt.Add(time.Hour), Payload: booking.Canceled{Reason: "host sick"},
	}
	deliveries := []ledger.Delivery{delivery("create", first), delivery("cancel", cancel)}

	const copies = 8
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		outcomes = map[string]map[ledger.Outcome]int{"create": {}, "cancel": {}}
		start    = make(chan struct{})
	)
	for i := range 2 * copies {
		d := deliveries[i%2]
		wg.Go(func() {
			<-start
			res, err := svc.Record(ctxFor(t), d)
			if err != nil {
				t.Errorf("record %s: %v", d.Receipt.DeliveryID, err)
				return
			}
			mu.Lock()
			outcomes[d.Receipt.DeliveryID][res.Outcome]++
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	for _, id := range []string{"create", "cancel"} {
		assert.Equal(t, map[ledger.Outcome]int{ledger.OutcomeAccepted: 1, ledger.OutcomeDuplicate: copies - 1}, outcomes[id], id)
	}
	assert.Len(t, receipts.all(), 2*copies)
	recs, err := store.ReadStream(ctxFor(t), bk.Stream())
	require.NoError(t, err)
	assert.ElementsMatch(t, []eventlog.EventID{first.ID, cancel.ID}, ids(recs))
}
