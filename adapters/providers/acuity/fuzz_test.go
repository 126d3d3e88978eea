package acuity_test

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/providers"
	"bookingledger/adapters/providers/acuity"
	"bookingledger/adapters/providers/providertest"
	"bookingledger/domain/booking"
)

// FuzzVerify drives the X-Acuity-Signature parser and verifier: never a panic, only verification
// sentinels, and success only when the header is the body's HMAC under a configured key.
func FuzzVerify(f *testing.F) {
	for _, v := range vectors(f) {
		f.Add(v.Signature, []byte(v.Body))
		// The same signature with a line break that Go's base64 decoder skips (found by CI's fuzzing).
		f.Add(v.Signature[:43]+"\n"+v.Signature[43:], []byte(v.Body))
	}
	f.Add("", []byte("action=scheduled&id=1"))
	f.Add("====", []byte(nil))
	f.Add(strings.Repeat("A", 43)+"=", []byte("x"))

	p, err := acuity.New(acuity.Config{Keys: providers.NewSecrets(newerKey, keyA), UserID: userID})
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, sig string, body []byte) {
		h := http.Header{}
		h.Set(acuity.SignatureHeader, sig)
		got, err := p.Verify(h, body, time.Now())
		providertest.CheckVerifyError(t, err)
		if err != nil {
			return
		}
		require.Equal(t, 1, got.SecretIndex)
		assert.Equal(t, acuity.Sign(keyA, body), strings.TrimSpace(h.Get(acuity.SignatureHeader)))
	})
}

// FuzzParseNotification: the form parser never panics; it either refuses with ErrUnmappable or yields
// a notification whose id is canonical decimal (it becomes part of a URL path) and whose delivery ID
// is stable.
func FuzzParseNotification(f *testing.F) {
	for _, v := range vectors(f) {
		f.Add([]byte(v.Body))
	}
	f.Add([]byte("action=appointment.canceled&id=007"))
	f.Add([]byte("action=scheduled&id=1%2F..%2F"))
	f.Add([]byte("id=1&id=2&action=x"))
	f.Fuzz(func(t *testing.T, body []byte) {
		n, err := acuity.ParseNotification(body)
		if err != nil {
			assert.ErrorIs(t, err, providers.ErrUnmappable)
			return
		}
		require.NotEmpty(t, n.ID)
		v, err := strconv.ParseUint(n.ID, 10, 64)
		require.NoError(t, err, "only digits: %q", n.ID)
		assert.Equal(t, strconv.FormatUint(v, 10), n.ID, "canonical")
		assert.Equal(t, strings.TrimPrefix(n.RawAction, acuity.DynamicPrefix), n.Action)
		again, err := acuity.ParseNotification(body)
		require.NoError(t, err)
		assert.Equal(t, n, again)
	})
}

// FuzzMapAppointment feeds the pure mapper a body and an appointment document: never a panic; errors
// are ErrUnmappable (the body) or ErrBadAppointment (the document); a result keeps the Map contract and
// is deterministic.
func FuzzMapAppointment(f *testing.F) {
	docs := providertest.Glob(f, "appointment_*.json")
	for i, v := range vectors(f) {
		f.Add([]byte(v.Body), providertest.ReadFile(f, docs[i%len(docs)]))
	}
	f.Add([]byte("action=changed&id=1148237562"), []byte(`{"id":"1148237562","calendarID":"1","duration":1,"datetime":"2025-06-30T10:15:00+01:00"}`))
	f.Add([]byte("action=changed&id=1"), []byte(`{"id":1,"calendarID":1,"duration":"10080","datetime":"9999-12-31T23:59:59-2359","canceled":true,"noShow":true}`))
	// Times in the years 10000 and -1 UTC: their events could not be encoded; found by reading.
	f.Add([]byte("action=scheduled&id=1"), []byte(`{"id":1,"calendarID":1,"duration":"60","datetime":"9999-12-31T23:30:00+0000"}`))
	// The zero time as the start: Decide refuses a slot without one, after the mapping accepted it.
	f.Add([]byte("action=scheduled&id=1"), []byte(`{"id":1,"calendarID":1,"duration":"60","datetime":"0001-01-01T00:00:00+0000"}`))
	f.Add([]byte("action=scheduled&id=1"), []byte(`{"id":1,"calendarID":1,"duration":"60","datetime":"2025-06-30T10:15:00+0100","datetimeCreated":"0000-01-01T00:00:00+0100"}`))
	at := time.Date(2025, 6, 10, 8, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, body, doc []byte) {
		n, err := acuity.ParseNotification(body)
		if err != nil {
			assert.ErrorIs(t, err, providers.ErrUnmappable)
			return
		}
		a, err := acuity.ParseAppointment(doc)
		if err != nil {
			assert.ErrorIs(t, err, acuity.ErrBadAppointment)
			return
		}
		m, err := acuity.MapAppointment(n, a, at)
		if err != nil {
			assert.True(t, errors.Is(err, acuity.ErrBadAppointment), "%v", err)
			return
		}
		providertest.CheckMapped(t, acuity.Name, m, nil)
		again, err := acuity.MapAppointment(n, a, at)
		require.NoError(t, err)
		assert.Equal(t, m, again)
		if !n.Fetches() {
			assert.Empty(t, m.Events)
			return
		}
		// The anchor (the one Scheduled) folds before everything the delivery observed.
		sorted := booking.Sorted(m.Events)
		require.NotEmpty(t, sorted)
		assert.Equal(t, booking.TypeScheduled, sorted[0].Type())
		for _, e := range m.Events {
			assert.Equal(t, acuity.BookingID(n.ID), e.Booking)
		}
	})
}
