package relay_test

import (
	"errors"
	"testing"
	"time"

	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/domain/resource"
	"bookingledger/projections/relay"
)

// fakeLog is a log of two bookings' streams and the link stream, with a decoder of its records (by
// stream and version) that counts the reads.
type fakeLog struct {
	recs     map[string][]eventlog.RecordedEvent
	bookings map[string][]booking.Event
	links    []resource.Event
	reads    map[string]int
}

func newFakeLog(t0 time.Time) *fakeLog {
	a, b := booking.ID("calcom-a"), booking.ID("acuity-b")
	l := &fakeLog{recs: map[string][]eventlog.RecordedEvent{}, reads: map[string]int{}, bookings: map[string][]booking.Event{
		a.Stream(): {{ID: eventlog.EventID{1}, Booking: a, Provider: "calcom", OccurredAt: t0, Payload: booking.Scheduled{Slot: booking.Slot{Meeting: "m",
			Resources: []string{"calcom:42"}, Start: t0.Add(time.Hour), End: t0.Add(2 * time.Hour)}}},
			{ID: eventlog.EventID{2}, Booking: a, Provider: "calcom", OccurredAt: t0.Add(time.Minute), Payload: booking.Canceled{Reason: "ill"}}},
		b.Stream(): {{ID: eventlog.EventID{3}, Booking: b, Provider: "acuity", OccurredAt: t0, Payload: booking.Scheduled{Slot: booking.Slot{Meeting: "n",
			Resources: []string{"acuity:7"}, Start: t0.Add(time.Hour), End: t0.Add(2 * time.Hour)}}}},
	}, links: []resource.Event{{Type: resource.TypeLinked, Name: "room-a", Resources: []string{"calcom:42"}}}}
	types := map[string][]string{a.Stream(): {"booking.scheduled.v1", "booking.canceled.v1"}, b.Stream(): {"booking.scheduled.v1"},
		resource.Stream: {"resource.linked.v1"}}
	for stream, ts := range types {
		for i, typ := range ts {
			l.recs[stream] = append(l.recs[stream], eventlog.RecordedEvent{ID: eventlog.EventID{byte(len(stream)), byte(i)}, StreamID: stream,
				Version: uint64(i + 1), Type: typ, RecordedAt: t0.Add(time.Duration(i) * time.Minute), Data: []byte(`{}`)})
		}
	}
	return l
}

func (l *fakeLog) read(stream string) ([]eventlog.RecordedEvent, error) {
	l.reads[stream]++
	if _, ok := l.recs[stream]; !ok {
		return nil, errors.New("no such stream")
	}
	return l.recs[stream], nil
}

func (l *fakeLog) Decode(r eventlog.RecordedEvent) (booking.Event, error) {
	return l.bookings[r.StreamID][r.Version-1], nil
}

func (l *fakeLog) DecodeResource(r eventlog.RecordedEvent) (resource.Event, error) {
	return l.links[r.Version-1], nil
}

// A subject is the booking's state after the event, with the links as they are now, or a link
// event's resources; a stream is read once per batch, and an error matches nothing and is kept.
func TestSubjectsFoldEachStreamOnceUpToTheEvent(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	l := newFakeLog(t0)
	subs := relay.NewSubjects(l.read, l)
	a := booking.ID("calcom-a").Stream()
	if s := subs.Of(a, 1); !s.Booking || s.Provider != "calcom" || s.Status != string(booking.StatusActive) {
		t.Fatalf("after the first event: %+v", s)
	}
	room, _ := relay.ParseFilter("resource=room-a,status=canceled")
	if s := subs.Of(a, 2); s.Status != string(booking.StatusCanceled) || !room.Match(s) {
		t.Fatalf("after the cancel: %+v, want canceled and in room-a", s)
	}
	if l.reads[a] != 1 || l.reads[resource.Stream] != 1 {
		t.Fatalf("reads %v: want each stream once", l.reads)
	}
	if s := subs.Of(resource.Stream, 1); len(s.Names) != 1 || s.Names[0] != "room-a" {
		t.Fatalf("link subject: %+v", s)
	}
	if subs.Err() != nil {
		t.Fatalf("Err() = %v", subs.Err())
	}
	if s := subs.Of(a, 3); s.Booking || subs.Err() == nil {
		t.Fatalf("a version past the stream: %+v, %v; want no subject and an error", s, subs.Err())
	}
	if none := relay.NewSubjects(nil, nil); none.Of(a, 1).Booking || none.Err() == nil {
		t.Fatal("without a log: want an error")
	}
}

// Plan gives each relayable event to the endpoints that take it, paused for a disabled one; a
// replay's backfill takes what its window and the endpoint's rule now select, pending.
func TestPlanAndBackfills(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	l := newFakeLog(t0)
	canceled, _ := relay.ParseFilter("status=canceled")
	eps := []relay.Endpoint{{ID: 1, Created: t0, Rules: []relay.Rule{{Since: t0, Filter: canceled}}},
		{ID: 2, Created: t0, Disabled: true}}
	a := booking.ID("calcom-a").Stream()
	events := append(append([]eventlog.RecordedEvent{}, l.recs[a]...), l.recs[resource.Stream]...)
	events = append(events, eventlog.RecordedEvent{StreamID: "elsewhere", Version: 1, Type: "x", RecordedAt: t0})
	subs := relay.NewSubjects(l.read, l)
	var got []string
	for _, p := range relay.Plan(eps, events, subs.Of) {
		got = append(got, p.Event.Type+"->"+string(rune('0'+p.Endpoint))+":"+p.State+":"+p.Booking)
	}
	want := []string{"booking.scheduled.v1->2:paused:calcom-a", "booking.canceled.v1->1:pending:calcom-a",
		"booking.canceled.v1->2:paused:calcom-a", "resource.linked.v1->2:paused:"}
	if len(got) != len(want) {
		t.Fatalf("Plan = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Plan = %v, want %v", got, want)
		}
	}
	q := relay.ReplayQuery{EndpointID: 1, From: t0, To: t0.Add(time.Minute), Types: []string{"booking.*"}}
	bf := relay.Backfills(events, 1, relay.Rule{}, q, subs.Of)
	if len(bf) != 1 || bf[0].Event.Type != "booking.scheduled.v1" || bf[0].State != relay.StatePending || bf[0].Endpoint != 1 {
		t.Fatalf("Backfills = %+v, want the scheduled event alone (the cancel is after the window)", bf)
	}
	if bf := relay.Backfills(events, 1, relay.Rule{Filter: canceled}, relay.ReplayQuery{From: t0, To: t0.Add(time.Hour)}, subs.Of); len(bf) != 1 ||
		bf[0].Event.Type != "booking.canceled.v1" {
		t.Fatalf("Backfills under the rule's filter = %+v, want the cancel alone", bf)
	}
}

// StreamMessage folds a stream up to the version: the booking's or the links' state after it.
func TestStreamMessageIsTheFoldUpToTheVersion(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	l := newFakeLog(t0)
	a := booking.ID("calcom-a").Stream()
	m, rec, err := relay.StreamMessage(l.recs[a], a, 1, l)
	if err != nil || m.Data.Version != 1 || m.Data.State.Status != "active" || rec.Version != 1 {
		t.Fatalf("version 1: %+v, %v", m, err)
	}
	if m, _, err = relay.StreamMessage(l.recs[resource.Stream], resource.Stream, 1, l); err != nil || m.Data.Links == nil ||
		m.Data.Links.Links["calcom:42"] != "room-a" {
		t.Fatalf("link message: %+v, %v", m, err)
	}
	if _, _, err := relay.StreamMessage(l.recs[a], a, 3, l); err == nil {
		t.Fatal("a version past the stream: want an error")
	}
}
