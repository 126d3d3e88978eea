package history_test

import (
	"time"

	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/projections/calendar"
)

// The calendar tests' builders (projections/calendar/calendar_test.go, component_test.go), for the
// histories built here.

var t0 = time.Date(2027, 3, 15, 9, 0, 0, 0, time.UTC)

// at is a slot on host h from startMin to endMin minutes after t0, of meeting m.
func at(m string, startMin, endMin int) booking.Slot {
	return booking.Slot{Meeting: m, Resources: []string{"h"}, Start: t0.Add(time.Duration(startMin) * time.Minute), End: t0.Add(time.Duration(endMin) * time.Minute)}
}

func input(events ...booking.Event) calendar.BookingInput {
	return calendar.BookingInput{Events: events, StreamVersion: uint64(len(events))}
}

func ev(b booking.ID, id byte, minutes int, p booking.Payload) booking.Event {
	return booking.Event{ID: eventlog.EventID{id, 1}, Booking: b, Provider: "calendly", OccurredAt: t0.Add(time.Duration(minutes) * time.Minute), Payload: p}
}
