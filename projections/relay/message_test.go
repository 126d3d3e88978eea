package relay_test

import (
	"encoding/json"
	"testing"
	"time"

	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/domain/resource"
	"bookingledger/projections/relay"
)

func TestBookingMessageIsTheEventWithTheStateAfterIt(t *testing.T) {
	at := time.Date(2030, 1, 7, 8, 0, 0, 0, time.UTC)
	start := at.Add(48 * time.Hour)
	stream := booking.ID("calendly-1").Stream()
	events := []booking.Event{
		{ID: eventlog.EventID{1}, Booking: "calendly-1", Provider: "calendly", OccurredAt: at, Payload: booking.Scheduled{Slot: booking.Slot{Meeting: "m",
			Resources: []string{"host-1"}, Start: start, End: start.Add(time.Hour)}}},
		{ID: eventlog.EventID{2}, Booking: "calendly-1", Provider: "calendly", OccurredAt: at.Add(time.Hour), Payload: booking.Canceled{Reason: "ill"}},
	}
	recs := []eventlog.RecordedEvent{
		{StreamID: stream, Version: 1, Type: "booking.scheduled.v1", RecordedAt: at.Add(time.Minute), Data: []byte(`{"a":1}`)},
		{StreamID: stream, Version: 2, Type: "booking.canceled.v1", RecordedAt: at.Add(time.Hour + time.Minute), Data: []byte(`{"b":2}`)},
	}
	m := relay.BookingMessage(recs[:1], events[:1])
	if m.Type != "booking.scheduled.v1" || m.Data.Version != 1 || m.Data.State.Status != "active" || m.Data.State.Slot == nil {
		t.Fatalf("first message: %+v", m)
	}
	m = relay.BookingMessage(recs, events)
	if m.Type != "booking.canceled.v1" || m.Data.Version != 2 || m.Data.Booking != "calendly-1" || m.Data.State.Status != "canceled" ||
		m.Data.State.CancelReason != "ill" || string(m.Data.Event.Payload) != `{"b":2}` || !m.Timestamp.Equal(recs[1].RecordedAt) {
		t.Fatalf("second message: %+v", m)
	}
	body, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var back relay.Message
	if err := json.Unmarshal(body, &back); err != nil || back.Data.State.Status != "canceled" || back.Data.Links != nil {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
}

func TestLinkMessageCarriesTheLinksAfterItAsState(t *testing.T) {
	at := time.Date(2030, 1, 7, 8, 0, 0, 0, time.UTC)
	events := []resource.Event{{Type: resource.TypeLinked, Name: "room-a", Resources: []string{"calcom:1", "calcom:2"}, At: at},
		{Type: resource.TypeUnlinked, Name: "room-a", Resources: []string{"calcom:2"}, At: at.Add(time.Hour)}}
	recs := []eventlog.RecordedEvent{{StreamID: resource.Stream, Version: 1, Type: string(resource.TypeLinked), Data: []byte(`{}`)},
		{StreamID: resource.Stream, Version: 2, Type: string(resource.TypeUnlinked), Data: []byte(`{}`)}}
	m := relay.LinkMessage(recs, events)
	body, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var wire struct {
		Data struct {
			State map[string]any `json:"state"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &wire); err != nil {
		t.Fatal(err)
	}
	links, _ := wire.Data.State["links"].(map[string]any)
	if len(links) != 1 || links["calcom:1"] != "room-a" || wire.Data.State["events"] != float64(2) {
		t.Fatalf("state on the wire: %s", body)
	}
	var back relay.Message
	if err := json.Unmarshal(body, &back); err != nil || back.Data.Links == nil || back.Data.Links.Events != 2 {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
}

func TestPlanBuilderCountsByTypeWithFirstLastRateAndDuration(t *testing.T) {
	at := time.Date(2030, 1, 7, 0, 0, 0, 0, time.UTC)
	var b relay.PlanBuilder
	b.Add(relay.ReplayItem{DeliveryID: 2, Type: "booking.canceled.v1", RecordedAt: at.Add(time.Hour)})
	b.Add(relay.ReplayItem{DeliveryID: 1, Type: "booking.scheduled.v1", RecordedAt: at})
	b.Add(relay.ReplayItem{DeliveryID: 3, Type: "booking.canceled.v1", RecordedAt: at.Add(2 * time.Hour)})
	p := b.Plan(2)
	if p.Total != 3 || b.Total() != 3 || len(p.ByType) != 2 || p.ByType[0] != (relay.TypeCount{Type: "booking.canceled.v1", Count: 2}) {
		t.Fatalf("plan: %+v", p)
	}
	if p.First.DeliveryID != 1 || p.Last.DeliveryID != 3 {
		t.Fatalf("first %d, last %d; want 1 and 3", p.First.DeliveryID, p.Last.DeliveryID)
	}
	if p.Rate != 2 || p.Duration != 1500*time.Millisecond {
		t.Fatalf("rate %v, duration %v; want 2 and 1.5s", p.Rate, p.Duration)
	}
	if relay.Duration(0, 5) != 0 || relay.Duration(10, 0) != 0 {
		t.Fatal("Duration of nothing, or without a rate, is 0")
	}
}
