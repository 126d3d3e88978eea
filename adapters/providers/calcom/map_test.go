package calcom_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/providers"
	"bookingledger/adapters/providers/calcom"
	"bookingledger/adapters/providers/providertest"
	"bookingledger/domain/booking"
)

const (
	uidA = "u8Jq2aXcK4vNw7Rz3TmB9p" // created, then rescheduled to B
	uidB = "kT3mW9xQ2vRz7NpL5cYb8d"
	uidC = "Hx4pN8qL2tWz6RmK9vJc3a" // requested, then rejected
	uidD = "Zr7vB2nQ5xLm8TkW3pHc6y" // cancelled by the attendee
	host = "calcom-user-1842"
)

func ts(tb testing.TB, s string) time.Time {
	tb.Helper()
	t, err := time.Parse(time.RFC3339Nano, s)
	require.NoError(tb, err)
	return t.UTC()
}

// event is what the mapper makes of identity; a BOOKING_* fact names its fact, "<trigger> <uid>"
// (the identity's first two words, or up to the seat for a seat's event), which the ledger compares
// with stored events so that the API's copy of a fact is not recorded twice.
func event(identity string, id booking.ID, at time.Time, p booking.Payload) booking.Event {
	e := booking.Event{
		ID: providers.EventID("calcom", identity), Booking: id, Provider: "calcom",
		ProviderRef: identity, OccurredAt: at, Payload: p,
	}
	words := strings.Fields(identity)
	switch words[0] {
	case "BOOKING_CREATED", "BOOKING_REQUESTED", "BOOKING_RESCHEDULED", "BOOKING_CANCELLED", "BOOKING_REJECTED":
		n := 2
		if len(words) > 4 && words[2] == "seat" {
			n = 4
		}
		e.Fact = strings.Join(words[:n], " ")
	}
	return e
}

func mapBody(tb testing.TB, body []byte) (providers.Mapped, error) {
	tb.Helper()
	return calcom.New(providers.NewSecrets("s")).Map(context.Background(), nil, body, time.Now())
}

func mapFile(tb testing.TB, name string) (providers.Mapped, error) {
	tb.Helper()
	return mapBody(tb, providertest.ReadFile(tb, name))
}

func TestMapTestdata(t *testing.T) {
	slotA := booking.Slot{Meeting: uidA + "@Cal.com", Resources: []string{host},
		Start: ts(t, "2024-05-21T14:00:00Z"), End: ts(t, "2024-05-21T14:30:00Z")}
	slotB := booking.Slot{Meeting: uidA + "@Cal.com", Resources: []string{host},
		Start: ts(t, "2024-05-23T10:00:00Z"), End: ts(t, "2024-05-23T10:30:00Z")}
	const (
		createdA     = "2024-05-14T09:12:31.482Z"
		rescheduledB = "2024-05-16T17:03:11.905Z"
		requestedC   = "2024-05-30T08:00:02.117Z"
		rejectedC    = "2024-05-30T15:44:09.001Z"
		cancelledD   = "2024-06-03T08:45:01.337Z"
		noShowB      = "2024-05-23T10:20:14.660Z"
		clearedB     = "2024-05-23T10:26:40.208Z"
		bookedB      = "2024-05-16T17:03:11.621Z" // top-level createdAt of the flat MEETING_* bodies
	)
	tests := []struct {
		file string
		want providers.Mapped
	}{
		{"booking_created.json", providers.Mapped{
			DeliveryID: "calcom:BOOKING_CREATED:" + uidA + ":" + createdA,
			Events: []booking.Event{event("BOOKING_CREATED "+uidA+" "+createdA, "calcom-"+uidA, ts(t, createdA),
				booking.Scheduled{Slot: slotA, Capacity: 1, PaymentRefs: []string{"stripe:pi_3PGxZ9LkdIwHu7ix1aB2cD3e"}})},
		}},
		{"booking_rescheduled.json", providers.Mapped{
			DeliveryID: "calcom:BOOKING_RESCHEDULED:" + uidB + ":" + rescheduledB,
			Events: []booking.Event{
				event("BOOKING_RESCHEDULED "+uidB+" "+rescheduledB, "calcom-"+uidB, ts(t, rescheduledB),
					booking.Scheduled{Slot: slotB, Capacity: 1, RescheduledFrom: "calcom-" + uidA}),
				event("BOOKING_RESCHEDULED "+uidB+" "+rescheduledB+" implied-cancel "+uidA, "calcom-"+uidA, ts(t, rescheduledB),
					booking.Canceled{Reason: "rescheduled", CanceledBy: "provider", RescheduledTo: "calcom-" + uidB, Implied: true}),
			},
		}},
		{"booking_requested.json", providers.Mapped{
			DeliveryID: "calcom:BOOKING_REQUESTED:" + uidC + ":" + requestedC,
			Events: []booking.Event{event("BOOKING_REQUESTED "+uidC+" "+requestedC, "calcom-"+uidC, ts(t, requestedC),
				booking.Requested{Capacity: 1, Slot: booking.Slot{Meeting: uidC + "@Cal.com", Resources: []string{host},
					Start: ts(t, "2024-06-04T13:00:00Z"), End: ts(t, "2024-06-04T14:00:00Z")}})},
		}},
		{"booking_rejected.json", providers.Mapped{
			DeliveryID: "calcom:BOOKING_REJECTED:" + uidC + ":" + rejectedC,
			Events: []booking.Event{event("BOOKING_REJECTED "+uidC+" "+rejectedC, "calcom-"+uidC, ts(t, rejectedC),
				booking.Rejected{Reason: "Fully booked that week"})},
		}},
		{"booking_cancelled.json", providers.Mapped{
			DeliveryID: "calcom:BOOKING_CANCELLED:" + uidD + ":" + cancelledD,
			Events: []booking.Event{event("BOOKING_CANCELLED "+uidD+" "+cancelledD, "calcom-"+uidD, ts(t, cancelledD),
				booking.Canceled{Reason: "Something came up", CanceledBy: "invitee"})},
		}},
		{"booking_no_show_updated.json", providers.Mapped{
			DeliveryID: "calcom:BOOKING_NO_SHOW_UPDATED:" + uidB + ":" + noShowB,
			Events: []booking.Event{event("BOOKING_NO_SHOW_UPDATED "+uidB+" "+noShowB, "calcom-"+uidB, ts(t, noShowB),
				booking.NoShowMarked{})},
		}},
		{"booking_no_show_cleared.json", providers.Mapped{
			DeliveryID: "calcom:BOOKING_NO_SHOW_UPDATED:" + uidB + ":" + clearedB,
			Events: []booking.Event{event("BOOKING_NO_SHOW_UPDATED "+uidB+" "+clearedB, "calcom-"+uidB, ts(t, clearedB),
				booking.NoShowCleared{})},
		}},
		{"meeting_started.json", providers.Mapped{
			DeliveryID: "calcom:MEETING_STARTED:" + uidB + ":" + bookedB,
			Events: []booking.Event{event("MEETING_STARTED "+uidB+" "+bookedB, "calcom-"+uidB, ts(t, "2024-05-23T10:00:00Z"),
				booking.MeetingStarted{})},
		}},
		{"meeting_ended.json", providers.Mapped{
			DeliveryID: "calcom:MEETING_ENDED:" + uidB + ":" + bookedB,
			Events: []booking.Event{event("MEETING_ENDED "+uidB+" "+bookedB, "calcom-"+uidB, ts(t, "2024-05-23T10:30:00Z"),
				booking.MeetingEnded{})},
		}},
		{"booking_paid.json", providers.Mapped{
			DeliveryID: "calcom:BOOKING_PAID:" + uidA + ":2024-05-14T09:13:02.530Z",
			Reason:     "calcom trigger BOOKING_PAID not mapped",
		}},
	}
	var files []string
	for _, n := range providertest.Glob(t, "*.json") {
		if n != "signatures.json" && !strings.HasPrefix(n, "seat_") && !strings.HasPrefix(n, "recurring_") {
			files = append(files, n) // seats and series: TestMapSeatsAndSeries
		}
	}
	require.Len(t, tests, len(files), "every testdata payload has an expectation")
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := mapFile(t, tt.file)
			require.NoError(t, err)
			got.Contacts = nil // TestMapExtractsContactsOutsideTheEvents
			assert.Equal(t, tt.want, got)
			providertest.CheckMapped(t, calcom.Name, got, err)
		})
	}
}

func TestReplayIsDuplicateAndEventsAreDistinct(t *testing.T) {
	seen := map[string]string{}
	for _, name := range providertest.Glob(t, "*.json") {
		if name == "signatures.json" {
			continue
		}
		first, err := mapFile(t, name)
		require.NoError(t, err)
		// Cal.com signs no timestamp: the identical body replayed any time later maps to the same IDs.
		replay, err := mapFile(t, name)
		require.NoError(t, err)
		assert.Equal(t, providertest.IDs(first), providertest.IDs(replay), name)
		for _, id := range providertest.IDs(first) {
			if prev, dup := seen[id]; dup {
				t.Errorf("event id %s of %s already derived from %s", id, name, prev)
			}
			seen[id] = name
		}
	}
	assert.Len(t, seen, 16, "thirteen mapped bodies; the reschedule, the series occurrence and the series cancel carry two events")
}

func TestRescheduleLinksBothWaysAndCancelsTheOldBooking(t *testing.T) {
	created, err := mapFile(t, "booking_created.json")
	require.NoError(t, err)
	rescheduled, err := mapFile(t, "booking_rescheduled.json")
	require.NoError(t, err)
	require.Len(t, rescheduled.Events, 2)
	moved, implied := rescheduled.Events[0], rescheduled.Events[1]

	assert.Equal(t, implied.Booking, moved.Payload.(booking.Scheduled).RescheduledFrom)
	assert.Equal(t, moved.Booking, implied.Payload.(booking.Canceled).RescheduledTo)
	assert.Equal(t, created.Events[0].Booking, implied.Booking)
	assert.NotEqual(t, moved.ID, implied.ID)

	// Whichever arrives first, the old booking ends canceled (implied) and points at the new one.
	for _, order := range [][]booking.Event{{created.Events[0], implied}, {implied, created.Events[0]}} {
		s := booking.Fold(order)
		assert.Equal(t, booking.StatusCanceled, s.Status)
		assert.True(t, s.CancelImplied)
		assert.Equal(t, moved.Booking, s.RescheduledTo)
	}
	s := booking.Fold([]booking.Event{moved})
	assert.Equal(t, booking.StatusActive, s.Status)
	assert.Equal(t, implied.Booking, s.RescheduledFrom)
}

func TestMapVariants(t *testing.T) {
	created := string(providertest.ReadFile(t, "booking_created.json"))
	cancelled := string(providertest.ReadFile(t, "booking_cancelled.json"))

	t.Run("organizer without id gets an e-mail digest, never the address", func(t *testing.T) {
		body := strings.Replace(created, `"id": 1842,`, ``, 1)
		require.NotEqual(t, created, body)
		got, err := mapBody(t, []byte(body))
		require.NoError(t, err)
		res := got.Events[0].Payload.(booking.Scheduled).Slot.Resources
		require.Len(t, res, 1)
		assert.True(t, strings.HasPrefix(res[0], "calcom-user-email-"), res[0])
		assert.NotContains(t, res[0], "grace")

		upper := strings.Replace(body, `"email": "grace.hopper@example.com"`, `"email": "Grace.Hopper@Example.com"`, 1)
		got2, err := mapBody(t, []byte(upper))
		require.NoError(t, err)
		assert.Equal(t, res, got2.Events[0].Payload.(booking.Scheduled).Slot.Resources, "addresses compare case-insensitively")
	})
	t.Run("cancelled by the organizer is host", func(t *testing.T) {
		body := strings.Replace(cancelled, `"cancelledBy": "ada.lovelace@example.com"`, `"cancelledBy": "grace.hopper@example.com"`, 1)
		require.NotEqual(t, cancelled, body)
		got, err := mapBody(t, []byte(body))
		require.NoError(t, err)
		assert.Equal(t, "host", got.Events[0].Payload.(booking.Canceled).CanceledBy)
	})
	t.Run("cancelled by someone else is unknown", func(t *testing.T) {
		body := strings.Replace(cancelled, `"cancelledBy": "ada.lovelace@example.com"`, `"cancelledBy": "admin@example.com"`, 1)
		got, err := mapBody(t, []byte(body))
		require.NoError(t, err)
		assert.Empty(t, got.Events[0].Payload.(booking.Canceled).CanceledBy)
	})
	t.Run("seats become capacity", func(t *testing.T) {
		body := strings.Replace(created, `"seatsPerTimeSlot": null`, `"seatsPerTimeSlot": 6`, 1)
		require.NotEqual(t, created, body)
		got, err := mapBody(t, []byte(body))
		require.NoError(t, err)
		assert.Equal(t, 6, got.Events[0].Payload.(booking.SeatAdded).Capacity)
	})
	t.Run("no iCalUID: the uid is the meeting", func(t *testing.T) {
		body := strings.Replace(created, `"iCalUID": "`+uidA+`@Cal.com"`, `"iCalUID": null`, 1)
		require.NotEqual(t, created, body)
		got, err := mapBody(t, []byte(body))
		require.NoError(t, err)
		assert.Equal(t, uidA, got.Events[0].Payload.(booking.Scheduled).Slot.Meeting)
	})
	t.Run("externalId that is not a PaymentIntent is not a payment ref", func(t *testing.T) {
		body := strings.Replace(created, `"externalId": "pi_3PGxZ9LkdIwHu7ix1aB2cD3e"`, `"externalId": "order-7781"`, 1)
		require.NotEqual(t, created, body)
		got, err := mapBody(t, []byte(body))
		require.NoError(t, err)
		assert.Empty(t, got.Events[0].Payload.(booking.Scheduled).PaymentRefs)
	})
	t.Run("MEETING_STARTED wrapped in payload is read too", func(t *testing.T) {
		body := `{"triggerEvent":"MEETING_STARTED","createdAt":"2024-05-16T17:03:11.621Z","payload":{"uid":"` + uidB + `","startTime":"2024-05-23T10:00:00.000Z","endTime":"2024-05-23T10:30:00.000Z"}}`
		got, err := mapBody(t, []byte(body))
		require.NoError(t, err)
		flat, err := mapFile(t, "meeting_started.json")
		require.NoError(t, err)
		assert.Equal(t, flat, got)
	})
	t.Run("other triggers are ignored", func(t *testing.T) {
		for _, trig := range []string{"BOOKING_PAYMENT_INITIATED", "FORM_SUBMITTED", "RECORDING_READY", "PING"} {
			got, err := mapBody(t, []byte(`{"triggerEvent":"`+trig+`","createdAt":"2024-05-14T09:12:31.482Z","payload":{}}`))
			require.NoError(t, err)
			assert.Empty(t, got.Events)
			assert.Equal(t, "calcom trigger "+trig+" not mapped", got.Reason)
		}
	})
}

const (
	uidS       = "Wm5tQ8rV3xKp2LnZ7cHd4b" // seated: a second seat taken, then one attendee leaves
	uidR       = "Qv6nT2wL9xRm4KpB7zHc3s" // an occurrence of a weekly series
	seriesR    = "calcom-series-b1e7c3a9-5d2f-4e8b-9a6c-0f3d7e2b1a48"
	seatTaken  = "2024-06-05T11:20:44.901Z"
	seatLeft   = "2024-06-08T19:02:13.554Z"
	occurrence = "2024-06-10T08:30:05.112Z"
	allCancel  = "2024-06-20T07:15:40.006Z"
)

// attendeeKey is the seat key of an address: a digest of the normalized address.
func attendeeKey(email string) string {
	sum := sha256.Sum256([]byte(strings.ToLower(strings.TrimSpace(email))))
	return "email-sha256:" + hex.EncodeToString(sum[:8])
}

func TestMapSeatsAndSeries(t *testing.T) {
	slotS := booking.Slot{Meeting: uidS + "@Cal.com", Resources: []string{host},
		Start: ts(t, "2024-06-12T16:00:00Z"), End: ts(t, "2024-06-12T17:00:00Z")}
	slotR := booking.Slot{Meeting: uidR + "@Cal.com", Resources: []string{host},
		Start: ts(t, "2024-06-24T14:00:00Z"), End: ts(t, "2024-06-24T14:30:00Z")}
	tests := []struct {
		file     string
		want     []booking.Event
		contacts bool
	}{
		{"seat_created.json", []booking.Event{event("BOOKING_CREATED "+uidS+" seat 4f0d6c2e-8a51-4b7e-9d3a-2c6e1f8b7a90 "+seatTaken, "calcom-"+uidS, ts(t, seatTaken),
			booking.SeatAdded{Slot: slotS, Capacity: 3, Seat: booking.Seat{UID: "4f0d6c2e-8a51-4b7e-9d3a-2c6e1f8b7a90", Attendee: attendeeKey("charles.babbage@example.org")}})}, true},
		{"seat_cancelled.json", []booking.Event{event("BOOKING_CANCELLED "+uidS+" seat "+attendeeKey("charles.babbage@example.org")+" "+seatLeft, "calcom-"+uidS, ts(t, seatLeft),
			booking.SeatRemoved{Seat: booking.Seat{Attendee: attendeeKey("charles.babbage@example.org")}, Reason: "Train strike"})}, false},
		{"recurring_created.json", []booking.Event{
			event("BOOKING_CREATED "+uidR+" "+occurrence, "calcom-"+uidR, ts(t, occurrence), booking.Scheduled{Slot: slotR, Capacity: 1}),
			event("BOOKING_CREATED "+uidR+" "+occurrence+" series", "calcom-"+uidR, ts(t, occurrence), booking.SeriesJoined{Series: seriesR}),
		}, true},
		{"recurring_cancelled_all_remaining.json", []booking.Event{
			event("BOOKING_CANCELLED "+uidR+" "+allCancel, "calcom-"+uidR, ts(t, allCancel), booking.Canceled{Reason: "Project paused", CanceledBy: "host"}),
			event("BOOKING_CANCELLED "+uidR+" "+allCancel+" series-cancel", "calcom-"+uidR, ts(t, allCancel), booking.SeriesCanceled{CanceledBy: "host"}),
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := mapFile(t, tt.file)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got.Events)
			providertest.CheckMapped(t, calcom.Name, got, err)
			for _, e := range got.Events {
				_, err := booking.Decide(booking.State{}, e)
				require.NoError(t, err, "the domain accepts the mapped event")
			}
			var own, seats []providers.Contact
			for _, c := range got.Contacts {
				if c.Seat == "" {
					own = append(own, c)
				} else {
					seats = append(seats, c)
				}
			}
			// A seat's event keeps its attendee's contact by seat; the booking's own stays its first attendee.
			for _, e := range got.Events {
				var st booking.Seat
				switch p := e.Payload.(type) {
				case booking.SeatAdded:
					st = p.Seat
				case booking.SeatRemoved:
					st = p.Seat
				default:
					continue
				}
				require.Len(t, seats, 1)
				assert.Equal(t, providers.Contact{Booking: e.Booking, Seat: st.Key(), Email: "charles.babbage@example.org", Name: "Charles Babbage", TimeZone: "Europe/London"}, seats[0],
					"the seat's own attendee, keyed by the seat")
				seats = nil
			}
			assert.Empty(t, seats, "no seat contact without a seat event")
			if !tt.contacts {
				assert.Empty(t, own, "a leaving attendee is not the booking's invitee")
				return
			}
			require.Len(t, own, 1)
			assert.Equal(t, "ada.lovelace@example.com", own[0].Email, "the booking's invitee is its first attendee")
		})
	}

	seatCancel := string(providertest.ReadFile(t, "seat_cancelled.json"))
	mapString := func(t *testing.T, body string) providers.Mapped {
		t.Helper()
		require.NotEqual(t, seatCancel, body, "the case must change the body")
		got, err := mapBody(t, []byte(body))
		require.NoError(t, err)
		return got
	}
	t.Run("the organizer cancelling a seated booking cancels it for everyone", func(t *testing.T) {
		body := strings.Replace(seatCancel, `"status": "CANCELLED"`, `"status": "CANCELLED", "cancelledBy": "grace.hopper@example.com", "requestReschedule": false`, 1)
		got := mapString(t, body)
		require.Len(t, got.Events, 1)
		assert.Equal(t, booking.Canceled{Reason: "Train strike", CanceledBy: "host"}, got.Events[0].Payload)
	})
	t.Run("a seat cancel with requestReschedule true, as some Cal.com versions send, is still one seat", func(t *testing.T) {
		body := strings.Replace(seatCancel, `"status": "CANCELLED"`, `"status": "CANCELLED", "requestReschedule": true`, 1)
		got := mapString(t, body)
		require.Len(t, got.Events, 1)
		assert.IsType(t, booking.SeatRemoved{}, got.Events[0].Payload)
	})
	t.Run("the whole seated booking's cancel without cancelledBy is the cancel", func(t *testing.T) {
		body := strings.Replace(seatCancel, `"status": "CANCELLED"`, `"status": "CANCELLED", "requestReschedule": false`, 1)
		got := mapString(t, body)
		require.Len(t, got.Events, 1)
		assert.IsType(t, booking.Canceled{}, got.Events[0].Payload)
	})
	t.Run("the seat reference is used when the leaver's cancel carries it", func(t *testing.T) {
		body := strings.Replace(seatCancel, `"status": "CANCELLED"`, `"status": "CANCELLED", "attendeeSeatId": "4f0d6c2e-8a51-4b7e-9d3a-2c6e1f8b7a90"`, 1)
		got := mapString(t, body)
		require.Len(t, got.Events, 1)
		assert.Equal(t, booking.Seat{UID: "4f0d6c2e-8a51-4b7e-9d3a-2c6e1f8b7a90", Attendee: attendeeKey("charles.babbage@example.org")},
			got.Events[0].Payload.(booking.SeatRemoved).Seat)
	})
	t.Run("a seat key never holds the address", func(t *testing.T) {
		for _, f := range []string{"seat_created.json", "seat_cancelled.json"} {
			got, err := mapFile(t, f)
			require.NoError(t, err)
			for _, e := range got.Events {
				assert.NotContains(t, fmt.Sprintf("%+v", e), "babbage", f)
			}
		}
	})
	t.Run("a cancel without recurringEvent cancels one occurrence only", func(t *testing.T) {
		all := string(providertest.ReadFile(t, "recurring_cancelled_all_remaining.json"))
		body := strings.Replace(all, `"recurringEvent": {`, `"recurringEventOff": {`, 1)
		require.NotEqual(t, all, body)
		got, err := mapBody(t, []byte(body))
		require.NoError(t, err)
		require.Len(t, got.Events, 1)
		assert.IsType(t, booking.Canceled{}, got.Events[0].Payload)
	})
}

func TestMapErrors(t *testing.T) {
	created := string(providertest.ReadFile(t, "booking_created.json"))
	rescheduled := string(providertest.ReadFile(t, "booking_rescheduled.json"))
	started := string(providertest.ReadFile(t, "meeting_started.json"))
	tests := []struct {
		name, body string
	}{
		{"form-encoded custom template", "triggerEvent=BOOKING_CREATED&uid=" + uidA},
		{"truncated", created[:100]},
		{"no triggerEvent", strings.Replace(created, `"triggerEvent": "BOOKING_CREATED"`, `"triggerEvent": ""`, 1)},
		{"no createdAt", strings.Replace(created, `"createdAt": "2024-05-14T09:12:31.482Z"`, `"createdAt": null`, 1)},
		{"createdAt not a time", strings.Replace(created, `"createdAt": "2024-05-14T09:12:31.482Z"`, `"createdAt": "14.05.2024"`, 1)},
		{"no payload", `{"triggerEvent":"BOOKING_CREATED","createdAt":"2024-05-14T09:12:31.482Z"}`},
		{"no uid", strings.Replace(created, `"uid": "`+uidA+`"`, `"uid": ""`, 1)},
		{"uid too long for a stream", strings.Replace(created, `"uid": "`+uidA+`"`, `"uid": "`+strings.Repeat("x", 300)+`"`, 1)},
		{"no organizer", strings.Replace(created, `"organizer": {`, `"organizer": null, "x": {`, 1)},
		{"bad startTime", strings.Replace(created, `"startTime": "2024-05-21T14:00:00.000Z"`, `"startTime": "tomorrow"`, 1)},
		{"end before start", strings.Replace(created, `"endTime": "2024-05-21T14:30:00.000Z"`, `"endTime": "2024-05-21T13:30:00.000Z"`, 1)},
		// Times and capacities an event cannot be stored or projected with: year 10000 in UTC, a
		// capacity beyond the read model's 32-bit integer.
		{"endTime in the year 10000 UTC", strings.Replace(created, `"endTime": "2024-05-21T14:30:00.000Z"`, `"endTime": "9999-12-31T23:59:59-23:59"`, 1)},
		{"createdAt before the year 0000 UTC", strings.Replace(created, `"createdAt": "2024-05-14T09:12:31.482Z"`, `"createdAt": "0000-01-01T00:00:00+01:00"`, 1)},
		{"createdAt the zero time", strings.Replace(created, `"createdAt": "2024-05-14T09:12:31.482Z"`, `"createdAt": "0001-01-01T00:00:00Z"`, 1)},
		{"seatsPerTimeSlot beyond the maximum", strings.Replace(created, `"seatsPerTimeSlot": null`, `"seatsPerTimeSlot": 3000000000`, 1)},
		{"reschedule without rescheduleUid", strings.Replace(rescheduled, `"rescheduleUid": "`+uidA+`"`, `"rescheduleUid": null`, 1)},
		{"reschedule from itself", strings.Replace(rescheduled, `"rescheduleUid": "`+uidA+`"`, `"rescheduleUid": "`+uidB+`"`, 1)},
		{"no-show without bookingUid", `{"triggerEvent":"BOOKING_NO_SHOW_UPDATED","createdAt":"2024-05-23T10:20:14.660Z","payload":{"attendees":[{"noShow":true}]}}`},
		{"no-show without payload", `{"triggerEvent":"BOOKING_NO_SHOW_UPDATED","createdAt":"2024-05-23T10:20:14.660Z"}`},
		{"meeting without uid", strings.Replace(started, `"uid": "`+uidB+`"`, `"uid": null`, 1)},
		{"meeting without startTime", strings.Replace(started, `"startTime": "2024-05-23T10:00:00.000Z"`, `"startTime": null`, 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, orig := range []string{created, rescheduled, started} {
				require.NotEqual(t, orig, tt.body, "the case must change the body")
			}
			_, err := mapBody(t, []byte(tt.body))
			require.Error(t, err)
			assert.ErrorIs(t, err, providers.ErrUnmappable)
		})
	}
}

// TestMapExtractsContactsOutsideTheEvents: the invitee's address and name are returned for the
// erasable contacts table, and appear nowhere in the events.
func TestMapExtractsContactsOutsideTheEvents(t *testing.T) {
	got, err := mapFile(t, "booking_created.json")
	require.NoError(t, err)
	providertest.CheckContacts(t, got, "ada.lovelace@example.com")
	assert.Equal(t, "Europe/London", got.Contacts[0].TimeZone, "the attendee's timeZone, for the emails' times")
}

func TestMapRules(t *testing.T) {
	noShow := string(providertest.ReadFile(t, "booking_no_show_updated.json"))
	cancelled := string(providertest.ReadFile(t, "booking_cancelled.json"))
	rescheduled := string(providertest.ReadFile(t, "booking_rescheduled.json"))
	mapString := func(t *testing.T, orig, body string) providers.Mapped {
		t.Helper()
		require.NotEqual(t, orig, body, "the case must change the body")
		got, err := mapBody(t, []byte(body))
		require.NoError(t, err)
		return got
	}

	t.Run("one attendee marked is a no-show, in any order of the attendees", func(t *testing.T) {
		const other = `{"email": "charles.babbage@example.org", "noShow": false}`
		for _, body := range []string{
			strings.Replace(noShow, `"attendees": [`, `"attendees": [`+other+`, `, 1),
			strings.Replace(noShow, `"noShow": true
      }`, `"noShow": true
      }, `+other, 1),
		} {
			got := mapString(t, noShow, body)
			require.Len(t, got.Events, 1)
			assert.Equal(t, booking.NoShowMarked{}, got.Events[0].Payload)
		}
	})
	t.Run("cancelled by the organizer's address written in another case is host", func(t *testing.T) {
		body := strings.Replace(cancelled, `"cancelledBy": "ada.lovelace@example.com"`, `"cancelledBy": " Grace.Hopper@Example.COM "`, 1)
		got := mapString(t, cancelled, body)
		require.Len(t, got.Events, 1)
		assert.Equal(t, "host", got.Events[0].Payload.(booking.Canceled).CanceledBy)
	})
	t.Run("the old booking of a reschedule must be a valid stream too", func(t *testing.T) {
		// Within Token's 512 bytes, beyond a booking ID's 200: the implied cancel could not be stored.
		body := strings.ReplaceAll(rescheduled, `"rescheduleUid": "`+uidA+`"`, `"rescheduleUid": "`+strings.Repeat("x", 300)+`"`)
		require.NotEqual(t, rescheduled, body)
		_, err := mapBody(t, []byte(body))
		assert.ErrorIs(t, err, providers.ErrUnmappable)
	})
}
