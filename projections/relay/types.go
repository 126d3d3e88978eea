package relay

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// ErrInvalidTypes is a type pattern list that cannot be used.
var ErrInvalidTypes = errors.New("invalid type filter")

// MaxPatterns bounds an endpoint's type patterns; MaxPatternLength one pattern.
const (
	MaxPatterns      = 32
	MaxPatternLength = 128
)

// ParseTypes splits a comma-separated list ("booking.scheduled.*, booking.payment_*") into patterns;
// empty means every type.
func ParseTypes(s string) ([]string, error) {
	var out []string
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out, CheckTypes(out)
}

// CheckTypes validates type patterns: lowercase letters, digits, '.', '_', '-' and '*' (any run of
// characters), at most MaxPatterns patterns of MaxPatternLength bytes.
func CheckTypes(patterns []string) error {
	if len(patterns) > MaxPatterns {
		return fmt.Errorf("%w: more than %d patterns", ErrInvalidTypes, MaxPatterns)
	}
	for _, p := range patterns {
		if p == "" || len(p) > MaxPatternLength {
			return fmt.Errorf("%w: pattern must have 1 to %d bytes", ErrInvalidTypes, MaxPatternLength)
		}
		for _, c := range p {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.ContainsRune("._-*", c)) {
				return fmt.Errorf("%w: %q: only a-z, 0-9, '.', '_', '-' and '*' are allowed", ErrInvalidTypes, p)
			}
		}
	}
	return nil
}

// MatchTypes reports whether an event type passes the patterns (none: every type).
func MatchTypes(patterns []string, eventType string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		// CheckTypes admits no '/', '[' or '\\', so path.Match's '*' is "any run of characters".
		if ok, _ := path.Match(p, eventType); ok {
			return true
		}
	}
	return false
}

// OperationalPrefix is how an endpoint's type patterns name operational events: "operational.*"
// subscribes to every one, "operational.endpoint.*" to the endpoint ones.
const OperationalPrefix = "operational."

// TakesOperational reports whether patterns subscribe to the operational event of type typ
// ("endpoint.failing"): one of them starts with OperationalPrefix and matches the prefixed type. An
// endpoint without patterns, or with only "*", takes the ledger's events and no operational ones.
func TakesOperational(patterns []string, typ string) bool {
	for _, p := range patterns {
		if !strings.HasPrefix(p, OperationalPrefix) {
			continue
		}
		if ok, _ := path.Match(p, OperationalPrefix+typ); ok {
			return true
		}
	}
	return false
}
