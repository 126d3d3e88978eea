package sample

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// ErrUnknown: the provider or event has no sample.
var ErrUnknown = errors.New("no sample for this provider and event")

// Defaults of Params. The start is fixed, not "tomorrow", so that bodies do not change with the date.
const (
	DefaultBooking  = "demo-booking-1"
	DefaultHost     = "demo-host"
	DefaultDuration = 30 * time.Minute
)

// DefaultStart is the default meeting start: 2030-01-07T09:00:00Z.
func DefaultStart() time.Time { return time.Date(2030, time.January, 7, 9, 0, 0, 0, time.UTC) }

// Params are the variable parts of a sample. Zero fields take the defaults above.
type Params struct {
	// Booking is the provider's key of the booking: the Calendly invitee id, the Cal.com uid, the
	// Standard Webhooks booking id, or for Stripe the bookingledger booking ID it pays for (e.g.
	// "calendly-demo-booking-1"; a bare key gets the "calendly-" prefix).
	Booking string
	Start   time.Time
	End     time.Time
	// Host is the host's user key at the provider (the calendar resource).
	Host string
	// TimeZone is the invitee's IANA time zone, where the provider's payload has one (Calendly's
	// invitee timezone, Cal.com's attendee timeZone); "Europe/London" when empty.
	TimeZone string

	// Set by CalendlyReschedule: the invitee URIs a reschedule links, and when it happened.
	oldInvitee, newInvitee string
	rescheduledAt          time.Time
}

func (p Params) withDefaults() Params {
	if p.Booking == "" {
		p.Booking = DefaultBooking
	}
	if p.Host == "" {
		p.Host = DefaultHost
	}
	if p.TimeZone == "" {
		p.TimeZone = "Europe/London"
	}
	if p.Start.IsZero() {
		p.Start = DefaultStart()
	}
	p.Start = p.Start.UTC()
	if p.End.IsZero() {
		p.End = p.Start.Add(DefaultDuration)
	}
	p.End = p.End.UTC()
	return p
}

// Validate checks what every provider's payload needs.
func (p Params) Validate() error {
	p = p.withDefaults()
	if strings.ContainsAny(p.Booking, " \t\r\n/?#") {
		return fmt.Errorf("booking %q: no spaces, slashes, ? or #", p.Booking)
	}
	if strings.ContainsAny(p.Host, " \t\r\n/?#") {
		return fmt.Errorf("host %q: no spaces, slashes, ? or #", p.Host)
	}
	if !p.End.After(p.Start) {
		return fmt.Errorf("end %s is not after start %s", p.End.Format(time.RFC3339), p.Start.Format(time.RFC3339))
	}
	return nil
}

// Delivery is one request to post to /webhooks/{Provider}.
type Delivery struct {
	Provider string
	Event    string
	Body     []byte
	Header   http.Header
}

// kind is one provider's samples.
type kind struct {
	events []string
	body   func(event string, p Params) (any, error)
	// sign returns the signature headers of body signed with secret at now.
	sign func(secret string, body []byte, now time.Time) (http.Header, error)
	// contentType of the body; "" means application/json.
	contentType string
}

func kinds() map[string]kind {
	return map[string]kind{
		"acuity":   acuityKind(),
		"calendly": calendlyKind(),
		"calcom":   calcomKind(),
		"stripe":   stripeKind(),
		"standard": standardKind(),
	}
}

// Providers lists the providers with samples, sorted.
func Providers() []string {
	out := make([]string, 0)
	for name := range kinds() {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// Events lists a provider's sample events.
func Events(provider string) []string {
	return slices.Clone(kinds()[provider].events)
}

// Body builds the body of a sample delivery.
func Body(provider, event string, p Params) ([]byte, error) {
	k, ok := kinds()[provider]
	if !ok {
		return nil, fmt.Errorf("%w: provider %q (have %s)", ErrUnknown, provider, strings.Join(Providers(), ", "))
	}
	if !slices.Contains(k.events, event) {
		return nil, fmt.Errorf("%w: %s event %q (have %s)", ErrUnknown, provider, event, strings.Join(k.events, ", "))
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	b, err := encode(k.body(event, p.withDefaults()))
	if err != nil {
		return nil, fmt.Errorf("%s %s sample: %w", provider, event, err)
	}
	return b, nil
}

// encode returns a body builder's bytes: raw bytes as they are (Acuity's form), anything else as JSON
// (maps marshal with sorted keys: deterministic).
func encode(v any, err error) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	if raw, ok := v.([]byte); ok {
		return raw, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	return b, nil
}

// Sign returns the headers that sign body for provider with secret at now, as the provider would.
func Sign(provider, secret string, body []byte, now time.Time) (http.Header, error) {
	k, ok := kinds()[provider]
	if !ok {
		return nil, fmt.Errorf("%w: provider %q (have %s)", ErrUnknown, provider, strings.Join(Providers(), ", "))
	}
	h, err := k.sign(secret, body, now)
	if err != nil {
		return nil, fmt.Errorf("sign %s delivery: %w", provider, err)
	}
	ct := k.contentType
	if ct == "" {
		ct = "application/json"
	}
	h.Set("Content-Type", ct)
	h.Set("User-Agent", "bookingledger-send")
	return h, nil
}

// Build is Body then Sign.
func Build(provider, event, secret string, p Params, now time.Time) (Delivery, error) {
	body, err := Body(provider, event, p)
	if err != nil {
		return Delivery{}, err
	}
	h, err := Sign(provider, secret, body, now)
	if err != nil {
		return Delivery{}, err
	}
	return Delivery{Provider: provider, Event: event, Body: body, Header: h}, nil
}

// token derives a stable provider-style identifier (16 upper-case hex digits) from parts.
func token(parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return strings.ToUpper(hex.EncodeToString(sum[:8]))
}

// Time layouts the providers use.
const (
	micros = "2006-01-02T15:04:05.000000Z"
	millis = "2006-01-02T15:04:05.000Z"
)
