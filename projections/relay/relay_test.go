package relay_test

import (
	"errors"
	"testing"
	"time"

	"bookingledger/domain/booking"
	"bookingledger/domain/resource"
	"bookingledger/projections/relay"
)

func TestParseFilterRoundTripsAndRejectsWithTheReason(t *testing.T) {
	f, err := relay.ParseFilter(" status=active|canceled , provider=calcom, resource=room-a,provider=acuity ")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := f.String(), "provider=calcom|acuity,resource=room-a,status=active|canceled"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
	back, err := relay.ParseFilter(f.String())
	if err != nil || back.String() != f.String() {
		t.Fatalf("parse of String() = %v, %v", back, err)
	}
	if e, err := relay.ParseFilter(""); err != nil || !e.Empty() || e.String() != "" {
		t.Fatalf("empty filter: %v, %v", e, err)
	}
	for in, want := range map[string]string{
		"status=scheduled":    `status "scheduled"`,
		"colour=red":          `unknown key "colour"`,
		"provider":            "want KEY=VALUE",
		"provider=":           "empty value",
		"provider=Cal.com":    `provider "Cal.com"`,
		"resource=a|":         "empty value",
		"status=active||":     "empty value",
		"provider=calcom|x y": `provider "x y"`,
	} {
		_, err := relay.ParseFilter(in)
		if !errors.Is(err, relay.ErrInvalidFilter) {
			t.Errorf("ParseFilter(%q) = %v, want ErrInvalidFilter", in, err)
			continue
		}
		if !contains(err.Error(), want) {
			t.Errorf("ParseFilter(%q) = %q, want it to say %q", in, err, want)
		}
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func TestFilterMatchesProviderStatusAndResourceByIdentifierOrName(t *testing.T) {
	links := resource.Fold([]resource.Event{{Type: resource.TypeLinked, Name: "room-a", Resources: []string{"calcom:42"}}})
	sub := relay.BookingSubject(booking.State{Provider: "calcom", Status: booking.StatusActive,
		Slot: booking.Slot{Resources: []string{"calcom:42", "calcom:7"}}}, links)
	for filter, want := range map[string]bool{
		"":                                true,
		"provider=calcom":                 true,
		"provider=acuity":                 false,
		"provider=acuity|calcom":          true,
		"status=active":                   true,
		"status=canceled":                 false,
		"resource=room-a":                 true, // the name calcom:42 is linked to
		"resource=calcom:7":               true, // a provider resource, unlinked
		"resource=room-b":                 false,
		"provider=calcom,status=canceled": false, // every term must pass
		"provider=calcom,resource=room-a": true,
		"provider=calcom,status=requested|active,resource=room-b|calcom:42": true,
	} {
		f, err := relay.ParseFilter(filter)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.Match(sub); got != want {
			t.Errorf("%q.Match = %v, want %v", filter, got, want)
		}
	}
	link := relay.LinkSubject(resource.Event{Type: resource.TypeLinked, Name: "room-a", Resources: []string{"calcom:42"}})
	for filter, want := range map[string]bool{"resource=room-a": true, "resource=calcom:42": true, "resource=room-b": false,
		"provider=calcom": false, "status=active": false} {
		f, _ := relay.ParseFilter(filter)
		if got := f.Match(link); got != want {
			t.Errorf("link event: %q.Match = %v, want %v", filter, got, want)
		}
	}
}

func TestFanOutUsesTheRuleInForceWhenTheEventWasRecorded(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	active, _ := relay.ParseFilter("status=active")
	canceled, _ := relay.ParseFilter("status=canceled")
	eps := []relay.Endpoint{
		{ID: 1, Created: t0, Rules: []relay.Rule{{Since: t0.Add(time.Hour), Filter: canceled}, {Since: t0, Filter: active}}},
		{ID: 2, Created: t0, Rules: []relay.Rule{{Since: t0, Types: []string{"booking.canceled.*"}}}},
		{ID: 3, Created: t0.Add(2 * time.Hour)},
	}
	calls := 0
	subject := func(status booking.Status) func() relay.Subject {
		return func() relay.Subject { calls++; return relay.Subject{Booking: true, Status: string(status)} }
	}
	ids := func(es []relay.Endpoint) (out []int64) {
		for _, e := range es {
			out = append(out, e.ID)
		}
		return out
	}
	cases := []struct {
		typ    string
		at     time.Duration
		status booking.Status
		want   []int64
	}{
		{"booking.scheduled.v1", 30 * time.Minute, booking.StatusActive, []int64{1}},
		{"booking.canceled.v1", 30 * time.Minute, booking.StatusCanceled, []int64{2}}, // before the change: active only
		{"booking.canceled.v1", 90 * time.Minute, booking.StatusCanceled, []int64{1, 2}},
		{"booking.scheduled.v1", 90 * time.Minute, booking.StatusActive, nil},
		{"booking.scheduled.v1", 3 * time.Hour, booking.StatusActive, []int64{3}},
		{"booking.scheduled.v1", -time.Minute, booking.StatusActive, nil}, // before every endpoint
	}
	for _, c := range cases {
		calls = 0
		got := ids(relay.FanOut(eps, relay.Event{Type: c.typ, RecordedAt: t0.Add(c.at)}, subject(c.status)))
		if !equal(got, c.want) {
			t.Errorf("%s at +%s (%s): %v, want %v", c.typ, c.at, c.status, got, c.want)
		}
		if calls > 1 {
			t.Errorf("%s at +%s: subject computed %d times, want at most once", c.typ, c.at, calls)
		}
	}
	if !relay.NeedsSubjects(eps) || relay.NeedsSubjects(eps[1:]) {
		t.Error("NeedsSubjects: want true with a filter, false without")
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestTypesAndOperationalSubscriptions(t *testing.T) {
	if _, err := relay.ParseTypes("booking.*, Booking"); !errors.Is(err, relay.ErrInvalidTypes) {
		t.Fatalf("ParseTypes: %v, want ErrInvalidTypes", err)
	}
	for _, c := range []struct {
		patterns []string
		typ      string
		ledger   bool // MatchTypes of a ledger event type
		op       bool // TakesOperational of the operational type
	}{
		{nil, "endpoint.failing", true, false},
		{[]string{"*"}, "endpoint.failing", true, false},
		{[]string{"operational.*"}, "endpoint.failing", false, true},
		{[]string{"operational.endpoint.*"}, "delivery.dead", false, false},
		{[]string{"booking.*", "operational.provider.*"}, "provider.missed_webhooks", true, true},
	} {
		if got := relay.MatchTypes(c.patterns, "booking.scheduled.v1"); got != c.ledger {
			t.Errorf("MatchTypes(%v, booking.scheduled.v1) = %v, want %v", c.patterns, got, c.ledger)
		}
		if got := relay.TakesOperational(c.patterns, c.typ); got != c.op {
			t.Errorf("TakesOperational(%v, %s) = %v, want %v", c.patterns, c.typ, got, c.op)
		}
	}
}
