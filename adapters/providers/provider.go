package providers

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
	// Zone's names load whatever the host's zone files: the zone database is built in.
	_ "time/tzdata"

	"bookingledger/domain/booking"
	"bookingledger/domain/ledger"
)

// Verification failures. The ingress answers 401 with the reason; each is counted and (rate-limited)
// receipted, never appended.
var (
	ErrNoSecret        = errors.New("no secret configured for this provider")
	ErrMissingHeader   = errors.New("missing signature header")
	ErrMalformedHeader = errors.New("malformed signature header")
	ErrBadSignature    = errors.New("signature does not match")
	ErrStale           = errors.New("timestamp outside tolerance")
)

// ErrUnmappable marks a Map error as a property of the verified body itself (malformed JSON, missing
// or invalid fields): retrying cannot help, so the ingress acks and quarantines it. A Map error that
// does not wrap it (a provider that must fetch data over the network, a canceled context) is
// transient: answer 5xx so the provider retries.
var ErrUnmappable = errors.New("verified body cannot be mapped")

// ErrDeferred marks a Map error where the verified body is sound but data the mapping needs could not
// be obtained now: a provider whose webhooks carry no data (Acuity) failed to fetch it from the
// provider's API. Mapping without that data is never an option, and letting the provider retry is a
// bet on retry behaviour some providers do not document, so the ingress keeps the delivery durably
// instead (a deferred receipt and a background job in one transaction) and finishes it later. Map may
// return Mapped.DeliveryID alongside it. It must never wrap ErrUnmappable as well.
var ErrDeferred = errors.New("mapping deferred: data the body refers to could not be fetched")

// Verified is what a successful verification learned.
type Verified struct {
	// SecretIndex is the position of the matching secret in the configured list (0 = newest).
	SecretIndex int
	// SignedAt is the signed timestamp, zero when the scheme signs none (Cal.com, Acuity).
	SignedAt time.Time
}

// Mapped is a verified body turned into domain events.
type Mapped struct {
	// DeliveryID is the provider's identity of the delivery: stable across retries of one delivery.
	DeliveryID string
	// Booking is the booking the delivery is about when that is known without its events: set with
	// ErrDeferred (Acuity: the appointment id of the body), so that the deferred receipt shows in the
	// booking's history while it waits.
	Booking booking.ID
	// Events are the booking events the delivery carries; none means an event type we do not map
	// (acked and ignored). Reason then says which type.
	Events []booking.Event
	Reason string
	// Contacts are the invitees' addresses the body names, for the invitee email steps. Personal
	// data: kept in the erasable contacts table, never in events.
	Contacts []Contact
}

// Contact is an invitee's email address and name, by booking: what the ledger saves with the
// delivery's events (ledger.Delivery.Contacts).
type Contact = ledger.Contact

// NewContacts returns the one contact of b when email looks like an address (a body without one has
// none: not an error, the booking is recorded anyway). Values are trimmed and bounded, and hold no
// control character and no invalid UTF-8: contacts are saved in the commit that appends the events,
// to PostgreSQL text, which refuses NUL (a JSON "\u0000") and invalid UTF-8. One such character
// would fail every retry of a correctly signed delivery with a 503, and the provider would retry it
// for days: a 503 must mean that a retry can succeed.
func NewContacts(b booking.ID, email, name string) []Contact {
	email, name = strings.TrimSpace(email), strings.TrimSpace(name)
	if email == "" || len(email) > 254 || !strings.Contains(email, "@") || strings.ContainsAny(email, " <>") || !plainText(email) {
		return nil
	}
	if len(name) > 200 || !plainText(name) {
		name = ""
	}
	return []Contact{{Booking: b, Email: email, Name: name}}
}

// InZone returns cs, each contact's TimeZone set to zone when zone is an IANA time zone name (Zone);
// else cs as it is: a body without a usable zone is no error, the emails fall back to the resource's
// zone, then UTC.
func InZone(cs []Contact, zone string) []Contact {
	zone = Zone(zone)
	if zone == "" {
		return cs
	}
	for i := range cs {
		cs[i].TimeZone = zone
	}
	return cs
}

// Zone returns name, trimmed, when it is an IANA time zone name that time.LoadLocation loads (not
// "Local", at most 64 bytes), else "".
func Zone(name string) string {
	name = strings.TrimSpace(name)
	if name == "" || name == "Local" || len(name) > 64 || !plainText(name) || strings.Contains(name, " ") {
		return ""
	}
	if _, ok := loadableZones.Load(name); ok {
		return name
	}
	if _, err := time.LoadLocation(name); err != nil {
		return ""
	}
	loadableZones.Store(name, struct{}{})
	return name
}

// loadableZones holds the names Zone found loadable. time.LoadLocation reads and parses the zone's
// file on every call (about 4 % of serve's CPU under load when each delivery names its invitee's
// zone); the answer for a name does not change while the process runs. Only names that loaded are
// kept, so the map is bounded by the time zone database, whatever senders write.
var loadableZones sync.Map

// plainText reports whether s is valid UTF-8 without control characters (CR, LF and NUL among them).
func plainText(s string) bool {
	return utf8.ValidString(s) && strings.IndexFunc(s, unicode.IsControl) < 0
}

// Provider is one webhook source. Verify must run before Map, over the exact request bytes.
type Provider interface {
	Name() string
	Verify(h http.Header, body []byte, now time.Time) (Verified, error)
	// Map turns a verified body into events. An error wrapping ErrUnmappable means the body will
	// never map (malformed, missing fields): the delivery is acked and quarantined, never retried
	// forever. ErrDeferred means its data could not be fetched yet: the delivery is kept for the job
	// queue to finish (503 when the server has no deferrer). Any other error is transient: 503, and
	// the provider retries.
	Map(ctx context.Context, h http.Header, body []byte, receivedAt time.Time) (Mapped, error)
}
