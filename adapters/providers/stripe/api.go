package stripe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"bookingledger/adapters/providers"
)

// DefaultAPIURL is Stripe's API base.
const DefaultAPIURL = "https://api.stripe.com"

// EventRetention is how far back Stripe's event list reaches: the sync cannot read older events.
const EventRetention = 30 * 24 * time.Hour

// pageLimit is the largest page Stripe's lists give.
const pageLimit = "100"

// APIConfig configures API.
type APIConfig struct {
	// Key is the secret (or restricted) key: it needs read access to events and write access to
	// webhook endpoints.
	Key string
	// URL is the API base without a trailing slash (DefaultAPIURL when empty); tests point it at
	// stripeapi.
	URL string
	// Client makes the requests; nil means providers.API's own (timeout, no redirects).
	Client *http.Client
	// Sleep waits between retries (tests record the waits); nil waits for real.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now is the clock of the 30-day clamp; nil means time.Now.
	Now func() time.Time
}

// API reads Stripe's event history (the provider sync) and manages its webhook endpoints, through
// providers.API. A Stripe event read from GET /v1/events is the very object a webhook delivers, so
// it is mapped by the webhook mapper and carries the webhook's event IDs by construction.
type API struct {
	api *providers.API
	now func() time.Time
}

// NewAPI returns a client of Stripe's API authenticating with cfg.Key (basic auth, the key as user).
func NewAPI(cfg APIConfig) *API {
	base := strings.TrimRight(cfg.URL, "/")
	if base == "" {
		base = DefaultAPIURL
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	key := cfg.Key
	return &API{now: now, api: &providers.API{
		Provider: Name,
		Base:     base,
		Auth:     func(r *http.Request) { r.SetBasicAuth(key, "") },
		Client:   cfg.Client,
		Sleep:    cfg.Sleep,
	}}
}

// Name returns "stripe".
func (a *API) Name() string { return Name }

// eventList is a page of GET /v1/events; each event is kept as the raw JSON Stripe sent.
type eventList struct {
	HasMore bool              `json:"has_more"`
	Data    []json.RawMessage `json:"data"`
}

// Sync reads the events of the mapped types created in the window, newest first, 100 a page, and
// maps each with the webhook mapper.
//
// The window: created[gte] is w.Cursor (Unix seconds, from an earlier run) or else w.From, raised to
// 30 days ago (Stripe keeps no older events); created[lte] is w.To when set. Every page but the last
// carries the cursor the run started from, because Stripe lists newest first and a run cut short
// has not read the older rest; the last page carries the newest created seen. Resuming with gte
// re-reads that second's events: duplicates, which the ledger skips.
func (a *API) Sync(ctx context.Context, w providers.SyncWindow, page func(providers.SyncPage) error) error {
	from := w.From
	if w.Cursor != "" {
		sec, err := strconv.ParseInt(w.Cursor, 10, 64)
		if err != nil {
			return fmt.Errorf("stripe sync: cursor %q is not Unix seconds", providers.Clip(w.Cursor))
		}
		from = time.Unix(sec, 0)
	}
	if oldest := a.now().Add(-EventRetention); from.Before(oldest) {
		from = oldest
	}
	if !w.To.IsZero() && w.To.Before(from) {
		return nil
	}
	q := url.Values{"created[gte]": {strconv.FormatInt(from.Unix(), 10)}, "types[]": Types(), "limit": {pageLimit}}
	if !w.To.IsZero() {
		q.Set("created[lte]", strconv.FormatInt(w.To.Unix(), 10))
	}
	newest := int64(0)
	for {
		var list eventList
		if _, err := a.api.Do(ctx, http.MethodGet, "/v1/events", q, nil, &list); err != nil {
			return fmt.Errorf("stripe sync: %w", err)
		}
		p := providers.SyncPage{Items: make([]providers.SyncItem, 0, len(list.Data)), Cursor: w.Cursor}
		last := ""
		for _, raw := range list.Data {
			item, id, created := syncItem(raw)
			p.Items = append(p.Items, item)
			newest = max(newest, created)
			if id != "" {
				last = id
			}
		}
		more := list.HasMore && last != ""
		if !more && newest > 0 {
			p.Cursor = strconv.FormatInt(newest, 10)
		}
		if err := page(p); err != nil {
			return err
		}
		if !more {
			return nil
		}
		q.Set("starting_after", last)
	}
}

// syncItem maps one listed event as its webhook: Ref is the event id, Body the event.
func syncItem(raw json.RawMessage) (providers.SyncItem, string, int64) {
	var head struct {
		ID      string `json:"id"`
		Created int64  `json:"created"`
	}
	_ = json.Unmarshal(raw, &head) // a broken event is reported by the mapper below
	item := providers.SyncItem{Ref: head.ID, Body: raw}
	if head.ID == "" {
		item.Ref = "event without id"
	}
	m, err := mapBody(raw)
	switch {
	case err != nil && errors.Is(err, providers.ErrUnmappable):
		item.Err = fmt.Errorf("stripe %s: %w", item.Ref, err)
	case err != nil:
		item.Err = fmt.Errorf("%w: stripe %s: %w", providers.ErrUnmappable, item.Ref, err)
	default:
		item.Mapped = m
	}
	return item, head.ID, head.Created
}
