package acuity

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"bookingledger/adapters/providers"
)

const (
	// Name is the provider name: the path segment of POST /webhooks/acuity and Event.Provider.
	Name = "acuity"
	// SignatureHeader carries base64(HMAC-SHA256(API key, raw body)).
	SignatureHeader = "X-Acuity-Signature"
	// DefaultAPIURL is Acuity's API base; appointments are fetched from <base>/appointments/<id>.
	DefaultAPIURL = "https://acuityscheduling.com/api/v1"
)

// Defaults of Config. The in-request fetch must leave the ingress time to commit the deferred receipt
// within its record timeout (10 s by default), so its whole budget stays well below that.
const (
	DefaultAttempts       = 3
	DefaultAttemptTimeout = 3 * time.Second
	DefaultBudget         = 6 * time.Second
	DefaultBackoff        = 200 * time.Millisecond
)

// ErrNoUserID: API keys are configured but no user id, so no appointment could ever be fetched.
var ErrNoUserID = errors.New("acuity API keys configured without a user id")

// Config configures a Provider.
type Config struct {
	// Keys are the API keys, newest first: they both verify signatures and authenticate fetches. With
	// none, every request fails verification with ErrNoSecret.
	Keys providers.Secrets
	// UserID is the Acuity user id of the basic-auth credentials; required when Keys is not empty.
	UserID string
	// APIURL is the API base (DefaultAPIURL when empty); tests point it at a fake.
	APIURL string
	// Client makes the fetches; nil means a client of this package's own. Per-attempt timeouts come
	// from contexts, so a client-level Timeout is not needed.
	Client *http.Client
	// Attempts, AttemptTimeout, Budget and Backoff bound the fetch Map makes inside the request: at most
	// Attempts tries, each bounded by AttemptTimeout, all of them (with the doubling backoff between
	// them) by Budget. Zero values mean the defaults above. Refetch tries once: its caller (the job
	// queue) owns the retries.
	Attempts       int
	AttemptTimeout time.Duration
	Budget         time.Duration
	Backoff        time.Duration
	// ReuseWindow is how long the fetch of a body answers identical replays of it (by receipt time);
	// zero means DefaultReuseWindow, negative turns reuse off. See fetchReuse.
	ReuseWindow time.Duration
}

// Provider verifies, fetches and maps Acuity deliveries. Safe for concurrent use; its only mutable
// state is the short-lived reuse of fetches (fetchReuse).
type Provider struct {
	keys           providers.Secrets
	userID         string
	apiURL         string
	client         *http.Client
	attempts       int
	attemptTimeout time.Duration
	budget         time.Duration
	backoff        time.Duration
	reuse          *fetchReuse
}

var _ providers.Provider = (*Provider)(nil)

// New returns a provider. There is no tolerance: Acuity signs no timestamp, so a replayed body
// verifies — and maps to the same event IDs as long as the appointment has not changed since.
func New(cfg Config) (*Provider, error) {
	p := &Provider{
		keys:           cfg.Keys,
		userID:         strings.TrimSpace(cfg.UserID),
		apiURL:         strings.TrimRight(strings.TrimSpace(cfg.APIURL), "/"),
		client:         cfg.Client,
		attempts:       cfg.Attempts,
		attemptTimeout: cfg.AttemptTimeout,
		budget:         cfg.Budget,
		backoff:        cfg.Backoff,
	}
	if p.apiURL == "" {
		p.apiURL = DefaultAPIURL
	}
	u, err := url.Parse(p.apiURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		// The value is not echoed: a mistyped URL may carry credentials.
		return nil, errors.New("acuity API URL must be an absolute http(s) URL without credentials, query or fragment")
	}
	if !p.keys.Empty() && p.userID == "" {
		return nil, ErrNoUserID
	}
	if p.client == nil {
		p.client = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	if p.attempts <= 0 {
		p.attempts = DefaultAttempts
	}
	if p.attemptTimeout <= 0 {
		p.attemptTimeout = DefaultAttemptTimeout
	}
	if p.budget <= 0 {
		p.budget = DefaultBudget
	}
	if p.backoff <= 0 {
		p.backoff = DefaultBackoff
	}
	window := cfg.ReuseWindow
	if window == 0 {
		window = DefaultReuseWindow
	}
	p.reuse = newFetchReuse(window)
	return p, nil
}

// Name returns "acuity".
func (p *Provider) Name() string { return Name }

// Verify checks X-Acuity-Signature against every API key in constant time. SignedAt stays zero:
// nothing signed says when.
func (p *Provider) Verify(h http.Header, body []byte, _ time.Time) (providers.Verified, error) {
	if p.keys.Empty() {
		return providers.Verified{}, providers.ErrNoSecret
	}
	sig, err := ParseSignature(h.Get(SignatureHeader))
	if err != nil {
		return providers.Verified{}, err
	}
	match := p.match(sig, body)
	if match < 0 {
		return providers.Verified{}, fmt.Errorf("%w: %s matches none of %d API keys", providers.ErrBadSignature, SignatureHeader, p.keys.Len())
	}
	return providers.VerifiedBy(p.keys, match, time.Time{}), nil
}

// match returns the index of the first key whose HMAC of body is sig, or -1. Every key is tried, so the
// time taken says nothing about which one matched.
func (p *Provider) match(sig, body []byte) int {
	match := -1
	for i, k := range p.keys.All() {
		if providers.MatchAny(providers.HMACSHA256([]byte(k), body), [][]byte{sig}) && match < 0 {
			match = i
		}
	}
	return match
}

// ParseSignature decodes an X-Acuity-Signature value: standard base64 of 32 bytes.
func ParseSignature(v string) ([]byte, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil, fmt.Errorf("%w: %s", providers.ErrMissingHeader, SignatureHeader)
	}
	sig, err := providers.DecodeBase64SHA256(v)
	if err != nil {
		return nil, err
	}
	return sig, nil
}

// Sign returns the X-Acuity-Signature value for body, as Acuity computes it: for the send command and
// tests.
func Sign(key string, body []byte) string {
	return base64.StdEncoding.EncodeToString(providers.HMACSHA256([]byte(key), body))
}

// Map parses the body, fetches the appointment with the API key that verified the request (retrying
// within the configured budget) and maps the fetched state at receivedAt; see MapAppointment.
//
// A fetch that fails, or answers with an unusable appointment, returns an error wrapping
// providers.ErrDeferred, together with the delivery ID: the body is sound, the data is not available
// now. Errors of the body itself wrap providers.ErrUnmappable.
func (p *Provider) Map(ctx context.Context, h http.Header, body []byte, receivedAt time.Time) (providers.Mapped, error) {
	n, err := ParseNotification(body)
	if err != nil {
		return providers.Mapped{}, err
	}
	if !n.Fetches() {
		return MapAppointment(n, Appointment{}, receivedAt)
	}
	ki, key, err := p.verifyingKey(h, body)
	if err != nil {
		return providers.Mapped{}, err
	}
	attempts := 0
	a, observedAt, err := p.reuse.fetch(ctx, body, ki, receivedAt, func() (Appointment, error) {
		a, tries, err := p.fetchWithRetries(ctx, n.ID, key)
		attempts = tries
		return a, err
	})
	if err != nil {
		return providers.Mapped{DeliveryID: n.DeliveryID(), Booking: BookingID(n.ID)}, fmt.Errorf("%w: appointment %s after %d attempt(s): %w", providers.ErrDeferred, n.ID, attempts, err)
	}
	// A reused fetch observed the state when it was made.
	return p.mapFetched(n, a, observedAt)
}

// Refetch maps a delivery that was deferred: it parses the stored body again, fetches once with the
// API key at secretIndex in the configured list — the one that verified the delivery unless the keys
// were rotated since (the newest key when the index is out of range) and maps the state at observedAt. Errors wrap providers.ErrUnmappable (the body) or
// providers.ErrDeferred (the fetch) as in Map; the caller retries the latter.
func (p *Provider) Refetch(ctx context.Context, body []byte, secretIndex int, observedAt time.Time) (providers.Mapped, error) {
	n, err := ParseNotification(body)
	if err != nil {
		return providers.Mapped{}, err
	}
	if !n.Fetches() {
		return MapAppointment(n, Appointment{}, observedAt)
	}
	key, ok := p.keyByIndex(secretIndex)
	if !ok {
		return providers.Mapped{DeliveryID: n.DeliveryID(), Booking: BookingID(n.ID)}, fmt.Errorf("%w: no Acuity API key configured", providers.ErrDeferred)
	}
	a, _, err := p.fetchOnce(ctx, n.ID, key)
	if err != nil {
		return providers.Mapped{DeliveryID: n.DeliveryID(), Booking: BookingID(n.ID)}, fmt.Errorf("%w: appointment %s: %w", providers.ErrDeferred, n.ID, err)
	}
	return p.mapFetched(n, a, observedAt)
}

func (p *Provider) mapFetched(n Notification, a Appointment, observedAt time.Time) (providers.Mapped, error) {
	m, err := MapAppointment(n, a, observedAt)
	if err != nil {
		return providers.Mapped{DeliveryID: n.DeliveryID(), Booking: BookingID(n.ID)}, fmt.Errorf("%w: %w", providers.ErrDeferred, err)
	}
	return m, nil
}

// verifyingKey finds the key that verifies the request again. Verify found it a moment ago, but the
// Provider interface passes nothing from Verify to Map, and one HMAC per key is cheap.
func (p *Provider) verifyingKey(h http.Header, body []byte) (int, string, error) {
	sig, err := ParseSignature(h.Get(SignatureHeader))
	if err == nil {
		if i := p.match(sig, body); i >= 0 {
			for j, k := range p.keys.All() {
				if j == i {
					return i, k, nil
				}
			}
		}
	}
	// Not ErrUnmappable: the ingress verifies before it maps, so this is a caller's bug, never the body's.
	return 0, "", errors.New("acuity map called on a request no API key verifies")
}

func (p *Provider) keyByIndex(i int) (string, bool) {
	newest, found := "", false
	for j, k := range p.keys.All() {
		if !found {
			newest, found = k, true
		}
		if j == i {
			return k, true
		}
	}
	return newest, found
}
