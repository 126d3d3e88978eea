package providers

import (
	"fmt"
	"strings"
	"time"
	"unicode"

	"bookingledger/domain/booking"
)

// Unmappable builds a Map error wrapping ErrUnmappable.
func Unmappable(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnmappable, fmt.Sprintf(format, args...))
}

// ParseTime reads an RFC 3339 time (fractions allowed) and returns it in UTC, so equal instants from
// different offsets compare and encode alike. field names the JSON field in the error.
func ParseTime(field, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, Unmappable("%s missing", field)
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, Unmappable("%s %q is not an RFC 3339 time", field, Clip(s))
	}
	return CheckTime(field, t)
}

// CheckTime returns t in UTC when an event can carry it (booking.CheckTime), else an ErrUnmappable
// error naming field: RFC 3339 offsets reach ±23:59, so a four-digit year may still be outside
// 0000–9999 in UTC.
func CheckTime(field string, t time.Time) (time.Time, error) {
	if err := booking.CheckTime(t); err != nil {
		return time.Time{}, Unmappable("%s: %v", field, err)
	}
	return t.UTC(), nil
}

// Capacity reads a meeting's invitee limit as providers send it: below 2 (absent, 0, 1, negative)
// is a one-to-one meeting, 1; above booking.MaxCapacity the body is unmappable.
func Capacity(field string, n int) (int, error) {
	if n > booking.MaxCapacity {
		return 0, Unmappable("%s %d is more than %d", field, n, booking.MaxCapacity)
	}
	return max(n, 1), nil
}

// Token checks that a provider identifier can take part in identities, IDs and stream names: present,
// at most 512 bytes, and free of spaces and control characters (identities join their parts with
// spaces, so a part with a space could be confused with two parts).
func Token(field, s string) error {
	if s == "" {
		return Unmappable("%s missing", field)
	}
	if len(s) > 512 {
		return Unmappable("%s longer than 512 bytes", field)
	}
	if strings.IndexFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) || r == unicode.ReplacementChar }) >= 0 {
		return Unmappable("%s %q contains white space or control characters", field, Clip(s))
	}
	return nil
}

// BookingPrefixes are the provider prefixes of bookingledger booking IDs, the one list of them.
func BookingPrefixes() []string {
	return []string{"calendly-", "calcom-", "acuity-", "stripe-", "standard-"}
}

// ParseBookingRef validates a booking ID that arrives from outside (Stripe metadata.booking_id,
// client_reference_id): it must name a booking the way the ledger does, "<provider>-<key>".
func ParseBookingRef(field, s string) (booking.ID, error) {
	if err := Token(field, s); err != nil {
		return "", err
	}
	for _, p := range BookingPrefixes() {
		if strings.HasPrefix(s, p) && len(s) > len(p) {
			id := booking.ID(s)
			if err := id.Validate(); err != nil {
				return "", Unmappable("%s: %v", field, err)
			}
			return id, nil
		}
	}
	return "", Unmappable("%s %q is not a bookingledger booking id (want %s<key>)", field, Clip(s), strings.Join(BookingPrefixes(), "|"))
}
