package sample

import (
	"crypto/sha256"
	"encoding/binary"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"bookingledger/adapters/providers/acuity"
)

func acuityKind() kind {
	return kind{
		events:      []string{acuity.ActionScheduled, acuity.ActionRescheduled, acuity.ActionCanceled, acuity.ActionChanged},
		body:        acuityBody,
		contentType: "application/x-www-form-urlencoded",
		sign: func(secret string, body []byte, _ time.Time) (http.Header, error) {
			h := http.Header{}
			h.Set(acuity.SignatureHeader, acuity.Sign(secret, body))
			return h, nil
		},
	}
}

// AcuityAppointmentID is the appointment id an Acuity sample names for a --booking key: the key itself
// when it is an Acuity id (decimal digits), else a stable number derived from it. Acuity's webhooks
// carry nothing but that id, so the Acuity API the server fetches from — the real one, or a fake — must
// know the appointment; the booking is "acuity-<id>".
func AcuityAppointmentID(booking string) string {
	if id, err := acuity.CanonicalID("booking", booking); err == nil {
		return id
	}
	return strconv.FormatUint(uint64(acuityNumber("appointment", booking)), 10)
}

// acuityBody is the form Acuity posts, in its field order: action, id, calendarID, appointmentTypeID.
// Only the action and the booking key shape it (and the host the calendar id): start and end live at
// the Acuity API, not in the webhook.
func acuityBody(event string, p Params) (any, error) {
	calendar := strconv.FormatUint(uint64(acuityNumber("calendar", p.Host)), 10)
	if id, err := acuity.CanonicalID("host", p.Host); err == nil {
		calendar = id
	}
	body := "action=" + url.QueryEscape(event) +
		"&id=" + AcuityAppointmentID(p.Booking) +
		"&calendarID=" + calendar +
		"&appointmentTypeID=" + strconv.FormatUint(uint64(acuityNumber("appointment-type", p.Host)), 10)
	return []byte(body), nil
}

// acuityNumber derives a stable Acuity-style id (Acuity's ids are integers).
func acuityNumber(kind, key string) uint32 {
	sum := sha256.Sum256([]byte("acuity-" + kind + "\x00" + key))
	return 1_000_000 + binary.BigEndian.Uint32(sum[:4])%900_000_000
}
