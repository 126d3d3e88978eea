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
	return t.UTC(), nil
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
