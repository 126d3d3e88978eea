package acuity

import (
	"net/url"
	"strconv"
	"strings"

	"bookingledger/adapters/providers"
)

// Actions in their short form. Webhooks set up in Acuity's settings send these; subscriptions made
// through the API send the appointment ones prefixed with "appointment." (see DynamicPrefix). Both
// forms are read and mean the same.
const (
	ActionScheduled      = "scheduled"
	ActionRescheduled    = "rescheduled"
	ActionCanceled       = "canceled"
	ActionChanged        = "changed"
	ActionOrderCompleted = "order.completed"

	// DynamicPrefix starts the appointment actions of API-created subscriptions.
	DynamicPrefix = "appointment."
)

// maxIDDigits bounds an Acuity id: they are positive integers, and a uint64 holds 20 digits.
const maxIDDigits = 20

// Notification is a parsed webhook body: what happened to which appointment, and nothing else.
type Notification struct {
	// RawAction is the action exactly as sent, e.g. "appointment.rescheduled".
	RawAction string
	// Action is its short form: "rescheduled" for both "rescheduled" and "appointment.rescheduled".
	Action string
	// ID is the appointment id (the order id for order.completed) in canonical decimal form.
	ID string
	// CalendarID and AppointmentTypeID are as sent; the fetched appointment is what counts.
	CalendarID        string
	AppointmentTypeID string
}

// Fetches reports whether the action is about an appointment, whose state must be fetched.
func (n Notification) Fetches() bool {
	switch n.Action {
	case ActionScheduled, ActionRescheduled, ActionCanceled, ActionChanged:
		return true
	}
	return false
}

// DeliveryID is the receipts' name of the delivery, "acuity:<action as sent>:<id>". Acuity gives a
// delivery no identity of its own, and this one is shared by every change of the appointment with the
// same action: receipts tell them apart by time, events by their state-derived identities.
func (n Notification) DeliveryID() string {
	return Name + ":" + n.RawAction + ":" + n.ID
}

// ParseNotification reads a form-encoded webhook body. Errors wrap providers.ErrUnmappable: a body
// without an action, or without a decimal id, will never map, however often it is fetched.
func ParseNotification(body []byte) (Notification, error) {
	q, err := url.ParseQuery(string(body))
	if err != nil {
		return Notification{}, providers.Unmappable("acuity body is not form-encoded: %v", err)
	}
	single := func(key string) (string, error) {
		vs := q[key]
		switch len(vs) {
		case 0:
			return "", nil
		case 1:
			return vs[0], nil
		}
		return "", providers.Unmappable("acuity body has %d %s fields; want one", len(vs), key)
	}
	var n Notification
	if n.RawAction, err = single("action"); err != nil {
		return Notification{}, err
	}
	if err := providers.Token("action", n.RawAction); err != nil {
		return Notification{}, err
	}
	n.Action = strings.TrimPrefix(n.RawAction, DynamicPrefix)
	rawID, err := single("id")
	if err != nil {
		return Notification{}, err
	}
	if n.ID, err = CanonicalID("id", rawID); err != nil {
		return Notification{}, err
	}
	if n.CalendarID, err = single("calendarID"); err != nil {
		return Notification{}, err
	}
	if n.AppointmentTypeID, err = single("appointmentTypeID"); err != nil {
		return Notification{}, err
	}
	return n, nil
}

// CanonicalID checks that s is an Acuity id — 1 to 20 decimal digits that fit a uint64 — and returns
// it without leading zeros, so that "0123" and "123" name one appointment (and one URL path: the id is
// put into the fetch URL, so nothing but digits may pass). Errors wrap providers.ErrUnmappable.
func CanonicalID(field, s string) (string, error) {
	if s == "" {
		return "", providers.Unmappable("%s missing", field)
	}
	if len(s) > maxIDDigits {
		return "", providers.Unmappable("%s longer than %d digits", field, maxIDDigits)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return "", providers.Unmappable("%s %q is not a decimal id", field, providers.Clip(s))
		}
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return "", providers.Unmappable("%s %q is out of range", field, providers.Clip(s))
	}
	return strconv.FormatUint(v, 10), nil
}
