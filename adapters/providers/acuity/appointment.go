package acuity

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"bookingledger/adapters/providers"
	"bookingledger/domain/booking"
)

// ErrBadAppointment: the appointments API answered 200 with something that is not a usable
// appointment (not JSON, missing or invalid fields, another id). It is treated like a failed fetch —
// deferred and retried, then quarantined — because the body that named the appointment is sound and
// the API may answer properly next time.
var ErrBadAppointment = errors.New("acuity appointment response is not usable")

// TimeLayout is how Acuity writes datetime and datetimeCreated: an offset without a colon
// ("2025-06-30T10:15:00+0100"), which RFC 3339 parsers refuse.
const TimeLayout = "2006-01-02T15:04:05-0700"

// maxDurationMinutes bounds an appointment: a week. Longer values are data errors, not bookings.
const maxDurationMinutes = 7 * 24 * 60

// Appointment is the part of GET /appointments/{id} the ledger uses. The client's e-mail address and
// name are decoded for the contacts table only (never into events); phone numbers, notes and form
// answers are never decoded.
type Appointment struct {
	ID string
	// Start and End are in UTC; End is Start plus duration minutes.
	Start time.Time
	End   time.Time
	// CalendarID is the calendar (staff member, room) the appointment occupies.
	CalendarID string
	// ClassID is set when the appointment is a seat in a class (a group event); "" otherwise.
	ClassID  string
	Canceled bool
	NoShow   bool
	// Created is datetimeCreated in UTC; zero when Acuity sent none.
	Created time.Time
	// Timezone is the client's time zone name: datetime carries its own offset, and the contact keeps
	// the name for the emails' times (providers.InZone).
	Timezone string
	// Email and Name are the client's, for providers.Mapped.Contacts.
	Email string
	Name  string
}

type appointmentJSON struct {
	ID              *idValue  `json:"id"`
	Datetime        string    `json:"datetime"`
	Duration        *idValue  `json:"duration"`
	CalendarID      *idValue  `json:"calendarID"`
	ClassID         *idValue  `json:"classID"`
	Canceled        *boolFlag `json:"canceled"`
	NoShow          *boolFlag `json:"noShow"`
	DatetimeCreated string    `json:"datetimeCreated"`
	Timezone        string    `json:"timezone"`
	Email           string    `json:"email"`
	FirstName       string    `json:"firstName"`
	LastName        string    `json:"lastName"`
}

// ParseAppointment reads an appointment document. Errors wrap ErrBadAppointment.
func ParseAppointment(b []byte) (Appointment, error) {
	var raw appointmentJSON
	if err := json.Unmarshal(b, &raw); err != nil {
		return Appointment{}, fmt.Errorf("%w: not an appointment object: %v", ErrBadAppointment, err)
	}
	var a Appointment
	var err error
	if raw.ID == nil {
		return Appointment{}, fmt.Errorf("%w: id missing", ErrBadAppointment)
	}
	if a.ID, err = canonicalValue("id", *raw.ID); err != nil {
		return Appointment{}, err
	}
	if raw.CalendarID == nil {
		return Appointment{}, fmt.Errorf("%w: calendarID missing", ErrBadAppointment)
	}
	if a.CalendarID, err = canonicalValue("calendarID", *raw.CalendarID); err != nil {
		return Appointment{}, err
	}
	if raw.ClassID != nil && *raw.ClassID != "" {
		if a.ClassID, err = canonicalValue("classID", *raw.ClassID); err != nil {
			return Appointment{}, err
		}
	}
	if a.Start, err = parseTime("datetime", raw.Datetime); err != nil {
		return Appointment{}, err
	}
	if raw.Duration == nil {
		return Appointment{}, fmt.Errorf("%w: duration missing", ErrBadAppointment)
	}
	minutes, err := strconv.Atoi(string(*raw.Duration))
	if err != nil || minutes < 1 || minutes > maxDurationMinutes {
		return Appointment{}, fmt.Errorf("%w: duration %q is not 1 to %d minutes", ErrBadAppointment, providers.Clip(string(*raw.Duration)), maxDurationMinutes)
	}
	a.End = a.Start.Add(time.Duration(minutes) * time.Minute)
	if err := booking.CheckTime(a.End); err != nil {
		return Appointment{}, fmt.Errorf("%w: datetime plus duration: %w", ErrBadAppointment, err)
	}
	if raw.DatetimeCreated != "" {
		if a.Created, err = parseTime("datetimeCreated", raw.DatetimeCreated); err != nil {
			return Appointment{}, err
		}
	}
	a.Canceled = raw.Canceled != nil && bool(*raw.Canceled)
	a.NoShow = raw.NoShow != nil && bool(*raw.NoShow)
	a.Timezone = raw.Timezone
	a.Email = raw.Email
	a.Name = strings.TrimSpace(raw.FirstName + " " + raw.LastName)
	return a, nil
}

// parseTime reads Acuity's layout, or RFC 3339 should the API ever add the colon, and returns UTC so
// that identities and comparisons do not depend on the offset the instant was written in.
func parseTime(field, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, fmt.Errorf("%w: %s missing", ErrBadAppointment, field)
	}
	t, err := time.Parse(TimeLayout, s)
	if err != nil {
		if t, err = time.Parse(time.RFC3339, s); err != nil {
			return time.Time{}, fmt.Errorf("%w: %s %q is not a time like 2025-06-30T10:15:00+0100", ErrBadAppointment, field, providers.Clip(s))
		}
	}
	if err := booking.CheckTime(t); err != nil {
		return time.Time{}, fmt.Errorf("%w: %s: %w", ErrBadAppointment, field, err)
	}
	return t.UTC(), nil
}

func canonicalValue(field string, v idValue) (string, error) {
	id, err := CanonicalID(field, string(v))
	if err != nil {
		return "", fmt.Errorf("%w: %s %q is not a decimal id", ErrBadAppointment, field, providers.Clip(string(v)))
	}
	return id, nil
}

// idValue is an integer Acuity may write as a JSON number or, for some fields (duration), a string.
// It keeps the digits as text; null leaves it empty.
type idValue string

func (v *idValue) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case string(b) == "null":
		*v = ""
		return nil
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*v = idValue(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("want a number or a string, got %.20s", b)
	}
	*v = idValue(n.String())
	return nil
}

// boolFlag is a flag Acuity writes as a JSON boolean; null means false.
type boolFlag bool

func (f *boolFlag) UnmarshalJSON(b []byte) error {
	switch string(bytes.TrimSpace(b)) {
	case "true":
		*f = true
	case "false", "null":
		*f = false
	default:
		return fmt.Errorf("want true or false, got %.20s", b)
	}
	return nil
}
