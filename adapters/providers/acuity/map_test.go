package acuity_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/providers"
	"bookingledger/adapters/providers/acuity"
	"bookingledger/adapters/providers/acuity/acuitytest"
	"bookingledger/adapters/providers/providertest"
	"bookingledger/domain/booking"
)

const (
	keyA   = "9f1c2b7e4a6d3085c1e2f4a7b9d0c3e5" // the keys of the golden vectors
	keyB   = "e3b0c44298fc1c149afbf4c8996fb924"
	apptID = "1148237562"
)

func ts(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	require.NoError(t, err)
	return v.UTC()
}

func notification(t *testing.T, action string) acuity.Notification {
	t.Helper()
	n, err := acuity.ParseNotification(formBody(action, apptID))
	require.NoError(t, err)
	return n
}

func formBody(action, id string) []byte {
	return []byte("action=" + action + "&id=" + id + "&calendarID=4417311&appointmentTypeID=21870436")
}

func appointmentFile(t *testing.T, name string) acuity.Appointment {
	t.Helper()
	a, err := acuity.ParseAppointment(providertest.ReadFile(t, name))
	require.NoError(t, err)
	return a
}

func TestParseNotification(t *testing.T) {
	tests := []struct {
		body string
		want acuity.Notification
	}{
		{"action=scheduled&id=1148237562&calendarID=4417311&appointmentTypeID=21870436",
			acuity.Notification{RawAction: "scheduled", Action: "scheduled", ID: apptID, CalendarID: "4417311", AppointmentTypeID: "21870436"}},
		{"action=appointment.rescheduled&id=1148237562&calendarID=4417311&appointmentTypeID=21870436",
			acuity.Notification{RawAction: "appointment.rescheduled", Action: "rescheduled", ID: apptID, CalendarID: "4417311", AppointmentTypeID: "21870436"}},
		{"action=appointment.canceled&id=0001148237562",
			acuity.Notification{RawAction: "appointment.canceled", Action: "canceled", ID: apptID}},
		{"action=order.completed&id=86512347",
			acuity.Notification{RawAction: "order.completed", Action: "order.completed", ID: "86512347"}},
		{"action=appointment.changed&id=1148237562&extra=ignored",
			acuity.Notification{RawAction: "appointment.changed", Action: "changed", ID: apptID}},
	}
	for _, tt := range tests {
		t.Run(tt.body, func(t *testing.T) {
			got, err := acuity.ParseNotification([]byte(tt.body))
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	assert.Equal(t, "acuity:appointment.rescheduled:"+apptID, notification(t, "appointment.rescheduled").DeliveryID())
}

func TestParseNotificationErrors(t *testing.T) {
	for name, body := range map[string]string{
		"JSON instead of a form":      `{"action":"scheduled","id":1148237562}`,
		"no action":                   "id=1148237562",
		"empty action":                "action=&id=1148237562",
		"action with a space":         "action=sched+uled&id=1148237562",
		"no id":                       "action=scheduled",
		"id not decimal":              "action=scheduled&id=12ab",
		"id with a path":              "action=scheduled&id=1%2F..%2Fusers",
		"negative id":                 "action=scheduled&id=-5",
		"id beyond uint64":            "action=scheduled&id=99999999999999999999",
		"id longer than twenty":       "action=scheduled&id=" + strings.Repeat("1", 21),
		"two ids":                     "action=scheduled&id=1&id=2",
		"two actions":                 "action=scheduled&action=canceled&id=1",
		"broken escape":               "action=scheduled&id=1%zz",
		"two calendar ids are unsure": "action=scheduled&id=1&calendarID=1&calendarID=2",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := acuity.ParseNotification([]byte(body))
			require.Error(t, err)
			assert.ErrorIs(t, err, providers.ErrUnmappable)
		})
	}
}

func TestParseAppointment(t *testing.T) {
	got := appointmentFile(t, "appointment_scheduled.json")
	assert.Equal(t, acuity.Appointment{
		ID:         apptID,
		Start:      ts(t, "2025-06-30T09:15:00Z"), // 10:15 at +0100
		End:        ts(t, "2025-06-30T09:45:00Z"), // duration "30"
		CalendarID: "4417311",
		Created:    ts(t, "2025-06-02T19:03:11Z"), // 14:03:11 at -0500
		Timezone:   "Europe/London",
		Email:      "ada.lovelace@example.com",
		Name:       "Ada Lovelace",
	}, got)

	class := appointmentFile(t, "appointment_class.json")
	assert.Equal(t, "7730125", class.ClassID)
	assert.Equal(t, 90*time.Minute, class.End.Sub(class.Start))
	assert.True(t, appointmentFile(t, "appointment_canceled.json").Canceled)
	assert.True(t, appointmentFile(t, "appointment_no_show.json").NoShow)

	t.Run("numbers as strings, duration as a number, RFC 3339 offsets, null flags", func(t *testing.T) {
		a, err := acuity.ParseAppointment([]byte(`{"id":"1148237562","calendarID":"4417311","duration":30,
			"datetime":"2025-06-30T10:15:00+01:00","datetimeCreated":null,"canceled":null,"noShow":null}`))
		require.NoError(t, err)
		assert.Equal(t, ts(t, "2025-06-30T09:15:00Z"), a.Start)
		assert.Equal(t, ts(t, "2025-06-30T09:45:00Z"), a.End)
		assert.True(t, a.Created.IsZero())
		assert.False(t, a.Canceled)
	})
}

func TestParseAppointmentErrors(t *testing.T) {
	base := string(providertest.ReadFile(t, "appointment_scheduled.json"))
	for name, body := range map[string]string{
		"not JSON":                "<html>Service Unavailable</html>",
		"an array":                "[]",
		"an error object":         `{"status_code":404,"message":"Appointment not found.","error":"not_found"}`,
		"no id":                   strings.Replace(base, `"id": 1148237562,`, ``, 1),
		"fractional id":           strings.Replace(base, `"id": 1148237562`, `"id": 1148237562.5`, 1),
		"no calendar":             strings.Replace(base, `"calendarID": 4417311`, `"calendarID": null`, 1),
		"datetime without offset": strings.Replace(base, `"2025-06-30T10:15:00+0100"`, `"2025-06-30T10:15:00"`, 1),
		"datetime in words":       strings.Replace(base, `"2025-06-30T10:15:00+0100"`, `"June 30, 2025"`, 1),
		"no duration":             strings.Replace(base, `"duration": "30",`, ``, 1),
		"zero duration":           strings.Replace(base, `"duration": "30"`, `"duration": "0"`, 1),
		"duration in hours":       strings.Replace(base, `"duration": "30"`, `"duration": "1h"`, 1),
		"duration beyond a week":  strings.Replace(base, `"duration": "30"`, `"duration": "10081"`, 1),
		// Times an event cannot be stored with (RFC 3339 has four-digit years), in UTC.
		"datetime in the year 10000 UTC":           strings.Replace(base, `"2025-06-30T10:15:00+0100"`, `"9999-12-31T23:59:59-2359"`, 1),
		"datetime plus duration in the year 10000": strings.Replace(base, `"2025-06-30T10:15:00+0100"`, `"9999-12-31T23:59:00+0000"`, 1),
		"datetime the zero time":                   strings.Replace(base, `"2025-06-30T10:15:00+0100"`, `"0001-01-01T01:00:00+0100"`, 1),
		"datetimeCreated before the year 0000 UTC": strings.Replace(base, `"2025-06-02T14:03:11-0500"`, `"0000-01-01T00:00:00+0100"`, 1),
		"canceled as a string":                     strings.Replace(base, `"canceled": false`, `"canceled": "no"`, 1),
		"bad datetimeCreated":                      strings.Replace(base, `"2025-06-02T14:03:11-0500"`, `"yesterday"`, 1),
		"classID that is not an id":                strings.Replace(base, `"classID": null`, `"classID": "yoga"`, 1),
	} {
		t.Run(name, func(t *testing.T) {
			require.NotEqual(t, base, body, "the case must change the document")
			_, err := acuity.ParseAppointment([]byte(body))
			require.Error(t, err)
			assert.ErrorIs(t, err, acuity.ErrBadAppointment)
		})
	}
}

func TestMapAppointment(t *testing.T) {
	observed := ts(t, "2025-06-10T08:00:00Z")
	created := ts(t, "2025-06-02T19:03:11Z")
	slotA := booking.Slot{Meeting: "acuity-" + apptID, Resources: []string{"acuity-calendar-4417311"},
		Start: ts(t, "2025-06-30T09:15:00Z"), End: ts(t, "2025-06-30T09:45:00Z")}
	slotB := booking.Slot{Meeting: "acuity-" + apptID, Resources: []string{"acuity-calendar-4417311"},
		Start: ts(t, "2025-07-02T14:30:00Z"), End: ts(t, "2025-07-02T15:00:00Z")}
	ev := func(identity string, at time.Time, p booking.Payload) booking.Event {
		return booking.Event{ID: providers.EventID("acuity", identity), Booking: "acuity-" + apptID, Provider: "acuity",
			ProviderRef: identity, OccurredAt: at, Payload: p}
	}
	anchor := func(s booking.Slot) booking.Event {
		return ev("appointment "+apptID+" scheduled", created, booking.Scheduled{Slot: s, Capacity: 1})
	}
	slotAEvent := ev("appointment "+apptID+" slot 2025-06-30T09:15:00Z 2025-06-30T09:45:00Z calendar 4417311", observed, booking.Rescheduled{Slot: slotA})
	slotBEvent := ev("appointment "+apptID+" slot 2025-07-02T14:30:00Z 2025-07-02T15:00:00Z calendar 4417311", observed, booking.Rescheduled{Slot: slotB})
	classSlot := booking.Slot{Meeting: "acuity-class-7730125", Resources: []string{"acuity-calendar-4417311"},
		Start: ts(t, "2025-06-30T09:15:00Z"), End: ts(t, "2025-06-30T10:45:00Z")}
	classEv := func(identity string, at time.Time, p booking.Payload) booking.Event {
		e := ev(identity, at, p)
		e.Booking = "acuity-1148290017"
		return e
	}

	tests := []struct {
		name   string
		action string
		file   string
		want   []booking.Event
	}{
		{"scheduled", "scheduled", "appointment_scheduled.json", []booking.Event{slotAEvent, anchor(slotA)}},
		{"changed next to it: the same events", "changed", "appointment_scheduled.json", []booking.Event{slotAEvent, anchor(slotA)}},
		{"rescheduled", "appointment.rescheduled", "appointment_rescheduled.json", []booking.Event{slotBEvent, anchor(slotB)}},
		{"a scheduled fetched after the move maps the move", "scheduled", "appointment_rescheduled.json", []booking.Event{slotBEvent, anchor(slotB)}},
		{"canceled", "canceled", "appointment_canceled.json", []booking.Event{
			ev("appointment "+apptID+" canceled", observed, booking.Canceled{}), slotBEvent, anchor(slotB)}},
		{"a rescheduled fetched after the cancel maps the cancel", "rescheduled", "appointment_canceled.json", []booking.Event{
			ev("appointment "+apptID+" canceled", observed, booking.Canceled{}), slotBEvent, anchor(slotB)}},
		{"no-show", "appointment.changed", "appointment_no_show.json", []booking.Event{
			slotAEvent, anchor(slotA), ev("appointment "+apptID+" no-show", observed, booking.NoShowMarked{})}},
		{"a seat in a class shares the class's meeting", "scheduled", "appointment_class.json", []booking.Event{
			classEv("appointment 1148290017 slot 2025-06-30T09:15:00Z 2025-06-30T10:45:00Z calendar 4417311", observed, booking.Rescheduled{Slot: classSlot}),
			classEv("appointment 1148290017 scheduled", created, booking.Scheduled{Slot: classSlot, Capacity: 1})}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := appointmentFile(t, tt.file)
			n, err := acuity.ParseNotification(formBody(tt.action, a.ID))
			require.NoError(t, err)
			got, err := acuity.MapAppointment(n, a, observed)
			require.NoError(t, err)
			assert.Equal(t, "acuity:"+tt.action+":"+a.ID, got.DeliveryID)
			assert.Equal(t, tt.want, got.Events)
			providertest.CheckMapped(t, acuity.Name, got, nil)
		})
	}

	t.Run("order.completed and unknown actions are ignored without a fetch", func(t *testing.T) {
		for _, action := range []string{"order.completed", "appointment.deleted", "invoice.paid"} {
			got, err := acuity.MapAppointment(notification(t, action), acuity.Appointment{}, observed)
			require.NoError(t, err)
			assert.Empty(t, got.Events)
			assert.Equal(t, "acuity action "+action+" not mapped", got.Reason)
		}
	})
	t.Run("another appointment's data is refused", func(t *testing.T) {
		_, err := acuity.MapAppointment(notification(t, "scheduled"), appointmentFile(t, "appointment_class.json"), observed)
		assert.ErrorIs(t, err, acuity.ErrBadAppointment)
	})
	t.Run("an observation never folds before the creation", func(t *testing.T) {
		early := created.Add(-time.Hour) // our clock behind Acuity's
		got, err := acuity.MapAppointment(notification(t, "rescheduled"), appointmentFile(t, "appointment_rescheduled.json"), early)
		require.NoError(t, err)
		assert.Equal(t, created, got.Events[0].OccurredAt)
		assert.Equal(t, booking.TypeScheduled, booking.Sorted(got.Events)[0].Type(), "same time: precedence puts the anchor first")
	})
	t.Run("no datetimeCreated: the anchor takes the observation time", func(t *testing.T) {
		a := appointmentFile(t, "appointment_scheduled.json")
		a.Created = time.Time{}
		got, err := acuity.MapAppointment(notification(t, "scheduled"), a, observed)
		require.NoError(t, err)
		assert.Equal(t, observed, got.Events[1].OccurredAt)
	})
}

func TestReplayLaterIsDuplicateWhileTheAppointmentIsUnchanged(t *testing.T) {
	api := acuitytest.New(t, userID, keyA, keyB)
	api.PutRaw(apptID, providertest.ReadFile(t, "appointment_scheduled.json"))
	p := newProvider(t, api, keyA, keyB)
	for _, v := range vectors(t) {
		if !strings.Contains(v.Body, apptID) {
			continue
		}
		t.Run(v.Name, func(t *testing.T) {
			h := sigHeader(v.Signature)
			first, err := p.Map(context.Background(), h, []byte(v.Body), ts(t, "2025-06-02T19:03:12Z"))
			require.NoError(t, err)
			// No timestamp is signed: the captured request verifies a month later, and maps to the same
			// events because the state it fetches is the same.
			_, err = newProvider(t, api, v.Key).Verify(h, []byte(v.Body), time.Now().Add(30*24*time.Hour))
			require.NoError(t, err)
			replay, err := p.Map(context.Background(), h, []byte(v.Body), ts(t, "2025-07-02T19:03:12Z"))
			require.NoError(t, err)
			assert.Equal(t, providertest.IDs(first), providertest.IDs(replay))
		})
	}
}

// TestMapExtractsContactsOutsideTheEvents: the client's address and name are returned for the
// erasable contacts table, and appear nowhere in the events.
func TestMapExtractsContactsOutsideTheEvents(t *testing.T) {
	a := appointmentFile(t, "appointment_scheduled.json")
	n, err := acuity.ParseNotification([]byte("action=scheduled&id=" + a.ID))
	require.NoError(t, err)
	got, err := acuity.MapAppointment(n, a, time.Now())
	require.NoError(t, err)
	providertest.CheckContacts(t, got, "ada.lovelace@example.com")
	assert.Equal(t, "Europe/London", got.Contacts[0].TimeZone, "the client's timezone, for the emails' times")
}

func TestParseAppointmentDurationOfAWeek(t *testing.T) {
	base := string(providertest.ReadFile(t, "appointment_scheduled.json"))
	body := strings.Replace(base, `"duration": "30"`, `"duration": "10080"`, 1)
	require.NotEqual(t, base, body)
	a, err := acuity.ParseAppointment([]byte(body))
	require.NoError(t, err)
	assert.Equal(t, 7*24*time.Hour, a.End.Sub(a.Start))
}
