package calendly_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/providers"
	"bookingledger/adapters/providers/calendly"
	"bookingledger/adapters/providers/providertest"
	"bookingledger/domain/booking"
)

const (
	api        = "https://api.calendly.com"
	grace      = api + "/users/BDGC5XJ2NZQ7WV3K"
	alan       = api + "/users/FQ2ZJ7XW4MRT9KN3"
	eventFirst = api + "/scheduled_events/FHKT4XQ2M7LPRZ3A"
	eventMoved = api + "/scheduled_events/HX7RM2PQ4ZKW9T5B"
	eventDive  = api + "/scheduled_events/CQ2LW8ZN5RMT7XJ4"
	eventGroup = api + "/scheduled_events/WN8TQ3XK7MZR2VC5"
	adaFirst   = eventFirst + "/invitees/JQ5WZ3T8KD2RVX6N"
	adaMoved   = eventMoved + "/invitees/PB4NY7QX2RJ8WM3D"
	charles    = eventDive + "/invitees/TK9VR3MW6QZ2XH8C"
	katherine  = eventGroup + "/invitees/RZ6MK2WQ9TX4NB7P"
	noShowURI  = api + "/invitee_no_shows/DV7KQ2MZ9XW4TR3N"
)

func ts(tb testing.TB, s string) time.Time {
	tb.Helper()
	t, err := time.Parse(time.RFC3339Nano, s)
	require.NoError(tb, err)
	return t.UTC()
}

func event(identity string, id booking.ID, at time.Time, p booking.Payload) booking.Event {
	return booking.Event{
		ID: providers.EventID("calendly", identity), Booking: id, Provider: "calendly",
		ProviderRef: identity, OccurredAt: at, Payload: p,
	}
}

func mapFile(tb testing.TB, name string) (providers.Mapped, error) {
	tb.Helper()
	return calendly.New(providers.NewSecrets("k"), 0).Map(context.Background(), nil, providertest.ReadFile(tb, name), time.Now())
}

func TestMapTestdata(t *testing.T) {
	tests := []struct {
		file string
		want providers.Mapped
	}{
		{
			file: "invitee_created.json",
			want: providers.Mapped{
				DeliveryID: "calendly:invitee.created:" + adaFirst + ":2024-05-14T09:12:31.000000Z",
				Events: []booking.Event{event(adaFirst+" invitee.created", "calendly-JQ5WZ3T8KD2RVX6N",
					ts(t, "2024-05-14T09:12:30.871243Z"), booking.Scheduled{
						Slot: booking.Slot{Meeting: eventFirst, Resources: []string{grace},
							Start: ts(t, "2024-05-21T14:00:00Z"), End: ts(t, "2024-05-21T14:30:00Z")},
						Capacity:    1,
						PaymentRefs: []string{"stripe:ch_3PGxY2LkdIwHu7ix0Vw1Qw1A"},
					})},
			},
		},
		{
			file: "invitee_canceled_rescheduled.json",
			want: providers.Mapped{
				DeliveryID: "calendly:invitee.canceled:" + adaFirst + ":2024-05-16T17:03:12.000000Z",
				Events: []booking.Event{event(adaFirst+" invitee.canceled", "calendly-JQ5WZ3T8KD2RVX6N",
					ts(t, "2024-05-16T17:03:11.594382Z"), booking.Canceled{
						Reason: "Need a later slot", CanceledBy: "invitee", RescheduledTo: "calendly-PB4NY7QX2RJ8WM3D",
					})},
			},
		},
		{
			file: "invitee_created_rescheduled.json",
			want: providers.Mapped{
				DeliveryID: "calendly:invitee.created:" + adaMoved + ":2024-05-16T17:03:12.000000Z",
				Events: []booking.Event{event(adaMoved+" invitee.created", "calendly-PB4NY7QX2RJ8WM3D",
					ts(t, "2024-05-16T17:03:11.618904Z"), booking.Scheduled{
						Slot: booking.Slot{Meeting: eventMoved, Resources: []string{grace},
							Start: ts(t, "2024-05-23T10:00:00Z"), End: ts(t, "2024-05-23T10:30:00Z")},
						Capacity:        1,
						RescheduledFrom: "calendly-JQ5WZ3T8KD2RVX6N",
					})},
			},
		},
		{
			file: "invitee_canceled.json",
			want: providers.Mapped{
				DeliveryID: "calendly:invitee.canceled:" + charles + ":2024-06-03T08:45:02.000000Z",
				Events: []booking.Event{event(charles+" invitee.canceled", "calendly-TK9VR3MW6QZ2XH8C",
					ts(t, "2024-06-03T08:45:01.337902Z"), booking.Canceled{
						Reason: "Host is travelling that week", CanceledBy: "host",
					})},
			},
		},
		{
			file: "invitee_created_group.json",
			want: providers.Mapped{
				DeliveryID: "calendly:invitee.created:" + katherine + ":2024-06-10T13:00:09.000000Z",
				Events: []booking.Event{event(katherine+" invitee.created", "calendly-RZ6MK2WQ9TX4NB7P",
					ts(t, "2024-06-10T13:00:08.250031Z"), booking.Scheduled{
						Slot: booking.Slot{Meeting: eventGroup, Resources: []string{grace, alan},
							Start: ts(t, "2024-06-12T15:30:00Z"), End: ts(t, "2024-06-12T17:30:00Z")},
						Capacity: 12,
					})},
			},
		},
		{
			// updated_at still says the booking time: the no-show record's own time orders the mark.
			file: "invitee_no_show_created.json",
			want: providers.Mapped{
				DeliveryID: "calendly:invitee_no_show.created:" + katherine + ":2024-06-12T18:02:44.000000Z",
				Events: []booking.Event{event(katherine+" invitee_no_show.created "+noShowURI, "calendly-RZ6MK2WQ9TX4NB7P",
					ts(t, "2024-06-12T18:02:44Z"), booking.NoShowMarked{})},
			},
		},
		{
			file: "invitee_no_show_deleted.json",
			want: providers.Mapped{
				DeliveryID: "calendly:invitee_no_show.deleted:" + katherine + ":2024-06-13T08:15:20.000000Z",
				Events: []booking.Event{event(katherine+" invitee_no_show.deleted "+noShowURI, "calendly-RZ6MK2WQ9TX4NB7P",
					ts(t, "2024-06-13T08:15:20Z"), booking.NoShowCleared{})},
			},
		},
		{
			file: "routing_form_submission_created.json",
			want: providers.Mapped{
				DeliveryID: "calendly:routing_form_submission.created:" + api + "/routing_form_submissions/ZX4WQ9KT2RM7NB3J:2024-06-11T10:41:27.000000Z",
				Reason:     "calendly event routing_form_submission.created not mapped",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := mapFile(t, tt.file)
			require.NoError(t, err)
			got.Contacts = nil // TestMapExtractsContactsOutsideTheEvents
			assert.Equal(t, tt.want, got)
			providertest.CheckMapped(t, calendly.Name, got, err)
		})
	}
}

func TestEveryTestdataBodyIsCovered(t *testing.T) {
	// A new testdata payload must get an expectation above (signatures.json is not a payload).
	var payloads []string
	for _, n := range providertest.Glob(t, "*.json") {
		if n != "signatures.json" {
			payloads = append(payloads, n)
		}
	}
	assert.Len(t, payloads, 8)
}

func TestRedeliveryAndDistinctIDs(t *testing.T) {
	seen := map[string]string{}
	for _, name := range providertest.Glob(t, "invitee*.json") {
		first, err := mapFile(t, name)
		require.NoError(t, err)
		again, err := mapFile(t, name)
		require.NoError(t, err)
		assert.Equal(t, first, again, "a redelivery maps to the same events and IDs")
		for _, id := range providertest.IDs(first) {
			if prev, dup := seen[id]; dup {
				t.Errorf("event id %s of %s already derived from %s", id, name, prev)
			}
			seen[id] = name
		}
	}
	assert.Len(t, seen, 7)
}

func TestRescheduleLinksBothWays(t *testing.T) {
	canceled, err := mapFile(t, "invitee_canceled_rescheduled.json")
	require.NoError(t, err)
	created, err := mapFile(t, "invitee_created_rescheduled.json")
	require.NoError(t, err)
	require.Len(t, canceled.Events, 1)
	require.Len(t, created.Events, 1)

	old, moved := canceled.Events[0], created.Events[0]
	assert.Equal(t, moved.Booking, old.Payload.(booking.Canceled).RescheduledTo)
	assert.Equal(t, old.Booking, moved.Payload.(booking.Scheduled).RescheduledFrom)

	// Either arrival order folds each booking to the same end state.
	assert.Equal(t, booking.StatusCanceled, booking.Fold([]booking.Event{old}).Status)
	assert.Equal(t, booking.StatusActive, booking.Fold([]booking.Event{moved}).Status)
}

func TestNoShowMarkClearMarkFoldsInOrder(t *testing.T) {
	marked, err := mapFile(t, "invitee_no_show_created.json")
	require.NoError(t, err)
	cleared, err := mapFile(t, "invitee_no_show_deleted.json")
	require.NoError(t, err)
	created, err := mapFile(t, "invitee_created_group.json")
	require.NoError(t, err)

	events := []booking.Event{cleared.Events[0], marked.Events[0], created.Events[0]}
	assert.False(t, booking.Fold(events).NoShow, "the clear comes after the mark whatever the arrival order")
	assert.True(t, booking.Fold(events[1:]).NoShow)
}

func TestMapErrors(t *testing.T) {
	valid := string(providertest.ReadFile(t, "invitee_created.json"))
	tests := []struct {
		name string
		body string
	}{
		{"not json", "event=invitee.created"},
		{"truncated json", valid[:len(valid)/2]},
		{"json array", "[]"},
		{"no event", `{"created_at":"2024-05-14T09:12:31.000000Z","payload":{}}`},
		{"no payload", `{"event":"invitee.created","created_at":"2024-05-14T09:12:31.000000Z"}`},
		{"null payload", `{"event":"invitee.created","created_at":"2024-05-14T09:12:31.000000Z","payload":null}`},
		{"payload of wrong type", `{"event":"invitee.created","payload":"x"}`},
		{"no invitee uri", strings.Replace(valid, `"uri": "`+adaFirst+`"`, `"uri": ""`, 1)},
		{"uri not an invitee", strings.Replace(valid, `"uri": "`+adaFirst+`"`, `"uri": "`+eventFirst+`"`, 1)},
		{"uri with space", strings.Replace(valid, `"uri": "`+adaFirst+`"`, `"uri": "`+adaFirst+` x"`, 1)},
		{"no time at all", strings.NewReplacer(`"updated_at": "2024-05-14T09:12:30.871243Z"`, `"updated_at": null`,
			`"created_at": "2024-05-14T09:12:31.000000Z"`, `"created_at": null`).Replace(valid)},
		{"bad updated_at", strings.Replace(valid, `"updated_at": "2024-05-14T09:12:30.871243Z"`, `"updated_at": "yesterday"`, 1)},
		{"no scheduled_event", `{"event":"invitee.created","created_at":"2024-05-14T09:12:31Z","payload":{"uri":"` + adaFirst + `","event":"` + eventFirst + `"}}`},
		{"no host", strings.Replace(valid, `"user": "`+grace+`"`, `"user": ""`, 1)},
		{"end before start", strings.Replace(valid, `"end_time": "2024-05-21T14:30:00.000000Z"`, `"end_time": "2024-05-21T13:30:00.000000Z"`, 1)},
		{"missing start", strings.Replace(valid, `"start_time": "2024-05-21T14:00:00.000000Z"`, `"start_time": null`, 1)},
		{"old invitee is itself", strings.Replace(valid, `"old_invitee": null`, `"old_invitee": "`+adaFirst+`"`, 1)},
		{"old invitee malformed", strings.Replace(valid, `"old_invitee": null`, `"old_invitee": "not-a-uri"`, 1)},
		{"limit not a number", strings.Replace(valid, `"limit": 1`, `"limit": "one"`, 1)},
		// Times and capacities an event cannot be stored or projected with: year 10000 in UTC, a
		// capacity beyond the read model's 32-bit integer.
		{"updated_at the zero time", strings.Replace(valid, `"updated_at": "2024-05-14T09:12:30.871243Z"`, `"updated_at": "0001-01-01T00:00:00Z"`, 1)},
		{"limit beyond the maximum", strings.Replace(valid, `"limit": 1`, `"limit": 3000000000`, 1)},
		{"end in the year 10000 UTC", strings.Replace(valid, `"end_time": "2024-05-21T14:30:00.000000Z"`, `"end_time": "9999-12-31T23:59:59-23:59"`, 1)},
		{"updated_at in the year 10000 UTC", strings.Replace(valid, `"updated_at": "2024-05-14T09:12:30.871243Z"`, `"updated_at": "9999-12-31T23:30:00-01:00"`, 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NotEqual(t, valid, tt.body, "the case must change the body")
			_, err := calendly.New(providers.NewSecrets("k"), 0).Map(context.Background(), nil, []byte(tt.body), time.Now())
			require.Error(t, err)
			assert.ErrorIs(t, err, providers.ErrUnmappable)
		})
	}
}

func TestMapIgnoredEvents(t *testing.T) {
	for _, name := range []string{"event_type.updated", "meeting_recap.created", "contact.created"} {
		t.Run(name, func(t *testing.T) {
			body := `{"event":"` + name + `","created_at":"2024-06-01T00:00:00.000000Z","created_by":"` + grace + `","payload":{"uri":"https://api.calendly.com/x/1"}}`
			got, err := calendly.New(providers.NewSecrets("k"), 0).Map(context.Background(), nil, []byte(body), time.Now())
			require.NoError(t, err)
			assert.Empty(t, got.Events)
			assert.Equal(t, "calendly event "+name+" not mapped", got.Reason)
			assert.Equal(t, "calendly:"+name+":https://api.calendly.com/x/1:2024-06-01T00:00:00.000000Z", got.DeliveryID)
		})
	}
}

func TestFallsBackToEnvelopeTime(t *testing.T) {
	body := strings.Replace(string(providertest.ReadFile(t, "invitee_created.json")),
		`"updated_at": "2024-05-14T09:12:30.871243Z"`, `"updated_at": null`, 1)
	got, err := calendly.New(providers.NewSecrets("k"), 0).Map(context.Background(), nil, []byte(body), time.Now())
	require.NoError(t, err)
	require.Len(t, got.Events, 1)
	assert.Equal(t, ts(t, "2024-05-14T09:12:31Z"), got.Events[0].OccurredAt)
}

// TestMapExtractsContactsOutsideTheEvents: the invitee's address and name are returned for the
// erasable contacts table, and appear nowhere in the events.
func TestMapExtractsContactsOutsideTheEvents(t *testing.T) {
	got, err := mapFile(t, "invitee_created.json")
	require.NoError(t, err)
	providertest.CheckContacts(t, got, "ada.lovelace@example.com")
	assert.Equal(t, "Europe/London", got.Contacts[0].TimeZone, "the invitee's timezone, for the emails' times")
}

// BenchmarkMap is the mapping's CPU per delivery (docs/benchmarks-history.md, "Where the time goes
// now").
func BenchmarkMap(b *testing.B) {
	body := providertest.ReadFile(b, "invitee_created.json")
	p := calendly.New(providers.NewSecrets("k"), 0)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Map(context.Background(), nil, body, time.Now()); err != nil {
			b.Fatal(err)
		}
	}
}

// A name or address with a NUL ("\u0000" in the JSON) cannot be stored in the contacts table
// (PostgreSQL text refuses it, and the commit with the events would fail on every retry): the
// booking is mapped, the name is left out, and an address with one is no contact.
func TestMapLeavesUnstorableContactsOut(t *testing.T) {
	valid := string(providertest.ReadFile(t, "invitee_created.json"))
	name := strings.Replace(valid, `"name": "Ada Lovelace"`, `"name": "Ada\u0000Lovelace"`, 1)
	require.NotEqual(t, valid, name)
	got, err := calendly.New(providers.NewSecrets("k"), 0).Map(context.Background(), nil, []byte(name), time.Now())
	require.NoError(t, err)
	require.Len(t, got.Events, 1)
	assert.Equal(t, []providers.Contact{{Booking: got.Events[0].Booking, Email: "ada.lovelace@example.com", TimeZone: "Europe/London"}}, got.Contacts)

	email := strings.Replace(valid, `"email": "ada.lovelace@example.com"`, `"email": "ada.lovelace\u0000@example.com"`, 1)
	require.NotEqual(t, valid, email)
	got, err = calendly.New(providers.NewSecrets("k"), 0).Map(context.Background(), nil, []byte(email), time.Now())
	require.NoError(t, err)
	require.Len(t, got.Events, 1)
	assert.Empty(t, got.Contacts)
}

func TestMapRules(t *testing.T) {
	created := string(providertest.ReadFile(t, "invitee_created.json"))
	canceled := string(providertest.ReadFile(t, "invitee_canceled.json"))
	noShow := string(providertest.ReadFile(t, "invitee_no_show_created.json"))
	mapString := func(t *testing.T, orig, body string) providers.Mapped {
		t.Helper()
		require.NotEqual(t, orig, body, "the case must change the body")
		got, err := calendly.New(providers.NewSecrets("k"), 0).Map(context.Background(), nil, []byte(body), time.Now())
		require.NoError(t, err)
		require.Len(t, got.Events, 1)
		return got
	}

	t.Run("a payment through another provider is no Stripe payment ref", func(t *testing.T) {
		body := strings.Replace(created, `"provider": "stripe"`, `"provider": "paypal"`, 1)
		assert.Empty(t, mapString(t, created, body).Events[0].Payload.(booking.Scheduled).PaymentRefs)
	})
	t.Run("a host in two memberships is one resource", func(t *testing.T) {
		body := strings.Replace(created, `"user": "`+grace+`"`, `"user": "`+grace+`"}, {"user": "`+grace+`"`, 1)
		assert.Equal(t, []string{grace}, mapString(t, created, body).Events[0].Payload.(booking.Scheduled).Slot.Resources)
	})
	t.Run("a canceler type that is not a plain token is left out", func(t *testing.T) {
		body := strings.Replace(canceled, `"canceler_type":"host"`, `"canceler_type":"host or invitee"`, 1)
		assert.Equal(t, booking.Canceled{Reason: "Host is travelling that week"}, mapString(t, canceled, body).Events[0].Payload)
	})
	t.Run("without the envelope's time a no-show is ordered by its record's time", func(t *testing.T) {
		// updated_at is still the booking's time: taken alone it would fold the mark before the
		// booking's earlier events of that day.
		body := strings.Replace(noShow, `"created_at": "2024-06-12T18:02:44.000000Z"`, `"created_at": null`, 1)
		assert.Equal(t, ts(t, "2024-06-12T18:02:43.918236Z"), mapString(t, noShow, body).Events[0].OccurredAt)
	})
}

// The booking is the key after /invitees/: anything after it would name another booking for the
// same invitee, so such a URI is quarantined.
func TestMapRefusesInviteeURIsWithMoreAfterTheKey(t *testing.T) {
	valid := string(providertest.ReadFile(t, "invitee_created.json"))
	for _, suffix := range []string{"/", "/cancel", "?utm=x", "#x"} {
		t.Run(suffix, func(t *testing.T) {
			body := strings.Replace(valid, `"uri": "`+adaFirst+`"`, `"uri": "`+adaFirst+suffix+`"`, 1)
			require.NotEqual(t, valid, body)
			_, err := calendly.New(providers.NewSecrets("k"), 0).Map(context.Background(), nil, []byte(body), time.Now())
			assert.ErrorIs(t, err, providers.ErrUnmappable)
		})
	}
}
