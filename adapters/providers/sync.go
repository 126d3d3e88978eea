package providers

import (
	"crypto/rand"
	"encoding/hex"
	"time"
)

// What a provider package gives the provider sync (adapters/providersync) and subscription management.
// The interfaces that use these types are declared there; a provider package implements them with
// its own API client (API) and its own mapping, so that an object read from the API maps to the same
// events, with the same event IDs, as the webhook that announced it.

// SyncWindow is what one sync run reads.
type SyncWindow struct {
	// From and To bound the objects read; each provider says which of their times it filters on
	// (Calendly: start time; Cal.com: start time, or updatedAt when Updated is set; Stripe: created).
	From, To time.Time
	// Cursor is where an earlier periodic run of this provider stopped ("" = from From): opaque to the
	// caller, which keeps it per provider and passes it back.
	Cursor string
}

// SyncItem is one object read through a provider's API and mapped as its webhook would be.
type SyncItem struct {
	// Ref names the object for receipts and operators (an invitee URI, a booking uid, an event id): a
	// stable identity of what was read, never personal data.
	Ref string
	// Body is the object as the API returned it (JSON): kept, sealed, as the sync receipt's body.
	Body []byte
	// Mapped holds the events the object stands for, with the event IDs its webhooks carry, and its
	// contacts. A Mapped without events is an object the ledger does not map (Reason says why).
	Mapped Mapped
	// Err, when set, is why the object could not be mapped (it wraps ErrUnmappable): the sync keeps
	// the object as a quarantined receipt, as the ingress does with a body that will not map.
	Err error
}

// SyncPage is one page of a provider's answer, mapped.
type SyncPage struct {
	Items []SyncItem
	// Cursor is where a later run may resume after this page ("" when the provider has no resume
	// point beyond the window).
	Cursor string
}

// Subscription is one webhook subscription at a provider, as its API lists it.
type Subscription struct {
	ID     string   `json:"id"`
	URL    string   `json:"url"`
	Events []string `json:"events"`
	// State is "active" or "disabled" (Calendly "disabled", Cal.com active=false, Stripe
	// status=disabled); Detail keeps the provider's own words where they say more.
	State  string `json:"state"`
	Detail string `json:"detail,omitempty"`
}

// Subscription states.
const (
	SubscriptionActive   = "active"
	SubscriptionDisabled = "disabled"
)

// Connect actions: what Connect did to make the subscription for a URL active.
const (
	ConnectUnchanged = "unchanged" // an active subscription with the events we map was there
	ConnectCreated   = "created"   // none was there: created
	ConnectRecreated = "recreated" // a disabled one that cannot be re-enabled (Calendly): deleted and created
	ConnectEnabled   = "enabled"   // a disabled one re-enabled in place (Cal.com, Stripe)
	ConnectUpdated   = "updated"   // an active one missing some of our events: its events updated
)

// ConnectResult is what Connect did.
type ConnectResult struct {
	Subscription Subscription
	Action       string
	// Secret is the signing secret of a subscription Connect created, when it differs from what the
	// provider verified with before: the candidate Connect was given (Calendly, Cal.com choose theirs
	// from the client), the one the provider generated (Stripe), or "" (Acuity signs with the API
	// key; an unchanged or re-enabled subscription keeps its secret). It must be stored, sealed, and
	// never printed.
	Secret string `json:"-"`
}

// NewSigningSecret returns 32 random bytes as hex: the secret Connect offers a provider that lets the
// client choose it.
func NewSigningSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}
