package relay

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"bookingledger/domain/booking"
	"bookingledger/domain/ledger"
	"bookingledger/domain/resource"
)

// ErrInvalidURL: not an absolute http(s) URL the relay can call.
var ErrInvalidURL = errors.New("invalid endpoint url")

// ParseURL checks the shape of an endpoint URL without resolving it.
func ParseURL(raw string) (*url.URL, error) {
	if len(raw) > 2048 {
		return nil, fmt.Errorf("%w: longer than 2048 bytes", ErrInvalidURL)
	}
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("%w: scheme must be http or https", ErrInvalidURL)
	}
	if u.Hostname() == "" {
		return nil, fmt.Errorf("%w: no host", ErrInvalidURL)
	}
	if u.User != nil {
		// Credentials in a URL end up in logs and listings; receivers authenticate us by signature.
		return nil, fmt.Errorf("%w: user information is not allowed in the url", ErrInvalidURL)
	}
	if u.Fragment != "" {
		return nil, fmt.Errorf("%w: fragments are not sent; remove #%s", ErrInvalidURL, u.Fragment)
	}
	return u, nil
}

// Host is what alerts and operational events say of an endpoint's URL: its host, since the path and
// query may hold the receiver's own token (the URL itself when it does not parse).
func Host(raw string) string {
	if u, err := ParseURL(raw); err == nil {
		return u.Host
	}
	return raw
}

// CheckDescription validates an endpoint's description: UTF-8 without NUL, at most 500 bytes.
func CheckDescription(d string) error {
	if len(d) > 500 || !ledger.Storable(d) {
		return fmt.Errorf("%w: description must be UTF-8 without NUL, at most 500 bytes", ErrInvalid)
	}
	return nil
}

// ActiveSecrets returns the secrets an endpoint signs with at now, newest first: its secret, and the
// one it rotated out while that one's overlap lasts (until).
func ActiveSecrets(secret string, previous *string, until *time.Time, now time.Time) []string {
	out := []string{secret}
	if previous != nil && until != nil && now.Before(*until) {
		out = append(out, *previous)
	}
	return out
}

// Relayable reports whether the relay delivers the events of stream at all, and the booking they are
// about (none for a link event): every event of the ledger's log, a booking's or the calendar's
// links. The one rule the fan-out and a replay's backfill share.
func Relayable(stream string) (string, bool) {
	if b, ok := booking.FromStream(stream); ok {
		return string(b), true
	}
	return "", stream == resource.Stream
}
