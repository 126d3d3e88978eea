package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/httpapi/sample"
	"bookingledger/adapters/providers/calcom"
)

// seatMail is one delivered email as "<subject kind> <recipient>".
func seatMails(w *stepsWorld, booking string) []string {
	var out []string
	for _, m := range w.smtp.Delivered() {
		if !strings.Contains(string(m.Data), "Reference: "+booking) {
			continue
		}
		k, _, _ := strings.Cut(m.Subject, ":")
		out = append(out, k+" "+strings.Join(m.To, ","))
	}
	slices.Sort(out)
	return out
}

// postSeat posts a Cal.com seat delivery of the seated booking uid: a seat create (attendees: every
// attendee, the new one last) or a seat cancel (the leaver alone), at offset from the create.
func postSeat(t *testing.T, base, trigger, uid string, start time.Time, offset time.Duration, seatRef string, attendees ...string) {
	t.Helper()
	require.NoError(t, postSeatErr(base, trigger, uid, start, offset, seatRef, attendees...))
}

// postSeatErr is postSeat for goroutines other than the test's: it returns what went wrong.
func postSeatErr(base, trigger, uid string, start time.Time, offset time.Duration, seatRef string, attendees ...string) error {
	body, err := sample.Body("calcom", trigger, sample.Params{Booking: uid, Host: "seats-host", Start: start, End: start.Add(30 * time.Minute)})
	if err != nil {
		return err
	}
	var env map[string]any
	if err := json.Unmarshal(body, &env); err != nil {
		return err
	}
	p := env["payload"].(map[string]any)
	p["seatsPerTimeSlot"] = 3
	p["attendeeSeatId"] = seatRef
	delete(p, "cancelledBy")
	var list []any
	for _, a := range attendees {
		list = append(list, map[string]any{"email": a + "@example.com", "name": strings.ToUpper(a[:1]) + a[1:]})
	}
	p["attendees"] = list
	env["createdAt"] = start.Add(-7 * 24 * time.Hour).Add(offset).Format("2006-01-02T15:04:05.000Z")
	if body, err = json.Marshal(env); err != nil {
		return err
	}
	h, err := sample.Sign("calcom", demoCalcomSecret, body, time.Now())
	if err != nil {
		return err
	}
	req, err := http.NewRequest(http.MethodPost, base+"/webhooks/calcom", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header = h
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s %s: status %d, want 200", trigger, uid, seatRef, resp.StatusCode)
	}
	return nil
}

// TestSeatLeaversEachGetTheirOwnCancellation (issue #35): three attendees take seats of a booking;
// each one leaving while others stay gets their own cancellation email, to their own address, and
// nobody else gets one; a redelivered seat cancel sends nothing more. When the last attendee leaves
// the booking's cancellation goes to its contact (the first attendee) once — or not at all when that
// contact already had their own seat's. A rebuild of the process projection sends nothing; erasing
// the booking removes the seat contacts.
func TestSeatLeaversEachGetTheirOwnCancellation(t *testing.T) {
	t.Parallel() // each has its own database, ports and processes
	w := newStepsWorld(t, nil, nil)
	env := w.env()
	srv := startServe(t, env)
	start := sample.DefaultStart()
	create, cancel := calcom.TriggerBookingCreated, calcom.TriggerBookingCancelled
	wait := func(booking string, want ...string) {
		t.Helper()
		slices.Sort(want)
		waitFor(t, 60*time.Second, "emails of "+booking, func() (bool, string) {
			got := seatMails(w, booking)
			return slices.Equal(got, want), strings.Join(got, "; ")
		})
	}
	quiet := func() { time.Sleep(500 * time.Millisecond) } // anything late would show now

	// seats1: ada, bob, cy join; bob leaves, cy leaves, ada (the booking's contact) leaves last.
	// seats2: ada, bob, cy join; ada leaves first, bob leaves, cy leaves last.
	// The two bookings' deliveries are posted side by side: each booking's arrive in its order, each
	// after the emails of the one before were sent.
	start2 := start.Add(24 * time.Hour) // not the same slot of the same host: no conflict
	for uid, at := range map[string]time.Time{"seats1": start, "seats2": start2} {
		postSeat(t, srv.Base, create, uid, at, 0, uid+"-a", "ada")
		postSeat(t, srv.Base, create, uid, at, time.Second, uid+"-b", "ada", "bob")
		postSeat(t, srv.Base, create, uid, at, 2*time.Second, uid+"-c", "ada", "bob", "cy")
	}
	wait("calcom-seats1", "Booking confirmed ada@example.com")
	wait("calcom-seats2", "Booking confirmed ada@example.com")
	var n int
	require.NoError(t, w.db(t).QueryRow(context.Background(), `SELECT count(*) FROM seat_contacts`).Scan(&n))
	assert.Equal(t, 6, n, "a contact per seat")

	postSeat(t, srv.Base, cancel, "seats1", start, time.Hour, "seats1-b", "bob")
	postSeat(t, srv.Base, cancel, "seats2", start2, time.Hour, "seats2-a", "ada")
	wait("calcom-seats1", "Booking confirmed ada@example.com", "Seat canceled bob@example.com")
	wait("calcom-seats2", "Booking confirmed ada@example.com", "Seat canceled ada@example.com")
	// The same seat cancel again (a redelivery) sends nothing more.
	postSeat(t, srv.Base, cancel, "seats1", start, time.Hour, "seats1-b", "bob")
	postSeat(t, srv.Base, cancel, "seats2", start2, 2*time.Hour, "seats2-b", "bob")
	wait("calcom-seats2", "Booking confirmed ada@example.com", "Seat canceled ada@example.com", "Seat canceled bob@example.com")
	quiet()
	assert.Equal(t, []string{"Booking confirmed ada@example.com", "Seat canceled bob@example.com"}, seatMails(w, "calcom-seats1"))
	postSeat(t, srv.Base, cancel, "seats1", start, 2*time.Hour, "seats1-c", "cy")
	postSeat(t, srv.Base, cancel, "seats2", start2, 3*time.Hour, "seats2-c", "cy")
	wait("calcom-seats1", "Booking confirmed ada@example.com", "Seat canceled bob@example.com", "Seat canceled cy@example.com")
	wait("calcom-seats2", "Booking confirmed ada@example.com", "Seat canceled ada@example.com", "Seat canceled bob@example.com",
		"Seat canceled cy@example.com")
	postSeat(t, srv.Base, cancel, "seats1", start, 3*time.Hour, "seats1-a", "ada")
	wait("calcom-seats1", "Booking confirmed ada@example.com", "Seat canceled bob@example.com", "Seat canceled cy@example.com",
		"Booking canceled ada@example.com")
	w.waitStepsBesideAttendeeUpdates(t, "calcom-seats1", "host_calendar.create=done", "invitee_email.confirmation=done",
		"invitee_email.seat_cancellation=done", "invitee_email.seat_cancellation=done",
		"host_calendar.delete=done", "invitee_email.cancellation=done", "invitee_email.seat_cancellation=skipped")
	w.waitStepsBesideAttendeeUpdates(t, "calcom-seats2", "host_calendar.create=done", "invitee_email.confirmation=done",
		"invitee_email.seat_cancellation=done", "invitee_email.seat_cancellation=done",
		"host_calendar.delete=done", "invitee_email.cancellation=skipped", "invitee_email.seat_cancellation=done")
	quiet()
	require.Len(t, w.smtp.Messages(), 8, "every email above, nothing else")

	// A rebuild of the process projection finds every key: nothing is sent again.
	var steps int
	require.NoError(t, w.db(t).QueryRow(context.Background(), `SELECT count(*) FROM process_steps`).Scan(&steps))
	srv.Stop(t)
	out, errOut, code := cli(t, env, "rebuild", "process", "--quiet")
	require.Equal(t, 0, code, "rebuild process: %s%s", out, errOut)
	srv = startServe(t, env)
	quiet()
	time.Sleep(time.Second)
	assert.Len(t, w.smtp.Messages(), 8, "no email after the rebuild")
	var after int
	require.NoError(t, w.db(t).QueryRow(context.Background(), `SELECT count(*) FROM process_steps`).Scan(&after))
	assert.Equal(t, steps, after, "no new step after the rebuild")

	// Erasing the booking removes its seat contacts.
	out, errOut, code = cli(t, env, "erase", "--booking", "calcom-seats1", "--by", "test")
	require.Equal(t, 0, code, "erase: %s%s", out, errOut)
	require.NoError(t, w.db(t).QueryRow(context.Background(), `SELECT count(*) FROM seat_contacts WHERE booking = 'calcom-seats1'`).Scan(&n))
	assert.Zero(t, n, "the erased booking's seat contacts are gone")
	require.NoError(t, w.db(t).QueryRow(context.Background(), `SELECT count(*) FROM seat_contacts`).Scan(&n))
	assert.Equal(t, 3, n, "another booking's stay (a leaver's cancel keeps the same seat's contact)")
}
