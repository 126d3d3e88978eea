package relay

import (
	"slices"
	"time"

	"bookingledger/domain/eventlog"
)

// Rule is what an endpoint takes of the events recorded from Since on: its type patterns and its
// filter. A change of an endpoint's types or filter adds a rule; an event is matched by the rule in
// force when it was recorded, so a change applies to the events recorded after it (a replay covers
// the past).
type Rule struct {
	Since  time.Time
	Types  []string
	Filter Filter
}

// Endpoint is what the fan-out knows of an endpoint.
type Endpoint struct {
	ID       int64
	Created  time.Time
	Disabled bool
	// Rules in any order; none: every event (the endpoint's types and filter as stored are its only
	// rule, which the adapter gives as one).
	Rules []Rule
}

// RuleAt is the rule in force at t: the latest whose Since is not after t, or the earliest when t
// is before every rule.
func (e Endpoint) RuleAt(t time.Time) Rule {
	var (
		best  Rule
		found bool
	)
	for _, r := range e.Rules {
		if !r.Since.After(t) && (!found || r.Since.After(best.Since)) {
			best, found = r, true
		}
	}
	if found {
		return best
	}
	for _, r := range e.Rules {
		if !found || r.Since.Before(best.Since) {
			best, found = r, true
		}
	}
	return best
}

// Event is what the fan-out knows of an event.
type Event struct {
	Type       string
	RecordedAt time.Time
}

// Takes reports whether endpoint e takes ev under the rule in force when ev was recorded: an event
// recorded before the endpoint existed never (a replay backfills it), one of a type its patterns do
// not match never, and otherwise as its filter says of the subject, which subject computes only when
// the filter needs it.
func Takes(e Endpoint, ev Event, subject func() Subject) bool {
	if ev.RecordedAt.Before(e.Created) {
		return false
	}
	return Selects(e.RuleAt(ev.RecordedAt), ev.Type, subject)
}

// Selects reports whether rule r selects an event of type typ whose subject is subject's.
func Selects(r Rule, typ string, subject func() Subject) bool {
	if !MatchTypes(r.Types, typ) {
		return false
	}
	return r.Filter.Empty() || r.Filter.Match(subject())
}

// FanOut returns the endpoints, in the order given, that take ev.
func FanOut(eps []Endpoint, ev Event, subject func() Subject) []Endpoint {
	var out []Endpoint
	var (
		sub  Subject
		have bool
	)
	once := func() Subject {
		if !have {
			sub, have = subject(), true
		}
		return sub
	}
	for _, e := range eps {
		if Takes(e, ev, once) {
			out = append(out, e)
		}
	}
	return slices.Clip(out)
}

// NeedsSubjects reports whether any endpoint has a filter, so the adapter must fold events'
// streams for the fan-out.
func NeedsSubjects(eps []Endpoint) bool {
	for _, e := range eps {
		for _, r := range e.Rules {
			if !r.Filter.Empty() {
				return true
			}
		}
	}
	return false
}

// Planned is a delivery to plan: Event to Endpoint, about Booking ("" for a link event), in State.
type Planned struct {
	Endpoint int64
	Event    eventlog.RecordedEvent
	Booking  string
	State    string
}

// Plan returns the deliveries of events: one per endpoint that takes the event under the rule in
// force when it was recorded (FanOut; earlier events reach a new endpoint by replay), paused for a
// disabled endpoint. subject computes an event's subject (Subjects.Of) when a filter needs it.
func Plan(eps []Endpoint, events []eventlog.RecordedEvent, subject func(stream string, version uint64) Subject) []Planned {
	var out []Planned
	for _, ev := range events {
		b, ok := Relayable(ev.StreamID)
		if !ok {
			continue
		}
		for _, ep := range FanOut(eps, Event{Type: ev.Type, RecordedAt: ev.RecordedAt},
			func() Subject { return subject(ev.StreamID, ev.Version) }) {
			state := StatePending
			if ep.Disabled {
				state = StatePaused
			}
			out = append(out, Planned{Endpoint: ep.ID, Event: ev, Booking: b, State: state})
		}
	}
	return out
}

// Backfills returns the events of page that a replay of q backfills for endpoint ep, whose rule now
// is rule, as pending deliveries (if they have none yet, which the adapter finds): relayable events
// whose recorded time, as the deliveries store it (microseconds), is in [From, To), of a type both
// the endpoint takes now (types and filter) and q selects.
func Backfills(page []eventlog.RecordedEvent, ep int64, rule Rule, q ReplayQuery, subject func(stream string, version uint64) Subject) []Planned {
	var out []Planned
	for _, ev := range page {
		b, ok := Relayable(ev.StreamID)
		if !ok || !q.Covers(ev.RecordedAt, ev.Type) ||
			!Selects(rule, ev.Type, func() Subject { return subject(ev.StreamID, ev.Version) }) {
			continue
		}
		out = append(out, Planned{Endpoint: ep, Event: ev, Booking: b, State: StatePending})
	}
	return out
}
