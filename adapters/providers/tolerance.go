package providers

import (
	"fmt"
	"strings"
	"time"

	"bookingledger/domain/ledger"
)

// Tolerance bounds how far a signed timestamp may lie from the receiver's clock. Past limits replays
// of captured requests; Future limits a sender clock running ahead (or a forged far-future stamp that
// would otherwise stay "fresh" forever).
type Tolerance struct {
	Past   time.Duration
	Future time.Duration
}

// Within is a tolerance of d on both sides.
func Within(d time.Duration) Tolerance { return Tolerance{Past: d, Future: d} }

// ToleranceOr is Within(d), or Within(def) when d is not positive: a zero value from configuration
// means "the provider's default", never "no check".
func ToleranceOr(d, def time.Duration) Tolerance {
	if d <= 0 {
		return Within(def)
	}
	return Within(d)
}

// Check returns nil when signedAt lies within the tolerance of now, else an error wrapping ErrStale.
// It compares instants, not durations: now.Sub saturates for far-off stamps, and negating the
// saturated minimum would overflow back to a negative age that passes.
func (t Tolerance) Check(signedAt, now time.Time) error {
	switch {
	case signedAt.Before(now.Add(-t.Past)):
		return fmt.Errorf("%w: signed %s ago, tolerance %s", ErrStale, now.Sub(signedAt).Round(time.Second), t.Past)
	case signedAt.After(now.Add(t.Future)):
		return fmt.Errorf("%w: signed %s in the future, tolerance %s", ErrStale, signedAt.Sub(now).Round(time.Second), t.Future)
	}
	return nil
}

// ParseTolerance reads a tolerance setting (a Go duration such as "180s" or "5m"). Empty means def.
// Zero and negative durations are refused: turning the replay window off is not a configuration.
func ParseTolerance(s string, def time.Duration) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("parse tolerance %q: %w", s, err)
	}
	if d <= 0 {
		return 0, fmt.Errorf("parse tolerance %q: must be positive", s)
	}
	return d, nil
}

// ParseUnix reads a signed timestamp: unsigned decimal seconds since the epoch. Signs, spaces and
// fractions are refused; the value must fit comfortably in time.Time arithmetic.
func ParseUnix(s string) (time.Time, error) {
	if s == "" || len(s) > 12 {
		return time.Time{}, fmt.Errorf("%w: timestamp %q is not 1 to 12 decimal digits", ErrMalformedHeader, Clip(s))
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return time.Time{}, fmt.Errorf("%w: timestamp %q is not decimal", ErrMalformedHeader, Clip(s))
		}
		n = n*10 + int64(c-'0')
	}
	return time.Unix(n, 0).UTC(), nil
}

// Clip keeps request text quoted in an error message short and storable (an error may become a
// receipt's reason).
func Clip(s string) string { return ledger.StorableText(s, 40) }
