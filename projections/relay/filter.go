package relay

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"bookingledger/domain/booking"
	"bookingledger/domain/resource"
)

// ErrInvalidFilter is a filter that cannot be parsed or used.
var ErrInvalidFilter = errors.New("invalid filter")

// Filter keys.
const (
	KeyProvider = "provider"
	KeyResource = "resource"
	KeyStatus   = "status"
)

// Statuses a status term may name: a booking's status after the event.
var Statuses = []string{string(booking.StatusRequested), string(booking.StatusActive), string(booking.StatusCanceled),
	string(booking.StatusRejected)}

// MaxFilterValues bounds the values of one filter; MaxFilterValueLength one value.
const (
	MaxFilterValues      = 64
	MaxFilterValueLength = resource.MaxIdentifierLength
)

// Filter narrows an endpoint's events beyond their types: an event passes when it passes every term
// that has values, and a term passes when one of its values matches. The zero Filter passes every
// event.
type Filter struct {
	// Providers are provider names ("calcom"); the booking's provider must be one of them.
	Providers []string
	// Resources are linked resources' names or provider resource identifiers; one of the booking's
	// slot resources, or the name it is linked to, must be one of them.
	Resources []string
	// Statuses are booking statuses (Statuses); the booking's status after the event must be one.
	Statuses []string
}

// Empty reports whether f passes every event.
func (f Filter) Empty() bool {
	return len(f.Providers) == 0 && len(f.Resources) == 0 && len(f.Statuses) == 0
}

// ParseFilter reads the filter syntax: terms separated by ',', each KEY=VALUE with the values of one
// key separated by '|', e.g. "provider=calcom|acuity,status=active,resource=room-a". A key given twice
// adds values. Keys: provider, resource, status. An empty string is the empty filter.
func ParseFilter(s string) (Filter, error) {
	var f Filter
	for term := range strings.SplitSeq(s, ",") {
		term = strings.TrimSpace(term)
		if term == "" {
			continue
		}
		key, values, ok := strings.Cut(term, "=")
		if !ok {
			return Filter{}, fmt.Errorf("%w: %q: want KEY=VALUE (keys: provider, resource, status)", ErrInvalidFilter, term)
		}
		key = strings.TrimSpace(key)
		var dst *[]string
		switch key {
		case KeyProvider:
			dst = &f.Providers
		case KeyResource:
			dst = &f.Resources
		case KeyStatus:
			dst = &f.Statuses
		default:
			return Filter{}, fmt.Errorf("%w: unknown key %q (keys: provider, resource, status)", ErrInvalidFilter, key)
		}
		for v := range strings.SplitSeq(values, "|") {
			v = strings.TrimSpace(v)
			if v == "" {
				return Filter{}, fmt.Errorf("%w: %q: empty value", ErrInvalidFilter, term)
			}
			if !slices.Contains(*dst, v) {
				*dst = append(*dst, v)
			}
		}
	}
	return f, f.Check()
}

// Check validates f: known statuses, provider names of a-z, 0-9, '_' and '-', resources without the
// syntax's separators, at most MaxFilterValues values.
func (f Filter) Check() error {
	if n := len(f.Providers) + len(f.Resources) + len(f.Statuses); n > MaxFilterValues {
		return fmt.Errorf("%w: %d values, at most %d", ErrInvalidFilter, n, MaxFilterValues)
	}
	for _, p := range f.Providers {
		if p == "" || len(p) > 64 || strings.IndexFunc(p, func(c rune) bool {
			return !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-')
		}) >= 0 {
			return fmt.Errorf("%w: provider %q: 1 to 64 of a-z, 0-9, '_' and '-'", ErrInvalidFilter, p)
		}
	}
	for _, r := range f.Resources {
		if r == "" || len(r) > MaxFilterValueLength || strings.ContainsAny(r, ",|=") || strings.TrimSpace(r) != r {
			return fmt.Errorf("%w: resource %q: 1 to %d bytes, without ',', '|', '=' or surrounding spaces",
				ErrInvalidFilter, r, MaxFilterValueLength)
		}
	}
	for _, s := range f.Statuses {
		if !slices.Contains(Statuses, s) {
			return fmt.Errorf("%w: status %q: want one of %s", ErrInvalidFilter, s, strings.Join(Statuses, ", "))
		}
	}
	return nil
}

// String is f in the filter syntax, its terms in key order (provider, resource, status): what
// ParseFilter reads back to f. The empty filter is "".
func (f Filter) String() string {
	var terms []string
	for _, t := range []struct {
		key    string
		values []string
	}{{KeyProvider, f.Providers}, {KeyResource, f.Resources}, {KeyStatus, f.Statuses}} {
		if len(t.values) > 0 {
			terms = append(terms, t.key+"="+strings.Join(t.values, "|"))
		}
	}
	return strings.Join(terms, ",")
}

// Subject is what a filter looks at in an event.
type Subject struct {
	// Booking is true for a booking's event; a link event has no provider and no status.
	Booking  bool
	Provider string
	Status   string
	// Resources are the provider resource identifiers of the booking's slot (of a link event: those
	// it links or unlinks), and Names the linked resources' names among them.
	Resources []string
	Names     []string
}

// BookingSubject is the subject of a booking's event: the booking's state after it and the links
// in force.
func BookingSubject(s booking.State, links resource.State) Subject {
	sub := Subject{Booking: true, Provider: s.Provider, Status: string(s.Status)}
	for _, id := range s.Slot.Resources {
		sub.Resources = append(sub.Resources, id)
		if n, ok := links.Owner(id); ok && !slices.Contains(sub.Names, n) {
			sub.Names = append(sub.Names, n)
		}
	}
	return sub
}

// LinkSubject is the subject of a link event: the resource it names and the identifiers it moves.
func LinkSubject(e resource.Event) Subject {
	return Subject{Resources: e.Resources, Names: []string{e.Name}}
}

// Match reports whether the subject passes f. A link event passes only filters without provider and
// status terms, whose resource term (if any) names it.
func (f Filter) Match(s Subject) bool {
	if len(f.Providers) > 0 && (!s.Booking || !slices.Contains(f.Providers, s.Provider)) {
		return false
	}
	if len(f.Statuses) > 0 && (!s.Booking || !slices.Contains(f.Statuses, s.Status)) {
		return false
	}
	if len(f.Resources) > 0 && !slices.ContainsFunc(f.Resources, func(r string) bool {
		return slices.Contains(s.Resources, r) || slices.Contains(s.Names, r)
	}) {
		return false
	}
	return true
}
