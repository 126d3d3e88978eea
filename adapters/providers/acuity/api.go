package acuity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"bookingledger/adapters/providers"
)

// DefaultSyncMax is how many appointments one list request asks for (Acuity's own default).
const DefaultSyncMax = 100

// syncAction names the deliveries of the sync: "acuity:sync:<id>". It is not an Acuity action.
const syncAction = "sync"

// ErrSyncDayFull: one day holds at least as many appointments as one list request returns, and
// Acuity's list has no paging, so the sync cannot read that day completely.
var ErrSyncDayFull = errors.New("acuity sync: one day holds more appointments than one list request returns")

// SubscriptionEvents are the dynamic-webhook events Connect subscribes: the appointment actions the
// mapper fetches for.
func SubscriptionEvents() []string {
	return []string{
		DynamicPrefix + ActionScheduled, DynamicPrefix + ActionRescheduled,
		DynamicPrefix + ActionCanceled, DynamicPrefix + ActionChanged,
	}
}

// APIOptions tunes API beyond the provider's Config.
type APIOptions struct {
	// Max is the max= of each list request (DefaultSyncMax when 0).
	Max int
	// Sleep waits between retries (tests record the waits); nil waits for real.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now is the clock of the observations; nil means time.Now.
	Now func() time.Time
}

// API reads appointments by date (the provider sync) and manages dynamic webhooks through Acuity's
// API, with the user id and the newest API key of the provider's Config.
type API struct {
	api *providers.API
	max int
	now func() time.Time
}

// NewAPI returns the sync's client of Acuity's API: cfg is the provider's own (keys, user id, API
// URL, client).
func NewAPI(cfg Config, o APIOptions) (*API, error) {
	p, err := New(cfg)
	if err != nil {
		return nil, err
	}
	key, ok := p.keyByIndex(0)
	if !ok {
		return nil, errors.New("acuity API: no API key configured")
	}
	a := &API{max: o.Max, now: o.Now}
	if a.max <= 0 {
		a.max = DefaultSyncMax
	}
	if a.now == nil {
		a.now = time.Now
	}
	user := p.userID
	a.api = &providers.API{
		Provider: Name,
		Base:     p.apiURL,
		Auth:     func(r *http.Request) { r.SetBasicAuth(user, key) },
		Client:   cfg.Client,
		Sleep:    o.Sleep,
	}
	return a, nil
}

// Name returns "acuity".
func (a *API) Name() string { return Name }

// Sync lists the appointments, canceled ones too, whose start date is within the window, and maps
// each as the fetch path maps the appointment a webhook names, observed at the time of the list
// request. Acuity filters by date, not instant, in the account's time zone, so the days asked are
// widened by one on each side (the extra appointments are true states too). Acuity's list has no
// paging: an answer holding max appointments may have left some out, so that range is split in
// halves and each read; a single day that is still full fails with ErrSyncDayFull. Acuity has no
// resume point beyond the window: w.Cursor is not used, and pages carry none.
func (a *API) Sync(ctx context.Context, w providers.SyncWindow, page func(providers.SyncPage) error) error {
	if w.From.IsZero() || w.To.IsZero() || w.To.Before(w.From) {
		return errors.New("acuity sync: the window needs a From and a To after it")
	}
	first := w.From.UTC().Truncate(24*time.Hour).AddDate(0, 0, -1)
	last := w.To.UTC().Truncate(24*time.Hour).AddDate(0, 0, 1)
	return a.syncDays(ctx, first, last, page)
}

// syncDays reads the days first..last (inclusive), splitting a full answer.
func (a *API) syncDays(ctx context.Context, first, last time.Time, page func(providers.SyncPage) error) error {
	q := url.Values{
		"minDate": {first.Format(time.DateOnly)}, "maxDate": {last.Format(time.DateOnly)},
		"max": {strconv.Itoa(a.max)}, "showall": {"true"},
	}
	observedAt := a.now()
	var list []json.RawMessage
	if _, err := a.api.Do(ctx, http.MethodGet, "/appointments", q, nil, &list); err != nil {
		return fmt.Errorf("acuity sync %s..%s: %w", q.Get("minDate"), q.Get("maxDate"), err)
	}
	if len(list) >= a.max {
		days := int(last.Sub(first).Hours()/24) + 1
		if days == 1 {
			return fmt.Errorf("%w: %s has %d or more (max=%d)", ErrSyncDayFull, q.Get("minDate"), len(list), a.max)
		}
		mid := first.AddDate(0, 0, days/2-1)
		if err := a.syncDays(ctx, first, mid, page); err != nil {
			return err
		}
		return a.syncDays(ctx, mid.AddDate(0, 0, 1), last, page)
	}
	p := providers.SyncPage{Items: make([]providers.SyncItem, len(list))}
	for i, raw := range list {
		p.Items[i] = syncItem(raw, observedAt)
	}
	return page(p)
}

// syncItem maps one listed appointment as the fetch path maps it: Ref "appointment <id>", Body the
// appointment as listed.
func syncItem(raw json.RawMessage, observedAt time.Time) providers.SyncItem {
	item := providers.SyncItem{Ref: "appointment without id", Body: raw}
	var head struct {
		ID *idValue `json:"id"`
	}
	if json.Unmarshal(raw, &head) == nil && head.ID != nil {
		if id, err := CanonicalID("id", string(*head.ID)); err == nil {
			item.Ref = "appointment " + id
		}
	}
	a, err := ParseAppointment(raw)
	if err != nil {
		item.Err = fmt.Errorf("%w: acuity %s: %w", providers.ErrUnmappable, item.Ref, err)
		return item
	}
	n := Notification{RawAction: syncAction, Action: ActionChanged, ID: a.ID}
	m, err := MapAppointment(n, a, observedAt)
	if err != nil {
		item.Err = fmt.Errorf("%w: acuity %s: %w", providers.ErrUnmappable, item.Ref, err)
		return item
	}
	item.Mapped = m
	return item
}
